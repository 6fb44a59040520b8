//! Alias GUIDs through GUIDInfoRecord Set and Delete: what the SA grants,
//! refuses and makes, what the SM writes to the port (read back from the
//! simulated HCA), and that PathRecords and joins resolve an alias GID to
//! its port.

mod common;

use common::*;
use fabric::sim::FabricEvent;
use mad_core::attr::GuidInfo;
use mad_core::mad::Method;
use mad_core::sa::*;
use mad_core::{Gid, Guid, Lid};
use sa::guids::ASSIGNED_OUI;
use sa::{Addr, Sa, SaConfig};
use smi::sm::Sm;

const KEY: u64 = 1;

fn rec(lid: Lid, block: u8, guids: [u64; 8]) -> GuidInfoRecord {
    GuidInfoRecord {
        lid,
        block_num: block,
        guid_info: GuidInfo {
            guids: guids.map(Guid),
        },
    }
}

/// LID, BlockNum and the GUIDs at `entries`.
fn sel(entries: &[usize]) -> u64 {
    let mut names = vec!["lid".to_string(), "block_num".to_string()];
    names.extend(entries.iter().map(|k| format!("guid{k}")));
    let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    mask::<GuidInfoRecord>(&names)
}

/// Sends a Set or Delete; its status and the block answered. The SM
/// takes what the SA decided, as `ibkit sm` does after each request.
fn ask_sm(
    sa: &mut Sa,
    sm: &mut Sm,
    from: Addr,
    method: Method,
    r: &GuidInfoRecord,
    m: u64,
    key: u64,
) -> (SaStatus, [u64; 8]) {
    let (st, ans) = one(sa, sm, from, &ask(method, r, m, key), 0);
    for c in sa.take_guid_changes() {
        sm.set_guid_block(c.node, c.block, c.guids).unwrap();
    }
    let got: GuidInfoRecord = ans.record().unwrap();
    (st, got.guid_info.guids.map(|g| g.0))
}

/// SubnAdmGet(PathRecord) from `from`, SGID `sgid` to DGID `dgid`: the
/// status and the record answered.
fn path(sa: &mut Sa, sm: &Sm, from: Addr, sgid: Gid, dgid: Gid) -> (SaStatus, PathRecord) {
    let q = PathRecord {
        sgid,
        dgid,
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["sgid", "dgid"]);
    let (st, ans) = one(sa, sm, from, &ask(Method::Get, &q, m, 0), 0);
    (st, ans.record().unwrap_or_default())
}

