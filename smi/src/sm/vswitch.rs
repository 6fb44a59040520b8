//! The vSwitch SR-IOV model (Tasoulas et al.): every VM owns a LID and a
//! vGUID of its own, and keeps them when it live-migrates. Two LID
//! policies: *prepopulated* (every VF has a LID and routes from bring-up;
//! a migration swaps the VM's LFT entries with those of the destination
//! VF's LID) and *dynamic* (only PFs and switches have LIDs at bring-up; a
//! new VM takes the next free LID and copies the PF's entries; a migration
//! copies the destination PF's entries). No route is ever computed: a plan
//! lists the entries to change, on only the switches that must change
//! them, and costs one SMP per changed 64-LID block, plus one Set(VPortInfo)
//! per participating hypervisor.

use super::routing::PortTo;
use super::{Phase, PortState, Purpose, Sm};
use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use mad_core::attr::forwarding::DROP_PORT;
use mad_core::attr::VPortInfo;
use mad_core::Lid;

/// How hypervisors' VFs get LIDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LidPolicy {
    /// Every VF has a LID (and routes) from bring-up.
    #[default]
    Prepopulated,
    /// Only PFs and switches get LIDs at bring-up; a VM gets one when it starts.
    Dynamic,
}

impl LidPolicy {
    /// Every policy.
    pub const ALL: [LidPolicy; 2] = [LidPolicy::Prepopulated, LidPolicy::Dynamic];

    /// The policy's name as ibkit takes it on the command line and writes
    /// it in its output: `prepopulated` or `dynamic`.
    pub const fn name(self) -> &'static str {
        match self {
            LidPolicy::Prepopulated => "prepopulated",
            LidPolicy::Dynamic => "dynamic",
        }
    }

    /// The policy called `name` (see [`LidPolicy::name`]), or `None`.
    pub fn from_name(name: &str) -> Option<LidPolicy> {
        LidPolicy::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// A VM's handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VmId(pub u32);

/// The most VFs the SM takes a hypervisor's port to have, whatever its
/// VirtualizationInfo.VPortCap says (up to 65,535): bounds the slots, the
/// reads and the LIDs one agent can make the SM spend.
pub const MAX_VFS_PER_PORT: u16 = 1024;

/// A running VM as the SM knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vm {
    /// Its vGUID.
    pub guid: u64,
    /// Its LID (it keeps it across migrations).
    pub lid: u16,
    /// The hypervisor (node index) it runs on.
    pub hypervisor: usize,
    /// The VF (1-based) it runs on.
    pub vf: u16,
}

/// Why a VM operation was refused. A refused operation changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmError {
    /// The subnet is not up yet (or bring-up failed).
    NotUp,
    /// The node is not a hypervisor.
    NotAHypervisor(usize),
    /// Every VF of the hypervisor is taken.
    NoFreeVf(usize),
    /// No unicast LID is left (0x0001–0xBFFF).
    LidSpaceExhausted,
    /// No such VM.
    NoSuchVm(VmId),
    /// The VM already runs on that hypervisor.
    SameHypervisor,
    /// The plan no longer matches the subnet (something moved since).
    StalePlan,
    /// Two plans of one batch touch the same switch or hypervisor.
    Overlap,
    /// The tables give no valid route to the destination (a bug or a broken
    /// fabric): nothing was changed.
    NoRoute(u16),
    /// The vGUID is already a live port's GUID, a running VM's vGUID or an
    /// alias GUID: the VM's GID would name another port.
    GuidInUse(u64),
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmError::NotUp => write!(f, "the subnet is not up"),
            VmError::NotAHypervisor(n) => write!(f, "node {n} is not a hypervisor"),
            VmError::NoFreeVf(n) => write!(f, "hypervisor {n} has no free VF"),
            VmError::LidSpaceExhausted => {
                write!(f, "no unicast LID is left (0x0001-0xBFFF are all in use)")
            }
            VmError::NoSuchVm(v) => write!(f, "no VM {}", v.0),
            VmError::SameHypervisor => write!(f, "the VM already runs there"),
            VmError::StalePlan => write!(f, "the plan is stale: plan the migration again"),
            VmError::Overlap => write!(f, "the migrations touch the same switches or hypervisors"),
            VmError::NoRoute(l) => write!(f, "no valid route for LID {l}"),
            VmError::GuidInUse(g) => write!(f, "GUID {g:#018x} is already in use on the subnet"),
        }
    }
}

