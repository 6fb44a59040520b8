//! MCMemberRecord: hosts join the IPoIB broadcast group, create groups of
//! their own, leave them, and query them, on a fabric ibkit's SM brought
//! up in the simulator; the SA applies the spec's rules (o15-0.1.x,
//! o15-0.2.x) as OpenSM does, keeps members from untrusted requesters,
//! forgets ports that leave, and bounds what a looping host can hold.

use fabric::sim::FabricEvent;
use mad_core::mad::Method;
use mad_core::sa::mcmember::join_state::{FULL, NON, SEND_ONLY_NON};
use mad_core::sa::*;
use mad_core::types::PKey;
use mad_core::{Gid, Lid};
use sa::mcast::{IPOIB_BROADCAST, IPOIB_QKEY, MAX_GROUPS, MAX_PER_REQUESTER};
use sa::{Addr, Sa};
use smi::sm::Sm;

mod common;
use common::*;

/// What a join or a leave selects.
const JOIN: &[&str] = &["mgid", "port_gid", "join_state"];
/// The SA's SM_Key (SaConfig's default): a trusted requester's.
const KEY: u64 = 1;

/// A Set or Delete of `r` with the components `names` (and `extra` bits);
/// the status and the record answered.
fn send(
    sa: &mut Sa,
    sm: &Sm,
    from: Addr,
    method: Method,
    r: &McMemberRecord,
    names: &[&str],
) -> (SaStatus, McMemberRecord) {
    let (st, m) = one(
        sa,
        sm,
        from,
        &ask(method, r, mask::<McMemberRecord>(names), 0),
        0,
    );
    (st, McMemberRecord::decode(&m.data).unwrap())
}

fn join(sa: &mut Sa, sm: &Sm, from: Addr, r: &McMemberRecord, names: &[&str]) -> SaStatus {
    send(sa, sm, from, Method::Set, r, names).0
}

fn gid(from: Addr, sm: &Sm) -> Gid {
    sa::path::end_by_lid(sm.subnet(), from.lid).unwrap().gid
}

#[test]
fn hosts_join_the_ipoib_broadcast_group_and_only_the_trusted_see_who() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let (h0, h1) = (hs[0].1, hs[1].1);
    // What Linux IPoIB sends: the group, the port, full member.
    for h in [h0, h1] {
        let r = member(IPOIB_BROADCAST, gid(h, &sm), FULL);
        let (st, a) = send(&mut sa, &sm, h, Method::Set, &r, JOIN);
        assert_eq!(st, SaStatus::Ok);
        assert_eq!(a.mgid, IPOIB_BROADCAST);
        assert_eq!(a.port_gid, gid(h, &sm));
        assert_eq!(a.mlid, Lid(0xC000));
        assert_eq!(a.qkey, IPOIB_QKEY);
        assert_eq!((a.mtu_selector, a.mtu), (2, 4), "2048, exactly");
        assert_eq!((a.rate_selector, a.rate), (2, 3), "10 Gb/s, exactly");
        assert_eq!(a.pkey, PKey::DEFAULT_FULL);
        assert_eq!(a.join_state, FULL);
    }
    // Untrusted: one record for the group, no member in it.
    let any = McMemberRecord::default();
    let seen = all(&mut sa, &sm, h0, &any, 0, 0);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].mgid, IPOIB_BROADCAST);
    assert_eq!((seen[0].port_gid, seen[0].join_state), (Gid([0; 16]), 0));
    // Trusted: every member.
    let seen = all(&mut sa, &sm, h0, &any, 0, KEY);
    let mut who: Vec<Gid> = seen.iter().map(|r| r.port_gid).collect();
    who.sort();
    let mut want = vec![gid(h0, &sm), gid(h1, &sm)];
    want.sort();
    assert_eq!(who, want);
    assert!(seen.iter().all(|r| r.join_state == FULL && !r.proxy_join));
    // A port's own record, asked untrusted, still hides the port.
    let q = member(IPOIB_BROADCAST, gid(h1, &sm), 0);
    let (st, m) = one(
        &mut sa,
        &sm,
        h0,
        &ask(
            Method::Get,
            &q,
            mask::<McMemberRecord>(&["mgid", "port_gid"]),
            0,
        ),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(
        McMemberRecord::decode(&m.data).unwrap().port_gid,
        Gid([0; 16])
    );

    // Joining with components the group does not have is refused.
    let mut r = member(IPOIB_BROADCAST, gid(h0, &sm), FULL);
    (r.mtu_selector, r.mtu) = (2, 5);
    let with_mtu = [JOIN, &["mtu_selector", "mtu"]].concat();
    assert_eq!(join(&mut sa, &sm, h0, &r, &with_mtu), SaStatus::ReqInvalid);
    r.mtu = 4;
    assert_eq!(join(&mut sa, &sm, h0, &r, &with_mtu), SaStatus::Ok);
    let with_qkey = [JOIN, &["qkey"]].concat();
    assert_eq!(join(&mut sa, &sm, h0, &r, &with_qkey), SaStatus::ReqInvalid);

    // Leaving: h1 goes; a second leave finds nothing to remove.
    let r1 = member(IPOIB_BROADCAST, gid(h1, &sm), FULL);
    let (st, a) = send(&mut sa, &sm, h1, Method::Delete, &r1, JOIN);
    assert_eq!((st, a.join_state), (SaStatus::Ok, 0));
    assert_eq!(all(&mut sa, &sm, h0, &any, 0, KEY).len(), 1);
    let (st, _) = send(&mut sa, &sm, h1, Method::Delete, &r1, JOIN);
    assert_eq!(st, SaStatus::ReqInvalid);
    // The last full member leaves: the well-known group stays.
    let r0 = member(IPOIB_BROADCAST, gid(h0, &sm), FULL);
    assert_eq!(
        send(&mut sa, &sm, h0, Method::Delete, &r0, JOIN).0,
        SaStatus::Ok
    );
    assert_eq!(all(&mut sa, &sm, h0, &any, 0, KEY).len(), 0, "no member");
    assert_eq!(all(&mut sa, &sm, h0, &any, 0, 0).len(), 1, "the group");
}

