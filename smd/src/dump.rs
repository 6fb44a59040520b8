//! What the SM leaves on disk for operators and tools, in OpenSM's
//! formats: `guid2lid` (its LID cache, read again at start so that LIDs
//! survive a restart), `guid2mkey` (the M_Key each port holds, read again
//! at start so that a new `m_key` can still reach the ports an old one
//! protects), `opensm-subnet.lst` (every link, both ends),
//! `opensm-lfts.dump` and `opensm.fdbs` (every switch's unicast table, the
//! second with each route's hops), `opensm-lid-matrix.dump` (every
//! switch's hops to every LID out of every port), `opensm.mcfdbs` (every
//! switch's multicast table), `opensm-sl2vl.dump` (the SL-to-VL tables
//! written under QoS), `opensm-updn-roots.dump` (up*/down*'s roots),
//! `opensm-ftree-ca-order.dump` (the fat-tree engine's CA numbering) and
//! the SA's `opensm-sa.dump` (its groups, services and subscriptions,
//! read back with `--sa-db`).
//!
//! The layouts follow OpenSM 3.3's `osm_dump.c` and `osm_db_files.c`:
//! nodes and switches in the order of OpenSM's GUID maps (keyed by the
//! GUID in network byte order, so sorted by the byte-swapped value), the
//! same field widths and words. Tests compare each file with OpenSM's own
//! dump of the same fabric.

use crate::names::NodeNames;
use smi::sm::{routing, Sm, SmNode};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The largest `guid2lid` file read (a subnet's 49,151 unicast LIDs take
/// under 2 MiB in OpenSM's layout).
pub const MAX_GUID2LID_BYTES: usize = 16 << 20;

/// The highest unicast LID.
const UNICAST_MAX: u16 = 0xBFFF;

/// OpenSM's map order: by the GUID as its bytes read on a little-endian
/// machine (the key is the GUID in network byte order).
fn map_order(guid: u64) -> u64 {
    guid.swap_bytes()
}

/// A node as OpenSM prints it (its `print_desc`): its name in the node
/// name map, else its description cleaned as OpenSM cleans it.
pub(crate) fn desc(names: &NodeNames, n: &SmNode) -> String {
    let raw = n.description.as_ref().map_or([0; 64], |d| d.node_string.0);
    names.print_desc(n.info.node_guid.0, &raw)
}

/// The alive nodes in OpenSM's map order, with their indexes.
fn ordered(sm: &Sm) -> Vec<(usize, &SmNode)> {
    let mut v: Vec<(usize, &SmNode)> = sm
        .nodes()
        .iter()
        .enumerate()
        .filter(|(_, n)| n.alive)
        .collect();
    v.sort_by_key(|(_, n)| map_order(n.info.node_guid.0));
    v
}

/// Every LID in use (each of a port's `2^LMC`): the port GUID, the node
/// and its description.
fn lid_owners(sm: &Sm) -> BTreeMap<u16, (u64, usize)> {
    let mut m = BTreeMap::new();
    let ranges = sm.lid_ranges_by_guid();
    for (i, n) in sm
        .nodes()
        .iter()
        .enumerate()
        .filter(|(_, n)| n.alive && n.lid != 0)
    {
        let guid = n.info.port_guid.0;
        let top = ranges.get(&guid).map_or(n.lid, |r| r.1 .0);
        for l in n.lid..=top {
            m.insert(l, (guid, i));
        }
        for v in n.vfs.iter().filter(|v| v.lid != 0 && v.guid != 0) {
            m.insert(v.lid, (v.guid, i));
        }
    }
    m
}

/// OpenSM's `guid2lid`: each port GUID with its LID range (`0x… 0x… 0x…`
/// and an empty line), by GUID.
pub fn guid2lid(sm: &Sm) -> String {
    let mut s = String::new();
    for (g, (l, top)) in sm.lid_ranges_by_guid() {
        let _ = write!(s, "0x{g:016x} 0x{:04x} 0x{:04x}\n\n", l.0, top.0);
    }
    s
}

/// A cache read at start: values by key, and the entries skipped.
pub type Cache<K, V> = (BTreeMap<K, V>, Vec<Guid2LidWarning>);

/// A LID cache read: LIDs by key, and the entries skipped.
pub type LidCache<K> = Cache<K, mad_core::Lid>;

/// A `guid2lid` file read: LIDs by port GUID, and the entries skipped.
pub type Guid2Lid = LidCache<u64>;

/// An entry of a `guid2lid` file that was skipped, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guid2LidWarning {
    /// Line, from 1.
    pub line: usize,
    /// Why it was skipped.
    pub what: String,
}

/// A number as OpenSM's reader takes it (`strtoul` with base 0: `0x` hex,
/// or decimal).
fn number(w: &str) -> Option<u64> {
    match w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => w.parse().ok(),
    }
}

/// The entries of a cache file: each line neither empty nor a `#`
/// comment, with its number (from 1), its text and its first `max`
/// words.
fn cache_lines(text: &str, max: usize) -> impl Iterator<Item = (usize, &str, Vec<&str>)> {
    text.lines().enumerate().filter_map(move |(k, l)| {
        let l = l.trim();
        (!l.is_empty() && !l.starts_with('#'))
            .then(|| (k + 1, l, l.split_whitespace().take(max).collect()))
    })
}

/// The entries of a cache file skipped, at most 100 named.
#[derive(Default)]
struct Skipped(Vec<Guid2LidWarning>);

impl Skipped {
    fn push(&mut self, line: usize, what: String) {
        if self.0.len() < 100 {
            self.0.push(Guid2LidWarning { line, what });
        }
    }

    /// A line that is not `shape`: named with its first 60 characters.
    fn malformed(&mut self, line: usize, text: &str, shape: &str) {
        let shown: String = text.chars().take(60).collect();
        self.push(line, format!("not {shape}: {shown:?}"));
    }
}

/// The lines of a LID cache: each not empty and not a `#` comment split
/// into three numbers that `entry` turns into a key and a LID, or the
/// reason it is skipped (`shape` names the three when they are not
/// numbers). A key given twice, or a LID already taken, is skipped too;
/// `name` names a key in those warnings. At most 100 warnings are kept.
fn parse_lid_lines<K: Ord + Copy>(
    text: &str,
    shape: &str,
    entry: impl Fn(u64, u64, u64) -> Result<(K, u16), String>,
    name: impl Fn(&K) -> String,
) -> (BTreeMap<K, mad_core::Lid>, Vec<Guid2LidWarning>) {
    let mut lids = BTreeMap::new();
    let mut taken: BTreeMap<u16, K> = BTreeMap::new();
    let mut skipped = Skipped::default();
    for (k, line, words) in cache_lines(text, 4) {
        let mut warn = |what: String| skipped.push(k, what);
        let nums: Vec<Option<u64>> = words.iter().map(|w| number(w)).collect();
        let [Some(a), Some(b), Some(c)] = nums.as_slice() else {
            skipped.malformed(k, line, shape);
            continue;
        };
        match entry(*a, *b, *c) {
            Err(why) => warn(why),
            Ok((key, lid)) => {
                if let Some(other) = taken.get(&lid) {
                    warn(format!(
                        "LID {lid:#06x} of {} already given to {}",
                        name(&key),
                        name(other)
                    ));
                } else if let std::collections::btree_map::Entry::Vacant(e) = lids.entry(key) {
                    taken.insert(lid, key);
                    e.insert(mad_core::Lid(lid));
                } else {
                    warn(format!("{} given twice", name(&key)));
                }
            }
        }
    }
    (lids, skipped.0)
}

