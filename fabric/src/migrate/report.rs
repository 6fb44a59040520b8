//! What the experiment reports: each migration, each check, each fabric
//! and each row of Table I, with the views `ibkit migrate --json` prints
//! (derived) and the one-line failure of a run.

use crate::sim::{Check, Fabric, Verify};
use serde::{Serialize, Serializer};
use smi::sm::LidPolicy;

/// Which way a migration goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// To another hypervisor on the same leaf switch.
    Near,
    /// To a hypervisor on the farthest leaf (across the spine).
    Far,
    /// To a random hypervisor.
    Random,
}

impl Kind {
    /// `near`, `far` or `random`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Near => "near",
            Kind::Far => "far",
            Kind::Random => "random",
        }
    }
}

/// One measured migration.
#[derive(Clone, Debug)]
pub struct MigrationReport {
    /// Near, far or random.
    pub kind: Kind,
    /// The VM.
    pub vm: u32,
    /// Its LID (kept).
    pub lid: u16,
    /// Source and destination hypervisor names.
    pub from: String,
    /// Destination hypervisor name.
    pub to: String,
    /// SMPs sent, counted by the SM while applying.
    pub smps: u64,
    /// Of which Set(LinearForwardingTable).
    pub lft_smps: u64,
    /// Switches whose LFT changed.
    pub switches_updated: usize,
    /// Microseconds to compute the plan (mean of repeated runs).
    pub plan_us: f64,
    /// Simulated microseconds until the last SMP was answered.
    pub sim_us: f64,
    /// The walks after the migration (all pairs, or every live node to
    /// the moved LIDs on fabrics above the limit).
    pub check: Checked,
    /// The installed entries of every other LID are unchanged.
    pub others_unchanged: bool,
}

/// What a check after one step found.
#[derive(Clone, Debug)]
pub struct Checked {
    /// Which LIDs were walked to.
    pub check: Check,
    /// Walks taken.
    pub walks: u64,
    /// The first failure, described; `None` when everything held.
    pub failure: Option<String>,
}

impl Checked {
    /// What `v`, a check of `f`, found.
    pub fn new(f: &Fabric, v: &Verify) -> Checked {
        Checked {
            check: v.check,
            walks: v.walks(),
            failure: (!v.ok()).then(|| {
                let first = v
                    .failures
                    .first()
                    .map(|x| x.describe(f))
                    .unwrap_or_default();
                format!("{v}; {first}")
            }),
        }
    }
    /// True when every walk ended where it must.
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }
    /// Which check ran, in words.
    pub fn label(&self) -> &'static str {
        self.check.label()
    }
}

/// What a whole run measured on one fabric.
#[derive(Clone, Debug)]
pub struct FabricReport {
    /// Topology spec.
    pub topology: String,
    /// LID policy.
    pub policy: LidPolicy,
    /// VFs per hypervisor.
    pub vfs: usize,
    /// CAs (the paper's "nodes").
    pub nodes: usize,
    /// Switches.
    pub switches: usize,
    /// Hypervisors (every CA but the SM's).
    pub hypervisors: usize,
    /// LIDs assigned at bring-up.
    pub lids: u16,
    /// LFT blocks per switch at bring-up.
    pub blocks: u64,
    /// Bring-up SMPs.
    pub bring_up_smps: u64,
    /// Bring-up wall milliseconds.
    pub bring_up_ms: f64,
    /// VMs started and the SMPs that took.
    pub vms: usize,
    /// SMPs to start them.
    pub vm_start_smps: u64,
    /// Of which Set(LinearForwardingTable).
    pub vm_start_lft_smps: u64,
    /// Full reconfiguration: SMPs sent.
    pub full_reconfig_smps: u64,
    /// Full reconfiguration: route computation wall milliseconds.
    pub full_reconfig_route_ms: f64,
    /// Full reconfiguration: simulated milliseconds to distribute.
    pub full_reconfig_sim_ms: f64,
    /// The migrations.
    pub migrations: Vec<MigrationReport>,
    /// All pairs after the bring-up (after the full reconfiguration, when
    /// that comes first).
    pub baseline: Checked,
    /// After the VMs started.
    pub vm_start: Checked,
    /// All pairs after a full reconfiguration done at the end.
    pub full_end: Option<Checked>,
}

impl FabricReport {
    /// Fewest LFT SMPs of any migration.
    pub fn swap_min(&self) -> Option<u64> {
        self.migrations.iter().map(|m| m.lft_smps).min()
    }
    /// Most LFT SMPs of any migration.
    pub fn swap_max_measured(&self) -> Option<u64> {
        self.migrations.iter().map(|m| m.lft_smps).max()
    }
    /// The paper's bound: two blocks on every switch.
    pub fn swap_max_bound(&self) -> u64 {
        2 * self.switches as u64
    }
}

