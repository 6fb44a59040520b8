//! RMPP (IBA 13.6) on the sending side, done by the SA itself: an answer
//! longer than one MAD is cut into 200-byte segments, each carrying the SA
//! header again; segments go out up to the receiver's window (one segment
//! until its first ACK), each ACK moves the window, a window whose ACK is
//! late is sent again, and after the retries the transfer is aborted. The
//! receiver's STOP or ABORT ends it.

use crate::{Addr, SaConfig, SaStats, Transmit};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use mad_core::sa::{
    RmppHeader, RmppStatus, RmppType, SaMad, RMPP_ACTIVE, RMPP_FIRST, RMPP_LAST, RMPP_NO_RESP_TIME,
    SA_DATA_SIZE,
};

/// Bytes of a MAD.
const MAD_BYTES: usize = 256;
/// Bytes of the SA header counted in every segment's payload.
const SA_HEADER: usize = 20;

/// A transfer: to whom, and the request it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TransferKey {
    /// The requester.
    pub to: Addr,
    /// The request's transaction ID.
    pub tid: u64,
}

/// One answer on its way.
#[derive(Clone, Debug)]
pub struct Transfer {
    /// The response's headers (the RMPP header is set per segment).
    head: SaMad,
    /// All records, padded.
    data: Vec<u8>,
    /// Segments in all.
    segments: u32,
    /// The last segment acknowledged.
    acked: u32,
    /// The last segment sent.
    sent: u32,
    /// The receiver's window: the last segment it will take.
    window: u32,
    /// When the window's ACK is due.
    deadline: u64,
    /// Times the window was sent again.
    retries: u32,
}

impl Transfer {
    /// Segment `n` (from 1) as a MAD, and the bytes that carry something.
    fn segment(&self, n: u32) -> ([u8; 256], usize) {
        let m = segment(&self.head, &self.data, self.segments, n);
        let start = (n as usize - 1) * SA_DATA_SIZE;
        let end = (start + SA_DATA_SIZE).min(self.data.len());
        (m.to_bytes(), 56 + end.saturating_sub(start))
    }
}

/// Segment `n` (from 1) of the `segments` that carry `data` on `head`'s
/// headers, as an RMPP sender cuts them (IBA 13.6.2.3): 200 bytes of SA
/// data each; PayloadLength the whole transfer in the first (the SA header
/// once per segment, and the data), what the last holds in the last, 0
/// in between.
fn segment(head: &SaMad, data: &[u8], segments: u32, n: u32) -> SaMad {
    let mut m = head.clone();
    let (first, last) = (n == 1, n == segments);
    let start = (n as usize - 1) * SA_DATA_SIZE;
    let end = (start + SA_DATA_SIZE).min(data.len());
    m.data = [0; SA_DATA_SIZE];
    if start < end {
        m.data[..end - start].copy_from_slice(&data[start..end]);
    }
    let payload = if first {
        SA_HEADER * segments as usize + data.len()
    } else if last {
        SA_HEADER + end.saturating_sub(start)
    } else {
        0
    };
    m.rmpp = RmppHeader {
        version: 1,
        rmpp_type: RmppType::Data,
        resp_time: RMPP_NO_RESP_TIME,
        flags: RMPP_ACTIVE | if first { RMPP_FIRST } else { 0 } | if last { RMPP_LAST } else { 0 },
        status: RmppStatus::Ok,
        segment_number: n,
        payload_length_or_window: payload as u32,
    };
    m
}

/// The transfers in progress.
#[derive(Clone, Debug, Default)]
pub struct Transfers {
    map: BTreeMap<TransferKey, Transfer>,
}

