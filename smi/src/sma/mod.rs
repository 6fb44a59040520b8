//! The Subnet Management Agent: answers Get and Set of every attribute the
//! node supports, with the state effects the specification gives, enforces
//! M_Key protection, and raises traps until the SM represses them.
//!
//! The agent is sans-IO: [`Sma::process`] takes a request delivered by the
//! SMI and the current time, and returns the response to send (if any);
//! [`Sma::poll_trap`] hands out the traps that are due. Storage is bounded
//! by the const parameters: `P` port slots (port 0 included), `L` linear
//! forwarding entries, `M` multicast forwarding entries.

pub mod hypervisor;
pub mod mkey;
pub mod node;
pub mod traps;
pub mod vswitch;

use mad_core::attr::modifier::{
    Block, MftSelect, Modifier, PKeyBlock, PortSelect, SlToVlPorts, VlArbSelect, Zero,
};
use mad_core::attr::*;
use mad_core::notice::{
    Notice, NoticeType, ProducerType, Trap128, Trap144, Trap145, Trap256, TrapDetails,
    TrapPortError,
};
use mad_core::types::{Lid, MKey, PKey};
use mad_core::{Method, Smp, Status};
pub use mkey::MKeyCheck;
pub use node::{Model, NodeSpec};

/// A switch SMA sized for up to 64 ports and the full unicast LID space.
pub type SwitchSma = Sma<65, 49152, 1024>;
/// A channel adapter SMA with up to 2 ports.
pub type CaSma = Sma<3, 0, 0>;

/// A trap ready to go: LID-routed to the master SM.
#[derive(Clone, Debug, PartialEq)]
pub struct TrapOut {
    /// The Trap(Notice) SMP (class 0x01).
    pub smp: Smp,
    /// Source LID (the raising port's).
    pub slid: Lid,
    /// Destination LID (PortInfo.MasterSMLID).
    pub dlid: Lid,
    /// The port it leaves by.
    pub port: u8,
}

/// Attributes a device model adds to an agent (vendor attributes such as a
/// hypervisor's vports), consulted for any attribute the agent lacks.
pub trait Extension {
    /// Get or Set of `req`'s attribute arriving on `port`, writing the value
    /// into `out`; `None` when the extension does not know the attribute.
    fn attribute(&mut self, req: &Smp, out: &mut [u8; 64], port: u8) -> Option<Result<(), Status>>;
}

/// The extension that knows no attribute.
pub struct NoExtension;

impl Extension for NoExtension {
    fn attribute(&mut self, _: &Smp, _: &mut [u8; 64], _: u8) -> Option<Result<(), Status>> {
        None
    }
}

/// A Subnet Management Agent over a [`Model`].
#[derive(Clone, Debug)]
pub struct Sma<const P: usize, const L: usize, const M: usize> {
    /// The node's attributes.
    pub model: Model<P, L, M>,
    traps: traps::TrapQueue,
}

type Reply = Result<(), Status>;

impl<const P: usize, const L: usize, const M: usize> Sma<P, L, M> {
    /// An SMA for a freshly powered node.
    pub fn new(spec: &NodeSpec) -> Self {
        Sma {
            model: Model::new(spec),
            traps: traps::TrapQueue::default(),
        }
    }

    /// Handles an SMP delivered to this agent on `port` at `now_ms`; returns
    /// the response to send back, or `None` when none is due (an M_Key
    /// violation, a TrapRepress, a response or trap from elsewhere).
    pub fn process(&mut self, req: &Smp, port: u8, now_ms: u64) -> Option<Smp> {
        self.process_with(req, port, now_ms, &mut NoExtension)
    }

    /// [`Sma::process`] with the attributes of `ext` added (after the same
    /// version, M_Key and method checks).
    pub fn process_with(
        &mut self,
        req: &Smp,
        port: u8,
        now_ms: u64,
        ext: &mut dyn Extension,
    ) -> Option<Smp> {
        let method = req.method();
        let nports = self.model.node_info.num_ports;
        if req.header.base_version != 1
            || !matches!(req.header.mgmt_class, 0x01 | 0x81)
            || port > nports
            || (port == 0 && !self.model.is_switch())
        {
            // Not a MAD we know, or from a port this node lacks.
            return None;
        }
        match method {
            Method::Get | Method::Set | Method::TrapRepress => {}
            Method::GetResp | Method::Trap | Method::Report | Method::ReportResp => return None,
            _ => return Some(self.respond(req, Status::UNSUPPORTED_METHOD)),
        }
        if req.header.class_version != 1 {
            return Some(self.respond(req, Status::UNSUPPORTED_VERSION));
        }
        let mp = usize::from(self.model.mkey_port(port));
        let check = match self.model.ports.get_mut(mp) {
            Some(p) => mkey::check(&mut p.info, &mut p.lease, method, req.m_key(), now_ms),
            None => return None,
        };
        if check == MKeyCheck::Violation {
            self.bad_m_key(req, port, now_ms);
            return None;
        }
        if method == Method::TrapRepress {
            self.traps.repress(req.header.transaction_id.get());
            return None;
        }
        let mut resp = req.clone();
        crate::dr::make_response(&mut resp);
        let st = match self.attribute(
            req,
            &mut resp.data,
            port,
            check == MKeyCheck::PassHidingKey,
            now_ms,
            ext,
        ) {
            Ok(()) => Status::OK,
            Err(s) => s,
        };
        resp.set_status(st);
        Some(resp)
    }

