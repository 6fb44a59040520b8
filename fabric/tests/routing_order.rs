//! OpenSM's `guid_routing_order_file` ([`SmConfig::routing_order`]): the
//! ports a site names are routed first, so every switch spreads them
//! evenly over its equal-cost ports, under min-hop and up*/down*.

use fabric::sim::{bring_up, Fabric, SimConfig};
use smi::sm::{Engine, Sm, SmConfig};

const SPEC: &str = "fat-tree-324";

fn up(routing: Engine, order: Vec<u64>) -> (Fabric, Sm) {
    let cfg = SmConfig {
        routing,
        routing_order: order,
        ..SmConfig::default()
    };
    let (f, sm, up) = bring_up(SPEC, SimConfig::default(), cfg).unwrap();
    assert!(up, "{:?}", sm.error());
    (f, sm)
}

/// One host of each leaf switch: (port GUID, LID), and the leaves.
fn one_host_a_leaf(sm: &Sm) -> (Vec<(u64, u16)>, Vec<usize>) {
    let (mut hosts, mut leaves) = (Vec::new(), Vec::new());
    for &i in sm.graph_switches() {
        let n = &sm.nodes()[i];
        let ca = (1..n.ports.len())
            .filter_map(|p| n.ports[p].peer)
            .find(|&(m, _)| !sm.nodes()[m].is_switch());
        if let Some((m, _)) = ca {
            let c = &sm.nodes()[m];
            hosts.push((c.info.port_guid.0, c.lid));
            leaves.push(i);
        }
    }
    (hosts, leaves)
}

/// The worst spread, over the leaves, of the named hosts' routes over a
/// leaf's up ports: the most routes one up port carries less the fewest.
fn worst_spread(sm: &Sm, hosts: &[(u64, u16)], leaves: &[usize]) -> usize {
    let mut worst = 0;
    for &i in leaves {
        let n = &sm.nodes()[i];
        let t = sm.lfts().find(|(k, _)| *k == i).unwrap().1;
        let up: Vec<u8> = (1..n.ports.len() as u8)
            .filter(|&p| {
                n.ports[usize::from(p)]
                    .peer
                    .is_some_and(|(m, _)| sm.nodes()[m].is_switch())
            })
            .collect();
        let counts: Vec<usize> = up
            .iter()
            .map(|&p| {
                hosts
                    .iter()
                    .filter(|&&(_, l)| t[usize::from(l)] == p)
                    .count()
            })
            .collect();
        let (max, min) = (counts.iter().max().unwrap(), counts.iter().min().unwrap());
        worst = worst.max(max - min);
    }
    worst
}

#[test]
fn the_named_ports_are_spread_evenly_at_every_leaf() {
    for routing in [Engine::MinHop, Engine::UpDown] {
        let (_, own) = up(routing, Vec::new());
        let (hosts, leaves) = one_host_a_leaf(&own);
        assert_eq!(hosts.len(), 18);
        let before = worst_spread(&own, &hosts, &leaves);
        // Named in reverse (and one GUID twice, one of no port): the
        // order is the file's.
        let mut order: Vec<u64> = hosts.iter().rev().map(|h| h.0).collect();
        order.push(hosts[0].0);
        order.push(0xdead_beef);
        let (f, sm) = up(routing, order);
        let after = worst_spread(&sm, &hosts, &leaves);
        assert!(after <= 1, "{routing:?}: {after}");
        // Min-hop routes LIDs in order, and the first host of every leaf
        // then goes up one port; up*/down* spreads these already.
        if routing == Engine::MinHop {
            assert!(before > after, "{routing:?}: {before} before");
        }
        let v = f.verify();
        assert_eq!((v.unreachable, v.loops), (0, 0), "{routing:?}");
        if routing == Engine::UpDown {
            assert!(sm.deadlock_free());
        }
        println!(
            "{SPEC} {routing:?}: one host a leaf ({} hosts) named first: at worst {after} route(s) \
             between a leaf's most and least used up ports, {before} without the order",
            hosts.len()
        );
    }
}

/// A new order on a running subnet ([`Sm::set_routing_order`], what
/// SIGHUP does with a changed file) leaves the tables a start with it
/// would, and the same order again sends nothing.
#[test]
fn a_new_order_on_a_running_subnet_routes_as_a_start_with_it() {
    use mad_core::attr::AttributeId;
    use mad_core::Method;
    let (mut f, mut sm) = up(Engine::MinHop, Vec::new());
    let (hosts, _) = one_host_a_leaf(&sm);
    let order: Vec<u64> = hosts.iter().map(|h| h.0).collect();
    let (_, fresh) = up(Engine::MinHop, order.clone());
    let tables = |sm: &Sm| -> Vec<Vec<u8>> { sm.lfts().map(|(_, t)| t.to_vec()).collect() };
    let sets = |sm: &Sm| {
        sm.stats()
            .count(Method::Set, AttributeId::LinearForwardingTable)
    };
    let before = sets(&sm);
    let now = f.now_ns() / 1_000_000;
    assert!(sm.set_routing_order(order.clone(), now));
    assert!(f.run(&mut sm));
    assert_eq!(tables(&sm), tables(&fresh));
    let sent = sets(&sm) - before;
    assert!(sent > 0 && sent < sets(&fresh), "{sent}");
    let now = f.now_ns() / 1_000_000;
    assert!(!sm.set_routing_order(order, now));
    println!(
        "{SPEC}: the order given to the running SM: {sent} Set(LFT), {} at bring-up",
        sets(&fresh)
    );
}
