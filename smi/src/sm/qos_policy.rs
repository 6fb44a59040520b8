//! The SL, and the limits, a PathRecord gets from OpenSM's QoS policy
//! file, `qos-policy.conf`, syntax unchanged: the full policy
//! (`port-groups`, `qos-levels`, `qos-match-rules`) and the simplified one
//! (`qos-ulps`).
//!
//! ```text
//! port-groups
//!     port-group
//!         name: Storage
//!         port-guid: 0x10000000000001, 0x10000000000005-0x1000000000FFFA
//!     end-port-group
//!     port-group
//!         name: Servers
//!         port-name: vs1 HCA-1/P1, vs2 HCA-1/P1
//!         node-type: CA, SELF
//!         partition: Part1
//!         pkey: 0x1234
//!     end-port-group
//! end-port-groups
//! qos-levels
//!     qos-level
//!         name: DEFAULT
//!         sl: 0
//!     end-qos-level
//!     qos-level
//!         name: WholeSet
//!         sl: 1
//!         mtu-limit: 4
//!         rate-limit: 5
//!         pkey: 0x1234
//!         packet-life: 8
//!     end-qos-level
//! end-qos-levels
//! qos-match-rules
//!     qos-match-rule
//!         source: Servers
//!         destination: Storage
//!         qos-class: 7-9,11
//!         service-id: 0x10000-0x1FFFF
//!         pkey: 0x0F00-0x0FFF
//!         qos-level-name: WholeSet
//!     end-qos-match-rule
//! end-qos-match-rules
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
//! A PathRecord request is matched as OpenSM matches it
//! (`osm_qos_policy.c`): the `qos-match-rules` in the file's order, then
//! the `qos-ulps` rules in theirs; the first that matches gives the QoS
//! level, and the level named `DEFAULT` (else the `default` of
//! `qos-ulps`) applies when none does — a policy with neither is refused,
//! as OpenSM refuses it (ERR AC10). A match rule matches when every
//! criterion it has matches: its source groups hold the source port and
//! its destination groups the destination port; its QoS classes, service
//! IDs and P_Keys hold the request's, which the request's ComponentMask
//! must select. A port is in a group when the group names its GUID, its
//! "NodeDescription/Pnum", its node type (`CA`, `SWITCH`, `ROUTER`, `ALL`,
//! `SELF` for the SM's port), or a partition (by P_Key or by name) whose
//! P_Key its table holds. A level gives an SL, and may limit the MTU and
//! the rate, fix the packet lifetime and name the P_Keys a path may use.
//!
//! The ULPs of `qos-ulps` are names for service-ID or P_Key ranges, as
//! OpenSM defines them: SDP 0x10000–0x1FFFF (or 0x10000 plus the port),
//! RDS 0x10648CA, iSER 0x1060CBC (RDS and iSER with a port: 0x1060000 plus
//! it), IPoIB the P_Key 0x7FFF (or the one given), SRP its target's port
//! GUID.
//!
//! `qos-setup` is skipped whole, as OpenSM skips it (its SL-to-VL and VL
//! arbitration tables come from `opensm.conf`, see [`super::qos`]). A
//! level's `path-bits` (which OpenSM 3.3.23 parses and never applies)
//! are the DLID offsets into the destination's `2^LMC` LIDs its paths
//! take ([`Level::takes_path_bits`]).

use super::partitions::number;
use super::qos::QosError;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use mad_core::attr::NodeType;

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

/// Node types a port group names (`node-type:`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeTypes {
    /// `CA`: every channel adapter's port.
    pub ca: bool,
    /// `SWITCH`: every switch's port 0.
    pub switch: bool,
    /// `ROUTER`: every router's port.
    pub router: bool,
    /// `ALL`: every port.
    pub all: bool,
    /// `SELF`: the SM's own port.
    pub sm: bool,
}

/// A `port-group` of the full policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortGroup {
    /// Its name (compared without regard to case, as OpenSM does).
    pub name: String,
    /// `port-guid:` ranges.
    pub guids: Vec<(u64, u64)>,
    /// `port-name:` entries: (NodeDescription, port number).
    pub port_names: Vec<(String, u8)>,
    /// `pkey:` ranges (low 15 bits): ports whose table holds one.
    pub pkeys: Vec<(u64, u64)>,
    /// `partition:` names: ports whose table holds the partition's P_Key.
    pub partitions: Vec<String>,
    /// `node-type:`.
    pub node_types: NodeTypes,
    /// Its line, from 1.
    pub line: usize,
}

/// A `qos-level` of the full policy: what a path that matches gets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QosLevel {
    /// Its name (`DEFAULT` applies when no rule matches).
    pub name: String,
    /// `sl:` (0–15).
    pub sl: Option<u8>,
    /// `mtu-limit:`, an MTU code (1: 256 … 5: 4096): the path's MTU at most.
    pub mtu_limit: Option<u8>,
    /// `rate-limit:`, a rate code (2: 2.5 Gb/s … ): the path's rate at most.
    pub rate_limit: Option<u8>,
    /// `pkey:` ranges (low 15 bits): the partitions a path may use.
    pub pkeys: Vec<(u64, u64)>,
    /// `packet-life:`, a PacketLifeTime code (0–63) every path gets.
    pub packet_life: Option<u8>,
    /// `path-bits:` ranges: the offsets into the destination port's
    /// `2^LMC` LIDs (the DLID's low LMC bits) its paths take.
    pub path_bits: Vec<(u64, u64)>,
    /// Its line, from 1.
    pub line: usize,
}

