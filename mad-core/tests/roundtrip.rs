//! Property tests: every declared layout round-trips, its fields do not
//! overlap, and no input makes a decoder panic.

use mad_core::attr::*;
use mad_core::field::{FieldDesc, Fields};
use mad_core::notice::*;
use mad_core::{AnyAttribute, AttributeId, Smp};
use proptest::prelude::*;

fn check_no_overlap(name: &str, size: usize, fields: &[FieldDesc]) {
    let mut used = vec![false; size * 8];
    for f in fields {
        assert!(f.width > 0, "{name}.{} has zero width", f.name);
        for (b, u) in used.iter_mut().enumerate().skip(f.offset).take(f.width) {
            assert!(!*u, "{name}.{} overlaps another field at bit {b}", f.name);
            *u = true;
        }
    }
}

macro_rules! layouts {
    ($($t:ty),* $(,)?) => {
        #[test]
        fn fields_never_overlap() {
            $( check_no_overlap(<$t>::NAME, <$t>::SIZE, <$t>::FIELDS); )*
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn decode_encode_round_trips(bytes in proptest::collection::vec(any::<u8>(), 64)) {
                $(
                    let v = <$t>::decode(&bytes).unwrap();
                    let mut e = vec![0u8; <$t>::SIZE];
                    v.encode(&mut e).unwrap();
                    // decode ∘ encode = identity on values
                    prop_assert_eq!(<$t>::decode(&e).unwrap(), v, "{}", <$t>::NAME);
                    // encode ∘ decode = identity on bytes with reserved bits zero
                    let mut ones = [0u8; 64];
                    <$t>::decode(&[0xFF; 64]).unwrap().encode(&mut ones).unwrap();
                    for i in 0..<$t>::SIZE {
                        prop_assert_eq!(e[i], bytes[i] & ones[i], "{} byte {}", <$t>::NAME, i);
                    }
                    // a short buffer is an error, never a panic
                    prop_assert!(<$t>::decode(&bytes[..<$t>::SIZE - 1]).is_err());
                    let mut short = vec![0u8; <$t>::SIZE - 1];
                    prop_assert!(v.encode(&mut short).is_err());
                    // Debug and visit never panic
                    let _ = format!("{:?}", v);
                    v.visit(&mut |_, _| {});
                )*
            }
        }
    };
}

layouts!(
    NodeDescription,
    NodeInfo,
    SwitchInfo,
    GuidInfo,
    PortInfo,
    PKeyTable,
    SlToVlMappingTable,
    VlArbitrationTable,
    LinearForwardingTable,
    RandomForwardingTable,
    MulticastForwardingTable,
    SmInfo,
    VendorDiag,
    LedInfo,
    CableInfo,
    PortInfoExtended,
    SwitchPortStateTable,
    LinkSpeedWidthPairsTable,
    VendorSpecificMadsTable,
    MlnxExtPortInfo,
    VirtualizationInfo,
    VPortInfo,
    VNodeInfo,
    VPortState,
    VNodeDescription,
    VPortGuidInfo,
    VPortPKeyTable,
    Notice,
    TrapGid,
    Trap128,
    TrapPortError,
    Trap144,
    Trap145,
    Trap256,
    TrapBadKey,
    Trap259,
);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Whatever the bytes, the SMP and attribute decoders return, never panic,
    /// and a decoded attribute re-encodes to what decoding it again gives.
    #[test]
    fn any_bytes_any_attribute(bytes in proptest::collection::vec(any::<u8>(), 0..300), id in any::<u16>(), am in any::<u32>()) {
        if let Ok(s) = Smp::parse(&bytes) {
            let _ = format!("{:?}", s);
            let _ = s.initial_path();
            let _ = s.return_path();
        }
        let id = AttributeId::from(id);
        if let Ok(a) = AnyAttribute::decode(id, am, &bytes) {
            let _ = a.check();
            let mut out = [0u8; 64];
            let (id2, am2) = a.encode(&mut out).unwrap();
            prop_assert_eq!(id2, id);
            prop_assert_eq!(am2, am);
            prop_assert_eq!(AnyAttribute::decode(id, am, &out).unwrap(), a);
        } else {
            // Only a short buffer or an invalid modifier may fail.
            let e = AnyAttribute::decode(id, am, &bytes).unwrap_err();
            let ok = matches!(e, mad_core::Error::Truncated { .. } | mad_core::Error::InvalidAttributeModifier { .. });
            prop_assert!(ok, "unexpected error {:?}", e);
        }
        if let Ok(n) = Notice::decode(&bytes) {
            if let Ok(d) = n.details() {
                let mut out = [0u8; 54];
                d.encode(&mut out).unwrap();
                prop_assert_eq!(TrapDetails::decode(n.trap_number(), &out).unwrap(), d);
            }
        }
    }
}

