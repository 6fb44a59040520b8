//! M_Key protection by the SM (OpenSM's `m_key`, `m_key_protection_level`
//! and `m_key_lease_period`): the SM writes its key to every end port at
//! bring-up, at no SMP's cost; a host without the key can read but not
//! write; the bad M_Key trap the host's attempt raises makes the SM stop
//! the port's lease, so the protection stays; a heavy sweep puts back a
//! protection that lapsed; and an SM without the key cannot take the
//! subnet over, unless it is handed the keys the ports hold (OpenSM's
//! `m_key_lookup` and `guid2mkey`) or reads them where they show.

use fabric::sim::{Fabric, SimConfig, SimNode};
use mad_core::attr::{AttributeId, NodeType, PortInfo};
use mad_core::{Lid, MKey, Method, Smp};
use smi::sm::{Sm, SmConfig, SmEvent};

const MS: u64 = 1_000_000;
const KEY: MKey = MKey(0x5EC2_E7ED_0000_0001);
const LEASE_S: u16 = 5;

fn keyed(level: u8) -> SmConfig {
    SmConfig {
        m_key: KEY,
        m_key_protect_bits: level,
        m_key_lease_period: LEASE_S,
        ..SmConfig::default()
    }
}

fn port_info(f: &mut Fabric, i: usize, port: usize) -> &mut PortInfo {
    match &mut f.nodes[i] {
        SimNode::Switch(s) => &mut s.model.ports[port].info,
        SimNode::Ca(c) => &mut c.model.ports[port].info,
        SimNode::Hypervisor(h) => &mut h.pf.model.ports[port].info,
    }
}

/// Every end port: (node, port) of each CA's port 1 and each switch's 0.
fn end_ports(f: &Fabric) -> Vec<(usize, usize)> {
    (0..f.nodes.len())
        .map(|i| match f.topo.nodes[i].kind {
            NodeType::Switch => (i, 0),
            _ => (i, 1),
        })
        .collect()
}

/// What a host at `from` gets back for `smp` sent to `lid`.
fn ask(f: &mut Fabric, from: usize, smp: Smp, lid: Lid) -> Vec<Smp> {
    f.attach(from);
    assert!(f.inject(from, smp, lid.0));
    f.run_to_quiescence();
    let got = f.take_delivered();
    f.detach(from);
    got.into_iter()
        .filter(|d| d.node == from && d.smp.method() == Method::GetResp)
        .map(|d| d.smp)
        .collect()
}

