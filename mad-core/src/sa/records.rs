//! ClassPortInfo and the SA records of SMP attributes (IBA 15.2.5).

use super::sa_record;
use crate::attr::{
    GuidInfo, LinearForwardingTable, MulticastForwardingTable, NodeDescription, NodeInfo,
    PKeyTable, PortInfo, SlToVlMappingTable, SmInfo, SwitchInfo, VlArbitrationTable,
};
use crate::types::{Gid, Lid, PKey};

record_field!(NodeInfo);
record_field!(NodeDescription);
record_field!(PortInfo);
record_field!(SwitchInfo);
record_field!(SmInfo);
record_field!(LinearForwardingTable);
record_field!(MulticastForwardingTable);
record_field!(SlToVlMappingTable);
record_field!(VlArbitrationTable);
record_field!(PKeyTable);
record_field!(GuidInfo);

bitstruct! {
    /// ClassPortInfo (IBA 13.4.8.1, 72 bytes): what a class agent
    /// supports, where requests are redirected, and where traps go.
    pub struct ClassPortInfo("ClassPortInfo", 72) {
        /// BaseVersion (1).
        base_version: u8 = 0, 8;
        /// The class's version.
        class_version: u8 = 8, 8;
        /// CapabilityMask.
        capability_mask: u16 = 16, 16;
        /// CapabilityMask2.
        capability_mask2: u32 = 32, 27;
        /// RespTimeValue: 4.096 µs × 2^value.
        resp_time_value: u8 = 59, 5;
        /// Redirect: GID.
        redirect_gid: Gid = 64, 128;
        /// Redirect: traffic class.
        redirect_tc: u8 = 192, 8;
        /// Redirect: service level.
        redirect_sl: u8 = 200, 4;
        /// Redirect: flow label.
        redirect_fl: u32 = 204, 20;
        /// Redirect: LID (0: no redirection).
        redirect_lid: Lid = 224, 16;
        /// Redirect: P_Key.
        redirect_pkey: PKey = 240, 16;
        /// Redirect: QP.
        redirect_qp: u32 = 264, 24;
        /// Redirect: Q_Key.
        redirect_qkey: u32 = 288, 32;
        /// Trap: GID.
        trap_gid: Gid = 320, 128;
        /// Trap: traffic class.
        trap_tc: u8 = 448, 8;
        /// Trap: service level.
        trap_sl: u8 = 456, 4;
        /// Trap: flow label.
        trap_fl: u32 = 460, 20;
        /// Trap: LID.
        trap_lid: Lid = 480, 16;
        /// Trap: P_Key.
        trap_pkey: PKey = 496, 16;
        /// Trap: hop limit.
        trap_hl: u8 = 512, 8;
        /// Trap: QP.
        trap_qp: u32 = 520, 24;
        /// Trap: Q_Key.
        trap_qkey: u32 = 544, 32;
    }
}
sa_record!(ClassPortInfo, ClassPortInfo, []);

bitstruct! {
    /// NodeRecord (108 bytes): a node's NodeInfo and NodeDescription, by
    /// the LID of the port the NodeInfo was read through.
    pub struct NodeRecord("NodeRecord", 108) {
        /// LID of the port (a switch's port 0).
        lid: Lid = 0, 16;
        /// NodeInfo.
        node_info: NodeInfo = 32, 320;
        /// NodeDescription.
        node_description: NodeDescription = 352, 512;
    }
}
sa_record!(
    NodeRecord,
    NodeRecord,
    [
        ("lid", 0, 16),
        ("reserved", 16, 16),
        ("base_version", 32, 8),
        ("class_version", 40, 8),
        ("node_type", 48, 8),
        ("num_ports", 56, 8),
        ("system_image_guid", 64, 64),
        ("node_guid", 128, 64),
        ("port_guid", 192, 64),
        ("partition_cap", 256, 16),
        ("device_id", 272, 16),
        ("revision", 288, 32),
        ("local_port_num", 320, 8),
        ("vendor_id", 328, 24),
        ("node_description", 352, 512),
    ]
);

