//! The session, driven as its sockets would drive it.

use super::*;
use crate::ibsim::{ClientInfo, CtlType, SimCtl, SimRequest, CTL_SIZE, ETIMEDOUT, MAX_CLIENTS};
use crate::sim::{Fabric, SimConfig};
use crate::topology::Topology;
use mad_core::attr::AttributeId;
use mad_core::{DrPath, MKey, Method, Smp};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const ME: u32 = 1000;
const USER: Option<Peer> = Some(Peer { uid: ME, pid: 42 });

/// Sockets that always connect, and clients alive unless listed dead.
#[derive(Default)]
struct Mock {
    connected: Vec<(usize, u32)>,
    dead: BTreeSet<u32>,
    refuse: bool,
}

impl Transport for Mock {
    fn connect(&mut self, slot: usize, id: u32) -> Result<(), String> {
        if self.refuse {
            return Err("Connection refused".into());
        }
        self.connected.push((slot, id));
        Ok(())
    }
    fn alive(&mut self, id: u32) -> bool {
        !self.dead.contains(&id)
    }
}

fn session() -> (Session, Instant) {
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let f = Fabric::new(topo, SimConfig::default()).unwrap();
    let now = Instant::now();
    (Session::new(f, Access::new(ME, &[]), now), now)
}

fn ctl(client: u32, kind: CtlType, data: [u8; 64]) -> [u8; CTL_SIZE] {
    SimCtl {
        client,
        kind,
        len: 64,
        data,
    }
    .encode()
}

fn connect_msg(id: u32, node: &str, issm: bool) -> [u8; CTL_SIZE] {
    let mut d = [0u8; 64];
    ClientInfo {
        id,
        qp: 0,
        issm,
        nodeid: node.into(),
    }
    .encode(&mut d);
    ctl(0, CtlType::Connect, d)
}

/// Attaches client `id` at `node`; its slot.
fn attach(
    s: &mut Session,
    t: &mut Mock,
    id: u32,
    node: &str,
    now: Instant,
) -> Result<u32, CtlType> {
    let r = SimCtl::parse(
        &s.on_ctl(&connect_msg(id, node, false), USER, t, now)
            .unwrap(),
    )
    .unwrap();
    if r.kind == CtlType::Error {
        return Err(r.kind);
    }
    Ok(ClientInfo::parse(&r.data).id)
}

fn node_info(path: &[u8], tid: u64) -> [u8; 288] {
    let p = DrPath::from_ports(path).unwrap();
    let smp = Smp::directed(&p, Method::Get, AttributeId::NodeInfo, 0, tid, MKey(0));
    SimRequest::new(&smp, 0xFFFF).encode()
}

fn replies(s: &mut Session, slot: usize) -> Vec<SimRequest> {
    s.take_outbox(slot)
        .iter()
        .map(|b| SimRequest::parse(b).unwrap())
        .collect()
}

#[test]
fn a_client_attaches_and_its_requests_come_back_with_its_own_tid() {
    let (mut s, now) = session();
    let mut t = Mock::default();
    let slot = attach(&mut s, &mut t, 777, "H-1", now).unwrap() as usize;
    assert_eq!(t.connected, vec![(slot, 777)]);
    assert!(s.is_attached(slot));
    // The CA's leaf switch and a spine beyond it.
    let tid = 0xABCD_0000_1234;
    assert!(s.on_packet(slot, &node_info(&[1], tid), USER, now));
    assert!(s.on_packet(slot, &node_info(&[1, 3], tid + 1), USER, now));
    s.settle();
    let r = replies(&mut s, slot);
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|r| r.status == 0 && r.is_response()));
    let mut tids: Vec<u64> = r.iter().map(SimRequest::tid).collect();
    tids.sort();
    assert_eq!(
        tids,
        vec![tid, tid + 1],
        "the server's slot stamp is taken off"
    );
    assert_eq!(r[0].mad[64 + 2], 2, "a switch answered");
    assert_eq!(s.stats().answered, 2);
    assert_eq!(
        s.stats().peak_outstanding,
        2,
        "both were in the fabric at once"
    );
    // A path out of a port with no cable times out.
    // A CA does not pass a directed-route SMP on: it times out.
    assert!(s.on_packet(slot, &node_info(&[1, 1, 1], 9), USER, now));
    s.settle();
    let r = replies(&mut s, slot);
    assert_eq!((r.len(), r[0].status, r[0].tid()), (1, ETIMEDOUT, 9));
    assert_eq!(
        s.stats().peak_outstanding,
        2,
        "one at a time stays below the peak"
    );
}

