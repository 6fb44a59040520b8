//! The simulated ports' Performance Management Agents: every cable
//! crossing counted once at each end, losses as receive errors, failed
//! cables as LinkDowned, discards and relay errors with their causes in
//! the details attributes, and the PMA's answers and refusals (Get, Set
//! to clear, PortSelect 0xFF, the MAD status of what it does not do), and
//! the sampling counters of PortSamplesControl and PortSamplesResult.

use fabric::sim::{
    Fabric, FabricEvent, SimConfig, MAD_PACKET_WORDS, PMA_CAPABILITIES, SAMPLE_TICK_NS,
};
use mad_core::attr::NodeType;
use mad_core::perf::{
    self, select, select_extended, PortCounters, PortCountersExtended, PortRcvErrorDetails,
    PortXmitDiscardDetails, ALL_PORTS, ATTR_CLASS_PORT_INFO, ATTR_PORT_COUNTERS,
    ATTR_PORT_COUNTERS_EXTENDED, ATTR_PORT_RCV_ERROR_DETAILS, ATTR_PORT_SAMPLES_CONTROL,
    ATTR_PORT_SAMPLES_RESULT, ATTR_PORT_SAMPLES_RESULT_EXTENDED, ATTR_PORT_XMIT_DISCARD_DETAILS,
};
use mad_core::perf::{
    sample_counter, sample_status, PortSamplesControl, PortSamplesResult, PortSamplesResultExtended,
};
use mad_core::sa::ClassPortInfo;
use mad_core::{AttributeId, MKey, Method, Smp};
use smi::sm::SmConfig;

fn up(spec: &str, sim: SimConfig) -> Fabric {
    let (f, sm, up) = fabric::sim::bring_up(spec, sim, SmConfig::default()).unwrap();
    assert!(up, "{spec}: {:?}", sm.error());
    f
}

/// Every port of every node, a switch's port 0 among them: (node, port).
fn ports(f: &Fabric) -> Vec<(usize, u8)> {
    (0..f.nodes.len())
        .flat_map(|n| {
            let first = u8::from(f.topo.nodes[n].kind != NodeType::Switch);
            (first..=f.topo.nodes[n].ports).map(move |p| (n, p))
        })
        .collect()
}

/// A PerfMgt request of `attr` with `data` at its data offset.
fn request(method: u8, attr: u16, data: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, perf::PERF_CLASS, perf::PERF_CLASS_VERSION, method]);
    m[8..16].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[perf::DATA_OFFSET..perf::DATA_OFFSET + data.len()].copy_from_slice(data);
    m
}

fn status(answer: &[u8; 256]) -> u16 {
    u16::from_be_bytes([answer[4], answer[5]])
}

/// The port a request for PortSelect `sel` reaches `node` by: any of a
/// switch's (its one PMA is at port 0), the port asked about at a CA
/// (whose ports each have a PMA), port 1 for 0xFF or port 0.
fn by(f: &Fabric, node: usize, sel: u8) -> u8 {
    match f.topo.nodes[node].kind {
        NodeType::Switch => 1,
        _ if sel == ALL_PORTS || sel == 0 => 1,
        _ => sel,
    }
}

/// Get (or, with `clear`, Set) of attribute `attr` at `node` carrying
/// `query` (whose byte 1 is PortSelect, where it has one): the answer's
/// data, once its status, method and TID are checked.
fn ask(f: &mut Fabric, node: usize, attr: u16, clear: bool, query: &[u8]) -> Vec<u8> {
    let port = by(f, node, query.get(1).copied().unwrap_or(ALL_PORTS));
    ask_at(f, node, port, attr, clear, query)
}

/// [`ask`] of the PMA that a request reaching `node` by `port` finds.
fn ask_at(f: &mut Fabric, node: usize, port: u8, attr: u16, clear: bool, query: &[u8]) -> Vec<u8> {
    let method = if clear { 0x02 } else { 0x01 };
    let a = f
        .pma_answer(node, port, &request(method, attr, query))
        .unwrap();
    assert_eq!(status(&a), 0, "node {node} attribute {attr:#06x}");
    assert_eq!(a[3], 0x81, "a GetResp");
    assert_eq!(a[8..16], 0x0102_0304_0506_0708u64.to_be_bytes(), "its TID");
    a[perf::DATA_OFFSET..].to_vec()
}

