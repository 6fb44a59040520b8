//! Every SMP attribute: the [`Attribute`] trait each one implements, the
//! attribute IDs, and [`AnyAttribute`], which decodes the data area of any SMP
//! by its attribute ID.
//!
//! Layouts the public sources do not give are exposed as raw bytes behind a
//! typed accessor; each such type says so in its documentation.

use crate::error::Error;
use crate::field::{Fields, Value};
use crate::notice::Notice;
pub use forwarding::*;
pub use misc::*;
pub use modifier::Modifier;
use modifier::*;
pub use node::*;
pub use port_info::*;
pub use sm_info::*;
pub use switch_info::*;
pub use tables::*;
pub use vendor::*;

enum_with_unknown! {
    /// SMP attribute IDs (IBA 14.2.5, plus the vendor attributes ibkit knows).
    pub enum AttributeId(u16) {
        /// ClassPortInfo (not an SMP attribute: its 72 bytes exceed the SMP data area).
        ClassPortInfo = 0x0001,
        /// Notice.
        Notice = 0x0002,
        /// NodeDescription.
        NodeDescription = 0x0010,
        /// NodeInfo.
        NodeInfo = 0x0011,
        /// SwitchInfo.
        SwitchInfo = 0x0012,
        /// GUIDInfo.
        GuidInfo = 0x0014,
        /// PortInfo.
        PortInfo = 0x0015,
        /// P_KeyTable.
        PKeyTable = 0x0016,
        /// SLtoVLMappingTable.
        SlToVlMappingTable = 0x0017,
        /// VLArbitrationTable.
        VlArbitrationTable = 0x0018,
        /// LinearForwardingTable.
        LinearForwardingTable = 0x0019,
        /// RandomForwardingTable.
        RandomForwardingTable = 0x001A,
        /// MulticastForwardingTable.
        MulticastForwardingTable = 0x001B,
        /// LinkSpeedWidthPairsTable.
        LinkSpeedWidthPairsTable = 0x001C,
        /// VendorSpecificMadsTable.
        VendorSpecificMadsTable = 0x001D,
        /// SMInfo.
        SmInfo = 0x0020,
        /// VendorDiag.
        VendorDiag = 0x0030,
        /// LedInfo.
        LedInfo = 0x0031,
        /// CableInfo.
        CableInfo = 0x0032,
        /// PortInfoExtended.
        PortInfoExtended = 0x0033,
        /// SwitchPortStateTable.
        SwitchPortStateTable = 0x0034,
        /// Mellanox ExtendedPortInfo (vendor).
        MlnxExtPortInfo = 0xFF90,
        /// VirtualizationInfo (vendor).
        VirtualizationInfo = 0xFFB0,
        /// VPortInfo (vendor).
        VPortInfo = 0xFFB1,
        /// VNodeInfo (vendor).
        VNodeInfo = 0xFFB2,
        /// VPortState (vendor).
        VPortState = 0xFFB3,
        /// VNodeDescription (vendor).
        VNodeDescription = 0xFFB4,
        /// VPortGUIDInfo (vendor).
        VPortGuidInfo = 0xFFB5,
        /// VPortPKeyTable (vendor).
        VPortPKeyTable = 0xFFB6,
    }
}

/// One SMP attribute: its ID, its modifier, and its layout.
pub trait Attribute: Sized + Fields + core::fmt::Debug + PartialEq {
    /// The attribute ID.
    const ID: AttributeId;
    /// The spec name (`"PortInfo"`, `"P_KeyTable"`).
    const NAME: &'static str;
    /// What the attribute modifier means for this attribute.
    type Modifier: Modifier + Fields;

    /// Decodes from the SMP data area.
    fn decode(data: &[u8]) -> Result<Self, Error>;
    /// Encodes into the SMP data area (at least the attribute's size).
    fn encode(&self, data: &mut [u8]) -> Result<(), Error>;
    /// Checks values against what the specification allows.
    fn check(&self) -> Result<(), Error> {
        Ok(())
    }
    /// Decodes and checks an attribute modifier.
    fn decode_modifier(am: u32) -> Result<Self::Modifier, Error> {
        <Self::Modifier as Modifier>::decode(Self::NAME, am)
    }
}

macro_rules! impl_attribute {
    ($t:ty, $id:ident, $m:ty) => {
        impl_attribute!(@impl $t, $id, $m, |_s| Ok(()));
    };
    ($t:ty, $id:ident, $m:ty, check) => {
        impl_attribute!(@impl $t, $id, $m, |s| <$t>::check(s));
    };
    (@impl $t:ty, $id:ident, $m:ty, |$s:ident| $check:expr) => {
        impl $crate::attr::Attribute for $t {
            const ID: $crate::attr::AttributeId = $crate::attr::AttributeId::$id;
            const NAME: &'static str = <$t>::NAME;
            type Modifier = $m;
            #[inline]
            fn decode(data: &[u8]) -> Result<Self, $crate::error::Error> {
                <$t>::decode(data)
            }
            #[inline]
            fn encode(&self, data: &mut [u8]) -> Result<(), $crate::error::Error> {
                <$t>::encode(self, data)
            }
            #[inline]
            fn check(&self) -> Result<(), $crate::error::Error> {
                let $s = self;
                $check
            }
        }
    };
}

pub mod forwarding;
pub mod misc;
pub mod modifier;
pub mod node;
pub mod port_info;
pub mod sm_info;
pub mod switch_info;
pub mod tables;
pub mod vendor;

