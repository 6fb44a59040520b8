//! For integrators' tests (feature `test-utils`): a mock frontend that
//! brings a guest up on a backend with one call, and a hostile frontend
//! that runs every attack vhca defends against on a backend of any guest
//! memory and device type, reporting what each attempt got.
//!
//! ```ignore
//! let report = Hostile::new(attacker, victim, memory_range).run(&mut backend);
//! report.assert_all_refused();
//! ```

use crate::backend::{Backend, Held, Limits, PortView};
use crate::channel::Hub;
use crate::device::Device;
use crate::frontend::{Context, Cq, Mr, Pd, Qp, SendWr, Transport, Wc};
use crate::handles::DomainId;
use crate::proto::{access, Command, Handle, QpType, Refusal, Response, MAX_CQE, MAX_WR};
use crate::ring::{BackendRing, GuestRing, SLOTS};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vm_memory::{Bytes, GuestAddress, GuestMemory, GuestMemoryMmap};

/// A guest brought up on a backend: a context, a PD, one CQ, one QP and a
/// registered buffer.
pub struct MockGuest<T: Transport> {
    /// The open context.
    pub ctx: Context<T>,
    /// Its PD.
    pub pd: Pd,
    /// Its CQ (send and receive).
    pub cq: Cq,
    /// Its QP.
    pub qp: Qp,
    /// A buffer of `len` bytes.
    pub buf: u64,
    /// The buffer's registration (local write, remote read and write).
    pub mr: Mr,
    /// The port's LID.
    pub lid: u16,
}

impl<T: Transport> MockGuest<T> {
    /// Brings `ctx` up with a `qp_type` QP and a registered buffer of
    /// `len` bytes.
    pub fn new(
        mut ctx: Context<T>,
        qp_type: QpType,
        len: u64,
    ) -> Result<MockGuest<T>, crate::frontend::Error> {
        let (lid, _, _) = ctx.query_port()?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(256)?;
        let qp = ctx.create_qp(pd, qp_type, &cq, &cq, 64, 64)?;
        let buf = ctx.alloc(len)?;
        let mr = ctx.reg_mr(pd, buf, len, access::ALL)?;
        Ok(MockGuest {
            ctx,
            pd,
            cq,
            qp,
            buf,
            mr,
            lid,
        })
    }

    /// Connects two RC guests to each other (or readies two UD ones).
    pub fn connect(
        a: &mut MockGuest<T>,
        b: &mut MockGuest<T>,
    ) -> Result<(), crate::frontend::Error> {
        a.ctx.ready(&a.qp, b.qp.qpn, b.lid)?;
        b.ctx.ready(&b.qp, a.qp.qpn, a.lid)
    }

    /// Posts a signaled `opcode` of `len` bytes from the buffer's start.
    pub fn post(
        &mut self,
        opcode: u8,
        len: u32,
        rkey: u32,
        remote: u64,
    ) -> Result<(), crate::frontend::Error> {
        self.post_at(opcode, 0, len, rkey, remote)
    }

    /// Posts a signaled `opcode` of `len` bytes at `off` into the buffer.
    pub fn post_at(
        &mut self,
        opcode: u8,
        off: u64,
        len: u32,
        rkey: u32,
        remote: u64,
    ) -> Result<(), crate::frontend::Error> {
        let wr = SendWr {
            wr_id: u64::from(opcode),
            opcode,
            signaled: true,
            lkey: self.mr.lkey,
            addr: self.buf + off,
            len,
            rkey,
            remote_addr: remote,
            ..Default::default()
        };
        self.ctx.post_send(&mut self.qp, &wr)
    }

    /// Posts the buffer's start as a receive of `len` bytes.
    pub fn recv(&mut self, wr_id: u64, len: u32) -> Result<(), crate::frontend::Error> {
        let (lkey, buf) = (self.mr.lkey, self.buf);
        self.ctx.post_recv(&mut self.qp, wr_id, lkey, buf, len)
    }

    /// The next completion, polling up to `timeout`.
    pub fn completion(&mut self, timeout: Duration) -> Option<Wc> {
        let mut wc = [Wc::default(); 1];
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.ctx.poll_cq(&mut self.cq, &mut wc).ok()? == 1 {
                return Some(wc[0]);
            }
            std::hint::spin_loop();
        }
        None
    }
}

