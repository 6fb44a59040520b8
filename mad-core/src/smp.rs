//! The 256-byte Subnet Management Packet, LID-routed (class 0x01) and
//! directed-route (class 0x81) (IBA 14.2.1).
//!
//! [`Smp`] is a zero-copy view: [`Smp::parse`] checks the length and the
//! header once, after which every accessor is total.

use crate::attr::{AnyAttribute, AttributeId};
use crate::dr_path::DrPath;
use crate::error::{need, Error};
use crate::field::{Fields, Value};
use crate::mad::{MadHeader, Method, MgmtClass, Status};
use crate::types::{Lid, MKey};
use static_assertions::const_assert_eq;
use zerocopy::byteorder::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

/// A Subnet Management Packet, in either routing form.
#[derive(Clone, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct Smp {
    /// The common MAD header.
    pub header: MadHeader,
    /// M_Key.
    pub m_key: U64,
    /// DrSLID (directed route only).
    pub dr_slid: U16,
    /// DrDLID (directed route only).
    pub dr_dlid: U16,
    /// Reserved, 28 bytes.
    pub reserved: [u8; 28],
    /// The attribute data.
    pub data: [u8; 64],
    /// InitialPath (directed route only); entry 0 is unused.
    pub initial_path: [u8; 64],
    /// ReturnPath (directed route only); entry 0 is unused.
    pub return_path: [u8; 64],
}
const_assert_eq!(core::mem::size_of::<Smp>(), crate::MAD_SIZE);
const_assert_eq!(core::mem::offset_of!(Smp, m_key), 24);
const_assert_eq!(core::mem::offset_of!(Smp, dr_slid), 32);
const_assert_eq!(core::mem::offset_of!(Smp, data), 64);
const_assert_eq!(core::mem::offset_of!(Smp, initial_path), 128);
const_assert_eq!(core::mem::offset_of!(Smp, return_path), 192);

impl Smp {
    /// Size of an SMP: [`MAD_SIZE`](crate::MAD_SIZE).
    pub const SIZE: usize = crate::MAD_SIZE;

    /// A view over the first 256 bytes of `buf`, checking only the length.
    pub fn ref_from(buf: &[u8]) -> Result<&Smp, Error> {
        need("SMP", buf, Self::SIZE)?;
        Smp::ref_from_prefix(buf)
            .map(|(s, _)| s)
            .map_err(|_| Error::Truncated {
                what: "SMP",
                needed: Self::SIZE,
                got: buf.len(),
            })
    }
    /// A mutable view over the first 256 bytes of `buf`, checking only the length.
    pub fn mut_from(buf: &mut [u8]) -> Result<&mut Smp, Error> {
        let got = buf.len();
        need("SMP", buf, Self::SIZE)?;
        Smp::mut_from_prefix(buf)
            .map(|(s, _)| s)
            .map_err(|_| Error::Truncated {
                what: "SMP",
                needed: Self::SIZE,
                got,
            })
    }
    /// A view over `buf` after checking the length and the header:
    /// BaseVersion 1, class 0x01 or 0x81, and for directed route a hop count
    /// of at most 63 and a hop pointer of at most hop count + 1.
    pub fn parse(buf: &[u8]) -> Result<&Smp, Error> {
        let s = Self::ref_from(buf)?;
        s.check()?;
        Ok(s)
    }
    /// Mutable form of [`Smp::parse`].
    pub fn parse_mut(buf: &mut [u8]) -> Result<&mut Smp, Error> {
        let s = Self::mut_from(buf)?;
        s.check()?;
        Ok(s)
    }

    /// The header checks of [`Smp::parse`].
    pub fn check(&self) -> Result<(), Error> {
        let bad = |field, value: u8, expected| Error::InvalidField {
            what: "SMP",
            field,
            value: value.into(),
            expected,
        };
        if self.header.base_version != 1 {
            return Err(bad("base_version", self.header.base_version, "1"));
        }
        match self.header.mgmt_class {
            0x01 => Ok(()),
            0x81 => {
                if self.hop_count() > 63 {
                    Err(bad("hop_count", self.hop_count(), "0..=63"))
                } else if self.hop_pointer() > self.hop_count().saturating_add(1) {
                    Err(bad("hop_pointer", self.hop_pointer(), "0..=hop_count+1"))
                } else {
                    Ok(())
                }
            }
            c => Err(bad("mgmt_class", c, "0x01 or 0x81")),
        }
    }

    fn new_common(
        class: MgmtClass,
        method: Method,
        attr: AttributeId,
        modifier: u32,
        tid: u64,
    ) -> Smp {
        let mut s = Smp::new_zeroed();
        s.header.base_version = 1;
        s.header.mgmt_class = class.into();
        s.header.class_version = 1;
        s.header.method = method.into();
        s.header.transaction_id = U64::new(tid);
        s.header.attribute_id = U16::new(attr.into());
        s.header.attribute_modifier = U32::new(modifier);
        s
    }

