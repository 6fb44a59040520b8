//! Performance Management (management class 0x04, IBA 16.1): the
//! attributes a Performance Management Agent (PMA) answers and
//! `perfquery` and `ibqueryerrors` ask for — PortCounters,
//! PortCountersExtended, and the optional PortRcvErrorDetails and
//! PortXmitDiscardDetails that break two of PortCounters' errors down by
//! cause; PortSamplesControl and PortSamplesResult, which every PMA has
//! (IBA 16.1.3.2–3: count chosen quantities over a timed interval), and
//! PortSamplesResultExtended, the same counts 64 bits wide — with
//! the class's attribute IDs, capability bits and the CounterSelect masks
//! a Set resets by.
//!
//! A PerfMgt MAD is the 24-byte common MAD header, 40 reserved bytes, and
//! the attribute's data from byte [`DATA_OFFSET`] on. Its ClassPortInfo is
//! the common one ([`crate::sa::ClassPortInfo`]).

/// The Performance Management class.
pub const PERF_CLASS: u8 = 0x04;
/// Its class version.
pub const PERF_CLASS_VERSION: u8 = 1;
/// Where a PerfMgt MAD's attribute data starts.
pub const DATA_OFFSET: usize = 64;

/// ClassPortInfo.
pub const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
/// PortCounters.
pub const ATTR_PORT_COUNTERS: u16 = 0x0012;
/// PortCountersExtended.
pub const ATTR_PORT_COUNTERS_EXTENDED: u16 = 0x001D;
/// PortRcvErrorDetails.
pub const ATTR_PORT_RCV_ERROR_DETAILS: u16 = 0x0015;
/// PortXmitDiscardDetails.
pub const ATTR_PORT_XMIT_DISCARD_DETAILS: u16 = 0x0016;
/// PortSamplesControl.
pub const ATTR_PORT_SAMPLES_CONTROL: u16 = 0x0010;
/// PortSamplesResult.
pub const ATTR_PORT_SAMPLES_RESULT: u16 = 0x0011;
/// PortSamplesResultExtended.
pub const ATTR_PORT_SAMPLES_RESULT_EXTENDED: u16 = 0x001E;

/// ClassPortInfo.CapabilityMask: PortSelect 0xFF reads or resets the sum of
/// every port of a switch (AllPortSelect).
pub const CAP_ALL_PORT_SELECT: u16 = 0x0100;
/// ClassPortInfo.CapabilityMask: PortCountersExtended is supported
/// (ExtendedWidthSupported).
pub const CAP_EXTENDED_WIDTH: u16 = 0x0200;
/// ClassPortInfo.CapabilityMask: PortCounters.PortXmitWait is kept
/// (PortCountersXmitWaitSupported).
pub const CAP_XMIT_WAIT: u16 = 0x1000;

/// PortSelect of the sum of every port ([`CAP_ALL_PORT_SELECT`]).
pub const ALL_PORTS: u8 = 0xFF;

