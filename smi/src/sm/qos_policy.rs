//! The SL a PathRecord carries, from OpenSM's simplified QoS policy: the
//! `qos-ulps` section of a `qos-policy.conf`, syntax unchanged.
//!
//! ```text
//! qos-ulps
//!     default                       : 0
//!     sdp, port-num 10000-20000     : 1
//!     rds                           : 2
//!     iser                          : 3
//!     ipoib, pkey 0x0001            : 4
//!     any, service-id 0x6234        : 6
//!     srp, target-port-guid 0x1234  : 5
//!     any, source-target-port-guid 0x9abcd : 7
//! end-qos-ulps
//! ```
//!
//! A PathRecord request is matched against the rules in the file's order
//! and the first that matches gives the SL; `default` applies when none
//! does (OpenSM refuses a policy without it, and so does this). As in OpenSM, a rule on a service ID or a P_Key matches only a
//! request whose ComponentMask selects that component; a rule on port
//! GUIDs matches the request's ends. The ULPs are names for service-ID or
//! P_Key ranges, as OpenSM defines them: SDP 0x10000–0x1FFFF (or 0x10000
//! plus the port), RDS 0x10648CA, iSER 0x1060CBC (RDS and iSER with a
//! port: 0x1060000 plus it), IPoIB the P_Key 0x7FFF (or the one given),
//! SRP its target's port GUID.
//!
//! The full policy (`port-groups`, `qos-setup`, `qos-levels`,
//! `qos-match-rules`) is not implemented: a file with those sections is
//! refused with the line that starts one.

use super::partitions::number;
use super::qos::QosError;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Rules a policy may hold at most.
pub const MAX_RULES: usize = 4096;
/// Ranges one rule may list at most.
pub const MAX_RANGES: usize = 256;

/// What a rule matches: inclusive ranges of one field of the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UlpMatch {
    /// The request's ServiceID (selected by its ComponentMask).
    ServiceId(Vec<(u64, u64)>),
    /// The request's P_Key, low 15 bits (selected by its ComponentMask).
    PKey(Vec<(u64, u64)>),
    /// The destination port's GUID.
    TargetGuid(Vec<(u64, u64)>),
    /// The source port's GUID.
    SourceGuid(Vec<(u64, u64)>),
    /// Either end's port GUID.
    SourceOrTargetGuid(Vec<(u64, u64)>),
}

/// One rule of `qos-ulps`: what it matches and the SL it gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UlpRule {
    /// What it matches.
    pub matches: UlpMatch,
    /// The SL (0–15).
    pub sl: u8,
    /// Its line in the file, from 1.
    pub line: usize,
}

/// A simplified QoS policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QosPolicy {
    /// The rules, in the file's order.
    pub rules: Vec<UlpRule>,
    /// The `default` rule's SL.
    pub default_sl: Option<u8>,
}

/// What the policy looks at in a PathRecord request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathQuery {
    /// The ServiceID, if the request's mask selects it.
    pub service_id: Option<u64>,
    /// The P_Key, if the request's mask selects it.
    pub pkey: Option<u16>,
    /// The source port's GUID.
    pub source_guid: u64,
    /// The destination port's GUID.
    pub target_guid: u64,
}

fn within(ranges: &[(u64, u64)], v: u64) -> bool {
    ranges.iter().any(|&(a, b)| (a..=b).contains(&v))
}

impl QosPolicy {
    /// The SL the policy gives a request: the first rule that matches,
    /// else `default`; `None` when neither (the partition's SL applies).
    pub fn sl_for(&self, q: &PathQuery) -> Option<u8> {
        self.rules
            .iter()
            .find(|r| match &r.matches {
                UlpMatch::ServiceId(v) => q.service_id.is_some_and(|s| within(v, s)),
                UlpMatch::PKey(v) => q.pkey.is_some_and(|p| within(v, u64::from(p & 0x7FFF))),
                UlpMatch::TargetGuid(v) => within(v, q.target_guid),
                UlpMatch::SourceGuid(v) => within(v, q.source_guid),
                UlpMatch::SourceOrTargetGuid(v) => {
                    within(v, q.source_guid) || within(v, q.target_guid)
                }
            })
            .map(|r| r.sl)
            .or(self.default_sl)
    }
}

