//! Change assimilation on a running subnet: a cable or a switch fails or
//! comes back at a chosen time, the switches trap to the SM (or the
//! periodic light sweep finds it), and the SM re-discovers what changed,
//! re-routes and sends only the changed LFT blocks — LID-routed, falling
//! back to directed route when a LID route does not answer.

use fabric::sim::{Fabric, FabricEvent, SimConfig, SimNode};
use mad_core::attr::{AttributeId, NodeType, PortState};
use mad_core::{Lid, Method};
use smi::sm::{Engine, LidPolicy, Phase, Sm, SmConfig};

const MS: u64 = 1_000_000;

fn up(spec: &str, sm_cfg: SmConfig) -> (Fabric, Sm) {
    up_with(spec, SimConfig::default(), sm_cfg)
}

fn up_with(spec: &str, sim: SimConfig, sm_cfg: SmConfig) -> (Fabric, Sm) {
    let (f, sm, up) = fabric::sim::bring_up(spec, sim, sm_cfg).unwrap();
    assert!(up, "{spec}: {:?} {:?}", sm.phase(), sm.error());
    (f, sm)
}

fn clean(f: &Fabric) {
    let v = f.verify();
    assert!(v.reachable > 0);
    assert_eq!(
        (v.unreachable, v.loops, v.switch_unreachable),
        (0, 0, 0),
        "{v:?}"
    );
}

/// A cable between two switches, the last one in the cabling (far from the
/// SM, which sits on the first CA).
fn uplink(f: &Fabric) -> (usize, u8) {
    for (i, n) in f.topo.nodes.iter().enumerate().rev() {
        if n.kind != NodeType::Switch {
            continue;
        }
        for p in (1..=n.ports).rev() {
            if let Some((m, _)) = f.topo.peer_of(i, p) {
                if f.topo.nodes[m].kind == NodeType::Switch && i != m {
                    return (i, p);
                }
            }
        }
    }
    panic!("no inter-switch cable");
}

/// A top switch: one whose every neighbour is a switch.
fn spine(f: &Fabric) -> usize {
    (0..f.nodes.len())
        .find(|&i| {
            f.topo.nodes[i].kind == NodeType::Switch
                && (1..=f.topo.nodes[i].ports).all(|p| {
                    f.topo
                        .peer_of(i, p)
                        .is_none_or(|(m, _)| f.topo.nodes[m].kind == NodeType::Switch)
                })
        })
        .unwrap()
}

fn lft(sm: &Sm) -> u64 {
    sm.stats()
        .count(Method::Set, AttributeId::LinearForwardingTable)
}

#[test]
fn a_failed_cable_is_trapped_swept_and_routed_around_with_only_changed_blocks() {
    for engine in [Engine::MinHop, Engine::FatTree, Engine::UpDown] {
        let (mut f, mut sm) = up(
            "fat-tree-324",
            SmConfig {
                routing: engine,
                ..SmConfig::default()
            },
        );
        let (sw, port) = uplink(&f);
        let (lft0, dr0, hops0) = (lft(&sm), f.stats.dr_hops, f.stats.hops);
        let t = f.now_ns();
        f.schedule(t + MS, FabricEvent::LinkDown(sw, port));
        let idle = f.run_until(&mut sm, t + 20_000 * MS);
        assert!(
            idle,
            "{:?} {:?} {:?} {:?}",
            sm.phase(),
            sm.outstanding(),
            sm.stats(),
            f.stats
        );
        assert_eq!(sm.phase(), Phase::Done);
        let st = sm.stats();
        // Routed around: every switch is reachable by LID again.
        assert!((0..sm.nodes().len())
            .filter(|&i| sm.nodes()[i].is_switch())
            .all(|i| sm.reachable_by_lid(i)));
        assert!(st.traps >= 1 && st.sweeps >= 1, "{st:?}");
        // Each trap is repressed, and the TrapRepress (which gets no
        // response) is counted in its phase like every other SMP.
        let repress = u8::from(Method::TrapRepress);
        assert!(
            st.per_phase_kind.keys().any(|&(_, m, _)| m == repress),
            "{st:?}"
        );
        // ... and the repress reaches the trap's issuer with the trap's
        // TID, so no agent goes on repeating it.
        for (i, n) in f.nodes.iter().enumerate() {
            if let SimNode::Switch(s) = n {
                assert!(
                    s.pending_traps().is_empty(),
                    "{engine:?}: {} still has {:?}",
                    f.topo.nodes[i].name,
                    s.pending_traps()
                );
            }
        }
        assert_eq!(st.fallbacks, 0);
        clean(&f);
        if engine != Engine::MinHop {
            assert!(sm.deadlock_free(), "{engine:?}");
        }
        // Only the blocks that changed, far fewer than all 36 × 6.
        let sent = lft(&sm) - lft0;
        assert!(sent > 0 && sent < 216, "{engine:?}: {sent}");
        // Most of it went LID-routed: only switches whose installed route
        // crossed the dead cable were reached by directed route.
        let (hops, dr) = (f.stats.hops - hops0, f.stats.dr_hops - dr0);
        eprintln!("{engine:?}: {sent} LFT blocks, {hops} hops, {dr} by directed route");
        assert!(dr * 4 < hops, "{engine:?}: {dr} of {hops}");
        // No switch forwards into the dead port.
        if let SimNode::Switch(s) = &f.nodes[sw] {
            for l in 1..=sm.max_lid() {
                assert_ne!(s.model.lft_port(Lid(l)), port);
            }
        }

        // Repaired: the ports come back Active and the routes verify.
        let t = f.now_ns();
        f.schedule(t + MS, FabricEvent::LinkUp(sw, port));
        assert!(f.run_until(&mut sm, t + 2_000 * MS));
        assert!(sm.stats().sweeps >= 2);
        if let SimNode::Switch(s) = &f.nodes[sw] {
            assert_eq!(
                s.model.ports[usize::from(port)].info.port_state,
                PortState::Active
            );
        }
        clean(&f);
    }
}

#[test]
fn a_removed_switch_is_routed_around_and_keeps_its_lid_when_it_returns() {
    let (mut f, mut sm) = up("fat-tree-324", SmConfig::default());
    // A top switch: a node whose every neighbour is a switch.
    let spine = spine(&f);
    let lid = f.nodes[spine].lid();
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(spine));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    clean(&f);
    let k = sm
        .nodes()
        .iter()
        .position(|n| n.info.node_guid.0 == f.topo.nodes[spine].guid)
        .unwrap();
    assert!(!sm.nodes()[k].alive);
    // Lost: its LID resolves to nobody, its port GUID neither.
    assert_eq!(sm.subnet().by_lid(lid), None);
    assert!(sm.subnet().indexes_agree());

    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeUp(spine));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    assert!(sm.nodes()[k].alive);
    assert_eq!(f.nodes[spine].lid(), lid, "same LID after the reboot");
    assert_eq!(sm.subnet().by_lid(lid).map(|x| x.0 .0), Some(k));
    assert!(sm.subnet().indexes_agree());
    clean(&f);
}

