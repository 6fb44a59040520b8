//! Attribute modifiers: what the 32-bit AttributeModifier means for each
//! attribute (block numbers, port selectors), decoded into types and checked.

use crate::error::Error;

/// Decoding and encoding of one attribute's modifier.
pub trait Modifier: Copy + core::fmt::Debug + PartialEq {
    /// Decodes and checks `am` for `attribute`.
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error>;
    /// The 32-bit modifier.
    fn encode(self) -> u32;
}

fn invalid(attribute: &'static str, modifier: u32, reason: &'static str) -> Error {
    Error::InvalidAttributeModifier {
        attribute,
        modifier,
        reason,
    }
}

/// The modifier must be zero (NodeInfo, NodeDescription, SwitchInfo, Notice …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Zero;

impl Modifier for Zero {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        if am == 0 {
            Ok(Zero)
        } else {
            Err(invalid(attribute, am, "must be 0"))
        }
    }
    fn encode(self) -> u32 {
        0
    }
}

/// Any 32-bit value; used where no public source defines the meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Raw(pub u32);

impl Modifier for Raw {
    fn decode(_: &'static str, am: u32) -> Result<Self, Error> {
        Ok(Raw(am))
    }
    fn encode(self) -> u32 {
        self.0
    }
}

/// A table block number, at most `MAX` (bits 31..16 must be zero unless the
/// attribute defines them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Block<const MAX: u32>(pub u16);

impl<const MAX: u32> Modifier for Block<MAX> {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        if am > MAX {
            Err(invalid(attribute, am, "block number beyond the table"))
        } else {
            Ok(Block(am as u16))
        }
    }
    fn encode(self) -> u32 {
        u32::from(self.0)
    }
}

/// PortInfo / PortInfoExtended / MlnxExtendedPortInfo: bits 7..0 select the
/// port (0 = the port the SMP arrived on for a CA, the management port for a
/// switch); bit 31 is SMSupportsExtendedSpeeds: the SM understands the
/// extended link speed fields (OpenSM sets it in its PortInfo requests when
/// the port advertises IsExtendedSpeedsSupported, `osm_link_mgr.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PortSelect {
    /// The selected port.
    pub port: u8,
    /// SMSupportsExtendedSpeeds (bit 31).
    pub sm_supports_extended_speeds: bool,
}

impl Modifier for PortSelect {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        if am & 0x7FFF_FF00 != 0 {
            return Err(invalid(attribute, am, "bits 30..8 are reserved"));
        }
        let port = am as u8;
        if port == 255 {
            return Err(invalid(attribute, am, "port 255 does not exist"));
        }
        Ok(PortSelect {
            port,
            sm_supports_extended_speeds: am & 0x8000_0000 != 0,
        })
    }
    fn encode(self) -> u32 {
        u32::from(self.port)
            | if self.sm_supports_extended_speeds {
                0x8000_0000
            } else {
                0
            }
    }
}

/// P_KeyTable: bits 15..0 block (32 P_Keys each, at most 2047), bits 31..16
/// the switch port (CAs: 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PKeyBlock {
    /// Switch port whose table is addressed.
    pub port: u8,
    /// Block of 32 entries.
    pub block: u16,
}

impl Modifier for PKeyBlock {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        let block = am & 0xFFFF;
        let port = am >> 16;
        if block > 2047 {
            Err(invalid(attribute, am, "block beyond 2047"))
        } else if port > 254 {
            Err(invalid(attribute, am, "port beyond 254"))
        } else {
            Ok(PKeyBlock {
                port: port as u8,
                block: block as u16,
            })
        }
    }
    fn encode(self) -> u32 {
        (u32::from(self.port) << 16) | u32::from(self.block)
    }
}

/// VPortPKeyTable (vendor 0xFFB6): bits 15..0 the block (32 P_Keys each),
/// bits 31..16 the vport (1-based; vport 0 is the physical port, whose
/// table is P_KeyTable's). NVIDIA's packing is not public (ibis names the
/// two arguments, vport and block, but not their bits): this is ibkit's,
/// P_KeyTable's with the vport in the switch port's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct VPortPKeyBlock {
    /// The vport whose table is addressed (1-based).
    pub vport: u16,
    /// Block of 32 entries.
    pub block: u16,
}

