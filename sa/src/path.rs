//! PathRecord (IBA 15.2.5.16), resolved over the forwarding tables the SM
//! installed: a data packet from the source port is walked to the
//! destination LID as the switches would forward it; the record carries
//! the smallest MTU and rate of the links it crosses and a packet lifetime
//! that adds up the lifetimes of the switches on the way. The path back
//! uses the same links here (the engines route both ways alike), so every
//! path is reversible.

use crate::query::{matches, Query};
use alloc::vec::Vec;
use mad_core::attr::{LinkSpeed, LinkWidth, PortInfo};
use mad_core::sa::path::selector;
use mad_core::sa::{PathRecord, SaRecord, SaStatus};
use mad_core::types::{Gid, Guid, PKey};
use mad_core::Lid;
use smi::sm::{NodeId, Subnet};

/// SwitchInfo.LifeTimeValue taken for a switch the SM has not read.
const DEFAULT_LIFE_TIME: u8 = 18;

/// What a walk from a port to a LID found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walked {
    /// The node holding the LID.
    pub dst: NodeId,
    /// Switches crossed.
    pub switches: u32,
    /// The smallest link MTU code on the way (1: 256 … 5: 4096).
    pub mtu: u8,
    /// The smallest link rate on the way, in units of 0.5 Gb/s.
    pub half_gbps: u32,
    /// Sum of 2^LifeTimeValue of the switches crossed.
    pub life: u64,
}

/// A link's MTU code and rate (0.5 Gb/s units) from the PortInfo of one of
/// its ends; what is not set reads as 4096 and 10 Gb/s (a link the SM
/// activated without saying more).
fn link(pi: Option<&PortInfo>) -> (u8, u32) {
    let Some(pi) = pi else { return (5, 20) };
    let mtu = match u8::from(pi.neighbor_mtu) {
        m @ 1..=5 => m,
        _ => 5,
    };
    let w = pi.link_width_active;
    let lanes = if w.contains(LinkWidth::W12X) {
        12
    } else if w.contains(LinkWidth::W8X) {
        8
    } else if w.contains(LinkWidth::W4X) {
        4
    } else if w.contains(LinkWidth::W2X) {
        2
    } else if w.contains(LinkWidth::W1X) {
        1
    } else {
        4
    };
    let s = pi.link_speed_active;
    // SDR, or nothing said: 2.5 Gb/s a lane.
    let half_per_lane = if s.contains(LinkSpeed::QDR) {
        20
    } else if s.contains(LinkSpeed::DDR) {
        10
    } else {
        5
    };
    (mtu, lanes * half_per_lane)
}

/// The IBA rate code of a rate in 0.5 Gb/s units (the largest code not
/// above it).
pub fn rate_code(half_gbps: u32) -> u8 {
    // (0.5 Gb/s units, code), ascending.
    const RATES: [(u32, u8); 9] = [
        (5, 2),
        (10, 5),
        (20, 3),
        (40, 6),
        (60, 4),
        (80, 7),
        (120, 8),
        (160, 9),
        (240, 10),
    ];
    RATES
        .iter()
        .rev()
        .find(|&&(r, _)| r <= half_gbps)
        .map_or(2, |&(_, c)| c)
}

/// The PacketLifeTime code of a sum of 2^LifeTimeValue: the smallest
/// exponent that covers it, at most 63.
pub fn life_code(life: u64) -> u8 {
    if life <= 1 {
        return 0;
    }
    (64 - (life - 1).leading_zeros()).min(63) as u8
}

/// Walks a data packet from `src` (a CA's port, or a switch) to `dlid`
/// through the installed tables ([`Subnet::walk`]), gathering the links
/// and switches it crosses; `None` when it is dropped, loops, or stops
/// somewhere that does not hold `dlid`.
pub fn walk(s: &Subnet, src: NodeId, dlid: Lid) -> Option<Walked> {
    let holds = |id: NodeId| {
        s.node(id)
            .is_some_and(|n| n.alive && (n.lid == dlid.0 || n.vfs.iter().any(|v| v.lid == dlid.0)))
    };
    let switch_life = |id: NodeId| {
        1u64 << s
            .node(id)
            .and_then(|n| n.switch_info)
            .map_or(DEFAULT_LIFE_TIME, |si| si.life_time_value)
            .min(40)
    };
    let n = s.node(src)?;
    if !n.is_switch() && holds(src) {
        // The port itself: no link crossed but its own.
        let (mtu, rate) = link(
            n.ports
                .get(usize::from(n.info.local_port_num))?
                .info
                .as_ref(),
        );
        return Some(Walked {
            dst: src,
            switches: 0,
            mtu,
            half_gbps: rate,
            life: 0,
        });
    }
    let (mut mtu, mut rate, mut life, mut switches) = (5u8, u32::MAX, 0u64, 0u32);
    let dst = s.walk(src, dlid, |id, port| {
        let Some(node) = s.node(id) else { return };
        let (m, r) = link(
            node.ports
                .get(usize::from(port))
                .and_then(|p| p.info.as_ref()),
        );
        (mtu, rate) = (mtu.min(m), rate.min(r));
        if node.is_switch() {
            switches += 1;
            life += switch_life(id);
        }
    })?;
    if !holds(dst) {
        return None;
    }
    if s.node(dst).is_some_and(|n| n.is_switch()) {
        // The switch that keeps the packet counts too.
        switches += 1;
        life += switch_life(dst);
    }
    Some(Walked {
        dst,
        switches,
        mtu,
        half_gbps: if rate == u32::MAX { 20 } else { rate },
        life,
    })
}

