//! A [`Session`] on ibsim's sockets: the server's one thread.

use super::sys::{self, RecvBatch, BATCH};
use super::{control_name, Access, Answer, Session, Transport};
use crate::ibsim::{self, MAX_CLIENTS};
use crate::sim::Fabric;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// How a fabric is served.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The socket base name (ibsim's `IBSIM_SOCKNAME`).
    pub socket: String,
    /// Hold each batch's answers this much longer before sending them, as
    /// a simulator that much slower would: to measure how much a client's
    /// bring-up depends on the simulator's answer time (zero: answer at
    /// once).
    pub answer_delay: Duration,
    /// Users besides the server's own and root that may attach clients
    /// and send control commands.
    pub allow_uids: Vec<u32>,
}

/// Why the server could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// A socket name is taken.
    #[error("cannot bind @{name}: {source} (is another simulator serving it?)")]
    Bind {
        /// The abstract name.
        name: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// Another system call failed.
    #[error("{what}: {source}")]
    Io {
        /// Which.
        what: &'static str,
        /// What the system said.
        source: std::io::Error,
    },
}

/// Why a `ctl` command got no answer, or an error for one.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// The client's own socket could not be set up.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// Nothing serves the control socket.
    #[error("no ibkit fabric serve on @{name}: {source}")]
    NoServer {
        /// The control socket's abstract name.
        name: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The server did not answer in time.
    #[error("no answer: {0}")]
    NoAnswer(std::io::Error),
    /// The server refused the command, saying why.
    #[error("{0}")]
    Refused(String),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> SocketError {
    move |source| SocketError::Io { what, source }
}

/// How often the server looks for clients that died without detaching.
const REAP_EVERY: Duration = Duration::from_secs(1);
/// How long [`Server::converse`] serves one client before looking at the
/// control sockets again.
const CONVERSE: Duration = Duration::from_millis(10);
/// How long a conversation waits for the client's next request.
const QUIET: Duration = Duration::from_millis(2);
/// How long a client's full socket may hold its datagrams back without
/// taking one before it loses its slot (an SA's answer of many RMPP
/// segments fills a socket queue of 10 in one go; a reading client
/// empties it within milliseconds).
const HOLD: Duration = Duration::from_secs(2);
/// Datagrams held for one client at most; past this it loses its slot.
const HOLD_MAX: usize = 16384;

/// The client sockets, as a session's [`Transport`].
struct Sockets {
    base: String,
    outs: Vec<UnixDatagram>,
}

impl Transport for Sockets {
    fn connect(&mut self, slot: usize, id: u32) -> Result<(), String> {
        let addr =
            sys::abstract_addr(&ibsim::in_name(&self.base, id)).map_err(|e| e.to_string())?;
        self.outs[slot]
            .connect_addr(&addr)
            .map_err(|e| e.to_string())
    }

    /// A probe connects to the client's receive socket: only a closed
    /// socket refuses.
    fn alive(&mut self, id: u32) -> bool {
        match (
            UnixDatagram::unbound(),
            sys::abstract_addr(&ibsim::in_name(&self.base, id)),
        ) {
            (Ok(probe), Ok(addr)) => !matches!(
                probe.connect_addr(&addr),
                Err(e) if e.kind() == ErrorKind::ConnectionRefused
            ),
            _ => true,
        }
    }
}

struct Server {
    session: Session,
    socks: Sockets,
    ctl: UnixDatagram,
    control: UnixDatagram,
    inbox: RecvBatch,
    /// Per slot: datagrams its full socket did not take yet, and since
    /// when it has taken none.
    held: Vec<(Vec<[u8; crate::ibsim::REQ_SIZE]>, Instant)>,
    answer_delay: Duration,
    cmsg: Vec<u8>,
    last_reap: Instant,
}

fn bind(name: &str) -> Result<UnixDatagram, SocketError> {
    let addr = sys::abstract_addr(name).map_err(io("socket name"))?;
    let s = UnixDatagram::bind_addr(&addr).map_err(|source| SocketError::Bind {
        name: name.to_string(),
        source,
    })?;
    sys::pass_credentials(&s).map_err(io("SO_PASSCRED"))?;
    Ok(s)
}

/// Serves `fabric` on `cfg.socket` until killed (or a system call fails).
pub fn serve(fabric: Fabric, cfg: &ServeConfig) -> Result<(), SocketError> {
    let mut outs = Vec::new();
    for i in 0..MAX_CLIENTS {
        // Blocking, with a read timeout of QUIET for converse(); every
        // other read and write on it passes MSG_DONTWAIT.
        let s = bind(&ibsim::out_name(&cfg.socket, i))?;
        s.set_read_timeout(Some(QUIET)).map_err(io("SO_RCVTIMEO"))?;
        outs.push(s);
    }
    let ctl = bind(&ibsim::ctl_name(&cfg.socket))?;
    let control = bind(&control_name(&cfg.socket))?;
    ctl.set_nonblocking(true).map_err(io("O_NONBLOCK"))?;
    control.set_nonblocking(true).map_err(io("O_NONBLOCK"))?;
    let me = nix::unistd::geteuid().as_raw();
    let mut s = Server {
        session: Session::new(fabric, Access::new(me, &cfg.allow_uids), Instant::now()),
        socks: Sockets {
            base: cfg.socket.clone(),
            outs,
        },
        ctl,
        control,
        inbox: RecvBatch::new(),
        held: (0..MAX_CLIENTS)
            .map(|_| (Vec::new(), Instant::now()))
            .collect(),
        answer_delay: cfg.answer_delay,
        cmsg: sys::cmsg_space(),
        last_reap: Instant::now(),
    };
    s.run()
}

impl Server {
    fn run(&mut self) -> Result<(), SocketError> {
        let mut buf = vec![0u8; 4096];
        let mut fds: Vec<i32> = Vec::with_capacity(2 + MAX_CLIENTS);
        let mut readable: Vec<bool> = Vec::with_capacity(2 + MAX_CLIENTS);
        let mut slots: Vec<usize> = Vec::with_capacity(MAX_CLIENTS);
        let mut ready: Vec<usize> = Vec::with_capacity(MAX_CLIENTS);
        loop {
            slots.clear();
            slots.extend(self.session.listening());
            fds.clear();
            fds.push(self.ctl.as_raw_fd());
            fds.push(self.control.as_raw_fd());
            fds.extend(slots.iter().map(|&i| self.socks.outs[i].as_raw_fd()));
            // Datagrams held for a full socket are offered again soon.
            let holding = self.held.iter().any(|(h, _)| !h.is_empty());
            let wait = if holding {
                Duration::from_millis(1)
            } else {
                REAP_EVERY
            };
            sys::poll(&fds, &mut readable, wait).map_err(io("poll"))?;
            if holding {
                self.flush();
            }
            if self.last_reap.elapsed() >= REAP_EVERY {
                self.last_reap = Instant::now();
                self.session.reap(&mut self.socks);
                // A reaped SM client's unanswered SMInfo requests time
                // out for their requesters now.
                self.session.settle();
                self.flush();
            }
            if readable[0] {
                while let Ok((n, from, peer)) =
                    sys::recv_with_peer(&self.ctl, &mut buf, &mut self.cmsg)
                {
                    let reply =
                        self.session
                            .on_ctl(&buf[..n], peer, &mut self.socks, Instant::now());
                    if let Some(r) = reply {
                        if let Err(e) = sys::reply_to(&self.ctl, &r, from.as_ref()) {
                            tracing::warn!("cannot answer a control request: {e}");
                        }
                    }
                }
            }
            if readable[1] {
                while let Ok((n, from, peer)) =
                    sys::recv_with_peer(&self.control, &mut buf, &mut self.cmsg)
                {
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let reply = self.command(text.trim(), peer);
                    let _ = sys::reply_to(&self.control, reply.as_bytes(), from.as_ref());
                    self.flush();
                }
            }
            ready.clear();
            ready.extend(
                slots
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| readable[2 + k])
                    .map(|(_, &slot)| slot),
            );
            // Spinning for the client's next request instead was measured
            // slower: on two cores it takes the CPU the client needs.
            if self.drain(&ready) && slots.len() == 1 {
                self.converse(slots[0]);
            }
        }
    }

    /// One command of `ibkit fabric ctl`; the text to answer. `dump` is
    /// written here, by the server.
    fn command(&mut self, line: &str, peer: Option<super::Peer>) -> String {
        let now = Instant::now();
        match self.session.on_command(line, peer, now) {
            Ok(Answer::Dump(path)) => {
                let json = serde_json::to_string(&self.session.dump()).unwrap_or_default();
                match std::fs::write(&path, json) {
                    Ok(()) => format!("ok: state written to {path}"),
                    Err(e) => format!("error: {path}: {e}"),
                }
            }
            Ok(Answer::Hup(pids)) => {
                let mut said = Vec::new();
                for pid in pids {
                    let sig = nix::sys::signal::Signal::SIGHUP;
                    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig) {
                        Ok(()) => said.push(format!("ok: SIGHUP sent to the SM (pid {pid})")),
                        Err(e) => said.push(format!("error: SIGHUP to the SM (pid {pid}): {e}")),
                    }
                }
                said.join("\n")
            }
            Ok(Answer::Text(text)) => text,
            Err(e) => format!("error: {e}"),
        }
    }

    /// With one client busy, waits for its next requests in the read
    /// itself (one system call, where poll and read take two), for up to
    /// [`CONVERSE`] at a time and while it keeps sending within
    /// [`QUIET`]; then poll looks at the control sockets again.
    fn converse(&mut self, slot: usize) {
        let t0 = Instant::now();
        while t0.elapsed() < CONVERSE && self.session.is_attached(slot) {
            let fd = self.socks.outs[slot].as_raw_fd();
            match self.inbox.recv(fd, true) {
                Ok(n) => {
                    let read_at = Instant::now();
                    let injected = self.take_batch(slot, n);
                    self.answer(read_at, injected);
                }
                Err(_) => return,
            }
        }
    }

    /// Hands the `n` datagrams of the last read from slot `slot` to the
    /// session; true when one went into the fabric.
    fn take_batch(&mut self, slot: usize, n: usize) -> bool {
        let now = Instant::now();
        let mut injected = false;
        for i in 0..n {
            injected |= self
                .session
                .on_packet(slot, self.inbox.get(i), self.inbox.peer(i), now);
        }
        injected
    }

    /// Serves what is waiting at `slots`: every datagram they queued is
    /// read in batches (one recvmmsg each), the fabric runs once for all
    /// of them, and the responses go back in one sendmmsg per client.
    /// True when something was read.
    fn drain(&mut self, slots: &[usize]) -> bool {
        let read_at = Instant::now();
        let mut read = false;
        let mut injected = false;
        for &slot in slots {
            loop {
                let fd = self.socks.outs[slot].as_raw_fd();
                let n = match self.inbox.recv(fd, false) {
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        tracing::warn!("client {slot}: {e}");
                        break;
                    }
                };
                read = true;
                injected |= self.take_batch(slot, n);
                if n < BATCH {
                    break;
                }
            }
        }
        if read {
            self.answer(read_at, injected);
        } else {
            self.flush();
        }
        read
    }

    /// Answers the batch read at `read_at`: runs the fabric if a request
    /// went in, holds the answers for the answer delay, sends them, and
    /// counts the time each part took.
    fn answer(&mut self, read_at: Instant, injected: bool) {
        if injected {
            self.session.settle();
        }
        let ready = Instant::now();
        while ready.elapsed() < self.answer_delay {
            std::hint::spin_loop();
        }
        let send_at = Instant::now();
        self.flush();
        self.session.count_batch(ready - read_at, send_at.elapsed());
    }

    /// Sends every client what the session queued for it. What a full
    /// socket does not take is held and offered again; a client that takes
    /// nothing for [`HOLD`], or falls [`HOLD_MAX`] datagrams behind, loses
    /// its slot.
    fn flush(&mut self) {
        let holding = self.held.iter().any(|(h, _)| !h.is_empty());
        if !self.session.has_output() && !holding {
            return;
        }
        for slot in 0..MAX_CLIENTS {
            let fresh = self.session.take_outbox(slot);
            let (held, since) = &mut self.held[slot];
            if !self.session.is_attached(slot) {
                // Dropped or gone: what it was owed goes with it (a
                // dropped client's ECONNRESET answers are fresh).
                held.clear();
            }
            if held.is_empty() && fresh.is_empty() {
                continue;
            }
            if held.is_empty() {
                *since = Instant::now();
            }
            held.extend(fresh);
            let fd = self.socks.outs[slot].as_raw_fd();
            let why: Option<String> = match sys::send_batch(fd, held) {
                Ok(k) => {
                    if k > 0 {
                        held.drain(..k);
                        *since = Instant::now();
                    }
                    if held.is_empty() {
                        None
                    } else if held.len() > HOLD_MAX {
                        Some(format!("{} datagrams behind", held.len()))
                    } else if since.elapsed() > HOLD {
                        Some(format!("its socket took nothing for {HOLD:?}"))
                    } else {
                        None
                    }
                }
                Err(e) => Some(format!("its socket takes no more ({e})")),
            };
            if let Some(why) = why {
                held.clear();
                self.session.drop_client(slot, &why);
            }
        }
    }
}

/// Sends one command to the `ibkit fabric serve` on socket `base` and
/// returns its answer (an `error: ` answer as the error).
pub fn ctl(base: &str, command: &str) -> Result<String, CtlError> {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let me = format!(
        "{base}:ibkitctl{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let s = UnixDatagram::bind_addr(&sys::abstract_addr(&me).map_err(io("client address"))?)
        .map_err(io("binding the client socket"))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(io("setting the answer timeout"))?;
    let name = control_name(base);
    let to = sys::abstract_addr(&name).map_err(io("server address"))?;
    if let Err(source) = s.send_to_addr(command.as_bytes(), &to) {
        return Err(CtlError::NoServer { name, source });
    }
    let mut buf = vec![0u8; 65536];
    let n = s.recv(&mut buf).map_err(CtlError::NoAnswer)?;
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    if let Some(e) = text.strip_prefix("error: ") {
        return Err(CtlError::Refused(e.to_string()));
    }
    Ok(text)
}
