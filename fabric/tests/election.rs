//! Master and standby SMs in the simulator (IBA 14.4). The fabric's SMA
//! on a second CA stands for an SM there (IsSM set, its SMInfo saying
//! master); ibkit's SM, started after a first SM brought the subnet up,
//! stands by and polls it, changing nothing, and takes the subnet over
//! when the master stops or its cable dies — keeping every LID the ports
//! hold, so that the forwarding tables keep their contents and data walks
//! keep working through the takeover.

use fabric::sim::{Fabric, FabricEvent, SimConfig};
use mad_core::attr::{AttributeId, NodeType, PortState, SmState};
use mad_core::Method;
use smi::sm::{Engine, LidPolicy, Phase, Sm, SmConfig, SmEvent};

const MS: u64 = 1_000_000;

/// `spec` brought up by a first SM; the fabric, and every node's LID.
fn running(spec: &str) -> (Fabric, Vec<u16>) {
    let cfg = SmConfig {
        routing: Engine::MinHop,
        ..SmConfig::default()
    };
    let (f, _first, up) = fabric::sim::bring_up(spec, SimConfig::default(), cfg).unwrap();
    assert!(up);
    let lids = lids(&f);
    (f, lids)
}

fn lids(f: &Fabric) -> Vec<u16> {
    f.nodes.iter().map(|n| n.lid().0).collect()
}

/// The last CA: where the other SM runs.
fn other_ca(f: &Fabric) -> usize {
    (f.topo.nodes.iter())
        .rposition(|n| n.kind == NodeType::ChannelAdapter)
        .unwrap()
}

fn sets(sm: &Sm) -> u64 {
    (sm.stats().sent().iter())
        .filter(|((m, _), _)| *m == u8::from(Method::Set))
        .map(|(_, n)| n)
        .sum()
}

fn sm_info_gets(sm: &Sm) -> u64 {
    sm.stats()
        .sent()
        .get(&(u8::from(Method::Get), u16::from(AttributeId::SmInfo)))
        .copied()
        .unwrap_or(0)
}

fn standby_sm(f: &mut Fabric, master: usize) -> Sm {
    standby_sm_with(f, master, Engine::MinHop)
}

fn standby_sm_with(f: &mut Fabric, master: usize, routing: Engine) -> Sm {
    standby_sm_cfg(
        f,
        master,
        SmConfig {
            routing,
            ..SmConfig::default()
        },
    )
}

/// A standby SM (priority 0, else `cfg`) under the master on `master`.
fn standby_sm_cfg(f: &mut Fabric, master: usize, cfg: SmConfig) -> Sm {
    f.set_is_sm(master, true);
    f.set_sm_info(master, SmState::Master, 15);
    let mut sm = Sm::new(SmConfig { priority: 0, ..cfg });
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(
        sm.phase(),
        Phase::Standby,
        "peers {:?}, SMInfo Gets {}",
        sm.election().peers,
        sm_info_gets(&sm)
    );
    assert_eq!(sm.sm_state(), SmState::Standby);
    let m = sm.election().master.unwrap();
    assert_eq!(
        sm.nodes()[m.node].info.node_guid.0,
        f.topo.nodes[master].guid
    );
    assert_eq!(m.guid, sm.nodes()[m.node].info.port_guid.0);
    assert_eq!(sets(&sm), 0, "a standby sets nothing");
    // It polls: one Get(SMInfo) at discovery, then one each 500 ms.
    let polls = sm_info_gets(&sm);
    assert!((5..=8).contains(&polls), "{polls} SMInfo Gets in 3 s");
    sm
}

#[test]
fn a_standby_takes_over_when_the_master_stops_keeping_every_lid() {
    let (mut f, before) = running("mport-ntree:4:2");
    let master = other_ca(&f);
    let mut sm = standby_sm(&mut f, master);
    let smps_standing = sm.stats().total();

    // The master says it is no longer active: the next poll sees it.
    f.set_sm_info(master, SmState::NotActive, 15);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert_eq!(sm.phase(), Phase::Done, "{:?}", sm.error());
    assert_eq!(sm.election().takeovers, 1);
    assert_eq!(lids(&f), before, "LIDs kept");
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
    // The LFTs were read back and hold what the new master computed (the
    // same engine over the same LIDs): not one block is sent again.
    let st = sm.stats();
    let lft_sets = st.count(Method::Set, AttributeId::LinearForwardingTable);
    let lft_reads = st.count(Method::Get, AttributeId::LinearForwardingTable);
    let switches = sm.nodes().iter().filter(|n| n.is_switch()).count() as u64;
    assert_eq!(lft_sets, 0, "no LFT churn");
    assert_eq!(st.lft_blocks_kept, switches, "one block per switch, kept");
    assert_eq!(lft_reads, switches, "one block per switch read back");
    let up_ms = sm.stats().phase_end_ms[&Phase::Activation] - t / MS;
    println!(
        "master stopped: ibkit master and the subnet up {up_ms} ms later (simulated), \
         {} SMPs for the takeover, {smps_standing} while standing by; every LID kept, \
         {lft_reads} LFT blocks read back, {lft_sets} sent",
        sm.stats().total() - smps_standing
    );
    assert!(up_ms <= 500 + 4 * 200 + 100, "{up_ms} ms");
}

