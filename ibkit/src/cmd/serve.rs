//! `ibkit fabric serve`: ibkit's simulated fabric behind ibsim's client
//! protocol ([`fabric::ibsim`]), so that OpenSM, infiniband-diags and every
//! other libibumad program run against it through `libumad2sim.so`; and
//! `ibkit fabric ctl`, which takes links and nodes down and up and dumps
//! the fabric's state.
//!
//! One thread polls every socket. Packets that arrive together are injected
//! together at their clients' ports, the fabric runs until nothing is in
//! flight, and what reached each client is written back; a request that
//! got no response comes back with status ETIMEDOUT, as ibsim reports it.

use fabric::ibsim::{self, ClientInfo, CtlType, SimCtl, SimRequest, MAX_CLIENTS};
use fabric::sim::{Fabric, FabricEvent, SimConfig, SimNode};
use fabric::topology::Topology;
use mad_core::attr::{AttributeId, NodeType};
use mad_core::{Lid, Smp};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

/// What `ibkit fabric serve` is asked to serve.
#[derive(Clone, Debug)]
pub struct ServeArgs {
    /// The topology spec.
    pub topology: String,
    /// VFs per hypervisor (0: plain CAs).
    pub vfs: usize,
    /// The socket base name (ibsim's `IBSIM_SOCKNAME`).
    pub socket: String,
    /// Per-hop delay (k), ns.
    pub hop_ns: u64,
    /// Extra delay per directed-route hop (r), ns.
    pub dr_hop_ns: u64,
    /// Loss probability per cable crossing.
    pub loss: f64,
    /// Log every packet.
    pub verbose: bool,
    /// Spin this many microseconds more on each batch before answering
    /// it, as a simulator that much slower would: to measure how much a
    /// client's bring-up depends on the simulator's answer time (0:
    /// answer at once).
    pub answer_delay_us: u64,
    /// Users besides the server's own and root that may attach clients
    /// and send control commands.
    pub allow_uids: Vec<u32>,
}

/// Who sent a datagram, as the kernel vouches for it (SO_PASSCRED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The sender's user.
    pub uid: u32,
    /// The sender's process.
    pub pid: i32,
}

/// Who may attach to a served fabric and control it: the server's own
/// user, root, and the users named with `--allow-uid`. Anyone else on the
/// machine can reach the abstract sockets, and is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    allowed: Vec<u32>,
}

impl Access {
    /// The server's effective user, root, and `more`.
    pub fn new(more: &[u32]) -> Access {
        let mut allowed = vec![nix::unistd::geteuid().as_raw(), 0];
        allowed.extend_from_slice(more);
        allowed.sort_unstable();
        allowed.dedup();
        Access { allowed }
    }

    /// Whether the sender of a datagram may use the server; a datagram
    /// that came without credentials is refused.
    pub fn check(&self, peer: Option<Peer>) -> Result<(), String> {
        match peer {
            Some(p) if self.allowed.contains(&p.uid) => Ok(()),
            Some(p) => Err(format!(
                "permission denied: uid {} (pid {}) is not one of the users this fabric serves ({:?}; see --allow-uid)",
                p.uid, p.pid, self.allowed
            )),
            None => Err("permission denied: the datagram carried no credentials".into()),
        }
    }
}

/// Sets SO_PASSCRED on `sock`, so that every datagram read from it names
/// its sender.
fn pass_credentials(sock: &UnixDatagram) -> Result<(), String> {
    nix::sys::socket::setsockopt(sock, nix::sys::socket::sockopt::PassCred, &true)
        .map_err(|e| format!("SO_PASSCRED: {e}"))
}

/// Reads one datagram from `sock` without waiting: its length, the
/// sender's address (to answer it) and the sender's credentials.
fn recv_with_peer(
    sock: &UnixDatagram,
    buf: &mut [u8],
    cmsg: &mut [u8],
) -> std::io::Result<(usize, Option<nix::sys::socket::UnixAddr>, Option<Peer>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &mut iov,
        Some(cmsg),
        MsgFlags::MSG_DONTWAIT,
    )
    .map_err(std::io::Error::from)?;
    let peer = msg.cmsgs().ok().and_then(|mut c| {
        c.find_map(|m| match m {
            ControlMessageOwned::ScmCredentials(c) => Some(Peer {
                uid: c.uid(),
                pid: c.pid(),
            }),
            _ => None,
        })
    });
    Ok((msg.bytes, msg.address, peer))
}

/// Answers the sender of a datagram read with [`recv_with_peer`].
fn reply_to(
    sock: &UnixDatagram,
    data: &[u8],
    to: Option<&nix::sys::socket::UnixAddr>,
) -> std::io::Result<()> {
    let to = to.ok_or_else(|| std::io::Error::other("the sender has no address to answer"))?;
    nix::sys::socket::sendto(
        sock.as_raw_fd(),
        data,
        to,
        nix::sys::socket::MsgFlags::MSG_DONTWAIT,
    )
    .map(|_| ())
    .map_err(std::io::Error::from)
}

/// The abstract socket of ibkit's own control interface.
pub fn control_name(base: &str) -> String {
    format!("{base}:ibkit")
}

#[derive(Default)]
struct Client {
    /// The id it attached with (libumad2sim's: its pid), which names its
    /// receive socket.
    id: u32,
    node: usize,
    issm: bool,
    /// Requests in the fabric, by the transaction ID the server gave them,
    /// each as the client sent it.
    /// A client keeps few in flight (OpenSM: max_wire_smps, 4 by
    /// default), so a list is quicker than a map.
    outstanding: Vec<(u64, SimRequest)>,
}

