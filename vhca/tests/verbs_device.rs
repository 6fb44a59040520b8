//! vhca over a real HCA ([`VerbsHca`]): two guests on one device exchange
//! RC messages, RDMA-write and RDMA-read each other's memory and send UD
//! datagrams, with the HCA checking keys and ranges, and no command per
//! message. Skipped where there is no RDMA device; `scripts/rxe-vm` runs
//! it on a soft-RoCE device (and CI does, with IBKIT_REQUIRE_RDMA set).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use vhca::backend::{Limits, PortView};
use vhca::channel::{Direct, Hub};
use vhca::device::verbs::VerbsHca;
use vhca::frontend::{Context, SendWr, Transport, Wc};
use vhca::layout::{op, status};
use vhca::proto::{access, QpType};
use vhca::test_utils::MockGuest;
use vm_memory::GuestMemoryMmap;

type Hca = VerbsHca<GuestMemoryMmap>;
const MEM: usize = 8 << 20;

fn device() -> Option<Hca> {
    match VerbsHca::open_any() {
        Ok(h) => Some(h),
        Err(e) => {
            assert!(
                std::env::var_os("IBKIT_REQUIRE_RDMA").is_none(),
                "an RDMA device was required: {e}"
            );
            eprintln!("SKIPPED: {e}");
            None
        }
    }
}

fn hub(h: Hca) -> (Arc<Hub<Hca>>, thread::JoinHandle<()>) {
    let hub = Hub::new(h).unwrap();
    let h = hub.clone();
    (hub, thread::spawn(move || h.run_device()))
}

fn open(hub: &Arc<Hub<Hca>>, lid: u16) -> Context<Direct<Hca>> {
    let port = PortView {
        lid,
        port_guid: 0x0002_c903_0000_0100 + u64::from(lid),
        state: 4,
    };
    let (t, mem, lay) = hub.attach(MEM, Limits::default(), port).unwrap();
    Context::open(t, mem, lay).unwrap()
}

/// The guest's next completion; the test fails after 10 s without one.
fn wait_one<T: Transport>(g: &mut MockGuest<T>) -> Wc {
    g.completion(Duration::from_secs(10))
        .expect("no completion")
}

