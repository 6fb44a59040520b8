//! A hostile guest against the backend core and its ring: other domains'
//! handles, stale handles, DMA addresses outside its memory or wrapping,
//! registration past its limits, QP 0, malformed and truncated commands,
//! ring indices out of range, and dying with everything allocated. Every
//! attempt is refused, changes nothing, and the other guest keeps working.
//! The bug classes behind QEMU pvrdma's CVEs each have a test named
//! `pvrdma_…`.

use vhca::backend::{Backend, Held, Limits, PortView};
use vhca::device::SoftHca;
use vhca::handles::DomainId;
use vhca::proto::{access, Command, Handle, QpState, QpType, Refusal, Response, MAX_CQE};
use vhca::ring::{BackendRing, GuestRing, SLOTS};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

const BASE: u64 = 0x10_0000;
const SIZE: usize = 1 << 20;

type B = Backend<GuestMemoryMmap, SoftHca<GuestMemoryMmap>>;

fn memory() -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(BASE), SIZE)]).unwrap()
}

fn backend(limits: Limits) -> (B, DomainId, DomainId) {
    let mut b = Backend::new(SoftHca::new(0x0002_c903_0000_0001));
    let port = |lid| PortView {
        lid,
        port_guid: 0x1000 + u64::from(lid),
        state: 4,
    };
    let x = b.add_domain(memory(), limits, port(5));
    let y = b.add_domain(memory(), limits, port(6));
    for d in [x, y] {
        assert_eq!(call(&mut b, d, Command::OpenDevice), Ok([0; 7]));
    }
    (b, x, y)
}

fn call(b: &mut B, d: DomainId, c: Command) -> Result<[u64; 7], Refusal> {
    let r = Response::decode(&b.execute(d, &c.encode(77))).unwrap();
    assert_eq!(r.seq, 77);
    r.result
}

/// PD, a 64 KiB MR at the start of the guest's memory, a CQ and a UD QP
/// on it.
struct Set {
    pd: Handle,
    mr: Handle,
    cq: Handle,
    qp: Handle,
}

fn build(b: &mut B, d: DomainId) -> Set {
    let pd = Handle(call(b, d, Command::AllocPd).unwrap()[0]);
    let mr = Handle(
        call(
            b,
            d,
            Command::RegMr {
                pd,
                addr: BASE,
                len: 1 << 16,
                access: access::LOCAL_WRITE,
            },
        )
        .unwrap()[0],
    );
    let cq = Handle(
        call(
            b,
            d,
            Command::CreateCq {
                cqe: 64,
                mr,
                offset: 0,
            },
        )
        .unwrap()[0],
    );
    let qp = Handle(
        call(
            b,
            d,
            Command::CreateQp {
                pd,
                send_cq: cq,
                recv_cq: cq,
                qp_type: QpType::Ud,
                max_send_wr: 16,
                max_recv_wr: 16,
                mr,
                offset: 4096,
            },
        )
        .unwrap()[0],
    );
    Set { pd, mr, cq, qp }
}

#[test]
fn pvrdma_commands_before_set_up_are_refused() {
    let mut b = Backend::new(SoftHca::new(1));
    let d = b.add_domain(memory(), Limits::default(), PortView::default());
    for c in [
        Command::AllocPd,
        Command::QueryDevice,
        Command::AllocUar,
        Command::FreePd {
            pd: Handle::new(1, 1),
        },
    ] {
        assert_eq!(call(&mut b, d, c), Err(Refusal::NotOpen), "{c:?}");
    }
    assert_eq!(b.held(d), Held::default());
    assert_eq!(b.device().live(), 0);
    assert_eq!(call(&mut b, d, Command::OpenDevice), Ok([0; 7]));
    assert_eq!(call(&mut b, d, Command::OpenDevice), Err(Refusal::Again));
    assert!(call(&mut b, d, Command::AllocPd).is_ok());
    // A domain that does not exist.
    assert_eq!(
        call(&mut b, DomainId(9), Command::AllocPd),
        Err(Refusal::NotOpen)
    );
}

