//! LMC above 0 (`SmConfig::lmc`, OpenSM's `lmc`): every CA port gets
//! `2^LMC` aligned LIDs, each routed to it by every engine and spread over
//! the equal-cost links, and the SA lists the paths of a pair at every
//! pair of their LIDs in OpenSM's order, with the Preference it gives.

mod common;

use common::*;
use fabric::sim::{bring_up, Fabric, SimConfig, SimNode};
use mad_core::mad::Method;
use mad_core::sa::*;
use mad_core::{Gid, Lid};
use smi::sm::{Engine, Sm, SmConfig};
use std::collections::BTreeSet;

fn up_lmc(spec: &str, lmc: u8, routing: Engine) -> (Fabric, Sm) {
    let cfg = SmConfig {
        lmc,
        routing,
        ..SmConfig::default()
    };
    let (f, sm, up) = bring_up(spec, SimConfig::default(), cfg).unwrap();
    assert!(up, "{:?}", sm.error());
    (f, sm)
}

/// The CAs' base LIDs and LMCs as their agents hold them.
fn ca_lids(f: &Fabric) -> Vec<(usize, u16, u8)> {
    (0..f.nodes.len())
        .filter(|&i| !matches!(f.nodes[i], SimNode::Switch(_)))
        .map(|i| (i, f.nodes[i].lid().0, f.nodes[i].lmc()))
        .collect()
}

#[test]
fn every_lid_of_every_port_reaches_it_and_the_lids_of_a_port_take_distinct_paths() {
    for routing in Engine::ALL {
        let (f, sm) = up_lmc("mport-ntree:4:3", 2, routing);
        let cas = ca_lids(&f);
        assert!(cas.len() >= 8);
        let mut ranges = BTreeSet::new();
        for &(i, base, lmc) in &cas {
            assert_eq!(lmc, 2, "{routing:?}: node {i}'s LMC");
            assert!(base != 0 && base % 4 == 0, "{routing:?}: base LID {base}");
            for k in 0..4 {
                let (node, _) = sm.subnet().by_lid(Lid(base + k)).unwrap();
                assert_eq!(node.0 == 0, i == f.sm_node);
                assert!(ranges.insert(base + k), "LID {} given twice", base + k);
            }
        }
        // Switches keep one LID each.
        for (i, n) in f.nodes.iter().enumerate() {
            if let SimNode::Switch(_) = n {
                assert_eq!(n.lmc(), 0, "switch {i}");
            }
        }
        assert!(sm.subnet().indexes_agree());
        // The simulator's check walks every LID a node holds: all four of
        // every CA's from every node.
        let v = f.verify();
        assert!(v.ok(), "{routing:?}: {v}");
        assert_eq!(v.lids as usize, cas.len() * 4 + (f.nodes.len() - cas.len()));
        // Path diversity: from each CA to each CA on another leaf, the
        // four LIDs' routes are not all one route.
        let d = diversity(&f, &cas);
        println!("{routing:?} on mport-ntree:4:3: {d:?}");
        if routing == Engine::Dor {
            // Dimension order sends every LID towards the neighbour
            // behind the first best port, as OpenSM's dor: one route a
            // pair where no two links join the same switches.
            assert_eq!(d.spread, 0, "{routing:?}");
            continue;
        }
        assert_eq!(d.spread, d.pairs, "{routing:?}");
        // As many distinct routes as the leaves have shortest paths
        // between them, up to the four LIDs (2 within a subtree, 4
        // across the top).
        assert_eq!(d.routes, d.best, "{routing:?}");
    }
}

/// Under `lmc_as_opensm` min-hop and up*/down* route the LIDs above a
/// base as OpenSM does (its tables, port for port, are checked against
/// OpenSM's on ibsim in `ibkit/tests/dumps_ibsim.rs`): every LID still
/// reaches its port, the LIDs of a pair still leave by different links,
/// and the pairs get fewer distinct routes than ibkit's own spread gives
/// them, which is why the spread is the default.
#[test]
fn as_opensm_every_lid_is_reached_with_fewer_distinct_routes_than_the_spread() {
    for routing in [Engine::MinHop, Engine::UpDown] {
        let cfg = |as_opensm: bool| {
            let mut c = SmConfig {
                lmc: 2,
                routing,
                ..SmConfig::default()
            };
            c.port_selection.lmc_as_opensm = as_opensm;
            c
        };
        let mut seen = Vec::new();
        for as_opensm in [false, true] {
            let (f, sm, up) =
                bring_up("mport-ntree:4:3", SimConfig::default(), cfg(as_opensm)).unwrap();
            assert!(up, "{:?}", sm.error());
            let v = f.verify();
            assert!(v.ok(), "{routing:?}, as OpenSM {as_opensm}: {v}");
            let d = diversity(&f, &ca_lids(&f));
            println!("{routing:?}, as OpenSM {as_opensm}: {d:?}");
            assert_eq!(d.spread, d.pairs, "{routing:?}, as OpenSM {as_opensm}");
            seen.push(d.routes);
        }
        assert!(seen[1] < seen[0], "{routing:?}: {seen:?}");
    }
}

