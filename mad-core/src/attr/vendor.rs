//! Vendor virtualization attributes 0xFFB0–0xFFB6 (NVIDIA/Mellanox vports).
//!
//! ibkit's SM manages the VFs of a hypervisor through VirtualizationInfo
//! and VPortInfo on the PF's port (one SMP sets a VF's LID, vGUID and
//! state); `smi::sma::vswitch` also offers a vSwitch HCA that shows itself
//! with standard attributes only (a switch with the PF and VFs behind it).

use super::modifier::{Raw, VPortPKeyBlock};
use super::port_info::PortState;
use crate::field::Bytes;
use crate::types::{Guid, Lid, PKey};

bitstruct! {
    /// VirtualizationInfo (0xFFB0): a physical port's vport capabilities.
    /// Layout from NVIDIA's ibutils2 (ibis) `SMP_VirtualizationInfo`
    /// register description, converted to spec bit offsets.
    pub struct VirtualizationInfo("VirtualizationInfo", 64) {
        /// Highest vport index the port supports.
        vport_cap: u16 = 0, 16;
        /// Highest vport index whose VPortInfo.VPortEnable is set.
        vport_index_top: u16 = 16, 16;
        /// Virtualization enabled (vport 0 then has its own PortState).
        virtualization_enable: bool = 32, 1;
        /// SM asks every vport's clients to re-register with the SA.
        vclient_reregister: bool = 33, 1;
        /// Some vport changed state (the SM polls and clears it).
        vport_state_change: bool = 34, 1;
        /// Virtualization revision of the SMA.
        virtualization_revision: u8 = 48, 8;
        /// Optional virtualization capabilities (all reserved so far).
        capability_mask: u8 = 56, 8;
    }
}
impl_attribute!(VirtualizationInfo, VirtualizationInfo, Raw);

bitstruct! {
    /// VPortState (0xFFB3): the PortState of 128 vports per block (layout
    /// from ibis `SMP_VPortState`: 4 bits each, vport 0 in the high nibble).
    /// The modifier is the block number.
    pub struct VPortState("VPortState", 64) {
        /// `vport_state[i]` is the state of vport 128·block + i.
        vport_state: [PortState; 128] = 0, 512;
    }
}
impl_attribute!(VPortState, VPortState, Raw);

bitstruct! {
    /// VNodeInfo: the virtual node a vport belongs to.
    pub struct VNodeInfo("VNodeInfo", 64) {
        /// P_Key entries of the vnode.
        partition_cap: u16 = 0, 16;
        /// Vnode port that received the SMP.
        local_port_num: u8 = 16, 8;
        /// Vports on the vnode.
        num_ports: u8 = 24, 8;
        /// GUID of the vnode.
        vnode_guid: Guid = 32, 64;
    }
}
impl_attribute!(VNodeInfo, VNodeInfo, Raw);

bitstruct! {
    /// VPortInfo (0xFFB1): one vport's state, LID and GUID. Layout from
    /// NVIDIA's OpenSM `ib_vport_info_t` masks and ibis `SMP_VPortInfo`,
    /// which agree. The modifier carries the vport index; its exact
    /// packing is not public, and ibkit puts the index in bits 15..0.
    pub struct VPortInfo("VPortInfo", 64) {
        /// The vport's logical state (Down also means the vport is disabled).
        vport_state: PortState = 0, 4;
        /// Ask the vport's clients to re-register with the SA.
        vport_client_reregister: bool = 4, 1;
        /// The vport needs a LID of its own (`vport_lid`).
        lid_required: bool = 5, 1;
        /// Entries in the vport's VPortGUIDInfo.
        vguid_cap: u8 = 8, 8;
        /// VPortCapabilityMask (IsCommunicationManagementSupported = bit 0, …).
        vport_capability_mask: u16 = 16, 16;
        /// P_Key violations (saturating).
        p_key_violations: u16 = 32, 16;
        /// Q_Key violations (saturating).
        q_key_violations: u16 = 48, 16;
        /// The LID the SM gave the vport (when `lid_required`).
        vport_lid: Lid = 64, 16;
        /// The vport whose LID this one borrows (when not `lid_required`).
        lid_by_vport_index: u16 = 80, 16;
        /// The vport's port GUID (a VM's vGUID).
        vport_guid: Guid = 96, 64;
        /// Opaque profile value.
        vport_profile: u64 = 160, 64;
    }
}
impl_attribute!(VPortInfo, VPortInfo, Raw);

