//! One definition of "the routes are right", checked three ways: after
//! real migrations under both LID policies (the case that once failed: a
//! swapped LID parked on a disabled VF), against a walk of one pair at a
//! time on fabrics with random faults, and fault by fault, each named.

mod common;
use common::up;
use fabric::rng::Rng;
use fabric::sim::{Check, Fabric, FabricEvent, Failure, SimNode, Walk, WalkEnd};
use mad_core::attr::PortState;
use mad_core::Lid;
use smi::sm::{LidPolicy, Sm, VmId};

/// Starts `n` VMs on the first hypervisors and migrates the first to the
/// last hypervisor (a far migration); returns the LIDs it moved.
fn start_and_migrate(f: &mut Fabric, sm: &mut Sm, n: usize) -> Vec<Lid> {
    let hyps = sm.hypervisors();
    let vms: Vec<VmId> = (0..n)
        .map(|i| sm.create_vm(hyps[i], 0xABC0_0000 + i as u64).unwrap())
        .collect();
    assert!(f.run(sm));
    let plan = sm.plan_migration(vms[0], *hyps.last().unwrap()).unwrap();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(sm));
    let mut moved = vec![Lid(plan.vm_lid)];
    moved.extend(plan.swapped_lid.map(Lid));
    moved
}

fn switch_mut(f: &mut Fabric, i: usize) -> &mut smi::sma::SwitchSma {
    match &mut f.nodes[i] {
        SimNode::Switch(s) => s,
        _ => panic!("node {i} is not a switch"),
    }
}

/// The case: fat-tree-648 with 50 VFs, where the Table I run
/// walks only the moved LIDs. Under prepopulated LIDs one of them is the
/// destination VF's, now parked on the source hypervisor's disabled VF:
/// its walks must end there, and do.
#[test]
fn the_changed_lid_check_passes_after_real_migrations_under_both_policies() {
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let (mut f, mut sm) = up("fat-tree-648", 50, policy);
        let moved = start_and_migrate(&mut f, &mut sm, 4);
        let all = f.verify();
        assert!(all.ok(), "{policy:?}: {all} {:?}", all.failures);
        assert_eq!(all.check, Check::AllLids);
        let some = f.verify_lids(&moved);
        assert!(some.ok(), "{policy:?}: {some} {:?}", some.failures);
        assert_eq!(some.check, Check::ChangedLids);
        assert_eq!(some.lids, moved.len() as u64);
        match policy {
            LidPolicy::Prepopulated => {
                assert_eq!(moved.len(), 2);
                // Every live node but the holder walks to the parked LID.
                assert_eq!(some.parked, some.sources - 1, "{some:?}");
                assert!(all.parked > 0);
            }
            LidPolicy::Dynamic => {
                assert_eq!(moved.len(), 1);
                assert_eq!(some.parked, 0);
                assert_eq!(all.parked, 0, "dynamic LIDs park nothing");
            }
        }
        // Every live node walks to every LID but its own.
        assert_eq!(some.walks(), some.lids * (some.sources - 1));
        assert_eq!(all.walks(), all.lids * (all.sources - 1));
        assert!(some.walks() < all.walks());
        assert_eq!(some.sources, all.sources);
    }
}

/// What a walk of one pair at a time says, counted the way [`Verify`]
/// counts: (reachable, unreachable, loops, switch_unreachable, parked,
/// misparked).
fn brute_force(f: &Fabric, lids: &[Lid]) -> [u64; 6] {
    let live = f.reachable_from_sm();
    // The holder of each LID among live nodes, and whether it is parked.
    let mut holder = std::collections::HashMap::new();
    for (i, n) in f.nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        holder.insert(n.lid(), (i, false));
        if let SimNode::Hypervisor(h) = n {
            for v in &h.vports[0].vfs {
                if v.vport_lid.0 != 0 {
                    holder.insert(v.vport_lid, (i, v.vport_state == PortState::Down));
                }
            }
        }
    }
    let mut c = [0u64; 6];
    for &lid in lids {
        let (h, parked) = holder[&lid];
        for (src, n) in f.nodes.iter().enumerate() {
            if !live[src] || src == h {
                continue;
            }
            let is_switch = matches!(n, SimNode::Switch(_));
            let w = if is_switch {
                f.walk_from_switch(src, lid)
            } else {
                f.walk(src, lid)
            };
            let good = if parked {
                w == Walk::Dropped(h)
            } else {
                matches!(w, Walk::Delivered(_))
            };
            let k = match (parked, is_switch, good, w) {
                (true, _, true, _) => 4,
                (true, _, false, _) => 5,
                (false, true, true, _) => continue,
                (false, true, false, _) => 3,
                (false, false, true, _) => 0,
                (false, false, false, Walk::Loop) => 2,
                (false, false, false, _) => 1,
            };
            c[k] += 1;
        }
    }
    c
}

