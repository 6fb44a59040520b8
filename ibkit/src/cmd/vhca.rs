//! `ibkit bench vhca`: the software HCA used directly ("native": an
//! in-process hub, privileged calls are function calls) against the same
//! HCA used by guests through vhca from a second process (memfd guest
//! memory, request ring, eventfds, the epoll driver loop), measured in one
//! run the way the Xen-IB paper measured: ping-pong latency and streaming
//! bandwidth over RC send/receive and RDMA write from 1 B to 1 MiB with
//! polling; latency with blocking completion events; and the cost of
//! registering 1 to 1,024 pages. Each side is two contexts (two VMs) on one
//! HCA; the data path's commands to the backend are counted (the target is
//! none).

pub mod verbs;

use crate::cmd::stats::median;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vhca::backend::{Limits, PortView};
use vhca::channel::{Driver, Hub, Socket};
use vhca::device::SoftHca;
use vhca::frontend::{Context, Cq, Mr, Pd, Qp, SendWr, Transport, Wc};
use vhca::layout::{op, status};
use vhca::proto::{access, QpType};
use vm_memory::GuestMemoryMmap;

/// Guest memory per context.
const MEM: usize = 24 << 20;
/// Largest message.
const MAX: u32 = 1 << 20;
/// Registration area.
const REG: u64 = 4 << 20;
const RW: u32 = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
const T: Duration = Duration::from_secs(10);

fn port(lid: u16) -> PortView {
    PortView {
        lid,
        port_guid: 0x0002_c903_00ab_0000 + u64::from(lid),
        state: 4,
    }
}

