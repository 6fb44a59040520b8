//! The same QoS options given to OpenSM (`-Q -F opensm.conf`) and to
//! `ibkit sm --qos-config`, each on a fresh simulator of the same fabric:
//! every port's SL-to-VL tables (`smpquery sl2vl`), VL arbitration tables
//! (`smpquery vlarb`) and VLHighLimit (`smpquery portinfo`), as
//! infiniband-diags reads them back, are equal port for port — on
//! Debian's ibsim (no optimized SL-to-VL programming: a Set per input
//! and output port) and on ibkit's served fabric (where ibkit's SM sets
//! each switch's tables with one Set). Both SMs' `opensm-sl2vl.dump` are
//! equal line for line but for the base LIDs.

use fabric::topology::Topology;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tests::peers::{start_ibkit_sm, start_opensm_cmd, Ibsim, RunningSm, Served, Simulator};

mod common;
use common::smp_field;

/// One simulator and SM at a time: they share two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn peers_here() -> bool {
    common::peers_with_smpquery("qos_ibsim")
}

/// The policy: a CA and a switch SL-to-VL table that differ from
/// OpenSM's defaults (and from ibsim's power-on tables), VL arbitration
/// per class, and a high limit.
const CONF: &str = "# the same file for OpenSM and ibkit\n\
qos TRUE\n\
qos_high_limit 4\n\
qos_sl2vl 0,1,2,3,4,5,6,7,7,6,5,4,3,2,1,0\n\
qos_ca_vlarb_high 0:8,1:7,2:6,3:5\n\
qos_swe_vlarb_low 0:1,1:2,2:3,3:4,4:5,5:6,6:7,7:8\n\
qos_swe_sl2vl 1,1,2,2,3,3,4,4,5,5,6,6,7,7,0,15\n";

/// (port GUID of the node, port) → what smpquery shows of its QoS.
type Tables = BTreeMap<(u64, u8), String>;