/// Shortest paths between two switches over the switch-to-switch cables
/// of `f`'s topology.
fn shortest_paths(f: &Fabric, a: usize, b: usize) -> usize {
    let t = &f.topo;
    let switch = |i: usize| t.nodes[i].ports > 1;
    let n = t.nodes.len();
    let mut dist = vec![usize::MAX; n];
    let mut count = vec![0usize; n];
    let mut q = std::collections::VecDeque::from([a]);
    (dist[a], count[a]) = (0, 1);
    while let Some(u) = q.pop_front() {
        for p in 1..=t.nodes[u].ports {
            let Some((v, _)) = t.peer_of(u, p) else {
                continue;
            };
            if !switch(v) {
                continue;
            }
            if dist[v] == usize::MAX {
                dist[v] = dist[u] + 1;
                q.push_back(v);
            }
            if dist[v] == dist[u] + 1 {
                count[v] += count[u];
            }
        }
    }
    count[b]
}

/// How a fabric's LIDs spread: over the pairs of CAs on different leaf
/// switches, those whose LIDs' routes are not all one, and the distinct
/// routes and first hops (leaf up-ports) over all of them.
#[derive(Debug, Default)]
struct Diversity {
    pairs: usize,
    spread: usize,
    routes: usize,
    first_hops: usize,
    /// The most distinct routes there can be: per pair, the shortest
    /// paths between the two leaves, at most the LIDs.
    best: usize,
}

fn diversity(f: &Fabric, cas: &[(usize, u16, u8)]) -> Diversity {
    let mut d = Diversity::default();
    for &(a, _, _) in cas {
        for &(b, base, lmc) in cas {
            if a == b || f.topo.peer[a][1].unwrap().0 == f.topo.peer[b][1].unwrap().0 {
                continue;
            }
            let routes: BTreeSet<Vec<(usize, u8)>> = (0..1u16 << lmc)
                .map(|k| {
                    let (path, walk) = f.trace(a, Lid(base + k));
                    assert!(matches!(walk, fabric::sim::Walk::Delivered(_)));
                    path
                })
                .collect();
            let (la, lb) = (f.topo.peer[a][1].unwrap().0, f.topo.peer[b][1].unwrap().0);
            d.best += shortest_paths(f, la, lb).min(1 << lmc);
            d.pairs += 1;
            d.spread += usize::from(routes.len() > 1);
            d.routes += routes.len();
            d.first_hops += routes.iter().map(|r| r[1]).collect::<BTreeSet<_>>().len();
        }
    }
    d
}

#[test]
fn on_fat_tree_324_the_four_lids_of_a_port_leave_its_leaf_by_four_up_links() {
    for routing in Engine::ALL {
        let (f, _sm) = up_lmc("fat-tree-324", 2, routing);
        let d = diversity(&f, &ca_lids(&f));
        println!("{routing:?} on fat-tree-324: {d:?}");
        assert_eq!(d.pairs, 324 * 323 - 18 * 18 * 17);
        if routing == Engine::Dor {
            // Every LID of a port by the leaf's first up link.
            assert_eq!(d.first_hops, d.pairs, "{routing:?}");
            continue;
        }
        assert_eq!(d.first_hops, 4 * d.pairs, "{routing:?}");
        assert_eq!(d.routes, d.best, "{routing:?}");
    }
}

#[test]
fn lmc_0_is_the_fabric_as_before() {
    let (f0, sm0) = up("mport-ntree:4:2");
    let (f1, sm1) = up_lmc("mport-ntree:4:2", 0, Engine::MinHop);
    assert_eq!(ca_lids(&f0), ca_lids(&f1));
    assert_eq!(sm0.stats().total(), sm1.stats().total());
}

