//! The command protocol between a guest frontend and the backend: one
//! fixed-layout 64-byte request and one 64-byte response per command,
//! little-endian. Every field is checked on decode: the opcode, the
//! reserved and unused words (zero), enumerations, and every size a guest
//! gives is bounded here, before the backend allocates anything.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of a request and of a response.
pub const MSG_SIZE: usize = 64;
/// Most completion-queue entries a guest may ask for.
pub const MAX_CQE: u32 = 1 << 16;
/// Most work requests per queue a guest may ask for.
pub const MAX_WR: u32 = 1 << 14;
/// Bytes of a completion-queue entry in a guest's CQ buffer.
pub const CQE_SIZE: u64 = 32;
/// Bytes of a work-queue entry in a guest's QP buffer.
pub const WQE_SIZE: u64 = 64;
/// Bytes of a MAD.
pub const MAD_SIZE: u64 = mad_core::MAD_SIZE as u64;

/// A request on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct WireRequest {
    /// What is asked ([`Opcode`]).
    pub opcode: U16,
    /// Zero.
    pub reserved: U16,
    /// Chosen by the guest, echoed in the response.
    pub seq: U32,
    /// The arguments, by opcode.
    pub args: [U64; 7],
}

/// A response on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct WireResponse {
    /// The request's `seq`.
    pub seq: U32,
    /// 0, or a [`Refusal`] code.
    pub status: U32,
    /// The results, by opcode.
    pub vals: [U64; 7],
}

const _: () = assert!(core::mem::size_of::<WireRequest>() == MSG_SIZE);
const _: () = assert!(core::mem::size_of::<WireResponse>() == MSG_SIZE);

/// A resource handle: a table index and the generation of the entry it
/// was given for (both nonzero on the wire: 0 is never a handle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub u64);

impl Handle {
    /// The table index.
    pub fn index(self) -> u32 {
        self.0 as u32
    }
    /// The generation.
    pub fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// The handle of entry `index` in generation `generation`.
    pub fn new(index: u32, generation: u32) -> Handle {
        Handle(u64::from(generation) << 32 | u64::from(index))
    }
}

/// QP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc = 2,
    /// Unreliable datagram.
    Ud = 4,
}

/// QP states a guest may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum QpState {
    /// Reset.
    Reset = 0,
    /// Initialized.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Error.
    Err = 6,
}

/// Access flags of a memory registration.
pub mod access {
    /// Local write.
    pub const LOCAL_WRITE: u32 = 1;
    /// Remote write.
    pub const REMOTE_WRITE: u32 = 2;
    /// Remote read.
    pub const REMOTE_READ: u32 = 4;
    /// Every flag defined.
    pub const ALL: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ;
}

/// Operation codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Opcode {
    /// Open the device (first command of a channel).
    OpenDevice = 1,
    /// Device attributes.
    QueryDevice = 2,
    /// Port attributes as this guest sees them.
    QueryPort = 3,
    /// Allocate a protection domain.
    AllocPd = 4,
    /// Free a protection domain.
    FreePd = 5,
    /// Register guest memory.
    RegMr = 6,
    /// Deregister.
    DeregMr = 7,
    /// Create a CQ on a buffer in a registered region.
    CreateCq = 8,
    /// Destroy a CQ.
    DestroyCq = 9,
    /// Create a QP on a buffer in a registered region.
    CreateQp = 10,
    /// Move a QP to another state.
    ModifyQp = 11,
    /// Destroy a QP.
    DestroyQp = 12,
    /// The context's doorbell (UAR) page.
    AllocUar = 13,
    /// Ask for an event at the next completion.
    ReqNotifyCq = 14,
    /// Send a MAD (read from guest memory) on QP 0 or 1.
    SendMad = 15,
}

impl Opcode {
    /// Every opcode.
    pub const ALL: [Opcode; 15] = [
        Opcode::OpenDevice,
        Opcode::QueryDevice,
        Opcode::QueryPort,
        Opcode::AllocPd,
        Opcode::FreePd,
        Opcode::RegMr,
        Opcode::DeregMr,
        Opcode::CreateCq,
        Opcode::DestroyCq,
        Opcode::CreateQp,
        Opcode::ModifyQp,
        Opcode::DestroyQp,
        Opcode::AllocUar,
        Opcode::ReqNotifyCq,
        Opcode::SendMad,
    ];

    /// The opcode numbered `c`.
    pub fn from_code(c: u16) -> Option<Opcode> {
        Opcode::ALL.into_iter().find(|o| *o as u16 == c)
    }
}

