//! The SA over a subnet ibkit's SM brought up on the simulator: records
//! of every kind against what the fabric is, PathRecords against walks of
//! the installed tables, the SA's status codes for what it refuses, RMPP
//! transfers with their ACKs, timeouts and aborts, and a flood.

use fabric::sim::{bring_up, Fabric, SimConfig};
use mad_core::mad::{Method, Status};
use mad_core::sa::*;
use mad_core::{Lid, MAD_SIZE};
use sa::{Addr, Sa, SaConfig, SaError, Transmit};
use smi::sm::{Sm, SmConfig};

fn up(spec: &str) -> (Fabric, Sm) {
    let (f, sm, up) = bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    (f, sm)
}

/// The requester: the first CA that is not the SM's.
fn host(f: &Fabric) -> Addr {
    let i = (0..f.nodes.len())
        .find(|&i| {
            i != f.sm_node && f.topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter
        })
        .unwrap();
    Addr {
        lid: f.nodes[i].lid(),
        qpn: 1,
    }
}

fn ask<R: SaRecord>(method: Method, rec: &R, mask: u64, tid: u64) -> [u8; MAD_SIZE] {
    let mut m = SaMad::request(method, R::ID, tid);
    m.set_record(rec).unwrap();
    m.sa.component_mask = mask;
    m.to_bytes()
}

fn mask<R: SaRecord>(names: &[&str]) -> u64 {
    names
        .iter()
        .map(|n| R::component(n).unwrap_or_else(|| panic!("no component {n}")))
        .fold(0, |m, b| m | b)
}

/// Sends `mad` and returns everything the SA queued.
fn exchange(sa: &mut Sa, sm: &Sm, from: Addr, mad: &[u8], now: u64) -> Vec<SaMad> {
    sa.handle_mad(sm.subnet(), from, mad, now).unwrap();
    std::iter::from_fn(|| sa.poll_transmit())
        .map(|t: Transmit| {
            assert_eq!(t.to, from);
            SaMad::parse(&t.mad).unwrap()
        })
        .collect()
}

/// Receives a whole GetTable answer as an RMPP receiver would: ACKs each
/// window, opening it to `window` segments; returns the records' bytes
/// and the stride.
fn table(sa: &mut Sa, sm: &Sm, from: Addr, req: &[u8], window: u32) -> (Vec<u8>, usize, u32) {
    let mut got = exchange(sa, sm, from, req, 0);
    let mut data = Vec::new();
    let mut segs = 0;
    let mut total = None;
    loop {
        assert!(!got.is_empty(), "the SA went quiet before the last segment");
        let mut last = None;
        for m in &got {
            assert_eq!(m.method(), Method::GetTableResp);
            assert!(m.rmpp.active());
            assert_eq!(m.rmpp.rmpp_type, RmppType::Data);
            segs += 1;
            assert_eq!(m.rmpp.segment_number, segs, "in order");
            if m.rmpp.first() {
                total = Some(m.rmpp.payload_length_or_window as usize);
            }
            data.extend_from_slice(&m.data);
            last = Some(m.clone());
        }
        let l = last.unwrap();
        let mut ack = l.clone();
        ack.header.method = Method::GetTableResp.into();
        ack.rmpp.rmpp_type = RmppType::Ack;
        ack.rmpp.flags = RMPP_ACTIVE;
        ack.rmpp.payload_length_or_window = segs + window;
        let done = l.rmpp.last();
        got = exchange(sa, sm, from, &ack.to_bytes(), 1);
        if done {
            assert!(got.is_empty());
            break;
        }
    }
    let total = total.unwrap();
    // PayloadLength: the SA header once per segment and the records.
    let records = total - 20 * segs as usize;
    data.truncate(records);
    (data, records, segs)
}

#[test]
fn node_records_are_the_nodes_of_the_fabric() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig::default());
    let me = host(&f);
    let req = ask(Method::GetTable, &NodeRecord::default(), 0, 7);
    let (data, len, segs) = table(&mut sa, &sm, me, &req, 4);
    let stride = NodeRecord::attribute_offset() as usize * 8;
    assert_eq!(len, f.topo.nodes.len() * stride);
    assert_eq!(segs as usize, len.div_ceil(200));
    let mut guids: Vec<u64> = data
        .chunks(stride)
        .map(|c| NodeRecord::decode(c).unwrap().node_info.node_guid.0)
        .collect();
    guids.sort_unstable();
    let mut want: Vec<u64> = f.topo.nodes.iter().map(|n| n.guid).collect();
    want.sort_unstable();
    assert_eq!(guids, want);
    assert_eq!(sa.stats().transfers_done, 1);
    assert_eq!(sa.transfers(), 0);

    // Get by LID: that node.
    let target = &f.topo.nodes[3];
    let lid = f.nodes[3].lid();
    let q = NodeRecord {
        lid,
        ..NodeRecord::default()
    };
    let r = exchange(
        &mut sa,
        &sm,
        me,
        &ask(Method::Get, &q, mask::<NodeRecord>(&["lid"]), 8),
        2,
    );
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].method(), Method::GetResp);
    assert_eq!(r[0].sa_status(), SaStatus::Ok);
    let got: NodeRecord = r[0].record().unwrap();
    assert_eq!((got.lid, got.node_info.node_guid.0), (lid, target.guid));
    assert_eq!(
        got.node_description
            .node_string
            .as_str()
            .unwrap()
            .trim_end_matches('\0'),
        target.name
    );

    // Get matching several: too many; matching none: no records.
    let r = exchange(
        &mut sa,
        &sm,
        me,
        &ask(Method::Get, &NodeRecord::default(), 0, 9),
        3,
    );
    assert_eq!(r[0].sa_status(), SaStatus::TooManyRecords);
    let none = NodeRecord {
        lid: Lid(999),
        ..NodeRecord::default()
    };
    let r = exchange(
        &mut sa,
        &sm,
        me,
        &ask(Method::Get, &none, mask::<NodeRecord>(&["lid"]), 10),
        4,
    );
    assert_eq!(r[0].sa_status(), SaStatus::NoRecords);
    assert_eq!(r[0].header.transaction_id.get(), 10);
}

