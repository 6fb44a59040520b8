//! `ibkit bench opensm`'s runs: the same fabric brought up by OpenSM
//! (Debian's `opensm` on Debian's `ibsim` through `libumad2sim.so`), by
//! ibkit's SM on that same ibsim, and by ibkit's SM on ibkit's simulator,
//! in one run, with the ratios. The report derives its JSON.

use crate::peers::{
    run_ibkit_on_ibsim, run_ibkit_with, run_opensm_with, IbkitRun, Ibsim, OpenSmRun, Policy,
};
use fabric::topology::Topology;
use serde::Serialize;
use smi::sm::Engine;
use std::path::Path;

/// ibkit's SM on ibsim.
#[derive(Clone, Debug, Serialize)]
pub struct OnIbsim {
    /// SMPs ibkit's SM counted.
    pub smps: u64,
    /// Replies ibsim counted.
    pub ibsim_replies: u64,
    /// Milliseconds to the subnet up.
    pub to_up_ms: f64,
}

/// ibkit against OpenSM.
#[derive(Clone, Debug, Serialize)]
pub struct Ratios {
    /// ibkit's SMPs over OpenSM's (below 1: fewer).
    pub smps: f64,
    /// OpenSM's route computation time over ibkit's.
    pub routing_speedup: f64,
}

/// The three bring-ups of one fabric.
#[derive(Clone, Debug, Serialize)]
pub struct OpensmBench {
    /// The topology spec.
    pub topology: String,
    /// The routing engine of both SMs.
    pub routing: &'static str,
    /// The partition configuration both SMs applied, if any.
    pub partitions: Option<String>,
    /// Both SMs applied QoS (OpenSM's defaults).
    pub qos: bool,
    /// OpenSM on ibsim.
    pub opensm: OpenSmRun,
    /// ibkit's SM on its simulator.
    pub ibkit: IbkitRun,
    /// ibkit's SM on ibsim.
    pub ibkit_on_ibsim: OnIbsim,
    /// The ratios.
    pub ratios: Ratios,
}

/// `a / b`, NaN when `b` is not positive.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// Runs the three on `spec` (`exe` is the `ibkit` binary, for `ibkit sm`
/// on ibsim); `progress` hears each start.
pub fn opensm_vs_ibkit(
    exe: &Path,
    spec: &str,
    routing: Engine,
    policy: &Policy,
    progress: &mut dyn FnMut(&str),
) -> Result<OpensmBench, String> {
    let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("ibkit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    progress(&format!("OpenSM on ibsim: {spec}, {routing:?}…"));
    let o = Ibsim::start(&topo, &dir).and_then(|sim| run_opensm_with(&sim, routing, &dir, policy));
    progress("ibkit's SM on the same ibsim…");
    let u = run_ibkit_on_ibsim(exe, &topo, routing, &dir, policy);
    let _ = std::fs::remove_dir_all(&dir);
    let (opensm, (smps, ibsim_replies, to_up_ms)) = (o?, u?);
    progress("ibkit on its simulator…");
    let ibkit = run_ibkit_with(topo, routing, policy)?;
    Ok(OpensmBench {
        topology: spec.to_string(),
        routing: routing.name(),
        partitions: (policy.partitions.as_ref()).map(|p| p.display().to_string()),
        qos: policy.qos,
        ratios: Ratios {
            smps: ratio(ibkit.smps as f64, opensm.smps as f64),
            routing_speedup: ratio(opensm.routing_ms, ibkit.routing_ms),
        },
        opensm,
        ibkit,
        ibkit_on_ibsim: OnIbsim {
            smps,
            ibsim_replies,
            to_up_ms,
        },
    })
}

impl OpensmBench {
    /// What went wrong, in one line: an SM that did not bring the
    /// subnet up, or ibkit's SM needing more SMPs than OpenSM.
    pub fn failure(&self) -> Option<String> {
        let (o, k, u, spec) = (
            &self.opensm,
            &self.ibkit,
            &self.ibkit_on_ibsim,
            &self.topology,
        );
        if !o.up {
            Some(format!("OpenSM did not reach SUBNET UP on ibsim ({spec})"))
        } else if !k.ok {
            Some(format!(
                "ibkit's SM did not bring {spec} up verified on its simulator"
            ))
        } else if k.smps > o.smps {
            Some(format!(
                "ibkit's SM sent more SMPs than OpenSM on {spec}: {} > {}",
                k.smps, o.smps
            ))
        } else if u.ibsim_replies > o.smps {
            Some(format!(
                "ibkit's SM on ibsim needed more SMPs than OpenSM on {spec}: {} > {}",
                u.ibsim_replies, o.smps
            ))
        } else {
            None
        }
    }
}
