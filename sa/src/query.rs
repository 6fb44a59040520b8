//! ComponentMask matching (IBA 15.2.4) and the records of the attributes
//! that mirror SMP attributes (nodes, ports, links, switches, LFT blocks,
//! GUIDs, P_Keys, the SM): every candidate is built from what the SM
//! read, encoded, and compared with the query on each component the mask
//! selects.

use crate::path::every_end;
use crate::{Addr, SaConfig};
use alloc::vec::Vec;
use mad_core::attr::{
    LinearForwardingTable, MulticastForwardingTable, NodeType, PKeyTable, SlToVlMappingTable,
    SmInfo, SmState, VlArbEntry, VlArbitrationTable,
};
use mad_core::field::get_bits;
use mad_core::sa::{
    ClassPortInfo, LinearForwardingTableRecord, LinkRecord, MulticastForwardingTableRecord,
    NodeRecord, PKeyTableRecord, PortInfoRecord, SaRecord, SaStatus, SlToVlMappingTableRecord,
    SmInfoRecord, SwitchInfoRecord, VlArbitrationTableRecord,
};
use mad_core::Lid;
use smi::sm::{NodeId, SmNode, Subnet};

/// A query: the subnet, who asks, the record it sent and its mask.
pub struct Query<'a> {
    /// The subnet.
    pub subnet: &'a Subnet,
    /// The requester.
    pub from: Addr,
    /// The SA data of the request (the query record at its start).
    pub data: &'a [u8],
    /// The ComponentMask.
    pub mask: u64,
    /// The components of `mask` compared bitwise ([`bitwise_components`]).
    pub bitwise: u64,
    /// The most records to return.
    pub max: usize,
    /// The most candidates (LID pairs) a path query may examine.
    pub max_examined: usize,
    /// The candidates a path query examined (set by it).
    pub examined: core::cell::Cell<usize>,
    /// The highest path rate code answered
    /// ([`crate::SaConfig::rate_limit`]).
    pub max_rate: u8,
}

/// True when `rec` equals `query` on every component of `R` that `mask`
/// selects (bits past the record's components are ignored).
pub fn matches<R: SaRecord>(query: &[u8], rec: &[u8], mask: u64) -> bool {
    matches_bitwise::<R>(query, rec, mask, 0)
}

/// As [`matches()`], but the components `bitwise` selects match when every
/// bit set in the query is set in the record (IBA 1.2.1 errata: a
/// PortInfoRecord Get or GetTable with bit 31 of its attribute modifier
/// set compares CapabilityMask and CapabilityMask2 so, as `saquery -s`
/// asks for the ports of SMs).
pub fn matches_bitwise<R: SaRecord>(query: &[u8], rec: &[u8], mask: u64, bitwise: u64) -> bool {
    R::COMPONENTS.iter().enumerate().all(|(i, c)| {
        if i >= 64 || mask & (1 << i) == 0 {
            return true;
        }
        if c.width > 64 {
            let (a, b) = (c.offset / 8, (c.offset + c.width) / 8);
            query.get(a..b) == rec.get(a..b)
        } else if bitwise & (1 << i) != 0 {
            let q = get_bits(query, c.offset, c.width);
            q & get_bits(rec, c.offset, c.width) == q
        } else {
            get_bits(query, c.offset, c.width) == get_bits(rec, c.offset, c.width)
        }
    })
}

/// The components a request compares bitwise ([`matches_bitwise`]): a
/// PortInfoRecord's CapabilityMask and CapabilityMask2 when bit 31 of the
/// attribute modifier is set (and the SA says it can, [`cap::PORT_INFO_CAP_MASK_MATCH`]).
pub fn bitwise_components(attr: mad_core::sa::SaAttributeId, modifier: u32) -> u64 {
    if attr != mad_core::sa::SaAttributeId::PortInfoRecord || modifier & (1 << 31) == 0 {
        return 0;
    }
    ["capability_mask", "capability_mask2"]
        .iter()
        .filter_map(|n| PortInfoRecord::component(n))
        .fold(0, |m, b| m | b)
}

