//! Fabrics an SM could not manage are refused before anything runs, each
//! with its reason: switches wider than the simulated agent, reserved or
//! repeated GUIDs, nodes beyond the reach of a directed route.

use fabric::sim::{Fabric, SimConfig, MAX_SWITCH_PORTS};
use fabric::topology::Topology;
use mad_core::attr::NodeType;

fn new(t: Topology) -> Result<Fabric, String> {
    Fabric::new(t, SimConfig::default()).map_err(|e| e.to_string())
}

#[test]
fn a_switch_wider_than_the_agent_is_refused() {
    let e = new(Topology::from_spec("mport-ntree:100:1").unwrap())
        .err()
        .unwrap();
    assert!(e.contains("100 ports") && e.contains("at most 64"), "{e}");
    // The widest that fits is accepted.
    let m = MAX_SWITCH_PORTS as usize;
    assert!(new(Topology::from_spec(&format!("mport-ntree:{m}:1")).unwrap()).is_ok());
}

#[test]
fn reserved_and_repeated_guids_are_refused() {
    let mut t = Topology::from_spec("mport-ntree:4:2").unwrap();
    let g = t.nodes[3].guid;
    t.nodes[5].guid = g;
    let e = new(t).err().unwrap();
    assert!(e.contains("the same GUID"), "{e}");
    for bad in [0, u64::MAX] {
        let mut t = Topology::from_spec("mport-ntree:4:2").unwrap();
        t.nodes[2].guid = bad;
        let e = new(t).err().unwrap();
        assert!(e.contains("reserved GUID"), "{e}");
    }
}

/// A chain: the SM's CA, then `n` switches in a line.
fn chain(n: usize) -> Topology {
    let mut t = Topology::default();
    let ca = t.add_node(NodeType::ChannelAdapter, 1, 0x1000, "H-0".into(), None);
    let mut prev = (ca, 1u8);
    for i in 0..n {
        let s = t.add_node(
            NodeType::Switch,
            2,
            0x2000 + i as u64,
            format!("S-{i}"),
            None,
        );
        t.connect(prev, (s, 1)).unwrap();
        prev = (s, 2);
    }
    t
}

#[test]
fn nodes_beyond_63_hops_are_refused() {
    assert!(new(chain(63)).is_ok(), "63 hops are reachable");
    let e = new(chain(64)).err().unwrap();
    assert!(e.contains("\"S-63\" is 64 hops") && e.contains("63"), "{e}");
}
