//! `ibkit fabric serve` spoken to directly in ibsim's client protocol, with
//! no peer tools: clients attach at named CAs, a directed-route NodeInfo
//! Get travels the fabric and comes back, a request with no way out comes
//! back with ETIMEDOUT, and malformed, truncated or oversized datagrams
//! from one client are dropped while that client and another keep being
//! served.

use fabric::ibsim::{self, ClientInfo, CtlType, SimCtl, SimRequest};
use mad_core::attr::AttributeId;
use mad_core::{DrPath, MKey, Method, Smp};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::time::Duration;
use tests::peers::Served;

fn addr(name: &str) -> SocketAddr {
    // ibsim's names count their terminating NUL.
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    SocketAddr::from_abstract_name(&b).unwrap()
}

/// A client as libumad2sim is one: its own receive socket, attached at a
/// node through the control socket.
struct Client {
    sock: UnixDatagram,
    out: SocketAddr,
    slot: u32,
    node: String,
}

impl Client {
    fn attach(base: &str, id: u32, node: &str) -> Result<Client, String> {
        let sock = UnixDatagram::bind_addr(&addr(&ibsim::in_name(base, id))).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut data = [0u8; 64];
        ClientInfo {
            id,
            qp: 0,
            issm: false,
            nodeid: node.to_string(),
        }
        .encode(&mut data);
        let ctl = SimCtl {
            client: 0,
            kind: CtlType::Connect,
            len: 64,
            data,
        };
        sock.send_to_addr(&ctl.encode(), &addr(&ibsim::ctl_name(base)))
            .unwrap();
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).unwrap();
        let reply = SimCtl::parse(&buf[..n]).unwrap();
        if reply.kind == CtlType::Error {
            return Err(format!("refused: {reply:?}"));
        }
        let info = ClientInfo::parse(&reply.data);
        Ok(Client {
            sock,
            out: addr(&ibsim::out_name(base, info.id as usize)),
            slot: info.id,
            node: info.nodeid,
        })
    }

    fn send_raw(&self, bytes: &[u8]) {
        self.sock.send_to_addr(bytes, &self.out).unwrap();
    }

    /// Sends `smp` by directed route and waits for what comes back.
    fn request(&self, smp: &Smp) -> SimRequest {
        self.request_to(smp, 0xFFFF)
    }

    /// Sends `smp` LID-routed to `dlid` (0xFFFF: by directed route) and
    /// waits for what comes back.
    fn request_to(&self, smp: &Smp, dlid: u16) -> SimRequest {
        self.send_raw(&SimRequest::new(smp, dlid).encode());
        let mut buf = [0u8; 1024];
        let n = self.sock.recv(&mut buf).unwrap();
        SimRequest::parse(&buf[..n]).unwrap()
    }
}

fn node_info(path: &[u8], tid: u64) -> Smp {
    let p = DrPath::from_ports(path).unwrap();
    Smp::directed(&p, Method::Get, AttributeId::NodeInfo, 0, tid, MKey(0))
}

/// NodeInfo of the answer: node type (byte 2) and node GUID (bytes 12..20).
fn node_type_and_guid(r: &SimRequest) -> (u8, u64) {
    let ni = &r.mad[64..];
    (ni[2], u64::from_be_bytes(ni[12..20].try_into().unwrap()))
}