/// Encoded records, laid out as a GetTable answer carries them: each
/// `size` bytes padded to a multiple of 8 (the AttributeOffset's unit),
/// one after the other in one buffer, so that a large answer costs one
/// allocation and no copy on its way to the RMPP transfer.
#[derive(Clone, Debug, Default)]
pub struct Records {
    data: Vec<u8>,
    size: usize,
    stride: usize,
}

impl Records {
    /// No records yet, each `size` bytes.
    pub fn new(size: usize) -> Records {
        Records {
            data: Vec::new(),
            size,
            stride: size.div_ceil(8) * 8,
        }
    }

    /// `recs`, each `size` bytes (longer ones cut, shorter ones padded).
    pub fn from_vecs(size: usize, recs: &[Vec<u8>]) -> Records {
        let mut out = Records::new(size);
        for r in recs {
            out.push_with(|b| {
                let n = r.len().min(b.len());
                b[..n].copy_from_slice(&r[..n]);
                true
            });
        }
        out
    }

    /// Adds a record written in place by `write` into zeroed bytes; it is
    /// kept when `write` returns true. Returns whether it was kept.
    pub fn push_with(&mut self, write: impl FnOnce(&mut [u8]) -> bool) -> bool {
        let at = self.data.len();
        self.data.resize(at + self.stride, 0);
        let kept = write(&mut self.data[at..at + self.size]);
        if !kept {
            self.data.truncate(at);
        }
        kept
    }

    /// Takes the last record out.
    pub fn pop(&mut self) {
        let n = self.data.len().saturating_sub(self.stride);
        self.data.truncate(n);
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.stride).unwrap_or(0)
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The record at `i`, its `size` bytes.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let at = i.checked_mul(self.stride)?;
        self.data.get(at..at.checked_add(self.size)?)
    }

    /// The bytes of each record, without their padding.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.data
            .chunks(self.stride.max(1))
            .map(|c| &c[..self.size])
    }

    /// The records' bytes, padded, and their stride in bytes.
    pub fn into_table(self) -> (Vec<u8>, usize) {
        (self.data, self.stride)
    }
}

impl Query<'_> {
    /// The records `each` yields that match, encoded: at most `max` (past
    /// it, "no resources").
    pub fn collect<R: SaRecord>(
        &self,
        each: fn(&Subnet, &mut dyn FnMut(R)),
    ) -> Result<Records, SaStatus> {
        let mut out = Records::new(R::SIZE);
        let mut over = false;
        let query = self.at_base_lids::<R>();
        let query = query.as_deref().unwrap_or(self.data);
        let (mask, bitwise) = (self.mask, self.bitwise);
        each(self.subnet, &mut |r: R| {
            if over {
                return;
            }
            let kept = out.push_with(|b| {
                r.encode(b).is_ok() && matches_bitwise::<R>(query, b, mask, bitwise)
            });
            if kept && out.len() > self.max {
                out.pop();
                over = true;
            }
        });
        if over {
            return Err(SaStatus::NoResources);
        }
        Ok(out)
    }
}

impl Query<'_> {
    /// The query with each LID of its RID the mask selects (a record's
    /// LID, a PortInfoRecord's EndportLID, a LinkRecord's From/ToLID)
    /// taken down to its port's base LID when it is one of the `2^LMC`
    /// LIDs above it, so that any LID of a port names the port, as in
    /// OpenSM's SA (the records carry the base); `None` when nothing
    /// changes. A VM's VF LID is a port of its own and stays.
    fn at_base_lids<R: SaRecord>(&self) -> Option<Vec<u8>> {
        let mut copy: Option<Vec<u8>> = None;
        for (i, c) in R::COMPONENTS.iter().enumerate() {
            // The record's own LIDs (its RID), not the attribute's inside
            // it: a PortInfoRecord's PortInfo.LID is compared as it is.
            let rid_lid = matches!(
                (c.name, c.offset),
                ("lid" | "endport_lid" | "from_lid", 0) | ("to_lid", 32)
            );
            if i >= 64 || self.mask & (1 << i) == 0 || !rid_lid || c.width != 16 {
                continue;
            }
            let at = c.offset / 8;
            let Some(&[hi, lo]) = self.data.get(at..at + 2) else {
                continue;
            };
            let lid = Lid(u16::from_be_bytes([hi, lo]));
            let base = base_lid(self.subnet, lid);
            if base != lid {
                let q = copy.get_or_insert_with(|| self.data.to_vec());
                q[at..at + 2].copy_from_slice(&base.0.to_be_bytes());
            }
        }
        copy
    }
}

