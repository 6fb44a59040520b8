//! Every simulated port's Performance Management Agent (class 0x04): the
//! counters of what crossed its cable, and the answers to `perfquery` and
//! `ibqueryerrors` (ClassPortInfo, PortCounters, PortCountersExtended,
//! PortRcvErrorDetails, PortXmitDiscardDetails; Get, and Set to clear),
//! and the sampling counters of PortSamplesControl, PortSamplesResult and
//! PortSamplesResultExtended (`sampling`).
//!
//! What is counted, per port, as IBA 16.1.3.5 says a port counts it:
//! * each packet put on its cable: PortXmitPkts and PortXmitData (72
//!   words of 4 octets a MAD packet: LRH 8, BTH 12, DETH 8, MAD 256,
//!   ICRC 4 — the octets between the start delimiter and the VCRC);
//! * each packet taken off it: PortRcvPkts and PortRcvData, or, for one
//!   the simulator loses on the cable (`SimConfig::loss`), PortRcvErrors,
//!   a local physical error in PortRcvErrorDetails (what a bad CRC is);
//! * a packet sent out of a port with no cable, or a directed-route SMP
//!   whose path leads out of a port that is down: PortXmitDiscards, an
//!   inactive discard in PortXmitDiscardDetails;
//! * a LID-routed packet a switch has no route for: PortRcvSwitchRelayErrors
//!   at the port it came in by, a DLID mapping error in the details; one
//!   that has crossed too many switches (a loop): PortXmitDiscards at the
//!   port it would have left by, a switch lifetime limit discard in the
//!   details (what a real switch's lifetime limit makes of a loop);
//! * a cable that fails, or a neighbour that goes down: LinkDownedCounter
//!   at both ends.
//!
//! Every packet is unicast (the simulator carries no multicast data), so
//! the extended unicast counters follow the packet counters, and the
//! multicast ones stay 0. A node that is powered up again starts from 0.
//! The 32-bit counters of PortCounters stop at their largest value; each
//! attribute is cleared on its own, as on an HCA. The causes the
//! simulator has no model of (symbol errors, malformed packets, buffer
//! overruns, VL mapping, MTU and head-of-queue discards) stay 0.

use super::walk::GsHop;
use super::Fabric;
use mad_core::perf::{
    self, select, select_extended, PortCounters, PortCountersExtended, PortRcvErrorDetails,
    PortXmitDiscardDetails, ALL_PORTS, ATTR_CLASS_PORT_INFO, ATTR_PORT_COUNTERS,
    ATTR_PORT_COUNTERS_EXTENDED, ATTR_PORT_RCV_ERROR_DETAILS, ATTR_PORT_SAMPLES_CONTROL,
    ATTR_PORT_SAMPLES_RESULT, ATTR_PORT_SAMPLES_RESULT_EXTENDED, ATTR_PORT_XMIT_DISCARD_DETAILS,
    PERF_CLASS, PERF_CLASS_VERSION,
};
use mad_core::sa::ClassPortInfo;
use mad_core::Lid;

/// Words of 4 octets in one MAD packet on the wire.
pub const MAD_PACKET_WORDS: u64 = 72;

/// What the PMA advertises in its ClassPortInfo.CapabilityMask.
pub const PMA_CAPABILITIES: u16 = perf::CAP_ALL_PORT_SELECT | perf::CAP_EXTENDED_WIDTH;

// The traffic counters' indexes in `PortCounts::total`.
const XMIT_DATA: usize = 0;
const RCV_DATA: usize = 1;
const XMIT_PKTS: usize = 2;
const RCV_PKTS: usize = 3;

// Indexes in `PortCounts::rcv_details`, in PortRcvErrorDetails' order
// (which is also its CounterSelect's).
const LOCAL_PHYSICAL: usize = 0;
const DLID_MAPPING: usize = 3;
// Indexes in `PortCounts::xmit_details`, in PortXmitDiscardDetails'.
const INACTIVE: usize = 0;
const SW_LIFETIME: usize = 2;

/// Why a packet could not leave a port (PortXmitDiscardDetails).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Discard {
    /// The port has no cable (PortInactiveDiscards).
    Inactive,
    /// The packet has crossed too many switches (PortSwLifetimeLimitDiscards).
    Lifetime,
}