impl Modifier for VPortPKeyBlock {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        let block = am & 0xFFFF;
        let vport = (am >> 16) as u16;
        if block > 2047 {
            Err(invalid(attribute, am, "block beyond 2047"))
        } else if vport == 0 {
            Err(invalid(
                attribute,
                am,
                "vport 0 (the port's own table is P_KeyTable)",
            ))
        } else {
            Ok(VPortPKeyBlock {
                vport,
                block: block as u16,
            })
        }
    }
    fn encode(self) -> u32 {
        (u32::from(self.vport) << 16) | u32::from(self.block)
    }
}

/// SLtoVLMappingTable: bits 15..8 input port, bits 7..0 output port
/// (switches; CAs and routers use 0), bit 17 AllInputPorts and bit 16
/// AllOutputPorts (optimized SL-to-VL programming).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SlToVlPorts {
    /// Input port.
    pub input_port: u8,
    /// Output port.
    pub output_port: u8,
    /// AllInputPorts (bit 17).
    pub all_input_ports: bool,
    /// AllOutputPorts (bit 16).
    pub all_output_ports: bool,
}

impl Modifier for SlToVlPorts {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        if am & 0xFFFC_0000 != 0 {
            return Err(invalid(attribute, am, "bits 31..18 are reserved"));
        }
        Ok(SlToVlPorts {
            input_port: (am >> 8) as u8,
            output_port: am as u8,
            all_input_ports: am & (1 << 17) != 0,
            all_output_ports: am & (1 << 16) != 0,
        })
    }
    fn encode(self) -> u32 {
        (u32::from(self.all_input_ports) << 17)
            | (u32::from(self.all_output_ports) << 16)
            | (u32::from(self.input_port) << 8)
            | u32::from(self.output_port)
    }
}

enum_with_unknown! {
    /// Which 32 entries of the VL arbitration table a block holds.
    pub enum VlArbBlock(u16) {
        /// Low-priority entries 0–31.
        LowPriority0To31 = 1,
        /// Low-priority entries 32–63.
        LowPriority32To63 = 2,
        /// High-priority entries 0–31.
        HighPriority0To31 = 3,
        /// High-priority entries 32–63.
        HighPriority32To63 = 4,
    }
}

/// VLArbitrationTable: bits 31..16 block 1–4, bits 15..0 output port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlArbSelect {
    /// Which part of the table.
    pub block: VlArbBlock,
    /// Output port (switches).
    pub port: u8,
}

impl Modifier for VlArbSelect {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        let block = VlArbBlock::from((am >> 16) as u16);
        if !block.is_known() {
            return Err(invalid(attribute, am, "block must be 1..=4"));
        }
        if am & 0xFFFF > 254 {
            return Err(invalid(attribute, am, "port beyond 254"));
        }
        Ok(VlArbSelect {
            block,
            port: am as u8,
        })
    }
    fn encode(self) -> u32 {
        (u32::from(u16::from(self.block)) << 16) | u32::from(self.port)
    }
}

/// MulticastForwardingTable: bits 31..28 port position (ports 16p..16p+15),
/// bits 8..0 block (32 MLIDs from 0xC000 + 32·block); bits 27..9 reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MftSelect {
    /// Port group position 0–15.
    pub position: u8,
    /// Block 0–511.
    pub block: u16,
}

impl Modifier for MftSelect {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        if am & 0x0FFF_FE00 != 0 {
            return Err(invalid(attribute, am, "bits 27..9 are reserved"));
        }
        Ok(MftSelect {
            position: (am >> 28) as u8,
            block: (am & 0x1FF) as u16,
        })
    }
    fn encode(self) -> u32 {
        (u32::from(self.position & 0xF) << 28) | u32::from(self.block & 0x1FF)
    }
}

enum_with_unknown! {
    /// SMInfo Set modifiers: the SM-to-SM control operation.
    pub enum SmInfoControl(u8) {
        /// Get (no operation).
        None = 0,
        /// Handover.
        Handover = 1,
        /// Acknowledge.
        Acknowledge = 2,
        /// Disable.
        Disable = 3,
        /// Standby.
        Standby = 4,
        /// Discover.
        Discover = 5,
    }
}

