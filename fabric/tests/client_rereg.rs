//! ClientReregister (IBA 14.4.11): an SM whose SA does not hold the
//! hosts' state — it has just started, or taken the subnet over — asks
//! every end port's clients to join their multicast groups and register
//! their services and subscriptions again, with the bit in the
//! Set(PortInfo) that gives the port its LID; so does it for a port new
//! or back, or one that names another master. OpenSM's LID manager asks
//! in the same cases (its first master sweep, a new port, another SM
//! LID), and no other time: a sweep of a healthy subnet asks nothing.
//! The simulated SMA counts the requests per port and, as qib, answers
//! the bit only in the response to the Set.

use fabric::sim::{Fabric, FabricEvent, SimConfig, SimNode};
use mad_core::attr::{NodeType, SmState};
use mad_core::Lid;
use smi::sm::{Engine, LidPolicy, Phase, Sm, SmConfig};

const MS: u64 = 1_000_000;

/// Every end port with a cable (a switch's port 0, a CA's cabled ports),
/// as (node, port, reregistrations asked of it).
fn counts(f: &Fabric) -> Vec<(usize, u8, u32)> {
    let mut v = Vec::new();
    for (i, n) in f.topo.nodes.iter().enumerate() {
        let ports: Vec<u8> = if n.kind == NodeType::Switch {
            vec![0]
        } else {
            (1..=n.ports)
                .filter(|&p| f.topo.peer_of(i, p).is_some())
                .collect()
        };
        for p in ports {
            v.push((i, p, f.nodes[i].client_reregistrations(p).unwrap()));
        }
    }
    v
}

/// The end ports asked other than `want` times but `except`, which must
/// have been asked `want + 1` times.
fn asked_but(f: &Fabric, want: u32, except: &[usize]) -> Vec<(usize, u8, u32)> {
    counts(f)
        .into_iter()
        .filter(|&(i, _, n)| n != want + u32::from(except.contains(&i)))
        .collect()
}

fn up(spec: &str, sim: SimConfig, cfg: SmConfig) -> (Fabric, Sm) {
    let (f, sm, up) = fabric::sim::bring_up(spec, sim, cfg).unwrap();
    assert!(up, "{spec}: {:?} {:?}", sm.phase(), sm.error());
    (f, sm)
}

/// The SM's kept PortInfo of every port: none holds the bit, so no later
/// Set built from it (arming a link, partition enforcement) asks again.
fn none_kept(sm: &Sm) {
    for (i, n) in sm.nodes().iter().enumerate() {
        for (p, port) in n.ports.iter().enumerate() {
            let kept = port.info.is_some_and(|pi| pi.client_reregister);
            assert!(!kept, "node {i} port {p} keeps ClientReregister");
        }
    }
}

/// A heavy sweep, run until the SM is idle.
fn heavy_sweep(f: &mut Fabric, sm: &mut Sm) {
    let t = f.now_ns();
    sm.request_heavy_sweep(t / MS);
    assert!(f.run_until(sm, t + 2_000 * MS));
}

#[test]
fn a_bring_up_asks_every_end_port_once_and_a_sweep_asks_none() {
    for (spec, vfs) in [
        ("mport-ntree:4:2", 0),
        ("fat-tree-324", 0),
        ("mport-ntree:4:2", 2),
    ] {
        let (mut f, mut sm) = up(
            spec,
            SimConfig {
                vfs,
                ..SimConfig::default()
            },
            SmConfig::default(),
        );
        let ports = counts(&f).len();
        assert!(ports > 10, "{spec}: {ports} end ports");
        assert_eq!(asked_but(&f, 1, &[]), vec![], "{spec} (vfs {vfs})");
        none_kept(&sm);
        // A heavy sweep and light ones of the healthy subnet ask nothing.
        heavy_sweep(&mut f, &mut sm);
        let sweeps = sm.stats().sweeps;
        for _ in 0..3 {
            let t = f.now_ns();
            sm.request_sweep(t / MS);
            assert!(f.run_until(&mut sm, t + 1_000 * MS));
        }
        assert_eq!(sm.stats().sweeps, sweeps + 3);
        assert_eq!(asked_but(&f, 1, &[]), vec![], "{spec} after sweeps");
        none_kept(&sm);
        println!("{spec} (vfs {vfs}): {ports} end ports, each asked once");
    }
}

