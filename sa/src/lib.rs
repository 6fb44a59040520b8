//! The Subnet Administrator (IBA 15) of ibkit, as a sans-IO state machine
//! in the manner of `smi::sm`: the caller hands it the SA MADs that reach
//! the SM's port with where they came from and the time, and polls it for
//! the MADs to send back and for its next timer. It reads the subnet
//! through [`smi::sm::Subnet`] (what the SM discovered, the LIDs it gave
//! and the tables it installed) and changes nothing in the SM.
//!
//! * [`query`] — ComponentMask matching and the records of each attribute:
//!   NodeRecord, PortInfoRecord, LinkRecord, SwitchInfoRecord, and
//!   ClassPortInfo.
//! * [`path`] — PathRecord resolved over the installed forwarding tables:
//!   LIDs and GIDs, the smallest MTU and rate along the path, the packet
//!   lifetime from the switches' lifetimes, reversible.
//! * [`rmpp`] — answers longer than one MAD, sent by the SA itself as RMPP
//!   segments within the receiver's window, acknowledged, retried and
//!   aborted, so that it works over any transport; and the client's side,
//!   [`Receiver`], which `ibkit sa` gathers answers with.
//!
//! * [`service`] — ServiceRecord registration with leases: Set, Get,
//!   GetTable, Delete.
//! * [`mcast`] — MCMemberRecord: multicast groups created, joined, left
//!   and found, the default partition's IPoIB broadcast group held from
//!   the start; untrusted requesters see no members.
//! * [`inform`] — InformInfo subscriptions, InformInfoRecord, and the
//!   Reports of traps 64/65 (which the SA raises when ports come and go,
//!   fed by the SM's events through [`Sa::handle_event`]) and of every trap
//!   the SM receives, each until its ReportResp.
//! * [`db`] — the groups, services and subscriptions in OpenSM's
//!   `opensm-sa.dump` layout: [`Sa::export`] writes them, [`Sa::restore`]
//!   brings them back in a new SA (OpenSM's `-S`).
//!
//! A request whose SM_Key is neither zero nor the SA's is dropped, as
//! OpenSM drops it; one that presents the SA's key is trusted (it sees
//! ServiceKeys, may delete any service and subscribe to security traps).
//!
//! Also answered: MultiPathRecord (GetMulti), LinearForwardingTableRecord
//! (the installed tables), MulticastForwardingTableRecord (the MFTs the
//! SM programmed for the groups), GUIDInfoRecord, P_KeyTableRecord
//! (trusted requesters only; the tables the partitions gave) and the SM's
//! own SMInfoRecord; SLtoVLMappingTableRecord and VLArbitrationTableRecord
//! (the tables the SM wrote under a QoS policy), and requests that come
//! in several RMPP segments. What the SA does not implement is answered
//! with the MAD status "unsupported method/attribute" (or "invalid
//! request"), which is what a client of an SA that lacks it sees.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod db;
pub mod guids;
mod inbound;
pub mod inform;
pub mod mcast;
pub mod path;
pub mod qos_reads;
pub mod query;
pub mod rmpp;
pub mod service;

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use mad_core::mad::{Method, Status};
/// The SA's class version (2).
pub use mad_core::sa::SA_CLASS_VERSION;
use mad_core::sa::{
    GuidInfoRecord, InformInfoRecord, LinearForwardingTableRecord, LinkRecord, McMemberRecord,
    MulticastForwardingTableRecord, NodeRecord, PKeyTableRecord, PortInfoRecord, RmppType,
    SaAttributeId, SaMad, SaStatus, ServiceRecord, SlToVlMappingTableRecord, SmInfoRecord,
    SwitchInfoRecord, VlArbitrationTableRecord,
};
use mad_core::{Lid, MAD_SIZE};
use smi::sm::{GroupMember, SmEvent, Subnet};

pub use rmpp::{ReceiveError, Received, Receiver, Transfer, TransferKey};