#[test]
fn port_link_and_switch_records_match_their_masks() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig::default());
    let me = host(&f);
    // Every link, both ways: twice the cables.
    let req = ask(Method::GetTable, &LinkRecord::default(), 0, 1);
    let (data, len, _) = table(&mut sa, &sm, me, &req, 100);
    assert_eq!(len / 8, 2 * f.topo.links());
    for c in data.chunks(8) {
        let l = LinkRecord::decode(c).unwrap();
        let from = (0..f.nodes.len())
            .find(|&i| f.nodes[i].lid() == l.from_lid)
            .unwrap();
        let (to, port) = f.topo.peer_of(from, l.from_port_num).unwrap();
        assert_eq!((f.nodes[to].lid(), port), (l.to_lid, l.to_port_num));
    }
    // PortInfoRecords of one switch LID: ports 0..=4.
    let sw = (0..f.nodes.len())
        .find(|&i| f.topo.nodes[i].kind == mad_core::attr::NodeType::Switch)
        .unwrap();
    let q = PortInfoRecord {
        endport_lid: f.nodes[sw].lid(),
        ..PortInfoRecord::default()
    };
    let req = ask(
        Method::GetTable,
        &q,
        mask::<PortInfoRecord>(&["endport_lid"]),
        2,
    );
    let (data, len, _) = table(&mut sa, &sm, me, &req, 100);
    let stride = PortInfoRecord::attribute_offset() as usize * 8;
    let ports: Vec<u8> = data
        .chunks(stride)
        .take(len / stride)
        .map(|c| PortInfoRecord::decode(c).unwrap().port_num)
        .collect();
    assert_eq!(ports, (0..=f.topo.nodes[sw].ports).collect::<Vec<_>>());
    // SwitchInfoRecords: one per switch.
    let req = ask(Method::GetTable, &SwitchInfoRecord::default(), 0, 3);
    let (_, len, _) = table(&mut sa, &sm, me, &req, 100);
    assert_eq!(len / 24, f.topo.switches());
}

/// `saquery -s`'s question: the PortInfoRecords whose CapabilityMask has
/// IsSM, asked with bit 31 of the attribute modifier so that the mask's
/// bits are matched, not the whole value (IBA 1.2.1 errata; the SA says
/// IsPortInfoCapMaskMatchSupported in its ClassPortInfo). Without bit 31
/// the value is compared whole, as before.
#[test]
fn the_ports_of_sms_are_found_by_their_capability_bit() {
    use mad_core::attr::{CapabilityMask, PortInfo};
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig::default());
    let me = host(&f);
    let cpi = exchange(
        &mut sa,
        &sm,
        me,
        &ask(Method::Get, &ClassPortInfo::default(), 0, 1),
        0,
    );
    let cpi = ClassPortInfo::decode(&cpi[0].data).unwrap();
    assert_ne!(
        cpi.capability_mask & (1 << 13),
        0,
        "IsPortInfoCapMaskMatchSupported"
    );
    let q = PortInfoRecord {
        port_info: PortInfo {
            capability_mask: CapabilityMask::IS_SM,
            ..PortInfo::default()
        },
        ..PortInfoRecord::default()
    };
    let stride = PortInfoRecord::attribute_offset() as usize * 8;
    let ask_caps = |sa: &mut Sa, modifier: u32, tid: u64| {
        let mut m = SaMad::request(Method::GetTable, PortInfoRecord::ID, tid);
        m.set_record(&q).unwrap();
        m.sa.component_mask = mask::<PortInfoRecord>(&["capability_mask"]);
        m.header.attribute_modifier.set(modifier);
        let (data, len, _) = table(sa, &sm, me, &m.to_bytes(), 100);
        (data.chunks(stride).take(len / stride))
            .map(|c| PortInfoRecord::decode(c).unwrap())
            .collect::<Vec<_>>()
    };
    let sms = ask_caps(&mut sa, 1 << 31, 2);
    let sm_lid = f.nodes[f.sm_node].lid();
    assert_eq!(
        sms.iter().map(|r| r.endport_lid).collect::<Vec<_>>(),
        vec![sm_lid],
        "the SM's port alone"
    );
    let held = sms[0].port_info.capability_mask;
    assert!(
        held.contains(CapabilityMask::IS_SM) && held != CapabilityMask::IS_SM,
        "{held:?}"
    );
    // Compared whole, IsSM alone is no port's mask.
    assert!(ask_caps(&mut sa, 0, 3).is_empty());
    // Every bit asked must be there: IsSM with one the SM's port lacks.
    let lacking = (0..32)
        .map(|b| CapabilityMask::from_bits_retain(1 << b))
        .find(|b| !held.contains(*b))
        .unwrap();
    let q2 = PortInfoRecord {
        port_info: PortInfo {
            capability_mask: CapabilityMask::IS_SM | lacking,
            ..PortInfo::default()
        },
        ..PortInfoRecord::default()
    };
    let mut m = SaMad::request(Method::GetTable, PortInfoRecord::ID, 4);
    m.set_record(&q2).unwrap();
    m.sa.component_mask = mask::<PortInfoRecord>(&["capability_mask"]);
    m.header.attribute_modifier.set(1 << 31);
    let (_, len, _) = table(&mut sa, &sm, me, &m.to_bytes(), 100);
    assert_eq!(len, 0, "IsSM and {lacking:?}: none");
}

