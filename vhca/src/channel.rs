//! Channels between frontends and a backend, and the backend's driver
//! loop.
//!
//! - [`Hub`] keeps a backend in-process: frontends reach it through
//!   [`Direct`] (a call is a function call under a lock) and a thread runs
//!   the device. This is how an application uses the HCA natively, and how
//!   tests drive the backend without a second process.
//! - [`Driver`] is the backend's loop for guests in other processes, in
//!   the manner of a vhost-user backend: each guest connects over a unix
//!   socket and passes its memory (a memfd) and three eventfds (kick:
//!   guest to backend; call: responses ready; notify: events ready). The
//!   guest's requests travel on the request/response ring in its memory
//!   ([`crate::ring`]), its events on the event ring ([`crate::event`]).
//!   The driver answers with the UAR page's file once the guest allocated
//!   it. When the socket closes, everything the guest held is torn down.
//!   [`Socket`] is the guest's end.
//!
//! The software HCA has no hardware to watch its doorbells, so the loop
//! polls while there is work and for a while after; then it tells the
//! guests (the UAR's asleep flag) and sleeps in `epoll_wait` until a kick.

use crate::backend::{Backend, Limits, PortView};
use crate::device::Device;
use crate::event::EVENT_RING_BYTES;
use crate::frontend::{Layout, Transport};
use crate::handles::DomainId;
use crate::proto::{Command, Refusal, Response};
use crate::ring::{BackendRing, GuestRing, RING_BYTES};
use crate::shm;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// How long the device loop keeps polling after the last work.
pub const HOT: Duration = Duration::from_millis(2);

/// How long a guest waiting for a response polls the ring before it
/// sleeps on the call eventfd. A sleeping vCPU costs a wake-up (tens of
/// microseconds on a virtual machine's idle CPU); a registration of a
/// thousand pages takes about a millisecond.
pub const CALL_SPIN: Duration = Duration::from_millis(2);

/// Waits until `fd` is readable or `timeout` passes; true when readable.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> bool {
    wait_any(&[fd], timeout) != 0
}