/// The base LID of the port `lid` is one of the `2^LMC` LIDs of; a VM's
/// VF LID, or a LID the subnet does not know, is its own.
pub fn base_lid(subnet: &Subnet, lid: Lid) -> Lid {
    subnet
        .by_lid(lid)
        .and_then(|(node, _)| subnet.brief(node))
        .filter(|b| b.holds_lid(lid))
        .map_or(lid, |b| b.lid)
}

/// The LID of a node's port: a switch's (port 0) or a CA's.
fn lid_of(n: &SmNode) -> Lid {
    Lid(n.lid)
}

/// Live nodes with a LID, with their ids.
fn live(s: &Subnet) -> impl Iterator<Item = (NodeId, &SmNode)> {
    s.nodes()
        .iter()
        .enumerate()
        .filter(|(_, n)| n.alive && n.lid != 0)
        .map(|(i, n)| (NodeId(i), n))
}

/// One NodeRecord per live node, by the LID of its port: a CA's, or a
/// switch's port 0 — whose NodeInfo says LocalPortNum 0, as one read
/// through port 0 would (the SM read it through whichever port it came in
/// by; OpenSM answers the same).
pub fn node_records(s: &Subnet, f: &mut dyn FnMut(NodeRecord)) {
    for (_, n) in live(s) {
        let mut info = n.info;
        if n.is_switch() {
            info.local_port_num = 0;
        }
        f(NodeRecord {
            lid: lid_of(n),
            node_info: info,
            node_description: n.description.unwrap_or_default(),
        });
    }
}

/// One PortInfoRecord per port the SM read: every port of a switch (0
/// included), a CA's port.
pub fn port_info_records(s: &Subnet, f: &mut dyn FnMut(PortInfoRecord)) {
    for (_, n) in live(s) {
        for (p, port) in n.ports.iter().enumerate() {
            if let Some(pi) = port.info {
                f(PortInfoRecord {
                    endport_lid: lid_of(n),
                    port_num: p as u8,
                    options: 0,
                    port_info: pi,
                });
            }
        }
    }
}

/// One LinkRecord per cable and direction between live nodes.
pub fn link_records(s: &Subnet, f: &mut dyn FnMut(LinkRecord)) {
    for (id, n) in live(s) {
        for (p, _) in n.ports.iter().enumerate().skip(1) {
            if let Some((peer, pp)) = s.peer(id, p as u8) {
                let Some(m) = s.node(peer).filter(|m| m.alive && m.lid != 0) else {
                    continue;
                };
                f(LinkRecord {
                    from_lid: lid_of(n),
                    from_port_num: p as u8,
                    to_port_num: pp,
                    to_lid: lid_of(m),
                });
            }
        }
    }
}

/// One SwitchInfoRecord per live switch the SM read SwitchInfo from.
pub fn switch_info_records(s: &Subnet, f: &mut dyn FnMut(SwitchInfoRecord)) {
    for (_, n) in live(s) {
        if n.info.node_type != NodeType::Switch {
            continue;
        }
        if let Some(si) = n.switch_info {
            f(SwitchInfoRecord {
                lid: lid_of(n),
                switch_info: si,
            });
        }
    }
}

/// CapabilityMask bits of the SA's ClassPortInfo (IBA 15.2.1.1, table
/// 190) this SA honours.
pub mod cap {
    /// IsSubnGetSetNoticeSupported: Set(InformInfo) and Reports.
    pub const GET_SET_NOTICE: u16 = 1 << 1;
    /// IsUDMulticastSupported: MCMemberRecord joins.
    pub const UD_MULTICAST: u16 = 1 << 9;
    /// IsMultiPathSupported: GetMulti(MultiPathRecord).
    pub const MULTIPATH: u16 = 1 << 10;
    /// IsPortInfoCapMaskMatchSupported: a PortInfoRecord query with bit
    /// 31 of its attribute modifier set matches CapabilityMask(2) bitwise.
    pub const PORT_INFO_CAP_MASK_MATCH: u16 = 1 << 13;
    /// CapabilityMask2 IsSendOnlyFullMemberSupported: a send-only full
    /// member joins (and creates) groups.
    pub const SEND_ONLY_FULL_MEMBER_2: u32 = 1 << 12;
    /// CapabilityMask2 IsMcastTopSupported: the SM sets switches'
    /// MulticastFDBTop.
    pub const MCAST_TOP_2: u32 = 1 << 3;
}