impl core::error::Error for VmError {}

/// What a live migration will change, computed without touching anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationPlan {
    /// The VM.
    pub vm: VmId,
    /// (hypervisor, VF) it leaves.
    pub from: (usize, u16),
    /// (hypervisor, VF) it goes to.
    pub to: (usize, u16),
    /// The VM's LID.
    pub vm_lid: u16,
    /// The destination VF's LID that the VM's LID is swapped with
    /// (prepopulated), or `None` (dynamic: the PF's entries are copied).
    pub swapped_lid: Option<u16>,
    /// LFT entries to write: (switch ordinal, LID, port).
    pub entries: Vec<(usize, u16, u8)>,
    /// The 64-LID blocks to send: (switch ordinal, block), sorted.
    pub blocks: Vec<(usize, u16)>,
    /// Switches touched (node indices), sorted.
    pub switches: Vec<usize>,
    /// Under partitions: the VM's VF table written on the destination VF
    /// where it does not hold it, and the blocks (and enforcement bits)
    /// of the two hypervisors' switch ports that change; 0 without.
    pub pkey_smps: usize,
}

impl MigrationPlan {
    /// Set(LinearForwardingTable) SMPs the plan sends.
    pub fn lft_smps(&self) -> usize {
        self.blocks.len()
    }
    /// Set(VPortInfo) SMPs: one to each of the two hypervisors.
    pub fn hypervisor_smps(&self) -> usize {
        2
    }
    /// Every SMP the plan sends (without deadlock mitigation), the P_Key
    /// SMPs of a move under partitions included.
    pub fn smps(&self) -> usize {
        self.lft_smps() + self.hypervisor_smps() + self.pkey_smps
    }
}

impl Sm {
    /// The VMs running.
    pub fn vms(&self) -> impl Iterator<Item = (VmId, &Vm)> {
        self.vms.iter().map(|(k, v)| (VmId(*k), v))
    }
    /// One VM.
    pub fn vm(&self, id: VmId) -> Option<&Vm> {
        self.vms.get(&id.0)
    }
    /// Node indices of the hypervisors.
    pub fn hypervisors(&self) -> Vec<usize> {
        (0..self.db.nodes().len())
            .filter(|&i| self.db.nodes()[i].is_hypervisor() && self.db.nodes()[i].lid != 0)
            .collect()
    }
    /// The LID policy in force.
    pub fn lid_policy(&self) -> LidPolicy {
        self.cfg.lid_policy
    }
    /// The switch (node index) and port a CA's port 1 is cabled to.
    pub fn attachment(&self, node: usize) -> Option<(usize, u8)> {
        let n = self.db.nodes().get(node)?;
        let (m, q) = n.ports.get(usize::from(n.info.local_port_num))?.peer?;
        self.db.nodes()[m].is_switch().then_some((m, q))
    }
    /// The SM's LFT entry for `lid` on switch `node`.
    pub fn lft_entry(&self, node: usize, lid: u16) -> u8 {
        self.db
            .switch_of
            .get(node)
            .and_then(|&k| self.db.lfts.get(k))
            .and_then(|t| t.get(usize::from(lid)))
            .copied()
            .unwrap_or(DROP_PORT)
    }

    fn ready(&self) -> Result<(), VmError> {
        match self.phase {
            Phase::Done | Phase::Reconfiguration => Ok(()),
            _ => Err(VmError::NotUp),
        }
    }

    fn hypervisor(&self, node: usize) -> Result<&super::SmNode, VmError> {
        self.db
            .nodes()
            .get(node)
            .filter(|n| n.is_hypervisor() && n.lid != 0)
            .ok_or(VmError::NotAHypervisor(node))
    }

