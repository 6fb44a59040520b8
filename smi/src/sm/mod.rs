//! The subnet manager as a sans-IO state machine (in the manner of
//! quinn-proto): the caller feeds it responses and the time, and polls it
//! for SMPs to send and for its next timer. It performs no I/O, reads no
//! clock and spawns no thread, so the simulator, a umad port or a test can
//! drive it alike.
//!
//! A bring-up runs these phases: discovery by directed-route Get(NodeInfo),
//! Get(PortInfo) and Get(SwitchInfo) with a window of outstanding SMPs and
//! retransmission; LID assignment by Set(PortInfo); routing by the engine
//! [`SmConfig::routing`] names (min-hop, up*/down* or fat-tree);
//! distribution (Set(SwitchInfo) with LinearFDBTop, then the LFT blocks in
//! use); and port activation (every linked port to Armed, then Active).
//! Once the subnet is up, [`sweep`] keeps it right as links and nodes come
//! and go, and [`vswitch`] starts, stops and migrates VMs.

pub mod routing;
pub mod sweep;
pub mod updn;
pub mod vswitch;

use crate::dr;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec;
use alloc::vec::Vec;
use mad_core::attr::*;
use mad_core::{DrPath, Lid, MKey, Method, Smp};
use routing::{Graph, PortTo};
pub use vswitch::{LidPolicy, MigrationPlan, Vm, VmError, VmId};

use alloc::string::String;

/// Settings of a subnet manager.
#[derive(Clone, Debug)]
pub struct SmConfig {
    /// SMPs outstanding at once (1 reproduces OpenSM's controlled BFS).
    pub window: usize,
    /// Milliseconds before an unanswered SMP is sent again.
    pub timeout_ms: u64,
    /// Times an SMP is sent again before its target is given up.
    pub retries: u32,
    /// M_Key put in every SMP.
    pub m_key: MKey,
    /// SubnetTimeOut written to every port.
    pub subnet_time_out: u8,
    /// The routing engine.
    pub routing: Engine,
    /// How hypervisors' VFs get LIDs.
    pub lid_policy: LidPolicy,
    /// Milliseconds between light sweeps once the subnet is up (`None`:
    /// sweep only when a trap arrives).
    pub sweep_interval_ms: Option<u64>,
    /// Static reconfiguration: when a change is assimilated, first take
    /// every CA port's link down so it retrains to Init (no data traffic),
    /// then send the tables, then bring the ports back to Active.
    pub static_reconfig: bool,
    /// Rounds in which the requests of a bring-up phase that were given up
    /// (each after `retries` retransmissions) are sent again, before the SM
    /// stops and names what it could not reach. Until then it neither
    /// routes a partial fabric nor calls it up.
    pub rounds: u32,
}

/// The routing engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Engine {
    /// Shortest paths, balanced over equal-cost ports (OpenSM's minhop).
    #[default]
    MinHop,
    /// Up*/down*: deadlock-free by construction (OpenSM's updn).
    UpDown,
    /// Fat-tree: up*/down* from the top level with d-mod-k spreading upwards.
    FatTree,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 3] = [Engine::MinHop, Engine::UpDown, Engine::FatTree];

    /// The engine's name as OpenSM's `-R` option spells it, and as ibkit
    /// takes it on the command line and writes it in JSON output:
    /// `minhop`, `updn` or `ftree`.
    pub const fn name(self) -> &'static str {
        match self {
            Engine::MinHop => "minhop",
            Engine::UpDown => "updn",
            Engine::FatTree => "ftree",
        }
    }

    /// The engine called `name` (see [`Engine::name`]), or `None`.
    pub fn from_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.name() == name)
    }
}

/// A routing engine: linear forwarding tables for a switch graph.
pub trait RoutingEngine {
    /// `lft[switch][lid]` = egress port (0xFF: unrouted) for LIDs
    /// 0..=`max_lid`, every switch and CA LID of `g` routed.
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>>;
}

/// Shortest paths, balanced over equal-cost ports.
pub struct MinHopEngine;
/// Up*/down* from automatically chosen roots, with shortest-path entries
/// where up*/down* leaves a switch without a way (see [`routing::fill_gaps`]).
pub struct UpDownEngine;
/// Fat-tree: down-set BFS and d-mod-k spreading upwards; on a degraded tree
/// it falls back to [`UpDownEngine`].
pub struct FatTreeEngine;

impl RoutingEngine for MinHopEngine {
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        routing::minhop(g, max_lid)
    }
}

impl RoutingEngine for UpDownEngine {
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        let mut t = updn::route(g, max_lid, &updn::auto_roots(g), updn::Choice::LeastLoaded);
        routing::fill_gaps(g, &mut t);
        t
    }
}

impl RoutingEngine for FatTreeEngine {
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        let t = updn::ftree(g, max_lid, &updn::auto_roots(g));
        // A degraded tree (a cable or switch missing) can leave a switch
        // with no up*/down* way to a destination: then, as OpenSM's ftree
        // falls back to another engine, route the whole fabric up*/down*.
        if complete(g, &t) {
            t
        } else {
            UpDownEngine.route(g, max_lid)
        }
    }
}

impl RoutingEngine for Engine {
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        match self {
            Engine::MinHop => MinHopEngine.route(g, max_lid),
            Engine::UpDown => UpDownEngine.route(g, max_lid),
            Engine::FatTree => FatTreeEngine.route(g, max_lid),
        }
    }
}

impl Default for SmConfig {
    fn default() -> Self {
        SmConfig {
            window: 16,
            timeout_ms: 200,
            retries: 3,
            m_key: MKey(0),
            subnet_time_out: 18,
            routing: Engine::MinHop,
            lid_policy: LidPolicy::Prepopulated,
            sweep_interval_ms: None,
            static_reconfig: false,
            rounds: 8,
        }
    }
}

