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
use common::{hup, smp_field, wait_until};

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
fn tables(sim: &(dyn Simulator + Sync), host: &str, lids: u16, enforcement: bool) -> Tables {
    let q = |args: Vec<String>| smpquery(sim.client_at("smpquery".as_ref(), host), &args);
    let node = |lid: u16| {
        let Ok(ni) = q(vec!["nodeinfo".into(), lid.to_string()]) else {
            return Vec::new();
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
        let mut t = Vec::new();
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
            t.push(((guid, p), (keys, bits)));
        }
        t
    };
    common::per_lid(lids, node).into_iter().collect()
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
fn both<S: Simulator + Sync>(
    what: &str,
    topo: &Topology,
    start: impl Fn(&Path) -> S,
    enforcement: bool,
) -> (Tables, Tables) {
    both_with(what, topo, start, enforcement, None)
}

/// [`both_with`] with [`config`]'s partitions.
fn both_with<S: Simulator + Sync>(
    what: &str,
    topo: &Topology,
    start: impl Fn(&Path) -> S,
    enforcement: bool,
    opensm_conf: Option<&str>,
) -> (Tables, Tables) {
    both_files(what, topo, start, enforcement, &config(topo), opensm_conf)
}

/// [`both`] with the partitions `partitions` (the text of a
/// `partitions.conf`), both SMs also given `opensm_conf` (the text of an
/// `opensm.conf`: OpenSM's `-F`, ibkit's `--opensm-config`).
fn both_files<S: Simulator + Sync>(
    what: &str,
    topo: &Topology,
    start: impl Fn(&Path) -> S,
    enforcement: bool,
    partitions: &str,
    opensm_conf: Option<&str>,
) -> (Tables, Tables) {
    let dir = std::env::temp_dir().join(format!("ibkit-pkeys-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("partitions.conf");
    std::fs::write(&conf, partitions).unwrap();
    let conf = conf.to_str().unwrap();
    let site = dir.join("opensm.conf");
    let site = site.to_str().unwrap();
    let (mut osm_args, mut our_args) = (vec!["-P", conf], vec!["--partitions", conf]);
    if let Some(text) = opensm_conf {
        std::fs::write(site, text).unwrap();
        osm_args.extend(["-F", site]);
        our_args.extend(["--opensm-config", site]);
    }
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let lids = topo.nodes.len() as u16 + 2;
    let wait = Duration::from_secs(30);

    let sim = start(&dir);
    let osm = start_opensm_with(&sim, &dir, wait, &osm_args).unwrap();
    // OpenSM writes the tables after SUBNET UP's sweep: let it settle.
    std::thread::sleep(Duration::from_secs(2));
    let theirs = tables(&sim, host, lids, enforcement);
    drop(osm);
    drop(sim);

    let sim = start(&dir);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let sm: RunningSm = start_ibkit_sm(exe, &sim, &our_args, wait).unwrap();
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
    for spec in ["mport-ntree:4:2", "random:6:7", "fat-tree-324"] {
        let topo = Topology::from_spec(spec).unwrap();
        let t0 = std::time::Instant::now();
        let (theirs, ours) = both(
            &spec.replace(':', "-"),
            &topo,
            |dir| Ibsim::start_with(&topo, dir, false).unwrap(),
            false,
        );
        same(&format!("ibsim {spec}"), &theirs, &ours);
        println!(
            "ibsim {spec}: both SMs run and read in {:.1?}",
            t0.elapsed()
        );
    }
}

#[test]
fn opensm_and_ibkit_write_the_same_pkey_tables_on_the_served_fabric() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    for spec in ["mport-ntree:4:2", "random:6:7", "fat-tree-324"] {
        let topo = Topology::from_spec(spec).unwrap();
        let t0 = std::time::Instant::now();
        let (theirs, ours) = both(
            &format!("served-{}", spec.replace(':', "-")),
            &topo,
            |_| Served::start(exe, spec, 0, &[]).unwrap(),
            true,
        );
        same(&format!("served {spec}"), &theirs, &ours);
        // Both SMs turn enforcement on at every switch port cabled to a
        // CA, and off between switches.
        for (k, (_, bits)) in &ours {
            assert_eq!(bits, &theirs[k].1, "{:#x}/{}: enforcement", k.0, k.1);
        }
        let on = ours
            .values()
            .filter(|(_, b)| *b == Some((true, true)))
            .count();
        let to_cas = topo
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == mad_core::attr::NodeType::Switch)
            .flat_map(|(i, n)| (1..=n.ports).map(move |p| (i, p)))
            .filter(|&(i, p)| {
                topo.peer_of(i, p)
                    .is_some_and(|(m, _)| topo.nodes[m].kind != mad_core::attr::NodeType::Switch)
            })
            .count();
        assert_eq!(
            on, to_cas,
            "{spec}: enforcement at every switch port cabled to a CA"
        );
        println!(
            "served {spec}: enforcement on at {on} switch ports, as OpenSM; both SMs run and read in {:.1?}",
            t0.elapsed()
        );
    }
}

/// A file that makes ports both full and limited members: the default
/// partition `both` for all but one CA (limited), a partition with a
/// `both`, a `full` and a `limited` member, an `indx0` partition whose
/// member is `both`, and one all switches are `both` in and a CA full.
fn config_both(topo: &Topology) -> String {
    let cas: Vec<u64> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.guid + 1)
        .collect();
    format!(
        "Default=0x7fff,ipoib:ALL=both,{:#018x}=limited;\n\
         storage=0x0042:{:#018x}=both,{:#018x}=full,{:#018x}=limited;\n\
         mgmt=0x0005,indx0:{:#018x}=both;\n\
         fabric=0x0300:ALL_SWITCHES=both,{:#018x}=full;\n",
        cas[4], cas[1], cas[2], cas[3], cas[2], cas[1]
    )
}