    fn respond(&self, req: &Smp, st: Status) -> Smp {
        let mut r = req.clone();
        crate::dr::make_response(&mut r);
        r.set_status(st);
        r
    }

    /// Get or Set of one attribute; writes the resulting value into `out`.
    fn attribute(
        &mut self,
        req: &Smp,
        out: &mut [u8; 64],
        port: u8,
        hide_key: bool,
        now_ms: u64,
        ext: &mut dyn Extension,
    ) -> Reply {
        let set = req.method() == Method::Set;
        let am = req.attribute_modifier();
        let sw = self.model.is_switch();
        let nports = self.model.node_info.num_ports;
        let bad = |_| Status::INVALID_FIELD;
        let unsupported = Err(Status::UNSUPPORTED_METHOD_ATTR);
        match req.attribute_id() {
            AttributeId::NodeInfo => {
                if set {
                    return unsupported;
                }
                Zero::decode("NodeInfo", am).map_err(bad)?;
                let mut ni = self.model.node_info;
                ni.local_port_num = port;
                ni.port_guid = self.port(port)?.guids.first().copied().unwrap_or_default();
                if sw {
                    ni.port_guid = self.model.node_info.node_guid;
                }
                ni.encode(out).map_err(bad)
            }
            AttributeId::NodeDescription => {
                Zero::decode("NodeDescription", am).map_err(bad)?;
                if set {
                    let cap2 = self.port(port)?.info.capability_mask2;
                    if !cap2.contains(CapabilityMask2::IS_SET_NODE_DESCRIPTION_SUPPORTED) {
                        return unsupported;
                    }
                    self.model.node_description =
                        NodeDescription::decode(&req.data).map_err(bad)?;
                }
                self.model.node_description.encode(out).map_err(bad)
            }
            AttributeId::SwitchInfo => {
                if !sw {
                    return unsupported;
                }
                Zero::decode("SwitchInfo", am).map_err(bad)?;
                let r = if set {
                    self.set_switch_info(&req.data)
                } else {
                    Ok(())
                };
                self.model.switch_info.encode(out).map_err(bad)?;
                r
            }
            AttributeId::PortInfo => {
                let sel = PortSelect::decode("PortInfo", am).map_err(bad)?;
                let target = self.target_port(sel.port, port)?;
                let mut rereg = false;
                let r = if set {
                    // Bit 31 only says the SM knows the extended speed
                    // fields; the Set is for the selected port alone.
                    let new = PortInfo::decode(&req.data).map_err(bad)?;
                    self.check_port_info(target, &new).map(|plan| {
                        rereg = self.apply_port_info(target, &new, plan, now_ms);
                    })
                } else {
                    Ok(())
                };
                let mut pi = self.port(target)?.info;
                pi.local_port_num = port;
                // The response to a Set that asked for it says so
                // (o14-12.2.1); the port does not keep the bit.
                pi.client_reregister = rereg;
                if sw && target != 0 {
                    // External switch ports carry no addresses of their own.
                    let p0 = self.port(0)?.info;
                    pi.lid = p0.lid;
                    pi.master_sm_lid = p0.master_sm_lid;
                    pi.m_key = p0.m_key;
                }
                if hide_key {
                    pi.m_key = MKey(0);
                }
                pi.encode(out).map_err(bad)?;
                r
            }
            AttributeId::PortInfoExtended => {
                let sel = PortSelect::decode("PortInfoExtended", am).map_err(bad)?;
                let target = self.target_port(sel.port, port)?;
                if set {
                    let new = PortInfoExtended::decode(&req.data).map_err(bad)?;
                    self.port_mut(target)?.ext = new;
                }
                self.port(target)?.ext.encode(out).map_err(bad)
            }
            AttributeId::MlnxExtPortInfo => {
                // Vendor-specific; the modifier is the port (0: the port
                // the SMP arrived on, on a CA).
                let p = u8::try_from(am).map_err(|_| Status::INVALID_FIELD)?;
                let target = self.target_port(p, port)?;
                if set {
                    let mut new =
                        mad_core::attr::MlnxExtPortInfo::decode(&req.data).map_err(bad)?;
                    // FDR10 is neither supported nor active here; only the
                    // enables are the SM's to set.
                    new.link_speed_supported = 0;
                    new.link_speed_active = 0;
                    self.port_mut(target)?.mlnx_ext = new;
                }
                self.port(target)?.mlnx_ext.encode(out).map_err(bad)
            }
            AttributeId::GuidInfo => {
                let Block(b) = Block::<31>::decode("GUIDInfo", am).map_err(bad)?;
                let p = self.port_mut(port)?;
                let base = usize::from(b) * 8;
                if base >= p.guids.len() {
                    return Err(Status::INVALID_FIELD);
                }
                if set {
                    let g = GuidInfo::decode(&req.data).map_err(bad)?;
                    for (i, guid) in g.guids.iter().enumerate() {
                        let e = base + i;
                        // Entry 0 is the read-only hardware port GUID.
                        if e != 0 {
                            if let Some(slot) = p.guids.get_mut(e) {
                                *slot = *guid;
                            }
                        }
                    }
                }
                let mut g = GuidInfo::default();
                for (i, slot) in g.guids.iter_mut().enumerate() {
                    *slot = p.guids.get(base + i).copied().unwrap_or_default();
                }
                g.encode(out).map_err(bad)
            }
            AttributeId::PKeyTable => {
                let m = PKeyBlock::decode("P_KeyTable", am).map_err(bad)?;
                let target = if sw { m.port } else { port };
                if sw && target > nports {
                    return Err(Status::INVALID_FIELD);
                }
                let p = self.port_mut(target)?;
                let base = usize::from(m.block) * 32;
                if base >= p.pkeys.len() {
                    return Err(Status::INVALID_FIELD);
                }
                if set {
                    let t = PKeyTable::decode(&req.data).map_err(bad)?;
                    for (i, k) in t.p_keys.iter().enumerate() {
                        if let Some(slot) = p.pkeys.get_mut(base + i) {
                            *slot = *k;
                        }
                    }
                }
                let mut t = PKeyTable::default();
                for (i, slot) in t.p_keys.iter_mut().enumerate() {
                    *slot = p.pkeys.get(base + i).copied().unwrap_or(PKey(0));
                }
                t.encode(out).map_err(bad)
            }
            AttributeId::SlToVlMappingTable => {
                let m = SlToVlPorts::decode("SLtoVLMappingTable", am).map_err(bad)?;
                let (inp, outp) = if sw {
                    (m.input_port, m.output_port)
                } else {
                    (0, port)
                };
                if sw && (inp > nports || outp > nports) {
                    return Err(Status::INVALID_FIELD);
                }
                if !sw && am != 0 {
                    return Err(Status::INVALID_FIELD);
                }
                if set {
                    let t = SlToVlMappingTable::decode(&req.data).map_err(bad)?;
                    let outs: (u8, u8) = if m.all_output_ports && sw {
                        (1, nports)
                    } else {
                        (outp, outp)
                    };
                    for o in outs.0..=outs.1 {
                        let p = self.port_mut(o)?;
                        let ins = if m.all_input_ports && sw {
                            0..p.sl2vl.len()
                        } else {
                            usize::from(inp)..usize::from(inp) + 1
                        };
                        for i in ins {
                            if let Some(slot) = p.sl2vl.get_mut(i) {
                                *slot = t;
                            }
                        }
                    }
                }
                let t = self
                    .port(outp)?
                    .sl2vl
                    .get(usize::from(inp))
                    .copied()
                    .ok_or(Status::INVALID_FIELD)?;
                t.encode(out).map_err(bad)
            }
            AttributeId::VlArbitrationTable => {
                let m = VlArbSelect::decode("VLArbitrationTable", am).map_err(bad)?;
                let target = if sw { m.port } else { port };
                if sw && target > nports {
                    return Err(Status::INVALID_FIELD);
                }
                let i = usize::from(u16::from(m.block)) - 1;
                let p = self.port_mut(target)?;
                if set {
                    p.vl_arb[i] = VlArbitrationTable::decode(&req.data).map_err(bad)?;
                }
                p.vl_arb[i].encode(out).map_err(bad)
            }
            AttributeId::LinearForwardingTable => {
                if !sw {
                    return unsupported;
                }
                let Block(b) = Block::<767>::decode("LinearForwardingTable", am).map_err(bad)?;
                let base = usize::from(b) * 64;
                if base >= self.model.lft.len() {
                    return Err(Status::INVALID_FIELD);
                }
                if set {
                    if base > usize::from(self.model.switch_info.linear_fdb_top) {
                        return Err(Status::INVALID_FIELD);
                    }
                    let t = LinearForwardingTable::view(&req.data).map_err(bad)?;
                    if t.iter().any(|&p| p > nports && p != forwarding::DROP_PORT) {
                        return Err(Status::INVALID_FIELD);
                    }
                    let end = (base + 64).min(self.model.lft.len());
                    self.model.lft[base..end].copy_from_slice(&t[..end - base]);
                }
                let end = (base + 64).min(self.model.lft.len());
                out.fill(forwarding::DROP_PORT);
                out[..end - base].copy_from_slice(&self.model.lft[base..end]);
                Ok(())
            }
            AttributeId::MulticastForwardingTable => {
                if !sw {
                    return unsupported;
                }
                let m = MftSelect::decode("MulticastForwardingTable", am).map_err(bad)?;
                let base = usize::from(m.block) * 32;
                let pos = usize::from(m.position);
                if base >= self.model.mft.len()
                    || pos >= node::MFT_POSITIONS
                    || pos * 16 > usize::from(nports)
                {
                    return Err(Status::INVALID_FIELD);
                }
                if set {
                    let t = MulticastForwardingTable::decode(&req.data).map_err(bad)?;
                    for (i, mask) in t.port_mask.iter().enumerate() {
                        if let Some(e) = self.model.mft.get_mut(base + i) {
                            e[pos] = *mask;
                        }
                    }
                }
                let mut t = MulticastForwardingTable::default();
                for (i, slot) in t.port_mask.iter_mut().enumerate() {
                    *slot = self.model.mft.get(base + i).map(|e| e[pos]).unwrap_or(0);
                }
                t.encode(out).map_err(bad)
            }
            AttributeId::SmInfo => {
                // An SM on a switch runs behind its management port 0,
                // whose IsSM says so, whatever port the SMP came in by.
                let cap = self.port(if sw { 0 } else { port })?.info.capability_mask;
                if !cap.contains(CapabilityMask::IS_SM) {
                    return unsupported;
                }
                let ctl = SmInfo::decode_modifier_checked(am)?;
                if set {
                    let s = &mut self.model.sm_info;
                    s.sm_state = match ctl {
                        modifier::SmInfoControl::Handover => SmState::Master,
                        modifier::SmInfoControl::Disable => SmState::NotActive,
                        modifier::SmInfoControl::Standby => SmState::Standby,
                        modifier::SmInfoControl::Discover => SmState::Discovering,
                        _ => s.sm_state,
                    };
                }
                let mut s = self.model.sm_info;
                // As OpenSM answers: the SM_Key to whoever passes the
                // M_Key check, zero when protection hides it.
                if hide_key {
                    s.sm_key = MKey(0);
                }
                s.encode(out).map_err(bad)
            }
            AttributeId::LedInfo => {
                PortSelect::decode("LedInfo", am).map_err(bad)?;
                if set {
                    self.model.led = LedInfo::decode(&req.data).map_err(bad)?;
                }
                self.model.led.encode(out).map_err(bad)
            }
            _ => ext.attribute(req, out, port).unwrap_or(unsupported),
        }
    }

