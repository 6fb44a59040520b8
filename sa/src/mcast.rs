//! MCMemberRecord (IBA 15.2.5.17): multicast groups, created and joined
//! with Set, left with Delete, found with Get and GetTable.
//!
//! The rules are the spec's (o15-0.1.x, o15-0.2.x) as OpenSM applies
//! them, so that a host sees the same answers from either SA:
//!
//! * A Set names the group (MGID), the port (PortGID) and the JoinState.
//!   An MGID no group has creates one when the JoinState has a full-member
//!   bit and the mask also selects Q_Key, P_Key, TClass, SL and FlowLabel
//!   ("insufficient components" otherwise); MGID zero asks the SA to make
//!   one (FF1s:A01B:prefix:counter). MTU and rate take the selectors
//!   given, or the joining port's own. A join to an existing group must
//!   agree with it on every component the mask selects, and the port must
//!   carry the group's MTU and rate.
//! * A join for another port (a proxy join) is taken; the membership is
//!   marked so, and a port's own membership may then be changed only by
//!   itself.
//! * Delete removes the JoinState bits it names; a member with none left
//!   goes, and a group with no full member left goes with it, unless it is
//!   well known (the default partition's IPoIB broadcast group, which the
//!   SA holds from the start as OpenSM does: Linux IPoIB joins it and never
//!   creates it).
//! * A query returns one record a group, or with a PortGID one a member; a
//!   trusted requester (with the SM_Key) that names no PortGID gets every
//!   member. An untrusted one never sees a PortGID, JoinState or ProxyJoin
//!   (IBA 15.2.5.17, "shall be zero").
//!
//! A port that leaves the subnet leaves its groups ([`Groups::prune`]).
//! Groups are bounded by [`MAX_GROUPS`] and memberships by
//! [`MAX_MEMBERS`]; past them a join gets "no resources".
//!
//! The SA does not program the switches itself: the groups whose members
//! changed ([`Groups::take_changes`], [`Groups::members_of`]) go to the
//! SM, which builds their trees (`smi::sm::Sm::set_multicast_group`).

use crate::path::{cmp_rate, end_by_lid, half_gbps, End};
use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use mad_core::sa::mcmember::join_state::{FULL, NON, SEND_ONLY_FULL};
use mad_core::sa::{McMemberRecord, SaStatus};
use mad_core::types::{Gid, Guid, PKey};
use mad_core::Lid;
use smi::sm::partitions::{GroupFlags, PartitionConfig};
use smi::sm::qos_policy::QosPolicy;
use smi::sm::{GroupMember, Subnet};

/// Groups the SA holds at most (the well-known one included).
pub const MAX_GROUPS: usize = 4096;
/// Memberships, over every group, the SA holds at most.
pub const MAX_MEMBERS: usize = 65536;
/// Memberships one requester (its port, by base LID) made, for itself or
/// by proxy, at most: a host that joins in a loop cannot take every group
/// from the others.
pub const MAX_PER_REQUESTER: usize = 1024;

/// The default partition's IPoIB IPv4 broadcast group, link-local.
pub const IPOIB_BROADCAST: Gid = Gid([
    0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
]);
/// The Q_Key of IPoIB broadcast groups.
pub const IPOIB_QKEY: u32 = 0x0000_0b1b;

/// ComponentMask bits of MCMemberRecord.
mod bit {
    pub const MGID: u64 = 1 << 0;
    pub const PORT_GID: u64 = 1 << 1;
    pub const QKEY: u64 = 1 << 2;
    pub const MLID: u64 = 1 << 3;
    pub const MTU_SEL: u64 = 1 << 4;
    pub const MTU: u64 = 1 << 5;
    pub const TCLASS: u64 = 1 << 6;
    pub const PKEY: u64 = 1 << 7;
    pub const RATE_SEL: u64 = 1 << 8;
    pub const RATE: u64 = 1 << 9;
    pub const SL: u64 = 1 << 12;
    pub const FLOW: u64 = 1 << 13;
    pub const HOP: u64 = 1 << 14;
    pub const SCOPE: u64 = 1 << 15;
    pub const JOIN_STATE: u64 = 1 << 16;
    pub const PROXY: u64 = 1 << 17;
    /// What a join or a leave must select.
    pub const JOIN: u64 = MGID | PORT_GID | JOIN_STATE;
    /// What the join that creates a group must select.
    pub const CREATE: u64 = JOIN | QKEY | TCLASS | PKEY | FLOW | SL;
}

/// Multicast LIDs, 0xC000 to 0xFFFE.
const MLIDS: usize = (Lid::MULTICAST_MAX.0 - Lid::MULTICAST_MIN.0) as usize + 1;

/// The selector "exactly".
const EXACTLY: u8 = 2;
/// Link-local scope.
const LINK_LOCAL: u8 = 2;
/// PacketLifeTime of the groups the SA makes itself (OpenSM's subnet
/// timeout).
const DEFAULT_LIFE: u8 = 18;

/// One port's membership of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    /// The port's GID as it joined.
    pub gid: Gid,
    /// Its JoinState bits.
    pub join_state: u8,
    /// Joined by another port on its behalf.
    pub proxy: bool,
    /// The LID the join came from.
    pub by: Lid,
}

