//! A device over a real HCA through `verbs-sys`: every PD, region, CQ and
//! QP a guest creates is a real one on the HCA, in a PD of its own, over
//! the guest's memory registered at the guest's own addresses
//! (`ibv_reg_mr_iova`), so the HCA checks every key, range, right and PD
//! and moves the data itself.
//!
//! The data path is mediated, not bypassed: the HCA cannot read vhca's
//! work-request format, so each [`Device::process`] pass takes what the
//! guests posted in their QP buffers (after a doorbell in their UAR page)
//! and posts it to the real QPs, and moves the real CQs' completions into
//! the guests' CQ buffers. The guest's side is the same as with the
//! software HCA, and no command crosses the device channel per message;
//! but the backend's device loop touches every work request. True VMM
//! bypass needs a frontend that writes the HCA's own WQE format, as
//! Xen-IB's did for mthca.
//!
//! Addressing: vhca's protocol names peers by LID. On a RoCE port (link
//! layer Ethernet), LIDs mean nothing to the HCA, so the device maps each
//! LID to a GID: the LIDs of contexts opened on it to its own port GID,
//! others as [`VerbsHca::add_peer`] says. Q_Keys are not in vhca's
//! protocol: every UD QP gets [`QKEY`], and a send whose WQE carries Q_Key
//! 0 uses it too. The HCA's async events are forwarded: a CQ overrun to
//! the CQ's owner, a QP's fatal, request or access error as a QP-fatal
//! event. What is not modelled: RNR and retry settings (fixed), atomics
//! and inline data.

use super::guest::{self, note_qp, note_uar, rung, Contexts, GuestCq, GuestCtx, Uar};
use super::{Device, DeviceAttr, DeviceError, DeviceEvent, Kind, Object};
use crate::handles::DomainId;
use crate::layout::{event, flags, op, qp_hdr, status, Cqe, Wqe, QP_HDR};
use crate::proto::{access, QpState, QpType, WQE_SIZE};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd};
use verbs_sys::ffi::verbs as ffi;
use verbs_sys::mediate::{ExtMr, KeyedQp, Sge};
use verbs_sys::qp::{self as vqp, QpCaps, RcPeer, SendOp, Transition};
use verbs_sys::verbs::{
    Access, Ah, AhAttr, AsyncEvent, CompChannel, Context, Cq, Grh, Pd, PortAttr,
};
use vm_memory::{GuestAddress, GuestMemory, GuestMemoryBackend};
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};

/// The Q_Key of every UD QP (vhca's protocol has none yet).
pub const QKEY: u32 = 0x1111_1111;

/// Whether `VHCA_TRACE` asks for every refusal by the HCA on stderr.
fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("VHCA_TRACE").is_some())
}

macro_rules! trace {
    ($($a:tt)*) => {
        if tracing() {
            eprintln!("vhca verbs: {}", format_args!($($a)*));
        }
    };
}

struct VMr {
    dom: DomainId,
    rkey: u32,
    // Dropped before the context's memory: `close` and `destroy` see to it.
    _mr: ExtMr,
}

struct VCq {
    guest: GuestCq,
    cq: Cq,
}

struct VQp {
    dom: DomainId,
    pd: u32,
    qp: KeyedQp,
    addr: u64,
    sq: u32,
    rq: u32,
    sq_cons: u32,
    rq_cons: u32,
    tag: u64,
    /// Its send and receive CQs' device numbers.
    cqs: (u32, u32),
    /// Broken (a refused request, a bad producer index, a failed
    /// transition): what the guest posts completes flushed.
    failed: bool,
    /// The owner was told.
    reported: bool,
}

/// Counters of the mediated data path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerbsStats {
    /// Doorbells seen.
    pub doorbells: u64,
    /// Work requests posted to the HCA (send and receive).
    pub posted: u64,
    /// Completions moved into guests' CQs.
    pub completions: u64,
    /// Work requests the HCA refused at posting (completed with an error).
    pub refused: u64,
}

