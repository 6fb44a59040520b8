//! Multi-port CAs on Debian's ibsim, managed by OpenSM and by ibkit's SM
//! in turn: a two-port HCA on two leaves, one with both ports on one
//! leaf, and the SM's own host with a second port. OpenSM gives every
//! cabled CA port a LID of its own; so must ibkit's SM. `ibnetdiscover`
//! (which ibkit did not write) reads each port's LID. Needs the peer tools
//! (else SKIPPED, or a failure under IBKIT_REQUIRE_PEERS=1).

use fabric::topology::{parse_ibnetdiscover, Topology};
use mad_core::attr::NodeType;
use smi::sm::Engine;
use std::collections::BTreeMap;
use tests::peers::{run_opensm_on, Ibsim, Simulator};

mod common;
use common::{ibkit_sm_once, peers_with_smpquery};

/// Every CA port's LID as `ibnetdiscover` from `host` reads it, from the
/// switch ports they are cabled to (`[2] "H-<guid>"[1](…) # "D" lid 5 …`):
/// (CA node GUID, CA port) → LID.
fn ca_port_lids(sim: &Ibsim, host: &str) -> (BTreeMap<(u64, u8), u16>, String) {
    let out = sim
        .client_at("ibnetdiscover".as_ref(), host)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut m = BTreeMap::new();
    let mut in_switch = false;
    for l in text.lines() {
        if l.starts_with("Switch") || l.starts_with("Ca") {
            in_switch = l.starts_with("Switch");
            continue;
        }
        if !in_switch || !l.starts_with('[') {
            continue;
        }
        let Some(rest) = l.split_once("\"H-").map(|x| x.1) else {
            continue;
        };
        let guid = u64::from_str_radix(&rest[..16], 16).ok();
        let port = (rest.split_once("\"[").map(|x| x.1))
            .and_then(|r| r.split(']').next())
            .and_then(|p| p.parse::<u8>().ok());
        let lid = (l.split(" lid ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok());
        if let (Some(g), Some(p), Some(lid)) = (guid, port, lid) {
            m.insert((g, p), lid);
        }
    }
    (m, text)
}

/// Every cabled CA port of `topo`, as (node GUID, port).
fn ca_ports(topo: &Topology) -> Vec<(u64, u8)> {
    let mut v = Vec::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        if n.kind == NodeType::ChannelAdapter {
            for p in 1..=n.ports {
                if topo.peer_of(i, p).is_some() {
                    v.push((n.guid, p));
                }
            }
        }
    }
    v
}

/// Each cabled CA port holds a LID, and no two the same.
fn every_port_has_its_lid(lids: &BTreeMap<(u64, u8), u16>, topo: &Topology, who: &str, text: &str) {
    let mut seen = std::collections::BTreeSet::new();
    for key in ca_ports(topo) {
        let lid = lids.get(&key).copied().unwrap_or(0);
        assert_ne!(
            lid, 0,
            "{who}: CA {:#x} port {} has no LID:\n{text}",
            key.0, key.1
        );
        assert!(seen.insert(lid), "{who}: LID {lid} twice:\n{text}");
    }
}

#[test]
fn opensm_and_ibkit_give_every_port_of_a_multi_port_ca_its_own_lid_on_ibsim() {
    if !peers_with_smpquery("multiport_ibsim") {
        return;
    }
    let topo = parse_ibnetdiscover(include_str!("../../fabric/tests/data/multiport.topo")).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-multiport-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = ca_ports(&topo).len();
    assert_eq!(ports, 7, "H0, D, E two ports each, H1 one");

    // OpenSM: a LID per cabled CA port.
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let run = run_opensm_on(&sim, Engine::MinHop, &dir).unwrap();
    assert!(run.up, "OpenSM: SUBNET UP");
    let (lids, text) = ca_port_lids(&sim, "H1");
    every_port_has_its_lid(&lids, &topo, "OpenSM", &text);
    drop(sim);

    // ibkit's SM on a fresh ibsim of the same fabric: the same.
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let (v, _) = ibkit_sm_once(&sim);
    assert_eq!(v["nodes"], topo.nodes.len(), "nodes, not ports");
    let (lids, text) = ca_port_lids(&sim, "H1");
    every_port_has_its_lid(&lids, &topo, "ibkit", &text);
    // ibkit's table has a row per CA port, with the LID the port holds.
    let rows: BTreeMap<(u64, u8), u16> = (v["table"].as_array().unwrap().iter())
        .filter(|r| r["switch"] == false)
        .map(|r| {
            let g = r["guid"].as_str().unwrap().trim_start_matches("0x");
            let key = (
                u64::from_str_radix(g, 16).unwrap(),
                r["port"].as_u64().unwrap() as u8,
            );
            (key, r["lid"].as_u64().unwrap() as u16)
        })
        .collect();
    assert_eq!(rows, lids, "ibkit's rows against ibnetdiscover's");
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}
