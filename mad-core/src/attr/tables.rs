//! Per-port tables: GUIDInfo (0x0014), P_KeyTable (0x0016),
//! SLtoVLMappingTable (0x0017) and VLArbitrationTable (0x0018).

use crate::types::{Guid, PKey};

bitstruct! {
    /// GUIDInfo: one block of 8 port GUIDs (entry 0 of block 0 is the
    /// read-only hardware port GUID; the others are alias GUIDs, such as a
    /// VF's). The modifier is the block number.
    pub struct GuidInfo("GUIDInfo", 64) {
        /// GUID entries 8·block … 8·block+7.
        guids: [Guid; 8] = 0, 512;
    }
}

bitstruct! {
    /// P_KeyTable: one block of 32 partition keys.
    pub struct PKeyTable("P_KeyTable", 64) {
        /// P_Key entries 32·block … 32·block+31.
        p_keys: [PKey; 32] = 0, 512;
    }
}

bitstruct! {
    /// SLtoVLMappingTable: the VL for each of the 16 service levels (VL 15 drops).
    pub struct SlToVlMappingTable("SLtoVLMappingTable", 8) {
        /// `vl[sl]`: 4 bits each, SL 0 in the high nibble of byte 0.
        vl: [u8; 16] = 0, 64;
    }
}

bitstruct! {
    /// One VL arbitration entry: a VL and its weight in 64-byte units.
    pub struct VlArbEntry("VLArbitrationEntry", 2) {
        /// Virtual lane.
        vl: u8 = 4, 4;
        /// Weight (0 = skip).
        weight: u8 = 8, 8;
    }
}
record_field!(VlArbEntry);

bitstruct! {
    /// VLArbitrationTable: 32 entries of one block of the high- or
    /// low-priority table.
    pub struct VlArbitrationTable("VLArbitrationTable", 64) {
        /// The entries.
        entries: [VlArbEntry; 32] = 0, 512;
    }
}
