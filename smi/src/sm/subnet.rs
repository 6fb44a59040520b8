//! What the SM knows of the subnet: its nodes and their ports, as read
//! from the agents, with the links between them and the LIDs given.

use super::*;
use mad_core::attr::forwarding::DROP_PORT;
use mad_core::attr::{CapabilityMask, LinkSpeed, LinkSpeedExt, LinkWidth, PortInfo};
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
    /// Every node found, the SM's first. Private: changed only through
    /// [`Subnet::node_mut`], [`Subnet::nodes_mut`] and the setters, which
    /// keep the indexes and the briefs in step.
    nodes: Vec<SmNode>,
    /// Per node, what a walk needs of it ([`NodeBrief`]).
    briefs: Vec<NodeBrief>,
    /// The briefs of every node's ports, node after node.
    port_briefs: Vec<PortBrief>,
    /// Node GUID → node index: a switch, or a CA by the port it was
    /// first found by.
    by_guid: BTreeMap<u64, usize>,
    /// (Node GUID, port number) → node index, for every other port of a
    /// multi-port CA: each of a CA's ports is an end port with its own
    /// GUID, LID, path and link, and the SM keeps it as a node entry of
    /// its own (what an SA lists as one NodeRecord per port). Written
    /// only through [`Subnet::add_other_port`].
    other_ports: BTreeMap<(u64, u8), usize>,
    /// Port GUID → node index and VF (0: the node's own port; a VM's
    /// vGUID names its VF). Written only through [`Subnet::add_node`] and
    /// [`Subnet::set_vf`].
    by_port_guid: hashbrown::HashMap<u64, (usize, u16)>,
    /// LID → node index + 1 (0: nobody), for the node's own LID and its
    /// VFs'; the last one given a LID if two ever hold it. Written only
    /// through [`Subnet::set_lid`], [`Subnet::set_vf`] and
    /// [`Subnet::set_vf_count`].
    lid_owner: Vec<u32>,
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
    /// The fat-tree engine routed with its own rules (it did not fall
    /// back to up*/down* on a degraded tree).
    pub(super) ftree_applied: bool,
    /// The service level of every pair of switches, where LASH routed
    /// ([`super::Engine::Lash`]; `None`: every path takes the SL the
    /// request or the policy gives).
    pub(super) lash: Option<super::lash::Layers>,
    /// Multicast groups and the MFT entries written for them.
    pub(super) mcast: super::mcast::Multicast,
    /// Partitions and the P_Key tables.
    pub(super) pkeys: super::pkeys::PKeys,
    /// The QoS policy and the SL-to-VL and VL arbitration tables.
    pub(super) qos: super::qos::Qos,
    /// The other SMs found (their SMInfo as last read), by port GUID.
    pub(super) other_sms: BTreeMap<u64, OtherSm>,
    /// Alias GUIDs of end ports.
    pub(super) aliases: super::guids::Aliases,
    /// The LMC of every CA port ([`super::SmConfig::lmc`]); a switch's
    /// base port 0 has one LID.
    pub(super) lmc: u8,
    /// Whether a switch's enhanced port 0 takes the LMC too
    /// ([`super::SmConfig::lmc_esp0`]).
    pub(super) lmc_esp0: bool,
}

/// Another SM of the subnet, as this one last read its SMInfo: what an
/// SA lists as its SMInfoRecord (OpenSM's remote SMs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OtherSm {
    /// Its port GUID.
    pub guid: u64,
    /// The node it runs on.
    pub node: NodeId,
    /// Its priority (0–15).
    pub priority: u8,
    /// Its state.
    pub state: mad_core::attr::SmState,
    /// Its ActCount.
    pub act_count: u32,
}

