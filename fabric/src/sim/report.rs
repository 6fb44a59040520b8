//! One measured bring-up, as `ibkit sim` reports it: build the fabric,
//! bring it up with ibkit's SM, count the SMPs per kind and phase against
//! the model's prediction, time route computation alone, walk every node to
//! every LID, and check the channel dependencies. The report derives its
//! JSON; the fabric and the SM stay available for traces, exports and
//! captures.

use super::{Fabric, FabricError, SimConfig, Verify};
use crate::model::{kind_name, predict};
use crate::topology::Topology;
use serde::{Serialize, Serializer};
use smi::sm::{Engine, LidPolicy, Phase, Sm, SmConfig};
use std::time::Instant;

/// What to bring up, and how.
#[derive(Clone, Debug)]
pub struct BringUpConfig {
    /// The topology spec.
    pub topology: String,
    /// SMPs outstanding at once.
    pub window: u16,
    /// Probability that an SMP is lost on a cable.
    pub loss: f64,
    /// Routing engine.
    pub routing: Engine,
    /// VFs per hypervisor (0: no vSwitch hypervisors).
    pub vfs: usize,
    /// LID policy of the VFs.
    pub policy: LidPolicy,
    /// Nanoseconds for an SMP to cross one cable.
    pub hop_ns: u64,
    /// Extra nanoseconds at each directed-route hop.
    pub dr_hop_ns: u64,
    /// Keep every SMP for a pcap.
    pub capture: bool,
    /// LMC of every CA port ([`SmConfig::lmc`]).
    pub lmc: u8,
    /// Enhanced switch ports 0 take the LMC too ([`SmConfig::lmc_esp0`]).
    pub lmc_esp0: bool,
}

/// SMP counts by kind (`Get(NodeInfo)`, …), in the SM's order; a JSON
/// object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KindCounts(pub Vec<(String, u64)>);

impl KindCounts {
    /// The count of one kind (0 when it was not sent).
    pub fn get(&self, kind: &str) -> u64 {
        self.0
            .iter()
            .find(|(k, _)| k == kind)
            .map_or(0, |&(_, n)| n)
    }
}

impl Serialize for KindCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, n)| (k, n)))
    }
}

/// The fabric measured.
#[derive(Clone, Debug, Serialize)]
pub struct FabricSummary {
    /// The topology spec.
    pub spec: String,
    /// Switches.
    pub switches: usize,
    /// Channel adapters.
    pub cas: usize,
    /// The highest LID assigned.
    pub lids: u16,
    /// LIDs a live port holds (with LMC, or VF LIDs, fewer than the
    /// highest: LIDs go in aligned blocks of `2^LMC`).
    pub lids_held: u64,
    /// VFs per hypervisor.
    pub vfs: usize,
    /// vSwitch hypervisors found.
    pub hypervisors: usize,
}

/// The SMPs of the whole bring-up.
#[derive(Clone, Debug, Serialize)]
pub struct SmpSummary {
    /// By kind.
    pub by_kind: KindCounts,
    /// In all.
    pub total: u64,
    /// Retransmissions.
    pub retries: u64,
    /// Requests given up on.
    pub given_up: u64,
}

/// One phase of the bring-up.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    /// SMPs of the phase by kind.
    pub smps: KindCounts,
    /// SMPs of the phase.
    pub total: u64,
    /// Wall milliseconds the simulator spent in it.
    pub wall_ms: f64,
    /// Simulated milliseconds at its end (none when it sent nothing).
    pub sim_end_ms: Option<u64>,
}

/// Route computation, timed alone on the discovered graph.
#[derive(Clone, Debug, Serialize)]
pub struct RoutingPhase {
    /// No SMPs: an empty object.
    pub smps: KindCounts,
    /// 0.
    pub total: u64,
    /// Wall milliseconds.
    pub wall_ms: f64,
    /// The engine.
    pub engine: &'static str,
}

/// The phases, in bring-up order, with route computation beside them.
#[derive(Clone, Debug, Serialize)]
pub struct Phases {
    /// Discovery.
    pub discovery: PhaseReport,
    /// LID assignment.
    pub lid_assignment: PhaseReport,
    /// LFT distribution.
    pub distribution: PhaseReport,
    /// Port activation.
    pub activation: PhaseReport,
    /// Route computation.
    pub routing: RoutingPhase,
}

impl Phases {
    /// The four SM phases with their names, in order.
    pub fn sm_phases(&self) -> [(&'static str, Phase, &PhaseReport); 4] {
        [
            ("discovery", Phase::Discovery, &self.discovery),
            ("lid_assignment", Phase::LidAssignment, &self.lid_assignment),
            ("distribution", Phase::Distribution, &self.distribution),
            ("activation", Phase::Activation, &self.activation),
        ]
    }
}

/// Wall milliseconds of each step.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WallMs {
    /// Building the fabric.
    pub build: f64,
    /// Bringing it up.
    pub bring_up: f64,
    /// Route computation alone.
    pub route: f64,
    /// The all-pairs walk.
    pub verify: f64,
}