#[test]
fn two_guests_on_a_real_hca_talk_rc_and_rdma_with_keys_checked_by_the_hca() {
    let Some(h) = device() else { return };
    let (hub, t) = hub(h);
    let mut a = MockGuest::new(open(&hub, 5), QpType::Rc, 1 << 20).unwrap();
    let mut b = MockGuest::new(open(&hub, 6), QpType::Rc, 1 << 20).unwrap();
    MockGuest::connect(&mut a, &mut b).unwrap();
    let before = (a.ctx.commands(), b.ctx.commands());
    for i in 0..50u32 {
        let msg: Vec<u8> = (0..300).map(|j| (i * 7 + j) as u8).collect();
        a.ctx.write(a.buf, &msg).unwrap();
        let (lkey, buf) = (b.mr.lkey, b.buf + 4096);
        b.ctx
            .post_recv(&mut b.qp, u64::from(i), lkey, buf, 4096)
            .unwrap();
        a.post_at(op::SEND, 0, 300, 0, 0).unwrap();
        let r = wait_one(&mut b);
        assert_eq!(
            (r.status, r.opcode, r.byte_len, r.wr_id),
            (status::SUCCESS, op::RECV, 300, u64::from(i))
        );
        assert_eq!(r.qp_num, b.qp.qpn);
        let s = wait_one(&mut a);
        assert_eq!((s.status, s.opcode), (status::SUCCESS, op::SEND));
        let mut got = vec![0u8; 300];
        b.ctx.read(b.buf + 4096, &mut got).unwrap();
        assert_eq!(got, msg, "message {i}");
    }
    assert_eq!(
        (a.ctx.commands(), b.ctx.commands()),
        before,
        "the data path sent commands"
    );

    // RDMA write into b at +8192, read back into a at +4096.
    a.ctx.write(a.buf, &[0xAB; 1024]).unwrap();
    a.post_at(op::RDMA_WRITE, 0, 1024, b.mr.rkey, b.buf + 8192)
        .unwrap();
    assert_eq!(wait_one(&mut a).status, status::SUCCESS);
    let mut got = [0u8; 1024];
    b.ctx.read(b.buf + 8192, &mut got).unwrap();
    assert_eq!(got, [0xAB; 1024]);
    a.post_at(op::RDMA_READ, 4096, 1024, b.mr.rkey, b.buf + 8192)
        .unwrap();
    assert_eq!(wait_one(&mut a).status, status::SUCCESS);
    let mut back = [0u8; 1024];
    a.ctx.read(a.buf + 4096, &mut back).unwrap();
    assert_eq!(back, [0xAB; 1024]);

    // Past the end of b's region: the HCA refuses it at b, nothing lands,
    // and a's QP is in error, so what follows is flushed.
    let edge = b.buf + (1 << 20) - 512;
    a.post_at(op::RDMA_WRITE, 0, 1024, b.mr.rkey, edge).unwrap();
    assert_eq!(wait_one(&mut a).status, status::REM_ACCESS_ERR);
    let mut tail = [0u8; 512];
    b.ctx.read(b.buf + (1 << 20) - 512, &mut tail).unwrap();
    assert_eq!(tail, [0u8; 512]);
    a.post_at(op::RDMA_WRITE, 0, 8, b.mr.rkey, b.buf).unwrap();
    assert_eq!(wait_one(&mut a).status, status::WR_FLUSH_ERR);

    // Another guest's region, named as a local key: another PD, refused.
    let (mut c, mut d) = (
        MockGuest::new(open(&hub, 7), QpType::Rc, 1 << 20).unwrap(),
        MockGuest::new(open(&hub, 8), QpType::Rc, 1 << 20).unwrap(),
    );
    MockGuest::connect(&mut c, &mut d).unwrap();
    let wr = SendWr {
        opcode: op::RDMA_WRITE,
        signaled: true,
        lkey: d.mr.lkey,
        addr: d.buf,
        len: 64,
        rkey: d.mr.rkey,
        remote_addr: d.buf + 4096,
        ..Default::default()
    };
    c.ctx.post_send(&mut c.qp, &wr).unwrap();
    // Hardware says LOC_PROT_ERR; rxe says LOC_QP_OP_ERR. Nothing moves.
    let st = wait_one(&mut c).status;
    assert!(
        st == status::LOC_PROT_ERR || st == status::LOC_QP_OP_ERR,
        "status {st}"
    );
    let mut untouched = [0u8; 64];
    d.ctx.read(d.buf + 4096, &mut untouched).unwrap();
    assert_eq!(untouched, [0u8; 64]);
    // A region without remote rights: refused at the peer.
    let (mut e, mut f) = (
        MockGuest::new(open(&hub, 9), QpType::Rc, 1 << 20).unwrap(),
        MockGuest::new(open(&hub, 10), QpType::Rc, 1 << 20).unwrap(),
    );
    MockGuest::connect(&mut e, &mut f).unwrap();
    let local_only = f
        .ctx
        .reg_mr(f.pd, f.buf, 4096, access::LOCAL_WRITE)
        .unwrap();
    e.post_at(op::RDMA_WRITE, 0, 64, local_only.lkey, f.buf)
        .unwrap();
    assert_eq!(wait_one(&mut e).status, status::REM_ACCESS_ERR);

    drop((a, b, c, d, e, f));
    assert_eq!(
        hub.backend().device().live(),
        0,
        "teardown leaked objects on the HCA"
    );
    hub.stop();
    t.join().unwrap();
}

#[test]
fn ud_datagrams_between_guests_on_a_real_hca() {
    let Some(h) = device() else { return };
    let (hub, t) = hub(h);
    let mut a = MockGuest::new(open(&hub, 5), QpType::Ud, 1 << 20).unwrap();
    let mut b = MockGuest::new(open(&hub, 6), QpType::Ud, 1 << 20).unwrap();
    a.ctx.ready(&a.qp, 0, 0).unwrap();
    b.ctx.ready(&b.qp, 0, 0).unwrap();
    let (lkey, buf) = (b.mr.lkey, b.buf);
    for i in 0..20u64 {
        b.ctx.post_recv(&mut b.qp, i, lkey, buf, 1024 + 40).unwrap();
        let text = format!("datagram {i} over a real HCA");
        a.ctx.write(a.buf, text.as_bytes()).unwrap();
        let wr = SendWr {
            wr_id: 100 + i,
            opcode: op::SEND,
            signaled: true,
            lkey: a.mr.lkey,
            addr: a.buf,
            len: text.len() as u32,
            dest_qpn: b.qp.qpn,
            dlid: b.lid,
            ..Default::default()
        };
        a.ctx.post_send(&mut a.qp, &wr).unwrap();
        let r = wait_one(&mut b);
        assert_eq!(
            (r.status, r.wr_id, r.byte_len, r.src_qp),
            (status::SUCCESS, i, text.len() as u32 + 40, a.qp.qpn)
        );
        let mut got = vec![0u8; text.len()];
        b.ctx.read(buf + 40, &mut got).unwrap();
        assert_eq!(got, text.as_bytes());
        assert_eq!(wait_one(&mut a).wr_id, 100 + i);
    }
    drop((a, b));
    assert_eq!(hub.backend().device().live(), 0);
    hub.stop();
    t.join().unwrap();
}

