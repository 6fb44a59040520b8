//! Partitions applied: the P_Key table of every end port (a CA's port, a
//! switch's port 0) from a [`PartitionConfig`], the tables of the switch
//! ports cabled to CAs, and partition enforcement on those switch ports.
//!
//! OpenSM's rules, so that the same `partitions.conf` gives the same
//! tables port for port:
//! - every end port is first a limited member of the default partition
//!   (0x7FFF) and the SM's port a full one; the file's entries then apply
//!   in order, a later entry for a port replacing an earlier one (`both`
//!   is taken as full, as OpenSM does unless `allow_both_pkeys` is set);
//! - a P_Key the port already holds keeps its index; the default P_Key (or
//!   an `indx0` partition's) sits at index 0; a new one goes after the
//!   highest index ever used on the port, or, past the end of the table,
//!   in the first free entry; partitions are taken in the order OpenSM's
//!   table of partitions keeps (by P_Key, low byte first);
//! - a switch port cabled to a CA gets the CA port's P_Keys, packed from
//!   index 0 (a limited key dropped where the full one is there), when the
//!   switch has PartitionEnforcementCap; it then enforces inbound and
//!   outbound, unless the keys do not fit. Switch-to-switch links do not
//!   enforce.
//!
//! A VM on a vSwitch hypervisor is an end port of its own: it is named by
//! its vGUID (and is in `ALL` and `ALL_CAS`), and the SM writes its VF's
//! table with Set(VPortPKeyTable) wherever the VM runs, so two VMs on one
//! hypervisor can be in different partitions. The switch port cabled to
//! a hypervisor gets the keys of the PF and of every VM on it. A VM keeps
//! each P_Key's index when it moves (its QPs name keys by index). A VF's
//! table is one block. For a VM this SM started or moved it is written
//! without being read (a Get would cost as much as the Set); a VM found
//! running (a new master taking over) has its VF's table read first, so
//! that its keys keep their indexes as a port's do.
//!
//! The SM reads a port's table before writing it (Get(P_KeyTable) of each
//! block, as OpenSM does at discovery) and sends only the blocks that
//! differ. A port whose table cannot be read is left as it is. The
//! enforcement bits ride on the Set(PortInfo) that arms a port at
//! bring-up; on a running subnet they cost a Set(PortInfo) where they
//! change. Without a configuration the SM touches no P_Key table.

use super::partitions::{Membership, PartitionConfig, Ports, DEFAULT_PKEY};
use super::*;
use crate::sma::hypervisor::VF_PKEY_ENTRIES;
use mad_core::attr::modifier::{Modifier, PKeyBlock, VPortPKeyBlock};
use mad_core::{Guid, PKey};

/// A partition's member entries, in order.
type Members = Vec<(Ports, Membership)>;

/// Entries in a P_Key block.
const BLOCK: usize = 32;

/// Blocks of a port's table the SM reads and writes at most (1,024
/// entries); entries past them are left as they are.
pub const MAX_PKEY_BLOCKS: u16 = 32;

/// The P_Key tables: the configuration, what each port holds, and what it
/// should hold.
#[derive(Clone, Debug, Default)]
pub(super) struct PKeys {
    /// The partitions applied (none: P_Key tables are left alone).
    pub(super) config: Option<PartitionConfig>,
    /// What each port holds, block by block, as read or written (`None`:
    /// not read).
    held: BTreeMap<(usize, u8), Vec<Option<[u16; BLOCK]>>>,
    /// Per port, the index each P_Key (low 15 bits) has held, kept across
    /// changes so a P_Key keeps its place.
    places: BTreeMap<(usize, u8), BTreeMap<u16, usize>>,
    /// The table each port should hold (end ports, and switch ports
    /// cabled to CAs).
    pub(super) want: BTreeMap<(usize, u8), Vec<u16>>,
    /// The (inbound, outbound) enforcement bits each switch port should
    /// hold.
    pub(super) enforce: BTreeMap<(usize, u8), (bool, bool)>,
    /// The enforcement bits last sent to each switch port: a port that
    /// did not keep them (ibsim keeps none) is not sent them again.
    pub(super) sent: BTreeMap<(usize, u8), (bool, bool)>,
    /// Reads are out: apply once they are answered.
    awaiting: bool,
    /// Ports whose table could not hold every P_Key they should.
    pub(super) overflow: BTreeSet<(usize, u8)>,
    /// Configurations applied so far.
    pub(super) generation: u64,
    /// Each partition's `sl=` (low 15 bits of its P_Key → SL), where not 0.
    sl: BTreeMap<u16, u8>,
    /// What each VF (hypervisor node, VF from 1) holds, as last written
    /// or answered; absent: not known.
    vf_held: BTreeMap<(usize, u16), Vec<u16>>,
    /// The table each VF that runs a VM should hold.
    pub(super) vf_want: BTreeMap<(usize, u16), Vec<u16>>,
    /// Per VM (by vGUID), the index each P_Key has held: kept when the
    /// VM moves to another VF.
    vm_places: BTreeMap<u64, BTreeMap<u16, usize>>,
    /// VFs whose table could not hold every P_Key their VM should.
    pub(super) vf_overflow: BTreeSet<(usize, u16)>,
    /// The tables were laid out with OpenSM's `allow_both_pkeys`.
    both: bool,
}

impl PKeys {
    /// What the ports of `node` and its VFs hold is not known any more
    /// (the node may have been reset): they are read again before the
    /// next write.
    pub(super) fn forget_node(&mut self, node: usize) {
        self.held.retain(|&(n, _), _| n != node);
        self.vf_held.retain(|&(n, _), _| n != node);
    }

    /// What VF `vf` of `node` holds is not known any more.
    pub(super) fn forget_vf(&mut self, node: usize, vf: u16) {
        self.vf_held.remove(&(node, vf));
    }

    /// The whole table of a port, when every block has been read.
    fn table(&self, at: (usize, u8)) -> Option<Vec<u16>> {
        let blocks = self.held.get(&at)?;
        let mut t = Vec::with_capacity(blocks.len() * BLOCK);
        for b in blocks {
            t.extend_from_slice(b.as_ref()?);
        }
        Some(t)
    }
}

/// What tells two P_Keys of a table apart: the partition (low 15 bits),
/// or with `both` (OpenSM's `allow_both_pkeys`) the whole key, so that a
/// port holds the full and the limited P_Key of a partition side by side.
fn ident(k: u16, both: bool) -> u16 {
    if both {
        k
    } else {
        k & 0x7FFF
    }
}

