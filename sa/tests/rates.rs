//! Path and group rates over cables from 1x SDR to 12x HDR
//! (`mixed-rates`): a PathRecord's rate is the slowest cable on the way,
//! extended speeds included; a 2x or HDR rate is fixed for an end whose
//! port does not say it knows them, as OpenSM fixes it; and
//! `use_original_extended_sa_rates_only` keeps every answer at 300 Gb/s
//! or below. (Checked against OpenSM on both simulators in
//! `ibkit/tests/sa_ibsim.rs`.)

mod common;

use common::*;
use fabric::topology::{LaneSpeed, LinkRate, Topology};
use mad_core::mad::Method;
use mad_core::sa::{McMemberRecord, PathRecord, SaStatus};
use mad_core::types::{Gid, PKey};
use sa::{Sa, SaConfig};

/// A cable's rate in Gb/s, from the topology.
fn gbps(r: LinkRate) -> f64 {
    let lane = match r.speed {
        LaneSpeed::Sdr => 2.5,
        LaneSpeed::Ddr => 5.0,
        LaneSpeed::Qdr => 10.0,
        LaneSpeed::Fdr => 14.0,
        LaneSpeed::Edr => 25.0,
        LaneSpeed::Hdr => 50.0,
        LaneSpeed::Ndr => 100.0,
    };
    lane * f64::from(r.width)
}

/// The IBA rate code of a rate in Gb/s (IBA 15.2.5.16, table 205 and its
/// 1.3 to 1.5 additions), written out here apart from the SA's table.
fn code(g: f64) -> u8 {
    let table = [
        (2.5, 2),
        (5.0, 5),
        (10.0, 3),
        (14.0, 11),
        (20.0, 6),
        (25.0, 15),
        (28.0, 19),
        (30.0, 4),
        (40.0, 7),
        (50.0, 20),
        (56.0, 12),
        (60.0, 8),
        (80.0, 9),
        (100.0, 16),
        (112.0, 13),
        (120.0, 10),
        (168.0, 14),
        (200.0, 17),
        (300.0, 18),
        (400.0, 21),
        (600.0, 22),
    ];
    table
        .iter()
        .find(|x| x.0 == g)
        .unwrap_or_else(|| panic!("{g} Gb/s"))
        .1
}

/// What node `n`'s cables make it say: (a 2x cable, an HDR one, an
/// extended speed).
fn knows(t: &Topology, n: usize) -> (bool, bool, bool) {
    let rates: Vec<LinkRate> = (1..=t.nodes[n].ports).map(|p| t.rate_of(n, p)).collect();
    (
        rates.iter().any(|r| r.width == 2),
        rates.iter().any(|r| r.speed >= LaneSpeed::Hdr),
        rates.iter().any(|r| r.speed.is_extended()),
    )
}

/// The node whose name ends with `tail` (` 12xHDR`).
fn named(f: &fabric::sim::Fabric, tail: &str) -> usize {
    (f.topo.nodes.iter())
        .position(|n| n.name.ends_with(tail))
        .unwrap()
}

/// The slowest cable from host `a` to host `b`, in Gb/s.
fn slowest(f: &fabric::sim::Fabric, a: usize, b: usize) -> f64 {
    let (path, _) = f.trace(a, f.nodes[b].lid());
    (path.iter())
        .filter(|&&(n, p)| f.topo.peer_of(n, p).is_some())
        .map(|&(n, p)| gbps(f.topo.rate_of(n, p)))
        .fold(f64::MAX, f64::min)
}

/// Every pair of hosts: (a, b, the PathRecord's rate code).
fn path_rates(cfg: SaConfig) -> (fabric::sim::Fabric, Vec<(usize, usize, u8)>) {
    let (f, sm) = up("mixed-rates");
    let mut sa = Sa::new(cfg);
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .collect();
    let me = hosts(&f)[0].1;
    let m = mask::<PathRecord>(&["slid", "dlid"]);
    let mut v = Vec::new();
    for &a in &cas {
        for &b in &cas {
            let q = PathRecord {
                slid: f.nodes[a].lid(),
                dlid: f.nodes[b].lid(),
                ..PathRecord::default()
            };
            let (st, r) = one(&mut sa, &sm, me, &ask(Method::Get, &q, m, 0), 0);
            assert_eq!(st, SaStatus::Ok, "{a} → {b}");
            let pr: PathRecord = r.record().unwrap();
            v.push((a, b, pr.rate));
        }
    }
    (f, v)
}

#[test]
fn a_paths_rate_is_its_slowest_cable_fixed_for_ends_that_do_not_know_it() {
    let (f, rates) = path_rates(SaConfig::default());
    let (mut fixed, mut extended) = (0, 0);
    for (a, b, got) in rates {
        let slowest = slowest(&f, a, b);
        let mut want = code(slowest);
        // OpenSM's fixes, for the source then the destination.
        for end in [a, b] {
            let (two, hdr, ext) = knows(&f.topo, end);
            want = match want {
                19 if !two && ext => 15,
                19 if !two => 6,
                20 if !two && !hdr => 7,
                21 | 22 if !hdr => 18,
                w => w,
            };
        }
        let name = |i: usize| &f.topo.nodes[i].name;
        assert_eq!(
            got,
            want,
            "{} → {}: slowest {slowest} Gb/s",
            name(a),
            name(b)
        );
        fixed += usize::from(want != code(slowest));
        extended += usize::from(want >= 11);
    }
    assert!(
        fixed > 0 && extended > 0,
        "{fixed} fixed, {extended} extended"
    );
}