/// `fn $name(f, node, port, clear) -> $t`: Get (or, with `clear`, Set
/// selecting it) of the counter attribute `$t` of `port` at `node`.
macro_rules! reader {
    ($name:ident, $t:ident, $attr:expr) => {
        fn $name(f: &mut Fabric, node: usize, port: u8, clear: Option<u16>) -> $t {
            let q = $t {
                port_select: port,
                counter_select: clear.unwrap_or(0),
                ..$t::default()
            };
            let a = ask(f, node, $attr, clear.is_some(), &q.to_bytes().unwrap());
            $t::decode(&a).unwrap()
        }
    };
}

reader!(counters, PortCounters, ATTR_PORT_COUNTERS);
reader!(extended, PortCountersExtended, ATTR_PORT_COUNTERS_EXTENDED);
reader!(
    rcv_details,
    PortRcvErrorDetails,
    ATTR_PORT_RCV_ERROR_DETAILS
);
reader!(
    xmit_details,
    PortXmitDiscardDetails,
    ATTR_PORT_XMIT_DISCARD_DETAILS
);

/// Every port's (PortCounters, PortRcvErrorDetails, PortXmitDiscardDetails).
type Errors = Vec<(PortCounters, PortRcvErrorDetails, PortXmitDiscardDetails)>;

/// Every port's errors: its counters, the traffic counters left out.
fn errors(f: &mut Fabric) -> Errors {
    ports(f)
        .into_iter()
        .map(|(n, p)| {
            (
                PortCounters {
                    xmit_data: 0,
                    rcv_data: 0,
                    xmit_pkts: 0,
                    rcv_pkts: 0,
                    ..counters(f, n, p, None)
                },
                rcv_details(f, n, p, None),
                xmit_details(f, n, p, None),
            )
        })
        .collect()
}

fn first(f: &Fabric, kind: NodeType) -> usize {
    (0..f.nodes.len())
        .find(|&n| f.topo.nodes[n].kind == kind)
        .unwrap()
}

#[test]
fn every_crossing_is_counted_once_at_each_end() {
    for spec in ["mport-ntree:4:2", "fat-tree-324", "random:12:5"] {
        let mut f = up(spec, SimConfig::default());
        let (mut xmit, mut rcv, mut cables) = (0u64, 0u64, 0);
        for (n, p) in ports(&f) {
            let c = counters(&mut f, n, p, None);
            let x = extended(&mut f, n, p, None);
            assert_eq!(u64::from(c.xmit_pkts), x.xmit_pkts, "{spec}: {n}/{p}");
            assert_eq!(x.xmit_data, x.xmit_pkts * MAD_PACKET_WORDS);
            assert_eq!(x.rcv_data, x.rcv_pkts * MAD_PACKET_WORDS);
            assert_eq!(x.unicast_rcv_pkts, x.rcv_pkts);
            assert_eq!(x.multicast_xmit_pkts, 0);
            assert_eq!(
                (c.rcv_errors, c.xmit_discards, c.link_downed),
                (0, 0, 0),
                "{spec}: {n}/{p}"
            );
            xmit += x.xmit_pkts;
            rcv += x.rcv_pkts;
            if let Some((m, q)) = f.topo.peer_of(n, p) {
                cables += 1;
                // What one end sent, the other received.
                let other = extended(&mut f, m, q, None);
                assert_eq!(x.xmit_pkts, other.rcv_pkts, "{spec}: {n}/{p} to {m}/{q}");
            }
        }
        assert_eq!(xmit, f.stats.hops, "{spec}: one transmission a crossing");
        assert_eq!(rcv, f.stats.hops, "{spec}");
        assert!(xmit > 0 && cables > 0);
        // A switch's PortSelect 0xFF is the sum of its ports.
        let s = first(&f, NodeType::Switch);
        let all = counters(&mut f, s, ALL_PORTS, None);
        let each: u32 = (0..=f.topo.nodes[s].ports)
            .map(|p| counters(&mut f, s, p, None).xmit_pkts)
            .sum();
        assert_eq!(all.xmit_pkts, each, "{spec}");
        assert_eq!(all.port_select, ALL_PORTS);
        eprintln!("{spec}: {xmit} packets counted at both ends of {cables} cable ends");
    }
}

