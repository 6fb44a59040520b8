//! The Notice attribute (0x0002) carried by Trap and TrapRepress, and the
//! data details of the traps a subnet manager handles (IBA 14.2.5.1).
//!
//! Offsets in the trap-data structures are relative to the start of
//! DataDetails (byte 10 of the Notice).

use crate::error::Error;
use crate::field::{Bytes, Fields, Value};
use crate::types::{Gid, Lid, MKey};

enum_with_unknown! {
    /// Notice.Type.
    pub enum NoticeType(u8) {
        /// Fatal.
        Fatal = 0,
        /// Urgent.
        Urgent = 1,
        /// Security.
        Security = 2,
        /// Subnet management.
        SubnetManagement = 3,
        /// Informational.
        Info = 4,
        /// Empty notice queue.
        Empty = 0x7F,
    }
}

enum_with_unknown! {
    /// Notice.ProducerType for generic notices.
    pub enum ProducerType(u32) {
        /// Channel adapter.
        ChannelAdapter = 1,
        /// Switch.
        Switch = 2,
        /// Router.
        Router = 3,
        /// Class manager (the SM).
        ClassManager = 4,
    }
}

bitstruct! {
    /// Notice (64 bytes in an SMP). For a generic notice `producer_type_or_vendor_id`
    /// is the ProducerType and `trap_number_or_device_id` the TrapNumber; for a
    /// vendor notice they are VendorID and DeviceID.
    pub struct Notice("Notice", 64) {
        /// Generic (1) or vendor-specific (0).
        is_generic: bool = 0, 1;
        /// Notice type.
        notice_type: NoticeType = 1, 7;
        /// ProducerType (generic) or VendorID (vendor).
        producer_type_or_vendor_id: u32 = 8, 24;
        /// TrapNumber (generic) or DeviceID (vendor).
        trap_number_or_device_id: u16 = 32, 16;
        /// LID of the issuer.
        issuer_lid: Lid = 48, 16;
        /// Alternates between successive notices.
        notice_toggle: bool = 64, 1;
        /// Count of notices.
        notice_count: u16 = 65, 15;
        /// Trap-specific data (see [`TrapDetails`]).
        data_details: Bytes<54> = 80, 432;
    }
}

impl Notice {
    /// The trap number of a generic notice.
    pub fn trap_number(&self) -> Option<u16> {
        self.is_generic.then_some(self.trap_number_or_device_id)
    }
    /// The producer type of a generic notice.
    pub fn producer_type(&self) -> Option<ProducerType> {
        self.is_generic
            .then(|| ProducerType::from(self.producer_type_or_vendor_id))
    }
    /// Decodes the data details according to the trap number.
    pub fn details(&self) -> Result<TrapDetails, Error> {
        TrapDetails::decode(self.trap_number(), &self.data_details.0)
    }
    /// A generic notice for `trap` with its details encoded.
    pub fn generic(
        notice_type: NoticeType,
        producer: ProducerType,
        issuer_lid: Lid,
        details: &TrapDetails,
    ) -> Result<Self, Error> {
        let mut data = [0u8; 54];
        details.encode(&mut data)?;
        Ok(Notice {
            is_generic: true,
            notice_type,
            producer_type_or_vendor_id: producer.into(),
            trap_number_or_device_id: details.trap_number(),
            issuer_lid,
            notice_toggle: false,
            notice_count: 0,
            data_details: Bytes(data),
        })
    }
}

bitstruct! {
    /// Traps 64–67: GID in/out of service, multicast group created/deleted.
    pub struct TrapGid("Trap64-67", 54) {
        /// The GID (port GID or MGID).
        gid: Gid = 48, 128;
    }
}

bitstruct! {
    /// Trap 128: link state change on a switch port.
    pub struct Trap128("Trap128", 54) {
        /// LID of the switch.
        lid: Lid = 0, 16;
    }
}

bitstruct! {
    /// Traps 129–131: link integrity, buffer overrun, flow-control watchdog.
    pub struct TrapPortError("Trap129-131", 54) {
        /// LID of the reporting port.
        lid: Lid = 16, 16;
        /// Port number.
        port_num: u8 = 32, 8;
    }
}

bitstruct! {
    /// Trap 144: capability mask or other local change.
    pub struct Trap144("Trap144", 54) {
        /// LID of the reporting port.
        lid: Lid = 16, 16;
        /// Some local attribute other than the capability mask changed.
        other_local_changes: bool = 47, 1;
        /// The new CapabilityMask.
        capability_mask: u32 = 48, 32;
        /// NodeDescription changed.
        node_description_change: bool = 95, 1;
        /// LinkWidthEnabled changed.
        link_width_enabled_change: bool = 94, 1;
        /// LinkSpeedEnabled changed.
        link_speed_enabled_change: bool = 93, 1;
        /// SM priority changed.
        sm_priority_change: bool = 92, 1;
        /// HierarchyInfo changed.
        hierarchy_info_change: bool = 91, 1;
        /// CapabilityMask2 changed.
        capability_mask2_change: bool = 90, 1;
        /// The new CapabilityMask2.
        capability_mask2: u16 = 96, 16;
    }
}

