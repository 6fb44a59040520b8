//! ServiceRecord (IBA 15.2.5.14): a service registered with the SA under
//! a lease, found by ID, GID, P_Key or name.

use super::sa_record;
use crate::field::{Bytes, Text};
use crate::types::{Gid, PKey};

/// ServiceLease meaning "for ever".
pub const INDEFINITE_LEASE: u32 = 0xFFFF_FFFF;

bitstruct! {
    /// ServiceRecord (176 bytes).
    pub struct ServiceRecord("ServiceRecord", 176) {
        /// ServiceID.
        service_id: u64 = 0, 64;
        /// The GID of the port offering it.
        service_gid: Gid = 64, 128;
        /// P_Key to reach it with.
        service_pkey: PKey = 192, 16;
        /// Seconds the registration lasts ([`INDEFINITE_LEASE`]: for ever).
        service_lease: u32 = 224, 32;
        /// ServiceKey: what a deleter must present.
        service_key: Bytes<16> = 256, 128;
        /// ServiceName, UTF-8, NUL-padded.
        service_name: Text<64> = 384, 512;
        /// ServiceData8.1–16.
        service_data8: [u8; 16] = 896, 128;
        /// ServiceData16.1–8.
        service_data16: [u16; 8] = 1024, 128;
        /// ServiceData32.1–4.
        service_data32: [u32; 4] = 1152, 128;
        /// ServiceData64.1–2.
        service_data64: [u64; 2] = 1280, 128;
    }
}
sa_record!(
    ServiceRecord,
    ServiceRecord,
    [
        ("service_id", 0, 64),
        ("service_gid", 64, 128),
        ("service_pkey", 192, 16),
        ("reserved", 208, 16),
        ("service_lease", 224, 32),
        ("service_key", 256, 128),
        ("service_name", 384, 512),
        ("service_data8.1", 896, 8),
        ("service_data8.2", 904, 8),
        ("service_data8.3", 912, 8),
        ("service_data8.4", 920, 8),
        ("service_data8.5", 928, 8),
        ("service_data8.6", 936, 8),
        ("service_data8.7", 944, 8),
        ("service_data8.8", 952, 8),
        ("service_data8.9", 960, 8),
        ("service_data8.10", 968, 8),
        ("service_data8.11", 976, 8),
        ("service_data8.12", 984, 8),
        ("service_data8.13", 992, 8),
        ("service_data8.14", 1000, 8),
        ("service_data8.15", 1008, 8),
        ("service_data8.16", 1016, 8),
        ("service_data16.1", 1024, 16),
        ("service_data16.2", 1040, 16),
        ("service_data16.3", 1056, 16),
        ("service_data16.4", 1072, 16),
        ("service_data16.5", 1088, 16),
        ("service_data16.6", 1104, 16),
        ("service_data16.7", 1120, 16),
        ("service_data16.8", 1136, 16),
        ("service_data32.1", 1152, 32),
        ("service_data32.2", 1184, 32),
        ("service_data32.3", 1216, 32),
        ("service_data32.4", 1248, 32),
        ("service_data64.1", 1280, 64),
        ("service_data64.2", 1344, 64),
    ]
);