    fn port(&self, p: u8) -> Result<&node::Port<P>, Status> {
        self.model
            .ports
            .get(usize::from(p))
            .ok_or(Status::INVALID_FIELD)
    }
    fn port_mut(&mut self, p: u8) -> Result<&mut node::Port<P>, Status> {
        self.model
            .ports
            .get_mut(usize::from(p))
            .ok_or(Status::INVALID_FIELD)
    }

    /// The port a PortInfo-style selector addresses: a switch takes it as
    /// given (0 = management port); a CA accepts 0 or the arrival port.
    fn target_port(&self, sel: u8, arrival: u8) -> Result<u8, Status> {
        if self.model.is_switch() {
            if sel > self.model.node_info.num_ports {
                return Err(Status::INVALID_FIELD);
            }
            Ok(sel)
        } else if sel == 0 || sel == arrival {
            Ok(arrival)
        } else if sel <= self.model.node_info.num_ports {
            // Another port of the same CA: readable, as ibsim allows.
            Ok(sel)
        } else {
            Err(Status::INVALID_FIELD)
        }
    }

    fn set_switch_info(&mut self, data: &[u8]) -> Reply {
        let new = SwitchInfo::decode(data).map_err(|_| Status::INVALID_FIELD)?;
        let si = &mut self.model.switch_info;
        if usize::from(new.linear_fdb_top) >= usize::from(si.linear_fdb_cap).max(1)
            && new.linear_fdb_top != 0
        {
            return Err(Status::INVALID_FIELD);
        }
        si.linear_fdb_top = new.linear_fdb_top;
        si.default_port = new.default_port;
        si.default_multicast_primary_port = new.default_multicast_primary_port;
        si.default_multicast_not_primary_port = new.default_multicast_not_primary_port;
        si.life_time_value = new.life_time_value;
        si.multicast_fdb_top = new.multicast_fdb_top;
        if new.port_state_change {
            si.port_state_change = false;
        }
        Ok(())
    }

