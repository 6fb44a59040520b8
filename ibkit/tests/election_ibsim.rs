//! ibkit's SM beside OpenSM on one ibsim fabric (IBA 14.4 election):
//! who is master is read with `sminfo` (infiniband-diags) and the LIDs
//! with `ibnetdiscover`, neither of which ibkit wrote.
//!
//! * OpenSM master (priority 10), ibkit started after it (priority 0):
//!   ibkit stands by and polls; OpenSM killed with SIGKILL, ibkit takes
//!   the subnet over within its detection time plus a bring-up, keeping
//!   every LID OpenSM gave.
//! * ibkit master (priority 10), OpenSM started after it (priority 1):
//!   OpenSM stands by, polling ibkit's SMInfo; ibkit stopped with
//!   SIGTERM hands the subnet to OpenSM first, and OpenSM is master at
//!   once, not after its polling timeout.

use fabric::topology::Topology;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tests::peers::{
    missing_tools, start_opensm_at, start_opensm_cached_at, Ibsim, Served, Simulator, WatchedSm,
};
use tests::skip;

mod common;

/// One simulator and two SMs at a time: they share two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn peers_here() -> bool {
    if let Some(why) = missing_tools() {
        skip("election_ibsim", &why);
        return false;
    }
    for tool in ["/usr/sbin/sminfo", "/usr/sbin/ibnetdiscover"] {
        if !Path::new(tool).exists() {
            skip("election_ibsim", &format!("{tool} is not installed"));
            return false;
        }
    }
    true
}

/// On ibkit's served fabric, the client reregistrations each cabled end
/// port has been asked for so far ([`common::reregistrations`]); `None`
/// on ibsim, which keeps no count (nor the bit).
fn reregs(sim: &dyn Simulator, dir: &Path) -> Option<BTreeMap<(String, u8), u64>> {
    let file = dir.join("state.json");
    let said = sim.control(&format!("dump {}", file.display()))?;
    said.unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    Some(common::reregistrations(
        &serde_json::from_str(&text).unwrap(),
    ))
}

/// [`reregs`], where the served fabric keeps them, each port asked once
/// so far (by `who`, the only master yet).
fn asked_once(sim: &dyn Simulator, dir: &Path, who: &str) -> Option<BTreeMap<(String, u8), u64>> {
    let asked = reregs(sim, dir)?;
    let none = BTreeMap::new();
    assert_eq!(
        common::not_asked(&none, &asked, 1),
        Vec::<String>::new(),
        "{who}"
    );
    Some(asked)
}