#[test]
fn a_standby_takes_over_when_the_masters_cable_dies_and_data_keeps_flowing() {
    let (mut f, before) = running("mport-ntree:4:2");
    let master = other_ca(&f);
    let mut sm = standby_sm(&mut f, master);
    let smps_standing = sm.stats().total();
    // Every CA pair but those of the master's CA walks before the cable
    // dies; the same pairs walk at each step of the takeover.
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter && i != master)
        .collect();
    let walks_ok = |f: &Fabric| {
        let mut ok = 0;
        for &a in &cas {
            for &b in &cas {
                if a != b && f.deliver_to(a, f.nodes[b].lid()) == Some(b) {
                    ok += 1;
                }
            }
        }
        ok
    };
    let all = cas.len() * (cas.len() - 1);
    assert_eq!(walks_ok(&f), all);

    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(master, 1));
    let mut worst = all;
    for step in 1..=30 {
        f.run_until(&mut sm, t + step * 100 * MS);
        worst = worst.min(walks_ok(&f));
    }
    assert_eq!(sm.sm_state(), SmState::Master);
    assert_eq!(sm.phase(), Phase::Done, "{:?}", sm.error());
    assert_eq!(worst, all, "data walks broke during the takeover");
    let kept = (lids(&f).iter().zip(&before))
        .enumerate()
        .filter(|&(i, (a, b))| i == master || a == b)
        .count();
    assert_eq!(kept, before.len(), "LIDs kept (the master's CA is gone)");
    let up_ms = sm.stats().phase_end_ms[&Phase::Activation] - t / MS;
    println!(
        "master's cable died: ibkit master and the subnet up {up_ms} ms later (simulated), \
         {} SMPs for the takeover; {all} CA pairs walked at every 100 ms step",
        sm.stats().total() - smps_standing
    );
}

/// A vSwitch mport-ntree:4:2 (two VFs a hypervisor, prepopulated LIDs,
/// min-hop) brought up, with VMs 0xA1 and 0xB2 running on the first two
/// hypervisors: the fabric, its SM, and the first VM.
fn two_vms() -> (Fabric, Sm, smi::sm::VmId) {
    two_vms_with(LidPolicy::Prepopulated)
}

/// [`two_vms`] under LID policy `policy`.
fn two_vms_with(policy: LidPolicy) -> (Fabric, Sm, smi::sm::VmId) {
    let (mut f, mut sm, up) = fabric::sim::bring_up(
        "mport-ntree:4:2",
        SimConfig {
            vfs: 2,
            ..SimConfig::default()
        },
        vswitch_cfg(policy),
    )
    .unwrap();
    assert!(up);
    let hyps = sm.hypervisors();
    let a = sm.create_vm(hyps[0], 0xA1).unwrap();
    sm.create_vm(hyps[1], 0xB2).unwrap();
    assert!(f.run(&mut sm));
    (f, sm, a)
}

/// The VMs `sm` knows: (vGUID, LID, hypervisor's node GUID), sorted.
fn vms(sm: &Sm) -> Vec<(u64, u16, u64)> {
    let mut v: Vec<(u64, u16, u64)> = sm
        .vms()
        .map(|(_, vm)| (vm.guid, vm.lid, sm.nodes()[vm.hypervisor].info.node_guid.0))
        .collect();
    v.sort();
    v
}

/// The vSwitch SM's configuration: min-hop, LID policy `policy`.
fn vswitch_cfg(lid_policy: LidPolicy) -> SmConfig {
    SmConfig {
        routing: Engine::MinHop,
        lid_policy,
        ..SmConfig::default()
    }
}