impl Subnet {
    /// The other SMs this SM has found on live nodes (a standby's or a
    /// master's SMInfo as last read), by port GUID.
    pub fn other_sms(&self) -> impl Iterator<Item = &OtherSm> + '_ {
        (self.other_sms.values()).filter(|o| self.nodes.get(o.node.0).is_some_and(|n| n.alive))
    }

    /// Every MFT entry the SM has written: (switch node, MLID, port
    /// mask), by switch then MLID. Entries it cleared are not listed.
    pub fn mft_entries(&self) -> impl Iterator<Item = (NodeId, Lid, super::PortMask)> + '_ {
        self.mcast
            .installed
            .iter()
            .flat_map(|(&n, t)| t.iter().map(move |(&l, &m)| (NodeId(n), Lid(l), m)))
    }

    /// The MFT entry the SM has written for `mlid` on switch `node` (all
    /// zero when none).
    pub fn mft_entry(&self, node: NodeId, mlid: Lid) -> super::PortMask {
        self.mcast
            .installed
            .get(&node.0)
            .and_then(|t| t.get(&mlid.0))
            .copied()
            .unwrap_or([0; 16])
    }

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

    /// The entry of port `port` of the node with node GUID `guid`: the
    /// node's for a switch or for the CA port it was first found by, the
    /// other port's own entry for another port
    /// of a CA; live or lost.
    pub fn by_guid_port(&self, guid: Guid, port: u8) -> Option<NodeId> {
        let i = *self.by_guid.get(&guid.0)?;
        let n = &self.nodes[i];
        if n.is_switch() || n.info.local_port_num == port {
            return Some(NodeId(i));
        }
        self.other_ports.get(&(guid.0, port)).map(|&j| NodeId(j))
    }

    /// Nodes, not end ports (a multi-port CA once): every node found, or
    /// the live ones only (a node lives while any of its ports does).
    pub fn node_count(&self, live: bool) -> usize {
        if !live {
            return self.by_guid.len();
        }
        (self.nodes.iter().filter(|n| n.alive))
            .map(|n| n.info.node_guid.0)
            .collect::<BTreeSet<u64>>()
            .len()
    }

    /// True when node `i` is the first entry of its node: a switch, a
    /// one-port CA, or the port of a multi-port CA found first (not
    /// another port's entry). Counting these counts nodes, not ports.
    pub fn is_first_port(&self, i: NodeId) -> bool {
        self.nodes
            .get(i.0)
            .is_some_and(|n| self.by_guid.get(&n.info.node_guid.0) == Some(&i.0))
    }

    /// The live node whose port (or one of whose VMs' vGUIDs) is
    /// `guid`, with the VF (0: the node's own port).
    #[inline]
    pub fn by_port_guid(&self, guid: Guid) -> Option<(NodeId, u16)> {
        let &(i, vf) = self.by_port_guid.get(&guid.0)?;
        // The brief, not the node: one cache line fewer per lookup.
        self.briefs.get(i)?.alive.then_some((NodeId(i), vf))
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
        let i = owner as usize - 1;
        let b = self.briefs.get(i)?;
        let holds =
            b.holds_lid(lid) || (b.hypervisor && self.nodes[i].vfs.iter().any(|v| v.lid == lid.0));
        (b.alive && holds).then_some((NodeId(i), b.own_port))
    }

    /// An empty subnet whose CA ports get LMC `lmc`, and so do switches'
    /// enhanced ports 0 when `esp0`.
    pub(super) fn with_lmc(lmc: u8, esp0: bool) -> Subnet {
        Subnet {
            lmc,
            lmc_esp0: esp0,
            ..Subnet::default()
        }
    }

    /// The service level of the path from the port holding `slid` to the
    /// one holding `dlid` where LASH routed (the layer of their switches'
    /// pair; OpenSM's `path_sl`), else `None`.
    pub fn lash_sl(&self, slid: Lid, dlid: Lid) -> Option<u8> {
        let layers = self.lash.as_ref()?;
        let at = |lid: Lid| {
            let (NodeId(i), port) = self.by_lid(lid)?;
            let n = self.nodes.get(i)?;
            if n.is_switch() {
                return self.switch_of.get(i).copied();
            }
            // A CA's port (or a VM's LID, its hypervisor's): the switch
            // its cable enters.
            let (m, _) = n.ports.get(usize::from(port))?.peer?;
            self.switch_of.get(m).copied()
        };
        Some(layers.sl(at(slid)?, at(dlid)?))
    }

    /// LASH's layers, where it routed ([`super::Engine::Lash`]).
    pub fn lash_layers(&self) -> Option<&super::lash::Layers> {
        self.lash.as_ref()
    }

    /// The LMC the SM gives every CA port (a switch's port 0: 0, unless
    /// it is enhanced and `lmc_esp0` is on).
    pub fn lmc(&self) -> u8 {
        self.lmc
    }

    /// The LMC of node `i`'s own port: the subnet's for a CA, and for a
    /// switch whose port 0 is enhanced when `lmc_esp0` is on; 0 for any
    /// other switch (OpenSM's `osm_switch_sp0_is_lmc_capable`).
    pub(super) fn lmc_of(&self, i: usize) -> u8 {
        match self.nodes.get(i) {
            Some(n) if !n.is_switch() => self.lmc,
            Some(n) if self.lmc_esp0 && n.switch_info.is_some_and(|s| s.enhanced_port0) => self.lmc,
            _ => 0,
        }
    }

    /// True when no live node holds any LID of `base..base + count`.
    pub(super) fn lids_free(&self, base: u16, count: u16) -> bool {
        (0..count).all(|k| {
            base.checked_add(k)
                .is_some_and(|l| l <= Lid::UNICAST_MAX.0 && self.by_lid(Lid(l)).is_none())
        })
    }

    /// Whether `guid` is a port GUID or a VM's vGUID the SM has seen, on
    /// a live node or a lost one.
    pub(super) fn port_guid_known(&self, guid: u64) -> bool {
        self.by_port_guid.contains_key(&guid)
    }

    /// Adds a node found by discovery, with no LID yet; its id.
    pub(super) fn add_node(&mut self, node: SmNode) -> usize {
        self.by_guid.insert(node.info.node_guid.0, self.nodes.len());
        self.push(node)
    }

    /// Adds the entry of another port of a CA already known (by the
    /// port it was first found by): `node` as read through that port, with
    /// its own port GUID, port number and path; its id. The node-GUID
    /// index keeps naming the first port.
    pub(super) fn add_other_port(&mut self, node: SmNode) -> usize {
        let key = (node.info.node_guid.0, node.info.local_port_num);
        self.other_ports.insert(key, self.nodes.len());
        self.push(node)
    }

    /// Appends a node entry and indexes its port GUID and LIDs; its id.
    fn push(&mut self, node: SmNode) -> usize {
        let i = self.nodes.len();
        self.by_port_guid.insert(node.info.port_guid.0, (i, 0));
        let lid = node.lid;
        self.nodes.push(node);
        self.briefs.push(NodeBrief::default());
        self.refresh(i);
        let count = 1u16 << self.lmc_of(i);
        node_lid_set(&mut self.lid_owner, lid, count, i);
        i
    }

    /// The node GUID of node `i` (0 when there is no such node).
    pub(super) fn node_guid_of(&self, i: usize) -> Guid {
        self.nodes.get(i).map_or(Guid(0), |n| n.info.node_guid)
    }

    /// Points the port-GUID index back at node `i` (found again) for its
    /// port GUID and its VMs' vGUIDs, wherever no other live node holds
    /// them meanwhile (one that took a GUID while `i` was lost keeps it).
    pub(super) fn claim_guids(&mut self, i: usize) {
        let Some(n) = self.nodes.get(i) else {
            return;
        };
        let mine: Vec<(u64, u16)> = core::iter::once((n.info.port_guid.0, 0))
            .chain(
                (n.vfs.iter().enumerate())
                    .filter(|(_, s)| s.guid != 0)
                    .map(|(v, s)| (s.guid, v as u16 + 1)),
            )
            .collect();
        for (guid, vf) in mine {
            let free = match self.by_port_guid.get(&guid) {
                Some(&(j, _)) => j == i || !self.nodes[j].alive,
                None => true,
            };
            if free {
                self.by_port_guid.insert(guid, (i, vf));
            }
        }
    }

    /// Node `i`, to change: its brief is brought up to date when the
    /// returned guard goes. Its LID and VFs change only through
    /// [`Subnet::set_lid`] and [`Subnet::set_vf`] (the indexes follow
    /// them); the guard checks that in debug builds.
    pub(super) fn node_mut(&mut self, i: usize) -> Option<NodeMut<'_>> {
        let n = self.nodes.get(i)?;
        let was = (n.lid, n.vfs.len(), n.info.port_guid);
        Some(NodeMut { s: self, i, was })
    }

    /// Port `port` of node `i`, to change: the node's brief is brought up
    /// to date when the returned guard goes.
    pub(super) fn port_mut(&mut self, i: usize, port: u8) -> Option<PortMut<'_>> {
        let n = self.node_mut(i)?;
        n.ports.get(usize::from(port))?;
        Some(PortMut {
            n,
            port: usize::from(port),
        })
    }

    /// Every node, to change (a sweep's marks): every brief is brought up
    /// to date when the returned guard goes.
    pub(super) fn nodes_mut(&mut self) -> NodesMut<'_> {
        NodesMut { s: self }
    }

    /// Rewrites node `i`'s brief and its ports' from the node.
    fn refresh(&mut self, i: usize) {
        let Some(n) = self.nodes.get(i) else { return };
        let Some(b) = self.briefs.get(i) else { return };
        // Ports 0..=NumPorts: at most 256.
        let count = n.ports.len().min(usize::from(u16::MAX)) as u16;
        let mut at = b.ports_at;
        if b.port_count != count {
            // First brief of the node (or its port count changed): its
            // ports get a place at the end.
            at = self.port_briefs.len() as u32;
            let len = self.port_briefs.len() + usize::from(count);
            self.port_briefs.resize(len, PortBrief::default());
        }
        let own = n.end_port();
        let prefix = n
            .ports
            .get(usize::from(own))
            .and_then(|p| p.info.as_ref())
            .map_or(0, |pi| pi.gid_prefix.0);
        let (old_lid, old_lmc) = (b.lid, b.lmc);
        let lmc = self.lmc_of(i);
        self.briefs[i] = NodeBrief {
            port_guid: n.info.port_guid,
            gid_prefix: prefix,
            lid: Lid(n.lid),
            lmc,
            alive: n.alive,
            switch: n.is_switch(),
            hypervisor: n.is_hypervisor(),
            own_port: own,
            life_time_value: n.switch_info.map(|si| si.life_time_value),
            ports_at: at,
            port_count: count,
        };
        let at = at as usize;
        let switch = n.is_switch();
        let cap = |p: &SmPort| {
            p.info.as_ref().is_some_and(|pi| {
                pi.capability_mask
                    .contains(CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED)
            })
        };
        let ext0 = switch && n.ports.first().is_some_and(cap);
        for (slot, p) in self.port_briefs[at..].iter_mut().zip(&n.ports) {
            *slot = PortBrief::of(p, if switch { ext0 } else { cap(p) });
        }
        // A switch's LMC follows its SwitchInfo (enhanced port 0), which
        // may be read after its LID: the index then covers the range.
        if n.lid != 0 && (old_lid.0 != n.lid || old_lmc != lmc) {
            node_lid_set(&mut self.lid_owner, n.lid, 1 << lmc, i);
        }
    }

    /// What a walk needs of node `id`.
    #[inline]
    pub fn brief(&self, id: NodeId) -> Option<&NodeBrief> {
        self.briefs.get(id.0)
    }

    /// What a walk needs of `port` of node `id`.
    #[inline]
    pub fn port_brief(&self, id: NodeId, port: u8) -> Option<&PortBrief> {
        self.port_brief_of(self.briefs.get(id.0)?, port)
    }

    /// What a walk needs of `port` of the node whose brief is `b`.
    #[inline]
    fn port_brief_of(&self, b: &NodeBrief, port: u8) -> Option<&PortBrief> {
        if u16::from(port) >= b.port_count {
            return None;
        }
        self.port_briefs
            .get(b.ports_at as usize + usize::from(port))
    }

    /// True when every node's brief says what the node does (the
    /// invariant the guards keep).
    fn briefs_agree(&self) -> bool {
        let mut again = self.clone();
        for i in 0..again.nodes.len() {
            again.briefs[i].port_count = u16::MAX;
            again.refresh(i);
        }
        (0..self.nodes.len()).all(|i| {
            let (a, b) = (&self.briefs[i], &again.briefs[i]);
            let ports = |s: &Subnet, b: &NodeBrief| {
                s.port_briefs[b.ports_at as usize..][..usize::from(b.port_count)].to_vec()
            };
            let placed = |b: &NodeBrief| NodeBrief { ports_at: 0, ..*b };
            placed(a) == placed(b) && ports(self, a) == ports(&again, b)
        })
    }

    /// Gives node `i` the LID `lid`.
    pub(super) fn set_lid(&mut self, i: usize, lid: u16) {
        self.nodes[i].lid = lid;
        self.refresh(i);
        let count = 1u16 << self.lmc_of(i);
        node_lid_set(&mut self.lid_owner, lid, count, i);
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
        node_lid_set(&mut self.lid_owner, lid, 1, i);
        // The old LID is nobody's once this node holds it nowhere else.
        let n = &self.nodes[i];
        let still = n.lid == old || n.vfs.iter().any(|v| v.lid == old);
        let l = usize::from(old);
        if old != 0 && !still && self.lid_owner.get(l) == Some(&(i as u32 + 1)) {
            self.lid_owner[l] = 0;
        }
        self.refresh(i);
    }

    /// Node `i` turned out to have `n` VFs: the slots it had up to `n`
    /// are kept (their LIDs and vGUIDs); those past `n` are forgotten
    /// (their LIDs and vGUIDs nobody's), and any more are new and empty.
    pub(super) fn set_vf_count(&mut self, i: usize, n: usize) {
        for vf in n + 1..=self.nodes[i].vfs.len() {
            self.set_vf(i, vf as u16, 0, None, 0);
        }
        self.nodes[i].vfs.resize(n, VfSlot::default());
        self.refresh(i);
    }

    /// True when the LID and port-GUID indexes and the nodes' briefs say
    /// what a search of every node would: the invariant the setters keep (tests check it after
    /// bring-ups, failures and migrations).
    pub fn indexes_agree(&self) -> bool {
        let scan = |lid: u16| {
            self.nodes.iter().enumerate().find_map(|(i, n)| {
                let port = n.end_port();
                let own = n.lid != 0
                    && lid >= n.lid
                    && u32::from(lid) < u32::from(n.lid) + (1u32 << self.lmc_of(i));
                (n.alive && (own || n.vfs.iter().any(|v| v.lid == lid)))
                    .then_some((NodeId(i), port))
            })
        };
        let lids = (1..=self.max_lid.max(self.lid_owner.len() as u16))
            .all(|l| self.by_lid(Lid(l)) == scan(l));
        let guids = self.nodes.iter().enumerate().all(|(i, n)| {
            let own = !n.alive || self.by_port_guid(n.info.port_guid) == Some((NodeId(i), 0));
            let vfs = n.vfs.iter().enumerate().all(|(v, s)| {
                !n.alive
                    || s.guid == 0
                    || self.by_port_guid(Guid(s.guid)) == Some((NodeId(i), v as u16 + 1))
            });
            own && vfs
        });
        // Every entry is found by its node GUID and port number.
        let entries = self.nodes.iter().enumerate().all(|(i, n)| {
            let port = n.end_port();
            self.by_guid_port(n.info.node_guid, port) == Some(NodeId(i))
        });
        lids && guids && entries && self.briefs_agree()
    }

    /// The VF (numbered from 1) of the hypervisor `node` that holds `lid`.
    #[inline]
    pub fn vf_of_lid(&self, node: NodeId, lid: Lid) -> Option<u16> {
        // Only a hypervisor has VFs: the brief says so without reaching
        // the node (a miss per question on a large fabric).
        if !self.briefs.get(node.0)?.hypervisor {
            return None;
        }
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
        // Tables before a change are kept only while one is going in.
        let old = if self.old_lfts.is_empty() {
            None
        } else {
            self.old_lfts.get(&node.0)
        };
        let t = match old {
            Some(t) => t,
            None => match self.switch_of.get(node.0).and_then(|&k| self.lfts.get(k)) {
                Some(t) => t,
                None => return DROP_PORT,
            },
        };
        t.get(usize::from(lid.0)).copied().unwrap_or(DROP_PORT)
    }

    /// Walks a data packet from `from` towards `lid` through the installed
    /// tables, calling `hop` for each port it leaves by (a CA's own port
    /// first, then each switch's egress). Returns the node where it stops:
    /// the first live CA it reaches, or the switch whose table keeps it
    /// (port 0); `None` when it is dropped, meets a dead node or a cable
    /// to nowhere, or loops. Whether that node holds `lid` is the
    /// caller's question. It reads the nodes' and ports' briefs only, a
    /// few bytes each, so that a walk stays in cache on large fabrics.
    pub fn walk(&self, from: NodeId, lid: Lid, mut hop: impl FnMut(Hop<'_>)) -> Option<NodeId> {
        let mut at = from;
        let b = self.brief(from)?;
        if !b.switch {
            let p = b.own_port;
            let link = self.port_brief_of(b, p)?;
            hop(Hop {
                node: from,
                brief: b,
                port: p,
                link,
            });
            at = link.peer()?.0;
        }
        for _ in 0..=self.nodes.len() {
            let b = self.brief(at).filter(|b| b.alive)?;
            if !b.switch {
                return Some(at);
            }
            let out = self.installed_port(at, lid);
            if out == 0 {
                return Some(at);
            }
            if out == DROP_PORT {
                return None;
            }
            let link = self.port_brief_of(b, out)?;
            hop(Hop {
                node: at,
                brief: b,
                port: out,
                link,
            });
            at = link.peer()?.0;
        }
        None
    }

    /// The node and port at the other end of `port` of `node`.
    #[inline]
    pub fn peer(&self, node: NodeId, port: u8) -> Option<(NodeId, u8)> {
        self.port_brief(node, port)?.peer()
    }
}

