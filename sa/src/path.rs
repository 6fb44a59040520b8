//! PathRecord (IBA 15.2.5.16), resolved over the forwarding tables the SM
//! installed: a data packet from the source port is walked to the
//! destination LID as the switches would forward it; the record carries
//! the smallest MTU and rate of the links it crosses and a packet lifetime
//! that adds up the lifetimes of the switches on the way. The path back
//! uses the same links here (the engines route both ways alike), so every
//! path is reversible.

use crate::query::{matches, Query, Records};
use alloc::vec::Vec;
use mad_core::attr::NodeType;
use mad_core::sa::path::{comp, selector};
use mad_core::sa::{PathRecord, SaStatus};
use mad_core::types::{Gid, Guid, PKey};
use mad_core::Lid;
use smi::sm::qos_policy::{PathQuery, PortFacts};
use smi::sm::{NodeBrief, NodeId, PortBrief, Subnet};

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
/// activated without saying more). Worked out when the SM reads the
/// port ([`PortBrief::link_mtu`], [`PortBrief::link_half_gbps`]).
#[inline]
pub(crate) fn link(p: &PortBrief) -> (u8, u32) {
    (p.link_mtu, u32::from(p.link_half_gbps))
}

/// The IBA rate code of a rate in 0.5 Gb/s units (the largest code not
/// above it; 2.5 Gb/s below that).
pub fn rate_code(half_gbps: u32) -> u8 {
    // Every code by its rate, ascending: a PathRecord's walk ends here,
    // so this is a table, not a search of the codes.
    const BY_RATE: [(u32, u8); 23] = [
        (5, 2),
        (10, 5),
        (20, 3),
        (28, 11),
        (40, 6),
        (50, 15),
        (56, 19),
        (60, 4),
        (80, 7),
        (100, 20),
        (112, 12),
        (120, 8),
        (160, 9),
        (200, 16),
        (224, 13),
        (240, 10),
        (336, 14),
        (400, 17),
        (600, 18),
        (800, 21),
        (1200, 22),
        (1600, 23),
        (2400, 24),
    ];
    BY_RATE
        .iter()
        .rev()
        .find(|&&(r, _)| r <= half_gbps)
        .map_or(2, |&(_, c)| c)
}

/// The highest rate code: 1200 Gb/s, 12x NDR (IBA 1.5; OpenSM's
/// `IB_PATH_RECORD_RATE_1200_GBS`).
pub(crate) const MAX_RATE: u8 = 24;

/// An IBA rate code's rate in units of 0.5 Gb/s (`None`: no such code).
pub(crate) fn half_gbps(code: u8) -> Option<u32> {
    Some(match code {
        2 => 5,
        3 => 20,
        4 => 60,
        5 => 10,
        6 => 40,
        7 => 80,
        8 => 120,
        9 => 160,
        10 => 240,
        11 => 28,
        12 => 112,
        13 => 224,
        14 => 336,
        15 => 50,
        16 => 200,
        17 => 400,
        18 => 600,
        19 => 56,
        20 => 100,
        21 => 800,
        22 => 1200,
        23 => 1600,
        24 => 2400,
        _ => return None,
    })
}

/// OpenSM's rate codes 300 Gb/s at most (`ib_path_rate_max_12xedr`), for
/// `use_original_extended_sa_rates_only`: the 2x and HDR codes (19–22)
/// and NDR's (23, 24) become the original code nearest below. The same
/// as [`limit_rate`] to 18.
pub fn original_rate(code: u8) -> u8 {
    match code {
        19 => 15,
        20 => 7,
        21..=24 => 18,
        c => c,
    }
}

/// No limit on rate codes: OpenSM's `max_rate_enum` default
/// (`SA_RATE_MAX_ENUM`).
pub const NO_RATE_LIMIT: u8 = 63;

/// A rate code under OpenSM's `max_rate_enum` `limit`
/// (`osm_sa_limit_rate`, `ib_path_get_reduced_rate`): a code above the
/// limit steps down, rate by rate, to the first code that is neither
/// above the limit nor faster than the limit's rate — an older stack
/// knows the codes up to its own, so 25 Gb/s (code 15) under limit 7
/// (40 Gb/s) becomes 20 Gb/s (code 6). Codes not above it are kept.
pub fn limit_rate(code: u8, limit: u8) -> u8 {
    if limit >= code {
        return code;
    }
    let cap = half_gbps(limit).unwrap_or(u32::MAX);
    let mut at = half_gbps(code).unwrap_or(0);
    // The codes below, fastest first: the first the limit allows.
    loop {
        let below = rate_code(at.saturating_sub(1));
        let rate = half_gbps(below).unwrap_or(0);
        if below == 2 || (below <= limit && rate <= cap) {
            return below;
        }
        at = rate;
    }
}

/// OpenSM's fix of a 2x or HDR rate for an end whose port may not know
/// it (`ib_path_rate_2x_hdr_fixups`): 28 Gb/s (2x FDR) where the port
/// does not say IsLinkWidth2XSupported becomes 25 (20 without extended
/// speeds); 50 Gb/s where it says neither 2x nor HDR, 40; 400 and 600
/// where it does not say HDR, 300. Others are kept.
pub fn rate_for_port(code: u8, pi: &mad_core::attr::PortInfo) -> u8 {
    use mad_core::attr::{CapabilityMask as C, CapabilityMask2 as C2};
    let two = pi
        .capability_mask
        .contains(C::IS_CAPABILITY_MASK2_SUPPORTED)
        && pi.capability_mask2.contains(C2::IS_LINK_WIDTH_2X_SUPPORTED);
    let hdr = pi
        .capability_mask
        .contains(C::IS_CAPABILITY_MASK2_SUPPORTED)
        && pi
            .capability_mask2
            .contains(C2::IS_LINK_SPEED_HDR_SUPPORTED);
    match code {
        19 if !two && pi.capability_mask.contains(C::IS_EXTENDED_SPEEDS_SUPPORTED) => 15,
        19 if !two => 6,
        20 if !two && !hdr => 7,
        21 | 22 if !hdr => 18,
        c => c,
    }
}