#[test]
fn groups_are_created_only_with_what_the_spec_requires() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let h = hosts(&f)[0].1;
    let me = gid(h, &sm);
    let zero = Gid([0; 16]);
    // MGID 0 asks the SA for one, with every creation component.
    let r = member(zero, me, FULL);
    assert_eq!(
        join(&mut sa, &sm, h, &r, JOIN),
        SaStatus::ReqInsufficientComponents
    );
    for skip in ["qkey", "sl", "flow_label", "tclass", "pkey"] {
        let names: Vec<&str> = CREATE.iter().copied().filter(|n| *n != skip).collect();
        assert_eq!(
            join(&mut sa, &sm, h, &r, &names),
            SaStatus::ReqInsufficientComponents,
            "without {skip}"
        );
    }
    let non = member(zero, me, NON);
    assert_eq!(join(&mut sa, &sm, h, &non, CREATE), SaStatus::ReqInvalid);
    let (st, a) = send(&mut sa, &sm, h, Method::Set, &r, CREATE);
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(
        a.mgid.0[..4],
        [0xff, 0x12, 0xa0, 0x1b],
        "SA-made, link-local"
    );
    assert_eq!(a.mgid.0[4..12], me.0[..8], "the subnet prefix");
    assert_eq!(a.mlid, Lid(0xC001), "the lowest free MLID");
    assert_eq!(a.qkey, 0x1234);
    // The port's own MTU and rate, as the path to itself has them.
    let own = sa::path::walk(
        sm.subnet(),
        sa::path::end_by_lid(sm.subnet(), h.lid).unwrap().node,
        h.lid,
    )
    .unwrap();
    assert_eq!(a.mtu, own.mtu);
    assert_eq!(a.rate, sa::path::rate_code(own.half_gbps));
    let (_, b) = send(&mut sa, &sm, h, Method::Set, &r, CREATE);
    assert_ne!(b.mgid, a.mgid);
    assert_eq!(b.mlid, Lid(0xC002));

    // MGIDs that are not multicast GIDs a host may name.
    let bad = |g: [u8; 4]| {
        let mut m = [0u8; 16];
        m[..4].copy_from_slice(&g);
        m[15] = 1;
        Gid(m)
    };
    for (g, why) in [
        ([0xfa, 0x12, 0xa0, 0x1c], "not 0xFF"),
        ([0xff, 0x12, 0xa0, 0x1b], "SA signature, link-local"),
        ([0xef, 0x12, 0xa0, 0x1c], "prefix 0xEF"),
        ([0xff, 0x22, 0xa0, 0x1c], "a reserved flag"),
        (
            [0xff, 0x12, 0x40, 0x1b],
            "IPoIB of a partition without its broadcast group",
        ),
    ] {
        let mut g = bad(g);
        if why.starts_with("IPoIB") {
            g.0[4..6].copy_from_slice(&[0x80, 0x01]);
        }
        let r = member(g, me, FULL);
        assert_eq!(
            join(&mut sa, &sm, h, &r, CREATE),
            SaStatus::ReqInvalid,
            "{why}"
        );
    }
    let r = member(bad([0xff, 0x02, 0, 0]), me, FULL);
    assert_eq!(join(&mut sa, &sm, h, &r, CREATE), SaStatus::Ok, "FF02::1");
    // An IPoIB group of the default partition agrees with its broadcast
    // group (Q_Key 0x0B1B).
    let mut v6 = bad([0xff, 0x12, 0x60, 0x1b]);
    v6.0[4..6].copy_from_slice(&[0xff, 0xff]);
    let r = member(v6, me, FULL);
    assert_eq!(join(&mut sa, &sm, h, &r, CREATE), SaStatus::ReqInvalid);
    let r = McMemberRecord {
        qkey: IPOIB_QKEY,
        ..r
    };
    assert_eq!(join(&mut sa, &sm, h, &r, CREATE), SaStatus::Ok);

    // Rates and MTUs no port here can carry, or no code means.
    let with = |names: &[&'static str]| [CREATE, names].concat();
    let rate = with(&["rate_selector", "rate"]);
    let mtu = with(&["mtu_selector", "mtu"]);
    for (sel, code, names, why) in [
        (2u8, 18u8, &rate, "exactly 300 Gb/s"),
        (1, 2, &rate, "below 2.5 Gb/s"),
        (2, 0x3f, &rate, "no such rate"),
        (0, 5, &mtu, "above 4096"),
        (1, 1, &mtu, "below 256"),
        (2, 6, &mtu, "no such MTU"),
    ] {
        let mut r = member(zero, me, FULL);
        if names == &rate {
            (r.rate_selector, r.rate) = (sel, code);
        } else {
            (r.mtu_selector, r.mtu) = (sel, code);
        }
        assert_eq!(
            join(&mut sa, &sm, h, &r, names),
            SaStatus::ReqInvalid,
            "{why}"
        );
    }
    // An MLID asked for, when free.
    let r = McMemberRecord {
        mlid: Lid(0xC123),
        ..member(zero, me, FULL)
    };
    let (st, a) = send(&mut sa, &sm, h, Method::Set, &r, &with(&["mlid"]));
    assert_eq!((st, a.mlid), (SaStatus::Ok, Lid(0xC123)));
    // Found by its MLID; an MLID no group has finds nothing.
    let q = McMemberRecord {
        mlid: Lid(0xC123),
        ..McMemberRecord::default()
    };
    let by_mlid = mask::<McMemberRecord>(&["mlid"]);
    let (st, m) = one(&mut sa, &sm, h, &ask(Method::Get, &q, by_mlid, 0), 0);
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(McMemberRecord::decode(&m.data).unwrap().mgid, a.mgid);
    let q = McMemberRecord {
        mlid: Lid(0xC999),
        ..q
    };
    let (st, _) = one(&mut sa, &sm, h, &ask(Method::Get, &q, by_mlid, 0), 0);
    assert_eq!(st, SaStatus::NoRecords);
}