    /// A LID-routed request (class 0x01).
    pub fn lid_routed(
        method: Method,
        attr: AttributeId,
        modifier: u32,
        tid: u64,
        m_key: MKey,
    ) -> Smp {
        let mut s = Self::new_common(MgmtClass::SubnLid, method, attr, modifier, tid);
        s.m_key = U64::new(m_key.0);
        s
    }

    /// A directed-route request from the SM along `path`, with permissive
    /// DrSLID and DrDLID and hop pointer 0.
    pub fn directed(
        path: &DrPath,
        method: Method,
        attr: AttributeId,
        modifier: u32,
        tid: u64,
        m_key: MKey,
    ) -> Smp {
        let mut s = Self::new_common(MgmtClass::SubnDirectedRoute, method, attr, modifier, tid);
        s.m_key = U64::new(m_key.0);
        s.dr_slid = U16::new(0xFFFF);
        s.dr_dlid = U16::new(0xFFFF);
        s.header.class_specific = U16::new(u16::from(path.hop_count()));
        for (d, p) in s.initial_path[1..].iter_mut().zip(path.as_slice()) {
            *d = *p;
        }
        s
    }

    /// The bytes on the wire.
    pub fn as_wire(&self) -> &[u8; crate::MAD_SIZE] {
        zerocopy::transmute_ref!(self)
    }

    /// True for class 0x81.
    pub fn is_directed(&self) -> bool {
        self.header.mgmt_class == 0x81
    }
    /// The method byte.
    pub fn method(&self) -> Method {
        self.header.method()
    }
    /// The attribute ID.
    pub fn attribute_id(&self) -> AttributeId {
        self.header.attribute_id()
    }
    /// The attribute modifier.
    pub fn attribute_modifier(&self) -> u32 {
        self.header.attribute_modifier.get()
    }
    /// Status without the D bit.
    pub fn status(&self) -> Status {
        if self.is_directed() {
            self.header.status().without_direction()
        } else {
            self.header.status()
        }
    }
    /// Sets the status, keeping the D bit of a directed-route SMP.
    pub fn set_status(&mut self, st: Status) {
        let d = if self.is_directed() {
            self.header.status.get() & Status::DIRECTION
        } else {
            0
        };
        self.header.status = U16::new((st.0 & !Status::DIRECTION) | d);
    }
    /// The D bit: false on the outbound (request) path, true on the return path.
    pub fn direction(&self) -> bool {
        self.is_directed() && self.header.status.get() & Status::DIRECTION != 0
    }
    /// Sets or clears the D bit.
    pub fn set_direction(&mut self, d: bool) {
        let s = self.header.status.get();
        self.header.status = U16::new(if d {
            s | Status::DIRECTION
        } else {
            s & !Status::DIRECTION
        });
    }
    /// HopPointer (directed route).
    pub fn hop_pointer(&self) -> u8 {
        (self.header.class_specific.get() >> 8) as u8
    }
    /// HopCount (directed route).
    pub fn hop_count(&self) -> u8 {
        self.header.class_specific.get() as u8
    }
    /// Sets HopPointer.
    pub fn set_hop_pointer(&mut self, hp: u8) {
        let c = self.header.class_specific.get();
        self.header.class_specific = U16::new((c & 0x00FF) | (u16::from(hp) << 8));
    }
    /// Sets HopCount.
    pub fn set_hop_count(&mut self, hc: u8) {
        let c = self.header.class_specific.get();
        self.header.class_specific = U16::new((c & 0xFF00) | u16::from(hc));
    }
    /// Sets DrSLID.
    pub fn set_dr_slid(&mut self, lid: Lid) {
        self.dr_slid = U16::new(lid.0);
    }
    /// Sets DrDLID.
    pub fn set_dr_dlid(&mut self, lid: Lid) {
        self.dr_dlid = U16::new(lid.0);
    }
    /// Sets the M_Key.
    pub fn set_m_key(&mut self, k: MKey) {
        self.m_key = U64::new(k.0);
    }
    /// Sets the attribute modifier.
    pub fn set_attribute_modifier(&mut self, am: u32) {
        self.header.attribute_modifier = U32::new(am);
    }
    /// DrSLID.
    pub fn dr_slid(&self) -> Lid {
        Lid(self.dr_slid.get())
    }
    /// DrDLID.
    pub fn dr_dlid(&self) -> Lid {
        Lid(self.dr_dlid.get())
    }
    /// The M_Key.
    pub fn m_key(&self) -> MKey {
        MKey(self.m_key.get())
    }
    /// InitialPath[1..=HopCount] (hop count clamped to 63).
    pub fn initial_path(&self) -> DrPath {
        let n = usize::from(self.hop_count().min(63));
        DrPath::from_ports(&self.initial_path[1..=n]).unwrap_or_default()
    }
    /// ReturnPath[1..=HopCount] (hop count clamped to 63).
    pub fn return_path(&self) -> DrPath {
        let n = usize::from(self.hop_count().min(63));
        DrPath::from_ports(&self.return_path[1..=n]).unwrap_or_default()
    }
    /// Decodes the attribute data according to the attribute ID and checks the modifier.
    pub fn attribute(&self) -> Result<AnyAttribute, Error> {
        AnyAttribute::decode(self.attribute_id(), self.attribute_modifier(), &self.data)
    }
}