#[test]
fn the_original_rates_stop_at_300_gbps() {
    let (f, rates) = path_rates(SaConfig {
        use_original_extended_sa_rates_only: true,
        ..SaConfig::default()
    });
    let own = |name: &str| {
        let n = named(&f, name);
        rates.iter().find(|r| r.0 == n && r.1 == n).unwrap().2
    };
    assert!(rates.iter().all(|r| r.2 <= 18), "{rates:?}");
    // 600 Gb/s → 300, 50 (2x EDR) → 40, 28 (2x FDR) → 25; 200 stays.
    assert_eq!(
        [own(" 12xHDR"), own(" 2xEDR"), own(" 2xFDR"), own(" 4xHDR")],
        [18, 7, 15, 17]
    );
}

#[test]
fn a_group_takes_its_creators_extended_rate_and_refuses_slower_ports() {
    for original in [false, true] {
        let (f, sm) = up("mixed-rates");
        let mut sa = Sa::new(SaConfig {
            use_original_extended_sa_rates_only: original,
            ..SaConfig::default()
        });
        let by = |name: &str| {
            let i = named(&f, name);
            (
                hosts(&f).into_iter().find(|h| h.0 == i).unwrap().1,
                gid_of(&f, i),
            )
        };
        let (big, big_gid) = by(" 12xHDR");
        let mut r = member(Gid([0; 16]), big_gid, 1);
        r.pkey = PKey(0xFFFF);
        let (st, m) = one(
            &mut sa,
            &sm,
            big,
            &ask(Method::Set, &r, mask::<McMemberRecord>(CREATE), 0),
            0,
        );
        assert_eq!(st, SaStatus::Ok);
        let g: McMemberRecord = m.record().unwrap();
        assert_eq!(g.rate, if original { 18 } else { 22 }, "{original}");
        // A 4x DDR host (20 Gb/s) cannot meet it; a 12x HDR group at 300
        // is met by an 8x HDR host (400).
        for (host, ok) in [(" 4xDDR", false), (" 8xHDR", true)] {
            let (from, gid) = by(host);
            let mut j = member(g.mgid, gid, 1);
            j.qkey = g.qkey;
            let names = ["mgid", "port_gid", "join_state"];
            let (st, _) = one(
                &mut sa,
                &sm,
                from,
                &ask(Method::Set, &j, mask::<McMemberRecord>(&names), 0),
                0,
            );
            let want_ok = ok && original;
            assert_eq!(st == SaStatus::Ok, want_ok, "{host}, {original}: {st:?}");
        }
    }
}

/// OpenSM 3.3.24's `max_rate_enum`: every path's rate is its slowest
/// cable's code stepped down under the limit (`limit_rate`), with no
/// 2x/HDR fix; with `use_original_extended_sa_rates_only` too, the lower
/// of the two limits holds.
#[test]
fn max_rate_enum_caps_every_path_at_a_code_the_limit_allows() {
    for (limit, original, effective) in
        [(7, false, 7), (16, false, 16), (22, true, 18), (7, true, 7)]
    {
        let cfg = SaConfig {
            max_rate_enum: limit,
            use_original_extended_sa_rates_only: original,
            ..SaConfig::default()
        };
        assert_eq!(cfg.rate_limit(), effective);
        let (f, rates) = path_rates(cfg);
        for &(a, b, got) in &rates {
            let want = sa::path::limit_rate(code(slowest(&f, a, b)), effective);
            assert_eq!(got, want, "{a} → {b} under {limit}");
            assert!(got <= effective || got == code(slowest(&f, a, b)));
        }
        let own = |name: &str| {
            let n = named(&f, name);
            rates.iter().find(|r| r.0 == n && r.1 == n).unwrap().2
        };
        println!(
            "max_rate_enum {limit}, original {original}: 12x HDR {}, 2x EDR {}, 4x DDR {}",
            own(" 12xHDR"),
            own(" 2xEDR"),
            own(" 4xDDR")
        );
    }
    // 600 Gb/s under 7 (40 Gb/s) is 40; 2x EDR (50) is 40; 4x DDR (20)
    // stays.
    let (f, rates) = path_rates(SaConfig {
        max_rate_enum: 7,
        ..SaConfig::default()
    });
    let own = |name: &str| {
        let n = named(&f, name);
        rates.iter().find(|r| r.0 == n && r.1 == n).unwrap().2
    };
    assert_eq!([own(" 12xHDR"), own(" 2xEDR"), own(" 4xDDR")], [7, 7, 6]);
}
