//! The discrete-event fabric: every node runs `smi::dr` and `smi::sma`,
//! every cable carries SMPs with a per-hop delay `k` and an extra delay `r`
//! for each hop that needs directed-route processing (the cost model of the
//! vSwitch paper), and SMPs may be lost at a configured rate.

use crate::rng::Rng;
use crate::topology::{Topology, TopologyError};
use mad_core::attr::forwarding::DROP_PORT;
use mad_core::attr::{NodeType, PortState};
use mad_core::types::PKey;
use mad_core::{Lid, Smp};
use smi::dr::{self, Disposition};
use smi::sm::{Phase, Sm, SmConfig, Transmit};
use smi::sma::hypervisor::Hypervisor;
use smi::sma::{CaSma, NodeSpec, SwitchSma, TrapOut};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

mod dispatch;
mod driver;
mod events;
mod links;
mod node;
mod pma;
mod report;
mod sampling;
pub mod verify;
mod walk;

pub use pma::{PortCounts, MAD_PACKET_WORDS, PMA_CAPABILITIES};
pub use sampling::SAMPLE_TICK_NS;

pub use node::SimNode;
pub use report::{
    BringUp, BringUpConfig, BringUpError, BringUpReport, FabricSummary, KindCounts, ModelSummary,
    PhaseReport, Phases, RoutingPhase, SmpSummary, VerifySummary, WallMs,
};
pub use verify::{Check, Failure, Verify, WalkEnd};
pub use walk::{McastWalk, PartitionDrop, TraceError};

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
    /// A cable that failed is repaired (a cable of a node that is down
    /// stays down: it comes back with the node).
    LinkUp(usize, u8),
    /// A node is removed: every cable of it fails.
    NodeDown(usize),
    /// A removed node is put back (freshly powered: no LID, no tables) and
    /// its cables are repaired, but those to a node that is down itself,
    /// which come back with that node.
    NodeUp(usize),
    /// A new cable between two free ports (to attach a node added with
    /// [`Fabric::add_node`], or to add a link); to a node that is down, it
    /// trains when that node comes back.
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
    /// Nodes taken down ([`FabricEvent::NodeDown`]) and not yet back: a
    /// cable to one of them stays cut until it comes back.
    down: std::collections::BTreeSet<usize>,
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
    /// Each port's Performance Management counters, [node][port].
    counters: Vec<Box<[PortCounts]>>,
    /// What befell the packet [`Fabric::carry`] carries, hop by hop.
    carried: Vec<walk::GsHop>,
    /// Each PMA's sample, of those that started one, by (node, the PMA's
    /// port): a switch's one PMA at its port 0, a CA's at each port.
    samples: std::collections::HashMap<(usize, u8), sampling::Sample>,
    /// The clock the PMAs' samples run on, if not simulated time.
    pma_clock_ns: Option<u64>,
    /// Wall-clock milliseconds the driver spent in each SM phase.
    pub phase_wall_ms: std::collections::BTreeMap<Phase, f64>,
    /// A reset waiting for an SMP ([`Fabric::reset_before`]).
    reset_before: Option<ResetBefore>,
    /// When the last such reset happened (simulated ns).
    reset_at_ns: Option<u64>,
    /// An SMP to lose ([`Fabric::drop_before`]): where, and which.
    drop_before: Option<(usize, Picker)>,
}

/// Picks an SMP, for a fault aimed at it.
type Picker = Box<dyn Fn(&Smp) -> bool + Send>;

/// A reset waiting for an SMP ([`Fabric::reset_before`]).
struct ResetBefore {
    node: usize,
    at: usize,
    when: Picker,
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
            .map(|(i, _)| SimNode::make(&topo, i, cfg.vfs, i == sm_node))
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
            down: Default::default(),
            trap_nodes: Default::default(),
            seq: 0,
            now_ns: 0,
            inbox: Vec::new(),
            clients: Default::default(),
            delivered: Vec::new(),
            capture: None,
            stats: FabricStats::default(),
            counters: Vec::new(),
            carried: Vec::new(),
            samples: Default::default(),
            pma_clock_ns: None,
            phase_wall_ms: Default::default(),
            reset_before: None,
            reset_at_ns: None,
            drop_before: None,
        };
        f.counters = f.topo.nodes.iter().map(|n| pma::fresh(n.ports)).collect();
        for i in 0..f.nodes.len() {
            for p in 1..=f.topo.nodes[i].ports {
                if f.topo.peer_of(i, p).is_some() {
                    f.nodes[i].link_event(p, true, 0);
                }
            }
        }
        Ok(f)
    }

    /// Resets node `n` (powered off and on: no LID, no tables, its links
    /// trained again to Init) just before the first SMP that reaches node
    /// `at` and `when` picks is handled there: a fault at an exact point
    /// of an SM's work, which events scheduled at a time cannot aim at.
    /// `when` is asked of each SMP reaching `at` while node `n` is on,
    /// until it says yes; a later call replaces a reset still waiting.
    pub fn reset_before(
        &mut self,
        n: usize,
        at: usize,
        when: impl Fn(&Smp) -> bool + Send + 'static,
    ) {
        self.reset_before = Some(ResetBefore {
            node: n,
            at,
            when: Box::new(when),
        });
    }

    /// Loses the first SMP that reaches node `at` and `when` picks, as if
    /// on the cable into it: its sender hears nothing and tries again,
    /// later than everything sent with it. It is lost before a
    /// [`Fabric::reset_before`] is asked about it; a later call replaces
    /// a loss still waiting.
    pub fn drop_before(&mut self, at: usize, when: impl Fn(&Smp) -> bool + Send + 'static) {
        self.drop_before = Some((at, Box::new(when)));
    }

    /// When (simulated ns) the last reset [`Fabric::reset_before`] asked
    /// for happened; `None` if none has yet.
    pub fn reset_at_ns(&self) -> Option<u64> {
        self.reset_at_ns
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
}
