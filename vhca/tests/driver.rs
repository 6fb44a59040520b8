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
    start_with(name, |_| {})
}

/// As [`start`], with `setup` applied to the driver before it runs.
fn start_with(name: &str, setup: impl FnOnce(&mut D)) -> Running {
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
    setup(&mut d);
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

/// Memory a guest could shrink under the backend's mapping is refused at
/// the handshake: an access past the new end would kill the backend with
/// SIGBUS, and every guest with it. Memory made as the frontend makes it
/// cannot be shrunk at all.
#[test]
fn memory_not_sealed_against_shrinking_is_refused() {
    let r = start("unsealed");
    let m = 1u64 << 20;
    let mem = vhca::shm::unsealed_memfd("hostile", m).unwrap();
    let fds: Vec<EventFd> = (0..3).map(|_| EventFd::new(0).unwrap()).collect();
    let s = UnixStream::connect(&r.path).unwrap();
    let mut h = [0u8; 24];
    h[..4].copy_from_slice(b"VHCA");
    h[8..16].copy_from_slice(&m.to_le_bytes());
    h[16..24].copy_from_slice(&8192u64.to_le_bytes());
    let mut raw = vec![mem.as_raw_fd()];
    raw.extend(fds.iter().map(|e| e.as_raw_fd()));
    s.send_with_fds(&[&h[..]], &raw).unwrap();
    wait_for("refused", || r.stats.refused.load(Ordering::Relaxed) == 1);
    assert_eq!(r.stats.connected.load(Ordering::Relaxed), 0);
    // The frontend's memory: truncating it fails.
    let (_, file) = vhca::shm::new_guest_memory(1 << 20).unwrap();
    let e = file.set_len(4096).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
    // And a good guest is served.
    let mut g = good_guest(&r.path);
    assert!(g.query_port().is_ok());
    drop(g);
    drop(s);
    wait_for("teardown", || r.stats.gone.load(Ordering::Relaxed) == 1);
    finish(r);
}

/// A guest hands over blocking eventfds already at their highest count and
/// then waits for an answer: the driver's write to its call eventfd would
/// block for good. It is switched to non-blocking instead, so the full
/// counter costs that guest its wake-up (its answer is in its ring all the
/// same), and the other guest is served at once. A pipe in place of an
/// eventfd is refused at the handshake.
#[test]
fn a_full_blocking_eventfd_costs_only_its_guest() {
    use vhca::proto::Command;
    let r = start("fullfd");
    let (mem, file) = vhca::shm::new_guest_memory(1 << 20).unwrap();
    let full = || {
        let e = EventFd::new(0).unwrap(); // blocking
        e.write(u64::MAX - 1).unwrap(); // the highest count
        e
    };
    let (kick, call, notify) = (EventFd::new(0).unwrap(), full(), full());
    let kick2 = kick.try_clone().unwrap();
    let (_s, _) = Socket::connect_with(&r.path, mem.clone(), &file, kick, call, notify).unwrap();
    let mut ring = GuestRing::init(&mem, 0).unwrap();
    assert!(ring.push(&mem, &Command::OpenDevice.encode(1)));
    ring.set_waiting(&mem, true);
    kick2.write(1).unwrap();
    wait_for("the hostile guest's answer", || ring.peek(&mem));
    let t0 = Instant::now();
    let mut g = good_guest(&r.path);
    assert!(g.query_port().is_ok());
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "the driver was held up"
    );
    // A pipe where the call eventfd goes.
    let mut p = [0i32; 2];
    // SAFETY: pipe writes two new descriptors into `p`.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    // SAFETY: both are new and ours alone.
    let (rd, wr) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::fs::File::from_raw_fd(p[0]),
            std::fs::File::from_raw_fd(p[1]),
        )
    };
    drop(rd); // its reader gone: a write would raise SIGPIPE
    let m = 1u64 << 20;
    let memf = vhca::shm::memfd("hostile", m).unwrap();
    let (k, n) = (EventFd::new(0).unwrap(), EventFd::new(0).unwrap());
    let s = UnixStream::connect(&r.path).unwrap();
    let mut h = [0u8; 24];
    h[..4].copy_from_slice(b"VHCA");
    h[8..16].copy_from_slice(&m.to_le_bytes());
    h[16..24].copy_from_slice(&8192u64.to_le_bytes());
    s.send_with_fds(
        &[&h[..]],
        &[
            memf.as_raw_fd(),
            k.as_raw_fd(),
            wr.as_raw_fd(),
            n.as_raw_fd(),
        ],
    )
    .unwrap();
    wait_for("the pipe refused", || {
        r.stats.refused.load(Ordering::Relaxed) == 1
    });
    assert!(g.alloc_pd().is_ok());
    drop(g);
    drop(_s);
    wait_for("teardown", || r.stats.gone.load(Ordering::Relaxed) == 2);
    finish(r);
}

/// Past the driver's limits across guests (guests at once, memory mapped
/// over all of them) a new guest is refused at the handshake, and one
/// that leaves makes room again.
#[test]
fn limits_across_guests_refuse_the_next_guest() {
    let r = start_with("global", |d| {
        d.set_limits(vhca::channel::DriverLimits {
            domains: 2,
            pending: 4,
            memory: 5 << 19, // 2.5 MiB
        })
    });
    let (path, stats) = (r.path.clone(), r.stats.clone());
    let mut a = good_guest(&path);
    let mut b = good_guest(&path);
    assert!(a.query_port().is_ok() && b.query_port().is_ok());
    // A third guest: refused, its calls fail.
    let (s3, m3, l3) = Socket::connect(&path, 1 << 20).unwrap();
    wait_for("the third refused", || {
        stats.refused.load(Ordering::Relaxed) == 1
    });
    drop((s3, m3, l3));
    drop(b);
    wait_for("one gone", || stats.gone.load(Ordering::Relaxed) == 1);
    // Room for a guest again, but not for 2 MiB more memory.
    let (s4, m4, l4) = Socket::connect(&path, 2 << 20).unwrap();
    wait_for("too much memory refused", || {
        stats.refused.load(Ordering::Relaxed) == 2
    });
    drop((s4, m4, l4));
    let mut c = good_guest(&path);
    assert!(c.query_port().is_ok() && a.query_port().is_ok());
    drop((a, c));
    wait_for("teardown", || stats.gone.load(Ordering::Relaxed) == 3);
    let d = finish(r);
    assert_eq!(d.backend().device().live(), 0);
}
