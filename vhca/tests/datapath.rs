//! The data path end to end: two guests on one software HCA exchange
//! messages over RC and UD, RDMA-write and RDMA-read each other's memory,
//! with every key checked, completions in their CQ buffers and events on
//! their event channels — and no command crossing to the backend per
//! message.

use std::sync::Arc;
use std::thread;
use std::time::Duration;
use vhca::backend::{Limits, PortView};
use vhca::channel::{Direct, Driver, Hub, Socket};
use vhca::device::SoftHca;
use vhca::frontend::{Context, SendWr, Transport, Wc};
use vhca::layout::{event, op, status};
use vhca::proto::{access, QpType};
use vhca::test_utils::MockGuest;
use vm_memory::GuestMemoryMmap;

type Soft = SoftHca<GuestMemoryMmap>;
const MEM: usize = 8 << 20;
const T: Duration = Duration::from_secs(5);

fn port(lid: u16) -> PortView {
    PortView {
        lid,
        port_guid: 0x0002_c903_0000_0100 + u64::from(lid),
        state: 4,
    }
}

type Guest<T> = MockGuest<T>;

fn guest<T: Transport>(ctx: Context<T>, qp_type: QpType) -> Guest<T> {
    MockGuest::new(ctx, qp_type, 1 << 20).unwrap()
}

fn hub() -> (Arc<Hub<Soft>>, thread::JoinHandle<()>) {
    let hub = Hub::new(SoftHca::new(0x0002_c903_0000_0001)).unwrap();
    let h = hub.clone();
    let t = thread::spawn(move || h.run_device());
    (hub, t)
}

fn open(hub: &Arc<Hub<Soft>>, lid: u16) -> Context<Direct<Soft>> {
    let (t, mem, lay) = hub.attach(MEM, Limits::default(), port(lid)).unwrap();
    Context::open(t, mem, lay).unwrap()
}

fn wait_one<T: Transport>(g: &mut Guest<T>) -> Wc {
    let mut wc = [Wc::default(); 1];
    let deadline = std::time::Instant::now() + T;
    loop {
        if g.ctx.poll_cq(&mut g.cq, &mut wc).unwrap() == 1 {
            return wc[0];
        }
        assert!(std::time::Instant::now() < deadline, "no completion");
        std::hint::spin_loop();
    }
}

fn send<T: Transport>(g: &mut Guest<T>, opcode: u8, off: u64, len: u32, rkey: u32, raddr: u64) {
    let wr = SendWr {
        wr_id: 0x5000 + off,
        opcode,
        signaled: true,
        lkey: g.mr.lkey,
        addr: g.buf + off,
        len,
        rkey,
        remote_addr: raddr,
        ..Default::default()
    };
    g.ctx.post_send(&mut g.qp, &wr).unwrap();
}

const RW: u32 = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;

fn connected(hub: &Arc<Hub<Soft>>) -> (Guest<Direct<Soft>>, Guest<Direct<Soft>>) {
    let mut a = guest(open(hub, 5), QpType::Rc);
    let mut b = guest(open(hub, 6), QpType::Rc);
    MockGuest::connect(&mut a, &mut b).unwrap();
    (a, b)
}

#[test]
fn rc_send_moves_the_bytes_and_crosses_no_command() {
    let (hub, t) = hub();
    let (mut a, mut b) = connected(&hub);
    let before = (a.ctx.commands(), b.ctx.commands());
    for i in 0..100u32 {
        let msg: Vec<u8> = (0..300).map(|j| (i + j) as u8).collect();
        a.ctx.write(a.buf, &msg).unwrap();
        let (lkey, buf) = (b.mr.lkey, b.buf + 4096);
        b.ctx
            .post_recv(&mut b.qp, u64::from(i), lkey, buf, 4096)
            .unwrap();
        send(&mut a, op::SEND, 0, 300, 0, 0);
        let r = wait_one(&mut b);
        assert_eq!(
            (r.status, r.opcode, r.byte_len),
            (status::SUCCESS, op::RECV, 300)
        );
        assert_eq!((r.wr_id, r.src_qp, r.slid), (u64::from(i), a.qp.qpn, a.lid));
        let s = wait_one(&mut a);
        assert_eq!(
            (s.status, s.opcode, s.wr_id),
            (status::SUCCESS, op::SEND, 0x5000)
        );
        let mut got = vec![0u8; 300];
        b.ctx.read(b.buf + 4096, &mut got).unwrap();
        assert_eq!(got, msg);
    }
    assert_eq!(
        (a.ctx.commands(), b.ctx.commands()),
        before,
        "the data path sent commands"
    );
    drop((a, b));
    assert_eq!(
        hub.backend().device().live(),
        0,
        "teardown leaked device objects"
    );
    hub.stop();
    t.join().unwrap();
}