/// The sections of OpenSM's full policy, which are refused.
const FULL_SECTIONS: [&str; 4] = ["port-groups", "qos-setup", "qos-levels", "qos-match-rules"];

/// Reads a `qos-policy.conf`. Only the `qos-ulps` section is taken; a
/// file with another section, a rule OpenSM would refuse, an SL past 15,
/// a number that is not one, or no `default` rule (OpenSM refuses such a
/// policy whole) is refused with its line and column.
pub fn parse_policy(text: &str) -> Result<QosPolicy, QosError> {
    let mut p = QosPolicy::default();
    let mut open: Option<usize> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw.split('#').next().unwrap_or("");
        let word = body.trim();
        if word.is_empty() {
            continue;
        }
        let col = body.len() - body.trim_start().len() + 1;
        let err = |column: usize, reason: String| QosError {
            line,
            column,
            reason,
        };
        match open {
            None if word == "qos-ulps" => open = Some(line),
            None if FULL_SECTIONS.contains(&word) => {
                return Err(err(
                    col,
                    format!(
                    "section {word:?} of the full QoS policy is not implemented (only qos-ulps)"
                ),
                ))
            }
            None => return Err(err(col, format!("{word:?}: expected a section (qos-ulps)"))),
            Some(_) if word == "end-qos-ulps" => open = None,
            Some(_) => {
                if p.rules.len() >= MAX_RULES {
                    return Err(err(col, format!("more than {MAX_RULES} rules")));
                }
                rule(body, col, line, &mut p).map_err(|(c, r)| err(c, r))?;
            }
        }
    }
    if let Some(start) = open {
        return Err(QosError {
            line: start,
            column: 1,
            reason: "qos-ulps has no end-qos-ulps".into(),
        });
    }
    if p.default_sl.is_none() {
        // OpenSM's ERR AC10: without it, OpenSM drops the whole policy.
        return Err(QosError {
            line: text.lines().count().max(1),
            column: 1,
            reason: "the policy has no default rule (\"default : SL\" in qos-ulps)".into(),
        });
    }
    Ok(p)
}