/// A decoded, checked command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// See [`Opcode::OpenDevice`].
    OpenDevice,
    /// See [`Opcode::QueryDevice`].
    QueryDevice,
    /// See [`Opcode::QueryPort`].
    QueryPort {
        /// Port number (1).
        port: u8,
    },
    /// See [`Opcode::AllocPd`].
    AllocPd,
    /// See [`Opcode::FreePd`].
    FreePd {
        /// The PD.
        pd: Handle,
    },
    /// See [`Opcode::RegMr`].
    RegMr {
        /// The PD.
        pd: Handle,
        /// Guest-physical start.
        addr: u64,
        /// Bytes (nonzero).
        len: u64,
        /// [`access`] flags.
        access: u32,
    },
    /// See [`Opcode::DeregMr`].
    DeregMr {
        /// The MR.
        mr: Handle,
    },
    /// See [`Opcode::CreateCq`].
    CreateCq {
        /// Entries (1..=[`MAX_CQE`]).
        cqe: u32,
        /// The registered region holding the buffer.
        mr: Handle,
        /// Offset of the buffer in the region.
        offset: u64,
    },
    /// See [`Opcode::DestroyCq`].
    DestroyCq {
        /// The CQ.
        cq: Handle,
    },
    /// See [`Opcode::CreateQp`].
    CreateQp {
        /// The PD.
        pd: Handle,
        /// Send CQ.
        send_cq: Handle,
        /// Receive CQ.
        recv_cq: Handle,
        /// Transport.
        qp_type: QpType,
        /// Send queue depth (1..=[`MAX_WR`]).
        max_send_wr: u32,
        /// Receive queue depth (1..=[`MAX_WR`]).
        max_recv_wr: u32,
        /// The registered region holding the work queues.
        mr: Handle,
        /// Offset of the queues in the region.
        offset: u64,
    },
    /// See [`Opcode::ModifyQp`].
    ModifyQp {
        /// The QP.
        qp: Handle,
        /// The state to go to.
        state: QpState,
        /// Destination QP number (RC, to RTR).
        dest_qpn: u32,
        /// Destination LID (RC, to RTR).
        dlid: u16,
    },
    /// See [`Opcode::DestroyQp`].
    DestroyQp {
        /// The QP.
        qp: Handle,
    },
    /// See [`Opcode::AllocUar`].
    AllocUar,
    /// See [`Opcode::ReqNotifyCq`].
    ReqNotifyCq {
        /// The CQ.
        cq: Handle,
        /// Only solicited completions.
        solicited: bool,
    },
    /// See [`Opcode::SendMad`].
    SendMad {
        /// 0 (SMI) or 1 (GSI).
        qpn: u32,
        /// Guest-physical address of the 256-byte MAD.
        addr: u64,
    },
}

/// Why a request was refused: the status of its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Refusal {
    /// The bytes are not a valid request (size, opcode, reserved or unused
    /// words, enumerations, bounds).
    Malformed = 1,
    /// The channel is not set up: OpenDevice first.
    NotOpen = 2,
    /// No such resource of this guest's (unknown, stale, or another's).
    BadHandle = 3,
    /// An address range outside this guest's memory, or wrapping.
    BadAddress = 4,
    /// A limit of this guest's would be exceeded.
    Limit = 5,
    /// The resource is still in use by another.
    Busy = 6,
    /// Not allowed to a guest (QP 0, a management class or method).
    Forbidden = 7,
    /// A state transition that is not legal.
    BadState = 8,
    /// Already done (a second OpenDevice or AllocUar).
    Again = 9,
    /// The device refused.
    Device = 10,
    /// The guest's ring indices are out of range: the domain is stopped.
    RingBroken = 11,
}

impl Refusal {
    /// Every refusal.
    pub const ALL: [Refusal; 11] = [
        Refusal::Malformed,
        Refusal::NotOpen,
        Refusal::BadHandle,
        Refusal::BadAddress,
        Refusal::Limit,
        Refusal::Busy,
        Refusal::Forbidden,
        Refusal::BadState,
        Refusal::Again,
        Refusal::Device,
        Refusal::RingBroken,
    ];

    /// The refusal with status code `c`.
    pub fn from_code(c: u32) -> Option<Refusal> {
        Refusal::ALL.into_iter().find(|r| *r as u32 == c)
    }
}

fn handle(v: u64) -> Result<Handle, Refusal> {
    let h = Handle(v);
    if h.index() == 0 || h.generation() == 0 {
        return Err(Refusal::Malformed);
    }
    Ok(h)
}

