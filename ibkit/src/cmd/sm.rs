//! `ibkit sm --transport umad`: ibkit's subnet manager on a real MAD stack
//! ([`smd`]: `smi::sm` over a umad port of a CA). On real hardware that is
//! a real subnet; under ibsim it is the simulated fabric, with the
//! `libumad2sim.so` preload, exactly as OpenSM is tested.

use super::args::parse_engine;
use smi::sm::Engine;

/// Options of `ibkit sm`.
#[derive(Clone, Debug, clap::Args)]
pub struct SmArgs {
    /// Only umad is available.
    #[arg(long, default_value = "umad")]
    pub transport: String,
    /// CA name (default: the first).
    #[arg(long)]
    pub ca: Option<String>,
    /// Port number (0: the first active).
    #[arg(long, default_value_t = 0)]
    pub port: u8,
    /// Stop once the subnet is up.
    #[arg(long)]
    pub once: bool,
    /// Routing engine: minhop, updn or ftree.
    #[arg(long, default_value = "minhop", value_parser = parse_engine)]
    pub routing: Engine,
    /// Milliseconds between light sweeps (without --once).
    #[arg(long, default_value_t = 10_000)]
    pub sweep_ms: u64,
    /// One JSON object at the end.
    #[arg(long)]
    pub json: bool,
    /// Log every SMP sent and received and every phase (the log's debug level; RUST_LOG chooses others).
    #[arg(long)]
    pub verbose: bool,
}

/// Runs `ibkit sm`.
pub fn run(a: &SmArgs) -> super::Outcome {
    // With --json, stderr stays quiet unless RUST_LOG asks.
    super::args::init_logging(if a.verbose {
        "debug"
    } else if a.json {
        "warn"
    } else {
        "info"
    });
    if a.transport != "umad" {
        return Err(format!("unknown transport {:?}: umad", a.transport).into());
    }
    // SIGTERM and SIGINT end a running SM cleanly: it stops at its next
    // turn and reports what it did.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    let r = smd::run(
        &smd::UmadConfig {
            ca: a.ca.clone(),
            port: a.port,
            once: a.once,
            routing: a.routing,
            sweep_ms: a.sweep_ms,
            ..smd::UmadConfig::default()
        },
        &stop,
    )?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "subnet up: {} nodes ({} switches), LIDs 1..={}, {} SMPs ({} retransmitted), {:.1} ms",
            r.nodes, r.switches, r.lids, r.smps, r.retries, r.up_ms
        );
    }
    super::check(r.up, || {
        format!(
            "the subnet did not come up: {} nodes found, {} SMPs sent",
            r.nodes, r.smps
        )
    })
}