/// OpenSM's `mcgroup_join_validation FALSE`: a join to the broadcast
/// group with another Q_Key is taken and answered with the group's; and
/// `ipoib_mcgroup_creation_validation FALSE`: an IPoIB group whose Q_Key
/// is not its broadcast group's, and an MGID that is not multicast, are
/// created. With each check on (the default, above) each is refused; one
/// off leaves the other on.
#[test]
fn with_opensms_validations_off_the_joins_they_refuse_are_taken() {
    let (f, sm) = up("mport-ntree:4:2");
    let h = hosts(&f)[0].1;
    let me = gid(h, &sm);
    let sa_with = |join: bool, mgid: bool| {
        Sa::new(sa::SaConfig {
            rmpp_acks: false,
            mcgroup_join_validation: join,
            ipoib_mcgroup_creation_validation: mgid,
            ..sa::SaConfig::default()
        })
    };
    let with_qkey = [JOIN, &["qkey"]].concat();
    let other_qkey = member(IPOIB_BROADCAST, me, FULL);
    assert_ne!(other_qkey.qkey, IPOIB_QKEY);
    let mut v6 = [0u8; 16];
    v6[..6].copy_from_slice(&[0xff, 0x12, 0x60, 0x1b, 0xff, 0xff]);
    v6[15] = 1;
    let v6 = member(Gid(v6), me, FULL);
    let mut odd = [0u8; 16];
    odd[..4].copy_from_slice(&[0xfa, 0x12, 0xa0, 0x1c]);
    odd[15] = 1;
    let odd = member(Gid(odd), me, FULL);
    for (join_check, mgid_check) in [(true, true), (false, true), (true, false), (false, false)] {
        let mut sa = sa_with(join_check, mgid_check);
        let (st, a) = send(&mut sa, &sm, h, Method::Set, &other_qkey, &with_qkey);
        if join_check {
            assert_eq!(st, SaStatus::ReqInvalid, "validated join");
        } else {
            assert_eq!(
                (st, a.qkey),
                (SaStatus::Ok, IPOIB_QKEY),
                "the group's Q_Key"
            );
        }
        for r in [&v6, &odd] {
            let want = if mgid_check {
                SaStatus::ReqInvalid
            } else {
                SaStatus::Ok
            };
            assert_eq!(join(&mut sa, &sm, h, r, CREATE), want, "{:?}", r.mgid);
        }
    }
}