/// The PathRecords of a GetTable from `a` to `b` by their GIDs.
fn table(sa: &mut sa::Sa, sm: &Sm, from: sa::Addr, a: Gid, b: Gid) -> Vec<PathRecord> {
    let q = PathRecord {
        sgid: a,
        dgid: b,
        ..PathRecord::default()
    };
    all(sa, sm, from, &q, mask::<PathRecord>(&["sgid", "dgid"]), 0)
}

#[test]
fn the_sa_lists_a_pairs_paths_at_every_pair_of_their_lids_as_opensm_does() {
    let (f, sm) = up_lmc("mport-ntree:4:2", 1, Engine::MinHop);
    let mut sa = new_sa();
    let h = hosts(&f);
    let ((a, from), (b, _)) = (h[0], h[h.len() - 1]);
    let (ga, gb) = (gid_of(&f, a), gid_of(&f, b));
    let (la, lb) = (f.nodes[a].lid().0, f.nodes[b].lid().0);
    // GetTable: the pairs at the same offset first (Preference 0), then
    // the others (Preference 2): 2 × 2 = 4.
    let got: Vec<(u16, u16, u8)> = table(&mut sa, &sm, from, ga, gb)
        .iter()
        .map(|p| (p.slid.0, p.dlid.0, p.preference))
        .collect();
    assert_eq!(
        got,
        [
            (la, lb, 0),
            (la + 1, lb + 1, 0),
            (la, lb + 1, 2),
            (la + 1, lb, 2),
        ]
    );
    // Get: one path, between the base LIDs (IBA 1.2 erratum: NumbPath 1).
    let q = PathRecord {
        sgid: ga,
        dgid: gb,
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["sgid", "dgid"]);
    let (st, r) = one(&mut sa, &sm, from, &ask(Method::Get, &q, m, 0), 0);
    assert_eq!(st, SaStatus::Ok);
    let p: PathRecord = r.record().unwrap();
    assert_eq!((p.slid.0, p.dlid.0, p.preference), (la, lb, 0));
    // A DLID above the base names the port at that LID, and the path
    // there is that LID's route.
    let q = PathRecord {
        sgid: ga,
        dlid: Lid(lb + 1),
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["sgid", "dlid"]);
    let (st, r) = one(&mut sa, &sm, from, &ask(Method::Get, &q, m, 0), 0);
    assert_eq!(st, SaStatus::Ok);
    let p: PathRecord = r.record().unwrap();
    assert_eq!((p.slid.0, p.dlid.0, p.dgid), (la, lb + 1, gb));
    // With the DLID fixed, a table has one path per source LID.
    let q = PathRecord {
        sgid: ga,
        dlid: Lid(lb + 1),
        ..PathRecord::default()
    };
    let got: Vec<(u16, u16)> = all(&mut sa, &sm, from, &q, m, 0)
        .iter()
        .map(|p| (p.slid.0, p.dlid.0))
        .collect();
    assert_eq!(got, [(la, lb + 1), (la + 1, lb + 1)]);
    // Past the port's LIDs there is nobody.
    let q = PathRecord {
        sgid: ga,
        dlid: Lid(lb + 2),
        ..PathRecord::default()
    };
    let lb2_free = sm.subnet().by_lid(Lid(lb + 2)).is_none();
    if lb2_free {
        let (st, _) = one(&mut sa, &sm, from, &ask(Method::Get, &q, m, 0), 0);
        assert_eq!(st, SaStatus::NoRecords);
    }
    // MultiPathRecord: NumbPath 2 gives the two disjoint ones first.
    let mut mp = MultiPathRecord {
        sgid_count: 1,
        dgid_count: 1,
        numb_path: 2,
        ..MultiPathRecord::default()
    };
    mp.gids[0] = ga;
    mp.gids[1] = gb;
    let m = mask::<MultiPathRecord>(&["sgid_count", "dgid_count", "numb_path"]);
    let segs = exchange(&mut sa, &sm, from, &ask(Method::GetMulti, &mp, m, 0), 0);
    assert_eq!(segs[0].sa_status(), SaStatus::Ok);
    let mut data: Vec<u8> = segs.iter().flat_map(|s| s.data).collect();
    if segs[0].rmpp.active() {
        data.truncate(segs[0].rmpp.payload_length_or_window as usize - 20 * segs.len());
    } else {
        data.truncate(PathRecord::SIZE);
    }
    let stride = segs[0].sa.attribute_offset as usize * 8;
    let paths: Vec<(u16, u16, u8)> = data
        .chunks(stride)
        .map(|c| PathRecord::decode(c).unwrap())
        .map(|p| (p.slid.0, p.dlid.0, p.preference))
        .collect();
    assert_eq!(paths, [(la, lb, 0), (la + 1, lb + 1, 0)]);
}