/// The model's prediction from the cabling.
#[derive(Clone, Debug, Serialize)]
pub struct ModelSummary {
    /// By kind.
    pub by_kind: KindCounts,
    /// In all.
    pub total: u64,
    /// LIDs assigned.
    pub lids: u64,
    /// LFT blocks per switch.
    pub blocks_per_switch: u64,
    /// Switches × blocks.
    pub full_reconfig_smps: u64,
}

/// The route check.
#[derive(Clone, Debug, Serialize)]
pub struct VerifySummary {
    /// "all pairs".
    pub check: &'static str,
    /// Live nodes walked from.
    pub sources: u64,
    /// LIDs walked to.
    pub lids: u64,
    /// CA walks delivered.
    pub reachable_pairs: u64,
    /// CA walks not delivered.
    pub unreachable_pairs: u64,
    /// Walks that looped.
    pub loops: u64,
    /// Switch walks not delivered.
    pub switch_unreachable: u64,
    /// Walks to parked LIDs that ended at their hypervisor.
    pub parked_pairs: u64,
    /// Walks to parked LIDs that ended elsewhere.
    pub misparked_pairs: u64,
    /// LIDs held by none or two, nodes without one.
    pub bad_lids: u64,
    /// Nothing failed.
    pub ok: bool,
    /// The channel dependency graph of the routes is acyclic.
    pub deadlock_free: bool,
}

/// A measured bring-up; serializes as `ibkit sim --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct BringUpReport {
    /// The fabric.
    pub topology: FabricSummary,
    /// The subnet came up.
    pub up: bool,
    /// SMPs.
    pub smps: SmpSummary,
    /// Per phase.
    pub phases: Phases,
    /// The routing engine.
    pub routing: &'static str,
    /// Wall times.
    pub wall_ms: WallMs,
    /// Simulated milliseconds at the end.
    pub sim_ms: f64,
    /// The model's prediction.
    pub model: ModelSummary,
    /// `--trace` walks, described.
    pub traces: Vec<String>,
    /// The route check.
    pub verify: VerifySummary,
}

/// A bring-up and its measurement: the fabric and SM it left, the full
/// route check and the report.
pub struct BringUp {
    /// The fabric, with the SM's tables installed.
    pub fabric: Fabric,
    /// The SM.
    pub sm: Sm,
    /// The route check in full (its failures name nodes).
    pub verify: Verify,
    /// The routing engine.
    pub engine: Engine,
    /// The report.
    pub report: BringUpReport,
}

/// Why a bring-up could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BringUpError {
    /// The topology or the fabric is not valid.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The SM stopped with an error.
    #[error(transparent)]
    Sm(#[from] smi::sm::SmError),
}