    /// A free VF of `node` (1-based), with a LID under the prepopulated
    /// policy: the one whose LID a `guid2lid` cache gives vGUID `guid`,
    /// if that VF is free, else the first free one.
    fn free_vf(&self, node: usize, guid: u64) -> Result<u16, VmError> {
        let n = self.hypervisor(node)?;
        let pre = self.cfg.lid_policy == LidPolicy::Prepopulated;
        let free = |s: &&super::subnet::VfSlot| s.vm.is_none() && (!pre || s.lid != 0);
        let cached = self.preferred.get(&guid).copied().filter(|_| pre);
        (n.vfs.iter())
            .position(|s| free(&s) && Some(s.lid) == cached)
            .or_else(|| n.vfs.iter().position(|s| free(&s)))
            .map(|i| i as u16 + 1)
            .ok_or(VmError::NoFreeVf(node))
    }

    /// The LID a new VM with vGUID `guid` takes under the dynamic policy:
    /// the one a `guid2lid` cache gives it, where no port holds it (so a
    /// VM started again after the subnet was powered off keeps its LID,
    /// and its peers' PathRecords stay right); else the lowest free LID
    /// the cache keeps for no other port; else the lowest free LID.
    fn dynamic_lid(&self, guid: u64) -> Option<u16> {
        let max = Lid::UNICAST_MAX.0;
        let unheld = |l: u16| l != 0 && l <= max && self.db.by_lid(Lid(l)).is_none();
        if let Some(&l) = self.preferred.get(&guid).filter(|&&l| unheld(l)) {
            return Some(l);
        }
        let spare = |l: &u16| !self.preferred_lids.contains(l);
        let above = || (self.db.max_lid < max).then_some(self.db.max_lid + 1);
        // The cache keeps at most one LID a port: a bounded walk.
        let beyond = (u32::from(self.db.max_lid) + 1..=u32::from(max))
            .map(|l| l as u16)
            .take(self.preferred_lids.len() + 1)
            .find(spare);
        (self.free_lids.iter().copied().find(spare))
            .or(beyond)
            .or_else(|| self.free_lids.first().copied())
            .or_else(above)
    }

    /// Starts a VM with vGUID `guid` on hypervisor `node`. Prepopulated: a
    /// free VF (which already has a LID and routes) is enabled, one SMP.
    /// Dynamic: the VM takes the next free LID and every switch copies the
    /// PF's entry to it (one SMP per switch whose block changes, plus a
    /// SwitchInfo where LinearFDBTop must grow).
    pub fn create_vm(&mut self, node: usize, guid: u64) -> Result<VmId, VmError> {
        self.ready()?;
        if self.db.by_gid_guid(mad_core::Guid(guid)).is_some() {
            return Err(VmError::GuidInUse(guid));
        }
        let vf = self.free_vf(node, guid)?;
        let lid = match self.cfg.lid_policy {
            LidPolicy::Prepopulated => self.db.nodes()[node].vfs[usize::from(vf) - 1].lid,
            LidPolicy::Dynamic => {
                let Some(lid) = self.dynamic_lid(guid) else {
                    return Err(VmError::LidSpaceExhausted);
                };
                let pf = self.db.nodes()[node].lid;
                let Some((leaf, port)) = self.attachment(node) else {
                    return Err(VmError::NoRoute(pf));
                };
                let target = (self.db.switch_of[leaf], port);
                let from_pf: Vec<u8> = (0..self.db.lfts.len()).map(|k| self.entry(k, pf)).collect();
                let old: Vec<u8> = (0..self.db.lfts.len())
                    .map(|k| self.entry(k, lid))
                    .collect();
                // Every switch must forward the new LID (stale entries of a
                // freed LID that already lead there are kept).
                let keep = self.minimal(&old, &from_pf, target, false)?;
                // Committed from here on.
                self.free_lids.remove(&lid);
                if lid > self.db.max_lid {
                    // LIDs skipped for a cached one stay free for later.
                    self.free_lids.extend(self.db.max_lid + 1..lid);
                    self.db.max_lid = lid;
                }
                let stage = self.capture(|sm| {
                    if lid > sm.top {
                        sm.top = sm.top_for(lid);
                        for k in 0..sm.db.switch_index.len() {
                            let i = sm.db.switch_index[k];
                            if let Some(mut si) = sm.db.nodes()[i].switch_info {
                                si.linear_fdb_top = sm.top;
                                if let Some(mut n) = sm.db.node_mut(i) {
                                    n.switch_info = Some(si);
                                }
                                sm.set_node(i, &si, 0, Purpose::SetTopOnly);
                            }
                        }
                    }
                });
                if !stage.is_empty() {
                    self.out.stages.push_back(stage);
                }
                let mut blocks = Vec::new();
                for (k, &use_new) in keep.iter().enumerate() {
                    if use_new {
                        self.write_entry(k, lid, from_pf[k]);
                        blocks.push((k, lid / 64));
                    }
                }
                let lft = self.capture(|sm| {
                    for (k, b) in blocks {
                        sm.send_lft_block(k, b);
                    }
                });
                self.out.stages.push_back(lft);
                lid
            }
        };
        let id = self.register_vm(node, vf, lid, guid);
        // Its partitions first (a VM with a table to write: its VF's
        // Set(VPortPKeyTable) goes out before the VF is enabled).
        self.pkey_vms_changed(&[node]);
        self.set_vport(node, vf, PortState::Active, guid);
        self.kick();
        Ok(id)
    }