macro_rules! raw_vendor {
    ($($t:ident, $name:literal, $doc:literal;)*) => {$(
        bitstruct! {
            #[doc = $doc]
            ///
            /// No public source we could consult gives this layout: the data
            /// is exposed as raw bytes and the modifier kept raw.
            pub struct $t($name, 64) {
                /// Raw data.
                data: Bytes<64> = 0, 512;
            }
        }
        impl_attribute!($t, $t, Raw);
    )*};
}

raw_vendor! {
    VNodeDescription, "VNodeDescription", "VNodeDescription (0xFFB4): a vnode's description text.";
    VPortGuidInfo, "VPortGUIDInfo", "VPortGUIDInfo (0xFFB5): a block of a vport's GUIDs.";
}

bitstruct! {
    /// VPortPKeyTable (0xFFB6): one block of 32 P_Keys of a vport (a VF).
    /// ibis reads it into its `SMP_PKeyTable`, P_KeyTable's layout; the
    /// modifier is [`VPortPKeyBlock`] (ibkit's packing).
    pub struct VPortPKeyTable("VPortPKeyTable", 64) {
        /// P_Key entries 32·block … 32·block+31 of the vport.
        p_keys: [PKey; 32] = 0, 512;
    }
}
impl_attribute!(VPortPKeyTable, VPortPKeyTable, VPortPKeyBlock);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtualization_info_positions() {
        let mut b = [0u8; 64];
        b[0..2].copy_from_slice(&16u16.to_be_bytes());
        b[2..4].copy_from_slice(&3u16.to_be_bytes());
        b[4] = 0x80 | 0x20;
        b[6] = 1;
        let v = VirtualizationInfo::decode(&b).unwrap();
        assert_eq!((v.vport_cap, v.vport_index_top), (16, 3));
        assert!(v.virtualization_enable && v.vport_state_change && !v.vclient_reregister);
        assert_eq!(v.virtualization_revision, 1);
    }

    #[test]
    fn vport_pkey_table_is_a_pkey_block_addressed_by_vport_and_block() {
        use crate::attr::modifier::Modifier;
        let mut b = [0u8; 64];
        b[0..2].copy_from_slice(&0xFFFFu16.to_be_bytes());
        b[2..4].copy_from_slice(&0x8010u16.to_be_bytes());
        let t = VPortPKeyTable::decode(&b).unwrap();
        assert_eq!(
            (t.p_keys[0], t.p_keys[1], t.p_keys[2]),
            (PKey(0xFFFF), PKey(0x8010), PKey(0))
        );
        let mut out = [0u8; 64];
        t.encode(&mut out).unwrap();
        assert_eq!(out, b);
        let am = VPortPKeyBlock { vport: 3, block: 1 };
        assert_eq!(am.encode(), 0x0003_0001);
        assert_eq!(
            VPortPKeyBlock::decode("VPortPKeyTable", 0x0003_0001).unwrap(),
            am
        );
        assert!(VPortPKeyBlock::decode("VPortPKeyTable", 0x0000_0001).is_err());
        assert!(VPortPKeyBlock::decode("VPortPKeyTable", 0x0001_0800).is_err());
    }

    #[test]
    fn vport_info_positions() {
        let mut b = [0u8; 64];
        b[0] = 0x40 | 0x04; // Active, LidRequired
        b[1] = 8;
        b[8..10].copy_from_slice(&0x1234u16.to_be_bytes());
        b[10..12].copy_from_slice(&7u16.to_be_bytes());
        b[12..20].copy_from_slice(&0x0002_c903_0000_0001u64.to_be_bytes());
        let v = VPortInfo::decode(&b).unwrap();
        assert_eq!(v.vport_state, PortState::Active);
        assert!(v.lid_required && !v.vport_client_reregister);
        assert_eq!(
            (v.vguid_cap, v.vport_lid, v.lid_by_vport_index),
            (8, Lid(0x1234), 7)
        );
        assert_eq!(v.vport_guid, Guid(0x0002_c903_0000_0001));
        let mut out = [0u8; 64];
        v.encode(&mut out).unwrap();
        assert_eq!(out, b);
    }
}
