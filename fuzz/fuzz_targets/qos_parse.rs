//! Arbitrary text as the `qos_*` options of an `opensm.conf`: parsed
//! without a panic, refused with a place inside the text, or read into
//! classes whose VLs are in range (data VLs 0–14 in VL arbitration,
//! 0–15 in SL-to-VL tables), with warnings that point inside the text.
//! The same text as a `qos-policy.conf`: refused with a place inside it,
//! or rules with SLs 0–15, ranges that run forwards, and no more rules
//! than the bound; the full policy's rules name groups and levels that
//! exist, and a default is there.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smi::sm::qos::parse;
use smi::sm::qos_policy::{parse_policy, UlpMatch, MAX_ENTRIES, MAX_RANGES, MAX_RULES};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.split('\n').count();
    match parse_policy(text) {
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines, "{e}");
            assert!(e.column >= 1 && e.column <= text.len() + 1, "{e}");
        }
        Ok(p) => {
            assert!(p.rules.len() <= MAX_RULES);
            assert!(
                p.default_sl.is_some_and(|s| s <= 15) || p.default_level().is_some(),
                "a policy without default"
            );
            assert!(p.groups.len() <= MAX_ENTRIES && p.levels.len() <= MAX_ENTRIES);
            for r in &p.match_rules {
                assert!(r.level < p.levels.len());
                assert!(r
                    .source
                    .iter()
                    .chain(&r.destination)
                    .all(|&g| g < p.groups.len()));
                for v in [&r.qos_class, &r.service_id, &r.pkey] {
                    assert!(v.len() <= MAX_ENTRIES && v.iter().all(|&(a, b)| a <= b));
                }
            }
            for l in &p.levels {
                assert!(
                    l.sl.is_none_or(|s| s <= 15)
                        && l.mtu_limit.is_none_or(|m| (1..=5).contains(&m))
                );
                assert!(l.pkeys.iter().all(|&(a, b)| a <= b && b <= 0x7FFF));
                // Path bits: offsets into LMC 7's 128 LIDs at most.
                assert!(l.path_bits.len() <= MAX_ENTRIES);
                assert!(l.path_bits.iter().all(|&(a, b)| a <= b && b <= 127));
            }
            for r in &p.rules {
                assert!(r.sl <= 15 && r.line >= 1 && r.line <= lines);
                let (UlpMatch::ServiceId(v)
                | UlpMatch::PKey(v)
                | UlpMatch::TargetGuid(v)
                | UlpMatch::SourceGuid(v)
                | UlpMatch::SourceOrTargetGuid(v)) = &r.matches;
                assert!(!v.is_empty() && v.len() <= MAX_RANGES);
                assert!(v.iter().all(|&(a, b)| a <= b));
            }
        }
    }
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