#[test]
fn local_control_requests_read_the_clients_node() {
    let (mut s, now) = session();
    let mut t = Mock::default();
    let slot = attach(&mut s, &mut t, 5, "H-2", now).unwrap();
    let guid = s
        .fabric()
        .topo
        .nodes
        .iter()
        .find(|n| n.name == "H-2")
        .unwrap()
        .guid;
    let r = SimCtl::parse(
        &s.on_ctl(&ctl(slot, CtlType::GetGuid, [0; 64]), USER, &mut t, now)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(r.kind, CtlType::GetGuid);
    assert_eq!(u64::from_ne_bytes(r.data[0..8].try_into().unwrap()), guid);
    // A slot nobody holds is an error.
    let r = SimCtl::parse(
        &s.on_ctl(&ctl(9, CtlType::GetGuid, [0; 64]), USER, &mut t, now)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(r.kind, CtlType::Error);
}

#[test]
fn strangers_change_nothing() {
    let (mut s, now) = session();
    let mut t = Mock::default();
    let stranger = Some(Peer { uid: 4321, pid: 1 });
    for peer in [stranger, None] {
        let r = s
            .on_ctl(&connect_msg(1, "H-1", true), peer, &mut t, now)
            .unwrap();
        assert_eq!(SimCtl::parse(&r).unwrap().kind, CtlType::Error);
    }
    assert!(t.connected.is_empty());
    assert_eq!(s.listening().count(), 0);
    let e = s
        .on_command("node-down S-L0-0-0", stranger, now)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("permission denied: uid 4321 (pid 1)"),
        "{e}"
    );
    let slot = attach(&mut s, &mut t, 2, "H-1", now).unwrap() as usize;
    assert!(!s.on_packet(slot, &node_info(&[1], 1), stranger, now));
    s.settle();
    assert!(s.take_outbox(slot).is_empty());
    assert_eq!(s.stats().refused, 4);
    assert_eq!(s.stats().packets, 0);
    // A user let in by --allow-uid is served.
    let (s, now) = session();
    let mut s = Session::new(s.fabric, Access::new(ME, &[4321]), now);
    assert!(attach_as(&mut s, &mut t, stranger, now));
    // ... but may not have the server write a file with its rights.
    assert_eq!(
        s.on_command("dump /etc/owned", stranger, now),
        Err(ServeError::NotOwner { uid: 4321 })
    );
    assert!(s.on_command("stats", stranger, now).is_ok());
    let root = Some(Peer { uid: 0, pid: 1 });
    assert_eq!(
        s.on_command("dump /tmp/x", root, now),
        Ok(Answer::Dump("/tmp/x".into()))
    );
}

fn attach_as(s: &mut Session, t: &mut Mock, peer: Option<Peer>, now: Instant) -> bool {
    let r = s
        .on_ctl(&connect_msg(3, "H-1", false), peer, t, now)
        .unwrap();
    SimCtl::parse(&r).unwrap().kind == CtlType::Connect
}

#[test]
fn bad_datagrams_are_counted_and_answer_nothing_or_time_out() {
    let (mut s, now) = session();
    let mut t = Mock::default();
    let slot = attach(&mut s, &mut t, 2, "H-1", now).unwrap() as usize;
    assert!(s.on_ctl(&[1, 2, 3], USER, &mut t, now).is_none());
    assert!(!s.on_packet(slot, &[0; 100], USER, now));
    assert!(s.take_outbox(slot).is_empty());
    // A GMP (class 3) that no route takes anywhere (nothing is routed
    // yet): it times out at once.
    let mut gmp = node_info(&[1], 5);
    gmp[32 + 1] = 0x03;
    assert!(!s.on_packet(slot, &gmp, USER, now));
    let r = replies(&mut s, slot);
    assert_eq!((r.len(), r[0].status), (1, ETIMEDOUT));
    assert_eq!(s.stats().malformed, 2);
}

#[test]
fn a_flood_of_bad_datagrams_is_logged_twenty_times_a_second() {
    let (mut s, now) = session();
    let mut t = Mock::default();
    let slot = attach(&mut s, &mut t, 2, "H-1", now).unwrap() as usize;
    for _ in 0..100 {
        s.on_packet(slot, b"junk", USER, now);
    }
    assert_eq!(s.stats().unlogged, 100 - u64::from(LOG_PER_SECOND));
    // The next second logs again.
    s.on_packet(slot, b"junk", USER, now + Duration::from_secs(1));
    assert_eq!(s.stats().unlogged, 80);
}

#[test]
fn ten_slots_then_a_clear_refusal_and_dead_clients_are_reaped() {
    let (mut s, now) = session();
    let mut t = Mock::default();
    for id in 0..MAX_CLIENTS as u32 {
        attach(&mut s, &mut t, 100 + id, "H-1", now).unwrap();
    }
    assert_eq!(attach(&mut s, &mut t, 200, "H-1", now), Err(CtlType::Error));
    // Client 103 dies: the next one to attach gets its slot.
    t.dead.insert(103);
    assert_eq!(attach(&mut s, &mut t, 200, "H-1", now), Ok(3));
    assert_eq!(s.stats().dropped, 1);
    // And the reaper frees the slots of the dead on its own.
    t.dead.extend([100, 101]);
    s.reap(&mut t);
    assert_eq!(s.listening().count(), MAX_CLIENTS - 2);
}

#[test]
fn a_client_that_stops_reading_is_dropped_and_told_so() {
    let (mut s, now) = session();
    let mut t = Mock::default();
    let slot = attach(&mut s, &mut t, 9, "H-1", now).unwrap() as usize;
    assert!(s.on_packet(slot, &node_info(&[1], 1), USER, now));
    s.drop_client(slot, "its socket takes no more");
    s.settle();
    assert!(
        s.take_outbox(slot).is_empty(),
        "what was queued for it is gone"
    );
    assert!(!s.is_attached(slot));
    assert!(s.listening().any(|l| l == slot), "its socket is still read");
    // Its next request comes back at once with ECONNRESET.
    assert!(!s.on_packet(slot, &node_info(&[1], 2), USER, now));
    let r = replies(&mut s, slot);
    assert_eq!((r.len(), r[0].status, r[0].tid()), (1, ECONNRESET, 2));
    // Its control requests are refused with the reason.
    let r = SimCtl::parse(
        &s.on_ctl(
            &ctl(slot as u32, CtlType::GetGuid, [0; 64]),
            USER,
            &mut t,
            now,
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(r.kind, CtlType::Error);
    // Attaching again gives it its slot back.
    assert_eq!(attach(&mut s, &mut t, 9, "H-1", now), Ok(slot as u32));
    assert!(s.is_attached(slot));
}

#[test]
fn one_sm_per_node() {
    let (mut s, now) = session();
    let mut t = Mock::default();
    let r = s
        .on_ctl(&connect_msg(1, "H-1", true), USER, &mut t, now)
        .unwrap();
    assert_eq!(SimCtl::parse(&r).unwrap().kind, CtlType::Connect);
    let r = s
        .on_ctl(&connect_msg(2, "H-1", true), USER, &mut t, now)
        .unwrap();
    assert_eq!(SimCtl::parse(&r).unwrap().kind, CtlType::Error);
    // Nor by claiming the role after attaching.
    let other = attach(&mut s, &mut t, 3, "H-1", now).unwrap();
    let mut on = [0u8; 64];
    on[0..4].copy_from_slice(&1i32.to_ne_bytes());
    let r = s
        .on_ctl(&ctl(other, CtlType::SetIsSm, on), USER, &mut t, now)
        .unwrap();
    assert_eq!(SimCtl::parse(&r).unwrap().kind, CtlType::Error);
}

#[test]
fn an_unreachable_client_is_refused_and_holds_no_slot() {
    let (mut s, now) = session();
    let mut t = Mock {
        refuse: true,
        ..Default::default()
    };
    assert_eq!(attach(&mut s, &mut t, 1, "H-1", now), Err(CtlType::Error));
    assert_eq!(
        attach(&mut s, &mut t, 1, "no-such-node", now),
        Err(CtlType::Error)
    );
    assert_eq!(s.listening().count(), 0);
}

#[test]
fn commands_change_the_fabric_or_say_why_not() {
    let (mut s, now) = session();
    let text = |a: Result<Answer, ServeError>| match a {
        Ok(Answer::Text(t)) => t,
        other => panic!("{other:?}"),
    };
    let up = s
        .fabric()
        .topo
        .nodes
        .iter()
        .position(|n| n.name == "S-L0-0-0")
        .unwrap();
    let port = (1..=4)
        .find(|&p| s.fabric().topo.peer_of(up, p).is_some())
        .unwrap();
    let t = text(s.on_command(&format!("link-down S-L0-0-0 {port}"), USER, now));
    assert!(t.starts_with("ok: LinkDown"), "{t}");
    let e = s
        .on_command(&format!("link-down S-L0-0-0 {port}"), USER, now)
        .unwrap_err();
    assert!(matches!(e, ServeError::NoCable { .. }), "{e}");
    text(s.on_command(&format!("link-up S-L0-0-0 {port}"), USER, now));
    let e = s.on_command("node-up S-L0-0-0", USER, now).unwrap_err();
    assert!(matches!(e, ServeError::NotDown(_)), "{e}");
    let (far, far_port) = s.fabric().topo.peer_of(up, port).unwrap();
    let far = s.fabric().topo.nodes[far].name.clone();
    text(s.on_command("node-down S-L0-0-0", USER, now));
    assert!(matches!(
        s.on_command("node-down S-L0-0-0", USER, now),
        Err(ServeError::AlreadyDown(_))
    ));
    // A cable of a node that is down comes back with it, from either end.
    for (node, p) in [("S-L0-0-0", port), (far.as_str(), far_port)] {
        let e = s
            .on_command(&format!("link-up {node} {p}"), USER, now)
            .unwrap_err();
        assert!(
            matches!(e, ServeError::CableOfDownNode(_)),
            "{node} {p}: {e}"
        );
    }
    text(s.on_command("node-up S-L0-0-0", USER, now));
    assert!(matches!(
        s.on_command("link-down S-L0-0-0 9", USER, now),
        Err(ServeError::MissingPort)
    ));
    assert!(matches!(
        s.on_command("node-down nobody", USER, now),
        Err(ServeError::NoNode(_))
    ));
    assert_eq!(
        s.on_command("dump /tmp/x", USER, now),
        Ok(Answer::Dump("/tmp/x".into()))
    );
    let stats: serde_json::Value =
        serde_json::from_str(&text(s.on_command("stats", USER, now))).unwrap();
    for k in [
        "packets", "answered", "timeouts", "refused", "dropped", "hops", "expired", "uptime_s",
    ] {
        assert!(stats.get(k).is_some(), "{k} missing from {stats}");
    }
    let d = s.dump();
    assert_eq!(d.nodes.len(), s.fabric().topo.nodes.len());
    assert!(d.nodes.iter().any(|n| n.lft.is_some()));
}

#[test]
fn what_clients_chose_is_logged_escaped_and_short() {
    assert_eq!(clean("H-1"), "H-1");
    assert_eq!(clean("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
    let long = clean(&"x".repeat(1000));
    assert_eq!(long.chars().count(), 201);
    assert!(long.ends_with('…'));
}

#[test]
fn only_the_servers_user_root_and_the_allowed_pass() {
    let a = Access::new(ME, &[4321]);
    for uid in [ME, 0, 4321] {
        assert_eq!(a.check(Some(Peer { uid, pid: 7 })), Ok(()));
    }
    let e = a.check(Some(Peer { uid: 1234, pid: 7 })).unwrap_err();
    assert!(e.to_string().contains("uid 1234 (pid 7)"), "{e}");
    assert_eq!(a.check(None), Err(ServeError::NoCredentials));
}

/// Attaches client `id` at `node` with `issm` and QP `qp`; its slot.
fn attach_qp(s: &mut Session, t: &mut Mock, id: u32, node: &str, issm: bool, qp: u32) -> usize {
    let mut d = [0u8; 64];
    ClientInfo {
        id,
        qp,
        issm,
        nodeid: node.into(),
    }
    .encode(&mut d);
    let r = SimCtl::parse(
        &s.on_ctl(&ctl(0, CtlType::Connect, d), USER, t, Instant::now())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(r.kind, CtlType::Connect);
    ClientInfo::parse(&r.data).id as usize
}

/// An SA MAD (class 3) of `method` with `tid`, to `dlid` QP `dqp`, from
/// QP `sqp`.
fn gmp(method: u8, tid: u64, dlid: u16, dqp: u32, sqp: u32) -> [u8; 288] {
    let mut mad = [0u8; 256];
    mad[0] = 1;
    mad[1] = 0x03;
    mad[2] = 2;
    mad[3] = method;
    mad[8..16].copy_from_slice(&tid.to_be_bytes());
    mad[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
    SimRequest {
        dlid,
        slid: 0,
        dqp,
        sqp,
        status: 0,
        length: 256,
        mad,
    }
    .encode()
}

/// A session serving mport-ntree:4:2 as ibkit's SM brought it up.
fn routed_session() -> (Session, Instant) {
    let (f, _sm, up) = crate::sim::bring_up(
        "mport-ntree:4:2",
        SimConfig::default(),
        smi::sm::SmConfig::default(),
    )
    .unwrap();
    assert!(up);
    let now = Instant::now();
    (Session::new(f, Access::new(ME, &[]), now), now)
}

/// The LID of the node named `name`.
fn lid_of(s: &Session, name: &str) -> u16 {
    let f = s.fabric();
    let i = f.topo.nodes.iter().position(|n| n.name == name).unwrap();
    f.nodes[i].lid().0
}

#[test]
fn gs_mads_cross_the_routed_fabric_to_the_client_that_takes_them() {
    let (mut s, now) = routed_session();
    let (l0, l1, l2) = (lid_of(&s, "H-0"), lid_of(&s, "H-1"), lid_of(&s, "H-2"));
    let mut t = Mock::default();
    let sm = attach_qp(&mut s, &mut t, 10, "H-0", true, 0);
    let host = attach_qp(&mut s, &mut t, 11, "H-1", false, 0);
    let listener = attach_qp(&mut s, &mut t, 12, "H-2", false, 0x345);

    // A request to the SA (QP 1 at the SM's LID) reaches the SM's client,
    // from the host's LID; the host's port counts it sent.
    let h1 = s
        .fabric()
        .topo
        .nodes
        .iter()
        .position(|n| n.name == "H-1")
        .unwrap();
    let sent = |s: &Session| s.fabric().port_counts(h1, 1).unwrap().extended().xmit_pkts;
    let before = sent(&s);
    s.on_packet(host, &gmp(0x12, 0x77, l0, 1, 1), USER, now);
    assert_eq!(sent(&s), before + 1);
    let r = replies(&mut s, sm);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].slid, r[0].dqp, r[0].tid()), (l1, 1, 0x77));
    assert!(replies(&mut s, host).is_empty());
    // Its answer, in three segments of one TID, goes back to the host.
    for _ in 0..3 {
        s.on_packet(sm, &gmp(0x92, 0x77, l1, 1, 1), USER, now);
    }
    let r = replies(&mut s, host);
    assert_eq!(r.len(), 3);
    assert!(r.iter().all(|m| m.slid == l0 && m.tid() == 0x77));
    // The host's RMPP ACK (a response) goes to the SA's node.
    s.on_packet(host, &gmp(0x92, 0x77, l0, 1, 1), USER, now);
    assert_eq!(replies(&mut s, sm).len(), 1);

    // A Report to the listener's own QP reaches it; to QP 1 at its node
    // nobody takes it (no SM there): the sender hears ETIMEDOUT.
    s.on_packet(sm, &gmp(0x06, 0x99, l2, 0x345, 1), USER, now);
    let r = replies(&mut s, listener);
    assert_eq!((r.len(), r[0].slid), (1, l0));
    s.on_packet(sm, &gmp(0x06, 0x9a, l2, 1, 1), USER, now);
    let r = replies(&mut s, sm);
    assert_eq!((r.len(), r[0].status), (1, ETIMEDOUT));
    // A LID nobody holds: ETIMEDOUT; a response nobody asked for: dropped.
    s.on_packet(host, &gmp(0x12, 0x5, 999, 1, 1), USER, now);
    assert_eq!(replies(&mut s, host)[0].status, ETIMEDOUT);
    s.on_packet(host, &gmp(0x92, 0x5, l2, 1, 1), USER, now);
    assert!(replies(&mut s, listener).is_empty());
    assert_eq!(s.stats().gs_forwarded, 6);
}

#[test]
fn reload_sm_signals_only_an_sm_the_requester_runs() {
    let (s, now) = session();
    let mut s = Session::new(s.fabric, Access::new(ME, &[4321]), now);
    let mut t = Mock::default();
    assert_eq!(s.on_command("reload-sm", USER, now), Err(ServeError::NoSm));
    // A plain client is no SM; the SM client attached by USER (pid 42,
    // whatever id it claims) is.
    attach_qp(&mut s, &mut t, 7, "H-2", false, 1);
    assert_eq!(s.on_command("reload-sm", USER, now), Err(ServeError::NoSm));
    attach_qp(&mut s, &mut t, 99, "H-1", true, 0);
    assert_eq!(
        s.on_command("reload-sm", USER, now),
        Ok(Answer::Hup(vec![42]))
    );
    // Another user let in may not signal it; root may.
    let stranger = Some(Peer { uid: 4321, pid: 5 });
    let refused = s.report(now).serve.refused;
    assert_eq!(
        s.on_command("reload-sm", stranger, now),
        Err(ServeError::NotSmOwner { uid: 4321 })
    );
    assert_eq!(s.report(now).serve.refused, refused + 1);
    let root = Some(Peer { uid: 0, pid: 1 });
    assert_eq!(
        s.on_command("reload-sm", root, now),
        Ok(Answer::Hup(vec![42]))
    );
    // Without credentials, nothing.
    assert_eq!(
        s.on_command("reload-sm", None, now),
        Err(ServeError::NoCredentials)
    );
}

/// `node-vfs` changes a node's VF count only while it is down, and only
/// for a CA other than the SM's; refused, it changes nothing.
#[test]
fn node_vfs_is_for_a_ca_that_is_down() {
    let (mut s, now) = session();
    let vfs = |s: &Session| {
        s.dump()
            .nodes
            .iter()
            .find(|n| n.name == "H-2")
            .map(|n| n.vfs.as_ref().map_or(0, |v| v.len()))
    };
    assert_eq!(vfs(&s), Some(0));
    let e = s.on_command("node-vfs H-2 2", USER, now).unwrap_err();
    assert!(e.to_string().contains("is up"), "{e}");
    let e = s.on_command("node-vfs S-L0-0-0 2", USER, now).unwrap_err();
    assert!(e.to_string().contains("is up"), "{e}");
    s.on_command("node-down S-L0-0-0", USER, now).unwrap();
    let e = s.on_command("node-vfs S-L0-0-0 2", USER, now).unwrap_err();
    assert!(e.to_string().contains("not a CA"), "{e}");
    s.on_command("node-down H-2", USER, now).unwrap();
    assert!(s.on_command("node-vfs H-2 3", USER, now).is_ok());
    s.on_command("node-up H-2", USER, now).unwrap();
    assert_eq!(vfs(&s), Some(3));
    let stranger = Some(Peer { uid: 4321, pid: 1 });
    s.on_command("node-down H-2", USER, now).unwrap();
    assert!(s.on_command("node-vfs H-2 0", stranger, now).is_err());
    s.on_command("node-up H-2", USER, now).unwrap();
    assert_eq!(vfs(&s), Some(3), "a stranger changes nothing");
    let e = s.on_command("node-reset H-2", USER, now).unwrap_err();
    assert!(e.to_string().contains("not a switch"), "{e}");
    assert!(s.on_command("node-reset S-L0-0-0", stranger, now).is_err());
    assert!(
        s.on_command("node-reset S-L0-0-0", USER, now).is_err(),
        "down"
    );
}

#[test]
fn perfmgt_requests_are_answered_by_the_pma_of_the_port_they_reach() {
    use mad_core::perf::{self, PortCounters};
    let (mut s, now) = routed_session();
    let (l1, l2) = (lid_of(&s, "H-1"), lid_of(&s, "H-2"));
    let mut t = Mock::default();
    let host = attach_qp(&mut s, &mut t, 11, "H-1", false, 0);
    // A client at H-2 that would take GS requests to its QP: the PMA
    // answers all the same, and it hears nothing.
    let other = attach_qp(&mut s, &mut t, 12, "H-2", false, 1);
    let q = PortCounters {
        port_select: 1,
        ..PortCounters::default()
    };
    let mut m = gmp(0x01, 0x42, l2, 1, 1);
    // gmp's class is the SA's: make it PerfMgt's Get(PortCounters).
    let mad = &mut m[32..];
    mad[1] = perf::PERF_CLASS;
    mad[2] = perf::PERF_CLASS_VERSION;
    mad[16..18].copy_from_slice(&perf::ATTR_PORT_COUNTERS.to_be_bytes());
    mad[perf::DATA_OFFSET..perf::DATA_OFFSET + 44].copy_from_slice(&q.to_bytes().unwrap());
    let get = |s: &mut Session| {
        s.on_packet(host, &m, USER, now);
        let r = replies(s, host);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].slid, r[0].dlid, r[0].sqp, r[0].tid()),
            (l2, l1, 1, 0x42)
        );
        assert_eq!((r[0].mad[3], r[0].mad[4], r[0].mad[5]), (0x81, 0, 0));
        PortCounters::decode(&r[0].mad[perf::DATA_OFFSET..]).unwrap()
    };
    let a = get(&mut s);
    let b = get(&mut s);
    // Between the two reads H-2's port took the first answer's request
    // and sent its answer: one packet each way.
    assert_eq!((b.xmit_pkts - a.xmit_pkts, b.rcv_pkts - a.rcv_pkts), (1, 1));
    assert!(replies(&mut s, other).is_empty());
    assert_eq!(s.stats().pma_answered, 2);
    assert_eq!(s.stats().gs_forwarded, 0);
    // Not a MAD a PMA answers (base version 2): ETIMEDOUT at once.
    m[32] = 2;
    s.on_packet(host, &m, USER, now);
    assert_eq!(replies(&mut s, host)[0].status, ETIMEDOUT);
    assert_eq!(s.stats().pma_answered, 2);
    // To a LID no port holds: ETIMEDOUT at once.
    m[32] = 1;
    m[0..2].copy_from_slice(&999u16.to_be_bytes());
    s.on_packet(host, &m, USER, now);
    assert_eq!(replies(&mut s, host)[0].status, ETIMEDOUT);
}

/// An SMInfo request handed to another node's SM client waits for its
/// answer, not for the fabric to settle; when that client dies first,
/// the requester hears ETIMEDOUT at the next reap, as a MAD to a dead SM
/// times out on a fabric (a libumad2sim requester, OpenSM, has no timer
/// of its own and would wait for it for ever).
#[test]
fn an_sminfo_request_to_an_sm_that_dies_times_out() {
    let (mut s, now) = routed_session();
    let mut t = Mock::default();
    let master = attach_qp(&mut s, &mut t, 10, "H-0", true, 0);
    let standby = attach_qp(&mut s, &mut t, 11, "H-1", true, 0);
    let to = lid_of(&s, "H-0");
    // What reached the master's client but the traps 144 the two IsSM
    // claims raised.
    let polls = |s: &mut Session| -> Vec<SimRequest> {
        replies(s, master)
            .into_iter()
            .filter(|r| r.mad[3] != 0x05)
            .collect()
    };
    let poll = |tid: u64| {
        let smp = Smp::lid_routed(Method::Get, AttributeId::SmInfo, 0, tid, MKey(0));
        SimRequest::new(&smp, to).encode()
    };
    // Answered while the master lives: its answer goes back.
    s.on_packet(standby, &poll(0x51), USER, now);
    s.settle();
    let asked = polls(&mut s);
    assert_eq!(asked.len(), 1, "handed to the master's client");
    assert!(
        replies(&mut s, standby).is_empty(),
        "it waits for the client"
    );
    let mut answer = asked[0].clone();
    answer.mad[3] = 0x81;
    answer.dlid = answer.slid;
    s.on_packet(master, &answer.encode(), USER, now);
    s.settle();
    let r = replies(&mut s, standby);
    assert_eq!((r.len(), r[0].status, r[0].tid()), (1, 0, 0x51));
    // Handed, then the master dies before it answers.
    s.on_packet(standby, &poll(0x52), USER, now);
    s.settle();
    assert_eq!(polls(&mut s).len(), 1);
    assert!(replies(&mut s, standby).is_empty());
    t.dead.insert(10);
    s.reap(&mut t);
    s.settle();
    let r = replies(&mut s, standby);
    assert_eq!((r.len(), r[0].status, r[0].tid()), (1, ETIMEDOUT, 0x52));
}
