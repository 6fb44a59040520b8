//! The discrete-event fabric: every node runs `smi::dr` and `smi::sma`,
//! every cable carries SMPs with a per-hop delay `k` and an extra delay `r`
//! for each hop that needs directed-route processing (the cost model of the
//! vSwitch paper), and SMPs may be lost at a configured rate.

use crate::rng::Rng;
use crate::topology::{Topology, TopologyError};
use mad_core::attr::forwarding::DROP_PORT;
use mad_core::attr::{NodeType, PortState};
use mad_core::{Lid, Smp};
use smi::dr::{self, Disposition};
use smi::sm::{Phase, Sm, SmConfig, Transmit};
use smi::sma::hypervisor::Hypervisor;
use smi::sma::{CaSma, NodeSpec, SwitchSma, TrapOut};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub mod verify;
pub use verify::{Check, Failure, Verify, WalkEnd};

/// Timing and loss of the simulated fabric.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Nanoseconds for an SMP to cross one cable (k).
    pub hop_ns: u64,
    /// Extra nanoseconds at each hop routed by directed route (r).
    pub dr_hop_ns: u64,
    /// Probability that an SMP is lost on a cable.
    pub loss: f64,
    /// Seed of the loss generator.
    pub seed: u64,
    /// VFs per hypervisor: with more than 0, every CA but the SM's is a
    /// hypervisor in vSwitch mode with this many VFs.
    pub vfs: usize,
    /// Agents send traps (false: every trap is lost, as on a fabric where
    /// traps are not delivered; the SM must rely on light sweeps).
    pub traps: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            hop_ns: 1_000,
            dr_hop_ns: 2_000,
            loss: 0.0,
            seed: 1,
            vfs: 0,
            traps: true,
        }
    }
}

/// A node's agent.
pub enum SimNode {
    /// A switch.
    Switch(Box<SwitchSma>),
    /// A channel adapter.
    Ca(Box<CaSma>),
    /// A hypervisor's HCA in vSwitch mode.
    Hypervisor(Box<Hypervisor>),
}

impl SimNode {
    /// A freshly powered agent: a switch; a hypervisor with `vfs` VFs (a
    /// one-port CA other than the SM's, when `vfs` > 0); or a CA, the SM's
    /// when `is_sm`.
    fn make(kind: NodeType, guid: u64, ports: u8, name: &str, vfs: usize, is_sm: bool) -> SimNode {
        match kind {
            NodeType::Switch => SimNode::Switch(Box::new(SwitchSma::new(&NodeSpec::switch(
                guid, ports, name,
            )))),
            _ if vfs > 0 && !is_sm && ports == 1 => {
                SimNode::Hypervisor(Box::new(Hypervisor::new(guid, vfs, name)))
            }
            _ => {
                let mut spec = NodeSpec::ca(guid, ports, name);
                spec.is_sm = is_sm;
                SimNode::Ca(Box::new(CaSma::new(&spec)))
            }
        }
    }
    /// A new agent of the same kind as this one (a hypervisor with as many
    /// VFs), freshly powered: nothing set.
    fn repowered(&self, kind: NodeType, guid: u64, ports: u8, name: &str) -> SimNode {
        let vfs = match self {
            SimNode::Hypervisor(h) => h.vports.vfs.len(),
            SimNode::Switch(_) | SimNode::Ca(_) => 0,
        };
        SimNode::make(kind, guid, ports, name, vfs, false)
    }
    fn node(&self) -> &dyn dr::Node {
        match self {
            SimNode::Switch(s) => &s.model,
            SimNode::Ca(c) => &c.model,
            SimNode::Hypervisor(h) => &h.pf.model,
        }
    }
    fn process(&mut self, smp: &Smp, port: u8, now_ms: u64) -> Option<Smp> {
        match self {
            SimNode::Switch(s) => s.process(smp, port, now_ms),
            SimNode::Ca(c) => c.process(smp, port, now_ms),
            SimNode::Hypervisor(h) => h.process(smp, port, now_ms),
        }
    }
    /// A cable at `port` came up or went down.
    fn link_event(&mut self, port: u8, up: bool, now_ms: u64) {
        match self {
            SimNode::Switch(s) => s.link_event(port, up, now_ms),
            SimNode::Ca(c) => c.link_event(port, up, now_ms),
            SimNode::Hypervisor(h) => h.pf.link_event(port, up, now_ms),
        }
    }
    /// The next trap due at `now_ms`, if any.
    fn poll_trap(&mut self, now_ms: u64) -> Option<TrapOut> {
        match self {
            SimNode::Switch(s) => s.poll_trap(now_ms),
            SimNode::Ca(c) => c.poll_trap(now_ms),
            SimNode::Hypervisor(h) => h.pf.poll_trap(now_ms),
        }
    }
    /// The PortState of `port` (a hypervisor's: its PF's), if it exists.
    fn port_state(&self, port: u8) -> Option<PortState> {
        let p = usize::from(port);
        match self {
            SimNode::Switch(s) => s.model.ports.get(p).map(|x| x.info.port_state),
            SimNode::Ca(c) => c.model.ports.get(p).map(|x| x.info.port_state),
            SimNode::Hypervisor(h) => h.pf.model.ports.get(p).map(|x| x.info.port_state),
        }
    }
    /// The node's LID (a switch's port 0, a CA's port 1).
    pub fn lid(&self) -> Lid {
        match self {
            SimNode::Switch(s) => s.model.lid(0),
            SimNode::Ca(c) => c.model.lid(1),
            SimNode::Hypervisor(h) => h.lid(),
        }
    }
    /// True when a packet for `lid` that reaches this node is delivered:
    /// a CA's LID, or a hypervisor's PF LID or enabled VF LID.
    pub fn owns(&self, lid: Lid) -> bool {
        match self {
            SimNode::Switch(s) => s.model.lid(0) == lid,
            SimNode::Ca(c) => c.model.lid(1) == lid,
            SimNode::Hypervisor(h) => h.owns(lid),
        }
    }
    /// LIDs of the VMs running on this node (enabled VFs).
    pub fn vm_lids(&self) -> Vec<Lid> {
        match self {
            SimNode::Hypervisor(h) => h
                .vports
                .vfs
                .iter()
                .filter(|v| v.vport_state != PortState::Down)
                .map(|v| v.vport_lid)
                .collect(),
            _ => Vec::new(),
        }
    }
    /// The LFT egress for `lid` (switches; 0xFF elsewhere).
    pub fn lft_port(&self, lid: Lid) -> u8 {
        match self {
            SimNode::Switch(s) => s.model.lft_port(lid),
            SimNode::Ca(_) | SimNode::Hypervisor(_) => DROP_PORT,
        }
    }
}

