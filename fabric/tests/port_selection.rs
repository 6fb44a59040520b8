//! How min-hop and up*/down* pick their ports, as a site tunes OpenSM's
//! ([`SmConfig::port_selection`]): `hop_weights_file` steers min-hop off
//! a link, `port_search_ordering_file`, `port_shifting` and
//! `scatter_ports` change which of equally used best ports a route takes,
//! and none of them costs a shortest path, a balanced leaf, or (under
//! up*/down*) deadlock freedom.

use fabric::sim::{bring_up, Fabric, SimConfig};
use smi::sm::{Engine, PortSelection, Sm, SmConfig};

const SPEC: &str = "fat-tree-324";

fn up(routing: Engine, sel: PortSelection, order: Vec<u64>) -> (Fabric, Sm) {
    let cfg = SmConfig {
        routing,
        port_selection: sel,
        routing_order: order,
        ..SmConfig::default()
    };
    let (f, sm, up) = bring_up(SPEC, SimConfig::default(), cfg).unwrap();
    assert!(up, "{:?}", sm.error());
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{routing:?}");
    if routing == Engine::UpDown {
        assert!(sm.deadlock_free());
    }
    (f, sm)
}

/// Every switch's table, by node index.
fn tables(sm: &Sm) -> Vec<(usize, Vec<u8>)> {
    sm.lfts().map(|(i, t)| (i, t.to_vec())).collect()
}

/// The leaves (switches with a host), each with its node GUID and its
/// ports to other switches.
fn leaves(sm: &Sm) -> Vec<(usize, u64, Vec<u8>)> {
    let mut out = Vec::new();
    for &i in sm.graph_switches() {
        let n = &sm.nodes()[i];
        let to = |p: usize, sw: bool| {
            n.ports[p]
                .peer
                .is_some_and(|(m, _)| sm.nodes()[m].is_switch() == sw)
        };
        if (1..n.ports.len()).any(|p| to(p, false)) {
            let up = (1..n.ports.len()).filter(|&p| to(p, true)).map(|p| p as u8);
            out.push((i, n.info.node_guid.0, up.collect()));
        }
    }
    out
}

/// Per switch and destination LID of the routing graph, the switch hops
/// the tables take there.
fn hops(sm: &Sm) -> Vec<u32> {
    use smi::sm::routing::{destinations, PortTo};
    let g = sm.routing_graph();
    let t: Vec<&[u8]> = sm.lfts().map(|(_, t)| t).collect();
    let mut out = Vec::new();
    for s in 0..g.ports.len() {
        for (lid, dest, _) in destinations(g) {
            let (mut at, mut n) = (s, 0);
            while at != dest {
                match g.ports[at][usize::from(t[at][usize::from(lid)])] {
                    PortTo::Switch(m, _) => at = m,
                    _ => panic!("switch {at} does not lead to LID {lid}"),
                }
                n += 1;
                assert!(n < 64, "LID {lid} loops");
            }
            out.push(n);
        }
    }
    out
}

/// Every LID a switch routes out of `port`.
fn routed_out(t: &[u8], port: u8) -> usize {
    t.iter().skip(1).filter(|&&p| p == port).count()
}

/// The worst spread over the leaves of the routes to hosts over a leaf's
/// up ports (the data traffic, which min-hop balances as OpenSM's does):
/// the most one up port carries less the fewest.
fn worst_spread(sm: &Sm) -> usize {
    let t = tables(sm);
    let hosts: Vec<usize> = (smi::sm::routing::destinations(sm.routing_graph()).iter())
        .filter(|d| d.2 != 0)
        .map(|d| usize::from(d.0))
        .collect();
    let mut worst = 0;
    for (i, _, up) in leaves(sm) {
        let table = &t.iter().find(|(k, _)| *k == i).unwrap().1;
        let counts: Vec<usize> = (up.iter())
            .map(|&p| hosts.iter().filter(|&&l| table[l] == p).count())
            .collect();
        worst = worst.max(counts.iter().max().unwrap() - counts.iter().min().unwrap());
    }
    worst
}

