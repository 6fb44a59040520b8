//! The same `partitions.conf` given to OpenSM (`-P`) and to `ibkit sm
//! --partitions`, each on a fresh simulator of the same fabric: every
//! port's P_Key table as `smpquery pkeys` (infiniband-diags) reads it back
//! is equal, port for port — on Debian's ibsim and on ibkit's served
//! fabric. (ibsim keeps no partition enforcement bits of a
//! Set(PortInfo), so enforcement is compared on the served fabric only,
//! where ibkit's SMA keeps them.)

use fabric::topology::Topology;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::peers::{start_ibkit_sm, start_opensm_with, Ibsim, RunningSm, Served, Simulator};

mod common;
use common::smp_field;

/// One simulator and SM at a time: they share two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn peers_here() -> bool {
    common::peers_with_smpquery("partitions_ibsim")
}

/// (port GUID of the node, port) → (P_Key table, enforcement bits).
type Tables = BTreeMap<(u64, u8), (Vec<u16>, Option<(bool, bool)>)>;

/// `smpquery` from `host` with `args`: its output, or why it failed.
fn smpquery(c: Command, args: &[String]) -> Result<String, String> {
    let mut c = c;
    let out = c.args(args).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every port's P_Key table (and, with `enforcement`, a switch port's
/// enforcement bits) read with smpquery from `host`, LIDs 1..=`lids`.
fn tables(sim: &dyn Simulator, host: &str, lids: u16, enforcement: bool) -> Tables {
    let q = |args: Vec<String>| smpquery(sim.client_at("smpquery".as_ref(), host), &args);
    let mut t = Tables::new();
    for lid in 1..=lids {
        let Ok(ni) = q(vec!["nodeinfo".into(), lid.to_string()]) else {
            continue;
        };
        let guid = u64::from_str_radix(
            smp_field(&ni, "PortGuid").unwrap().trim_start_matches("0x"),
            16,
        )
        .unwrap();
        let switch = smp_field(&ni, "NodeType").unwrap().contains("Switch");
        let ports: u8 = smp_field(&ni, "NumPorts").unwrap().parse().unwrap();
        let list: Vec<u8> = if switch {
            (0..=ports).collect()
        } else {
            vec![0]
        };
        for p in list {
            let mut args = vec!["pkeys".to_string(), lid.to_string()];
            if switch {
                args.push(p.to_string());
            }
            let text = q(args).unwrap_or_else(|e| panic!("pkeys {lid}/{p}: {e}"));
            let keys: Vec<u16> = text
                .lines()
                .filter(|l| {
                    l.trim_start()
                        .split(':')
                        .next()
                        .is_some_and(|n| n.trim().parse::<u32>().is_ok())
                })
                .flat_map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>())
                .map(|k| u16::from_str_radix(k.trim_start_matches("0x"), 16).unwrap())
                .collect();
            let bits = (enforcement && switch && p > 0).then(|| {
                let pi = q(vec!["portinfo".into(), lid.to_string(), p.to_string()]).unwrap();
                (
                    smp_field(&pi, "PartEnforceInb") == Some("1"),
                    smp_field(&pi, "PartEnforceOutb") == Some("1"),
                )
            });
            t.insert((guid, p), (keys, bits));
        }
    }
    t
}

/// The configuration: the default partition full for all, one partition
/// of two full members and a limited one, one of a single full member
/// with `indx0`, and a third only switches' port 0 are in.
fn config(topo: &Topology) -> String {
    let cas: Vec<u64> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.guid + 1)
        .collect();
    format!(
        "# ibkit and OpenSM, the same file\n\
         Default=0x7fff,ipoib:ALL=full;\n\
         storage=0x0042:{:#018x}=full,{:#018x}=full,\n  {:#018x}=limited;\n\
         mgmt=0x0005,indx0:{:#018x}=full;\n\
         fabric=0x0300:ALL_SWITCHES=full;\n",
        cas[1], cas[2], cas[3], cas[2]
    )
}

