//! Arbitrary text as `ibkit sm --routing file --lfts-file` (OpenSM's
//! `lfts_file`): read without a panic, refused with a place inside the
//! text, or, given to an SM bringing up a fabric, routed without a panic:
//! the subnet comes up, every entry is a port the switch has (or none),
//! and the switches hold the SM's tables. So that inputs reach the
//! fabric, a switch GUID below 64 names the fabric's switch of that
//! index, and an owner GUID below 64 the port of that index.
#![no_main]

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use libfuzzer_sys::fuzz_target;
use mad_core::attr::NodeType;
use mad_core::Lid;
use smi::sm::{Engine, LftFile, Sm, SmConfig};
use std::sync::OnceLock;

fn topo() -> &'static Topology {
    static TOPO: OnceLock<Topology> = OnceLock::new();
    TOPO.get_or_init(|| Topology::from_spec("mport-ntree:4:2").unwrap())
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut file = match LftFile::parse(text) {
        Err(e) => {
            assert!(e.line >= 1 && e.line <= text.lines().count(), "{e}");
            assert!(e.column >= 1 && e.column <= text.len() + 1, "{e}");
            return;
        }
        Ok(f) => f,
    };
    assert!(file.routes() + file.switches.len() <= text.lines().count());
    let t = topo();
    let switches: Vec<u64> = (t.nodes.iter())
        .filter(|n| n.kind == NodeType::Switch)
        .map(|n| n.guid)
        .collect();
    // A CA's port GUID is its node GUID plus its port (as the topology
    // gives them); a switch's, its node GUID.
    let ports: Vec<u64> = (t.nodes.iter())
        .map(|n| n.guid + u64::from(n.kind != NodeType::Switch))
        .collect();
    for sw in &mut file.switches {
        if let Some(&g) = switches.get(sw.guid as usize) {
            sw.guid = g;
        }
        for r in &mut sw.routes {
            if let Some(&g) = ports.get(r.port_guid as usize) {
                r.port_guid = g;
            }
        }
    }
    let mut f = Fabric::new(t.clone(), SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig {
        routing: Engine::File,
        lfts_file: Some(file),
        ..SmConfig::default()
    });
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    for (i, table) in sm.lfts() {
        let n = &sm.nodes()[i];
        let j = f.node_by_guid(n.info.node_guid.0).unwrap();
        for (lid, &port) in table.iter().enumerate() {
            assert!(
                port == 0xFF || port <= n.info.num_ports,
                "LID {lid}: port {port}"
            );
            if lid > 0 {
                assert_eq!(f.nodes[j].lft_port(Lid(lid as u16)), port, "LID {lid}");
            }
        }
    }
});
