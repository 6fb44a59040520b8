//! GUIDInfoRecord Set and Delete (IBA 15.2.5.18): a host asks the SA for
//! alias GUIDs on its port, as an SR-IOV HCA's driver does for its VMs in
//! the shared-port model. The SA decides what the block holds and hands
//! it to the SM ([`crate::Sa::take_guid_changes`] into
//! [`smi::sm::Sm::set_guid_block`]), which indexes the aliases (PathRecords
//! and joins resolve them) and writes the block to the port.
//!
//! As OpenSM's SA (`osm_sa_guidinfo_record.c`): LID and BlockNum must be
//! in the mask ("insufficient components"); a LID no end port has, or a
//! block past the port's GUIDCap, is "no records"; entry 0 of block 0, the
//! port's own GUID, cannot be set or deleted ("invalid request"). Each
//! entry the mask selects is set to the GUID given; a zero asks the SA to
//! choose one: the alias already there, else the one the SA made for that
//! port and index before, else a new one (the OpenIB OUI, a site byte
//! and a count, as OpenSM makes them). A GUID in use elsewhere (another
//! port's, or this port's at another index) is left out. The answer is
//! the block as it now stands. A Delete clears the entries the mask
//! selects, unless an alias is a multicast member's PortGID ("denied").
//!
//! Stricter than OpenSM, which lets any requester sharing a partition
//! with the port change its table: here only the port itself (the
//! request's SLID is its LID) or a trusted requester (the SA key) may;
//! others are "denied".

use crate::path::end_by_lid;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use mad_core::sa::{GuidInfoRecord, SaStatus};
use mad_core::{Guid, Lid};
use smi::sm::{NodeId, Subnet, GUIDS_PER_BLOCK};

/// The OUI of SM-made alias GUIDs (OpenIB's, as OpenSM's).
pub const ASSIGNED_OUI: u64 = 0x00_1405;

/// SM-made GUIDs remembered, by port and index, at most, unless
/// [`crate::SaConfig::max_assigned_guids`] says otherwise: past this a
/// request for one is "no resources".
pub const MAX_ASSIGNED: usize = 65_536;

/// Blocks decided and not yet taken by the SM, at most: past this a Set
/// or Delete is "no resources" (a driver takes them after each request).
pub const MAX_PENDING: usize = 4096;

/// ComponentMask bits of GUIDInfoRecord: LID, BlockNum, then GUID0..7
/// from bit 4.
const LID: u64 = 1 << 0;
const BLOCK: u64 = 1 << 1;
const GUID0_BIT: u32 = 4;

/// A block of a port's GUID table for the SM to hold and write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuidChange {
    /// The node whose end port it is.
    pub node: NodeId,
    /// The block.
    pub block: u8,
    /// Its eight GUIDs (entry 0 of block 0 the port GUID).
    pub guids: [u64; GUIDS_PER_BLOCK],
}

/// The SA's side of alias GUIDs: what it made, and the blocks it decided
/// that the SM has not taken yet.
#[derive(Clone, Debug, Default)]
pub struct AliasGuids {
    /// (port GUID, index) → the GUID the SA made for it, kept so that a
    /// port that asks again (after a reboot) gets the same one.
    assigned: BTreeMap<(u64, u16), u64>,
    /// The count of the last GUID made.
    made: u32,
    /// The site byte of made GUIDs (OpenSM's `sm_assigned_guid`).
    site: u8,
    /// GUIDs made and remembered, at most.
    max_assigned: usize,
    /// Blocks decided, in order, until taken.
    pending: Vec<GuidChange>,
}

impl AliasGuids {
    /// With `site` as the site byte of the GUIDs the SA makes, and at
    /// most `max_assigned` of them remembered.
    pub fn new(site: u8, max_assigned: usize) -> AliasGuids {
        AliasGuids {
            site,
            max_assigned,
            ..AliasGuids::default()
        }
    }

    /// The blocks decided since the last call, for the SM.
    pub fn take_changes(&mut self) -> Vec<GuidChange> {
        core::mem::take(&mut self.pending)
    }

    /// GUIDs the SA has made and remembers.
    pub fn assigned(&self) -> usize {
        self.assigned.len()
    }

    /// Block `block` of `n` as it will stand once the SM has taken what
    /// is pending.
    fn current(&self, s: &Subnet, n: NodeId, block: u8) -> Option<[u64; GUIDS_PER_BLOCK]> {
        let last = (self.pending.iter().rev()).find(|c| c.node == n && c.block == block);
        match last {
            Some(c) => Some(c.guids),
            None => s.guid_block(n, block),
        }
    }

    /// Whether `g` is in use other than at index `at` of `n`'s table.
    fn taken(&self, s: &Subnet, g: u64, n: NodeId, at: usize) -> bool {
        if s.by_port_guid(Guid(g)).is_some() {
            return true;
        }
        // The latest pending block of each (node, block).
        let mut seen: Vec<(NodeId, u8)> = Vec::new();
        for c in self.pending.iter().rev() {
            if seen.contains(&(c.node, c.block)) {
                continue;
            }
            seen.push((c.node, c.block));
            for (k, &x) in c.guids.iter().enumerate() {
                let i = usize::from(c.block) * GUIDS_PER_BLOCK + k;
                if x == g && (c.node, i) != (n, at) {
                    return true;
                }
            }
        }
        match s.by_alias_guid(Guid(g)) {
            Some((o, i)) if (o, i) != (n, at) => {
                // Unless a pending block moves it off that index.
                let b = (i / GUIDS_PER_BLOCK) as u8;
                !seen.contains(&(o, b))
            }
            _ => false,
        }
    }