/// Two backends on one HCA, as two hosts would be: a message from a guest
/// of one reaches a guest of the other while the second's device loop
/// sleeps. The HCA's completion channel wakes the loop; without it the loop
/// would find the completion only at its next 20 ms timeout.
#[test]
fn a_sleeping_device_loop_wakes_on_the_hcas_completion() {
    let (Some(h1), Some(h2)) = (device(), device()) else {
        return;
    };
    let gid = h1.gid();
    let (hub1, t1) = hub(h1);
    let (hub2, t2) = hub(h2);
    let mut b = MockGuest::new(open(&hub1, 6), QpType::Rc, 1 << 20).unwrap();
    let mut a = MockGuest::new(open(&hub2, 5), QpType::Rc, 1 << 20).unwrap();
    hub1.backend().device_mut().add_peer(5, gid);
    hub2.backend().device_mut().add_peer(6, gid);
    MockGuest::connect(&mut a, &mut b).unwrap();
    let mut took = Vec::new();
    for i in 0..15u64 {
        let (lkey, buf) = (b.mr.lkey, b.buf);
        b.ctx.post_recv(&mut b.qp, i, lkey, buf, 4096).unwrap();
        // Let b's loop post the receive, then fall asleep.
        thread::sleep(Duration::from_millis(15));
        hub1.rest();
        thread::sleep(Duration::from_millis(5));
        let t0 = Instant::now();
        a.post_at(op::SEND, 0, 64, 0, 0).unwrap();
        let r = wait_one(&mut b);
        took.push(t0.elapsed());
        assert_eq!((r.status, r.wr_id), (status::SUCCESS, i));
        assert_eq!(wait_one(&mut a).status, status::SUCCESS);
    }
    took.sort();
    let median = took[took.len() / 2];
    let wakes = hub1.device_wakes();
    eprintln!("to a sleeping loop: {wakes} wake-ups by the HCA, median {median:?}, all {took:?}");
    // Each message found b's loop asleep; most should have been ended by
    // the completion channel (a few may land while the loop re-checks).
    assert!(
        wakes >= 10,
        "the HCA woke the sleeping loop {wakes} times for 15 messages"
    );
    drop((a, b));
    for (h, t) in [(hub1, t1), (hub2, t2)] {
        assert_eq!(h.backend().device().live(), 0);
        h.stop();
        t.join().unwrap();
    }
}