#[test]
fn the_sms_m_key_guards_every_end_port_and_the_lease_is_stopped() {
    let spec = "mport-ntree:4:2";
    let (_, plain, up) =
        fabric::sim::bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let (mut f, mut sm, up) = fabric::sim::bring_up(spec, SimConfig::default(), keyed(1)).unwrap();
    assert!(up, "{:?}", sm.error());
    // The key rides on the Set(PortInfo) each end port gets anyway.
    assert_eq!(sm.stats().total(), plain.stats().total(), "no SMP more");
    for (i, p) in end_ports(&f) {
        let pi = port_info(&mut f, i, p);
        assert_eq!(
            (pi.m_key, pi.m_key_protect_bits, pi.m_key_lease_period),
            (KEY, 1, LEASE_S),
            "node {i} port {p}"
        );
    }

    // A host without the key: a Get is answered with the key hidden; a
    // Set that would move another host's LID is dropped and counted.
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter && i != f.sm_node)
        .collect();
    let (host, victim) = (cas[0], cas[1]);
    let lid = port_info(&mut f, victim, 1).lid;
    let get = Smp::lid_routed(Method::Get, AttributeId::PortInfo, 0, 0x71, MKey(0));
    let got = ask(&mut f, host, get, lid);
    assert_eq!(got.len(), 1, "a Get is answered at level 1");
    let read = PortInfo::decode(&got[0].data).unwrap();
    assert_eq!((read.lid, read.m_key), (lid, MKey(0)), "the key hidden");
    let mut set = Smp::lid_routed(Method::Set, AttributeId::PortInfo, 0, 0x72, MKey(0));
    let mut moved = read;
    moved.lid = Lid(0x300);
    moved.encode(&mut set.data).unwrap();
    assert!(
        ask(&mut f, host, set, lid).is_empty(),
        "no answer to a bad Set"
    );
    assert_eq!(port_info(&mut f, victim, 1).lid, lid, "the LID stays");
    assert_eq!(port_info(&mut f, victim, 1).m_key_violations, 1);

    // Its trap 256 reaches the SM, whose TrapRepress carries the key and
    // so stops the lease: well past the lease, the port is still protected.
    while sm.poll_event().is_some() {}
    let t = f.now_ns();
    assert!(f.run_until(&mut sm, t + u64::from(LEASE_S) * 3_000 * MS));
    assert!(
        std::iter::from_fn(|| sm.poll_event()).any(|e| matches!(
            e,
            SmEvent::Trap { number: Some(256), issuer, .. } if issuer == lid
        )),
        "the SM heard trap 256 from LID {}",
        lid.0
    );
    // (A port drops a lapsed protection at the next SMP, so ask first.)
    let get = Smp::lid_routed(Method::Get, AttributeId::PortInfo, 0, 0x75, MKey(0));
    let got = ask(&mut f, host, get, lid);
    let read = PortInfo::decode(&got[0].data).unwrap();
    assert_eq!(read.m_key, MKey(0), "still hidden well past the lease");
    assert_eq!(port_info(&mut f, victim, 1).m_key_protect_bits, 1);
    let mut set = Smp::lid_routed(Method::Set, AttributeId::PortInfo, 0, 0x73, MKey(0));
    moved.encode(&mut set.data).unwrap();
    assert!(ask(&mut f, host, set, lid).is_empty());
    assert_eq!(port_info(&mut f, victim, 1).lid, lid, "still refused");
    // With the key, the host may (it is the SM's to give).
    let mut set = Smp::lid_routed(Method::Set, AttributeId::PortInfo, 0, 0x74, KEY);
    let mut same = *port_info(&mut f, victim, 1);
    same.port_state = mad_core::attr::PortState::NoChange;
    same.encode(&mut set.data).unwrap();
    assert_eq!(ask(&mut f, host, set, lid).len(), 1, "a Set with the key");

    // A protection that lapsed anyway (the port reset it) is found by a
    // heavy sweep and written again; one that holds is not.
    while sm.poll_event().is_some() {}
    port_info(&mut f, victim, 1).m_key_protect_bits = 0;
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    let said: Vec<(u64, bool)> = std::iter::from_fn(|| sm.poll_event())
        .filter_map(|e| match e {
            SmEvent::PortNotAsSet {
                guid, m_key_held, ..
            } => Some((guid.0, m_key_held)),
            _ => None,
        })
        .collect();
    assert_eq!(said, [(f.topo.nodes[victim].guid, false)]);
    assert_eq!(port_info(&mut f, victim, 1).m_key_protect_bits, 1);
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    assert!(
        !std::iter::from_fn(|| sm.poll_event()).any(|e| matches!(e, SmEvent::PortNotAsSet { .. }))
    );
}

/// Another SM started on the protected subnet: with the key it comes up
/// and every port keeps its LID; without it (level 2: it cannot even
/// read) it does not come up, and no port changes.
#[test]
fn only_an_sm_with_the_key_takes_a_protected_subnet() {
    let (mut f, first, up) =
        fabric::sim::bring_up("mport-ntree:4:2", SimConfig::default(), keyed(2)).unwrap();
    assert!(up, "{:?}", first.error());
    let lids: Vec<Lid> = (0..f.nodes.len()).map(|i| f.nodes[i].lid()).collect();
    let mut intruder = Sm::new(SmConfig::default());
    assert!(!f.bring_up(&mut intruder), "an SM without the key");
    let now: Vec<Lid> = (0..f.nodes.len()).map(|i| f.nodes[i].lid()).collect();
    assert_eq!(now, lids, "nothing changed");
    for (i, p) in end_ports(&f) {
        assert_eq!(port_info(&mut f, i, p).m_key, KEY);
    }
    let mut again = Sm::new(keyed(2));
    assert!(f.bring_up(&mut again), "{:?}", again.error());
    let now: Vec<Lid> = (0..f.nodes.len()).map(|i| f.nodes[i].lid()).collect();
    assert_eq!(now, lids, "the same LIDs");
}

const NEW_KEY: MKey = MKey(0x5EC2_E7ED_0000_0002);

/// Protection `level` with a lease of 0 (the protection never lapses), and
/// the M_Key lookup on or off.
fn forever(key: MKey, level: u8, lookup: bool) -> SmConfig {
    SmConfig {
        m_key: key,
        m_key_protect_bits: level,
        m_key_lease_period: 0,
        m_key_lookup: lookup,
        ..SmConfig::default()
    }
}

fn lids(f: &Fabric) -> Vec<Lid> {
    (0..f.nodes.len()).map(|i| f.nodes[i].lid()).collect()
}

fn keys(f: &mut Fabric) -> Vec<MKey> {
    end_ports(f)
        .into_iter()
        .map(|(i, p)| port_info(f, i, p).m_key)
        .collect()
}