#[test]
fn a_lossy_cable_counts_receive_errors_and_a_failed_one_link_downed() {
    let sim = SimConfig {
        loss: 0.02,
        seed: 7,
        ..SimConfig::default()
    };
    let mut f = up("mport-ntree:4:2", sim);
    let (mut rcv, mut errors) = (0u64, 0u64);
    for (n, p) in ports(&f) {
        let c = counters(&mut f, n, p, None);
        rcv += u64::from(c.rcv_pkts);
        errors += u64::from(c.rcv_errors);
    }
    assert!(f.stats.lost > 0, "the seed loses some");
    assert_eq!(errors, f.stats.lost);
    assert_eq!(rcv + errors, f.stats.hops);
    // Each a local physical error in the details, port for port, and
    // nothing else there.
    for (c, r, x) in self::errors(&mut f) {
        assert_eq!(r.local_physical_errors, c.rcv_errors);
        assert_eq!(
            r,
            PortRcvErrorDetails {
                port_select: r.port_select,
                local_physical_errors: c.rcv_errors,
                ..PortRcvErrorDetails::default()
            }
        );
        assert_eq!(x.inactive_discards, c.xmit_discards);
    }

    let mut f = up("mport-ntree:4:2", SimConfig::default());
    let s = first(&f, NodeType::Switch);
    let p = (1..=f.topo.nodes[s].ports)
        .find(|&p| f.topo.peer_of(s, p).is_some())
        .unwrap();
    let (m, q) = f.topo.peer_of(s, p).unwrap();
    let at = f.now_ns() + 1_000;
    f.schedule(at, FabricEvent::LinkDown(s, p));
    f.run_to_quiescence();
    assert_eq!(counters(&mut f, s, p, None).link_downed, 1);
    assert_eq!(counters(&mut f, m, q, None).link_downed, 1);
    let others: u32 = ports(&f)
        .into_iter()
        .filter(|&x| x != (s, p) && x != (m, q))
        .map(|(n, x)| u32::from(counters(&mut f, n, x, None).link_downed))
        .sum();
    assert_eq!(others, 0, "only the two ends of the cable");
    // Cleared by a Set that selects it, and only it.
    let before = counters(&mut f, s, p, None);
    let after = counters(&mut f, s, p, Some(select::LINK_DOWNED));
    assert_eq!(after.link_downed, 0);
    assert_eq!(after.xmit_pkts, before.xmit_pkts);
    // A node powered up again starts from nothing (but for the traps of
    // its cables coming back, on their way to the SM).
    let old = extended(&mut f, m, q, None);
    assert!(old.rcv_pkts > 4, "{old:?}");
    let at = f.now_ns() + 1_000;
    f.schedule(at, FabricEvent::NodeDown(m));
    f.schedule(at + 1_000, FabricEvent::NodeUp(m));
    f.run_to_quiescence();
    let x = extended(&mut f, m, q, None);
    assert!(x.xmit_pkts + x.rcv_pkts <= 2, "{x:?}");
    assert_eq!(counters(&mut f, m, q, None).link_downed, 0);
}

/// The ports whose errors differ between `a` and `b`, with `b`'s.
fn changed(f: &Fabric, a: &Errors, b: &Errors) -> Vec<((usize, u8), Errors)> {
    ports(f)
        .into_iter()
        .zip(a.iter().zip(b))
        .filter(|(_, (x, y))| x != y)
        .map(|(p, (_, y))| (p, vec![*y]))
        .collect()
}