/// A multicast group.
#[derive(Clone, Debug)]
pub struct Group {
    /// The group's record: MGID, MLID, Q_Key, MTU, rate, … (selectors
    /// "exactly"), with the creator's scope and JoinState.
    pub rec: McMemberRecord,
    /// Its members.
    pub members: Vec<Member>,
    /// Held whether or not anyone is a member.
    pub well_known: bool,
}

impl Group {
    /// Members with a full-member bit.
    fn full_members(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.join_state & (FULL | SEND_ONLY_FULL) != 0)
            .count()
    }

    fn member(&self, guid: Guid) -> Option<usize> {
        self.members.iter().position(|m| m.gid.guid() == guid)
    }
}

/// What [`Groups::restore`] did with a group's member lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MembersRestored {
    /// Members restored.
    pub restored: usize,
    /// Left out: the port is not in the subnet.
    pub gone: usize,
    /// Left out: no JoinState, or the port already a member.
    pub void: usize,
    /// Left out: the SA held its most memberships ([`MAX_MEMBERS`]).
    pub over: usize,
}

/// The multicast groups of the subnet.
#[derive(Clone, Debug)]
pub struct Groups {
    groups: Vec<Group>,
    /// MLIDs in use, a bit each from 0xC000.
    mlids: Vec<u64>,
    /// The next MGID the SA makes ends in this.
    counter: u32,
    /// MLIDs whose members changed since [`Groups::take_changes`].
    changed: BTreeSet<u16>,
    /// Groups created (trap 66) and deleted (trap 67) since
    /// [`Groups::take_created_deleted`], with their MGIDs.
    created_deleted: Vec<(u16, Gid)>,
}

impl Default for Groups {
    fn default() -> Groups {
        Groups::new()
    }
}

/// The code of the next rate above (`up`) or below a valid code.
fn next_rate(code: u8, up: bool) -> Option<u8> {
    let r = half_gbps(code)?;
    let codes = (2u8..=crate::path::MAX_RATE).filter_map(|c| Some((half_gbps(c)?, c)));
    if up {
        codes.filter(|&(h, _)| h > r).min().map(|(_, c)| c)
    } else {
        codes.filter(|&(h, _)| h < r).max().map(|(_, c)| c)
    }
}

/// True when `sel`/`want` (a selector and a value the mask selects)
/// admits `have`, ordered by `cmp`.
fn admits(sel: u8, want: u8, have: u8, cmp: fn(u8, u8) -> core::cmp::Ordering) -> bool {
    use core::cmp::Ordering::*;
    match sel {
        0 => cmp(have, want) == Greater,
        1 => cmp(have, want) == Less,
        2 => cmp(have, want) == Equal,
        _ => true,
    }
}

/// The MTU code and rate code of the port at `e` (the link of a CA's
/// port, or a switch's port 0).
fn port_caps(s: &Subnet, e: &End) -> (u8, u8) {
    let own = s.brief(e.node).map_or(0, |b| b.own_port);
    match s.port_brief(e.node, own) {
        Some(p) => {
            let (mtu, half) = crate::path::link(p);
            (mtu, crate::path::rate_code(half))
        }
        None => (5, 3),
    }
}

/// The end a PortGID's GUID names: a port (or a VM's vGUID, or a port's
/// alias GUID) of the subnet.
fn member_end(s: &Subnet, gid: Gid) -> Result<End, SaStatus> {
    let (node, vf) = s.by_gid_guid(gid.guid()).ok_or(SaStatus::ReqInvalid)?;
    let lid = if vf == 0 {
        s.brief(node).map(|b| b.lid)
    } else {
        s.node(node)
            .and_then(|n| n.vfs.get(usize::from(vf) - 1))
            .map(|v| Lid(v.lid))
    }
    .filter(|l| l.0 != 0)
    .ok_or(SaStatus::ReqInvalid)?;
    let mut e = end_by_lid(s, lid).ok_or(SaStatus::ReqInvalid)?;
    // The membership keeps the GUID it joined with, under the port's
    // prefix: its port's, a VM's vGUID, or an alias GUID (a VM of a
    // shared port, a member of its own).
    e.gid = Gid::new(e.gid.prefix(), gid.guid());
    Ok(e)
}

/// A PortGID's prefix is the subnet's (the requester's) or the default
/// one, which stands for it ("invalid GID" otherwise).
fn prefix_ok(gid: &Gid, requester: &End) -> Result<(), SaStatus> {
    let p = gid.prefix();
    if p != Gid::DEFAULT_PREFIX && p != requester.gid.prefix() {
        return Err(SaStatus::ReqInvalidGid);
    }
    Ok(())
}

/// Q_Key, P_Key, TClass, SL, FlowLabel and HopLimit of `q` agree with the
/// group's on what `mask` selects (P_Keys: the same partition, one of
/// them full).
fn other_fields_agree(q: &McMemberRecord, g: &McMemberRecord, mask: u64) -> bool {
    let on = |b: u64| mask & b != 0;
    !(on(bit::QKEY) && q.qkey != g.qkey
        || on(bit::PKEY)
            && (!(q.pkey.is_full_member() || g.pkey.is_full_member())
                || q.pkey.base() != g.pkey.base())
        || on(bit::TCLASS) && q.tclass != g.tclass
        || on(bit::SL) && q.sl != g.sl
        || on(bit::FLOW) && q.flow_label != g.flow_label
        || on(bit::HOP) && q.hop_limit != g.hop_limit)
}