    /// Checks a Set(PortInfo) for `target` completely, changing nothing;
    /// returns the values the Set resolves to.
    fn check_port_info(&self, target: u8, new: &PortInfo) -> Result<PortInfoPlan, Status> {
        let sw = self.model.is_switch();
        let bad = Err(Status::INVALID_FIELD);
        let cur = self.port(target)?.info;
        let addresses = !sw || target == 0;
        if addresses {
            if !new.lid.is_unicast() || !new.master_sm_lid.is_unicast() && new.master_sm_lid.0 != 0
            {
                return bad;
            }
            let base_sp0 = sw && !self.model.switch_info.enhanced_port0;
            if new.lmc > 0 && !base_sp0 && new.lid.0 % (1 << new.lmc) != 0 {
                return bad;
            }
        }
        let state = match new.port_state {
            PortState::NoChange => cur.port_state,
            PortState::Down => PortState::Down,
            PortState::Armed if matches!(cur.port_state, PortState::Init | PortState::Armed) => {
                PortState::Armed
            }
            PortState::Active if matches!(cur.port_state, PortState::Armed | PortState::Active) => {
                PortState::Active
            }
            _ => return bad,
        };
        if sw && target == 0 && state != cur.port_state {
            return bad; // the management port follows the switch, not the SM
        }
        let phys = match new.port_physical_state {
            PortPhysicalState::NoChange => None,
            p @ (PortPhysicalState::Sleep
            | PortPhysicalState::Polling
            | PortPhysicalState::Disabled) => {
                if !matches!(new.port_state, PortState::NoChange | PortState::Down) {
                    return bad;
                }
                Some(p)
            }
            _ => return bad,
        };
        if u8::from(new.link_down_default_state) > 2 {
            return bad;
        }
        let width = match new.link_width_enabled.bits() {
            0 => cur.link_width_enabled,
            255 => cur.link_width_supported,
            w if LinkWidth::from_bits_retain(w)
                .difference(cur.link_width_supported)
                .is_empty() =>
            {
                LinkWidth::from_bits_retain(w)
            }
            _ => return bad,
        };
        let speed = match new.link_speed_enabled.bits() {
            0 => cur.link_speed_enabled,
            15 => cur.link_speed_supported,
            s if LinkSpeed::from_bits_retain(s)
                .difference(cur.link_speed_supported)
                .is_empty() =>
            {
                LinkSpeed::from_bits_retain(s)
            }
            _ => return bad,
        };
        // LinkSpeedExtEnabled: 0 no change, 30 none, 31 every supported
        // one, or some of the supported ones.
        let ext = match new.link_speed_ext_enabled.bits() {
            0 => cur.link_speed_ext_enabled,
            30 => LinkSpeedExt::empty(),
            31 => cur.link_speed_ext_supported,
            e if LinkSpeedExt::from_bits_retain(e)
                .difference(cur.link_speed_ext_supported)
                .is_empty() =>
            {
                LinkSpeedExt::from_bits_retain(e)
            }
            _ => return bad,
        };
        let mtu = u8::from(new.neighbor_mtu);
        if mtu == 0 || mtu > u8::from(cur.mtu_cap) {
            return bad;
        }
        let vls = u8::from(new.operational_vls);
        if vls > u8::from(cur.vl_cap) {
            return bad;
        }
        Ok(PortInfoPlan {
            addresses,
            state,
            phys,
            width,
            speed,
            ext,
        })
    }