/// PortCounters.CounterSelect: one bit per counter a Set clears, in the
/// order of the attribute (bit 0 SymbolErrorCounter … bit 15 PortRcvPkts).
pub mod select {
    /// SymbolErrorCounter.
    pub const SYMBOL_ERRORS: u16 = 1 << 0;
    /// LinkErrorRecoveryCounter.
    pub const LINK_ERROR_RECOVERY: u16 = 1 << 1;
    /// LinkDownedCounter.
    pub const LINK_DOWNED: u16 = 1 << 2;
    /// PortRcvErrors.
    pub const RCV_ERRORS: u16 = 1 << 3;
    /// PortRcvRemotePhysicalErrors.
    pub const RCV_REMOTE_PHYSICAL_ERRORS: u16 = 1 << 4;
    /// PortRcvSwitchRelayErrors.
    pub const RCV_SWITCH_RELAY_ERRORS: u16 = 1 << 5;
    /// PortXmitDiscards.
    pub const XMIT_DISCARDS: u16 = 1 << 6;
    /// PortXmitConstraintErrors.
    pub const XMIT_CONSTRAINT_ERRORS: u16 = 1 << 7;
    /// PortRcvConstraintErrors.
    pub const RCV_CONSTRAINT_ERRORS: u16 = 1 << 8;
    /// LocalLinkIntegrityErrors.
    pub const LOCAL_LINK_INTEGRITY_ERRORS: u16 = 1 << 9;
    /// ExcessiveBufferOverrunErrors.
    pub const EXCESSIVE_BUFFER_OVERRUN_ERRORS: u16 = 1 << 10;
    /// VL15Dropped.
    pub const VL15_DROPPED: u16 = 1 << 11;
    /// PortXmitData.
    pub const XMIT_DATA: u16 = 1 << 12;
    /// PortRcvData.
    pub const RCV_DATA: u16 = 1 << 13;
    /// PortXmitPkts.
    pub const XMIT_PKTS: u16 = 1 << 14;
    /// PortRcvPkts.
    pub const RCV_PKTS: u16 = 1 << 15;
    /// CounterSelect2 bit 0: PortXmitWait.
    pub const XMIT_WAIT2: u8 = 1 << 0;
}

/// PortCountersExtended.CounterSelect: one bit per counter a Set clears
/// (bit 0 PortXmitData … bit 7 PortMulticastRcvPkts).
pub mod select_extended {
    /// PortXmitData.
    pub const XMIT_DATA: u16 = 1 << 0;
    /// PortRcvData.
    pub const RCV_DATA: u16 = 1 << 1;
    /// PortXmitPkts.
    pub const XMIT_PKTS: u16 = 1 << 2;
    /// PortRcvPkts.
    pub const RCV_PKTS: u16 = 1 << 3;
    /// PortUnicastXmitPkts.
    pub const UNICAST_XMIT_PKTS: u16 = 1 << 4;
    /// PortUnicastRcvPkts.
    pub const UNICAST_RCV_PKTS: u16 = 1 << 5;
    /// PortMulticastXmitPkts.
    pub const MULTICAST_XMIT_PKTS: u16 = 1 << 6;
    /// PortMulticastRcvPkts.
    pub const MULTICAST_RCV_PKTS: u16 = 1 << 7;
}

bitstruct! {
    /// PortCounters (IBA 16.1.3.5, 44 bytes): a port's error and traffic
    /// counters. Each stops at its largest value rather than wrapping; the
    /// data counters count octets divided by 4.
    pub struct PortCounters("PortCounters", 44) {
        /// The port (0xFF: every port, [`CAP_ALL_PORT_SELECT`]).
        port_select: u8 = 8, 8;
        /// The counters a Set clears ([`select`]).
        counter_select: u16 = 16, 16;
        /// SymbolErrorCounter.
        symbol_errors: u16 = 32, 16;
        /// LinkErrorRecoveryCounter.
        link_error_recovery: u8 = 48, 8;
        /// LinkDownedCounter.
        link_downed: u8 = 56, 8;
        /// PortRcvErrors.
        rcv_errors: u16 = 64, 16;
        /// PortRcvRemotePhysicalErrors.
        rcv_remote_physical_errors: u16 = 80, 16;
        /// PortRcvSwitchRelayErrors.
        rcv_switch_relay_errors: u16 = 96, 16;
        /// PortXmitDiscards.
        xmit_discards: u16 = 112, 16;
        /// PortXmitConstraintErrors.
        xmit_constraint_errors: u8 = 128, 8;
        /// PortRcvConstraintErrors.
        rcv_constraint_errors: u8 = 136, 8;
        /// CounterSelect2 ([`select::XMIT_WAIT2`]).
        counter_select2: u8 = 144, 8;
        /// LocalLinkIntegrityErrors.
        local_link_integrity_errors: u8 = 152, 4;
        /// ExcessiveBufferOverrunErrors.
        excessive_buffer_overrun_errors: u8 = 156, 4;
        /// VL15Dropped.
        vl15_dropped: u16 = 176, 16;
        /// PortXmitData (octets / 4).
        xmit_data: u32 = 192, 32;
        /// PortRcvData (octets / 4).
        rcv_data: u32 = 224, 32;
        /// PortXmitPkts.
        xmit_pkts: u32 = 256, 32;
        /// PortRcvPkts.
        rcv_pkts: u32 = 288, 32;
        /// PortXmitWait.
        xmit_wait: u32 = 320, 32;
    }
}

