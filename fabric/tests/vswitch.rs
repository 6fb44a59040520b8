//! vSwitch hypervisors on simulated fat trees: VMs started under both LID
//! policies, near and far live migrations that change only the switches
//! that must change, checked against the tables actually installed in the
//! simulated switches and by walking every CA to every LID.

mod common;
use common::up;
use fabric::sim::{bring_up, Fabric, SimConfig, SimNode};
use fabric::topology::Topology;
use mad_core::attr::{AttributeId, NodeType, PortState, VPortInfo};
use mad_core::{Guid, Lid, Method};
use smi::sm::{LidPolicy, Phase, Sm, SmConfig, SmError, SmEvent, VmError, VmId};

/// The fabric's node for the SM's node `i`.
fn fx(f: &Fabric, sm: &Sm, i: usize) -> usize {
    f.node_by_guid(sm.nodes()[i].info.node_guid.0).unwrap()
}

/// Every pair routed, no loop, and the SM's LID and GUID indexes (what
/// the SA resolves with) what a search of its nodes says.
fn clean(f: &Fabric, sm: &Sm) {
    assert!(sm.subnet().indexes_agree());
    let v = f.verify();
    assert_eq!(
        (v.unreachable, v.loops, v.switch_unreachable),
        (0, 0, 0),
        "{v:?}"
    );
}

/// Two hypervisors on the same leaf and one on another leaf.
fn pick(sm: &Sm) -> (usize, usize, usize) {
    let hyps = sm.hypervisors();
    let a = hyps[0];
    let leaf = sm.attachment(a).unwrap().0;
    let near = *hyps
        .iter()
        .find(|&&h| h != a && sm.attachment(h).unwrap().0 == leaf)
        .unwrap();
    let far = *hyps
        .iter()
        .find(|&&h| sm.attachment(h).unwrap().0 != leaf)
        .unwrap();
    (a, near, far)
}

/// Entries that differ between two snapshots: (switch, LID).
fn diff(a: &[(usize, Vec<u8>)], b: &[(usize, Vec<u8>)]) -> Vec<(usize, u16)> {
    let mut d = Vec::new();
    for ((s, x), (_, y)) in a.iter().zip(b) {
        for (l, (p, q)) in x.iter().zip(y).enumerate() {
            if p != q {
                d.push((*s, l as u16));
            }
        }
    }
    d
}

#[test]
fn prepopulated_vms_start_without_lft_updates_and_swap_on_migration() {
    let (mut f, mut sm) = up("fat-tree-324", 4, LidPolicy::Prepopulated);
    // 36 switches, the SM's CA, 323 hypervisors with a PF and 4 VFs each.
    assert_eq!(sm.max_lid(), 36 + 1 + 323 * 5);
    assert_eq!(sm.hypervisors().len(), 323);
    clean(&f, &sm);
    let (a, near, far) = pick(&sm);
    let before = sm.stats().total();
    let vm = sm.create_vm(a, 0xAA).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(sm.stats().total() - before, 1, "one Set(VPortInfo), no LFT");
    let lid = Lid(sm.vm(vm).unwrap().lid);
    assert!(f.nodes[fx(&f, &sm, a)].owns(lid));
    clean(&f, &sm);

    // Near: only the shared leaf changes, the two LIDs swapped there.
    let plan = sm.plan_migration(vm, near).unwrap();
    let leaf = sm.attachment(a).unwrap().0;
    assert_eq!(plan.switches, vec![leaf]);
    let other = plan.swapped_lid.unwrap();
    let blocks = if plan.vm_lid / 64 == other / 64 { 1 } else { 2 };
    assert_eq!(plan.lft_smps(), blocks);
    let snap = f.lft_snapshot(sm.max_lid());
    let before = sm.stats().total();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(sm.stats().total() - before, plan.smps() as u64);
    let d = diff(&snap, &f.lft_snapshot(sm.max_lid()));
    let leaf = fx(&f, &sm, leaf);
    assert_eq!(d, {
        let mut v = vec![(leaf, plan.vm_lid), (leaf, other)];
        v.sort();
        v
    });
    assert!(f.nodes[fx(&f, &sm, near)].owns(lid) && !f.nodes[fx(&f, &sm, a)].owns(lid));
    assert_eq!(sm.vm(vm).unwrap().lid, lid.0, "the VM keeps its LID");
    // Its vGUID and LID now name the destination hypervisor's VF.
    let (h, vf) = sm.subnet().by_port_guid(mad_core::Guid(0xAA)).unwrap();
    assert_eq!((h.0, vf), (near, sm.vm(vm).unwrap().vf));
    assert_eq!(sm.subnet().by_lid(lid).map(|x| x.0 .0), Some(near));
    clean(&f, &sm);

    // Far: more switches, never more than two blocks on every switch, the
    // routes of every other LID untouched, still deadlock-free.
    let plan = sm.plan_migration(vm, far).unwrap();
    assert!(plan.switches.len() > 1);
    assert!(plan.lft_smps() <= 2 * 36);
    let snap = f.lft_snapshot(sm.max_lid());
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    let other = plan.swapped_lid.unwrap();
    for (s, l) in diff(&snap, &f.lft_snapshot(sm.max_lid())) {
        assert!(l == plan.vm_lid || l == other, "LID {l} changed on {s}");
        assert!(plan.switches.iter().any(|&x| fx(&f, &sm, x) == s));
    }
    assert!(f.nodes[fx(&f, &sm, far)].owns(lid));
    assert!(sm.deadlock_free());
    clean(&f, &sm);
}