/// One port's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounts {
    /// Traffic since power-up: xmit data, rcv data, xmit packets, rcv
    /// packets.
    total: [u64; 4],
    /// Where PortCounters' traffic counters were last cleared.
    base: [u64; 4],
    /// Where PortCountersExtended's were: the four, then unicast xmit and
    /// rcv packets.
    ext_base: [u64; 6],
    link_downed: u8,
    rcv_errors: u16,
    rcv_switch_relay_errors: u16,
    xmit_discards: u16,
    /// PortRcvErrorDetails' six counters.
    rcv_details: [u16; 6],
    /// PortXmitDiscardDetails' four.
    xmit_details: [u16; 4],
}

impl PortCounts {
    /// The traffic counters since power-up, in the order of the sampling
    /// counters' selects: xmit data, rcv data, xmit packets, rcv packets.
    pub(super) fn traffic(&self) -> [u64; 4] {
        self.total
    }

    fn sent(&mut self) {
        self.total[XMIT_PKTS] += 1;
        self.total[XMIT_DATA] += MAD_PACKET_WORDS;
    }

    fn received(&mut self) {
        self.total[RCV_PKTS] += 1;
        self.total[RCV_DATA] += MAD_PACKET_WORDS;
    }

    /// PortCounters as a PMA reads them.
    pub fn counters(&self) -> PortCounters {
        let since = |i: usize| {
            u32::try_from(self.total[i].saturating_sub(self.base[i])).unwrap_or(u32::MAX)
        };
        PortCounters {
            link_downed: self.link_downed,
            rcv_errors: self.rcv_errors,
            rcv_switch_relay_errors: self.rcv_switch_relay_errors,
            xmit_discards: self.xmit_discards,
            xmit_data: since(XMIT_DATA),
            rcv_data: since(RCV_DATA),
            xmit_pkts: since(XMIT_PKTS),
            rcv_pkts: since(RCV_PKTS),
            ..PortCounters::default()
        }
    }

    /// PortCountersExtended as a PMA reads them.
    pub fn extended(&self) -> PortCountersExtended {
        let since = |i: usize, t: usize| self.total[t].saturating_sub(self.ext_base[i]);
        PortCountersExtended {
            xmit_data: since(0, XMIT_DATA),
            rcv_data: since(1, RCV_DATA),
            xmit_pkts: since(2, XMIT_PKTS),
            rcv_pkts: since(3, RCV_PKTS),
            unicast_xmit_pkts: since(4, XMIT_PKTS),
            unicast_rcv_pkts: since(5, RCV_PKTS),
            ..PortCountersExtended::default()
        }
    }

    /// PortRcvErrorDetails as a PMA reads them.
    pub fn rcv_error_details(&self) -> PortRcvErrorDetails {
        let d = self.rcv_details;
        PortRcvErrorDetails {
            local_physical_errors: d[0],
            malformed_packet_errors: d[1],
            buffer_overrun_errors: d[2],
            dlid_mapping_errors: d[3],
            vl_mapping_errors: d[4],
            looping_errors: d[5],
            ..PortRcvErrorDetails::default()
        }
    }

    /// PortXmitDiscardDetails as a PMA reads them.
    pub fn xmit_discard_details(&self) -> PortXmitDiscardDetails {
        let d = self.xmit_details;
        PortXmitDiscardDetails {
            inactive_discards: d[0],
            neighbor_mtu_discards: d[1],
            sw_lifetime_limit_discards: d[2],
            sw_hoq_lifetime_limit_discards: d[3],
            ..PortXmitDiscardDetails::default()
        }
    }

    /// Clears what a Set(PortCounters) selects.
    fn clear(&mut self, s: u16) {
        if s & select::LINK_DOWNED != 0 {
            self.link_downed = 0;
        }
        if s & select::RCV_ERRORS != 0 {
            self.rcv_errors = 0;
        }
        if s & select::RCV_SWITCH_RELAY_ERRORS != 0 {
            self.rcv_switch_relay_errors = 0;
        }
        if s & select::XMIT_DISCARDS != 0 {
            self.xmit_discards = 0;
        }
        for (bit, i) in [
            (select::XMIT_DATA, XMIT_DATA),
            (select::RCV_DATA, RCV_DATA),
            (select::XMIT_PKTS, XMIT_PKTS),
            (select::RCV_PKTS, RCV_PKTS),
        ] {
            if s & bit != 0 {
                self.base[i] = self.total[i];
            }
        }
    }

