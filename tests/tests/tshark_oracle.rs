//! Wireshark's InfiniBand dissector (tshark) as a second, independent oracle:
//! random attribute values are encoded by mad-core into SMPs, written as a
//! capture by ibkit's pcap writer, dissected by tshark, and every field
//! tshark names is compared with mad-core's value. Wireshark also covers
//! layouts libibmad lacks: RandomForwardingTable, VendorDiag, LedInfo, and
//! the trap data of traps 128, 144 and 256.

use fabric::pcap::{frame, write_with_linktype, FrameAddr};
use fabric::rng::Rng;
use mad_core::attr::*;
use mad_core::field::{Fields, Value};
use mad_core::notice::{Notice, Trap144, Trap256, TrapDetails};
use mad_core::{MKey, Method, Smp};
use std::collections::HashMap;
use std::process::Command;

/// A user link type mapped to the `infiniband` dissector (tshark 4.0 does not
/// open link type 247 itself).
const USER_DLT: u32 = 147;
const UAT: &str = "uat:user_dlts:\"User 0 (DLT=147)\",\"infiniband\",\"0\",\"\",\"0\",\"\"";

fn scalar(v: &Value<'_>) -> Option<u64> {
    match *v {
        Value::Num { v, .. } | Value::Id64(v) => Some(v),
        Value::Bool(b) => Some(u64::from(b)),
        Value::Enum { raw, .. } | Value::Flags { raw, .. } => Some(raw),
        _ => None,
    }
}

/// Our values by field name; tables are flattened to lists, and table
/// entries that are records to `table.field` lists.
fn flatten(f: &dyn Fields) -> HashMap<String, Vec<u64>> {
    let mut m: HashMap<String, Vec<u64>> = HashMap::new();
    f.visit(&mut |n, v| match v {
        Value::List(l) => {
            for i in 0..l.len() {
                match l.item(i) {
                    Some(Value::Record(r)) => r.visit(&mut |sub, sv| {
                        if let Some(x) = scalar(&sv) {
                            m.entry(format!("{n}.{sub}")).or_default().push(x);
                        }
                    }),
                    Some(x) => m.entry(n.to_string()).or_default().extend(scalar(&x)),
                    None => {}
                }
            }
        }
        other => {
            if let Some(x) = scalar(&other) {
                m.insert(n.to_string(), vec![x]);
            }
        }
    });
    m
}

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn parse_num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap_or_else(|_| panic!("tshark value {s}")),
        None => s.parse().unwrap_or_else(|_| panic!("tshark value {s}")),
    }
}

/// Dissects `smps` with tshark and returns, per packet, the values of `fields`.
fn dissect(smps: &[[u8; 256]], fields: &[&str]) -> Vec<Vec<Vec<u64>>> {
    dissect_on(smps, fields, 0)
}

