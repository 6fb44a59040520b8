//! Every simulated port's Performance Management Agent (class 0x04): the
//! counters of what crossed its cable, and the answers to `perfquery` and
//! `ibqueryerrors` (ClassPortInfo, PortCounters, PortCountersExtended;
//! Get, and Set to clear).
//!
//! What is counted, per port, as IBA 16.1.3.5 says a port counts it:
//! * each packet put on its cable: PortXmitPkts and PortXmitData (72
//!   words of 4 octets a MAD packet: LRH 8, BTH 12, DETH 8, MAD 256,
//!   ICRC 4 — the octets between the start delimiter and the VCRC);
//! * each packet taken off it: PortRcvPkts and PortRcvData, or, for one
//!   the simulator loses on the cable (`SimConfig::loss`), PortRcvErrors;
//! * a packet sent out of a port with no cable: PortXmitDiscards;
//! * a LID-routed packet a switch has no route for: PortRcvSwitchRelayErrors
//!   at the port it came in by; one that has crossed too many switches
//!   (a loop): PortXmitDiscards at the port it would have left by;
//! * a cable that fails, or a neighbour that goes down: LinkDownedCounter
//!   at both ends.
//!
//! Every packet is unicast (the simulator carries no multicast data), so
//! the extended unicast counters follow the packet counters, and the
//! multicast ones stay 0. A node that is powered up again starts from 0.
//! The 32-bit counters of PortCounters stop at their largest value; each
//! attribute is cleared on its own, as on an HCA.

use super::Fabric;
use mad_core::perf::{
    self, select, select_extended, PortCounters, PortCountersExtended, ALL_PORTS,
    ATTR_CLASS_PORT_INFO, ATTR_PORT_COUNTERS, ATTR_PORT_COUNTERS_EXTENDED, PERF_CLASS,
    PERF_CLASS_VERSION,
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
}

impl PortCounts {
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

/// MAD status: the class version is not supported.
const STATUS_BAD_VERSION: u16 = 1 << 2;
/// MAD status: the method is not supported.
const STATUS_BAD_METHOD: u16 = 2 << 2;
/// MAD status: the method and attribute combination is not supported.
const STATUS_BAD_ATTRIBUTE: u16 = 3 << 2;
/// MAD status: a field of the attribute or its modifier is invalid.
const STATUS_BAD_FIELD: u16 = 7 << 2;

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
        if let Some(c) = self.counts(from.0, from.1) {
            c.sent();
        }
        if let Some(c) = self.counts(to.0, to.1) {
            if lost {
                c.rcv_errors = c.rcv_errors.saturating_add(1);
            } else {
                c.received();
            }
        }
    }

    /// A packet that could not leave by (node, port).
    pub(super) fn count_xmit_discard(&mut self, node: usize, port: u8) {
        if let Some(c) = self.counts(node, port) {
            c.xmit_discards = c.xmit_discards.saturating_add(1);
        }
    }

    /// A LID-routed packet that came in by (node, port) of a switch with
    /// no route for it.
    pub(super) fn count_relay_error(&mut self, node: usize, port: u8) {
        if let Some(c) = self.counts(node, port) {
            c.rcv_switch_relay_errors = c.rcv_switch_relay_errors.saturating_add(1);
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
    /// each cable it crosses at both ends: the node that takes it, if one
    /// does.
    pub fn carry(&mut self, src: usize, dlid: Lid) -> Option<usize> {
        // The egress ports crossed, in a buffer kept between packets.
        let mut hops = std::mem::take(&mut self.carried);
        hops.clear();
        let to = self.route_gs(src, dlid, |n, p| hops.push((n, p)));
        for &(n, p) in &hops {
            match self.topo.peer_of(n, p) {
                Some(to) => self.count_crossing((n, p), to, false),
                None => self.count_xmit_discard(n, p),
            }
        }
        self.carried = hops;
        to
    }

    /// The PMA of `node` answers the PerfMgt MAD `mad` (a request that
    /// reached it): its response, with the MAD status saying what it
    /// refused. `None` for what no agent answers (a response, or not a
    /// PerfMgt MAD of base version 1).
    pub fn pma_answer(&mut self, node: usize, mad: &[u8]) -> Option<[u8; 256]> {
        let req: &[u8; 256] = mad.get(..256)?.try_into().ok()?;
        if req[0] != 1 || req[1] != PERF_CLASS || req[3] & 0x80 != 0 {
            return None;
        }
        let mut out = *req;
        out[3] = 0x81; // GetResp
        let (status, data) = self.pma_data(node, req);
        out[4..6].copy_from_slice(&status.to_be_bytes());
        if let Some(d) = data {
            out[perf::DATA_OFFSET..].fill(0);
            out[perf::DATA_OFFSET..perf::DATA_OFFSET + d.len()].copy_from_slice(&d);
        }
        Some(out)
    }

    /// The MAD status and, when it is 0, the attribute data to answer.
    fn pma_data(&mut self, node: usize, req: &[u8; 256]) -> (u16, Option<Vec<u8>>) {
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
            ATTR_PORT_COUNTERS => {
                let Ok(q) = PortCounters::decode(data) else {
                    return (STATUS_BAD_FIELD, None);
                };
                let clear = |c: &mut PortCounts| c.clear(q.counter_select);
                let Some(t) =
                    self.gather(node, q.port_select, set, clear, PortCounts::counters, sum)
                else {
                    return (STATUS_BAD_FIELD, None);
                };
                let a = PortCounters {
                    port_select: q.port_select,
                    counter_select: q.counter_select,
                    counter_select2: q.counter_select2,
                    ..t
                };
                (0, a.to_bytes().ok().map(|b| b.to_vec()))
            }
            ATTR_PORT_COUNTERS_EXTENDED => {
                let Ok(q) = PortCountersExtended::decode(data) else {
                    return (STATUS_BAD_FIELD, None);
                };
                let clear = |c: &mut PortCounts| c.clear_extended(q.counter_select);
                let Some(t) = self.gather(
                    node,
                    q.port_select,
                    set,
                    clear,
                    PortCounts::extended,
                    sum_extended,
                ) else {
                    return (STATUS_BAD_FIELD, None);
                };
                let a = PortCountersExtended {
                    port_select: q.port_select,
                    counter_select: q.counter_select,
                    ..t
                };
                (0, a.to_bytes().ok().map(|b| b.to_vec()))
            }
            _ => (STATUS_BAD_ATTRIBUTE, None),
        }
    }

    /// The counters of the ports PortSelect `sel` names at `node`, read
    /// with `read` and summed with `add` — cleared with `clear` first, for
    /// a Set; `None` when `sel` names no port there.
    fn gather<T: Default>(
        &mut self,
        node: usize,
        sel: u8,
        set: bool,
        clear: impl Fn(&mut PortCounts),
        read: fn(&PortCounts) -> T,
        add: fn(T, T) -> T,
    ) -> Option<T> {
        let mut total: Option<T> = None;
        for p in self.selected(node, sel)? {
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

    /// The ports PortSelect `sel` names at `node`: one of its ports (a
    /// switch's port 0 among them), or all of them (0xFF). `None` for a
    /// port it does not have.
    fn selected(&self, node: usize, sel: u8) -> Option<std::ops::RangeInclusive<u8>> {
        let ports = self.topo.nodes.get(node)?.ports;
        let first = u8::from(!matches!(self.nodes[node], super::SimNode::Switch(_)));
        match sel {
            ALL_PORTS => Some(first..=ports),
            p if (first..=ports).contains(&p) => Some(p..=p),
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
}