#[test]
fn a_host_gets_alias_guids_and_they_resolve_like_its_port() {
    let (mut f, mut sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        assigned_guid_byte: 0x42,
        ..SaConfig::default()
    });
    let h = hosts(&f);
    let ((a, from_a), (b, from_b)) = (h[0], h[1]);
    let port_a = gid_of(&f, a).guid().0;
    let lid_a = from_a.lid;

    // Entry 1 given, entry 2 left to the SA.
    let r = rec(lid_a, 0, [0, 0x0002_c903_00aa_0001, 0, 0, 0, 0, 0, 0]);
    let (st, got) = ask_sm(&mut sa, &mut sm, from_a, Method::Set, &r, sel(&[1, 2]), 0);
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(got[0], port_a, "entry 0 is the port GUID");
    assert_eq!(got[1], 0x0002_c903_00aa_0001);
    assert_eq!(got[2] >> 40, ASSIGNED_OUI, "{:#x}", got[2]);
    assert_eq!((got[2] >> 32) & 0xFF, 0x42, "the site byte");
    assert_eq!(&got[3..], &[0; 5]);

    // The SM wrote the block to the port: one Set(GUIDInfo), and the
    // simulated HCA holds the aliases.
    let before = sm.stats().total();
    assert!(f.run(&mut sm));
    let sent = sm.stats().total() - before;
    assert_eq!(sent, 1, "one Set(GUIDInfo)");
    let table = f.nodes[a].guids(1).unwrap();
    assert_eq!(
        &table[..3],
        &got[..3],
        "the port holds what the SA answered"
    );
    let node_a = sm.subnet().by_port_guid(Guid(port_a)).unwrap().0;
    assert_eq!(sm.subnet().guid_block_held(node_a, 0), Some(got));

    // GetTable lists the block with its aliases.
    let recs = all(&mut sa, &sm, from_b, &GuidInfoRecord::default(), 0, 0);
    let listed = recs.iter().find(|r| r.lid == lid_a).unwrap();
    assert_eq!(listed.guid_info.guids.map(|g| g.0), got);

    // A PathRecord from B to A's alias GID reaches A's LID and carries
    // the alias as asked.
    let alias = Gid::new(Gid::DEFAULT_PREFIX, Guid(got[2]));
    let (st, pr) = path(&mut sa, &sm, from_b, gid_of(&f, b), alias);
    assert_eq!(st, SaStatus::Ok);
    assert_eq!((pr.dlid, pr.dgid, pr.slid), (lid_a, alias, from_b.lid));

    // A joins the broadcast group under its alias; the alias cannot go
    // while it is a member.
    let bcast = Gid([
        0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
    ]);
    let j = member(bcast, alias, 1);
    let m = mask::<McMemberRecord>(&["mgid", "port_gid", "join_state"]);
    let (st, _) = one(&mut sa, &sm, from_a, &ask(Method::Set, &j, m, 0), 0);
    assert_eq!(st, SaStatus::Ok);
    let del = rec(lid_a, 0, [0; 8]);
    let (st, _) = ask_sm(&mut sa, &mut sm, from_a, Method::Delete, &del, sel(&[2]), 0);
    assert_eq!(st, SaStatus::ReqDenied, "a member's PortGID stays");
    let (st, _) = one(&mut sa, &sm, from_a, &ask(Method::Delete, &j, m, 0), 0);
    assert_eq!(st, SaStatus::Ok);

    // Deleted: the port no longer answers to it, and asked again with a
    // zero the SA gives the same GUID back.
    let (st, now) = ask_sm(&mut sa, &mut sm, from_a, Method::Delete, &del, sel(&[2]), 0);
    assert_eq!((st, now[2], now[1]), (SaStatus::Ok, 0, got[1]));
    assert!(f.run(&mut sm));
    assert_eq!(f.nodes[a].guids(1).unwrap()[2], 0);
    let (st, _) = path(&mut sa, &sm, from_b, gid_of(&f, b), alias);
    assert_eq!(st, SaStatus::ReqInvalidGid, "the alias is gone");
    let (st, again) = ask_sm(&mut sa, &mut sm, from_a, Method::Set, &del, sel(&[2]), 0);
    assert_eq!((st, again[2]), (SaStatus::Ok, got[2]), "made once, kept");
    assert_eq!(sa.take_guid_changes(), vec![]);
}

