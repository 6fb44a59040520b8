//! The link parameters the SM writes as each link comes up
//! ([`smi::sm::LinkParams`], OpenSM's options): on fat-tree-324, every
//! switch port cabled to a CA has the leaf HOQLife and VLStallCount,
//! every one cabled to a switch the others, every linked port the error
//! thresholds and OperationalVLs, every switch its LifeTimeValue; and it
//! costs no SMP.

use fabric::sim::{Fabric, SimConfig, SimNode};
use mad_core::attr::{NodeType, PortInfo, VlCap};
use smi::sm::{LinkParams, SmConfig};

/// The site's HOQLife and VLStallCount: (switch to switch, switch to CA).
const HOQ_STALL: [(u8, u8); 2] = [(19, 5), (14, 6)];

/// Every cabled port: its node, number, PortInfo, and whether its node is
/// a switch and its peer a CA.
fn cabled_ports(f: &Fabric) -> Vec<(usize, u8, PortInfo, bool, bool)> {
    let mut v = Vec::new();
    for (i, n) in f.topo.nodes.iter().enumerate() {
        for p in 1..=n.ports {
            let Some((m, _)) = f.topo.peer_of(i, p) else {
                continue;
            };
            let pi = match &f.nodes[i] {
                SimNode::Switch(s) => s.model.ports[usize::from(p)].info,
                SimNode::Ca(c) => c.model.ports[usize::from(p)].info,
                SimNode::Hypervisor(h) => h.pf.model.ports[usize::from(p)].info,
            };
            let switch = n.kind == NodeType::Switch;
            let to_ca = f.topo.nodes[m].kind != NodeType::Switch;
            v.push((i, p, pi, switch, to_ca));
        }
    }
    v
}

/// Every switch port holds the site's HOQLife and VLStallCount for its
/// peer; returns (ports cabled to CAs, ports cabled to switches).
fn switch_ports_hold_the_sites_values(f: &Fabric) -> (usize, usize) {
    let mut n = (0, 0);
    for (i, p, pi, switch, to_ca) in cabled_ports(f) {
        if !switch {
            continue;
        }
        let want = HOQ_STALL[usize::from(to_ca)];
        let name = &f.topo.nodes[i].name;
        assert_eq!((pi.hoq_life, pi.vl_stall_count), want, "{name} port {p}");
        if to_ca {
            n.0 += 1;
        } else {
            n.1 += 1;
        }
    }
    n
}

fn site_link() -> LinkParams {
    LinkParams {
        hoq_lifetime: HOQ_STALL[0].0,
        leaf_hoq_lifetime: HOQ_STALL[1].0,
        vl_stall_count: HOQ_STALL[0].1,
        leaf_vl_stall_count: HOQ_STALL[1].1,
        ..LinkParams::default()
    }
}

