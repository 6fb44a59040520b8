//! Multicast forwarding: for each group (an MLID and its member end
//! ports, which the SA's MCMemberRecord joins decide), a spanning tree over
//! the switch graph and the MulticastForwardingTable entries that make it:
//! at each switch of the tree, the tree's links and the member ports that
//! hang off it. A switch forwards a multicast packet out of every port of
//! its entry but the one it came in by, so a packet a member sends reaches
//! every other member once, over the tree, and no other port.
//!
//! Only what changed is sent: an MFT block is 32 MLIDs by 16 ports (IBA
//! 14.2.5.8: the modifier's position selects the 16 ports), and a change
//! of one group on one switch is one Set of the one block and position
//! that hold it. A group of one member, or of none, needs no tree: its
//! entries are cleared where they were set.
//!
//! A send-only member (JoinState SendOnlyNonMember or SendOnlyFullMember
//! alone) sends into the group and receives nothing from it (IBA
//! 15.2.5.17): its switch forwards what it sends up the tree, but no entry
//! points at its port, and a branch holding only send-only members gets
//! no copies at all. A switch that advertises IsMulticastFDBTopSupported
//! gets SwitchInfo.MulticastFDBTop at the end of the highest MFT block it
//! uses (0xBFFF: none), so that it ignores every entry above.

use super::*;

/// The first multicast LID.
pub const MLID_BASE: u16 = 0xC000;
/// The last multicast LID (0xFFFF is the permissive LID).
pub const MLID_LAST: u16 = 0xFFFE;

/// A switch's ports in an MFT entry, 16 per position (bit `i` of
/// position `p` is port `16 p + i`; port 0 is the switch itself).
pub type PortMask = [u16; 16];

/// Why a group could not be programmed. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McastError {
    /// Not a multicast LID (0xC000..=0xFFFE).
    NotMulticast(Lid),
    /// A member is not an end port the SM knows: a CA's port, or a
    /// switch's port 0.
    NotAnEndPort(NodeId, u8),
    /// A switch of the tree has no MFT entry for this MLID (its
    /// MulticastFDBCap is smaller).
    PastMftCap {
        /// The switch.
        switch: NodeId,
        /// Its MulticastFDBCap.
        cap: u16,
    },
}

impl core::fmt::Display for McastError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            McastError::NotMulticast(l) => write!(f, "LID {:#06x} is not a multicast LID", l.0),
            McastError::NotAnEndPort(n, p) => write!(f, "node {} port {p} is not an end port", n.0),
            McastError::PastMftCap { switch, cap } => write!(
                f,
                "switch {} has {cap} MFT entries, too few for this MLID",
                switch.0
            ),
        }
    }
}

/// One member end port of a multicast group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupMember {
    /// The node: a CA, or a switch (port 0).
    pub node: NodeId,
    /// Its port (0 for a switch).
    pub port: u8,
    /// Sends into the group and receives nothing from it (JoinState
    /// SendOnlyNonMember or SendOnlyFullMember alone).
    pub send_only: bool,
}

impl From<(NodeId, u8)> for GroupMember {
    /// A member that sends and receives.
    fn from((node, port): (NodeId, u8)) -> Self {
        GroupMember {
            node,
            port,
            send_only: false,
        }
    }
}

/// A group's member end ports (node, port), each with whether it
/// receives (false: send-only).
pub(super) type Members = BTreeMap<(usize, u8), bool>;

/// The value of MulticastFDBTop that marks no MFT entry in use.
pub const MFT_TOP_NONE: u16 = MLID_BASE - 1;

/// The groups and what the SM has written to the switches for them.
#[derive(Clone, Debug, Default)]
pub(super) struct Multicast {
    /// Each group's member end ports (node, port), by MLID, each with
    /// whether it receives (false: send-only).
    pub(super) groups: BTreeMap<u16, Members>,
    /// The entries written, by switch node and MLID (absent: empty).
    pub(super) installed: BTreeMap<usize, BTreeMap<u16, PortMask>>,
}

/// What the distribution will program for the groups: each group's
/// tree, and each switch's MulticastFDBTop (switches that support it).
#[derive(Debug, Default)]
pub(super) struct McastPlan {
    trees: Vec<(u16, BTreeMap<usize, PortMask>)>,
    /// MulticastFDBTop by switch node.
    pub(super) tops: BTreeMap<usize, u16>,
}

/// The MulticastFDBTop that covers MLID `mlid`: the last MLID of its MFT
/// block, as OpenSM sets it, so that joins within a block of 32 MLIDs do
/// not move it.
fn top_of(mlid: u16) -> u16 {
    MLID_BASE + ((mlid - MLID_BASE) / 32 + 1) * 32 - 1
}