/// Where P_Keys go in a table of `len` entries: `keys` (full bit
/// included) in order, `index0` the key ([`ident`]) that sits at index 0,
/// `places` where each key has been (updated), `both` as [`ident`]
/// takes it. The table, and the keys that found no room.
///
/// With `both`, the default partition's index 0 is the full default
/// P_Key's (0xFFFF): a port that is only a limited member leaves index 0
/// empty unless it holds 0x7FFF there already, as OpenSM lays it out.
fn layout(
    keys: &[u16],
    index0: u16,
    places: &mut BTreeMap<u16, usize>,
    len: usize,
    both: bool,
) -> (Vec<u16>, Vec<u16>) {
    let at0 = |id: u16| {
        id == index0 || (both && index0 == 0xFFFF && id == DEFAULT_PKEY && !keys.contains(&0xFFFF))
    };
    let mut table = vec![0u16; len];
    let mut new = Vec::new();
    for &k in keys {
        let id = ident(k, both);
        match places.get(&id) {
            Some(&p) if p < len && (p == 0) == at0(id) && table[p] == 0 => table[p] = k,
            _ => new.push(k),
        }
    }
    let mut lost = Vec::new();
    for k in new {
        let id = ident(k, both);
        let p = if id == index0 {
            Some(0).filter(|_| len > 0 && table[0] == 0)
        } else {
            let next = places.values().copied().max().map_or(1, |m| m + 1);
            if next < len && table[next] == 0 {
                Some(next)
            } else {
                (1..len).find(|&i| table[i] == 0)
            }
        };
        match p {
            Some(p) => {
                table[p] = k;
                places.retain(|_, &mut q| q != p);
                places.insert(id, p);
            }
            None => lost.push(k),
        }
    }
    (table, lost)
}

/// The keys a port holds by [`ident`], each at its first index: where
/// they have been, for a port whose places the SM has not kept.
fn held_places(held: &[u16], both: bool) -> BTreeMap<u16, usize> {
    let mut m = BTreeMap::new();
    for (i, &k) in held.iter().enumerate() {
        if k & 0x7FFF != 0 {
            m.entry(ident(k, both)).or_insert(i);
        }
    }
    m
}

/// The keys, in OpenSM's order, a port that is a `how` member of the
/// partition `pkey` holds: with `both` (OpenSM's `allow_both_pkeys`) a
/// `both` member holds the limited key then the full one; without, it
/// is a full member. Also the key ([`ident`]) an `indx0` partition puts
/// at index 0 (the limited one for a `both` member, as OpenSM keeps the
/// last it is given).
fn member_keys(pkey: u16, how: Membership, both: bool) -> (Vec<u16>, u16) {
    let (full, limited) = (pkey | 0x8000, pkey & 0x7FFF);
    let keys = match how {
        Membership::Full => vec![full],
        Membership::Limited => vec![limited],
        Membership::Both if both => vec![limited, full],
        Membership::Both => vec![full],
    };
    let at0 = ident(*keys.first().unwrap_or(&full), both);
    (keys, at0)
}

/// `table` with the keys of `vfs` (a hypervisor's VMs' tables) added where
/// not there yet: what the hypervisor's link carries.
fn with_vm_keys<'a>(mut table: Vec<u16>, vfs: impl Iterator<Item = &'a [u16]>) -> Vec<u16> {
    for t in vfs {
        for &k in t {
            if k & 0x7FFF != 0 && !table.contains(&k) {
                table.push(k);
            }
        }
    }
    table
}

/// A switch port's table for the CA port holding `ca`: its valid P_Keys
/// packed from index 0, a limited one dropped where the full one is
/// there. False when they do not fit in `len` entries.
fn peer_table(ca: &[u16], len: usize) -> (Vec<u16>, bool) {
    let mut t: Vec<u16> = (ca.iter().copied())
        .filter(|&k| k & 0x7FFF != 0 && (k & 0x8000 != 0 || !ca.contains(&(k | 0x8000))))
        .collect();
    let fits = t.len() <= len;
    t.resize(len, 0);
    (t, fits)
}

impl Sm {
    /// Applies `config`: the P_Key tables it gives, written where they
    /// differ from what the ports hold (read first where not known), and
    /// partition enforcement on the switch ports cabled to CAs. Before
    /// the subnet is up it is kept for the bring-up's distribution. The
    /// SMPs queued now.
    pub fn set_partitions(&mut self, config: PartitionConfig) -> usize {
        self.db.pkeys.sl = (config.partitions.iter())
            .filter(|p| p.flags.sl != 0)
            .map(|p| (p.pkey & 0x7FFF, p.flags.sl))
            .collect();
        self.db.pkeys.config = Some(config);
        self.db.pkeys.generation += 1;
        self.reconfigure(Sm::pkey_distribute)
    }

    /// Partition enforcement becomes `mode` (OpenSM's `part_enforce`
    /// changed on a running subnet): the switch ports cabled to CAs get
    /// their bits, and their tables where enforcement turns on from
    /// `off`, with only what differs sent. The SMPs queued now (none
    /// without partitions; before the subnet is up, or in a sweep, the
    /// next distribution applies it).
    pub fn set_part_enforce(&mut self, mode: PartEnforce) -> usize {
        if self.cfg.part_enforce == mode {
            return 0;
        }
        self.cfg.part_enforce = mode;
        self.reconfigure(Sm::pkey_distribute)
    }

    /// OpenSM's `allow_both_pkeys` becomes `on` (see
    /// [`SmConfig::allow_both_pkeys`]): every table is laid out again,
    /// the keys' places taken afresh from what the ports hold (as
    /// OpenSM's map of a port's keys is), and what differs is written.
    /// The SMPs queued now, as [`Sm::set_part_enforce`].
    pub fn set_allow_both_pkeys(&mut self, on: bool) -> usize {
        if self.cfg.allow_both_pkeys == on {
            return 0;
        }
        self.cfg.allow_both_pkeys = on;
        self.db.pkeys.places.clear();
        self.db.pkeys.vm_places.clear();
        self.reconfigure(Sm::pkey_distribute)
    }

    /// OpenSM's `keep_pkey_indexes` becomes `on` (see
    /// [`SmConfig::keep_pkey_indexes`]); turned off, every port's table
    /// is laid out afresh now and what differs is written. The SMPs
    /// queued now, as [`Sm::set_part_enforce`].
    pub fn set_keep_pkey_indexes(&mut self, on: bool) -> usize {
        if self.cfg.keep_pkey_indexes == on {
            return 0;
        }
        self.cfg.keep_pkey_indexes = on;
        self.reconfigure(Sm::pkey_distribute)
    }