    /// Records a VM running on VF `vf` of hypervisor `node` with `lid`
    /// and vGUID `guid` (the VF's slot included).
    pub(super) fn register_vm(&mut self, node: usize, vf: u16, lid: u16, guid: u64) -> VmId {
        let id = VmId(self.next_vm);
        self.next_vm += 1;
        self.db.set_vf(node, vf, lid, Some(id), guid);
        let hypervisor = node;
        self.vms.insert(
            id.0,
            Vm {
                guid,
                lid,
                hypervisor,
                vf,
            },
        );
        id
    }

    /// Stops a VM: its VF is disabled (one SMP). Under the dynamic policy
    /// its LID is freed; the switches' entries for it are left as they are
    /// and rewritten only where they differ when the LID is used again.
    pub fn destroy_vm(&mut self, id: VmId) -> Result<(), VmError> {
        self.ready()?;
        let vm = *self.vms.get(&id.0).ok_or(VmError::NoSuchVm(id))?;
        self.vms.remove(&id.0);
        let lid = self.db.nodes()[vm.hypervisor].vfs[usize::from(vm.vf) - 1].lid;
        if self.cfg.lid_policy == LidPolicy::Dynamic {
            self.db.set_vf(vm.hypervisor, vm.vf, 0, None, 0);
            self.free_lids.insert(vm.lid);
        } else {
            self.db.set_vf(vm.hypervisor, vm.vf, lid, None, 0);
            // Started again on this hypervisor, it takes this VF (its
            // LID) if the VF is still free. (Under the dynamic policy a
            // freed LID goes to the next VM instead.)
            self.preferred.insert(vm.guid, lid);
        }
        self.set_vport(vm.hypervisor, vm.vf, PortState::Down, 0);
        // Its partitions leave its hypervisor's switch port.
        self.pkey_vms_changed(&[vm.hypervisor]);
        self.kick();
        Ok(())
    }

    /// A hypervisor's VirtualizationInfo: its number of VFs, at most
    /// [`MAX_VFS_PER_PORT`] (an agent claiming more gets that many: every
    /// VF is a slot, and a LID under the prepopulated policy). Found again
    /// with as many, it keeps its slots: its VMs, their LIDs and vGUIDs,
    /// and the idle VFs' LIDs (written to its vports again, as to any node
    /// that comes back); its link went down, or it rebooted, and its VMs
    /// run on until they are stopped or moved. With another number, the
    /// slots it still has are kept, and a VM in one it no longer has is
    /// gone ([`Sm::resize_vfs`]).
    pub(super) fn on_virt_info(&mut self, smp: &mad_core::Smp, node: usize) {
        let Ok(vi) = mad_core::attr::VirtualizationInfo::decode(&smp.data) else {
            return;
        };
        if node >= self.db.nodes().len() {
            return;
        }
        let n = vi.vport_cap.min(MAX_VFS_PER_PORT);
        if self.db.nodes()[node].vfs.len() != usize::from(n) {
            self.resize_vfs(node, usize::from(n));
        }
        self.read_vports_back(node, n);
    }

