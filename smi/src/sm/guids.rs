//! Alias GUIDs: the entries past the first of an end port's GUIDInfo
//! table (IBA 14.2.5.5), each a further GID the port answers to. Hosts ask
//! for them through the SA's GUIDInfoRecord Set and Delete (IBA 15.2.5.18;
//! the SR-IOV "shared port" model gives each VM an alias GUID of its
//! HCA's port); the SA decides what each block holds and hands it to
//! [`Sm::set_guid_block`], which keeps the tables, indexes every alias by
//! its GUID so that PathRecords and joins resolve it, and writes the
//! block to the port with one Set(GUIDInfo).
//!
//! A port that is lost loses its aliases, as OpenSM drops them with the
//! port: the host asks again when it comes back (the SA keeps what it
//! made for each index, so it gets the same GUIDs).

use super::*;
use mad_core::attr::modifier::{Block, Modifier};
use mad_core::attr::GuidInfo;
use mad_core::Guid;

/// GUIDs in one GUIDInfo block.
pub const GUIDS_PER_BLOCK: usize = 8;

/// The alias tables the SM keeps and writes.
#[derive(Clone, Debug, Default)]
pub(super) struct Aliases {
    /// Node → its end port's GUID table, GUIDCap entries, entry 0 the
    /// port GUID. Only ports given an alias have one.
    tables: BTreeMap<usize, Vec<u64>>,
    /// Alias GUID → node and index.
    owner: BTreeMap<u64, (usize, usize)>,
    /// What each port answered its last Set(GUIDInfo) with, by node and
    /// block (absent: not written, or refused).
    held: BTreeMap<(usize, u8), [u64; GUIDS_PER_BLOCK]>,
}

/// Why [`Sm::set_guid_block`] refused a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuidError {
    /// Not a live node with an end port the SM has read.
    NotAnEndPort(NodeId),
    /// The block is past the port's GUIDCap.
    PastGuidCap {
        /// The block asked.
        block: u8,
        /// The port's GUIDCap.
        cap: u8,
    },
    /// Entry 0 of block 0 is the port's own GUID and cannot change.
    ReadOnly,
    /// The GUID is another port's, or this port's at another index.
    Taken(Guid),
}

impl core::fmt::Display for GuidError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GuidError::NotAnEndPort(n) => write!(f, "node {} has no end port read", n.0),
            GuidError::PastGuidCap { block, cap } => {
                write!(f, "block {block} is past the port's GUIDCap of {cap}")
            }
            GuidError::ReadOnly => f.write_str("entry 0 is the port GUID and cannot change"),
            GuidError::Taken(g) => write!(f, "GUID {:#018x} is already in use", g.0),
        }
    }
}

impl core::error::Error for GuidError {}

impl Subnet {
    /// GUIDCap of node `n`'s end port (a switch's port 0, a CA's port
    /// reached), as last read; 0 when unknown.
    pub fn guid_cap(&self, n: NodeId) -> u8 {
        let Some(node) = self.node(n) else { return 0 };
        let own = node.end_port();
        (node.ports.get(usize::from(own)))
            .and_then(|p| p.info)
            .map_or(0, |pi| pi.guid_cap)
    }

    /// Block `block` of node `n`'s end port's GUID table as the SM gives
    /// it: the aliases it wrote, or the port GUID alone in entry 0 of
    /// block 0. `None` past the port's GUIDCap.
    pub fn guid_block(&self, n: NodeId, block: u8) -> Option<[u64; GUIDS_PER_BLOCK]> {
        let cap = usize::from(self.guid_cap(n));
        let base = usize::from(block) * GUIDS_PER_BLOCK;
        if base >= cap {
            return None;
        }
        let mut out = [0u64; GUIDS_PER_BLOCK];
        match self.aliases.tables.get(&n.0) {
            Some(t) => {
                for (k, slot) in out.iter_mut().enumerate() {
                    *slot = t.get(base + k).copied().unwrap_or(0);
                }
            }
            None if block == 0 => out[0] = self.node(n)?.info.port_guid.0,
            None => {}
        }
        // Entries past GUIDCap do not exist.
        for (k, slot) in out.iter_mut().enumerate() {
            if base + k >= cap {
                *slot = 0;
            }
        }
        Some(out)
    }

    /// The live node one of whose alias GUIDs is `guid`, with its index.
    pub fn by_alias_guid(&self, guid: Guid) -> Option<(NodeId, usize)> {
        let &(n, i) = self.aliases.owner.get(&guid.0)?;
        self.nodes().get(n)?.alive.then_some((NodeId(n), i))
    }

    /// The live node and VF whose port GUID, VM vGUID or alias GUID is
    /// `guid`: what a GID's GUID names (an alias names the port, VF 0).
    pub fn by_gid_guid(&self, guid: Guid) -> Option<(NodeId, u16)> {
        (self.by_port_guid(guid)).or_else(|| self.by_alias_guid(guid).map(|(n, _)| (n, 0)))
    }

    /// Block `block` of node `n`'s GUID table as the port answered the
    /// SM's last Set(GUIDInfo) of it; `None` when none was answered (not
    /// written, refused, or the port was lost since).
    pub fn guid_block_held(&self, n: NodeId, block: u8) -> Option<[u64; GUIDS_PER_BLOCK]> {
        self.aliases.held.get(&(n.0, block)).copied()
    }

