//! `ibkit sm` as a site runs it: the systemd unit, the logrotate file and
//! the example configuration under `dist/`, and the signals they rely on
//! (SIGUSR1 reopens the log by its name, SIGHUP re-reads the files,
//! SIGTERM stops), checked on ibkit's served fabric.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tests::peers::Served;

mod common;

/// A file of `dist/`.
fn dist(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../dist")
        .join(name)
}

/// A scratch directory of this test.
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ibkit-service-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Waits until `file` holds `marker`, at most 20 s; what it holds then.
fn wait_in(file: &Path, marker: &str) -> String {
    common::wait_in(file, marker, Duration::from_secs(20))
}

fn signal(sig: &str, child: &Child) {
    common::kill(sig, child.id());
}

/// `ibkit sm` on the served fabric, kept running, its stderr piped.
fn start_sm(served: &Served, args: &[&str]) -> Child {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    common::running_sm(served, &args)
}

/// The served fabric as `ctl dump` writes it.
fn dump(served: &Served, dir: &Path) -> serde_json::Value {
    let f = dir.join("dump.json");
    served.ctl(&format!("dump {}", f.display())).unwrap();
    serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap()
}

/// Every node's name with its LID and LFT, as a dump has them.
fn lids_and_lfts(d: &serde_json::Value) -> Vec<(String, u64, Vec<u64>)> {
    (d["nodes"].as_array().unwrap().iter())
        .map(|n| {
            let name = n["name"].as_str().unwrap().to_string();
            (name, n["lid"].as_u64().unwrap_or(0), common::lft(n))
        })
        .collect()
}

