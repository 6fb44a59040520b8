//! mad-core against libibmad, decoding and encoding the same fields of the
//! same buffers in the same run.
//!
//! `cargo bench -p mad-core --bench codec`

use criterion::{criterion_group, criterion_main, Criterion};
use mad_core::attr::*;
use mad_core::{DrPath, MKey, Method, Smp};
use std::ffi::c_void;
use std::hint::black_box;

#[path = "../../tests/src/libibmad.rs"]
#[allow(dead_code)]
mod libibmad;

const NODE_INFO_FIELDS: &[&str] = &[
    "IB_NODE_BASE_VERS_F",
    "IB_NODE_CLASS_VERS_F",
    "IB_NODE_TYPE_F",
    "IB_NODE_NPORTS_F",
    "IB_NODE_SYSTEM_GUID_F",
    "IB_NODE_GUID_F",
    "IB_NODE_PORT_GUID_F",
    "IB_NODE_PARTITION_CAP_F",
    "IB_NODE_DEVID_F",
    "IB_NODE_REVISION_F",
    "IB_NODE_LOCAL_PORT_F",
    "IB_NODE_VENDORID_F",
];
const NODE_INFO_64: &[&str] = &[
    "IB_NODE_SYSTEM_GUID_F",
    "IB_NODE_GUID_F",
    "IB_NODE_PORT_GUID_F",
];

/// Every PortInfo field libibmad knows (the same set the oracle test checks).
const PORT_INFO_FIELDS: &[&str] = &[
    "IB_PORT_MKEY_F",
    "IB_PORT_GID_PREFIX_F",
    "IB_PORT_LID_F",
    "IB_PORT_SMLID_F",
    "IB_PORT_CAPMASK_F",
    "IB_PORT_DIAG_F",
    "IB_PORT_MKEY_LEASE_F",
    "IB_PORT_LOCAL_PORT_F",
    "IB_PORT_LINK_WIDTH_ENABLED_F",
    "IB_PORT_LINK_WIDTH_SUPPORTED_F",
    "IB_PORT_LINK_WIDTH_ACTIVE_F",
    "IB_PORT_LINK_SPEED_SUPPORTED_F",
    "IB_PORT_STATE_F",
    "IB_PORT_PHYS_STATE_F",
    "IB_PORT_LINK_DOWN_DEF_F",
    "IB_PORT_MKEY_PROT_BITS_F",
    "IB_PORT_LMC_F",
    "IB_PORT_LINK_SPEED_ACTIVE_F",
    "IB_PORT_LINK_SPEED_ENABLED_F",
    "IB_PORT_NEIGHBOR_MTU_F",
    "IB_PORT_SMSL_F",
    "IB_PORT_VL_CAP_F",
    "IB_PORT_INIT_TYPE_F",
    "IB_PORT_VL_HIGH_LIMIT_F",
    "IB_PORT_VL_ARBITRATION_HIGH_CAP_F",
    "IB_PORT_VL_ARBITRATION_LOW_CAP_F",
    "IB_PORT_INIT_TYPE_REPLY_F",
    "IB_PORT_MTU_CAP_F",
    "IB_PORT_VL_STALL_COUNT_F",
    "IB_PORT_HOQ_LIFE_F",
    "IB_PORT_OPER_VLS_F",
    "IB_PORT_PART_EN_INB_F",
    "IB_PORT_PART_EN_OUTB_F",
    "IB_PORT_FILTER_RAW_INB_F",
    "IB_PORT_FILTER_RAW_OUTB_F",
    "IB_PORT_MKEY_VIOL_F",
    "IB_PORT_PKEY_VIOL_F",
    "IB_PORT_QKEY_VIOL_F",
    "IB_PORT_GUID_CAP_F",
    "IB_PORT_CLIENT_REREG_F",
    "IB_PORT_MCAST_PKEY_SUPR_ENAB_F",
    "IB_PORT_SUBN_TIMEOUT_F",
    "IB_PORT_RESP_TIME_VAL_F",
    "IB_PORT_LOCAL_PHYS_ERR_F",
    "IB_PORT_OVERRUN_ERR_F",
    "IB_PORT_MAX_CREDIT_HINT_F",
    "IB_PORT_LINK_ROUND_TRIP_F",
    "IB_PORT_CAPMASK2_F",
    "IB_PORT_LINK_SPEED_EXT_ACTIVE_F",
    "IB_PORT_LINK_SPEED_EXT_SUPPORTED_F",
    "IB_PORT_LINK_SPEED_EXT_ENABLED_F",
];
const PORT_INFO_64: &[&str] = &["IB_PORT_MKEY_F", "IB_PORT_GID_PREFIX_F"];

