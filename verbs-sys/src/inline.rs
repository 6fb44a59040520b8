//! The static-inline verbs of `infiniband/verbs.h`. They are not exported
//! symbols: the header calls through the device context's ops table, and
//! so do these.

use crate::ffi::verbs::{ibv_cq, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_wc};
use std::os::raw::c_int;

/// `ibv_post_send`: posts a list of send work requests. Returns 0 or an
/// errno, with `*bad_wr` at the first request not posted.
///
/// # Safety
/// `qp` must be a live QP from libibverbs, `wr` a valid list whose buffers
/// stay registered and alive until their completions, `bad_wr` writable.
pub unsafe fn ibv_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: the caller guarantees `qp` is live; its context and ops table
    // live as long as it does.
    match unsafe { (*(*qp).context).ops.post_send } {
        Some(f) => unsafe { f(qp, wr, bad_wr) },
        None => libc_enosys(),
    }
}

/// `ibv_post_recv`: posts a list of receive work requests.
///
/// # Safety
/// As for [`ibv_post_send`].
pub unsafe fn ibv_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: as in ibv_post_send.
    match unsafe { (*(*qp).context).ops.post_recv } {
        Some(f) => unsafe { f(qp, wr, bad_wr) },
        None => libc_enosys(),
    }
}

/// `ibv_poll_cq`: takes up to `num_entries` completions into `wc`; returns
/// how many, or a negative value on error.
///
/// # Safety
/// `cq` must be a live CQ and `wc` point to `num_entries` writable entries.
pub unsafe fn ibv_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the caller guarantees `cq` is live.
    match unsafe { (*(*cq).context).ops.poll_cq } {
        Some(f) => unsafe { f(cq, num_entries, wc) },
        None => -libc_enosys(),
    }
}

/// `ibv_req_notify_cq`: asks for a completion event on the CQ's channel.
///
/// # Safety
/// `cq` must be a live CQ.
pub unsafe fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: the caller guarantees `cq` is live.
    match unsafe { (*(*cq).context).ops.req_notify_cq } {
        Some(f) => unsafe { f(cq, solicited_only) },
        None => libc_enosys(),
    }
}

fn libc_enosys() -> c_int {
    38 // ENOSYS
}
