//! Arbitrary text as a topology spec (when short) and as an
//! ibnetdiscover / ibsim topology file: parsed, and
//! what parses is written out, parsed back to the same shape (cable
//! rates and system GUIDs included), and handed
//! to the simulator, which builds it or refuses it with a reason.
#![no_main]

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::{parse_ibnetdiscover, to_ibnetdiscover};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A short text is also tried as a topology spec (a command line's
    // `--topology`): built, or refused with a reason; what is built hangs
    // together.
    if text.len() <= 32 && !text.starts_with("file:") {
        if let Ok(t) = fabric::topology::Topology::from_spec(text) {
            assert!(t.is_connected(), "{text:?} builds a fabric in pieces");
        }
    }
    let Ok(t) = parse_ibnetdiscover(text) else {
        return;
    };
    let again = parse_ibnetdiscover(&to_ibnetdiscover(&t)).expect("what ibkit writes, it reads");
    assert_eq!(
        (again.switches(), again.cas(), again.links()),
        (t.switches(), t.cas(), t.links())
    );
    let esp0 = |t: &fabric::topology::Topology| -> Vec<bool> {
        t.nodes.iter().map(|n| n.enhanced_port0).collect()
    };
    assert_eq!(esp0(&again), esp0(&t), "enhanced ports 0 written as read");
    assert_eq!(again.rates, t.rates, "cable rates written as read");
    let systems = |t: &fabric::topology::Topology| -> Vec<u64> {
        t.nodes.iter().map(|n| n.system_image_guid()).collect()
    };
    assert_eq!(systems(&again), systems(&t), "system GUIDs written as read");
    if t.nodes.len() <= 64 {
        let _ = Fabric::new(t, SimConfig::default());
    }
});