#[test]
fn without_traps_the_periodic_light_sweep_finds_the_change() {
    let (mut f, mut sm) = up_with(
        "mport-ntree:8:2",
        SimConfig {
            traps: false,
            ..SimConfig::default()
        },
        SmConfig {
            sweep_interval_ms: Some(500),
            routing: Engine::UpDown,
            ..SmConfig::default()
        },
    );
    let (sw, port) = uplink(&f);
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(sw, port));
    assert!(f.run_until(&mut sm, t + 1_200 * MS));
    let st = sm.stats();
    assert_eq!(st.traps, 0);
    assert!(st.sweeps >= 2, "{st:?}");
    clean(&f);
    assert!(sm.deadlock_free());
}

/// OpenSM's `sweep_on_trap FALSE`: the trap of a failed cable is
/// repressed and starts no sweep; the routes still cross the dead cable
/// until the periodic sweep, which reads the trapping switch and routes
/// around it. `set_sweep_on_trap(true)` (SIGHUP's path) sweeps on the
/// next trap at once.
#[test]
fn with_sweep_on_trap_off_a_trap_waits_for_the_periodic_sweep() {
    let (mut f, mut sm) = up(
        "mport-ntree:8:2",
        SmConfig {
            sweep_interval_ms: Some(2_000),
            sweep_on_trap: false,
            routing: Engine::UpDown,
            ..SmConfig::default()
        },
    );
    let (sw, port) = uplink(&f);
    let sweeps = sm.stats().sweeps;
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(sw, port));
    assert!(f.run_until(&mut sm, t + 500 * MS));
    let st = sm.stats();
    assert!(st.traps >= 1, "{st:?}");
    assert_eq!(st.sweeps, sweeps, "no sweep on the trap");
    let repress = u8::from(Method::TrapRepress);
    assert!(st.per_phase_kind.keys().any(|&(_, m, _)| m == repress));
    assert!(
        f.verify().unreachable > 0,
        "routes still cross the dead cable"
    );
    // The periodic sweep finds it.
    assert!(f.run_until(&mut sm, t + 2_600 * MS));
    assert_eq!(sm.stats().sweeps, sweeps + 1);
    clean(&f);
    // Turned on: the next trap sweeps at once.
    sm.set_sweep_on_trap(true);
    let (sw2, port2) = (
        sw,
        (1..=f.topo.nodes[sw].ports)
            .find(|&p| {
                p != port
                    && f.topo.peer[sw][usize::from(p)]
                        .is_some_and(|(m, _)| f.topo.nodes[m].kind == f.topo.nodes[sw].kind)
            })
            .unwrap(),
    );
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(sw2, port2));
    assert!(f.run_until(&mut sm, t + 500 * MS));
    assert_eq!(sm.stats().sweeps, sweeps + 2, "swept on the trap");
    clean(&f);
}

#[test]
fn a_lid_route_that_does_not_answer_falls_back_to_directed_route() {
    let (mut f, mut sm) = up_with(
        "fat-tree-324",
        SimConfig {
            vfs: 2,
            ..SimConfig::default()
        },
        SmConfig {
            routing: Engine::FatTree,
            lid_policy: LidPolicy::Prepopulated,
            ..SmConfig::default()
        },
    );
    let hyps = sm.hypervisors();
    let vm = sm.create_vm(hyps[0], 7).unwrap();
    let dr0 = f.stats.dr_hops;
    assert!(f.run(&mut sm));
    assert_eq!(f.stats.dr_hops, dr0, "Set(VPortInfo) went LID-routed");
    // Break the SM's leaf switch's entry for the hypervisor the VM goes to.
    let dst = *hyps.last().unwrap();
    let dst_lid = Lid(sm.nodes()[dst].lid);
    let leaf = f.topo.peer_of(f.sm_node, 1).unwrap().0;
    if let SimNode::Switch(s) = &mut f.nodes[leaf] {
        s.model.lft[usize::from(dst_lid.0)] = 0xFF;
    }
    let plan = sm.plan_migration(vm, dst).unwrap();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    assert!(sm.stats().fallbacks >= 1);
    assert!(f.stats.dr_hops > dr0);
    let gid = f.node_by_guid(sm.nodes()[dst].info.node_guid.0).unwrap();
    assert!(f.nodes[gid].owns(Lid(sm.vm(vm).unwrap().lid)));
}

#[test]
fn a_new_switch_with_hosts_is_discovered_addressed_and_routed() {
    let (mut f, mut sm) = up("fat-tree-324", SmConfig::default());
    let lids = sm.max_lid();
    // A top switch with a free port.
    let spine = (0..f.nodes.len())
        .find(|&i| {
            f.topo.nodes[i].kind == NodeType::Switch
                && (1..=f.topo.nodes[i].ports).any(|p| f.topo.peer_of(i, p).is_none())
        })
        .unwrap();
    let free = (1..=f.topo.nodes[spine].ports)
        .find(|&p| f.topo.peer_of(spine, p).is_none())
        .unwrap();
    let x = f.add_node(NodeType::Switch, 8, 0xA000, "S-new");
    let h1 = f.add_node(NodeType::ChannelAdapter, 1, 0xB000, "H-new-1");
    let h2 = f.add_node(NodeType::ChannelAdapter, 1, 0xB100, "H-new-2");
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::Cable((h1, 1), (x, 2)));
    f.schedule(t + MS, FabricEvent::Cable((h2, 1), (x, 3)));
    f.schedule(t + 2 * MS, FabricEvent::Cable((spine, free), (x, 1)));
    let lft0 = lft(&sm);
    assert!(f.run_until(&mut sm, t + 3_000 * MS));
    assert_eq!(sm.max_lid(), lids + 3, "three new LIDs, nobody renumbered");
    for n in [x, h1, h2] {
        assert!(f.nodes[n].lid().0 > lids);
    }
    clean(&f);
    // The new switch gets all its blocks; the others only the changed one.
    let sent = lft(&sm) - lft0;
    let blocks = u64::from(sm.max_lid()) / 64 + 1;
    assert!(sent >= blocks && sent < 216, "{sent}");
    if let SimNode::Switch(s) = &f.nodes[x] {
        assert_eq!(s.model.switch_info.linear_fdb_top, sm.max_lid() | 63);
    }
}

#[test]
fn static_reconfiguration_quiets_the_ca_links_around_the_table_update() {
    let (mut f, mut sm) = up(
        "fat-tree-324",
        SmConfig {
            static_reconfig: true,
            ..SmConfig::default()
        },
    );
    let (sw, port) = uplink(&f);
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(sw, port));
    assert!(f.run_until(&mut sm, t + 3_000 * MS));
    // Every CA link but the SM's went down to Init and came back Active.
    assert_eq!(sm.stats().quiesced, 323);
    for (i, n) in f.nodes.iter().enumerate() {
        if let SimNode::Ca(c) = n {
            assert_eq!(c.model.ports[1].info.port_state, PortState::Active, "{i}");
        }
    }
    clean(&f);
}

