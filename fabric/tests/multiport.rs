//! Multi-port CAs: every cabled port of a CA is an end port of its own,
//! with its own port GUID (the simulator's: node GUID + port), LID, link
//! and state, as the IBA has it and OpenSM manages it. A two-port HCA
//! cabled to two leaves (two rails), one with both ports on one leaf, and
//! the SM's own host with a second port: each port gets a LID, goes
//! Active and is reached by every other end port; losing one port's cable
//! loses that port only, and it comes back with the LID it had.

use fabric::sim::{Fabric, FabricEvent, PartitionDrop, SimConfig, SimNode};
use fabric::topology::{parse_ibnetdiscover, Topology};
use mad_core::attr::{AttributeId, NodeInfo, PortState};
use mad_core::{Guid, Lid, MKey, Method, Smp};
use smi::sm::{Engine, NodeId, Sm, SmConfig, SmEvent};

const MS: u64 = 1_000_000;

fn topo() -> Topology {
    parse_ibnetdiscover(include_str!("data/multiport.topo")).unwrap()
}

fn node(f: &Fabric, name: &str) -> usize {
    f.topo.nodes.iter().position(|n| n.name == name).unwrap()
}

fn up(routing: Engine) -> (Fabric, Sm, Vec<SmEvent>) {
    let mut f = Fabric::new(topo(), SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig {
        routing,
        ..SmConfig::default()
    });
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    let events = std::iter::from_fn(|| sm.poll_event()).collect();
    (f, sm, events)
}

/// The SM's entry for port `port` of the CA named `name`.
fn entry(f: &Fabric, sm: &Sm, name: &str, port: u8) -> NodeId {
    let guid = f.topo.nodes[node(f, name)].guid;
    let e = sm.subnet().by_guid_port(Guid(guid), port).unwrap();
    let n = sm.subnet().node(e).unwrap();
    assert_eq!(n.info.local_port_num, port, "{name}/{port}");
    assert_eq!(
        n.info.port_guid,
        Guid(guid + u64::from(port)),
        "{name}/{port}"
    );
    e
}

#[test]
fn every_cabled_port_of_a_ca_gets_its_own_lid_and_traffic() {
    for routing in Engine::ALL {
        let (f, sm, events) = up(routing);
        let v = f.verify();
        assert!(v.ok(), "{routing:?}: {v}");
        // 2 switches, H1's one port, and two ports each of H0, D and E.
        assert_eq!((v.sources, v.lids), (9, 9), "{routing:?}: {v}");
        assert!(sm.subnet().indexes_agree());
        // The SM counts nodes, not ports.
        let nodes = events.iter().find_map(|e| match e {
            SmEvent::SubnetUp { nodes, .. } => Some(*nodes),
            _ => None,
        });
        assert_eq!(nodes, Some(f.topo.nodes.len()), "{routing:?}");
        let mut lids = std::collections::BTreeSet::new();
        for name in ["H0", "D", "E"] {
            let i = node(&f, name);
            for port in 1..=2 {
                let (lid, _) = f.nodes[i].port_lid(port);
                assert_ne!(lid, Lid(0), "{routing:?}: {name}/{port} has no LID");
                // The check of changed LIDs alone (the cheaper path taken
                // above a size) walks from every end port to it too.
                let one = f.verify_lids(&[lid]);
                assert!(one.ok() && one.sources == 9 && one.lids == 1, "{one}");
                assert!(
                    lids.insert(lid),
                    "{routing:?}: {name}/{port}: LID {lid:?} twice"
                );
                assert_eq!(
                    f.nodes[i].port_state(port),
                    Some(PortState::Active),
                    "{routing:?}: {name}/{port}"
                );
                // The SM's entry for the port holds that LID, and is what
                // the LID and the port's GUID find.
                let e = entry(&f, &sm, name, port);
                assert_eq!(sm.subnet().node(e).unwrap().lid, lid.0);
                assert_eq!(sm.subnet().by_lid(lid), Some((e, port)));
                let pg = Guid(f.topo.nodes[i].guid + u64::from(port));
                assert_eq!(sm.subnet().by_port_guid(pg), Some((e, 0)));
                // Only the first port found is the node's entry.
                assert_eq!(sm.subnet().is_first_port(e), port == 1, "{name}/{port}");
            }
        }
        // The SM's own second port names the SM as its master.
        let h0 = node(&f, "H0");
        let SimNode::Ca(c) = &f.nodes[h0] else {
            panic!("H0 is the SM's CA")
        };
        assert_eq!(c.model.ports[2].info.master_sm_lid, sm.sm_lid());
    }
}