#[test]
fn rdma_write_and_read_need_the_right_key_rights_and_range() {
    let (hub, t) = hub();
    let (mut a, b) = connected(&hub);
    // Write 1 KiB into b's buffer at +8192.
    a.ctx.write(a.buf, &[0xAB; 1024]).unwrap();
    send(&mut a, op::RDMA_WRITE, 0, 1024, b.mr.rkey, b.buf + 8192);
    assert_eq!(wait_one(&mut a).status, status::SUCCESS);
    let mut got = [0u8; 1024];
    b.ctx.read(b.buf + 8192, &mut got).unwrap();
    assert_eq!(got, [0xAB; 1024]);
    // Read it back into a's buffer at +4096.
    send(&mut a, op::RDMA_READ, 4096, 1024, b.mr.rkey, b.buf + 8192);
    assert_eq!(wait_one(&mut a).status, status::SUCCESS);
    a.ctx.read(a.buf + 4096, &mut got).unwrap();
    assert_eq!(got, [0xAB; 1024]);
    // Past the end of b's region: refused at the remote end, nothing written.
    send(
        &mut a,
        op::RDMA_WRITE,
        0,
        1024,
        b.mr.rkey,
        b.buf + (1 << 20) - 512,
    );
    assert_eq!(wait_one(&mut a).status, status::REM_ACCESS_ERR);
    let mut tail = [0u8; 512];
    b.ctx.read(b.buf + (1 << 20) - 512, &mut tail).unwrap();
    assert_eq!(tail, [0u8; 512]);
    // The QP is in error now: what follows is flushed.
    send(&mut a, op::RDMA_WRITE, 0, 8, b.mr.rkey, b.buf);
    assert_eq!(wait_one(&mut a).status, status::WR_FLUSH_ERR);
    drop((a, b));
    hub.stop();
    t.join().unwrap();
}

#[test]
fn keys_of_another_pd_another_guest_or_without_rights_are_refused() {
    let (hub, t) = hub();
    // b registers its buffer with local rights only.
    let (mut a, mut b) = connected(&hub);
    let local_only = b
        .ctx
        .reg_mr(b.pd, b.buf, 4096, access::LOCAL_WRITE)
        .unwrap();
    assert_eq!(local_only.rkey, 0);
    send(&mut a, op::RDMA_WRITE, 0, 64, local_only.lkey, b.buf);
    assert_eq!(wait_one(&mut a).status, status::REM_ACCESS_ERR);

    // A key of another PD of the same guest, as a local key.
    let (mut a, b2) = connected(&hub);
    let pd2 = a.ctx.alloc_pd().unwrap();
    let other = a.ctx.reg_mr(pd2, a.buf, 4096, RW).unwrap();
    let wr = SendWr {
        opcode: op::RDMA_WRITE,
        signaled: true,
        lkey: other.lkey,
        addr: a.buf,
        len: 64,
        rkey: b2.mr.rkey,
        remote_addr: b2.buf,
        ..Default::default()
    };
    a.ctx.post_send(&mut a.qp, &wr).unwrap();
    assert_eq!(wait_one(&mut a).status, status::LOC_PROT_ERR);

    // Another guest's key, as a local key.
    let (mut a, b3) = connected(&hub);
    let wr = SendWr {
        opcode: op::RDMA_WRITE,
        signaled: true,
        lkey: b3.mr.lkey,
        addr: b3.buf,
        len: 64,
        rkey: b3.mr.rkey,
        remote_addr: b3.buf + 4096,
        ..Default::default()
    };
    a.ctx.post_send(&mut a.qp, &wr).unwrap();
    assert_eq!(wait_one(&mut a).status, status::LOC_PROT_ERR);
    drop((a, b, b2, b3));
    hub.stop();
    t.join().unwrap();
}