#[test]
fn path_records_follow_the_installed_tables() {
    let (f, sm) = up("mport-ntree:4:3");
    let mut sa = Sa::new(SaConfig::default());
    let me = host(&f);
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .collect();
    let m = mask::<PathRecord>(&["slid", "dlid"]);
    let mut tid = 100;
    for &a in &cas {
        for &b in &cas {
            tid += 1;
            let q = PathRecord {
                slid: f.nodes[a].lid(),
                dlid: f.nodes[b].lid(),
                ..PathRecord::default()
            };
            let r = exchange(&mut sa, &sm, me, &ask(Method::Get, &q, m, tid), tid);
            assert_eq!(r.len(), 1);
            assert_eq!(r[0].sa_status(), SaStatus::Ok, "{a} → {b}");
            let pr: PathRecord = r[0].record().unwrap();
            assert_eq!((pr.slid, pr.dlid), (q.slid, q.dlid));
            assert_eq!(pr.sgid.guid().0, f.topo.nodes[a].guid + 1, "port GUID");
            assert_eq!(pr.dgid.guid().0, f.topo.nodes[b].guid + 1);
            assert!(pr.reversible && pr.mtu >= 1 && pr.rate >= 2);
            // The packet lifetime grows with the switches crossed.
            // (A path to the port itself crosses no switch.)
            let (path, _) = f.trace(a, q.dlid);
            let switches = if a == b {
                0
            } else {
                path.len().saturating_sub(2) as u64
            };
            let want = sa::path::life_code(switches << 18);
            assert_eq!(pr.packet_life_time, want, "{a} → {b}: {switches} switches");
        }
    }
    // Only a source: not enough for a Get; every destination for GetTable.
    let q = PathRecord {
        slid: me.lid,
        ..PathRecord::default()
    };
    let r = exchange(
        &mut sa,
        &sm,
        me,
        &ask(Method::Get, &q, mask::<PathRecord>(&["slid"]), 1),
        1,
    );
    assert_eq!(r[0].sa_status(), SaStatus::ReqInsufficientComponents);
    let req = ask(Method::GetTable, &q, mask::<PathRecord>(&["slid"]), 2);
    let (_, len, _) = table(&mut sa, &sm, me, &req, 1000);
    assert_eq!(len / 64, f.topo.nodes.len());
    // Neither end: every pair, as OpenSM's "world"; only a destination:
    // every source to it.
    let n = f.topo.nodes.len();
    let req = ask(Method::GetTable, &PathRecord::default(), 0, 4);
    let (data, len, _) = table(&mut sa, &sm, me, &req, 1000);
    assert_eq!(len / 64, n * n);
    let mut pairs: Vec<(u16, u16)> = data
        .chunks(64)
        .map(|c| {
            let p = PathRecord::decode(c).unwrap();
            (p.slid.0, p.dlid.0)
        })
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    assert_eq!(pairs.len(), n * n, "each pair once");
    let q = PathRecord {
        dlid: me.lid,
        ..PathRecord::default()
    };
    let req = ask(Method::GetTable, &q, mask::<PathRecord>(&["dlid"]), 5);
    let (data, len, _) = table(&mut sa, &sm, me, &req, 1000);
    assert_eq!(len / 64, n);
    assert!(data
        .chunks(64)
        .all(|c| PathRecord::decode(c).unwrap().dlid == me.lid));
    // An unknown GID: invalid GID.
    let q = PathRecord {
        dgid: mad_core::types::Gid::new(
            mad_core::types::Gid::DEFAULT_PREFIX,
            mad_core::Guid(0xdead),
        ),
        ..PathRecord::default()
    };
    let r = exchange(
        &mut sa,
        &sm,
        me,
        &ask(Method::Get, &q, mask::<PathRecord>(&["dgid"]), 3),
        3,
    );
    assert_eq!(r[0].sa_status(), SaStatus::ReqInvalidGid);
    // MTU selector: larger than 4096 exists nowhere.
    let q = PathRecord {
        slid: me.lid,
        dlid: f.nodes[cas[2]].lid(),
        mtu_selector: mad_core::sa::path::selector::GREATER,
        mtu: 5,
        ..PathRecord::default()
    };
    let r = exchange(
        &mut sa,
        &sm,
        me,
        &ask(
            Method::Get,
            &q,
            mask::<PathRecord>(&["slid", "dlid", "mtu_selector", "mtu"]),
            4,
        ),
        4,
    );
    assert_eq!(r[0].sa_status(), SaStatus::NoRecords);
}

#[test]
fn what_the_sa_does_not_do_is_refused_with_the_right_status() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig::default());
    let me = host(&f);
    let set = ask(Method::Set, &NodeRecord::default(), 0, 1);
    assert_eq!(
        exchange(&mut sa, &sm, me, &set, 0)[0].header.status(),
        Status::UNSUPPORTED_METHOD_ATTR
    );
    let sr = ask(Method::Delete, &PortInfoRecord::default(), 0, 2);
    assert_eq!(
        exchange(&mut sa, &sm, me, &sr, 0)[0].header.status(),
        Status::UNSUPPORTED_METHOD_ATTR
    );
    let mut v = SaMad::parse(&ask(Method::Get, &NodeRecord::default(), 0, 3)).unwrap();
    v.header.class_version = 1;
    assert_eq!(
        exchange(&mut sa, &sm, me, &v.to_bytes(), 0)[0]
            .header
            .status(),
        Status::UNSUPPORTED_VERSION
    );
    // The first segment of a request in several: taken in and
    // acknowledged, nothing answered until its last (tests/segmented.rs).
    let mut seg = SaMad::parse(&ask(Method::GetTable, &NodeRecord::default(), 0, 4)).unwrap();
    seg.rmpp.version = 1;
    seg.rmpp.flags = RMPP_ACTIVE | RMPP_FIRST;
    seg.rmpp.rmpp_type = RmppType::Data;
    seg.rmpp.segment_number = 1;
    seg.rmpp.payload_length_or_window = 440;
    let ack = exchange(&mut sa, &sm, me, &seg.to_bytes(), 0);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].rmpp.rmpp_type, RmppType::Ack);
    assert_eq!(sa.requests_receiving(), 1);
    // Not an SA MAD: dropped with the reason, nothing sent.
    let smp = [0u8; 256];
    assert!(matches!(
        sa.handle_mad(sm.subnet(), me, &smp, 0),
        Err(SaError::NotSa(_))
    ));
    assert!(matches!(
        sa.handle_mad(sm.subnet(), me, &[1, 3, 2], 0),
        Err(SaError::NotSa(_))
    ));
    // An ACK for nothing.
    let mut ack = SaMad::request(Method::GetTableResp, SaAttributeId::NodeRecord, 77);
    ack.rmpp.flags = RMPP_ACTIVE;
    ack.rmpp.rmpp_type = RmppType::Ack;
    assert_eq!(
        sa.handle_mad(sm.subnet(), me, &ack.to_bytes(), 0),
        Err(SaError::Unexpected)
    );
    assert!(sa.poll_transmit().is_none());
    // ClassPortInfo.
    let cpi = SaMad::request(Method::Get, SaAttributeId::ClassPortInfo, 5).to_bytes();
    let r = exchange(&mut sa, &sm, me, &cpi, 0);
    let c: ClassPortInfo = r[0].record().unwrap();
    assert_eq!(
        (c.base_version, c.class_version, c.resp_time_value),
        (1, 2, 18)
    );
}

#[test]
fn an_unacknowledged_transfer_is_retried_then_aborted() {
    let (f, sm) = up("mport-ntree:4:2");
    let cfg = SaConfig {
        rmpp_timeout_ms: 100,
        rmpp_retries: 2,
        ..SaConfig::default()
    };
    let mut sa = Sa::new(cfg);
    let me = host(&f);
    let req = ask(Method::GetTable, &NodeRecord::default(), 0, 1);
    let first = exchange(&mut sa, &sm, me, &req, 0);
    assert_eq!(first.len(), 1, "one segment until the first ACK");
    // The same request again while the answer is on its way: the answer
    // starts over, still one transfer.
    let again = exchange(&mut sa, &sm, me, &req, 0);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].rmpp.segment_number, 1);
    assert_eq!(sa.transfers(), 1);
    assert_eq!(sa.poll_timeout(), Some(100));
    sa.handle_timeout(100);
    let again: Vec<Transmit> = std::iter::from_fn(|| sa.poll_transmit()).collect();
    assert_eq!(again.len(), 1);
    assert_eq!(SaMad::parse(&again[0].mad).unwrap().rmpp.segment_number, 1);
    sa.handle_timeout(200);
    let _ = std::iter::from_fn(|| sa.poll_transmit()).count();
    sa.handle_timeout(300);
    let out: Vec<SaMad> = std::iter::from_fn(|| sa.poll_transmit())
        .map(|t| SaMad::parse(&t.mad).unwrap())
        .collect();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].rmpp.rmpp_type, RmppType::Abort);
    assert_eq!(out[0].rmpp.status, RmppStatus::TooManyRetries);
    assert_eq!(sa.transfers(), 0);
    assert_eq!((sa.stats().retries, sa.stats().transfers_aborted), (2, 1));
    assert_eq!(sa.poll_timeout(), None);
}

