//! The SA's database in OpenSM's layout (`opensm-sa.dump`, which
//! OpenSM writes with `sa_db_dump` and reads back with `-S FILE` at its
//! first sweep as master): the multicast groups and their members, the
//! InformInfo subscriptions and the ServiceRecords, so that an SM started
//! again (or OpenSM in ibkit's place, or ibkit in OpenSM's) keeps the
//! groups' MGIDs and MLIDs, the services and the subscriptions the hosts
//! made.
//!
//! [`SaDb::parse`] reads the layout line by line, each value found after
//! its name as OpenSM's loader finds it, but refuses what OpenSM would
//! quietly misread: a number that does not fit its field, a line that is
//! none of the record lines, a member line before any group, a file past
//! [`MAX_LINES`]. A refused file names the line and the reason, and
//! nothing of it is restored. [`SaDb::write`] writes OpenSM's lines with
//! its field widths. [`crate::Sa::export`] and [`crate::Sa::restore`] go
//! between the SA and the records.
//!
//! GUIDInfo records carry the ports' alias GUIDs ([`crate::guids`]),
//! brought back by each port's own GUID. A service
//! name is written as OpenSM writes it, between single quotes, so a byte
//! that is not printable ASCII, or a quote, is written as `?`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;
use mad_core::sa::{InformInfo, McMemberRecord, ServiceRecord};
use mad_core::Gid;

/// Lines a database may have at most (OpenSM's writes four lines a
/// group, two a member, two a service or subscription).
pub const MAX_LINES: usize = 1 << 20;

/// What [`crate::Sa::restore`] brought back, and what not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Groups held after it (new or already there).
    pub groups: usize,
    /// Memberships restored.
    pub members: usize,
    /// Services restored.
    pub services: usize,
    /// Subscriptions restored.
    pub subscriptions: usize,
    /// Alias GUIDs brought back from GUIDInfo records.
    pub alias_guids: usize,
    /// Records not restored.
    pub skipped: usize,
    /// Why, for the first 100 of them.
    pub reasons: Vec<String>,
}

/// A multicast group's lines: the group, and its members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbGroup {
    /// The MLID of the group's heading.
    pub mlid: u16,
    /// Written "(well known)" (OpenSM's reader ignores it; so does
    /// [`crate::Sa::restore`], which takes that from the SM's partitions).
    pub well_known: bool,
    /// The group's MCMemberRecord as OpenSM keeps it.
    pub rec: McMemberRecord,
    /// Its members: PortGID, ScopeState byte (scope, JoinState), proxy
    /// join.
    pub members: Vec<(Gid, u8, bool)>,
}

/// A subscription's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbInform {
    /// The subscriber's port GID.
    pub subscriber: Gid,
    /// Which of its subscriptions.
    pub enumeration: u16,
    /// What it asked for.
    pub info: InformInfo,
    /// Where its Reports went: LID, QP, Q_Key, P_Key index, SL, path
    /// bits, static rate.
    pub lid: u16,
    /// Its QP.
    pub qpn: u32,
    /// Its Q_Key (OpenSM writes 0, as ibkit does: Reports go to QP1,
    /// whose Q_Key is the well-known one).
    pub qkey: u32,
    /// Its P_Key index.
    pub pkey_index: u16,
    /// Its SL.
    pub sl: u8,
    /// Its path bits.
    pub path_bits: u8,
    /// Its static rate.
    pub static_rate: u8,
}

/// A ServiceRecord's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbService {
    /// The record as set (its ServiceLease the lease granted).
    pub rec: [u8; ServiceRecord::SIZE],
    /// When it was set, seconds since the epoch.
    pub modified_time: u32,
    /// The lease granted, seconds (0xFFFFFFFF: indefinite).
    pub lease_period: u32,
}

/// A GUIDInfo record's line: a block of a port's alias GUIDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbGuidInfo {
    /// The port's own GUID.
    pub base_guid: u64,
    /// Its LID then.
    pub lid: u16,
    /// The block.
    pub block: u8,
    /// The block's eight GUIDs.
    pub guids: [u64; 8],
}