#[test]
fn vswitch_hypervisors_take_lmc_on_their_pf_and_vms_still_move_with_their_lid() {
    let cfg = SmConfig {
        lmc: 2,
        routing: Engine::FatTree,
        ..SmConfig::default()
    };
    let sim = SimConfig {
        vfs: 2,
        ..SimConfig::default()
    };
    let (mut f, mut sm, up) = bring_up("mport-ntree:4:3", sim, cfg).unwrap();
    assert!(up, "{:?}", sm.error());
    let hyps = sm.hypervisors();
    assert!(hyps.len() >= 2);
    for &h in &hyps {
        let base = sm.nodes()[h].lid;
        assert_eq!(base % 4, 0);
        // The VFs' LIDs are single LIDs outside the PF's four.
        for v in &sm.nodes()[h].vfs {
            assert!(v.lid != 0 && !(base..base + 4).contains(&v.lid));
        }
    }
    assert!(sm.subnet().indexes_agree());
    assert!(f.verify().ok());
    let (a, far) = (hyps[0], hyps[hyps.len() - 1]);
    let vm = sm.create_vm(a, 0xAB).unwrap();
    assert!(f.run(&mut sm));
    let lid = sm.vm(vm).unwrap().lid;
    let plan = sm.plan_migration(vm, far).unwrap();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(sm.vm(vm).unwrap().lid, lid, "the VM keeps its LID");
    let fx = f.node_by_guid(sm.nodes()[far].info.node_guid.0).unwrap();
    assert!(f.nodes[fx].owns(Lid(lid)));
    // Every PF's four LIDs and every VF's still reach their holder.
    assert!(sm.subnet().indexes_agree());
    let v = f.verify();
    assert!(v.ok(), "{v}");
}

/// `path-bits` of a QoS level: its paths reach the destination only at the
/// LIDs whose offsets it names; a Get takes the first such pair; a level
/// whose bits are all past a port's LIDs leaves that port's paths alone.
#[test]
fn a_qos_levels_path_bits_choose_the_destinations_lids() {
    use smi::sm::qos_policy::parse_policy;
    let (f, mut sm) = up_lmc("mport-ntree:4:2", 2, Engine::MinHop);
    let mut sa = new_sa();
    let h = hosts(&f);
    let ((a, from), (b, _)) = (h[0], h[h.len() - 1]);
    let (ga, gb) = (gid_of(&f, a), gid_of(&f, b));
    let (la, lb) = (f.nodes[a].lid().0, f.nodes[b].lid().0);
    let level = |bits: &str| {
        format!(
            "qos-levels\n qos-level\n  name: DEFAULT\n  sl: 3\n  path-bits: {bits}\n \
             end-qos-level\nend-qos-levels\n"
        )
    };
    let dlids = |sa: &mut sa::Sa, sm: &Sm| -> Vec<(u16, u16, u8)> {
        table(sa, sm, from, ga, gb)
            .iter()
            .map(|p| {
                assert_eq!(p.sl, 3);
                (p.slid.0 - la, p.dlid.0 - lb, p.preference)
            })
            .collect()
    };
    let get = |sa: &mut sa::Sa, sm: &Sm| {
        let q = PathRecord {
            sgid: ga,
            dgid: gb,
            ..PathRecord::default()
        };
        let m = mask::<PathRecord>(&["sgid", "dgid"]);
        let (st, r) = one(sa, sm, from, &ask(Method::Get, &q, m, 0), 0);
        assert_eq!(st, SaStatus::Ok);
        let p: PathRecord = r.record().unwrap();
        (p.slid.0 - la, p.dlid.0 - lb)
    };
    // Without a policy: all 16 pairs, the Get at the bases.
    assert_eq!(table(&mut sa, &sm, from, ga, gb).len(), 16);
    // Path bits 2-3: only the destination's LIDs at offsets 2 and 3, the
    // same-offset pairs first.
    sm.set_qos_policy(Some(parse_policy(&level("2-3")).unwrap()));
    let got = dlids(&mut sa, &sm);
    assert_eq!(got.len(), 8, "{got:?}");
    assert!(got.iter().all(|&(_, d, _)| d == 2 || d == 3), "{got:?}");
    assert_eq!(&got[..2], &[(2, 2, 0), (3, 3, 0)]);
    // The Get: the first pair the level lets through.
    assert_eq!(get(&mut sa, &sm), (2, 2));
    // A DLID the level does not take: no path.
    let q = PathRecord {
        sgid: ga,
        dlid: Lid(lb),
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["sgid", "dlid"]);
    let (st, _) = one(&mut sa, &sm, from, &ask(Method::Get, &q, m, 0), 0);
    assert_eq!(st, SaStatus::NoRecords);
    // Bits past the ports' four LIDs only (written for a larger LMC):
    // they do not apply, every pair is there.
    sm.set_qos_policy(Some(parse_policy(&level("4-7")).unwrap()));
    assert_eq!(dlids(&mut sa, &sm).len(), 16);
    assert_eq!(get(&mut sa, &sm), (0, 0));
}