impl Transfers {
    /// In progress.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// None in progress.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// This one is in progress.
    pub fn contains(&self, k: &TransferKey) -> bool {
        self.map.contains_key(k)
    }
    /// Drops a transfer (its requester asked again).
    pub fn remove(&mut self, k: &TransferKey) {
        // Most questions find none: a Get never starts one.
        if !self.map.is_empty() {
            self.map.remove(k);
        }
    }
    /// Bytes the transfers hold: all of them, and those to the
    /// requesters whose LIDs `mine` picks.
    pub fn bytes(&self, mine: impl Fn(mad_core::Lid) -> bool) -> (usize, usize) {
        self.map.iter().fold((0, 0), |(all, held), (k, t)| {
            let n = t.data.len();
            (all + n, held + if mine(k.to.lid) { n } else { 0 })
        })
    }
    /// The earliest ACK due.
    pub fn next_deadline(&self) -> Option<u64> {
        self.map.values().map(|t| t.deadline).min()
    }

    /// Starts a transfer of `data` with headers `head`: sends its first
    /// window (one segment).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        key: TransferKey,
        head: SaMad,
        data: Vec<u8>,
        now_ms: u64,
        cfg: &SaConfig,
        out: &mut dyn FnMut(Transmit),
        stats: &mut SaStats,
    ) {
        let segments = data.len().div_ceil(SA_DATA_SIZE).max(1) as u32;
        let mut t = Transfer {
            head,
            data,
            segments,
            acked: 0,
            sent: 0,
            window: 1,
            deadline: now_ms + cfg.rmpp_timeout_ms,
            retries: 0,
        };
        if !cfg.rmpp_acks {
            t.window = if cfg.first_segment_to_qp1 && key.to.qpn == 1 {
                1
            } else {
                t.segments
            };
            send_window(key.to, &mut t, out, stats);
            stats.transfers_done += 1;
            return;
        }
        send_window(key.to, &mut t, out, stats);
        self.map.insert(key, t);
    }

    /// An RMPP response from the receiver of `key`'s transfer: an ACK
    /// moves the window on (or ends the transfer); STOP and ABORT end it.
    /// False when it belongs to no transfer.
    pub fn on_response(
        &mut self,
        key: TransferKey,
        m: &SaMad,
        now_ms: u64,
        cfg: &SaConfig,
        out: &mut dyn FnMut(Transmit),
        stats: &mut SaStats,
    ) -> bool {
        let Some(t) = self.map.get_mut(&key) else {
            return false;
        };
        if !m.rmpp.active() {
            return false;
        }
        match m.rmpp.rmpp_type {
            RmppType::Ack => {
                let seg = m.rmpp.segment_number;
                let window = m.rmpp.payload_length_or_window;
                // An ACK for what was never sent, or a window that
                // shrinks below it, is the receiver's error: abort.
                if seg > t.sent || window < seg {
                    let bad = if seg > t.sent {
                        RmppStatus::SegmentTooBig
                    } else {
                        RmppStatus::WindowTooSmall
                    };
                    out(Transmit {
                        to: key.to,
                        mad: abort(&t.head, bad),
                        len: 256,
                    });
                    stats.transfers_aborted += 1;
                    self.map.remove(&key);
                    return true;
                }
                if seg >= t.segments {
                    stats.transfers_done += 1;
                    self.map.remove(&key);
                    return true;
                }
                if seg > t.acked {
                    t.acked = seg;
                    t.retries = 0;
                }
                t.window = t.window.max(window).min(t.segments);
                t.deadline = now_ms + cfg.rmpp_timeout_ms;
                send_window(key.to, t, out, stats);
            }
            RmppType::Stop | RmppType::Abort => {
                stats.transfers_aborted += 1;
                self.map.remove(&key);
            }
            _ => return false,
        }
        true
    }

    /// Windows whose ACK is late go again; transfers out of retries are
    /// aborted.
    pub fn timeout(
        &mut self,
        now_ms: u64,
        cfg: &SaConfig,
        out: &mut dyn FnMut(Transmit),
        stats: &mut SaStats,
    ) {
        let due: Vec<TransferKey> = self
            .map
            .iter()
            .filter(|(_, t)| t.deadline <= now_ms)
            .map(|(k, _)| *k)
            .collect();
        for k in due {
            let Some(t) = self.map.get_mut(&k) else {
                continue;
            };
            if t.retries >= cfg.rmpp_retries {
                out(Transmit {
                    to: k.to,
                    mad: abort(&t.head, RmppStatus::TooManyRetries),
                    len: 256,
                });
                stats.transfers_aborted += 1;
                self.map.remove(&k);
                continue;
            }
            t.retries += 1;
            t.sent = t.acked;
            t.deadline = now_ms + cfg.rmpp_timeout_ms;
            let before = stats.segments;
            send_window(k.to, t, out, stats);
            stats.retries += stats.segments - before;
        }
    }
}

