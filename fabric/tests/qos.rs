//! QoS applied by ibkit's SM on simulated fabrics: the SL-to-VL and VL
//! arbitration tables the simulated agents hold after a bring-up with
//! OpenSM's `qos_*` options, the SMPs it took (one Set per switch for
//! its SL-to-VL tables where the switch allows it), and a new policy on
//! a running subnet changing only what differs.

use fabric::sim::{Fabric, FabricEvent, SimConfig, SimNode};
use fabric::topology::Topology;
use mad_core::attr::{AttributeId, NodeType, PortInfo, PortState, VlArbitrationTable};
use mad_core::Method;
use smi::sm::qos::{parse, QosClass, QosConfig};
use smi::sm::{Sm, SmConfig};

/// A port of a fabric node: its PortInfo, SL-to-VL tables by input port
/// and VL arbitration blocks.
fn port(f: &Fabric, i: usize, port: u8) -> (PortInfo, Vec<[u8; 16]>, [VlArbitrationTable; 4]) {
    let at = usize::from(port);
    macro_rules! of {
        ($p:expr) => {{
            let p = &$p.ports[at];
            (p.info, p.sl2vl.iter().map(|t| t.vl).collect(), p.vl_arb)
        }};
    }
    match &f.nodes[i] {
        SimNode::Switch(s) => of!(s.model),
        SimNode::Ca(c) => of!(c.model),
        SimNode::Hypervisor(h) => of!(h.pf.model),
    }
}

/// What a port should hold under `class`, its VLs masked to VL0–7 (the
/// simulated ports' OperationalVLs) and 8 entries per VL arbitration
/// block (their caps).
fn check(f: &Fabric, i: usize, p: u8, class: &QosClass, inputs: &[u8]) {
    let (pi, sl2vl, arb) = port(f, i, p);
    let name = &f.topo.nodes[i].name;
    assert_eq!(u8::from(pi.operational_vls), 4, "{name}/{p}");
    assert_eq!(pi.vl_high_limit, class.high_limit, "{name}/{p}");
    let want: Vec<u8> = class
        .sl2vl
        .iter()
        .map(|&v| if v == 15 { 15 } else { v & 7 })
        .collect();
    for &x in inputs {
        assert_eq!(sl2vl[usize::from(x)][..], want[..], "{name} in {x} out {p}");
    }
    for (block, table) in [(0, &class.vlarb_low), (2, &class.vlarb_high)] {
        for (k, (e, w)) in arb[block].entries.iter().zip(table.iter()).enumerate() {
            let (vl, weight) = if k < 8 { (w.vl & 7, w.weight) } else { (0, 0) };
            assert_eq!(
                (e.vl, e.weight),
                (vl, weight),
                "{name}/{p} block {block} entry {k}"
            );
        }
    }
}

/// The fabric `spec`, switches made to refuse optimized SL-to-VL
/// programming when `plain_switches`, brought up with `qos`.
fn up_with(spec: &str, qos: Option<QosConfig>, plain_switches: bool) -> (Fabric, Sm) {
    let mut f = Fabric::new(Topology::from_spec(spec).unwrap(), SimConfig::default()).unwrap();
    if plain_switches {
        for n in f.nodes.iter_mut() {
            if let SimNode::Switch(s) = n {
                s.model.switch_info.optimized_sl_to_vl_mapping_programming = 0;
            }
        }
    }
    let mut sm = Sm::new(SmConfig::default());
    if let Some(q) = qos {
        assert_eq!(sm.set_qos(q), 0);
    }
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    (f, sm)
}

fn sets(sm: &Sm, attr: AttributeId) -> u64 {
    sm.stats().count(Method::Set, attr)
}

/// Every switch external port cabled to something, and every CA.
fn ports(f: &Fabric) -> (Vec<(usize, u8)>, Vec<usize>) {
    let mut sw = Vec::new();
    let mut ca = Vec::new();
    for (i, n) in f.topo.nodes.iter().enumerate() {
        if n.kind == NodeType::Switch {
            for p in 1..=n.ports {
                if f.topo.peer[i][usize::from(p)].is_some() {
                    sw.push((i, p));
                }
            }
        } else {
            ca.push(i);
        }
    }
    (sw, ca)
}