#[test]
fn on_random_fabrics_every_lid_is_routed_and_updown_stays_deadlock_free() {
    for spec in ["random:30:7", "random:12:3"] {
        for routing in Engine::ALL {
            let (f, sm) = up_lmc(spec, 2, routing);
            let v = f.verify();
            assert!(v.ok(), "{spec} {routing:?}: {v}");
            let cas = ca_lids(&f);
            assert!(cas.iter().all(|&(_, b, m)| m == 2 && b % 4 == 0));
            assert_eq!(v.lids as usize, cas.len() * 4 + (f.nodes.len() - cas.len()));
            // Min-hop makes no such promise, nor the file engine, which
            // routes min-hop without a file, nor dor off a mesh, nor
            // LASH under LMC, which then routes min-hop (as OpenSM's).
            if routing == Engine::Lash {
                assert!(
                    sm.subnet().lash_layers().is_none(),
                    "{spec}: LASH under LMC"
                );
            }
            if !matches!(
                routing,
                Engine::MinHop | Engine::File | Engine::Dor | Engine::Lash
            ) {
                assert!(sm.deadlock_free(), "{spec} {routing:?}");
            }
        }
    }
}

/// guid2lid under LMC: a cache of LMC 2 ranges gives every port its range
/// again; a cache written at LMC 0 keeps only what fits (switches' LIDs
/// and CA LIDs that are multiples of 4 with the three above free), and
/// every CA still gets an aligned range.
#[test]
fn a_guid2lid_cache_under_lmc_keeps_aligned_ranges_only() {
    use fabric::sim::Fabric;
    use fabric::topology::Topology;
    let spec = "mport-ntree:4:2";
    let fresh = |cache: std::collections::BTreeMap<u64, Lid>| {
        let mut f = Fabric::new(Topology::from_spec(spec).unwrap(), SimConfig::default()).unwrap();
        let mut sm = Sm::new(SmConfig {
            lmc: 2,
            ..SmConfig::default()
        });
        sm.set_preferred_lids(cache);
        assert!(f.bring_up(&mut sm), "{:?}", sm.error());
        assert!(f.verify().ok());
        (f, sm)
    };
    let (_, sm) = up_lmc(spec, 2, Engine::MinHop);
    let cache = sm.lids_by_guid();
    let (_, again) = fresh(cache.clone());
    assert_eq!(again.lids_by_guid(), cache, "every port its range again");
    // The ranges written as OpenSM writes them: base and top.
    let ranges = again.lid_ranges_by_guid();
    assert!(ranges.values().any(|&(l, t)| t.0 == l.0 + 3));
    assert!(ranges.values().any(|&(l, t)| t == l));
    // An LMC 0 cache: consecutive LIDs.
    let (_, sm0) = up_lmc(spec, 0, Engine::MinHop);
    let cache0 = sm0.lids_by_guid();
    let (f, sm) = fresh(cache0.clone());
    let got = sm.lids_by_guid();
    let cas = ca_lids(&f);
    assert!(cas.iter().all(|&(_, b, m)| m == 2 && b % 4 == 0), "{cas:?}");
    let kept = got.iter().filter(|(g, l)| cache0.get(g) == Some(l)).count();
    let unaligned_cas = (sm.nodes().iter())
        .filter(|n| !n.is_switch() && cache0[&n.info.port_guid.0].0 % 4 != 0)
        .count();
    println!(
        "LMC 0 cache at LMC 2: {kept} of {} LIDs kept, {unaligned_cas} CAs' unaligned",
        got.len()
    );
    assert!(kept > 0 && kept <= got.len() - unaligned_cas);
}