#[test]
fn a_receiver_that_stops_or_acks_nonsense_ends_the_transfer() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig::default());
    let me = host(&f);
    for (tid, kind, seg) in [(1u64, RmppType::Stop, 0u32), (2, RmppType::Ack, 5)] {
        let req = ask(Method::GetTable, &NodeRecord::default(), 0, tid);
        let first = exchange(&mut sa, &sm, me, &req, 0);
        let mut r = first[0].clone();
        r.rmpp.rmpp_type = kind;
        r.rmpp.flags = RMPP_ACTIVE;
        r.rmpp.segment_number = seg;
        r.rmpp.payload_length_or_window = 10;
        let out = exchange(&mut sa, &sm, me, &r.to_bytes(), 1);
        if kind == RmppType::Ack {
            assert_eq!(
                out[0].rmpp.rmpp_type,
                RmppType::Abort,
                "an ACK past what was sent"
            );
            assert_eq!(out[0].rmpp.status, RmppStatus::SegmentTooBig);
        } else {
            assert!(out.is_empty());
        }
        assert_eq!(sa.transfers(), 0);
    }
}

/// Without ACKs from the transport, a table goes out whole at once and no
/// transfer is kept.
#[test]
fn without_acks_every_segment_goes_at_once() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    let me = host(&f);
    let req = ask(Method::GetTable, &NodeRecord::default(), 0, 1);
    sa.handle_mad(sm.subnet(), me, &req, 0).unwrap();
    let segs: Vec<Transmit> = std::iter::from_fn(|| sa.poll_transmit()).collect();
    let want = (f.topo.nodes.len() * 112).div_ceil(200);
    assert_eq!(segs.len(), want);
    let last = SaMad::parse(&segs[want - 1].mad).unwrap();
    assert!(last.rmpp.last());
    assert_eq!(
        segs[want - 1].len,
        56 + (f.topo.nodes.len() * 112 - (want - 1) * 200)
    );
    assert_eq!(segs[0].len, 256);
    assert_eq!((sa.transfers(), sa.poll_timeout()), (0, None));
}

#[test]
fn a_flood_is_bounded() {
    let (f, sm) = up("mport-ntree:4:2");
    let cfg = SaConfig {
        max_queued: 64,
        max_transfers: 8,
        ..SaConfig::default()
    };
    let mut sa = Sa::new(cfg);
    let me = host(&f);
    let mut busy = 0;
    for tid in 0..10_000u64 {
        let q = NodeRecord {
            lid: Lid(1),
            ..NodeRecord::default()
        };
        if sa.handle_mad(sm.subnet(), me, &ask(Method::Get, &q, 1, tid), 0) == Err(SaError::Busy) {
            busy += 1;
        }
    }
    assert_eq!(busy, 10_000 - 64);
    assert_eq!(std::iter::from_fn(|| sa.poll_transmit()).count(), 64);
    // Transfers past the bound: no resources.
    for tid in 0..20u64 {
        let _ = sa.handle_mad(
            sm.subnet(),
            Addr {
                lid: me.lid,
                qpn: tid as u32 + 10,
            },
            &ask(Method::GetTable, &NodeRecord::default(), 0, tid),
            0,
        );
    }
    assert_eq!(sa.transfers(), 8);
    let refused = std::iter::from_fn(|| sa.poll_transmit())
        .filter(|t| SaMad::parse(&t.mad).unwrap().sa_status() == SaStatus::NoResources)
        .count();
    assert_eq!(refused, 12);
}

/// The records of a GetTable whose answer fits whatever number of
/// segments, from an SA that sends them all at once; `method` the answer
/// must carry.
fn all_at_once(sa: &mut Sa, sm: &Sm, from: Addr, req: &[u8], method: Method) -> Vec<Vec<u8>> {
    let segs = exchange(sa, sm, from, req, 0);
    assert!(!segs.is_empty());
    let first = &segs[0];
    assert_eq!(first.sa_status(), SaStatus::Ok, "{first:?}");
    assert_eq!(first.method(), method);
    let stride = first.sa.attribute_offset as usize * 8;
    if stride == 0 {
        return Vec::new();
    }
    let mut data: Vec<u8> = segs.iter().flat_map(|s| s.data).collect();
    data.truncate(first.rmpp.payload_length_or_window as usize - 20 * segs.len());
    data.chunks(stride).map(|c| c.to_vec()).collect()
}

fn sa_at_once() -> Sa {
    Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    })
}

