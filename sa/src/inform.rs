//! Event forwarding (IBA 13.4.8.3, 15.4): hosts subscribe with
//! Set(InformInfo) to the traps they want reported, and the SA sends each
//! matching notice to them as a Report, until they answer ReportResp.
//!
//! The SA reports:
//! * traps 64 and 65 (a port's GID came into service, went out of it),
//!   which the SA raises itself by comparing the ports in service each
//!   time the subnet is up or a node is lost (the subject port's GID in
//!   the details, the SM as the issuer);
//! * every trap the SM receives (128 from switches, 144, 129–131, the
//!   security traps 256–259 and the others), forwarded as it came, with the
//!   issuer's GID.
//!
//! Matching follows OpenSM's rules, with one extension: for traps 64 and
//! 65, a subscription's GID or LID range selects the port the trap is
//! about (OpenSM compares them with the SM's own, so a host cannot watch
//! one port come and go). Subscriptions to the security traps need the
//! SM_Key. A Report is sent again after `report_timeout_ms`, up to
//! `report_retries` times; a subscriber that never answers loses its
//! subscriptions, as does one whose port goes out of service. The SA
//! holds at most [`MAX_SUBSCRIPTIONS`] subscriptions ([`MAX_PER_SUBSCRIBER`]
//! per port) and [`MAX_PENDING`] unanswered Reports; a Report past that
//! bound is dropped and counted.
//!
//! Partitions are not applied yet (every port is in the default one), so
//! any port may subscribe to any other's events.

use crate::path::{end_by_gid, end_by_lid, every_end};
use crate::query::matches;
use crate::{Addr, SaConfig, SaStats, Transmit};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;
use mad_core::mad::Method;
use mad_core::notice::{Notice, NoticeType, ProducerType, TrapDetails, TrapGid};
use mad_core::sa::{InformInfo, InformInfoRecord, SaAttributeId, SaMad, SaStatus};
use mad_core::{Gid, Lid, MAD_SIZE};
use smi::sm::{NodeId, Subnet};

/// Subscriptions the SA holds at most.
pub const MAX_SUBSCRIPTIONS: usize = 4096;
/// Subscriptions one port holds at most.
pub const MAX_PER_SUBSCRIBER: usize = 64;
/// Reports waiting for their ReportResp at most.
pub const MAX_PENDING: usize = 4096;

/// Trap numbers of the security traps (bad M_Key, P_Key, Q_Key, switch
/// external P_Key), which only a trusted requester may subscribe to.
const SECURITY_TRAPS: core::ops::RangeInclusive<u16> = 256..=259;

/// One subscription.
#[derive(Clone, Debug)]
struct Subscription {
    /// The subscriber's port GID.
    subscriber: Gid,
    /// Which of its subscriptions.
    enumeration: u16,
    /// Where its Reports go.
    to: Addr,
    /// What it asked for (QPN that of `to`).
    info: InformInfo,
}

/// A Report waiting for its ReportResp.
#[derive(Clone, Debug)]
struct Pending {
    to: Addr,
    subscriber: Gid,
    tid: u32,
    mad: [u8; MAD_SIZE],
    tries: u32,
    deadline: u64,
}

/// Subscriptions, Reports in flight, and the ports in service the last
/// time the SA looked.
#[derive(Clone, Debug, Default)]
pub struct Informs {
    subs: Vec<Subscription>,
    pending: Vec<Pending>,
    next_tid: u32,
    /// Port GUID → (LID, subnet prefix) of every end port in service.
    in_service: BTreeMap<u64, (Lid, u64)>,
    /// The subscribers' port GUIDs seen going out of service and not yet
    /// back: no Report goes to them (a subscriber the SA has not seen
    /// come or go is taken as in service).
    out_of_service: BTreeSet<u64>,
    /// The first look (everything new then is the subnet coming up).
    looked: bool,
}