#[test]
fn a_ports_cable_lost_loses_that_port_only_and_it_comes_back_with_its_lid() {
    let (mut f, mut sm, _) = up(Engine::MinHop);
    let d = node(&f, "D");
    let (p1, p2) = (f.nodes[d].port_lid(1).0, f.nodes[d].port_lid(2).0);
    let (e1, e2) = (entry(&f, &sm, "D", 1), entry(&f, &sm, "D", 2));
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(d, 2));
    assert!(f.run_until(&mut sm, t + 3_000 * MS));
    let events: Vec<SmEvent> = std::iter::from_fn(|| sm.poll_event()).collect();
    let lost: Vec<usize> = (events.iter())
        .filter_map(|e| match e {
            SmEvent::NodeLost { node, .. } => Some(*node),
            _ => None,
        })
        .collect();
    assert_eq!(lost, vec![e2.0], "only port 2's entry is lost: {events:?}");
    assert!(sm.subnet().node(e1).unwrap().alive);
    assert!(!sm.subnet().node(e2).unwrap().alive);
    assert_eq!(sm.subnet().by_lid(p1), Some((e1, 1)));
    assert_eq!(
        sm.subnet().by_lid(p2),
        None,
        "a lost port's LID finds nobody"
    );
    let v = f.verify();
    assert!(v.ok() && v.sources == 8, "{v}");
    assert!(sm.subnet().indexes_agree());

    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkUp(d, 2));
    assert!(f.run_until(&mut sm, t + 3_000 * MS));
    let events: Vec<SmEvent> = std::iter::from_fn(|| sm.poll_event()).collect();
    assert!(
        (events.iter()).any(|e| matches!(e, SmEvent::NodeAdded { node, .. } if *node == e2.0)),
        "port 2 found again under its entry: {events:?}"
    );
    assert_eq!(f.nodes[d].port_lid(2).0, p2, "port 2 keeps its LID");
    assert_eq!(f.nodes[d].port_state(2), Some(PortState::Active));
    assert_eq!(entry(&f, &sm, "D", 2), e2);
    let v = f.verify();
    assert!(v.ok() && v.sources == 9, "{v}");
    assert!(sm.subnet().indexes_agree());
}

#[test]
fn an_smp_to_a_ports_lid_is_answered_by_that_port() {
    let (mut f, _, _) = up(Engine::MinHop);
    let h1 = node(&f, "H1");
    for name in ["H0", "D", "E"] {
        let i = node(&f, name);
        let guid = f.topo.nodes[i].guid;
        for port in 1..=2u8 {
            let lid = f.nodes[i].port_lid(port).0;
            let get = Smp::lid_routed(Method::Get, AttributeId::NodeInfo, 0, 0x90, MKey(0));
            f.attach(h1);
            assert!(f.inject(h1, get, lid.0));
            f.run_to_quiescence();
            let got: Vec<Smp> = (f.take_delivered().into_iter())
                .filter(|d| d.node == h1 && d.smp.method() == Method::GetResp)
                .map(|d| d.smp)
                .collect();
            f.detach(h1);
            assert_eq!(got.len(), 1, "{name}/{port}: one answer");
            let ni = NodeInfo::decode(&got[0].data).unwrap();
            assert_eq!(
                (ni.local_port_num, ni.port_guid),
                (port, Guid(guid + u64::from(port))),
                "{name}/{port}"
            );
        }
    }
}

/// A partition is a set of end ports: D's port 2 and H1 are members of
/// 0x42, D's port 1 is not. Each port of D gets its own P_Key table, and
/// packets in the partition go from port 2, not from port 1.
#[test]
fn a_partition_names_one_port_of_a_multi_port_ca() {
    let t = topo();
    let guid = |name: &str| t.nodes.iter().find(|n| n.name == name).unwrap().guid;
    let (d2, h1) = (guid("D") + 2, guid("H1") + 1);
    let conf =
        format!("Default=0x7fff,ipoib:ALL=full;\nstorage=0x0042:{d2:#x}=full,{h1:#x}=full;\n");
    let mut f = Fabric::new(t, SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig::default());
    let parts = smi::sm::partitions::parse(&conf).unwrap();
    assert_eq!(sm.set_partitions(parts), 0);
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    let (d, h1) = (node(&f, "D"), node(&f, "H1"));
    let SimNode::Ca(c) = &f.nodes[d] else {
        panic!("D is a CA")
    };
    let keys = |p: usize| {
        c.model.ports[p]
            .pkeys
            .iter()
            .map(|k| k.0)
            .collect::<Vec<u16>>()
    };
    assert_eq!(keys(2)[..3], [0xFFFF, 0x8042, 0], "port 2 is a member");
    assert_eq!(keys(1)[..2], [0xFFFF, 0], "port 1 is not");
    let (p1, p2) = (f.nodes[d].port_lid(1).0, f.nodes[d].port_lid(2).0);
    let to_h1 = f.nodes[h1].lid();
    assert!(f.walk_in_partition_from(d, p2, to_h1, 0x42).is_ok());
    assert_eq!(
        f.walk_in_partition_from(d, p1, to_h1, 0x42),
        Err(PartitionDrop::NotHeld)
    );
    assert!(
        f.walk_in_partition(h1, p2, 0x42).is_ok(),
        "H1 reaches port 2"
    );
    assert!(f.walk_in_partition(h1, p1, 0x42).is_err(), "not port 1");
    // Both ports stay in the default partition.
    for lid in [p1, p2] {
        assert!(f.walk_in_partition(h1, lid, 0x7fff).is_ok());
        assert!(f.walk_in_partition_from(d, lid, to_h1, 0x7fff).is_ok());
    }
}
