//! `ibkit model`: the SMPs of a bring-up predicted from the cabling by
//! ibkit's model, beside the OSU paper's formulas (for m-port n-trees) and
//! the counts and phase times measured by bringing the fabric up on the
//! simulator, with the reason for every kind where the paper's count
//! differs.

use super::args::{parse_policy, parse_vfs, TOPOLOGY_HELP};
use fabric::osu::ModelReport;
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

/// Runs `ibkit model`.
pub fn run(a: &ModelArgs) -> super::Outcome {
    let r = ModelReport::new(&a.topology, a.vfs, a.policy, !a.no_measure)?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print(&r);
    }
    match r.failure() {
        Some(e) => Err(super::Fail::Check(e)),
        None => Ok(()),
    }
}

/// The comparison as a table, with the phase times.
fn print(r: &ModelReport) {
    let t = &r.topology;
    println!(
        "{}: {} switches, {} CAs, {} cables, {} LIDs, {} LFT blocks per switch",
        t.spec, t.switches, t.cas, t.links, r.lids, r.blocks_per_switch
    );
    let dash = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    println!(
        "SMPs of a bring-up by kind       {:>10} {:>12} {:>10}",
        "OSU 2005", "ibkit model", "measured"
    );
    for k in &r.comparison {
        println!(
            "  {:<30} {:>10} {:>12} {:>10}",
            k.kind,
            dash(k.osu),
            k.ibkit_model,
            dash(k.measured)
        );
        if !k.why.is_empty() {
            println!("      {}", k.why);
        }
    }
    println!(
        "  {:<30} {:>10} {:>12} {:>10}",
        "total",
        dash(r.osu.as_ref().map(|c| c.get_s + c.set_s)),
        r.total,
        dash(r.measured.as_ref().map(|x| x.total))
    );
    println!(
        "full reconfiguration (vSwitch paper): {} switches × {} blocks = {} SMPs",
        t.switches, r.blocks_per_switch, r.full_reconfig_smps
    );
    let Some(c) = &r.osu else {
        println!(
            "(the OSU model covers m-port n-trees: mport-ntree:M:N, fat-tree-648, fat-tree-11664)"
        );
        return;
    };
    let (k, p) = (&c.constants_ms, &c.times_ms);
    println!(
        "OSU phase times (eq. 8–10, constants from the paper's Table 1: {:.3} ms per discovery SMP, {:.2} ms per node, {:.2} ms per LFT SMP):",
        k.t_td_per_smp, k.t_pc_per_node, k.t_pd_per_lft_smp
    );
    let me = r.measured.as_ref();
    // (phase, symbol, the paper's time, its per-unit constant, the unit,
    // the measured ms and µs per unit)
    let rows = [
        (
            "topology discovery",
            "t_TD",
            p.t_td,
            k.t_td_per_smp,
            "SMP",
            me.map(|x| (x.times_ms.td, x.per_unit_ms.td_per_smp)),
        ),
        (
            "path computation",
            "t_PC",
            p.t_pc,
            k.t_pc_per_node,
            "node",
            me.map(|x| (x.times_ms.pc, x.times_ms.pc / c.nodes.max(1) as f64)),
        ),
        (
            "path distribution",
            "t_PD",
            p.t_pd,
            k.t_pd_per_lft_smp,
            "LFT SMP",
            me.map(|x| (x.times_ms.pd, x.per_unit_ms.pd_per_lft_smp)),
        ),
    ];
    for (phase, sym, paper, unit_ms, unit, got) in rows {
        println!(
            "  {phase:<19} {sym} {paper:>12.1} ms   measured {:>9} ms ({} µs per {unit}, paper {:.0})",
            got.map_or("-".into(), |(ms, _)| format!("{ms:.1}")),
            got.map_or("-".into(), |(_, per)| format!("{:.2}", per * 1e3)),
            unit_ms * 1e3
        );
    }
    if me.is_some() {
        println!(
            "  (measured: ibkit's SM and simulator in one process, wall time; routing timed alone)"
        );
    }
}