#[test]
fn discards_and_relay_errors_are_counted_with_their_causes() {
    let mut f = up("mport-ntree:4:2", SimConfig::default());
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&n| f.topo.nodes[n].kind == NodeType::ChannelAdapter)
        .collect();
    let (src, dst) = (cas[0], cas[cas.len() - 1]);
    let (s, p) = f.topo.peer_of(dst, 1).unwrap();
    // The destination's cable fails; the LFTs still send its LID there.
    let at = f.now_ns() + 1_000;
    f.schedule(at, FabricEvent::LinkDown(s, p));
    f.run_to_quiescence();
    let before = errors(&mut f);
    let get = Smp::lid_routed(Method::Get, AttributeId::NodeInfo, 0, 0x91, MKey(0));
    assert!(f.inject(src, get, f.nodes[dst].lid().0));
    f.run_to_quiescence();
    let after = errors(&mut f);
    // One discard, at the switch port whose cable is gone: inactive.
    let d = changed(&f, &before, &after);
    assert_eq!(d.len(), 1, "{d:?}");
    let ((n, q), e) = &d[0];
    assert_eq!((*n, *q), (s, p));
    let (c, r, x) = e[0];
    let i = ports(&f).iter().position(|&x| x == (s, p)).unwrap();
    assert_eq!(c.xmit_discards, before[i].0.xmit_discards + 1);
    assert_eq!(x.inactive_discards, before[i].2.inactive_discards + 1);
    assert_eq!(x.sw_lifetime_limit_discards, 0);
    assert_eq!(r, before[i].1);

    // A directed-route SMP whose path leaves by that port: discarded
    // there too, by the switch's SMI.
    let before = after;
    let next = (0..f.nodes.len())
        .find(|&n| n != dst && f.topo.peer_of(n, 1).is_some_and(|(m, _)| m == s))
        .expect("another CA on that switch");
    let path = mad_core::DrPath::from_ports(&[1, p]).unwrap();
    let get = Smp::directed(&path, Method::Get, AttributeId::NodeInfo, 0, 0x93, MKey(0));
    assert!(f.inject(next, get, 0xFFFF));
    f.run_to_quiescence();
    let after = errors(&mut f);
    let d = changed(&f, &before, &after);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, (s, p));
    assert_eq!(d[0].1[0].2.inactive_discards, 2);
    assert_eq!(d[0].1[0].0.xmit_discards, 2);

    // A GS MAD to the same host: the same port discards it.
    let before = after;
    assert_eq!(f.carry(src, f.nodes[dst].lid()), None);
    let after = errors(&mut f);
    let d = changed(&f, &before, &after);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, (s, p));
    assert_eq!(d[0].1[0].2.inactive_discards, 3);
    assert_eq!(d[0].1[0].0.xmit_discards, 3);

    // A LID no switch routes: a relay error where it came into the
    // first switch, a DLID mapping error in the details.
    let before = after;
    let get = Smp::lid_routed(Method::Get, AttributeId::NodeInfo, 0, 0x92, MKey(0));
    assert!(f.inject(src, get, 0xBFFF));
    f.run_to_quiescence();
    let after = errors(&mut f);
    let d = changed(&f, &before, &after);
    assert_eq!(d.len(), 1, "{d:?}");
    let ((n, q), e) = &d[0];
    assert_eq!((*n, *q), f.topo.peer_of(src, 1).unwrap());
    let i = ports(&f).iter().position(|x| x == &(*n, *q)).unwrap();
    let (c, r, _) = e[0];
    assert_eq!(
        c.rcv_switch_relay_errors,
        before[i].0.rcv_switch_relay_errors + 1
    );
    assert_eq!(r.dlid_mapping_errors, before[i].1.dlid_mapping_errors + 1);
    assert_eq!(r.local_physical_errors, before[i].1.local_physical_errors);

    // Each details attribute clears what its CounterSelect names, on its
    // own: PortCounters keeps its discard; the sum of a switch's ports
    // (PortSelect 0xFF) holds what one port does.
    let all = xmit_details(&mut f, s, ALL_PORTS, None);
    assert_eq!(
        all.inactive_discards,
        xmit_details(&mut f, s, p, None).inactive_discards
    );
    let x = xmit_details(&mut f, s, p, Some(1 << 1));
    assert_eq!(x.inactive_discards, 3, "bit 1 is PortNeighborMTUDiscards");
    let x = xmit_details(&mut f, s, p, Some(1 << 0));
    assert_eq!(x.inactive_discards, 0);
    assert_eq!(counters(&mut f, s, p, None).xmit_discards, 3);
    let r = rcv_details(&mut f, *n, *q, Some(0x3F));
    assert_eq!(r.dlid_mapping_errors, 0);
    assert_eq!(counters(&mut f, *n, *q, None).rcv_switch_relay_errors, 1);
}

#[test]
fn a_gs_packet_is_counted_along_its_route() {
    let mut f = up("fat-tree-324", SimConfig::default());
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&n| f.topo.nodes[n].kind == NodeType::ChannelAdapter)
        .collect();
    let (src, dst) = (cas[1], cas[cas.len() - 1]);
    let before: Vec<PortCountersExtended> = ports(&f)
        .into_iter()
        .map(|(n, p)| extended(&mut f, n, p, None))
        .collect();
    let (path, _) = f.trace(src, f.nodes[dst].lid());
    assert_eq!(f.carry(src, f.nodes[dst].lid()), Some(dst));
    let mut sent = Vec::new();
    let mut got = Vec::new();
    for (i, (n, p)) in ports(&f).into_iter().enumerate() {
        let x = extended(&mut f, n, p, None);
        let b = before[i];
        match (x.xmit_pkts - b.xmit_pkts, x.rcv_pkts - b.rcv_pkts) {
            (0, 0) => {}
            (1, 0) => sent.push((n, p)),
            (0, 1) => got.push((n, p)),
            d => panic!("{n}/{p}: {d:?}"),
        }
    }
    // Out of each egress on the route (the CA's own port first), into
    // the port at the other end of each of those cables.
    let egress: Vec<(usize, u8)> = path.into_iter().filter(|&(_, p)| p != 0).collect();
    assert_eq!(sent, {
        let mut e = egress.clone();
        e.sort();
        e
    });
    let mut ends: Vec<(usize, u8)> = egress
        .iter()
        .map(|&(n, p)| f.topo.peer_of(n, p).unwrap())
        .collect();
    ends.sort();
    assert_eq!(got, ends);
    assert!(egress.len() >= 2, "a route through the fabric: {egress:?}");
    // To a LID no port holds: nothing takes it, and the first switch
    // counts a relay error where it came in, as for an SMP.
    let (leaf, at) = f.topo.peer_of(src, 1).unwrap();
    let before = (
        counters(&mut f, leaf, at, None),
        rcv_details(&mut f, leaf, at, None),
    );
    assert_eq!(f.carry(src, mad_core::Lid(0xBFFF)), None);
    let after = (
        counters(&mut f, leaf, at, None),
        rcv_details(&mut f, leaf, at, None),
    );
    assert_eq!(
        after.0.rcv_switch_relay_errors,
        before.0.rcv_switch_relay_errors + 1
    );
    assert_eq!(
        after.1.dlid_mapping_errors,
        before.1.dlid_mapping_errors + 1
    );
    assert_eq!(after.0.rcv_pkts, before.0.rcv_pkts + 1, "it did arrive");
}

