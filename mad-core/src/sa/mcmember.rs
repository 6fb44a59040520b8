//! MCMemberRecord (IBA 15.2.5.17): a multicast group and one port's
//! membership of it.

use super::sa_record;
use crate::types::{Gid, Lid, PKey};

/// JoinState bits.
pub mod join_state {
    /// Full member.
    pub const FULL: u8 = 1;
    /// Non-member.
    pub const NON: u8 = 2;
    /// Send-only non-member.
    pub const SEND_ONLY_NON: u8 = 4;
    /// Send-only full member.
    pub const SEND_ONLY_FULL: u8 = 8;
}

bitstruct! {
    /// MCMemberRecord (52 bytes).
    pub struct McMemberRecord("MCMemberRecord", 52) {
        /// The group's multicast GID.
        mgid: Gid = 0, 128;
        /// The member port's GID.
        port_gid: Gid = 128, 128;
        /// Q_Key of the group.
        qkey: u32 = 256, 32;
        /// The group's multicast LID.
        mlid: Lid = 288, 16;
        /// MTU selector.
        mtu_selector: u8 = 304, 2;
        /// MTU.
        mtu: u8 = 306, 6;
        /// Traffic class.
        tclass: u8 = 312, 8;
        /// P_Key.
        pkey: PKey = 320, 16;
        /// Rate selector.
        rate_selector: u8 = 336, 2;
        /// Rate.
        rate: u8 = 338, 6;
        /// Packet lifetime selector.
        packet_life_time_selector: u8 = 344, 2;
        /// Packet lifetime.
        packet_life_time: u8 = 346, 6;
        /// Service level.
        sl: u8 = 352, 4;
        /// Flow label.
        flow_label: u32 = 356, 20;
        /// Hop limit.
        hop_limit: u8 = 376, 8;
        /// Scope of the MGID.
        scope: u8 = 384, 4;
        /// [`join_state`] bits.
        join_state: u8 = 388, 4;
        /// Joined on behalf of another port.
        proxy_join: bool = 392, 1;
    }
}
sa_record!(
    McMemberRecord,
    McMemberRecord,
    [
        ("mgid", 0, 128),
        ("port_gid", 128, 128),
        ("qkey", 256, 32),
        ("mlid", 288, 16),
        ("mtu_selector", 304, 2),
        ("mtu", 306, 6),
        ("tclass", 312, 8),
        ("pkey", 320, 16),
        ("rate_selector", 336, 2),
        ("rate", 338, 6),
        ("packet_life_time_selector", 344, 2),
        ("packet_life_time", 346, 6),
        ("sl", 352, 4),
        ("flow_label", 356, 20),
        ("hop_limit", 376, 8),
        ("scope", 384, 4),
        ("join_state", 388, 4),
        ("proxy_join", 392, 1),
    ]
);
