//! Two nodes that answer with one port GUID, on Debian's ibsim, managed by
//! OpenSM and by ibkit's SM in turn. ibsim gives a CA's port N the GUID
//! node GUID + N, and checks only node GUIDs for duplicates: a CA whose
//! node GUID is a switch's minus one has the switch's port GUID on its
//! port 1, the GUID a GID is made of. OpenSM refuses such a second port
//! (its ERR 0D15, "Duplicate Port GUID"); ibkit's SM must too: the switch
//! keeps the GUID and its LID, the CA gets no LID, and every other port
//! is brought up as without it. Needs the peer tools (else SKIPPED, or a
//! failure under IBKIT_REQUIRE_PEERS=1).

use fabric::topology::Topology;
use mad_core::attr::NodeType;
use smi::sm::Engine;
use tests::peers::{run_opensm_on, Ibsim};

mod common;
use common::{ibkit_sm_once, own_lid, peers_with_smpquery};

/// `topo` with its last CA made a forger: its node GUID becomes a
/// switch's minus one, so that its port 1 answers with that switch's port
/// GUID. The CA's name and the GUID.
fn with_forger(topo: &mut Topology) -> (String, u64) {
    let ca = (0..topo.nodes.len())
        .rev()
        .find(|&i| topo.nodes[i].kind == NodeType::ChannelAdapter)
        .unwrap();
    let used = |g: u64, t: &Topology| {
        t.nodes
            .iter()
            .any(|n| n.guid == g || (n.kind == NodeType::ChannelAdapter && n.guid + 1 == g))
    };
    let guid = (topo.nodes.iter())
        .filter(|n| n.kind == NodeType::Switch)
        .map(|n| n.guid)
        .find(|&g| !used(g - 1, topo))
        .expect("a switch GUID with a free GUID below it");
    topo.nodes[ca].guid = guid - 1;
    topo.nodes[ca].name = "H-forger".to_string();
    (topo.nodes[ca].name.clone(), guid)
}

/// Every CA but `except` holds a LID, as `ibaddr` on it reads its port.
fn others_have_lids(sim: &Ibsim, topo: &Topology, except: &str, who: &str) {
    for n in &topo.nodes {
        if n.kind == NodeType::ChannelAdapter && n.name != except {
            let lid = own_lid(sim, &n.name);
            assert!(lid.is_some_and(|l| l != 0), "{who}: {} has {lid:?}", n.name);
        }
    }
}

/// The forger holds no LID, as `ibaddr` on it reads, and every other CA
/// holds one: what `who` left.
fn forger_alone_without_lid(sim: &Ibsim, topo: &Topology, forger: &str, who: &str) {
    assert_eq!(own_lid(sim, forger), Some(0), "{who} gave the forger a LID");
    others_have_lids(sim, topo, forger, who);
}

#[test]
fn opensm_and_ibkit_refuse_a_second_port_with_a_switchs_port_guid_on_ibsim() {
    if !peers_with_smpquery("duplicate_guid_ibsim") {
        return;
    }
    let mut topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let (forger, guid) = with_forger(&mut topo);
    let dir = std::env::temp_dir().join(format!("ibkit-dup-guid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // OpenSM: ERR 0D15, and the CA is left without a LID.
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let run = run_opensm_on(&sim, Engine::MinHop, &dir).unwrap();
    assert!(run.up, "OpenSM: SUBNET UP");
    let log = std::fs::read_to_string(dir.join("opensm.log")).unwrap();
    let said = format!("Duplicate Port GUID {guid:#x}");
    assert!(
        log.lines()
            .any(|l| l.contains("ERR 0D15") && l.contains(&said)),
        "OpenSM's log has no \"ERR 0D15: {said}\""
    );
    forger_alone_without_lid(&sim, &topo, &forger, "OpenSM");
    drop(sim);

    // ibkit's SM on a fresh ibsim of the same fabric: the same.
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let (v, err) = ibkit_sm_once(&sim);
    assert_eq!(v["nodes"], topo.nodes.len() - 1, "the forger is not a node");
    let line = err
        .lines()
        .find(|l| l.contains("duplicate port GUID"))
        .unwrap_or_else(|| panic!("ibkit logged no duplicate port GUID: {err}"));
    assert!(line.contains(&format!("{guid:#018x}")), "{line}");
    forger_alone_without_lid(&sim, &topo, &forger, "ibkit");
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}