/// A `qos-match-rule` of the full policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchRule {
    /// `qos-class:` ranges.
    pub qos_class: Vec<(u64, u64)>,
    /// `source:` groups (indexes into [`QosPolicy::groups`]).
    pub source: Vec<usize>,
    /// `destination:` groups.
    pub destination: Vec<usize>,
    /// `service-id:` ranges.
    pub service_id: Vec<(u64, u64)>,
    /// `pkey:` ranges (low 15 bits).
    pub pkey: Vec<(u64, u64)>,
    /// The level it gives (an index into [`QosPolicy::levels`]).
    pub level: usize,
    /// Its line, from 1.
    pub line: usize,
}

/// A QoS policy: the full one's groups, levels and rules, and the
/// simplified one's rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QosPolicy {
    /// The `qos-ulps` rules, in the file's order.
    pub rules: Vec<UlpRule>,
    /// The `qos-ulps` `default` rule's SL.
    pub default_sl: Option<u8>,
    /// `port-groups`.
    pub groups: Vec<PortGroup>,
    /// `qos-levels`.
    pub levels: Vec<QosLevel>,
    /// `qos-match-rules`, in the file's order.
    pub match_rules: Vec<MatchRule>,
    /// True when the file had a `qos-setup` section (skipped, as OpenSM
    /// skips it).
    pub setup_skipped: bool,
}

/// What the policy looks at in a PathRecord request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathQuery {
    /// The ServiceID, if the request's mask selects it.
    pub service_id: Option<u64>,
    /// The P_Key, if the request's mask selects it.
    pub pkey: Option<u16>,
    /// The QoS class, if the request's mask selects it.
    pub qos_class: Option<u16>,
    /// The source port's GUID.
    pub source_guid: u64,
    /// The destination port's GUID.
    pub target_guid: u64,
}

/// What a port group looks at in a port.
#[derive(Clone, Copy, Debug)]
pub struct PortFacts<'a> {
    /// The port's GUID (a VM's vGUID).
    pub guid: u64,
    /// Its node's type.
    pub node_type: NodeType,
    /// Its node's NodeDescription.
    pub description: &'a str,
    /// The port's number (a switch's 0).
    pub port: u8,
    /// True for the SM's own port.
    pub sm: bool,
    /// The P_Keys its table holds.
    pub pkeys: &'a [u16],
}

/// What a matched level gives a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level<'a> {
    /// The level's name (`qos-ulps` for a rule of that section).
    pub name: &'a str,
    /// The SL, if the level gives one.
    pub sl: Option<u8>,
    /// The largest MTU code a path may carry.
    pub mtu_limit: Option<u8>,
    /// The largest rate code a path may carry.
    pub rate_limit: Option<u8>,
    /// The packet lifetime code every path gets.
    pub packet_life: Option<u8>,
    /// The partitions (low 15 bits) a path may use; empty: any.
    pub pkeys: &'a [(u64, u64)],
    /// The path bits (DLID offsets) its paths take; empty: any.
    pub path_bits: &'a [(u64, u64)],
}

impl Level<'_> {
    /// True when the level lets a path use the partition of `pkey`.
    pub fn allows(&self, pkey: u16) -> bool {
        self.pkeys.is_empty() || within(self.pkeys, u64::from(pkey & 0x7FFF))
    }

    /// True when the level lets a path reach its destination at offset
    /// `offset` into the port's `count` LIDs (`2^LMC`): any offset when the
    /// level names no path bits, or none below `count` (so that a level
    /// written for LMC 2 still serves a port of LMC 0), else only those it
    /// names.
    pub fn takes_path_bits(&self, offset: u16, count: u16) -> bool {
        let named_here = (self.path_bits.iter()).any(|&(a, _)| a < u64::from(count));
        !named_here || within(self.path_bits, u64::from(offset))
    }

    fn of(l: &QosLevel) -> Level<'_> {
        Level {
            name: &l.name,
            sl: l.sl,
            mtu_limit: l.mtu_limit,
            rate_limit: l.rate_limit,
            packet_life: l.packet_life,
            pkeys: &l.pkeys,
            path_bits: &l.path_bits,
        }
    }

    fn sl_only(sl: u8) -> Level<'static> {
        Level {
            name: "qos-ulps",
            sl: Some(sl),
            mtu_limit: None,
            rate_limit: None,
            packet_life: None,
            pkeys: &[],
            path_bits: &[],
        }
    }
}

fn within(ranges: &[(u64, u64)], v: u64) -> bool {
    ranges.iter().any(|&(a, b)| (a..=b).contains(&v))
}

impl QosPolicy {
    /// The SL the `qos-ulps` rules give a request: the first that
    /// matches, else their `default`; `None` when neither.
    pub fn sl_for(&self, q: &PathQuery) -> Option<u8> {
        self.ulp_sl(q).or(self.default_sl)
    }

    fn ulp_sl(&self, q: &PathQuery) -> Option<u8> {
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
    }

    /// True when port `p` is in group `g`; `partition` gives the P_Key
    /// of a partition by its name.
    pub fn in_group(
        g: &PortGroup,
        p: &PortFacts<'_>,
        partition: &dyn Fn(&str) -> Option<u16>,
    ) -> bool {
        let t = g.node_types;
        let by_type = t.all
            || (t.sm && p.sm)
            || match p.node_type {
                NodeType::ChannelAdapter => t.ca,
                NodeType::Switch => t.switch,
                NodeType::Router => t.router,
                _ => false,
            };
        let holds = |k: u16| p.pkeys.iter().any(|&m| m != 0 && m & 0x7FFF == k & 0x7FFF);
        by_type
            || within(&g.guids, p.guid)
            || (g.port_names.iter()).any(|(d, n)| *n == p.port && d == p.description)
            || (p.pkeys.iter()).any(|&m| m & 0x7FFF != 0 && within(&g.pkeys, u64::from(m & 0x7FFF)))
            || (g.partitions.iter()).any(|name| partition(name).is_some_and(holds))
    }

