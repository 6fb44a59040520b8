//! OpenSM's `file` routing engine: the switches' linear forwarding tables
//! read from a file (`lfts_file`, OpenSM's `-U`) in the layout of
//! OpenSM's own `opensm-lfts.dump`, which both SMs write:
//!
//! ```text
//! Unicast lids [0-12] of switch Lid 2 guid 0x0002c90000000001 ('sw-1'):
//! 0x0001 001 # Channel Adapter portguid 0x0002c90000000101: 'host-1'
//! 0x0002 000 # Switch portguid 0x0002c90000000001: 'sw-1'
//! 12 lids dumped
//! ```
//!
//! A `Unicast lids` line starts a switch, named by the `guid 0x` in it;
//! each `0x` line under it gives a LID and the port it leaves by, and the
//! `portguid 0x` of its owner where the line names one. Blank lines, `#`
//! comments and every other line are skipped, as OpenSM skips them.
//!
//! How the SM applies it, as OpenSM's `osm_ucast_file.c` does:
//! - every live switch's table starts empty (every LID dropped); a switch
//!   the file names gets the routes under its heading, and one it does
//!   not name keeps an empty table;
//! - a route whose line names a port GUID the subnet has is moved to that
//!   port's LID now (its base LID plus the route's LID offset under LMC),
//!   so the file outlives a change of LIDs;
//! - a route out of a port the switch does not have fails the whole file:
//!   the SM then routes min-hop, as OpenSM falls back to its default
//!   engine, and says why ([`super::SmEvent::RoutingFellBack`]);
//! - a LID above the subnet's highest is not routed (the switch's
//!   LinearFDBTop would drop it anyway);
//! - on a vSwitch fabric (which OpenSM does not know), a VF's LID the file
//!   does not send into its hypervisor's port at that hypervisor's switch
//!   has moved since the file was written (a VM migrated or started): the
//!   fallback engine routes that LID, so a reroute does not send it back
//!   to where the VM was.
//!
//! Where this parser is stricter than OpenSM's: a LID above 0xFFFF or a
//! port above 255 is an error (OpenSM truncates them), so is a line of a
//! switch the fabric does not have (OpenSM does not read those), and a
//! multicast dump (`opensm.mcfdbs`) is refused (OpenSM reads it as a file
//! that names no switch and so empties every table).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// One route of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRoute {
    /// The owner's port GUID, where the line names it (0: it does not).
    pub port_guid: u64,
    /// Its line in the file (from 1).
    pub line: u32,
    /// The destination LID as written.
    pub lid: u16,
    /// The port the switch sends it out of (0: the switch itself).
    pub port: u8,
}

/// One switch's heading and its routes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSwitch {
    /// The switch's node GUID.
    pub guid: u64,
    /// Its heading's line (from 1).
    pub line: usize,
    /// Its routes, in the file's order (a later line for the same LID
    /// wins, as in OpenSM).
    pub routes: Vec<FileRoute>,
}

/// An `lfts_file`, read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LftFile {
    /// The switch headings in the file's order (a switch named twice:
    /// the later heading starts its table again, as in OpenSM).
    pub switches: Vec<FileSwitch>,
}

/// Why an `lfts_file` was refused: its line and column (from 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LftFileError {
    /// The line.
    pub line: usize,
    /// The column.
    pub column: usize,
    /// What is wrong there.
    pub reason: String,
}

impl fmt::Display for LftFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.reason
        )
    }
}

/// The hex digits at the start of `s` (at most `max` of them) as a
/// number, and what follows; `None` when there is none or more than
/// `max`.
fn hex(s: &str, max: usize) -> Option<(u64, &str)> {
    let n = s.bytes().take_while(u8::is_ascii_hexdigit).count();
    if n == 0 || n > max {
        return None;
    }
    Some((u64::from_str_radix(&s[..n], 16).ok()?, &s[n..]))
}

/// True when `s` is empty or starts with white space: a number ended.
fn ended(s: &str) -> bool {
    s.chars().next().is_none_or(char::is_whitespace)
}

impl LftFile {
    /// Reads `text`. A switch heading without a GUID, a route without a
    /// LID or a port, or a multicast dump is refused with its place.
    pub fn parse(text: &str) -> Result<LftFile, LftFileError> {
        let mut r = LftFileReader::default();
        for raw in text.lines() {
            r.line(raw)?;
        }
        Ok(r.finish())
    }

    /// How many routes the file holds.
    pub fn routes(&self) -> usize {
        self.switches.iter().map(|s| s.routes.len()).sum()
    }
}

/// Reads an `lfts_file` a line at a time, as [`LftFile::parse`] reads
/// the whole text, so that a large file is never held whole: what it
/// keeps is the routes (16 bytes each).
#[derive(Clone, Debug, Default)]
pub struct LftFileReader {
    file: LftFile,
    /// Under a heading (a `0x` line before any is skipped, as OpenSM
    /// skips it).
    open: bool,
    /// Lines read.
    lines: usize,
    /// Routes read.
    routes: usize,
}