bitstruct! {
    /// PortCountersExtended (IBA 16.1.4.11, 72 bytes): a port's traffic
    /// counters in 64 bits.
    pub struct PortCountersExtended("PortCountersExtended", 72) {
        /// The port (0xFF: every port).
        port_select: u8 = 8, 8;
        /// The counters a Set clears ([`select_extended`]).
        counter_select: u16 = 16, 16;
        /// PortXmitData (octets / 4).
        xmit_data: u64 = 64, 64;
        /// PortRcvData (octets / 4).
        rcv_data: u64 = 128, 64;
        /// PortXmitPkts.
        xmit_pkts: u64 = 192, 64;
        /// PortRcvPkts.
        rcv_pkts: u64 = 256, 64;
        /// PortUnicastXmitPkts.
        unicast_xmit_pkts: u64 = 320, 64;
        /// PortUnicastRcvPkts.
        unicast_rcv_pkts: u64 = 384, 64;
        /// PortMulticastXmitPkts.
        multicast_xmit_pkts: u64 = 448, 64;
        /// PortMulticastRcvPkts.
        multicast_rcv_pkts: u64 = 512, 64;
    }
}

bitstruct! {
    /// PortRcvErrorDetails (IBA 16.1.4, optional; 16 bytes): a port's received
    /// packets discarded, by cause — the first three are counted in
    /// PortCounters.PortRcvErrors, the last three in
    /// PortRcvSwitchRelayErrors. CounterSelect bit `i` clears the `i`-th
    /// counter (bit 0 PortLocalPhysicalErrors … bit 5 PortLoopingErrors).
    pub struct PortRcvErrorDetails("PortRcvErrorDetails", 16) {
        /// The port (0xFF: every port).
        port_select: u8 = 8, 8;
        /// The counters a Set clears.
        counter_select: u16 = 16, 16;
        /// PortLocalPhysicalErrors: packets received with a physical
        /// error (a bad CRC, a symbol error).
        local_physical_errors: u16 = 32, 16;
        /// PortMalformedPacketErrors.
        malformed_packet_errors: u16 = 48, 16;
        /// PortBufferOverrunErrors.
        buffer_overrun_errors: u16 = 64, 16;
        /// PortDLIDMappingErrors: packets a switch had no route for.
        dlid_mapping_errors: u16 = 80, 16;
        /// PortVLMappingErrors.
        vl_mapping_errors: u16 = 96, 16;
        /// PortLoopingErrors.
        looping_errors: u16 = 112, 16;
    }
}

bitstruct! {
    /// PortXmitDiscardDetails (IBA 16.1.4, optional; 12 bytes): the packets a port
    /// discarded instead of sending, by cause, each counted in
    /// PortCounters.PortXmitDiscards. CounterSelect bit `i` clears the
    /// `i`-th counter (bit 0 PortInactiveDiscards … bit 3
    /// PortSwHOQLifetimeLimitDiscards).
    pub struct PortXmitDiscardDetails("PortXmitDiscardDetails", 12) {
        /// The port (0xFF: every port).
        port_select: u8 = 8, 8;
        /// The counters a Set clears.
        counter_select: u16 = 16, 16;
        /// PortInactiveDiscards: the port was not active.
        inactive_discards: u16 = 32, 16;
        /// PortNeighborMTUDiscards: longer than the neighbour's MTU.
        neighbor_mtu_discards: u16 = 48, 16;
        /// PortSwLifetimeLimitDiscards: the switch lifetime limit ran out.
        sw_lifetime_limit_discards: u16 = 64, 16;
        /// PortSwHOQLifetimeLimitDiscards: the head-of-queue limit ran out.
        sw_hoq_lifetime_limit_discards: u16 = 80, 16;
    }
}