#[test]
fn dynamic_vms_copy_the_pf_entries() {
    let (mut f, mut sm) = up("fat-tree-324", 4, LidPolicy::Dynamic);
    assert_eq!(
        sm.max_lid(),
        360,
        "switches and PFs only: Table I's 360 LIDs"
    );
    let (a, near, far) = pick(&sm);
    let before = sm.stats().total();
    let vm = sm.create_vm(a, 0xBB).unwrap();
    assert!(f.run(&mut sm));
    let lid = sm.vm(vm).unwrap().lid;
    assert_eq!(lid, 361);
    // LID 361 opens block 5, already below LinearFDBTop (383): every switch
    // learns the LID, one LFT block each, plus the Set(VPortInfo).
    let lft = sm
        .stats()
        .count(Method::Set, AttributeId::LinearForwardingTable);
    assert_eq!(sm.stats().total() - before, 36 + 1);
    clean(&f, &sm);
    for s in f.lft_snapshot(400) {
        let pf = f.nodes[s.0].lft_port(f.nodes[fx(&f, &sm, a)].lid());
        assert_eq!(s.1[usize::from(lid)], pf, "copy of the PF's entry");
    }

    let plan = sm.plan_migration(vm, near).unwrap();
    assert_eq!(plan.switches, vec![sm.attachment(a).unwrap().0]);
    assert_eq!((plan.lft_smps(), plan.swapped_lid), (1, None));
    sm.apply_migration(&plan, true).unwrap(); // with the drop-first mitigation
    assert!(f.run(&mut sm));
    assert_eq!(
        sm.stats()
            .count(Method::Set, AttributeId::LinearForwardingTable)
            - lft,
        2,
        "drop, then the new entry"
    );
    clean(&f, &sm);
    let plan = sm.plan_migration(vm, far).unwrap();
    assert!(plan.lft_smps() <= 36, "one block per switch at most");
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    assert!(f.nodes[fx(&f, &sm, far)].owns(Lid(lid)));
    clean(&f, &sm);

    // Destroy frees the LID; the next VM reuses it.
    sm.destroy_vm(vm).unwrap();
    assert!(f.run(&mut sm));
    assert!(!f.nodes[fx(&f, &sm, far)].owns(Lid(lid)));
    let vm2 = sm.create_vm(near, 0xCC).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(sm.vm(vm2).unwrap().lid, lid);
    clean(&f, &sm);
}

/// The VPortInfo the simulated hypervisor of the SM's node `h` holds for
/// its VF `vf` (1-based).
fn vport(f: &Fabric, sm: &Sm, h: usize, vf: u16) -> VPortInfo {
    match &f.nodes[fx(f, sm, h)] {
        SimNode::Hypervisor(x) => x.vports[0].vfs[usize::from(vf) - 1],
        _ => panic!("node {h} is not a hypervisor"),
    }
}

/// Every (fabric node, VF) whose vport carries `guid`.
fn carriers(f: &Fabric, guid: u64) -> Vec<(usize, u16)> {
    let mut v = Vec::new();
    for (i, n) in f.nodes.iter().enumerate() {
        if let SimNode::Hypervisor(h) = n {
            for (k, p) in h.vports[0].vfs.iter().enumerate() {
                if p.vport_guid == Guid(guid) {
                    v.push((i, k as u16 + 1));
                }
            }
        }
    }
    v
}

#[test]
fn a_migrated_vm_s_guid_moves_with_it_to_the_destination_vport() {
    const GUID: u64 = 0x0002_C903_00AB_CDEF;
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (mut f, mut sm) = up("mport-ntree:8:2", 2, policy);
        let (a, near, far) = pick(&sm);
        let vm = sm.create_vm(a, GUID).unwrap();
        assert!(f.run(&mut sm));
        let at = sm.vm(vm).unwrap();
        let lid = Lid(at.lid);
        assert_eq!(vport(&f, &sm, a, at.vf).vport_guid, Guid(GUID));
        assert_eq!(carriers(&f, GUID), [(fx(&f, &sm, a), at.vf)]);
        for dst in [near, far] {
            let plan = sm.plan_migration(vm, dst).unwrap();
            sm.apply_migration(&plan, false).unwrap();
            assert!(f.run(&mut sm));
            let to = vport(&f, &sm, plan.to.0, plan.to.1);
            assert_eq!(
                (to.vport_guid, to.vport_lid, to.vport_state),
                (Guid(GUID), lid, PortState::Active),
                "{policy:?}: destination vport"
            );
            let from = vport(&f, &sm, plan.from.0, plan.from.1);
            assert_ne!(from.vport_guid, Guid(GUID), "{policy:?}: source vport");
            assert_eq!(from.vport_state, PortState::Down);
            assert_eq!(
                carriers(&f, GUID),
                [(fx(&f, &sm, plan.to.0), plan.to.1)],
                "{policy:?}: the GUID is on one vport only"
            );
        }
    }
}

#[test]
fn refused_operations_change_nothing() {
    let (mut f, mut sm) = up("mport-ntree:8:2", 2, LidPolicy::Prepopulated);
    let (a, near, far) = pick(&sm);
    let v1 = sm.create_vm(a, 1).unwrap();
    let v2 = sm.create_vm(a, 2).unwrap();
    assert_eq!(sm.create_vm(a, 3), Err(VmError::NoFreeVf(a)));
    assert!(f.run(&mut sm));
    assert_eq!(sm.create_vm(0, 3), Err(VmError::NotAHypervisor(0)));
    // A vGUID that is another VM's, or a physical port's, is refused:
    // the VM's GID would name that port.
    assert_eq!(sm.create_vm(near, 1), Err(VmError::GuidInUse(1)));
    let port_guid = sm.nodes()[near].info.port_guid.0;
    assert_eq!(
        sm.create_vm(near, port_guid),
        Err(VmError::GuidInUse(port_guid))
    );
    assert_eq!(
        sm.plan_migration(v1, a).unwrap_err(),
        VmError::SameHypervisor
    );
    assert_eq!(
        sm.plan_migration(VmId(99), near).unwrap_err(),
        VmError::NoSuchVm(VmId(99))
    );
    // Two migrations off the same hypervisor overlap.
    let p1 = sm.plan_migration(v1, near).unwrap();
    let p2 = sm.plan_migration(v2, far).unwrap();
    let snap = f.lft_snapshot(sm.max_lid());
    let total = sm.stats().total();
    assert_eq!(
        sm.apply_migrations(&[p1.clone(), p2], false),
        Err(VmError::Overlap)
    );
    assert!(f.run(&mut sm));
    assert_eq!(sm.stats().total(), total);
    assert_eq!(sm.vm(v1).unwrap().hypervisor, a);
    // A plan applied twice is stale the second time.
    sm.apply_migration(&p1, false).unwrap();
    assert!(f.run(&mut sm));
    let total = sm.stats().total();
    assert_eq!(sm.apply_migration(&p1, false), Err(VmError::StalePlan));
    assert_eq!(sm.stats().total(), total);
    assert_ne!(snap, f.lft_snapshot(sm.max_lid()));
    clean(&f, &sm);
}