bitstruct! {
    /// PortInfoRecord (68 bytes): a port's PortInfo by the end port's LID
    /// and the port number.
    pub struct PortInfoRecord("PortInfoRecord", 68) {
        /// The end port's LID (a switch's port 0).
        endport_lid: Lid = 0, 16;
        /// The port.
        port_num: u8 = 16, 8;
        /// Options (IBA 1.3: which ports a GetTable returns).
        options: u8 = 24, 8;
        /// PortInfo.
        port_info: PortInfo = 32, 512;
    }
}
sa_record!(
    PortInfoRecord,
    PortInfoRecord,
    [
        ("endport_lid", 0, 16),
        ("port_num", 16, 8),
        ("options", 24, 8),
        ("m_key", 32, 64),
        ("gid_prefix", 96, 64),
        ("lid", 160, 16),
        ("master_sm_lid", 176, 16),
        ("capability_mask", 192, 32),
        ("diag_code", 224, 16),
        ("m_key_lease_period", 240, 16),
        ("local_port_num", 256, 8),
        ("link_width_enabled", 264, 8),
        ("link_width_supported", 272, 8),
        ("link_width_active", 280, 8),
        ("link_speed_supported", 288, 4),
        ("port_state", 292, 4),
        ("port_physical_state", 296, 4),
        ("link_down_default_state", 300, 4),
        ("m_key_protect_bits", 304, 2),
        ("reserved", 306, 3),
        ("lmc", 309, 3),
        ("link_speed_active", 312, 4),
        ("link_speed_enabled", 316, 4),
        ("neighbor_mtu", 320, 4),
        ("master_sm_sl", 324, 4),
        ("vl_cap", 328, 4),
        ("init_type", 332, 4),
        ("vl_high_limit", 336, 8),
        ("vl_arbitration_high_cap", 344, 8),
        ("vl_arbitration_low_cap", 352, 8),
        ("init_type_reply", 360, 4),
        ("mtu_cap", 364, 4),
        ("vl_stall_count", 368, 3),
        ("hoq_life", 371, 5),
        ("operational_vls", 376, 4),
        ("partition_enforcement_inbound", 380, 1),
        ("partition_enforcement_outbound", 381, 1),
        ("filter_raw_inbound", 382, 1),
        ("filter_raw_outbound", 383, 1),
        ("m_key_violations", 384, 16),
        ("p_key_violations", 400, 16),
        ("q_key_violations", 416, 16),
        ("guid_cap", 432, 8),
        ("client_reregister", 440, 1),
        ("multicast_pkey_trap_suppression_enabled", 441, 2),
        ("subnet_time_out", 443, 5),
        ("reserved", 448, 3),
        ("resp_time_value", 451, 5),
        ("local_phy_errors", 456, 4),
        ("overrun_errors", 460, 4),
        ("max_credit_hint", 464, 16),
        ("reserved", 480, 8),
        ("link_round_trip_latency", 488, 24),
        ("capability_mask2", 512, 16),
        ("link_speed_ext_active", 528, 4),
        ("link_speed_ext_supported", 532, 4),
        ("reserved", 536, 3),
        ("link_speed_ext_enabled", 539, 5),
    ]
);

bitstruct! {
    /// SwitchInfoRecord (24 bytes).
    pub struct SwitchInfoRecord("SwitchInfoRecord", 24) {
        /// The switch's LID.
        lid: Lid = 0, 16;
        /// SwitchInfo.
        switch_info: SwitchInfo = 32, 160;
    }
}
sa_record!(
    SwitchInfoRecord,
    SwitchInfoRecord,
    [("lid", 0, 16), ("reserved", 16, 16)]
);

bitstruct! {
    /// LinearForwardingTableRecord (72 bytes): one 64-entry block.
    pub struct LinearForwardingTableRecord("LinearForwardingTableRecord", 72) {
        /// The switch's LID.
        lid: Lid = 0, 16;
        /// The block.
        block_num: u16 = 16, 16;
        /// The block's entries.
        lft: LinearForwardingTable = 64, 512;
    }
}
sa_record!(
    LinearForwardingTableRecord,
    LinearForwardingTableRecord,
    [("lid", 0, 16), ("block_num", 16, 16), ("reserved", 32, 32),]
);

bitstruct! {
    /// MulticastForwardingTableRecord (72 bytes): one block of 32 MLIDs
    /// for 16 ports.
    pub struct MulticastForwardingTableRecord("MulticastForwardingTableRecord", 72) {
        /// The switch's LID.
        lid: Lid = 0, 16;
        /// Which 16 ports.
        position: u8 = 16, 4;
        /// The block.
        block_num: u16 = 23, 9;
        /// The block's port masks.
        mft: MulticastForwardingTable = 64, 512;
    }
}
sa_record!(
    MulticastForwardingTableRecord,
    MulticastForwardingTableRecord,
    [
        ("lid", 0, 16),
        ("position", 16, 4),
        ("reserved", 20, 3),
        ("block_num", 23, 9),
    ]
);