    /// Hypervisor `node` was found again with `n` VFs: the slots up to
    /// `n` are kept ([`Subnet::set_vf_count`](super::Subnet::set_vf_count)), and each VM in a VF past
    /// `n` is gone with its VF. It is forgotten, its LID freed under the
    /// dynamic policy (under the prepopulated one the LID was its VF's,
    /// and goes with it), its partitions leave the hypervisor's switch
    /// port, and [`SmEvent::VmLost`](super::SmEvent::VmLost) says so.
    pub(super) fn resize_vfs(&mut self, node: usize, n: usize) {
        let gone: Vec<(u32, Vm)> = (self.vms.iter())
            .filter(|(_, v)| v.hypervisor == node && usize::from(v.vf) > n)
            .map(|(&id, &v)| (id, v))
            .collect();
        let hypervisor = self.db.nodes()[node].info.node_guid;
        for &(id, vm) in &gone {
            self.vms.remove(&id);
            if self.cfg.lid_policy == LidPolicy::Dynamic {
                self.free_lids.insert(vm.lid);
            }
            self.emit(super::SmEvent::VmLost {
                vm: VmId(id),
                guid: mad_core::Guid(vm.guid),
                lid: Lid(vm.lid),
                hypervisor,
                vf: vm.vf,
            });
        }
        self.db.set_vf_count(node, n);
        if !gone.is_empty() {
            self.pkey_vms_changed(&[node]);
        }
    }

    /// Plans the live migration of `id` to hypervisor `dst` without
    /// changing anything: which entries change on which switches, and what
    /// it costs in SMPs.
    pub fn plan_migration(&self, id: VmId, dst: usize) -> Result<MigrationPlan, VmError> {
        self.ready()?;
        let vm = *self.vms.get(&id.0).ok_or(VmError::NoSuchVm(id))?;
        if vm.hypervisor == dst {
            return Err(VmError::SameHypervisor);
        }
        let to_vf = self.free_vf(dst, 0)?;
        let target_of = |node: usize| -> Result<(usize, u8), VmError> {
            let (leaf, port) = self
                .attachment(node)
                .ok_or(VmError::NoRoute(self.db.nodes()[node].lid))?;
            Ok((self.db.switch_of[leaf], port))
        };
        let n = self.db.lfts.len();
        let col = |lid: u16| -> Vec<u8> { (0..n).map(|k| self.entry(k, lid)).collect() };
        let mut entries = Vec::new();
        let swapped_lid = match self.cfg.lid_policy {
            LidPolicy::Prepopulated => {
                let other = self.db.nodes()[dst].vfs[usize::from(to_vf) - 1].lid;
                let (a, b) = (col(vm.lid), col(other));
                // The VM's LID takes the routes of the destination VF's LID
                // and the other way round, where they must.
                let ka = self.minimal(&a, &b, target_of(dst)?, true)?;
                let kb = self.minimal(&b, &a, target_of(vm.hypervisor)?, true)?;
                for k in 0..n {
                    if ka[k] {
                        entries.push((k, vm.lid, b[k]));
                    }
                    if kb[k] {
                        entries.push((k, other, a[k]));
                    }
                }
                Some(other)
            }
            LidPolicy::Dynamic => {
                let (a, pf) = (col(vm.lid), col(self.db.nodes()[dst].lid));
                let ka = self.minimal(&a, &pf, target_of(dst)?, true)?;
                for k in 0..n {
                    if ka[k] {
                        entries.push((k, vm.lid, pf[k]));
                    }
                }
                None
            }
        };
        let blocks: BTreeSet<(usize, u16)> = entries.iter().map(|&(k, l, _)| (k, l / 64)).collect();
        let switches: BTreeSet<usize> = entries
            .iter()
            .map(|&(k, _, _)| self.db.switch_index[k])
            .collect();
        Ok(MigrationPlan {
            vm: id,
            from: (vm.hypervisor, vm.vf),
            to: (dst, to_vf),
            vm_lid: vm.lid,
            swapped_lid,
            entries,
            blocks: blocks.into_iter().collect(),
            switches: switches.into_iter().collect(),
            pkey_smps: self.pkey_move_smps((vm.hypervisor, vm.vf), (dst, to_vf)),
        })
    }