/// A path's rate code as OpenSM's SA gives it last (`osm_sa_path_record.c`,
/// after the QoS level): under a `limit` ([`limit_rate`]; OpenSM's
/// `max_rate_enum`, 18 with `use_original_extended_sa_rates_only`) that
/// alone; with none ([`NO_RATE_LIMIT`]), a rate of 28 Gb/s or a later
/// code, fixed for the source's port then the destination's
/// ([`rate_for_port`]; every path here is reversible). A VM's end is its
/// hypervisor's port.
pub fn final_rate(s: &Subnet, src: &End, dst: &End, code: u8, limit: u8) -> u8 {
    if limit < NO_RATE_LIMIT {
        return limit_rate(code, limit);
    }
    if code < 19 {
        return code;
    }
    [src, dst].iter().fold(code, |c, e| {
        let (n, p) = end_port(s, e);
        match (s.node(n))
            .and_then(|n| n.ports.get(usize::from(p)))
            .and_then(|p| p.info.as_ref())
        {
            Some(pi) => rate_for_port(c, pi),
            None => c,
        }
    })
}

/// Orders two valid rate codes by the rate they mean.
pub(crate) fn cmp_rate(a: u8, b: u8) -> core::cmp::Ordering {
    half_gbps(a).unwrap_or(0).cmp(&half_gbps(b).unwrap_or(0))
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
        s.brief(id).is_some_and(|b| {
            b.alive
                && (b.holds_lid(dlid)
                    || (b.hypervisor
                        && s.node(id)
                            .is_some_and(|n| n.vfs.iter().any(|v| v.lid == dlid.0))))
        })
    };
    let switch_life =
        |b: &NodeBrief| 1u64 << b.life_time_value.unwrap_or(DEFAULT_LIFE_TIME).min(40);
    let b = s.brief(src)?;
    if !b.switch && holds(src) {
        // The port itself: no link crossed but its own.
        let (mtu, rate) = link(s.port_brief(src, b.own_port)?);
        return Some(Walked {
            dst: src,
            switches: 0,
            mtu,
            half_gbps: rate,
            life: 0,
        });
    }
    let (mut mtu, mut rate, mut life, mut switches) = (5u8, u32::MAX, 0u64, 0u32);
    // A switch at an end counts its port 0, as OpenSM counts it: its
    // MTUCap (it has no link, so no NeighborMTU) and its rate.
    let port0 = |id: NodeId, mtu: &mut u8, rate: &mut u32| {
        if let Some(r) = s.port_brief(id, 0).map(|p| link(p).1) {
            *rate = (*rate).min(r);
        }
        let cap = (s.node(id))
            .and_then(|n| n.ports.first())
            .and_then(|p| p.info.as_ref())
            .map(|pi| u8::from(pi.mtu_cap));
        if let Some(m) = cap.filter(|m| (1..=5).contains(m)) {
            *mtu = (*mtu).min(m);
        }
    };
    if b.switch {
        port0(src, &mut mtu, &mut rate);
    }
    let dst = s.walk(src, dlid, |h| {
        let (m, r) = link(h.link);
        (mtu, rate) = (mtu.min(m), rate.min(r));
        // The port the packet enters by: its rate too (each end of a
        // link says its own, from its own capabilities).
        if let Some(far) = h.link.peer().and_then(|(n, q)| s.port_brief(n, q)) {
            rate = rate.min(link(far).1);
        }
        if h.brief.switch {
            switches += 1;
            life += switch_life(h.brief);
        }
    })?;
    if !holds(dst) {
        return None;
    }
    let d = s.brief(dst)?;
    if d.switch {
        // The switch that keeps the packet counts too.
        switches += 1;
        life += switch_life(d);
        port0(dst, &mut mtu, &mut rate);
    }
    Some(Walked {
        dst,
        switches,
        mtu,
        half_gbps: if rate == u32::MAX { 20 } else { rate },
        life,
    })
}

/// One end of a path: the node that holds the port, its LID and GID. A
/// VM's end is its hypervisor's node with the VF's LID and the VM's vGUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct End {
    /// The node (a VM's hypervisor).
    pub node: NodeId,
    /// The LID.
    pub lid: Lid,
    /// The GID: the subnet prefix of the node's port and the port GUID (a
    /// VM's vGUID).
    pub gid: Gid,
}

/// The subnet prefix of a node's port (a switch's port 0, a CA's own).
fn prefix_of(s: &Subnet, id: NodeId) -> u64 {
    s.brief(id)
        .map(|b| b.gid_prefix)
        .filter(|&p| p != 0)
        .unwrap_or(Gid::DEFAULT_PREFIX)
}

/// The end that holds `lid`: a node's port, or a VM's VF (a VF without a
/// VM has no GID and no path).
pub fn end_by_lid(s: &Subnet, lid: Lid) -> Option<End> {
    let (node, _) = s.by_lid(lid)?;
    let b = s.brief(node)?;
    let guid = if b.holds_lid(lid) {
        b.port_guid
    } else {
        let vf = s.vf_of_lid(node, lid)?;
        let g = s.node(node)?.vfs.get(usize::from(vf) - 1)?.guid;
        if g == 0 {
            return None;
        }
        Guid(g)
    };
    Some(End {
        node,
        lid,
        gid: Gid::new(prefix_of(s, node), guid),
    })
}