/// The MTU and rate selectors of `q` (where the mask selects both the
/// selector and the value) admit the group's.
fn mtu_rate_agree(q: &McMemberRecord, g: &McMemberRecord, mask: u64) -> bool {
    (mask & bit::MTU_SEL == 0 || admits(q.mtu_selector, q.mtu, g.mtu, |a, b| a.cmp(&b)))
        && (mask & bit::RATE_SEL == 0 || admits(q.rate_selector, q.rate, g.rate, cmp_rate))
}

/// The MTU and rate the request gives, when it gives them, are codes
/// that exist.
fn codes_valid(q: &McMemberRecord, mask: u64) -> bool {
    let both = |a: u64, b: u64| mask & a != 0 && mask & b != 0;
    (!both(bit::RATE_SEL, bit::RATE) || half_gbps(q.rate).is_some())
        && (!both(bit::MTU_SEL, bit::MTU) || (1..=5).contains(&q.mtu))
}

/// Which checks a join goes through, and how a new group gets its MLID
/// ([`crate::SaConfig`]'s `mcgroup_join_validation`,
/// `ipoib_mcgroup_creation_validation` and `consolidate_ipv6_snm_req`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checks {
    /// A join's fields against the group's.
    pub join: bool,
    /// A requested MGID of a new group.
    pub mgid: bool,
    /// A new IPv6 solicited-node group shares the MLID of one that
    /// exists in its partition and scope (OpenSM's
    /// `consolidate_ipv6_snm_req`).
    pub consolidate_snm: bool,
    /// The highest rate code a new group gets
    /// ([`crate::SaConfig::rate_limit`]).
    pub max_rate: u8,
}

/// An IPv6 solicited-node multicast MGID, as IPoIB maps one (RFC 4391):
/// `FF1s:601B:PPPP:0000:0000:0001:FFxx:xxxx`, scope `s`, P_Key `PPPP`
/// and the low 24 bits of the IPv6 address (OpenSM's masks: the flags
/// nibble and the scope, the P_Key, and the low 24 bits are free).
pub fn is_ipv6_snm(g: &Gid) -> bool {
    let m = &g.0;
    m[0] == 0xFF
        && m[1] & 0xF0 == 0x10
        && m[2..4] == [0x60, 0x1B]
        && m[6..8] == [0, 0]
        && m[8..11] == [0, 0, 0]
        && m[11] & 0xF1 == 0x01
        && m[12] == 0xFF
}

/// Two solicited-node MGIDs OpenSM's consolidation puts on one MLID:
/// the same but for the address's low 24 bits (the first 13 bytes).
fn same_snm_set(a: &Gid, b: &Gid) -> bool {
    a.0[..13] == b.0[..13]
}

/// The 16-bit signature of an MGID (bytes 2..4).
fn signature(g: &Gid) -> u16 {
    u16::from_be_bytes([g.0[2], g.0[3]])
}

/// The record of a join or a leave, checked as both are (o15-0.1.x):
/// MGID, PortGID and JoinState selected, MTU and rate codes that exist, a
/// requester the SM knows, the PortGID under the subnet's prefix; with
/// the requester's end.
fn membership_request(
    s: &Subnet,
    from: Lid,
    data: &[u8],
    mask: u64,
) -> Result<(McMemberRecord, End), SaStatus> {
    let q = McMemberRecord::decode(data).map_err(|_| SaStatus::ReqInvalid)?;
    if mask & bit::JOIN != bit::JOIN {
        return Err(SaStatus::ReqInsufficientComponents);
    }
    if !codes_valid(&q, mask) {
        return Err(SaStatus::ReqInvalid);
    }
    let requester = end_by_lid(s, from).ok_or(SaStatus::ReqInvalid)?;
    prefix_ok(&q.port_gid, &requester)?;
    Ok((q, requester))
}

impl Groups {
    /// The groups of a new SA: the default partition's IPoIB broadcast
    /// group, well known, with no member (MTU 2048, 10 Gb/s, Q_Key
    /// 0x0B1B, link-local, MLID 0xC000), as OpenSM's default partition
    /// makes it.
    pub fn new() -> Groups {
        let rec = McMemberRecord {
            mgid: IPOIB_BROADCAST,
            qkey: IPOIB_QKEY,
            mlid: Lid::MULTICAST_MIN,
            mtu_selector: EXACTLY,
            mtu: 4,
            pkey: PKey::DEFAULT_FULL,
            rate_selector: EXACTLY,
            rate: 3,
            packet_life_time_selector: EXACTLY,
            packet_life_time: DEFAULT_LIFE,
            scope: LINK_LOCAL,
            join_state: FULL,
            ..McMemberRecord::default()
        };
        let mut g = Groups {
            groups: Vec::new(),
            mlids: alloc::vec![0; MLIDS.div_ceil(64)],
            counter: 0,
            changed: BTreeSet::new(),
            created_deleted: Vec::new(),
        };
        g.add(Group {
            rec,
            members: Vec::new(),
            well_known: true,
        });
        g
    }