/// The SM's events tell the story: every node added once and LIDs given
/// at bring-up, then the subnet up; a switch that goes is a trap, a lost
/// node and the subnet up again; when it returns it is added again.
#[test]
fn the_sm_publishes_what_happens_to_the_subnet() {
    use mad_core::Guid;
    use smi::sm::SmEvent;
    let (mut f, mut sm) = up("mport-ntree:4:3", SmConfig::default());
    let events: Vec<SmEvent> = std::iter::from_fn(|| sm.poll_event()).collect();
    let added: Vec<Guid> = events
        .iter()
        .filter_map(|e| match e {
            SmEvent::NodeAdded { guid, .. } => Some(*guid),
            _ => None,
        })
        .collect();
    assert_eq!(added.len(), f.topo.nodes.len());
    let mut unique = added.clone();
    unique.sort_by_key(|g| g.0);
    unique.dedup();
    assert_eq!(unique.len(), added.len(), "each node added once");
    assert!(events.contains(&SmEvent::LidsChanged {
        ports: f.topo.nodes.len()
    }));
    assert_eq!(
        events.last(),
        Some(&SmEvent::SubnetUp {
            nodes: f.topo.nodes.len(),
            max_lid: Lid(f.topo.nodes.len() as u16)
        })
    );
    assert!(sm.poll_event().is_none(), "each event once");

    // A top switch (every neighbour a switch) goes away.
    let spine = spine(&f);
    let guid = Guid(f.topo.nodes[spine].guid);
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(spine));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    let events: Vec<SmEvent> = std::iter::from_fn(|| sm.poll_event()).collect();
    assert!(
        events.iter().any(|e| matches!(
            e,
            SmEvent::Trap {
                number: Some(128),
                ..
            }
        )),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, SmEvent::NodeLost { guid: g, .. } if *g == guid)),
        "{events:?}"
    );
    assert!(
        matches!(events.last(), Some(SmEvent::SubnetUp { nodes, .. }) if *nodes == f.topo.nodes.len() - 1),
        "{events:?}"
    );

    // It comes back: added again.
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeUp(spine));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    let events: Vec<SmEvent> = std::iter::from_fn(|| sm.poll_event()).collect();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, SmEvent::NodeAdded { guid: g, .. } if *g == guid)),
        "{events:?}"
    );
}

/// The PortInfo of port `port` of simulated node `i`, to read or spoil.
fn port_info(f: &mut Fabric, i: usize, port: usize) -> &mut mad_core::attr::PortInfo {
    match &mut f.nodes[i] {
        SimNode::Switch(s) => &mut s.model.ports[port].info,
        SimNode::Ca(c) => &mut c.model.ports[port].info,
        SimNode::Hypervisor(h) => &mut h.pf.model.ports[port].info,
    }
}

/// Set(PortInfo), Set(anything else), by (method, attribute), since `before`.
fn sets_since(sm: &Sm, before: &std::collections::BTreeMap<(u8, u16), u64>) -> (u64, u64) {
    let set: u8 = Method::Set.into();
    let pi: u16 = AttributeId::PortInfo.into();
    let mut n = (0, 0);
    for (&(m, a), &c) in &sm.stats().sent() {
        let d = c - before.get(&(m, a)).copied().unwrap_or(0);
        if m == set && a == pi {
            n.0 += d;
        } else if m == set {
            n.1 += d;
        }
    }
    n
}

/// What no trap and no PortStateChange says (a CA's LID cleared, another
/// CA's master SM LID changed, a third CA's port left Armed, a switch's
/// LID moved) a light sweep does not find; the heavy sweep that SIGHUP
/// starts, as OpenSM's, reads every port, finds each and sets each again
/// with one Set(PortInfo), writing nothing that holds.
#[test]
fn a_heavy_sweep_finds_what_no_trap_says_and_sets_only_that_again() {
    let (mut f, mut sm) = up("mport-ntree:4:2", SmConfig::default());
    clean(&f);
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter && i != f.sm_node)
        .collect();
    let (a, b, c) = (cas[0], cas[1], cas[2]);
    let sw = spine(&f);
    let lid_a = port_info(&mut f, a, 1).lid;
    let lid_sw = port_info(&mut f, sw, 0).lid;
    let sm_lid = port_info(&mut f, b, 1).master_sm_lid;
    let (lid_b, lid_c) = (port_info(&mut f, b, 1).lid, port_info(&mut f, c, 1).lid);
    assert!(lid_a.0 != 0 && lid_sw.0 != 0 && sm_lid.0 != 0);
    port_info(&mut f, a, 1).lid = Lid(0);
    port_info(&mut f, b, 1).master_sm_lid = Lid(0x77);
    port_info(&mut f, c, 1).port_state = PortState::Armed;
    port_info(&mut f, sw, 0).lid = Lid(0x200);
    let spoiled = |f: &mut Fabric| {
        [
            port_info(f, a, 1).lid == Lid(0),
            port_info(f, b, 1).master_sm_lid == Lid(0x77),
            port_info(f, c, 1).port_state == PortState::Armed,
            port_info(f, sw, 0).lid == Lid(0x200),
        ]
    };

    // A light sweep reads the switches' SwitchInfo; no PortStateChange
    // is set, so no port is read and nothing is found.
    let sweeps = sm.stats().sweeps;
    sm.request_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert_eq!(sm.stats().sweeps, sweeps + 1);
    assert_eq!(spoiled(&mut f), [true; 4], "a light sweep finds none of it");

    while sm.poll_event().is_some() {}
    let before = sm.stats().sent();
    let total = sm.stats().total();
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert_eq!(
        spoiled(&mut f),
        [false; 4],
        "the heavy sweep puts each right"
    );
    // Each is said, by its node's GUID, with what it held.
    let mut said: Vec<(u64, u8, Lid)> = std::iter::from_fn(|| sm.poll_event())
        .filter_map(|e| match e {
            smi::sm::SmEvent::PortNotAsSet {
                guid, port, found, ..
            } => Some((guid.0, port, found.0)),
            _ => None,
        })
        .collect();
    said.sort();
    let guid = |i: usize| f.topo.nodes[i].guid;
    let mut want = vec![
        (guid(a), 1, Lid(0)),
        (guid(b), 1, lid_b),
        (guid(c), 1, lid_c),
        (guid(sw), 0, Lid(0x200)),
    ];
    want.sort();
    assert_eq!(said, want);
    assert_eq!(port_info(&mut f, a, 1).lid, lid_a);
    assert_eq!(port_info(&mut f, sw, 0).lid, lid_sw);
    assert_eq!(port_info(&mut f, b, 1).master_sm_lid, sm_lid);
    assert_eq!(port_info(&mut f, c, 1).port_state, PortState::Active);
    assert!(f.nodes[a].owns(lid_a) && f.nodes[sw].owns(lid_sw));
    clean(&f);
    let (pi_sets, other_sets) = sets_since(&sm, &before);
    let sent = sm.stats().total() - total;
    eprintln!("heavy sweep: {sent} SMPs, {pi_sets} Set(PortInfo), {other_sets} other Sets");
    // One for each port spoiled, and one more for the Armed port's move to
    // Active.
    assert_eq!(pi_sets, 5);
    // The switch whose LID had moved gets its LinearFDBTop and its LFT
    // (one block here) again, as a switch that came back: it may have
    // been reset. Nothing else is written.
    assert_eq!(other_sets, 2);
    assert_eq!(
        lft(&sm)
            - before[&(
                Method::Set.into(),
                AttributeId::LinearForwardingTable.into()
            )],
        1
    );

    // On a subnet that holds what the SM gave it, a heavy sweep reads
    // every port and writes nothing.
    let before = sm.stats().sent();
    let total = sm.stats().total();
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert_eq!(sets_since(&sm, &before), (0, 0));
    assert!(
        !std::iter::from_fn(|| sm.poll_event())
            .any(|e| matches!(e, smi::sm::SmEvent::PortNotAsSet { .. })),
        "nothing to say"
    );
    let ports: usize = (0..f.nodes.len())
        .map(|i| match f.topo.nodes[i].kind {
            NodeType::Switch => 1 + usize::from(f.topo.nodes[i].ports),
            _ => 1,
        })
        .sum();
    let switches = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::Switch)
        .count();
    assert_eq!(
        sm.stats().total() - total,
        (ports + switches) as u64,
        "a Get(PortInfo) of every port (a switch's 0 included) and a Get(SwitchInfo) of every switch"
    );
}