/// Opens a guest of `len` bytes of memory on `hub` seeing `lid`.
pub fn mock_on_hub<D: Device<GuestMemoryMmap>>(
    hub: &Arc<Hub<D>>,
    lid: u16,
    qp_type: QpType,
) -> Result<MockGuest<crate::channel::Direct<D>>, String> {
    let port = crate::backend::PortView {
        lid,
        port_guid: 0x0002_c903_0000_0000 | u64::from(lid),
        state: 4,
    };
    let (t, mem, lay) = hub
        .attach(8 << 20, crate::backend::Limits::default(), port)
        .map_err(|e| e.to_string())?;
    let ctx = Context::open(t, mem, lay).map_err(|e| e.to_string())?;
    MockGuest::new(ctx, qp_type, 1 << 20).map_err(|e| e.to_string())
}

/// One attempt of the hostile frontend and what it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// What was tried.
    pub name: &'static str,
    /// What the backend answered (a refusal, or `None` if it was accepted).
    pub refused: Option<Refusal>,
    /// True when the answer is the one a safe backend gives.
    pub safe: bool,
}

/// What the hostile frontend found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Each attempt.
    pub attempts: Vec<Attempt>,
    /// True when the victim's holdings were the same after every attempt
    /// and after the attacker was torn down.
    pub victim_untouched: bool,
    /// True when tearing the attacker down left the device as it was
    /// before the attacker allocated anything.
    pub nothing_leaked: bool,
    /// True when the victim could still allocate (and free) a PD at the
    /// end.
    pub victim_works: bool,
}

impl Report {
    /// Panics, naming each attempt that was not refused as it should be.
    pub fn assert_all_refused(&self) {
        let bad: Vec<_> = self.attempts.iter().filter(|a| !a.safe).collect();
        assert!(bad.is_empty(), "attempts not refused: {bad:#?}");
        assert!(self.victim_untouched, "the victim's resources changed");
        assert!(self.nothing_leaked, "the attacker's teardown leaked");
        assert!(self.victim_works, "the victim no longer works");
    }
}

fn note(
    v: &mut Vec<Attempt>,
    name: &'static str,
    got: Result<[u64; 7], Refusal>,
    want: &[Refusal],
) {
    let refused = got.err();
    v.push(Attempt {
        name,
        refused,
        safe: refused.is_some_and(|r| want.contains(&r)),
    });
}

/// A hostile guest: every attack on one backend, from domain `attacker`
/// (added but not yet opened) against domain `victim` (opened).
pub struct Hostile {
    attacker: DomainId,
    victim: DomainId,
    /// The attacker's guest-physical memory: start and length.
    mem: (u64, u64),
    seq: u32,
}

impl Hostile {
    /// An attacker whose memory is `mem` (start, length; at least 1 MiB).
    pub fn new(attacker: DomainId, victim: DomainId, mem: (u64, u64)) -> Hostile {
        Hostile {
            attacker,
            victim,
            mem,
            seq: 0,
        }
    }

    fn send<M: GuestMemory + Clone, D: Device<M>>(
        &mut self,
        b: &mut Backend<M, D>,
        dom: DomainId,
        bytes: &[u8],
    ) -> Result<[u64; 7], Refusal> {
        let r = b.execute(dom, bytes);
        Response::decode(&r).map_or(Err(Refusal::Malformed), |r| r.result)
    }

    fn cmd<M: GuestMemory + Clone, D: Device<M>>(
        &mut self,
        b: &mut Backend<M, D>,
        dom: DomainId,
        c: Command,
    ) -> Result<[u64; 7], Refusal> {
        self.seq = self.seq.wrapping_add(1);
        self.send(b, dom, &c.encode(self.seq))
    }

