//! `ibkit sim`: bring a simulated fabric up with ibkit's SM and report, per
//! phase, the SMPs sent, simulated and wall time, and the verification of
//! the routes installed.

use super::args::{parse_engine, parse_loss, parse_policy, parse_vfs, TOPOLOGY_HELP};
use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use serde_json::json;
use smi::sm::{Engine, Phase, Sm, SmConfig};
use std::time::Instant;

/// Options of `ibkit sim`.
#[derive(Clone, Debug, clap::Args)]
pub struct SimArgs {
    /// The fabric: a topology spec.
    #[arg(long, default_value = "fat-tree-324", help = TOPOLOGY_HELP)]
    pub topology: String,
    /// SMPs outstanding at once (1 = OpenSM's controlled BFS).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub window: u16,
    /// Probability that an SMP is lost on a cable.
    #[arg(long, default_value_t = 0.0, value_parser = parse_loss)]
    pub loss: f64,
    /// One JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Routing engine: minhop, updn or ftree.
    #[arg(long, default_value = "minhop", value_parser = parse_engine)]
    pub routing: Engine,
    /// Write every SMP the fabric carries to this LINKTYPE_INFINIBAND pcap.
    #[arg(long)]
    pub pcap: Option<std::path::PathBuf>,
    /// VFs per hypervisor: every CA but the SM's becomes a vSwitch hypervisor.
    #[arg(long, default_value_t = 0, value_parser = parse_vfs)]
    pub vfs: usize,
    /// LID policy for the VFs: prepopulated or dynamic.
    #[arg(long, default_value = "prepopulated", value_parser = parse_policy)]
    pub policy: smi::sm::LidPolicy,
    /// Write the topology the SM discovered here, in ibnetdiscover format.
    #[arg(long)]
    pub export: Option<std::path::PathBuf>,
    /// Walk a data packet FROM:TO (node names; TO may be a LID) through the installed LFTs.
    #[arg(long)]
    pub trace: Vec<String>,
    /// Nanoseconds for an SMP to cross one cable (k of the cost model).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub hop_ns: u64,
    /// Extra nanoseconds at each directed-route hop (r of the cost model).
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub dr_hop_ns: u64,
}

/// Walks `FROM:TO` through the installed tables and describes the path.
fn trace(f: &Fabric, spec: &str) -> Result<String, String> {
    let (from, to) = spec
        .split_once(':')
        .ok_or_else(|| format!("--trace {spec:?}: expected FROM:TO"))?;
    let find = |name: &str| f.topo.nodes.iter().position(|n| n.name == name);
    let src = find(from).ok_or_else(|| format!("--trace: no node {from:?}"))?;
    let dlid = match (find(to), to.parse::<u16>()) {
        (Some(i), _) => f.nodes[i].lid(),
        (None, Ok(l)) => mad_core::Lid(l),
        _ => return Err(format!("--trace: no node or LID {to:?}")),
    };
    let (path, walk) = f.trace(src, dlid);
    let hops: Vec<String> = path
        .iter()
        .map(|&(n, p)| match p {
            0 => f.topo.nodes[n].name.clone(),
            p => format!("{}[{p}]", f.topo.nodes[n].name),
        })
        .collect();
    Ok(format!(
        "{from} → LID {}: {} — {walk:?}",
        dlid.0,
        hops.join(" → ")
    ))
}

/// The phases reported, with the names of the JSON keys.
const PHASES: [(Phase, &str); 4] = [
    (Phase::Discovery, "discovery"),
    (Phase::LidAssignment, "lid_assignment"),
    (Phase::Distribution, "distribution"),
    (Phase::Activation, "activation"),
];

pub(crate) use fabric::model::kind_name;