#[test]
fn another_domains_handles_are_refused_and_change_nothing() {
    let (mut b, x, y) = backend(Limits::default());
    let s = build(&mut b, x);
    let before = (b.held(x), b.held(y), b.device().live());
    for c in [
        Command::FreePd { pd: s.pd },
        Command::DeregMr { mr: s.mr },
        Command::DestroyCq { cq: s.cq },
        Command::DestroyQp { qp: s.qp },
        Command::ReqNotifyCq {
            cq: s.cq,
            solicited: false,
        },
        Command::ModifyQp {
            qp: s.qp,
            state: QpState::Init,
            dest_qpn: 0,
            dlid: 0,
        },
        Command::RegMr {
            pd: s.pd,
            addr: BASE,
            len: 4096,
            access: 0,
        },
        Command::CreateCq {
            cqe: 1,
            mr: s.mr,
            offset: 0,
        },
    ] {
        assert_eq!(call(&mut b, y, c), Err(Refusal::BadHandle), "{c:?}");
    }
    assert_eq!((b.held(x), b.held(y), b.device().live()), before);
    // x's resources still work for x.
    assert!(call(
        &mut b,
        x,
        Command::ModifyQp {
            qp: s.qp,
            state: QpState::Init,
            dest_qpn: 0,
            dlid: 0
        }
    )
    .is_ok());
}

#[test]
fn stale_handles_after_destroy_are_refused() {
    let (mut b, x, _) = backend(Limits::default());
    let s = build(&mut b, x);
    assert!(call(&mut b, x, Command::DestroyQp { qp: s.qp }).is_ok());
    assert_eq!(
        call(&mut b, x, Command::DestroyQp { qp: s.qp }),
        Err(Refusal::BadHandle)
    );
    // The slot is reused: the old handle still names nothing.
    let again = build(&mut b, x);
    assert_eq!(again.qp.index(), s.qp.index());
    assert_ne!(again.qp, s.qp);
    assert_eq!(
        call(&mut b, x, Command::DestroyQp { qp: s.qp }),
        Err(Refusal::BadHandle)
    );
    assert!(call(&mut b, x, Command::DestroyQp { qp: again.qp }).is_ok());
}

#[test]
fn dma_outside_the_guests_memory_or_wrapping_is_refused() {
    let (mut b, x, _) = backend(Limits::default());
    let pd = Handle(call(&mut b, x, Command::AllocPd).unwrap()[0]);
    let before = (b.held(x), b.device().live());
    let end = BASE + SIZE as u64;
    for (addr, len) in [
        (0, 4096),               // below
        (BASE - 1, 2),           // straddles the start
        (end - 4095, 4096),      // straddles the end
        (end, 1),                // just past
        (u64::MAX - 10, 100),    // wraps
        (BASE, u64::MAX),        // absurd length
        (BASE, SIZE as u64 + 1), // one byte too many
    ] {
        let r = call(
            &mut b,
            x,
            Command::RegMr {
                pd,
                addr,
                len,
                access: access::ALL,
            },
        );
        assert_eq!(r, Err(Refusal::BadAddress), "{addr:#x}+{len:#x}");
    }
    assert_eq!((b.held(x), b.device().live()), before, "nothing allocated");
    // The whole memory is fine.
    assert!(call(
        &mut b,
        x,
        Command::RegMr {
            pd,
            addr: BASE,
            len: SIZE as u64,
            access: access::ALL
        }
    )
    .is_ok());
}

#[test]
fn registration_beyond_the_limits_is_refused() {
    let limits = Limits {
        pds: 1,
        mrs: 2,
        reg_bytes: 3 * 4096,
        ..Limits::default()
    };
    let (mut b, x, y) = backend(limits);
    let pd = Handle(call(&mut b, x, Command::AllocPd).unwrap()[0]);
    assert_eq!(call(&mut b, x, Command::AllocPd), Err(Refusal::Limit));
    let reg = |b: &mut B, len| {
        call(
            b,
            x,
            Command::RegMr {
                pd,
                addr: BASE,
                len,
                access: 0,
            },
        )
    };
    assert!(reg(&mut b, 2 * 4096).is_ok());
    assert_eq!(reg(&mut b, 2 * 4096), Err(Refusal::Limit), "bytes");
    assert!(reg(&mut b, 4096).is_ok());
    assert_eq!(reg(&mut b, 1), Err(Refusal::Limit), "count");
    assert_eq!(b.held(x).reg_bytes, 3 * 4096);
    // Another domain's limits are its own.
    assert!(call(&mut b, y, Command::AllocPd).is_ok());
}