/// PortSamplesControl.SampleStatus and PortSamplesResult.SampleStatus.
pub mod sample_status {
    /// No sample is under way: the last one's counts can be read, and a
    /// Set may start another.
    pub const DONE: u8 = 0;
    /// A sample was started and waits SampleStart ticks to begin.
    pub const STARTED: u8 = 1;
    /// A sample is counting.
    pub const RUNNING: u8 = 2;
}

/// PortSamplesControl.CounterSelect values of the quantities every PMA
/// samples (IBA 16.1.3.2's mandatory ones, as the kernel's PMAs number
/// them).
pub mod sample_counter {
    /// PortXmitData: octets sent, divided by 4.
    pub const XMIT_DATA: u16 = 0x0001;
    /// PortRcvData: octets received, divided by 4.
    pub const RCV_DATA: u16 = 0x0002;
    /// PortXmitPkts.
    pub const XMIT_PKTS: u16 = 0x0003;
    /// PortRcvPkts.
    pub const RCV_PKTS: u16 = 0x0004;
    /// PortXmitWait: ticks during which the port had data to send and
    /// could not.
    pub const XMIT_WAIT: u16 = 0x0005;
}

bitstruct! {
    /// PortSamplesControl (IBA 16.1.3.2, 80 bytes): what a port's sampling
    /// counters count and when. A Set, taken only while SampleStatus is
    /// [`sample_status::DONE`], starts a sample: it begins SampleStart ticks
    /// later and counts for SampleInterval ticks, counter `i` counting the
    /// quantity CounterSelect`i` names, and PortSamplesResult reads the
    /// counts. CounterMask`i` (3 bits each) says what counter `i` can
    /// count (1: the mandatory quantities, [`sample_counter`]).
    pub struct PortSamplesControl("PortSamplesControl", 80) {
        /// OpCode.
        op_code: u8 = 0, 8;
        /// The port sampled.
        port_select: u8 = 8, 8;
        /// The sampling tick, the unit of SampleStart and SampleInterval.
        tick: u8 = 16, 8;
        /// The counters' width (4: 32 bits).
        counter_width: u8 = 29, 3;
        /// CounterMask0.
        counter_mask0: u8 = 34, 3;
        /// CounterMask1 … CounterMask9, 3 bits each, 1 first.
        counter_masks_1_to_9: u32 = 37, 27;
        /// CounterMask10 … CounterMask14, 3 bits each, 10 first.
        counter_masks_10_to_14: u16 = 65, 15;
        /// SampleMechanisms.
        sample_mechanisms: u8 = 80, 8;
        /// SampleStatus ([`sample_status`]).
        sample_status: u8 = 94, 2;
        /// OptionMask: the optional quantities the counters can count.
        option_mask: u64 = 96, 64;
        /// VendorMask.
        vendor_mask: u64 = 160, 64;
        /// Ticks between the Set and the sample's start.
        sample_start: u32 = 224, 32;
        /// Ticks the sample counts for.
        sample_interval: u32 = 256, 32;
        /// The requester's tag for the sample, repeated in PortSamplesResult.
        tag: u16 = 288, 16;
        /// CounterSelect0: what counter 0 counts ([`sample_counter`]).
        counter_select0: u16 = 304, 16;
        /// CounterSelect1.
        counter_select1: u16 = 320, 16;
        /// CounterSelect2.
        counter_select2: u16 = 336, 16;
        /// CounterSelect3.
        counter_select3: u16 = 352, 16;
        /// CounterSelect4.
        counter_select4: u16 = 368, 16;
        /// CounterSelect5.
        counter_select5: u16 = 384, 16;
        /// CounterSelect6.
        counter_select6: u16 = 400, 16;
        /// CounterSelect7.
        counter_select7: u16 = 416, 16;
        /// CounterSelect8.
        counter_select8: u16 = 432, 16;
        /// CounterSelect9.
        counter_select9: u16 = 448, 16;
        /// CounterSelect10.
        counter_select10: u16 = 464, 16;
        /// CounterSelect11.
        counter_select11: u16 = 480, 16;
        /// CounterSelect12.
        counter_select12: u16 = 496, 16;
        /// CounterSelect13.
        counter_select13: u16 = 512, 16;
        /// CounterSelect14.
        counter_select14: u16 = 528, 16;
        /// SamplesOnlyOptionMask.
        samples_only_option_mask: u64 = 576, 64;
    }
}

