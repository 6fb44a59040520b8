//! What the SM knows of the subnet: its nodes and their ports, as read
//! from the agents, with the links between them and the LIDs given.

use super::*;
use mad_core::attr::forwarding::DROP_PORT;
use mad_core::Guid;

/// A node of the subnet: its index in [`Subnet::nodes`] (the SM's own is
/// 0). Nodes are never removed, so an id stays valid; a lost node is kept
/// with `alive` false and comes back under the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub usize);

/// A switch of the routing graph: its index in [`Subnet::switch_nodes`]
/// (and in the graph and the computed tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SwitchId(pub usize);

/// The SM's database of the subnet: nodes and their ports as read from
/// the agents, the links between them, the LIDs given, the routing graph
/// and the tables computed and installed. Managers change it; the SA and
/// drivers read it through its methods.
#[derive(Clone, Debug, Default)]
pub struct Subnet {
    /// Every node found, the SM's first.
    pub(super) nodes: Vec<SmNode>,
    /// Node GUID → node index.
    pub(super) by_guid: BTreeMap<u64, usize>,
    /// Port GUID → node index and VF (0: the node's own port; a VM's
    /// vGUID names its VF). Written only through [`Subnet::add_node`] and
    /// [`Subnet::set_vf`].
    pub(super) by_port_guid: BTreeMap<u64, (usize, u16)>,
    /// LID → node index + 1 (0: nobody), for the node's own LID and its
    /// VFs'; the last one given a LID if two ever hold it. Written only
    /// through [`Subnet::set_lid`], [`Subnet::set_vf`] and
    /// [`Subnet::set_vf_count`].
    pub(super) lid_owner: Vec<u32>,
    /// Computed LFTs, by switch of the graph.
    pub(super) lfts: Vec<Vec<u8>>,
    /// Graph switch → node index.
    pub(super) switch_index: Vec<usize>,
    /// Node index → graph switch (routing graph order).
    pub(super) switch_of: Vec<usize>,
    /// Tables installed before a change, by node, until the change is in.
    pub(super) old_lfts: BTreeMap<usize, Vec<u8>>,
    /// The highest LID given.
    pub(super) max_lid: u16,
    /// The switch graph routes are computed on.
    pub(super) graph: Graph,
}

impl Subnet {
    /// Every node found, the SM's own first.
    pub fn nodes(&self) -> &[SmNode] {
        &self.nodes
    }

    /// One node.
    #[inline]
    pub fn node(&self, id: NodeId) -> Option<&SmNode> {
        self.nodes.get(id.0)
    }

    /// The node with this node GUID.
    pub fn by_guid(&self, guid: Guid) -> Option<NodeId> {
        self.by_guid.get(&guid.0).map(|&i| NodeId(i))
    }

    /// The live node whose port (or one of whose VMs' vGUIDs) is
    /// `guid`, with the VF (0: the node's own port).
    #[inline]
    pub fn by_port_guid(&self, guid: Guid) -> Option<(NodeId, u16)> {
        let &(i, vf) = self.by_port_guid.get(&guid.0)?;
        self.nodes[i].alive.then_some((NodeId(i), vf))
    }

    /// The live node and port that hold `lid`: a switch's port 0, a CA's
    /// port; a vSwitch VF's LID belongs to its hypervisor's port (the
    /// returned port is the hypervisor's, and the VF is
    /// [`Subnet::vf_of_lid`]). One lookup in the LID index.
    #[inline]
    pub fn by_lid(&self, lid: Lid) -> Option<(NodeId, u8)> {
        let owner = *self.lid_owner.get(usize::from(lid.0))?;
        if lid.0 == 0 || owner == 0 {
            return None;
        }
        let at = |i: usize, n: &SmNode| {
            let port = if n.is_switch() {
                0
            } else {
                n.info.local_port_num
            };
            (n.alive && (n.lid == lid.0 || n.vfs.iter().any(|v| v.lid == lid.0)))
                .then_some((NodeId(i), port))
        };
        let i = owner as usize - 1;
        at(i, self.nodes.get(i)?)
    }

    /// Adds a node found by discovery, with no LID yet; its id.
    pub(super) fn add_node(&mut self, node: SmNode) -> usize {
        let i = self.nodes.len();
        self.by_guid.insert(node.info.node_guid.0, i);
        self.by_port_guid.insert(node.info.port_guid.0, (i, 0));
        let lid = node.lid;
        self.nodes.push(node);
        node_lid_set(&mut self.lid_owner, lid, i);
        i
    }