/// Waits up to `timeout` for any of `fds` (at most two) to become
/// readable; which did, as bits (1: the first, 2: the second).
fn wait_any(fds: &[RawFd], timeout: Duration) -> u32 {
    let none = libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    };
    let mut p = [none; 2];
    let n = fds.len().min(2);
    for (slot, &fd) in p.iter_mut().zip(&fds[..n]) {
        slot.fd = fd;
        slot.events = libc::POLLIN;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `n` valid pollfds and a valid timespec, on our stack.
    let r = unsafe { libc::ppoll(p.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
    if r <= 0 {
        return 0;
    }
    (0..n)
        .filter(|&i| p[i].revents != 0)
        .fold(0, |m, i| m | 1 << i)
}

fn drain(e: &EventFd) {
    let _ = e.read();
}

/// Where the channels put things in a guest's memory.
fn layout(len: u64) -> (u64, Layout) {
    let ring = 0;
    let events = RING_BYTES.next_multiple_of(4096);
    let heap = (events + EVENT_RING_BYTES).next_multiple_of(4096);
    (
        ring,
        Layout {
            event_base: events,
            heap: (heap, len),
        },
    )
}

/// An in-process backend: frontends attach with [`Hub::attach`], and
/// [`Hub::run_device`] (on a thread of its own) runs the device.
pub struct Hub<D: Device<GuestMemoryMmap>> {
    backend: Mutex<Backend<GuestMemoryMmap, D>>,
    notifiers: Mutex<HashMap<DomainId, Arc<EventFd>>>,
    wake: EventFd,
    stop: AtomicBool,
    /// Frontends waiting for the lock: the device loop stands back.
    callers: AtomicUsize,
    /// Asked to stop polling now rather than after [`HOT`].
    rest: Arc<AtomicBool>,
    /// Sleeps the device itself ended ([`Device::wake_fd`]).
    device_wakes: AtomicU64,
}

impl<D: Device<GuestMemoryMmap>> Hub<D> {
    /// A hub around a backend owning `device`.
    pub fn new(device: D) -> io::Result<Arc<Hub<D>>> {
        Ok(Arc::new(Hub {
            backend: Mutex::new(Backend::new(device)),
            notifiers: Mutex::new(HashMap::new()),
            wake: EventFd::new(EFD_NONBLOCK)?,
            stop: AtomicBool::new(false),
            callers: AtomicUsize::new(0),
            rest: Arc::new(AtomicBool::new(false)),
            device_wakes: AtomicU64::new(0),
        }))
    }

    /// How many times the device's own file ([`Device::wake_fd`]) woke
    /// the sleeping loop.
    pub fn device_wakes(&self) -> u64 {
        self.device_wakes.load(Ordering::Relaxed)
    }

    /// The backend, locked.
    pub fn backend(&self) -> std::sync::MutexGuard<'_, Backend<GuestMemoryMmap, D>> {
        self.backend.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new guest of `len` bytes of memory: its transport, memory and
    /// layout, ready for [`crate::frontend::Context::open`].
    pub fn attach(
        self: &Arc<Self>,
        len: usize,
        limits: Limits,
        port: PortView,
    ) -> io::Result<(Direct<D>, GuestMemoryMmap, Layout)> {
        let (mem, _file) = shm::new_guest_memory(len)?;
        let (_, lay) = layout(len as u64);
        let notify = Arc::new(EventFd::new(EFD_NONBLOCK)?);
        let dom = {
            let mut b = self.backend();
            let dom = b.add_domain(mem.clone(), limits, port);
            b.attach_events(dom, lay.event_base)
                .map_err(|r| io::Error::other(format!("{r:?}")))?;
            dom
        };
        self.notifiers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(dom, notify.clone());
        Ok((
            Direct {
                hub: self.clone(),
                dom,
                notify,
                commands: 0,
            },
            mem,
            lay,
        ))
    }

    /// Runs the device until [`Hub::stop`]: polls while there is work,
    /// sleeps on the wake eventfd when idle.
    pub fn run_device(&self) {
        let mut notify = Vec::new();
        let mut last = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            if self.callers.load(Ordering::Acquire) > 0 {
                std::hint::spin_loop();
                continue;
            }
            let work = self.pass(&mut notify);
            if work > 0 {
                last = Instant::now();
            } else if last.elapsed() > HOT || self.rest.swap(false, Ordering::Relaxed) {
                self.backend().device_mut().idle(true);
                // Woken by a guest, or work found on the re-check: hot
                // again. A timeout leaves the loop idle (no spinning burst
                // every time it looks).
                let mut fds = vec![self.wake.as_raw_fd()];
                fds.extend(self.backend().device().wake_fd().map(|f| f.as_raw_fd()));
                let woken = self.pass(&mut notify) > 0 || {
                    let w = wait_any(&fds, Duration::from_millis(20));
                    drain(&self.wake);
                    if w & 2 != 0 {
                        self.device_wakes.fetch_add(1, Ordering::Relaxed);
                    }
                    w != 0
                };
                self.backend().device_mut().idle(false);
                if woken {
                    last = Instant::now();
                }
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// One pass of the device, and the notifications it calls for.
    fn pass(&self, notify: &mut Vec<DomainId>) -> usize {
        notify.clear();
        let work = self.backend().poll(notify);
        if !notify.is_empty() {
            let n = self.notifiers.lock().unwrap_or_else(|e| e.into_inner());
            for d in notify.iter() {
                if let Some(e) = n.get(d) {
                    let _ = e.write(1);
                }
            }
        }
        work + notify.len()
    }

    /// Makes the device loop stop polling and sleep now, until the next
    /// doorbell or call (a benchmark's other side is about to run).
    pub fn rest(&self) {
        self.rest.store(true, Ordering::Relaxed);
    }

    /// Stops [`Hub::run_device`].
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.wake.write(1);
    }
}

/// A frontend's transport to an in-process [`Hub`].
pub struct Direct<D: Device<GuestMemoryMmap>> {
    hub: Arc<Hub<D>>,
    dom: DomainId,
    notify: Arc<EventFd>,
    commands: u64,
}

impl<D: Device<GuestMemoryMmap>> Direct<D> {
    /// The domain this transport speaks for.
    pub fn domain(&self) -> DomainId {
        self.dom
    }
}

impl<D: Device<GuestMemoryMmap>> Drop for Direct<D> {
    fn drop(&mut self) {
        self.hub
            .notifiers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.dom);
        self.hub.backend().remove_domain(self.dom);
    }
}

impl<D: Device<GuestMemoryMmap>> Transport for Direct<D> {
    fn call(&mut self, cmd: Command) -> Result<[u64; 7], Refusal> {
        self.commands += 1;
        self.hub.callers.fetch_add(1, Ordering::AcqRel);
        let r = self.hub.backend().run(self.dom, cmd);
        self.hub.callers.fetch_sub(1, Ordering::AcqRel);
        r
    }

    fn uar_file(&mut self) -> Result<File, Refusal> {
        let b = self.hub.backend();
        let fd = b.uar_fd(self.dom).ok_or(Refusal::NotOpen)?;
        fd.try_clone_to_owned()
            .map(File::from)
            .map_err(|_| Refusal::Device)
    }

    fn wait_event(&mut self, timeout: Duration) -> bool {
        let r = wait_readable(self.notify.as_raw_fd(), timeout);
        drain(&self.notify);
        r
    }

    fn wake(&mut self) {
        let _ = self.hub.wake.write(1);
    }

    fn commands(&self) -> u64 {
        self.commands
    }
}

const MAGIC: &[u8; 4] = b"VHCA";
/// Bytes of a hello: magic, 4 reserved, memory size, event ring base.
pub const HELLO_LEN: usize = 24;

/// What a guest's hello claims, once its bytes are checked: the size of
/// the memory it hands over and where its event ring is. The memory file
/// and three eventfds come with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Bytes of guest memory (64 KiB to 64 GiB).
    pub mem_len: u64,
    /// Guest address of the event ring.
    pub events: u64,
}

impl Hello {
    /// Checks a hello's `bytes` (as many as were read) that came with
    /// `nfds` descriptors.
    pub fn parse(bytes: &[u8], nfds: usize) -> io::Result<Hello> {
        if bytes.len() != HELLO_LEN || &bytes[..4] != MAGIC || nfds != 4 {
            return Err(io::Error::other("malformed hello"));
        }
        let word = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let (mem_len, events) = (word(8), word(16));
        if !(1 << 16..=1 << 36).contains(&mem_len) {
            return Err(io::Error::other("guest memory size out of range"));
        }
        Ok(Hello { mem_len, events })
    }

    /// Checks that the request ring (at 0) and the event ring fit in `mem`,
    /// before anything is set up for the guest.
    pub fn check_layout(&self, mem: &GuestMemoryMmap) -> io::Result<()> {
        if crate::event::EventWriter::attach(mem, self.events).is_none()
            || !vm_memory::GuestMemory::check_range(
                mem,
                vm_memory::GuestAddress(0),
                RING_BYTES as usize,
                vm_memory::Permissions::ReadWrite,
            )
        {
            return Err(io::Error::other("guest layout outside its memory"));
        }
        Ok(())
    }
}

/// The guest's end of a [`Driver`] connection.
pub struct Socket {
    stream: UnixStream,
    mem: GuestMemoryMmap,
    ring: GuestRing,
    kick: EventFd,
    call: EventFd,
    notify: EventFd,
    seq: u32,
    commands: u64,
    kicks: u64,
}

impl Socket {
    /// Kicks sent (requests the backend was not polling for).
    pub fn kicks(&self) -> u64 {
        self.kicks
    }

    /// Connects to the driver at `path` with `len` bytes of new guest
    /// memory: the transport, the memory and its layout.
    pub fn connect(path: &Path, len: usize) -> io::Result<(Socket, GuestMemoryMmap, Layout)> {
        let (mem, file) = shm::new_guest_memory(len)?;
        let (kick, call, notify) = (
            EventFd::new(EFD_NONBLOCK)?,
            EventFd::new(EFD_NONBLOCK)?,
            EventFd::new(EFD_NONBLOCK)?,
        );
        let (s, lay) = Socket::connect_with(path, mem.clone(), &file, kick, call, notify)?;
        Ok((s, mem, lay))
    }

    /// Connects with memory and eventfds of the caller's making: `mem`,
    /// backed by `file` (which the driver refuses unless it is a memfd
    /// sealed against shrinking, as [`shm::memfd`] makes them), and the
    /// kick, call and notify eventfds. For integrators that bring their own
    /// memory, and for tests of what the driver does with bad ones.
    pub fn connect_with(
        path: &Path,
        mem: GuestMemoryMmap,
        file: &File,
        kick: EventFd,
        call: EventFd,
        notify: EventFd,
    ) -> io::Result<(Socket, Layout)> {
        use vm_memory::GuestMemoryBackend;
        let len = mem.last_addr().0 as usize + 1;
        let (ring_base, lay) = layout(len as u64);
        let ring = GuestRing::init(&mem, ring_base).ok_or(io::ErrorKind::InvalidInput)?;
        let stream = UnixStream::connect(path)?;
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(MAGIC);
        hello[8..16].copy_from_slice(&(len as u64).to_le_bytes());
        hello[16..24].copy_from_slice(&lay.event_base.to_le_bytes());
        stream
            .send_with_fds(
                &[&hello[..]],
                &[
                    file.as_raw_fd(),
                    kick.as_raw_fd(),
                    call.as_raw_fd(),
                    notify.as_raw_fd(),
                ],
            )
            .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
        Ok((
            Socket {
                stream,
                mem,
                ring,
                kick,
                call,
                notify,
                seq: 0,
                commands: 0,
                kicks: 0,
            },
            lay,
        ))
    }
}

impl Transport for Socket {
    fn call(&mut self, cmd: Command) -> Result<[u64; 7], Refusal> {
        self.seq = self.seq.wrapping_add(1);
        self.commands += 1;
        if !self.ring.push(&self.mem, &cmd.encode(self.seq)) {
            return Err(Refusal::Again);
        }
        // A polling backend sees the request without a kick.
        if !self.ring.backend_polling(&self.mem) {
            self.kicks += 1;
            let _ = self.kick.write(1);
        }
        let start = Instant::now();
        loop {
            if let Some(r) = self.ring.pop(&self.mem) {
                let r = Response::decode(&r).ok_or(Refusal::Malformed)?;
                if r.seq != self.seq {
                    return Err(Refusal::Malformed);
                }
                return r.result;
            }
            // Spin briefly (the driver is usually polling), then sleep.
            if start.elapsed() < CALL_SPIN {
                std::hint::spin_loop();
            } else {
                if start.elapsed() > Duration::from_secs(10) {
                    return Err(Refusal::RingBroken);
                }
                self.ring.set_waiting(&self.mem, true);
                if self.ring.peek(&self.mem) {
                    self.ring.set_waiting(&self.mem, false);
                    continue;
                }
                if !self.ring.backend_polling(&self.mem) {
                    let _ = self.kick.write(1);
                }
                wait_readable(self.call.as_raw_fd(), Duration::from_millis(10));
                drain(&self.call);
                self.ring.set_waiting(&self.mem, false);
            }
        }
    }

    fn uar_file(&mut self) -> Result<File, Refusal> {
        let mut buf = [0u8; 4];
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|_| Refusal::Device)?;
        let (n, f) = self
            .stream
            .recv_with_fd(&mut buf)
            .map_err(|_| Refusal::Device)?;
        match f {
            Some(f) if n == 4 && &buf == b"UAR0" => Ok(f),
            _ => Err(Refusal::Device),
        }
    }

    fn wait_event(&mut self, timeout: Duration) -> bool {
        let r = wait_readable(self.notify.as_raw_fd(), timeout);
        drain(&self.notify);
        r
    }

    fn wake(&mut self) {
        let _ = self.kick.write(1);
    }

    fn commands(&self) -> u64 {
        self.commands
    }
}

