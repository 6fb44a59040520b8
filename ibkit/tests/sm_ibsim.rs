//! ibkit's SM on a real MAD stack: `ibkit sm --transport umad --once` brings
//! fabrics served by Debian's ibsim up through the `libumad2sim.so` preload,
//! and then tools we did not write — infiniband-diags under the same
//! preload — read back what it set: `ibnetdiscover` finds the same nodes and
//! cables, `smpquery portinfo` the LIDs and Active states, `ibroute` the
//! same LFTs on every switch, and `ibtracert` a path between CAs. OpenSM on
//! the same fabric is measured beside it: ibkit must send fewer SMPs and not
//! be slower. Needs ibsim-utils, libumad2sim0, infiniband-diags and opensm
//! (CI installs them); elsewhere it says SKIPPED, unless
//! IBKIT_REQUIRE_PEERS=1.

use fabric::topology::Topology;
use smi::sm::Engine;
use std::collections::BTreeMap;
use tests::peers::{missing_tools, run_opensm, Ibsim, Served, Simulator};

mod common;
use common::{cabled, check_ibroute, discovered, lft, opensm_conf_with, own_lid, skip, smp_field};
use std::path::Path;

fn run(sim: &Ibsim, program: &str, args: &[&str]) -> String {
    let out = sim.client(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The peer tools and infiniband-diags' `tools` are here; else the test
/// `test` says SKIPPED (or fails, under IBKIT_REQUIRE_PEERS=1).
fn diags_here(test: &str, tools: &[&str]) -> bool {
    if let Some(why) = missing_tools() {
        skip(test, &why);
        return false;
    }
    if !tools
        .iter()
        .all(|t| Path::new("/usr/sbin").join(t).exists())
    {
        skip(test, "infiniband-diags is not installed");
        return false;
    }
    true
}

#[test]
fn ibkit_sm_on_ibsim_is_read_back_by_infiniband_diags() {
    if !diags_here("sm_ibsim", &["ibnetdiscover"]) {
        return;
    }
    let exe = env!("CARGO_BIN_EXE_ibkit");
    for spec in ["mport-ntree:8:1", "mport-ntree:4:2", "fat-tree-324"] {
        let topo = Topology::from_spec(spec).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "ibkit-sm-ibsim-{}-{}",
            std::process::id(),
            spec.replace(':', "_")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let sim = Ibsim::start(&topo, &dir).unwrap();
        let out = run(&sim, exe, &["sm", "--once", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["up"], true, "{spec}");
        assert_eq!(v["nodes"], topo.nodes.len(), "{spec}");
        let ibkit_smps = v["smps"].as_u64().unwrap();
        let ibkit_ms = v["up_ms"].as_f64().unwrap();
        assert_eq!(
            sim.replies(),
            ibkit_smps,
            "{spec}: ibsim answered every SMP"
        );

        // Nodes and cables as ibnetdiscover sees them.
        let text = run(&sim, "ibnetdiscover", &[]);
        assert_eq!(discovered(&text), cabled(&topo), "{spec}");

        // LIDs, states and forwarding tables as the SM set them.
        let table = v["table"].as_array().unwrap();
        let mut by_lid = BTreeMap::new();
        for n in table {
            by_lid.insert(n["lid"].as_u64().unwrap(), n);
        }
        for n in table.iter().filter(|n| n["switch"] == false).take(4) {
            let lid = n["lid"].to_string();
            let pi = run(&sim, "smpquery", &["portinfo", &lid, "1"]);
            assert!(
                pi.contains(&format!("Lid:{}{lid}\n", ".".repeat(29))),
                "{pi}"
            );
            assert!(
                pi.contains("LinkState:.......................Active"),
                "{pi}"
            );
        }
        for n in table.iter().filter(|n| n["switch"] == true) {
            let lid = n["lid"].to_string();
            let lft = lft(n);
            check_ibroute(
                &run(&sim, "ibroute", &[&lid]),
                &lft,
                &format!("{spec}: switch {lid}"),
            );
        }
        // Paths between pairs of CAs, each ending at the CA asked for.
        let cas: Vec<String> = table
            .iter()
            .filter(|n| n["switch"] == false)
            .map(|n| n["lid"].to_string())
            .collect();
        let last = cas.len() - 1;
        for (a, b) in [(0, last), (last, 0), (1, cas.len() / 2)] {
            let t = run(&sim, "ibtracert", &[&cas[a], &cas[b]]);
            assert!(t.contains("To ca"), "{t}");
            assert!(
                t.contains(&format!(" lid {}-{} ", cas[b], cas[b])),
                "{spec}: {t}"
            );
        }
        drop(sim);

        // OpenSM on the same fabric.
        let o = run_opensm(&topo, Engine::MinHop, &dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        eprintln!(
            "{spec}: OpenSM {} SMPs, {:.1} ms to SUBNET UP; ibkit {} SMPs, {:.1} ms",
            o.smps, o.to_up_ms, ibkit_smps, ibkit_ms
        );
        assert!(o.up);
        assert!(ibkit_smps < o.smps, "{spec}: {ibkit_smps} ≥ {}", o.smps);
        assert!(
            ibkit_ms <= o.to_up_ms * 1.2 + 5.0,
            "{spec}: {ibkit_ms} ms vs OpenSM {} ms",
            o.to_up_ms
        );
    }
}

/// `ibkit sm --guid` (OpenSM's `-g`) runs on the port with that GUID
/// among the CAs libibumad lists (through libumad2sim, as OpenSM does); a
/// GUID no port has is refused with the ones there are (exit 2); on the
/// simulator's socket, which attaches by node name, a GUID other than the
/// node's is refused too; --guid with --ca is a usage error.
#[test]
fn the_sm_runs_on_the_port_its_guid_names() {
    if let Some(why) = missing_tools() {
        skip("sm_ibsim", &why);
        return;
    }
    let exe = env!("CARGO_BIN_EXE_ibkit");
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-sm-guid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim = Ibsim::start(&topo, &dir).unwrap();
    // The CA the client attaches at: ibsim's first, its port 1.
    let first = topo.nodes.iter().find(|n| n.ports == 1).unwrap();
    let guid = format!("{:#018x}", first.guid + 1);
    for transport in ["umad", "ibsim"] {
        let out = run(
            &sim,
            exe,
            &[
                "sm",
                "--once",
                "--json",
                "--transport",
                transport,
                "--guid",
                &guid,
            ],
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["up"], true, "{transport}");
        assert_eq!(v["nodes"], topo.nodes.len(), "{transport}");
    }
    for (transport, says) in [
        ("umad", "no port has GUID 0x0000000000001234"),
        ("ibsim", "--guid 0x0000000000001234: the simulator attached"),
    ] {
        let wrong = sim
            .client(exe)
            .args(["sm", "--once", "--transport", transport, "-g", "0x1234"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&wrong.stderr);
        assert_eq!(wrong.status.code(), Some(2), "{transport}: {err}");
        assert_eq!(err.lines().count(), 1, "{transport}: {err}");
        assert!(
            err.contains(says) && err.contains(&guid[2..]),
            "{transport}: {err}"
        );
    }
    let both = sim
        .client(exe)
        .args(["sm", "--once", "--guid", &guid, "--ca", "ibsim0"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On `sim`, with its SM `sm` up: `ibportstate` from `tool` moves
/// `spoiled`'s LID; a SIGHUP to the SM must give it back. The SMPs the
/// simulator answered from the signal until the SM is quiet again.
fn lid_given_back_on_sighup(
    sim: &dyn Simulator,
    sm: &tests::peers::RunningSm,
    spoiled: &str,
    tool: &str,
    what: &str,
) -> u64 {
    use std::time::{Duration, Instant};
    let lid = own_lid(sim, spoiled).expect("a LID");
    let moved = lid + 0x100;
    let out = sim
        .client_at("ibportstate".as_ref(), tool)
        .args([&lid.to_string(), "1", "lid", &format!("{moved:#x}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{what}: {out:?}");
    assert_eq!(
        own_lid(sim, spoiled),
        Some(moved),
        "{what}: ibportstate moved it"
    );
    // Without traps or PortStateChange, nothing sets it back by itself.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        own_lid(sim, spoiled),
        Some(moved),
        "{what}: nothing moved it back"
    );
    let before = sim.answered().expect("the simulator counts SMPs");
    let st = std::process::Command::new("kill")
        .args(["-HUP", &sm.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let t = Instant::now();
    while own_lid(sim, spoiled) != Some(lid) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what}: the LID was not given back after SIGHUP"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Until the SM is quiet again.
    let mut last = sim.answered().unwrap();
    loop {
        std::thread::sleep(Duration::from_millis(700));
        let now = sim.answered().unwrap();
        if now == last {
            break;
        }
        last = now;
    }
    let smps = last - before;
    eprintln!(
        "{what}: SIGHUP gave LID {lid} back (ibportstate had moved it to {moved}): {smps} SMPs"
    );
    smps
}

/// OpenSM starts a heavy sweep on SIGHUP, and so does ibkit's SM: a host's
/// LID that infiniband-diags' `ibportstate … lid` changed (no trap, no
/// PortStateChange: a light sweep finds nothing) is given back after a
/// SIGHUP by OpenSM on ibsim and by ibkit's SM on ibsim and on ibkit's
/// served fabric; ibkit's sweep sends fewer SMPs than OpenSM's.
#[test]
fn sighup_starts_a_heavy_sweep_that_gives_back_a_lid_ibportstate_changed() {
    if !diags_here("sighup heavy sweep", &["ibportstate", "ibaddr"]) {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let cas: Vec<String> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.name.clone())
        .collect();
    let (spoiled, tool) = (&cas[2], &cas[3]);
    let wait = std::time::Duration::from_secs(30);
    let dir = std::env::temp_dir().join(format!("ibkit-sighup-{}", std::process::id()));
    let mut counts = BTreeMap::new();
    for who in ["OpenSM", "ibkit"] {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sim = Ibsim::start(&topo, &dir).unwrap();
        let sm = match who {
            "OpenSM" => tests::peers::start_opensm(&sim, &dir, wait),
            _ => tests::peers::start_ibkit_sm(exe, &sim, &["--transport", "ibsim"], wait),
        }
        .unwrap();
        let what = format!("{who} on ibsim's {spec}");
        counts.insert(
            who,
            lid_given_back_on_sighup(&sim, &sm, spoiled, tool, &what),
        );
        let (clean, _) = sm.stop(std::time::Duration::from_secs(10));
        assert!(clean || who == "OpenSM", "{who} did not exit cleanly");
    }
    let served = Served::start(exe, spec, 0, &[]).unwrap();
    let sm = tests::peers::start_ibkit_sm(exe, &served, &["--transport", "ibsim"], wait).unwrap();
    let what = format!("ibkit on the served {spec}");
    let on_served = lid_given_back_on_sighup(&served, &sm, spoiled, tool, &what);
    let (clean, _) = sm.stop(std::time::Duration::from_secs(10));
    assert!(clean, "ibkit did not exit cleanly");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        counts["ibkit"] < counts["OpenSM"],
        "a SIGHUP's sweep: ibkit {} SMPs, OpenSM {}",
        counts["ibkit"],
        counts["OpenSM"]
    );
    assert!(
        on_served < counts["OpenSM"],
        "a SIGHUP's sweep on the served fabric: ibkit {on_served} SMPs, OpenSM {} on ibsim",
        counts["OpenSM"]
    );
}

/// The same `opensm.conf` (OpenSM's defaults from `opensm -c`, then a
/// site's `sm_priority 7` and `lmc 1`) given to `opensm -F` and to `ibkit
/// sm --opensm-config` on ibsim: `sminfo` reads priority 7 from either
/// SM, and `smpquery portinfo` LMC 1 on every CA port, the LIDs aligned.
#[test]
fn opensm_and_ibkit_apply_the_same_opensm_conf() {
    if !diags_here("opensm.conf", &["sminfo"]) {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-osmconf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // ibkit logs to the test's pipe, OpenSM to its -f file.
    let conf = opensm_conf_with(
        &dir,
        &[("sm_priority", "7"), ("lmc", "1"), ("log_file", "(null)")],
    );
    let hosts: Vec<String> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.name.clone())
        .collect();
    for who in ["OpenSM", "ibkit"] {
        let sim = Ibsim::start(&topo, &dir).unwrap();
        let sm = with_opensm_conf(who, exe, &sim, &dir, &conf);
        let seen = tests::peers::sminfo(&sim, &hosts[3], &[]).unwrap();
        assert_eq!(seen.priority, 7, "{who}: sminfo");
        for h in &hosts {
            let out = sim
                .client_on("smpquery", h)
                .args(["-D", "portinfo", "0", "1"])
                .output()
                .unwrap();
            let pi = String::from_utf8_lossy(&out.stdout);
            let field = |name: &str| -> u64 {
                let v = smp_field(&pi, name).unwrap_or_else(|| panic!("{name}: {pi}"));
                v.parse().unwrap_or_else(|_| panic!("{name} {v:?}"))
            };
            assert_eq!(field("LMC:"), 1, "{who}: {h}\n{pi}");
            assert_eq!(field("Lid:") % 2, 0, "{who}: {h}: an aligned LID\n{pi}");
        }
        eprintln!(
            "{who}: sminfo priority 7, LMC 1 on all {} CA ports",
            hosts.len()
        );
        let (clean, _) = sm.stop(std::time::Duration::from_secs(10));
        assert!(clean || who == "OpenSM", "{who}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `who` ("OpenSM" or ibkit) started on `sim` with the `opensm.conf` at
/// `conf` (`opensm -F`, `ibkit sm --opensm-config`).
fn with_opensm_conf(
    who: &str,
    exe: &Path,
    sim: &dyn Simulator,
    dir: &Path,
    conf: &str,
) -> tests::peers::RunningSm {
    let wait = std::time::Duration::from_secs(30);
    match who {
        "OpenSM" => tests::peers::start_opensm_with(sim, dir, wait, &["-F", conf]),
        _ => tests::peers::start_ibkit_sm(
            exe,
            sim,
            &["--transport", "ibsim", "--opensm-config", conf],
            wait,
        ),
    }
    .unwrap_or_else(|e| panic!("{who}: {e}"))
}

/// The same `opensm.conf` with `m_key`, `m_key_protection_level 1` and
/// `m_key_lease_period 60` given to OpenSM and to ibkit's SM on ibkit's
/// served fabric: `smpquery -K -y KEY portinfo` reads that key, protect
/// bits and lease on every end port (a CA's, a switch's port 0) from
/// either SM; and, the served fabric checking the key (IBA 14.2.4), under
/// either SM a host without the key reads the M_Key as 0 and `ibportstate
/// … lid` cannot move another host's LID. (Not on ibsim: its PortInfo
/// keeps neither the M_Key nor the protect bits nor the lease a Set
/// writes, and checks no key.)
#[test]
fn opensm_and_ibkit_protect_every_end_port_with_the_same_m_key() {
    if !diags_here("m_key", &["ibportstate", "smpquery"]) {
        return;
    }
    const KEY: &str = "0x5ec2e7ed00000001";
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-mkey-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = opensm_conf_with(
        &dir,
        &[
            ("m_key", KEY),
            ("m_key_protection_level", "1"),
            ("m_key_lease_period", "60"),
            ("log_file", "(null)"),
        ],
    );
    let cas: Vec<String> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.name.clone())
        .collect();
    let (victim, tool) = (&cas[2], &cas[3]);
    for who in ["OpenSM", "ibkit"] {
        let sim = Served::start(exe, spec, 0, &[]).unwrap();
        let on = "the served fabric";
        let sm = with_opensm_conf(who, exe, &sim, &dir, &conf);
        let portinfo = |lid: u16, key: Option<&str>| {
            let mut c = sim.client_at("smpquery".as_ref(), tool);
            c.arg("-K");
            if let Some(k) = key {
                c.args(["-y", k]);
            }
            let out = c
                .args(["portinfo", &lid.to_string(), "0"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).to_string()
        };
        // Every LID the SM gave (one a node: LMC 0), read with the key.
        for lid in 1..=topo.nodes.len() as u16 {
            let pi = portinfo(lid, Some(KEY));
            let f = |name: &str| smp_field(&pi, name).unwrap_or_else(|| panic!("{name}: {pi}"));
            assert_eq!(
                (f("Mkey:"), f("MkeyLeasePeriod:"), f("ProtectBits:")),
                (KEY, "60", "1"),
                "{who} on {on}: LID {lid}\n{pi}"
            );
        }
        let lid = own_lid(&sim, victim).expect("a LID");
        {
            let pi = portinfo(lid, None);
            assert_eq!(
                smp_field(&pi, "Mkey:"),
                Some("0x0000000000000000"),
                "{who} on {on}: the key hidden from a host without it\n{pi}"
            );
            let out = sim
                .client_at("ibportstate".as_ref(), tool)
                .args([&lid.to_string(), "1", "lid", &format!("{:#x}", lid + 0x100)])
                .output()
                .unwrap();
            assert_eq!(
                own_lid(&sim, victim),
                Some(lid),
                "{who} on {on}: ibportstate without the key moved a LID: {out:?}"
            );
            eprintln!(
                "{who} on {on}: M_Key, protect bits 1 and lease 60 on all {} end ports; without the key, M_Key reads 0 and ibportstate (exit {:?}) leaves LID {lid}",
                topo.nodes.len(),
                out.status.code()
            );
        }
        let (clean, _) = sm.stop(std::time::Duration::from_secs(10));
        assert!(clean || who == "OpenSM", "{who}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A site changes its `m_key`, and the SM moves from OpenSM to ibkit and
/// back, through the `guid2mkey` and `neighbors` each leaves in its cache
/// directory (OpenSM's `m_key_lookup`, on by default), on ibkit's served
/// fabric, under protection level 1 (readable, not writable without the
/// key) and 2 (not even readable): OpenSM protects every end port with key
/// A. ibkit's SM with key B and an empty cache cannot take the subnet
/// (exit non-zero, every port keeps A); under level 2 neither can it with
/// OpenSM's `guid2mkey` alone (it cannot read a port to learn which it
/// is). Given OpenSM's files, it comes up and every port holds B, and it
/// writes its own (`guid2mkey` mode 0600). OpenSM with key C, given
/// those, takes the subnet back and every port holds C: each SM reads the
/// other's files.
#[test]
fn opensm_and_ibkit_hand_the_ports_m_keys_over_in_guid2mkey() {
    if !diags_here("guid2mkey", &["smpquery"]) {
        return;
    }
    for level in ["1", "2"] {
        hand_m_keys_over(level);
    }
}

/// `opensm -c`'s defaults with key `key`, protection `level`, a lease of
/// 60 s and no log file, in `root`/the key's last hex digits; with
/// `per_port`, `m_key_per_port TRUE` too (not an option of OpenSM
/// 3.3.23's, so not among its defaults). The directory and the file.
fn m_key_conf(root: &Path, key: &str, level: &str, per_port: bool) -> (std::path::PathBuf, String) {
    let d = root.join(&key[14..]);
    std::fs::create_dir_all(&d).unwrap();
    let c = opensm_conf_with(
        &d,
        &[
            ("m_key", key),
            ("m_key_protection_level", level),
            ("m_key_lease_period", "60"),
            ("log_file", "(null)"),
        ],
    );
    if per_port {
        let text = std::fs::read_to_string(&c).unwrap();
        std::fs::write(&c, text + "m_key_per_port TRUE\n").unwrap();
    }
    (d, c)
}

/// What `smpquery -K -y KEY portinfo LID 0` from `tool` reads: the M_Key
/// and protect bits shown.
fn m_key_shown(sim: &Served, tool: &str, key: &str, lid: u16) -> (Option<String>, Option<String>) {
    let out = sim
        .client_at("smpquery".as_ref(), tool)
        .args(["-K", "-y", key, "portinfo", &lid.to_string(), "0"])
        .output()
        .unwrap();
    let pi = String::from_utf8_lossy(&out.stdout);
    (
        smp_field(&pi, "Mkey:").map(str::to_string),
        smp_field(&pi, "ProtectBits:").map(str::to_string),
    )
}

/// `ibkit sm --once` on `sim` under the opensm.conf `conf`, its caches in
/// `cache`: its exit status and standard error.
fn ibkit_once(sim: &Served, conf: &str, cache: &Path) -> (Option<i32>, String) {
    let out = sim
        .client(env!("CARGO_BIN_EXE_ibkit").as_ref())
        .args([
            "sm",
            "--once",
            "--transport",
            "ibsim",
            "--opensm-config",
            conf,
        ])
        .arg("--cache-dir")
        .arg(cache)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn hand_m_keys_over(level: &str) {
    const A: &str = "0x5ec2e7ed0000000a";
    const B: &str = "0x5ec2e7ed0000000b";
    const C: &str = "0x5ec2e7ed0000000c";
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let n = topo.nodes.len();
    let root = std::env::temp_dir().join(format!("ibkit-g2m-{}-{level}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let conf = |key: &str| m_key_conf(&root, key, level, false);
    let sim = Served::start(exe, spec, 0, &[]).unwrap();
    let tool = &topo
        .nodes
        .iter()
        .filter(|x| x.kind == mad_core::attr::NodeType::ChannelAdapter)
        .nth(3)
        .unwrap()
        .name;
    // The end ports whose PortInfo, read with `key`, shows it with the
    // protect bits of `level`.
    let lids: Vec<u16> = (1..=n as u16).collect();
    let holding = |key: &str| {
        let want = (Some(key.to_string()), Some(level.to_string()));
        (common::par_map(&lids, |&lid| m_key_shown(&sim, tool, key, lid)).iter())
            .filter(|&shown| *shown == want)
            .count()
    };
    // 1. OpenSM protects every end port with A and notes the keys and links.
    let (da, ca) = conf(A);
    let osm_cache = root.join("opensm-cache-a");
    std::fs::create_dir_all(&osm_cache).unwrap();
    let wait = std::time::Duration::from_secs(30);
    let osm = tests::peers::start_opensm_cached(&sim, &da, &osm_cache, wait, &["-F", &ca])
        .unwrap_or_else(|e| panic!("OpenSM: {e}"));
    assert_eq!(
        holding(A),
        n,
        "level {level}: OpenSM's key on every end port"
    );
    let _ = osm.stop(std::time::Duration::from_secs(10));
    let g2m = std::fs::read_to_string(osm_cache.join("guid2mkey")).expect("OpenSM's guid2mkey");
    let (keys, skipped) = smd::dump::parse_guid2mkey(&g2m);
    assert!(skipped.is_empty(), "{skipped:?}");
    let with_a = keys.values().filter(|k| k.0 == 0x5ec2e7ed0000000a).count();
    assert_eq!(with_a, n, "OpenSM's guid2mkey:\n{g2m}");
    let nb = std::fs::read_to_string(osm_cache.join("neighbors")).expect("OpenSM's neighbors");
    let (links, skipped) = smd::dump::parse_neighbors(&nb);
    assert!(skipped.is_empty(), "{skipped:?}");
    // 2. ibkit with B and no keys: refused. Its SMPs go out once each
    // (`transaction_retries 0`; its rounds still resend what was lost):
    // the refusal is what counts here, not how long it keeps trying.
    let (_db, cb) = conf(B);
    let text = std::fs::read_to_string(&cb).unwrap();
    assert!(text.contains("\ntransaction_retries 3\n"), "{text}");
    std::fs::write(
        &cb,
        text.replace("\ntransaction_retries 3\n", "\ntransaction_retries 0\n"),
    )
    .unwrap();
    let once = |cache: &Path| ibkit_once(&sim, &cb, cache);
    let empty = root.join("ibkit-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (refused, err) = once(&empty);
    assert_ne!(
        refused,
        Some(0),
        "level {level}, without the ports' keys: {err}"
    );
    let why = err.lines().last().unwrap_or_default().to_string();
    assert!(why.contains("ports hold another key"), "{why}");
    assert_eq!(holding(A), n, "every port keeps A");
    let ibkit_cache = root.join("ibkit-cache");
    std::fs::create_dir_all(&ibkit_cache).unwrap();
    std::fs::copy(osm_cache.join("guid2mkey"), ibkit_cache.join("guid2mkey")).unwrap();
    if level == "2" {
        // The keys, but no way to know a port before reading it.
        let (code, err) = once(&ibkit_cache);
        assert_ne!(code, Some(0), "level 2 with guid2mkey alone: {err}");
        assert_eq!(holding(A), n, "every port keeps A");
    }
    // 3. ibkit with B and OpenSM's files: up, every port re-keyed.
    std::fs::copy(osm_cache.join("neighbors"), ibkit_cache.join("neighbors")).unwrap();
    let (code, err) = once(&ibkit_cache);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("guid2mkey: {n} M_Key(s)")), "{err}");
    assert_eq!(
        holding(B),
        n,
        "level {level}: ibkit's key on every end port"
    );
    let mine = ibkit_cache.join("guid2mkey");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&mine).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "guid2mkey is {mode:o}");
    }
    let (keys, _) = smd::dump::parse_guid2mkey(&std::fs::read_to_string(&mine).unwrap());
    assert_eq!(
        keys.values().filter(|k| k.0 == 0x5ec2e7ed0000000b).count(),
        n,
        "ibkit's guid2mkey"
    );
    let (my_links, _) = smd::dump::parse_neighbors(
        &std::fs::read_to_string(ibkit_cache.join("neighbors")).unwrap(),
    );
    assert_eq!(my_links, links, "ibkit's neighbors are OpenSM's");
    // 4. OpenSM with C, given ibkit's cache: up, every port holds C.
    let (dc, cc) = conf(C);
    let osm = tests::peers::start_opensm_cached(&sim, &dc, &ibkit_cache, wait, &["-F", &cc])
        .unwrap_or_else(|e| panic!("OpenSM with ibkit's guid2mkey: {e}"));
    let back = holding(C);
    let _ = osm.stop(std::time::Duration::from_secs(10));
    assert_eq!(back, n, "OpenSM re-keyed every port from ibkit's files");
    eprintln!(
        "level {level}: OpenSM (key A) noted {n} ports and {} link ends; ibkit (key B) without them exit {refused:?} ({why}), with them up and {n} ports on B, its neighbors equal to OpenSM's; OpenSM (key C) with ibkit's files: {back} ports on C",
        links.len()
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A leaf switch whose forwarding tables are emptied under a running SM,
/// its LID and links kept (`ibkit fabric ctl node-reset`), on ibkit's
/// served fabric, then SIGHUP (a heavy sweep, for both SMs): ibkit's SM
/// finds LinearFDBTop changed and writes the switch's tables again;
/// OpenSM puts LinearFDBTop back but resends no LFT block it believes
/// the switch holds. Printed: the switch's LFT entries that are as before.
#[test]
fn a_switch_reset_with_its_lid_kept_is_rewritten_by_ibkit_after_sighup() {
    if let Some(why) = missing_tools() {
        skip("switch reset", &why);
        return;
    }
    use std::time::{Duration, Instant};
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let wait = Duration::from_secs(30);
    let dir = std::env::temp_dir().join(format!("ibkit-reset-{}", std::process::id()));
    let mut kept = BTreeMap::new();
    for who in ["OpenSM", "ibkit"] {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let served = Served::start(exe, spec, 0, &[]).unwrap();
        let sm = match who {
            "OpenSM" => tests::peers::start_opensm(&served, &dir, wait),
            _ => tests::peers::start_ibkit_sm(exe, &served, &["--transport", "ibsim"], wait),
        }
        .unwrap();
        let dump = || -> serde_json::Value {
            let f = dir.join("dump.json");
            served.ctl(&format!("dump {}", f.display())).unwrap();
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap()
        };
        let d = dump();
        let nodes = d["nodes"].as_array().unwrap();
        let max_lid = nodes
            .iter()
            .filter_map(|n| n["lid"].as_u64())
            .max()
            .unwrap() as usize;
        // The last switch of the fabric (a leaf far from the SM's host).
        let leaf = (nodes.iter().rev())
            .find(|n| n["kind"] == "switch")
            .unwrap()["name"]
            .as_str()
            .unwrap()
            .to_string();
        let lft_of = |d: &serde_json::Value| -> Vec<u64> {
            let n = (d["nodes"].as_array().unwrap().iter())
                .find(|n| n["name"] == leaf.as_str())
                .unwrap();
            let mut l = lft(n);
            l.resize(max_lid + 1, 0xFF);
            l[1..=max_lid].to_vec()
        };
        let before = lft_of(&d);
        assert!(before.iter().all(|&p| p != 0xFF), "{who}: {before:?}");
        served.ctl(&format!("node-reset {leaf}")).unwrap();
        assert!(lft_of(&dump()).iter().all(|&p| p == 0xFF));
        common::kill("-HUP", sm.pid());
        let t = Instant::now();
        let mut now = lft_of(&dump());
        while now != before && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(100));
            now = lft_of(&dump());
        }
        let same = now.iter().zip(&before).filter(|(a, b)| a == b).count();
        eprintln!(
            "{who} on the served {spec}: after the reset of {leaf} and SIGHUP, {same} of {} LFT entries as before",
            before.len()
        );
        kept.insert(who, (same, before.len()));
        let (clean, _) = sm.stop(Duration::from_secs(10));
        assert!(clean || who == "OpenSM", "{who} did not exit cleanly");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (same, all) = kept["ibkit"];
    assert_eq!(same, all, "ibkit wrote the reset switch's LFT again");
}

/// `m_key_per_port` on ibkit's served fabric, checked with what we did not
/// write: `ibkit sm --once` under an opensm.conf with `m_key B`,
/// `m_key_per_port TRUE` and protection level 1 gives each end port a key
/// of its own — `smpquery -K -y KEY portinfo` shows exactly one of the
/// keys in ibkit's guid2mkey at each LID, and B at none — and OpenSM
/// (key C), given ibkit's guid2mkey and neighbors, takes the subnet over
/// and re-keys every port with C.
#[test]
fn per_port_m_keys_are_read_back_by_smpquery_and_handed_to_opensm() {
    if !diags_here("per-port M_Keys", &["smpquery"]) {
        return;
    }
    const B: &str = "0x5ec2e7ed0000000b";
    const C: &str = "0x5ec2e7ed0000000c";
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let n = topo.nodes.len();
    let root = std::env::temp_dir().join(format!("ibkit-ppk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let conf = |key: &str, per_port: bool| m_key_conf(&root, key, "1", per_port);
    let sim = Served::start(exe, spec, 0, &[]).unwrap();
    let tool = &(topo.nodes.iter())
        .filter(|x| x.kind == mad_core::attr::NodeType::ChannelAdapter)
        .nth(3)
        .unwrap()
        .name;
    // The LIDs whose PortInfo, read with `key`, shows it.
    let shows = |key: &str| -> Vec<u16> {
        (1..=n as u16)
            .filter(|&lid| m_key_shown(&sim, tool, key, lid).0.as_deref() == Some(key))
            .collect()
    };
    let cache = root.join("ibkit-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let (_db, cb) = conf(B, true);
    let (code, err) = ibkit_once(&sim, &cb, &cache);
    assert_eq!(code, Some(0), "{err}");
    let (keys, _) =
        smd::dump::parse_guid2mkey(&std::fs::read_to_string(cache.join("guid2mkey")).unwrap());
    assert_eq!(keys.len(), n, "{keys:?}");
    let distinct: std::collections::BTreeSet<u64> = keys.values().map(|k| k.0).collect();
    assert_eq!(distinct.len(), n, "a key of its own for each port");
    for (&guid, k) in &keys {
        assert_eq!(
            *k,
            smi::sm::port_m_key(mad_core::MKey(0x5ec2e7ed0000000b), guid)
        );
    }
    assert!(shows(B).is_empty(), "no port holds B itself");
    let mut at: Vec<u16> = Vec::new();
    for k in keys.values() {
        let lids = shows(&format!("{:#018x}", k.0));
        assert_eq!(lids.len(), 1, "{:#x} shows at {lids:?}", k.0);
        at.extend(lids);
    }
    at.sort();
    assert_eq!(
        at,
        (1..=n as u16).collect::<Vec<_>>(),
        "each LID its own key"
    );
    // OpenSM with C, given ibkit's files.
    let (dc, cc) = conf(C, false);
    let wait = std::time::Duration::from_secs(30);
    let osm = tests::peers::start_opensm_cached(&sim, &dc, &cache, wait, &["-F", &cc])
        .unwrap_or_else(|e| panic!("OpenSM with ibkit's guid2mkey: {e}"));
    let back = shows(C).len();
    let _ = osm.stop(std::time::Duration::from_secs(10));
    assert_eq!(back, n, "OpenSM re-keyed every port from ibkit's files");
    eprintln!("per-port keys: {n} ports, {n} distinct keys, each shown at one LID by smpquery; OpenSM with ibkit's guid2mkey: {back} ports on C");
    let _ = std::fs::remove_dir_all(&root);
}

/// A port with a failing cable, on ibkit's served fabric (ibsim raises
/// no trap 129–131; `ibkit fabric ctl port-error` makes a port raise
/// them), OpenSM and ibkit given one `opensm.conf` with
/// `babbling_port_policy TRUE`: from the 11th trap 129 in a row the leaf
/// switch routes no LID out of the noisy port (`ibroute`), and every LID
/// it routed before still routes under ibkit (OpenSM's min-hop leaves
/// one unrouted); past the 251st, the end of the link
/// nearer the SM is Disabled (`smpquery portinfo`), the same end under
/// both SMs, and the link stays down until `ibportstate … enable`.
#[test]
fn both_sms_route_around_a_noisy_port_and_disable_a_babbling_one() {
    if !diags_here("babbling", &["smpquery", "ibroute"]) {
        return;
    }
    use std::time::Duration;
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-babbling-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = opensm_conf_with(
        &dir,
        &[("babbling_port_policy", "TRUE"), ("log_file", "(null)")],
    );
    let switch = mad_core::attr::NodeType::Switch;
    // A leaf switch (it has CAs) and its port to a spine.
    let (leaf, p, spine, q) = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].kind == switch)
        .filter(|&i| {
            (1..=topo.nodes[i].ports).any(|p| {
                topo.peer_of(i, p)
                    .is_some_and(|(m, _)| topo.nodes[m].kind != switch)
            })
        })
        .find_map(|i| {
            (1..=topo.nodes[i].ports).find_map(|p| {
                let (m, q) = topo.peer_of(i, p)?;
                (topo.nodes[m].kind == switch).then_some((i, p, m, q))
            })
        })
        .unwrap();
    let name = topo.nodes[leaf].name.clone();
    // The tools run on a host of their own (the SM holds its host's SMI).
    let tool = (topo.nodes.iter())
        .rfind(|n| n.kind != switch)
        .unwrap()
        .name
        .clone();
    let mut disabled_ends = Vec::new();
    for who in ["OpenSM", "ibkit"] {
        let sim = Served::start(exe, spec, 0, &[]).unwrap();
        let sm = with_opensm_conf(who, exe, &sim, &dir, &conf);
        let query = |args: &[&str]| -> String {
            let out = sim
                .client_at("smpquery".as_ref(), &tool)
                .args(args)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let lid_of = |guid: u64| -> u16 {
            (1..=topo.nodes.len() as u16 + 4)
                .find(|l| {
                    smp_field(&query(&["nodeinfo", &l.to_string()]), "Guid:")
                        == Some(&format!("{guid:#018x}")[..])
                })
                .unwrap_or_else(|| {
                    panic!("{who}: no LID has {guid:#x}: {}", query(&["nodeinfo", "1"]))
                })
        };
        let (leaf_lid, spine_lid) = (
            lid_of(topo.nodes[leaf].guid),
            lid_of(topo.nodes[spine].guid),
        );
        // The leaf's routes: LID → port.
        let routes = || -> BTreeMap<u16, u8> {
            let out = sim
                .client_at("ibroute".as_ref(), &tool)
                .arg(leaf_lid.to_string())
                .output()
                .unwrap();
            (String::from_utf8_lossy(&out.stdout).lines())
                .filter(|l| l.starts_with("0x"))
                .map(|l| {
                    (
                        u16::from_str_radix(&l[2..6], 16).unwrap(),
                        l[7..10].trim().parse().unwrap(),
                    )
                })
                .collect()
        };
        let before = routes();
        let out_of = |r: &BTreeMap<u16, u8>| r.values().filter(|&&x| x == p).count();
        assert!(out_of(&before) > 0, "{who}: no LID out of {name} port {p}");
        let ctl = |cmd: String| {
            let said = fabric::serve::ctl(sim.socket(), &cmd).unwrap();
            assert!(said.starts_with("ok"), "{said}");
        };
        ctl(format!("port-error {name} {p} 129 11"));
        let mut raised = 11;
        let mut now: BTreeMap<u16, u8>;
        // OpenSM on a loaded machine has once (CI, 2026-12-07) kept its
        // routes 10 s after the 11 traps; it gets up to two more bursts
        // (the count it keeps can only grow), and the line below says how
        // many traps it took. ibkit must route around after the first.
        let t = std::time::Instant::now();
        let took = loop {
            now = routes();
            if out_of(&now) == 0 {
                break t.elapsed();
            }
            if t.elapsed() > Duration::from_secs(10) * (raised / 11) {
                assert!(
                    who == "OpenSM" && raised < 33,
                    "{who}: {name} routes {now:?} after {raised} traps"
                );
                ctl(format!("port-error {name} {p} 129 11"));
                raised += 11;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        // ibkit routes every LID around the link; OpenSM's min-hop leaves
        // a LID unrouted at the switch (one of 14 here).
        if who == "ibkit" {
            assert_eq!(now.len(), before.len(), "{who}: every LID still routed");
        }
        // Past 250: the nearer end disabled.
        ctl(format!("port-error {name} {p} 129 250"));
        raised += 250;
        let phys = |lid: u16, port: u8| {
            smp_field(
                &query(&["portinfo", &lid.to_string(), &port.to_string()]),
                "PhysLinkState",
            )
            .unwrap_or_default()
            .to_string()
        };
        let mut end = None;
        common::wait_until(
            Duration::from_secs(10),
            || {
                end = [(leaf_lid, p, "leaf"), (spine_lid, q, "spine")]
                    .into_iter()
                    .find(|&(l, port, _)| phys(l, port) == "Disabled")
                    .map(|e| e.2);
                end.is_some()
            },
            || format!("{who}: {} / {}", phys(leaf_lid, p), phys(spine_lid, q)),
        );
        std::thread::sleep(Duration::from_millis(500));
        let other = if end == Some("leaf") {
            (spine_lid, q)
        } else {
            (leaf_lid, p)
        };
        assert_ne!(
            phys(other.0, other.1),
            "LinkUp",
            "{who}: the link stays down"
        );
        // Enabled again by hand (`ibportstate … enable`): the link trains.
        let (dl, dp) = if end == Some("leaf") {
            (leaf_lid, p)
        } else {
            (spine_lid, q)
        };
        let out = (sim.client_at("ibportstate".as_ref(), &tool))
            .args([&dl.to_string(), &dp.to_string(), "enable"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{who}: ibportstate: {out:?}");
        common::wait_until(
            Duration::from_secs(10),
            || phys(leaf_lid, p) == "LinkUp" && phys(spine_lid, q) == "LinkUp",
            || format!("{who}: {} / {}", phys(leaf_lid, p), phys(spine_lid, q)),
        );
        println!(
            "{who}: {} LIDs out of {name} port {p}; none {took:.1?} after {} traps 129, {} of {} LIDs still routed; \
             after {raised} the {} end Disabled, and up again \
             after ibportstate enable",
            out_of(&before),
            raised - 250,
            now.len(),
            before.len(),
            end.unwrap()
        );
        disabled_ends.push(end.unwrap());
        let _ = sm.stop(Duration::from_secs(10));
    }
    assert_eq!(
        disabled_ends[0], disabled_ends[1],
        "the same end under both SMs"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