bitstruct! {
    /// SLtoVLMappingTableRecord (16 bytes).
    pub struct SlToVlMappingTableRecord("SLtoVLMappingTableRecord", 16) {
        /// The port's (a switch's) LID.
        lid: Lid = 0, 16;
        /// Input port (switches).
        input_port_num: u8 = 16, 8;
        /// Output port (switches).
        output_port_num: u8 = 24, 8;
        /// The table.
        sl_to_vl: SlToVlMappingTable = 64, 64;
    }
}
sa_record!(
    SlToVlMappingTableRecord,
    SlToVlMappingTableRecord,
    [
        ("lid", 0, 16),
        ("input_port_num", 16, 8),
        ("output_port_num", 24, 8),
    ]
);

bitstruct! {
    /// VLArbitrationTableRecord (72 bytes).
    pub struct VlArbitrationTableRecord("VLArbitrationTableRecord", 72) {
        /// The port's (a switch's) LID.
        lid: Lid = 0, 16;
        /// Output port.
        output_port_num: u8 = 16, 8;
        /// Block, as the SMP's modifier numbers it: 1 low entries 0–31,
        /// 2 low 32–63, 3 high 0–31, 4 high 32–63.
        block_num: u8 = 24, 8;
        /// The block.
        vl_arbitration: VlArbitrationTable = 64, 512;
    }
}
sa_record!(
    VlArbitrationTableRecord,
    VlArbitrationTableRecord,
    [
        ("lid", 0, 16),
        ("output_port_num", 16, 8),
        ("block_num", 24, 8),
    ]
);

bitstruct! {
    /// P_KeyTableRecord (72 bytes).
    pub struct PKeyTableRecord("P_KeyTableRecord", 72) {
        /// The port's (a switch's) LID.
        lid: Lid = 0, 16;
        /// The block of 32 P_Keys.
        block_num: u16 = 16, 16;
        /// The port (switches).
        port_num: u8 = 32, 8;
        /// The block.
        p_key_table: PKeyTable = 64, 512;
    }
}
sa_record!(
    PKeyTableRecord,
    PKeyTableRecord,
    [("lid", 0, 16), ("block_num", 16, 16), ("port_num", 32, 8),]
);

bitstruct! {
    /// GUIDInfoRecord (72 bytes).
    pub struct GuidInfoRecord("GUIDInfoRecord", 72) {
        /// The port's LID.
        lid: Lid = 0, 16;
        /// The block of 8 GUIDs.
        block_num: u8 = 16, 8;
        /// The block.
        guid_info: GuidInfo = 64, 512;
    }
}
sa_record!(
    GuidInfoRecord,
    GuidInfoRecord,
    [
        ("lid", 0, 16),
        ("block_num", 16, 8),
        ("reserved", 24, 8),
        ("reserved", 32, 32),
        ("guid0", 64, 64),
        ("guid1", 128, 64),
        ("guid2", 192, 64),
        ("guid3", 256, 64),
        ("guid4", 320, 64),
        ("guid5", 384, 64),
        ("guid6", 448, 64),
        ("guid7", 512, 64),
    ]
);

bitstruct! {
    /// LinkRecord (8 bytes): one cable, from a port to a port.
    pub struct LinkRecord("LinkRecord", 8) {
        /// LID of the node at the near end (a switch's port 0).
        from_lid: Lid = 0, 16;
        /// Its port.
        from_port_num: u8 = 16, 8;
        /// The far end's port.
        to_port_num: u8 = 24, 8;
        /// LID of the node at the far end.
        to_lid: Lid = 32, 16;
    }
}
sa_record!(
    LinkRecord,
    LinkRecord,
    [
        ("from_lid", 0, 16),
        ("from_port_num", 16, 8),
        ("to_port_num", 24, 8),
        ("to_lid", 32, 16),
    ]
);

bitstruct! {
    /// SMInfoRecord (25 bytes).
    pub struct SmInfoRecord("SMInfoRecord", 25) {
        /// The SM port's LID.
        lid: Lid = 0, 16;
        /// SMInfo.
        sm_info: SmInfo = 32, 168;
    }
}
sa_record!(
    SmInfoRecord,
    SmInfoRecord,
    [
        ("lid", 0, 16),
        ("reserved", 16, 16),
        ("guid", 32, 64),
        ("sm_key", 96, 64),
        ("act_count", 160, 32),
        ("priority", 192, 4),
        ("sm_state", 196, 4),
    ]
);