    /// Runs every attack; see [`Report`].
    pub fn run<M: GuestMemory + Clone, D: Device<M>>(&mut self, b: &mut Backend<M, D>) -> Report {
        let mut rep = Report::default();
        let (x, y) = (self.attacker, self.victim);
        // The victim holds something to aim at.
        let vpd = self.cmd(b, y, Command::AllocPd).map(|v| Handle(v[0]));
        let victim_before = b.held(y);
        let live_before = b.device().objects();

        // pvrdma: commands before the channel is set up.
        let r = self.cmd(b, x, Command::AllocPd);
        note(
            &mut rep.attempts,
            "command before OpenDevice",
            r,
            &[Refusal::NotOpen],
        );
        let r = self.cmd(b, x, Command::AllocUar);
        note(
            &mut rep.attempts,
            "UAR before OpenDevice",
            r,
            &[Refusal::NotOpen],
        );
        let _ = self.cmd(b, x, Command::OpenDevice);

        // Malformed and truncated commands.
        let r = self.send(b, x, &[0xFF; 64]);
        note(
            &mut rep.attempts,
            "garbage command",
            r,
            &[Refusal::Malformed],
        );
        let r = self.send(b, x, &Command::AllocPd.encode(1)[..40]);
        note(
            &mut rep.attempts,
            "truncated command",
            r,
            &[Refusal::Malformed],
        );
        let mut extra = Command::FreePd {
            pd: Handle::new(1, 1),
        }
        .encode(1);
        extra[63] = 1;
        let r = self.send(b, x, &extra);
        note(
            &mut rep.attempts,
            "nonzero unused argument",
            r,
            &[Refusal::Malformed],
        );

        // Another domain's handles.
        if let Ok(vpd) = vpd {
            let r = self.cmd(b, x, Command::FreePd { pd: vpd });
            note(
                &mut rep.attempts,
                "another domain's PD",
                r,
                &[Refusal::BadHandle],
            );
            let (base, _) = self.mem;
            let r = self.cmd(
                b,
                x,
                Command::RegMr {
                    pd: vpd,
                    addr: base,
                    len: 4096,
                    access: access::LOCAL_WRITE,
                },
            );
            note(
                &mut rep.attempts,
                "registering in another domain's PD",
                r,
                &[Refusal::BadHandle],
            );
        }
        let r = self.cmd(
            b,
            x,
            Command::DestroyQp {
                qp: Handle::new(77, 3),
            },
        );
        note(
            &mut rep.attempts,
            "made-up handle",
            r,
            &[Refusal::BadHandle],
        );

        // Stale handles after destroy.
        if let Ok(pd) = self.cmd(b, x, Command::AllocPd).map(|v| Handle(v[0])) {
            let _ = self.cmd(b, x, Command::FreePd { pd });
            let r = self.cmd(b, x, Command::FreePd { pd });
            note(&mut rep.attempts, "stale handle", r, &[Refusal::BadHandle]);
        }

        // DMA addresses outside the guest's memory, or wrapping.
        let pd = self.cmd(b, x, Command::AllocPd).map(|v| Handle(v[0]));
        if let Ok(pd) = pd {
            let (base, len) = self.mem;
            for (name, addr, l) in [
                (
                    "registration past the end of memory",
                    base + len - 4096,
                    8192,
                ),
                ("registration wrapping around", u64::MAX - 4095, 8192),
                (
                    "registration below memory",
                    base.saturating_sub(1 << 20),
                    4096,
                ),
            ] {
                let r = self.cmd(
                    b,
                    x,
                    Command::RegMr {
                        pd,
                        addr,
                        len: l,
                        access: access::LOCAL_WRITE,
                    },
                );
                note(&mut rep.attempts, name, r, &[Refusal::BadAddress]);
            }
            // pvrdma: guest-sized counts bounded before use.
            let mut w = Command::CreateCq {
                cqe: 1,
                mr: Handle::new(1, 1),
                offset: 0,
            }
            .encode(9);
            w[8..16].copy_from_slice(&(u64::from(MAX_CQE) + 1).to_le_bytes());
            let r = self.send(b, x, &w);
            note(
                &mut rep.attempts,
                "CQ larger than the bound",
                r,
                &[Refusal::Malformed],
            );
            let mut w = Command::CreateQp {
                pd,
                send_cq: Handle::new(1, 1),
                recv_cq: Handle::new(1, 1),
                qp_type: QpType::Rc,
                max_send_wr: 1,
                max_recv_wr: 1,
                mr: Handle::new(1, 1),
                offset: 0,
            }
            .encode(9);
            w[40..48].copy_from_slice(&(u64::from(MAX_WR) + 1).to_le_bytes());
            let r = self.send(b, x, &w);
            note(
                &mut rep.attempts,
                "QP larger than the bound",
                r,
                &[Refusal::Malformed],
            );
            // Registration beyond the domain's byte limit: the whole memory,
            // many times over.
            let mut last = Ok([0; 7]);
            for _ in 0..4096 {
                last = self.cmd(
                    b,
                    x,
                    Command::RegMr {
                        pd,
                        addr: self.mem.0,
                        len: self.mem.1,
                        access: access::LOCAL_WRITE,
                    },
                );
                if last.is_err() {
                    break;
                }
            }
            note(
                &mut rep.attempts,
                "registration beyond the limits",
                last,
                &[Refusal::Limit],
            );
        }

        // QP0 and the subnet management classes.
        let r = self.cmd(
            b,
            x,
            Command::SendMad {
                qpn: 0,
                addr: self.mem.0,
            },
        );
        note(&mut rep.attempts, "a MAD on QP0", r, &[Refusal::Forbidden]);
        let smp = [1u8, 0x81, 1, 1];
        if let Some(m) = b.memory(x) {
            let _ = m.write_slice(&smp, GuestAddress(self.mem.0));
        }
        let r = self.cmd(
            b,
            x,
            Command::SendMad {
                qpn: 1,
                addr: self.mem.0,
            },
        );
        note(
            &mut rep.attempts,
            "a directed-route SMP on QP1",
            r,
            &[Refusal::Forbidden],
        );

        // Ring indices out of range, and a ring of garbage.
        let at = self.mem.0 + ((self.mem.1 / 2) & !0xFFF);
        if let Some(m) = b.memory(x) {
            let _ = GuestRing::init(m, at);
        }
        if let Ok(mut ring) = BackendRing::attach(b, x, at) {
            if let Some(m) = b.memory(x) {
                let _ = m.write_slice(&[0xA5; 64], GuestAddress(at + 64));
                GuestRing::poke_indices(m, at, 1, 0);
            }
            let r = ring.service(b).map(|n| [n as u64, 0, 0, 0, 0, 0, 0]);
            let advanced = r == Ok([1, 0, 0, 0, 0, 0, 0]);
            rep.attempts.push(Attempt {
                name: "a garbage request on the ring (answered, consumer advances)",
                refused: r.err(),
                safe: advanced,
            });
            if let Some(m) = b.memory(x) {
                GuestRing::poke_indices(m, at, 1 + SLOTS + 5, 0);
            }
            let r = ring.service(b).map(|_| [0; 7]);
            note(
                &mut rep.attempts,
                "producer index past the ring",
                r,
                &[Refusal::RingBroken],
            );
        }

        // Dying in the middle of a command: queued, never served.
        let at2 = at + 0x2_0000;
        if let Some(m) = b.memory(x) {
            if let Some(mut g) = GuestRing::init(m, at2) {
                let _ = g.push(m, &Command::AllocPd.encode(5));
            }
        }
        rep.victim_untouched = b.held(y) == victim_before;
        b.remove_domain(x);
        rep.victim_untouched &= b.held(y) == victim_before && b.held(x) == Held::default();
        rep.nothing_leaked = b.device().objects() == live_before;
        rep.victim_works = match self.cmd(b, y, Command::AllocPd) {
            Ok(r) => self.cmd(b, y, Command::FreePd { pd: Handle(r[0]) }).is_ok(),
            Err(_) => false,
        };
        rep
    }

