//! What hosts leave with the SA: ServiceRecords under leases (Set,
//! GetTable, Delete, expiry, ServiceKeys, bounds) and InformInfo
//! subscriptions, with the Reports of ports leaving and joining and of the
//! traps the SM receives, on a fabric ibkit's SM brought up in the
//! simulator and then changed.

use fabric::sim::FabricEvent;
use mad_core::mad::Method;
use mad_core::notice::{Notice, TrapDetails};
use mad_core::sa::service::INDEFINITE_LEASE;
use mad_core::sa::*;
use mad_core::{Gid, Guid, MAD_SIZE};
use sa::{Addr, Sa, SaConfig, SaError, Transmit};

mod common;
use common::*;

const SET: &[&str] = &["service_id", "service_gid", "service_lease", "service_key"];

#[test]
fn services_register_lapse_and_answer_only_their_owner_key() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let (a, b) = (hs[0], hs[1]);
    let m = mask::<ServiceRecord>(SET);

    // Without ServiceID and ServiceGID a Set names nothing.
    let rec = service("lustre", 7, gid_of(&f, a.0), 2, 0xAA);
    let half = mask::<ServiceRecord>(&["service_id"]);
    let (s, _) = one(&mut sa, &sm, a.1, &ask(Method::Set, &rec, half, 0), 0);
    assert_eq!(s, SaStatus::ReqInsufficientComponents);
    assert_eq!(sa.services(), 0);

    // A two-second lease; an indefinite one (no lease in the mask).
    let (s, r) = one(&mut sa, &sm, a.1, &ask(Method::Set, &rec, m, 0), 0);
    assert_eq!((s, r.method()), (SaStatus::Ok, Method::GetResp));
    let back: ServiceRecord = r.record().unwrap();
    assert_eq!((back.service_id, back.service_lease), (7, 2));
    assert_eq!(back.service_pkey.0, 0xFFFF, "the default P_Key");
    assert_eq!(back.service_key.0, [0; 16], "no key to the untrusted");
    let forever = service("nfs", 9, gid_of(&f, b.0), 5, 0);
    let no_lease = mask::<ServiceRecord>(&["service_id", "service_gid", "service_name"]);
    let (s, r) = one(
        &mut sa,
        &sm,
        b.1,
        &ask(Method::Set, &forever, no_lease, 0),
        0,
    );
    assert_eq!(s, SaStatus::Ok);
    assert_eq!(
        r.record::<ServiceRecord>().unwrap().service_lease,
        INDEFINITE_LEASE
    );
    assert_eq!(sa.services(), 2);

    // Found by name, with the lease left; the key shown only with the
    // SM_Key.
    let by_name = mask::<ServiceRecord>(&["service_name"]);
    let got = all(&mut sa, &sm, b.1, &rec, by_name, 0);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].service_data32, [1, 2, 3, 4]);
    assert_eq!(got[0].service_key.0, [0; 16]);
    let key = SaConfig::default().sm_key;
    let got = all(&mut sa, &sm, b.1, &rec, by_name, key);
    assert_eq!(got[0].service_key.0, [0xAA; 16]);
    assert_eq!(
        all(&mut sa, &sm, b.1, &ServiceRecord::default(), 0, 0).len(),
        2
    );

    // A wrong SM_Key is dropped unanswered, as OpenSM drops it.
    let e = sa.handle_mad(sm.subnet(), b.1, &ask(Method::GetTable, &rec, 0, 99), 0);
    assert_eq!(e, Err(SaError::BadSmKey));
    assert!(sa.poll_transmit().is_none());

    // Deleting needs the ServiceKey (or trust).
    let mut wrong = rec;
    wrong.service_key.0 = [0xBB; 16];
    let (s, r) = one(&mut sa, &sm, b.1, &ask(Method::Delete, &wrong, m, 0), 0);
    assert_eq!((s, r.method()), (SaStatus::ReqDenied, Method::DeleteResp));
    assert_eq!(sa.services(), 2);

    // Renewing at 1.5 s moves the end of the lease to 3.5 s.
    let (s, _) = one(&mut sa, &sm, a.1, &ask(Method::Set, &rec, m, 0), 1_500);
    assert_eq!(s, SaStatus::Ok);
    assert_eq!(sa.services(), 2, "same RID: replaced");
    let due = sa.poll_timeout().unwrap();
    assert_eq!(due, 3_500);
    sa.handle_timeout(3_499);
    assert_eq!(sa.services(), 2);
    sa.handle_timeout(due);
    assert_eq!((sa.services(), sa.stats().services_expired), (1, 1));
    let (s, _) = one(
        &mut sa,
        &sm,
        a.1,
        &ask(Method::Get, &rec, by_name, 0),
        3_600,
    );
    assert_eq!(s, SaStatus::NoRecords);

    // The owner's key deletes; the record comes back; then nothing.
    let mut del = forever;
    del.service_key.0 = [0; 16];
    let id_gid = mask::<ServiceRecord>(&["service_id", "service_gid"]);
    let (s, r) = one(
        &mut sa,
        &sm,
        b.1,
        &ask(Method::Delete, &del, id_gid, 0),
        4_000,
    );
    assert_eq!((s, r.method()), (SaStatus::Ok, Method::DeleteResp));
    assert_eq!(r.record::<ServiceRecord>().unwrap().service_id, 9);
    let (s, _) = one(
        &mut sa,
        &sm,
        b.1,
        &ask(Method::Delete, &del, id_gid, 0),
        4_000,
    );
    assert_eq!(s, SaStatus::NoRecords);
    assert_eq!(sa.services(), 0);
    assert_eq!(sa.poll_timeout(), None);
}