fn counts(v: &fabric::sim::Verify) -> [u64; 6] {
    [
        v.reachable,
        v.unreachable,
        v.loops,
        v.switch_unreachable,
        v.parked,
        v.misparked,
    ]
}

/// The memoized walks agree with walking one pair at a time, on a fabric
/// whose LFTs are scrambled at random places (drops, detours, loops), and
/// the changed-LID check on any LID agrees with the full check's share.
#[test]
fn the_fast_walks_agree_with_one_walk_at_a_time_under_random_faults() {
    let (mut f, mut sm) = up("fat-tree-324", 2, LidPolicy::Prepopulated);
    start_and_migrate(&mut f, &mut sm, 6);
    let switches: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| matches!(f.nodes[i], SimNode::Switch(_)))
        .collect();
    let max = sm.max_lid();
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    for round in 0..4 {
        for _ in 0..40 * (round + 1) {
            let s = switches[rng.below(switches.len() as u64) as usize];
            let lid = 1 + rng.below(u64::from(max)) as usize;
            // A random port (some without a cable), or unrouted.
            let port = [rng.below(37) as u8, 0xFF][rng.below(2) as usize];
            switch_mut(&mut f, s).model.lft[lid] = port;
        }
        let all = f.verify();
        let lids: Vec<Lid> = (1..=max).map(Lid).collect();
        assert_eq!(counts(&all), brute_force(&f, &lids), "round {round}");
        assert!(!all.ok(), "the faults broke something");
        assert_eq!(all.failures.len(), fabric::sim::verify::MAX_FAILURES);
        // Per LID, the changed-LID check counts what the full one does.
        let mut sum = [0u64; 6];
        for &l in lids.iter().step_by(7) {
            let one = f.verify_lids(&[l]);
            assert_eq!(counts(&one), brute_force(&f, &[l]), "LID {}", l.0);
            for (a, b) in sum.iter_mut().zip(counts(&one)) {
                *a += b;
            }
        }
        let some: Vec<Lid> = lids.iter().copied().step_by(7).collect();
        assert_eq!(counts(&f.verify_lids(&some)), sum);
    }
}

/// A port of switch `leaf` cabled to another switch.
fn uplink(f: &Fabric, leaf: usize) -> u8 {
    (1..=f.topo.nodes[leaf].ports)
        .find(|&p| {
            f.topo
                .peer_of(leaf, p)
                .is_some_and(|(n, _)| matches!(f.nodes[n], SimNode::Switch(_)))
        })
        .unwrap()
}

/// Finds a CA (not the SM's) and its leaf switch.
fn a_ca_and_its_leaf(f: &Fabric) -> (usize, usize) {
    (0..f.nodes.len())
        .filter(|&i| i != f.sm_node && !matches!(f.nodes[i], SimNode::Switch(_)))
        .find_map(|i| f.topo.peer_of(i, 1).map(|(s, _)| (i, s)))
        .unwrap()
}