/// The QP1 Q_Key (IBA 3.5.3).
const QP1_QKEY: u32 = 0x8001_0000;

/// The SA's ClassPortInfo: base version 1, class version 2, the
/// capabilities it has ([`cap`]; multicast unless `cfg` disables it,
/// IsMcastTopSupported unless it turns `use_mfttop` off), the response time of `cfg`, and no
/// redirection: QP 1 with its Q_Key, as OpenSM says it (a client that
/// follows the redirect fields stays where it is).
pub fn class_port_info(cfg: &SaConfig) -> [u8; 72] {
    let multicast = if cfg.disable_multicast {
        0
    } else {
        cap::UD_MULTICAST
    };
    let cpi = ClassPortInfo {
        base_version: 1,
        class_version: mad_core::sa::SA_CLASS_VERSION,
        capability_mask: cap::GET_SET_NOTICE
            | multicast
            | cap::MULTIPATH
            | cap::PORT_INFO_CAP_MASK_MATCH,
        capability_mask2: cap::SEND_ONLY_FULL_MEMBER_2
            | if cfg.use_mfttop { cap::MCAST_TOP_2 } else { 0 },
        resp_time_value: cfg.resp_time_value & 0x1F,
        redirect_qp: 1,
        redirect_qkey: QP1_QKEY,
        trap_qkey: QP1_QKEY,
        ..ClassPortInfo::default()
    };
    cpi.to_bytes().unwrap_or([0; 72])
}

/// One LinearForwardingTableRecord per block of each live switch, up to
/// the block of the highest LID, as the SM installed it (unrouted entries
/// 255).
pub fn lft_records(s: &Subnet, f: &mut dyn FnMut(LinearForwardingTableRecord)) {
    let top = s.max_lid().0;
    for (_, id) in s.switch_nodes() {
        let Some(n) = s.node(id).filter(|n| n.alive && n.lid != 0) else {
            continue;
        };
        for block in 0..=top / 64 {
            let mut port = [0xFFu8; 64];
            for (i, p) in port.iter_mut().enumerate() {
                let lid = block * 64 + i as u16;
                if lid <= top {
                    *p = s.installed_port(id, Lid(lid));
                }
            }
            f(LinearForwardingTableRecord {
                lid: lid_of(n),
                block_num: block,
                lft: LinearForwardingTable { port },
            });
        }
    }
}

/// The MFT blocks the SM has written: for each switch, each block of 32
/// MLIDs that holds an entry, and each position (16 ports) the switch
/// has, the block's port masks there — as the switch holds them.
pub fn mft_records(s: &Subnet, f: &mut dyn FnMut(MulticastForwardingTableRecord)) {
    use alloc::collections::BTreeMap;
    let mut blocks: BTreeMap<(NodeId, u16), [[u16; 16]; 32]> = BTreeMap::new();
    for (node, mlid, mask) in s.mft_entries() {
        let i = usize::from(mlid.0 - Lid::MULTICAST_MIN.0);
        blocks
            .entry((node, (i / 32) as u16))
            .or_insert([[0; 16]; 32])[i % 32] = mask;
    }
    for ((id, block), entries) in blocks {
        let Some(n) = s.node(id).filter(|n| n.alive && n.lid != 0) else {
            continue;
        };
        for position in 0..16u8 {
            if usize::from(position) * 16 >= n.ports.len() {
                break;
            }
            let mut mft = MulticastForwardingTable::default();
            for (e, m) in mft.port_mask.iter_mut().zip(&entries) {
                *e = m[usize::from(position)];
            }
            f(MulticastForwardingTableRecord {
                lid: lid_of(n),
                position,
                block_num: block,
                mft,
            });
        }
    }
}