struct Conn {
    dom: DomainId,
    /// Bytes of guest memory mapped for it.
    mem_len: u64,
    stream: UnixStream,
    ring: BackendRing,
    kick: EventFd,
    call: EventFd,
    notify: EventFd,
    uar_sent: bool,
}

/// Counters of a [`Driver`].
#[derive(Debug, Default)]
pub struct DriverStats {
    /// Guests connected so far.
    pub connected: AtomicU64,
    /// Guests gone (and torn down).
    pub gone: AtomicU64,
    /// Connections refused at the handshake (malformed, short memory,
    /// bad layout, or silent too long).
    pub refused: AtomicU64,
}

/// Limits of a [`Driver`] across all its guests; past each, a new guest
/// is refused at the handshake with a message that names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverLimits {
    /// Guests connected at once.
    pub domains: usize,
    /// Connections that have not said hello yet.
    pub pending: usize,
    /// Bytes of guest memory mapped, over all guests.
    pub memory: u64,
}

impl Default for DriverLimits {
    fn default() -> Self {
        DriverLimits {
            domains: 64,
            pending: 16,
            memory: 256 << 30,
        }
    }
}

/// The backend's loop for guests in other processes (see the module).
pub struct Driver<D: Device<GuestMemoryMmap>> {
    backend: Backend<GuestMemoryMmap, D>,
    listener: UnixListener,
    epoll: Epoll,
    conns: HashMap<u64, Conn>,
    /// Connections whose hello has not arrived yet, with when they came.
    pending: HashMap<u64, (UnixStream, Instant)>,
    next: u64,
    limits: Limits,
    ports: Box<dyn FnMut(usize) -> PortView + Send>,
    /// Counters.
    pub stats: Arc<DriverStats>,
    rest: Arc<AtomicBool>,
    global: DriverLimits,
}

