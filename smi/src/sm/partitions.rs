//! OpenSM's partition configuration (`partitions.conf`), read with its
//! syntax unchanged: what each partition is (name, P_Key, IPoIB, the
//! broadcast group's flags, default membership), who is in it (port GUIDs,
//! `ALL`, `ALL_CAS`, `ALL_SWITCHES`, `ALL_ROUTERS`, `SELF`, `NONE`, each
//! full, limited or both), and the multicast groups to create in it
//! (`mgid=` lines). Comments run from `#` to the end of the line; a
//! definition runs from its name to its `;` across as many lines as it
//! likes, and an `mgid=` line ends at its newline.
//!
//! What OpenSM refuses is refused here with the line, the column and the
//! reason ([`PartitionError`]): a definition with no `:`, a P_Key, GUID or
//! flag value that is not a number, a PortGUID of 0, a definition not
//! ended by `;`. What OpenSM only warns of and skips (an unknown flag, an
//! unknown membership word, which is taken as limited, an `mgid` that is
//! not multicast) is kept as a [`Warning`] with its place.
//! [`Sm::set_partitions`](super::Sm::set_partitions) applies a
//! configuration: P_Key tables and enforcement.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use mad_core::types::Gid;

/// The default partition's P_Key (low 15 bits).
pub const DEFAULT_PKEY: u16 = 0x7FFF;

/// Bytes of configuration read at most.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// A port's membership in a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Membership {
    /// Full member (P_Key bit 15 set).
    Full,
    /// Limited member.
    Limited,
    /// Both a full and a limited member.
    Both,
}

/// Which ports a member entry names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ports {
    /// The end port with this GUID.
    Guid(u64),
    /// Every end port.
    All,
    /// Every CA port.
    AllCas,
    /// Every switch's port 0.
    AllSwitches,
    /// Every router port.
    AllRouters,
    /// The SM's own port.
    SelfPort,
}

/// A multicast group's parameters (`mgroup_flag`s), with OpenSM's
/// defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFlags {
    /// Rate code (default 3, 10 Gb/s).
    pub rate: u8,
    /// MTU code (default 4, 2048 bytes).
    pub mtu: u8,
    /// Service level (default 0).
    pub sl: u8,
    /// True when an `sl=` flag gave [`GroupFlags::sl`]; without one, a
    /// QoS policy may give the partition's multicast groups their SL.
    pub sl_given: bool,
    /// Scopes given (none: link-local, 2); each makes a group.
    pub scopes: Vec<u8>,
    /// Q_Key (0: the default, 0x0B1B for IP groups).
    pub qkey: u32,
    /// Traffic class.
    pub tclass: u8,
    /// Flow label.
    pub flow_label: u32,
}

impl Default for GroupFlags {
    fn default() -> GroupFlags {
        GroupFlags {
            rate: 3,
            mtu: 4,
            sl: 0,
            sl_given: false,
            scopes: Vec::new(),
            qkey: 0,
            tclass: 0,
            flow_label: 0,
        }
    }
}

/// An `mgid=` group of a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McGroup {
    /// Its MGID.
    pub mgid: Gid,
    /// Its parameters: the partition's, then the line's.
    pub flags: GroupFlags,
    /// Where it was given (line, from 1).
    pub line: usize,
}

/// One partition (definitions with the same P_Key merged, the first
/// one's name kept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Its name (may be empty).
    pub name: String,
    /// Its P_Key, low 15 bits.
    pub pkey: u16,
    /// Its P_Key was given (else it was made: the lowest unused).
    pub pkey_given: bool,
    /// `indx0`: the P_Key goes in block 0, index 0.
    pub index0: bool,
    /// `ipoib`: its IPoIB broadcast group is created.
    pub ipoib: bool,
    /// The broadcast group's parameters.
    pub flags: GroupFlags,
    /// Members in the order given: who, and how.
    pub members: Vec<(Ports, Membership)>,
    /// `mgid=` groups.
    pub groups: Vec<McGroup>,
    /// Where it was first defined (line, from 1).
    pub line: usize,
}

/// Something OpenSM warns of and skips.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What was skipped or assumed.
    pub what: String,
}

/// Why a configuration was refused: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionError {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong.
    pub reason: String,
}

impl core::fmt::Display for PartitionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.reason
        )
    }
}

