//! The SM under random faults: cables, switches and hosts fail and come
//! back at random times while it runs (traps, and a periodic light sweep),
//! some of them while it is still sweeping for the last. Once every fault
//! is repaired and the SM has swept again, the subnet must be what a fresh
//! bring-up leaves: every LID reachable from every CA and switch, no loop,
//! no LID held twice or missing, every node with the LID it had before the
//! faults, the SM's indexes agreeing and every node alive in its view, and
//! a multicast group's tree reaching each of its members once.
//!
//! Two variants also reset a node between two SMPs of the SM's. Two more
//! reset a node, and lose an SMP, between two SMPs of the bring-up itself,
//! and compare every port's tables with a bring-up's without them. Two
//! more hand the subnet to a standby amid the faults (and a reset inside
//! the takeover), and compare every port and VF with what the first SM
//! set.

use fabric::sim::{Fabric, FabricEvent, SimConfig, SimNode};
use mad_core::attr::NodeType;
use mad_core::{Guid, Lid};
use proptest::prelude::*;
use smi::sm::{Engine, LidPolicy, NodeId, SmConfig};
use smi::sma::node::Port;
use std::collections::BTreeSet;

const MS: u64 = 1_000_000;
/// The periodic light sweep, in simulated milliseconds.
const SWEEP_MS: u64 = 20;

/// One fault: what fails (a cable, by one of its ends, or a node), when
/// (ms after the first), and how long until it is repaired (ms).
#[derive(Clone, Debug)]
enum Fault {
    Cable(usize, u64, u64),
    Node(usize, u64, u64),
}

/// The element of `v` that `raw`, a point of the whole `usize` range,
/// falls on (as `proptest::sample::Index` picks, whose printed values the
/// regression tests below carry).
fn pick<T: Copy>(raw: usize, v: &[T]) -> T {
    v[((v.len() as u128 * raw as u128) >> usize::BITS) as usize]
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        3 => (any::<usize>(), 0..60u64, 0..40u64).prop_map(|(i, t, d)| Fault::Cable(i, t, d)),
        1 => (any::<usize>(), 0..60u64, 0..40u64).prop_map(|(i, t, d)| Fault::Node(i, t, d)),
    ]
}

/// One to seven faults.
fn faults() -> impl Strategy<Value = Vec<Fault>> {
    prop::collection::vec(fault(), 1..8)
}

/// Every node's LID (a CA's: each cabled port's), in node order.
fn lids(f: &Fabric) -> Vec<Vec<Lid>> {
    (0..f.nodes.len())
        .map(|n| match f.topo.nodes[n].kind {
            NodeType::Switch => vec![f.nodes[n].lid()],
            _ => (1..=f.topo.nodes[n].ports)
                .filter(|&p| f.topo.peer_of(n, p).is_some())
                .map(|p| f.nodes[n].port_lid(p).0)
                .collect(),
        })
        .collect()
}

/// What the SM set at every cabled port (a switch's port 0 among them):
/// the PortInfo fields it writes, the P_Key table, the SL-to-VL tables and
/// the VL arbitration tables. Without `lids`, the LIDs are left out (a
/// bring-up that met a fault may have numbered the nodes in another order).
fn tables(f: &Fabric, lids: bool) -> Vec<String> {
    let mut v = Vec::new();
    for n in 0..f.nodes.len() {
        match &f.nodes[n] {
            SimNode::Switch(s) => rows(f, n, &s.model.ports, lids, &mut v),
            SimNode::Ca(c) => rows(f, n, &c.model.ports, lids, &mut v),
            SimNode::Hypervisor(h) => rows(f, n, &h.pf.model.ports, lids, &mut v),
        }
    }
    v
}

/// [`tables`] of node `n`, whose ports are `ports`.
fn rows<const P: usize>(f: &Fabric, n: usize, ports: &[Port<P>], lids: bool, v: &mut Vec<String>) {
    let switch = f.topo.nodes[n].kind == NodeType::Switch;
    for (p, port) in ports.iter().enumerate() {
        if !(switch && p == 0) && f.topo.peer_of(n, p as u8).is_none() {
            continue;
        }
        let i = &port.info;
        let set = (
            (
                lids.then_some(i.lid),
                i.lmc,
                lids.then_some(i.master_sm_lid),
                i.m_key,
                i.m_key_protect_bits,
            ),
            (
                i.port_state,
                i.neighbor_mtu,
                i.operational_vls,
                i.vl_high_limit,
            ),
            (
                i.partition_enforcement_inbound,
                i.partition_enforcement_outbound,
            ),
        );
        let name = &f.topo.nodes[n].name;
        let t = (&port.pkeys, &port.sl2vl, &port.vl_arb);
        v.push(format!("{name}/{p}: {set:?} {t:?}"));
    }
}

/// The rows of `want` and `got` that differ, each cut to its name and
/// the stretch where the two part: a table row runs to kilobytes.
fn differences<'a>(
    want: impl IntoIterator<Item = &'a String>,
    got: impl IntoIterator<Item = &'a String>,
) -> Vec<String> {
    let cut = |s: &str, i: usize| {
        let floor = |mut k: usize| {
            while !s.is_char_boundary(k) {
                k -= 1;
            }
            k
        };
        let (from, to) = (floor(i.saturating_sub(60)), floor((i + 120).min(s.len())));
        format!("…{}…", &s[from..to])
    };
    (want.into_iter().zip(got))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| {
            let i = (a.bytes().zip(b.bytes()))
                .position(|(x, y)| x != y)
                .unwrap_or(a.len().min(b.len()));
            let name = a.split(':').next().unwrap_or("");
            format!("{name}: wanted {}, found {}", cut(a, i), cut(b, i))
        })
        .collect()
}

