//! `ibkit sm --config FILE`: a TOML file of the SM's settings. A broken
//! file is refused with its key and line before the fabric is touched;
//! the settings apply, relative paths are the file's, and a flag wins over
//! the file (checked on ibkit's served fabric, where the SM's JSON report
//! says what it ran with).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tests::peers::{Served, Simulator};

mod common;
use common::{kill, running_sm, wait_in};

fn ibkit(args: &[&str], socket: Option<&str>) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ibkit"));
    c.args(args).env_remove("IBSIM_SOCKNAME");
    if let Some(s) = socket {
        c.env("IBSIM_SOCKNAME", s);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_broken_configuration_is_refused_with_its_key_and_line() {
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("sm.toml");
    for (text, want) in [
        ("priority = 5\nlog_files = \"/var/log/sm\"\n", "line 2"),
        ("priority = 5\n\nrouting = \"torus-2QoS\"\n", "line 3"),
        ("priority = 16\n", "0-15"),
        ("sweep_ms = \"often\"\n", "line 1"),
        ("[sm]\npriority = 1\n", "line 1"),
        ("max_rate_enum = 30\n", "not 2-24 or 63"),
    ] {
        std::fs::write(&f, text).unwrap();
        let (code, out, err) = ibkit(&["sm", "--once", "--config", f.to_str().unwrap()], None);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains("config: ") && err.contains(want),
            "{text}: {err}"
        );
    }
    // The same range on the command line.
    let (code, _, err) = ibkit(&["sm", "--once", "--max-rate-enum", "25"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not 2-24 or 63"), "{err}");
    let (code, _, err) = ibkit(&["sm", "--once", "--config", "/nonexistent/sm.toml"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/sm.toml"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_file_applies_and_a_flag_wins() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A partition file named relative to the configuration.
    std::fs::write(dir.join("parts.conf"), "Default=0x7fff:ALL=full;\n").unwrap();
    let f = dir.join("sm.toml");
    std::fs::write(
        &f,
        "priority = 5\nrouting = \"updn\"\npartitions = \"parts.conf\"\nlog_level = \"warn\"\n",
    )
    .unwrap();
    let conf = f.to_str().unwrap();
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["sm", "--once", "--json", "--config", conf];
        args.extend_from_slice(extra);
        let (code, out, err) = ibkit(&args, Some(served.socket()));
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let v = run(&[]);
    assert_eq!(v["priority"], 5);
    assert_eq!(v["up"], true);
    let v = run(&["--priority", "7"]);
    assert_eq!(v["priority"], 7, "the flag wins");
    // A partition file the configuration names and that is broken: refused.
    std::fs::write(dir.join("parts.conf"), "Default=0xZZ:ALL=full;\n").unwrap();
    let mut args = vec!["sm", "--once", "--config", conf];
    args.push("--json");
    let (code, _, err) = ibkit(&args, Some(served.socket()));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("parts.conf"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The master as `sminfo` (infiniband-diags) from `host` reads it: its
/// port GUID and priority.
fn sminfo(sim: &dyn Simulator, host: &str) -> (u64, u8) {
    let s = tests::peers::sminfo(sim, host, &[]).unwrap();
    (s.guid, s.priority)
}

fn sminfo_priority(sim: &dyn Simulator, host: &str) -> u8 {
    sminfo(sim, host).1
}

/// Peer tools for the running-SM tests (else SKIPPED, or a failure
/// under IBKIT_REQUIRE_PEERS=1).
fn peers_here(test: &str) -> bool {
    if Path::new("/usr/sbin/sminfo").exists() && tests::peers::umad2sim().is_some() {
        return true;
    }
    if std::env::var("IBKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        panic!("sminfo or libumad2sim missing and IBKIT_REQUIRE_PEERS=1");
    }
    eprintln!("SKIPPED {test}: infiniband-diags or libumad2sim0 is not installed");
    false
}

/// The CA hosts of mport-ntree:4:2 and their port GUIDs.
fn hosts() -> Vec<(String, u64)> {
    let topo = fabric::topology::Topology::from_spec("mport-ntree:4:2").unwrap();
    (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| (n.name.clone(), n.guid + 1))
        .collect()
}

#[test]
fn a_running_sm_logs_to_its_file_dumps_and_reads_its_file_again_on_sighup() {
    if !peers_here("sighup") {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-hup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("dump")).unwrap();
    std::fs::create_dir_all(dir.join("cache")).unwrap();
    let f = dir.join("sm.toml");
    let common =
        "log_file = \"sm.log\"\ndump_dir = \"dump\"\ncache_dir = \"cache\"\nsweep_ms = 300\n";
    std::fs::write(&f, format!("priority = 3\n{common}")).unwrap();
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let sm = running_sm(&served, &["--config".as_ref(), f.as_os_str()]);
    let log = dir.join("sm.log");
    let wait = Duration::from_secs(20);
    wait_in(&log, "SUBNET UP", wait);
    // The dumps and the LID cache, once the subnet is up.
    wait_in(&dir.join("cache/guid2lid"), "0x", wait);
    let cache = std::fs::read_to_string(dir.join("cache/guid2lid")).unwrap();
    let (lids, warnings) = smd::dump::parse_guid2lid(&cache);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(lids.len(), 14, "every port of mport-ntree:4:2");
    wait_in(&dir.join("dump/opensm-lfts.dump"), "lids dumped", wait);
    wait_in(&dir.join("dump/opensm-subnet.lst"), "LOG=ACT", wait);
    let viewer = &hosts()[2].0;
    assert_eq!(sminfo_priority(&served, viewer), 3);
    let before = std::fs::read_to_string(&log).unwrap();
    assert!(!before.contains("DEBUG"), "info level: {before}");

    // A new priority and log level, read on SIGHUP.
    std::fs::write(&f, format!("priority = 9\nlog_level = \"debug\"\n{common}")).unwrap();
    let signal = |sig: &str| kill(sig, sm.id());
    signal("-HUP");
    wait_in(&log, "priority 3 -> 9", wait);
    wait_in(&log, "configuration re-read", wait);
    assert_eq!(
        sminfo_priority(&served, viewer),
        9,
        "sminfo reads the new priority"
    );
    // Debug lines from the next sweep on.
    wait_in(&log, "DEBUG", wait);

    // A broken file: logged, and nothing changes.
    std::fs::write(&f, format!("priority = 99\n{common}")).unwrap();
    signal("-HUP");
    wait_in(&log, "the settings in force are kept", wait);
    assert_eq!(sminfo_priority(&served, viewer), 9);

    signal("-TERM");
    let out = sm.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "the log went to its file: {out:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("changes at the next start"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_standby_raised_above_its_master_on_sighup_takes_the_subnet() {
    if !peers_here("sighup_priority") {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-raise-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let h = hosts();
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let spawn = |host: &str, args: &[&str]| {
        served
            .client_at(exe.as_os_str(), host)
            .arg("sm")
            .args(args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let wait = Duration::from_secs(20);
    let master_log = dir.join("master.log");
    let master = spawn(
        &h[0].0,
        &[
            "--priority",
            "5",
            "--log-file",
            master_log.to_str().unwrap(),
        ],
    );
    wait_in(&master_log, "SUBNET UP", wait);
    let f = dir.join("standby.toml");
    std::fs::write(&f, "priority = 1\nlog_file = \"standby.log\"\n").unwrap();
    let standby = spawn(&h[1].0, &["--config", f.to_str().unwrap()]);
    let standby_log = dir.join("standby.log");
    wait_in(&standby_log, "Entering STANDBY state", wait);
    assert_eq!(sminfo(&served, &h[2].0), (h[0].1, 5));

    // The standby's file now says 10: on SIGHUP it outranks its master,
    // tells it so (trap 144) and is handed the subnet.
    std::fs::write(&f, "priority = 10\nlog_file = \"standby.log\"\n").unwrap();
    let t = Instant::now();
    kill("-HUP", standby.id());
    wait_in(&standby_log, "Entering MASTER state", wait);
    wait_in(&master_log, "Handing over", wait);
    loop {
        if sminfo(&served, &h[2].0) == (h[1].1, 10) {
            break;
        }
        assert!(t.elapsed() < wait, "sminfo never named the raised SM");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "a standby raised from 1 to 10 on SIGHUP is master {:.0} ms later (sminfo)",
        t.elapsed().as_secs_f64() * 1e3
    );
    for sm in [master, standby] {
        kill("-TERM", sm.id());
        let st = sm.wait_with_output().unwrap().status;
        assert!(st.success(), "{st}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unwritable_logs_and_dumps_and_a_broken_lid_cache_are_said_and_survived() {
    // A log file that cannot be opened: refused before the fabric is
    // touched (no simulator is named here).
    let (code, out, err) = ibkit(
        &["sm", "--once", "--log-file", "/nonexistent/ibkit/sm.log"],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("log file /nonexistent/ibkit/sm.log"), "{err}");

    // A dump directory that does not exist and a LID cache that is too
    // large, then one of garbage: each logged, and the subnet comes up.
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.join("guid2lid");
    std::fs::File::create(&cache)
        .unwrap()
        .set_len(smd::dump::MAX_GUID2LID_BYTES as u64 + 1)
        .unwrap();
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let run = || {
        let (code, out, err) = ibkit(
            &[
                "sm",
                "--once",
                "--json",
                "--dump-dir",
                "/nonexistent/ibkit",
                "--cache-dir",
                dir.to_str().unwrap(),
            ],
            Some(served.socket()),
        );
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["up"], true);
        err
    };
    let err = run();
    assert!(err.contains("longer than"), "{err}");
    assert!(
        err.contains("cannot write /nonexistent/ibkit/opensm-subnet.lst"),
        "{err}"
    );
    // The cache was written afresh: 14 ports.
    let text = std::fs::read_to_string(&cache).unwrap();
    assert_eq!(smd::dump::parse_guid2lid(&text).0.len(), 14);
    std::fs::write(
        &cache,
        "0x1 0x2\n\u{0}\u{ff}garbage\n0x2c90400000001 0xffff 0xffff\n",
    )
    .unwrap();
    let err = run();
    assert!(err.contains("line 1") && err.contains("skipped"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The SA key (`--sa-key`, OpenSM's sa_key) is the one the SA trusts, and
/// the SM's own SM_Key (`--sm-key`) is not: a request carrying the SM_Key
/// is dropped, one with the SA key or none is answered.
#[test]
fn the_sa_trusts_its_sa_key_not_the_sms_sm_key() {
    if !peers_here("sa_key") {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let h = hosts();
    let mut sm = tests::peers::WatchedSm::start(
        exe,
        &served,
        &h[0].0,
        &[
            "--transport",
            "ibsim",
            "--sa-key",
            "0x42",
            "--sm-key",
            "0x77",
        ],
    )
    .unwrap();
    sm.wait_for("SUBNET UP", Duration::from_secs(20)).unwrap();
    let ask = |key: &str| {
        let out = (served.client_at(exe.as_os_str(), &h[2].0))
            .args(["sa", "classportinfo", "--sm-key", key])
            .args(["--attempts", "1", "--timeout-ms", "500"])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for key in ["0x42", "0"] {
        let (ok, err) = ask(key);
        assert!(ok, "key {key}: {err}");
    }
    let (ok, err) = ask("0x77");
    assert!(!ok, "the SM_Key was taken for the SA key");
    assert!(err.contains("did not answer"), "{err}");
    let (clean, _) = sm.stop(Duration::from_secs(10));
    assert!(clean);
}

/// `--cache-dir` on a vSwitch subnet: the SM writes `vf2lid` beside
/// `guid2lid`; the simulator restarted (a power cycle), an SM started
/// with both gives every VF its LID back, and without `vf2lid` it would
/// not (the PFs keep their cached LIDs, the VFs are numbered after them).
#[test]
fn vf_lids_come_back_from_vf2lid_after_a_power_cycle() {
    if !peers_here("vf2lid") {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-vf2lid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.to_str().unwrap();
    let h = hosts();
    let start = |served: &Served| {
        tests::peers::WatchedSm::start(
            exe,
            served,
            &h[0].0,
            &["--transport", "ibsim", "--cache-dir", cache],
        )
        .unwrap()
    };
    // One power cycle: a fresh simulator, an SM until its cache is written.
    let cycle = |wait_for: &str| -> String {
        let served = Served::start(exe, "mport-ntree:4:2", 2, &[]).unwrap();
        let _ = std::fs::remove_file(dir.join("vf2lid"));
        let mut sm = start(&served);
        sm.wait_for(wait_for, Duration::from_secs(20)).unwrap();
        wait_in(&dir.join("vf2lid"), "0x", Duration::from_secs(20));
        let (clean, _) = sm.stop(Duration::from_secs(10));
        assert!(clean);
        std::fs::read_to_string(dir.join("vf2lid")).unwrap()
    };
    let first = cycle("SUBNET UP");
    assert_eq!(first.lines().count(), 14, "7 hypervisors × 2 VFs:\n{first}");
    // vf2lid is removed before each start, then written: keep a copy.
    std::fs::write(dir.join("kept"), &first).unwrap();
    // The copy's inode: the SM writes its caches to a new file renamed
    // over the old one, so a new inode says it wrote (a modification time
    // can fall in the copy's clock tick).
    let inode = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).map(|m| m.ino()).ok()
    };
    let restore = || {
        std::fs::copy(dir.join("kept"), dir.join("vf2lid")).unwrap();
        inode(&dir.join("vf2lid"))
    };
    // With both caches: the same VF LIDs.
    let again = {
        let served = Served::start(exe, "mport-ntree:4:2", 2, &[]).unwrap();
        let copied = restore();
        let mut sm = start(&served);
        sm.wait_for("vf2lid: 14 VF LID(s)", Duration::from_secs(20))
            .unwrap();
        sm.wait_for("SUBNET UP", Duration::from_secs(20)).unwrap();
        // What is compared is what this SM writes once up, not the copy.
        let t = Instant::now();
        while inode(&dir.join("vf2lid")) == copied {
            assert!(t.elapsed() < Duration::from_secs(20), "vf2lid not written");
            std::thread::sleep(Duration::from_millis(20));
        }
        let (clean, _) = sm.stop(Duration::from_secs(10));
        assert!(clean);
        std::fs::read_to_string(dir.join("vf2lid")).unwrap()
    };
    assert_eq!(again, first, "every VF its LID again");
    // Without vf2lid (guid2lid only): the VFs are numbered afresh.
    let without = cycle("SUBNET UP");
    assert_ne!(without, first, "vf2lid made no difference");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `opensm -c FILE` (OpenSM's own defaults, every option) written where
/// the test runs; `None` where OpenSM is not installed (SKIPPED unless
/// IBKIT_REQUIRE_PEERS=1).
fn opensm_default_conf(dir: &Path, test: &str) -> Option<std::path::PathBuf> {
    if !Path::new("/usr/sbin/opensm").exists() {
        if std::env::var("IBKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
            panic!("opensm missing and IBKIT_REQUIRE_PEERS=1");
        }
        eprintln!("SKIPPED {test}: opensm is not installed");
        return None;
    }
    let f = dir.join("opensm.conf");
    let out = Command::new("/usr/sbin/opensm")
        .arg("-c")
        .arg(&f)
        .output()
        .unwrap();
    assert!(f.is_file(), "opensm -c wrote nothing: {out:?}");
    Some(f)
}

/// `text` with option `key`'s line (`key value`) given `value`.
fn with_option(text: &str, key: &str, value: &str) -> String {
    let mut found = false;
    let out: Vec<String> = (text.lines())
        .map(|l| match l.split_once(' ') {
            Some((k, _)) if k == key => {
                found = true;
                format!("{key} {value}")
            }
            _ => l.to_string(),
        })
        .collect();
    assert!(found, "no {key} line");
    out.join("\n") + "\n"
}

/// OpenSM's own configuration file, as `opensm -c` writes it with every
/// default, is read by `ibkit sm --opensm-config` without a warning: what
/// ibkit applies is OpenSM's default, the rest is named once as not
/// applied. Options a site changed apply (priority, LMC, the routing
/// engine's fallback list), those that change the subnet and that ibkit
/// does not apply are warned with their line, and a bad value is refused
/// with its line and column before the fabric is touched.
#[test]
fn opensms_own_configuration_file_is_read_and_applied() {
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-osm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(conf) = opensm_default_conf(&dir, "opensm.conf") else {
        return;
    };
    let defaults = std::fs::read_to_string(&conf).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let log = dir.join("sm.log");
    let run = |text: &str| {
        std::fs::write(&conf, text).unwrap();
        let _ = std::fs::remove_file(&log);
        let args = [
            "sm",
            "--once",
            "--json",
            "--opensm-config",
            conf.to_str().unwrap(),
            "--log-file",
            log.to_str().unwrap(),
        ];
        // --json keeps the log at warn; RUST_LOG wins, to see the notes.
        let out = Command::new(exe)
            .args(args)
            .env("IBSIM_SOCKNAME", served.socket())
            .env("RUST_LOG", "info")
            .output()
            .unwrap();
        let (code, out, err) = (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        (code, out, err, said)
    };
    // OpenSM's defaults: priority 0, LMC 0, and no warning.
    let (code, out, err, said) = run(&defaults);
    assert_eq!(code, 0, "{err}{said}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["up"].as_bool(), v["priority"].as_u64()),
        (Some(true), Some(0))
    );
    assert!(
        !said.contains("WARN"),
        "OpenSM's defaults warn nothing:\n{said}"
    );
    assert!(
        said.contains("option(s) not applied") && said.contains("max_msg_fifo_timeout"),
        "{said}"
    );
    let skipped = (said.lines())
        .find(|l| l.contains("option(s) not applied"))
        .unwrap_or_default();
    for applied in [
        "max_wire_smps",
        "max_wire_smps2",
        "max_smps_timeout",
        "long_transaction_timeout",
        "log_prefix",
        "force_log_flush",
        "drop_event_subscriptions",
        "sa_db_dump",
        "node_name_map_name",
        "fsync_high_avail_files",
        "use_optimized_slvl",
        "allow_both_pkeys",
        "keep_pkey_indexes",
        "consolidate_ipv6_snm_req",
        "use_original_extended_sa_rates_only",
        "honor_guid2lid_file",
        "hop_weights_file",
        "port_search_ordering_file",
        "port_shifting",
        "scatter_ports",
        "guid_routing_order_no_scatter",
        "port_profile_switch_nodes",
        "port_prof_ignore_file",
        "lash_start_vl",
    ] {
        assert!(
            !skipped.split([' ', ':']).any(|w| w == applied),
            "{applied} is applied: {skipped}"
        );
    }
    if let Some(l) = said.lines().find(|l| l.contains("option(s) not applied")) {
        let l = l.split(": ").find(|p| p.contains("option(s)")).unwrap_or(l);
        println!("OpenSM's own file: {}", &l[..l.len().min(60)]);
    }
    // A site's changes.
    let mut text = with_option(&defaults, "sm_priority", "7");
    text = with_option(&text, "lmc", "1");
    text = with_option(&text, "routing_engine", "dfsssp,updn");
    // Applied now, as OpenSM applies them: no warning.
    text = with_option(&text, "subnet_prefix", "0xfe80000000000099");
    text = with_option(&text, "m_key", "0x0000000000000099");
    let (code, out, err, said) = run(&text);
    assert_eq!(code, 0, "{err}{said}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["priority"], 7, "{v}");
    // LMC 1: every CA's base LID is even (2 LIDs, aligned).
    let cas: Vec<u64> = (v["table"].as_array().unwrap().iter())
        .filter(|n| n["switch"] == false)
        .map(|n| n["lid"].as_u64().unwrap())
        .collect();
    assert!(cas.len() == 8 && cas.iter().all(|l| l % 2 == 0), "{cas:?}");
    let line_of = |key: &str| {
        text.lines()
            .position(|l| l.starts_with(&format!("{key} ")))
            .unwrap()
            + 1
    };
    let at = format!("line {}: ", line_of("routing_engine"));
    assert!(
        said.lines()
            .any(|l| l.contains("WARN") && l.contains(&at) && l.contains("dfsssp")),
        "routing_engine: no warning at {at}\n{said}"
    );
    for key in ["m_key", "subnet_prefix"] {
        assert!(
            !said.lines().any(|l| l.contains("WARN") && l.contains(key)),
            "{key}: {said}"
        );
    }
    // A value ibkit applies and cannot take.
    let text = with_option(&defaults, "sm_priority", "16");
    let (code, out, err, _) = run(&text);
    assert_eq!(code, 2, "{out}{err}");
    let at = format!(
        "line {}, column 13: sm_priority 16: not 0-15",
        line_of("sm_priority")
    );
    assert!(err.contains(&at), "{err}");
    // With --config: one or the other.
    let (code, _, err) = ibkit(
        &[
            "sm",
            "--once",
            "--config",
            "x.toml",
            "--opensm-config",
            conf.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A running SM given OpenSM's opensm.conf reads it again on SIGHUP: the
/// new `sm_priority` is what `sminfo` reads, and a broken file keeps it.
#[test]
fn a_running_sm_reads_its_opensm_conf_again_on_sighup() {
    if !peers_here("opensm.conf sighup") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-osmhup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(conf) = opensm_default_conf(&dir, "opensm.conf sighup") else {
        return;
    };
    let log = dir.join("sm.log");
    let defaults = with_option(
        &std::fs::read_to_string(&conf).unwrap(),
        "log_file",
        log.to_str().unwrap(),
    );
    std::fs::write(&conf, with_option(&defaults, "sm_priority", "3")).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let sm = running_sm(&served, &["--opensm-config".as_ref(), conf.as_os_str()]);
    let wait = Duration::from_secs(20);
    wait_in(&log, "SUBNET UP", wait);
    let viewer = &hosts()[2].0;
    assert_eq!(sminfo_priority(&served, viewer), 3);
    let signal = |sig: &str| kill(sig, sm.id());
    std::fs::write(&conf, with_option(&defaults, "sm_priority", "9")).unwrap();
    signal("-HUP");
    wait_in(&log, "priority 3 -> 9", wait);
    assert_eq!(sminfo_priority(&served, viewer), 9);
    std::fs::write(&conf, with_option(&defaults, "sm_priority", "nine")).unwrap();
    signal("-HUP");
    wait_in(&log, "the settings in force are kept", wait);
    assert_eq!(sminfo_priority(&served, viewer), 9);
    signal("-TERM");
    let out = sm.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `opensm -o` (`who` "OpenSM") or `ibkit sm --once` on `served`
/// with its log in `log` and `extra` arguments; the log it leaves.
fn run_logging(served: &Served, dir: &Path, log: &Path, who: &str, extra: &[&str]) -> String {
    let l = log.to_str().unwrap();
    let out = if who == "OpenSM" {
        let cache = dir.join("opensm-cache");
        std::fs::create_dir_all(&cache).unwrap();
        (served.client("opensm".as_ref()))
            .env("OSM_CACHE_DIR", &cache)
            .args(["-o", "-f", l])
            .args(extra)
            .output()
            .unwrap()
    } else {
        Command::new(env!("CARGO_BIN_EXE_ibkit"))
            .args(["sm", "--once", "--log-file", l])
            .args(extra)
            .env("IBSIM_SOCKNAME", served.socket())
            .env("RUST_LOG", "info")
            .output()
            .unwrap()
    };
    assert!(out.status.success(), "{who} {extra:?}");
    std::fs::read_to_string(log).unwrap()
}

/// OpenSM's `accum_log_file` and `log_max_size` (`-e` and `-L`), for
/// `ibkit sm --once` and `opensm -o` on the served fabric, each log file
/// first holding 1.5 MiB of an old run's lines: by default both append
/// to it; with `--erase-log-file` (`accum_log_file = false` in the TOML)
/// and OpenSM's `-e` each empties it at the start; with `--log-limit 1`
/// (`log_max_size = 1`) and OpenSM's `-L 1`, each empties it before its
/// first line, the file holding over 1 MiB, and goes on writing.
#[test]
fn the_log_file_is_kept_or_emptied_as_opensms_options_say() {
    if !peers_here("log limits") {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-log-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let toml = dir.join("sm.toml");
    std::fs::write(&toml, "accum_log_file = false\n").unwrap();
    let toml = toml.to_str().unwrap();
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let log = dir.join("sm.log");
    let old = "an old run's line\n".repeat(1536 * 1024 / 18);
    let run = |who: &str, extra: &[&str]| -> String {
        std::fs::write(&log, &old).unwrap();
        let text = run_logging(&served, &dir, &log, who, extra);
        let kept = text.contains("an old run's line");
        println!(
            "{who} {extra:?}: the old lines {}, the file {} bytes",
            if kept { "kept" } else { "gone" },
            text.len()
        );
        assert!(text.len() > 100, "{who} {extra:?}: it wrote its run");
        text
    };
    for (who, extra, kept) in [
        ("OpenSM", &[][..], true),
        ("ibkit", &[][..], true),
        ("OpenSM", &["-e"][..], false),
        ("ibkit", &["--erase-log-file"][..], false),
        ("ibkit", &["--config", toml][..], false),
        ("OpenSM", &["-L", "1"][..], false),
        ("ibkit", &["--log-limit", "1"][..], false),
    ] {
        let text = run(who, extra);
        assert_eq!(text.contains("an old run's line"), kept, "{who} {extra:?}");
        if !kept {
            assert!(
                text.len() < old.len(),
                "{who} {extra:?}: {} bytes",
                text.len()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM's `log_prefix` (its `--log_prefix`): `opensm -o` and `ibkit sm
/// --once` on the served fabric, each given a prefix on its command line,
/// and ibkit given one in an `opensm.conf` too, write it with ": " before
/// the message of every line of their log files; without one, no line
/// has it.
#[test]
fn both_sms_write_the_log_prefix_before_every_message() {
    if !peers_here("log prefix") {
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-prefix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("opensm.conf");
    std::fs::write(&conf, "log_prefix sm-b\nforce_log_flush FALSE\n").unwrap();
    let conf = conf.to_str().unwrap();
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let log = dir.join("sm.log");
    let run = |who: &str, extra: &[&str]| -> Vec<String> {
        let _ = std::fs::remove_file(&log);
        let text = run_logging(&served, &dir, &log, who, extra);
        // Each line's message (a message of many lines: its first):
        // after OpenSM's "0xNN -> ", after ibkit's time and level.
        let lines: Vec<String> = (text.lines())
            .filter_map(|l| match who {
                "OpenSM" => l.split_once(" -> ").map(|(_, m)| m.to_string()),
                _ => {
                    let mut w = l.split_whitespace();
                    let (_, level) = (w.next(), w.next());
                    level
                        .filter(|v| ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(v))
                        .map(|_| w.collect::<Vec<_>>().join(" "))
                }
            })
            .collect();
        assert!(lines.len() > 3, "{who} {extra:?}: {text}");
        lines
    };
    for (who, extra, prefix) in [
        ("OpenSM", &["--log_prefix", "sm-a"][..], Some("sm-a: ")),
        ("ibkit", &["--log-prefix", "sm-a"][..], Some("sm-a: ")),
        ("ibkit", &["--opensm-config", conf][..], Some("sm-b: ")),
        ("OpenSM", &[][..], None),
        ("ibkit", &[][..], None),
    ] {
        let lines = run(who, extra);
        let with = lines
            .iter()
            .filter(|m| prefix.is_some_and(|p| m.starts_with(p)))
            .count();
        println!(
            "{who} {extra:?}: {with} of {} lines with {prefix:?}",
            lines.len()
        );
        match prefix {
            Some(p) => assert!(
                lines.iter().all(|m| m.starts_with(p)),
                "{who} {extra:?}: {lines:#?}"
            ),
            None => assert!(
                !lines
                    .iter()
                    .any(|m| m.starts_with("sm-a: ") || m.starts_with("sm-b: ")),
                "{who}"
            ),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