/// The bytes all guests may pin together are capped too: a guest within
/// its own limit is refused once the guests together would pass the
/// backend's, and a deregistration makes room for either.
#[test]
fn registration_beyond_the_total_across_guests_is_refused() {
    let (mut b, x, y) = backend(Limits::default());
    b.set_total_reg_limit(3 * 4096);
    let reg = |b: &mut B, d, len| {
        let pd = Handle(call(b, d, Command::AllocPd).unwrap()[0]);
        call(
            b,
            d,
            Command::RegMr {
                pd,
                addr: BASE,
                len,
                access: 0,
            },
        )
    };
    let mx = Handle(reg(&mut b, x, 2 * 4096).unwrap()[0]);
    assert_eq!(
        reg(&mut b, y, 2 * 4096),
        Err(Refusal::Limit),
        "y within its own limit"
    );
    assert!(reg(&mut b, y, 4096).is_ok());
    assert_eq!(b.total_reg_bytes(), 3 * 4096);
    assert!(call(&mut b, x, Command::DeregMr { mr: mx }).is_ok());
    assert!(reg(&mut b, y, 2 * 4096).is_ok());
}

#[test]
fn pvrdma_guest_sized_counts_are_bounded_before_anything_is_allocated() {
    let (mut b, x, _) = backend(Limits::default());
    let s = build(&mut b, x);
    let before = (b.held(x), b.device().live());
    // Too many entries: refused at decode.
    let mut raw = Command::CreateCq {
        cqe: 1,
        mr: s.mr,
        offset: 0,
    }
    .encode(1);
    raw[8..16].copy_from_slice(&(u64::from(MAX_CQE) + 1).to_le_bytes());
    assert_eq!(
        Response::decode(&b.execute(x, &raw)).unwrap().result,
        Err(Refusal::Malformed)
    );
    // A buffer larger than its region, or past its end.
    for (cqe, offset) in [(4096, 0), (64, (1 << 16) - 64), (1, u64::MAX - 8)] {
        assert_eq!(
            call(
                &mut b,
                x,
                Command::CreateCq {
                    cqe,
                    mr: s.mr,
                    offset
                }
            ),
            Err(Refusal::BadAddress),
            "{cqe} at {offset:#x}"
        );
    }
    assert_eq!(
        call(
            &mut b,
            x,
            Command::CreateQp {
                pd: s.pd,
                send_cq: s.cq,
                recv_cq: s.cq,
                qp_type: QpType::Rc,
                max_send_wr: 1 << 14,
                max_recv_wr: 1 << 14,
                mr: s.mr,
                offset: 0,
            }
        ),
        Err(Refusal::BadAddress)
    );
    assert_eq!((b.held(x), b.device().live()), before);
}

#[test]
fn two_stage_creation_and_resources_in_use() {
    let (mut b, x, _) = backend(Limits::default());
    let s = build(&mut b, x);
    // A QP's buffer must be in a region of its own PD.
    let pd2 = Handle(call(&mut b, x, Command::AllocPd).unwrap()[0]);
    let qp = Command::CreateQp {
        pd: pd2,
        send_cq: s.cq,
        recv_cq: s.cq,
        qp_type: QpType::Ud,
        max_send_wr: 1,
        max_recv_wr: 1,
        mr: s.mr,
        offset: 0,
    };
    assert_eq!(call(&mut b, x, qp), Err(Refusal::BadHandle));
    // Nothing in use goes away.
    assert_eq!(
        call(&mut b, x, Command::FreePd { pd: s.pd }),
        Err(Refusal::Busy)
    );
    assert_eq!(
        call(&mut b, x, Command::DeregMr { mr: s.mr }),
        Err(Refusal::Busy)
    );
    assert_eq!(
        call(&mut b, x, Command::DestroyCq { cq: s.cq }),
        Err(Refusal::Busy)
    );
    // In order, everything does.
    for c in [
        Command::DestroyQp { qp: s.qp },
        Command::DestroyCq { cq: s.cq },
        Command::DeregMr { mr: s.mr },
        Command::FreePd { pd: s.pd },
        Command::FreePd { pd: pd2 },
    ] {
        assert!(call(&mut b, x, c).is_ok(), "{c:?}");
    }
    assert_eq!(b.held(x), Held::default());
}

#[test]
fn qp_states_follow_the_legal_transitions() {
    let (mut b, x, _) = backend(Limits::default());
    let s = build(&mut b, x);
    let to = |b: &mut B, state| {
        call(
            b,
            x,
            Command::ModifyQp {
                qp: s.qp,
                state,
                dest_qpn: 0,
                dlid: 0,
            },
        )
    };
    assert_eq!(to(&mut b, QpState::Rts), Err(Refusal::BadState));
    assert_eq!(to(&mut b, QpState::Rtr), Err(Refusal::BadState));
    for st in [
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Err,
        QpState::Reset,
    ] {
        assert!(to(&mut b, st).is_ok(), "{st:?}");
    }
}