/// Every LID held once and reaching every node, with no loop.
fn whole(f: &Fabric, spec: &str) -> Result<(), TestCaseError> {
    let v = f.verify();
    prop_assert!(v.reachable > 0);
    prop_assert_eq!(
        (v.unreachable, v.loops, v.switch_unreachable, v.bad_lids),
        (0, 0, 0, 0),
        "{}: {:?}",
        spec,
        v
    );
    Ok(())
}

/// Every hypervisor's VFs: each vport's state, LID (with `lids`), GUID
/// and P_Key table, as the SM set them.
fn vports(f: &Fabric, lids: bool) -> Vec<String> {
    let mut v = Vec::new();
    for n in 0..f.nodes.len() {
        let SimNode::Hypervisor(h) = &f.nodes[n] else {
            continue;
        };
        for (p, at) in (1..).zip(&h.vports) {
            for (k, (x, keys)) in at.vfs.iter().zip(&at.pkeys).enumerate() {
                let lid = lids.then_some(x.vport_lid);
                let set = (x.vport_state, lid, x.vport_guid, x.lid_required);
                let keys: Vec<u16> = keys.iter().map(|k| k.0).filter(|&k| k != 0).collect();
                let name = &f.topo.nodes[n].name;
                v.push(format!("{name}/{p} vf {}: {set:?} {keys:x?}", k + 1));
            }
        }
    }
    v
}

/// How the subnet is run: hypervisors with `vfs` VFs each, the routing
/// engine, (`site`) a site's settings: two partitions besides the
/// default one, OpenSM's QoS defaults, an M_Key (protection 1) and LMC 1,
/// and the vSwitch LID policy.
///
/// `reset`, if any, is a reset at an exact point besides the faults:
/// (`n`, `at`, `k`) powers a node off and on (picked from every node but
/// the SM's by `n`) just before the `k`-th SMP after the faults start
/// reaches it or a neighbour (picked by `at`), whatever the SM is doing
/// then; the faults' times cannot aim at the moments between two SMPs.
#[derive(Clone, Copy, Debug)]
struct Setup {
    vfs: usize,
    routing: Engine,
    site: bool,
    reset: Option<(usize, usize, u32)>,
    lid_policy: LidPolicy,
}

const PLAIN: Setup = Setup {
    vfs: 0,
    routing: Engine::MinHop,
    site: false,
    reset: None,
    lid_policy: LidPolicy::Prepopulated,
};

/// The SM `setup` asks for, on fabric `f` (priority 0, as a standby's).
fn new_sm(setup: Setup, f: &Fabric) -> smi::sm::Sm {
    let mut sm_cfg = SmConfig {
        sweep_interval_ms: Some(SWEEP_MS),
        routing: setup.routing,
        lid_policy: setup.lid_policy,
        ..SmConfig::default()
    };
    if setup.site {
        sm_cfg.m_key = mad_core::MKey(0xC0FF_EE00_0000_0001);
        sm_cfg.m_key_protect_bits = 1;
        sm_cfg.lmc = 1;
    }
    let mut sm = smi::sm::Sm::new(sm_cfg);
    if setup.site {
        let hosts: Vec<u64> = (0..f.nodes.len())
            .filter(|&n| n != f.sm_node && f.topo.nodes[n].kind != NodeType::Switch)
            .map(|n| f.topo.nodes[n].guid + 1)
            .take(2)
            .collect();
        let conf = format!(
            "Default=0x7fff:ALL=full;\nstorage=0x42:{:#x}=full,{:#x}=full;\nall=0x43:ALL=limited;\n",
            hosts[0], hosts[1]
        );
        sm.set_partitions(smi::sm::partitions::parse(&conf).unwrap());
        sm.set_qos(smi::sm::qos::QosConfig::default());
    }
    sm
}

/// Picks the `k`-th SMP it is asked about (from 0).
fn nth(k: u32) -> impl Fn(&mad_core::Smp) -> bool + Send + 'static {
    let seen = std::sync::atomic::AtomicU32::new(0);
    move |_| seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == k
}

/// Arms `setup.reset`'s (`n`, `at`, `k`) on `f` (see [`Setup`]), the
/// node picked from `nodes`, counting SMPs from now.
fn aim_reset(f: &mut Fabric, (n, at, k): (usize, usize, u32), nodes: &[usize], debug: bool) {
    let n = pick(n, nodes);
    let mut near: Vec<usize> = (1..=f.topo.nodes[n].ports)
        .filter_map(|p| f.topo.peer_of(n, p).map(|(m, _)| m))
        .collect();
    near.push(n);
    near.sort_unstable();
    near.dedup();
    let at = pick(at, &near);
    if debug {
        let name = |x: usize| &f.topo.nodes[x].name;
        eprintln!("reset {} before SMP {k} reaching {}", name(n), name(at));
    }
    f.reset_before(n, at, nth(k));
}