/// The SMP-specific header fields (after the common header) for dumps.
pub struct SmpHeaderFields<'a>(pub &'a Smp);

impl Fields for SmpHeaderFields<'_> {
    fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
        let s = self.0;
        f("m_key", Value::Id64(s.m_key.get()));
        if s.is_directed() {
            let n = usize::from(s.hop_count().min(63));
            f("d", Value::Bool(s.direction()));
            f(
                "hop_pointer",
                Value::Num {
                    v: s.hop_pointer().into(),
                    hex: false,
                },
            );
            f(
                "hop_count",
                Value::Num {
                    v: s.hop_count().into(),
                    hex: false,
                },
            );
            f(
                "dr_slid",
                Value::Num {
                    v: s.dr_slid.get().into(),
                    hex: false,
                },
            );
            f(
                "dr_dlid",
                Value::Num {
                    v: s.dr_dlid.get().into(),
                    hex: false,
                },
            );
            f(
                "initial_path",
                Value::List(&PathList(&s.initial_path[1..=n])),
            );
            f("return_path", Value::List(&PathList(&s.return_path[1..=n])));
        }
    }
}

struct PathList<'a>(&'a [u8]);
impl crate::field::List for PathList<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn item(&self, i: usize) -> Option<Value<'_>> {
        self.0.get(i).map(|&p| Value::Num {
            v: p.into(),
            hex: false,
        })
    }
}

impl core::fmt::Debug for Smp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Smp")
            .field("header", &self.header)
            .field("smp", &Value::Record(&SmpHeaderFields(self)))
            .field("attribute", &self.attribute())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directed_builder_lays_out_the_path() {
        let path = DrPath::from_ports(&[1, 3, 5]).unwrap();
        let s = Smp::directed(&path, Method::Get, AttributeId::NodeInfo, 0, 0x42, MKey(0));
        let w = s.as_wire();
        assert_eq!(w[1], 0x81);
        assert_eq!(w[6], 0, "hop pointer");
        assert_eq!(w[7], 3, "hop count");
        assert_eq!(&w[32..36], &[0xFF, 0xFF, 0xFF, 0xFF]);
        assert_eq!(&w[128..132], &[0, 1, 3, 5]);
        assert_eq!(s.initial_path().as_slice(), &[1, 3, 5]);
        assert_eq!(&w[16..18], &[0x00, 0x11]);
        let p = Smp::parse(w).unwrap();
        assert_eq!(p.hop_count(), 3);
    }

    #[test]
    fn parse_refuses_bad_headers() {
        let s = Smp::lid_routed(Method::Get, AttributeId::PortInfo, 1, 1, MKey(0));
        let mut w = *s.as_wire();
        assert!(Smp::parse(&w).is_ok());
        w[0] = 2;
        assert!(matches!(
            Smp::parse(&w),
            Err(Error::InvalidField {
                field: "base_version",
                ..
            })
        ));
        w[0] = 1;
        w[1] = 0x03;
        assert!(matches!(
            Smp::parse(&w),
            Err(Error::InvalidField {
                field: "mgmt_class",
                ..
            })
        ));
        w[1] = 0x81;
        w[7] = 64;
        assert!(matches!(
            Smp::parse(&w),
            Err(Error::InvalidField {
                field: "hop_count",
                ..
            })
        ));
        w[7] = 2;
        w[6] = 4;
        assert!(matches!(
            Smp::parse(&w),
            Err(Error::InvalidField {
                field: "hop_pointer",
                ..
            })
        ));
        assert!(matches!(
            Smp::parse(&w[..255]),
            Err(Error::Truncated {
                needed: 256,
                got: 255,
                ..
            })
        ));
    }

    #[test]
    fn status_keeps_the_direction_bit() {
        let mut s = Smp::directed(
            &DrPath::new(),
            Method::Get,
            AttributeId::NodeInfo,
            0,
            1,
            MKey(0),
        );
        s.set_direction(true);
        s.set_status(Status::INVALID_FIELD);
        assert!(s.direction());
        assert_eq!(s.status(), Status::INVALID_FIELD);
        assert_eq!(s.header.status.get(), 0x801C);
    }
}