    /// The level a request from `src` to `dst` gets: the first match rule
    /// that matches, else the first `qos-ulps` rule, else `DEFAULT` (or
    /// the `qos-ulps` default). `partition` gives a partition's P_Key by
    /// its name.
    pub fn level_for(
        &self,
        q: &PathQuery,
        src: &PortFacts<'_>,
        dst: &PortFacts<'_>,
        partition: &dyn Fn(&str) -> Option<u16>,
    ) -> Option<Level<'_>> {
        // Each group is looked at once per end at most: its answer is kept.
        let groups = if self.match_rules.is_empty() {
            0
        } else {
            self.groups.len()
        };
        let (mut src_in, mut dst_in) = (alloc::vec![None; groups], alloc::vec![None; groups]);
        let in_any = |list: &[usize], p: &PortFacts<'_>, seen: &mut [Option<bool>]| {
            list.iter().any(|&g| {
                *seen[g].get_or_insert_with(|| Self::in_group(&self.groups[g], p, partition))
            })
        };
        let hit = self.match_rules.iter().find(|r| {
            (r.qos_class.is_empty()
                || q.qos_class
                    .is_some_and(|c| within(&r.qos_class, u64::from(c))))
                && (r.service_id.is_empty()
                    || q.service_id.is_some_and(|s| within(&r.service_id, s)))
                && (r.pkey.is_empty()
                    || q.pkey
                        .is_some_and(|k| within(&r.pkey, u64::from(k & 0x7FFF))))
                && (r.source.is_empty() || in_any(&r.source, src, &mut src_in))
                && (r.destination.is_empty() || in_any(&r.destination, dst, &mut dst_in))
        });
        if let Some(r) = hit {
            return Some(Level::of(&self.levels[r.level]));
        }
        if let Some(sl) = self.ulp_sl(q) {
            return Some(Level::sl_only(sl));
        }
        match self.default_level() {
            Some(l) => Some(Level::of(l)),
            None => self.default_sl.map(Level::sl_only),
        }
    }

    /// The SL of a multicast group the SM makes for the partition of
    /// `pkey` (its IPoIB broadcast groups, its `mgid=` groups), read as a
    /// PathRecord in that partition with no end named: the first match
    /// rule with no source, destination, QoS class or ServiceID whose
    /// P_Keys (if it names any) hold `pkey`, else the first `qos-ulps`
    /// rule by P_Key (`ipoib`, `ipoib, pkey …`, `any, pkey …`) that holds
    /// it, else `DEFAULT` (or the `qos-ulps` default). `None` where what
    /// matches gives no SL. (OpenSM 3.3 applies its policy to PathRecords
    /// alone; hosts take a group's SL from its broadcast group, so this
    /// puts IPoIB's multicast on the SL its unicast paths get.)
    pub fn group_sl(&self, pkey: u16) -> Option<u8> {
        let k = u64::from(pkey & 0x7FFF);
        let rule = self.match_rules.iter().find(|r| {
            r.source.is_empty()
                && r.destination.is_empty()
                && r.qos_class.is_empty()
                && r.service_id.is_empty()
                && (r.pkey.is_empty() || within(&r.pkey, k))
        });
        if let Some(r) = rule {
            return self.levels[r.level].sl;
        }
        let ulp =
            (self.rules.iter()).find(|r| matches!(&r.matches, UlpMatch::PKey(v) if within(v, k)));
        if let Some(r) = ulp {
            return Some(r.sl);
        }
        match self.default_level() {
            Some(l) => l.sl,
            None => self.default_sl,
        }
    }

    /// The level named `DEFAULT`, if the file has one.
    pub fn default_level(&self) -> Option<&QosLevel> {
        (self.levels.iter()).find(|l| l.name.eq_ignore_ascii_case("DEFAULT"))
    }
}

/// The sections a policy file may hold.
const SECTIONS: [&str; 5] = [
    "port-groups",
    "qos-setup",
    "qos-levels",
    "qos-match-rules",
    "qos-ulps",
];

/// Entries the full policy may hold at most (groups, levels and rules
/// each), and entries a group's lists may hold at most.
pub const MAX_ENTRIES: usize = 4096;

/// Values the full policy's groups, levels and rules may hold in all
/// (ranges, port names, partitions, group names of rules): a PathRecord
/// looks at each at most once, so this bounds its cost.
pub const MAX_VALUES: usize = 65_536;

/// Where the parser is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Top,
    /// In a section, `(its name, its line)`; with an entry open, its line.
    In(&'static str, usize, Option<usize>),
}

/// A rule as read, before its names are looked up: (rule, its source
/// and destination group names, its level's name).
type RawRule = (MatchRule, Vec<String>, Vec<String>, Option<String>);