    /// On a running subnet, runs `apply` and moves to Reconfiguration if
    /// it queued SMPs (before the subnet is up the bring-up's
    /// distribution applies it; in a sweep, the next sweep's, which goes
    /// through distribution even if it finds no change). The SMPs queued.
    pub(super) fn reconfigure(&mut self, apply: fn(&mut Sm)) -> usize {
        if !self.up {
            return 0;
        }
        if !matches!(self.phase, Phase::Done | Phase::Reconfiguration) {
            self.reroute_pending = true;
            return 0;
        }
        let start = self.out.queue.len();
        apply(self);
        let n = self.out.queue.len() - start;
        if n > 0 && self.phase == Phase::Done {
            self.phase = Phase::Reconfiguration;
        }
        n
    }

    /// The partition configuration applied, if any.
    pub fn partitions(&self) -> Option<&PartitionConfig> {
        self.db.pkeys.config.as_ref()
    }

    /// Entries of the P_Key table of `port` of node `i` the SM manages
    /// (PartitionCap for end ports, PartitionEnforcementCap for a switch's
    /// external ports; at most [`MAX_PKEY_BLOCKS`] blocks).
    fn pkey_entries(&self, i: usize, port: u8) -> usize {
        let n = &self.db.nodes()[i];
        let cap = if n.is_switch() && port != 0 {
            n.switch_info.map_or(0, |s| s.partition_enforcement_cap)
        } else {
            n.info.partition_cap
        };
        usize::from(cap).min(usize::from(MAX_PKEY_BLOCKS) * BLOCK)
    }

    /// Blocks of that table.
    fn pkey_blocks(&self, i: usize, port: u8) -> u16 {
        self.pkey_entries(i, port).div_ceil(BLOCK) as u16
    }

    /// The end ports of the subnet: a switch's port 0, the port by which
    /// a CA or router was reached.
    fn end_ports(&self) -> Vec<(usize, u8)> {
        let mut v = Vec::new();
        for (i, n) in self.db.nodes().iter().enumerate() {
            if !n.alive {
                continue;
            }
            let p = n.end_port();
            if n.ports
                .get(usize::from(p))
                .is_some_and(|x| x.info.is_some())
            {
                v.push((i, p));
            }
        }
        v
    }

    /// The switch ports, cabled to an end port of `ends`, whose switch
    /// can enforce partitions: (switch port, CA port).
    fn ca_facing(&self, ends: &[(usize, u8)]) -> Vec<((usize, u8), (usize, u8))> {
        let mut v = Vec::new();
        for &(i, p) in ends {
            if self.db.nodes()[i].is_switch() {
                continue;
            }
            let Some((s, q)) = self.db.nodes()[i].ports[usize::from(p)].peer else {
                continue;
            };
            let sn = &self.db.nodes()[s];
            if sn.alive && sn.is_switch() && self.pkey_blocks(s, q) > 0 {
                v.push(((s, q), (i, p)));
            }
        }
        v
    }

    /// The VFs that run a VM on a live hypervisor: (node, VF from 1).
    fn vm_ends(&self) -> Vec<(usize, u16)> {
        self.vm_ends_of(0..self.db.nodes().len())
    }

    /// [`Sm::vm_ends`] of the nodes `nodes` only.
    fn vm_ends_of(&self, nodes: impl IntoIterator<Item = usize>) -> Vec<(usize, u16)> {
        let mut v = Vec::new();
        for i in nodes {
            let Some(n) = self.db.nodes().get(i) else {
                continue;
            };
            if n.alive && n.is_hypervisor() {
                for (k, slot) in n.vfs.iter().enumerate() {
                    if slot.vm.is_some() {
                        v.push((i, k as u16 + 1));
                    }
                }
            }
        }
        v
    }

    /// The partitions of `cfg` in OpenSM's order (its map keyed by the
    /// P_Key as it sits in memory, low byte first), each with its
    /// index-0 flag and members, the default partition's implicit
    /// members (every port limited, the SM full) ahead of the file's.
    fn partition_list(cfg: &PartitionConfig) -> Vec<(u16, bool, Members)> {
        let default = [
            (Ports::All, Membership::Limited),
            (Ports::SelfPort, Membership::Full),
        ];
        let mut parts: Vec<(u16, bool, Members)> = Vec::new();
        if !cfg.partitions.iter().any(|p| p.pkey == DEFAULT_PKEY) {
            parts.push((DEFAULT_PKEY, false, default.to_vec()));
        }
        for p in &cfg.partitions {
            let mut m = Vec::new();
            if p.pkey == DEFAULT_PKEY {
                m.extend_from_slice(&default);
            }
            m.extend_from_slice(&p.members);
            parts.push((p.pkey, p.index0, m));
        }
        parts.sort_by_key(|(k, _, _)| k.swap_bytes());
        parts
    }

    /// The P_Keys (full bit included) in OpenSM's order of each VM of
    /// `vms` (by its VF), and the partition at its index 0. VMs are CA
    /// ports: in ALL and ALL_CAS, and named by vGUID.
    fn vm_memberships(
        &self,
        parts: &[(u16, bool, Members)],
        vms: &[(usize, u16)],
    ) -> BTreeMap<(usize, u16), (Vec<u16>, u16)> {
        let both = self.cfg.allow_both_pkeys;
        // Index 0 is the default partition's (its full key's, with `both`).
        let default0 = ident(0xFFFF, both);
        let mut out: BTreeMap<(usize, u16), (Vec<u16>, u16)> =
            vms.iter().map(|&v| (v, (Vec::new(), default0))).collect();
        for (pkey, index0, members) in parts {
            let mut who: BTreeMap<(usize, u16), Membership> = BTreeMap::new();
            for &(ports, how) in members {
                match ports {
                    Ports::All | Ports::AllCas => vms.iter().for_each(|&v| {
                        who.insert(v, how);
                    }),
                    Ports::Guid(g) => {
                        if let Some((n, vf)) = self.db.by_port_guid(Guid(g)) {
                            if vf != 0 && out.contains_key(&(n.0, vf)) {
                                who.insert((n.0, vf), how);
                            }
                        }
                    }
                    _ => {}
                }
            }
            for (v, how) in who {
                if let Some((keys, at0)) = out.get_mut(&v) {
                    let (k, first) = member_keys(*pkey, how, both);
                    keys.extend(k);
                    if *index0 {
                        *at0 = first;
                    }
                }
            }
        }
        out
    }