const LISTENER: u64 = 0;
/// Epoll data: a connection's token shifted left by two, and its kind.
const STREAM: u64 = 0;
const KICK: u64 = 1;
const HELLO: u64 = 2;
/// Epoll data of the device's own wake-up file ([`Device::wake_fd`]).
const DEVICE: u64 = 3;
/// How long a connection may take to say hello.
const HELLO_WAIT: Duration = Duration::from_secs(5);

impl<D: Device<GuestMemoryMmap>> Driver<D> {
    /// A driver for `device` listening at `path`; each guest gets `limits`
    /// and the port view `ports(n)` for the n-th guest to connect.
    pub fn new(
        device: D,
        path: &Path,
        limits: Limits,
        ports: Box<dyn FnMut(usize) -> PortView + Send>,
    ) -> io::Result<Driver<D>> {
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        let epoll = Epoll::new()?;
        epoll.ctl(
            ControlOperation::Add,
            listener.as_raw_fd(),
            EpollEvent::new(EventSet::IN, LISTENER),
        )?;
        if let Some(fd) = device.wake_fd() {
            epoll.ctl(
                ControlOperation::Add,
                fd.as_raw_fd(),
                EpollEvent::new(EventSet::IN, DEVICE),
            )?;
        }
        Ok(Driver {
            backend: Backend::new(device),
            listener,
            epoll,
            conns: HashMap::new(),
            pending: HashMap::new(),
            next: 1,
            limits,
            ports,
            stats: Arc::new(DriverStats::default()),
            rest: Arc::new(AtomicBool::new(false)),
            global: DriverLimits::default(),
        })
    }

