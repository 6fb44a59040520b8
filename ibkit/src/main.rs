//! `ibkit`: the command-line tool of the ibkit InfiniBand toolkit.

use ibkit::cmd;
use ibkit::cmd::args::{parse_loss, parse_vfs};

use clap::{Parser, Subcommand};
use std::path::PathBuf;
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
    Decode {
        /// One JSON object per MAD instead of the text dump.
        #[arg(long)]
        json: bool,
        /// Input file; `-` or nothing reads standard input.
        input: Option<PathBuf>,
    },
    /// Bring a simulated fabric up with ibkit's SM and report SMPs, time and routes.
    Sim {
        /// mport-ntree:M:N, fat-tree-324|648|5832|11664, random:SWITCHES:SEED, file:PATH.
        #[arg(long, default_value = "fat-tree-324")]
        topology: String,
        /// SMPs outstanding at once (1 = OpenSM's controlled BFS).
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=4096))]
        window: u16,
        /// Probability that an SMP is lost on a cable.
        #[arg(long, default_value_t = 0.0, value_parser = parse_loss)]
        loss: f64,
        /// One JSON object instead of tables.
        #[arg(long)]
        json: bool,
        /// Routing engine: minhop, updn or ftree.
        #[arg(long, default_value = "minhop", value_parser = parse_engine)]
        routing: smi::sm::Engine,
        /// Write every SMP the fabric carries to this LINKTYPE_INFINIBAND pcap.
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// VFs per hypervisor: every CA but the SM's becomes a vSwitch hypervisor.
        #[arg(long, default_value_t = 0, value_parser = parse_vfs)]
        vfs: usize,
        /// LID policy for the VFs: prepopulated or dynamic.
        #[arg(long, default_value = "prepopulated", value_parser = parse_policy)]
        policy: smi::sm::LidPolicy,
        /// Write the topology the SM discovered here, in ibnetdiscover format.
        #[arg(long)]
        export: Option<PathBuf>,
        /// Walk a data packet FROM:TO (node names; TO may be a LID) through the installed LFTs.
        #[arg(long)]
        trace: Vec<String>,
        /// Nanoseconds for an SMP to cross one cable (k of the cost model).
        #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
        hop_ns: u64,
        /// Extra nanoseconds at each directed-route hop (r of the cost model).
        #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
        dr_hop_ns: u64,
    },
    /// Run ibkit's subnet manager on a real MAD stack (a umad port; under ibsim with libumad2sim.so).
    Sm {
        /// Only umad is available.
        #[arg(long, default_value = "umad")]
        transport: String,
        /// CA name (default: the first).
        #[arg(long)]
        ca: Option<String>,
        /// Port number (0: the first active).
        #[arg(long, default_value_t = 0)]
        port: u8,
        /// Stop once the subnet is up.
        #[arg(long)]
        once: bool,
        /// Routing engine: minhop, updn or ftree.
        #[arg(long, default_value = "minhop", value_parser = parse_engine)]
        routing: smi::sm::Engine,
        /// Milliseconds between light sweeps (without --once).
        #[arg(long, default_value_t = 10_000)]
        sweep_ms: u64,
        /// One JSON object at the end.
        #[arg(long)]
        json: bool,
    },
    /// Serve a simulated fabric to libibumad programs (OpenSM, infiniband-diags) through ibsim's protocol.
    Fabric {
        #[command(subcommand)]
        what: FabricWhat,
    },
    /// End-to-end benchmarks beside the reference tools.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// The SMPs of a bring-up by kind: ibkit's model, the OSU paper's formulas (m-port n-trees), and the counts and phase times measured on the simulator.
    Model {
        /// mport-ntree:M:N, fat-tree-324|648|5832|11664, random:SWITCHES:SEED, file:PATH.
        #[arg(long)]
        topology: String,
        /// VFs per hypervisor.
        #[arg(long, default_value_t = 0, value_parser = parse_vfs)]
        vfs: usize,
        /// LID policy for the VFs.
        #[arg(long, default_value = "prepopulated", value_parser = parse_policy)]
        policy: smi::sm::LidPolicy,
        /// Print the formulas only; do not bring the fabric up on the simulator to measure.
        #[arg(long)]
        no_measure: bool,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// vSwitch hypervisors: start VMs and live-migrate them by swapping or
    /// copying LFT entries, beside a full reconfiguration; or Table I.
    Migrate {
        /// mport-ntree:M:N, fat-tree-324|648|5832|11664, random:SWITCHES:SEED, file:PATH.
        #[arg(long, default_value = "fat-tree-648")]
        topology: String,
        /// prepopulated (every VF has a LID from bring-up) or dynamic (a VM gets one when it starts).
        #[arg(long, default_value = "prepopulated", value_parser = parse_policy)]
        policy: smi::sm::LidPolicy,
        /// VFs per hypervisor (at most 128).
        #[arg(long, default_value_t = 16, value_parser = parse_vfs)]
        vfs: usize,
        /// VMs to start, spread over the hypervisors.
        #[arg(long, default_value_t = 64)]
        vms: usize,
        /// Migrations: near (same leaf), far (farthest leaf), random, in turn.
        #[arg(long, default_value_t = 3)]
        migrations: usize,
        /// Routing engine: minhop, updn or ftree.
        #[arg(long, default_value = "ftree", value_parser = parse_engine)]
        routing: smi::sm::Engine,
        /// Point the VM's LID at port 255 on the switches to update first (deadlock mitigation).
        #[arg(long)]
        mitigate: bool,
        /// Seed of the random choices.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Walks above which each migration is checked by walking every live node to the LIDs it moved (every other LFT entry compared with its value before) instead of every node to every LID.
        #[arg(long, default_value_t = cmd::migrate::DEFAULT_VERIFY_LIMIT)]
        verify_limit: u64,
        /// Reproduce the vSwitch paper's Table I on its four fat trees from measured runs.
        #[arg(long)]
        table: bool,
        /// With --table: far migrations swept per fabric.
        #[arg(long, default_value_t = 12)]
        sweep: usize,
        /// With --table: fabrics to measure (comma-separated; default the four of Table I).
        #[arg(long, value_delimiter = ',')]
        fabrics: Vec<String>,
        /// With --table: draw the comparison as an SVG chart to this file.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// One JSON object (with --table: an array, one object per fabric).
        #[arg(long)]
        json: bool,
    },
    /// Build a topology and print a summary, or the ibnetdiscover text.
    Topology {
        /// mport-ntree:M:N, fat-tree-324|648|5832|11664, random:SWITCHES:SEED, file:PATH.
        #[arg(long)]
        topology: String,
        /// Print it in ibnetdiscover / ibsim format.
        #[arg(long)]
        ibnetdiscover: bool,
    },
    /// Print the built-in sample MADs as hex lines (input for `decode`).
    Sample {
        /// Write them as a LINKTYPE_INFINIBAND pcap file instead.
        #[arg(long)]
        pcap: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum FabricWhat {
    /// Serve the fabric on ibsim's sockets: run clients with LD_PRELOAD=libumad2sim.so IBSIM_SOCKNAME=NAME [SIM_HOST=node].
    Serve(cmd::serve::ServeArgs),
    /// Control a serving fabric: link-down NODE PORT, link-up NODE PORT, node-down NODE, node-up NODE, dump FILE, stats.
    Ctl(cmd::serve::CtlArgs),
}

#[derive(Subcommand)]
enum BenchWhat {
    /// OpenSM (on ibsim) and ibkit's SM (on its simulator) bring the same fabric up: SMPs, times, ratios.
    Opensm {
        /// mport-ntree:M:N, fat-tree-324|648|5832|11664, random:SWITCHES:SEED, file:PATH.
        #[arg(long, default_value = "fat-tree-324")]
        topology: String,
        /// Routing engine for both: minhop, updn or ftree.
        #[arg(long, default_value = "minhop", value_parser = parse_engine)]
        routing: smi::sm::Engine,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// vhca: the software HCA natively and from a guest process: latency, bandwidth, events, registration.
    Vhca {
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// Fewer sizes and iterations (a smoke run).
        #[arg(long)]
        quick: bool,
        /// Internal: run the guest side against the backend at this socket.
        #[arg(long, hide = true)]
        guest: Option<PathBuf>,
        /// Measure vhca over this RDMA device (VerbsHca) against the device used directly, instead of the software HCA.
        #[arg(long)]
        device: Option<String>,
    },
    /// OpenSM and ibkit's SM on Debian's ibsim and on `ibkit fabric serve`, same fabric, same run: time to up, SMP rate, simulator CPU per SMP.
    IbsimCompat {
        /// mport-ntree:M:N, fat-tree-324|648|5832|11664, random:SWITCHES:SEED, file:PATH.
        #[arg(long, default_value = "fat-tree-5832")]
        topology: String,
        /// Routing engine for both clients: minhop, updn or ftree.
        #[arg(long, default_value = "minhop", value_parser = parse_engine)]
        routing: smi::sm::Engine,
        /// Runs per client and simulator (medians are reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Instead of comparing with ibsim: OpenSM on ibkit serve with these µs added to every batch of answers (e.g. 0,15,30), and how much of OpenSM's time that makes.
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
        sensitivity: Vec<u64>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Decode { json, input }) => cmd::decode::run(json, input),
        Some(Command::Sim {
            topology,
            window,
            loss,
            json,
            routing,
            pcap,
            vfs,
            policy,
            export,
            trace,
            hop_ns,
            dr_hop_ns,
        }) => cmd::sim::run(&cmd::sim::SimArgs {
            topology,
            window: usize::from(window),
            loss,
            json,
            routing,
            pcap,
            vfs,
            policy,
            export,
            trace,
            hop_ns,
            dr_hop_ns,
        }),
        Some(Command::Sm {
            transport,
            ca,
            port,
            once,
            routing,
            sweep_ms,
            json,
        }) => {
            if transport != "umad" {
                Err(format!("unknown transport {transport:?}: umad").into())
            } else {
                cmd::sm::run(&cmd::sm::SmArgs {
                    ca,
                    port,
                    once,
                    routing,
                    sweep_ms,
                    json,
                })
            }
        }
        Some(Command::Fabric {
            what: FabricWhat::Serve(a),
        }) => cmd::serve::serve(&a),
        Some(Command::Fabric {
            what: FabricWhat::Ctl(a),
        }) => cmd::serve::ctl(&a),
        Some(Command::Bench {
            what:
                BenchWhat::Opensm {
                    topology,
                    routing,
                    json,
                },
        }) => cmd::bench::opensm(&topology, routing, json),
        Some(Command::Bench {
            what:
                BenchWhat::IbsimCompat {
                    topology,
                    routing,
                    runs,
                    sensitivity,
                    json,
                },
        }) => {
            if sensitivity.is_empty() {
                cmd::compat::run(&topology, routing, runs, json)
            } else {
                cmd::compat::run_sensitivity(&topology, routing, runs, &sensitivity, json)
            }
        }
        Some(Command::Bench {
            what:
                BenchWhat::Vhca {
                    json,
                    quick,
                    guest,
                    device,
                },
        }) => match (guest, device) {
            (Some(sock), _) => cmd::vhca::guest(&sock, quick),
            (None, Some(d)) => cmd::vhca::verbs::run(&d, json, quick),
            (None, None) => cmd::vhca::run(json, quick),
        },
        Some(Command::Model {
            topology,
            vfs,
            policy,
            no_measure,
            json,
        }) => cmd::model::run(&cmd::model::ModelArgs {
            topology,
            vfs,
            policy,
            measure: !no_measure,
            json,
        }),
        Some(Command::Migrate {
            topology,
            policy,
            vfs,
            vms,
            migrations,
            routing,
            mitigate,
            seed,
            verify_limit,
            table,
            sweep,
            fabrics,
            plot,
            json,
        }) => {
            if table || plot.is_some() {
                migrate_table(&fabrics, sweep, verify_limit, plot, json)
            } else {
                cmd::migrate::run(
                    &cmd::migrate::MigrateArgs {
                        topology,
                        policy,
                        vfs,
                        vms,
                        migrations,
                        routing,
                        mitigate,
                        seed,
                        verify_limit,
                    },
                    json,
                )
            }
        }
        Some(Command::Topology {
            topology,
            ibnetdiscover,
        }) => match fabric::topology::Topology::from_spec(&topology) {
            Ok(t) if ibnetdiscover => {
                print!("{}", fabric::topology::to_ibnetdiscover(&t));
                Ok(())
            }
            Ok(t) => {
                println!(
                    "{topology}: {} switches, {} CAs, {} cables",
                    t.switches(),
                    t.cas(),
                    t.links()
                );
                Ok(())
            }
            Err(e) => Err(e.to_string().into()),
        },
        Some(Command::Sample { pcap: None }) => {
            cmd::sample::print_hex();
            Ok(())
        }
        Some(Command::Sample { pcap: Some(p) }) => {
            cmd::sample::write_pcap(&p).map_err(cmd::Fail::from)
        }
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

fn parse_policy(s: &str) -> Result<smi::sm::LidPolicy, String> {
    smi::sm::LidPolicy::from_name(s)
        .ok_or_else(|| format!("unknown LID policy {s:?}: prepopulated or dynamic"))
}

fn migrate_table(
    fabrics: &[String],
    sweep: usize,
    verify_limit: u64,
    plot: Option<PathBuf>,
    json: bool,
) -> cmd::Outcome {
    let list: Vec<&str> = if fabrics.is_empty() {
        cmd::migrate::TABLE_FABRICS.to_vec()
    } else {
        fabrics.iter().map(|s| s.as_str()).collect()
    };
    let mut progress = |s: &str| {
        if !json {
            eprintln!("{s}");
        }
    };
    let rows = cmd::migrate::table(&list, sweep, verify_limit, &mut progress)?;
    if let Some(p) = &plot {
        std::fs::write(p, cmd::migrate::plot_svg(&rows))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if json {
        println!("{}", cmd::migrate::table_json(&rows));
    } else {
        cmd::migrate::print_table(&rows);
        if let Some(p) = &plot {
            println!("chart written to {}", p.display());
        }
    }
    match rows
        .iter()
        .find_map(|r| r.copy.failure().or_else(|| r.swap.failure()))
    {
        Some(e) => Err(cmd::Fail::Check(e)),
        None => Ok(()),
    }
}

fn parse_engine(s: &str) -> Result<smi::sm::Engine, String> {
    smi::sm::Engine::from_name(s)
        .ok_or_else(|| format!("unknown routing engine {s:?}: minhop, updn or ftree"))
}

/// The main job with no arguments: a 648-node fat tree of vSwitch
/// hypervisors brought up by ibkit's SM, VMs started, a near and a far live
/// migration, and the full reconfiguration they avoid.
fn demo() -> cmd::Outcome {
    eprintln!(
        "ibkit: vSwitch live migration on a simulated 648-node fat tree (see `ibkit --help` for more)\n"
    );
    cmd::migrate::run(
        &cmd::migrate::MigrateArgs {
            migrations: 2,
            ..Default::default()
        },
        false,
    )
}