#[test]
fn ud_delivers_by_qpn_and_lid_with_grh_room() {
    let (hub, t) = hub();
    let mut a = guest(open(&hub, 5), QpType::Ud);
    let mut b = guest(open(&hub, 6), QpType::Ud);
    a.ctx.ready(&a.qp, 0, 0).unwrap();
    b.ctx.ready(&b.qp, 0, 0).unwrap();
    let (lkey, buf) = (b.mr.lkey, b.buf);
    b.ctx.post_recv(&mut b.qp, 9, lkey, buf, 4096 + 40).unwrap();
    a.ctx.write(a.buf, b"hello over UD").unwrap();
    let mut wr = SendWr {
        wr_id: 1,
        opcode: op::SEND,
        signaled: true,
        lkey: a.mr.lkey,
        addr: a.buf,
        len: 13,
        dest_qpn: b.qp.qpn,
        dlid: b.lid,
        ..Default::default()
    };
    a.ctx.post_send(&mut a.qp, &wr).unwrap();
    let r = wait_one(&mut b);
    assert_eq!(
        (r.status, r.byte_len, r.src_qp, r.slid),
        (0, 13 + 40, a.qp.qpn, 5)
    );
    let mut got = [0u8; 13];
    b.ctx.read(buf + 40, &mut got).unwrap();
    assert_eq!(&got, b"hello over UD");
    assert_eq!(wait_one(&mut a).status, status::SUCCESS);
    // The wrong LID: the datagram is gone, the sender still completes.
    wr.dlid = 99;
    wr.wr_id = 2;
    b.ctx
        .post_recv(&mut b.qp, 10, lkey, buf, 4096 + 40)
        .unwrap();
    a.ctx.post_send(&mut a.qp, &wr).unwrap();
    assert_eq!(wait_one(&mut a).wr_id, 2);
    let mut wc = [Wc::default(); 1];
    thread::sleep(Duration::from_millis(20));
    assert_eq!(b.ctx.poll_cq(&mut b.cq, &mut wc).unwrap(), 0);
    // Larger than the MTU: a local length error.
    wr.dlid = b.lid;
    wr.len = 4097;
    a.ctx.post_send(&mut a.qp, &wr).unwrap();
    assert_eq!(wait_one(&mut a).status, status::LOC_LEN_ERR);
    drop((a, b));
    hub.stop();
    t.join().unwrap();
}

#[test]
fn completion_events_arrive_on_the_event_channel_batched() {
    let (hub, t) = hub();
    let (a, mut b) = connected(&hub);
    // Blocking receive: arm, wait for the event.
    let (lkey, buf) = (b.mr.lkey, b.buf);
    b.ctx.post_recv(&mut b.qp, 1, lkey, buf, 64).unwrap();
    let sender = thread::spawn(move || {
        let mut a = a;
        thread::sleep(Duration::from_millis(30));
        send(&mut a, op::SEND, 0, 8, 0, 0);
        wait_one(&mut a);
        a
    });
    let mut wc = [Wc::default(); 4];
    let n = b.ctx.wait_cq(&mut b.cq, &mut wc, T).unwrap();
    assert_eq!((n, wc[0].wr_id), (1, 1));
    let a = sender.join().unwrap();
    assert!(hub.backend().stats.notifications >= 1, "no notification");
    drop((a, b));
    hub.stop();
    t.join().unwrap();
}

