//! `ibkit`: the command-line tool of the ibkit InfiniBand toolkit.

use ibkit::cmd;

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
        #[arg(long, default_value_t = 16)]
        window: usize,
        /// Probability that an SMP is lost on a cable.
        #[arg(long, default_value_t = 0.0)]
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
        }) => cmd::sim::run(&cmd::sim::SimArgs {
            topology,
            window,
            loss,
            json,
            routing,
            pcap,
        }),
        Some(Command::Topology {
            topology,
            ibnetdiscover,
        }) => match fabric::topology::Topology::from_spec(&topology) {
            Ok(t) if ibnetdiscover => {
                print!("{}", fabric::topology::to_ibnetdiscover(&t));
                Ok(true)
            }
            Ok(t) => {
                println!(
                    "{topology}: {} switches, {} CAs, {} cables",
                    t.switches(),
                    t.cas(),
                    t.links()
                );
                Ok(true)
            }
            Err(e) => Err(e.to_string()),
        },
        Some(Command::Sample { pcap: None }) => {
            cmd::sample::print_hex();
            Ok(true)
        }
        Some(Command::Sample { pcap: Some(p) }) => cmd::sample::write_pcap(&p).map(|()| true),
        None => demo(),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ibkit: {e}");
            ExitCode::from(2)
        }
    }
}

fn parse_engine(s: &str) -> Result<smi::sm::Engine, String> {
    match s {
        "minhop" => Ok(smi::sm::Engine::MinHop),
        "updn" => Ok(smi::sm::Engine::UpDown),
        "ftree" => Ok(smi::sm::Engine::FatTree),
        other => Err(format!(
            "unknown routing engine {other:?}: minhop, updn or ftree"
        )),
    }
}

/// The main job with no arguments: decode the built-in sample MADs.
fn demo() -> Result<bool, String> {
    println!("ibkit: decoding the built-in sample MADs (see `ibkit --help` for more)\n");
    let items: Vec<cmd::decode::Item> = cmd::sample::samples()
        .into_iter()
        .map(|(what, m)| cmd::decode::Item {
            origin: what.to_string(),
            mad: Ok(m),
        })
        .collect();
    match cmd::decode::decode_items(
        &items,
        false,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    ) {
        Ok(bad) => Ok(bad == 0),
        Err(e) => cmd::decode::quiet_broken_pipe(e),
    }
}
