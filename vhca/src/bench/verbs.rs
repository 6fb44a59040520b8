//! The benchmark over a real HCA. Native is the HCA used directly through
//! verbs-sys (an RC ping-pong between two QPs, registration of memory);
//! guest is two VMs in a second process driving the same HCA through vhca
//! (the socket driver and [`VerbsHca`], whose data path is mediated: each
//! work request is posted to the HCA by the backend's device loop).
//! Alternating rounds, medians, as the software HCA's [`run`](super::run)
//! does; the guest process is the same (see the
//! [module documentation](super)).

use super::workloads::{iters, port, round_trips, Test};
use super::{median, BenchError, GuestProcess, SocketDir};
use crate::backend::Limits;
use crate::channel::Driver;
use crate::device::verbs::VerbsHca;
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use verbs_sys::qp::{Qp, QpCaps, QpType, RcPeer, SendOp, Transition};
use verbs_sys::verbs::{Access, Completion, Context, Cq, Grh, Mr};
use vm_memory::GuestMemoryMmap;

const SIZES: [u32; 3] = [64, 4096, 65536];
const PAGES: [u64; 3] = [1, 16, 256];

/// One end of the native ping-pong: its QP, its CQ, and its send (0) and
/// receive (1) buffers when they are not posted.
struct Side {
    qp: Qp,
    cq: Cq,
    bufs: [Option<Mr>; 2],
    /// Completions of one poll, reused (the guest's backend does not
    /// allocate per poll either).
    wcs: Vec<Completion>,
}

impl Side {
    /// Polls until the completion of buffer `want` is back; takes back any
    /// other buffer that completes meanwhile.
    fn wait(&mut self, want: usize) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.bufs[want].is_none() {
            self.cq
                .poll_into(4, &mut self.wcs)
                .map_err(|e| e.to_string())?;
            for c in self.wcs.drain(..) {
                if !c.is_ok() {
                    return Err(format!("completion status {}", c.status));
                }
                let i = usize::from(c.wr_id == 1);
                let mr = self
                    .qp
                    .reclaim(c)
                    .map_err(|c| format!("a completion of no request: {c:?}"))?;
                self.bufs[i] = Some(mr);
            }
            if Instant::now() > deadline {
                return Err("no completion within 10 s".into());
            }
        }
        Ok(())
    }

    fn post_recv(&mut self, size: usize) -> Result<(), String> {
        let mr = self.bufs[1].take().ok_or("receive buffer in use")?;
        self.qp
            .post_recv(1, mr, 0..size)
            .map_err(|e| e.error.to_string())
    }

    fn send(&mut self, size: usize) -> Result<(), String> {
        self.wait(0)?;
        let mr = self.bufs[0].take().ok_or("send buffer in use")?;
        self.qp
            .post_send(0, mr, 0..size, SendOp::Send { imm: None })
            .map_err(|e| e.error.to_string())
    }
}

/// Two connected RC QPs on port 1 of `ctx`, with `size`-byte buffers.
fn native_pair(ctx: &Context, size: usize) -> Result<(Side, Side), String> {
    let e = |e: verbs_sys::Error| e.to_string();
    let port = ctx.query_port(1).map_err(e)?;
    let grh = if port.is_ethernet() {
        Some(Grh {
            dgid: ctx.query_gid(1, 0).map_err(e)?,
            sgid_index: 0,
            hop_limit: 64,
        })
    } else {
        None
    };
    let pd = ctx.alloc_pd().map_err(e)?;
    let side = || -> Result<Side, String> {
        let cq = ctx.create_cq(64, None).map_err(e)?;
        let qp = pd
            .create_qp(QpType::Rc, &cq, &cq, QpCaps::default())
            .map_err(e)?;
        let buf = |access| pd.register(vec![0u8; size].into_boxed_slice(), access);
        let bufs = [
            Some(buf(Access::LOCAL_READ).map_err(e)?),
            Some(buf(Access::LOCAL_WRITE).map_err(e)?),
        ];
        Ok(Side {
            qp,
            cq,
            bufs,
            wcs: Vec::with_capacity(4),
        })
    };
    let (mut a, mut b) = (side()?, side()?);
    let (qa, qb) = (a.qp.qp_num(), b.qp.qp_num());
    for (s, peer) in [(&mut a, qb), (&mut b, qa)] {
        s.qp.modify(Transition::Init {
            port: 1,
            pkey_index: 0,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            qkey: 0,
        })
        .map_err(e)?;
        s.qp.modify(Transition::Rtr(Some(RcPeer {
            qpn: peer,
            psn: 0,
            lid: port.lid,
            sl: 0,
            mtu: port.active_mtu,
            port: 1,
            grh,
        })))
        .map_err(e)?;
        s.qp.modify(Transition::Rts { sq_psn: 0 }).map_err(e)?;
    }
    Ok((a, b))
}