    /// Clears the details CounterSelect `s` names in `d`: bit `i`, the
    /// `i`-th counter.
    fn clear_details(d: &mut [u16], s: u16) {
        for (i, c) in d.iter_mut().enumerate() {
            if s & (1 << i) != 0 {
                *c = 0;
            }
        }
    }

    /// Clears what a Set(PortCountersExtended) selects.
    fn clear_extended(&mut self, s: u16) {
        for (i, (bit, t)) in [
            (select_extended::XMIT_DATA, XMIT_DATA),
            (select_extended::RCV_DATA, RCV_DATA),
            (select_extended::XMIT_PKTS, XMIT_PKTS),
            (select_extended::RCV_PKTS, RCV_PKTS),
            (select_extended::UNICAST_XMIT_PKTS, XMIT_PKTS),
            (select_extended::UNICAST_RCV_PKTS, RCV_PKTS),
        ]
        .into_iter()
        .enumerate()
        {
            if s & bit != 0 {
                self.ext_base[i] = self.total[t];
            }
        }
    }
}

/// The sum of several ports' PortCounters (PortSelect 0xFF), each
/// counter stopping at its largest value.
fn sum(a: PortCounters, b: PortCounters) -> PortCounters {
    PortCounters {
        link_downed: a.link_downed.saturating_add(b.link_downed),
        rcv_errors: a.rcv_errors.saturating_add(b.rcv_errors),
        rcv_switch_relay_errors: a
            .rcv_switch_relay_errors
            .saturating_add(b.rcv_switch_relay_errors),
        xmit_discards: a.xmit_discards.saturating_add(b.xmit_discards),
        xmit_data: a.xmit_data.saturating_add(b.xmit_data),
        rcv_data: a.rcv_data.saturating_add(b.rcv_data),
        xmit_pkts: a.xmit_pkts.saturating_add(b.xmit_pkts),
        rcv_pkts: a.rcv_pkts.saturating_add(b.rcv_pkts),
        ..a
    }
}

fn sum_rcv_details(a: PortRcvErrorDetails, b: PortRcvErrorDetails) -> PortRcvErrorDetails {
    let add = |x: u16, y: u16| x.saturating_add(y);
    PortRcvErrorDetails {
        local_physical_errors: add(a.local_physical_errors, b.local_physical_errors),
        malformed_packet_errors: add(a.malformed_packet_errors, b.malformed_packet_errors),
        buffer_overrun_errors: add(a.buffer_overrun_errors, b.buffer_overrun_errors),
        dlid_mapping_errors: add(a.dlid_mapping_errors, b.dlid_mapping_errors),
        vl_mapping_errors: add(a.vl_mapping_errors, b.vl_mapping_errors),
        looping_errors: add(a.looping_errors, b.looping_errors),
        ..a
    }
}

fn sum_xmit_details(
    a: PortXmitDiscardDetails,
    b: PortXmitDiscardDetails,
) -> PortXmitDiscardDetails {
    let add = |x: u16, y: u16| x.saturating_add(y);
    PortXmitDiscardDetails {
        inactive_discards: add(a.inactive_discards, b.inactive_discards),
        neighbor_mtu_discards: add(a.neighbor_mtu_discards, b.neighbor_mtu_discards),
        sw_lifetime_limit_discards: add(a.sw_lifetime_limit_discards, b.sw_lifetime_limit_discards),
        sw_hoq_lifetime_limit_discards: add(
            a.sw_hoq_lifetime_limit_discards,
            b.sw_hoq_lifetime_limit_discards,
        ),
        ..a
    }
}