/// Taking over, a VF that reads back as running a VM whose vGUID is a
/// live port's GUID (here the new master's own) is not taken on as a VM:
/// reported once, the other VM kept, the indexes whole, and the VF taken
/// down with no vGUID (under the prepopulated policy it keeps its LID,
/// as an idle VF; under the dynamic one it holds none).
#[test]
fn a_new_master_refuses_a_vm_whose_vguid_a_port_holds() {
    for policy in LidPolicy::ALL {
        refuse_a_forged_vm(policy);
    }
}

fn refuse_a_forged_vm(policy: LidPolicy) {
    let (mut f, _first, _) = two_vms_with(policy);
    let master = (f.topo.nodes.iter())
        .rposition(|n| n.kind == NodeType::ChannelAdapter && f.node_by_guid(n.guid).is_some())
        .unwrap();
    let mut sm = standby_sm_cfg(&mut f, master, vswitch_cfg(policy));
    let own = sm.own_port_guid();
    let forged = (0..f.nodes.len())
        .find_map(|i| {
            let fabric::sim::SimNode::Hypervisor(h) = &mut f.nodes[i] else {
                return None;
            };
            let k = h.vports[0]
                .vfs
                .iter()
                .position(|v| v.vport_guid.0 == 0xB2)?;
            let v = &mut h.vports[0].vfs[k];
            assert_eq!(v.vport_state, PortState::Active);
            v.vport_guid = mad_core::Guid(own);
            Some((i, k, v.vport_lid.0))
        })
        .expect("the VF running 0xB2");
    let (forged, vf, forged_lid) = forged;
    std::iter::from_fn(|| sm.poll_event()).for_each(drop);
    f.set_sm_info(master, SmState::NotActive, 15);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.phase(), Phase::Done, "{:?}", sm.error());
    let known: Vec<u64> = sm.vms().map(|(_, vm)| vm.guid).collect();
    assert_eq!(known, [0xA1], "the forged VM is not taken on");
    assert_eq!(sm.stats().duplicate_guids, 1);
    let dups: Vec<SmEvent> = std::iter::from_fn(|| sm.poll_event())
        .filter(|e| matches!(e, SmEvent::DuplicateVGuid { .. }))
        .collect();
    let hyp = mad_core::Guid(f.topo.nodes[forged].guid);
    assert!(
        matches!(dups[..], [SmEvent::DuplicateVGuid { vguid, held_by: (_, 0), hypervisor, .. }]
            if vguid.0 == own && hypervisor == hyp),
        "{dups:?}"
    );
    let (holder, _) = sm.subnet().by_port_guid(mad_core::Guid(own)).unwrap();
    assert_eq!(
        sm.nodes()[holder.0].info.port_guid.0,
        own,
        "still the port's"
    );
    assert!(sm.subnet().indexes_agree());
    let fabric::sim::SimNode::Hypervisor(h) = &f.nodes[forged] else {
        unreachable!("a hypervisor")
    };
    // Found Active with the forged vGUID; left Down, with none.
    let v = h.vports[0].vfs[vf];
    assert_eq!(
        (v.vport_state, v.vport_guid.0),
        (PortState::Down, 0),
        "{policy:?}: {v:?}"
    );
    let idle_lid = sm.nodes()[sm.subnet().by_guid(hyp).unwrap().0].vfs[vf].lid;
    match policy {
        LidPolicy::Prepopulated => assert_eq!(idle_lid, forged_lid, "kept as an idle VF's"),
        LidPolicy::Dynamic => assert_eq!(idle_lid, 0, "no LID without a VM"),
    }
}

/// A standby started on [`two_vms`]'s fabric under a master on its last
/// live CA, run for 3 s after that master stops.
fn take_over_vms(f: &mut Fabric) -> Sm {
    let master = (f.topo.nodes.iter())
        .rposition(|n| n.kind == NodeType::ChannelAdapter && f.node_by_guid(n.guid).is_some())
        .unwrap();
    let mut sm = standby_sm(f, master);
    f.set_sm_info(master, SmState::NotActive, 15);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    sm
}

