//! `ibkit topology`: a topology built and summarised, or written in
//! ibnetdiscover format.

use super::args::TOPOLOGY_HELP;
use fabric::topology::{to_ibnetdiscover, Topology};

/// Options of `ibkit topology`.
#[derive(Clone, Debug, clap::Args)]
pub struct TopologyArgs {
    /// The fabric: a topology spec.
    #[arg(long, help = TOPOLOGY_HELP)]
    pub topology: String,
    /// Print it in ibnetdiscover / ibsim format.
    #[arg(long)]
    pub ibnetdiscover: bool,
}

/// Runs `ibkit topology`.
pub fn main(a: &TopologyArgs) -> super::Outcome {
    let t = Topology::from_spec(&a.topology)?;
    if a.ibnetdiscover {
        print!("{}", to_ibnetdiscover(&t));
    } else {
        println!(
            "{}: {} switches, {} CAs, {} cables",
            a.topology,
            t.switches(),
            t.cas(),
            t.links()
        );
    }
    Ok(())
}