/// Runs the SM until at least two periodic sweeps after `end`, or after
/// the reset if it came later, and until it is idle; fails if it never
/// goes idle. `t0` is where the debug output counts its milliseconds from
/// (which also writes the SMPs to `/tmp/chaos.pcap`).
fn settle(
    f: &mut Fabric,
    sm: &mut smi::sm::Sm,
    end: u64,
    t0: u64,
    debug: bool,
) -> Result<(), TestCaseError> {
    let mut settle = end + 3 * SWEEP_MS * MS;
    let mut idle = false;
    loop {
        if debug {
            // What the SM says, as it happens (ms after the first fault).
            let mut t = f.now_ns();
            let mut idle = false;
            f.enable_capture();
            while !(t >= settle && idle) && t < settle + 10_000 * MS {
                t += MS / 4;
                idle = f.run_until(sm, t);
                while let Some(e) = sm.poll_event() {
                    let at = (t as f64 - t0 as f64) / 1e6;
                    eprintln!("{at:.2} ms, {:?}: {e:?}", sm.phase());
                }
            }
        }
        f.run_until(sm, settle);
        // SMPs to a node that is gone time out and are retried, in rounds:
        // seconds of simulated time at the most.
        for k in 1..=500 {
            if f.run_until(sm, settle + k * SWEEP_MS * MS) && sm.error().is_none() {
                idle = true;
                break;
            }
        }
        match f.reset_at_ns() {
            Some(r) if idle && r + 3 * SWEEP_MS * MS > settle => {
                if debug {
                    eprintln!("reset at {:.2} ms", (r as f64 - t0 as f64) / 1e6);
                }
                settle = r + 3 * SWEEP_MS * MS;
            }
            _ => break,
        }
    }
    if debug {
        if let Some(pcap) = f.capture_pcap() {
            std::fs::write("/tmp/chaos.pcap", pcap).unwrap();
        }
    }
    prop_assert!(
        idle,
        "the SM never went idle: {:?} {:?}",
        sm.phase(),
        sm.error()
    );
    Ok(())
}

/// Brings `spec` up as `setup` says, with its reset between two SMPs of
/// the bring-up itself (counted from the first), and with `lose` =
/// (`at`, `j`) the `j`-th SMP to reach a node (picked by `at`) lost as
/// well. Once the SM has swept after both and is idle, every port must
/// hold what a bring-up without them leaves (but its LID: the order the
/// nodes were found in may differ), every LID be held once and reach
/// every node, and every node be alive in the SM's view.
fn reset_in_bring_up(
    spec: &str,
    setup: Setup,
    lose: Option<(usize, u32)>,
) -> Result<(), TestCaseError> {
    let debug = std::env::var_os("CHAOS_DEBUG").is_some();
    let make = || {
        let topo = fabric::topology::Topology::from_spec(spec).unwrap();
        let sim = SimConfig {
            vfs: setup.vfs,
            ..SimConfig::default()
        };
        Fabric::new(topo, sim).unwrap()
    };
    let mut clean = make();
    let mut sm = new_sm(setup, &clean);
    prop_assert!(clean.bring_up(&mut sm) && clean.run(&mut sm));
    let want = (tables(&clean, false), vports(&clean, false));
    let mut f = make();
    let mut sm = new_sm(setup, &f);
    if let Some(reset) = setup.reset {
        let nodes: Vec<usize> = (0..f.nodes.len()).filter(|&n| n != f.sm_node).collect();
        aim_reset(&mut f, reset, &nodes, debug);
    }
    if let Some((at, j)) = lose {
        let at = pick(at, &(0..f.nodes.len()).collect::<Vec<_>>());
        if debug {
            eprintln!("lose SMP {j} reaching {}", f.topo.nodes[at].name);
        }
        f.drop_before(at, nth(j));
    }
    if debug {
        f.enable_capture();
    }
    let up = f.bring_up(&mut sm);
    prop_assert!(up, "{spec}: {:?}", sm.error());
    let now = f.now_ns();
    settle(&mut f, &mut sm, now, 0, debug)?;
    whole(&f, spec)?;
    prop_assert!(sm.subnet().indexes_agree());
    let got = (tables(&f, false), vports(&f, false));
    let differ = differences(want.0.iter().chain(&want.1), got.0.iter().chain(&got.1));
    prop_assert!(differ.is_empty(), "{}: {:#?}", spec, differ);
    prop_assert_eq!((want.0.len(), want.1.len()), (got.0.len(), got.1.len()));
    let alive = sm.nodes().iter().filter(|n| n.alive).count();
    prop_assert_eq!(alive, f.nodes.len(), "{}: every node alive", spec);
    Ok(())
}

/// Each cabled port's state, and what the SM last read of it (debug).
fn dump_states(f: &Fabric, sm: &smi::sm::Sm) {
    // Each cabled port's state, and what the SM last read of it.
    for n in 0..f.nodes.len() {
        let Some(i) = sm.subnet().by_guid(Guid(f.topo.nodes[n].guid)) else {
            eprintln!("{}: unknown to the SM", f.topo.nodes[n].name);
            continue;
        };
        let i = i.0;
        if let SimNode::Switch(s) = &f.nodes[n] {
            let si = &s.model.switch_info;
            eprintln!(
                "{}: PortStateChange {}",
                f.topo.nodes[n].name, si.port_state_change
            );
        }
        for p in 1..=f.topo.nodes[n].ports {
            let real = f.nodes[n].port_state(p);
            let read = sm.nodes()[i].ports[usize::from(p)]
                .info
                .map(|x| x.port_state);
            eprintln!("{}/{p}: {real:?}, read {read:?}", f.topo.nodes[n].name);
            if real != read {
                let x = &sm.nodes()[i];
                let pi = x.ports[usize::from(p)].info;
                eprintln!(
                    "  SM node {i}: lid {} alive {} fresh {} path {:?}, port lid {:?}; real lid {:?}",
                    x.lid, x.alive, x.fresh, x.path, pi.map(|x| x.lid), f.nodes[n].port_lid(p)
                );
            }
        }
    }
}