    /// Applies a Set(PortInfo) that [`Self::check_port_info`] accepted;
    /// whether it asked the port's clients to reregister (an end port
    /// whose CapabilityMask has IsClientReregistrationSupported).
    fn apply_port_info(
        &mut self,
        target: u8,
        new: &PortInfo,
        plan: PortInfoPlan,
        now_ms: u64,
    ) -> bool {
        let PortInfoPlan {
            addresses,
            state,
            phys,
            width,
            speed,
            ext,
        } = plan;
        let vls = u8::from(new.operational_vls);
        let base_sp0 = self.model.is_switch() && !self.model.switch_info.enhanced_port0;
        let Ok(p) = self.port_mut(target) else {
            return false;
        };
        let rereg = addresses
            && new.client_reregister
            && (p.info.capability_mask)
                .contains(CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED);
        if rereg {
            p.client_reregistrations = p.client_reregistrations.saturating_add(1);
        }
        let i = &mut p.info;
        if addresses {
            i.m_key = new.m_key;
            i.gid_prefix = new.gid_prefix;
            i.lid = new.lid;
            i.master_sm_lid = new.master_sm_lid;
            // A base switch port 0 has no LMC (IBA 1.2.1 table 146): it
            // keeps one LID whatever the Set says.
            i.lmc = if base_sp0 { 0 } else { new.lmc };
            i.master_sm_sl = new.master_sm_sl;
            i.m_key_lease_period = new.m_key_lease_period;
            i.m_key_protect_bits = new.m_key_protect_bits;
            i.subnet_time_out = new.subnet_time_out;
            i.client_reregister = false;
        }
        i.link_width_enabled = width;
        i.link_speed_enabled = speed;
        i.link_speed_ext_enabled = ext;
        if new.link_down_default_state != LinkDownDefaultState::NoChange {
            i.link_down_default_state = new.link_down_default_state;
        }
        i.neighbor_mtu = new.neighbor_mtu;
        if vls != 0 {
            i.operational_vls = new.operational_vls;
        }
        i.vl_high_limit = new.vl_high_limit;
        i.hoq_life = new.hoq_life;
        i.vl_stall_count = new.vl_stall_count;
        i.partition_enforcement_inbound = new.partition_enforcement_inbound;
        i.partition_enforcement_outbound = new.partition_enforcement_outbound;
        i.filter_raw_inbound = new.filter_raw_inbound;
        i.filter_raw_outbound = new.filter_raw_outbound;
        i.local_phy_errors = new.local_phy_errors;
        i.overrun_errors = new.overrun_errors;
        i.init_type = new.init_type;
        // Writing 0 resets a violation counter; other values leave it.
        if new.m_key_violations == 0 {
            i.m_key_violations = 0;
        }
        if new.p_key_violations == 0 {
            i.p_key_violations = 0;
        }
        if new.q_key_violations == 0 {
            i.q_key_violations = 0;
        }
        if let Some(ph) = phys {
            i.port_physical_state = ph;
        }
        let old = i.port_state;
        i.port_state = state;
        if state == PortState::Down && old != PortState::Down {
            i.port_physical_state = phys.unwrap_or(PortPhysicalState::Polling);
        }
        // A state changed by SubnSet does not set PortStateChange or raise
        // a trap (IBA vol. 1, SwitchInfo; ibsim does the same): only the
        // link state machine does (`link_event`).
        let _ = (old, target, now_ms);
        rereg
    }