#[test]
fn opensm_defaults_on_fat_tree_324_cost_one_sl2vl_set_per_switch() {
    let cfg = parse("").unwrap();
    let (f, sm) = up_with("fat-tree-324", Some(cfg.clone()), false);
    let (sw, ca) = ports(&f);
    let switches = f
        .topo
        .nodes
        .iter()
        .filter(|n| n.kind == NodeType::Switch)
        .count();
    for &(i, p) in &sw {
        let all: Vec<u8> = (0..=f.topo.nodes[i].ports).collect();
        check(&f, i, p, &cfg.swe, &all);
    }
    for &i in &ca {
        check(&f, i, 1, &cfg.ca, &[0]);
    }
    // One SL-to-VL Set per switch (AllInputPorts | AllOutputPorts), one
    // per CA; VL arbitration: a low and a high block on every port.
    assert_eq!(
        sets(&sm, AttributeId::SlToVlMappingTable),
        (switches + ca.len()) as u64
    );
    assert_eq!(
        sets(&sm, AttributeId::VlArbitrationTable),
        2 * (sw.len() + ca.len()) as u64
    );
    let (_, plain) = up_with("fat-tree-324", None, false);
    assert_eq!(sets(&plain, AttributeId::SlToVlMappingTable), 0);
    // The VLHighLimit (0) rides on the activation: no Set(PortInfo) more.
    assert_eq!(
        sets(&sm, AttributeId::PortInfo),
        sets(&plain, AttributeId::PortInfo)
    );
    let extra = sm.stats().total() - plain.stats().total();
    println!(
        "fat-tree-324, OpenSM's default QoS: {} Set(SLtoVL), {} Set(VLArb), {} SMPs in all \
         against {} without QoS (+{extra}, {:.1}%)",
        sets(&sm, AttributeId::SlToVlMappingTable),
        sets(&sm, AttributeId::VlArbitrationTable),
        sm.stats().total(),
        plain.stats().total(),
        100.0 * extra as f64 / plain.stats().total() as f64
    );
    // The SM knows what it wrote: the SA's records come from it.
    let sub = sm.subnet();
    assert_eq!(sub.vlarb_blocks().count(), 2 * (sw.len() + ca.len()));
    assert!(sub
        .sl2vl_tables()
        .all(|(_, _, _, t)| t[8] == 0 && t[15] == 7));
}

#[test]
fn switches_without_optimized_programming_get_a_set_per_input_and_output() {
    let text = "qos_swe_sl2vl 0,1,2,3,4,5,6,7,15,15,15,15,15,15,15,15\nqos_ca_high_limit 2\n\
                qos_swe_high_limit 3\nqos_sw0_high_limit 6\n\
                qos_vlarb_high 0:1,1:2,2:3,3:4,4:5,5:6,6:7,7:8,8:9\n";
    let cfg = parse(text).unwrap();
    let (f, sm) = up_with("mport-ntree:4:2", Some(cfg.clone()), true);
    let (sw, ca) = ports(&f);
    let mut pairs = 0;
    for &(i, p) in &sw {
        let all: Vec<u8> = (0..=f.topo.nodes[i].ports).collect();
        pairs += all.len();
        check(&f, i, p, &cfg.swe, &all);
    }
    for &i in &ca {
        check(&f, i, 1, &cfg.ca, &[0]);
        assert_eq!(port(&f, i, 1).0.vl_high_limit, 2);
    }
    // A base switch port 0 carries no data: its VLHighLimit is left as it
    // came up, whatever qos_sw0_high_limit says (as OpenSM leaves it).
    for &(i, _) in &sw {
        assert_eq!(port(&f, i, 0).0.vl_high_limit, 0);
    }
    assert_eq!(
        sets(&sm, AttributeId::SlToVlMappingTable),
        (pairs + ca.len()) as u64
    );
}

