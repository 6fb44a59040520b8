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
        v.vport_client_reregister = new.vport_client_reregister;
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
                if set {
                    let new = match VPortInfo::decode(&req.data) {
                        Ok(v) => v,
                        Err(_) => return Some(Err(Status::INVALID_FIELD)),
                    };
                    if let Err(e) = self.set_vport(index, &new) {
                        return Some(Err(e));
                    }
                }
                self.vfs[index - 1]
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

/// A hypervisor: the PF's agent plus the VFs' vports.
#[derive(Clone, Debug)]
pub struct Hypervisor {
    /// The PF (a one-port CA that advertises virtualization).
    pub pf: CaSma,
    /// The VFs.
    pub vports: VPorts,
}

impl Hypervisor {
    /// A hypervisor with `vfs` VFs (at most [`MAX_VFS`]), all disabled.
    /// VF i's own GUID is `guid + 0x100 + i`.
    pub fn new(guid: u64, vfs: usize, description: &str) -> Self {
        let mut pf = CaSma::new(&NodeSpec::ca(guid, 1, description));
        if let Some(p) = pf.model.ports.get_mut(1) {
            p.info.capability_mask2 |= CapabilityMask2::IS_VIRTUALIZATION_SUPPORTED;
        }
        let mut vports = VPorts::default();
        for i in 1..=vfs.min(MAX_VFS) {
            let _ = vports.vfs.push(VPortInfo {
                vport_state: PortState::Down,
                lid_required: true,
                vguid_cap: 1,
                vport_capability_mask: 1,
                vport_guid: Guid(guid + 0x100 + i as u64),
                ..VPortInfo::default()
            });
            let mut t = [PKey(0); VF_PKEY_ENTRIES];
            t[0] = PKey::DEFAULT_FULL;
            let _ = vports.pkeys.push(t);
        }
        Hypervisor { pf, vports }
    }

    /// Handles an SMP delivered to the PF's port (see [`super::Sma::process`]).
    pub fn process(&mut self, req: &Smp, port: u8, now_ms: u64) -> Option<Smp> {
        self.pf.process_with(req, port, now_ms, &mut self.vports)
    }

    /// The PF's LID.
    pub fn lid(&self) -> Lid {
        self.pf.model.lid(1)
    }

    /// True when a packet for `lid` is this hypervisor's: the PF's LID or
    /// the LID of an enabled VF.
    pub fn owns(&self, lid: Lid) -> bool {
        lid.0 != 0
            && (self.pf.model.owns_lid(1, lid)
                || self
                    .vports
                    .vfs
                    .iter()
                    .any(|v| v.vport_state != PortState::Down && v.vport_lid == lid))
    }
}
