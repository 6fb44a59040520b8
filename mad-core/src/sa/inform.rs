//! InformInfo (IBA 13.4.8.3) and InformInfoRecord (IBA 15.2.5.12): a
//! subscription to the SA's reports of traps, and its record.

use super::sa_record;
use crate::types::{Gid, Lid};

bitstruct! {
    /// InformInfo (36 bytes): which traps a subscriber wants reported,
    /// and where.
    pub struct InformInfo("InformInfo", 36) {
        /// A single port's GID (zero: use the LID range).
        gid: Gid = 0, 128;
        /// First LID of the range (0xFFFF: all).
        lid_range_begin: Lid = 128, 16;
        /// Last LID of the range.
        lid_range_end: Lid = 144, 16;
        /// 1: generic traps; 0: vendor ones.
        is_generic: u8 = 176, 8;
        /// 1: subscribe; 0: unsubscribe.
        subscribe: u8 = 184, 8;
        /// The notice type (0xFFFF: all).
        notice_type: u16 = 192, 16;
        /// Generic: the trap number (0xFFFF: all); vendor: the device ID.
        trap_number_or_device_id: u16 = 208, 16;
        /// The subscriber's QP for reports.
        qpn: u32 = 224, 24;
        /// RespTimeValue.
        resp_time_value: u8 = 251, 5;
        /// Generic: the producer type; vendor: the vendor ID.
        producer_type_or_vendor_id: u32 = 264, 24;
    }
}
sa_record!(InformInfo, InformInfo, []);
record_field!(InformInfo);

bitstruct! {
    /// InformInfoRecord (60 bytes).
    pub struct InformInfoRecord("InformInfoRecord", 60) {
        /// The subscriber's GID.
        subscriber_gid: Gid = 0, 128;
        /// Which of its subscriptions.
        subscriber_enum: u16 = 128, 16;
        /// The subscription.
        inform_info: InformInfo = 192, 288;
    }
}
sa_record!(
    InformInfoRecord,
    InformInfoRecord,
    [
        ("subscriber_gid", 0, 128),
        ("subscriber_enum", 128, 16),
        ("reserved", 144, 48),
        ("gid", 192, 128),
        ("lid_range_begin", 320, 16),
        ("lid_range_end", 336, 16),
        ("reserved", 352, 16),
        ("is_generic", 368, 8),
        ("subscribe", 376, 8),
        ("notice_type", 384, 16),
        ("trap_number_or_device_id", 400, 16),
        ("qpn", 416, 24),
        ("reserved", 440, 3),
        ("resp_time_value", 443, 5),
        ("reserved", 448, 8),
        ("producer_type_or_vendor_id", 456, 24),
    ]
);
