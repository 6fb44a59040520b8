//! `ibkit fabric serve` and `ibkit fabric ctl`: the command-line side of
//! [`fabric::serve`], which holds the server.

use super::args::{parse_loss, parse_vfs};
use fabric::ibsim;
use fabric::serve::ServeConfig;
use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use std::time::Duration;

/// What `ibkit fabric serve` is asked to serve.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// mport-ntree:M:N, fat-tree-324|648|5832|11664, random:SWITCHES:SEED, mesh:X:Y(:HOSTS), torus:X:Y(:HOSTS), mixed-rates, file:PATH.
    #[arg(long, default_value = "fat-tree-324")]
    pub topology: String,
    /// VFs per hypervisor: every CA but the first becomes a vSwitch hypervisor.
    #[arg(long, default_value_t = 0, value_parser = parse_vfs)]
    pub vfs: usize,
    /// Socket base name (ibsim's IBSIM_SOCKNAME).
    #[arg(long, default_value = "sim")]
    pub socket: String,
    /// Nanoseconds for an SMP to cross one cable (k).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub hop_ns: u64,
    /// Extra nanoseconds per directed-route hop (r).
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub dr_hop_ns: u64,
    /// Probability that an SMP is lost on a cable.
    #[arg(long, default_value_t = 0.0, value_parser = parse_loss)]
    pub loss: f64,
    /// Log every SMP a client sends (the log's debug level; RUST_LOG chooses others).
    #[arg(long)]
    pub verbose: bool,
    /// Spin this many µs more on each batch of answers, as a slower simulator would: how much does the client's time depend on the simulator's? (at most 1 s)
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub answer_delay_us: u64,
    /// A user (uid) besides the server's own and root that may attach clients and send control commands (repeatable).
    #[arg(long = "allow-uid")]
    pub allow_uids: Vec<u32>,
}

/// What `ibkit fabric ctl` sends.
#[derive(Clone, Debug, clap::Args)]
pub struct CtlArgs {
    /// Socket base name of the server.
    #[arg(long, default_value = "sim")]
    pub socket: String,
    /// The command and its arguments.
    #[arg(required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// Serves `a.topology` until killed.
pub fn serve(a: &ServeArgs) -> super::Outcome {
    super::args::init_logging(if a.verbose { "debug" } else { "info" });
    let topo = Topology::from_spec(&a.topology)?;
    let cfg = SimConfig {
        hop_ns: a.hop_ns,
        dr_hop_ns: a.dr_hop_ns,
        loss: a.loss,
        vfs: a.vfs,
        ..Default::default()
    };
    let fabric = Fabric::new(topo, cfg)?;
    tracing::info!(
        "{} ({} switches, {} CAs) on @{} — attach with LD_PRELOAD=libumad2sim.so IBSIM_SOCKNAME={} [SIM_HOST=node]",
        a.topology,
        fabric.topo.switches(),
        fabric.topo.cas(),
        ibsim::ctl_name(&a.socket),
        a.socket
    );
    let cfg = ServeConfig {
        socket: a.socket.clone(),
        answer_delay: Duration::from_micros(a.answer_delay_us),
        allow_uids: a.allow_uids.clone(),
    };
    Ok(fabric::serve::serve(fabric, &cfg)?)
}

/// Sends `a.command` to a serving fabric and prints its answer.
pub fn ctl(a: &CtlArgs) -> super::Outcome {
    let answer = fabric::serve::ctl(&a.socket, &a.command.join(" "))?;
    println!("{answer}");
    Ok(())
}