/// The end whose GID is `gid`: a port GUID, a VM's vGUID or an alias GUID, under the
/// subnet prefix of its node's port.
pub fn end_by_gid(s: &Subnet, gid: Gid) -> Option<End> {
    let (node, vf) = s.by_gid_guid(gid.guid())?;
    if prefix_of(s, node) != gid.prefix() {
        return None;
    }
    let lid = if vf == 0 {
        s.brief(node)?.lid.0
    } else {
        s.node(node)?.vfs.get(usize::from(vf) - 1)?.lid
    };
    if lid == 0 {
        return None;
    }
    Some(End {
        node,
        lid: Lid(lid),
        gid,
    })
}

/// The port whose P_Key table an end uses: a switch's port 0, the port
/// by which a CA was reached (a VM's, its hypervisor's).
pub fn end_port(s: &Subnet, e: &End) -> (NodeId, u8) {
    // The brief's own port: 0 for a switch, the port the SM reached for
    // a CA (its node's LocalPortNum), read without reaching the node.
    (e.node, s.brief(e.node).map_or(0, |b| b.own_port))
}

/// The P_Key table `e` uses, as the SM gives it: a VM's VF's own, else
/// its port's (`None`: the SM gives none, and the port holds the default
/// P_Key only).
pub fn end_table<'a>(s: &'a Subnet, e: &End) -> Option<&'a [u16]> {
    let (n, p) = end_port(s, e);
    s.end_pkey_table(n, p, e.lid)
}

/// `e` as [`Subnet::shared_pkey_at`] names an end.
fn key_end(s: &Subnet, e: &End) -> (NodeId, u8, Lid) {
    let (n, p) = end_port(s, e);
    (n, p, e.lid)
}

/// True when the P_Key table of `e` (a VM's VF's, else its port's) holds
/// the partition of `pkey` (without partitions, every port holds the
/// default one only).
pub fn holds(s: &Subnet, e: &End, pkey: PKey) -> bool {
    match end_table(s, e) {
        Some(t) => t
            .iter()
            .any(|&k| PKey(k).is_valid() && k & 0x7FFF == pkey.base()),
        None => pkey.base() == PKey::DEFAULT_FULL.base(),
    }
}

/// The path record from `src` to `dst`, when the installed tables take a
/// packet from one to the other and the two ports share a partition (the
/// one `want` names, when it names one; the record carries it as asked,
/// as OpenSM's does).
pub fn resolve(s: &Subnet, src: &End, dst: &End, want: Option<PKey>) -> Option<PathRecord> {
    let mut pr = PathRecord::default();
    resolve_into(s, src, dst, want, &mut pr).then_some(pr)
}

/// [`resolve`] written over `pr` in place (every field set anew), so
/// the hot paths build each record once where it is encoded from
/// rather than moving it through return values; false when there is no
/// path.
#[inline]
fn resolve_into(s: &Subnet, src: &End, dst: &End, want: Option<PKey>, pr: &mut PathRecord) -> bool {
    let (a, b) = (key_end(s, src), key_end(s, dst));
    // A P_Key asked is carried as asked, once the ends share its partition.
    let shared = s.shared_pkey_at(a, b, want.map(|k| k.base()));
    let Some(pkey) = shared.map(|k| want.unwrap_or(k)) else {
        return false;
    };
    let Some(w) = walk(s, src.node, dst.lid).filter(|w| w.dst == dst.node) else {
        return false;
    };
    *pr = PathRecord {
        dgid: dst.gid,
        sgid: src.gid,
        dlid: dst.lid,
        slid: src.lid,
        reversible: true,
        pkey,
        mtu_selector: selector::EXACTLY,
        mtu: w.mtu,
        rate_selector: selector::EXACTLY,
        rate: rate_code(w.half_gbps),
        packet_life_time_selector: selector::EXACTLY,
        packet_life_time: life_code(w.life),
        ..PathRecord::default()
    };
    true
}

/// What a request asks that the QoS policy reads or that bounds its
/// answer: each only where the request's ComponentMask selects it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// The ServiceID (both halves selected).
    pub service_id: Option<u64>,
    /// The P_Key.
    pub pkey: Option<PKey>,
    /// The SL.
    pub sl: Option<u8>,
    /// The QoS class.
    pub qos_class: Option<u16>,
    /// The highest rate code answered ([`final_rate`]'s limit).
    pub max_rate: u8,
}

/// The QoS policy's view of end `e` (its table `keys`).
fn facts<'a>(s: &'a Subnet, e: &End, keys: &'a [u16]) -> PortFacts<'a> {
    let n = s.node(e.node);
    PortFacts {
        guid: e.gid.guid().0,
        node_type: n.map_or(NodeType::ChannelAdapter, |n| n.info.node_type),
        description: n
            .and_then(|n| n.description.as_ref())
            .and_then(|d| d.node_string.as_str().ok())
            .unwrap_or(""),
        port: end_port(s, e).1,
        sm: e.node == NodeId(0) && s.brief(e.node).is_some_and(|b| b.holds_lid(e.lid)),
        pkeys: keys,
    }
}