/// Schedules `faults` on `f`, starting a millisecond from now: each cable
/// fault on one of every cable's ends, each node fault on one of `nodes`.
/// Returns when the first fault falls, and when the last repair does.
fn schedule_faults(f: &mut Fabric, faults: &[Fault], nodes: &[usize], debug: bool) -> (u64, u64) {
    let cables: Vec<(usize, u8)> = (0..f.nodes.len())
        .flat_map(|n| (1..=f.topo.nodes[n].ports).map(move |p| (n, p)))
        .filter(|&(n, p)| f.topo.peer_of(n, p).is_some_and(|m| (n, p) < m))
        .collect();
    // What each fault does, and when (ms after the first). A node fails
    // and comes back as a whole: a node's faults that overlap are one. A
    // cable fault may fall while one of its nodes is down: the cable is
    // cut already, and does not come back before the node does.
    let mut events: Vec<(u64, u64, FabricEvent, FabricEvent)> = Vec::new();
    let mut down: Vec<(usize, u64, u64)> = Vec::new(); // node, from, to
    for x in faults {
        if let Fault::Node(i, at, lasts) = x {
            let n = pick(*i, nodes);
            let (from, to) = (*at, at + 1 + lasts);
            if down.iter().any(|&(m, a, b)| m == n && from <= b && a <= to) {
                continue;
            }
            down.push((n, from, to));
            events.push((from, to, FabricEvent::NodeDown(n), FabricEvent::NodeUp(n)));
        }
    }
    for x in faults {
        if let Fault::Cable(i, at, lasts) = x {
            let (n, p) = pick(*i, &cables);
            let (from, to) = (*at, at + 1 + lasts);
            events.push((
                from,
                to,
                FabricEvent::LinkDown(n, p),
                FabricEvent::LinkUp(n, p),
            ));
        }
    }
    let t0 = f.now_ns() + MS;
    let mut end = t0;
    for (from, to, fail, repair) in events {
        if debug {
            eprintln!("{from}..{to} ms: {fail:?} then {repair:?}");
        }
        f.schedule(t0 + from * MS, fail);
        f.schedule(t0 + to * MS, repair);
        end = end.max(t0 + to * MS);
    }
    (t0, end)
}

/// Brings `spec` up as `setup` says, applies `faults`, repairs them all,
/// and checks the subnet is whole again; returns the SM's counts.
fn faults_then_repair(
    spec: &str,
    setup: Setup,
    faults: &[Fault],
) -> Result<smi::sm::Stats, TestCaseError> {
    // CHAOS_DEBUG set: the faults and the SM's events as they happen, its
    // SMPs in /tmp/chaos.pcap, and each port's state against its reading.
    let debug = std::env::var_os("CHAOS_DEBUG").is_some();
    let sim = SimConfig {
        vfs: setup.vfs,
        ..SimConfig::default()
    };
    let topo = fabric::topology::Topology::from_spec(spec).unwrap();
    let mut f = Fabric::new(topo, sim).unwrap();
    let mut sm = new_sm(setup, &f);
    let up = f.bring_up(&mut sm);
    prop_assert!(up, "{spec}: {:?}", sm.error());
    // A multicast group of every other host but the SM's.
    let members: Vec<usize> = (0..f.nodes.len())
        .filter(|&n| n != f.sm_node && f.topo.nodes[n].kind != NodeType::Switch)
        .step_by(2)
        .take(8)
        .collect();
    let mlid = Lid(0xC001);
    let group: Vec<(NodeId, u8)> = (members.iter())
        .map(|&n| (sm.subnet().by_guid(Guid(f.topo.nodes[n].guid)).unwrap(), 1))
        .collect();
    sm.set_multicast_group(mlid, &group).unwrap();
    // A VM on each hypervisor (its first VF; the others stay disabled).
    for (k, h) in sm.hypervisors().into_iter().enumerate() {
        sm.create_vm(h, 0x5EED_0000 + k as u64).unwrap();
    }
    prop_assert!(f.run(&mut sm));
    let before = lids(&f);
    let set = tables(&f, true);
    let vms = vports(&f, true);
    prop_assert_eq!(setup.vfs > 0, vms.iter().any(|v| v.contains("Active")));
    let nodes: Vec<usize> = (0..f.nodes.len()).filter(|&n| n != f.sm_node).collect();
    if let Some(reset) = setup.reset {
        aim_reset(&mut f, reset, &nodes, debug);
    }
    let (t0, end) = schedule_faults(&mut f, faults, &nodes, debug);
    let end = end + MS;
    settle(&mut f, &mut sm, end, t0, debug)?;
    if debug {
        dump_states(&f, &sm);
    }
    whole(&f, spec)?;
    prop_assert_eq!(&lids(&f), &before, "{}: every node keeps its LID", spec);
    prop_assert!(sm.subnet().indexes_agree());
    // Every port holds what the SM set at bring-up again.
    let now = tables(&f, true);
    let differ = differences(&set, &now);
    prop_assert!(differ.is_empty(), "{}: {:#?}", spec, differ);
    prop_assert_eq!(set.len(), now.len());
    // Every VF as the SM set it: the VMs' vports enabled again.
    let now = vports(&f, true);
    let differ = differences(&vms, &now);
    prop_assert!(differ.is_empty(), "{}: {:#?}", spec, differ);
    // The group's tree reaches every other member once, and no one else.
    for &m in &members {
        let w = f.multicast_walk(m, mlid);
        let want: BTreeSet<usize> = members.iter().copied().filter(|&x| x != m).collect();
        prop_assert!(!w.looped, "{}: from {}, a loop", spec, m);
        prop_assert_eq!(w.nodes(), want, "{}: from {}", spec, m);
        prop_assert!(w.delivered.values().all(|&k| k == 1), "{}: twice", spec);
    }
    let alive = sm.nodes().iter().filter(|n| n.alive).count();
    prop_assert_eq!(
        alive,
        f.nodes.len(),
        "{}: every node alive in the SM's view",
        spec
    );
    Ok(sm.stats().clone())
}