#[test]
fn a_host_that_registers_in_a_loop_is_bounded_and_others_still_register() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    let hs = hosts(&f);
    let m = mask::<ServiceRecord>(SET);
    let mut refused = 0;
    for id in 0..(sa::service::MAX_PER_OWNER as u64 + 10) {
        let rec = service("flood", id, gid_of(&f, hs[0].0), 60, 0);
        let (s, _) = one(&mut sa, &sm, hs[0].1, &ask(Method::Set, &rec, m, 0), 0);
        if s == SaStatus::NoResources {
            refused += 1;
        } else {
            assert_eq!(s, SaStatus::Ok);
        }
    }
    assert_eq!(refused, 10);
    assert_eq!(sa.services(), sa::service::MAX_PER_OWNER);
    // A renewal of a held record is not a new one.
    let rec = service("flood", 0, gid_of(&f, hs[0].0), 60, 0);
    let (s, _) = one(&mut sa, &sm, hs[0].1, &ask(Method::Set, &rec, m, 0), 1);
    assert_eq!(s, SaStatus::Ok);
    let other = service("other", 1, gid_of(&f, hs[1].0), 60, 0);
    let (s, _) = one(&mut sa, &sm, hs[1].1, &ask(Method::Set, &other, m, 0), 1);
    assert_eq!(s, SaStatus::Ok);
    // A service in a partition the ports do not hold is refused.
    let mut p = other;
    p.service_pkey = mad_core::PKey(0x8001);
    let with_pkey = m | mask::<ServiceRecord>(&["service_pkey"]);
    let (s, _) = one(
        &mut sa,
        &sm,
        hs[1].1,
        &ask(Method::Set, &p, with_pkey, 0),
        1,
    );
    assert_eq!(s, SaStatus::ReqInvalid);
    assert_eq!(sa.services(), sa::service::MAX_PER_OWNER + 1);
}

/// The Reports among `out`, by destination, decoded.
fn reports(out: &[Transmit]) -> Vec<(Addr, u64, Notice, Gid)> {
    out.iter()
        .map(|t| {
            let m = SaMad::parse(&t.mad).unwrap();
            assert_eq!(m.method(), Method::Report);
            assert_eq!(m.attribute_id(), SaAttributeId::Notice);
            let n = Notice::decode(&m.data[..64]).unwrap();
            let mut g = [0u8; 16];
            g.copy_from_slice(&m.data[64..80]);
            (t.to, m.header.transaction_id.get(), n, Gid(g))
        })
        .collect()
}

/// Runs the fabric with the SM until `until_ns` and hands the SM's events
/// to the SA; what the SA sent.
/// A Set(InformInfo) of `ii` from `from`, without the SM_Key: its status.
fn subscribe(sa: &mut Sa, sm: &smi::sm::Sm, from: Addr, ii: &InformInfo) -> SaStatus {
    one(sa, sm, from, &ask(Method::Set, ii, 0, 0), 0).0
}

fn report_resp(tid: u64) -> [u8; MAD_SIZE] {
    let mut m = SaMad::request(Method::ReportResp, SaAttributeId::Notice, tid);
    m.header.method = Method::ReportResp.into();
    m.to_bytes()
}