/// OpenSM's `allow_both_pkeys`: the same `partitions.conf`, with `both`
/// members, and the same `opensm.conf` given to both SMs. With `TRUE` a
/// `both` member holds the full and the limited P_Key; with `FALSE`
/// only the full one. Every port's table equal to OpenSM's, on ibsim
/// and (switch ports' tables and enforcement too) on the served fabric.
#[test]
fn opensm_and_ibkit_apply_allow_both_pkeys_alike() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    for spec in ["mport-ntree:4:2", "random:6:7"] {
        let topo = Topology::from_spec(spec).unwrap();
        let member = topo
            .nodes
            .iter()
            .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
            .nth(1)
            .unwrap()
            .guid
            + 1;
        for allow in ["TRUE", "FALSE"] {
            let conf = format!("allow_both_pkeys {allow}\n");
            for served in [false, true] {
                let t0 = std::time::Instant::now();
                let what = format!("both-{allow}-{served}-{}", spec.replace(':', "-"));
                let (theirs, ours) = if served {
                    both_files(
                        &what,
                        &topo,
                        |_| Served::start(exe, spec, 0, &[]).unwrap(),
                        true,
                        &config_both(&topo),
                        Some(&conf),
                    )
                } else {
                    both_files(
                        &what,
                        &topo,
                        |dir| Ibsim::start_with(&topo, dir, false).unwrap(),
                        false,
                        &config_both(&topo),
                        Some(&conf),
                    )
                };
                let place = if served { "served" } else { "ibsim" };
                same(
                    &format!("{place} {spec}, allow_both_pkeys {allow}"),
                    &theirs,
                    &ours,
                );
                if served {
                    for (k, (_, bits)) in &ours {
                        assert_eq!(bits, &theirs[k].1, "{:#x}/{}: enforcement", k.0, k.1);
                    }
                }
                // The `both` member of 0x0042 holds both keys only with TRUE.
                let t = &ours[&(member, 0)].0;
                assert!(t.contains(&0x8042), "{t:x?}");
                assert_eq!(t.contains(&0x0042), allow == "TRUE", "{t:x?}");
                println!(
                    "{place} {spec}, allow_both_pkeys {allow}: the both member holds {:x?}; {:.1?}",
                    t.iter().filter(|&&k| k != 0).collect::<Vec<_>>(),
                    t0.elapsed()
                );
            }
        }
    }
}

/// SIGHUP applies a new `allow_both_pkeys` from an `opensm.conf` on
/// ibsim (OpenSM itself takes it only at start): the `both` member of
/// [`config_both`]'s 0x0042 gains the limited key after the keys it
/// holds, and loses it again, its other keys left where they are.
#[test]
fn sighup_applies_a_new_allow_both_pkeys() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-both-hup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let parts = dir.join("partitions.conf");
    std::fs::write(&parts, config_both(&topo)).unwrap();
    let site = dir.join("opensm.conf");
    let conf = |allow: &str| {
        let text = format!(
            "partition_config_file {}\nallow_both_pkeys {allow}\n",
            parts.display()
        );
        std::fs::write(&site, text).unwrap();
    };
    conf("FALSE");
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let sm = start_ibkit_sm(
        exe,
        &sim,
        &["--opensm-config", site.to_str().unwrap()],
        Duration::from_secs(30),
    )
    .unwrap();
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let member = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .nth(1)
        .unwrap()
        .guid
        + 1;
    let lid = lid_of(&sim, host, member, topo.nodes.len() as u16 + 2);
    let held = || ca_table(&sim, host, lid)[..5].to_vec();
    assert_eq!(held(), [0xFFFF, 0x8300, 0x8042, 0, 0]);
    for (allow, want) in [
        ("TRUE", [0xFFFF, 0x8300, 0x8042, 0x0042, 0x7FFF]),
        ("FALSE", [0xFFFF, 0x8300, 0x8042, 0, 0]),
    ] {
        conf(allow);
        hup(sm.pid());
        let took = wait_until(
            Duration::from_secs(10),
            || held() == want,
            || format!("allow_both_pkeys {allow}: {:x?}", held()),
        );
        println!(
            "SIGHUP, allow_both_pkeys {allow}: the both member holds {:x?} after {took:.1?}",
            held()
        );
    }
}

