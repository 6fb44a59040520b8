//! Data-path walks and traces through the installed forwarding tables.

use super::*;

impl Fabric {
    /// Forwards a data packet from the CA `src` towards `dlid` through the
    /// installed LFTs.
    pub fn walk(&self, src: usize, dlid: Lid) -> Walk {
        match self.topo.peer_of(src, 1) {
            Some(first) => self.forward(first, dlid, |_, _| {}),
            None => Walk::Dropped(src),
        }
    }

    /// The forwarding core of every walk: a data packet for `dlid` that has
    /// reached `start` (node, arrival port) follows the installed LFTs; a
    /// CA takes it only at a port that holds `dlid`. `hop` is called at each
    /// node it passes with (node, egress port): a switch's LFT entry (0:
    /// the switch itself; 0xFF: unrouted), 0 at the CA where it ends. A
    /// walk through more switches than the fabric has is a loop.
    pub(super) fn forward(
        &self,
        start: (usize, u8),
        dlid: Lid,
        mut hop: impl FnMut(usize, u8),
    ) -> Walk {
        let (mut node, mut arrival) = start;
        let limit = self.nodes.len() as u32;
        let mut switches = 0u32;
        loop {
            let SimNode::Switch(s) = &self.nodes[node] else {
                hop(node, 0);
                return if self.nodes[node].owns_at(arrival, dlid) {
                    Walk::Delivered(switches)
                } else {
                    Walk::Dropped(node)
                };
            };
            switches += 1;
            if switches > limit {
                return Walk::Loop;
            }
            let p = s.model.lft_port(dlid);
            hop(node, p);
            if p == 0 {
                return if s.model.owns_lid(0, dlid) {
                    Walk::Delivered(switches)
                } else {
                    Walk::Dropped(node)
                };
            }
            match self.topo.peer_of(node, p) {
                Some(next) if p != DROP_PORT => (node, arrival) = next,
                _ => return Walk::Dropped(node),
            }
        }
    }
}

/// Why a packet sent with a P_Key did not arrive
/// ([`Fabric::walk_in_partition`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionDrop {
    /// The sender's port holds no P_Key of that partition: it cannot
    /// send in it.
    NotHeld,
    /// A switch port that enforces partitions discarded it: no entry of
    /// its table is of the packet's partition.
    Enforced {
        /// The switch.
        node: usize,
        /// Its port.
        port: u8,
        /// On the way in (false: on the way out).
        inbound: bool,
    },
    /// It reached the destination, whose port holds no matching P_Key.
    Refused(usize),
    /// The LFTs did not bring it there (as [`Fabric::walk`] says).
    Route(Walk),
}

/// Whether an end port's `table` holds a P_Key that matches `key` (IBA
/// 10.9.3: same partition, one of the two a full member).
fn holds(table: &[PKey], key: PKey) -> bool {
    table.iter().any(|&t| t.matches(key))
}

/// Whether an enforcing switch port's `table` lets `key` pass: the
/// partition number only. A switch port holds its CA's keys as the CA
/// holds them (OpenSM copies a limited key as limited), so a limited
/// member's own packets must pass it; whether two members may talk is the
/// destination's check.
fn passes(table: &[PKey], key: PKey) -> bool {
    table
        .iter()
        .any(|&t| t.is_valid() && t.base() == key.base())
}

impl Fabric {
    /// Sends a data packet from CA `src` to `dlid` in partition `base`
    /// (the P_Key's low 15 bits) through the installed LFTs, as the
    /// hardware checks P_Keys (IBA 10.9): the sender's port puts its own
    /// table's entry of the partition in the packet (full or limited);
    /// each switch port on the way that enforces partitions, inbound or
    /// outbound, drops it unless its table holds a key of the partition;
    /// the destination's port accepts it only with a matching key (so two
    /// limited members cannot talk). The switches passed, or why it was
    /// dropped.
    pub fn walk_in_partition(
        &self,
        src: usize,
        dlid: Lid,
        base: u16,
    ) -> Result<u32, PartitionDrop> {
        self.walk_in_partition_from(src, self.nodes[src].lid(), dlid, base)
    }