fn sum_extended(a: PortCountersExtended, b: PortCountersExtended) -> PortCountersExtended {
    PortCountersExtended {
        xmit_data: a.xmit_data.saturating_add(b.xmit_data),
        rcv_data: a.rcv_data.saturating_add(b.rcv_data),
        xmit_pkts: a.xmit_pkts.saturating_add(b.xmit_pkts),
        rcv_pkts: a.rcv_pkts.saturating_add(b.rcv_pkts),
        unicast_xmit_pkts: a.unicast_xmit_pkts.saturating_add(b.unicast_xmit_pkts),
        unicast_rcv_pkts: a.unicast_rcv_pkts.saturating_add(b.unicast_rcv_pkts),
        ..a
    }
}

/// A counter attribute a PMA answers: how a query names its port and what
/// it clears, how one port's counters read and several ports' sum.
trait CounterAttribute: Sized + Default {
    /// The query carried by a request's data; `None` if it is short.
    fn query(data: &[u8]) -> Option<Self>;
    /// Its PortSelect.
    fn port_select(&self) -> u8;
    /// Clears at `c` what this query's CounterSelect names.
    fn clear(&self, c: &mut PortCounts);
    /// One port's counters.
    fn read(c: &PortCounts) -> Self;
    /// Two sums' sum, each counter stopping at its largest value.
    fn add(a: Self, b: Self) -> Self;
    /// The answer's data: these counters with the query's selects.
    fn answer(self, q: &Self) -> Option<Vec<u8>>;
}

/// `impl CounterAttribute for $t`: a port's counters read with `$read`,
/// several ports' summed with `$add`, a query's CounterSelect cleared with
/// `$clear(counts, select)`; an answer repeats the query's PortSelect,
/// CounterSelect and `$extra` selects.
macro_rules! counter_attribute {
    ($t:ident, read $read:path, add $add:path, clear $clear:expr $(, $extra:ident)*) => {
        impl CounterAttribute for $t {
            fn query(data: &[u8]) -> Option<Self> {
                $t::decode(data).ok()
            }
            fn port_select(&self) -> u8 {
                self.port_select
            }
            fn clear(&self, c: &mut PortCounts) {
                let clear: fn(&mut PortCounts, u16) = $clear;
                clear(c, self.counter_select);
            }
            fn read(c: &PortCounts) -> Self {
                $read(c)
            }
            fn add(a: Self, b: Self) -> Self {
                $add(a, b)
            }
            fn answer(self, q: &Self) -> Option<Vec<u8>> {
                let a = Self {
                    port_select: q.port_select,
                    counter_select: q.counter_select,
                    $($extra: q.$extra,)*
                    ..self
                };
                a.to_bytes().ok().map(|b| b.to_vec())
            }
        }
    };
}

counter_attribute!(PortCounters, read PortCounts::counters, add sum,
    clear |c, s| c.clear(s), counter_select2);
counter_attribute!(PortCountersExtended, read PortCounts::extended, add sum_extended,
    clear |c, s| c.clear_extended(s));
counter_attribute!(PortRcvErrorDetails, read PortCounts::rcv_error_details, add sum_rcv_details,
    clear |c, s| PortCounts::clear_details(&mut c.rcv_details, s));
counter_attribute!(PortXmitDiscardDetails, read PortCounts::xmit_discard_details,
    add sum_xmit_details, clear |c, s| PortCounts::clear_details(&mut c.xmit_details, s));

/// Counts one more, stopping at the largest value.
fn bump(c: &mut u16) {
    *c = c.saturating_add(1);
}

/// MAD status: the class version is not supported.
const STATUS_BAD_VERSION: u16 = 1 << 2;
/// MAD status: the method is not supported.
const STATUS_BAD_METHOD: u16 = 2 << 2;
/// MAD status: the method and attribute combination is not supported.
const STATUS_BAD_ATTRIBUTE: u16 = 3 << 2;
/// MAD status: a field of the attribute or its modifier is invalid.
pub(super) const STATUS_BAD_FIELD: u16 = 7 << 2;

/// Zeroed counters for a node of `ports` ports, indexed by port number
/// (port 0: a switch's management port).
pub(super) fn fresh(ports: u8) -> Box<[PortCounts]> {
    vec![PortCounts::default(); usize::from(ports) + 1].into_boxed_slice()
}

impl Fabric {
    fn counts(&mut self, node: usize, port: u8) -> Option<&mut PortCounts> {
        self.counters.get_mut(node)?.get_mut(usize::from(port))
    }