#[test]
fn each_kind_of_fault_is_caught_and_named() {
    let (mut f, mut sm) = up("fat-tree-324", 2, LidPolicy::Prepopulated);
    start_and_migrate(&mut f, &mut sm, 4);
    assert!(f.verify().ok());
    let (ca, leaf) = a_ca_and_its_leaf(&f);
    let lid = f.nodes[ca].lid();
    let l = usize::from(lid.0);

    // A drop: the CA's own leaf has no route to it.
    let saved = switch_mut(&mut f, leaf).model.lft[l];
    switch_mut(&mut f, leaf).model.lft[l] = 0xFF;
    let v = f.verify_lids(&[lid]);
    assert!(!v.ok());
    assert_eq!(
        v.unreachable + v.switch_unreachable,
        v.sources - 1,
        "every walk fails"
    );
    let Failure::Walk { end, parked, .. } = v.failures[0] else {
        panic!("{:?}", v.failures)
    };
    assert_eq!((end, parked), (WalkEnd::NoRoute(leaf), false));
    let line = v.failures[0].describe(&f);
    assert!(
        line.contains(&format!("LID {}", lid.0)) && line.contains("without a route"),
        "{line}"
    );
    assert!(line.contains(&f.topo.nodes[leaf].name), "{line}");
    assert_eq!(
        f.verify().unreachable,
        v.unreachable,
        "the full check sees the same"
    );

    // A loop: the leaf sends it up, the spine above sends it back.
    let up_port = uplink(&f, leaf);
    let (spine, back) = f.topo.peer_of(leaf, up_port).unwrap();
    let spine_saved = switch_mut(&mut f, spine).model.lft[l];
    switch_mut(&mut f, leaf).model.lft[l] = up_port;
    switch_mut(&mut f, spine).model.lft[l] = back;
    let v = f.verify_lids(&[lid]);
    assert!(v.loops > 0 && v.switch_unreachable > 0, "{v:?}");
    assert!(v.failures.iter().any(|x| x.describe(&f).contains("loop")));
    switch_mut(&mut f, leaf).model.lft[l] = saved;
    switch_mut(&mut f, spine).model.lft[l] = spine_saved;
    assert!(f.verify().ok());

    // A LID parked on a free VF must stop at its hypervisor, not arrive
    // at another CA: point the hypervisor's leaf at another CA port.
    let (hyp, parked_lid) = (0..f.nodes.len())
        .find_map(|i| match &f.nodes[i] {
            SimNode::Hypervisor(h) => h.vports[0]
                .vfs
                .iter()
                .find(|v| v.vport_state == PortState::Down && v.vport_lid.0 != 0)
                .map(|v| (i, v.vport_lid)),
            _ => None,
        })
        .unwrap();
    let (hleaf, _) = f.topo.peer_of(hyp, 1).unwrap();
    let other = (1..=36u8)
        .find(|&p| {
            f.topo
                .peer_of(hleaf, p)
                .is_some_and(|(n, _)| n != hyp && !matches!(f.nodes[n], SimNode::Switch(_)))
        })
        .unwrap();
    let pl = usize::from(parked_lid.0);
    let saved = switch_mut(&mut f, hleaf).model.lft[pl];
    switch_mut(&mut f, hleaf).model.lft[pl] = other;
    let v = f.verify_lids(&[parked_lid]);
    assert_eq!(
        v.misparked,
        v.sources - 1,
        "every walk ends at the wrong CA"
    );
    assert_eq!(v.parked, 0);
    let line = v.failures[0].describe(&f);
    assert!(
        line.contains("parked") && line.contains("does not hold it"),
        "{line}"
    );
    switch_mut(&mut f, hleaf).model.lft[pl] = saved;
    assert!(f.verify_lids(&[parked_lid]).ok());

    // A LID nobody holds, asked about.
    let v = f.verify_lids(&[Lid(0xBF00)]);
    assert_eq!(
        (v.bad_lids, v.failures[0]),
        (1, Failure::Unheld(Lid(0xBF00)))
    );

    // Two holders of one LID.
    if let SimNode::Hypervisor(h) = &mut f.nodes[hyp] {
        h.vports[0].vfs[0].vport_lid = lid;
    }
    let v = f.verify();
    assert_eq!(v.bad_lids, 1, "{:?}", v.failures);
    assert!(v.failures[0].describe(&f).contains("held by both"));
}

