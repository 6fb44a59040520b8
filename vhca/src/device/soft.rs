//! The software HCA: one port's worth of QPs, CQs and memory regions over
//! the guests' memory, with the data path an HCA runs. Each call to
//! [`Device::process`] is one pass of the hardware: it reads each
//! context's doorbell counter in its UAR page, and for every QP of a
//! context that rang (or that waits for a receive at its peer) takes the
//! posted send WQEs, checks every key against the region it names (bounds,
//! access rights, PD, owner), moves the data and writes completions.
//!
//! Transports: RC send/receive, RDMA write and RDMA read between connected
//! QPs; UD send/receive by destination QP and LID, the payload placed after
//! 40 bytes of GRH room as on real HCAs. Not modelled: Q_Keys, retry
//! counters (an RC send with no receive posted waits, as with infinite RNR
//! retry), atomics, and solicited-only events (every armed CQ fires).
//!
//! Guest indices are untrusted: a producer index claiming more entries than
//! the queue holds moves the QP to the error state with a QP-fatal event; a
//! CQ the guest does not drain overruns with an event and drops entries.

use super::guest::{self, entry, note_qp, note_uar, rung, Contexts, GuestCq, GuestCtx, Uar};
use super::{Device, DeviceAttr, DeviceError, DeviceEvent, Kind, Object};
use crate::handles::DomainId;
use crate::layout::{event, flags, op, qp_hdr, status, Cqe, Wqe, GRH_LEN, QP_HDR, UD_MTU};
use crate::proto::{access, QpState, QpType, WQE_SIZE};
use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering;
use vm_memory::{Bytes, GuestAddress, GuestMemory, GuestMemoryBackend};

/// Counters of the data path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftStats {
    /// Doorbells seen (changes of a UAR's counter).
    pub doorbells: u64,
    /// Work requests executed (send queue).
    pub work_requests: u64,
    /// Completions written.
    pub completions: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Pages translated and pinned by registrations.
    pub pages_pinned: u64,
    /// Registrations left unpinned (the memlock limit refused).
    pub unpinned: u64,
}

struct MrE {
    dom: DomainId,
    pd: u32,
    addr: u64,
    len: u64,
    access: u32,
    /// The host range locked in memory, to unlock at destruction.
    pinned: Option<(usize, usize)>,
}

/// The parts of `range` (start, bytes) that no range in `keep` covers.
fn gaps(range: (usize, usize), mut keep: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    keep.sort_unstable();
    let (mut at, end) = (range.0, range.0 + range.1);
    let mut out = Vec::new();
    for (k, klen) in keep {
        if k + klen <= at || k >= end {
            continue;
        }
        if k > at {
            out.push((at, k - at));
        }
        at = at.max(k + klen);
    }
    if at < end {
        out.push((at, end - at));
    }
    out
}

/// Unlocks the parts of `range` that no range in `keep` covers: pinning
/// is not counted, so pages another region still needs stay locked.
fn unpin_uncovered(range: (usize, usize), keep: Vec<(usize, usize)>) {
    for (at, len) in gaps(range, keep) {
        // SAFETY: `at..at + len` lies in a range `pin` locked, and the
        // guest memory it belongs to is still mapped.
        unsafe { libc::munlock(at as *const libc::c_void, len) };
    }
}

/// Locks `len` bytes at host address `at` in memory; false when the
/// memlock limit does not allow it.
fn pin(at: usize, len: usize) -> bool {
    // SAFETY: mlock only changes the residency of pages already mapped in
    // this process; the range is inside a live guest-memory mapping.
    unsafe { libc::mlock(at as *const libc::c_void, len) == 0 }
}

struct QpE {
    dom: DomainId,
    pd: u32,
    qp_type: QpType,
    state: QpState,
    send_cq: u32,
    recv_cq: u32,
    addr: u64,
    sq: u32,
    rq: u32,
    sq_cons: u32,
    rq_cons: u32,
    dest_qpn: u32,
    tag: u64,
}