/// P_KeyTableRecords: every block of each end port's table, and of each
/// switch port cabled to a CA that the SM gave one. Without partitions
/// the SM leaves tables as the ports came up (ibsim's and real HCAs' hold
/// 0xFFFF at index 0): one block 0 holding it.
pub fn pkey_table_records(s: &Subnet, f: &mut dyn FnMut(PKeyTableRecord)) {
    let default = [0xFFFFu16];
    let mut emit = |lid: Lid, port_num: u8, table: &[u16]| {
        for (b, chunk) in table.chunks(32).enumerate() {
            let mut p_keys = [mad_core::PKey(0); 32];
            for (slot, &k) in p_keys.iter_mut().zip(chunk) {
                *slot = mad_core::PKey(k);
            }
            f(PKeyTableRecord {
                lid,
                block_num: b as u16,
                port_num,
                p_key_table: PKeyTable { p_keys },
            });
        }
    };
    for e in every_end(s) {
        let Some(n) = s.node(e.node) else { continue };
        let (node, port) = crate::path::end_port(s, &e);
        // A VM's record is its VF's table.
        emit(
            e.lid,
            port,
            crate::path::end_table(s, &e).unwrap_or(&default),
        );
        if n.is_switch() {
            for p in 1..n.ports.len() {
                if let Some(t) = s.pkey_table(node, p as u8) {
                    emit(e.lid, p as u8, t);
                }
            }
        }
    }
}

/// SLtoVLMappingTableRecords: every SL-to-VL table the SM wrote under a
/// QoS policy or read for the SA, as the port answered (a switch's by
/// input and output port; an end port's with both 0, the port numbers
/// being for switches only, as OpenSM's SA gives them). Without QoS the
/// SM knows only the tables it read.
pub fn sl2vl_records(s: &Subnet, f: &mut dyn FnMut(SlToVlMappingTableRecord)) {
    for (node, input, output, vl) in s.sl2vl_tables() {
        let Some(n) = s.node(node).filter(|n| n.alive && n.lid != 0) else {
            continue;
        };
        let (input, output) = if n.is_switch() {
            (input, output)
        } else {
            (0, 0)
        };
        f(SlToVlMappingTableRecord {
            lid: lid_of(n),
            input_port_num: input,
            output_port_num: output,
            sl_to_vl: SlToVlMappingTable { vl },
        });
    }
}

/// VLArbitrationTableRecords (blocks 1–4: low 0–31, low 32–63, high
/// 0–31, high 32–63): every block the SM wrote under a QoS policy or read
/// for the SA, as the port answered, and every block past a port's
/// VLArbitrationLowCap / HighCap, which holds no entry (32 entries of
/// weight 0, which the arbiter skips) and is not read: a port refuses a
/// Get of it.
pub fn vlarb_records(s: &Subnet, f: &mut dyn FnMut(VlArbitrationTableRecord)) {
    for (id, n) in live(s) {
        let ports = if n.is_switch() {
            0..=n.ports.len().saturating_sub(1) as u8
        } else {
            let p = n.info.local_port_num;
            p..=p
        };
        for port in ports {
            for block in 1..=4u8 {
                let entries = match s.vlarb_block(id, port, block) {
                    Some(e) => e,
                    None if past_caps(s, id, port, block) => Default::default(),
                    None => continue,
                };
                let mut t = VlArbitrationTable::default();
                for (slot, e) in t.entries.iter_mut().zip(entries.iter()) {
                    *slot = VlArbEntry {
                        vl: e.vl,
                        weight: e.weight,
                    };
                }
                f(VlArbitrationTableRecord {
                    lid: lid_of(n),
                    output_port_num: port,
                    block_num: block,
                    vl_arbitration: t,
                });
            }
        }
    }
}