#[test]
fn subscribers_hear_ports_leave_and_return_and_the_traps_the_sm_gets() {
    let (mut f, mut sm) = up("mport-ntree:4:2");
    let mut sa = new_sa();
    // The SA learns what is in service when the subnet is up.
    while let Some(e) = sm.poll_event() {
        sa.handle_event(sm.subnet(), &e, 0);
    }
    assert!(drain(&mut sa).is_empty(), "nobody subscribed yet");
    let hs = hosts(&f);
    let (watcher, all_traps, victim) = (hs[0], hs[1], hs[2]);

    // A trusted subscription only for the security traps.
    let (s, r) = one(
        &mut sa,
        &sm,
        watcher.1,
        &ask(Method::Set, &inform(256), 0, 0),
        0,
    );
    assert_eq!((s, r.method()), (SaStatus::ReqDenied, Method::GetResp));
    assert_eq!(r.record::<InformInfo>().unwrap().subscribe, 0, "o13-13.1.1");
    // Leaving what one never joined.
    let mut leave = inform(65);
    leave.subscribe = 0;
    let (s, _) = one(&mut sa, &sm, watcher.1, &ask(Method::Set, &leave, 0, 0), 0);
    assert_eq!(s, SaStatus::ReqInvalid);

    // `watcher` wants 64 and 65 for the victim's LID only; `all_traps`
    // everything.
    for trap in [64, 65] {
        let mut ii = inform(trap);
        ii.lid_range_begin = victim.1.lid;
        ii.lid_range_end = victim.1.lid;
        assert_eq!(subscribe(&mut sa, &sm, watcher.1, &ii), SaStatus::Ok);
    }
    let every = inform(0xFFFF);
    assert_eq!(subscribe(&mut sa, &sm, all_traps.1, &every), SaStatus::Ok);
    // The same subscription again is not a second one.
    assert_eq!(subscribe(&mut sa, &sm, all_traps.1, &every), SaStatus::Ok);
    assert_eq!(sa.subscriptions(), (3, 0));
    let recs = all(
        &mut sa,
        &sm,
        watcher.1,
        &InformInfoRecord {
            subscriber_gid: gid_of(&f, watcher.0),
            ..InformInfoRecord::default()
        },
        mask::<InformInfoRecord>(&["subscriber_gid"]),
        0,
    );
    let mut enums: Vec<u16> = recs.iter().map(|r| r.subscriber_enum).collect();
    enums.sort();
    assert_eq!(enums, [0, 1]);
    assert!(recs
        .iter()
        .all(|r| r.inform_info.lid_range_begin == victim.1.lid));

    // Another CA, not the victim, goes: only `all_traps` hears of it.
    let bystander = hs[3];
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(bystander.0));
    let out = run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
    let rs = reports(&out);
    assert!(rs.iter().all(|r| r.0 == all_traps.1), "{rs:?}");
    let gone: Vec<&Notice> = rs
        .iter()
        .map(|r| &r.2)
        .filter(|n| n.trap_number() == Some(65))
        .collect();
    assert_eq!(gone.len(), 1, "{rs:?}");
    match gone[0].details().unwrap() {
        TrapDetails::Gid(65, g) => assert_eq!(g.gid, gid_of(&f, bystander.0)),
        d => panic!("{d:?}"),
    }
    assert_eq!(gone[0].issuer_lid, f.nodes[f.sm_node].lid());
    assert!(
        rs.iter().any(|r| r.2.trap_number() == Some(128)),
        "the switch's trap forwarded: {rs:?}"
    );
    for r in &rs {
        assert!(sa
            .handle_mad(sm.subnet(), all_traps.1, &report_resp(r.1), 0)
            .is_ok());
    }
    assert_eq!(sa.subscriptions().1, 0, "each Report answered");
    // A ReportResp to nothing is dropped.
    assert_eq!(
        sa.handle_mad(sm.subnet(), all_traps.1, &report_resp(0x1234_5678), 0),
        Err(SaError::Unexpected)
    );

    // The victim goes and comes back: `watcher` hears 65 then 64 for it.
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(victim.0));
    let out = run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
    let to_watcher: Vec<_> = reports(&out)
        .into_iter()
        .filter(|r| r.0 == watcher.1)
        .collect();
    assert_eq!(to_watcher.len(), 1, "{to_watcher:?}");
    assert_eq!(to_watcher[0].2.trap_number(), Some(65));
    for r in reports(&out) {
        sa.handle_mad(sm.subnet(), r.0, &report_resp(r.1), 0)
            .unwrap();
    }
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeUp(victim.0));
    let out = run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
    let to_watcher: Vec<_> = reports(&out)
        .into_iter()
        .filter(|r| r.0 == watcher.1)
        .collect();
    assert_eq!(to_watcher.len(), 1, "{to_watcher:?}");
    let (_, tid, n, issuer) = &to_watcher[0];
    assert_eq!(n.trap_number(), Some(64));
    assert_eq!(*issuer, gid_of(&f, f.sm_node), "the SM issues 64/65");
    match n.details().unwrap() {
        TrapDetails::Gid(64, g) => assert_eq!(g.gid, gid_of(&f, victim.0)),
        d => panic!("{d:?}"),
    }

    // `watcher` answers; `all_traps` never does: its Report is sent again
    // `report_retries` times, then it loses its subscription.
    sa.handle_mad(sm.subnet(), watcher.1, &report_resp(*tid), 0)
        .unwrap();
    let cfg = SaConfig::default();
    let unanswered = sa.subscriptions().1;
    assert!(unanswered > 0);
    let mut resent = 0;
    let mut now = t / MS + 2_000;
    while let Some(due) = sa.poll_timeout() {
        now = now.max(due);
        sa.handle_timeout(now);
        let out = drain(&mut sa);
        assert!(out.iter().all(|o| o.to == all_traps.1));
        resent += out.len();
    }
    assert_eq!(resent, unanswered * cfg.report_retries as usize);
    assert_eq!(sa.stats().subscribers_dropped, 1);
    assert_eq!(sa.subscriptions(), (2, 0), "watcher's two remain");
}