/// The port GUID and GID prefix of a node's port (a switch's port 0, a
/// CA's port).
fn gid_of(s: &Subnet, id: NodeId) -> Option<Gid> {
    let n = s.node(id)?;
    let port = if n.is_switch() {
        0
    } else {
        n.info.local_port_num
    };
    let prefix = n
        .ports
        .get(usize::from(port))
        .and_then(|p| p.info)
        .map(|pi| pi.gid_prefix.0)
        .filter(|&p| p != 0)
        .unwrap_or(Gid::DEFAULT_PREFIX);
    Some(Gid::new(prefix, n.info.port_guid))
}

/// The live node whose port has this GUID.
fn by_port_guid(s: &Subnet, g: Guid) -> Option<NodeId> {
    s.nodes()
        .iter()
        .position(|n| n.alive && n.info.port_guid == g)
        .map(NodeId)
}

/// The path record from `src` to the port that holds `dlid`.
pub fn resolve(s: &Subnet, src: NodeId, dlid: Lid) -> Option<PathRecord> {
    let w = walk(s, src, dlid)?;
    let slid = Lid(s.node(src)?.lid);
    Some(PathRecord {
        dgid: gid_of(s, w.dst)?,
        sgid: gid_of(s, src)?,
        dlid,
        slid,
        reversible: true,
        pkey: PKey(0xffff),
        mtu_selector: selector::EXACTLY,
        mtu: w.mtu,
        rate_selector: selector::EXACTLY,
        rate: rate_code(if w.half_gbps == u32::MAX {
            20
        } else {
            w.half_gbps
        }),
        packet_life_time_selector: selector::EXACTLY,
        packet_life_time: life_code(w.life),
        ..PathRecord::default()
    })
}

/// True when `ours` meets a selector-qualified request: `sel` of the
/// request applied to its `want` (IBA 15.2.5.16: greater, less, exactly,
/// the largest available).
fn selected(sel: u8, want: u8, ours: u8) -> bool {
    match sel {
        selector::GREATER => ours > want,
        selector::LESS => ours < want,
        selector::EXACTLY => ours == want,
        _ => true,
    }
}

/// The PathRecords a query asks for: `Get` needs a destination (DGID or
/// DLID); `GetTable` without one means every destination from the
/// source (the SGID's or SLID's port, or else the requester's own).
pub fn path_records(q: &Query<'_>, table: bool) -> Result<(Vec<Vec<u8>>, usize), SaStatus> {
    let has = |name: &str| PathRecord::component(name).is_some_and(|b| q.mask & b != 0);
    let want = PathRecord::decode(q.data).map_err(|_| SaStatus::ReqInvalid)?;
    let s = q.subnet;
    let sources: Vec<NodeId> = if has("sgid") {
        alloc::vec![by_port_guid(s, want.sgid.guid()).ok_or(SaStatus::ReqInvalidGid)?]
    } else if has("slid") {
        s.by_lid(want.slid).map(|(n, _)| n).into_iter().collect()
    } else {
        s.by_lid(q.from.lid).map(|(n, _)| n).into_iter().collect()
    };
    let dests: Vec<Lid> = if has("dgid") {
        let d = by_port_guid(s, want.dgid.guid()).ok_or(SaStatus::ReqInvalidGid)?;
        alloc::vec![Lid(s.node(d).map_or(0, |n| n.lid))]
    } else if has("dlid") {
        alloc::vec![want.dlid]
    } else if table {
        s.nodes()
            .iter()
            .filter(|n| n.alive && n.lid != 0)
            .map(|n| Lid(n.lid))
            .collect()
    } else {
        return Err(SaStatus::ReqInsufficientComponents);
    };
    // Components compared as selectors, or not compared: the selectors
    // and their values, and NumbPath (a request parameter).
    let special = [
        "mtu_selector",
        "mtu",
        "rate_selector",
        "rate",
        "packet_life_time_selector",
        "packet_life_time",
        "numb_path",
        "sgid",
        "dgid",
    ]
    .iter()
    .filter_map(|c| PathRecord::component(c))
    .fold(0u64, |m, b| m | b);
    let generic = q.mask & !special;
    let pairs = [
        ("mtu", "mtu_selector", want.mtu, want.mtu_selector),
        ("rate", "rate_selector", want.rate, want.rate_selector),
        (
            "packet_life_time",
            "packet_life_time_selector",
            want.packet_life_time,
            want.packet_life_time_selector,
        ),
    ];
    let mut out = Vec::new();
    for &src in &sources {
        for &dlid in &dests {
            let Some(pr) = resolve(s, src, dlid) else {
                continue;
            };
            let mut b = alloc::vec![0u8; PathRecord::SIZE];
            if pr.encode(&mut b).is_err() || !matches::<PathRecord>(q.data, &b, generic) {
                continue;
            }
            let ours = [pr.mtu, pr.rate, pr.packet_life_time];
            let ok = pairs.iter().zip(ours).all(|(&(v, sel, w, ws), o)| {
                if !has(v) {
                    return true;
                }
                let sel = if has(sel) { ws } else { selector::EXACTLY };
                selected(sel, w, o)
            });
            if !ok {
                continue;
            }
            if out.len() >= q.max {
                return Err(SaStatus::NoResources);
            }
            out.push(b);
        }
    }
    Ok((out, PathRecord::SIZE))
}
