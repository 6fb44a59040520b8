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
            // The SL a partition's multicast groups take: an SL, the same
            // for a P_Key's full and limited forms, and the DEFAULT's
            // where no rule holds the P_Key.
            for pkey in [0x7FFFu16, 0xFFFF, 0x0001, 0x8001, 0x1234, 0x9234, 0] {
                let sl = p.group_sl(pkey);
                assert!(sl.is_none_or(|s| s <= 15), "{pkey:#x}: {sl:?}");
                assert_eq!(sl, p.group_sl(pkey ^ 0x8000), "{pkey:#x}");
            }
            let held = |v: &[(u64, u64)], k: u64| v.iter().any(|&(a, b)| a <= k && k <= b);
            let k = 0x5A5A;
            let by_rule = p.match_rules.iter().any(|r| {
                r.source.is_empty()
                    && r.destination.is_empty()
                    && r.qos_class.is_empty()
                    && r.service_id.is_empty()
                    && (r.pkey.is_empty() || held(&r.pkey, k))
            });
            let by_ulp =
                (p.rules.iter()).any(|r| matches!(&r.matches, UlpMatch::PKey(v) if held(v, k)));
            if !by_rule && !by_ulp {
                let default = p.default_level().map_or(p.default_sl, |l| l.sl);
                assert_eq!(p.group_sl(k as u16), default);
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