/// True when VL arbitration `block` (1–4) of `port` of `node` lies past
/// the port's VLArbitrationLowCap or HighCap as the SM last read its
/// PortInfo: it has no entry. False where the PortInfo was not read.
pub fn past_caps(s: &Subnet, node: NodeId, port: u8, block: u8) -> bool {
    let Some(pi) = s
        .node(node)
        .and_then(|n| n.ports.get(usize::from(port)))
        .and_then(|p| p.info.as_ref())
    else {
        return false;
    };
    let cap = if block <= 2 {
        pi.vl_arbitration_low_cap
    } else {
        pi.vl_arbitration_high_cap
    };
    // Blocks 1 and 3 hold entries 0–31, blocks 2 and 4 entries 32–63.
    let first = if block % 2 == 1 { 0 } else { 32 };
    cap <= first
}

/// Component bits of the two QoS records (IBA 15.2.5.4, 15.2.5.9): LID,
/// then the ports (SLtoVL: input, output; VLArb: output), then VLArb's
/// block.
mod qos_comp {
    pub const LID: u64 = 1;
    pub const SL2VL_IN: u64 = 1 << 1;
    pub const SL2VL_OUT: u64 = 1 << 2;
    pub const VLARB_PORT: u64 = 1 << 1;
    pub const VLARB_BLOCK: u64 = 1 << 2;
}

/// The mask a SLtoVLMappingTableRecord or VLArbitrationTableRecord query
/// is matched with: where its LID names an end port, the port numbers it
/// gives are not compared. An end port has one table of each, and
/// requesters name it with port 0 (osmtest does), as OpenSM's SA takes it.
pub fn qos_record_mask(s: &Subnet, vlarb: bool, data: &[u8], mask: u64) -> u64 {
    if mask & qos_comp::LID == 0 || data.len() < 4 {
        return mask;
    }
    let lid = Lid(u16::from_be_bytes([data[0], data[1]]));
    match s.by_lid(lid).and_then(|(id, _)| s.node(id)) {
        Some(n) if !n.is_switch() => {
            let ports = if vlarb {
                qos_comp::VLARB_PORT
            } else {
                qos_comp::SL2VL_IN | qos_comp::SL2VL_OUT
            };
            mask & !ports
        }
        _ => mask,
    }
}

/// The tables a SLtoVLMappingTableRecord (`vlarb` false) or
/// VLArbitrationTableRecord query names, at most `max`: only a query
/// whose mask gives a LID names any (a whole-subnet table is answered
/// from what the SM holds), and none when it names more than `max` (a
/// switch's every SL-to-VL table, say). VL arbitration blocks past a
/// port's caps are left out: they hold nothing and are not read.
pub fn qos_tables_named(
    s: &Subnet,
    vlarb: bool,
    data: &[u8],
    mask: u64,
    max: usize,
) -> Vec<smi::sm::qos::QosTable> {
    use smi::sm::qos::QosTable;
    let mut out = Vec::new();
    if mask & qos_comp::LID == 0 || data.len() < 4 {
        return out;
    }
    let lid = Lid(u16::from_be_bytes([data[0], data[1]]));
    let Some((id, n)) = s.by_lid(lid).and_then(|(id, _)| Some((id, s.node(id)?))) else {
        return out;
    };
    let last = n.ports.len().saturating_sub(1) as u8;
    let one_or_all = |bit: u64, at: usize, all: core::ops::RangeInclusive<u8>| {
        if mask & bit != 0 {
            data[at]..=data[at]
        } else {
            all
        }
    };
    let mut push = |t: QosTable| {
        out.push(t);
        out.len() <= max
    };
    if vlarb {
        let ports = if n.is_switch() {
            one_or_all(qos_comp::VLARB_PORT, 2, 0..=last)
        } else {
            let p = n.info.local_port_num;
            p..=p
        };
        for port in ports.filter(|&p| p <= last) {
            for block in one_or_all(qos_comp::VLARB_BLOCK, 3, 1..=4).filter(|b| (1..=4).contains(b))
            {
                if !past_caps(s, id, port, block)
                    && !push(QosTable::VlArb {
                        node: id,
                        port,
                        block,
                    })
                {
                    return Vec::new();
                }
            }
        }
    } else if n.is_switch() {
        for output in one_or_all(qos_comp::SL2VL_OUT, 3, 0..=last).filter(|&p| p <= last) {
            for input in one_or_all(qos_comp::SL2VL_IN, 2, 0..=last).filter(|&p| p <= last) {
                if !push(QosTable::SlToVl {
                    node: id,
                    input,
                    output,
                }) {
                    return Vec::new();
                }
            }
        }
    } else {
        push(QosTable::SlToVl {
            node: id,
            input: 0,
            output: n.info.local_port_num,
        });
    }
    out
}

