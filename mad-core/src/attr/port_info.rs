//! PortInfo (0x0015) with its capability masks and enumerations,
//! PortInfoExtended (0x0033) and Mellanox ExtendedPortInfo (0xFF90).

use crate::error::Error;
use crate::field::GidPrefix;
use crate::types::{Lid, MKey};

bitflags::bitflags! {
    /// PortInfo.CapabilityMask (bit n = value 1 << n).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
    pub struct CapabilityMask: u32 {
        /// An SM runs on this port.
        const IS_SM = 1 << 1;
        /// Notice attribute supported.
        const IS_NOTICE_SUPPORTED = 1 << 2;
        /// Traps supported.
        const IS_TRAP_SUPPORTED = 1 << 3;
        /// Optional IP datagram support.
        const IS_OPTIONAL_IPD_SUPPORTED = 1 << 4;
        /// Automatic path migration supported.
        const IS_AUTOMATIC_MIGRATION_SUPPORTED = 1 << 5;
        /// SL-to-VL mapping supported.
        const IS_SL_MAPPING_SUPPORTED = 1 << 6;
        /// M_Key kept in non-volatile memory.
        const IS_M_KEY_NVRAM = 1 << 7;
        /// P_Keys kept in non-volatile memory.
        const IS_P_KEY_NVRAM = 1 << 8;
        /// LedInfo supported.
        const IS_LED_INFO_SUPPORTED = 1 << 9;
        /// The SM on this port is disabled.
        const IS_SM_DISABLED = 1 << 10;
        /// SystemImageGUID supported.
        const IS_SYSTEM_IMAGE_GUID_SUPPORTED = 1 << 11;
        /// Trap 259 supported.
        const IS_P_KEY_SWITCH_EXTERNAL_PORT_TRAP_SUPPORTED = 1 << 12;
        /// CableInfo supported.
        const IS_CABLE_INFO_SUPPORTED = 1 << 13;
        /// Extended link speeds supported.
        const IS_EXTENDED_SPEEDS_SUPPORTED = 1 << 14;
        /// CapabilityMask2 is valid.
        const IS_CAPABILITY_MASK2_SUPPORTED = 1 << 15;
        /// Communication management supported.
        const IS_COMMUNICATION_MANAGEMENT_SUPPORTED = 1 << 16;
        /// SNMP tunnelling supported.
        const IS_SNMP_TUNNELING_SUPPORTED = 1 << 17;
        /// Reinit supported.
        const IS_REINIT_SUPPORTED = 1 << 18;
        /// Device management supported.
        const IS_DEVICE_MANAGEMENT_SUPPORTED = 1 << 19;
        /// Vendor classes supported.
        const IS_VENDOR_CLASS_SUPPORTED = 1 << 20;
        /// Directed-route notices supported.
        const IS_DR_NOTICE_SUPPORTED = 1 << 21;
        /// Trap 144 on capability changes supported.
        const IS_CAPABILITY_MASK_NOTICE_SUPPORTED = 1 << 22;
        /// Boot management supported.
        const IS_BOOT_MANAGEMENT_SUPPORTED = 1 << 23;
        /// LinkRoundTripLatency supported.
        const IS_LINK_ROUND_TRIP_LATENCY_SUPPORTED = 1 << 24;
        /// ClientReregister supported.
        const IS_CLIENT_REREGISTRATION_SUPPORTED = 1 << 25;
        /// OtherLocalChanges notices supported.
        const IS_OTHER_LOCAL_CHANGES_NOTICE_SUPPORTED = 1 << 26;
        /// LinkSpeedWidthPairsTable supported.
        const IS_LINK_SPEED_WIDTH_PAIRS_TABLE_SUPPORTED = 1 << 27;
        /// VendorSpecificMadsTable supported.
        const IS_VENDOR_SPECIFIC_MADS_TABLE_SUPPORTED = 1 << 28;
        /// Multicast P_Key trap suppression supported.
        const IS_MCAST_PKEY_TRAP_SUPPRESSION_SUPPORTED = 1 << 29;
        /// SwitchInfo.MulticastFDBTop supported.
        const IS_MULTICAST_FDB_TOP_SUPPORTED = 1 << 30;
        /// HierarchyInfo supported.
        const IS_HIERARCHY_INFO_SUPPORTED = 1 << 31;
    }
}
flags_field!(CapabilityMask, u32);

