//! Newtypes for the identifiers of an InfiniBand subnet: LIDs, GUIDs, GIDs,
//! partition and management keys, port numbers and directed-route hop counts.

use crate::error::Error;
use core::fmt;

/// A 16-bit Local Identifier, assigned by the SM to every end port and switch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lid(pub u16);

/// The classes of LID value (IBA 4.1.3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LidKind {
    /// 0x0000: reserved, never assigned ("no LID yet").
    Reserved,
    /// 0x0001–0xBFFF: unicast.
    Unicast,
    /// 0xC000–0xFFFE: multicast.
    Multicast,
    /// 0xFFFF: the permissive LID, accepted by any port (DR SLID/DLID).
    Permissive,
}

impl Lid {
    /// The permissive LID 0xFFFF.
    pub const PERMISSIVE: Lid = Lid(0xFFFF);
    /// The reserved LID 0, meaning "unassigned".
    pub const UNASSIGNED: Lid = Lid(0);
    /// Lowest unicast LID.
    pub const UNICAST_MIN: Lid = Lid(0x0001);
    /// Highest unicast LID.
    pub const UNICAST_MAX: Lid = Lid(0xBFFF);
    /// Lowest multicast LID.
    pub const MULTICAST_MIN: Lid = Lid(0xC000);
    /// Highest multicast LID.
    pub const MULTICAST_MAX: Lid = Lid(0xFFFE);

    /// Which class of LID this is.
    pub const fn kind(self) -> LidKind {
        match self.0 {
            0 => LidKind::Reserved,
            0x0001..=0xBFFF => LidKind::Unicast,
            0xC000..=0xFFFE => LidKind::Multicast,
            _ => LidKind::Permissive,
        }
    }
    /// True for 0x0001–0xBFFF.
    pub const fn is_unicast(self) -> bool {
        matches!(self.kind(), LidKind::Unicast)
    }
    /// True for 0xC000–0xFFFE.
    pub const fn is_multicast(self) -> bool {
        matches!(self.kind(), LidKind::Multicast)
    }
    /// True for 0xFFFF.
    pub const fn is_permissive(self) -> bool {
        self.0 == 0xFFFF
    }
    /// The linear forwarding table block (64 LIDs each) holding this LID.
    pub const fn lft_block(self) -> u16 {
        self.0 / 64
    }
}

impl fmt::Debug for Lid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lid({:#06x})", self.0)
    }
}
impl fmt::Display for Lid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A 64-bit EUI-64 Globally Unique Identifier (node, port or system image).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Guid(pub u64);

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({:#018x})", self.0)
    }
}
impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