fn bounded(v: u64, max: u32) -> Result<u32, Refusal> {
    if v == 0 || v > u64::from(max) {
        return Err(Refusal::Malformed);
    }
    Ok(v as u32)
}

impl Command {
    /// Decodes and checks a request: its sequence number and command.
    pub fn decode(bytes: &[u8]) -> Result<(u32, Command), (u32, Refusal)> {
        let Ok(w) = WireRequest::read_from_bytes(bytes) else {
            return Err((0, Refusal::Malformed));
        };
        let seq = w.seq.get();
        Command::from_wire(&w)
            .map(|c| (seq, c))
            .map_err(|r| (seq, r))
    }

    fn from_wire(w: &WireRequest) -> Result<Command, Refusal> {
        use Command::*;
        if w.reserved.get() != 0 {
            return Err(Refusal::Malformed);
        }
        let a: [u64; 7] = w.args.map(|x| x.get());
        // How many argument words each command uses; the rest must be 0.
        let op = Opcode::from_code(w.opcode.get()).ok_or(Refusal::Malformed)?;
        let (c, used) = match op {
            Opcode::OpenDevice => (OpenDevice, 0),
            Opcode::QueryDevice => (QueryDevice, 0),
            Opcode::QueryPort => {
                if a[0] != 1 {
                    return Err(Refusal::Malformed);
                }
                (QueryPort { port: 1 }, 1)
            }
            Opcode::AllocPd => (AllocPd, 0),
            Opcode::FreePd => (FreePd { pd: handle(a[0])? }, 1),
            Opcode::RegMr => {
                if a[2] == 0 || a[3] > u64::from(access::ALL) {
                    return Err(Refusal::Malformed);
                }
                (
                    RegMr {
                        pd: handle(a[0])?,
                        addr: a[1],
                        len: a[2],
                        access: a[3] as u32,
                    },
                    4,
                )
            }
            Opcode::DeregMr => (DeregMr { mr: handle(a[0])? }, 1),
            Opcode::CreateCq => (
                CreateCq {
                    cqe: bounded(a[0], MAX_CQE)?,
                    mr: handle(a[1])?,
                    offset: a[2],
                },
                3,
            ),
            Opcode::DestroyCq => (DestroyCq { cq: handle(a[0])? }, 1),
            Opcode::CreateQp => {
                // Word 3: the transport in its low byte, the buffer's
                // offset in the region above it.
                let qp_type = match a[3] & 0xFF {
                    2 => QpType::Rc,
                    4 => QpType::Ud,
                    _ => return Err(Refusal::Malformed),
                };
                (
                    CreateQp {
                        pd: handle(a[0])?,
                        send_cq: handle(a[1])?,
                        recv_cq: handle(a[2])?,
                        qp_type,
                        max_send_wr: bounded(a[4], MAX_WR)?,
                        max_recv_wr: bounded(a[5], MAX_WR)?,
                        mr: handle(a[6])?,
                        offset: a[3] >> 8,
                    },
                    7,
                )
            }
            Opcode::ModifyQp => {
                let state = match a[1] {
                    0 => QpState::Reset,
                    1 => QpState::Init,
                    2 => QpState::Rtr,
                    3 => QpState::Rts,
                    6 => QpState::Err,
                    _ => return Err(Refusal::Malformed),
                };
                if a[2] >= 1 << 24 || a[3] > 0xFFFF {
                    return Err(Refusal::Malformed);
                }
                (
                    ModifyQp {
                        qp: handle(a[0])?,
                        state,
                        dest_qpn: a[2] as u32,
                        dlid: a[3] as u16,
                    },
                    4,
                )
            }
            Opcode::DestroyQp => (DestroyQp { qp: handle(a[0])? }, 1),
            Opcode::AllocUar => (AllocUar, 0),
            Opcode::ReqNotifyCq => {
                if a[1] > 1 {
                    return Err(Refusal::Malformed);
                }
                (
                    ReqNotifyCq {
                        cq: handle(a[0])?,
                        solicited: a[1] == 1,
                    },
                    2,
                )
            }
            Opcode::SendMad => {
                if a[0] > 1 {
                    return Err(Refusal::Malformed);
                }
                (
                    SendMad {
                        qpn: a[0] as u32,
                        addr: a[1],
                    },
                    2,
                )
            }
        };
        if a[used..].iter().any(|&x| x != 0) {
            return Err(Refusal::Malformed);
        }
        Ok(c)
    }