/// Counters of a serving run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Packets received from clients.
    pub packets: u64,
    /// SMP responses delivered to clients.
    pub answered: u64,
    /// Requests answered with ETIMEDOUT.
    pub timeouts: u64,
    /// Malformed datagrams (logged and dropped).
    pub malformed: u64,
    /// Datagrams and control requests from users who may not use the
    /// server (dropped or answered with an error).
    pub refused: u64,
    /// Log lines left out by the rate limit.
    pub unlogged: u64,
    /// Traps delivered to SM clients.
    pub traps: u64,
    /// Batches served: reads of client datagrams answered together.
    pub batches: u64,
    /// Nanoseconds from reading a batch to having its answers ready
    /// (parsing, the fabric's hops, the agents; after a poll, the
    /// non-blocking reads too), over all batches; the answer delay, if
    /// any, is not in it.
    pub fabric_ns: u64,
    /// Nanoseconds spent handing answers to the kernel (sendmmsg, which
    /// also wakes the client), over all batches.
    pub send_ns: u64,
}

struct Server {
    base: String,
    fabric: Fabric,
    ctl: UnixDatagram,
    control: UnixDatagram,
    outs: Vec<UnixDatagram>,
    clients: Vec<Option<Client>>,
    stats: ServeStats,
    verbose: bool,
    started: Instant,
    inbox: RecvBatch,
    /// Responses to send, per client.
    outbox: Vec<Vec<[u8; ibsim::REQ_SIZE]>>,
    /// [`ServeArgs::answer_delay_us`].
    answer_delay: Duration,
    /// Who may attach and control.
    access: Access,
    /// Room for one datagram's credentials.
    cmsg: Vec<u8>,
    /// The rate limit of [`Server::log_limited`]: when this second began,
    /// lines logged in it, lines left out.
    log_window: Instant,
    log_lines: u32,
    log_skipped: u64,
    /// Nodes taken down with `node-down`.
    down: std::collections::BTreeSet<usize>,
    /// When [`Server::reap`] last looked for dead clients.
    last_reap: Instant,
}

/// How often the server looks for clients that died without detaching.
const REAP_EVERY: Duration = Duration::from_secs(1);

/// Lines a second about what clients did.
const LOG_PER_SECOND: u32 = 20;

