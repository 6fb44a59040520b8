//! The vSwitch migration experiment of the vSwitch paper (000 in the
//! project's seeds), measured: hypervisors with SR-IOV VFs on a simulated
//! fabric brought up by ibkit's SM, VMs started, live migrations (near:
//! same leaf; far: the farthest leaf; random) carried out by swapping or
//! copying LFT entries, each measured in SMPs and switches touched and
//! checked by walking the installed tables, beside a full traditional
//! reconfiguration of the same fabric, measured by doing it. [`table`]
//! measures the paper's Table I on its four fat trees.
//!
//! It returns report structs; `ibkit migrate` renders them as text, JSON
//! and SVG.

use crate::rng::Rng;
use crate::sim::{Fabric, FabricError, SimConfig};

mod report;
use crate::topology::{Topology, TopologyError};
use mad_core::attr::AttributeId;
use mad_core::Method;
pub use report::*;
use smi::sm::routing;
use smi::sm::{Engine, LidPolicy, MigrationPlan, Sm, SmConfig, SmError, VmError, VmId};
use std::time::Instant;

/// Why a run of the experiment stopped (a check that fails does not stop
/// it: the report carries that).
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The topology spec is not one.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The simulator refused the fabric.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The SM did not bring the subnet up.
    #[error("{topology}: {}", why.as_ref().map_or("the subnet did not come up".to_string(), |e| e.to_string()))]
    NotUp {
        /// The fabric.
        topology: String,
        /// The SM's error, if it gave one.
        why: Option<SmError>,
    },
    /// The SM refused a VM operation.
    #[error(transparent)]
    Vm(#[from] VmError),
    /// A step's SMPs did not all complete.
    #[error("{0} did not complete")]
    Incomplete(&'static str),
}

/// How one run of the experiment is set up (`ibkit migrate`'s options).
#[derive(Clone, Debug)]
pub struct MigrateConfig {
    /// Topology spec.
    pub topology: String,
    /// LID policy.
    pub policy: LidPolicy,
    /// VFs per hypervisor.
    pub vfs: usize,
    /// VMs to start.
    pub vms: usize,
    /// Migrations to perform (near, far, random in turn).
    pub migrations: usize,
    /// Routing engine.
    pub routing: Engine,
    /// Point the VM's LID at port 255 first (deadlock mitigation).
    pub mitigate: bool,
    /// Seed of the random choices.
    pub seed: u64,
    /// After each step, walk every live node to every LID while that is
    /// at most this many walks; above it, walk every live node to the LIDs
    /// the step changed and compare every other LFT entry with its value
    /// before the step. The bring-up and a full reconfiguration are always
    /// checked on all pairs.
    pub verify_limit: u64,
}

impl Default for MigrateConfig {
    fn default() -> Self {
        MigrateConfig {
            topology: "fat-tree-648".into(),
            policy: LidPolicy::Prepopulated,
            vfs: 16,
            vms: 64,
            migrations: 3,
            routing: Engine::FatTree,
            mitigate: false,
            seed: 1,
            verify_limit: DEFAULT_VERIFY_LIMIT,
        }
    }
}

/// Walks above which a step is checked on the LIDs it changed rather than
/// on all pairs (about a quarter of a second of walking on this machine).
pub const DEFAULT_VERIFY_LIMIT: u64 = 50_000_000;

/// One of `n` (0 when `n` is 0).
fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.below(n.max(1) as u64) as usize
}

/// When to measure the full reconfiguration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FullAt {
    /// Right after bring-up, before any VM (Table I's setting).
    Start,
    /// After the migrations (the same fabric, VMs included).
    End,
}

/// Switch hop distances from switch node `from` over the SM's graph
/// (`u16::MAX`: unreachable), by node index.
fn hops_from(sm: &Sm, from: usize) -> Vec<(usize, u16)> {
    let switches = sm.graph_switches();
    let Some(start) = switches.iter().position(|&n| n == from) else {
        return Vec::new();
    };
    let d = routing::hops_from(sm.routing_graph(), start);
    switches.iter().copied().zip(d).collect()
}