    /// Each end port's P_Keys (full bit included) in OpenSM's order, and
    /// the partition at its index 0; the same for each VM, by its VF.
    #[allow(clippy::type_complexity)]
    fn memberships(
        &self,
        cfg: &PartitionConfig,
    ) -> (
        BTreeMap<(usize, u8), (Vec<u16>, u16)>,
        BTreeMap<(usize, u16), (Vec<u16>, u16)>,
    ) {
        let ends = self.end_ports();
        let sm_port = (
            0,
            self.db.nodes().first().map_or(1, |n| n.info.local_port_num),
        );
        let parts = Self::partition_list(cfg);
        let vm_out = self.vm_memberships(&parts, &self.vm_ends());
        let both = self.cfg.allow_both_pkeys;
        // Index 0 is the default partition's (its full key's, with `both`).
        let default0 = ident(0xFFFF, both);
        let mut out: BTreeMap<(usize, u8), (Vec<u16>, u16)> =
            ends.iter().map(|&e| (e, (Vec::new(), default0))).collect();
        for (pkey, index0, members) in parts {
            let mut who: BTreeMap<(usize, u8), Membership> = BTreeMap::new();
            for (ports, how) in members {
                let mut add = |e: (usize, u8)| {
                    who.insert(e, how);
                };
                match ports {
                    Ports::All => ends.iter().for_each(|&e| add(e)),
                    Ports::AllCas | Ports::AllSwitches | Ports::AllRouters => {
                        let kind = match ports {
                            Ports::AllCas => NodeType::ChannelAdapter,
                            Ports::AllSwitches => NodeType::Switch,
                            _ => NodeType::Router,
                        };
                        (ends.iter())
                            .filter(|&&(i, _)| self.db.nodes()[i].info.node_type == kind)
                            .for_each(|&e| add(e));
                    }
                    Ports::SelfPort => add(sm_port),
                    Ports::Guid(g) => {
                        if let Some((n, 0)) = self.db.by_port_guid(Guid(g)) {
                            if let Some(&e) = ends.iter().find(|e| e.0 == n.0) {
                                add(e);
                            }
                        }
                    }
                }
            }
            for (e, how) in who {
                if let Some((keys, at0)) = out.get_mut(&e) {
                    let (k, first) = member_keys(pkey, how, both);
                    keys.extend(k);
                    if index0 {
                        *at0 = first;
                    }
                }
            }
        }
        (out, vm_out)
    }

    /// After routing (bring-up, a sweep, a new configuration): reads the
    /// tables not known yet, or applies at once when all are known.
    pub(super) fn pkey_distribute(&mut self) {
        if self.db.pkeys.config.is_none() {
            return;
        }
        // A node that is new or came back holds what it holds now.
        let stale: Vec<(usize, u8)> = (self.db.pkeys.held.keys().copied())
            .filter(|&(i, _)| self.db.nodes().get(i).is_none_or(|n| n.fresh || !n.alive))
            .collect();
        for k in stale {
            self.db.pkeys.held.remove(&k);
        }
        let gone: Vec<(usize, u8)> = (self.db.pkeys.sent.keys().copied())
            .filter(|&(i, _)| self.db.nodes().get(i).is_none_or(|n| n.fresh || !n.alive))
            .collect();
        for k in gone {
            self.db.pkeys.sent.remove(&k);
        }
        let vf_stale: Vec<(usize, u16)> = (self.db.pkeys.vf_held.keys().copied())
            .filter(|&(i, _)| self.db.nodes().get(i).is_none_or(|n| n.fresh || !n.alive))
            .collect();
        for k in vf_stale {
            self.db.pkeys.vf_held.remove(&k);
        }
        let ends = self.end_ports();
        let mut ports = ends.clone();
        if self.cfg.part_enforce != PartEnforce::Off {
            ports.extend(self.ca_facing(&ends).into_iter().map(|(s, _)| s));
        }
        let mut read = false;
        // A VM found running, whose keys' places this SM does not know.
        for (i, vf) in self.vm_ends() {
            let guid = self.db.nodes()[i].vfs[usize::from(vf) - 1].guid;
            if !self.db.pkeys.vm_places.contains_key(&guid)
                && !self.db.pkeys.vf_held.contains_key(&(i, vf))
            {
                let am = VPortPKeyBlock {
                    vport: vf,
                    block: 0,
                }
                .encode();
                let purpose = Purpose::VPortPKeyTable { node: i, vf };
                self.get_node(i, AttributeId::VPortPKeyTable, am, purpose);
                read = true;
            }
        }
        for (i, p) in ports {
            let blocks = self.pkey_blocks(i, p);
            let held = (self.db.pkeys.held.entry((i, p)))
                .or_insert_with(|| vec![None; usize::from(blocks)]);
            if held.len() != usize::from(blocks) {
                *held = vec![None; usize::from(blocks)];
            }
            let missing: Vec<u16> = (0..blocks)
                .filter(|&b| held[usize::from(b)].is_none())
                .collect();
            for b in missing {
                self.pkey_request(i, p, b, None);
                read = true;
            }
        }
        if read {
            self.db.pkeys.awaiting = true;
        } else {
            self.pkey_apply();
        }
    }

    /// Get (or, with a block, Set) of block `b` of the P_Key table of
    /// `port` of node `i`.
    fn pkey_request(&mut self, i: usize, port: u8, b: u16, set: Option<&[u16]>) {
        let am = PKeyBlock {
            port: if self.db.nodes()[i].is_switch() {
                port
            } else {
                0
            },
            block: b,
        }
        .encode();
        let purpose = Purpose::PKeyTable {
            node: i,
            port,
            block: b,
        };
        match set {
            None => self.get_node(i, AttributeId::PKeyTable, am, purpose),
            Some(keys) => {
                let mut t = PKeyTable::default();
                for (slot, &k) in t.p_keys.iter_mut().zip(keys) {
                    *slot = PKey(k);
                }
                self.set_node(i, &t, am, purpose);
            }
        }
    }

    /// A block of a P_Key table read or written: what the port holds now.
    pub(super) fn on_pkey_table(&mut self, smp: &Smp, node: usize, port: u8, block: u16) {
        let Ok(t) = PKeyTable::decode(&smp.data) else {
            return;
        };
        let held = self.db.pkeys.held.entry((node, port)).or_default();
        if let Some(slot) = held.get_mut(usize::from(block)) {
            let mut b = [0u16; BLOCK];
            for (x, k) in b.iter_mut().zip(t.p_keys.iter()) {
                *x = k.0;
            }
            *slot = Some(b);
        }
    }

    /// Set(VPortPKeyTable) of VF `vf` of hypervisor `node`: its one
    /// block, `keys`. Taken as held until the answer says otherwise.
    fn vf_pkey_set(&mut self, node: usize, vf: u16, keys: &[u16]) {
        let mut t = VPortPKeyTable::default();
        for (slot, &k) in t.p_keys.iter_mut().zip(keys) {
            *slot = PKey(k);
        }
        let am = VPortPKeyBlock {
            vport: vf,
            block: 0,
        }
        .encode();
        self.db.pkeys.vf_held.insert((node, vf), keys.to_vec());
        self.set_node(node, &t, am, Purpose::VPortPKeyTable { node, vf });
    }