/// Brings `spec` up as `setup` says (a VM on each hypervisor), then hands
/// the subnet to a standby: a second SM with the same settings starts at
/// the first one's node, under a master that the last CA's SMA stands for
/// (its SMInfo says master), and stands by, polling it each 10 ms.
/// `faults` then fall, and the master stops `stop` ms after the first of
/// them: the standby must take over amid them. Once every fault is repaired and it has swept again,
/// every node must keep its LID, every port and every VF hold what the
/// first SM set, every LID be held once and reach every node, and every
/// node be alive in the new master's view.
///
/// `setup.reset` is aimed at the k-th SMP from the master's stop on, so
/// inside the takeover itself.
///
/// Neither the faults nor the reset fall on hypervisors (nor on the SM's
/// node): a VM's VF is the only record of it the standby can read, and a
/// hypervisor reset while no master holds its VMs loses them for any SM.
fn takeover_amid_faults(
    spec: &str,
    setup: Setup,
    faults: &[Fault],
    stop: u64,
) -> Result<(), TestCaseError> {
    use mad_core::attr::SmState;
    use smi::sm::Phase;
    let debug = std::env::var_os("CHAOS_DEBUG").is_some();
    let topo = fabric::topology::Topology::from_spec(spec).unwrap();
    let sim = SimConfig {
        vfs: setup.vfs,
        ..SimConfig::default()
    };
    let mut f = Fabric::new(topo, sim).unwrap();
    let mut first = new_sm(setup, &f);
    prop_assert!(f.bring_up(&mut first), "{spec}: {:?}", first.error());
    for (k, h) in first.hypervisors().into_iter().enumerate() {
        first.create_vm(h, 0x5EED_0000 + k as u64).unwrap();
    }
    prop_assert!(f.run(&mut first));
    drop(first);
    let before = lids(&f);
    let set = tables(&f, true);
    let vms = vports(&f, true);
    prop_assert_eq!(setup.vfs > 0, vms.iter().any(|v| v.contains("Active")));
    // The master, on the last CA; the standby, at the SM's node.
    let master = (0..f.nodes.len())
        .rev()
        .find(|&n| f.topo.nodes[n].kind != NodeType::Switch && n != f.sm_node)
        .unwrap();
    f.set_is_sm(master, true);
    f.set_sm_info(master, SmState::Master, 15);
    let mut sm = new_sm(setup, &f);
    // Polling each 10 ms, it takes over amid the faults, not after them.
    sm.set_intervals(10, Some(SWEEP_MS));
    let t = f.now_ns();
    f.run_until(&mut sm, t + 2_000 * MS);
    prop_assert_eq!(sm.phase(), Phase::Standby);
    let nodes: Vec<usize> = (0..f.nodes.len())
        .filter(|&n| n != f.sm_node && !matches!(f.nodes[n], SimNode::Hypervisor(_)))
        .collect();
    let (t0, end) = schedule_faults(&mut f, faults, &nodes, debug);
    if debug {
        eprintln!("the master stops at {stop} ms");
    }
    f.run_until(&mut sm, t0 + stop * MS);
    f.set_sm_info(master, SmState::NotActive, 15);
    if let Some(reset) = setup.reset {
        // Counting the standby's SMPs from the master's stop: its last
        // polls, and then the takeover's discovery and distribution.
        aim_reset(&mut f, reset, &nodes, debug);
    }
    // A master that stops answering (its cable cut) is given up after a
    // poll's retries; one that comes back may win the subnet back, until
    // it stops.
    let end = end.max(t0 + (stop + 1_000) * MS);
    settle(&mut f, &mut sm, end, t0, debug)?;
    if debug {
        dump_states(&f, &sm);
    }
    prop_assert_eq!(sm.sm_state(), SmState::Master);
    prop_assert!(sm.election().takeovers >= 1);
    whole(&f, spec)?;
    prop_assert_eq!(&lids(&f), &before, "{}: every node keeps its LID", spec);
    prop_assert!(sm.subnet().indexes_agree());
    let now = (tables(&f, true), vports(&f, true));
    let differ = differences(set.iter().chain(&vms), now.0.iter().chain(&now.1));
    prop_assert!(differ.is_empty(), "{}: {:#?}", spec, differ);
    prop_assert_eq!((set.len(), vms.len()), (now.0.len(), now.1.len()));
    let alive = sm.nodes().iter().filter(|n| n.alive).count();
    prop_assert_eq!(alive, f.nodes.len(), "{}: every node alive", spec);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn after_any_faults_are_repaired_a_two_level_tree_is_whole(
        faults in faults()
    ) {
        faults_then_repair("mport-ntree:4:2", PLAIN, &faults)?;
    }

    #[test]
    fn after_any_faults_are_repaired_fat_tree_324_is_whole_under_each_engine(
        faults in faults(),
        routing in prop_oneof![Just(Engine::MinHop), Just(Engine::UpDown), Just(Engine::FatTree)],
    ) {
        faults_then_repair("fat-tree-324", Setup { routing, ..PLAIN }, &faults)?;
    }

    #[test]
    fn after_any_faults_are_repaired_a_random_fabric_is_whole(
        faults in faults()
    ) {
        faults_then_repair("random:6:7", PLAIN, &faults)?;
    }

    #[test]
    fn after_any_faults_are_repaired_a_sites_settings_hold_again(
        faults in faults()
    ) {
        faults_then_repair("mport-ntree:4:2", Setup { site: true, ..PLAIN }, &faults)?;
    }

    #[test]
    fn after_any_faults_are_repaired_vswitch_hypervisors_are_whole(
        faults in faults()
    ) {
        faults_then_repair("mport-ntree:4:2", Setup { vfs: 4, ..PLAIN }, &faults)?;
    }

    #[test]
    fn after_faults_and_a_reset_between_two_smps_a_sites_settings_hold_again(
        faults in faults(),
        reset in (any::<usize>(), any::<usize>(), 0..40u32),
    ) {
        let setup = Setup { site: true, reset: Some(reset), ..PLAIN };
        faults_then_repair("mport-ntree:4:2", setup, &faults)?;
    }

    #[test]
    fn a_reset_and_a_loss_between_two_smps_of_a_bring_up_leave_a_sites_settings(
        reset in (any::<usize>(), any::<usize>(), 0..24u32),
        lose in proptest::option::of((any::<usize>(), 0..24u32)),
    ) {
        let setup = Setup { site: true, reset: Some(reset), ..PLAIN };
        reset_in_bring_up("mport-ntree:4:2", setup, lose)?;
    }

    #[test]
    fn a_reset_and_a_loss_between_two_smps_of_a_bring_up_leave_vswitch_hypervisors_whole(
        reset in (any::<usize>(), any::<usize>(), 0..24u32),
        lose in proptest::option::of((any::<usize>(), 0..24u32)),
    ) {
        let setup = Setup { vfs: 4, reset: Some(reset), ..PLAIN };
        reset_in_bring_up("mport-ntree:4:2", setup, lose)?;
    }

    #[test]
    fn after_faults_and_a_reset_between_two_smps_vswitch_hypervisors_are_whole(
        faults in faults(),
        reset in (any::<usize>(), any::<usize>(), 0..40u32),
    ) {
        let setup = Setup { vfs: 4, reset: Some(reset), ..PLAIN };
        faults_then_repair("mport-ntree:4:2", setup, &faults)?;
    }
    #[test]
    fn a_standby_taking_over_amid_faults_and_a_reset_keeps_a_sites_settings(
        faults in faults(),
        stop in 0..80u64,
        reset in proptest::option::of((any::<usize>(), any::<usize>(), 0..40u32)),
    ) {
        let setup = Setup { site: true, reset, ..PLAIN };
        takeover_amid_faults("mport-ntree:4:2", setup, &faults, stop)?;
    }

    #[test]
    fn a_standby_taking_over_amid_faults_and_a_reset_keeps_vswitch_hypervisors_whole(
        faults in faults(),
        stop in 0..80u64,
        reset in proptest::option::of((any::<usize>(), any::<usize>(), 0..40u32)),
        lid_policy in prop_oneof![Just(LidPolicy::Prepopulated), Just(LidPolicy::Dynamic)],
    ) {
        let setup = Setup { vfs: 4, reset, lid_policy, ..PLAIN };
        takeover_amid_faults("mport-ntree:4:2", setup, &faults, stop)?;
    }
}