#[test]
fn a_weighed_port_carries_only_what_no_lighter_path_can() {
    let (_, plain) = up(Engine::MinHop, PortSelection::default(), Vec::new());
    let (leaf, guid, up_ports) = leaves(&plain).swap_remove(0);
    let port = up_ports[0];
    let table = |sm: &Sm| tables(sm).into_iter().find(|(k, _)| *k == leaf).unwrap().1;
    let before = routed_out(&table(&plain), port);
    assert!(before > 0);
    let weighed = |w: u8| {
        let sel = PortSelection {
            hop_weights: vec![(guid, port, w), (0xdead_beef, 1, 9), (guid, 99, 9)],
            ..PortSelection::default()
        };
        up(Engine::MinHop, sel, Vec::new()).1
    };
    // Weight 10: every LID has a lighter way (another spine and a leaf,
    // 3), the spine behind the port included.
    let heavy = weighed(10);
    assert_eq!(routed_out(&table(&heavy), port), 0);
    // Weight 2: only that spine's own LID (2 against 3); a host behind
    // another leaf is 3 that way against 2.
    let light = weighed(2);
    assert_eq!(routed_out(&table(&light), port), 1);
    // No other switch routes a host's LID through the leaf (a host is
    // one hop down from a spine, two from a leaf), so no other switch's
    // route to a host moves; a route to a switch's own LID may (a spine
    // reaches another by any leaf, this one's hop now the heavier).
    let hosts: Vec<usize> = (smi::sm::routing::destinations(plain.routing_graph()).iter())
        .filter(|d| d.2 != 0)
        .map(|d| usize::from(d.0))
        .collect();
    let mut moved = Vec::new();
    for sm in [&heavy, &light] {
        let mut switch_lids = 0;
        for ((i, t), (_, p)) in tables(sm).into_iter().zip(tables(&plain)) {
            if i == leaf {
                continue;
            }
            assert!(hosts.iter().all(|&l| t[l] == p[l]), "switch {i}");
            switch_lids += t.iter().zip(&p).filter(|(a, b)| a != b).count();
        }
        moved.push(switch_lids);
    }
    println!(
        "{SPEC}: a leaf's up port weighing 10 carries 0 routes (1 at weight 2), {before} unweighed; \
         no other switch's route to a host moved, {} and {} to switches' own LIDs",
        moved[0], moved[1]
    );
}

#[test]
fn order_shift_and_scatter_keep_routes_short_and_leaves_balanced() {
    for routing in [Engine::MinHop, Engine::UpDown] {
        let (_, plain) = up(routing, PortSelection::default(), Vec::new());
        let base = worst_spread(&plain);
        // Every leaf tries its up ports last first.
        let reversed: Vec<(u64, Vec<u8>)> = (leaves(&plain).into_iter())
            .map(|(_, g, up)| (g, up.into_iter().rev().collect()))
            .collect();
        let variants = [
            (
                "search order",
                PortSelection {
                    search_order: reversed.clone(),
                    ..PortSelection::default()
                },
            ),
            (
                "port shifting",
                PortSelection {
                    shifting: true,
                    ..PortSelection::default()
                },
            ),
            (
                "scatter 7",
                PortSelection {
                    scatter: 7,
                    ..PortSelection::default()
                },
            ),
        ];
        for (name, sel) in variants {
            let (f, sm) = up(routing, sel.clone(), Vec::new());
            let spread = worst_spread(&sm);
            assert!(spread <= base.max(1), "{routing:?} {name}: {spread}");
            assert_ne!(tables(&sm), tables(&plain), "{routing:?} {name}");
            // Paths as short as the plain tables': every route's hop
            // count the same.
            assert_eq!(hops(&sm), hops(&plain), "{routing:?} {name}");
            drop(f);
            if name == "search order" && routing == Engine::MinHop {
                // Min-hop routes LIDs in ascending order, the spines'
                // first (one best port each, so every up port of a leaf
                // carries one); the first LID of another leaf then leaves
                // each leaf by the port the order names first.
                let t = tables(&sm);
                let dests = smi::sm::routing::destinations(sm.routing_graph());
                let of_leaves: Vec<usize> = (leaves(&sm).iter())
                    .map(|l| sm.graph_switches().iter().position(|&x| x == l.0).unwrap())
                    .collect();
                for (i, g, _) in leaves(&sm) {
                    let k = sm.graph_switches().iter().position(|&x| x == i).unwrap();
                    let table = &t.iter().find(|(x, _)| *x == i).unwrap().1;
                    let first = (dests.iter())
                        .filter(|d| d.1 != k && of_leaves.contains(&d.1))
                        .map(|d| usize::from(d.0))
                        .min()
                        .unwrap();
                    let named = &reversed.iter().find(|r| r.0 == g).unwrap().1;
                    assert_eq!(table[first], named[0], "leaf {g:#x}");
                }
            }
            println!(
                "{SPEC} {routing:?} {name}: at worst {spread} host route(s) between a leaf's most \
                 and least used up ports ({base} plain), tables differ, none unreachable or looping"
            );
        }
        // The same seed routes the same; another seed otherwise.
        let scatter = |seed: u32| {
            let sel = PortSelection {
                scatter: seed,
                ..PortSelection::default()
            };
            tables(&up(routing, sel, Vec::new()).1)
        };
        assert_eq!(scatter(7), scatter(7), "{routing:?}");
        assert_ne!(scatter(7), scatter(8), "{routing:?}");
    }
}