    /// Sets the limits across all guests (see [`DriverLimits`]); the
    /// total registered bytes are the backend's
    /// ([`Backend::set_total_reg_limit`]).
    pub fn set_limits(&mut self, global: DriverLimits) {
        self.global = global;
    }

    /// The backend, to set its limits or its SA records.
    pub fn backend_mut(&mut self) -> &mut Backend<GuestMemoryMmap, D> {
        &mut self.backend
    }

    /// A flag that makes the running loop stop polling and sleep now,
    /// until the next kick (see [`Hub::rest`]).
    pub fn rest_handle(&self) -> Arc<AtomicBool> {
        self.rest.clone()
    }

    /// The backend (for its counters and tables).
    pub fn backend(&self) -> &Backend<GuestMemoryMmap, D> {
        &self.backend
    }

    /// Takes new connections; each waits, without holding anyone up, for
    /// its hello.
    fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            if self.pending.len() >= self.global.pending {
                // Closed at once: a flood of silent connections holds no
                // descriptors beyond the limit.
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let token = self.next;
            self.next += 1;
            let ok = stream.set_nonblocking(true).is_ok()
                && self
                    .epoll
                    .ctl(
                        ControlOperation::Add,
                        stream.as_raw_fd(),
                        EpollEvent::new(EventSet::IN | EventSet::READ_HANG_UP, token << 2 | HELLO),
                    )
                    .is_ok();
            if ok {
                self.pending.insert(token, (stream, Instant::now()));
            }
        }
    }

    /// The hello of pending connection `token` may be there.
    fn hello(&mut self, token: u64) {
        let Some((stream, since)) = self.pending.remove(&token) else {
            return;
        };
        let _ = self.epoll.ctl(
            ControlOperation::Delete,
            stream.as_raw_fd(),
            EpollEvent::default(),
        );
        match self.greet(stream, token) {
            Ok(()) => {}
            Err((e, Some(stream))) if e.kind() == io::ErrorKind::WouldBlock => {
                let back = self.epoll.ctl(
                    ControlOperation::Add,
                    stream.as_raw_fd(),
                    EpollEvent::new(EventSet::IN | EventSet::READ_HANG_UP, token << 2 | HELLO),
                );
                if back.is_ok() {
                    self.pending.insert(token, (stream, since));
                }
            }
            Err((e, _)) => {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                eprintln!("vhca driver: a guest failed to connect: {e}");
            }
        }
    }

    /// Drops connections that did not say hello in time.
    fn expire(&mut self) {
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, (_, t))| t.elapsed() > HELLO_WAIT)
            .map(|(&k, _)| k)
            .collect();
        for k in late {
            if let Some((s, _)) = self.pending.remove(&k) {
                let _ = self.epoll.ctl(
                    ControlOperation::Delete,
                    s.as_raw_fd(),
                    EpollEvent::default(),
                );
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Reads a connection's hello and sets the guest up. `WouldBlock` with
    /// the stream back when the hello is not there yet.
    fn greet(
        &mut self,
        stream: UnixStream,
        token: u64,
    ) -> Result<(), (io::Error, Option<UnixStream>)> {
        let mut hello = [0u8; HELLO_LEN];
        let mut fds = [-1; 4];
        let mut iov = [libc::iovec {
            iov_base: hello.as_mut_ptr().cast(),
            iov_len: hello.len(),
        }];
        // SAFETY: the iovec points at `hello`, which outlives the call; the
        // descriptors received are owned by us from here on.
        let (n, nfds) = match unsafe { stream.recv_with_fds(&mut iov, &mut fds) } {
            Ok(r) => r,
            Err(e) => {
                let e = io::Error::from_raw_os_error(e.errno());
                return if e.kind() == io::ErrorKind::WouldBlock {
                    Err((e, Some(stream)))
                } else {
                    Err((e, None))
                };
            }
        };
        // SAFETY: each received descriptor is new and ours alone.
        let owned: Vec<File> = fds[..nfds]
            .iter()
            .map(|&fd| unsafe { File::from_raw_fd(fd) })
            .collect();
        self.setup(stream, token, n, &hello, owned)
            .map_err(|e| (e, None))
    }

    fn setup(
        &mut self,
        stream: UnixStream,
        token: u64,
        n: usize,
        hello: &[u8; HELLO_LEN],
        owned: Vec<File>,
    ) -> io::Result<()> {
        let h = Hello::parse(&hello[..n.min(HELLO_LEN)], owned.len())?;
        let (len, events) = (h.mem_len, h.events);
        let mut it = owned.into_iter();
        let (memf, kick, call, notify) = match (it.next(), it.next(), it.next(), it.next()) {
            (Some(a), Some(b), Some(c), Some(d)) => (a, b, c, d),
            _ => return Err(io::Error::other("missing descriptors")),
        };
        // Sealed first: a guest must not be able to shrink its memory under
        // the mapping between this check of its size and any later access.
        shm::check_sealed(&memf)?;
        if memf.metadata()?.len() < len {
            return Err(io::Error::other("guest memory file shorter than claimed"));
        }
        if self.conns.len() >= self.global.domains {
            return Err(io::Error::other(format!(
                "{} guests are connected, the most this backend serves",
                self.global.domains
            )));
        }
        let mapped: u64 = self.conns.values().map(|c| c.mem_len).sum();
        if mapped.saturating_add(len) > self.global.memory {
            return Err(io::Error::other(format!(
                "guest memory across all guests would pass {} bytes",
                self.global.memory
            )));
        }
        let (kick, call, notify) = (
            shm::guest_eventfd(kick)?,
            shm::guest_eventfd(call)?,
            shm::guest_eventfd(notify)?,
        );
        let mem = shm::guest_memory(memf, len as usize)?;
        // The layout is checked before the integrator is asked for a port:
        // a refused guest takes nothing.
        h.check_layout(&mem)?;
        let n = self.stats.connected.load(Ordering::Relaxed) as usize;
        let port = (self.ports)(n);
        let dom = self.backend.add_domain(mem, self.limits, port);
        let setup = BackendRing::attach(&self.backend, dom, 0)
            .and_then(|r| self.backend.attach_events(dom, events).map(|()| r));
        let ring = match setup {
            Ok(r) => r,
            Err(r) => {
                self.backend.remove_domain(dom);
                return Err(io::Error::other(format!("guest layout refused: {r:?}")));
            }
        };
        ring.set_polling(&self.backend, true);
        let registered = self
            .epoll
            .ctl(
                ControlOperation::Add,
                stream.as_raw_fd(),
                EpollEvent::new(EventSet::IN | EventSet::READ_HANG_UP, token << 2 | STREAM),
            )
            .and_then(|()| {
                self.epoll.ctl(
                    ControlOperation::Add,
                    kick.as_raw_fd(),
                    EpollEvent::new(EventSet::IN, token << 2 | KICK),
                )
            });
        if let Err(e) = registered {
            let _ = self.epoll.ctl(
                ControlOperation::Delete,
                stream.as_raw_fd(),
                EpollEvent::default(),
            );
            self.backend.remove_domain(dom);
            return Err(e);
        }
        self.stats.connected.fetch_add(1, Ordering::Relaxed);
        self.conns.insert(
            token,
            Conn {
                dom,
                mem_len: len,
                stream,
                ring,
                kick,
                call,
                notify,
                uar_sent: false,
            },
        );
        Ok(())
    }

    fn hang_up(&mut self, token: u64) {
        if let Some(c) = self.conns.remove(&token) {
            let _ = self.epoll.ctl(
                ControlOperation::Delete,
                c.stream.as_raw_fd(),
                EpollEvent::default(),
            );
            let _ = self.epoll.ctl(
                ControlOperation::Delete,
                c.kick.as_raw_fd(),
                EpollEvent::default(),
            );
            self.backend.remove_domain(c.dom);
            self.stats.gone.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Serves every guest's ring once; requests answered.
    fn serve_rings(&mut self) -> usize {
        let mut done = 0;
        let mut broken = Vec::new();
        for (&token, c) in self.conns.iter_mut() {
            // One load per guest when nothing is queued.
            if !c.ring.has_requests(&self.backend) && !c.ring.is_broken() {
                continue;
            }
            match c.ring.service(&mut self.backend) {
                Ok(0) => {}
                Ok(n) => {
                    done += n;
                    if !c.uar_sent {
                        if let Some(fd) = self.backend.uar_fd(c.dom) {
                            let _ = c.stream.set_nonblocking(false);
                            if c.stream.send_with_fd(&b"UAR0"[..], fd.as_raw_fd()).is_ok() {
                                c.uar_sent = true;
                            }
                            let _ = c.stream.set_nonblocking(true);
                        }
                    }
                    if c.ring.guest_waiting(&self.backend) {
                        let _ = c.call.write(1);
                    }
                }
                Err(_) => broken.push(token),
            }
        }
        // A ring the guest broke is closed: the guest is torn down.
        for t in broken {
            self.hang_up(t);
        }
        done
    }

    fn handle(&mut self, events: &[EpollEvent]) {
        for e in events {
            let data = e.data();
            if data == LISTENER {
                self.accept();
            } else if data == DEVICE {
                // The device has work: the next pass does it.
            } else if data & 3 == HELLO {
                self.hello(data >> 2);
            } else if data & 3 == KICK {
                if let Some(c) = self.conns.get(&(data >> 2)) {
                    drain(&c.kick);
                }
            } else {
                let token = data >> 2;
                let mut b = [0u8; 64];
                let gone = self.conns.get(&token).is_none_or(|c| {
                    matches!(io::Read::read(&mut &c.stream, &mut b), Ok(0))
                        || e.event_set().contains(EventSet::HANG_UP)
                });
                if gone {
                    self.hang_up(token);
                }
            }
        }
    }

    /// Serves the rings and runs the device once, notifying guests of
    /// their events.
    fn pass(&mut self, notify: &mut Vec<DomainId>) -> usize {
        let mut work = self.serve_rings();
        notify.clear();
        work += self.backend.poll(notify);
        for d in notify.iter() {
            if let Some(c) = self.conns.values().find(|c| c.dom == *d) {
                let _ = c.notify.write(1);
            }
        }
        work + notify.len()
    }

    fn set_polling(&self, on: bool) {
        for c in self.conns.values() {
            c.ring.set_polling(&self.backend, on);
        }
    }

    /// Runs until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut events = vec![EpollEvent::default(); 32];
        let mut notify = Vec::new();
        let mut last = Instant::now();
        let mut round = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let work = self.pass(&mut notify);
            if work > 0 {
                last = Instant::now();
            }
            round = round.wrapping_add(1);
            let hot = last.elapsed() < HOT && !self.rest.swap(false, Ordering::Relaxed);
            if hot && round % 256 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let timeout = if hot {
                0
            } else {
                self.set_polling(false);
                self.backend.device_mut().idle(true);
                // Re-check after telling the guests: a doorbell rung just
                // before they could see the flag is not lost.
                if self.pass(&mut notify) > 0 {
                    last = Instant::now();
                    0
                } else {
                    50
                }
            };
            let n = self.epoll.wait(timeout, &mut events)?;
            if !self.pending.is_empty() {
                self.expire();
            }
            if !hot {
                self.backend.device_mut().idle(false);
                self.set_polling(true);
                // Only a wake-up makes the loop hot again, not a timeout.
                if n > 0 {
                    last = Instant::now();
                }
            }
            self.handle(&events[..n]);
        }
        Ok(())
    }
}