/// The SM's own leaf switch rebooted under a running `ibkit sm`: it logs
/// that its port is down, sends nothing into it meanwhile, and when the
/// switch is back (no LID, no table) logs that its port retrained and
/// sets the subnet as it was: every LID and every LFT entry the same,
/// and a host's membership of the broadcast group kept.
#[test]
fn the_sms_own_leaf_rebooting_is_logged_and_the_subnet_set_again() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = scratch("own-leaf");
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let log = dir.join("sm.log");
    let mut sm = start_sm(
        &served,
        &["--log-file", log.to_str().unwrap(), "--sweep-ms", "300"],
    );
    wait_in(&log, "SUBNET UP");
    let before = dump(&served, &dir);
    // The SM attaches at the simulator's first CA.
    let nodes = before["nodes"].as_array().unwrap();
    let me = nodes.iter().find(|n| n["kind"] == "ca").unwrap();
    let leaf = me["ports"][0]["peer"]["node"].as_str().unwrap().to_string();
    let held = lids_and_lfts(&before);
    assert!(held.iter().all(|(_, lid, _)| *lid != 0), "{held:?}");
    // A host behind another leaf joins the IPoIB broadcast group.
    let joiner = nodes
        .iter()
        .find(|n| {
            n["kind"] == "ca"
                && n["name"] != me["name"]
                && (n["ports"].as_array().unwrap().iter())
                    .all(|p| p["peer"]["node"] != leaf.as_str())
        })
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let members = || {
        let args = ["sa", "mcmember", "--sm-key", "1", "--json", BCAST];
        let out = served.client_on(exe, &joiner).args(args).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut gids: Vec<String> = (v["records"].as_array().unwrap().iter())
            .map(|r| r["port_gid"].to_string())
            .collect();
        gids.sort();
        gids
    };
    let out = (served.client_on(exe, &joiner))
        .args(["sa", "mcmember", "--join", BCAST])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let joined = members();
    assert!(!joined.is_empty());

    served.ctl(&format!("node-down {leaf}")).unwrap();
    wait_in(&log, "SM port is down");
    served.ctl(&format!("node-up {leaf}")).unwrap();
    wait_in(&log, "SM port is Init");
    let t = Instant::now();
    let mut now = lids_and_lfts(&dump(&served, &dir));
    while now != held && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        now = lids_and_lfts(&dump(&served, &dir));
    }
    // No node was taken for lost on the way: the group kept its members.
    let kept = members();
    signal("-TERM", &sm);
    let _ = sm.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(now, held, "the subnet as it was; the log:\n{text}");
    assert_eq!(kept, joined, "the members; the log:\n{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The IPoIB broadcast group of the default partition.
const BCAST: &str = "ff12:401b:ffff::ffff:ffff";

/// What logrotate does without copytruncate: the log moved away, then
/// SIGUSR1. The SM writes to the moved file until the signal, then to a
/// new file of the old name; a file it cannot open again leaves it
/// writing to the one it has, which says so.
#[test]
fn the_log_is_reopened_by_its_name_on_sigusr1_as_logrotate_asks() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = scratch("usr1");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let parts = dir.join("partitions.conf");
    std::fs::write(&parts, "Default=0x7fff,ipoib:ALL=full;\n").unwrap();
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let log = logs.join("sm.log");
    let sm = start_sm(
        &served,
        &[
            "--log-file",
            log.to_str().unwrap(),
            "--partitions",
            parts.to_str().unwrap(),
        ],
    );
    wait_in(&log, "SUBNET UP");

    // Moved: the SM still writes where it wrote (a SIGHUP's line).
    let moved = logs.join("sm.log.1");
    std::fs::rename(&log, &moved).unwrap();
    signal("-HUP", &sm);
    wait_in(&moved, "partitions re-read");
    assert!(!log.exists(), "nothing opens the old name before SIGUSR1");

    // SIGUSR1: a new file of the old name, and the next lines in it.
    signal("-USR1", &sm);
    let fresh = wait_in(&log, "reopened");
    assert!(!fresh.contains("SUBNET UP"), "a new file: {fresh}");
    let old_len = std::fs::metadata(&moved).unwrap().len();
    signal("-HUP", &sm);
    wait_in(&log, "partitions re-read");
    let old = std::fs::read_to_string(&moved).unwrap();
    assert_eq!(
        old.len() as u64,
        old_len,
        "the moved file takes no line after SIGUSR1"
    );
    assert!(
        old.contains("SUBNET UP") && !old.contains("reopened"),
        "{old}"
    );

    // Its directory gone: the SM cannot open the name again, says so in
    // the file it has, and goes on (a SIGHUP is still heard).
    let away = dir.join("logs-away");
    std::fs::rename(&logs, &away).unwrap();
    signal("-USR1", &sm);
    let kept = wait_in(
        &away.join("sm.log"),
        "the log stays in the file already open",
    );
    let n = kept.matches("partitions re-read").count();
    signal("-HUP", &sm);
    let t = Instant::now();
    while std::fs::read_to_string(away.join("sm.log"))
        .unwrap()
        .matches("partitions re-read")
        .count()
        == n
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no line after the failed reopen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!logs.exists(), "nothing made the directory again");

    signal("-TERM", &sm);
    let out = sm.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "the log went to its files: {out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without a log file SIGUSR1 is logged and changes nothing (its default
