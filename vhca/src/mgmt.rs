//! Management virtualization. Guests never get QP 0, and their QP 1 (GSI)
//! traffic is served by the backend at API level: a guest hands the
//! backend a MAD, the backend checks that its class and method are allowed,
//! stamps it with a transaction ID the guest cannot forge (the domain in
//! the upper half, as Linux mlx4's SR-IOV paravirtualisation does), has it
//! answered, demultiplexes the reply by that ID, restores the guest's own
//! ID and hands it back. The subnet administrator answered here ([`Sa`])
//! serves PathRecord and NodeRecord from records the integrator supplies
//! (from its SM's view): each guest sees its own LID and GUIDs — its VF's
//! when the SM runs vSwitch.
//!
//! An integrator can send the guests' queries to the subnet's own SA
//! instead ([`SaService`]; `vhca::traffic` does, to the `sa` crate over its
//! SM's subnet). The SA MADs and records are mad-core's
//! ([`mad_core::sa`]): this module keeps no codec of its own. A GetTable answer holds what fits in one MAD
//! (no RMPP segmentation).

use crate::proto::Refusal;
use mad_core::attr::{NodeDescription, NodeInfo, NodeType};
use mad_core::field::Text;
use mad_core::mad::Method;
use mad_core::sa::path::selector;
use mad_core::sa::{NodeRecord, PathRecord, SaAttributeId, SaMad, SaStatus};
use mad_core::types::{Gid, Guid, Lid, PKey};
use std::collections::HashMap;

/// Bytes of a MAD.
pub const MAD_LEN: usize = mad_core::MAD_SIZE;
/// Where SA data starts.
pub const SA_DATA: usize = mad_core::sa::SA_DATA_OFFSET;
/// Bytes of SA data in one MAD.
pub const SA_DATA_LEN: usize = mad_core::sa::SA_DATA_SIZE;
/// The SA class.
pub const CLASS_SA: u8 = 0x03;
/// SubnGet / SubnAdmGet.
pub const GET: u8 = 0x01;
/// SubnAdmGetTable.
pub const GET_TABLE: u8 = 0x12;
/// NodeRecord.
pub const NODE_RECORD: u16 = 0x0011;
/// PathRecord.
pub const PATH_RECORD: u16 = 0x0035;
/// PathRecord component: DGID.
pub const PR_DGID: u64 = 1 << 2;
/// PathRecord component: SGID.
pub const PR_SGID: u64 = 1 << 3;
/// PathRecord component: DLID.
pub const PR_DLID: u64 = 1 << 4;
/// PathRecord component: SLID.
pub const PR_SLID: u64 = 1 << 5;
/// NodeRecord component: LID.
pub const NR_LID: u64 = 1 << 0;
/// SA status: no records (class-specific code 3, bits 15..8).
pub const ERR_NO_RECORDS: u16 = 0x0300;
/// MAD status: unsupported method/attribute combination.
pub const ERR_METHOD_ATTR: u16 = 0x000C;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Whether a guest may send `mad` on QP 1: SA Get and GetTable of
/// PathRecord and NodeRecord. Subnet management classes and anything else
/// are refused.
pub fn allowed(mad: &[u8; MAD_LEN]) -> Result<(), Refusal> {
    if mad[0] != 1 {
        return Err(Refusal::Malformed);
    }
    let (class, method, attr) = (mad[1], mad[3], be16(mad, 16));
    match (class, method) {
        (CLASS_SA, GET | GET_TABLE) if matches!(attr, PATH_RECORD | NODE_RECORD) => Ok(()),
        _ => Err(Refusal::Forbidden),
    }
}

/// Who sent a MAD: filled in by the backend, never by the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestId {
    /// The domain.
    pub dom: u32,
    /// Its port's LID.
    pub lid: u16,
    /// Its port GUID (its VF's, under vSwitch).
    pub port_guid: u64,
}

/// Most MADs one domain may have outstanding.
pub const MAX_OUTSTANDING: usize = 64;

