//! The smaller and rarer attributes: SwitchPortStateTable (0x0034), LedInfo
//! (0x0031), VendorDiag (0x0030), CableInfo (0x0032), LinkSpeedWidthPairsTable
//! (0x001C) and VendorSpecificMadsTable (0x001D).

use super::modifier::{Block, PortSelect, Raw};
use super::port_info::PortState;
use crate::field::Bytes;

bitstruct! {
    /// SwitchPortStateTable: the PortState of 128 switch ports per block
    /// (block b covers ports 128b … 128b+127, even port in the high nibble).
    pub struct SwitchPortStateTable("SwitchPortStateTable", 64) {
        /// `port_state[i]` is the state of port 128·block + i.
        port_state: [PortState; 128] = 0, 512;
    }
}
impl_attribute!(SwitchPortStateTable, SwitchPortStateTable, Block<1>);

bitstruct! {
    /// LedInfo: the port's beacon LED.
    pub struct LedInfo("LedInfo", 4) {
        /// LED on (1) or off (0).
        led_mask: bool = 0, 1;
    }
}
impl_attribute!(LedInfo, LedInfo, PortSelect);

bitstruct! {
    /// VendorDiag: vendor diagnostic data, chained by NextIndex; the modifier
    /// is the diagnostic index.
    pub struct VendorDiag("VendorDiag", 64) {
        /// Index of the next diagnostic block (0 = last).
        next_index: u16 = 0, 16;
        /// Vendor-defined diagnostic data.
        diag_data: Bytes<62> = 16, 496;
    }
}
impl_attribute!(VendorDiag, VendorDiag, Block<0xFFFF>);

bitstruct! {
    /// CableInfo: 64 bytes of the cable's EEPROM. No public source we could
    /// consult gives the modifier's sub-fields (address, length, page); the
    /// modifier is kept raw and the data exposed as bytes.
    pub struct CableInfo("CableInfo", 64) {
        /// Raw EEPROM bytes.
        data: Bytes<64> = 0, 512;
    }
}
impl_attribute!(CableInfo, CableInfo, Raw);

bitstruct! {
    /// LinkSpeedWidthPairsTable: no public source gives its layout; the data
    /// is exposed as raw bytes and the modifier kept raw.
    pub struct LinkSpeedWidthPairsTable("LinkSpeedWidthPairsTable", 64) {
        /// Raw data.
        data: Bytes<64> = 0, 512;
    }
}
impl_attribute!(LinkSpeedWidthPairsTable, LinkSpeedWidthPairsTable, Raw);

bitstruct! {
    /// VendorSpecificMadsTable: no public source gives its layout; the data
    /// is exposed as raw bytes and the modifier kept raw.
    pub struct VendorSpecificMadsTable("VendorSpecificMadsTable", 64) {
        /// Raw data.
        data: Bytes<64> = 0, 512;
    }
}
impl_attribute!(VendorSpecificMadsTable, VendorSpecificMadsTable, Raw);