#[test]
fn a_new_master_keeps_the_vms_it_finds() {
    let (mut f, first, _) = two_vms();
    let running = vms(&first);
    let before = lids(&f);
    let vf_lids: Vec<u16> = (first.nodes().iter())
        .flat_map(|n| n.vfs.iter().map(|v| v.lid))
        .collect();
    assert!(vf_lids.iter().all(|&l| l != 0));

    let sm = take_over_vms(&mut f);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert_eq!(sm.phase(), Phase::Done, "{:?}", sm.error());
    assert_eq!(lids(&f), before, "LIDs kept");
    assert_eq!(vms(&sm), running, "the VMs, their vGUIDs and LIDs kept");
    let after: Vec<u16> = (sm.nodes().iter())
        .flat_map(|n| n.vfs.iter().map(|v| v.lid))
        .collect();
    let mut want = vf_lids.clone();
    let mut got = after.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want, "every VF's LID kept");
    assert!(sm.subnet().indexes_agree());
    // The VMs' vports are still up, with their vGUIDs, and every LID
    // (VMs' included) is routed.
    for (guid, lid, _) in &running {
        let (h, vf) = sm.subnet().by_port_guid(mad_core::Guid(*guid)).unwrap();
        assert_eq!(sm.nodes()[h.0].vfs[usize::from(vf) - 1].lid, *lid);
        let x = f.node_by_guid(sm.nodes()[h.0].info.node_guid.0).unwrap();
        let fabric::sim::SimNode::Hypervisor(hv) = &f.nodes[x] else {
            panic!("{guid:#x} is not on a hypervisor");
        };
        let held = hv.vports[0].vfs[usize::from(vf) - 1];
        assert_eq!(held.vport_state, mad_core::attr::PortState::Active);
        assert_eq!((held.vport_guid.0, held.vport_lid.0), (*guid, *lid));
    }
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
    let st = sm.stats();
    println!(
        "vSwitch takeover: {} VMs and {} VF LIDs kept, {} VPortInfo read back, {} LFT blocks sent",
        running.len(),
        after.len(),
        st.count(Method::Get, AttributeId::VPortInfo),
        st.count(Method::Set, AttributeId::LinearForwardingTable)
    );
}

/// After a takeover, a hypervisor the new master has brought in is its
/// own: when its cable goes out and back, the master sets its VFs from
/// what it holds and reads none of them back (what the standby saw is
/// dropped for each node the master brings in), and the VM keeps its LID.
#[test]
fn a_hypervisor_back_after_a_takeover_is_not_read_back_again() {
    let (mut f, first, _) = two_vms();
    let running = vms(&first);
    let mut sm = take_over_vms(&mut f);
    assert_eq!((sm.sm_state(), sm.phase()), (SmState::Master, Phase::Done));
    let reads = sm.stats().count(Method::Get, AttributeId::VPortInfo);
    assert!(reads > 0, "the takeover reads the VFs back");
    // The first VM's hypervisor: its cable out for 50 ms, then back.
    let (h, _) = sm
        .subnet()
        .by_port_guid(mad_core::Guid(running[0].0))
        .unwrap();
    let x = f.node_by_guid(sm.nodes()[h.0].info.node_guid.0).unwrap();
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(x, 1));
    f.schedule(t + 51 * MS, FabricEvent::LinkUp(x, 1));
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.phase(), Phase::Done, "{:?}", sm.error());
    assert!(sm.stats().sweeps > 0);
    assert_eq!(vms(&sm), running, "the VMs kept");
    let again = sm.stats().count(Method::Get, AttributeId::VPortInfo) - reads;
    assert_eq!(again, 0, "VPortInfo read back again");
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
}

/// Every port's GUID (a switch's port 0, a CA's port 1) with its LID.
fn port_lids(f: &Fabric) -> std::collections::BTreeMap<u64, mad_core::Lid> {
    (f.topo.nodes.iter().zip(lids(f)))
        .map(|(n, l)| {
            let g = n.guid + u64::from(n.kind == NodeType::ChannelAdapter);
            (g, mad_core::Lid(l))
        })
        .collect()
}

#[test]
fn a_guid2lid_cache_gives_lids_at_a_fresh_start_and_yields_to_a_takeover() {
    // A fresh start: the cache's LIDs, two of them swapped, are given.
    let (mut f, before) = running("mport-ntree:4:2");
    let mut cache = port_lids(&f);
    let guids: Vec<u64> = cache.keys().copied().collect();
    let (a, b) = (guids[1], guids[5]);
    let (la, lb) = (cache[&a], cache[&b]);
    cache.insert(a, lb);
    cache.insert(b, la);
    let mut sm = Sm::new(SmConfig::default());
    sm.set_preferred_lids(cache.clone());
    assert!(f.run(&mut sm), "{:?}", sm.error());
    assert_eq!(port_lids(&f), cache, "every port got the cache's LID");
    assert_eq!(sm.lids_by_guid(), cache);
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");

    // A takeover: the LIDs the ports hold win over a stale cache.
    let (mut f, _) = running("mport-ntree:4:2");
    let held = port_lids(&f);
    let master = other_ca(&f);
    let mut sm = standby_sm(&mut f, master);
    let stale: std::collections::BTreeMap<u64, mad_core::Lid> = (held.iter())
        .map(|(&g, &l)| (g, mad_core::Lid(l.0 + 100)))
        .collect();
    sm.set_preferred_lids(stale);
    f.set_sm_info(master, SmState::NotActive, 15);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert_eq!(lids(&f), before, "the held LIDs kept, the cache ignored");
}