/// Runs `ibkit sim`.
pub fn run(a: &SimArgs) -> super::Outcome {
    let t0 = Instant::now();
    let topo = Topology::from_spec(&a.topology).map_err(|e| e.to_string())?;
    let (switches, cas) = (topo.switches(), topo.cas());
    let model = fabric::model::predict(&topo, a.vfs, a.policy);
    let mut f = Fabric::new(
        topo,
        SimConfig {
            loss: a.loss,
            vfs: a.vfs,
            hop_ns: a.hop_ns,
            dr_hop_ns: a.dr_hop_ns,
            ..SimConfig::default()
        },
    )?;
    if a.pcap.is_some() {
        f.enable_capture();
    }
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    let spinner = super::args::Progress::spinner(
        &format!(
            "ibkit sim: {} — {switches} switches, {cas} CAs; bringing it up (window {})…",
            a.topology, a.window
        ),
        a.json,
    );
    let t1 = Instant::now();
    let mut sm = Sm::new(SmConfig {
        window: usize::from(a.window),
        retries: if a.loss > 0.0 { 10 } else { 3 },
        routing: a.routing,
        lid_policy: a.policy,
        ..SmConfig::default()
    });
    let up = f.bring_up(&mut sm);
    if let Some(e) = sm.error() {
        return Err(e.to_string().into());
    }
    spinner.status("checking the routes (every node to every LID)…");
    if let Some(path) = &a.export {
        let found = fabric::topology::Topology::from_discovered(&sm);
        std::fs::write(path, fabric::topology::to_ibnetdiscover(&found))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let bring_up_ms = t1.elapsed().as_secs_f64() * 1e3;
    if let (Some(path), Some(bytes)) = (&a.pcap, f.capture_pcap()) {
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let t2 = Instant::now();
    let v = f.verify();
    let deadlock_free = sm.deadlock_free();
    let verify_ms = t2.elapsed().as_secs_f64() * 1e3;
    spinner.finish();
    // Route computation alone, timed on the discovered graph.
    let t3 = Instant::now();
    let _ = Sm::compute_routes(a.routing, sm.routing_graph(), sm.max_lid());
    let route_ms = t3.elapsed().as_secs_f64() * 1e3;
    let traces: Vec<String> = a
        .trace
        .iter()
        .map(|t| trace(&f, t))
        .collect::<Result<_, _>>()?;
    let st = sm.stats();
    let per_phase = st.per_phase();
    let lft_blocks = u64::from(sm.max_lid()) / 64 + 1;
    if a.json {
        let smps: serde_json::Map<String, serde_json::Value> = st
            .sent()
            .iter()
            .map(|(&(m, at), &n)| (kind_name(m, at), json!(n)))
            .collect();
        let mut phases = serde_json::Map::new();
        for (p, key) in PHASES {
            let kinds: serde_json::Map<String, serde_json::Value> = st
                .per_phase_kind
                .iter()
                .filter(|((q, _, _), _)| *q == p)
                .map(|(&(_, m, at), &n)| (kind_name(m, at), json!(n)))
                .collect();
            phases.insert(
                key.to_string(),
                json!({
                    "smps": kinds,
                    "total": per_phase.get(&p).copied().unwrap_or(0),
                    "wall_ms": f.phase_wall_ms.get(&p).copied().unwrap_or(0.0),
                    "sim_end_ms": st.phase_end_ms.get(&p),
                }),
            );
        }
        phases.insert(
            "routing".into(),
            json!({"smps": {}, "total": 0, "wall_ms": route_ms, "engine": a.routing.name()}),
        );
        let model_kinds: serde_json::Map<String, serde_json::Value> = model
            .kinds
            .iter()
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect();
        let out = json!({
            "topology": {"spec": a.topology, "switches": switches, "cas": cas, "lids": sm.max_lid(), "vfs": a.vfs, "hypervisors": sm.hypervisors().len()},
            "up": up,
            "smps": {"by_kind": smps, "total": st.total(), "retries": st.retries, "given_up": st.given_up},
            "phases": phases,
            "routing": a.routing.name(),
            "wall_ms": {"build": build_ms, "bring_up": bring_up_ms, "route": route_ms, "verify": verify_ms},
            "sim_ms": f.now_ns() as f64 / 1e6,
            "model": {"by_kind": model_kinds, "total": model.total(), "lids": model.lids, "blocks_per_switch": model.blocks, "full_reconfig_smps": model.full_reconfig_smps},
            "traces": traces,
            "verify": {"check": "all pairs", "sources": v.sources, "lids": v.lids, "reachable_pairs": v.reachable, "unreachable_pairs": v.unreachable, "loops": v.loops, "switch_unreachable": v.switch_unreachable, "parked_pairs": v.parked, "misparked_pairs": v.misparked, "bad_lids": v.bad_lids, "ok": v.ok(), "deadlock_free": deadlock_free},
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
        println!("{:<32} {:>10} {:>10}", "SMPs by kind", "sent", "model");
        for (&(m, at), n) in &st.sent() {
            let k = kind_name(m, at);
            println!("{:<32} {:>10} {:>10}", k, n, model.count(&k));
        }
        println!("{:<32} {:>10} {:>10}", "total", st.total(), model.total());
        println!("{:<32} {:>10}", "retransmissions", st.retries);
        // OpenSM 3.3.23 on ibsim, as measured for issue 4 (not re-measured
        // by this command): the reference the total is compared with.
        let opensm = match a.topology.as_str() {
            "fat-tree-324" => Some(10_478u64),
            "fat-tree-648" => Some(20_360),
            "fat-tree-5832" => Some(372_278),
            _ => None,
        };
        if let Some(o) = opensm {
            println!(
                "{:<32} {:>10}   (OpenSM 3.3.23 on ibsim, issue 4's measurement: ibkit sends {:.0}% of it)",
                "OpenSM 3.3.23 total",
                o,
                100.0 * st.total() as f64 / o as f64
            );
        }
        println!();
        println!(
            "{:<16} {:>8} {:>10} {:>14}  SMPs by kind",
            "phase", "SMPs", "wall ms", "sim end (ms)"
        );
        for (p, key) in PHASES {
            let kinds: Vec<String> = st
                .per_phase_kind
                .iter()
                .filter(|((q, _, _), _)| *q == p)
                .map(|(&(_, m, at), n)| format!("{} {n}", kind_name(m, at)))
                .collect();
            println!(
                "{:<16} {:>8} {:>10.1} {:>14.3}  {}",
                key,
                per_phase.get(&p).copied().unwrap_or(0),
                f.phase_wall_ms.get(&p).copied().unwrap_or(0.0),
                st.phase_end_ms.get(&p).copied().unwrap_or(0) as f64,
                kinds.join(", ")
            );
            if p == Phase::LidAssignment {
                println!(
                    "{:<16} {:>8} {:>10.1} {:>14}  ({:?}; timed alone)",
                    "routing", 0, route_ms, "-", a.routing
                );
            }
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
        for t in &traces {
            println!("trace: {t}");
        }
        println!(
            "verify ({v}): {} reachable pairs, {} unreachable, {} loops, {} switch→LID unroutable, {} to parked VF LIDs, channel dependencies {}",
            v.reachable,
            v.unreachable,
            v.loops,
            v.switch_unreachable,
            v.parked,
            if deadlock_free {
                "acyclic (deadlock-free)"
            } else {
                "cyclic"
            }
        );
    }
    let must_be_acyclic = a.routing != Engine::MinHop;
    super::check(up, || {
        format!(
            "{}: the subnet did not come up (SM phase {:?})",
            a.topology,
            sm.phase()
        )
    })?;
    super::check(v.ok(), || {
        let first = v
            .failures
            .first()
            .map(|x| x.describe(&f))
            .unwrap_or_default();
        format!("{}: routes wrong after bring-up ({v}): {first}", a.topology)
    })?;
    super::check(deadlock_free || !must_be_acyclic, || {
        format!(
            "{}: the {:?} routes' channel dependency graph has a cycle",
            a.topology, a.routing
        )
    })
}