#[test]
fn disjoint_migrations_run_concurrently() {
    let (mut f, mut sm) = up("fat-tree-324", 2, LidPolicy::Prepopulated);
    let hyps = sm.hypervisors();
    // Two near migrations on two different leaves.
    let mut by_leaf: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for &h in &hyps {
        by_leaf
            .entry(sm.attachment(h).unwrap().0)
            .or_default()
            .push(h);
    }
    let leaves: Vec<&Vec<usize>> = by_leaf.values().filter(|v| v.len() >= 2).take(2).collect();
    let v1 = sm.create_vm(leaves[0][0], 1).unwrap();
    let v2 = sm.create_vm(leaves[1][0], 2).unwrap();
    assert!(f.run(&mut sm));
    let p1 = sm.plan_migration(v1, leaves[0][1]).unwrap();
    let p2 = sm.plan_migration(v2, leaves[1][1]).unwrap();
    sm.apply_migrations(&[p1, p2], false).unwrap();
    assert!(f.run(&mut sm));
    assert!(f.nodes[fx(&f, &sm, leaves[0][1])].owns(Lid(sm.vm(v1).unwrap().lid)));
    assert!(f.nodes[fx(&f, &sm, leaves[1][1])].owns(Lid(sm.vm(v2).unwrap().lid)));
    clean(&f, &sm);
}

#[test]
fn more_lids_than_exist_are_refused_before_any_is_assigned() {
    // 647 hypervisors × (1 + 76 VFs) + 54 + 1 > 49,151.
    let (_, mut sm, up) = bring_up(
        "fat-tree-648",
        SimConfig {
            vfs: 76,
            ..SimConfig::default()
        },
        SmConfig::default(),
    )
    .unwrap();
    assert!(!up);
    assert_eq!(sm.phase(), Phase::Failed);
    assert_eq!(
        sm.error(),
        Some(&SmError::LidSpaceExhausted {
            needed: 54 + 1 + 647 * 77,
            available: u32::from(Lid::UNICAST_MAX.0)
        })
    );
    assert_eq!(sm.stats().count(Method::Set, AttributeId::PortInfo), 0);
    assert_eq!(
        sm.create_vm(sm.hypervisors().first().copied().unwrap_or(1), 1),
        Err(VmError::NotUp)
    );
}

/// Seven 64-port leaf switches under one spine, 63 CAs on each leaf: 441
/// CAs (the SM's and 440 hypervisors) and eight switches, so that a VM
/// costs few LFT blocks and the LID space runs out in seconds.
fn seven_wide_leaves() -> Topology {
    let mut t = Topology::default();
    let spine = t.add_node(NodeType::Switch, 7, 0x1000, "spine".into(), Some(1));
    let mut ports = Vec::new();
    for l in 0..7u8 {
        let leaf = t.add_node(
            NodeType::Switch,
            64,
            0x2000 + u64::from(l),
            format!("leaf-{l}"),
            Some(0),
        );
        t.connect((leaf, 64), (spine, l + 1)).unwrap();
        ports.extend((1..=63).map(|p| (leaf, p)));
    }
    for (i, port) in ports.into_iter().enumerate() {
        let guid = 0x10_0000 + i as u64 * 0x1000;
        let ca = t.add_node(NodeType::ChannelAdapter, 1, guid, format!("H-{i}"), None);
        t.connect((ca, 1), port).unwrap();
    }
    t
}

#[test]
fn a_dynamic_vm_past_the_last_lid_is_refused_and_changes_nothing() {
    let mut f = Fabric::new(
        seven_wide_leaves(),
        SimConfig {
            vfs: 120,
            ..SimConfig::default()
        },
    )
    .unwrap();
    let mut sm = Sm::new(SmConfig {
        lid_policy: LidPolicy::Dynamic,
        ..SmConfig::default()
    });
    assert!(f.bring_up(&mut sm));
    assert_eq!(sm.max_lid(), 8 + 441, "switches and PFs only");
    // 440 hypervisors × 120 VFs leave VFs free when the LIDs run out.
    let hyps = sm.hypervisors();
    let (mut started, mut next, mut first) = (0u64, 0, None);
    let (h, err) = loop {
        let h = hyps[next % hyps.len()];
        next += 1;
        match sm.create_vm(h, 0xF000_0000 + started) {
            Ok(vm) => {
                first.get_or_insert(vm);
                started += 1;
            }
            Err(e) => break (h, e),
        }
        if started % 2000 == 0 {
            assert!(f.run(&mut sm));
        }
    };
    assert_eq!(err, VmError::LidSpaceExhausted);
    assert_eq!(
        started,
        u64::from(Lid::UNICAST_MAX.0) - 449,
        "every unicast LID is in use"
    );
    assert!(f.run(&mut sm));
    assert_eq!(sm.max_lid(), Lid::UNICAST_MAX.0);
    assert_eq!(f.verify_lids(&[Lid::UNICAST_MAX]).unreachable, 0);

    // Refused again, on a hypervisor with free VFs: nothing is queued,
    // sent, installed or handed out.
    let vfs = sm.nodes()[h].vfs.clone();
    assert!(vfs.iter().any(|s| s.vm.is_none()));
    let vports: Vec<VPortInfo> = (1..=vfs.len() as u16)
        .map(|vf| vport(&f, &sm, h, vf))
        .collect();
    let (stats, lfts) = (sm.stats().clone(), f.lft_snapshot(Lid::UNICAST_MAX.0));
    assert_eq!(sm.create_vm(h, 0xFEED), Err(VmError::LidSpaceExhausted));
    assert_eq!(sm.outstanding(), (0, 0, 0));
    assert_eq!(sm.phase(), Phase::Done);
    assert!(f.run(&mut sm));
    assert_eq!(sm.stats(), &stats);
    assert_eq!(sm.max_lid(), Lid::UNICAST_MAX.0);
    assert_eq!(sm.nodes()[h].vfs, vfs);
    assert!(
        f.lft_snapshot(Lid::UNICAST_MAX.0) == lfts,
        "no LFT entry changed"
    );
    for (k, v) in vports.iter().enumerate() {
        assert_eq!(vport(&f, &sm, h, k as u16 + 1), *v);
    }
    assert_eq!(carriers(&f, 0xFEED), []);

    // A LID freed is a LID to give again.
    let first = first.unwrap();
    let lid = sm.vm(first).unwrap().lid;
    sm.destroy_vm(first).unwrap();
    assert!(f.run(&mut sm));
    let vm = sm.create_vm(h, 0xFEED).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(sm.vm(vm).unwrap().lid, lid);
}