/// `head` with all of `data` as RMPP DATA segments, cut as the SA cuts
/// its answers (200 bytes of SA data each; PayloadLength the whole
/// transfer in the first, what the last holds in the last). A client
/// sends a request that does not fit one MAD so.
pub fn data_segments(head: &SaMad, data: &[u8]) -> Vec<SaMad> {
    let n = data.len().div_ceil(SA_DATA_SIZE).max(1) as u32;
    (1..=n).map(|i| segment(head, data, n, i)).collect()
}

/// Sends the segments after the last sent, up to the window.
fn send_window(to: Addr, t: &mut Transfer, out: &mut dyn FnMut(Transmit), stats: &mut SaStats) {
    while t.sent < t.window.min(t.segments) {
        t.sent += 1;
        stats.segments += 1;
        let (mad, len) = t.segment(t.sent);
        out(Transmit { to, mad, len });
    }
}

/// An RMPP ABORT for the transfer of `head`, with `status`.
pub(crate) fn abort(head: &SaMad, status: RmppStatus) -> [u8; 256] {
    let mut m = head.clone();
    m.data = [0; SA_DATA_SIZE];
    m.rmpp = RmppHeader {
        version: 1,
        rmpp_type: RmppType::Abort,
        resp_time: RMPP_NO_RESP_TIME,
        flags: RMPP_ACTIVE,
        status,
        segment_number: 0,
        payload_length_or_window: 0,
    };
    m.to_bytes()
}

/// Why a receiver gave up on an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiveError {
    /// The sender aborted the transfer, with this status.
    Aborted(RmppStatus),
    /// The sender said STOP (a receiver's word: the sender is confused).
    Stopped,
    /// The first segment's payload length, or the data gathered, passes
    /// the receiver's bound: it aborts rather than hold it.
    TooLarge {
        /// Bytes the transfer claims or reached.
        bytes: u64,
        /// The bound.
        max: usize,
    },
    /// A segment contradicts the transfer: a first segment numbered other
    /// than 1, a last one whose length disagrees, a DATA packet without
    /// RMPP active. Carries the status the receiver aborts with.
    Inconsistent(RmppStatus),
}

impl core::fmt::Display for ReceiveError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReceiveError::Aborted(s) => write!(f, "the sender aborted the transfer ({s:?})"),
            ReceiveError::Stopped => write!(f, "the sender sent STOP"),
            ReceiveError::TooLarge { bytes, max } => {
                write!(f, "the answer is {bytes} bytes, more than the {max} taken")
            }
            ReceiveError::Inconsistent(s) => write!(f, "inconsistent RMPP segment ({s:?})"),
        }
    }
}

/// What a receiver does with one MAD of an answer. (The whole answer's
/// first headers travel inside it once, at its end; boxing them would buy
/// nothing.)
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Received {
    /// More is to come; send this ACK first when there is one.
    More(Option<[u8; 256]>),
    /// The answer is whole: its first MAD's headers and its data (the
    /// records, padded to AttributeOffset words each). Send the ACK of
    /// the last segment when there is one.
    Done {
        /// The headers of the answer's first MAD (status, method,
        /// AttributeOffset, ComponentMask).
        head: SaMad,
        /// The data of all segments, without the padding after the last
        /// record.
        data: Vec<u8>,
        /// The ACK of the last segment.
        ack: Option<[u8; 256]>,
        /// The answer was cut on its way: its first MAD arrived with RMPP
        /// flagged but never filled in, and part of a record after the
        /// whole ones (`data` holds those).
        cut: bool,
    },
    /// The transfer failed; send this ABORT when there is one.
    Failed(ReceiveError, Option<[u8; 256]>),
}