/// A fabric of `spec` whose switches `enhanced` picks have an enhanced
/// port 0, brought up at LMC `lmc` with `lmc_esp0` as given.
fn up_esp0(
    spec: &str,
    lmc: u8,
    esp0: bool,
    enhanced: impl Fn(usize) -> bool,
    routing: Engine,
) -> (Fabric, Sm) {
    use fabric::topology::Topology;
    let mut t = Topology::from_spec(spec).unwrap();
    for (i, n) in t.nodes.iter_mut().enumerate() {
        n.enhanced_port0 = n.kind == mad_core::attr::NodeType::Switch && enhanced(i);
    }
    let mut f = Fabric::new(t, SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig {
        lmc,
        lmc_esp0: esp0,
        routing,
        ..SmConfig::default()
    });
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    (f, sm)
}

/// OpenSM's `lmc_esp0`: a switch whose port 0 is enhanced takes the LMC
/// (aligned range, every LID routed to it, the SA's paths at each); a
/// base port 0 keeps one LID; without `lmc_esp0` every switch has one.
#[test]
fn under_lmc_esp0_enhanced_switch_ports_0_take_the_lmc_and_base_ones_do_not() {
    let spec = "mport-ntree:4:3";
    let enhanced = |i: usize| i % 2 == 0;
    for routing in Engine::ALL {
        let (f, sm) = up_esp0(spec, 2, true, enhanced, routing);
        let mut held = 0usize;
        let mut esp = Vec::new();
        for (i, n) in f.nodes.iter().enumerate() {
            let want = match n {
                SimNode::Switch(_) if enhanced(i) => 2,
                SimNode::Switch(_) => 0,
                _ => 2,
            };
            assert_eq!(n.lmc(), want, "{routing:?}: node {i}");
            let base = n.lid().0;
            assert_eq!(base % (1 << want), 0, "{routing:?}: node {i} base {base}");
            for k in 0..1u16 << want {
                let (node, _) = sm.subnet().by_lid(Lid(base + k)).unwrap();
                assert_eq!(node.0 == 0, i == f.sm_node, "LID {}", base + k);
            }
            held += 1 << want;
            if matches!(n, SimNode::Switch(_)) && want == 2 {
                esp.push((i, base, 2u8));
            }
        }
        assert!(esp.len() >= 4);
        assert!(sm.subnet().indexes_agree());
        // Every LID of every range, the switches' included, reaches its
        // holder from every node.
        let v = f.verify();
        assert!(v.ok(), "{routing:?}: {v}");
        assert_eq!(v.lids as usize, held, "{routing:?}");
        // From each CA, a switch's four LIDs take more than one route
        // wherever more than one shortest path leads there.
        let (mut pairs, mut spread, mut routes, mut best) = (0, 0, 0, 0);
        for &(a, _, _) in &ca_lids(&f) {
            let leaf = f.topo.peer[a][1].unwrap().0;
            for &(s, base, _) in &esp {
                let paths = shortest_paths(&f, leaf, s);
                if paths < 2 {
                    continue;
                }
                best += paths.min(4);
                let r: BTreeSet<Vec<(usize, u8)>> = (0..4)
                    .map(|k| {
                        let (path, walk) = f.trace(a, Lid(base + k));
                        assert!(matches!(walk, fabric::sim::Walk::Delivered(_)));
                        path
                    })
                    .collect();
                pairs += 1;
                spread += usize::from(r.len() > 1);
                routes += r.len();
            }
        }
        println!(
            "{routing:?}: {} enhanced switches at LMC 2; from CAs to them over 2+ shortest paths: \
             {pairs} pairs, {spread} spread, {routes} routes of {best} there are",
            esp.len()
        );
        assert!(pairs > 0);
        if routing == Engine::Dor {
            // One neighbour for every LID (see the first test).
            assert_eq!((spread, routes), (0, pairs), "{routing:?}");
            continue;
        }
        assert_eq!(spread, pairs, "{routing:?}");
        assert_eq!(routes, best, "{routing:?}");
        if !matches!(routing, Engine::MinHop | Engine::File) {
            assert!(sm.deadlock_free(), "{routing:?}");
        }
    }
    // The SA: a CA's paths to an enhanced switch are listed at every pair
    // of their LIDs (4 × 4), to a base switch at its one LID (4 × 1).
    let (f, sm) = up_esp0(spec, 2, true, enhanced, Engine::MinHop);
    let mut sa = new_sa();
    let (a, from) = hosts(&f)[0];
    let switches: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| matches!(f.nodes[i], SimNode::Switch(_)))
        .collect();
    let e = *switches.iter().find(|&&i| enhanced(i)).unwrap();
    let b = *switches.iter().find(|&&i| !enhanced(i)).unwrap();
    let to_e = table(&mut sa, &sm, from, gid_of(&f, a), gid_of(&f, e));
    let to_b = table(&mut sa, &sm, from, gid_of(&f, a), gid_of(&f, b));
    assert_eq!(to_e.len(), 16);
    assert_eq!(to_b.len(), 4);
    let dlids: BTreeSet<u16> = to_e.iter().map(|p| p.dlid.0).collect();
    let be = f.nodes[e].lid().0;
    assert_eq!(dlids, (be..be + 4).collect());
    // Without lmc_esp0 the same switches keep one LID each; with it but
    // no enhanced switch, the bring-up is the one without it.
    let (f0, sm0) = up_esp0(spec, 2, false, enhanced, Engine::MinHop);
    assert!(switches.iter().all(|&i| f0.nodes[i].lmc() == 0));
    assert!(f0.verify().ok());
    let (f1, sm1) = up_esp0(spec, 2, true, |_| false, Engine::MinHop);
    assert_eq!(ca_lids(&f0), ca_lids(&f1));
    assert_eq!(sm0.stats().total(), sm1.stats().total());
}