    /// Every attack on `b` from a new domain against a new, opened victim:
    /// both get memory from `memory` (the attacker's lies at `range`,
    /// start and length) and `limits`.
    pub fn on_new_domains<M: GuestMemory + Clone, D: Device<M>>(
        b: &mut Backend<M, D>,
        memory: impl Fn() -> M,
        range: (u64, u64),
        limits: Limits,
    ) -> Report {
        let victim = b.add_domain(memory(), limits, PortView::default());
        let mut h = Hostile::new(DomainId(0), victim, range);
        let opened = h.cmd(b, victim, Command::OpenDevice);
        assert_eq!(opened, Ok([0; 7]), "the victim could not open the device");
        h.attacker = b.add_domain(memory(), limits, PortView::default());
        h.run(b)
    }
}

/// A hostile guest's data path against the software HCA, for fuzzing:
/// `data` becomes the attacker's QP buffer (producer indices and work
/// requests: opcodes, keys, addresses, lengths, remote keys, destinations)
/// and its CQ header, then it rings. Panics if the peer guest is written
/// outside the region it registered, or if the attacker's teardown leaves
/// anything of it on the device.
pub fn hostile_data_path(data: &[u8]) {
    use crate::device::SoftHca;
    if let Ok(hub) = Hub::new(SoftHca::<GuestMemoryMmap>::new(1)) {
        hostile_data_path_on(&hub, |_| data.to_vec(), Duration::ZERO);
    }
}