#[test]
fn the_pma_answers_and_refuses_as_the_spec_says() {
    let mut f = up("mport-ntree:4:2", SimConfig::default());
    let ca = first(&f, NodeType::ChannelAdapter);
    let sw = first(&f, NodeType::Switch);
    // ClassPortInfo: AllPortSelect and the extended counters.
    let a = f
        .pma_answer(ca, 1, &request(0x01, ATTR_CLASS_PORT_INFO, &[]))
        .unwrap();
    assert_eq!(status(&a), 0);
    let cpi = ClassPortInfo::decode(&a[perf::DATA_OFFSET..]).unwrap();
    assert_eq!(cpi.capability_mask, PMA_CAPABILITIES);
    assert_eq!(
        cpi.capability_mask & (perf::CAP_ALL_PORT_SELECT | perf::CAP_EXTENDED_WIDTH),
        0x300
    );
    // A CA's port 0, or a port it does not have: an invalid field.
    for (node, port) in [(ca, 0), (ca, 2), (sw, 5), (sw, 200)] {
        let q = PortCounters {
            port_select: port,
            ..PortCounters::default()
        };
        let a = f
            .pma_answer(
                node,
                1,
                &request(0x01, ATTR_PORT_COUNTERS, &q.to_bytes().unwrap()),
            )
            .unwrap();
        assert_eq!(status(&a), 0x1C, "node {node} port {port}");
    }
    // No PMA at a port the CA does not have (a switch's is its port 0,
    // whatever port a request comes in by).
    let get = request(0x01, ATTR_CLASS_PORT_INFO, &[]);
    assert!(f.pma_answer(ca, 0, &get).is_none());
    assert!(f.pma_answer(ca, 2, &get).is_none());
    assert!(f.pma_answer(sw, 0, &get).is_some() && f.pma_answer(sw, 250, &get).is_some());
    // A switch's port 0 is its own.
    counters(&mut f, sw, 0, None);
    // Methods and attributes it does not do.
    let a = f
        .pma_answer(ca, 1, &request(0x02, ATTR_CLASS_PORT_INFO, &[]))
        .unwrap();
    assert_eq!(status(&a), 0x0C, "Set(ClassPortInfo)");
    let a = f.pma_answer(ca, 1, &request(0x01, 0x0017, &[])).unwrap();
    assert_eq!(status(&a), 0x0C, "PortOpRcvCounters, not kept here");
    let a = f
        .pma_answer(ca, 1, &request(0x06, ATTR_PORT_COUNTERS, &[]))
        .unwrap();
    assert_eq!(status(&a), 0x08, "a Report is no PMA method");
    let mut v2 = request(0x01, ATTR_PORT_COUNTERS, &[0, 1]);
    v2[2] = 2;
    assert_eq!(status(&f.pma_answer(ca, 1, &v2).unwrap()), 0x04);
    // Not for an agent: a response, another class, a short MAD.
    assert!(f
        .pma_answer(ca, 1, &request(0x81, ATTR_PORT_COUNTERS, &[0, 1]))
        .is_none());
    let mut sa = request(0x01, ATTR_PORT_COUNTERS, &[0, 1]);
    sa[1] = 0x03;
    assert!(f.pma_answer(ca, 1, &sa).is_none());
    assert!(f.pma_answer(ca, 1, &[1, 4, 1, 1]).is_none());
    // Set clears what it selects, each attribute on its own.
    let before = extended(&mut f, ca, 1, None);
    assert!(before.xmit_pkts > 0 && before.rcv_pkts > 0);
    let c = counters(&mut f, ca, 1, Some(select::XMIT_PKTS | select::XMIT_DATA));
    assert_eq!((c.xmit_pkts, c.xmit_data), (0, 0));
    assert_eq!(u64::from(c.rcv_pkts), before.rcv_pkts);
    let x = extended(&mut f, ca, 1, None);
    assert_eq!(x.xmit_pkts, before.xmit_pkts, "the extended counters stay");
    let x = extended(&mut f, ca, 1, Some(select_extended::RCV_PKTS));
    assert_eq!(x.rcv_pkts, 0);
    assert_eq!(x.unicast_rcv_pkts, before.rcv_pkts, "not selected");
    assert_eq!(
        u64::from(counters(&mut f, ca, 1, None).rcv_pkts),
        before.rcv_pkts
    );
    // PortSelect 0xFF on a switch clears every port.
    counters(&mut f, sw, ALL_PORTS, Some(0xFFFF));
    for p in 0..=f.topo.nodes[sw].ports {
        assert_eq!(
            counters(&mut f, sw, p, None),
            PortCounters {
                port_select: p,
                ..PortCounters::default()
            }
        );
    }
}