/// The software HCA over guest memory of type `M`.
pub struct SoftHca<M> {
    attr: DeviceAttr,
    next: u32,
    ctxs: Contexts<M>,
    pds: HashMap<u32, DomainId>,
    mrs: HashMap<u32, MrE>,
    cqs: HashMap<u32, GuestCq>,
    qps: HashMap<u32, QpE>,
    uars: HashMap<u32, Uar>,
    /// QPs with send work left over (waiting for a receive at the peer).
    waiting: Vec<u32>,
    work: Vec<u32>,
    scratch: Vec<u8>,
    /// Whether UD datagrams for LIDs not on this HCA go to the wire.
    uplink: bool,
    outbox: Vec<Datagram>,
    /// Events raised outside `process` (deliveries from the wire).
    pending: Vec<DeviceEvent>,
    /// Data-path counters.
    pub stats: SoftStats,
}

impl<M: GuestMemory> std::fmt::Debug for SoftHca<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftHca")
            .field("attr", &self.attr)
            .field("live", &self.live())
            .finish()
    }
}

/// A UD datagram on the wire between HCAs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Sender's LID.
    pub slid: u16,
    /// Sender's QP.
    pub src_qp: u32,
    /// Destination LID.
    pub dlid: u16,
    /// Destination QP.
    pub dest_qpn: u32,
    /// The message.
    pub payload: Vec<u8>,
}

/// Why a work request failed: the sender's status, and the receiver's.
type Failure = (u8, Option<u8>);

enum Outcome {
    /// Done.
    Done,
    /// Failed with a status for the sender.
    Failed(u8),
    /// Nothing to receive into at the (RC) peer yet.
    Wait,
}

impl<M: GuestMemory> SoftHca<M> {
    /// A software HCA with node GUID `guid`.
    pub fn new(guid: u64) -> SoftHca<M> {
        SoftHca {
            attr: DeviceAttr {
                node_guid: guid,
                max_qp: 1 << 16,
                max_cq: 1 << 16,
                max_mr: 1 << 20,
            },
            // QP numbers 0 and 1 are the special QPs.
            next: 2,
            ctxs: HashMap::new(),
            pds: HashMap::new(),
            mrs: HashMap::new(),
            cqs: HashMap::new(),
            qps: HashMap::new(),
            uars: HashMap::new(),
            waiting: Vec::new(),
            work: Vec::new(),
            scratch: Vec::new(),
            uplink: false,
            outbox: Vec::new(),
            pending: Vec::new(),
            stats: SoftStats::default(),
        }
    }

    /// Sends UD datagrams for LIDs this HCA does not own to the wire
    /// ([`SoftHca::take_outbound`]) instead of dropping them.
    pub fn set_uplink(&mut self, on: bool) {
        self.uplink = on;
    }

    /// The datagrams sent to the wire since the last call.
    pub fn take_outbound(&mut self) -> Vec<Datagram> {
        std::mem::take(&mut self.outbox)
    }

    /// A datagram from the wire: delivered to QP `dest_qpn` if a context
    /// of this HCA owns `dlid` and that QP is a UD QP able to receive and
    /// has a receive posted; true when delivered. Otherwise it is dropped,
    /// as a UD datagram is.
    pub fn deliver(&mut self, d: &Datagram) -> bool {
        let mut events = std::mem::take(&mut self.pending);
        let ok = self.deliver_into(d, &mut events);
        self.pending = events;
        ok
    }