    /// A packet crossed the cable from (node, port) to (peer, pport);
    /// `lost` if the simulator lost it on the way.
    pub(super) fn count_crossing(&mut self, from: (usize, u8), to: (usize, u8), lost: bool) {
        self.sample_observe(from.0, from.1);
        self.sample_observe(to.0, to.1);
        if let Some(c) = self.counts(from.0, from.1) {
            c.sent();
        }
        if let Some(c) = self.counts(to.0, to.1) {
            if lost {
                c.rcv_errors = c.rcv_errors.saturating_add(1);
                bump(&mut c.rcv_details[LOCAL_PHYSICAL]);
            } else {
                c.received();
            }
        }
    }

    /// A packet that could not leave by (node, port), and why.
    pub(super) fn count_xmit_discard(&mut self, node: usize, port: u8, why: Discard) {
        if let Some(c) = self.counts(node, port) {
            c.xmit_discards = c.xmit_discards.saturating_add(1);
            bump(
                &mut c.xmit_details[match why {
                    Discard::Inactive => INACTIVE,
                    Discard::Lifetime => SW_LIFETIME,
                }],
            );
        }
    }

    /// A LID-routed packet that came in by (node, port) of a switch with
    /// no route for it.
    pub(super) fn count_relay_error(&mut self, node: usize, port: u8) {
        if let Some(c) = self.counts(node, port) {
            c.rcv_switch_relay_errors = c.rcv_switch_relay_errors.saturating_add(1);
            bump(&mut c.rcv_details[DLID_MAPPING]);
        }
    }

    /// The link at (node, port) went down.
    pub(super) fn count_link_downed(&mut self, node: usize, port: u8) {
        if let Some(c) = self.counts(node, port) {
            c.link_downed = c.link_downed.saturating_add(1);
        }
    }

    /// The counters of (node, port), if there is such a port.
    pub fn port_counts(&self, node: usize, port: u8) -> Option<&PortCounts> {
        self.counters.get(node)?.get(usize::from(port))
    }

    /// Walks a GS packet (a MAD not of the SMI) from `src` towards `dlid`
    /// through the installed LFTs, as [`Fabric::deliver_to`] does, counting
    /// each cable it crosses at both ends, and where it is dropped as an
    /// SMP would be: the node that takes it, if one does.
    pub fn carry(&mut self, src: usize, dlid: Lid) -> Option<usize> {
        // What befell it, in a buffer kept between packets.
        let mut hops = std::mem::take(&mut self.carried);
        hops.clear();
        let to = self.route_gs(src, dlid, |h| hops.push(h));
        for &h in &hops {
            match h {
                GsHop::Egress(n, p) => match self.topo.peer_of(n, p) {
                    Some(to) => self.count_crossing((n, p), to, false),
                    None => self.count_xmit_discard(n, p, Discard::Inactive),
                },
                GsHop::NoRoute(n, p) => self.count_relay_error(n, p),
                GsHop::Expired(n, p) => self.count_xmit_discard(n, p, Discard::Lifetime),
            }
        }
        self.carried = hops;
        to
    }

    /// The PMA that the PerfMgt MAD `mad` reached at `node` by its port
    /// `port` answers it: its response, with the MAD status saying what
    /// it refused. A switch has one PMA, at its port 0, whatever port the
    /// request came in by; a CA has one at each port, which answers for
    /// that port alone (as ibsim's and the kernel's CA PMAs do), so a
    /// PortSelect naming another port of the CA is refused. `None` for
    /// what no agent answers (a response, not a PerfMgt MAD of base
    /// version 1, or a port the node does not have).
    pub fn pma_answer(&mut self, node: usize, port: u8, mad: &[u8]) -> Option<[u8; 256]> {
        let req: &[u8; 256] = mad.get(..256)?.try_into().ok()?;
        if req[0] != 1 || req[1] != PERF_CLASS || req[3] & 0x80 != 0 {
            return None;
        }
        let at = self.pma_port(node, port)?;
        let mut out = *req;
        out[3] = 0x81; // GetResp
        let (status, data) = self.pma_data(node, at, req);
        out[4..6].copy_from_slice(&status.to_be_bytes());
        if let Some(d) = data {
            out[perf::DATA_OFFSET..].fill(0);
            out[perf::DATA_OFFSET..perf::DATA_OFFSET + d.len()].copy_from_slice(&d);
        }
        Some(out)
    }