/// Get (or Set, `set`) of PortSamplesControl at `node`: the answer.
fn samples_control(
    f: &mut Fabric,
    node: usize,
    set: bool,
    q: &PortSamplesControl,
) -> PortSamplesControl {
    let a = ask(
        f,
        node,
        ATTR_PORT_SAMPLES_CONTROL,
        set,
        &q.to_bytes().unwrap(),
    );
    PortSamplesControl::decode(&a).unwrap()
}

fn samples_result(f: &mut Fabric, node: usize) -> PortSamplesResult {
    PortSamplesResult::decode(&ask(f, node, ATTR_PORT_SAMPLES_RESULT, false, &[])).unwrap()
}

#[test]
fn a_sample_counts_the_traffic_of_its_interval_and_no_other() {
    let mut f = up("mport-ntree:4:2", SimConfig::default());
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&n| f.topo.nodes[n].kind == NodeType::ChannelAdapter && n != f.sm_node)
        .collect();
    let (src, dst) = (cas[0], cas[cas.len() - 1]);
    let (to_dst, to_src) = (f.nodes[dst].lid(), f.nodes[src].lid());
    let tick = SAMPLE_TICK_NS;
    // The samples run on the clock they are given (a served fabric's wall
    // clock), here moved by hand.
    f.set_pma_clock(1_000);
    let port1 = PortSamplesControl {
        port_select: 1,
        ..PortSamplesControl::default()
    };
    // Before any sample: Done, 32-bit counters, every one able to count
    // the mandatory quantities, and a result of zeros.
    let c = samples_control(&mut f, src, false, &port1);
    assert_eq!(c.sample_status, sample_status::DONE);
    assert_eq!((c.port_select, c.tick, c.counter_width), (1, 0, 4));
    assert_eq!(
        (
            c.counter_mask0,
            c.counter_masks_1_to_9,
            c.counter_masks_10_to_14
        ),
        (1, 0o111_111_111, 0o11_111)
    );
    assert_eq!(samples_result(&mut f, src).counters(), [0; 15]);
    // Start one: it begins 1 µs on and counts for 2 µs.
    let mut asked = PortSamplesControl {
        sample_start: (1_000 / tick) as u32,
        sample_interval: (2_000 / tick) as u32,
        tag: 0x77,
        ..port1
    };
    let mut selects = [0u16; 15];
    selects[..6].copy_from_slice(&[
        sample_counter::XMIT_PKTS,
        sample_counter::XMIT_DATA,
        sample_counter::RCV_PKTS,
        sample_counter::XMIT_WAIT,
        0x1234,
        sample_counter::XMIT_PKTS,
    ]);
    selects[14] = sample_counter::RCV_DATA;
    asked.set_counter_selects(selects);
    let c = samples_control(&mut f, src, true, &asked);
    assert_eq!(c.sample_status, sample_status::STARTED);
    assert_eq!((c.tag, c.counter_selects()), (0x77, selects));
    // Before it begins: not counted.
    for _ in 0..2 {
        assert_eq!(f.carry(src, to_dst), Some(dst));
    }
    // A Set while one is under way changes nothing.
    let other = PortSamplesControl { tag: 0x99, ..asked };
    let c = samples_control(&mut f, src, true, &other);
    assert_eq!((c.tag, c.sample_status), (0x77, sample_status::STARTED));
    // From its beginning, up to before its end: counted.
    f.set_pma_clock(2_000);
    for _ in 0..3 {
        f.carry(src, to_dst);
    }
    f.carry(dst, to_src);
    let c = samples_control(&mut f, src, false, &port1);
    assert_eq!(c.sample_status, sample_status::RUNNING);
    let r = samples_result(&mut f, src);
    assert_eq!(
        (r.sample_status, r.counters()),
        (sample_status::RUNNING, [0; 15])
    );
    f.set_pma_clock(3_999);
    f.carry(src, to_dst);
    // From its end on: not counted.
    f.set_pma_clock(4_000);
    for _ in 0..5 {
        f.carry(src, to_dst);
    }
    f.set_pma_clock(9_000);
    let r = samples_result(&mut f, src);
    assert_eq!((r.tag, r.sample_status), (0x77, sample_status::DONE));
    let mut want = [0u32; 15];
    want[..6].copy_from_slice(&[4, 4 * MAD_PACKET_WORDS as u32, 1, 0, 0, 4]);
    want[14] = MAD_PACKET_WORDS as u32;
    assert_eq!(
        r.counters(),
        want,
        "XmitWait 0 (no congestion), 0x1234 nothing"
    );
    // The same counts 64 bits wide.
    let x = ask(&mut f, src, ATTR_PORT_SAMPLES_RESULT_EXTENDED, false, &[]);
    let x = PortSamplesResultExtended::decode(&x).unwrap();
    assert_eq!((x.tag, x.sample_status, x.extended_width), (0x77, 0, 2));
    assert_eq!(x.counters(), want.map(u64::from));
    // Done: the next Set is taken; one of no ticks is done at once.
    let now = PortSamplesControl { tag: 0x78, ..port1 };
    let c = samples_control(&mut f, src, true, &now);
    assert_eq!((c.tag, c.sample_status), (0x78, sample_status::DONE));
    // PortSelect must name one port of the node; the result is not set.
    for sel in [0, 2, ALL_PORTS] {
        let q = PortSamplesControl {
            port_select: sel,
            ..asked
        };
        let a = f
            .pma_answer(
                src,
                1,
                &request(0x02, ATTR_PORT_SAMPLES_CONTROL, &q.to_bytes().unwrap()),
            )
            .unwrap();
        assert_eq!(status(&a), 0x1C, "PortSelect {sel}");
    }
    let a = f
        .pma_answer(src, 1, &request(0x02, ATTR_PORT_SAMPLES_RESULT, &[]))
        .unwrap();
    assert_eq!(status(&a), 0x0C, "Set(PortSamplesResult)");
    let a = f
        .pma_answer(
            src,
            1,
            &request(0x02, ATTR_PORT_SAMPLES_RESULT_EXTENDED, &[]),
        )
        .unwrap();
    assert_eq!(status(&a), 0x0C, "Set(PortSamplesResultExtended)");
    // A switch samples the port it is asked to; powered up again, it has
    // no sample.
    let (sw, at) = f.topo.peer_of(src, 1).unwrap();
    let q = PortSamplesControl {
        port_select: at,
        sample_start: 0,
        sample_interval: 1_000_000,
        tag: 5,
        ..asked
    };
    assert_eq!(
        samples_control(&mut f, sw, true, &q).sample_status,
        sample_status::RUNNING
    );
    f.carry(src, to_dst);
    // Read by way of another port, the control says which port it samples.
    let other = PortSamplesControl {
        port_select: if at == 1 { 2 } else { 1 },
        ..PortSamplesControl::default()
    };
    let c = samples_control(&mut f, sw, false, &other);
    assert_eq!((c.port_select, c.tag), (at, 5));
    f.set_pma_clock(9_000 + 1_000_000 * tick);
    let r = samples_result(&mut f, sw);
    assert_eq!(r.sample_status, sample_status::DONE);
    assert_eq!(r.counters()[2], 1, "the packet from the CA came in there");
    let t = f.now_ns();
    f.schedule(t, FabricEvent::NodeDown(sw));
    f.schedule(t + 1_000, FabricEvent::NodeUp(sw));
    f.run_to_quiescence();
    let r = samples_result(&mut f, sw);
    assert_eq!((r.tag, r.counters()), (0, [0; 15]), "forgotten");
}