    fn deliver_into(&mut self, d: &Datagram, events: &mut Vec<DeviceEvent>) -> bool {
        let Some(p) = self.qps.get(&d.dest_qpn) else {
            return false;
        };
        let (pdom, ppd) = (p.dom, p.pd);
        let fits = p.qp_type == QpType::Ud
            && matches!(p.state, QpState::Rtr | QpState::Rts)
            && self.ctxs.get(&pdom).is_some_and(|c| c.lid == d.dlid)
            && d.payload.len() <= UD_MTU as usize;
        if !fits {
            return false;
        }
        let Ok(Some(r)) = self.take_recv(d.dest_qpn, events) else {
            return false;
        };
        let len = d.payload.len() as u32;
        let (raddr, rlen) = (r.addr.get(), r.len.get());
        let st = if u64::from(len) + u64::from(GRH_LEN) > u64::from(rlen) {
            status::LOC_LEN_ERR
        } else if !self.check_key(r.lkey.get(), pdom, ppd, raddr, rlen, access::LOCAL_WRITE)
            || self.ctxs[&pdom]
                .mem
                .write_slice(&d.payload, GuestAddress(raddr + u64::from(GRH_LEN)))
                .is_err()
        {
            status::LOC_PROT_ERR
        } else {
            status::SUCCESS
        };
        let mut e = entry(r.wr_id.get());
        e.byte_len.set(if st == status::SUCCESS {
            len + GRH_LEN
        } else {
            0
        });
        e.qp_num.set(d.dest_qpn);
        e.src_qp.set(d.src_qp);
        e.slid.set(d.slid);
        e.opcode = op::RECV;
        e.status = st;
        let cq = self.qps[&d.dest_qpn].recv_cq;
        self.complete(cq, e, events);
        if st != status::SUCCESS {
            if let Some(q) = self.qps.get_mut(&d.dest_qpn) {
                q.state = QpState::Err;
            }
        } else {
            self.stats.bytes += u64::from(len);
        }
        st == status::SUCCESS
    }

    /// Objects alive on the device (PDs, MRs, CQs, QPs, UARs).
    pub fn live(&self) -> usize {
        self.pds.len() + self.mrs.len() + self.cqs.len() + self.qps.len() + self.uars.len()
    }

    /// Contexts open on the device.
    pub fn contexts(&self) -> usize {
        self.ctxs.len()
    }