    /// Gives node `i` the LID `lid`.
    pub(super) fn set_lid(&mut self, i: usize, lid: u16) {
        self.nodes[i].lid = lid;
        node_lid_set(&mut self.lid_owner, lid, i);
    }

    /// Sets VF `vf` (from 1) of hypervisor `i`: its LID and the vGUID of
    /// the VM on it (0: none).
    pub(super) fn set_vf(&mut self, i: usize, vf: u16, lid: u16, vm: Option<VmId>, guid: u64) {
        let Some(slot) = self.nodes[i].vfs.get_mut(usize::from(vf).wrapping_sub(1)) else {
            return;
        };
        if slot.guid != 0 && self.by_port_guid.get(&slot.guid) == Some(&(i, vf)) {
            self.by_port_guid.remove(&slot.guid);
        }
        let old = slot.lid;
        *slot = VfSlot { lid, vm, guid };
        if guid != 0 {
            self.by_port_guid.insert(guid, (i, vf));
        }
        node_lid_set(&mut self.lid_owner, lid, i);
        // The old LID is nobody's once this node holds it nowhere else.
        let n = &self.nodes[i];
        let still = n.lid == old || n.vfs.iter().any(|v| v.lid == old);
        let l = usize::from(old);
        if old != 0 && !still && self.lid_owner.get(l) == Some(&(i as u32 + 1)) {
            self.lid_owner[l] = 0;
        }
    }

    /// Node `i` turned out to have `n` VFs: new, empty slots (their old
    /// LIDs and vGUIDs are forgotten).
    pub(super) fn set_vf_count(&mut self, i: usize, n: usize) {
        for vf in 1..=self.nodes[i].vfs.len() {
            self.set_vf(i, vf as u16, 0, None, 0);
        }
        self.nodes[i].vfs = vec![VfSlot::default(); n];
    }

    /// True when the LID and port-GUID indexes say what a search of every
    /// node would: the invariant the setters keep (tests check it after
    /// bring-ups, failures and migrations).
    pub fn indexes_agree(&self) -> bool {
        let scan = |lid: u16| {
            self.nodes.iter().enumerate().find_map(|(i, n)| {
                let port = if n.is_switch() {
                    0
                } else {
                    n.info.local_port_num
                };
                (n.alive && (n.lid == lid || n.vfs.iter().any(|v| v.lid == lid)))
                    .then_some((NodeId(i), port))
            })
        };
        let lids = (1..=self.max_lid.max(self.lid_owner.len() as u16))
            .all(|l| self.by_lid(Lid(l)) == scan(l));
        let guids = self.nodes.iter().enumerate().all(|(i, n)| {
            let own = !n.alive || self.by_port_guid(n.info.port_guid) == Some((NodeId(i), 0));
            let vfs = n.vfs.iter().enumerate().all(|(v, s)| {
                !n.alive || s.guid == 0 || self.by_port_guid(Guid(s.guid)) == Some((NodeId(i), v as u16 + 1))
            });
            own && vfs
        });
        lids && guids
    }

    /// The VF (numbered from 1) of the hypervisor `node` that holds `lid`.
    #[inline]
    pub fn vf_of_lid(&self, node: NodeId, lid: Lid) -> Option<u16> {
        self.node(node)?
            .vfs
            .iter()
            .position(|v| lid.0 != 0 && v.lid == lid.0)
            .map(|v| v as u16 + 1)
    }

    /// The highest LID given.
    pub fn max_lid(&self) -> Lid {
        Lid(self.max_lid)
    }