/// What a path through a node needs of it: a copy of a few of its fields,
/// kept beside the node by [`Subnet`] whenever the node changes, so that
/// walks over many nodes touch a few bytes of each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeBrief {
    /// The GUID of its port (a switch's port 0, a CA's own).
    pub port_guid: Guid,
    /// That port's GID prefix as last read (0: not read).
    pub gid_prefix: u64,
    /// Its LID (0: none): the base of its `2^lmc` LIDs.
    pub lid: Lid,
    /// Its port's LMC: it holds LIDs `lid..lid + 2^lmc`.
    pub lmc: u8,
    /// Reachable at the last sweep.
    pub alive: bool,
    /// A switch.
    pub switch: bool,
    /// A hypervisor (a CA with VFs).
    pub hypervisor: bool,
    /// Its own port: 0 for a switch, the port the SM reached for a CA.
    pub own_port: u8,
    /// SwitchInfo.LifeTimeValue, for a switch whose SwitchInfo was read.
    pub life_time_value: Option<u8>,
    /// Where its ports' briefs start.
    ports_at: u32,
    /// How many ports it has (port 0 included).
    port_count: u16,
}

/// What a path over a port needs of it: the port at the other end, and
/// the link's MTU and rate worked out from its PortInfo (8 bytes, so
/// that walks over large fabrics touch few cache lines).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortBrief {
    /// The node at the other end + 1 (0: no cable known).
    peer_node: u32,
    /// The port at the other end.
    peer_port: u8,
    /// The link's MTU code from NeighborMTU (1: 256 … 5: 4096), 5 where
    /// it is not read or not valid: what a path over it can carry.
    pub link_mtu: u8,
    /// The port's rate in 0.5 Gb/s units, worked out from its PortInfo as
    /// OpenSM's SA works it out (`ib_port_info_compute_rate`): the active
    /// width times the extended speed where the port says
    /// IsExtendedSpeedsSupported (a switch's ports, where its port 0 does)
    /// and an extended speed is active; else times LinkSpeedActive; 1x
    /// where the width is not one of 1x, 2x, 4x, 8x, 12x, and 2.5 Gb/s
    /// where the speed is not known. 20 (10 Gb/s) where the PortInfo was
    /// not read. Worked out here once, not at every walk.
    pub link_half_gbps: u16,
}