    /// A GUID for index `at` of port `port_guid`: the one made for it
    /// before, else a new one not in use.
    fn make(&mut self, s: &Subnet, port_guid: u64, n: NodeId, at: usize) -> Option<u64> {
        if let Some(&g) = self.assigned.get(&(port_guid, at as u16)) {
            return (!self.taken(s, g, n, at)).then_some(g);
        }
        if self.assigned.len() >= self.max_assigned {
            return None;
        }
        for _ in 0..1000 {
            self.made = self.made.checked_add(1)?;
            let g = u64::from(self.made) | u64::from(self.site) << 32 | ASSIGNED_OUI << 40;
            if !self.taken(s, g, n, at) {
                self.assigned.insert((port_guid, at as u16), g);
                return Some(g);
            }
        }
        None
    }

    /// The end port a Set or Delete names, checked: the mask, the LID,
    /// the requester, the block. The node, its port GUID, the block and
    /// the request.
    fn target(
        s: &Subnet,
        from: Lid,
        data: &[u8],
        mask: u64,
        trusted: bool,
    ) -> Result<(NodeId, u64, GuidInfoRecord), SaStatus> {
        if mask & (LID | BLOCK) != LID | BLOCK {
            return Err(SaStatus::ReqInsufficientComponents);
        }
        let rec = GuidInfoRecord::decode(data).map_err(|_| SaStatus::ReqInvalid)?;
        let n = (s.by_lid(rec.lid))
            .map(|(n, _)| n)
            .filter(|&n| s.brief(n).is_some_and(|b| b.lid == rec.lid))
            .ok_or(SaStatus::NoRecords)?;
        let me = end_by_lid(s, from).map(|e| e.node);
        if me != Some(n) && !trusted {
            return Err(SaStatus::ReqDenied);
        }
        if s.guid_block(n, rec.block_num).is_none() {
            return Err(SaStatus::NoRecords);
        }
        // Entry 0 of block 0, the port GUID, is read-only.
        if rec.block_num == 0 && mask & (1 << GUID0_BIT) != 0 {
            return Err(SaStatus::ReqInvalid);
        }
        let port_guid = s.node(n).map_or(0, |x| x.info.port_guid.0);
        Ok((n, port_guid, rec))
    }

    /// SubnAdmSet(GUIDInfoRecord) from LID `from`: the block as it now
    /// stands.
    pub fn set(
        &mut self,
        s: &Subnet,
        from: Lid,
        data: &[u8],
        mask: u64,
        trusted: bool,
    ) -> Result<GuidInfoRecord, SaStatus> {
        let (n, port_guid, rec) = Self::target(s, from, data, mask, trusted)?;
        let block = rec.block_num;
        let cap = usize::from(s.guid_cap(n));
        let base = usize::from(block) * GUIDS_PER_BLOCK;
        let mut now = self.current(s, n, block).ok_or(SaStatus::NoRecords)?;
        let mut out_of_guids = false;
        for (k, (slot, asked)) in now.iter_mut().zip(rec.guid_info.guids).enumerate() {
            let at = base + k;
            if at >= cap || at == 0 || mask & (1 << (GUID0_BIT + k as u32)) == 0 {
                continue;
            }
            let g = if asked.0 != 0 {
                asked.0
            } else if *slot != 0 {
                continue;
            } else {
                match self.make(s, port_guid, n, at) {
                    Some(g) => g,
                    None => {
                        out_of_guids = true;
                        continue;
                    }
                }
            };
            if g == *slot || self.taken(s, g, n, at) {
                continue;
            }
            *slot = g;
        }
        if out_of_guids && self.current(s, n, block) == Some(now) {
            return Err(SaStatus::NoResources);
        }
        self.answer(s, n, rec, now)
    }

    /// SubnAdmDelete(GUIDInfoRecord) from LID `from`; `in_group` tells
    /// whether a GUID is a multicast member's PortGID. The block as it
    /// now stands.
    pub fn delete(
        &mut self,
        s: &Subnet,
        from: Lid,
        data: &[u8],
        mask: u64,
        trusted: bool,
        in_group: &dyn Fn(u64) -> bool,
    ) -> Result<GuidInfoRecord, SaStatus> {
        let (n, _, rec) = Self::target(s, from, data, mask, trusted)?;
        let block = rec.block_num;
        let mut now = self.current(s, n, block).ok_or(SaStatus::NoRecords)?;
        let picked = |k: usize| mask & (1 << (GUID0_BIT + k as u32)) != 0;
        if (0..GUIDS_PER_BLOCK).any(|k| picked(k) && now[k] != 0 && in_group(now[k])) {
            return Err(SaStatus::ReqDenied);
        }
        for (k, slot) in now.iter_mut().enumerate() {
            if picked(k) && !(block == 0 && k == 0) {
                *slot = 0;
            }
        }
        self.answer(s, n, rec, now)
    }

