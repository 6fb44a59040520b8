//! SwitchInfo (0x0012): a switch's forwarding-table capacities and state.

bitstruct! {
    /// SwitchInfo (20 bytes).
    pub struct SwitchInfo("SwitchInfo", 20) {
        /// Entries the linear forwarding table can hold.
        linear_fdb_cap: u16 = 0, 16;
        /// Entries the random forwarding table can hold.
        random_fdb_cap: u16 = 16, 16;
        /// Entries the multicast forwarding table can hold.
        multicast_fdb_cap: u16 = 32, 16;
        /// Highest LID the linear forwarding table forwards.
        linear_fdb_top: u16 = 48, 16;
        /// Port for unicast LIDs not in the random table.
        default_port: u8 = 64, 8;
        /// Port for multicast from a non-primary port.
        default_multicast_primary_port: u8 = 72, 8;
        /// Port for multicast arriving on the primary port.
        default_multicast_not_primary_port: u8 = 80, 8;
        /// Packet lifetime at the switch (4.096 µs × 2^value).
        life_time_value: u8 = 88, 5;
        /// Set by the switch on any port state change; a Set writing 1 clears it.
        port_state_change: bool = 93, 1;
        /// Optimized SL-to-VL mapping programming supported.
        optimized_sl_to_vl_mapping_programming: u8 = 94, 2;
        /// LIDs per port (random forwarding).
        lids_per_port: u16 = 96, 16;
        /// P_Keys the switch can enforce on its external ports.
        partition_enforcement_cap: u16 = 112, 16;
        /// Inbound partition enforcement supported.
        inbound_enforcement_cap: bool = 128, 1;
        /// Outbound partition enforcement supported.
        outbound_enforcement_cap: bool = 129, 1;
        /// Raw inbound filtering supported.
        filter_raw_inbound_cap: bool = 130, 1;
        /// Raw outbound filtering supported.
        filter_raw_outbound_cap: bool = 131, 1;
        /// Port 0 is an enhanced port (supports link-layer services).
        enhanced_port0: bool = 132, 1;
        /// Highest multicast LID in use (when supported).
        multicast_fdb_top: u16 = 144, 16;
    }
}

impl SwitchInfo {
    /// Number of linear forwarding table blocks in use: LinearFDBTop / 64 + 1.
    pub fn lft_blocks_in_use(&self) -> u16 {
        self.linear_fdb_top / 64 + 1
    }
    /// Checks capacities against the LID space.
    pub fn check(&self) -> Result<(), crate::Error> {
        if self.linear_fdb_cap > 0xC000 {
            return Err(crate::Error::InvalidField {
                what: "SwitchInfo",
                field: "linear_fdb_cap",
                value: self.linear_fdb_cap.into(),
                expected: "at most 49152 (the unicast LID space)",
            });
        }
        if self.multicast_fdb_cap > 0x4000 {
            return Err(crate::Error::InvalidField {
                what: "SwitchInfo",
                field: "multicast_fdb_cap",
                value: self.multicast_fdb_cap.into(),
                expected: "at most 16384 (the multicast LID space)",
            });
        }
        Ok(())
    }
}