/// What the fabric counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Cable crossings.
    pub hops: u64,
    /// Crossings that needed directed-route processing.
    pub dr_hops: u64,
    /// SMPs the SMI discarded.
    pub discarded: u64,
    /// SMPs lost on cables.
    pub lost: u64,
    /// LID-routed SMPs dropped because they crossed more than
    /// [`MAX_LID_ROUTED_HOPS`] switches: LFTs that send a LID round in a
    /// loop (a real switch drops such a packet when its lifetime runs out).
    pub expired: u64,
}

/// The most switches a LID-routed packet crosses before the simulator
/// drops it as expired: the longest directed route (IBA 14.2.2), far more
/// than any loop-free path through a fabric the simulator builds.
pub const MAX_LID_ROUTED_HOPS: u8 = 64;

struct Arrival {
    node: usize,
    port: u8,
    smp: Smp,
    /// LRH addresses (0xFFFF/0xFFFF for directed route).
    dlid: u16,
    slid: u16,
    /// Switches it has passed through, LID-routed.
    hops: u8,
}

/// A change to the fabric, applied at a chosen simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricEvent {
    /// The cable at this port fails (both ends go Down).
    LinkDown(usize, u8),
    /// A cable that failed is repaired.
    LinkUp(usize, u8),
    /// A node is removed: every cable of it fails.
    NodeDown(usize),
    /// A removed node is put back (freshly powered: no LID, no tables) and
    /// its cables are repaired.
    NodeUp(usize),
    /// A new cable between two free ports (to attach a node added with
    /// [`Fabric::add_node`], or to add a link).
    Cable((usize, u8), (usize, u8)),
}

// Arrivals are the common case; boxing them would cost an allocation each.
#[allow(clippy::large_enum_variant)]
enum Pending {
    Smp(Arrival),
    Event(FabricEvent),
}

/// The simulated fabric.
pub struct Fabric {
    /// The cabling.
    pub topo: Topology,
    /// The agents, indexed like `topo.nodes`.
    pub nodes: Vec<SimNode>,
    /// The node the SM runs on (a CA).
    pub sm_node: usize,
    cfg: SimConfig,
    /// (time, sequence, slot in `pending`): what happens next.
    queue: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// What the queue's entries carry, in reusable slots (`free`).
    pending: Vec<Option<Pending>>,
    free: Vec<u32>,
    /// Cables that failed, to put back: (port, other end).
    cut: Vec<((usize, u8), (usize, u8))>,
    /// Nodes that may have traps to send.
    trap_nodes: std::collections::BTreeSet<usize>,
    seq: u64,
    now_ns: u64,
    rng: Rng,
    inbox: Vec<Smp>,
    /// Nodes where outside clients are attached (`ibkit fabric serve`):
    /// what reaches them goes to `delivered` instead of the SM's inbox.
    clients: std::collections::BTreeSet<usize>,
    delivered: Vec<Delivery>,
    capture: Option<Vec<(u64, Vec<u8>)>>,
    /// Counters.
    pub stats: FabricStats,
    /// Wall-clock milliseconds the driver spent in each SM phase.
    pub phase_wall_ms: std::collections::BTreeMap<Phase, f64>,
}

/// An SMP that reached a node where an outside client is attached.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// The node.
    pub node: usize,
    /// The LRH source LID (0xFFFF for directed route).
    pub slid: u16,
    /// The SMP.
    pub smp: Smp,
}