/// Settings of the SA.
#[derive(Clone, Debug)]
pub struct SaConfig {
    /// The key a trusted requester presents in the SA header's SM_Key
    /// (OpenSM's `sa_key`, 1 by default as OpenSM's): a request with
    /// another non-zero key is dropped.
    pub sm_key: u64,
    /// The SM's own SM_Key (`ibkit sm --sm-key`, OpenSM's `sm_key`), which
    /// its SMInfoRecord shows a trusted requester.
    pub sm_info_key: u64,
    /// RespTimeValue of ClassPortInfo: 4.096 µs × 2^value.
    pub resp_time_value: u8,
    /// Milliseconds an RMPP window waits for its ACK before it is sent
    /// again.
    pub rmpp_timeout_ms: u64,
    /// Times a window is sent again before the transfer is aborted.
    pub rmpp_retries: u32,
    /// RMPP transfers in progress at once; past this a GetTable is
    /// answered "no resources".
    pub max_transfers: usize,
    /// Bytes the transfers in progress may hold together, a quarter of
    /// them for one requester (its port, by base LID); an answer past
    /// either is "no resources", and a requester already past its quarter
    /// is refused before its question is worked out. Without it one host's 256
    /// all-pairs GetTables on fat-tree-648 held 8.1 GB.
    pub max_transfer_bytes: usize,
    /// Records one answer may hold; past this a GetTable is answered "no
    /// resources" (a bounded answer to an unbounded question).
    pub max_records: usize,
    /// LID pairs one PathRecord GetTable or MultiPathRecord GetMulti may
    /// examine; past this it is answered "no resources". A question no
    /// path answers would otherwise walk every pair of the subnet on the
    /// SM's one thread (fat-tree-11664: 136 M pairs, 25 s); 2^20 pairs
    /// take about 0.2 s, as many as the records an answer may hold.
    pub max_examined: usize,
    /// LID pairs one requester's path questions may examine in a second,
    /// all together; past this its path GetTables are "no resources"
    /// until the second is out. With the SM's one thread answering, a
    /// host asking without pause then takes one question's worth of it
    /// a second (2^20 pairs: 0.13–0.35 s on the machines measured), not
    /// all of it.
    pub max_examined_per_second: usize,
    /// LID pairs the path questions of all requesters together may
    /// examine in a second; past this every path GetTable is "no
    /// resources" until the second is out (Gets are not counted, and
    /// still answered). The bound a host has alone does not stop many
    /// hosts asking at once from taking the SM's whole thread; this one
    /// keeps them to twice one host's (2^21 pairs: 0.26–0.7 s a second
    /// on the machines measured), the rest for the sweeps, traps and
    /// Gets.
    pub max_examined_all_per_second: usize,
    /// Bytes of data one request in several RMPP segments may bring
    /// (the SA data of all its segments); past this its transfer is
    /// aborted. 8 KiB holds the largest MultiPathRecord (255 source and
    /// 255 destination GIDs).
    pub max_request_bytes: usize,
    /// Answers waiting to be polled; past this requests are dropped and
    /// counted (a flood must not grow the SA).
    pub max_queued: usize,
    /// The transport brings the receivers' RMPP ACKs back. When it does
    /// not (a umad agent without the kernel's RMPP, libumad2sim), every
    /// segment goes at once and the transfer ends there: no window, no
    /// retries, no abort a later requester with the same TID would get.
    pub rmpp_acks: bool,
    /// Milliseconds a Report waits for its ReportResp before it is sent
    /// again.
    pub report_timeout_ms: u64,
    /// Times a Report is sent again before its subscriber is dropped.
    pub report_retries: u32,
    /// The SM's priority, as its SMInfoRecord gives it (0–15).
    pub sm_priority: u8,
    /// The site byte of the alias GUIDs the SA makes (bits 39..32; the
    /// OpenIB OUI above, a count below), OpenSM's `sm_assigned_guid`.
    pub assigned_guid_byte: u8,
    /// Alias GUIDs the SA makes and remembers, at most
    /// ([`guids::MAX_ASSIGNED`] by default); past it a request for one is
    /// "no resources".
    pub max_assigned_guids: usize,
    /// Without ACKs (`rmpp_acks` false), a requester on QP 1 gets the
    /// first segment of a long answer only, as a kernel-RMPP answer
    /// reaches it through libumad2sim. For an SM under libumad2sim, where
    /// every QP-1 requester is a libumad2sim client: such a client takes
    /// one MAD, and the segments that reach it after it closed crash its
    /// receiver thread (a lock of freed memory, seen in gdb under
    /// saquery) or hang it. ibkit's own client attaches with a QP of its
    /// own and gets every segment.
    pub first_segment_to_qp1: bool,
    /// The SM forwards no multicast (OpenSM's `disable_multicast`):
    /// ClassPortInfo leaves IsUDMulticastSupported out, as OpenSM's. Joins
    /// are still answered and kept, as OpenSM keeps them.
    pub disable_multicast: bool,
    /// A join to a group that exists has its Q_Key, P_Key, TClass, SL,
    /// FlowLabel and HopLimit (where the mask selects them) checked
    /// against the group's (OpenSM's `mcgroup_join_validation`; true by
    /// default, as OpenSM's). Off, a member may join with other values
    /// and is answered with the group's.
    pub mcgroup_join_validation: bool,
    /// A group created with an MGID the requester chose has that MGID
    /// checked: a multicast GID with no reserved flag, and an IPoIB one
    /// only in a partition whose broadcast group exists and agrees with
    /// it (OpenSM's `ipoib_mcgroup_creation_validation`; true by default).
    /// Off, as OpenSM, the MGID is taken unchecked.
    pub ipoib_mcgroup_creation_validation: bool,
    /// The SM writes switches' MulticastFDBTop (OpenSM's `use_mfttop`):
    /// ClassPortInfo's CapabilityMask2 says IsMcastTopSupported, as
    /// OpenSM's does.
    pub use_mfttop: bool,
    /// A port that leaves the subnet loses its subscriptions at once
    /// (OpenSM's `drop_event_subscriptions`; false by default, as
    /// OpenSM's). Kept, they get no Report while their port is out of
    /// service, and Reports again once it is back.
    pub drop_event_subscriptions: bool,
    /// A new IPv6 solicited-node multicast group (IPoIB's
    /// `FF1s:601B:PPPP::1:FFxx:xxxx`) gets the MLID of one that exists in
    /// the same partition and scope, so that a subnet of IPv6 hosts does
    /// not spend an MLID a host (OpenSM's `consolidate_ipv6_snm_req`;
    /// false by default, as OpenSM's). The groups stay apart in the SA;
    /// the MLID's tree reaches the members of all of them.
    pub consolidate_ipv6_snm_req: bool,
    /// PathRecords, MultiPathRecords and new multicast groups carry rates
    /// no later than the original extended ones, 300 Gb/s at most (12x
    /// EDR), for hosts whose stacks do not know the 2x, HDR and NDR rate
    /// codes (OpenSM's `use_original_extended_sa_rates_only`; false by
    /// default, as OpenSM's): see [`path::original_rate`].
    pub use_original_extended_sa_rates_only: bool,
    /// The highest rate code answered (OpenSM's `max_rate_enum`, 2–24;
    /// [`path::NO_RATE_LIMIT`], 63, by default): a PathRecord's,
    /// MultiPathRecord's or new group's rate above it steps down to one
    /// an older stack knows ([`path::limit_rate`]), and the 2x/HDR fixes
    /// are not made. See [`SaConfig::rate_limit`].
    pub max_rate_enum: u8,
}

impl SaConfig {
    /// The highest rate code answered: [`SaConfig::max_rate_enum`], at
    /// most 18 (300 Gb/s) with `use_original_extended_sa_rates_only`, as
    /// OpenSM 3.3.24 and later combine the two.
    pub fn rate_limit(&self) -> u8 {
        if self.use_original_extended_sa_rates_only {
            self.max_rate_enum.min(18)
        } else {
            self.max_rate_enum
        }
    }
}

impl Default for SaConfig {
    fn default() -> SaConfig {
        SaConfig {
            sm_key: 1,
            sm_info_key: 1,
            resp_time_value: 18,
            rmpp_timeout_ms: 200,
            rmpp_retries: 3,
            max_transfers: 256,
            max_transfer_bytes: 512 << 20,
            max_records: 1 << 20,
            max_examined: 1 << 20,
            max_examined_per_second: 1 << 20,
            max_examined_all_per_second: 2 << 20,
            max_request_bytes: 8 * 1024,
            max_queued: 4096,
            rmpp_acks: true,
            report_timeout_ms: 200,
            report_retries: 3,
            sm_priority: 0,
            first_segment_to_qp1: false,
            assigned_guid_byte: 0,
            max_assigned_guids: guids::MAX_ASSIGNED,
            disable_multicast: false,
            mcgroup_join_validation: true,
            consolidate_ipv6_snm_req: false,
            use_original_extended_sa_rates_only: false,
            max_rate_enum: path::NO_RATE_LIMIT,
            ipoib_mcgroup_creation_validation: true,
            use_mfttop: true,
            drop_event_subscriptions: false,
        }
    }
}

/// Where a MAD came from, and where its answer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Addr {
    /// The requester's LID.
    pub lid: Lid,
    /// The requester's QP.
    pub qpn: u32,
}