/// The MulticastFDBTop for a switch holding `table` (MLID → entry).
fn mft_top(table: Option<&BTreeMap<u16, PortMask>>) -> u16 {
    table
        .and_then(|t| t.keys().next_back())
        .map_or(MFT_TOP_NONE, |&m| top_of(m))
}

fn set_port(m: &mut PortMask, port: u8) {
    m[usize::from(port / 16)] |= 1 << (port % 16);
}

impl Sm {
    /// Makes `members` (end ports: a CA's port, or a switch's port 0;
    /// a `(NodeId, u8)` is a member that receives) the group of `mlid`,
    /// replacing what it had, and sends the MFT blocks that change, and
    /// the MulticastFDBTop of a switch whose top block moves (on a running
    /// subnet; before, the bring-up's distribution sends them). An empty
    /// list deletes the group. A port listed twice receives if either
    /// entry does. Returns the SMPs queued.
    pub fn set_multicast_group<M: Copy + Into<GroupMember>>(
        &mut self,
        mlid: Lid,
        members: &[M],
    ) -> Result<usize, McastError> {
        if !(MLID_BASE..=MLID_LAST).contains(&mlid.0) {
            return Err(McastError::NotMulticast(mlid));
        }
        let mut set = BTreeMap::new();
        for &m in members {
            let GroupMember {
                node: n,
                port: p,
                send_only,
            } = m.into();
            let node = self
                .db
                .nodes()
                .get(n.0)
                .ok_or(McastError::NotAnEndPort(n, p))?;
            let end = if node.is_switch() {
                p == 0
            } else {
                p >= 1 && usize::from(p) < node.ports.len()
            };
            if !end {
                return Err(McastError::NotAnEndPort(n, p));
            }
            *set.entry((n.0, p)).or_insert(false) |= !send_only;
        }
        if self.cfg.disable_multicast {
            // Kept for the SA; no switch is written (OpenSM's
            // disable_multicast).
            if set.is_empty() {
                self.db.mcast.groups.remove(&mlid.0);
            } else {
                self.db.mcast.groups.insert(mlid.0, set);
            }
            return Ok(0);
        }
        let want = self.mcast_tree(&set);
        let index = usize::from(mlid.0 - MLID_BASE);
        for &sw in want.keys() {
            let cap = self.db.nodes()[sw]
                .switch_info
                .map_or(0, |si| si.multicast_fdb_cap);
            if index >= usize::from(cap) {
                return Err(McastError::PastMftCap {
                    switch: NodeId(sw),
                    cap,
                });
            }
        }
        if set.is_empty() {
            self.db.mcast.groups.remove(&mlid.0);
        } else {
            self.db.mcast.groups.insert(mlid.0, set);
        }
        if !self.up || !matches!(self.phase, Phase::Done | Phase::Reconfiguration) {
            // The bring-up's distribution programs every group.
            return Ok(0);
        }
        let start = self.out.queue.len();
        let mut touched: BTreeSet<usize> = want.keys().copied().collect();
        touched.extend(
            (self.db.mcast.installed.iter())
                .filter(|(_, t)| t.contains_key(&mlid.0))
                .map(|(&s, _)| s),
        );
        // The top first, as OpenSM orders it: no entry is written above
        // the top the switch holds when it is used.
        let mut after = self.db.mcast.installed.clone();
        for &sw in &touched {
            let t = after.entry(sw).or_default();
            match want.get(&sw) {
                Some(m) => t.insert(mlid.0, *m),
                None => t.remove(&mlid.0),
            };
        }
        for sw in touched {
            let top = mft_top(after.get(&sw));
            self.set_mft_top(sw, top);
        }
        self.mcast_apply(mlid.0, want);
        let n = self.out.queue.len() - start;
        if n > 0 && self.phase == Phase::Done {
            self.phase = Phase::Reconfiguration;
        }
        Ok(n)
    }

