//! [`Driver`]: the backend's loop for guests in other processes.

use super::{drain, Hello, HELLO_LEN, HOT};
use crate::backend::{Backend, Limits, PortView};
use crate::device::Device;
use crate::handles::DomainId;
use crate::ring::BackendRing;
use crate::shm;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

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
    /// until the next kick (see [`Hub::rest`](super::Hub::rest)).
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
