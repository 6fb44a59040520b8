//! The SA's database in OpenSM's `opensm-sa.dump` layout: what hosts
//! made (groups and memberships, services under leases, subscriptions)
//! written, read back by a new SA, which then answers the same records
//! and writes the same file; leases keep running by the wall clock;
//! what no longer fits the subnet is skipped with why; a broken file is
//! refused with its line.

use mad_core::mad::Method;
use mad_core::sa::mcmember::join_state::{FULL, SEND_ONLY_NON};
use mad_core::sa::*;
use mad_core::types::PKey;
use mad_core::{Gid, Lid};
use sa::db::SaDb;
use sa::mcast::IPOIB_BROADCAST;
use sa::Sa;

mod common;
use common::*;

/// The SA's SM_Key (SaConfig's default): a trusted requester's.
const KEY: u64 = 1;
/// Wall-clock seconds when the first SA exports.
const EPOCH: u64 = 1_700_000_000;

/// Every MCMemberRecord a trusted requester sees, sorted.
fn memberships(sa: &mut Sa, sm: &smi::sm::Sm, from: sa::Addr) -> Vec<McMemberRecord> {
    let mut v = all(sa, sm, from, &McMemberRecord::default(), 0, KEY);
    v.sort_by_key(|r| (r.mgid, r.port_gid));
    v
}

fn services(sa: &mut Sa, sm: &smi::sm::Sm, from: sa::Addr) -> Vec<ServiceRecord> {
    let mut v = all(sa, sm, from, &ServiceRecord::default(), 0, KEY);
    v.sort_by_key(|r| r.service_id);
    v
}

#[test]
fn a_new_sa_restores_groups_services_and_subscriptions() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let (h0, h1, h2) = (hs[0], hs[1], hs[2]);
    let g = |h: (usize, sa::Addr)| gid_of(&f, h.0);
    let join = mask::<McMemberRecord>(&["mgid", "port_gid", "join_state"]);
    // Two hosts in the broadcast group; one makes a group (the SA picks
    // the MGID), another joins it send-only.
    for h in [h0, h1] {
        let r = member(IPOIB_BROADCAST, g(h), FULL);
        let (st, _) = one(&mut sa, &sm, h.1, &ask(Method::Set, &r, join, 0), 0);
        assert_eq!(st, SaStatus::Ok);
    }
    let create = mask::<McMemberRecord>(CREATE);
    let r = member(Gid([0; 16]), g(h1), FULL);
    let (st, m) = one(&mut sa, &sm, h1.1, &ask(Method::Set, &r, create, 0), 0);
    assert_eq!(st, SaStatus::Ok);
    let made = McMemberRecord::decode(&m.data).unwrap();
    assert_ne!(made.mlid, Lid(0xC000));
    let r = member(made.mgid, g(h2), SEND_ONLY_NON);
    assert_eq!(
        one(&mut sa, &sm, h2.1, &ask(Method::Set, &r, join, 0), 0).0,
        SaStatus::Ok
    );
    // Two services (100 s and indefinite), set at 0 ms; a subscription.
    let set = mask::<ServiceRecord>(&["service_id", "service_gid", "service_lease", "service_key"]);
    let long = mask::<ServiceRecord>(&["service_id", "service_gid", "service_key"]);
    let mut s100 = service("lustre mds", 7, g(h0), 100, 0x5A);
    s100.service_data64 = [0x1122_3344_5566_7788, 9];
    assert_eq!(
        one(&mut sa, &sm, h0.1, &ask(Method::Set, &s100, set, 0), 0).0,
        SaStatus::Ok
    );
    let sinf = service("nfs", 8, g(h2), 0, 0);
    assert_eq!(
        one(&mut sa, &sm, h2.1, &ask(Method::Set, &sinf, long, 0), 0).0,
        SaStatus::Ok
    );
    let (st, _) = one(&mut sa, &sm, h1.1, &ask(Method::Set, &inform(64), 0, 0), 0);
    assert_eq!(st, SaStatus::Ok);
    let _ = sa.take_group_changes(sm.subnet());

    // Written 5 s after the Sets, at EPOCH, and read back whole.
    let db = sa.export(sm.subnet(), 5_000, EPOCH);
    assert_eq!(
        (db.groups.len(), db.services.len(), db.informs.len()),
        (2, 2, 1)
    );
    let text = db.write();
    let read = SaDb::parse(&text).unwrap();
    assert_eq!(read, db, "{text}");
    let s = db.services.iter().find(|s| s.rec[7] == 7).unwrap();
    assert_eq!((s.modified_time, s.lease_period), ((EPOCH - 5) as u32, 100));

    // A new SA, 10 s of wall clock later, its own clock at 0.
    let mut sb = new_sa();
    let r = sb.restore(sm.subnet(), &read, 0, EPOCH + 10);
    assert_eq!(
        (r.groups, r.members, r.services, r.subscriptions, r.skipped),
        (2, 4, 2, 1, 0),
        "{r:?}"
    );
    assert_eq!(
        memberships(&mut sb, &sm, h0.1),
        memberships(&mut sa, &sm, h0.1)
    );
    // The made group's tree is due; the broadcast group's too.
    let due: Vec<Lid> = sb
        .take_group_changes(sm.subnet())
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert!(
        due.contains(&made.mlid) && due.contains(&Lid(0xC000)),
        "{due:?}"
    );
    // The 100 s lease has 85 s left (15 s since it was set); the other
    // has none to run out.
    let (a, b) = (services(&mut sa, &sm, h0.1), services(&mut sb, &sm, h0.1));
    assert_eq!(a.len(), 2);
    assert_eq!(b[0].service_lease, 85);
    assert_eq!(b[1].service_lease, u32::MAX);
    assert_eq!(
        (b[0].service_key, b[0].service_data64),
        (s100.service_key, s100.service_data64)
    );
    assert_eq!(b[1].service_name, sinf.service_name);
    let subs = |sa: &mut Sa| all(sa, &sm, h0.1, &InformInfoRecord::default(), 0, KEY);
    assert_eq!(subs(&mut sb), subs(&mut sa));
    // The new SA writes what the old one did.
    assert_eq!(sb.export(sm.subnet(), 0, EPOCH + 10).write(), text);
    // And makes MGIDs and MLIDs that do not collide with the restored.
    let r = member(Gid([0; 16]), g(h0), FULL);
    let (st, m) = one(&mut sb, &sm, h0.1, &ask(Method::Set, &r, create, 0), 0);
    assert_eq!(st, SaStatus::Ok);
    let again = McMemberRecord::decode(&m.data).unwrap();
    assert!(again.mgid != made.mgid && again.mlid != made.mlid && again.mlid != Lid(0xC000));

    // 200 s later the 100 s lease has run out: that service is skipped.
    let mut sc = new_sa();
    let r = sc.restore(sm.subnet(), &read, 0, EPOCH + 200);
    assert_eq!((r.services, r.skipped), (1, 1), "{r:?}");
    assert!(r.reasons[0].contains("lease ran out"), "{:?}", r.reasons);
}