/// A parsed configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionConfig {
    /// The partitions, in the order first defined.
    pub partitions: Vec<Partition>,
    /// What was skipped or assumed, with its place.
    pub warnings: Vec<Warning>,
}

/// A piece of the text and where it starts.
#[derive(Clone, Copy)]
struct Span<'a> {
    text: &'a str,
    line: usize,
    column: usize,
}

impl<'a> Span<'a> {
    /// The piece without the whitespace around it (its place moved on).
    fn trim(self) -> Span<'a> {
        let start = self.text.len() - self.text.trim_start().len();
        self.skip(start).cut(self.text.trim().len())
    }

    /// The piece from byte `n` on.
    fn skip(self, n: usize) -> Span<'a> {
        let (mut line, mut column) = (self.line, self.column);
        for c in self.text[..n].chars() {
            if c == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        Span {
            text: &self.text[n..],
            line,
            column,
        }
    }

    /// The first `n` bytes.
    fn cut(self, n: usize) -> Span<'a> {
        Span {
            text: &self.text[..n],
            ..self
        }
    }

    /// Split at the first `c`: before and after it.
    fn split_once(self, c: char) -> Option<(Span<'a>, Span<'a>)> {
        let i = self.text.find(c)?;
        Some((self.cut(i), self.skip(i + c.len_utf8())))
    }

    /// The pieces between each `c`.
    fn split(self, c: char) -> Vec<Span<'a>> {
        let mut out = Vec::new();
        let mut rest = self;
        while let Some((a, b)) = rest.split_once(c) {
            out.push(a);
            rest = b;
        }
        out.push(rest);
        out
    }

    fn error(self, reason: impl Into<String>) -> PartitionError {
        PartitionError {
            line: self.line,
            column: self.column,
            reason: reason.into(),
        }
    }

    fn warning(self, what: impl Into<String>) -> Warning {
        Warning {
            line: self.line,
            column: self.column,
            what: what.into(),
        }
    }
}

/// A number as OpenSM's `strtoul(…, 0)` reads one: `0x…` hexadecimal,
/// `0…` octal, else decimal.
pub(super) fn number(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// `word` is a prefix of `full` (OpenSM compares `strlen(word)` bytes).
fn abbreviates(word: &str, full: &str) -> bool {
    !word.is_empty() && full.starts_with(word)
}

/// A membership word (OpenSM: any prefix of full, both, limited; anything
/// else is limited, with a warning).
fn membership(w: Span<'_>, warnings: &mut Vec<Warning>) -> Membership {
    let s = w.text.trim();
    if abbreviates(s, "full") {
        Membership::Full
    } else if abbreviates(s, "both") {
        Membership::Both
    } else {
        if !abbreviates(s, "limited") {
            warnings.push(w.warning(alloc::format!(
                "unrecognized membership {s:?}: taken as limited"
            )));
        }
        Membership::Limited
    }
}

/// `name[=value]`, both trimmed.
fn name_value(s: Span<'_>) -> (Span<'_>, Option<Span<'_>>) {
    match s.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (s.trim(), None),
    }
}

/// A group flag into `f`; false when `name` is not one.
fn group_flag(
    f: &mut GroupFlags,
    name: Span<'_>,
    value: Option<Span<'_>>,
) -> Result<bool, PartitionError> {
    let n = name.text;
    let known = ["mtu", "rate", "scope", "Q_Key", "TClass", "sl", "FlowLabel"];
    if !known.contains(&n) {
        return Ok(false);
    }
    let v = value.ok_or_else(|| name.error(alloc::format!("flag {n} needs a value")))?;
    let x =
        number(v.text).ok_or_else(|| v.error(alloc::format!("{n}={:?}: not a number", v.text)))?;
    let fits = |max: u64| {
        if x <= max {
            Ok(x)
        } else {
            Err(v.error(alloc::format!("{n}={x}: more than {max}")))
        }
    };
    match n {
        "mtu" => f.mtu = fits(63)? as u8,
        "rate" => f.rate = fits(63)? as u8,
        "scope" => f.scopes.push(fits(15)? as u8),
        "Q_Key" => f.qkey = fits(u64::from(u32::MAX))? as u32,
        "TClass" => f.tclass = fits(255)? as u8,
        "sl" => (f.sl, f.sl_given) = (fits(15)? as u8, true),
        _ => f.flow_label = fits(0xF_FFFF)? as u32,
    }
    Ok(true)
}