#[test]
fn events_of_one_pass_share_one_notification_and_an_arm_fires_once() {
    // No device thread: the test runs the device pass by pass.
    let hub = Hub::new(SoftHca::new(1)).unwrap();
    let mut a = guest(open(&hub, 5), QpType::Rc);
    let (t, mem, lay) = hub.attach(MEM, Limits::default(), port(6)).unwrap();
    let mut b = guest(Context::open(t, mem, lay).unwrap(), QpType::Rc);
    // What b's frontend does before it sleeps: ask to be notified.
    let sleeping = |b: &Guest<_>, on: bool| {
        b.ctx
            .write(lay.event_base + 12, &u32::from(on).to_le_bytes())
            .unwrap()
    };
    // b gets a second QP on a second CQ, connected to a second QP of a.
    let mut cq2 = b.ctx.create_cq(16).unwrap();
    let mut qb2 = b.ctx.create_qp(b.pd, QpType::Rc, &cq2, &cq2, 8, 8).unwrap();
    let mut qa2 = a
        .ctx
        .create_qp(a.pd, QpType::Rc, &a.cq, &a.cq, 8, 8)
        .unwrap();
    a.ctx.ready(&a.qp, b.qp.qpn, b.lid).unwrap();
    b.ctx.ready(&b.qp, a.qp.qpn, a.lid).unwrap();
    a.ctx.ready(&qa2, qb2.qpn, b.lid).unwrap();
    b.ctx.ready(&qb2, qa2.qpn, a.lid).unwrap();
    let (lkey, buf) = (b.mr.lkey, b.buf);
    for i in 0..4 {
        b.ctx.post_recv(&mut b.qp, i, lkey, buf, 64).unwrap();
        b.ctx.post_recv(&mut qb2, 100 + i, lkey, buf, 64).unwrap();
    }
    b.ctx.arm_cq(&mut b.cq).unwrap();
    b.ctx.arm_cq(&mut cq2).unwrap();
    let wr = SendWr {
        opcode: op::SEND,
        lkey: a.mr.lkey,
        addr: a.buf,
        len: 8,
        ..Default::default()
    };
    for _ in 0..2 {
        a.ctx.post_send(&mut a.qp, &wr).unwrap();
        a.ctx.post_send(&mut qa2, &wr).unwrap();
    }
    let stats = hub.backend().stats;
    let mut notify = Vec::new();
    sleeping(&b, true);
    assert!(hub.backend().poll(&mut notify) > 0);
    let after = hub.backend().stats;
    // Four receive completions on two armed CQs: two events, one
    // notification, for b only (a's sends were unsignaled).
    assert_eq!(after.events - stats.events, 2);
    assert_eq!(after.notifications - stats.notifications, 1);
    assert_eq!(notify.len(), 1);
    sleeping(&b, false);
    let mut seen: Vec<_> = std::iter::from_fn(|| b.ctx.next_event(Duration::ZERO))
        .map(|e| (e.kind, e.handle))
        .collect();
    seen.sort();
    let mut want = vec![
        (event::COMPLETION, b.cq.handle),
        (event::COMPLETION, cq2.handle),
    ];
    want.sort();
    assert_eq!(seen, want);
    // Not re-armed: more completions, no more events.
    a.ctx.post_send(&mut a.qp, &wr).unwrap();
    notify.clear();
    sleeping(&b, true);
    hub.backend().poll(&mut notify);
    assert!(notify.is_empty());
    sleeping(&b, false);
    let mut wc = [Wc::default(); 8];
    assert_eq!(b.ctx.poll_cq(&mut b.cq, &mut wc).unwrap(), 3);
    assert_eq!(b.ctx.poll_cq(&mut cq2, &mut wc).unwrap(), 2);
    // A guest that polls its event ring is not notified: it sees the
    // event without the wake-up.
    b.ctx.arm_cq(&mut b.cq).unwrap();
    a.ctx.post_send(&mut a.qp, &wr).unwrap();
    let before = hub.backend().stats;
    notify.clear();
    hub.backend().poll(&mut notify);
    let after = hub.backend().stats;
    assert_eq!(
        (
            after.events - before.events,
            after.notifications - before.notifications
        ),
        (1, 0)
    );
    assert!(notify.is_empty());
    let e = b.ctx.next_event(Duration::ZERO).expect("published");
    assert_eq!(e.handle, b.cq.handle);
}