/// Reads a `qos-policy.conf`: the full policy's `port-groups`,
/// `qos-levels` and `qos-match-rules`, the simplified `qos-ulps`, and
/// `qos-setup`, skipped. A keyword out of its place, a value out of its
/// range, a number that is not one, a name no group or level has, a
/// second `DEFAULT`, or neither a `DEFAULT` level nor a `default` rule
/// (OpenSM refuses such a policy whole) is refused with its line and
/// column.
pub fn parse_policy(text: &str) -> Result<QosPolicy, QosError> {
    let mut p = QosPolicy::default();
    let mut at = At::Top;
    let mut raw: Vec<RawRule> = Vec::new();
    let mut group = PortGroup::default();
    let mut level = QosLevel::default();
    let mut rule: RawRule = Default::default();
    let mut values = 0usize;
    for (i, raw_line) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw_line.split('#').next().unwrap_or("");
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
        match at {
            At::Top => match SECTIONS.iter().find(|&&s| s == word) {
                Some(&s) => {
                    at = At::In(s, line, None);
                    p.setup_skipped |= s == "qos-setup";
                }
                None => {
                    return Err(err(
                        col,
                        format!(
                            "{word:?}: expected a section (port-groups, qos-setup, qos-levels, qos-match-rules, qos-ulps)"
                        ),
                    ))
                }
            },
            At::In(s, _, None) if word.strip_prefix("end-") == Some(s) => at = At::Top,
            At::In("qos-setup", _, _) => {}
            At::In("qos-ulps", _, _) => {
                if p.rules.len() >= MAX_RULES {
                    return Err(err(col, format!("more than {MAX_RULES} rules")));
                }
                ulp_rule(body, col, line, &mut p).map_err(|(c, r)| err(c, r))?;
            }
            At::In(s, start, None) => {
                let entry = &s[..s.len() - 1];
                if word != entry {
                    return Err(err(
                        col,
                        format!("{word:?}: expected {entry} or end-{s}"),
                    ));
                }
                let count = match s {
                    "port-groups" => p.groups.len(),
                    "qos-levels" => p.levels.len(),
                    _ => raw.len(),
                };
                if count >= MAX_ENTRIES {
                    return Err(err(col, format!("more than {MAX_ENTRIES} in {s}")));
                }
                at = At::In(s, start, Some(line));
                group = PortGroup {
                    line,
                    ..PortGroup::default()
                };
                level = QosLevel {
                    line,
                    ..QosLevel::default()
                };
                rule = (
                    MatchRule {
                        line,
                        ..MatchRule::default()
                    },
                    Vec::new(),
                    Vec::new(),
                    None,
                );
            }
            At::In(s, start, Some(open)) => {
                let entry = &s[..s.len() - 1];
                if word.strip_prefix("end-") == Some(entry) {
                    let missing = |what: &str| QosError {
                        line: open,
                        column: 1,
                        reason: format!("this {entry} has no {what}"),
                    };
                    let size = group.guids.len()
                        + group.port_names.len()
                        + group.pkeys.len()
                        + group.partitions.len()
                        + level.pkeys.len()
                        + rule.0.qos_class.len()
                        + rule.0.service_id.len()
                        + rule.0.pkey.len()
                        + rule.1.len()
                        + rule.2.len();
                    values += size;
                    if values > MAX_VALUES {
                        return Err(err(
                            col,
                            format!("the policy holds more than {MAX_VALUES} values in all"),
                        ));
                    }
                    match s {
                        "port-groups" => {
                            if group.name.is_empty() {
                                return Err(missing("name"));
                            }
                            let g = core::mem::take(&mut group);
                            if p.groups.iter().any(|o| o.name.eq_ignore_ascii_case(&g.name)) {
                                return Err(err(col, format!("a second port-group {:?}", g.name)));
                            }
                            p.groups.push(g);
                        }
                        "qos-levels" => {
                            if level.name.is_empty() {
                                return Err(missing("name"));
                            }
                            let l = core::mem::take(&mut level);
                            if p.levels.iter().any(|o| o.name.eq_ignore_ascii_case(&l.name)) {
                                return Err(err(col, format!("a second qos-level {:?}", l.name)));
                            }
                            p.levels.push(l);
                        }
                        _ => {
                            if rule.3.is_none() {
                                return Err(missing("qos-level-name"));
                            }
                            raw.push(core::mem::take(&mut rule));
                        }
                    }
                    at = At::In(s, start, None);
                    continue;
                }
                let Some((key, value)) = body.split_once(':') else {
                    return Err(err(col, format!("{word:?}: expected \"key: value\"")));
                };
                let key = key.trim();
                let vcol = key_value_column(body);
                let value = value.trim();
                let bad = |reason: String| err(vcol, reason);
                match (s, key) {
                    (_, "use") => {}
                    ("port-groups", "name") => group.name = name(value).map_err(bad)?,
                    ("port-groups", "port-guid") => {
                        extend(&mut group.guids, ranges(value).map_err(bad)?).map_err(bad)?
                    }
                    ("port-groups", "port-name") => {
                        for item in value.split(',') {
                            let item = item.trim();
                            let parsed = item.rsplit_once("/P").and_then(|(d, n)| {
                                Some((String::from(d), u8::try_from(number(n)?).ok()?))
                            });
                            let Some(entry) = parsed.filter(|(d, _)| !d.is_empty()) else {
                                return Err(bad(format!(
                                    "{item:?}: expected \"NodeDescription/Pnum\""
                                )));
                            };
                            if group.port_names.len() >= MAX_ENTRIES {
                                return Err(bad(format!("more than {MAX_ENTRIES} port names")));
                            }
                            group.port_names.push(entry);
                        }
                    }
                    ("port-groups", "pkey") => {
                        let v = ranges(value).map_err(bad)?;
                        extend(&mut group.pkeys, pkeys(v).map_err(bad)?).map_err(bad)?
                    }
                    ("port-groups", "partition") => {
                        let n = name(value).map_err(bad)?;
                        if group.partitions.len() >= MAX_ENTRIES {
                            return Err(bad(format!("more than {MAX_ENTRIES} partitions")));
                        }
                        group.partitions.push(n);
                    }
                    ("port-groups", "node-type") => {
                        for t in value.split(',') {
                            let t = t.trim();
                            let n = &mut group.node_types;
                            match t.to_ascii_uppercase().as_str() {
                                "CA" => n.ca = true,
                                "SWITCH" => n.switch = true,
                                "ROUTER" => n.router = true,
                                "ALL" => n.all = true,
                                "SELF" => n.sm = true,
                                _ => {
                                    return Err(bad(format!(
                                        "{t:?}: not a node type (CA, SWITCH, ROUTER, ALL, SELF)"
                                    )))
                                }
                            }
                        }
                    }
                    ("qos-levels", "name") => level.name = name(value).map_err(bad)?,
                    ("qos-levels", "sl") => level.sl = Some(bounded(value, 0, 15).map_err(bad)?),
                    ("qos-levels", "mtu-limit") => {
                        level.mtu_limit = Some(bounded(value, 1, 5).map_err(bad)?)
                    }
                    ("qos-levels", "rate-limit") => {
                        level.rate_limit = Some(bounded(value, 2, 22).map_err(bad)?)
                    }
                    ("qos-levels", "packet-life") => {
                        level.packet_life = Some(bounded(value, 0, 63).map_err(bad)?)
                    }
                    ("qos-levels", "pkey") => {
                        let v = ranges(value).map_err(bad)?;
                        extend(&mut level.pkeys, pkeys(v).map_err(bad)?).map_err(bad)?
                    }
                    ("qos-levels", "path-bits") => {
                        let v = ranges(value).map_err(bad)?;
                        if v.iter().any(|&(_, b)| b > 127) {
                            return Err(bad(
                                "path bits past 127 (the offsets of LMC 7's 128 LIDs)".into(),
                            ));
                        }
                        extend(&mut level.path_bits, v).map_err(bad)?
                    }
                    ("qos-match-rules", "qos-class") => {
                        let v = ranges(value).map_err(bad)?;
                        if v.iter().any(|&(_, b)| b > 0xFFF) {
                            return Err(bad("a QoS class is past 12 bits".into()));
                        }
                        extend(&mut rule.0.qos_class, v).map_err(bad)?
                    }
                    ("qos-match-rules", "service-id") => {
                        extend(&mut rule.0.service_id, ranges(value).map_err(bad)?).map_err(bad)?
                    }
                    ("qos-match-rules", "pkey") => {
                        let v = ranges(value).map_err(bad)?;
                        extend(&mut rule.0.pkey, pkeys(v).map_err(bad)?).map_err(bad)?
                    }
                    ("qos-match-rules", "source" | "destination") => {
                        let list = if key == "source" {
                            &mut rule.1
                        } else {
                            &mut rule.2
                        };
                        for n in value.split(',') {
                            if list.len() >= MAX_ENTRIES {
                                return Err(bad(format!("more than {MAX_ENTRIES} groups")));
                            }
                            list.push(name(n).map_err(bad)?);
                        }
                    }
                    ("qos-match-rules", "qos-level-name") => rule.3 = Some(name(value).map_err(bad)?),
                    _ => {
                        return Err(err(
                            col,
                            format!("{key:?}: not a key of {entry}"),
                        ))
                    }
                }
            }
        }
    }
    if let At::In(s, start, open) = at {
        return Err(QosError {
            line: open.unwrap_or(start),
            column: 1,
            reason: match open {
                Some(_) => format!("this entry of {s} has no end"),
                None => format!("{s} has no end-{s}"),
            },
        });
    }
    // Names looked up, as OpenSM does once the file is read (ERR AC11,
    // AC12, AC13).
    for (mut r, src, dst, lvl) in raw {
        let at_line = r.line;
        let find_group = |n: &String, what: &str| {
            (p.groups.iter())
                .position(|g| g.name.eq_ignore_ascii_case(n))
                .ok_or_else(|| QosError {
                    line: at_line,
                    column: 1,
                    reason: format!("qos-match-rule: {what} port-group {n:?} not found"),
                })
        };
        r.source = src
            .iter()
            .map(|n| find_group(n, "source"))
            .collect::<Result<_, _>>()?;
        r.destination = (dst.iter())
            .map(|n| find_group(n, "destination"))
            .collect::<Result<_, _>>()?;
        let lvl = lvl.unwrap_or_default();
        r.level = (p.levels.iter())
            .position(|l| l.name.eq_ignore_ascii_case(&lvl))
            .ok_or_else(|| QosError {
                line: r.line,
                column: 1,
                reason: format!("qos-match-rule: qos-level {lvl:?} not found"),
            })?;
        p.match_rules.push(r);
    }
    if p.default_sl.is_none() && p.default_level().is_none() {
        // OpenSM's ERR AC10: without it, OpenSM drops the whole policy.
        return Err(QosError {
            line: text.lines().count().max(1),
            column: 1,
            reason: "the policy has no default (a qos-level named DEFAULT, or \"default : SL\" in qos-ulps)".into(),
        });
    }
    Ok(p)
}

