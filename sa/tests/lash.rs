//! LASH (`Engine::Lash`, OpenSM's `lash`): on a torus, where min-hop's
//! routes close cycles, every PathRecord carries the SL of its pair of
//! switches' layer, and the VLs those SLs take through the SL-to-VL
//! tables the switches hold close none. Checked on what the hosts would
//! send: the SA's answers, the switches' installed tables (walked by the
//! simulator, not the SM) and the tables the QoS defaults wrote.

mod common;

use common::*;
use fabric::sim::{Fabric, SimConfig, SimNode};
use fabric::topology::Topology;
use mad_core::mad::Method;
use mad_core::sa::*;
use smi::sm::qos::parse;
use smi::sm::{Engine, LinkParams, Sm, SmConfig, SmEvent};
use std::collections::{BTreeMap, BTreeSet};

/// `spec` brought up by LASH, with OpenSM's QoS defaults (SL i to VL i)
/// written, as OpenSM asks `-R lash -Q`.
fn up_lash(spec: &str, link: LinkParams) -> (Fabric, Sm) {
    up_lash_qos(spec, link, true)
}

/// [`up_lash`], with the QoS defaults written only when `qos`.
fn up_lash_qos(spec: &str, link: LinkParams, qos: bool) -> (Fabric, Sm) {
    let topo = Topology::from_spec(spec).unwrap();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig {
        routing: Engine::Lash,
        link,
        ..SmConfig::default()
    });
    if qos {
        sm.set_qos(parse("").unwrap());
    }
    assert!(f.bring_up(&mut sm), "{spec}: {:?}", sm.error());
    (f, sm)
}

/// The SL of the PathRecord the SA gives from host `a` to host `b`.
fn path_sl(sa: &mut sa::Sa, sm: &Sm, f: &Fabric, a: usize, b: usize, from: sa::Addr) -> u8 {
    let q = PathRecord {
        sgid: gid_of(f, a),
        dgid: gid_of(f, b),
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["sgid", "dgid"]);
    let (st, r) = one(sa, sm, from, &ask(Method::Get, &q, m, 0), 0);
    assert_eq!(st, SaStatus::Ok);
    r.record::<PathRecord>().unwrap().sl
}

/// A switch's egress port on one VL.
type Channel = (usize, u8, u8);

/// True when the dependencies between the (switch, egress port, VL)
/// channels that packets from each host to each other host take, each
/// with the SL `sl` gives the pair, close no cycle. The VL of each hop
/// is the one the switch's SL-to-VL table gives (input port, output
/// port, SL).
fn vls_acyclic(f: &Fabric, pairs: &[(usize, usize)], sl: &dyn Fn(usize, usize) -> u8) -> bool {
    let mut next: BTreeMap<Channel, BTreeSet<Channel>> = BTreeMap::new();
    for &(a, b) in pairs {
        let (path, _) = f.trace(a, f.nodes[b].lid());
        let s = sl(a, b);
        let mut last: Option<Channel> = None;
        for w in path.windows(2) {
            let ((prev, prev_out), (node, out)) = (w[0], w[1]);
            let SimNode::Switch(sw) = &f.nodes[node] else {
                continue;
            };
            let (_, input) = f.topo.peer_of(prev, prev_out).unwrap();
            let vl = sw.model.ports[usize::from(out)].sl2vl[usize::from(input)].vl[usize::from(s)];
            let to_switch = f
                .topo
                .peer_of(node, out)
                .is_some_and(|(n, _)| matches!(f.nodes[n], SimNode::Switch(_)));
            let here = to_switch.then_some((node, out, vl));
            if let (Some(l), Some(h)) = (last, here) {
                next.entry(l).or_default().insert(h);
            }
            last = here;
        }
    }
    // Depth-first search for a back edge.
    let mut state: BTreeMap<Channel, u8> = BTreeMap::new();
    fn cyclic(
        c: Channel,
        next: &BTreeMap<Channel, BTreeSet<Channel>>,
        state: &mut BTreeMap<Channel, u8>,
    ) -> bool {
        match state.get(&c) {
            Some(1) => return true,
            Some(_) => return false,
            None => {}
        }
        state.insert(c, 1);
        let found = next
            .get(&c)
            .is_some_and(|ts| ts.iter().any(|&t| cyclic(t, next, state)));
        state.insert(c, 2);
        found
    }
    let starts: Vec<Channel> = next.keys().copied().collect();
    !starts.into_iter().any(|c| cyclic(c, &next, &mut state))
}