#[test]
fn the_routing_order_is_not_scattered_when_told_not_to() {
    let (_, plain) = up(Engine::MinHop, PortSelection::default(), Vec::new());
    // One host of each leaf, routed first.
    let mut hosts = Vec::new();
    for (i, _, _) in leaves(&plain) {
        let n = &plain.nodes()[i];
        let (m, _) = (1..n.ports.len())
            .filter_map(|p| n.ports[p].peer)
            .find(|&(m, _)| !plain.nodes()[m].is_switch())
            .unwrap();
        hosts.push((plain.nodes()[m].info.port_guid.0, plain.nodes()[m].lid));
    }
    let order: Vec<u64> = hosts.iter().map(|h| h.0).collect();
    let at_hosts = |sel: PortSelection| -> Vec<Vec<u8>> {
        let (_, sm) = up(Engine::MinHop, sel, order.clone());
        (sm.lfts())
            .map(|(_, t)| hosts.iter().map(|h| t[usize::from(h.1)]).collect())
            .collect()
    };
    let ordered = at_hosts(PortSelection::default());
    let scattered = at_hosts(PortSelection {
        scatter: 7,
        ..PortSelection::default()
    });
    let kept = at_hosts(PortSelection {
        scatter: 7,
        order_no_scatter: true,
        ..PortSelection::default()
    });
    assert_eq!(kept, ordered);
    assert_ne!(scattered, ordered);
}

/// A new selection on a running subnet ([`Sm::set_port_selection`], what
/// SIGHUP does with a changed file or option) leaves the tables a start
/// with it would, sending only the blocks that change; the same again
/// sends nothing.
#[test]
fn a_new_selection_on_a_running_subnet_routes_as_a_start_with_it() {
    use mad_core::attr::AttributeId;
    use mad_core::Method;
    let (mut f, mut sm) = up(Engine::MinHop, PortSelection::default(), Vec::new());
    let (_, guid, up_ports) = leaves(&sm).swap_remove(0);
    let sel = PortSelection {
        hop_weights: vec![(guid, up_ports[0], 10)],
        ..PortSelection::default()
    };
    let (_, fresh) = up(Engine::MinHop, sel.clone(), Vec::new());
    let sets = |sm: &Sm| {
        sm.stats()
            .count(Method::Set, AttributeId::LinearForwardingTable)
    };
    let before = sets(&sm);
    let now = f.now_ns() / 1_000_000;
    assert!(sm.set_port_selection(sel.clone(), now));
    assert!(f.run(&mut sm));
    assert_eq!(tables(&sm), tables(&fresh));
    let sent = sets(&sm) - before;
    assert!(sent > 0 && sent < sets(&fresh), "{sent}");
    let now = f.now_ns() / 1_000_000;
    assert!(!sm.set_port_selection(sel, now));
    assert!(f.run(&mut sm));
    assert_eq!(sets(&sm) - before, sent);
    println!(
        "{SPEC}: a hop weight given to the running SM: {sent} Set(LFT), {} at bring-up",
        sets(&fresh)
    );
}