impl_attribute!(Notice, Notice, Zero);
impl_attribute!(NodeDescription, NodeDescription, Zero);
impl_attribute!(NodeInfo, NodeInfo, Zero, check);
impl_attribute!(SwitchInfo, SwitchInfo, Zero, check);
impl_attribute!(GuidInfo, GuidInfo, Block<31>);
impl_attribute!(PortInfo, PortInfo, PortSelect, check);
impl_attribute!(PKeyTable, PKeyTable, PKeyBlock);
impl_attribute!(SlToVlMappingTable, SlToVlMappingTable, SlToVlPorts);
impl_attribute!(VlArbitrationTable, VlArbitrationTable, VlArbSelect);
impl_attribute!(LinearForwardingTable, LinearForwardingTable, Block<767>);
impl_attribute!(RandomForwardingTable, RandomForwardingTable, Block<3071>);
impl_attribute!(
    MulticastForwardingTable,
    MulticastForwardingTable,
    MftSelect
);
impl_attribute!(SmInfo, SmInfo, SmInfoControl);
impl_attribute!(PortInfoExtended, PortInfoExtended, PortSelect);
impl_attribute!(MlnxExtPortInfo, MlnxExtPortInfo, PortSelect);

/// Declares [`AnyAttribute`] over every attribute type.
macro_rules! any_attribute {
    ($( $variant:ident($t:ty), )*) => {
        /// Any SMP attribute, decoded by attribute ID together with its modifier.
        #[derive(Clone, PartialEq, Debug)]
        pub enum AnyAttribute {
            $(
                #[doc = concat!("A decoded ", stringify!($variant), ".")]
                $variant(<$t as Attribute>::Modifier, $t),
            )*
            /// An attribute ID this crate does not know: modifier and raw data.
            Unknown {
                /// The attribute ID.
                id: u16,
                /// The attribute modifier.
                modifier: u32,
                /// The 64-byte data area.
                data: [u8; 64],
            },
        }

        impl AnyAttribute {
            /// Decodes the SMP data area `data` as attribute `id` with modifier `am`.
            pub fn decode(id: AttributeId, am: u32, data: &[u8]) -> Result<Self, Error> {
                match id {
                    $(
                        AttributeId::$variant => Ok(AnyAttribute::$variant(
                            <$t as Attribute>::decode_modifier(am)?,
                            <$t as Attribute>::decode(data)?,
                        )),
                    )*
                    other => {
                        crate::error::need("SMP data", data, 64)?;
                        let mut d = [0u8; 64];
                        d.copy_from_slice(&data[..64]);
                        Ok(AnyAttribute::Unknown { id: other.into(), modifier: am, data: d })
                    }
                }
            }
            /// Encodes the value into the SMP data area; returns (ID, modifier).
            pub fn encode(&self, data: &mut [u8]) -> Result<(AttributeId, u32), Error> {
                match self {
                    $(
                        AnyAttribute::$variant(m, v) => {
                            Attribute::encode(v, data)?;
                            Ok((AttributeId::$variant, m.encode()))
                        }
                    )*
                    AnyAttribute::Unknown { id, modifier, data: d } => {
                        crate::error::need("SMP data", data, 64)?;
                        data[..64].copy_from_slice(d);
                        Ok((AttributeId::from(*id), *modifier))
                    }
                }
            }
            /// The spec name of the attribute (`"Unknown"` for unknown IDs).
            pub fn name(&self) -> &'static str {
                match self {
                    $( AnyAttribute::$variant(..) => <$t as Attribute>::NAME, )*
                    AnyAttribute::Unknown { .. } => "Unknown",
                }
            }
            /// Checks the values against what the specification allows.
            pub fn check(&self) -> Result<(), Error> {
                match self {
                    $( AnyAttribute::$variant(_, v) => Attribute::check(v), )*
                    AnyAttribute::Unknown { .. } => Ok(()),
                }
            }
            /// The decoded modifier and the value, for dumps.
            pub fn parts(&self) -> (&dyn Fields, &dyn Fields) {
                match self {
                    $( AnyAttribute::$variant(m, v) => (m, v), )*
                    AnyAttribute::Unknown { modifier, data, .. } => (modifier, data),
                }
            }
        }
    };
}

any_attribute! {
    Notice(Notice),
    NodeDescription(NodeDescription),
    NodeInfo(NodeInfo),
    SwitchInfo(SwitchInfo),
    GuidInfo(GuidInfo),
    PortInfo(PortInfo),
    PKeyTable(PKeyTable),
    SlToVlMappingTable(SlToVlMappingTable),
    VlArbitrationTable(VlArbitrationTable),
    LinearForwardingTable(LinearForwardingTable),
    RandomForwardingTable(RandomForwardingTable),
    MulticastForwardingTable(MulticastForwardingTable),
    LinkSpeedWidthPairsTable(LinkSpeedWidthPairsTable),
    VendorSpecificMadsTable(VendorSpecificMadsTable),
    SmInfo(SmInfo),
    VendorDiag(VendorDiag),
    LedInfo(LedInfo),
    CableInfo(CableInfo),
    PortInfoExtended(PortInfoExtended),
    SwitchPortStateTable(SwitchPortStateTable),
    MlnxExtPortInfo(MlnxExtPortInfo),
    VirtualizationInfo(VirtualizationInfo),
    VPortInfo(VPortInfo),
    VNodeInfo(VNodeInfo),
    VPortState(VPortState),
    VNodeDescription(VNodeDescription),
    VPortGuidInfo(VPortGuidInfo),
    VPortPKeyTable(VPortPKeyTable),
}

impl Fields for u32 {
    fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
        f(
            "attribute_modifier",
            Value::Num {
                v: (*self).into(),
                hex: true,
            },
        );
    }
}

impl Fields for [u8; 64] {
    fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
        f("raw", Value::Bytes(self));
    }
}
