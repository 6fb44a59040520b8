//! OpenSM and infiniband-diags, unmodified, on fabrics served by
//! `ibkit fabric serve` through Debian's `libumad2sim.so`:
//!
//! - `opensm -o` with minhop, updn and ftree brings fat-tree-324,
//!   fat-tree-648, a random irregular fabric and a vSwitch fabric (every
//!   CA but the first a hypervisor with VFs) up: SUBNET UP, no ERR in its
//!   log (ftree only where the fabric is a fat tree: on the irregular one
//!   OpenSM itself refuses it);
//! - `ibnetdiscover`, `smpquery nodeinfo|portinfo|switchinfo|pkeys`,
//!   `ibroute` and `ibtracert` agree with ibkit's own dump of the fabric
//!   (nodes, cables, LIDs, port states, LFTs, paths);
//! - a cable taken down under a running OpenSM: its trap makes OpenSM
//!   sweep, and no LFT sends anything into the dead cable afterwards;
//! - ibkit's own SM (`ibkit sm --transport umad --once`) brings the same
//!   served fabrics up, and its tables are what the fabric holds.
//!
//! Needs opensm, infiniband-diags and libumad2sim0 (CI installs them);
//! elsewhere it says SKIPPED, unless IBKIT_REQUIRE_PEERS=1.

mod common;

use common::{cabled, check_ibroute, discovered, lft, skip};
use fabric::topology::Topology;
use serde_json::Value;
use smi::sm::Engine;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tests::peers::{run_opensm_on, umad2sim, Served, Simulator};

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ibkit"))
}

fn missing() -> Option<String> {
    let need = [
        ("/usr/sbin/opensm", "opensm"),
        ("/usr/sbin/ibnetdiscover", "infiniband-diags"),
    ];
    let mut gone: Vec<&str> = need
        .iter()
        .filter(|(p, _)| !Path::new(p).exists())
        .map(|(_, pkg)| *pkg)
        .collect();
    if umad2sim().is_none() {
        gone.push("libumad2sim0");
    }
    (!gone.is_empty()).then(|| format!("missing packages: {}", gone.join(", ")))
}