/// An IPv6-text GID (`ff12:401b::ffff:ffff`).
fn gid(s: &str) -> Option<Gid> {
    let s = s.trim();
    let (head, tail) = match s.split_once("::") {
        Some((h, t)) => (h, Some(t)),
        None => (s, None),
    };
    let groups = |p: &str| -> Option<Vec<u16>> {
        if p.is_empty() {
            return Some(Vec::new());
        }
        p.split(':')
            .map(|g| {
                (1..=4)
                    .contains(&g.len())
                    .then(|| u16::from_str_radix(g, 16).ok())
                    .flatten()
            })
            .collect()
    };
    let h = groups(head)?;
    let t = match tail {
        Some(t) => groups(t)?,
        None => Vec::new(),
    };
    if h.len() + t.len() > 8
        || (tail.is_none() && h.len() != 8)
        || (tail.is_some() && h.len() + t.len() == 8)
    {
        return None;
    }
    let mut words = [0u16; 8];
    words[..h.len()].copy_from_slice(&h);
    words[8 - t.len()..].copy_from_slice(&t);
    let mut b = [0u8; 16];
    for (i, w) in words.iter().enumerate() {
        b[2 * i..2 * i + 2].copy_from_slice(&w.to_be_bytes());
    }
    Some(Gid(b))
}

/// Reads a partition configuration.
pub fn parse(text: &str) -> Result<PartitionConfig, PartitionError> {
    let whole = Span {
        text,
        line: 1,
        column: 1,
    };
    if text.len() > MAX_CONFIG_BYTES {
        return Err(whole.error(alloc::format!("the file is over {MAX_CONFIG_BYTES} bytes")));
    }
    // Comments out, lines and columns kept: every commented byte becomes
    // a space.
    let mut clean = String::with_capacity(text.len());
    let mut comment = false;
    for c in text.chars() {
        match c {
            '\n' => {
                comment = false;
                clean.push('\n');
            }
            '#' => {
                comment = true;
                clean.push(' ');
            }
            _ if comment => clean.push(' '),
            c => clean.push(c),
        }
    }
    let all = Span {
        text: &clean,
        line: 1,
        column: 1,
    };
    let mut cfg = PartitionConfig::default();
    let mut rest = all;
    loop {
        let Some((stmt, after)) = rest.split_once(';') else {
            let left = rest.trim();
            if !left.text.is_empty() {
                return Err(left.error("a partition definition not ended with ';'"));
            }
            break;
        };
        rest = after;
        let stmt = stmt.trim();
        if stmt.text.is_empty() {
            continue;
        }
        definition(stmt, &mut cfg)?;
    }
    // P_Keys not given: the lowest unused.
    let mut used: Vec<u16> = (cfg.partitions.iter())
        .filter(|p| p.pkey_given)
        .map(|p| p.pkey)
        .collect();
    for p in cfg.partitions.iter_mut().filter(|p| !p.pkey_given) {
        let k = (1..DEFAULT_PKEY).find(|k| !used.contains(k)).unwrap_or(0);
        p.pkey = k;
        used.push(k);
    }
    Ok(cfg)
}