#[test]
fn what_a_guid_info_set_may_not_do_is_refused_and_changes_nothing() {
    let (mut f, mut sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let h = hosts(&f);
    let ((a, from_a), (b, from_b)) = (h[0], h[1]);
    let lid_a = from_a.lid;
    let g1 = 0x0002_c903_00bb_0001;
    let r = rec(lid_a, 0, [0, g1, 0, 0, 0, 0, 0, 0]);
    let before = sm.subnet().alias_count();

    let cases: [(&str, Addr, GuidInfoRecord, u64, u64, SaStatus); 6] = [
        (
            "no BlockNum",
            from_a,
            r,
            mask::<GuidInfoRecord>(&["lid", "guid1"]),
            0,
            SaStatus::ReqInsufficientComponents,
        ),
        ("entry 0", from_a, r, sel(&[0, 1]), 0, SaStatus::ReqInvalid),
        (
            "a LID nobody has",
            from_a,
            rec(Lid(0x3000), 0, [0, g1, 0, 0, 0, 0, 0, 0]),
            sel(&[1]),
            0,
            SaStatus::NoRecords,
        ),
        (
            "past GUIDCap (8)",
            from_a,
            rec(lid_a, 1, [g1, 0, 0, 0, 0, 0, 0, 0]),
            sel(&[0]),
            0,
            SaStatus::NoRecords,
        ),
        (
            "another host's port",
            from_b,
            r,
            sel(&[1]),
            0,
            SaStatus::ReqDenied,
        ),
        (
            "a GUID that is a port's",
            from_a,
            rec(lid_a, 0, [0, gid_of(&f, b).guid().0, 0, 0, 0, 0, 0, 0]),
            sel(&[1]),
            0,
            SaStatus::Ok,
        ),
    ];
    for (what, from, r, m, key, want) in cases {
        let (st, got) = ask_sm(&mut sa, &mut sm, from, Method::Set, &r, m, key);
        assert_eq!(st, want, "{what}");
        if st == SaStatus::Ok {
            assert_eq!(got[1], 0, "{what}: left out");
        }
        assert_eq!(sm.subnet().alias_count(), before, "{what}: nothing changed");
    }
    // The SA key may set another port's aliases.
    let (st, got) = ask_sm(&mut sa, &mut sm, from_b, Method::Set, &r, sel(&[1]), KEY);
    assert_eq!((st, got[1]), (SaStatus::Ok, g1));
    // The same GUID at another index, or on another port, is left out.
    let again = rec(lid_a, 0, [0, 0, g1, 0, 0, 0, 0, 0]);
    let (st, got) = ask_sm(&mut sa, &mut sm, from_a, Method::Set, &again, sel(&[2]), 0);
    assert_eq!((st, got[1], got[2]), (SaStatus::Ok, g1, 0));
    let on_b = rec(from_b.lid, 0, [0, g1, 0, 0, 0, 0, 0, 0]);
    let (st, got) = ask_sm(&mut sa, &mut sm, from_b, Method::Set, &on_b, sel(&[1]), 0);
    assert_eq!((st, got[1]), (SaStatus::Ok, 0));
    assert_eq!(sm.subnet().alias_count(), before + 1);
    assert!(f.run(&mut sm));
    assert_eq!(f.nodes[a].guids(1).unwrap()[1], g1);
    assert_eq!(f.nodes[b].guids(1).unwrap()[1], 0);
}

#[test]
fn a_lost_port_loses_its_aliases_and_the_database_brings_them_back() {
    let (mut f, mut sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let h = hosts(&f);
    let ((a, from_a), (_, from_b)) = (h[0], h[1]);
    let r = rec(from_a.lid, 0, [0, 0x0002_c903_00cc_0001, 0, 0, 0, 0, 0, 0]);
    let (st, got) = ask_sm(&mut sa, &mut sm, from_a, Method::Set, &r, sel(&[1, 3]), 0);
    assert_eq!(st, SaStatus::Ok);
    assert!(f.run(&mut sm));
    let db = sa.export(sm.subnet(), 0, 0);
    assert_eq!(db.guid_info.len(), 1, "{db:?}");
    assert_eq!(db.guid_info[0].guids, got);
    let text = db.write();
    assert!(text.starts_with("GUIDInfo Record: base_guid=0x"), "{text}");

    // A new SA (a new master) restores them from the file.
    let mut sb = new_sa();
    let read = sa::db::SaDb::parse(&text).unwrap();
    let back = sb.restore(sm.subnet(), &read, 0, 0);
    assert_eq!((back.alias_guids, back.skipped), (0, 0), "already held");
    let node_a = sm.subnet().by_lid(from_a.lid).unwrap().0;
    sm.set_guid_block(node_a, 0, [got[0], 0, 0, 0, 0, 0, 0, 0])
        .unwrap();
    let back = sb.restore(sm.subnet(), &read, 0, 0);
    assert_eq!((back.alias_guids, back.skipped), (2, 0));
    for c in sb.take_guid_changes() {
        sm.set_guid_block(c.node, c.block, c.guids).unwrap();
    }
    assert_eq!(sm.subnet().guid_block(node_a, 0), Some(got));

    // The host goes: it is lost, and so are its aliases.
    let alias = Gid::new(Gid::DEFAULT_PREFIX, Guid(got[1]));
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(a));
    let _ = run(&mut f, &mut sm, &mut sb, t + 2_000 * MS);
    assert_eq!(sm.subnet().by_alias_guid(Guid(got[1])), None);
    assert_eq!(sm.subnet().alias_count(), 0);
    let (st, _) = path(&mut sb, &sm, from_b, gid_of(&f, h[1].0), alias);
    assert_eq!(st, SaStatus::ReqInvalidGid);
}

#[test]
fn each_alias_is_a_membership_of_its_own() {
    // Two VMs of one shared port, each under its alias, in the broadcast
    // group: one leaving keeps the other (and the port) in it.
    let (f, mut sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let (_, from_a) = hosts(&f)[0];
    let r = rec(from_a.lid, 0, [0; 8]);
    let (st, got) = ask_sm(&mut sa, &mut sm, from_a, Method::Set, &r, sel(&[1, 2]), 0);
    assert_eq!(st, SaStatus::Ok);
    let (vm1, vm2) = (
        Gid::new(Gid::DEFAULT_PREFIX, Guid(got[1])),
        Gid::new(Gid::DEFAULT_PREFIX, Guid(got[2])),
    );
    let bcast = Gid([
        0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
    ]);
    let m = mask::<McMemberRecord>(&["mgid", "port_gid", "join_state"]);
    for vm in [vm1, vm2] {
        let (st, _) = one(
            &mut sa,
            &sm,
            from_a,
            &ask(Method::Set, &member(bcast, vm, 1), m, 0),
            0,
        );
        assert_eq!(st, SaStatus::Ok);
    }
    let members = |sa: &mut Sa| -> Vec<Gid> {
        let q = McMemberRecord {
            mgid: bcast,
            ..McMemberRecord::default()
        };
        let mut g: Vec<Gid> = all(sa, &sm, from_a, &q, mask::<McMemberRecord>(&["mgid"]), KEY)
            .iter()
            .map(|r| r.port_gid)
            .collect();
        g.sort();
        g
    };
    assert_eq!(members(&mut sa), vec![vm1, vm2]);
    // The SM is handed the port once.
    let changes = sa.take_group_changes(sm.subnet());
    let (_, ms) = changes.iter().find(|c| c.0 == Lid(0xC000)).unwrap();
    let node_a = sm.subnet().by_lid(from_a.lid).unwrap().0;
    assert!(ms.iter().all(|g| g.node == node_a), "{ms:?}");
    let (st, _) = one(
        &mut sa,
        &sm,
        from_a,
        &ask(Method::Delete, &member(bcast, vm1, 1), m, 0),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(members(&mut sa), vec![vm2], "the other VM stays");
}

#[test]
fn the_sm_refuses_a_block_its_checks_do_not_pass() {
    use smi::sm::GuidError;
    let (mut f, mut sm) = up("mport-ntree:4:2");
    let h = hosts(&f);
    let node = |l: Lid| sm.subnet().by_lid(l).unwrap().0;
    let (a, b) = (node(h[0].1.lid), node(h[1].1.lid));
    let port_a = gid_of(&f, h[0].0).guid().0;
    let port_b = gid_of(&f, h[1].0).guid().0;
    let ok = [port_a, 0x77, 0, 0, 0, 0, 0, 0];
    let cases = [
        (a, 0, [port_a + 1, 0, 0, 0, 0, 0, 0, 0], GuidError::ReadOnly),
        (a, 1, [0; 8], GuidError::PastGuidCap { block: 1, cap: 8 }),
        (
            a,
            0,
            [port_a, port_b, 0, 0, 0, 0, 0, 0],
            GuidError::Taken(Guid(port_b)),
        ),
    ];
    for (n, block, guids, want) in cases {
        assert_eq!(sm.set_guid_block(n, block, guids), Err(want));
    }
    assert_eq!(sm.set_guid_block(a, 0, ok), Ok(1));
    assert_eq!(
        sm.set_guid_block(a, 0, ok),
        Ok(0),
        "unchanged: nothing sent"
    );
    // 0x77 is a's now: b may not take it; a may move it to index 2.
    let on_b = [port_b, 0x77, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        sm.set_guid_block(b, 0, on_b),
        Err(GuidError::Taken(Guid(0x77)))
    );
    let moved = [port_a, 0, 0x77, 0, 0, 0, 0, 0];
    assert_eq!(
        sm.set_guid_block(a, 0, moved),
        Err(GuidError::Taken(Guid(0x77)))
    );
    assert_eq!(
        sm.set_guid_block(a, 0, [port_a, 0, 0, 0, 0, 0, 0, 0]),
        Ok(1)
    );
    assert_eq!(sm.set_guid_block(a, 0, moved), Ok(1));
    assert_eq!(sm.subnet().by_alias_guid(Guid(0x77)), Some((a, 2)));
    assert!(f.run(&mut sm));
    assert_eq!(f.nodes[h[0].0].guids(1).unwrap()[..3], [port_a, 0, 0x77]);
}

/// The SR-IOV Shared Port model the vSwitch paper sets against its own: a
/// VM is an alias GUID of its hypervisor's port and shares the port's
/// LID. Moving it to another host moves the alias (a Delete there, a Set
/// here: one Set(GUIDInfo) to each port), and its LID becomes the
/// destination's, so a peer's cached PathRecord now leads to the host it
/// left. (The vSwitch model keeps the LID and changes LFT entries:
/// `fabric/tests/vswitch.rs`.)
#[test]
fn a_shared_port_vm_moves_with_two_smps_and_loses_its_lid() {
    let (mut f, mut sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let h = hosts(&f);
    let ((a, from_a), (b, from_b), (_, peer)) = (h[0], h[1], h[4]);
    let vm = 0x0002_c903_00dd_0001;
    let vm_gid = Gid::new(Gid::DEFAULT_PREFIX, Guid(vm));
    let peer_gid = gid_of(&f, h[4].0);
    let path = |sa: &mut Sa, sm: &Sm| {
        let (st, pr) = path(sa, sm, peer, peer_gid, vm_gid);
        assert_eq!(st, SaStatus::Ok);
        pr.dlid
    };
    let on = |host: Addr| rec(host.lid, 0, [0, vm, 0, 0, 0, 0, 0, 0]);
    let (st, _) = ask_sm(
        &mut sa,
        &mut sm,
        from_a,
        Method::Set,
        &on(from_a),
        sel(&[1]),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    assert!(f.run(&mut sm));
    let cached = path(&mut sa, &sm);
    assert_eq!(cached, from_a.lid);

    // The move: the alias leaves A, then B takes it.
    let before = sm.stats().total();
    let (st, _) = ask_sm(
        &mut sa,
        &mut sm,
        from_a,
        Method::Delete,
        &on(from_a),
        sel(&[1]),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    let (st, got) = ask_sm(
        &mut sa,
        &mut sm,
        from_b,
        Method::Set,
        &on(from_b),
        sel(&[1]),
        0,
    );
    assert_eq!((st, got[1]), (SaStatus::Ok, vm));
    assert!(f.run(&mut sm));
    let smps = sm.stats().total() - before;
    assert_eq!(smps, 2, "one Set(GUIDInfo) to each port");
    assert_eq!(f.nodes[a].guids(1).unwrap()[1], 0);
    assert_eq!(f.nodes[b].guids(1).unwrap()[1], vm);

    // The VM's LID is B's now; the cached record's DLID still leads to A.
    let now = path(&mut sa, &sm);
    assert_eq!(now, from_b.lid);
    assert_ne!(now, cached);
    assert!(f.nodes[a].owns(cached) && !f.nodes[b].owns(cached));
    println!(
        "shared port: the VM's move cost {smps} SMPs (Set(GUIDInfo) to each port); its LID went {} → {}, \
         so a peer's cached PathRecord (DLID {}) now reaches the host it left",
        cached.0, now.0, cached.0
    );
}

/// The SA's bounds on alias GUIDs: blocks waiting for the SM (4,096), and
/// GUIDs it makes and remembers (65,536 by default; 3 here, so that a
/// test reaches it): past either, "no resources", and nothing changes.
#[test]
fn alias_guids_past_the_sas_bounds_get_no_resources() {
    use sa::guids::MAX_PENDING;
    let (f, mut sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        max_assigned_guids: 3,
        ..SaConfig::default()
    });
    let h = hosts(&f);
    let (from_a, from_b) = (h[0].1, h[1].1);
    // A driver that never takes the SA's blocks: each Set below changes
    // entry 1 again, and the one past the bound is refused.
    for k in 0..=MAX_PENDING as u64 {
        let r = rec(
            from_a.lid,
            0,
            [0, 0x0002_c903_0000_1000 + k % 2, 0, 0, 0, 0, 0, 0],
        );
        let (st, _) = one(&mut sa, &sm, from_a, &ask(Method::Set, &r, sel(&[1]), 0), 0);
        let want = if (k as usize) < MAX_PENDING {
            SaStatus::Ok
        } else {
            SaStatus::NoResources
        };
        assert_eq!(st, want, "Set {k}");
    }
    let changes = sa.take_guid_changes();
    assert_eq!(changes.len(), MAX_PENDING);
    for c in changes {
        sm.set_guid_block(c.node, c.block, c.guids).unwrap();
    }
    // Seven entries asked of the SA, three made; then none left.
    let all = rec(from_a.lid, 0, [0; 8]);
    let (st, got) = ask_sm(
        &mut sa,
        &mut sm,
        from_a,
        Method::Set,
        &all,
        sel(&[2, 3, 4, 5, 6, 7]),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(got[2..].iter().filter(|&&g| g != 0).count(), 3, "{got:x?}");
    let on_b = rec(from_b.lid, 0, [0; 8]);
    let before = sm.subnet().alias_count();
    let (st, _) = ask_sm(&mut sa, &mut sm, from_b, Method::Set, &on_b, sel(&[1]), 0);
    assert_eq!(st, SaStatus::NoResources);
    assert_eq!(sm.subnet().alias_count(), before, "nothing changed");
}
