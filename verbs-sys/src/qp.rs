//! Queue pairs, safely: RC and UD, their state transitions, and posting.
//!
//! The hazards of posting are made compile errors by ownership:
//! * a work request takes its [`Mr`] by value, and [`Qp::reclaim`] gives it
//!   back only for the work request's [`Completion`] (which only
//!   [`Cq::poll`] makes, and which `reclaim` consumes), so a buffer cannot
//!   be read, reused or freed while the HCA may still touch it;
//! * posting takes `&mut Qp`, and a `Qp` is `Send` but not `Sync`, so two
//!   threads cannot post on one QP at once.
//!
//! A QP holds its PD and CQs alive. Dropping it destroys it first (the HCA
//! stops), then releases the buffers of requests still posted; if the
//! destroy fails the buffers are leaked rather than freed under the HCA.

use crate::ffi::verbs::*;
use crate::verbs::{Access, Ah, Completion, Cq, CqInner, Mr, Pd, PdInner};
use crate::{inline, Error};
use std::collections::HashMap;
use std::ops::Range;
use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;

/// The transport of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable datagram.
    Ud,
}

/// A queue pair's state, as ibkit last set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    /// Just created, or reset.
    Reset,
    /// Initialised: receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// In error: posted requests complete flushed.
    Error,
}

/// The sizes of a queue pair's queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Most outstanding sends.
    pub max_send_wr: u32,
    /// Most outstanding receives.
    pub max_recv_wr: u32,
    /// Inline data the send queue can carry.
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps {
            max_send_wr: 64,
            max_recv_wr: 64,
            max_inline_data: 0,
        }
    }
}

/// The remote end of an RC connection, for Init → RTR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcPeer {
    /// The peer's QP number.
    pub qpn: u32,
    /// The first PSN the peer will send.
    pub psn: u32,
    /// The peer's LID.
    pub lid: u16,
    /// Service level.
    pub sl: u8,
    /// Path MTU code (1: 256 … 5: 4096).
    pub mtu: u32,
    /// Local port.
    pub port: u8,
    /// The global route to the peer (RoCE, or another subnet).
    pub grh: Option<crate::verbs::Grh>,
}

/// A state transition of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Reset → Init on `port` with P_Key index `pkey_index`; an RC QP gets
    /// the remote access it grants, a UD QP its Q_Key.
    Init {
        /// Local port.
        port: u8,
        /// P_Key table index.
        pkey_index: u16,
        /// Remote access granted (RC).
        access: Access,
        /// Q_Key (UD).
        qkey: u32,
    },
    /// Init → RTR; an RC QP names its peer.
    Rtr(Option<RcPeer>),
    /// RTR → RTS, sending from `sq_psn`.
    Rts {
        /// First PSN sent.
        sq_psn: u32,
    },
    /// Any → Error.
    Error,
    /// Any → Reset.
    Reset,
}

impl Transition {
    fn target(&self) -> QpState {
        match self {
            Transition::Init { .. } => QpState::Init,
            Transition::Rtr(_) => QpState::Rtr,
            Transition::Rts { .. } => QpState::Rts,
            Transition::Error => QpState::Error,
            Transition::Reset => QpState::Reset,
        }
    }
}

