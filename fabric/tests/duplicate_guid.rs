//! A port that answers with the GUID of a port the SM knows elsewhere: a
//! cable moved, or two ports with one GUID (a card made wrong, or a host
//! forging another's). The SM asks again by the link it knows: where the
//! known port still answers, the second is refused and reported, and the
//! first keeps its link, its LID and its traffic; where it does not, the
//! cable moved and the port is linked where it is now.

use fabric::sim::{Fabric, FabricEvent, SimConfig};
use mad_core::attr::{NodeType, PortState};
use mad_core::{Guid, Lid};
use smi::sm::{NodeId, Sm, SmConfig, SmEvent};

const MS: u64 = 1_000_000;

fn up(spec: &str) -> (Fabric, Sm) {
    let (f, sm, up) =
        fabric::sim::bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up, "{spec}: {:?} {:?}", sm.phase(), sm.error());
    (f, sm)
}

/// A switch port with no cable.
fn free_port(f: &Fabric) -> (usize, u8) {
    for (i, n) in f.topo.nodes.iter().enumerate() {
        if n.kind == NodeType::Switch {
            if let Some(p) = (1..=n.ports).find(|&p| f.topo.peer_of(i, p).is_none()) {
                return (i, p);
            }
        }
    }
    panic!("no free switch port");
}

