//! Benchmarks of vhca, measured the way the Xen-IB paper measured.
//!
//! [`run`]: the software HCA used directly ("native": an in-process hub,
//! privileged calls are function calls) against the same HCA used by
//! guests through vhca from a second process (memfd guest memory, request
//! ring, eventfds, the epoll driver loop), in one run: ping-pong latency
//! and streaming bandwidth over RC send/receive and RDMA write from 1 B to
//! 1 MiB with polling; latency with blocking completion events; and the
//! cost of registering 1 to 1,024 pages. Each side is two contexts (two
//! VMs) on one HCA; the data path's commands to the backend are counted
//! (the target is none). [`verbs::run`] does the like over a real HCA.
//!
//! # The guest process
//!
//! The guest side runs in a child process that the caller describes: [`run`]
//! takes a function that builds its [`Command`] from the backend's socket
//! path, and that command must end up calling [`guest`] with the path (a
//! binary typically runs itself with an argument that says so). The child's
//! standard input and output are pipes to the benchmark: it is sent one
//! test per line (`KEY ARG`, such as `send_latency_us 4096`) and answers
//! each with one number; at the end of its input it writes
//! `data_path_commands N` (the commands its data path sent to the backend)
//! and exits with success. Its standard error is the caller's.
//!
//! ```no_run
//! use std::process::Command;
//!
//! // In a binary: `--guest SOCK` makes it the guest side.
//! let args: Vec<String> = std::env::args().collect();
//! if let [_, flag, sock] = &args[..] {
//!     if flag == "--guest" {
//!         let (input, output) = (std::io::stdin().lock(), std::io::stdout());
//!         return Ok(vhca::bench::guest(sock.as_ref(), true, input, output)?);
//!     }
//! }
//! let report = vhca::bench::run(true, |sock| {
//!     let mut child = Command::new(std::env::current_exe().expect("this binary"));
//!     child.arg("--guest").arg(sock);
//!     child
//! })?;
//! println!("{}", serde_json::to_string(&report)?);
//! assert_eq!(report.data_path_commands.guest, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Placement
//!
//! Where the machine has more than one CPU, [`run`] pins the device loops
//! to CPU 0 and the VMs, its calling thread among them, to CPU 1, as a host
//! would place a backend and its guests; [`guest`] pins its calling thread
//! to CPU 1.

pub mod verbs;
mod workloads;

use crate::backend::Limits;
use crate::channel::{Driver, Hub, Socket};
use crate::device::SoftHca;
use crate::frontend::Context;
use serde::Serialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use vm_memory::GuestMemoryMmap;
use workloads::{connect, event_iters, plan, port, vm, wake_floor, Test, MEM};

/// The median of `v`, which it sorts in place (by [`f64::total_cmp`]).
///
/// For an odd length it is the middle value; for an even length, the mean
/// of the two middle values; for an empty slice, NaN.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
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

/// What [`run`] measured. Serialized (with serde), it is one JSON object
/// with these fields as keys, in this order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The floor under the blocking-event latency: bare eventfd wake-ups
    /// in the same placement and with the same hand-offs, microseconds one
    /// way (NaN, serialized as `null`, when no eventfd could be made).
    pub event_wake_floor_us: f64,
    /// The software HCA used directly.
    pub native: Results,
    /// The same HCA from the guest process through vhca.
    pub guest: Results,
    /// Messages the data-path tests sent, over both sides and all rounds.
    pub data_path_messages: u64,
    /// Commands those tests' data paths sent to the backend.
    pub data_path_commands: DataPathCommands,
    /// The guest side's backend, after the guests are gone.
    pub backend: BackendReport,
    /// Rounds per test (registrations and privileged calls ran three times
    /// as many).
    pub rounds: usize,
    /// Whether this was the quick run (fewer sizes and iterations).
    pub quick: bool,
}