#[test]
fn a_producer_index_out_of_range_kills_that_qp_only() {
    let (hub, t) = hub();
    let (mut a, b) = connected(&hub);
    let (mut c, mut d) = connected(&hub);
    // a claims 1000 WQEs in a 64-entry send queue.
    hostile_sq_prod(&mut a, 1000);
    let e = a.ctx.next_event(T).expect("QP-fatal event");
    assert_eq!((e.kind, e.handle), (event::QP_FATAL, a.qp.handle));
    // The other pair keeps working.
    let (lkey, buf) = (d.mr.lkey, d.buf);
    d.ctx.post_recv(&mut d.qp, 7, lkey, buf, 64).unwrap();
    send(&mut c, op::SEND, 0, 8, 0, 0);
    assert_eq!(wait_one(&mut d).wr_id, 7);
    drop((a, b, c, d));
    hub.stop();
    t.join().unwrap();
}

/// Writes a send producer index the queue cannot hold and rings.
fn hostile_sq_prod<T: Transport>(g: &mut Guest<T>, prod: u32) {
    // The send producer is the first word of the QP buffer's header.
    g.ctx.write(g.qp.buffer(), &prod.to_le_bytes()).unwrap();
    g.ctx.ring_doorbell().unwrap();
}

#[test]
fn a_guest_in_another_process_style_channel_works_and_is_torn_down() {
    let dir = std::env::temp_dir().join(format!("vhca-test-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("sock");
    let _ = std::fs::remove_file(&path);
    let mut lids = 10u16..;
    let mut driver = Driver::new(
        SoftHca::<GuestMemoryMmap>::new(1),
        &path,
        Limits::default(),
        Box::new(move |_| port(lids.next().unwrap_or(1))),
    )
    .unwrap();
    let stats = driver.stats.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let t = thread::spawn(move || {
        driver.run(&s2).unwrap();
        driver
    });
    let open = |p: &std::path::Path| {
        let (s, mem, lay) = Socket::connect(p, MEM).unwrap();
        Context::open(s, mem, lay).unwrap()
    };
    let mut a = guest(open(&path), QpType::Rc);
    let mut b = guest(open(&path), QpType::Rc);
    assert_eq!((a.lid, b.lid), (10, 11));
    let (qa, qb, la, lb) = (a.qp.qpn, b.qp.qpn, a.lid, b.lid);
    a.ctx.ready(&a.qp, qb, lb).unwrap();
    b.ctx.ready(&b.qp, qa, la).unwrap();
    // Commands back to back find the driver still polling the ring (it
    // stays hot for HOT after its last work), so some of them need no
    // kick. A burst of 50 is retried a few times: on a loaded machine the
    // driver's thread can lose the CPU for longer than HOT, and then a
    // whole burst may kick; never in five bursts means it does not poll.
    for g in [&mut a, &mut b] {
        let mut seen = Vec::new();
        let polled = (0..5).any(|_| {
            let (k0, c0) = (g.ctx.transport().kicks(), g.ctx.transport().commands());
            for _ in 0..50 {
                g.ctx.query_port().unwrap();
            }
            let t = g.ctx.transport();
            let (k, c) = (t.kicks() - k0, t.commands() - c0);
            seen.push((k, c));
            k < c
        });
        assert!(
            polled,
            "every command kicked (kicks, commands per burst): {seen:?}"
        );
    }
    let before = a.ctx.commands() + b.ctx.commands();
    for i in 0..50 {
        let (lkey, buf) = (b.mr.lkey, b.buf);
        b.ctx.post_recv(&mut b.qp, i, lkey, buf, 64).unwrap();
        send(&mut a, op::SEND, 0, 32, 0, 0);
        assert_eq!(wait_one(&mut b).wr_id, i);
        wait_one(&mut a);
    }
    assert_eq!(a.ctx.commands() + b.ctx.commands(), before);
    // Blocking with events across processes.
    let (lkey, buf) = (b.mr.lkey, b.buf);
    b.ctx.post_recv(&mut b.qp, 99, lkey, buf, 64).unwrap();
    let sender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        send(&mut a, op::SEND, 0, 8, 0, 0);
        wait_one(&mut a);
        a
    });
    let mut wc = [Wc::default(); 1];
    assert_eq!(b.ctx.wait_cq(&mut b.cq, &mut wc, T).unwrap(), 1);
    assert_eq!(wc[0].wr_id, 99);
    let a = sender.join().unwrap();
    // The guests go away: the backend tears both down.
    drop(a);
    drop(b);
    let deadline = std::time::Instant::now() + T;
    while stats.gone.load(std::sync::atomic::Ordering::Relaxed) < 2 {
        assert!(std::time::Instant::now() < deadline, "guests not torn down");
        thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let driver = t.join().unwrap();
    assert_eq!(driver.backend().device().live(), 0);
    assert_eq!(driver.backend().device().contexts(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hostile_queue_contents_never_reach_the_peer_or_leak() {
    // The fuzz target's body on a few hundred inputs, some random, some
    // shaped like work requests with random fields aimed at the peer
    // region's edges.
    use vhca::test_utils::{hostile_data_path_on, hostile_queue};
    for i in 0..300 {
        let hub = Hub::new(SoftHca::<GuestMemoryMmap>::new(1)).unwrap();
        hostile_data_path_on(&hub, |t| hostile_queue(i, &t), Duration::ZERO);
    }
}

#[test]
fn sa_queries_are_served_with_each_guests_own_identity() {
    use vhca::mgmt::{Sa, SaRecord};
    let (hub, t) = hub();
    let rec = |lid: u16| SaRecord {
        lid,
        port_guid: port(lid).port_guid,
        node_guid: 0x0002_c903_0000_0001,
        subnet_prefix: 0xfe80_0000_0000_0000,
        node_type: 1,
    };
    hub.backend().set_sa(Sa {
        records: vec![rec(5), rec(6)],
    });
    let mut a = open(&hub, 5);
    let mut b = open(&hub, 6);
    let (dgid, sgid, dlid, slid) = a.path_to(6).unwrap();
    assert_eq!((dlid, slid), (6, 5));
    assert_eq!(dgid[8..], port(6).port_guid.to_be_bytes());
    assert_eq!(sgid[8..], port(5).port_guid.to_be_bytes(), "a's own GUID");
    let (_, sgid, _, slid) = b.path_to(5).unwrap();
    assert_eq!(
        (slid, &sgid[8..]),
        (6, &port(6).port_guid.to_be_bytes()[..])
    );
    // The guest's transaction ID comes back as it sent it.
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, 3, 2, 0x12]);
    m[8..16].copy_from_slice(&0xDEAD_BEEF_u64.to_be_bytes());
    m[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
    assert_eq!(a.sa_query(&mut m), Ok(0));
    assert_eq!(
        (m[3], &m[8..16]),
        (0x92, &0xDEAD_BEEF_u64.to_be_bytes()[..])
    );
    // No such LID: the SA's status, not a refusal.
    assert!(matches!(
        a.path_to(99),
        Err(vhca::frontend::Error::Sa(0x0300))
    ));
    // An SMP on QP 1 is refused.
    let mut smp = [0u8; 256];
    smp[..4].copy_from_slice(&[1, 0x81, 1, 1]);
    assert_eq!(
        a.sa_query(&mut smp),
        Err(vhca::frontend::Error::Refused(
            vhca::proto::Refusal::Forbidden
        ))
    );
    drop((a, b));
    hub.stop();
    t.join().unwrap();
}

#[test]
fn a_guest_that_garbles_its_event_ring_loses_only_its_own_events() {
    // No device thread: the test runs the device pass by pass.
    let hub = Hub::new(SoftHca::new(1)).unwrap();
    let (t, mem, lay) = hub.attach(MEM, Limits::default(), port(5)).unwrap();
    let mut a = guest(Context::open(t, mem.clone(), lay).unwrap(), QpType::Rc);
    let mut b = guest(open(&hub, 6), QpType::Rc);
    MockGuest::connect(&mut a, &mut b).unwrap();
    // a's event consumer index, from nowhere.
    a.ctx
        .write(lay.event_base + 4, &0x8000_0000u32.to_le_bytes())
        .unwrap();
    a.ctx.arm_cq(&mut a.cq).unwrap();
    b.ctx.arm_cq(&mut b.cq).unwrap();
    a.recv(1, 64).unwrap();
    b.recv(2, 64).unwrap();
    a.post(op::SEND, 8, 0, 0).unwrap();
    b.post(op::SEND, 8, 0, 0).unwrap();
    let before = hub.backend().stats;
    let mut notify = Vec::new();
    hub.backend().poll(&mut notify);
    let after = hub.backend().stats;
    // b's event went through; a's was dropped and counted in its ring.
    assert_eq!(after.events - before.events, 1);
    let ev = b.ctx.next_event(Duration::ZERO).expect("b's event");
    assert_eq!((ev.kind, ev.handle), (event::COMPLETION, b.cq.handle));
    let mut dropped = [0u8; 4];
    a.ctx.read(lay.event_base + 8, &mut dropped).unwrap();
    assert_eq!(u32::from_le_bytes(dropped), 1);
    // The completions themselves are in both CQs.
    let mut wc = [Wc::default(); 4];
    assert_eq!(
        a.ctx.poll_cq(&mut a.cq, &mut wc).unwrap(),
        2,
        "send + receive"
    );
    assert_eq!(
        b.ctx.poll_cq(&mut b.cq, &mut wc).unwrap(),
        2,
        "send + receive"
    );
}

#[test]
fn a_cq_the_guest_does_not_drain_overruns_once_and_the_rest_goes_on() {
    let hub = Hub::new(SoftHca::new(1)).unwrap();
    let mut a = guest(open(&hub, 5), QpType::Ud);
    let mut b = guest(open(&hub, 6), QpType::Ud);
    a.ctx.ready(&a.qp, 0, 0).unwrap();
    b.ctx.ready(&b.qp, 0, 0).unwrap();
    // A second, tiny CQ and a UD QP on it.
    let mut small = a.ctx.create_cq(2).unwrap();
    let mut q = a
        .ctx
        .create_qp(a.pd, QpType::Ud, &small, &small, 8, 8)
        .unwrap();
    a.ctx.ready(&q, 0, 0).unwrap();
    let wr = SendWr {
        opcode: op::SEND,
        signaled: true,
        lkey: a.mr.lkey,
        addr: a.buf,
        len: 8,
        dest_qpn: b.qp.qpn,
        dlid: b.lid,
        ..Default::default()
    };
    for _ in 0..5 {
        a.ctx.post_send(&mut q, &wr).unwrap();
    }
    let mut notify = Vec::new();
    hub.backend().poll(&mut notify);
    let ev = a.ctx.next_event(Duration::ZERO).expect("overrun event");
    assert_eq!((ev.kind, ev.handle), (event::CQ_OVERRUN, small.handle));
    assert!(a.ctx.next_event(Duration::ZERO).is_none(), "one event only");
    let mut wc = [Wc::default(); 8];
    assert_eq!(a.ctx.poll_cq(&mut small, &mut wc).unwrap(), 2);
    // a's other QP and CQ, and b, go on.
    b.recv(3, 4096 + 40).unwrap();
    let wr = SendWr {
        dest_qpn: b.qp.qpn,
        ..wr
    };
    a.ctx.post_send(&mut a.qp, &wr).unwrap();
    hub.backend().poll(&mut notify);
    assert_eq!(b.ctx.poll_cq(&mut b.cq, &mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (3, 0));
}