#[test]
fn every_linked_port_gets_the_link_parameters_at_no_smps_cost() {
    let spec = "fat-tree-324";
    let link = LinkParams {
        max_op_vls: 3,
        local_phy_errors_threshold: 9,
        overrun_errors_threshold: 10,
        packet_life_time: 20,
        sm_sl: 3,
        ..site_link()
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
    for (i, n) in f.topo.nodes.iter().enumerate() {
        if let SimNode::Switch(s) = &f.nodes[i] {
            assert_eq!(s.model.switch_info.life_time_value, 20, "{}", n.name);
        }
    }
    let mut cas = 0;
    for (i, p, pi, switch, _) in cabled_ports(&f) {
        let name = &f.topo.nodes[i].name;
        assert_eq!(
            (pi.operational_vls, pi.local_phy_errors, pi.overrun_errors),
            (VlCap::Vl0To3, 9, 10),
            "{name} port {p}"
        );
        if !switch {
            assert_eq!(pi.master_sm_sl, 3, "{name}");
            cas += 1;
        }
    }
    assert_eq!(cas, 324);
    assert_eq!(switch_ports_hold_the_sites_values(&f), (324, 648));
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
    let cfg = SmConfig {
        link: site_link(),
        ..SmConfig::default()
    };
    let mut other = smi::sm::Sm::new(cfg.clone());
    assert!(f.bring_up(&mut other));
    let (leaf, inter) = switch_ports_hold_the_sites_values(&f);
    let cabled = (leaf + inter) as u64;
    assert_eq!(cabled, 972);
    assert_eq!(port_info_sets(&other), baseline + cabled);
    let mut again = smi::sm::Sm::new(cfg);
    assert!(f.bring_up(&mut again));
    assert_eq!(port_info_sets(&again), baseline, "nothing differs now");
}

/// HOQLife, VLStallCount, an error threshold, SubnetTimeOut or
/// MasterSMSL changed behind the SM's back on a running subnet (a tool, a
/// switch's own reset of a port) is put back by the next heavy sweep,
/// with one Set(PortInfo) for each port that differs and none for the
/// others; a light sweep, which reads no port that reports no change,
/// leaves it.
#[test]
fn a_heavy_sweep_puts_back_the_link_parameters_that_changed() {
    const MS: u64 = 1_000_000;
    let (mut f, mut sm, up) =
        fabric::sim::bring_up("fat-tree-324", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up, "{:?}", sm.error());
    let want = LinkParams::default();
    // Three switch ports: two toward switches, one toward a CA.
    let mut touched = Vec::new();
    for (i, p, _, switch, to_ca) in cabled_ports(&f) {
        if switch
            && touched
                .iter()
                .filter(|t: &&(usize, u8, bool)| t.2 == to_ca)
                .count()
                < 2 - usize::from(to_ca)
        {
            touched.push((i, p, to_ca));
        }
    }
    assert_eq!(touched.len(), 3);
    for &(i, p, _) in &touched {
        let SimNode::Switch(s) = &mut f.nodes[i] else {
            unreachable!()
        };
        let pi = &mut s.model.ports[usize::from(p)].info;
        pi.hoq_life = 3;
        pi.vl_stall_count = 1;
    }
    let hoq = |f: &Fabric| -> Vec<(u8, u8)> {
        touched
            .iter()
            .map(|&(i, p, _)| match &f.nodes[i] {
                SimNode::Switch(s) => {
                    let pi = s.model.ports[usize::from(p)].info;
                    (pi.hoq_life, pi.vl_stall_count)
                }
                _ => unreachable!(),
            })
            .collect()
    };
    // A fourth switch port's error threshold, a switch's port 0 and a CA's
    // port: their SubnetTimeOut, and the CA's MasterSMSL.
    let (sw, sp, _, _, _) = cabled_ports(&f)
        .into_iter()
        .find(|&(i, p, _, switch, _)| switch && !touched.iter().any(|t| (t.0, t.1) == (i, p)))
        .unwrap();
    let ca = (0..f.nodes.len())
        .find(|&i| matches!(f.nodes[i], SimNode::Ca(_)))
        .unwrap();
    let sw0 = (0..f.nodes.len())
        .find(|&i| matches!(f.nodes[i], SimNode::Switch(_)) && i != sw)
        .unwrap();
    let others = |f: &mut Fabric| {
        let (a, b, c) = match (&f.nodes[sw], &f.nodes[sw0], &f.nodes[ca]) {
            (SimNode::Switch(a), SimNode::Switch(b), SimNode::Ca(c)) => (
                a.model.ports[usize::from(sp)].info,
                b.model.ports[0].info,
                c.model.ports[1].info,
            ),
            _ => unreachable!(),
        };
        (
            a.local_phy_errors,
            b.subnet_time_out,
            c.subnet_time_out,
            c.master_sm_sl,
        )
    };
    let set_others = |f: &mut Fabric, v: (u8, u8, u8, u8)| {
        if let SimNode::Switch(a) = &mut f.nodes[sw] {
            a.model.ports[usize::from(sp)].info.local_phy_errors = v.0;
        }
        if let SimNode::Switch(b) = &mut f.nodes[sw0] {
            b.model.ports[0].info.subnet_time_out = v.1;
        }
        if let SimNode::Ca(c) = &mut f.nodes[ca] {
            c.model.ports[1].info.subnet_time_out = v.2;
            c.model.ports[1].info.master_sm_sl = v.3;
        }
    };
    let right = others(&mut f);
    assert_eq!(
        right,
        (want.local_phy_errors_threshold, 18, 18, want.sm_sl),
        "as the bring-up wrote them"
    );
    set_others(&mut f, (2, 9, 10, 5));
    let before = port_info_sets(&sm);
    sm.request_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert_eq!(port_info_sets(&sm), before, "a light sweep sets nothing");
    assert_eq!(hoq(&f), vec![(3, 1); 3]);
    assert_eq!(others(&mut f), (2, 9, 10, 5));
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert_eq!(
        port_info_sets(&sm),
        before + 6,
        "one Set for each port that differs"
    );
    let put_back: Vec<(u8, u8)> = touched
        .iter()
        .map(|&(_, _, to_ca)| {
            if to_ca {
                (want.leaf_hoq_lifetime, want.leaf_vl_stall_count)
            } else {
                (want.hoq_lifetime, want.vl_stall_count)
            }
        })
        .collect();
    assert_eq!(hoq(&f), put_back);
    assert_eq!(others(&mut f), right);
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert_eq!(port_info_sets(&sm), before + 6, "nothing differs now");
}

/// LinkWidthEnabled, LinkSpeedEnabled and LinkSpeedExtEnabled.
type Enabled = (u8, u8, u8);

/// [`Enabled`] of every cabled port, by (node, port).
fn enabled(f: &Fabric) -> Vec<((usize, u8), Enabled)> {
    cabled_ports(f)
        .into_iter()
        .map(|(i, p, pi, _, _)| {
            let e = (
                pi.link_width_enabled.bits(),
                pi.link_speed_enabled.bits(),
                pi.link_speed_ext_enabled.bits(),
            );
            ((i, p), e)
        })
        .collect()
}

/// OpenSM's `force_link_width` and `force_link_speed`: a site's values
/// reach every cabled port, each on one Set(PortInfo) of its own before
/// the one that arms it (as OpenSM's link manager sends it; ibsim would
/// ignore them on the arming Set); OpenSM's defaults (255 and 15, "set to supported") change
/// nothing on ports whose speeds are all enabled and that cannot do 2X
/// (the 255 asks for 2X too, which OpenSM writes only where the port
/// advertises it). An SM restarted with the site's values on a subnet
/// brought up without them sets each cabled port once; restarted again,
/// none.
#[test]
fn forced_link_width_and_speed_reach_every_cabled_port() {
    let spec = "fat-tree-324";
    let (mut f, plain, up) =
        fabric::sim::bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let before = enabled(&f);
    assert_eq!(before.len(), 972 + 324);
    assert!(
        before.iter().all(|(_, e)| *e == (2, 7, 0)),
        "defaults: 4X, SDR|DDR|QDR, as the ports start"
    );
    let site = SmConfig {
        link: LinkParams {
            force_link_width: 1,
            force_link_speed: 3,
            ..LinkParams::default()
        },
        ..SmConfig::default()
    };
    let (fresh, forced, up) =
        fabric::sim::bring_up(spec, SimConfig::default(), site.clone()).unwrap();
    assert!(up, "{:?}", forced.error());
    assert_eq!(
        port_info_sets(&forced),
        port_info_sets(&plain) + 972 + 324,
        "one Set(PortInfo) more for each cabled port"
    );
    assert_eq!(forced.stats().total(), plain.stats().total() + 972 + 324);
    assert!(enabled(&fresh).iter().all(|(_, e)| *e == (1, 3, 0)));
    // On the running subnet.
    let mut same = smi::sm::Sm::new(SmConfig::default());
    assert!(f.bring_up(&mut same));
    let baseline = port_info_sets(&same);
    let mut other = smi::sm::Sm::new(site.clone());
    assert!(f.bring_up(&mut other));
    assert_eq!(port_info_sets(&other), baseline + 972 + 324);
    assert!(enabled(&f).iter().all(|(_, e)| *e == (1, 3, 0)));
    let mut again = smi::sm::Sm::new(site);
    assert!(f.bring_up(&mut again));
    assert_eq!(port_info_sets(&again), baseline, "nothing differs now");
}

/// Where the ports can do more: 2X and the extended speeds (FDR, EDR)
/// advertised by every node but one CA, each port starting with 4X and
/// FDR alone enabled. OpenSM's defaults enable every supported width
/// where the port (a switch's port 0 for its others) advertises
/// IsLinkWidth2XSupported, and every extended speed on a link whose two
/// ends advertise IsExtendedSpeedsSupported: the CA without them and its
/// switch port keep FDR alone, and the CA its width.
#[test]
fn set_to_supported_needs_the_capability_at_both_ends() {
    use mad_core::attr::{CapabilityMask, CapabilityMask2, LinkSpeedExt, LinkWidth};
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:2").unwrap();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let plain = (f.topo.nodes.iter())
        .rposition(|n| n.kind != NodeType::Switch)
        .unwrap();
    let (sw, sp) = f.topo.peer_of(plain, 1).unwrap();
    let widen = |pi: &mut PortInfo, caps: bool| {
        pi.link_width_supported |= LinkWidth::from_bits_retain(16);
        pi.link_speed_ext_supported = LinkSpeedExt::FDR | LinkSpeedExt::EDR;
        pi.link_speed_ext_enabled = LinkSpeedExt::FDR;
        if caps {
            pi.capability_mask |= CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED;
            pi.capability_mask2 |= CapabilityMask2::IS_LINK_WIDTH_2X_SUPPORTED;
        }
    };
    for (i, node) in f.nodes.iter_mut().enumerate() {
        match node {
            SimNode::Switch(s) => s
                .model
                .ports
                .iter_mut()
                .for_each(|p| widen(&mut p.info, true)),
            SimNode::Ca(c) => {
                (c.model.ports.iter_mut()).for_each(|p| widen(&mut p.info, i != plain))
            }
            SimNode::Hypervisor(h) => {
                (h.pf.model.ports.iter_mut()).for_each(|p| widen(&mut p.info, true))
            }
        }
    }
    let mut sm = smi::sm::Sm::new(SmConfig::default());
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    let mut kept = Vec::new();
    for ((i, p), e) in enabled(&f) {
        if i == plain || (i, p) == (sw, sp) {
            kept.push(e);
        } else {
            assert_eq!(e, (2 | 1 | 16, 7, 3), "node {i} port {p}");
        }
    }
    assert_eq!(kept.len(), 2);
    // The switch port can do 2X (its port 0 says so); the CA cannot.
    assert!(
        kept.contains(&(19, 7, 1)) && kept.contains(&(2, 7, 1)),
        "{kept:?}"
    );
}

/// `mixed-rates`: every cabled port's PortInfo says its cable's width and
/// speed (an extended one in LinkSpeedExtActive, over LinkSpeedActive at
/// QDR), within what it enables and supports; a node with an FDR or faster
/// cable says IsExtendedSpeedsSupported on every port, port 0 included,
/// and one with a 2x or an HDR cable says so in CapabilityMask2. The SM
/// brings it up.
#[test]
fn ports_run_at_their_cables_rates() {
    use fabric::topology::LaneSpeed;
    use mad_core::attr::{CapabilityMask, CapabilityMask2, LinkSpeedExt};
    let (f, _, up) =
        fabric::sim::bring_up("mixed-rates", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let port0 = |i: usize| match &f.nodes[i] {
        SimNode::Switch(s) => s.model.ports[0].info,
        SimNode::Ca(c) => c.model.ports[1].info,
        SimNode::Hypervisor(h) => h.pf.model.ports[1].info,
    };
    let mut seen = 0;
    for (i, p, pi, _, _) in cabled_ports(&f) {
        let r = f.topo.rate_of(i, p);
        let lanes = [1u8, 4, 8, 12, 2][pi.link_width_active.bits().trailing_zeros() as usize];
        assert_eq!(pi.link_width_active.bits().count_ones(), 1);
        assert_eq!(lanes, r.width, "{i}/{p}");
        let ext = [
            (LaneSpeed::Fdr, LinkSpeedExt::FDR),
            (LaneSpeed::Edr, LinkSpeedExt::EDR),
            (LaneSpeed::Hdr, LinkSpeedExt::HDR),
        ]
        .iter()
        .find(|x| x.0 == r.speed)
        .map(|x| x.1);
        assert_eq!(
            pi.link_speed_ext_active,
            ext.unwrap_or(LinkSpeedExt::empty()),
            "{i}/{p}"
        );
        let plain = [1u8, 2, 4][pi.link_speed_active.bits().trailing_zeros() as usize % 3];
        let want = match r.speed {
            LaneSpeed::Sdr => 1,
            LaneSpeed::Ddr => 2,
            _ => 4,
        };
        assert_eq!(plain, want, "{i}/{p}");
        // Active within enabled within supported: width, speed and
        // extended speed.
        for (active, enabled, supported) in [
            (
                pi.link_width_active.bits(),
                pi.link_width_enabled.bits(),
                pi.link_width_supported.bits(),
            ),
            (
                pi.link_speed_active.bits(),
                pi.link_speed_enabled.bits(),
                pi.link_speed_supported.bits(),
            ),
            (
                pi.link_speed_ext_active.bits(),
                pi.link_speed_ext_enabled.bits(),
                pi.link_speed_ext_supported.bits(),
            ),
        ] {
            assert_eq!(active & !enabled, 0, "{i}/{p}");
            assert_eq!(enabled & !supported, 0, "{i}/{p}");
        }
        let node_rates: Vec<_> = (1..=f.topo.nodes[i].ports)
            .filter(|&q| f.topo.peer_of(i, q).is_some())
            .map(|q| f.topo.rate_of(i, q))
            .collect();
        let says = |c: CapabilityMask| {
            pi.capability_mask.contains(c) && port0(i).capability_mask.contains(c)
        };
        assert_eq!(
            says(CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED),
            node_rates.iter().any(|r| r.speed.is_extended()),
            "{i}/{p}"
        );
        assert_eq!(
            pi.capability_mask2
                .contains(CapabilityMask2::IS_LINK_WIDTH_2X_SUPPORTED),
            node_rates.iter().any(|r| r.width == 2),
            "{i}/{p}"
        );
        assert_eq!(
            pi.capability_mask2
                .contains(CapabilityMask2::IS_LINK_SPEED_HDR_SUPPORTED),
            node_rates.iter().any(|r| r.speed >= LaneSpeed::Hdr),
            "{i}/{p}"
        );
        seen += 1;
    }
    assert_eq!(seen, 2 * 13, "13 cables, each seen from both ends");
}