#[test]
fn forwarding_guid_pkey_and_sm_records_say_what_the_sm_installed() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = sa_at_once();
    let me = host(&f);
    let key = SaConfig::default().sm_key;
    let top = f.topo.nodes.len() as u16;

    // LFT blocks: each entry the port the simulated switch forwards by.
    let req = ask(
        Method::GetTable,
        &LinearForwardingTableRecord::default(),
        0,
        1,
    );
    let recs = all_at_once(&mut sa, &sm, me, &req, Method::GetTableResp);
    let switches: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == mad_core::attr::NodeType::Switch)
        .collect();
    assert_eq!(recs.len(), switches.len() * (usize::from(top) / 64 + 1));
    for r in &recs {
        let r = LinearForwardingTableRecord::decode(r).unwrap();
        let sw = switches
            .iter()
            .copied()
            .find(|&i| f.nodes[i].lid() == r.lid)
            .expect("a switch's LID");
        for (k, &port) in r.lft.port.iter().enumerate() {
            let lid = r.block_num * 64 + k as u16;
            if lid == 0 || lid > top {
                assert_eq!(port, 0xFF, "LID {lid} is nobody's");
            } else {
                assert_eq!(port, f.nodes[sw].lft_port(Lid(lid)), "LID {lid}");
            }
        }
    }
    // No multicast programmed: no MFT block.
    let req = ask(
        Method::GetTable,
        &MulticastForwardingTableRecord::default(),
        0,
        2,
    );
    assert!(all_at_once(&mut sa, &sm, me, &req, Method::GetTableResp).is_empty());

    // GUIDInfo: each end port's GUID at index 0, by its LID.
    let req = ask(Method::GetTable, &GuidInfoRecord::default(), 0, 3);
    let recs = all_at_once(&mut sa, &sm, me, &req, Method::GetTableResp);
    assert_eq!(recs.len(), f.nodes.len());
    for r in &recs {
        let r = GuidInfoRecord::decode(r).unwrap();
        let i = (0..f.nodes.len())
            .find(|&i| f.nodes[i].lid() == r.lid)
            .unwrap();
        let n = &f.topo.nodes[i];
        let port = u64::from(n.kind == mad_core::attr::NodeType::ChannelAdapter);
        assert_eq!(r.guid_info.guids[0].0, n.guid + port);
        assert!(r.guid_info.guids[1..].iter().all(|g| g.0 == 0));
    }

    // P_Key tables: refused to the untrusted, the default key to others.
    let req = ask(Method::GetTable, &PKeyTableRecord::default(), 0, 4);
    let r = exchange(&mut sa, &sm, me, &req, 0);
    assert_eq!(r[0].sa_status(), SaStatus::ReqDenied);
    let mut trusted = SaMad::parse(&req).unwrap();
    trusted.sa.sm_key = key;
    let recs = all_at_once(&mut sa, &sm, me, &trusted.to_bytes(), Method::GetTableResp);
    assert_eq!(recs.len(), f.nodes.len());
    for r in &recs {
        let r = PKeyTableRecord::decode(r).unwrap();
        assert_eq!(r.p_key_table.p_keys[0].0, 0xFFFF);
    }

    // The SM's SMInfoRecord: master at its LID, its key to the trusted.
    let req = ask(Method::Get, &SmInfoRecord::default(), 0, 5);
    let r = exchange(&mut sa, &sm, me, &req, 0);
    assert_eq!(r[0].sa_status(), SaStatus::Ok);
    let rec: SmInfoRecord = r[0].record().unwrap();
    assert_eq!(rec.lid, f.nodes[f.sm_node].lid());
    assert_eq!(rec.sm_info.sm_state, mad_core::attr::SmState::Master);
    assert_eq!(rec.sm_info.sm_key.0, 0);
    let mut q = SmInfoRecord::default();
    q.sm_info.priority = 5;
    let req = ask(Method::GetTable, &q, mask::<SmInfoRecord>(&["priority"]), 6);
    assert!(all_at_once(&mut sa, &sm, me, &req, Method::GetTableResp).is_empty());
    let mut t = SaMad::parse(&ask(Method::Get, &SmInfoRecord::default(), 0, 7)).unwrap();
    t.sa.sm_key = key;
    let r = exchange(&mut sa, &sm, me, &t.to_bytes(), 0);
    assert_eq!(r[0].record::<SmInfoRecord>().unwrap().sm_info.sm_key.0, key);
}

#[test]
fn multipath_records_are_the_paths_of_every_pair() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = sa_at_once();
    let me = host(&f);
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .collect();
    let gid = |i: usize| {
        mad_core::Gid::new(
            mad_core::Gid::DEFAULT_PREFIX,
            mad_core::Guid(f.topo.nodes[i].guid + 1),
        )
    };
    let mut mp = MultiPathRecord {
        sgid_count: 2,
        dgid_count: 2,
        ..MultiPathRecord::default()
    };
    mp.gids[..4].copy_from_slice(&[gid(cas[0]), gid(cas[1]), gid(cas[2]), gid(cas[3])]);
    let counts = mask::<MultiPathRecord>(&["sgid_count", "dgid_count"]);
    let recs = all_at_once(
        &mut sa,
        &sm,
        me,
        &ask(Method::GetMulti, &mp, counts, 1),
        Method::GetMultiResp,
    );
    assert_eq!(recs.len(), 4);
    for (k, r) in recs.iter().enumerate() {
        let p = PathRecord::decode(r).unwrap();
        let (s, d) = (cas[k / 2], cas[2 + k % 2]);
        assert_eq!((p.sgid, p.dgid), (gid(s), gid(d)));
        assert_eq!((p.slid, p.dlid), (f.nodes[s].lid(), f.nodes[d].lid()));
        // The same record a PathRecord Get gives.
        let q = PathRecord {
            sgid: gid(s),
            dgid: gid(d),
            ..PathRecord::default()
        };
        let one = exchange(
            &mut sa,
            &sm,
            me,
            &ask(Method::Get, &q, mask::<PathRecord>(&["sgid", "dgid"]), 9),
            0,
        );
        assert_eq!(&one[0].data[..64], &r[..]);
    }
    // NumbPath bounds them.
    mp.numb_path = 2;
    let with_n = counts | mask::<MultiPathRecord>(&["numb_path"]);
    let recs = all_at_once(
        &mut sa,
        &sm,
        me,
        &ask(Method::GetMulti, &mp, with_n, 2),
        Method::GetMultiResp,
    );
    assert_eq!(recs.len(), 2);
    // Refusals: no counts, one count, a multicast GID.
    let status = |sa: &mut Sa, mp: &MultiPathRecord, m: u64| {
        exchange(sa, &sm, me, &ask(Method::GetMulti, mp, m, 3), 0)[0].sa_status()
    };
    assert_eq!(status(&mut sa, &mp, 0), SaStatus::ReqInsufficientComponents);
    assert_eq!(
        status(&mut sa, &mp, mask::<MultiPathRecord>(&["sgid_count"])),
        SaStatus::ReqInsufficientComponents
    );
    let mut mc = mp;
    mc.gids[2] = mad_core::Gid([
        0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
    ]);
    assert_eq!(status(&mut sa, &mc, counts), SaStatus::ReqInvalidGid);
    let mut zero = mp;
    zero.dgid_count = 0;
    assert_eq!(status(&mut sa, &zero, counts), SaStatus::ReqInvalid);
    let mut over = mp;
    over.sgid_count = 10;
    assert_eq!(status(&mut sa, &over, counts), SaStatus::ReqInvalid);
}

#[test]
fn without_acks_a_qp1_requester_can_be_sent_the_first_segment_only() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        first_segment_to_qp1: true,
        ..SaConfig::default()
    });
    let req = ask(Method::GetTable, &NodeRecord::default(), 0, 1);
    let qp1 = host(&f);
    let segs = exchange(&mut sa, &sm, qp1, &req, 0);
    assert_eq!(segs.len(), 1, "QP 1: the first segment only");
    assert!(segs[0].rmpp.first() && !segs[0].rmpp.last());
    let own = Addr { qpn: 0x123, ..qp1 };
    let segs = exchange(&mut sa, &sm, own, &req, 0);
    assert!(
        segs.len() > 1 && segs.last().unwrap().rmpp.last(),
        "every segment"
    );
    assert_eq!(sa.transfers(), 0);
}