/// The check after a step that changed the routes of `changed` only: all
/// pairs while every live node times every LID is at most `limit` walks,
/// else every live node to `changed`.
pub fn verify_step(f: &Fabric, limit: u64, changed: &[mad_core::Lid]) -> Checked {
    let v = if f.all_pairs_walks() <= limit {
        f.verify()
    } else {
        f.verify_lids(changed)
    };
    Checked::new(f, &v)
}

/// True when the LFT entries of `after` equal those of `before` but for
/// the LIDs in `moved` on the switches in `touched` (fabric node indexes).
fn others_unchanged(
    before: &[(usize, Vec<u8>)],
    after: &[(usize, Vec<u8>)],
    touched: &[usize],
    moved: &[u16],
) -> bool {
    before.len() == after.len()
        && before.iter().zip(after).all(|((sw, x), (sw2, y))| {
            sw == sw2
                && x.len() == y.len()
                && x.iter().zip(y).enumerate().all(|(l, (p, q))| {
                    p == q || (touched.contains(sw) && moved.contains(&(l as u16)))
                })
        })
}

fn lft_count(sm: &Sm) -> u64 {
    sm.stats()
        .count(Method::Set, AttributeId::LinearForwardingTable)
}

/// Picks the destination of a migration of the VM on `src`.
fn destination(sm: &Sm, src: usize, kind: Kind, rng: &mut Rng) -> Option<usize> {
    let leaf = sm.attachment(src)?.0;
    let hyps = sm.hypervisors();
    let free = |h: usize| {
        h != src
            && sm.nodes()[h]
                .vfs
                .iter()
                .any(|s| s.vm.is_none() && (sm.lid_policy() == LidPolicy::Dynamic || s.lid != 0))
    };
    match kind {
        Kind::Near => hyps
            .iter()
            .copied()
            .filter(|&h| free(h) && sm.attachment(h).is_some_and(|a| a.0 == leaf))
            .nth(pick(rng, 2)),
        Kind::Far => {
            let d: std::collections::HashMap<usize, u16> =
                hops_from(sm, leaf).into_iter().collect();
            let far = hyps
                .iter()
                .filter_map(|&h| sm.attachment(h).map(|a| d.get(&a.0).copied().unwrap_or(0)))
                .max()?;
            let cands: Vec<usize> = hyps
                .iter()
                .copied()
                .filter(|&h| {
                    free(h)
                        && sm
                            .attachment(h)
                            .is_some_and(|a| d.get(&a.0).copied().unwrap_or(0) == far)
                })
                .collect();
            (!cands.is_empty()).then(|| cands[pick(rng, cands.len())])
        }
        Kind::Random => {
            let cands: Vec<usize> = hyps.iter().copied().filter(|&h| free(h)).collect();
            (!cands.is_empty()).then(|| cands[pick(rng, cands.len())])
        }
    }
}

fn time_plan(sm: &Sm, vm: VmId, dst: usize) -> Result<(MigrationPlan, f64), VmError> {
    let t = Instant::now();
    let mut n = 0u32;
    let plan = loop {
        let p = sm.plan_migration(vm, dst)?;
        n += 1;
        if n >= 1000 || t.elapsed().as_millis() >= 20 {
            break p;
        }
    };
    Ok((plan, t.elapsed().as_secs_f64() * 1e6 / f64::from(n)))
}

/// What a full reconfiguration measured: SMPs, route computation wall ms,
/// simulated distribution ms.
struct Full {
    smps: u64,
    route_ms: f64,
    sim_ms: f64,
}