extern "C" {
    fn srandom(seed: u32);
    fn random() -> std::ffi::c_long;
}

/// `scatter_ports` draws what OpenSM draws: [`CRandom`](smi::sm::routing::CRandom)
/// gives the C library's own `random()` sequence after `srandom(seed)`,
/// for seeds small, large (above 2^31) and 0 (which the C library takes as 1),
/// 10,000 draws each.
#[test]
fn scatter_draws_the_c_librarys_random_sequence() {
    use smi::sm::routing::CRandom;
    for seed in [0u32, 1, 7, 12345, 0x8000_0001, u32::MAX] {
        let mut ours = CRandom::new(seed);
        // The only caller of the C generator in this test binary.
        unsafe { srandom(seed) };
        for i in 0..10_000 {
            let theirs = unsafe { random() } as u32;
            assert_eq!(ours.next_u31(), theirs, "seed {seed}, draw {i}");
        }
    }
}

/// Under LMC, whichever rule routes the LIDs above a port's base (ibkit's
/// spread or OpenSM's, `lmc_as_opensm`) and however the ports are picked
/// (port shifting, every switch's search order reversed), on a random
/// fabric: every LID of every port is reached from every node, min-hop's
/// and dimension order's routes to each of them are shortest, and
/// up*/down*'s are free of deadlock.
fn lmc_on_a_random_fabric(
    switches: usize,
    seed: u32,
    lmc: u8,
    routing: Engine,
    sel: PortSelection,
    reversed: bool,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::prelude::*;
    let spec = format!("random:{switches}:{seed}");
    let bring = |sel: PortSelection| {
        let cfg = SmConfig {
            routing,
            lmc,
            port_selection: sel,
            ..SmConfig::default()
        };
        bring_up(&spec, SimConfig::default(), cfg).unwrap()
    };
    let (f, sm, up) = if reversed {
        let (_, first, _) = bring(sel.clone());
        let order = (first.graph_switches().iter())
            .map(|&i| {
                let n = &first.nodes()[i];
                (n.info.node_guid.0, (1..n.ports.len() as u8).rev().collect())
            })
            .collect();
        bring(PortSelection {
            search_order: order,
            ..sel.clone()
        })
    } else {
        bring(sel.clone())
    };
    prop_assert!(up, "{}: {:?}", spec, sm.error());
    let v = f.verify();
    prop_assert!(
        v.ok(),
        "{} {:?} LMC {} {:?}: {}",
        spec,
        routing,
        lmc,
        sel,
        v
    );
    let g = sm.routing_graph();
    let cas: usize = (g.ports.iter().flatten())
        .filter(|t| matches!(t, smi::sm::routing::PortTo::Ca(..)))
        .count();
    let dests = smi::sm::routing::destinations(g);
    prop_assert_eq!(dests.len(), g.ports.len() + (cas << lmc), "{}", spec);
    prop_assert_eq!(
        v.lids as usize,
        dests.len(),
        "{}: every LID walked to",
        spec
    );
    if routing != Engine::UpDown {
        let d = smi::sm::routing::distances(g);
        let want: Vec<u32> = (0..g.ports.len())
            .flat_map(|s| dests.iter().map(move |&(_, t, _)| (s, t)))
            .map(|(s, t)| u32::from(d[s][t]))
            .collect();
        prop_assert_eq!(
            hops(&sm),
            want,
            "{} LMC {}: a route longer than it must be",
            spec,
            lmc
        );
    } else {
        prop_assert!(sm.deadlock_free(), "{}", spec);
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 48,
        ..proptest::prelude::ProptestConfig::default()
    })]

    #[test]
    fn under_lmc_every_lid_is_reached_by_the_routes_either_rule_gives(
        switches in 2usize..24,
        seed in 0u32..1_000_000,
        lmc in 1u8..=3,
        engine in 0usize..3,
        lmc_as_opensm in proptest::prelude::any::<bool>(),
        shifting in proptest::prelude::any::<bool>(),
        reversed in proptest::prelude::any::<bool>(),
    ) {
        let routing = [Engine::MinHop, Engine::UpDown, Engine::Dor][engine];
        let sel = PortSelection { lmc_as_opensm, shifting, ..PortSelection::default() };
        lmc_on_a_random_fabric(switches, seed, lmc, routing, sel, reversed)?;
    }
}

