//! Arbitrary SMPs against the SMI and SMA of every node kind: nothing
//! panics, and a request that is refused, or only reads, changes no state.

use mad_core::attr::AttributeId;
use mad_core::{Method, Smp, Status};
use proptest::prelude::*;
use smi::dr::{self, Disposition};
use smi::sma::vswitch::VSwitchHca;
use smi::sma::{CaSma, NodeSpec, Sma, SwitchSma};

const ATTRS: &[u16] = &[
    0x0002, 0x0010, 0x0011, 0x0012, 0x0014, 0x0015, 0x0016, 0x0017, 0x0018, 0x0019, 0x001A, 0x001B,
    0x0020, 0x0031, 0x0033, 0x0034, 0xFF90, 0xFFB0, 0x1234,
];
const METHODS: &[u8] = &[0x01, 0x02, 0x03, 0x05, 0x07, 0x81, 0x12];

fn smp_strategy() -> impl Strategy<Value = Smp> {
    (
        proptest::collection::vec(any::<u8>(), 256),
        0..ATTRS.len(),
        0..METHODS.len(),
        prop_oneof![Just(0u32), 0u32..70, any::<u32>()],
        any::<bool>(),
    )
        .prop_map(|(bytes, a, m, am, dr)| {
            let mut raw = [0u8; 256];
            raw.copy_from_slice(&bytes);
            let s = Smp::mut_from(&mut raw).unwrap();
            s.header.base_version = 1;
            s.header.class_version = if am % 17 == 0 { 2 } else { 1 };
            s.header.mgmt_class = if dr { 0x81 } else { 0x01 };
            s.header.method = METHODS[m];
            s.header.attribute_id = zerocopy::byteorder::network_endian::U16::new(ATTRS[a]);
            s.set_attribute_modifier(am);
            s.set_m_key(mad_core::MKey(0));
            s.clone()
        })
}

fn check_one<const P: usize, const L: usize, const M: usize>(
    sma: &mut Sma<P, L, M>,
    smp: &Smp,
    port: u8,
) -> Result<(), TestCaseError> {
    let before = sma.model.clone();
    let mut walked = smp.clone();
    // Through the SMI first, as the node would.
    let deliver = !walked.is_directed()
        || matches!(
            dr::on_arrival(&mut walked, &sma.model, port),
            Disposition::Deliver
        );
    if !deliver {
        prop_assert!(sma.model == before, "the SMI alone changes no state");
        return Ok(());
    }
    let resp = sma.process(&walked, port, 1);
    let changed = !before.same_but_m_key_state(&sma.model);
    let nports = sma.model.node_info.num_ports;
    if port > nports || (port == 0 && !sma.model.is_switch()) {
        prop_assert!(
            resp.is_none() && !changed,
            "an SMP cannot arrive on a port the node lacks"
        );
        return Ok(());
    }
    match &resp {
        Some(r) => {
            prop_assert_eq!(r.method(), Method::GetResp);
            if r.status() != Status::OK || walked.method() == Method::Get {
                prop_assert!(
                    !changed,
                    "status {:?} for {:?} but the model changed",
                    r.status(),
                    walked.attribute_id()
                );
            }
            if walked.is_directed() {
                prop_assert!(r.direction(), "a directed-route response carries the D bit");
            }
        }
        None => {
            // Only traps, responses and TrapRepress go unanswered (no M_Key is set).
            let m = walked.method();
            prop_assert!(
                matches!(m, Method::Trap | Method::GetResp | Method::TrapRepress),
                "{:?} unanswered",
                m
            );
            prop_assert!(!changed);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn channel_adapter(smp in smp_strategy(), port in 0u8..4) {
        let mut c = CaSma::new(&NodeSpec::ca(0x10, 2, "ca"));
        c.link_event(1, true, 0);
        check_one(&mut c, &smp, port)?;
    }

    #[test]
    fn switch(smps in proptest::collection::vec(smp_strategy(), 1..8), port in 0u8..40) {
        let mut s = Box::new(SwitchSma::new(&NodeSpec::switch(0x20, 36, "sw")));
        for p in 1..=36 {
            s.link_event(p, true, 0);
        }
        for smp in &smps {
            check_one(&mut s, smp, port)?;
        }
    }
}

#[test]
fn vswitch_hca_survives_arbitrary_smps() {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            let mut runner =
                proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(200));
            let h = std::cell::RefCell::new(Box::new(VSwitchHca::new(0x9000, 8)));
            h.borrow_mut().link_event(true, 0);
            runner
                .run(&smp_strategy(), |smp| {
                    let mut h = h.borrow_mut();
                    let _ = h.process(smp.clone(), 1);
                    let _ = h.process_to_lid(&smp, mad_core::Lid(1), 1);
                    Ok(())
                })
                .unwrap();
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn attribute_ids_used_above_are_known_to_mad_core() {
    // Keeps the list honest: all but the deliberately unknown one decode by name.
    let known = ATTRS
        .iter()
        .filter(|&&a| AttributeId::from(a).name().is_some())
        .count();
    assert_eq!(known, ATTRS.len() - 1);
}