    /// [`Fabric::walk_in_partition`] from the end of `src` that holds
    /// `slid`: a VM's VF on a hypervisor sends with its own table, a
    /// multi-port CA's port by its own cable with its own table, and a
    /// packet for a VF's LID is accepted by that VF's table.
    pub fn walk_in_partition_from(
        &self,
        src: usize,
        slid: Lid,
        dlid: Lid,
        base: u16,
    ) -> Result<u32, PartitionDrop> {
        let own = self.nodes[src]
            .end_pkeys(slid)
            .ok_or(PartitionDrop::NotHeld)?;
        let key = *(own.iter())
            .filter(|k| k.is_valid() && k.base() == base & 0x7FFF)
            .max_by_key(|k| k.is_full_member())
            .ok_or(PartitionDrop::NotHeld)?;
        let out = self.nodes[src].port_of_lid(slid).max(1);
        let Some((mut node, mut ingress)) = self.topo.peer_of(src, out) else {
            return Err(PartitionDrop::Route(Walk::Dropped(src)));
        };
        let limit = self.nodes.len() as u32;
        let mut switches = 0u32;
        let check = |node: usize, port: u8, inbound: bool| -> Result<(), PartitionDrop> {
            match self.nodes[node].pkeys(port) {
                Some((t, i, o)) if (if inbound { i } else { o }) && !passes(t, key) => {
                    Err(PartitionDrop::Enforced {
                        node,
                        port,
                        inbound,
                    })
                }
                _ => Ok(()),
            }
        };
        loop {
            let SimNode::Switch(s) = &self.nodes[node] else {
                if !self.nodes[node].owns_at(ingress, dlid) {
                    return Err(PartitionDrop::Route(Walk::Dropped(node)));
                }
                let t = self.nodes[node]
                    .end_pkeys(dlid)
                    .ok_or(PartitionDrop::Refused(node))?;
                return if holds(t, key) {
                    Ok(switches)
                } else {
                    Err(PartitionDrop::Refused(node))
                };
            };
            switches += 1;
            if switches > limit {
                return Err(PartitionDrop::Route(Walk::Loop));
            }
            check(node, ingress, true)?;
            let p = s.model.lft_port(dlid);
            if p == 0 {
                if !s.model.owns_lid(0, dlid) {
                    return Err(PartitionDrop::Route(Walk::Dropped(node)));
                }
                // The switch's own port 0 receives it as an end port.
                let (t, _, _) = self.nodes[node]
                    .pkeys(0)
                    .ok_or(PartitionDrop::Refused(node))?;
                return if holds(t, key) {
                    Ok(switches)
                } else {
                    Err(PartitionDrop::Refused(node))
                };
            }
            let Some((m, q)) = self.topo.peer_of(node, p).filter(|_| p != DROP_PORT) else {
                return Err(PartitionDrop::Route(Walk::Dropped(node)));
            };
            check(node, p, false)?;
            (node, ingress) = (m, q);
        }
    }
}

impl Fabric {
    /// Node `n`, a hypervisor or a CA of one or two ports other than the
    /// SM's, made one with `vfs` VFs a port (0: a plain CA), freshly
    /// powered, as when SR-IOV is set up again while it is off: call it
    /// between its [`FabricEvent::NodeDown`] and `NodeUp`. Any other node
    /// is refused, and nothing changes.
    pub fn set_vfs(&mut self, n: usize, vfs: usize) -> Result<(), String> {
        let t = self.topo.nodes.get(n).ok_or(format!("no node {n}"))?;
        let ca = !matches!(self.nodes[n], SimNode::Switch(_))
            && usize::from(t.ports) <= smi::sma::hypervisor::MAX_HYPERVISOR_PORTS;
        if !ca || n == self.sm_node {
            return Err(format!(
                "node {n} is not a CA of one or two ports other than the SM's"
            ));
        }
        self.nodes[n] = SimNode::make(&self.topo, n, vfs, false);
        Ok(())
    }

    /// Switch `n` loses its forwarding tables and SwitchInfo's tops, as
    /// at power-up (LinearFDBTop 0, MulticastFDBTop 0xBFFF, every LFT and
    /// MFT entry empty), while it keeps its LID, its links and their
    /// states, and traps nothing: a switch whose forwarding engine was
    /// reset under a running subnet. Any other node is refused.
    pub fn reset_tables(&mut self, n: usize) -> Result<(), String> {
        let Some(SimNode::Switch(s)) = self.nodes.get_mut(n) else {
            return Err(format!("node {n} is not a switch"));
        };
        let m = &mut s.model;
        m.lft.iter_mut().for_each(|e| *e = DROP_PORT);
        m.mft.iter_mut().for_each(|e| *e = Default::default());
        m.switch_info.linear_fdb_top = 0;
        m.switch_info.multicast_fdb_top = 0xBFFF;
        Ok(())
    }

    /// The node with this node GUID (to map an SM's node to the fabric's).
    pub fn node_by_guid(&self, guid: u64) -> Option<usize> {
        self.topo.nodes.iter().position(|n| n.guid == guid)
    }