const SMP_HEADER_FIELDS: &[&str] = &[
    "IB_MAD_BASEVER_F",
    "IB_MAD_MGMTCLASS_F",
    "IB_MAD_CLASSVER_F",
    "IB_MAD_METHOD_F",
    "IB_DRSMP_STATUS_F",
    "IB_DRSMP_DIRECTION_F",
    "IB_DRSMP_HOPPTR_F",
    "IB_DRSMP_HOPCNT_F",
    "IB_MAD_ATTRID_F",
    "IB_MAD_ATTRMOD_F",
    "IB_DRSMP_DRSLID_F",
    "IB_DRSMP_DRDLID_F",
];
const SMP_HEADER_64: &[&str] = &["IB_MAD_TRID_F", "IB_MAD_MKEY_F"];

/// libibmad field IDs with the values to write: (32-bit fields, 64-bit fields).
type FieldValues = (Vec<(i32, u32)>, Vec<(i32, u64)>);

struct Ibmad {
    lib: libibmad::LibIbmad,
}

impl Ibmad {
    fn ids(&self, names: &[&str]) -> Vec<i32> {
        names
            .iter()
            .map(|n| self.lib.field(n).unwrap_or_else(|| panic!("{n}")))
            .collect()
    }
}

fn sample_port_info() -> PortInfo {
    PortInfo {
        m_key: MKey(0x1122_3344_5566_7788),
        gid_prefix: mad_core::field::GidPrefix(0xfe80_0000_0000_0000),
        lid: mad_core::Lid(0x1234),
        master_sm_lid: mad_core::Lid(1),
        capability_mask: CapabilityMask::IS_SM | CapabilityMask::IS_TRAP_SUPPORTED,
        local_port_num: 7,
        link_width_enabled: LinkWidth::W4X,
        link_width_supported: LinkWidth::W4X | LinkWidth::W1X,
        link_width_active: LinkWidth::W4X,
        link_speed_supported: LinkSpeed::SDR | LinkSpeed::DDR | LinkSpeed::QDR,
        port_state: PortState::Active,
        port_physical_state: PortPhysicalState::LinkUp,
        link_down_default_state: LinkDownDefaultState::Polling,
        m_key_protect_bits: 1,
        lmc: 0,
        neighbor_mtu: Mtu::Mtu4096,
        mtu_cap: Mtu::Mtu4096,
        vl_cap: VlCap::Vl0To7,
        operational_vls: VlCap::Vl0To7,
        guid_cap: 32,
        subnet_time_out: 18,
        resp_time_value: 20,
        link_speed_ext_active: LinkSpeedExt::EDR,
        link_speed_ext_supported: LinkSpeedExt::FDR | LinkSpeedExt::EDR,
        ..Default::default()
    }
}