    fn number(&mut self) -> Result<u32, DeviceError> {
        if self.next >= 1 << 24 {
            return Err(DeviceError::Exhausted);
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }

    fn read_u32(&self, dom: DomainId, at: u64) -> Option<u32> {
        guest::read_u32(&self.ctxs.get(&dom)?.mem, at)
    }

    fn write_u32(&self, dom: DomainId, at: u64, v: u32) {
        if let Some(c) = self.ctxs.get(&dom) {
            guest::write_u32(&c.mem, at, v);
        }
    }

    fn read_wqe(&self, dom: DomainId, at: u64) -> Option<Wqe> {
        guest::read_wqe(&self.ctxs.get(&dom)?.mem, at)
    }

    /// The region `key` names, if it belongs to `dom` and `pd`, covers
    /// `addr..addr + len` and allows `need`.
    fn check_key(&self, key: u32, dom: DomainId, pd: u32, addr: u64, len: u32, need: u32) -> bool {
        if len == 0 {
            return true;
        }
        let Some(m) = self.mrs.get(&key) else {
            return false;
        };
        let end = addr.checked_add(u64::from(len));
        m.dom == dom
            && m.pd == pd
            && m.access & need == need
            && addr >= m.addr
            && end.is_some_and(|e| e <= m.addr + m.len)
    }

    /// Copies `len` bytes from `src` in `sdom` to `dst` in `ddom`.
    fn copy(&mut self, sdom: DomainId, src: u64, ddom: DomainId, dst: u64, len: u32) -> bool {
        if len == 0 {
            return true;
        }
        let (Some(s), Some(d)) = (self.ctxs.get(&sdom), self.ctxs.get(&ddom)) else {
            return false;
        };
        let n = len as usize;
        // The common case: both ranges in one mapped region each.
        if let (Some(sp), Some(dp)) = (s.mem.physical_memory(), d.mem.physical_memory()) {
            if let (Ok(ss), Ok(ds)) = (
                sp.get_slice(GuestAddress(src), n),
                dp.get_slice(GuestAddress(dst), n),
            ) {
                ss.copy_to_volatile_slice(ds);
                return true;
            }
        }
        self.scratch.resize(n, 0);
        s.mem
            .read_slice(&mut self.scratch, GuestAddress(src))
            .is_ok()
            && d.mem.write_slice(&self.scratch, GuestAddress(dst)).is_ok()
    }

    /// Writes a completion into CQ `cq`; events go to `events`.
    fn complete(&mut self, cq: u32, e: Cqe, events: &mut Vec<DeviceEvent>) {
        let Some(c) = self.cqs.get_mut(&cq) else {
            return;
        };
        let Some(ctx) = self.ctxs.get(&c.dom) else {
            return;
        };
        if c.push(&ctx.mem, e, events) {
            self.stats.completions += 1;
        }
    }

    /// Forgets region `id`, unpinning the pages no other region needs.
    fn release_mr(&mut self, id: u32) {
        let Some(m) = self.mrs.remove(&id) else {
            return;
        };
        if let Some(r) = m.pinned {
            let keep = self.mrs.values().filter_map(|o| o.pinned).collect();
            unpin_uncovered(r, keep);
        }
    }

    fn fatal(&mut self, qpn: u32, events: &mut Vec<DeviceEvent>) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            if q.state != QpState::Err {
                q.state = QpState::Err;
                events.push(DeviceEvent {
                    dom: q.dom,
                    kind: event::QP_FATAL,
                    tag: q.tag,
                });
            }
        }
    }

    /// Takes the next receive WQE of `qpn`: `Ok(None)` when none is posted.
    fn take_recv(&mut self, qpn: u32, events: &mut Vec<DeviceEvent>) -> Result<Option<Wqe>, ()> {
        let q = &self.qps[&qpn];
        let (dom, addr, rq, cons) = (q.dom, q.addr, q.rq, q.rq_cons);
        let prod = self.read_u32(dom, addr + qp_hdr::RQ_PROD).ok_or(())?;
        let pending = prod.wrapping_sub(cons);
        if pending > rq {
            self.fatal(qpn, events);
            return Err(());
        }
        if pending == 0 {
            return Ok(None);
        }
        let sq = self.qps[&qpn].sq;
        let at = addr + QP_HDR + (u64::from(sq) + u64::from(cons % rq)) * WQE_SIZE;
        let w = self.read_wqe(dom, at).ok_or(())?;
        let q = self.qps.get_mut(&qpn).expect("looked up above");
        q.rq_cons = cons.wrapping_add(1);
        self.write_u32(dom, addr + qp_hdr::RQ_CONS, cons.wrapping_add(1));
        Ok(Some(w))
    }

    /// The connected peer of RC QP `qpn`, able to take traffic.
    fn rc_peer(&self, qpn: u32) -> Option<u32> {
        let q = &self.qps[&qpn];
        let p = self.qps.get(&q.dest_qpn)?;
        let ok = p.qp_type == QpType::Rc
            && matches!(p.state, QpState::Rtr | QpState::Rts)
            && p.dest_qpn == qpn;
        ok.then_some(q.dest_qpn)
    }

    /// Executes one send WQE of `qpn`.
    fn execute(&mut self, qpn: u32, w: &Wqe, events: &mut Vec<DeviceEvent>) -> Outcome {
        let q = &self.qps[&qpn];
        let (dom, pd, qp_type) = (q.dom, q.pd, q.qp_type);
        let len = w.len.get();
        let laddr = w.addr.get();
        match (qp_type, w.opcode) {
            (QpType::Ud, op::SEND) => {
                if len > UD_MTU {
                    return Outcome::Failed(status::LOC_LEN_ERR);
                }
                if !self.check_key(w.lkey.get(), dom, pd, laddr, len, 0) {
                    return Outcome::Failed(status::LOC_PROT_ERR);
                }
                let dest = w.dest_qpn.get();
                let deliver = self.qps.get(&dest).is_some_and(|p| {
                    p.qp_type == QpType::Ud
                        && matches!(p.state, QpState::Rtr | QpState::Rts)
                        && self.ctxs.get(&p.dom).is_some_and(|c| c.lid == w.dlid.get())
                });
                // UD: what has no receiver is gone; the send still succeeds.
                if deliver {
                    if let Ok(Some(r)) = self.take_recv(dest, events) {
                        let got = self.receive(dest, &r, dom, laddr, len, GRH_LEN);
                        self.recv_done(dest, &r, qpn, dom, got, len + GRH_LEN, events);
                    }
                } else if self.uplink {
                    // Not for a port of this HCA: onto the wire.
                    let slid = self.ctxs.get(&dom).map_or(0, |c| c.lid);
                    let mut payload = vec![0u8; len as usize];
                    let read = self.ctxs.get(&dom).is_some_and(|c| {
                        c.mem.read_slice(&mut payload, GuestAddress(laddr)).is_ok()
                    });
                    if read {
                        self.outbox.push(Datagram {
                            slid,
                            src_qp: qpn,
                            dlid: w.dlid.get(),
                            dest_qpn: dest,
                            payload,
                        });
                        self.stats.bytes += u64::from(len);
                    }
                }
                Outcome::Done
            }
            (QpType::Ud, _) => Outcome::Failed(status::LOC_QP_OP_ERR),
            (QpType::Rc, op::SEND) => {
                if !self.check_key(w.lkey.get(), dom, pd, laddr, len, 0) {
                    return Outcome::Failed(status::LOC_PROT_ERR);
                }
                let Some(dest) = self.rc_peer(qpn) else {
                    return Outcome::Failed(status::REM_INV_REQ_ERR);
                };
                let r = match self.take_recv(dest, events) {
                    Ok(Some(r)) => r,
                    Ok(None) => return Outcome::Wait,
                    Err(()) => return Outcome::Failed(status::REM_INV_REQ_ERR),
                };
                let got = self.receive(dest, &r, dom, laddr, len, 0);
                self.recv_done(dest, &r, qpn, dom, got, len, events);
                match got {
                    Ok(()) => Outcome::Done,
                    Err((s, _)) => Outcome::Failed(s),
                }
            }
            (QpType::Rc, op::RDMA_WRITE | op::RDMA_READ) => {
                let read = w.opcode == op::RDMA_READ;
                let lneed = if read { access::LOCAL_WRITE } else { 0 };
                if !self.check_key(w.lkey.get(), dom, pd, laddr, len, lneed) {
                    return Outcome::Failed(status::LOC_PROT_ERR);
                }
                let Some(dest) = self.rc_peer(qpn) else {
                    return Outcome::Failed(status::REM_INV_REQ_ERR);
                };
                let p = &self.qps[&dest];
                let (pdom, ppd) = (p.dom, p.pd);
                let rneed = if read {
                    access::REMOTE_READ
                } else {
                    access::REMOTE_WRITE
                };
                let raddr = w.remote_addr.get();
                if !self.check_key(w.rkey.get(), pdom, ppd, raddr, len, rneed) {
                    return Outcome::Failed(status::REM_ACCESS_ERR);
                }
                let moved = if read {
                    self.copy(pdom, raddr, dom, laddr, len)
                } else {
                    self.copy(dom, laddr, pdom, raddr, len)
                };
                if !moved {
                    return Outcome::Failed(status::REM_ACCESS_ERR);
                }
                self.stats.bytes += u64::from(len);
                Outcome::Done
            }
            (QpType::Rc, _) => Outcome::Failed(status::LOC_QP_OP_ERR),
        }
    }

    /// Moves a message of `len` bytes at `src` in `sdom` into receive WQE
    /// `r` of `dest`, `skip` bytes in.
    fn receive(
        &mut self,
        dest: u32,
        r: &Wqe,
        sdom: DomainId,
        src: u64,
        len: u32,
        skip: u32,
    ) -> Result<(), Failure> {
        let p = &self.qps[&dest];
        let (pdom, ppd) = (p.dom, p.pd);
        let (raddr, rlen) = (r.addr.get(), r.len.get());
        if u64::from(len) + u64::from(skip) > u64::from(rlen) {
            return Err((status::REM_INV_REQ_ERR, Some(status::LOC_LEN_ERR)));
        }
        if !self.check_key(r.lkey.get(), pdom, ppd, raddr, rlen, access::LOCAL_WRITE) {
            return Err((status::REM_ACCESS_ERR, Some(status::LOC_PROT_ERR)));
        }
        if !self.copy(sdom, src, pdom, raddr + u64::from(skip), len) {
            return Err((status::REM_ACCESS_ERR, Some(status::LOC_PROT_ERR)));
        }
        self.stats.bytes += u64::from(len);
        Ok(())
    }

    /// The receive completion of `r` at `dest` for a message from `src_qp`.
    #[allow(clippy::too_many_arguments)]
    fn recv_done(
        &mut self,
        dest: u32,
        r: &Wqe,
        src_qp: u32,
        sdom: DomainId,
        got: Result<(), Failure>,
        byte_len: u32,
        events: &mut Vec<DeviceEvent>,
    ) {
        let st = match got {
            Ok(()) => status::SUCCESS,
            Err((_, Some(s))) => s,
            Err((_, None)) => return,
        };
        let slid = self.ctxs.get(&sdom).map_or(0, |c| c.lid);
        let mut e = entry(r.wr_id.get());
        e.byte_len
            .set(if st == status::SUCCESS { byte_len } else { 0 });
        e.qp_num.set(dest);
        e.src_qp.set(src_qp);
        e.slid.set(slid);
        e.opcode = op::RECV;
        e.status = st;
        let cq = self.qps[&dest].recv_cq;
        self.complete(cq, e, events);
        if st != status::SUCCESS {
            if let Some(p) = self.qps.get_mut(&dest) {
                p.state = QpState::Err;
            }
        }
    }

    /// Works through QP `qpn`'s send queue; true when work is left that
    /// waits for the peer.
    fn service(&mut self, qpn: u32, events: &mut Vec<DeviceEvent>) -> bool {
        let Some(q) = self.qps.get(&qpn) else {
            return false;
        };
        let (dom, addr, sq, state) = (q.dom, q.addr, q.sq, q.state);
        if !matches!(state, QpState::Rts | QpState::Err) {
            return false;
        }
        let Some(prod) = self.read_u32(dom, addr + qp_hdr::SQ_PROD) else {
            return false;
        };
        if prod.wrapping_sub(self.qps[&qpn].sq_cons) > sq {
            self.fatal(qpn, events);
            return false;
        }
        let mut waiting = false;
        while self.qps[&qpn].sq_cons != prod {
            let q = &self.qps[&qpn];
            let (cons, state, send_cq) = (q.sq_cons, q.state, q.send_cq);
            let at = addr + QP_HDR + u64::from(cons % sq) * WQE_SIZE;
            let Some(w) = self.read_wqe(dom, at) else {
                break;
            };
            let outcome = if state == QpState::Err {
                Outcome::Failed(status::WR_FLUSH_ERR)
            } else {
                self.execute(qpn, &w, events)
            };
            let st = match outcome {
                Outcome::Wait => {
                    waiting = true;
                    break;
                }
                Outcome::Done => status::SUCCESS,
                Outcome::Failed(s) => s,
            };
            self.stats.work_requests += 1;
            if let Some(q) = self.qps.get_mut(&qpn) {
                q.sq_cons = cons.wrapping_add(1);
                if st != status::SUCCESS {
                    q.state = QpState::Err;
                }
            }
            if st != status::SUCCESS || w.flags & flags::SIGNALED != 0 {
                let mut e = entry(w.wr_id.get());
                e.byte_len.set(w.len.get());
                e.qp_num.set(qpn);
                e.opcode = w.opcode;
                e.status = st;
                self.complete(send_cq, e, events);
            }
        }
        let cons = self.qps[&qpn].sq_cons;
        self.write_u32(dom, addr + qp_hdr::SQ_CONS, cons);
        // A QP in error flushes what is posted to its receive queue too.
        if self.qps[&qpn].state == QpState::Err {
            self.flush_recv(qpn, events);
        }
        waiting
    }

    fn flush_recv(&mut self, qpn: u32, events: &mut Vec<DeviceEvent>) {
        while let Ok(Some(r)) = self.take_recv(qpn, events) {
            let mut e = entry(r.wr_id.get());
            e.qp_num.set(qpn);
            e.opcode = op::RECV;
            e.status = status::WR_FLUSH_ERR;
            let cq = self.qps[&qpn].recv_cq;
            self.complete(cq, e, events);
        }
    }
}