    /// A VF's table written: what it holds now.
    pub(super) fn on_vf_pkey_table(&mut self, smp: &Smp, node: usize, vf: u16) {
        match VPortPKeyTable::decode(&smp.data) {
            Ok(t) => {
                let keys = t.p_keys.iter().map(|k| k.0).collect();
                self.db.pkeys.vf_held.insert((node, vf), keys);
            }
            Err(_) => self.db.pkeys.forget_vf(node, vf),
        }
    }

    /// The P_Key SMPs moving the VM on VF `from` to VF `to` (of another
    /// hypervisor) sends, as [`Sm::pkey_vms_changed`] would after it: its
    /// table on `to` where that VF is not known to hold it, and the
    /// blocks of the two hypervisors' switch ports that change, with a
    /// Set(PortInfo) where enforcement would turn on or off. 0 without
    /// partitions.
    pub(super) fn pkey_move_smps(&self, from: (usize, u16), to: (usize, u16)) -> usize {
        let p = &self.db.pkeys;
        if p.config.is_none() || p.awaiting || from.0 == to.0 {
            return 0;
        }
        let Some(vm) = p.vf_want.get(&from) else {
            return 0;
        };
        let mut n = usize::from(p.vf_held.get(&to) != Some(vm));
        if self.cfg.part_enforce == PartEnforce::Off {
            return n; // the switch ports' tables are not written
        }
        for (hyp, joins) in [(from.0, false), (to.0, true)] {
            let Some(n_hyp) = self.db.nodes().get(hyp) else {
                continue;
            };
            let ca = (hyp, n_hyp.info.local_port_num);
            let (Some(&(s, _)), Some(pf)) = (self.ca_facing(&[ca]).first(), p.want.get(&ca)) else {
                continue;
            };
            let Some(held) = p.table(s) else { continue };
            let others = (p.vf_want.range((hyp, 0)..=(hyp, u16::MAX)))
                .filter(|(&k, _)| k != from)
                .map(|(_, t)| t.as_slice());
            let union = with_vm_keys(pf.clone(), others.chain(joins.then_some(vm.as_slice())));
            let entries = self.pkey_entries(s.0, s.1).min(held.len());
            let (mut table, fits) = peer_table(&union, entries);
            table.resize(held.len(), 0);
            n += (held.chunks(BLOCK).zip(table.chunks(BLOCK)))
                .filter(|(h, w)| h != w)
                .count();
            let bits = self.cfg.part_enforce.bits(fits);
            n += usize::from(p.enforce.get(&s).is_some_and(|&b| b != bits));
        }
        n
    }

    /// VMs were started, stopped or moved on the hypervisors `hyps`:
    /// their VFs' tables, and those of the switch ports cabled to them,
    /// are brought in line (only what differs is sent); nothing else can
    /// have changed, so nothing else is computed. Nothing without
    /// partitions, or while the ports' tables are still being read.
    pub(super) fn pkey_vms_changed(&mut self, hyps: &[usize]) {
        let Some(cfg) = self.db.pkeys.config.clone() else {
            return;
        };
        if self.db.pkeys.awaiting {
            return;
        }
        let on = |i: &usize| hyps.contains(i);
        let vms = self.vm_ends_of(hyps.iter().copied());
        let parts = Self::partition_list(&cfg);
        let vm_members = self.vm_memberships(&parts, &vms);
        self.db.pkeys.vf_want.retain(|(i, _), _| !on(i));
        self.db.pkeys.vf_overflow.retain(|(i, _)| !on(i));
        self.pkey_vf_tables(vm_members);
        let ends: Vec<(usize, u8)> = (hyps.iter())
            .filter_map(|&h| Some((h, self.db.nodes().get(h)?.info.local_port_num)))
            .collect();
        for (s, ca) in self.ca_facing(&ends) {
            let bits = self.pkey_facing(s, ca);
            self.db.pkeys.enforce.insert(s, bits);
        }
        self.pkey_enforce();
    }

    /// The reads are answered: apply what they allow.
    pub(super) fn pkey_reads_done(&mut self) -> bool {
        if !self.db.pkeys.awaiting {
            return false;
        }
        self.db.pkeys.awaiting = false;
        self.pkey_apply();
        true
    }

    /// Computes every table and sends the blocks that differ from what
    /// the ports hold, then the enforcement bits.
    fn pkey_apply(&mut self) {
        let Some(cfg) = self.db.pkeys.config.clone() else {
            return;
        };
        let (members, vm_members) = self.memberships(&cfg);
        self.db.pkeys.both = self.cfg.allow_both_pkeys;
        if !self.cfg.keep_pkey_indexes {
            // OpenSM forgets what its ports hold and where keys were.
            self.db.pkeys.places.clear();
        }
        let ends: Vec<(usize, u8)> = members.keys().copied().collect();
        let facing = self.ca_facing(&ends);
        self.db.pkeys.want.clear();
        self.db.pkeys.overflow.clear();
        self.db.pkeys.vf_want.clear();
        self.db.pkeys.vf_overflow.clear();
        self.pkey_vf_tables(vm_members);
        let mut enforce = BTreeMap::new();
        for (e, (keys, index0)) in members {
            let Some(held) = self.db.pkeys.table(e) else {
                continue; // not read: left as it is
            };
            let entries = self.pkey_entries(e.0, e.1).min(held.len());
            let both = self.cfg.allow_both_pkeys;
            let keep = self.cfg.keep_pkey_indexes;
            let places = (self.db.pkeys.places.entry(e)).or_insert_with(|| {
                if keep {
                    held_places(&held, both)
                } else {
                    BTreeMap::new()
                }
            });
            let (mut table, lost) = layout(&keys, index0, places, entries, both);
            table.resize(held.len(), 0);
            if !lost.is_empty() {
                self.db.pkeys.overflow.insert(e);
            }
            self.pkey_send_changes(e, &held, &table);
            self.db.pkeys.want.insert(e, table);
        }
        for (s, ca) in facing {
            let bits = self.pkey_facing(s, ca);
            enforce.insert(s, bits);
        }
        // Switch-to-switch links do not enforce.
        for (i, n) in self.db.nodes().iter().enumerate() {
            if !n.alive || !n.is_switch() {
                continue;
            }
            for (p, port) in n.ports.iter().enumerate().skip(1) {
                let to_switch = port
                    .peer
                    .is_some_and(|(m, _)| self.db.nodes()[m].is_switch());
                let on = port.info.is_some_and(|x| {
                    x.partition_enforcement_inbound || x.partition_enforcement_outbound
                });
                if to_switch && on {
                    enforce.insert((i, p as u8), (false, false));
                }
            }
        }
        self.db.pkeys.enforce = enforce;
        self.pkey_enforce();
    }