#[test]
fn what_the_subnet_no_longer_has_is_skipped_with_why() {
    let (f, sm) = up("mport-ntree:4:2");
    let hs = hosts(&f);
    let h0 = gid_of(&f, hs[0].0);
    let stranger = Gid::new(Gid::DEFAULT_PREFIX, mad_core::Guid(0xdead_beef));
    let rec = |mgid: [u8; 16], mlid: u16| McMemberRecord {
        mgid: Gid(mgid),
        mlid: Lid(mlid),
        qkey: 0x1234,
        mtu: 4,
        rate: 3,
        pkey: PKey::DEFAULT_FULL,
        scope: 2,
        ..McMemberRecord::default()
    };
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0xff, 0x12, 0xa0, 0x1b]);
    a[15] = 1;
    let mut b = a;
    b[15] = 2;
    let mut c = a;
    c[15] = 3;
    let group = |rec: McMemberRecord, members: Vec<(Gid, u8, bool)>| sa::db::DbGroup {
        mlid: rec.mlid.0,
        well_known: false,
        rec,
        members,
    };
    let db = SaDb {
        groups: vec![
            // A member gone and one here: kept with one member.
            group(
                rec(a, 0xC005),
                vec![(stranger, 0x21, false), (h0, 0x21, false)],
            ),
            // Only a member gone: dropped.
            group(rec(b, 0xC006), vec![(stranger, 0x21, false)]),
            // Its MLID another group's: skipped.
            group(rec(c, 0xC005), vec![(h0, 0x21, false)]),
            // Not a multicast LID.
            group(rec(c, 0x0042), vec![(h0, 0x21, false)]),
        ],
        informs: vec![subscription(stranger, 0, inform(64), 9)],
        ..SaDb::default()
    };
    let mut sa = new_sa();
    let r = sa.restore(sm.subnet(), &db, 0, EPOCH);
    assert_eq!(
        (r.groups, r.members, r.subscriptions, r.skipped),
        (1, 1, 0, 5),
        "{r:?}"
    );
    let why = r.reasons.join("\n");
    for w in [
        "1 member(s) whose port is not in the subnet",
        "no full member",
        "another group holds its MLID",
        "not a multicast LID",
        "subscriber is not in the subnet",
    ] {
        assert!(why.contains(w), "{w}: {why}");
    }
    let held: Vec<(Gid, usize)> = (sa.groups().iter())
        .map(|g| (g.rec.mgid, g.members.len()))
        .collect();
    assert!(held.contains(&(Gid(a), 1)) && held.len() == 2, "{held:?}");
}