/// The `ibv_qp_attr` and attribute mask of a transition, as the IBA (and
/// rdma-core's man page of ibv_modify_qp) require for each QP type; an
/// illegal transition or a wrong peer description is an error.
pub fn transition_attr(
    kind: QpType,
    from: QpState,
    t: &Transition,
) -> Result<(ibv_qp_attr, u32), Error> {
    use QpState as S;
    let to = t.target();
    let legal = matches!(
        (from, to),
        (_, S::Reset)
            | (_, S::Error)
            | (S::Reset, S::Init)
            | (S::Init, S::Init)
            | (S::Init, S::Rtr)
            | (S::Rtr, S::Rts)
            | (S::Rts, S::Rts)
    );
    if !legal {
        return Err(Error::BadArgument(format!(
            "a QP cannot go from {from:?} to {to:?}"
        )));
    }
    let mut a = ibv_qp_attr::default();
    let mut mask = ibv_qp_attr_mask_IBV_QP_STATE;
    match *t {
        Transition::Init {
            port,
            pkey_index,
            access,
            qkey,
        } => {
            a.qp_state = ibv_qp_state_IBV_QPS_INIT;
            a.port_num = port;
            a.pkey_index = pkey_index;
            mask |= ibv_qp_attr_mask_IBV_QP_PORT | ibv_qp_attr_mask_IBV_QP_PKEY_INDEX;
            match kind {
                QpType::Rc => {
                    a.qp_access_flags = access.0;
                    mask |= ibv_qp_attr_mask_IBV_QP_ACCESS_FLAGS;
                }
                QpType::Ud => {
                    a.qkey = qkey;
                    mask |= ibv_qp_attr_mask_IBV_QP_QKEY;
                }
            }
        }
        Transition::Rtr(peer) => {
            a.qp_state = ibv_qp_state_IBV_QPS_RTR;
            match (kind, peer) {
                (QpType::Rc, Some(p)) => {
                    if !(1..=5).contains(&p.mtu) {
                        return Err(Error::BadArgument(format!("path MTU code {}", p.mtu)));
                    }
                    a.path_mtu = p.mtu;
                    a.dest_qp_num = p.qpn & 0xFF_FFFF;
                    a.rq_psn = p.psn & 0xFF_FFFF;
                    a.max_dest_rd_atomic = 1;
                    a.min_rnr_timer = 12;
                    crate::verbs::fill_ah(&mut a.ah_attr, p.lid, p.sl, p.port, p.grh);
                    mask |= ibv_qp_attr_mask_IBV_QP_AV
                        | ibv_qp_attr_mask_IBV_QP_PATH_MTU
                        | ibv_qp_attr_mask_IBV_QP_DEST_QPN
                        | ibv_qp_attr_mask_IBV_QP_RQ_PSN
                        | ibv_qp_attr_mask_IBV_QP_MAX_DEST_RD_ATOMIC
                        | ibv_qp_attr_mask_IBV_QP_MIN_RNR_TIMER;
                }
                (QpType::Ud, None) => {}
                (QpType::Rc, None) => {
                    return Err(Error::BadArgument("an RC QP needs its peer for RTR".into()))
                }
                (QpType::Ud, Some(_)) => {
                    return Err(Error::BadArgument("a UD QP has no peer".into()))
                }
            }
        }
        Transition::Rts { sq_psn } => {
            a.qp_state = ibv_qp_state_IBV_QPS_RTS;
            a.sq_psn = sq_psn & 0xFF_FFFF;
            mask |= ibv_qp_attr_mask_IBV_QP_SQ_PSN;
            if kind == QpType::Rc {
                a.timeout = 14;
                a.retry_cnt = 7;
                a.rnr_retry = 7;
                a.max_rd_atomic = 1;
                mask |= ibv_qp_attr_mask_IBV_QP_TIMEOUT
                    | ibv_qp_attr_mask_IBV_QP_RETRY_CNT
                    | ibv_qp_attr_mask_IBV_QP_RNR_RETRY
                    | ibv_qp_attr_mask_IBV_QP_MAX_QP_RD_ATOMIC;
            }
        }
        Transition::Error => a.qp_state = ibv_qp_state_IBV_QPS_ERR,
        Transition::Reset => a.qp_state = ibv_qp_state_IBV_QPS_RESET,
    }
    Ok((a, mask))
}

/// What a send work request does.
#[derive(Clone)]
pub enum SendOp {
    /// A send (RC), with optional immediate data.
    Send {
        /// Immediate data.
        imm: Option<u32>,
    },
    /// A datagram to QP `qpn` behind `ah` with Q_Key `qkey` (UD).
    Datagram {
        /// The destination.
        ah: Ah,
        /// The remote QP number.
        qpn: u32,
        /// The remote Q_Key.
        qkey: u32,
    },
    /// RDMA write of the buffer to the peer's `remote_addr` (RC).
    RdmaWrite {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data (consumes a receive at the peer).
        imm: Option<u32>,
    },
    /// RDMA read from the peer's `remote_addr` into the buffer (RC).
    RdmaRead {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
}

/// Which queue a work request went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Queue {
    /// The send queue.
    Send,
    /// The receive queue.
    Recv,
}