/// Where a bring-up is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Finding nodes and links.
    Discovery,
    /// Giving every port its LID.
    LidAssignment,
    /// Programming SwitchInfo and the forwarding tables.
    Distribution,
    /// Moving ports to Armed, then Active.
    Activation,
    /// The subnet is up and nothing is pending.
    Done,
    /// Applying a change to the running subnet (a VM started or migrated,
    /// a full reconfiguration).
    Reconfiguration,
    /// Bring-up stopped: see [`Sm::error`].
    Failed,
    /// A sweep of the running subnet: SwitchInfo of every switch, the
    /// ports of those whose PortStateChange is set, and the discovery of
    /// what is new. A change continues through LID assignment, routing,
    /// distribution of the changed blocks and activation of new ports.
    Sweep,
}

/// Why the subnet manager stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SmError {
    /// The subnet needs more unicast LIDs than exist (0x0001–0xBFFF).
    LidSpaceExhausted {
        /// LIDs the subnet needs.
        needed: u32,
        /// Unicast LIDs there are.
        available: u32,
    },
    /// Requests went unanswered through every retry of every round: the
    /// fabric is not whole, and the SM did not route or activate it.
    Unreachable {
        /// What went unanswered, the first [`MAX_UNREACHED_NAMED`].
        unreached: Vec<Unreached>,
        /// How many went unanswered in all.
        count: usize,
    },
}

/// The most [`Unreached`] an [`SmError::Unreachable`] names.
pub const MAX_UNREACHED_NAMED: usize = 8;

/// A request the SM sent, retried and finally gave up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreached {
    /// The attribute asked or set.
    pub attribute: AttributeId,
    /// Get or Set.
    pub method: Method,
    /// GUID of the node it was for, or of the node it went through (a
    /// NodeInfo sent beyond one of its ports); 0 when unknown.
    pub node_guid: u64,
    /// That node's description, when read.
    pub node_description: Option<String>,
    /// The port concerned, where there is one.
    pub port: Option<u8>,
    /// True for a NodeInfo sent beyond `port`: the node there went unseen.
    pub beyond: bool,
}

impl core::fmt::Display for Unreached {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.method.name().unwrap_or("?");
        let a = self.attribute.name().unwrap_or("?");
        write!(f, "{m}({a})")?;
        if self.beyond {
            f.write_str(" beyond")?;
        } else {
            f.write_str(" of")?;
        }
        if let Some(p) = self.port {
            write!(f, " port {p} of")?;
        }
        match &self.node_description {
            Some(d) => write!(f, " {d:?} ({:#018x})", self.node_guid),
            None => write!(f, " node {:#018x}", self.node_guid),
        }
    }
}

impl core::fmt::Display for SmError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SmError::LidSpaceExhausted { needed, available } => write!(
                f,
                "the subnet needs {needed} LIDs but only {available} unicast LIDs exist; nothing was assigned"
            ),
            SmError::Unreachable { unreached, count } => {
                write!(
                    f,
                    "{count} requests went unanswered through every retry; the fabric was not routed or activated: "
                )?;
                for (i, u) in unreached.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{u}")?;
                }
                if *count > unreached.len() {
                    write!(f, "; and {} more", count - unreached.len())?;
                }
                Ok(())
            }
        }
    }
}

impl core::error::Error for SmError {}

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
}

impl SmNode {
    /// True for a switch.
    pub fn is_switch(&self) -> bool {
        self.info.node_type == NodeType::Switch
    }
    /// True for a hypervisor (a CA with VFs).
    pub fn is_hypervisor(&self) -> bool {
        !self.vfs.is_empty()
    }
}

#[derive(Clone, Debug)]
enum Purpose {
    NodeInfo {
        from: Option<(usize, u8)>,
    },
    PortInfo {
        node: usize,
        port: u8,
    },
    SwitchInfo {
        node: usize,
    },
    VirtInfo {
        node: usize,
    },
    NodeDesc {
        node: usize,
    },
    SetVPort,
    SetTopOnly,
    SetLid {
        node: usize,
        port: u8,
    },
    SetTop {
        node: usize,
    },
    SetLft,
    SetState {
        node: usize,
        port: u8,
    },
    SweepSwitchInfo {
        node: usize,
    },
    SweepPortInfo {
        node: usize,
        port: u8,
    },
    Quiesce {
        node: usize,
        port: u8,
        peer: (usize, u8),
    },
    TrapRepress,
}

#[derive(Clone, Debug)]
struct Request {
    smp: Smp,
    purpose: Purpose,
    tries: u32,
    deadline: u64,
    /// The node addressed, when known (for the directed-route fallback).
    node: Option<usize>,
    /// LID-routed to this LID (`None`: directed route).
    dlid: Option<u16>,
    /// False for SMPs that get no response (TrapRepress).
    reply: bool,
}

/// An SMP for the driver to put on the wire.
#[derive(Clone, Debug, PartialEq)]
pub struct Transmit {
    /// The SMP, hop pointer 0 for directed route.
    pub smp: Smp,
    /// For a LID-routed SMP (class 0x01), the destination LID of its LRH;
    /// `None` for directed route (permissive LRH).
    pub dlid: Option<Lid>,
}

/// SMPs sent, by phase, method and attribute, and what became of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Retransmissions.
    pub retries: u64,
    /// Requests given up after all retries.
    pub given_up: u64,
    /// Responses with a non-zero status.
    pub errors: u64,
    /// LID-routed SMPs sent again by directed route after a timeout.
    pub fallbacks: u64,
    /// SMPs sent LID-routed (the rest went by directed route).
    pub lid_routed: u64,
    /// Traps received.
    pub traps: u64,
    /// Sweeps started.
    pub sweeps: u64,
    /// CA links taken down for a static reconfiguration.
    pub quiesced: u64,
    /// (phase, method byte, attribute ID) → SMPs sent, retransmissions and
    /// SMPs that get no response (TrapRepress) included.
    pub per_phase_kind: BTreeMap<(Phase, u8, u16), u64>,
    /// Simulated time each phase ended (ms since start).
    pub phase_end_ms: BTreeMap<Phase, u64>,
}