/// The column where the value of a `key: value` line starts.
fn key_value_column(body: &str) -> usize {
    let colon = body.find(':').unwrap_or(0);
    let rest = &body[colon + 1..];
    colon + 2 + (rest.len() - rest.trim_start().len())
}

/// A name: the value, trimmed, not empty, at most 256 bytes.
fn name(value: &str) -> Result<String, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("an empty name".into());
    }
    if v.len() > 256 {
        return Err("a name longer than 256 bytes".into());
    }
    Ok(v.into())
}

/// A number within `lo..=hi`.
fn bounded(value: &str, lo: u64, hi: u64) -> Result<u8, String> {
    number(value)
        .filter(|v| (lo..=hi).contains(v))
        .map(|v| v as u8)
        .ok_or_else(|| format!("{value:?} is not {lo}-{hi}"))
}

/// P_Key ranges, each within 16 bits, as their low 15 bits.
fn pkeys(v: Vec<(u64, u64)>) -> Result<Vec<(u64, u64)>, String> {
    if v.iter().any(|&(_, b)| b > 0xFFFF) {
        return Err("a P_Key is past 16 bits".into());
    }
    let mut out = Vec::with_capacity(v.len());
    for (a, b) in v {
        let (lo, hi) = (a & 0x7FFF, b & 0x7FFF);
        if b - a >= 0x7FFF {
            out.push((0, 0x7FFF));
        } else if lo <= hi {
            out.push((lo, hi));
        } else {
            // Across the membership bit (0x7FF0-0x8005): both ends.
            out.push((lo, 0x7FFF));
            out.push((0, hi));
        }
    }
    Ok(out)
}

