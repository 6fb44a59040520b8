//! What the SM knows of the subnet: its nodes and their ports, as read
//! from the agents, with the links between them and the LIDs given.

use super::*;

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