impl BringUp {
    /// Builds the fabric and brings it up; `checking` is called between
    /// the bring-up and the route check (a progress line).
    pub fn run(cfg: &BringUpConfig, checking: impl FnOnce()) -> Result<BringUp, BringUpError> {
        let t0 = Instant::now();
        let topo = Topology::from_spec(&cfg.topology).map_err(FabricError::from)?;
        let (switches, cas) = (topo.switches(), topo.cas());
        let model = predict(&topo, cfg.vfs, cfg.policy);
        let mut f = Fabric::new(
            topo,
            SimConfig {
                loss: cfg.loss,
                vfs: cfg.vfs,
                hop_ns: cfg.hop_ns,
                dr_hop_ns: cfg.dr_hop_ns,
                ..SimConfig::default()
            },
        )?;
        if cfg.capture {
            f.enable_capture();
        }
        let build = t0.elapsed().as_secs_f64() * 1e3;
        let t1 = Instant::now();
        let mut sm = Sm::new(SmConfig {
            window: usize::from(cfg.window),
            retries: if cfg.loss > 0.0 { 10 } else { 3 },
            routing: cfg.routing,
            lid_policy: cfg.policy,
            lmc: cfg.lmc,
            lmc_esp0: cfg.lmc_esp0,
            ..SmConfig::default()
        });
        if cfg.routing == smi::sm::Engine::Lash {
            // LASH's SLs need their own VLs: OpenSM's QoS defaults (SL i
            // to VL i), as OpenSM asks `-R lash -Q`.
            if let Ok(q) = smi::sm::qos::parse("") {
                sm.set_qos(q);
            }
        }
        let up = f.bring_up(&mut sm);
        if let Some(e) = sm.error() {
            return Err(e.clone().into());
        }
        let bring_up = t1.elapsed().as_secs_f64() * 1e3;
        checking();
        let t2 = Instant::now();
        let v = f.verify();
        let deadlock_free = sm.deadlock_free();
        let verify = t2.elapsed().as_secs_f64() * 1e3;
        let t3 = Instant::now();
        let tables = Sm::compute_routes(cfg.routing, sm.routing_graph(), sm.max_lid());
        if cfg.routing == Engine::Lash {
            // LASH's layers are part of its routing (as OpenSM's
            // lash_process times them), up to the 15 SLs there are.
            let _ = smi::sm::lash::assign(sm.routing_graph(), &tables, 15);
        }
        let route = t3.elapsed().as_secs_f64() * 1e3;
        let st = sm.stats();
        let per_phase = st.per_phase();
        let phase = |p: Phase| PhaseReport {
            smps: KindCounts(
                st.per_phase_kind
                    .iter()
                    .filter(|((q, _, _), _)| *q == p)
                    .map(|(&(_, m, at), &n)| (kind_name(m, at), n))
                    .collect(),
            ),
            total: per_phase.get(&p).copied().unwrap_or(0),
            wall_ms: f.phase_wall_ms.get(&p).copied().unwrap_or(0.0),
            sim_end_ms: st.phase_end_ms.get(&p).copied(),
        };
        let report = BringUpReport {
            topology: FabricSummary {
                spec: cfg.topology.clone(),
                switches,
                cas,
                lids: sm.max_lid(),
                lids_held: (1..=sm.max_lid())
                    .filter(|&l| sm.subnet().by_lid(mad_core::Lid(l)).is_some())
                    .count() as u64,
                vfs: cfg.vfs,
                hypervisors: sm.hypervisors().len(),
            },
            up,
            smps: SmpSummary {
                by_kind: KindCounts(
                    st.sent()
                        .iter()
                        .map(|(&(m, at), &n)| (kind_name(m, at), n))
                        .collect(),
                ),
                total: st.total(),
                retries: st.retries,
                given_up: st.given_up,
            },
            phases: Phases {
                discovery: phase(Phase::Discovery),
                lid_assignment: phase(Phase::LidAssignment),
                distribution: phase(Phase::Distribution),
                activation: phase(Phase::Activation),
                routing: RoutingPhase {
                    smps: KindCounts::default(),
                    total: 0,
                    wall_ms: route,
                    engine: cfg.routing.name(),
                },
            },
            routing: cfg.routing.name(),
            wall_ms: WallMs {
                build,
                bring_up,
                route,
                verify,
            },
            sim_ms: f.now_ns() as f64 / 1e6,
            model: ModelSummary {
                by_kind: KindCounts(
                    model
                        .kinds
                        .iter()
                        .map(|&(k, n)| (k.to_string(), n))
                        .collect(),
                ),
                total: model.total(),
                lids: model.lids,
                blocks_per_switch: model.blocks,
                full_reconfig_smps: model.full_reconfig_smps,
            },
            traces: Vec::new(),
            verify: VerifySummary {
                check: v.check.label(),
                sources: v.sources,
                lids: v.lids,
                reachable_pairs: v.reachable,
                unreachable_pairs: v.unreachable,
                loops: v.loops,
                switch_unreachable: v.switch_unreachable,
                parked_pairs: v.parked,
                misparked_pairs: v.misparked,
                bad_lids: v.bad_lids,
                ok: v.ok(),
                deadlock_free,
            },
        };
        Ok(BringUp {
            fabric: f,
            sm,
            verify: v,
            engine: cfg.routing,
            report,
        })
    }

    /// Walks each `FROM:TO` of `specs` through the installed tables and
    /// adds its description to the report's traces.
    pub fn trace(&mut self, specs: &[String]) -> Result<(), super::TraceError> {
        for spec in specs {
            let t = self.fabric.trace_named(spec)?;
            self.report.traces.push(t);
        }
        Ok(())
    }