    /// Applies a plan: one Set(VPortInfo) to each hypervisor (the source VF
    /// released, the destination VF given the VM's LID and vGUID), then the
    /// planned LFT blocks. With `mitigate`, the VM's LID is first pointed at
    /// port 255 (drop) on every switch to be updated, and the new entries
    /// are sent only once those have been acknowledged (the deadlock
    /// mitigation of the vSwitch paper; it doubles the LFT SMPs).
    pub fn apply_migration(&mut self, plan: &MigrationPlan, mitigate: bool) -> Result<(), VmError> {
        self.apply_migrations(core::slice::from_ref(plan), mitigate)
    }

    /// Applies plans whose switches and hypervisors are pairwise disjoint,
    /// all at once (their SMPs share the pipeline window).
    pub fn apply_migrations(
        &mut self,
        plans: &[MigrationPlan],
        mitigate: bool,
    ) -> Result<(), VmError> {
        self.ready()?;
        let mut seen_sw = BTreeSet::new();
        let mut seen_hyp = BTreeSet::new();
        for p in plans {
            let fresh = self
                .vms
                .get(&p.vm.0)
                .is_some_and(|v| (v.hypervisor, v.vf) == p.from && v.lid == p.vm_lid)
                && self
                    .db
                    .nodes()
                    .get(p.to.0)
                    .and_then(|n| n.vfs.get(usize::from(p.to.1).wrapping_sub(1)))
                    .is_some_and(|s| {
                        s.vm.is_none()
                            && match p.swapped_lid {
                                Some(l) => s.lid == l,
                                None => true,
                            }
                    });
            if !fresh {
                return Err(VmError::StalePlan);
            }
            for &s in &p.switches {
                if !seen_sw.insert(s) {
                    return Err(VmError::Overlap);
                }
            }
            for h in [p.from.0, p.to.0] {
                if !seen_hyp.insert(h) {
                    return Err(VmError::Overlap);
                }
            }
        }
        let mut drop_stage = Vec::new();
        let mut main = Vec::new();
        for p in plans {
            if mitigate {
                let mut blocks = BTreeSet::new();
                for &(k, l, _) in &p.entries {
                    if l == p.vm_lid {
                        blocks.insert((k, l / 64));
                    }
                }
                for (k, b) in blocks {
                    let saved = self.entry(k, p.vm_lid);
                    self.write_entry(k, p.vm_lid, DROP_PORT);
                    drop_stage.extend(self.capture(|sm| sm.send_lft_block(k, b)));
                    self.write_entry(k, p.vm_lid, saved);
                }
            }
            // The SM's view first.
            let vm = self.vms.get_mut(&p.vm.0).expect("checked fresh");
            vm.hypervisor = p.to.0;
            vm.vf = p.to.1;
            let guid = vm.guid;
            let (src, dst) = (p.from, p.to);
            // The source VF first: it gives up the VM's LID and vGUID
            // (taking the destination VF's LID under the prepopulated
            // policy), then the destination VF takes them.
            self.db
                .set_vf(src.0, src.1, p.swapped_lid.unwrap_or(0), None, 0);
            self.db.set_vf(dst.0, dst.1, p.vm_lid, Some(p.vm), guid);
            for &(k, l, port) in &p.entries {
                self.write_entry(k, l, port);
            }
            main.extend(self.capture(|sm| {
                sm.set_vport(src.0, src.1, PortState::Down, 0);
                sm.set_vport(dst.0, dst.1, PortState::Active, guid);
                for &(k, b) in &p.blocks {
                    sm.send_lft_block(k, b);
                }
            }));
        }
        // The VMs' partitions at their new places, in the same stage and
        // ahead of it: each moved VM's VF table, and the tables of the
        // switch ports cabled to the hypervisors (nothing without
        // partitions).
        let hyps: Vec<usize> = seen_hyp.into_iter().collect();
        let mut keys = self.capture(|sm| sm.pkey_vms_changed(&hyps));
        keys.extend(main);
        let main = keys;
        if !drop_stage.is_empty() {
            self.out.stages.push_back(drop_stage);
        }
        self.out.stages.push_back(main);
        self.kick();
        Ok(())
    }