bitstruct! {
    /// Trap 145: system image GUID changed.
    pub struct Trap145("Trap145", 54) {
        /// LID of the reporting port.
        lid: Lid = 16, 16;
        /// The new SystemImageGUID.
        system_image_guid: crate::types::Guid = 48, 64;
    }
}

bitstruct! {
    /// Trap 256: bad M_Key.
    pub struct Trap256("Trap256", 54) {
        /// LID of the reporting port.
        lid: Lid = 16, 16;
        /// DrSLID of the offending SMP.
        dr_slid: Lid = 32, 16;
        /// Method of the offending SMP.
        method: u8 = 48, 8;
        /// AttributeID of the offending SMP.
        attribute_id: u16 = 64, 16;
        /// AttributeModifier of the offending SMP.
        attribute_modifier: u32 = 80, 32;
        /// M_Key the offending SMP carried.
        m_key: MKey = 112, 64;
        /// The offending SMP was directed route.
        dr_notice: bool = 184, 1;
        /// The return path below is truncated to 30 hops.
        dr_path_truncated: bool = 185, 1;
        /// Hop count of the offending SMP.
        dr_hop_count: u8 = 186, 6;
        /// ReturnPath[1..] of the offending SMP.
        dr_return_path: [u8; 30] = 192, 240;
    }
}

bitstruct! {
    /// Traps 257 and 258: bad P_Key or Q_Key.
    pub struct TrapBadKey("Trap257-258", 54) {
        /// LID of requester.
        lid1: Lid = 16, 16;
        /// LID of responder.
        lid2: Lid = 32, 16;
        /// The bad P_Key or Q_Key.
        key: u32 = 48, 32;
        /// Service level.
        sl: u8 = 80, 4;
        /// QP of requester.
        qp1: u32 = 88, 24;
        /// QP of responder.
        qp2: u32 = 120, 24;
        /// GID of requester.
        gid1: Gid = 144, 128;
        /// GID of responder.
        gid2: Gid = 272, 128;
    }
}

bitstruct! {
    /// Trap 259: bad P_Key at a switch external port.
    pub struct Trap259("Trap259", 54) {
        /// Which of the following fields are valid (bit flags).
        data_valid: u16 = 0, 16;
        /// LID of requester.
        lid1: Lid = 16, 16;
        /// LID of responder.
        lid2: Lid = 32, 16;
        /// The bad P_Key.
        p_key: u16 = 48, 16;
        /// Service level.
        sl: u8 = 64, 4;
        /// QP of requester.
        qp1: u32 = 72, 24;
        /// QP of responder.
        qp2: u32 = 104, 24;
        /// GID of requester.
        gid1: Gid = 128, 128;
        /// GID of responder.
        gid2: Gid = 256, 128;
        /// LID of the switch.
        sw_lid: Lid = 384, 16;
        /// Switch port.
        port_no: u8 = 400, 8;
    }
}

/// The data details of a notice, decoded by trap number.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TrapDetails {
    /// Traps 64–67 (the number is kept).
    Gid(u16, TrapGid),
    /// Trap 128.
    LinkStateChange(Trap128),
    /// Traps 129–131 (the number is kept).
    PortError(u16, TrapPortError),
    /// Trap 144.
    LocalChange(Trap144),
    /// Trap 145.
    SystemImageGuidChange(Trap145),
    /// Trap 256.
    BadMKey(Trap256),
    /// Traps 257 and 258 (the number is kept).
    BadKey(u16, TrapBadKey),
    /// Trap 259.
    BadPKeySwitchExternal(Trap259),
    /// Another trap number or a vendor notice: the raw bytes.
    Other(Option<u16>, Bytes<54>),
}

