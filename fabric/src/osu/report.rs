//! The three counts of a bring-up side by side, as `ibkit model` prints
//! them: ibkit's model from the cabling ([`crate::model`]), the OSU paper's
//! formulas (m-port n-trees only) and, unless asked not to, the counts and
//! phase times measured on the simulator, with the reason for every kind
//! where the paper's count differs. The report derives its JSON.

use super::{
    measure, mport_ntree_of, reason, times, uncounted, Counts, MeasureError, Measured,
    PaperConstants, Times, PAPER_MTU,
};
use crate::model::predict;
use crate::sim::KindCounts;
use crate::topology::Topology;
use serde::Serialize;
use smi::sm::LidPolicy;
use std::collections::BTreeMap;

/// The fabric compared.
#[derive(Clone, Debug, Serialize)]
pub struct Cabling {
    /// The topology spec.
    pub spec: String,
    /// Switches.
    pub switches: usize,
    /// Channel adapters.
    pub cas: usize,
    /// Cables.
    pub links: usize,
}

/// The paper's per-unit constants, in milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct ConstantsMs {
    /// t_TD(1,1).
    pub t_td_per_smp: f64,
    /// t_PC(1,1).
    pub t_pc_per_node: f64,
    /// t_PD(1,1).
    pub t_pd_per_lft_smp: f64,
    /// Where they come from.
    pub from: &'static str,
}

/// The paper's phase times, in milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct TimesMs {
    /// Eq. 8.
    pub t_td: f64,
    /// Eq. 9.
    pub t_pc: f64,
    /// Eq. 10.
    pub t_pd: f64,
}

/// The OSU formulas for the fabric.
#[derive(Clone, Debug, Serialize)]
pub struct OsuSide {
    /// Ports per switch.
    pub m: u64,
    /// Levels.
    pub n: u64,
    /// The paper's MTU.
    pub mtu: u64,
    /// Nodes.
    pub nodes: u64,
    /// Switches.
    pub switches: u64,
    /// Eq. 4.
    pub get_s: u64,
    /// Eq. 3.
    pub get_s_node_info: u64,
    /// = GetS_NodeInfo.
    pub get_s_port_info: u64,
    /// Eq. 6.
    pub set_s: u64,
    /// Eq. 5.
    pub set_s_port_info: u64,
    /// Eq. 7.
    pub set_s_lft: u64,
    /// S of eq. 7.
    pub lft_smps_per_switch: u64,
    /// The constants.
    pub constants_ms: ConstantsMs,
    /// Eq. 8–10.
    pub times_ms: TimesMs,
}

/// Measured phase times, in milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseMs {
    /// Discovery, LID assignment and activation.
    pub td: f64,
    /// Route computation alone.
    pub pc: f64,
    /// LFT distribution.
    pub pd: f64,
}

/// Measured time per unit, in milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct PerUnitMs {
    /// Per SMP of discovery.
    pub td_per_smp: f64,
    /// Per node of route computation.
    pub pc_per_node: f64,
    /// Per LFT SMP.
    pub pd_per_lft_smp: f64,
}

/// What the simulator measured.
#[derive(Clone, Debug, Serialize)]
pub struct MeasuredSide {
    /// SMPs by kind.
    pub by_kind: BTreeMap<String, u64>,
    /// SMPs in all.
    pub total: u64,
    /// Phase times.
    pub times_ms: PhaseMs,
    /// SMPs of t_TD's phases.
    pub td_smps: u64,
    /// SMPs of the distribution.
    pub pd_smps: u64,
    /// Per unit.
    pub per_unit_ms: PerUnitMs,
}

/// One kind of SMP, three ways.
#[derive(Clone, Debug, Serialize)]
pub struct KindRow {
    /// `Get(NodeInfo)`, …
    pub kind: String,
    /// The paper's count (none where it does not count the kind, or the
    /// fabric is not an m-port n-tree).
    pub osu: Option<u64>,
    /// ibkit's model.
    pub ibkit_model: u64,
    /// Measured.
    pub measured: Option<u64>,
    /// Why the paper's count differs (empty when it does not).
    pub why: &'static str,
}