impl<M: GuestMemory> Device<M> for SoftHca<M> {
    fn attr(&self) -> DeviceAttr {
        self.attr
    }

    fn open(&mut self, dom: DomainId, mem: M, lid: u16) -> Result<(), DeviceError> {
        self.ctxs.insert(dom, GuestCtx::new(mem, lid));
        Ok(())
    }

    fn close(&mut self, dom: DomainId) {
        let left: Vec<u32> = self
            .mrs
            .iter()
            .filter(|(_, m)| m.dom == dom)
            .map(|(&k, _)| k)
            .collect();
        for k in left {
            self.release_mr(k);
        }
        if let Some(c) = self.ctxs.remove(&dom) {
            if let Some(u) = c.uar {
                self.uars.remove(&u);
            }
        }
    }

    fn create(&mut self, dom: DomainId, obj: Object, tag: u64) -> Result<u32, DeviceError> {
        if !self.ctxs.contains_key(&dom) {
            return Err(DeviceError::Failed);
        }
        let id = self.number()?;
        match obj {
            Object::Pd => {
                self.pds.insert(id, dom);
            }
            Object::Mr {
                pd,
                addr,
                len,
                access,
            } => {
                // As a driver registering memory does: translate every
                // page to the host's address, and pin the range.
                // Memory with no host mapping of its own (behind an IOMMU,
                // say) is registered unpinned and untranslated.
                let c = &self.ctxs[&dom];
                let first = addr & !0xFFF;
                let end = addr.checked_add(len).ok_or(DeviceError::Failed)?;
                let mut mtt = Vec::new();
                if let Some(phys) = c.mem.physical_memory() {
                    mtt.reserve(((end - first).div_ceil(4096)) as usize);
                    let mut page = first;
                    while page < end {
                        match phys.get_host_address(GuestAddress(page)) {
                            Ok(h) => mtt.push(h as usize),
                            Err(_) => {
                                mtt.clear();
                                break;
                            }
                        }
                        page += 4096;
                    }
                }
                let contiguous = mtt.windows(2).all(|w| w[1] == w[0] + 4096);
                let span = (end - first).next_multiple_of(4096) as usize;
                let pinned =
                    (contiguous && !mtt.is_empty() && pin(mtt[0], span)).then(|| (mtt[0], span));
                if pinned.is_some() {
                    self.stats.pages_pinned += mtt.len() as u64;
                } else {
                    self.stats.unpinned += 1;
                }
                self.mrs.insert(
                    id,
                    MrE {
                        dom,
                        pd,
                        addr,
                        len,
                        access,
                        pinned,
                    },
                );
            }
            Object::Cq { cqe, addr } => {
                let c = GuestCq::new(&self.ctxs[&dom].mem, dom, addr, cqe, tag);
                self.cqs.insert(id, c);
            }
            Object::Qp {
                qp_type,
                pd,
                send_cq,
                recv_cq,
                addr,
                sq,
                rq,
            } => {
                self.qps.insert(
                    id,
                    QpE {
                        dom,
                        pd,
                        qp_type,
                        state: QpState::Reset,
                        send_cq,
                        recv_cq,
                        addr,
                        sq,
                        rq,
                        sq_cons: 0,
                        rq_cons: 0,
                        dest_qpn: 0,
                        tag,
                    },
                );
                note_qp(&mut self.ctxs, dom, id, false);
                self.modify_qp(id, QpState::Reset, 0, 0);
            }
            Object::Uar => {
                let u = Uar::new(dom).map_err(|_| DeviceError::Failed)?;
                self.uars.insert(id, u);
                note_uar(&mut self.ctxs, dom, Some(id));
            }
        }
        Ok(id)
    }