/// With `force_heavy_sweep` (OpenSM's option of that name) every periodic
/// sweep is a heavy one: a CA's LID cleared without a trap is given back
/// by the timer alone; with light periodic sweeps it stays cleared.
#[test]
fn force_heavy_sweep_makes_the_periodic_sweep_find_what_no_trap_says() {
    for heavy in [false, true] {
        let (mut f, mut sm) = up(
            "mport-ntree:4:2",
            SmConfig {
                sweep_interval_ms: Some(500),
                force_heavy_sweep: heavy,
                ..SmConfig::default()
            },
        );
        let a = (0..f.nodes.len())
            .find(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter && i != f.sm_node)
            .unwrap();
        let lid = port_info(&mut f, a, 1).lid;
        port_info(&mut f, a, 1).lid = Lid(0);
        let sweeps = sm.stats().sweeps;
        let t = f.now_ns();
        assert!(f.run_until(&mut sm, t + 1_200 * MS));
        assert!(sm.stats().sweeps >= sweeps + 2, "the timer swept");
        let now = port_info(&mut f, a, 1).lid;
        assert_eq!(now, if heavy { lid } else { Lid(0) }, "heavy: {heavy}");
    }
}

/// What `sm` sent since `before`, by (method, attribute).
fn sent_since(
    sm: &Sm,
    before: &std::collections::BTreeMap<(u8, u16), u64>,
) -> std::collections::BTreeMap<(u8, u16), u64> {
    let mut sent = std::collections::BTreeMap::new();
    for (k, c) in sm.stats().sent() {
        let d = c - before.get(&k).copied().unwrap_or(0);
        if d > 0 {
            sent.insert(k, d);
        }
    }
    sent
}

/// The README's figure at its scale: on a healthy fat-tree-324 (36
/// switches of 36 ports, 324 CAs) a heavy sweep is 36 Get(SwitchInfo) and
/// 1,656 Get(PortInfo) (every switch port, every switch's port 0, every
/// CA's port), and nothing else. Before it, the first light sweep after
/// the bring-up reads again the ports of the 18 switches with a port
/// discovery read Down (the bring-up leaves their PortStateChange set, so
/// a cable that came back since is not lost): 18 Set(SwitchInfo) to clear
/// the bit and 18 × 36 Get(PortInfo). The next light sweep reads the 36
/// SwitchInfo alone (and, as every sweep, the SM's own PortInfo first).
#[test]
fn a_heavy_sweep_of_healthy_fat_tree_324_reads_every_port_and_writes_nothing() {
    let (mut f, mut sm) = up("fat-tree-324", SmConfig::default());
    let (get, set): (u8, u8) = (Method::Get.into(), Method::Set.into());
    let (si, pi): (u16, u16) = (AttributeId::SwitchInfo.into(), AttributeId::PortInfo.into());
    let before = sm.stats().sent();
    sm.request_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    let first = std::collections::BTreeMap::from([
        ((get, si), 36),
        ((set, si), 18),
        ((get, pi), 1 + 18 * 36),
    ]);
    assert_eq!(sent_since(&sm, &before), first, "the first light sweep");
    let before = sm.stats().sent();
    sm.request_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    let light = std::collections::BTreeMap::from([((get, si), 36), ((get, pi), 1)]);
    assert_eq!(sent_since(&sm, &before), light, "the next light sweep");
    let before = sm.stats().sent();
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    let want = std::collections::BTreeMap::from([((get, si), 36), ((get, pi), 1_656)]);
    assert_eq!(sent_since(&sm, &before), want);
}

/// fat-tree-324 up, with no trap delivered and a heavy sweep every
/// 500 ms: what changes is seen by heavy sweeps alone.
fn heavy_sweeps_alone() -> (Fabric, Sm) {
    up_with(
        "fat-tree-324",
        SimConfig {
            traps: false,
            ..SimConfig::default()
        },
        SmConfig {
            sweep_interval_ms: Some(500),
            force_heavy_sweep: true,
            ..SmConfig::default()
        },
    )
}

/// A heavy sweep keeps a node out of reach alive while it looks for it
/// behind the links that came back, and loses what it cannot find: a
/// leaf switch powered off, seen by heavy sweeps alone (no traps), is
/// lost with exactly the CAs behind it; powered on, each is found again.
#[test]
fn a_heavy_sweep_loses_a_leaf_that_is_gone_and_nothing_else() {
    let (mut f, mut sm) = heavy_sweeps_alone();
    let sm_leaf = f.topo.peer_of(f.sm_node, 1).unwrap().0;
    let cas_of = |f: &Fabric, s: usize| -> Vec<u64> {
        (0..f.nodes.len())
            .filter(|&i| {
                f.topo.nodes[i].kind == NodeType::ChannelAdapter
                    && f.topo.peer_of(i, 1).map(|p| p.0) == Some(s)
            })
            .map(|i| f.topo.nodes[i].guid)
            .collect()
    };
    let leaf = (0..f.nodes.len())
        .find(|&s| s != sm_leaf && !cas_of(&f, s).is_empty())
        .unwrap();
    let mut want: Vec<u64> = cas_of(&f, leaf);
    want.push(f.topo.nodes[leaf].guid);
    want.sort();
    assert_eq!(want.len(), 19);
    while sm.poll_event().is_some() {}

    let events = |sm: &mut Sm, lost: bool| {
        let mut v: Vec<u64> = std::iter::from_fn(|| sm.poll_event())
            .filter_map(|e| match e {
                smi::sm::SmEvent::NodeLost { guid, .. } if lost => Some(guid.0),
                smi::sm::SmEvent::NodeAdded { guid, .. } if !lost => Some(guid.0),
                _ => None,
            })
            .collect();
        v.sort();
        v
    };
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(leaf));
    // Its SMPs time out (and are sent again) before it is taken for lost.
    assert!(f.run_until(&mut sm, t + 3_000 * MS));
    assert_eq!(events(&mut sm, true), want, "lost: the leaf and its CAs");
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeUp(leaf));
    assert!(f.run_until(&mut sm, t + 3_000 * MS));
    assert_eq!(events(&mut sm, false), want, "found again");
    clean(&f);
}