/// A work request as [`check_post`] sees it.
#[derive(Clone)]
pub struct PostDesc<'a> {
    /// The QP's transport.
    pub kind: QpType,
    /// The QP's state.
    pub state: QpState,
    /// The queue posted to.
    pub queue: Queue,
    /// The operation (sends).
    pub op: Option<&'a SendOp>,
    /// The bytes of the buffer used.
    pub range: Range<usize>,
    /// The buffer's length.
    pub mr_len: usize,
    /// The buffer's access.
    pub mr_access: Access,
    /// Requests already outstanding on the queue.
    pub outstanding: usize,
    /// The queue's size.
    pub capacity: u32,
}

/// Checks a work request against the QP before anything is posted: the
/// QP's type and state, the buffer's range and access, and the number of
/// requests already outstanding on the queue.
pub fn check_post(d: &PostDesc<'_>) -> Result<(), Error> {
    let PostDesc {
        kind,
        state,
        queue,
        op,
        ref range,
        mr_len,
        mr_access,
        outstanding,
        capacity,
    } = *d;
    let bad = |s: String| Err(Error::BadArgument(s));
    if range.start > range.end || range.end > mr_len {
        return bad(format!(
            "range {range:?} is outside the {mr_len}-byte region"
        ));
    }
    if u32::try_from(range.len()).is_err() {
        return bad(format!("{} bytes in one request", range.len()));
    }
    if outstanding >= capacity as usize {
        return bad(format!(
            "{queue:?} queue full ({capacity} requests outstanding)"
        ));
    }
    let writes_local = matches!(
        (queue, op),
        (Queue::Recv, _) | (Queue::Send, Some(SendOp::RdmaRead { .. }))
    );
    if writes_local && mr_access.0 & Access::LOCAL_WRITE.0 == 0 {
        return bad("the HCA writes this buffer: register it with LOCAL_WRITE".into());
    }
    match queue {
        Queue::Recv => {
            if matches!(state, QpState::Reset | QpState::Error) {
                return bad(format!("cannot post a receive in state {state:?}"));
            }
        }
        Queue::Send => {
            if state != QpState::Rts {
                return bad(format!("cannot post a send in state {state:?}"));
            }
            let ok = matches!(
                (kind, op),
                (QpType::Ud, Some(SendOp::Datagram { .. }))
                    | (
                        QpType::Rc,
                        Some(
                            SendOp::Send { .. }
                                | SendOp::RdmaWrite { .. }
                                | SendOp::RdmaRead { .. }
                        )
                    )
            );
            if !ok {
                return bad(format!("this operation is not for a {kind:?} QP"));
            }
        }
    }
    Ok(())
}

struct Posted {
    queue: Queue,
    mr: Mr,
    _ah: Option<Ah>,
}

/// A post that was refused: why, and the buffer back.
pub struct PostError {
    /// Why.
    pub error: Error,
    /// The buffer, unchanged.
    pub mr: Mr,
}

impl std::fmt::Debug for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostError({})", self.error)
    }
}

/// A queue pair. It owns handles to its PD and CQs, and the buffers of its
/// outstanding work requests.
pub struct Qp {
    qp: *mut ibv_qp,
    kind: QpType,
    state: QpState,
    caps: QpCaps,
    posted: HashMap<u64, Posted>,
    pd: Arc<PdInner>,
    _send_cq: Arc<CqInner>,
    _recv_cq: Arc<CqInner>,
}

// SAFETY: a QP may be used from any thread, one at a time (every method
// that posts or modifies takes &mut self). It is deliberately not Sync.
unsafe impl Send for Qp {}