impl PortBrief {
    /// A port, `ext` where its rate may be extended (the port's own
    /// IsExtendedSpeedsSupported; a switch's port 0's).
    fn of(p: &SmPort, ext: bool) -> PortBrief {
        let (peer_node, peer_port) = p
            .peer
            .filter(|&(n, _)| n < u32::MAX as usize)
            .map_or((0, 0), |(n, q)| (n as u32 + 1, q));
        let (link_mtu, link_half_gbps) = match p.info.as_ref() {
            None => (5, 20),
            Some(pi) => {
                let mtu = u8::from(pi.neighbor_mtu);
                let mtu = if (1..=5).contains(&mtu) { mtu } else { 5 };
                (mtu, port_half_gbps(pi, ext))
            }
        };
        PortBrief {
            peer_node,
            peer_port,
            link_mtu,
            link_half_gbps,
        }
    }

    /// The node and port at the other end of the cable.
    #[inline]
    pub fn peer(&self) -> Option<(NodeId, u8)> {
        (self.peer_node != 0).then(|| (NodeId(self.peer_node as usize - 1), self.peer_port))
    }
}

/// A port's rate in 0.5 Gb/s units from its PortInfo ([`PortBrief`]'s
/// rule); `ext`: the extended speed counts.
pub fn port_half_gbps(pi: &PortInfo, ext: bool) -> u16 {
    let w = pi.link_width_active;
    let lanes: u16 = if w == LinkWidth::W1X {
        1
    } else if w == LinkWidth::W2X {
        2
    } else if w == LinkWidth::W4X {
        4
    } else if w == LinkWidth::W8X {
        8
    } else if w == LinkWidth::W12X {
        12
    } else {
        1
    };
    let e = pi.link_speed_ext_active;
    let lane = if ext && e == LinkSpeedExt::FDR {
        28
    } else if ext && e == LinkSpeedExt::EDR {
        50
    } else if ext && e == LinkSpeedExt::HDR {
        100
    } else if ext && e == LinkSpeedExt::NDR {
        200
    } else {
        let s = pi.link_speed_active;
        if s == LinkSpeed::SDR {
            5
        } else if s == LinkSpeed::DDR {
            10
        } else if s == LinkSpeed::QDR {
            20
        } else {
            // OpenSM: 2.5 Gb/s, whatever the width.
            return 5;
        }
    };
    lanes * lane
}