    /// The switches of the routing graph, as nodes, in graph order.
    pub fn switch_nodes(&self) -> impl Iterator<Item = (SwitchId, NodeId)> + '_ {
        self.switch_index
            .iter()
            .enumerate()
            .map(|(k, &i)| (SwitchId(k), NodeId(i)))
    }

    /// The computed LFT of a switch of the graph.
    pub fn lft(&self, s: SwitchId) -> Option<&[u8]> {
        self.lfts.get(s.0).map(|v| v.as_slice())
    }

    /// The port the switch `node` forwards `lid` to with the table it has
    /// now (the one the SM last distributed to it): 0 the switch itself,
    /// 255 (DROP_PORT) unrouted or not a switch.
    #[inline]
    pub fn installed_port(&self, node: NodeId, lid: Lid) -> u8 {
        let t = match self.old_lfts.get(&node.0) {
            Some(t) => t,
            None => match self.switch_of.get(node.0).and_then(|&k| self.lfts.get(k)) {
                Some(t) => t,
                None => return DROP_PORT,
            },
        };
        t.get(usize::from(lid.0)).copied().unwrap_or(DROP_PORT)
    }

    /// Walks a data packet from `from` towards `lid` through the installed
    /// tables, calling `hop(node, port)` for each port it leaves by (a
    /// CA's own port first, then each switch's egress). Returns the node
    /// where it stops: the first live CA it reaches, or the switch whose
    /// table keeps it (port 0); `None` when it is dropped, meets a dead
    /// node or a cable to nowhere, or loops. Whether that node holds `lid`
    /// is the caller's question.
    pub fn walk(&self, from: NodeId, lid: Lid, mut hop: impl FnMut(NodeId, u8)) -> Option<NodeId> {
        let mut at = from;
        let n = self.node(from)?;
        if !n.is_switch() {
            let p = n.info.local_port_num;
            hop(from, p);
            at = self.peer(from, p)?.0;
        }
        for _ in 0..=self.nodes.len() {
            let node = self.node(at).filter(|n| n.alive)?;
            if !node.is_switch() {
                return Some(at);
            }
            let out = self.installed_port(at, lid);
            if out == 0 {
                return Some(at);
            }
            if out == DROP_PORT {
                return None;
            }
            hop(at, out);
            at = self.peer(at, out)?.0;
        }
        None
    }

    /// The node and port at the other end of `port` of `node`.
    #[inline]
    pub fn peer(&self, node: NodeId, port: u8) -> Option<(NodeId, u8)> {
        self.node(node)?
            .ports
            .get(usize::from(port))?
            .peer
            .map(|(n, p)| (NodeId(n), p))
    }
}

/// A port as the SM knows it.
#[derive(Clone, Debug, Default)]
pub struct SmPort {
    /// The last PortInfo read.
    pub info: Option<PortInfo>,
    /// The node and port at the other end of the cable.
    pub peer: Option<(usize, u8)>,
}

/// A node as the SM knows it.
#[derive(Clone, Debug)]
pub struct SmNode {
    /// NodeInfo as read.
    pub info: NodeInfo,
    /// The directed route by which it was first reached.
    pub path: DrPath,
    /// Ports 0..=NumPorts.
    pub ports: Vec<SmPort>,
    /// SwitchInfo (switches).
    pub switch_info: Option<SwitchInfo>,
    /// The LID assigned (switch port 0, or the CA port reached).
    pub lid: u16,
    /// A hypervisor's VFs (empty for other nodes).
    pub vfs: Vec<VfSlot>,
    /// NodeDescription as read.
    pub description: Option<NodeDescription>,
    /// Reachable from the SM at the last sweep.
    pub alive: bool,
    /// Came (back) since the subnet was last up: needs its LID, tables and
    /// ports set from scratch, and is addressed by directed route.
    pub fresh: bool,
}

/// One VF of a hypervisor as the SM tracks it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VfSlot {
    /// Its LID (0: none).
    pub lid: u16,
    /// The VM running on it.
    pub vm: Option<VmId>,
    /// That VM's vGUID (0: none).
    pub guid: u64,
}

/// Records in the LID index that node `i` holds `lid` (0: nothing).
fn node_lid_set(index: &mut Vec<u32>, lid: u16, i: usize) {
    if lid == 0 {
        return;
    }
    let l = usize::from(lid);
    if index.len() <= l {
        index.resize(l + 1, 0);
    }
    index[l] = i as u32 + 1;
}