/// mport-ntree:4:2 with 2 VFs a hypervisor, as powered on: a fresh
/// fabric, and an SM (fat-tree routing, `policy`) not started yet.
fn powered_on(policy: LidPolicy) -> (Fabric, Sm) {
    let f = Fabric::new(
        Topology::from_spec("mport-ntree:4:2").unwrap(),
        SimConfig {
            vfs: 2,
            ..SimConfig::default()
        },
    )
    .unwrap();
    let sm = Sm::new(SmConfig {
        routing: smi::sm::Engine::FatTree,
        lid_policy: policy,
        ..SmConfig::default()
    });
    (f, sm)
}

/// Under the dynamic policy, the subnet powered off and on and its SM
/// started afresh with the LID cache (`guid2lid`) the last one wrote: VMs
/// started again take the LIDs they had, whatever the order they start
/// in, and a VM the cache does not know takes none of the LIDs the cache
/// keeps. Under the prepopulated policy a VF's LID is the VF's: a VM
/// stopped and started again on its hypervisor takes its VF, and its LID,
/// back when that VF is still free.
#[test]
fn vms_started_again_take_their_lids_back() {
    let (mut f, mut sm) = up("mport-ntree:4:2", 2, LidPolicy::Dynamic);
    let hyps = sm.hypervisors();
    let guids = [0xA1u64, 0xB2, 0xC3];
    for (k, &g) in guids.iter().enumerate() {
        sm.create_vm(hyps[k], g).unwrap();
    }
    assert!(f.run(&mut sm));
    let lid_of = |sm: &Sm, g: u64| sm.vms().find(|(_, v)| v.guid == g).unwrap().1.lid;
    let before: Vec<u16> = guids.iter().map(|&g| lid_of(&sm, g)).collect();
    let cache = sm.lids_by_guid();
    for &g in &guids {
        assert!(cache.contains_key(&g), "the cache lists VM {g:#x}");
    }

    // Powered off and on: a fresh fabric, an SM with the cache.
    let (mut f, mut sm) = powered_on(LidPolicy::Dynamic);
    sm.set_preferred_lids(cache.clone());
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    let hyps = sm.hypervisors();
    // A VM the cache does not know first: it takes no cached LID.
    sm.create_vm(hyps[3], 0xD4).unwrap();
    for k in (0..guids.len()).rev() {
        sm.create_vm(hyps[k], guids[k]).unwrap();
    }
    assert!(f.run(&mut sm));
    let after: Vec<u16> = guids.iter().map(|&g| lid_of(&sm, g)).collect();
    assert_eq!(after, before, "each VM its LID again");
    let d4 = lid_of(&sm, 0xD4);
    assert!(
        !cache.values().any(|l| l.0 == d4),
        "VM 0xd4 took LID {d4}, which the cache keeps"
    );
    clean(&f, &sm);
    println!("dynamic, powered off and on: VMs started again took LIDs {after:?} (before: {before:?}); a new VM {d4}");

    // Prepopulated, powered off and on after a migration swapped two
    // VFs' LIDs: with `vf2lid` too, every VF gets its LID back, and the
    // VMs started again on their hypervisors theirs.
    let (mut f, mut sm) = up("mport-ntree:4:2", 2, LidPolicy::Prepopulated);
    let hyps = sm.hypervisors();
    let ids: Vec<_> = (guids.iter().enumerate())
        .map(|(k, &g)| sm.create_vm(hyps[k], g).unwrap())
        .collect();
    assert!(f.run(&mut sm));
    let plan = sm.plan_migration(ids[0], hyps[4]).unwrap();
    assert!(plan.swapped_lid.is_some());
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    let placed: Vec<(u64, u64, u16)> = (sm.vms())
        .map(|(_, v)| (v.guid, sm.nodes()[v.hypervisor].info.port_guid.0, v.lid))
        .collect();
    let (cache, vf_cache) = (sm.lids_by_guid(), sm.vf_lids());
    let (mut f, mut sm) = powered_on(LidPolicy::Prepopulated);
    sm.set_preferred_lids(cache.clone());
    sm.set_preferred_vf_lids(vf_cache.clone());
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    assert_eq!(sm.vf_lids(), vf_cache, "every VF its LID again");
    {
        // A VF the cache leaves out takes the lowest LID above the
        // ports' that no cached VF holds; the others keep theirs.
        let (mut f, mut partial) = powered_on(LidPolicy::Prepopulated);
        let mut some = vf_cache.clone();
        let (&left_out, _) = some.iter().next().unwrap();
        some.remove(&left_out);
        partial.set_preferred_lids(cache.clone());
        partial.set_preferred_vf_lids(some.clone());
        assert!(f.bring_up(&mut partial), "{:?}", partial.error());
        let got = partial.vf_lids();
        let mut want = partial.nodes().iter().map(|n| n.lid).max().unwrap() + 1;
        while some.values().any(|l| l.0 == want) {
            want += 1;
        }
        assert_eq!(got[&left_out].0, want, "{got:?}");
        some.insert(left_out, got[&left_out]);
        assert_eq!(got, some);
        clean(&f, &partial);
    }
    let by_port = |sm: &Sm, g: u64| {
        (0..sm.nodes().len())
            .find(|&i| sm.nodes()[i].info.port_guid.0 == g)
            .unwrap()
    };
    for &(g, pf, _) in placed.iter().rev() {
        let h = by_port(&sm, pf);
        sm.create_vm(h, g).unwrap();
    }
    assert!(f.run(&mut sm));
    for &(g, _, lid) in &placed {
        assert_eq!(lid_of(&sm, g), lid, "VM {g:#x}");
    }
    clean(&f, &sm);
    println!(
        "prepopulated, powered off and on after a migration: {} VF LIDs and {} VMs' LIDs as before",
        vf_cache.len(),
        placed.len()
    );

    // Prepopulated: stopped, another VM started there, started again.
    let (mut f, mut sm) = up("mport-ntree:4:2", 2, LidPolicy::Prepopulated);
    let h = sm.hypervisors()[0];
    let first = sm.create_vm(h, 0xA1).unwrap();
    assert!(f.run(&mut sm));
    let second = sm.create_vm(h, 0xB2).unwrap();
    assert!(f.run(&mut sm));
    let (la, lb) = (sm.vm(first).unwrap().lid, sm.vm(second).unwrap().lid);
    sm.destroy_vm(first).unwrap();
    sm.destroy_vm(second).unwrap();
    assert!(f.run(&mut sm));
    // 0xB2 first now: it would take the first free VF, 0xA1's.
    let b = sm.create_vm(h, 0xB2).unwrap();
    let a = sm.create_vm(h, 0xA1).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!((sm.vm(a).unwrap().lid, sm.vm(b).unwrap().lid), (la, lb));
    clean(&f, &sm);
}

