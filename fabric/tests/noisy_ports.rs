//! Ports that keep reporting errors (traps 129–131), as OpenSM's trap
//! receiver treats them: the 11th trap in a row makes the port unhealthy
//! and its link is routed around until a minute of silence; the 251st,
//! under `babbling_port_policy`, disables the end of the link nearer the
//! SM, and the link stays down.

use fabric::sim::{bring_up, Fabric, SimConfig};
use smi::sm::{Sm, SmConfig, SmEvent, BABBLING_REPEATS, NOISY_REPEATS};

const SPEC: &str = "mport-ntree:4:3";

fn up(cfg: SmConfig) -> (Fabric, Sm) {
    let (f, sm, up) = bring_up(SPEC, SimConfig::default(), cfg).unwrap();
    assert!(up, "{:?}", sm.error());
    (f, sm)
}

/// A switch-to-switch link that carries routes: (SM node, port, fabric
/// node) of its end at the switch that routes the most LIDs out of it.
fn busy_link(f: &Fabric, sm: &Sm) -> (usize, u8, usize) {
    let mut best = (0, 0, 0, 0);
    for (i, t) in sm.lfts() {
        let n = &sm.nodes()[i];
        for p in 1..=n.info.num_ports {
            let to_switch = n.ports[usize::from(p)]
                .peer
                .is_some_and(|(m, _)| sm.nodes()[m].is_switch());
            let used = t.iter().filter(|&&e| e == p).count();
            if to_switch && used > best.0 {
                best = (used, i, p, f.node_by_guid(n.info.node_guid.0).unwrap());
            }
        }
    }
    assert!(best.0 > 0);
    (best.1, best.2, best.3)
}

/// LIDs routed out of port `p` of SM node `i`.
fn routed_out(sm: &Sm, i: usize, p: u8) -> usize {
    sm.lfts()
        .find(|(n, _)| *n == i)
        .map_or(0, |(_, t)| t.iter().filter(|&&e| e == p).count())
}

fn noisy_events(sm: &mut Sm) -> Vec<SmEvent> {
    std::iter::from_fn(|| sm.poll_event())
        .filter(|e| matches!(e, SmEvent::NoisyPort { .. }))
        .collect()
}

/// `n` traps `number` from (fabric node `at`, `port`), each delivered and
/// repressed before the next, 10 ms apart.
fn babble(f: &mut Fabric, sm: &mut Sm, at: usize, port: u8, number: u16, n: u32) {
    for _ in 0..n {
        f.port_error(at, port, number).unwrap();
        let t = f.now_ns() + 10_000_000;
        f.run_until(sm, t);
        f.run(sm);
    }
}

#[test]
fn a_noisy_link_is_routed_around_until_it_is_quiet_for_a_minute() {
    let (mut f, mut sm) = up(SmConfig::default());
    let (i, p, at) = busy_link(&f, &sm);
    let (m, q) = sm.nodes()[i].ports[usize::from(p)].peer.unwrap();
    let before = routed_out(&sm, i, p);
    noisy_events(&mut sm);
    // Ten in a row: still counted healthy.
    babble(&mut f, &mut sm, at, p, 129, NOISY_REPEATS);
    assert!(sm.unhealthy_ports().is_empty());
    assert_eq!(routed_out(&sm, i, p), before);
    assert!(noisy_events(&mut sm).is_empty());
    // The eleventh: unhealthy, the link carries nothing either way, and
    // every CA still reaches every LID.
    babble(&mut f, &mut sm, at, p, 129, 1);
    assert_eq!(sm.unhealthy_ports(), vec![(i, p)]);
    assert_eq!(routed_out(&sm, i, p), 0);
    assert_eq!(routed_out(&sm, m, q), 0);
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops, v.switch_unreachable), (0, 0, 0));
    let said = noisy_events(&mut sm);
    assert!(
        matches!(said[..], [SmEvent::NoisyPort { port, trap: 129, repeats: 11, disabled: None, .. }] if port == p),
        "{said:?}"
    );
    // More repeats change nothing more.
    babble(&mut f, &mut sm, at, p, 129, 5);
    assert!(noisy_events(&mut sm).is_empty());
    // 59 s of silence: still unhealthy; past 60 s, a sweep routes over
    // the link again.
    let t0 = f.now_ns();
    f.run_until(&mut sm, t0 + 59_000_000_000);
    sm.request_sweep(f.now_ns() / 1_000_000);
    f.run(&mut sm);
    assert_eq!(sm.unhealthy_ports(), vec![(i, p)]);
    f.run_until(&mut sm, t0 + 61_000_000_000);
    sm.request_sweep(f.now_ns() / 1_000_000);
    f.run(&mut sm);
    assert!(sm.unhealthy_ports().is_empty());
    assert!(routed_out(&sm, i, p) > 0);
    let g = sm.nodes()[i].info.node_guid;
    let said: Vec<SmEvent> = std::iter::from_fn(|| sm.poll_event())
        .filter(|e| matches!(e, SmEvent::PortQuiet { .. }))
        .collect();
    assert_eq!(said, [SmEvent::PortQuiet { guid: g, port: p }]);
    println!(
        "{SPEC}: {before} LIDs out of the noisy port; none after the 11th trap 129, every LID still reached; \
         routed over again after a minute of silence"
    );
}