/// The receiving side of RMPP (IBA 13.6.5), for a client of the SA: one
/// answer, its segments taken in order, each window acknowledged, a
/// duplicate or early segment answered with the ACK of what is held (so
/// the sender resends from there), ABORT and STOP honoured. An answer that
/// is not RMPP (a Get's response) is whole at once. Holds no more than
/// `max_bytes` of data whatever the sender claims.
#[derive(Clone, Debug)]
pub struct Receiver {
    head: Option<SaMad>,
    data: Vec<u8>,
    /// The last segment taken in order.
    have: u32,
    /// The segments the window lets the sender send past `have`.
    window: u32,
    /// The last segment of the window the receiver last announced.
    window_last: u32,
    max_bytes: usize,
}

impl Receiver {
    /// A receiver that lets the sender run `window` segments ahead (at
    /// least 1) and holds at most `max_bytes` of data.
    pub fn new(window: u32, max_bytes: usize) -> Receiver {
        Receiver {
            head: None,
            data: Vec::new(),
            have: 0,
            window: window.max(1),
            window_last: 0,
            max_bytes,
        }
    }

    /// Segments taken so far.
    pub fn segments(&self) -> u32 {
        self.have
    }

    /// The headers of the first segment and the data gathered, for a
    /// caller that gives up waiting and shows what it has.
    pub fn partial(&self) -> Option<(&SaMad, &[u8])> {
        self.head.as_ref().map(|h| (h, &self.data[..]))
    }

    /// An ACK of segment `seg` opening the window to `last`, on the
    /// headers of `m`.
    fn ack(m: &SaMad, seg: u32, last: u32) -> [u8; 256] {
        let mut a = m.clone();
        a.data = [0; SA_DATA_SIZE];
        a.sa = Default::default();
        a.rmpp = RmppHeader {
            version: 1,
            rmpp_type: RmppType::Ack,
            resp_time: RMPP_NO_RESP_TIME,
            flags: RMPP_ACTIVE,
            status: RmppStatus::Ok,
            segment_number: seg,
            payload_length_or_window: last,
        };
        a.to_bytes()
    }

    /// Takes one MAD of the answer (one already matched to the request by
    /// its transaction ID).
    pub fn on_mad(&mut self, m: &SaMad) -> Received {
        self.on_mad_len(m, MAD_BYTES)
    }

