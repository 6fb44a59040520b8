//! Sample MADs built with mad-core's constructors: what an SM and the
//! agents it talks to exchange during a sweep. `ibkit sample` prints them
//! as input for `ibkit decode`, and tests decode them.

use mad_core::attr::*;
use mad_core::notice::{Notice, NoticeType, ProducerType, Trap128, TrapDetails};
use mad_core::sa::{PathRecord, SaAttributeId, SaMad, SaRecord};
use mad_core::types::Gid;
use mad_core::types::{Guid, Lid, MKey};
use mad_core::{DrPath, Method, Smp};

fn with<A: Attribute>(mut s: Smp, a: &A) -> Smp {
    a.encode(&mut s.data).expect("sample attribute encodes");
    s
}

/// The sample MADs with a one-line description each.
pub fn samples() -> Vec<(&'static str, [u8; 256])> {
    let path = DrPath::from_ports(&[1, 3]).expect("two hops");
    let mut v = Vec::new();

    let req = Smp::directed(
        &path,
        Method::Get,
        AttributeId::NodeInfo,
        0,
        0x0000_0001_0000_0001,
        MKey(0),
    );
    v.push((
        "SM: directed-route Get(NodeInfo) two hops out, along ports 1, 3",
        *req.as_wire(),
    ));

    let ni = NodeInfo {
        base_version: 1,
        class_version: 1,
        node_type: NodeType::Switch,
        num_ports: 36,
        system_image_guid: Guid(0x0002_c903_00a1_b200),
        node_guid: Guid(0x0002_c903_00a1_b200),
        port_guid: Guid(0x0002_c903_00a1_b200),
        partition_cap: 8,
        device_id: 0xc738,
        revision: 0xa0,
        local_port_num: 17,
        vendor_id: 0x0002c9,
    };
    let mut resp = with(req.clone(), &ni);
    resp.header.method = Method::GetResp.into();
    resp.set_direction(true);
    resp.set_hop_pointer(2);
    resp.return_path[1] = 17;
    resp.return_path[2] = 5;
    v.push((
        "Switch SMA: GetResp(NodeInfo), a 36-port switch, D bit set",
        *resp.as_wire(),
    ));

    let pi = PortInfo {
        lid: Lid(0x12),
        master_sm_lid: Lid(1),
        port_state: PortState::NoChange,
        port_physical_state: PortPhysicalState::NoChange,
        link_width_enabled: LinkWidth::W4X,
        m_key_lease_period: 15,
        m_key_protect_bits: 1,
        neighbor_mtu: Mtu::Mtu4096,
        operational_vls: VlCap::Vl0To7,
        subnet_time_out: 18,
        client_reregister: true,
        ..Default::default()
    };
    let set = with(
        Smp::lid_routed(
            Method::Set,
            AttributeId::PortInfo,
            1,
            0x0000_0001_0000_0002,
            MKey(0),
        ),
        &pi,
    );
    v.push((
        "SM: LID-routed Set(PortInfo) on port 1: LID 0x12, SM LID 1, M_Key protect 1",
        *set.as_wire(),
    ));

    let mut lft = LinearForwardingTable::dropping();
    for (i, p) in lft.port.iter_mut().enumerate().skip(1).take(20) {
        *p = (i % 36) as u8 + 1;
    }
    let set_lft = with(
        Smp::directed(
            &path,
            Method::Set,
            AttributeId::LinearForwardingTable,
            0,
            3,
            MKey(0),
        ),
        &lft,
    );
    v.push((
        "SM: directed-route Set(LinearForwardingTable) block 0: LIDs 1-20 routed, rest dropped",
        *set_lft.as_wire(),
    ));

    let notice = Notice::generic(
        NoticeType::Urgent,
        ProducerType::Switch,
        Lid(7),
        &TrapDetails::LinkStateChange(Trap128 { lid: Lid(7) }),
    )
    .expect("trap 128 encodes");
    let trap = with(
        Smp::lid_routed(
            Method::Trap,
            AttributeId::Notice,
            0,
            0x0000_0000_dead_0001,
            MKey(0),
        ),
        &notice,
    );
    v.push((
        "Switch SMA: Trap(Notice) 128, link state change at switch LID 7",
        *trap.as_wire(),
    ));

    // Subnet administration: a host asks the SA for the path to LID 7.
    let mut q = SaMad::request(
        Method::Get,
        SaAttributeId::PathRecord,
        0x0000_0002_0000_0001,
    );
    let want = PathRecord {
        sgid: Gid::new(Gid::DEFAULT_PREFIX, Guid(0x0002_c903_00a1_b201)),
        dlid: Lid(7),
        numb_path: 1,
        ..PathRecord::default()
    };
    q.set_record(&want).expect("PathRecord encodes");
    q.sa.component_mask = ["sgid", "dlid", "numb_path"]
        .iter()
        .filter_map(|c| PathRecord::component(c))
        .fold(0, |m, b| m | b);
    v.push((
        "Host: SubnAdmGet(PathRecord) to DLID 7 from its own GID",
        q.to_bytes(),
    ));
    let mut a = q.clone();
    a.header.method = Method::GetResp.into();
    let got = PathRecord {
        dgid: Gid::new(Gid::DEFAULT_PREFIX, Guid(0x0002_c903_00a1_b207)),
        sgid: want.sgid,
        dlid: Lid(7),
        slid: Lid(1),
        reversible: true,
        numb_path: 0,
        pkey: mad_core::PKey(0xffff),
        sl: 0,
        mtu_selector: 2,
        mtu: 4,
        rate_selector: 2,
        rate: 3,
        packet_life_time_selector: 2,
        packet_life_time: 18,
        ..PathRecord::default()
    };
    a.set_record(&got).expect("PathRecord encodes");
    v.push((
        "SA: SubnAdmGetResp(PathRecord): LID 1 to LID 7, MTU 2048, 10 Gb/s, reversible",
        a.to_bytes(),
    ));
    v
}

/// The samples as a LINKTYPE_INFINIBAND capture, a millisecond apart.
pub fn pcap() -> Vec<u8> {
    use crate::pcap::{frame, write, FrameAddr};
    let frames: Vec<(u64, Vec<u8>)> = samples()
        .iter()
        .enumerate()
        .map(|(i, (_, m))| {
            let dr = m[1] == 0x81;
            let a = FrameAddr {
                dlid: if dr { 0xFFFF } else { 7 },
                slid: if dr { 0xFFFF } else { 1 },
                dest_qp: 0,
                src_qp: 0,
            };
            (i as u64 * 1000, frame(m, a))
        })
        .collect();
    write(&frames)
}