/// A MAD for the driver to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where to.
    pub to: Addr,
    /// The MAD.
    pub mad: [u8; MAD_SIZE],
    /// The bytes that carry something: the headers and the records of a
    /// table segment (the rest is zero padding). A transport that keeps
    /// datagram lengths sends this many; clients count the records of a
    /// segment by it.
    pub len: usize,
}

/// What the SA did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaStats {
    /// Requests answered (any status).
    pub answered: u64,
    /// Answers with a non-zero status.
    pub refused: u64,
    /// MADs dropped: not SA MADs, malformed, or past the queue's bound.
    pub dropped: u64,
    /// RMPP segments sent, first sendings and retries.
    pub segments: u64,
    /// RMPP segments sent again after a timeout.
    pub retries: u64,
    /// Transfers completed (the last segment acknowledged).
    pub transfers_done: u64,
    /// Transfers aborted (retries exhausted, or the receiver stopped).
    pub transfers_aborted: u64,
    /// Reports sent, first sendings and retries.
    pub reports: u64,
    /// Reports not sent: too many were waiting for their ReportResp.
    pub reports_dropped: u64,
    /// Subscribers dropped for not answering their Reports.
    pub subscribers_dropped: u64,
    /// ServiceRecords whose lease ran out.
    pub services_expired: u64,
    /// Requests received in several RMPP segments and answered.
    pub requests_reassembled: u64,
    /// Requests in several segments given up: aborted, or their sender
    /// went quiet.
    pub requests_abandoned: u64,
    /// MADs ignored because the SM is not a master with the subnet up
    /// ([`Sa::set_serving`]).
    pub ignored: u64,
    /// LID pairs path questions examined, all requesters together.
    pub pairs_examined: u64,
    /// Questions about QoS tables that waited for the SM to read them
    /// ([`qos_reads`]).
    pub qos_parked: u64,
}

/// Why a MAD was dropped without an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaError {
    /// Not an SA MAD (shorter than a MAD, or another class).
    NotSa(mad_core::Error),
    /// A response that belongs to no transfer in progress.
    Unexpected,
    /// The queue of answers is full.
    Busy,
    /// The request's SM_Key is neither zero nor the SA's.
    BadSmKey,
    /// The SM is not master, or has not brought the subnet up yet: the SA
    /// does not answer (IBA C15-0.1.3).
    NotServing,
}

impl core::fmt::Display for SaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SaError::NotSa(e) => write!(f, "not an SA MAD: {e}"),
            SaError::Unexpected => write!(f, "a response to nothing the SA sent"),
            SaError::Busy => write!(f, "the SA's queue of answers is full"),
            SaError::BadSmKey => write!(f, "a request with a wrong SM_Key"),
            SaError::NotServing => {
                write!(f, "the SM is not master with the subnet up: ignored")
            }
        }
    }
}

impl core::error::Error for SaError {}

/// The Subnet Administrator.
#[derive(Clone, Debug)]
pub struct Sa {
    cfg: SaConfig,
    out: VecDeque<Transmit>,
    transfers: rmpp::Transfers,
    /// Requesters whose last answer did not fit their share of
    /// `max_transfer_bytes`, with the bytes they held then: until that
    /// falls, their GetTables are refused before the work.
    over_share: BTreeMap<Lid, usize>,
    /// Per requester: the second its path questions' work is counted
    /// from (ms), and the LID pairs they examined since.
    work: BTreeMap<Lid, (u64, usize)>,
    /// The same for all requesters together.
    all_work: (u64, usize),
    inbound: inbound::Inbound,
    services: service::Services,
    informs: inform::Informs,
    groups: mcast::Groups,
    guids: guids::AliasGuids,
    /// The partition configuration the groups follow (its generation).
    partitions_seen: u64,
    /// The SM's QoS policy generation the groups' SLs follow.
    policy_seen: u64,
    stats: SaStats,
    /// Counts what may have changed the groups, the services or the
    /// subscriptions (see [`Sa::db_generation`]).
    db_generation: u64,
    /// The SM is master with the subnet up (see [`Sa::set_serving`]).
    serving: bool,
    /// Questions about QoS tables waiting for the SM to read them.
    qos_reads: qos_reads::QosReads,
    /// False while parked questions are answered: they do not wait again.
    parking: bool,
}

impl Sa {
    /// An SA with settings `cfg`.
    pub fn new(cfg: SaConfig) -> Sa {
        Sa {
            guids: guids::AliasGuids::new(cfg.assigned_guid_byte, cfg.max_assigned_guids),
            cfg,
            out: VecDeque::new(),
            transfers: rmpp::Transfers::default(),
            over_share: BTreeMap::new(),
            work: BTreeMap::new(),
            all_work: (0, 0),
            inbound: inbound::Inbound::default(),
            services: service::Services::default(),
            informs: inform::Informs::default(),
            groups: mcast::Groups::new(),
            partitions_seen: 0,
            policy_seen: 0,
            stats: SaStats::default(),
            db_generation: 0,
            serving: true,
            qos_reads: qos_reads::QosReads::default(),
            parking: true,
        }
    }

    /// Whether the SA answers: a driver says so each time its SM's state
    /// changes. Only a master that has brought the subnet up answers
    /// (IBA C15-0.1.3; OpenSM ignores SA MADs while not master and during
    /// its first sweep); otherwise every MAD is ignored and counted
    /// ([`SaStats::ignored`]). An SA starts serving.
    pub fn set_serving(&mut self, serving: bool) {
        self.serving = serving;
    }

    /// The SM's priority its SMInfoRecord gives (a re-read configuration).
    pub fn set_sm_priority(&mut self, priority: u8) {
        self.cfg.sm_priority = priority & 0xF;
    }

    /// The settings in force.
    pub fn config(&self) -> &SaConfig {
        &self.cfg
    }

    /// Whether a port that leaves drops its subscriptions from now on
    /// ([`SaConfig::drop_event_subscriptions`]; a re-read configuration).
    pub fn set_drop_event_subscriptions(&mut self, drop: bool) {
        self.cfg.drop_event_subscriptions = drop;
    }

    /// Whether new solicited-node groups share an MLID from now on
    /// ([`SaConfig::consolidate_ipv6_snm_req`]; a re-read configuration:
    /// groups that exist keep theirs).
    pub fn set_consolidate_ipv6_snm_req(&mut self, on: bool) {
        self.cfg.consolidate_ipv6_snm_req = on;
    }

