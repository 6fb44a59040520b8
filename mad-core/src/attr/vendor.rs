//! Vendor virtualization attributes 0xFFB0–0xFFB6 (NVIDIA/Mellanox vports).
//!
//! ibkit's own vSwitch presents itself with standard attributes only (a
//! switch with the PF and VFs behind it as CAs), so any SM can manage it;
//! these are encoded so that tools can read fabrics that use vports.

use super::modifier::Raw;
use super::port_info::PortState;
use crate::field::Bytes;
use crate::types::Guid;

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
    VPortInfo, "VPortInfo", "VPortInfo (0xFFB1): one vport's identity, LID and state.";
    VNodeDescription, "VNodeDescription", "VNodeDescription (0xFFB4): a vnode's description text.";
    VPortGuidInfo, "VPortGUIDInfo", "VPortGUIDInfo (0xFFB5): a block of a vport's GUIDs.";
    VPortPKeyTable, "VPortPKeyTable", "VPortPKeyTable (0xFFB6): a block of a vport's P_Keys.";
}

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
}