impl Stats {
    /// (method byte, attribute ID) → SMPs sent over all phases,
    /// retransmissions included.
    pub fn sent(&self) -> BTreeMap<(u8, u16), u64> {
        let mut m = BTreeMap::new();
        for (&(_, method, attr), &n) in &self.per_phase_kind {
            *m.entry((method, attr)).or_default() += n;
        }
        m
    }
    /// Phase → SMPs sent in it.
    pub fn per_phase(&self) -> BTreeMap<Phase, u64> {
        let mut m = BTreeMap::new();
        for (&(phase, _, _), &n) in &self.per_phase_kind {
            *m.entry(phase).or_default() += n;
        }
        m
    }
    /// All SMPs sent.
    pub fn total(&self) -> u64 {
        self.per_phase_kind.values().sum()
    }
    /// SMPs of one method and attribute, over all phases.
    pub fn count(&self, method: Method, attr: AttributeId) -> u64 {
        let (method, attr): (u8, u16) = (method.into(), attr.into());
        self.per_phase_kind
            .iter()
            .filter(|(&(_, m, a), _)| (m, a) == (method, attr))
            .map(|(_, &n)| n)
            .sum()
    }
}

/// The subnet manager.
#[derive(Clone, Debug)]
pub struct Sm {
    cfg: SmConfig,
    phase: Phase,
    nodes: Vec<SmNode>,
    by_guid: BTreeMap<u64, usize>,
    queue: VecDeque<Request>,
    inflight: BTreeMap<u64, Request>,
    next_tid: u64,
    stats: Stats,
    lfts: Vec<Vec<u8>>,
    switch_index: Vec<usize>,
    max_lid: u16,
    armed: bool,
    graph: Graph,
    switch_of: Vec<usize>,
    stages: VecDeque<Vec<Request>>,
    error: Option<SmError>,
    top: u16,
    vms: BTreeMap<u32, Vm>,
    next_vm: u32,
    free_lids: BTreeSet<u16>,
    up: bool,
    next_sweep: Option<u64>,
    sweep_pending: bool,
    changed: bool,
    explored: bool,
    old_lfts: BTreeMap<usize, Vec<u8>>,
    trap_issuers: BTreeSet<u16>,
    swept: BTreeSet<usize>,
    issuers_first: bool,
    /// Requests given up in this pass of a bring-up, to send again.
    lost: Vec<Request>,
    /// Rounds of [`SmConfig::rounds`] used in this pass.
    round: u32,
}