    /// The LFT entries installed on every switch for LIDs 0..=`max_lid`
    /// (rows in node order, switches only).
    pub fn lft_snapshot(&self, max_lid: u16) -> Vec<(usize, Vec<u8>)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match n {
                SimNode::Switch(s) => Some((i, s)),
                _ => None,
            })
            .map(|(i, s)| {
                // What lft_port answers for each LID, a slice at a time:
                // the entries up to LinearFDBTop, then unrouted.
                let m = &s.model;
                let want = usize::from(max_lid) + 1;
                let have = m
                    .lft
                    .len()
                    .min(usize::from(m.switch_info.linear_fdb_top) + 1)
                    .min(want);
                let mut row = Vec::with_capacity(want);
                row.extend_from_slice(&m.lft[..have]);
                row.resize(want, DROP_PORT);
                (i, row)
            })
            .collect()
    }
}

impl Fabric {
    /// Forwards a data packet from node `src` (a CA) to `dlid` through the
    /// installed LFTs and returns the path — (node, egress port) at each
    /// hop, the CA's own port first — and how it ended.
    pub fn trace(&self, src: usize, dlid: Lid) -> (Vec<(usize, u8)>, Walk) {
        let mut path = vec![(src, 1)];
        let walk = match self.topo.peer_of(src, 1) {
            Some(first) => self.forward(first, dlid, |n, p| path.push((n, p))),
            None => Walk::Dropped(src),
        };
        (path, walk)
    }
}

impl Fabric {
    /// The node a packet from node `src` (a CA out of its port 1, a
    /// switch from itself) to `dlid` reaches through the installed LFTs,
    /// if it reaches the node that holds the LID.
    pub fn deliver_to(&self, src: usize, dlid: Lid) -> Option<usize> {
        self.route_gs(src, dlid, |_| {})
    }

    /// [`Fabric::deliver_to`], telling `on` what befalls the packet on its
    /// way: each port it leaves by (a CA's port 1 first; never a switch's
    /// port 0 or an unrouted entry), and where a switch drops it.
    pub(super) fn route_gs(
        &self,
        src: usize,
        dlid: Lid,
        mut on: impl FnMut(GsHop),
    ) -> Option<usize> {
        if self.nodes.get(src)?.owns(dlid) {
            return Some(src);
        }
        let start = match &self.nodes[src] {
            SimNode::Switch(_) => (src, 0),
            _ => {
                let first = self.topo.peer_of(src, 1)?;
                on(GsHop::Egress(src, 1));
                first
            }
        };
        // Where the packet is (node, the port it came in by), and the
        // LFT's port at the last node it met.
        let (mut at, mut last) = (start, (src, 0u8));
        let walk = self.forward(start, dlid, |n, p| {
            last = (n, p);
            if p != 0 && p != DROP_PORT {
                on(GsHop::Egress(n, p));
                if let Some(next) = self.topo.peer_of(n, p) {
                    at = next;
                }
            }
        });
        let switch = |n: usize| match &self.nodes[n] {
            SimNode::Switch(s) => Some(s),
            _ => None,
        };
        match walk {
            Walk::Delivered(_) => return Some(last.0),
            // No usable LFT entry: a relay error where it came in.
            Walk::Dropped(n) if n == at.0 && (last == (n, DROP_PORT) || last == (n, 0)) => {
                if switch(n).is_some() {
                    on(GsHop::NoRoute(n, at.1));
                }
            }
            Walk::Loop => {
                if let Some(s) = switch(at.0) {
                    on(GsHop::Expired(at.0, s.model.lft_port(dlid)));
                }
            }
            Walk::Dropped(_) => {}
        }
        None
    }
}

/// What befalls a GS packet at one node of its way ([`Fabric::route_gs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GsHop {
    /// It leaves (node, port).
    Egress(usize, u8),
    /// The switch has no route for it; it came in by the port.
    NoRoute(usize, u8),
    /// It has gone round a loop; it would have left by the port.
    Expired(usize, u8),
}

impl Fabric {
    /// Forwards a packet that starts at switch `s` towards `dlid`.
    pub fn walk_from_switch(&self, s: usize, dlid: Lid) -> Walk {
        self.forward((s, 0), dlid, |_, _| {})
    }
}

/// Why a `FROM:TO` trace could not be walked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// Not `FROM:TO`.
    #[error("--trace {0:?}: expected FROM:TO")]
    Syntax(String),
    /// No node of that name.
    #[error("--trace: no node {0:?}")]
    NoNode(String),
    /// Neither a node nor a LID.
    #[error("--trace: no node or LID {0:?}")]
    NoTarget(String),
}