#[test]
fn a_new_m_key_takes_over_with_the_keys_the_last_sm_knew() {
    let (mut f, first, up) = fabric::sim::bring_up(
        "mport-ntree:4:2",
        SimConfig::default(),
        forever(KEY, 1, true),
    )
    .unwrap();
    assert!(up, "{:?}", first.error());
    let n = end_ports(&f).len();
    // The first SM knows every end port's key: the Sets it sent were
    // answered with it.
    let known = first.known_m_keys().clone();
    assert_eq!(known.len(), n);
    assert!(known.values().all(|&k| k == KEY), "{known:?}");
    let before = lids(&f);
    // A new key without the old ones: protect bits 1 let it read, not write.
    let mut blind = Sm::new(forever(NEW_KEY, 1, true));
    assert!(!f.bring_up(&mut blind), "an SM that knows no port's key");
    assert_eq!(keys(&mut f), vec![KEY; n], "every port keeps the old key");
    assert!(
        blind.known_m_keys().is_empty(),
        "a hidden key is not learned"
    );
    // Its refused Sets raised bad M_Key traps naming its own key, which a
    // TrapRepress with that key could not stop: left to the ports.
    assert!(blind.stats().unrepressed > 0);
    assert_eq!(blind.stats().unrepressed, blind.stats().traps);
    let repressed: u64 = blind
        .stats()
        .per_phase_kind
        .iter()
        .filter(|((_, method, _), _)| *method == u8::from(Method::TrapRepress))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(repressed, 0, "no TrapRepress the ports would refuse");
    let why = blind.error().expect("an error").to_string();
    assert!(why.contains("named this SM's M_Key"), "{why}");
    // The same SM handed the keys the first one knew (guid2mkey) comes up
    // and moves every port to its own key.
    let mut told = Sm::new(forever(NEW_KEY, 1, true));
    told.set_known_m_keys(known.clone());
    assert!(f.bring_up(&mut told), "{:?}", told.error());
    assert_eq!(lids(&f), before, "the same LIDs");
    assert_eq!(keys(&mut f), vec![NEW_KEY; n]);
    assert!(told.known_m_keys().values().all(|&k| k == NEW_KEY));
    // Handed the keys, but told not to look them up: it cannot.
    let mut off = Sm::new(forever(KEY, 1, false));
    off.set_known_m_keys(told.known_m_keys().clone());
    assert!(!f.bring_up(&mut off), "m_key_lookup off");
    assert_eq!(keys(&mut f), vec![NEW_KEY; n]);
}

#[test]
fn a_key_that_shows_is_read_and_used() {
    // Protect bits 0: anyone may read the key, only its holder may write.
    let (mut f, first, up) = fabric::sim::bring_up(
        "mport-ntree:4:2",
        SimConfig::default(),
        forever(KEY, 0, true),
    )
    .unwrap();
    assert!(up, "{:?}", first.error());
    let n = end_ports(&f).len();
    let mut off = Sm::new(forever(NEW_KEY, 0, false));
    assert!(
        !f.bring_up(&mut off),
        "without the lookup, the SM's own key is refused"
    );
    assert_eq!(keys(&mut f), vec![KEY; n]);
    let mut reader = Sm::new(forever(NEW_KEY, 0, true));
    assert!(f.bring_up(&mut reader), "{:?}", reader.error());
    assert_eq!(
        keys(&mut f),
        vec![NEW_KEY; n],
        "read the old key, wrote its own"
    );
}

#[test]
fn under_level_2_the_links_the_last_sm_saw_find_each_ports_key() {
    // Protect bits 2: without its key a port answers not even a Get, so
    // the SM must know which port is where before it reads it.
    let (mut f, first, up) = fabric::sim::bring_up(
        "mport-ntree:4:2",
        SimConfig::default(),
        forever(KEY, 2, true),
    )
    .unwrap();
    assert!(up, "{:?}", first.error());
    let n = end_ports(&f).len();
    let keys_known = first.known_m_keys().clone();
    let links = first.known_neighbors().clone();
    let own = first.nodes()[0].info.port_guid.0;
    // Every cable, both ways (at least a spanning tree of the nodes).
    assert!(links.len() >= 2 * (n - 1), "{} links", links.len());
    for (&(g, p), &(h, q)) in &links {
        assert_eq!(links.get(&(h, q)), Some(&(g, p)), "both ways");
    }
    let before = lids(&f);
    let attempt = |f: &mut Fabric, keys: bool, neighbors: bool, own_guid: bool| {
        let mut sm = Sm::new(forever(NEW_KEY, 2, true));
        if keys {
            sm.set_known_m_keys(keys_known.clone());
        }
        if neighbors {
            sm.set_known_neighbors(links.clone());
        }
        if own_guid {
            sm.set_own_port_guid(own);
        }
        let up = f.bring_up(&mut sm);
        if !up {
            eprintln!("{keys} {neighbors} {own_guid}: {:?}", sm.error());
        }
        up
    };
    assert!(
        !attempt(&mut f, true, false, true),
        "the keys but not where the ports are"
    );
    assert!(
        !attempt(&mut f, true, true, false),
        "the keys and links, not its own port"
    );
    assert!(!attempt(&mut f, false, true, true), "the links but no keys");
    assert_eq!(keys(&mut f), vec![KEY; n], "nothing changed");
    assert!(
        attempt(&mut f, true, true, true),
        "keys, links and its own port"
    );
    assert_eq!(lids(&f), before, "the same LIDs");
    assert_eq!(keys(&mut f), vec![NEW_KEY; n]);
}