/// One `header : body` definition.
fn definition(stmt: Span<'_>, cfg: &mut PartitionConfig) -> Result<(), PartitionError> {
    let (header, body) = stmt
        .split_once(':')
        .ok_or_else(|| stmt.error("no partition definition found (':' is missing)"))?;
    let mut parts = header.split(',').into_iter();
    let first = parts.next().unwrap_or(header);
    let (name, pkey) = name_value(first);
    let pkey = match pkey {
        Some(v) => {
            let k = number(v.text).filter(|&k| k <= 0xFFFF).ok_or_else(|| {
                v.error(alloc::format!("P_Key {:?}: not a 16-bit number", v.text))
            })?;
            Some(k as u16 & 0x7FFF)
        }
        None => None,
    };
    let mut p = Partition {
        name: name.text.to_string(),
        pkey: pkey.unwrap_or(0),
        pkey_given: pkey.is_some(),
        index0: false,
        ipoib: false,
        flags: GroupFlags::default(),
        members: Vec::new(),
        groups: Vec::new(),
        line: header.line,
    };
    let mut defmember = Membership::Limited;
    for f in parts {
        let (flag, value) = name_value(f);
        if flag.text.is_empty() {
            return Err(f.error("bad partition flags (an empty flag)"));
        }
        if group_flag(&mut p.flags, flag, value)? {
            continue;
        }
        if abbreviates(flag.text, "ipoib") {
            p.ipoib = true;
        } else if abbreviates(flag.text, "defmember") {
            match value {
                Some(v)
                    if ["full", "both", "limited"]
                        .iter()
                        .any(|w| abbreviates(v.text, w)) =>
                {
                    defmember = membership(v, &mut cfg.warnings);
                }
                _ => cfg
                    .warnings
                    .push(flag.warning("flag defmember needs full, limited or both: skipped")),
            }
        } else if flag.text == "indx0" {
            p.index0 = true;
        } else {
            cfg.warnings.push(flag.warning(alloc::format!(
                "unrecognized partition flag {:?}: ignored",
                flag.text
            )));
        }
    }
    // The body: mgid lines end at their newline; port lists run on.
    let mut rest = body;
    loop {
        let (line, next) = match rest.split_once('\n') {
            Some((l, n)) => (l, Some(n)),
            None => (rest, None),
        };
        let l = line.trim();
        if let Some((_, v)) = l.split_once('=').filter(|(n, _)| n.text.trim() == "mgid") {
            mgid_line(v, &p.flags, &mut p.groups, &mut cfg.warnings)?;
        } else {
            for item in l.split(',') {
                let item = item.trim();
                if item.text.is_empty() {
                    continue;
                }
                let (who, how) = name_value(item);
                let how = match how {
                    Some(h) => membership(h, &mut cfg.warnings),
                    None => defmember,
                };
                let ports = match who.text {
                    "NONE" => continue,
                    "ALL" => Ports::All,
                    "ALL_CAS" => Ports::AllCas,
                    "ALL_SWITCHES" => Ports::AllSwitches,
                    "ALL_ROUTERS" => Ports::AllRouters,
                    "SELF" => Ports::SelfPort,
                    g => Ports::Guid(
                        number(g)
                            .filter(|&g| g != 0)
                            .ok_or_else(|| who.error(alloc::format!("bad PortGUID {g:?}")))?,
                    ),
                };
                p.members.push((ports, how));
            }
        }
        match next {
            Some(n) => rest = n,
            None => break,
        }
    }
    // The same P_Key again: merged into the first definition.
    if let Some(q) =
        (cfg.partitions.iter_mut()).find(|q| p.pkey_given && q.pkey_given && q.pkey == p.pkey)
    {
        q.members.extend(p.members);
        q.groups.extend(p.groups);
        q.ipoib |= p.ipoib;
        q.index0 |= p.index0;
        return Ok(());
    }
    cfg.partitions.push(p);
    Ok(())
}