/// A device over a real HCA port (see the module documentation).
pub struct VerbsHca<M> {
    ctx: Context,
    /// Every CQ's events, armed while the driver sleeps.
    chan: CompChannel,
    /// The completion channel and the device's async events: the file
    /// the driver sleeps on.
    wake: Epoll,
    /// Passes since the async events were last read.
    since_async: u32,
    port: u8,
    port_attr: PortAttr,
    gid: [u8; 16],
    attr: DeviceAttr,
    next: u32,
    ctxs: Contexts<M>,
    pds: HashMap<u32, (DomainId, Pd)>,
    mrs: HashMap<u32, VMr>,
    cqs: HashMap<u32, VCq>,
    qps: HashMap<u32, VQp>,
    uars: HashMap<u32, Uar>,
    /// Address handles, by PD number and destination LID.
    ahs: HashMap<(u32, u16), Ah>,
    /// GIDs of LIDs (RoCE).
    peers: HashMap<u16, [u8; 16]>,
    /// QPs whose send queue the HCA could not take in full.
    waiting: Vec<u32>,
    /// Buffers of a pass, kept so that the hot loop does not allocate:
    /// QPs whose doorbell rang, their send producers, every QP or CQ,
    /// and completions taken from the HCA.
    work: Vec<u32>,
    sends: Vec<(u32, u32)>,
    ids: Vec<u32>,
    wcs: Vec<verbs_sys::verbs::Completion>,
    /// Data-path counters.
    pub stats: VerbsStats,
}

impl<M> std::fmt::Debug for VerbsHca<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsHca")
            .field("device", &self.ctx.name())
            .field("port", &self.port)
            .field("attr", &self.attr)
            .finish()
    }
}

impl<M: GuestMemory> VerbsHca<M> {
    /// Opens `port` of the RDMA device `name`; the port must be Active.
    pub fn open(name: &str, port: u8) -> Result<VerbsHca<M>, verbs_sys::Error> {
        let ctx = Context::open(name)?;
        let dev = ctx.query_device()?;
        let port_attr = ctx.query_port(port)?;
        if port_attr.state != 4 {
            return Err(verbs_sys::Error::NoDevice(format!(
                "{name} port {port} is not Active (state {})",
                port_attr.state
            )));
        }
        let gid = ctx.query_gid(port, 0)?;
        let chan = ctx.create_comp_channel()?;
        chan.set_nonblocking()?;
        ctx.set_async_nonblocking()?;
        let os = |e: std::io::Error| verbs_sys::Error::Call {
            call: "epoll",
            code: -e.raw_os_error().unwrap_or(0),
        };
        let wake = Epoll::new().map_err(os)?;
        for fd in [chan.fd(), ctx.async_fd()] {
            wake.ctl(ControlOperation::Add, fd, EpollEvent::new(EventSet::IN, 0))
                .map_err(os)?;
        }
        let cap = |v: i32| u32::try_from(v).unwrap_or(0);
        Ok(VerbsHca {
            attr: DeviceAttr {
                node_guid: dev.node_guid,
                max_qp: cap(dev.max_qp),
                max_cq: cap(dev.max_cq),
                max_mr: cap(dev.max_mr),
            },
            ctx,
            chan,
            wake,
            since_async: 0,
            port,
            port_attr,
            gid,
            next: 1,
            ctxs: HashMap::new(),
            pds: HashMap::new(),
            mrs: HashMap::new(),
            cqs: HashMap::new(),
            qps: HashMap::new(),
            uars: HashMap::new(),
            ahs: HashMap::new(),
            peers: HashMap::new(),
            waiting: Vec::new(),
            work: Vec::new(),
            sends: Vec::new(),
            ids: Vec::new(),
            wcs: Vec::new(),
            stats: VerbsStats::default(),
        })
    }