/// A Set(InformInfo) refused: the status, and the InformInfo to send back
/// (with Subscribe 0, o13-13.1.1).
pub type Refusal = (SaStatus, [u8; InformInfo::SIZE]);

impl Informs {
    /// Subscriptions held.
    pub fn subscriptions(&self) -> usize {
        self.subs.len()
    }

    /// Reports waiting for their ReportResp.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// A Set(InformInfo) from `from`: subscribes or unsubscribes; the
    /// InformInfo to answer with.
    pub fn set(
        &mut self,
        subnet: &Subnet,
        from: Addr,
        data: &[u8],
        trusted: bool,
    ) -> Result<[u8; InformInfo::SIZE], Refusal> {
        let mut raw = [0u8; InformInfo::SIZE];
        let n = InformInfo::SIZE.min(data.len());
        raw[..n].copy_from_slice(&data[..n]);
        let refuse = |s: SaStatus| {
            let mut back = raw;
            back[23] = 0;
            Err((s, back))
        };
        let Ok(mut info) = InformInfo::decode(&raw) else {
            return refuse(SaStatus::ReqInvalid);
        };
        let Some(me) = end_by_lid(subnet, from.lid) else {
            return refuse(SaStatus::ReqInvalid);
        };
        if info.subscribe > 1 || info.is_generic > 1 {
            return refuse(SaStatus::ReqInvalid);
        }
        if !trusted
            && info.is_generic == 1
            && SECURITY_TRAPS.contains(&info.trap_number_or_device_id)
        {
            return refuse(SaStatus::ReqDenied);
        }
        info.qpn = from.qpn & 0xFF_FFFF;
        let same = |s: &Subscription| {
            s.subscriber == me.gid && {
                let mut a = s.info;
                let mut b = info;
                a.resp_time_value = 0;
                b.resp_time_value = 0;
                a.subscribe = 0;
                b.subscribe = 0;
                a == b
            }
        };
        if info.subscribe == 0 {
            let Some(i) = self.subs.iter().position(same) else {
                return refuse(SaStatus::ReqInvalid);
            };
            self.subs.remove(i);
            return Ok(raw);
        }
        if !valid_scope(subnet, &info) {
            return refuse(SaStatus::ReqInvalid);
        }
        if let Some(s) = self.subs.iter_mut().find(|s| same(s)) {
            s.info = info;
            s.to = from;
            return Ok(raw);
        }
        let mine: Vec<u16> = self
            .subs
            .iter()
            .filter(|s| s.subscriber == me.gid)
            .map(|s| s.enumeration)
            .collect();
        if self.subs.len() >= MAX_SUBSCRIPTIONS || mine.len() >= MAX_PER_SUBSCRIBER {
            return refuse(SaStatus::NoResources);
        }
        let enumeration = (0..).find(|e| !mine.contains(e)).unwrap_or(0);
        self.subs.push(Subscription {
            subscriber: me.gid,
            enumeration,
            to: from,
            info,
        });
        Ok(raw)
    }

    /// The InformInfoRecords that match `query` on `mask`, at most `max`.
    pub fn records(&self, query: &[u8], mask: u64, max: usize) -> Result<Vec<Vec<u8>>, SaStatus> {
        let mut out = Vec::new();
        for s in &self.subs {
            let r = InformInfoRecord {
                subscriber_gid: s.subscriber,
                subscriber_enum: s.enumeration,
                inform_info: s.info,
            };
            let mut b = alloc::vec![0u8; InformInfoRecord::SIZE];
            if r.encode(&mut b).is_ok() && matches::<InformInfoRecord>(query, &b, mask) {
                if out.len() >= max {
                    return Err(SaStatus::NoResources);
                }
                out.push(b);
            }
        }
        Ok(out)
    }