/// Reads a `guid2lid` file: each entry a port GUID and its LID range,
/// kept as its first LID. An entry that is not three numbers, a GUID of
/// 0, a range outside 1..=0xBFFF or that is not `2^n` LIDs (n ≤ 7, as an
/// LMC gives) starting at a multiple of `2^n`, a GUID given twice or a
/// LID already taken is skipped with a warning, as OpenSM drops such
/// entries: the port then gets a LID as if it were new. (A range that
/// does not suit the SM's own LMC is checked where the LID is given: a
/// port keeps it only when aligned and free for its `2^LMC` LIDs.)
pub fn parse_guid2lid(text: &str) -> Guid2Lid {
    parse_lid_lines(
        text,
        "a GUID and two LIDs",
        |guid, min, max| {
            if guid == 0 {
                Err("GUID 0".into())
            } else if min == 0
                || max > u64::from(UNICAST_MAX)
                || max < min
                || !(max - min + 1).is_power_of_two()
                || max - min + 1 > 128
                || min % (max - min + 1) != 0
            {
                Err(format!(
                    "LID range {min:#x}..={max:#x}: not the unicast LIDs of an LMC"
                ))
            } else {
                Ok((guid, min as u16))
            }
        },
        |g| format!("GUID {g:#018x}"),
    )
}

/// ibkit's `vf2lid`, beside `guid2lid` in the cache directory: each VF
/// of a vSwitch hypervisor with a LID, as `0xPFPORTGUID VF 0xLID`, one a
/// line, by PF then VF. (OpenSM has no vports, so nothing of it goes in
/// `guid2lid`, which names a VF only by the vGUID of its VM.)
pub fn vf2lid(sm: &Sm) -> String {
    let mut s = String::new();
    for ((g, vf), l) in sm.vf_lids() {
        let _ = writeln!(s, "0x{g:016x} {vf} 0x{:04x}", l.0);
    }
    s
}

/// A `vf2lid` file read: LIDs by (PF port GUID, VF), and the entries
/// skipped.
pub type Vf2Lid = LidCache<(u64, u16)>;

/// Reads a `vf2lid` file ([`vf2lid`]'s layout). An entry that is not a
/// GUID, a VF and a LID, a GUID of 0, a VF outside 1..=65535, a LID
/// outside 1..=0xBFFF, a VF given twice or a LID already taken is skipped
/// with a warning (at most 100 named); the VF then gets a LID as if new.
pub fn parse_vf2lid(text: &str) -> Vf2Lid {
    parse_lid_lines(
        text,
        "a GUID, a VF and a LID",
        |guid, vf, lid| {
            if guid == 0 {
                Err("GUID 0".into())
            } else if vf == 0 || vf > 0xFFFF {
                Err(format!("VF {vf}: not 1-65535"))
            } else if lid == 0 || lid > u64::from(UNICAST_MAX) {
                Err(format!("LID {lid:#x}: not a unicast LID"))
            } else {
                Ok(((guid, vf as u16), lid as u16))
            }
        },
        |(g, v)| format!("VF {v} of {g:#018x}"),
    )
}

/// Reads the `vf2lid` file `path`, bounded: `Ok(None)` when there is
/// none yet.
pub fn read_vf2lid(path: &Path) -> Result<Option<Vf2Lid>, String> {
    let text = read_capped(path, MAX_GUID2LID_BYTES)?;
    Ok(text.map(|t| parse_vf2lid(&t)))
}

/// Reads the `guid2lid` file `path`, bounded: `Ok(None)` when there is
/// none yet.
pub fn read_guid2lid(path: &Path) -> Result<Option<Guid2Lid>, String> {
    let text = read_capped(path, MAX_GUID2LID_BYTES)?;
    Ok(text.map(|t| parse_guid2lid(&t)))
}