/// Nodes cut off from the SM are neither walked from nor walked to, in
/// both checks.
#[test]
fn nodes_cut_off_from_the_sm_are_not_walked() {
    let (mut f, mut sm) = up("fat-tree-324", 0, LidPolicy::Prepopulated);
    let (ca, leaf) = a_ca_and_its_leaf(&f);
    let before = f.verify();
    let port = (1..=36u8)
        .find(|&p| f.topo.peer_of(leaf, p).is_some_and(|(n, _)| n == ca))
        .unwrap();
    let now = f.now_ns();
    f.schedule(now, FabricEvent::LinkDown(leaf, port));
    f.run_to_quiescence();
    // The SM hears the trap and sweeps; the routes stay right.
    assert!(f.run(&mut sm));
    assert!(!f.reachable_from_sm()[ca]);
    let after = f.verify();
    assert!(after.ok(), "{after}: {:?}", after.failures);
    assert_eq!(after.sources, before.sources - 1);
    assert_eq!(after.lids, before.lids - 1);
    let some = f.verify_lids(&[f.nodes[leaf].lid()]);
    assert!(some.ok());
    assert_eq!(some.sources, after.sources);
}

/// LFTs that send a LID round between a leaf and a spine: a LID-routed
/// SMP for it expires after [`fabric::sim::MAX_LID_ROUTED_HOPS`] switches,
/// is counted, and the simulator goes on serving (it once circled forever).
#[test]
fn a_lid_routed_smp_caught_in_a_loop_expires_and_the_fabric_goes_on() {
    use mad_core::attr::AttributeId;
    use mad_core::{MKey, Method, Smp};
    let (mut f, mut sm) = up("fat-tree-324", 0, LidPolicy::Prepopulated);
    let (ca, leaf) = a_ca_and_its_leaf(&f);
    let lid = f.nodes[ca].lid();
    let l = usize::from(lid.0);
    let up_port = uplink(&f, leaf);
    let (spine, back) = f.topo.peer_of(leaf, up_port).unwrap();
    switch_mut(&mut f, leaf).model.lft[l] = up_port;
    switch_mut(&mut f, spine).model.lft[l] = back;
    let (hops0, expired0) = (f.stats.hops, f.stats.expired);
    let smp = Smp::lid_routed(Method::Get, AttributeId::NodeInfo, 0, 7, MKey(0));
    let sm_node = f.sm_node;
    assert!(f.inject(sm_node, smp, lid.0));
    f.run_to_quiescence();
    assert_eq!(f.stats.expired - expired0, 1);
    // Its PMA counts it at the loop port it would have left by: a
    // discard, for the switch lifetime limit.
    let lifetime = |f: &fabric::sim::Fabric, n: usize, p: u8| {
        let c = f.port_counts(n, p).unwrap();
        let d = c.xmit_discard_details();
        assert_eq!(d.sw_lifetime_limit_discards, c.counters().xmit_discards);
        d.sw_lifetime_limit_discards
    };
    assert_eq!(lifetime(&f, leaf, up_port) + lifetime(&f, spine, back), 1);
    // A GS MAD caught the same way, the same.
    assert_eq!(f.carry(sm_node, lid), None);
    assert_eq!(lifetime(&f, leaf, up_port) + lifetime(&f, spine, back), 2);
    let hops = f.stats.hops - hops0;
    // Out of the SM's CA, then up to 64 switches, each sending it on.
    assert!(
        hops > u64::from(fabric::sim::MAX_LID_ROUTED_HOPS) - 4
            && hops <= u64::from(fabric::sim::MAX_LID_ROUTED_HOPS) + 1,
        "{hops}"
    );
    // The fabric still answers: repaired, the same SMP is delivered.
    switch_mut(&mut f, leaf).model.lft[l] = (1..=36u8)
        .find(|&p| f.topo.peer_of(leaf, p).is_some_and(|(n, _)| n == ca))
        .unwrap();
    let smp = Smp::lid_routed(Method::Get, AttributeId::NodeInfo, 0, 8, MKey(0));
    f.attach(sm_node);
    assert!(f.inject(sm_node, smp, lid.0));
    f.run_to_quiescence();
    let got = f.take_delivered();
    assert!(
        got.iter()
            .any(|d| d.smp.method() == Method::GetResp && d.slid == lid.0),
        "{got:?}"
    );
    assert!(f.run(&mut sm));
}