/// OpenSM's `keep_pkey_indexes`, beside OpenSM on ibsim: both SMs start
/// with two partitions (0x0042, then 0x0043, on one host) and get
/// SIGHUP once the file has only 0x0043. With `TRUE` (OpenSM's default)
/// 0x0043 keeps its index and leaves a hole where 0x0042 was; with
/// `FALSE` it moves down into it. Every port's table equal to OpenSM's.
#[test]
fn opensm_and_ibkit_keep_or_repack_pkey_indexes_alike() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-keep-idx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let member = partition_member(&topo);
    let parts = dir.join("partitions.conf");
    let site = dir.join("opensm.conf");
    let first = format!(
        "Default=0x7fff:ALL=full;\np=0x0042:{member:#x}=full;\nq=0x0043:{member:#x}=full;\n"
    );
    let second = format!("Default=0x7fff:ALL=full;\nq=0x0043:{member:#x}=full;\n");
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let n = topo.nodes.len() as u16 + 2;
    let wait = Duration::from_secs(30);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    for keep in ["TRUE", "FALSE"] {
        let mut got = Vec::new();
        for opensm in [true, false] {
            std::fs::write(&parts, &first).unwrap();
            let text = format!(
                "partition_config_file {}\nkeep_pkey_indexes {keep}\n",
                parts.display()
            );
            std::fs::write(&site, text).unwrap();
            let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
            let sm = if opensm {
                start_opensm_with(&sim, &dir, wait, &["-F", site.to_str().unwrap()]).unwrap()
            } else {
                start_ibkit_sm(
                    exe,
                    &sim,
                    &["--opensm-config", site.to_str().unwrap()],
                    wait,
                )
                .unwrap()
            };
            let lid = lid_of(&sim, host, member, n);
            wait_until(
                wait,
                || ca_table(&sim, host, lid)[..3] == [0xFFFF, 0x8042, 0x8043],
                || format!("{keep}, OpenSM {opensm}: {:x?}", ca_table(&sim, host, lid)),
            );
            std::fs::write(&parts, &second).unwrap();
            hup(sm.pid());
            wait_until(
                wait,
                || !ca_table(&sim, host, lid).contains(&0x8042),
                || format!("{keep}, OpenSM {opensm}: 0x8042 never left"),
            );
            // Let the SM finish the sweep (the switch port's table too).
            std::thread::sleep(Duration::from_secs(1));
            got.push((
                ca_table(&sim, host, lid)[..3].to_vec(),
                tables(&sim, host, n, false),
            ));
            drop(sm);
            drop(sim);
        }
        let want: &[u16] = if keep == "TRUE" {
            &[0xFFFF, 0, 0x8043]
        } else {
            &[0xFFFF, 0x8043, 0]
        };
        assert_eq!(got[0].0, want, "OpenSM, keep_pkey_indexes {keep}");
        assert_eq!(got[1].0, want, "ibkit, keep_pkey_indexes {keep}");
        same(
            &format!("ibsim {spec}, keep_pkey_indexes {keep}, after SIGHUP"),
            &got[0].1,
            &got[1].1,
        );
        println!("keep_pkey_indexes {keep}: the host holds {want:x?} after SIGHUP under both SMs");
    }
}

/// PathRecords between every two CA ports of `topo` (asked from `host`
/// with no P_Key, then with each of `pkeys`), as ibsim's SM answers
/// them: the P_Key each carries, or why there was none.
fn pair_pkeys(
    sim: &dyn Simulator,
    host: &str,
    topo: &Topology,
    pkeys: &[&str],
) -> Vec<(String, Result<u64, String>)> {
    let cas: Vec<u64> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.guid + 1)
        .collect();
    let mut out = Vec::new();
    for &a in &cas {
        for &b in &cas {
            for k in std::iter::once(None).chain(pkeys.iter().map(Some)) {
                let mut args = vec![format!("sgid={}", gid(a)), format!("dgid={}", gid(b))];
                args.extend(k.map(|k| format!("pkey={k}")));
                let r = path_fields(sim, host, &args).map(|f| f.3);
                out.push((format!("{a:#x} -> {b:#x} {}", k.unwrap_or(&"")), r));
            }
        }
    }
    out
}