    /// [`Receiver::on_mad`] for a transport that says how many bytes its
    /// sender sent (`len`, 256 when it does not know). Only a single-MAD
    /// answer uses it: an answer handed to a kernel's RMPP that a
    /// transport without RMPP delivers as one MAD is whole when its sender
    /// sent less than a MAD.
    pub fn on_mad_len(&mut self, m: &SaMad, len: usize) -> Received {
        if !m.rmpp.active() || m.rmpp.version == 0 {
            // A single-MAD answer. RMPP flagged active in a header nobody
            // filled (version 0) is an answer its sender handed to its
            // kernel's RMPP, of which a transport without RMPP
            // (libumad2sim) delivers the first MAD only, with no length:
            // its records are the whole non-zero ones, and it was cut
            // when part of a record follows them, or when records that
            // divide the MAD exactly fill it.
            let mut data = m.data.to_vec();
            let step = usize::from(m.sa.attribute_offset) * 8;
            let mut cut = false;
            if m.rmpp.active() && step > 0 {
                let whole = SA_DATA_SIZE / step * step;
                if len < MAD_BYTES {
                    // The sender's length is known and short: all of it
                    // arrived (what follows is not its).
                    data.truncate(len.saturating_sub(MAD_BYTES - SA_DATA_SIZE) / step * step);
                } else {
                    cut = data[whole..].iter().any(|&b| b != 0);
                    data.truncate(whole);
                    while data.len() >= step && data[data.len() - step..].iter().all(|&b| b == 0) {
                        data.truncate(data.len() - step);
                    }
                    // Records that divide the MAD exactly leave no partial
                    // one to tell by: a full MAD may have had more after it.
                    cut |= whole == SA_DATA_SIZE && data.len() == whole;
                }
            }
            return Received::Done {
                head: m.clone(),
                data,
                ack: None,
                cut,
            };
        }
        match m.rmpp.rmpp_type {
            RmppType::Data => {}
            RmppType::Abort => return Received::Failed(ReceiveError::Aborted(m.rmpp.status), None),
            RmppType::Stop => return Received::Failed(ReceiveError::Stopped, None),
            _ => {
                let e = ReceiveError::Inconsistent(RmppStatus::BadType);
                return Received::Failed(e, Some(abort(m, RmppStatus::BadType)));
            }
        }
        let seg = m.rmpp.segment_number;
        if seg != self.have + 1 {
            if seg == 0 || (m.rmpp.first() && seg != 1) {
                let e = ReceiveError::Inconsistent(RmppStatus::BadSegment);
                return Received::Failed(e, Some(abort(m, RmppStatus::BadSegment)));
            }
            // A duplicate (the sender did not see our ACK) or one ahead of
            // a lost segment: say again what is held.
            let ack = (self.have > 0).then(|| Self::ack(m, self.have, self.window_last));
            return Received::More(ack);
        }
        if seg == 1 {
            if !m.rmpp.first() {
                let e = ReceiveError::Inconsistent(RmppStatus::BadSegment);
                return Received::Failed(e, Some(abort(m, RmppStatus::BadSegment)));
            }
            // The whole payload: an SA header and 200 bytes of data a
            // segment.
            let claimed = u64::from(m.rmpp.payload_length_or_window);
            if claimed * SA_DATA_SIZE as u64 / (SA_HEADER + SA_DATA_SIZE) as u64
                > self.max_bytes as u64
            {
                let e = ReceiveError::TooLarge {
                    bytes: claimed,
                    max: self.max_bytes,
                };
                return Received::Failed(e, Some(abort(m, RmppStatus::ResourcesExhausted)));
            }
            self.head = Some(m.clone());
        }
        // What this segment adds: its whole data area, or what the last
        // says it holds (checked below), so that a transfer ending just
        // within the bound is taken.
        let adds = if m.rmpp.last() {
            (m.rmpp.payload_length_or_window as usize)
                .saturating_sub(SA_HEADER)
                .min(SA_DATA_SIZE)
        } else {
            SA_DATA_SIZE
        };
        if self.data.len() + adds > self.max_bytes {
            let e = ReceiveError::TooLarge {
                bytes: (self.data.len() + adds) as u64,
                max: self.max_bytes,
            };
            return Received::Failed(e, Some(abort(m, RmppStatus::ResourcesExhausted)));
        }
        self.data.extend_from_slice(&m.data);
        self.have = seg;
        if m.rmpp.last() {
            // The last segment says how much of it is payload: its SA
            // header and its data.
            let pl = m.rmpp.payload_length_or_window as usize;
            if !(SA_HEADER..=SA_HEADER + SA_DATA_SIZE).contains(&pl) {
                let e = ReceiveError::Inconsistent(RmppStatus::BadLength);
                return Received::Failed(e, Some(abort(m, RmppStatus::BadLength)));
            }
            self.data
                .truncate((seg as usize - 1) * SA_DATA_SIZE + pl - SA_HEADER);
            let ack = Self::ack(m, seg, seg);
            let head = self.head.take().unwrap_or_else(|| m.clone());
            return Received::Done {
                head,
                data: core::mem::take(&mut self.data),
                ack: Some(ack),
                cut: false,
            };
        }
        if seg >= self.window_last {
            self.window_last = seg + self.window;
            return Received::More(Some(Self::ack(m, seg, self.window_last)));
        }
        Received::More(None)
    }
}