    fn destroy(&mut self, kind: Kind, id: u32) {
        match kind {
            Kind::Pd => {
                self.pds.remove(&id);
            }
            Kind::Mr => self.release_mr(id),
            Kind::Cq => {
                self.cqs.remove(&id);
            }
            Kind::Qp => {
                if let Some(q) = self.qps.remove(&id) {
                    note_qp(&mut self.ctxs, q.dom, id, true);
                }
                self.waiting.retain(|&n| n != id);
            }
            Kind::Uar => {
                if let Some(u) = self.uars.remove(&id) {
                    note_uar(&mut self.ctxs, u.dom, None);
                }
            }
        }
    }

    fn modify_qp(&mut self, qpn: u32, state: QpState, dest_qpn: u32, _dlid: u16) {
        let Some(q) = self.qps.get(&qpn) else {
            return;
        };
        let (dom, addr) = (q.dom, q.addr);
        // Reset empties the queues: whatever the guest had posted is dropped.
        let drained = (state == QpState::Reset).then(|| {
            (
                self.read_u32(dom, addr + qp_hdr::SQ_PROD).unwrap_or(0),
                self.read_u32(dom, addr + qp_hdr::RQ_PROD).unwrap_or(0),
            )
        });
        let q = self.qps.get_mut(&qpn).expect("looked up above");
        if let Some((s, r)) = drained {
            q.sq_cons = s;
            q.rq_cons = r;
        }
        if state == QpState::Rtr {
            q.dest_qpn = dest_qpn;
        }
        q.state = state;
    }