/// `mgid=GID[,flag]*`: a group with the partition's flags, then the
/// line's. Not a multicast GID: skipped with a warning, as OpenSM does.
fn mgid_line(
    v: Span<'_>,
    inherited: &GroupFlags,
    groups: &mut Vec<McGroup>,
    warnings: &mut Vec<Warning>,
) -> Result<(), PartitionError> {
    let mut items = v.split(',').into_iter();
    let first = items.next().unwrap_or(v).trim();
    let mut flags = inherited.clone();
    for f in items {
        let (name, value) = name_value(f);
        if !group_flag(&mut flags, name, value)? {
            warnings.push(name.warning(alloc::format!(
                "unrecognized mgroup flag {:?}: ignored",
                name.text
            )));
        }
    }
    match gid(first.text) {
        Some(g) if g.0[0] == 0xFF => groups.push(McGroup {
            mgid: g,
            flags,
            line: first.line,
        }),
        _ => warnings.push(first.warning(alloc::format!(
            "mgid {:?}: not a multicast GID, the group is skipped",
            first.text
        ))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_examples_of_opensms_documentation_read() {
        let text = "\
 Default=0x7fff : ALL, SELF=full ;
 NewPartition , ipoib : 0x123456=full, 0x3456789034=limi, 0x2134af2306 ;
 YetAnotherOne = 0x300 : SELF=full ;
 YetAnotherOne = 0x300 : ALL=limited ;
 ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;
 # 0x123453, 0x123454 will be limited
 ShareIO = 0x80 : 0x123453, 0x123454, 0x123455=full;
 # multicast groups added to default
 Default=0x7fff,ipoib:
        mgid=ff12:401b::0707,sl=1 # random IPv4 group
        mgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2 # random group
        ALL=full;
";
        let c = parse(text).unwrap();
        let names: Vec<&str> = c.partitions.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["Default", "NewPartition", "YetAnotherOne", "ShareIO"]
        );
        let d = &c.partitions[0];
        assert_eq!((d.pkey, d.ipoib), (0x7FFF, true));
        assert_eq!(
            d.members,
            [
                (Ports::All, Membership::Limited),
                (Ports::SelfPort, Membership::Full),
                (Ports::All, Membership::Full)
            ]
        );
        assert_eq!(d.groups.len(), 2);
        assert_eq!(d.groups[0].mgid.0[..4], [0xff, 0x12, 0x40, 0x1b]);
        assert_eq!(d.groups[0].mgid.0[14..], [0x07, 0x07]);
        assert_eq!(d.groups[0].flags.sl, 1);
        assert_eq!(
            (d.groups[1].flags.qkey, d.groups[1].flags.mtu),
            (0xDEAD_BEEF, 2)
        );
        let n = &c.partitions[1];
        assert!(n.ipoib && !n.pkey_given && n.pkey == 1, "{n:?}");
        assert_eq!(
            n.members,
            [
                (Ports::Guid(0x123456), Membership::Full),
                (Ports::Guid(0x3456789034), Membership::Limited),
                (Ports::Guid(0x2134af2306), Membership::Limited)
            ]
        );
        // "limi" abbreviates limited: no warning.
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let s = &c.partitions[3];
        assert_eq!(s.pkey, 0x80);
        assert_eq!(
            s.members.iter().map(|m| m.1).collect::<Vec<_>>(),
            [
                Membership::Full,
                Membership::Full,
                Membership::Limited,
                Membership::Limited,
                Membership::Full
            ]
        );
    }

    #[test]
    fn what_opensm_refuses_is_refused_where_it_is() {
        for (text, line, column, says) in [
            ("Default=0x7fff ALL ;", 1, 1, "':' is missing"),
            ("\n\n  P=0x12345 : ALL ;", 3, 5, "not a 16-bit number"),
            ("P=0x10 : ALL,\n  0xzz=full ;", 2, 3, "bad PortGUID"),
            ("P=0x10 : 0 ;", 1, 10, "bad PortGUID"),
            ("P=0x10 : ALL", 1, 1, "not ended with ';'"),
            ("P=0x10, mtu=x : ALL ;", 1, 13, "not a number"),
            ("P=0x10, sl=16 : ALL ;", 1, 12, "more than 15"),
            ("P=0x10,, ipoib : ALL ;", 1, 8, "empty flag"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.reason.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn what_opensm_skips_is_a_warning_with_its_place() {
        let c = parse(
            "P=0x10, ipob, defmember=nobody : 0x1=half ;\nQ=0x11 :\n  mgid=fe80::1\n  mgid=ff12::2,colour=red\n ;",
        )
        .unwrap();
        let w: Vec<(usize, usize)> = c.warnings.iter().map(|w| (w.line, w.column)).collect();
        assert_eq!(
            w,
            [(1, 9), (1, 15), (1, 38), (3, 8), (4, 16)],
            "{:?}",
            c.warnings
        );
        assert_eq!(
            c.partitions[0].members,
            [(Ports::Guid(1), Membership::Limited)]
        );
        assert_eq!(c.partitions[1].groups.len(), 1);
    }

    #[test]
    fn gids_read_as_ipv6_text() {
        assert_eq!(
            gid("ff12:401b:ffff::ffff:ffff").unwrap().0,
            [0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(gid("::").unwrap().0, [0; 16]);
        assert_eq!(gid("1:2:3:4:5:6:7:8").unwrap().0[15], 8);
        for bad in [
            "1:2:3",
            "1::2::3",
            "12345::",
            "1:2:3:4:5:6:7:8:9",
            "1:2:3:4::5:6:7:8",
            "g::",
        ] {
            assert_eq!(gid(bad), None, "{bad}");
        }
    }
}