    /// Queues `now` as the block `rec` names and answers with it.
    fn answer(
        &mut self,
        s: &Subnet,
        n: NodeId,
        mut rec: GuidInfoRecord,
        now: [u64; GUIDS_PER_BLOCK],
    ) -> Result<GuidInfoRecord, SaStatus> {
        self.commit(s, n, rec.block_num, now)?;
        rec.guid_info.guids = now.map(Guid);
        Ok(rec)
    }

    /// Queues `guids` as block `block` of `n` when it differs from what
    /// stands ("no resources" past [`MAX_PENDING`]).
    fn commit(
        &mut self,
        s: &Subnet,
        n: NodeId,
        block: u8,
        guids: [u64; GUIDS_PER_BLOCK],
    ) -> Result<(), SaStatus> {
        if self.current(s, n, block) == Some(guids) {
            return Ok(());
        }
        if self.pending.len() >= MAX_PENDING {
            return Err(SaStatus::NoResources);
        }
        self.pending.push(GuidChange {
            node: n,
            block,
            guids,
        });
        Ok(())
    }

    /// Brings a block back from a saved SA database, by the port's own
    /// GUID (its LID may have changed): every alias in it that is free, as
    /// a trusted Set of those entries would. The entries restored, or why
    /// none could be.
    pub fn restore(
        &mut self,
        s: &Subnet,
        base_guid: u64,
        block: u8,
        guids: &[u64; GUIDS_PER_BLOCK],
    ) -> Result<usize, &'static str> {
        let n = match s.by_port_guid(Guid(base_guid)) {
            Some((n, 0)) => n,
            _ => return Err("its port is not in the subnet"),
        };
        let mut now = (self.current(s, n, block)).ok_or("the block is past the port's GUIDCap")?;
        let cap = usize::from(s.guid_cap(n));
        let base = usize::from(block) * GUIDS_PER_BLOCK;
        let mut restored = 0;
        for (k, &g) in guids.iter().enumerate() {
            let at = base + k;
            if at == 0 || at >= cap || g == 0 || now[k] == g || self.taken(s, g, n, at) {
                continue;
            }
            now[k] = g;
            restored += 1;
        }
        self.commit(s, n, block, now)
            .map_err(|_| "too many blocks waiting for the SM")?;
        Ok(restored)
    }

    /// The GUIDInfo lines of an SA database: every block of each port
    /// that holds an alias, as it will stand, in port GUID order (as
    /// OpenSM writes them).
    pub fn export(&self, s: &Subnet) -> Vec<crate::db::DbGuidInfo> {
        let mut nodes: Vec<NodeId> = s.alias_nodes().collect();
        nodes.extend(self.pending.iter().map(|c| c.node));
        nodes.sort();
        nodes.dedup();
        let mut out = Vec::new();
        for n in nodes {
            let Some(node) = s.node(n) else { continue };
            let blocks = usize::from(s.guid_cap(n)).div_ceil(GUIDS_PER_BLOCK);
            let rows: Vec<crate::db::DbGuidInfo> = (0..blocks)
                .filter_map(|b| {
                    let guids = self.current(s, n, b as u8)?;
                    Some(crate::db::DbGuidInfo {
                        base_guid: node.info.port_guid.0,
                        lid: node.lid,
                        block: b as u8,
                        guids,
                    })
                })
                .collect();
            let alias = |r: &crate::db::DbGuidInfo| {
                (r.guids.iter().enumerate()).any(|(k, &g)| g != 0 && !(r.block == 0 && k == 0))
            };
            if rows.iter().any(alias) {
                out.extend(rows);
            }
        }
        out.sort_by_key(|r| (r.base_guid, r.block));
        out
    }
}

/// GUIDInfoRecords of every end port, each block up to its GUIDCap (as
/// OpenSM lists them), with the aliases the SM holds; a VM's vGUID at its
/// VF's LID, block 0.
pub fn guid_info_records(s: &Subnet, f: &mut dyn FnMut(GuidInfoRecord)) {
    for e in crate::path::every_end(s) {
        let own = s.brief(e.node).is_some_and(|b| b.holds_lid(e.lid));
        let blocks = if own {
            usize::from(s.guid_cap(e.node)).div_ceil(GUIDS_PER_BLOCK)
        } else {
            1
        };
        for b in 0..blocks.max(1) {
            let mut guids = [Guid(0); GUIDS_PER_BLOCK];
            match own.then(|| s.guid_block(e.node, b as u8)).flatten() {
                Some(t) => {
                    for (slot, g) in guids.iter_mut().zip(t) {
                        *slot = Guid(g);
                    }
                }
                None if b == 0 => guids[0] = e.gid.guid(),
                None => {}
            }
            f(GuidInfoRecord {
                lid: e.lid,
                block_num: b as u8,
                guid_info: mad_core::attr::GuidInfo { guids },
            });
        }
    }
}