/// `impl $t` with `$get`, the fields `$f…` as an array, and `$set`, which
/// sets them from one: the numbered fields of an attribute read as a whole.
macro_rules! numbered_fields {
    ($t:ident, $n:literal x $e:ty, $get:ident / $set:ident, $what:literal, [$($f:ident),+ $(,)?]) => {
        impl $t {
            #[doc = concat!("The ", stringify!($n), " ", $what, " fields in order, ", $what, "0 first.")]
            pub fn $get(&self) -> [$e; $n] {
                [$(self.$f),+]
            }

            #[doc = concat!("Sets the ", stringify!($n), " ", $what, " fields, ", $what, "0 first.")]
            pub fn $set(&mut self, v: [$e; $n]) {
                [$(self.$f),+] = v;
            }
        }
    };
}

numbered_fields!(PortSamplesControl, 15 x u16, counter_selects / set_counter_selects,
    "CounterSelect", [
    counter_select0, counter_select1, counter_select2, counter_select3, counter_select4,
    counter_select5, counter_select6, counter_select7, counter_select8, counter_select9,
    counter_select10, counter_select11, counter_select12, counter_select13, counter_select14,
]);

bitstruct! {
    /// PortSamplesResult (IBA 16.1.3.3, 64 bytes): the counts of the last
    /// sample PortSamplesControl started, counter `i` what CounterSelect`i`
    /// named, once SampleStatus is [`sample_status::DONE`].
    pub struct PortSamplesResult("PortSamplesResult", 64) {
        /// The sample's tag, as PortSamplesControl set it.
        tag: u16 = 0, 16;
        /// SampleStatus ([`sample_status`]).
        sample_status: u8 = 30, 2;
        /// Counter0.
        counter0: u32 = 32, 32;
        /// Counter1.
        counter1: u32 = 64, 32;
        /// Counter2.
        counter2: u32 = 96, 32;
        /// Counter3.
        counter3: u32 = 128, 32;
        /// Counter4.
        counter4: u32 = 160, 32;
        /// Counter5.
        counter5: u32 = 192, 32;
        /// Counter6.
        counter6: u32 = 224, 32;
        /// Counter7.
        counter7: u32 = 256, 32;
        /// Counter8.
        counter8: u32 = 288, 32;
        /// Counter9.
        counter9: u32 = 320, 32;
        /// Counter10.
        counter10: u32 = 352, 32;
        /// Counter11.
        counter11: u32 = 384, 32;
        /// Counter12.
        counter12: u32 = 416, 32;
        /// Counter13.
        counter13: u32 = 448, 32;
        /// Counter14.
        counter14: u32 = 480, 32;
    }
}

numbered_fields!(PortSamplesResult, 15 x u32, counters / set_counters, "Counter", [
    counter0, counter1, counter2, counter3, counter4, counter5, counter6, counter7, counter8,
    counter9, counter10, counter11, counter12, counter13, counter14,
]);