/// action would end the SM).
#[test]
fn sigusr1_without_a_log_file_leaves_the_sm_running() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let dir = scratch("usr1-stderr");
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    // The LID cache is written once the subnet is up: a sign of life
    // that does not need the piped stderr read meanwhile.
    let sm = start_sm(&served, &["--cache-dir", cache.to_str().unwrap()]);
    wait_in(&cache.join("guid2lid"), "0x");
    signal("-USR1", &sm);
    std::thread::sleep(Duration::from_millis(300));
    signal("-TERM", &sm);
    let out = sm.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "still running at SIGTERM: {out:?}");
    assert!(err.contains("SIGUSR1: no log file to reopen"), "{err}");
    assert!(err.contains("SUBNET UP"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `Key=value` lines of a unit's section `[name]`.
fn section<'a>(unit: &'a str, name: &str) -> Vec<(&'a str, &'a str)> {
    let mut inside = false;
    let mut v = Vec::new();
    for l in unit.lines().map(str::trim) {
        if l.starts_with('[') {
            inside = l == format!("[{name}]");
        } else if inside && !l.is_empty() && !l.starts_with('#') {
            let (k, val) = l.split_once('=').expect("Key=value");
            v.push((k, val));
        }
    }
    v
}

fn key<'a>(s: &[(&'a str, &'a str)], k: &str) -> &'a str {
    s.iter()
        .find(|(x, _)| *x == k)
        .unwrap_or_else(|| panic!("{k} missing"))
        .1
}

/// `ibkit sm`'s options, as the command line takes them.
#[derive(clap::Parser)]
struct Sm {
    #[command(flatten)]
    args: ibkit::cmd::sm::SmArgs,
}

/// The unit's command line is one `ibkit sm` takes (every flag parsed as
/// the binary parses it, the instance's GUID among them); it reloads with
/// SIGHUP, logs where logrotate looks, reads the example configuration
/// where it is installed; and `systemd-analyze verify` (where systemd is
/// installed) finds nothing wrong with it.
#[test]
fn the_service_unit_runs_ibkit_sm_as_it_takes_its_flags() {
    use clap::Parser;
    let text = std::fs::read_to_string(dist("ibkit-sm@.service")).unwrap();
    let service = section(&text, "Service");
    let guid = "0x0002c90300001234";
    let exec = key(&service, "ExecStart").replace("%I", guid);
    let argv: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(argv[..2], ["/usr/local/bin/ibkit", "sm"], "{exec}");
    let sm = Sm::try_parse_from(std::iter::once("ibkit-sm").chain(argv[2..].iter().copied()))
        .unwrap_or_else(|e| panic!("{exec}: {e}"))
        .args;
    assert_eq!(sm.guid, Some(0x0002_c903_0000_1234));
    assert_eq!(sm.transport, "umad");
    assert!(!sm.once, "the service keeps running");
    assert_eq!(sm.config.as_deref(), Some(Path::new("/etc/ibkit/sm.toml")));
    let log = sm.log_file.unwrap();
    let log = log.to_str().unwrap();
    assert_eq!(log, format!("/var/log/ibkit-sm.{guid}.log"));
    assert_eq!(key(&service, "ExecReload"), "/bin/kill -HUP $MAINPID");
    assert_eq!(key(&service, "Type"), "notify");
    assert_eq!(key(&service, "CacheDirectory"), "ibkit");

    // logrotate's pattern takes this log, and its signal reaches the unit.
    let rotate = std::fs::read_to_string(dist("ibkit-sm.logrotate")).unwrap();
    let pattern = rotate
        .lines()
        .find(|l| l.starts_with('/') && l.ends_with('{'))
        .expect("a log pattern")
        .trim_end_matches('{')
        .trim();
    let (before, after) = pattern.split_once('*').expect("one wildcard");
    assert!(
        log.starts_with(before) && log.ends_with(after),
        "{pattern} misses {log}"
    );
    assert!(
        rotate.contains("--signal=SIGUSR1 'ibkit-sm@*.service'"),
        "{rotate}"
    );
    assert!(
        !(rotate.lines()).any(|l| !l.trim_start().starts_with('#') && l.contains("copytruncate")),
        "the SM reopens its log: {rotate}"
    );

    // The example configuration, installed where the unit reads it, takes
    // the unit's cache directory.
    let conf = smd::config::read_sm_file(&dist("sm.toml")).unwrap();
    assert_eq!(
        conf.cache_dir.as_deref(),
        Some(Path::new("/var/cache/ibkit"))
    );

    let Ok(analyze) = which("systemd-analyze") else {
        eprintln!("SKIPPED systemd-analyze verify: systemd is not installed");
        return;
    };
    let dir = scratch("unit");
    let unit = dir.join(format!("ibkit-sm@{guid}.service"));
    let exe = env!("CARGO_BIN_EXE_ibkit");
    std::fs::write(&unit, text.replace("/usr/local/bin/ibkit", exe)).unwrap();
    let out = Command::new(&analyze)
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {err}");
    assert!(!err.contains("ibkit-sm@"), "systemd-analyze verify: {err}");
    // The check can fail: a unit systemd cannot read is said.
    let broken = dir.join(format!("ibkit-sm@{guid}x.service"));
    std::fs::write(
        &broken,
        text.replace("/usr/local/bin/ibkit", exe)
            .replace("Type=notify", "Type=notfy"),
    )
    .unwrap();
    let out = Command::new(&analyze)
        .arg("verify")
        .arg(&broken)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("notfy"),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `program` on PATH.
fn which(program: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}

/// The example configuration reads as it stands, and with every example
/// line taken in (`# key = value` uncommented) it sets every key
/// `ibkit sm --config` knows: the file shows them all, each with a value
/// the SM takes.
#[test]
fn the_example_configuration_shows_every_key_with_a_value_that_reads() {
    let text = std::fs::read_to_string(dist("sm.toml")).unwrap();
    let as_is = smd::config::read_sm_file(&dist("sm.toml")).unwrap();
    assert_eq!(as_is.priority, Some(0));
    let every: String = text
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if rest.split_once(" = ").is_some_and(|(k, _)| {
                    k.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                }) =>
            {
                rest
            }
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dir = scratch("conf");
    let f = dir.join("sm.toml");
    std::fs::write(&f, every).unwrap();
    let all = smd::config::read_sm_file(&f).unwrap_or_else(|e| panic!("{e}"));
    let shown = format!("{all:?}");
    assert!(
        !shown.contains("None"),
        "a key the example does not show: {shown}"
    );
    // The same with the keys the parser knows, taken from its refusal of
    // one it does not: nothing it names is missing above.
    std::fs::write(&f, "no_such_key = 1\n").unwrap();
    let refusal = smd::config::read_sm_file(&f).unwrap_err().to_string();
    for k in ["priority", "routing", "cache_dir", "sm_assigned_guid"] {
        assert!(refusal.contains(k), "{refusal}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the container's driver does, step by step, each outcome a line
/// of `/ibkit-out/steps`: the unit as shipped on a machine without umad
/// (its condition keeps it from starting), then with libumad2sim's
/// environment in a drop-in (the simulator's port stands for the HCA's),
/// `systemctl enable --now` (which returns once the SM says READY=1, the
/// subnet up), `reload`, Debian's logrotate with the shipped
/// file, a crash (SIGKILL) that `Restart=on-failure` restarts, and `stop`.
const DRIVE: &str = r#"set -u
g=$1; u="ibkit-sm@$g.service"; log="/var/log/ibkit-sm.$g.log"; out=/ibkit-out
say() { echo "$*" >> $out/steps; }
# wait_for FILE TEXT [COUNT]: until FILE holds TEXT COUNT times, at most 40 s.
wait_for() {
    i=0
    while [ "$(grep -c "$2" "$1" 2>/dev/null || true)" -lt "${3:-1}" ]; do
        i=$((i+1)); [ $i -gt 400 ] && return 1; sleep 0.1
    done
}
systemctl start "$u"
say "condition $(systemctl show -p ConditionResult --value "$u") $(systemctl is-active "$u")"
mkdir -p "/run/systemd/system/ibkit-sm@.service.d"
cat > "/run/systemd/system/ibkit-sm@.service.d/umad2sim.conf" <<CONF
[Unit]
ConditionPathExists=
[Service]
Environment=LD_PRELOAD=$UMAD2SIM IBSIM_SOCKNAME=$SOCK SIM_HOST=$HOST
WorkingDirectory=/tmp
CONF
systemctl daemon-reload
systemctl enable --now "$u"; say "enable $? $(systemctl is-enabled "$u")"
# Type=notify: started (enable --now returns) once the subnet is up.
say "ready $(grep -c "SUBNET UP" "$log") $(systemctl show -p StatusText --value "$u" | cut -d, -f1)"
wait_for "$log" "SUBNET UP" && say "up $(systemctl is-active "$u")"
systemctl reload "$u"; say "reload $?"
# RELOADING=1, then READY=1 once the files are read again: active, not
# left reloading.
wait_for "$log" "SIGHUP: heavy sweep requested" && sleep 0.2 && say "reloaded $(systemctl is-active "$u")"
logrotate -f -s /tmp/logrotate.state /ibkit-test/ibkit-sm.logrotate; say "logrotate $?"
wait_for "$log" "reopened" && say "reopened"
grep -q "SUBNET UP" "$log.1" && say "rotated"
cp /var/cache/ibkit/guid2lid $out/guid2lid.before
pid=$(systemctl show -p MainPID --value "$u")
systemctl kill --signal=SIGKILL "$u"
wait_for "$log" "SUBNET UP" && say "restarted $(systemctl show -p NRestarts --value "$u") $([ "$(systemctl show -p MainPID --value "$u")" != "$pid" ] && echo new-pid)"
cp /var/cache/ibkit/guid2lid $out/guid2lid.after
systemctl stop "$u"; say "stop $?"
say "stopped $(systemctl show -p Result --value "$u") $(systemctl show -p ExecMainStatus --value "$u") $(systemctl is-active "$u")"
cp "$log" "$log.1" $out/
systemctl poweroff
"#;

/// The shipped unit, run by systemd itself: Debian's systemd as PID 1 of
/// a container (`systemd-nspawn --volatile=yes`: the machine's `/usr`,
/// an empty `/etc` and `/var`), with the unit, `sm.toml` and the
/// logrotate file of `dist/` installed where they go and the test's
/// `ibkit` as `/usr/local/bin/ibkit`. The container has no InfiniBand
/// port, so the SM reaches ibkit's served fabric through libumad2sim,
/// given in a drop-in; everything else is the unit as a site installs it.
/// Needs root, systemd-nspawn (Debian's systemd-container), logrotate and
/// the peer tools.
#[test]
fn the_unit_runs_under_systemd() {
    let test = "the_unit_runs_under_systemd";
    let nspawn = which("systemd-nspawn");
    let logrotate = which("logrotate");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let Some(umad2sim) = tests::peers::umad2sim() else {
        common::skip(test, "libumad2sim is not installed");
        return;
    };
    if nspawn.is_err() || logrotate.is_err() || !root {
        common::skip(
            test,
            "needs root, systemd-nspawn (systemd-container) and logrotate",
        );
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let host =
        tests::peers::first_ca(&fabric::topology::Topology::from_spec(spec).unwrap()).unwrap();
    let served = Served::start(exe, spec, 0, &[]).unwrap();
    let ibstat = served
        .client_on("ibstat", &host)
        .arg("-p")
        .output()
        .unwrap();
    let guid = String::from_utf8_lossy(&ibstat.stdout).trim().to_string();
    assert!(guid.starts_with("0x"), "ibstat -p: {ibstat:?}");

    let dir = scratch("systemd");
    let (t, out, bin) = (dir.join("t"), dir.join("out"), dir.join("bin"));
    for d in [&t, &out, &bin] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        t.join("drive.sh"),
        DRIVE
            .replace("$UMAD2SIM", umad2sim.to_str().unwrap())
            .replace("$SOCK", served.socket())
            .replace("$HOST", &host),
    )
    .unwrap();
    std::fs::copy(dist("ibkit-sm.logrotate"), t.join("ibkit-sm.logrotate")).unwrap();
    std::fs::write(
        t.join("ibkit-test.service"),
        format!(
            "[Unit]\nDescription=the test's driver\nAfter=basic.target\n\
             [Service]\nType=oneshot\nTimeoutStartSec=200\n\
             ExecStart=/bin/sh /ibkit-test/drive.sh {guid}\n\
             StandardOutput=append:/ibkit-out/drive.log\n\
             StandardError=append:/ibkit-out/drive.log\n"
        ),
    )
    .unwrap();
    if std::fs::hard_link(exe, bin.join("ibkit")).is_err() {
        std::fs::copy(exe, bin.join("ibkit")).unwrap();
    }
    let bind = |from: &Path, to: &str| format!("--bind-ro={}:{to}", from.display());
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let name = format!(
        "ibkit-test-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let console = Command::new("timeout")
        .arg("180")
        .arg(nspawn.unwrap())
        .args(["-q", "--keep-unit", "--register=no", "-M", &name])
        .args(["--directory=/", "--volatile=yes"])
        .arg(bind(&t, "/ibkit-test"))
        .arg(format!("--bind={}:/ibkit-out", out.display()))
        .arg(bind(
            &t.join("ibkit-test.service"),
            "/etc/systemd/system/ibkit-test.service",
        ))
        .arg(bind(
            &dist("ibkit-sm@.service"),
            "/etc/systemd/system/ibkit-sm@.service",
        ))
        .arg(bind(&dist("sm.toml"), "/etc/ibkit/sm.toml"))
        .arg(bind(&bin, "/usr/local/bin"))
        // No first-boot wizard: it waits for a key on the console.
        .args(["--boot", "systemd.firstboot=no"])
        .arg("systemd.wants=ibkit-test.service")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    let steps = read("steps");
    let why = format!(
        "steps:\n{steps}\ndriver: {}\nconsole: {}",
        read("drive.log"),
        String::from_utf8_lossy(&console.stdout)
    );
    assert!(console.status.success(), "systemd-nspawn: {why}");
    let lines: Vec<&str> = steps.lines().collect();
    let expected = [
        // No umad here: the condition keeps the unit from starting.
        "condition no inactive".to_string(),
        "enable 0 enabled".into(),
        "ready 1 master: subnet up".into(),
        "up active".into(),
        "reload 0".into(),
        "reloaded active".into(),
        "logrotate 0".into(),
        "reopened".into(),
        "rotated".into(),
        "restarted 1 new-pid".into(),
        "stop 0".into(),
        "stopped success 0 inactive".into(),
    ];
    assert_eq!(lines, expected, "{why}");
    // The restarted SM read the LID cache of the first and gave every
    // port its LID again.
    let (before, after) = (read("guid2lid.before"), read("guid2lid.after"));
    assert_eq!(before.lines().filter(|l| l.starts_with("0x")).count(), 14);
    assert_eq!(before, after);
    let log = read(&format!("ibkit-sm.{guid}.log"));
    assert!(
        log.contains("guid2lid: 14 ") && log.contains("from /var/cache/ibkit/guid2lid"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ibkit vm` against a running `ibkit sm --vm-socket` on the served
/// vSwitch fabric: a VM started on one hypervisor is up in its VF with
/// its LID; migrated, it keeps that LID and vGUID in a VF of the other
/// hypervisor, and every switch forwards the LID there; a hypervisor
/// brought back with fewer VFs (`ctl node-vfs`) loses the VM in the VF it
/// lost, which the SM logs and no longer lists. Refused requests exit
/// non-zero with the SM's reason and change nothing; a client that sends
/// nothing holds nothing up.
#[test]
fn vms_are_started_migrated_and_lost_through_the_sms_vm_socket() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = scratch("vm-socket");
    let served = Served::start(exe, "mport-ntree:4:2", 2, &[]).unwrap();
    let (log, sock) = (dir.join("sm.log"), dir.join("vm.sock"));
    let mut sm = start_sm(
        &served,
        &[
            "--log-file",
            log.to_str().unwrap(),
            "--vm-socket",
            sock.to_str().unwrap(),
        ],
    );
    wait_in(&log, "SUBNET UP");
    let vm = |words: &[&str]| {
        let out = Command::new(exe)
            .args(["vm", "--socket", sock.to_str().unwrap()])
            .args(words)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        (out.status.code(), text, err)
    };
    let json = |t: &str| -> serde_json::Value { serde_json::from_str(t).unwrap() };
    let d = dump(&served, &dir);
    let nodes = d["nodes"].as_array().unwrap().clone();
    let hyps: Vec<&serde_json::Value> = nodes
        .iter()
        .filter(|n| n["vfs"].as_array().is_some_and(|v| v.len() == 2))
        .collect();
    assert!(hyps.len() >= 2, "{d}");
    let (a, b) = (hyps[0], hyps[hyps.len() - 1]);
    let name = |n: &serde_json::Value| n["name"].as_str().unwrap().to_string();
    let guid = |n: &serde_json::Value| n["guid"].as_str().unwrap().to_string();
    let vf_of = |d: &serde_json::Value, node: &str, lid: u64| -> Option<u64> {
        let n = (d["nodes"].as_array().unwrap().iter()).find(|n| n["name"] == node)?;
        (n["vfs"].as_array()?.iter()).find(|v| v["lid"] == lid && v["state"] == 4)?;
        Some(lid)
    };

    // A host subscribed to trap 64 (GID in service) through the SA.
    let listen = |trap: &str| {
        let child = (served.client_on(exe, &name(hyps[1])))
            .args([
                "sa",
                "inform",
                "--subscribe",
                "--trap",
                trap,
                "--count",
                "1",
                "--json",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Its InformInfo Set is answered within milliseconds.
        std::thread::sleep(Duration::from_millis(500));
        child
    };
    let heard = |child: Child| -> String {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["details"]["gid"].as_str().unwrap_or_default().to_string()
    };
    let in_service = listen("64");

    // Started on A, two VMs.
    let (code, out, err) = vm(&["create", &guid(a), "0xe1"]);
    assert_eq!(code, Some(0), "{err}");
    let e1 = json(&out);
    let lid = e1["lid"].as_u64().unwrap();
    assert_eq!(e1["vguid"], "0x00000000000000e1");
    assert_eq!(
        heard(in_service),
        "0xfe8000000000000000000000000000e1",
        "the subscriber hears trap 64 for the VM"
    );
    let (code, out, err) = vm(&["create", &guid(a), "0xe2"]);
    assert_eq!(code, Some(0), "{err}");
    let e2 = json(&out);
    assert_eq!(e2["vf"], 2);
    let d = dump(&served, &dir);
    assert_eq!(vf_of(&d, &name(a), lid), Some(lid), "VM e1 up in A's VF");

    // A third host resolves the VM's path through the SA, by its GID.
    let c = name(hyps[1]);
    let c_lid = hyps[1]["lid"].as_u64().unwrap();
    let slid = format!("slid={c_lid}");
    let path = || {
        let out = (served.client_on(exe, &c))
            .args(["sa", "path", &slid, "dgid=fe80::e1", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["records"][0].clone()
    };
    let before = path();
    // infiniband-diags' ibtracert, from the third host to the VM's LID,
    // follows the switches' LFTs: it ends at the hypervisor that runs it.
    // (Without libumad2sim and infiniband-diags that check is skipped.)
    let tracer = tests::peers::umad2sim().is_some() && which("ibtracert").is_ok()
        || !common::skip(
            "vms_are_started_migrated_and_lost_through_the_sms_vm_socket (ibtracert)",
            "libumad2sim or infiniband-diags' ibtracert is not installed",
        );
    let trace_end = || {
        if !tracer {
            return String::new();
        }
        let out = (served.client_on("ibtracert", &c))
            .args([c_lid.to_string(), lid.to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "ibtracert {c_lid} {lid}: {out:?}");
        let last = text.lines().rfind(|l| l.starts_with("To ")).unwrap_or("");
        last.rsplit('"').nth(1).unwrap_or_default().to_string()
    };
    let traced_before = trace_end();
    if tracer {
        assert_eq!(traced_before, name(a), "ibtracert to the VM's LID");
    }
    assert_eq!(before["dlid"].as_u64(), Some(lid), "{before}");
    assert_eq!(before["slid"].as_u64(), Some(c_lid), "{before}");
    assert_eq!(before["dgid"], "0xfe8000000000000000000000000000e1");

    // Migrated to B: the same LID, up in B's VF, and every switch's LFT
    // leads there.
    let (code, out, err) = vm(&["migrate", "0xe1", &guid(b)]);
    assert_eq!(code, Some(0), "{err}");
    let moved = json(&out);
    assert_eq!(moved["lid"].as_u64(), Some(lid), "{moved}");
    assert_eq!(moved["from"], e1["hypervisor"]);
    assert!(moved["lft_blocks"].as_u64().unwrap() > 0);
    // Answered once every switch and both hypervisors acknowledged.
    assert_eq!(moved["in_place"], true, "{moved}");
    eprintln!(
        "migrate: {} LFT block(s) on {} switch(es), in place {} ms after the request",
        moved["lft_blocks"], moved["switches"], moved["in_place_ms"]
    );
    let d = dump(&served, &dir);
    assert_eq!(vf_of(&d, &name(b), lid), Some(lid), "VM e1 up in B's VF");
    assert_eq!(vf_of(&d, &name(a), lid), None, "and no longer in A's");
    let by_name = |d: &serde_json::Value, n: &str| {
        (d["nodes"].as_array().unwrap().iter())
            .find(|x| x["name"] == n)
            .unwrap()
            .clone()
    };
    for s in nodes.iter().filter(|n| n["kind"] == "switch") {
        let mut at = by_name(&d, &name(s));
        let mut hops = 0;
        while at["kind"] == "switch" {
            let out = common::lft(&at)[lid as usize];
            let port = (at["ports"].as_array().unwrap().iter())
                .find(|p| p["port"] == out)
                .unwrap_or_else(|| panic!("{} forwards {lid} to port {out}", name(&at)));
            at = by_name(&d, port["peer"]["node"].as_str().unwrap());
            hops += 1;
            assert!(hops < 8, "a loop for LID {lid}");
        }
        assert_eq!(name(&at), name(b), "from {}", name(s));
    }
    if tracer {
        assert_eq!(trace_end(), name(b), "ibtracert to the VM's LID, migrated");
        eprintln!(
            "ibtracert {c_lid} {lid}: to {traced_before} before the migration, to {} after",
            name(b)
        );
    }

    // The host's PathRecord to the VM names the same LID and GIDs after
    // the move: what it cached stays valid.
    let after = path();
    for k in ["dlid", "slid", "dgid", "sgid", "pkey", "sl", "mtu"] {
        assert_eq!(after[k], before[k], "{k}: {before} then {after}");
    }

    // Refused: a switch is no hypervisor, a vGUID in use, a VM that is
    // not there, a request that is not one.
    let sw = nodes.iter().find(|n| n["kind"] == "switch").unwrap();
    let (code, _, err) = vm(&["create", &guid(sw), "0xe3"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not a hypervisor"), "{err}");
    let (code, _, err) = vm(&["create", &guid(a), "0xe1"]);
    assert_eq!(code, Some(1), "{err}");
    let (code, _, err) = vm(&["destroy", "0xe9"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no VM has vGUID"), "{err}");
    let (code, _, err) = vm(&["reboot", "0xe1"]);
    assert_eq!(code, Some(2), "{err}");
    // A client that connects and sends nothing is dropped after a
    // second; the others are served meanwhile.
    let silent = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let (code, out, _) = vm(&["list"]);
    assert_eq!(code, Some(0));
    assert_eq!(json(&out).as_array().unwrap().len(), 2);

    // A back with one VF: e2 (in VF 2) is lost, e1 (on B) is not.
    served.ctl(&format!("node-down {}", name(a))).unwrap();
    served.ctl(&format!("node-vfs {} 1", name(a))).unwrap();
    served.ctl(&format!("node-up {}", name(a))).unwrap();
    wait_in(&log, "VM 2 (vGUID 0x00000000000000e2, LID");
    let (code, out, _) = vm(&["list"]);
    assert_eq!(code, Some(0));
    let left = json(&out);
    assert_eq!(left.as_array().unwrap().len(), 1, "{left}");
    assert_eq!(left[0]["vguid"], "0x00000000000000e1");
    // The silent client was told why it was dropped.
    let mut said = String::new();
    let mut silent = silent;
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    std::io::Read::read_to_string(&mut silent, &mut said).unwrap();
    assert_eq!(said.trim(), "error: no request within a second");

    let out_of_service = listen("65");
    let (code, _, err) = vm(&["destroy", "0xe1"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        heard(out_of_service),
        "0xfe8000000000000000000000000000e1",
        "and trap 65 when it stops"
    );
    let d = dump(&served, &dir);
    assert_eq!(vf_of(&d, &name(b), lid), None, "its VF is down");
    signal("-TERM", &sm);
    assert!(sm.wait().unwrap().success());
    assert!(!sock.exists(), "the socket is removed at the stop");
    let _ = std::fs::remove_dir_all(&dir);
}