/// Dynamic policy: a LID freed by a VM the `guid2lid` cache knows is not
/// handed to another VM while the cache keeps it, even when it is the
/// lowest freed one; the VM takes it back when it starts again.
#[test]
fn a_freed_lid_the_cache_keeps_waits_for_its_vm() {
    let (mut f, mut sm) = up("mport-ntree:4:2", 2, LidPolicy::Dynamic);
    let hyps = sm.hypervisors();
    let (a, b, c) = (0xA1u64, 0xB2, 0xC3);
    sm.create_vm(hyps[0], a).unwrap();
    assert!(f.run(&mut sm));
    let cache = sm.lids_by_guid();
    let la = cache[&a].0;

    let (mut f, mut sm) = powered_on(LidPolicy::Dynamic);
    sm.set_preferred_lids(cache);
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    let hyps = sm.hypervisors();
    let lid_of = |sm: &Sm, g: u64| sm.vms().find(|(_, v)| v.guid == g).unwrap().1.lid;
    let va = sm.create_vm(hyps[0], a).unwrap();
    let vc = sm.create_vm(hyps[1], c).unwrap();
    assert!(f.run(&mut sm));
    let lc = lid_of(&sm, c);
    assert_eq!(lid_of(&sm, a), la);
    assert!(la < lc, "{la} {lc}: the cached LID is the lower freed one");
    sm.destroy_vm(va).unwrap();
    sm.destroy_vm(vc).unwrap();
    assert!(f.run(&mut sm));
    sm.create_vm(hyps[2], b).unwrap();
    assert!(f.run(&mut sm));
    let lb = lid_of(&sm, b);
    assert_ne!(
        lb, la,
        "VM {b:#x} took LID {la}, which the cache keeps for {a:#x}"
    );
    sm.create_vm(hyps[3], a).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(lid_of(&sm, a), la, "its LID back");
    clean(&f, &sm);
    println!("dynamic: freed LIDs {la} (cached for {a:#x}) and {lc}; a new VM took {lb}, and {a:#x} {la} again");
}

/// VM 0xAB started on a hypervisor and moved far, to another leaf: the
/// VM and the SM's node of its hypervisor now.
fn migrated_far(f: &mut Fabric, sm: &mut Sm) -> (VmId, usize) {
    let (a, _, far) = pick(sm);
    let vm = sm.create_vm(a, 0xAB).unwrap();
    assert!(f.run(sm));
    let plan = sm.plan_migration(vm, far).unwrap();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(sm));
    (vm, far)
}

/// Fabric node `i` powered off, then on again a moment later (no LID, no
/// tables), each followed by up to 2 s of the SM at work until idle.
fn reboot(f: &mut Fabric, sm: &mut Sm, i: usize) {
    const MS: u64 = 1_000_000;
    for event in [
        fabric::sim::FabricEvent::NodeDown(i),
        fabric::sim::FabricEvent::NodeUp(i),
    ] {
        let t = f.now_ns();
        f.schedule(t + MS, event);
        assert!(
            f.run_until(sm, t + 2_000 * MS),
            "{event:?}: {:?}",
            sm.phase()
        );
    }
}

