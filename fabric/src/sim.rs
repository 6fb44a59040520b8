//! The discrete-event fabric: every node runs `smi::dr` and `smi::sma`,
//! every cable carries SMPs with a per-hop delay `k` and an extra delay `r`
//! for each hop that needs directed-route processing (the cost model of the
//! vSwitch paper), and SMPs may be lost at a configured rate.

use crate::topology::Topology;
use mad_core::attr::NodeType;
use mad_core::{Lid, Smp};
use smi::dr::{self, Disposition};
use smi::sm::{Phase, Sm};
use smi::sma::hypervisor::Hypervisor;
use smi::sma::{CaSma, NodeSpec, SwitchSma};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

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
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            hop_ns: 1_000,
            dr_hop_ns: 2_000,
            loss: 0.0,
            seed: 1,
            vfs: 0,
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
                .filter(|v| v.vport_state != mad_core::attr::PortState::Down)
                .map(|v| v.vport_lid)
                .collect(),
            _ => Vec::new(),
        }
    }
    /// The LFT egress for `lid` (switches; 0xFF elsewhere).
    pub fn lft_port(&self, lid: Lid) -> u8 {
        match self {
            SimNode::Switch(s) => s.model.lft_port(lid),
            SimNode::Ca(_) | SimNode::Hypervisor(_) => 0xFF,
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
}

struct Arrival {
    node: usize,
    port: u8,
    smp: Smp,
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
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    pending: HashMap<u64, Arrival>,
    seq: u64,
    now_ns: u64,
    rng: u64,
    inbox: Vec<Smp>,
    capture: Option<Vec<(u64, Vec<u8>)>>,
    /// Counters.
    pub stats: FabricStats,
    /// Wall-clock milliseconds the driver spent in each SM phase.
    pub phase_wall_ms: std::collections::BTreeMap<Phase, f64>,
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

impl Fabric {
    /// Builds the agents for `topo`, cables up; the SM runs on the first CA.
    pub fn new(topo: Topology, cfg: SimConfig) -> Result<Fabric, String> {
        let sm_node = topo
            .nodes
            .iter()
            .position(|n| n.kind == NodeType::ChannelAdapter)
            .ok_or("the fabric has no CA to run the SM on")?;
        let mut nodes = Vec::with_capacity(topo.nodes.len());
        for (i, n) in topo.nodes.iter().enumerate() {
            nodes.push(match n.kind {
                NodeType::Switch => SimNode::Switch(Box::new(SwitchSma::new(&NodeSpec::switch(
                    n.guid, n.ports, &n.name,
                )))),
                _ if cfg.vfs > 0 && i != sm_node && n.ports == 1 => {
                    SimNode::Hypervisor(Box::new(Hypervisor::new(n.guid, cfg.vfs, &n.name)))
                }
                _ => {
                    let mut spec = NodeSpec::ca(n.guid, n.ports, &n.name);
                    spec.is_sm = i == sm_node;
                    SimNode::Ca(Box::new(CaSma::new(&spec)))
                }
            });
        }
        let mut f = Fabric {
            topo,
            nodes,
            sm_node,
            rng: cfg.seed | 1,
            cfg,
            queue: BinaryHeap::new(),
            pending: HashMap::new(),
            seq: 0,
            now_ns: 0,
            inbox: Vec::new(),
            capture: None,
            stats: FabricStats::default(),
            phase_wall_ms: Default::default(),
        };
        for i in 0..f.nodes.len() {
            for p in 1..=f.topo.nodes[i].ports {
                if f.topo.peer_of(i, p).is_some() {
                    match &mut f.nodes[i] {
                        SimNode::Switch(s) => s.link_event(p, true, 0),
                        SimNode::Ca(c) => c.link_event(p, true, 0),
                        SimNode::Hypervisor(h) => h.pf.link_event(p, true, 0),
                    }
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
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        ((self.rng >> 11) as f64 / (1u64 << 53) as f64) < self.cfg.loss
    }

    /// Puts `smp` on the cable of (node, port).
    fn transmit(&mut self, node: usize, port: u8, smp: Smp) {
        let Some((peer, pport)) = self.topo.peer_of(node, port) else {
            self.stats.discarded += 1;
            return;
        };
        self.stats.hops += 1;
        if let Some(cap) = self.capture.as_mut() {
            let addr = crate::pcap::FrameAddr {
                dlid: 0xFFFF,
                slid: 0xFFFF,
                dest_qp: 0,
                src_qp: 0,
            };
            cap.push((self.now_ns, crate::pcap::frame(smp.as_wire(), addr)));
        }
        let mut delay = self.cfg.hop_ns;
        if smp.is_directed() {
            self.stats.dr_hops += 1;
            delay += self.cfg.dr_hop_ns;
        }
        if self.lost() {
            self.stats.lost += 1;
            return;
        }
        self.seq += 1;
        self.queue.push(Reverse((self.now_ns + delay, self.seq)));
        self.pending.insert(
            self.seq,
            Arrival {
                node: peer,
                port: pport,
                smp,
            },
        );
    }

    /// Sends an SMP from the SM's port.
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
    pub fn step(&mut self) -> bool {
        let Some(Reverse((t, seq))) = self.queue.pop() else {
            return false;
        };
        self.now_ns = self.now_ns.max(t);
        let Some(Arrival {
            node,
            port,
            mut smp,
        }) = self.pending.remove(&seq)
        else {
            return true;
        };
        let now_ms = self.now_ns / 1_000_000;
        if !smp.is_directed() {
            // LID-routed traffic is not generated by this SM yet.
            self.stats.discarded += 1;
            return true;
        }
        match dr::on_arrival(&mut smp, self.nodes[node].node(), port) {
            Disposition::Deliver if smp.direction() => {
                if node == self.sm_node {
                    self.inbox.push(smp);
                } else {
                    self.stats.discarded += 1;
                }
            }
            Disposition::Deliver => {
                if let Some(mut r) = self.nodes[node].process(&smp, port, now_ms) {
                    match dr::originate(&mut r, self.nodes[node].node(), port) {
                        Ok(false) => self.transmit(node, port, r),
                        Ok(true) if node == self.sm_node => self.inbox.push(r),
                        _ => self.stats.discarded += 1,
                    }
                }
            }
            Disposition::Forward(p) => self.transmit(node, p, smp),
            Disposition::ForwardByLid(_) | Disposition::Discard(_) => self.stats.discarded += 1,
        }
        true
    }

    /// Responses that reached the SM since the last call.
    pub fn take_inbox(&mut self) -> Vec<Smp> {
        std::mem::take(&mut self.inbox)
    }

    /// Runs `sm` against this fabric until the subnet is up or nothing more
    /// can happen; returns whether it came up.
    pub fn bring_up(&mut self, sm: &mut Sm) -> bool {
        self.run(sm)
    }

    /// Runs `sm` until it is idle (every queued change applied) or nothing
    /// more can happen; returns whether the subnet is up with nothing pending.
    pub fn run(&mut self, sm: &mut Sm) -> bool {
        let mut phase = sm.phase();
        let mut since = std::time::Instant::now();
        let r = self.run_inner(sm, &mut phase, &mut since);
        *self.phase_wall_ms.entry(phase).or_default() += since.elapsed().as_secs_f64() * 1e3;
        r
    }

    fn run_inner(
        &mut self,
        sm: &mut Sm,
        phase: &mut Phase,
        since: &mut std::time::Instant,
    ) -> bool {
        loop {
            if sm.phase() != *phase {
                *self.phase_wall_ms.entry(*phase).or_default() +=
                    since.elapsed().as_secs_f64() * 1e3;
                *phase = sm.phase();
                *since = std::time::Instant::now();
            }
            let now_ms = self.now_ns / 1_000_000;
            while let Some(smp) = sm.poll_transmit(now_ms) {
                self.send_from_sm(smp);
            }
            for r in self.take_inbox() {
                sm.handle_response(&r, self.now_ns / 1_000_000);
            }
            if sm.phase() == Phase::Failed {
                return false;
            }
            if sm.is_idle() {
                return true;
            }
            let next_event = self.queue.peek().map(|Reverse((t, _))| *t);
            let next_timer = sm.poll_timeout().map(|ms| ms * 1_000_000);
            match (next_event, next_timer) {
                (Some(e), Some(t)) if t < e => {
                    self.now_ns = t;
                    sm.handle_timeout(t / 1_000_000);
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
        let Some((mut node, _)) = self.topo.peer_of(src, 1) else {
            return Walk::Dropped(src);
        };
        let limit = self.topo.nodes.len() as u32;
        let mut switches = 0u32;
        loop {
            match &self.nodes[node] {
                SimNode::Ca(_) | SimNode::Hypervisor(_) => {
                    return if self.nodes[node].owns(dlid) {
                        Walk::Delivered(switches)
                    } else {
                        Walk::Dropped(node)
                    };
                }
                SimNode::Switch(s) => {
                    switches += 1;
                    if switches > limit {
                        return Walk::Loop;
                    }
                    let p = s.model.lft_port(dlid);
                    if p == 0 {
                        return if s.model.lid(0) == dlid {
                            Walk::Delivered(switches)
                        } else {
                            Walk::Dropped(node)
                        };
                    }
                    match self.topo.peer_of(node, p) {
                        Some((m, _)) if p != 0xFF => node = m,
                        _ => return Walk::Dropped(node),
                    }
                }
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
            .filter(|(_, n)| matches!(n, SimNode::Switch(_)))
            .map(|(i, n)| (i, (0..=max_lid).map(|l| n.lft_port(Lid(l))).collect()))
            .collect()
    }
}

/// The outcome of walking every CA to every LID through the LFTs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verify {
    /// (source CA, destination LID) pairs delivered.
    pub reachable: u64,
    /// Pairs dropped.
    pub unreachable: u64,
    /// Pairs that looped.
    pub loops: u64,
    /// (source switch, destination LID) pairs a switch cannot forward.
    pub switch_unreachable: u64,
}

impl Fabric {
    /// Walks from every CA to every other node's LID and every VM's LID.
    pub fn verify(&self) -> Verify {
        let mut lids: Vec<Lid> = self.nodes.iter().map(|n| n.lid()).collect();
        let mut owner: Vec<usize> = (0..self.nodes.len()).collect();
        for (i, n) in self.nodes.iter().enumerate() {
            for l in n.vm_lids() {
                lids.push(l);
                owner.push(i);
            }
        }
        let mut v = Verify::default();
        for src in 0..self.nodes.len() {
            if matches!(self.nodes[src], SimNode::Switch(_)) {
                continue;
            }
            for (j, &lid) in lids.iter().enumerate() {
                if owner[j] == src {
                    continue;
                }
                match self.walk(src, lid) {
                    Walk::Delivered(_) => v.reachable += 1,
                    Walk::Dropped(_) => v.unreachable += 1,
                    Walk::Loop => v.loops += 1,
                }
            }
        }
        // Every switch must forward every assigned LID, switch LIDs included.
        for s in 0..self.nodes.len() {
            if !matches!(self.nodes[s], SimNode::Switch(_)) {
                continue;
            }
            for (j, &lid) in lids.iter().enumerate() {
                if owner[j] != s && !matches!(self.walk_from_switch(s, lid), Walk::Delivered(_)) {
                    v.switch_unreachable += 1;
                }
            }
        }
        v
    }

    /// Walks from every CA (and every switch) to each of `lids` only: the
    /// check after a change that moved just these LIDs.
    pub fn verify_lids(&self, lids: &[Lid]) -> Verify {
        let mut v = Verify::default();
        for (src, n) in self.nodes.iter().enumerate() {
            for &lid in lids {
                if n.owns(lid) {
                    continue;
                }
                match n {
                    SimNode::Switch(_) => {
                        if !matches!(self.walk_from_switch(src, lid), Walk::Delivered(_)) {
                            v.switch_unreachable += 1;
                        }
                    }
                    _ => match self.walk(src, lid) {
                        Walk::Delivered(_) => v.reachable += 1,
                        Walk::Dropped(_) => v.unreachable += 1,
                        Walk::Loop => v.loops += 1,
                    },
                }
            }
        }
        v
    }

    /// Forwards a packet that starts at switch `s` towards `dlid`.
    pub fn walk_from_switch(&self, s: usize, dlid: Lid) -> Walk {
        let limit = self.topo.nodes.len() as u32;
        let mut node = s;
        let mut switches = 0u32;
        loop {
            match &self.nodes[node] {
                SimNode::Ca(_) | SimNode::Hypervisor(_) => {
                    return if self.nodes[node].owns(dlid) {
                        Walk::Delivered(switches)
                    } else {
                        Walk::Dropped(node)
                    };
                }
                SimNode::Switch(sw) => {
                    switches += 1;
                    if switches > limit {
                        return Walk::Loop;
                    }
                    let p = sw.model.lft_port(dlid);
                    if p == 0 {
                        return if sw.model.lid(0) == dlid {
                            Walk::Delivered(switches)
                        } else {
                            Walk::Dropped(node)
                        };
                    }
                    match self.topo.peer_of(node, p) {
                        Some((m, _)) if p != 0xFF => node = m,
                        _ => return Walk::Dropped(node),
                    }
                }
            }
        }
    }
}