    /// Opens the first RDMA device with an Active port 1.
    pub fn open_any() -> Result<VerbsHca<M>, verbs_sys::Error> {
        let mut last = verbs_sys::Error::NoDevice("no RDMA device".into());
        for d in verbs_sys::devices()? {
            match VerbsHca::open(&d.name, 1) {
                Ok(h) => return Ok(h),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The port's attributes, as read at open.
    pub fn port_attr(&self) -> PortAttr {
        self.port_attr
    }

    /// The port's GID (index 0), which peers on a RoCE port address.
    pub fn gid(&self) -> [u8; 16] {
        self.gid
    }

    /// On a RoCE port: traffic for `lid` goes to `gid`.
    pub fn add_peer(&mut self, lid: u16, gid: [u8; 16]) {
        self.peers.insert(lid, gid);
    }

    /// Objects alive on the device.
    pub fn live(&self) -> usize {
        self.pds.len() + self.mrs.len() + self.cqs.len() + self.qps.len() + self.uars.len()
    }

    fn number(&mut self) -> Result<u32, DeviceError> {
        let id = self.next;
        self.next = self.next.checked_add(1).ok_or(DeviceError::Exhausted)?;
        Ok(id)
    }

    /// The global route to `lid`, on a RoCE port; `Err` when it is not
    /// known there.
    fn route(&self, lid: u16) -> Result<Option<Grh>, DeviceError> {
        if !self.port_attr.is_ethernet() {
            return Ok(None);
        }
        let dgid = *self.peers.get(&lid).ok_or(DeviceError::Failed)?;
        Ok(Some(Grh {
            dgid,
            sgid_index: 0,
            hop_limit: 64,
        }))
    }

    fn ah(&mut self, pd: u32, dlid: u16) -> Result<Ah, DeviceError> {
        if let Some(a) = self.ahs.get(&(pd, dlid)) {
            return Ok(a.clone());
        }
        let grh = self.route(dlid)?;
        let p = &self.pds.get(&pd).ok_or(DeviceError::Failed)?.1;
        let a = p
            .create_ah(AhAttr {
                dlid,
                sl: 0,
                port: self.port,
                grh,
            })
            .map_err(|_| DeviceError::Failed)?;
        self.ahs.insert((pd, dlid), a.clone());
        Ok(a)
    }

    /// Completes a work request of QP `qpn` in error with status `st`, on
    /// its receive CQ for a receive, else its send CQ; the QP is broken.
    fn fail(&mut self, qpn: u32, wr_id: u64, opcode: u8, st: u8, events: &mut Vec<DeviceEvent>) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.failed = true;
        let cq = if opcode == op::RECV { q.cqs.1 } else { q.cqs.0 };
        let mut e = guest::entry(wr_id);
        e.qp_num.set(qpn);
        e.opcode = opcode;
        e.status = st;
        self.push(cq, e, events);
    }

    fn push(&mut self, cq: u32, e: Cqe, events: &mut Vec<DeviceEvent>) {
        let Some(c) = self.cqs.get_mut(&cq) else {
            return;
        };
        let Some(ctx) = self.ctxs.get(&c.guest.dom) else {
            return;
        };
        if c.guest.push(&ctx.mem, e, events) {
            self.stats.completions += 1;
        }
    }

    /// Forwards the HCA's asynchronous events: a CQ overrun to the CQ's
    /// owner; a QP's fatal, request or access error kills that QP (its
    /// owner is told at the end of the pass).
    fn async_events(&mut self, events: &mut Vec<DeviceEvent>) {
        self.since_async = 0;
        while let Ok(Some(e)) = self.ctx.try_async_event() {
            trace!("async event {e:?}");
            match e {
                AsyncEvent::Cq { id, .. } => {
                    if let Some(c) = self.cqs.values_mut().find(|c| c.cq.id() == id) {
                        // Once per CQ, however often the HCA says it.
                        events.extend(c.guest.overran());
                    }
                }
                AsyncEvent::Qp {
                    qp_num,
                    kind:
                        ffi::ibv_event_type_IBV_EVENT_QP_FATAL
                        | ffi::ibv_event_type_IBV_EVENT_QP_REQ_ERR
                        | ffi::ibv_event_type_IBV_EVENT_QP_ACCESS_ERR,
                } => {
                    if let Some(q) = self.qps.get_mut(&qp_num) {
                        q.failed = true;
                    }
                }
                _ => {}
            }
        }
    }

    /// The send WQE at `at` of QP `qpn`, as a verbs work request.
    fn translate(&mut self, qpn: u32, w: &Wqe) -> Result<(SendOp, Sge), ()> {
        let q = &self.qps[&qpn];
        let (pd, kind) = (q.pd, q.qp.kind());
        let sge = sge(w);
        // Keys of regions on this HCA are guest-visible as their lkey; a
        // peer's rkey is looked up, a key from elsewhere passes as is.
        let rkey = self.mrs.get(&w.rkey.get()).map_or(w.rkey.get(), |m| m.rkey);
        let op = match (kind, w.opcode) {
            (vqp::QpType::Rc, op::SEND) => SendOp::Send { imm: None },
            (vqp::QpType::Ud, op::SEND) => {
                let ah = self.ah(pd, w.dlid.get()).map_err(|_| ())?;
                let qkey = match w.qkey.get() {
                    0 => QKEY,
                    k => k,
                };
                SendOp::Datagram {
                    ah,
                    qpn: w.dest_qpn.get(),
                    qkey,
                }
            }
            (vqp::QpType::Rc, op::RDMA_WRITE) => SendOp::RdmaWrite {
                remote_addr: w.remote_addr.get(),
                rkey,
                imm: None,
            },
            (vqp::QpType::Rc, op::RDMA_READ) => SendOp::RdmaRead {
                remote_addr: w.remote_addr.get(),
                rkey,
            },
            _ => return Err(()),
        };
        Ok((op, sge))
    }

    /// Posts what the guest queued on QP `qpn`'s receive queue, and on its
    /// send queue up to producer index `sends` (read after a doorbell).
    fn service(&mut self, qpn: u32, sends: Option<u32>, events: &mut Vec<DeviceEvent>) {
        let Some(q) = self.qps.get(&qpn) else {
            return;
        };
        let (dom, addr, sq, rq) = (q.dom, q.addr, q.sq, q.rq);
        if q.qp.state() == vqp::QpState::Reset {
            return;
        }
        let Some(mem) = self.ctxs.get(&dom).map(|c| &c.mem) else {
            return;
        };
        let rq_prod = guest::read_u32(mem, addr + qp_hdr::RQ_PROD);
        let (sq_prod, Some(rq_prod)) = (sends.unwrap_or(q.sq_cons), rq_prod) else {
            return;
        };
        let q = &self.qps[&qpn];
        if rq_prod.wrapping_sub(q.rq_cons) > rq || sq_prod.wrapping_sub(q.sq_cons) > sq {
            // A producer index from nowhere: the QP is dead, the rest lives.
            let q = self.qps.get_mut(&qpn).expect("looked up above");
            q.failed = true;
            return;
        }
        // Receives first, so that a send answered at once finds them.
        while self.qps[&qpn].rq_cons != rq_prod {
            let cons = self.qps[&qpn].rq_cons;
            let at = addr + QP_HDR + (u64::from(sq) + u64::from(cons % rq)) * WQE_SIZE;
            let Some(w) = guest::read_wqe(&self.ctxs[&dom].mem, at) else {
                break;
            };
            let q = self.qps.get_mut(&qpn).expect("looked up above");
            if q.failed {
                self.fail(qpn, w.wr_id.get(), op::RECV, status::WR_FLUSH_ERR, events);
            } else if let Err(e) = q.qp.post_recv(w.wr_id.get(), sge(&w)) {
                // The HCA's queue is full: the rest waits.
                trace!("QP {qpn}: receive not posted: {e}");
                break;
            } else {
                trace!("QP {qpn}: receive {} posted", w.wr_id.get());
                self.stats.posted += 1;
            }
            let q = self.qps.get_mut(&qpn).expect("looked up above");
            q.rq_cons = cons.wrapping_add(1);
        }
        let mut full = false;
        while self.qps[&qpn].sq_cons != sq_prod {
            let cons = self.qps[&qpn].sq_cons;
            let at = addr + QP_HDR + u64::from(cons % sq) * WQE_SIZE;
            let Some(w) = guest::read_wqe(&self.ctxs[&dom].mem, at) else {
                break;
            };
            let signaled = w.flags & flags::SIGNALED != 0;
            let (id, code) = (w.wr_id.get(), w.opcode);
            if self.qps[&qpn].failed {
                self.fail(qpn, id, code, status::WR_FLUSH_ERR, events);
            } else {
                match self.translate(qpn, &w) {
                    Ok((op, sge)) => {
                        let q = self.qps.get_mut(&qpn).expect("looked up above");
                        match q.qp.post_send(w.wr_id.get(), sge, &op, signaled) {
                            Ok(()) => {
                                trace!("QP {qpn}: send {id} posted");
                                self.stats.posted += 1;
                            }
                            Err(verbs_sys::Error::Call { code, .. })
                                if code.abs() == libc::ENOMEM =>
                            {
                                full = true;
                                break;
                            }
                            Err(e) => {
                                trace!("QP {qpn}: send refused: {e}");
                                self.stats.refused += 1;
                                self.fail(qpn, id, code, status::LOC_QP_OP_ERR, events);
                            }
                        }
                    }
                    Err(()) => {
                        trace!("QP {qpn}: opcode {code} cannot be sent");
                        self.stats.refused += 1;
                        self.fail(qpn, id, code, status::LOC_QP_OP_ERR, events);
                    }
                }
            }
            let q = self.qps.get_mut(&qpn).expect("looked up above");
            q.sq_cons = cons.wrapping_add(1);
        }
        let q = &self.qps[&qpn];
        let (sc, rc) = (q.sq_cons, q.rq_cons);
        let mem = &self.ctxs[&dom].mem;
        guest::write_u32(mem, addr + qp_hdr::SQ_CONS, sc);
        guest::write_u32(mem, addr + qp_hdr::RQ_CONS, rc);
        if full {
            self.waiting.push(qpn);
        }
    }

    /// Moves completions from the real CQs into the guests' CQ buffers,
    /// as far as each guest has room.
    fn reap(&mut self, events: &mut Vec<DeviceEvent>) -> usize {
        let mut moved = 0;
        let mut ids = std::mem::take(&mut self.ids);
        let mut wcs = std::mem::take(&mut self.wcs);
        ids.clear();
        ids.extend(self.cqs.keys());
        for &id in &ids {
            let c = &self.cqs[&id];
            let Some(ctx) = self.ctxs.get(&c.guest.dom) else {
                continue;
            };
            let room = c.guest.room(&ctx.mem) as usize;
            if room == 0 {
                continue;
            }
            wcs.clear();
            if let Err(e) = c.cq.poll_into(room, &mut wcs) {
                trace!("CQ {id}: {e}");
                continue;
            }
            for wc in &wcs {
                trace!("CQ {id}: {wc:?}");
                let mut e = guest::entry(wc.wr_id);
                e.byte_len.set(wc.byte_len);
                e.qp_num.set(wc.qp_num);
                e.src_qp.set(wc.src_qp);
                e.slid.set(wc.slid);
                // libibverbs' opcode and status numbering is vhca's.
                e.opcode = if wc.opcode >= 128 {
                    op::RECV
                } else {
                    wc.opcode as u8
                };
                e.status = u8::try_from(wc.status).unwrap_or(u8::MAX);
                self.push(id, e, events);
                moved += 1;
            }
        }
        self.ids = ids;
        self.wcs = wcs;
        moved
    }
}

/// The scatter/gather entry of a work request: its buffer is named at the
/// guest's own address, as the region was registered.
fn sge(w: &Wqe) -> Sge {
    Sge {
        addr: w.addr.get(),
        len: w.len.get(),
        lkey: w.lkey.get(),
    }
}

fn ibv_access(a: u32) -> Access {
    let mut out = Access::LOCAL_READ;
    if a & access::LOCAL_WRITE != 0 {
        out = out | Access::LOCAL_WRITE;
    }
    if a & access::REMOTE_WRITE != 0 {
        out = out | Access::REMOTE_WRITE | Access::LOCAL_WRITE;
    }
    if a & access::REMOTE_READ != 0 {
        out = out | Access::REMOTE_READ;
    }
    out
}

impl<M: GuestMemory> Device<M> for VerbsHca<M> {
    fn attr(&self) -> DeviceAttr {
        self.attr
    }

    fn open(&mut self, dom: DomainId, mem: M, lid: u16) -> Result<(), DeviceError> {
        // A context on this HCA is reached at its own port.
        self.peers.insert(lid, self.gid);
        self.ctxs.insert(dom, GuestCtx::new(mem, lid));
        Ok(())
    }

    fn close(&mut self, dom: DomainId) {
        // Whatever the backend left: QPs first (the HCA stops), then
        // regions, and only then the memory they cover.
        let qps: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| q.dom == dom)
            .map(|(&k, _)| k)
            .collect();
        for q in qps {
            self.destroy(Kind::Qp, q);
        }
        self.mrs.retain(|_, m| m.dom != dom);
        self.cqs.retain(|_, c| c.guest.dom != dom);
        self.uars.retain(|_, u| u.dom != dom);
        let pds: Vec<u32> = self
            .pds
            .iter()
            .filter(|(_, p)| p.0 == dom)
            .map(|(&k, _)| k)
            .collect();
        for p in pds {
            self.destroy(Kind::Pd, p);
        }
        self.ctxs.remove(&dom);
    }

    fn create(&mut self, dom: DomainId, obj: Object, tag: u64) -> Result<u32, DeviceError> {
        if !self.ctxs.contains_key(&dom) {
            return Err(DeviceError::Failed);
        }
        match obj {
            Object::Pd => {
                let pd = self.ctx.alloc_pd().map_err(|_| DeviceError::Exhausted)?;
                let id = self.number()?;
                self.pds.insert(id, (dom, pd));
                Ok(id)
            }
            Object::Mr {
                pd,
                addr,
                len,
                access,
            } => {
                let mem = &self.ctxs[&dom].mem;
                let p = &self.pds.get(&pd).ok_or(DeviceError::Failed)?.1;
                let n = usize::try_from(len).map_err(|_| DeviceError::Failed)?;
                // The range must lie in one mapping of this process.
                let phys = mem.physical_memory().ok_or(DeviceError::Failed)?;
                let host = phys
                    .get_slice(GuestAddress(addr), n)
                    .map_err(|_| DeviceError::Failed)?
                    .ptr_guard_mut()
                    .as_ptr();
                // SAFETY: `host..host + n` is the guest's memory mapped in
                // this process; the context holds the mapping until
                // `close`, which drops every region and QP first.
                let mr =
                    unsafe { p.register_iova(host, n, addr, ibv_access(access)) }.map_err(|e| {
                        trace!("register {len} bytes at {addr:#x}: {e}");
                        DeviceError::Failed
                    })?;
                let lkey = mr.lkey();
                if self.mrs.contains_key(&lkey) {
                    return Err(DeviceError::Failed);
                }
                self.mrs.insert(
                    lkey,
                    VMr {
                        dom,
                        rkey: mr.rkey(),
                        _mr: mr,
                    },
                );
                Ok(lkey)
            }
            Object::Cq { cqe, addr } => {
                let cq = self.ctx.create_cq(cqe, Some(&self.chan)).map_err(|e| {
                    trace!("create CQ: {e}");
                    DeviceError::Exhausted
                })?;
                let guest = GuestCq::new(&self.ctxs[&dom].mem, dom, addr, cqe, tag);
                let id = self.number()?;
                self.cqs.insert(id, VCq { guest, cq });
                Ok(id)
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
                let p = &self.pds.get(&pd).ok_or(DeviceError::Failed)?.1;
                let scq = &self.cqs.get(&send_cq).ok_or(DeviceError::Failed)?.cq;
                let rcq = &self.cqs.get(&recv_cq).ok_or(DeviceError::Failed)?.cq;
                let kind = match qp_type {
                    QpType::Rc => vqp::QpType::Rc,
                    QpType::Ud => vqp::QpType::Ud,
                };
                let caps = QpCaps {
                    max_send_wr: sq,
                    max_recv_wr: rq,
                    max_inline_data: 0,
                };
                let qp = p.create_keyed_qp(kind, scq, rcq, caps).map_err(|e| {
                    trace!("create QP: {e}");
                    DeviceError::Exhausted
                })?;
                let qpn = qp.qp_num();
                let mem = &self.ctxs[&dom].mem;
                self.qps.insert(
                    qpn,
                    VQp {
                        dom,
                        pd,
                        qp,
                        addr,
                        sq,
                        rq,
                        // What the guest had posted before is not the HCA's.
                        sq_cons: guest::read_u32(mem, addr + qp_hdr::SQ_PROD).unwrap_or(0),
                        rq_cons: guest::read_u32(mem, addr + qp_hdr::RQ_PROD).unwrap_or(0),
                        tag,
                        cqs: (send_cq, recv_cq),
                        failed: false,
                        reported: false,
                    },
                );
                note_qp(&mut self.ctxs, dom, qpn, false);
                Ok(qpn)
            }
            Object::Uar => {
                let u = Uar::new(dom).map_err(|_| DeviceError::Failed)?;
                let id = self.number()?;
                self.uars.insert(id, u);
                note_uar(&mut self.ctxs, dom, Some(id));
                Ok(id)
            }
        }
    }

    fn destroy(&mut self, kind: Kind, id: u32) {
        match kind {
            Kind::Pd => {
                self.ahs.retain(|&(pd, _), _| pd != id);
                self.pds.remove(&id);
            }
            Kind::Mr => {
                self.mrs.remove(&id);
            }
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

    fn modify_qp(&mut self, qpn: u32, state: QpState, dest_qpn: u32, dlid: u16) {
        let Some(q) = self.qps.get(&qpn) else {
            return;
        };
        let kind = q.qp.kind();
        let t = match state {
            QpState::Reset => Transition::Reset,
            QpState::Init => Transition::Init {
                port: self.port,
                pkey_index: 0,
                access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
                qkey: QKEY,
            },
            QpState::Rtr => Transition::Rtr(match kind {
                vqp::QpType::Ud => None,
                vqp::QpType::Rc => match self.route(dlid) {
                    Ok(grh) => Some(RcPeer {
                        qpn: dest_qpn,
                        psn: 0,
                        lid: dlid,
                        sl: 0,
                        mtu: self.port_attr.active_mtu,
                        port: self.port,
                        grh,
                    }),
                    Err(_) => None,
                },
            }),
            QpState::Rts => Transition::Rts { sq_psn: 0 },
            QpState::Err => Transition::Error,
        };
        let q = self.qps.get_mut(&qpn).expect("looked up above");
        let was_reset = q.qp.state() == vqp::QpState::Reset;
        if matches!(t, Transition::Reset) && was_reset {
            return;
        }
        if let Err(e) = q.qp.modify(t) {
            trace!("QP {qpn}: to {state:?}: {e}");
            // The trait has no error to give: the QP is dead, and says so
            // at the next pass.
            q.failed = true;
            let _ = q.qp.modify(Transition::Error);
        } else if matches!(t, Transition::Reset) {
            q.failed = false;
            q.reported = false;
        }
    }

    fn arm_cq(&mut self, cq: u32) {
        if let Some(c) = self.cqs.get_mut(&cq) {
            c.guest.armed = true;
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
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        if asleep {
            // A completion from now on wakes the driver (it re-checks
            // after this, so one that came before is not missed).
            for c in self.cqs.values() {
                if let Err(e) = c.cq.req_notify(false) {
                    trace!("arming a CQ: {e}");
                }
            }
        } else {
            // Take the events (each must be acknowledged); the pass that
            // follows polls every CQ anyway, and reads the async events.
            while let Ok(Some(_)) = self.chan.try_event() {}
            self.since_async = u32::MAX;
        }
    }

    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        // SAFETY: the epoll descriptor stays open as long as `self`, which
        // the returned borrow cannot outlive.
        Some(unsafe { BorrowedFd::borrow_raw(self.wake.as_raw_fd()) })
    }

    fn process(&mut self, events: &mut Vec<DeviceEvent>) -> usize {
        // Async events are rare: read every 256 passes (a system call
        // each), and after every wake-up.
        self.since_async = self.since_async.saturating_add(1);
        if self.since_async >= 256 {
            self.async_events(events);
        }
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        work.append(&mut self.waiting);
        let rang = rung(&mut self.ctxs, &self.uars, &mut work);
        self.stats.doorbells += rang as u64;
        let before = self.stats.posted + self.stats.refused;
        // Send producers first, then every receive queue (read each pass,
        // as HCAs read a doorbell record: posting a receive rings nothing),
        // then the sends: a receive the guest posted before a peer's send
        // is on the HCA before that send.
        let mut sends = std::mem::take(&mut self.sends);
        sends.clear();
        sends.extend(work.iter().filter_map(|&q| {
            let e = self.qps.get(&q)?;
            let mem = &self.ctxs.get(&e.dom)?.mem;
            Some((q, guest::read_u32(mem, e.addr + qp_hdr::SQ_PROD)?))
        }));
        let mut all = std::mem::take(&mut self.ids);
        all.clear();
        all.extend(self.qps.keys());
        for &q in &all {
            self.service(q, None, events);
        }
        self.ids = all;
        for &(q, prod) in &sends {
            self.service(q, Some(prod), events);
        }
        self.sends = sends;
        self.work = work;
        // A QP found broken goes to the error state and says so, once.
        for q in self.qps.values_mut() {
            if q.failed && !q.reported {
                q.reported = true;
                let _ = q.qp.modify(Transition::Error);
                events.push(DeviceEvent {
                    dom: q.dom,
                    kind: event::QP_FATAL,
                    tag: q.tag,
                });
            }
        }
        let moved = self.reap(events);
        (self.stats.posted + self.stats.refused - before) as usize + rang + moved
    }
}