/// `pr` (from [`resolve`]) as the QoS policy and the request make it, as
/// OpenSM does (`osm_sa_path_record.c`): the level the policy gives the
/// request (its `qos-match-rules`, then `qos-ulps`, then `DEFAULT`) caps
/// the MTU and the rate, sets the packet lifetime (not on a loopback
/// path, whose lifetime stays 0), restricts the P_Key to its partitions
/// (a P_Key asked must be one of them; else the first of them both ends
/// share) and gives the SL. A request that asks an SL other than the
/// level's, or a P_Key the level does not allow, gets no path (OpenSM's
/// ERR 1F1F, 1F1D, 1F1E). Without an SL from the request or the level,
/// the partition's `sl=`. Where LASH routed, the SL of its layer
/// ([`Subnet::lash_sl`]), as OpenSM's routing engine has the last word
/// on the SL. Last, the rate as OpenSM gives it last ([`final_rate`]).
///
/// It works on `pr` in place, so that a record is built once where it is
/// encoded from: false when the policy or the request leaves no path
/// (`pr` is then unspecified).
pub fn apply_policy(s: &Subnet, src: &End, dst: &End, pr: &mut PathRecord, a: &Asked) -> bool {
    let mut kept = leveled(s, src, dst, pr, a);
    // Where LASH routed, its layer is the SL whatever the level said;
    // a request that asks another SL gets no path (OpenSM's ERR 1F2A).
    if let (true, Some(sl)) = (kept, s.lash_sl(pr.slid, pr.dlid)) {
        kept = a.sl.is_none_or(|asked| asked == sl);
        pr.sl = sl;
    }
    if kept {
        pr.rate = final_rate(s, src, dst, pr.rate, a.max_rate);
    }
    kept
}

/// [`apply_policy`] before the last word on the rate.
fn leveled(s: &Subnet, src: &End, dst: &End, pr: &mut PathRecord, a: &Asked) -> bool {
    const DEFAULT: [u16; 1] = [0xFFFF];
    // Without a policy, none of this is looked up: the SL alone is left.
    let Some(policy) = s.qos_policy() else {
        pr.sl = match a.sl {
            Some(x) => x,
            None => s.partition_sl(pr.pkey),
        };
        return true;
    };
    let (sp, dp) = (key_end(s, src), key_end(s, dst));
    let (sk, dk) = (
        end_table(s, src).unwrap_or(&DEFAULT),
        end_table(s, dst).unwrap_or(&DEFAULT),
    );
    let partition = |name: &str| {
        (s.partition_config()?.partitions.iter())
            .find(|p| p.name == name)
            .map(|p| p.pkey)
    };
    let level = policy.level_for(
        &PathQuery {
            service_id: a.service_id,
            pkey: a.pkey.map(|k| k.0),
            qos_class: a.qos_class,
            source_guid: src.gid.guid().0,
            target_guid: dst.gid.guid().0,
        },
        &facts(s, src, sk),
        &facts(s, dst, dk),
        &partition,
    );
    if let Some(l) = &level {
        let (offset, count) = lid_offset(s, dst);
        if !l.takes_path_bits(offset, count) {
            return false;
        }
        if let Some(m) = l.mtu_limit {
            pr.mtu = pr.mtu.min(m);
        }
        if let Some(r) = l.rate_limit {
            if cmp_rate(pr.rate, r) == core::cmp::Ordering::Greater {
                pr.rate = r;
            }
        }
        if let Some(t) = l.packet_life {
            if src.node != dst.node {
                pr.packet_life_time = t;
            }
        }
        match a.pkey {
            Some(k) if !l.allows(k.0) => return false,
            Some(_) => {}
            None if l.pkeys.is_empty() => {}
            None => {
                // The level's first partition (in its order) both share.
                let rank = |k: u16| {
                    (l.pkeys.iter())
                        .position(|&(lo, hi)| (lo..=hi).contains(&u64::from(k & 0x7FFF)))
                        .map(|i| (i, k & 0x7FFF))
                };
                let Some((_, k)) = (sk.iter())
                    .filter(|&&k| PKey(k).is_valid())
                    .filter_map(|&k| Some((rank(k)?, s.shared_pkey_at(sp, dp, Some(k & 0x7FFF))?)))
                    .min_by_key(|&(r, _)| r)
                else {
                    return false;
                };
                pr.pkey = k;
            }
        }
    }
    pr.sl = match (a.sl, level.and_then(|l| l.sl)) {
        (Some(x), Some(y)) if x != y => return false,
        (Some(x), _) | (None, Some(x)) => x,
        (None, None) => s.partition_sl(pr.pkey),
    };
    true
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

/// Components compared as selectors or as request parameters, not as
/// values: the selectors and what they select, NumbPath, the GIDs (an end
/// is found by them), the ServiceID and the QoS class (the QoS policy
/// reads them; the answer carries neither, as in OpenSM, whose answers
/// have QoS class 0).
const SPECIAL: u64 = comp::QOS_CLASS
    | comp::SERVICE_ID_MSB
    | comp::SERVICE_ID_LSB
    | comp::MTU_SELECTOR
    | comp::MTU
    | comp::RATE_SELECTOR
    | comp::RATE
    | comp::PACKET_LIFE_TIME_SELECTOR
    | comp::PACKET_LIFE_TIME
    | comp::NUMB_PATH
    | comp::SGID
    | comp::DGID;

/// A PathRecord request: its record's bytes and its mask. Fields are read
/// from the bytes as they are needed (most requests name two ends and
/// nothing else).
struct Request<'a> {
    data: &'a [u8],
    mask: u64,
    /// [`Query::max_rate`].
    max_rate: u8,
}

/// Byte offsets of the PathRecord fields a request names its ends by.
const DGID_AT: usize = 8;
const SGID_AT: usize = 24;
const DLID_AT: usize = 40;
const SLID_AT: usize = 42;
const SL_AT: usize = 53;
const QOS_CLASS_AT: usize = 52;
const PKEY_AT: usize = 50;