    /// A switch notes a link-driven change of an external port's state
    /// (Down→Init, or to Down) in SwitchInfo.PortStateChange and raises
    /// trap 128.
    fn port_state_changed(&mut self, port: u8, now_ms: u64) {
        if !self.model.is_switch() || port == 0 {
            return;
        }
        self.model.switch_info.port_state_change = true;
        if !self.can_trap(0) {
            return;
        }
        let lid = self.model.lid(0);
        if let Ok(n) = Notice::generic(
            NoticeType::Urgent,
            ProducerType::Switch,
            lid,
            &TrapDetails::LinkStateChange(Trap128 { lid }),
        ) {
            self.traps.raise(n, 0, now_ms);
        }
    }

    /// The physical link on `port` came up (`true`: the port goes to Init)
    /// or went down (the port goes Down, Polling).
    pub fn link_event(&mut self, port: u8, up: bool, now_ms: u64) {
        let Ok(p) = self.port_mut(port) else { return };
        let before = p.info.port_state;
        // A Disabled port trains no link, whatever its peer does, until a
        // Set enables it.
        let disabled = p.info.port_physical_state == PortPhysicalState::Disabled;
        if up {
            if before == PortState::Down && !disabled {
                p.info.port_state = PortState::Init;
                p.info.port_physical_state = PortPhysicalState::LinkUp;
            }
        } else {
            p.info.port_state = PortState::Down;
            if !disabled {
                p.info.port_physical_state = PortPhysicalState::Polling;
            }
        }
        if p.info.port_state != before {
            self.port_state_changed(port, now_ms);
        }
    }

