//! Helpers the peer-tool tests share: skipping where tools are missing,
//! and cables as ibkit's topology and as ibnetdiscover describe them.
#![allow(dead_code)]

use fabric::topology::Topology;
use std::collections::BTreeSet;

/// Says SKIPPED (or fails under IBKIT_REQUIRE_PEERS=1); always true.
pub fn skip(test: &str, why: &str) -> bool {
    if std::env::var("IBKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        panic!("peer tools missing and IBKIT_REQUIRE_PEERS=1: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    true
}

/// The peer tools and smpquery are here (else SKIPPED, or a failure
/// under IBKIT_REQUIRE_PEERS=1).
pub fn peers_with_smpquery(test: &str) -> bool {
    if let Some(why) = tests::peers::missing_tools() {
        skip(test, &why);
        return false;
    }
    if !std::path::Path::new("/usr/sbin/smpquery").exists() {
        skip(test, "infiniband-diags (smpquery) is not installed");
        return false;
    }
    true
}

/// The `Name:....value` field of smpquery's dump.
pub fn smp_field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(name))
        .map(|l| l[name.len()..].trim_start_matches(['.', ':']).trim())
}

/// Cables by GUID: (node GUID, port, peer node GUID, peer port), both ways.
pub fn cabled(t: &Topology) -> BTreeSet<(u64, u8, u64, u8)> {
    let mut s = BTreeSet::new();
    for (i, n) in t.nodes.iter().enumerate() {
        for p in 1..=n.ports {
            if let Some((m, q)) = t.peer_of(i, p) {
                s.insert((n.guid, p, t.nodes[m].guid, q));
            }
        }
    }
    s
}

/// The same from ibnetdiscover's text: node headers `Switch N "S-<guid>"` /
/// `Ca N "H-<guid>"`, then `[port]... "X-<guid>"[peer port]` lines.
pub fn discovered(text: &str) -> BTreeSet<(u64, u8, u64, u8)> {
    let guid_of = |s: &str| -> Option<u64> {
        let a = s.find("\"S-").or_else(|| s.find("\"H-"))? + 3;
        u64::from_str_radix(&s[a..a + 16], 16).ok()
    };
    let mut s = BTreeSet::new();
    let mut cur = None;
    for line in text.lines() {
        if line.starts_with("Switch") || line.starts_with("Ca") {
            cur = guid_of(line);
        } else if let (Some(me), Some(rest)) = (cur, line.strip_prefix('[')) {
            let port: u8 = rest[..rest.find(']').unwrap()].parse().unwrap();
            let Some(peer) = guid_of(line) else { continue };
            let after = &line[line.find("\"[").unwrap() + 2..];
            let pport: u8 = after[..after.find(']').unwrap()].parse().unwrap();
            s.insert((me, port, peer, pport));
        }
    }
    s
}

/// From a served fabric's state (`ibkit fabric ctl dump`): the client
/// reregistrations each cabled end port (a switch's port 0, a CA's
/// cabled ports) has been asked for so far, by (node, port).
pub fn reregistrations(dump: &serde_json::Value) -> std::collections::BTreeMap<(String, u8), u64> {
    let mut m = std::collections::BTreeMap::new();
    for n in dump["nodes"].as_array().unwrap() {
        let name = n["name"].as_str().unwrap();
        if let Some(c) = n["port0_client_reregistrations"].as_u64() {
            m.insert((name.to_string(), 0), c);
        }
        if n["kind"] != "ca" {
            continue;
        }
        for p in n["ports"].as_array().unwrap() {
            if !p["peer"].is_null() {
                let port = p["port"].as_u64().unwrap() as u8;
                let c = p["client_reregistrations"].as_u64().unwrap();
                m.insert((name.to_string(), port), c);
            }
        }
    }
    m
}

/// The ports of `now` not asked exactly `more` times more than in
/// `before` (absent there: 0), each as `node/port: before → now`.
pub fn not_asked(
    before: &std::collections::BTreeMap<(String, u8), u64>,
    now: &std::collections::BTreeMap<(String, u8), u64>,
    more: u64,
) -> Vec<String> {
    (now.iter())
        .filter(|(k, &n)| before.get(*k).copied().unwrap_or(0) + more != n)
        .map(|(k, n)| format!("{}/{}: {:?} → {n}", k.0, k.1, before.get(k)))
        .collect()
}

/// The `lft` array of a switch in ibkit's JSON (`lft[lid]` = out port,
/// 255 = none; empty where there is none).
pub fn lft(node: &serde_json::Value) -> Vec<u64> {
    node["lft"]
        .as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap()).collect())
        .unwrap_or_default()
}

/// Checks `ibroute`'s text for a switch against its LFT (see [`lft`]):
/// every line it prints is in the table, and it prints every routed LID.
pub fn check_ibroute(text: &str, lft: &[u64], what: &str) {
    let mut seen = 0;
    for line in text.lines().filter(|l| l.starts_with("0x")) {
        let l = u64::from_str_radix(&line[2..6], 16).unwrap();
        let port: u64 = line[7..10].trim().parse().unwrap();
        assert_eq!(Some(&port), lft.get(l as usize), "{what}: LID {l}");
        seen += 1;
    }
    let want = lft.iter().skip(1).filter(|&&p| p != 255).count();
    assert_eq!(seen, want, "{what}: ibroute lists every routed LID");
}

