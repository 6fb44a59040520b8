//! The link parameters the SM writes as each link comes up
//! ([`smi::sm::LinkParams`], OpenSM's options): on fat-tree-324, every
//! switch port cabled to a CA has the leaf HOQLife and VLStallCount,
//! every one cabled to a switch the others, every linked port the error
//! thresholds and OperationalVLs, every switch its LifeTimeValue; and it
//! costs no SMP.

use fabric::sim::{SimConfig, SimNode};
use mad_core::attr::{NodeType, PortInfo, VlCap};
use smi::sm::{LinkParams, SmConfig};

#[test]
fn every_linked_port_gets_the_link_parameters_at_no_smps_cost() {
    let spec = "fat-tree-324";
    let link = LinkParams {
        hoq_lifetime: 19,
        leaf_hoq_lifetime: 14,
        vl_stall_count: 5,
        leaf_vl_stall_count: 6,
        max_op_vls: 3,
        local_phy_errors_threshold: 9,
        overrun_errors_threshold: 10,
        packet_life_time: 20,
        sm_sl: 3,
    };
    let (_, plain, up) =
        fabric::sim::bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let cfg = SmConfig {
        link,
        ..SmConfig::default()
    };
    let (f, sm, up) = fabric::sim::bring_up(spec, SimConfig::default(), cfg).unwrap();
    assert!(up, "{:?}", sm.error());
    assert_eq!(sm.stats().total(), plain.stats().total(), "no SMP more");
    let info = |i: usize, p: u8| -> PortInfo {
        match &f.nodes[i] {
            SimNode::Switch(s) => s.model.ports[usize::from(p)].info,
            SimNode::Ca(c) => c.model.ports[usize::from(p)].info,
            SimNode::Hypervisor(h) => h.pf.model.ports[usize::from(p)].info,
        }
    };
    let (mut leaf, mut inter, mut cas) = (0, 0, 0);
    for (i, n) in f.topo.nodes.iter().enumerate() {
        if let SimNode::Switch(s) = &f.nodes[i] {
            assert_eq!(s.model.switch_info.life_time_value, 20, "{}", n.name);
        }
        for p in 1..=n.ports {
            let Some((m, _)) = f.topo.peer_of(i, p) else {
                continue;
            };
            let pi = info(i, p);
            assert_eq!(
                (pi.operational_vls, pi.local_phy_errors, pi.overrun_errors),
                (VlCap::Vl0To3, 9, 10),
                "{} port {p}",
                n.name
            );
            if n.kind != NodeType::Switch {
                assert_eq!(pi.master_sm_sl, 3, "{}", n.name);
                cas += 1;
                continue;
            }
            let to_ca = f.topo.nodes[m].kind != NodeType::Switch;
            let want = if to_ca { (14, 6) } else { (19, 5) };
            assert_eq!(
                (pi.hoq_life, pi.vl_stall_count),
                want,
                "{} port {p}",
                n.name
            );
            if to_ca {
                leaf += 1;
            } else {
                inter += 1;
            }
        }
    }
    assert_eq!((leaf, inter, cas), (324, 648, 324));
}

/// Set(PortInfo) sent by `sm` so far.
fn port_info_sets(sm: &smi::sm::Sm) -> u64 {
    let key = (
        mad_core::Method::Set.into(),
        mad_core::attr::AttributeId::PortInfo.into(),
    );
    sm.stats().sent().get(&key).copied().unwrap_or(0)
}

/// An SM started on a running subnet (a restart, a takeover) sets again
/// the HOQLife and VLStallCount of the switch ports already Active where
/// they differ from its own, and only there: a restart with other values
/// costs one Set(PortInfo) per cabled switch port more than a restart
/// with the same ones, and leaves every port with the new values.
#[test]
fn an_sm_started_on_a_running_subnet_sets_the_switch_ports_that_differ() {
    let spec = "fat-tree-324";
    let (mut f, first, up) =
        fabric::sim::bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up, "{:?}", first.error());
    let mut same = smi::sm::Sm::new(SmConfig::default());
    assert!(f.bring_up(&mut same));
    let baseline = port_info_sets(&same);
    let link = LinkParams {
        hoq_lifetime: 19,
        leaf_hoq_lifetime: 14,
        vl_stall_count: 5,
        leaf_vl_stall_count: 6,
        ..LinkParams::default()
    };
    let cfg = SmConfig {
        link,
        ..SmConfig::default()
    };
    let mut other = smi::sm::Sm::new(cfg.clone());
    assert!(f.bring_up(&mut other));
    let cabled: u64 = (0..f.topo.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::Switch)
        .map(|i| {
            (1..=f.topo.nodes[i].ports)
                .filter(|&p| f.topo.peer_of(i, p).is_some())
                .count() as u64
        })
        .sum();
    assert_eq!(cabled, 972);
    assert_eq!(port_info_sets(&other), baseline + cabled);
    for (i, n) in f.topo.nodes.iter().enumerate() {
        let SimNode::Switch(s) = &f.nodes[i] else {
            continue;
        };
        for p in 1..=n.ports {
            let Some((m, _)) = f.topo.peer_of(i, p) else {
                continue;
            };
            let pi = s.model.ports[usize::from(p)].info;
            let to_ca = f.topo.nodes[m].kind != NodeType::Switch;
            let want = if to_ca { (14, 6) } else { (19, 5) };
            assert_eq!(
                (pi.hoq_life, pi.vl_stall_count),
                want,
                "{} port {p}",
                n.name
            );
        }
    }
    let mut again = smi::sm::Sm::new(cfg);
    assert!(f.bring_up(&mut again));
    assert_eq!(port_info_sets(&again), baseline, "nothing differs now");
}