impl FabricReport {
    /// The first check that failed, as one line naming the fabric, the
    /// step and where a walk ended; `None` when every check held.
    pub fn failure(&self) -> Option<String> {
        let at = format!("{} ({} LIDs)", self.topology, self.policy.name());
        if let Some(e) = &self.baseline.failure {
            return Some(format!("{at}, after bring-up: {e}"));
        }
        if let Some(e) = &self.vm_start.failure {
            return Some(format!("{at}, after starting {} VMs: {e}", self.vms));
        }
        for (i, m) in self.migrations.iter().enumerate() {
            let what = format!(
                "{at}, migration {} ({}, VM {}, LID {}, {} → {})",
                i + 1,
                m.kind.name(),
                m.vm,
                m.lid,
                m.from,
                m.to
            );
            if let Some(e) = &m.check.failure {
                return Some(format!("{what}: {e}"));
            }
            if !m.others_unchanged {
                return Some(format!(
                    "{what}: LFT entries of other LIDs changed, or changed on switches outside the plan"
                ));
            }
        }
        if let Some(e) = self.full_end.as_ref().and_then(|c| c.failure.as_ref()) {
            return Some(format!("{at}, after the full reconfiguration: {e}"));
        }
        None
    }

    /// Which check the migrations ran: all pairs when every one walked
    /// all pairs, else the changed LIDs.
    pub fn migration_check(&self) -> Check {
        if self
            .migrations
            .iter()
            .all(|m| m.check.check == Check::AllLids)
        {
            Check::AllLids
        } else {
            Check::ChangedLids
        }
    }
}

/// One row of Table I, measured.
#[derive(Clone, Debug)]
pub struct TableRow {
    /// Dynamic-LID run: Table I's LIDs, blocks and full reconfiguration.
    pub copy: FabricReport,
    /// Prepopulated run (1 VF per hypervisor): the LID-swap sweep.
    pub swap: FabricReport,
}

impl Serialize for Checked {
    /// `{"ok", "check", "walks", "failure"}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Checked", 4)?;
        st.serialize_field("ok", &self.ok())?;
        st.serialize_field("check", self.label())?;
        st.serialize_field("walks", &self.walks)?;
        st.serialize_field("failure", &self.failure)?;
        st.end()
    }
}

impl MigrationReport {
    /// Its walks held and no other LID's entries changed.
    pub fn verified(&self) -> bool {
        self.check.ok() && self.others_unchanged
    }
}

/// SMPs and wall time of a step.
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    /// SMPs.
    pub smps: u64,
    /// Wall milliseconds.
    pub wall_ms: f64,
}

/// The VMs started.
#[derive(Clone, Debug, Serialize)]
pub struct VmsStarted {
    /// How many.
    pub started: usize,
    /// SMPs to start them.
    pub smps: u64,
    /// Of which Set(LinearForwardingTable).
    pub lft_smps: u64,
}

/// The checks outside the migrations.
#[derive(Clone, Debug, Serialize)]
pub struct Checks<'a> {
    /// After bring-up.
    pub baseline: &'a Checked,
    /// After the VMs started.
    pub vm_start: &'a Checked,
    /// After a full reconfiguration at the end.
    pub full_reconfig_end: Option<&'a Checked>,
}

/// One migration as `--json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct MigrationSummary<'a> {
    /// near, far or random.
    pub kind: &'static str,
    /// The VM.
    pub vm: u32,
    /// Its LID.
    pub lid: u16,
    /// Source hypervisor.
    pub from: &'a str,
    /// Destination hypervisor.
    pub to: &'a str,
    /// SMPs.
    pub smps: u64,
    /// Of which LFT blocks.
    pub lft_smps: u64,
    /// Switches updated.
    pub switches_updated: usize,
    /// Plan computation, µs.
    pub plan_us: f64,
    /// Simulated µs.
    pub sim_us: f64,
    /// [`MigrationReport::verified`].
    pub verified: bool,
    /// The walks.
    pub check: &'a Checked,
    /// No other LID's entries changed.
    pub others_unchanged: bool,
}

/// A run on one fabric as `ibkit migrate --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct FabricSummary<'a> {
    /// Topology spec.
    pub topology: &'a str,
    /// LID policy.
    pub policy: &'static str,
    /// VFs per hypervisor.
    pub vfs: usize,
    /// CAs.
    pub nodes: usize,
    /// Switches.
    pub switches: usize,
    /// Hypervisors.
    pub hypervisors: usize,
    /// LIDs at bring-up.
    pub lids: u16,
    /// LFT blocks per switch.
    pub min_lft_blocks_per_switch: u64,
    /// The bring-up.
    pub bring_up: Cost,
    /// The VMs.
    pub vms: VmsStarted,
    /// Full reconfiguration: SMPs.
    pub full_reconfig_smps: u64,
    /// Full reconfiguration: route computation, wall ms.
    pub full_reconfig_route_ms: f64,
    /// Full reconfiguration: distribution, simulated ms.
    pub full_reconfig_sim_ms: f64,
    /// [`FabricReport::swap_min`].
    pub swap_smps_min: Option<u64>,
    /// [`FabricReport::swap_max_bound`].
    pub swap_smps_max: u64,
    /// [`FabricReport::swap_max_measured`].
    pub swap_smps_max_measured: Option<u64>,
    /// Every check held.
    pub verified: bool,
    /// The checks outside the migrations.
    pub checks: Checks<'a>,
    /// The migrations.
    pub migrations: Vec<MigrationSummary<'a>>,
}