    /// The request's bytes, with sequence number `seq`.
    pub fn encode(&self, seq: u32) -> [u8; MSG_SIZE] {
        use Command::*;
        let (op, a): (Opcode, [u64; 7]) = match *self {
            OpenDevice => (Opcode::OpenDevice, [0; 7]),
            QueryDevice => (Opcode::QueryDevice, [0; 7]),
            QueryPort { port } => (Opcode::QueryPort, [u64::from(port), 0, 0, 0, 0, 0, 0]),
            AllocPd => (Opcode::AllocPd, [0; 7]),
            FreePd { pd } => (Opcode::FreePd, [pd.0, 0, 0, 0, 0, 0, 0]),
            RegMr {
                pd,
                addr,
                len,
                access,
            } => (Opcode::RegMr, [pd.0, addr, len, u64::from(access), 0, 0, 0]),
            DeregMr { mr } => (Opcode::DeregMr, [mr.0, 0, 0, 0, 0, 0, 0]),
            CreateCq { cqe, mr, offset } => {
                (Opcode::CreateCq, [u64::from(cqe), mr.0, offset, 0, 0, 0, 0])
            }
            DestroyCq { cq } => (Opcode::DestroyCq, [cq.0, 0, 0, 0, 0, 0, 0]),
            CreateQp {
                pd,
                send_cq,
                recv_cq,
                qp_type,
                max_send_wr,
                max_recv_wr,
                mr,
                offset,
            } => (
                Opcode::CreateQp,
                [
                    pd.0,
                    send_cq.0,
                    recv_cq.0,
                    (offset << 8) | qp_type as u64,
                    u64::from(max_send_wr),
                    u64::from(max_recv_wr),
                    mr.0,
                ],
            ),
            ModifyQp {
                qp,
                state,
                dest_qpn,
                dlid,
            } => (
                Opcode::ModifyQp,
                [
                    qp.0,
                    state as u64,
                    u64::from(dest_qpn),
                    u64::from(dlid),
                    0,
                    0,
                    0,
                ],
            ),
            DestroyQp { qp } => (Opcode::DestroyQp, [qp.0, 0, 0, 0, 0, 0, 0]),
            AllocUar => (Opcode::AllocUar, [0; 7]),
            ReqNotifyCq { cq, solicited } => (
                Opcode::ReqNotifyCq,
                [cq.0, u64::from(solicited), 0, 0, 0, 0, 0],
            ),
            SendMad { qpn, addr } => (Opcode::SendMad, [u64::from(qpn), addr, 0, 0, 0, 0, 0]),
        };
        let w = WireRequest {
            opcode: U16::new(op as u16),
            reserved: U16::new(0),
            seq: U32::new(seq),
            args: a.map(U64::new),
        };
        let mut b = [0u8; MSG_SIZE];
        b.copy_from_slice(w.as_bytes());
        b
    }
}

/// A response: success with up to seven values, or a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// The request's sequence number.
    pub seq: u32,
    /// The values, or why the request was refused.
    pub result: Result<[u64; 7], Refusal>,
}

impl Response {
    /// The response's bytes.
    pub fn encode(&self) -> [u8; MSG_SIZE] {
        let (status, vals) = match self.result {
            Ok(v) => (0, v),
            Err(r) => (r as u32, [0; 7]),
        };
        let w = WireResponse {
            seq: U32::new(self.seq),
            status: U32::new(status),
            vals: vals.map(U64::new),
        };
        let mut b = [0u8; MSG_SIZE];
        b.copy_from_slice(w.as_bytes());
        b
    }