#[test]
fn members_change_and_leave_as_o15_0_1_14_says() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let (h0, h1, h2) = (hs[0].1, hs[1].1, hs[2].1);
    let (_, g) = send(
        &mut sa,
        &sm,
        h0,
        Method::Set,
        &member(Gid([0; 16]), gid(h0, &sm), FULL),
        CREATE,
    );
    let mgid = g.mgid;
    // h1 joins as a non-member, then adds send-only: the states add up.
    let (st, a) = send(
        &mut sa,
        &sm,
        h1,
        Method::Set,
        &member(mgid, gid(h1, &sm), NON),
        JOIN,
    );
    assert_eq!((st, a.join_state), (SaStatus::Ok, NON));
    let r = member(mgid, gid(h1, &sm), SEND_ONLY_NON);
    let (st, a) = send(&mut sa, &sm, h1, Method::Set, &r, JOIN);
    assert_eq!((st, a.join_state), (SaStatus::Ok, NON | SEND_ONLY_NON));
    // A leave of bits it does not hold is refused; of some it holds, kept.
    let r = member(mgid, gid(h1, &sm), FULL);
    assert_eq!(
        send(&mut sa, &sm, h1, Method::Delete, &r, JOIN).0,
        SaStatus::ReqInvalid
    );
    let r = member(mgid, gid(h1, &sm), NON | FULL);
    assert_eq!(
        send(&mut sa, &sm, h1, Method::Delete, &r, JOIN).0,
        SaStatus::ReqInvalid
    );
    let r = member(mgid, gid(h1, &sm), NON);
    let (st, a) = send(&mut sa, &sm, h1, Method::Delete, &r, JOIN);
    assert_eq!((st, a.join_state), (SaStatus::Ok, SEND_ONLY_NON));
    // Nobody else changes a membership its port made.
    let r = member(mgid, gid(h0, &sm), FULL);
    assert_eq!(
        send(&mut sa, &sm, h1, Method::Delete, &r, JOIN).0,
        SaStatus::ReqInvalid
    );
    assert_eq!(
        join(&mut sa, &sm, h1, &member(mgid, gid(h0, &sm), NON), JOIN),
        SaStatus::ReqInvalid
    );
    // A proxy join: h0 joins h2; the record says so; another member of the
    // partition may end it.
    assert_eq!(
        join(&mut sa, &sm, h0, &member(mgid, gid(h2, &sm), NON), JOIN),
        SaStatus::Ok
    );
    let q = member(mgid, gid(h2, &sm), 0);
    let pm = mask::<McMemberRecord>(&["mgid", "port_gid"]);
    let (st, m) = one(&mut sa, &sm, h0, &ask(Method::Get, &q, pm, KEY), 0);
    assert_eq!(st, SaStatus::Ok);
    let got = McMemberRecord::decode(&m.data).unwrap();
    assert!(got.proxy_join);
    assert_eq!((got.port_gid, got.join_state), (gid(h2, &sm), NON));
    let r = member(mgid, gid(h2, &sm), NON);
    assert_eq!(
        send(&mut sa, &sm, h1, Method::Delete, &r, JOIN).0,
        SaStatus::Ok
    );
    // The last full member leaves: the group goes, h1's membership with it.
    let r = member(mgid, gid(h0, &sm), FULL);
    assert_eq!(
        send(&mut sa, &sm, h0, Method::Delete, &r, JOIN).0,
        SaStatus::Ok
    );
    let q = McMemberRecord {
        mgid,
        ..McMemberRecord::default()
    };
    let (st, _) = one(
        &mut sa,
        &sm,
        h1,
        &ask(Method::Get, &q, mask::<McMemberRecord>(&["mgid"]), 0),
        0,
    );
    assert_eq!(st, SaStatus::NoRecords);
    assert_eq!(sa.groups().iter().count(), 1, "the broadcast group only");
    assert_eq!(sa.groups().memberships(), 0);
}

#[test]
fn a_port_that_leaves_the_subnet_leaves_its_groups() {
    let (mut f, mut sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let ((_, h0), (n1, h1)) = (hs[0], hs[1]);
    for h in [h0, h1] {
        assert_eq!(
            join(
                &mut sa,
                &sm,
                h,
                &member(IPOIB_BROADCAST, gid(h, &sm), FULL),
                JOIN
            ),
            SaStatus::Ok
        );
    }
    let (st, _) = send(
        &mut sa,
        &sm,
        h1,
        Method::Set,
        &member(Gid([0; 16]), gid(h1, &sm), FULL),
        CREATE,
    );
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(sa.groups().iter().count(), 2);
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(n1));
    run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
    let members = all(&mut sa, &sm, h0, &McMemberRecord::default(), 0, KEY);
    assert_eq!(members.len(), 1, "{members:?}");
    assert_eq!(members[0].port_gid, gid(h0, &sm));
    assert_eq!(sa.groups().iter().count(), 1, "h1's group went with it");
}