impl Request<'_> {
    fn has(&self, bit: u64) -> bool {
        self.mask & bit != 0
    }

    fn gid(&self, at: usize) -> Gid {
        let mut b = [0u8; 16];
        if let Some(s) = self.data.get(at..at + 16) {
            b.copy_from_slice(s);
        }
        Gid(b)
    }

    /// The ServiceID the request names, if its mask selects both halves.
    fn service_id(&self) -> Option<u64> {
        let b = self.data.get(..8)?;
        let both = comp::SERVICE_ID_MSB | comp::SERVICE_ID_LSB;
        (self.mask & both == both).then(|| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
    }

    /// OpenSM's rule: a request selects both halves of the ServiceID or
    /// neither (else InsufficientComponents).
    fn both_service_id_halves(&self) -> Result<(), SaStatus> {
        let both = comp::SERVICE_ID_MSB | comp::SERVICE_ID_LSB;
        match self.mask & both {
            0 => Ok(()),
            m if m == both => Ok(()),
            _ => Err(SaStatus::ReqInsufficientComponents),
        }
    }

    /// The SL the request names, if its mask selects it.
    fn sl(&self) -> Option<u8> {
        let b = self.data.get(SL_AT)?;
        Some(b & 0x0F).filter(|_| self.has(comp::SL))
    }

    /// `pr` made in place as the QoS policy and the request make it
    /// ([`apply_policy`]); false when they leave no path.
    fn with_policy(&self, s: &Subnet, src: &End, dst: &End, pr: &mut PathRecord) -> bool {
        let asked = Asked {
            service_id: self.service_id(),
            pkey: self.pkey(),
            sl: self.sl(),
            qos_class: self.qos_class(),
            max_rate: self.max_rate,
        };
        apply_policy(s, src, dst, pr, &asked)
    }

    /// The QoS class the request names, if its mask selects it.
    fn qos_class(&self) -> Option<u16> {
        let b = self.data.get(QOS_CLASS_AT..QOS_CLASS_AT + 2)?;
        Some(u16::from_be_bytes([b[0], b[1]]) >> 4).filter(|_| self.has(comp::QOS_CLASS))
    }

    /// The P_Key the request names, if its mask selects one.
    fn pkey(&self) -> Option<PKey> {
        let b = self.data.get(PKEY_AT..PKEY_AT + 2)?;
        Some(PKey(u16::from_be_bytes([b[0], b[1]]))).filter(|_| self.has(comp::PKEY))
    }

    fn lid(&self, at: usize) -> Lid {
        Lid(self
            .data
            .get(at..at + 2)
            .map_or(0, |s| u16::from_be_bytes([s[0], s[1]])))
    }

    /// True when `pr` (encoded as `b`) answers the request: equal on every
    /// plain component selected, within every selector selected. The ends
    /// were found by the components they came from; what else the mask
    /// selects is compared.
    fn accepts(&self, pr: &PathRecord, b: &[u8], found_by: u64) -> bool {
        let plain = self.mask & !SPECIAL & !found_by;
        if plain != 0 && !matches::<PathRecord>(self.data, b, plain) {
            return false;
        }
        const SELECTED: u64 = comp::MTU | comp::RATE | comp::PACKET_LIFE_TIME;
        if self.mask & SELECTED == 0 {
            return true;
        }
        let Ok(w) = PathRecord::decode(self.data) else {
            return false;
        };
        [
            (comp::MTU, comp::MTU_SELECTOR, w.mtu, w.mtu_selector, pr.mtu),
            (
                comp::RATE,
                comp::RATE_SELECTOR,
                w.rate,
                w.rate_selector,
                pr.rate,
            ),
            (
                comp::PACKET_LIFE_TIME,
                comp::PACKET_LIFE_TIME_SELECTOR,
                w.packet_life_time,
                w.packet_life_time_selector,
                pr.packet_life_time,
            ),
        ]
        .iter()
        .all(|&(v, sel, want, want_sel, ours)| {
            !self.has(v)
                || selected(
                    if self.has(sel) {
                        want_sel
                    } else {
                        selector::EXACTLY
                    },
                    want,
                    ours,
                )
        })
    }

    /// The one source the request names (the SGID's or the SLID's end),
    /// if it names one, and the component it was found by.
    fn source(&self, s: &Subnet) -> Result<Option<(Option<End>, u64)>, SaStatus> {
        Ok(if self.has(comp::SGID) {
            let e = end_by_gid(s, self.gid(SGID_AT)).ok_or(SaStatus::ReqInvalidGid)?;
            Some((Some(e), 0))
        } else if self.has(comp::SLID) {
            Some((end_by_lid(s, self.lid(SLID_AT)), comp::SLID))
        } else {
            None
        })
    }

    /// The one destination the request names, if it names one, and the
    /// component it was found by.
    fn destination(&self, s: &Subnet) -> Result<Option<(Option<End>, u64)>, SaStatus> {
        Ok(if self.has(comp::DGID) {
            let e = end_by_gid(s, self.gid(DGID_AT)).ok_or(SaStatus::ReqInvalidGid)?;
            Some((Some(e), 0))
        } else if self.has(comp::DLID) {
            Some((end_by_lid(s, self.lid(DLID_AT)), comp::DLID))
        } else {
            None
        })
    }
}