/// The tables after OpenSM, then after ibkit, on fresh simulators made
/// by `start`.
fn both<S: Simulator>(
    what: &str,
    topo: &Topology,
    start: impl Fn(&Path) -> S,
    enforcement: bool,
) -> (Tables, Tables) {
    let dir = std::env::temp_dir().join(format!("ibkit-pkeys-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("partitions.conf");
    std::fs::write(&conf, config(topo)).unwrap();
    let conf = conf.to_str().unwrap();
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let lids = topo.nodes.len() as u16 + 2;
    let wait = Duration::from_secs(30);

    let sim = start(&dir);
    let osm = start_opensm_with(&sim, &dir, wait, &["-P", conf]).unwrap();
    // OpenSM writes the tables after SUBNET UP's sweep: let it settle.
    std::thread::sleep(Duration::from_secs(2));
    let theirs = tables(&sim, host, lids, enforcement);
    drop(osm);
    drop(sim);

    let sim = start(&dir);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let sm: RunningSm = start_ibkit_sm(exe, &sim, &["--partitions", conf], wait).unwrap();
    let ours = tables(&sim, host, lids, enforcement);
    drop(sm);
    drop(sim);
    (theirs, ours)
}

/// Equal port for port; prints what was compared.
fn same(what: &str, theirs: &Tables, ours: &Tables) {
    assert!(!ours.is_empty());
    let mut differ = Vec::new();
    for (k, v) in ours {
        match theirs.get(k) {
            Some(o) if o.0 == v.0 => {}
            o => differ.push(format!(
                "{:#x}/{}: OpenSM {:?}, ibkit {:?}",
                k.0,
                k.1,
                o.map(|o| &o.0),
                v.0
            )),
        }
    }
    assert_eq!(theirs.len(), ours.len(), "{what}: ports read");
    assert!(
        differ.is_empty(),
        "{what}: P_Key tables differ:\n{}",
        differ.join("\n")
    );
    let written = ours
        .values()
        .filter(|(t, _)| t.iter().filter(|&&k| k != 0).count() > 1)
        .count();
    println!(
        "{what}: {} ports' P_Key tables equal to OpenSM's ({written} hold more than one P_Key)",
        ours.len()
    );
}

#[test]
fn opensm_and_ibkit_write_the_same_pkey_tables_on_ibsim() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for spec in ["mport-ntree:4:2", "random:6:7"] {
        let topo = Topology::from_spec(spec).unwrap();
        let (theirs, ours) = both(
            &spec.replace(':', "-"),
            &topo,
            |dir| Ibsim::start_with(&topo, dir, false).unwrap(),
            false,
        );
        same(&format!("ibsim {spec}"), &theirs, &ours);
    }
}

#[test]
fn opensm_and_ibkit_write_the_same_pkey_tables_on_the_served_fabric() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let (theirs, ours) = both(
        "served",
        &topo,
        |_| Served::start(exe, spec, 0, &[]).unwrap(),
        true,
    );
    same(&format!("served {spec}"), &theirs, &ours);
    // Both SMs turn enforcement on at every switch port cabled to a CA,
    // and off between switches.
    for (k, (_, bits)) in &ours {
        assert_eq!(bits, &theirs[k].1, "{:#x}/{}: enforcement", k.0, k.1);
    }
    let on = ours
        .values()
        .filter(|(_, b)| *b == Some((true, true)))
        .count();
    println!("served {spec}: enforcement on at {on} switch ports, as OpenSM");
}

/// The P_Key table of CA `i`'s port as smpquery reads it, by its LID.
fn ca_table(sim: &dyn Simulator, host: &str, lid: u16) -> Vec<u16> {
    let text = smpquery(
        sim.client_at("smpquery".as_ref(), host),
        &["pkeys".into(), lid.to_string()],
    )
    .unwrap();
    let first = text.lines().next().unwrap_or_default();
    first
        .split_whitespace()
        .skip(1)
        .map(|k| u16::from_str_radix(k.trim_start_matches("0x"), 16).unwrap())
        .collect()
}

/// The LID of the port with GUID `guid`, found by smpquery (LIDs 1..=`n`).
fn lid_of(sim: &dyn Simulator, host: &str, guid: u64, n: u16) -> u16 {
    (1..=n)
        .find(|l| {
            smpquery(
                sim.client_at("smpquery".as_ref(), host),
                &["nodeinfo".into(), l.to_string()],
            )
            .is_ok_and(|t| smp_field(&t, "PortGuid") == Some(&format!("{guid:#018x}")[..]))
        })
        .unwrap()
}

/// SIGHUP makes `ibkit sm` re-read its partition file, on ibsim and on
/// ibkit's served fabric (where the SM is a client process like any
/// other: the signal, not the server's control socket, reaches it).
#[test]
fn sighup_rereads_the_partitions_and_a_broken_file_keeps_them() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    sighup_on("ibsim", &topo, |dir| {
        Box::new(Ibsim::start_with(&topo, dir, false).unwrap())
    });
    sighup_on("served", &topo, |_| {
        Box::new(Served::start(exe, spec, 0, &[]).unwrap())
    });
}

fn sighup_on(what: &str, topo: &Topology, start: impl Fn(&Path) -> Box<dyn Simulator>) {
    let dir = std::env::temp_dir().join(format!("ibkit-pkeys-hup-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("partitions.conf");
    let cas: Vec<u64> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.guid + 1)
        .collect();
    std::fs::write(
        &conf,
        format!("Default=0x7fff:ALL=full;\np=0x42:{:#x}=full;\n", cas[1]),
    )
    .unwrap();
    let sim = start(&dir);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let sm = start_ibkit_sm(
        exe,
        &*sim,
        &["--partitions", conf.to_str().unwrap()],
        Duration::from_secs(30),
    )
    .unwrap();
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let n = topo.nodes.len() as u16 + 2;
    let (l1, l2) = (
        lid_of(&*sim, host, cas[1], n),
        lid_of(&*sim, host, cas[2], n),
    );
    assert_eq!(ca_table(&*sim, host, l1)[..2], [0xFFFF, 0x8042]);
    assert_eq!(ca_table(&*sim, host, l2)[..2], [0xFFFF, 0]);
    let hup = || {
        let ok = Command::new("kill")
            .args(["-HUP", &sm.pid().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    };
    let settle = |lid: u16, want: &[u16]| {
        let t = std::time::Instant::now();
        while ca_table(&*sim, host, lid)[..want.len()] != *want {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "LID {lid} never held {want:x?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The partition moves from one host to the other.
    std::fs::write(
        &conf,
        format!("Default=0x7fff:ALL=full;\np=0x42:{:#x}=full;\n", cas[2]),
    )
    .unwrap();
    hup();
    settle(l2, &[0xFFFF, 0x8042]);
    settle(l1, &[0xFFFF, 0]);
    // A broken file: refused, and what is in force stays.
    std::fs::write(&conf, "Default=0x7fff:ALL=full;\np=0x42:0x0=full;\n").unwrap();
    hup();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ca_table(&*sim, host, l2)[..2], [0xFFFF, 0x8042]);
    let (clean, _) = sm.stop(Duration::from_secs(10));
    assert!(
        clean,
        "{what}: the SM exits cleanly on SIGTERM after the reloads"
    );
    println!("{what}: SIGHUP moved the partition; a broken file kept it");
}
