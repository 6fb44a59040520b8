//! LMC 2 given to OpenSM (`-l 2`) and to ibkit's SM (`--lmc 2`) on the
//! same fabric (mport-ntree:4:3 on ibsim and on ibkit's served fabric,
//! fat-tree-324 on ibsim), read back with
//! tools we did not write: `ibnetdiscover` (every port's LID and LMC),
//! `ibroute` (every switch's LFT, walked here over the cables to each of
//! a CA's four LIDs) and `saquery` (PathRecords at LIDs above the base,
//! and the order of a pair's paths).

use fabric::topology::Topology;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tests::peers::Simulator;

mod common;
use common::{peers_with_smpquery, simulator_and_sm};

/// What one SM left on the fabric.
#[derive(Debug)]
struct Seen {
    /// Per CA (topology index): its base LID and LMC, as ibnetdiscover
    /// reads them.
    cas: BTreeMap<usize, (u16, u8)>,
    /// The switches' LMCs.
    switch_lmcs: BTreeSet<u8>,
    /// Per switch (topology index): its base LID and LMC.
    switches: BTreeMap<usize, (u16, u8)>,
    /// From every CA to every switch with more than one LID (an enhanced
    /// port 0 under `lmc_esp0`) but its own leaf: the pairs, those whose
    /// LIDs' routes are not all one, and the distinct routes.
    to_switches: (usize, usize, usize),
    /// CA pairs on different switches, and those whose four LIDs' routes
    /// are not all one.
    pairs: usize,
    spread: usize,
    /// Distinct routes over all of those pairs' four LIDs, and distinct
    /// first hops (the source's leaf switch's egress ports).
    routes: usize,
    first_hops: usize,
    /// For the pair (first CA, last CA): each (SLID offset, DLID offset)
    /// saquery asked for by LIDs, and whether a record came back with
    /// those LIDs.
    by_lids: Vec<((u16, u16), bool)>,
    /// The LID past the last CA's, when no port holds it: whether saquery
    /// found a path there.
    past: Option<bool>,
    /// The same pair's first two paths by GIDs (all that the first MAD,
    /// which is all saquery gets through libumad2sim, holds whole): (SLID
    /// offset, DLID offset, Preference).
    by_gids: Vec<(u16, u16, u16)>,
}

/// Every `Ca`/`Switch` header of ibnetdiscover's text with the LID and
/// LMC it gives: a switch's on its header (`base port 0 lid L lmc M`, or
/// `enhanced port 0 …`), a
/// CA's on its port line (`# lid L lmc M`). By node GUID.
fn lids(text: &str) -> BTreeMap<u64, (u16, u8)> {
    let guid_of = |s: &str| -> Option<u64> {
        let a = s.find("\"S-").or_else(|| s.find("\"H-"))? + 3;
        u64::from_str_radix(&s[a..a + 16], 16).ok()
    };
    let lid_lmc = |s: &str| -> Option<(u16, u8)> {
        let w: Vec<&str> = s.split_whitespace().collect();
        let at = w.iter().position(|&x| x == "lid")?;
        Some((w.get(at + 1)?.parse().ok()?, {
            let m = w.iter().position(|&x| x == "lmc")?;
            w.get(m + 1)?.parse().ok()?
        }))
    };
    let mut out = BTreeMap::new();
    let mut ca = None;
    for line in text.lines() {
        if line.starts_with("Switch") {
            ca = None;
            let (Some(g), Some(l)) = (guid_of(line), line.split(" port 0 ").nth(1)) else {
                continue;
            };
            if let Some(v) = lid_lmc(l) {
                out.insert(g, v);
            }
        } else if line.starts_with("Ca") {
            ca = guid_of(line);
        } else if let (Some(g), true) = (ca, line.starts_with('[')) {
            if let Some(v) = line.split('#').nth(1).and_then(lid_lmc) {
                out.insert(g, v);
                ca = None;
            }
        }
    }
    out
}