/// A Get of one PathRecord, without allocating: the record, encoded into
/// `out`, or the status that refuses it (IBA 15.4: a Get that names no
/// destination lacks components; one whose path does not exist has no
/// records). The caller's buffer, not a returned array: the record is
/// written once where the answer is built from.
///
/// It finds its ends inline rather than through `Request::source` and
/// `Request::destination` as [`path_records`] does: going through their
/// nested options cost 35 ns more a query (166 against 130 ns over every
/// pair of fat-tree-648, `ibkit bench sa --all-pairs`).
pub fn path_record(q: &Query<'_>, out: &mut [u8; PathRecord::SIZE]) -> Result<(), SaStatus> {
    if q.data.len() < PathRecord::SIZE {
        return Err(SaStatus::ReqInvalid);
    }
    let r = Request {
        data: q.data,
        mask: q.mask,
        max_rate: q.max_rate,
    };
    r.both_service_id_halves()?;
    let s = q.subnet;
    let (dst, by_d) = if r.has(comp::DGID) {
        let e = end_by_gid(s, r.gid(DGID_AT)).ok_or(SaStatus::ReqInvalidGid)?;
        (e, 0)
    } else if r.has(comp::DLID) {
        let e = end_by_lid(s, r.lid(DLID_AT)).ok_or(SaStatus::NoRecords)?;
        (e, comp::DLID)
    } else {
        return Err(SaStatus::ReqInsufficientComponents);
    };
    let (src, by_s) = if r.has(comp::SGID) {
        let e = end_by_gid(s, r.gid(SGID_AT)).ok_or(SaStatus::ReqInvalidGid)?;
        (e, 0)
    } else if r.has(comp::SLID) {
        let e = end_by_lid(s, r.lid(SLID_AT)).ok_or(SaStatus::NoRecords)?;
        (e, comp::SLID)
    } else {
        (end_by_lid(s, q.from.lid).ok_or(SaStatus::NoRecords)?, 0)
    };
    // The first of the pair's LID pairs that has a path the request and
    // the QoS policy accept (under LMC 0, the one), as OpenSM's Get.
    let mut pr = PathRecord::default();
    for at in lid_pairs(s, &src, by_s != 0, &dst, by_d != 0) {
        match resolve_at(s, &src, &dst, at, r.pkey(), &mut pr) {
            Some((src, dst)) if r.with_policy(s, &src, &dst, &mut pr) => {}
            _ => continue,
        }
        pr.encode(out).map_err(|_| SaStatus::ReqInvalid)?;
        if r.accepts(&pr, out, by_s | by_d) {
            return Ok(());
        }
    }
    Err(SaStatus::NoRecords)
}

/// The LIDs of the port pair `src`, `dst` in the order OpenSM's SA lists
/// their paths (IBA 15.2.5.16 leaves the order to the SA), with each
/// path's Preference: first the pairs at the same offset into both
/// ports' `2^LMC` LIDs (base with base, base + 1 with base + 1, …:
/// Preference 0, the paths the routing engine spread apart), then every
/// other pair (Preference 2). An end the request fixed by its LID
/// (`*_fixed`), and a VM's VF, has only its own LID. Under LMC 0: the
/// one pair of the ends' LIDs.
pub fn lid_pairs(
    s: &Subnet,
    src: &End,
    src_fixed: bool,
    dst: &End,
    dst_fixed: bool,
) -> impl Iterator<Item = (Lid, Lid, u8)> {
    let range = |e: &End, fixed: bool| match lid_offset(s, e) {
        (0, count) if !fixed => (e.lid.0, count),
        _ => (e.lid.0, 1),
    };
    let ((sb, sn), (db, dn)) = (range(src, src_fixed), range(dst, dst_fixed));
    let same = (0..sn.min(dn)).map(move |k| (Lid(sb + k), Lid(db + k), 0));
    let rest = (0..sn).flat_map(move |i| {
        (0..dn)
            .filter(move |&j| j != i)
            .map(move |j| (Lid(sb + i), Lid(db + j), 2))
    });
    same.chain(rest)
}

/// Where `e`'s LID is in its port's range: (offset, `2^LMC`); a VM's VF
/// (0, 1).
fn lid_offset(s: &Subnet, e: &End) -> (u16, u16) {
    match s.brief(e.node) {
        Some(b) if b.holds_lid(e.lid) => (e.lid.0 - b.lid.0, 1 << b.lmc),
        _ => (0, 1),
    }
}

/// The path from `src` to `dst` at one of their LID pairs (as
/// [`lid_pairs`] gives them): [`resolve`] between the ends at those LIDs,
/// with the pair's Preference.
fn resolve_at(
    s: &Subnet,
    src: &End,
    dst: &End,
    (slid, dlid, preference): (Lid, Lid, u8),
    want: Option<PKey>,
    pr: &mut PathRecord,
) -> Option<(End, End)> {
    let (src, dst) = (End { lid: slid, ..*src }, End { lid: dlid, ..*dst });
    if !resolve_into(s, &src, &dst, want, pr) {
        return None;
    }
    pr.preference = preference;
    Some((src, dst))
}

/// Every end port of the subnet: each live node's port with a LID (a
/// switch's port 0, a CA's port), and each VM on a VF (its vGUID at the
/// VF's LID). What a table of paths may lead to, what GUIDInfo and P_Key
/// records are kept for, and what is in service for traps 64/65.
pub fn every_end(s: &Subnet) -> Vec<End> {
    let mut v = Vec::new();
    for (i, n) in s.nodes().iter().enumerate() {
        if !n.alive || n.lid == 0 {
            continue;
        }
        v.extend(end_by_lid(s, Lid(n.lid)));
        for slot in n.vfs.iter().filter(|v| v.lid != 0 && v.guid != 0) {
            v.extend(end_by_lid(s, Lid(slot.lid)).filter(|e| e.node == NodeId(i)));
        }
    }
    v
}