/// The tests of this file share the machine; the one that times OpenSM
/// takes it alone (write), the others share it (read).
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ibkit-serve-peers-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(sim: &Served, program: &str, args: &[&str]) -> String {
    let out = sim.client(program.as_ref()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn dump(sim: &Served, dir: &Path) -> Value {
    let f = dir.join("dump.json");
    sim.ctl(&format!("dump {}", f.display())).unwrap();
    serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap()
}

fn guid(n: &Value) -> u64 {
    u64::from_str_radix(n["guid"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// The dump's nodes by name.
fn by_name(d: &Value) -> BTreeMap<String, &Value> {
    d["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap().to_string(), n))
        .collect()
}

/// The out ports a packet to `dlid` takes from CA `from`, by the dump's
/// LFTs (the CA's own port 1 first); None on a drop or a loop.
fn walk(d: &Value, from: &str, dlid: u64) -> Option<Vec<u64>> {
    let nodes = by_name(d);
    let mut out = vec![1];
    let mut at = nodes[from]["ports"][0]["peer"].clone();
    for _ in 0..64 {
        let node = nodes.get(at["node"].as_str()?)?;
        if node["kind"] == "ca" {
            return (node["lid"].as_u64() == Some(dlid)
                || node["vfs"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|f| f["lid"].as_u64() == Some(dlid))))
            .then_some(out);
        }
        let port = node["lft"].as_array()?.get(dlid as usize)?.as_u64()?;
        if port == 0 || port == 255 {
            return None;
        }
        out.push(port);
        at = node["ports"][port as usize - 1]["peer"].clone();
    }
    None
}

fn opensm_once(sim: &Served, routing: Engine, dir: &Path) {
    let r = run_opensm_on(sim, routing, dir).unwrap();
    let log = std::fs::read_to_string(dir.join("opensm.log")).unwrap();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains(" ERR ")).collect();
    assert!(r.up, "OpenSM {routing:?}: no SUBNET UP\n{log}");
    assert!(errors.is_empty(), "OpenSM {routing:?}: {errors:#?}");
    assert!(r.smps > 0, "the server counted OpenSM's SMPs");
}

/// `opensm -o` (one sweep, then exit) on `sim` with `extra`, its log and
/// cache in `dir`; it must exit 0.
fn opensm_o(sim: &Served, dir: &Path, extra: &[&str]) {
    let cache = dir.join("opensm-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let out = (sim.client("opensm".as_ref()))
        .env("OSM_CACHE_DIR", &cache)
        .args(["-o", "-f"])
        .arg(dir.join("opensm.log"))
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "opensm {extra:?}");
}

/// `who` ("OpenSM" or "ibkit") brings `sim` up once on the `opensm.conf`
/// `conf` (`opensm -o -F`, `ibkit sm --once --opensm-config`), its log
/// and cache in `dir`; it must exit 0.
fn once_on_conf(sim: &Served, dir: &Path, who: &str, conf: &str) {
    if who == "OpenSM" {
        opensm_o(sim, dir, &["-F", conf]);
    } else {
        let ibkit = exe().to_str().unwrap();
        let args = [
            "sm",
            "--transport",
            "umad",
            "--once",
            "--opensm-config",
            conf,
        ];
        run(sim, ibkit, &args);
    }
}

/// infiniband-diags read back what the dump says.
fn diags_agree(sim: &Served, spec: &str, topo: &Topology, dir: &Path) {
    let d = dump(sim, dir);
    let nodes = by_name(&d);

    // Nodes and cables.
    let text = run(sim, "ibnetdiscover", &[]);
    assert_eq!(discovered(&text), cabled(topo), "{spec}: ibnetdiscover");

    // NodeInfo, PortInfo, SwitchInfo and P_Keys of a sample of nodes.
    let sample: Vec<&&Value> = nodes.values().step_by(nodes.len() / 6 + 1).collect();
    for n in sample {
        let lid = n["lid"].to_string();
        let ni = run(sim, "smpquery", &["nodeinfo", &lid]);
        assert!(
            ni.contains(&format!("Guid:{}{:#018x}\n", ".".repeat(28), guid(n))),
            "{spec}: {ni}"
        );
        let pi = run(sim, "smpquery", &["portinfo", &lid, "1"]);
        let state = match n["ports"][0]["state"].as_u64().unwrap() {
            1 => "Down",
            2 => "Initialize",
            3 => "Armed",
            4 => "Active",
            s => panic!("state {s}"),
        };
        assert!(
            pi.contains(&format!("LinkState:{}{state}\n", ".".repeat(23))),
            "{spec} {}: {pi}",
            n["name"]
        );
        if n["kind"] == "ca" {
            assert!(
                pi.contains(&format!("Lid:{}{lid}\n", ".".repeat(29))),
                "{spec}: {pi}"
            );
        } else {
            let si = run(sim, "smpquery", &["switchinfo", &lid]);
            let top = n["lft"].as_array().unwrap().len() - 1;
            assert!(
                si.contains(&format!("LinearFdbTop:{}{top}\n", ".".repeat(20))),
                "{spec}: {si}"
            );
        }
        let pk = run(sim, "smpquery", &["pkeys", &lid, "1"]);
        assert!(pk.contains("0xffff"), "{spec}: {pk}");
    }

    // Every switch's LFT, entry by entry.
    let switches: Vec<&&Value> = nodes.values().filter(|n| n["kind"] == "switch").collect();
    common::par_map(&switches, |n| {
        let lid = n["lid"].to_string();
        check_ibroute(
            &run(sim, "ibroute", &[&lid]),
            &lft(n),
            &format!("{spec}: switch {lid}"),
        )
    });

    // Paths between CA pairs, hop by hop.
    let cas: Vec<&&Value> = nodes.values().filter(|n| n["kind"] == "ca").collect();
    for (a, b) in [(0, cas.len() - 1), (1, cas.len() / 2), (cas.len() - 1, 1)] {
        let (a, b) = (cas[a], cas[b]);
        let want = walk(&d, a["name"].as_str().unwrap(), b["lid"].as_u64().unwrap())
            .unwrap_or_else(|| panic!("{spec}: the dump routes {} to {}", a["name"], b["name"]));
        let t = run(
            sim,
            "ibtracert",
            &[&a["lid"].to_string(), &b["lid"].to_string()],
        );
        let got: Vec<u64> = t
            .lines()
            .filter_map(|l| l.strip_prefix('['))
            .map(|l| l[..l.find(']').unwrap()].parse().unwrap())
            .collect();
        assert_eq!(
            got, want,
            "{spec}: ibtracert {} → {}\n{t}",
            a["name"], b["name"]
        );
        assert!(t.contains(&format!("To ca {{{:#018x}}}", guid(b))), "{t}");
    }
}

#[test]
fn opensm_and_infiniband_diags_run_on_served_fabrics() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let all = [Engine::MinHop, Engine::UpDown, Engine::FatTree];
    let cases: [(&str, usize, &[Engine]); 4] = [
        ("fat-tree-324", 0, &all),
        ("fat-tree-648", 0, &all),
        ("random:16:7", 0, &all[..2]),
        ("fat-tree-324", 2, &all),
    ];
    for (spec, vfs, engines) in cases {
        let topo = Topology::from_spec(spec).unwrap();
        for &routing in engines {
            let tag = format!("{}-{vfs}-{}", spec.replace(':', "_"), routing.name());
            let dir = scratch(&tag);
            let sim = Served::start(exe(), spec, vfs, &[]).unwrap();
            opensm_once(&sim, routing, &dir);
            if routing == Engine::MinHop {
                diags_agree(&sim, &format!("{spec} (vfs {vfs}), OpenSM"), &topo, &dir);
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[test]
fn opensm_sweeps_around_a_cable_taken_down() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let dir = scratch("linkdown");
    let sim = Served::start(exe(), "fat-tree-324", 0, &[]).unwrap();
    let log = dir.join("opensm.log");
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut osm = sim
        .client("opensm".as_ref())
        .env("OSM_CACHE_DIR", &cache)
        // -d2: flush the log after every line, so that it can be watched.
        .args(["-d", "2", "-f"])
        .arg(&log)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ups = |n: usize| -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.matches("SUBNET UP").count() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    let first = ups(1);
    let before = dump(&sim, &dir);
    // A leaf switch's uplink, which the first routing uses.
    let leaf = "S-L0-0";
    let nodes = by_name(&before);
    let up_port = nodes[leaf]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["peer"]["node"]
                .as_str()
                .is_some_and(|n| n.starts_with("S-"))
        })
        .unwrap();
    let port = up_port["port"].as_u64().unwrap();
    let spine = up_port["peer"]["node"].as_str().unwrap().to_string();
    let spine_port = up_port["peer"]["port"].as_u64().unwrap();
    let used = |d: &Value, sw: &str, p: u64| {
        by_name(d)[sw]["lft"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x.as_u64() == Some(p))
            .count()
    };
    assert!(
        used(&before, leaf, port) > 0,
        "the uplink carries routes before"
    );
    sim.ctl(&format!("link-down {leaf} {port}")).unwrap();
    let second = ups(2);
    let _ = osm.kill();
    let _ = osm.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(first && second, "OpenSM swept after the trap:\n{text}");
    assert!(text.contains("num:128"), "OpenSM got trap 128");
    let errors: Vec<&str> = text.lines().filter(|l| l.contains(" ERR ")).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let after = dump(&sim, &dir);
    assert_eq!(
        used(&after, leaf, port),
        0,
        "{leaf} routes nothing into port {port}"
    );
    assert_eq!(
        used(&after, &spine, spine_port),
        0,
        "{spine} routes nothing into port {spine_port}"
    );
    // And everything still reaches everything from the leaf's CAs.
    let nodes = by_name(&after);
    let cas: Vec<&&Value> = nodes.values().filter(|n| n["kind"] == "ca").collect();
    for a in cas.iter().step_by(37) {
        for b in cas.iter().step_by(29) {
            if a["name"] != b["name"] {
                assert!(
                    walk(
                        &after,
                        a["name"].as_str().unwrap(),
                        b["lid"].as_u64().unwrap()
                    )
                    .is_some(),
                    "{} → {} after the cable went down",
                    a["name"],
                    b["name"]
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each SM that starts as master asks every end port's clients to
/// reregister (PortInfo.ClientReregister, IBA 14.4.11) once, as its first
/// sweep sets the port, unless told not to (OpenSM's `no_clients_rereg`,
/// ibkit's `--no-clients-rereg` or the same line in the `opensm.conf` it
/// reads): OpenSM and ibkit, one after the other on one served fabric,
/// whose SMA counts the requests port by port.
#[test]
fn both_sms_ask_every_end_port_to_reregister_as_they_start_unless_told_not_to() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let dir = scratch("rereg");
    let quiet = dir.join("quiet.conf");
    std::fs::write(&quiet, "no_clients_rereg TRUE\n").unwrap();
    let quiet = quiet.to_str().unwrap();
    let sim = Served::start(exe(), "mport-ntree:4:2", 0, &[]).unwrap();
    let ibkit = exe().to_str().unwrap();
    let opensm = |extra: &[&str]| opensm_o(&sim, &dir, extra);
    let mut before = std::collections::BTreeMap::new();
    let steps: [(&str, u64, &dyn Fn()); 6] = [
        ("ibkit sm --once", 1, &|| {
            run(&sim, ibkit, &["sm", "--transport", "umad", "--once"]);
        }),
        ("ibkit sm --once --no-clients-rereg", 0, &|| {
            let a = ["sm", "--transport", "umad", "--once", "--no-clients-rereg"];
            run(&sim, ibkit, &a);
        }),
        ("opensm -o, no_clients_rereg TRUE", 0, &|| {
            opensm(&["-F", quiet])
        }),
        ("opensm -o", 1, &|| opensm(&[])),
        (
            "ibkit sm --once --opensm-config (no_clients_rereg TRUE)",
            0,
            &|| {
                let a = [
                    "sm",
                    "--transport",
                    "umad",
                    "--once",
                    "--opensm-config",
                    quiet,
                ];
                run(&sim, ibkit, &a);
            },
        ),
        ("ibkit sm --once, again", 1, &|| {
            run(&sim, ibkit, &["sm", "--transport", "umad", "--once"]);
        }),
    ];
    for (what, more, step) in steps {
        step();
        std::thread::sleep(Duration::from_millis(100));
        let now = common::reregistrations(&dump(&sim, &dir));
        assert!(now.len() >= 14, "{now:?}");
        assert_eq!(
            common::not_asked(&before, &now, more),
            Vec::<String>::new(),
            "{what}"
        );
        println!(
            "{what}: each of {} end ports asked {more} time(s) more",
            now.len()
        );
        before = now;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM's `max_wire_smps`, in one `opensm.conf` given to OpenSM (`-F`)
/// and to `ibkit sm --opensm-config`: the most SMPs either SM has in the
/// served fabric at once (the server's `peak_outstanding`, each run on a
/// fresh server whose answers wait 300 µs, 5 ms for ibkit's window of
/// 16, so that a window fills) is the
/// file's 2; without the file OpenSM keeps its default 4 and ibkit its 16,
/// and `--max-wire-smps 0` lifts ibkit's limit.
///
/// The server counts the requests of one batch it reads; when it reads
/// in the middle of an SM's burst, the window shows as two smaller
/// batches, so a count can come out low but never high. A run that
/// falls short of the window is run again, at most three times in all,
/// and the most of them is what is checked: a window one too large fails
/// at once, one too small in each of three runs.
#[test]
fn both_sms_keep_max_wire_smps_on_the_wire() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let dir = scratch("max-wire-smps");
    let conf = dir.join("opensm.conf");
    std::fs::write(&conf, "max_wire_smps 2\n").unwrap();
    let conf = conf.to_str().unwrap();
    let ibkit = exe().to_str().unwrap();
    let peak_after = |delay_us: &str, who: &str, window: u64, sm: &dyn Fn(&Served)| -> u64 {
        let mut most = 0;
        for _ in 0..3 {
            let sim =
                Served::start(exe(), "fat-tree-324", 0, &["--answer-delay-us", delay_us]).unwrap();
            let t0 = Instant::now();
            sm(&sim);
            let st = sim.stats().unwrap();
            let peak = st["peak_outstanding"].as_u64().unwrap();
            println!(
                "{who}: at most {peak} SMPs in the fabric at once ({} answered, {:.2} s)",
                st["answered"],
                t0.elapsed().as_secs_f64()
            );
            most = most.max(peak);
            if most >= window {
                break;
            }
        }
        most
    };
    let peak = |who: &str, window: u64, sm: &dyn Fn(&Served)| peak_after("300", who, window, sm);
    let opensm = |sim: &Served, extra: &[&str]| opensm_o(sim, &dir, extra);
    let ibkit_sm = |sim: &Served, extra: &[&str]| {
        let mut a = vec!["sm", "--transport", "umad", "--once"];
        a.extend_from_slice(extra);
        run(sim, ibkit, &a);
    };
    let from_file = ["--opensm-config", conf];
    assert_eq!(
        peak("OpenSM, max_wire_smps 2", 2, &|s| opensm(s, &["-F", conf])),
        2
    );
    assert_eq!(
        peak("ibkit, max_wire_smps 2", 2, &|s| ibkit_sm(s, &from_file)),
        2
    );
    assert_eq!(peak("OpenSM, its default", 4, &|s| opensm(s, &[])), 4);
    // 16 SMPs must leave the SM before the first answer comes back: 5
    // ms (with 1.5 ms, a CI run of 2026-12-07, the tests running two at
    // a time, saw 13; with 5 ms, a later one saw 15, hence the reruns).
    assert_eq!(
        peak_after("5000", "ibkit, its default", 16, &|s| ibkit_sm(s, &[])),
        16
    );
    let unlimited = peak("ibkit, --max-wire-smps 0", 17, &|s| {
        ibkit_sm(s, &["--max-wire-smps", "0"])
    });
    assert!(unlimited > 16, "{unlimited}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM's `use_optimized_slvl`, one `opensm.conf` (`qos TRUE` and the
/// option) given to both SMs on the served fabric, whose switches take
/// optimized SL-to-VL programming: `TRUE` saves each SM the same number
/// of SMPs against `FALSE` (OpenSM's default), a Set(SLtoVL) a pair of
/// ports against one a switch.
#[test]
fn both_sms_save_the_same_sl2vl_sets_with_use_optimized_slvl() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let dir = scratch("optimized-slvl");
    let mut answered = BTreeMap::new();
    for value in ["TRUE", "FALSE"] {
        let conf = dir.join(format!("opensm-{value}.conf"));
        std::fs::write(&conf, format!("qos TRUE\nuse_optimized_slvl {value}\n")).unwrap();
        let conf = conf.to_str().unwrap();
        for who in ["OpenSM", "ibkit"] {
            let sim = Served::start(exe(), "fat-tree-324", 0, &[]).unwrap();
            once_on_conf(&sim, &dir, who, conf);
            let n = sim.stats().unwrap()["answered"].as_u64().unwrap();
            println!("use_optimized_slvl {value}: {who} {n} SMPs");
            answered.insert((who, value), n);
        }
    }
    let saved = |who| answered[&(who, "FALSE")] as i64 - answered[&(who, "TRUE")] as i64;
    println!(
        "saved: OpenSM {}, ibkit {}",
        saved("OpenSM"),
        saved("ibkit")
    );
    assert!(saved("OpenSM") > 0);
    assert_eq!(saved("ibkit"), saved("OpenSM"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM's `max_wire_smps2` and `max_smps_timeout`: one `opensm.conf`
/// (a window of 2 that may grow to 6, one SMP each 1 ms without an
/// answer) given to both SMs on a served fabric that holds each answer
/// 20 ms: both grow their window past 2; ibkit's stays within 6 (as far
/// as its queue fills it), OpenSM's goes past it, since its VL15 poller
/// lets one more SMP go at every timeout even at max_wire_smps2 (its
/// `break` after the timeout is unconditional).
#[test]
fn both_sms_grow_a_stuck_window_to_max_wire_smps2() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let dir = scratch("max-wire-smps2");
    let conf = dir.join("opensm.conf");
    std::fs::write(
        &conf,
        "max_wire_smps 2\nmax_wire_smps2 6\nmax_smps_timeout 1000\n",
    )
    .unwrap();
    let conf = conf.to_str().unwrap();
    let mut peaks = Vec::new();
    for who in ["OpenSM", "ibkit"] {
        let sim =
            Served::start(exe(), "mport-ntree:4:2", 0, &["--answer-delay-us", "20000"]).unwrap();
        once_on_conf(&sim, &dir, who, conf);
        let st = sim.stats().unwrap();
        let peak = st["peak_outstanding"].as_u64().unwrap();
        println!(
            "{who}: at most {peak} SMPs in flight ({} answered)",
            st["answered"]
        );
        peaks.push(peak);
    }
    assert!(peaks[0] > 6, "OpenSM passes max_wire_smps2: {peaks:?}");
    assert!(
        peaks[1] > 2 && peaks[1] <= 6,
        "ibkit grows within it: {peaks:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGHUP applies a new `max_wire_smps` to a running `ibkit sm`: 2 at
/// bring-up, then 6 from the rewritten file, which the heavy sweep SIGHUP
/// starts fills and does not pass.
#[test]
fn sighup_applies_a_new_max_wire_smps() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let dir = scratch("max-wire-smps-hup");
    let toml = dir.join("sm.toml");
    std::fs::write(&toml, "max_wire_smps = 2\nsweep_ms = 0\n").unwrap();
    let sim = Served::start(exe(), "fat-tree-324", 0, &["--answer-delay-us", "300"]).unwrap();
    let sm = tests::peers::start_ibkit_sm(
        exe(),
        &sim,
        &["--transport", "umad", "--config", toml.to_str().unwrap()],
        Duration::from_secs(60),
    )
    .unwrap();
    let peak = || sim.stats().unwrap()["peak_outstanding"].as_u64().unwrap();
    assert_eq!(peak(), 2, "bring-up with max_wire_smps 2");
    std::fs::write(&toml, "max_wire_smps = 6\nsweep_ms = 0\n").unwrap();
    let said = sim.ctl("reload-sm").unwrap();
    assert!(said.starts_with("ok: SIGHUP"), "{said}");
    let t = Instant::now();
    while peak() < 6 {
        assert!(t.elapsed() < Duration::from_secs(20), "peak {}", peak());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(peak(), 6, "the heavy sweep keeps to the new window");
    println!(
        "SIGHUP, max_wire_smps 2 -> 6: 6 in flight {:.2?} after",
        t.elapsed()
    );
    let (clean, _) = sm.stop(Duration::from_secs(10));
    assert!(clean, "ibkit sm stopped cleanly");
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM's `sweep_on_trap FALSE` (with `sweep_interval 0`), one
/// `opensm.conf` given to OpenSM (`-F`) and to `ibkit sm
/// --opensm-config`: a leaf's uplink taken down, its trap reaches the SM,
/// and neither SM sweeps: every switch's LFT stays as it was, the dead
/// uplink still routed into. Without the file ibkit sweeps on the same
/// trap and routes around the cable.
#[test]
fn with_sweep_on_trap_off_neither_sm_sweeps_on_a_trap() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let dir = scratch("sweep-on-trap");
    let conf = dir.join("opensm.conf");
    std::fs::write(&conf, "sweep_on_trap FALSE\nsweep_interval 0\n").unwrap();
    let conf = conf.to_str().unwrap();
    let lfts = |d: &Value| -> BTreeMap<String, Value> {
        (by_name(d).into_iter())
            .filter(|(n, _)| n.starts_with("S-"))
            .map(|(n, v)| (n, v["lft"].clone()))
            .collect()
    };
    let leaf = "S-L0-0";
    let run_one = |who: &str, start: &dyn Fn(&Served) -> Box<dyn FnOnce()>| -> (usize, usize) {
        let sim = Served::start(exe(), "fat-tree-324", 0, &[]).unwrap();
        let stop = start(&sim);
        let before = dump(&sim, &dir);
        let up_port = by_name(&before)[leaf]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| {
                p["peer"]["node"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("S-"))
            })
            .unwrap()["port"]
            .as_u64()
            .unwrap();
        let used = |d: &Value| {
            by_name(d)[leaf]["lft"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x.as_u64() == Some(up_port))
                .count()
        };
        let traps = sim.stats().unwrap()["traps"].as_u64().unwrap();
        sim.ctl(&format!("link-down {leaf} {up_port}")).unwrap();
        let t0 = Instant::now();
        while sim.stats().unwrap()["traps"].as_u64().unwrap() == traps {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{who}: no trap delivered"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Time for a sweep to begin and end (each SM sweeps fat-tree-324
        // in well under a second on this fabric).
        std::thread::sleep(Duration::from_millis(2_000));
        let after = dump(&sim, &dir);
        stop();
        let changed = (lfts(&before).into_iter())
            .filter(|(n, l)| lfts(&after).get(n) != Some(l))
            .count();
        println!(
            "{who}: trap delivered; {changed} switches' LFTs changed, {} → {} routes into {leaf}/{up_port}",
            used(&before),
            used(&after)
        );
        (changed, used(&after))
    };
    let opensm = |sim: &Served| -> Box<dyn FnOnce()> {
        let log = dir.join("opensm.log");
        let _ = std::fs::remove_file(&log);
        let cache = dir.join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let mut osm = sim
            .client("opensm".as_ref())
            .env("OSM_CACHE_DIR", &cache)
            .args(["-d", "2", "-F", conf, "-f"])
            .arg(&log)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("SUBNET UP")
        {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "OpenSM never came up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let log2 = log.clone();
        Box::new(move || {
            let _ = osm.kill();
            let _ = osm.wait();
            let text = std::fs::read_to_string(&log2).unwrap_or_default();
            assert!(text.contains("num:128"), "OpenSM got trap 128");
        })
    };
    let ibkit = |extra: &[&str]| {
        let mut args = vec!["--transport".to_string(), "umad".to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        move |sim: &Served| -> Box<dyn FnOnce()> {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut w =
                tests::peers::WatchedSm::spawn(sim.client(exe().as_os_str()), &args).unwrap();
            w.wait_for("SUBNET UP", Duration::from_secs(60)).unwrap();
            Box::new(move || {
                let (clean, lines) = w.stop(Duration::from_secs(10));
                assert!(clean);
                assert!(
                    lines.iter().any(|(_, l)| l.contains("trap Some(128)")),
                    "ibkit got trap 128"
                );
            })
        }
    };
    let theirs = run_one("OpenSM, sweep_on_trap FALSE", &opensm);
    let ours = run_one(
        "ibkit, sweep_on_trap FALSE",
        &ibkit(&["--opensm-config", conf]),
    );
    let default = run_one("ibkit, by default", &ibkit(&[]));
    assert_eq!(theirs.0, 0, "OpenSM changed no LFT");
    assert!(theirs.1 > 0);
    assert_eq!(ours.0, 0, "ibkit changed no LFT, as OpenSM");
    assert!(ours.1 > 0);
    assert!(
        default.0 > 0 && default.1 == 0,
        "by default ibkit routes around it: {default:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ibkit_sm_runs_on_served_fabrics() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    for (spec, vfs) in [
        ("fat-tree-324", 0),
        ("random:16:7", 0),
        ("mport-ntree:4:2", 2),
    ] {
        let topo = Topology::from_spec(spec).unwrap();
        let dir = scratch(&format!("ibkit-{}", spec.replace(':', "_")));
        let sim = Served::start(exe(), spec, vfs, &[]).unwrap();
        let out = run(
            &sim,
            exe().to_str().unwrap(),
            &["sm", "--transport", "umad", "--once", "--json"],
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["up"], true, "{spec}");
        assert_eq!(v["nodes"], topo.nodes.len(), "{spec}");
        let d = dump(&sim, &dir);
        let nodes = by_name(&d);
        // The SM's tables are the fabric's, switch by switch.
        let by_guid: BTreeMap<u64, &&Value> = nodes.values().map(|n| (guid(n), n)).collect();
        for n in v["table"].as_array().unwrap() {
            let g = u64::from_str_radix(n["guid"].as_str().unwrap().trim_start_matches("0x"), 16)
                .unwrap();
            let f = by_guid[&g];
            assert_eq!(n["lid"], f["lid"], "{spec}: LID of {}", f["name"]);
            if n["switch"] == true {
                let mine = lft(n);
                let held = lft(f);
                let k = mine.len().max(held.len());
                let at = |t: &Vec<u64>, i: usize| t.get(i).copied().unwrap_or(255);
                for i in 1..k {
                    assert_eq!(at(&mine, i), at(&held, i), "{spec}: {} LID {i}", f["name"]);
                }
            }
        }
        // With VFs, every VF has a LID of its own (prepopulated) and
        // every switch routes it to the VF's hypervisor.
        let vf_lids: Vec<u64> = nodes
            .values()
            .filter_map(|n| n["vfs"].as_array())
            .flatten()
            .map(|f| f["lid"].as_u64().unwrap())
            .collect();
        assert_eq!(vf_lids.len(), vfs * (topo.cas() - 1), "{spec}: VFs");
        assert!(
            vf_lids.iter().all(|&l| l != 0),
            "{spec}: VF LIDs {vf_lids:?}"
        );
        let lids = v["lids"].as_u64().unwrap() as usize;
        assert_eq!(lids, topo.nodes.len() + vf_lids.len(), "{spec}: LIDs");
        let first_ca = nodes
            .values()
            .find(|n| n["kind"] == "ca" && n["vfs"].is_null())
            .unwrap();
        for lid in &vf_lids {
            assert!(
                walk(&d, first_ca["name"].as_str().unwrap(), *lid).is_some(),
                "{spec}: VF LID {lid} is routed"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn answers_held_longer_slow_opensm_down_by_about_that_much() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _alone = MACHINE.write().unwrap_or_else(|e| e.into_inner());
    // A timing measurement on a shared 2-core machine: one more try when
    // the first is thrown off by something else running (it happened
    // twice in full local runs, never alone); the same claims must hold.
    let first = held_measurement();
    if let Err(e) = first {
        eprintln!("first measurement off ({e}); measuring again");
        if let Err(e) = held_measurement() {
            panic!("{e}");
        }
    }
}

/// `bench ibsim-compat --sensitivity 0,300` and what it must show.
fn held_measurement() -> Result<(), String> {
    let out = std::process::Command::new(exe())
        .args(["bench", "ibsim-compat", "--topology", "mport-ntree:4:2"])
        .args(["--runs", "3", "--sensitivity", "0,300", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let held = v["held"].as_array().unwrap();
    assert_eq!(held.len(), 2);
    // The fastest of the runs: a run slowed by something else on the
    // machine says nothing about the server.
    let least = |h: &Value, k: &str| {
        h[k].as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .fold(f64::INFINITY, f64::min)
    };
    let median = |h: &Value, k: &str| {
        let mut x: Vec<f64> = h[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    let (t0, t300) = (least(&held[0], "to_up_ms"), least(&held[1], "to_up_ms"));
    let batches = median(&held[0], "batches");
    let check = |ok: bool, why: String| if ok { Ok(()) } else { Err(why) };
    // OpenSM sends a few hundred SMPs here, a few at a time: every batch
    // waiting 300 µs more costs it tens of milliseconds.
    check(batches >= 50.0, format!("{v}"))?;
    check(
        t300 > t0 + batches * 300e-3 * 0.3,
        format!("300 µs more per batch over {batches} batches: {t0} ms → {t300} ms"),
    )?;
    check(
        median(&held[0], "fabric_us_per_batch") > 0.0,
        format!("{v}"),
    )?;
    check(v["slope_ms_per_us"].as_f64().unwrap() > 0.0, format!("{v}"))?;
    // Above 1 is possible (the spinning server takes CPU OpenSM's threads
    // want; one run gave 1.76); far above means the units are wrong.
    let share = v["critical_share"].as_f64().unwrap();
    check(share > 0.3 && share < 3.0, format!("{v}"))
}

/// Through umad on a fabric that loses every SMP, `ibkit sm --once` does
/// not call the subnet up: after its rounds of retries it exits non-zero
/// and says what went unanswered. (It once printed "subnet up: 1 nodes"
/// and exited 0.)
#[test]
fn ibkit_sm_on_a_fabric_that_answers_nothing_says_so() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let sim = Served::start(exe(), "mport-ntree:4:2", 0, &["--loss", "1"]).unwrap();
    let out = sim
        .client(exe().as_os_str())
        .args(["sm", "--transport", "umad", "--once"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("subnet up"));
    assert!(
        err.lines()
            .last()
            .is_some_and(|l| l.starts_with("ibkit: ") && l.contains("went unanswered")),
        "{err}"
    );
}

/// An SM whose own cable is down when it starts does not say SUBNET UP
/// or READY=1 for a subnet of itself alone (as OpenSM says "SM port is
/// down" and waits); when the cable comes back it brings the whole
/// fabric up and says both then. With `--once` it stops at once, saying
/// why, exit 2.
#[test]
fn ibkit_sm_waits_for_its_own_port() {
    use std::os::unix::net::UnixDatagram;
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let sim = Served::start(exe(), spec, 0, &[]).unwrap();
    // The first CA, where the SM runs.
    let me = (0..topo.nodes.len())
        .find(|&n| topo.nodes[n].kind == mad_core::attr::NodeType::ChannelAdapter)
        .unwrap();
    let (sw, port) = topo.peer_of(me, 1).unwrap();
    let cable = format!("{} {port}", topo.nodes[sw].name);
    let host = topo.nodes[me].name.clone();
    assert!(sim.control(&format!("link-down {cable}")).unwrap().is_ok());

    let once = sim
        .client_at(exe().as_os_str(), &host)
        .args(["sm", "--transport", "umad", "--once"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&once.stderr);
    assert_eq!(once.status.code(), Some(2), "{err}");
    assert!(
        err.lines()
            .last()
            .is_some_and(|l| l.starts_with("ibkit: ") && l.contains("own port is down")),
        "{err}"
    );

    let dir = scratch("own-port");
    let sock = dir.join("notify");
    let _ = std::fs::remove_file(&sock);
    let notes = UnixDatagram::bind(&sock).unwrap();
    notes
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // systemd is told READY=1 at the latest 6 s after the start (60 s
    // unless the configuration says otherwise).
    let config = dir.join("sm.toml");
    std::fs::write(&config, "ready_timeout_s = 6\n").unwrap();
    let mut cmd = sim.client_at(exe().as_os_str(), &host);
    cmd.env("NOTIFY_SOCKET", &sock);
    let config = config.to_str().unwrap();
    let mut sm = tests::peers::WatchedSm::spawn(
        cmd,
        &[
            "--transport",
            "umad",
            "--sweep-ms",
            "500",
            "--config",
            config,
        ],
    )
    .unwrap();
    let started = Instant::now();
    // What systemd is told until `until`.
    let read = |until: Instant| {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < until {
            if let Ok(n) = notes.recv(&mut buf) {
                got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
        got
    };
    let before = read(Instant::now() + Duration::from_secs(4));
    assert!(
        before.iter().all(|n| !n.contains("READY=1")),
        "READY=1 with the SM's port down: {before:?}"
    );
    sm.wait_for("SM port is down", Duration::from_secs(1))
        .expect("it says its port is down");
    assert!(
        !sm.seen.iter().any(|(_, l)| l.contains("SUBNET UP")),
        "SUBNET UP with the SM's port down"
    );
    // At the cap, READY=1 all the same, saying why.
    let capped = read(started + Duration::from_secs(9));
    let ready = capped
        .iter()
        .find(|n| n.contains("READY=1"))
        .unwrap_or_else(|| panic!("no READY=1 9 s after the start: {capped:?}"));
    assert!(
        ready.contains("subnet not up after 6 s: still sweeping"),
        "{ready}"
    );
    assert!(!sm.seen.iter().any(|(_, l)| l.contains("SUBNET UP")));
    assert!(sim.control(&format!("link-up {cable}")).unwrap().is_ok());
    sm.wait_for("SUBNET UP", Duration::from_secs(20))
        .expect("SUBNET UP once its port is back");
    let after = read(Instant::now() + Duration::from_secs(1));
    let nodes = topo.nodes.len();
    let up = after
        .iter()
        .find(|n| n.contains(&format!("master: subnet up, {nodes} nodes")))
        .unwrap_or_else(|| panic!("no status of the subnet up: {after:?}"));
    assert!(!up.contains("READY=1"), "READY=1 is said once: {up}");
    println!("ibkit sm with its own port down: --once exits 2 ({}); running, no READY=1 or SUBNET UP for 4 s, {ready:?} at the 6 s cap (ready_timeout_s), then, the cable back, {up:?}", err.lines().last().unwrap_or(""));
    let (clean, _) = sm.stop(Duration::from_secs(10));
    assert!(clean);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Errors that say what is wrong: a port the CA lacks is named as such
/// (not "no InfiniBand device"), and with no simulator behind libumad2sim
/// `ibkit sm` says so at once instead of waiting for it forever.
#[test]
fn ibkit_sm_names_a_missing_port_and_a_missing_simulator() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let sim = Served::start(exe(), "mport-ntree:4:2", 0, &[]).unwrap();
    let out = sim
        .client(exe().as_os_str())
        .args(["sm", "--transport", "umad", "--once", "--port", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("has no port 2 (its ports are 1..=1)"), "{err}");
    let t0 = std::time::Instant::now();
    let out = sim
        .client(exe().as_os_str())
        .env("IBSIM_SOCKNAME", "ibkit-nobody-serves-this")
        .args(["sm", "--transport", "umad", "--once"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no simulator serves @ibkit-nobody-serves-this:ctl"),
        "{err}"
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
}

/// OpenSM attached at a host that is not the fabric's first CA finds no
/// other SM: only a port whose client says it runs an SM claims IsSM, as
/// on ibsim. Before 2026-11-28 the first CA claimed it for an SM that was
/// not there, and OpenSM's SMInfo query to it logged "ERR 2F19:
/// Unexpected SM port GUID in response".
#[test]
fn opensm_elsewhere_finds_no_phantom_sm() {
    if let Some(why) = missing() {
        skip("serve_peers", &why);
        return;
    }
    let _shared = shared();
    let dir = scratch("phantom");
    let sim = Served::start(exe(), "mport-ntree:4:2", 0, &[]).unwrap();
    let osm = tests::peers::start_opensm_cmd(
        sim.client_on("opensm", "H-7"),
        &dir,
        Duration::from_secs(20),
        &[],
    )
    .unwrap();
    // Its first sweep is over at SUBNET UP; a moment for anything late.
    std::thread::sleep(Duration::from_millis(500));
    let seen = tests::peers::sminfo(&sim, "H-1", &[]);
    let (_, _) = osm.stop(Duration::from_secs(2));
    let text = std::fs::read_to_string(dir.join("opensm.log")).unwrap();
    let errors: Vec<&str> = text.lines().filter(|l| l.contains(" ERR ")).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(seen.unwrap().state, 3, "OpenSM at H-7 is the master");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The SL of the PathRecord the running SM's SA gives from host `a` to
/// host `b`, asked by `ibkit sa path` attached at `a`.
fn path_sl(sim: &Served, a: &str, b: &str) -> u64 {
    let out = (sim.client_at(exe().as_os_str(), a))
        .args([
            "sa",
            "--transport",
            "ibsim",
            "--sim-host",
            a,
            "--json",
            "path",
            a,
            b,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ibkit sa path {a} {b}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["records"][0]["sl"].as_u64().expect("one PathRecord")
}

#[test]
fn both_sms_layer_a_torus_by_lash_alike_down_to_every_paths_sl() {
    // OpenSM's `-R lash -Q` and ibkit's `--routing lash --qos` on the
    // same served torus, one after the other: the same layers before and
    // after OpenSM's balancing (its log's "Lanes in layer" lines, ibkit's
    // "lash:" line), the same tables route for route, and the same SL in
    // the PathRecord of every pair of hosts, with the layers from SL 0
    // and from SL 2 (`lash_start_vl`).
    if let Some(why) = missing() {
        if skip("lash", &why) {
            return;
        }
    }
    let _m = shared();
    let dir = scratch("lash");
    let sim = Served::start(exe(), "torus:4:4:1", 0, &[]).unwrap();
    let wait = Duration::from_secs(30);
    let sls = |sim: &Served| -> BTreeMap<(String, String), u64> {
        let hosts: Vec<String> = (0..4)
            .flat_map(|y| (0..4).map(move |x| format!("H-{x}-{y}-0")))
            .collect();
        let mut got = BTreeMap::new();
        for (i, a) in hosts.iter().enumerate() {
            for b in &hosts[i + 1..] {
                got.insert((a.clone(), b.clone()), path_sl(sim, a, b));
            }
        }
        got
    };
    let routes = |d: &Value| -> BTreeMap<(String, String), u64> {
        let nodes = by_name(d);
        let mut r = BTreeMap::new();
        for (name, n) in &nodes {
            if n["kind"] != "switch" {
                continue;
            }
            for (dest, m) in &nodes {
                if let Some(lid) = m["lid"].as_u64().filter(|&l| l != 0) {
                    r.insert(
                        (name.clone(), dest.clone()),
                        n["lft"][lid as usize].as_u64().unwrap(),
                    );
                }
            }
        }
        r
    };
    // Layers from SL 0, then (lash_start_vl) from SL 2.
    for start in [0u64, 2] {
        let first = start.to_string();
        let (mut osm_args, mut our_args) =
            (vec!["-R", "lash", "-Q"], vec!["--routing", "lash", "--qos"]);
        if start > 0 {
            osm_args.extend(["--lash_start_vl", &first]);
            our_args.extend(["--lash-start-vl", &first]);
        }
        let osm = tests::peers::start_opensm_with(&sim, &dir, wait, &osm_args).unwrap();
        let osm_sls = sls(&sim);
        let osm_routes = routes(&dump(&sim, &dir));
        osm.stop(Duration::from_secs(10));
        let log = std::fs::read_to_string(dir.join("opensm.log")).unwrap();
        let lanes: Vec<u64> = (log.lines())
            .filter_map(|l| l.split("Lanes in layer ").nth(1))
            .filter_map(|l| l.split(": ").nth(1)?.trim().parse().ok())
            .collect();
        // Before balancing, then after.
        assert_eq!(lanes, [192, 48, 122, 118], "OpenSM's log: {lanes:?}");
        let mut ibkit =
            tests::peers::WatchedSm::spawn(sim.client(exe().as_os_str()), &our_args).unwrap();
        ibkit.wait_for("SUBNET UP", wait).unwrap();
        let ibkit_sls = sls(&sim);
        let ibkit_routes = routes(&dump(&sim, &dir));
        let (_, lines) = ibkit.stop(Duration::from_secs(5));
        let said: Vec<&str> = lines.iter().map(|l| l.1.as_str()).collect();
        let said = said.join("\n");
        assert!(
            said.contains("lash: 2 layer(s), pairs of switches in each: [122, 118]"),
            "{said}"
        );
        assert_eq!(osm_sls.len(), 120);
        let used: Vec<u64> = osm_sls
            .values()
            .copied()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(
            used,
            [start, start + 1],
            "both layers in use from SL {start}"
        );
        let unlike: Vec<_> = (osm_sls.iter())
            .filter(|(k, v)| ibkit_sls.get(*k) != Some(v))
            .collect();
        assert!(
            unlike.is_empty(),
            "SLs from {start} unlike OpenSM's: {unlike:?}"
        );
        assert_eq!(osm_routes.len(), 16 * 32);
        let unlike: Vec<_> = (osm_routes.iter())
            .filter(|(k, v)| ibkit_routes.get(*k) != Some(v))
            .collect();
        assert!(unlike.is_empty(), "routes unlike OpenSM's: {unlike:?}");
    }
}
