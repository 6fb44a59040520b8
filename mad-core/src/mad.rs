//! The 24-byte common MAD header (IBA 13.4.3), its methods, management
//! classes and status word.

use crate::error::{need, Error};
use crate::field::{Fields, Value};
use static_assertions::const_assert_eq;
use zerocopy::byteorder::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The common header that begins every MAD.
#[derive(Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct MadHeader {
    /// BaseVersion: 1 for InfiniBand.
    pub base_version: u8,
    /// MgmtClass (see [`MgmtClass`]).
    pub mgmt_class: u8,
    /// ClassVersion: 1 for the SM classes.
    pub class_version: u8,
    /// R bit (bit 7) and Method (bits 6..0), together the method byte.
    pub method: u8,
    /// Status; for directed-route SMPs bit 15 is the D (direction) bit.
    pub status: U16,
    /// ClassSpecific; for directed-route SMPs HopPointer (high byte) and HopCount (low byte).
    pub class_specific: U16,
    /// TransactionID.
    pub transaction_id: U64,
    /// AttributeID.
    pub attribute_id: U16,
    /// Reserved, zero.
    pub reserved: U16,
    /// AttributeModifier.
    pub attribute_modifier: U32,
}
const_assert_eq!(core::mem::size_of::<MadHeader>(), 24);

impl MadHeader {
    /// Size of the header on the wire.
    pub const SIZE: usize = 24;

    /// A zero-copy view of the header at the start of `buf`.
    pub fn ref_from(buf: &[u8]) -> Result<&MadHeader, Error> {
        need("MAD header", buf, Self::SIZE)?;
        MadHeader::ref_from_prefix(buf)
            .map(|(h, _)| h)
            .map_err(|_| Error::Truncated {
                what: "MAD header",
                needed: Self::SIZE,
                got: buf.len(),
            })
    }

    /// The method byte as a [`Method`] (the R bit is part of the value: GetResp is 0x81).
    pub fn method(&self) -> Method {
        Method::from(self.method)
    }
    /// True when the R (response) bit is set.
    pub fn is_response(&self) -> bool {
        self.method & 0x80 != 0
    }
    /// The management class.
    pub fn class(&self) -> MgmtClass {
        MgmtClass::from(self.mgmt_class)
    }
    /// The status word.
    pub fn status(&self) -> Status {
        Status(self.status.get())
    }
    /// The attribute ID.
    pub fn attribute_id(&self) -> crate::attr::AttributeId {
        crate::attr::AttributeId::from(self.attribute_id.get())
    }
}

impl Fields for MadHeader {
    fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
        use crate::field::Field;
        f("base_version", self.base_version.value());
        f("mgmt_class", self.class().value());
        f("class_version", self.class_version.value());
        f("method", self.method().value());
        f("r", Value::Bool(self.is_response()));
        f(
            "status",
            Value::Num {
                v: self.status.get().into(),
                hex: true,
            },
        );
        f(
            "class_specific",
            Value::Num {
                v: self.class_specific.get().into(),
                hex: true,
            },
        );
        f(
            "transaction_id",
            Value::Num {
                v: self.transaction_id.get(),
                hex: true,
            },
        );
        // An SA MAD's attribute is the SA's (0x0038 is MCMemberRecord,
        // not a reserved SMP attribute).
        if self.mgmt_class == MgmtClass::SubnAdm.into() {
            f(
                "attribute_id",
                crate::sa::SaAttributeId::from(self.attribute_id.get()).value(),
            );
        } else {
            f("attribute_id", self.attribute_id().value());
        }
        f(
            "attribute_modifier",
            Value::Num {
                v: self.attribute_modifier.get().into(),
                hex: true,
            },
        );
    }
}

impl core::fmt::Debug for MadHeader {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        crate::field::debug_fields(self, "MadHeader", f)
    }
}

enum_with_unknown! {
    /// Management classes (IBA 13.4.4).
    pub enum MgmtClass(u8) {
        /// Subnet management, LID-routed.
        SubnLid = 0x01,
        /// Subnet administration.
        SubnAdm = 0x03,
        /// Performance management.
        Perf = 0x04,
        /// Baseboard management.
        BaseboardMgmt = 0x05,
        /// Device management.
        DevMgmt = 0x06,
        /// Communication management.
        ComMgmt = 0x07,
        /// SNMP tunnelling.
        Snmp = 0x08,
        /// Congestion control.
        CongestionControl = 0x21,
        /// Subnet management, directed route.
        SubnDirectedRoute = 0x81,
    }
}

enum_with_unknown! {
    /// The method byte, R bit included (IBA 13.4.5).
    pub enum Method(u8) {
        /// Get.
        Get = 0x01,
        /// Set.
        Set = 0x02,
        /// Send.
        Send = 0x03,
        /// Trap.
        Trap = 0x05,
        /// Report.
        Report = 0x06,
        /// TrapRepress.
        TrapRepress = 0x07,
        /// GetTable (SA).
        GetTable = 0x12,
        /// GetTraceTable (SA).
        GetTraceTable = 0x13,
        /// GetMulti (SA).
        GetMulti = 0x14,
        /// Delete (SA).
        Delete = 0x15,
        /// GetResp: the response to Get and Set.
        GetResp = 0x81,
        /// ReportResp.
        ReportResp = 0x86,
        /// GetTableResp (SA).
        GetTableResp = 0x92,
        /// GetTraceTableResp (SA).
        GetTraceTableResp = 0x93,
        /// GetMultiResp (SA).
        GetMultiResp = 0x94,
        /// DeleteResp (SA).
        DeleteResp = 0x95,
    }
}