/// The text of the file `path` (not UTF-8 read lossily), at most `max`
/// bytes: `Ok(None)` when there is no such file.
fn read_capped(path: &Path, max: usize) -> Result<Option<String>, String> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut bytes = Vec::new();
    f.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() > max {
        return Err(format!("{}: longer than {max} bytes", path.display()));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The largest SA database read (`opensm-sa.dump`: a subnet's 4,096
/// groups and 65,536 memberships take about 8 MiB in OpenSM's layout).
pub const MAX_SA_DB_BYTES: usize = 64 << 20;

/// Reads and parses the SA database `path` (OpenSM's `opensm-sa.dump`),
/// bounded: `Ok(None)` when there is none; a broken one refused with its
/// line.
pub fn read_sa_db(path: &Path) -> Result<Option<sa::db::SaDb>, String> {
    let Some(text) = read_capped(path, MAX_SA_DB_BYTES)? else {
        return Ok(None);
    };
    sa::db::SaDb::parse(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes the SA database `text` as `dir/opensm-sa.dump`, whole, mode
/// 0600 as OpenSM writes it (it holds the services' keys); with `sync`,
/// synced to the disk before it replaces the old one, and the directory
/// after.
pub fn write_sa_db(dir: &Path, text: &str, sync: bool) -> Result<(), String> {
    write_whole_mode(dir, "opensm-sa.dump", text, 0o600, sync)
}

/// OpenSM's node type words.
fn type_str(n: &SmNode) -> &'static str {
    match u8::from(n.info.node_type) {
        1 => "Channel Adapter",
        2 => "Switch",
        3 => "Router",
        _ => "Unknown",
    }
}

/// OpenSM's `opensm-lfts.dump`: each switch's LFT up to the highest LID,
/// a line per routed LID naming its owner.
pub fn lfts(sm: &Sm, names: &NodeNames) -> String {
    let owners = lid_owners(sm);
    let max = sm.max_lid();
    let mut s = String::new();
    for (i, n) in ordered(sm).into_iter().filter(|(_, n)| n.is_switch()) {
        let _ = writeln!(
            s,
            "Unicast lids [0-{max}] of switch Lid {} guid 0x{:016x} ('{}'):",
            n.lid,
            n.info.node_guid.0,
            desc(names, n)
        );
        for lid in 1..=max {
            let port = sm.lft_entry(i, lid);
            if usize::from(port) > usize::from(n.info.num_ports) {
                continue;
            }
            let _ = write!(s, "0x{lid:04x} {port:03} # ");
            match owners.get(&lid) {
                Some(&(guid, o)) => {
                    let on = &sm.nodes()[o];
                    let _ = writeln!(
                        s,
                        "{} portguid 0x{guid:016x}: '{}'",
                        type_str(on),
                        desc(names, on)
                    );
                }
                None => s.push_str("unknown node and type\n"),
            }
        }
        let _ = writeln!(s, "{max} lids dumped");
    }
    s
}

/// OpenSM's `opensm.fdbs`: for each switch and each LID up to the highest,
/// the port its LFT sends the LID out of, the hops to the LID's port that
/// way, and whether no other port is shorter (`yes`; else the fewest hops
/// and the lowest port that has them). A LID no port owns, or that the
/// switch drops, is `UNREACHABLE`. Hops count as OpenSM's tables do: to a
/// switch, the cables to it (0 to itself); to a CA, one more for its own
/// cable.
pub fn fdbs(sm: &Sm) -> String {
    let h = HopTable::new(sm);
    let max = sm.max_lid();
    let mut s = String::new();
    for (i, n) in ordered(sm).into_iter().filter(|(_, n)| n.is_switch()) {
        let _ = write!(
            s,
            "dump_ucast_routes: Switch 0x{:016x}\nLID    : Port : Hops : Optimal\n",
            n.info.node_guid.0
        );
        for lid in 1..=max {
            let _ = write!(s, "0x{lid:04X} : ");
            let port = sm.lft_entry(i, lid);
            let best = h.least(i, lid);
            if port > n.info.num_ports || best.is_none() {
                s.push_str("UNREACHABLE\n");
                continue;
            }
            let Some(hops) = h.via(i, lid, port) else {
                let _ = writeln!(s, "{port:03}  : HOPS UNKNOWN");
                continue;
            };
            let _ = write!(s, "{port:03}  : {hops:02}   : ");
            match best {
                Some(best) if hops > best => {
                    let p = (0..=n.info.num_ports).find(|&p| h.via(i, lid, p) == Some(best));
                    let p = p.unwrap_or(port);
                    let _ = writeln!(s, "No {best} hop path possible via port {p}!");
                }
                _ => s.push_str("yes\n"),
            }
        }
    }
    s
}

/// OpenSM's `opensm-lid-matrix.dump`: OpenSM's hop matrix, which holds
/// the switches' LIDs only: for each switch and each switch LID it can
/// reach, the fewest hops (in port 0's column) and the hops out of each
/// port 1..=N (`ff`: none that way), and the GUID of the switch's port 0.
pub fn lid_matrix(sm: &Sm) -> String {
    let h = HopTable::new(sm);
    let owners = lid_owners(sm);
    let max = sm.max_lid();
    let mut s = String::new();
    for (i, n) in ordered(sm).into_iter().filter(|(_, n)| n.is_switch()) {
        let _ = writeln!(s, "Switch: guid 0x{:016x}", n.info.node_guid.0);
        for lid in 1..=max {
            let Some(least) = h.least(i, lid).filter(|_| h.is_switch_lid(lid)) else {
                continue;
            };
            let _ = write!(s, "0x{lid:04x}: {:02x}", least.min(0xFF));
            for p in 1..=n.info.num_ports {
                let hops = h.via(i, lid, p).map_or(0xFF, |x| x.min(0xFF));
                let _ = write!(s, " {hops:02x}");
            }
            if let Some(&(guid, _)) = owners.get(&lid) {
                let _ = write!(s, " # portguid 0x{guid:016x}");
            }
            s.push('\n');
        }
    }
    s
}

/// Hops from a switch to a LID, as OpenSM's hop tables count them: to a
/// switch, the cables to it (0 to itself); to a CA, one more for its own
/// cable; out of a given port, that port's cable and then the fewest.
struct HopTable<'a> {
    g: &'a routing::Graph,
    dist: Vec<Vec<u16>>,
    /// Each routed LID: the switch (graph index) it hangs off, and the
    /// port there (0: the switch's own).
    at: BTreeMap<u16, (usize, u8)>,
    /// Node index → graph index, for the switches routed.
    graph_of: BTreeMap<usize, usize>,
}

impl<'a> HopTable<'a> {
    fn new(sm: &'a Sm) -> HopTable<'a> {
        let g = sm.routing_graph();
        HopTable {
            g,
            dist: routing::distances(g),
            at: (routing::destinations(g).into_iter())
                .map(|(lid, s, p)| (lid, (s, p)))
                .collect(),
            graph_of: (sm.graph_switches().iter().enumerate())
                .map(|(k, &i)| (i, k))
                .collect(),
        }
    }

    /// Whether `lid` is a switch's own (its port 0's).
    fn is_switch_lid(&self, lid: u16) -> bool {
        self.at.get(&lid).is_some_and(|&(_, q)| q == 0)
    }

    /// The fewest hops from switch `node` to `lid`; `None`: it cannot
    /// reach it (or no port owns it).
    fn least(&self, node: usize, lid: u16) -> Option<u16> {
        let k = *self.graph_of.get(&node)?;
        let &(to, q) = self.at.get(&lid)?;
        let d = self.dist[k][to];
        (d != u16::MAX).then(|| d + u16::from(q != 0))
    }

    /// The hops from switch `node` to `lid` out of port `p`; `None`: not
    /// that way.
    fn via(&self, node: usize, lid: u16, p: u8) -> Option<u16> {
        let k = *self.graph_of.get(&node)?;
        let &(to, q) = self.at.get(&lid)?;
        if p == 0 {
            return (k == to && q == 0).then_some(0);
        }
        if k == to && p == q {
            return Some(1);
        }
        match self.g.ports[k].get(usize::from(p)) {
            Some(&routing::PortTo::Switch(m, _)) => {
                let d = self.dist[m][to];
                (d != u16::MAX).then(|| d + 1 + u16::from(q != 0))
            }
            _ => None,
        }
    }
}

/// OpenSM's `opensm-sl2vl.dump`, under a QoS policy (`None` without one,
/// as OpenSM writes it only then): each port by GUID, with the SL-to-VL
/// tables the SM wrote: a switch's for every input port of each cabled
/// output port, a CA's its one; all zero where the SM wrote none (as
/// OpenSM prints its empty cache).
pub fn sl2vl(sm: &Sm, names: &NodeNames) -> Option<String> {
    sm.qos()?;
    let sep = "#--------------------------------------------------------";
    let mut nodes: Vec<(usize, &SmNode)> = (sm.nodes().iter().enumerate())
        .filter(|(_, n)| n.alive && n.info.num_ports > 0)
        .collect();
    nodes.sort_by_key(|(_, n)| map_order(n.info.port_guid.0));
    let mut s = String::new();
    let line = |s: &mut String, input: u8, output: u8, t: [u8; 16]| {
        let _ = write!(s, "{input:<3} {output:<3} :");
        for vl in t {
            let _ = write!(s, " {vl:<2}");
        }
        s.push('\n');
    };
    for (i, n) in nodes {
        let _ = writeln!(
            s,
            "{} 0x{:016x}, base LID {}, \"{}\"",
            type_str(n),
            n.info.port_guid.0,
            n.lid,
            desc(names, n)
        );
        let _ = writeln!(
            s,
            "#in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15\n{sep}"
        );
        let table = |input: u8, output: u8| {
            (sm.subnet())
                .sl2vl_table(smi::sm::NodeId(i), input, output)
                .unwrap_or([0; 16])
        };
        if n.is_switch() {
            for output in 0..=n.info.num_ports {
                if n.ports
                    .get(usize::from(output))
                    .is_none_or(|p| p.peer.is_none())
                {
                    continue;
                }
                for input in 0..=n.info.num_ports {
                    line(&mut s, input, output, table(input, output));
                }
            }
        } else {
            line(&mut s, 0, 0, table(0, n.info.local_port_num));
        }
        let _ = writeln!(s, "{sep}\n");
    }
    Some(s)
}

/// OpenSM's `opensm-updn-roots.dump`, when the SM routes up*/down*
/// (`None` otherwise, as OpenSM writes it only from its updn engine): the
/// node GUID of each root switch the engine chose, in OpenSM's map order.
pub fn updn_roots(sm: &Sm) -> Option<String> {
    if sm.config().routing != smi::sm::Engine::UpDown {
        return None;
    }
    let switches = sm.graph_switches();
    let mut roots: Vec<u64> = (smi::sm::updn::roots(sm.routing_graph()).into_iter())
        .filter_map(|k| sm.nodes().get(*switches.get(k)?))
        .map(|n| n.info.node_guid.0)
        .collect();
    roots.sort_by_key(|&g| map_order(g));
    Some(roots.iter().map(|g| format!("{g:#x}\n")).collect())
}

/// OpenSM's `opensm-ftree-ca-order.dump`, under `--routing ftree` when
/// the fat-tree engine routed the subnet itself: the CAs in the order the
/// engine numbers them ([`Sm::ftree_ca_order`]), a line `0xLID<TAB>node
/// description` each, every leaf padded with `0xFFFF<TAB>DUMMY` lines to
/// the most CAs a leaf has, as OpenSM's ftree writes it. MPI ranks given
/// in this order make shift patterns contention-free.
pub fn ftree_ca_order(sm: &Sm, names: &NodeNames) -> Option<String> {
    let order = sm.ftree_ca_order()?;
    // Leaf by leaf in the engine's order, padded to the most CAs a leaf
    // has with OpenSM's dummy line.
    let mut leaves: Vec<(usize, Vec<mad_core::Lid>)> = Vec::new();
    for (leaf, lid) in order {
        match leaves.last_mut() {
            Some((l, lids)) if *l == leaf => lids.push(lid),
            _ => leaves.push((leaf, vec![lid])),
        }
    }
    let most = leaves.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    let mut s = String::new();
    for (_, lids) in &leaves {
        for lid in lids {
            let d = (sm.subnet().by_lid(*lid))
                .and_then(|(n, _)| sm.nodes().get(n.0))
                .map(|n| desc(names, n))
                .unwrap_or_default();
            let _ = writeln!(s, "0x{:04x}\t{d}", lid.0);
        }
        for _ in lids.len()..most {
            s.push_str("0xFFFF\tDUMMY\n");
        }
    }
    Some(s)
}

/// OpenSM's `opensm.mcfdbs`: the multicast forwarding entries the SM
/// wrote, switch by switch (a switch with none is left out): a header
/// naming the switch by its node GUID, then a line per MLID listing the
/// ports it forwards out of, lowest first.
pub fn mcfdbs(sm: &Sm) -> String {
    let mut tables: BTreeMap<usize, Vec<(u16, Vec<usize>)>> = BTreeMap::new();
    for (node, mlid, mask) in sm.subnet().mft_entries() {
        let ports: Vec<usize> = (mask.iter().enumerate())
            .flat_map(|(position, &bits)| {
                (0..16)
                    .filter(move |b| bits & (1 << b) != 0)
                    .map(move |b| position * 16 + b)
            })
            .collect();
        if !ports.is_empty() {
            tables.entry(node.0).or_default().push((mlid.0, ports));
        }
    }
    let mut s = String::new();
    for (i, n) in ordered(sm).into_iter().filter(|(_, n)| n.is_switch()) {
        let Some(entries) = tables.get_mut(&i) else {
            continue;
        };
        entries.sort_unstable();
        let _ = write!(
            s,
            "\nSwitch 0x{:016x}\nLID    : Out Port(s)\n",
            n.info.node_guid.0
        );
        for (mlid, ports) in entries.iter() {
            let _ = write!(s, "0x{mlid:04X} :");
            for p in ports {
                let _ = write!(s, " 0x{p:03X} ");
            }
            s.push('\n');
        }
    }
    s
}

/// The PortInfo OpenSM reads a node's LID from: a switch's port 0, else
/// the port itself.
fn lid_port(n: &SmNode, port: usize) -> usize {
    if n.is_switch() {
        0
    } else {
        port
    }
}

/// One end of a link as `opensm-subnet.lst` writes it. `vendor_width`:
/// OpenSM writes the vendor ID in 6 digits on the left end and 8 on the
/// right.
fn end(
    s: &mut String,
    names: &NodeNames,
    n: &SmNode,
    port: usize,
    sm_lid: u16,
    vendor_width: usize,
) {
    let kind = match u8::from(n.info.node_type) {
        1 => "CA",
        2 => "SW",
        3 => "Rt",
        _ => "**",
    };
    let lp = lid_port(n, port);
    let info = n.ports.get(lp).and_then(|p| p.info);
    let lid = if n.lid != 0 {
        n.lid
    } else {
        info.map_or(0, |i| i.lid.0)
    };
    let is_sm = lid != 0 && lid == sm_lid;
    // A CA's other ports have GUIDs of their own; the SM knows the one
    // NodeInfo gave when discovery came through it.
    let port_guid = n.info.port_guid.0;
    let _ = write!(
        s,
        "{{ {kind}{} Ports:{:02X} SystemGUID:{:016x} NodeGUID:{:016x} PortGUID:{port_guid:016x} VenID:{:0vendor_width$X} DevID:{:04X} Rev:{:08X} {{{}}} LID:{lid:04X} PN:{port:02X} }} ",
        if is_sm { "-SM" } else { "" },
        n.info.num_ports,
        n.info.system_image_guid.0,
        n.info.node_guid.0,
        n.info.vendor_id,
        n.info.device_id,
        n.info.revision,
        desc(names, n),
    );
}

/// OpenSM's `opensm-subnet.lst`: a line per port with a peer, both ends
/// and the link's width, state and speed.
pub fn subnet_lst(sm: &Sm, names: &NodeNames) -> String {
    use mad_core::attr::{CapabilityMask, CapabilityMask2, PortState};
    let sm_lid = sm.sm_lid().0;
    let mut s = String::new();
    for (_, n) in ordered(sm) {
        for (p, port) in n.ports.iter().enumerate().skip(1) {
            let Some((m, q)) = port.peer else { continue };
            let Some(peer) = sm.nodes().get(m).filter(|x| x.alive) else {
                continue;
            };
            end(&mut s, names, n, p, sm_lid, 6);
            end(&mut s, names, peer, usize::from(q), sm_lid, 8);
            let info = port.info;
            let lp = n.ports.get(lid_port(n, p)).and_then(|x| x.info);
            let width = info.map_or(0, |i| i.link_width_active.bits());
            let two_x = lp.is_some_and(|i| {
                i.capability_mask2
                    .contains(CapabilityMask2::IS_LINK_WIDTH_2X_SUPPORTED)
            });
            let phy = match width {
                1 => "1x",
                2 => "4x",
                4 => "8x",
                8 => "12x",
                16 if two_x => "2x",
                _ => "??",
            };
            let log = match info.map(|i| i.port_state) {
                Some(PortState::Active) => "ACT",
                Some(PortState::Armed) => "ARM",
                Some(PortState::Init) => "INI",
                _ => "DWN",
            };
            let mut spd = match info.map_or(0, |i| i.link_speed_active.bits()) {
                1 => "2.5",
                2 => "5",
                4 => "10",
                _ => "??",
            };
            if lp.is_some_and(|i| {
                i.capability_mask
                    .contains(CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED)
            }) {
                spd = match info.map_or(0, |i| i.link_speed_ext_active.bits()) {
                    0 => spd,
                    1 => "14",
                    2 => "25",
                    4 => "50",
                    _ => "??",
                };
            }
            let _ = writeln!(s, "PHY={phy} LOG={log} SPD={spd}");
        }
    }
    s
}

/// Writes `text` to `dir/name` whole: a temporary file renamed over the
/// old one, so a reader never sees half a file.
fn write_whole(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    write_whole_mode(dir, name, text, 0o644, false)
}

/// [`write_whole`] with the new file's permission bits `mode` (before the
/// umask: `guid2mkey` and the SA's database hold secrets and are written
/// 0600); with `sync`, the file reaches the disk before it is renamed
/// into place, and the rename before this returns (OpenSM's
/// `fsync_high_avail_files`), so that a power cut leaves the old file or
/// the new one, not an empty one.
fn write_whole_mode(
    dir: &Path,
    name: &str,
    text: &str,
    mode: u32,
    sync: bool,
) -> Result<(), String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            if sync {
                f.sync_all()?;
            }
            Ok(())
        })
        .and_then(|()| std::fs::rename(&tmp, &path))
        .and_then(|()| {
            if sync {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        })
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// OpenSM's `guid2mkey`: the M_Key each port is known to hold
/// ([`Sm::known_m_keys`]), `0xGUID 0xMKEY` and an empty line, by GUID.
pub fn guid2mkey(sm: &Sm) -> String {
    let mut s = String::new();
    for (g, k) in sm.known_m_keys() {
        let _ = write!(s, "0x{g:016x} 0x{:016x}\n\n", k.0);
    }
    s
}

/// A `guid2mkey` file read: M_Keys by port GUID, and the entries skipped.
pub type Guid2MKey = Cache<u64, mad_core::MKey>;

/// Reads a `guid2mkey` file ([`guid2mkey`]'s layout, OpenSM's): each
/// entry a port GUID and an M_Key. An entry that is not two numbers, a
/// GUID of 0 or a GUID given twice is skipped with a warning (at most
/// 100 named), as OpenSM drops such entries: that port is then sent the
/// configured `m_key`.
pub fn parse_guid2mkey(text: &str) -> Guid2MKey {
    let mut keys = BTreeMap::new();
    let mut skipped = Skipped::default();
    for (k, line, words) in cache_lines(text, 3) {
        let nums: Vec<Option<u64>> = words.iter().map(|w| number(w)).collect();
        let [Some(guid), Some(key)] = nums.as_slice() else {
            skipped.malformed(k, line, "a GUID and an M_Key");
            continue;
        };
        if *guid == 0 {
            skipped.push(k, "GUID 0".into());
        } else if keys.contains_key(guid) {
            skipped.push(k, format!("GUID {guid:#018x} given twice"));
        } else {
            keys.insert(*guid, mad_core::MKey(*key));
        }
    }
    (keys, skipped.0)
}

/// OpenSM's `neighbors`: every link the SM has seen, both ways, as
/// `0xGUID:PORT 0xGUID:PORT` and an empty line, by port GUID and number
/// ([`Sm::known_neighbors`]). With it, and `guid2mkey`, a restarted SM
/// knows which port it is about to reach, and its key, before reading it.
pub fn neighbors(sm: &Sm) -> String {
    let mut s = String::new();
    for ((g, p), (h, q)) in sm.known_neighbors() {
        let _ = write!(s, "0x{g:016x}:{p} 0x{h:016x}:{q}\n\n");
    }
    s
}

/// A `neighbors` file read: each link end to the end cabled to it, and
/// the entries skipped.
pub type Neighbors = Cache<(u64, u8), (u64, u8)>;

/// One end of a link as `neighbors` writes it: `0xGUID:PORT`, the GUID
/// not 0 and the port 1–255.
fn link_end(w: &str) -> Option<(u64, u8)> {
    let (g, p) = w.split_once(':')?;
    let (g, p) = (number(g)?, number(p)?);
    (g != 0 && (1..=255).contains(&p)).then_some((g, p as u8))
}

/// Reads a `neighbors` file ([`neighbors`]'s layout, OpenSM's). An entry
/// that is not two link ends (`0xGUID:PORT`, GUID not 0, port 1–255), an
/// end given twice, or one whose far end does not name it back is skipped
/// with a warning (at most 100 named), as OpenSM drops such entries.
pub fn parse_neighbors(text: &str) -> Neighbors {
    let mut links = BTreeMap::new();
    let mut lines = BTreeMap::new();
    let mut skipped = Skipped::default();
    for (k, line, words) in cache_lines(text, 3) {
        let ends: Vec<Option<(u64, u8)>> = words.iter().map(|w| link_end(w)).collect();
        let [Some(a), Some(b)] = ends.as_slice() else {
            skipped.malformed(k, line, "two link ends (0xGUID:PORT)");
            continue;
        };
        if links.contains_key(a) {
            skipped.push(k, format!("{:#018x}:{} given twice", a.0, a.1));
            continue;
        }
        links.insert(*a, *b);
        lines.insert(*a, k);
    }
    let one_way: Vec<(u64, u8)> = links
        .iter()
        .filter(|(a, b)| links.get(*b) != Some(*a))
        .map(|(a, _)| *a)
        .collect();
    for a in one_way {
        skipped.push(
            lines[&a],
            format!("{:#018x}:{}: its far end does not name it back", a.0, a.1),
        );
        links.remove(&a);
    }
    (links, skipped.0)
}

/// Reads the `neighbors` file `path`, bounded: `Ok(None)` when there is
/// none yet.
pub fn read_neighbors(path: &Path) -> Result<Option<Neighbors>, String> {
    let text = read_capped(path, MAX_GUID2LID_BYTES)?;
    Ok(text.map(|t| parse_neighbors(&t)))
}

/// Reads the `guid2mkey` file `path`, bounded: `Ok(None)` when there is
/// none yet.
pub fn read_guid2mkey(path: &Path) -> Result<Option<Guid2MKey>, String> {
    let text = read_capped(path, MAX_GUID2LID_BYTES)?;
    Ok(text.map(|t| parse_guid2mkey(&t)))
}

/// Writes `opensm-subnet.lst`, and with fat-tree routing
/// `opensm-ftree-ca-order.dump`, into `dir`, as OpenSM writes them into
/// its `dump_files_dir` whatever its log flags; what could not be
/// written.
pub fn write_subnet_lst(sm: &Sm, names: &NodeNames, dir: &Path) -> Vec<String> {
    let order = ftree_ca_order(sm, names).map(|t| ("opensm-ftree-ca-order.dump", t));
    (order.into_iter())
        .chain([("opensm-subnet.lst", subnet_lst(sm, names))])
        .filter_map(|(name, text)| write_whole(dir, name, &text).err())
        .collect()
}

/// Writes (naming nodes by `names`) `opensm-subnet.lst`, `opensm-lfts.dump`, `opensm.fdbs`,
/// `opensm-lid-matrix.dump`, `opensm.mcfdbs`, under QoS
/// `opensm-sl2vl.dump`, routing up*/down* `opensm-updn-roots.dump` and
/// fat-tree `opensm-ftree-ca-order.dump` into `dump_dir`, and `guid2lid`
/// `guid2mkey` (mode 0600: it holds the ports' keys) and `neighbors` into
/// `cache_dir` (with `sync`, each synced to the disk before it replaces
/// the old one, and the directory after), where given; what
/// could not be written is returned (the SM goes on, as OpenSM does).
pub fn write_all(
    sm: &Sm,
    names: &NodeNames,
    dump_dir: Option<&Path>,
    cache_dir: Option<&Path>,
    sync: bool,
) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(d) = dump_dir {
        let qos = sl2vl(sm, names).map(|t| ("opensm-sl2vl.dump", t));
        let roots = updn_roots(sm).map(|t| ("opensm-updn-roots.dump", t));
        let order = ftree_ca_order(sm, names).map(|t| ("opensm-ftree-ca-order.dump", t));
        for (name, text) in qos.into_iter().chain(roots).chain(order).chain([
            ("opensm-subnet.lst", subnet_lst(sm, names)),
            ("opensm-lfts.dump", lfts(sm, names)),
            ("opensm.fdbs", fdbs(sm)),
            ("opensm-lid-matrix.dump", lid_matrix(sm)),
            ("opensm.mcfdbs", mcfdbs(sm)),
        ]) {
            if let Err(e) = write_whole(d, name, &text) {
                errors.push(e);
            }
        }
    }
    if let Some(d) = cache_dir {
        if let Err(e) = write_whole_mode(d, "guid2lid", &guid2lid(sm), 0o644, sync) {
            errors.push(e);
        }
        if let Err(e) = write_whole_mode(d, "guid2mkey", &guid2mkey(sm), 0o600, sync) {
            errors.push(e);
        }
        if let Err(e) = write_whole_mode(d, "neighbors", &neighbors(sm), 0o644, sync) {
            errors.push(e);
        }
        let vfs = sm.vf_lids();
        if !vfs.is_empty() {
            if let Err(e) = write_whole_mode(d, "vf2lid", &vf2lid(sm), 0o644, sync) {
                errors.push(e);
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid2mkey_reads_what_opensm_writes_and_skips_what_it_drops() {
        let text = "0x0002c90300000001 0x5ec2e7ed00000001\n\n\
                    0x0002c90300000002 0x0000000000000000\n\n# comment\n\
                    0x0 0x5\n0x0002c90300000001 0x7\nnonsense words\n0x12\n";
        let (keys, w) = parse_guid2mkey(text);
        assert_eq!(
            keys.into_iter().collect::<Vec<_>>(),
            [
                (0x0002c90300000001, mad_core::MKey(0x5ec2e7ed00000001)),
                (0x0002c90300000002, mad_core::MKey(0))
            ]
        );
        let lines: Vec<usize> = w.iter().map(|w| w.line).collect();
        assert_eq!(lines, [6, 7, 8, 9]);
        assert!(w[1].what.contains("twice"), "{w:?}");
        assert_eq!(
            read_guid2mkey(Path::new("/nonexistent/ibkit/guid2mkey")).unwrap(),
            None
        );
    }

    #[test]
    fn neighbors_reads_what_opensm_writes_and_skips_what_it_drops() {
        let text = "0x0002c90300000200:1 0x0002c90400000000:1\n\n\
                    0x0002c90400000000:1 0x0002c90300000200:1\n\n\
                    0x0002c90300000200:2 0x0002c90400000100:1\n\n\
                    0x0:3 0x5:1\n0x5:0 0x6:1\n0x5:256 0x6:1\nnonsense\n\
                    0x0002c90400000000:1 0x0002c90300000200:9\n";
        let (links, w) = parse_neighbors(text);
        assert_eq!(
            links.into_iter().collect::<Vec<_>>(),
            [
                ((0x0002c90300000200, 1), (0x0002c90400000000, 1)),
                ((0x0002c90400000000, 1), (0x0002c90300000200, 1)),
            ]
        );
        let lines: Vec<usize> = w.iter().map(|w| w.line).collect();
        // Four malformed, one twice, and one one-way link (line 5).
        assert_eq!(lines, [7, 8, 9, 10, 11, 5], "{w:?}");
        assert!(w[5].what.contains("back"), "{w:?}");
    }

    #[test]
    fn the_sa_database_is_written_for_its_owner_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = std::env::temp_dir().join(format!("ibkit-sadb-mode-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        for sync in [false, true] {
            write_sa_db(&d, "# SA\n", sync).unwrap();
            let m = std::fs::metadata(d.join("opensm-sa.dump")).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o600, "as OpenSM's");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn guid2mkey_is_written_for_its_owner_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = std::env::temp_dir().join(format!("ibkit-g2m-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // A file left from before with wider bits is replaced, not reused.
        std::fs::write(d.join(".guid2mkey.tmp"), "old").unwrap();
        write_whole_mode(&d, "guid2mkey", "0x1 0x2\n\n", 0o600, true).unwrap();
        let m = std::fs::metadata(d.join("guid2mkey")).unwrap();
        assert_eq!(
            m.permissions().mode() & 0o077,
            0,
            "{:o}",
            m.permissions().mode()
        );
        assert_eq!(
            std::fs::read_to_string(d.join("guid2mkey")).unwrap(),
            "0x1 0x2\n\n"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn vf2lid_reads_what_it_writes_and_skips_what_it_cannot_use() {
        let text = "0x0002c90400000101 1 0x0005\n0x0002c90400000101 2 0x0006\n\
                    # comment\n0x0002c90400000201 1 0x0005\n0 1 0x7\n0x1 0 0x8\n\
                    0x1 1 0xc000\n0x0002c90400000101 1 0x9\nnonsense\n";
        let (lids, w) = parse_vf2lid(text);
        assert_eq!(
            lids.into_iter().collect::<Vec<_>>(),
            [
                ((0x0002c90400000101, 1), mad_core::Lid(5)),
                ((0x0002c90400000101, 2), mad_core::Lid(6))
            ]
        );
        let lines: Vec<usize> = w.iter().map(|w| w.line).collect();
        assert_eq!(lines, [4, 5, 6, 7, 8, 9], "{w:?}");
    }

    #[test]
    fn guid2lid_reads_what_opensm_writes_and_skips_what_it_drops() {
        // OpenSM's own layout: key, value, an empty line.
        let text = "0x0000000000100004 0x0004 0x0004\n\n0x0000000000200000 0x0001 0x0001\n\n\
                    0x0000000000100001 2 2\n\n";
        let (lids, w) = parse_guid2lid(text);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(lids.len(), 3);
        assert_eq!(lids[&0x100004], mad_core::Lid(4));
        assert_eq!(lids[&0x100001], mad_core::Lid(2));
        let text = "0x1 0x5 0x5\nnonsense\n0x2 0x5 0x5\n0x3 0x0 0x0\n0x4 0xc000 0xc000\n\
                    0x1 0x7 0x7\n0x0 0x9 0x9\n0x6 0x9 0xa\n0x7 0x9\n0x8 0x10 0x13\n\
                    0x9 0x20 0x22\n";
        let (lids, w) = parse_guid2lid(text);
        assert_eq!(lids.len(), 2, "{lids:?}");
        assert_eq!(lids[&1], mad_core::Lid(5));
        // An LMC 2 port's range (OpenSM's -l 2): its base.
        assert_eq!(lids[&8], mad_core::Lid(0x10));
        let lines: Vec<usize> = w.iter().map(|w| w.line).collect();
        assert_eq!(lines, vec![2, 3, 4, 5, 6, 7, 8, 9, 11], "{w:?}");
        assert!(w[1].what.contains("already given"), "{w:?}");
    }

    #[test]
    fn a_missing_cache_is_no_error_and_a_huge_one_is_refused() {
        assert_eq!(
            read_guid2lid(Path::new("/nonexistent/ibkit/guid2lid")).unwrap(),
            None
        );
        let e = read_guid2lid(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("longer than"), "{e}");
    }

    /// Each route of `opensm.fdbs` checked against what the SM did not
    /// compute it from, a breadth-first search of the topology's cables:
    /// its hops are the cable out of its port plus the fewest from there
    /// (OpenSM's hop tables count so), `yes` where no port does better,
    /// else "No N hop path possible via port P!" with N the fewest and P a
    /// port that has them; and the simulated fabric's installed LFTs
    /// deliver it. Min-hop routes are all shortest; up*/down* on a random
    /// fabric takes some longer ones, which must say so.
    #[test]
    fn fdbs_hops_and_optimal_are_the_topologys() {
        use fabric::sim::{SimConfig, Walk};
        use mad_core::attr::NodeType;
        use smi::sm::{Engine, SmConfig};
        let mut longer = 0;
        for (spec, engine) in [
            ("mport-ntree:4:2", Engine::MinHop),
            ("random:12:3", Engine::MinHop),
            ("random:12:3", Engine::UpDown),
        ] {
            let cfg = SmConfig {
                routing: engine,
                ..SmConfig::default()
            };
            let (f, sm, up) = fabric::sim::bring_up(spec, SimConfig::default(), cfg).unwrap();
            assert!(up, "{spec}");
            let topo = &f.topo;
            let switch = |n: usize| topo.nodes[n].kind == NodeType::Switch;
            // Cables from switch `s` to every node, through switches only.
            let bfs = |s: usize| {
                let mut d = vec![u16::MAX; topo.nodes.len()];
                d[s] = 0;
                let mut q = std::collections::VecDeque::from([s]);
                while let Some(n) = q.pop_front() {
                    for p in 1..=topo.nodes[n].ports {
                        if let Some((m, _)) = topo.peer_of(n, p) {
                            if d[m] == u16::MAX {
                                d[m] = d[n] + 1;
                                if switch(m) {
                                    q.push_back(m);
                                }
                            }
                        }
                    }
                }
                d
            };
            let owner =
                |lid: u16| (0..topo.nodes.len()).find(|&n| f.nodes[n].owns(mad_core::Lid(lid)));
            let text = fdbs(&sm);
            let mut node = None;
            let mut lines = 0;
            for line in text.lines() {
                if let Some(g) = line.strip_prefix("dump_ucast_routes: Switch 0x") {
                    let guid = u64::from_str_radix(g, 16).unwrap();
                    node = topo.nodes.iter().position(|n| n.guid == guid);
                    assert!(node.is_some_and(switch), "{line}");
                    continue;
                }
                if line == "LID    : Port : Hops : Optimal" {
                    continue;
                }
                let s = node.unwrap();
                let lid = u16::from_str_radix(&line[2..6], 16).unwrap();
                let rest = &line[9..];
                lines += 1;
                let Some(target) = owner(lid) else {
                    assert_eq!(rest, "UNREACHABLE", "{spec}: {line}");
                    continue;
                };
                let port: u8 = rest[..3].parse().unwrap();
                let hops: u16 = rest[7..9].parse().unwrap();
                // OpenSM's Hops: through the port, then a shortest way on
                // (what the next switches' tables do is theirs).
                let via = |p: u8| match topo.peer_of(s, p) {
                    _ if p == 0 => u16::from(s != target) * u16::MAX,
                    Some((m, _)) if m == target => 1,
                    Some((m, _)) if switch(m) => bfs(m)[target].saturating_add(1),
                    _ => u16::MAX,
                };
                assert_eq!(hops, via(port), "{spec}: {line}");
                assert!(
                    matches!(
                        f.walk_from_switch(s, mad_core::Lid(lid)),
                        Walk::Delivered(_)
                    ),
                    "{spec}: {line}: the LFTs do not deliver it"
                );
                let best = bfs(s)[target];
                let optimal = &rest[14..];
                if hops == best {
                    assert_eq!(optimal, "yes", "{spec}: {line}");
                } else {
                    longer += 1;
                    let want = format!("No {best} hop path possible via port ");
                    let p: u8 = (optimal.strip_prefix(&want))
                        .and_then(|p| p.strip_suffix('!'))
                        .unwrap_or_else(|| panic!("{spec}: {line}"))
                        .parse()
                        .unwrap();
                    assert_eq!(via(p), best, "{spec}: {line}");
                }
            }
            let lids = usize::from(sm.max_lid());
            assert_eq!(lines, topo.switches() * lids, "{spec}");
        }
        assert!(longer > 0, "up*/down* on random:12:3 took no longer route");
    }

    /// `opensm-ftree-ca-order.dump` under `--routing ftree` on
    /// fat-tree-324: OpenSM's layout, every CA once, 18 to a leaf (no
    /// dummy on a full tree), each leaf's CAs together. Its purpose holds:
    /// for every shift s, rank i sending to rank i + s (mod 324), in the
    /// file's order, through the installed LFTs, no cable between
    /// switches carries two of the 324 flows. Shuffled ranks do not have
    /// that (the check can fail); and a degraded tree gets no file (the
    /// engine fell back to up*/down*).
    #[test]
    fn ftree_ca_order_makes_every_shift_contention_free() {
        use fabric::sim::SimConfig;
        use mad_core::attr::NodeType;
        use smi::sm::{Engine, SmConfig};
        let cfg = SmConfig {
            routing: Engine::FatTree,
            ..SmConfig::default()
        };
        let (f, sm, up) = fabric::sim::bring_up("fat-tree-324", SimConfig::default(), cfg).unwrap();
        assert!(up);
        let text =
            ftree_ca_order(&sm, &NodeNames::default()).expect("the fat-tree engine routed it");
        let topo = &f.topo;
        let owner = |lid: u16| (0..topo.nodes.len()).find(|&n| f.nodes[n].owns(mad_core::Lid(lid)));
        let mut ranks: Vec<u16> = Vec::new();
        let mut leaf_of = Vec::new();
        for line in text.lines() {
            let (lid, d) = line.split_once('\t').unwrap();
            assert_ne!(lid, "0xFFFF", "a full tree has no dummy: {line}");
            let lid = u16::from_str_radix(lid.strip_prefix("0x").unwrap(), 16).unwrap();
            assert_eq!(format!("0x{lid:04x}\t{d}"), line, "OpenSM's layout");
            let n = owner(lid).unwrap();
            assert_eq!(topo.nodes[n].kind, NodeType::ChannelAdapter, "{line}");
            assert_eq!(d, topo.nodes[n].name, "{line}");
            leaf_of.push(topo.peer_of(n, 1).unwrap().0);
            ranks.push(lid);
        }
        let cas = topo
            .nodes
            .iter()
            .filter(|n| n.kind != NodeType::Switch)
            .count();
        assert_eq!(ranks.len(), cas);
        let mut seen = ranks.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), cas, "every CA once");
        // Each leaf's CAs together, 18 a leaf.
        for chunk in leaf_of.chunks(18) {
            assert!(chunk.iter().all(|&l| l == chunk[0]), "{chunk:?}");
        }
        // The most flows on one switch-to-switch cable, over every shift.
        let worst = |order: &[u16]| {
            let n = order.len();
            let mut worst = 0;
            for shift in 1..n {
                let mut load: BTreeMap<(usize, u8), u32> = BTreeMap::new();
                for i in 0..n {
                    let (src, dst) = (owner(order[i]).unwrap(), order[(i + shift) % n]);
                    let mut at = topo.peer_of(src, 1).unwrap().0;
                    for _ in 0..16 {
                        let port = f.nodes[at].lft_port(mad_core::Lid(dst));
                        let (next, _) = topo.peer_of(at, port).unwrap();
                        if topo.nodes[next].kind != NodeType::Switch {
                            assert!(f.nodes[next].owns(mad_core::Lid(dst)));
                            break;
                        }
                        *load.entry((at, port)).or_default() += 1;
                        at = next;
                    }
                }
                worst = worst.max(load.values().copied().max().unwrap_or(0));
            }
            worst
        };
        assert_eq!(
            worst(&ranks),
            1,
            "a shift shares a cable in the file's order"
        );
        // Shuffled (a fixed LCG), some shift shares a cable.
        let mut shuffled = ranks.clone();
        let mut x = 12_345u64;
        for i in (1..shuffled.len()).rev() {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            shuffled.swap(i, (x >> 33) as usize % (i + 1));
        }
        let w = worst(&shuffled);
        assert!(
            w > 1,
            "shuffled ranks are contention-free too: the check proves nothing"
        );

        // A degraded tree (a leaf's up-link down, swept): up*/down*
        // routes it, and no file is written.
        let first = owner(ranks[0]).unwrap();
        let leaf = topo.peer_of(first, 1).unwrap().0;
        let up_port = (1..=topo.nodes[leaf].ports)
            .find(|&p| {
                topo.peer_of(leaf, p)
                    .is_some_and(|(m, _)| topo.nodes[m].kind == NodeType::Switch)
            })
            .unwrap();
        let (mut f, mut sm) = (f, sm);
        let t = f.now_ns();
        f.schedule(
            t + 1_000_000,
            fabric::sim::FabricEvent::LinkDown(leaf, up_port),
        );
        assert!(f.run_until(&mut sm, t + 20_000_000_000));
        assert!(sm.stats().sweeps >= 1);
        assert_eq!(ftree_ca_order(&sm, &NodeNames::default()), None);
    }

    #[test]
    fn opensm_orders_by_the_guid_in_network_byte_order() {
        // As OpenSM listed ibsim's net.2sw2path4hca: Hca1, Switch1,
        // Switch2, Hca2, Hca3, Hca4.
        let mut g = [
            0x100003u64,
            0x200001,
            0x100000,
            0x100009,
            0x200000,
            0x100006,
        ];
        g.sort_by_key(|&x| map_order(x));
        assert_eq!(
            g,
            [0x100000, 0x200000, 0x200001, 0x100003, 0x100006, 0x100009]
        );
    }
}
