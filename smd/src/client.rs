//! A host's side of the SA: a class-0x03 agent on a umad port that asks
//! the SM's SA (at the SM LID its port knows) and matches the answers by
//! transaction ID. [`SaClient::load`] is `ibkit bench sa`'s load
//! generator: it keeps a window of SubnAdmGet(PathRecord) queries
//! outstanding for a while and measures what comes back.
//! [`SaClient::query`] is `ibkit sa`'s: one request, its answer gathered
//! through RMPP ([`sa::Receiver`]) however many segments it takes.

use crate::simport::SimPort;
use crate::{check_simulator, open_bounded, SmdError};
use mad_core::mad::Method;
use mad_core::notice::Notice;
use mad_core::sa::path::comp;
use mad_core::sa::{PathRecord, SaAttributeId, SaMad, SaRecord};
use sa::{Received, Receiver};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use verbs_sys::umad::{Agent, Dest, UmadPort, GSI_QKEY};

/// Where the PathRecord's SLID and DLID sit in the MAD: the SA data starts
/// at byte 56, and they are bytes 42 and 40 of the record.
const SLID_AT: usize = 56 + 42;
const DLID_AT: usize = 56 + 40;

/// A query not answered in this long is counted lost.
const LOST_AFTER: Duration = Duration::from_secs(1);

/// How a client reaches the fabric.
enum Transport {
    /// A umad port with a class-0x03 agent (a real HCA, or libumad2sim).
    Umad { port: UmadPort, agent: Agent },
    /// An ibsim-protocol simulator's socket, directly.
    Sim(SimPort),
}

/// A port of a host with an SA agent.
pub struct SaClient {
    transport: Transport,
    /// Under libumad2sim: the last 32 bytes of every MAD that arrives are
    /// not what was sent.
    tail_damaged: bool,
    /// The SM's LID, from the port.
    pub sm_lid: u16,
    /// This port's LID.
    pub lid: u16,
    /// This port's GUID.
    pub guid: u64,
    next_tid: u32,
}

/// What one [`SaClient::load`] run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LoadRun {
    /// Queries kept outstanding.
    pub window: usize,
    /// Queries sent.
    pub sent: u64,
    /// Answered with status 0 and the pair asked.
    pub answered: u64,
    /// Answered with another status, or another pair.
    pub refused: u64,
    /// Not answered within a second.
    pub lost: u64,
    /// Seconds from the first send to the last answer.
    pub seconds: f64,
    /// Answers a second.
    pub per_second: f64,
    /// Median latency, µs (send to answer, in this process).
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
}

/// The answer to one [`SaClient::query`].
#[derive(Clone, Debug)]
pub struct SaAnswer {
    /// The headers of the answer's first MAD: method, status,
    /// AttributeOffset.
    pub head: SaMad,
    /// The records' bytes, each padded to AttributeOffset words.
    pub data: Vec<u8>,
    /// MADs the answer came in.
    pub segments: u32,
    /// False when the transfer stalled before its last segment (the
    /// sender stopped sending), or a transport without RMPP delivered the
    /// first MAD of a longer answer: `data` is the whole records that
    /// arrived.
    pub complete: bool,
}

/// How a query is sent and its answer waited for.
#[derive(Clone, Copy, Debug)]
pub struct QueryOpts {
    /// Milliseconds to wait for the answer (or its next segment) before
    /// the request goes again.
    pub timeout_ms: u64,
    /// Times the request is sent before giving up.
    pub attempts: u32,
    /// Segments the SA may send ahead of the ACKs.
    pub window: u32,
    /// Bytes of answer held at most.
    pub max_bytes: usize,
    /// SM_Key presented (0: untrusted).
    pub sm_key: u64,
    /// Send RMPP ACKs. Off by default: through a umad agent an ACK never
    /// reaches the SA (a response is routed by the upper half of its TID,
    /// which names the requester's own agent, so ibsim and the kernel
    /// hand it back to us), and an SA that serves umad sends a whole
    /// answer at once. A lost segment then costs a new request.
    pub acks: bool,
    /// The request's attribute modifier: 0, or bit 31 for a
    /// PortInfoRecord question whose CapabilityMask bits are to be
    /// matched, not the whole value (as `saquery -s` asks).
    pub attribute_modifier: u32,
}

impl Default for QueryOpts {
    fn default() -> QueryOpts {
        QueryOpts {
            timeout_ms: 1000,
            attempts: 3,
            window: 64,
            max_bytes: 64 << 20,
            sm_key: 0,
            acks: false,
            attribute_modifier: 0,
        }
    }
}

