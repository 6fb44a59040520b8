//! PathRecord and MultiPathRecord (IBA 15.2.5.16, 15.2.5.20): what a
//! sender needs to reach a destination — LIDs and GIDs, SL, MTU, rate and
//! packet lifetime along the path, P_Key, and whether it is reversible.

use super::sa_record;
use crate::types::{Gid, Lid, PKey};

/// Selector values of MTU, rate and packet lifetime (IBA 15.2.5.16).
pub mod selector {
    /// Greater than the value.
    pub const GREATER: u8 = 0;
    /// Less than the value.
    pub const LESS: u8 = 1;
    /// Exactly the value.
    pub const EXACTLY: u8 = 2;
    /// The largest available.
    pub const LARGEST: u8 = 3;
}

/// The ComponentMask bits of PathRecord, by component (IBA 15.2.5.16;
/// the same as [`SaRecord::component`](super::SaRecord::component) of
/// their names, checked by a test), for code that tests them per query.
pub mod comp {
    /// ServiceID, upper 32 bits.
    pub const SERVICE_ID_MSB: u64 = 1 << 0;
    /// ServiceID, lower 32 bits.
    pub const SERVICE_ID_LSB: u64 = 1 << 1;
    /// DGID.
    pub const DGID: u64 = 1 << 2;
    /// SGID.
    pub const SGID: u64 = 1 << 3;
    /// DLID.
    pub const DLID: u64 = 1 << 4;
    /// SLID.
    pub const SLID: u64 = 1 << 5;
    /// RawTraffic.
    pub const RAW_TRAFFIC: u64 = 1 << 6;
    /// FlowLabel.
    pub const FLOW_LABEL: u64 = 1 << 8;
    /// HopLimit.
    pub const HOP_LIMIT: u64 = 1 << 9;
    /// TClass.
    pub const TCLASS: u64 = 1 << 10;
    /// Reversible.
    pub const REVERSIBLE: u64 = 1 << 11;
    /// NumbPath.
    pub const NUMB_PATH: u64 = 1 << 12;
    /// P_Key.
    pub const PKEY: u64 = 1 << 13;
    /// QoSClass.
    pub const QOS_CLASS: u64 = 1 << 14;
    /// SL.
    pub const SL: u64 = 1 << 15;
    /// MTUSelector.
    pub const MTU_SELECTOR: u64 = 1 << 16;
    /// MTU.
    pub const MTU: u64 = 1 << 17;
    /// RateSelector.
    pub const RATE_SELECTOR: u64 = 1 << 18;
    /// Rate.
    pub const RATE: u64 = 1 << 19;
    /// PacketLifeTimeSelector.
    pub const PACKET_LIFE_TIME_SELECTOR: u64 = 1 << 20;
    /// PacketLifeTime.
    pub const PACKET_LIFE_TIME: u64 = 1 << 21;
    /// Preference.
    pub const PREFERENCE: u64 = 1 << 22;
}

bitstruct! {
    /// PathRecord (64 bytes).
    pub struct PathRecord("PathRecord", 64) {
        /// ServiceID (IBA 1.2.1 and later; reserved before).
        service_id: u64 = 0, 64;
        /// Destination GID.
        dgid: Gid = 64, 128;
        /// Source GID.
        sgid: Gid = 192, 128;
        /// Destination LID.
        dlid: Lid = 320, 16;
        /// Source LID.
        slid: Lid = 336, 16;
        /// Raw packets (no GRH, no IBA transport).
        raw_traffic: bool = 352, 1;
        /// Flow label of the GRH.
        flow_label: u32 = 356, 20;
        /// Hop limit of the GRH (0 or 1: the subnet only).
        hop_limit: u8 = 376, 8;
        /// Traffic class of the GRH.
        tclass: u8 = 384, 8;
        /// The path back uses the same values.
        reversible: bool = 392, 1;
        /// In a request, the most paths to return.
        numb_path: u8 = 393, 7;
        /// P_Key.
        pkey: PKey = 400, 16;
        /// QoS class.
        qos_class: u16 = 416, 12;
        /// Service level.
        sl: u8 = 428, 4;
        /// MTU selector.
        mtu_selector: u8 = 432, 2;
        /// MTU (1: 256 … 5: 4096).
        mtu: u8 = 434, 6;
        /// Rate selector.
        rate_selector: u8 = 440, 2;
        /// Static rate (2: 2.5 Gb/s, 3: 10, …).
        rate: u8 = 442, 6;
        /// Packet lifetime selector.
        packet_life_time_selector: u8 = 448, 2;
        /// Packet lifetime: 4.096 µs × 2^value.
        packet_life_time: u8 = 450, 6;
        /// Preference among the paths returned (0 the best).
        preference: u8 = 456, 8;
    }
}
sa_record!(
    PathRecord,
    PathRecord,
    [
        ("service_id_msb", 0, 32),
        ("service_id_lsb", 32, 32),
        ("dgid", 64, 128),
        ("sgid", 192, 128),
        ("dlid", 320, 16),
        ("slid", 336, 16),
        ("raw_traffic", 352, 1),
        ("reserved", 353, 3),
        ("flow_label", 356, 20),
        ("hop_limit", 376, 8),
        ("tclass", 384, 8),
        ("reversible", 392, 1),
        ("numb_path", 393, 7),
        ("pkey", 400, 16),
        ("qos_class", 416, 12),
        ("sl", 428, 4),
        ("mtu_selector", 432, 2),
        ("mtu", 434, 6),
        ("rate_selector", 440, 2),
        ("rate", 442, 6),
        ("packet_life_time_selector", 448, 2),
        ("packet_life_time", 450, 6),
        ("preference", 456, 8),
    ]
);

