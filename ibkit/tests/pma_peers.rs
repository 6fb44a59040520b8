//! The served fabric's Performance Management Agents (`fabric::sim`'s
//! PMA) read by infiniband-diags' `perfquery` and `ibqueryerrors` through
//! libumad2sim, beside ibsim's own PMA under the same workload: a host's
//! LID-routed SMPs counted at its port, the extended counters, a reset,
//! a switch's all-port sum, and a clean fabric without errors.
//!
//! Needs infiniband-diags and libumad2sim0 (CI installs them); elsewhere
//! it says SKIPPED, unless IBKIT_REQUIRE_PEERS=1.

mod common;

use common::{own_lid, simulator_and_sm, skip};
use fabric::topology::Topology;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tests::peers::{missing_tools, Simulator};

/// `perfquery` at `host` with `args`: its `Name:....value` lines.
fn perfquery(sim: &dyn Simulator, host: &str, args: &[&str]) -> BTreeMap<String, u64> {
    let out = sim
        .client_at("perfquery".as_ref(), host)
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "perfquery {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let v = v.trim_start_matches('.');
            let v = match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok()?,
                None => v.parse().ok()?,
            };
            Some((k.to_string(), v))
        })
        .collect()
}

/// ibsim (or, `served`, ibkit's served fabric) with ibkit's SM and no
/// sweeps: nothing but the test's tools touches a port once the subnet
/// is up.
fn quiet(
    exe: &Path,
    fabric: (&str, &Topology),
    served: bool,
    dir: &Path,
) -> (Box<dyn Simulator>, tests::peers::RunningSm) {
    let args = ["--sweep-ms", "0"];
    simulator_and_sm(
        exe,
        fabric,
        served,
        dir,
        Duration::from_secs(20),
        None,
        &args,
    )
}