/// A 128-bit Global Identifier: 64-bit subnet prefix followed by a port GUID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The default subnet prefix fe80::/64.
    pub const DEFAULT_PREFIX: u64 = 0xfe80_0000_0000_0000;

    /// Builds a GID from a subnet prefix and an interface (port) GUID.
    pub fn new(prefix: u64, guid: Guid) -> Self {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&prefix.to_be_bytes());
        b[8..].copy_from_slice(&guid.0.to_be_bytes());
        Gid(b)
    }
    /// The 64-bit subnet prefix.
    pub fn prefix(&self) -> u64 {
        u64::from_be_bytes([
            self.0[0], self.0[1], self.0[2], self.0[3], self.0[4], self.0[5], self.0[6], self.0[7],
        ])
    }
    /// The interface identifier (port GUID).
    pub fn guid(&self) -> Guid {
        Guid(u64::from_be_bytes([
            self.0[8], self.0[9], self.0[10], self.0[11], self.0[12], self.0[13], self.0[14],
            self.0[15],
        ]))
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// A 16-bit partition key: bit 15 is the membership type, bits 14..0 the base.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PKey(pub u16);

impl PKey {
    /// The default partition, full membership.
    pub const DEFAULT_FULL: PKey = PKey(0xFFFF);
    /// The default partition, limited membership.
    pub const DEFAULT_LIMITED: PKey = PKey(0x7FFF);

    /// True when bit 15 (full membership) is set.
    pub const fn is_full_member(self) -> bool {
        self.0 & 0x8000 != 0
    }
    /// The 15-bit partition number.
    pub const fn base(self) -> u16 {
        self.0 & 0x7FFF
    }
    /// P_Keys whose base is 0 (0x0000, 0x8000) are invalid and match nothing.
    pub const fn is_valid(self) -> bool {
        self.base() != 0
    }
    /// Two P_Keys match when their bases are equal, they are valid, and at
    /// least one of them is a full member (IBA 10.9.3).
    pub const fn matches(self, other: PKey) -> bool {
        self.is_valid()
            && self.base() == other.base()
            && (self.is_full_member() || other.is_full_member())
    }
}

impl fmt::Debug for PKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PKey({:#06x})", self.0)
    }
}

/// A 64-bit management key guarding a port's SMA.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MKey(pub u64);

impl fmt::Debug for MKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MKey({:#018x})", self.0)
    }
}

/// A physical port number: 0 is a switch's management port, 1–254 physical
/// ports; 255 is reserved (it means "drop" in a forwarding table).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct PortNum(u8);

impl PortNum {
    /// Highest valid port number.
    pub const MAX: u8 = 254;

    /// A port number, refusing the reserved value 255.
    pub const fn new(n: u8) -> Result<Self, Error> {
        if n > Self::MAX {
            Err(Error::InvalidField {
                what: "PortNum",
                field: "port",
                value: n as u64,
                expected: "0..=254",
            })
        } else {
            Ok(PortNum(n))
        }
    }
    /// The port number as a byte.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// A directed-route hop count, 0–63 (IBA C14-6).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct HopCount(u8);

impl HopCount {
    /// The largest hop count a directed-route SMP can carry.
    pub const MAX: u8 = 63;

    /// A hop count, refusing anything above 63.
    pub const fn new(n: u8) -> Result<Self, Error> {
        if n > Self::MAX {
            Err(Error::InvalidField {
                what: "HopCount",
                field: "hop_count",
                value: n as u64,
                expected: "0..=63",
            })
        } else {
            Ok(HopCount(n))
        }
    }
    /// The hop count as a byte.
    pub const fn get(self) -> u8 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lid_classes_at_the_boundaries() {
        assert_eq!(Lid(0).kind(), LidKind::Reserved);
        assert_eq!(Lid(1).kind(), LidKind::Unicast);
        assert_eq!(Lid(0xBFFF).kind(), LidKind::Unicast);
        assert_eq!(Lid(0xC000).kind(), LidKind::Multicast);
        assert_eq!(Lid(0xFFFE).kind(), LidKind::Multicast);
        assert_eq!(Lid(0xFFFF).kind(), LidKind::Permissive);
        assert_eq!(Lid(127).lft_block(), 1);
    }

    #[test]
    fn pkey_membership_and_matching() {
        assert!(PKey(0xFFFF).matches(PKey(0x7FFF)));
        assert!(
            !PKey(0x7FFF).matches(PKey(0x7FFF)),
            "two limited members never match"
        );
        assert!(!PKey(0x8000).matches(PKey(0x8000)), "base 0 is invalid");
        assert!(!PKey(0x8001).matches(PKey(0x8002)));
    }

    #[test]
    fn gid_splits_into_prefix_and_guid() {
        let g = Gid::new(Gid::DEFAULT_PREFIX, Guid(0x0002_c903_0000_1234));
        assert_eq!(g.prefix(), 0xfe80_0000_0000_0000);
        assert_eq!(g.guid(), Guid(0x0002_c903_0000_1234));
    }

    #[test]
    fn port_and_hop_count_limits() {
        assert!(PortNum::new(254).is_ok());
        assert!(PortNum::new(255).is_err());
        assert!(HopCount::new(63).is_ok());
        assert!(HopCount::new(64).is_err());
    }
}