impl Modifier for SmInfoControl {
    fn decode(attribute: &'static str, am: u32) -> Result<Self, Error> {
        if am > 5 {
            Err(invalid(attribute, am, "SMInfo control must be 0..=5"))
        } else {
            Ok(SmInfoControl::from(am as u8))
        }
    }
    fn encode(self) -> u32 {
        u32::from(u8::from(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifiers_round_trip_and_refuse_reserved_bits() {
        let m = MftSelect::decode("MFT", 0x3000_0005).unwrap();
        assert_eq!(
            m,
            MftSelect {
                position: 3,
                block: 5
            }
        );
        assert_eq!(m.encode(), 0x3000_0005);
        assert!(MftSelect::decode("MFT", 0x0000_0200).is_err());

        let p = PKeyBlock::decode("P_KeyTable", 0x0005_0003).unwrap();
        assert_eq!(p, PKeyBlock { port: 5, block: 3 });
        assert!(PKeyBlock::decode("P_KeyTable", 2048).is_err());

        assert_eq!(Block::<767>::decode("LFT", 767).unwrap(), Block(767));
        assert!(Block::<767>::decode("LFT", 768).is_err());

        let v = VlArbSelect::decode("VLArb", 0x0003_0002).unwrap();
        assert_eq!(v.block, VlArbBlock::HighPriority0To31);
        assert!(VlArbSelect::decode("VLArb", 0x0005_0000).is_err());
        assert!(VlArbSelect::decode("VLArb", 0).is_err());

        assert_eq!(
            PortSelect::decode("PortInfo", 0x8000_0003).unwrap(),
            PortSelect {
                port: 3,
                sm_supports_extended_speeds: true
            }
        );
        assert!(PortSelect::decode("PortInfo", 0x100).is_err());
        assert!(Zero::decode("NodeInfo", 1).is_err());
        assert_eq!(
            SmInfoControl::decode("SMInfo", 1).unwrap(),
            SmInfoControl::Handover
        );
        assert!(SmInfoControl::decode("SMInfo", 6).is_err());
        let s = SlToVlPorts::decode("SLtoVL", 0x0003_0102).unwrap();
        assert!(s.all_input_ports && s.all_output_ports);
        assert_eq!((s.input_port, s.output_port), (1, 2));
        assert_eq!(s.encode(), 0x0003_0102);
    }
}

mod dump {
    use super::*;
    use crate::field::{Field, Fields, Value};

    fn num(v: impl Into<u64>) -> Value<'static> {
        Value::Num {
            v: v.into(),
            hex: false,
        }
    }
    impl Fields for Zero {
        fn visit(&self, _: &mut dyn FnMut(&'static str, Value<'_>)) {}
    }
    impl Fields for Raw {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f(
                "attribute_modifier",
                Value::Num {
                    v: self.0.into(),
                    hex: true,
                },
            );
        }
    }
    impl<const MAX: u32> Fields for Block<MAX> {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f("block", num(self.0));
        }
    }
    impl Fields for PortSelect {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f("port", num(self.port));
            f(
                "sm_supports_extended_speeds",
                Value::Bool(self.sm_supports_extended_speeds),
            );
        }
    }
    impl Fields for PKeyBlock {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f("port", num(self.port));
            f("block", num(self.block));
        }
    }
    impl Fields for VPortPKeyBlock {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f("vport", num(self.vport));
            f("block", num(self.block));
        }
    }
    impl Fields for SlToVlPorts {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f("input_port", num(self.input_port));
            f("output_port", num(self.output_port));
            f("all_input_ports", Value::Bool(self.all_input_ports));
            f("all_output_ports", Value::Bool(self.all_output_ports));
        }
    }
    impl Fields for VlArbSelect {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f("block", self.block.value());
            f("port", num(self.port));
        }
    }
    impl Fields for MftSelect {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f("position", num(self.position));
            f("block", num(self.block));
        }
    }
    impl Fields for SmInfoControl {
        fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
            f("control", self.value());
        }
    }
}