/// One side's medians. The per-size (or per-page-count) results are
/// `(size or pages, value)` pairs in increasing size, serialized as
/// two-element arrays.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Results {
    /// RC send/receive ping-pong, microseconds one way, by message size.
    pub send_latency_us: Vec<(u64, f64)>,
    /// RDMA write, microseconds from post to completion, by message size.
    pub write_latency_us: Vec<(u64, f64)>,
    /// RC send bandwidth, MB/s (10⁶ bytes per second), by message size.
    pub send_bw_mbs: Vec<(u64, f64)>,
    /// RDMA write bandwidth, MB/s, by message size.
    pub write_bw_mbs: Vec<(u64, f64)>,
    /// Ping-pong with both sides blocking on completion events,
    /// microseconds one way.
    pub event_latency_us: f64,
    /// Ping-pong with each side polling its event ring instead of
    /// sleeping, microseconds one way.
    pub event_ring_latency_us: f64,
    /// A privileged call that does nothing else (QueryPort), microseconds.
    pub call_us: f64,
    /// Registering and deregistering memory, microseconds per pair, by
    /// number of pages.
    pub reg_us: Vec<(u64, f64)>,
}

impl Results {
    /// Records `x`, the median of test `t`.
    fn record(&mut self, t: Test, x: f64) {
        let row = (t.arg(), x);
        match t {
            Test::Send(_) => self.send_latency_us.push(row),
            Test::Write(_) => self.write_latency_us.push(row),
            Test::SendBw(_) => self.send_bw_mbs.push(row),
            Test::WriteBw(_) => self.write_bw_mbs.push(row),
            Test::Event => self.event_latency_us = x,
            Test::EventRing => self.event_ring_latency_us = x,
            Test::Call => self.call_us = x,
            Test::Reg(_) => self.reg_us.push(row),
        }
    }
}

/// Commands the data path sent to the backend, per side (registrations
/// and privileged calls are not counted: they are meant to cross).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DataPathCommands {
    /// From the native side's two contexts.
    pub native: u64,
    /// From the guest process's two contexts.
    pub guest: u64,
}

/// The guest side's backend and driver counters at the end of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BackendReport {
    /// Commands executed, in all.
    pub commands_executed: u64,
    /// Commands refused.
    pub commands_refused: u64,
    /// Events forwarded to the guests.
    pub events: u64,
    /// Notifications sent for them.
    pub notifications: u64,
    /// Guests gone and torn down.
    pub guests_torn_down: u64,
    /// Objects left on the device (none, when the teardown is complete).
    pub device_objects_left: usize,
    /// Pages translated and pinned by registrations.
    pub pages_pinned: u64,
    /// Registrations left unpinned (the memlock limit refused).
    pub registrations_unpinned: u64,
}

/// The guest side, run in the child process: two VMs over the backend's
/// socket `sock`; runs each test named on `input` and writes its result to
/// `output`, until the end of `input`; then the commands its data path
/// sent (see the [module documentation](self) for the protocol). `quick`
/// must be the benchmark's.
///
/// Pins the calling thread to CPU 1 when there are several.
pub fn guest(
    sock: &Path,
    quick: bool,
    mut input: impl BufRead,
    mut output: impl Write,
) -> Result<(), BenchError> {
    pin_to(1);
    let open = || -> Result<_, String> {
        let (s, mem, lay) = Socket::connect(sock, MEM).map_err(|e| e.to_string())?;
        Context::open(s, mem, lay).map_err(|e| e.to_string())
    };
    let setup = || -> Result<_, String> {
        let mut a = vm(open()?)?;
        let mut b = vm(open()?)?;
        connect(&mut a, &mut b)?;
        Ok((a, b))
    };
    let (mut a, mut b) = setup().map_err(BenchError::Run)?;
    let mut data_path = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        let t = Test::decode(&line).ok_or_else(|| BenchError::UnknownTest(line.clone()))?;
        let before = a.ctx.commands() + b.ctx.commands();
        let v = t.run(&mut a, &mut b, quick).map_err(BenchError::Run)?;
        if !matches!(t, Test::Reg(_) | Test::Call) {
            data_path += a.ctx.commands() + b.ctx.commands() - before;
        }
        writeln!(output, "{v}")?;
        output.flush()?;
    }
    writeln!(output, "data_path_commands {data_path}")?;
    Ok(output.flush()?)
}

/// Why a benchmark run, or its guest side, stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A backend (the in-process hub or the socket driver) could not
    /// start, or stopped with an error.
    #[error("backend: {0}")]
    Backend(String),
    /// Setting up a VM, a test through vhca, or the guest process failed.
    #[error("{0}")]
    Run(String),
    /// The guest side was asked for a test it does not know.
    #[error("unknown test {0:?}")]
    UnknownTest(String),
    /// Reading or writing the guest side's pipes failed.
    #[error("guest pipes: {0}")]
    Pipe(#[from] std::io::Error),
}