/// A cable whose two nodes are both down comes back with the later of the
/// two to return, not with the first: no link trains to a node that is
/// off. Repairing it while one end is down changes nothing.
#[test]
fn a_cable_comes_back_with_the_last_of_its_nodes() {
    let (mut f, _sm, up) =
        fabric::sim::bring_up("mport-ntree:4:2", SimConfig::default(), SmConfig::default())
            .unwrap();
    assert!(up);
    let host = (0..f.nodes.len())
        .find(|&n| f.topo.nodes[n].kind == NodeType::ChannelAdapter && n != f.sm_node)
        .unwrap();
    let (leaf, port) = f.topo.peer_of(host, 1).unwrap();
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(leaf));
    f.schedule(t + 2 * MS, FabricEvent::NodeDown(host));
    f.schedule(t + 3 * MS, FabricEvent::NodeUp(host));
    f.schedule(t + 4 * MS, FabricEvent::LinkUp(host, 1));
    f.schedule(t + 5 * MS, FabricEvent::LinkUp(leaf, port));
    f.run_to_quiescence();
    assert!(f.is_down(leaf) && !f.is_down(host));
    assert_eq!(f.topo.peer_of(host, 1), None, "the leaf is off");
    assert_eq!(f.cut_peer(host, 1), Some((leaf, port)));
    assert_eq!(
        f.nodes[host].port_state(1),
        Some(mad_core::attr::PortState::Down)
    );
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeUp(leaf));
    f.run_to_quiescence();
    assert!(!f.is_down(leaf));
    assert_eq!(f.topo.peer_of(host, 1), Some((leaf, port)));
    assert_eq!(f.cut_peer(host, 1), None);
    assert_eq!(
        f.nodes[host].port_state(1),
        Some(mad_core::attr::PortState::Init)
    );
}