/// A rule `head : SL` of `qos-ulps` (`body` is the line without its
/// comment; `col` is where its text starts). Errors carry their column.
fn rule(body: &str, col: usize, line: usize, p: &mut QosPolicy) -> Result<(), (usize, String)> {
    let Some(colon) = body.rfind(':') else {
        return Err((col, "expected \"ULP[, KEY VALUES] : SL\"".into()));
    };
    let (head, sl_text) = (&body[..colon], body[colon + 1..].trim());
    let sl_col = colon + 2 + (body[colon + 1..].len() - body[colon + 1..].trim_start().len());
    let sl = number(sl_text)
        .filter(|&v| v <= 15)
        .ok_or((sl_col, format!("SL {sl_text:?} is not 0-15")))? as u8;
    let (ulp, rest) = match head.split_once(',') {
        Some((u, r)) => (u.trim(), Some(r.trim())),
        None => (head.trim(), None),
    };
    let rest_col = head.find(',').map_or(col, |c| {
        c + 2 + (head[c + 1..].len() - head[c + 1..].trim_start().len())
    });
    // The KEY and its value list, if any.
    let keyed = match rest {
        None | Some("") => None,
        Some(r) => {
            let (key, values) = r
                .split_once(char::is_whitespace)
                .ok_or((rest_col, format!("{r:?}: expected KEY VALUES")))?;
            Some((key, ranges(values.trim()).map_err(|e| (rest_col, e))?))
        }
    };
    let bad_key = |k: &str| (rest_col, format!("{ulp}: no key {k:?} here"));
    let ports = |base: u64, v: Vec<(u64, u64)>| -> Result<UlpMatch, (usize, String)> {
        if v.iter().any(|&(_, b)| b > 0xFFFF) {
            return Err((rest_col, "a port number is past 65535".into()));
        }
        Ok(UlpMatch::ServiceId(
            v.into_iter().map(|(a, b)| (base + a, base + b)).collect(),
        ))
    };
    let matches = match (ulp, keyed) {
        ("default", None) => {
            if p.default_sl.is_some() {
                return Err((col, "a second default rule".into()));
            }
            p.default_sl = Some(sl);
            return Ok(());
        }
        ("sdp", None) => UlpMatch::ServiceId([(0x10000, 0x1FFFF)].into()),
        ("sdp", Some(("port-num", v))) => ports(0x10000, v)?,
        ("rds", None) => UlpMatch::ServiceId([(0x10648CA, 0x10648CA)].into()),
        ("rds" | "iser", Some(("port-num", v))) => ports(0x1060000, v)?,
        ("iser", None) => UlpMatch::ServiceId([(0x1060CBC, 0x1060CBC)].into()),
        ("ipoib", None) => UlpMatch::PKey([(0x7FFF, 0x7FFF)].into()),
        ("ipoib" | "any", Some(("pkey", v))) => {
            if v.iter().any(|&(_, b)| b > 0xFFFF) {
                return Err((rest_col, "a P_Key is past 16 bits".into()));
            }
            UlpMatch::PKey(
                v.into_iter()
                    .map(|(a, b)| (a & 0x7FFF, b & 0x7FFF))
                    .collect(),
            )
        }
        ("srp" | "any", Some(("target-port-guid", v))) => UlpMatch::TargetGuid(v),
        ("any", Some(("service-id", v))) => UlpMatch::ServiceId(v),
        ("any", Some(("source-port-guid", v))) => UlpMatch::SourceGuid(v),
        ("any", Some(("source-target-port-guid", v))) => UlpMatch::SourceOrTargetGuid(v),
        ("srp", None) => return Err((col, "srp needs a target-port-guid".into())),
        ("any", None) => return Err((col, "any needs a key (service-id, pkey, …)".into())),
        ("default" | "sdp" | "rds" | "iser" | "ipoib" | "srp" | "any", Some((k, _))) => {
            return Err(bad_key(k))
        }
        (u, _) => {
            return Err((
                col,
                format!("{u:?}: not a ULP (default, sdp, rds, iser, ipoib, srp, any)"),
            ))
        }
    };
    p.rules.push(UlpRule { matches, sl, line });
    Ok(())
}

/// A list of numbers and inclusive ranges: `1,0x10-0x1f,7`.
fn ranges(text: &str) -> Result<Vec<(u64, u64)>, String> {
    let mut v = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if v.len() >= MAX_RANGES {
            return Err(format!("more than {MAX_RANGES} values in one rule"));
        }
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (item, item),
        };
        let (Some(x), Some(y)) = (number(a), number(b)) else {
            return Err(format!("{item:?} is not a number or a range"));
        };
        if x > y {
            return Err(format!("{item:?}: the range runs backwards"));
        }
        v.push((x, y));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "\
# OpenSM's example, every keyword
qos-ulps
    default                       : 0 # default SL
    sdp, port-num 30000           : 0
    sdp, port-num 10000-20000     : 0
    sdp                           : 1
    rds                           : 2
    iser, port-num 900            : 0
    iser                          : 3
    ipoib, pkey 0x0001            : 0
    ipoib                         : 4
    any, service-id 0x6234        : 6
    any, pkey 0x0ABC              : 6
    srp, target-port-guid 0x1234  : 5
    any, target-port-guid 0x0ABC-0xFFFFF : 6
    any, source-port-guid 0x5678  : 7
