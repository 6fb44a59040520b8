//! The SA honours the partitions the SM applied: PathRecords only between
//! ports that share a partition, with a P_Key they really share; none
//! between two limited members; a P_Key asked for only where both ports
//! hold it; groups joined only by ports of the group's partition; and
//! P_KeyTableRecords that show the tables the SM wrote.

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use mad_core::mad::Method;
use mad_core::sa::mcmember::join_state::FULL;
use mad_core::sa::*;
use mad_core::types::PKey;
use mad_core::{Gid, Lid};
use sa::{Addr, Sa, SaConfig};
use smi::sm::partitions::parse;
use smi::sm::{Sm, SmConfig};

mod common;
use common::*;

/// The SA's SM_Key (SaConfig's default): a trusted requester's.
const KEY: u64 = 1;

/// mport-ntree:4:2 up with `conf` applied, and its hosts.
fn up_with(conf: impl Fn(&[(usize, Addr)], &Fabric) -> String) -> (Fabric, Sm, Vec<(usize, Addr)>) {
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let h = hosts(&f);
    let text = conf(&h, &f);
    let mut sm = Sm::new(SmConfig::default());
    sm.set_partitions(parse(&text).unwrap());
    assert!(f.bring_up(&mut sm));
    // The LIDs were given in the bring-up.
    let h = hosts(&f);
    (f, sm, h)
}

/// A PathRecord Get from `a` to `b` (by LID), with `pkey` asked for.
fn path(sa: &mut Sa, sm: &Sm, a: Addr, b: Addr, pkey: Option<u16>) -> (SaStatus, PathRecord) {
    let q = PathRecord {
        slid: a.lid,
        dlid: b.lid,
        pkey: PKey(pkey.unwrap_or(0)),
        ..PathRecord::default()
    };
    let names: &[&str] = if pkey.is_some() {
        &["slid", "dlid", "pkey"]
    } else {
        &["slid", "dlid"]
    };
    let (st, m) = one(
        sa,
        sm,
        a,
        &ask(Method::Get, &q, mask::<PathRecord>(names), 0),
        0,
    );
    (st, PathRecord::decode(&m.data).unwrap_or_default())
}

/// The first three keys of the one P_KeyTableRecord of `at`'s LID, asked
/// by `at` with the SA's key.
fn first_keys(sa: &mut Sa, sm: &Sm, at: Addr) -> [PKey; 3] {
    let q = PKeyTableRecord {
        lid: at.lid,
        ..PKeyTableRecord::default()
    };
    let recs = all(sa, sm, at, &q, mask::<PKeyTableRecord>(&["lid"]), KEY);
    assert_eq!(recs.len(), 1);
    let k = &recs[0].p_key_table.p_keys;
    [k[0], k[1], k[2]]
}