#[test]
fn clients_are_served_and_bad_datagrams_change_nothing() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:1", 0, &[]).unwrap();
    let base = served.socket().to_string();
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:1").unwrap();
    let cas: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .collect();
    let (h0, h1) = (cas[0], cas[1]);

    // An unknown node is refused; a switch is attached at its management
    // port 0, as ibsim does: its own agent answers at zero hops, and its
    // directed routes leave by the path's first port.
    assert!(Client::attach(&base, 900_002, "no-such-node").is_err());
    let sw = (0..topo.nodes.len())
        .find(|&i| topo.nodes[i].kind == mad_core::attr::NodeType::Switch)
        .unwrap();
    let at_switch = Client::attach(&base, 900_001, &topo.nodes[sw].name).unwrap();
    let r = at_switch.request(&node_info(&[], 0x05));
    assert_eq!(r.status, 0);
    assert_eq!(node_type_and_guid(&r), (2, topo.nodes[sw].guid));
    let (peer, _) = topo.peer_of(sw, 1).unwrap();
    let r = at_switch.request(&node_info(&[1], 0x06));
    assert_eq!(r.status, 0);
    assert_eq!(node_type_and_guid(&r).1, topo.nodes[peer].guid);
    drop(at_switch);

    let a = Client::attach(&base, 900_003, &topo.nodes[h0].name).unwrap();
    let b = Client::attach(&base, 900_004, &topo.nodes[h1].name).unwrap();
    assert_eq!(a.node, topo.nodes[h0].name);
    assert_ne!(a.slot, b.slot);

    // Zero hops: the client's own CA; one hop: its switch.
    let r = a.request(&node_info(&[], 0x11));
    assert_eq!(r.status, 0);
    assert_eq!(node_type_and_guid(&r), (1, topo.nodes[h0].guid));
    assert_eq!(u64::from_be_bytes(r.mad[8..16].try_into().unwrap()), 0x11);
    let r = a.request(&node_info(&[1], 0x12));
    let (peer, _) = topo.peer_of(h0, 1).unwrap();
    assert_eq!(node_type_and_guid(&r), (2, topo.nodes[peer].guid));

    // A path through a port with no cable: nothing comes back but
    // ETIMEDOUT, as ibsim reports it.
    let free_port = (1..=topo.nodes[peer].ports).find(|&p| topo.peer_of(peer, p).is_none());
    if let Some(p) = free_port {
        let r = a.request(&node_info(&[1, p], 0x13));
        assert_eq!(r.status, ibsim::ETIMEDOUT);
    }

    let before = served.ctl("stats").unwrap();
    let stats = |s: &str| -> serde_json::Value { serde_json::from_str(s).unwrap() };
    // Garbage of every shape from client a: short, long, oversized, a
    // request with a non-SMP class, an SMP that does not parse.
    a.send_raw(&[]);
    a.send_raw(&[0xA5; 17]);
    a.send_raw(&[0x5A; 287]);
    a.send_raw(&[0x5A; 289]);
    a.send_raw(&[0xFF; 900]);
    let mut bad_class = SimRequest::parse(&[0u8; ibsim::REQ_SIZE]).unwrap();
    bad_class.length = 256;
    bad_class.mad[0] = 1;
    bad_class.mad[1] = 0x04; // PerfMgt: not served
    a.send_raw(&bad_class.encode());
    let mut answer = [0u8; 1024];
    let n = a.sock.recv(&mut answer).unwrap();
    let r = SimRequest::parse(&answer[..n]).unwrap();
    assert_eq!(r.status, ibsim::ETIMEDOUT, "a class that is not served");

    // Both clients are still served, each its own answers.
    let rb = b.request(&node_info(&[], 0x21));
    assert_eq!(node_type_and_guid(&rb), (1, topo.nodes[h1].guid));
    let ra = a.request(&node_info(&[1], 0x22));
    assert_eq!(node_type_and_guid(&ra), (2, topo.nodes[peer].guid));
    assert_eq!(u64::from_be_bytes(ra.mad[8..16].try_into().unwrap()), 0x22);

    let after = served.ctl("stats").unwrap();
    let (x, y) = (stats(&before), stats(&after));
    assert_eq!(
        y["malformed"].as_u64().unwrap() - x["malformed"].as_u64().unwrap(),
        5,
        "{after}"
    );
    // The fabric did not change: the dump still shows every cable.
    let dump_path = std::env::temp_dir().join(format!("ibkit-serve-{}.json", std::process::id()));
    served
        .ctl(&format!("dump {}", dump_path.display()))
        .unwrap();
    let dump: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dump_path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&dump_path);
    let cables = dump["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["ports"].as_array().unwrap().iter())
        .filter(|p| !p["peer"].is_null())
        .count();
    assert_eq!(cables, 2 * topo.links());
}