/// One port a walked packet leaves by.
#[derive(Clone, Copy, Debug)]
pub struct Hop<'a> {
    /// The node it leaves.
    pub node: NodeId,
    /// That node's brief.
    pub brief: &'a NodeBrief,
    /// The port it leaves by.
    pub port: u8,
    /// That port's brief.
    pub link: &'a PortBrief,
}

/// Node `i` of a [`Subnet`], lent to be changed ([`Subnet::node_mut`]);
/// its brief is rewritten when this goes.
pub(super) struct NodeMut<'a> {
    s: &'a mut Subnet,
    i: usize,
    /// LID, VF count and port GUID when lent: the indexes' keys, which
    /// only the setters may change.
    was: (u16, usize, Guid),
}

impl core::ops::Deref for NodeMut<'_> {
    type Target = SmNode;
    fn deref(&self) -> &SmNode {
        &self.s.nodes[self.i]
    }
}

impl core::ops::DerefMut for NodeMut<'_> {
    fn deref_mut(&mut self) -> &mut SmNode {
        &mut self.s.nodes[self.i]
    }
}

impl Drop for NodeMut<'_> {
    fn drop(&mut self) {
        let n = &self.s.nodes[self.i];
        debug_assert_eq!(
            self.was,
            (n.lid, n.vfs.len(), n.info.port_guid),
            "a node's LID, VFs and port GUID change through the Subnet's setters"
        );
        self.s.refresh(self.i);
    }
}