/// The port GUID, whether a switch, and NumPorts of `smpquery nodeinfo`'s
/// output.
fn node_of(ni: &str) -> (u64, bool, u8) {
    let guid = u64::from_str_radix(
        smp_field(ni, "PortGuid").unwrap().trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let switch = smp_field(ni, "NodeType").unwrap().contains("Switch");
    let ports: u8 = smp_field(ni, "NumPorts").unwrap().parse().unwrap();
    (guid, switch, ports)
}

/// Every port's SL-to-VL tables (a switch's by input port, for each
/// output port), VL arbitration tables and VLHighLimit, read with
/// smpquery from `host`, LIDs 1..=`lids`.
fn tables(sim: &(dyn Simulator + Sync), host: &str, lids: u16) -> Tables {
    let q = |args: Vec<String>| {
        let out = sim
            .client_at("smpquery".as_ref(), host)
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "smpquery {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let node = |lid: u16| {
        let mut t = Vec::new();
        let ni = sim
            .client_at("smpquery".as_ref(), host)
            .args(["nodeinfo", &lid.to_string()])
            .output()
            .unwrap();
        if !ni.status.success() {
            return t;
        }
        let ni = String::from_utf8_lossy(&ni.stdout).into_owned();
        let (guid, switch, ports) = node_of(&ni);
        let list: Vec<Option<u8>> = if switch {
            (1..=ports).map(Some).collect()
        } else {
            vec![None]
        };
        for p in list {
            let args = |what: &str| {
                let mut a = vec![what.to_string(), lid.to_string()];
                a.extend(p.map(|p| p.to_string()));
                a
            };
            let pi = q(args("portinfo"));
            if smp_field(&pi, "LinkState").is_some_and(|s| s.contains("Down")) {
                continue;
            }
            // Drop the headers: they name the LID, which each SM chose.
            let body = |text: String| -> String {
                text.lines()
                    .filter(|l| {
                        !l.starts_with("# SL2VL") && !l.starts_with("# VLArbitration tables")
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let text = format!(
                "{}\n{}\nVLHighLimit {}",
                body(q(args("sl2vl"))),
                body(q(args("vlarb"))),
                smp_field(&pi, "VLHighLimit").unwrap_or("?")
            );
            t.push(((guid, p.unwrap_or(0)), text));
        }
        t
    };
    common::per_lid(lids, node).into_iter().collect()
}

/// The tables after OpenSM, then after ibkit, on fresh simulators made
/// by `start`.
fn both<S: Simulator + Sync>(
    what: &str,
    topo: &Topology,
    start: impl Fn(&Path) -> S,
) -> (Tables, Tables) {
    let dir = std::env::temp_dir().join(format!("ibkit-qos-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("opensm.conf");
    std::fs::write(&conf, CONF).unwrap();
    let conf = conf.to_str().unwrap();
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let lids = topo.nodes.len() as u16 + 2;
    let wait = Duration::from_secs(30);

    let (osm_dump, dump) = (dir.join("osm-dump"), dir.join("ibkit-dump"));
    for d in [&osm_dump, &dump] {
        std::fs::create_dir_all(d).unwrap();
    }

    let sim = start(&dir);
    // With its routing dumps (-D 0x43), into `osm_dump`.
    let mut opensm = sim.client("opensm".as_ref());
    opensm.env("OSM_TMP_DIR", &osm_dump);
    let extra = ["-Q", "-F", conf, "-D", "0x43"];
    let osm = start_opensm_cmd(opensm, &dir, wait, &extra).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let theirs = tables(&sim, host, lids);
    drop(osm);
    drop(sim);

    let sim = start(&dir);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let args = ["--qos-config", conf, "--dump-dir", dump.to_str().unwrap()];
    let sm: RunningSm = start_ibkit_sm(exe, &sim, &args, wait).unwrap();
    let ours = tables(&sim, host, lids);
    drop(sm);
    drop(sim);
    same_sl2vl_dump(what, &osm_dump, &dump);
    let _ = std::fs::remove_dir_all(&dir);
    (theirs, ours)
}

/// `opensm-sl2vl.dump` from both SMs: the same ports in the same order
/// with the same tables, line for line; only the base LIDs, which each
/// SM gave on its own simulator, may differ.
fn same_sl2vl_dump(what: &str, osm_dump: &Path, dump: &Path) {
    let read = |d: &Path| {
        let f = d.join("opensm-sl2vl.dump");
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        (text.lines())
            .map(|l| match l.split_once(", base LID ") {
                Some((a, b)) => format!("{a}, base LID ?{}", &b[b.find(',').unwrap()..]),
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
    };
    let (theirs, ours) = (read(osm_dump), read(dump));
    for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "{what}: opensm-sl2vl.dump line {}", k + 1);
    }
    assert_eq!(ours.len(), theirs.len(), "{what}: opensm-sl2vl.dump lines");
    let ports = ours.iter().filter(|l| l.contains(", base LID ?")).count();
    println!(
        "{what}: opensm-sl2vl.dump equal to OpenSM's but for the LIDs ({} lines, {ports} ports)",
        ours.len()
    );
}

/// Equal port for port; prints what was compared.
fn same(what: &str, theirs: &Tables, ours: &Tables) {
    assert!(!ours.is_empty());
    let mut differ = Vec::new();
    for (k, v) in ours {
        match theirs.get(k) {
            Some(o) if o == v => {}
            o => differ.push(format!(
                "{:#x}/{}:\nOpenSM:\n{}\nibkit:\n{v}",
                k.0,
                k.1,
                o.map_or("(not read)", |s| s)
            )),
        }
    }
    assert_eq!(theirs.len(), ours.len(), "{what}: ports read");
    assert!(
        differ.is_empty(),
        "{what}: QoS tables differ:\n{}",
        differ.join("\n")
    );
    // The policy is there, not the power-on tables: the CA SL-to-VL
    // table's SL 8 is on VL 7, a switch's SL 15 on VL 15.
    assert!(ours
        .values()
        .any(|t| t.contains("| 7| 6| 5| 4| 3| 2| 1| 0|")));
    assert!(ours.values().any(|t| t.contains("| 7| 7| 0|15|")));
    println!(
        "{what}: {} ports' SL-to-VL, VL arbitration and VLHighLimit equal to OpenSM's",
        ours.len()
    );
}

#[test]
fn opensm_and_ibkit_write_the_same_qos_tables_on_ibsim() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for spec in ["mport-ntree:4:2", "random:6:7", "fat-tree-324"] {
        let topo = Topology::from_spec(spec).unwrap();
        let t0 = std::time::Instant::now();
        let (theirs, ours) = both(&spec.replace(':', "-"), &topo, |dir| {
            Ibsim::start_with(&topo, dir, false).unwrap()
        });
        same(&format!("ibsim {spec}"), &theirs, &ours);
        println!(
            "ibsim {spec}: both SMs run and read in {:.1?}",
            t0.elapsed()
        );
    }
}

#[test]
fn opensm_and_ibkit_write_the_same_qos_tables_on_the_served_fabric() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    for spec in ["mport-ntree:4:2", "random:6:7", "fat-tree-324"] {
        let topo = Topology::from_spec(spec).unwrap();
        let t0 = std::time::Instant::now();
        let (theirs, ours) = both(&format!("served-{}", spec.replace(':', "-")), &topo, |_| {
            Served::start(exe, spec, 0, &[]).unwrap()
        });
        same(&format!("served {spec}"), &theirs, &ours);
        // ibkit's agents keep the VLHighLimit a Set(PortInfo) gives
        // (ibsim's do not): the policy's 4 on every port, from both SMs.
        assert!(ours.values().all(|t| t.ends_with("VLHighLimit 4")));
        println!(
            "served {spec}: both SMs run and read in {:.1?}",
            t0.elapsed()
        );
    }
}

/// What an SA answers, through `saquery` from `host`, for every port's
/// SL-to-VL tables (a switch's from each input to each output) and VL
/// arbitration blocks 1 and 3 (the caps of ibsim's ports hold no more),
/// keyed by node GUID and ports, the LIDs taken out.
fn sa_tables(sim: &Ibsim, host: &str, lids: u16) -> Tables {
    let run = |tool: &str, args: &[String]| -> Option<String> {
        let out = sim
            .client_at(std::ffi::OsStr::new(tool), host)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let node = |lid: u16| {
        let mut t = Vec::new();
        let Some(ni) = run("smpquery", &["nodeinfo".into(), lid.to_string()]) else {
            return t;
        };
        let (guid, switch, ports) = node_of(&ni);
        let body = |text: String| -> String {
            let lines: Vec<&str> = text.lines().filter(|l| !l.contains("LID")).collect();
            assert!(!lines.is_empty());
            lines.join("\n")
        };
        let ask = |what: &str, at: String| {
            let text = run("saquery", &[what.into(), at.clone()])
                .unwrap_or_else(|| panic!("saquery {what} {at} failed"));
            body(text)
        };
        let outs: Vec<u8> = if switch {
            (1..=ports).collect()
        } else {
            vec![0]
        };
        for &o in &outs {
            let ins: Vec<u8> = if switch {
                (1..=ports).collect()
            } else {
                vec![0]
            };
            let mut text = String::new();
            for i in ins {
                text += &ask("SL2VL", format!("{lid}/{i}/{o}"));
                text.push('\n');
            }
            for b in [1, 3] {
                text += &ask("VLAR", format!("{lid}/{o}/{b}"));
                text.push('\n');
            }
            t.push(((guid, o), text));
        }
        t
    };
    common::per_lid(lids, node).into_iter().collect()
}

/// OpenSM programs QoS on ibsim and answers SL-to-VL and VL arbitration
/// records from the tables it wrote; then ibkit's SM, with no QoS policy
/// of its own, manages the same simulator. Its SA never wrote those
/// tables: asked for each one, it has the SM read it from the port, and
/// its answers are OpenSM's, port for port.
#[test]
fn ibkits_sa_answers_the_tables_opensm_left_on_the_ports() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-qos-sa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("opensm.conf");
    std::fs::write(&conf, CONF).unwrap();
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let lids = topo.nodes.len() as u16 + 2;
    let wait = Duration::from_secs(30);
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let extra = ["-Q", "-F", conf.to_str().unwrap()];
    let osm = start_opensm_cmd(
        sim.client(std::ffi::OsStr::new("opensm")),
        &dir,
        wait,
        &extra,
    )
    .unwrap();
    let theirs = sa_tables(&sim, host, lids);
    drop(osm);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let mut sm = tests::peers::WatchedSm::start(exe, &sim, host, &[]).unwrap();
    sm.wait_for("SUBNET UP", wait).unwrap();
    let ours = sa_tables(&sim, host, lids);
    // ibkit's own client reads one back the same way: the CA's high
    // block holds OpenSM's qos_ca_vlarb_high (0:8,1:7,2:6,3:5).
    let ca_lid = (1..=lids)
        .find(|&l| {
            let ni = sim
                .client_at(std::ffi::OsStr::new("smpquery"), host)
                .args(["nodeinfo", &l.to_string()])
                .output()
                .unwrap();
            ni.status.success() && String::from_utf8_lossy(&ni.stdout).contains("Channel Adapter")
        })
        .unwrap();
    let out = sim
        .client_at(exe.as_os_str(), host)
        .args(["sa", "vlarb", &ca_lid.to_string(), "0", "3", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["records"][0];
    assert_eq!(r["block_num"], 3, "{v}");
    let weights: Vec<(u64, u64)> = r["vl_arbitration"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .take(5)
        .map(|e| (e["vl"].as_u64().unwrap(), e["weight"].as_u64().unwrap()))
        .collect();
    assert_eq!(weights, [(0, 8), (1, 7), (2, 6), (3, 5), (0, 0)], "{v}");
    let (clean, out) = sm.stop(Duration::from_secs(5));
    assert!(clean, "{out:?}");
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(theirs.len(), ours.len(), "ports asked");
    let mut differ = Vec::new();
    for (k, v) in &ours {
        if theirs.get(k) != Some(v) {
            differ.push(format!(
                "{:#x}/{}:\nOpenSM:\n{:?}\nibkit:\n{v}",
                k.0,
                k.1,
                theirs.get(k)
            ));
        }
    }
    assert!(differ.is_empty(), "answers differ:\n{}", differ.join("\n"));
    // OpenSM's policy is what both answered, not power-on zeros: a CA's
    // SL 8 on VL 7, a switch's SL 15 on VL 15.
    let all: String = ours.values().cloned().collect();
    assert!(all.contains("| 7| 6| 5| 4| 3| 2| 1| 0|"), "{all}");
    assert!(all.contains("| 7| 7| 0|15|"), "{all}");
    println!(
        "ibsim mport-ntree:4:2: {} ports' SL-to-VL and VL arbitration records from ibkit's SA equal OpenSM's",
        ours.len()
    );
}