    /// The port of `node`'s PMA that a request reaching it by `port`
    /// finds: a switch's 0, a CA's `port` itself; `None` for a port the
    /// CA does not have.
    pub(super) fn pma_port(&self, node: usize, port: u8) -> Option<u8> {
        let ports = self.topo.nodes.get(node)?.ports;
        match self.nodes.get(node)? {
            super::SimNode::Switch(_) => Some(0),
            _ => (1..=ports).contains(&port).then_some(port),
        }
    }

    /// The MAD status and, when it is 0, the attribute data the PMA at
    /// port `at` of `node` ([`Fabric::pma_port`]) answers.
    fn pma_data(&mut self, node: usize, at: u8, req: &[u8; 256]) -> (u16, Option<Vec<u8>>) {
        if req[2] != PERF_CLASS_VERSION {
            return (STATUS_BAD_VERSION, None);
        }
        let set = match req[3] {
            0x01 => false,
            0x02 => true,
            _ => return (STATUS_BAD_METHOD, None),
        };
        let attr = u16::from_be_bytes([req[16], req[17]]);
        let data = &req[perf::DATA_OFFSET..];
        match attr {
            ATTR_CLASS_PORT_INFO if !set => {
                let cpi = ClassPortInfo {
                    base_version: 1,
                    class_version: PERF_CLASS_VERSION,
                    capability_mask: PMA_CAPABILITIES,
                    resp_time_value: 18,
                    ..ClassPortInfo::default()
                };
                (0, cpi.to_bytes().ok().map(|b| b.to_vec()))
            }
            ATTR_PORT_COUNTERS => self.counter_answer::<PortCounters>(node, at, set, data),
            ATTR_PORT_COUNTERS_EXTENDED => {
                self.counter_answer::<PortCountersExtended>(node, at, set, data)
            }
            ATTR_PORT_RCV_ERROR_DETAILS => {
                self.counter_answer::<PortRcvErrorDetails>(node, at, set, data)
            }
            ATTR_PORT_XMIT_DISCARD_DETAILS => {
                self.counter_answer::<PortXmitDiscardDetails>(node, at, set, data)
            }
            ATTR_PORT_SAMPLES_CONTROL => self.samples_control(node, at, set, data),
            ATTR_PORT_SAMPLES_RESULT if !set => self.samples_result(node, at, false),
            ATTR_PORT_SAMPLES_RESULT_EXTENDED if !set => self.samples_result(node, at, true),
            _ => (STATUS_BAD_ATTRIBUTE, None),
        }
    }

    /// The answer of the PMA at port `at` of `node` to a Get or Set
    /// (`set`) of the counter attribute `T` whose query is `data`: its MAD
    /// status and data.
    fn counter_answer<T: CounterAttribute>(
        &mut self,
        node: usize,
        at: u8,
        set: bool,
        data: &[u8],
    ) -> (u16, Option<Vec<u8>>) {
        let Some(q) = T::query(data) else {
            return (STATUS_BAD_FIELD, None);
        };
        let clear = |c: &mut PortCounts| q.clear(c);
        match self.gather((node, at), q.port_select(), set, clear, T::read, T::add) {
            Some(t) => (0, t.answer(&q)),
            None => (STATUS_BAD_FIELD, None),
        }
    }

    /// The counters of the ports PortSelect `sel` names to the PMA `pma`
    /// (node, port: [`Fabric::pma_port`]), read with `read` and summed
    /// with `add` — cleared with `clear` first, for a Set; `None` when
    /// `sel` names no port that PMA answers for.
    fn gather<T: Default>(
        &mut self,
        (node, at): (usize, u8),
        sel: u8,
        set: bool,
        clear: impl Fn(&mut PortCounts),
        read: fn(&PortCounts) -> T,
        add: fn(T, T) -> T,
    ) -> Option<T> {
        let mut total: Option<T> = None;
        for p in self.selected(node, at, sel)? {
            let Some(c) = self.counts(node, p) else {
                continue;
            };
            if set {
                clear(c);
            }
            let now = read(c);
            total = Some(match total {
                Some(t) => add(t, now),
                None => now,
            });
        }
        Some(total.unwrap_or_default())
    }