/// The `ibv_qp_init_attr` of a QP of `kind` with one scatter/gather entry
/// per request; every send signalled when `sig_all`.
pub(crate) fn init_attr(
    kind: QpType,
    send_cq: &Cq,
    recv_cq: &Cq,
    caps: QpCaps,
    sig_all: bool,
) -> ibv_qp_init_attr {
    ibv_qp_init_attr {
        send_cq: send_cq.inner.cq,
        recv_cq: recv_cq.inner.cq,
        cap: ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: caps.max_inline_data,
        },
        qp_type: match kind {
            QpType::Rc => ibv_qp_type_IBV_QPT_RC,
            QpType::Ud => ibv_qp_type_IBV_QPT_UD,
        },
        sq_sig_all: c_int::from(sig_all),
        ..Default::default()
    }
}

impl Pd {
    /// Creates a queue pair of `kind` in this PD, completing on `send_cq`
    /// and `recv_cq` (which must be of the same device). Every send is
    /// signalled, so each work request completes.
    pub fn create_qp(
        &self,
        kind: QpType,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
    ) -> Result<Qp, Error> {
        if caps.max_send_wr == 0 || caps.max_recv_wr == 0 {
            return Err(Error::BadArgument("a QP needs room for one request".into()));
        }
        let mut init = init_attr(kind, send_cq, recv_cq, caps, true);
        // SAFETY: the PD and both CQs are live and kept alive by the QP.
        let qp = unsafe { self.inner.ctx.lib.ibv_create_qp(self.inner.pd, &mut init) };
        if qp.is_null() {
            return Err(crate::verbs::errno_call("ibv_create_qp"));
        }
        Ok(Qp {
            qp,
            kind,
            state: QpState::Reset,
            caps,
            posted: HashMap::new(),
            pd: self.inner.clone(),
            _send_cq: send_cq.inner.clone(),
            _recv_cq: recv_cq.inner.clone(),
        })
    }
}

/// The `ibv_send_wr` of `op` over the one scatter/gather entry `sge`
/// (none when its length is 0), with `flags` (`ibv_send_flags`). The work
/// request points at `sge` and at `op`'s address handle: both must outlive
/// the post.
pub(crate) fn send_wr(wr_id: u64, sge: &mut ibv_sge, op: &SendOp, flags: u32) -> ibv_send_wr {
    let num_sge = i32::from(sge.length != 0);
    let mut wr = ibv_send_wr {
        wr_id,
        sg_list: sge,
        num_sge,
        send_flags: flags,
        ..Default::default()
    };
    match op {
        SendOp::Send { imm } => {
            wr.opcode = match imm {
                Some(_) => ibv_wr_opcode_IBV_WR_SEND_WITH_IMM,
                None => ibv_wr_opcode_IBV_WR_SEND,
            };
            wr.__bindgen_anon_1.imm_data = imm.unwrap_or(0).to_be();
        }
        SendOp::Datagram { ah, qpn, qkey } => {
            wr.opcode = ibv_wr_opcode_IBV_WR_SEND;
            wr.wr.ud = ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
                ah: ah.inner.ah,
                remote_qpn: *qpn,
                remote_qkey: *qkey,
            };
        }
        SendOp::RdmaWrite {
            remote_addr,
            rkey,
            imm,
        } => {
            wr.opcode = match imm {
                Some(_) => ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM,
                None => ibv_wr_opcode_IBV_WR_RDMA_WRITE,
            };
            wr.__bindgen_anon_1.imm_data = imm.unwrap_or(0).to_be();
            wr.wr.rdma = ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                remote_addr: *remote_addr,
                rkey: *rkey,
            };
        }
        SendOp::RdmaRead { remote_addr, rkey } => {
            wr.opcode = ibv_wr_opcode_IBV_WR_RDMA_READ;
            wr.wr.rdma = ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                remote_addr: *remote_addr,
                rkey: *rkey,
            };
        }
    }
    wr
}