impl Sm {
    /// A subnet manager that will bring the subnet up from its own port.
    pub fn new(cfg: SmConfig) -> Self {
        let mut sm = Sm {
            cfg,
            phase: Phase::Discovery,
            nodes: Vec::new(),
            by_guid: BTreeMap::new(),
            queue: VecDeque::new(),
            inflight: BTreeMap::new(),
            next_tid: 1,
            stats: Stats::default(),
            lfts: Vec::new(),
            switch_index: Vec::new(),
            max_lid: 0,
            armed: false,
            graph: Graph::default(),
            switch_of: Vec::new(),
            stages: VecDeque::new(),
            error: None,
            top: 0,
            vms: BTreeMap::new(),
            next_vm: 1,
            free_lids: BTreeSet::new(),
            up: false,
            next_sweep: None,
            sweep_pending: false,
            changed: false,
            explored: false,
            old_lfts: BTreeMap::new(),
            trap_issuers: BTreeSet::new(),
            swept: BTreeSet::new(),
            issuers_first: false,
            lost: Vec::new(),
            round: 0,
        };
        sm.get(
            DrPath::new(),
            AttributeId::NodeInfo,
            0,
            Purpose::NodeInfo { from: None },
        );
        sm
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }
    /// The nodes discovered, the SM's own first.
    pub fn nodes(&self) -> &[SmNode] {
        &self.nodes
    }
    /// SMP counts.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The forwarding tables computed, per switch (in `nodes()` order of switches).
    pub fn lfts(&self) -> impl Iterator<Item = (usize, &[u8])> {
        self.switch_index
            .iter()
            .copied()
            .zip(self.lfts.iter().map(|v| v.as_slice()))
    }
    /// The switch↔node mapping of [`Sm::routing_graph`]: entry `k` is the
    /// index in [`Sm::nodes`] of the graph's switch `k`.
    pub fn graph_switches(&self) -> &[usize] {
        &self.switch_index
    }
    /// The highest LID assigned.
    pub fn max_lid(&self) -> u16 {
        self.max_lid
    }
    /// Why bring-up stopped, when it did.
    pub fn error(&self) -> Option<&SmError> {
        self.error.as_ref()
    }
    /// True when nothing is queued, in flight or waiting for a stage: the
    /// subnet is up (or bring-up failed) and every change has been applied.
    pub fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed)
            && self.queue.is_empty()
            && self.inflight.is_empty()
            && self.stages.is_empty()
    }

    /// Queues a request by directed route along `path`, or, when `node` is
    /// given and reachable by LID (it has a LID, the subnet has been up
    /// since it was found, and routes to it are installed), LID-routed to
    /// it: no directed-route processing at each hop.
    #[allow(clippy::too_many_arguments)]
    fn request(
        &mut self,
        method: Method,
        path: DrPath,
        node: Option<usize>,
        attr: AttributeId,
        am: u32,
        data: Option<[u8; 64]>,
        purpose: Purpose,
    ) {
        let dlid = node
            .filter(|&i| {
                self.nodes
                    .get(i)
                    .is_some_and(|n| self.up && n.alive && !n.fresh && n.lid != 0)
                    && self.lid_route_ok(i)
            })
            .map(|i| self.nodes[i].lid);
        let mut smp = match dlid {
            Some(_) => Smp::lid_routed(method, attr, am, 0, self.cfg.m_key),
            None => Smp::directed(&path, method, attr, am, 0, self.cfg.m_key),
        };
        if let Some(d) = data {
            smp.data = d;
        }
        self.queue.push_back(Request {
            smp,
            purpose,
            tries: 0,
            deadline: 0,
            node,
            dlid,
            reply: true,
        });
    }

    /// Runs `queue` and takes back, in order, the requests it queued: for
    /// the caller to hold them as a stage (sent once everything before has
    /// been answered) instead of sending them now.
    fn capture(&mut self, queue: impl FnOnce(&mut Self)) -> Vec<Request> {
        let start = self.queue.len();
        queue(self);
        self.queue.drain(start..).collect()
    }

    /// The port a switch forwards `lid` to with the tables it has now
    /// (those the SM last distributed to it).
    fn installed_port(&self, node: usize, lid: u16) -> u8 {
        let t = match self.old_lfts.get(&node) {
            Some(t) => t,
            None => match self.switch_of.get(node).and_then(|&k| self.lfts.get(k)) {
                Some(t) => t,
                None => return DROP_PORT,
            },
        };
        t.get(usize::from(lid)).copied().unwrap_or(DROP_PORT)
    }

    /// True when an SMP to `node` would go LID-routed now: the node has a
    /// LID and the installed tables carry an SMP from the SM to it and the
    /// response back, over links the SM knows are up.
    pub fn reachable_by_lid(&self, node: usize) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|n| self.up && n.alive && !n.fresh && n.lid != 0)
            && self.lid_route_ok(node)
    }

    fn lid_route_ok(&self, node: usize) -> bool {
        let sm_lid = self.nodes.first().map_or(0, |n| n.lid);
        let target = self.nodes[node].lid;
        self.walk_installed(0, target, node) && self.walk_installed(node, sm_lid, 0)
    }

    /// Follows the installed tables from node `from` to `lid`, owned by `to`.
    fn walk_installed(&self, from: usize, lid: u16, to: usize) -> bool {
        if from == to {
            return true;
        }
        let mut at = from;
        if !self.nodes[at].is_switch() {
            let port = usize::from(self.nodes[at].info.local_port_num);
            match self.nodes[at].ports.get(port).and_then(|p| p.peer) {
                Some((m, _)) => at = m,
                None => return false,
            }
        }
        for _ in 0..=self.nodes.len() {
            if at == to {
                return true;
            }
            if !self.nodes[at].is_switch() || !self.nodes[at].alive {
                return false;
            }
            let p = self.installed_port(at, lid);
            if p == 0 {
                return self.nodes[at].lid == lid;
            }
            match self.nodes[at]
                .ports
                .get(usize::from(p))
                .and_then(|x| x.peer)
            {
                Some((m, _)) => at = m,
                None => return false,
            }
        }
        false
    }

    fn get(&mut self, path: DrPath, attr: AttributeId, am: u32, purpose: Purpose) {
        self.request(Method::Get, path, None, attr, am, None, purpose);
    }

    /// Get of an attribute of a known node (LID-routed when it can be).
    fn get_node(&mut self, node: usize, attr: AttributeId, am: u32, purpose: Purpose) {
        let path = self.nodes[node].path.clone();
        self.request(Method::Get, path, Some(node), attr, am, None, purpose);
    }

    /// Set of an attribute of a known node (LID-routed when it can be).
    fn set_node<A: Attribute>(&mut self, node: usize, value: &A, am: u32, purpose: Purpose) {
        let mut d = [0u8; 64];
        if value.encode(&mut d).is_ok() {
            let path = self.nodes[node].path.clone();
            self.request(Method::Set, path, Some(node), A::ID, am, Some(d), purpose);
        }
    }

    /// The next SMP to put on the wire at `now_ms`, if the window allows.
    /// A directed-route SMP has hop pointer 0: the caller's SMI applies the
    /// send rules.
    pub fn poll_transmit(&mut self, now_ms: u64) -> Option<Transmit> {
        // An SMP that gets no response (TrapRepress) takes no place in the
        // window and keeps its TID: the trap's, which is how its issuer
        // knows which trap is repressed.
        let no_reply = self.queue.front().is_some_and(|r| !r.reply);
        if !no_reply && self.inflight.len() >= self.cfg.window.max(1) {
            return None;
        }
        let mut r = self.queue.pop_front()?;
        let tid = if r.reply {
            let tid = self.next_tid;
            self.next_tid += 1;
            r.smp.header.transaction_id = zerocopy_u64(tid);
            r.deadline = now_ms + self.cfg.timeout_ms;
            tid
        } else {
            r.smp.header.transaction_id.get()
        };
        let smp = r.smp.clone();
        *self
            .stats
            .per_phase_kind
            .entry((self.phase, smp.header.method, smp.header.attribute_id.get()))
            .or_default() += 1;
        let dlid = r.dlid.map(Lid);
        if dlid.is_some() {
            self.stats.lid_routed += 1;
        }
        if !r.reply {
            return Some(Transmit { smp, dlid });
        }
        self.inflight.insert(tid, r);
        Some(Transmit { smp, dlid })
    }

    /// SMPs queued, in flight, and stages of SMPs waiting for the current
    /// ones to be answered.
    pub fn outstanding(&self) -> (usize, usize, usize) {
        (self.queue.len(), self.inflight.len(), self.stages.len())
    }

    /// True when SMPs wait to be sent (the window may be holding them).
    pub fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// When the SM next needs [`Sm::handle_timeout`] called (a
    /// retransmission, or the next light sweep).
    pub fn poll_timeout(&self) -> Option<u64> {
        let retry = self.inflight.values().map(|r| r.deadline).min();
        let sweep = self
            .next_sweep
            .filter(|_| self.is_idle() && self.phase == Phase::Done);
        match (retry, sweep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Retransmits or gives up requests whose time has come.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let due: Vec<u64> = self
            .inflight
            .iter()
            .filter(|(_, r)| r.deadline <= now_ms)
            .map(|(t, _)| *t)
            .collect();
        for tid in due {
            if let Some(mut r) = self.inflight.remove(&tid) {
                if r.dlid.is_some() {
                    // No answer by LID: the route may be broken; go by
                    // directed route from now on.
                    if let Some(path) = r
                        .node
                        .and_then(|i| self.nodes.get(i))
                        .map(|n| n.path.clone())
                    {
                        let mut smp = Smp::directed(
                            &path,
                            r.smp.method(),
                            r.smp.attribute_id(),
                            r.smp.attribute_modifier(),
                            0,
                            self.cfg.m_key,
                        );
                        smp.data = r.smp.data;
                        r.smp = smp;
                        r.dlid = None;
                        self.stats.fallbacks += 1;
                        self.queue.push_front(r);
                        continue;
                    }
                }
                if r.tries < self.cfg.retries {
                    r.tries += 1;
                    self.stats.retries += 1;
                    self.queue.push_front(r);
                } else {
                    self.stats.given_up += 1;
                    if self.bringing_up() && r.reply {
                        // Sent again in the next round, before the phase
                        // moves on: a partial fabric is not routed.
                        self.lost.push(r);
                    }
                }
            }
        }
        if self.phase == Phase::Done
            && self.is_idle()
            && self.next_sweep.is_some_and(|t| t <= now_ms)
        {
            self.start_sweep(now_ms);
        }
        self.advance(now_ms);
    }

    /// Consumes a response or a trap that came to the SM's port.
    pub fn handle_response(&mut self, smp: &Smp, now_ms: u64) {
        if smp.method() == Method::Trap {
            self.on_trap(smp, now_ms);
            return;
        }
        if smp.method() != Method::GetResp {
            return;
        }
        let Some(req) = self.inflight.remove(&smp.header.transaction_id.get()) else {
            return;
        };
        if !smp.status().is_ok() {
            self.stats.errors += 1;
            self.advance(now_ms);
            return;
        }
        let path = req.smp.initial_path();
        match req.purpose {
            Purpose::NodeInfo { from } => self.on_node_info(smp, path, from),
            Purpose::PortInfo { node, port } => self.on_port_info(smp, node, port),
            Purpose::SwitchInfo { node } => {
                if let (Ok(si), Some(n)) = (SwitchInfo::decode(&smp.data), self.nodes.get_mut(node))
                {
                    n.switch_info = Some(si);
                }
            }
            Purpose::SetTop { node } => self.send_lft(node),
            Purpose::VirtInfo { node } => {
                if let (Ok(vi), Some(n)) = (
                    VirtualizationInfo::decode(&smp.data),
                    self.nodes.get_mut(node),
                ) {
                    n.vfs = vec![VfSlot::default(); usize::from(vi.vport_cap)];
                }
            }
            Purpose::NodeDesc { node } => {
                if let (Ok(d), Some(n)) =
                    (NodeDescription::decode(&smp.data), self.nodes.get_mut(node))
                {
                    n.description = Some(d);
                }
            }
            Purpose::SweepSwitchInfo { node } => self.on_sweep_switch_info(smp, node),
            Purpose::Quiesce { node, port, peer } => {
                // The link retrains: both ends are in Init now.
                self.stats.quiesced += 1;
                for (n, p) in [(node, port), peer] {
                    if let Some(x) = self
                        .nodes
                        .get_mut(n)
                        .and_then(|n| n.ports.get_mut(usize::from(p)))
                        .and_then(|p| p.info.as_mut())
                    {
                        x.port_state = PortState::Init;
                    }
                }
            }
            Purpose::SweepPortInfo { node, port } => self.on_sweep_port_info(smp, node, port),
            Purpose::SetVPort | Purpose::SetTopOnly | Purpose::TrapRepress => {}
            Purpose::SetLid { node, port } | Purpose::SetState { node, port } => {
                // The response carries the port's PortInfo after the Set.
                if let (Ok(pi), Some(p)) = (
                    PortInfo::decode(&smp.data),
                    self.nodes
                        .get_mut(node)
                        .and_then(|n| n.ports.get_mut(usize::from(port))),
                ) {
                    p.info = Some(pi);
                }
            }
            Purpose::SetLft => {}
        }
        self.advance(now_ms);
    }

    fn on_node_info(&mut self, smp: &Smp, path: DrPath, from: Option<(usize, u8)>) {
        let Ok(ni) = NodeInfo::decode(&smp.data) else {
            return;
        };
        let port = ni.local_port_num;
        let idx = match self.by_guid.get(&ni.node_guid.0) {
            Some(&i) => {
                self.revive(i, &path);
                i
            }
            None => {
                let i = self.nodes.len();
                let nports = usize::from(ni.num_ports);
                self.nodes.push(SmNode {
                    info: ni,
                    path: path.clone(),
                    ports: vec![SmPort::default(); nports + 1],
                    switch_info: None,
                    lid: 0,
                    vfs: Vec::new(),
                    description: None,
                    alive: true,
                    fresh: self.up,
                });
                self.by_guid.insert(ni.node_guid.0, i);
                self.get(
                    path.clone(),
                    AttributeId::NodeDescription,
                    0,
                    Purpose::NodeDesc { node: i },
                );
                self.read_node(i);
                i
            }
        };
        if let Some((parent, pport)) = from {
            if let Some(pp) = self
                .nodes
                .get_mut(parent)
                .and_then(|n| n.ports.get_mut(usize::from(pport)))
            {
                pp.peer = Some((idx, port));
            }
            if let Some(np) = self
                .nodes
                .get_mut(idx)
                .and_then(|n| n.ports.get_mut(usize::from(port)))
            {
                np.peer = Some((parent, pport));
            }
        }
    }

    /// Queues the reads of a node just found (or found again), by directed
    /// route along its path: a switch's SwitchInfo and the PortInfo of
    /// every port, 0 included; a CA's PortInfo of the port it was reached by.
    fn read_node(&mut self, i: usize) {
        let n = &self.nodes[i];
        let (path, switch) = (n.path.clone(), n.is_switch());
        let ports = if switch {
            0..=n.info.num_ports
        } else {
            n.info.local_port_num..=n.info.local_port_num
        };
        if switch {
            self.get(
                path.clone(),
                AttributeId::SwitchInfo,
                0,
                Purpose::SwitchInfo { node: i },
            );
        }
        for port in ports {
            self.get(
                path.clone(),
                AttributeId::PortInfo,
                u32::from(port),
                Purpose::PortInfo { node: i, port },
            );
        }
    }

    fn on_port_info(&mut self, smp: &Smp, node: usize, port: u8) {
        let Ok(pi) = PortInfo::decode(&smp.data) else {
            return;
        };
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        let is_switch = n.is_switch();
        let path = n.path.clone();
        let Some(p) = n.ports.get_mut(usize::from(port)) else {
            return;
        };
        p.info = Some(pi);
        let explore =
            pi.port_state != PortState::Down && p.peer.is_none() && (port != 0 || !is_switch);
        if !is_switch
            && pi
                .capability_mask2
                .contains(CapabilityMask2::IS_VIRTUALIZATION_SUPPORTED)
        {
            self.get(
                path.clone(),
                AttributeId::VirtualizationInfo,
                0,
                Purpose::VirtInfo { node },
            );
        }
        if explore {
            // The hop out of this node: for the SM's own CA the path starts
            // with its port; elsewhere the path is extended by the port.
            if let Ok(next) = path.extended(port) {
                self.get(
                    next,
                    AttributeId::NodeInfo,
                    0,
                    Purpose::NodeInfo {
                        from: Some((node, port)),
                    },
                );
            }
        }
    }

    /// True in the phases of a bring-up or of a change being assimilated,
    /// where a given-up request leaves the fabric not whole.
    fn bringing_up(&self) -> bool {
        matches!(
            self.phase,
            Phase::Discovery | Phase::LidAssignment | Phase::Distribution | Phase::Activation
        )
    }

    /// What a given-up request was for, as the error names it.
    fn unreached(&self, r: &Request) -> Unreached {
        let (node, port, beyond) = match r.purpose {
            Purpose::NodeInfo { from } => match from {
                Some((n, p)) => (Some(n), Some(p), true),
                None => (None, None, false),
            },
            Purpose::PortInfo { node, port }
            | Purpose::SetLid { node, port }
            | Purpose::SetState { node, port }
            | Purpose::SweepPortInfo { node, port }
            | Purpose::Quiesce { node, port, .. } => (Some(node), Some(port), false),
            Purpose::SwitchInfo { node }
            | Purpose::VirtInfo { node }
            | Purpose::NodeDesc { node }
            | Purpose::SetTop { node }
            | Purpose::SweepSwitchInfo { node } => (Some(node), None, false),
            Purpose::SetVPort | Purpose::SetTopOnly | Purpose::SetLft | Purpose::TrapRepress => {
                (r.node, None, false)
            }
        };
        let n = node.and_then(|i| self.nodes.get(i));
        Unreached {
            attribute: r.smp.attribute_id(),
            method: r.smp.method(),
            node_guid: n.map_or(0, |n| n.info.node_guid.0),
            node_description: n
                .and_then(|n| n.description.as_ref())
                .and_then(|d| d.node_string.as_str().ok())
                .map(|s| s.trim_end_matches('\0').into()),
            port,
            beyond,
        }
    }

    /// At the end of a phase's work: requests given up in it are sent
    /// again, a round at a time; past the last round, a first bring-up
    /// stops and names them, and a running subnet leaves them to its next
    /// sweep. False when the phase may move on.
    fn resend_lost(&mut self) -> bool {
        if self.lost.is_empty() {
            // The phase's work is all answered: the next phase has its
            // own rounds.
            self.round = 0;
            return false;
        }
        if self.round < self.cfg.rounds {
            self.round += 1;
            for mut r in core::mem::take(&mut self.lost) {
                r.tries = 0;
                self.queue.push_back(r);
            }
            return true;
        }
        let lost = core::mem::take(&mut self.lost);
        if self.up {
            self.sweep_pending = true;
            return false;
        }
        let unreached = lost
            .iter()
            .take(MAX_UNREACHED_NAMED)
            .map(|r| self.unreached(r))
            .collect();
        self.error = Some(SmError::Unreachable {
            unreached,
            count: lost.len(),
        });
        self.phase = Phase::Failed;
        true
    }

    fn advance(&mut self, now_ms: u64) {
        while self.queue.is_empty() && self.inflight.is_empty() {
            if let Some(stage) = self.stages.pop_front() {
                self.queue.extend(stage);
                continue;
            }
            if self.bringing_up() && self.resend_lost() {
                continue;
            }
            if self.phase == Phase::Done && self.sweep_pending {
                self.start_sweep(now_ms);
                continue;
            }
            if matches!(self.phase, Phase::Done | Phase::Failed) {
                break;
            }
            self.stats.phase_end_ms.insert(self.phase, now_ms);
            match self.phase {
                Phase::Discovery => {
                    self.phase = Phase::LidAssignment;
                    self.assign_lids();
                }
                Phase::LidAssignment => {
                    self.phase = Phase::Distribution;
                    self.route();
                    if self.up && self.cfg.static_reconfig {
                        // Tables only once the CA links are quiet.
                        let tables = self.capture(Self::distribute);
                        self.quiesce();
                        self.stages.push_back(tables);
                    } else {
                        self.distribute();
                    }
                }
                Phase::Distribution => {
                    self.phase = Phase::Activation;
                    self.activate(PortState::Armed);
                    self.armed = true;
                }
                Phase::Activation if self.armed => {
                    self.armed = false;
                    self.activate(PortState::Active);
                }
                Phase::Activation | Phase::Reconfiguration => {
                    self.phase = Phase::Done;
                    self.round = 0;
                    self.became_up(now_ms);
                }
                Phase::Sweep => self.sweep_drained(),
                Phase::Done | Phase::Failed => {}
            }
        }
    }

    fn linked_ports(&self) -> Vec<(usize, u8)> {
        let mut v = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if !n.alive {
                continue;
            }
            for (p, port) in n.ports.iter().enumerate() {
                if p == 0 && n.is_switch() {
                    continue;
                }
                if port.info.is_some_and(|pi| pi.port_state != PortState::Down) {
                    v.push((i, p as u8));
                }
            }
        }
        v
    }

    /// Gives a LID to every reachable node that has none (at bring-up: all
    /// of them), and sets it again on nodes that came back (`fresh`), so
    /// that a node keeps its LID across a reboot.
    fn assign_lids(&mut self) {
        let prepopulated = self.cfg.lid_policy == LidPolicy::Prepopulated;
        let reached = |n: &SmNode| {
            n.is_switch()
                || n.ports
                    .get(usize::from(n.info.local_port_num))
                    .and_then(|p| p.info)
                    .is_some()
        };
        let mut needed: u32 = 0;
        for n in self.nodes.iter().filter(|n| n.alive && n.lid == 0) {
            if reached(n) {
                needed += 1;
                if prepopulated && !n.is_switch() {
                    needed += n.vfs.len() as u32;
                }
            }
        }
        let available = u32::from(Lid::UNICAST_MAX.0);
        if u32::from(self.max_lid) + needed > available {
            self.error = Some(SmError::LidSpaceExhausted {
                needed: u32::from(self.max_lid) + needed,
                available,
            });
            self.phase = Phase::Failed;
            return;
        }
        let mut next: u16 = self.max_lid + 1;
        let mut sets = Vec::new();
        let mut vports = Vec::new();
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if !n.alive || !reached(n) || (n.lid != 0 && !n.fresh) {
                continue;
            }
            let port = if n.is_switch() {
                0
            } else {
                n.info.local_port_num
            };
            if n.lid == 0 {
                n.lid = next;
                next += 1;
                if prepopulated {
                    for slot in n.vfs.iter_mut() {
                        slot.lid = next;
                        next += 1;
                    }
                }
            }
            sets.push((i, port));
            for (v, slot) in n.vfs.iter().enumerate() {
                if slot.lid != 0 {
                    vports.push((i, v as u16 + 1));
                }
            }
        }
        self.max_lid = next - 1;
        for (i, port) in sets {
            let n = &self.nodes[i];
            let Some(mut pi) = n.ports[usize::from(port)].info else {
                continue;
            };
            pi.lid = Lid(n.lid);
            pi.master_sm_lid = Lid(1);
            pi.m_key = self.cfg.m_key;
            pi.subnet_time_out = self.cfg.subnet_time_out;
            pi.port_state = PortState::NoChange;
            pi.port_physical_state = PortPhysicalState::NoChange;
            pi.link_width_enabled = LinkWidth::empty();
            pi.link_speed_enabled = LinkSpeed::empty();
            self.set_node(i, &pi, u32::from(port), Purpose::SetLid { node: i, port });
        }
        for (i, vf) in vports {
            let (state, guid) = match self.nodes[i].vfs[usize::from(vf) - 1].vm {
                Some(id) => (PortState::Active, self.vms.get(&id.0).map_or(0, |v| v.guid)),
                None => (PortState::Down, 0),
            };
            self.set_vport(i, vf, state, guid);
        }
    }

    fn route(&mut self) {
        let mut index = vec![usize::MAX; self.nodes.len()];
        let mut extra = Vec::new();
        if self.up {
            // Keep the tables as distributed, to send only what changes.
            self.old_lfts = self
                .switch_index
                .iter()
                .copied()
                .zip(core::mem::take(&mut self.lfts))
                .collect();
        }
        self.switch_index.clear();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.is_switch() && n.alive {
                index[i] = self.switch_index.len();
                self.switch_index.push(i);
            }
        }
        let mut g = Graph::default();
        for &i in &self.switch_index {
            let n = &self.nodes[i];
            g.lid.push(n.lid);
            g.ports.push(
                n.ports
                    .iter()
                    .enumerate()
                    .map(|(p, port)| match port.peer {
                        Some((m, q))
                            if p != 0 && self.nodes[m].is_switch() && index[m] != usize::MAX =>
                        {
                            PortTo::Switch(index[m], q)
                        }
                        Some((m, _))
                            if p != 0
                                && !self.nodes[m].is_switch()
                                && self.nodes[m].alive
                                && self.nodes[m].lid != 0 =>
                        {
                            for vf in &self.nodes[m].vfs {
                                if vf.lid != 0 {
                                    extra.push((vf.lid, index[i], p as u8));
                                }
                            }
                            PortTo::Ca(self.nodes[m].lid, 1)
                        }
                        _ => PortTo::None,
                    })
                    .collect(),
            );
        }
        g.extra = extra;
        self.lfts = Self::compute_routes(self.cfg.routing, &g, self.max_lid);
        self.graph = g;
        self.switch_of = index;
    }

    /// The switch graph the routes were computed on.
    pub fn routing_graph(&self) -> &Graph {
        &self.graph
    }

    /// Computes routes on `g` with `engine` (what bring-up does, exposed so
    /// route computation can be timed on its own).
    pub fn compute_routes(engine: Engine, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        engine.route(g, max_lid)
    }

    /// True when the channel dependency graph of the computed routes is
    /// acyclic (checked after routing; min-hop makes no such promise).
    pub fn deadlock_free(&self) -> bool {
        updn::deadlock_free(&self.graph, &self.lfts)
    }

    /// At bring-up: SwitchInfo (LinearFDBTop) to every switch, then every
    /// block in use. On a running subnet: a switch that is new or came back
    /// gets the same; every other switch gets only the blocks that differ
    /// from what it has, and SwitchInfo only when LinearFDBTop moves.
    fn distribute(&mut self) {
        let top = self.top_for(self.max_lid);
        let old_top = self.top;
        self.top = top;
        let blocks = usize::from(self.max_lid) / 64 + 1;
        for k in 0..self.switch_index.len() {
            let i = self.switch_index[k];
            let n = &self.nodes[i];
            let Some(mut si) = n.switch_info else {
                continue;
            };
            si.linear_fdb_top = top;
            si.port_state_change = true; // writing 1 clears it
            let old = self.old_lfts.get(&i).filter(|_| self.up && !n.fresh);
            let Some(old) = old else {
                self.set_node(i, &si, 0, Purpose::SetTop { node: i });
                continue;
            };
            let changed: Vec<u16> = (0..blocks)
                .filter(|&b| {
                    let r = b * 64..(b + 1) * 64;
                    (r.start..r.end).any(|l| {
                        old.get(l).copied().unwrap_or(DROP_PORT)
                            != self.lfts[k].get(l).copied().unwrap_or(DROP_PORT)
                    })
                })
                .map(|b| b as u16)
                .collect();
            if top != old_top {
                self.set_node(i, &si, 0, Purpose::SetTopOnly);
            }
            for b in changed {
                self.send_lft_block(k, b);
            }
        }
    }

    fn send_lft(&mut self, node: usize) {
        let Some(k) = self
            .switch_of
            .get(node)
            .copied()
            .filter(|&k| k != usize::MAX)
        else {
            return;
        };
        let blocks = usize::from(self.max_lid) / 64 + 1;
        for b in 0..blocks {
            self.send_lft_block(k, b as u16);
        }
    }

    /// Queues Set(LinearForwardingTable) of block `b` of switch `k` as the
    /// SM's table has it now.
    fn send_lft_block(&mut self, k: usize, b: u16) {
        let node = self.switch_index[k];
        let mut t = LinearForwardingTable::dropping();
        let base = usize::from(b) * 64;
        for (e, slot) in t.port.iter_mut().enumerate() {
            *slot = self.lfts[k].get(base + e).copied().unwrap_or(DROP_PORT);
        }
        self.set_node(node, &t, u32::from(b), Purpose::SetLft);
    }

    /// Queues Set(VPortInfo) for VF `vf` (1-based) of hypervisor `node`
    /// with the LID the SM holds for it, `state` and `guid`.
    fn set_vport(&mut self, node: usize, vf: u16, state: PortState, guid: u64) {
        let n = &self.nodes[node];
        let Some(slot) = n.vfs.get(usize::from(vf) - 1) else {
            return;
        };
        let v = VPortInfo {
            vport_state: state,
            lid_required: true,
            vport_lid: Lid(slot.lid),
            vport_guid: mad_core::Guid(guid),
            ..VPortInfo::default()
        };
        self.set_node(node, &v, u32::from(vf), Purpose::SetVPort);
    }

    /// LinearFDBTop for a highest LID: the end of its 64-LID block, so
    /// LIDs added later in the same block need no SwitchInfo update.
    fn top_for(&self, lid: u16) -> u16 {
        (lid | 63).min(Lid::UNICAST_MAX.0)
    }

    /// Static reconfiguration, first step: Set(PortInfo) Down on every
    /// switch port cabled to a CA (the SM's own excepted), so no data enters
    /// while the tables change; each link retrains to Init.
    fn quiesce(&mut self) {
        let mut edges = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if !n.is_switch() || !n.alive {
                continue;
            }
            for (p, port) in n.ports.iter().enumerate().skip(1) {
                if let Some((m, q)) = port.peer {
                    if m != 0 && !self.nodes[m].is_switch() && port.info.is_some() {
                        edges.push((i, p as u8, (m, q)));
                    }
                }
            }
        }
        for (i, p, peer) in edges {
            let Some(mut pi) = self.nodes[i].ports[usize::from(p)].info else {
                continue;
            };
            pi.port_state = PortState::Down;
            pi.port_physical_state = PortPhysicalState::NoChange;
            pi.link_width_enabled = LinkWidth::empty();
            pi.link_speed_enabled = LinkSpeed::empty();
            pi.m_key = self.cfg.m_key;
            self.set_node(
                i,
                &pi,
                u32::from(p),
                Purpose::Quiesce {
                    node: i,
                    port: p,
                    peer,
                },
            );
        }
    }

    /// Moves ports on: to Armed every linked port still in Init, then (the
    /// second pass) to Active every port in Armed.
    fn activate(&mut self, state: PortState) {
        let from = if state == PortState::Armed {
            PortState::Init
        } else {
            PortState::Armed
        };
        for (i, port) in self.linked_ports() {
            let n = &self.nodes[i];
            let Some(mut pi) = n.ports[usize::from(port)].info else {
                continue;
            };
            if pi.port_state != from {
                continue;
            }
            if !n.is_switch() || port == 0 {
                pi.lid = Lid(n.lid);
                pi.master_sm_lid = Lid(1);
            }
            pi.m_key = self.cfg.m_key;
            pi.subnet_time_out = self.cfg.subnet_time_out;
            pi.port_state = state;
            pi.port_physical_state = PortPhysicalState::NoChange;
            pi.link_width_enabled = LinkWidth::empty();
            pi.link_speed_enabled = LinkSpeed::empty();
            self.set_node(i, &pi, u32::from(port), Purpose::SetState { node: i, port });
        }
    }
}