/// Pins the calling thread (and threads it starts later) to `cpu`, when
/// the machine has more than one; the device loop gets a CPU of its own,
/// the VMs share another, as a host would place a backend and its guests.
fn pin_to(cpu: usize) {
    // Online CPUs (not this thread's affinity, which may be pinned already).
    // SAFETY: sysconf reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    if n < 2 {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes a bit
    // inside it; sched_setaffinity reads it for the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % n, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Message sizes: 1 B to 1 MiB by powers of four.
fn sizes(quick: bool) -> Vec<u32> {
    let step = if quick { 16 } else { 4 };
    let mut v = Vec::new();
    let mut s = 1u32;
    while s <= MAX {
        v.push(s);
        s *= step;
    }
    v
}

fn iters(size: u32, quick: bool) -> u32 {
    let budget: u64 = if quick { 8 << 20 } else { 256 << 20 };
    let cap = if quick { 500 } else { 20_000 };
    (budget / u64::from(size).max(1)).clamp(20, cap) as u32
}

/// One VM: a context, a PD, one CQ, one RC QP, a send and a receive buffer
/// and a registration area.
struct Vm<T: Transport> {
    ctx: Context<T>,
    pd: Pd,
    cq: Cq,
    qp: Qp,
    sbuf: u64,
    rbuf: u64,
    mr: Mr,
    reg: u64,
    lid: u16,
}

fn vm<T: Transport>(mut ctx: Context<T>) -> Result<Vm<T>, String> {
    let e = |e: vhca::frontend::Error| e.to_string();
    let (lid, _, _) = ctx.query_port().map_err(e)?;
    let pd = ctx.alloc_pd().map_err(e)?;
    let cq = ctx.create_cq(512).map_err(e)?;
    let qp = ctx
        .create_qp(pd, QpType::Rc, &cq, &cq, 128, 128)
        .map_err(e)?;
    let sbuf = ctx.alloc(2 * u64::from(MAX)).map_err(e)?;
    let rbuf = sbuf + u64::from(MAX);
    let mr = ctx.reg_mr(pd, sbuf, 2 * u64::from(MAX), RW).map_err(e)?;
    let reg = ctx.alloc(REG).map_err(e)?;
    Ok(Vm {
        ctx,
        pd,
        cq,
        qp,
        sbuf,
        rbuf,
        mr,
        reg,
        lid,
    })
}

fn connect<T: Transport>(a: &mut Vm<T>, b: &mut Vm<T>) -> Result<(), String> {
    let e = |e: vhca::frontend::Error| e.to_string();
    a.ctx.ready(&a.qp, b.qp.qpn, b.lid).map_err(e)?;
    b.ctx.ready(&b.qp, a.qp.qpn, a.lid).map_err(e)
}

impl<T: Transport> Vm<T> {
    /// Posts the receive buffer (always its full size, so a receive left
    /// over from a smaller test still takes a larger message).
    fn post_recv(&mut self, _size: u32) -> Result<(), String> {
        let (lkey, rbuf) = (self.mr.lkey, self.rbuf);
        self.ctx
            .post_recv(&mut self.qp, 0, lkey, rbuf, MAX)
            .map_err(|e| e.to_string())
    }

    /// Posts a send work request from the send buffer; an error when the
    /// send queue is full.
    fn send(
        &mut self,
        opcode: u8,
        size: u32,
        signaled: bool,
        rkey: u32,
        raddr: u64,
    ) -> Result<(), String> {
        let wr = SendWr {
            opcode,
            signaled,
            lkey: self.mr.lkey,
            addr: self.sbuf,
            len: size,
            rkey,
            remote_addr: raddr,
            ..Default::default()
        };
        self.ctx
            .post_send(&mut self.qp, &wr)
            .map_err(|e| e.to_string())
    }

    /// Polls until a completion with `opcode` arrives (others are counted
    /// and dropped); its status.
    fn poll_for(&mut self, opcode: u8) -> Result<(), String> {
        let mut wc = [Wc::default(); 16];
        let deadline = Instant::now() + T;
        loop {
            let n = self
                .ctx
                .poll_cq(&mut self.cq, &mut wc)
                .map_err(|e| e.to_string())?;
            for w in &wc[..n] {
                if w.status != status::SUCCESS {
                    return Err(format!("completion status {}", w.status));
                }
            }
            if wc[..n].iter().any(|w| w.opcode == opcode) {
                return Ok(());
            }
            if n == 0 && Instant::now() > deadline {
                return Err("no completion within 10 s".into());
            }
        }
    }
}

/// Microseconds per call of `go`, over `n` calls after up to 50 to warm up.
fn round_trips(n: u32, mut go: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    for _ in 0..n.min(50) {
        go()?;
    }
    let t0 = Instant::now();
    for _ in 0..n {
        go()?;
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / f64::from(n))
}

/// Ping-pong over RC send/receive: microseconds one way (half the round trip).
fn pingpong<T: Transport>(a: &mut Vm<T>, b: &mut Vm<T>, size: u32, n: u32) -> Result<f64, String> {
    a.post_recv(size)?;
    b.post_recv(size)?;
    let go = |a: &mut Vm<T>, b: &mut Vm<T>| -> Result<(), String> {
        a.send(op::SEND, size, false, 0, 0)?;
        b.poll_for(op::RECV)?;
        b.post_recv(size)?;
        b.send(op::SEND, size, false, 0, 0)?;
        a.poll_for(op::RECV)?;
        a.post_recv(size)
    };
    // The two receives left posted are flushed with the QPs at exit.
    Ok(round_trips(n, || go(a, b))? / 2.0)
}

/// Ping-pong in which each side learns of its receive from the event
/// channel: it arms its CQ and polls its event ring (no sleep), then takes
/// the completion. One thread plays both sides, as in [`pingpong`]:
/// microseconds one way.
fn event_ring_pingpong<T: Transport>(a: &mut Vm<T>, b: &mut Vm<T>, n: u32) -> Result<f64, String> {
    let size = 8;
    a.post_recv(size)?;
    b.post_recv(size)?;
    let take = |v: &mut Vm<T>| -> Result<(), String> {
        let deadline = Instant::now() + T;
        loop {
            if let Some(e) = v.ctx.next_event(Duration::ZERO) {
                if e.handle == v.cq.handle {
                    v.poll_for(op::RECV)?;
                    return v.post_recv(size);
                }
            }
            if Instant::now() > deadline {
                return Err("no event within 10 s".into());
            }
            std::hint::spin_loop();
        }
    };
    let go = |a: &mut Vm<T>, b: &mut Vm<T>| -> Result<(), String> {
        b.ctx.arm_cq(&mut b.cq).map_err(|e| e.to_string())?;
        a.send(op::SEND, size, false, 0, 0)?;
        take(b)?;
        a.ctx.arm_cq(&mut a.cq).map_err(|e| e.to_string())?;
        b.send(op::SEND, size, false, 0, 0)?;
        take(a)
    };
    Ok(round_trips(n, || go(a, b))? / 2.0)
}

/// RDMA write, post to completion: microseconds.
fn write_latency<T: Transport>(
    a: &mut Vm<T>,
    b: &mut Vm<T>,
    size: u32,
    n: u32,
) -> Result<f64, String> {
    let (rkey, raddr) = (b.mr.rkey, b.rbuf);
    let t0 = Instant::now();
    for _ in 0..n {
        a.send(op::RDMA_WRITE, size, true, rkey, raddr)?;
        a.poll_for(op::RDMA_WRITE)?;
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / f64::from(n))
}

/// Streaming with `window` messages in flight: MB/s (10⁶ bytes per second).
fn bandwidth<T: Transport>(
    a: &mut Vm<T>,
    b: &mut Vm<T>,
    opcode: u8,
    size: u32,
    n: u32,
) -> Result<f64, String> {
    let window = 16u32;
    let (rkey, raddr) = (b.mr.rkey, b.rbuf);
    let recv = opcode == op::SEND;
    if recv {
        for _ in 0..window {
            b.post_recv(size)?;
        }
    }
    let mut wc = [Wc::default(); 32];
    let (mut posted, mut done, mut received) = (0u32, 0u32, 0u32);
    let mut rposted = window;
    let t0 = Instant::now();
    while done < n || (recv && received < n) {
        while posted < n && posted - done < window {
            if a.send(opcode, size, true, rkey, raddr).is_err() {
                break;
            }
            posted += 1;
        }
        let k = a
            .ctx
            .poll_cq(&mut a.cq, &mut wc)
            .map_err(|e| e.to_string())?;
        for w in &wc[..k] {
            if w.status != status::SUCCESS {
                return Err(format!("completion status {}", w.status));
            }
            done += u32::from(w.opcode == opcode);
        }
        if recv {
            let k = b
                .ctx
                .poll_cq(&mut b.cq, &mut wc)
                .map_err(|e| e.to_string())?;
            for _ in 0..k {
                received += 1;
                if rposted < n {
                    b.post_recv(size)?;
                    rposted += 1;
                }
            }
        }
        if t0.elapsed() > T * 3 {
            return Err("bandwidth run stalled".into());
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(f64::from(n) * f64::from(size) / secs / 1e6)
}

/// Registering and deregistering `pages` pages: microseconds per pair.
fn registration<T: Transport>(a: &mut Vm<T>, pages: u64, n: u32) -> Result<f64, String> {
    let (pd, reg) = (a.pd, a.reg);
    let t0 = Instant::now();
    for _ in 0..n {
        let mr = a
            .ctx
            .reg_mr(pd, reg, pages * 4096, RW)
            .map_err(|e| e.to_string())?;
        a.ctx.dereg_mr(mr).map_err(|e| e.to_string())?;
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / f64::from(n))
}

/// Ping-pong with both sides blocking on completion events (the peer on a
/// second thread): microseconds one way.
fn event_pingpong<T: Transport + Send>(
    a: &mut Vm<T>,
    b: &mut Vm<T>,
    n: u32,
) -> Result<f64, String> {
    let size = 8;
    a.post_recv(size)?;
    b.post_recv(size)?;
    let wait = move |v: &mut Vm<T>| -> Result<(), String> {
        let mut wc = [Wc::default(); 4];
        let deadline = Instant::now() + T;
        loop {
            let k = v
                .ctx
                .wait_cq(&mut v.cq, &mut wc, T)
                .map_err(|e| e.to_string())?;
            if wc[..k].iter().any(|w| w.opcode == op::RECV) {
                return v.post_recv(size);
            }
            if Instant::now() > deadline {
                return Err("no event within 10 s".into());
            }
        }
    };
    let total = n + 20;
    std::thread::scope(|sc| {
        let server = sc.spawn(|| -> Result<(), String> {
            for _ in 0..total {
                wait(b)?;
                b.send(op::SEND, size, false, 0, 0)?;
            }
            Ok(())
        });
        let mut t0 = Instant::now();
        for i in 0..total {
            if i == 20 {
                t0 = Instant::now();
            }
            a.send(op::SEND, size, false, 0, 0)?;
            wait(a)?;
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / f64::from(n) / 2.0;
        server.join().map_err(|_| "event peer panicked")??;
        Ok(us)
    })
}

/// The floor under [`event_pingpong`]: the same placement (a spinning
/// "device" thread on CPU 0, two blocking threads on CPU 1) and the same
/// hand-offs (a memory doorbell to the device, an eventfd to the sleeper)
/// with nothing else: microseconds one way.
fn wake_floor(n: u32) -> f64 {
    use std::sync::atomic::AtomicU32;
    use vmm_sys_util::eventfd::EventFd;
    let (Ok(ea), Ok(eb)) = (EventFd::new(0), EventFd::new(0)) else {
        return f64::NAN;
    };
    let doorbell = AtomicU32::new(0);
    let stop = AtomicBool::new(false);
    let total = n + 20;
    std::thread::scope(|sc| {
        // The device: sees doorbells 1, 2, 3 ... and wakes B on odd, A on even.
        sc.spawn(|| {
            pin_to(0);
            let mut seen = 0;
            while !stop.load(Ordering::Relaxed) {
                let d = doorbell.load(Ordering::Acquire);
                if d != seen {
                    seen = d;
                    let _ = if d % 2 == 1 { eb.write(1) } else { ea.write(1) };
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let b = sc.spawn(|| {
            for _ in 0..total {
                let _ = eb.read();
                doorbell.fetch_add(1, Ordering::AcqRel);
            }
        });
        let mut t0 = Instant::now();
        for i in 0..total {
            if i == 20 {
                t0 = Instant::now();
            }
            doorbell.fetch_add(1, Ordering::AcqRel);
            let _ = ea.read();
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / f64::from(n) / 2.0;
        let _ = b.join();
        stop.store(true, Ordering::Relaxed);
        us
    })
}

/// One measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Test {
    /// RC send/recv ping-pong of this many bytes.
    Send(u32),
    /// RDMA write latency.
    Write(u32),
    /// RC send bandwidth.
    SendBw(u32),
    /// RDMA write bandwidth.
    WriteBw(u32),
    /// Ping-pong blocking on events.
    Event,
    /// Ping-pong on events read from the event ring without sleeping.
    EventRing,
    /// Registering this many pages.
    Reg(u64),
    /// A privileged call that does nothing else (QueryPort).
    Call,
}

impl Test {
    fn key(self) -> &'static str {
        match self {
            Test::Send(_) => "send_latency_us",
            Test::Write(_) => "write_latency_us",
            Test::SendBw(_) => "send_bw_mbs",
            Test::WriteBw(_) => "write_bw_mbs",
            Test::Event => "event_latency_us",
            Test::EventRing => "event_ring_latency_us",
            Test::Reg(_) => "reg_us",
            Test::Call => "call_us",
        }
    }

    fn arg(self) -> u64 {
        match self {
            Test::Send(s) | Test::Write(s) | Test::SendBw(s) | Test::WriteBw(s) => u64::from(s),
            Test::Event | Test::EventRing | Test::Call => 0,
            Test::Reg(p) => p,
        }
    }

    fn encode(self) -> String {
        format!("{} {}", self.key(), self.arg())
    }

    fn decode(line: &str) -> Option<Test> {
        let (k, a) = line.trim().split_once(' ')?;
        let a: u64 = a.parse().ok()?;
        let s = u32::try_from(a).ok();
        Some(match k {
            "send_latency_us" => Test::Send(s?),
            "write_latency_us" => Test::Write(s?),
            "send_bw_mbs" => Test::SendBw(s?),
            "write_bw_mbs" => Test::WriteBw(s?),
            "event_latency_us" => Test::Event,
            "reg_us" => Test::Reg(a.clamp(1, REG / 4096)),
            "call_us" => Test::Call,
            "event_ring_latency_us" => Test::EventRing,
            _ => return None,
        })
    }

    /// Messages it sends (for the commands-per-message count).
    fn messages(self, quick: bool) -> u64 {
        match self {
            Test::Send(s) => 2 * u64::from(iters(s, quick)),
            Test::Write(s) | Test::SendBw(s) | Test::WriteBw(s) => u64::from(iters(s, quick)),
            Test::Event | Test::EventRing => 2 * u64::from(event_iters(quick)),
            Test::Reg(_) | Test::Call => 0,
        }
    }

    fn run<T: Transport + Send>(
        self,
        a: &mut Vm<T>,
        b: &mut Vm<T>,
        quick: bool,
    ) -> Result<f64, String> {
        match self {
            Test::Send(s) => pingpong(a, b, s, iters(s, quick)),
            Test::Write(s) => write_latency(a, b, s, iters(s, quick)),
            Test::SendBw(s) => bandwidth(a, b, op::SEND, s, iters(s, quick)),
            Test::WriteBw(s) => bandwidth(a, b, op::RDMA_WRITE, s, iters(s, quick)),
            Test::Event => event_pingpong(a, b, event_iters(quick)),
            Test::EventRing => event_ring_pingpong(a, b, event_iters(quick)),
            Test::Reg(p) => {
                let n = if quick {
                    20
                } else {
                    (20_000 / p).clamp(50, 2_000) as u32
                };
                registration(a, p, n)
            }
            Test::Call => {
                let n = if quick { 200 } else { 20_000 };
                let t0 = Instant::now();
                for _ in 0..n {
                    a.ctx.query_port().map_err(|e| e.to_string())?;
                }
                Ok(t0.elapsed().as_secs_f64() * 1e6 / f64::from(n))
            }
        }
    }
}

fn event_iters(quick: bool) -> u32 {
    if quick {
        200
    } else {
        5_000
    }
}

/// Every measurement, in order.
fn plan(quick: bool) -> Vec<Test> {
    let mut v = Vec::new();
    for f in [Test::Send, Test::Write, Test::SendBw, Test::WriteBw] {
        v.extend(sizes(quick).into_iter().map(f));
    }
    v.push(Test::Event);
    v.push(Test::EventRing);
    v.push(Test::Call);
    v.extend([1u64, 4, 16, 64, 256, 1024].map(Test::Reg));
    v
}

/// The guest side, run in the child process: two VMs over the socket;
/// runs each test named on stdin and prints its result, until EOF; then
/// the commands its data path sent.
pub fn guest(sock: &Path, quick: bool) -> super::Outcome {
    pin_to(1);
    let open = || -> Result<_, String> {
        let (s, mem, lay) = Socket::connect(sock, MEM).map_err(|e| e.to_string())?;
        Context::open(s, mem, lay).map_err(|e| e.to_string())
    };
    let mut a = vm(open()?)?;
    let mut b = vm(open()?)?;
    connect(&mut a, &mut b)?;
    let mut data_path = 0;
    let mut line = String::new();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    loop {
        line.clear();
        if stdin.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            break;
        }
        let t = Test::decode(&line).ok_or_else(|| format!("unknown test {line:?}"))?;
        let before = a.ctx.commands() + b.ctx.commands();
        let v = t.run(&mut a, &mut b, quick)?;
        if !matches!(t, Test::Reg(_) | Test::Call) {
            data_path += a.ctx.commands() + b.ctx.commands() - before;
        }
        writeln!(out, "{v}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    writeln!(out, "data_path_commands {data_path}").map_err(|e| e.to_string())?;
    Ok(())
}

/// `ibkit bench vhca`. Native and guest run side by side: both backends
/// stay up, and each test alternates native, guest, native, ... for
/// `rounds` rounds, so that drift of the machine hits both alike; the
/// medians are reported.
pub fn run(json_out: bool, quick: bool) -> super::Outcome {
    let rounds = if quick { 1 } else { 5 };
    // Native: an in-process hub, its device thread on CPU 0, the VMs on 1.
    let hub = Hub::new(SoftHca::<GuestMemoryMmap>::new(0x0002_c903_00ab_0001))
        .map_err(|e| e.to_string())?;
    let h = hub.clone();
    let dev = std::thread::spawn(move || {
        pin_to(0);
        h.run_device()
    });
    // Guest: the driver loop on a thread here (CPU 0), the VMs in a child.
    let dir = std::env::temp_dir().join(format!("ibkit-vhca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let sock = dir.join("backend.sock");
    let _ = std::fs::remove_file(&sock);
    let mut lids = 1u16..;
    let mut driver = Driver::new(
        SoftHca::<GuestMemoryMmap>::new(0x0002_c903_00ab_0002),
        &sock,
        Limits::default(),
        Box::new(move |_| port(lids.next().unwrap_or(1))),
    )
    .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let driver_rest = driver.rest_handle();
    let drv = std::thread::spawn(move || {
        pin_to(0);
        let r = driver.run(&s2);
        (driver, r)
    });
    pin_to(1);
    let result = side_by_side(&hub, &driver_rest, &sock, quick, rounds);
    hub.stop();
    let _ = dev.join();
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let (driver, r) = drv.join().map_err(|_| "driver thread panicked")?;
    r.map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    let (nat, gst, native_cmds, guest_cmds, messages) = result?;
    let b = driver.backend();
    let backend = json!({
        "commands_executed": b.stats.executed,
        "commands_refused": b.stats.refused,
        "events": b.stats.events,
        "notifications": b.stats.notifications,
        "guests_torn_down": driver.stats.gone.load(Ordering::Relaxed),
        "device_objects_left": b.device().live(),
        "pages_pinned": b.device().stats.pages_pinned,
        "registrations_unpinned": b.device().stats.unpinned,
    });
    let floor = wake_floor(event_iters(quick));
    let report = json!({
        "event_wake_floor_us": floor,
        "native": nat,
        "guest": gst,
        "data_path_messages": messages,
        "data_path_commands": {"native": native_cmds, "guest": guest_cmds},
        "backend": backend,
        "rounds": rounds,
        "quick": quick,
    });
    if json_out {
        println!("{report}");
    } else {
        print_report(&report);
    }
    super::check(guest_cmds == 0 && native_cmds == 0, || {
        format!(
            "the data path reached the backend: {guest_cmds} commands from the guests, {native_cmds} from the native side"
        )
    })
}

/// The guest side in a child process (`--guest SOCK`), asked for one
/// test at a time.
struct GuestProcess {
    child: std::process::Child,
    to: std::process::ChildStdin,
    from: BufReader<std::process::ChildStdout>,
}

impl GuestProcess {
    fn spawn(sock: &Path, quick: bool) -> Result<GuestProcess, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut args = vec!["bench".to_string(), "vhca".into(), "--guest".into()];
        args.push(sock.display().to_string());
        if quick {
            args.push("--quick".into());
        }
        let mut child = Command::new(exe)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the guest process: {e}"))?;
        let to = child.stdin.take().ok_or("no pipe to the guest")?;
        let from = BufReader::new(child.stdout.take().ok_or("no pipe from the guest")?);
        Ok(GuestProcess { child, to, from })
    }

    fn ask(&mut self, t: Test) -> Result<f64, String> {
        writeln!(self.to, "{}", t.encode()).map_err(|e| format!("guest process: {e}"))?;
        let mut l = String::new();
        self.from.read_line(&mut l).map_err(|e| e.to_string())?;
        l.trim()
            .parse()
            .map_err(|_| format!("guest process answered {l:?}"))
    }

    /// Ends the child; the commands its data path sent.
    fn finish(self) -> Result<u64, String> {
        let GuestProcess {
            mut child,
            to,
            mut from,
        } = self;
        drop(to);
        let mut tail = String::new();
        let _ = from.read_to_string(&mut tail);
        let ok = child.wait().map(|s| s.success()).unwrap_or(false);
        if !ok {
            return Err("the guest process failed".into());
        }
        tail.trim()
            .strip_prefix("data_path_commands ")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("guest process ended with {tail:?}"))
    }
}

type Sides = (Value, Value, u64, u64, u64);

fn side_by_side(
    hub: &Arc<Hub<SoftHca<GuestMemoryMmap>>>,
    driver_rest: &AtomicBool,
    sock: &Path,
    quick: bool,
    rounds: usize,
) -> Result<Sides, String> {
    let open = |lid| -> Result<_, String> {
        let (t, mem, lay) = hub
            .attach(MEM, Limits::default(), port(lid))
            .map_err(|e| e.to_string())?;
        Context::open(t, mem, lay).map_err(|e| e.to_string())
    };
    let mut a = vm(open(1)?)?;
    let mut b = vm(open(2)?)?;
    connect(&mut a, &mut b)?;
    let mut g = GuestProcess::spawn(sock, quick)?;
    let mut ask = |t: Test| g.ask(t);
    let mut nat = serde_json::Map::new();
    let mut gst = serde_json::Map::new();
    let mut native_cmds = 0;
    let mut messages = 0;
    for t in plan(quick) {
        let (mut ns, mut gs) = (Vec::new(), Vec::new());
        // Registrations and calls are short and noisy: three times the rounds.
        let k = if matches!(t, Test::Reg(_) | Test::Call) {
            3 * rounds
        } else {
            rounds
        };
        for _ in 0..k {
            let before = a.ctx.commands() + b.ctx.commands();
            // Each side's device loop steps aside before the other runs:
            // both are pinned to CPU 0.
            driver_rest.store(true, Ordering::Relaxed);
            ns.push(t.run(&mut a, &mut b, quick)?);
            hub.rest();
            if !matches!(t, Test::Reg(_) | Test::Call) {
                native_cmds += a.ctx.commands() + b.ctx.commands() - before;
            }
            gs.push(ask(t)?);
            messages += t.messages(quick);
        }
        for (m, v) in [(&mut nat, &mut ns), (&mut gst, &mut gs)] {
            let x = median(v);
            let e = m.entry(t.key()).or_insert_with(|| json!([]));
            if matches!(t, Test::Event | Test::EventRing | Test::Call) {
                *e = json!(x);
            } else if let Some(arr) = e.as_array_mut() {
                arr.push(json!([t.arg(), x]));
            }
        }
    }
    let guest_cmds = g.finish()?;
    Ok((
        Value::Object(nat),
        Value::Object(gst),
        native_cmds,
        guest_cmds,
        messages,
    ))
}

fn pairs(v: &Value, key: &str) -> Vec<(f64, f64)> {
    v[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

fn size_label(s: f64) -> String {
    let s = s as u64;
    if s >= 1 << 20 {
        format!("{} MiB", s >> 20)
    } else if s >= 1 << 10 {
        format!("{} KiB", s >> 10)
    } else {
        format!("{s} B")
    }
}

fn print_report(r: &Value) {
    let (nat, gst) = (&r["native"], &r["guest"]);
    let table = |title: &str, key: &str, unit: &str, higher_better: bool| {
        println!("{title}");
        println!(
            "  {:>8}  {:>12}  {:>12}  {:>7}",
            "size",
            format!("native {unit}"),
            format!("guest {unit}"),
            "guest/native"
        );
        for ((s, n), (_, g)) in pairs(nat, key).into_iter().zip(pairs(gst, key)) {
            let ratio = if higher_better { g / n } else { n / g };
            println!(
                "  {:>8}  {:>12.2}  {:>12.2}  {:>11.1}%",
                size_label(s),
                n,
                g,
                ratio * 100.0
            );
        }
    };
    println!(
        "vhca: the software HCA natively and from a guest process, alternating, median of {} rounds (guest/native: the guest's performance as a share of native's)",
        r["rounds"]
    );
    table(
        "RC send/recv ping-pong, one way",
        "send_latency_us",
        "µs",
        false,
    );
    table(
        "RDMA write, post to completion",
        "write_latency_us",
        "µs",
        false,
    );
    table("RC send bandwidth", "send_bw_mbs", "MB/s", true);
    table("RDMA write bandwidth", "write_bw_mbs", "MB/s", true);
    let (ne, ge) = (
        nat["event_latency_us"].as_f64().unwrap_or(0.0),
        gst["event_latency_us"].as_f64().unwrap_or(0.0),
    );
    println!(
        "Blocking on completion events, ping-pong one way: native {ne:.2} µs, guest {ge:.2} µs (floor: bare eventfd wake-ups in the same placement, {:.2} µs)",
        r["event_wake_floor_us"].as_f64().unwrap_or(f64::NAN)
    );
    println!(
        "The same, each side polling its event ring instead of sleeping (the channel without the wake-up): native {:.2} µs, guest {:.2} µs",
        nat["event_ring_latency_us"].as_f64().unwrap_or(0.0),
        gst["event_ring_latency_us"].as_f64().unwrap_or(0.0)
    );
    println!(
        "A privileged call (QueryPort): native {:.2} µs, guest {:.2} µs",
        nat["call_us"].as_f64().unwrap_or(0.0),
        gst["call_us"].as_f64().unwrap_or(0.0)
    );
    println!("Memory registration (register + deregister, pages translated and pinned)");
    println!(
        "  {:>8}  {:>12}  {:>12}  {:>9}",
        "pages", "native µs", "guest µs", "overhead"
    );
    for ((p, n), (_, g)) in pairs(nat, "reg_us").into_iter().zip(pairs(gst, "reg_us")) {
        println!(
            "  {:>8}  {:>12.2}  {:>12.2}  {:>8.0}%",
            p,
            n,
            g,
            (g / n - 1.0) * 100.0
        );
    }
    let b = &r["backend"];
    println!(
        "Backend commands during {} data-path messages: guest {}, native {}. Guest backend: {} commands executed in all, {} events in {} notifications, {} guests torn down, {} device objects left",
        r["data_path_messages"],
        r["data_path_commands"]["guest"],
        r["data_path_commands"]["native"],
        b["commands_executed"],
        b["events"],
        b["notifications"],
        b["guests_torn_down"],
        b["device_objects_left"],
    );
}