/// OpenSM's `honor_guid2lid_file`: a standby that takes over gives the
/// LIDs its cache gives (two ports' swapped, one moved to a free LID), as
/// at a fresh start, where by default the LIDs the ports hold win; the
/// routes follow either way.
#[test]
fn with_honor_guid2lid_file_a_takeover_gives_the_caches_lids() {
    for honor in [false, true] {
        let (mut f, _) = running("mport-ntree:4:2");
        let held = port_lids(&f);
        let master = other_ca(&f);
        let mut sm = standby_sm_cfg(
            &mut f,
            master,
            SmConfig {
                honor_guid2lid_file: honor,
                ..SmConfig::default()
            },
        );
        let mut cache = held.clone();
        let guids: Vec<u64> = cache.keys().copied().collect();
        let (a, b, c) = (guids[1], guids[5], guids[7]);
        let (la, lb) = (cache[&a], cache[&b]);
        cache.insert(a, lb);
        cache.insert(b, la);
        let free = mad_core::Lid(held.values().map(|l| l.0).max().unwrap() + 10);
        cache.insert(c, free);
        sm.set_preferred_lids(cache.clone());
        f.set_sm_info(master, SmState::NotActive, 15);
        let t = f.now_ns();
        f.run_until(&mut sm, t + 3_000 * MS);
        assert_eq!(sm.sm_state(), SmState::Master);
        let now = port_lids(&f);
        if honor {
            assert_eq!(now, cache, "every port got the cache's LID");
        } else {
            assert_eq!(now, held, "the held LIDs kept");
        }
        assert_eq!(sm.lids_by_guid(), now);
        let v = f.verify();
        assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
    }
}

#[test]
fn a_master_polls_its_standbys_at_each_sweep_and_hands_over_to_one_raised_above_it() {
    let (mut f, _) = running("mport-ntree:4:2");
    let other = other_ca(&f);
    f.set_is_sm(other, true);
    f.set_sm_info(other, SmState::Standby, 1);
    let mut sm = Sm::new(SmConfig {
        priority: 5,
        sweep_interval_ms: Some(1_000),
        ..SmConfig::default()
    });
    let t = f.now_ns();
    f.run_until(&mut sm, t + 500 * MS);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert_eq!(sm.election().peers.len(), 1, "the standby found");
    let gets = sm_info_gets(&sm);
    // Each light sweep asks it again; it says nothing else (no poll, no
    // trap) when its priority is raised above the master's.
    f.run_until(&mut sm, t + 1_600 * MS);
    assert_eq!(sm_info_gets(&sm), gets + 1, "one Get(SMInfo) a sweep");
    f.set_sm_info(other, SmState::Standby, 15);
    f.run_until(&mut sm, t + 2_600 * MS);
    let handovers = sm.stats().count(Method::Set, AttributeId::SmInfo);
    assert_eq!(handovers, 1, "Set(SMInfo, Handover) at the next sweep");
    assert_eq!(sm.sm_state(), SmState::Standby, "the master stands by");
    assert_eq!(sm.phase(), Phase::Standby);
    println!(
        "a standby raised above its master (no poll, no trap): handed the subnet at the master's next sweep, {} Get(SMInfo) in all",
        sm_info_gets(&sm)
    );
}

/// The PortInfo that holds node `i`'s LID (a switch's port 0, a CA's port 1).
fn lid_port_info(f: &mut Fabric, i: usize) -> &mut mad_core::attr::PortInfo {
    match &mut f.nodes[i] {
        fabric::sim::SimNode::Switch(s) => &mut s.model.ports[0].info,
        fabric::sim::SimNode::Ca(c) => &mut c.model.ports[1].info,
        fabric::sim::SimNode::Hypervisor(h) => &mut h.pf.model.ports[1].info,
    }
}

