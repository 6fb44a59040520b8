//! Partitions applied by ibkit's SM on simulated fabrics: the P_Key tables
//! the simulated agents hold after a bring-up with a `partitions.conf`,
//! the SMPs it took (only the blocks that differ), enforcement on the
//! switch ports cabled to CAs, and a new configuration on a running
//! subnet changing only what differs.

use fabric::sim::{Fabric, FabricEvent, PartitionDrop, SimConfig, SimNode};
use fabric::topology::Topology;
use mad_core::attr::{AttributeId, NodeType, PortInfo, PortState};
use mad_core::{Method, PKey, Smp};
use smi::sm::partitions::parse;
use smi::sm::{Sm, SmConfig};

/// The agent's P_Key table and PortInfo of `port` of fabric node `i`.
fn port(f: &Fabric, i: usize, port: u8) -> (Vec<u16>, PortInfo) {
    let at = usize::from(port);
    let (pkeys, info) = match &f.nodes[i] {
        SimNode::Switch(s) => (&s.model.ports[at].pkeys[..], s.model.ports[at].info),
        SimNode::Ca(c) => (&c.model.ports[at].pkeys[..], c.model.ports[at].info),
        SimNode::Hypervisor(h) => (&h.pf.model.ports[at].pkeys[..], h.pf.model.ports[at].info),
    };
    (pkeys.iter().map(|k| k.0).collect(), info)
}