/// True when every switch has an entry for every destination it can reach.
fn complete(g: &Graph, lft: &[Vec<u8>]) -> bool {
    // Connected components of the switch graph, one pass.
    let n = g.ports.len();
    let mut comp = vec![usize::MAX; n];
    for start in 0..n {
        if comp[start] != usize::MAX {
            continue;
        }
        comp[start] = start;
        let mut stack = vec![start];
        while let Some(v) = stack.pop() {
            for t in &g.ports[v] {
                if let PortTo::Switch(m, _) = *t {
                    if comp[m] == usize::MAX {
                        comp[m] = start;
                        stack.push(m);
                    }
                }
            }
        }
    }
    routing::destinations(g).iter().all(|&(lid, t, _)| {
        (0..n).all(|s| {
            comp[s] != comp[t]
                || lft[s]
                    .get(usize::from(lid))
                    .is_some_and(|&p| p != DROP_PORT)
        })
    })
}

fn zerocopy_u64(v: u64) -> zerocopy::byteorder::network_endian::U64 {
    zerocopy::byteorder::network_endian::U64::new(v)
}

/// Runs the send rules for an SMP the SM puts on its port (a convenience
/// for drivers): see [`dr::originate`].
pub fn prepare(smp: &mut Smp, sm_node: &dyn dr::Node, port: u8) -> Result<bool, dr::Discard> {
    dr::originate(smp, sm_node, port)
}

#[cfg(test)]
mod tests {
    use super::Engine;

    #[test]
    fn engine_names_round_trip() {
        for e in Engine::ALL {
            assert_eq!(Engine::from_name(e.name()), Some(e), "{e:?}");
        }
        assert_eq!(Engine::from_name("FatTree"), None);
        assert_eq!(Engine::from_name(""), None);
    }

    #[test]
    fn every_engine_is_listed_once() {
        // A variant added to Engine must be added to Engine::ALL: this
        // match stops compiling until it is considered here.
        for e in Engine::ALL {
            match e {
                Engine::MinHop | Engine::UpDown | Engine::FatTree => {}
            }
        }
        let mut names: alloc::vec::Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Engine::ALL.len());
    }
}
