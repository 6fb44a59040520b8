//! A hypervisor's HCA in vSwitch mode, managed at the PF's port: every VF is
//! a vport with its own LID and GUID, which the SM reads and writes with
//! VirtualizationInfo and VPortInfo (one SMP sets a VF's LID, vGUID and
//! state). Packets for the PF's LID or any enabled VF's LID are the
//! hypervisor's; the virtual switch inside needs no forwarding table of its
//! own, so to the fabric the hypervisor is one CA port with many LIDs.

use super::{CaSma, Extension, NodeSpec};
use heapless::Vec;
use mad_core::attr::modifier::{Modifier, VPortPKeyBlock};
use mad_core::attr::{
    AttributeId, CapabilityMask2, PortState, VPortInfo, VPortPKeyTable, VirtualizationInfo,
};
use mad_core::{Guid, Lid, Method, PKey, Smp, Status};

/// VFs a hypervisor HCA can carry.
pub const MAX_VFS: usize = 128;

/// Entries of a VF's P_Key table (one VPortPKeyTable block). A fresh VF
/// holds the default P_Key, full, at index 0, as a fresh port does.
pub const VF_PKEY_ENTRIES: usize = 32;

/// The vports (VFs) behind the PF, indexed 1..=n (vport 0 is the PF).
#[derive(Clone, Debug, Default)]
pub struct VPorts {
    /// VPortInfo of VF i at index i − 1.
    pub vfs: Vec<VPortInfo, MAX_VFS>,
    /// The P_Key table of VF i at index i − 1: what the VF's packets carry
    /// and what it accepts (IBA 10.9), as its own port's would.
    pub pkeys: Vec<[PKey; VF_PKEY_ENTRIES], MAX_VFS>,
    /// Client reregistrations the SM asked of VF i (a Set(VPortInfo) with
    /// VPortClientReregister) at index i − 1: events to the VM's SA
    /// clients, as PortInfo's ClientReregister is to the PF's. The bit is
    /// not kept: a Get reads 0, the Set's response 1.
    pub reregistrations: Vec<u32, MAX_VFS>,
    /// VirtualizationInfo.VPortStateChange.
    pub state_change: bool,
}

impl VPorts {
    fn info(&self) -> VirtualizationInfo {
        let top = self
            .vfs
            .iter()
            .rposition(|v| v.vport_state != PortState::Down)
            .map_or(0, |i| i as u16 + 1);
        VirtualizationInfo {
            vport_cap: self.vfs.len() as u16,
            vport_index_top: top,
            virtualization_enable: true,
            vclient_reregister: false,
            vport_state_change: self.state_change,
            virtualization_revision: 1,
            capability_mask: 0,
        }
    }

    fn set_vport(&mut self, index: usize, new: &VPortInfo) -> Result<(), Status> {
        let cur = *self.vfs.get(index - 1).ok_or(Status::INVALID_FIELD)?;
        let state = match new.vport_state {
            PortState::NoChange => cur.vport_state,
            s @ (PortState::Down | PortState::Init | PortState::Active) => s,
            _ => return Err(Status::INVALID_FIELD),
        };
        if new.lid_required && !(new.vport_lid.0 == 0 || new.vport_lid.is_unicast()) {
            return Err(Status::INVALID_FIELD);
        }
        if !new.lid_required && usize::from(new.lid_by_vport_index) > self.vfs.len() {
            return Err(Status::INVALID_FIELD);
        }
        let v = &mut self.vfs[index - 1];
        if v.vport_state != state {
            self.state_change = true;
        }
        v.vport_state = state;
        v.lid_required = new.lid_required;
        v.vport_lid = new.vport_lid;
        v.lid_by_vport_index = new.lid_by_vport_index;
        v.vport_guid = new.vport_guid;
        v.vport_client_reregister = false;
        if new.vport_client_reregister {
            if let Some(n) = self.reregistrations.get_mut(index - 1) {
                *n = n.saturating_add(1);
            }
        }
        Ok(())
    }
}

impl Extension for VPorts {
    fn attribute(
        &mut self,
        req: &Smp,
        out: &mut [u8; 64],
        _port: u8,
    ) -> Option<Result<(), Status>> {
        let set = req.method() == Method::Set;
        let am = req.attribute_modifier();
        Some(match req.attribute_id() {
            AttributeId::VirtualizationInfo => {
                if am != 0 {
                    return Some(Err(Status::INVALID_FIELD));
                }
                if set {
                    // Only VPortStateChange is writable: 1 clears it.
                    match VirtualizationInfo::decode(&req.data) {
                        Ok(v) if v.vport_state_change => self.state_change = false,
                        Ok(_) => {}
                        Err(_) => return Some(Err(Status::INVALID_FIELD)),
                    }
                }
                self.info().encode(out).map_err(|_| Status::INVALID_FIELD)
            }
            AttributeId::VPortInfo => {
                let index = (am & 0xFFFF) as usize;
                if am >> 16 != 0 || index == 0 || index > self.vfs.len() {
                    return Some(Err(Status::INVALID_FIELD));
                }
                let mut rereg = false;
                if set {
                    let new = match VPortInfo::decode(&req.data) {
                        Ok(v) => v,
                        Err(_) => return Some(Err(Status::INVALID_FIELD)),
                    };
                    if let Err(e) = self.set_vport(index, &new) {
                        return Some(Err(e));
                    }
                    rereg = new.vport_client_reregister;
                }
                VPortInfo {
                    vport_client_reregister: rereg,
                    ..self.vfs[index - 1]
                }
                .encode(out)
                .map_err(|_| Status::INVALID_FIELD)
            }
            AttributeId::VPortPKeyTable => {
                let Ok(at) = VPortPKeyBlock::decode("VPortPKeyTable", am) else {
                    return Some(Err(Status::INVALID_FIELD));
                };
                let vf = usize::from(at.vport);
                if vf > self.pkeys.len() || at.block != 0 {
                    return Some(Err(Status::INVALID_FIELD));
                }
                if set {
                    match VPortPKeyTable::decode(&req.data) {
                        Ok(t) => self.pkeys[vf - 1] = t.p_keys,
                        Err(_) => return Some(Err(Status::INVALID_FIELD)),
                    }
                }
                VPortPKeyTable {
                    p_keys: self.pkeys[vf - 1],
                }
                .encode(out)
                .map_err(|_| Status::INVALID_FIELD)
            }
            _ => return None,
        })
    }
}

