//! The agent of each simulated node: a switch's, a CA's or a vSwitch
//! hypervisor's SMA, behind one type.

use super::*;
use crate::topology::Node as TopoNode;

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
    /// CA of one or two ports other than the SM's, when `vfs` > 0, a vSwitch
    /// on each port); or a CA, the SM's
    /// when `is_sm`.
    pub(super) fn make(n: &TopoNode, vfs: usize, is_sm: bool) -> SimNode {
        let (guid, ports, name) = (n.guid, n.ports, n.name.as_str());
        match n.kind {
            NodeType::Switch => {
                let mut spec = NodeSpec::switch(guid, ports, name);
                spec.enhanced_port0 = n.enhanced_port0;
                SimNode::Switch(Box::new(SwitchSma::new(&spec)))
            }
            _ if vfs > 0
                && !is_sm
                && usize::from(ports) <= smi::sma::hypervisor::MAX_HYPERVISOR_PORTS =>
            {
                SimNode::Hypervisor(Box::new(Hypervisor::with_ports(guid, ports, vfs, name)))
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
    pub(super) fn repowered(&self, n: &TopoNode) -> SimNode {
        let vfs = match self {
            SimNode::Hypervisor(h) => h.vports.first().map_or(0, |v| v.vfs.len()),
            SimNode::Switch(_) | SimNode::Ca(_) => 0,
        };
        SimNode::make(n, vfs, false)
    }
    pub(super) fn node(&self) -> &dyn dr::Node {
        match self {
            SimNode::Switch(s) => &s.model,
            SimNode::Ca(c) => &c.model,
            SimNode::Hypervisor(h) => &h.pf.model,
        }
    }
    pub(super) fn process(&mut self, smp: &Smp, port: u8, now_ms: u64) -> Option<Smp> {
        match self {
            SimNode::Switch(s) => s.process(smp, port, now_ms),
            SimNode::Ca(c) => c.process(smp, port, now_ms),
            SimNode::Hypervisor(h) => h.process(smp, port, now_ms),
        }
    }
    /// A cable at `port` came up or went down.
    pub(super) fn link_event(&mut self, port: u8, up: bool, now_ms: u64) {
        match self {
            SimNode::Switch(s) => s.link_event(port, up, now_ms),
            SimNode::Ca(c) => c.link_event(port, up, now_ms),
            SimNode::Hypervisor(h) => h.pf.link_event(port, up, now_ms),
        }
    }
    /// The next trap due at `now_ms`, if any.
    pub(super) fn poll_trap(&mut self, now_ms: u64) -> Option<TrapOut> {
        match self {
            SimNode::Switch(s) => s.poll_trap(now_ms),
            SimNode::Ca(c) => c.poll_trap(now_ms),
            SimNode::Hypervisor(h) => h.pf.poll_trap(now_ms),
        }
    }
    /// Whether the agent has traps raised and not yet repressed.
    pub(super) fn has_traps(&self) -> bool {
        match self {
            SimNode::Switch(s) => !s.pending_traps().is_empty(),
            SimNode::Ca(c) => !c.pending_traps().is_empty(),
            SimNode::Hypervisor(h) => !h.pf.pending_traps().is_empty(),
        }
    }
    /// The PortState of `port` (a hypervisor's: its PF's), if it exists.
    pub fn port_state(&self, port: u8) -> Option<PortState> {
        let p = usize::from(port);
        match self {
            SimNode::Switch(s) => s.model.ports.get(p).map(|x| x.info.port_state),
            SimNode::Ca(c) => c.model.ports.get(p).map(|x| x.info.port_state),
            SimNode::Hypervisor(h) => h.pf.model.ports.get(p).map(|x| x.info.port_state),
        }
    }
    /// How many times an SM asked `port`'s clients to reregister (a
    /// Set(PortInfo) with ClientReregister; a hypervisor's: its PF's),
    /// if the port exists.
    pub fn client_reregistrations(&self, port: u8) -> Option<u32> {
        let p = usize::from(port);
        match self {
            SimNode::Switch(s) => s.model.ports.get(p).map(|x| x.client_reregistrations),
            SimNode::Ca(c) => c.model.ports.get(p).map(|x| x.client_reregistrations),
            SimNode::Hypervisor(h) => (h.pf.model.ports.get(p)).map(|x| x.client_reregistrations),
        }
    }
    /// The P_Key table of `port` (a hypervisor's VFs use its PF's: the
    /// simulated vSwitch keeps no table of its own per VF) and the port's
    /// partition enforcement (inbound, outbound), if the port exists.
    pub fn pkeys(&self, port: u8) -> Option<(&[PKey], bool, bool)> {
        let p = usize::from(port);
        let (pkeys, info) = match self {
            SimNode::Switch(s) => s.model.ports.get(p).map(|x| (&x.pkeys, &x.info)),
            SimNode::Ca(c) => c.model.ports.get(p).map(|x| (&x.pkeys, &x.info)),
            SimNode::Hypervisor(h) => h.pf.model.ports.get(p).map(|x| (&x.pkeys, &x.info)),
        }?;
        Some((
            pkeys,
            info.partition_enforcement_inbound,
            info.partition_enforcement_outbound,
        ))
    }
    /// The GUIDInfo table of `port` (a hypervisor's: its PF's), entry 0
    /// the port GUID, then its alias GUIDs; if the port exists.
    pub fn guids(&self, port: u8) -> Option<Vec<u64>> {
        let p = usize::from(port);
        let g = match self {
            SimNode::Switch(s) => s.model.ports.get(p).map(|x| &x.guids),
            SimNode::Ca(c) => c.model.ports.get(p).map(|x| &x.guids),
            SimNode::Hypervisor(h) => h.pf.model.ports.get(p).map(|x| &x.guids),
        }?;
        Some(g.iter().map(|x| x.0).collect())
    }
    /// The P_Key table of the end that answers to `lid` here: an enabled
    /// VF's own on a hypervisor, else that of the CA port holding `lid`
    /// ([`SimNode::port_of_lid`]; a PF's port 1).
    pub fn end_pkeys(&self, lid: Lid) -> Option<&[PKey]> {
        if let SimNode::Hypervisor(h) = self {
            if let Some(t) = h.vports.iter().find_map(|v| v.pkeys_of_lid(lid)) {
                return Some(t);
            }
        }
        self.pkeys(self.port_of_lid(lid)).map(|(t, _, _)| t)
    }
    /// The end port a packet from or for `lid` leaves or enters by: a
    /// switch's 0; the CA port that holds `lid` (a multi-port CA's ports
    /// hold their own LIDs), port 1 when none does; a hypervisor's port 1.
    pub fn port_of_lid(&self, lid: Lid) -> u8 {
        match self {
            SimNode::Switch(_) => 0,
            SimNode::Ca(c) => (1..c.model.ports.len() as u8)
                .find(|&p| c.model.owns_lid(p, lid))
                .unwrap_or(1),
            SimNode::Hypervisor(h) => (1..=h.vports.len() as u8)
                .find(|&p| h.owns_at(p, lid))
                .unwrap_or(1),
        }
    }
    /// The M_Key guarding `port` (a switch's: its port 0's), which the
    /// node's own driver need not present: it reads its ports locally, as
    /// an HCA driver's MADs skip the M_Key check.
    pub fn m_key(&self, port: u8) -> mad_core::MKey {
        match self {
            SimNode::Switch(s) => s.model.m_key(port),
            SimNode::Ca(c) => c.model.m_key(port),
            SimNode::Hypervisor(h) => h.pf.model.m_key(port),
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
    /// The LMC of the node's own port: it holds `lid()` and the
    /// `2^lmc - 1` LIDs above it (a switch's base port 0: 0).
    pub fn lmc(&self) -> u8 {
        match self {
            SimNode::Switch(s) => s.model.ports.first().map_or(0, |p| p.info.lmc.min(7)),
            SimNode::Ca(c) => c.model.ports.get(1).map_or(0, |p| p.info.lmc.min(7)),
            SimNode::Hypervisor(h) => h.pf.model.ports.get(1).map_or(0, |p| p.info.lmc.min(7)),
        }
    }
    /// The LID and LMC of end port `port`: a switch's port 0 (whatever
    /// `port`), a CA's port `port`, a hypervisor's PF port `port` (its
    /// VFs' LIDs are [`SimNode::vm_lids`]).
    pub fn port_lid(&self, port: u8) -> (Lid, u8) {
        let model = match self {
            SimNode::Ca(c) => &c.model,
            SimNode::Hypervisor(h) => &h.pf.model,
            SimNode::Switch(_) => return (self.lid(), self.lmc()),
        };
        (
            model.lid(port),
            (model.ports.get(usize::from(port))).map_or(0, |p| p.info.lmc.min(7)),
        )
    }
    /// True when a packet for `lid` that reaches this node is delivered:
    /// a CA's LID, or a hypervisor's PF LID or enabled VF LID.
    pub fn owns(&self, lid: Lid) -> bool {
        match self {
            SimNode::Switch(s) => s.model.owns_lid(0, lid),
            SimNode::Ca(c) => c.model.owns_lid(1, lid),
            SimNode::Hypervisor(h) => h.owns(lid),
        }
    }
    /// True when a packet for `lid` that reaches this node by `port` is
    /// delivered: [`SimNode::owns`], but a CA's port `port` must hold it
    /// (a multi-port CA's ports each hold their own LIDs).
    pub fn owns_at(&self, port: u8, lid: Lid) -> bool {
        match self {
            SimNode::Ca(c) => c.model.owns_lid(port, lid),
            SimNode::Hypervisor(h) => h.owns_at(port, lid),
            SimNode::Switch(_) => self.owns(lid),
        }
    }
    /// LIDs of the VMs running on this node (enabled VFs).
    pub fn vm_lids(&self) -> Vec<Lid> {
        match self {
            SimNode::Hypervisor(h) => (h.vports.iter())
                .flat_map(|v| v.vfs.iter())
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