/// The last CA, far from the SM (which runs on the first).
fn far_ca(f: &Fabric) -> usize {
    (0..f.nodes.len())
        .rev()
        .find(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .unwrap()
}

/// The SM's view of where port 1 of the node with `guid` is cabled: the
/// node GUID and port at the other end.
fn cabled_to(sm: &Sm, guid: u64) -> Option<(u64, u8)> {
    let n = sm.nodes().iter().find(|n| n.info.node_guid.0 == guid)?;
    let (m, q) = n.ports[1].peer?;
    Some((sm.nodes()[m].info.node_guid.0, q))
}

/// Every CA but `except` delivers to `lid` at node `holder`.
fn all_reach(f: &Fabric, lid: Lid, holder: usize, except: usize) {
    for src in 0..f.nodes.len() {
        if src != except && src != holder && f.topo.nodes[src].kind == NodeType::ChannelAdapter {
            assert_eq!(f.deliver_to(src, lid), Some(holder), "from {src}");
        }
    }
}

fn events(sm: &mut Sm) -> Vec<SmEvent> {
    std::iter::from_fn(|| sm.poll_event()).collect()
}

/// Schedules each event `ms` after now, then runs the SM for 3 s.
fn after(f: &mut Fabric, sm: &mut Sm, evs: impl IntoIterator<Item = (u64, FabricEvent)>) {
    let t = f.now_ns();
    for (ms, e) in evs {
        f.schedule(t + ms * MS, e);
    }
    assert!(f.run_until(sm, t + 3_000 * MS));
}

/// Cables the forger `forged`'s port 1 to `at` and runs the SM: it is
/// refused once; the events `keep` picks.
fn cable_forger(
    f: &mut Fabric,
    sm: &mut Sm,
    forged: usize,
    at: (usize, u8),
    keep: impl Fn(&SmEvent) -> bool,
) -> Vec<SmEvent> {
    after(f, sm, [(1, FabricEvent::Cable((forged, 1), at))]);
    assert_eq!(sm.stats().duplicate_guids, 1);
    events(sm).into_iter().filter(|e| keep(e)).collect()
}

/// The first port (`victim`, LID `lid`) kept its LID and traffic; the
/// second (`forged`) got no LID, is not Active, and took no new LID.
fn first_kept(f: &Fabric, sm: &Sm, (victim, lid): (usize, Lid), forged: usize, max: u16) {
    assert_eq!(f.nodes[victim].lid(), lid);
    assert_eq!(f.nodes[forged].lid(), Lid(0));
    assert_ne!(f.nodes[forged].port_state(1), Some(PortState::Active));
    assert_eq!(sm.max_lid(), max);
    all_reach(f, lid, victim, forged);
}

#[test]
fn a_second_port_with_a_known_guid_is_refused_and_the_first_keeps_its_link() {
    let (mut f, mut sm) = up("fat-tree-324");
    let victim = far_ca(&f);
    let guid = f.topo.nodes[victim].guid;
    let (leaf, leaf_port) = f.topo.peer_of(victim, 1).unwrap();
    let lid = f.nodes[victim].lid();
    let max = sm.max_lid();
    let (sw, port) = free_port(&f);
    events(&mut sm);

    let forged = f.add_node(NodeType::ChannelAdapter, 1, guid, "H-forged");
    let dups = cable_forger(&mut f, &mut sm, forged, (sw, port), |e| {
        matches!(e, SmEvent::DuplicateGuid { .. })
    });
    let leaf_guid = Guid(f.topo.nodes[leaf].guid);
    let sw_guid = Guid(f.topo.nodes[sw].guid);
    assert!(
        matches!(dups[..], [SmEvent::DuplicateGuid { guid: g, port: 1, kept, refused }]
            if g == Guid(guid) && kept == (leaf_guid, leaf_port) && refused == (sw_guid, port)),
        "{dups:?}"
    );
    // The first keeps its link and LID; the second gets neither, and its
    // port is not activated.
    assert_eq!(cabled_to(&sm, guid), Some((leaf_guid.0, leaf_port)));
    first_kept(&f, &sm, (victim, lid), forged, max);

    // Something else changes and the SM routes again: the LID still
    // leads to the first, and the second is refused again, once.
    let up_port = (1..=f.topo.nodes[leaf].ports)
        .find(|&p| {
            f.topo
                .peer_of(leaf, p)
                .is_some_and(|(m, _)| f.topo.nodes[m].kind == NodeType::Switch && m != sw)
        })
        .unwrap();
    let (a, b) = (leaf, up_port);
    after(&mut f, &mut sm, [(1, FabricEvent::LinkDown(a, b))]);
    assert_eq!(cabled_to(&sm, guid), Some((leaf_guid.0, leaf_port)));
    all_reach(&f, lid, victim, forged);
    assert_eq!(f.nodes[forged].lid(), Lid(0));
    assert_eq!(sm.stats().duplicate_guids, 2, "asked again in the sweep");
}

#[test]
fn a_cable_moved_to_another_switch_is_followed() {
    let (mut f, mut sm) = up("fat-tree-324");
    let ca = far_ca(&f);
    let guid = f.topo.nodes[ca].guid;
    let lid = f.nodes[ca].lid();
    let (sw, port) = free_port(&f);
    // Unplugged and plugged in elsewhere at once: the SM may hear of the
    // new place before it reads the old one as Down.
    after(
        &mut f,
        &mut sm,
        [
            (1, FabricEvent::LinkDown(ca, 1)),
            (1, FabricEvent::Cable((ca, 1), (sw, port))),
        ],
    );
    assert_eq!(sm.stats().duplicate_guids, 0);
    assert_eq!(cabled_to(&sm, guid), Some((f.topo.nodes[sw].guid, port)));
    assert_eq!(f.nodes[ca].lid(), lid, "the LID moves with the port");
    assert_eq!(f.nodes[ca].port_state(1), Some(PortState::Active));
    all_reach(&f, lid, ca, usize::MAX);
}

/// A new node whose port 1 answers with its own node GUID but another
/// port's port GUID (the GUID a GID is made of).
fn port_guid_forger(f: &mut Fabric, node_guid: u64, port_guid: u64) -> usize {
    let forged = f.add_node(NodeType::ChannelAdapter, 1, node_guid, "H-forged");
    let fabric::sim::SimNode::Ca(c) = &mut f.nodes[forged] else {
        unreachable!("a CA")
    };
    c.model.ports[1].guids[0] = Guid(port_guid);
    forged
}

#[test]
fn a_node_with_a_known_port_guid_is_refused_and_the_gid_stays_with_its_holder() {
    let (mut f, mut sm) = up("fat-tree-324");
    let victim = far_ca(&f);
    let guid = f.topo.nodes[victim].guid;
    let lid = f.nodes[victim].lid();
    let max = sm.max_lid();
    let (sw, port) = free_port(&f);
    events(&mut sm);

    let pg = port_guid_of(&f, victim);
    let forged = port_guid_forger(&mut f, 0x0bad_0000_0000_0001, pg);
    let dups = cable_forger(&mut f, &mut sm, forged, (sw, port), |e| {
        matches!(
            e,
            SmEvent::DuplicatePortGuid { .. } | SmEvent::NodeAdded { .. }
        )
    });
    let sw_guid = Guid(f.topo.nodes[sw].guid);
    assert!(
        matches!(dups[..], [SmEvent::DuplicatePortGuid { port_guid, held_by, refused, beyond }]
            if port_guid == Guid(pg) && held_by == (Guid(guid), 0)
                && refused == Guid(0x0bad_0000_0000_0001) && beyond == (sw_guid, port)),
        "{dups:?}"
    );
    // The GID still names the first port; the second has no LID, is not
    // Active, and the SM knows no node by its node GUID.
    let s = sm.subnet();
    assert_eq!(
        s.by_port_guid(Guid(pg)).map(|(n, _)| n.0),
        Some(victim_node(&sm, guid))
    );
    assert!(s.by_guid(Guid(0x0bad_0000_0000_0001)).is_none());
    assert!(s.indexes_agree());
    first_kept(&f, &sm, (victim, lid), forged, max);
}

/// A new port whose port GUID is an alias GUID a live port holds is
/// refused as a port whose port GUID is taken: the alias GID keeps
/// naming the port that holds it (OpenSM refuses it too, ERR 0D13).
#[test]
fn a_node_whose_port_guid_is_a_held_alias_is_refused() {
    let (mut f, mut sm) = up("fat-tree-324");
    let victim = far_ca(&f);
    let guid = f.topo.nodes[victim].guid;
    let lid = f.nodes[victim].lid();
    let pg = port_guid_of(&f, victim);
    let (sw, port) = free_port(&f);
    let alias = 0x0a11_a500_0000_0001;
    let mut block = [0u64; 8];
    (block[0], block[1]) = (pg, alias);
    let n = NodeId(victim_node(&sm, guid));
    assert_eq!(sm.set_guid_block(n, 0, block), Ok(1));
    after(&mut f, &mut sm, []);
    assert_eq!(f.nodes[victim].guids(1).unwrap()[1], alias, "written");
    let max = sm.max_lid();
    events(&mut sm);

    let forged = port_guid_forger(&mut f, 0x0bad_0000_0000_0003, alias);
    let dups = cable_forger(&mut f, &mut sm, forged, (sw, port), |e| {
        matches!(
            e,
            SmEvent::DuplicatePortGuid { .. } | SmEvent::NodeAdded { .. }
        )
    });
    assert!(
        matches!(dups[..], [SmEvent::DuplicatePortGuid { port_guid, held_by, .. }]
            if port_guid == Guid(alias) && held_by == (Guid(guid), 0)),
        "{dups:?}"
    );
    let s = sm.subnet();
    assert_eq!(s.by_gid_guid(Guid(alias)), Some((n, 0)));
    assert_eq!(s.by_port_guid(Guid(alias)), None);
    assert!(s.by_guid(Guid(0x0bad_0000_0000_0003)).is_none());
    assert!(s.indexes_agree());
    first_kept(&f, &sm, (victim, lid), forged, max);
}

/// The port GUID of port 1 of node `i`.
fn port_guid_of(f: &Fabric, i: usize) -> u64 {
    f.nodes[i].guids(1).unwrap()[0]
}

/// The SM's node index of the node with node GUID `guid`.
fn victim_node(sm: &Sm, guid: u64) -> usize {
    sm.subnet().by_guid(Guid(guid)).unwrap().0
}

/// A port GUID taken by another node while its port was lost is that
/// node's while it lives; when it goes too and the first comes back, the
/// GUID names the first again.
#[test]
fn a_port_guid_taken_while_its_port_was_lost_goes_back_when_the_taker_goes() {
    let (mut f, mut sm) = up("fat-tree-324");
    let victim = far_ca(&f);
    let guid = f.topo.nodes[victim].guid;
    let pg = port_guid_of(&f, victim);
    let (leaf, leaf_port) = f.topo.peer_of(victim, 1).unwrap();
    let (sw, port) = free_port(&f);
    after(&mut f, &mut sm, [(1, FabricEvent::LinkDown(victim, 1))]);
    assert_eq!(sm.subnet().by_port_guid(Guid(pg)), None, "lost");

    // Another node with that port GUID comes while the first is away: it
    // is let in, and the GID names it.
    let taker = port_guid_forger(&mut f, 0x0bad_0000_0000_0002, pg);
    after(
        &mut f,
        &mut sm,
        [(1, FabricEvent::Cable((taker, 1), (sw, port)))],
    );
    assert_eq!(sm.stats().duplicate_guids, 0);
    let taker_node = victim_node(&sm, 0x0bad_0000_0000_0002);
    assert_eq!(
        sm.subnet().by_port_guid(Guid(pg)).map(|(n, _)| n.0),
        Some(taker_node)
    );
    assert_eq!(f.nodes[taker].port_state(1), Some(PortState::Active));

    // The first comes back while the taker holds it: refused.
    after(&mut f, &mut sm, [(1, FabricEvent::LinkUp(victim, 1))]);
    assert_eq!(sm.stats().duplicate_guids, 1);
    assert_eq!(
        sm.subnet().by_port_guid(Guid(pg)).map(|(n, _)| n.0),
        Some(taker_node)
    );
    assert_ne!(f.nodes[victim].port_state(1), Some(PortState::Active));
    assert!(sm.subnet().indexes_agree());

    // The taker goes, and the first is found again at the next change:
    // the GUID is the first's once more, with its LID, and traffic flows.
    after(
        &mut f,
        &mut sm,
        [
            (1, FabricEvent::LinkDown(taker, 1)),
            (2, FabricEvent::LinkDown(victim, 1)),
            (500, FabricEvent::LinkUp(victim, 1)),
        ],
    );
    let first = victim_node(&sm, guid);
    assert_eq!(
        sm.subnet().by_port_guid(Guid(pg)).map(|(n, _)| n.0),
        Some(first)
    );
    assert!(sm.subnet().indexes_agree());
    assert_eq!(f.nodes[victim].port_state(1), Some(PortState::Active));
    assert_eq!(f.topo.peer_of(victim, 1), Some((leaf, leaf_port)));
    let lid = f.nodes[victim].lid();
    assert_ne!(lid, Lid(0));
    all_reach(&f, lid, victim, taker);
}

/// A refused node costs nothing at the sweeps after: it is not asked for
/// again (nor reported again) while nothing changes where it is cabled.
#[test]
fn a_refused_node_costs_no_smps_at_later_sweeps() {
    let cfg = SmConfig {
        sweep_interval_ms: Some(1000),
        ..SmConfig::default()
    };
    let (mut f, mut sm, up) =
        fabric::sim::bring_up("fat-tree-324", SimConfig::default(), cfg).unwrap();
    assert!(up);
    // The SMPs of 10 s of sweeps.
    let sweeps = |f: &mut Fabric, sm: &mut Sm| {
        let s0 = sm.stats().total();
        let t = f.now_ns();
        assert!(f.run_until(sm, t + 10_000 * MS));
        sm.stats().total() - s0
    };
    // The first light sweep reads again the switches whose ports the
    // bring-up read Down; what follows is the steady state.
    sweeps(&mut f, &mut sm);
    let without = sweeps(&mut f, &mut sm);
    let victim = far_ca(&f);
    let (pg, at) = (port_guid_of(&f, victim), free_port(&f));
    let forged = port_guid_forger(&mut f, 0x0bad_0000_0000_0001, pg);
    cable_forger(&mut f, &mut sm, forged, at, |_| false);
    let with = sweeps(&mut f, &mut sm);
    println!("10 s of sweeps on fat-tree-324: {without} SMPs, {with} with a refused forger");
    assert!(without > 0);
    assert_eq!(with, without, "the forger is not asked again");
    assert_eq!(sm.stats().duplicate_guids, 1, "nor reported again");
}