/// With `allow_both_pkeys` TRUE and FALSE and [`config_both`]'s
/// partitions, both SMs give every pair of CA ports the same PathRecord
/// P_Key on ibsim: none asked (the SA picks a shared one), the limited
/// and the full key of 0x0042 asked; or both refuse the pair.
#[test]
fn opensm_and_ibkit_give_pathrecords_the_same_pkey_with_both_members() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-pr-both-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let parts = dir.join("partitions.conf");
    std::fs::write(&parts, config_both(&topo)).unwrap();
    let p = parts.to_str().unwrap();
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    let wait = Duration::from_secs(30);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let asked = ["0x0042", "0x8042"];
    for allow in ["FALSE", "TRUE"] {
        let site = dir.join("opensm.conf");
        std::fs::write(&site, format!("allow_both_pkeys {allow}\n")).unwrap();
        let site = site.to_str().unwrap();
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let osm = start_opensm_with(&sim, &dir, wait, &["-P", p, "-F", site]).unwrap();
        std::thread::sleep(Duration::from_secs(2));
        let theirs = pair_pkeys(&sim, host, &topo, &asked);
        drop(osm);
        drop(sim);
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let sm: RunningSm = start_ibkit_sm(
            exe,
            &sim,
            &["--partitions", p, "--opensm-config", site],
            wait,
        )
        .unwrap();
        let ours = pair_pkeys(&sim, host, &topo, &asked);
        drop(sm);
        drop(sim);
        let differ: Vec<String> = (theirs.iter().zip(&ours))
            .filter(|(t, o)| t.1.is_ok() != o.1.is_ok() || (t.1.is_ok() && t.1 != o.1))
            .map(|(t, o)| format!("{}: OpenSM {:x?}, ibkit {:x?}", t.0, t.1, o.1))
            .collect();
        assert!(
            differ.is_empty(),
            "allow_both_pkeys {allow}: {} of {} differ:\n{}",
            differ.len(),
            ours.len(),
            differ.join("\n")
        );
        let mut keys: BTreeMap<u64, usize> = BTreeMap::new();
        for (_, r) in &ours {
            if let Ok(k) = r {
                *keys.entry(*k).or_default() += 1;
            }
        }
        let none = ours.iter().filter(|r| r.1.is_err()).count();
        assert!(keys.len() > 2 && none > 0, "{keys:x?}, {none} refused");
        println!("allow_both_pkeys {allow}: {} PathRecord queries answered alike ({none} refused by both); P_Keys given: {keys:x?}", ours.len());
    }
}

/// OpenSM's `part_enforce in`, `out` and `off` (and the older
/// `no_partition_enforcement TRUE`) in one `opensm.conf` given to both
/// SMs on the served fabric: every switch port's enforcement bits, and
/// every P_Key table, equal port for port. With `off` neither SM writes a
/// switch port's table.
#[test]
fn opensm_and_ibkit_enforce_partitions_alike_as_part_enforce_says() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    for (line, want) in [
        ("part_enforce in", (true, false)),
        ("part_enforce out", (false, true)),
        ("part_enforce off", (false, false)),
        (
            "part_enforce both\nno_partition_enforcement TRUE",
            (false, false),
        ),
    ] {
        let t0 = std::time::Instant::now();
        let what = format!("enforce-{}", line.len());
        let (theirs, ours) = both_with(
            &what,
            &topo,
            |_| Served::start(exe, spec, 0, &[]).unwrap(),
            true,
            Some(&format!("{line}\n")),
        );
        same(&format!("served {spec}, {line:?}"), &theirs, &ours);
        let mut to_cas = 0;
        for (k, (table, bits)) in &ours {
            assert_eq!(
                bits, &theirs[k].1,
                "{line:?}: {:#x}/{}: enforcement",
                k.0, k.1
            );
            let Some(bits) = bits else { continue };
            let member = table.iter().any(|&k| k & 0x7FFF == 0x42);
            if *bits == want && want != (false, false) {
                to_cas += 1;
            }
            if want == (false, false) {
                assert!(!member, "{line:?}: {:#x}/{} written", k.0, k.1);
            }
        }
        let held = (ours.iter())
            .filter(|((_, p), (t, b))| {
                *p > 0 && b.is_some() && t.iter().any(|&k| k & 0x7FFF == 0x42)
            })
            .count();
        if want != (false, false) {
            assert!(
                to_cas > 0 && held > 0,
                "{line:?}: {to_cas} ports, {held} hold 0x42"
            );
        }
        println!(
            "served {spec}, {line:?}: bits {want:?} at {to_cas} switch ports, {held} switch ports hold 0x42, as OpenSM; {:.1?}",
            t0.elapsed()
        );
    }
}