/// Two CAs' cables swapped between two leaf switches, seen by heavy
/// sweeps alone: the reads of each by its old route were answered by the
/// other. Each is found again where it now is, read again there, and
/// keeps its LID; neither is taken for lost, and the routes follow them.
#[test]
fn a_heavy_sweep_follows_two_swapped_cas() {
    let (mut f, mut sm) = heavy_sweeps_alone();
    let sm_leaf = f.topo.peer_of(f.sm_node, 1).unwrap().0;
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter && i != f.sm_node)
        .filter(|&i| f.topo.peer_of(i, 1).unwrap().0 != sm_leaf)
        .collect();
    let (c1, at1) = (cas[0], f.topo.peer_of(cas[0], 1).unwrap());
    let c2 = *cas
        .iter()
        .find(|&&i| f.topo.peer_of(i, 1).unwrap().0 != at1.0)
        .unwrap();
    let at2 = f.topo.peer_of(c2, 1).unwrap();
    let lids = (f.nodes[c1].lid(), f.nodes[c2].lid());
    while sm.poll_event().is_some() {}

    let t = f.now_ns();
    for e in [
        FabricEvent::LinkDown(c1, 1),
        FabricEvent::LinkDown(c2, 1),
        FabricEvent::Cable((c1, 1), (at2.0, at2.1)),
        FabricEvent::Cable((c2, 1), (at1.0, at1.1)),
    ] {
        f.schedule(t + MS, e);
    }
    assert!(f.run_until(&mut sm, t + 3_000 * MS));
    assert_eq!(f.topo.peer_of(c1, 1).unwrap().0, at2.0, "swapped");
    let lost = std::iter::from_fn(|| sm.poll_event())
        .filter(|e| matches!(e, smi::sm::SmEvent::NodeLost { .. }))
        .count();
    assert_eq!(lost, 0);
    assert_eq!((f.nodes[c1].lid(), f.nodes[c2].lid()), lids);
    assert_eq!(f.deliver_to(f.sm_node, lids.0), Some(c1));
    assert_eq!(f.deliver_to(f.sm_node, lids.1), Some(c2));
    // What the SM holds of each CA's port is that CA's, not the other's.
    for (c, lid) in [(c1, lids.0), (c2, lids.1)] {
        let guid = f.topo.nodes[c].guid;
        let n = sm
            .nodes()
            .iter()
            .find(|n| n.info.node_guid.0 == guid)
            .unwrap();
        let info = n.ports[1].info.unwrap();
        assert_eq!(info.lid, lid);
    }
    clean(&f);
}

/// The SM's own leaf switch replaced by another (a new GUID, every cable
/// moved to the same port of the new one) under a running SM: its port
/// retrains, the heavy sweep finds the new switch behind it and every
/// node behind that by the routes it had. The old switch alone is lost,
/// the new one is added with a LID of its own, and every CA keeps its LID.
#[test]
fn the_sms_own_leaf_replaced_loses_the_old_switch_alone() {
    let (mut f, mut sm) = up_with(
        "fat-tree-324",
        SimConfig::default(),
        SmConfig {
            sweep_interval_ms: Some(1000),
            ..SmConfig::default()
        },
    );
    let old = f.topo.peer_of(f.sm_node, 1).unwrap().0;
    let ports = f.topo.nodes[old].ports;
    let cables: Vec<(u8, (usize, u8))> = (1..=ports)
        .filter_map(|p| Some((p, f.topo.peer_of(old, p)?)))
        .collect();
    let ca_lids = |f: &Fabric| -> Vec<Lid> {
        (0..f.nodes.len())
            .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter)
            .map(|i| f.nodes[i].lid())
            .collect()
    };
    let before = ca_lids(&f);
    while sm.poll_event().is_some() {}

    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(old));
    assert!(f.run_until(&mut sm, t + 3_000 * MS));
    let new = f.add_node(NodeType::Switch, ports, 0xC0FF_EE00, "leaf-new");
    let t = f.now_ns();
    for &(p, (m, q)) in &cables {
        f.schedule(t + MS, FabricEvent::Cable((m, q), (new, p)));
    }
    assert!(f.run_until(&mut sm, t + 3_000 * MS), "{:?}", sm.phase());
    let (mut lost, mut added) = (Vec::new(), Vec::new());
    for e in std::iter::from_fn(|| sm.poll_event()) {
        match e {
            smi::sm::SmEvent::NodeLost { guid, .. } => lost.push(guid.0),
            smi::sm::SmEvent::NodeAdded { guid, .. } => added.push(guid.0),
            _ => {}
        }
    }
    assert_eq!(lost, [f.topo.nodes[old].guid]);
    assert_eq!(added, [0xC0FF_EE00]);
    assert_ne!(f.nodes[new].lid(), Lid(0));
    assert_eq!(ca_lids(&f), before, "every CA's LID kept");
    clean(&f);
}

/// Every cable of two leaf switches moved to the same port of the other,
/// seen by heavy sweeps alone, where one leaf had a free port: each
/// switch's reads by its old route were answered by the other. Each is
/// read again where it now is, so the CA that moved behind the formerly
/// free port is found; no node is lost and every CA keeps its LID. (With
/// the reads by the old routes kept, the SM would take that port for
/// Down and lose the CA.)
#[test]
fn a_heavy_sweep_follows_two_leaves_whose_cables_were_swapped() {
    let (mut f, mut sm) = heavy_sweeps_alone();
    let sm_leaf = f.topo.peer_of(f.sm_node, 1).unwrap().0;
    let leaves: Vec<usize> = (0..f.nodes.len())
        .filter(|&s| f.topo.nodes[s].kind == NodeType::Switch && s != sm_leaf)
        .filter(|&s| {
            (1..=f.topo.nodes[s].ports).any(|p| {
                f.topo
                    .peer_of(s, p)
                    .is_some_and(|(m, _)| f.topo.nodes[m].kind == NodeType::ChannelAdapter)
            })
        })
        .take(2)
        .collect();
    let (a, b) = (leaves[0], leaves[1]);
    // B's CA at port p unplugged first (and lost): B has a free port.
    let (p, gone) = (1..=f.topo.nodes[b].ports)
        .find_map(|p| {
            let (m, _) = f.topo.peer_of(b, p)?;
            (f.topo.nodes[m].kind == NodeType::ChannelAdapter).then_some((p, m))
        })
        .unwrap();
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(b, p));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    let lost = |sm: &mut Sm| -> Vec<u64> {
        std::iter::from_fn(|| sm.poll_event())
            .filter_map(|e| match e {
                smi::sm::SmEvent::NodeLost { guid, .. } => Some(guid.0),
                _ => None,
            })
            .collect()
    };
    assert_eq!(lost(&mut sm), [f.topo.nodes[gone].guid]);
    let cas = |f: &Fabric| -> Vec<(usize, Lid)> {
        (0..f.nodes.len())
            .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter && i != gone)
            .map(|i| (i, f.nodes[i].lid()))
            .collect()
    };
    let before = cas(&f);

    let cables = |s: usize| -> Vec<(u8, (usize, u8))> {
        (1..=f.topo.nodes[s].ports)
            .filter_map(|k| Some((k, f.topo.peer_of(s, k)?)))
            .collect()
    };
    let (of_a, of_b) = (cables(a), cables(b));
    assert!(of_a.iter().any(|&(k, _)| k == p) && !of_b.iter().any(|&(k, _)| k == p));
    let t = f.now_ns();
    for &(k, _) in of_a.iter() {
        f.schedule(t + MS, FabricEvent::LinkDown(a, k));
    }
    for &(k, _) in of_b.iter() {
        f.schedule(t + MS, FabricEvent::LinkDown(b, k));
    }
    for &(k, far) in of_a.iter() {
        f.schedule(t + 2 * MS, FabricEvent::Cable(far, (b, k)));
    }
    for &(k, far) in of_b.iter() {
        f.schedule(t + 2 * MS, FabricEvent::Cable(far, (a, k)));
    }
    assert!(f.run_until(&mut sm, t + 3_000 * MS), "{:?}", sm.phase());
    assert_eq!(lost(&mut sm), Vec::<u64>::new(), "no node lost");
    assert_eq!(cas(&f), before, "every CA keeps its LID");
    clean(&f);
}