bitflags::bitflags! {
    /// PortInfo.CapabilityMask2.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
    pub struct CapabilityMask2: u16 {
        /// Set(NodeDescription) supported.
        const IS_SET_NODE_DESCRIPTION_SUPPORTED = 1 << 0;
        /// PortInfoExtended supported.
        const IS_PORT_INFO_EXTENDED_SUPPORTED = 1 << 1;
        /// Virtualization (vports) supported.
        const IS_VIRTUALIZATION_SUPPORTED = 1 << 2;
        /// SwitchPortStateTable supported.
        const IS_SWITCH_PORT_STATE_TABLE_SUPPORTED = 1 << 3;
        /// 2x link width supported.
        const IS_LINK_WIDTH_2X_SUPPORTED = 1 << 4;
        /// HDR link speed supported.
        const IS_LINK_SPEED_HDR_SUPPORTED = 1 << 5;
        /// Extended M_Key protect bits supported.
        const IS_M_KEY_PROTECT_BITS_EXT_SUPPORTED = 1 << 6;
        /// Enhanced trap 128 supported.
        const IS_ENHANCED_TRAP128_SUPPORTED = 1 << 7;
        /// PartitionTop supported.
        const IS_PARTITION_TOP_SUPPORTED = 1 << 8;
        /// Enhanced QoS arbiter supported.
        const IS_ENHANCED_QOS_ARBITER_SUPPORTED = 1 << 9;
        /// NDR link speed supported.
        const IS_LINK_SPEED_NDR_SUPPORTED = 1 << 10;
    }
}
flags_field!(CapabilityMask2, u16);

bitflags::bitflags! {
    /// LinkWidthEnabled/Supported/Active (Enabled 255 = "set to Supported").
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
    pub struct LinkWidth: u8 {
        /// 1x.
        const W1X = 1;
        /// 4x.
        const W4X = 2;
        /// 8x.
        const W8X = 4;
        /// 12x.
        const W12X = 8;
        /// 2x.
        const W2X = 16;
    }
}
flags_field!(LinkWidth, u8);

bitflags::bitflags! {
    /// LinkSpeedSupported/Enabled/Active (Enabled 15 = "set to Supported";
    /// Active 0 = an extended speed is active).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
    pub struct LinkSpeed: u8 {
        /// 2.5 Gb/s (SDR).
        const SDR = 1;
        /// 5 Gb/s (DDR).
        const DDR = 2;
        /// 10 Gb/s (QDR).
        const QDR = 4;
    }
}
flags_field!(LinkSpeed, u8);

bitflags::bitflags! {
    /// LinkSpeedExtSupported/Enabled/Active (Enabled 30 = disable extended
    /// speeds, 31 = "set to Supported").
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
    pub struct LinkSpeedExt: u8 {
        /// 14 Gb/s (FDR).
        const FDR = 1;
        /// 25 Gb/s (EDR).
        const EDR = 2;
        /// 50 Gb/s (HDR).
        const HDR = 4;
        /// 100 Gb/s (NDR).
        const NDR = 8;
    }
}
flags_field!(LinkSpeedExt, u8);

enum_with_unknown! {
    /// PortInfo.PortState (logical link state).
    pub enum PortState(u8) {
        /// Set only: leave the state alone.
        NoChange = 0,
        /// Down.
        Down = 1,
        /// Initialize.
        Init = 2,
        /// Armed.
        Armed = 3,
        /// Active.
        Active = 4,
        /// ActiveDefer.
        ActiveDefer = 5,
    }
}

enum_with_unknown! {
    /// PortInfo.PortPhysicalState.
    pub enum PortPhysicalState(u8) {
        /// Set only: leave the state alone.
        NoChange = 0,
        /// Sleep.
        Sleep = 1,
        /// Polling.
        Polling = 2,
        /// Disabled.
        Disabled = 3,
        /// PortConfigurationTraining.
        PortConfigurationTraining = 4,
        /// LinkUp.
        LinkUp = 5,
        /// LinkErrorRecovery.
        LinkErrorRecovery = 6,
        /// PhyTest.
        PhyTest = 7,
    }
}

enum_with_unknown! {
    /// PortInfo.LinkDownDefaultState.
    pub enum LinkDownDefaultState(u8) {
        /// Set only: leave the state alone.
        NoChange = 0,
        /// Sleep.
        Sleep = 1,
        /// Polling.
        Polling = 2,
    }
}

enum_with_unknown! {
    /// NeighborMTU and MTUCap.
    pub enum Mtu(u8) {
        /// 256 bytes.
        Mtu256 = 1,
        /// 512 bytes.
        Mtu512 = 2,
        /// 1024 bytes.
        Mtu1024 = 3,
        /// 2048 bytes.
        Mtu2048 = 4,
        /// 4096 bytes.
        Mtu4096 = 5,
    }
}