    /// Whether answers keep to the original extended rate codes from now
    /// on ([`SaConfig::use_original_extended_sa_rates_only`]; a re-read
    /// configuration: groups that exist keep their rate).
    pub fn set_use_original_extended_sa_rates_only(&mut self, on: bool) {
        self.cfg.use_original_extended_sa_rates_only = on;
    }

    /// The highest rate code answered from now on
    /// ([`SaConfig::max_rate_enum`]; a re-read configuration).
    pub fn set_max_rate_enum(&mut self, limit: u8) {
        self.cfg.max_rate_enum = limit;
    }

    /// A number that changes whenever the groups, the services or the
    /// subscriptions may have changed (a Set or Delete answered, a lease
    /// run out, a subscriber dropped, ports gone, a restore): a driver
    /// writes the database ([`Sa::export`]) again when it moved.
    pub fn db_generation(&self) -> u64 {
        self.db_generation
    }

    /// The groups, subscriptions and services as OpenSM's database holds
    /// them, at `now_ms` on the SA's clock, which is `epoch_s` seconds
    /// since the epoch on the wall clock (a service's set time is written
    /// on the wall clock, as OpenSM writes it). Groups in MGID order, as
    /// OpenSM writes them; members in port GUID order.
    pub fn export(&self, subnet: &Subnet, now_ms: u64, epoch_s: u64) -> db::SaDb {
        let mut groups: Vec<db::DbGroup> = (self.groups.iter())
            .map(|g| {
                let mut members: Vec<(mad_core::Gid, u8, bool)> = (g.members.iter())
                    .map(|m| (m.gid, (g.rec.scope << 4) | (m.join_state & 0x0F), m.proxy))
                    .collect();
                members.sort_by_key(|m| m.0.guid().0);
                db::DbGroup {
                    mlid: g.rec.mlid.0,
                    well_known: g.well_known,
                    rec: g.rec,
                    members,
                }
            })
            .collect();
        groups.sort_by_key(|g| g.rec.mgid.0);
        let informs = (self.informs.each())
            .map(|(subscriber, enumeration, to, info)| db::DbInform {
                subscriber,
                enumeration,
                info: *info,
                lid: to.lid.0,
                qpn: to.qpn,
                qkey: 0,
                pkey_index: 0,
                sl: 0,
                path_bits: 0,
                static_rate: 0,
            })
            .collect();
        let services = (self.services.each(now_ms, epoch_s))
            .map(|(rec, modified_time)| db::DbService {
                rec: *rec,
                modified_time,
                lease_period: u32::from_be_bytes([rec[28], rec[29], rec[30], rec[31]]),
            })
            .collect();
        db::SaDb {
            guid_info: self.guids.export(subnet),
            groups,
            informs,
            services,
        }
    }

    /// Brings back what an earlier SM's database `d` held, as OpenSM does
    /// at its first sweep as master (so, once the subnet is up): groups
    /// with their MGIDs, MLIDs and the members whose ports are in the
    /// subnet ([`mcast::Groups::restore`]; their trees follow through
    /// [`Sa::take_group_changes`]), services with the lease they have left
    /// by the wall clock (`epoch_s`), subscriptions of ports in the
    /// subnet (Reports to their LIDs now). What was not restored is
    /// counted with why.
    pub fn restore(
        &mut self,
        subnet: &Subnet,
        d: &db::SaDb,
        now_ms: u64,
        epoch_s: u64,
    ) -> db::Restored {
        self.follow_partitions(subnet);
        self.db_generation += 1;
        let mut r = db::Restored::default();
        // `n` records skipped, for the reason `what`.
        let skip_n = |r: &mut db::Restored, n: usize, what: alloc::string::String| {
            r.skipped += n;
            if r.reasons.len() < 100 {
                r.reasons.push(what);
            }
        };
        let skip = |r: &mut db::Restored, what| skip_n(r, 1, what);
        for g in &d.groups {
            let mut rec = g.rec;
            rec.mlid = Lid(g.mlid);
            match self.groups.restore(subnet, rec, &g.members) {
                Ok(n) => {
                    r.groups += 1;
                    r.members += n.restored;
                    // Each member line left out is a record skipped.
                    for (count, why) in [
                        (n.gone, "whose port is not in the subnet"),
                        (n.void, "with no JoinState, or already a member"),
                        (n.over, "past the SA's 65,536 memberships"),
                    ] {
                        if count > 0 {
                            let what =
                                alloc::format!("group {}: {count} member(s) {why}", g.rec.mgid);
                            skip_n(&mut r, count, what);
                        }
                    }
                }
                Err(why) => skip(&mut r, alloc::format!("group {}: {why}", g.rec.mgid)),
            }
        }
        for v in &d.services {
            let gid = mad_core::Gid(v.rec[8..24].try_into().unwrap_or([0; 16]));
            let owner = path::end_by_gid(subnet, gid).map_or(Lid(0), |e| e.lid);
            let age_s = epoch_s.saturating_sub(u64::from(v.modified_time));
            let mut rec = v.rec;
            rec[28..32].copy_from_slice(&v.lease_period.to_be_bytes());
            let when = (v.modified_time, age_s * 1000);
            match self.services.restore(&rec, owner, when, now_ms) {
                Ok(()) => r.services += 1,
                Err(why) => {
                    let id = u64::from_be_bytes(v.rec[..8].try_into().unwrap_or([0; 8]));
                    skip(&mut r, alloc::format!("service {id:#x}: {why}"))
                }
            }
        }
        for i in &d.informs {
            match (self.informs).restore(subnet, i.subscriber, i.enumeration, i.info, i.qpn) {
                Ok(()) => r.subscriptions += 1,
                Err(why) => skip(
                    &mut r,
                    alloc::format!("subscription of {}: {why}", i.subscriber),
                ),
            }
        }
        for g in &d.guid_info {
            match self.guids.restore(subnet, g.base_guid, g.block, &g.guids) {
                Ok(n) => r.alias_guids += n,
                Err(why) => skip(
                    &mut r,
                    alloc::format!(
                        "GUIDInfo of port {:#018x} block {}: {why}",
                        g.base_guid,
                        g.block
                    ),
                ),
            }
        }
        r
    }

    /// The well-known groups follow the SM's partition configuration
    /// and QoS policy when either changed (a partition's IPoIB broadcast
    /// group, its `mgid=` groups, their SL).
    fn follow_partitions(&mut self, subnet: &Subnet) {
        let (g, q) = (
            subnet.partition_generation(),
            subnet.qos_policy_generation(),
        );
        if (g, q) == (self.partitions_seen, self.policy_seen) {
            return;
        }
        (self.partitions_seen, self.policy_seen) = (g, q);
        self.db_generation += 1;
        self.groups
            .apply_partitions(subnet.partition_config(), subnet.qos_policy());
    }