/// OpenSM's `drop_event_subscriptions`: a subscriber whose port goes out
/// of service keeps its subscription (the default, OpenSM's FALSE), hears
/// nothing while out, even of another port going, and hears again once
/// back: the trap 64 of its own return. With the option on, it loses the
/// subscription as it goes.
#[test]
fn a_subscriber_that_leaves_keeps_its_subscription_unless_told_to_drop_it() {
    for drop in [false, true] {
        let (mut f, mut sm) = up("mport-ntree:4:2");
        let mut sa = Sa::new(SaConfig {
            rmpp_acks: false,
            drop_event_subscriptions: drop,
            ..SaConfig::default()
        });
        while let Some(e) = sm.poll_event() {
            sa.handle_event(sm.subnet(), &e, 0);
        }
        let hs = hosts(&f);
        let (sub, other, watcher) = (hs[0], hs[1], hs[2]);
        for who in [sub, watcher] {
            assert_eq!(
                subscribe(&mut sa, &sm, who.1, &inform(0xFFFF)),
                SaStatus::Ok
            );
        }
        let answer = |sa: &mut Sa, sm: &smi::sm::Sm, out: &[Transmit]| {
            for r in reports(out).into_iter().filter(|r| r.0 == watcher.1) {
                sa.handle_mad(sm.subnet(), r.0, &report_resp(r.1), 0)
                    .unwrap();
            }
        };
        let to_sub = |out: &[Transmit]| -> Vec<(Addr, u64, Notice, Gid)> {
            reports(out).into_iter().filter(|r| r.0 == sub.1).collect()
        };

        let t = f.now_ns();
        f.schedule(t + MS, FabricEvent::NodeDown(sub.0));
        let out = run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
        // The switch's trap 128 may reach it before the sweep finds it
        // gone (OpenSM too forwards a trap as it comes); once gone, it
        // gets no trap 65 of its own, and nothing stays in flight to it.
        assert!(
            to_sub(&out).iter().all(|r| r.2.trap_number() != Some(65)),
            "drop {drop}: {out:?}"
        );
        assert!(
            reports(&out)
                .iter()
                .any(|r| r.0 == watcher.1 && r.2.trap_number() == Some(65)),
            "drop {drop}: {out:?}"
        );
        answer(&mut sa, &sm, &out);
        assert_eq!(
            sa.subscriptions(),
            (1 + usize::from(!drop), 0),
            "drop {drop}"
        );
        // Another port goes while it is out: a trap 65 it would want.
        let t = f.now_ns();
        f.schedule(t + MS, FabricEvent::NodeDown(other.0));
        let out = run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
        assert!(to_sub(&out).is_empty(), "drop {drop}: {out:?}");
        assert!(
            reports(&out)
                .iter()
                .any(|r| r.0 == watcher.1 && r.2.trap_number() == Some(65)),
            "drop {drop}: {out:?}"
        );
        answer(&mut sa, &sm, &out);

        let t = f.now_ns();
        f.schedule(t + MS, FabricEvent::NodeUp(sub.0));
        let out = run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
        assert_eq!(f.nodes[sub.0].lid(), sub.1.lid, "back at its LID");
        let heard = to_sub(&out);
        if drop {
            assert!(heard.is_empty(), "{heard:?}");
            assert_eq!(sa.subscriptions().0, 1);
        } else {
            assert!(
                heard.iter().any(|r| matches!(
                    r.2.details(),
                    Ok(TrapDetails::Gid(64, g)) if g.gid == gid_of(&f, sub.0)
                )),
                "{heard:?}"
            );
            assert_eq!(sa.subscriptions().0, 2);
        }
    }
}