/// The comparison; serializes as `ibkit model --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    /// The fabric.
    pub topology: Cabling,
    /// ibkit's model by kind.
    pub by_kind: KindCounts,
    /// ibkit's model, in all.
    pub total: u64,
    /// LIDs assigned.
    pub lids: u64,
    /// LFT blocks per switch.
    pub blocks_per_switch: u64,
    /// Switches × blocks.
    pub full_reconfig_smps: u64,
    /// The OSU formulas, for an m-port n-tree.
    pub osu: Option<OsuSide>,
    /// The measurement.
    pub measured: Option<MeasuredSide>,
    /// Kind by kind.
    pub comparison: Vec<KindRow>,
    /// VFs per hypervisor.
    #[serde(skip)]
    pub vfs: usize,
}

/// Why the comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The spec is not a topology.
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
    /// The spec names an m-port n-tree whose size is not the paper's.
    #[error("{spec}: {switches} switches and {cas} CAs, but the OSU formulas give {osu_switches} and {osu_nodes}")]
    NotTheTree {
        /// The spec.
        spec: String,
        /// Its switches.
        switches: usize,
        /// Its CAs.
        cas: usize,
        /// The formulas' switches.
        osu_switches: u64,
        /// The formulas' nodes.
        osu_nodes: u64,
    },
    /// The measurement failed.
    #[error(transparent)]
    Measure(#[from] MeasureError),
}

impl ModelReport {
    /// Compares the three on `spec`; `measure_too` brings the fabric up
    /// on the simulator.
    pub fn new(
        spec: &str,
        vfs: usize,
        policy: LidPolicy,
        measure_too: bool,
    ) -> Result<ModelReport, CompareError> {
        let t = Topology::from_spec(spec)?;
        let (switches, cas, links) = (t.switches(), t.cas(), t.links());
        let m = predict(&t, vfs, policy);
        let counts = mport_ntree_of(spec).and_then(|(m, n)| Counts::new(m, n, PAPER_MTU));
        if let Some(c) = &counts {
            if (c.switches, c.nodes) != (switches as u64, cas as u64) {
                return Err(CompareError::NotTheTree {
                    spec: spec.to_string(),
                    switches,
                    cas,
                    osu_switches: c.switches,
                    osu_nodes: c.nodes,
                });
            }
        }
        let measured = if measure_too {
            Some(measure(spec, vfs, policy)?)
        } else {
            None
        };
        let comparison = m
            .kinds
            .iter()
            .map(|&(kind, n)| {
                let o = counts.as_ref().and_then(|c| c.of_kind(kind));
                KindRow {
                    kind: kind.to_string(),
                    osu: o,
                    ibkit_model: n,
                    measured: measured
                        .as_ref()
                        .map(|x| x.kinds.get(kind).copied().unwrap_or(0)),
                    why: match (&counts, o) {
                        (None, _) => "",
                        (Some(_), Some(_)) => reason(kind).unwrap_or(""),
                        (Some(_), None) => uncounted(kind),
                    },
                }
            })
            .collect();
        let k = PaperConstants::TABLE_1;
        Ok(ModelReport {
            topology: Cabling {
                spec: spec.to_string(),
                switches,
                cas,
                links,
            },
            by_kind: KindCounts(m.kinds.iter().map(|&(k, n)| (k.to_string(), n)).collect()),
            total: m.total(),
            lids: m.lids,
            blocks_per_switch: m.blocks,
            full_reconfig_smps: m.full_reconfig_smps,
            osu: counts.map(|c| osu_side(&c, &k, &times(&c, &k))),
            measured: measured.map(|x| measured_side(x, cas)),
            comparison,
            vfs,
        })
    }