enum_with_unknown! {
    /// The "invalid field" code in status bits 4..2 (IBA 13.4.7).
    pub enum StatusCode(u8) {
        /// No invalid field.
        Ok = 0,
        /// Bad base or class version.
        BadVersion = 1,
        /// Method not supported.
        UnsupportedMethod = 2,
        /// Method/attribute combination not supported.
        UnsupportedMethodAttribute = 3,
        /// One or more attribute fields or the modifier hold invalid values.
        InvalidField = 7,
    }
}

/// The 16-bit MAD status word.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Status(pub u16);

impl Status {
    /// Success.
    pub const OK: Status = Status(0);
    /// Bad base or class version (0x0004).
    pub const UNSUPPORTED_VERSION: Status = Status(0x0004);
    /// Method not supported (0x0008).
    pub const UNSUPPORTED_METHOD: Status = Status(0x0008);
    /// Method/attribute combination not supported (0x000C).
    pub const UNSUPPORTED_METHOD_ATTR: Status = Status(0x000C);
    /// Invalid attribute field or modifier value (0x001C).
    pub const INVALID_FIELD: Status = Status(0x001C);
    /// The directed-route D (direction) bit, bit 15.
    pub const DIRECTION: u16 = 0x8000;

    /// Busy (bit 0).
    pub const fn busy(self) -> bool {
        self.0 & 1 != 0
    }
    /// Redirect required (bit 1).
    pub const fn redirect(self) -> bool {
        self.0 & 2 != 0
    }
    /// The invalid-field code (bits 4..2).
    pub fn code(self) -> StatusCode {
        StatusCode::from(((self.0 >> 2) & 7) as u8)
    }
    /// Class-specific bits 14..8 (bit 15 is the D bit in directed-route SMPs).
    pub const fn class_specific(self) -> u16 {
        (self.0 >> 8) & 0x7F
    }
    /// The status without the directed-route D bit.
    pub const fn without_direction(self) -> Status {
        Status(self.0 & 0x7FFF)
    }
    /// True when nothing but (possibly) the D bit is set.
    pub const fn is_ok(self) -> bool {
        self.0 & 0x7FFF == 0
    }
}

impl core::fmt::Debug for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Status({:#06x}, {:?})", self.0, self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_sit_where_the_spec_puts_them() {
        let mut b = [0u8; 24];
        b[0] = 1;
        b[1] = 0x81;
        b[2] = 1;
        b[3] = 0x81;
        b[4] = 0x80;
        b[5] = 0x1C;
        b[6] = 2;
        b[7] = 3;
        b[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        b[16..18].copy_from_slice(&0x0015u16.to_be_bytes());
        b[20..24].copy_from_slice(&0xDEAD_BEEFu32.to_be_bytes());
        let h = MadHeader::ref_from(&b).unwrap();
        assert_eq!(h.method(), Method::GetResp);
        assert!(h.is_response());
        assert_eq!(h.class(), MgmtClass::SubnDirectedRoute);
        assert_eq!(h.status().code(), StatusCode::InvalidField);
        assert_eq!(h.status().0 & Status::DIRECTION, Status::DIRECTION);
        assert_eq!(h.class_specific.get(), 0x0203);
        assert_eq!(h.transaction_id.get(), 0x1122_3344_5566_7788);
        assert_eq!(h.attribute_id.get(), 0x15);
        assert_eq!(h.attribute_modifier.get(), 0xDEAD_BEEF);
    }

    /// The same attribute number names an SA record in an SA MAD and an
    /// SMP attribute (or a reserved one) in an SMP.
    #[test]
    fn the_attribute_is_named_by_its_class() {
        extern crate std;
        use std::format;
        let mut b = [0u8; 24];
        b[0] = 1;
        b[16..18].copy_from_slice(&0x0038u16.to_be_bytes());
        b[1] = 0x03;
        let sa = format!("{:?}", MadHeader::ref_from(&b).unwrap());
        assert!(sa.contains("McMemberRecord"), "{sa}");
        b[1] = 0x81;
        let smp = format!("{:?}", MadHeader::ref_from(&b).unwrap());
        assert!(!smp.contains("McMemberRecord"), "{smp}");
    }

    #[test]
    fn short_header_is_an_error() {
        assert_eq!(
            MadHeader::ref_from(&[0u8; 23]).unwrap_err(),
            Error::Truncated {
                what: "MAD header",
                needed: 24,
                got: 23
            }
        );
    }

    #[test]
    fn status_codes() {
        assert_eq!(
            Status::UNSUPPORTED_METHOD_ATTR.code(),
            StatusCode::UnsupportedMethodAttribute
        );
        assert_eq!(
            Status(0x8000 | 0x0008).without_direction(),
            Status::UNSUPPORTED_METHOD
        );
        assert!(Status(0x8000).is_ok());
        assert!(!Status(0x0001).is_ok());
    }
}