#[test]
fn qp0_and_subnet_management_are_refused() {
    let (mut b, x, _) = backend(Limits::default());
    let mem = b.memory(x).unwrap();
    let mut smp = [0u8; 256];
    smp[0] = 1;
    smp[1] = 0x81;
    mem.write_slice(&smp, GuestAddress(BASE + 0x2000)).unwrap();
    let send = |b: &mut B, qpn| {
        call(
            b,
            x,
            Command::SendMad {
                qpn,
                addr: BASE + 0x2000,
            },
        )
    };
    assert_eq!(send(&mut b, 0), Err(Refusal::Forbidden));
    assert_eq!(send(&mut b, 1), Err(Refusal::Forbidden), "an SMP on QP 1");
    assert_eq!(
        call(
            &mut b,
            x,
            Command::SendMad {
                qpn: 1,
                addr: BASE + SIZE as u64 - 100
            }
        ),
        Err(Refusal::BadAddress)
    );
}

#[test]
fn malformed_and_truncated_commands_are_refused() {
    let (mut b, x, _) = backend(Limits::default());
    for bytes in [&[][..], &[1u8; 10][..], &[0xFFu8; 64][..], &[0u8; 64][..]] {
        let r = Response::decode(&b.execute(x, bytes)).unwrap();
        assert_eq!(r.result, Err(Refusal::Malformed), "{bytes:?}");
    }
    assert_eq!(b.stats.refused, 4);
    assert!(call(&mut b, x, Command::AllocPd).is_ok());
}

#[test]
fn a_guest_dying_with_everything_allocated_leaks_nothing_and_touches_nobody() {
    let (mut b, x, y) = backend(Limits::default());
    let mine = build(&mut b, y);
    let live_y = b.device().live();
    let _ = build(&mut b, x);
    let _ = build(&mut b, x);
    assert!(call(&mut b, x, Command::AllocUar).is_ok());
    assert_eq!(call(&mut b, x, Command::AllocUar), Err(Refusal::Again));
    let held = b.remove_domain(x);
    assert_eq!((held.pds, held.mrs, held.cqs, held.qps), (2, 2, 2, 2));
    assert_eq!(b.device().live(), live_y, "only y's resources are left");
    assert_eq!(b.held(x), Held::default());
    assert_eq!(call(&mut b, x, Command::AllocPd), Err(Refusal::NotOpen));
    // y goes on.
    assert!(call(&mut b, y, Command::DestroyQp { qp: mine.qp }).is_ok());
    assert!(call(&mut b, y, Command::DestroyCq { cq: mine.cq }).is_ok());
}

fn ring(b: &B, d: DomainId) -> (GuestRing, BackendRing, u64) {
    let at = BASE + 0x8_0000;
    let g = GuestRing::init(b.memory(d).unwrap(), at).unwrap();
    let r = BackendRing::attach(b, d, at).unwrap();
    (g, r, at)
}

#[test]
fn the_ring_carries_commands_and_responses() {
    let (mut b, x, _) = backend(Limits::default());
    let (mut g, mut r, _) = ring(&b, x);
    for i in 0..3 {
        assert!(g.push(b.memory(x).unwrap(), &Command::AllocPd.encode(i)));
    }
    assert_eq!(r.service(&mut b), Ok(3));
    for i in 0..3 {
        let rsp = Response::decode(&g.pop(b.memory(x).unwrap()).unwrap()).unwrap();
        assert_eq!(rsp.seq, i);
        assert!(rsp.result.is_ok());
    }
    assert!(g.pop(b.memory(x).unwrap()).is_none());
    assert_eq!(b.held(x).pds, 3);
    // More than a ring's worth, in turns.
    for round in 0..3 {
        let mut n = 0;
        while g.push(b.memory(x).unwrap(), &Command::QueryDevice.encode(n)) {
            n += 1;
        }
        assert_eq!(n, SLOTS, "round {round}");
        assert_eq!(r.service(&mut b), Ok(SLOTS as usize));
        while g.pop(b.memory(x).unwrap()).is_some() {}
    }
}

#[test]
fn a_ring_outside_the_guests_memory_is_refused() {
    let (b, x, _) = backend(Limits::default());
    for at in [0, BASE + SIZE as u64 - 100, u64::MAX - 10] {
        assert_eq!(
            BackendRing::attach(&b, x, at).err(),
            Some(Refusal::BadAddress),
            "{at:#x}"
        );
    }
}