    fn arm_cq(&mut self, cq: u32) {
        if let Some(c) = self.cqs.get_mut(&cq) {
            c.armed = true;
        }
    }

    fn uar_fd(&self, page: u32) -> Option<BorrowedFd<'_>> {
        self.uars.get(&page).map(Uar::fd)
    }

    fn objects(&self) -> usize {
        self.live()
    }

    fn idle(&mut self, asleep: bool) {
        for u in self.uars.values() {
            u.set_asleep(asleep);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    fn process(&mut self, events: &mut Vec<DeviceEvent>) -> usize {
        let raised = self.pending.len();
        events.append(&mut self.pending);
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        let rang = rung(&mut self.ctxs, &self.uars, &mut work);
        self.stats.doorbells += rang as u64;
        for q in std::mem::take(&mut self.waiting) {
            if !work.contains(&q) {
                work.push(q);
            }
        }
        let before = self.stats.work_requests;
        for &q in &work {
            if self.service(q, events) {
                self.waiting.push(q);
            }
        }
        self.work = work;
        (self.stats.work_requests - before) as usize + rang as usize + raised
    }
}

#[cfg(test)]
mod tests {
    use super::gaps;

    #[test]
    fn unpinning_spares_what_other_regions_cover() {
        let r = (0x10000, 0x8000);
        assert_eq!(gaps(r, vec![]), vec![r]);
        // Covered entirely.
        assert_eq!(gaps(r, vec![(0x8000, 0x20000)]), vec![]);
        // Covered in the middle and at the end, out of order, overlapping.
        assert_eq!(
            gaps(
                r,
                vec![(0x16000, 0x4000), (0x12000, 0x1000), (0x12800, 0x1000)]
            ),
            vec![(0x10000, 0x2000), (0x13800, 0x2800)]
        );
        // Ranges outside do not matter.
        assert_eq!(gaps(r, vec![(0, 0x10000), (0x18000, 0x1000)]), vec![r]);
    }
}