/// The CAs of the fabric other than the SM's.
fn cas(f: &Fabric) -> Vec<usize> {
    (0..f.nodes.len())
        .filter(|&i| i != f.sm_node && f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .collect()
}

/// The fabric `spec` brought up by an SM given `conf` first.
fn up_with(spec: &str, conf: &str) -> (Fabric, Sm) {
    let mut f = Fabric::new(Topology::from_spec(spec).unwrap(), SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig::default());
    assert_eq!(sm.set_partitions(parse(conf).unwrap()), 0);
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    (f, sm)
}

fn sets(sm: &Sm, attr: AttributeId) -> u64 {
    sm.stats().count(Method::Set, attr)
}

/// The switch port a CA's port 1 is cabled to.
fn switch_port(f: &Fabric, ca: usize) -> (usize, u8) {
    f.topo.peer[ca][1].unwrap()
}

#[test]
fn one_two_member_partition_on_fat_tree_324_costs_four_pkey_sets() {
    let probe = Fabric::new(
        Topology::from_spec("fat-tree-324").unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    let c = cas(&probe);
    let (a, b) = (c[3], c[200]);
    let (ga, gb) = (probe.topo.nodes[a].guid + 1, probe.topo.nodes[b].guid + 1);
    let conf =
        format!("Default=0x7fff,ipoib:ALL=full;\nstorage=0x0042:{ga:#x}=full,{gb:#x}=full;\n");
    let (f, sm) = up_with("fat-tree-324", &conf);
    // 2 CA ports and the 2 switch ports they are cabled to.
    assert_eq!(sets(&sm, AttributeId::PKeyTable), 4);
    for &x in &[a, b] {
        let (t, _) = port(&f, x, 1);
        assert_eq!(t[..3], [0xFFFF, 0x8042, 0]);
        let (s, q) = switch_port(&f, x);
        let (t, pi) = port(&f, s, q);
        assert_eq!(t[..3], [0xFFFF, 0x8042, 0]);
        assert!(pi.partition_enforcement_inbound && pi.partition_enforcement_outbound);
    }
    // Every other CA holds the default only; every switch port cabled to
    // a CA enforces; switch-to-switch links do not.
    for &x in c.iter().filter(|&&x| x != a && x != b) {
        assert_eq!(
            port(&f, x, 1).0[..2],
            [0xFFFF, 0],
            "{}",
            f.topo.nodes[x].name
        );
        let (s, q) = switch_port(&f, x);
        assert!(port(&f, s, q).1.partition_enforcement_inbound);
    }
    for (i, p, _) in switch_links(&f).into_iter().filter(|l| l.2) {
        assert!(!port(&f, i, p).1.partition_enforcement_inbound);
    }
    // The SM knows the tables it gave, and the SA's view of who shares
    // what follows them.
    let sub = sm.subnet();
    let na = sub.by_port_guid(mad_core::Guid(ga)).unwrap().0;
    let nb = sub.by_port_guid(mad_core::Guid(gb)).unwrap().0;
    let other = sub
        .by_port_guid(mad_core::Guid(f.topo.nodes[c[7]].guid + 1))
        .unwrap()
        .0;
    assert_eq!(sub.pkey_table(na, 1).unwrap()[..2], [0xFFFF, 0x8042]);
    assert_eq!(
        sub.shared_pkey((na, 1), (nb, 1), Some(0x42)),
        Some(PKey(0x8042))
    );
    assert_eq!(sub.shared_pkey((na, 1), (other, 1), Some(0x42)), None);
    assert_eq!(
        sub.shared_pkey((na, 1), (other, 1), None),
        Some(PKey(0xFFFF))
    );
    // The enforcement bits rode on the activation: no Set(PortInfo) more
    // than a bring-up without partitions.
    let mut plain = Fabric::new(
        Topology::from_spec("fat-tree-324").unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    let mut sm0 = Sm::new(SmConfig::default());
    assert!(plain.bring_up(&mut sm0));
    assert_eq!(
        sets(&sm, AttributeId::PortInfo),
        sets(&sm0, AttributeId::PortInfo)
    );
    let reads = sm.stats().count(Method::Get, AttributeId::PKeyTable);
    println!(
        "fat-tree-324, one two-member partition: {} Set(P_KeyTable), {reads} Get(P_KeyTable), \
         {} SMPs in all against {} without partitions",
        sets(&sm, AttributeId::PKeyTable),
        sm.stats().total(),
        sm0.stats().total()
    );
}

#[test]
fn limited_members_share_nothing_and_the_default_can_be_limited() {
    let probe = Fabric::new(
        Topology::from_spec("mport-ntree:4:2").unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    let c = cas(&probe);
    let g = |i: usize| probe.topo.nodes[c[i]].guid + 1;
    // No Default line: every port is a limited member of 0x7FFF, the SM's
    // port a full one.
    let conf = format!(
        "compute=0x10:{:#x},{:#x}=limited,{:#x}=full;\n",
        g(0),
        g(1),
        g(2)
    );
    let (f, sm) = up_with("mport-ntree:4:2", &conf);
    let sub = sm.subnet();
    let n = |i: usize| (sub.by_port_guid(mad_core::Guid(g(i))).unwrap().0, 1u8);
    assert_eq!(port(&f, c[0], 1).0[..2], [0x7FFF, 0x0010]);
    assert_eq!(port(&f, c[2], 1).0[..2], [0x7FFF, 0x8010]);
    assert_eq!(port(&f, f.sm_node, 1).0[0], 0xFFFF);
    // Two limited members: nothing shared; a limited and a full: the
    // partition; everyone reaches the SM over the default.
    assert_eq!(sub.shared_pkey(n(0), n(1), None), None);
    assert_eq!(sub.shared_pkey(n(0), n(2), None), Some(PKey(0x0010)));
    let sm_port = (smi::sm::NodeId(0), sub.nodes()[0].info.local_port_num);
    assert_eq!(sub.shared_pkey(n(0), sm_port, None), Some(PKey(0x7FFF)));
    // Each limited key's switch port holds it too.
    let (s, q) = switch_port(&f, c[0]);
    assert_eq!(port(&f, s, q).0[..3], [0x7FFF, 0x0010, 0]);
}

#[test]
fn a_new_configuration_on_a_running_subnet_sends_only_the_difference() {
    let probe = Fabric::new(
        Topology::from_spec("fat-tree-324").unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    let c = cas(&probe);
    let g = |i: usize| probe.topo.nodes[c[i]].guid + 1;
    let first = format!(
        "Default=0x7fff:ALL=full;\np=0x42:{:#x}=full,{:#x}=full;\n",
        g(1),
        g(2)
    );
    let (mut f, mut sm) = up_with("fat-tree-324", &first);
    let before = (sets(&sm, AttributeId::PKeyTable), sm.stats().total());
    // Move one member out and one in, add a partition for a third port.
    let second = format!(
        "Default=0x7fff:ALL=full;\np=0x42:{:#x}=full,{:#x}=full;\nq=0x43:{:#x}=full;\n",
        g(2),
        g(3),
        g(2)
    );
    let queued = sm.set_partitions(parse(&second).unwrap());
    assert!(f.run(&mut sm));
    assert!(sm.is_idle());
    let pkey_sets = sets(&sm, AttributeId::PKeyTable) - before.0;
    // g(1) loses 0x42 (CA + switch port), g(3) gains it (2), g(2) gains
    // 0x43 (2): 6 blocks; no table is read again.
    assert_eq!(pkey_sets, 6);
    assert_eq!(sm.stats().total() - before.1, 6);
    assert_eq!(queued, 6);
    assert_eq!(port(&f, c[1], 1).0[..3], [0xFFFF, 0, 0]);
    assert_eq!(port(&f, c[2], 1).0[..3], [0xFFFF, 0x8042, 0x8043]);
    assert_eq!(port(&f, c[3], 1).0[..3], [0xFFFF, 0x8042, 0]);
    let (s, q) = switch_port(&f, c[2]);
    assert_eq!(port(&f, s, q).0[..3], [0xFFFF, 0x8042, 0x8043]);
    // The same configuration again: nothing to send.
    assert_eq!(sm.set_partitions(parse(&second).unwrap()), 0);
}

/// OpenSM's `allow_both_pkeys` turned on and off on a running subnet
/// (ibkit's SIGHUP does it; OpenSM needs a restart): the `both` member's
/// table gains the limited key beside the full one and loses it again,
/// one Set(P_KeyTable) each time; its switch port keeps the full key
/// alone; nothing else is written; and the SA's shared key follows.
#[test]
fn allow_both_pkeys_on_a_running_subnet_writes_only_the_both_members_table() {
    let (f0, c, _) = with_two_in_0x42();
    let g = |i: usize| f0.topo.nodes[c[i]].guid + 1;
    let conf = format!(
        "Default=0x7fff:ALL=full;\np=0x42:{:#x}=both,{:#x}=limited;\n",
        g(1),
        g(2)
    );
    let (mut f, mut sm) = up_with("mport-ntree:4:2", &conf);
    assert!(!sm.config().allow_both_pkeys);
    assert_eq!(port(&f, c[1], 1).0[..3], [0xFFFF, 0x8042, 0]);
    let (s, q) = switch_port(&f, c[1]);
    let end = |sm: &Sm, i: usize| {
        let guid = mad_core::Guid(f0.topo.nodes[i].guid + 1);
        (sm.subnet().by_port_guid(guid).unwrap().0, 1u8)
    };
    for (on, want) in [
        (true, [0xFFFF, 0x8042, 0x0042]),
        (false, [0xFFFF, 0x8042, 0]),
    ] {
        let before = (sets(&sm, AttributeId::PKeyTable), sm.stats().total());
        let queued = sm.set_allow_both_pkeys(on);
        assert!(f.run(&mut sm));
        assert!(sm.is_idle());
        assert_eq!(queued, 1, "allow_both_pkeys {on}");
        assert_eq!(sets(&sm, AttributeId::PKeyTable) - before.0, 1);
        assert_eq!(sm.stats().total() - before.1, 1);
        assert_eq!(port(&f, c[1], 1).0[..3], want, "allow_both_pkeys {on}");
        assert_eq!(port(&f, s, q).0[..3], [0xFFFF, 0x8042, 0]);
        assert_eq!(port(&f, c[2], 1).0[..3], [0xFFFF, 0x0042, 0]);
        // Toward the limited member only the full key is shared.
        let k = sm
            .subnet()
            .shared_pkey(end(&sm, c[1]), end(&sm, c[2]), Some(0x42));
        assert_eq!(k, Some(PKey(0x8042)));
        assert_eq!(sm.set_allow_both_pkeys(on), 0, "the same value again");
    }
}

/// OpenSM's `keep_pkey_indexes` off: a partition taken away leaves no
/// hole in its member's table (the keys after it move down), where by
/// default the others keep their indexes; the switch port's table is
/// packed either way. Turning it off on a compact table sends nothing.
#[test]
fn without_keep_pkey_indexes_a_partition_taken_away_leaves_no_hole() {
    let (f0, c, _) = with_two_in_0x42();
    let g = f0.topo.nodes[c[1]].guid + 1;
    let two = format!("Default=0x7fff:ALL=full;\np=0x42:{g:#x}=full;\nq=0x43:{g:#x}=full;\n");
    let one = format!("Default=0x7fff:ALL=full;\nq=0x43:{g:#x}=full;\n");
    for keep in [true, false] {
        let (mut f, mut sm) = up_with("mport-ntree:4:2", &two);
        assert_eq!(port(&f, c[1], 1).0[..3], [0xFFFF, 0x8042, 0x8043]);
        assert_eq!(sm.set_keep_pkey_indexes(keep), 0, "nothing to move");
        let before = sets(&sm, AttributeId::PKeyTable);
        sm.set_partitions(parse(&one).unwrap());
        assert!(f.run(&mut sm));
        // The host's block and its switch port's.
        assert_eq!(sets(&sm, AttributeId::PKeyTable) - before, 2);
        let want = if keep {
            [0xFFFF, 0, 0x8043]
        } else {
            [0xFFFF, 0x8043, 0]
        };
        assert_eq!(port(&f, c[1], 1).0[..3], want, "keep_pkey_indexes {keep}");
        let (s, q) = switch_port(&f, c[1]);
        assert_eq!(port(&f, s, q).0[..3], [0xFFFF, 0x8043, 0]);
    }
}

/// mport-ntree:4:2, not yet brought up, with its CAs (`cas`) and a
/// configuration of the default partition and 0x42, whose members are the
/// second and third CAs only.
fn with_two_in_0x42() -> (Fabric, Vec<usize>, String) {
    let f = Fabric::new(
        Topology::from_spec("mport-ntree:4:2").unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    let c = cas(&f);
    let conf = format!(
        "Default=0x7fff:ALL=full;\np=0x42:{:#x}=full,{:#x}=full;\n",
        f.topo.nodes[c[1]].guid + 1,
        f.topo.nodes[c[2]].guid + 1
    );
    (f, c, conf)
}

/// [`with_two_in_0x42`] brought up.
fn two_in_0x42() -> (Fabric, Sm, Vec<usize>) {
    let (_, c, conf) = with_two_in_0x42();
    let (f, sm) = up_with("mport-ntree:4:2", &conf);
    (f, sm, c)
}

#[test]
fn a_host_that_comes_back_freshly_powered_gets_its_table_again() {
    let (mut f, mut sm, c) = two_in_0x42();
    const MS: u64 = 1_000_000;
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(c[1]));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    let before = (
        sm.stats().count(Method::Get, AttributeId::PKeyTable),
        sets(&sm, AttributeId::PKeyTable),
    );
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeUp(c[1]));
    assert!(f.run_until(&mut sm, t + 2_000 * MS));
    assert!(sm.is_idle());
    // Powered afresh it holds the default only; the SM reads its table
    // (and no other) and writes the partition back: one block.
    assert_eq!(port(&f, c[1], 1).0[..3], [0xFFFF, 0x8042, 0]);
    let reads = sm.stats().count(Method::Get, AttributeId::PKeyTable) - before.0;
    assert_eq!(reads, 1);
    assert_eq!(sets(&sm, AttributeId::PKeyTable) - before.1, 1);
}

/// A Set(PortInfo) that arms a link.
/// An SM sweeping every 20 ms, with partitions `conf` and OpenSM's QoS
/// defaults.
fn sweeping_sm(conf: &str) -> Sm {
    let mut sm = Sm::new(SmConfig {
        sweep_interval_ms: Some(20),
        ..SmConfig::default()
    });
    sm.set_partitions(parse(conf).unwrap());
    sm.set_qos(smi::sm::qos::QosConfig::default());
    sm
}

/// The QoS tables of CA `i`'s port.
fn qos(f: &Fabric, i: usize) -> String {
    match &f.nodes[i] {
        SimNode::Ca(c) => format!("{:?}", (&c.model.ports[1].sl2vl, &c.model.ports[1].vl_arb)),
        _ => panic!("not a CA"),
    }
}

fn arming(smp: &Smp) -> bool {
    smp.method() == Method::Set
        && smp.attribute_id() == AttributeId::PortInfo
        && PortInfo::decode(&smp.data).is_ok_and(|pi| pi.port_state == PortState::Armed)
}

/// A host reset after the SM has read and written its P_Key table, just
/// before the Sets(PortInfo) that arm its link: the host's gives it its LID
/// back, so nothing the SM reads of the host tells. The switch it hangs
/// from does (its PortStateChange, set as the link went down and up):
/// the next sweep reads or writes the tables of the hosts armed since, and
/// this one gets its partition and its QoS tables back. Before, it kept the
/// default key alone for good.
#[test]
fn a_host_reset_just_before_its_link_is_armed_gets_its_table_back() {
    const MS: u64 = 1_000_000;
    let (mut f, c, conf) = with_two_in_0x42();
    let mut sm = sweeping_sm(&conf);
    // Before its switch's end of the link is armed (once one end is,
    // a reset shows: that end drops back to Init and refuses Active).
    let (leaf, _) = switch_port(&f, c[1]);
    f.reset_before(c[1], leaf, arming);
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    let (keys, info) = port(&f, c[1], 1);
    assert_eq!(
        keys[..2],
        [0xFFFF, 0],
        "the host was reset after its table was set"
    );
    assert_eq!(info.port_state, PortState::Active);
    let (lid, other) = (info.lid, port(&f, c[2], 1).0);
    assert_eq!(other[..3], [0xFFFF, 0x8042, 0]);
    assert_ne!(
        qos(&f, c[1]),
        qos(&f, c[2]),
        "its QoS tables were reset too"
    );
    let t = f.now_ns();
    let reads = sm.stats().count(Method::Get, AttributeId::PKeyTable);
    f.run_until(&mut sm, t + 200 * MS);
    assert!(sm.is_idle());
    assert_eq!(port(&f, c[1], 1).0[..3], [0xFFFF, 0x8042, 0]);
    assert_eq!(port(&f, c[1], 1).1.lid, lid);
    assert_eq!(qos(&f, c[1]), qos(&f, c[2]));
    // Read again: the tables of the CAs on that leaf, and no other.
    let on_leaf = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .filter(|&i| f.topo.peer[i][1].is_some_and(|(s, _)| s == leaf))
        .count() as u64;
    let reads = sm.stats().count(Method::Get, AttributeId::PKeyTable) - reads;
    assert_eq!(reads, on_leaf);
}

fn set_switch_info(smp: &Smp) -> bool {
    smp.method() == Method::Set && smp.attribute_id() == AttributeId::SwitchInfo
}

/// At bring-up, a host reset after the SM wrote its tables and before
/// the Set(SwitchInfo) that clears its switch's PortStateChange reaches
/// the switch: that Set clears the bit the reset set, and nothing else
/// tells. Here the first such Set is lost, and the tables went out while
/// it waited to be sent again: the host kept no QoS tables (its P_Key
/// table, written only once every reading was answered, came after the
/// reset; a table read as already right would not have). The SM now
/// sends the tables only once every Set(SwitchInfo) is answered, so a
/// reset comes before the reading, which shows it.
#[test]
fn a_host_reset_before_its_switchs_port_state_change_is_cleared_gets_its_table() {
    const MS: u64 = 1_000_000;
    let (mut f, c, conf) = with_two_in_0x42();
    let mut sm = sweeping_sm(&conf);
    let (leaf, _) = switch_port(&f, c[1]);
    assert_ne!(leaf, switch_port(&f, f.sm_node).0, "not the SM's own leaf");
    f.drop_before(leaf, set_switch_info);
    f.reset_before(c[1], leaf, set_switch_info);
    assert!(f.bring_up(&mut sm), "{:?}", sm.error());
    assert!(f.reset_at_ns().is_some(), "the host was reset");
    assert_eq!(f.stats.lost, 1, "the first Set(SwitchInfo) was lost");
    let t = f.now_ns();
    f.run_until(&mut sm, t + 200 * MS);
    assert!(sm.is_idle());
    let (keys, info) = port(&f, c[1], 1);
    assert_eq!(keys[..3], [0xFFFF, 0x8042, 0]);
    assert_eq!(info.port_state, PortState::Active);
    assert_eq!(qos(&f, c[1]), qos(&f, c[2]));
    assert_eq!(port(&f, c[2], 1).0[..3], [0xFFFF, 0x8042, 0]);
}

/// A leaf switch that reboots (its cables fail, it comes back freshly
/// powered: no LID, no tables) gets its P_Key tables and enforcement
/// back on the ports cabled to the partition's members, and its routes.
#[test]
fn a_leaf_switch_that_reboots_gets_its_tables_and_enforcement_again() {
    let (mut f, mut sm, c) = two_in_0x42();
    let (leaf, q) = switch_port(&f, c[1]);
    assert_ne!(leaf, switch_port(&f, f.sm_node).0, "not the SM's own leaf");
    let held = port(&f, leaf, q);
    assert_eq!(held.0[..3], [0xFFFF, 0x8042, 0]);
    assert!(held.1.partition_enforcement_inbound);
    const MS: u64 = 1_000_000;
    let before = sets(&sm, AttributeId::PKeyTable);
    let t = f.now_ns();
    f.schedule(t + MS, FabricEvent::NodeDown(leaf));
    f.schedule(t + 1_000 * MS, FabricEvent::NodeUp(leaf));
    assert!(f.run_until(&mut sm, t + 4_000 * MS));
    assert!(sm.is_idle());
    assert!(sets(&sm, AttributeId::PKeyTable) > before, "written again");
    let back = port(&f, leaf, q);
    assert_eq!(back.0[..3], [0xFFFF, 0x8042, 0], "its table again");
    assert!(back.1.partition_enforcement_inbound && back.1.partition_enforcement_outbound);
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
}

#[test]
fn a_table_too_small_keeps_what_fits_and_its_switch_port_stops_enforcing() {
    let probe = Fabric::new(
        Topology::from_spec("mport-ntree:4:2").unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    let c = cas(&probe);
    let g = probe.topo.nodes[c[1]].guid + 1;
    // The default and 17 partitions for a CA port of 16 entries (its
    // switch port holds 8).
    let mut conf = String::from("Default=0x7fff:ALL=full;\n");
    for k in 0..17 {
        conf += &format!("p{k}={:#x}:{g:#x}=full;\n", 0x10 + k);
    }
    let (f, sm) = up_with("mport-ntree:4:2", &conf);
    let (t, _) = port(&f, c[1], 1);
    assert_eq!(t.len(), 16);
    assert!(t.iter().all(|&k| k != 0), "every entry used: {t:x?}");
    assert_eq!(t[0], 0xFFFF);
    let (s, q) = switch_port(&f, c[1]);
    let over: std::collections::BTreeSet<(usize, u8)> = (sm.subnet().pkey_overflow())
        .map(|(n, p)| (n.0, p))
        .collect();
    let ca = sm.subnet().by_port_guid(mad_core::Guid(g)).unwrap().0;
    let sw = sm
        .subnet()
        .by_guid(mad_core::Guid(f.topo.nodes[s].guid))
        .unwrap();
    assert_eq!(over, [(ca.0, 1), (sw.0, q)].into());
    // The switch port cannot hold the CA's keys: it does not enforce,
    // and the other CAs' switch ports do.
    assert!(!port(&f, s, q).1.partition_enforcement_inbound);
    let (s2, q2) = switch_port(&f, c[2]);
    assert!(port(&f, s2, q2).1.partition_enforcement_inbound);
}

/// Data packets honour the partitions the SM wrote: sent from each CA to
/// each other in each partition through the simulated switches (their
/// LFTs, their enforcing ports' tables, the destination's table), a
/// packet arrives exactly when the SM's `shared_pkey` (which the SA's
/// PathRecords follow) says the two share that partition. Two limited
/// members pass the enforcing switch ports (which check the partition
/// only) and are refused by the destination; a host that put a key in its
/// own table behind the SM's back is stopped on the way in.
#[test]
fn data_walks_honour_the_partitions() {
    let probe = Fabric::new(
        Topology::from_spec("mport-ntree:4:2").unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    let c = cas(&probe);
    let g = |i: usize| probe.topo.nodes[c[i]].guid + 1;
    let conf = format!(
        "Default=0x7fff:ALL=full;\n\
         storage=0x0042:{:#x}=full,{:#x}=full,{:#x}=limited,{:#x}=limited;\n\
         ops=0x0007:{:#x}=full,{:#x}=both;\n",
        g(0),
        g(1),
        g(2),
        g(3),
        g(4),
        g(0)
    );
    let (mut f, sm) = up_with("mport-ntree:4:2", &conf);
    let sub = sm.subnet();
    let end = |i: usize| {
        let guid = mad_core::Guid(f.topo.nodes[i].guid + 1);
        (sub.by_port_guid(guid).unwrap().0, 1u8)
    };
    let mut all = c.clone();
    all.push(f.sm_node);
    let (mut arrived, mut stopped) = (0, 0);
    for base in [0x7FFF, 0x0042, 0x0007] {
        for &a in &all {
            for &b in all.iter().filter(|&&b| b != a) {
                let shared = sub.shared_pkey(end(a), end(b), Some(base)).is_some();
                let got = f.walk_in_partition(a, f.nodes[b].lid(), base);
                assert_eq!(
                    got.is_ok(),
                    shared,
                    "{} → {} in {base:#x}: {got:?}",
                    f.topo.nodes[a].name,
                    f.topo.nodes[b].name
                );
                if shared {
                    arrived += 1;
                } else {
                    stopped += 1;
                }
            }
        }
    }
    println!(
        "mport-ntree:4:2: {arrived} packets arrived, {stopped} stopped, as the SM's tables say"
    );
    assert!(arrived > 0 && stopped > 0);
    // Two limited members: the receiver refuses it.
    assert_eq!(
        f.walk_in_partition(c[2], f.nodes[c[3]].lid(), 0x42),
        Err(PartitionDrop::Refused(c[3]))
    );
    // Into a host outside the partition: its switch port, which
    // enforces, drops it on the way out.
    let (s5, q5) = switch_port(&f, c[5]);
    assert_eq!(
        f.walk_in_partition(c[0], f.nodes[c[5]].lid(), 0x42),
        Err(PartitionDrop::Enforced {
            node: s5,
            port: q5,
            inbound: false
        })
    );
    // Not a member at all: it cannot send in the partition.
    assert_eq!(
        f.walk_in_partition(c[5], f.nodes[c[0]].lid(), 0x42),
        Err(PartitionDrop::NotHeld)
    );
    // A host that writes the key into its own table behind the SM's back
    // is stopped on the way in by its switch port.
    let SimNode::Ca(ca) = &mut f.nodes[c[5]] else {
        panic!("not a CA")
    };
    ca.model.ports[1].pkeys[1] = PKey(0x8042);
    assert_eq!(
        f.walk_in_partition(c[5], f.nodes[c[0]].lid(), 0x42),
        Err(PartitionDrop::Enforced {
            node: s5,
            port: q5,
            inbound: true
        })
    );
}

#[path = "common/mod.rs"]
mod common;

/// The P_Key table of VF `vf` (from 1) of fabric hypervisor `i`.
fn vf_table(f: &Fabric, i: usize, vf: u16) -> Vec<u16> {
    let SimNode::Hypervisor(h) = &f.nodes[i] else {
        panic!("node {i} is not a hypervisor");
    };
    h.vports[0].pkeys[usize::from(vf) - 1]
        .iter()
        .map(|k| k.0)
        .collect()
}

#[test]
fn vms_are_partitioned_by_their_own_vf_tables_and_keep_them_when_they_move() {
    use mad_core::Lid;
    use smi::sm::LidPolicy;
    use smi::sm::NodeId;
    let (mut f, mut sm) = common::up("mport-ntree:4:2", 4, LidPolicy::Prepopulated);
    let hyps = sm.hypervisors();
    let fx =
        |f: &Fabric, sm: &Sm, i: usize| f.node_by_guid(sm.nodes()[i].info.node_guid.0).unwrap();
    let (h0, h1) = (hyps[0], hyps[1]);
    let leaf = |sm: &Sm, h: usize| sm.attachment(h).unwrap().0;
    let h2 = *hyps
        .iter()
        .find(|&&h| leaf(&sm, h) != leaf(&sm, h0) && h != h1)
        .unwrap();
    // Two tenants; no Default line, so every port is a limited member of
    // the default partition (the SM's a full one), VMs included: tenants
    // share nothing but their own partition.
    let (a1, a2, b1) = (
        0x0002_c9ff_0000_00a1u64,
        0x0002_c9ff_0000_00a2,
        0x0002_c9ff_0000_00b1,
    );
    let conf = format!("tenantA=0x0010:{a1:#x}=full,{a2:#x}=full;\ntenantB=0x0020:{b1:#x}=full;\n");
    sm.set_partitions(parse(&conf).unwrap());
    assert!(f.run(&mut sm));
    let vfs_before = sets(&sm, AttributeId::VPortPKeyTable);
    assert_eq!(vfs_before, 0, "no VM yet: no VF table written");
    // A1 and B1 on the same hypervisor, A2 on another.
    let va1 = sm.create_vm(h0, a1).unwrap();
    let vb1 = sm.create_vm(h0, b1).unwrap();
    let va2 = sm.create_vm(h1, a2).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(sets(&sm, AttributeId::VPortPKeyTable), 3, "one Set a VM");
    let vm = |sm: &Sm, v| *sm.vm(v).unwrap();
    let (f0, f1, f2) = (fx(&f, &sm, h0), fx(&f, &sm, h1), fx(&f, &sm, h2));
    assert_eq!(vf_table(&f, f0, vm(&sm, va1).vf)[..3], [0x7FFF, 0x8010, 0]);
    assert_eq!(vf_table(&f, f0, vm(&sm, vb1).vf)[..3], [0x7FFF, 0x8020, 0]);
    assert_eq!(vf_table(&f, f1, vm(&sm, va2).vf)[..3], [0x7FFF, 0x8010, 0]);
    // The hypervisor's own port is in neither tenant.
    assert_eq!(port(&f, f0, 1).0[..2], [0x7FFF, 0]);
    // Its switch port passes both tenants' packets, and enforces.
    let (s0, q0) = switch_port(&f, f0);
    let (t, pi) = port(&f, s0, q0);
    assert_eq!(t[..4], [0x7FFF, 0x8010, 0x8020, 0]);
    assert!(pi.partition_enforcement_inbound && pi.partition_enforcement_outbound);

    let lid = |sm: &Sm, v| Lid(vm(sm, v).lid);
    let walk = |f: &Fabric, from: usize, slid: Lid, dlid: Lid, base: u16| {
        f.walk_in_partition_from(from, slid, dlid, base)
    };
    let check = |f: &Fabric, sm: &Sm, at: (usize, usize)| {
        let (fa1, fa2) = at;
        // Same tenant: both ways.
        assert!(walk(f, fa1, lid(sm, va1), lid(sm, va2), 0x10).is_ok());
        assert!(walk(f, fa2, lid(sm, va2), lid(sm, va1), 0x10).is_ok());
        // Across tenants: the sender does not hold the other's key, and
        // the receiver refuses its own key from a VM outside it.
        assert_eq!(
            walk(f, f0, lid(sm, vb1), lid(sm, va1), 0x10),
            Err(PartitionDrop::NotHeld)
        );
        assert!(matches!(
            walk(f, fa1, lid(sm, va1), lid(sm, vb1), 0x10),
            Err(PartitionDrop::Refused(_) | PartitionDrop::Enforced { .. })
        ));
        // Two limited members of the default partition cannot talk.
        assert!(matches!(
            walk(f, fa1, lid(sm, va1), lid(sm, vb1), 0x7FFF),
            Err(PartitionDrop::Refused(_))
        ));
        // The PF of A1's hypervisor cannot reach it in tenant A.
        assert_eq!(
            walk(f, fa1, f.nodes[fa1].lid(), lid(sm, va1), 0x10),
            Err(PartitionDrop::NotHeld)
        );
        // What the SA answers with: the ends' own tables.
        let sub = sm.subnet();
        let end = |v| {
            let m = vm(sm, v);
            (NodeId(m.hypervisor), 1u8, Lid(m.lid))
        };
        assert_eq!(
            sub.shared_pkey_at(end(va1), end(va2), None),
            Some(PKey(0x8010))
        );
        assert_eq!(sub.shared_pkey_at(end(va1), end(vb1), None), None);
    };
    check(&f, &sm, (f0, f1));

    // A1 moves to a hypervisor on another leaf: its VF there gets its
    // table, that hypervisor's switch port gets tenant A's key, and the
    // switch port it left keeps only tenant B's.
    let (vf0, pk0) = (
        sets(&sm, AttributeId::VPortPKeyTable),
        sets(&sm, AttributeId::PKeyTable),
    );
    let plan = sm.plan_migration(va1, h2).unwrap();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    let (vf_sets, pk_sets) = (
        sets(&sm, AttributeId::VPortPKeyTable) - vf0,
        sets(&sm, AttributeId::PKeyTable) - pk0,
    );
    println!(
        "VM of tenant A moved: {} SMPs for its routes and VFs, {vf_sets} Set(VPortPKeyTable), {pk_sets} Set(P_KeyTable); planned {} in all",
        plan.lft_smps() + plan.hypervisor_smps(),
        plan.smps()
    );
    assert_eq!((vf_sets, pk_sets), (1, 2));
    // The plan counted them.
    assert_eq!(plan.pkey_smps as u64, vf_sets + pk_sets);
    assert_eq!(vm(&sm, va1).hypervisor, h2);
    assert_eq!(vf_table(&f, f2, vm(&sm, va1).vf)[..3], [0x7FFF, 0x8010, 0]);
    let (s2, q2) = switch_port(&f, f2);
    assert_eq!(port(&f, s2, q2).0[..3], [0x7FFF, 0x8010, 0]);
    assert_eq!(port(&f, s0, q0).0[..3], [0x7FFF, 0x8020, 0]);
    check(&f, &sm, (f2, f1));
    assert!(sm.subnet().vf_pkey_overflow().next().is_none());

    // And back: the VF it takes on h0 is the one it left, which still
    // holds its table (a disabled VF keeps it), so only the two switch
    // ports change, and the plan says so.
    let (vf0, pk0) = (
        sets(&sm, AttributeId::VPortPKeyTable),
        sets(&sm, AttributeId::PKeyTable),
    );
    let plan = sm.plan_migration(va1, h0).unwrap();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    let sent = (
        sets(&sm, AttributeId::VPortPKeyTable) - vf0,
        sets(&sm, AttributeId::PKeyTable) - pk0,
    );
    println!(
        "and back: {sent:?} (Set(VPortPKeyTable), Set(P_KeyTable)), planned {}",
        plan.pkey_smps
    );
    assert_eq!(plan.pkey_smps as u64, sent.0 + sent.1);
    assert_eq!(port(&f, s0, q0).0[..4], [0x7FFF, 0x8010, 0x8020, 0]);
    check(&f, &sm, (f0, f1));
}

/// A VM started, moved or stopped recomputes only its hypervisors' VF
/// tables and switch ports (not every port's table, which cost 7 ms a VM
/// on fat-tree-5832): what that leaves is what a full recompute gives,
/// so applying the same configuration again afterwards sends nothing.
#[test]
fn vm_changes_recompute_their_hypervisors_alone_and_agree_with_a_full_recompute() {
    use smi::sm::LidPolicy;
    let (mut f, mut sm) = common::up("mport-ntree:4:2", 4, LidPolicy::Prepopulated);
    let hyps = sm.hypervisors();
    let g = |k: u64| 0x0002_c9ff_0000_0100u64 + k;
    let conf = format!(
        "Default=0x7fff,ipoib:ALL=full;\nt1=0x0011:{:#x}=full,{:#x}=full;\n\
         t2=0x0012:{:#x}=full,{:#x}=limited;\nall_vms=0x0013:ALL_CAS=limited;\n",
        g(1),
        g(2),
        g(3),
        g(4)
    );
    sm.set_partitions(parse(&conf).unwrap());
    assert!(f.run(&mut sm));
    let ids: Vec<_> = (1..=4)
        .map(|k| sm.create_vm(hyps[k as usize % hyps.len()], g(k)).unwrap())
        .collect();
    assert!(f.run(&mut sm));
    let again = |sm: &mut Sm| sm.set_partitions(parse(&conf).unwrap());
    assert_eq!(again(&mut sm), 0, "after the starts");
    // Three moves (each between two hypervisors), then a stop.
    for (k, id) in [ids[0], ids[2], ids[1]].into_iter().enumerate() {
        let from = sm.vm(id).unwrap().hypervisor;
        let leaf = sm.attachment(from).unwrap().0;
        let to = (hyps.iter().copied())
            .find(|&h| sm.attachment(h).unwrap().0 != leaf)
            .unwrap();
        let p = sm.plan_migration(id, to).unwrap();
        sm.apply_migration(&p, false).unwrap();
        assert!(f.run(&mut sm));
        assert_eq!(again(&mut sm), 0, "after move {k}");
    }
    sm.destroy_vm(ids[3]).unwrap();
    assert!(f.run(&mut sm));
    assert_eq!(again(&mut sm), 0, "after a stop");
    // And the recompute does find a difference where there is one.
    let other = conf.replace("t2=0x0012", "t2=0x0014");
    assert!(sm.set_partitions(parse(&other).unwrap()) > 0);
}

/// A VM in more partitions than its hypervisor's switch port can hold:
/// where it runs, the port cannot enforce; where it leaves, the port can
/// again. The plan of its move counts those two Set(PortInfo) with the
/// P_Key SMPs, as sent.
/// A VM and where it can go: mport-ntree:4:2 with hypervisors of 2 VFs,
/// under partitions `conf`.
struct VmOnTwoLeaves {
    /// The hypervisors (SM node indexes).
    hyps: Vec<usize>,
    /// The hypervisor the VM runs on.
    h0: usize,
    /// A hypervisor on another leaf.
    h2: usize,
    /// The VM, of vGUID `x`.
    vm: smi::sm::VmId,
}

/// Brings the fabric up, applies `conf`, and starts a VM of vGUID `x` on
/// the first hypervisor.
fn vm_on_two_leaves(x: u64, conf: &str) -> (Fabric, Sm, VmOnTwoLeaves) {
    use smi::sm::LidPolicy;
    let (mut f, mut sm) = common::up("mport-ntree:4:2", 2, LidPolicy::Prepopulated);
    let hyps = sm.hypervisors();
    sm.set_partitions(parse(conf).unwrap());
    assert!(f.run(&mut sm));
    let (h0, leaf0) = (hyps[0], sm.attachment(hyps[0]).unwrap().0);
    let h2 = *hyps
        .iter()
        .find(|&&h| sm.attachment(h).unwrap().0 != leaf0)
        .unwrap();
    let vm = sm.create_vm(h0, x).unwrap();
    assert!(f.run(&mut sm));
    (f, sm, VmOnTwoLeaves { hyps, h0, h2, vm })
}

/// The (inbound, outbound) enforcement bits of the switch port cabled
/// to hypervisor `h` (an SM node index).
fn hyp_switch_bits(f: &Fabric, sm: &Sm, h: usize) -> (bool, bool) {
    let fx = f.node_by_guid(sm.nodes()[h].info.node_guid.0).unwrap();
    let (s, q) = switch_port(f, fx);
    enforce_bits(f, s, q)
}

/// The (inbound, outbound) enforcement bits port `p` of fabric node `i`
/// holds.
fn enforce_bits(f: &Fabric, i: usize, p: u8) -> (bool, bool) {
    let pi = port(f, i, p).1;
    (
        pi.partition_enforcement_inbound,
        pi.partition_enforcement_outbound,
    )
}

/// Every cabled external port of every switch: (switch, port, whether
/// it is cabled to another switch).
fn switch_links(f: &Fabric) -> Vec<(usize, u8, bool)> {
    let mut v = Vec::new();
    for (i, n) in f.topo.nodes.iter().enumerate() {
        if n.kind != NodeType::Switch {
            continue;
        }
        for p in 1..=n.ports {
            if let Some((m, _)) = f.topo.peer[i][usize::from(p)] {
                v.push((i, p, f.topo.nodes[m].kind == NodeType::Switch));
            }
        }
    }
    v
}

#[test]
fn a_move_that_turns_enforcement_off_and_on_is_planned_as_sent() {
    let x = 0x0002_c9ff_0000_0e01u64;
    // The simulated switches enforce 8 keys a port: the default and 8
    // partitions of the VM's are 9.
    let mut conf = String::from("Default=0x7fff:ALL=full;\n");
    for k in 0..8 {
        conf += &format!("p{k}={:#06x}:{x:#x}=full;\n", 0x20 + k);
    }
    let (mut f, mut sm, VmOnTwoLeaves { h0, h2, vm, .. }) = vm_on_two_leaves(x, &conf);
    let enforcing = |f: &Fabric, sm: &Sm, h: usize| hyp_switch_bits(f, sm, h).0;
    assert!(!enforcing(&f, &sm, h0), "9 keys on an 8-key port");
    assert!(enforcing(&f, &sm, h2));
    let count = |sm: &Sm| {
        sets(sm, AttributeId::VPortPKeyTable)
            + sets(sm, AttributeId::PKeyTable)
            + sets(sm, AttributeId::PortInfo)
    };
    let before = count(&sm);
    let plan = sm.plan_migration(vm, h2).unwrap();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    let sent = count(&sm) - before;
    assert!(enforcing(&f, &sm, h0), "the port it left enforces again");
    assert!(!enforcing(&f, &sm, h2), "the port it reached cannot");
    println!(
        "a VM in 8 partitions moved: {sent} P_Key and enforcement SMPs sent, planned {}",
        plan.pkey_smps
    );
    assert_eq!(plan.pkey_smps as u64, sent);
}

/// Enforcement turned off on the running subnet (SIGHUP's path): every
/// switch port's bits cleared; a VM's move then writes its new VF's table
/// and no switch port's, as planned.
#[test]
fn with_enforcement_turned_off_a_move_writes_the_vfs_table_alone_as_planned() {
    use smi::sm::PartEnforce;
    let x = 0x0002_c9ff_0000_0e02u64;
    let conf = format!("Default=0x7fff:ALL=full;\np=0x21:{x:#x}=full;\n");
    let (mut f, mut sm, VmOnTwoLeaves { hyps, h2, vm, .. }) = vm_on_two_leaves(x, &conf);
    let bits_at = hyp_switch_bits;
    assert_eq!(bits_at(&f, &sm, h2), (true, true));
    assert!(sm.set_part_enforce(PartEnforce::Off) > 0);
    assert_eq!(sm.set_part_enforce(PartEnforce::Off), 0, "already off");
    assert!(f.run(&mut sm));
    for &h in &hyps {
        assert_eq!(bits_at(&f, &sm, h), (false, false));
    }
    let before = (
        sets(&sm, AttributeId::VPortPKeyTable),
        sets(&sm, AttributeId::PKeyTable) + sets(&sm, AttributeId::PortInfo),
    );
    let plan = sm.plan_migration(vm, h2).unwrap();
    sm.apply_migration(&plan, false).unwrap();
    assert!(f.run(&mut sm));
    let vf = sets(&sm, AttributeId::VPortPKeyTable) - before.0;
    let switch = sets(&sm, AttributeId::PKeyTable) + sets(&sm, AttributeId::PortInfo) - before.1;
    assert_eq!((vf, switch), (1, 0), "the new VF's table only");
    assert_eq!(plan.pkey_smps, 1);
}

/// OpenSM's `part_enforce`: `in` and `out` turn on one bit of every
/// switch port cabled to a CA, and the simulated switches then check that
/// direction alone; `off` writes no switch port's table (nor reads one)
/// and leaves both bits clear. A new master with `off` clears the bits an
/// earlier one set.
#[test]
fn part_enforce_in_out_and_off_set_the_bits_it_names_and_no_more() {
    use smi::sm::PartEnforce;
    let (probe, c, conf) = with_two_in_0x42();
    drop(probe);
    let up = |mode: PartEnforce| {
        let mut f = Fabric::new(
            Topology::from_spec("mport-ntree:4:2").unwrap(),
            SimConfig::default(),
        )
        .unwrap();
        let mut sm = Sm::new(SmConfig {
            part_enforce: mode,
            ..SmConfig::default()
        });
        assert_eq!(sm.set_partitions(parse(&conf).unwrap()), 0);
        assert!(f.bring_up(&mut sm), "{:?}", sm.error());
        (f, sm)
    };
    let (both_f, both_sm) = up(PartEnforce::Both);
    let both_gets = both_sm.stats().count(Method::Get, AttributeId::PKeyTable);
    for mode in [
        PartEnforce::Both,
        PartEnforce::In,
        PartEnforce::Out,
        PartEnforce::Off,
    ] {
        let (mut f, sm) = up(mode);
        let want = mode.bits(true);
        let mut to_cas = 0;
        for (i, p, to_switch) in switch_links(&f) {
            let bits = enforce_bits(&f, i, p);
            if to_switch {
                assert_eq!(bits, (false, false), "{mode:?}: between switches");
            } else {
                to_cas += 1;
                assert_eq!(bits, want, "{mode:?}: {}/{p}", f.topo.nodes[i].name);
            }
        }
        assert!(to_cas > 0);
        // The two members' switch ports hold their keys, except with
        // enforcement off, where only the CA ports are written.
        let (s1, q1) = switch_port(&f, c[1]);
        let switch_keys = port(&f, s1, q1).0;
        let pkey_sets = sets(&sm, AttributeId::PKeyTable);
        let gets = sm.stats().count(Method::Get, AttributeId::PKeyTable);
        if mode == PartEnforce::Off {
            assert_eq!(pkey_sets, 2, "the two CA ports only");
            assert!(!switch_keys.contains(&0x8042), "{switch_keys:x?}");
            assert!(
                gets < both_gets,
                "{gets} reads, {both_gets} with enforcement"
            );
        } else {
            assert_eq!(pkey_sets, 4);
            assert!(switch_keys.contains(&0x8042), "{switch_keys:x?}");
            assert_eq!(gets, both_gets);
        }
        // Out of the partition into c[5]: its switch port drops it on the
        // way out where outbound is on, else c[5] refuses it.
        let (s5, q5) = switch_port(&f, c[5]);
        let into = f.walk_in_partition(c[1], f.nodes[c[5]].lid(), 0x42);
        if want.1 {
            assert_eq!(
                into,
                Err(PartitionDrop::Enforced {
                    node: s5,
                    port: q5,
                    inbound: false
                }),
                "{mode:?}"
            );
        } else {
            assert_eq!(into, Err(PartitionDrop::Refused(c[5])), "{mode:?}");
        }
        // A host that wrote the key behind the SM's back: stopped on the
        // way in where inbound is on, else it reaches a member.
        let SimNode::Ca(ca) = &mut f.nodes[c[5]] else {
            panic!("not a CA")
        };
        ca.model.ports[1].pkeys[1] = PKey(0x8042);
        let from = f.walk_in_partition(c[5], f.nodes[c[1]].lid(), 0x42);
        if want.0 {
            assert_eq!(
                from,
                Err(PartitionDrop::Enforced {
                    node: s5,
                    port: q5,
                    inbound: true
                }),
                "{mode:?}"
            );
        } else {
            assert!(from.is_ok(), "{mode:?}: {from:?}");
        }
    }
    // A new master with enforcement off, on the fabric the first left
    // enforcing: every bit cleared.
    let mut f = both_f;
    let (s1, q1) = switch_port(&f, c[1]);
    let pi = port(&f, s1, q1).1;
    assert!(pi.partition_enforcement_inbound && pi.partition_enforcement_outbound);
    let mut off = Sm::new(SmConfig {
        part_enforce: PartEnforce::Off,
        ..SmConfig::default()
    });
    assert_eq!(off.set_partitions(parse(&conf).unwrap()), 0);
    assert!(f.bring_up(&mut off), "{:?}", off.error());
    for (i, n) in f.topo.nodes.iter().enumerate() {
        for p in (n.kind == NodeType::Switch)
            .then_some(1..=n.ports)
            .into_iter()
            .flatten()
        {
            assert_eq!(
                enforce_bits(&f, i, p),
                (false, false),
                "{}/{p} still enforces",
                n.name
            );
        }
    }
    // Its table is left as the first master wrote it, as OpenSM leaves it.
    assert!(port(&f, s1, q1).0.contains(&0x8042));
}

/// A new enforcement mode given during a sweep (SIGHUP in the middle of
/// one) is not lost: that sweep ends as it would, and the next, though it
/// finds no change, applies it.
#[test]
fn a_mode_given_during_a_sweep_is_applied_by_the_next() {
    use smi::sm::{PartEnforce, Phase};
    let (mut f, mut sm, c) = two_in_0x42();
    let (s1, q1) = switch_port(&f, c[1]);
    let bits = |f: &Fabric| enforce_bits(f, s1, q1);
    assert_eq!(bits(&f), (true, true));
    sm.request_sweep(f.now_ns() / 1_000_000);
    assert_eq!(sm.phase(), Phase::Sweep);
    assert_eq!(sm.set_part_enforce(PartEnforce::In), 0, "not now");
    assert!(f.run(&mut sm));
    sm.request_sweep(f.now_ns() / 1_000_000);
    assert!(f.run(&mut sm));
    assert_eq!(bits(&f), (true, false), "applied by the next sweep");
}