#[test]
fn traps_apart_by_more_than_five_seconds_are_no_run() {
    let (mut f, mut sm) = up(SmConfig::default());
    let (_, p, at) = busy_link(&f, &sm);
    for _ in 0..2 * NOISY_REPEATS {
        babble(&mut f, &mut sm, at, p, 130, 1);
        let t = f.now_ns() + 5_100_000_000;
        f.run_until(&mut sm, t);
    }
    assert!(sm.unhealthy_ports().is_empty());
    // Traps of another number from the same port are another run.
    babble(&mut f, &mut sm, at, p, 130, 6);
    babble(&mut f, &mut sm, at, p, 131, 6);
    assert!(sm.unhealthy_ports().is_empty());
}

#[test]
fn a_babbling_port_is_disabled_under_the_policy_only() {
    for policy in [false, true] {
        let (mut f, mut sm) = up(SmConfig {
            babbling_port_policy: policy,
            ..SmConfig::default()
        });
        let (i, p, at) = busy_link(&f, &sm);
        let (m, q) = sm.nodes()[i].ports[usize::from(p)].peer.unwrap();
        // The end nearer the SM is the one disabled.
        let hops = |k: usize| sm.nodes()[k].path.hop_count();
        let (d, dp) = if hops(m) < hops(i) { (m, q) } else { (i, p) };
        let o = if d == i { m } else { i };
        let (dg, og) = (
            sm.nodes()[d].info.node_guid.0,
            sm.nodes()[o].info.node_guid.0,
        );
        let (fd, fo) = (f.node_by_guid(dg).unwrap(), f.node_by_guid(og).unwrap());
        let op = if d == i { q } else { p };
        babble(&mut f, &mut sm, at, p, 131, BABBLING_REPEATS + 1);
        let said = noisy_events(&mut sm);
        let disabled = f.nodes[fd].port_disabled(dp);
        assert_eq!(disabled, policy, "{said:?}");
        let down = mad_core::attr::PortState::Down;
        if policy {
            assert!(
                said.iter().any(
                    |e| matches!(e, SmEvent::NoisyPort { repeats, disabled: Some((g, pp)), .. }
                    if *repeats == BABBLING_REPEATS + 1 && g.0 == dg && *pp == dp)
                ),
                "{said:?}"
            );
            assert_eq!(f.nodes[fd].port_state(dp), Some(down));
            assert_eq!(f.nodes[fo].port_state(op), Some(down), "the peer's end too");
            // A sweep later the link is gone from the routes, and stays
            // down (no retraining).
            sm.request_sweep(f.now_ns() / 1_000_000);
            f.run(&mut sm);
            let v = f.verify();
            assert_eq!((v.unreachable, v.loops), (0, 0));
            let t = f.now_ns() + 5_000_000_000;
            f.run_until(&mut sm, t);
            assert!(f.nodes[fd].port_disabled(dp));
            assert_eq!(f.nodes[fo].port_state(op), Some(down));
        } else {
            assert_ne!(f.nodes[fd].port_state(dp), Some(down));
            assert_eq!(sm.unhealthy_ports(), vec![(i, p)]);
        }
    }
}