    /// The groups: MLID and member end ports.
    pub fn multicast_groups(&self) -> impl Iterator<Item = (Lid, Vec<GroupMember>)> + '_ {
        self.db.mcast.groups.iter().map(|(&l, m)| {
            let members = (m.iter())
                .map(|(&(n, p), &receives)| GroupMember {
                    node: NodeId(n),
                    port: p,
                    send_only: !receives,
                })
                .collect();
            (Lid(l), members)
        })
    }

    /// Whether switch `node` advertises IsMulticastFDBTopSupported (on its
    /// port 0): without it, MulticastFDBTop means nothing to the switch.
    /// Never under `use_mfttop` false: the SM leaves the field alone.
    pub(super) fn mft_top_supported(&self, node: usize) -> bool {
        self.cfg.use_mfttop
            && self.db.nodes().get(node).is_some_and(|n| {
                n.ports.first().and_then(|p| p.info).is_some_and(|pi| {
                    pi.capability_mask
                        .contains(CapabilityMask::IS_MULTICAST_FDB_TOP_SUPPORTED)
                })
            })
    }

    /// Sends Set(SwitchInfo) with MulticastFDBTop `top` to switch `sw` if
    /// it supports the field and holds another value.
    fn set_mft_top(&mut self, sw: usize, top: u16) {
        if !self.mft_top_supported(sw) {
            return;
        }
        let Some(mut si) = self.db.nodes()[sw].switch_info else {
            return;
        };
        if si.multicast_fdb_top == top {
            return;
        }
        si.multicast_fdb_top = top;
        si.port_state_change = false;
        if let Some(mut n) = self.db.node_mut(sw) {
            n.switch_info = Some(si);
        }
        self.set_node(sw, &si, 0, Purpose::SetTopOnly);
    }

    /// Every group again, after routing (bring-up or a sweep): trees over
    /// the switch graph as it is now, and the blocks that differ from what
    /// each switch holds. A switch that is new or came back holds nothing.
    ///
    /// Returns each switch's MulticastFDBTop for the entries it will
    /// hold, for the caller to send ahead of the MFT blocks (on the
    /// Set(SwitchInfo) it sends anyway where it sends one).
    pub(super) fn mcast_plan(&mut self) -> McastPlan {
        let fresh: Vec<usize> = (self.db.mcast.installed.keys().copied())
            .filter(|&i| self.db.nodes().get(i).is_none_or(|n| n.fresh || !n.alive))
            .collect();
        for i in fresh {
            self.db.mcast.installed.remove(&i);
        }
        if self.cfg.disable_multicast {
            return McastPlan {
                trees: Vec::new(),
                tops: BTreeMap::new(),
            };
        }
        let groups: Vec<(u16, Members)> = (self.db.mcast.groups.iter())
            .map(|(&l, m)| (l, m.clone()))
            .collect();
        let mut trees = Vec::new();
        let mut highest: BTreeMap<usize, u16> = BTreeMap::new();
        for (mlid, members) in groups {
            let want = self.mcast_tree(&members);
            for &sw in want.keys() {
                let h = highest.entry(sw).or_insert(mlid);
                *h = (*h).max(mlid);
            }
            trees.push((mlid, want));
        }
        let tops = (self.db.switch_index.iter())
            .filter(|&&i| self.mft_top_supported(i))
            .map(|&i| (i, highest.get(&i).map_or(MFT_TOP_NONE, |&m| top_of(m))))
            .collect();
        McastPlan { trees, tops }
    }

    /// Sends what [`Sm::mcast_plan`] planned: the MulticastFDBTop of each
    /// switch still holding another (the caller put the rest on its own
    /// Set(SwitchInfo)), then the MFT blocks that differ.
    pub(super) fn mcast_send(&mut self, plan: McastPlan) {
        for (&sw, &top) in &plan.tops {
            self.set_mft_top(sw, top);
        }
        for (mlid, want) in plan.trees {
            self.mcast_apply(mlid, want);
        }
    }

    /// Writes `want` (switch node → port mask) as `mlid`'s entries: the
    /// entries that differ from what is installed, as one Set per block
    /// and position that holds a change.
    fn mcast_apply(&mut self, mlid: u16, want: BTreeMap<usize, PortMask>) {
        let index = usize::from(mlid - MLID_BASE);
        let (block, slot) = ((index / 32) as u16, index % 32);
        let mut switches: BTreeSet<usize> = want.keys().copied().collect();
        switches.extend(
            (self.db.mcast.installed.iter())
                .filter(|(_, t)| t.contains_key(&mlid))
                .map(|(&s, _)| s),
        );
        for sw in switches {
            let new = want.get(&sw).copied().unwrap_or([0; 16]);
            let table = self.db.mcast.installed.entry(sw).or_default();
            let old = table.get(&mlid).copied().unwrap_or([0; 16]);
            if new == [0; 16] {
                table.remove(&mlid);
            } else {
                table.insert(mlid, new);
            }
            let ports = self.db.nodes()[sw].ports.len();
            for pos in 0..16usize {
                if old[pos] == new[pos] || pos * 16 >= ports.max(1) {
                    continue;
                }
                // The whole block at this position, as installed now.
                let mut t = MulticastForwardingTable::default();
                let first = MLID_BASE + block * 32;
                let table = &self.db.mcast.installed[&sw];
                for (i, e) in t.port_mask.iter_mut().enumerate() {
                    *e = table.get(&(first + i as u16)).map_or(0, |m| m[pos]);
                }
                debug_assert_eq!(t.port_mask[slot], new[pos]);
                let am = (pos as u32) << 28 | u32::from(block);
                self.set_node(sw, &t, am, Purpose::SetMft);
            }
        }
    }

    /// The MFT entries of the tree that joins `members`: switch node →
    /// port mask. Members not on the subnet (not alive, not linked) are
    /// left out; fewer than two left need no tree.
    fn mcast_tree(&self, members: &Members) -> BTreeMap<usize, PortMask> {
        let g = &self.db.graph;
        let k_of = |node: usize| {
            self.db
                .switch_of
                .get(node)
                .copied()
                .filter(|&k| k != usize::MAX)
        };
        // Each member as (switch index, port at that switch), with
        // whether it receives.
        let mut at: BTreeMap<(usize, u8), bool> = BTreeMap::new();
        for (&(n, p), &receives) in members {
            let Some(node) = self.db.nodes().get(n).filter(|x| x.alive) else {
                continue;
            };
            let hang = if node.is_switch() {
                k_of(n).map(|k| (k, 0))
            } else {
                (node.ports.get(usize::from(p)).and_then(|x| x.peer))
                    .and_then(|(m, q)| k_of(m).map(|k| (k, q)))
            };
            if let Some(h) = hang {
                *at.entry(h).or_insert(false) |= receives;
            }
        }
        let mut out = BTreeMap::new();
        // A tree carries something only from one member to another that
        // receives.
        if at.len() < 2 || !at.values().any(|&r| r) {
            return out;
        }
        let at: Vec<(usize, u8, bool)> = at.into_iter().map(|((k, p), r)| (k, p, r)).collect();
        // A centre: the middle of the longest member-to-member path found
        // by two breadth-first searches.
        let bfs = |root: usize| -> Vec<Option<(usize, u8, u8)>> {
            // parent[k] = (parent switch, port at k towards it, port at the
            // parent towards k); the root is its own parent.
            let mut parent = vec![None; g.ports.len()];
            parent[root] = Some((root, 0, 0));
            let mut q = VecDeque::from([root]);
            while let Some(k) = q.pop_front() {
                for (p, t) in g.ports[k].iter().enumerate() {
                    if let PortTo::Switch(m, mq) = *t {
                        if parent[m].is_none() {
                            parent[m] = Some((k, mq, p as u8));
                            q.push_back(m);
                        }
                    }
                }
            }
            parent
        };
        let depth = |parent: &[Option<(usize, u8, u8)>], mut k: usize| {
            let mut d = 0usize;
            while let Some((up, _, _)) = parent[k] {
                if up == k {
                    return Some(d);
                }
                k = up;
                d += 1;
            }
            None
        };
        let farthest = |parent: &[Option<(usize, u8, u8)>]| {
            at.iter()
                .filter_map(|&(k, _, _)| depth(parent, k).map(|d| (d, k)))
                .max()
                .map(|(_, k)| k)
        };
        let p0 = bfs(at[0].0);
        let a = farthest(&p0).unwrap_or(at[0].0);
        let pa = bfs(a);
        let b = farthest(&pa).unwrap_or(a);
        let mut path = vec![b];
        let mut k = b;
        while let Some((up, _, _)) = pa[k] {
            if up == k {
                break;
            }
            path.push(up);
            k = up;
        }
        let root = path[path.len() / 2];
        let parent = bfs(root);
        let mut masks: BTreeMap<usize, PortMask> = BTreeMap::new();
        let has = |masks: &BTreeMap<usize, PortMask>, k: usize, p: u8| {
            masks
                .get(&k)
                .is_some_and(|m| m[usize::from(p / 16)] & (1 << (p % 16)) != 0)
        };
        // Receivers first: their port, and the tree's links from their
        // switch up to the root, both ways.
        for &(k, port, _) in at.iter().filter(|m| m.2) {
            if parent[k].is_none() {
                continue; // cut off from the root: unreachable
            }
            set_port(masks.entry(k).or_default(), port);
            let mut c = k;
            while let Some((up, cp, upp)) = parent[c] {
                if up == c {
                    break;
                }
                let done = has(&masks, up, upp);
                set_port(masks.entry(c).or_default(), cp);
                set_port(masks.entry(up).or_default(), upp);
                if done {
                    break;
                }
                c = up;
            }
        }
        // Send-only members: no entry points at them; their switch and
        // those above it send up towards the root (a switch forwards out
        // of its entry's ports whichever port the packet came in by).
        for &(k, _, _) in at.iter().filter(|m| !m.2) {
            if parent[k].is_none() {
                continue;
            }
            let mut c = k;
            while let Some((up, cp, _)) = parent[c] {
                if up == c || has(&masks, c, cp) {
                    break;
                }
                set_port(masks.entry(c).or_default(), cp);
                c = up;
            }
        }
        for (k, m) in masks {
            if let Some(&node) = self.db.switch_index.get(k) {
                out.insert(node, m);
            }
        }
        out
    }
}