/// Recomputes every route and sends every LFT block, measured.
fn full_reconfiguration(
    sm: &mut Sm,
    f: &mut Fabric,
    progress: &mut dyn FnMut(Note),
) -> Result<Full, MigrateError> {
    progress(Note::Stage(
        "full reconfiguration (recompute every route, send every LFT block)…".into(),
    ));
    let before = sm.stats().total();
    let t = Instant::now();
    let queued = sm.full_reconfigure()?;
    let route_ms = t.elapsed().as_secs_f64() * 1e3;
    let t0 = f.now_ns();
    if !f.run(sm) {
        return Err(MigrateError::Incomplete("the full reconfiguration"));
    }
    let full = Full {
        smps: sm.stats().total() - before,
        route_ms,
        sim_ms: (f.now_ns() - t0) as f64 / 1e6,
    };
    debug_assert_eq!(queued as u64, full.smps);
    progress(Note::Detail(format!(
        "  {} SMPs, routes {:.0} ms wall, distribution {:.1} ms simulated",
        full.smps, full.route_ms, full.sim_ms
    )));
    Ok(full)
}

/// What a run tells its caller while it goes: a line of progress, and
/// whether it begins a fabric, a stage of one (VMs, a migration, the full
/// reconfiguration), or reports on the stage under way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// Bringing a fabric up: the first stage of a run.
    Fabric(String),
    /// A later stage begins.
    Stage(String),
    /// What the stage under way found (indented).
    Detail(String),
}

impl Note {
    /// The line.
    pub fn text(&self) -> &str {
        match self {
            Note::Fabric(s) | Note::Stage(s) | Note::Detail(s) => s,
        }
    }
}