impl SaClient {
    /// Asks the SA: `method` on `attr` with `record` (the template whose
    /// `mask`-selected components must match) and gathers the answer,
    /// ACKing its RMPP segments. A request with no answer goes again,
    /// `opts.attempts` times in all; a transfer that stalls past its first
    /// segment is returned incomplete.
    pub fn query(
        &mut self,
        method: Method,
        attr: SaAttributeId,
        mask: u64,
        record: &[u8],
        opts: QueryOpts,
    ) -> Result<SaAnswer, SmdError> {
        // The upper 32 bits of a TID are the umad layer's (the kernel
        // puts the agent there to route the answer back); only the lower
        // ones are ours to match.
        let tid = u64::from(self.next_tid);
        self.next_tid = self.next_tid.wrapping_add(1).max(1);
        let mut q = SaMad::request(method, attr, tid);
        q.sa.component_mask = mask;
        q.sa.sm_key = opts.sm_key;
        q.header.attribute_modifier.set(opts.attribute_modifier);
        let n = record.len().min(q.data.len());
        q.data[..n].copy_from_slice(&record[..n]);
        let req = q.to_bytes();
        // More than one MAD holds (a MultiPathRecord of many GIDs): the
        // request itself goes in RMPP segments.
        let segments = (record.len() > mad_core::sa::SA_DATA_SIZE).then(|| {
            (sa::rmpp::data_segments(&q, record).iter())
                .map(SaMad::to_bytes)
                .collect::<Vec<_>>()
        });
        let wait = Duration::from_millis(opts.timeout_ms);
        let mut best: Option<SaAnswer> = None;
        for _attempt in 0..opts.attempts.max(1) {
            // Each attempt gathers a fresh answer: the SA starts over on
            // a request it sees again.
            let mut rx = Receiver::new(opts.window, opts.max_bytes);
            match &segments {
                Some(segs) => {
                    if !self.send_segments(segs, tid as u32, wait)? {
                        continue;
                    }
                }
                None => self.send(&req)?,
            }
            let mut deadline = Instant::now() + wait;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                let Some((mad, len)) = self.recv(left.as_millis().max(1) as u64)? else {
                    continue;
                };
                let Ok(m) = SaMad::parse(&mad) else {
                    continue;
                };
                if m.header.transaction_id.get() as u32 != tid as u32 || !m.header.is_response() {
                    continue;
                }
                // A late ACK of our own request's segments.
                if m.rmpp.active() && m.rmpp.rmpp_type == mad_core::sa::RmppType::Ack {
                    continue;
                }
                deadline = Instant::now() + wait;
                let (step, reply) = match rx.on_mad_len(&m, len) {
                    Received::More(ack) => (None, ack),
                    Received::Done {
                        head,
                        data,
                        ack,
                        cut,
                    } => {
                        let a = SaAnswer {
                            head,
                            data,
                            segments: rx.segments().max(1),
                            complete: !cut,
                        };
                        (Some(Ok(a)), ack)
                    }
                    Received::Failed(e, abort) => (Some(Err(SmdError::SaTransfer(e))), abort),
                };
                if let (true, Some(a)) = (opts.acks, reply) {
                    self.send(&a)?;
                }
                if let Some(done) = step {
                    return done.and_then(|a| self.undamaged(a, record.len()));
                }
            }
            if let Some((head, data)) = rx.partial() {
                // Part of the answer came, then no more.
                if best.as_ref().is_none_or(|b| b.data.len() < data.len()) {
                    best = Some(SaAnswer {
                        head: head.clone(),
                        data: data.to_vec(),
                        segments: rx.segments(),
                        complete: false,
                    });
                }
            }
        }
        if let Some(b) = best {
            return self.undamaged(b, record.len());
        }
        Err(SmdError::SaTimeout {
            sm_lid: self.sm_lid,
            attempts: opts.attempts.max(1),
            ms: opts.timeout_ms,
        })
    }

    /// Sends a request's RMPP segments as the SA's ACKs let it: one,
    /// then each window the SA opens, until the SA has acknowledged the
    /// last. A window not acknowledged within `wait` goes again, once;
    /// false when the SA still says nothing. An ABORT or STOP of the SA's
    /// is the error it says.
    fn send_segments(
        &mut self,
        segs: &[[u8; 256]],
        tid: u32,
        wait: Duration,
    ) -> Result<bool, SmdError> {
        let n = segs.len() as u32;
        let (mut sent, mut acked, mut window) = (0u32, 0u32, 1u32);
        let mut resent = false;
        let mut deadline = Instant::now() + wait;
        while acked < n {
            while sent < window.min(n) {
                self.send(&segs[sent as usize])?;
                sent += 1;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if resent {
                    return Ok(false);
                }
                resent = true;
                sent = acked;
                deadline = Instant::now() + wait;
                continue;
            }
            let Some((mad, _)) = self.recv(left.as_millis().max(1) as u64)? else {
                continue;
            };
            let Ok(m) = SaMad::parse(&mad) else { continue };
            if m.header.transaction_id.get() as u32 != tid || !m.rmpp.active() {
                continue;
            }
            match m.rmpp.rmpp_type {
                mad_core::sa::RmppType::Ack => {
                    let seg = m.rmpp.segment_number.min(n);
                    if seg > acked {
                        acked = seg;
                        resent = false;
                        deadline = Instant::now() + wait;
                    }
                    window = window.max(m.rmpp.payload_length_or_window);
                }
                mad_core::sa::RmppType::Abort => {
                    return Err(SmdError::SaTransfer(sa::ReceiveError::Aborted(
                        m.rmpp.status,
                    )))
                }
                mad_core::sa::RmppType::Stop => {
                    return Err(SmdError::SaTransfer(sa::ReceiveError::Stopped))
                }
                _ => {}
            }
        }
        Ok(true)
    }

    /// The answer, unless the transport damaged it: through libumad2sim,
    /// data past byte 168 of a MAD's data area (MAD byte 224) is not what
    /// the SA sent.
    /// `size` is the record's: a single-MAD answer carries one.
    fn undamaged(&self, a: SaAnswer, size: usize) -> Result<SaAnswer, SmdError> {
        const GOOD: usize = 224 - mad_core::sa::SA_DATA_OFFSET;
        let table = matches!(a.head.method(), Method::GetTableResp | Method::GetMultiResp);
        let used = if table { a.data.len() } else { size };
        if self.tail_damaged && (a.segments > 1 || used > GOOD) {
            let step = usize::from(a.head.sa.attribute_offset) * 8;
            return Err(SmdError::SaDamaged {
                segments: a.segments,
                records: a.data.len().checked_div(step).unwrap_or(1),
            });
        }
        Ok(a)
    }

    /// Opens port `port` (0: the first active) of CA `ca` (`None`: the
    /// first) with an SA agent (class version 2, no kernel RMPP).
    pub fn open(ca: Option<String>, port: u8) -> Result<SaClient, SmdError> {
        SaClient::open_with(ca, port, false)
    }

    /// As [`SaClient::open`]; with `reports`, the agent also takes the
    /// SA's Reports (unsolicited, so one agent per port may).
    pub fn open_with(ca: Option<String>, port: u8, reports: bool) -> Result<SaClient, SmdError> {
        check_simulator()?;
        let mut port = open_bounded(ca, port, None, Duration::from_secs(20))?;
        // 0x06: SubnAdmReport.
        let methods: &[u8] = if reports { &[0x06] } else { &[] };
        let agent = port.register(0x03, sa::SA_CLASS_VERSION, methods)?;
        let (sm_lid, lid, guid) = (port.attr().sm_lid, port.attr().lid, port.attr().guid);
        Ok(SaClient {
            tail_damaged: std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("umad2sim")),
            transport: Transport::Umad { port, agent },
            sm_lid,
            lid,
            guid,
            next_tid: 1,
        })
    }

    /// Attaches to the ibsim-protocol simulator on socket base `base` at
    /// node `node` (`None`: its first CA), without libumad2sim (see
    /// [`crate::simport`] for why).
    pub fn attach_sim(base: &str, node: Option<&str>) -> Result<SaClient, SmdError> {
        SaClient::attach_sim_qp(base, node, 1)
    }

    /// As [`SaClient::attach_sim`], on QP `qp` (see
    /// [`SimPort::attach_qp`]: a client that subscribes to Reports needs
    /// a QP above 1 on ibsim).
    pub fn attach_sim_qp(base: &str, node: Option<&str>, qp: u32) -> Result<SaClient, SmdError> {
        let p = SimPort::attach_qp(base, node, qp)?;
        Ok(SaClient {
            sm_lid: p.sm_lid,
            lid: p.lid,
            guid: p.guid,
            transport: Transport::Sim(p),
            tail_damaged: false,
            next_tid: 1,
        })
    }

    /// Takes the SA's Reports until `until` or until `most` came: each
    /// is answered with its ReportResp and handed to `f` (the notice, and
    /// the issuer's GID that follows it). How many came.
    pub fn reports(
        &mut self,
        until: Instant,
        most: usize,
        f: &mut dyn FnMut(&Notice, &[u8; 16]),
    ) -> Result<usize, SmdError> {
        let mut n = 0;
        while n < most {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let Some((mad, _)) = self.recv(left.as_millis().max(1) as u64)? else {
                continue;
            };
            let Ok(m) = SaMad::parse(&mad) else {
                continue;
            };
            if m.method() != Method::Report || m.attribute_id() != SaAttributeId::Notice {
                continue;
            }
            let mut resp = m.clone();
            resp.header.method = Method::ReportResp.into();
            resp.header.status.set(0);
            self.send(&resp.to_bytes())?;
            let Ok(notice) = Notice::decode(&m.data[..64]) else {
                continue;
            };
            let mut issuer = [0u8; 16];
            issuer.copy_from_slice(&m.data[64..80]);
            n += 1;
            f(&notice, &issuer);
        }
        Ok(n)
    }

    fn send(&mut self, mad: &[u8]) -> Result<(), SmdError> {
        match &mut self.transport {
            Transport::Umad { port, agent } => {
                let to = Dest {
                    lid: self.sm_lid,
                    qpn: 1,
                    qkey: GSI_QKEY,
                    sl: 0,
                };
                Ok(port.send_to(*agent, mad, to, 0, 0)?)
            }
            Transport::Sim(p) => p.send(self.sm_lid, 1, mad),
        }
    }

    /// The next SA MAD for this client, waiting at most `ms`, with the
    /// bytes its sender sent (256 where the transport does not say).
    fn recv(&mut self, ms: u64) -> Result<Option<(Vec<u8>, usize)>, SmdError> {
        match &mut self.transport {
            Transport::Umad { port, agent } => {
                let ms = ms.clamp(1, i32::MAX as u64) as i32;
                Ok(port
                    .recv(ms)?
                    .filter(|r| r.agent == *agent && r.mad.len() >= 256)
                    .map(|r| (r.mad, 256)))
            }
            Transport::Sim(p) => Ok(p
                .recv(Duration::from_millis(ms))?
                .filter(|r| r.mad[1] == 0x03)
                .map(|r| (r.mad.to_vec(), r.len))),
        }
    }

    /// Keeps `window` SubnAdmGet(PathRecord) queries (SLID this port,
    /// DLID each of `dlids` in turn) outstanding for `seconds`, then waits
    /// for the last answers; each answer is checked (status 0, the pair
    /// asked) and timed.
    pub fn load(
        &mut self,
        dlids: &[u16],
        window: usize,
        seconds: f64,
    ) -> Result<LoadRun, SmdError> {
        if dlids.is_empty() || window == 0 {
            return Err(SmdError::Umad(verbs_sys::Error::BadArgument(
                "a load needs destinations and a window of at least 1".into(),
            )));
        }
        let mut q = SaMad::request(Method::Get, PathRecord::ID, 0);
        q.sa.component_mask = comp::SLID | comp::DLID;
        let mut mad = q.to_bytes();
        mad[SLID_AT..SLID_AT + 2].copy_from_slice(&self.lid.to_be_bytes());
        let mut out: HashMap<u32, (Instant, u16)> = HashMap::with_capacity(window * 2);
        let mut lat: Vec<u32> = Vec::new();
        let mut run = LoadRun {
            window,
            ..LoadRun::default()
        };
        let t0 = Instant::now();
        let stop_sending = t0 + Duration::from_secs_f64(seconds.max(0.0));
        let mut k = 0usize;
        let mut last = t0;
        loop {
            let now = Instant::now();
            if now < stop_sending {
                while out.len() < window {
                    let tid = self.next_tid;
                    self.next_tid = self.next_tid.wrapping_add(1).max(1);
                    let d = dlids[k % dlids.len()];
                    k += 1;
                    mad[12..16].copy_from_slice(&tid.to_be_bytes());
                    mad[DLID_AT..DLID_AT + 2].copy_from_slice(&d.to_be_bytes());
                    self.send(&mad)?;
                    out.insert(tid, (Instant::now(), d));
                    run.sent += 1;
                }
            } else if out.is_empty() {
                break;
            }
            if let Some((got, _)) = self.recv(50)? {
                let tid = u32::from_be_bytes([got[12], got[13], got[14], got[15]]);
                if let Some((sent, d)) = out.remove(&tid) {
                    let at = Instant::now();
                    last = at;
                    let ok = got[4..6] == [0, 0]
                        && got[DLID_AT..DLID_AT + 2] == d.to_be_bytes()
                        && got[SLID_AT..SLID_AT + 2] == self.lid.to_be_bytes();
                    if ok {
                        run.answered += 1;
                        lat.push((at - sent).as_nanos().min(u128::from(u32::MAX)) as u32);
                    } else {
                        run.refused += 1;
                    }
                }
            }
            let now = Instant::now();
            let before = out.len();
            out.retain(|_, (sent, _)| now.duration_since(*sent) < LOST_AFTER);
            run.lost += (before - out.len()) as u64;
        }
        run.seconds = last.duration_since(t0).as_secs_f64();
        run.per_second = if run.seconds > 0.0 {
            run.answered as f64 / run.seconds
        } else {
            0.0
        };
        lat.sort_unstable();
        let pct = |p: f64| {
            lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
                .map_or(0.0, |&ns| f64::from(ns) / 1e3)
        };
        run.p50_us = pct(0.50);
        run.p99_us = pct(0.99);
        Ok(run)
    }
}