    /// The traditional way: recompute every route from scratch and send
    /// every LFT block in use to every switch. Returns the SMPs queued.
    pub fn full_reconfigure(&mut self) -> Result<usize, VmError> {
        self.ready()?;
        self.route();
        let start = self.out.queue.len();
        let blocks = usize::from(self.db.max_lid) / 64 + 1;
        for k in 0..self.db.switch_index.len() {
            for b in 0..blocks {
                self.send_lft_block(k, b as u16);
            }
        }
        let n = self.out.queue.len() - start;
        self.kick();
        Ok(n)
    }

    /// Moves queued work into the Reconfiguration phase.
    fn kick(&mut self) {
        if !self.out.queue.is_empty() || !self.out.stages.is_empty() {
            if self.out.queue.is_empty() {
                if let Some(s) = self.out.stages.pop_front() {
                    self.out.queue.extend(s);
                }
            }
            if self.phase == Phase::Done {
                self.phase = Phase::Reconfiguration;
            }
        }
    }

    fn entry(&self, k: usize, lid: u16) -> u8 {
        self.db.lfts[k]
            .get(usize::from(lid))
            .copied()
            .unwrap_or(DROP_PORT)
    }

    fn write_entry(&mut self, k: usize, lid: u16, port: u8) {
        let t = &mut self.db.lfts[k];
        if t.len() <= usize::from(lid) {
            t.resize(usize::from(lid) + 1, DROP_PORT);
        }
        t[usize::from(lid)] = port;
    }

    /// Which switches must take the `new` entry for a LID so that, from
    /// every switch, the LID's packets reach `target` (switch ordinal, port)
    /// — the others keep their `old` entry. Starts from all-new (a valid
    /// routing: it is another LID's) and keeps an old entry wherever the
    /// walk from that switch still arrives, never by a longer path than the
    /// new one when `no_longer`. Returns, per switch, whether it changes.
    fn minimal(
        &self,
        old: &[u8],
        new: &[u8],
        target: (usize, u8),
        no_longer: bool,
    ) -> Result<Vec<bool>, VmError> {
        let n = old.len();
        let mut use_new: Vec<bool> = (0..n).map(|k| old[k] != new[k]).collect();
        let walk = |use_new: &[bool], from: usize, limit: usize| -> Option<usize> {
            let mut k = from;
            for hops in 0..limit {
                let p = if use_new[k] { new[k] } else { old[k] };
                match self.db.graph.ports[k].get(usize::from(p)).copied() {
                    Some(PortTo::Switch(j, _)) => k = j,
                    Some(PortTo::Ca(..)) if (k, p) == target => return Some(hops),
                    _ => return None,
                }
            }
            None
        };
        let all_new = vec![true; n];
        let mut len_new = Vec::with_capacity(n);
        for k in 0..n {
            match walk(&all_new, k, n + 1) {
                Some(h) => len_new.push(h),
                None => return Err(VmError::NoRoute(0)),
            }
        }
        for k in 0..n {
            if !use_new[k] {
                continue;
            }
            use_new[k] = false;
            // A walk longer than the new route is refused (or, without
            // `no_longer`, one that cannot end: a loop) — cut it there.
            let limit = if no_longer { len_new[k] + 1 } else { n + 1 };
            let ok = walk(&use_new, k, limit).is_some();
            if !ok {
                use_new[k] = true;
            }
        }
        Ok(use_new)
    }
}

impl Sm {
    /// Queues Set(VPortInfo) for VF `vf` (1-based) of hypervisor `node`
    /// with the LID the SM holds for it, `state` and `guid`.
    pub(super) fn set_vport(&mut self, node: usize, vf: u16, state: PortState, guid: u64) {
        let n = &self.db.nodes()[node];
        let Some(slot) = n.vfs.get(usize::from(vf) - 1) else {
            return;
        };
        // A running VM's SA clients are asked to reregister where the
        // PF's would be (`SmConfig::no_clients_rereg`): at bring-up or
        // takeover, and on a hypervisor back or new.
        let pf_rereg = n.ports.get(usize::from(n.end_port())).is_some_and(|p| {
            p.info.is_some_and(|pi| {
                pi.capability_mask
                    .contains(mad_core::attr::CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED)
            })
        });
        let v = VPortInfo {
            vport_state: state,
            vport_client_reregister: !self.cfg.no_clients_rereg
                && pf_rereg
                && state == PortState::Active
                && guid != 0
                && (!self.up || n.fresh),
            lid_required: true,
            vport_lid: Lid(slot.lid),
            vport_guid: mad_core::Guid(guid),
            ..VPortInfo::default()
        };
        self.set_node(node, &v, u32::from(vf), Purpose::SetVPort);
    }