    /// Lays out and writes the tables of the VMs' VFs `vm_members`
    /// (where a VF does not hold its table already).
    fn pkey_vf_tables(&mut self, vm_members: BTreeMap<(usize, u16), (Vec<u16>, u16)>) {
        for ((i, vf), (keys, index0)) in vm_members {
            let guid = self.db.nodes()[i].vfs[usize::from(vf) - 1].guid;
            // A VM found running keeps the places its VF's table shows.
            let held = self.db.pkeys.vf_held.get(&(i, vf));
            let both = self.cfg.allow_both_pkeys;
            let places = (self.db.pkeys.vm_places.entry(guid))
                .or_insert_with(|| held_places(held.map_or(&[], |h| h.as_slice()), both));
            let (table, lost) = layout(&keys, index0, places, VF_PKEY_ENTRIES, both);
            if !lost.is_empty() {
                self.db.pkeys.vf_overflow.insert((i, vf));
            }
            if self.db.pkeys.vf_held.get(&(i, vf)) != Some(&table) {
                self.vf_pkey_set(i, vf, &table);
            }
            self.db.pkeys.vf_want.insert((i, vf), table);
        }
    }

    /// The table of switch port `s`, cabled to end port `ca`: the CA's
    /// keys, and its VMs' on a hypervisor, written where they differ
    /// from what the port holds (not at all with enforcement off, as
    /// OpenSM). The enforcement bits the port gets: none where it cannot
    /// enforce (a key does not fit, or its table was not read).
    fn pkey_facing(&mut self, s: (usize, u8), ca: (usize, u8)) -> (bool, bool) {
        let mode = self.cfg.part_enforce;
        if mode == PartEnforce::Off {
            self.db.pkeys.want.remove(&s);
            self.db.pkeys.overflow.remove(&s);
            return mode.bits(false);
        }
        let (Some(mut ca_table), Some(held)) =
            (self.db.pkeys.want.get(&ca).cloned(), self.db.pkeys.table(s))
        else {
            return mode.bits(false);
        };
        // A hypervisor's link carries its VMs' packets too.
        let vms = self.db.pkeys.vf_want.range((ca.0, 0)..=(ca.0, u16::MAX));
        ca_table = with_vm_keys(ca_table, vms.map(|(_, t)| t.as_slice()));
        let entries = self.pkey_entries(s.0, s.1).min(held.len());
        let (mut table, fits) = peer_table(&ca_table, entries);
        table.resize(held.len(), 0);
        if !fits {
            self.db.pkeys.overflow.insert(s);
        } else {
            self.db.pkeys.overflow.remove(&s);
        }
        self.pkey_send_changes(s, &held, &table);
        self.db.pkeys.want.insert(s, table);
        mode.bits(fits)
    }

    /// Set(P_KeyTable) of each block of `at` where `want` differs from
    /// `held`.
    fn pkey_send_changes(&mut self, at: (usize, u8), held: &[u16], want: &[u16]) {
        for (b, (h, w)) in held.chunks(BLOCK).zip(want.chunks(BLOCK)).enumerate() {
            if h != w {
                self.pkey_request(at.0, at.1, b as u16, Some(w));
            }
        }
    }

    /// Set(PortInfo) with the enforcement bits where they differ, except
    /// on ports the bring-up's activation will set (it carries them).
    fn pkey_enforce(&mut self) {
        let todo: Vec<((usize, u8), (bool, bool))> = (self.db.pkeys.enforce.iter())
            .map(|(&k, &v)| (k, v))
            .collect();
        for ((i, p), on) in todo {
            let Some(mut pi) = self.db.nodes()[i].ports[usize::from(p)].info else {
                continue;
            };
            if (
                pi.partition_enforcement_inbound,
                pi.partition_enforcement_outbound,
            ) == on
            {
                continue;
            }
            if pi.port_state == PortState::Init {
                continue; // armed with the bits by the activation
            }
            if self.db.pkeys.sent.get(&(i, p)) == Some(&on) {
                continue; // sent before, and not kept
            }
            self.db.pkeys.sent.insert((i, p), on);
            (
                pi.partition_enforcement_inbound,
                pi.partition_enforcement_outbound,
            ) = on;
            self.set_port_fields(i, p, pi);
        }
    }

    /// Set(PortInfo) of a running port that changes only the settable
    /// fields `pi` carries: state, physical state, width and speed left
    /// as they are.
    pub(super) fn set_port_fields(&mut self, i: usize, p: u8, pi: PortInfo) {
        self.set_port_fields_with(i, p, pi, link::ForcedLink::default());
    }

    /// [`Sm::set_port_fields`], with the link width and speeds `forced`
    /// gives (the others left as they are).
    pub(super) fn set_port_fields_with(
        &mut self,
        i: usize,
        p: u8,
        mut pi: PortInfo,
        forced: link::ForcedLink,
    ) {
        self.stamp_m_key(i, p, &mut pi);
        pi.port_state = PortState::NoChange;
        pi.port_physical_state = PortPhysicalState::NoChange;
        forced.apply(&mut pi);
        self.set_node(i, &pi, u32::from(p), Purpose::SetState { node: i, port: p });
    }

    /// The (inbound, outbound) enforcement bits the activation's
    /// Set(PortInfo) of `port` of node `i` carries (none when partitions
    /// are not applied).
    pub(super) fn pkey_enforcement(&self, i: usize, port: u8) -> Option<(bool, bool)> {
        self.db.pkeys.enforce.get(&(i, port)).copied()
    }
}

impl Subnet {
    /// The partition configuration applied, if any.
    pub fn partition_config(&self) -> Option<&PartitionConfig> {
        self.pkeys.config.as_ref()
    }

    /// The SL of the partition of `pkey` (its `sl=`; 0 without one, or
    /// without partitions): what a PathRecord in it carries when no QoS
    /// policy gives one, as OpenSM's.
    pub fn partition_sl(&self, pkey: PKey) -> u8 {
        if self.pkeys.sl.is_empty() {
            return 0;
        }
        self.pkeys.sl.get(&pkey.base()).copied().unwrap_or(0)
    }

    /// How many configurations have been applied: it moves when the
    /// partitions change (for the SA to bring its groups in line).
    pub fn partition_generation(&self) -> u64 {
        self.pkeys.generation
    }

    /// The P_Key table the SM gives `port` of `node` (an end port, or a
    /// switch port cabled to a CA): `None` without a partition
    /// configuration, or when the port's table could not be read.
    pub fn pkey_table(&self, node: NodeId, port: u8) -> Option<&[u16]> {
        self.pkeys.want.get(&(node.0, port)).map(Vec::as_slice)
    }

    /// The P_Key table the SM gives VF `vf` (from 1) of hypervisor
    /// `node`, the VM on it: `None` without a partition configuration, or
    /// when no VM runs there.
    pub fn vf_pkey_table(&self, node: NodeId, vf: u16) -> Option<&[u16]> {
        self.pkeys.vf_want.get(&(node.0, vf)).map(Vec::as_slice)
    }