/// Found by a 5,000-case run: under a site's settings, a host that reboots
/// while a cable is out and the SM's leaf has rebooted gets its P_Key table
/// back.
#[test]
fn a_rebooted_host_gets_its_partitions_back() {
    let faults = [
        Fault::Cable(11529215046068469760, 15, 23),
        Fault::Node(8513881880173639208, 39, 0),
        Fault::Node(2837960626724546403, 0, 0),
    ];
    let site = Setup {
        site: true,
        ..PLAIN
    };
    faults_then_repair("mport-ntree:4:2", site, &faults).unwrap();
}

/// Found by a 5,000-case run, on the vSwitch fabric: the SM's leaf switch
/// reboots as its two host cables (the SM's own among them) come back,
/// after the heavy sweep those cables started has read its port 0. The
/// links retrain, so the sweep reads the switch's port 0 again, finds its
/// LID gone and sets the switch again, with no SMP lost to the old LID.
/// Before, the switch kept LID 0, and every light sweep after waited
/// 200 ms for an answer from that LID before going by directed route:
/// the SM never went idle.
#[test]
fn a_leaf_rebooting_as_its_cables_return_leaves_the_sm_idle() {
    let faults = [
        Fault::Cable(9223372036854775808, 4, 29),
        Fault::Node(2837960626724546403, 35, 0),
        Fault::Cable(10376293541461622784, 9, 25),
    ];
    let vfs = Setup { vfs: 4, ..PLAIN };
    let stats = faults_then_repair("mport-ntree:4:2", vfs, &faults).unwrap();
    assert_eq!(stats.fallbacks, 0, "no SMP lost to a LID");
}

/// Found by a 5,000-case run, on the vSwitch fabric: a leaf switch
/// reboots while a heavy sweep is on (the SM's own cable and a spine's
/// link to that leaf had been out). Its host links retrain at both ends;
/// the SM, which read the hosts' ports Active before, arms them with the
/// leaf's ports. Before, it armed only the leaf's: the hosts' ports stayed
/// in Init for good under switch ports made Active.
#[test]
fn a_leaf_rebooting_in_a_heavy_sweep_has_its_host_links_active_again() {
    let faults = [
        Fault::Node(0, 32, 0),
        Fault::Cable(9223372036854775808, 22, 3),
        Fault::Cable(8070450532247928832, 15, 6),
        Fault::Node(7094901566811366007, 27, 0),
        Fault::Cable(10376293541461622784, 22, 4),
    ];
    let vfs = Setup { vfs: 4, ..PLAIN };
    faults_then_repair("mport-ntree:4:2", vfs, &faults).unwrap();
}

/// The faults of the two tests that follow: a host powered off and on
/// where only its retrained link tells.
fn rebooted_behind_a_retrained_link() -> [Fault; 5] {
    [
        Fault::Node(0, 32, 0),
        Fault::Cable(9223871323945502125, 26, 4),
        Fault::Cable(8546399133001905954, 21, 6),
        Fault::Node(16407458178058084780, 57, 28),
        Fault::Cable(16086261822151257490, 26, 27),
    ]
}

/// Found by the seed of the case above, under a site's settings: a host
/// powered off and on while a heavy sweep waits 200 ms on answers lost
/// with a rebooted spine, after it read the host's port Active. The sweep
/// reads the leaf's port to the host in Init: the link retrained, so the
/// host's P_Key and QoS tables are read or written again (the Set that
/// arms its link gives it its LID back). Before, the SM took the tables as
/// still held, and the host kept a P_Key table of 0xFFFF alone.
#[test]
fn a_host_rebooted_behind_a_retrained_link_gets_its_tables_back() {
    let faults = rebooted_behind_a_retrained_link();
    let site = Setup {
        site: true,
        ..PLAIN
    };
    faults_then_repair("mport-ntree:4:2", site, &faults).unwrap();
}

/// Found by a 20,000-case run with a reset between two SMPs, on the
/// vSwitch fabric: a spine reset as a sweep's SMPs passed through it held
/// the SM up for 200 ms, and meanwhile a hypervisor was powered off and on
/// after the Set(PortInfo) that armed its link. The Set to Active went by
/// the LID the host had lost, then by directed route; the SM kept its
/// reading of Armed, and no light sweep reads a CA's port. An SMP that has
/// to go by directed route on a running subnet now makes the next sweep
/// heavy (before, only one of a light sweep), and that sweep sets the
/// host again. Before, the host stayed in Init with no LID.
#[test]
fn a_host_reset_after_its_link_was_armed_is_set_again() {
    let faults = [
        Fault::Node(4256940940086819604, 34, 11),
        Fault::Node(14189803133622732013, 46, 0),
        Fault::Node(14189803133622732013, 9, 25),
        Fault::Cable(1152921504606846976, 29, 4),
    ];
    let setup = Setup {
        reset: Some((0, 11068046444225730970, 25)),
        vfs: 4,
        ..PLAIN
    };
    faults_then_repair("mport-ntree:4:2", setup, &faults).unwrap();
}

/// The faults of [`a_host_rebooted_behind_a_retrained_link_gets_its_tables_back`]
/// on the vSwitch fabric, with a VM on each hypervisor: a hypervisor
/// powered off and on where only its retrained link tells. Its VFs'
/// VPortInfo is set again with the links made Active, once the Set that
/// arms its link has given it its LID back: its VM's vport is enabled
/// again, and the others have their LIDs. Before, the SM set only the
/// hypervisor's tables again: its VM's vport stayed Down, and no VF had
/// a LID.
#[test]
fn a_hypervisor_rebooted_behind_a_retrained_link_gets_its_vports_back() {
    let faults = rebooted_behind_a_retrained_link();
    let vfs = Setup { vfs: 4, ..PLAIN };
    faults_then_repair("mport-ntree:4:2", vfs, &faults).unwrap();
}