/// A port of a node of a [`Subnet`], lent to be changed
/// ([`Subnet::port_mut`]); the node's brief is rewritten when this goes.
pub(super) struct PortMut<'a> {
    n: NodeMut<'a>,
    port: usize,
}

impl core::ops::Deref for PortMut<'_> {
    type Target = SmPort;
    fn deref(&self) -> &SmPort {
        &self.n.ports[self.port]
    }
}

impl core::ops::DerefMut for PortMut<'_> {
    fn deref_mut(&mut self) -> &mut SmPort {
        let port = self.port;
        &mut self.n.ports[port]
    }
}

/// Every node of a [`Subnet`], lent to be changed
/// ([`Subnet::nodes_mut`]); every brief is rewritten when this goes.
pub(super) struct NodesMut<'a> {
    s: &'a mut Subnet,
}

impl core::ops::Deref for NodesMut<'_> {
    type Target = [SmNode];
    fn deref(&self) -> &[SmNode] {
        &self.s.nodes
    }
}

impl core::ops::DerefMut for NodesMut<'_> {
    fn deref_mut(&mut self) -> &mut [SmNode] {
        &mut self.s.nodes
    }
}

impl Drop for NodesMut<'_> {
    fn drop(&mut self) {
        for i in 0..self.s.nodes.len() {
            self.s.refresh(i);
        }
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
    /// The LID assigned (a switch's port 0, or the CA port this entry is
    /// for: a multi-port CA has an entry per cabled port).
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

/// Records in the LID index that node `i` holds `lid` and the `count - 1`
/// LIDs above it (0: nothing).
fn node_lid_set(index: &mut Vec<u32>, lid: u16, count: u16, i: usize) {
    if lid == 0 {
        return;
    }
    let (l, end) = (
        usize::from(lid),
        usize::from(lid) + usize::from(count.max(1)),
    );
    if index.len() < end {
        index.resize(end, 0);
    }
    index[l..end].fill(i as u32 + 1);
}

impl NodeBrief {
    /// True when `lid` is one of the node's own port's LIDs (its base and
    /// the `2^lmc - 1` above it).
    #[inline]
    pub fn holds_lid(&self, lid: Lid) -> bool {
        self.lid.0 != 0
            && lid.0 >= self.lid.0
            && u32::from(lid.0) < u32::from(self.lid.0) + (1u32 << self.lmc)
    }
}

/// A GetResp of `attr` come back by directed route through port 1, its
/// data zero, as the unit tests feed the SM's handlers.
#[cfg(test)]
pub(crate) fn answer_for_test(attr: mad_core::attr::AttributeId) -> mad_core::Smp {
    let path = mad_core::DrPath::from_ports(&[1]).expect("a one-hop path");
    mad_core::Smp::directed(
        &path,
        mad_core::Method::GetResp,
        attr,
        0,
        0,
        mad_core::MKey(0),
    )
}

impl SmNode {
    /// A live node as the unit tests build one: its node and port GUID
    /// `guid`, reached by `path`, nothing read beyond its NodeInfo.
    #[cfg(test)]
    pub(crate) fn for_test(guid: u64, kind: NodeType, ports: u8, path: &[u8]) -> SmNode {
        SmNode {
            info: NodeInfo {
                node_type: kind,
                num_ports: ports,
                node_guid: mad_core::Guid(guid),
                port_guid: mad_core::Guid(guid),
                local_port_num: 1,
                ..NodeInfo::default()
            },
            path: DrPath::from_ports(path).unwrap(),
            ports: vec![SmPort::default(); usize::from(ports) + 1],
            switch_info: None,
            lid: 0,
            vfs: Vec::new(),
            description: None,
            alive: true,
            fresh: false,
        }
    }

    /// The port this entry is for: a switch's port 0, a CA's own port
    /// (the one it was reached by; a multi-port CA has an entry per
    /// cabled port).
    #[inline]
    pub fn end_port(&self) -> u8 {
        if self.is_switch() {
            0
        } else {
            self.info.local_port_num
        }
    }

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

/// For the SM's unit tests: a live node of `kind` whose node and port
/// GUID are `guid`, with LID `lid`, `ports` ports with nothing known of
/// them, reached on port 1 by the empty path.
#[cfg(test)]
impl SmNode {
    pub(super) fn bare(kind: NodeType, guid: u64, lid: u16, ports: usize) -> SmNode {
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
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_ports_rate_is_worked_out_as_opensms_sa_works_it_out() {
        use mad_core::attr::{LinkSpeed as S, LinkSpeedExt as E, LinkWidth as W};
        let pi = |w: W, s: S, e: E| PortInfo {
            link_width_active: w,
            link_speed_active: s,
            link_speed_ext_active: e,
            ..PortInfo::default()
        };
        // (port, extended speeds said, 0.5 Gb/s units)
        for (p, ext, want) in [
            (pi(W::W4X, S::QDR, E::empty()), true, 80),
            (pi(W::W4X, S::QDR, E::EDR), true, 200),
            // Not said: the extended speed does not count.
            (pi(W::W4X, S::QDR, E::EDR), false, 80),
            (pi(W::W12X, S::QDR, E::HDR), true, 1200),
            (pi(W::W2X, S::QDR, E::FDR), true, 56),
            (pi(W::W1X, S::SDR, E::empty()), true, 5),
            (pi(W::W8X, S::DDR, E::empty()), false, 80),
            (pi(W::W12X, S::QDR, E::NDR), true, 2400),
            // A width it does not know: 1x; a speed: 2.5 Gb/s whatever
            // the width; an extended value it does not know: the speed.
            (pi(W::W1X | W::W4X, S::QDR, E::empty()), true, 20),
            (pi(W::W4X, S::QDR | S::DDR, E::empty()), true, 5),
            (pi(W::W4X, S::DDR, E::FDR | E::EDR), true, 40),
        ] {
            assert_eq!(port_half_gbps(&p, ext), want, "{p:?} {ext}");
        }
    }
    use super::*;

    fn node(kind: NodeType, guid: u64, lid: u16, ports: usize) -> SmNode {
        SmNode::bare(kind, guid, lid, ports)
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
        for (a, pa, b, pb) in [(0, 1, 1, 1), (2, 1, 1, 2)] {
            s.port_mut(a, pa).unwrap().peer = Some((b, pb));
            s.port_mut(b, pb).unwrap().peer = Some((a, pa));
        }
        s.switch_index = vec![1];
        s.switch_of = vec![usize::MAX, 0, usize::MAX];
        s.lfts = vec![vec![0xFF, 1, 0, 2, 2, 2]];
        s.max_lid = 5;
        s
    }

    #[test]
    fn ends_share_the_default_pkey_until_tables_are_given() {
        use mad_core::types::PKey;
        let mut s = small();
        let (a, b) = ((NodeId(0), 1, Lid(1)), (NodeId(2), 1, Lid(3)));
        // No tables: the default, full, and no other partition.
        assert_eq!(s.shared_pkey_at(a, b, None), Some(PKey(0xFFFF)));
        assert_eq!(s.shared_pkey_at(a, b, Some(0x7FFF)), Some(PKey(0xFFFF)));
        assert_eq!(s.shared_pkey_at(a, b, Some(1)), None);
        // A table for one port only: the other still holds the default
        // alone, so they share nothing.
        s.pkeys.want.insert((0, 1), vec![0x8001]);
        assert_eq!(s.shared_pkey_at(a, b, None), None);
        s.pkeys.want.insert((2, 1), vec![0xFFFF, 0x0001]);
        assert_eq!(s.shared_pkey_at(a, b, None), Some(PKey(0x8001)));
        // Only a VF's table given: the port ends keep the default, the
        // VM's end (LID 5) holds what its table says.
        s.pkeys.want.clear();
        s.pkeys.vf_want.insert((2, 2), vec![0x8002]);
        let vm = (NodeId(2), 1, Lid(5));
        assert_eq!(s.shared_pkey_at(a, b, None), Some(PKey(0xFFFF)));
        assert_eq!(s.shared_pkey_at(a, vm, None), None);
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
        s.node_mut(2).unwrap().alive = false;
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
        assert_eq!(
            s.by_port_guid(Guid(0xa)),
            Some((NodeId(0), 0)),
            "port GUID = node GUID here"
        );
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
        // Fewer VFs found on a second read: the LIDs past them go, the
        // first VF keeps its own.
        s.set_vf(2, 1, 6, None, 0);
        s.set_vf_count(2, 1);
        assert_eq!(s.by_lid(Lid(4)), None);
        assert_eq!(s.vf_of_lid(NodeId(2), Lid(6)), Some(1));
        assert_eq!(s.nodes()[2].vfs.len(), 1);
        assert!(s.indexes_agree());
        // More: the first kept, the new one empty.
        s.set_vf_count(2, 2);
        assert_eq!(s.vf_of_lid(NodeId(2), Lid(6)), Some(1));
        assert_eq!(s.nodes()[2].vfs[1], VfSlot::default());
        assert_eq!(s.by_lid(Lid(3)), Some((NodeId(2), 1)));
        assert!(s.indexes_agree());
    }

    /// A walk leaves by each port on the way and stops at the node that
    /// holds the LID; it follows the briefs as ports and nodes change
    /// through the guards.
    #[test]
    fn walks_follow_changes() {
        let mut s = small();
        let mut hops = Vec::new();
        let end = s.walk(NodeId(0), Lid(5), |h| {
            hops.push((h.node, h.port, h.brief.switch))
        });
        assert_eq!(end, Some(NodeId(2)));
        assert_eq!(hops, [(NodeId(0), 1, false), (NodeId(1), 2, true)]);
        assert_eq!(
            s.walk(NodeId(0), Lid(2), |_| {}),
            Some(NodeId(1)),
            "kept by the switch"
        );
        assert_eq!(s.walk(NodeId(0), Lid(6), |_| {}), None, "beyond the table");
        // The cable to the hypervisor goes: no way there.
        s.port_mut(1, 2).unwrap().peer = None;
        assert_eq!(s.peer(NodeId(1), 2), None);
        assert_eq!(s.walk(NodeId(0), Lid(5), |_| {}), None);
        assert!(s.indexes_agree());
        // The switch is lost: walks stop at it.
        s.port_mut(1, 2).unwrap().peer = Some((2, 1));
        assert_eq!(s.walk(NodeId(0), Lid(5), |_| {}), Some(NodeId(2)));
        s.node_mut(1).unwrap().alive = false;
        assert_eq!(s.walk(NodeId(0), Lid(5), |_| {}), None);
        assert!(s.indexes_agree());
        // Every change through the guards shows in the briefs.
        s.nodes_mut()[1].alive = true;
        assert_eq!(s.brief(NodeId(1)).map(|b| b.alive), Some(true));
        let pi = PortInfo {
            neighbor_mtu: mad_core::attr::Mtu::Mtu2048,
            ..PortInfo::default()
        };
        s.port_mut(1, 2).unwrap().info = Some(pi);
        assert_eq!(s.port_brief(NodeId(1), 2).map(|p| p.link_mtu), Some(4));
        assert!(s.indexes_agree());
        assert_eq!(s.port_brief(NodeId(1), 5), None, "no port 5");
    }
}