impl FabricReport {
    /// The run as `--json` prints it.
    pub fn summary(&self) -> FabricSummary<'_> {
        FabricSummary {
            topology: &self.topology,
            policy: self.policy.name(),
            vfs: self.vfs,
            nodes: self.nodes,
            switches: self.switches,
            hypervisors: self.hypervisors,
            lids: self.lids,
            min_lft_blocks_per_switch: self.blocks,
            bring_up: Cost {
                smps: self.bring_up_smps,
                wall_ms: self.bring_up_ms,
            },
            vms: VmsStarted {
                started: self.vms,
                smps: self.vm_start_smps,
                lft_smps: self.vm_start_lft_smps,
            },
            full_reconfig_smps: self.full_reconfig_smps,
            full_reconfig_route_ms: self.full_reconfig_route_ms,
            full_reconfig_sim_ms: self.full_reconfig_sim_ms,
            swap_smps_min: self.swap_min(),
            swap_smps_max: self.swap_max_bound(),
            swap_smps_max_measured: self.swap_max_measured(),
            verified: self.failure().is_none(),
            checks: Checks {
                baseline: &self.baseline,
                vm_start: &self.vm_start,
                full_reconfig_end: self.full_end.as_ref(),
            },
            migrations: self
                .migrations
                .iter()
                .map(|m| MigrationSummary {
                    kind: m.kind.name(),
                    vm: m.vm,
                    lid: m.lid,
                    from: &m.from,
                    to: &m.to,
                    smps: m.smps,
                    lft_smps: m.lft_smps,
                    switches_updated: m.switches_updated,
                    plan_us: m.plan_us,
                    sim_us: m.sim_us,
                    verified: m.verified(),
                    check: &m.check,
                    others_unchanged: m.others_unchanged,
                })
                .collect(),
        }
    }
}

/// The checks a Table I row ran.
#[derive(Clone, Debug, Serialize)]
pub struct RowChecks {
    /// The copy sweep's.
    pub copy: &'static str,
    /// The swap sweep's.
    pub swap: &'static str,
}

/// A row of Table I as `--table --json` prints it and the text table
/// shows it.
#[derive(Clone, Debug, Serialize)]
pub struct TableSummary<'a> {
    /// The fat tree.
    pub topology: &'a str,
    /// CAs.
    pub nodes: usize,
    /// Switches.
    pub switches: usize,
    /// LIDs (dynamic policy: switches and nodes).
    pub lids: u16,
    /// LFT blocks per switch.
    pub min_lft_blocks_per_switch: u64,
    /// Full reconfiguration: SMPs.
    pub full_reconfig_smps: u64,
    /// Full reconfiguration: route computation, wall ms.
    pub full_reconfig_route_ms: f64,
    /// Fewest LFT SMPs of a swap.
    pub swap_smps_min: Option<u64>,
    /// The paper's bound.
    pub swap_smps_max: u64,
    /// Most LFT SMPs of a swap measured.
    pub swap_smps_max_measured: Option<u64>,
    /// Fewest LFT SMPs of a copy.
    pub copy_smps_min: Option<u64>,
    /// Most LFT SMPs of a copy measured.
    pub copy_smps_max_measured: Option<u64>,
    /// The slowest plan computation of either sweep, µs.
    pub plan_us_max: f64,
    /// Every check of both runs held.
    pub verified: bool,
    /// Which checks the migrations ran.
    pub check: RowChecks,
}

impl TableRow {
    /// The row as `--json` prints it.
    pub fn summary(&self) -> TableSummary<'_> {
        let (c, s) = (&self.copy, &self.swap);
        TableSummary {
            topology: &c.topology,
            nodes: c.nodes,
            switches: c.switches,
            lids: c.lids,
            min_lft_blocks_per_switch: c.blocks,
            full_reconfig_smps: c.full_reconfig_smps,
            full_reconfig_route_ms: c.full_reconfig_route_ms,
            swap_smps_min: s.swap_min(),
            swap_smps_max: s.swap_max_bound(),
            swap_smps_max_measured: s.swap_max_measured(),
            copy_smps_min: c.swap_min(),
            copy_smps_max_measured: c.swap_max_measured(),
            plan_us_max: s
                .migrations
                .iter()
                .chain(&c.migrations)
                .map(|m| m.plan_us)
                .fold(0.0, f64::max),
            verified: self.failure().is_none(),
            check: RowChecks {
                copy: c.migration_check().label(),
                swap: s.migration_check().label(),
            },
        }
    }

    /// The first failed check of either run, in one line.
    pub fn failure(&self) -> Option<String> {
        self.copy.failure().or_else(|| self.swap.failure())
    }
}