/// The native RC send/receive ping-pong: microseconds one way.
fn native_pingpong(ctx: &Context, size: u32, n: u32) -> Result<f64, String> {
    let size = size as usize;
    let (mut a, mut b) = native_pair(ctx, size)?;
    a.post_recv(size)?;
    b.post_recv(size)?;
    let mut go = || -> Result<(), String> {
        a.send(size)?;
        b.wait(1)?;
        b.post_recv(size)?;
        b.send(size)?;
        a.wait(1)?;
        a.post_recv(size)
    };
    round_trips(n, &mut go).map(|us| us / 2.0)
}

/// Native register + deregister of `pages` pages: microseconds.
fn native_registration(ctx: &Context, pages: u64, n: u32) -> Result<f64, String> {
    let pd = ctx.alloc_pd().map_err(|e| e.to_string())?;
    let len = (pages * 4096) as usize;
    let mut area = vec![0u8; len];
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let t0 = Instant::now();
    for _ in 0..n {
        let at = area.as_mut_ptr();
        // SAFETY: `area` outlives the region, which is dropped (and so
        // deregistered) at once; no QP uses it.
        let mr =
            unsafe { pd.register_iova(at, len, at as u64, access) }.map_err(|e| e.to_string())?;
        drop(mr);
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / f64::from(n))
}

fn reg_iters(pages: u64, quick: bool) -> u32 {
    if quick {
        20
    } else {
        (20_000 / pages).clamp(50, 2_000) as u32
    }
}

/// What [`run`] measured. Serialized (with serde), it is one JSON object
/// with these fields as keys, in this order, except `rounds`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The RDMA device measured.
    pub device: String,
    /// Its port 1's link layer.
    pub link: Link,
    /// The medians, ping-pong by message size, then registration by
    /// number of pages.
    pub rows: Vec<Row>,
    /// Commands the guests' data path sent to the backend.
    pub data_path_commands: u64,
    /// Work requests the backend's device loop posted to the HCA.
    pub posted: u64,
    /// Completions it moved into the guests' CQs.
    pub completions: u64,
    /// Objects left on the HCA after the guests are gone.
    pub device_objects_left: usize,
    /// Rounds per test (not serialized).
    #[serde(skip)]
    pub rounds: usize,
}

/// A port's link layer, serialized as its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Link {
    /// InfiniBand.
    InfiniBand,
    /// RDMA over Converged Ethernet.
    #[serde(rename = "RoCE")]
    Roce,
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Link::InfiniBand => "InfiniBand",
            Link::Roce => "RoCE",
        })
    }
}

/// One measurement, native and guest.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Row {
    /// What was measured.
    pub test: Measure,
    /// Its message size in bytes, or its number of pages.
    pub arg: u64,
    /// Microseconds, the HCA used directly.
    pub native: f64,
    /// Microseconds, from the guest process through vhca.
    pub guest: f64,
}

/// What a [`Row`] measured, serialized as the name of its JSON key in the
/// software HCA's [`Results`](super::Results).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Measure {
    /// RC send/receive ping-pong, microseconds one way.
    #[serde(rename = "send_latency_us")]
    SendLatency,
    /// Register and deregister, microseconds per pair.
    #[serde(rename = "reg_us")]
    Registration,
}