bitstruct! {
    /// PortSamplesResultExtended (optional, 128 bytes): PortSamplesResult
    /// with counters 64 bits wide, as ExtendedWidth says.
    pub struct PortSamplesResultExtended("PortSamplesResultExtended", 128) {
        /// The sample's tag, as PortSamplesControl set it.
        tag: u16 = 0, 16;
        /// SampleStatus ([`sample_status`]).
        sample_status: u8 = 30, 2;
        /// ExtendedWidth: the counters' width (2: 64 bits).
        extended_width: u8 = 32, 2;
        /// Counter0.
        counter0: u64 = 64, 64;
        /// Counter1.
        counter1: u64 = 128, 64;
        /// Counter2.
        counter2: u64 = 192, 64;
        /// Counter3.
        counter3: u64 = 256, 64;
        /// Counter4.
        counter4: u64 = 320, 64;
        /// Counter5.
        counter5: u64 = 384, 64;
        /// Counter6.
        counter6: u64 = 448, 64;
        /// Counter7.
        counter7: u64 = 512, 64;
        /// Counter8.
        counter8: u64 = 576, 64;
        /// Counter9.
        counter9: u64 = 640, 64;
        /// Counter10.
        counter10: u64 = 704, 64;
        /// Counter11.
        counter11: u64 = 768, 64;
        /// Counter12.
        counter12: u64 = 832, 64;
        /// Counter13.
        counter13: u64 = 896, 64;
        /// Counter14.
        counter14: u64 = 960, 64;
    }
}

numbered_fields!(PortSamplesResultExtended, 15 x u64, counters / set_counters, "Counter", [
    counter0, counter1, counter2, counter3, counter4, counter5, counter6, counter7, counter8,
    counter9, counter10, counter11, counter12, counter13, counter14,
]);