#[test]
fn control_commands_take_links_down_and_refuse_nonsense() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:1", 0, &[]).unwrap();
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:1").unwrap();
    let h0 = (0..topo.nodes.len())
        .find(|&i| topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .unwrap();
    let name = &topo.nodes[h0].name;
    assert!(served.ctl("frobnicate").is_err());
    assert!(served.ctl("link-down no-such-node 1").is_err());
    // A word too many is refused, and nothing happens.
    let e = served
        .ctl(&format!("link-down {name} 1 extra"))
        .unwrap_err();
    assert!(
        e.contains("link-down takes 2 argument(s); unexpected \"extra\""),
        "{e}"
    );
    assert!(served.ctl("stats now").is_err());
    let a = Client::attach(served.socket(), 900_009, name).unwrap();
    assert_eq!(
        a.request(&node_info(&[1], 0x30)).status,
        0,
        "the cable is still up"
    );
    drop(a);
    served.ctl(&format!("link-down {name} 1")).unwrap();
    let a = Client::attach(served.socket(), 900_010, name).unwrap();
    let r = a.request(&node_info(&[1], 0x31));
    assert_eq!(r.status, ibsim::ETIMEDOUT, "the cable is down");
    let e = served.ctl(&format!("link-down {name} 1")).unwrap_err();
    assert!(e.contains("has no cable up"), "{e}");
    served.ctl(&format!("link-up {name} 1")).unwrap();
    let r = a.request(&node_info(&[1], 0x32));
    assert_eq!(r.status, 0, "the cable is back");
    let e = served.ctl(&format!("link-up {name} 1")).unwrap_err();
    assert!(e.contains("is up already"), "{e}");
    // node-up is for a node taken down: on a running switch it would
    // re-power it behind the SM's back.
    let sw = &topo.nodes[(0..topo.nodes.len())
        .find(|&i| topo.nodes[i].kind == mad_core::attr::NodeType::Switch)
        .unwrap()]
    .name;
    let e = served.ctl(&format!("node-up {sw}")).unwrap_err();
    assert!(e.contains("is up: only a node taken down"), "{e}");
    let r = a.request(&node_info(&[1], 0x33));
    assert_eq!(r.status, 0, "the switch kept its state");
    served.ctl(&format!("node-down {sw}")).unwrap();
    assert!(served
        .ctl(&format!("node-down {sw}"))
        .unwrap_err()
        .contains("down already"));
    served.ctl(&format!("node-up {sw}")).unwrap();
}

#[test]
fn answers_are_held_as_long_as_asked_and_the_time_is_counted() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let held_us = 30_000u64;
    for delay in [0, held_us] {
        let served = Served::start(
            exe,
            "mport-ntree:4:1",
            0,
            &["--answer-delay-us", &delay.to_string()],
        )
        .unwrap();
        let topo = fabric::topology::Topology::from_spec("mport-ntree:4:1").unwrap();
        let ca = topo
            .nodes
            .iter()
            .find(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
            .unwrap();
        let c = Client::attach(served.socket(), 900_100, &ca.name).unwrap();
        let rounds = 5u32;
        let t0 = std::time::Instant::now();
        for i in 0..rounds {
            // To the switch one hop away: an answer, not a time-out.
            let r = c.request(&node_info(&[1], 0x77_0000 + u64::from(i)));
            assert_eq!(r.status, 0);
            assert_eq!(node_type_and_guid(&r).0, 2, "the switch answers");
        }
        let took = t0.elapsed();
        let s = served.stats().unwrap();
        let batches = s["batches"].as_u64().unwrap();
        assert_eq!(batches, u64::from(rounds), "one batch per request: {s}");
        assert_eq!(s["answered"].as_u64().unwrap(), u64::from(rounds));
        assert!(s["fabric_ns"].as_u64().unwrap() > 0, "{s}");
        assert!(s["send_ns"].as_u64().unwrap() > 0, "{s}");
        if delay > 0 {
            // Every answer waited at least the delay, and the delay is not
            // counted as the fabric's time.
            assert!(
                took >= Duration::from_micros(delay) * rounds,
                "{rounds} answers held {delay} µs each came back in {took:?}"
            );
            assert!(
                s["fabric_ns"].as_u64().unwrap() < delay * 1000 * batches / 2,
                "the hold counted as fabric time: {s}"
            );
        } else {
            assert!(
                took < Duration::from_micros(held_us) * rounds,
                "answers without a delay took {took:?}"
            );
        }
    }
}