    /// Traps are generated only from an Active port that knows its master
    /// SM; otherwise they are dropped, as a real SMA does (the SM learns of
    /// port changes from SwitchInfo.PortStateChange on its next sweep).
    fn can_trap(&self, port: u8) -> bool {
        let p = self.model.mkey_port(port);
        self.port(p).is_ok_and(|x| {
            x.info.master_sm_lid.0 != 0
                && x.info.port_state == PortState::Active
                && x.info
                    .capability_mask
                    .contains(CapabilityMask::IS_TRAP_SUPPORTED)
        })
    }

    fn bad_m_key(&mut self, req: &Smp, port: u8, now_ms: u64) {
        if !self.can_trap(port) {
            return;
        }
        // One bad M_Key trap at a time per port: while one waits for its
        // TrapRepress, further violations are only counted
        // (M_KeyViolations), so a requester with the wrong key (even in
        // its TrapRepress) cannot make the port trap at its pace.
        let mp = self.model.mkey_port(port);
        if self
            .traps
            .pending()
            .iter()
            .any(|p| p.port == mp && p.notice.trap_number() == Some(256))
        {
            return;
        }
        let lid = self.model.lid(port);
        let hc = req.hop_count().min(63);
        let mut rp = [0u8; 30];
        for (i, slot) in rp.iter_mut().enumerate().take(usize::from(hc).min(30)) {
            *slot = req.return_path[i + 1];
        }
        let t = Trap256 {
            lid,
            dr_slid: req.dr_slid(),
            method: req.header.method,
            attribute_id: req.header.attribute_id.get(),
            attribute_modifier: req.attribute_modifier(),
            m_key: req.m_key(),
            dr_notice: req.is_directed(),
            dr_path_truncated: hc > 30,
            dr_hop_count: hc.min(30),
            dr_return_path: rp,
        };
        let producer = if self.model.is_switch() {
            ProducerType::Switch
        } else {
            ProducerType::ChannelAdapter
        };
        if let Ok(n) = Notice::generic(
            NoticeType::Security,
            producer,
            lid,
            &TrapDetails::BadMKey(t),
        ) {
            self.traps.raise(n, mp, now_ms);
        }
    }

    /// The next trap due at `now_ms`: sent only from an Active port that
    /// knows its master SM, and repeated until repressed.
    pub fn poll_trap(&mut self, now_ms: u64) -> Option<TrapOut> {
        let first = self.traps.pending().first()?.port;
        let info = self.port(first).ok()?.info;
        if info.master_sm_lid.0 == 0 || info.port_state != PortState::Active {
            return None;
        }
        let t = self
            .traps
            .due(now_ms, traps::interval_ms(info.subnet_time_out))?;
        let mut smp = Smp::lid_routed(Method::Trap, AttributeId::Notice, 0, t.tid, MKey(0));
        t.notice.encode(&mut smp.data).ok()?;
        let port = if self.model.is_switch() { 0 } else { t.port };
        Some(TrapOut {
            smp,
            slid: info.lid,
            dlid: info.master_sm_lid,
            port,
        })
    }

    /// The node's NodeDescription changed by other means than the SM's
    /// Set (a host renamed, as Linux's `node_desc` is written): it says
    /// `text` (its first 64 bytes) from now on, and the node's port (a
    /// switch's port 0, a CA's first Active one) raises trap 144 with
    /// OtherLocalChanges and NodeDescriptionChange, its CapabilityMask
    /// unchanged, if it can trap (IBA 14.2.5.1, notice 144).
    pub fn describe(&mut self, text: &str, now_ms: u64) {
        self.model.node_description.node_string = mad_core::field::Text::from_str_lossy(text);
        let port = if self.model.is_switch() {
            Some(0).filter(|&p| self.can_trap(p))
        } else {
            (1..self.model.ports.len() as u8).find(|&p| self.can_trap(p))
        };
        if let Some(port) = port {
            self.raise_144(port, true, now_ms);
        }
    }