/// `f` of every LID in 1..=`lids`, on three threads (each call runs its
/// own smpquery processes, which mostly wait on the simulator), every
/// result kept.
pub fn per_lid<T: Send>(lids: u16, f: impl Fn(u16) -> Vec<T> + Sync) -> Vec<T> {
    let all: Vec<u16> = (1..=lids).collect();
    par_map(&all, |&l| f(l)).into_iter().flatten().collect()
}

/// `f` of every item, on three threads (each call runs its own client
/// processes of a simulator, which mostly start up and wait on it), the
/// results in the items' order.
pub fn par_map<I: Sync, T: Send>(items: &[I], f: impl Fn(&I) -> T + Sync) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let (f, next) = (&f, &next);
    let mut out: Vec<(usize, T)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            break out;
                        };
                        out.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a worker thread panicked"))
            .collect()
    });
    out.sort_by_key(|&(i, _)| i);
    out.into_iter().map(|(_, t)| t).collect()
}

/// A fresh simulator of `topo` (spec `spec`): ibkit's served fabric
/// (`ibkit fabric serve`, the binary `exe`) or ibsim (its files in `dir`);
/// then OpenSM (with `opensm_args`) or ibkit's SM (with `ibkit_args`) on
/// it, once it says SUBNET UP within `wait`. The simulator is returned
/// first so that it outlives the SM.
pub fn simulator_and_sm(
    exe: &std::path::Path,
    (spec, topo): (&str, &Topology),
    served: bool,
    dir: &std::path::Path,
    wait: std::time::Duration,
    opensm: Option<&[&str]>,
    ibkit_args: &[&str],
) -> (Box<dyn tests::peers::Simulator>, tests::peers::RunningSm) {
    use tests::peers::{start_ibkit_sm, start_opensm_with, Ibsim, Served, Simulator};
    let sim: Box<dyn Simulator> = if served {
        Box::new(Served::start(exe, spec, 0, &[]).unwrap())
    } else {
        Box::new(Ibsim::start_with(topo, dir, false).unwrap())
    };
    let sm = match opensm {
        Some(args) => start_opensm_with(sim.as_ref(), dir, wait, args).unwrap(),
        None => start_ibkit_sm(exe, sim.as_ref(), ibkit_args, wait).unwrap(),
    };
    (sim, sm)
}

/// Waits until `file` holds `marker`, at most `wait`; what it holds then.
pub fn wait_in(file: &std::path::Path, marker: &str, wait: std::time::Duration) -> String {
    let t = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.contains(marker) {
            return text;
        }
        assert!(
            t.elapsed() < wait,
            "{} never said {marker:?}; it holds:\n{text}",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Sends signal `sig` (`-HUP`, `-USR1`, `-TERM`) to process `pid`.
pub fn kill(sig: &str, pid: u32) {
    let st = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

/// `ibkit sm --transport ibsim ARGS` kept running on `served`, its
/// standard error piped (its log, where no file takes it).
pub fn running_sm(served: &tests::peers::Served, args: &[&std::ffi::OsStr]) -> std::process::Child {
    use tests::peers::Simulator;
    served
        .client(env!("CARGO_BIN_EXE_ibkit").as_ref())
        .args(["sm", "--transport", "ibsim"])
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The LID of `host`'s port as `ibaddr -L` there reads it (its own
/// PortInfo; `LID start N end M`, in decimal).
pub fn own_lid(sim: &dyn tests::peers::Simulator, host: &str) -> Option<u16> {
    let out = sim
        .client_at("ibaddr".as_ref(), host)
        .arg("-L")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "start")
        .nth(1)
        .and_then(|h| match h.strip_prefix("0x") {
            Some(x) => u16::from_str_radix(x, 16).ok(),
            None => h.parse().ok(),
        })
}

/// `opensm -c`'s file with a site's lines put in place of OpenSM's.
pub fn opensm_conf_with(dir: &std::path::Path, lines: &[(&str, &str)]) -> String {
    let conf = dir.join("opensm.conf");
    let st = std::process::Command::new("/usr/sbin/opensm")
        .arg("-c")
        .arg(&conf)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&conf).unwrap_or_else(|e| panic!("opensm -c: {e} {st:?}"));
    let text: String = text
        .lines()
        .map(|l| {
            let key = l.split_once(' ').map(|x| x.0);
            match lines.iter().find(|(k, _)| Some(*k) == key) {
                Some((k, v)) => format!("{k} {v}"),
                None => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&conf, text + "\n").unwrap();
    conf.to_str().unwrap().to_string()
}

/// `ibkit sm --transport umad --once --json` as a client of `sim` (on its
/// first CA): it must exit 0 with the subnet up. Its JSON and its log.
pub fn ibkit_sm_once(sim: &tests::peers::Ibsim) -> (serde_json::Value, String) {
    let out = sim
        .client(env!("CARGO_BIN_EXE_ibkit"))
        .args(["sm", "--transport", "umad", "--once", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ibkit sm: {err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["up"], true, "ibkit sm: {err}");
    (v, err)
}

/// A fresh, empty scratch directory for the test `tag` of this process
/// (what an earlier run left there removed).
pub fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ibkit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Sends SIGHUP to the process `pid`.
pub fn hup(pid: u32) {
    let ok = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill -HUP {pid}");
}

/// Polls `done` every 100 ms until it holds, at most `within`; panics
/// with `what()` after that. How long it took.
pub fn wait_until(
    within: std::time::Duration,
    mut done: impl FnMut() -> bool,
    what: impl Fn() -> String,
) -> std::time::Duration {
    let t = std::time::Instant::now();
    while !done() {
        assert!(t.elapsed() < within, "{}", what());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    t.elapsed()
}