enum_with_unknown! {
    /// VLCap and OperationalVLs (OperationalVLs 0 = no change).
    pub enum VlCap(u8) {
        /// Set only: no change.
        NoChange = 0,
        /// VL0.
        Vl0 = 1,
        /// VL0–VL1.
        Vl0To1 = 2,
        /// VL0–VL3.
        Vl0To3 = 3,
        /// VL0–VL7.
        Vl0To7 = 4,
        /// VL0–VL14.
        Vl0To14 = 5,
    }
}

bitstruct! {
    /// PortInfo (64 bytes): a port's addresses, capabilities, link state and
    /// management-key protection.
    pub struct PortInfo("PortInfo", 64) {
        /// The port's management key.
        m_key: MKey = 0, 64;
        /// GID prefix of the subnet.
        gid_prefix: GidPrefix = 64, 64;
        /// Base LID.
        lid: Lid = 128, 16;
        /// LID of the master SM.
        master_sm_lid: Lid = 144, 16;
        /// What the port supports.
        capability_mask: CapabilityMask = 160, 32;
        /// Diagnostic code.
        diag_code: u16 = 192, 16;
        /// Seconds the M_Key protection lasts without a valid M_Key (0 = forever).
        m_key_lease_period: u16 = 208, 16;
        /// Port the SMP was received on.
        local_port_num: u8 = 224, 8;
        /// Enabled link widths.
        link_width_enabled: LinkWidth = 232, 8;
        /// Supported link widths.
        link_width_supported: LinkWidth = 240, 8;
        /// Active link width.
        link_width_active: LinkWidth = 248, 8;
        /// Supported link speeds.
        link_speed_supported: LinkSpeed = 256, 4;
        /// Logical link state.
        port_state: PortState = 260, 4;
        /// Physical link state.
        port_physical_state: PortPhysicalState = 264, 4;
        /// Physical state after a link goes down.
        link_down_default_state: LinkDownDefaultState = 268, 4;
        /// M_Key protection level (0–3).
        m_key_protect_bits: u8 = 272, 2;
        /// LID mask control: the port answers 2^LMC LIDs.
        lmc: u8 = 277, 3;
        /// Active link speed.
        link_speed_active: LinkSpeed = 280, 4;
        /// Enabled link speeds.
        link_speed_enabled: LinkSpeed = 284, 4;
        /// MTU agreed with the neighbour.
        neighbor_mtu: Mtu = 288, 4;
        /// SL to reach the master SM.
        master_sm_sl: u8 = 292, 4;
        /// Virtual lanes supported.
        vl_cap: VlCap = 296, 4;
        /// Initialisation requested by the SM.
        init_type: u8 = 300, 4;
        /// High-priority VL arbitration limit.
        vl_high_limit: u8 = 304, 8;
        /// Entries in the high-priority VL arbitration table.
        vl_arbitration_high_cap: u8 = 312, 8;
        /// Entries in the low-priority VL arbitration table.
        vl_arbitration_low_cap: u8 = 320, 8;
        /// Initialisation performed, as reported by the port.
        init_type_reply: u8 = 328, 4;
        /// Largest MTU supported.
        mtu_cap: Mtu = 332, 4;
        /// VL stall count.
        vl_stall_count: u8 = 336, 3;
        /// Head-of-queue lifetime.
        hoq_life: u8 = 339, 5;
        /// Virtual lanes in operation.
        operational_vls: VlCap = 344, 4;
        /// Inbound partition enforcement.
        partition_enforcement_inbound: bool = 348, 1;
        /// Outbound partition enforcement.
        partition_enforcement_outbound: bool = 349, 1;
        /// Raw inbound filtering.
        filter_raw_inbound: bool = 350, 1;
        /// Raw outbound filtering.
        filter_raw_outbound: bool = 351, 1;
        /// Bad M_Key count.
        m_key_violations: u16 = 352, 16;
        /// Bad P_Key count.
        p_key_violations: u16 = 368, 16;
        /// Bad Q_Key count.
        q_key_violations: u16 = 384, 16;
        /// GUIDs the port supports (GUIDInfo entries).
        guid_cap: u8 = 400, 8;
        /// Asks the CA to re-register its SA subscriptions.
        client_reregister: bool = 408, 1;
        /// Multicast P_Key trap suppression.
        multicast_pkey_trap_suppression_enabled: u8 = 409, 2;
        /// Subnet timeout (4.096 µs × 2^value).
        subnet_time_out: u8 = 411, 5;
        /// Response time (4.096 µs × 2^value).
        resp_time_value: u8 = 419, 5;
        /// Local physical error threshold.
        local_phy_errors: u8 = 424, 4;
        /// Overrun error threshold.
        overrun_errors: u8 = 428, 4;
        /// Max credit hint.
        max_credit_hint: u16 = 432, 16;
        /// Active XDR extended speed.
        link_speed_ext_active2: u8 = 449, 2;
        /// Supported XDR extended speeds.
        link_speed_ext_supported2: u8 = 451, 2;
        /// Enabled XDR extended speeds.
        link_speed_ext_enabled2: u8 = 453, 3;
        /// Link round-trip latency.
        link_round_trip_latency: u32 = 456, 24;
        /// More capabilities (valid with IsCapabilityMask2Supported).
        capability_mask2: CapabilityMask2 = 480, 16;
        /// Active extended speed.
        link_speed_ext_active: LinkSpeedExt = 496, 4;
        /// Supported extended speeds.
        link_speed_ext_supported: LinkSpeedExt = 500, 4;
        /// Enabled extended speeds.
        link_speed_ext_enabled: LinkSpeedExt = 507, 5;
    }
}