#[test]
fn the_sa_key_makes_the_trusted_and_only_a_master_with_the_subnet_up_answers() {
    let (f, sm) = up("mport-ntree:4:2");
    let me = host(&f);
    // The SA key (OpenSM's sa_key) is not the SM's own SM_Key.
    let mut sa = Sa::new(SaConfig {
        sm_key: 7,
        sm_info_key: 0x1234,
        sm_priority: 9,
        ..SaConfig::default()
    });
    let with_key = |key: u64, tid: u64| {
        let mut t = SaMad::parse(&ask(Method::Get, &SmInfoRecord::default(), 0, tid)).unwrap();
        t.sa.sm_key = key;
        t.to_bytes()
    };
    // Trusted by the SA key: the SM's own key and priority shown.
    let r = exchange(&mut sa, &sm, me, &with_key(7, 1), 0);
    let rec: SmInfoRecord = r[0].record().unwrap();
    assert_eq!((rec.sm_info.sm_key.0, rec.sm_info.priority), (0x1234, 9));
    // The SM's key is not the SA's: dropped unanswered, as OpenSM does.
    assert_eq!(
        sa.handle_mad(sm.subnet(), me, &with_key(0x1234, 2), 0),
        Err(SaError::BadSmKey)
    );
    assert!(sa.poll_transmit().is_none());
    // A re-read priority shows at once.
    sa.set_sm_priority(3);
    let r = exchange(&mut sa, &sm, me, &with_key(0, 3), 0);
    let rec: SmInfoRecord = r[0].record().unwrap();
    assert_eq!((rec.sm_info.sm_key.0, rec.sm_info.priority), (0, 3));
    // Not serving (a standby, or a master still in its first sweep):
    // every MAD ignored, counted, nothing queued and nothing changed.
    sa.set_serving(false);
    let before = sa.stats().answered;
    for tid in 4..8 {
        assert_eq!(
            sa.handle_mad(sm.subnet(), me, &with_key(7, tid), 0),
            Err(SaError::NotServing)
        );
    }
    assert!(sa.poll_transmit().is_none());
    assert_eq!((sa.stats().ignored, sa.stats().answered), (4, before));
    sa.set_serving(true);
    assert_eq!(exchange(&mut sa, &sm, me, &with_key(7, 9), 0).len(), 1);
}

/// A PathRecord question no path answers (an MTU less than 256), with
/// its mask.
fn no_path_answers() -> (PathRecord, u64) {
    let q = PathRecord {
        mtu_selector: 1, // less than
        mtu: 1,          // 256
        ..PathRecord::default()
    };
    (q, mask::<PathRecord>(&["mtu_selector", "mtu"]))
}

/// The status of the first answer to a GetTable of `q` (mask `m`) with
/// TID `tid` from `from` at `now` ms; everything queued is taken.
#[allow(clippy::too_many_arguments)]
fn first_status<R: SaRecord>(
    sa: &mut Sa,
    sm: &Sm,
    from: Addr,
    q: &R,
    m: u64,
    tid: u64,
    now: u64,
) -> SaStatus {
    let mut mad = ask(Method::GetTable, q, m, 0);
    mad[8..16].copy_from_slice(&tid.to_be_bytes());
    sa.handle_mad(sm.subnet(), from, &mad, now).unwrap();
    let r: Vec<Transmit> = std::iter::from_fn(|| sa.poll_transmit()).collect();
    SaMad::parse(&r[0].mad).unwrap().sa_status()
}

/// A second requester: a CA or switch LID other than `a`'s and the SM's.
fn other_host(f: &Fabric, a: Addr) -> Addr {
    Addr {
        lid: (0..f.nodes.len())
            .map(|i| f.nodes[i].lid())
            .find(|&l| l != a.lid && l != f.nodes[f.sm_node].lid())
            .unwrap(),
        qpn: 1,
    }
}