/// A switch reset that kept its LID (its port 0 still answers at it) but
/// lost SwitchInfo, its LFT and its MFT: unicast and multicast through it
/// are broken, and nothing traps. The next light sweep reads its
/// SwitchInfo, sees LinearFDBTop no longer what the SM set, and writes
/// that switch's tables again (its LFT blocks, its MFT), nothing else
/// anywhere; a sweep after that writes nothing.
#[test]
fn a_switch_reset_that_kept_its_lid_gets_its_tables_at_the_next_sweep() {
    let (mut f, mut sm) = up(
        "fat-tree-324",
        SmConfig {
            sweep_interval_ms: None,
            ..SmConfig::default()
        },
    );
    clean(&f);
    let sm_leaf = f.topo.peer_of(f.sm_node, 1).unwrap().0;
    // Three hosts behind three leaves, none of them the SM's.
    let mut leaves = std::collections::BTreeSet::from([sm_leaf]);
    let members: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter && i != f.sm_node)
        .filter(|&i| leaves.insert(f.topo.peer_of(i, 1).unwrap().0))
        .take(3)
        .collect();
    let ids: Vec<(smi::sm::NodeId, u8)> = members
        .iter()
        .map(|&i| {
            (
                sm.subnet()
                    .by_guid(mad_core::Guid(f.topo.nodes[i].guid))
                    .unwrap(),
                1,
            )
        })
        .collect();
    let mlid = Lid(0xC001);
    sm.set_multicast_group(mlid, &ids).unwrap();
    assert!(f.run(&mut sm));
    // The first light sweep after the bring-up: it clears what the
    // bring-up left set on switches with a port read Down.
    sm.request_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    let reaches_all = |f: &Fabric| {
        let w = f.multicast_walk(members[0], mlid);
        members[1..].iter().all(|&m| w.reaches(m))
    };
    assert!(reaches_all(&f));
    let leaf = f.topo.peer_of(members[0], 1).unwrap().0;
    let (held_lft, held_si, held_mft) = match &f.nodes[leaf] {
        SimNode::Switch(s) => (s.model.lft.clone(), s.model.switch_info, s.model.mft[1]),
        _ => unreachable!(),
    };
    // One MFT block per 16-port position the group's entry uses.
    let mft_blocks = held_mft.iter().filter(|&&m| m != 0).count() as u64;
    assert!(mft_blocks > 0);
    let lid = port_info(&mut f, leaf, 0).lid;

    // The reset: tables and SwitchInfo's tops as at power-up, PortInfo kept.
    f.reset_tables(leaf).unwrap();
    assert!(f.verify().unreachable > 0, "the reset breaks unicast");
    assert!(!reaches_all(&f), "and the group");
    assert_eq!(port_info(&mut f, leaf, 0).lid, lid);

    while sm.poll_event().is_some() {}
    let before = sm.stats().sent();
    let mft = |sm: &Sm| {
        sm.stats()
            .count(Method::Set, AttributeId::MulticastForwardingTable)
    };
    let (lft0, mft0) = (lft(&sm), mft(&sm));
    sm.request_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    clean(&f);
    assert!(reaches_all(&f), "the group reaches every member again");
    match &f.nodes[leaf] {
        SimNode::Switch(s) => {
            assert_eq!(s.model.lft, held_lft, "the LFT as it was");
            assert_eq!(s.model.mft[1], held_mft, "the group's entry as it was");
            assert_eq!(
                (
                    s.model.switch_info.linear_fdb_top,
                    s.model.switch_info.multicast_fdb_top
                ),
                (held_si.linear_fdb_top, held_si.multicast_fdb_top)
            );
        }
        _ => unreachable!(),
    }
    let said: Vec<_> = std::iter::from_fn(|| sm.poll_event())
        .filter_map(|e| match e {
            smi::sm::SmEvent::SwitchTablesNotAsSet {
                guid, found, want, ..
            } => Some((guid.0, found, want)),
            _ => None,
        })
        .collect();
    assert_eq!(
        said,
        [(
            f.topo.nodes[leaf].guid,
            (0, 0xBFFF),
            (held_si.linear_fdb_top, held_si.multicast_fdb_top)
        )]
    );
    // The switch's LFT blocks in use, its MFT blocks, and nothing to any
    // other switch.
    let blocks = u64::from(sm.max_lid()) / 64 + 1;
    let (lfts, mfts) = (lft(&sm) - lft0, mft(&sm) - mft0);
    eprintln!("the reset switch: {lfts} Set(LFT), {mfts} Set(MFT)");
    assert_eq!((lfts, mfts), (blocks, mft_blocks));
    let (pi_sets, other_sets) = sets_since(&sm, &before);
    eprintln!("{pi_sets} Set(PortInfo), {other_sets} other Sets");
    assert!(pi_sets <= 1, "at most its port 0's PortInfo again");
    assert_eq!(other_sets, lfts + mfts + 1, "and its SwitchInfo");

    // Nothing is taken for a reset where nothing was.
    let before = sm.stats().sent();
    sm.request_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert_eq!(sets_since(&sm, &before), (0, 0));
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert_eq!(sets_since(&sm, &before), (0, 0));
}

/// The same reset of the SM's own leaf switch: every LID-routed SMP
/// passes through it and is dropped there, so the sweep's reads fall
/// back to directed routes; the leaf gets its tables again all the same.
#[test]
fn the_sms_own_leaf_reset_with_its_lid_gets_its_tables_at_the_next_sweep() {
    let (mut f, mut sm) = up(
        "fat-tree-324",
        SmConfig {
            sweep_interval_ms: None,
            ..SmConfig::default()
        },
    );
    let leaf = f.topo.peer_of(f.sm_node, 1).unwrap().0;
    f.reset_tables(leaf).unwrap();
    assert!(f.verify().unreachable > 0);
    while sm.poll_event().is_some() {}
    let total = sm.stats().total();
    sm.request_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    clean(&f);
    let events: Vec<smi::sm::SmEvent> = std::iter::from_fn(|| sm.poll_event()).collect();
    assert!(
        events.iter().any(|e| matches!(e,
            smi::sm::SmEvent::SwitchTablesNotAsSet { guid, found: (0, _), .. }
                if guid.0 == f.topo.nodes[leaf].guid)),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, smi::sm::SmEvent::NodeLost { .. })),
        "{events:?}"
    );
    eprintln!("the SM's leaf reset: {} SMPs", sm.stats().total() - total);
}