impl PortInfo {
    /// Checks every enumerated field against the values the specification defines.
    pub fn check(&self) -> Result<(), Error> {
        fn bad(field: &'static str, value: u8, expected: &'static str) -> Error {
            Error::InvalidField {
                what: "PortInfo",
                field,
                value: value.into(),
                expected,
            }
        }
        let state = u8::from(self.port_state);
        if state > 5 {
            return Err(bad("port_state", state, "0..=5"));
        }
        let down = u8::from(self.link_down_default_state);
        if down > 2 {
            return Err(bad("link_down_default_state", down, "0..=2"));
        }
        let (nmtu, cap) = (u8::from(self.neighbor_mtu), u8::from(self.mtu_cap));
        if nmtu > 5 {
            return Err(bad("neighbor_mtu", nmtu, "0..=5"));
        }
        if cap > 5 {
            return Err(bad("mtu_cap", cap, "0..=5"));
        }
        let (vl, op) = (u8::from(self.vl_cap), u8::from(self.operational_vls));
        if vl > 5 {
            return Err(bad("vl_cap", vl, "0..=5"));
        }
        if op > 5 {
            return Err(bad("operational_vls", op, "0..=5"));
        }
        if self.lid.is_multicast() {
            return Err(Error::InvalidField {
                what: "PortInfo",
                field: "lid",
                value: self.lid.0.into(),
                expected: "a unicast LID",
            });
        }
        Ok(())
    }
}

enum_with_unknown! {
    /// PortInfoExtended.FECModeActive.
    pub enum FecMode(u16) {
        /// No FEC.
        NoFec = 0,
        /// FireCode FEC.
        FireCode = 1,
        /// RS-FEC.
        RsFec = 2,
        /// Low-latency RS-FEC.
        LowLatencyRsFec = 3,
    }
}

bitstruct! {
    /// PortInfoExtended (0x0033): forward error correction per speed.
    pub struct PortInfoExtended("PortInfoExtended", 64) {
        /// Bit 0: IsFECModeSupported.
        capability_mask: u32 = 0, 32;
        /// FEC in use.
        fec_mode_active: FecMode = 32, 16;
        /// FEC modes supported at FDR.
        fdr_fec_mode_supported: u16 = 48, 16;
        /// FEC modes enabled at FDR.
        fdr_fec_mode_enabled: u16 = 64, 16;
        /// FEC modes supported at EDR.
        edr_fec_mode_supported: u16 = 80, 16;
        /// FEC modes enabled at EDR.
        edr_fec_mode_enabled: u16 = 96, 16;
        /// FEC modes supported at HDR.
        hdr_fec_mode_supported: u16 = 112, 16;
        /// FEC modes enabled at HDR.
        hdr_fec_mode_enabled: u16 = 128, 16;
        /// FEC modes supported at NDR.
        ndr_fec_mode_supported: u16 = 144, 16;
        /// FEC modes enabled at NDR.
        ndr_fec_mode_enabled: u16 = 160, 16;
    }
}

bitstruct! {
    /// Mellanox ExtendedPortInfo (vendor 0xFF90): FDR10 speed control.
    pub struct MlnxExtPortInfo("MlnxExtPortInfo", 64) {
        /// State change enable.
        state_change_enable: u8 = 24, 8;
        /// Bit 0: FDR10 supported.
        link_speed_supported: u8 = 56, 8;
        /// Bit 0: FDR10 enabled.
        link_speed_enabled: u8 = 88, 8;
        /// Bit 0: FDR10 active.
        link_speed_active: u8 = 120, 8;
    }
}