impl VPorts {
    /// The P_Key table of the enabled VF that holds `lid`, if any.
    pub fn pkeys_of_lid(&self, lid: Lid) -> Option<&[PKey]> {
        let i = (self.vfs.iter())
            .position(|v| lid.0 != 0 && v.vport_state != PortState::Down && v.vport_lid == lid)?;
        self.pkeys.get(i).map(|t| &t[..])
    }
}

/// Ports a hypervisor HCA can have, each with a vSwitch and VFs of its
/// own.
pub const MAX_HYPERVISOR_PORTS: usize = 2;

/// A hypervisor: the PF's agent plus the VFs' vports of each port.
#[derive(Clone, Debug)]
pub struct Hypervisor {
    /// The PF (a CA of one or two ports, each advertising virtualization).
    pub pf: CaSma,
    /// The VFs behind each port: port p's at index p − 1.
    pub vports: Vec<VPorts, MAX_HYPERVISOR_PORTS>,
}

/// The vports of the port an SMP arrived at.
struct AtPort<'a>(&'a mut Vec<VPorts, MAX_HYPERVISOR_PORTS>);

impl Extension for AtPort<'_> {
    fn attribute(&mut self, req: &Smp, out: &mut [u8; 64], port: u8) -> Option<Result<(), Status>> {
        let v = self.0.get_mut(usize::from(port).checked_sub(1)?)?;
        v.attribute(req, out, port)
    }
}

impl Hypervisor {
    /// A one-port hypervisor with `vfs` VFs (at most [`MAX_VFS`]), all
    /// disabled. VF i's own GUID is `guid + 0x100 + i`.
    pub fn new(guid: u64, vfs: usize, description: &str) -> Self {
        Self::with_ports(guid, 1, vfs, description)
    }

    /// A hypervisor of `ports` ports (1 to [`MAX_HYPERVISOR_PORTS`]; more
    /// are cut), each a vSwitch with `vfs` VFs of its own (at most
    /// [`MAX_VFS`]), all disabled. VF i of port p has the own GUID
    /// `guid + 0x100 · p + i`.
    pub fn with_ports(guid: u64, ports: u8, vfs: usize, description: &str) -> Self {
        let ports = ports.clamp(1, MAX_HYPERVISOR_PORTS as u8);
        let mut pf = CaSma::new(&NodeSpec::ca(guid, ports, description));
        let mut all = Vec::new();
        for p in 1..=ports {
            if let Some(x) = pf.model.ports.get_mut(usize::from(p)) {
                x.info.capability_mask2 |= CapabilityMask2::IS_VIRTUALIZATION_SUPPORTED;
            }
            let mut vports = VPorts::default();
            for i in 1..=vfs.min(MAX_VFS) {
                let _ = vports.vfs.push(VPortInfo {
                    vport_state: PortState::Down,
                    lid_required: true,
                    vguid_cap: 1,
                    vport_capability_mask: 1,
                    vport_guid: Guid(guid + 0x100 * u64::from(p) + i as u64),
                    ..VPortInfo::default()
                });
                let mut t = [PKey(0); VF_PKEY_ENTRIES];
                t[0] = PKey::DEFAULT_FULL;
                let _ = vports.pkeys.push(t);
                let _ = vports.reregistrations.push(0);
            }
            let _ = all.push(vports);
        }
        Hypervisor { pf, vports: all }
    }

    /// Handles an SMP delivered to the PF's port `port` (see
    /// [`super::Sma::process`]); the virtualization attributes are that
    /// port's.
    pub fn process(&mut self, req: &Smp, port: u8, now_ms: u64) -> Option<Smp> {
        self.pf
            .process_with(req, port, now_ms, &mut AtPort(&mut self.vports))
    }

    /// The PF's LID (its port 1's).
    pub fn lid(&self) -> Lid {
        self.pf.model.lid(1)
    }

    /// The VFs behind port `port`, if it has any.
    pub fn vports_at(&self, port: u8) -> Option<&VPorts> {
        self.vports.get(usize::from(port).checked_sub(1)?)
    }

    /// True when a packet for `lid` is this hypervisor's, by any port.
    pub fn owns(&self, lid: Lid) -> bool {
        (1..=self.vports.len() as u8).any(|p| self.owns_at(p, lid))
    }

    /// True when a packet for `lid` that reaches port `port` is delivered:
    /// that port's PF LID, or the LID of an enabled VF behind it.
    pub fn owns_at(&self, port: u8, lid: Lid) -> bool {
        lid.0 != 0
            && (self.pf.model.owns_lid(port, lid)
                || self.vports_at(port).is_some_and(|v| {
                    v.vfs
                        .iter()
                        .any(|v| v.vport_state != PortState::Down && v.vport_lid == lid)
                }))
    }
}
