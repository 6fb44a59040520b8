//! Arbitrary bytes as `ibkit decode`'s input (`fabric::mads`): as a
//! capture, the whole-file reader and the streaming one must agree packet
//! for packet, and what `MadReader` yields is the same; as hex text, every
//! item it yields is a line of the input, in order. Nothing may panic or
//! allocate what a record merely claims.
#![no_main]

use fabric::mads::{read_all, ItemError, Origin};
use fabric::pcap::{read, Reader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = read(data);
    let streamed: Result<Vec<_>, _> = Reader::new(data).map(|r| r.collect());
    assert_eq!(whole, streamed);
    if let Ok(p) = &whole {
        for m in p.iter().flatten() {
            let _ = mad_core::Smp::parse(m);
        }
    }
    match read_all(data) {
        Ok(items) => {
            let lines = data.split(|&b| b == b'\n').count() as u64;
            let mut last = 0;
            for (i, it) in items.iter().enumerate() {
                match it.origin {
                    Origin::Packet(n) => {
                        assert_eq!(n, i as u64 + 1);
                        let p = whole.as_ref().expect("a capture the pcap reader read");
                        assert_eq!(it.mad, p[i].clone().map_err(ItemError::Pcap));
                    }
                    Origin::Line(n) => {
                        assert!(n > last && n <= lines, "line {n} of {lines}");
                        last = n;
                    }
                }
            }
        }
        Err(_) => assert!(whole.is_err(), "refused as a capture the pcap reader read"),
    }
});