    /// Every subscription: (subscriber, its enumeration, where its
    /// Reports go, what it asked for), for the SA's database.
    pub fn each(&self) -> impl Iterator<Item = (Gid, u16, Addr, &InformInfo)> + '_ {
        (self.subs.iter()).map(|s| (s.subscriber, s.enumeration, s.to, &s.info))
    }

    /// Brings back a subscription an earlier SM held: `info` of the port
    /// `subscriber` (its `enumeration`), its Reports to QP `qpn` at the
    /// port's LID now. A subscriber not in the subnet, a subscription held
    /// already (or its enumeration), one that is no subscription or one
    /// past the SA's bounds is not restored; why.
    pub fn restore(
        &mut self,
        subnet: &Subnet,
        subscriber: Gid,
        enumeration: u16,
        info: InformInfo,
        qpn: u32,
    ) -> Result<(), &'static str> {
        let me = end_by_gid(subnet, subscriber).ok_or("its subscriber is not in the subnet")?;
        if info.subscribe != 1 || info.is_generic > 1 || !valid_scope(subnet, &info) {
            return Err("it is not a subscription the SA takes");
        }
        // The Reports' QPN is the one the line says they went to: held
        // (and compared) as it will be written again.
        let mut info = info;
        info.qpn = qpn & 0xFF_FFFF;
        let mine = self.subs.iter().filter(|s| s.subscriber == me.gid);
        if mine
            .clone()
            .any(|s| s.enumeration == enumeration || s.info == info)
        {
            return Err("the subscriber holds it already");
        }
        if self.subs.len() >= MAX_SUBSCRIPTIONS || mine.count() >= MAX_PER_SUBSCRIBER {
            return Err("the SA holds its most subscriptions");
        }
        self.subs.push(Subscription {
            subscriber: me.gid,
            enumeration,
            to: Addr {
                lid: me.lid,
                qpn: info.qpn,
            },
            info,
        });
        Ok(())
    }

    /// Reports `notice` (issued by `issuer`) to every subscription it
    /// matches.
    pub fn report(
        &mut self,
        notice: &Notice,
        issuer: Gid,
        now_ms: u64,
        cfg: &SaConfig,
        out: &mut dyn FnMut(Transmit),
        stats: &mut SaStats,
    ) {
        // What the trap is about: the port of a trap 64–67, else its
        // issuer.
        let subject = match notice.details() {
            Ok(TrapDetails::Gid(_, g)) => (g.gid, None),
            _ => (issuer, Some(notice.issuer_lid)),
        };
        let mut data = [0u8; 80];
        if notice.encode(&mut data[..64]).is_err() {
            return;
        }
        data[64..80].copy_from_slice(&issuer.0);
        // A subscriber out of service hears nothing until it is back
        // (OpenSM finds no port at its LID and skips it).
        let targets: Vec<(Addr, Gid)> = self
            .subs
            .iter()
            .filter(|s| !self.out_of_service.contains(&s.subscriber.guid().0))
            .filter(|s| wants(&s.info, notice, subject, &self.in_service))
            .map(|s| (s.to, s.subscriber))
            .collect();
        for (to, subscriber) in targets {
            // One Report per subscriber port and notice, however many of
            // its subscriptions match.
            if self
                .pending
                .iter()
                .any(|p| p.to == to && p.mad[56..136] == data)
            {
                continue;
            }
            if self.pending.len() >= MAX_PENDING {
                stats.reports_dropped += 1;
                continue;
            }
            self.next_tid = self.next_tid.wrapping_add(1).max(1);
            let tid = self.next_tid;
            let mut m = SaMad::request(Method::Report, SaAttributeId::Notice, u64::from(tid));
            m.data[..80].copy_from_slice(&data);
            let mad = m.to_bytes();
            out(Transmit {
                to,
                mad,
                len: MAD_SIZE,
            });
            stats.reports += 1;
            self.pending.push(Pending {
                to,
                subscriber,
                tid,
                mad,
                tries: 0,
                deadline: now_ms.saturating_add(cfg.report_timeout_ms),
            });
        }
    }

    /// A ReportResp from `from` with `tid` (its low 32 bits: transports
    /// own the high ones); false when it answers no Report in flight.
    pub fn on_report_resp(&mut self, from: Addr, tid: u64) -> bool {
        let tid = tid as u32;
        match self
            .pending
            .iter()
            .position(|p| p.to.lid == from.lid && p.tid == tid)
        {
            Some(i) => {
                self.pending.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// When a Report is next due again.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending.iter().map(|p| p.deadline).min()
    }

    /// Sends again the Reports whose ReportResp is late; a subscriber out
    /// of retries loses its subscriptions.
    pub fn timeout(
        &mut self,
        now_ms: u64,
        cfg: &SaConfig,
        out: &mut dyn FnMut(Transmit),
        stats: &mut SaStats,
    ) {
        let mut gone = Vec::new();
        self.pending.retain_mut(|p| {
            if p.deadline > now_ms {
                return true;
            }
            if p.tries >= cfg.report_retries {
                gone.push(p.subscriber);
                return false;
            }
            p.tries += 1;
            p.deadline = now_ms.saturating_add(cfg.report_timeout_ms);
            stats.reports += 1;
            out(Transmit {
                to: p.to,
                mad: p.mad,
                len: MAD_SIZE,
            });
            true
        });
        gone.sort_by_key(|g| g.0);
        gone.dedup();
        for g in gone {
            stats.subscribers_dropped += 1;
            self.forget(g);
        }
    }

    /// Drops every subscription of `subscriber` and its Reports.
    fn forget(&mut self, subscriber: Gid) {
        self.subs.retain(|s| s.subscriber != subscriber);
        self.pending.retain(|p| p.subscriber != subscriber);
    }

    /// Compares the ports in service with the last look: a trap 64 for
    /// each that came, a trap 65 for each that went (whose subscriptions
    /// go with it under `drop_event_subscriptions`, and otherwise stay,
    /// without the Reports they had in flight). The first look only
    /// learns what is there.
    pub fn look(
        &mut self,
        subnet: &Subnet,
        now_ms: u64,
        cfg: &SaConfig,
        out: &mut dyn FnMut(Transmit),
        stats: &mut SaStats,
    ) {
        let now = in_service(subnet);
        let first = !self.looked;
        self.looked = true;
        let gone: Vec<(u64, (Lid, u64))> = self
            .in_service
            .iter()
            .filter(|(g, _)| !now.contains_key(g))
            .map(|(g, v)| (*g, *v))
            .collect();
        let came: Vec<(u64, (Lid, u64))> = now
            .iter()
            .filter(|(g, _)| !self.in_service.contains_key(g))
            .map(|(g, v)| (*g, *v))
            .collect();
        // The subscribers kept of the ports that left (at most one entry
        // a subscription), until they are back.
        let subscribed: BTreeSet<u64> = self.subs.iter().map(|s| s.subscriber.guid().0).collect();
        self.out_of_service
            .retain(|g| subscribed.contains(g) && !now.contains_key(g));
        for (guid, (_, prefix)) in &gone {
            if subscribed.contains(guid) && !cfg.drop_event_subscriptions {
                self.out_of_service.insert(*guid);
            }
            let gid = Gid::new(*prefix, mad_core::Guid(*guid));
            if cfg.drop_event_subscriptions {
                self.forget(gid);
            } else {
                // Kept (OpenSM's default): its Reports in flight can
                // reach nobody, and would drop it when out of retries.
                self.pending.retain(|p| p.subscriber != gid);
            }
        }
        // Trap 65's subject is matched by its old LID, so the old view
        // stays until the reports are out.
        let Some(sm) = end_by_lid(subnet, sm_lid(subnet)) else {
            self.in_service = now;
            return;
        };
        for (guid, (_, prefix)) in gone {
            let gid = Gid::new(prefix, mad_core::Guid(guid));
            if let Ok(n) = sm_notice(65, sm.lid, gid) {
                self.report(&n, sm.gid, now_ms, cfg, out, stats);
            }
        }
        self.in_service = now;
        if first {
            return;
        }
        for (guid, (_, prefix)) in came {
            let gid = Gid::new(prefix, mad_core::Guid(guid));
            if let Ok(n) = sm_notice(64, sm.lid, gid) {
                self.report(&n, sm.gid, now_ms, cfg, out, stats);
            }
        }
    }
}

impl Informs {
    /// Reports `(trap, mgid)`: trap 66 (a multicast group was created)
    /// or 67 (deleted), issued by the SM, to every subscription it
    /// matches.
    pub fn group_event(
        &mut self,
        subnet: &Subnet,
        (trap, mgid): (u16, Gid),
        now_ms: u64,
        cfg: &SaConfig,
        out: &mut dyn FnMut(Transmit),
        stats: &mut SaStats,
    ) {
        let Some(sm) = end_by_lid(subnet, sm_lid(subnet)) else {
            return;
        };
        if let Ok(n) = sm_notice(trap, sm.lid, mgid) {
            self.report(&n, sm.gid, now_ms, cfg, out, stats);
        }
    }
}

/// The SM's own LID: that of the node it runs on (node 0).
fn sm_lid(s: &Subnet) -> Lid {
    s.node(NodeId(0)).map_or(Lid(0), |n| Lid(n.lid))
}

/// A notice the SM raises itself (traps 64–67): generic, informational,
/// from the class manager, about `gid`.
fn sm_notice(trap: u16, sm_lid: Lid, gid: Gid) -> Result<Notice, mad_core::Error> {
    Notice::generic(
        NoticeType::Info,
        ProducerType::ClassManager,
        sm_lid,
        &TrapDetails::Gid(trap, TrapGid { gid }),
    )
}

/// Every end port in service, by port GUID: its LID and subnet prefix.
fn in_service(s: &Subnet) -> BTreeMap<u64, (Lid, u64)> {
    every_end(s)
        .into_iter()
        .map(|e| (e.gid.guid().0, (e.lid, e.gid.prefix())))
        .collect()
}

/// The subscription's GID names a port in service, or its LID range
/// starts at a LID the subnet has (OpenSM's checks).
fn valid_scope(s: &Subnet, info: &InformInfo) -> bool {
    if info.gid.0 != [0; 16] {
        return end_by_gid(s, info.gid).is_some();
    }
    let begin = info.lid_range_begin.0;
    if begin == 0xFFFF {
        return true;
    }
    let end = if info.lid_range_end.0 == 0 {
        begin
    } else {
        info.lid_range_end.0
    };
    begin <= end && begin <= s.max_lid().0
}

/// The subscription `ii` wants `notice`, whose subject is `subject` (a
/// GID, and the issuer's LID when the notice is not about another port).
fn wants(
    ii: &InformInfo,
    notice: &Notice,
    subject: (Gid, Option<Lid>),
    in_service: &BTreeMap<u64, (Lid, u64)>,
) -> bool {
    if ii.gid.0 != [0; 16] {
        if ii.gid != subject.0 {
            return false;
        }
    } else if ii.lid_range_begin.0 != 0xFFFF {
        let lid = subject
            .1
            .or_else(|| in_service.get(&subject.0.guid().0).map(|v| v.0))
            .map_or(0, |l| l.0);
        let end = if ii.lid_range_end.0 == 0 {
            ii.lid_range_begin.0
        } else {
            ii.lid_range_end.0
        };
        if lid < ii.lid_range_begin.0 || lid > end {
            return false;
        }
    }
    if (ii.is_generic == 1) != notice.is_generic {
        return false;
    }
    if ii.notice_type != 0xFFFF && ii.notice_type != u16::from(u8::from(notice.notice_type)) {
        return false;
    }
    if ii.trap_number_or_device_id != 0xFFFF
        && ii.trap_number_or_device_id != notice.trap_number_or_device_id
    {
        return false;
    }
    ii.producer_type_or_vendor_id == 0xFF_FFFF
        || ii.producer_type_or_vendor_id == notice.producer_type_or_vendor_id
}