    /// What it did.
    pub fn stats(&self) -> &SaStats {
        &self.stats
    }

    /// Requests being received in several RMPP segments.
    pub fn requests_receiving(&self) -> usize {
        self.inbound.len()
    }

    /// RMPP transfers in progress.
    pub fn transfers(&self) -> usize {
        self.transfers.len()
    }

    /// Bytes the RMPP transfers in progress hold (at most
    /// [`SaConfig::max_transfer_bytes`]).
    pub fn transfer_bytes(&self) -> usize {
        self.transfers.bytes(|_| false).0
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// Services registered (leases not yet run out included).
    pub fn services(&self) -> usize {
        self.services.len()
    }

    /// Subscriptions held, and Reports waiting for their ReportResp.
    pub fn subscriptions(&self) -> (usize, usize) {
        (self.informs.subscriptions(), self.informs.pending())
    }

    /// The multicast groups and their members.
    pub fn groups(&self) -> &mcast::Groups {
        &self.groups
    }

    /// The groups whose members changed since the last call (joins,
    /// leaves, groups deleted, ports gone), each with its end ports now
    /// (none: the group is gone): for the SM to program their multicast
    /// forwarding ([`smi::sm::Sm::set_multicast_group`]).
    pub fn take_group_changes(&mut self, subnet: &Subnet) -> Vec<(Lid, Vec<GroupMember>)> {
        self.groups
            .take_changes()
            .into_iter()
            .map(|l| (l, self.groups.members_of(subnet, l)))
            .collect()
    }

    /// When [`Sa::handle_timeout`] is next due: an RMPP window's ACK, a
    /// Report's ReportResp, a service's lease.
    pub fn poll_timeout(&self) -> Option<u64> {
        [
            self.transfers.next_deadline(),
            self.inbound.next_deadline(),
            self.informs.next_deadline(),
            self.services.next_expiry(),
            self.qos_reads.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Sends again the windows whose ACK is late and the Reports whose
    /// ReportResp is, aborts transfers out of retries, drops subscribers
    /// that never answer, and lets run-out services go.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let (cfg, out, stats) = (&self.cfg, &mut self.out, &mut self.stats);
        self.transfers.timeout(
            now_ms,
            cfg,
            &mut |t| {
                out.push_back(t);
            },
            stats,
        );
        let dropped = stats.subscribers_dropped;
        self.informs
            .timeout(now_ms, cfg, &mut |t| out.push_back(t), stats);
        let expired = self.services.expire(now_ms) as u64;
        stats.services_expired += expired;
        if expired > 0 || stats.subscribers_dropped != dropped {
            self.db_generation += 1;
        }
        stats.requests_abandoned += self.inbound.expire(now_ms) as u64;
    }

    /// An event of the SM: when the subnet is up, or a node was lost, the
    /// ports that came into service or went out of it are reported (traps
    /// 64 and 65); a trap the SM received is reported as it came.
    pub fn handle_event(&mut self, subnet: &Subnet, event: &SmEvent, now_ms: u64) {
        self.follow_partitions(subnet);
        let (cfg, out, stats) = (&self.cfg, &mut self.out, &mut self.stats);
        match event {
            SmEvent::SubnetUp { .. } | SmEvent::NodeLost { .. } => {
                self.db_generation += 1;
                self.informs
                    .look(subnet, now_ms, cfg, &mut |t| out.push_back(t), stats);
                self.groups.prune(subnet);
                self.report_groups(subnet, now_ms);
            }
            SmEvent::Trap { issuer, notice, .. } => {
                let gid =
                    path::end_by_lid(subnet, *issuer).map_or(mad_core::Gid([0; 16]), |e| e.gid);
                self.informs
                    .report(notice, gid, now_ms, cfg, &mut |t| out.push_back(t), stats);
            }
            SmEvent::NodeAdded { .. }
            | SmEvent::LidsChanged { .. }
            | SmEvent::SmStateChanged { .. }
            | SmEvent::HandingOver { .. }
            | SmEvent::HandoverImpossible
            | SmEvent::PortNotAsSet { .. }
            | SmEvent::SwitchTablesNotAsSet { .. }
            | SmEvent::SmPortState { .. }
            | SmEvent::VmLost { .. }
            | SmEvent::DuplicateGuid { .. }
            | SmEvent::DuplicatePortGuid { .. }
            | SmEvent::DuplicateVGuid { .. }
            | SmEvent::RoutingFellBack { .. }
            | SmEvent::UpDownTurnAvoided { .. }
            | SmEvent::NoisyPort { .. }
            | SmEvent::PortQuiet { .. } => {}
        }
    }

    /// A MAD that reached the SA from `from` at `now_ms`: a request is
    /// answered (queued for [`Sa::poll_transmit`]); an RMPP ACK, STOP or
    /// ABORT moves its transfer on. What is not an SA MAD, or answers
    /// nothing, is dropped with the reason.
    pub fn handle_mad(
        &mut self,
        subnet: &Subnet,
        from: Addr,
        mad: &[u8],
        now_ms: u64,
    ) -> Result<(), SaError> {
        if !self.serving {
            self.stats.ignored += 1;
            return Err(SaError::NotServing);
        }
        self.follow_partitions(subnet);
        let m = match SaMad::parse(mad) {
            Ok(m) => m,
            Err(e) => {
                self.stats.dropped += 1;
                return Err(SaError::NotSa(e));
            }
        };
        if m.sa.sm_key != 0 && m.sa.sm_key != self.cfg.sm_key {
            self.stats.dropped += 1;
            return Err(SaError::BadSmKey);
        }
        let key = TransferKey {
            to: from,
            tid: m.header.transaction_id.get(),
        };
        // RMPP's own words: an ACK, STOP or ABORT of one of the SA's
        // answers, whether its method keeps the response bit of the DATA
        // (as ibkit's client sends it) or clears it (as the Linux kernel
        // does); or a requester's STOP or ABORT of a request it was
        // sending in segments.
        if m.rmpp.active()
            && matches!(
                m.rmpp.rmpp_type,
                RmppType::Ack | RmppType::Stop | RmppType::Abort
            )
        {
            if self.transfers.contains(&key) {
                let (cfg, out, stats) = (&self.cfg, &mut self.out, &mut self.stats);
                self.transfers
                    .on_response(key, &m, now_ms, cfg, &mut |t| out.push_back(t), stats);
                return Ok(());
            }
            if m.rmpp.rmpp_type != RmppType::Ack && self.inbound.end(&key) {
                self.stats.requests_abandoned += 1;
                return Ok(());
            }
            self.stats.dropped += 1;
            return Err(SaError::Unexpected);
        }
        if m.header.is_response() {
            if m.method() == Method::ReportResp
                && self
                    .informs
                    .on_report_resp(from, m.header.transaction_id.get())
            {
                return Ok(());
            }
            self.stats.dropped += 1;
            return Err(SaError::Unexpected);
        }
        if self.out.len() >= self.cfg.max_queued {
            self.stats.dropped += 1;
            return Err(SaError::Busy);
        }
        if !inbound::Inbound::is_segment(&m) {
            self.respond(subnet, from, &key, &m, &m.data, now_ms);
            self.report_groups(subnet, now_ms);
            return Ok(());
        }
        // A segment of a request in several.
        let to = |mad: [u8; 256]| Transmit {
            to: from,
            mad,
            len: 256,
        };
        match self.inbound.segment(key, &m, now_ms, &self.cfg) {
            inbound::Step::More(ack) => self.out.extend(ack.map(to)),
            inbound::Step::Failed(abort) => {
                self.stats.requests_abandoned += 1;
                self.out.extend(abort.map(to));
            }
            inbound::Step::Full(abort) => {
                self.stats.requests_abandoned += 1;
                self.out.push_back(to(abort));
            }
            inbound::Step::Unknown => {
                self.stats.dropped += 1;
                return Err(SaError::Unexpected);
            }
            inbound::Step::Done { head, data, ack } => {
                self.out.extend(ack.map(to));
                self.stats.requests_reassembled += 1;
                self.respond(subnet, from, &key, &head, &data, now_ms);
                self.report_groups(subnet, now_ms);
            }
        }
        Ok(())
    }

    /// The QoS tables to read since the last call, for the SM to read
    /// ([`smi::sm::Sm::read_qos_table`]): a SLtoVLMappingTableRecord or
    /// VLArbitrationTableRecord question named them and waits
    /// ([`qos_reads`]).
    pub fn take_qos_reads(&mut self) -> Vec<smi::sm::qos::QosTable> {
        self.qos_reads.take_reads()
    }

    /// Answers the questions about QoS tables that were waiting and may
    /// be answered now: every table they named has been read or refused,
    /// or their time is up (then from what the SM holds). A driver calls
    /// it after the SM has handled its MADs, and at [`Sa::poll_timeout`].
    /// An SA that stopped serving ([`Sa::set_serving`]) drops them
    /// unanswered, counted as ignored.
    pub fn resume(&mut self, subnet: &Subnet, now_ms: u64) {
        if !self.serving {
            // No longer a master with the subnet up: nothing is answered.
            self.stats.ignored += self.qos_reads.clear() as u64;
            return;
        }
        let ready = self.qos_reads.ready(subnet, now_ms);
        if ready.is_empty() {
            return;
        }
        self.parking = false;
        for q in ready {
            self.respond(subnet, q.from, &q.key, &q.head, &q.data, now_ms);
        }
        self.parking = true;
    }

    /// Questions about QoS tables waiting for the SM to read them.
    pub fn qos_questions_waiting(&self) -> usize {
        self.qos_reads.parked()
    }

    /// The alias GUID blocks decided since the last call, for the SM to
    /// hold and write ([`smi::sm::Sm::set_guid_block`]).
    pub fn take_guid_changes(&mut self) -> Vec<guids::GuidChange> {
        self.guids.take_changes()
    }

    /// Reports the groups created and deleted since the last call (traps
    /// 66 and 67) to their subscribers.
    fn report_groups(&mut self, subnet: &Subnet, now_ms: u64) {
        for event in self.groups.take_created_deleted() {
            let (cfg, out, stats) = (&self.cfg, &mut self.out, &mut self.stats);
            self.informs
                .group_event(subnet, event, now_ms, cfg, &mut |t| out.push_back(t), stats);
        }
    }

    /// Answers the request `m` from `from`, whose SA data is `data` (its
    /// own, or that of all its segments).
    fn respond(
        &mut self,
        subnet: &Subnet,
        from: Addr,
        key: &TransferKey,
        m: &SaMad,
        data: &[u8],
        now_ms: u64,
    ) {
        // A question waiting for the SM to read tables, asked again: it
        // is answered once, when they come.
        if self.qos_reads.is_parked(key) {
            self.stats.dropped += 1;
            return;
        }
        // The requester asked again while its answer is on the way (it
        // did not get the first segment, or it is a new process that drew
        // the same TID): the answer starts over.
        self.transfers.remove(key);
        self.stats.answered += 1;
        let (all, share) = (self.cfg.max_transfer_bytes, self.cfg.max_transfer_bytes / 4);
        let tables = matches!(m.method(), Method::GetTable | Method::GetMulti);
        let me = if tables {
            requester(subnet, from.lid)
        } else {
            from.lid
        };
        // What the transfers hold, and what the requester's port holds
        // (under any of its LIDs): only a table can add to it.
        let (held, mine) = if tables {
            self.transfers.bytes(|to| requester(subnet, to) == me)
        } else {
            (0, 0)
        };
        if tables {
            let still_over = match self.over_share.get(&me) {
                Some(&then) if mine >= then => true,
                Some(_) => {
                    self.over_share.remove(&me);
                    false
                }
                None => false,
            };
            if still_over || mine >= share || held >= all {
                // Its answer could not be held: refused before the work.
                self.refuse(from, m, SaStatus::NoResources.status());
                return;
            }
        }
        match self.answer(subnet, from, m, data, now_ms) {
            Answer::Sent => {}
            Answer::Parked => {
                // Counted when it is answered.
                self.stats.answered -= 1;
                self.stats.qos_parked += 1;
            }
            Answer::Table { data, stride } => {
                if self.transfers.len() >= self.cfg.max_transfers
                    || mine + data.len() > share
                    || held + data.len() > all
                {
                    if mine + data.len() > share && mine > 0 {
                        self.over_share.insert(me, mine);
                    }
                    self.refuse(from, m, SaStatus::NoResources.status());
                } else {
                    let mut h = m.clone();
                    h.header.method = if m.method() == Method::GetMulti {
                        Method::GetMultiResp
                    } else {
                        Method::GetTableResp
                    }
                    .into();
                    h.header.status.set(0);
                    h.sa.sm_key = 0;
                    h.sa.attribute_offset = stride;
                    let (cfg, out, stats) = (&self.cfg, &mut self.out, &mut self.stats);
                    self.transfers.start(
                        *key,
                        h,
                        data,
                        now_ms,
                        cfg,
                        &mut |t| out.push_back(t),
                        stats,
                    );
                }
            }
            Answer::Refused(s) => self.refuse(from, m, s),
        }
    }

    /// Queues a response of `method` with `status` and one record.
    fn reply(
        &mut self,
        to: Addr,
        req: &SaMad,
        method: Method,
        status: Status,
        rec: &[u8],
        stride: u16,
    ) {
        if !status.is_ok() {
            self.stats.refused += 1;
        }
        // Written where it waits, not built and moved there.
        self.out.push_back(Transmit {
            to,
            mad: [0; MAD_SIZE],
            len: MAD_SIZE,
        });
        if let Some(t) = self.out.back_mut() {
            req.write_response(&mut t.mad, method, status.0, stride, rec);
        }
    }

    /// Queues the answer to a Get: one record.
    fn one(&mut self, to: Addr, req: &SaMad, rec: &[u8]) -> Answer {
        self.reply(to, req, Method::GetResp, Status::OK, rec, 0);
        Answer::Sent
    }

    /// Queues an error response to `req`.
    fn refuse(&mut self, to: Addr, req: &SaMad, status: Status) {
        let method = match req.method() {
            Method::GetTable => Method::GetTableResp,
            Method::GetMulti => Method::GetMultiResp,
            Method::GetTraceTable => Method::GetTraceTableResp,
            Method::Delete => Method::DeleteResp,
            _ => Method::GetResp,
        };
        // The request's data goes back as it came (IBA 13.4.7: an error
        // response carries the request's attribute).
        let data = req.data;
        self.reply(to, req, method, status, &data, 0);
    }

    /// What to answer `m` with.
    fn answer(
        &mut self,
        subnet: &Subnet,
        from: Addr,
        m: &SaMad,
        data: &[u8],
        now_ms: u64,
    ) -> Answer {
        if m.header.class_version != SA_CLASS_VERSION {
            return Answer::Refused(Status::UNSUPPORTED_VERSION);
        }
        let trusted = m.sa.sm_key != 0 && m.sa.sm_key == self.cfg.sm_key;
        let mask = m.sa.component_mask;
        // The requester's port by its base LID: what it holds and may
        // spend is counted once, whichever LID of its range it asks from
        // (looked up only where a quota is, not for a Get).
        let me = || requester(subnet, from.lid);
        if matches!(m.method(), Method::Set | Method::Delete) {
            self.db_generation += 1;
        }
        match (m.method(), m.attribute_id()) {
            (Method::Set, SaAttributeId::ServiceRecord) => {
                return match self
                    .services
                    .set(subnet, me(), &m.data, mask, trusted, now_ms)
                {
                    Ok(rec) => self.one(from, m, &rec),
                    Err(s) => Answer::Refused(s.status()),
                };
            }
            (Method::Delete, SaAttributeId::ServiceRecord) => {
                return match self.services.delete(&m.data, mask, trusted, now_ms) {
                    Ok(rec) => {
                        self.reply(from, m, Method::DeleteResp, Status::OK, &rec, 0);
                        Answer::Sent
                    }
                    Err(s) => Answer::Refused(s.status()),
                };
            }
            (Method::Set, SaAttributeId::McMemberRecord) => {
                let checks = mcast::Checks {
                    join: self.cfg.mcgroup_join_validation,
                    mgid: self.cfg.ipoib_mcgroup_creation_validation,
                    consolidate_snm: self.cfg.consolidate_ipv6_snm_req,
                    max_rate: self.cfg.rate_limit(),
                };
                return match self.groups.join(subnet, me(), &m.data, mask, checks) {
                    Ok(rec) => self.one(from, m, &mcast_bytes(&rec)),
                    Err(s) => Answer::Refused(s.status()),
                };
            }
            (Method::Delete, SaAttributeId::McMemberRecord) => {
                return match self.groups.leave(subnet, me(), &m.data, mask) {
                    Ok(rec) => {
                        let b = mcast_bytes(&rec);
                        self.reply(from, m, Method::DeleteResp, Status::OK, &b, 0);
                        Answer::Sent
                    }
                    Err(s) => Answer::Refused(s.status()),
                };
            }
            (Method::Set, SaAttributeId::GuidInfoRecord) => {
                return match self.guids.set(subnet, me(), &m.data, mask, trusted) {
                    Ok(rec) => self.one(from, m, &record_bytes(&rec)),
                    Err(s) => Answer::Refused(s.status()),
                };
            }
            (Method::Delete, SaAttributeId::GuidInfoRecord) => {
                let groups = &self.groups;
                let in_group = |g: u64| groups.uses_port_guid(g);
                return match (self.guids).delete(subnet, me(), &m.data, mask, trusted, &in_group) {
                    Ok(rec) => {
                        let b = record_bytes(&rec);
                        self.reply(from, m, Method::DeleteResp, Status::OK, &b, 0);
                        Answer::Sent
                    }
                    Err(s) => Answer::Refused(s.status()),
                };
            }
            (Method::Set, SaAttributeId::InformInfo) => {
                return match self.informs.set(subnet, from, &m.data, trusted) {
                    Ok(back) => self.one(from, m, &back),
                    Err((s, back)) => {
                        self.reply(from, m, Method::GetResp, s.status(), &back, 0);
                        Answer::Sent
                    }
                };
            }
            _ => {}
        }
        let table = match (m.method(), m.attribute_id()) {
            (Method::Get, _) => false,
            (Method::GetTable, _) | (Method::GetMulti, SaAttributeId::MultiPathRecord) => true,
            _ => return Answer::Refused(Status::UNSUPPORTED_METHOD_ATTR),
        };
        let path_work = table
            && matches!(
                m.attribute_id(),
                SaAttributeId::PathRecord | SaAttributeId::MultiPathRecord
            );
        // What is left of the requester's second of path work, and of all
        // requesters' (a Get looks at one pair's LIDs and is not counted).
        let counted = if path_work {
            self.work.get(&me())
        } else {
            None
        };
        let (since, used) = match counted {
            Some(&(t, used)) if (t..t.saturating_add(1000)).contains(&now_ms) => (t, used),
            _ => (now_ms, 0),
        };
        let (all_since, all_used) = match self.all_work {
            (t, used) if path_work && (t..t.saturating_add(1000)).contains(&now_ms) => (t, used),
            _ => (now_ms, 0),
        };
        let left = self.cfg.max_examined_per_second.saturating_sub(used).min(
            self.cfg
                .max_examined_all_per_second
                .saturating_sub(all_used),
        );
        let q = query::Query {
            subnet,
            from,
            data,
            mask: m.sa.component_mask,
            bitwise: query::bitwise_components(m.attribute_id(), m.header.attribute_modifier.get()),
            max: self.cfg.max_records,
            max_examined: self.cfg.max_examined.min(left),
            examined: core::cell::Cell::new(0),
            max_rate: self.cfg.rate_limit(),
        };
        if path_work && left == 0 {
            return Answer::Refused(SaStatus::NoResources.status());
        }
        let found = match m.attribute_id() {
            SaAttributeId::ClassPortInfo if !table => {
                let cpi = query::class_port_info(&self.cfg);
                return self.one(from, m, &cpi);
            }
            SaAttributeId::PathRecord if !table => {
                let mut rec = [0u8; mad_core::sa::PathRecord::SIZE];
                return match path::path_record(&q, &mut rec) {
                    Ok(()) => self.one(from, m, &rec),
                    Err(s) => Answer::Refused(s.status()),
                };
            }
            SaAttributeId::NodeRecord => q.collect::<NodeRecord>(query::node_records),
            SaAttributeId::PortInfoRecord => q.collect::<PortInfoRecord>(query::port_info_records),
            SaAttributeId::LinkRecord => q.collect::<LinkRecord>(query::link_records),
            SaAttributeId::SwitchInfoRecord => {
                q.collect::<SwitchInfoRecord>(query::switch_info_records)
            }
            SaAttributeId::PathRecord => path::path_records(&q),
            SaAttributeId::MultiPathRecord if m.method() == Method::GetMulti => {
                path::multipath_records(&q)
            }
            SaAttributeId::LinearForwardingTableRecord => {
                q.collect::<LinearForwardingTableRecord>(query::lft_records)
            }
            SaAttributeId::MulticastForwardingTableRecord => {
                q.collect::<MulticastForwardingTableRecord>(query::mft_records)
            }
            SaAttributeId::GuidInfoRecord => q.collect::<GuidInfoRecord>(guids::guid_info_records),
            SaAttributeId::PKeyTableRecord if !trusted => {
                return Answer::Refused(SaStatus::ReqDenied.status())
            }
            SaAttributeId::PKeyTableRecord => {
                q.collect::<PKeyTableRecord>(query::pkey_table_records)
            }
            SaAttributeId::SlToVlMappingTableRecord | SaAttributeId::VlArbitrationTableRecord => {
                let vlarb = m.attribute_id() == SaAttributeId::VlArbitrationTableRecord;
                let tables = if self.parking {
                    query::qos_tables_named(subnet, vlarb, data, mask, qos_reads::MAX_TABLES)
                } else {
                    Vec::new()
                };
                if !tables.is_empty() {
                    let question = qos_reads::Question {
                        key: TransferKey {
                            to: from,
                            tid: m.header.transaction_id.get(),
                        },
                        from,
                        head: m.clone(),
                        data: data.to_vec(),
                    };
                    if self.qos_reads.park(subnet, question, tables, now_ms) {
                        return Answer::Parked;
                    }
                }
                let q = query::Query {
                    subnet,
                    from,
                    data,
                    mask: query::qos_record_mask(subnet, vlarb, data, mask),
                    bitwise: 0,
                    max: q.max,
                    max_examined: q.max_examined,
                    examined: core::cell::Cell::new(0),
                    max_rate: q.max_rate,
                };
                if vlarb {
                    q.collect::<VlArbitrationTableRecord>(query::vlarb_records)
                } else {
                    q.collect::<SlToVlMappingTableRecord>(query::sl2vl_records)
                }
            }
            SaAttributeId::SmInfoRecord => {
                let act = self.stats.answered as u32;
                let mut hits = query::Records::new(SmInfoRecord::SIZE);
                query::sm_info_records(subnet, &self.cfg, trusted, act, &mut |rec| {
                    hits.push_with(|b| {
                        rec.encode(b).is_ok() && query::matches::<SmInfoRecord>(&m.data, b, mask)
                    });
                });
                Ok(hits)
            }
            SaAttributeId::ServiceRecord => self
                .services
                .find(&m.data, mask, trusted, self.cfg.max_records, now_ms)
                .map(|r| query::Records::from_vecs(ServiceRecord::SIZE, &r)),
            SaAttributeId::McMemberRecord => self
                .groups
                .find(
                    subnet,
                    from.lid,
                    &m.data,
                    mask,
                    trusted,
                    self.cfg.max_records,
                )
                .map(|r| {
                    let mut out = query::Records::new(McMemberRecord::SIZE);
                    for r in &r {
                        out.push_with(|b| r.encode(b).is_ok());
                    }
                    out
                }),
            SaAttributeId::InformInfoRecord => self
                .informs
                .records(&m.data, mask, self.cfg.max_records)
                .map(|r| query::Records::from_vecs(InformInfoRecord::SIZE, &r)),
            _ => return Answer::Refused(Status::UNSUPPORTED_METHOD_ATTR),
        };
        if path_work {
            let work = used.saturating_add(q.examined.get());
            self.work.insert(me(), (since, work));
            self.all_work = (all_since, all_used.saturating_add(q.examined.get()));
            self.stats.pairs_examined += q.examined.get() as u64;
        }
        let recs = match found {
            Ok(x) => x,
            Err(s) => return Answer::Refused(s.status()),
        };
        if !table {
            return match (recs.len(), recs.get(0)) {
                (1, Some(rec)) => self.one(from, m, rec),
                (0, _) => Answer::Refused(SaStatus::NoRecords.status()),
                _ => Answer::Refused(SaStatus::TooManyRecords.status()),
            };
        }
        let (data, stride) = recs.into_table();
        // An empty table says AttributeOffset 0: clients (ibdiags'
        // saquery among them) count the records as the data length over
        // it, and a non-zero one would make them see a zero record.
        Answer::Table {
            stride: if data.is_empty() {
                0
            } else {
                (stride / 8) as u16
            },
            data,
        }
    }
}

/// The requester by which quotas are kept: its port's base LID.
use query::base_lid as requester;

/// A GUIDInfoRecord's bytes.
fn record_bytes(r: &GuidInfoRecord) -> [u8; GuidInfoRecord::SIZE] {
    let mut b = [0u8; GuidInfoRecord::SIZE];
    let _ = r.encode(&mut b);
    b
}

fn mcast_bytes(r: &McMemberRecord) -> [u8; McMemberRecord::SIZE] {
    let mut b = [0u8; McMemberRecord::SIZE];
    let _ = r.encode(&mut b);
    b
}

/// The answer to a request.
enum Answer {
    /// One record, sent (a Get).
    Sent,
    /// Waiting for the SM to read QoS tables ([`qos_reads`]).
    Parked,
    /// A table: the records, each padded to `stride` 8-byte words.
    Table { data: Vec<u8>, stride: u16 },
    /// An error status.
    Refused(Status),
}