\tany, source-target-port-guid 0x9abcd : 8
end-qos-ulps
";

    fn q(sid: Option<u64>, pkey: Option<u16>, s: u64, t: u64) -> PathQuery {
        PathQuery {
            service_id: sid,
            pkey,
            source_guid: s,
            target_guid: t,
        }
    }

    #[test]
    fn the_example_reads_and_matches_in_order() {
        let p = parse_policy(EXAMPLE).unwrap();
        assert_eq!(p.rules.len(), 14);
        assert_eq!(p.default_sl, Some(0));
        // SDP to port 30000: the first SDP rule, before plain sdp.
        assert_eq!(p.sl_for(&q(Some(0x10000 + 30000), None, 1, 2)), Some(0));
        assert_eq!(p.sl_for(&q(Some(0x10000 + 80), None, 1, 2)), Some(1));
        assert_eq!(p.sl_for(&q(Some(0x10648CA), None, 1, 2)), Some(2));
        assert_eq!(p.sl_for(&q(Some(0x1060CBC), None, 1, 2)), Some(3));
        assert_eq!(p.sl_for(&q(Some(0x1060000 + 900), None, 1, 2)), Some(0));
        // IPoIB by P_Key, membership bit ignored; only with the P_Key
        // selected.
        assert_eq!(p.sl_for(&q(None, Some(0xFFFF), 1, 2)), Some(4));
        assert_eq!(p.sl_for(&q(None, Some(0x8001), 1, 2)), Some(0));
        assert_eq!(p.sl_for(&q(None, Some(0x0ABC), 1, 2)), Some(6));
        assert_eq!(p.sl_for(&q(Some(0x6234), None, 1, 2)), Some(6));
        // By GUID.
        assert_eq!(p.sl_for(&q(None, None, 1, 0x1234)), Some(5));
        assert_eq!(p.sl_for(&q(None, None, 1, 0xF0000)), Some(6));
        assert_eq!(p.sl_for(&q(None, None, 0x5678, 2)), Some(7));
        assert_eq!(p.sl_for(&q(None, None, 0x9abcd, 2)), Some(8));
        // As a target, 0x9abcd is in the earlier target range: that rule wins.
        assert_eq!(p.sl_for(&q(None, None, 3, 0x9abcd)), Some(6));
        assert_eq!(p.sl_for(&q(None, None, 3, 0x100000)), Some(0));
        // Nothing: the default.
        assert_eq!(p.sl_for(&q(None, None, 3, 4)), Some(0));
        let p = parse_policy("qos-ulps\nrds : 2\ndefault : 9\nend-qos-ulps\n").unwrap();
        assert_eq!(p.sl_for(&q(None, None, 3, 4)), Some(9));
        assert_eq!(p.sl_for(&q(Some(0x10648CA), None, 3, 4)), Some(2));
    }

    #[test]
    fn what_opensm_would_refuse_is_refused_with_its_place() {
        let bad = |text: &str| parse_policy(text).unwrap_err();
        let e = bad("qos-ulps\n  rds : 16\nend-qos-ulps\n");
        assert_eq!((e.line, e.column), (2, 9), "{e}");
        assert!(e.reason.contains("0-15"));
        let e = bad("qos-ulps\n  nfs : 1\nend-qos-ulps\n");
        assert_eq!((e.line, e.column), (2, 3));
        let e = bad("qos-ulps\n  any, pkey 0xZZ : 1\nend-qos-ulps\n");
        assert_eq!((e.line, e.column), (2, 8), "{e}");
        let e = bad("qos-ulps\n  sdp, pkey 1 : 1\nend-qos-ulps\n");
        assert!(e.reason.contains("no key"), "{e}");
        assert!(bad("qos-ulps\n  srp : 1\nend-qos-ulps\n")
            .reason
            .contains("target"));
        assert!(bad("qos-ulps\n  any, pkey 9-3 : 1\nend-qos-ulps\n")
            .reason
            .contains("backwards"));
        assert!(bad("qos-ulps\n default : 1\n default : 2\nend-qos-ulps\n")
            .reason
            .contains("second"));
        let e = bad("qos-ulps\n rds : 1\n");
        assert_eq!(e.line, 1);
        let e = bad("port-groups\nend-port-groups\n");
        assert!(e.reason.contains("not implemented"), "{e}");
        assert!(bad("rds : 1\n").reason.contains("section"));
        assert!(bad("qos-ulps\n rds 1\nend-qos-ulps\n")
            .reason
            .contains("expected"));
        // No default rule, or nothing at all: refused, as OpenSM does.
        assert!(bad("qos-ulps\n rds : 1\nend-qos-ulps\n")
            .reason
            .contains("default"));
        assert!(bad("# nothing\n\n").reason.contains("default"));
    }

    #[test]
    fn lists_and_bounds() {
        let p = parse_policy(
            "qos-ulps\n any, service-id 1,5-7, 0x10 : 3\n default : 0\nend-qos-ulps\n",
        )
        .unwrap();
        assert_eq!(
            p.rules[0].matches,
            UlpMatch::ServiceId([(1, 1), (5, 7), (0x10, 0x10)].into())
        );
        let many: String = (0..=MAX_RANGES).map(|i| format!("{i},")).collect();
        let text = format!("qos-ulps\n any, service-id {}0 : 1\nend-qos-ulps\n", many);
        assert!(parse_policy(&text)
            .unwrap_err()
            .reason
            .contains("more than"));
        let rules: String = (0..=MAX_RULES).map(|_| " rds : 1\n").collect();
        let text = format!("qos-ulps\n{rules}end-qos-ulps\n");
        assert!(parse_policy(&text)
            .unwrap_err()
            .reason
            .contains("more than"));
        let e = parse_policy("qos-ulps\n sdp, port-num 70000 : 1\n default : 0\nend-qos-ulps\n");
        assert!(e.unwrap_err().reason.contains("65535"));
    }

    proptest::proptest! {
        /// Text made of the file's own words, shuffled: refused with a
        /// place inside it, or rules within their bounds (the fuzz
        /// target's check, on stable).
        #[test]
        fn any_text_is_read_or_refused_with_its_place(
            words in proptest::collection::vec(proptest::sample::select(vec![
                "qos-ulps", "end-qos-ulps", "default", "sdp", "rds", "iser", "ipoib",
                "srp", "any", ",", ":", "\n", " ", "\t", "#", "port-num", "pkey",
                "service-id", "target-port-guid", "source-port-guid",
                "source-target-port-guid", "0x7fff", "16", "3", "1-9", "9-1", "0x",
                "port-groups", "70000", "0xffffffffffffffff",
            ]), 0..60)
        ) {
            let text: String = words.concat();
            let lines = text.split('\n').count();
            match parse_policy(&text) {
                Err(e) => {
                    proptest::prop_assert!(e.line >= 1 && e.line <= lines, "{}", e);
                    proptest::prop_assert!(e.column >= 1 && e.column <= text.len() + 1, "{}", e);
                }
                Ok(p) => {
                    proptest::prop_assert!(p.default_sl.is_some_and(|s| s <= 15));
                    for r in &p.rules {
                        proptest::prop_assert!(r.sl <= 15 && r.line >= 1 && r.line <= lines);
                        let (UlpMatch::ServiceId(v)
                        | UlpMatch::PKey(v)
                        | UlpMatch::TargetGuid(v)
                        | UlpMatch::SourceGuid(v)
                        | UlpMatch::SourceOrTargetGuid(v)) = &r.matches;
                        proptest::prop_assert!(!v.is_empty() && v.iter().all(|&(a, b)| a <= b));
                    }
                }
            }
        }
    }
}