    /// The table of the end that answers to `lid` on `port` of `node`:
    /// the VF's, when `lid` is a VF of `node` that runs a VM, else the
    /// port's ([`Subnet::pkey_table`]).
    pub fn end_pkey_table(&self, node: NodeId, port: u8, lid: Lid) -> Option<&[u16]> {
        self.vf_of_lid(node, lid)
            .and_then(|vf| self.vf_pkey_table(node, vf))
            .or_else(|| self.pkey_table(node, port))
    }

    /// VFs whose table could not hold every P_Key their VM should.
    pub fn vf_pkey_overflow(&self) -> impl Iterator<Item = (NodeId, u16)> + '_ {
        self.pkeys.vf_overflow.iter().map(|&(n, v)| (NodeId(n), v))
    }

    /// Ports whose table could not hold every P_Key they should (a
    /// switch port among them does not enforce).
    pub fn pkey_overflow(&self) -> impl Iterator<Item = (NodeId, u8)> + '_ {
        self.pkeys.overflow.iter().map(|&(n, p)| (NodeId(n), p))
    }

    /// The P_Key two end ports share, as the first's table holds it, one
    /// of the two a full member (IBA 10.9.3), chosen as OpenSM's SA
    /// chooses it (of several, the lowest by its low byte; with
    /// `allow_both_pkeys`, OpenSM's walks); `only` restricts it to one partition
    /// (low 15 bits). Without partitions every port holds the default
    /// P_Key, full. `None`: they share none, and cannot talk.
    pub fn shared_pkey(&self, a: (NodeId, u8), b: (NodeId, u8), only: Option<u16>) -> Option<PKey> {
        self.shared_pkey_at((a.0, a.1, Lid(0)), (b.0, b.1, Lid(0)), only)
    }

    /// [`Subnet::shared_pkey`] between two ends named with their LIDs too,
    /// so that a VM's end uses its VF's table ([`Subnet::end_pkey_table`]).
    pub fn shared_pkey_at(
        &self,
        a: (NodeId, u8, Lid),
        b: (NodeId, u8, Lid),
        only: Option<u16>,
    ) -> Option<PKey> {
        const DEFAULT: [u16; 1] = [0xFFFF];
        if self.pkeys.want.is_empty() && self.pkeys.vf_want.is_empty() {
            // No tables given: every end holds the default P_Key alone,
            // full (the answer below, without looking each end up).
            let k = PKey(DEFAULT[0]);
            return only.is_none_or(|o| o == k.base()).then_some(k);
        }
        let table = |e: (NodeId, u8, Lid)| -> &[u16] {
            match self.end_pkey_table(e.0, e.1, e.2) {
                Some(t) => t,
                None => &DEFAULT,
            }
        };
        common_pkey(table(a), table(b), only, self.pkeys.both)
    }
}