/// The benchmark over RDMA device `name` (port 1): one round in a `quick`
/// run, else three. `guest_command` builds the guest process's command
/// from the backend's socket path, as for [`super::run`]. An error when
/// the device cannot be opened or a test fails.
pub fn run(
    name: &str,
    quick: bool,
    guest_command: impl FnOnce(&Path) -> Command,
) -> Result<Report, BenchError> {
    let rounds = if quick { 1 } else { 3 };
    let backend = |e: String| BenchError::Backend(e);
    let ctx = Context::open(name).map_err(|e| backend(e.to_string()))?;
    let port1 = ctx.query_port(1).map_err(|e| backend(e.to_string()))?;
    let link = if port1.is_ethernet() {
        Link::Roce
    } else {
        Link::InfiniBand
    };
    let hca = VerbsHca::<GuestMemoryMmap>::open(name, 1).map_err(|e| backend(e.to_string()))?;
    let dir = SocketDir::new("vhca-bench-verbs").map_err(backend)?;
    let sock = dir.sock();
    let mut lids = 1u16..;
    let mut driver = Driver::new(
        hca,
        &sock,
        Limits::default(),
        Box::new(move |_| port(lids.next().unwrap_or(1))),
    )
    .map_err(|e| backend(e.to_string()))?;
    let gone = driver.stats.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let drv = std::thread::spawn(move || {
        let r = driver.run(&s2);
        (driver, r)
    });
    let measured = (|| -> Result<_, String> {
        let mut g = GuestProcess::spawn(guest_command(&sock))?;
        let mut rows = Vec::new();
        for size in SIZES {
            let n = iters(size, quick);
            let (mut ns, mut gs) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                ns.push(native_pingpong(&ctx, size, n)?);
                gs.push(g.ask(Test::Send(size))?);
            }
            rows.push(Row {
                test: Measure::SendLatency,
                arg: u64::from(size),
                native: median(&mut ns),
                guest: median(&mut gs),
            });
        }
        for pages in PAGES {
            let (mut ns, mut gs) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                ns.push(native_registration(&ctx, pages, reg_iters(pages, quick))?);
                gs.push(g.ask(Test::Reg(pages))?);
            }
            rows.push(Row {
                test: Measure::Registration,
                arg: pages,
                native: median(&mut ns),
                guest: median(&mut gs),
            });
        }
        let cmds = g.finish()?;
        Ok((rows, cmds))
    })();
    // The guests hung up: let the driver tear them down before it stops.
    let deadline = Instant::now() + Duration::from_secs(5);
    while gone.gone.load(Ordering::Relaxed) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let (driver, r) = drv
        .join()
        .map_err(|_| backend("driver thread panicked".into()))?;
    r.map_err(|e| backend(e.to_string()))?;
    drop(dir);
    let (rows, cmds) = measured.map_err(BenchError::Run)?;
    let device = driver.backend().device();
    Ok(Report {
        device: name.to_string(),
        link,
        rows,
        data_path_commands: cmds,
        posted: device.stats.posted,
        completions: device.stats.completions,
        device_objects_left: device.live(),
        rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of a report: the keys and values `ibkit bench vhca
    /// --device NAME --json` has always printed.
    #[test]
    fn a_report_serializes_to_the_benchs_json() {
        let r = Report {
            device: "rxe0".into(),
            link: Link::Roce,
            rows: vec![
                Row {
                    test: Measure::SendLatency,
                    arg: 64,
                    native: 2.5,
                    guest: 3.0,
                },
                Row {
                    test: Measure::Registration,
                    arg: 16,
                    native: 4.0,
                    guest: 5.0,
                },
            ],
            data_path_commands: 0,
            posted: 10,
            completions: 9,
            device_objects_left: 0,
            rounds: 3,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            concat!(
                r#"{"device":"rxe0","link":"RoCE","rows":["#,
                r#"{"test":"send_latency_us","arg":64,"native":2.5,"guest":3.0},"#,
                r#"{"test":"reg_us","arg":16,"native":4.0,"guest":5.0}],"#,
                r#""data_path_commands":0,"posted":10,"completions":9,"device_objects_left":0}"#
            )
        );
        assert_eq!(Link::InfiniBand.to_string(), "InfiniBand");
    }
}
