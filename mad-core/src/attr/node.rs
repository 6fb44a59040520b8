//! NodeDescription (0x0010) and NodeInfo (0x0011).

use crate::field::Text;
use crate::types::Guid;

enum_with_unknown! {
    /// NodeInfo.NodeType.
    pub enum NodeType(u8) {
        /// Channel adapter.
        ChannelAdapter = 1,
        /// Switch.
        Switch = 2,
        /// Router.
        Router = 3,
    }
}

bitstruct! {
    /// NodeDescription: 64 bytes of UTF-8 text, not necessarily NUL terminated.
    pub struct NodeDescription("NodeDescription", 64) {
        /// The description string.
        node_string: Text<64> = 0, 512;
    }
}

bitstruct! {
    /// NodeInfo: what a node is and how it is identified (40 bytes).
    pub struct NodeInfo("NodeInfo", 40) {
        /// BaseVersion of the MADs the node supports (1).
        base_version: u8 = 0, 8;
        /// ClassVersion of the SM class (1).
        class_version: u8 = 8, 8;
        /// Channel adapter, switch or router.
        node_type: NodeType = 16, 8;
        /// Physical ports (a switch's port 0 not counted).
        num_ports: u8 = 24, 8;
        /// GUID shared by the nodes of one system.
        system_image_guid: Guid = 32, 64;
        /// The node's GUID.
        node_guid: Guid = 96, 64;
        /// GUID of the port the SMP was received on (a switch: port 0's).
        port_guid: Guid = 160, 64;
        /// Number of P_Key table entries.
        partition_cap: u16 = 224, 16;
        /// Vendor device ID.
        device_id: u16 = 240, 16;
        /// Device revision.
        revision: u32 = 256, 32;
        /// Port the SMP was received on.
        local_port_num: u8 = 288, 8;
        /// IEEE OUI of the vendor.
        vendor_id: u32 = 296, 24;
    }
}

impl NodeInfo {
    /// Checks the enumerations: node type 1–3 and a switch's port count.
    pub fn check(&self) -> Result<(), crate::Error> {
        if !self.node_type.is_known() {
            return Err(crate::Error::InvalidField {
                what: "NodeInfo",
                field: "node_type",
                value: u8::from(self.node_type).into(),
                expected: "1 (CA), 2 (switch) or 3 (router)",
            });
        }
        if self.num_ports == 255 {
            return Err(crate::Error::InvalidField {
                what: "NodeInfo",
                field: "num_ports",
                value: 255,
                expected: "0..=254",
            });
        }
        Ok(())
    }
}
