//! Arbitrary text as OpenSM's partition configuration (`partitions.conf`):
//! parsed without a panic, refused with a place inside the text, or read
//! into partitions whose P_Keys are 15-bit and unique, whose members and
//! groups are no more than the text could name, whose groups' parameters
//! fit their fields, and whose warnings point inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smi::sm::partitions::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.split('\n').count();
    match parse(text) {
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines, "{e}");
            assert!(e.column >= 1 && e.column <= text.len() + 1, "{e}");
        }
        Ok(c) => {
            let mut keys: Vec<u16> = c.partitions.iter().map(|p| p.pkey).collect();
            assert!(keys.iter().all(|&k| k <= 0x7FFF));
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), c.partitions.len(), "one partition per P_Key");
            let named: usize = c
                .partitions
                .iter()
                .map(|p| p.members.len() + p.groups.len())
                .sum();
            assert!(named <= text.len());
            // Every group's parameters fit their fields; an SL not given
            // is 0, so that a QoS policy may give one.
            let flags = c
                .partitions
                .iter()
                .flat_map(|p| core::iter::once(&p.flags).chain(p.groups.iter().map(|g| &g.flags)));
            for f in flags {
                assert!(f.sl <= 15 && (f.sl_given || f.sl == 0), "{f:?}");
                assert!(f.mtu <= 63 && f.rate <= 63 && f.flow_label <= 0xF_FFFF);
                assert!(f.scopes.iter().all(|&s| s <= 15));
            }
            for w in &c.warnings {
                assert!(w.line >= 1 && w.line <= lines && w.column >= 1, "{w:?}");
            }
        }
    }
});