/// Builds the fabric `spec` names (see [`Topology::from_spec`]) with
/// `sim`, and runs a subnet manager configured with `sm` on it until the
/// subnet is up or nothing more can happen (see [`Fabric::bring_up`]).
/// Returns the fabric, the SM (its [`Sm::phase`] and [`Sm::error`] say why
/// a bring-up failed) and whether the subnet came up; an error when the
/// spec or the fabric is not valid.
pub fn bring_up(
    spec: &str,
    sim: SimConfig,
    sm: SmConfig,
) -> Result<(Fabric, Sm, bool), FabricError> {
    let topo = Topology::from_spec(spec)?;
    let mut f = Fabric::new(topo, sim)?;
    let mut sm = Sm::new(sm);
    let up = f.bring_up(&mut sm);
    Ok((f, sm, up))
}

/// How a data packet fared through the LFTs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Walk {
    /// Reached the destination after this many switches.
    Delivered(u32),
    /// Dropped (no route) at this node.
    Dropped(usize),
    /// Went round in a loop.
    Loop,
}

/// Why a topology cannot be simulated and managed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// No CA for the SM to run on.
    #[error("the fabric has no CA to run the SM on")]
    NoCa,
    /// A switch wider than a simulated agent.
    #[error(
        "switch {name:?} has {ports} ports; a simulated switch has at most {MAX_SWITCH_PORTS}"
    )]
    TooWide {
        /// The switch.
        name: String,
        /// Its ports.
        ports: u8,
    },
    /// A GUID that is 0 or all ones.
    #[error("node {name:?} has the reserved GUID {guid:#x}")]
    ReservedGuid {
        /// The node.
        name: String,
        /// Its GUID.
        guid: u64,
    },
    /// Two nodes with one GUID.
    #[error("nodes {first:?} and {second:?} have the same GUID {guid:#018x}")]
    SameGuid {
        /// The first holder.
        first: String,
        /// The second.
        second: String,
        /// The GUID.
        guid: u64,
    },
    /// A node beyond the reach of a directed route.
    #[error("node {name:?} is {hops} hops from the SM's node {sm:?}; a directed route reaches 63")]
    TooFar {
        /// The node.
        name: String,
        /// Its distance.
        hops: u32,
        /// The SM's node.
        sm: String,
    },
    /// The spec names no topology.
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// The most ports a simulated switch has (its agent's bounded storage).
pub const MAX_SWITCH_PORTS: u8 = 64;

/// Refuses a fabric the simulator or an SM could not manage: a switch with
/// more ports than [`MAX_SWITCH_PORTS`], a GUID that is 0, all ones or held
/// by two nodes, and a node more than 63 hops from the SM's (no directed
/// route reaches it, IBA 14.2.2).
fn check_simulable(topo: &Topology, sm_node: usize) -> Result<(), FabricError> {
    let mut seen = std::collections::HashMap::new();
    for n in &topo.nodes {
        if n.kind == NodeType::Switch && n.ports > MAX_SWITCH_PORTS {
            return Err(FabricError::TooWide {
                name: n.name.clone(),
                ports: n.ports,
            });
        }
        if n.guid == 0 || n.guid == u64::MAX {
            return Err(FabricError::ReservedGuid {
                name: n.name.clone(),
                guid: n.guid,
            });
        }
        if let Some(other) = seen.insert(n.guid, &n.name) {
            return Err(FabricError::SameGuid {
                first: other.clone(),
                second: n.name.clone(),
                guid: n.guid,
            });
        }
    }
    // Hops from the SM's node, breadth first.
    let mut depth = vec![u32::MAX; topo.nodes.len()];
    depth[sm_node] = 0;
    let mut queue = std::collections::VecDeque::from([sm_node]);
    while let Some(n) = queue.pop_front() {
        for &(m, _) in topo.peer[n].iter().flatten() {
            if depth[m] == u32::MAX {
                depth[m] = depth[n] + 1;
                if depth[m] > 63 {
                    return Err(FabricError::TooFar {
                        name: topo.nodes[m].name.clone(),
                        hops: depth[m],
                        sm: topo.nodes[sm_node].name.clone(),
                    });
                }
                queue.push_back(m);
            }
        }
    }
    Ok(())
}