#[test]
fn on_a_torus_the_sls_of_the_paths_keep_every_vl_free_of_cycles() {
    let (f, sm) = up_lash("torus:4:4:1", LinkParams::default());
    assert!(sm.deadlock_free());
    let layers = sm.subnet().lash_layers().expect("LASH routed");
    assert!(layers.count >= 2, "{layers:?}");
    let mut sa = new_sa();
    let h = hosts(&f);
    let from = h[0].1;
    let mut sls = BTreeMap::new();
    let mut pairs = Vec::new();
    for &(a, _) in &h {
        for &(b, _) in &h {
            if a != b {
                sls.insert((a, b), path_sl(&mut sa, &sm, &f, a, b, from));
                pairs.push((a, b));
            }
        }
    }
    // Both ways of a pair share an SL; more than one SL is in use.
    for (&(a, b), &s) in &sls {
        assert_eq!(sls[&(b, a)], s);
    }
    let used: BTreeSet<u8> = sls.values().copied().collect();
    assert_eq!(used.len(), usize::from(layers.count), "{used:?}");
    assert!(vls_acyclic(&f, &pairs, &|a, b| sls[&(a, b)]));
    // The same routes on SL 0 alone: the torus's rings close a cycle, so
    // the check above could fail.
    assert!(!vls_acyclic(&f, &pairs, &|_, _| 0));
    // A request that asks another SL gets no path (OpenSM's ERR 1F2A).
    let (a, b) = pairs[0];
    let other = (sls[&(a, b)] + 1) % 16;
    let q = PathRecord {
        sgid: gid_of(&f, a),
        dgid: gid_of(&f, b),
        sl: other,
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["sgid", "dgid", "sl"]);
    let (st, _) = one(&mut sa, &sm, from, &ask(Method::Get, &q, m, 0), 0);
    assert_eq!(st, SaStatus::NoRecords);
}

#[test]
fn with_too_few_vls_lash_routes_min_hop_and_says_why() {
    // One operational VL a port: one layer, not enough for a torus.
    let link = LinkParams {
        max_op_vls: 1,
        ..LinkParams::default()
    };
    let (f, mut sm) = up_lash("torus:4:4:1", link);
    assert!(sm.subnet().lash_layers().is_none());
    assert!(!sm.deadlock_free());
    let mut said = None;
    while let Some(e) = sm.poll_event() {
        if let SmEvent::RoutingFellBack {
            wanted,
            used,
            reason,
        } = e
        {
            said = Some((wanted, used, reason));
        }
    }
    let (wanted, used, reason) = said.expect("the fallback is told");
    assert_eq!((wanted, used), (Engine::Lash, Engine::MinHop));
    // And min-hop's tables are the ones computed, not dor's.
    let computed: Vec<Vec<u8>> = sm.lfts().map(|(_, t)| t.to_vec()).collect();
    let g = sm.routing_graph();
    assert_eq!(
        computed,
        Sm::compute_routes(Engine::MinHop, g, sm.max_lid())
    );
    assert_ne!(computed, Sm::compute_routes(Engine::Dor, g, sm.max_lid()));
    assert!(reason.contains("more than the 1 layer"), "{reason}");
    let mut sa = new_sa();
    let h = hosts(&f);
    let (a, b) = (h[0].0, h[h.len() - 1].0);
    assert_eq!(path_sl(&mut sa, &sm, &f, a, b, h[0].1), 0);
}

#[test]
fn lash_start_vl_moves_the_layers_up_and_refuses_to_leave_none() {
    let up = |start: u8| {
        let topo = Topology::from_spec("torus:4:4:1").unwrap();
        let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
        let mut sm = Sm::new(SmConfig {
            routing: Engine::Lash,
            lash_start_vl: start,
            ..SmConfig::default()
        });
        sm.set_qos(parse("").unwrap());
        assert!(f.bring_up(&mut sm));
        (f, sm)
    };
    // From SL 5: the layers are SLs 5 and 6 (VLs 5 and 6 of VL0-7).
    let (f, sm) = up(5);
    assert!(sm.deadlock_free());
    let mut sa = new_sa();
    let h = hosts(&f);
    let mut used = BTreeSet::new();
    for &(b, _) in &h[1..] {
        used.insert(path_sl(&mut sa, &sm, &f, h[0].0, b, h[0].1));
    }
    assert_eq!(used.into_iter().collect::<Vec<_>>(), [5, 6]);
    // From SL 7 one VL is left, and a torus needs two: min-hop, told why.
    let (_, mut sm) = up(7);
    assert!(sm.subnet().lash_layers().is_none());
    // From SL 8 none is left (OpenSM's ERR 4D03).
    let (_, mut sm8) = up(8);
    let said = |sm: &mut Sm| {
        let mut r = String::new();
        while let Some(e) = sm.poll_event() {
            if let SmEvent::RoutingFellBack { reason, .. } = e {
                r = reason;
            }
        }
        r
    };
    assert!(said(&mut sm).contains("more than the 1 layer"));
    assert!(said(&mut sm8).contains("lash_start_vl 8 is not below the 8 VL(s)"));
}

#[test]
fn without_qos_the_layers_are_not_called_deadlock_free() {
    // The layers are made, but no SL-to-VL table gives them their VLs:
    // every switch port still maps all SLs to VL 0.
    let (f, sm) = up_lash_qos("torus:4:4:1", LinkParams::default(), false);
    assert!(sm.subnet().lash_layers().is_some_and(|l| l.count >= 2));
    assert!(!sm.deadlock_free());
    let SimNode::Switch(sw) = f
        .nodes
        .iter()
        .find(|n| matches!(n, SimNode::Switch(_)))
        .unwrap()
    else {
        unreachable!()
    };
    assert!(sw.model.ports[1].sl2vl[2].vl.iter().all(|&v| v == 0));
}