impl TrapDetails {
    /// Decodes `data` (54 bytes of DataDetails) for `trap`.
    pub fn decode(trap: Option<u16>, data: &[u8]) -> Result<Self, Error> {
        Ok(match trap {
            Some(n @ 64..=67) => TrapDetails::Gid(n, TrapGid::decode(data)?),
            Some(128) => TrapDetails::LinkStateChange(Trap128::decode(data)?),
            Some(n @ 129..=131) => TrapDetails::PortError(n, TrapPortError::decode(data)?),
            Some(144) => TrapDetails::LocalChange(Trap144::decode(data)?),
            Some(145) => TrapDetails::SystemImageGuidChange(Trap145::decode(data)?),
            Some(256) => TrapDetails::BadMKey(Trap256::decode(data)?),
            Some(n @ 257..=258) => TrapDetails::BadKey(n, TrapBadKey::decode(data)?),
            Some(259) => TrapDetails::BadPKeySwitchExternal(Trap259::decode(data)?),
            other => {
                crate::error::need("Notice.data_details", data, 54)?;
                let mut b = [0u8; 54];
                b.copy_from_slice(&data[..54]);
                TrapDetails::Other(other, Bytes(b))
            }
        })
    }
    /// Encodes into 54 bytes of DataDetails.
    pub fn encode(&self, data: &mut [u8]) -> Result<(), Error> {
        match self {
            TrapDetails::Gid(_, t) => t.encode(data),
            TrapDetails::LinkStateChange(t) => t.encode(data),
            TrapDetails::PortError(_, t) => t.encode(data),
            TrapDetails::LocalChange(t) => t.encode(data),
            TrapDetails::SystemImageGuidChange(t) => t.encode(data),
            TrapDetails::BadMKey(t) => t.encode(data),
            TrapDetails::BadKey(_, t) => t.encode(data),
            TrapDetails::BadPKeySwitchExternal(t) => t.encode(data),
            TrapDetails::Other(_, b) => {
                crate::error::need("Notice.data_details", data, 54)?;
                data[..54].copy_from_slice(&b.0);
                Ok(())
            }
        }
    }
    /// The trap number these details belong to (0 for vendor notices).
    pub fn trap_number(&self) -> u16 {
        match *self {
            TrapDetails::Gid(n, _) | TrapDetails::PortError(n, _) | TrapDetails::BadKey(n, _) => n,
            TrapDetails::LinkStateChange(_) => 128,
            TrapDetails::LocalChange(_) => 144,
            TrapDetails::SystemImageGuidChange(_) => 145,
            TrapDetails::BadMKey(_) => 256,
            TrapDetails::BadPKeySwitchExternal(_) => 259,
            TrapDetails::Other(n, _) => n.unwrap_or(0),
        }
    }
    /// The details as a record for dumps.
    pub fn fields(&self) -> &dyn Fields {
        match self {
            TrapDetails::Gid(_, t) => t,
            TrapDetails::LinkStateChange(t) => t,
            TrapDetails::PortError(_, t) => t,
            TrapDetails::LocalChange(t) => t,
            TrapDetails::SystemImageGuidChange(t) => t,
            TrapDetails::BadMKey(t) => t,
            TrapDetails::BadKey(_, t) => t,
            TrapDetails::BadPKeySwitchExternal(t) => t,
            TrapDetails::Other(_, b) => b,
        }
    }
}

impl<const N: usize> Fields for Bytes<N> {
    fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
        f("raw", Value::Bytes(&self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trap_128_from_a_switch_lays_out_as_ibsim_sends_it() {
        let n = Notice::generic(
            NoticeType::Urgent,
            ProducerType::Switch,
            Lid(7),
            &TrapDetails::LinkStateChange(Trap128 { lid: Lid(7) }),
        )
        .unwrap();
        let b = n.to_bytes().unwrap();
        assert_eq!(b[0], 0x81, "generic, urgent");
        assert_eq!(&b[1..4], &[0, 0, 2], "producer: switch");
        assert_eq!(&b[4..6], &[0, 128]);
        assert_eq!(&b[6..8], &[0, 7]);
        assert_eq!(&b[10..12], &[0, 7], "LIDADDR at data details 0");
        let back = Notice::decode(&b).unwrap();
        assert_eq!(
            back.details().unwrap(),
            TrapDetails::LinkStateChange(Trap128 { lid: Lid(7) })
        );
    }

    #[test]
    fn trap_256_positions() {
        let t = Trap256 {
            lid: Lid(0x0102),
            dr_slid: Lid(0xFFFF),
            method: 2,
            attribute_id: 0x15,
            attribute_modifier: 3,
            m_key: MKey(0x1122_3344_5566_7788),
            dr_notice: true,
            dr_path_truncated: false,
            dr_hop_count: 2,
            dr_return_path: {
                let mut p = [0; 30];
                p[0] = 5;
                p[1] = 9;
                p
            },
        };
        let mut d = [0u8; 54];
        t.encode(&mut d).unwrap();
        assert_eq!(&d[2..4], &[1, 2]);
        assert_eq!(&d[4..6], &[0xFF, 0xFF]);
        assert_eq!(d[6], 2);
        assert_eq!(&d[8..10], &[0, 0x15]);
        assert_eq!(&d[10..14], &[0, 0, 0, 3]);
        assert_eq!(&d[14..22], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(d[23], 0x80 | 2);
        assert_eq!(&d[24..26], &[5, 9]);
    }

    #[test]
    fn trap_144_change_flags() {
        let mut d = [0u8; 54];
        d[11] = 0b0000_0001; // NodeDescription changed (bit 0 of ChangeFlags)
        d[5] = 1; // OtherLocalChanges
        let t = Trap144::decode(&d).unwrap();
        assert!(t.node_description_change && t.other_local_changes);
        assert!(!t.link_width_enabled_change);
    }
}
