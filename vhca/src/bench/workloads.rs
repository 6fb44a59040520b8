//! The workloads: one VM's objects ([`Vm`]), the measurements run on a
//! pair of them, the bare wake-up floor, and the plan of tests ([`Test`])
//! with the one-line form the guest process is asked in.

use super::pin_to;
use crate::backend::PortView;
use crate::frontend::{Context, Cq, Mr, Pd, Qp, SendWr, Transport, Wc};
use crate::layout::{op, status};
use crate::proto::{access, QpType};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Guest memory per context.
pub(super) const MEM: usize = 24 << 20;
/// Largest message.
const MAX: u32 = 1 << 20;
/// Registration area.
const REG: u64 = 4 << 20;
const RW: u32 = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
const T: Duration = Duration::from_secs(10);

pub(super) fn port(lid: u16) -> PortView {
    PortView {
        lid,
        port_guid: 0x0002_c903_00ab_0000 + u64::from(lid),
        state: 4,
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

pub(super) fn iters(size: u32, quick: bool) -> u32 {
    let budget: u64 = if quick { 8 << 20 } else { 256 << 20 };
    let cap = if quick { 500 } else { 20_000 };
    (budget / u64::from(size).max(1)).clamp(20, cap) as u32
}

/// One VM: a context, a PD, one CQ, one RC QP, a send and a receive buffer
/// and a registration area.
pub(super) struct Vm<T: Transport> {
    pub(super) ctx: Context<T>,
    pd: Pd,
    cq: Cq,
    qp: Qp,
    sbuf: u64,
    rbuf: u64,
    mr: Mr,
    reg: u64,
    lid: u16,
}

pub(super) fn vm<T: Transport>(mut ctx: Context<T>) -> Result<Vm<T>, String> {
    let e = |e: crate::frontend::Error| e.to_string();
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

pub(super) fn connect<T: Transport>(a: &mut Vm<T>, b: &mut Vm<T>) -> Result<(), String> {
    let e = |e: crate::frontend::Error| e.to_string();
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
pub(super) fn round_trips(
    n: u32,
    mut go: impl FnMut() -> Result<(), String>,
) -> Result<f64, String> {
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
pub(super) fn wake_floor(n: u32) -> f64 {
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
pub(super) enum Test {
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
    pub(super) fn key(self) -> &'static str {
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

    pub(super) fn arg(self) -> u64 {
        match self {
            Test::Send(s) | Test::Write(s) | Test::SendBw(s) | Test::WriteBw(s) => u64::from(s),
            Test::Event | Test::EventRing | Test::Call => 0,
            Test::Reg(p) => p,
        }
    }

    pub(super) fn encode(self) -> String {
        format!("{} {}", self.key(), self.arg())
    }

    pub(super) fn decode(line: &str) -> Option<Test> {
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
    pub(super) fn messages(self, quick: bool) -> u64 {
        match self {
            Test::Send(s) => 2 * u64::from(iters(s, quick)),
            Test::Write(s) | Test::SendBw(s) | Test::WriteBw(s) => u64::from(iters(s, quick)),
            Test::Event | Test::EventRing => 2 * u64::from(event_iters(quick)),
            Test::Reg(_) | Test::Call => 0,
        }
    }

    pub(super) fn run<T: Transport + Send>(
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

pub(super) fn event_iters(quick: bool) -> u32 {
    if quick {
        200
    } else {
        5_000
    }
}

/// Every measurement, in order.
pub(super) fn plan(quick: bool) -> Vec<Test> {
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