fn benches(c: &mut Criterion) {
    let ibmad = match libibmad::LibIbmad::load() {
        Ok(lib) => Some(Ibmad { lib }),
        Err(e) => {
            eprintln!("libibmad not available, benchmarking mad-core alone: {e}");
            None
        }
    };

    // NodeInfo
    let ni = NodeInfo {
        base_version: 1,
        class_version: 1,
        node_type: NodeType::Switch,
        num_ports: 36,
        system_image_guid: mad_core::Guid(0x0002_c903_00a1_b200),
        node_guid: mad_core::Guid(0x0002_c903_00a1_b200),
        port_guid: mad_core::Guid(0x0002_c903_00a1_b200),
        partition_cap: 8,
        device_id: 0xc738,
        revision: 0xa0,
        local_port_num: 17,
        vendor_id: 0x0002c9,
    };
    let mut ni_buf = [0u8; 256];
    ni.encode(&mut ni_buf).unwrap();
    let pi = sample_port_info();
    let mut pi_buf = [0u8; 256];
    pi.encode(&mut pi_buf).unwrap();
    let mut lft_buf = [0u8; 256];
    for (i, b) in lft_buf[..64].iter_mut().enumerate() {
        *b = i as u8;
    }
    let path = DrPath::from_ports(&[1, 3, 5, 7]).unwrap();
    let mut smp = Smp::directed(
        &path,
        Method::GetResp,
        AttributeId::PortInfo,
        7,
        42,
        MKey(0),
    );
    smp.set_direction(true);
    smp.set_hop_pointer(4);
    pi.encode(&mut smp.data).unwrap();
    let smp_buf: [u8; 256] = *smp.as_wire();

    let mut g = c.benchmark_group("decode");
    g.bench_function("NodeInfo/mad-core", |b| {
        b.iter(|| NodeInfo::decode(black_box(&ni_buf)).unwrap())
    });
    g.bench_function("PortInfo/mad-core", |b| {
        b.iter(|| PortInfo::decode(black_box(&pi_buf)).unwrap())
    });
    g.bench_function("LinearForwardingTable/mad-core", |b| {
        b.iter(|| LinearForwardingTable::decode(black_box(&lft_buf)).unwrap())
    });
    g.bench_function("LinearForwardingTable view/mad-core", |b| {
        b.iter(|| LinearForwardingTable::view(black_box(&lft_buf)).unwrap()[63])
    });
    g.bench_function("DR SMP+PortInfo parse+check/mad-core", |b| {
        b.iter(|| {
            let s = Smp::parse(black_box(&smp_buf)).unwrap();
            let m = <PortInfo as Attribute>::decode_modifier(s.attribute_modifier()).unwrap();
            let p = PortInfo::decode(&s.data).unwrap();
            p.check().unwrap();
            (s.hop_pointer(), s.return_path[1], m, p)
        })
    });
    if let Some(l) = &ibmad {
        let get = l.lib.raw_get();
        let get64 = l.lib.raw_get64();
        let ni32: Vec<i32> = l
            .ids(NODE_INFO_FIELDS)
            .into_iter()
            .filter(|_| true)
            .collect();
        let ni64 = l.ids(NODE_INFO_64);
        let ni32: Vec<i32> = ni32.into_iter().filter(|f| !ni64.contains(f)).collect();
        let pi64 = l.ids(PORT_INFO_64);
        let pi32: Vec<i32> = l
            .ids(PORT_INFO_FIELDS)
            .into_iter()
            .filter(|f| !pi64.contains(f))
            .collect();
        let hdr32 = l.ids(SMP_HEADER_FIELDS);
        let hdr64 = l.ids(SMP_HEADER_64);
        let lft_f = l.lib.field("IB_LINEAR_FORW_TBL_F").unwrap();
        let read_all = |buf: &[u8; 256], base: i32, f32s: &[i32], f64s: &[i32]| {
            let p = buf.as_ptr() as *mut c_void;
            let mut acc = 0u64;
            for &f in f32s {
                // SAFETY: libibmad reads within the 256-byte buffer.
                acc = acc.wrapping_add(u64::from(unsafe { get(p, base, f) }));
            }
            for &f in f64s {
                // SAFETY: as above.
                acc = acc.wrapping_add(unsafe { get64(p, base, f) });
            }
            acc
        };
        g.bench_function("NodeInfo/libibmad", |b| {
            b.iter(|| read_all(black_box(&ni_buf), 0, &ni32, &ni64))
        });
        g.bench_function("PortInfo/libibmad", |b| {
            b.iter(|| read_all(black_box(&pi_buf), 0, &pi32, &pi64))
        });
        let mut out = [0u8; 256];
        g.bench_function("LinearForwardingTable/libibmad", |b| {
            b.iter(|| {
                l.lib.get_array(black_box(&lft_buf), lft_f, &mut out);
                out[63]
            })
        });
        g.bench_function("DR SMP+PortInfo parse+check/libibmad", |b| {
            b.iter(|| {
                let buf = black_box(&smp_buf);
                read_all(buf, 0, &hdr32, &hdr64).wrapping_add(read_all(buf, 64, &pi32, &pi64))
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("encode");
    let mut out = [0u8; 256];
    g.bench_function("NodeInfo/mad-core", |b| {
        b.iter(|| black_box(&ni).encode(&mut out).unwrap())
    });
    g.bench_function("PortInfo/mad-core", |b| {
        b.iter(|| black_box(&pi).encode(&mut out).unwrap())
    });
    let lft = LinearForwardingTable::decode(&lft_buf).unwrap();
    g.bench_function("LinearForwardingTable/mad-core", |b| {
        b.iter(|| black_box(&lft).encode(&mut out).unwrap())
    });
    g.bench_function("DR SMP+PortInfo build/mad-core", |b| {
        b.iter(|| {
            let mut s = Smp::directed(
                black_box(&path),
                Method::Set,
                AttributeId::PortInfo,
                7,
                42,
                MKey(0),
            );
            black_box(&pi).encode(&mut s.data).unwrap();
            s
        })
    });
    if let Some(l) = &ibmad {
        let set = l.lib.raw_set();
        let set64 = l.lib.raw_set64();
        let ni64 = l.ids(NODE_INFO_64);
        let ni32: Vec<i32> = l
            .ids(NODE_INFO_FIELDS)
            .into_iter()
            .filter(|f| !ni64.contains(f))
            .collect();
        let pi64 = l.ids(PORT_INFO_64);
        let pi32: Vec<i32> = l
            .ids(PORT_INFO_FIELDS)
            .into_iter()
            .filter(|f| !pi64.contains(f))
            .collect();
        // Values: read back from our encoding so both sides write the same.
        let get = l.lib.raw_get();
        let get64 = l.lib.raw_get64();
        let vals = |buf: &[u8; 256], f32s: &[i32], f64s: &[i32]| -> FieldValues {
            let p = buf.as_ptr() as *mut c_void;
            // SAFETY: libibmad reads within the 256-byte buffer.
            let a = f32s.iter().map(|&f| (f, unsafe { get(p, 0, f) })).collect();
            // SAFETY: as above.
            let b = f64s
                .iter()
                .map(|&f| (f, unsafe { get64(p, 0, f) }))
                .collect();
            (a, b)
        };
        let write_all = |buf: &mut [u8; 256], v: &FieldValues| {
            buf.fill(0);
            let p = buf.as_mut_ptr() as *mut c_void;
            for &(f, x) in &v.0 {
                // SAFETY: libibmad writes within the 256-byte buffer.
                unsafe { set(p, 0, f, x) };
            }
            for &(f, x) in &v.1 {
                // SAFETY: as above.
                unsafe { set64(p, 0, f, x) };
            }
        };
        let niv = vals(&ni_buf, &ni32, &ni64);
        let piv = vals(&pi_buf, &pi32, &pi64);
        g.bench_function("NodeInfo/libibmad", |b| {
            b.iter(|| write_all(&mut out, black_box(&niv)))
        });
        g.bench_function("PortInfo/libibmad", |b| {
            b.iter(|| write_all(&mut out, black_box(&piv)))
        });
        let lft_f = l.lib.field("IB_LINEAR_FORW_TBL_F").unwrap();
        g.bench_function("LinearForwardingTable/libibmad", |b| {
            b.iter(|| l.lib.set_array(&mut out, lft_f, black_box(&lft_buf)))
        });
    }
    g.finish();
}

criterion_group! {
    name = codec;
    config = Criterion::default().warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(codec);
