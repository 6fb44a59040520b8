//! The driver loop against hostile connections: silence, malformed hellos,
//! lies about memory, layouts outside it, rings broken after set-up. Each is
//! refused or torn down, nothing is left of it, and a well-behaved guest is
//! served all along.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use vhca::backend::{Limits, PortView};
use vhca::channel::{Driver, DriverStats, Socket};
use vhca::device::SoftHca;
use vhca::frontend::{Context, Transport};
use vhca::ring::GuestRing;
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

type D = Driver<SoftHca<GuestMemoryMmap>>;

struct Running {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<D>,
    stats: Arc<DriverStats>,
    path: PathBuf,
    dir: PathBuf,
}

fn start(name: &str) -> Running {
    let dir = std::env::temp_dir().join(format!("vhca-driver-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let mut lid = 20u16;
    let mut d = Driver::new(
        SoftHca::new(1),
        &path,
        Limits::default(),
        Box::new(move |_| {
            lid += 1;
            PortView {
                lid,
                port_guid: u64::from(lid),
                state: 4,
            }
        }),
    )
    .unwrap();
    let stats = d.stats.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = thread::spawn(move || {
        d.run(&s).unwrap();
        d
    });
    Running {
        stop,
        thread,
        stats,
        path,
        dir,
    }
}

fn finish(r: Running) -> D {
    r.stop.store(true, Ordering::Relaxed);
    let d = r.thread.join().unwrap();
    let _ = std::fs::remove_dir_all(&r.dir);
    d
}

fn wait_for(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out: {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// A hello as a guest sends it: magic, memory size, event ring base, and
/// the memory file and three eventfds.
fn hello(
    path: &Path,
    magic: &[u8; 4],
    claimed: u64,
    real: u64,
    events: u64,
    nfds: usize,
) -> UnixStream {
    let mem = vhca::shm::memfd("hostile", real).unwrap();
    let fds: Vec<EventFd> = (0..3).map(|_| EventFd::new(0).unwrap()).collect();
    let s = UnixStream::connect(path).unwrap();
    let mut h = [0u8; 24];
    h[..4].copy_from_slice(magic);
    h[8..16].copy_from_slice(&claimed.to_le_bytes());
    h[16..24].copy_from_slice(&events.to_le_bytes());
    let mut raw = vec![mem.as_raw_fd()];
    raw.extend(fds.iter().map(|e| e.as_raw_fd()));
    s.send_with_fds(&[&h[..]], &raw[..nfds]).unwrap();
    s
}

fn good_guest(path: &Path) -> Context<Socket> {
    let (s, mem, lay) = Socket::connect(path, 1 << 20).unwrap();
    Context::open(s, mem, lay).unwrap()
}

#[test]
fn a_silent_connection_holds_nobody_up_and_is_dropped() {
    let r = start("silent");
    let _silent = UnixStream::connect(&r.path).unwrap();
    let t0 = Instant::now();
    let mut g = good_guest(&r.path);
    assert!(g.query_port().is_ok());
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "the silent one held the loop"
    );
    wait_for("the silent connection expires", || {
        r.stats.refused.load(Ordering::Relaxed) == 1
    });
    drop(g);
    wait_for("teardown", || r.stats.gone.load(Ordering::Relaxed) == 1);
    let d = finish(r);
    assert_eq!(d.backend().device().live(), 0);
}

#[test]
fn malformed_and_lying_hellos_are_refused_and_leave_nothing() {
    let r = start("lies");
    let m = 1u64 << 20;
    let cases = [
        hello(&r.path, b"XXXX", m, m, 8192, 4),       // wrong magic
        hello(&r.path, b"VHCA", m, m, 8192, 2),       // too few descriptors
        hello(&r.path, b"VHCA", m, 1 << 16, 8192, 4), // memory smaller than claimed
        hello(&r.path, b"VHCA", 1 << 40, 1 << 16, 8192, 4), // memory size out of range
        hello(&r.path, b"VHCA", m, m, m - 16, 4),     // event ring past the end
        hello(&r.path, b"VHCA", m, m, 8193, 4),       // event ring misaligned
    ];
    wait_for("all refused", || {
        r.stats.refused.load(Ordering::Relaxed) == cases.len() as u64
    });
    assert_eq!(r.stats.connected.load(Ordering::Relaxed), 0);
    // A good guest is served after all that.
    let mut g = good_guest(&r.path);
    assert_eq!(g.query_port().unwrap().0, 21, "the first guest to connect");
    drop(g);
    drop(cases);
    wait_for("teardown", || r.stats.gone.load(Ordering::Relaxed) == 1);
    let d = finish(r);
    assert_eq!(d.backend().device().live(), 0);
    assert_eq!(d.backend().device().contexts(), 0);
}

#[test]
fn a_guest_that_breaks_its_ring_is_torn_down_and_the_other_goes_on() {
    let r = start("broken");
    let mut good = good_guest(&r.path);
    let (mut s, mem, lay) = Socket::connect(&r.path, 1 << 20).unwrap();
    // The hostile one sets up like anyone, allocates, then claims a
    // thousand requests in a 32-slot ring.
    s.call(vhca::proto::Command::OpenDevice).unwrap();
    s.call(vhca::proto::Command::AllocPd).unwrap();
    let _ = lay;
    GuestRing::poke_indices(&mem, 0, 1000, 0);
    s.wake();
    wait_for("the hostile guest torn down", || {
        r.stats.gone.load(Ordering::Relaxed) == 1
    });
    assert!(good.alloc_pd().is_ok());
    drop(good);
    wait_for("teardown", || r.stats.gone.load(Ordering::Relaxed) == 2);
    let d = finish(r);
    assert_eq!(d.backend().device().live(), 0);
    drop(s);
}