/// The PathRecords of a GetTable: from the source the request names (by
/// SGID or SLID) to the destination it names, each side every end of the
/// subnet when it names none — all pairs for an empty mask, as OpenSM
/// answers (IBA 15.4 leaves it to the SA; OpenSM's "world" is what
/// clients such as osmtest and saquery expect).
pub fn path_records(q: &Query<'_>) -> Result<Records, SaStatus> {
    if q.data.len() < PathRecord::SIZE {
        return Err(SaStatus::ReqInvalid);
    }
    let r = Request {
        data: q.data,
        mask: q.mask,
        max_rate: q.max_rate,
    };
    r.both_service_id_halves()?;
    let s = q.subnet;
    let (srcs, by_s): (Vec<End>, u64) = match r.source(s)? {
        Some((e, by)) => (e.into_iter().collect(), by),
        None => (every_end(s), 0),
    };
    let (dests, by_d) = match r.destination(s)? {
        Some((d, by)) => (d.into_iter().collect(), by),
        None => (every_end(s), 0),
    };
    let mut out = Records::new(PathRecord::SIZE);
    let mut examined = 0usize;
    let mut pr = PathRecord::default();
    for src in &srcs {
        for dst in &dests {
            for at in lid_pairs(s, src, by_s != 0, dst, by_d != 0) {
                if examined >= q.max_examined {
                    return Err(SaStatus::NoResources);
                }
                examined += 1;
                q.examined.set(examined);
                match resolve_at(s, src, dst, at, r.pkey(), &mut pr) {
                    Some((src, dst)) if r.with_policy(s, &src, &dst, &mut pr) => {}
                    _ => continue,
                }
                let kept =
                    out.push_with(|b| pr.encode(b).is_ok() && r.accepts(&pr, b, by_s | by_d));
                if kept && out.len() > q.max {
                    return Err(SaStatus::NoResources);
                }
            }
        }
    }
    Ok(out)
}