/// An SM whose own cable is down when it starts finds only itself: it
/// does not say the subnet is up (OpenSM's "SM port is down"), and its
/// sweeps wait for the port; when the cable comes back, the heavy sweep
/// that follows brings the whole subnet up.
#[test]
fn an_sm_whose_own_port_is_down_waits_for_it() {
    use smi::sm::SmEvent;
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:2").unwrap();
    let all = topo.nodes.len();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let (sw, port) = f.topo.peer_of(f.sm_node, 1).unwrap();
    f.schedule(0, FabricEvent::LinkDown(sw, port));
    f.run_to_quiescence();
    let mut sm = Sm::new(SmConfig {
        sweep_interval_ms: Some(500),
        ..SmConfig::default()
    });
    let events = |sm: &mut Sm| std::iter::from_fn(|| sm.poll_event()).collect::<Vec<_>>();
    let t = f.now_ns();
    f.run_until(&mut sm, t + 1_200 * MS);
    assert!(!sm.subnet_up() && sm.sm_port_down(), "{:?}", sm.phase());
    let e = events(&mut sm);
    assert!(e.contains(&SmEvent::SmPortState {
        state: PortState::Down
    }));
    assert!(
        !e.iter().any(|e| matches!(e, SmEvent::SubnetUp { .. })),
        "{e:?}"
    );
    assert!(sm.stats().sweeps >= 2, "its sweeps go on");
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkUp(sw, port));
    f.run_until(&mut sm, t + 1_200 * MS);
    assert!(sm.subnet_up() && !sm.sm_port_down(), "{:?}", sm.phase());
    let e = events(&mut sm);
    assert!(
        e.iter()
            .any(|e| matches!(e, SmEvent::SubnetUp { nodes, .. } if *nodes == all)),
        "{e:?}"
    );
    clean(&f);
}

/// Runs `sm` with `events` (ms after now, event), then until it is idle
/// (light sweeps every 20 ms), and checks the subnet is whole: every
/// route, every LID held, each node's LID as before.
fn whole_after(spec: &str, events: &[(u64, FabricEvent)]) {
    let cfg = SmConfig {
        sweep_interval_ms: Some(20),
        ..SmConfig::default()
    };
    let (mut f, mut sm) = up(spec, cfg);
    let before: Vec<Lid> = (0..f.nodes.len()).map(|n| f.nodes[n].lid()).collect();
    let t = f.now_ns() + MS;
    for (at, e) in events {
        f.schedule(t + at * MS, *e);
    }
    let last = events.iter().map(|(at, _)| *at).max().unwrap_or(0);
    let mut end = t + (last + 60) * MS;
    while !(f.run_until(&mut sm, end) && sm.error().is_none()) {
        end += 20 * MS;
        assert!(end < t + 10_000 * MS, "never idle: {:?}", sm.phase());
    }
    clean(&f);
    assert_eq!(f.verify().bad_lids, 0);
    let after: Vec<Lid> = (0..f.nodes.len()).map(|n| f.nodes[n].lid()).collect();
    assert_eq!(after, before, "every node keeps its LID");
    // Every cable carries data again: both its ports Active.
    for n in 0..f.nodes.len() {
        for p in 1..=f.topo.nodes[n].ports {
            if f.topo.peer_of(n, p).is_some() {
                let state = f.nodes[n].port_state(p);
                let name = &f.topo.nodes[n].name;
                assert_eq!(state, Some(PortState::Active), "{name}/{p}");
            }
        }
    }
}

fn named(f: &Fabric, name: &str) -> usize {
    f.topo.nodes.iter().position(|n| n.name == name).unwrap()
}

/// A host that reboots while a heavy sweep waits for answers lost on the
/// way (after the sweep read its port, before it read the switch port the
/// host hangs on): the link retrained, so the SM reads the host's port
/// again, finds its LID gone and sets it again. Before, the sweep took
/// the first read for good, and the host stayed without a LID for ever.
#[test]
fn a_host_that_reboots_while_a_heavy_sweep_waits_gets_its_lid_again() {
    let f = up("mport-ntree:4:2", SmConfig::default()).0;
    let (spine, leaf, host) = (named(&f, "S-L1-0"), named(&f, "S-L0-1-0"), named(&f, "H-2"));
    let to_leaf = (1..=f.topo.nodes[spine].ports)
        .find(|&p| f.topo.peer_of(spine, p).is_some_and(|(m, _)| m == leaf))
        .unwrap();
    let sm_node = f.sm_node;
    whole_after(
        "mport-ntree:4:2",
        &[
            // The SM's own cable out and back: the next sweep is heavy.
            (16, FabricEvent::LinkDown(sm_node, 1)),
            (36, FabricEvent::LinkUp(sm_node, 1)),
            // A cable its reads cross, back a moment later (they are lost).
            (16, FabricEvent::LinkDown(spine, to_leaf)),
            (37, FabricEvent::LinkUp(spine, to_leaf)),
            // The host reboots meanwhile.
            (37, FabricEvent::NodeDown(host)),
            (38, FabricEvent::NodeUp(host)),
        ],
    );
}

/// A host whose cable comes back while the SM sets up the leaf it hangs
/// on, just rebooted (the leaf cannot trap yet: it has no SM LID): the
/// SM leaves the leaf's PortStateChange set for the next light sweep to
/// read, where it cleared it before and the host was never found again.
#[test]
fn a_host_cable_back_behind_a_rebooted_leaf_is_found_by_the_next_sweep() {
    let f = up("mport-ntree:4:2", SmConfig::default()).0;
    let (leaf, host) = (named(&f, "S-L0-0-0"), named(&f, "H-1"));
    let (_, port) = f.topo.peer_of(host, 1).unwrap();
    whole_after(
        "mport-ntree:4:2",
        &[
            (9, FabricEvent::NodeDown(leaf)),
            (39, FabricEvent::NodeUp(leaf)),
            (40, FabricEvent::LinkDown(leaf, port)),
            (59, FabricEvent::LinkUp(leaf, port)),
        ],
    );
}

/// A spine that reboots while a cable elsewhere is out: the SM's sweep
/// read the leaf's port to the spine Down, then found the spine again
/// from another leaf and the link from the spine's side. It read that
/// leaf port again and moved it to Active with the spine's; before, it
/// kept its Down reading and left the port in Init for ever (the spine's
/// end Active), a link that carries no data.
#[test]
fn a_link_found_again_from_its_far_end_is_made_active_at_both_ends() {
    let f = up("mport-ntree:4:2", SmConfig::default()).0;
    let (spine, other, leaf) = (
        named(&f, "S-L1-0"),
        named(&f, "S-L1-1"),
        named(&f, "S-L0-0-1"),
    );
    let cable = (1..=f.topo.nodes[other].ports)
        .find(|&p| f.topo.peer_of(other, p).is_some_and(|(m, _)| m == leaf))
        .unwrap();
    whole_after(
        "mport-ntree:4:2",
        &[
            (47, FabricEvent::LinkDown(other, cable)),
            (48, FabricEvent::NodeDown(spine)),
            (49, FabricEvent::NodeUp(spine)),
            (85, FabricEvent::LinkUp(other, cable)),
        ],
    );
}

