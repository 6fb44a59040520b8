//! The agent of each simulated node: a switch's, a CA's or a vSwitch
//! hypervisor's SMA, behind one type.

use super::*;
use crate::topology::{Node as TopoNode, Topology};
use mad_core::attr::PortInfo;

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
    pub(super) fn make(topo: &Topology, i: usize, vfs: usize, is_sm: bool) -> SimNode {
        let mut node = SimNode::powered(&topo.nodes[i], vfs, is_sm);
        node.cable_rates(topo, i);
        node
    }

    fn powered(n: &TopoNode, vfs: usize, is_sm: bool) -> SimNode {
        let (guid, ports, name) = (n.guid, n.ports, n.name.as_str());
        let system = mad_core::Guid(n.system_image_guid());
        match n.kind {
            NodeType::Switch => {
                let mut spec = NodeSpec::switch(guid, ports, name);
                spec.enhanced_port0 = n.enhanced_port0;
                spec.system_image_guid = system;
                SimNode::Switch(Box::new(SwitchSma::new(&spec)))
            }
            _ if vfs > 0
                && !is_sm
                && usize::from(ports) <= smi::sma::hypervisor::MAX_HYPERVISOR_PORTS =>
            {
                let mut h = Hypervisor::with_ports(guid, ports, vfs, name);
                h.pf.model.node_info.system_image_guid = system;
                SimNode::Hypervisor(Box::new(h))
            }
            _ => {
                let mut spec = NodeSpec::ca(guid, ports, name);
                spec.is_sm = is_sm;
                spec.system_image_guid = system;
                SimNode::Ca(Box::new(CaSma::new(&spec)))
            }
        }
    }
    /// A new agent of the same kind as this one (a hypervisor with as many
    /// VFs), freshly powered: nothing set.
    pub(super) fn repowered(&self, topo: &Topology, i: usize) -> SimNode {
        let vfs = match self {
            SimNode::Hypervisor(h) => h.vports.first().map_or(0, |v| v.vfs.len()),
            SimNode::Switch(_) | SimNode::Ca(_) => 0,
        };
        SimNode::make(topo, i, vfs, false)
    }

    /// Every port's PortInfo, to be changed.
    fn port_infos_mut(&mut self) -> Vec<&mut PortInfo> {
        match self {
            SimNode::Switch(s) => s.model.ports.iter_mut().map(|p| &mut p.info).collect(),
            SimNode::Ca(c) => c.model.ports.iter_mut().map(|p| &mut p.info).collect(),
            SimNode::Hypervisor(h) => h.pf.model.ports.iter_mut().map(|p| &mut p.info).collect(),
        }
    }

    /// The node's ports run at the rates of their cables
    /// ([`Topology::rate_of`]), as the links would train: the active width
    /// and speed (an extended speed in LinkSpeedExtActive, with
    /// LinkSpeedActive at QDR, as ibsim says it), those supported and
    /// enabled up to them. A node with a cable at FDR or faster says
    /// IsExtendedSpeedsSupported on every port (a switch's SM reads it at
    /// port 0, as OpenSM does), and with a 2x or an HDR cable, the
    /// CapabilityMask2 bits that name them. A fabric of 4x QDR cables is
    /// left as it is.
    fn cable_rates(&mut self, topo: &Topology, i: usize) {
        use crate::topology::{LaneSpeed, LinkRate};
        use mad_core::attr::{CapabilityMask, CapabilityMask2, LinkSpeed, LinkSpeedExt, LinkWidth};
        let ports = topo.nodes[i].ports;
        let rates: Vec<LinkRate> = (0..=ports).map(|p| topo.rate_of(i, p)).collect();
        if rates.iter().all(|r| *r == LinkRate::DEFAULT) {
            return;
        }
        let ext = rates.iter().any(|r| r.speed.is_extended());
        let two = rates.iter().any(|r| r.width == 2);
        let hdr = rates.iter().any(|r| r.speed >= LaneSpeed::Hdr);
        let ndr = rates.iter().any(|r| r.speed == LaneSpeed::Ndr);
        for (p, info) in self.port_infos_mut().into_iter().enumerate() {
            if ext {
                info.capability_mask |= CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED;
            }
            if two {
                info.capability_mask2 |= CapabilityMask2::IS_LINK_WIDTH_2X_SUPPORTED;
            }
            if hdr {
                info.capability_mask2 |= CapabilityMask2::IS_LINK_SPEED_HDR_SUPPORTED;
            }
            if ndr {
                info.capability_mask2 |= CapabilityMask2::IS_LINK_SPEED_NDR_SUPPORTED;
            }
            let Some(r) = rates.get(p).filter(|r| **r != LinkRate::DEFAULT) else {
                continue;
            };
            if p == 0 {
                continue;
            }
            let width = match r.width {
                1 => LinkWidth::W1X,
                2 => LinkWidth::W2X,
                8 => LinkWidth::W8X,
                12 => LinkWidth::W12X,
                _ => LinkWidth::W4X,
            };
            info.link_width_supported = LinkWidth::W1X | LinkWidth::W4X | width;
            info.link_width_enabled = info.link_width_supported;
            info.link_width_active = width;
            let (speeds, active) = match r.speed {
                LaneSpeed::Sdr => (LinkSpeed::SDR, LinkSpeed::SDR),
                LaneSpeed::Ddr => (LinkSpeed::SDR | LinkSpeed::DDR, LinkSpeed::DDR),
                _ => (
                    LinkSpeed::SDR | LinkSpeed::DDR | LinkSpeed::QDR,
                    LinkSpeed::QDR,
                ),
            };
            info.link_speed_supported = speeds;
            info.link_speed_enabled = speeds;
            info.link_speed_active = active;
            let exts = [
                (LaneSpeed::Fdr, LinkSpeedExt::FDR),
                (LaneSpeed::Edr, LinkSpeedExt::EDR),
                (LaneSpeed::Hdr, LinkSpeedExt::HDR),
                (LaneSpeed::Ndr, LinkSpeedExt::NDR),
            ];
            let upto = exts
                .iter()
                .filter(|(s, _)| *s <= r.speed)
                .fold(LinkSpeedExt::empty(), |a, (_, e)| a | *e);
            info.link_speed_ext_supported = upto;
            info.link_speed_ext_enabled = upto;
            info.link_speed_ext_active = exts
                .iter()
                .find(|(s, _)| *s == r.speed)
                .map_or(LinkSpeedExt::empty(), |(_, e)| *e);
        }
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
    /// Whether `port` is Disabled (PortPhysicalState, as an SM or
    /// `ibportstate disable` set it): its link stays down until enabled.
    pub fn port_disabled(&self, port: u8) -> bool {
        let p = usize::from(port);
        let info = match self {
            SimNode::Switch(s) => s.model.ports.get(p).map(|x| x.info),
            SimNode::Ca(c) => c.model.ports.get(p).map(|x| x.info),
            SimNode::Hypervisor(h) => h.pf.model.ports.get(p).map(|x| x.info),
        };
        info.is_some_and(|i| i.port_physical_state == mad_core::attr::PortPhysicalState::Disabled)
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