/// `ibroute`'s table: LID → port.
fn ibroute(text: &str) -> BTreeMap<u16, u8> {
    text.lines()
        .filter(|l| l.starts_with("0x"))
        .filter_map(|l| {
            Some((
                u16::from_str_radix(l.get(2..6)?, 16).ok()?,
                l.get(7..10)?.trim().parse().ok()?,
            ))
        })
        .collect()
}

/// The `name...value` fields `name` of saquery's dumps, in order (LIDs
/// in decimal, the rest in hexadecimal with `0x`).
fn fields(text: &str, name: &str) -> Vec<u16> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('.'))
        .filter_map(|l| {
            let v = l[name.len()..].trim_start_matches('.');
            match v.strip_prefix("0x") {
                Some(h) => u16::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .collect()
}

fn look(sim: &dyn Simulator, topo: &Topology) -> Seen {
    let out = sim.client("ibnetdiscover".as_ref()).output().unwrap();
    assert!(out.status.success(), "ibnetdiscover");
    let by_guid = lids(&String::from_utf8_lossy(&out.stdout));
    let mut cas = BTreeMap::new();
    let mut switch_lmcs = BTreeSet::new();
    let mut switches = BTreeMap::new();
    let mut lfts: BTreeMap<usize, BTreeMap<u16, u8>> = BTreeMap::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        let &(lid, lmc) = by_guid
            .get(&n.guid)
            .unwrap_or_else(|| panic!("ibnetdiscover shows no LID for {}", n.name));
        if n.ports == 1 {
            cas.insert(i, (lid, lmc));
        } else {
            switch_lmcs.insert(lmc);
            switches.insert(i, (lid, lmc));
            let out = sim
                .client("ibroute".as_ref())
                .arg(lid.to_string())
                .output()
                .unwrap();
            assert!(out.status.success(), "ibroute {lid}");
            lfts.insert(i, ibroute(&String::from_utf8_lossy(&out.stdout)));
        }
    }
    // Walk every CA to every LID of every CA on another switch.
    let walk = |a: usize, dlid: u16| -> (Vec<(usize, u8)>, Option<usize>) {
        let mut route = Vec::new();
        let (mut sw, _) = topo.peer_of(a, 1).unwrap();
        for _ in 0..16 {
            let Some(&port) = lfts.get(&sw).and_then(|t| t.get(&dlid)) else {
                return (route, None);
            };
            route.push((sw, port));
            if port == 0 {
                return (route, Some(sw));
            }
            let Some((m, _)) = topo.peer_of(sw, port) else {
                return (route, None);
            };
            if topo.nodes[m].ports == 1 {
                return (route, Some(m));
            }
            sw = m;
        }
        (route, None)
    };
    let (mut pairs, mut spread, mut routes, mut first_hops) = (0, 0, 0, 0);
    for &a in cas.keys() {
        for (&b, &(base, lmc)) in &cas {
            if a == b || topo.peer_of(a, 1).unwrap().0 == topo.peer_of(b, 1).unwrap().0 {
                continue;
            }
            let mut distinct = BTreeSet::new();
            for k in 0..1u16 << lmc {
                let (route, end) = walk(a, base + k);
                assert_eq!(end, Some(b), "LID {} from {}", base + k, topo.nodes[a].name);
                distinct.insert(route);
            }
            pairs += 1;
            spread += usize::from(distinct.len() > 1);
            routes += distinct.len();
            first_hops += distinct.iter().map(|r| r[0]).collect::<BTreeSet<_>>().len();
        }
    }
    let mut to_switches = (0, 0, 0);
    for &a in cas.keys() {
        let leaf = topo.peer_of(a, 1).unwrap().0;
        for (&s, &(base, lmc)) in switches.iter().filter(|(_, v)| v.1 > 0) {
            if s == leaf {
                continue;
            }
            let mut distinct = BTreeSet::new();
            for k in 0..1u16 << lmc {
                let (route, end) = walk(a, base + k);
                assert_eq!(end, Some(s), "LID {} from {}", base + k, topo.nodes[a].name);
                distinct.insert(route);
            }
            to_switches.0 += 1;
            to_switches.1 += usize::from(distinct.len() > 1);
            to_switches.2 += distinct.len();
        }
    }
    // saquery between the first and the last CA.
    let (&a, &(la, lmc_a)) = cas.iter().next().unwrap();
    let (&b, &(lb, lmc_b)) = cas.iter().last().unwrap();
    let host = &topo.nodes[a].name;
    let path_at = |s: u16, d: u16| {
        let out = (sim.client_at("saquery".as_ref(), host))
            .args(["PR", "--slid", &s.to_string(), "--dlid", &d.to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        fields(&text, "slid") == [s] && fields(&text, "dlid") == [d]
    };
    let mut by_lids = Vec::new();
    for i in 0..(1u16 << lmc_a) {
        for j in 0..(1u16 << lmc_b) {
            by_lids.push(((i, j), path_at(la + i, lb + j)));
        }
    }
    let next = lb + (1u16 << lmc_b);
    let held = by_guid
        .values()
        .any(|&(l, m)| next >= l && u32::from(next) < u32::from(l) + (1u32 << m));
    let past = (!held).then(|| path_at(la, next));
    let gid = |i: usize| {
        std::net::Ipv6Addr::from((0xfe80u128 << 112) | u128::from(topo.nodes[i].guid + 1))
            .to_string()
    };
    let out = (sim.client_at("saquery".as_ref(), host))
        .args(["PR", "--sgid-to-dgid", &format!("{}-{}", gid(a), gid(b))])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // libumad2sim passes 256 bytes of the answer, and damages its last
    // 32 (the README's osmtest table): the first two records are whole.
    let by_gids = (fields(&text, "slid").into_iter().take(2))
        .zip(fields(&text, "dlid"))
        .zip(fields(&text, "preference"))
        .map(|((s, d), p)| (s.wrapping_sub(la), d.wrapping_sub(lb), p))
        .collect();
    Seen {
        cas,
        switch_lmcs,
        switches,
        to_switches,
        pairs,
        spread,
        routes,
        first_hops,
        by_lids,
        past,
        by_gids,
    }
}

#[test]
fn lmc_2_as_opensm_gives_it() {
    if !peers_with_smpquery("lmc_ibsim") {
        return;
    }
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-lmc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wait = Duration::from_secs(60);
    // The routing engine: each SM's default (min-hop), or fat-tree for
    // both (OpenSM's -R ftree, which refuses LMC above 0 and falls back
    // to min-hop; ibkit's routes each LID by d-mod-k).
    for (spec, served, ftree) in [
        ("mport-ntree:4:3", false, false),
        ("mport-ntree:4:3", true, false),
        ("fat-tree-324", false, false),
        ("fat-tree-324", false, true),
    ] {
        let topo = Topology::from_spec(spec).unwrap();
        let on = if served { "served fabric" } else { "ibsim" };
        let routing = if ftree { ", ftree" } else { "" };
        let on = &format!("{spec} on {on}{routing}");
        let mut seen = Vec::new();
        let mut fell_back = false;
        for opensm in [true, false] {
            let (o_args, i_args): (&[&str], &[&str]) = if ftree {
                (
                    &["-l", "2", "-R", "ftree"],
                    &["--lmc", "2", "--routing", "ftree"],
                )
            } else {
                (&["-l", "2"], &["--lmc", "2"])
            };
            let (sim, sm) = simulator_and_sm(
                exe,
                (spec, &topo),
                served,
                &dir,
                wait,
                opensm.then_some(o_args),
                i_args,
            );
            if opensm && ftree {
                let log = std::fs::read_to_string(dir.join("opensm.log")).unwrap_or_default();
                fell_back = log.contains("LMC > 0 is not supported by fat-tree routing");
                println!("OpenSM on {on}: its log says it fell back to min-hop: {fell_back}");
            }
            let s = look(sim.as_ref(), &topo);
            let who = if opensm { "OpenSM" } else { "ibkit" };
            let answered = s.by_lids.iter().filter(|(_, f)| *f).count();
            println!(
                "{who} on {on}: {} CAs with LMC {:?}, switches LMC {:?}; {} of {} \
                 remote pairs with 2 or more routes over their 4 LIDs ({:.2} routes a pair, \
                 {:.2} first hops); saquery by LIDs: {answered} of {} answered; by GIDs: {:?}",
                s.cas.len(),
                s.cas.values().map(|v| v.1).collect::<BTreeSet<_>>(),
                s.switch_lmcs,
                s.spread,
                s.pairs,
                s.routes as f64 / s.pairs.max(1) as f64,
                s.first_hops as f64 / s.pairs.max(1) as f64,
                s.by_lids.len(),
                s.by_gids,
            );
            let _ = sm.stop(Duration::from_secs(5));
            seen.push(s);
        }
        let (o, i) = (&seen[0], &seen[1]);
        for s in [o, i] {
            assert!(
                s.cas.values().all(|&(l, m)| m == 2 && l % 4 == 0),
                "{on}: {:?}",
                s.cas
            );
            assert_eq!(s.switch_lmcs, BTreeSet::from([0]), "{on}");
            assert!(s.pairs > 0);
        }
        // ibkit spreads every remote pair's LIDs at least as OpenSM does:
        // as many pairs with more than one route, as many routes and as
        // many first hops.
        for (what, a, b) in [
            ("pairs spread", i.spread, o.spread),
            ("routes", i.routes, o.routes),
            ("first hops", i.first_hops, o.first_hops),
        ] {
            assert!(a >= b, "{on}: {what}: ibkit {a}, OpenSM {b}");
        }
        assert_eq!(i.spread, i.pairs, "{on}");
        if spec == "mport-ntree:4:3" {
            // Three levels: OpenSM's min-hop gives each pair 2 routes over
            // its 4 LIDs; ibkit turns the LIDs level by level and uses the
            // 4 shortest paths of every pair across the top (3.71 a pair).
            assert!(
                i.routes > o.routes,
                "{on}: {} against {}",
                i.routes,
                o.routes
            );
        }
        if spec == "fat-tree-324" {
            // Every pair's four LIDs leave the source's leaf by four up
            // links (and OpenSM's ftree hands LMC to min-hop).
            assert_eq!(i.first_hops, 4 * i.pairs, "{on}");
            assert_eq!(fell_back, ftree, "{on}");
        }
        // saquery by LIDs: the same pairs answer, the four by four of
        // the ports' ranges; the LID past them, where nobody holds it,
        // under neither.
        assert_eq!(i.by_lids, o.by_lids, "{on}: saquery by LIDs");
        assert_ne!(i.past, Some(true), "{on}");
        assert_ne!(o.past, Some(true), "{on}");
        assert_eq!(
            i.by_lids.iter().filter(|(_, f)| *f).count(),
            16,
            "{on}: {:?}",
            i.by_lids
        );
        // By GIDs: the same order (same offsets first, Preference 0).
        assert_eq!(i.by_gids, [(0, 0, 0), (1, 1, 0)], "{on}: saquery by GIDs");
        assert_eq!(i.by_gids, o.by_gids, "{on}: saquery by GIDs");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM's `lmc_esp0 TRUE` (in its configuration file) beside `ibkit sm
/// --lmc 2 --lmc-esp0`, on mport-ntree:4:3 whose even-numbered switches
/// have an enhanced port 0 (ibsim's `enhanced port 0` in the topology
/// file, which ibkit's served fabric reads too): those switches hold four
/// aligned LIDs, every one routed to them; the others one.
#[test]
fn lmc_esp0_as_opensm_gives_it() {
    if !peers_with_smpquery("lmc_ibsim") {
        return;
    }
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-esp0-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wait = Duration::from_secs(60);
    let mut topo = Topology::from_spec("mport-ntree:4:3").unwrap();
    let enhanced = |i: usize| i % 2 == 0;
    for (i, n) in topo.nodes.iter_mut().enumerate() {
        n.enhanced_port0 = n.ports > 1 && enhanced(i);
    }
    let file = dir.join("esp0.net");
    std::fs::write(&file, fabric::topology::to_ibnetdiscover(&topo)).unwrap();
    let spec = format!("file:{}", file.display());
    let conf = dir.join("opensm-esp0.conf");
    std::fs::write(&conf, "lmc_esp0 TRUE\n").unwrap();
    let conf = conf.display().to_string();
    for served in [false, true] {
        let on = if served { "served fabric" } else { "ibsim" };
        let mut seen = Vec::new();
        for opensm in [true, false] {
            let (sim, sm) = simulator_and_sm(
                exe,
                (&spec, &topo),
                served,
                &dir,
                wait,
                opensm.then_some(&["-l", "2", "-F", &conf][..]),
                &["--lmc", "2", "--lmc-esp0"],
            );
            let s = look(sim.as_ref(), &topo);
            // saquery from the first CA to the first enhanced switch, at
            // each of its LIDs.
            let (&a, &(la, _)) = s.cas.iter().next().unwrap();
            let (_, &(ls, _)) = (s.switches.iter()).find(|(&i, _)| enhanced(i)).unwrap();
            let answered = (0..4)
                .filter(|k| {
                    let out = (sim.client_at("saquery".as_ref(), &topo.nodes[a].name))
                        .args([
                            "PR",
                            "--slid",
                            &la.to_string(),
                            "--dlid",
                            &(ls + k).to_string(),
                        ])
                        .output()
                        .unwrap();
                    let text = String::from_utf8_lossy(&out.stdout);
                    fields(&text, "dlid") == [ls + k]
                })
                .count();
            // Records asked by a LID above a port's base (the CA's second,
            // the enhanced switch's second) are the port's, with its base.
            let record_lids: Vec<Vec<u16>> = [
                ("NR", la + 1, "lid"),
                ("PIR", la + 1, "EndPortLid"),
                ("LR", la + 1, "FromLID"),
                ("SWIR", ls + 1, "LID"),
                ("NR", ls + 1, "lid"),
            ]
            .iter()
            .map(|&(q, lid, field)| {
                let out = (sim.client_at("saquery".as_ref(), &topo.nodes[a].name))
                    .args([q, &lid.to_string()])
                    .output()
                    .unwrap();
                fields(&String::from_utf8_lossy(&out.stdout), field)
            })
            .collect();
            println!(
                "saquery NR, PIR, LR at CA LID {} and SWIR, NR at switch LID {}: {record_lids:?}",
                la + 1,
                ls + 1
            );
            assert_eq!(
                record_lids,
                [vec![la], vec![la], vec![la], vec![ls], vec![ls]],
                "{on}: records by a LID above the base"
            );
            let who = if opensm { "OpenSM" } else { "ibkit" };
            let (pairs, spread, routes) = s.to_switches;
            println!(
                "{who} on {on}: switch LMCs {:?}; CA to enhanced switch: {spread} of {pairs} \
                 pairs with 2 or more routes over its 4 LIDs ({:.2} routes a pair); \
                 saquery PR to its 4 LIDs: {answered} answered",
                s.switches.values().map(|v| v.1).collect::<Vec<_>>(),
                routes as f64 / pairs.max(1) as f64,
            );
            let _ = sm.stop(Duration::from_secs(5));
            seen.push((s, answered));
        }
        for (s, answered) in &seen {
            for (&i, &(lid, lmc)) in &s.switches {
                let want = if enhanced(i) { 2 } else { 0 };
                assert_eq!(lmc, want, "{on}: switch {i}");
                assert_eq!(lid % (1 << lmc), 0, "{on}: switch {i}'s LID {lid}");
            }
            assert!(s.cas.values().all(|&(l, m)| m == 2 && l % 4 == 0));
            assert!(s.to_switches.0 > 0);
            assert_eq!(*answered, 4, "{on}");
        }
        // ibkit spreads a switch's LIDs at least as OpenSM does.
        let (o, i) = (&seen[0].0, &seen[1].0);
        assert!(
            i.to_switches.1 >= o.to_switches.1,
            "{on}: {:?} {:?}",
            i.to_switches,
            o.to_switches
        );
        assert!(
            i.to_switches.2 >= o.to_switches.2,
            "{on}: {:?} {:?}",
            i.to_switches,
            o.to_switches
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