#[test]
fn a_host_that_creates_groups_in_a_loop_is_bounded_and_others_still_join() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let r = |h: Addr| member(Gid([0; 16]), gid(h, &sm), FULL);
    let mut made = 0;
    while join(&mut sa, &sm, hs[0].1, &r(hs[0].1), CREATE) == SaStatus::Ok {
        made += 1;
        assert!(made <= MAX_PER_REQUESTER, "unbounded");
    }
    assert_eq!(made, MAX_PER_REQUESTER);
    assert_eq!(
        join(&mut sa, &sm, hs[0].1, &r(hs[0].1), CREATE),
        SaStatus::NoResources
    );
    // Others fill the SA up to its bound on groups.
    let mut i = 1;
    while sa.groups().iter().count() < MAX_GROUPS {
        if join(&mut sa, &sm, hs[i].1, &r(hs[i].1), CREATE) != SaStatus::Ok {
            i += 1;
        }
    }
    assert_eq!(
        join(&mut sa, &sm, hs[i].1, &r(hs[i].1), CREATE),
        SaStatus::NoResources
    );
    // A host that made nothing still joins the broadcast group.
    let last = hs[hs.len() - 1].1;
    assert!(i < hs.len() - 1);
    let b = member(IPOIB_BROADCAST, gid(last, &sm), FULL);
    assert_eq!(join(&mut sa, &sm, last, &b, JOIN), SaStatus::Ok);
    // Every MLID given is distinct.
    let mut mlids: Vec<u16> = sa.groups().iter().map(|g| g.rec.mlid.0).collect();
    mlids.sort();
    mlids.dedup();
    assert_eq!(mlids.len(), MAX_GROUPS);
}

/// The SA's joins and leaves drive the SM's multicast forwarding, as
/// `ibkit sm` wires them (`Sa::take_group_changes` into
/// `Sm::set_multicast_group`): after each change a packet flooded through
/// the MFTs the simulated switches hold reaches every other member once
/// and no other port, and the SA's MulticastForwardingTableRecords are
/// those tables.
#[test]
fn joins_and_leaves_program_the_switches() {
    let (mut f, mut sm) = up("mport-ntree:8:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let sync = |sa: &mut Sa, sm: &mut Sm, f: &mut fabric::sim::Fabric| {
        for (mlid, members) in sa.take_group_changes(sm.subnet()) {
            sm.set_multicast_group(mlid, &members).unwrap();
        }
        assert!(f.run(sm));
    };
    let reach = |f: &fabric::sim::Fabric, members: &[usize]| {
        for &m in members {
            let w = f.multicast_walk(m, Lid(0xC000));
            let want: Vec<usize> = members.iter().copied().filter(|&x| x != m).collect();
            let got: Vec<usize> = w.nodes().into_iter().collect();
            assert_eq!(got, want, "from {}", f.topo.nodes[m].name);
            assert!(w.delivered.values().all(|&n| n == 1) && !w.looped);
        }
    };
    let who: Vec<(usize, Addr)> = vec![hs[0], hs[9], hs[20], hs[30]];
    let mut members = Vec::new();
    for &(i, a) in &who {
        let r = member(IPOIB_BROADCAST, gid(a, &sm), FULL);
        assert_eq!(join(&mut sa, &sm, a, &r, JOIN), SaStatus::Ok);
        members.push(i);
        members.sort_unstable();
        sync(&mut sa, &mut sm, &mut f);
        if members.len() > 1 {
            reach(&f, &members);
        }
    }
    // The SA's MFT records: what the simulated switches hold, for every
    // entry the SM wrote.
    let recs =
        all::<MulticastForwardingTableRecord>(&mut sa, &sm, hs[0].1, &Default::default(), 0, KEY);
    assert!(!recs.is_empty());
    for r in &recs {
        let sw = f.nodes.iter().position(|n| n.lid() == r.lid).unwrap();
        let fabric::sim::SimNode::Switch(s) = &f.nodes[sw] else {
            panic!("not a switch: LID {}", r.lid.0)
        };
        for (i, mask) in r.mft.port_mask.iter().enumerate() {
            let e = usize::from(r.block_num) * 32 + i;
            let held = s.model.mft.get(e).map_or(0, |m| m[usize::from(r.position)]);
            assert_eq!(
                *mask,
                held,
                "LID {} MLID {:#x} position {}",
                r.lid.0,
                0xC000 + e,
                r.position
            );
        }
    }
    // One leaves: the tree shrinks, the others still reach each other.
    let (gone, a) = who[1];
    let r = member(IPOIB_BROADCAST, gid(a, &sm), FULL);
    assert_eq!(
        send(&mut sa, &sm, a, Method::Delete, &r, JOIN).0,
        SaStatus::Ok
    );
    members.retain(|&x| x != gone);
    sync(&mut sa, &mut sm, &mut f);
    reach(&f, &members);
    assert!(!f.multicast_walk(members[0], Lid(0xC000)).reaches(gone));
    // Nothing changed since: nothing to program.
    assert!(sa.take_group_changes(sm.subnet()).is_empty());
    // A send-only member: its packets reach every member, and theirs do
    // not reach it.
    let (sender, a) = hs[25];
    let r = member(IPOIB_BROADCAST, gid(a, &sm), SEND_ONLY_NON);
    assert_eq!(join(&mut sa, &sm, a, &r, JOIN), SaStatus::Ok);
    sync(&mut sa, &mut sm, &mut f);
    reach(&f, &members);
    for &m in &members {
        assert!(!f.multicast_walk(m, Lid(0xC000)).reaches(sender));
    }
    let w = f.multicast_walk(sender, Lid(0xC000));
    let got: Vec<usize> = w.nodes().into_iter().collect();
    assert_eq!(got, members, "from the send-only member");
    // It joins as a full member too: now it receives.
    let r = member(IPOIB_BROADCAST, gid(a, &sm), FULL);
    assert_eq!(join(&mut sa, &sm, a, &r, JOIN), SaStatus::Ok);
    sync(&mut sa, &mut sm, &mut f);
    members.push(sender);
    members.sort_unstable();
    reach(&f, &members);
}