    /// Decodes a response (a frontend trusts its backend, but still refuses
    /// a status it does not know).
    pub fn decode(bytes: &[u8]) -> Option<Response> {
        let w = WireResponse::read_from_bytes(bytes).ok()?;
        let result = match w.status.get() {
            0 => Ok(w.vals.map(|x| x.get())),
            c => Err(Refusal::from_code(c)?),
        };
        Some(Response {
            seq: w.seq.get(),
            result,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Command> {
        let h = Handle::new(3, 7);
        vec![
            Command::OpenDevice,
            Command::QueryDevice,
            Command::QueryPort { port: 1 },
            Command::AllocPd,
            Command::FreePd { pd: h },
            Command::RegMr {
                pd: h,
                addr: 0x1000,
                len: 4096,
                access: access::ALL,
            },
            Command::DeregMr { mr: h },
            Command::CreateCq {
                cqe: 64,
                mr: h,
                offset: 128,
            },
            Command::DestroyCq { cq: h },
            Command::CreateQp {
                pd: h,
                send_cq: h,
                recv_cq: h,
                qp_type: QpType::Ud,
                max_send_wr: 16,
                max_recv_wr: 32,
                mr: h,
                offset: 4096,
            },
            Command::ModifyQp {
                qp: h,
                state: QpState::Rtr,
                dest_qpn: 0x12,
                dlid: 7,
            },
            Command::DestroyQp { qp: h },
            Command::AllocUar,
            Command::ReqNotifyCq {
                cq: h,
                solicited: true,
            },
            Command::SendMad { qpn: 1, addr: 8 },
        ]
    }

    #[test]
    fn every_command_round_trips() {
        for (i, c) in samples().into_iter().enumerate() {
            let b = c.encode(i as u32 + 100);
            assert_eq!(Command::decode(&b), Ok((i as u32 + 100, c)), "{c:?}");
        }
    }

    #[test]
    fn codes_name_their_variants() {
        for o in Opcode::ALL {
            assert_eq!(Opcode::from_code(o as u16), Some(o));
        }
        for r in Refusal::ALL {
            assert_eq!(Refusal::from_code(r as u32), Some(r));
        }
        assert_eq!(Opcode::from_code(0), None);
        assert_eq!(Refusal::from_code(0), None);
    }

    #[test]
    fn bad_bytes_are_malformed() {
        let good = Command::AllocPd.encode(5);
        // Short and long.
        assert_eq!(Command::decode(&good[..63]), Err((0, Refusal::Malformed)));
        let mut long = good.to_vec();
        long.push(0);
        assert_eq!(Command::decode(&long), Err((0, Refusal::Malformed)));
        // Unknown opcodes, reserved bits, stray argument words.
        for op in [0u16, 16, 0xFFFF] {
            let mut b = good;
            b[0..2].copy_from_slice(&op.to_le_bytes());
            assert_eq!(Command::decode(&b), Err((5, Refusal::Malformed)), "{op}");
        }
        let mut b = good;
        b[2] = 1;
        assert_eq!(Command::decode(&b), Err((5, Refusal::Malformed)));
        for word in 0..7 {
            let mut b = good;
            b[8 + 8 * word] = 1;
            assert_eq!(Command::decode(&b), Err((5, Refusal::Malformed)), "{word}");
        }
    }

    #[test]
    fn guest_sizes_are_bounded_at_decode() {
        let h = Handle::new(1, 1);
        let cq = |cqe: u32| {
            Command::CreateCq {
                cqe,
                mr: h,
                offset: 0,
            }
            .encode(1)
        };
        assert!(Command::decode(&cq(MAX_CQE)).is_ok());
        assert_eq!(
            Command::decode(&cq(MAX_CQE + 1)),
            Err((1, Refusal::Malformed))
        );
        assert_eq!(Command::decode(&cq(0)), Err((1, Refusal::Malformed)));
        let mut b = cq(1);
        b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Command::decode(&b), Err((1, Refusal::Malformed)));
        let qp = |send: u32, recv: u32| {
            Command::CreateQp {
                pd: h,
                send_cq: h,
                recv_cq: h,
                qp_type: QpType::Rc,
                max_send_wr: send,
                max_recv_wr: recv,
                mr: h,
                offset: 0,
            }
            .encode(2)
        };
        assert!(Command::decode(&qp(MAX_WR, MAX_WR)).is_ok());
        assert!(Command::decode(&qp(MAX_WR + 1, 1)).is_err());
        assert!(Command::decode(&qp(1, 0)).is_err());
        // Handle 0 (index or generation) is never valid.
        let zero = Command::FreePd { pd: Handle(0) }.encode(3);
        assert_eq!(Command::decode(&zero), Err((3, Refusal::Malformed)));
        let no_gen = Command::FreePd {
            pd: Handle::new(4, 0),
        }
        .encode(3);
        assert_eq!(Command::decode(&no_gen), Err((3, Refusal::Malformed)));
    }

    #[test]
    fn responses_round_trip_and_unknown_status_is_refused() {
        let ok = Response {
            seq: 9,
            result: Ok([1, 2, 3, 4, 5, 6, 7]),
        };
        assert_eq!(Response::decode(&ok.encode()), Some(ok));
        let no = Response {
            seq: 10,
            result: Err(Refusal::Busy),
        };
        assert_eq!(Response::decode(&no.encode()), Some(no));
        let mut b = no.encode();
        b[4] = 200;
        assert_eq!(Response::decode(&b), None);
    }
}