#[test]
fn paths_only_between_ports_that_share_a_partition() {
    // Hosts 0 and 1 full members of 0x10, 2 and 3 limited ones; 4 in no
    // partition but the default, where everyone but the SM is limited.
    let (f, sm, h) = up_with(|h, f| {
        let g = |i: usize| gid_of(f, h[i].0).guid().0;
        format!(
            "Default=0x7fff:ALL=limited,SELF=full;\n\
             blue=0x10:{:#x}=full,{:#x}=full,{:#x},{:#x}=limited;\n",
            g(0),
            g(1),
            g(2),
            g(3)
        )
    });
    let mut sa = Sa::new(SaConfig::default());
    let a = |i: usize| h[i].1;
    let sm_addr = Addr {
        lid: f.nodes[f.sm_node].lid(),
        qpn: 1,
    };
    let ok = |r: (SaStatus, PathRecord)| {
        assert_eq!(r.0, SaStatus::Ok);
        r.1.pkey.0
    };
    // Full with full, full with limited: the partition.
    assert_eq!(ok(path(&mut sa, &sm, a(0), a(1), None)), 0x8010);
    assert_eq!(ok(path(&mut sa, &sm, a(0), a(2), None)), 0x8010);
    // The limited end's record carries its own (limited) key.
    assert_eq!(ok(path(&mut sa, &sm, a(2), a(0), None)), 0x0010);
    // Two limited members of both partitions: no path.
    assert_eq!(path(&mut sa, &sm, a(2), a(3), None).0, SaStatus::NoRecords);
    assert_eq!(path(&mut sa, &sm, a(2), a(4), None).0, SaStatus::NoRecords);
    // Everyone reaches the SM over the default partition.
    assert_eq!(ok(path(&mut sa, &sm, a(4), sm_addr, None)), 0x7FFF);
    // A P_Key asked for: only where both hold it; answered as asked.
    assert_eq!(ok(path(&mut sa, &sm, a(0), a(1), Some(0x8010))), 0x8010);
    assert_eq!(ok(path(&mut sa, &sm, a(0), a(1), Some(0x0010))), 0x0010);
    let none = path(&mut sa, &sm, a(0), a(4), Some(0x8010));
    assert_eq!(none.0, SaStatus::NoRecords);
    // A GetTable from a limited host lists the SM and the full members
    // only (and not itself: it shares nothing with itself but limited keys).
    let q = PathRecord {
        slid: a(2).lid,
        ..PathRecord::default()
    };
    let recs = all(&mut sa, &sm, a(2), &q, mask::<PathRecord>(&["slid"]), 0);
    let mut dl: Vec<Lid> = recs.iter().map(|r| r.dlid).collect();
    dl.sort();
    let mut want = vec![sm_addr.lid, a(0).lid, a(1).lid];
    want.sort();
    assert_eq!(dl, want);

    // P_KeyTableRecords show what the SM wrote (to the trusted).
    assert_eq!(
        first_keys(&mut sa, &sm, a(2)),
        [PKey(0x7FFF), PKey(0x0010), PKey(0)]
    );
}