    /// The ports PortSelect `sel` names to the PMA at port `at` of
    /// `node` ([`Fabric::pma_port`]): at a switch one of its ports (port 0
    /// among them) or all of them (0xFF); at a CA its port `at`, named or
    /// as 0xFF (a CA port's PMA answers for that port alone, as the
    /// kernel's ipath PMA does; ibsim's and qib's refuse 0xFF there).
    /// `None` for a port that PMA does not answer for.
    pub(super) fn selected(
        &self,
        node: usize,
        at: u8,
        sel: u8,
    ) -> Option<std::ops::RangeInclusive<u8>> {
        let ports = self.topo.nodes.get(node)?.ports;
        if !matches!(self.nodes.get(node)?, super::SimNode::Switch(_)) {
            let own = (1..=ports).contains(&at) && (sel == at || sel == ALL_PORTS);
            return own.then_some(at..=at);
        }
        match sel {
            ALL_PORTS => Some(0..=ports),
            p if p <= ports => Some(p..=p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_clear_on_their_own_and_stop_at_their_largest_value() {
        let mut c = PortCounts::default();
        for _ in 0..3 {
            c.sent();
        }
        c.received();
        assert_eq!(c.counters().xmit_pkts, 3);
        assert_eq!(c.counters().xmit_data, 3 * 72);
        assert_eq!(c.extended().unicast_xmit_pkts, 3);
        c.clear(select::XMIT_PKTS);
        assert_eq!(c.counters().xmit_pkts, 0);
        assert_eq!(c.counters().xmit_data, 216, "only what was selected");
        assert_eq!(c.extended().xmit_pkts, 3, "PortCountersExtended is its own");
        c.sent();
        assert_eq!((c.counters().xmit_pkts, c.extended().xmit_pkts), (1, 4));
        c.clear_extended(select_extended::UNICAST_XMIT_PKTS);
        assert_eq!(c.extended().unicast_xmit_pkts, 0);
        assert_eq!(c.extended().xmit_pkts, 4);
        c.total[XMIT_DATA] = u64::from(u32::MAX) * 2;
        assert_eq!(c.counters().xmit_data, u32::MAX);
        c.rcv_errors = u16::MAX;
        assert_eq!(sum(c.counters(), c.counters()).rcv_errors, u16::MAX);
    }

    #[test]
    fn details_clear_bit_by_bit_and_sum_without_wrapping() {
        let mut c = PortCounts {
            rcv_details: [1, 2, 3, 4, 5, u16::MAX],
            xmit_details: [6, 7, 8, 9],
            ..PortCounts::default()
        };
        let r = c.rcv_error_details();
        assert_eq!((r.local_physical_errors, r.looping_errors), (1, u16::MAX));
        assert_eq!(
            PortRcvErrorDetails::add(r, r).looping_errors,
            u16::MAX,
            "stops at its largest value"
        );
        assert_eq!(PortRcvErrorDetails::add(r, r).vl_mapping_errors, 10);
        PortCounts::clear_details(&mut c.rcv_details, 0b10_1001);
        assert_eq!(c.rcv_details, [0, 2, 3, 0, 5, 0]);
        PortCounts::clear_details(&mut c.xmit_details, 0xFFF4);
        assert_eq!(
            c.xmit_details,
            [6, 7, 0, 9],
            "bits past the four clear nothing"
        );
        let x = c.xmit_discard_details();
        assert_eq!(x.sw_hoq_lifetime_limit_discards, 9);
        // An answer repeats the query's selects around the counters.
        let q = PortXmitDiscardDetails {
            port_select: 3,
            counter_select: 5,
            inactive_discards: 77,
            ..PortXmitDiscardDetails::default()
        };
        let a = PortXmitDiscardDetails::decode(&x.answer(&q).unwrap()).unwrap();
        assert_eq!((a.port_select, a.counter_select), (3, 5));
        assert_eq!(a.inactive_discards, 6, "the port's, not the query's");
    }
}