/// `saquery SMIR` from `host`: each SMInfoRecord's (GUID, priority,
/// state), sorted.
fn smir(sim: &dyn Simulator, host: &str) -> Vec<(u64, u8, u8)> {
    let out = (sim.client_at("saquery".as_ref(), host))
        .arg("SMIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "saquery SMIR: {text}");
    let value = |l: &str| l.trim().rsplit('.').next().unwrap_or("").to_string();
    let mut v = Vec::new();
    let mut guid = None;
    let mut prio = None;
    for l in text.lines() {
        let t = l.trim();
        if t.starts_with("GUID") {
            guid = u64::from_str_radix(value(t).trim_start_matches("0x"), 16).ok();
        } else if t.starts_with("Priority") {
            prio = value(t).parse().ok();
        } else if t.starts_with("SMState") {
            if let (Some(g), Some(p), Ok(st)) = (guid, prio, value(t).parse()) {
                v.push((g, p, st));
            }
        }
    }
    v.sort();
    v
}

/// SMInfoRecords `listed` are the master's (GUID, priority), state
/// Master (3), and the other SM's, Discovering (1) or Standby (2): the
/// state the master last read, as both OpenSM's SA and ibkit's keep it.
/// The other SM may be missing only where `must_list` is false (OpenSM
/// lists a standby once a sweep of its has read the standby's SMInfo).
fn assert_other_sm(
    listed: &[(u64, u8, u8)],
    master: (u64, u8),
    other: (u64, u8),
    must_list: bool,
    whose: &str,
) {
    assert!(
        listed.contains(&(master.0, master.1, 3)),
        "{whose}: {listed:x?}"
    );
    let others: Vec<_> = listed.iter().filter(|&&(g, _, _)| g != master.0).collect();
    assert!(others.len() <= 1, "{whose}: {listed:x?}");
    assert!(!must_list || others.len() == 1, "{whose}: {listed:x?}");
    for &&(g, p, s) in &others {
        assert!(
            (g, p) == other && (s == 1 || s == 2),
            "{whose}: {listed:x?}"
        );
    }
}

/// `sminfo` from `host`: (the master's port GUID, its state number).
fn sminfo(sim: &dyn Simulator, host: &str) -> Result<(u64, u8), String> {
    tests::peers::sminfo(sim, host, &[]).map(|s| (s.guid, s.state))
}

/// Waits until `sminfo` from `host` names `guid` as master (state 3).
fn master_is(sim: &dyn Simulator, host: &str, guid: u64, wait: Duration) -> Result<(), String> {
    let t = Instant::now();
    loop {
        let r = sminfo(sim, host);
        if r == Ok((guid, 3)) {
            return Ok(());
        }
        if t.elapsed() > wait {
            return Err(format!("master is not {guid:#x} after {wait:?}: {r:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every port's LID as `ibnetdiscover` from `host` reads it: node GUID →
/// LID (a switch's header line; a CA's, on the switch port it is cabled
/// to: `[1] "H-…"[1](…) # "H-6" lid 13 4xQDR`).
fn lids(sim: &dyn Simulator, host: &str) -> BTreeMap<u64, u16> {
    let out = sim
        .client_at("ibnetdiscover".as_ref(), host)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut m = BTreeMap::new();
    for l in text.lines() {
        if !(l.starts_with('[') || l.starts_with("Switch")) {
            continue;
        }
        let guid = l
            .split('"')
            .nth(1)
            .and_then(|q| q.split('-').nth(1))
            .and_then(|g| u64::from_str_radix(g, 16).ok());
        let lid = l
            .split(" lid ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok());
        if let (Some(g), Some(lid)) = (guid, lid) {
            m.insert(g, lid);
        }
    }
    m
}

/// The CA hosts of `topo` (names) and their port GUIDs.
fn hosts(topo: &Topology) -> Vec<(String, u64)> {
    (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| (n.name.clone(), n.guid + 1))
        .collect()
}

/// A simulator of `spec`: Debian's ibsim, or ibkit's served fabric.
type Start = fn(&Topology, &str, &Path) -> Box<dyn Simulator>;

const SIMULATORS: [(&str, Start); 2] = [
    ("ibsim", |topo, _, dir| {
        Box::new(Ibsim::start_with(topo, dir, false).unwrap())
    }),
    ("served", |_, spec, _| {
        Box::new(Served::start(Path::new(env!("CARGO_BIN_EXE_ibkit")), spec, 0, &[]).unwrap())
    }),
];

#[test]
fn ibkit_stands_by_for_opensm_and_takes_over_when_it_dies() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (what, start) in SIMULATORS {
        stands_by_then_takes_over(what, start);
    }
}

fn stands_by_then_takes_over(what: &str, start: Start) {
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-election-a-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let h = hosts(&topo);
    let (osm_host, ibkit_host, viewer) = (&h[0].0, &h[1].0, &h[2].0);
    let sim = start(&topo, spec, &dir);
    let sim = &*sim;
    let wait = Duration::from_secs(30);
    let mut osm = start_opensm_at(sim, osm_host, &dir, wait, &["-p", "10"], "SUBNET UP").unwrap();
    master_is(sim, viewer, h[0].1, wait).unwrap();
    let before = lids(sim, viewer);
    assert!(before.len() >= h.len(), "{before:?}");
    // OpenSM's first master sweep asked every end port's clients to
    // reregister (ClientReregister), once.
    let asked = asked_once(sim, &dir, "OpenSM");

    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let mut ibkit = WatchedSm::start(exe, sim, ibkit_host, &["--priority", "0"]).unwrap();
    ibkit.wait_for("Entering STANDBY state", wait).unwrap();
    // A standby changes nothing: OpenSM is still master, LIDs as they were.
    std::thread::sleep(Duration::from_secs(2));
    master_is(sim, viewer, h[0].1, wait).unwrap();
    assert_eq!(
        reregs(sim, &dir),
        asked,
        "a standby asked for reregistration"
    );
    assert!(
        !ibkit.seen.iter().any(|(_, l)| l.contains("SUBNET UP")),
        "a standby brought the subnet up"
    );
    // `sminfo LID` asks ibkit's SM itself (this infiniband-diags has no
    // `smpquery sminfo`): STANDBY, priority 0.
    let ibkit_lid = before[&(h[1].1 - 1)].to_string();
    let seen = tests::peers::sminfo(sim, viewer, &[&ibkit_lid]).unwrap();
    assert_eq!((seen.guid, seen.state, seen.priority), (h[1].1, 2, 0));
    // OpenSM's SA lists both SMs: itself master, ibkit as it last read
    // it (standing by, or still discovering when OpenSM's sweep met it).
    let listed = smir(sim, viewer);
    println!("{what}: OpenSM's SMInfoRecords (GUID, priority, state): {listed:x?}");
    assert_other_sm(&listed, (h[0].1, 10), (h[1].1, 0), false, "OpenSM's");
    // The SA answers only for a master with the subnet up (C15-0.1.3):
    // asked at the standby's own LID, ibkit's SA says nothing; OpenSM's,
    // at the master's, answers.
    let cpi = |lid: &str| {
        let out = (sim.client_at(exe.as_os_str(), viewer))
            .args(["sa", "classportinfo", "--sm-lid", lid])
            .args(["--attempts", "1", "--timeout-ms", "500", "--json"])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let osm_lid = before[&(h[0].1 - 1)].to_string();
    let (ok, err) = cpi(&osm_lid);
    assert!(ok, "{what}: OpenSM's SA at LID {osm_lid}: {err}");
    let (ok, err) = cpi(&ibkit_lid);
    assert!(!ok, "{what}: a standby's SA answered at LID {ibkit_lid}");
    println!(
        "{what}: the standby's SA at LID {ibkit_lid}: {}",
        err.trim()
    );

    let killed = Instant::now();
    osm.kill();
    let master_at = ibkit.wait_for("Entering MASTER state", wait).unwrap();
    let up_at = ibkit.wait_for("SUBNET UP", wait).unwrap();
    master_is(sim, viewer, h[1].1, wait).unwrap();
    let after = lids(sim, viewer);
    let detect = master_at.duration_since(killed);
    let takeover = up_at.duration_since(killed);
    println!(
        "{what}: OpenSM killed: ibkit master after {:.0} ms, subnet up after {:.0} ms; {} LIDs kept",
        detect.as_secs_f64() * 1e3,
        takeover.as_secs_f64() * 1e3,
        after
            .iter()
            .filter(|(g, l)| before.get(g) == Some(l))
            .count()
    );
    assert_eq!(before, after, "LIDs changed at the takeover");
    // Its SA holds none of the hosts' state OpenSM's held: every end port
    // was asked once more to reregister, as OpenSM's first master sweep
    // asks.
    if let Some(a) = &asked {
        let now = reregs(sim, &dir).unwrap();
        assert_eq!(
            common::not_asked(a, &now, 1),
            Vec::<String>::new(),
            "{what}"
        );
        println!("{what}: every one of {} end ports asked to reregister once by OpenSM, once more by ibkit taking over", now.len());
    }
    // Master now, with the subnet up: its SA answers at its LID.
    let (ok, err) = cpi(&ibkit_lid);
    assert!(ok, "{what}: the new master's SA at LID {ibkit_lid}: {err}");
    // The new master read every switch's LFT back, kept OpenSM's
    // entries where they are shortest paths, and sent only blocks that
    // still differ.
    ibkit.wait_for("LFT blocks:", wait).unwrap();
    let lfts = ibkit.seen.last().unwrap().1.clone();
    let nums: Vec<u64> = (lfts.split("LFT blocks:").nth(1).unwrap())
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let switches = topo.switches() as u64;
    assert_eq!(nums[0], switches, "one block per switch read: {lfts}");
    assert_eq!(
        nums[1] + nums[2],
        switches,
        "each block kept or sent: {lfts}"
    );
    println!("{what}: {lfts}");
    // Detection: a poll interval (500 ms) and four tries of 200 ms, with
    // room for a loaded machine.
    assert!(detect < Duration::from_secs(3), "{detect:?}");
    let (clean, _) = ibkit.stop(Duration::from_secs(10));
    assert!(clean, "ibkit sm exits cleanly on SIGTERM");
}

#[test]
fn opensm_stands_by_for_ibkit_and_sigterm_hands_the_subnet_over() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (what, start) in SIMULATORS {
        hands_over_on_sigterm(what, start);
    }
}

fn hands_over_on_sigterm(what: &str, start: Start) {
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-election-b-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let h = hosts(&topo);
    let (ibkit_host, osm_host, viewer) = (&h[0].0, &h[1].0, &h[2].0);
    let sim = start(&topo, spec, &dir);
    let sim = &*sim;
    let wait = Duration::from_secs(30);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let mut ibkit = WatchedSm::start(exe, sim, ibkit_host, &["--priority", "10"]).unwrap();
    ibkit.wait_for("SUBNET UP", wait).unwrap();
    master_is(sim, viewer, h[0].1, wait).unwrap();
    let before = lids(sim, viewer);
    let asked = asked_once(sim, &dir, "ibkit");

    let osm = start_opensm_at(
        sim,
        osm_host,
        &dir,
        wait,
        &["-p", "1"],
        "Entering STANDBY state",
    )
    .unwrap();
    master_is(sim, viewer, h[0].1, wait).unwrap();
    // OpenSM's first poll reaches ibkit, which asks it back and learns
    // a standby is there.
    std::thread::sleep(Duration::from_secs(2));
    // ibkit's SA lists both SMs, as OpenSM's does in the other order:
    // itself master, OpenSM as it last read it.
    let listed = smir(sim, viewer);
    println!("{what}: ibkit's SMInfoRecords (GUID, priority, state): {listed:x?}");
    assert_other_sm(&listed, (h[0].1, 10), (h[1].1, 1), true, "ibkit's");

    let t = Instant::now();
    let sigterm = seconds_of_day(std::time::SystemTime::now());
    let (clean, seen) = ibkit.stop(Duration::from_secs(10));
    let stopped = t.elapsed();
    let said: Vec<&str> = seen.iter().map(|(_, l)| l.as_str()).collect();
    assert!(clean, "ibkit sm exits cleanly after the handover: {said:?}");
    assert!(
        said.iter().any(|l| l.contains("Handing over to SM")),
        "no handover: {said:?}"
    );
    master_is(sim, viewer, h[1].1, Duration::from_secs(60)).unwrap();
    let new_master = t.elapsed();
    let log = std::fs::read_to_string(dir.join("opensm.log")).unwrap();
    // OpenSM's own clock: its log line's time of day.
    let master_at = (log.lines())
        .filter(|l| l.contains("Entering MASTER state"))
        .find_map(log_time)
        .expect("OpenSM's log: no MASTER");
    let handover = master_at - sigterm;
    let after = lids(sim, viewer);
    println!(
        "{what}: ibkit stopped after {:.0} ms; OpenSM entered MASTER {:.1} ms after SIGTERM (its log); \
         sminfo named it {:.0} ms after; {} of {} LIDs kept",
        stopped.as_secs_f64() * 1e3,
        handover * 1e3,
        new_master.as_secs_f64() * 1e3,
        after
            .iter()
            .filter(|(g, l)| before.get(g) == Some(l))
            .count(),
        before.len()
    );
    assert!(
        handover > 0.0 && handover < 0.1,
        "handover took {handover} s"
    );
    assert_eq!(before, after, "LIDs changed at the handover");
    // OpenSM, master after the handover, asks every end port once more to
    // reregister, as ibkit does taking over: once its first sweep as
    // master is done.
    if let Some(a) = &asked {
        let t = Instant::now();
        let now = loop {
            let now = reregs(sim, &dir).unwrap();
            if common::not_asked(a, &now, 1).is_empty() || t.elapsed() > Duration::from_secs(20) {
                break now;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(
            common::not_asked(a, &now, 1),
            Vec::<String>::new(),
            "{what}"
        );
        println!("{what}: every one of {} end ports asked to reregister once by ibkit, once more by OpenSM after the handover", now.len());
    }
    drop(osm);
}

/// Seconds since midnight UTC of `t`.
fn seconds_of_day(t: std::time::SystemTime) -> f64 {
    let s = t
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    s % 86_400.0
}

/// The time of day of an OpenSM log line (`Nov 25 18:02:22 241668 […]`:
/// seconds and microseconds; the machine's clock is UTC).
fn log_time(l: &str) -> Option<f64> {
    let mut w = l.split_whitespace().skip(2);
    let hms: Vec<f64> = w
        .next()?
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let us: f64 = w.next()?.parse().ok()?;
    (hms.len() == 3).then(|| hms[0] * 3600.0 + hms[1] * 60.0 + hms[2] + us / 1e6)
}

/// An SM of the first kind (priority 5) is master; one of the second
/// kind (priority 10) starts after it. What `sminfo` says, and when.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Ibkit,
    OpenSm,
}

/// Starts an SM of `kind` at `host` with `priority`; waits for `marker`
/// in its log. OpenSM polls its master every second (`-F` with
/// `sminfo_polling_timeout 1000`), sweeps every 2 s.
fn start_sm(
    kind: Kind,
    sim: &dyn Simulator,
    host: &str,
    dir: &Path,
    priority: u8,
    marker: &str,
) -> Box<dyn std::any::Any> {
    let wait = Duration::from_secs(30);
    let p = priority.to_string();
    match kind {
        Kind::Ibkit => {
            let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
            let mut w = WatchedSm::start(exe, sim, host, &["--priority", &p]).unwrap();
            w.wait_for(marker, wait).unwrap();
            Box::new(w)
        }
        Kind::OpenSm => {
            let conf = dir.join("opensm.conf");
            std::fs::write(&conf, "sminfo_polling_timeout 1000\n").unwrap();
            let c = conf.to_str().unwrap();
            let osm = start_opensm_at(
                sim,
                host,
                dir,
                wait,
                &["-p", &p, "-s", "2", "-F", c],
                marker,
            )
            .unwrap();
            Box::new(osm)
        }
    }
}

/// A higher-priority SM that starts after the master gets the subnet,
/// with no moment without a master: ibkit hands over to a higher standby
/// it meets (asking back the SMs that poll it), and an ibkit standby above
/// its master sends it trap 144 as OpenSM's does, which makes OpenSM hand
/// over. Each pairing on ibsim; `sminfo` is read every 50 ms throughout.
#[test]
fn a_higher_priority_sm_arriving_late_gets_the_subnet() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let h = hosts(&topo);
    let pairs = [
        (Kind::Ibkit, Kind::Ibkit),
        (Kind::Ibkit, Kind::OpenSm),
        (Kind::OpenSm, Kind::Ibkit),
    ];
    for (sim_name, start) in SIMULATORS {
        for (first, second) in pairs {
            let what = format!("{sim_name}: {first:?} then {second:?}");
            if sim_name == "ibsim" && matches!((first, second), (Kind::Ibkit, Kind::OpenSm)) {
                // OpenSM's standby sends its lower master trap 144 and
                // waits for the TrapRepress, which ibsim drops ("got trap
                // repress - dropping") and libumad2sim never times out:
                // once master, OpenSM's first sweep waits on it for good.
                println!(
                    "{what}: not run (OpenSM on ibsim never finishes a sweep after its trap 144)"
                );
                continue;
            }
            late_arrival(&what, start, spec, &h, first, second);
        }
    }
}

fn late_arrival(
    what: &str,
    start: Start,
    spec: &str,
    h: &[(String, u64)],
    first: Kind,
    second: Kind,
) {
    let topo = Topology::from_spec(spec).unwrap();
    {
        let dir = std::env::temp_dir().join(format!(
            "ibkit-election-late-{}-{}",
            what.replace([' ', ':'], "-"),
            std::process::id()
        ));
        let (d1, d2) = (dir.join("first"), dir.join("second"));
        std::fs::create_dir_all(&d1).unwrap();
        std::fs::create_dir_all(&d2).unwrap();
        let sim = start(&topo, spec, &dir);
        let sim = &*sim;
        let viewer = &h[2].0;
        let _a = start_sm(first, sim, &h[0].0, &d1, 5, "SUBNET UP");
        master_is(sim, viewer, h[0].1, Duration::from_secs(30)).unwrap();
        let t = Instant::now();
        let _b = start_sm(second, sim, &h[1].0, &d2, 10, "Entering");
        // Until the second is master: who sminfo names, every 50 ms, and
        // the longest stretch in which none said it was master (the
        // handover itself: the old master steps down as it sends it).
        let mut seen = Vec::new();
        let mut no_master: Option<Instant> = None;
        let mut gap = Duration::ZERO;
        let took = loop {
            let r = sminfo(sim, viewer);
            let now = Instant::now();
            if seen.last() != Some(&r) {
                seen.push(r.clone());
            }
            match (&r, no_master) {
                (Ok((_, 3)), Some(since)) => {
                    gap = gap.max(now - since);
                    no_master = None;
                }
                (Ok((_, 3)), None) => {}
                (_, None) => no_master = Some(now),
                (_, Some(_)) => {}
            }
            if r == Ok((h[1].1, 3)) {
                break t.elapsed();
            }
            assert!(
                t.elapsed() < Duration::from_secs(40),
                "{what}: the later, higher SM never became master: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            gap < Duration::from_secs(1),
            "{what}: {gap:?} without a master: {seen:?}"
        );
        println!(
            "{what}: the later SM (priority 10) master {:.2} s after it started; \
             at most {:.0} ms without a master (50 ms sampling); sminfo said {:?}",
            took.as_secs_f64(),
            gap.as_secs_f64() * 1e3,
            seen.iter()
                .map(|r| r
                    .as_ref()
                    .map_or("error".to_string(), |(g, st)| format!("{g:#x}/{st}")))
                .collect::<Vec<_>>()
        );
    }
}

/// An SM on a switch's management port 0, as on a managed switch: on
/// ibsim and on the served fabric (mport-ntree:4:2), each of ibkit and
/// OpenSM runs on a spine switch's port 0 as master (priority 10) with
/// the other on a CA as its standby (priority 1). `sminfo` from a host
/// names the switch's port as master; `ibnetdiscover` reads a LID for
/// the switch and every CA; ibkit's SA, when it is the master, resolves a
/// path between two hosts. The master is killed (SIGKILL): the standby on
/// the CA takes the subnet over and every LID stays.
#[test]
fn an_sm_on_a_switchs_port_0_masters_the_subnet_beside_opensm() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (what, start) in SIMULATORS {
        for on_switch in [Kind::Ibkit, Kind::OpenSm] {
            sm_on_a_switch(what, start, on_switch);
        }
    }
}

fn sm_on_a_switch(what: &str, start: Start, on_switch: Kind) {
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let what = format!("{what}, {on_switch:?} on a switch");
    let dir = std::env::temp_dir().join(format!(
        "ibkit-election-sw-{}-{}",
        what.replace([' ', ',', ':'], "-"),
        std::process::id()
    ));
    let (d1, d2) = (dir.join("switch"), dir.join("ca"));
    std::fs::create_dir_all(&d1).unwrap();
    std::fs::create_dir_all(&d2).unwrap();
    let spine = (topo.nodes.iter())
        .find(|n| n.kind == mad_core::attr::NodeType::Switch)
        .unwrap();
    // A switch's port 0 has the node GUID as its port GUID.
    let (sw_host, sw_guid) = (spine.name.clone(), spine.guid);
    let h = hosts(&topo);
    let (ca_host, viewer, other) = (&h[0].0, &h[2].0, &h[3]);
    let sim = start(&topo, spec, &dir);
    let sim = &*sim;
    let wait = Duration::from_secs(30);
    let standby = match on_switch {
        Kind::Ibkit => Kind::OpenSm,
        Kind::OpenSm => Kind::Ibkit,
    };
    let mut master = start_sm(on_switch, sim, &sw_host, &d1, 10, "SUBNET UP");
    master_is(sim, viewer, sw_guid, wait).unwrap();
    let before = lids(sim, viewer);
    assert!(
        before.contains_key(&sw_guid),
        "the switch has a LID: {before:?}"
    );
    assert_eq!(before.len(), topo.nodes.len(), "{before:?}");
    if matches!(on_switch, Kind::Ibkit) {
        // The SA on the switch's port 0 answers the hosts.
        let slid = before[&(h[2].1 - 1)].to_string();
        let dlid = before[&(other.1 - 1)].to_string();
        let out = (sim.client_at(env!("CARGO_BIN_EXE_ibkit").as_ref(), viewer))
            .args(["sa", "path", &slid, &dlid, "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        assert_eq!(
            v["records"][0]["dlid"].as_u64().map(|l| l.to_string()),
            Some(dlid.clone()),
            "{what}: {v} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _standby = start_sm(standby, sim, ca_host, &d2, 1, "Entering STANDBY state");
    master_is(sim, viewer, sw_guid, wait).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let killed = Instant::now();
    match on_switch {
        Kind::Ibkit => master.downcast_mut::<WatchedSm>().unwrap().sm.kill(),
        Kind::OpenSm => master
            .downcast_mut::<tests::peers::RunningSm>()
            .unwrap()
            .kill(),
    }
    master_is(sim, viewer, h[0].1, Duration::from_secs(60)).unwrap();
    let after = lids(sim, viewer);
    println!(
        "{what}: master on {sw_host}'s port 0 ({} LIDs); killed, the standby on {ca_host} is master {:.0} ms later, {} of {} LIDs kept",
        before.len(),
        killed.elapsed().as_secs_f64() * 1e3,
        after.iter().filter(|(g, l)| before.get(g) == Some(l)).count(),
        before.len()
    );
    assert_eq!(before, after, "{what}: LIDs changed at the takeover");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An SM started as master on a subnet another SM brought up and left
/// (no standby, no cache) keeps the LIDs the ports hold, as OpenSM's LID
/// manager does: OpenSM brings random:6:7 up and exits; `ibkit sm`
/// started after it leaves every LID as OpenSM gave it (`ibnetdiscover`)
/// and reads the LFTs back; with `--reassign-lids` (OpenSM's `-r`) it
/// numbers the ports in its own order, which differs. On ibsim and on the
/// served fabric.
#[test]
fn ibkit_started_after_opensm_keeps_its_lids() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (what, start) in SIMULATORS {
        keeps_opensms_lids(what, start);
    }
}

fn keeps_opensms_lids(what: &str, start: Start) {
    let spec = "random:6:7";
    let topo = Topology::from_spec(spec).unwrap();
    let dir =
        std::env::temp_dir().join(format!("ibkit-election-keep-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let h = hosts(&topo);
    // OpenSM's node and ibkit's: ibsim frees a killed client's SM slot
    // only when it next notices it gone.
    let (osm_host, sm_host, viewer) = (&h[0].0, &h[1].0, &h[2].0);
    let sim = start(&topo, spec, &dir);
    let sim = &*sim;
    let wait = Duration::from_secs(30);
    let mut osm = start_opensm_at(sim, osm_host, &dir, wait, &[], "SUBNET UP").unwrap();
    let before = lids(sim, viewer);
    assert_eq!(before.len(), topo.nodes.len(), "{before:?}");
    osm.kill();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let once = |extra: &[&str]| {
        let mut w =
            WatchedSm::start(exe, sim, sm_host, &[&["--once"][..], extra].concat()).unwrap();
        w.wait_for("SUBNET UP", wait).unwrap();
        let (clean, seen) = w.stop(Duration::from_secs(10));
        assert!(clean, "{what}: ibkit sm --once {extra:?}");
        seen.into_iter().map(|(_, l)| l).collect::<Vec<String>>()
    };
    let log = once(&[]);
    let kept = lids(sim, viewer);
    let lfts = log.iter().find(|l| l.contains("LFT blocks:")).cloned();
    assert_eq!(kept, before, "{what}: OpenSM's LIDs kept; {log:?}");
    assert!(lfts.is_some(), "{what}: the LFTs read back: {log:?}");
    once(&["--reassign-lids"]);
    let own = lids(sim, viewer);
    assert_eq!(own.len(), before.len());
    assert_ne!(
        own, before,
        "{what}: ibkit's own order differs from OpenSM's on {spec}"
    );
    println!(
        "{what} {spec}: ibkit started after OpenSM kept {} of {} LIDs ({}); with --reassign-lids, {} of them changed",
        kept.iter().filter(|(g, l)| before.get(g) == Some(l)).count(),
        before.len(),
        lfts.unwrap_or_default().trim(),
        own.iter().filter(|(g, l)| before.get(g) != Some(l)).count()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM's `ignore_other_sm TRUE`, one `opensm.conf` given to each SM in
/// turn: started at priority 0 under the other SM as master (priority
/// 10), each brings the subnet up itself (SUBNET UP) instead of standing
/// by, on ibsim and on the served fabric.
#[test]
fn an_sm_that_ignores_other_sms_comes_up_under_a_master() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let h = hosts(&topo);
    let wait = Duration::from_secs(30);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    for (what, start) in SIMULATORS {
        let dir =
            std::env::temp_dir().join(format!("ibkit-election-ign-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("ignore.conf");
        std::fs::write(&conf, "ignore_other_sm TRUE\n").unwrap();
        let conf = conf.to_str().unwrap();

        // OpenSM master; ibkit, ignoring it, comes up.
        let sim = start(&topo, spec, &dir);
        let sim = &*sim;
        let osm = start_opensm_at(sim, &h[0].0, &dir, wait, &["-p", "10"], "SUBNET UP").unwrap();
        let extra = ["--priority", "0", "--opensm-config", conf];
        let mut ibkit = WatchedSm::start(exe, sim, &h[1].0, &extra).unwrap();
        ibkit.wait_for("SUBNET UP", wait).unwrap();
        let (clean, lines) = ibkit.stop(wait);
        drop(osm);
        assert!(clean);
        assert!(
            !lines.iter().any(|(_, l)| l.contains("STANDBY")),
            "{what}: ibkit stood by"
        );

        // ibkit master; OpenSM, ignoring it, comes up.
        let sub = dir.join("opensm");
        std::fs::create_dir_all(&sub).unwrap();
        let sim = start(&topo, spec, &sub);
        let sim = &*sim;
        let mut ibkit = WatchedSm::start(exe, sim, &h[0].0, &["--priority", "10"]).unwrap();
        ibkit.wait_for("SUBNET UP", wait).unwrap();
        let osm = start_opensm_at(
            sim,
            &h[1].0,
            &sub,
            wait,
            &["-p", "0", "-F", conf],
            "SUBNET UP",
        );
        let log = std::fs::read_to_string(sub.join("opensm.log")).unwrap_or_default();
        let (clean, _) = ibkit.stop(wait);
        assert!(clean);
        assert!(
            osm.is_ok(),
            "{what}: OpenSM ignoring ibkit never came up:\n{log}"
        );
        drop(osm);
        assert!(!log.contains("Entering STANDBY"), "{what}: OpenSM stood by");
        println!(
            "{what}: ibkit and OpenSM with ignore_other_sm TRUE each came up (SUBNET UP) under the other as master, where they stand by without it"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// OpenSM's `sm_inactive` (`opensm -I`, `ibkit sm --inactive`): started
/// at priority 15 beside the other SM as master (priority 0), each stays
/// NOT ACTIVE and the master keeps the subnet. `sminfo` at the inactive
/// ibkit's LID reads state 0 (NOTACTIVE), priority 15; OpenSM 3.3.23
/// inactive answers no SMInfo at all (its receiver drops a request until
/// a sweep of its own has found its own port, and an inactive OpenSM
/// never sweeps), so `sminfo` at its LID times out.
#[test]
fn an_inactive_sm_stays_not_active_beside_a_lower_master() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let h = hosts(&topo);
    let (viewer, wait) = (&h[2].0, Duration::from_secs(30));
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    for (what, start) in SIMULATORS {
        let dir = std::env::temp_dir().join(format!(
            "ibkit-election-inact-{what}-{}",
            std::process::id()
        ));
        for first in [Kind::Ibkit, Kind::OpenSm] {
            let sub = dir.join(format!("{first:?}"));
            std::fs::create_dir_all(&sub).unwrap();
            let sim = start(&topo, spec, &sub);
            let sim = &*sim;
            let _master = start_sm(first, sim, &h[0].0, &sub, 0, "SUBNET UP");
            master_is(sim, viewer, h[0].1, wait).unwrap();
            let inactive: Box<dyn std::any::Any> = match first {
                Kind::Ibkit => Box::new(
                    start_opensm_at(sim, &h[1].0, &sub, wait, &["-I", "-p", "15"], "NOTACTIVE")
                        .unwrap(),
                ),
                Kind::OpenSm => {
                    let a = ["--inactive", "--priority", "15"];
                    let mut w = WatchedSm::start(exe, sim, &h[1].0, &a).unwrap();
                    w.wait_for("NOT ACTIVE", wait).unwrap();
                    Box::new(w)
                }
            };
            // Two of OpenSM's sweeps (every 2 s here) and ibkit's polls.
            std::thread::sleep(Duration::from_secs(3));
            master_is(sim, viewer, h[0].1, wait).unwrap();
            let lid = lids(sim, viewer)[&(h[1].1 - 1)].to_string();
            let seen = tests::peers::sminfo(sim, viewer, &[&lid]);
            let said = match first {
                Kind::OpenSm => {
                    let seen = seen.unwrap();
                    assert_eq!(
                        (seen.guid, seen.state, seen.priority),
                        (h[1].1, 0, 15),
                        "{what}: the inactive ibkit beside OpenSM"
                    );
                    "state 0, priority 15".to_string()
                }
                Kind::Ibkit => {
                    let e = seen.unwrap_err();
                    assert!(e.contains("timed out"), "{what}: OpenSM -I answered: {e}");
                    "no answer (OpenSM's, as always when inactive)".to_string()
                }
            };
            if let Ok(w) = inactive.downcast::<WatchedSm>() {
                let (clean, lines) = w.stop(wait);
                assert!(clean, "{what}: the inactive ibkit exits cleanly on SIGTERM");
                assert!(!lines.iter().any(|(_, l)| l.contains("SUBNET UP")));
                // With --once it stops at once, exit 0, saying why.
                let out = (sim.client_at(exe.as_os_str(), &h[1].0))
                    .args(["sm", "--once", "--inactive"])
                    .env("RUST_LOG", "info")
                    .output()
                    .unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "{what}: {err}");
                assert!(
                    err.contains("not active: --once stops here"),
                    "{what}: {err}"
                );
            }
            println!(
                "{what}: {} at priority 15 stays NOT ACTIVE beside {first:?} as master (priority 0); sminfo at its LID {lid}: {said}",
                if first == Kind::Ibkit { "OpenSM -I" } else { "ibkit sm --inactive" }
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A standby's `opensm.conf` in `dir`: polls every 500 ms, `retries`
/// polls let go unanswered, the log flushed at each line, and `more`.
fn standby_conf(dir: &Path, retries: u32, more: &str) -> std::path::PathBuf {
    let conf = dir.join("standby.conf");
    std::fs::write(
        &conf,
        format!("sminfo_polling_timeout 500\npolling_retry_number {retries}\nforce_log_flush TRUE\n{more}"),
    )
    .unwrap();
    conf
}

/// OpenSM's `polling_retry_number`, with `sminfo_polling_timeout 500`, in
/// one `opensm.conf` given to the standby (OpenSM's `-F`, ibkit's
/// `--opensm-config`) on the served fabric; the master, the other SM, is
/// killed with SIGKILL. With 3 retries each standby lets 4 polls go
/// unanswered (the served fabric answers a poll of the dead SM's port at
/// once, with an error status, which both count as unanswered) before it
/// gives the master up (enters DISCOVERING to take the subnet), where
/// with none ibkit does at the first.
#[test]
fn both_standbys_let_polling_retry_number_polls_go_unanswered() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let h = hosts(&topo);
    let wait = Duration::from_secs(30);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let (_, start) = SIMULATORS[1];
    let dir = std::env::temp_dir().join(format!("ibkit-poll-retries-{}", std::process::id()));
    let mut took = Vec::new();
    for (standby, retries) in [(Kind::OpenSm, 3), (Kind::Ibkit, 3), (Kind::Ibkit, 0)] {
        let sub = dir.join(format!("{standby:?}-{retries}"));
        std::fs::create_dir_all(&sub).unwrap();
        let conf = standby_conf(&sub, retries, "");
        let conf = conf.to_str().unwrap();
        let sim = start(&topo, spec, &sub);
        let sim = &*sim;
        let elapsed = match standby {
            Kind::OpenSm => {
                let mut master =
                    WatchedSm::start(exe, sim, &h[0].0, &["--priority", "10"]).unwrap();
                master.wait_for("SUBNET UP", wait).unwrap();
                let osm = start_opensm_at(
                    sim,
                    &h[1].0,
                    &sub,
                    wait,
                    &["-p", "0", "-F", conf],
                    "Entering STANDBY state",
                )
                .unwrap();
                let killed = Instant::now();
                let mut m = master.sm;
                m.kill();
                let log = sub.join("opensm.log");
                // Its first DISCOVERING was at its start.
                while std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .matches("Entering DISCOVERING state")
                    .count()
                    < 2
                {
                    assert!(killed.elapsed() < wait, "OpenSM never gave its master up");
                    std::thread::sleep(Duration::from_millis(20));
                }
                let e = killed.elapsed();
                drop(osm);
                e
            }
            Kind::Ibkit => {
                let mut osm =
                    start_opensm_at(sim, &h[0].0, &sub, wait, &["-p", "10"], "SUBNET UP").unwrap();
                let extra = ["--priority", "0", "--opensm-config", conf];
                let mut ibkit = WatchedSm::start(exe, sim, &h[1].0, &extra).unwrap();
                ibkit.wait_for("Entering STANDBY state", wait).unwrap();
                let killed = Instant::now();
                osm.kill();
                let at = ibkit.wait_for("Entering DISCOVERING state", wait).unwrap();
                ibkit.wait_for("SUBNET UP", wait).unwrap();
                let (clean, lines) = ibkit.stop(wait);
                assert!(clean, "{lines:?}");
                at.duration_since(killed)
            }
        };
        println!(
            "served: {standby:?} standby, polling_retry_number {retries}, polls every 500 ms: gives the master up (DISCOVERING) {:.0} ms after the kill",
            elapsed.as_secs_f64() * 1e3
        );
        took.push(elapsed);
    }
    // At least four polls 500 ms apart with 3 retries (the served fabric
    // answers a poll of the dead SM's port at once, with an error, which
    // both SMs count as unanswered); with none, the first poll.
    assert!(took[0] >= Duration::from_millis(1_500), "OpenSM: {took:?}");
    assert!(took[1] >= Duration::from_millis(1_500), "ibkit: {took:?}");
    assert!(took[2] < took[1] / 2, "ibkit, none: {took:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Port GUID → LID of every end port and switch, read with `smpquery
/// nodeinfo` from `host` over LIDs 1..=`n`.
fn lids_by_guid(sim: &dyn Simulator, host: &str, n: u16) -> BTreeMap<u64, u16> {
    (1..=n)
        .filter_map(|l| {
            let out = (sim.client_at("smpquery".as_ref(), host))
                .args(["nodeinfo", &l.to_string()])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let guid = common::smp_field(&text, "PortGuid")
                .and_then(|g| u64::from_str_radix(g.trim_start_matches("0x"), 16).ok());
            guid.map(|g| (g, l))
        })
        .collect()
}

/// OpenSM's `honor_guid2lid_file` beside OpenSM, on ibsim and on the
/// served fabric:
/// the standby under test (OpenSM, then ibkit) starts with an empty
/// cache directory under the other SM as master; once it stands by, a
/// `guid2lid` with two hosts' LIDs swapped is written into its cache
/// directory, and the master is killed. With `TRUE` each takes over
/// reading the file again and gives the two hosts the swapped LIDs; with
/// `FALSE` (OpenSM's default) each keeps the LIDs the ports hold.
#[test]
fn both_standbys_honor_guid2lid_file_alike_taking_over() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let h = hosts(&topo);
    let n = topo.nodes.len() as u16 + 4;
    let wait = Duration::from_secs(30);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-honor-g2l-{}", std::process::id()));
    let tool = &h[h.len() - 1].0;
    for ((what, start), honor) in SIMULATORS
        .into_iter()
        .flat_map(|s| ["FALSE", "TRUE"].map(|h| (s, h)))
    {
        let mut got = Vec::new();
        for standby in [Kind::OpenSm, Kind::Ibkit] {
            let sub = dir.join(format!("{what}-{standby:?}-{honor}"));
            let cache = sub.join("cache");
            let _ = std::fs::remove_dir_all(&sub);
            std::fs::create_dir_all(&cache).unwrap();
            let conf = standby_conf(&sub, 0, &format!("honor_guid2lid_file {honor}\n"));
            let conf = conf.to_str().unwrap();
            let sim = start(&topo, spec, &sub);
            let sim = &*sim;
            // The cache the standby finds when it takes over: what the
            // ports hold, with two hosts' LIDs swapped.
            let write_cache = || {
                let held = lids_by_guid(sim, tool, n);
                let (a, b) = (h[2].1, h[3].1);
                let mut want = held.clone();
                want.insert(a, held[&b]);
                want.insert(b, held[&a]);
                let text: String = (want.iter())
                    .map(|(g, l)| format!("0x{g:016x} 0x{l:04x} 0x{l:04x}\n\n"))
                    .collect();
                std::fs::write(cache.join("guid2lid"), text).unwrap();
                (held, want)
            };
            let (held, want) = match standby {
                Kind::OpenSm => {
                    let mut master =
                        WatchedSm::start(exe, sim, &h[0].0, &["--priority", "10"]).unwrap();
                    master.wait_for("SUBNET UP", wait).unwrap();
                    let osm = start_opensm_cached_at(
                        sim,
                        &h[1].0,
                        &sub,
                        &cache,
                        wait,
                        &["-p", "0", "-F", conf],
                        "Entering STANDBY state",
                    )
                    .unwrap();
                    let lids = write_cache();
                    let mut m = master.sm;
                    m.kill();
                    let log = sub.join("opensm.log");
                    let t = Instant::now();
                    while !std::fs::read_to_string(&log)
                        .unwrap_or_default()
                        .contains("SUBNET UP")
                    {
                        assert!(t.elapsed() < wait, "OpenSM never took over");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    got.push(lids_by_guid(sim, tool, n));
                    drop(osm);
                    lids
                }
                Kind::Ibkit => {
                    let mut osm =
                        start_opensm_at(sim, &h[0].0, &sub, wait, &["-p", "10"], "SUBNET UP")
                            .unwrap();
                    let cache_arg = cache.to_str().unwrap();
                    let extra = [
                        "--priority",
                        "0",
                        "--opensm-config",
                        conf,
                        "--cache-dir",
                        cache_arg,
                    ];
                    let mut ibkit = WatchedSm::start(exe, sim, &h[1].0, &extra).unwrap();
                    ibkit.wait_for("Entering STANDBY state", wait).unwrap();
                    let lids = write_cache();
                    osm.kill();
                    ibkit.wait_for("SUBNET UP", wait).unwrap();
                    got.push(lids_by_guid(sim, tool, n));
                    let (clean, lines) = ibkit.stop(wait);
                    assert!(clean, "{lines:?}");
                    lids
                }
            };
            let now = got.last().unwrap();
            let (a, b) = (h[2].1, h[3].1);
            let expect = if honor == "TRUE" { &want } else { &held };
            assert_eq!(
                (now.get(&a), now.get(&b)),
                (expect.get(&a), expect.get(&b)),
                "{what}: {standby:?} standby, honor_guid2lid_file {honor}"
            );
            println!(
                "{what}: {standby:?} took over, honor_guid2lid_file {honor}: hosts {:#x} and {:#x} hold LIDs {:?} and {:?} (held before: {} and {})",
                a, b, now.get(&a), now.get(&b), held[&a], held[&b]
            );
        }
        // The two SMs gave the two hosts the same LIDs.
        let (a, b) = (h[2].1, h[3].1);
        assert_eq!(
            (got[0].get(&a), got[0].get(&b)),
            (got[1].get(&a), got[1].get(&b)),
            "{what}, {honor}"
        );
    }
}

/// A standby that starts after the master (ibkit, priority 1) sets IsSM
/// on its port, which traps 144 with the new CapabilityMask (ibsim's
/// `set_issm`; the served fabric does the same): the master, OpenSM or
/// ibkit, reads that port again and `saquery -s` from another host lists
/// both SMs' ports, on ibsim and on the served fabric. Before 2026-11-30
/// ibkit's master listed only itself; and the served fabric raised no
/// trap, so neither master did there.
#[test]
fn a_standby_that_starts_later_is_listed_by_the_masters_sa() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let h = hosts(&topo);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let tool = &h[h.len() - 1].0;
    let sm_lids = |sim: &dyn Simulator| -> Vec<String> {
        let out = (sim.client_at("saquery".as_ref(), tool))
            .arg("-s")
            .output()
            .unwrap();
        (String::from_utf8_lossy(&out.stdout).lines())
            .filter_map(|l| l.trim().strip_prefix("EndPortLid"))
            .map(|v| v.trim_start_matches('.').trim().to_string())
            .collect()
    };
    for (sim_name, start) in SIMULATORS {
        for master in [Kind::OpenSm, Kind::Ibkit] {
            let dir = std::env::temp_dir().join(format!(
                "ibkit-late-standby-{sim_name}-{master:?}-{}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let sim = start(&topo, spec, &dir);
            let sim = &*sim;
            let m = start_sm(master, sim, &h[0].0, &dir, 10, "SUBNET UP");
            assert_eq!(
                sm_lids(sim).len(),
                1,
                "{sim_name}, {master:?}: the master alone"
            );
            let mut standby = WatchedSm::start(exe, sim, &h[1].0, &["--priority", "1"]).unwrap();
            standby
                .wait_for("Entering STANDBY state", Duration::from_secs(30))
                .unwrap();
            let t = Instant::now();
            while sm_lids(sim).len() < 2 {
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "{sim_name}, {master:?} master: saquery -s lists {:?}",
                    sm_lids(sim)
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            println!(
                "{sim_name}, {master:?} master: saquery -s lists {:?} {:.1?} after the standby stood by",
                sm_lids(sim),
                t.elapsed()
            );
            drop(standby);
            drop(m);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
