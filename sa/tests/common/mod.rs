//! What the SA's integration tests share: a fabric ibkit's SM brought up
//! in the simulator, hosts on it, and requests sent and answered.
#![allow(dead_code)]

use fabric::sim::{bring_up, Fabric, SimConfig};
use mad_core::attr::NodeType;
use mad_core::mad::Method;
use mad_core::sa::*;
use mad_core::types::PKey;
use mad_core::{Gid, Guid, MAD_SIZE};
use sa::{Addr, Sa, SaConfig, Transmit};
use smi::sm::{Sm, SmConfig};

/// A millisecond in the simulator's nanoseconds.
pub const MS: u64 = 1_000_000;

pub fn up(spec: &str) -> (Fabric, Sm) {
    let (f, sm, up) = bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    (f, sm)
}

/// The CAs that are not the SM's, as requesters.
pub fn hosts(f: &Fabric) -> Vec<(usize, Addr)> {
    (0..f.nodes.len())
        .filter(|&i| i != f.sm_node && f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .map(|i| {
            (
                i,
                Addr {
                    lid: f.nodes[i].lid(),
                    qpn: 1,
                },
            )
        })
        .collect()
}

/// The GID of node `i`'s end port: a CA's port 1 (its port GUIDs follow
/// the node GUID), a switch's port 0 (the node GUID).
pub fn gid_of(f: &Fabric, i: usize) -> Gid {
    let n = &f.topo.nodes[i];
    let port = u64::from(n.kind == NodeType::ChannelAdapter);
    Gid::new(Gid::DEFAULT_PREFIX, Guid(n.guid + port))
}

/// What the MCMemberRecord join that creates a group selects.
pub const CREATE: &[&str] = &[
    "mgid",
    "port_gid",
    "join_state",
    "qkey",
    "tclass",
    "pkey",
    "flow_label",
    "sl",
];

pub fn mask<R: SaRecord>(names: &[&str]) -> u64 {
    names
        .iter()
        .map(|n| R::component(n).unwrap_or_else(|| panic!("no component {n}")))
        .fold(0, |m, b| m | b)
}

pub fn ask<R: SaRecord>(method: Method, rec: &R, mask: u64, key: u64) -> [u8; MAD_SIZE] {
    let mut m = SaMad::request(method, R::ID, 0x55);
    m.set_record(rec).unwrap();
    m.sa.component_mask = mask;
    m.sa.sm_key = key;
    m.to_bytes()
}

/// Sends `mad`; what the SA queued.
pub fn exchange(sa: &mut Sa, sm: &Sm, from: Addr, mad: &[u8], now: u64) -> Vec<SaMad> {
    sa.handle_mad(sm.subnet(), from, mad, now).unwrap();
    drain(sa)
        .into_iter()
        .map(|t| {
            assert_eq!(t.to, from);
            SaMad::parse(&t.mad).unwrap()
        })
        .collect()
}

pub fn drain(sa: &mut Sa) -> Vec<Transmit> {
    std::iter::from_fn(|| sa.poll_transmit()).collect()
}

/// One answer: its status and record bytes.
pub fn one(sa: &mut Sa, sm: &Sm, from: Addr, mad: &[u8], now: u64) -> (SaStatus, SaMad) {
    let r = exchange(sa, sm, from, mad, now);
    assert_eq!(r.len(), 1, "one answer");
    (r[0].sa_status(), r[0].clone())
}

/// Every record of a GetTable answered with every segment at once.
pub fn all<R: SaRecord>(sa: &mut Sa, sm: &Sm, from: Addr, q: &R, m: u64, key: u64) -> Vec<R> {
    let segs = exchange(sa, sm, from, &ask(Method::GetTable, q, m, key), 0);
    let mut data = Vec::new();
    for s in &segs {
        assert_eq!(s.sa_status(), SaStatus::Ok, "{s:?}");
        data.extend_from_slice(&s.data);
    }
    let stride = segs[0].sa.attribute_offset as usize * 8;
    if stride == 0 {
        return Vec::new();
    }
    let total = if segs[0].rmpp.active() {
        segs[0].rmpp.payload_length_or_window as usize - 20 * segs.len()
    } else {
        stride
    };
    data.truncate(total);
    data.chunks(stride).map(|c| R::decode(c).unwrap()).collect()
}

/// Runs the fabric to `until_ns`, hands the SM's events to the SA; what
/// the SA queued.
pub fn run(f: &mut Fabric, sm: &mut Sm, sa: &mut Sa, until_ns: u64) -> Vec<Transmit> {
    assert!(f.run_until(sm, until_ns));
    let events: Vec<_> = std::iter::from_fn(|| sm.poll_event()).collect();
    for e in &events {
        sa.handle_event(sm.subnet(), e, until_ns / MS);
    }
    drain(sa)
}

/// A subscription to generic trap `trap` (0xFFFF: every one) from every
/// LID, of every type and producer.
pub fn inform(trap: u16) -> InformInfo {
    InformInfo {
        lid_range_begin: mad_core::Lid(0xFFFF),
        is_generic: 1,
        subscribe: 1,
        notice_type: 0xFFFF,
        trap_number_or_device_id: trap,
        producer_type_or_vendor_id: 0xFF_FFFF,
        ..InformInfo::default()
    }
}

/// An SA that sends every segment of a table at once (as over umad).
pub fn new_sa() -> Sa {
    Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    })
}

/// A membership of `port` in `mgid` with `join` (Q_Key 0x1234, the
/// default partition's full key), for a join, a leave or a creation.
pub fn member(mgid: Gid, port: Gid, join: u8) -> McMemberRecord {
    McMemberRecord {
        mgid,
        port_gid: port,
        join_state: join,
        qkey: 0x1234,
        pkey: PKey::DEFAULT_FULL,
        ..McMemberRecord::default()
    }
}

/// A ServiceRecord `name` (ID `id`) of `gid` with `lease` seconds, its
/// ServiceKey all `key`, ServiceData32 1, 2, 3, 4.
pub fn service(name: &str, id: u64, gid: Gid, lease: u32, key: u8) -> ServiceRecord {
    let mut r = ServiceRecord {
        service_id: id,
        service_gid: gid,
        service_lease: lease,
        ..ServiceRecord::default()
    };
    r.service_name.0[..name.len()].copy_from_slice(name.as_bytes());
    r.service_key.0 = [key; 16];
    r.service_data32 = [1, 2, 3, 4];
    r
}