#[test]
fn pvrdma_a_ring_of_garbage_is_answered_and_always_advances() {
    let (mut b, x, _) = backend(Limits::default());
    let (mut g, mut r, at) = ring(&b, x);
    let mem = b.memory(x).unwrap();
    // Fill every request slot with bytes that are no command.
    mem.write_slice(&[0xA5u8; 64 * SLOTS as usize], GuestAddress(at + 64))
        .unwrap();
    GuestRing::poke_indices(mem, at, SLOTS, 0);
    assert_eq!(r.service(&mut b), Ok(SLOTS as usize));
    assert_eq!(b.stats.refused, u64::from(SLOTS));
    // Each got its response, Malformed, and the consumer moved past all of
    // them: the ring takes new requests.
    let mut answered = 0;
    while let Some(rsp) = g.pop(b.memory(x).unwrap()) {
        assert_eq!(
            Response::decode(&rsp).unwrap().result,
            Err(Refusal::Malformed)
        );
        answered += 1;
    }
    assert_eq!(answered, SLOTS);
    // The guest's own producer index is behind what it poked; catch it up
    // the way a frontend recovering would, by re-initialising its end.
    let mut g2 = GuestRing::init(b.memory(x).unwrap(), at + 0x4000).unwrap();
    let mut r2 = BackendRing::attach(&b, x, at + 0x4000).unwrap();
    assert!(g2.push(b.memory(x).unwrap(), &Command::AllocPd.encode(1)));
    assert_eq!(r2.service(&mut b), Ok(1));
    assert!(g2.pop(b.memory(x).unwrap()).is_some());
    assert_eq!(r.service(&mut b), Ok(0), "nothing new on the first ring");
}

#[test]
fn ring_indices_out_of_range_stop_that_ring_only() {
    let (mut b, x, y) = backend(Limits::default());
    let (_, mut rx, at) = ring(&b, x);
    let (mut gy, mut ry, _) = ring(&b, y);
    // A producer claiming more than the ring holds.
    GuestRing::poke_indices(b.memory(x).unwrap(), at, SLOTS + 1, 0);
    assert_eq!(rx.service(&mut b), Err(Refusal::RingBroken));
    assert!(rx.is_broken());
    // And it stays stopped, even with sane indices again.
    GuestRing::poke_indices(b.memory(x).unwrap(), at, 0, 0);
    assert_eq!(rx.service(&mut b), Err(Refusal::RingBroken));
    assert_eq!(b.held(x), Held::default());
    // y is served.
    assert!(gy.push(b.memory(y).unwrap(), &Command::AllocPd.encode(3)));
    assert_eq!(ry.service(&mut b), Ok(1));
    assert!(gy.pop(b.memory(y).unwrap()).is_some());

    // A consumer index ahead of the responses breaks a ring too.
    let (mut b, x, _) = backend(Limits::default());
    let (_, mut rx, at) = ring(&b, x);
    GuestRing::poke_indices(b.memory(x).unwrap(), at, 0, 1000);
    assert_eq!(rx.service(&mut b), Err(Refusal::RingBroken));
}

#[test]
fn the_shipped_hostile_frontend_finds_every_attack_refused() {
    use vhca::test_utils::Hostile;
    let mut b: B = Backend::new(SoftHca::new(1));
    let limits = Limits {
        reg_bytes: 4 << 20,
        ..Limits::default()
    };
    let report = Hostile::on_new_domains(&mut b, memory, (BASE, SIZE as u64), limits);
    assert!(report.attempts.len() >= 18, "{report:#?}");
    // Refused, the victim untouched and still working, nothing leaked.
    report.assert_all_refused();
}

#[test]
fn the_hostile_frontend_reports_an_attack_that_gets_through() {
    use vhca::test_utils::Hostile;
    // Misconfigured on purpose: the "victim" is the attacker itself, so
    // "another domain's PD" is its own and is accepted. The report must say so.
    let mut b: B = Backend::new(SoftHca::new(1));
    let d = b.add_domain(memory(), Limits::default(), PortView::default());
    assert_eq!(call(&mut b, d, Command::OpenDevice), Ok([0; 7]));
    let report = Hostile::new(d, d, (BASE, SIZE as u64)).run(&mut b);
    let own = report
        .attempts
        .iter()
        .find(|a| a.name == "another domain's PD")
        .expect("attempted");
    assert!(!own.safe, "{own:?}");
    assert!(std::panic::catch_unwind(|| report.assert_all_refused()).is_err());
}