/// The records of an SA database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaDb {
    /// GUIDInfo records: blocks of ports' alias GUIDs.
    pub guid_info: Vec<DbGuidInfo>,
    /// Multicast groups, in MGID order when written.
    pub groups: Vec<DbGroup>,
    /// Subscriptions.
    pub informs: Vec<DbInform>,
    /// ServiceRecords.
    pub services: Vec<DbService>,
}

/// A database refused: the line (from 1) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbError {
    /// The line.
    pub line: usize,
    /// Why.
    pub what: String,
}

impl core::fmt::Display for DbError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl core::error::Error for DbError {}

/// One line being read: the rest of it after the last value.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    /// The hex number after the next `name` (which ends in "0x" where
    /// OpenSM's does), at most `bits` wide, ended by a blank, a colon or
    /// the end of the line.
    fn hex(&mut self, name: &str, bits: u32) -> Result<u64, String> {
        let at = (self.rest.find(name)).ok_or_else(|| format!("no \"{}\"", name.trim()))?;
        let after = &self.rest[at + name.len()..];
        let end = after
            .find(|c: char| c.is_ascii_whitespace() || c == ':')
            .unwrap_or(after.len());
        let digits = &after[..end];
        let bad = || format!("\"{}\" is not a {bits}-bit hex number", name.trim());
        if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(bad());
        }
        let v = u64::from_str_radix(digits, 16).map_err(|_| bad())?;
        if bits < 64 && v >> bits != 0 {
            return Err(bad());
        }
        self.rest = &after[end..];
        Ok(v)
    }

    /// A GID written as two 64-bit halves, `name` then ":0x".
    fn gid(&mut self, name: &str) -> Result<Gid, String> {
        let hi = self.hex(name, 64)?;
        let lo = self.hex(":0x", 64)?;
        Ok(halves(hi, lo))
    }

    /// Sixteen bytes written as two 64-bit halves.
    fn bytes16(&mut self, name: &str) -> Result<[u8; 16], String> {
        Ok(self.gid(name)?.0)
    }

    /// The quoted service name after `name`.
    fn name(&mut self, name: &str) -> Result<[u8; 64], String> {
        let at = (self.rest.find(name)).ok_or_else(|| format!("no \"{}\"", name.trim()))?;
        let after = &self.rest[at + name.len()..];
        let (text, rest) = match after.as_bytes().first() {
            Some(&q @ (b'\'' | b'"')) => {
                let body = &after[1..];
                let end = body
                    .find(char::from(q))
                    .ok_or("the service name has no closing quote")?;
                (&body[..end], &body[end + 1..])
            }
            _ => {
                let end = after.find(' ').unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        if text.len() > 63 {
            return Err("the service name is longer than 63 bytes".into());
        }
        let mut out = [0u8; 64];
        out[..text.len()].copy_from_slice(text.as_bytes());
        self.rest = rest;
        Ok(out)
    }
}

/// A GID from its two halves.
fn halves(hi: u64, lo: u64) -> Gid {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&hi.to_be_bytes());
    g[8..].copy_from_slice(&lo.to_be_bytes());
    Gid(g)
}