#[test]
fn no_clients_rereg_asks_none() {
    let (f, _sm) = up(
        "mport-ntree:4:2",
        SimConfig::default(),
        SmConfig {
            no_clients_rereg: true,
            ..SmConfig::default()
        },
    );
    assert_eq!(asked_but(&f, 0, &[]), vec![]);
}

/// The last CA: where the other SM runs.
fn other_ca(f: &Fabric) -> usize {
    (f.topo.nodes.iter())
        .rposition(|n| n.kind == NodeType::ChannelAdapter)
        .unwrap()
}

/// A second SM with `cfg`, standing by under a master on the last CA
/// (asking nothing meanwhile), then taking over when that master stops.
fn take_over(f: &mut Fabric, cfg: SmConfig) -> Sm {
    let before = counts(f);
    let master = other_ca(f);
    f.set_is_sm(master, true);
    f.set_sm_info(master, SmState::Master, 15);
    let mut sm = Sm::new(cfg);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.phase(), Phase::Standby);
    assert_eq!(counts(f), before, "a standby asks nothing");
    f.set_sm_info(master, SmState::NotActive, 15);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert_eq!(sm.phase(), Phase::Done, "{:?}", sm.error());
    sm
}

fn vswitch(policy: LidPolicy) -> (SimConfig, SmConfig) {
    let sim = SimConfig {
        vfs: 2,
        ..SimConfig::default()
    };
    let cfg = SmConfig {
        routing: Engine::MinHop,
        lid_policy: policy,
        ..SmConfig::default()
    };
    (sim, cfg)
}

#[test]
fn a_takeover_asks_every_end_port_again() {
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (sim, cfg) = vswitch(policy);
        let (mut f, _first) = up("mport-ntree:4:2", sim, cfg.clone());
        assert_eq!(asked_but(&f, 1, &[]), vec![]);
        let sm = take_over(&mut f, cfg);
        assert_eq!(asked_but(&f, 2, &[]), vec![], "{policy:?}");
        none_kept(&sm);
    }
}

/// Every VF of every hypervisor: (node, VF from 1, reregistrations asked).
fn vf_counts(f: &Fabric) -> Vec<(usize, usize, u32)> {
    let mut v = Vec::new();
    for (i, n) in f.nodes.iter().enumerate() {
        if let SimNode::Hypervisor(h) = n {
            let all = h.vports.iter().flat_map(|p| p.reregistrations.iter());
            v.extend(all.enumerate().map(|(k, &c)| (i, k + 1, c)));
        }
    }
    v
}