/// PortSamplesResultExtended.ExtendedWidth: 64-bit counters.
pub const EXTENDED_WIDTH_64: u8 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sit_where_the_spec_puts_them() {
        let mut b = [0u8; 44];
        b[1] = 3; // PortSelect
        b[7] = 0x7f; // LinkDownedCounter
        b[19] = 0xa5; // LocalLinkIntegrity 0xa, ExcessiveBufferOverrun 5
        b[24..28].copy_from_slice(&1000u32.to_be_bytes()); // PortXmitData
        b[36..40].copy_from_slice(&7u32.to_be_bytes()); // PortRcvPkts
        let c = PortCounters::decode(&b).unwrap();
        assert_eq!(c.port_select, 3);
        assert_eq!(c.link_downed, 0x7f);
        assert_eq!(c.local_link_integrity_errors, 0xa);
        assert_eq!(c.excessive_buffer_overrun_errors, 5);
        assert_eq!(c.xmit_data, 1000);
        assert_eq!(c.rcv_pkts, 7);
        assert_eq!(c.to_bytes().unwrap(), b);

        let mut e = [0u8; 72];
        e[1] = 0xFF;
        e[64..72].copy_from_slice(&u64::MAX.to_be_bytes()); // multicast rcv
        e[8..16].copy_from_slice(&(1u64 << 40).to_be_bytes()); // xmit data
        let x = PortCountersExtended::decode(&e).unwrap();
        assert_eq!(x.port_select, ALL_PORTS);
        assert_eq!(x.xmit_data, 1 << 40);
        assert_eq!(x.multicast_rcv_pkts, u64::MAX);
        assert_eq!(x.to_bytes().unwrap(), e);
    }

    #[test]
    fn details_sit_where_the_spec_puts_them() {
        let mut b = [0u8; 16];
        b[1] = 9;
        b[2..4].copy_from_slice(&0x3Fu16.to_be_bytes());
        b[4..6].copy_from_slice(&513u16.to_be_bytes()); // local physical
        b[10..12].copy_from_slice(&7u16.to_be_bytes()); // DLID mapping
        b[14..16].copy_from_slice(&u16::MAX.to_be_bytes()); // looping
        let r = PortRcvErrorDetails::decode(&b).unwrap();
        assert_eq!((r.port_select, r.counter_select), (9, 0x3F));
        assert_eq!(r.local_physical_errors, 513);
        assert_eq!(r.dlid_mapping_errors, 7);
        assert_eq!(r.looping_errors, u16::MAX);
        assert_eq!(r.malformed_packet_errors, 0);
        assert_eq!(r.to_bytes().unwrap(), b);

        let mut x = [0u8; 12];
        x[4..6].copy_from_slice(&3u16.to_be_bytes()); // inactive
        x[8..10].copy_from_slice(&4u16.to_be_bytes()); // switch lifetime
        let d = PortXmitDiscardDetails::decode(&x).unwrap();
        assert_eq!((d.inactive_discards, d.sw_lifetime_limit_discards), (3, 4));
        assert_eq!(d.to_bytes().unwrap(), x);
    }

    #[test]
    fn samples_sit_where_the_spec_puts_them() {
        let mut b = [0u8; 80];
        b[1] = 2; // PortSelect
        b[3] = 4; // CounterWidth: 32 bits
                  // CounterMask0..4 = 1 (the kernel's PMAs' five counters).
        b[4..8].copy_from_slice(&(0o11111u32 << 15).to_be_bytes());
        b[11] = sample_status::RUNNING;
        b[28..32].copy_from_slice(&1000u32.to_be_bytes()); // SampleStart
        b[36..38].copy_from_slice(&0xBEEFu16.to_be_bytes()); // Tag
        b[38..40].copy_from_slice(&sample_counter::XMIT_DATA.to_be_bytes());
        b[66..68].copy_from_slice(&7u16.to_be_bytes()); // CounterSelect14
        let c = PortSamplesControl::decode(&b).unwrap();
        assert_eq!((c.port_select, c.counter_width, c.counter_mask0), (2, 4, 1));
        assert_eq!(c.counter_masks_1_to_9, 0o111100000);
        assert_eq!(c.sample_status, sample_status::RUNNING);
        assert_eq!((c.sample_start, c.tag), (1000, 0xBEEF));
        let s = c.counter_selects();
        assert_eq!((s[0], s[1], s[14]), (sample_counter::XMIT_DATA, 0, 7));
        let mut d = PortSamplesControl::default();
        d.set_counter_selects(s);
        assert_eq!(d.counter_selects(), s);
        assert_eq!(c.to_bytes().unwrap(), b);

        let mut r = [0u8; 64];
        r[0..2].copy_from_slice(&0xBEEFu16.to_be_bytes());
        r[3] = sample_status::DONE | 0xFC; // reserved bits around it
        r[4..8].copy_from_slice(&72u32.to_be_bytes());
        r[60..64].copy_from_slice(&u32::MAX.to_be_bytes());
        let x = PortSamplesResult::decode(&r).unwrap();
        assert_eq!((x.tag, x.sample_status), (0xBEEF, 0));
        assert_eq!((x.counters()[0], x.counters()[14]), (72, u32::MAX));
        r[3] = 0;
        assert_eq!(x.to_bytes().unwrap(), r);

        // The extended result, as the kernel's PMAs lay it out: tag,
        // status in the low bits of a 16-bit word, the width in the top
        // two bits of a 32-bit one, fifteen 64-bit counters.
        let mut e = [0u8; 128];
        e[0..2].copy_from_slice(&0x0102u16.to_be_bytes());
        e[3] = sample_status::STARTED;
        e[4..8].copy_from_slice(&0x8000_0000u32.to_be_bytes());
        e[8..16].copy_from_slice(&(1u64 << 40).to_be_bytes());
        e[120..128].copy_from_slice(&u64::MAX.to_be_bytes());
        let x = PortSamplesResultExtended::decode(&e).unwrap();
        assert_eq!((x.tag, x.sample_status), (0x0102, sample_status::STARTED));
        assert_eq!(x.extended_width, EXTENDED_WIDTH_64);
        assert_eq!((x.counters()[0], x.counters()[14]), (1 << 40, u64::MAX));
        assert_eq!(x.to_bytes().unwrap(), e);
    }

    #[test]
    fn a_short_buffer_is_refused() {
        assert!(PortCounters::decode(&[0u8; 43]).is_err());
        assert!(PortCountersExtended::decode(&[0u8; 71]).is_err());
        assert!(PortRcvErrorDetails::decode(&[0u8; 15]).is_err());
        assert!(PortXmitDiscardDetails::decode(&[0u8; 11]).is_err());
        assert!(PortSamplesControl::decode(&[0u8; 79]).is_err());
        assert!(PortSamplesResult::decode(&[0u8; 63]).is_err());
        assert!(PortSamplesResultExtended::decode(&[0u8; 127]).is_err());
    }
}