#[test]
fn every_port_names_the_new_master_and_its_sl_after_a_takeover() {
    let (mut f, _) = running("mport-ntree:4:2");
    let master = other_ca(&f);
    let mut sm = standby_sm(&mut f, master);
    // The old master left another SL on every port.
    for i in 0..f.nodes.len() {
        lid_port_info(&mut f, i).master_sm_sl = 5;
    }
    f.set_sm_info(master, SmState::NotActive, 15);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.sm_state(), SmState::Master);
    let own = sm.sm_lid();
    for i in 0..f.nodes.len() {
        let pi = *lid_port_info(&mut f, i);
        assert_eq!((pi.master_sm_lid, pi.master_sm_sl), (own, 0), "node {i}");
    }
}

#[test]
fn a_takeover_with_up_down_sends_only_the_blocks_its_own_routes_change() {
    // The old master routed min-hop; the new one routes up*/down*, which
    // keeps its own rules (no found entry is kept), so blocks that differ
    // are sent and the rest are not.
    let (mut f, before) = running("mport-ntree:4:2");
    let master = other_ca(&f);
    let mut sm = standby_sm_with(&mut f, master, Engine::UpDown);
    f.set_sm_info(master, SmState::NotActive, 15);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert_eq!(lids(&f), before, "LIDs kept");
    let st = sm.stats();
    let sent = st.count(Method::Set, AttributeId::LinearForwardingTable);
    let switches = sm.nodes().iter().filter(|n| n.is_switch()).count() as u64;
    assert_eq!(
        sent + st.lft_blocks_kept,
        switches,
        "each block kept or sent"
    );
    // What the switches hold now is the up*/down* routes, loop-free.
    assert!(sm.deadlock_free());
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
    for (i, lft) in sm.lfts() {
        let x = f.node_by_guid(sm.nodes()[i].info.node_guid.0).unwrap();
        for (lid, &port) in lft.iter().enumerate().skip(1) {
            assert_eq!(
                f.nodes[x].lft_port(mad_core::Lid(lid as u16)),
                port,
                "switch {i} LID {lid}"
            );
        }
    }
    println!(
        "up*/down* takeover over min-hop tables: {sent} LFT blocks sent, {} kept",
        st.lft_blocks_kept
    );
}

/// A master on a switch's port 0 (a managed switch's SM: IsSM in port
/// 0's CapabilityMask) is found like one on a CA: the new SM stands by
/// and polls it, then takes over, every LID kept, when it stops.
#[test]
fn a_master_on_a_switchs_port_0_is_stood_by_for() {
    let (mut f, before) = running("mport-ntree:4:2");
    let switch = (f.topo.nodes.iter())
        .rposition(|n| n.kind == NodeType::Switch)
        .unwrap();
    let mut sm = standby_sm(&mut f, switch);
    f.set_sm_info(switch, SmState::NotActive, 15);
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert_eq!(sm.phase(), Phase::Done, "{:?}", sm.error());
    assert_eq!(lids(&f), before, "LIDs kept");
}

/// An SM started as master on a running subnet (its last SM gone, no
/// standby, no cache) keeps the LID every port holds, as OpenSM's LID
/// manager does, and reads the LFTs back so that nothing is sent again;
/// with `reassign_lids` (OpenSM's `-r`) it numbers the ports afresh.
#[test]
fn an_sm_started_on_a_running_subnet_keeps_every_lid() {
    // A first SM gives the ports LIDs a fresh bring-up would not (the
    // order reversed, through a cache).
    let (fresh, natural) = running("mport-ntree:4:2");
    let order = port_lids(&fresh);
    let reversed: std::collections::BTreeMap<u64, mad_core::Lid> =
        (order.keys().zip(order.values().rev()))
            .map(|(&g, &l)| (g, l))
            .collect();
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:2").unwrap();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let mut first = Sm::new(SmConfig::default());
    first.set_preferred_lids(reversed.clone());
    assert!(f.run(&mut first));
    assert_eq!(port_lids(&f), reversed);
    let held = lids(&f);
    assert_ne!(held, natural);

    // Started again: every LID kept, the LFTs read back and none sent.
    let mut sm = Sm::new(SmConfig::default());
    assert!(f.run(&mut sm), "{:?}", sm.error());
    assert_eq!(lids(&f), held, "every LID kept");
    let st = sm.stats();
    let switches = sm.nodes().iter().filter(|n| n.is_switch()).count() as u64;
    assert_eq!(
        st.count(Method::Get, AttributeId::LinearForwardingTable),
        switches
    );
    assert_eq!(st.count(Method::Set, AttributeId::LinearForwardingTable), 0);
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
    println!(
        "started again on a running subnet: {} LIDs kept, {switches} LFT blocks read back, none sent, {} SMPs",
        held.len(),
        st.total()
    );

    // With reassign_lids: the order a fresh bring-up gives.
    let mut sm = Sm::new(SmConfig {
        reassign_lids: true,
        ..SmConfig::default()
    });
    assert!(f.run(&mut sm), "{:?}", sm.error());
    assert_eq!(lids(&f), natural, "numbered afresh");
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
}