/// OpenSM's `consolidate_ipv6_snm_req`: four hosts each create their
/// IPv6 solicited-node group (ff12:601b:ffff::1:ffxx:xxxx, as IPoIB joins
/// one per address). Off, each group gets an MLID of its own and its one
/// member's packets go nowhere; on, the four share the first one's MLID,
/// whose tree reaches all four hosts, the groups stay apart in the SA, a
/// group that goes leaves the MLID to the others, and another kind of
/// group still gets an MLID of its own.
#[test]
fn solicited_node_groups_share_an_mlid_when_consolidated() {
    let snm = |low: u32| {
        let mut g = [0u8; 16];
        g[..6].copy_from_slice(&[0xff, 0x12, 0x60, 0x1b, 0xff, 0xff]);
        g[11..13].copy_from_slice(&[0x01, 0xff]);
        g[13..].copy_from_slice(&low.to_be_bytes()[1..]);
        Gid(g)
    };
    assert!(sa::mcast::is_ipv6_snm(&snm(0xAB_CDEF)));
    assert!(!sa::mcast::is_ipv6_snm(&IPOIB_BROADCAST));
    for consolidate in [false, true] {
        let (mut f, mut sm) = up("mport-ntree:8:2");
        let hs = hosts(&f);
        let mut sa = Sa::new(sa::SaConfig {
            rmpp_acks: false,
            consolidate_ipv6_snm_req: consolidate,
            ..sa::SaConfig::default()
        });
        let sync = |sa: &mut Sa, sm: &mut Sm, f: &mut fabric::sim::Fabric| {
            for (mlid, members) in sa.take_group_changes(sm.subnet()) {
                sm.set_multicast_group(mlid, &members).unwrap();
            }
            assert!(f.run(sm));
        };
        let who = [hs[0], hs[9], hs[20], hs[30]];
        let mut mlids = Vec::new();
        for (k, &(_, a)) in who.iter().enumerate() {
            let mut r = member(snm(0x10 + k as u32), gid(a, &sm), FULL);
            r.qkey = IPOIB_QKEY;
            let (st, got) = send(&mut sa, &sm, a, Method::Set, &r, CREATE);
            assert_eq!(st, SaStatus::Ok, "consolidate {consolidate}");
            assert_eq!(got.mgid, r.mgid);
            mlids.push(got.mlid);
        }
        sync(&mut sa, &mut sm, &mut f);
        let nodes: Vec<usize> = who.iter().map(|w| w.0).collect();
        let mut distinct = mlids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        // Four groups in the SA either way.
        let listed = all::<McMemberRecord>(&mut sa, &sm, who[0].1, &Default::default(), 0, KEY);
        assert_eq!(
            listed
                .iter()
                .filter(|r| sa::mcast::is_ipv6_snm(&r.mgid))
                .count(),
            4
        );
        if !consolidate {
            assert_eq!(distinct.len(), 4, "{mlids:x?}");
            for (&n, &m) in nodes.iter().zip(&mlids) {
                assert!(f.multicast_walk(n, m).nodes().is_empty());
            }
            continue;
        }
        assert_eq!(distinct, [mlids[0]], "one MLID for the four");
        for &n in &nodes {
            let got: Vec<usize> = f.multicast_walk(n, mlids[0]).nodes().into_iter().collect();
            let want: Vec<usize> = nodes.iter().copied().filter(|&x| x != n).collect();
            assert_eq!(got, want);
        }
        // The first host leaves its group: the group goes, the MLID
        // stays with the other three, and the tree no longer reaches it.
        let (gone, a) = who[0];
        let mut r = member(snm(0x10), gid(a, &sm), FULL);
        r.qkey = IPOIB_QKEY;
        assert_eq!(
            send(&mut sa, &sm, a, Method::Delete, &r, JOIN).0,
            SaStatus::Ok
        );
        sync(&mut sa, &mut sm, &mut f);
        let w = f.multicast_walk(nodes[1], mlids[0]);
        assert!(!w.reaches(gone));
        assert_eq!(w.nodes().len(), 2);
        // A group of another kind does not take the shared MLID.
        let (st, other) = send(
            &mut sa,
            &sm,
            a,
            Method::Set,
            &member(Gid([0; 16]), gid(a, &sm), FULL),
            CREATE,
        );
        assert_eq!(st, SaStatus::Ok);
        assert_ne!(other.mlid, mlids[0]);
        // A new solicited-node group does.
        let mut r = member(snm(0x99), gid(a, &sm), FULL);
        r.qkey = IPOIB_QKEY;
        let (st, back) = send(&mut sa, &sm, a, Method::Set, &r, CREATE);
        assert_eq!((st, back.mlid), (SaStatus::Ok, mlids[0]));
        // A new SA restores the groups that share the MLID from the
        // database (OpenSM's opensm-sa.dump), whatever its own setting.
        let db = sa.export(sm.subnet(), 0, 0);
        let mut sb = new_sa();
        let r = sb.restore(sm.subnet(), &db, 0, 0);
        assert_eq!((r.groups, r.skipped), (db.groups.len(), 0), "{r:?}");
        let shared = |sa: &mut Sa| {
            let recs = all::<McMemberRecord>(sa, &sm, who[1].1, &Default::default(), 0, KEY);
            let mut v: Vec<(Gid, Lid)> = (recs.iter())
                .filter(|r| sa::mcast::is_ipv6_snm(&r.mgid))
                .map(|r| (r.mgid, r.mlid))
                .collect();
            v.sort_unstable_by_key(|x| x.0 .0);
            v
        };
        let restored = shared(&mut sb);
        assert_eq!(restored.len(), 4);
        assert!(restored.iter().all(|x| x.1 == mlids[0]));
        assert_eq!(restored, shared(&mut sa));
    }
}