#[test]
fn only_ports_of_the_groups_partition_join_it() {
    let (f, sm, h) = up_with(|h, f| {
        let g = |i: usize| gid_of(f, h[i].0).guid().0;
        format!(
            "Default=0x7fff:ALL=full;\nblue=0x10:{:#x}=full,{:#x}=full;\n",
            g(0),
            g(1)
        )
    });
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    let gid = |i: usize| sa::path::end_by_lid(sm.subnet(), h[i].1.lid).unwrap().gid;
    let create = mask::<McMemberRecord>(CREATE);
    let rec = |i: usize, mgid: Gid| McMemberRecord {
        mgid,
        port_gid: gid(i),
        join_state: FULL,
        qkey: 0x1234,
        pkey: PKey(0x8010),
        ..McMemberRecord::default()
    };
    // Host 4 holds no 0x10: it cannot make a group there.
    let (st, _) = one(
        &mut sa,
        &sm,
        h[4].1,
        &ask(Method::Set, &rec(4, Gid([0; 16])), create, 0),
        0,
    );
    assert_eq!(st, SaStatus::ReqInvalid);
    // Host 0 can, host 1 joins, host 4 cannot.
    let (st, m) = one(
        &mut sa,
        &sm,
        h[0].1,
        &ask(Method::Set, &rec(0, Gid([0; 16])), create, 0),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    let mgid = McMemberRecord::decode(&m.data).unwrap().mgid;
    let join = mask::<McMemberRecord>(&["mgid", "port_gid", "join_state"]);
    let (st, _) = one(
        &mut sa,
        &sm,
        h[1].1,
        &ask(Method::Set, &rec(1, mgid), join, 0),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    let (st, _) = one(
        &mut sa,
        &sm,
        h[4].1,
        &ask(Method::Set, &rec(4, mgid), join, 0),
        0,
    );
    assert_eq!(st, SaStatus::ReqInvalid);
    let _ = f;
}

#[test]
fn each_ipoib_partition_has_its_broadcast_group_and_mgid_lines_theirs() {
    let (_f, sm, h) = up_with(|h, f| {
        let g = |i: usize| gid_of(f, h[i].0).guid().0;
        format!(
            "Default=0x7fff,ipoib:ALL=full;\n\
             blue=0x10,ipoib,mtu=5,rate=7,sl=1:\n  \
               mgid=ff12:1234::1,sl=2,Q_Key=0x55\n  \
               {:#x}=full,{:#x}=full;\n",
            g(0),
            g(1)
        )
    });
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    // A group is listed by its members: host 0 (in both partitions)
    // joins each of the three first.
    let join = mask::<McMemberRecord>(&["mgid", "port_gid", "join_state"]);
    let me = |i: usize| sa::path::end_by_lid(sm.subnet(), h[i].1.lid).unwrap().gid;
    let rec = |i: usize, mgid: &str| McMemberRecord {
        mgid: Gid(mgid.parse::<std::net::Ipv6Addr>().unwrap().octets()),
        port_gid: me(i),
        join_state: FULL,
        ..McMemberRecord::default()
    };
    for g in [
        "ff12:401b:ffff::ffff:ffff",
        "ff12:401b:8010::ffff:ffff",
        "ff12:1234::1",
    ] {
        let (st, _) = one(
            &mut sa,
            &sm,
            h[0].1,
            &ask(Method::Set, &rec(0, g), join, 0),
            0,
        );
        assert_eq!(st, SaStatus::Ok, "{g}");
    }
    let groups = all(&mut sa, &sm, h[0].1, &McMemberRecord::default(), 0, KEY);
    let find = |mgid: &str| {
        let want: std::net::Ipv6Addr = mgid.parse().unwrap();
        (groups.iter())
            .find(|r| r.mgid.0 == want.octets())
            .unwrap_or_else(|| panic!("no group {mgid}: {groups:?}"))
    };
    let def = find("ff12:401b:ffff::ffff:ffff");
    assert_eq!((def.pkey, def.qkey, def.mtu), (PKey(0xFFFF), 0x0B1B, 4));
    let blue = find("ff12:401b:8010::ffff:ffff");
    assert_eq!(
        (blue.pkey, blue.qkey, blue.mtu, blue.rate, blue.sl),
        (PKey(0x8010), 0x0B1B, 5, 7, 1)
    );
    let extra = find("ff12:1234::1");
    assert_eq!((extra.pkey, extra.qkey, extra.sl), (PKey(0x8010), 0x55, 2));
    assert!(def.mlid != blue.mlid && blue.mlid != extra.mlid && def.mlid != extra.mlid);
    // Host 1 (blue) joins blue's broadcast group; host 4 cannot.
    let b = "ff12:401b:8010::ffff:ffff";
    let (st, _) = one(
        &mut sa,
        &sm,
        h[1].1,
        &ask(Method::Set, &rec(1, b), join, 0),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    let (st, _) = one(
        &mut sa,
        &sm,
        h[4].1,
        &ask(Method::Set, &rec(4, b), join, 0),
        0,
    );
    assert_eq!(st, SaStatus::ReqInvalid);
}

/// The fabric of [`up_with`] with the default partition and `storage`
/// (0x0042, with `flags`) of hosts 0, 1 and 2.
fn with_storage(flags: &str) -> (Fabric, Sm, Vec<(usize, Addr)>) {
    up_with(|h, f| {
        let g = |i: usize| f.topo.nodes[h[i].0].guid + 1;
        format!(
            "Default=0x7fff:ALL=full;\nstorage=0x0042{flags}:{:#x}=full,{:#x}=full,{:#x}=full;\n",
            g(0),
            g(1),
            g(2)
        )
    })
}

/// A PathRecord Get `q` from `from`, with the components `names`: the
/// status and the record.
fn path_get(
    sa: &mut Sa,
    sm: &Sm,
    from: Addr,
    q: PathRecord,
    names: &[&str],
) -> (SaStatus, PathRecord) {
    let (st, m) = one(
        sa,
        sm,
        from,
        &ask(Method::Get, &q, mask::<PathRecord>(names), 0),
        0,
    );
    (st, PathRecord::decode(&m.data).unwrap_or_default())
}

/// The SL of a PathRecord, as OpenSM chooses it: the QoS policy's
/// `qos-ulps` rule that matches the request (by ServiceID or P_Key where
/// the request's mask selects them, by the ends' port GUIDs), else its
/// `default`; without a policy, the SL the request asks, else the
/// partition's `sl=`. A request asking an SL the policy does not give
/// gets no record.
#[test]
fn pathrecords_carry_the_sl_of_the_policy_then_of_the_partition() {
    use smi::sm::qos_policy::parse_policy;
    let (_f, mut sm, h) = with_storage(",sl=3");
    let mut sa = Sa::new(SaConfig::default());
    let (a, b, c) = (h[0].1, h[1].1, h[2].1);
    let get = |sa: &mut Sa, sm: &Sm, q: PathRecord, names: &[&str]| {
        let (st, p) = path_get(sa, sm, a, q, names);
        (st, p.sl)
    };
    let to = |d: Addr| PathRecord {
        slid: a.lid,
        dlid: d.lid,
        ..PathRecord::default()
    };
    let in_storage = PathRecord {
        pkey: PKey(0x8042),
        ..to(b)
    };
    let in_default = PathRecord {
        pkey: PKey(0xFFFF),
        ..to(b)
    };
    // No policy: the partition's SL, 0 in the default partition.
    assert_eq!(
        get(&mut sa, &sm, in_storage, &["slid", "dlid", "pkey"]),
        (SaStatus::Ok, 3)
    );
    assert_eq!(
        get(&mut sa, &sm, in_default, &["slid", "dlid", "pkey"]),
        (SaStatus::Ok, 0)
    );
    // An SL asked is given.
    assert_eq!(
        get(
            &mut sa,
            &sm,
            PathRecord { sl: 5, ..to(b) },
            &["slid", "dlid", "sl"]
        ),
        (SaStatus::Ok, 5)
    );
    let target = sm
        .subnet()
        .node(sa::path::end_by_lid(sm.subnet(), c.lid).unwrap().node)
        .unwrap()
        .info
        .port_guid
        .0;
    let policy = format!(
        "qos-ulps\n default : 1\n any, service-id 0x6234 : 6\n ipoib : 4\n srp, target-port-guid {target:#x} : 7\nend-qos-ulps\n"
    );
    sm.set_qos_policy(Some(parse_policy(&policy).unwrap()));
    // By ServiceID, only when the mask selects it.
    let sid = PathRecord {
        service_id: 0x6234,
        ..to(b)
    };
    assert_eq!(
        get(
            &mut sa,
            &sm,
            sid,
            &["slid", "dlid", "service_id_msb", "service_id_lsb"]
        ),
        (SaStatus::Ok, 6)
    );
    assert_eq!(get(&mut sa, &sm, sid, &["slid", "dlid"]), (SaStatus::Ok, 1));
    // Half a ServiceID is refused, as OpenSM refuses it.
    assert_eq!(
        get(&mut sa, &sm, sid, &["slid", "dlid", "service_id_lsb"]).0,
        SaStatus::ReqInsufficientComponents
    );
    // By P_Key (the default partition's: ipoib).
    assert_eq!(
        get(&mut sa, &sm, in_default, &["slid", "dlid", "pkey"]),
        (SaStatus::Ok, 4)
    );
    // By the target's GUID.
    assert_eq!(
        get(&mut sa, &sm, to(c), &["slid", "dlid"]),
        (SaStatus::Ok, 7)
    );
    // The default rule before the partition's SL.
    assert_eq!(
        get(&mut sa, &sm, in_storage, &["slid", "dlid", "pkey"]),
        (SaStatus::Ok, 1)
    );
    // An SL the policy does not give: no record; the one it gives: the path.
    let (st, _) = get(
        &mut sa,
        &sm,
        PathRecord { sl: 5, ..to(b) },
        &["slid", "dlid", "sl"],
    );
    assert_eq!(st, SaStatus::NoRecords);
    assert_eq!(
        get(
            &mut sa,
            &sm,
            PathRecord { sl: 1, ..to(b) },
            &["slid", "dlid", "sl"]
        ),
        (SaStatus::Ok, 1)
    );
    // Policy removed: back to the partition's.
    sm.set_qos_policy(None);
    assert_eq!(
        get(&mut sa, &sm, in_storage, &["slid", "dlid", "pkey"]),
        (SaStatus::Ok, 3)
    );
}

/// OpenSM's full QoS policy (`port-groups`, `qos-levels`,
/// `qos-match-rules`) on PathRecords: a rule whose source group names
/// hosts by GUID and whose destination group names a partition gives its
/// level, which caps MTU and rate, fixes the packet lifetime, picks the
/// SL and restricts the P_Key; a QoS class matches only where the mask
/// selects it; the `DEFAULT` level applies where no rule matches; an SL
/// or a P_Key the level does not allow gets no record.
#[test]
fn pathrecords_follow_the_full_policy_levels() {
    use smi::sm::qos_policy::parse_policy;
    let (f, mut sm, h) = with_storage("");
    let mut sa = Sa::new(SaConfig::default());
    let (a, b, c) = (h[0].1, h[1].1, h[2].1);
    let guid = |i: usize| f.topo.nodes[h[i].0].guid + 1;
    let policy = format!(
        "port-groups\n port-group\n  name: Hosts\n  port-guid: {:#x}\n end-port-group\n \
         port-group\n  name: Storage\n  partition: storage\n end-port-group\nend-port-groups\n\
         qos-levels\n qos-level\n  name: DEFAULT\n  sl: 2\n end-qos-level\n \
         qos-level\n  name: Gold\n  sl: 5\n  mtu-limit: 3\n  rate-limit: 5\n  packet-life: 9\n  pkey: 0x0042\n end-qos-level\n \
         qos-level\n  name: Class\n  sl: 7\n end-qos-level\nend-qos-levels\n\
         qos-match-rules\n qos-match-rule\n  qos-class: 4\n  qos-level-name: Class\n end-qos-match-rule\n \
         qos-match-rule\n  source: Hosts\n  destination: Storage\n  qos-level-name: Gold\n end-qos-match-rule\n\
         end-qos-match-rules\n",
        guid(0)
    );
    let get = |sa: &mut Sa, sm: &Sm, q: PathRecord, names: &[&str]| path_get(sa, sm, a, q, names);
    let to = |d: Addr| PathRecord {
        slid: a.lid,
        dlid: d.lid,
        ..PathRecord::default()
    };
    // Without the policy: the fabric's MTU (4096), rate and the P_Key
    // OpenSM's SA picks of the two shared: storage's, whose low byte
    // (0x42) sorts before the default partition's (0xFF).
    let (st, plain) = get(&mut sa, &sm, to(b), &["slid", "dlid"]);
    assert_eq!(st, SaStatus::Ok);
    assert_eq!((plain.mtu, plain.sl, plain.pkey), (5, 0, PKey(0x8042)));
    assert!(plain.rate != 5 && plain.packet_life_time != 9);
    sm.set_qos_policy(Some(parse_policy(&policy).unwrap()));
    // Host 0 to host 1 (in storage): Gold.
    let (st, gold) = get(&mut sa, &sm, to(b), &["slid", "dlid"]);
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(
        (
            gold.sl,
            gold.mtu,
            gold.rate,
            gold.packet_life_time,
            gold.pkey
        ),
        (5, 3, 5, 9, PKey(0x8042))
    );
    // The default partition asked: Gold does not allow it.
    let (st, _) = get(
        &mut sa,
        &sm,
        PathRecord {
            pkey: PKey(0xFFFF),
            ..to(b)
        },
        &["slid", "dlid", "pkey"],
    );
    assert_eq!(st, SaStatus::NoRecords);
    // An SL other than Gold's: none; Gold's: the path.
    for (sl, want) in [(2, SaStatus::NoRecords), (5, SaStatus::Ok)] {
        let (st, p) = get(
            &mut sa,
            &sm,
            PathRecord { sl, ..to(c) },
            &["slid", "dlid", "sl"],
        );
        assert_eq!(st, want);
        assert!(st != SaStatus::Ok || p.sl == 5);
    }
    // Host 3 is in no storage partition: DEFAULT, no limit.
    let (st, d) = get(&mut sa, &sm, to(h[3].1), &["slid", "dlid"]);
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(
        (d.sl, d.mtu, d.rate, d.pkey),
        (2, 5, plain.rate, PKey(0xFFFF))
    );
    // A QoS class, selected: the first rule (SL 7, no MTU limit), before
    // Gold; the same class not selected: Gold.
    let class = PathRecord {
        qos_class: 4,
        ..to(b)
    };
    for (names, want) in [
        (&["slid", "dlid", "qos_class"][..], (7, 5)),
        (&["slid", "dlid"][..], (5, 3)),
    ] {
        let (st, k) = get(&mut sa, &sm, class, names);
        assert_eq!((st, (k.sl, k.mtu)), (SaStatus::Ok, want));
    }
    // Host 1 to host 0: Hosts is the source group; host 1 is not in it.
    let back = PathRecord {
        slid: b.lid,
        dlid: a.lid,
        ..PathRecord::default()
    };
    let (st, p) = path_get(&mut sa, &sm, b, back, &["slid", "dlid"]);
    assert_eq!((st, p.sl), (SaStatus::Ok, 2));
}

#[test]
fn vms_get_paths_and_tables_of_their_own_partitions() {
    use smi::sm::LidPolicy;
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let mut f = Fabric::new(
        topo,
        SimConfig {
            vfs: 4,
            ..SimConfig::default()
        },
    )
    .unwrap();
    let mut sm = Sm::new(SmConfig {
        lid_policy: LidPolicy::Prepopulated,
        ..SmConfig::default()
    });
    let (a1, a2, b1) = (
        0x0002_c9ff_0000_00a1u64,
        0x0002_c9ff_0000_00a2,
        0x0002_c9ff_0000_00b1,
    );
    sm.set_partitions(
        parse(&format!(
            "tenantA=0x0010:{a1:#x}=full,{a2:#x}=full;\ntenantB=0x0020:{b1:#x}=full;\n"
        ))
        .unwrap(),
    );
    assert!(f.bring_up(&mut sm));
    let hyps = sm.hypervisors();
    // A1 and B1 on one hypervisor, A2 on another.
    let va1 = sm.create_vm(hyps[0], a1).unwrap();
    let vb1 = sm.create_vm(hyps[0], b1).unwrap();
    let va2 = sm.create_vm(hyps[1], a2).unwrap();
    assert!(f.run(&mut sm));
    let addr = |v| Addr {
        lid: Lid(sm.vm(v).unwrap().lid),
        qpn: 1,
    };
    let pf = Addr {
        lid: Lid(sm.nodes()[hyps[0]].lid),
        qpn: 1,
    };
    let mut sa = Sa::new(SaConfig::default());
    let (st, pr) = path(&mut sa, &sm, addr(va1), addr(va2), None);
    assert_eq!((st, pr.pkey), (SaStatus::Ok, PKey(0x8010)));
    assert_eq!(pr.sgid.guid().0, a1);
    // Across tenants, even on one hypervisor, and from the hypervisor's
    // own port (a limited member of the default partition, as the VMs):
    // no path.
    for (x, y) in [(va1, vb1), (vb1, va2)] {
        assert_eq!(
            path(&mut sa, &sm, addr(x), addr(y), None).0,
            SaStatus::NoRecords
        );
    }
    assert_eq!(
        path(&mut sa, &sm, pf, addr(va1), None).0,
        SaStatus::NoRecords
    );
    assert_eq!(
        path(&mut sa, &sm, addr(va1), addr(va2), Some(0x8020)).0,
        SaStatus::NoRecords
    );
    // A VM's P_KeyTableRecord is its VF's table.
    for (v, key) in [(va1, 0x8010), (vb1, 0x8020)] {
        assert_eq!(
            first_keys(&mut sa, &sm, addr(v)),
            [PKey(0x7FFF), PKey(key), PKey(0)]
        );
    }
}

/// The groups the SM makes for its partitions (their IPoIB broadcast
/// groups) take the SL a partition's `sl=` gives them, else the one the
/// QoS policy gives the partition (`QosPolicy::group_sl`: its `ipoib` and
/// P_Key rules, then `DEFAULT`), else 0; the same SL a PathRecord in that
/// partition gets, so that hosts, which copy a group's SL from their
/// partition's broadcast group, send IPoIB's multicast on the SL of its
/// unicast. A new policy (or none) moves them; members stay.
#[test]
fn the_sms_groups_take_the_sl_the_policy_gives_their_partition() {
    use smi::sm::qos_policy::parse_policy;
    let (_f, mut sm, h) = up_with(|_, _| {
        "Default=0x7fff,ipoib:ALL=full;\nblue=0x10,ipoib:ALL=full;\nred=0x20,ipoib,sl=6:ALL=full;\n"
            .into()
    });
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    let join = mask::<McMemberRecord>(&["mgid", "port_gid", "join_state"]);
    let me = sa::path::end_by_lid(sm.subnet(), h[0].1.lid).unwrap().gid;
    // Host 0 joins (again) each broadcast group: the SL its answer gives.
    let sls = |sa: &mut Sa, sm: &Sm| {
        ["ffff", "8010", "8020"].map(|k| {
            let mgid: std::net::Ipv6Addr = format!("ff12:401b:{k}::ffff:ffff").parse().unwrap();
            let q = McMemberRecord {
                mgid: Gid(mgid.octets()),
                port_gid: me,
                join_state: FULL,
                ..McMemberRecord::default()
            };
            let (st, m) = one(sa, sm, h[0].1, &ask(Method::Set, &q, join, 0), 0);
            assert_eq!(st, SaStatus::Ok, "{mgid}");
            McMemberRecord::decode(&m.data).unwrap().sl
        })
    };
    // A PathRecord from host 0 to host 1 in a partition: its SL.
    let path_sl = |sa: &mut Sa, sm: &Sm, pkey: u16| {
        let (st, p) = path(sa, sm, h[0].1, h[1].1, Some(pkey));
        assert_eq!(st, SaStatus::Ok, "{pkey:#x}");
        p.sl
    };
    // No policy: the flag's SL, else 0.
    assert_eq!(sls(&mut sa, &sm), [0, 0, 6]);
    // qos-ulps: `ipoib` is the default partition, then blue by P_Key.
    let ulps = "qos-ulps\n default : 1\n ipoib : 4\n ipoib, pkey 0x10 : 5\nend-qos-ulps\n";
    sm.set_qos_policy(Some(parse_policy(ulps).unwrap()));
    assert_eq!(sls(&mut sa, &sm), [4, 5, 6]);
    assert_eq!(
        [0xFFFF, 0x8010].map(|k| path_sl(&mut sa, &sm, k)),
        [4, 5],
        "the groups' SLs are their partitions' paths'"
    );
    // The full policy: a rule by source is not the partition's (it needs
    // a port); the first rule by P_Key alone is; `DEFAULT` for the rest.
    let full = format!(
        "port-groups\n port-group\n  name: Zero\n  port-guid: {:#x}\n end-port-group\nend-port-groups\n\
         qos-levels\n qos-level\n  name: DEFAULT\n  sl: 2\n end-qos-level\n \
         qos-level\n  name: Mine\n  sl: 9\n end-qos-level\n \
         qos-level\n  name: Blue\n  sl: 7\n end-qos-level\nend-qos-levels\n\
         qos-match-rules\n qos-match-rule\n  source: Zero\n  qos-level-name: Mine\n end-qos-match-rule\n \
         qos-match-rule\n  pkey: 0x10\n  qos-level-name: Blue\n end-qos-match-rule\nend-qos-match-rules\n",
        me.guid().0
    );
    sm.set_qos_policy(Some(parse_policy(&full).unwrap()));
    assert_eq!(sls(&mut sa, &sm), [2, 7, 6]);
    // Policy removed: back as they were.
    sm.set_qos_policy(None);
    assert_eq!(sls(&mut sa, &sm), [0, 0, 6]);
}

/// Without a partition configuration, the default partition's IPoIB
/// broadcast group (which the SA holds from the start) takes the SL the
/// QoS policy gives the default partition, and 0 again without one.
#[test]
fn without_partitions_the_default_group_takes_the_policys_sl() {
    use smi::sm::qos_policy::parse_policy;
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig::default());
    assert!(f.bring_up(&mut sm));
    let h = hosts(&f);
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    let join = mask::<McMemberRecord>(&["mgid", "port_gid", "join_state"]);
    let q = McMemberRecord {
        mgid: Gid("ff12:401b:ffff::ffff:ffff"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()),
        port_gid: sa::path::end_by_lid(sm.subnet(), h[0].1.lid).unwrap().gid,
        join_state: FULL,
        ..McMemberRecord::default()
    };
    let sl = |sa: &mut Sa, sm: &Sm| {
        let (st, m) = one(sa, sm, h[0].1, &ask(Method::Set, &q, join, 0), 0);
        assert_eq!(st, SaStatus::Ok);
        McMemberRecord::decode(&m.data).unwrap().sl
    };
    assert_eq!(sl(&mut sa, &sm), 0);
    let policy = "qos-ulps\n default : 3\n ipoib : 5\nend-qos-ulps\n";
    sm.set_qos_policy(Some(parse_policy(policy).unwrap()));
    assert_eq!(sl(&mut sa, &sm), 5);
    sm.set_qos_policy(None);
    assert_eq!(sl(&mut sa, &sm), 0);
}