/// `smpquery nodeinfo LID`, LID-routed, `n` times from `host`.
fn smps(sim: &dyn Simulator, host: &str, lid: u16, n: u64) {
    for _ in 0..n {
        let out = sim
            .client_at("smpquery".as_ref(), host)
            .args(["nodeinfo", &lid.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "smpquery nodeinfo {lid}");
    }
}

fn delta(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>, k: &str) -> u64 {
    b[k] - a[k]
}

/// The fabric both tests run on, with ibkit; `None` (said) where the
/// peer tools are missing.
fn setup() -> Option<(&'static Path, &'static str, Topology)> {
    if let Some(why) = missing_tools() {
        skip("pma_peers", &why);
        return None;
    }
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    Some((Path::new(env!("CARGO_BIN_EXE_ibkit")), spec, topo))
}

#[test]
fn perfquery_counts_a_hosts_packets_as_on_ibsim() {
    let Some((exe, spec, topo)) = setup() else {
        return;
    };
    let cas: Vec<&str> = topo
        .nodes
        .iter()
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.name.as_str())
        .collect();
    let host = cas[cas.len() - 1];
    let dir = std::env::temp_dir().join(format!("ibkit-pma-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    const K: u64 = 5;
    let mut seen = Vec::new();
    for served in [false, true] {
        let on = if served { "served fabric" } else { "ibsim" };
        let (sim, _sm) = quiet(exe, (spec, &topo), served, &dir);
        let sim = sim.as_ref();
        let me = own_lid(sim, host).expect("the host's LID");
        // The SM's port (LID 1 under ibkit's SM) answers the SMPs.
        let a = perfquery(sim, host, &[]);
        smps(sim, host, 1, K);
        let b = perfquery(sim, host, &[]);
        let words = fabric::sim::MAD_PACKET_WORDS;
        let d: Vec<u64> = ["PortXmitPkts", "PortRcvPkts", "PortXmitData", "PortRcvData"]
            .iter()
            .map(|k| delta(&a, &b, k))
            .collect();
        assert_eq!(d, [K, K, K * words, K * words], "{on}: PortCounters");
        let a = perfquery(sim, host, &["-x"]);
        smps(sim, host, 1, K);
        let b = perfquery(sim, host, &["-x"]);
        let dx: Vec<u64> = [
            "PortXmitPkts",
            "PortRcvPkts",
            "PortUnicastXmitPkts",
            "PortUnicastRcvPkts",
            "PortXmitData",
        ]
        .iter()
        .map(|k| delta(&a, &b, k))
        .collect();
        // ibsim keeps no unicast counters (they stay 0 there); every
        // packet here is unicast, and the served fabric counts it so.
        let unicast = if served { K } else { 0 };
        assert_eq!(
            dx,
            [K, K, unicast, unicast, K * words],
            "{on}: PortCountersExtended"
        );
        assert_eq!(b["PortMulticastXmitPkts"], 0, "{on}");
        // A reset (Set with every counter selected), then nothing.
        perfquery(sim, host, &["-R"]);
        let z = perfquery(sim, host, &[]);
        for k in [
            "PortXmitPkts",
            "PortRcvPkts",
            "PortXmitData",
            "LinkDownedCounter",
        ] {
            assert_eq!(z[k], 0, "{on}: {k} after perfquery -R");
        }
        // The details of PortRcvErrors and PortXmitDiscards: none yet.
        for (flag, first) in [
            ("-E", "PortLocalPhysicalErrors"),
            ("-D", "PortInactiveDiscards"),
        ] {
            let d = perfquery(sim, host, &[flag]);
            assert!(d.contains_key(first), "{on}: perfquery {flag}: {d:?}");
            let nonzero: Vec<_> = d
                .iter()
                .filter(|(k, v)| k.starts_with("Port") && k.as_str() != "PortSelect" && **v != 0)
                .collect();
            assert!(nonzero.is_empty(), "{on}: perfquery {flag}: {nonzero:?}");
        }
        // A switch's ports summed (PortSelect 255, AllPortSelect).
        let sw = perfquery(sim, host, &["-a", "2"]);
        assert_eq!(sw["PortSelect"], 255, "{on}");
        assert!(sw["PortXmitPkts"] > 0, "{on}: {sw:?}");
        // Every port of a freshly brought up fabric without errors.
        let out = sim
            .client_at("ibqueryerrors".as_ref(), host)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{on}: ibqueryerrors: {text}");
        let checked = text
            .lines()
            .find(|l| l.contains("ports checked"))
            .unwrap_or_else(|| panic!("{on}: {text}"))
            .to_string();
        assert!(checked.contains(" 0 ports have errors"), "{on}: {checked}");
        println!(
            "{on}: host {host} (LID {me}): {K} SMPs out and back counted as {d:?} by perfquery, \
             {dx:?} by perfquery -x; perfquery -R clears; ibqueryerrors: {}",
            checked.trim_start_matches('#').trim()
        );
        seen.push((d, [dx[0], dx[1], dx[4]]));
        // PortSamplesControl (`perfquery -c`), which every PMA has: the
        // served fabric's 15 counters of 32 bits, each able to count the
        // mandatory quantities, no sample under way. ibsim has no answer.
        if served {
            let c = perfquery(sim, host, &["-c"]);
            let got: Vec<u64> = [
                "PortSelect",
                "CounterWidth",
                "CounterMask0",
                "CounterMasks1to9",
                "CounterMasks10to14",
                "SampleStatus",
            ]
            .iter()
            .map(|k| c[*k])
            .collect();
            assert_eq!(
                got,
                [1, 4, 1, 0o111_111_111, 0o11_111, 0],
                "{on}: perfquery -c: {c:?}"
            );
            println!("{on}: perfquery -c: {got:?}");
        } else {
            let out = sim
                .client_at("perfquery".as_ref(), host)
                .arg("-c")
                .output()
                .unwrap();
            println!(
                "{on}: perfquery -c exits {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if served {
            link_downed_is_found(sim, &topo, host);
            discards_are_detailed(sim, &topo, host);
        }
    }
    assert_eq!(
        seen[0], seen[1],
        "ibsim's PMA and the served fabric's agree"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM's Performance Manager (`opensm --perfmgr`), as master, sweeps
/// every port's PMA: each answers it with status 0, on ibsim and on the
/// served fabric alike, and it logs no error about them.
#[test]
fn opensms_perfmgr_reads_every_port() {
    let Some((exe, spec, topo)) = setup() else {
        return;
    };
    perfmgr_reads_every_port(exe, spec, &topo);
}

/// [`opensms_perfmgr_reads_every_port`] with two-port CAs, whose ports
/// the PerfMgr reads each at its own LID, from that port's own PMA.
#[test]
fn opensms_perfmgr_reads_each_port_of_two_port_cas() {
    let Some((exe, _, _)) = setup() else {
        return;
    };
    let spec = concat!(
        "file:",
        env!("CARGO_MANIFEST_DIR"),
        "/../fabric/tests/data/multiport.topo"
    );
    perfmgr_reads_every_port(exe, spec, &Topology::from_spec(spec).unwrap());
}

fn perfmgr_reads_every_port(exe: &Path, spec: &str, topo: &Topology) {
    // Every port of a switch, cabled or not, but its port 0 (which the
    // PerfMgr does not read), and every cabled port of a CA (the only
    // ones the SM finds).
    let switch = |n: usize| topo.nodes[n].kind == mad_core::attr::NodeType::Switch;
    let ports = (0..topo.nodes.len())
        .flat_map(|n| (1..=topo.nodes[n].ports).map(move |p| (n, p)))
        .filter(|&(n, p)| switch(n) || topo.peer_of(n, p).is_some())
        .count();
    let mut read = Vec::new();
    for served in [false, true] {
        let on = if served { "served fabric" } else { "ibsim" };
        let dir = std::env::temp_dir().join(format!(
            "ibkit-pma-perfmgr-{}-{}-{served}",
            std::process::id(),
            topo.nodes.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        // -D 0x07: errors, information and the verbose lines where the
        // PerfMgr says what each PMA answered.
        let args = ["--perfmgr", "--perfmgr_sweep_time_s", "1", "-D", "0x07"];
        let (_sim, _sm) = simulator_and_sm(
            exe,
            (spec, topo),
            served,
            &dir,
            Duration::from_secs(20),
            Some(&args),
            &[],
        );
        // Statuses by (node GUID, port), from "Processing received MAD
        // status 0x0 context 0x… port N".
        let t = std::time::Instant::now();
        let (mut answered, mut log) = (BTreeMap::new(), String::new());
        while t.elapsed() < Duration::from_secs(20) && answered.len() < ports {
            std::thread::sleep(Duration::from_millis(500));
            log = std::fs::read_to_string(dir.join("opensm.log")).unwrap_or_default();
            answered = log
                .lines()
                .filter_map(|l| {
                    let rest = l.split("Processing received MAD status ").nth(1)?;
                    let w: Vec<&str> = rest.split_whitespace().collect();
                    Some(((w[2].to_string(), w[4].to_string()), w[0].to_string()))
                })
                .collect();
        }
        assert_eq!(answered.len(), ports, "{on}: {answered:?}");
        assert!(answered.values().all(|s| s == "0x0"), "{on}: {answered:?}");
        let perf_errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(" ERR ") && l.contains("perfmgr"))
            .collect();
        assert!(perf_errors.is_empty(), "{on}: {perf_errors:#?}");
        println!(
            "{on}: OpenSM's PerfMgr read {} ports' PMAs, every answer status 0x0",
            answered.len()
        );
        read.push(answered.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(read[0], read[1]);
}

/// A cable between two switches taken down and put back (`ibkit fabric
/// ctl`): once the SM has swept, `ibqueryerrors` names its two ends, and
/// only them, with LinkDownedCounter == 1.
fn link_downed_is_found(sim: &dyn Simulator, topo: &Topology, host: &str) {
    use mad_core::attr::NodeType::Switch;
    let (a, p, b, q) = (0..topo.nodes.len())
        .filter(|&n| topo.nodes[n].kind == Switch)
        .find_map(|n| {
            (1..=topo.nodes[n].ports).find_map(|p| match topo.peer_of(n, p) {
                Some((m, q)) if topo.nodes[m].kind == Switch => Some((n, p, m, q)),
                _ => None,
            })
        })
        .expect("a cable between switches");
    let name = &topo.nodes[a].name;
    for verb in ["link-down", "link-up"] {
        let r = sim
            .control(&format!("{verb} {name} {p}"))
            .expect("a served fabric");
        assert!(r.is_ok(), "{verb}: {r:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let want: std::collections::BTreeSet<(u64, u8)> =
        [(topo.nodes[a].guid, p), (topo.nodes[b].guid, q)].into();
    let t = std::time::Instant::now();
    let mut last = String::new();
    while t.elapsed() < Duration::from_secs(15) {
        let out = sim
            .client_at("ibqueryerrors".as_ref(), host)
            .output()
            .unwrap();
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        let found: std::collections::BTreeSet<(u64, u8)> = last
            .lines()
            .filter(|l| l.contains("[LinkDownedCounter == 1]"))
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let guid = u64::from_str_radix(w.nth(1)?.trim_start_matches("0x"), 16).ok()?;
                let port = w.nth(1)?.trim_end_matches(':').parse().ok()?;
                Some((guid, port))
            })
            .collect();
        if found == want {
            println!(
                "served fabric: {name} port {p} down and up: ibqueryerrors names LinkDownedCounter == 1 at both ends, {} and {} port {q}, and nowhere else",
                topo.nodes[a].name, topo.nodes[b].name
            );
            return;
        }
        assert!(
            found.is_subset(&want),
            "{found:x?} beyond {want:x?}:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("ibqueryerrors never named both ends {want:x?}:\n{last}");
}

/// On the served fabric: the cable of another host on `host`'s leaf
/// fails, and `host` sends a directed-route SMP whose path leaves the
/// leaf by that port. The leaf's PMA counts the discards (the SMP and
/// smpquery's retries) as PortXmitDiscards, and PortXmitDiscardDetails
/// says why (PortInactiveDiscards); `perfquery -D` and `ibqueryerrors
/// --details` read them.
fn discards_are_detailed(sim: &dyn Simulator, topo: &Topology, host: &str) {
    let me = topo.nodes.iter().position(|n| n.name == host).unwrap();
    let (leaf, _) = topo.peer_of(me, 1).unwrap();
    let out = (1..=topo.nodes[leaf].ports)
        .find(|&p| {
            topo.peer_of(leaf, p).is_some_and(|(m, _)| {
                m != me && topo.nodes[m].kind != mad_core::attr::NodeType::Switch
            })
        })
        .expect("another host on the leaf");
    let name = &topo.nodes[leaf].name;
    let r = sim
        .control(&format!("link-down {name} {out}"))
        .expect("a served fabric");
    assert!(r.is_ok(), "link-down: {r:?}");
    std::thread::sleep(Duration::from_millis(300));
    let smp = |args: &[&str]| {
        sim.client_at("smpquery".as_ref(), host)
            .args(args)
            .output()
            .unwrap()
    };
    let lost = smp(&["-D", "nodeinfo", &format!("0,1,{out}")]);
    assert!(
        !lost.status.success(),
        "no answer through a port that is down"
    );
    let info = smp(&["-D", "portinfo", "0,1", "0"]);
    let text = String::from_utf8_lossy(&info.stdout);
    let lid: u16 = text
        .lines()
        .find_map(|l| l.strip_prefix("Lid:")?.trim_start_matches('.').parse().ok())
        .unwrap_or_else(|| panic!("the leaf's LID: {text}"));
    let (l, o) = (lid.to_string(), out.to_string());
    let c = perfquery(sim, host, &[&l, &o]);
    let d = perfquery(sim, host, &["-D", &l, &o]);
    let n = d["PortInactiveDiscards"];
    assert!(n >= 1, "{d:?}");
    assert_eq!(c["PortXmitDiscards"], n, "every discard is an inactive one");
    for k in [
        "PortNeighborMTUDiscards",
        "PortSwLifetimeLimitDiscards",
        "PortSwHOQLifetimeLimitDiscards",
    ] {
        assert_eq!(d[k], 0, "{k}");
    }
    // ibqueryerrors --details reads PortXmitDiscardDetails when it finds
    // PortXmitDiscards, but prints its first counter under
    // PortRcvErrorDetails' first name (it decodes the one attribute with
    // the other's fields; infiniband-diags' ibqueryerrors.c).
    let out_q = sim
        .client_at("ibqueryerrors".as_ref(), host)
        .arg("--details")
        .output()
        .unwrap();
    let q = String::from_utf8_lossy(&out_q.stdout);
    let want = format!("port {out}: [LinkDownedCounter == 1] [PortXmitDiscards == {n}] [PortLocalPhysicalErrors == {n}]");
    assert!(q.contains(&want), "no \"{want}\" in:\n{q}");
    // ibqueryerrors -k --details clears them, the details with their own
    // Set (CounterSelect 0xF and 0x3F).
    let k = sim
        .client_at("ibqueryerrors".as_ref(), host)
        .args(["--details", "-k"])
        .output()
        .unwrap();
    // It exits 1 when it has found errors (print_summary), as here.
    assert_eq!(k.status.code(), Some(1), "ibqueryerrors -k: {k:?}");
    let c = perfquery(sim, host, &[&l, &o]);
    let d = perfquery(sim, host, &["-D", &l, &o]);
    assert_eq!(
        (
            c["PortXmitDiscards"],
            c["LinkDownedCounter"],
            d["PortInactiveDiscards"]
        ),
        (0, 0, 0),
        "after ibqueryerrors -k --details"
    );
    println!("served fabric: {name} port {out} down, a directed-route SMP through it: perfquery reads PortXmitDiscards {n}, perfquery -D PortInactiveDiscards {n}; ibqueryerrors --details: \"{want}\"; ibqueryerrors -k --details clears both");
    let r = sim
        .control(&format!("link-up {name} {out}"))
        .expect("a served fabric");
    assert!(r.is_ok(), "link-up: {r:?}");
}

/// `perfquery -G GUID PORT` from `host`: whether it exits 0, and what it
/// printed.
fn perfquery_port(sim: &dyn Simulator, host: &str, guid: u64, port: u8) -> (bool, String) {
    let out = sim
        .client_at("perfquery".as_ref(), host)
        .args(["-G", &format!("{guid:#x}"), &port.to_string()])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A two-port CA has a PMA at each port, on ibsim as on the served
/// fabric: `perfquery` of either port's GUID (found through ibkit's SA)
/// answers for that port and is refused the other one.
#[test]
fn each_port_of_a_two_port_ca_answers_for_itself_as_on_ibsim() {
    if let Some(why) = missing_tools() {
        skip("pma_peers", &why);
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = concat!(
        "file:",
        env!("CARGO_MANIFEST_DIR"),
        "/../fabric/tests/data/multiport.topo"
    );
    let topo = Topology::from_spec(spec).unwrap();
    let d = topo.nodes.iter().find(|n| n.name == "D").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-pma-ports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for served in [false, true] {
        let on = if served { "served fabric" } else { "ibsim" };
        let (sim, _sm) = quiet(exe, (spec, &topo), served, &dir);
        let sim = sim.as_ref();
        let mut seen = Vec::new();
        for at in [1u8, 2] {
            // Each port's GUID is the node GUID plus its number.
            let guid = d.guid + u64::from(at);
            let (ok, text) = perfquery_port(sim, "H1", guid, at);
            assert!(ok, "{on}: D's port {at}: {text}");
            let select = (text.lines())
                .find_map(|l| l.strip_prefix("PortSelect:"))
                .map(|v| v.trim_start_matches('.').trim().to_string());
            assert_eq!(select, Some(at.to_string()), "{on}: {text}");
            let other = 3 - at;
            let (ok, text) = perfquery_port(sim, "H1", guid, other);
            assert!(
                !ok,
                "{on}: port {at}'s PMA answered for port {other}: {text}"
            );
            seen.push(format!("port {at} answers, port {other} refused"));
        }
        println!("{on}: perfquery of D's two ports: {}", seen.join("; "));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
