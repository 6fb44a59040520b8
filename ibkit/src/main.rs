//! `ibkit`: the command-line tool of the ibkit InfiniBand toolkit. Each
//! command's options and work live in its module under `ibkit::cmd`.

use clap::{Parser, Subcommand};
use ibkit::cmd;
use std::process::ExitCode;

/// InfiniBand subnet management and virtualization toolkit.
#[derive(Parser)]
#[command(name = "ibkit", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Decode MADs: hex text (one 256-byte MAD per line) or a LINKTYPE_INFINIBAND pcap.
    Decode(cmd::decode::DecodeArgs),
    /// Bring a simulated fabric up with ibkit's SM and report SMPs, time and routes.
    Sim(cmd::sim::SimArgs),
    /// Run ibkit's subnet manager on a real MAD stack (a umad port; under ibsim with libumad2sim.so).
    Sm(Box<cmd::sm::SmArgs>),
    /// Ask the subnet's SA, as saquery does: classportinfo, node, port, link, switch, sl2vl, vlarb, pkey, lft, mft, sminfo, path, multipath, service, mcmember, guidinfo, inform.
    Sa(cmd::sa::SaArgs),
    /// Serve a simulated fabric to libibumad programs (OpenSM, infiniband-diags) through ibsim's protocol.
    Fabric {
        #[command(subcommand)]
        what: FabricWhat,
    },
    /// End-to-end benchmarks beside the reference tools.
    Bench {
        #[command(subcommand)]
        what: cmd::bench::BenchWhat,
    },
    /// The SMPs of a bring-up by kind: ibkit's model, the OSU paper's formulas (m-port n-trees), and the counts and phase times measured on the simulator.
    Model(cmd::model::ModelArgs),
    /// vSwitch hypervisors: start VMs and live-migrate them by swapping or
    /// copying LFT entries, beside a full reconfiguration; or Table I.
    Migrate(cmd::migrate::MigrateArgs),
    /// Ask a running `ibkit sm --vm-socket PATH` to start, live-migrate, stop or list vSwitch VMs.
    Vm(cmd::vm::VmArgs),
    /// Build a topology and print a summary, or the ibnetdiscover text.
    Topology(cmd::topology::TopologyArgs),
    /// Print the built-in sample MADs as hex lines (input for `decode`).
    Sample(cmd::sample::SampleArgs),
}

#[derive(Subcommand)]
enum FabricWhat {
    /// Serve the fabric on ibsim's sockets: run clients with LD_PRELOAD=libumad2sim.so IBSIM_SOCKNAME=NAME [SIM_HOST=node].
    Serve(cmd::serve::ServeArgs),
    /// Control a serving fabric: link-down NODE PORT, link-up NODE PORT, node-down NODE, node-up NODE, node-vfs NODE N (a CA that is down comes back with N VFs), node-reset NODE (a switch's tables emptied, its LID kept), node-desc NODE TEXT (its NodeDescription changed, trap 144 raised), port-error NODE PORT TRAP [COUNT] (trap 129, 130 or 131 raised COUNT times, 1-1000), sys-guid NODE GUID (its SystemImageGUID changed, trap 145 raised), dump FILE, stats, reload-sm (SIGHUP to the SM client you run).
    Ctl(cmd::serve::CtlArgs),
}

/// Output piped into a reader that stopped (`ibkit sa node | head`) ends
/// the program quietly with the status a SIGPIPE death gives (128 + 13),
/// as a C tool's does, instead of a panic: Rust ignores SIGPIPE, so a
/// `println!` to a closed pipe panics. Every other panic keeps the
/// default report.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let result = match Cli::parse().command {
        Some(Command::Decode(a)) => cmd::decode::main(&a),
        Some(Command::Sim(a)) => cmd::sim::run(&a),
        Some(Command::Sm(a)) => cmd::sm::run(&a),
        Some(Command::Sa(a)) => cmd::sa::run(&a),
        Some(Command::Fabric {
            what: FabricWhat::Serve(a),
        }) => cmd::serve::serve(&a),
        Some(Command::Fabric {
            what: FabricWhat::Ctl(a),
        }) => cmd::serve::ctl(&a),
        Some(Command::Bench { what }) => cmd::bench::main(&what),
        Some(Command::Model(a)) => cmd::model::run(&a),
        Some(Command::Migrate(a)) => cmd::migrate::main(&a),
        Some(Command::Vm(a)) => cmd::vm::run(&a),
        Some(Command::Topology(a)) => cmd::topology::main(&a),
        Some(Command::Sample(a)) => cmd::sample::main(&a),
        None => demo(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ibkit: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The main job with no arguments: a 648-node fat tree of vSwitch
/// hypervisors brought up by ibkit's SM, VMs started, a near and a far live
/// migration, and the full reconfiguration they avoid.
fn demo() -> cmd::Outcome {
    eprintln!(
        "ibkit: vSwitch live migration on a simulated 648-node fat tree (see `ibkit --help` for more)\n"
    );
    cmd::migrate::run(
        &fabric::migrate::MigrateConfig {
            migrations: 2,
            ..Default::default()
        },
        false,
    )
}