impl Qp {
    /// Its QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: the QP is live until drop.
        unsafe { (*self.qp).qp_num }
    }

    /// Its transport.
    pub fn kind(&self) -> QpType {
        self.kind
    }

    /// Its state, as last set.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Work requests posted and not yet reclaimed, on `queue`.
    pub fn outstanding(&self, queue: Queue) -> usize {
        self.posted.values().filter(|p| p.queue == queue).count()
    }

    /// Moves the QP through `t` (see [`transition_attr`]).
    pub fn modify(&mut self, t: Transition) -> Result<(), Error> {
        let (mut a, mask) = transition_attr(self.kind, self.state, &t)?;
        // SAFETY: the QP is live; `a` is valid for `mask`.
        let r = unsafe {
            self.pd
                .ctx
                .lib
                .ibv_modify_qp(self.qp, &mut a, mask as c_int)
        };
        if r != 0 {
            return Err(Error::Call {
                call: "ibv_modify_qp",
                code: r,
            });
        }
        self.state = t.target();
        Ok(())
    }

    fn check(
        &self,
        queue: Queue,
        op: Option<&SendOp>,
        wr_id: u64,
        mr: &Mr,
        range: &Range<usize>,
    ) -> Result<(), Error> {
        if !Arc::ptr_eq(&mr.pd, &self.pd) {
            return Err(Error::BadArgument(
                "the buffer is registered in another protection domain".into(),
            ));
        }
        if self.posted.contains_key(&wr_id) {
            // IDs are unique across both queues: an error completion does
            // not say which queue it came from.
            return Err(Error::BadArgument(format!(
                "work request {wr_id} is already posted"
            )));
        }
        let cap = match queue {
            Queue::Send => self.caps.max_send_wr,
            Queue::Recv => self.caps.max_recv_wr,
        };
        check_post(&PostDesc {
            kind: self.kind,
            state: self.state,
            queue,
            op,
            range: range.clone(),
            mr_len: mr.len(),
            mr_access: mr.access(),
            outstanding: self.outstanding(queue),
            capacity: cap,
        })
    }

    /// Posts a send work request over `mr[range]`. The region stays with
    /// the QP until [`Qp::reclaim`] is given its completion.
    pub fn post_send(
        &mut self,
        wr_id: u64,
        mr: Mr,
        range: Range<usize>,
        op: SendOp,
    ) -> Result<(), PostError> {
        if let Err(error) = self.check(Queue::Send, Some(&op), wr_id, &mr, &range) {
            return Err(PostError { error, mr });
        }
        let mut sge = ibv_sge {
            addr: mr.addr() + range.start as u64,
            length: range.len() as u32,
            lkey: mr.lkey(),
        };
        let mut wr = send_wr(wr_id, &mut sge, &op, ibv_send_flags_IBV_SEND_SIGNALED);
        let ah = match &op {
            SendOp::Datagram { ah, .. } => Some(ah.clone()),
            _ => None,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is live; `wr` and `sge` live for the call; the
        // buffer they name is owned by `mr`, which the QP keeps (below)
        // until the completion is reclaimed; the AH likewise.
        let r = unsafe { inline::ibv_post_send(self.qp, &mut wr, &mut bad) };
        self.record(r, "ibv_post_send", wr_id, Queue::Send, mr, ah)
    }

    /// Keeps `mr` (and `ah`) until the work request `wr_id` completes, when
    /// `call` returned 0; else gives `mr` back with the error.
    fn record(
        &mut self,
        r: i32,
        call: &'static str,
        wr_id: u64,
        queue: Queue,
        mr: Mr,
        ah: Option<Ah>,
    ) -> Result<(), PostError> {
        if r != 0 {
            return Err(PostError {
                error: Error::Call { call, code: r },
                mr,
            });
        }
        self.posted.insert(wr_id, Posted { queue, mr, _ah: ah });
        Ok(())
    }

    /// Posts a receive work request into `mr[range]` (a UD receive needs 40
    /// bytes more than the message, for the GRH).
    pub fn post_recv(&mut self, wr_id: u64, mr: Mr, range: Range<usize>) -> Result<(), PostError> {
        if let Err(error) = self.check(Queue::Recv, None, wr_id, &mr, &range) {
            return Err(PostError { error, mr });
        }
        let mut sge = ibv_sge {
            addr: mr.addr() + range.start as u64,
            length: range.len() as u32,
            lkey: mr.lkey(),
        };
        let mut wr = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: as in post_send.
        let r = unsafe { inline::ibv_post_recv(self.qp, &mut wr, &mut bad) };
        self.record(r, "ibv_post_recv", wr_id, Queue::Recv, mr, None)
    }

    /// Gives back the buffer of the work request `c` completed (work
    /// request IDs are unique across a QP's two queues, since an error
    /// completion's opcode is undefined). A completion of another QP, or of
    /// no outstanding request, is returned unchanged.
    pub fn reclaim(&mut self, c: Completion) -> Result<Mr, Completion> {
        if c.qp_num != self.qp_num() {
            return Err(c);
        }
        match self.posted.remove(&c.wr_id) {
            Some(p) => Ok(p.mr),
            None => Err(c),
        }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp, destroyed once.
        let r = unsafe { self.pd.ctx.lib.ibv_destroy_qp(self.qp) };
        if r != 0 {
            // The HCA may still use the posted buffers: leak them rather
            // than free memory under DMA.
            std::mem::forget(std::mem::take(&mut self.posted));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init(access: Access) -> Transition {
        Transition::Init {
            port: 1,
            pkey_index: 0,
            access,
            qkey: 0x1111_1111,
        }
    }

    #[test]
    fn masks_are_the_ones_the_iba_requires() {
        let m = |k, f, t: Transition| transition_attr(k, f, &t).map(|(_, m)| m);
        let (state, port, pkey, access, qkey) = (1, 32, 16, 8, 64);
        assert_eq!(
            m(QpType::Rc, QpState::Reset, init(Access::REMOTE_READ)).unwrap(),
            state | port | pkey | access
        );
        assert_eq!(
            m(QpType::Ud, QpState::Reset, init(Access::default())).unwrap(),
            state | port | pkey | qkey
        );
        let peer = RcPeer {
            qpn: 0x12_3456,
            psn: 7,
            lid: 9,
            sl: 0,
            mtu: 3,
            port: 1,
            grh: None,
        };
        // AV, PATH_MTU, DEST_QPN, RQ_PSN, MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER.
        assert_eq!(
            m(QpType::Rc, QpState::Init, Transition::Rtr(Some(peer))).unwrap(),
            state | 128 | 256 | 0x10_0000 | 0x1000 | 0x2_0000 | 0x8000
        );
        assert_eq!(
            m(QpType::Ud, QpState::Init, Transition::Rtr(None)).unwrap(),
            state
        );
        // TIMEOUT, RETRY_CNT, RNR_RETRY, SQ_PSN, MAX_QP_RD_ATOMIC.
        assert_eq!(
            m(QpType::Rc, QpState::Rtr, Transition::Rts { sq_psn: 7 }).unwrap(),
            state | 512 | 1024 | 2048 | 0x1_0000 | 0x2000
        );
        assert_eq!(
            m(QpType::Ud, QpState::Rtr, Transition::Rts { sq_psn: 7 }).unwrap(),
            state | 0x1_0000
        );
        let (a, _) =
            transition_attr(QpType::Rc, QpState::Init, &Transition::Rtr(Some(peer))).unwrap();
        assert_eq!(
            (
                a.dest_qp_num,
                a.rq_psn,
                a.ah_attr.dlid,
                a.path_mtu,
                a.qp_state
            ),
            (0x12_3456, 7, 9, 3, ibv_qp_state_IBV_QPS_RTR)
        );
    }

    #[test]
    fn illegal_transitions_and_wrong_peers_are_refused() {
        let t = |k, f, t: Transition| transition_attr(k, f, &t).is_ok();
        assert!(!t(
            QpType::Rc,
            QpState::Reset,
            Transition::Rts { sq_psn: 0 }
        ));
        assert!(!t(QpType::Rc, QpState::Reset, Transition::Rtr(None)));
        assert!(!t(QpType::Rc, QpState::Rts, init(Access::default())));
        assert!(!t(QpType::Rc, QpState::Init, Transition::Rtr(None)));
        let peer = RcPeer {
            qpn: 1,
            psn: 0,
            lid: 1,
            sl: 0,
            mtu: 9,
            port: 1,
            grh: None,
        };
        assert!(!t(QpType::Rc, QpState::Init, Transition::Rtr(Some(peer))));
        assert!(!t(QpType::Ud, QpState::Init, Transition::Rtr(Some(peer))));
        assert!(t(QpType::Rc, QpState::Rts, Transition::Error));
        assert!(t(QpType::Ud, QpState::Error, Transition::Reset));
    }

    #[test]
    fn a_roce_peer_gets_a_global_route_and_an_ib_peer_none() {
        let mut peer = RcPeer {
            qpn: 5,
            psn: 0,
            lid: 0,
            sl: 0,
            mtu: 3,
            port: 1,
            grh: None,
        };
        let rtr = |p| transition_attr(QpType::Rc, QpState::Init, &Transition::Rtr(Some(p)));
        let (a, _) = rtr(peer).unwrap();
        assert_eq!(a.ah_attr.is_global, 0);
        let dgid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        peer.grh = Some(crate::verbs::Grh {
            dgid,
            sgid_index: 1,
            hop_limit: 64,
        });
        let (a, _) = rtr(peer).unwrap();
        assert_eq!(a.ah_attr.is_global, 1);
        // SAFETY: `raw` is the union's plain-bytes view.
        assert_eq!(unsafe { a.ah_attr.grh.dgid.raw }, dgid);
        assert_eq!((a.ah_attr.grh.sgid_index, a.ah_attr.grh.hop_limit), (1, 64));
    }

    #[test]
    fn posts_are_checked_before_they_reach_the_hca() {
        let send = SendOp::Send { imm: None };
        let read = SendOp::RdmaRead {
            remote_addr: 0,
            rkey: 0,
        };
        let rw = Access::LOCAL_WRITE;
        let ro = Access::LOCAL_READ;
        let c = |k, s, q, op: Option<&SendOp>, r: Range<usize>, acc, out| {
            check_post(&PostDesc {
                kind: k,
                state: s,
                queue: q,
                op,
                range: r,
                mr_len: 4096,
                mr_access: acc,
                outstanding: out,
                capacity: 16,
            })
            .is_ok()
        };
        assert!(c(
            QpType::Rc,
            QpState::Rts,
            Queue::Send,
            Some(&send),
            0..4096,
            ro,
            0
        ));
        assert!(!c(
            QpType::Rc,
            QpState::Rts,
            Queue::Send,
            Some(&send),
            0..4097,
            ro,
            0
        ));
        assert!(!c(
            QpType::Rc,
            QpState::Rts,
            Queue::Send,
            Some(&send),
            10..4097,
            ro,
            0
        ));
        assert!(!c(
            QpType::Rc,
            QpState::Rtr,
            Queue::Send,
            Some(&send),
            0..8,
            ro,
            0
        ));
        assert!(!c(
            QpType::Rc,
            QpState::Rts,
            Queue::Send,
            Some(&send),
            0..8,
            ro,
            16
        ));
        // The HCA writes receive and RDMA-read buffers.
        assert!(!c(
            QpType::Rc,
            QpState::Rts,
            Queue::Send,
            Some(&read),
            0..8,
            ro,
            0
        ));
        assert!(c(
            QpType::Rc,
            QpState::Rts,
            Queue::Send,
            Some(&read),
            0..8,
            rw,
            0
        ));
        assert!(!c(
            QpType::Rc,
            QpState::Init,
            Queue::Recv,
            None,
            0..8,
            ro,
            0
        ));
        assert!(c(QpType::Rc, QpState::Init, Queue::Recv, None, 0..8, rw, 0));
        assert!(!c(
            QpType::Rc,
            QpState::Reset,
            Queue::Recv,
            None,
            0..8,
            rw,
            0
        ));
        // UD sends are datagrams; RC QPs do not send datagrams.
        assert!(!c(
            QpType::Ud,
            QpState::Rts,
            Queue::Send,
            Some(&send),
            0..8,
            ro,
            0
        ));
    }
}