    /// Where the model and the measurement disagree on a tree without
    /// VFs (where the model is exact), in one line; `None` when they agree
    /// or nothing was measured.
    pub fn failure(&self) -> Option<String> {
        if self.vfs != 0 || mport_ntree_of(&self.topology.spec).is_none() {
            return None;
        }
        self.comparison.iter().find_map(|r| {
            let got = r.measured?;
            (got != r.ibkit_model).then(|| {
                format!(
                    "{}: ibkit's model predicts {} {}, the simulator counted {got}",
                    self.topology.spec, r.ibkit_model, r.kind
                )
            })
        })
    }
}

fn osu_side(c: &Counts, k: &PaperConstants, t: &Times) -> OsuSide {
    OsuSide {
        m: c.m,
        n: c.n,
        mtu: c.mtu,
        nodes: c.nodes,
        switches: c.switches,
        get_s: c.get_s,
        get_s_node_info: c.get_s_node_info,
        get_s_port_info: c.get_s_port_info,
        set_s: c.set_s,
        set_s_port_info: c.set_s_port_info,
        set_s_lft: c.set_s_lft,
        lft_smps_per_switch: c.lft_per_switch,
        constants_ms: ConstantsMs {
            t_td_per_smp: k.td_per_smp_ms,
            t_pc_per_node: k.pc_per_node_ms,
            t_pd_per_lft_smp: k.pd_per_lft_smp_ms,
            from: "the model column of the paper's Table 1, (m, n) = (8, 1)",
        },
        times_ms: TimesMs {
            t_td: t.t_td_ms,
            t_pc: t.t_pc_ms,
            t_pd: t.t_pd_ms,
        },
    }
}

fn measured_side(x: Measured, cas: usize) -> MeasuredSide {
    MeasuredSide {
        per_unit_ms: PerUnitMs {
            td_per_smp: x.td_ms / x.td_smps.max(1) as f64,
            pc_per_node: x.pc_ms / cas.max(1) as f64,
            pd_per_lft_smp: x.pd_ms / x.pd_smps.max(1) as f64,
        },
        times_ms: PhaseMs {
            td: x.td_ms,
            pc: x.pc_ms,
            pd: x.pd_ms,
        },
        by_kind: x.kinds,
        total: x.total,
        td_smps: x.td_smps,
        pd_smps: x.pd_smps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On an m-port n-tree the three columns are there, ibkit's model
    /// equals the measurement, and the paper's counts differ only where a
    /// reason is given.
    #[test]
    fn the_three_columns_of_a_tree() {
        let r = ModelReport::new("mport-ntree:4:2", 0, LidPolicy::Prepopulated, true).unwrap();
        let osu = r.osu.as_ref().unwrap();
        assert_eq!((osu.m, osu.n, osu.switches, osu.nodes), (4, 2, 6, 8));
        assert!(r.measured.is_some());
        assert_eq!(r.failure(), None);
        for k in &r.comparison {
            assert_eq!(k.measured, Some(k.ibkit_model), "{}", k.kind);
            if k.osu != Some(k.ibkit_model) {
                assert!(!k.why.is_empty(), "{} differs without a reason", k.kind);
            }
        }
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["osu"]["lft_smps_per_switch"], osu.lft_smps_per_switch);
        assert!(v.get("vfs").is_none());
    }

    /// Not a tree: no OSU column; without measuring, nothing measured and
    /// nothing to fail; a disagreement is named.
    #[test]
    fn no_tree_no_measurement_and_a_disagreement() {
        let r = ModelReport::new("random:8:3", 0, LidPolicy::Prepopulated, false).unwrap();
        assert!(r.osu.is_none() && r.measured.is_none());
        assert!(r
            .comparison
            .iter()
            .all(|k| k.osu.is_none() && k.why.is_empty()));
        let mut t = ModelReport::new("mport-ntree:4:2", 0, LidPolicy::Prepopulated, true).unwrap();
        t.comparison[0].measured = Some(t.comparison[0].ibkit_model + 1);
        let e = t.failure().unwrap();
        assert!(
            e.starts_with("mport-ntree:4:2: ibkit's model predicts"),
            "{e}"
        );
        assert!(matches!(
            ModelReport::new("nonsense", 0, LidPolicy::Prepopulated, false),
            Err(CompareError::Topology(_))
        ));
    }
}
