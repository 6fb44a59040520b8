//! A node name map (`ibkit sm --node-name-map FILE`, OpenSM's
//! `node_name_map_name`, infiniband-diags' `--node-name-map`): the names
//! a site gives its nodes by node GUID, printed in OpenSM's dumps instead
//! of the nodes' NodeDescriptions.
//!
//! The layout is the one rdma-core and OpenSM read: one `GUID "name"` a
//! line, the GUID a C number (`0x…` hex, leading-zero octal, decimal),
//! the name up to its closing quote or a `#`; blank lines and lines that
//! start with `#` are comments. A line whose first word is not a number
//! is an error with its line (OpenSM drops the whole map then, with a
//! warning; ibkit refuses to start, before the fabric is touched). A
//! line with a GUID and no name maps nothing, and the first line of a
//! GUID given twice wins, as in OpenSM.

use crate::config::ConfigError;
use std::collections::BTreeMap;

/// The most names read (a subnet has at most 48K LIDs; a site's map can
/// hold more nodes than one subnet has, but not this many).
pub const MAX_NAMES: usize = 1 << 20;

/// Names by node GUID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeNames {
    map: BTreeMap<u64, String>,
}

impl NodeNames {
    /// How many nodes have a name.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No name at all.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The name of the node `guid`, if the map gives one.
    pub fn get(&self, guid: u64) -> Option<&str> {
        self.map.get(&guid).map(String::as_str)
    }

    /// What OpenSM prints for the node `guid` whose NodeDescription is
    /// `desc`: its name from the map, else the description up to its
    /// first NUL and at most 63 bytes, every byte that is not printable
    /// ASCII shown as a space (OpenSM's `remap_node_name`).
    pub fn print_desc(&self, guid: u64, desc: &[u8]) -> String {
        if let Some(n) = self.get(guid) {
            return n.to_string();
        }
        let end = desc.iter().position(|&b| b == 0).unwrap_or(desc.len());
        desc[..end.min(63)]
            .iter()
            .map(|&b| {
                if (0x20..=0x7E).contains(&b) {
                    char::from(b)
                } else {
                    ' '
                }
            })
            .collect()
    }
}

/// A C number as `strtoull(s, &end, 0)` reads it from the start of `s`:
/// the value and the rest, or `None` when no digit starts it.
fn c_number_prefix(s: &str) -> Option<(u64, &str)> {
    let (radix, body) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, h)
    } else if s.starts_with('0') {
        (8, s)
    } else {
        (10, s)
    };
    let len = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    if len == 0 {
        // "0x" with no hex digit: strtoull reads the "0".
        return (radix == 16).then(|| (0, &s[1..]));
    }
    // Past u64, strtoull gives ULLONG_MAX.
    let v = u64::from_str_radix(&body[..len], radix).unwrap_or(u64::MAX);
    Some((v, &body[len..]))
}

/// Reads a node name map's text.
pub fn parse_node_name_map(text: &str) -> Result<NodeNames, ConfigError> {
    let mut map = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let body = raw.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let column = raw.len() - body.len() + 1;
        let bad = |reason: &str| ConfigError {
            line: i + 1,
            column,
            reason: reason.to_string(),
        };
        let (guid, rest) = c_number_prefix(body).ok_or_else(|| bad("not a GUID"))?;
        if !(rest.is_empty() || rest.starts_with([' ', '\t', '#'])) {
            return Err(bad("not a GUID followed by a name"));
        }
        // The name: past the quotes and #s that open it, up to the next.
        let name = rest
            .trim_start()
            .split(['"', '#'])
            .find(|t| !t.is_empty())
            .unwrap_or("");
        if name.is_empty() {
            continue;
        }
        if map.len() >= MAX_NAMES {
            return Err(bad(&format!("more than {MAX_NAMES} names")));
        }
        map.entry(guid).or_insert_with(|| name.to_string());
    }
    Ok(NodeNames { map })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_rdma_core_reads_them() {
        let m = parse_node_name_map(
            "# a site's map\n\n0x0002c90300001234 \"leaf 1\"\n  0x10 \"two # words\"\n\
             017 spine-a\n42\t\"x\" # comment\n0x99\n0x98 \"\"\n0x0002c90300001234 \"again\"\n",
        )
        .unwrap();
        assert_eq!(
            m.get(0x0002_c903_0000_1234),
            Some("leaf 1"),
            "the first wins"
        );
        assert_eq!(m.get(0x10), Some("two "), "a # ends the name");
        assert_eq!(m.get(0o17), Some("spine-a"), "octal, unquoted");
        assert_eq!(m.get(42), Some("x"));
        assert_eq!((m.get(0x99), m.get(0x98)), (None, None), "no name");
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn a_line_that_is_no_guid_is_refused_with_its_place() {
        let e = parse_node_name_map("0x1 \"a\"\n  leaf \"b\"\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3), "{e}");
        let e = parse_node_name_map("0x12zz \"a\"\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        assert!(e.reason.contains("followed by a name"), "{e}");
        // strtoull's reading: "0x" alone is 0 followed by "x".
        assert!(parse_node_name_map("0x \"a\"\n").is_err());
        assert_eq!(
            parse_node_name_map("0xffffffffffffffffff \"big\"\n")
                .unwrap()
                .get(u64::MAX),
            Some("big"),
            "past 64 bits: the largest, as strtoull"
        );
    }

    #[test]
    fn without_a_name_the_description_is_cleaned_as_opensm_cleans_it() {
        let m = parse_node_name_map("0x5 \"named\"\n").unwrap();
        assert_eq!(m.print_desc(5, b"ignored\0"), "named");
        assert_eq!(m.print_desc(6, b"a\tb\xC3\xA9\0junk"), "a b  ");
        let long = [b'x'; 64];
        assert_eq!(m.print_desc(6, &long).len(), 63);
    }
}