#[test]
fn a_broken_database_is_refused_with_its_line() {
    let good = "MC Group 0xc000  (well known): mgid=0xff12401bffff0000:0x00000000ffffffff \
                port_gid=0x0000000000000000:0x0000000000000000 qkey=0x00000b1b mlid=0xc000 \
                mtu=0x84 tclass=0x00 pkey=0xffff rate=0x83 pkt_life=0x92 sl_flow_hop=0x00000000 \
                scope_state=0x21 proxy_join=0x0\n\n\
                mcm_port: port_gid=0xfe80000000000000:0x0002c90000000001 scope_state=0x21 proxy_join=0x0\n\n";
    let db = SaDb::parse(good).unwrap();
    assert_eq!(db.groups.len(), 1);
    assert_eq!(db.groups[0].rec.mgid, IPOIB_BROADCAST);
    assert_eq!((db.groups[0].rec.mtu, db.groups[0].rec.rate), (4, 3));
    assert_eq!(db.groups[0].members.len(), 1);
    assert_eq!(db.write(), good, "written as read");
    let broken = [
        (
            good.replace("qkey=0x00000b1b", "qkey=0x100000b1b"),
            1,
            "qkey",
        ),
        (good.replace(" mlid=0xc000", " mlid=0xzz"), 1, "mlid"),
        (good.replace(" tclass=0x00", ""), 1, "tclass"),
        (
            format!(
                "\n\n{}",
                good.replace("proxy_join=0x0\n\nmcm", "proxy_join=0x2\n\nmcm")
            ),
            3,
            "proxy_join",
        ),
        (good.replacen("MC Group", "MC Groop", 1), 1, "not a line"),
        (
            good.replace("mcm_port", "\nService Record: id=0x1\n\nmcm_port"),
            4,
            "gid",
        ),
        (
            format!("# a comment\n{}", &good[good.find("mcm_port").unwrap()..]),
            2,
            "outside a group",
        ),
    ];
    for (text, line, what) in broken {
        let e = SaDb::parse(&text).unwrap_err();
        assert_eq!(e.line, line, "{e}\n{text}");
        assert!(e.to_string().contains(what), "{e}");
    }
}

/// A database past the SA's bounds is restored up to them and the rest
/// skipped with why: groups past [`sa::mcast::MAX_GROUPS`], services past
/// [`sa::service::MAX_SERVICES`], subscriptions past
/// [`sa::inform::MAX_PER_SUBSCRIBER`] for one port; the first 100
/// skipped are named.
#[test]
fn a_database_past_the_sas_bounds_is_cut_at_them() {
    use sa::mcast::MAX_GROUPS;
    use sa::service::MAX_SERVICES;
    let (f, sm) = up("mport-ntree:4:2");
    let hs = hosts(&f);
    let h0 = gid_of(&f, hs[0].0);
    let groups = (0..MAX_GROUPS as u16 + 10)
        .map(|i| {
            let mut mgid = [0u8; 16];
            mgid[..4].copy_from_slice(&[0xff, 0x15, 0xa0, 0x1b]);
            mgid[14..].copy_from_slice(&i.to_be_bytes());
            let rec = McMemberRecord {
                mgid: Gid(mgid),
                mlid: Lid(0xC001 + i),
                qkey: 1,
                mtu: 4,
                rate: 3,
                pkey: PKey::DEFAULT_FULL,
                scope: 5,
                ..McMemberRecord::default()
            };
            sa::db::DbGroup {
                mlid: rec.mlid.0,
                well_known: false,
                rec,
                members: vec![(h0, 0x51, false)],
            }
        })
        .collect();
    let services = (0..MAX_SERVICES as u64 + 110)
        .map(|i| {
            let mut rec = [0u8; ServiceRecord::SIZE];
            service("s", i, h0, 0, 0).encode(&mut rec).unwrap();
            rec[28..32].copy_from_slice(&u32::MAX.to_be_bytes());
            sa::db::DbService {
                rec,
                modified_time: EPOCH as u32,
                lease_period: u32::MAX,
            }
        })
        .collect();
    let informs = (0..sa::inform::MAX_PER_SUBSCRIBER as u16 + 10)
        .map(|i| subscription(h0, i, inform(i), hs[0].1.lid.0))
        .collect();
    let db = SaDb {
        groups,
        services,
        informs,
        ..SaDb::default()
    };
    let mut sa = new_sa();
    let r = sa.restore(sm.subnet(), &db, 0, EPOCH);
    // The broadcast group is there from the start.
    assert_eq!(sa.groups().iter().count(), MAX_GROUPS, "{r:?}");
    assert_eq!(sa.services(), MAX_SERVICES);
    assert_eq!(sa.subscriptions().0, sa::inform::MAX_PER_SUBSCRIBER);
    assert_eq!(r.skipped, 11 + 110 + 10, "{:?}", &r.reasons[..3]);
    assert_eq!(r.reasons.len(), 100, "the first 100 named");
    let why = r.reasons.join("\n");
    for w in [
        "the SA holds its most groups",
        "the SA holds its most records",
    ] {
        assert!(why.contains(w), "{w}: {why}");
    }
}

