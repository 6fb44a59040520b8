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
        let mut m = self.head.clone();
        let first = n == 1;
        let last = n == self.segments;
        let start = (n as usize - 1) * SA_DATA_SIZE;
        let end = (start + SA_DATA_SIZE).min(self.data.len());
        m.data = [0; SA_DATA_SIZE];
        if start < end {
            m.data[..end - start].copy_from_slice(&self.data[start..end]);
        }
        // PayloadLength: in the first segment the whole transfer (the SA
        // header once per segment, and the data); in the last, what the
        // last holds; 0 in between.
        let payload = if first {
            SA_HEADER * self.segments as usize + self.data.len()
        } else if last {
            SA_HEADER + (end - start)
        } else {
            0
        };
        m.rmpp = RmppHeader {
            version: 1,
            rmpp_type: RmppType::Data,
            resp_time: RMPP_NO_RESP_TIME,
            flags: RMPP_ACTIVE
                | if first { RMPP_FIRST } else { 0 }
                | if last { RMPP_LAST } else { 0 },
            status: RmppStatus::Ok,
            segment_number: n,
            payload_length_or_window: payload as u32,
        };
        (m.to_bytes(), 56 + end.saturating_sub(start))
    }
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
        self.map.remove(k);
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
            t.window = t.segments;
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
fn abort(head: &SaMad, status: RmppStatus) -> [u8; 256] {
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
