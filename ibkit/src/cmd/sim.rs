//! `ibkit sim`: bring a simulated fabric up with ibkit's SM and report, per
//! phase, the SMPs sent, simulated and wall time, and the verification of
//! the routes installed.

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use mad_core::attr::AttributeId;
use serde_json::json;
use smi::sm::{Engine, Phase, Sm, SmConfig};
use std::time::Instant;

/// Options of `ibkit sim`.
pub struct SimArgs {
    /// Topology spec.
    pub topology: String,
    /// SMPs outstanding.
    pub window: usize,
    /// Loss probability per cable crossing.
    pub loss: f64,
    /// JSON output.
    pub json: bool,
    /// Routing engine.
    pub routing: Engine,
    /// Write every SMP to this pcap file.
    pub pcap: Option<std::path::PathBuf>,
}

fn name(method: u8, attr: u16) -> String {
    let m = mad_core::Method::from(method).name().unwrap_or("?");
    let a = AttributeId::from(attr).name().unwrap_or("?");
    format!("{m}({a})")
}

/// Runs `ibkit sim`.
pub fn run(a: &SimArgs) -> Result<bool, String> {
    let t0 = Instant::now();
    let topo = Topology::from_spec(&a.topology).map_err(|e| e.to_string())?;
    let (switches, cas) = (topo.switches(), topo.cas());
    let mut f = Fabric::new(
        topo,
        SimConfig {
            loss: a.loss,
            ..SimConfig::default()
        },
    )?;
    if a.pcap.is_some() {
        f.enable_capture();
    }
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    if !a.json {
        eprintln!(
            "ibkit sim: {} — {switches} switches, {cas} CAs; bringing it up (window {})…",
            a.topology, a.window
        );
    }
    let t1 = Instant::now();
    let mut sm = Sm::new(SmConfig {
        window: a.window,
        retries: if a.loss > 0.0 { 10 } else { 3 },
        routing: a.routing,
        ..SmConfig::default()
    });
    let up = f.bring_up(&mut sm);
    let bring_up_ms = t1.elapsed().as_secs_f64() * 1e3;
    if let (Some(path), Some(bytes)) = (&a.pcap, f.capture_pcap()) {
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let t2 = Instant::now();
    let v = f.verify();
    let deadlock_free = sm.deadlock_free();
    let verify_ms = t2.elapsed().as_secs_f64() * 1e3;
    // Route computation alone, timed on the discovered graph.
    let t3 = Instant::now();
    let _ = Sm::compute_routes(a.routing, sm.routing_graph(), sm.max_lid());
    let route_ms = t3.elapsed().as_secs_f64() * 1e3;
    let st = sm.stats();
    let lft_blocks = u64::from(sm.max_lid()) / 64 + 1;
    if a.json {
        let smps: serde_json::Map<String, serde_json::Value> = st
            .sent
            .iter()
            .map(|(&(m, at), &n)| (name(m, at), json!(n)))
            .collect();
        let phases: serde_json::Map<String, serde_json::Value> = st
            .per_phase
            .iter()
            .map(|(p, n)| {
                (
                    format!("{p:?}").to_lowercase(),
                    json!({"smps": n, "sim_end_ms": st.phase_end_ms.get(p)}),
                )
            })
            .collect();
        let out = json!({
            "topology": {"spec": a.topology, "switches": switches, "cas": cas, "lids": sm.max_lid()},
            "up": up,
            "smps": {"by_kind": smps, "total": st.total(), "retries": st.retries, "given_up": st.given_up},
            "phases": phases,
            "routing": format!("{:?}", a.routing).to_lowercase(),
            "wall_ms": {"build": build_ms, "bring_up": bring_up_ms, "route": route_ms, "verify": verify_ms},
            "sim_ms": f.now_ns() as f64 / 1e6,
            "model": {"full_reconfig_smps": switches as u64 * lft_blocks},
            "verify": {"reachable_pairs": v.reachable, "unreachable_pairs": v.unreachable, "loops": v.loops, "switch_unreachable": v.switch_unreachable, "deadlock_free": deadlock_free},
        });
        println!("{out}");
    } else {
        println!(
            "{} — {switches} switches, {cas} CAs, {} LIDs: {}",
            a.topology,
            sm.max_lid(),
            if up { "UP" } else { "NOT UP" }
        );
        println!();
        println!("{:<40} {:>10}", "SMPs by kind", "count");
        for (&(m, at), n) in &st.sent {
            println!("{:<40} {:>10}", name(m, at), n);
        }
        println!("{:<40} {:>10}", "total", st.total());
        println!("{:<40} {:>10}", "retransmissions", st.retries);
        println!();
        println!("{:<16} {:>10} {:>14}", "phase", "SMPs", "sim end (ms)");
        for p in [
            Phase::Discovery,
            Phase::LidAssignment,
            Phase::Distribution,
            Phase::Activation,
        ] {
            println!(
                "{:<16} {:>10} {:>14.3}",
                format!("{p:?}"),
                st.per_phase.get(&p).copied().unwrap_or(0),
                st.phase_end_ms.get(&p).copied().unwrap_or(0) as f64
            );
        }
        println!();
        println!(
            "LFT SMPs = switches × blocks in use = {switches} × {lft_blocks} = {}",
            switches as u64 * lft_blocks
        );
        println!(
            "routing: {:?}, route computation alone {route_ms:.0} ms",
            a.routing
        );
        println!("wall time: build {build_ms:.0} ms, bring-up {bring_up_ms:.0} ms, verify {verify_ms:.0} ms");
        println!(
            "verify: {} reachable pairs, {} unreachable, {} loops, {} switch→LID unroutable, channel dependencies {}",
            v.reachable,
            v.unreachable,
            v.loops,
            v.switch_unreachable,
            if deadlock_free {
                "acyclic (deadlock-free)"
            } else {
                "cyclic"
            }
        );
    }
    let must_be_acyclic = a.routing != Engine::MinHop;
    Ok(up && v.unreachable == 0 && v.loops == 0 && (deadlock_free || !must_be_acyclic))
}