/// A subscriber to traps 66 and 67 hears each group created and deleted,
/// with its MGID, issued by the SM; a join that is refused announces
/// nothing, nor does a second member.
#[test]
fn group_creation_and_deletion_are_reported() {
    use mad_core::notice::{Notice, TrapDetails};
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let (watcher, maker) = (hs[0].1, hs[1].1);
    for trap in [66, 67] {
        let (s, _) = one(
            &mut sa,
            &sm,
            watcher,
            &ask(Method::Set, &inform(trap), 0, 0),
            0,
        );
        assert_eq!(s, SaStatus::Ok);
    }
    let reports = |out: Vec<sa::Transmit>| -> Vec<(Addr, u16, Gid)> {
        out.into_iter()
            .filter_map(|t| {
                let m = SaMad::parse(&t.mad).ok()?;
                (m.method() == Method::Report).then_some(())?;
                let n = Notice::decode(&m.data[..64]).ok()?;
                let Ok(TrapDetails::Gid(trap, g)) = n.details() else {
                    return None;
                };
                assert_eq!(n.issuer_lid, sm.sm_lid());
                Some((t.to, trap, g.gid))
            })
            .collect()
    };
    // A refused creation (no Q_Key and the rest): nothing reported.
    let refused = member(Gid([0; 16]), gid(maker, &sm), FULL);
    sa.handle_mad(
        sm.subnet(),
        maker,
        &ask(Method::Set, &refused, mask::<McMemberRecord>(JOIN), 0),
        0,
    )
    .unwrap();
    assert!(reports(drain(&mut sa)).is_empty());
    // A group made and undone at once: exactly 120 Gb/s, which the
    // port cannot meet. Never announced, so no trap 67 either.
    let mut big = member(Gid([0; 16]), gid(maker, &sm), FULL);
    big.rate_selector = 2;
    big.rate = 10;
    let mut names = CREATE.to_vec();
    names.extend(["rate_selector", "rate"]);
    sa.handle_mad(
        sm.subnet(),
        maker,
        &ask(Method::Set, &big, mask::<McMemberRecord>(&names), 0),
        0,
    )
    .unwrap();
    let out = drain(&mut sa);
    assert_eq!(out.len(), 1);
    assert_eq!(
        SaMad::parse(&out[0].mad).unwrap().sa_status(),
        SaStatus::ReqInvalid
    );
    assert!(reports(out).is_empty());
    // Created (MGID 0: the SA makes one): trap 66 to the watcher, with
    // the MGID the answer gives.
    let create = member(Gid([0; 16]), gid(maker, &sm), FULL);
    sa.handle_mad(
        sm.subnet(),
        maker,
        &ask(Method::Set, &create, mask::<McMemberRecord>(CREATE), 0),
        0,
    )
    .unwrap();
    let out = drain(&mut sa);
    let answer = out.iter().find(|t| t.to == maker).unwrap();
    let made = McMemberRecord::decode(&SaMad::parse(&answer.mad).unwrap().data).unwrap();
    let mgid = made.mgid;
    assert_ne!(mgid, Gid([0; 16]));
    let r = member(mgid, gid(maker, &sm), FULL);
    assert_eq!(reports(out), [(watcher, 66, mgid)]);
    // A second member: no trap.
    let r2 = member(mgid, gid(hs[3].1, &sm), FULL);
    sa.handle_mad(
        sm.subnet(),
        hs[3].1,
        &ask(Method::Set, &r2, mask::<McMemberRecord>(JOIN), 0),
        0,
    )
    .unwrap();
    assert!(reports(drain(&mut sa)).is_empty());
    // Both leave; the group goes with the last full member: trap 67.
    for (who, rec) in [(maker, r), (hs[3].1, r2)] {
        sa.handle_mad(
            sm.subnet(),
            who,
            &ask(Method::Delete, &rec, mask::<McMemberRecord>(JOIN), 0),
            0,
        )
        .unwrap();
    }
    assert_eq!(reports(drain(&mut sa)), [(watcher, 67, mgid)]);
}