/// Every record of type `R` whose LID component `name` is `lid` (a
/// GetTable with that component alone in the mask).
fn by_lid<R: SaRecord>(sa: &mut sa::Sa, sm: &Sm, from: sa::Addr, name: &str, lid: u16) -> Vec<R> {
    let c = R::COMPONENTS.iter().find(|c| c.name == name).unwrap();
    let mut b = vec![0u8; R::SIZE];
    b[c.offset / 8..c.offset / 8 + 2].copy_from_slice(&lid.to_be_bytes());
    all(sa, sm, from, &R::decode(&b).unwrap(), mask::<R>(&[name]), 0)
}

/// Any LID of a port's range names the port in the records that mirror
/// SMP attributes, as in OpenSM's SA: a NodeRecord, PortInfoRecord,
/// GUIDInfoRecord or LinkRecord asked by a CA's LID above its base (and a
/// SwitchInfoRecord by an enhanced switch's, under `lmc_esp0`) is the one
/// asked by the base, which it carries. The PortInfo's own LID inside a
/// PortInfoRecord is compared as it is; a LID nobody holds has none.
#[test]
fn records_asked_by_any_lid_of_a_range_are_the_ports() {
    let enhanced = |i: usize| i % 2 == 0;
    let (f, sm) = up_esp0("mport-ntree:4:2", 2, true, enhanced, Engine::MinHop);
    let mut sa = new_sa();
    let (a, from) = hosts(&f)[1];
    let la = f.nodes[a].lid().0;
    let by = |sa: &mut sa::Sa, lid: u16| {
        (
            by_lid::<NodeRecord>(sa, &sm, from, "lid", lid),
            by_lid::<PortInfoRecord>(sa, &sm, from, "endport_lid", lid),
            by_lid::<GuidInfoRecord>(sa, &sm, from, "lid", lid),
            by_lid::<LinkRecord>(sa, &sm, from, "from_lid", lid),
        )
    };
    let base = by(&mut sa, la);
    assert_eq!(base.0.len(), 1);
    assert_eq!(base.1.len(), 1);
    assert!(!base.2.is_empty());
    assert_eq!(base.3.len(), 1);
    for k in 1..4 {
        let got = by(&mut sa, la + k);
        assert_eq!(got.0, base.0, "NodeRecord at base + {k}");
        assert_eq!(got.1, base.1, "PortInfoRecord at base + {k}");
        assert_eq!(got.2, base.2, "GUIDInfoRecord at base + {k}");
        assert_eq!(got.3, base.3, "LinkRecord at base + {k}");
        assert_eq!(got.0[0].lid.0, la, "the record carries the base");
        // A link into the CA, by its ToLID above the base.
        let to = by_lid::<LinkRecord>(&mut sa, &sm, from, "to_lid", la + k);
        assert_eq!(to.len(), 1);
        assert_eq!(to[0].to_lid.0, la);
    }
    // The PortInfo's LID inside the record is the port's base: asked at
    // base + 1, nothing.
    let mut q = PortInfoRecord::default();
    q.port_info.lid = Lid(la + 1);
    let m = mask::<PortInfoRecord>(&["lid"]);
    assert!(m != 0);
    assert!(all(&mut sa, &sm, from, &q, m, 0).is_empty());
    q.port_info.lid = Lid(la);
    assert_eq!(all(&mut sa, &sm, from, &q, m, 0).len(), 1);
    // An enhanced switch's SwitchInfoRecord at each of its LIDs.
    let s = (0..f.nodes.len())
        .find(|&i| enhanced(i) && matches!(f.nodes[i], SimNode::Switch(_)))
        .unwrap();
    let ls = f.nodes[s].lid().0;
    for k in 0..4 {
        let got = by_lid::<SwitchInfoRecord>(&mut sa, &sm, from, "lid", ls + k);
        assert_eq!(got.len(), 1, "SwitchInfoRecord at {}", ls + k);
        assert_eq!(got[0].lid.0, ls);
    }
    // Past every range: nothing.
    let top = (0..f.nodes.len())
        .map(|i| f.nodes[i].lid().0 + (1 << f.nodes[i].lmc()))
        .max()
        .unwrap();
    let none = by(&mut sa, top);
    assert!(none.0.is_empty() && none.1.is_empty() && none.2.is_empty() && none.3.is_empty());
}

