//! Verbs for a mediating driver, such as vhca's backend over a real HCA:
//! memory regions over memory the caller maps and keeps mapped (a guest's
//! RAM), registered at an I/O virtual address of the caller's choosing
//! (`ibv_reg_mr_iova`), and queue pairs whose work requests name memory by
//! key and address rather than owning a buffer. The HCA checks every key,
//! range, right and protection domain, as it does for any consumer; what
//! [`Pd::register_iova`]'s caller promises is only that the memory stays
//! mapped while the region lives.

use crate::ffi::verbs::*;
use crate::qp::{init_attr, send_wr, transition_attr, QpCaps, QpState, QpType, SendOp, Transition};
use crate::verbs::{errno_call, Access, Ah, Cq, CqInner, Pd, PdInner};
use crate::{inline, Error};
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::Arc;

/// A memory region over memory the caller owns; deregistered on drop.
pub struct ExtMr {
    mr: *mut ibv_mr,
    pd: Arc<PdInner>,
}

// SAFETY: deregistration is thread-safe and the keys are immutable.
unsafe impl Send for ExtMr {}

impl ExtMr {
    /// The local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: live until drop.
        unsafe { (*self.mr).lkey }
    }

    /// The remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: live until drop.
        unsafe { (*self.mr).rkey }
    }
}

impl Drop for ExtMr {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr_iova, deregistered once.
        unsafe { self.pd.ctx.lib.ibv_dereg_mr(self.mr) };
    }
}

impl Pd {
    /// Registers `len` bytes at `addr` so that work requests name them at
    /// I/O virtual addresses `iova..iova + len` (a guest's own addresses).
    ///
    /// # Safety
    /// `addr..addr + len` must be mapped in this process, and stay mapped
    /// until the returned region and every queue pair that may still use
    /// it are dropped: the HCA reads and writes it.
    pub unsafe fn register_iova(
        &self,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<ExtMr, Error> {
        let lib = self.inner.ctx.lib;
        let Ok(f) = lib.ibv_reg_mr_iova.as_ref() else {
            return Err(Error::SymbolMissing {
                library: crate::LIBIBVERBS,
                symbol: "ibv_reg_mr_iova",
            });
        };
        if len == 0 {
            return Err(Error::BadArgument(
                "an empty range cannot be registered".into(),
            ));
        }
        // SAFETY: the PD is live; the caller keeps the range mapped.
        let mr = unsafe {
            f(
                self.inner.pd,
                addr as *mut c_void,
                len,
                iova,
                access.0 as c_int,
            )
        };
        if mr.is_null() {
            return Err(errno_call("ibv_reg_mr_iova"));
        }
        Ok(ExtMr {
            mr,
            pd: self.inner.clone(),
        })
    }

    /// Creates a queue pair for a mediating driver: sends are signalled
    /// only when asked, and work requests name memory by key.
    pub fn create_keyed_qp(
        &self,
        kind: QpType,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
    ) -> Result<KeyedQp, Error> {
        let caps = QpCaps {
            max_send_wr: caps.max_send_wr.max(1),
            max_recv_wr: caps.max_recv_wr.max(1),
            ..caps
        };
        let mut init = init_attr(kind, send_cq, recv_cq, caps, false);
        // SAFETY: the PD and both CQs are live and kept alive by the QP.
        let qp = unsafe { self.inner.ctx.lib.ibv_create_qp(self.inner.pd, &mut init) };
        if qp.is_null() {
            return Err(errno_call("ibv_create_qp"));
        }
        Ok(KeyedQp {
            qp,
            kind,
            state: QpState::Reset,
            pd: self.inner.clone(),
            ahs: Vec::new(),
            _cqs: [send_cq.inner.clone(), recv_cq.inner.clone()],
        })
    }
}

/// One scatter/gather entry: `len` bytes at I/O virtual address `addr` of
/// the region whose local key is `lkey`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// I/O virtual address.
    pub addr: u64,
    /// Bytes.
    pub len: u32,
    /// The region's local key.
    pub lkey: u32,
}

/// A queue pair whose work requests name memory by key and address
/// (see the module documentation). It keeps its PD, CQs and the address
/// handles its datagrams used alive.
pub struct KeyedQp {
    qp: *mut ibv_qp,
    kind: QpType,
    state: QpState,
    pd: Arc<PdInner>,
    ahs: Vec<Ah>,
    _cqs: [Arc<CqInner>; 2],
}

// SAFETY: used from one thread at a time (posting and modifying take
// &mut self).
unsafe impl Send for KeyedQp {}

impl KeyedQp {
    /// Its QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: live until drop.
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
        self.state = match t {
            Transition::Init { .. } => QpState::Init,
            Transition::Rtr(_) => QpState::Rtr,
            Transition::Rts { .. } => QpState::Rts,
            Transition::Error => QpState::Error,
            Transition::Reset => QpState::Reset,
        };
        Ok(())
    }

    /// Posts a send work request over `sge` (no entry when its length is
    /// 0); a completion is written when `signaled`, or on error.
    pub fn post_send(
        &mut self,
        wr_id: u64,
        sge: Sge,
        op: &SendOp,
        signaled: bool,
    ) -> Result<(), Error> {
        let mut s = ibv_sge {
            addr: sge.addr,
            length: sge.len,
            lkey: sge.lkey,
        };
        let flags = if signaled {
            ibv_send_flags_IBV_SEND_SIGNALED
        } else {
            0
        };
        let mut wr = send_wr(wr_id, &mut s, op, flags);
        if let SendOp::Datagram { ah, .. } = op {
            if !self.ahs.iter().any(|h| Arc::ptr_eq(&h.inner, &ah.inner)) {
                self.ahs.push(ah.clone());
            }
        }
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is live; `wr` and `s` live for the call; the
        // memory `s` names is checked by the HCA against a region whose
        // registrant keeps it mapped (`register_iova`); the AH is kept.
        let r = unsafe { inline::ibv_post_send(self.qp, &mut wr, &mut bad) };
        if r != 0 {
            return Err(Error::Call {
                call: "ibv_post_send",
                code: r,
            });
        }
        Ok(())
    }

    /// Posts a receive work request into `sge`.
    pub fn post_recv(&mut self, wr_id: u64, sge: Sge) -> Result<(), Error> {
        let mut s = ibv_sge {
            addr: sge.addr,
            length: sge.len,
            lkey: sge.lkey,
        };
        let mut wr = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: &mut s,
            num_sge: i32::from(sge.len != 0),
        };
        let mut bad = ptr::null_mut();
        // SAFETY: as in post_send.
        let r = unsafe { inline::ibv_post_recv(self.qp, &mut wr, &mut bad) };
        if r != 0 {
            return Err(Error::Call {
                call: "ibv_post_recv",
                code: r,
            });
        }
        Ok(())
    }
}

impl Drop for KeyedQp {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp, destroyed once. The memory its
        // requests name belongs to regions, not to the QP.
        unsafe { self.pd.ctx.lib.ibv_destroy_qp(self.qp) };
    }
}