#[test]
fn port_info_check_names_the_bad_field() {
    let mut p = PortInfo {
        port_state: PortState::from(9),
        ..Default::default()
    };
    assert!(matches!(
        p.check(),
        Err(mad_core::Error::InvalidField {
            field: "port_state",
            value: 9,
            ..
        })
    ));
    p.port_state = PortState::Active;
    p.neighbor_mtu = Mtu::from(6);
    assert!(matches!(
        p.check(),
        Err(mad_core::Error::InvalidField {
            field: "neighbor_mtu",
            ..
        })
    ));
    p.neighbor_mtu = Mtu::Mtu4096;
    p.lid = mad_core::Lid(0xC001);
    assert!(matches!(
        p.check(),
        Err(mad_core::Error::InvalidField { field: "lid", .. })
    ));
}

#[test]
fn encode_refuses_values_wider_than_their_field() {
    let p = PortInfo {
        lmc: 8,
        ..Default::default()
    };
    let mut b = [0u8; 64];
    assert_eq!(
        p.encode(&mut b),
        Err(mad_core::Error::FieldOverflow {
            what: "PortInfo",
            field: "lmc",
            value: 8,
            width: 3
        })
    );
}

#[test]
fn portinfo_known_bytes() {
    // A PortInfo as an Active 4x EDR port reports it, written by hand from the spec.
    let mut b = [0u8; 64];
    b[16..18].copy_from_slice(&0x0012u16.to_be_bytes()); // LID 18
    b[18..20].copy_from_slice(&0x0001u16.to_be_bytes()); // SM LID 1
    b[20..24].copy_from_slice(&0x0251_8C48u32.to_be_bytes());
    b[28] = 1; // local port
    b[31] = 2; // 4x active
    b[32] = 0x74; // speed supported SDR|DDR|QDR, state Active
    b[33] = 0x52; // phys LinkUp, down default Polling
    b[34] = 0x40 | 0x02; // protect bits 1, LMC 2
    b[36] = 0x50; // neighbor MTU 4096
    b[62] = 0x23; // ext active EDR, ext supported FDR|EDR
    let p = PortInfo::decode(&b).unwrap();
    assert_eq!(p.lid, mad_core::Lid(18));
    assert_eq!(p.master_sm_lid, mad_core::Lid(1));
    assert!(p
        .capability_mask
        .contains(CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED));
    assert!(p.capability_mask.contains(CapabilityMask::IS_SM_DISABLED));
    assert_eq!(p.port_state, PortState::Active);
    assert_eq!(p.port_physical_state, PortPhysicalState::LinkUp);
    assert_eq!(p.link_down_default_state, LinkDownDefaultState::Polling);
    assert_eq!(p.m_key_protect_bits, 1);
    assert_eq!(p.lmc, 2);
    assert_eq!(p.link_width_active, LinkWidth::W4X);
    assert_eq!(p.neighbor_mtu, Mtu::Mtu4096);
    assert_eq!(p.link_speed_ext_active, LinkSpeedExt::EDR);
    assert_eq!(
        p.link_speed_ext_supported,
        LinkSpeedExt::FDR | LinkSpeedExt::EDR
    );
    assert!(p.check().is_ok());
}