/// The same on a vSwitch subnet after a migration: an SM started again
/// reads every hypervisor's VFs back, so the running VMs keep their
/// vGUIDs and LIDs (the migrated one its LID on its new hypervisor), and
/// every VF keeps its LID.
#[test]
fn an_sm_started_on_a_running_vswitch_subnet_keeps_the_vms() {
    use smi::sm::LidPolicy;
    let (mut f, mut first, a) = two_vms();
    let hyps = first.hypervisors();
    let plan = first.plan_migration(a, hyps[2]).unwrap();
    first.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut first));
    let vf_lids = |sm: &Sm| -> Vec<(u64, Vec<u16>)> {
        let mut v: Vec<(u64, Vec<u16>)> = (sm.nodes().iter())
            .filter(|n| !n.vfs.is_empty())
            .map(|n| (n.info.node_guid.0, n.vfs.iter().map(|v| v.lid).collect()))
            .collect();
        v.sort();
        v
    };
    let running = vms(&first);
    assert_eq!(running.len(), 2);
    let held = lids(&f);
    let vfs = vf_lids(&first);

    let mut sm = Sm::new(SmConfig {
        lid_policy: LidPolicy::Prepopulated,
        ..SmConfig::default()
    });
    assert!(f.run(&mut sm), "{:?}", sm.error());
    assert_eq!(lids(&f), held, "every port's LID kept");
    assert_eq!(
        vms(&sm),
        running,
        "the VMs, their vGUIDs, LIDs and hypervisors kept"
    );
    assert_eq!(vf_lids(&sm), vfs, "every VF's LID kept");
    assert!(sm.subnet().indexes_agree());
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
}

/// On a partitioned vSwitch subnet, an SM started again reads the VFs'
/// P_Key tables of the VMs it finds, so each key keeps its index (a VM's
/// QPs name keys by index) and a table that already holds what the
/// partitions give is not written.
#[test]
fn an_sm_started_on_a_partitioned_vswitch_subnet_keeps_each_vms_keys_in_place() {
    use smi::sm::partitions::parse;
    use smi::sm::LidPolicy;
    let (mut f, mut first, _) = two_vms();
    // Two partitions, then the first one dropped: the VMs' tables keep a
    // hole where it was.
    let both = "t=0x10:0xa1=full,0xb2=full;\nu=0x30:0xa1=full,0xb2=full;\n";
    let one = "u=0x30:0xa1=full,0xb2=full;\n";
    first.set_partitions(parse(both).unwrap());
    assert!(f.run(&mut first));
    first.set_partitions(parse(one).unwrap());
    assert!(f.run(&mut first));
    let tables = |f: &Fabric, sm: &Sm| -> Vec<(u64, Vec<u16>)> {
        let mut v: Vec<(u64, Vec<u16>)> = sm
            .vms()
            .map(|(_, vm)| {
                let i = f
                    .node_by_guid(sm.nodes()[vm.hypervisor].info.node_guid.0)
                    .unwrap();
                let fabric::sim::SimNode::Hypervisor(h) = &f.nodes[i] else {
                    panic!("not a hypervisor");
                };
                let t = &h.vports[0].pkeys[usize::from(vm.vf) - 1];
                (vm.guid, t[..4].iter().map(|k| k.0).collect())
            })
            .collect();
        v.sort();
        v
    };
    let held = tables(&f, &first);
    assert_eq!(
        held,
        [
            (0xA1, vec![0x7FFF, 0, 0x8030, 0]),
            (0xB2, vec![0x7FFF, 0, 0x8030, 0])
        ]
    );

    let mut sm = Sm::new(SmConfig {
        lid_policy: LidPolicy::Prepopulated,
        ..SmConfig::default()
    });
    sm.set_partitions(parse(one).unwrap());
    assert!(f.run(&mut sm), "{:?}", sm.error());
    assert_eq!(tables(&f, &sm), held, "each key at its index");
    let count = |m| sm.stats().count(m, AttributeId::VPortPKeyTable);
    assert_eq!((count(Method::Get), count(Method::Set)), (2, 0));
    let t = sm.subnet().vf_pkey_table(
        smi::sm::NodeId(sm.vms().next().unwrap().1.hypervisor),
        sm.vms().next().unwrap().1.vf,
    );
    assert_eq!(t.map(|t| t[..3].to_vec()), Some(vec![0x7FFF, 0, 0x8030]));
}