/// Transaction-ID stamping and reply demultiplexing.
#[derive(Debug, Default)]
pub struct Stamper {
    next: u32,
    /// Stamped ID → (domain, the guest's own ID).
    out: HashMap<u64, (u32, u64)>,
}

impl Stamper {
    /// Replaces `mad`'s transaction ID by one naming `who.dom` and a
    /// counter of the backend's, remembering the guest's own.
    pub fn stamp(&mut self, who: &GuestId, mad: &mut [u8; MAD_LEN]) -> Result<(), Refusal> {
        let mine = self.out.values().filter(|(d, _)| *d == who.dom).count();
        if mine >= MAX_OUTSTANDING {
            return Err(Refusal::Limit);
        }
        self.next = self.next.wrapping_add(1);
        let tid = u64::from(who.dom) << 32 | u64::from(self.next);
        let guest = be64(mad, 8);
        mad[8..16].copy_from_slice(&tid.to_be_bytes());
        self.out.insert(tid, (who.dom, guest));
        Ok(())
    }

    /// The domain a reply belongs to, its transaction ID restored to the
    /// guest's; `None` (drop it) when no request of that ID is outstanding.
    pub fn demux(&mut self, reply: &mut [u8; MAD_LEN]) -> Option<u32> {
        let (dom, guest) = self.out.remove(&be64(reply, 8))?;
        reply[8..16].copy_from_slice(&guest.to_be_bytes());
        Some(dom)
    }

    /// Forgets a domain's outstanding requests (it is gone).
    pub fn forget_domain(&mut self, dom: u32) {
        self.out.retain(|_, (d, _)| *d != dom);
    }

    /// Requests outstanding.
    pub fn outstanding(&self) -> usize {
        self.out.len()
    }
}

/// One endpoint port the SA knows: a CA port, or a VM's VF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaRecord {
    /// LID.
    pub lid: u16,
    /// Port GUID (vGUID for a VF).
    pub port_guid: u64,
    /// Node GUID.
    pub node_guid: u64,
    /// Subnet prefix of its GID.
    pub subnet_prefix: u64,
    /// Node type (1: CA).
    pub node_type: u8,
}

impl SaRecord {
    fn gid(&self) -> Gid {
        Gid::new(self.subnet_prefix, Guid(self.port_guid))
    }
}

/// A subnet administrator answering from records.
#[derive(Clone, Debug, Default)]
pub struct Sa {
    /// What it knows.
    pub records: Vec<SaRecord>,
}

/// What answers the guests' SA queries for a backend, once the backend
/// has checked ([`allowed`]) and stamped them: [`Sa`]'s records, or the
/// subnet's own SA, which an integrator reaches through this.
pub trait SaService: Send {
    /// The answer to `req` from the guest `who`: a response MAD with the
    /// request's transaction ID (its status says a refusal).
    fn answer(&mut self, who: &GuestId, req: &[u8; MAD_LEN]) -> [u8; MAD_LEN];
}

impl SaService for Sa {
    fn answer(&mut self, who: &GuestId, req: &[u8; MAD_LEN]) -> [u8; MAD_LEN] {
        Sa::answer(self, who, req)
    }
}

/// PathRecord bytes.
pub const PATH_RECORD_LEN: usize = PathRecord::SIZE;
/// NodeRecord bytes (LID, reserved, NodeInfo, NodeDescription).
pub const NODE_RECORD_LEN: usize = NodeRecord::SIZE;

impl Sa {
    fn by_gid(&self, g: Gid) -> Option<&SaRecord> {
        self.records.iter().find(|r| r.gid() == g)
    }

    fn by_lid(&self, lid: u16) -> Option<&SaRecord> {
        self.records.iter().find(|r| r.lid == lid)
    }

    /// The PathRecord from `s` to `d`: reversible, the default P_Key,
    /// exactly 2048 bytes, 40 Gb/s and 4.096 µs × 2^18 (about 1 s).
    pub fn path(s: &SaRecord, d: &SaRecord) -> [u8; PATH_RECORD_LEN] {
        let pr = PathRecord {
            dgid: d.gid(),
            sgid: s.gid(),
            dlid: Lid(d.lid),
            slid: Lid(s.lid),
            reversible: true,
            numb_path: 1,
            pkey: PKey(0xFFFF),
            mtu_selector: selector::EXACTLY,
            mtu: 4,
            rate_selector: selector::EXACTLY,
            rate: 7,
            packet_life_time_selector: selector::EXACTLY,
            packet_life_time: 18,
            ..PathRecord::default()
        };
        pr.to_bytes().unwrap_or([0; PATH_RECORD_LEN])
    }