#[test]
fn a_short_or_empty_inform_info_is_refused_not_a_panic() {
    let (f, sm) = up("mport-ntree:4:2");
    let me = hosts(&f)[0].1;
    let mut informs = sa::inform::Informs::default();
    for data in [&[][..], &[1, 2, 3][..]] {
        let r = informs.set(sm.subnet(), me, data, false);
        // Zero-filled past its end: Subscribe 0 for nothing held.
        assert!(matches!(r, Err((SaStatus::ReqInvalid, _))), "{r:?}");
    }
    assert_eq!(informs.subscriptions(), 0);
}

/// A hypervisor powered off and back with one VF fewer: a subscriber to
/// traps 64 and 65 hears its PF and both VMs go out of service, then the
/// PF and the VM in the VF it still has come back; the VM in the VF it
/// lost does not (the SM forgot it, `SmEvent::VmLost`).
#[test]
fn a_vm_lost_with_its_vf_does_not_come_back_into_service() {
    let (mut f, mut sm, up) = fabric::sim::bring_up(
        "mport-ntree:4:2",
        fabric::sim::SimConfig {
            vfs: 2,
            ..fabric::sim::SimConfig::default()
        },
        smi::sm::SmConfig::default(),
    )
    .unwrap();
    assert!(up);
    let hyp = sm.hypervisors()[0];
    let hx = f.node_by_guid(sm.nodes()[hyp].info.node_guid.0).unwrap();
    let _kept = sm.create_vm(hyp, 0xE1).unwrap();
    let lost_vm = sm.create_vm(hyp, 0xE2).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(sm.vm(lost_vm).unwrap().vf, 2);
    let mut sa = new_sa();
    while let Some(e) = sm.poll_event() {
        sa.handle_event(sm.subnet(), &e, 0);
    }
    drain(&mut sa);
    let sub = *hosts(&f).iter().find(|h| h.0 != hx).unwrap();
    for trap in [64, 65] {
        let (s, _) = one(
            &mut sa,
            &sm,
            sub.1,
            &ask(Method::Set, &inform(trap), 0, 0),
            0,
        );
        assert_eq!(s, SaStatus::Ok);
    }
    let gids = |out: &[Transmit], trap: u16| -> Vec<Gid> {
        let mut v: Vec<Gid> = reports(out)
            .iter()
            .filter_map(|r| match r.2.details() {
                Ok(TrapDetails::Gid(t, g)) if t == trap => Some(g.gid),
                _ => None,
            })
            .collect();
        v.sort();
        v
    };
    let vm = |g: u64| Gid::new(Gid::DEFAULT_PREFIX, Guid(g));
    let pf_and = |more: &[u64]| {
        let mut v: Vec<Gid> = more.iter().map(|&g| vm(g)).collect();
        v.push(gid_of(&f, hx));
        v.sort();
        v
    };
    let (went, back) = (pf_and(&[0xE1, 0xE2]), pf_and(&[0xE1]));

    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(hx));
    let out = run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
    assert_eq!(gids(&out, 65), went);
    for r in reports(&out) {
        sa.handle_mad(sm.subnet(), r.0, &report_resp(r.1), 0)
            .unwrap();
    }
    f.set_vfs(hx, 1).unwrap();
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeUp(hx));
    let out = run(&mut f, &mut sm, &mut sa, t + 2_000 * MS);
    assert_eq!(gids(&out, 64), back, "the VM in the lost VF stays out");
    assert_eq!(sm.vm(lost_vm), None);
}