/// OpenSM's `ignore_other_sm`: an SM of priority 0 under a master of 15
/// asks it nothing (no Get(SMInfo)) and brings the subnet up itself;
/// without the option it stands by.
#[test]
fn an_sm_that_ignores_other_sms_becomes_master_under_a_higher_one() {
    let (mut f, _) = running("mport-ntree:4:2");
    let master = other_ca(&f);
    f.set_is_sm(master, true);
    f.set_sm_info(master, SmState::Master, 15);
    let mut sm = Sm::new(SmConfig {
        priority: 0,
        ignore_other_sm: true,
        ..SmConfig::default()
    });
    let t = f.now_ns();
    f.run_until(&mut sm, t + 3_000 * MS);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert!(sm.subnet_up(), "{:?}", sm.phase());
    assert_eq!(sm_info_gets(&sm), 0, "no SMInfo asked");
    assert!(sm.election().peers.is_empty());
    // Stopping, it has no standby to hand over to.
    assert!(!sm.hand_over());
    // The same SM without the option stands by.
    let mut f2 = running("mport-ntree:4:2").0;
    let m2 = other_ca(&f2);
    let s = standby_sm(&mut f2, m2);
    assert!(sm_info_gets(&s) > 0);
}

/// Cuts the master's cable, runs `ms` of simulated time in steps of 100
/// ms: the last step at which `sm` still stood by, in ms after the cut.
fn standby_after_cable_cut(f: &mut Fabric, sm: &mut Sm, master: usize, ms: u64) -> u64 {
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(master, 1));
    let mut standby_until = 0;
    for step in 1..=ms / 100 {
        f.run_until(sm, t + step * 100 * MS);
        if sm.sm_state() == SmState::Standby {
            standby_until = step * 100;
        }
    }
    standby_until
}

/// OpenSM's `polling_retry_number`: a standby allowed 2 unanswered polls
/// rides out a master's cable that is out for 1.5 s (the count starts
/// again at the next answer), and takes over only at the third
/// unanswered poll in a row once the cable is gone for good; with none
/// allowed (the default) the first unanswered poll is enough.
#[test]
fn a_standby_lets_as_many_polls_go_unanswered_as_polling_retries_says() {
    let (mut f, _) = running("mport-ntree:4:2");
    let master = other_ca(&f);
    let mut sm = standby_sm_cfg(
        &mut f,
        master,
        SmConfig {
            polling_retries: 2,
            ..SmConfig::default()
        },
    );
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(master, 1));
    f.schedule(t + 1_500 * MS, FabricEvent::LinkUp(master, 1));
    f.run_until(&mut sm, t + 1_500 * MS);
    assert_eq!(sm.sm_state(), SmState::Standby);
    assert!(sm.election().missed_polls >= 1, "a poll went unanswered");
    f.run_until(&mut sm, t + 4_000 * MS);
    assert_eq!(sm.sm_state(), SmState::Standby, "rode it out");
    assert_eq!(sm.election().missed_polls, 0, "counted afresh");
    // Gone for good: standby through two unanswered polls, master after
    // the third (each poll 4 tries of 200 ms, 500 ms apart).
    let standby_until = standby_after_cable_cut(&mut f, &mut sm, master, 8_000);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert!(
        (2 * 1_300..=3 * 1_300 + 200).contains(&standby_until),
        "took over {standby_until} ms after the cable went"
    );
    // The default: at the first unanswered poll.
    let (mut f, _) = running("mport-ntree:4:2");
    let master = other_ca(&f);
    let mut sm = standby_sm(&mut f, master);
    let first = standby_after_cable_cut(&mut f, &mut sm, master, 3_000);
    assert_eq!(sm.sm_state(), SmState::Master);
    assert!(first <= 1_300 + 100, "{first} ms");
    println!("polling_retries 2: took over {standby_until} ms after the master's cable went; 0: {first} ms");
}