#[test]
fn a_takeover_asks_each_running_vms_vport_and_no_idle_one() {
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (sim, cfg) = vswitch(policy);
        let (mut f, mut first) = up("mport-ntree:4:2", sim, cfg.clone());
        // A VM on the first VF of every hypervisor, started on the running
        // subnet: its clients are new, with nothing to register again.
        let hyps = first.hypervisors();
        assert!(hyps.len() >= 2, "{hyps:?}");
        for (k, &h) in hyps.iter().enumerate() {
            first.create_vm(h, 0xA0 + k as u64).unwrap();
        }
        assert!(f.run(&mut first));
        let running: Vec<(usize, usize)> = (f.nodes.iter().enumerate())
            .filter_map(|(i, n)| match n {
                SimNode::Hypervisor(h) => Some((i, h)),
                _ => None,
            })
            .flat_map(|(i, h)| {
                let vfs = h.vports.iter().flat_map(|p| p.vfs.iter());
                vfs.enumerate()
                    .filter(|(_, v)| v.vport_state == mad_core::attr::PortState::Active)
                    .map(move |(k, _)| (i, k + 1))
            })
            .collect();
        assert_eq!(running.len(), hyps.len(), "{policy:?}");
        assert!(
            vf_counts(&f).iter().all(|x| x.2 == 0),
            "{:?}",
            vf_counts(&f)
        );
        let sm = take_over(&mut f, cfg);
        assert_eq!(sm.vms().count(), hyps.len(), "{policy:?}: VMs adopted");
        for (i, vf, c) in vf_counts(&f) {
            let want = u32::from(running.contains(&(i, vf)));
            assert_eq!(c, want, "{policy:?}: node {i} VF {vf}");
        }
        // The VMs stay up, their vports holding no bit.
        for &(i, vf) in &running {
            let SimNode::Hypervisor(h) = &f.nodes[i] else {
                unreachable!()
            };
            let v = h
                .vports
                .iter()
                .flat_map(|p| p.vfs.iter())
                .nth(vf - 1)
                .unwrap();
            assert_eq!(v.vport_state, mad_core::attr::PortState::Active);
            assert!(!v.vport_client_reregister);
        }
    }
}

/// A CA with one cabled port, and the switch port at its other end.
fn single_port_host(f: &Fabric, sm: &Sm) -> (usize, (usize, u8)) {
    let own = (f.topo.nodes.iter())
        .position(|n| n.guid == sm.nodes()[0].info.node_guid.0)
        .unwrap();
    (0..f.topo.nodes.len())
        .filter(|&i| i != own && f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .find_map(|i| {
            let cabled: Vec<u8> = (1..=f.topo.nodes[i].ports)
                .filter(|&p| f.topo.peer_of(i, p).is_some())
                .collect();
            (cabled.len() == 1).then(|| (i, f.topo.peer_of(i, cabled[0]).unwrap()))
        })
        .expect("a host with one cabled port")
}

#[test]
fn a_host_back_after_its_cable_was_out_is_asked_and_no_other() {
    let (mut f, mut sm) = up("fat-tree-324", SimConfig::default(), SmConfig::default());
    let (host, (sw, port)) = single_port_host(&f, &sm);
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(sw, port));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkUp(sw, port));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    assert_eq!(asked_but(&f, 1, &[host]), vec![]);
    none_kept(&sm);
}

#[test]
fn a_host_reset_is_asked_and_no_other() {
    let (mut f, mut sm) = up("fat-tree-324", SimConfig::default(), SmConfig::default());
    let (host, _) = single_port_host(&f, &sm);
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(host));
    f.schedule(t + 2 * MS, FabricEvent::NodeUp(host));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    // Powered off and on: a new SMA, whose count starts again from 0.
    assert_eq!(f.nodes[host].client_reregistrations(1), Some(1));
    assert_eq!(asked_but(&f, 1, &[]), vec![]);
}

#[test]
fn a_port_that_names_another_master_is_asked_at_the_next_heavy_sweep() {
    let (mut f, mut sm) = up("mport-ntree:4:2", SimConfig::default(), SmConfig::default());
    let (host, _) = single_port_host(&f, &sm);
    // Another SM wrote its LID into the host's port (and nothing else).
    match &mut f.nodes[host] {
        SimNode::Ca(c) => c.model.ports[1].info.master_sm_lid = Lid(0xBEEF),
        _ => panic!("a plain CA"),
    }
    heavy_sweep(&mut f, &mut sm);
    assert_eq!(asked_but(&f, 1, &[host]), vec![]);
    match &f.nodes[host] {
        SimNode::Ca(c) => assert_eq!(c.model.ports[1].info.master_sm_lid, sm.sm_lid()),
        _ => unreachable!(),
    }
}