/// What a data-path attacker aims at: the peer's registered region (its
/// end and length) and the keys in play.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The end of the peer's region (guest address).
    pub peer_end: u64,
    /// Its length.
    pub peer_len: u64,
    /// The attacker's own lkey.
    pub lkey: u32,
    /// The peer's rkey.
    pub rkey: u32,
}

/// [`hostile_data_path`] on any device behind `hub` (whose loop must not
/// be running): two guests, the attacker connected to its peer, and the
/// attacker's queue bytes from `data`. The device runs four passes, then,
/// after `settle` (for an HCA that completes on its own time), four more.
pub fn hostile_data_path_on<D: Device<GuestMemoryMmap>>(
    hub: &Arc<Hub<D>>,
    data: impl FnOnce(Target) -> Vec<u8>,
    settle: Duration,
) {
    use crate::layout::qp_bytes;
    let (Ok(mut a), Ok(mut b)) = (
        mock_on_hub(hub, 5, QpType::Rc),
        mock_on_hub(hub, 6, QpType::Rc),
    ) else {
        return;
    };
    if MockGuest::connect(&mut a, &mut b).is_err() {
        return;
    }
    let data = data(Target {
        peer_end: b.buf + b.mr.len,
        peer_len: b.mr.len,
        lkey: a.mr.lkey,
        rkey: b.mr.rkey,
    });
    // b's memory just past its registered buffer: no key reaches it.
    let guard = b.buf + b.mr.len;
    let mut before = [0u8; 4096];
    let _ = b.ctx.write(guard, &[0x5A; 4096]);
    let _ = b.ctx.read(guard, &mut before);
    let alone = hub.backend().device().objects();
    let (qp_part, cq_part) = data.split_at(data.len().min(qp_bytes(64, 64) as usize));
    let _ = a.ctx.write(a.qp.buffer(), qp_part);
    let _ = a
        .ctx
        .write(a.cq.buffer(), &cq_part[..cq_part.len().min(64)]);
    let _ = b.recv(1, 4096);
    let _ = a.ctx.ring_doorbell();
    for _ in 0..4 {
        hub.backend().poll(&mut Vec::new());
    }
    if !settle.is_zero() {
        std::thread::sleep(settle);
        for _ in 0..4 {
            hub.backend().poll(&mut Vec::new());
        }
    }
    let mut after = [0u8; 4096];
    let _ = b.ctx.read(guard, &mut after);
    assert_eq!(before, after, "the peer was written outside its region");
    let ours = alone / 2;
    drop(a);
    assert_eq!(
        hub.backend().device().objects(),
        alone - ours,
        "the attacker's teardown left objects behind"
    );
    drop(b);
    assert_eq!(hub.backend().device().objects(), 0);
}

/// Bytes for a data-path attacker's queue, deterministic in `seed`: one
/// time in three random, else plausible producer indices and opcodes, keys
/// among the real ones in `t` or small numbers, and addresses around the
/// edges of the peer's region.
pub fn hostile_queue(seed: u64, t: &Target) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let key = |real: u32, n: u64| if n % 2 == 0 { real } else { (n % 24) as u32 };
    let mut data = vec![0u8; 64 + 64 * 64 + 64];
    for b in data.iter_mut() {
        *b = next() as u8;
    }
    if seed % 3 != 0 {
        // Sends posted, no receive: a device that reads both producers
        // at once still takes the sends.
        data[0..4].copy_from_slice(&((1 + next() % 8) as u32).to_le_bytes());
        data[4..8].copy_from_slice(&0u32.to_le_bytes());
        for w in 0..8 {
            let at = 64 + w * 64;
            let edge = if next() % 2 == 0 {
                t.peer_end
            } else {
                t.peer_end - t.peer_len
            };
            let near = edge.wrapping_add(next() % 16384).wrapping_sub(8192);
            data[at + 8] = (next() % 3) as u8;
            let k = key(t.lkey, next());
            data[at + 12..at + 16].copy_from_slice(&k.to_le_bytes());
            data[at + 16..at + 24].copy_from_slice(&near.to_le_bytes());
            data[at + 24..at + 28].copy_from_slice(&((next() % 8192) as u32).to_le_bytes());
            let k = key(t.rkey, next());
            data[at + 28..at + 32].copy_from_slice(&k.to_le_bytes());
            data[at + 32..at + 40].copy_from_slice(&near.to_le_bytes());
        }
    }
    data
}