/// Adds `more` to `list`, at most [`MAX_ENTRIES`] in all.
fn extend(list: &mut Vec<(u64, u64)>, more: Vec<(u64, u64)>) -> Result<(), String> {
    if list.len() + more.len() > MAX_ENTRIES {
        return Err(format!("more than {MAX_ENTRIES} values"));
    }
    list.extend(more);
    Ok(())
}

/// A rule `head : SL` of `qos-ulps` (`body` is the line without its
/// comment; `col` is where its text starts). Errors carry their column.
fn ulp_rule(body: &str, col: usize, line: usize, p: &mut QosPolicy) -> Result<(), (usize, String)> {
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
            UlpMatch::PKey(pkeys(v).map_err(|e| (rest_col, e))?)
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
            qos_class: None,
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
        assert!(e.reason.contains("no default"), "{e}");
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
        // A P_Key range across the membership bit holds both ends.
        let p =
            parse_policy("qos-ulps\n any, pkey 0x7ff0-0x8005 : 3\n default : 0\nend-qos-ulps\n")
                .unwrap();
        assert_eq!(
            p.rules[0].matches,
            UlpMatch::PKey([(0x7FF0, 0x7FFF), (0, 5)].into())
        );
        assert_eq!(p.sl_for(&q(None, Some(0x8003), 1, 2)), Some(3));
        assert_eq!(p.sl_for(&q(None, Some(0x7FF1), 1, 2)), Some(3));
        assert_eq!(p.sl_for(&q(None, Some(0x0006), 1, 2)), Some(0));
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
        // The full policy's values in all: 17 groups of 4,096 GUIDs pass
        // each group's bound but not the policy's.
        // (A line holds 256 values at most, as a qos-ulps rule does.)
        let line: String = (1..=256).map(|g| format!("{g},")).collect();
        let line = format!(" port-guid: {}\n", line.trim_end_matches(','));
        let group = |i: usize| {
            format!(
                "port-group\n name: G{i}\n{}end-port-group\n",
                line.repeat(16)
            )
        };
        let groups = |n: usize| (0..n).map(group).collect::<String>();
        let lvl = "qos-levels\nqos-level\nname: DEFAULT\nsl: 0\nend-qos-level\nend-qos-levels\n";
        let p = parse_policy(&format!(
            "port-groups\n{}end-port-groups\n{lvl}",
            groups(16)
        ))
        .unwrap();
        assert_eq!(p.groups.len(), 16);
        let e = parse_policy(&format!(
            "port-groups\n{}end-port-groups\n{lvl}",
            groups(17)
        ))
        .unwrap_err();
        assert!(e.reason.contains("values in all"), "{e}");
        assert_eq!(e.line, 17 * 19 + 1, "{e}");
    }

    /// OpenSM's example of a full policy (doc/QoS_management_in_OpenSM.txt),
    /// every keyword, with the ULP rules after it.
    const FULL: &str = "\
port-groups
    port-group # using port GUIDs
        name: Storage
        use: SRP Targets
        port-guid: 0x10000000000001, 0x10000000000005-0x1000000000FFFA
        port-guid: 0x1000000000FFFF
    end-port-group
    port-group
        name: Virtual Servers
        port-name: vs1 HCA-1/P1, vs2 HCA-1/P1
    end-port-group
    port-group
        name: Partitions
        partition: Part1
        pkey: 0x1234
    end-port-group
    port-group
        name: CAs and SM
        node-type: CA, SELF
    end-port-group
end-port-groups
qos-setup
    vlarb-tables
        vlarb-scope
            group: Storage
            vlarb-high: 0:255,1:127
        end-vlarb-scope
    end-vlarb-tables
end-qos-setup
qos-levels
    qos-level
        name: DEFAULT
        use: default QoS Level
        sl: 0
    end-qos-level
    qos-level
        name: WholeSet
        sl: 1
        mtu-limit: 4
        rate-limit: 5
        pkey: 0x1234
        packet-life: 8
    end-qos-level
end-qos-levels
qos-match-rules
    qos-match-rule
        use: by QoS class
        qos-class: 7-9,11
        qos-level-name: WholeSet
    end-qos-match-rule
    qos-match-rule
        use: Storage targets
        destination: Storage
        service-id: 0x10000000000001, 0x10000000000008-0x10000000000FFF
        qos-level-name: WholeSet
    end-qos-match-rule
    qos-match-rule
        source: Storage
        use: match by source group only
        qos-level-name: DEFAULT
    end-qos-match-rule
    qos-match-rule
        use: match by all parameters
        qos-class: 7-9,11
        source: Virtual Servers
        destination: Storage
        service-id: 0x0000000000010000-0x000000000001FFFF
        pkey: 0x0F00-0x0FFF
        qos-level-name: wholeset
    end-qos-match-rule
