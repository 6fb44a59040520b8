//! Arbitrary text as the `qos_*` options of an `opensm.conf`: parsed
//! without a panic, refused with a place inside the text, or read into
//! classes whose VLs are in range (data VLs 0–14 in VL arbitration,
//! 0–15 in SL-to-VL tables), with warnings that point inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smi::sm::qos::parse;

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
            for class in [&c.ca, &c.swe, &c.sw0, &c.rtr] {
                assert!(class.sl2vl.iter().all(|&v| v <= 15));
                let arb = class.vlarb_high.iter().chain(class.vlarb_low.iter());
                assert!(arb.clone().all(|e| e.vl <= 14));
                assert!((1..=15).contains(&class.max_vls));
            }
            for w in &c.warnings {
                assert!(w.line >= 1 && w.line <= lines && w.column >= 1, "{w:?}");
            }
        }
    }
});