    /// Brings the well-known groups in line with a partition
    /// configuration, as OpenSM does: each partition flagged `ipoib` has
    /// its IPoIB broadcast group (ff1S:401b:PKEY::ffff:ffff, full-member
    /// P_Key, for each scope given, link-local by default) and each
    /// `mgid=` line its group, with the partition's (or the line's) MTU,
    /// rate, SL, Q_Key (0x0B1B for IPoIB's), traffic class and flow label.
    /// A group already there keeps its MLID and members and takes the new
    /// parameters; a well-known group no longer configured is held only
    /// while it has members. The default broadcast group stays. Without a
    /// configuration only the SLs are brought in line.
    ///
    /// The SL is the `sl=` flag's where the partition (or the line) has
    /// one, else what the QoS `policy` gives the partition
    /// ([`QosPolicy::group_sl`]), else 0. OpenSM 3.3 gives such groups the
    /// flag's SL or 0 whatever its policy says; hosts copy a group's SL
    /// from their partition's broadcast group, so with ibkit a policy's
    /// `ipoib` rule (or `DEFAULT` level) puts IPoIB's multicast on the SL
    /// of its unicast paths.
    pub fn apply_partitions(&mut self, cfg: Option<&PartitionConfig>, policy: Option<&QosPolicy>) {
        let sl_of = |pkey: u16, f: &GroupFlags| match (f.sl_given, policy) {
            (false, Some(p)) => p.group_sl(pkey).unwrap_or(0),
            _ => f.sl,
        };
        // The default broadcast group, kept whatever the configuration
        // says, takes its partition's SL (where the configuration makes
        // it, below, the same SL with the rest of its parameters).
        if let Some(i) = self.by_mgid(&IPOIB_BROADCAST) {
            let g = &mut self.groups[i];
            let base = g.rec.pkey.0 & 0x7FFF;
            let own = cfg.and_then(|c| (c.partitions.iter()).find(|p| p.pkey & 0x7FFF == base));
            g.rec.sl = sl_of(
                g.rec.pkey.0,
                own.map_or(&GroupFlags::default(), |p| &p.flags),
            );
        }
        let Some(cfg) = cfg else {
            return;
        };
        let mut want: Vec<McMemberRecord> = Vec::new();
        let rec = |mgid: Gid, pkey: u16, f: &GroupFlags| {
            let ipoib = mgid.0[2..4] == [0x40, 0x1b] || mgid.0[2..4] == [0x60, 0x1b];
            McMemberRecord {
                mgid,
                qkey: if f.qkey == 0 && ipoib {
                    IPOIB_QKEY
                } else {
                    f.qkey
                },
                mtu_selector: EXACTLY,
                mtu: f.mtu,
                tclass: f.tclass,
                pkey: PKey(pkey | 0x8000),
                rate_selector: EXACTLY,
                rate: f.rate,
                packet_life_time_selector: EXACTLY,
                packet_life_time: DEFAULT_LIFE,
                sl: sl_of(pkey, f),
                flow_label: f.flow_label,
                scope: mgid.0[1] & 0x0F,
                join_state: FULL,
                ..McMemberRecord::default()
            }
        };
        for p in &cfg.partitions {
            if p.ipoib {
                let scopes = if p.flags.scopes.is_empty() {
                    alloc::vec![LINK_LOCAL]
                } else {
                    p.flags.scopes.clone()
                };
                for sc in scopes {
                    let mut g = IPOIB_BROADCAST;
                    g.0[1] = 0x10 | (sc & 0x0F);
                    g.0[4..6].copy_from_slice(&(p.pkey | 0x8000).to_be_bytes());
                    want.push(rec(g, p.pkey, &p.flags));
                }
            }
            for m in &p.groups {
                want.push(rec(m.mgid, p.pkey, &m.flags));
            }
        }
        for r in want.iter() {
            match self.by_mgid(&r.mgid) {
                Some(i) => {
                    let g = &mut self.groups[i];
                    g.rec = McMemberRecord {
                        mlid: g.rec.mlid,
                        ..*r
                    };
                    g.well_known = true;
                }
                None => {
                    let Ok(mlid) = self.new_mlid(Lid(0)) else {
                        continue; // no MLID left: not made
                    };
                    self.add(Group {
                        rec: McMemberRecord { mlid, ..*r },
                        members: Vec::new(),
                        well_known: true,
                    });
                    self.created_deleted.push((66, r.mgid));
                }
            }
        }
        let mut i = 0;
        while i < self.groups.len() {
            let g = &mut self.groups[i];
            if g.well_known
                && g.rec.mgid != IPOIB_BROADCAST
                && !want.iter().any(|r| r.mgid == g.rec.mgid)
            {
                g.well_known = false;
                if g.members.is_empty() {
                    self.remove(i);
                    continue;
                }
            }
            i += 1;
        }
    }

    /// The groups.
    pub fn iter(&self) -> impl Iterator<Item = &Group> {
        self.groups.iter()
    }