/// Text a client chose, as the log shows it: control characters escaped,
/// at most 200 characters.
fn clean(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == 200 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Datagrams read at once.
const BATCH: usize = 64;
/// How long [`Server::converse`] serves one client before looking at the
/// control sockets again.
const CONVERSE: Duration = Duration::from_millis(10);
/// How long a conversation waits for the client's next request.
const QUIET: Duration = Duration::from_millis(2);
/// Room for one datagram: more than any valid one, so that an oversized
/// one shows as truncated.
const DGRAM: usize = 1024;

/// Buffers for one recvmmsg, set up once: the headers point at the
/// iovecs, the iovecs at the buffers, all on the heap where they stay put.
struct RecvBatch {
    bufs: Box<[[u8; DGRAM]]>,
    iov: Box<[libc::iovec]>,
    /// Room for each datagram's credentials (SCM_CREDENTIALS).
    ctrl: Box<[[u64; CTRL / 8]]>,
    hdr: Box<[libc::mmsghdr]>,
}

/// Bytes of control data per datagram: one SCM_CREDENTIALS message needs
/// 32 on 64-bit Linux.
const CTRL: usize = 64;

impl RecvBatch {
    fn new() -> RecvBatch {
        let mut bufs: Box<[[u8; DGRAM]]> = vec![[0; DGRAM]; BATCH].into_boxed_slice();
        let mut iov: Box<[libc::iovec]> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: DGRAM,
            })
            .collect();
        let mut ctrl: Box<[[u64; CTRL / 8]]> = vec![[0; CTRL / 8]; BATCH].into_boxed_slice();
        let hdr = iov
            .iter_mut()
            .zip(ctrl.iter_mut())
            .map(|(v, c)| {
                // SAFETY: mmsghdr is a plain C struct for which zero is a
                // valid value.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = v;
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_control = c.as_mut_ptr().cast();
                h.msg_hdr.msg_controllen = CTRL;
                h
            })
            .collect();
        RecvBatch {
            bufs,
            iov,
            ctrl,
            hdr,
        }
    }

    /// Gives every header its whole control buffer back (the kernel
    /// shrinks msg_controllen to what it wrote).
    fn reset_control(&mut self) {
        for h in self.hdr.iter_mut() {
            h.msg_hdr.msg_controllen = CTRL;
        }
    }

    /// The sender of datagram `i` of the last read, from its
    /// SCM_CREDENTIALS message (the socket has SO_PASSCRED).
    fn peer(&self, i: usize) -> Option<Peer> {
        debug_assert_eq!(self.ctrl.len(), BATCH);
        let h = &self.hdr[i].msg_hdr;
        // SAFETY: the header's control pointer and length describe a live
        // buffer of self.ctrl that the kernel filled with well-formed
        // control messages; CMSG_FIRSTHDR and CMSG_NXTHDR stay within
        // msg_controllen, and a cmsghdr is read only when its length
        // covers a ucred.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let len = (*c).cmsg_len;
                if (*c).cmsg_level == libc::SOL_SOCKET
                    && (*c).cmsg_type == libc::SCM_CREDENTIALS
                    && len >= libc::CMSG_LEN(std::mem::size_of::<libc::ucred>() as u32) as usize
                {
                    let u: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    return Some(Peer {
                        uid: u.uid,
                        pid: u.pid,
                    });
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        None
    }

    /// Reads up to [`BATCH`] datagrams from `fd` without waiting; how many.
    fn recv(&mut self, fd: i32) -> std::io::Result<usize> {
        debug_assert_eq!(self.iov.len(), BATCH);
        self.reset_control();
        // SAFETY: every header points at its own iovec, which points at a
        // live buffer of DGRAM bytes (all owned by self, on the heap); the
        // kernel writes only within them.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdr.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Waits (up to the socket's read timeout, [`QUIET`]) for at least one
    /// datagram from `fd` and reads what has come, up to [`BATCH`].
    fn recv_wait(&mut self, fd: i32) -> std::io::Result<usize> {
        self.reset_control();
        // SAFETY: as in recv.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdr.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Datagram `i` of the last read (a truncated one is cut to an empty,
    /// malformed packet).
    fn take(&self, i: usize) -> Vec<u8> {
        let h = &self.hdr[i];
        if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            Vec::new()
        } else {
            self.bufs[i][..(h.msg_len as usize).min(DGRAM)].to_vec()
        }
    }
}

/// Sends `msgs` on connected socket `fd` without waiting; how many went.
fn send_batch(fd: i32, msgs: &[[u8; ibsim::REQ_SIZE]]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < msgs.len() {
        let chunk = &msgs[done..msgs.len().min(done + BATCH)];
        // SAFETY: as in RecvBatch::recv; the kernel only reads the buffers.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut hdr: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, m) in chunk.iter().enumerate() {
            iov[i].iov_base = m.as_ptr() as *mut libc::c_void;
            iov[i].iov_len = m.len();
            hdr[i].msg_hdr.msg_iov = &mut iov[i];
            hdr[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: the headers point at live iovecs over live buffers.
        let n =
            unsafe { libc::sendmmsg(fd, hdr.as_mut_ptr(), chunk.len() as u32, libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::WouldBlock {
                return Ok(done);
            }
            return Err(e);
        }
        done += n as usize;
        if (n as usize) < chunk.len() {
            return Ok(done);
        }
    }
    Ok(done)
}

/// An abstract socket address as ibsim and umad2sim spell it: their
/// address length counts the name's terminating NUL, so it is part of the
/// name.
fn abstract_addr(name: &str) -> std::io::Result<SocketAddr> {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    SocketAddr::from_abstract_name(&b)
}

fn bind(name: &str) -> Result<UnixDatagram, String> {
    let s = UnixDatagram::bind_addr(&abstract_addr(name).map_err(|e| e.to_string())?)
        .map_err(|e| format!("cannot bind @{name}: {e} (is another simulator serving it?)"))?;
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// A client's socket: blocking, with a read timeout of [`QUIET`] for
/// [`Server::converse`]; every other read and write on it passes
/// MSG_DONTWAIT.
fn bind_client(name: &str) -> Result<UnixDatagram, String> {
    let s = UnixDatagram::bind_addr(&abstract_addr(name).map_err(|e| e.to_string())?)
        .map_err(|e| format!("cannot bind @{name}: {e} (is another simulator serving it?)"))?;
    s.set_read_timeout(Some(QUIET)).map_err(|e| e.to_string())?;
    pass_credentials(&s)?;
    Ok(s)
}

/// Serves `a.topology` until killed.
pub fn serve(a: &ServeArgs) -> super::Outcome {
    let topo = Topology::from_spec(&a.topology).map_err(|e| e.to_string())?;
    let cfg = SimConfig {
        hop_ns: a.hop_ns,
        dr_hop_ns: a.dr_hop_ns,
        loss: a.loss,
        vfs: a.vfs,
        ..Default::default()
    };
    let fabric = Fabric::new(topo, cfg)?;
    let mut outs = Vec::new();
    for i in 0..MAX_CLIENTS {
        outs.push(bind_client(&ibsim::out_name(&a.socket, i))?);
    }
    let ctl = bind(&ibsim::ctl_name(&a.socket))?;
    let control = bind(&control_name(&a.socket))?;
    pass_credentials(&ctl)?;
    pass_credentials(&control)?;
    let mut s = Server {
        base: a.socket.clone(),
        ctl,
        control,
        access: Access::new(&a.allow_uids),
        cmsg: nix::cmsg_space!(nix::sys::socket::UnixCredentials),
        log_window: Instant::now(),
        log_lines: 0,
        log_skipped: 0,
        down: Default::default(),
        last_reap: Instant::now(),
        outs,
        clients: (0..MAX_CLIENTS).map(|_| None).collect(),
        stats: ServeStats::default(),
        verbose: a.verbose,
        started: Instant::now(),
        inbox: RecvBatch::new(),
        outbox: (0..MAX_CLIENTS).map(|_| Vec::new()).collect(),
        answer_delay: Duration::from_micros(a.answer_delay_us),
        fabric,
    };
    eprintln!(
        "ibkit fabric serve: {} ({} switches, {} CAs) on @{} — attach with LD_PRELOAD=libumad2sim.so IBSIM_SOCKNAME={} [SIM_HOST=node]",
        a.topology,
        s.fabric.topo.switches(),
        s.fabric.topo.cas(),
        ibsim::ctl_name(&a.socket),
        a.socket
    );
    s.run()
}

impl Server {
    fn run(&mut self) -> super::Outcome {
        let mut buf = vec![0u8; 4096];
        let mut fds: Vec<PollFd> = Vec::with_capacity(2 + MAX_CLIENTS);
        let mut slots: Vec<usize> = Vec::with_capacity(MAX_CLIENTS);
        let mut ready: Vec<usize> = Vec::with_capacity(MAX_CLIENTS);
        loop {
            fds.clear();
            fds.push(PollFd::new(self.ctl.as_raw_fd()));
            fds.push(PollFd::new(self.control.as_raw_fd()));
            slots.clear();
            slots.extend((0..MAX_CLIENTS).filter(|&i| self.clients[i].is_some()));
            for &i in &slots {
                fds.push(PollFd::new(self.outs[i].as_raw_fd()));
            }
            poll(&mut fds, REAP_EVERY).map_err(|e| format!("poll: {e}"))?;
            if self.last_reap.elapsed() >= REAP_EVERY {
                self.reap();
            }
            if fds[0].readable() {
                while let Ok((n, from, peer)) = recv_with_peer(&self.ctl, &mut buf, &mut self.cmsg)
                {
                    let reply = self.on_ctl(&buf[..n], peer);
                    if let Some(r) = reply {
                        if let Err(e) = reply_to(&self.ctl, &r, from.as_ref()) {
                            eprintln!("ibkit fabric serve: cannot answer a control request: {e}");
                        }
                    }
                }
            }
            if fds[1].readable() {
                while let Ok((n, from, peer)) =
                    recv_with_peer(&self.control, &mut buf, &mut self.cmsg)
                {
                    let reply = match self.access.check(peer) {
                        Ok(()) => {
                            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                            self.on_command(text.trim())
                        }
                        Err(e) => {
                            self.stats.refused += 1;
                            self.log_limited(&format!("a control command refused: {e}"));
                            format!("error: {e}")
                        }
                    };
                    let _ = reply_to(&self.control, reply.as_bytes(), from.as_ref());
                }
            }
            ready.clear();
            ready.extend(
                slots
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| fds[2 + k].readable())
                    .map(|(_, &slot)| slot),
            );
            // Spinning for the client's next request instead was measured
            // slower: on two cores it takes the CPU the client needs.
            if self.drain(&ready) && slots.len() == 1 {
                self.converse(slots[0]);
            }
        }
    }

    /// With one client busy, waits for its next requests in the read
    /// itself (one system call, where poll and read take two), for up to
    /// [`CONVERSE`] at a time and while it keeps sending within
    /// [`QUIET`]; then poll looks at the control sockets again.
    fn converse(&mut self, slot: usize) {
        let t0 = Instant::now();
        while t0.elapsed() < CONVERSE && self.clients[slot].is_some() {
            let fd = self.outs[slot].as_raw_fd();
            match self.inbox.recv_wait(fd) {
                Ok(n) => {
                    let read_at = Instant::now();
                    let injected = self.take_batch(slot, n);
                    self.answer(read_at, injected);
                }
                Err(_) => return,
            }
        }
    }

    /// Hands the `n` datagrams of the last read from client `slot` to the
    /// fabric; true when one went in.
    fn take_batch(&mut self, slot: usize, n: usize) -> bool {
        let mut injected = false;
        for i in 0..n {
            let pkt = self.inbox.take(i);
            if let Err(e) = self.access.check(self.inbox.peer(i)) {
                // Only the attached client's socket can send here; this
                // is someone who took its name.
                self.stats.refused += 1;
                self.log_limited(&format!("client {slot}: a packet refused: {e}"));
                continue;
            }
            injected |= self.on_packet(slot, &pkt);
        }
        injected
    }

    /// Serves what is waiting from the clients in `slots`: every datagram
    /// they queued is read in batches (one recvmmsg each), the fabric runs
    /// once for all of them, and the responses go back in one sendmmsg per
    /// client. True when something was read.
    fn drain(&mut self, slots: &[usize]) -> bool {
        let read_at = Instant::now();
        let mut read = false;
        let mut injected = false;
        for &slot in slots {
            while self.clients[slot].is_some() {
                let fd = self.outs[slot].as_raw_fd();
                let n = match self.inbox.recv(fd) {
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        eprintln!("ibkit fabric serve: client {slot}: {e}");
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
            self.settle();
        }
        let ready = Instant::now();
        while ready.elapsed() < self.answer_delay {
            std::hint::spin_loop();
        }
        let send_at = Instant::now();
        self.flush();
        let s = &mut self.stats;
        s.batches += 1;
        s.fabric_ns += (ready - read_at).as_nanos() as u64;
        s.send_ns += send_at.elapsed().as_nanos() as u64;
    }

    /// Sends every client what [`Server::write`] queued for it.
    fn flush(&mut self) {
        for slot in 0..MAX_CLIENTS {
            if self.outbox[slot].is_empty() {
                continue;
            }
            let msgs = std::mem::take(&mut self.outbox[slot]);
            let fd = self.outs[slot].as_raw_fd();
            let mut sent = send_batch(fd, &msgs);
            if let Ok(k) = sent {
                if k < msgs.len() {
                    // The client's queue is full: ibsim would retry; so
                    // do we, briefly.
                    std::thread::sleep(Duration::from_micros(200));
                    sent = send_batch(fd, &msgs[k..]).and_then(|j| {
                        if k + j == msgs.len() {
                            Ok(msgs.len())
                        } else {
                            Err(std::io::Error::from(ErrorKind::WouldBlock))
                        }
                    });
                }
            }
            if let Err(e) = sent {
                eprintln!("ibkit fabric serve: client {slot} seems dead ({e}) - disconnecting");
                self.disconnect(slot);
            }
        }
    }

    /// Runs the fabric until nothing is in flight, then hands every client
    /// what reached it and times out what did not come back.
    fn settle(&mut self) {
        self.fabric.run_to_quiescence();
        for d in self.fabric.take_delivered() {
            self.on_delivery(d);
        }
        for slot in 0..MAX_CLIENTS {
            let Some(c) = self.clients[slot].as_mut() else {
                continue;
            };
            let lost: Vec<SimRequest> = c.outstanding.drain(..).map(|(_, r)| r).collect();
            for mut r in lost {
                r.status = ibsim::ETIMEDOUT;
                self.stats.timeouts += 1;
                self.write(slot, &r);
            }
        }
    }

    fn on_delivery(&mut self, d: fabric::sim::Delivery) {
        let wire = *d.smp.as_wire();
        let method = wire[3];
        let tid = u64::from_be_bytes(wire[8..16].try_into().unwrap_or([0; 8]));
        let (slot, trap) = if method & 0x80 != 0 {
            let slot = (tid >> 48) as usize;
            (slot, false)
        } else if method == 0x05 {
            // A trap: for the SM client on the node.
            match (0..MAX_CLIENTS).find(|&i| {
                self.clients[i]
                    .as_ref()
                    .is_some_and(|c| c.node == d.node && c.issm)
            }) {
                Some(i) => (i, true),
                None => return,
            }
        } else {
            return;
        };
        let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        if c.node != d.node {
            return;
        }
        let orig = c
            .outstanding
            .iter()
            .position(|(t, _)| *t == tid)
            .map(|i| c.outstanding.swap_remove(i).1);
        if !trap && orig.is_none() {
            // Already timed out, or not this client's.
            return;
        }
        let lid = self.fabric.nodes[d.node].lid().0;
        let mut wire = wire;
        if let Some(o) = &orig {
            // The server's slot stamp off: the client's own TID back.
            wire[8..16].copy_from_slice(&o.tid().to_be_bytes());
        }
        let r = SimRequest {
            dlid: lid,
            slid: d.slid,
            dqp: orig.as_ref().map_or(0, |o| o.sqp),
            sqp: orig.as_ref().map_or(0, |o| o.dqp),
            status: 0,
            length: 256,
            mad: wire,
        };
        if trap {
            self.stats.traps += 1;
        } else {
            self.stats.answered += 1;
        }
        self.write(slot, &r);
    }

    /// Queues `r` for client `slot` (sent by [`Server::flush`]).
    fn write(&mut self, slot: usize, r: &SimRequest) {
        self.outbox[slot].push(r.encode());
    }

    /// Frees the slots of clients whose receive socket is gone (killed
    /// without saying goodbye): a probe connects to it, and only a closed
    /// socket refuses.
    fn reap(&mut self) {
        self.last_reap = Instant::now();
        for slot in 0..MAX_CLIENTS {
            let Some(id) = self.clients[slot].as_ref().map(|c| c.id) else {
                continue;
            };
            let gone = match (
                UnixDatagram::unbound(),
                abstract_addr(&ibsim::in_name(&self.base, id)),
            ) {
                (Ok(probe), Ok(addr)) => matches!(
                    probe.connect_addr(&addr),
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused
                ),
                _ => false,
            };
            if gone {
                eprintln!("ibkit fabric serve: client {slot} (id {id}) is gone - its slot is free");
                self.disconnect(slot);
            }
        }
    }

    fn disconnect(&mut self, slot: usize) {
        if let Some(c) = self.clients[slot].take() {
            if c.issm {
                self.fabric.set_is_sm(c.node, false);
            }
            if !self.clients.iter().flatten().any(|o| o.node == c.node) {
                self.fabric.detach(c.node);
            }
        }
    }

    /// A packet from client `slot`; true when it went into the fabric.
    fn on_packet(&mut self, slot: usize, b: &[u8]) -> bool {
        self.stats.packets += 1;
        let mut r = match SimRequest::parse(b) {
            Ok(r) => r,
            Err(e) => {
                self.stats.malformed += 1;
                self.log_limited(&format!("client {slot}: malformed packet ({e}) - dropped"));
                return false;
            }
        };
        let Some(node) = self.clients[slot].as_ref().map(|c| c.node) else {
            return false;
        };
        let class = r.class();
        if class != 0x01 && class != 0x81 {
            self.log_limited(&format!(
                "client {slot}: class {class:#04x} is not served (SMPs only) - timed out"
            ));
            return self.refuse(slot, r);
        }
        if r.is_response() {
            // Nobody here asked an outside client anything.
            return false;
        }
        // The request as the client sent it, to answer with its own TID.
        let original = r.clone();
        let tid = (r.tid() & 0xFFFF_FFFF_FFFF) | ((slot as u64) << 48);
        r.set_tid(tid);
        let Ok(smp) = Smp::parse(&r.mad).cloned() else {
            self.stats.malformed += 1;
            self.log_limited(&format!("client {slot}: malformed SMP - timed out"));
            return self.refuse(slot, r);
        };
        if self.verbose {
            eprintln!(
                "client {slot} @{}: {:?} {:?} mod {:#x} dlid {:#x}",
                self.fabric.topo.nodes[node].name,
                smp.method(),
                smp.attribute_id(),
                smp.attribute_modifier(),
                r.dlid
            );
        }
        let repress = smp.method() == mad_core::Method::TrapRepress;
        if !repress {
            if let Some(c) = self.clients[slot].as_mut() {
                c.outstanding.push((tid, original));
            }
        }
        let dlid = if class == 0x81 { 0xFFFF } else { r.dlid };
        // One that cannot leave the node gets no response: settle() times
        // it out.
        self.fabric.inject(node, smp, dlid);
        true
    }

    /// Answers a request at once with ETIMEDOUT.
    fn refuse(&mut self, slot: usize, mut r: SimRequest) -> bool {
        r.status = ibsim::ETIMEDOUT;
        self.stats.timeouts += 1;
        self.write(slot, &r);
        false
    }

    /// Logs a line about something a client did, at most
    /// [`LOG_PER_SECOND`] a second: a client cannot flood the log; the
    /// lines left out are counted, and said when the next second starts.
    fn log_limited(&mut self, line: &str) {
        let now = Instant::now();
        if now.duration_since(self.log_window) >= Duration::from_secs(1) {
            if self.log_skipped > 0 {
                eprintln!(
                    "ibkit fabric serve: {} more lines like these left out",
                    self.log_skipped
                );
            }
            self.log_window = now;
            self.log_lines = 0;
            self.log_skipped = 0;
        }
        if self.log_lines < LOG_PER_SECOND {
            self.log_lines += 1;
            eprintln!("ibkit fabric serve: {}", clean(line));
        } else {
            self.log_skipped += 1;
            self.stats.unlogged += 1;
        }
    }

    fn find_node(&self, name: &str) -> Option<usize> {
        self.fabric.topo.nodes.iter().position(|n| n.name == name)
    }

    /// A control request from `peer`; the reply to send back (None:
    /// ignore it). A sender who may not use the server gets an error
    /// reply and changes nothing.
    fn on_ctl(&mut self, b: &[u8], peer: Option<Peer>) -> Option<Vec<u8>> {
        let mut ctl = match SimCtl::parse(b) {
            Ok(c) => c,
            Err(e) => {
                self.stats.malformed += 1;
                self.log_limited(&format!("bad control packet ({e}) - dropped"));
                return None;
            }
        };
        let allowed = self.access.check(peer);
        if allowed.is_err() {
            self.stats.refused += 1;
        }
        let ok = allowed.and_then(|()| self.ctl_request(&mut ctl));
        if let Err(why) = ok {
            self.log_limited(&format!("control {:?} refused: {why}", ctl.kind));
            ctl.kind = CtlType::Error;
        }
        Some(ctl.encode().to_vec())
    }

    fn client_node(&self, id: u32) -> Result<usize, String> {
        self.clients
            .get(id as usize)
            .and_then(|c| c.as_ref())
            .map(|c| c.node)
            .ok_or_else(|| format!("no client {id}"))
    }

    fn ctl_request(&mut self, ctl: &mut SimCtl) -> Result<(), String> {
        match ctl.kind {
            CtlType::Connect => return self.connect(ctl),
            CtlType::Disconnect => {
                if (ctl.client as usize) < MAX_CLIENTS {
                    self.disconnect(ctl.client as usize);
                }
                return Ok(());
            }
            CtlType::Error => return Err("an error packet".into()),
            _ => {}
        }
        let node = self.client_node(ctl.client)?;
        // A client at a switch is at its management port 0 (as in ibsim).
        let home: u8 = if self.fabric.topo.nodes[node].kind == NodeType::Switch {
            0
        } else {
            1
        };
        let info = |f: &mut Fabric, attr, am| {
            f.local_get(node, home, attr, am)
                .ok_or_else(|| format!("{attr:?} cannot be read"))
        };
        let d = &mut ctl.data;
        match ctl.kind {
            CtlType::GetPort => {
                let pi = info(&mut self.fabric, AttributeId::PortInfo, u32::from(home))?;
                d.fill(0);
                d[0..2].copy_from_slice(&u16::from_be_bytes([pi[16], pi[17]]).to_ne_bytes());
                d[2] = pi[32] & 0x0F;
            }
            CtlType::GetVendor => {
                let ni = info(&mut self.fabric, AttributeId::NodeInfo, 0)?;
                d.fill(0);
                let vendor = u32::from_be_bytes([0, ni[37], ni[38], ni[39]]);
                let part = u32::from(u16::from_be_bytes([ni[30], ni[31]]));
                let rev = u32::from_be_bytes([ni[32], ni[33], ni[34], ni[35]]);
                d[0..4].copy_from_slice(&vendor.to_ne_bytes());
                d[4..8].copy_from_slice(&part.to_ne_bytes());
                d[8..12].copy_from_slice(&rev.to_ne_bytes());
                d[16..24].copy_from_slice(&1u64.to_ne_bytes());
            }
            CtlType::GetGid => {
                let pi = info(&mut self.fabric, AttributeId::PortInfo, u32::from(home))?;
                let ni = info(&mut self.fabric, AttributeId::NodeInfo, 0)?;
                d.fill(0);
                d[0..8].copy_from_slice(&pi[8..16]);
                d[8..16].copy_from_slice(&ni[20..28]);
            }
            CtlType::GetGuid => {
                let g = self.fabric.topo.nodes[node].guid;
                d.fill(0);
                d[0..8].copy_from_slice(&g.to_ne_bytes());
            }
            CtlType::GetNodeInfo => *d = info(&mut self.fabric, AttributeId::NodeInfo, 0)?,
            CtlType::GetPortInfo => {
                let ports = self.fabric.topo.nodes[node].ports;
                let p = if d[0] == 0 || d[0] > ports {
                    home
                } else {
                    d[0]
                };
                *d = info(&mut self.fabric, AttributeId::PortInfo, u32::from(p))?;
            }
            CtlType::SetIsSm => {
                let on = i32::from_ne_bytes([d[0], d[1], d[2], d[3]]) != 0;
                let slot = ctl.client as usize;
                if let Some(c) = self.clients[slot].as_mut() {
                    c.issm = on;
                }
                self.fabric.set_is_sm(node, on);
            }
            CtlType::GetPkeys => {
                let pk = info(&mut self.fabric, AttributeId::PKeyTable, 0)?;
                *d = pk;
            }
            CtlType::Connect | CtlType::Disconnect | CtlType::Error => {}
        }
        Ok(())
    }

    fn connect(&mut self, ctl: &mut SimCtl) -> Result<(), String> {
        let info = ClientInfo::parse(&ctl.data);
        if self.clients.iter().all(Option::is_some) {
            self.reap();
        }
        let slot = (0..MAX_CLIENTS)
            .find(|&i| self.clients[i].is_none())
            .ok_or("every client slot is taken")?;
        let node = if info.nodeid.is_empty() {
            self.fabric.sm_node
        } else {
            self.find_node(&info.nodeid)
                .ok_or_else(|| format!("no node \"{}\"", clean(&info.nodeid)))?
        };
        if info.issm
            && self
                .clients
                .iter()
                .flatten()
                .any(|c| c.node == node && c.issm)
        {
            return Err(format!("an SM already runs on \"{}\"", clean(&info.nodeid)));
        }
        let addr =
            abstract_addr(&ibsim::in_name(&self.base, info.id)).map_err(|e| e.to_string())?;
        self.outs[slot]
            .connect_addr(&addr)
            .map_err(|e| format!("cannot reach client {}'s socket: {e}", info.id))?;
        self.clients[slot] = Some(Client {
            id: info.id,
            node,
            issm: info.issm,
            outstanding: Vec::new(),
        });
        self.fabric.attach(node);
        if info.issm {
            self.fabric.set_is_sm(node, true);
        }
        let name = self.fabric.topo.nodes[node].name.clone();
        eprintln!(
            "ibkit fabric serve: client {slot} (pid {}) attached at \"{}\"{}",
            info.id,
            clean(&name),
            if info.issm { " as SM" } else { "" }
        );
        let reply = ClientInfo {
            id: slot as u32,
            qp: info.qp,
            issm: info.issm,
            nodeid: name,
        };
        reply.encode(&mut ctl.data);
        Ok(())
    }

    fn node_arg(&self, name: Option<&str>) -> Result<usize, String> {
        let name = name.ok_or("a node name is missing")?;
        self.find_node(name)
            .ok_or_else(|| format!("no node \"{name}\""))
    }

    /// One command of `ibkit fabric ctl`; the text to answer.
    fn on_command(&mut self, line: &str) -> String {
        match self.command(line) {
            Ok(s) => s,
            Err(e) => format!("error: {e}"),
        }
    }

    fn command(&mut self, line: &str) -> Result<String, String> {
        let mut w = line.split_whitespace();
        let verb = w.next().unwrap_or("");
        let words = line.split_whitespace().count();
        let takes = match verb {
            "link-down" | "link-up" => 2,
            "node-down" | "node-up" | "dump" => 1,
            "stats" => 0,
            _ => words.saturating_sub(1),
        };
        if let Some(extra) = line.split_whitespace().nth(takes + 1) {
            return Err(format!(
                "{verb} takes {takes} argument(s); unexpected \"{}\"",
                extra.escape_debug()
            ));
        }
        let now = self.fabric.now_ns();
        let event = match verb {
            "link-down" | "link-up" => {
                let n = self.node_arg(w.next())?;
                let p: u8 = w
                    .next()
                    .and_then(|p| p.parse().ok())
                    .filter(|&p| p >= 1 && p <= self.fabric.topo.nodes[n].ports)
                    .ok_or("a port number of the node is missing")?;
                let cabled = self.fabric.topo.peer_of(n, p).is_some();
                let who = clean(&self.fabric.topo.nodes[n].name);
                if verb == "link-down" {
                    if !cabled {
                        return Err(format!("{who} port {p} has no cable up to take down"));
                    }
                    FabricEvent::LinkDown(n, p)
                } else {
                    if cabled {
                        return Err(format!("the cable at {who} port {p} is up already"));
                    }
                    FabricEvent::LinkUp(n, p)
                }
            }
            "node-down" => {
                let n = self.node_arg(w.next())?;
                if !self.down.insert(n) {
                    return Err(format!(
                        "{} is down already",
                        clean(&self.fabric.topo.nodes[n].name)
                    ));
                }
                FabricEvent::NodeDown(n)
            }
            "node-up" => {
                let n = self.node_arg(w.next())?;
                if !self.down.remove(&n) {
                    return Err(format!(
                        "{} is up: only a node taken down with node-down comes back up",
                        clean(&self.fabric.topo.nodes[n].name)
                    ));
                }
                FabricEvent::NodeUp(n)
            }
            "dump" => {
                let path = w.next().ok_or("dump needs a file to write")?;
                let json = self.dump();
                std::fs::write(path, json.to_string()).map_err(|e| format!("{path}: {e}"))?;
                return Ok(format!("ok: state written to {path}"));
            }
            "stats" => {
                let s = &self.stats;
                let secs = self.started.elapsed().as_secs_f64();
                return Ok(serde_json::json!({
                    "packets": s.packets,
                    "answered": s.answered,
                    "timeouts": s.timeouts,
                    "malformed": s.malformed,
                    "refused": s.refused,
                    "unlogged": s.unlogged,
                    "traps": s.traps,
                    "batches": s.batches,
                    "fabric_ns": s.fabric_ns,
                    "send_ns": s.send_ns,
                    "hops": self.fabric.stats.hops,
                    "expired": self.fabric.stats.expired,
                    "uptime_s": secs,
                })
                .to_string());
            }
            "" => return Err("empty command".into()),
            v => {
                return Err(format!(
                    "unknown command \"{v}\" (link-down, link-up, node-down, node-up, dump, stats)"
                ))
            }
        };
        self.fabric.schedule(now, event);
        self.settle();
        self.flush();
        Ok(format!("ok: {event:?}"))
    }

    /// The fabric's state as ibkit sees it: nodes, links, LIDs, port
    /// states, forwarding tables, and each hypervisor's VFs (LID, vport
    /// state).
    fn dump(&self) -> serde_json::Value {
        let f = &self.fabric;
        let nodes: Vec<serde_json::Value> = f
            .topo
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let ports: Vec<serde_json::Value> = (1..=n.ports)
                    .map(|p| {
                        let peer = f.topo.peer_of(i, p).map(
                            |(m, q)| serde_json::json!({"node": f.topo.nodes[m].name, "port": q}),
                        );
                        serde_json::json!({
                            "port": p,
                            "state": port_state(&f.nodes[i], p),
                            "peer": peer,
                        })
                    })
                    .collect();
                let mut v = serde_json::json!({
                    "name": n.name,
                    "guid": format!("{:#018x}", n.guid),
                    "kind": if n.kind == NodeType::Switch { "switch" } else { "ca" },
                    "lid": f.nodes[i].lid().0,
                    "ports": ports,
                });
                if let SimNode::Hypervisor(h) = &f.nodes[i] {
                    let vfs: Vec<serde_json::Value> = h
                        .vports
                        .vfs
                        .iter()
                        .map(|v| serde_json::json!({"lid": v.vport_lid.0, "state": u8::from(v.vport_state)}))
                        .collect();
                    v["vfs"] = serde_json::json!(vfs);
                }
                if let SimNode::Switch(s) = &f.nodes[i] {
                    let top = s.model.switch_info.linear_fdb_top;
                    let lft: Vec<u8> = (0..=top).map(|l| s.model.lft_port(Lid(l))).collect();
                    v["lft"] = serde_json::json!(lft);
                }
                v
            })
            .collect();
        serde_json::json!({ "nodes": nodes })
    }
}

fn port_state(n: &SimNode, p: u8) -> u8 {
    let p = usize::from(p);
    let state = match n {
        SimNode::Switch(s) => s.model.ports.get(p).map(|x| x.info.port_state),
        SimNode::Ca(c) => c.model.ports.get(p).map(|x| x.info.port_state),
        SimNode::Hypervisor(h) => h.pf.model.ports.get(p).map(|x| x.info.port_state),
    };
    state.map_or(0, u8::from)
}

/// Sends one command to the `ibkit fabric serve` on socket `base` and
/// returns its answer.
pub fn ctl(base: &str, command: &str) -> Result<String, String> {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let me = format!(
        "{base}:ibkitctl{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let s = UnixDatagram::bind_addr(&abstract_addr(&me).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let to = abstract_addr(&control_name(base)).map_err(|e| e.to_string())?;
    s.send_to_addr(command.as_bytes(), &to)
        .map_err(|e| format!("no ibkit fabric serve on @{}: {e}", control_name(base)))?;
    let mut buf = vec![0u8; 65536];
    let n = s.recv(&mut buf).map_err(|e| format!("no answer: {e}"))?;
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    if let Some(e) = text.strip_prefix("error: ") {
        return Err(e.to_string());
    }
    Ok(text)
}

struct PollFd {
    fd: i32,
    revents: i16,
}

impl PollFd {
    fn new(fd: i32) -> PollFd {
        PollFd { fd, revents: 0 }
    }
    fn readable(&self) -> bool {
        self.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0
    }
}

fn poll(fds: &mut [PollFd], timeout: Duration) -> std::io::Result<()> {
    let mut raw: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `raw` is a valid array of pollfd of the given length.
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let r = unsafe { libc::poll(raw.as_mut_ptr(), raw.len() as libc::nfds_t, ms) };
        if r >= 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
    for (f, r) in fds.iter_mut().zip(&raw) {
        f.revents = r.revents;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_servers_user_root_and_the_allowed_pass() {
        let me = nix::unistd::geteuid().as_raw();
        let a = Access::new(&[4321]);
        for uid in [me, 0, 4321] {
            assert_eq!(a.check(Some(Peer { uid, pid: 7 })), Ok(()));
        }
        let other = if me == 1234 { 1235 } else { 1234 };
        let e = a.check(Some(Peer { uid: other, pid: 7 })).unwrap_err();
        assert!(e.contains(&format!("uid {other} (pid 7)")), "{e}");
        assert!(a.check(None).is_err(), "no credentials, no access");
    }

    #[test]
    fn what_clients_chose_is_logged_escaped_and_short() {
        assert_eq!(clean("H-1"), "H-1");
        assert_eq!(clean("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
        let long = clean(&"x".repeat(1000));
        assert_eq!(long.chars().count(), 201);
        assert!(long.ends_with('…'));
    }
}