/// A host under LMC asks from any of its `2^LMC` LIDs, and its quotas are
/// its port's, not each LID's: its path questions share one budget a
/// second (`max_examined_per_second`) and its answers held one share of
/// `max_transfer_bytes`, whichever LID they came from; another host keeps
/// its own.
#[test]
fn a_hosts_lids_share_its_quotas() {
    let (f, sm) = up_lmc("mport-ntree:4:2", 2, Engine::MinHop);
    let hs = hosts(&f);
    let ((a, at_a), (_, other)) = (hs[0], hs[1]);
    let base = f.nodes[a].lid().0;
    assert_eq!(f.nodes[a].lmc(), 2);
    let from = |k: u16| sa::Addr {
        lid: Lid(base + k),
        ..at_a
    };
    // A question no pair answers (an MTU below 256), and its work.
    let impossible = PathRecord {
        mtu_selector: 1,
        mtu: 1,
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["mtu_selector", "mtu"]);
    let q = ask(Method::GetTable, &impossible, m, 0);
    let status =
        |sa: &mut sa::Sa, who: sa::Addr, mad: &[u8]| exchange(sa, &sm, who, mad, 0)[0].sa_status();
    let mut probe = new_sa();
    assert_eq!(status(&mut probe, from(0), &q), SaStatus::Ok);
    let work = probe.stats().pairs_examined as usize;
    assert!(work > 0);
    let mut sa = sa::Sa::new(sa::SaConfig {
        max_examined_per_second: 2 * work,
        rmpp_acks: false,
        ..sa::SaConfig::default()
    });
    assert_eq!(status(&mut sa, from(0), &q), SaStatus::Ok);
    assert_eq!(status(&mut sa, from(1), &q), SaStatus::Ok);
    for k in [2, 3, 0] {
        assert_eq!(
            status(&mut sa, from(k), &q),
            SaStatus::NoResources,
            "base + {k}"
        );
    }
    assert_eq!(status(&mut sa, other, &q), SaStatus::Ok, "another host");
    // Bytes held: an all-pairs answer, never ACKed, fills A's share.
    let every = ask(Method::GetTable, &PathRecord::default(), 0, 0);
    let mut probe = sa::Sa::new(sa::SaConfig::default());
    exchange(&mut probe, &sm, from(0), &every, 0);
    let answer = probe.transfer_bytes();
    assert!(answer > 0);
    let mut sa = sa::Sa::new(sa::SaConfig {
        max_transfer_bytes: 4 * answer,
        max_examined_per_second: usize::MAX,
        max_examined_all_per_second: usize::MAX,
        ..sa::SaConfig::default()
    });
    assert_eq!(status(&mut sa, from(0), &every), SaStatus::Ok);
    assert_eq!(status(&mut sa, from(1), &every), SaStatus::NoResources);
    assert_eq!(status(&mut sa, other, &every), SaStatus::Ok, "another host");
    assert_eq!(sa.transfers(), 2);
}