    /// Brings back a group an earlier SM held (its record `rec`, MLID
    /// `rec.mlid`, and members as (PortGID, JoinState, proxy)), as
    /// OpenSM restores `opensm-sa.dump`: a group whose MGID is already
    /// here with the same MLID takes the members; one whose MGID or MLID
    /// another group holds is skipped; a member whose port is not in the
    /// subnet, or that asks no membership, is skipped; a group left with
    /// no full member is dropped unless it is well known. The groups
    /// that take members are programmed as after a join; no trap 66 is
    /// raised (the groups existed before). The members restored and
    /// those left out, or why the group was not restored.
    pub fn restore(
        &mut self,
        s: &Subnet,
        rec: McMemberRecord,
        members: &[(Gid, u8, bool)],
    ) -> Result<MembersRestored, &'static str> {
        let mlid = rec.mlid;
        if !mlid.is_multicast() || mlid.0 > Lid::MULTICAST_MAX.0 {
            return Err("its MLID is not a multicast LID");
        }
        if rec.mgid.0[0] != 0xFF {
            return Err("its MGID is not a multicast GID");
        }
        if !(1..=5).contains(&rec.mtu) || half_gbps(rec.rate).is_none() {
            return Err("its MTU or rate is not a code that exists");
        }
        // Solicited-node groups an SA consolidated share their MLID.
        let blocks = |g: &Group| {
            g.rec.mlid == mlid && !(is_ipv6_snm(&rec.mgid) && same_snm_set(&g.rec.mgid, &rec.mgid))
        };
        let gi = match self.by_mgid(&rec.mgid) {
            Some(i) if self.groups[i].rec.mlid == mlid => i,
            Some(_) => return Err("a group with its MGID holds another MLID"),
            None if self.groups.iter().any(blocks) => return Err("another group holds its MLID"),
            None if self.groups.len() >= MAX_GROUPS => return Err("the SA holds its most groups"),
            None => {
                let mut r = rec;
                r.port_gid = Gid([0; 16]);
                r.proxy_join = false;
                (r.mtu_selector, r.rate_selector) = (EXACTLY, EXACTLY);
                r.packet_life_time_selector = EXACTLY;
                self.add(Group {
                    rec: r,
                    members: Vec::new(),
                    well_known: false,
                });
                self.groups.len() - 1
            }
        };
        let mut n = MembersRestored::default();
        let mut held = self.memberships();
        for &(gid, join_state, proxy) in members {
            let join = join_state & 0x0F;
            let Ok(port) = member_end(s, gid) else {
                n.gone += 1;
                continue;
            };
            if join == 0 || self.groups[gi].member(port.gid.guid()).is_some() {
                n.void += 1;
                continue;
            }
            if held >= MAX_MEMBERS {
                n.over += 1;
                continue;
            }
            held += 1;
            self.groups[gi].members.push(Member {
                gid: port.gid,
                join_state: join,
                proxy,
                by: port.lid,
            });
            n.restored += 1;
        }
        let g = &self.groups[gi];
        if !g.well_known && g.full_members() == 0 {
            let g = self.groups.swap_remove(gi);
            self.release(g.rec.mlid);
            return Err(if n.over > 0 {
                "the SA holds its most memberships (65,536)"
            } else {
                "no full member of it is in the subnet"
            });
        }
        if n.restored > 0 {
            self.changed.insert(mlid.0);
        }
        Ok(n)
    }

    /// Whether a member of some group joined with a PortGID of GUID
    /// `guid`.
    pub fn uses_port_guid(&self, guid: u64) -> bool {
        (self.groups.iter()).any(|g| g.members.iter().any(|m| m.gid.guid().0 == guid))
    }

    /// Memberships in all groups.
    pub fn memberships(&self) -> usize {
        self.groups.iter().map(|g| g.members.len()).sum()
    }

    /// Adds a group, its MLID marked used.
    fn add(&mut self, g: Group) {
        self.mark(g.rec.mlid, true);
        self.groups.push(g);
    }

    /// Removes group `i`, its MLID freed unless another group shares it.
    fn remove(&mut self, i: usize) {
        let g = self.groups.swap_remove(i);
        self.release(g.rec.mlid);
        self.changed.insert(g.rec.mlid.0);
        self.created_deleted.push((67, g.rec.mgid));
    }

    /// The groups created (trap 66) and deleted (trap 67) since the last
    /// call, in order: for the SA to report to its subscribers.
    pub fn take_created_deleted(&mut self) -> Vec<(u16, Gid)> {
        core::mem::take(&mut self.created_deleted)
    }

    /// The MLIDs whose members changed (joins, leaves, groups deleted,
    /// ports gone) since the last call: the SM programs their trees.
    pub fn take_changes(&mut self) -> Vec<Lid> {
        core::mem::take(&mut self.changed)
            .into_iter()
            .map(Lid)
            .collect()
    }

    /// The end ports of the group of `mlid`, as the SM forwards to them:
    /// a CA's port (a VM's, its hypervisor's), a switch's port 0. Every
    /// member, send-only ones too (their packets enter the tree where they
    /// hang off), marked so: a port receives if any of its memberships is
    /// a full or non-member. Empty when no group has the MLID. Groups
    /// that share the MLID (consolidated solicited-node groups) forward
    /// to all their members.
    pub fn members_of(&self, s: &Subnet, mlid: Lid) -> Vec<GroupMember> {
        let mut v: Vec<GroupMember> = (self.groups.iter())
            .filter(|g| g.rec.mlid == mlid)
            .flat_map(|g| &g.members)
            .filter_map(|m| {
                let e = member_end(s, m.gid).ok()?;
                let n = s.node(e.node)?;
                Some(GroupMember {
                    node: e.node,
                    port: n.end_port(),
                    send_only: m.join_state & (FULL | NON) == 0,
                })
            })
            .collect();
        // A port that receives in any membership receives.
        v.sort_unstable();
        v.dedup_by(|b, a| {
            let same = (a.node, a.port) == (b.node, b.port);
            if same {
                a.send_only &= b.send_only;
            }
            same
        });
        v
    }

    /// `mlid` marked free when no group holds it any more.
    fn release(&mut self, mlid: Lid) {
        if !self.groups.iter().any(|g| g.rec.mlid == mlid) {
            self.mark(mlid, false);
        }
    }

    fn mark(&mut self, mlid: Lid, used: bool) {
        let i = usize::from(mlid.0.wrapping_sub(Lid::MULTICAST_MIN.0));
        if let Some(w) = self.mlids.get_mut(i / 64) {
            if used {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
    }

    fn used(&self, mlid: Lid) -> bool {
        let i = usize::from(mlid.0.wrapping_sub(Lid::MULTICAST_MIN.0));
        self.mlids
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn by_mgid(&self, mgid: &Gid) -> Option<usize> {
        self.groups.iter().position(|g| g.rec.mgid == *mgid)
    }

    /// A Set (join, and create when the group does not exist) from `from`
    /// with `mask`; the record answered.
    pub fn join(
        &mut self,
        s: &Subnet,
        from: Lid,
        data: &[u8],
        mask: u64,
        checks: Checks,
    ) -> Result<McMemberRecord, SaStatus> {
        let (q, requester) = membership_request(s, from, data, mask)?;
        let port = member_end(s, q.port_gid)?;
        let proxy = port.gid.guid() != requester.gid.guid();
        if mask & bit::PKEY != 0 && !q.pkey.is_valid() {
            return Err(SaStatus::ReqInvalid);
        }
        let join = q.join_state;
        let (gi, new) = match self.by_mgid(&q.mgid) {
            Some(i) => {
                if checks.join && !other_fields_agree(&q, &self.groups[i].rec, mask) {
                    return Err(SaStatus::ReqInvalid);
                }
                (i, false)
            }
            None => {
                if join & (FULL | SEND_ONLY_FULL) == 0 {
                    return Err(SaStatus::ReqInvalid);
                }
                if mask & bit::CREATE != bit::CREATE {
                    return Err(SaStatus::ReqInsufficientComponents);
                }
                let rec = self.create(s, &q, mask, &port, checks)?;
                self.add(Group {
                    rec,
                    members: Vec::new(),
                    well_known: false,
                });
                (self.groups.len() - 1, true)
            }
        };
        let undo = |gs: &mut Groups| {
            if new {
                // Never announced: no trap 67 for it.
                gs.remove(gi);
                gs.created_deleted.pop();
            }
        };
        let g = &self.groups[gi];
        let (port_mtu, port_rate) = port_caps(s, &port);
        let realizable = mtu_rate_agree(&q, &g.rec, mask)
            && port_mtu >= g.rec.mtu
            && cmp_rate(port_rate, g.rec.rate) != core::cmp::Ordering::Less
            && join != 0
            // The port must hold the group's partition.
            && crate::path::holds(s, &port, g.rec.pkey);
        // o15-0.2.1: a membership not joined by proxy is changed only
        // from its own port.
        let modifiable = g
            .member(port.gid.guid())
            .is_none_or(|m| g.members[m].proxy || !proxy);
        if !realizable || !modifiable {
            undo(self);
            return Err(SaStatus::ReqInvalid);
        }
        if g.member(port.gid.guid()).is_none()
            && (self.memberships() >= MAX_MEMBERS || self.made_by(from) >= MAX_PER_REQUESTER)
        {
            undo(self);
            return Err(SaStatus::NoResources);
        }
        self.changed.insert(self.groups[gi].rec.mlid.0);
        if new {
            self.created_deleted.push((66, self.groups[gi].rec.mgid));
        }
        let g = &mut self.groups[gi];
        let state = match g.member(port.gid.guid()) {
            Some(m) => {
                g.members[m].join_state |= join;
                g.members[m].join_state
            }
            None => {
                g.members.push(Member {
                    gid: port.gid,
                    join_state: join,
                    proxy,
                    by: from,
                });
                join
            }
        };
        // The answer: the request with the group's parameters and the
        // port's JoinState now.
        let mut a = q;
        let r = &g.rec;
        (a.mgid, a.qkey, a.mlid, a.tclass, a.pkey) = (r.mgid, r.qkey, r.mlid, r.tclass, r.pkey);
        (a.sl, a.flow_label, a.hop_limit, a.scope) = (r.sl, r.flow_label, r.hop_limit, r.scope);
        (a.mtu, a.rate, a.packet_life_time) = (r.mtu, r.rate, r.packet_life_time);
        a.mtu_selector = EXACTLY;
        a.rate_selector = EXACTLY;
        a.packet_life_time_selector = EXACTLY;
        a.join_state = state;
        Ok(a)
    }

    /// The record of a new group for the join `q` of `port`: the MGID
    /// checked or made, MTU and rate chosen, an MLID given.
    fn create(
        &mut self,
        s: &Subnet,
        q: &McMemberRecord,
        mask: u64,
        port: &End,
        checks: Checks,
    ) -> Result<McMemberRecord, SaStatus> {
        if self.groups.len() >= MAX_GROUPS {
            return Err(SaStatus::NoResources);
        }
        let mut rec = *q;
        if q.mgid == Gid([0; 16]) {
            rec.mgid = self.new_mgid(mask, q, port)?;
        } else if checks.mgid {
            self.check_mgid(q, mask)?;
        }
        let (port_mtu, port_rate) = port_caps(s, port);
        // MTU: the port's unless a selector asks otherwise.
        let on = |b: u64| mask & b != 0;
        rec.mtu = if !on(bit::MTU) || !on(bit::MTU_SEL) || q.mtu_selector == 3 {
            port_mtu
        } else {
            match q.mtu_selector {
                0 if q.mtu >= port_mtu => return Err(SaStatus::ReqInvalid),
                0 => port_mtu,
                1 if q.mtu > port_mtu => port_mtu,
                1 => q.mtu.wrapping_sub(1),
                _ => q.mtu,
            }
        };
        if !(1..=5).contains(&rec.mtu) {
            return Err(SaStatus::ReqInvalid);
        }
        rec.rate = if !on(bit::RATE) || !on(bit::RATE_SEL) || q.rate_selector == 3 {
            port_rate
        } else {
            use core::cmp::Ordering::*;
            match q.rate_selector {
                0 if cmp_rate(q.rate, port_rate) != Less => return Err(SaStatus::ReqInvalid),
                0 => port_rate,
                1 if cmp_rate(q.rate, port_rate) == Greater => port_rate,
                1 => next_rate(q.rate, false).ok_or(SaStatus::ReqInvalid)?,
                _ => q.rate,
            }
        };
        if half_gbps(rec.rate).is_none() {
            return Err(SaStatus::ReqInvalid);
        }
        rec.rate = crate::path::limit_rate(rec.rate, checks.max_rate);
        let asked = if on(bit::MLID) { q.mlid } else { Lid(0) };
        rec.mlid = match self.snm_mlid(&rec.mgid, checks.consolidate_snm) {
            // OpenSM gives a free MLID asked for first.
            Some(m) if !asked.is_multicast() || self.used(asked) => m,
            _ => self.new_mlid(asked)?,
        };
        // The record's scope is the MGID's (OpenSM keeps the request's,
        // which leaves a made MGID's group with scope 0).
        rec.scope = rec.mgid.0[1] & 0x0F;
        rec.mtu_selector = EXACTLY;
        rec.rate_selector = EXACTLY;
        rec.packet_life_time_selector = EXACTLY;
        rec.port_gid = Gid([0; 16]);
        rec.proxy_join = false;
        Ok(rec)
    }

    /// A requested MGID is a multicast GID (o15-0.1.5, IBA 4.1.1): 0xFF
    /// first, no reserved flag; the SA's signature A01B never link-local;
    /// an IPoIB one (401B, 601B) only in a partition whose broadcast
    /// group exists and agrees.
    fn check_mgid(&self, q: &McMemberRecord, mask: u64) -> Result<(), SaStatus> {
        let m = &q.mgid;
        if m.0[0] != 0xFF {
            return Err(SaStatus::ReqInvalid);
        }
        let sig = signature(m);
        if sig == 0x401B || sig == 0x601B {
            let mut bcast = IPOIB_BROADCAST;
            bcast.0[1] = 0x10 | (m.0[1] & 0x0F);
            bcast.0[4..6].copy_from_slice(&m.0[4..6]);
            if *m != bcast {
                let b = self.by_mgid(&bcast).ok_or(SaStatus::ReqInvalid)?;
                if !other_fields_agree(q, &self.groups[b].rec, mask) {
                    return Err(SaStatus::ReqInvalid);
                }
            }
            return Ok(());
        }
        if m.0[1] & 0xE0 != 0 || (sig == 0xA01B && m.0[1] & 0x0F == LINK_LOCAL) {
            return Err(SaStatus::ReqInvalid);
        }
        Ok(())
    }

    /// An MGID of the SA's own: FF1s:A01B, the subnet prefix, a counter.
    fn new_mgid(&mut self, mask: u64, q: &McMemberRecord, port: &End) -> Result<Gid, SaStatus> {
        let scope = if mask & bit::SCOPE != 0 {
            q.scope
        } else {
            LINK_LOCAL
        };
        let mut g = [0u8; 16];
        g[..4].copy_from_slice(&[0xff, 0x10 | scope, 0xa0, 0x1b]);
        g[4..12].copy_from_slice(&port.gid.prefix().to_be_bytes());
        for _ in 0..1000 {
            g[12..].copy_from_slice(&self.counter.to_be_bytes());
            self.counter = self.counter.wrapping_add(1);
            if self.by_mgid(&Gid(g)).is_none() {
                return Ok(Gid(g));
            }
        }
        Err(SaStatus::NoResources)
    }

    /// With `consolidate`, the MLID of a solicited-node group of the same
    /// partition and scope as `mgid`, when `mgid` is one and such a group
    /// exists (OpenSM's `consolidate_ipv6_snm_req`).
    fn snm_mlid(&self, mgid: &Gid, consolidate: bool) -> Option<Lid> {
        if !consolidate || !is_ipv6_snm(mgid) {
            return None;
        }
        (self.groups.iter())
            .find(|g| same_snm_set(&g.rec.mgid, mgid))
            .map(|g| g.rec.mlid)
    }

    /// The MLID asked for when it is free, else the lowest free one.
    fn new_mlid(&self, asked: Lid) -> Result<Lid, SaStatus> {
        if asked.is_multicast() && !self.used(asked) {
            return Ok(asked);
        }
        let (w, word) = self
            .mlids
            .iter()
            .enumerate()
            .find(|(_, w)| **w != u64::MAX)
            .ok_or(SaStatus::NoResources)?;
        let i = w * 64 + word.trailing_ones() as usize;
        if i >= MLIDS {
            return Err(SaStatus::NoResources);
        }
        Ok(Lid(Lid::MULTICAST_MIN.0 + i as u16))
    }

    /// Memberships the requester at `lid` made.
    fn made_by(&self, lid: Lid) -> usize {
        self.groups
            .iter()
            .flat_map(|g| &g.members)
            .filter(|m| m.by == lid)
            .count()
    }

    /// A Delete (leave) from `from` with `mask`; the record answered.
    pub fn leave(
        &mut self,
        s: &Subnet,
        from: Lid,
        data: &[u8],
        mask: u64,
    ) -> Result<McMemberRecord, SaStatus> {
        let (q, requester) = membership_request(s, from, data, mask)?;
        let gi = self.by_mgid(&q.mgid).ok_or(SaStatus::ReqInvalid)?;
        let mlid = self.groups[gi].rec.mlid.0;
        let g = &mut self.groups[gi];
        let mi = g.member(q.port_gid.guid()).ok_or(SaStatus::ReqInvalid)?;
        let m = g.members[mi];
        let asked = q.join_state & 0x0F;
        // o15-0.1.14: some of the stored bits and none that is not
        // stored, from the port itself unless it was joined by proxy.
        let own = requester.gid.guid() == m.gid.guid();
        if asked & m.join_state == 0 || asked & !m.join_state != 0 || (!m.proxy && !own) {
            return Err(SaStatus::ReqInvalid);
        }
        let full_before = g.full_members();
        let was_full = usize::from(m.join_state & FULL != 0);
        let left = m.join_state & !asked;
        self.changed.insert(mlid);
        let g = &mut self.groups[gi];
        let mut a = q;
        if left & FULL != 0 || (left != 0 && full_before > was_full) {
            g.members[mi].join_state = left;
            a.join_state = left;
        } else {
            g.members.swap_remove(mi);
            a.join_state = 0;
        }
        if g.full_members() == 0 && full_before > 0 {
            // No full member is left: the group goes with its members,
            // unless it is well known.
            g.members.clear();
            if !g.well_known {
                self.remove(gi);
            }
        }
        a.mtu_selector = EXACTLY;
        a.rate_selector = EXACTLY;
        a.packet_life_time_selector = EXACTLY;
        Ok(a)
    }

    /// The records of a Get or GetTable from `from` with `mask`, at most
    /// `max` (past it, "no resources").
    pub fn find(
        &self,
        s: &Subnet,
        from: Lid,
        data: &[u8],
        mask: u64,
        trusted: bool,
        max: usize,
    ) -> Result<Vec<McMemberRecord>, SaStatus> {
        let q = McMemberRecord::decode(data).map_err(|_| SaStatus::ReqInvalid)?;
        if !codes_valid(&q, mask) {
            return Err(SaStatus::ReqInvalid);
        }
        end_by_lid(s, from).ok_or(SaStatus::ReqInvalid)?;
        let on = |b: u64| mask & b != 0;
        // The scope and JoinState nibbles a record must match.
        let state_mask =
            (if on(bit::SCOPE) { 0xF0 } else { 0 }) | (if on(bit::JOIN_STATE) { 0x0F } else { 0 });
        let state = |scope: u8, join: u8| ((scope << 4) | join) & state_mask;
        let wanted = state(q.scope, q.join_state);
        let mut out = Vec::new();
        let mut push = |r: McMemberRecord| {
            if out.len() >= max {
                return Err(SaStatus::NoResources);
            }
            out.push(r);
            Ok(())
        };
        for g in &self.groups {
            let r = &g.rec;
            if on(bit::MGID) && q.mgid != r.mgid
                || on(bit::MLID) && q.mlid != r.mlid
                || !other_fields_agree(&q, r, mask)
                || on(bit::PROXY) && q.proxy_join != r.proxy_join
                || !mtu_rate_agree(&q, r, mask)
            {
                continue;
            }
            let with = |m: &Member| McMemberRecord {
                port_gid: m.gid,
                join_state: m.join_state,
                proxy_join: m.proxy,
                ..*r
            };
            if on(bit::PORT_GID) {
                let Some(mi) = g.member(q.port_gid.guid()) else {
                    continue;
                };
                let m = &g.members[mi];
                if state(r.scope, m.join_state) == wanted {
                    push(with(m))?;
                }
            } else if trusted {
                for m in g
                    .members
                    .iter()
                    .filter(|m| state(r.scope, m.join_state) == wanted)
                {
                    push(with(m))?;
                }
            } else if state(r.scope, r.join_state) == wanted {
                push(*r)?;
            }
        }
        if !trusted {
            // IBA 15.2.5.17: PortGID, JoinState and ProxyJoin are zero
            // for an untrusted requester.
            for r in &mut out {
                r.port_gid = Gid([0; 16]);
                r.join_state = 0;
                r.proxy_join = false;
            }
        }
        Ok(out)
    }

    /// Drops the memberships of ports that are no longer in the subnet,
    /// and the groups (not well known) left with no full member; how many
    /// memberships went.
    pub fn prune(&mut self, s: &Subnet) -> usize {
        let mut gone = 0;
        for g in &mut self.groups {
            let before = g.members.len();
            g.members.retain(|m| member_end(s, m.gid).is_ok());
            if g.members.len() != before {
                self.changed.insert(g.rec.mlid.0);
            }
            gone += before - g.members.len();
        }
        let mut i = 0;
        while i < self.groups.len() {
            let g = &self.groups[i];
            if g.well_known || g.full_members() > 0 {
                i += 1;
            } else {
                self.remove(i);
            }
        }
        gone
    }
}
