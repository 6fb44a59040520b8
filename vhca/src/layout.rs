//! The data path's formats in memory, shared by the frontend (which
//! writes work requests and reads completions) and the device (which reads
//! the one and writes the other). None of this crosses the device channel:
//! the guest and the HCA meet in the guest's registered memory and in the
//! doorbell (UAR) page.
//!
//! ```text
//! QP buffer (in a registered region, at the offset CreateQp names)
//!   +0   sq_prod  u32  guest: send WQEs posted
//!   +4   rq_prod  u32  guest: receive WQEs posted
//!   +8   sq_cons  u32  device: send WQEs taken
//!   +12  rq_cons  u32  device: receive WQEs taken
//!   +64  max_send_wr send WQEs, then max_recv_wr receive WQEs, 64 bytes each
//!
//! CQ buffer
//!   +0   ci       u32  guest: entries consumed
//!   +4   arm      u32  guest: bumped to ask for an event at the next entry
//!   +8   pi       u32  device: entries written
//!   +64  cqe entries, 32 bytes each; an entry is new when its seq is ci + 1
//!
//! UAR page (device memory mapped into the guest)
//!   +0   kick     u32  guest: bumped after posting to any QP of the context
//!   +64  asleep   u32  device: 1 while the software HCA sleeps; a guest
//!                      that rang then wakes it through its channel
//! ```
//!
//! All little-endian. Producer indices run freely and wrap at 2³².

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of the QP buffer's header.
pub const QP_HDR: u64 = 64;
/// Bytes of the CQ buffer's header.
pub const CQ_HDR: u64 = 64;
/// Bytes of a UAR page.
pub const UAR_SIZE: usize = 4096;
/// Offset of the doorbell counter in the UAR page.
pub const UAR_KICK: usize = 0;
/// Offset of the device's asleep flag in the UAR page.
pub const UAR_ASLEEP: usize = 64;
/// Most bytes of a UD message (the path MTU).
pub const UD_MTU: u32 = 4096;
/// Bytes a UD receive buffer holds before the payload (room for a GRH).
pub const GRH_LEN: u32 = 40;

/// QP header offsets.
pub mod qp_hdr {
    /// Send producer (guest).
    pub const SQ_PROD: u64 = 0;
    /// Receive producer (guest).
    pub const RQ_PROD: u64 = 4;
    /// Send consumer (device).
    pub const SQ_CONS: u64 = 8;
    /// Receive consumer (device).
    pub const RQ_CONS: u64 = 12;
}

/// CQ header offsets.
pub mod cq_hdr {
    /// Consumer index (guest).
    pub const CI: u64 = 0;
    /// Arm sequence (guest).
    pub const ARM: u64 = 4;
    /// Producer index (device).
    pub const PI: u64 = 8;
}

/// Work-request opcodes.
pub mod op {
    /// Send (consumes a receive WQE at the peer).
    pub const SEND: u8 = 0;
    /// RDMA write into the peer's region named by rkey.
    pub const RDMA_WRITE: u8 = 1;
    /// RDMA read from the peer's region named by rkey.
    pub const RDMA_READ: u8 = 2;
    /// A receive completion (CQE opcode only).
    pub const RECV: u8 = 0x80;
}

/// Work-request flags.
pub mod flags {
    /// Write a completion when done.
    pub const SIGNALED: u8 = 1;
    /// Solicited event at the receiver.
    pub const SOLICITED: u8 = 2;
}

/// Completion status codes (libibverbs' `ibv_wc_status` numbering).
pub mod status {
    /// Done.
    pub const SUCCESS: u8 = 0;
    /// A message longer than the receive buffer, or than the UD MTU.
    pub const LOC_LEN_ERR: u8 = 1;
    /// An operation the QP cannot do (RDMA on UD).
    pub const LOC_QP_OP_ERR: u8 = 2;
    /// A local key, range, access right or PD that does not fit.
    pub const LOC_PROT_ERR: u8 = 4;
    /// Flushed: the QP went to the error state first.
    pub const WR_FLUSH_ERR: u8 = 5;
    /// The peer QP does not exist or is not connected to this one.
    pub const REM_INV_REQ_ERR: u8 = 9;
    /// An rkey, range, access right or PD at the peer that does not fit.
    pub const REM_ACCESS_ERR: u8 = 10;
}

/// A work-queue entry (send or receive) in a QP buffer.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Wqe {
    /// The guest's tag, returned in the completion.
    pub wr_id: U64,
    /// [`op`] code (send queue only).
    pub opcode: u8,
    /// [`flags`].
    pub flags: u8,
    /// Zero.
    pub reserved: U16,
    /// Key of the local buffer's region.
    pub lkey: U32,
    /// Local buffer address (guest-physical).
    pub addr: U64,
    /// Local buffer length.
    pub len: U32,
    /// Remote key (RDMA).
    pub rkey: U32,
    /// Remote address (RDMA).
    pub remote_addr: U64,
    /// Destination QP (UD).
    pub dest_qpn: U32,
    /// Destination LID (UD).
    pub dlid: U16,
    /// Zero.
    pub reserved2: U16,
    /// Q_Key (UD).
    pub qkey: U32,
    /// Zero.
    pub pad: [u8; 12],
}

/// A completion-queue entry in a CQ buffer.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Cqe {
    /// The work request's `wr_id`.
    pub wr_id: U64,
    /// Bytes received (receives) or moved.
    pub byte_len: U32,
    /// The local QP number.
    pub qp_num: U32,
    /// The sender's QP number (receives).
    pub src_qp: U32,
    /// The sender's LID (receives).
    pub slid: U16,
    /// [`op`] code.
    pub opcode: u8,
    /// [`status`] code.
    pub status: u8,
    /// Producer index + 1: how the guest tells a new entry from an old one.
    pub seq: U32,
    /// Zero.
    pub pad: U32,
}

const _: () = assert!(core::mem::size_of::<Wqe>() == crate::proto::WQE_SIZE as usize);
const _: () = assert!(core::mem::size_of::<Cqe>() == crate::proto::CQE_SIZE as usize);

/// Bytes a QP buffer needs for `sq` send and `rq` receive entries.
pub fn qp_bytes(sq: u32, rq: u32) -> u64 {
    QP_HDR + (u64::from(sq) + u64::from(rq)) * crate::proto::WQE_SIZE
}

/// Bytes a CQ buffer needs for `cqe` entries.
pub fn cq_bytes(cqe: u32) -> u64 {
    CQ_HDR + u64::from(cqe) * crate::proto::CQE_SIZE
}

/// Events on the event channel.
pub mod event {
    /// A completion on an armed CQ; `handle` is the CQ's.
    pub const COMPLETION: u16 = 1;
    /// A QP went to the error state; `handle` is the QP's.
    pub const QP_FATAL: u16 = 2;
    /// A CQ overran (the guest did not consume in time); `handle` is the CQ's.
    pub const CQ_OVERRUN: u16 = 3;
}