/// SIGHUP applies a new `part_enforce` from `ibkit sm --config` on the
/// running served fabric. Started with `off`, the switch port cabled to a
/// partition's member holds neither bit nor the member's P_Key; `in`
/// writes its table and turns on inbound; then both ways; then off again
/// (the table left as it is, as OpenSM leaves it).
#[test]
fn sighup_applies_a_new_part_enforce() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-enforce-hup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("partitions.conf"), config(&topo)).unwrap();
    let toml = dir.join("sm.toml");
    let write = |mode: &str| {
        let text = format!("partitions = \"partitions.conf\"\npart_enforce = \"{mode}\"\n");
        std::fs::write(&toml, text).unwrap();
    };
    write("off");
    let sim = Served::start(exe, spec, 0, &[]).unwrap();
    let sm = start_ibkit_sm(
        exe,
        &sim,
        &["--config", toml.to_str().unwrap()],
        Duration::from_secs(30),
    )
    .unwrap();
    let host = &topo.nodes[topo.nodes.iter().rposition(|n| n.ports == 1).unwrap()].name;
    // The switch port cabled to the partition's second member.
    let ca = (topo.nodes.iter())
        .position(|n| n.guid + 1 == partition_member(&topo))
        .unwrap();
    let (sw, port) = topo.peer_of(ca, 1).unwrap();
    let sw_guid = format!("{:#018x}", topo.nodes[sw].guid);
    let q = |args: Vec<String>| smpquery(sim.client_at("smpquery".as_ref(), host), &args);
    let lid = (1..=topo.nodes.len() as u16 + 2)
        .find(|l| {
            q(vec!["nodeinfo".into(), l.to_string()])
                .is_ok_and(|t| smp_field(&t, "Guid") == Some(&sw_guid[..]))
        })
        .unwrap();
    let bits = || {
        let pi = q(vec!["portinfo".into(), lid.to_string(), port.to_string()]).unwrap();
        (
            smp_field(&pi, "PartEnforceInb") == Some("1"),
            smp_field(&pi, "PartEnforceOutb") == Some("1"),
        )
    };
    let holds = || {
        let t = q(vec!["pkeys".into(), lid.to_string(), port.to_string()]).unwrap();
        t.contains("0x8042")
    };
    assert_eq!(bits(), (false, false));
    assert!(!holds(), "off: the switch port's table is not written");
    for (mode, want) in [
        ("in", (true, false)),
        ("both", (true, true)),
        ("off", (false, false)),
    ] {
        write(mode);
        let said = sim.control("reload-sm").unwrap().unwrap();
        assert!(said.starts_with("ok: SIGHUP"), "{said}");
        let took = wait_until(
            Duration::from_secs(10),
            || bits() == want && holds(),
            || {
                format!(
                    "part_enforce {mode}: bits {:?}, not {want:?}, or the member's key not held ({})",
                    bits(),
                    holds()
                )
            },
        );
        println!("SIGHUP, part_enforce {mode}: {want:?} in {took:.1?}");
    }
    let (clean, _) = sm.stop(Duration::from_secs(10));
    assert!(clean, "the SM exits cleanly on SIGTERM after the reloads");
}