/// The two 64-bit halves of 16 bytes.
fn split(b: &[u8; 16]) -> (u64, u64) {
    let mut hi = [0u8; 8];
    let mut lo = [0u8; 8];
    hi.copy_from_slice(&b[..8]);
    lo.copy_from_slice(&b[8..]);
    (u64::from_be_bytes(hi), u64::from_be_bytes(lo))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The 52 bytes of a group's record from OpenSM's fields (the bytes as
/// OpenSM's `ib_member_rec_t` holds them).
fn member_rec(c: &mut Cursor<'_>) -> Result<McMemberRecord, String> {
    let mut b = [0u8; McMemberRecord::SIZE];
    b[..16].copy_from_slice(&c.bytes16(" mgid=0x")?);
    b[16..32].copy_from_slice(&c.bytes16(" port_gid=0x")?);
    b[32..36].copy_from_slice(&(c.hex(" qkey=0x", 32)? as u32).to_be_bytes());
    b[36..38].copy_from_slice(&(c.hex(" mlid=0x", 16)? as u16).to_be_bytes());
    b[38] = c.hex(" mtu=0x", 8)? as u8;
    b[39] = c.hex(" tclass=0x", 8)? as u8;
    b[40..42].copy_from_slice(&(c.hex(" pkey=0x", 16)? as u16).to_be_bytes());
    b[42] = c.hex(" rate=0x", 8)? as u8;
    b[43] = c.hex(" pkt_life=0x", 8)? as u8;
    b[44..48].copy_from_slice(&(c.hex(" sl_flow_hop=0x", 32)? as u32).to_be_bytes());
    b[48] = c.hex(" scope_state=0x", 8)? as u8;
    b[49] = (c.hex(" proxy_join=0x", 1)? as u8) << 7;
    McMemberRecord::decode(&b).map_err(|e| format!("the group's record: {e}"))
}

impl SaDb {
    /// Reads a database in OpenSM's layout.
    pub fn parse(text: &str) -> Result<SaDb, DbError> {
        let mut db = SaDb::default();
        // The last line read was a group's (its members may follow).
        let mut in_group = false;
        for (i, line) in text.lines().enumerate() {
            let at = |what: String| DbError { line: i + 1, what };
            if i >= MAX_LINES {
                return Err(at(format!("more than {MAX_LINES} lines")));
            }
            let l = line.trim_start();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let mut c = Cursor { rest: l };
            if l.starts_with("MC Group") {
                let head = &l[..l
                    .find(':')
                    .ok_or_else(|| at("no ':' after the MLID".into()))?];
                let mut h = Cursor { rest: head };
                let mlid = h.hex(" 0x", 16).map_err(at)? as u16;
                c.rest = &l[head.len()..];
                let rec = member_rec(&mut c).map_err(at)?;
                db.groups.push(DbGroup {
                    mlid,
                    well_known: head.contains("(well known)"),
                    rec,
                    members: Vec::new(),
                });
                in_group = true;
            } else if l.starts_with("mcm_port") {
                let g = (db.groups.last_mut())
                    .filter(|_| in_group)
                    .ok_or_else(|| at("a member line outside a group".into()))?;
                let gid = c.gid(" port_gid=0x").map_err(at)?;
                let ss = c.hex(" scope_state=0x", 8).map_err(at)? as u8;
                let proxy = c.hex(" proxy_join=0x", 1).map_err(at)? != 0;
                g.members.push((gid, ss, proxy));
            } else if l.starts_with("Service Record:") {
                in_group = false;
                db.services.push(service(&mut c).map_err(at)?);
            } else if l.starts_with("InformInfo Record:") {
                in_group = false;
                db.informs.push(inform(&mut c).map_err(at)?);
            } else if l.starts_with("GUIDInfo Record:") {
                in_group = false;
                let base_guid = c.hex(" base_guid=0x", 64).map_err(at)?;
                let lid = c.hex(" lid=0x", 16).map_err(at)? as u16;
                let block = c.hex(" block_num=0x", 8).map_err(at)? as u8;
                let mut guids = [0u64; 8];
                for (k, g) in guids.iter_mut().enumerate() {
                    *g = c.hex(&format!(" guid{k}=0x"), 64).map_err(at)?;
                }
                db.guid_info.push(DbGuidInfo {
                    base_guid,
                    lid,
                    block,
                    guids,
                });
            } else {
                let shown: String = l.chars().take(40).collect();
                return Err(at(format!("\"{shown}\" is not a line of an SA database")));
            }
        }
        Ok(db)
    }

    /// The database in OpenSM's layout, byte for byte as OpenSM writes its
    /// lines (a blank line after each).
    pub fn write(&self) -> String {
        let mut s = String::new();
        for g in &self.guid_info {
            let _ = write!(
                s,
                "GUIDInfo Record: base_guid=0x{:016x} lid=0x{:04x} block_num=0x{:x}",
                g.base_guid, g.lid, g.block
            );
            for (k, v) in g.guids.iter().enumerate() {
                let _ = write!(s, " guid{k}=0x{v:016x}");
            }
            s.push_str("\n\n");
        }
        for g in &self.groups {
            let mut b = [0u8; McMemberRecord::SIZE];
            let _ = g.rec.encode(&mut b);
            let (mh, ml) = split(b[..16].try_into().unwrap_or(&[0; 16]));
            let (ph, pl) = split(b[16..32].try_into().unwrap_or(&[0; 16]));
            let _ = write!(
                s,
                "MC Group 0x{:04x} {}: mgid=0x{mh:016x}:0x{ml:016x} port_gid=0x{ph:016x}:0x{pl:016x} \
                 qkey=0x{:08x} mlid=0x{:04x} mtu=0x{:02x} tclass=0x{:02x} pkey=0x{:04x} \
                 rate=0x{:02x} pkt_life=0x{:02x} sl_flow_hop=0x{:08x} scope_state=0x{:02x} \
                 proxy_join=0x{:x}\n\n",
                g.mlid,
                if g.well_known { " (well known)" } else { "" },
                u32_at(&b, 32),
                u16_at(&b, 36),
                b[38],
                b[39],
                u16_at(&b, 40),
                b[42],
                b[43],
                u32_at(&b, 44),
                b[48],
                b[49] >> 7,
            );
            for (gid, ss, proxy) in &g.members {
                let (h, l) = split(&gid.0);
                let _ = write!(
                    s,
                    "mcm_port: port_gid=0x{h:016x}:0x{l:016x} scope_state=0x{ss:02x} proxy_join=0x{:x}\n\n",
                    u8::from(*proxy)
                );
            }
        }
        for i in &self.informs {
            let mut b = [0u8; InformInfo::SIZE];
            let _ = i.info.encode(&mut b);
            let (sh, sl) = split(&i.subscriber.0);
            let (gh, gl) = split(b[..16].try_into().unwrap_or(&[0; 16]));
            let _ = write!(
                s,
                "InformInfo Record: subscriber_gid=0x{sh:016x}:0x{sl:016x} subscriber_enum=0x{:x} \
                 InformInfo: gid=0x{gh:016x}:0x{gl:016x} lid_range_begin=0x{:x} lid_range_end=0x{:x} \
                 is_generic=0x{:x} subscribe=0x{:x} trap_type=0x{:x} trap_num=0x{:x} \
                 qpn_resp_time_val=0x{:x} node_type=0x{:06x} rep_addr: lid=0x{:04x} \
                 path_bits=0x{:02x} static_rate=0x{:02x} remote_qp=0x{:08x} remote_qkey=0x{:08x} \
                 pkey_ix=0x{:04x} sl=0x{:02x}\n\n",
                i.enumeration,
                u16_at(&b, 16),
                u16_at(&b, 18),
                b[22],
                b[23],
                u16_at(&b, 24),
                u16_at(&b, 26),
                u32_at(&b, 28),
                u32_at(&b, 32) & 0xFF_FFFF,
                i.lid,
                i.path_bits,
                i.static_rate,
                i.qpn,
                i.qkey,
                i.pkey_index,
                i.sl,
            );
        }
        for v in &self.services {
            let r = &v.rec;
            let b16 = |at: usize| split(r[at..at + 16].try_into().unwrap_or(&[0; 16]));
            let (gh, gl) = b16(8);
            let (kh, kl) = b16(32);
            let (d8h, d8l) = b16(112);
            let (d16h, d16l) = b16(128);
            let (d32h, d32l) = b16(144);
            let (d64h, d64l) = b16(160);
            let name: String = (r[48..112].iter())
                .take_while(|&&c| c != 0)
                .map(|&c| {
                    if c.is_ascii_graphic() && c != b'\'' || c == b' ' {
                        char::from(c)
                    } else {
                        '?'
                    }
                })
                .collect();
            let mut id = [0u8; 8];
            id.copy_from_slice(&r[..8]);
            let _ = write!(
                s,
                "Service Record: id=0x{:016x} gid=0x{gh:016x}:0x{gl:016x} pkey=0x{:x} lease=0x{:x} \
                 key=0x{kh:016x}:0x{kl:016x} name='{name}' data8=0x{d8h:016x}:0x{d8l:016x} \
                 data16=0x{d16h:016x}:0x{d16l:016x} data32=0x{d32h:016x}:0x{d32l:016x} \
                 data64=0x{d64h:016x}:0x{d64l:016x} modified_time=0x{:x} lease_period=0x{:x}\n\n",
                u64::from_be_bytes(id),
                u16_at(r, 24),
                u32_at(r, 28),
                v.modified_time,
                v.lease_period,
            );
        }
        s
    }
}

/// A Service Record line's fields.
fn service(c: &mut Cursor<'_>) -> Result<DbService, String> {
    let mut r = [0u8; ServiceRecord::SIZE];
    r[..8].copy_from_slice(&c.hex(" id=0x", 64)?.to_be_bytes());
    r[8..24].copy_from_slice(&c.bytes16(" gid=0x")?);
    r[24..26].copy_from_slice(&(c.hex(" pkey=0x", 16)? as u16).to_be_bytes());
    r[28..32].copy_from_slice(&(c.hex(" lease=0x", 32)? as u32).to_be_bytes());
    r[32..48].copy_from_slice(&c.bytes16(" key=0x")?);
    r[48..112].copy_from_slice(&c.name(" name=")?);
    r[112..128].copy_from_slice(&c.bytes16(" data8=0x")?);
    r[128..144].copy_from_slice(&c.bytes16(" data16=0x")?);
    r[144..160].copy_from_slice(&c.bytes16(" data32=0x")?);
    r[160..176].copy_from_slice(&c.bytes16(" data64=0x")?);
    let modified_time = c.hex(" modified_time=0x", 32)? as u32;
    let lease_period = c.hex(" lease_period=0x", 32)? as u32;
    Ok(DbService {
        rec: r,
        modified_time,
        lease_period,
    })
}

/// An InformInfo Record line's fields.
fn inform(c: &mut Cursor<'_>) -> Result<DbInform, String> {
    let subscriber = c.gid(" subscriber_gid=0x")?;
    let enumeration = c.hex(" subscriber_enum=0x", 16)? as u16;
    let mut b = [0u8; InformInfo::SIZE];
    b[..16].copy_from_slice(&c.bytes16(" gid=0x")?);
    b[16..18].copy_from_slice(&(c.hex(" lid_range_begin=0x", 16)? as u16).to_be_bytes());
    b[18..20].copy_from_slice(&(c.hex(" lid_range_end=0x", 16)? as u16).to_be_bytes());
    b[22] = c.hex(" is_generic=0x", 8)? as u8;
    b[23] = c.hex(" subscribe=0x", 8)? as u8;
    b[24..26].copy_from_slice(&(c.hex(" trap_type=0x", 16)? as u16).to_be_bytes());
    b[26..28].copy_from_slice(&(c.hex(" trap_num=0x", 16)? as u16).to_be_bytes());
    b[28..32].copy_from_slice(&(c.hex(" qpn_resp_time_val=0x", 32)? as u32).to_be_bytes());
    b[32..36].copy_from_slice(&(c.hex(" node_type=0x", 32)? as u32).to_be_bytes());
    let info = InformInfo::decode(&b).map_err(|e| format!("the InformInfo: {e}"))?;
    Ok(DbInform {
        subscriber,
        enumeration,
        info,
        lid: c.hex(" rep_addr: lid=0x", 16)? as u16,
        path_bits: c.hex(" path_bits=0x", 8)? as u8,
        static_rate: c.hex(" static_rate=0x", 8)? as u8,
        qpn: c.hex(" remote_qp=0x", 32)? as u32,
        qkey: c.hex(" remote_qkey=0x", 32)? as u32,
        pkey_index: c.hex(" pkey_ix=0x", 16)? as u16,
        sl: c.hex(" sl=0x", 8)? as u8,
    })
}