/// The PathRecords of a GetMulti(MultiPathRecord) (IBA 15.2.5.20): the
/// paths of each pair of the SGIDCount source and DGIDCount destination
/// GIDs, one for each pair of their LIDs ([`lid_pairs`]; LMC 0 gives
/// one), at most NumbPath of
/// them when the mask selects it, each within the request's SL, P_Key
/// and MTU, rate and lifetime selectors.
///
/// Both counts must be in the mask (else "insufficient components"), at
/// least one each and together no more than the request holds — 11 GIDs
/// in one MAD, more in a request of several RMPP segments — (else
/// "invalid request"); a GID that is not an end port of the subnet — a
/// multicast GID among them — is "invalid GID".
pub fn multipath_records(q: &Query<'_>) -> Result<Records, SaStatus> {
    /// Where the GIDs start in the record.
    const GIDS_AT: usize = 24;
    use mad_core::sa::path::MULTIPATH_GIDS;
    use mad_core::sa::{MultiPathRecord, SaRecord};
    let bit = |n: &str| MultiPathRecord::component(n).unwrap_or(0);
    let has = |n: &str| q.mask & bit(n) != 0;
    if !has("sgid_count") || !has("dgid_count") {
        return Err(SaStatus::ReqInsufficientComponents);
    }
    // The fixed fields from the first MAD's worth; the GIDs from all the
    // data, which a request in several segments carries past it.
    let mut head = [0u8; MultiPathRecord::SIZE];
    let n = q.data.len().min(head.len());
    head[..n].copy_from_slice(&q.data[..n]);
    let mp = MultiPathRecord::decode(&head).map_err(|_| SaStatus::ReqInvalid)?;
    let (ns, nd) = (usize::from(mp.sgid_count), usize::from(mp.dgid_count));
    let room = q
        .data
        .len()
        .max(MultiPathRecord::SIZE)
        .saturating_sub(GIDS_AT)
        / 16;
    debug_assert!(room >= MULTIPATH_GIDS);
    if ns == 0 || nd == 0 || ns + nd > room {
        return Err(SaStatus::ReqInvalid);
    }
    let gid = |i: usize| {
        let mut g = [0u8; 16];
        if let Some(b) = q.data.get(GIDS_AT + 16 * i..GIDS_AT + 16 * (i + 1)) {
            g.copy_from_slice(b);
        }
        Gid(g)
    };
    let s = q.subnet;
    let ends = |r: core::ops::Range<usize>| -> Result<Vec<End>, SaStatus> {
        r.map(|i| end_by_gid(s, gid(i)).ok_or(SaStatus::ReqInvalidGid))
            .collect()
    };
    let srcs = ends(0..ns)?;
    let dsts = ends(ns..ns + nd)?;
    let most = if has("numb_path") && mp.numb_path > 0 {
        usize::from(mp.numb_path)
    } else {
        q.max
    };
    let fits = |pr: &PathRecord| {
        (!has("sl") || pr.sl == mp.sl)
            && (!has("pkey") || pr.pkey.0 & 0x7FFF == mp.pkey.0 & 0x7FFF)
            && (!has("reversible") || !mp.reversible || pr.reversible)
            && [
                ("mtu", "mtu_selector", mp.mtu, mp.mtu_selector, pr.mtu),
                ("rate", "rate_selector", mp.rate, mp.rate_selector, pr.rate),
                (
                    "packet_life_time",
                    "packet_life_time_selector",
                    mp.packet_life_time,
                    mp.packet_life_time_selector,
                    pr.packet_life_time,
                ),
            ]
            .iter()
            .all(|&(v, sel, want, want_sel, ours)| {
                !has(v)
                    || selected(
                        if has(sel) {
                            want_sel
                        } else {
                            selector::EXACTLY
                        },
                        want,
                        ours,
                    )
            })
    };
    let sid = (has("service_id_msb") && has("service_id_lsb"))
        .then(|| u64::from(mp.service_id_msb) << 56 | mp.service_id_lsb);
    let asked_sl = Some(mp.sl).filter(|_| has("sl"));
    let mut out = Records::new(PathRecord::SIZE);
    let want = Some(mp.pkey).filter(|_| has("pkey"));
    let asked = Asked {
        service_id: sid,
        pkey: want,
        sl: asked_sl,
        qos_class: Some(mp.qos_class).filter(|_| has("qos_class")),
        max_rate: q.max_rate,
    };
    let mut examined = 0usize;
    let mut pr = PathRecord::default();
    for src in &srcs {
        for dst in &dsts {
            for at in lid_pairs(s, src, false, dst, false) {
                if out.len() >= most {
                    break;
                }
                if examined >= q.max_examined {
                    return Err(SaStatus::NoResources);
                }
                examined += 1;
                q.examined.set(examined);
                match resolve_at(s, src, dst, at, want, &mut pr) {
                    Some((src, dst)) if apply_policy(s, &src, &dst, &mut pr, &asked) => {}
                    _ => continue,
                }
                if !fits(&pr) {
                    continue;
                }
                out.push_with(|b| pr.encode(b).is_ok());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mad_core::attr::{CapabilityMask as C, CapabilityMask2 as C2, PortInfo};

    #[test]
    fn every_rate_code_reads_back_and_the_codes_between_fall_to_the_one_below() {
        for c in 2..=MAX_RATE {
            let h = half_gbps(c).unwrap();
            assert_eq!(rate_code(h), c, "{c}");
            // Half a Gb/s short of a code is the code below it.
            let below = (2..=MAX_RATE)
                .filter(|&d| half_gbps(d).unwrap() < h)
                .max_by_key(|&d| half_gbps(d).unwrap())
                .unwrap_or(2);
            assert_eq!(rate_code(h - 1), below, "{c}");
        }
        assert_eq!(
            (half_gbps(0), half_gbps(1), half_gbps(25)),
            (None, None, None)
        );
        assert_eq!(rate_code(0), 2);
        // 4x EDR, 12x HDR, 12x NDR.
        assert_eq!(
            (rate_code(200), rate_code(1200), rate_code(2400)),
            (16, 22, 24)
        );
    }

    #[test]
    fn the_original_codes_stop_at_300_gbps() {
        for c in 2..=MAX_RATE {
            let o = original_rate(c);
            assert!(o <= 18 && half_gbps(o) <= half_gbps(c), "{c} → {o}");
            assert_eq!(o == c, c <= 18, "{c}");
        }
        assert_eq!(
            [19, 20, 21, 22, 23, 24].map(original_rate),
            [15, 7, 18, 18, 18, 18]
        );
    }

    #[test]
    fn a_rate_limit_steps_down_to_a_code_an_older_stack_knows() {
        // 18 is use_original_extended_sa_rates_only.
        for c in 2..=MAX_RATE {
            assert_eq!(limit_rate(c, 18), original_rate(c), "{c}");
            assert_eq!(limit_rate(c, MAX_RATE), c, "{c}");
            for limit in 2..=MAX_RATE {
                let r = limit_rate(c, limit);
                assert!(
                    r <= c.max(limit) && half_gbps(r) <= half_gbps(c),
                    "{c}, {limit}"
                );
                assert!(r <= limit || r == c, "{c}, {limit} → {r}");
            }
        }
        // (code, limit, answered): 25 Gb/s under 40's code is 20 (code
        // 15 is above 7); 56 and 80 under 40 are 40; 20 is below it;
        // 800 under 100's code walks past 168, 120 and 112 to 100.
        for (c, limit, want) in [
            (15, 7, 6),
            (12, 7, 7),
            (9, 7, 7),
            (6, 7, 6),
            (23, 16, 16),
            (24, 22, 22),
        ] {
            assert_eq!(limit_rate(c, limit), want, "{c} under {limit}");
        }
    }

    #[test]
    fn two_x_and_hdr_rates_are_fixed_for_a_port_that_does_not_say_them() {
        let port = |ext: bool, cap2: Option<C2>| {
            let mut pi = PortInfo::default();
            if ext {
                pi.capability_mask |= C::IS_EXTENDED_SPEEDS_SUPPORTED;
            }
            if let Some(c) = cap2 {
                pi.capability_mask |= C::IS_CAPABILITY_MASK2_SUPPORTED;
                pi.capability_mask2 = c;
            }
            pi
        };
        let both = C2::IS_LINK_WIDTH_2X_SUPPORTED | C2::IS_LINK_SPEED_HDR_SUPPORTED;
        let codes = [19, 20, 21, 22, 16, 23];
        let fixed = |pi: &PortInfo| codes.map(|c| rate_for_port(c, pi));
        assert_eq!(fixed(&port(true, Some(both))), codes);
        assert_eq!(fixed(&port(true, None)), [15, 7, 18, 18, 16, 23]);
        assert_eq!(fixed(&port(false, None)), [6, 7, 18, 18, 16, 23]);
        // The bits count only where CapabilityMask says CapabilityMask2.
        let mut hidden = port(true, Some(both));
        hidden
            .capability_mask
            .remove(C::IS_CAPABILITY_MASK2_SUPPORTED);
        assert_eq!(fixed(&hidden), [15, 7, 18, 18, 16, 23]);
        // HDR alone keeps 50 Gb/s (1x HDR) but not 28 (2x FDR).
        let hdr = port(true, Some(C2::IS_LINK_SPEED_HDR_SUPPORTED));
        assert_eq!(fixed(&hdr), [15, 20, 21, 22, 16, 23]);
    }
}