/// SMInfoRecords: the SM's own (see [`sm_info_record`]), then every
/// other SM it has found, at the LID of its port, with the priority,
/// state and ActCount of its SMInfo as last read and no SM_Key (as
/// OpenSM lists its remote SMs).
pub fn sm_info_records(
    s: &Subnet,
    cfg: &SaConfig,
    trusted: bool,
    act_count: u32,
    f: &mut dyn FnMut(SmInfoRecord),
) {
    f(sm_info_record(s, cfg, trusted, act_count));
    for o in s.other_sms() {
        let Some(n) = s.node(o.node) else { continue };
        f(SmInfoRecord {
            lid: lid_of(n),
            sm_info: SmInfo {
                guid: mad_core::Guid(o.guid),
                sm_key: mad_core::MKey(0),
                act_count: o.act_count,
                priority: o.priority & 0xF,
                sm_state: o.state,
            },
        });
    }
}

/// The SM's own SMInfoRecord: the master, at the LID of its port.
pub fn sm_info_record(s: &Subnet, cfg: &SaConfig, trusted: bool, act_count: u32) -> SmInfoRecord {
    let me = s.node(NodeId(0));
    SmInfoRecord {
        lid: me.map_or(Lid(0), lid_of),
        sm_info: SmInfo {
            guid: me.map_or(mad_core::Guid(0), |n| n.info.port_guid),
            sm_key: mad_core::MKey(if trusted { cfg.sm_info_key } else { 0 }),
            act_count,
            priority: cfg.sm_priority & 0xF,
            sm_state: SmState::Master,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::Records;

    /// IsUDMulticastSupported (CapabilityMask bit 9) is said unless
    /// multicast is disabled, as OpenSM says it.
    #[test]
    fn class_port_info_says_multicast_unless_disabled() {
        use mad_core::sa::ClassPortInfo;
        let cap = |disable_multicast| {
            let cfg = crate::SaConfig {
                disable_multicast,
                ..crate::SaConfig::default()
            };
            ClassPortInfo::decode(&super::class_port_info(&cfg))
                .unwrap()
                .capability_mask
        };
        assert_eq!(super::cap::UD_MULTICAST, 1 << 9);
        assert_ne!(cap(false) & super::cap::UD_MULTICAST, 0);
        assert_eq!(cap(true), cap(false) & !super::cap::UD_MULTICAST);
    }

    /// Records sit at a stride of a multiple of 8, their padding zero; a
    /// record its writer turns down leaves nothing behind.
    #[test]
    fn records_are_laid_out_as_a_table_carries_them() {
        let mut r = Records::new(12); // stride 16
        assert!(r.is_empty());
        assert!(r.push_with(|b| {
            b.fill(0xAA);
            true
        }));
        assert!(!r.push_with(|b| {
            b.fill(0xEE);
            false
        }));
        assert!(r.push_with(|b| {
            b[0] = 1;
            true
        }));
        assert_eq!(r.len(), 2);
        assert_eq!(r.get(0), Some(&[0xAA; 12][..]));
        assert_eq!(r.get(1).map(|b| (b[0], b.len())), Some((1, 12)));
        assert_eq!(r.get(2), None);
        assert_eq!(r.iter().count(), 2);
        let (data, stride) = r.clone().into_table();
        assert_eq!((data.len(), stride), (32, 16));
        assert_eq!(&data[12..16], &[0; 4], "padding");
        assert!(!data.contains(&0xEE));
        r.pop();
        assert_eq!(r.len(), 1);
        // From whole vectors: cut or padded to the size.
        let v = Records::from_vecs(4, &[vec![1, 2, 3, 4, 5], vec![9]]);
        let got: Vec<&[u8]> = v.iter().collect();
        assert_eq!(got, [&[1, 2, 3, 4][..], &[9, 0, 0, 0][..]]);
        assert_eq!(v.into_table().1, 8);
    }
}