    /// The NodeRecord of `r`.
    pub fn node(r: &SaRecord) -> [u8; NODE_RECORD_LEN] {
        let nr = NodeRecord {
            lid: Lid(r.lid),
            node_info: NodeInfo {
                base_version: 1,
                class_version: 1,
                node_type: NodeType::from(r.node_type),
                num_ports: 1,
                system_image_guid: Guid(r.node_guid),
                node_guid: Guid(r.node_guid),
                port_guid: Guid(r.port_guid),
                partition_cap: 64,
                local_port_num: 1,
                ..NodeInfo::default()
            },
            node_description: NodeDescription {
                node_string: Text::from_str_lossy(&format!("vhca port {:#06x}", r.lid)),
            },
        };
        nr.to_bytes().unwrap_or([0; NODE_RECORD_LEN])
    }

    /// Answers `req` (already allowed) for the guest `who`: a GetResp or
    /// GetTableResp with the request's transaction ID.
    pub fn answer(&self, who: &GuestId, req: &[u8; MAD_LEN]) -> [u8; MAD_LEN] {
        let Ok(q) = SaMad::parse(req) else {
            let mut r = *req;
            r[3] |= 0x80;
            r[4..6].copy_from_slice(&ERR_METHOD_ATTR.to_be_bytes());
            return r;
        };
        let mut resp = SaMad::request(
            Method::from(q.header.method | 0x80),
            q.attribute_id(),
            q.header.transaction_id.get(),
        );
        resp.header = q.header;
        resp.header.method |= 0x80;
        resp.header.status.set(0);
        let mask = q.sa.component_mask;
        let me = self.by_lid(who.lid).copied().unwrap_or(SaRecord {
            lid: who.lid,
            port_guid: who.port_guid,
            node_guid: who.port_guid,
            subnet_prefix: Gid::DEFAULT_PREFIX,
            node_type: 1,
        });
        let (found, len): (Vec<Vec<u8>>, usize) = match q.attribute_id() {
            SaAttributeId::PathRecord => {
                let want = q.record::<PathRecord>().unwrap_or_default();
                let src = if mask & PR_SGID != 0 {
                    self.by_gid(want.sgid).copied()
                } else if mask & PR_SLID != 0 {
                    self.by_lid(want.slid.0).copied()
                } else {
                    Some(me)
                };
                let dsts: Vec<&SaRecord> = if mask & PR_DGID != 0 {
                    self.by_gid(want.dgid).into_iter().collect()
                } else if mask & PR_DLID != 0 {
                    self.by_lid(want.dlid.0).into_iter().collect()
                } else {
                    self.records.iter().collect()
                };
                let v = match src {
                    Some(s) => dsts.iter().map(|d| Sa::path(&s, d).to_vec()).collect(),
                    None => Vec::new(),
                };
                (v, PATH_RECORD_LEN)
            }
            SaAttributeId::NodeRecord => {
                let lid = q.record::<NodeRecord>().map_or(0, |n| n.lid.0);
                let v = self
                    .records
                    .iter()
                    .filter(|n| mask & NR_LID == 0 || n.lid == lid)
                    .map(|n| Sa::node(n).to_vec())
                    .collect();
                (v, NODE_RECORD_LEN)
            }
            _ => {
                resp.header.status.set(ERR_METHOD_ATTR);
                return resp.to_bytes();
            }
        };
        if found.is_empty() {
            resp.header.status.set(SaStatus::NoRecords.status().0);
            return resp.to_bytes();
        }
        let stride = len.next_multiple_of(8);
        let take = if q.method() == Method::Get {
            1
        } else {
            SA_DATA_LEN / stride
        };
        resp.sa.attribute_offset = (stride / 8) as u16;
        resp.sa.component_mask = mask;
        for (i, rec) in found.iter().take(take).enumerate() {
            let at = i * stride;
            resp.data[at..at + len].copy_from_slice(rec);
        }
        resp.to_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mad_core::sa::SaRecord as _;

    /// The component bits clients spell out are mad-core's.
    #[test]
    fn the_component_bits_are_mad_cores() {
        assert_eq!(PathRecord::component("dgid"), Some(PR_DGID));
        assert_eq!(PathRecord::component("sgid"), Some(PR_SGID));
        assert_eq!(PathRecord::component("dlid"), Some(PR_DLID));
        assert_eq!(PathRecord::component("slid"), Some(PR_SLID));
        assert_eq!(NodeRecord::component("lid"), Some(NR_LID));
        assert_eq!(SaStatus::NoRecords.status().0, ERR_NO_RECORDS);
    }

    fn req(class: u8, method: u8, attr: u16, tid: u64) -> [u8; MAD_LEN] {
        let mut m = [0u8; MAD_LEN];
        m[0] = 1;
        m[1] = class;
        m[2] = 2;
        m[3] = method;
        m[8..16].copy_from_slice(&tid.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m
    }

    fn guest(dom: u32, lid: u16) -> GuestId {
        GuestId {
            dom,
            lid,
            port_guid: u64::from(lid) << 8 | u64::from(lid),
        }
    }

    fn sa() -> Sa {
        let rec = |lid: u16, guid: u64| SaRecord {
            lid,
            port_guid: guid,
            node_guid: guid & !0xFF,
            subnet_prefix: 0xfe80_0000_0000_0000,
            node_type: 1,
        };
        Sa {
            records: vec![
                rec(5, 0x0002_c903_0000_0105),
                rec(6, 0x0002_c903_0000_0206),
                rec(7, 0x77),
            ],
        }
    }

    #[test]
    fn subnet_management_and_other_methods_are_refused() {
        for class in [0x01, 0x81] {
            assert_eq!(
                allowed(&req(class, GET, 0x0015, 1)),
                Err(Refusal::Forbidden)
            );
        }
        assert_eq!(
            allowed(&req(CLASS_SA, 0x02, PATH_RECORD, 1)),
            Err(Refusal::Forbidden)
        );
        assert_eq!(
            allowed(&req(CLASS_SA, GET, 0x0031, 1)),
            Err(Refusal::Forbidden)
        );
        assert_eq!(
            allowed(&req(CLASS_SA, 0x81, PATH_RECORD, 1)),
            Err(Refusal::Forbidden)
        );
        let mut bad = req(CLASS_SA, GET, PATH_RECORD, 1);
        bad[0] = 2;
        assert_eq!(allowed(&bad), Err(Refusal::Malformed));
        assert_eq!(allowed(&req(CLASS_SA, GET_TABLE, NODE_RECORD, 1)), Ok(()));
        assert_eq!(
            allowed(&req(0x04, GET, 0x0012, 1)),
            Err(Refusal::Forbidden),
            "PerfMgt"
        );
    }

    #[test]
    fn two_guests_with_the_same_tid_get_their_own_replies() {
        let mut s = Stamper::default();
        let (a, b) = (guest(1, 5), guest(2, 6));
        let (mut ma, mut mb) = (
            req(CLASS_SA, GET, PATH_RECORD, 42),
            req(CLASS_SA, GET, PATH_RECORD, 42),
        );
        s.stamp(&a, &mut ma).unwrap();
        s.stamp(&b, &mut mb).unwrap();
        assert_ne!(be64(&ma, 8), be64(&mb, 8));
        assert_ne!(be64(&ma, 8), 42);
        // Replies come back in the other order.
        let (mut ra, mut rb) = (ma, mb);
        assert_eq!(s.demux(&mut rb), Some(2));
        assert_eq!(s.demux(&mut ra), Some(1));
        assert_eq!((be64(&ra, 8), be64(&rb, 8)), (42, 42));
        // A reply to nothing outstanding — replayed or forged — is dropped.
        assert_eq!(s.demux(&mut ra.clone()), None);
        let mut forged = req(CLASS_SA, 0x81, PATH_RECORD, 1 << 32 | 7);
        assert_eq!(s.demux(&mut forged), None);
    }

    #[test]
    fn outstanding_requests_are_bounded_and_forgotten_with_the_domain() {
        let mut s = Stamper::default();
        let (a, b) = (guest(1, 5), guest(2, 6));
        for i in 0..MAX_OUTSTANDING {
            s.stamp(&a, &mut req(CLASS_SA, GET, PATH_RECORD, i as u64))
                .unwrap();
        }
        assert_eq!(
            s.stamp(&a, &mut req(CLASS_SA, GET, PATH_RECORD, 0)),
            Err(Refusal::Limit)
        );
        // The other domain is not held back by it.
        s.stamp(&b, &mut req(CLASS_SA, GET, PATH_RECORD, 0))
            .unwrap();
        s.forget_domain(1);
        assert_eq!(s.outstanding(), 1);
    }

    #[test]
    fn path_record_by_dlid_at_the_spec_offsets() {
        let who = GuestId {
            dom: 1,
            lid: 5,
            port_guid: 0x0002_c903_0000_0105,
        };
        let mut q = req(CLASS_SA, GET, PATH_RECORD, 9);
        q[48..56].copy_from_slice(&PR_DLID.to_be_bytes());
        q[SA_DATA + 40..SA_DATA + 42].copy_from_slice(&6u16.to_be_bytes());
        let r = sa().answer(&who, &q);
        assert_eq!(r[3], 0x81, "GetResp");
        assert_eq!(be16(&r, 4), 0, "status");
        assert_eq!(be64(&r, 8), 9, "TID echoed");
        let p = &r[SA_DATA..SA_DATA + 64];
        // DGID: fe80::0002:c903:0000:0206; SGID: the requester's.
        assert_eq!(p[8..16], [0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        assert_eq!(p[16..24], [0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x02, 0x06]);
        assert_eq!(p[32..40], [0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x01, 0x05]);
        assert_eq!(p[40..44], [0, 6, 0, 5], "DLID, SLID");
        assert_eq!(p[50..52], [0xff, 0xff], "P_Key");
        assert_eq!(p[49] & 0x80, 0x80, "reversible");
    }

    #[test]
    fn node_record_table_and_no_records() {
        let who = GuestId {
            dom: 1,
            lid: 5,
            port_guid: 0x105,
        };
        let r = sa().answer(&who, &req(CLASS_SA, GET_TABLE, NODE_RECORD, 3));
        assert_eq!(r[3], 0x92, "GetTableResp");
        // 108-byte records padded to 112: AttributeOffset 14 words; one fits
        // in 200 bytes.
        assert_eq!(be16(&r, 44), 14);
        assert_eq!(be16(&r, SA_DATA), 5, "first record's LID");
        // NodeInfo.PortGUID of LID 5 at 4 + 20.
        assert_eq!(be64(&r, SA_DATA + 24), 0x0002_c903_0000_0105);
        let mut q = req(CLASS_SA, GET, NODE_RECORD, 4);
        q[48..56].copy_from_slice(&NR_LID.to_be_bytes());
        q[SA_DATA..SA_DATA + 2].copy_from_slice(&99u16.to_be_bytes());
        assert_eq!(be16(&sa().answer(&who, &q), 4), ERR_NO_RECORDS);
        // Unsupported attribute (allowed() would have refused it first).
        assert_eq!(
            be16(&sa().answer(&who, &req(CLASS_SA, GET, 0x0031, 1)), 4),
            ERR_METHOD_ATTR
        );
    }

    #[test]
    fn garbage_never_panics() {
        let who = GuestId {
            dom: 1,
            lid: 5,
            port_guid: 0x105,
        };
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..2000 {
            let mut m = [0u8; MAD_LEN];
            for b in m.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            let _ = allowed(&m);
            let _ = sa().answer(&who, &m);
            let mut s = Stamper::default();
            let _ = s.stamp(&who, &mut m);
            let _ = s.demux(&mut m);
        }
    }
}