/// A database with more memberships than the SA holds (65,536): as many
/// are restored, the rest are skipped and counted with why, and groups
/// left with no member go.
#[test]
fn memberships_past_the_bound_are_skipped_and_counted() {
    use sa::mcast::MAX_MEMBERS;
    let (f, sm) = up("fat-tree-324");
    let members: Vec<(Gid, u8, bool)> = (hosts(&f).iter())
        .map(|&(i, _)| (gid_of(&f, i), 0x21, false))
        .collect();
    let per = members.len();
    let groups = MAX_MEMBERS / per + 3;
    let db = SaDb {
        groups: (0..groups)
            .map(|k| {
                let mut mgid = [0u8; 16];
                mgid[..4].copy_from_slice(&[0xff, 0x15, 0xa0, 0x1b]);
                mgid[12..].copy_from_slice(&(k as u32 + 1).to_be_bytes());
                sa::db::DbGroup {
                    mlid: 0xC001 + k as u16,
                    well_known: false,
                    rec: McMemberRecord {
                        mgid: Gid(mgid),
                        mlid: Lid(0xC001 + k as u16),
                        qkey: 0x1234,
                        mtu: 4,
                        rate: 3,
                        pkey: PKey::DEFAULT_FULL,
                        scope: 5,
                        ..McMemberRecord::default()
                    },
                    members: members.clone(),
                }
            })
            .collect(),
        ..SaDb::default()
    };
    let mut sa = new_sa();
    let r = sa.restore(sm.subnet(), &db, 0, EPOCH);
    assert_eq!(sa.groups().memberships(), MAX_MEMBERS);
    assert_eq!(r.members, MAX_MEMBERS, "{:?}", r.reasons);
    let total = groups * per;
    // Each member line left out is counted; a group left with none goes
    // as one record with why.
    let whole = MAX_MEMBERS / per;
    let partial = usize::from(MAX_MEMBERS % per != 0);
    let dropped = groups - whole - partial;
    assert_eq!(r.groups, whole + partial);
    assert_eq!(
        r.skipped,
        (total - MAX_MEMBERS - dropped * per) + dropped,
        "{:?}",
        r.reasons
    );
    let why = r.reasons.join("\n");
    assert!(why.contains("past the SA's 65,536 memberships"), "{why}");
    assert!(why.contains("the SA holds its most memberships"), "{why}");
    println!(
        "{groups} groups of {per} members: {} restored in {} groups, {} records skipped",
        r.members, r.groups, r.skipped
    );
}

/// Two subscription lines that differ only in the InformInfo's own QPN
/// are one subscription: the Reports go to the line's remote QP, and the
/// SA holds (and writes) that. Found by the `sa_db_parse` fuzz target: the
/// first SA held both and wrote two equal lines, which a second SA then
/// refused as a duplicate.
#[test]
fn subscriptions_equal_but_for_their_own_qpn_are_one() {
    let (f, sm) = up("mport-ntree:4:2");
    let h = hosts(&f)[0];
    let line = |enumeration: u16, own_qpn: u32| {
        let mut info = inform(64);
        info.qpn = own_qpn;
        subscription(gid_of(&f, h.0), enumeration, info, h.1.lid.0)
    };
    let db = SaDb {
        informs: vec![line(0, 5), line(1, 6)],
        ..SaDb::default()
    };
    let mut a = new_sa();
    let r = a.restore(sm.subnet(), &db, 0, EPOCH);
    assert_eq!((r.subscriptions, r.skipped), (1, 1), "{r:?}");
    assert!(r.reasons[0].contains("holds it already"), "{r:?}");
    let text = a.export(sm.subnet(), 0, EPOCH).write();
    let mut b = new_sa();
    let r = b.restore(sm.subnet(), &SaDb::parse(&text).unwrap(), 0, EPOCH);
    assert_eq!((r.subscriptions, r.skipped), (1, 0), "{r:?}");
    assert_eq!(b.export(sm.subnet(), 0, EPOCH).write(), text);
}

/// A subscription's line: `info` of `subscriber` (its `enumeration`),
/// Reports to QP 1 at `lid`.
fn subscription(subscriber: Gid, enumeration: u16, info: InformInfo, lid: u16) -> sa::db::DbInform {
    sa::db::DbInform {
        subscriber,
        enumeration,
        info,
        lid,
        qpn: 1,
        qkey: 0,
        pkey_index: 0,
        sl: 0,
        path_bits: 0,
        static_rate: 0,
    }
}