    /// Sets VF `vf` of hypervisor `i` as the SM holds it: its LID, and
    /// Active with its VM's vGUID if a VM runs there, else Down.
    pub(super) fn set_vport_as_held(&mut self, i: usize, vf: u16) {
        let (state, guid) = match self.db.nodes()[i].vfs[usize::from(vf) - 1].vm {
            Some(id) => (PortState::Active, self.vms.get(&id.0).map_or(0, |v| v.guid)),
            None => (PortState::Down, 0),
        };
        self.set_vport(i, vf, state, guid);
    }

    /// Every VF with a LID of the live hypervisors in `vports_unknown`
    /// (which it empties), set as held: called as the links are made
    /// Active, when a hypervisor reset unseen has its own LID back.
    pub(super) fn set_unknown_vports(&mut self) {
        for i in core::mem::take(&mut self.vports_unknown) {
            let n = &self.db.nodes()[i];
            if !n.alive {
                continue;
            }
            let held: Vec<u16> = (1..=n.vfs.len() as u16)
                .filter(|&vf| n.vfs[usize::from(vf) - 1].lid != 0)
                .collect();
            for vf in held {
                self.set_vport_as_held(i, vf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sm::{SmConfig, SmNode};
    use mad_core::attr::{AttributeId, NodeType, VirtualizationInfo};
    use mad_core::Smp;

    #[test]
    fn policy_names_round_trip() {
        for p in LidPolicy::ALL {
            assert_eq!(LidPolicy::from_name(p.name()), Some(p), "{p:?}");
        }
        assert_ne!(LidPolicy::ALL[0].name(), LidPolicy::ALL[1].name());
        assert_eq!(LidPolicy::from_name("Dynamic"), None);
    }

    #[test]
    fn every_policy_is_listed() {
        // A variant added to LidPolicy must be added to LidPolicy::ALL:
        // this match stops compiling until it is considered here.
        for p in LidPolicy::ALL {
            match p {
                LidPolicy::Prepopulated | LidPolicy::Dynamic => {}
            }
        }
    }

    fn virt_info(cap: u16) -> Smp {
        let mut smp = crate::sm::subnet::answer_for_test(AttributeId::VirtualizationInfo);
        let vi = VirtualizationInfo {
            vport_cap: cap,
            virtualization_enable: true,
            ..VirtualizationInfo::default()
        };
        vi.encode(&mut smp.data).unwrap();
        smp
    }

    /// An agent claiming 65,535 VFs gets `MAX_VFS_PER_PORT` slots, and a
    /// new master reads back that many vports, no more; an answer for a
    /// node the SM does not have changes nothing.
    #[test]
    fn a_hypervisor_claiming_every_vport_gets_at_most_the_cap() {
        let mut sm = Sm::new(SmConfig::default());
        sm.db
            .add_node(SmNode::for_test(0x1, NodeType::ChannelAdapter, 1, &[]));
        sm.db
            .add_node(SmNode::for_test(0xC, NodeType::ChannelAdapter, 1, &[1]));
        sm.keep_lids = true;
        let before = sm.out.queue.len();
        sm.on_virt_info(&virt_info(u16::MAX), 1);
        assert_eq!(sm.db.nodes()[1].vfs.len(), usize::from(MAX_VFS_PER_PORT));
        assert_eq!(
            sm.out.queue.len() - before,
            usize::from(MAX_VFS_PER_PORT),
            "a Get(VPortInfo) of each"
        );
        sm.on_virt_info(&virt_info(4), 1);
        assert_eq!(sm.db.nodes()[1].vfs.len(), 4);
        let queued = sm.out.queue.len();
        sm.on_virt_info(&virt_info(4), 99);
        assert_eq!(sm.out.queue.len(), queued);
        assert!(sm.db.indexes_agree());
    }
}