impl Fabric {
    /// Walks a data packet `FROM:TO` (node names; `TO` may be a LID)
    /// through the installed tables and describes the path in one line:
    /// each node with the port it left by, and how the walk ended.
    pub fn trace_named(&self, spec: &str) -> Result<String, TraceError> {
        let (from, to) = spec
            .split_once(':')
            .ok_or_else(|| TraceError::Syntax(spec.to_string()))?;
        let find = |name: &str| self.topo.nodes.iter().position(|n| n.name == name);
        let src = find(from).ok_or_else(|| TraceError::NoNode(from.to_string()))?;
        let dlid = match (find(to), to.parse::<u16>()) {
            (Some(i), _) => self.nodes[i].lid(),
            (None, Ok(l)) => Lid(l),
            _ => return Err(TraceError::NoTarget(to.to_string())),
        };
        let (path, walk) = self.trace(src, dlid);
        let hops: Vec<String> = path
            .iter()
            .map(|&(n, p)| match p {
                0 => self.topo.nodes[n].name.clone(),
                p => format!("{}[{p}]", self.topo.nodes[n].name),
            })
            .collect();
        Ok(format!(
            "{from} → LID {}: {} — {walk:?}",
            dlid.0,
            hops.join(" → ")
        ))
    }
}

/// Where a multicast packet went ([`Fabric::multicast_walk`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McastWalk {
    /// Copies delivered, by end port: (a CA, the port it arrived by), or
    /// (a switch, 0) for the switch itself (its port 0 in the entry).
    pub delivered: std::collections::BTreeMap<(usize, u8), u32>,
    /// Switch hops taken in all.
    pub hops: u64,
    /// The packet was still copying itself past any tree's size: a loop.
    pub looped: bool,
}

impl McastWalk {
    /// The nodes a copy reached, whatever the port.
    pub fn nodes(&self) -> std::collections::BTreeSet<usize> {
        self.delivered.keys().map(|&(n, _)| n).collect()
    }

    /// True when a copy reached node `n`, by any port.
    pub fn reaches(&self, n: usize) -> bool {
        self.nodes().contains(&n)
    }
}

impl Fabric {
    /// [`Fabric::multicast_walk_from`] a CA's port 1, or a switch itself.
    pub fn multicast_walk(&self, src: usize, mlid: Lid) -> McastWalk {
        self.multicast_walk_from(src, 1, mlid)
    }

    /// Floods a packet for multicast LID `mlid` from node `src` (a CA out
    /// of its port `port`, or a switch from itself) through the installed MFTs:
    /// every switch copies it out of each port of its entry but the one
    /// it came in by (IBA 18.2.4.3.2); port 0 delivers to the switch. A
    /// switch drops an MLID above its MulticastFDBTop. What it reached,
    /// and how often.
    pub fn multicast_walk_from(&self, src: usize, port: u8, mlid: Lid) -> McastWalk {
        let mut w = McastWalk::default();
        if mlid.0 < 0xC000 {
            return w;
        }
        let mut queue = std::collections::VecDeque::new();
        match &self.nodes[src] {
            SimNode::Switch(_) => queue.push_back((src, 0u8)),
            _ => {
                if let Some((sw, q)) = self.topo.peer_of(src, port) {
                    queue.push_back((sw, q));
                }
            }
        }
        // A tree crosses each cable once each way at most.
        let limit = 2 * self
            .topo
            .nodes
            .iter()
            .map(|n| u64::from(n.ports))
            .sum::<u64>()
            + 16;
        while let Some((node, ingress)) = queue.pop_front() {
            let SimNode::Switch(s) = &self.nodes[node] else {
                *w.delivered.entry((node, ingress)).or_default() += 1;
                continue;
            };
            w.hops += 1;
            if w.hops > limit {
                w.looped = true;
                break;
            }
            let Some(entry) = s.model.mft_entry(mlid) else {
                continue;
            };
            for (pos, &bits) in entry.iter().enumerate() {
                for b in 0..16u8 {
                    let port = pos as u8 * 16 + b;
                    if bits & (1 << b) == 0 || port == ingress {
                        continue;
                    }
                    if port == 0 {
                        *w.delivered.entry((node, 0)).or_default() += 1;
                    } else if let Some((m, q)) = self.topo.peer_of(node, port) {
                        queue.push_back((m, q));
                    }
                }
            }
        }
        w
    }
}