end-qos-match-rules
qos-ulps
    rds : 2
end-qos-ulps
";

    fn port<'a>(guid: u64, t: NodeType, desc: &'a str, keys: &'a [u16]) -> PortFacts<'a> {
        PortFacts {
            guid,
            node_type: t,
            description: desc,
            port: 1,
            sm: false,
            pkeys: keys,
        }
    }

    #[test]
    fn the_full_example_reads_and_matches_as_opensm_matches() {
        let p = parse_policy(FULL).unwrap();
        assert_eq!(
            (p.groups.len(), p.levels.len(), p.match_rules.len()),
            (4, 2, 4)
        );
        assert!(p.setup_skipped);
        assert_eq!(p.groups[0].guids.len(), 3);
        assert_eq!(p.groups[1].port_names[1], ("vs2 HCA-1".into(), 1));
        let whole = &p.levels[1];
        assert_eq!(
            (
                whole.sl,
                whole.mtu_limit,
                whole.rate_limit,
                whole.packet_life
            ),
            (Some(1), Some(4), Some(5), Some(8))
        );
        // "wholeset" names WholeSet: names are compared without case.
        assert_eq!(p.match_rules[3].level, 1);
        let part = |n: &str| (n == "Part1").then_some(0x0042u16);
        let keys = [0xFFFFu16];
        let storage = port(0x10000000000007, NodeType::ChannelAdapter, "st", &keys);
        let vs1 = port(0x2, NodeType::ChannelAdapter, "vs1 HCA-1", &keys);
        let sw = port(0x3, NodeType::Switch, "sw", &keys);
        let name = |q: &PathQuery, a: &PortFacts, b: &PortFacts| {
            p.level_for(q, a, b, &part).map(|l| (l.name, l.sl))
        };
        let none = PathQuery::default();
        // No rule: DEFAULT.
        assert_eq!(name(&none, &vs1, &sw), Some(("DEFAULT", Some(0))));
        // A QoS class matches only where the mask selects it.
        let class = PathQuery {
            qos_class: Some(8),
            ..none
        };
        assert_eq!(name(&class, &vs1, &sw), Some(("WholeSet", Some(1))));
        // To Storage: the second rule needs a service ID.
        assert_eq!(name(&none, &vs1, &storage), Some(("DEFAULT", Some(0))));
        let sid = PathQuery {
            service_id: Some(0x10000000000009),
            ..none
        };
        assert_eq!(name(&sid, &vs1, &storage), Some(("WholeSet", Some(1))));
        // From Storage: the third rule (DEFAULT), before the ULP rules.
        let rds = PathQuery {
            service_id: Some(0x10648CA),
            ..none
        };
        assert_eq!(name(&rds, &storage, &sw), Some(("DEFAULT", Some(0))));
        // The ULP rule where no full rule matches.
        assert_eq!(name(&rds, &vs1, &sw), Some(("qos-ulps", Some(2))));
        // The fourth rule needs every criterion: a class outside 7-9,11
        // fails it (the first rule shadows it for the others).
        let all = PathQuery {
            service_id: Some(0x10005),
            pkey: Some(0x8F05),
            qos_class: Some(3),
            ..none
        };
        assert_eq!(name(&all, &vs1, &storage), Some(("DEFAULT", Some(0))));
        let vs3 = port(0x2, NodeType::ChannelAdapter, "vs3 HCA-1", &keys);
        // Groups by node type, SELF, P_Key and partition name.
        let g = &p.groups;
        assert!(QosPolicy::in_group(&g[3], &vs3, &part));
        assert!(!QosPolicy::in_group(&g[3], &sw, &part));
        let sm = PortFacts { sm: true, ..sw };
        assert!(QosPolicy::in_group(&g[3], &sm, &part));
        let k42 = [0xFFFFu16, 0x0042];
        let k1234 = [0x7FFFu16, 0x9234];
        assert!(!QosPolicy::in_group(&g[2], &vs3, &part));
        assert!(QosPolicy::in_group(
            &g[2],
            &port(9, NodeType::Switch, "", &k42),
            &part
        ));
        assert!(QosPolicy::in_group(
            &g[2],
            &port(9, NodeType::Switch, "", &k1234),
            &part
        ));
        // A level's P_Keys.
        assert!(Level::of(whole).allows(0x9234) && !Level::of(whole).allows(0xFFFF));
        assert!(Level::of(&p.levels[0]).allows(0xFFFF));
    }

    #[test]
    fn a_full_policy_opensm_would_refuse_is_refused_with_its_place() {
        let bad = |text: &str| parse_policy(text).unwrap_err();
        let lvl =
            "qos-levels\n qos-level\n  name: DEFAULT\n  sl: 0\n end-qos-level\nend-qos-levels\n";
        // A rule naming a group or a level nobody defined (ERR AC12, AC11).
        let e = bad(&format!(
            "{lvl}qos-match-rules\n qos-match-rule\n  source: Nobody\n  qos-level-name: DEFAULT\n end-qos-match-rule\nend-qos-match-rules\n"
        ));
        assert_eq!(e.line, 8, "{e}");
        assert!(e.reason.contains("\"Nobody\" not found"), "{e}");
        let e = bad(&format!(
            "{lvl}qos-match-rules\n qos-match-rule\n  qos-level-name: Gold\n end-qos-match-rule\nend-qos-match-rules\n"
        ));
        assert!(e.reason.contains("\"Gold\" not found"), "{e}");
        // Values out of range, with the value's column.
        let e = bad(
            "qos-levels\n qos-level\n  name: DEFAULT\n  sl:   16\n end-qos-level\nend-qos-levels\n",
        );
        assert_eq!((e.line, e.column), (4, 9), "{e}");
        let e = bad("qos-levels\n qos-level\n  name: DEFAULT\n  mtu-limit: 6\n end-qos-level\nend-qos-levels\n");
        assert!(e.reason.contains("1-5"), "{e}");
        let e = bad("qos-levels\n qos-level\n  name: DEFAULT\n  path-bits: 1-128\n end-qos-level\nend-qos-levels\n");
        assert!(e.reason.contains("past 127"), "{e}");
        let e = bad("port-groups\n port-group\n  name: A\n  node-type: HOST\n end-port-group\nend-port-groups\n");
        assert_eq!((e.line, e.column), (4, 14), "{e}");
        let e = bad("port-groups\n port-group\n  name: A\n  port-name: hca1\n end-port-group\nend-port-groups\n");
        assert!(e.reason.contains("Pnum"), "{e}");
        let e =
            bad("port-groups\n port-group\n  name: A\n  sl: 1\n end-port-group\nend-port-groups\n");
        assert_eq!((e.line, e.column), (4, 3), "{e}");
        // Structure: an entry without its name or end, a keyword out of
        // place, a second DEFAULT.
        let e = bad("qos-levels\n qos-level\n  sl: 1\n end-qos-level\nend-qos-levels\n");
        assert_eq!(e.line, 2, "{e}");
        let e = bad("qos-levels\n qos-level\n  name: DEFAULT\n");
        assert!(e.reason.contains("no end"), "{e}");
        let e = bad("qos-levels\n port-group\nend-qos-levels\n");
        assert_eq!((e.line, e.column), (2, 2), "{e}");
        let e = bad(&format!("{lvl}{lvl}"));
        assert!(e.reason.contains("second"), "{e}");
        // The shortest full policy, and qos-setup skipped whole.
        let p = parse_policy(&format!(
            "qos-setup\n anything: at all\nend-qos-setup\n{lvl}"
        ))
        .unwrap();
        assert!(p.setup_skipped && p.rules.is_empty());
        assert_eq!(p.default_level().unwrap().sl, Some(0));
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
                "port-group", "end-port-group", "end-port-groups", "name: A",
                "name: DEFAULT", "qos-levels", "qos-level", "end-qos-level",
                "end-qos-levels", "sl: 3", "pkey: 0x8001-0x7ff0", "qos-match-rules",
                "qos-match-rule", "end-qos-match-rule", "end-qos-match-rules",
                "source: A", "destination: B", "qos-level-name: default",
                "node-type: CA, SELF", "port-name: h/P1", "qos-setup", "end-qos-setup",
            ]), 0..80)
        ) {
            let text: String = words.concat();
            let lines = text.split('\n').count();
            match parse_policy(&text) {
                Err(e) => {
                    proptest::prop_assert!(e.line >= 1 && e.line <= lines, "{}", e);
                    proptest::prop_assert!(e.column >= 1 && e.column <= text.len() + 1, "{}", e);
                }
                Ok(p) => {
                    proptest::prop_assert!(
                        p.default_sl.is_some_and(|s| s <= 15) || p.default_level().is_some()
                    );
                    for r in &p.match_rules {
                        proptest::prop_assert!(r.level < p.levels.len());
                        proptest::prop_assert!(
                            r.source.iter().chain(&r.destination).all(|&g| g < p.groups.len())
                        );
                    }
                    for l in &p.levels {
                        proptest::prop_assert!(l.pkeys.iter().all(|&(a, b)| a <= b && b <= 0x7FFF));
                    }
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

    /// A group's SL: OpenSM's example gives IPoIB's partitions theirs by
    /// P_Key (0x0001: 0, the default partition: 4, 0x0ABC by `any`) and
    /// the default to the rest; rules that need a port, a ServiceID or a
    /// QoS class are passed over, a rule by P_Key alone or by nothing is
    /// not, and a level without an SL gives none.
    #[test]
    fn groups_take_the_sl_of_their_partition() {
        let p = parse_policy(EXAMPLE).unwrap();
        assert_eq!(
            [0x0001, 0x7FFF, 0xFFFF, 0x8ABC, 0x0042].map(|k| p.group_sl(k)),
            [Some(0), Some(4), Some(4), Some(6), Some(0)]
        );
        let full = |rules: &str| {
            parse_policy(&alloc::format!(
                "port-groups\n port-group\n  name: A\n  node-type: CA\n end-port-group\nend-port-groups\n\
                 qos-levels\n qos-level\n  name: DEFAULT\n  sl: 1\n end-qos-level\n \
                 qos-level\n  name: Two\n  sl: 2\n end-qos-level\n \
                 qos-level\n  name: Bare\n  mtu-limit: 4\n end-qos-level\nend-qos-levels\n\
                 qos-match-rules\n{rules}end-qos-match-rules\n"
            ))
            .unwrap()
        };
        let rule = |what: &str, level: &str| {
            alloc::format!(
                " qos-match-rule\n  {what}\n  qos-level-name: {level}\n end-qos-match-rule\n"
            )
        };
        for (first, want) in [
            ("source: A", Some(1)),
            ("destination: A", Some(1)),
            ("service-id: 0x10", Some(1)),
            ("qos-class: 3", Some(1)),
            ("pkey: 0x10-0x20", Some(2)),
            ("pkey: 0x30", Some(1)),
        ] {
            assert_eq!(full(&rule(first, "Two")).group_sl(0x8015), want, "{first}");
        }
        // A level without an SL: none from the policy.
        assert_eq!(full(&rule("pkey: 0x15", "Bare")).group_sl(0x15), None);
    }
}