/// After a far migration (the VM's LID routed where the swap put it), a
/// spine switch reboots: while it is away and after it is back freshly
/// powered, every CA reaches every LID, the VM's at its new hypervisor,
/// under both LID policies; and no SMP is sent LID-routed over a route
/// the change is rewriting (none is lost and sent again by directed
/// route), so the change is in within a second.
#[test]
fn a_spine_that_reboots_after_a_migration_routes_the_vm_where_it_is() {
    const MS: u64 = 1_000_000;
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (mut f, mut sm) = up("fat-tree-324", 2, policy);
        let (vm, far) = migrated_far(&mut f, &mut sm);
        let lid = Lid(sm.vm(vm).unwrap().lid);
        let (hyp, sm_node) = (fx(&f, &sm, far), f.sm_node);
        // A spine: every neighbour a switch.
        let spine = (0..f.nodes.len())
            .find(|&i| {
                f.topo.nodes[i].kind == NodeType::Switch
                    && (1..=f.topo.nodes[i].ports).all(|p| {
                        (f.topo.peer_of(i, p))
                            .is_none_or(|(n, _)| f.topo.nodes[n].kind == NodeType::Switch)
                    })
            })
            .unwrap();
        for (what, event) in [
            ("away", fabric::sim::FabricEvent::NodeDown(spine)),
            ("back", fabric::sim::FabricEvent::NodeUp(spine)),
        ] {
            let t = f.now_ns();
            f.schedule(t + MS, event);
            let idle = f.run_until(&mut sm, t + 1_000 * MS);
            assert!(
                idle,
                "{policy:?}, the spine {what}: {:?} {:?}",
                sm.phase(),
                sm.error()
            );
            assert_eq!(sm.stats().fallbacks, 0, "{policy:?}, {what}");
            clean(&f, &sm);
            assert_eq!(f.deliver_to(sm_node, lid), Some(hyp), "{policy:?}, {what}");
            assert_eq!(sm.vm(vm).unwrap().lid, lid.0, "{policy:?}, {what}");
        }
    }
}

/// A leaf switch that reboots takes its hypervisors' links down with it;
/// when it is back they are found again with their VFs as they were: the
/// VM that migrated there keeps its LID and vGUID, its vport stays up,
/// the idle VFs keep theirs, and every LID is where it was; so after the
/// hypervisor itself is powered off and on. Until
/// 2026-11-28 a hypervisor found again lost its VF slots: under the
/// prepopulated policy its VFs took new LIDs and the VM's vport was
/// written Down; under the dynamic one the VM's LID was no longer routed.
#[test]
fn a_leaf_that_reboots_keeps_the_vms_under_it() {
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (mut f, mut sm) = up("fat-tree-324", 2, policy);
        let (vm, far) = migrated_far(&mut f, &mut sm);
        let (lid, vf) = (sm.vm(vm).unwrap().lid, sm.vm(vm).unwrap().vf);
        let hyp = fx(&f, &sm, far);
        let leaf = f.topo.peer_of(hyp, 1).unwrap().0;
        assert_ne!(leaf, f.topo.peer_of(f.sm_node, 1).unwrap().0);
        let lids = |f: &Fabric| f.nodes.iter().map(|n| n.lid().0).collect::<Vec<_>>();
        let (before, slots) = (lids(&f), sm.nodes()[far].vfs.clone());
        reboot(&mut f, &mut sm, leaf);
        assert_eq!(lids(&f), before, "{policy:?}: every LID where it was");
        assert_eq!(sm.nodes()[far].vfs, slots, "{policy:?}: the VF slots kept");
        assert_eq!(sm.vm(vm).map(|v| (v.lid, v.vf)), Some((lid, vf)));
        let v = vport(&f, &sm, far, vf);
        assert_eq!(
            (v.vport_state, v.vport_guid.0, v.vport_lid.0),
            (PortState::Active, 0xAB, lid),
            "{policy:?}"
        );
        assert_eq!(f.deliver_to(f.sm_node, Lid(lid)), Some(hyp), "{policy:?}");
        clean(&f, &sm);
        // The hypervisor itself powered off and on (its vports reset): the
        // SM writes the VM's vport again, as its VMs run on until stopped.
        reboot(&mut f, &mut sm, hyp);
        let v = vport(&f, &sm, far, vf);
        assert_eq!(
            (v.vport_state, v.vport_guid.0, v.vport_lid.0),
            (PortState::Active, 0xAB, lid),
            "{policy:?}, the hypervisor repowered"
        );
        assert_eq!(lids(&f), before, "{policy:?}: every LID where it was");
        clean(&f, &sm);
    }
}

/// Hypervisor `i` (fabric node) powered off, SR-IOV set up again with
/// `vfs` VFs, and powered on: as [`reboot`].
fn repower_with(f: &mut Fabric, sm: &mut Sm, i: usize, vfs: usize) {
    const MS: u64 = 1_000_000;
    let t = f.now_ns();
    f.schedule(t + MS, fabric::sim::FabricEvent::NodeDown(i));
    assert!(f.run_until(sm, t + 2_000 * MS));
    f.set_vfs(i, vfs).unwrap();
    let t = f.now_ns();
    f.schedule(t + MS, fabric::sim::FabricEvent::NodeUp(i));
    assert!(f.run_until(sm, t + 2_000 * MS), "{:?}", sm.phase());
}