    /// What is wrong with the bring-up, in one line: not up, a route
    /// check failure, or (for the engines that promise it) a cycle in the
    /// channel dependencies; `None` when nothing is.
    pub fn failure(&self) -> Option<String> {
        let (r, spec) = (&self.report, &self.report.topology.spec);
        if !r.up {
            return Some(format!(
                "{spec}: the subnet did not come up (SM phase {:?})",
                self.sm.phase()
            ));
        }
        if !self.verify.ok() {
            let first = self
                .verify
                .failures
                .first()
                .map(|x| x.describe(&self.fabric))
                .unwrap_or_default();
            return Some(format!(
                "{spec}: routes wrong after bring-up ({}): {first}",
                self.verify
            ));
        }
        let engine = self.engine;
        // Min-hop and dor (deadlock-free on meshes and hypercubes only)
        // make no such promise on any fabric.
        if !r.verify.deadlock_free && engine == Engine::Lash {
            return Some(format!(
                "{spec}: LASH needs more layers than the ports' VLs give (or LMC is on), and the min-hop routes it fell back on close a channel dependency cycle"
            ));
        }
        if !r.verify.deadlock_free && !matches!(engine, Engine::MinHop | Engine::Dor) {
            return Some(format!(
                "{spec}: the {engine:?} routes' channel dependency graph has a cycle"
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimNode;

    fn cfg(spec: &str) -> BringUpConfig {
        BringUpConfig {
            topology: spec.into(),
            window: 16,
            loss: 0.0,
            routing: Engine::MinHop,
            vfs: 0,
            policy: LidPolicy::Prepopulated,
            hop_ns: 1_000,
            dr_hop_ns: 2_000,
            capture: false,
            lmc: 0,
            lmc_esp0: false,
        }
    }

    /// The report adds up: phases to the total, kinds to the total, the
    /// model (exact on a tree) to the measurement; the check is all pairs
    /// and held; the JSON has the shape `ibkit sim --json` documents.
    #[test]
    fn a_bring_up_report_adds_up_and_serializes() {
        let mut checked = false;
        let b = BringUp::run(&cfg("mport-ntree:4:2"), || checked = true).unwrap();
        assert!(checked);
        let r = &b.report;
        assert!(r.up && r.verify.ok && r.verify.check == "all pairs");
        assert_eq!(b.failure(), None);
        let phases: u64 = r.phases.sm_phases().iter().map(|(_, _, p)| p.total).sum();
        assert_eq!(phases, r.smps.total);
        let kinds: u64 = r.smps.by_kind.0.iter().map(|(_, n)| n).sum();
        assert_eq!(kinds, r.smps.total);
        assert_eq!(r.model.by_kind.0.len(), r.smps.by_kind.0.len());
        for (k, n) in &r.model.by_kind.0 {
            assert_eq!(r.smps.by_kind.get(k), *n, "{k}");
        }
        assert_eq!((r.topology.switches, r.topology.cas), (6, 8));
        let v = serde_json::to_value(r).unwrap();
        assert_eq!(v["smps"]["total"], r.smps.total);
        assert_eq!(v["phases"]["routing"]["engine"], "minhop");
        assert!(v["smps"]["by_kind"]["Get(NodeInfo)"].as_u64().unwrap() > 0);
        assert_eq!(v["verify"]["unreachable_pairs"], 0);
    }

    /// Traces name their hops, and a bad spec is a typed error.
    #[test]
    fn traces_walk_named_nodes_and_refuse_unknown_ones() {
        let mut b = BringUp::run(&cfg("mport-ntree:4:2"), || {}).unwrap();
        let ca = b.fabric.topo.nodes[1].name.clone();
        let sw = b.fabric.topo.nodes[b.fabric.topo.nodes.len() - 1]
            .name
            .clone();
        b.trace(&[format!("{ca}:{sw}")]).unwrap();
        assert!(
            b.report.traces[0].starts_with(&format!("{ca} → LID "))
                && b.report.traces[0].contains("Delivered"),
            "{:?}",
            b.report.traces
        );
        assert_eq!(
            b.trace(&["nowhere:1".into()]),
            Err(super::super::TraceError::NoNode("nowhere".into()))
        );
        assert_eq!(
            b.trace(&["no-colon".into()]),
            Err(super::super::TraceError::Syntax("no-colon".into()))
        );
        assert_eq!(
            b.trace(&[format!("{ca}:nobody")]),
            Err(super::super::TraceError::NoTarget("nobody".into()))
        );
    }

    /// A route broken after the bring-up is named by `failure`.
    #[test]
    fn a_broken_route_is_the_failure() {
        let mut b = BringUp::run(&cfg("mport-ntree:4:2"), || {}).unwrap();
        let ca = (0..b.fabric.nodes.len())
            .find(|&i| i != b.fabric.sm_node && matches!(b.fabric.nodes[i], SimNode::Ca(_)))
            .unwrap();
        let lid = b.fabric.nodes[ca].lid();
        for n in &mut b.fabric.nodes {
            if let SimNode::Switch(s) = n {
                s.model.lft[usize::from(lid.0)] = 0xFF;
            }
        }
        b.verify = b.fabric.verify();
        let e = b.failure().unwrap();
        assert!(
            e.starts_with("mport-ntree:4:2: routes wrong after bring-up"),
            "{e}"
        );
    }
}