/// Found by the bring-up variant once it compared the VFs: a hypervisor
/// reset at bring-up after the SM had set its first VF's VPortInfo and
/// before the Set(SwitchInfo) that clears its switch's PortStateChange.
/// At bring-up the SM now sets the VFs with the links made Active, where
/// a reset before shows in the bit. Before, that VF kept no LID.
#[test]
fn a_hypervisor_reset_in_its_bring_up_has_every_vf_set() {
    let vfs = Setup {
        vfs: 4,
        reset: Some((8513881880173639208, 9223372036854775808, 6)),
        ..PLAIN
    };
    reset_in_bring_up("mport-ntree:4:2", vfs, None).unwrap();
}

/// [`takeover_amid_faults`] once, with an error short enough to read.
fn one_takeover(setup: Setup, faults: &[Fault], stop: u64) {
    let r = takeover_amid_faults("mport-ntree:4:2", setup, faults, stop);
    if let Err(e) = r {
        panic!("{}", e.to_string().chars().take(600).collect::<String>());
    }
}

/// A switch reset while the standby waits comes back without its LID:
/// the new master gives it the one its standby discovery saw.
#[test]
fn a_switch_reset_while_a_standby_waits_gets_its_lid_back_from_the_new_master() {
    one_takeover(Setup { vfs: 4, ..PLAIN }, &[Fault::Node(0, 0, 0)], 0);
}

/// A hypervisor out of reach at the takeover (its switch's cable cut)
/// comes back with its LID and its VMs running: the new master keeps both
/// rather than taking the VMs' vports down.
#[test]
fn a_hypervisor_out_of_reach_at_a_takeover_keeps_its_lid_and_vms() {
    let cut = Fault::Cable(10_376_293_541_461_622_784, 0, 18);
    one_takeover(Setup { vfs: 4, ..PLAIN }, &[cut], 0);
}

/// A switch reset inside the takeover, after the new master read its
/// neighbours' ports Active: its links retrain to Init, and the first
/// light sweep finds them by the PortStateChange the bring-up left set.
#[test]
fn a_switch_reset_inside_a_takeover_has_its_links_made_active_again() {
    let reset = Some((4_256_940_940_086_819_604, 3_689_348_814_741_910_324, 8));
    let setup = Setup {
        site: true,
        reset,
        ..PLAIN
    };
    one_takeover(setup, &[Fault::Cable(0, 0, 0)], 0);
}

/// A switch reset inside a takeover, while a cable of its is cut: the new
/// master reads that port Down, the cable comes back before the bring-up
/// clears the switch's PortStateChange, and the host behind it is found
/// by the first light sweep (the switch keeps its bit: a port read Down).
#[test]
fn a_cable_back_between_a_takeovers_reading_and_its_clear_is_found() {
    let reset = Some((4_256_940_940_086_819_604, 0, 8));
    let cut = Fault::Cable(11_529_215_046_068_469_760, 44, 4);
    one_takeover(
        Setup {
            site: true,
            reset,
            ..PLAIN
        },
        &[cut, Fault::Node(4_256_940_940_086_819_604, 0, 0)],
        39,
    );
}

/// A host's cable cut before a fresh bring-up comes back at each moment
/// of it, every 5 µs of simulated time through the whole bring-up: the
/// host is found, brought up and reachable every time, whether the cable
/// returns before discovery reads its switch's port, after, or after the
/// switch's PortStateChange was cleared.
#[test]
fn a_cable_back_at_any_moment_of_a_bring_up_is_found() {
    let spec = "mport-ntree:4:2";
    let make = || {
        let topo = fabric::topology::Topology::from_spec(spec).unwrap();
        Fabric::new(topo, SimConfig::default()).unwrap()
    };
    // How long a bring-up takes, and the host's cable: the last host's.
    let mut f = make();
    let mut sm = new_sm(PLAIN, &f);
    assert!(f.bring_up(&mut sm));
    let took = f.now_ns();
    let host = (0..f.nodes.len())
        .rev()
        .find(|&n| f.topo.nodes[n].kind != NodeType::Switch && n != f.sm_node)
        .unwrap();
    let mut late = 0;
    for at in (0..=took + 20_000).step_by(5_000) {
        let mut f = make();
        let mut sm = new_sm(PLAIN, &f);
        f.schedule(0, FabricEvent::LinkDown(host, 1));
        f.schedule(at, FabricEvent::LinkUp(host, 1));
        f.bring_up(&mut sm);
        late += u32::from(sm.nodes().iter().filter(|n| n.alive).count() < f.nodes.len());
        let end = f.now_ns().max(at);
        let r = settle(&mut f, &mut sm, end, 0, false).and_then(|()| whole(&f, spec));
        assert!(r.is_ok(), "cable back at {at} ns: {r:?}");
        let alive = sm.nodes().iter().filter(|n| n.alive).count();
        assert_eq!(alive, f.nodes.len(), "cable back at {at} ns");
    }
    // Most moments fall after discovery read the port: the light sweeps
    // found the host, not the bring-up.
    assert!(late > 0, "the cable never came back after discovery");
}