/// A switch that loses its LID with nothing to show for it (no link of
/// it retrained, no trap): a light sweep's SMP to its LID is lost and goes
/// again by directed route, and the SM makes its next sweep a heavy one,
/// which finds the LID gone and sets it again. Before, each light sweep
/// lost that SMP again, for ever.
#[test]
fn a_switch_that_loses_its_lid_unseen_gets_it_again() {
    let cfg = SmConfig {
        sweep_interval_ms: Some(20),
        ..SmConfig::default()
    };
    let (mut f, mut sm) = up("mport-ntree:4:2", cfg);
    let spine = named(&f, "S-L1-0");
    let lid = f.nodes[spine].lid();
    let SimNode::Switch(s) = &mut f.nodes[spine] else {
        panic!("{spine} is a switch");
    };
    s.model.ports[0].info.lid = Lid(0);
    let t = f.now_ns();
    let mut end = t + 60 * MS;
    while !(f.run_until(&mut sm, end) && sm.error().is_none()) {
        end += 20 * MS;
        assert!(end < t + 10_000 * MS, "never idle: {:?}", sm.phase());
    }
    assert_eq!(f.nodes[spine].lid(), lid);
    assert!(
        sm.stats().fallbacks > 0,
        "the lost SMP went by directed route"
    );
    let v = f.verify();
    assert_eq!((v.unreachable, v.bad_lids), (0, 0), "{v:?}");
}

/// A spine whose tables were reset unseen (it keeps its LID and links,
/// and traps nothing), met by a heavy sweep of fat-tree-324: the SMPs
/// by LID whose route or response crosses it are lost, and so is the
/// Get(SwitchInfo) that would tell. After the first one times out, the
/// rest of the sweep goes by directed route: one window of 16 lost and
/// 201 ms. Before, each SMP by LID waited out its own time-out before
/// falling back, 336 of them, and the sweep took 4.2 s (a random fault
/// run of the chaos tests took 12 s of simulated time to go idle and
/// failed, seed kept).
#[test]
fn a_heavy_sweep_loses_one_window_by_lid_to_a_switch_that_lost_its_tables() {
    for routing in [Engine::MinHop, Engine::UpDown] {
        let (mut f, mut sm) = up(
            "fat-tree-324",
            SmConfig {
                routing,
                ..SmConfig::default()
            },
        );
        let spine = spine(&f);
        f.reset_tables(spine).unwrap();
        let before = sm.stats().fallbacks;
        let t = f.now_ns();
        sm.request_heavy_sweep(t / MS);
        assert!(f.run_until(&mut sm, t + 5_000 * MS));
        let took = sm.stats().phase_end_ms[&Phase::Activation] - t / MS;
        let fallbacks = sm.stats().fallbacks - before;
        println!("{routing:?}: {fallbacks} fallbacks, idle after {took} ms (simulated)");
        assert!(fallbacks <= 16, "{routing:?}: {fallbacks} SMPs lost by LID");
        assert!(took < 400, "{routing:?}: {took} ms");
        clean(&f);
    }
}

/// A host renamed (its NodeDescription changed by other means than the
/// SM's Set, as Linux's `node_desc` is written) raises trap 144 with
/// NodeDescriptionChange: the SM reads its NodeDescription again, with
/// one Get and no sweep, as OpenSM does; the SA's NodeRecord follows the
/// SM's node.
#[test]
fn a_renamed_host_traps_and_the_sm_reads_its_new_description() {
    let (mut f, mut sm) = up("mport-ntree:4:2", SmConfig::default());
    let host = (0..f.nodes.len())
        .rfind(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .unwrap();
    let guid = f.topo.nodes[host].guid;
    let said = |sm: &Sm| {
        (sm.nodes().iter())
            .find(|n| n.info.node_guid.0 == guid)
            .and_then(|n| n.description.as_ref())
            .and_then(|d| {
                d.node_string
                    .as_str()
                    .ok()
                    .map(|s| s.trim_end_matches('\0').to_string())
            })
    };
    assert_eq!(said(&sm).as_deref(), Some(f.topo.nodes[host].name.as_str()));
    let gets = |sm: &Sm| -> u64 {
        (sm.stats().per_phase_kind.iter())
            .filter(|((_, m, a), _)| {
                *m == u8::from(Method::Get) && *a == u16::from(AttributeId::NodeDescription)
            })
            .map(|(_, n)| *n)
            .sum()
    };
    let (before, sweeps) = (gets(&sm), sm.stats().sweeps);
    f.describe(host, "web01 HCA-1").unwrap();
    let t = f.now_ns();
    assert!(f.run_until(&mut sm, t + 100 * MS));
    assert_eq!(said(&sm).as_deref(), Some("web01 HCA-1"));
    assert_eq!(gets(&sm), before + 1, "one Get(NodeDescription)");
    assert_eq!(sm.stats().sweeps, sweeps, "no sweep");
    assert_eq!(sm.stats().traps, 1);
    // A node that is not there: an error, nothing raised.
    assert!(f.describe(usize::MAX, "x").is_err());
}

/// A node whose SystemImageGUID changes (an adapter joined to another
/// system image) raises trap 145: the SM takes the new GUID from the
/// notice, as OpenSM does, with no Get and no sweep, for every port of
/// the node; a switch's too. The SA's NodeRecord follows the SM's node.
#[test]
fn a_new_system_image_guid_is_taken_from_trap_145() {
    for kind in [NodeType::ChannelAdapter, NodeType::Switch] {
        let (mut f, mut sm) = up("mport-ntree:4:2", SmConfig::default());
        let at = (0..f.nodes.len())
            .rfind(|&i| f.topo.nodes[i].kind == kind)
            .unwrap();
        let guid = f.topo.nodes[at].guid;
        let held = |sm: &Sm| -> Vec<u64> {
            (sm.nodes().iter())
                .filter(|n| n.info.node_guid.0 == guid)
                .map(|n| n.info.system_image_guid.0)
                .collect()
        };
        assert!(held(&sm).iter().all(|&g| g != 0x5151));
        let gets = |sm: &Sm| sm.stats().count(Method::Get, AttributeId::NodeInfo);
        let (before, sweeps) = (gets(&sm), sm.stats().sweeps);
        f.set_system_image(at, 0x5151).unwrap();
        let t = f.now_ns();
        assert!(f.run_until(&mut sm, t + 100 * MS));
        let got = held(&sm);
        assert!(
            !got.is_empty() && got.iter().all(|&g| g == 0x5151),
            "{kind:?}: {got:x?}"
        );
        assert_eq!(sm.stats().sweeps, sweeps, "no sweep");
        assert_eq!(gets(&sm), before, "{kind:?}: no Get(NodeInfo)");
        assert!(f.set_system_image(usize::MAX, 1).is_err());
    }
}