    /// Port `port`'s CapabilityMask was changed by its node (an SM
    /// started or stopped on it: IsSM): the port raises trap 144 with the
    /// new mask, as ibsim's `set_issm` does, if it says
    /// IsCapabilityMaskNoticeSupported and can trap.
    pub fn capability_changed(&mut self, port: u8, now_ms: u64) {
        let notices = self.port(port).is_ok_and(|p| {
            p.info
                .capability_mask
                .contains(CapabilityMask::IS_CAPABILITY_MASK_NOTICE_SUPPORTED)
        });
        if notices && self.can_trap(port) {
            self.raise_144(port, false, now_ms);
        }
    }

    /// The node's SystemImageGUID becomes `guid` (set by other means than
    /// the SM: an adapter joined to another system image), and the
    /// node's port (a switch's port 0, a CA's first Active one) raises
    /// trap 145 with it, if it can trap (IBA 14.2.5.1, notice 145).
    pub fn system_image_changed(&mut self, guid: mad_core::Guid, now_ms: u64) {
        self.model.node_info.system_image_guid = guid;
        let port = if self.model.is_switch() {
            Some(0).filter(|&p| self.can_trap(p))
        } else {
            (1..self.model.ports.len() as u8).find(|&p| self.can_trap(p))
        };
        let Some(port) = port else {
            return;
        };
        let lid = self.model.lid(port);
        let producer = if self.model.is_switch() {
            ProducerType::Switch
        } else {
            ProducerType::ChannelAdapter
        };
        let details = TrapDetails::SystemImageGuidChange(Trap145 {
            lid,
            system_image_guid: guid,
        });
        if let Ok(n) = Notice::generic(NoticeType::Info, producer, lid, &details) {
            self.traps.raise(n, port, now_ms);
        }
    }

    /// Port `port` crossed one of its error thresholds: trap 129 (link
    /// integrity: LocalLinkIntegrityErrors), 130 (buffer overrun:
    /// ExcessiveBufferOverrunErrors) or 131 (flow-control update
    /// watchdog) names it, raised from the node's port (a switch's port
    /// 0) if it can trap. False for another number or a port the node
    /// does not have.
    pub fn port_error(&mut self, port: u8, number: u16, now_ms: u64) -> bool {
        if !(129..=131).contains(&number) || usize::from(port) >= self.model.ports.len() {
            return false;
        }
        let from = self.model.mkey_port(port);
        if !self.can_trap(from) {
            return true;
        }
        let lid = self.model.lid(from);
        let producer = if self.model.is_switch() {
            ProducerType::Switch
        } else {
            ProducerType::ChannelAdapter
        };
        let details = TrapDetails::PortError(
            number,
            TrapPortError {
                lid,
                port_num: port,
            },
        );
        if let Ok(n) = Notice::generic(NoticeType::Urgent, producer, lid, &details) {
            self.traps.raise(n, from, now_ms);
        }
        true
    }

    /// Raises trap 144 from `port` with its CapabilityMask and
    /// CapabilityMask2 as they are now, and OtherLocalChanges with
    /// NodeDescriptionChange when `description` says so.
    fn raise_144(&mut self, port: u8, description: bool, now_ms: u64) {
        let Ok(info) = self.port(port).map(|p| p.info) else {
            return;
        };
        let details = TrapDetails::LocalChange(Trap144 {
            lid: info.lid,
            other_local_changes: description,
            capability_mask: info.capability_mask.bits(),
            node_description_change: description,
            capability_mask2: info.capability_mask2.bits(),
            ..Default::default()
        });
        let producer = if self.model.is_switch() {
            ProducerType::Switch
        } else {
            ProducerType::ChannelAdapter
        };
        if let Ok(n) = Notice::generic(NoticeType::Info, producer, info.lid, &details) {
            self.traps.raise(n, port, now_ms);
        }
    }

    /// Traps raised and not yet repressed.
    pub fn pending_traps(&self) -> &[traps::Pending] {
        self.traps.pending()
    }
}

/// What a checked Set(PortInfo) resolves to.
#[derive(Clone, Copy, Debug)]
struct PortInfoPlan {
    addresses: bool,
    state: PortState,
    phys: Option<PortPhysicalState>,
    width: LinkWidth,
    speed: LinkSpeed,
    ext: LinkSpeedExt,
}

trait SmInfoModifier {
    fn decode_modifier_checked(am: u32) -> Result<modifier::SmInfoControl, Status>;
}
impl SmInfoModifier for SmInfo {
    fn decode_modifier_checked(am: u32) -> Result<modifier::SmInfoControl, Status> {
        modifier::SmInfoControl::decode("SMInfo", am).map_err(|_| Status::INVALID_FIELD)
    }
}

#[cfg(test)]
mod tests;