/// A hypervisor comes back with fewer VFs (SR-IOV set up again while it
/// was off): the VM in the VF it still has keeps its LID, vGUID and up
/// vport; the VM in the VF it lost is gone, said by `SmEvent::VmLost`,
/// its vGUID nobody's (under the dynamic policy its LID goes to the next
/// VM). With more VFs the VM is kept and the new VFs take VMs; with none
/// (virtualization off) every VM on it is gone. Until 2026-11-28 any
/// other count emptied every slot and left its VMs registered with no VF.
#[test]
fn a_hypervisor_back_with_fewer_vfs_loses_only_the_vms_in_them() {
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (mut f, mut sm) = up("fat-tree-324", 2, policy);
        let (a, other, _) = pick(&sm);
        let v1 = sm.create_vm(a, 0xA1).unwrap();
        let v2 = sm.create_vm(a, 0xA2).unwrap();
        assert!(f.run(&mut sm));
        let hyp = fx(&f, &sm, a);
        let leaf = f.topo.peer_of(hyp, 1).unwrap().0;
        assert!(f.set_vfs(f.sm_node, 1).is_err() && f.set_vfs(leaf, 1).is_err());
        let (l1, l2) = (sm.vm(v1).unwrap().lid, sm.vm(v2).unwrap().lid);
        assert_eq!((sm.vm(v1).unwrap().vf, sm.vm(v2).unwrap().vf), (1, 2));
        std::iter::from_fn(|| sm.poll_event()).for_each(drop);
        let lost = |sm: &mut Sm| {
            let mut v: Vec<(VmId, u64, u16, u16)> = std::iter::from_fn(|| sm.poll_event())
                .filter_map(|e| match e {
                    SmEvent::VmLost {
                        vm, guid, lid, vf, ..
                    } => Some((vm, guid.0, lid.0, vf)),
                    _ => None,
                })
                .collect();
            v.sort_by_key(|x| x.3);
            v
        };
        let kept = |f: &Fabric, sm: &Sm| {
            assert_eq!(
                sm.vm(v1).map(|v| (v.lid, v.vf)),
                Some((l1, 1)),
                "{policy:?}"
            );
            let v = vport(f, sm, a, 1);
            assert_eq!(
                (v.vport_state, v.vport_guid.0, v.vport_lid.0),
                (PortState::Active, 0xA1, l1),
                "{policy:?}"
            );
            assert_eq!(f.deliver_to(f.sm_node, Lid(l1)), Some(hyp), "{policy:?}");
        };

        repower_with(&mut f, &mut sm, hyp, 1);
        assert_eq!(lost(&mut sm), [(v2, 0xA2, l2, 2)], "{policy:?}");
        assert_eq!(sm.vm(v2), None);
        assert_eq!(sm.nodes()[a].vfs.len(), 1);
        assert_eq!(sm.subnet().by_gid_guid(Guid(0xA2)), None, "{policy:?}");
        kept(&f, &sm);
        clean(&f, &sm);
        if policy == LidPolicy::Dynamic {
            let v3 = sm.create_vm(other, 0xA3).unwrap();
            assert!(f.run(&mut sm));
            assert_eq!(sm.vm(v3).unwrap().lid, l2, "the freed LID");
            sm.destroy_vm(v3).unwrap();
            assert!(f.run(&mut sm));
        }

        repower_with(&mut f, &mut sm, hyp, 3);
        assert_eq!(lost(&mut sm), [], "{policy:?}");
        assert_eq!(sm.nodes()[a].vfs.len(), 3);
        kept(&f, &sm);
        let more = [0xB2, 0xB3].map(|g| sm.create_vm(a, g).unwrap());
        assert!(f.run(&mut sm));
        for (vm, vf) in more.iter().zip([2, 3]) {
            let v = sm.vm(*vm).unwrap();
            assert_eq!(v.vf, vf, "{policy:?}");
            assert_eq!(f.deliver_to(f.sm_node, Lid(v.lid)), Some(hyp), "{policy:?}");
        }
        clean(&f, &sm);

        let on_a = |sm: &Sm| sm.vms().filter(|(_, v)| v.hypervisor == a).count();
        assert_eq!(on_a(&sm), 3);
        repower_with(&mut f, &mut sm, hyp, 0);
        let gone: Vec<u16> = lost(&mut sm).iter().map(|x| x.3).collect();
        assert_eq!(gone, [1, 2, 3], "{policy:?}");
        assert_eq!(on_a(&sm), 0);
        assert!(sm.nodes()[a].vfs.is_empty());
        clean(&f, &sm);
    }
}

/// The SM's own leaf switch reboots (with periodic sweeps, as `ibkit sm`
/// runs). While it is away the SM's port is Down: each sweep reads that
/// port alone (one SMP), gives nothing up and takes no node for lost.
/// When it is back the SM's port is Init: the sweep is a heavy one, by
/// directed route (the switch on the way holds no table), and the subnet
/// is up again within the next sweep with every LID where it was, the
/// migrated VM reached at its hypervisor. No node is taken for lost on
/// the way back: each is found again behind the SM's link, and only what
/// rebooted or retrained is set again (a bring-up of this fabric is over
/// 5,000 SMPs; the return costs under 2,500, the heavy sweep's 1,692
/// reads among them). The same when the SM's own cable is pulled and put
/// back, and when it bounces between two sweeps. Until 2026-11-28 each sweep
/// sent every SMP LID-routed into the dead link (356 given up in 30 s),
/// and the return took hundreds of timeouts (1,099 fallbacks).
#[test]
fn the_sms_own_leaf_that_reboots_is_waited_for_and_swept_again() {
    const MS: u64 = 1_000_000;
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (mut f, mut sm, up) = bring_up(
            "fat-tree-324",
            SimConfig {
                vfs: 2,
                ..SimConfig::default()
            },
            SmConfig {
                routing: smi::sm::Engine::FatTree,
                lid_policy: policy,
                sweep_interval_ms: Some(1000),
                ..SmConfig::default()
            },
        )
        .unwrap();
        assert!(up);
        let (vm, far) = migrated_far(&mut f, &mut sm);
        let (lid, hyp) = (Lid(sm.vm(vm).unwrap().lid), fx(&f, &sm, far));
        let leaf = f.topo.peer_of(f.sm_node, 1).unwrap().0;
        let lids = |f: &Fabric| f.nodes.iter().map(|n| n.lid().0).collect::<Vec<_>>();
        let before = lids(&f);
        std::iter::from_fn(|| sm.poll_event()).for_each(drop);
        let port_states = |sm: &mut Sm| {
            let mut lost = 0;
            let states: Vec<PortState> = std::iter::from_fn(|| sm.poll_event())
                .filter_map(|e| match e {
                    SmEvent::SmPortState { state } => Some(state),
                    SmEvent::NodeLost { .. } => {
                        lost += 1;
                        None
                    }
                    _ => None,
                })
                .collect();
            (states, lost)
        };

        use fabric::sim::FabricEvent::{LinkDown, LinkUp, NodeDown, NodeUp};
        // The leaf rebooted, then the SM's own cable pulled and put back.
        for (what, away, back) in [
            ("the leaf", NodeDown(leaf), NodeUp(leaf)),
            ("the cable", LinkDown(f.sm_node, 1), LinkUp(f.sm_node, 1)),
        ] {
            let (smps, given_up) = (sm.stats().total(), sm.stats().given_up);
            let t = f.now_ns();
            f.schedule(t + MS, away);
            assert!(f.run_until(&mut sm, t + 5_000 * MS));
            let sweeps = sm.stats().total() - smps;
            assert!(
                (4..=5).contains(&sweeps),
                "{policy:?}, {what}: {sweeps} SMPs in 5 s away"
            );
            assert_eq!(sm.stats().given_up, given_up, "{policy:?}, {what}");
            assert_eq!(
                port_states(&mut sm),
                (vec![PortState::Down], 0),
                "{policy:?}, {what}"
            );

            let (smps, t) = (sm.stats().total(), f.now_ns());
            f.schedule(t + MS, back);
            assert!(f.run_until(&mut sm, t + 1_500 * MS), "{policy:?}, {what}");
            // Every node found again behind the link that retrained: none
            // taken for lost on the way (the SA would drop its multicast
            // memberships and report its GIDs out of service).
            let states = port_states(&mut sm);
            assert_eq!(states, (vec![PortState::Init], 0), "{policy:?}, {what}");
            assert_eq!(sm.stats().fallbacks, 0, "{policy:?}, {what}");
            assert_eq!(lids(&f), before, "{policy:?}, {what}: every LID kept");
            assert_eq!(f.deliver_to(f.sm_node, lid), Some(hyp), "{policy:?}");
            clean(&f, &sm);
            let back = sm.stats().total() - smps;
            println!("{policy:?}, {what} back: {back} SMPs until the subnet was up");
            assert!(back < 2_500, "{policy:?}, {what}: {back} SMPs");
        }
        // The cable out and back in 50 ms, between two sweeps: no sweep
        // sees the SM's port Down; the next finds it in Init and goes as
        // above.
        let (smps, t) = (sm.stats().total(), f.now_ns());
        f.schedule(t + MS, LinkDown(f.sm_node, 1));
        f.schedule(t + 50 * MS, LinkUp(f.sm_node, 1));
        assert!(f.run_until(&mut sm, t + 2_500 * MS), "{policy:?}, a bounce");
        assert_eq!(
            port_states(&mut sm),
            (vec![PortState::Init], 0),
            "{policy:?}"
        );
        assert_eq!(sm.stats().fallbacks, 0, "{policy:?}, a bounce");
        assert_eq!(lids(&f), before, "{policy:?}, a bounce: every LID kept");
        assert_eq!(f.deliver_to(f.sm_node, lid), Some(hyp), "{policy:?}");
        clean(&f, &sm);
        let back = sm.stats().total() - smps;
        println!("{policy:?}, a 50 ms bounce: {back} SMPs until the subnet was up");
        assert!(back < 2_500, "{policy:?}, a bounce: {back} SMPs");
    }
}