/// OpenSM's `use_optimized_slvl FALSE` (its default): switches that take
/// one Set for all their ports still get one a pair, exactly as many as
/// switches without the capability get, and the same tables.
#[test]
fn without_use_optimized_slvl_switches_get_a_set_per_input_and_output() {
    let cfg = parse("").unwrap();
    let (_, plain) = up_with("mport-ntree:4:2", Some(cfg.clone()), true);
    let mut f = Fabric::new(
        Topology::from_spec("mport-ntree:4:2").unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    let mut sm = Sm::new(SmConfig {
        use_optimized_slvl: false,
        ..SmConfig::default()
    });
    assert_eq!(sm.set_qos(cfg.clone()), 0);
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    let (sw, ca) = ports(&f);
    for &(i, p) in &sw {
        let all: Vec<u8> = (0..=f.topo.nodes[i].ports).collect();
        check(&f, i, p, &cfg.swe, &all);
    }
    for &i in &ca {
        check(&f, i, 1, &cfg.ca, &[0]);
    }
    let pairs: usize = sw
        .iter()
        .map(|&(i, _)| usize::from(f.topo.nodes[i].ports) + 1)
        .sum();
    let n = sets(&sm, AttributeId::SlToVlMappingTable);
    assert_eq!(n, (pairs + ca.len()) as u64);
    assert_eq!(n, sets(&plain, AttributeId::SlToVlMappingTable));
    let (_, optimized) = up_with("mport-ntree:4:2", Some(cfg), false);
    assert!(sets(&optimized, AttributeId::SlToVlMappingTable) < n);
}

#[test]
fn a_new_policy_on_a_running_subnet_sends_only_the_difference() {
    let (mut f, mut sm) = up_with("fat-tree-324", Some(parse("").unwrap()), false);
    let (_, ca) = ports(&f);
    let before = sm.stats().total();
    // Another CA SL-to-VL table and a CA high limit: one SL-to-VL Set and
    // one Set(PortInfo) per CA, nothing on the switches.
    let second =
        parse("qos_ca_sl2vl 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\nqos_ca_high_limit 5\n").unwrap();
    let queued = sm.set_qos(second.clone());
    assert!(f.run(&mut sm));
    assert!(sm.is_idle());
    assert_eq!(queued, 2 * ca.len());
    assert_eq!(sm.stats().total() - before, 2 * ca.len() as u64);
    for &i in &ca {
        check(&f, i, 1, &second.ca, &[0]);
        assert_eq!(port(&f, i, 1).0.port_state, PortState::Active);
    }
    // The same policy again: nothing to send.
    assert_eq!(sm.set_qos(second), 0);
}

#[test]
fn a_host_that_comes_back_freshly_powered_gets_its_tables_again() {
    let cfg = parse("qos_ca_vlarb_low 1:9,2:9\n").unwrap();
    let (mut f, mut sm) = up_with("mport-ntree:4:2", Some(cfg.clone()), false);
    let (_, ca) = ports(&f);
    let host = *ca.iter().find(|&&i| i != f.sm_node).unwrap();
    const MS: u64 = 1_000_000;
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(host));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    let before = (
        sets(&sm, AttributeId::SlToVlMappingTable),
        sets(&sm, AttributeId::VlArbitrationTable),
    );
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeUp(host));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    assert!(sm.is_idle());
    check(&f, host, 1, &cfg.ca, &[0]);
    assert_eq!(sets(&sm, AttributeId::SlToVlMappingTable) - before.0, 1);
    assert_eq!(sets(&sm, AttributeId::VlArbitrationTable) - before.1, 2);
}

/// A switch that reboots (its cables fail, it comes back freshly powered)
/// gets every external port's tables again: SL-to-VL for every input
/// port, VL arbitration, VLHighLimit.
#[test]
fn a_switch_that_reboots_gets_its_tables_again() {
    let cfg = parse("qos_swe_vlarb_low 1:7,3:5\nqos_swe_high_limit 2\n").unwrap();
    let (mut f, mut sm) = up_with("mport-ntree:4:2", Some(cfg.clone()), false);
    let (sw, _) = ports(&f);
    let sm_leaf = f.topo.peer[f.sm_node][1].unwrap().0;
    let (leaf, _) = *sw.iter().find(|&&(i, _)| i != sm_leaf).unwrap();
    let all: Vec<u8> = (0..=f.topo.nodes[leaf].ports).collect();
    const MS: u64 = 1_000_000;
    let before = (
        sets(&sm, AttributeId::SlToVlMappingTable),
        sets(&sm, AttributeId::VlArbitrationTable),
    );
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(leaf));
    f.schedule(t + 1_000 * MS, FabricEvent::NodeUp(leaf));
    assert!(f.run_until(&mut sm, t + 4_000 * MS));
    assert!(sm.is_idle());
    for &(i, p) in sw.iter().filter(|&&(i, _)| i == leaf) {
        check(&f, i, p, &cfg.swe, &all);
        assert_eq!(port(&f, i, p).0.port_state, PortState::Active);
    }
    assert!(sets(&sm, AttributeId::SlToVlMappingTable) > before.0);
    assert!(sets(&sm, AttributeId::VlArbitrationTable) > before.1);
}