/// The most GIDs a MultiPathRecord carries in one MAD.
pub const MULTIPATH_GIDS: usize = 11;

bitstruct! {
    /// MultiPathRecord (24 bytes and up to [`MULTIPATH_GIDS`] GIDs: the
    /// SGIDCount source GIDs, then the DGIDCount destination GIDs).
    pub struct MultiPathRecord("MultiPathRecord", 200) {
        /// Raw packets.
        raw_traffic: bool = 0, 1;
        /// Flow label.
        flow_label: u32 = 4, 20;
        /// Hop limit.
        hop_limit: u8 = 24, 8;
        /// Traffic class.
        tclass: u8 = 32, 8;
        /// Reversible paths.
        reversible: bool = 40, 1;
        /// The most paths to return.
        numb_path: u8 = 41, 7;
        /// P_Key.
        pkey: PKey = 48, 16;
        /// QoS class.
        qos_class: u16 = 64, 12;
        /// Service level.
        sl: u8 = 76, 4;
        /// MTU selector.
        mtu_selector: u8 = 80, 2;
        /// MTU.
        mtu: u8 = 82, 6;
        /// Rate selector.
        rate_selector: u8 = 88, 2;
        /// Rate.
        rate: u8 = 90, 6;
        /// Packet lifetime selector.
        packet_life_time_selector: u8 = 96, 2;
        /// Packet lifetime.
        packet_life_time: u8 = 98, 6;
        /// ServiceID, the 8 most significant bits.
        service_id_msb: u8 = 104, 8;
        /// How independent the paths must be.
        independence_selector: u8 = 112, 2;
        /// Source GIDs given.
        sgid_count: u8 = 120, 8;
        /// Destination GIDs given.
        dgid_count: u8 = 128, 8;
        /// ServiceID, the 56 least significant bits.
        service_id_lsb: u64 = 136, 56;
        /// The GIDs.
        gids: [Gid; MULTIPATH_GIDS] = 192, 1408;
    }
}
sa_record!(
    MultiPathRecord,
    MultiPathRecord,
    [
        ("raw_traffic", 0, 1),
        ("reserved", 1, 3),
        ("flow_label", 4, 20),
        ("hop_limit", 24, 8),
        ("tclass", 32, 8),
        ("reversible", 40, 1),
        ("numb_path", 41, 7),
        ("pkey", 48, 16),
        ("qos_class", 64, 12),
        ("sl", 76, 4),
        ("mtu_selector", 80, 2),
        ("mtu", 82, 6),
        ("rate_selector", 88, 2),
        ("rate", 90, 6),
        ("packet_life_time_selector", 96, 2),
        ("packet_life_time", 98, 6),
        ("service_id_msb", 104, 8),
        ("independence_selector", 112, 2),
        ("reserved", 114, 6),
        ("sgid_count", 120, 8),
        ("dgid_count", 128, 8),
        ("service_id_lsb", 136, 56),
    ]
);

impl PathRecord {
    /// The MTU in bytes (0 for a code the spec does not define).
    pub fn mtu_bytes(&self) -> u32 {
        match self.mtu {
            1..=5 => 128 << self.mtu,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sa::SaRecord;

    /// Each constant of [`comp`] is the bit of its component's name.
    #[test]
    fn component_constants_are_the_components_bits() {
        let named = [
            (comp::SERVICE_ID_MSB, "service_id_msb"),
            (comp::SERVICE_ID_LSB, "service_id_lsb"),
            (comp::DGID, "dgid"),
            (comp::SGID, "sgid"),
            (comp::DLID, "dlid"),
            (comp::SLID, "slid"),
            (comp::RAW_TRAFFIC, "raw_traffic"),
            (comp::FLOW_LABEL, "flow_label"),
            (comp::HOP_LIMIT, "hop_limit"),
            (comp::TCLASS, "tclass"),
            (comp::REVERSIBLE, "reversible"),
            (comp::NUMB_PATH, "numb_path"),
            (comp::PKEY, "pkey"),
            (comp::QOS_CLASS, "qos_class"),
            (comp::SL, "sl"),
            (comp::MTU_SELECTOR, "mtu_selector"),
            (comp::MTU, "mtu"),
            (comp::RATE_SELECTOR, "rate_selector"),
            (comp::RATE, "rate"),
            (comp::PACKET_LIFE_TIME_SELECTOR, "packet_life_time_selector"),
            (comp::PACKET_LIFE_TIME, "packet_life_time"),
            (comp::PREFERENCE, "preference"),
        ];
        for (bit, name) in named {
            assert_eq!(PathRecord::component(name), Some(bit), "{name}");
        }
        // Every component but the reserved one has its constant.
        assert_eq!(named.len() + 1, PathRecord::COMPONENTS.len());
    }
}
