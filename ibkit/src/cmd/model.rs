//! `ibkit model`: the SMPs of a bring-up predicted from the cabling by
//! ibkit's model, beside the OSU paper's formulas (for m-port n-trees) and
//! the counts and phase times measured by bringing the fabric up on the
//! simulator, with the reason for every kind where the paper's count
//! differs.

use super::args::{parse_policy, parse_vfs, TOPOLOGY_HELP};
use fabric::osu;
use fabric::topology::Topology;
use serde_json::{json, Value};
use smi::sm::LidPolicy;

/// Options of `ibkit model`.
#[derive(Clone, Debug, clap::Args)]
pub struct ModelArgs {
    /// The fabric: a topology spec.
    #[arg(long, help = TOPOLOGY_HELP)]
    pub topology: String,
    /// VFs per hypervisor.
    #[arg(long, default_value_t = 0, value_parser = parse_vfs)]
    pub vfs: usize,
    /// LID policy for the VFs.
    #[arg(long, default_value = "prepopulated", value_parser = parse_policy)]
    pub policy: LidPolicy,
    /// Print the formulas only; do not bring the fabric up on the simulator to measure.
    #[arg(long)]
    pub no_measure: bool,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

/// One kind: name, the OSU count, ibkit's model, measured, why the OSU
/// count differs.
type Row = (String, Option<u64>, u64, Option<u64>, &'static str);

/// Runs `ibkit model`.
pub fn run(a: &ModelArgs) -> super::Outcome {
    let t = Topology::from_spec(&a.topology).map_err(|e| e.to_string())?;
    let (switches, cas, links) = (t.switches(), t.cas(), t.links());
    let m = fabric::model::predict(&t, a.vfs, a.policy);
    let counts =
        osu::mport_ntree_of(&a.topology).and_then(|(m, n)| osu::Counts::new(m, n, osu::PAPER_MTU));
    if let Some(c) = &counts {
        // The spec names an m-port n-tree: its size must be the paper's.
        if (c.switches, c.nodes) != (switches as u64, cas as u64) {
            return Err(format!(
                "{}: {switches} switches and {cas} CAs, but the OSU formulas give {} and {}",
                a.topology, c.switches, c.nodes
            )
            .into());
        }
    }
    let measured = if !a.no_measure {
        Some(osu::measure(&a.topology, a.vfs, a.policy).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let k = osu::PaperConstants::TABLE_1;
    let times = counts.as_ref().map(|c| osu::times(c, &k));
    let rows: Vec<Row> = m
        .kinds
        .iter()
        .map(|&(kind, n)| {
            let o = counts.as_ref().and_then(|c| c.of_kind(kind));
            let why = match (&counts, o) {
                (None, _) => "",
                (Some(_), Some(_)) => osu::reason(kind).unwrap_or(""),
                (Some(_), None) => osu::uncounted(kind),
            };
            (
                kind.to_string(),
                o,
                n,
                measured
                    .as_ref()
                    .map(|x| x.kinds.get(kind).copied().unwrap_or(0)),
                why,
            )
        })
        .collect();
    if a.json {
        let kinds: serde_json::Map<String, Value> = m
            .kinds
            .iter()
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect();
        let osu_json = match (&counts, &times) {
            (Some(c), Some(t)) => json!({
                "m": c.m, "n": c.n, "mtu": c.mtu, "nodes": c.nodes, "switches": c.switches,
                "get_s": c.get_s,
                "get_s_node_info": c.get_s_node_info,
                "get_s_port_info": c.get_s_port_info,
                "set_s": c.set_s,
                "set_s_port_info": c.set_s_port_info,
                "set_s_lft": c.set_s_lft,
                "lft_smps_per_switch": c.lft_per_switch,
                "constants_ms": {"t_td_per_smp": k.td_per_smp_ms, "t_pc_per_node": k.pc_per_node_ms, "t_pd_per_lft_smp": k.pd_per_lft_smp_ms, "from": "the model column of the paper's Table 1, (m, n) = (8, 1)"},
                "times_ms": {"t_td": t.t_td_ms, "t_pc": t.t_pc_ms, "t_pd": t.t_pd_ms},
            }),
            _ => Value::Null,
        };
        let measured_json = measured.as_ref().map(|x| {
            json!({
                "by_kind": x.kinds, "total": x.total,
                "times_ms": {"td": x.td_ms, "pc": x.pc_ms, "pd": x.pd_ms},
                "td_smps": x.td_smps, "pd_smps": x.pd_smps,
                "per_unit_ms": {
                    "td_per_smp": x.td_ms / x.td_smps.max(1) as f64,
                    "pc_per_node": x.pc_ms / cas.max(1) as f64,
                    "pd_per_lft_smp": x.pd_ms / x.pd_smps.max(1) as f64,
                },
            })
        });
        let comparison: Vec<Value> = rows
            .iter()
            .map(|(kind, o, n, me, why)| {
                json!({"kind": kind, "osu": o, "ibkit_model": n, "measured": me, "why": why})
            })
            .collect();
        println!(
            "{}",
            json!({
                "topology": {"spec": a.topology, "switches": switches, "cas": cas, "links": links},
                "by_kind": kinds,
                "total": m.total(),
                "lids": m.lids,
                "blocks_per_switch": m.blocks,
                "full_reconfig_smps": m.full_reconfig_smps,
                "osu": osu_json,
                "measured": measured_json,
                "comparison": comparison,
            })
        );
    } else {
        println!(
            "{}: {switches} switches, {cas} CAs, {links} cables, {} LIDs, {} LFT blocks per switch",
            a.topology, m.lids, m.blocks
        );
        let dash = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        println!(
            "SMPs of a bring-up by kind       {:>10} {:>12} {:>10}",
            "OSU 2005", "ibkit model", "measured"
        );
        for (kind, o, n, me, why) in &rows {
            println!("  {kind:<30} {:>10} {n:>12} {:>10}", dash(*o), dash(*me));
            if !why.is_empty() {
                println!("      {why}");
            }
        }
        println!(
            "  {:<30} {:>10} {:>12} {:>10}",
            "total",
            dash(counts.as_ref().map(|c| c.get_s + c.set_s)),
            m.total(),
            dash(measured.as_ref().map(|x| x.total))
        );
        println!(
            "full reconfiguration (vSwitch paper): {switches} switches × {} blocks = {} SMPs",
            m.blocks, m.full_reconfig_smps
        );
        match (&counts, &times) {
            (Some(c), Some(t)) => {
                println!(
                    "OSU phase times (eq. 8–10, constants from the paper's Table 1: {:.3} ms per discovery SMP, {:.2} ms per node, {:.2} ms per LFT SMP):",
                    k.td_per_smp_ms, k.pc_per_node_ms, k.pd_per_lft_smp_ms
                );
                let me = measured.as_ref();
                let per = |ms: f64, n: u64| ms * 1e3 / n.max(1) as f64;
                // (phase, symbol, the paper's time, its per-unit constant,
                // the unit, the measured ms and units)
                let rows = [
                    ("topology discovery", "t_TD", t.t_td_ms, k.td_per_smp_ms, "SMP", me.map(|x| (x.td_ms, x.td_smps))),
                    ("path computation", "t_PC", t.t_pc_ms, k.pc_per_node_ms, "node", me.map(|x| (x.pc_ms, c.nodes))),
                    ("path distribution", "t_PD", t.t_pd_ms, k.pd_per_lft_smp_ms, "LFT SMP", me.map(|x| (x.pd_ms, x.pd_smps))),
                ];
                for (phase, sym, paper, unit_ms, unit, got) in rows {
                    println!(
                        "  {phase:<19} {sym} {paper:>12.1} ms   measured {:>9} ms ({} µs per {unit}, paper {:.0})",
                        got.map_or("-".into(), |(ms, _)| format!("{ms:.1}")),
                        got.map_or("-".into(), |(ms, n)| format!("{:.2}", per(ms, n))),
                        unit_ms * 1e3
                    );
                }
                if me.is_some() {
                    println!("  (measured: ibkit's SM and simulator in one process, wall time; routing timed alone)");
                }
            }
            _ => println!("(the OSU model covers m-port n-trees: mport-ntree:M:N, fat-tree-648, fat-tree-11664)"),
        }
    }
    if let Some(x) = &measured {
        // The model is exact on trees: say so, or fail with the kind.
        if a.vfs == 0 && osu::mport_ntree_of(&a.topology).is_some() {
            for (kind, n) in &m.kinds {
                let got = x.kinds.get(*kind).copied().unwrap_or(0);
                super::check(got == *n, || {
                    format!(
                        "{}: ibkit's model predicts {n} {kind}, the simulator counted {got}",
                        a.topology
                    )
                })?;
            }
        }
    }
    Ok(())
}
