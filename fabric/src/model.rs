//! An analytic prediction of the SMPs a bring-up costs, from the cabling
//! alone: what a controlled breadth-first discovery (one SMP outstanding,
//! no loss) must send to find, address, route and activate the fabric, and
//! the vSwitch paper's full-reconfiguration count (switches × LFT blocks).
//!
//! The counts follow from the structure of the fabric: every cable is
//! explored once from the side found first (Get(NodeInfo) = cables + 1 on
//! trees such as the m-port n-trees; on fabrics with cycles a cable can be
//! explored from both ends, and this is a lower bound);
//! every node is described once, a multi-port CA once by each cabled
//! port (each is an end port of its own to the SM); a switch's every port
//! and every cabled CA port are read; every switch and CA port gets a LID; every linked
//! port goes to Armed and then to Active; and every switch receives its
//! SwitchInfo and one LFT block per 64 LIDs in use. The OSU paper's model
//! (Vishnu et al., OSU-CISRC-1/05-TR05) counts some of the same kinds for
//! OpenSM in 2005 with formulas of its own ([`crate::osu`]); `ibkit model`
//! prints both, beside the simulator's measured counts, and the tests check
//! these against the simulator.

use crate::topology::Topology;
use mad_core::attr::NodeType;
use smi::sm::LidPolicy;

/// An SMP kind as the reports name it: `Method(Attribute)`, from the
/// method and attribute ID an SM's statistics count by.
pub fn kind_name(method: u8, attr: u16) -> String {
    let m = mad_core::Method::from(method).name().unwrap_or("?");
    let a = mad_core::attr::AttributeId::from(attr)
        .name()
        .unwrap_or("?");
    format!("{m}({a})")
}

/// Predicted SMPs by kind, named as the simulator's counts are
/// (`Method(Attribute)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// (kind, count), in bring-up order.
    pub kinds: Vec<(&'static str, u64)>,
    /// LIDs assigned at bring-up.
    pub lids: u64,
    /// LFT blocks per switch.
    pub blocks: u64,
    /// Switches × blocks: the vSwitch paper's full reconfiguration.
    pub full_reconfig_smps: u64,
}

impl Prediction {
    /// All SMPs.
    pub fn total(&self) -> u64 {
        self.kinds.iter().map(|k| k.1).sum()
    }
    /// One kind's count (0 when not predicted).
    pub fn count(&self, kind: &str) -> u64 {
        self.kinds.iter().find(|k| k.0 == kind).map_or(0, |k| k.1)
    }
}

/// Predicts a bring-up of `t` by ibkit's SM with the SM on the first CA,
/// `vfs` VFs per hypervisor port (every cabled port of every other CA of
/// one or two ports, when `vfs > 0`) and `policy` for their LIDs.
pub fn predict(t: &Topology, vfs: usize, policy: LidPolicy) -> Prediction {
    let sm = t
        .nodes
        .iter()
        .position(|n| n.kind == NodeType::ChannelAdapter);
    let mut switches = 0u64;
    let mut switch_ports = 0u64; // ports 0..=N of every switch
    let mut linked_switch_ports = 0u64;
    let mut cas = 0u64; // cabled CA ports: end ports with a LID each
    let mut hyps = 0u64;
    for (i, n) in t.nodes.iter().enumerate() {
        let linked = (1..=n.ports).filter(|&p| t.peer_of(i, p).is_some()).count() as u64;
        if n.kind == NodeType::Switch {
            switches += 1;
            switch_ports += u64::from(n.ports) + 1;
            linked_switch_ports += linked;
        } else if linked > 0 {
            cas += linked;
            // Each cabled port of a hypervisor (a CA of one or two ports)
            // is a vSwitch of its own.
            if vfs > 0
                && Some(i) != sm
                && usize::from(n.ports) <= smi::sma::hypervisor::MAX_HYPERVISOR_PORTS
            {
                hyps += linked;
            }
        }
    }
    let vf_lids = if policy == LidPolicy::Prepopulated {
        hyps * vfs as u64
    } else {
        0
    };
    let lids = switches + cas + vf_lids;
    let blocks = lids / 64 + 1;
    let mut kinds = vec![
        ("Get(NodeInfo)", t.links() as u64 + 1),
        ("Get(NodeDescription)", switches + cas),
        ("Get(SwitchInfo)", switches),
        ("Get(PortInfo)", switch_ports + cas),
    ];
    if hyps > 0 {
        kinds.push(("Get(VirtualizationInfo)", hyps));
    }
    kinds.push((
        "Set(PortInfo)",
        switches + cas + 2 * (linked_switch_ports + cas),
    ));
    if vf_lids > 0 {
        kinds.push(("Set(VPortInfo)", vf_lids));
    }
    kinds.push(("Set(SwitchInfo)", switches));
    kinds.push(("Set(LinearForwardingTable)", switches * blocks));
    Prediction {
        kinds,
        lids,
        blocks,
        full_reconfig_smps: switches * blocks,
    }
}