impl SmNode {
    /// True for a switch.
    #[inline]
    pub fn is_switch(&self) -> bool {
        self.info.node_type == NodeType::Switch
    }
    /// True for a hypervisor (a CA with VFs).
    pub fn is_hypervisor(&self) -> bool {
        !self.vfs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(kind: NodeType, guid: u64, lid: u16, ports: usize) -> SmNode {
        SmNode {
            info: NodeInfo {
                node_type: kind,
                node_guid: Guid(guid),
                port_guid: Guid(guid),
                num_ports: ports as u8,
                local_port_num: 1,
                ..NodeInfo::default()
            },
            path: DrPath::new(),
            ports: vec![SmPort::default(); ports + 1],
            switch_info: None,
            lid,
            vfs: Vec::new(),
            description: None,
            alive: true,
            fresh: false,
        }
    }

    /// The SM's CA (LID 1) on port 1 of a switch (LID 2), a hypervisor
    /// (LID 3, VFs with LIDs 4 and 5) on its port 2.
    fn small() -> Subnet {
        let mut s = Subnet::default();
        for (i, (kind, ports)) in [
            (NodeType::ChannelAdapter, 1),
            (NodeType::Switch, 4),
            (NodeType::ChannelAdapter, 1),
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(s.add_node(node(kind, 0xa + i as u64, 0, ports)), i);
            s.set_lid(i, i as u16 + 1);
        }
        s.set_vf_count(2, 2);
        s.set_vf(2, 1, 4, None, 0);
        s.set_vf(2, 2, 5, Some(VmId(7)), 0x77);
        s.nodes[0].ports[1].peer = Some((1, 1));
        s.nodes[1].ports[1].peer = Some((0, 1));
        s.nodes[1].ports[2].peer = Some((2, 1));
        s.nodes[2].ports[1].peer = Some((1, 2));
        s.switch_index = vec![1];
        s.switch_of = vec![usize::MAX, 0, usize::MAX];
        s.lfts = vec![vec![0xFF, 1, 0, 2, 2, 2]];
        s.max_lid = 5;
        s
    }

    #[test]
    fn lookups_by_guid_lid_and_link() {
        let s = small();
        assert_eq!(s.by_guid(Guid(0xb)), Some(NodeId(1)));
        assert_eq!(s.by_guid(Guid(0xd)), None);
        assert_eq!(s.by_lid(Lid(1)), Some((NodeId(0), 1)));
        assert_eq!(s.by_lid(Lid(2)), Some((NodeId(1), 0)), "a switch's port 0");
        assert_eq!(s.by_lid(Lid(5)), Some((NodeId(2), 1)), "a VF's hypervisor");
        assert_eq!(s.vf_of_lid(NodeId(2), Lid(5)), Some(2));
        assert_eq!(s.vf_of_lid(NodeId(2), Lid(3)), None);
        assert_eq!(s.by_lid(Lid(0)), None);
        assert_eq!(s.by_lid(Lid(6)), None);
        assert_eq!(s.peer(NodeId(1), 2), Some((NodeId(2), 1)));
        assert_eq!(s.peer(NodeId(1), 3), None);
        assert_eq!(s.peer(NodeId(9), 1), None);
        assert_eq!(s.max_lid(), Lid(5));
        let sw: Vec<_> = s.switch_nodes().collect();
        assert_eq!(sw, [(SwitchId(0), NodeId(1))]);
        assert_eq!(s.lft(SwitchId(0)).map(|t| t[3]), Some(2));
        assert_eq!(s.lft(SwitchId(1)), None);
    }

    /// A lost node holds no LID as far as lookups go.
    #[test]
    fn a_lost_node_is_not_found_by_lid() {
        let mut s = small();
        s.nodes[2].alive = false;
        assert_eq!(s.by_lid(Lid(3)), None);
        assert_eq!(s.by_lid(Lid(4)), None);
        assert_eq!(s.by_port_guid(Guid(0x77)), None);
        assert_eq!(s.by_guid(Guid(0xc)), Some(NodeId(2)), "still known");
        assert!(s.indexes_agree());
    }

    /// The indexes follow LIDs and vGUIDs as VMs come, move and go: a
    /// freed LID is nobody's, a vGUID names the VF its VM is on.
    #[test]
    fn indexes_follow_vfs() {
        let mut s = small();
        assert!(s.indexes_agree());
        assert_eq!(s.by_port_guid(Guid(0x77)), Some((NodeId(2), 2)));
        assert_eq!(s.by_port_guid(Guid(0xa)), Some((NodeId(0), 0)), "port GUID = node GUID here");
        // The VM moves to VF 1 with its LID; VF 2 takes VF 1's (a swap).
        s.set_vf(2, 2, 4, None, 0);
        s.set_vf(2, 1, 5, Some(VmId(7)), 0x77);
        assert_eq!(s.by_port_guid(Guid(0x77)), Some((NodeId(2), 1)));
        assert_eq!(s.vf_of_lid(NodeId(2), Lid(5)), Some(1));
        assert_eq!(s.vf_of_lid(NodeId(2), Lid(4)), Some(2));
        assert!(s.indexes_agree());
        // Stopped, its LID freed.
        s.set_vf(2, 1, 0, None, 0);
        assert_eq!(s.by_lid(Lid(5)), None);
        assert_eq!(s.by_port_guid(Guid(0x77)), None);
        assert!(s.indexes_agree());
        // Fewer VFs found on a second read: their LIDs go.
        s.set_vf_count(2, 1);
        assert_eq!(s.by_lid(Lid(4)), None);
        assert_eq!(s.by_lid(Lid(3)), Some((NodeId(2), 1)));
        assert!(s.indexes_agree());
    }
}