/// Which P_Key two tables share, as OpenSM's SA picks it for a
/// PathRecord (`osm_physp_find_common_pkey`): OpenSM keeps a port's keys
/// in a map ordered by the key as it sits in memory (low byte first),
/// and takes the first whose partition the other port holds, one of the
/// two a full member; the answer is `a`'s key.
///
/// Without `both` (OpenSM's `allow_both_pkeys`) the map holds one key a
/// partition (the full one where a table holds both), so the answer is
/// the shared partition lowest in that order. With `both` the map holds
/// every key, and OpenSM walks the two maps side by side, then full keys
/// of `a` against limited keys of `b`, then limited against full; this
/// does the same walks. `only` keeps one partition (low 15 bits).
pub(super) fn common_pkey(a: &[u16], b: &[u16], only: Option<u16>, both: bool) -> Option<PKey> {
    let keep = |k: u16| k & 0x7FFF != 0 && only.is_none_or(|o| o == k & 0x7FFF);
    if !both {
        // A table's key of partition `base`: the full one if it holds it.
        let held = |t: &[u16], base: u16| {
            (t.iter().copied())
                .filter(|&k| k & 0x7FFF == base)
                .max_by_key(|&k| k & 0x8000)
        };
        return (a.iter().copied())
            .filter(|&k| keep(k))
            .filter_map(|k| {
                let (x, y) = (held(a, k & 0x7FFF)?, held(b, k & 0x7FFF)?);
                PKey(x).matches(PKey(y)).then_some(x)
            })
            .min_by_key(|&k| (k & 0x7FFF).swap_bytes())
            .map(PKey);
    }
    let sorted = |t: &[u16]| {
        let mut v: Vec<u16> = t.iter().copied().filter(|&k| keep(k)).collect();
        v.sort_by_key(|k| k.swap_bytes());
        v.dedup();
        v
    };
    let (x, y) = (sorted(a), sorted(b));
    let full = |k: u16| k & 0x8000 != 0;
    // `pick` keeps which keys each walk looks at; `order` what it advances by.
    let walk =
        |pick_a: &dyn Fn(u16) -> bool, pick_b: &dyn Fn(u16) -> bool, order: fn(u16) -> u16| {
            let (mut i, mut j) = (0, 0);
            while i < x.len() && j < y.len() {
                if !pick_a(x[i]) {
                    i += 1;
                    continue;
                }
                if !pick_b(y[j]) {
                    j += 1;
                    continue;
                }
                if PKey(x[i]).matches(PKey(y[j])) {
                    return Some(PKey(x[i]));
                }
                let (p, q) = (order(x[i]), order(y[j]));
                match q.cmp(&p) {
                    core::cmp::Ordering::Equal => (i, j) = (i + 1, j + 1),
                    core::cmp::Ordering::Less => j += 1,
                    core::cmp::Ordering::Greater => i += 1,
                }
            }
            None
        };
    let any = |_: u16| true;
    walk(&any, &any, |k| k.swap_bytes())
        .or_else(|| walk(&full, &|k| !full(k), |k| (k & 0x7FFF).swap_bytes()))
        .or_else(|| walk(&|k| !full(k), &full, |k| (k & 0x7FFF).swap_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_sits_at_index_0_and_new_keys_follow_the_highest_place() {
        let mut places = BTreeMap::from([(0x7FFF, 0)]);
        let (t, lost) = layout(&[0xFFFF, 0x8001, 0x0002], 0x7FFF, &mut places, 8, false);
        assert_eq!(t[..4], [0xFFFF, 0x8001, 0x0002, 0]);
        assert!(lost.is_empty());
        // 0x0001 leaves: its place is remembered, so 0x0003 goes after 2.
        let (t, _) = layout(&[0xFFFF, 0x0002, 0x8003], 0x7FFF, &mut places, 8, false);
        assert_eq!(t[..4], [0xFFFF, 0, 0x0002, 0x8003]);
        // A key keeps its index when its membership changes.
        let (t, _) = layout(&[0x7FFF, 0x8002, 0x8003], 0x7FFF, &mut places, 8, false);
        assert_eq!(t[..4], [0x7FFF, 0, 0x8002, 0x8003]);
    }

    #[test]
    fn past_the_end_a_new_key_takes_the_first_free_entry_or_is_lost() {
        let mut places = BTreeMap::from([(0x7FFF, 0), (1, 1), (2, 2), (3, 3)]);
        let (t, lost) = layout(
            &[0xFFFF, 0x8001, 0x8003, 0x8009],
            0x7FFF,
            &mut places,
            4,
            false,
        );
        assert_eq!(t, [0xFFFF, 0x8001, 0x8009, 0x8003]);
        assert!(lost.is_empty());
        assert_eq!(places.get(&2), None);
        let (_, lost) = layout(
            &[0xFFFF, 0x8001, 0x8003, 0x8009, 0x8005],
            0x7FFF,
            &mut places,
            4,
            false,
        );
        assert_eq!(lost, [0x8005]);
    }

    #[test]
    fn an_index0_partition_moves_the_default_away_from_index_0() {
        let mut places = BTreeMap::from([(0x7FFF, 0)]);
        let (t, _) = layout(&[0x7FFF, 0x8005], 5, &mut places, 4, false);
        assert_eq!(t, [0x8005, 0x7FFF, 0, 0]);
    }

    #[test]
    fn with_allow_both_pkeys_a_both_member_holds_the_two_keys() {
        // OpenSM's order: a partition's limited key, then its full one.
        assert_eq!(
            member_keys(0x0042, Membership::Both, true),
            (vec![0x0042, 0x8042], 0x0042)
        );
        assert_eq!(
            member_keys(0x0042, Membership::Both, false),
            (vec![0x8042], 0x0042)
        );
        // The full default key at index 0; the two keys of 0x0042 apart.
        let mut places = held_places(&[0xFFFF, 0, 0, 0], true);
        let (t, lost) = layout(&[0x0042, 0x8042, 0xFFFF], 0xFFFF, &mut places, 4, true);
        assert_eq!(t, [0xFFFF, 0x0042, 0x8042, 0]);
        assert!(lost.is_empty());
        // A key keeps its place: the limited one leaves, the full stays.
        let (t, _) = layout(&[0x8042, 0xFFFF], 0xFFFF, &mut places, 4, true);
        assert_eq!(t, [0xFFFF, 0, 0x8042, 0]);
        // Without, a port's key of a partition keeps its place whatever
        // its membership.
        let mut places = held_places(&[0xFFFF, 0, 0x0042, 0], false);
        let (t, _) = layout(&[0x8042, 0xFFFF], 0x7FFF, &mut places, 4, false);
        assert_eq!(t, [0xFFFF, 0, 0x8042, 0]);
    }

    #[test]
    fn with_allow_both_pkeys_a_limited_default_member_leaves_index_0_empty() {
        // Index 0 is the full default key's; a port that holds 0xFFFF
        // there and is now only a limited member moves 0x7FFF up.
        let mut places = held_places(&[0xFFFF, 0, 0, 0], true);
        let (t, _) = layout(&[0x7FFF], 0xFFFF, &mut places, 4, true);
        assert_eq!(t, [0, 0x7FFF, 0, 0]);
        // ... but 0x7FFF found at index 0 stays there.
        let mut places = held_places(&[0x7FFF, 0, 0, 0], true);
        let (t, _) = layout(&[0x7FFF], 0xFFFF, &mut places, 4, true);
        assert_eq!(t, [0x7FFF, 0, 0, 0]);
        // An indx0 partition's key takes index 0 whatever was there.
        let mut places = held_places(&[0xFFFF, 0, 0, 0], true);
        let (t, _) = layout(&[0x0005, 0x8005, 0xFFFF], 0x0005, &mut places, 4, true);
        assert_eq!(t, [0x0005, 0x8005, 0xFFFF, 0]);
    }

    #[test]
    fn the_shared_pkey_is_the_one_opensm_picks() {
        // OpenSM's order is by the key's low byte first: 0x8300 before
        // 0x0042 before 0x7FFF, whatever order the tables keep.
        let a = [0xFFFF, 0x8300, 0x8042, 0];
        assert_eq!(common_pkey(&a, &a, None, false), Some(PKey(0x8300)));
        let b = [0x8005, 0x8042, 0xFFFF];
        assert_eq!(common_pkey(&a, &b, None, false), Some(PKey(0x8042)));
        // The answer is the first table's key, limited here.
        let c = [0xFFFF, 0x0042];
        assert_eq!(common_pkey(&c, &a, None, false), Some(PKey(0x0042)));
        // Two limited members share nothing; `only` keeps one partition.
        assert_eq!(common_pkey(&[0x0042], &[0x0042], None, false), None);
        assert_eq!(common_pkey(&a, &b, Some(0x7FFF), false), Some(PKey(0xFFFF)));
        assert_eq!(common_pkey(&a, &b, Some(0x0005), false), None);
        // A table holding both keys of a partition: the full one stands.
        assert_eq!(
            common_pkey(&[0x0042, 0x8042], &[0x0042], None, false),
            Some(PKey(0x8042))
        );
        // With allow_both_pkeys, side by side: 0x0042 meets 0x8042 first.
        let d = [0xFFFF, 0x8300, 0x0042, 0x8042, 0x7FFF];
        assert_eq!(common_pkey(&d, &b, None, true), Some(PKey(0x0042)));
        assert_eq!(common_pkey(&d, &d, None, true), Some(PKey(0x8300)));
        // Only the walk of full against limited finds 0x8042 - 0x0042.
        assert_eq!(
            common_pkey(&[0x8042, 0x7FFF], &[0x0042, 0x7FFF], None, true),
            Some(PKey(0x8042))
        );
        assert_eq!(
            common_pkey(&[0x0042, 0x7FFF], &[0x8042, 0x7FFF], None, true),
            Some(PKey(0x0042))
        );
        assert_eq!(
            common_pkey(&[0x0042, 0x7FFF], &[0x0042, 0x7FFF], None, true),
            None
        );
    }

    #[test]
    fn a_switch_port_gets_the_ca_keys_packed_without_limited_duplicates() {
        let (t, fits) = peer_table(&[0xFFFF, 0, 0x0003, 0x8003, 0x0004], 4);
        assert_eq!(t, [0xFFFF, 0x8003, 0x0004, 0]);
        assert!(fits);
        let (_, fits) = peer_table(&[0xFFFF, 0x8001, 0x8002], 2);
        assert!(!fits);
    }
}