/// The vhost-user-style driver (unix socket, memfd guest memory, epoll)
/// over the real HCA: two guests set up, exchange messages, block on a
/// completion event, and are torn down when they hang up, leaving nothing
/// on the HCA.
#[test]
fn the_socket_driver_serves_guests_on_a_real_hca() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use vhca::channel::{Driver, Socket};
    let Some(h) = device() else { return };
    let dir = std::env::temp_dir().join(format!("vhca-verbs-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("sock");
    let _ = std::fs::remove_file(&path);
    let mut lids = 20u16..;
    let mut driver = Driver::new(
        h,
        &path,
        Limits::default(),
        Box::new(move |_| PortView {
            lid: lids.next().unwrap_or(1),
            port_guid: 0x0002_c903_0000_0200,
            state: 4,
        }),
    )
    .unwrap();
    let stats = driver.stats.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = thread::spawn(move || {
        driver.run(&s2).unwrap();
        driver
    });
    let connect = |p: &std::path::Path| {
        let (s, mem, lay) = Socket::connect(p, MEM).unwrap();
        MockGuest::new(Context::open(s, mem, lay).unwrap(), QpType::Rc, 1 << 20).unwrap()
    };
    let mut a = connect(&path);
    let mut b = connect(&path);
    MockGuest::connect(&mut a, &mut b).unwrap();
    let before = a.ctx.commands() + b.ctx.commands();
    for i in 0..30 {
        let (lkey, buf) = (b.mr.lkey, b.buf);
        b.ctx.post_recv(&mut b.qp, i, lkey, buf, 64).unwrap();
        a.post_at(op::SEND, 0, 32, 0, 0).unwrap();
        assert_eq!(wait_one(&mut b).wr_id, i);
        assert_eq!(wait_one(&mut a).status, status::SUCCESS);
    }
    assert_eq!(a.ctx.commands() + b.ctx.commands(), before);
    // b blocks on its event channel; a sends a little later.
    let (lkey, buf) = (b.mr.lkey, b.buf);
    b.ctx.post_recv(&mut b.qp, 99, lkey, buf, 64).unwrap();
    let sender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        a.post_at(op::SEND, 0, 8, 0, 0).unwrap();
        wait_one(&mut a);
        a
    });
    let mut wc = [Wc::default(); 1];
    let n = b
        .ctx
        .wait_cq(&mut b.cq, &mut wc, Duration::from_secs(10))
        .unwrap();
    assert_eq!((n, wc[0].wr_id, wc[0].status), (1, 99, status::SUCCESS));
    let a = sender.join().unwrap();
    drop((a, b));
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats.gone.load(Ordering::Relaxed) < 2 {
        assert!(Instant::now() < deadline, "guests not torn down");
        thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let driver = t.join().unwrap();
    assert_eq!(driver.backend().device().live(), 0, "left on the HCA");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The data-path attacker of the software HCA's fuzz target, against the
/// real HCA: garbage and aimed work requests from one guest never write
/// its peer outside the region the peer registered (the HCA checks every
/// key and range), and its teardown leaves nothing of it on the HCA.
#[test]
fn hostile_queue_contents_are_stopped_by_the_hca() {
    use vhca::test_utils::{hostile_data_path_on, hostile_queue};
    if device().is_none() {
        return;
    }
    for i in 0..100 {
        let hub = Hub::new(VerbsHca::open_any().unwrap()).unwrap();
        hostile_data_path_on(&hub, |t| hostile_queue(i, &t), Duration::from_millis(20));
    }
}

/// The shipped hostile frontend against a backend over the real HCA: every
/// attack is refused, the victim is untouched and keeps working, and the
/// attacker leaves nothing on the HCA.
#[test]
fn the_shipped_hostile_frontend_finds_every_attack_refused_on_a_real_hca() {
    use vhca::backend::Backend;
    use vhca::test_utils::Hostile;
    use vm_memory::GuestAddress;
    let Some(h) = device() else { return };
    const BASE: u64 = 0x10_0000;
    const SIZE: usize = 1 << 20;
    let memory = || GuestMemoryMmap::from_ranges(&[(GuestAddress(BASE), SIZE)]).unwrap();
    let limits = Limits {
        reg_bytes: 4 << 20,
        ..Limits::default()
    };
    let report = Hostile::on_new_domains(&mut Backend::new(h), memory, (BASE, SIZE as u64), limits);
    assert!(report.attempts.len() >= 18, "{report:#?}");
    report.assert_all_refused();
}

/// A guest that never drains a small CQ: the real CQ overruns, the HCA
/// raises an async event, and the guest is told on its event channel.
#[test]
fn a_real_cq_overrun_reaches_its_guest() {
    use vhca::layout::event;
    let Some(h) = device() else { return };
    let (hub, t) = hub(h);
    let mut a = MockGuest::new(open(&hub, 5), QpType::Rc, 1 << 20).unwrap();
    let mut b = MockGuest::new(open(&hub, 6), QpType::Rc, 1 << 20).unwrap();
    let small = a.ctx.create_cq(4).unwrap();
    let qp = a
        .ctx
        .create_qp(a.pd, QpType::Rc, &small, &small, 64, 4)
        .unwrap();
    let mut qp = qp;
    a.ctx.ready(&qp, b.qp.qpn, b.lid).unwrap();
    b.ctx.ready(&b.qp, qp.qpn, a.lid).unwrap();
    for i in 0..48u64 {
        let wr = SendWr {
            wr_id: i,
            opcode: op::RDMA_WRITE,
            signaled: true,
            lkey: a.mr.lkey,
            addr: a.buf,
            len: 8,
            rkey: b.mr.rkey,
            remote_addr: b.buf,
            ..Default::default()
        };
        a.ctx.post_send(&mut qp, &wr).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        if let Some(e) = a.ctx.next_event(Duration::from_millis(50)) {
            seen.push((e.kind, e.handle));
            if e.kind == event::CQ_OVERRUN {
                assert_eq!(e.handle, small.handle);
                break;
            }
        }
    }
    assert!(
        seen.iter().any(|&(k, _)| k == event::CQ_OVERRUN),
        "no overrun event; saw {seen:?}"
    );
    // One event, however many times the HCA reports the overrun.
    thread::sleep(Duration::from_millis(100));
    while let Some(e) = a.ctx.next_event(Duration::ZERO) {
        assert_ne!(e.kind, event::CQ_OVERRUN, "a second overrun event");
    }
    drop((a, b));
    assert_eq!(hub.backend().device().live(), 0);
    hub.stop();
    t.join().unwrap();
}