    /// The live nodes whose end ports hold an alias GUID.
    pub fn alias_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        (self.aliases.tables.keys())
            .filter(|&&n| self.nodes().get(n).is_some_and(|x| x.alive))
            .map(|&n| NodeId(n))
    }

    /// Alias GUIDs held, in all.
    pub fn alias_count(&self) -> usize {
        self.aliases.owner.len()
    }

    /// Whether block `block` of node `n` may hold `guids`: an end port,
    /// within GUIDCap, entry 0 of block 0 the port GUID, and no GUID
    /// another port's (its port GUID, a VM's vGUID, an alias) or this
    /// port's at another index. Entries past GUIDCap are ignored.
    pub fn check_guid_block(
        &self,
        n: NodeId,
        block: u8,
        guids: &[u64; GUIDS_PER_BLOCK],
    ) -> Result<(), GuidError> {
        let node = (self.node(n))
            .filter(|x| x.alive)
            .ok_or(GuidError::NotAnEndPort(n))?;
        let cap = self.guid_cap(n);
        let base = usize::from(block) * GUIDS_PER_BLOCK;
        if cap == 0 {
            return Err(GuidError::NotAnEndPort(n));
        }
        if base >= usize::from(cap) {
            return Err(GuidError::PastGuidCap { block, cap });
        }
        for (k, &g) in guids.iter().enumerate() {
            let at = base + k;
            if at >= usize::from(cap) {
                break;
            }
            if at == 0 {
                if g != node.info.port_guid.0 {
                    return Err(GuidError::ReadOnly);
                }
                continue;
            }
            if g == 0 {
                continue;
            }
            if self.port_guid_known(g) {
                return Err(GuidError::Taken(Guid(g)));
            }
            if let Some(&(o, i)) = self.aliases.owner.get(&g) {
                if (o, i) != (n.0, at) {
                    return Err(GuidError::Taken(Guid(g)));
                }
            }
        }
        Ok(())
    }

    /// Forgets node `i`'s aliases (it was lost).
    pub(super) fn forget_aliases(&mut self, i: usize) {
        self.aliases.held.retain(|&(n, _), _| n != i);
        if let Some(t) = self.aliases.tables.remove(&i) {
            for g in t.into_iter().skip(1) {
                if g != 0 && self.aliases.owner.get(&g).is_some_and(|&(o, _)| o == i) {
                    self.aliases.owner.remove(&g);
                }
            }
        }
    }
}

impl Sm {
    /// A Set(GUIDInfo) answered: what the port holds now (`None`: it
    /// refused the Set).
    pub(super) fn on_guid_info(&mut self, smp: Option<&Smp>, node: usize, block: u8) {
        let held = &mut self.db.aliases.held;
        match smp.map(|s| GuidInfo::decode(&s.data)) {
            Some(Ok(g)) => {
                held.insert((node, block), g.guids.map(|x| x.0));
            }
            _ => {
                held.remove(&(node, block));
            }
        }
    }

    /// Gives block `block` of node `n`'s end port's GUID table the GUIDs
    /// `guids` (0: no alias at that index) and writes it to the port with
    /// one Set(GUIDInfo) when it changed. Checked as
    /// [`Subnet::check_guid_block`] says; the SMPs queued (0 or 1).
    pub fn set_guid_block(
        &mut self,
        n: NodeId,
        block: u8,
        guids: [u64; GUIDS_PER_BLOCK],
    ) -> Result<usize, GuidError> {
        self.db.check_guid_block(n, block, &guids)?;
        let cap = usize::from(self.db.guid_cap(n));
        let port_guid = self.db.nodes()[n.0].info.port_guid.0;
        let base = usize::from(block) * GUIDS_PER_BLOCK;
        let a = &mut self.db.aliases;
        let t = a.tables.entry(n.0).or_insert_with(|| {
            let mut t = vec![0u64; cap];
            t[0] = port_guid;
            t
        });
        if t.len() < cap {
            t.resize(cap, 0);
        }
        let mut changed = false;
        for (k, &g) in guids.iter().enumerate() {
            let at = base + k;
            if at >= cap || at == 0 || t[at] == g {
                continue;
            }
            if t[at] != 0 && a.owner.get(&t[at]) == Some(&(n.0, at)) {
                a.owner.remove(&t[at]);
            }
            if g != 0 {
                a.owner.insert(g, (n.0, at));
            }
            t[at] = g;
            changed = true;
        }
        if t.iter().skip(1).all(|&g| g == 0) {
            a.tables.remove(&n.0);
        }
        if !changed {
            return Ok(0);
        }
        let mut gi = GuidInfo::default();
        for (slot, &g) in gi.guids.iter_mut().zip(guids.iter()) {
            *slot = Guid(g);
        }
        for (k, slot) in gi.guids.iter_mut().enumerate() {
            if base + k >= cap {
                *slot = Guid(0);
            }
        }
        let am = Block::<31>(u16::from(block)).encode();
        self.set_node(n.0, &gi, am, Purpose::GuidInfo { node: n.0, block });
        Ok(1)
    }
}