impl LftFileReader {
    /// Reads the next line, `raw` (without its end of line).
    pub fn line(&mut self, raw: &str) -> Result<(), LftFileError> {
        self.lines += 1;
        let line = self.lines;
        let p = raw.trim_start();
        let col = |rest: &str| raw.len() - rest.len() + 1;
        let err = |rest: &str, reason: &str| LftFileError {
            line,
            column: col(rest),
            reason: reason.into(),
        };
        if p.starts_with('#') {
            return Ok(());
        }
        if p.starts_with("Multicast mlids") {
            return Err(err(
                p,
                "a multicast forwarding dump (opensm.mcfdbs), not an LFT dump",
            ));
        }
        if p.starts_with("Unicast lids") {
            let Some(at) = p.find(" guid 0x") else {
                return Err(err(p, "a switch heading without `guid 0x`"));
            };
            let g = &p[at + 8..];
            let guid = match hex(g, 16) {
                Some((guid, rest)) if ended(rest) => guid,
                _ => return Err(err(g, "not a switch GUID (16 hex digits at most)")),
            };
            self.file.switches.push(FileSwitch {
                guid,
                line,
                routes: Vec::new(),
            });
            self.open = true;
            return Ok(());
        }
        let Some(l) = p.strip_prefix("0x").filter(|_| self.open) else {
            return Ok(());
        };
        let (lid, rest) = match hex(l, 4) {
            Some((lid, rest)) if ended(rest) => (lid as u16, rest),
            _ => return Err(err(l, "not a LID (4 hex digits at most)")),
        };
        let q = rest.trim_start();
        let n = q.bytes().take_while(u8::is_ascii_digit).count();
        let port = match q[..n].parse::<u8>() {
            Ok(port) if ended(&q[n..]) => port,
            _ => return Err(err(q, "not a port (0-255)")),
        };
        // The owner's GUID, where the line has one that reads (else none,
        // as OpenSM takes a broken one).
        let rest = &q[n..];
        let port_guid = (rest.find(" portguid 0x"))
            .and_then(|at| hex(&rest[at + 12..], 16))
            .filter(|(_, after)| ended(after) || after.starts_with(':'))
            .map_or(0, |(g, _)| g);
        if let Some(sw) = self.file.switches.last_mut() {
            sw.routes.push(FileRoute {
                port_guid,
                line: u32::try_from(line).unwrap_or(u32::MAX),
                lid,
                port,
            });
            self.routes += 1;
        }
        Ok(())
    }

    /// Lines read so far.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Routes read so far.
    pub fn routes(&self) -> usize {
        self.routes
    }

    /// The file read.
    pub fn finish(self) -> LftFile {
        self.file
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    const DUMP: &str = "\
Unicast lids [0-3] of switch Lid 2 guid 0x000000000000000a ('sw a'):
0x0001 001 # Channel Adapter portguid 0x0000000000000101: 'h1'
0x0002 000 # Switch portguid 0x000000000000000a: 'sw a guid 0x99'
  0x0003 017 # unknown node and type
3 lids dumped
# a comment
Unicast lids [0-3] of switch Lid 3 guid 0x000000000000000b ('b'):
0x0001 002 portguid 0x0000000000000101 :
0x0003 000
";

    #[test]
    fn reads_opensms_lft_dump() {
        let f = LftFile::parse(DUMP).unwrap();
        assert_eq!(f.switches.len(), 2);
        assert_eq!((f.switches[0].guid, f.switches[0].line), (0xa, 1));
        let r = &f.switches[0].routes;
        assert_eq!(
            r.iter()
                .map(|r| (r.lid, r.port, r.port_guid, r.line))
                .collect::<Vec<_>>(),
            [(1, 1, 0x101, 2), (2, 0, 0xa, 3), (3, 17, 0, 4)]
        );
        let r = &f.switches[1].routes;
        assert_eq!(
            r.iter()
                .map(|r| (r.lid, r.port, r.port_guid))
                .collect::<Vec<_>>(),
            [(1, 2, 0x101), (3, 0, 0)]
        );
        assert_eq!(f.routes(), 5);
    }

    #[test]
    fn lines_before_any_switch_and_other_lines_are_skipped() {
        let f = LftFile::parse("0x0001 zzz\nhello\n\n12 lids dumped\n").unwrap();
        assert!(f.switches.is_empty());
    }

    #[test]
    fn broken_lines_are_refused_with_their_place() {
        for (text, line, column, what) in [
            ("Unicast lids [0-3] of switch Lid 2 (x):\n", 1, 1, "guid 0x"),
            ("Unicast lids guid 0xzz\n", 1, 21, "switch GUID"),
            (
                "Unicast lids guid 0x12345678901234567 x\n",
                1,
                21,
                "switch GUID",
            ),
            ("Unicast lids guid 0x1a\n0x1 x\n", 2, 5, "not a port"),
            ("Unicast lids guid 0x1a\n0x10000 1\n", 2, 3, "not a LID"),
            ("Unicast lids guid 0x1a\n0xg 1\n", 2, 3, "not a LID"),
            (
                "Unicast lids guid 0x1a\n  0x0001 256\n",
                2,
                10,
                "not a port",
            ),
            ("Unicast lids guid 0x1a\n0x0001 1x\n", 2, 8, "not a port"),
            (
                "Multicast mlids [0xc000-0xc001] of switch Lid 2 guid 0x1:\n",
                1,
                1,
                "multicast",
            ),
        ] {
            let e = LftFile::parse(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.reason.contains(what), "{text:?}: {e}");
            assert!(e
                .to_string()
                .starts_with(&alloc::format!("line {line}, column {column}: ")));
        }
    }

    #[test]
    fn a_broken_owner_guid_is_no_guid() {
        let f = LftFile::parse("Unicast lids guid 0x1a\n0x0001 001 # x portguid 0xqq\n").unwrap();
        assert_eq!(f.switches[0].routes[0].port_guid, 0);
        assert_eq!(f.switches[0].routes[0].port, 1);
    }
}