/// A directory and a copy of `ibkit` in it that uid 65534 can reach: the
/// checkout may sit under a directory only root can enter.
fn nobody_scratch() -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ibkit-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.join("ibkit");
    std::fs::copy(env!("CARGO_BIN_EXE_ibkit"), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, exe)
}

/// Runs `python3 -c script args` as uid and gid 65534 (nobody) in `dir`;
/// None when this test cannot switch users (not root, or no python3).
fn as_nobody(dir: &Path, script: &str, args: &[&str]) -> Option<std::process::Output> {
    use std::os::unix::process::CommandExt;
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .current_dir(dir)
        .uid(65534)
        .gid(65534)
        .output()
        .ok()
}

/// Another user on the machine reaches the abstract sockets but is
/// refused at both: a control command (`ibkit fabric ctl` as that user)
/// and an attach in ibsim's protocol (a second process as that user).
/// Nothing changes, the refusals are counted, and the server's own
/// clients go on being served.
#[test]
fn another_user_is_refused_and_changes_nothing() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:1", 0, &[]).unwrap();
    let base = served.socket().to_string();
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:1").unwrap();
    let h0 = (0..topo.nodes.len())
        .find(|&i| topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .unwrap();
    let name = topo.nodes[h0].name.clone();
    // `ibkit fabric ctl` as nobody.
    let ctl_as_nobody = "import subprocess,sys; r=subprocess.run(sys.argv[1:], capture_output=True, text=True); print(r.returncode); print(r.stderr)";
    let cmd = format!("link-down {name} 1");
    let (dir, nobody_exe) = nobody_scratch();
    let Some(out) = as_nobody(
        &dir,
        ctl_as_nobody,
        &[
            nobody_exe.to_str().unwrap(),
            "fabric",
            "ctl",
            "--socket",
            &base,
            &cmd,
        ],
    ) else {
        eprintln!("SKIPPED another_user_is_refused: not root, cannot switch users");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with("2\n"),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("permission denied: uid 65534"), "{text}");
    // An attach in ibsim's protocol as nobody: the answer is an error.
    let mut data = [0u8; 64];
    ClientInfo {
        id: 4242,
        qp: 0,
        issm: true,
        nodeid: name.clone(),
    }
    .encode(&mut data);
    let packet = SimCtl {
        client: 0,
        kind: CtlType::Connect,
        len: 64,
        data,
    }
    .encode();
    let hex: String = packet.iter().map(|b| format!("{b:02x}")).collect();
    let attach = "import socket,sys\nb=sys.argv[1].encode()\ns=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\ns.bind(b'\\0'+b+b':in4242\\0')\ns.settimeout(10)\ns.sendto(bytes.fromhex(sys.argv[2]),b'\\0'+b+b':ctl\\0')\nprint(s.recv(512).hex())";
    let out = as_nobody(&dir, attach, &[&base, &hex]).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let reply = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        !reply.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes: Vec<u8> = (0..reply.len() / 2)
        .map(|i| u8::from_str_radix(&reply[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert_eq!(SimCtl::parse(&bytes).unwrap().kind, CtlType::Error);
    // Nothing changed: the cable is up, no client took a slot, and the
    // two refusals are counted.
    let a = Client::attach(&base, 900_020, &name).unwrap();
    assert_eq!(a.slot, 0, "the refused attach took no slot");
    assert_eq!(
        a.request(&node_info(&[1], 0x40)).status,
        0,
        "the cable is still up"
    );
    let stats: serde_json::Value = serde_json::from_str(&served.ctl("stats").unwrap()).unwrap();
    assert_eq!(stats["refused"], 2, "{stats}");
}

/// A client that sends thousands of malformed datagrams is counted, not
/// echoed: the server's log stays a few dozen lines, says how many it left
/// out, and the client is still served.
#[test]
fn a_flood_of_bad_datagrams_does_not_flood_the_log() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let base = format!("ibkit-flood-{}", std::process::id());
    let log = std::env::temp_dir().join(format!("{base}.log"));
    let mut child = std::process::Command::new(exe)
        .args([
            "fabric",
            "serve",
            "--topology",
            "mport-ntree:4:1",
            "--socket",
            &base,
        ])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while fabric::serve::ctl(&base, "stats").is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:1").unwrap();
    let name = tests::peers::first_ca(&topo).unwrap();
    let a = Client::attach(&base, 900_030, &name).unwrap();
    for i in 0..5_000u32 {
        a.send_raw(&i.to_le_bytes());
        if i % 200 == 199 {
            // Let the server keep up (the client's queue is short).
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert_eq!(a.request(&node_info(&[1], 0x50)).status, 0, "still served");
    std::thread::sleep(Duration::from_millis(1100));
    // A line in the next second says how many were left out.
    a.send_raw(b"x");
    assert_eq!(a.request(&node_info(&[1], 0x51)).status, 0);
    let stats: serde_json::Value =
        serde_json::from_str(&fabric::serve::ctl(&base, "stats").unwrap()).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert_eq!(stats["malformed"], 5_001, "{stats}");
    let unlogged = stats["unlogged"].as_u64().unwrap();
    assert!(unlogged >= 4_900, "{stats}");
    let lines = text.lines().count();
    assert!(lines < 200, "{lines} lines logged");
    assert!(text.contains("more lines like these left out"), "{text}");
}

/// Clients killed without detaching (their socket closed) give their slots
/// back: after ten such, ten new clients attach. ibsim keeps such slots
/// for good.
#[test]
fn dead_clients_give_their_slots_back() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:2").unwrap();
    let cas: Vec<String> = topo
        .nodes
        .iter()
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.name.clone())
        .collect();
    let first: Vec<Client> = (0..ibsim::MAX_CLIENTS as u32)
        .map(|i| {
            Client::attach(served.socket(), 900_100 + i, &cas[i as usize % cas.len()]).unwrap()
        })
        .collect();
    assert!(
        Client::attach(served.socket(), 900_200, &cas[0]).is_err(),
        "every slot is taken"
    );
    drop(first); // their sockets close, as a killed process's do
    let again: Vec<Client> = (0..ibsim::MAX_CLIENTS as u32)
        .map(|i| {
            Client::attach(served.socket(), 900_300 + i, &cas[i as usize % cas.len()]).unwrap()
        })
        .collect();
    for (i, c) in again.iter().enumerate() {
        assert_eq!(c.request(&node_info(&[1], 0x60 + i as u64)).status, 0);
    }
}

impl Client {
    /// Get, change and Set one attribute of the node at `path`.
    fn edit(
        &self,
        path: &[u8],
        attr: AttributeId,
        modifier: u32,
        tid: u64,
        f: impl FnOnce(&mut [u8; 64]),
    ) {
        let p = DrPath::from_ports(path).unwrap();
        let r = self.request(&Smp::directed(
            &p,
            Method::Get,
            attr,
            modifier,
            tid,
            MKey(0),
        ));
        assert_eq!(r.status, 0);
        let mut set = Smp::directed(&p, Method::Set, attr, modifier, tid + 1, MKey(0));
        set.data.copy_from_slice(&r.mad[64..128]);
        f(&mut set.data);
        let r = self.request(&set);
        assert_eq!(
            (r.status, u16::from_be_bytes([r.mad[4], r.mad[5]]) & 0x7FFF),
            (0, 0),
            "{attr:?}"
        );
    }
}

/// A client writes two LFTs so that a LID loops between a leaf and a spine,
/// then sends one LID-routed SMP to it. The packet expires in the fabric
/// (counted in ctl stats) instead of circling for good, the sender gets its
/// timeout, and another client is served right after.
#[test]
fn a_lid_routed_loop_is_dropped_and_counted_while_others_are_served() {
    use mad_core::attr::SwitchInfo;
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let base = served.socket().to_string();
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:2").unwrap();
    let cas: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .collect();
    let a = Client::attach(&base, 900_400, &topo.nodes[cas[0]].name).unwrap();
    let b = Client::attach(&base, 900_401, &topo.nodes[cas[1]].name).unwrap();
    let (leaf, _) = topo.peer_of(cas[0], 1).unwrap();
    let up = (1..=topo.nodes[leaf].ports)
        .find(|&p| {
            topo.peer_of(leaf, p)
                .is_some_and(|(n, _)| topo.nodes[n].kind == mad_core::attr::NodeType::Switch)
        })
        .unwrap();
    let (_, back) = topo.peer_of(leaf, up).unwrap();
    const LID: usize = 5;
    for (path, port, tid) in [(vec![1u8], up, 0x100), (vec![1u8, up], back, 0x200)] {
        a.edit(&path, AttributeId::SwitchInfo, 0, tid, |d| {
            let mut si = SwitchInfo::decode(d).unwrap();
            si.linear_fdb_top = 63;
            si.encode(d).unwrap();
        });
        a.edit(
            &path,
            AttributeId::LinearForwardingTable,
            0,
            tid + 0x10,
            |d| d[LID] = port,
        );
    }
    let lr = Smp::lid_routed(Method::Get, AttributeId::NodeInfo, 0, 0x300, MKey(0));
    let r = a.request_to(&lr, LID as u16);
    assert_eq!(
        r.status,
        ibsim::ETIMEDOUT,
        "nobody answers a looping packet"
    );
    let r = b.request(&node_info(&[1], 0x301));
    assert_eq!(r.status, 0, "the other client is served");
    let stats: serde_json::Value = serde_json::from_str(&served.ctl("stats").unwrap()).unwrap();
    assert_eq!(stats["expired"], 1, "{stats}");
}

#[test]
fn a_client_that_stops_reading_is_dropped_and_told_so() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let stuck = Client::attach(served.socket(), 900_400, "H-1").unwrap();
    let other = Client::attach(served.socket(), 900_401, "H-2").unwrap();
    // Far more requests than its socket holds answers, none read.
    let req = SimRequest::new(&node_info(&[1], 0x70), 0xFFFF);
    let stats = || -> serde_json::Value {
        serde_json::from_str(&fabric::serve::ctl(served.socket(), "stats").unwrap()).unwrap()
    };
    let mut sent = 0;
    while stats()["dropped"] == 0 {
        for _ in 0..256 {
            stuck.send_raw(&req.encode());
        }
        sent += 256;
        assert!(sent < 100_000, "never dropped: {}", stats());
    }
    // The other client is served meanwhile.
    assert_eq!(other.request(&node_info(&[1], 0x71)).status, 0);
    // The stuck one reads what it was sent before the drop, then its next
    // request comes back at once, refused with ECONNRESET.
    stuck
        .sock
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 1024];
    while stuck.sock.recv(&mut buf).is_ok() {}
    stuck
        .sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let r = stuck.request(&node_info(&[1], 0x72));
    assert_eq!((r.status, r.tid()), (fabric::serve::ECONNRESET, 0x72));
    assert_eq!(stats()["dropped"], 1);
    // Attaching again, it is served.
    drop(stuck);
    let back = Client::attach(served.socket(), 900_400, "H-1").unwrap();
    assert_eq!(back.request(&node_info(&[1], 0x73)).status, 0);
}