/// A path question no pair answers (an MTU below 256, no end named) would
/// walk every pair of the subnet on the SM's one thread: past
/// `SaConfig::max_examined` LID pairs it is answered "no resources", and
/// the next question is answered as before. At the default bound, on
/// fat-tree-5832 (40 M pairs, 6.2 s before the bound).
#[test]
fn a_path_question_no_pair_answers_stops_at_the_examination_bound() {
    let (impossible, m) = no_path_answers();
    let status = |sa: &mut Sa, sm: &Sm, me: Addr, mad: &[u8]| {
        let r = exchange(sa, sm, me, mad, 0);
        (r[0].sa_status(), r.len())
    };
    // A small bound on a small fabric: the same question is answered
    // (with no record) under a bound of all its 36 × 36 pairs, and
    // refused under one below.
    let (f, sm) = up("mport-ntree:4:3");
    let me = host(&f);
    let ends = f.nodes.len();
    for (bound, want) in [(ends * ends, SaStatus::Ok), (ends, SaStatus::NoResources)] {
        let mut sa = Sa::new(SaConfig {
            max_examined: bound,
            rmpp_acks: false,
            ..SaConfig::default()
        });
        let (got, _) = status(&mut sa, &sm, me, &ask(Method::GetTable, &impossible, m, 1));
        assert_eq!(got, want, "bound {bound}");
        // A MultiPathRecord of every CA to every CA, the same.
        let cas: Vec<usize> = (0..ends)
            .filter(|&i| f.topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
            .take(5)
            .collect();
        let mut mp = MultiPathRecord {
            sgid_count: 5,
            dgid_count: 5,
            mtu_selector: 1,
            mtu: 1,
            ..MultiPathRecord::default()
        };
        for (k, &i) in cas.iter().chain(&cas).enumerate() {
            mp.gids[k] = mad_core::Gid::new(
                mad_core::Gid::DEFAULT_PREFIX,
                mad_core::Guid(f.topo.nodes[i].guid + 1),
            );
        }
        let mm = mask::<MultiPathRecord>(&["sgid_count", "dgid_count", "mtu_selector", "mtu"]);
        let mut sa = Sa::new(SaConfig {
            max_examined: if want == SaStatus::Ok { 25 } else { 24 },
            rmpp_acks: false,
            ..SaConfig::default()
        });
        let (got, _) = status(&mut sa, &sm, me, &ask(Method::GetMulti, &mp, mm, 2));
        assert_eq!(got, want, "MultiPathRecord, bound {bound}");
        // And a question with an answer still has it.
        let (ok, n) = status(
            &mut sa,
            &sm,
            me,
            &ask(Method::GetTable, &NodeRecord::default(), 0, 3),
        );
        assert_eq!(ok, SaStatus::Ok);
        assert!(n > 0);
    }
    // The default bound, where the claim is made: fat-tree-5832.
    let (f, sm) = up("fat-tree-5832");
    let me = host(&f);
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    let t = std::time::Instant::now();
    let (got, _) = status(&mut sa, &sm, me, &ask(Method::GetTable, &impossible, m, 4));
    println!(
        "fat-tree-5832, {} nodes: a GetTable no pair answers: {got:?} in {:?}",
        f.nodes.len(),
        t.elapsed()
    );
    assert_eq!(got, SaStatus::NoResources);
}

/// Answers held for receivers that do not ACK them are bounded in bytes
/// (`SaConfig::max_transfer_bytes`, a quarter of it for one requester):
/// past its share a host's GetTable is "no resources" and another host is
/// still answered; once its transfers end, it is answered again. At the
/// default bound, one host's 256 all-pairs GetTables on fat-tree-648 (31
/// MB each; 8.1 GB held before the bound) hold 4 answers.
#[test]
fn answers_held_for_slow_receivers_are_bounded_in_bytes() {
    let all = PathRecord::default();
    let first_status =
        |sa: &mut Sa, sm: &Sm, from: Addr, tid: u64| first_status(sa, sm, from, &all, 0, tid, 0);
    let (f, sm) = up("mport-ntree:4:3");
    let ends = f.nodes.len();
    let answer = ends * ends * 64; // every pair's PathRecord
    let a = host(&f);
    let b = other_host(&f, a);
    let mut sa = Sa::new(SaConfig {
        max_transfer_bytes: 4 * answer,
        ..SaConfig::default()
    });
    assert_eq!(first_status(&mut sa, &sm, a, 1), SaStatus::Ok);
    assert_eq!(sa.transfers(), 1);
    assert_eq!(first_status(&mut sa, &sm, a, 2), SaStatus::NoResources);
    assert_eq!(first_status(&mut sa, &sm, b, 3), SaStatus::Ok);
    assert_eq!(sa.transfers(), 2);
    // Unacknowledged, the transfers end; then A is answered again.
    let mut now = 0;
    while sa.transfers() > 0 && now < 60_000 {
        now += 100;
        sa.handle_timeout(now);
        while sa.poll_transmit().is_some() {}
    }
    assert_eq!(sa.transfers(), 0);
    assert_eq!(first_status(&mut sa, &sm, a, 4), SaStatus::Ok);
    // An answer larger than a requester's share: no resources at once.
    let mut small = Sa::new(SaConfig {
        max_transfer_bytes: 2 * answer,
        ..SaConfig::default()
    });
    assert_eq!(first_status(&mut small, &sm, a, 5), SaStatus::NoResources);
    assert_eq!(small.transfers(), 0);
    // The default bound where the claim is made (the bound on a host's
    // path work a second lifted, so that bytes alone refuse).
    let (f, sm) = up("fat-tree-648");
    let a = host(&f);
    let mut sa = Sa::new(SaConfig {
        max_examined_per_second: usize::MAX,
        max_examined_all_per_second: usize::MAX,
        ..SaConfig::default()
    });
    let t = std::time::Instant::now();
    let ok = (0..256)
        .filter(|&tid| first_status(&mut sa, &sm, a, 100 + tid) == SaStatus::Ok)
        .count();
    println!(
        "fat-tree-648: 256 all-pairs GetTables from one host: {ok} answered, {} held, in {:?}",
        sa.transfers(),
        t.elapsed()
    );
    assert_eq!(ok, 4);
    assert_eq!(sa.transfers(), 4);
    assert!(sa.transfer_bytes() <= SaConfig::default().max_transfer_bytes / 4);
}

/// One requester's path questions share a budget of LID pairs a second
/// (`SaConfig::max_examined_per_second`): past it they are "no
/// resources" until the second is out, and another requester is answered
/// meanwhile. At the default bounds, on fat-tree-5832, a host asking a
/// question no pair answers a hundred times in a second has one of them
/// worked on.
#[test]
fn one_hosts_path_questions_share_a_budget_a_second() {
    let (impossible, m) = no_path_answers();
    let at = |sa: &mut Sa, sm: &Sm, me: Addr, tid: u64, now: u64| {
        first_status(sa, sm, me, &impossible, m, tid, now)
    };
    let (f, sm) = up("mport-ntree:4:3");
    let pairs = f.nodes.len() * f.nodes.len(); // 1,296 a question
    let a = host(&f);
    let b = other_host(&f, a);
    let mut sa = Sa::new(SaConfig {
        max_examined_per_second: 3 * pairs,
        rmpp_acks: false,
        ..SaConfig::default()
    });
    for tid in 0..3 {
        assert_eq!(at(&mut sa, &sm, a, tid, 10), SaStatus::Ok, "question {tid}");
    }
    assert_eq!(at(&mut sa, &sm, a, 3, 500), SaStatus::NoResources);
    assert_eq!(at(&mut sa, &sm, b, 4, 500), SaStatus::Ok, "another host");
    assert_eq!(
        at(&mut sa, &sm, a, 5, 1010),
        SaStatus::Ok,
        "the next second"
    );
    // The default bounds on fat-tree-5832.
    let (f, sm) = up("fat-tree-5832");
    let a = host(&f);
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    let t = std::time::Instant::now();
    let mut worked = 0;
    for tid in 0..100 {
        let before = sa.stats().pairs_examined;
        assert_eq!(at(&mut sa, &sm, a, tid, 0), SaStatus::NoResources);
        worked += usize::from(sa.stats().pairs_examined > before);
    }
    println!(
        "fat-tree-5832: 100 questions no pair answers from one host in one second: \
         {worked} worked on ({} LID pairs), {} refused at once, {:?} in all",
        sa.stats().pairs_examined,
        100 - worked,
        t.elapsed()
    );
    assert_eq!(worked, 1);
    assert!(sa.stats().pairs_examined <= 1 << 20);
}

/// All requesters' path questions together share a budget of LID pairs
/// a second (`SaConfig::max_examined_all_per_second`), so that many hosts
/// asking at once cannot take the SM's whole thread: past it every
/// host's path GetTable is "no resources" until the second is out, while
/// a PathRecord Get is still answered. At the default bounds, on
/// fat-tree-5832, eight hosts asking a question no pair answers a hundred
/// times each in a second have two of them worked on.
#[test]
fn all_hosts_path_questions_share_a_budget_a_second() {
    let (impossible, m) = no_path_answers();
    let at = |sa: &mut Sa, sm: &Sm, me: Addr, tid: u64, now: u64| {
        first_status(sa, sm, me, &impossible, m, tid, now)
    };
    let (f, sm) = up("mport-ntree:4:3");
    let pairs = f.nodes.len() * f.nodes.len(); // 1,296 a question
    let [a, b, c] = hosts(&f, 3)[..] else {
        unreachable!()
    };
    let mut sa = Sa::new(SaConfig {
        max_examined_per_second: 3 * pairs,
        max_examined_all_per_second: 5 * pairs,
        rmpp_acks: false,
        ..SaConfig::default()
    });
    for tid in 0..3 {
        assert_eq!(
            at(&mut sa, &sm, a, tid, 10),
            SaStatus::Ok,
            "A's question {tid}"
        );
    }
    for tid in 3..5 {
        assert_eq!(
            at(&mut sa, &sm, b, tid, 20),
            SaStatus::Ok,
            "B's question {tid}"
        );
    }
    // B is within its own budget, C has asked nothing: both refused, the
    // second's budget of all hosts being spent.
    assert_eq!(at(&mut sa, &sm, b, 5, 30), SaStatus::NoResources);
    let before = sa.stats().pairs_examined;
    assert_eq!(at(&mut sa, &sm, c, 6, 40), SaStatus::NoResources);
    assert_eq!(sa.stats().pairs_examined, before, "refused before the work");
    // A PathRecord Get is not path work: still answered.
    assert_eq!(path_get(&mut sa, &sm, c, a, b, 50), SaStatus::Ok);
    // So are other records' GetTables.
    assert_eq!(
        first_status(&mut sa, &sm, c, &NodeRecord::default(), 0, 8, 60),
        SaStatus::Ok
    );
    // The next second: C is answered; a clock that went back starts a
    // new second rather than stretching this one.
    assert_eq!(
        at(&mut sa, &sm, c, 9, 1010),
        SaStatus::Ok,
        "the next second"
    );
    for tid in 10..13 {
        assert_eq!(
            at(&mut sa, &sm, a, tid, 1020),
            SaStatus::Ok,
            "A again, {tid}"
        );
    }
    assert_eq!(at(&mut sa, &sm, b, 13, 1030), SaStatus::Ok, "the fifth");
    assert_eq!(at(&mut sa, &sm, b, 14, 1030), SaStatus::NoResources);
    assert_eq!(
        at(&mut sa, &sm, b, 15, 5),
        SaStatus::Ok,
        "the clock went back"
    );
    // The default bounds on fat-tree-5832: eight hosts, a hundred
    // questions each, in one second.
    let (f, sm) = up("fat-tree-5832");
    let hosts = hosts(&f, 8);
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    let t = std::time::Instant::now();
    let mut worked = 0;
    for round in 0..100u64 {
        for (k, &h) in (0u64..).zip(&hosts) {
            let before = sa.stats().pairs_examined;
            let tid = round * 8 + k;
            assert_eq!(at(&mut sa, &sm, h, tid, round), SaStatus::NoResources);
            worked += usize::from(sa.stats().pairs_examined > before);
        }
    }
    let spent = t.elapsed();
    let get = path_get(&mut sa, &sm, hosts[2], hosts[0], hosts[1], 100);
    println!(
        "fat-tree-5832: 800 questions no pair answers from 8 hosts in one second: \
         {worked} worked on ({} LID pairs), {} refused at once, {spent:?} in all; \
         a PathRecord Get meanwhile: {:?}",
        sa.stats().pairs_examined,
        800 - worked,
        get
    );
    assert_eq!(worked, 2);
    assert!(sa.stats().pairs_examined <= 2 << 20);
    assert_eq!(get, SaStatus::Ok);
}

/// The status of `from`'s PathRecord Get of `a` to `b`, at `now` ms.
fn path_get(sa: &mut Sa, sm: &Sm, from: Addr, a: Addr, b: Addr, now: u64) -> SaStatus {
    let q = PathRecord {
        slid: a.lid,
        dlid: b.lid,
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["slid", "dlid"]);
    exchange(sa, sm, from, &ask(Method::Get, &q, m, 7), now)[0].sa_status()
}

/// `n` requesters: the LIDs of nodes other than the SM's.
fn hosts(f: &Fabric, n: usize) -> Vec<Addr> {
    let sm = f.nodes[f.sm_node].lid();
    let hosts: Vec<Addr> = (0..f.nodes.len())
        .map(|i| f.nodes[i].lid())
        .filter(|&l| l != sm)
        .take(n)
        .map(|lid| Addr { lid, qpn: 1 })
        .collect();
    assert_eq!(hosts.len(), n);
    hosts
}

/// Under a site's subnet prefix (OpenSM's `subnet_prefix`), every end
/// port holds it and the SA answers with it: a PathRecord asked by LIDs
/// names both ends' GIDs under it, one asked by those GIDs finds the same
/// path, and a GID under the default prefix names no port of this subnet.
#[test]
fn a_sites_subnet_prefix_is_every_ports_and_every_answers() {
    const PREFIX: u64 = 0xfec0_0000_0000_0001;
    let cfg = SmConfig {
        subnet_prefix: PREFIX,
        ..SmConfig::default()
    };
    let (f, sm, up) = bring_up("mport-ntree:4:2", SimConfig::default(), cfg).unwrap();
    assert!(up);
    for n in sm.nodes() {
        let pi = n.ports[usize::from(n.end_port())].info.unwrap();
        assert_eq!(pi.gid_prefix.0, PREFIX, "{:#x}", n.info.node_guid.0);
    }
    let mut sa = Sa::new(SaConfig::default());
    let me = host(&f);
    let other = (0..f.nodes.len())
        .rfind(|&i| f.topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .unwrap();
    let q = PathRecord {
        slid: me.lid,
        dlid: f.nodes[other].lid(),
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["slid", "dlid"]);
    let r = exchange(&mut sa, &sm, me, &ask(Method::Get, &q, m, 1), 1);
    assert_eq!(r[0].sa_status(), SaStatus::Ok);
    let by_lid: PathRecord = r[0].record().unwrap();
    assert_eq!(
        (by_lid.sgid.prefix(), by_lid.dgid.prefix()),
        (PREFIX, PREFIX)
    );
    assert_eq!(by_lid.dgid.guid().0, f.topo.nodes[other].guid + 1);
    let q = PathRecord {
        sgid: by_lid.sgid,
        dgid: by_lid.dgid,
        ..PathRecord::default()
    };
    let m = mask::<PathRecord>(&["sgid", "dgid"]);
    let r = exchange(&mut sa, &sm, me, &ask(Method::Get, &q, m, 2), 2);
    assert_eq!(r[0].sa_status(), SaStatus::Ok);
    let by_gid: PathRecord = r[0].record().unwrap();
    assert_eq!((by_gid.slid, by_gid.dlid), (by_lid.slid, by_lid.dlid));
    let q = PathRecord {
        dgid: mad_core::Gid::new(mad_core::Gid::DEFAULT_PREFIX, by_lid.dgid.guid()),
        ..q
    };
    let r = exchange(&mut sa, &sm, me, &ask(Method::Get, &q, m, 3), 3);
    assert_ne!(
        r[0].sa_status(),
        SaStatus::Ok,
        "fe80:: is not this subnet's"
    );
}