#[test]
fn each_port_of_a_two_port_ca_has_a_pma_of_its_own() {
    // D has a port on each leaf; H1 sits on the leaf of D's port 2.
    let text = include_str!("data/multiport.topo");
    let topo = fabric::topology::parse_ibnetdiscover(text).unwrap();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let mut sm = smi::sm::Sm::new(SmConfig::default());
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    let named = |f: &Fabric, name: &str| f.topo.nodes.iter().position(|n| n.name == name).unwrap();
    let (d, h1) = (named(&f, "D"), named(&f, "H1"));
    let (d1, d2) = (f.nodes[d].port_lid(1).0, f.nodes[d].port_lid(2).0);
    // Counters: each port's PMA answers for its own port, 0xFF being
    // that port alone, and refuses the other port.
    let q = |sel: u8| {
        PortCounters {
            port_select: sel,
            ..PortCounters::default()
        }
        .to_bytes()
        .unwrap()
    };
    let mut own = Vec::new();
    for (at, other) in [(1u8, 2u8), (2, 1)] {
        let a = f
            .pma_answer(d, at, &request(0x01, ATTR_PORT_COUNTERS, &q(other)))
            .unwrap();
        assert_eq!(status(&a), 0x1C, "port {at}'s PMA asked about port {other}");
        let mine = ask_at(&mut f, d, at, ATTR_PORT_COUNTERS, false, &q(at));
        let mine = PortCounters::decode(&mine).unwrap();
        assert!(mine.rcv_pkts > 0, "port {at} was brought up by SMPs");
        let all = ask_at(&mut f, d, at, ATTR_PORT_COUNTERS, false, &q(ALL_PORTS));
        let all = PortCounters::decode(&all).unwrap();
        assert_eq!(all.port_select, ALL_PORTS);
        assert_eq!(
            PortCounters {
                port_select: at,
                ..all
            },
            mine,
            "0xFF at port {at}'s PMA is that port, not the sum of both"
        );
        own.push(mine);
    }
    // Samples: both ports sample at once, each its own port.
    f.set_pma_clock(1_000);
    let mut selects = [0u16; 15];
    selects[0] = sample_counter::RCV_PKTS;
    selects[1] = sample_counter::XMIT_PKTS;
    let sample = |port: u8| {
        let mut c = PortSamplesControl {
            port_select: port,
            sample_interval: 1_000_000,
            tag: 0x100 + u16::from(port),
            ..PortSamplesControl::default()
        };
        c.set_counter_selects(selects);
        c.to_bytes().unwrap()
    };
    for at in [1u8, 2] {
        let c = ask_at(&mut f, d, at, ATTR_PORT_SAMPLES_CONTROL, true, &sample(at));
        let c = PortSamplesControl::decode(&c).unwrap();
        assert_eq!(
            (c.port_select, c.tag, c.sample_status),
            (at, 0x100 + u16::from(at), sample_status::RUNNING),
            "port {at}'s sample starts while the other port's runs"
        );
        let other = 3 - at;
        let a = f
            .pma_answer(
                d,
                at,
                &request(0x02, ATTR_PORT_SAMPLES_CONTROL, &sample(other)),
            )
            .unwrap();
        assert_eq!(
            status(&a),
            0x1C,
            "port {at}'s PMA does not sample port {other}"
        );
    }
    for _ in 0..3 {
        assert_eq!(f.carry(h1, d2), Some(d));
    }
    assert_eq!(f.carry(h1, d1), Some(d));
    f.set_pma_clock(1_000 + 1_000_000 * SAMPLE_TICK_NS);
    for (at, rcv) in [(1u8, 1u32), (2, 3)] {
        let r = ask_at(&mut f, d, at, ATTR_PORT_SAMPLES_RESULT, false, &[]);
        let r = PortSamplesResult::decode(&r).unwrap();
        assert_eq!((r.tag, r.sample_status), (0x100 + u16::from(at), 0));
        assert_eq!(
            r.counters()[..2],
            [rcv, 0],
            "port {at} received {rcv}, sent none"
        );
    }
    // A power cycle forgets both.
    let t = f.now_ns();
    f.schedule(t, FabricEvent::NodeDown(d));
    f.schedule(t + 1_000, FabricEvent::NodeUp(d));
    f.run_to_quiescence();
    for at in [1u8, 2] {
        let r = ask_at(&mut f, d, at, ATTR_PORT_SAMPLES_RESULT, false, &[]);
        assert_eq!(
            PortSamplesResult::decode(&r).unwrap().tag,
            0,
            "port {at}'s forgotten"
        );
    }
    assert_ne!(own[0], own[1]);
}