/// Runs one fabric: bring-up, VMs, migrations of the given kinds, and the
/// full reconfiguration; `progress` hears what is going on. A check that
/// fails does not stop the run: the report carries it ([`FabricReport::failure`]).
pub fn session(
    a: &MigrateConfig,
    kinds: &[Kind],
    full_at: FullAt,
    progress: &mut dyn FnMut(Note),
) -> Result<FabricReport, MigrateError> {
    let topo = Topology::from_spec(&a.topology)?;
    let (switches, nodes) = (topo.switches(), topo.cas());
    let mut f = Fabric::new(
        topo,
        SimConfig {
            vfs: a.vfs,
            ..SimConfig::default()
        },
    )?;
    progress(Note::Fabric(format!(
        "bringing up {} ({switches} switches, {nodes} CAs, {} VFs per hypervisor, {} LIDs)…",
        a.topology,
        a.vfs,
        a.policy.name()
    )));
    let t = Instant::now();
    let mut sm = Sm::new(SmConfig {
        routing: a.routing,
        lid_policy: a.policy,
        ..SmConfig::default()
    });
    if !f.bring_up(&mut sm) {
        return Err(MigrateError::NotUp {
            topology: a.topology.clone(),
            why: sm.error().cloned(),
        });
    }
    let bring_up_ms = t.elapsed().as_secs_f64() * 1e3;
    let lids = sm.max_lid();
    let bring_up_smps = sm.stats().total();
    progress(Note::Detail(format!(
        "  up: {lids} LIDs, {bring_up_smps} SMPs, {bring_up_ms:.0} ms wall"
    )));
    let full_start = match full_at {
        FullAt::Start => Some(full_reconfiguration(&mut sm, &mut f, progress)?),
        FullAt::End => None,
    };
    // The base every later check builds on: all pairs, whatever the size.
    let baseline = Checked::new(&f, &f.verify());
    progress(Note::Detail(format!(
        "  routes checked, all pairs ({} walks): {}",
        baseline.walks,
        yes(&baseline)
    )));

    // Start VMs spread over the hypervisors.
    let hyps = sm.hypervisors();
    let want = a.vms.min(hyps.len() * a.vfs);
    progress(Note::Stage(format!("starting {want} VMs…")));
    let (before, lft0) = (sm.stats().total(), lft_count(&sm));
    let snap = f.lft_snapshot(sm.max_lid());
    let mut vms = Vec::new();
    for i in 0..want {
        let h = hyps[(i * hyps.len() / want.max(1) + i / hyps.len()) % hyps.len()];
        let id = sm.create_vm(h, 0x0002_c903_00de_0000 + i as u64)?;
        vms.push(id);
        if !f.run(&mut sm) {
            return Err(MigrateError::Incomplete("starting a VM"));
        }
    }
    let vm_lids: Vec<u16> = vms
        .iter()
        .filter_map(|&v| sm.vm(v).map(|v| v.lid))
        .collect();
    let moved: Vec<mad_core::Lid> = vm_lids.iter().map(|&l| mad_core::Lid(l)).collect();
    let mut vm_start = verify_step(&f, a.verify_limit, &moved);
    // Starting a VM may write its own LID's entries (dynamic LIDs), and
    // nothing else.
    let all_switches: Vec<usize> = snap.iter().map(|(s, _)| *s).collect();
    let mut snap = snap;
    for (_, row) in &mut snap {
        row.resize(
            usize::from(sm.max_lid()) + 1,
            mad_core::attr::forwarding::DROP_PORT,
        );
    }
    if !others_unchanged(
        &snap,
        &f.lft_snapshot(sm.max_lid()),
        &all_switches,
        &vm_lids,
    ) && vm_start.failure.is_none()
    {
        vm_start.failure = Some("starting the VMs changed LFT entries of other LIDs".into());
    }
    let mut rep = FabricReport {
        topology: a.topology.clone(),
        policy: a.policy,
        vfs: a.vfs,
        nodes,
        switches,
        hypervisors: hyps.len(),
        lids,
        blocks: u64::from(lids) / 64 + 1,
        bring_up_smps,
        bring_up_ms,
        vms: vms.len(),
        vm_start_smps: sm.stats().total() - before,
        vm_start_lft_smps: lft_count(&sm) - lft0,
        full_reconfig_smps: full_start.as_ref().map_or(0, |x| x.smps),
        full_reconfig_route_ms: full_start.as_ref().map_or(0.0, |x| x.route_ms),
        full_reconfig_sim_ms: full_start.as_ref().map_or(0.0, |x| x.sim_ms),
        migrations: Vec::new(),
        baseline,
        vm_start,
        full_end: None,
    };
    progress(Note::Detail(format!(
        "  {} SMPs ({} LFT); checked ({}, {} walks): {}",
        rep.vm_start_smps,
        rep.vm_start_lft_smps,
        rep.vm_start.label(),
        rep.vm_start.walks,
        yes(&rep.vm_start)
    )));

    let mut rng = Rng::new(a.seed);
    for (i, &kind) in kinds.iter().enumerate() {
        if vms.is_empty() {
            break;
        }
        let vm = vms[i % vms.len()];
        let src = sm
            .vm(vm)
            .map(|v| v.hypervisor)
            .ok_or(VmError::NoSuchVm(vm))?;
        let Some(dst) = destination(&sm, src, kind, &mut rng) else {
            progress(Note::Detail(format!(
                "  no {} destination for VM {}",
                kind.name(),
                vm.0
            )));
            continue;
        };
        let (plan, plan_us) = time_plan(&sm, vm, dst)?;
        let name = |i: usize| sm.nodes()[i].info.node_guid.0;
        let fname = |f: &Fabric, g: u64| {
            f.node_by_guid(g)
                .map(|i| f.topo.nodes[i].name.clone())
                .unwrap_or_default()
        };
        let (from, to) = (fname(&f, name(src)), fname(&f, name(dst)));
        progress(Note::Stage(format!(
            "migration {}/{} ({}): VM {} (LID {}) {from} → {to}: plan {} LFT SMPs on {} switches, computed in {plan_us:.1} µs…",
            i + 1,
            kinds.len(),
            kind.name(),
            vm.0,
            plan.vm_lid,
            plan.lft_smps(),
            plan.switches.len()
        )));
        let snap = f.lft_snapshot(sm.max_lid());
        let (before, lft0, t0) = (sm.stats().total(), lft_count(&sm), f.now_ns());
        sm.apply_migration(&plan, a.mitigate)?;
        if !f.run(&mut sm) {
            return Err(MigrateError::Incomplete("a migration"));
        }
        let touched: Vec<usize> = plan
            .switches
            .iter()
            .filter_map(|&s| f.node_by_guid(sm.nodes()[s].info.node_guid.0))
            .collect();
        let mut moved = vec![plan.vm_lid];
        moved.extend(plan.swapped_lid);
        let others = others_unchanged(&snap, &f.lft_snapshot(sm.max_lid()), &touched, &moved);
        let moved_lids: Vec<mad_core::Lid> = moved.iter().map(|&l| mad_core::Lid(l)).collect();
        let m = MigrationReport {
            kind,
            vm: vm.0,
            lid: plan.vm_lid,
            from,
            to,
            smps: sm.stats().total() - before,
            lft_smps: lft_count(&sm) - lft0,
            switches_updated: plan.switches.len(),
            plan_us,
            sim_us: (f.now_ns() - t0) as f64 / 1e3,
            check: verify_step(&f, a.verify_limit, &moved_lids),
            others_unchanged: others,
        };
        progress(Note::Detail(format!(
            "  done: {} SMPs ({} LFT + {} Set(VPortInfo)), {} switches, {:.1} µs simulated; checked ({}, {} walks): {}, other LIDs untouched: {}",
            m.smps,
            m.lft_smps,
            m.smps - m.lft_smps,
            m.switches_updated,
            m.sim_us,
            m.check.label(),
            m.check.walks,
            yes(&m.check),
            if m.others_unchanged { "yes" } else { "NO" }
        )));
        rep.migrations.push(m);
    }
    if full_at == FullAt::End {
        let full = full_reconfiguration(&mut sm, &mut f, progress)?;
        rep.full_reconfig_smps = full.smps;
        rep.full_reconfig_route_ms = full.route_ms;
        rep.full_reconfig_sim_ms = full.sim_ms;
        let c = Checked::new(&f, &f.verify());
        progress(Note::Detail(format!(
            "  routes checked, all pairs ({} walks): {}",
            c.walks,
            yes(&c)
        )));
        rep.full_end = Some(c);
    }
    Ok(rep)
}