impl Fabric {
    /// Builds the agents for `topo`, cables up; the SM runs on the first CA.
    /// Refuses what cannot be simulated or managed (see [`MAX_SWITCH_PORTS`]).
    pub fn new(topo: Topology, cfg: SimConfig) -> Result<Fabric, FabricError> {
        let sm_node = topo
            .nodes
            .iter()
            .position(|n| n.kind == NodeType::ChannelAdapter)
            .ok_or(FabricError::NoCa)?;
        check_simulable(&topo, sm_node)?;
        let nodes = topo
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| SimNode::make(n.kind, n.guid, n.ports, &n.name, cfg.vfs, i == sm_node))
            .collect();
        let mut f = Fabric {
            topo,
            nodes,
            sm_node,
            rng: Rng::new(cfg.seed),
            cfg,
            queue: BinaryHeap::new(),
            pending: Vec::new(),
            free: Vec::new(),
            cut: Vec::new(),
            trap_nodes: Default::default(),
            seq: 0,
            now_ns: 0,
            inbox: Vec::new(),
            clients: Default::default(),
            delivered: Vec::new(),
            capture: None,
            stats: FabricStats::default(),
            phase_wall_ms: Default::default(),
        };
        for i in 0..f.nodes.len() {
            for p in 1..=f.topo.nodes[i].ports {
                if f.topo.peer_of(i, p).is_some() {
                    f.nodes[i].link_event(p, true, 0);
                }
            }
        }
        Ok(f)
    }

    /// Records every SMP put on a cable from now on.
    pub fn enable_capture(&mut self) {
        self.capture.get_or_insert_with(Vec::new);
    }

    /// The capture so far as a LINKTYPE_INFINIBAND pcap file.
    pub fn capture_pcap(&self) -> Option<Vec<u8>> {
        self.capture.as_ref().map(|c| crate::pcap::write(c))
    }

    /// Simulated time in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn lost(&mut self) -> bool {
        if self.cfg.loss <= 0.0 {
            return false;
        }
        self.rng.unit_f64() < self.cfg.loss
    }

    /// Puts a directed-route `smp` on the cable of (node, port).
    fn transmit(&mut self, node: usize, port: u8, smp: Smp) {
        self.transmit_lrh(node, port, smp, 0xFFFF, 0xFFFF);
    }

    /// Puts `smp` with LRH (dlid, slid) on the cable of (node, port).
    fn transmit_lrh(&mut self, node: usize, port: u8, smp: Smp, dlid: u16, slid: u16) {
        self.transmit_hops(node, port, smp, dlid, slid, 0);
    }

    /// [`Fabric::transmit_lrh`] for a packet that has passed `hops`
    /// switches already.
    fn transmit_hops(&mut self, node: usize, port: u8, smp: Smp, dlid: u16, slid: u16, hops: u8) {
        if let Some(cap) = self.capture.as_mut() {
            if self.topo.peer_of(node, port).is_some() {
                let addr = crate::pcap::FrameAddr {
                    dlid,
                    slid,
                    dest_qp: 0,
                    src_qp: 0,
                };
                cap.push((self.now_ns, crate::pcap::frame(smp.as_wire(), addr)));
            }
        }
        let Some((peer, pport, at)) = self.cross(node, port, smp.is_directed()) else {
            return;
        };
        self.enqueue(
            at,
            Pending::Smp(Arrival {
                node: peer,
                port: pport,
                smp,
                dlid,
                slid,
                hops,
            }),
        );
    }

    /// An SMP leaves (node, port): counted, maybe lost. Where it arrives
    /// (node, port) and when, unless there is no cable or it was lost.
    fn cross(&mut self, node: usize, port: u8, directed: bool) -> Option<(usize, u8, u64)> {
        let Some((peer, pport)) = self.topo.peer_of(node, port) else {
            self.stats.discarded += 1;
            return None;
        };
        self.stats.hops += 1;
        let mut delay = self.cfg.hop_ns;
        if directed {
            self.stats.dr_hops += 1;
            delay += self.cfg.dr_hop_ns;
        }
        if self.lost() {
            self.stats.lost += 1;
            return None;
        }
        Some((peer, pport, self.now_ns + delay))
    }

    /// Sends the SMP queued in `slot`, which arrived at `node`, on out of
    /// `port`: its queue slot is reused, so a packet passing through a
    /// switch is not copied.
    fn pass_through(&mut self, slot: u32, node: usize, port: u8) {
        if self.capture.is_some() {
            // The capture needs the LRH and the bytes: the plain way.
            if let Some(Pending::Smp(a)) = self.release(slot) {
                let hops = a.hops.saturating_add(1);
                self.transmit_hops(node, port, a.smp, a.dlid, a.slid, hops);
            }
            return;
        }
        let directed = matches!(
            &self.pending[slot as usize],
            Some(Pending::Smp(a)) if a.smp.is_directed()
        );
        match self.cross(node, port, directed) {
            Some((peer, pport, at)) => {
                if let Some(Pending::Smp(a)) = self.pending[slot as usize].as_mut() {
                    a.node = peer;
                    a.port = pport;
                    a.hops = a.hops.saturating_add(1);
                }
                self.seq += 1;
                self.queue.push(Reverse((at, self.seq, slot)));
            }
            None => {
                self.release(slot);
            }
        }
    }

    /// Empties `slot` for reuse; what it held.
    fn release(&mut self, slot: u32) -> Option<Pending> {
        let p = self.pending.get_mut(slot as usize).and_then(Option::take);
        if p.is_some() {
            self.free.push(slot);
        }
        p
    }

    /// Queues `p` to happen at simulated time `at_ns`.
    fn enqueue(&mut self, at_ns: u64, p: Pending) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(i) => {
                self.pending[i as usize] = Some(p);
                i
            }
            None => {
                self.pending.push(Some(p));
                (self.pending.len() - 1) as u32
            }
        };
        self.queue.push(Reverse((at_ns, self.seq, slot)));
    }

    /// Adds a powered, uncabled node (cable it with [`FabricEvent::Cable`]);
    /// a one-port CA becomes a hypervisor when the fabric has VFs.
    pub fn add_node(&mut self, kind: NodeType, ports: u8, guid: u64, name: &str) -> usize {
        let i = self
            .topo
            .add_node(kind, ports, guid, name.to_string(), None);
        self.nodes
            .push(SimNode::make(kind, guid, ports, name, self.cfg.vfs, false));
        i
    }

    /// Applies `event` at simulated time `at_ns`.
    pub fn schedule(&mut self, at_ns: u64, event: FabricEvent) {
        self.enqueue(at_ns.max(self.now_ns), Pending::Event(event));
    }

    fn link_event(&mut self, node: usize, port: u8, up: bool) {
        let now_ms = self.now_ns / 1_000_000;
        self.nodes[node].link_event(port, up, now_ms);
        self.trap_nodes.insert(node);
    }

    fn apply(&mut self, e: FabricEvent) {
        match e {
            FabricEvent::LinkDown(n, p) => {
                if let Some((m, q)) = self.topo.peer_of(n, p) {
                    self.topo.peer[n][usize::from(p)] = None;
                    self.topo.peer[m][usize::from(q)] = None;
                    self.cut.push(((n, p), (m, q)));
                    self.link_event(n, p, false);
                    self.link_event(m, q, false);
                }
            }
            FabricEvent::LinkUp(n, p) => {
                if let Some(k) = self
                    .cut
                    .iter()
                    .position(|&(a, b)| a == (n, p) || b == (n, p))
                {
                    let (a, b) = self.cut.swap_remove(k);
                    if self.topo.connect(a, b).is_ok() {
                        self.link_event(a.0, a.1, true);
                        self.link_event(b.0, b.1, true);
                    }
                }
            }
            FabricEvent::Cable(a, b) => {
                if self.topo.connect(a, b).is_ok() {
                    self.link_event(a.0, a.1, true);
                    self.link_event(b.0, b.1, true);
                }
            }
            FabricEvent::NodeDown(n) => {
                for p in 1..=self.topo.nodes[n].ports {
                    self.apply(FabricEvent::LinkDown(n, p));
                }
            }
            FabricEvent::NodeUp(n) => {
                // Freshly powered: a new agent with nothing set.
                let t = &self.topo.nodes[n];
                self.nodes[n] = self.nodes[n].repowered(t.kind, t.guid, t.ports, &t.name);
                let ports: Vec<u8> = self
                    .cut
                    .iter()
                    .filter_map(|&(a, b)| {
                        if a.0 == n {
                            Some(a.1)
                        } else if b.0 == n {
                            Some(b.1)
                        } else {
                            None
                        }
                    })
                    .collect();
                for p in ports {
                    self.apply(FabricEvent::LinkUp(n, p));
                }
            }
        }
    }

    /// Hands `smp`, arrived at (node, port), to the node's agent and returns
    /// its response; a port the SMP sets Down retrains (see
    /// [`Fabric::retrain_if_downed`]).
    fn deliver(&mut self, node: usize, port: u8, smp: &Smp, now_ms: u64) -> Option<Smp> {
        let watch = self.watch_set_down(node, smp, port);
        let resp = self.nodes[node].process(smp, port, now_ms);
        self.retrain_if_downed(node, watch);
        resp
    }

    /// The cabled port a Set(PortInfo) addresses, with its state before.
    fn watch_set_down(&self, node: usize, smp: &Smp, arrival: u8) -> Option<(u8, PortState)> {
        if smp.method() != mad_core::Method::Set
            || smp.attribute_id() != mad_core::attr::AttributeId::PortInfo
        {
            return None;
        }
        let mut port = (smp.attribute_modifier() & 0xFF) as u8;
        if port == 0 && !matches!(self.nodes[node], SimNode::Switch(_)) {
            port = arrival;
        }
        self.topo.peer_of(node, port)?;
        Some((port, self.nodes[node].port_state(port)?))
    }

    /// A port the SM set Down drops its link; with LinkDownDefaultState
    /// Polling the link retrains at once, so both ends come back in Init
    /// (the "ports to Init" step of a static reconfiguration).
    fn retrain_if_downed(&mut self, node: usize, watch: Option<(u8, PortState)>) {
        let Some((port, before)) = watch else { return };
        if before == PortState::Down || self.nodes[node].port_state(port) != Some(PortState::Down) {
            return;
        }
        if let Some((m, q)) = self.topo.peer_of(node, port) {
            self.link_event(m, q, false);
            self.link_event(m, q, true);
            self.link_event(node, port, true);
        }
    }

    /// Sends the traps that are due from the nodes that had link events.
    fn send_traps(&mut self) {
        let now_ms = self.now_ns / 1_000_000;
        let nodes: Vec<usize> = std::mem::take(&mut self.trap_nodes).into_iter().collect();
        for n in nodes {
            while let Some(t) = self.nodes[n].poll_trap(now_ms) {
                if self.cfg.traps {
                    self.route_out(n, t.port, t.smp, t.dlid.0, t.slid.0);
                }
            }
        }
    }

    /// A LID-routed SMP leaves node `n` (from its agent, at `port` for a
    /// CA; a switch's goes by its LFT).
    fn route_out(&mut self, n: usize, port: u8, smp: Smp, dlid: u16, slid: u16) {
        let egress = match &self.nodes[n] {
            SimNode::Switch(s) => s.model.lft_port(Lid(dlid)),
            _ => port.max(1),
        };
        if egress == 0 || egress == DROP_PORT {
            self.stats.discarded += 1;
            return;
        }
        self.transmit_lrh(n, egress, smp, dlid, slid);
    }

    /// Sends an SMP the SM handed out from the SM's port: LID-routed to its
    /// destination LID, or by directed route.
    pub fn send(&mut self, t: Transmit) {
        match t.dlid {
            Some(dlid) => {
                let node = self.sm_node;
                let slid = self.nodes[node].lid().0;
                if dlid == Lid(slid) {
                    let now_ms = self.now_ns / 1_000_000;
                    if let Some(r) = self.nodes[node].process(&t.smp, 1, now_ms) {
                        self.inbox.push(r);
                    }
                } else {
                    self.transmit_lrh(node, 1, t.smp, dlid.0, slid);
                }
            }
            None => self.send_from_sm(t.smp),
        }
    }

    /// Sends a directed-route SMP from the SM's port.
    pub fn send_from_sm(&mut self, mut smp: Smp) {
        let node = self.sm_node;
        match dr::originate(&mut smp, self.nodes[node].node(), 1) {
            Ok(false) => self.transmit(node, 1, smp),
            Ok(true) => {
                // Zero hops: the SM's own SMA answers.
                let now_ms = self.now_ns / 1_000_000;
                if let Some(mut r) = self.nodes[node].process(&smp, 1, now_ms) {
                    if dr::originate(&mut r, self.nodes[node].node(), 1) == Ok(true) {
                        self.inbox.push(r);
                    }
                }
            }
            Err(_) => self.stats.discarded += 1,
        }
    }

    /// Processes the next arrival; false when nothing is in flight.
    ///
    /// A packet passing through a switch (a directed-route hop, or a
    /// LID-routed packet for a LID the switch does not own) is sent on
    /// where it lies in the queue; only a packet that ends here is taken
    /// out.
    pub fn step(&mut self) -> bool {
        let Some(Reverse((t, _, slot))) = self.queue.pop() else {
            return false;
        };
        self.now_ns = self.now_ns.max(t);
        let Some(Some(Pending::Smp(a))) = self.pending.get_mut(slot as usize) else {
            if let Some(Pending::Event(e)) = self.release(slot) {
                self.apply(e);
            }
            return true;
        };
        let (node, port, dlid, hops) = (a.node, a.port, a.dlid, a.hops);
        if a.smp.is_directed() {
            let d = dr::on_arrival(&mut a.smp, self.nodes[node].node(), port);
            if let Disposition::Forward(out) = d {
                self.pass_through(slot, node, out);
            } else if let Some(Pending::Smp(a)) = self.release(slot) {
                self.directed_end(node, port, a.smp, d);
            }
        } else if self.nodes[node].owns(Lid(dlid)) || dlid == 0xFFFF {
            if let Some(Pending::Smp(a)) = self.release(slot) {
                self.lid_routed_end(node, port, a.smp, a.slid);
            }
        } else {
            let out = self.nodes[node].lft_port(Lid(dlid));
            if out == 0 || out == DROP_PORT {
                // Not a switch, or no route.
                self.stats.discarded += 1;
                self.release(slot);
            } else if hops >= MAX_LID_ROUTED_HOPS {
                // Round in a loop: its lifetime has run out.
                self.stats.expired += 1;
                self.stats.discarded += 1;
                self.release(slot);
            } else {
                self.pass_through(slot, node, out);
            }
        }
        true
    }

    /// A directed-route SMP whose disposition at (node, port) is `d`, any
    /// but Forward: a response reaches its listener, a request its agent,
    /// whose response starts back along the path.
    fn directed_end(&mut self, node: usize, port: u8, smp: Smp, d: Disposition) {
        let now_ms = self.now_ns / 1_000_000;
        match d {
            Disposition::Deliver if smp.direction() => self.hand_over(node, smp, 0xFFFF),
            Disposition::Deliver => {
                if let Some(mut r) = self.deliver(node, port, &smp, now_ms) {
                    match dr::originate(&mut r, self.nodes[node].node(), port) {
                        Ok(false) => self.transmit(node, port, r),
                        Ok(true) => self.hand_over(node, r, 0xFFFF),
                        Err(_) => self.stats.discarded += 1,
                    }
                }
            }
            Disposition::Forward(_) | Disposition::ForwardByLid(_) | Disposition::Discard(_) => {
                self.stats.discarded += 1
            }
        }
    }

    /// A LID-routed SMP for a LID `node` owns arrived at `port`: a response
    /// or trap reaches its listener, a request the agent, whose response
    /// goes back LID-routed to `slid`.
    fn lid_routed_end(&mut self, node: usize, port: u8, smp: Smp, slid: u16) {
        if (node == self.sm_node || self.clients.contains(&node))
            && matches!(
                smp.method(),
                mad_core::Method::GetResp | mad_core::Method::Trap
            )
        {
            self.hand_over(node, smp, slid);
            return;
        }
        let now_ms = self.now_ns / 1_000_000;
        if let Some(r) = self.deliver(node, port, &smp, now_ms) {
            let me = self.nodes[node].lid().0;
            self.route_out(node, port, r, slid, me);
        }
    }

    /// Responses that reached the SM since the last call.
    pub fn take_inbox(&mut self) -> Vec<Smp> {
        std::mem::take(&mut self.inbox)
    }

    /// Hands an SMP that reached `node` to whoever listens there: an outside
    /// client, else the SM (on its node), else nobody (discarded).
    fn hand_over(&mut self, node: usize, smp: Smp, slid: u16) {
        if self.clients.contains(&node) {
            self.delivered.push(Delivery { node, slid, smp });
        } else if node == self.sm_node {
            self.inbox.push(smp);
        } else {
            self.stats.discarded += 1;
        }
    }

    /// Attaches an outside client (an SM or a diagnostic served through
    /// ibsim's protocol) at CA `node`: SMPs it sends start there, and what
    /// reaches the node is kept for [`Fabric::take_delivered`].
    pub fn attach(&mut self, node: usize) {
        self.clients.insert(node);
    }

    /// Detaches the clients of `node`.
    pub fn detach(&mut self, node: usize) {
        self.clients.remove(&node);
    }

    /// SMPs that reached attached clients since the last call.
    pub fn take_delivered(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.delivered)
    }

    /// Sends `smp` as a client at `node` would, from a CA's port 1 or a
    /// switch's management port 0: by directed route when `dlid` is 0xFFFF,
    /// else LID-routed to `dlid` (from a switch, through its LFT). Returns
    /// false (and sends nothing) when it cannot leave the node.
    pub fn inject(&mut self, node: usize, mut smp: Smp, dlid: u16) -> bool {
        let now_ms = self.now_ns / 1_000_000;
        let switch = matches!(self.nodes[node], SimNode::Switch(_));
        let home = if switch { 0 } else { 1 };
        if dlid != 0xFFFF || !smp.is_directed() {
            let me = self.nodes[node].lid().0;
            if self.nodes[node].owns(Lid(dlid)) {
                if let Some(r) = self.nodes[node].process(&smp, home, now_ms) {
                    self.hand_over(node, r, me);
                }
            } else {
                self.route_out(node, 1, smp, dlid, me);
            }
            return true;
        }
        // A switch's SMI sends a directed-route SMP out of the path's
        // first port; a CA's out of its own port.
        let out = if switch && smp.hop_count() > 0 {
            smp.initial_path[1]
        } else {
            1
        };
        match dr::originate(&mut smp, self.nodes[node].node(), out) {
            Ok(false) => self.transmit(node, out, smp),
            Ok(true) => {
                // Zero hops: the node's own agent answers.
                if let Some(mut r) = self.nodes[node].process(&smp, home, now_ms) {
                    if dr::originate(&mut r, self.nodes[node].node(), out) == Ok(true) {
                        self.hand_over(node, r, 0xFFFF);
                    }
                }
            }
            Err(_) => {
                self.stats.discarded += 1;
                return false;
            }
        }
        true
    }

    /// Processes every SMP in flight and every trap due, until nothing is
    /// left to do (simulated time moves on as far as that takes).
    pub fn run_to_quiescence(&mut self) {
        loop {
            if !self.trap_nodes.is_empty() {
                self.send_traps();
            }
            if !self.step() && self.trap_nodes.is_empty() {
                return;
            }
        }
    }

    /// What `node`'s agent answers to a local Get of `attr` (modifier `am`)
    /// arriving at `port`: the attribute's 64 bytes, as a client on the
    /// node reads them at attach time.
    pub fn local_get(
        &mut self,
        node: usize,
        port: u8,
        attr: mad_core::attr::AttributeId,
        am: u32,
    ) -> Option<[u8; 64]> {
        let path = mad_core::DrPath::new();
        let smp = Smp::directed(&path, mad_core::Method::Get, attr, am, 0, mad_core::MKey(0));
        let now_ms = self.now_ns / 1_000_000;
        let r = self.nodes[node].process(&smp, port, now_ms)?;
        if r.status().0 != 0 {
            return None;
        }
        let mut d = [0u8; 64];
        d.copy_from_slice(&r.as_wire()[64..128]);
        Some(d)
    }

    /// Claims (or releases) the SM role on CA `node`'s port 1: the IsSM bit
    /// of its CapabilityMask, which SMs look for when they discover.
    pub fn set_is_sm(&mut self, node: usize, on: bool) {
        use mad_core::attr::CapabilityMask;
        let info = match &mut self.nodes[node] {
            SimNode::Ca(c) => c.model.ports.get_mut(1).map(|p| &mut p.info),
            SimNode::Hypervisor(h) => h.pf.model.ports.get_mut(1).map(|p| &mut p.info),
            SimNode::Switch(s) => s.model.ports.get_mut(0).map(|p| &mut p.info),
        };
        if let Some(i) = info {
            i.capability_mask.set(CapabilityMask::IS_SM, on);
        }
    }

    /// Runs `sm` against this fabric until the subnet is up or nothing more
    /// can happen; returns whether it came up.
    pub fn bring_up(&mut self, sm: &mut Sm) -> bool {
        self.run(sm)
    }

    /// Runs `sm` until it is idle (every queued change applied) or nothing
    /// more can happen; returns whether the subnet is up with nothing pending.
    pub fn run(&mut self, sm: &mut Sm) -> bool {
        self.run_for(sm, None)
    }

    /// Runs `sm` and the fabric until simulated time `t_ns`: scheduled
    /// events happen, traps are sent, light sweeps fire. Returns whether the
    /// SM is idle at the end.
    pub fn run_until(&mut self, sm: &mut Sm, t_ns: u64) -> bool {
        self.run_for(sm, Some(t_ns))
    }

    fn run_for(&mut self, sm: &mut Sm, until: Option<u64>) -> bool {
        let mut phase = sm.phase();
        let mut since = std::time::Instant::now();
        let r = self.run_inner(sm, &mut phase, &mut since, until);
        *self.phase_wall_ms.entry(phase).or_default() += since.elapsed().as_secs_f64() * 1e3;
        r
    }

    fn run_inner(
        &mut self,
        sm: &mut Sm,
        phase: &mut Phase,
        since: &mut std::time::Instant,
        until: Option<u64>,
    ) -> bool {
        loop {
            if sm.phase() != *phase {
                *self.phase_wall_ms.entry(*phase).or_default() +=
                    since.elapsed().as_secs_f64() * 1e3;
                *phase = sm.phase();
                *since = std::time::Instant::now();
            }
            let now_ms = self.now_ns / 1_000_000;
            while let Some(t) = sm.poll_transmit(now_ms) {
                self.send(t);
            }
            if !self.trap_nodes.is_empty() {
                self.send_traps();
            }
            let inbox = self.take_inbox();
            let answered = !inbox.is_empty();
            for r in inbox {
                sm.handle_response(&r, self.now_ns / 1_000_000);
            }
            if answered {
                // What the answers released goes out before time moves on.
                continue;
            }
            if sm.phase() == Phase::Failed {
                return false;
            }
            let next_event = self.queue.peek().map(|Reverse((t, _, _))| *t);
            let next_timer = sm.poll_timeout().map(|ms| ms * 1_000_000);
            match until {
                None if sm.is_idle() => return true,
                Some(end) => {
                    let next = match (next_event, next_timer) {
                        (Some(e), Some(t)) => Some(e.min(t)),
                        (e, t) => e.or(t),
                    };
                    if next.is_none_or(|n| n > end) {
                        self.now_ns = self.now_ns.max(end);
                        return sm.is_idle();
                    }
                }
                None => {}
            }
            match (next_event, next_timer) {
                (Some(e), Some(t)) if t < e => {
                    self.now_ns = self.now_ns.max(t);
                    sm.handle_timeout(self.now_ns / 1_000_000);
                }
                (Some(_), _) => {
                    self.step();
                }
                (None, Some(t)) => {
                    self.now_ns = self.now_ns.max(t);
                    sm.handle_timeout(self.now_ns / 1_000_000);
                }
                (None, None) => {
                    if self.inbox.is_empty() && !sm.has_queued() {
                        return sm.phase() == Phase::Done;
                    }
                }
            }
        }
    }

    /// Forwards a data packet from the CA `src` towards `dlid` through the
    /// installed LFTs.
    pub fn walk(&self, src: usize, dlid: Lid) -> Walk {
        match self.topo.peer_of(src, 1) {
            Some((node, _)) => self.forward(node, dlid, |_, _| {}),
            None => Walk::Dropped(src),
        }
    }

    /// The forwarding core of every walk: a data packet for `dlid` that has
    /// reached `node` follows the installed LFTs. `hop` is called at each
    /// node it passes with (node, egress port): a switch's LFT entry (0:
    /// the switch itself; 0xFF: unrouted), 0 at the CA where it ends. A
    /// walk through more switches than the fabric has is a loop.
    fn forward(&self, mut node: usize, dlid: Lid, mut hop: impl FnMut(usize, u8)) -> Walk {
        let limit = self.nodes.len() as u32;
        let mut switches = 0u32;
        loop {
            let SimNode::Switch(s) = &self.nodes[node] else {
                hop(node, 0);
                return if self.nodes[node].owns(dlid) {
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
                return if s.model.lid(0) == dlid {
                    Walk::Delivered(switches)
                } else {
                    Walk::Dropped(node)
                };
            }
            match self.topo.peer_of(node, p) {
                Some((m, _)) if p != DROP_PORT => node = m,
                _ => return Walk::Dropped(node),
            }
        }
    }
}

impl Fabric {
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
            Some((node, _)) => self.forward(node, dlid, |n, p| path.push((n, p))),
            None => Walk::Dropped(src),
        };
        (path, walk)
    }
}

impl Fabric {
    /// Forwards a packet that starts at switch `s` towards `dlid`.
    pub fn walk_from_switch(&self, s: usize, dlid: Lid) -> Walk {
        self.forward(s, dlid, |_, _| {})
    }
}