/// `m_key_per_port`: every end port gets a key of its own, computed from
/// its GUID and the SM's key, at no SMP's cost. A host that learned its
/// own port's key (it rides on every SMP to that port) cannot write any
/// other port with it, as it could with one key for all. A heavy sweep
/// finds every port as it set it; a new SM with the same key and no
/// cache at all comes up (it computes each port's key from the GUID it
/// reads); one without `m_key_per_port` cannot, under level 1.
#[test]
fn per_port_keys_keep_one_hosts_key_from_opening_another_port() {
    let per_port = SmConfig {
        m_key_per_port: true,
        ..forever(KEY, 1, true)
    };
    let (_, plain, _) = fabric::sim::bring_up(
        "mport-ntree:4:2",
        SimConfig::default(),
        forever(KEY, 1, true),
    )
    .unwrap();
    let (mut f, mut sm, up) =
        fabric::sim::bring_up("mport-ntree:4:2", SimConfig::default(), per_port.clone()).unwrap();
    assert!(up, "{:?}", sm.error());
    assert_eq!(sm.stats().total(), plain.stats().total(), "no SMP more");
    let ends = end_ports(&f);
    let mut seen = std::collections::BTreeSet::new();
    for &(i, p) in &ends {
        let pi = *port_info(&mut f, i, p);
        let node = (sm.nodes().iter())
            .find(|n| n.info.node_guid.0 == f.topo.nodes[i].guid)
            .unwrap();
        let want = smi::sm::port_m_key(KEY, node.info.port_guid.0);
        assert_eq!(pi.m_key, want, "node {i} port {p}");
        assert_ne!(pi.m_key, KEY);
        assert!(seen.insert(pi.m_key), "a key twice");
    }
    // A host that knows its own port's key writes another port with it:
    // refused.
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter && i != f.sm_node)
        .collect();
    let (host, victim) = (cas[0], cas[1]);
    let own_key = port_info(&mut f, host, 1).m_key;
    let lid = port_info(&mut f, victim, 1).lid;
    let mut set = Smp::lid_routed(Method::Set, AttributeId::PortInfo, 0, 0x81, own_key);
    let mut moved = *port_info(&mut f, victim, 1);
    moved.lid = Lid(0x300);
    moved.encode(&mut set.data).unwrap();
    assert!(ask(&mut f, host, set, lid).is_empty(), "refused");
    assert_eq!(port_info(&mut f, victim, 1).lid, lid, "the LID stays");
    // Nor with the SM's configured key itself.
    let mut set = Smp::lid_routed(Method::Set, AttributeId::PortInfo, 0, 0x82, KEY);
    moved.encode(&mut set.data).unwrap();
    assert!(ask(&mut f, host, set, lid).is_empty(), "refused");
    assert_eq!(port_info(&mut f, victim, 1).lid, lid);

    // A heavy sweep finds every port holding what the SM gave it.
    while sm.poll_event().is_some() {}
    sm.request_heavy_sweep(f.now_ns() / MS);
    assert!(f.run(&mut sm));
    let unlike: Vec<SmEvent> = std::iter::from_fn(|| sm.poll_event())
        .filter(|e| matches!(e, SmEvent::PortNotAsSet { .. }))
        .collect();
    assert!(unlike.is_empty(), "every port as set: {unlike:?}");

    // A new SM with the same key and no cache: up, every key computed.
    let before = lids(&f);
    let held = keys(&mut f);
    let mut again = Sm::new(per_port);
    assert!(f.bring_up(&mut again), "{:?}", again.error());
    assert_eq!(lids(&f), before);
    assert_eq!(keys(&mut f), held);
    // One key for all cannot write them.
    let mut shared = Sm::new(forever(KEY, 1, true));
    assert!(!f.bring_up(&mut shared), "the shared key opens no port");
    assert_eq!(keys(&mut f), held, "nothing changed");
}
