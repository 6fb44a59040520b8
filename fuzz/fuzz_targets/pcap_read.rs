//! Arbitrary bytes as a capture for `ibkit decode`: the whole-file reader
//! and the streaming one must agree packet for packet, and neither may
//! panic or allocate what a record merely claims.
#![no_main]

use fabric::pcap::{read, Reader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = read(data);
    let streamed: Result<Vec<_>, String> = Reader::new(data).map(|r| r.collect());
    assert_eq!(whole, streamed);
    if let Ok(p) = whole {
        for m in p.iter().flatten() {
            let _ = mad_core::Smp::parse(m);
        }
    }
});