/// A spine switch that dies and comes back freshly powered (no MFT):
/// the group's tree goes around it while it is away and is programmed
/// again when it returns; a packet from each member reaches every other
/// member once, each time.
#[test]
fn a_spine_that_reboots_leaves_the_groups_whole() {
    let (mut f, mut sm) = up("mport-ntree:8:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let mut members: Vec<usize> = Vec::new();
    for &(i, a) in &[hs[0], hs[9], hs[20], hs[30]] {
        let r = member(IPOIB_BROADCAST, gid(a, &sm), FULL);
        assert_eq!(join(&mut sa, &sm, a, &r, JOIN), SaStatus::Ok);
        members.push(i);
    }
    members.sort_unstable();
    for (mlid, m) in sa.take_group_changes(sm.subnet()) {
        sm.set_multicast_group(mlid, &m).unwrap();
    }
    assert!(f.run(&mut sm));
    let reach = |f: &fabric::sim::Fabric, what: &str| {
        for &m in &members {
            let w = f.multicast_walk(m, Lid(0xC000));
            let want: Vec<usize> = members.iter().copied().filter(|&x| x != m).collect();
            let got: Vec<usize> = w.nodes().into_iter().collect();
            assert_eq!(got, want, "{what}: from {}", f.topo.nodes[m].name);
            assert!(w.delivered.values().all(|&n| n == 1) && !w.looped, "{what}");
        }
    };
    reach(&f, "before");
    // A spine the tree crosses: a switch every neighbour of which is a
    // switch, that a copy from the first member passes through.
    let spine = (0..f.nodes.len())
        .find(|&i| {
            f.topo.nodes[i].kind == mad_core::attr::NodeType::Switch
                && (1..=f.topo.nodes[i].ports).all(|p| {
                    f.topo.peer_of(i, p).is_none_or(|(n, _)| {
                        f.topo.nodes[n].kind == mad_core::attr::NodeType::Switch
                    })
                })
                && forwards_0xc000(&f, i)
        })
        .expect("a spine in the tree");
    const MS: u64 = 1_000_000;
    let t = f.now_ns();
    f.schedule(t + MS, fabric::sim::FabricEvent::NodeDown(spine));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    reach(&f, "the spine away");
    let t = f.now_ns();
    f.schedule(t + MS, fabric::sim::FabricEvent::NodeUp(spine));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    assert!(sm.is_idle());
    reach(&f, "the spine back");
    // Its entry for the group was written again (a fresh switch holds
    // none): the tree goes through it once more.
    assert!(forwards_0xc000(&f, spine), "programmed again");
}

/// Whether switch `i`'s MFT sends MLID 0xC000 out of any port.
fn forwards_0xc000(f: &fabric::sim::Fabric, i: usize) -> bool {
    match &f.nodes[i] {
        fabric::sim::SimNode::Switch(s) => {
            (s.model.mft.first()).is_some_and(|m| m.iter().any(|&x| x != 0))
        }
        _ => false,
    }
}