/// The port GUID of the second member of `config`'s partition 0x42.
fn partition_member(topo: &Topology) -> u64 {
    (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| n.guid + 1)
        .nth(2)
        .unwrap()
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
/// ibkit's served fabric, where `ibkit fabric ctl reload-sm` sends it
/// (the server signals the SM client its requester runs).
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
    let hup = || match sim.control("reload-sm") {
        Some(said) => {
            let said = said.unwrap();
            assert_eq!(
                said,
                format!("ok: SIGHUP sent to the SM (pid {})", sm.pid())
            );
        }
        None => hup(sm.pid()),
    };
    let settle = |lid: u16, want: &[u16]| {
        wait_until(
            Duration::from_secs(10),
            || ca_table(&*sim, host, lid)[..want.len()] == *want,
            || format!("LID {lid} never held {want:x?}"),
        );
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
    let how = if sim.control("stats").is_some() {
        "ctl reload-sm"
    } else {
        "SIGHUP"
    };
    println!("{what}: {how} moved the partition; a broken file kept it");
}

/// The SL of the one PathRecord `ibkit sa path` gets from `host` with
/// `args`: `Ok(sl)`, or `Err` with the exit status and why (no record).
fn path_sl(sim: &dyn Simulator, host: &str, args: &[String]) -> Result<u64, String> {
    path_fields(sim, host, args).map(|f| f.0)
}

/// The SL of the group `mgid` as `saquery -g` from `host` lists it
/// (`None`: not listed).
fn group_sl(sim: &dyn Simulator, host: &str, mgid: &str) -> Option<u64> {
    let out = (sim.client_at("saquery".as_ref(), host).arg("-g").output()).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let block = text.split("MCMemberRecord group dump:").find(|b| {
        b.lines()
            .any(|l| l.trim() == format!("MGID....................{mgid}"))
    })?;
    let sl = block.lines().find_map(|l| l.trim().strip_prefix("SL"))?;
    u64::from_str_radix(sl.trim_start_matches('.').trim_start_matches("0x"), 16).ok()
}

/// The files both SMs get in the PathRecord QoS tests, written into
/// `dir`: the default partition and `storage` (0x0042, with `flags`) of
/// the last CA and the second, and the QoS policy `policy` makes of the
/// CAs' port GUIDs. Returns the port GUIDs, the last CA (where the
/// requests come from) and the two files.
fn qos_files(
    dir: &Path,
    topo: &Topology,
    flags: &str,
    policy: impl Fn(&[u64]) -> String,
) -> (Vec<u64>, String, std::path::PathBuf, std::path::PathBuf) {
    let cas: Vec<&fabric::topology::Node> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .collect();
    let guids: Vec<u64> = cas.iter().map(|n| n.guid + 1).collect();
    let me = *guids.last().unwrap();
    let parts = dir.join("partitions.conf");
    std::fs::write(
        &parts,
        format!(
            "Default=0x7fff,ipoib:ALL=full;\nstorage=0x0042{flags}:{me:#x}=full,{:#x}=full;\n",
            guids[1]
        ),
    )
    .unwrap();
    let file = dir.join("qos-policy.conf");
    std::fs::write(&file, policy(&guids)).unwrap();
    let host = cas.last().unwrap().name.clone();
    (guids, host, parts, file)
}

/// A port GUID's GID under the default subnet prefix, as `ibkit sa` reads it.
fn gid(g: u64) -> String {
    format!(
        "fe80::{:x}:{:x}:{:x}:{:x}",
        g >> 48,
        (g >> 32) & 0xFFFF,
        (g >> 16) & 0xFFFF,
        g & 0xFFFF
    )
}

/// The same partitions (one with `sl=3`) and the same `qos-policy.conf`
/// (`qos-ulps`: a default, a ServiceID, IPoIB's P_Key, an SRP target)
/// given to OpenSM (`-Q -P -Y`) and to `ibkit sm` (`--partitions
/// --qos-policy`) on fresh ibsims of one fabric: the same PathRecord
/// requests, by GID from one host, get the same SL from both SAs — or
/// no record from both. Without a policy, the partition's SL from both.
/// The default partition's IPoIB broadcast group, as `saquery -g` lists
/// it: SL 0 from both without a policy; with it, OpenSM's stays 0 (its
/// policy is for PathRecords alone) and ibkit's is the 4 of the policy's
/// `ipoib` rule, its IPoIB PathRecords' SL (and 2 once a SIGHUP reads a
/// policy whose default is 2).
#[test]
fn opensm_and_ibkit_give_pathrecords_the_same_sl_on_ibsim() {
    const BCAST: &str = "ff12:401b:ffff::ffff:ffff";
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-qos-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cas, host, parts, policy) = qos_files(&dir, &topo, ",sl=3", |cas| {
        format!(
            "qos-ulps\n  default : 1\n  any, service-id 0x6234 : 6\n  ipoib : 4\n  \
             srp, target-port-guid {:#x} : 7\nend-qos-ulps\n",
            cas[2]
        )
    });
    let (me, host) = (*cas.last().unwrap(), host.as_str());
    let ends = |to: u64| vec![format!("sgid={}", gid(me)), format!("dgid={}", gid(to))];
    let with = |to: u64, more: &[&str]| {
        let mut v = ends(to);
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    let queries: Vec<(&str, Vec<String>, bool)> = vec![
        ("plain", ends(cas[1]), true),
        ("storage P_Key", with(cas[1], &["pkey=0x8042"]), false),
        ("default P_Key", with(cas[1], &["pkey=0xffff"]), true),
        (
            "ServiceID 0x6234",
            with(cas[1], &["service_id_msb=0", "service_id_lsb=0x6234"]),
            true,
        ),
        ("SRP target", ends(cas[2]), true),
        ("SL 5 asked", with(cas[1], &["sl=5"]), true),
        ("SL 1 asked", with(cas[1], &["sl=1"]), true),
    ];
    let wait = Duration::from_secs(30);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let (p, y) = (parts.to_str().unwrap(), policy.to_str().unwrap());
    let mut rows = Vec::new();
    for with_policy in [false, true] {
        let ask = |sim: &dyn Simulator| -> Vec<Result<u64, String>> {
            (queries.iter())
                .filter(|q| with_policy || !q.2)
                .map(|q| path_sl(sim, host, &q.1))
                .collect()
        };
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let mut args = vec!["-Q", "-P", p];
        if with_policy {
            args.extend(["-Y", y]);
        }
        let osm = start_opensm_with(&sim, &dir, wait, &args).unwrap();
        std::thread::sleep(Duration::from_secs(2));
        let theirs = ask(&sim);
        let their_bcast = group_sl(&sim, host, BCAST);
        drop(osm);
        drop(sim);
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let mut args = vec!["--partitions", p];
        if with_policy {
            args.extend(["--qos-policy", y]);
        }
        let sm: RunningSm = start_ibkit_sm(exe, &sim, &args, wait).unwrap();
        let ours = ask(&sim);
        let our_bcast = group_sl(&sim, host, BCAST);
        rows.push(format!(
            "{:<6} {:<18} OpenSM {:<22} ibkit {:?}",
            if with_policy { "policy" } else { "none" },
            "broadcast group",
            format!("{their_bcast:?}"),
            our_bcast
        ));
        assert_eq!(their_bcast, Some(0), "OpenSM's broadcast group");
        assert_eq!(our_bcast, Some(if with_policy { 4 } else { 0 }));
        if with_policy {
            // SIGHUP re-reads the policy; a broken one keeps it.
            let reload = |text: &str| {
                std::fs::write(&policy, text).unwrap();
                hup(sm.pid());
            };
            reload("qos-ulps\n default : 2\nend-qos-ulps\n");
            wait_until(
                Duration::from_secs(10),
                || path_sl(&sim, host, &queries[0].1) == Ok(2),
                || "SIGHUP: never SL 2".into(),
            );
            assert_eq!(group_sl(&sim, host, BCAST), Some(2), "after SIGHUP");
            reload("qos-ulps\n default : 99\nend-qos-ulps\n");
            std::thread::sleep(Duration::from_millis(500));
            assert_eq!(path_sl(&sim, host, &queries[0].1), Ok(2));
            assert_eq!(group_sl(&sim, host, BCAST), Some(2));
            rows.push(
                "policy SIGHUP: default 1 -> 2 read (PathRecords and the broadcast group); a broken file kept 2"
                    .into(),
            );
        }
        drop(sm);
        drop(sim);
        let names = (queries.iter()).filter(|q| with_policy || !q.2);
        for ((q, t), o) in names.zip(&theirs).zip(&ours) {
            rows.push(format!(
                "{:<6} {:<18} OpenSM {:<22} ibkit {:?}",
                if with_policy { "policy" } else { "none" },
                q.0,
                format!("{t:?}"),
                o
            ));
            assert_eq!(t.is_ok(), o.is_ok(), "{}: OpenSM {t:?}, ibkit {o:?}", q.0);
            if let (Ok(t), Ok(o)) = (t, o) {
                assert_eq!(t, o, "{}: SL", q.0);
            }
        }
        // What the files say, so that agreement is not agreement on nothing.
        if with_policy {
            assert_eq!(
                ours.iter()
                    .map(|r| r.as_ref().ok().copied())
                    .collect::<Vec<_>>(),
                [Some(1), Some(1), Some(4), Some(6), Some(7), None, Some(1)]
            );
        } else {
            assert_eq!(ours, [Ok(3)]);
        }
    }
    println!("{}", rows.join("\n"));
}

/// The one PathRecord `ibkit sa path` gets from `host` with `args`, as
/// (SL, MTU, rate, P_Key, packet lifetime); `Err` when there is none.
fn path_fields(
    sim: &dyn Simulator,
    host: &str,
    args: &[String],
) -> Result<(u64, u64, u64, u64, u64), String> {
    let out = sim
        .client_at(env!("CARGO_BIN_EXE_ibkit").as_ref(), host)
        .args(["sa", "path", "--json"])
        .args(args)
        .output()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let num = |r: &serde_json::Value, k: &str| -> u64 {
        match &r[k] {
            serde_json::Value::String(s) => {
                u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
            }
            n => n.as_u64().unwrap_or_else(|| panic!("{k} in {r}")),
        }
    };
    match v["records"].as_array().map(|r| r.as_slice()) {
        Some([r]) if out.status.success() => Ok((
            num(r, "sl"),
            num(r, "mtu"),
            num(r, "rate"),
            num(r, "pkey"),
            num(r, "packet_life_time"),
        )),
        _ => Err(format!(
            "exit {:?}, {} record(s)",
            out.status.code(),
            v["records"].as_array().map_or(0, |r| r.len())
        )),
    }
}

/// OpenSM's full QoS policy — port groups by GUID, by partition name and
/// by node type; levels with an SL, MTU and rate limits, a packet
/// lifetime and a P_Key; match rules by ServiceID, by source and
/// destination group, by destination alone — given to OpenSM (`-Q -P
/// -Y`) and to `ibkit sm` (`--partitions --qos-policy`) on fresh ibsims
/// of one fabric: the same PathRecord requests, by GID from one host,
/// get the same SL, MTU and rate from both SAs, the same P_Key where the
/// request or the level names one (the same partition: OpenSM drops the
/// full-member bit of a level's P_Key), and the same packet lifetime where
/// the level sets one — or no record from both. (Where neither names a
/// P_Key, OpenSM gives the shared one lowest in its map, whose order is
/// the P_Key's bytes read as a host-order number — 0x0042 before 0x7FFF
/// on x86 — and ibkit the first its table holds, the default partition
/// at index 0; where no level sets a lifetime, OpenSM gives its subnet
/// timeout and ibkit the path's.)
#[test]
fn opensm_and_ibkit_apply_the_full_qos_policy_alike_on_ibsim() {
    if !peers_here() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-qos-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kind = |k| {
        (topo.nodes.iter())
            .filter(move |n| n.kind == k)
            .collect::<Vec<_>>()
    };
    let switch = kind(mad_core::attr::NodeType::Switch)[0].guid;
    let (cas, host, parts, policy) = qos_files(&dir, &topo, "", |cas| {
        let me = *cas.last().unwrap();
        format!(
            "port-groups\n port-group\n  name: Me\n  port-guid: {me:#x}\n end-port-group\n \
             port-group\n  name: Storage\n  use: the storage partition's ports\n  partition: storage\n end-port-group\n \
             port-group\n  name: Switches\n  node-type: SWITCH\n end-port-group\nend-port-groups\n\
             qos-setup\nend-qos-setup\n\
             qos-levels\n qos-level\n  name: DEFAULT\n  sl: 1\n end-qos-level\n \
             qos-level\n  name: Gold\n  sl: 5\n  mtu-limit: 3\n  rate-limit: 5\n  packet-life: 9\n end-qos-level\n \
             qos-level\n  name: Silver\n  sl: 6\n  pkey: 0x8042\n end-qos-level\n \
             qos-level\n  name: ToSwitch\n  sl: 7\n  mtu-limit: 2\n end-qos-level\nend-qos-levels\n\
             qos-match-rules\n qos-match-rule\n  service-id: 0x6234\n  qos-level-name: Silver\n end-qos-match-rule\n \
             qos-match-rule\n  source: Me\n  destination: Storage\n  qos-level-name: Gold\n end-qos-match-rule\n \
             qos-match-rule\n  destination: Switches\n  qos-level-name: ToSwitch\n end-qos-match-rule\n\
             end-qos-match-rules\n"
        )
    });
    let me = *cas.last().unwrap();
    let with = |to: u64, more: &[&str]| {
        let mut v = vec![format!("sgid={}", gid(me)), format!("dgid={}", gid(to))];
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    let sid = ["service_id_msb=0", "service_id_lsb=0x6234"];
    // (what, request, whether the packet lifetime is the level's,
    // whether the request or the level names the P_Key).
    let queries: Vec<(&str, Vec<String>, bool, bool)> = vec![
        ("to Storage: Gold", with(cas[1], &[]), true, false),
        ("Gold, SL 5 asked", with(cas[1], &["sl=5"]), true, false),
        (
            "Gold, storage asked",
            with(cas[1], &["pkey=0x8042"]),
            true,
            true,
        ),
        ("Gold, SL 2 asked", with(cas[1], &["sl=2"]), false, false),
        ("elsewhere: DEFAULT", with(cas[3], &[]), false, false),
        ("ServiceID: Silver", with(cas[3], &sid), false, true),
        (
            "Silver, 0xffff asked",
            with(cas[3], &[&sid[..], &["pkey=0xffff"]].concat()),
            false,
            true,
        ),
        ("Silver in storage", with(cas[1], &sid), false, true),
        ("to a switch: ToSwitch", with(switch, &[]), false, false),
    ];
    let wait = Duration::from_secs(30);
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let (p, y) = (parts.to_str().unwrap(), policy.to_str().unwrap());
    let ask = |sim: &dyn Simulator| -> Vec<_> {
        (queries.iter())
            .map(|q| path_fields(sim, &host, &q.1))
            .collect()
    };
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let osm = start_opensm_with(&sim, &dir, wait, &["-Q", "-P", p, "-Y", y]).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let theirs = ask(&sim);
    drop(osm);
    drop(sim);
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let sm: RunningSm =
        start_ibkit_sm(exe, &sim, &["--partitions", p, "--qos-policy", y], wait).unwrap();
    let ours = ask(&sim);
    drop(sm);
    drop(sim);
    let mut rows = Vec::new();
    for ((q, t), o) in queries.iter().zip(&theirs).zip(&ours) {
        rows.push(format!(
            "{:<22} OpenSM {:<32} ibkit {:?}",
            q.0,
            format!("{t:?}"),
            o
        ));
        assert_eq!(t.is_ok(), o.is_ok(), "{}: OpenSM {t:?}, ibkit {o:?}", q.0);
        if let (Ok(t), Ok(o)) = (t, o) {
            // To a switch too: both SAs count its port 0's rate and
            // MTUCap (4x SDR and 1024 on ibsim).
            assert_eq!((t.0, t.1, t.2), (o.0, o.1, o.2), "{}: SL, MTU, rate", q.0);
            if q.3 {
                // The same partition. OpenSM writes a level's P_Key as
                // its file gives it, less the membership bit (0x0042,
                // the limited form, between two full members); ibkit
                // the entry of the source's table (0x8042).
                assert_eq!(t.3 & 0x7FFF, o.3 & 0x7FFF, "{}: P_Key", q.0);
            }
            if q.2 {
                assert_eq!(t.4, o.4, "{}: packet lifetime", q.0);
            }
        }
    }
    println!(
        "(SL, MTU, rate, P_Key, packet lifetime)\n{}",
        rows.join("\n")
    );
    // What the file says, so that agreement is not agreement on nothing.
    let sl: Vec<Option<u64>> = ours.iter().map(|r| r.as_ref().ok().map(|f| f.0)).collect();
    assert_eq!(
        sl,
        [
            Some(5),
            Some(5),
            Some(5),
            None,
            Some(1),
            None,
            None,
            Some(6),
            Some(7)
        ]
    );
    let gold = ours[0].as_ref().unwrap();
    assert_eq!((gold.1, gold.2, gold.4), (3, 5, 9));
    assert_eq!(ours[7].as_ref().unwrap().3, 0x8042);
    assert_eq!(ours[8].as_ref().unwrap().1, 2);
    let _ = std::fs::remove_dir_all(&dir);
}
