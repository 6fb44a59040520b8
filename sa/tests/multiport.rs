//! The SA on a fabric with multi-port CAs: each cabled port of a CA is an
//! end port of its own, listed by its own NodeRecord and PortInfoRecord
//! at its own LID (as OpenSM lists them), and a PathRecord to or from
//! either port's GID resolves to that port's LID and the route to it.
//! Each port joins multicast groups for itself: a copy reaches each
//! member port once, and no port that did not join.

mod common;

use common::*;
use fabric::sim::{Fabric, SimConfig};
use fabric::topology::parse_ibnetdiscover;
use mad_core::attr::NodeInfo;
use mad_core::mad::Method;
use mad_core::sa::mcmember::join_state::FULL;
use mad_core::sa::*;
use mad_core::{Gid, Guid, Lid};
use sa::Addr;
use smi::sm::{Sm, SmConfig};

fn up_multiport() -> (Fabric, Sm) {
    let text = include_str!("../../fabric/tests/data/multiport.topo");
    let mut f = Fabric::new(parse_ibnetdiscover(text).unwrap(), SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig::default());
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    (f, sm)
}

fn node(f: &Fabric, name: &str) -> usize {
    f.topo.nodes.iter().position(|n| n.name == name).unwrap()
}

#[test]
fn each_port_of_a_multi_port_ca_has_its_records_and_paths() {
    let (f, sm) = up_multiport();
    let mut sa = new_sa();
    let h1 = node(&f, "H1");
    let me = Addr {
        lid: f.nodes[h1].lid(),
        qpn: 1,
    };
    for name in ["D", "E", "H0"] {
        let i = node(&f, name);
        let guid = f.topo.nodes[i].guid;
        // NodeRecords by node GUID: one per port, at that port's LID,
        // naming that port's GUID and number.
        let q = NodeRecord {
            node_info: NodeInfo {
                node_guid: Guid(guid),
                ..NodeInfo::default()
            },
            ..NodeRecord::default()
        };
        let mut got: Vec<(Lid, u64, u8)> =
            all(&mut sa, &sm, me, &q, mask::<NodeRecord>(&["node_guid"]), 0)
                .iter()
                .map(|r| (r.lid, r.node_info.port_guid.0, r.node_info.local_port_num))
                .collect();
        got.sort();
        let want: Vec<(Lid, u64, u8)> = (1..=2u8)
            .map(|p| (f.nodes[i].port_lid(p).0, guid + u64::from(p), p))
            .collect();
        assert_eq!(got, want, "{name}'s NodeRecords");
        for p in 1..=2u8 {
            let lid = f.nodes[i].port_lid(p).0;
            // The port's PortInfoRecord at its LID says that LID.
            let q = PortInfoRecord {
                endport_lid: lid,
                ..PortInfoRecord::default()
            };
            let recs = all(
                &mut sa,
                &sm,
                me,
                &q,
                mask::<PortInfoRecord>(&["endport_lid"]),
                0,
            );
            assert_eq!(recs.len(), 1, "{name}/{p}");
            assert_eq!((recs[0].port_num, recs[0].port_info.lid), (p, lid));
            // A path from H1 to the port's GID ends at its LID, and the
            // path back starts there.
            let gid = Gid::new(Gid::DEFAULT_PREFIX, Guid(guid + u64::from(p)));
            for (sgid, dgid) in [(gid_of(&f, h1), gid), (gid, gid_of(&f, h1))] {
                let q = PathRecord {
                    sgid,
                    dgid,
                    ..PathRecord::default()
                };
                let m = mask::<PathRecord>(&["sgid", "dgid"]);
                let (status, mad) = one(&mut sa, &sm, me, &ask(Method::Get, &q, m, 0), 0);
                assert_eq!(status, SaStatus::Ok, "{name}/{p}");
                let pr: PathRecord = mad.record().unwrap();
                let ends = if dgid == gid {
                    (me.lid, lid)
                } else {
                    (lid, me.lid)
                };
                assert_eq!((pr.slid, pr.dlid), ends, "{name}/{p}");
                assert_eq!((pr.sgid, pr.dgid), (sgid, dgid));
            }
            // The route the SA names is the one the tables take.
            assert_eq!(f.deliver_to(h1, lid), Some(i), "{name}/{p}");
        }
    }
}

#[test]
fn each_port_of_a_multi_port_ca_joins_a_group_for_itself() {
    let (mut f, mut sm) = up_multiport();
    let mut sa = new_sa();
    let (d, e, h1) = (node(&f, "D"), node(&f, "E"), node(&f, "H1"));
    // D's two ports, E's port 2 (not its port 1) and H1 join the IPoIB
    // broadcast group, each from its own LID with its own GID.
    let members = [(d, 1u8), (d, 2), (e, 2), (h1, 1)];
    for &(i, p) in &members {
        let from = Addr {
            lid: f.nodes[i].port_lid(p).0,
            qpn: 1,
        };
        let gid = Gid::new(
            Gid::DEFAULT_PREFIX,
            Guid(f.topo.nodes[i].guid + u64::from(p)),
        );
        let r = member(sa::mcast::IPOIB_BROADCAST, gid, FULL);
        let m = mask::<McMemberRecord>(&["mgid", "port_gid", "join_state"]);
        let (status, _) = one(&mut sa, &sm, from, &ask(Method::Set, &r, m, 0), 0);
        assert_eq!(status, SaStatus::Ok, "{i}/{p} joins");
    }
    let changes = sa.take_group_changes(sm.subnet());
    assert!(!changes.is_empty());
    for (mlid, ports) in changes {
        sm.set_multicast_group(mlid, &ports).unwrap();
    }
    assert!(f.run(&mut sm));
    let mlid = (sa.groups().iter())
        .find(|g| g.rec.mgid == sa::mcast::IPOIB_BROADCAST)
        .unwrap()
        .rec
        .mlid;
    // From each member port, one copy to every other member port, none
    // to E's port 1 or back to the sender.
    for &(i, p) in &members {
        let w = f.multicast_walk_from(i, p, mlid);
        let mut want: Vec<(usize, u8)> = members.iter().copied().filter(|&m| m != (i, p)).collect();
        want.sort_unstable();
        let got: Vec<(usize, u8)> = w.delivered.keys().copied().collect();
        assert_eq!(got, want, "from {}/{p}", f.topo.nodes[i].name);
        assert!(w.delivered.values().all(|&n| n == 1) && !w.looped);
    }
}