/// A directory of its own for the backend's socket, removed when dropped.
struct SocketDir(PathBuf);

impl SocketDir {
    fn new(name: &str) -> Result<SocketDir, String> {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let dir = SocketDir(dir);
        let _ = std::fs::remove_file(dir.sock());
        Ok(dir)
    }

    fn sock(&self) -> PathBuf {
        self.0.join("backend.sock")
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Native and guest side by side: both backends stay up, and each test
/// alternates native, guest, native, ... for its rounds (one in a `quick`
/// run, else five), so that drift of the machine hits both alike; the
/// medians are reported.
///
/// `guest_command` builds, from the backend's socket path, the command
/// that starts the guest process (see the [module documentation](self));
/// its standard input and output are set to pipes here. An error when a
/// backend cannot start, a test fails or times out, or the guest process
/// fails.
pub fn run(
    quick: bool,
    guest_command: impl FnOnce(&Path) -> Command,
) -> Result<Report, BenchError> {
    let rounds = if quick { 1 } else { 5 };
    let backend = |e: String| BenchError::Backend(e);
    // Native: an in-process hub, its device thread on CPU 0, the VMs on 1.
    let hub = Hub::new(SoftHca::<GuestMemoryMmap>::new(0x0002_c903_00ab_0001))
        .map_err(|e| backend(e.to_string()))?;
    let h = hub.clone();
    let dev = std::thread::spawn(move || {
        pin_to(0);
        h.run_device()
    });
    // Guest: the driver loop on a thread here (CPU 0), the VMs in a child.
    let dir = SocketDir::new("vhca-bench").map_err(backend)?;
    let sock = dir.sock();
    let mut lids = 1u16..;
    let mut driver = Driver::new(
        SoftHca::<GuestMemoryMmap>::new(0x0002_c903_00ab_0002),
        &sock,
        Limits::default(),
        Box::new(move |_| port(lids.next().unwrap_or(1))),
    )
    .map_err(|e| backend(e.to_string()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let driver_rest = driver.rest_handle();
    let drv = std::thread::spawn(move || {
        pin_to(0);
        let r = driver.run(&s2);
        (driver, r)
    });
    pin_to(1);
    let result = side_by_side(&hub, &driver_rest, guest_command(&sock), quick, rounds);
    hub.stop();
    let _ = dev.join();
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let (driver, r) = drv
        .join()
        .map_err(|_| backend("driver thread panicked".into()))?;
    r.map_err(|e| backend(e.to_string()))?;
    drop(dir);
    let sides = result.map_err(BenchError::Run)?;
    let b = driver.backend();
    Ok(Report {
        event_wake_floor_us: wake_floor(event_iters(quick)),
        native: sides.native,
        guest: sides.guest,
        data_path_messages: sides.messages,
        data_path_commands: sides.commands,
        backend: BackendReport {
            commands_executed: b.stats.executed,
            commands_refused: b.stats.refused,
            events: b.stats.events,
            notifications: b.stats.notifications,
            guests_torn_down: driver.stats.gone.load(Ordering::Relaxed),
            device_objects_left: b.device().live(),
            pages_pinned: b.device().stats.pages_pinned,
            registrations_unpinned: b.device().stats.unpinned,
        },
        rounds,
        quick,
    })
}

/// The guest side in a child process, asked for one test at a time.
struct GuestProcess {
    child: std::process::Child,
    to: std::process::ChildStdin,
    from: BufReader<std::process::ChildStdout>,
}

impl GuestProcess {
    /// Starts `command` with pipes for its standard input and output.
    fn spawn(mut command: Command) -> Result<GuestProcess, String> {
        let mut child = command
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

/// What [`side_by_side`] measured.
struct Sides {
    native: Results,
    guest: Results,
    commands: DataPathCommands,
    messages: u64,
}

fn side_by_side(
    hub: &Arc<Hub<SoftHca<GuestMemoryMmap>>>,
    driver_rest: &AtomicBool,
    guest_command: Command,
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
    let mut g = GuestProcess::spawn(guest_command)?;
    let mut nat = Results::default();
    let mut gst = Results::default();
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
            gs.push(g.ask(t)?);
            messages += t.messages(quick);
        }
        nat.record(t, median(&mut ns));
        gst.record(t, median(&mut gs));
    }
    let guest_cmds = g.finish()?;
    Ok(Sides {
        native: nat,
        guest: gst,
        commands: DataPathCommands {
            native: native_cmds,
            guest: guest_cmds,
        },
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [7.5]), 7.5);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
        let mut v = [5.0, -1.0, 0.0];
        median(&mut v);
        assert_eq!(v, [-1.0, 0.0, 5.0], "sorted in place");
    }

    /// Every test of the plan survives the line it is sent to the guest
    /// process as.
    #[test]
    fn the_plan_round_trips_through_its_lines() {
        for quick in [true, false] {
            for t in plan(quick) {
                assert_eq!(Test::decode(&format!("{}\n", t.encode())), Some(t));
            }
        }
        assert_eq!(Test::decode("reg_us 99999"), Some(Test::Reg(1024)));
        assert_eq!(Test::decode("send_latency_us 4294967296"), None);
        assert_eq!(Test::decode("nothing 1"), None);
    }

    /// The JSON of a report: every key, in order, nested as `ibkit bench
    /// vhca --json` has always printed it.
    #[test]
    fn a_report_serializes_to_the_benchs_json() {
        let mut side = Results::default();
        for t in plan(true) {
            side.record(t, 1.5);
        }
        let r = Report {
            event_wake_floor_us: f64::NAN,
            native: side.clone(),
            guest: side,
            data_path_messages: 7,
            data_path_commands: DataPathCommands::default(),
            backend: BackendReport::default(),
            rounds: 1,
            quick: true,
        };
        let v = serde_json::to_value(&r).unwrap();
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(
            keys(&v),
            [
                "event_wake_floor_us",
                "native",
                "guest",
                "data_path_messages",
                "data_path_commands",
                "backend",
                "rounds",
                "quick"
            ]
        );
        assert_eq!(
            keys(&v["native"]),
            [
                "send_latency_us",
                "write_latency_us",
                "send_bw_mbs",
                "write_bw_mbs",
                "event_latency_us",
                "event_ring_latency_us",
                "call_us",
                "reg_us"
            ]
        );
        assert_eq!(keys(&v["data_path_commands"]), ["native", "guest"]);
        assert_eq!(keys(&v["backend"]).len(), 8);
        assert!(v["event_wake_floor_us"].is_null(), "NaN is null");
        assert_eq!(v["guest"]["event_latency_us"], 1.5);
        assert_eq!(
            v["native"]["send_latency_us"],
            serde_json::json!([
                [1, 1.5],
                [16, 1.5],
                [256, 1.5],
                [4096, 1.5],
                [65536, 1.5],
                [1048576, 1.5]
            ])
        );
        assert_eq!(
            v["guest"]["reg_us"],
            serde_json::json!([
                [1, 1.5],
                [4, 1.5],
                [16, 1.5],
                [64, 1.5],
                [256, 1.5],
                [1024, 1.5]
            ])
        );
    }

    /// The guest side's protocol, in this process: a driver for two VMs,
    /// a test asked, a number answered, and at the end the data path's
    /// commands.
    #[test]
    fn the_guest_side_answers_each_line_then_its_commands() {
        let dir = SocketDir::new("vhca-bench-test").unwrap();
        let sock = dir.sock();
        let mut lids = 1u16..;
        let mut driver = Driver::new(
            SoftHca::<GuestMemoryMmap>::new(7),
            &sock,
            Limits::default(),
            Box::new(move |_| port(lids.next().unwrap_or(1))),
        )
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let drv = std::thread::spawn(move || driver.run(&s2));
        let mut out = Vec::new();
        let asked = format!("{}\n{}\n", Test::Call.encode(), Test::Send(16).encode());
        let r = guest(&sock, true, asked.as_bytes(), &mut out);
        let unknown = guest(&sock, true, &b"what 1\n"[..], Vec::new());
        stop.store(true, Ordering::Relaxed);
        drv.join().unwrap().unwrap();
        r.unwrap();
        assert!(
            matches!(&unknown, Err(BenchError::UnknownTest(l)) if l == "what 1\n"),
            "{unknown:?}"
        );
        assert_eq!(
            unknown.unwrap_err().to_string(),
            "unknown test \"what 1\\n\""
        );
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        for l in &lines[..2] {
            assert!(l.parse::<f64>().unwrap() > 0.0, "{out}");
        }
        assert_eq!(lines[2], "data_path_commands 0");
    }
}
