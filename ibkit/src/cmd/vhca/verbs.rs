//! `ibkit bench vhca --device NAME`: vhca over a real HCA. Native is the
//! HCA used directly through verbs-sys (an RC ping-pong between two QPs,
//! registration of memory); guest is two VMs in a second process driving
//! the same HCA through vhca (the socket driver and `VerbsHca`, whose data
//! path is mediated: each work request is posted to the HCA by the
//! backend's device loop). Alternating rounds, medians, as the software
//! HCA's bench does.

use super::{iters, port, GuestProcess, Test};
use crate::cmd::stats::median;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use verbs_sys::qp::{Qp, QpCaps, QpType, RcPeer, SendOp, Transition};
use verbs_sys::verbs::{Access, Completion, Context, Cq, Grh, Mr};
use vhca::backend::Limits;
use vhca::channel::Driver;
use vhca::device::verbs::VerbsHca;
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
    super::round_trips(n, &mut go).map(|us| us / 2.0)
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

/// `ibkit bench vhca --device NAME`.
pub fn run(name: &str, json_out: bool, quick: bool) -> crate::cmd::Outcome {
    let rounds = if quick { 1 } else { 3 };
    let ctx = Context::open(name).map_err(|e| e.to_string())?;
    let link = if ctx.query_port(1).map_err(|e| e.to_string())?.is_ethernet() {
        "RoCE"
    } else {
        "InfiniBand"
    };
    let hca = VerbsHca::<GuestMemoryMmap>::open(name, 1).map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("ibkit-vhca-verbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let sock = dir.join("backend.sock");
    let _ = std::fs::remove_file(&sock);
    let mut lids = 1u16..;
    let mut driver = Driver::new(
        hca,
        &sock,
        Limits::default(),
        Box::new(move |_| port(lids.next().unwrap_or(1))),
    )
    .map_err(|e| e.to_string())?;
    let gone = driver.stats.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let drv = std::thread::spawn(move || {
        let r = driver.run(&s2);
        (driver, r)
    });
    let measured = (|| -> Result<_, String> {
        let mut g = GuestProcess::spawn(&sock, quick)?;
        let mut rows = Vec::new();
        for size in SIZES {
            let n = iters(size, quick);
            let (mut ns, mut gs) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                ns.push(native_pingpong(&ctx, size, n)?);
                gs.push(g.ask(Test::Send(size))?);
            }
            rows.push((
                "send_latency_us",
                u64::from(size),
                median(&mut ns),
                median(&mut gs),
            ));
        }
        for pages in PAGES {
            let (mut ns, mut gs) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                ns.push(native_registration(&ctx, pages, reg_iters(pages, quick))?);
                gs.push(g.ask(Test::Reg(pages))?);
            }
            rows.push(("reg_us", pages, median(&mut ns), median(&mut gs)));
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
    let (driver, r) = drv.join().map_err(|_| "driver thread panicked")?;
    r.map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    let (rows, cmds) = measured?;
    let stats = driver.backend().device().stats;
    if json_out {
        let r: Vec<_> = rows
            .iter()
            .map(|(k, a, n, g)| json!({"test": k, "arg": a, "native": n, "guest": g}))
            .collect();
        println!(
            "{}",
            json!({
                "device": name, "link": link, "rows": r, "data_path_commands": cmds,
                "posted": stats.posted, "completions": stats.completions,
                "device_objects_left": driver.backend().device().live(),
            })
        );
    } else {
        println!(
            "vhca over {name} ({link}): the HCA through verbs-sys (native) against a guest process through vhca's VerbsHca (mediated data path); medians of {rounds}"
        );
        println!(
            "{:<34} {:>12} {:>12} {:>12}",
            "", "native", "guest", "guest/native"
        );
        for (k, a, n, g) in &rows {
            let (label, ratio) = if *k == "reg_us" {
                (
                    format!("register + deregister {a} page(s)"),
                    format!("{:+.0}%", (g / n - 1.0) * 100.0),
                )
            } else {
                (
                    format!("RC ping-pong one way, {a} B"),
                    format!("{:.0}%", n / g * 100.0),
                )
            };
            println!("{label:<34} {n:>9.2} µs {g:>9.2} µs {ratio:>12}");
        }
        println!(
            "Backend commands from the guests' data path: {cmds}. The device loop posted {} work requests and moved {} completions; {} objects left on the HCA.",
            stats.posted,
            stats.completions,
            driver.backend().device().live()
        );
    }
    crate::cmd::check(cmds == 0, || {
        format!("the guests' data path reached the backend: {cmds} commands")
    })
}
