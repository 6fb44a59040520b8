//! `ibkit bench sa`'s runs. [`all_pairs`]: the SA of ibkit's SM asked
//! for the PathRecord of every ordered pair of CAs of a fabric, one
//! SubnAdmGet MAD at a time — decoded, resolved over the installed tables,
//! its answer encoded and queued — on one core, each answer checked.

use fabric::sim::{bring_up, SimConfig};
use mad_core::attr::NodeType;
use mad_core::mad::Method;
use mad_core::sa::path::comp;
use mad_core::sa::{PathRecord, SaMad, SaRecord};
use mad_core::Lid;
use sa::{Addr, Sa, SaConfig};
use serde::Serialize;
use smi::sm::SmConfig;
use std::time::Instant;

/// What [`all_pairs`] measured.
#[derive(Clone, Debug, Serialize)]
pub struct AllPairs {
    /// The topology spec.
    pub topology: String,
    /// CAs of the fabric.
    pub cas: usize,
    /// Ordered pairs asked (CAs², each CA to itself included).
    pub pairs: u64,
    /// Answers with status 0 whose record names the pair asked.
    pub answered: u64,
    /// Answers that were refused or named another pair.
    pub wrong: u64,
    /// Milliseconds to bring the fabric up (not counted below).
    pub bring_up_ms: f64,
    /// Seconds for all the pairs, on one thread.
    pub seconds: f64,
    /// Nanoseconds per query.
    pub ns_per_query: f64,
}

impl AllPairs {
    /// What is wrong, if anything: an answer missing or wrong.
    pub fn failure(&self) -> Option<String> {
        (self.wrong != 0 || self.answered != self.pairs).then(|| {
            format!(
                "{} of {} PathRecord queries were not answered with their pair",
                self.pairs - self.answered,
                self.pairs
            )
        })
    }
}

/// Brings `spec` up with ibkit's SM on the simulator, then asks its SA for
/// the PathRecord of every ordered pair of CAs (by SLID and DLID, from the
/// source's own address), one MAD in and one out at a time, and checks
/// every answer's status, SLID and DLID. Destinations are the outer loop:
/// the switches' entries for one LID stay in cache while every source
/// asks for it, as they would when a job's ranks all resolve one peer.
pub fn all_pairs(spec: &str) -> Result<AllPairs, String> {
    let t0 = Instant::now();
    let (f, sm, up) = bring_up(spec, SimConfig::default(), SmConfig::default())
        .map_err(|e| format!("{spec}: {e}"))?;
    if !up {
        return Err(format!("{spec}: the subnet did not come up"));
    }
    let bring_up_ms = t0.elapsed().as_secs_f64() * 1e3;
    let lids: Vec<Lid> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .map(|i| f.nodes[i].lid())
        .collect();
    let mut sa = Sa::new(SaConfig::default());
    let mut q = SaMad::request(Method::Get, PathRecord::ID, 1);
    q.sa.component_mask = comp::SLID | comp::DLID;
    let mut mad = q.to_bytes();
    // Where SLID and DLID sit in the MAD: the SA data (56) + the record's.
    const DLID: usize = 56 + 40;
    const SLID: usize = 56 + 42;
    let (mut answered, mut wrong) = (0u64, 0u64);
    let subnet = sm.subnet();
    let t = Instant::now();
    for &d in &lids {
        mad[DLID..DLID + 2].copy_from_slice(&d.0.to_be_bytes());
        for &s in &lids {
            mad[SLID..SLID + 2].copy_from_slice(&s.0.to_be_bytes());
            let from = Addr { lid: s, qpn: 1 };
            if sa.handle_mad(subnet, from, &mad, 0).is_err() {
                wrong += 1;
                continue;
            }
            match sa.poll_transmit() {
                Some(a)
                    if a.mad[4..6] == [0, 0]
                        && a.mad[DLID..DLID + 2] == d.0.to_be_bytes()
                        && a.mad[SLID..SLID + 2] == s.0.to_be_bytes() =>
                {
                    answered += 1
                }
                _ => wrong += 1,
            }
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let pairs = (lids.len() * lids.len()) as u64;
    Ok(AllPairs {
        topology: spec.to_string(),
        cas: lids.len(),
        pairs,
        answered,
        wrong,
        bring_up_ms,
        seconds,
        ns_per_query: seconds * 1e9 / pairs.max(1) as f64,
    })
}