/// A two-port HCA in vSwitch mode: each port is a vSwitch of its own,
/// with its own VFs (VirtualizationInfo and VPortInfo answered by the
/// port they arrive at). The SM takes each port's entry as a hypervisor,
/// VMs run behind either port and are reached there, by that port, and a
/// VM moves from one port's vSwitch to the other's, under both policies.
#[test]
fn a_two_port_hypervisor_has_a_vswitch_on_each_port() {
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (mut f, mut sm, up) = bring_up(
            "file:tests/data/multiport.topo",
            SimConfig {
                vfs: 2,
                ..SimConfig::default()
            },
            SmConfig {
                lid_policy: policy,
                ..SmConfig::default()
            },
        )
        .unwrap();
        assert!(up, "{policy:?}");
        let d = f.node_by_guid(0x0002_c904_0000_0200).unwrap();
        assert!(matches!(f.nodes[d], SimNode::Hypervisor(ref h) if h.vports.len() == 2));
        // D's two ports: two entries, each a hypervisor with two VF slots.
        let mut ports: Vec<(u8, usize)> = (sm.hypervisors().into_iter())
            .filter(|&i| sm.nodes()[i].info.node_guid.0 == 0x0002_c904_0000_0200)
            .map(|i| (sm.nodes()[i].info.local_port_num, i))
            .collect();
        ports.sort();
        assert_eq!(ports.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2]);
        assert!(ports.iter().all(|&(_, i)| sm.nodes()[i].vfs.len() == 2));
        let (p1, p2) = (ports[0].1, ports[1].1);
        let h1 = f.node_by_guid(0x0002_c904_0000_0100).unwrap();

        let a = sm.create_vm(p1, 0xD1).unwrap();
        let b = sm.create_vm(p2, 0xD2).unwrap();
        assert!(f.run(&mut sm));
        let SimNode::Hypervisor(h) = &f.nodes[d] else {
            unreachable!()
        };
        for (vm, port, guid) in [(a, 1u8, 0xD1), (b, 2, 0xD2)] {
            let v = sm.vm(vm).unwrap();
            let at = h.vports_at(port).unwrap().vfs[usize::from(v.vf) - 1];
            assert_eq!(
                (at.vport_state, at.vport_guid.0, at.vport_lid.0),
                (PortState::Active, guid, v.lid),
                "{policy:?}: port {port}'s vport"
            );
            assert!(h.owns_at(port, Lid(v.lid)) && !h.owns_at(3 - port, Lid(v.lid)));
            assert_eq!(f.deliver_to(h1, Lid(v.lid)), Some(d), "{policy:?}");
        }
        clean(&f, &sm);

        // From port 1's vSwitch to port 2's: it keeps its LID, reached by
        // port 2 now.
        let lid = sm.vm(a).unwrap().lid;
        let plan = sm.plan_migration(a, p2).unwrap();
        sm.apply_migration(&plan, false).unwrap();
        assert!(f.run(&mut sm));
        assert_eq!(sm.vm(a).map(|v| (v.lid, v.hypervisor)), Some((lid, p2)));
        let SimNode::Hypervisor(h) = &f.nodes[d] else {
            unreachable!()
        };
        assert!(
            h.owns_at(2, Lid(lid)) && !h.owns_at(1, Lid(lid)),
            "{policy:?}"
        );
        assert_eq!(f.deliver_to(h1, Lid(lid)), Some(d));
        clean(&f, &sm);
    }
}