/// Under `lmc_as_opensm`, at each leaf of `tests/data/chassis.topo`
/// (spines 0 and 1 one chassis, 2 and 3 another, on leaf ports 5-8) the
/// second LID of every host on another leaf leaves for the other chassis
/// than its base: OpenSM's "other system first". Read from the
/// SystemImageGUIDs the switches report: the same file with every spine a
/// system of its own sends some second LIDs into the base's chassis.
#[test]
fn under_lmc_a_ports_second_lid_leaves_for_another_chassis() {
    let spec = "file:tests/data/chassis.topo";
    let text = std::fs::read_to_string("tests/data/chassis.topo").unwrap();
    let flat: String = (text.lines())
        .filter(|l| !l.starts_with("sysimgguid="))
        .map(|l| format!("{l}\n"))
        .collect();
    let flat_file = std::env::temp_dir().join(format!("ibkit-flat-{}.topo", std::process::id()));
    std::fs::write(&flat_file, flat).unwrap();
    let flat_spec = format!("file:{}", flat_file.display());
    // (leaf, remote host's base LID, port of the base, port of base + 1)
    let pairs = |spec: &str| {
        let cfg = SmConfig {
            lmc: 2,
            port_selection: PortSelection {
                lmc_as_opensm: true,
                ..PortSelection::default()
            },
            ..SmConfig::default()
        };
        let (f, sm, up) = bring_up(spec, SimConfig::default(), cfg).unwrap();
        assert!(up, "{spec}: {:?}", sm.error());
        assert!(f.verify().ok(), "{spec}: {}", f.verify());
        let g = sm.routing_graph();
        let systems: std::collections::BTreeSet<u64> = (sm.graph_switches().iter())
            .map(|&i| sm.nodes()[i].info.system_image_guid.0)
            .collect();
        let t: Vec<&[u8]> = sm.lfts().map(|(_, t)| t).collect();
        let mut out = Vec::new();
        for (s, ports) in g.ports.iter().enumerate() {
            if !ports
                .iter()
                .any(|p| matches!(p, smi::sm::routing::PortTo::Ca(..)))
            {
                continue;
            }
            for (other, theirs) in g.ports.iter().enumerate() {
                for p in theirs {
                    if let smi::sm::routing::PortTo::Ca(base, _) = *p {
                        if other != s {
                            let b = usize::from(base);
                            out.push((s, base, t[s][b], t[s][b + 1]));
                        }
                    }
                }
            }
        }
        (systems.len(), out)
    };
    let chassis = |port: u8| (port - 5) / 2;
    let (systems, routes) = pairs(spec);
    // Two spine chassis and four leaves of their own.
    assert_eq!(systems, 6);
    assert_eq!(routes.len(), 4 * 9);
    for &(s, base, p0, p1) in &routes {
        assert!((5..=8).contains(&p0) && (5..=8).contains(&p1));
        assert_ne!(
            chassis(p0),
            chassis(p1),
            "leaf {s}: LIDs {base} and {} both to chassis {}",
            base + 1,
            chassis(p0)
        );
    }
    let (systems, routes) = pairs(&flat_spec);
    let _ = std::fs::remove_file(&flat_file);
    assert_eq!(systems, 8);
    let same = (routes.iter())
        .filter(|&&(_, _, p0, p1)| chassis(p0) == chassis(p1))
        .count();
    assert!(same > 0, "without chassis no second LID kept its base's");
}
