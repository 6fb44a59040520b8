//! Vendor virtualization attributes 0xFFB0–0xFFB6 (NVIDIA/Mellanox vports).
//!
//! ibkit's own vSwitch presents itself with standard attributes only (a
//! switch with the PF and VFs behind it as CAs), so any SM can manage it;
//! these are encoded so that tools can read fabrics that use vports.

use super::modifier::Raw;
use crate::field::Bytes;
use crate::types::Guid;

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
    VirtualizationInfo, "VirtualizationInfo", "VirtualizationInfo (0xFFB0): a port's vport capabilities.";
    VPortInfo, "VPortInfo", "VPortInfo (0xFFB1): one vport's identity, LID and state.";
    VPortState, "VPortState", "VPortState (0xFFB3): the states of a block of vports.";
    VNodeDescription, "VNodeDescription", "VNodeDescription (0xFFB4): a vnode's description text.";
    VPortGuidInfo, "VPortGUIDInfo", "VPortGUIDInfo (0xFFB5): a block of a vport's GUIDs.";
    VPortPKeyTable, "VPortPKeyTable", "VPortPKeyTable (0xFFB6): a block of a vport's P_Keys.";
}
