//! ibkit's SA answers `saquery` (infiniband-diags, a tool we did not
//! write) on Debian's ibsim: `ibkit sm` runs without `--once` as the
//! fabric's SM, claims IsSM so that ibsim hands it the SA requests, and
//! answers them on QP1 until SIGTERM, when it exits cleanly with its
//! report. saquery runs from another host through the same
//! `libumad2sim.so` preload. (libumad2sim has no RMPP and cuts every
//! datagram to 256 bytes, so a table answer reaches saquery as its first
//! MAD only, from OpenSM as from us.)

use fabric::topology::Topology;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use tests::peers::{missing_tools, Ibsim};

mod common;
use common::skip;

/// True when ibsim, libumad2sim, OpenSM and saquery are here; else the
/// test says SKIPPED (or fails, when peers are required).
fn peers_here() -> bool {
    if let Some(why) = missing_tools() {
        skip("sa_ibsim", &why);
        return false;
    }
    if !std::path::Path::new("/usr/sbin/saquery").exists() {
        skip("sa_ibsim", "infiniband-diags (saquery) is not installed");
        return false;
    }
    true
}

/// `ibkit sm` (for good) as the SM of `sim`, once it says SUBNET UP.
fn start_sm(sim: &Ibsim) -> Child {
    let mut c = sim
        .client(env!("CARGO_BIN_EXE_ibkit"))
        .args(["sm", "--json"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = c.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if l.contains("SUBNET UP") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("ibkit sm said SUBNET UP");
    c
}

/// saquery `args` from host `host`: its output and whether it succeeded.
fn saquery(sim: &Ibsim, host: &str, args: &[&str]) -> (bool, String) {
    let out = sim.client_on("saquery", host).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The `name....value` fields of saquery's dump.
fn fields(dump: &str) -> BTreeMap<String, String> {
    dump.lines()
        .filter_map(|l| {
            let l = l.trim();
            let i = l.find("..")?;
            let v = l[i..].trim_start_matches('.');
            Some((l[..i].to_string(), v.trim().to_string()))
        })
        .collect()
}

#[test]
fn saquery_is_answered_by_ibkits_sa_on_ibsim() {
    if !peers_here() {
        return;
    }
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-sa-ibsim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let mut sm = start_sm(&sim);
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let n = topo.nodes.len();
    let t0 = Instant::now();
    let mut asked = 0;

    // A NodeRecord for every LID: every node of the fabric, once.
    let mut seen = BTreeMap::new();
    for lid in 1..=n {
        let (ok, out) = saquery(&sim, host, &["NR", &lid.to_string()]);
        asked += 1;
        assert!(ok, "saquery NR {lid}: {out}");
        let f = fields(&out);
        assert_eq!(f["lid"], lid.to_string(), "{out}");
        let guid = u64::from_str_radix(f["node_guid"].trim_start_matches("0x"), 16).unwrap();
        let node = topo
            .nodes
            .iter()
            .find(|x| x.guid == guid)
            .expect("a node of the fabric");
        assert_eq!(f["NodeDescription"], node.name);
        assert_eq!(f["num_ports"], node.ports.to_string());
        assert!(seen.insert(guid, lid).is_none(), "{guid:#x} twice");
    }
    assert_eq!(seen.len(), n);
    // A LID nobody holds: no record.
    let (_, out) = saquery(&sim, host, &["NR", "999"]);
    asked += 1;
    assert!(!out.contains("NodeRecord dump"), "{out}");

    // PathRecords between every pair of CAs.
    let cas: Vec<usize> = topo
        .nodes
        .iter()
        .filter(|x| x.ports == 1)
        .map(|x| seen[&x.guid])
        .collect();
    for &a in &cas {
        for &b in &cas {
            let (ok, out) = saquery(&sim, host, &["--src-to-dst", &format!("{a}:{b}")]);
            asked += 1;
            assert!(ok, "saquery PR {a}:{b}: {out}");
            let f = fields(&out);
            assert_eq!(
                (f["slid"].as_str(), f["dlid"].as_str()),
                (a.to_string().as_str(), b.to_string().as_str()),
                "{out}"
            );
            assert_eq!(f["pkey"], "0xFFFF");
            assert_eq!(f["num_path_revers"], "0x80", "reversible");
        }
    }

    // The SA's ClassPortInfo; LinkRecords; a SwitchInfoRecord.
    let (ok, out) = saquery(&sim, host, &["-c"]);
    asked += 1;
    assert!(ok && out.contains("Class version............2"), "{out}");
    let (ok, out) = saquery(&sim, host, &["-x"]);
    asked += 1;
    assert!(ok && out.contains("LinkRecord dump"), "{out}");
    let sw = topo.nodes.iter().find(|x| x.ports > 1).unwrap();
    let (ok, out) = saquery(&sim, host, &["SWIR", &seen[&sw.guid].to_string()]);
    asked += 1;
    assert!(ok && out.contains("SwitchInfoRecord dump"), "{out}");
    // What the SA does not serve yet: refused with the MAD status.
    let (ok, out) = saquery(&sim, host, &["SR"]);
    asked += 1;
    assert!(!ok && out.contains("0x000c"), "{out}");
    eprintln!(
        "{asked} saquery runs answered in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // SIGTERM: a clean exit with the report.
    let pid = sm.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let t = Instant::now();
    let status = loop {
        if let Some(st) = sm.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "ibkit sm did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut sm.stdout.take().unwrap(), &mut out).unwrap();
    assert!(status.success(), "{status}: {out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["up"], true);
    assert!(v["sa_answered"].as_u64().unwrap() >= asked, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// saquery's fields of one record.
type Fields = BTreeMap<String, String>;

/// NodeRecords (by node GUID) and CA-to-CA PathRecords (by the GUIDs of
/// their ends) as saquery shows them, from the SM serving `sim`.
fn records(
    sim: &Ibsim,
    topo: &Topology,
    host: &str,
) -> (BTreeMap<u64, Fields>, BTreeMap<(u64, u64), Fields>) {
    let mut nodes = BTreeMap::new();
    let mut lid_of = BTreeMap::new();
    for lid in 1..=topo.nodes.len() {
        let (ok, out) = saquery(sim, host, &["NR", &lid.to_string()]);
        assert!(ok, "NR {lid}: {out}");
        let mut f = fields(&out);
        let guid = u64::from_str_radix(f["node_guid"].trim_start_matches("0x"), 16).unwrap();
        f.remove("lid");
        lid_of.insert(guid, lid);
        nodes.insert(guid, f);
    }
    let cas: Vec<u64> = topo
        .nodes
        .iter()
        .filter(|x| x.ports == 1)
        .map(|x| x.guid)
        .collect();
    let mut paths = BTreeMap::new();
    for &a in &cas {
        for &b in &cas {
            let (ok, out) = saquery(
                sim,
                host,
                &["--src-to-dst", &format!("{}:{}", lid_of[&a], lid_of[&b])],
            );
            assert!(ok, "PR: {out}");
            let mut f = fields(&out);
            f.remove("slid");
            f.remove("dlid");
            paths.insert((a, b), f);
        }
    }
    (nodes, paths)
}

/// The same fabric, the same queries, OpenSM's SA and ibkit's: every
/// NodeRecord field agrees (LIDs aside: the SMs number differently), and
/// every PathRecord field but the packet lifetime, where OpenSM answers
/// its configured constant (0x12) and ibkit the sum of the lifetimes of
/// the switches on the path, as IBA 15.2.5.16 describes the field.
#[test]
fn opensm_and_ibkit_answer_saquery_alike() {
    if !peers_here() {
        return;
    }
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let dir = std::env::temp_dir().join(format!("ibkit-sa-cmp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // OpenSM as a daemon, until its log says SUBNET UP.
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let log = dir.join("opensm.log");
    let cache = dir.join("opensm-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut osm = sim
        .client("opensm")
        .env("OSM_CACHE_DIR", &cache)
        // -d2: the log flushed after each message, so SUBNET UP can be
        // seen while OpenSM runs.
        .args(["-d2", "-f"])
        .arg(&log)
        .stdout(std::fs::File::create(dir.join("opensm.out")).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("SUBNET UP")) {
        if t.elapsed() > Duration::from_secs(30) || osm.try_wait().unwrap().is_some() {
            let _ = osm.kill();
            let out = std::fs::read_to_string(dir.join("opensm.out")).unwrap_or_default();
            panic!("OpenSM did not come up: {out}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (osm_nodes, osm_paths) = records(&sim, &topo, host);
    let _ = osm.kill();
    let _ = osm.wait();
    drop(sim);

    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let mut sm = start_sm(&sim);
    let (our_nodes, our_paths) = records(&sim, &topo, host);
    let _ = sm.kill();
    let _ = sm.wait();

    assert_eq!(our_nodes.len(), topo.nodes.len());
    assert_eq!(our_nodes, osm_nodes, "NodeRecords");
    let mut life = 0;
    for (k, ours) in &our_paths {
        let theirs = &osm_paths[k];
        for (name, v) in ours {
            if name == "pkt_life" {
                life += usize::from(v != &theirs[name]);
                continue;
            }
            assert_eq!(v, &theirs[name], "PathRecord {k:x?} {name}");
        }
    }
    eprintln!(
        "{} NodeRecords and {} PathRecords agree with OpenSM's; packet lifetime differs in {life}",
        our_nodes.len(),
        our_paths.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
