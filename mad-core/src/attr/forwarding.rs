//! Switch forwarding tables: LinearForwardingTable (0x0019),
//! RandomForwardingTable (0x001A) and MulticastForwardingTable (0x001B).

use crate::types::Lid;

/// The egress port value meaning "no route, drop".
pub const DROP_PORT: u8 = 0xFF;

bitstruct! {
    /// LinearForwardingTable: the egress port of 64 consecutive LIDs
    /// (block b covers LIDs 64b … 64b+63; port 255 drops, port 0 is the
    /// switch itself).
    pub struct LinearForwardingTable("LinearForwardingTable", 64) {
        /// `port[i]` forwards LID 64·block + i.
        port: [u8; 64] = 0, 512;
    }
}

impl LinearForwardingTable {
    /// A zero-copy view of the 64 egress ports in an SMP data area, for
    /// readers that do not need an owned copy (the SMA, a dump of a table).
    #[inline]
    pub fn view(data: &[u8]) -> Result<&[u8; 64], crate::Error> {
        let got = data.len();
        data.get(..64)
            .and_then(|s| s.try_into().ok())
            .ok_or(crate::Error::Truncated {
                what: "LinearForwardingTable",
                needed: 64,
                got,
            })
    }
    /// A block with every entry set to drop.
    pub const fn dropping() -> Self {
        LinearForwardingTable {
            port: [DROP_PORT; 64],
        }
    }
}

bitstruct! {
    /// One RandomForwardingTable entry: a LID (range), its validity and port.
    pub struct RftEntry("RandomForwardingEntry", 4) {
        /// Destination base LID.
        lid: Lid = 0, 16;
        /// Entry in use.
        valid: bool = 16, 1;
        /// The entry covers 2^LMC LIDs.
        lmc: u8 = 17, 3;
        /// Egress port.
        port: u8 = 24, 8;
    }
}
record_field!(RftEntry);

bitstruct! {
    /// RandomForwardingTable: 16 LID/port entries per block.
    pub struct RandomForwardingTable("RandomForwardingTable", 64) {
        /// The entries.
        entries: [RftEntry; 16] = 0, 512;
    }
}

bitstruct! {
    /// MulticastForwardingTable: for 32 MLIDs (0xC000 + 32·block + i) the
    /// mask of 16 ports at the position (bit k = port 16·position + k).
    pub struct MulticastForwardingTable("MulticastForwardingTable", 64) {
        /// Port masks.
        port_mask: [u16; 32] = 0, 512;
    }
}