/// As [`dissect`], the MADs sent to and from QP `qp` (0: SMPs, 1: GSI).
fn dissect_on(smps: &[[u8; 256]], fields: &[&str], qp: u32) -> Vec<Vec<Vec<u64>>> {
    let frames: Vec<(u64, Vec<u8>)> = smps
        .iter()
        .enumerate()
        .map(|(i, m)| {
            (
                i as u64 * 1000,
                frame(
                    m,
                    FrameAddr {
                        dlid: 2,
                        slid: 1,
                        dest_qp: qp,
                        src_qp: qp,
                    },
                ),
            )
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("ibkit-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.pcap", fields[0]));
    std::fs::write(&path, write_with_linktype(&frames, USER_DLT)).unwrap();
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-o", UAT, "-r"]).arg(&path).args([
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<Vec<u64>>> = text
        .lines()
        .map(|l| {
            l.split('|')
                .map(|col| {
                    if col.is_empty() {
                        vec![]
                    } else {
                        col.split(',').map(parse_num).collect()
                    }
                })
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), smps.len(), "tshark saw {} packets", rows.len());
    rows
}

/// Encodes `n` random values of `A` into GetResp SMPs and compares every
/// mapped field with tshark's dissection.
fn compare<A: Attribute>(
    seed: u64,
    n: usize,
    modifier: u32,
    map: &[(&str, &str)],
    fix: impl Fn(&mut A),
) {
    compare_prefix::<A>(seed, n, modifier, map, fix, usize::MAX)
}

/// As [`compare`], comparing at most `max` entries of each table.
fn compare_prefix<A: Attribute>(
    seed: u64,
    n: usize,
    modifier: u32,
    map: &[(&str, &str)],
    fix: impl Fn(&mut A),
    max: usize,
) {
    if !tshark_available() {
        tests::skip("tshark oracle", "tshark not installed (apt install tshark)");
        return;
    }
    let mut rng = Rng::new(seed);
    let mut smps = Vec::new();
    let mut ours = Vec::new();
    for _ in 0..n {
        let mut a = A::decode(&bytes(&mut rng)).unwrap();
        fix(&mut a);
        let mut s = Smp::lid_routed(Method::GetResp, A::ID, modifier, rng.next_u64(), MKey(0));
        a.encode(&mut s.data).unwrap();
        ours.push(flatten(&a));
        smps.push(*s.as_wire());
    }
    let theirs_names: Vec<&str> = map.iter().map(|(_, t)| *t).collect();
    let rows = dissect(&smps, &theirs_names);
    for (i, (row, ours)) in rows.iter().zip(&ours).enumerate() {
        for ((o, t), got) in map.iter().zip(row) {
            let want = ours
                .get(*o)
                .unwrap_or_else(|| panic!("{}: no field {o}", A::NAME));
            let want = &want[..want.len().min(max)];
            assert_eq!(
                got.as_slice(),
                want,
                "{} packet {i}: ours {o} vs tshark {t}",
                A::NAME
            );
        }
    }
}

#[test]
fn node_info_agrees_with_wireshark() {
    compare::<NodeInfo>(
        1,
        40,
        0,
        &[
            ("base_version", "infiniband.nodeinfo.baseversion"),
            ("class_version", "infiniband.nodeinfo.classversion"),
            ("node_type", "infiniband.nodeinfo.nodetype"),
            ("num_ports", "infiniband.nodeinfo.numports"),
            ("system_image_guid", "infiniband.nodeinfo.systemimageguid"),
            ("node_guid", "infiniband.nodeinfo.nodeguid"),
            ("port_guid", "infiniband.nodeinfo.portguid"),
            ("partition_cap", "infiniband.nodeinfo.partitioncap"),
            ("device_id", "infiniband.nodeinfo.deviceid"),
            ("revision", "infiniband.nodeinfo.revision"),
            ("local_port_num", "infiniband.nodeinfo.localportnum"),
            ("vendor_id", "infiniband.nodeinfo.vendorid"),
        ],
        |_| {},
    );
}

#[test]
fn switch_info_agrees_with_wireshark() {
    compare::<SwitchInfo>(
        2,
        40,
        0,
        &[
            ("linear_fdb_cap", "infiniband.switchinfo.linearfdbcap"),
            ("random_fdb_cap", "infiniband.switchinfo.randomfdbcap"),
            ("multicast_fdb_cap", "infiniband.switchinfo.multicastfdbcap"),
            ("linear_fdb_top", "infiniband.switchinfo.linearfdbtop"),
            ("default_port", "infiniband.switchinfo.defaultport"),
            (
                "default_multicast_primary_port",
                "infiniband.switchinfo.defaultmulticastprimaryport",
            ),
            (
                "default_multicast_not_primary_port",
                "infiniband.switchinfo.defaultmulticastnotprimaryport",
            ),
            ("life_time_value", "infiniband.switchinfo.lifetimevalue"),
            ("port_state_change", "infiniband.switchinfo.portstatechange"),
            (
                "optimized_sl_to_vl_mapping_programming",
                "infiniband.switchinfo.optimizedsltovlmappingprogramming",
            ),
            ("lids_per_port", "infiniband.switchinfo.lidsperport"),
            (
                "partition_enforcement_cap",
                "infiniband.switchinfo.partitionenforcementcap",
            ),
            (
                "inbound_enforcement_cap",
                "infiniband.switchinfo.inboundenforcementcap",
            ),
            (
                "outbound_enforcement_cap",
                "infiniband.switchinfo.outboundenforcementcap",
            ),
            (
                "filter_raw_inbound_cap",
                "infiniband.switchinfo.filterrawinboundcap",
            ),
            (
                "filter_raw_outbound_cap",
                "infiniband.switchinfo.filterrawoutboundcap",
            ),
            ("enhanced_port0", "infiniband.switchinfo.enhancedportzero"),
        ],
        |_| {},
    );
}

#[test]
fn port_info_agrees_with_wireshark() {
    compare::<PortInfo>(
        3,
        40,
        1,
        &[
            ("m_key", "infiniband.portinfo.m_key"),
            ("gid_prefix", "infiniband.portinfo.guid"),
            ("lid", "infiniband.portinfo.lid"),
            ("master_sm_lid", "infiniband.portinfo.mastersmlid"),
            ("capability_mask", "infiniband.portinfo.capabilitymask"),
            ("diag_code", "infiniband.portinfo.diagcode"),
            ("m_key_lease_period", "infiniband.portinfo.m_keyleaseperiod"),
            ("local_port_num", "infiniband.portinfo.localportnum"),
            ("link_width_enabled", "infiniband.portinfo.linkwidthenabled"),
            (
                "link_width_supported",
                "infiniband.portinfo.linkwidthsupported",
            ),
            ("link_width_active", "infiniband.portinfo.linkwidthactive"),
            (
                "link_speed_supported",
                "infiniband.portinfo.linkspeedsupported",
            ),
            ("port_state", "infiniband.portinfo.portstate"),
            (
                "port_physical_state",
                "infiniband.portinfo.portphysicalstate",
            ),
            (
                "link_down_default_state",
                "infiniband.portinfo.linkdowndefaultstate",
            ),
            ("m_key_protect_bits", "infiniband.portinfo.m_keyprotectbits"),
            ("lmc", "infiniband.portinfo.lmc"),
            ("link_speed_active", "infiniband.portinfo.linkspeedactive"),
            ("link_speed_enabled", "infiniband.portinfo.linkspeedenabled"),
            ("neighbor_mtu", "infiniband.portinfo.neighbormtu"),
            ("master_sm_sl", "infiniband.portinfo.mastersmsl"),
            ("vl_cap", "infiniband.portinfo.vlcap"),
            ("init_type", "infiniband.portinfo.inittype"),
            ("vl_high_limit", "infiniband.portinfo.vlhighlimit"),
            (
                "vl_arbitration_high_cap",
                "infiniband.portinfo.vlarbitrationhighcap",
            ),
            (
                "vl_arbitration_low_cap",
                "infiniband.portinfo.vlarbitrationlowcap",
            ),
            ("init_type_reply", "infiniband.portinfo.inittypereply"),
            ("mtu_cap", "infiniband.portinfo.mtucap"),
            ("vl_stall_count", "infiniband.portinfo.vlstallcount"),
            ("hoq_life", "infiniband.portinfo.hoqlife"),
            ("operational_vls", "infiniband.portinfo.operationalvls"),
            (
                "partition_enforcement_inbound",
                "infiniband.portinfo.partitionenforcementinbound",
            ),
            (
                "partition_enforcement_outbound",
                "infiniband.portinfo.partitionenforcementoutbound",
            ),
            ("filter_raw_inbound", "infiniband.portinfo.filterrawinbound"),
            (
                "filter_raw_outbound",
                "infiniband.portinfo.filterrawoutbound",
            ),
            ("m_key_violations", "infiniband.portinfo.m_keyviolations"),
            ("p_key_violations", "infiniband.portinfo.p_keyviolations"),
            ("q_key_violations", "infiniband.portinfo.q_keyviolations"),
            ("guid_cap", "infiniband.portinfo.guidcap"),
            ("client_reregister", "infiniband.portinfo.clientreregister"),
            ("subnet_time_out", "infiniband.portinfo.subnettimeout"),
            ("resp_time_value", "infiniband.portinfo.resptimevalue"),
            ("local_phy_errors", "infiniband.portinfo.localphyerrors"),
            ("overrun_errors", "infiniband.portinfo.overrunerrors"),
            ("max_credit_hint", "infiniband.portinfo.maxcredithint"),
            (
                "link_round_trip_latency",
                "infiniband.portinfo.linkroundtriplatency",
            ),
        ],
        |_| {},
    );
}

#[test]
fn sm_info_agrees_with_wireshark() {
    compare::<SmInfo>(
        4,
        40,
        0,
        &[
            ("guid", "infiniband.sminfo.guid"),
            ("sm_key", "infiniband.sminfo.sm_key"),
            ("act_count", "infiniband.sminfo.actcount"),
            ("priority", "infiniband.sminfo.priority"),
            ("sm_state", "infiniband.sminfo.smstate"),
        ],
        |_| {},
    );
}

#[test]
fn forwarding_and_arbitration_tables_agree_with_wireshark() {
    compare::<LinearForwardingTable>(
        5,
        20,
        3,
        &[("port", "infiniband.linearforwardingtable.port")],
        |_| {},
    );
    compare::<RandomForwardingTable>(
        7,
        20,
        0,
        &[
            ("entries.lid", "infiniband.randomforwardingtable.lid"),
            ("entries.valid", "infiniband.randomforwardingtable.valid"),
            ("entries.lmc", "infiniband.randomforwardingtable.lmc"),
            ("entries.port", "infiniband.randomforwardingtable.port"),
        ],
        |_| {},
    );
    compare::<VlArbitrationTable>(
        8,
        20,
        0x0001_0000,
        &[
            ("entries.vl", "infiniband.vlarbitrationtable.vl"),
            ("entries.weight", "infiniband.vlarbitrationtable.weight"),
        ],
        |_| {},
    );
}

#[test]
fn led_info_and_vendor_diag_agree_with_wireshark() {
    compare::<LedInfo>(
        9,
        20,
        0,
        &[("led_mask", "infiniband.ledinfo.ledmask")],
        |_| {},
    );
    compare::<VendorDiag>(
        10,
        20,
        0,
        &[("next_index", "infiniband.vendordiag.nextindex")],
        |_| {},
    );
}

#[test]
fn notices_and_trap_data_agree_with_wireshark() {
    let header = [
        ("is_generic", "infiniband.notice.isgeneric"),
        ("notice_type", "infiniband.notice.type"),
        (
            "producer_type_or_vendor_id",
            "infiniband.notice.producertypevendorid",
        ),
        (
            "trap_number_or_device_id",
            "infiniband.notice.trapnumberdeviceid",
        ),
        ("issuer_lid", "infiniband.notice.issuerlid"),
        ("notice_toggle", "infiniband.notice.noticetoggle"),
        ("notice_count", "infiniband.notice.noticecount"),
    ];
    compare::<Notice>(11, 40, 0, &header, |n| n.is_generic = false);

    // Trap details: build generic notices whose details we control.
    if !tshark_available() {
        return;
    }
    let mut rng = Rng::new(12);
    let mut smps = Vec::new();
    let mut want = Vec::new();
    for i in 0..30 {
        let details = if i % 2 == 0 {
            let mut t = Trap256::decode(&bytes(&mut rng)).unwrap();
            t.dr_hop_count %= 31;
            TrapDetails::BadMKey(t)
        } else {
            TrapDetails::LocalChange(Trap144::decode(&bytes(&mut rng)).unwrap())
        };
        let n = Notice::generic(
            mad_core::notice::NoticeType::Security,
            mad_core::notice::ProducerType::ChannelAdapter,
            mad_core::Lid(rng.next_u64() as u16),
            &details,
        )
        .unwrap();
        let mut s = Smp::lid_routed(
            Method::Trap,
            AttributeId::Notice,
            0,
            rng.next_u64(),
            MKey(0),
        );
        n.encode(&mut s.data).unwrap();
        smps.push(*s.as_wire());
        want.push(details);
    }
    let fields = [
        "infiniband.trap.lidaddr",
        "infiniband.trap.drslid",
        "infiniband.trap.method",
        "infiniband.trap.attributeid",
        "infiniband.trap.attributemodifier",
        "infiniband.trap.mkey",
        "infiniband.trap.drnotice",
        "infiniband.trap.drpathtruncated",
        "infiniband.trap.drhopcount",
        "infiniband.trap.otherlocalchanges",
        "infiniband.trap.capabilitymask",
        "infiniband.trap.nodedescriptionchange",
    ];
    let rows = dissect(&smps, &fields);
    for (row, d) in rows.iter().zip(&want) {
        let col = |i: usize| row[i].first().copied();
        match d {
            TrapDetails::BadMKey(t) => {
                assert_eq!(col(0), Some(u64::from(t.lid.0)));
                assert_eq!(col(1), Some(u64::from(t.dr_slid.0)));
                assert_eq!(col(2), Some(u64::from(t.method)));
                assert_eq!(col(3), Some(u64::from(t.attribute_id)));
                assert_eq!(col(4), Some(u64::from(t.attribute_modifier)));
                assert_eq!(col(5), Some(t.m_key.0));
                assert_eq!(col(6), Some(u64::from(t.dr_notice)));
                assert_eq!(col(7), Some(u64::from(t.dr_path_truncated)));
                assert_eq!(col(8), Some(u64::from(t.dr_hop_count)));
            }
            TrapDetails::LocalChange(t) => {
                assert_eq!(col(0), Some(u64::from(t.lid.0)));
                assert_eq!(col(9), Some(u64::from(t.other_local_changes)));
                assert_eq!(col(10), Some(u64::from(t.capability_mask)));
                assert_eq!(col(11), Some(u64::from(t.node_description_change)));
            }
            _ => unreachable!(),
        }
    }
}

/// Wireshark 4.0's dissector shows only the first 16 of the 32 port masks of
/// a MulticastForwardingTable block (the block covers 32 MLIDs: IBA 14.2.5.12,
/// OpenSM's IB_MCAST_BLOCK_SIZE); those 16 must agree with ours.
#[test]
fn multicast_forwarding_table_agrees_with_wireshark_for_the_entries_it_shows() {
    compare_prefix::<MulticastForwardingTable>(
        6,
        20,
        0,
        &[("port_mask", "infiniband.multicastforwardingtable.portmask")],
        |_| {},
        16,
    );
}

/// Wireshark reads the simulator's capture: one InfiniBand frame with a
/// directed-route SMP per cable crossing, attribute IDs as the SM sent them.
#[test]
fn wireshark_reads_the_simulators_capture() {
    if !tshark_available() {
        tests::skip("tshark oracle", "tshark not installed (apt install tshark)");
        return;
    }
    let t = fabric::topology::Topology::from_spec("mport-ntree:4:2").unwrap();
    let mut f = fabric::sim::Fabric::new(t, fabric::sim::SimConfig::default()).unwrap();
    f.enable_capture();
    let mut sm = smi::sm::Sm::new(smi::sm::SmConfig::default());
    assert!(f.bring_up(&mut sm));
    let mut cap = f.capture_pcap().unwrap();
    cap[20..24].copy_from_slice(&USER_DLT.to_le_bytes());
    let dir = std::env::temp_dir().join(format!("ibkit-tshark-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sim.pcap");
    std::fs::write(&path, &cap).unwrap();
    let out = Command::new("tshark")
        .args(["-n", "-o", UAT, "-r"])
        .arg(&path)
        .args([
            "-T",
            "fields",
            "-e",
            "infiniband.mad.mgmtclass",
            "-e",
            "infiniband.mad.attributeid",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len() as u64, f.stats.hops);
    assert!(
        rows.iter().all(|r| r.starts_with("0x81")),
        "all directed-route SMPs"
    );
    for attr in ["0x0011", "0x0015", "0x0012", "0x0019"] {
        assert!(
            rows.iter().any(|r| r.ends_with(attr)),
            "tshark saw attribute {attr}"
        );
    }
}

#[test]
fn vhca_sa_path_records_agree_with_wireshark() {
    use vhca::mgmt::{GuestId, Sa, SaRecord, CLASS_SA, GET, PATH_RECORD, PR_DLID, SA_DATA};
    if !tshark_available() {
        tests::skip("tshark oracle", "tshark not installed (apt install tshark)");
        return;
    }
    let rec = |lid: u16| SaRecord {
        lid,
        port_guid: 0x0002_c903_0000_0000 | u64::from(lid),
        node_guid: 0x0002_c903_0000_0000,
        subnet_prefix: 0xfe80_0000_0000_0000,
        node_type: 1,
    };
    let sa = Sa {
        records: (1..=40).map(rec).collect(),
    };
    let mut mads = Vec::new();
    let mut want = Vec::new();
    for (src, dst) in [(1u16, 2u16), (3, 40), (17, 5)] {
        let who = GuestId {
            dom: 1,
            lid: src,
            port_guid: rec(src).port_guid,
        };
        let mut q = [0u8; 256];
        q[..4].copy_from_slice(&[1, CLASS_SA, 2, GET]);
        q[8..16].copy_from_slice(&0x55u64.to_be_bytes());
        q[16..18].copy_from_slice(&PATH_RECORD.to_be_bytes());
        q[48..56].copy_from_slice(&PR_DLID.to_be_bytes());
        q[SA_DATA + 40..SA_DATA + 42].copy_from_slice(&dst.to_be_bytes());
        mads.push(sa.answer(&who, &q));
        want.push([dst, src]);
    }
    let fields = [
        "infiniband.pathrecord.dlid",
        "infiniband.pathrecord.slid",
        "infiniband.pathrecord.p_key",
        "infiniband.pathrecord.reversible",
        "infiniband.pathrecord.numbpath",
        "infiniband.pathrecord.mtuselector",
        "infiniband.pathrecord.mtu",
        "infiniband.pathrecord.rateselector",
        "infiniband.pathrecord.rate",
        "infiniband.pathrecord.packetlifetime",
        "infiniband.sa.attributeoffset",
    ];
    let rows = dissect_on(&mads, &fields, 1);
    for (row, [dlid, slid]) in rows.iter().zip(want) {
        let got: Vec<u64> = row
            .iter()
            .map(|v| v.first().copied().unwrap_or(u64::MAX))
            .collect();
        assert_eq!(
            got,
            vec![
                u64::from(dlid),
                u64::from(slid),
                0xFFFF,
                1,
                1,
                2,
                4,
                2,
                7,
                18,
                8
            ],
            "{fields:?}"
        );
    }
}

/// Wireshark's dissection of `mads` on QP1 against `ours`, each MAD's
/// values by our field names: every field `map` pairs (ours, tshark's)
/// must agree; `what` names the attribute in a failure.
fn agree_on_qp1(
    mads: &[[u8; 256]],
    ours: &[HashMap<String, Vec<u64>>],
    map: &[(&str, &str)],
    what: &str,
) {
    let fields: Vec<&str> = map.iter().map(|&(_, t)| t).collect();
    let rows = dissect_on(mads, &fields, 1);
    for (row, vals) in rows.iter().zip(ours) {
        for (col, &(name, theirs)) in row.iter().zip(map) {
            assert_eq!(
                col.first().copied(),
                vals.get(name).and_then(|v| v.first().copied()),
                "{what}.{name} ({theirs})"
            );
        }
    }
}

/// 64 random bytes.
fn bytes(rng: &mut Rng) -> [u8; 64] {
    let mut b = [0u8; 64];
    rng.fill_bytes(&mut b);
    b
}

/// SA records and the RMPP and SA headers, from random bytes decoded and
/// re-encoded by mad-core, against Wireshark's dissection of the same
/// MADs on QP1: every numeric field it names.
#[test]
fn sa_records_and_headers_agree_with_wireshark() {
    use mad_core::sa::*;
    if !tshark_available() {
        tests::skip("tshark oracle", "tshark not installed (apt install tshark)");
        return;
    }
    /// Random `R`s (via their bytes), in GetResp SA MADs with random
    /// RMPP and SA headers (RMPP inactive, so the data is one record);
    /// the record's and headers' fields by the names `map` gives.
    fn check<R: SaRecord>(seed: u64, map: &[(&str, &str)]) -> usize {
        let mut rng = Rng::new(seed);
        let (mut mads, mut ours) = (Vec::new(), Vec::new());
        for i in 0..40 {
            let mut raw = [0u8; 200];
            rng.fill_bytes(&mut raw);
            let rec = R::decode(&raw).unwrap();
            let mut m = SaMad::request(Method::GetResp, R::ID, i);
            m.set_record(&rec).unwrap();
            let mut h = [0u8; 32];
            rng.fill_bytes(&mut h);
            m.rmpp = RmppHeader::decode(&h[..12]).unwrap();
            m.rmpp.flags = 0;
            m.rmpp.version = 1;
            // Wireshark reads Data1 and Data2 only for the RMPP types it
            // knows; a reserved type throws every later field off by 8
            // bytes there (the spec places them regardless).
            m.rmpp.rmpp_type = RmppType::from((i % 5) as u8);
            m.rmpp.status = RmppStatus::from(h[3] % 2);
            m.sa = SaHeader::decode(&h[12..]).unwrap();
            m.sa.attribute_offset = R::attribute_offset();
            let mut vals = flatten(&rec);
            vals.extend(
                flatten(&m.sa)
                    .into_iter()
                    .map(|(k, v)| (format!("sa.{k}"), v)),
            );
            vals.extend(
                flatten(&m.rmpp)
                    .into_iter()
                    .map(|(k, v)| (format!("rmpp.{k}"), v)),
            );
            // Wireshark reads RRespTime through the mask 0xF0, four bits;
            // IBA 13.6.2.1 makes it the five bits above the three RMPPFlags
            // (libibmad's IB_SA_RMPP_RESP_F agrees with us): compare its
            // four bits.
            vals.insert(
                "rmpp.resp_time_wireshark".into(),
                vec![u64::from(m.rmpp.resp_time >> 1)],
            );
            mads.push(m.to_bytes());
            ours.push(vals);
        }
        agree_on_qp1(&mads, &ours, map, R::ID.name().unwrap_or("?"));
        map.len() * mads.len()
    }
    let headers: &[(&str, &str)] = &[
        ("rmpp.version", "infiniband.rmpp.rmppversion"),
        ("rmpp.rmpp_type", "infiniband.rmpp.rmpptype"),
        ("rmpp.resp_time_wireshark", "infiniband.rmpp.rresptime"),
        ("rmpp.status", "infiniband.rmpp.rmppstatus"),
        ("sa.sm_key", "infiniband.sa.smkey"),
        ("sa.attribute_offset", "infiniband.sa.attributeoffset"),
        ("sa.component_mask", "infiniband.sa.componentmask"),
    ];
    let with = |rest: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        headers.iter().chain(rest).copied().collect()
    };
    let mut n = 0;
    n += check::<PathRecord>(
        0x5a1,
        &with(&[
            ("dlid", "infiniband.pathrecord.dlid"),
            ("slid", "infiniband.pathrecord.slid"),
            ("raw_traffic", "infiniband.pathrecord.rawtraffic"),
            ("flow_label", "infiniband.pathrecord.flowlabel"),
            ("hop_limit", "infiniband.pathrecord.hoplimit"),
            ("tclass", "infiniband.pathrecord.tclass"),
            ("reversible", "infiniband.pathrecord.reversible"),
            ("numb_path", "infiniband.pathrecord.numbpath"),
            ("pkey", "infiniband.pathrecord.p_key"),
            ("sl", "infiniband.pathrecord.sl"),
            ("mtu_selector", "infiniband.pathrecord.mtuselector"),
            ("mtu", "infiniband.pathrecord.mtu"),
            ("rate_selector", "infiniband.pathrecord.rateselector"),
            ("rate", "infiniband.pathrecord.rate"),
            (
                "packet_life_time_selector",
                "infiniband.pathrecord.packetlifetimeselector",
            ),
            ("packet_life_time", "infiniband.pathrecord.packetlifetime"),
            ("preference", "infiniband.pathrecord.preference"),
        ]),
    );
    n += check::<McMemberRecord>(
        0x5a2,
        &with(&[
            ("qkey", "infiniband.mcmemberrecord.q_key"),
            ("mlid", "infiniband.mcmemberrecord.mlid"),
            ("mtu_selector", "infiniband.mcmemberrecord.mtuselector"),
            ("mtu", "infiniband.mcmemberrecord.mtu"),
            ("tclass", "infiniband.mcmemberrecord.tclass"),
            ("pkey", "infiniband.mcmemberrecord.p_key"),
            ("rate_selector", "infiniband.mcmemberrecord.rateselector"),
            ("rate", "infiniband.mcmemberrecord.rate"),
            (
                "packet_life_time_selector",
                "infiniband.mcmemberrecord.packetlifetimeselector",
            ),
            (
                "packet_life_time",
                "infiniband.mcmemberrecord.packetlifetime",
            ),
            ("sl", "infiniband.mcmemberrecord.sl"),
            ("flow_label", "infiniband.mcmemberrecord.flowlabel"),
            ("hop_limit", "infiniband.mcmemberrecord.hoplimit"),
            ("scope", "infiniband.mcmemberrecord.scope"),
            ("join_state", "infiniband.mcmemberrecord.joinstate"),
            ("proxy_join", "infiniband.mcmemberrecord.proxyjoin"),
        ]),
    );
    n += check::<LinkRecord>(
        0x5a3,
        &with(&[
            ("from_lid", "infiniband.linkrecord.fromlid"),
            ("from_port_num", "infiniband.linkrecord.fromport"),
            ("to_port_num", "infiniband.linkrecord.toport"),
            ("to_lid", "infiniband.linkrecord.tolid"),
        ]),
    );
    eprintln!("compared {n} SA field values with Wireshark");
}

/// PerfMgt's PortCounters and PortCountersExtended, from random bytes
/// decoded and re-encoded by mad-core, in GetResp MADs on QP1, against
/// Wireshark's dissection: every counter it names.
#[test]
fn perf_counters_agree_with_wireshark() {
    use mad_core::perf::{self, PortCounters, PortCountersExtended};
    if !tshark_available() {
        tests::skip("tshark oracle", "tshark not installed (apt install tshark)");
        return;
    }
    /// 40 MADs of attribute `id`, each carrying one value `make` builds
    /// from random bytes; tshark's values of `map` against ours.
    fn check(
        seed: u64,
        id: u16,
        make: impl Fn(&[u8]) -> (Vec<u8>, HashMap<String, Vec<u64>>),
        map: &[(&str, &str)],
    ) -> usize {
        let mut rng = Rng::new(seed);
        let (mut mads, mut ours) = (Vec::new(), Vec::new());
        for i in 0..40u64 {
            let mut raw = [0u8; 192];
            rng.fill_bytes(&mut raw);
            let (data, vals) = make(&raw);
            let mut m = [0u8; 256];
            m[..4].copy_from_slice(&[1, perf::PERF_CLASS, perf::PERF_CLASS_VERSION, 0x81]);
            m[8..16].copy_from_slice(&(0x1000 + i).to_be_bytes());
            m[16..18].copy_from_slice(&id.to_be_bytes());
            m[perf::DATA_OFFSET..perf::DATA_OFFSET + data.len()].copy_from_slice(&data);
            mads.push(m);
            ours.push(vals);
        }
        agree_on_qp1(&mads, &ours, map, &format!("{id:#06x}"));
        map.len() * mads.len()
    }
    let mut n = check(
        0x9c1,
        perf::ATTR_PORT_COUNTERS,
        |raw| {
            let c = PortCounters::decode(raw).unwrap();
            (c.to_bytes().unwrap().to_vec(), flatten(&c))
        },
        &[
            ("port_select", "infiniband.portcounters.portselect"),
            ("counter_select", "infiniband.portcounters.counterselect"),
            (
                "symbol_errors",
                "infiniband.portcounters.symbolerrorcounter",
            ),
            (
                "link_error_recovery",
                "infiniband.portcounters.linkerrorrecoverycounter",
            ),
            ("link_downed", "infiniband.portcounters.linkdownedcounter"),
            ("rcv_errors", "infiniband.portcounters.portrcverrors"),
            (
                "rcv_remote_physical_errors",
                "infiniband.portcounters.portrcvremotephysicalerrors",
            ),
            (
                "rcv_switch_relay_errors",
                "infiniband.portcounters.portrcvswitchrelayerrors",
            ),
            ("xmit_discards", "infiniband.portcounters.portxmitdiscards"),
            (
                "xmit_constraint_errors",
                "infiniband.portcounters.portxmitconstrainterrors",
            ),
            (
                "rcv_constraint_errors",
                "infiniband.portcounters.portrcvconstrainterrors",
            ),
            (
                "local_link_integrity_errors",
                "infiniband.portcounters.locallinkintegrityerrors",
            ),
            (
                "excessive_buffer_overrun_errors",
                "infiniband.portcounters.excessivebufferoverrunerrors",
            ),
            ("vl15_dropped", "infiniband.portcounters.vl15dropped"),
            ("xmit_data", "infiniband.portcounters.portxmitdata"),
            ("rcv_data", "infiniband.portcounters.portrcvdata"),
            ("xmit_pkts", "infiniband.portcounters.portxmitpkts"),
            ("rcv_pkts", "infiniband.portcounters.portrcvpkts"),
        ],
    );
    n += check(
        0x9c2,
        perf::ATTR_PORT_COUNTERS_EXTENDED,
        |raw| {
            let c = PortCountersExtended::decode(raw).unwrap();
            (c.to_bytes().unwrap().to_vec(), flatten(&c))
        },
        &[
            ("port_select", "infiniband.portcounters_ext.portselect"),
            (
                "counter_select",
                "infiniband.portcounters_ext.counterselect",
            ),
            ("xmit_data", "infiniband.portcounters_ext.portxmitdata"),
            ("rcv_data", "infiniband.portcounters_ext.portrcvdata"),
            ("xmit_pkts", "infiniband.portcounters_ext.portxmitpkts"),
            ("rcv_pkts", "infiniband.portcounters_ext.portrcvpkts"),
            (
                "unicast_xmit_pkts",
                "infiniband.portcounters_ext.portunicastxmitpkts",
            ),
            (
                "unicast_rcv_pkts",
                "infiniband.portcounters_ext.portunicastrcvpkts",
            ),
            (
                "multicast_xmit_pkts",
                "infiniband.portcounters_ext.portmulticastxmitpkts",
            ),
            (
                "multicast_rcv_pkts",
                "infiniband.portcounters_ext.portmulticastrcvpkts",
            ),
        ],
    );
    n /= 40;
    eprintln!("{n} PerfMgt fields agree with Wireshark in 80 MADs");
    assert_eq!(n, 28);
}
