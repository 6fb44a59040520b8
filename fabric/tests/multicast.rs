//! Multicast forwarding programmed by ibkit's SM on simulated fabrics: a
//! packet flooded through the MFTs actually installed in the simulated
//! switches, from each member of a group, reaches every other member once
//! and no other port; joins, leaves and deletions send only the MFT
//! blocks that change; a group of one member needs no tree.

use fabric::sim::{bring_up, Fabric, SimConfig, SimNode};
use mad_core::attr::{AttributeId, NodeType};
use mad_core::{Guid, Lid, Method};
use smi::sm::{McastError, NodeId, Sm, SmConfig};
use std::collections::BTreeSet;

/// The SM's node for the fabric's node `i`.
fn sm_node(f: &Fabric, sm: &Sm, i: usize) -> NodeId {
    sm.subnet().by_guid(Guid(f.topo.nodes[i].guid)).unwrap()
}

/// The CAs of the fabric other than the SM's.
fn cas(f: &Fabric) -> Vec<usize> {
    (0..f.nodes.len())
        .filter(|&i| i != f.sm_node && f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .collect()
}

/// Set(MulticastForwardingTable) the SM has sent so far.
fn mft_sets(sm: &Sm) -> u64 {
    let id = u16::from(AttributeId::MulticastForwardingTable);
    (sm.stats().per_phase_kind.iter())
        .filter(|((_, m, a), _)| *m == u8::from(Method::Set) && *a == id)
        .map(|(_, n)| n)
        .sum()
}

/// Makes `members` (fabric CA nodes) the group of `mlid` and runs the
/// fabric until the SM is done: the Set(MFT) SMPs it took.
fn group(f: &mut Fabric, sm: &mut Sm, mlid: u16, members: &[usize]) -> u64 {
    let before = mft_sets(sm);
    let m: Vec<(NodeId, u8)> = members.iter().map(|&i| (sm_node(f, sm, i), 1)).collect();
    sm.set_multicast_group(Lid(mlid), &m).unwrap();
    assert!(f.run(sm));
    assert!(sm.is_idle());
    mft_sets(sm) - before
}

/// From each member, every other member once and nothing else; from a
/// CA outside the group (a send-only sender's packet enters the tree only
/// if it is a member), nothing when the group has no tree.
fn delivered_exactly(f: &Fabric, mlid: u16, members: &[usize]) {
    let set: BTreeSet<usize> = members.iter().copied().collect();
    for &m in members {
        let w = f.multicast_walk(m, Lid(mlid));
        assert!(!w.looped, "from {m}: a loop");
        let want: BTreeSet<usize> = set.iter().copied().filter(|&x| x != m).collect();
        let got: BTreeSet<usize> = w.nodes();
        assert_eq!(got, want, "from {}: reached {got:?}", f.topo.nodes[m].name);
        assert!(
            w.delivered.values().all(|&n| n == 1),
            "from {}: duplicates {:?}",
            f.topo.nodes[m].name,
            w.delivered
        );
    }
}

/// No switch of the fabric holds an entry for `mlid`.
fn nothing_installed(f: &Fabric, mlid: u16) {
    for n in &f.nodes {
        if let SimNode::Switch(s) = n {
            if let Some(e) = s.model.mft.get(usize::from(mlid - 0xC000)) {
                assert_eq!(*e, [0; 5]);
            }
        }
    }
}

#[test]
fn a_group_on_fat_tree_324_reaches_each_member_once() {
    let (mut f, mut sm, up) =
        bring_up("fat-tree-324", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    assert_eq!(mft_sets(&sm), 0, "no group, no MFT");
    let c = cas(&f);
    // Four members on four different leaves, far apart.
    let members = [c[0], c[100], c[200], c[300]];
    let first = group(&mut f, &mut sm, 0xC001, &members);
    delivered_exactly(&f, 0xC001, &members);
    // One Set per switch of the tree (one block, one position each: the
    // tree's ports of a 36-port switch fall in up to three positions).
    assert!((1..=3 * 10).contains(&first), "{first} Set(MFT)");
    eprintln!("fat-tree-324: a group of 4 on 4 leaves took {first} Set(MFT)");
    // Joining a fifth member on a leaf already in the tree changes that
    // leaf only: one block at one position.
    let same_leaf = c[1];
    let mut five = members.to_vec();
    five.push(same_leaf);
    let join = group(&mut f, &mut sm, 0xC001, &five);
    assert_eq!(join, 1, "a join on a leaf of the tree: one Set");
    delivered_exactly(&f, 0xC001, &five);
    // A second group in the same block (MLIDs 0xC000..0xC01F): its own
    // tree; the first group's entries stay (each Set carries the whole
    // block).
    let other = [c[5], c[150], c[250]];
    group(&mut f, &mut sm, 0xC002, &other);
    delivered_exactly(&f, 0xC001, &five);
    delivered_exactly(&f, 0xC002, &other);
    // A member leaves.
    let four: Vec<usize> = five.iter().copied().filter(|&x| x != c[200]).collect();
    group(&mut f, &mut sm, 0xC001, &four);
    delivered_exactly(&f, 0xC001, &four);
    assert!(!f.multicast_walk(c[0], Lid(0xC001)).reaches(c[200]));
    // Setting the same members again sends nothing.
    assert_eq!(group(&mut f, &mut sm, 0xC001, &four), 0);
    // Down to one member: no tree, every entry of the group cleared.
    group(&mut f, &mut sm, 0xC001, &four[..1]);
    nothing_installed(&f, 0xC001);
    assert!(f.multicast_walk(four[0], Lid(0xC001)).delivered.is_empty());
    // Deleted: nothing left; the other group untouched.
    group(&mut f, &mut sm, 0xC001, &[]);
    nothing_installed(&f, 0xC001);
    delivered_exactly(&f, 0xC002, &other);
    assert_eq!(sm.multicast_groups().count(), 1);
    // Four joins one at a time, as hosts join: the issue measured OpenSM
    // 3.3.23 sending 24 Set(MFT) for them (every switch of the tree on
    // each join, no tree for the first).
    let mut joined = Vec::new();
    let mut sets = Vec::new();
    for &m in &members {
        joined.push(m);
        sets.push(group(&mut f, &mut sm, 0xC003, &joined));
        if joined.len() > 1 {
            delivered_exactly(&f, 0xC003, &joined);
        }
    }
    let total: u64 = sets.iter().sum();
    eprintln!("fat-tree-324: 4 joins one at a time took {sets:?} = {total} Set(MFT) (OpenSM: 24)");
    assert_eq!(sets[0], 0, "a group of one needs no tree");
    assert!(total < 24, "{sets:?}");
}

/// Every CA of a fabric in one group, as IPoIB's broadcast group is: a
/// tree over every leaf, each member reached once.
#[test]
fn every_ca_in_one_group() {
    for spec in ["mport-ntree:8:2", "random:12:5"] {
        let (mut f, mut sm, up) =
            bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
        assert!(up);
        let mut all = cas(&f);
        all.push(f.sm_node);
        let n = group(&mut f, &mut sm, 0xC000, &all);
        delivered_exactly(&f, 0xC000, &all);
        let switches = f
            .nodes
            .iter()
            .filter(|n| matches!(n, SimNode::Switch(_)))
            .count();
        assert!(
            n as usize <= 2 * switches,
            "{spec}: {n} Set(MFT) for {switches} switches"
        );
    }
}

/// What cannot be a group is refused and changes nothing.
#[test]
fn bad_groups_are_refused() {
    let (f, mut sm, up) =
        bring_up("mport-ntree:4:2", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let c = cas(&f);
    let a = sm_node(&f, &sm, c[0]);
    assert_eq!(
        sm.set_multicast_group(Lid(0x10), &[(a, 1)]),
        Err(McastError::NotMulticast(Lid(0x10)))
    );
    assert_eq!(
        sm.set_multicast_group(Lid(0xFFFF), &[(a, 1)]),
        Err(McastError::NotMulticast(Lid(0xFFFF)))
    );
    assert_eq!(
        sm.set_multicast_group(Lid(0xC000), &[(a, 2)]),
        Err(McastError::NotAnEndPort(a, 2))
    );
    let sw = sm_node(
        &f,
        &sm,
        (0..f.nodes.len())
            .find(|&i| f.topo.nodes[i].kind == NodeType::Switch)
            .unwrap(),
    );
    assert_eq!(
        sm.set_multicast_group(Lid(0xC000), &[(sw, 3)]),
        Err(McastError::NotAnEndPort(sw, 3))
    );
    assert_eq!(
        sm.set_multicast_group(Lid(0xC000), &[(NodeId(9999), 1)]),
        Err(McastError::NotAnEndPort(NodeId(9999), 1))
    );
    assert_eq!(sm.multicast_groups().count(), 0);
    assert!(sm.is_idle());
}

/// A cable of a group's tree fails: the SM's sweep routes around it and
/// builds the tree again, sending only the MFT blocks that change, and
/// each member reaches every other once again.
#[test]
fn a_tree_cable_that_fails_is_routed_around() {
    use fabric::sim::FabricEvent;
    const MS: u64 = 1_000_000;
    let (mut f, mut sm, up) =
        bring_up("fat-tree-324", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let c = cas(&f);
    let members = [c[0], c[120], c[240], c[320]];
    group(&mut f, &mut sm, 0xC005, &members);
    delivered_exactly(&f, 0xC005, &members);
    // A switch-to-switch port of the tree, from the switches' own entries.
    let (sw, port) = (0..f.nodes.len())
        .find_map(|i| {
            let SimNode::Switch(s) = &f.nodes[i] else {
                return None;
            };
            let e = s.model.mft.get(5)?;
            (1..=f.topo.nodes[i].ports)
                .find(|&p| {
                    e[usize::from(p / 16)] & (1 << (p % 16)) != 0
                        && f.topo
                            .peer_of(i, p)
                            .is_some_and(|(m, _)| f.topo.nodes[m].kind == NodeType::Switch)
                })
                .map(|p| (i, p))
        })
        .unwrap();
    let before = mft_sets(&sm);
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::LinkDown(sw, port));
    assert!(f.run_until(&mut sm, t + 20_000 * MS));
    assert!(sm.is_idle());
    delivered_exactly(&f, 0xC005, &members);
    let sent = mft_sets(&sm) - before;
    eprintln!("a tree cable failed: {sent} Set(MFT) to rebuild the tree");
    assert!(
        sent >= 1,
        "the tree used the cable: something had to change"
    );
}

/// Send-only members (JoinState SendOnlyNonMember / SendOnlyFullMember)
/// send into the group and receive nothing: from each of them a packet
/// reaches every receiving member once; from a receiver it reaches the
/// other receivers and no send-only member; and a leaf holding only
/// send-only members gets no copy (the walks from receivers take as many
/// switch hops as without them).
#[test]
fn send_only_members_send_and_do_not_receive() {
    use smi::sm::GroupMember;
    let (mut f, mut sm, up) =
        bring_up("fat-tree-324", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let c = cas(&f);
    let leaf = |f: &Fabric, i: usize| f.topo.peer_of(i, 1).unwrap().0;
    let receivers = [c[0], c[100], c[200]];
    // One send-only member on a receiver's leaf, one on a leaf of its own.
    let beside = c[1];
    let alone = *c
        .iter()
        .find(|&&x| receivers.iter().all(|&r| leaf(&f, r) != leaf(&f, x)))
        .unwrap();
    assert_eq!(leaf(&f, beside), leaf(&f, receivers[0]));
    let mlid = 0xC021;
    let as_member = |f: &Fabric, sm: &Sm, i: usize, send_only: bool| GroupMember {
        node: sm_node(f, sm, i),
        port: 1,
        send_only,
    };
    // The receivers alone first, for the hop count of their walks.
    group(&mut f, &mut sm, mlid, &receivers);
    let hops: Vec<u64> = (receivers.iter())
        .map(|&r| f.multicast_walk(r, Lid(mlid)).hops)
        .collect();
    let mut m: Vec<GroupMember> = (receivers.iter())
        .map(|&r| as_member(&f, &sm, r, false))
        .collect();
    m.push(as_member(&f, &sm, beside, true));
    m.push(as_member(&f, &sm, alone, true));
    sm.set_multicast_group(Lid(mlid), &m).unwrap();
    assert!(f.run(&mut sm) && sm.is_idle());
    let want: BTreeSet<usize> = receivers.iter().copied().collect();
    for (k, &r) in receivers.iter().enumerate() {
        let w = f.multicast_walk(r, Lid(mlid));
        let got: BTreeSet<usize> = w.nodes();
        let others: BTreeSet<usize> = want.iter().copied().filter(|&x| x != r).collect();
        assert_eq!(got, others, "from receiver {}", f.topo.nodes[r].name);
        assert!(w.delivered.values().all(|&n| n == 1));
        assert_eq!(w.hops, hops[k], "copies went towards a send-only leaf");
    }
    for s in [beside, alone] {
        let w = f.multicast_walk(s, Lid(mlid));
        let got: BTreeSet<usize> = w.nodes();
        assert_eq!(got, want, "from send-only {}", f.topo.nodes[s].name);
        assert!(w.delivered.values().all(|&n| n == 1) && !w.looped);
    }
    // A send-only member that joins in full receives too.
    let mut full = m.clone();
    full.push(as_member(&f, &sm, alone, false));
    sm.set_multicast_group(Lid(mlid), &full).unwrap();
    assert!(f.run(&mut sm) && sm.is_idle());
    assert!(f.multicast_walk(receivers[0], Lid(mlid)).reaches(alone));
    // Senders with no receiver: no tree at all.
    let senders = [
        as_member(&f, &sm, beside, true),
        as_member(&f, &sm, alone, true),
    ];
    sm.set_multicast_group(Lid(mlid), &senders).unwrap();
    assert!(f.run(&mut sm) && sm.is_idle());
    nothing_installed(&f, mlid);
}

/// The SwitchInfo.MulticastFDBTop of every switch (ibkit's SMA advertises
/// IsMulticastFDBTopSupported and drops MLIDs above it) ends at the
/// highest MFT block the switch uses, 0xBFFF where it uses none; it moves
/// with the groups, costs one Set(SwitchInfo) where it moves and none
/// where it does not.
#[test]
fn multicast_fdb_top_follows_the_blocks_in_use() {
    let (mut f, mut sm, up) =
        bring_up("fat-tree-324", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let si_sets = |sm: &Sm| -> u64 {
        let id = u16::from(AttributeId::SwitchInfo);
        (sm.stats().per_phase_kind.iter())
            .filter(|((_, m, a), _)| *m == u8::from(Method::Set) && *a == id)
            .map(|(_, n)| n)
            .sum()
    };
    let tops = |f: &Fabric| -> Vec<(usize, u16, u16)> {
        // (switch, top held, highest MLID with an entry)
        (0..f.nodes.len())
            .filter_map(|i| match &f.nodes[i] {
                SimNode::Switch(s) => {
                    let used = (s.model.mft.iter().enumerate())
                        .filter(|(_, e)| e.iter().any(|&b| b != 0))
                        .map(|(k, _)| 0xC000 + k as u16)
                        .next_back()
                        .unwrap_or(0xBFFF);
                    Some((i, s.model.switch_info.multicast_fdb_top, used))
                }
                _ => None,
            })
            .collect()
    };
    let check = |f: &Fabric| {
        for (i, top, used) in tops(f) {
            let want = if used == 0xBFFF {
                0xBFFF
            } else {
                0xC000 + ((used - 0xC000) / 32 + 1) * 32 - 1
            };
            assert_eq!(
                top, want,
                "{}: highest entry {used:#x}",
                f.topo.nodes[i].name
            );
        }
    };
    check(&f);
    let c = cas(&f);
    let members = [c[0], c[100], c[200], c[300]];
    let before = si_sets(&sm);
    group(&mut f, &mut sm, 0xC040, &members);
    check(&f);
    let in_tree = tops(&f).iter().filter(|t| t.1 != 0xBFFF).count() as u64;
    assert!(in_tree >= 2);
    assert_eq!(
        si_sets(&sm) - before,
        in_tree,
        "one Set(SwitchInfo) per switch of the tree"
    );
    delivered_exactly(&f, 0xC040, &members);
    // Another group in the same block moves no top on the switches it
    // shares; a group in a higher block raises them.
    let before = si_sets(&sm);
    group(&mut f, &mut sm, 0xC041, &members);
    assert_eq!(si_sets(&sm), before, "same block, same tops");
    group(&mut f, &mut sm, 0xC0A0, &members);
    check(&f);
    assert!(si_sets(&sm) > before);
    delivered_exactly(&f, 0xC0A0, &members);
    delivered_exactly(&f, 0xC040, &members);
    // All gone: every top back to 0xBFFF.
    for mlid in [0xC040, 0xC041, 0xC0A0] {
        group(&mut f, &mut sm, mlid, &[]);
    }
    check(&f);
    assert!(tops(&f).iter().all(|t| t.1 == 0xBFFF));
    // A switch drops an MLID above its top even where an entry is left:
    // an entry written behind the SM's back, above the top, forwards
    // nothing.
    group(&mut f, &mut sm, 0xC040, &members);
    let (i, top, _) = *tops(&f).iter().find(|t| t.1 != 0xBFFF).unwrap();
    let SimNode::Switch(s) = &mut f.nodes[i] else {
        unreachable!()
    };
    let above = usize::from(top - 0xC000 + 1);
    s.model.mft[above] = [0xFFFF; 5];
    assert!(s.model.mft_entry(Lid(top + 1)).is_none());
    assert!(s.model.mft_entry(Lid(0xC040)).is_some());
}

/// OpenSM's `disable_multicast`: a group is kept (listed, as the SA lists
/// it) but no MFT or MulticastFDBTop is written, at a join or through a
/// heavy sweep, and a packet to the MLID reaches nobody.
#[test]
fn with_multicast_disabled_groups_are_kept_and_no_switch_is_written() {
    let cfg = SmConfig {
        disable_multicast: true,
        ..SmConfig::default()
    };
    let (mut f, mut sm, up) = bring_up("mport-ntree:4:2", SimConfig::default(), cfg).unwrap();
    assert!(up);
    let c = cas(&f);
    let members = [c[0], c[3], c[6]];
    assert_eq!(group(&mut f, &mut sm, 0xC001, &members), 0);
    assert_eq!(sm.multicast_groups().count(), 1, "kept");
    nothing_installed(&f, 0xC001);
    assert!(f.multicast_walk(c[0], Lid(0xC001)).delivered.is_empty());
    let before = sm.stats().count(Method::Set, AttributeId::SwitchInfo);
    sm.request_heavy_sweep(f.now_ns() / 1_000_000);
    assert!(f.run(&mut sm));
    assert_eq!(mft_sets(&sm), 0, "a sweep writes none either");
    assert_eq!(
        sm.stats().count(Method::Set, AttributeId::SwitchInfo),
        before,
        "no Set(SwitchInfo) to move a MulticastFDBTop"
    );
    for n in &f.nodes {
        if let SimNode::Switch(s) = n {
            assert_eq!(
                s.model.switch_info.multicast_fdb_top, 0xBFFF,
                "{:?}",
                s.model.switch_info
            );
        }
    }
    // The same group with multicast on: written, and delivered.
    let (mut f2, mut on, _) =
        bring_up("mport-ntree:4:2", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(group(&mut f2, &mut on, 0xC001, &members) > 0);
    delivered_exactly(&f2, 0xC001, &members);
}

/// OpenSM's `use_mfttop FALSE`: the trees and MFT blocks are written as
/// ever, but no switch's MulticastFDBTop: each keeps the 0xBFFF it
/// started with, and, as a switch that honours the field does, forwards
/// no packet to the group (OpenSM's option makes the same fabric). With
/// the option on (the default) the same group is delivered.
#[test]
fn without_use_mfttop_the_tables_are_written_but_not_their_top() {
    let cfg = SmConfig {
        use_mfttop: false,
        ..SmConfig::default()
    };
    let (mut f, mut sm, up) = bring_up("mport-ntree:4:2", SimConfig::default(), cfg).unwrap();
    assert!(up);
    let c = cas(&f);
    let members = [c[0], c[3], c[6]];
    assert!(
        group(&mut f, &mut sm, 0xC001, &members) > 0,
        "MFT blocks written"
    );
    sm.request_heavy_sweep(f.now_ns() / 1_000_000);
    assert!(f.run(&mut sm));
    let mut switches = 0;
    for n in &f.nodes {
        if let SimNode::Switch(s) = n {
            assert_eq!(s.model.switch_info.multicast_fdb_top, 0xBFFF);
            switches += 1;
        }
    }
    assert_eq!(switches, 6);
    assert!(f.multicast_walk(c[0], Lid(0xC001)).delivered.is_empty());
    let (mut f2, mut on, _) =
        bring_up("mport-ntree:4:2", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(group(&mut f2, &mut on, 0xC001, &members) > 0);
    delivered_exactly(&f2, 0xC001, &members);
}
