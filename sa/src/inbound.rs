//! Requests that come in several RMPP segments: the SA as an RMPP receiver
//! (IBA 13.6.5). A GetMulti(MultiPathRecord) with more GIDs than one MAD
//! holds is sent so, and a kernel's RMPP layer may segment any request.
//! Each requester's transfer is reassembled by a [`Receiver`] (segments in
//! order, each window acknowledged, a duplicate or early one answered with
//! the ACK of what is held, ABORT for a segment that contradicts the
//! transfer), bounded in bytes and in number, and forgotten when its
//! sender goes quiet. Its ACKs carry the request's method with the
//! response bit set, as the Linux kernel's RMPP sends them, so that a
//! transport that routes responses by transaction ID takes them back to
//! the requester.

use crate::rmpp::{Received, Receiver, TransferKey};
use crate::SaConfig;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use mad_core::sa::{RmppStatus, SaMad};

/// Segments a requester may send ahead of the SA's last ACK.
pub const REQUEST_WINDOW: u32 = 8;

/// One request being received.
#[derive(Clone, Debug)]
struct Entry {
    rx: Receiver,
    /// When it is dropped if no segment comes.
    deadline: u64,
}

/// What one segment of a request did. (The request's first headers
/// travel inside it once, when it is whole; boxing them would buy
/// nothing.)
#[allow(clippy::large_enum_variant)]
pub enum Step {
    /// More is to come: send this ACK (when there is one).
    More(Option<[u8; 256]>),
    /// The request is whole: its first segment's headers and all its
    /// data; send the ACK of the last segment first.
    Done {
        /// The first segment.
        head: SaMad,
        /// The request's data, every segment's in order.
        data: Vec<u8>,
        /// The ACK of the last segment.
        ack: Option<[u8; 256]>,
    },
    /// The transfer failed: send this ABORT (when there is one).
    Failed(Option<[u8; 256]>),
    /// A first segment while `max_transfers` requests are being received:
    /// send this ABORT (resources exhausted).
    Full([u8; 256]),
    /// A later segment of no transfer in progress (its first was never
    /// seen, or the transfer ended): dropped.
    Unknown,
}

/// The requests being received.
#[derive(Clone, Debug, Default)]
pub struct Inbound {
    map: BTreeMap<TransferKey, Entry>,
}

/// A MAD of the SA's, from the SA to a requester's RMPP layer: the
/// response bit of the request's method set.
fn toward_requester(mut b: [u8; 256]) -> [u8; 256] {
    b[3] |= 0x80;
    b
}

impl Inbound {
    /// Requests being received.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True for a segment of a request in several: RMPP active, a DATA
    /// segment, not both first and last. A request flagged active with
    /// neither First nor Last and no segment past the first is one MAD
    /// whose sender left the flags to a kernel RMPP layer it does not
    /// have (osmtest's GetMulti through libumad2sim): not segmented.
    pub fn is_segment(m: &SaMad) -> bool {
        let r = &m.rmpp;
        r.active()
            && r.version != 0
            && r.rmpp_type == mad_core::sa::RmppType::Data
            && !(r.first() && r.last())
            && (r.first() || r.last() || r.segment_number > 1)
    }

    /// Takes one segment of the request `key`.
    pub fn segment(&mut self, key: TransferKey, m: &SaMad, now_ms: u64, cfg: &SaConfig) -> Step {
        let hold = cfg.rmpp_timeout_ms * (u64::from(cfg.rmpp_retries) + 1);
        if m.rmpp.first() && m.rmpp.segment_number == 1 {
            // A first segment (re)starts the transfer.
            self.map.remove(&key);
            if self.map.len() >= cfg.max_transfers {
                let a = crate::rmpp::abort(m, RmppStatus::ResourcesExhausted);
                return Step::Full(toward_requester(a));
            }
            self.map.insert(
                key,
                Entry {
                    rx: Receiver::new(REQUEST_WINDOW, cfg.max_request_bytes),
                    deadline: now_ms + hold,
                },
            );
        }
        let Some(e) = self.map.get_mut(&key) else {
            return Step::Unknown;
        };
        e.deadline = now_ms + hold;
        match e.rx.on_mad(m) {
            Received::More(ack) => Step::More(ack.map(toward_requester)),
            Received::Done {
                head, data, ack, ..
            } => {
                self.map.remove(&key);
                Step::Done {
                    head,
                    data,
                    ack: ack.map(toward_requester),
                }
            }
            Received::Failed(_, abort) => {
                self.map.remove(&key);
                Step::Failed(abort.map(toward_requester))
            }
        }
    }

    /// The requester stopped or aborted its request `key`: true when it
    /// was being received.
    pub fn end(&mut self, key: &TransferKey) -> bool {
        self.map.remove(key).is_some()
    }

    /// When the next quiet transfer is to be dropped.
    pub fn next_deadline(&self) -> Option<u64> {
        self.map.values().map(|e| e.deadline).min()
    }

    /// Drops the transfers whose sender went quiet; how many.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let before = self.map.len();
        self.map.retain(|_, e| e.deadline > now_ms);
        before - self.map.len()
    }
}