fn yes(c: &Checked) -> &'static str {
    if c.ok() {
        "yes"
    } else {
        "NO"
    }
}

/// The kinds of `k` migrations: near, far, random in turn.
pub fn kinds(k: usize) -> Vec<Kind> {
    (0..k)
        .map(|i| [Kind::Near, Kind::Far, Kind::Random][i % 3])
        .collect()
}

/// The four fat trees of the vSwitch paper's Table I.
pub const TABLE_FABRICS: [&str; 4] = [
    "fat-tree-324",
    "fat-tree-648",
    "fat-tree-5832",
    "fat-tree-11664",
];

/// Measures Table I: for each fat tree, a dynamic-LID bring-up (so the LIDs
/// are the switches' and the nodes', as in the paper) with the full
/// reconfiguration measured before any VM and a sweep of near and far
/// copies; and a prepopulated bring-up with one VF per hypervisor for the
/// sweep of near and far swaps.
pub fn table(
    fabrics: &[&str],
    sweep: usize,
    verify_limit: u64,
    progress: &mut dyn FnMut(Note),
) -> Result<Vec<TableRow>, MigrateError> {
    let mut kinds = vec![Kind::Near];
    kinds.extend(std::iter::repeat_n(Kind::Far, sweep));
    let mut rows = Vec::new();
    for spec in fabrics {
        let base = MigrateConfig {
            topology: spec.to_string(),
            vms: sweep + 1,
            verify_limit,
            ..MigrateConfig::default()
        };
        let copy = session(
            &MigrateConfig {
                policy: LidPolicy::Dynamic,
                vfs: 2,
                ..base.clone()
            },
            &kinds,
            FullAt::Start,
            progress,
        )?;
        let swap = session(
            &MigrateConfig {
                policy: LidPolicy::Prepopulated,
                vfs: 1,
                ..base
            },
            &kinds,
            FullAt::Start,
            progress,
        )?;
        rows.push(TableRow { copy, swap });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Check;
    use crate::sim::SimNode;

    /// A failed check ends the run with one line that names the fabric,
    /// the migration, the LID and where the walk ended.
    #[test]
    fn a_failed_check_names_the_migration_the_lid_and_where_the_walk_ended() {
        let a = MigrateConfig {
            topology: "fat-tree-324".into(),
            vfs: 2,
            vms: 3,
            ..MigrateConfig::default()
        };
        let mut rep = session(&a, &kinds(3), FullAt::End, &mut |_| {}).unwrap();
        assert_eq!(rep.failure(), None);
        assert!(rep
            .migrations
            .iter()
            .all(|m| m.check.check == Check::AllLids));

        // Break the routes of one CA's LID on a fabric like it, and put
        // that check in the report as the second migration's.
        let (mut f, _, up) =
            crate::sim::bring_up("fat-tree-324", SimConfig::default(), SmConfig::default())
                .unwrap();
        assert!(up);
        let ca = (0..f.nodes.len())
            .find(|&i| i != f.sm_node && matches!(f.nodes[i], SimNode::Ca(_)))
            .unwrap();
        let (leaf, _) = f.topo.peer_of(ca, 1).unwrap();
        let lid = f.nodes[ca].lid();
        if let SimNode::Switch(s) = &mut f.nodes[leaf] {
            s.model.lft[usize::from(lid.0)] = 0xFF;
        }
        rep.migrations[1].check = verify_step(&f, 0, &[lid]);
        assert_eq!(rep.migrations[1].check.check, Check::ChangedLids);
        let line = rep.failure().unwrap();
        let (vm, from, to) = (
            rep.migrations[1].vm,
            &rep.migrations[1].from,
            &rep.migrations[1].to,
        );
        assert!(
            line.starts_with(&format!(
                "fat-tree-324 (prepopulated LIDs), migration 2 (far, VM {vm}, LID "
            )) && line.contains(&format!("{from} → {to})")),
            "{line}"
        );
        let leaf_name = &f.topo.nodes[leaf].name;
        assert!(
            line.contains(&format!(
                "to LID {} (held by {})",
                lid.0, f.topo.nodes[ca].name
            )) && line.contains(&format!("stopped at {leaf_name} without a route")),
            "{line}"
        );
        assert!(!line.contains('\n'));

        // Other LIDs changed: said as such.
        rep.migrations[1].check = verify_step(&f, u64::MAX, &[]);
        assert_eq!(rep.migrations[1].check.check, Check::AllLids);
        assert!(!rep.migrations[1].check.ok());
        rep.migrations[1].check.failure = None;
        rep.migrations[1].others_unchanged = false;
        assert!(rep.failure().unwrap().ends_with(
            "LFT entries of other LIDs changed, or changed on switches outside the plan"
        ));
    }

    /// Entries of the moved LIDs may change on the planned switches only.
    #[test]
    fn others_unchanged_exempts_only_the_moved_lids_on_the_touched_switches() {
        let before = vec![(3, vec![1, 2, 3, 4]), (5, vec![1, 2, 3, 4])];
        let mut after = before.clone();
        after[0].1[2] = 9;
        assert!(others_unchanged(&before, &after, &[3], &[2]));
        assert!(
            !others_unchanged(&before, &after, &[5], &[2]),
            "not planned there"
        );
        assert!(
            !others_unchanged(&before, &after, &[3], &[1]),
            "not a moved LID"
        );
        after[1].1.push(7);
        assert!(
            !others_unchanged(&before, &after, &[3, 5], &[2]),
            "a row grew"
        );
    }
}
