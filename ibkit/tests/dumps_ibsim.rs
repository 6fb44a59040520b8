//! OpenSM's dumps and LID cache, written by ibkit's SM and compared with
//! OpenSM's own of the same fabric on Debian's ibsim: OpenSM brings the
//! fabric up with its routing dumps on (`-D 0x43`), then ibkit's SM, on a
//! fresh simulator of the same fabric and given OpenSM's `guid2lid`,
//! gives every port the LID OpenSM gave it and writes `guid2lid`,
//! `opensm-subnet.lst`, `opensm-lfts.dump`, `opensm.fdbs` and
//! `opensm-lid-matrix.dump`. The LID cache, the subnet list and the LID
//! matrix must equal OpenSM's; the LFT dump has
//! OpenSM's layout line for line, and its ports are what `ibroute`
//! (infiniband-diags) reads from each switch; `opensm.fdbs` has OpenSM's
//! layout, LIDs, hops and Optimal column line for line. A second run from ibkit's own cache keeps the LIDs
//! again (a restart of the SM).

use fabric::topology::Topology;
use std::collections::BTreeMap;
use std::path::Path;
use tests::peers::Ibsim;

mod common;
use common::{check_ibroute, peers_with_smpquery};

fn guid2lid(path: &Path) -> BTreeMap<u64, u16> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (lids, warnings) = smd::dump::parse_guid2lid(&text);
    assert!(warnings.is_empty(), "{}: {warnings:?}", path.display());
    lids.into_iter().map(|(g, l)| (g, l.0)).collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A line of the LFT dump: LID, port, and the owner as written.
type Route = (u16, u8, String);

/// The LFT dump's switches: header → its lines.
fn lft_dump(text: &str) -> Vec<(String, Vec<Route>)> {
    let mut v: Vec<(String, Vec<Route>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("Unicast lids") {
            v.push((line.to_string(), Vec::new()));
        } else if let Some(rest) = line.strip_prefix("0x") {
            let lid = u16::from_str_radix(&rest[..4], 16).unwrap();
            let port: u8 = rest[5..8].parse().unwrap();
            let owner = rest[8..].to_string();
            v.last_mut().unwrap().1.push((lid, port, owner));
        } else {
            assert!(line.ends_with(" lids dumped"), "{line:?}");
        }
    }
    v
}

/// A line of `opensm.fdbs` after its LID.
#[derive(Debug, PartialEq)]
enum Fdb {
    /// `UNREACHABLE`.
    Unreachable,
    /// Port, hops and what the Optimal column says.
    Route(u8, u16, String),
}

/// `opensm.fdbs`, read strictly in OpenSM's layout (`dump_ucast_routes`
/// in `osm_dump.c`): header → (LID, what follows it).
fn fdbs(text: &str) -> Vec<(String, Vec<(u16, Fdb)>)> {
    let mut v: Vec<(String, Vec<(u16, Fdb)>)> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("dump_ucast_routes: Switch 0x") {
            assert_eq!(
                line.len(),
                "dump_ucast_routes: Switch 0x".len() + 16,
                "{line:?}"
            );
            assert_eq!(lines.next(), Some("LID    : Port : Hops : Optimal"));
            v.push((line.to_string(), Vec::new()));
            continue;
        }
        // `0x%04X : ` then `UNREACHABLE`, or `%03u  : %02u   : ` and the
        // Optimal column: the fields are read, then the line written again
        // from them must be the line read.
        fn bad<T>(line: &str) -> T {
            panic!("not OpenSM's layout: {line:?}")
        }
        let f: Vec<&str> = line.splitn(4, ':').map(str::trim).collect();
        let lid = f[0]
            .strip_prefix("0x")
            .and_then(|l| u16::from_str_radix(l, 16).ok());
        let lid = lid.unwrap_or_else(|| bad(line));
        let fdb = match f[..] {
            [_, "UNREACHABLE"] => Fdb::Unreachable,
            [_, port, hops, optimal] => Fdb::Route(
                port.parse().unwrap_or_else(|_| bad(line)),
                hops.parse().unwrap_or_else(|_| bad(line)),
                optimal.to_string(),
            ),
            _ => bad(line),
        };
        let again = match &fdb {
            Fdb::Unreachable => format!("0x{lid:04X} : UNREACHABLE"),
            Fdb::Route(p, h, o) => format!("0x{lid:04X} : {p:03}  : {h:02}   : {o}"),
        };
        assert_eq!(again, line, "not OpenSM's layout");
        v.last_mut()
            .unwrap_or_else(|| panic!("{line:?} before a header"))
            .1
            .push((lid, fdb));
    }
    v
}

fn ibkit_sm(sim: &Ibsim, args: &[&str]) -> serde_json::Value {
    let out = sim
        .client(env!("CARGO_BIN_EXE_ibkit"))
        .args(["sm", "--transport", "umad", "--once", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ibkit sm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn ibkit_writes_opensms_dumps_and_keeps_opensms_lids() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-dumps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (osm_cache, osm_dump) = (dir.join("osm-cache"), dir.join("osm-dump"));
    let (cache, dump) = (dir.join("ibkit-cache"), dir.join("ibkit-dump"));
    for d in [&osm_cache, &osm_dump, &cache, &dump] {
        std::fs::create_dir_all(d).unwrap();
    }

    // OpenSM, once, with its routing dumps.
    {
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let out = sim
            .client("opensm")
            .env("OSM_CACHE_DIR", &osm_cache)
            .env("OSM_TMP_DIR", &osm_dump)
            .args(["-o", "-D", "0x43", "-f"])
            .arg(dir.join("opensm.log"))
            .output()
            .unwrap();
        assert!(out.status.success(), "opensm: {out:?}");
    }
    let osm_lids = guid2lid(&osm_cache.join("guid2lid"));
    assert_eq!(osm_lids.len(), topo.nodes.len(), "one LID a node");

    // ibkit on a fresh simulator, given OpenSM's cache.
    std::fs::copy(osm_cache.join("guid2lid"), cache.join("guid2lid")).unwrap();
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let cache_s = cache.to_str().unwrap();
    let dump_s = dump.to_str().unwrap();
    let v = ibkit_sm(&sim, &["--cache-dir", cache_s, "--dump-dir", dump_s]);
    assert_eq!(v["up"], true);

    // guid2lid: the same LID for every port GUID.
    let lids = guid2lid(&cache.join("guid2lid"));
    assert_eq!(lids, osm_lids, "ibkit kept OpenSM's LIDs and wrote them");

    // opensm-subnet.lst: every link, both ends, as OpenSM wrote it.
    let ours = read(&dump.join("opensm-subnet.lst"));
    let theirs = read(&osm_dump.join("opensm-subnet.lst"));
    let n = theirs.lines().count();
    let cabled_ports: usize = topo.peer.iter().map(|p| p.iter().flatten().count()).sum();
    assert_eq!(n, cabled_ports, "OpenSM lists each link both ways");
    for (k, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(a, b, "opensm-subnet.lst line {}", k + 1);
    }
    assert_eq!(ours, theirs);

    // opensm-lfts.dump: OpenSM's layout, its headers, its LIDs and owners
    // line for line; the ports as the switches hold them (ibroute).
    let ours = lft_dump(&read(&dump.join("opensm-lfts.dump")));
    let theirs = lft_dump(&read(&osm_dump.join("opensm-lfts.dump")));
    assert_eq!(ours.len(), topo.switches());
    assert_eq!(ours.len(), theirs.len());
    let (mut lines, mut same_port) = (0, 0);
    for ((ha, a), (hb, b)) in ours.iter().zip(&theirs) {
        assert_eq!(ha, hb);
        assert_eq!(a.len(), b.len(), "{ha}");
        for (x, y) in a.iter().zip(b) {
            assert_eq!((x.0, &x.2), (y.0, &y.2), "{ha}");
            lines += 1;
            same_port += usize::from(x.1 == y.1);
        }
        let lid = ha.split("Lid ").nth(1).unwrap().split(' ').next().unwrap();
        let out = sim.client("ibroute").arg(lid).output().unwrap();
        assert!(out.status.success(), "ibroute {lid}");
        let mut lft = vec![255u64; usize::from(*lids.values().max().unwrap()) + 1];
        for &(l, p, _) in a {
            lft[usize::from(l)] = u64::from(p);
        }
        check_ibroute(&String::from_utf8_lossy(&out.stdout), &lft, ha);
    }
    // opensm.fdbs: OpenSM's layout; the same switches in the same order,
    // the same LIDs, UNREACHABLE where OpenSM says so, and the same hops
    // and `yes` on every route (both SMs route min-hop on the same LIDs),
    // each out of the port of ibkit's LFT dump (which ibroute confirmed).
    let ours_f = fdbs(&read(&dump.join("opensm.fdbs")));
    let theirs_f = fdbs(&read(&osm_dump.join("opensm.fdbs")));
    assert_eq!(ours_f.len(), topo.switches());
    let (mut routes, mut unreachable) = (0, 0);
    for (((ha, a), (hb, b)), (_, lft)) in ours_f.iter().zip(&theirs_f).zip(&ours) {
        assert_eq!(ha, hb);
        assert_eq!(a.len(), b.len(), "{ha}");
        for (x, y) in a.iter().zip(b) {
            assert_eq!(x.0, y.0, "{ha}");
            match (&x.1, &y.1) {
                (Fdb::Unreachable, Fdb::Unreachable) => unreachable += 1,
                (Fdb::Route(p, h, o), Fdb::Route(_, h2, o2)) => {
                    assert_eq!((h, o.as_str()), (h2, "yes"), "{ha} LID {:#x}", x.0);
                    assert_eq!(o2, "yes", "{ha} LID {:#x}", x.0);
                    let held = lft.iter().find(|r| r.0 == x.0).map(|r| r.1);
                    assert_eq!(held, Some(*p), "{ha} LID {:#x}", x.0);
                    routes += 1;
                }
                _ => panic!("{ha} LID {:#x}: ours {:?}, OpenSM's {:?}", x.0, x.1, y.1),
            }
        }
    }
    assert!(routes > 0);
    // Min-hop routes in OpenSM's order, with OpenSM's port profile: every
    // route out of the port OpenSM chose.
    assert_eq!(same_port, lines, "routes unlike OpenSM's min-hop");

    // opensm-lid-matrix.dump: equal to OpenSM's, byte for byte (every
    // switch's hops to every LID out of every port).
    let ours_m = read(&dump.join("opensm-lid-matrix.dump"));
    let theirs_m = read(&osm_dump.join("opensm-lid-matrix.dump"));
    for (k, (a, b)) in ours_m.lines().zip(theirs_m.lines()).enumerate() {
        assert_eq!(a, b, "opensm-lid-matrix.dump line {}", k + 1);
    }
    assert_eq!(ours_m, theirs_m);
    let matrix = ours_m.lines().count();
    println!(
        "{spec}: {} ports' LIDs taken from OpenSM's guid2lid; opensm-subnet.lst equal ({n} lines); \
         opensm-lfts.dump: {lines} lines in OpenSM's layout, all {same_port} with the port OpenSM chose, \
         every port as ibroute reads it; opensm.fdbs: {routes} routes with OpenSM's hops, all \
         shortest, and {unreachable} UNREACHABLE lines, as OpenSM's; opensm-lid-matrix.dump \
         equal ({matrix} lines)",
        lids.len()
    );

    // A restart from ibkit's own cache on a fresh fabric: the same LIDs.
    drop(sim);
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let v = ibkit_sm(&sim, &["--cache-dir", cache_s]);
    for n in v["table"].as_array().unwrap() {
        let guid =
            u64::from_str_radix(n["guid"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
        // A switch's port 0 has its node GUID; a CA's port 1, one more.
        let port_guid = guid + u64::from(n["switch"] == false);
        assert_eq!(
            Some(&(n["lid"].as_u64().unwrap() as u16)),
            lids.get(&port_guid)
        );
    }
}

/// Up*/down*'s roots: OpenSM (`-R updn`, `-D 0x43`) and `ibkit sm --routing
/// updn --dump-dir` each write `opensm-updn-roots.dump` on ibsim, and the
/// two files are equal: the same switches chosen as roots (OpenSM's
/// choice by min-hop ranks, without a root file), in OpenSM's layout. Where
/// OpenSM finds no root (every switch has CAs) it says so and routes
/// min-hop; ibkit then roots up*/down* at one switch, the most central.
#[test]
fn both_sms_pick_the_same_updn_roots() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    for spec in ["mport-ntree:4:2", "random:6:7", "fat-tree-324"] {
        let topo = Topology::from_spec(spec).unwrap();
        let (dir, osm_dump, dump) = opensm_once(
            &topo,
            "ibkit-updn-roots",
            spec,
            &["-R", "updn", "-D", "0x43"],
        );
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let d = dump.to_str().unwrap();
        let v = ibkit_sm(&sim, &["--routing", "updn", "--dump-dir", d]);
        assert_eq!(v["up"], true);
        let theirs = read(&osm_dump.join("opensm-updn-roots.dump"));
        let ours = read(&dump.join("opensm-updn-roots.dump"));
        if theirs.is_empty() {
            // Where every switch has CAs, OpenSM's ranking finds no root
            // and it routes min-hop instead; ibkit routes up*/down* from
            // the most central switch.
            let log = read(&dir.join("opensm.log"));
            assert!(log.contains("no root nodes were found"), "{spec}: {log}");
            assert_eq!(ours.lines().count(), 1, "{spec}: {ours}");
            println!(
                "{spec}: OpenSM finds no up*/down* root (and routes min-hop); ibkit takes one, {}",
                ours.trim()
            );
        } else {
            assert_eq!(ours, theirs, "{spec}: roots");
            println!(
                "{spec}: opensm-updn-roots.dump equal to OpenSM's ({} roots)",
                ours.lines().count()
            );
        }
        drop(sim);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A site's roots: the same `root_guid_file` (one leaf switch's GUID,
/// one GUID no switch has, a comment) given to OpenSM (`-R updn -a`) and
/// to `ibkit sm --routing updn --root-guid-file`: both take that switch,
/// and only it, as the root, and write the same `opensm-updn-roots.dump`
/// (which, without the file, names the spines).
#[test]
fn both_sms_take_the_roots_a_file_names() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let leaf = (0..topo.nodes.len())
        .find(|&i| {
            topo.nodes[i].kind == mad_core::attr::NodeType::Switch
                && (1..=topo.nodes[i].ports).any(|p| {
                    topo.peer_of(i, p).is_some_and(|(m, _)| {
                        topo.nodes[m].kind == mad_core::attr::NodeType::ChannelAdapter
                    })
                })
        })
        .unwrap();
    let guid = topo.nodes[leaf].guid;
    let dir = std::env::temp_dir().join(format!("ibkit-root-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let roots = dir.join("roots");
    std::fs::write(
        &roots,
        format!(
            "# a site's root\n{guid:#018x} {}\n0xdeadbeef gone\n",
            topo.nodes[leaf].name
        ),
    )
    .unwrap();
    let r = roots.to_str().unwrap();
    let (odir, osm_dump, dump) = opensm_once(
        &topo,
        "ibkit-root-file",
        spec,
        &["-R", "updn", "-D", "0x43", "-a", r],
    );
    let sim = Ibsim::start_with(&topo, &odir, false).unwrap();
    let d = dump.to_str().unwrap();
    let args = ["--routing", "updn", "--root-guid-file", r, "--dump-dir", d];
    let v = ibkit_sm(&sim, &args);
    assert_eq!(v["up"], true);
    let theirs = read(&osm_dump.join("opensm-updn-roots.dump"));
    let ours = read(&dump.join("opensm-updn-roots.dump"));
    assert_eq!(theirs, format!("{guid:#x}\n"), "OpenSM's roots");
    assert_eq!(ours, theirs, "roots");
    println!(
        "{spec}: root_guid_file naming leaf {}: both SMs root up*/down* at {}",
        topo.nodes[leaf].name,
        ours.trim()
    );
    drop(sim);
    let _ = std::fs::remove_dir_all(&odir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGHUP reads the root file again, as OpenSM reads it at each routing:
/// `ibkit sm --routing updn --root-guid-file F` on the served fabric,
/// rooted at one leaf (its `opensm-updn-roots.dump` says so); F rewritten
/// to name another leaf and `ctl reload-sm` sent, the SM routes again
/// from it and the dump names it. A broken file keeps the roots.
#[test]
fn sighup_reads_the_root_file_again() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    use std::time::{Duration, Instant};
    use tests::peers::Simulator as _;
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let leaves: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| {
            topo.nodes[i].kind == mad_core::attr::NodeType::Switch
                && (1..=topo.nodes[i].ports).any(|p| {
                    topo.peer_of(i, p).is_some_and(|(m, _)| {
                        topo.nodes[m].kind == mad_core::attr::NodeType::ChannelAdapter
                    })
                })
        })
        .collect();
    let (a, b) = (topo.nodes[leaves[0]].guid, topo.nodes[leaves[1]].guid);
    let dir = std::env::temp_dir().join(format!("ibkit-root-hup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let roots = dir.join("roots");
    std::fs::write(&roots, format!("{a:#018x}\n")).unwrap();
    let dump = dir.join("dump");
    std::fs::create_dir_all(&dump).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let sim = tests::peers::Served::start(exe, spec, 0, &[]).unwrap();
    let args = [
        "--routing",
        "updn",
        "--root-guid-file",
        roots.to_str().unwrap(),
        "--dump-dir",
        dump.to_str().unwrap(),
    ];
    let sm = tests::peers::start_ibkit_sm(exe, &sim, &args, Duration::from_secs(30)).unwrap();
    let dumped =
        || std::fs::read_to_string(dump.join("opensm-updn-roots.dump")).unwrap_or_default();
    let until = |want: &str| {
        let t0 = Instant::now();
        while dumped() != want {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "roots dump {:?}, not {want:?}",
                dumped()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        t0.elapsed()
    };
    until(&format!("{a:#x}\n"));
    std::fs::write(&roots, format!("# moved\n{b:#018x}\n")).unwrap();
    let said = sim.control("reload-sm").unwrap().unwrap();
    assert!(said.starts_with("ok: SIGHUP"), "{said}");
    let took = until(&format!("{b:#x}\n"));
    // A broken file: refused, the roots kept.
    std::fs::write(&roots, "0xnothing\n").unwrap();
    sim.control("reload-sm").unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(dumped(), format!("{b:#x}\n"));
    let (clean, _) = sm.stop(Duration::from_secs(10));
    assert!(clean);
    println!("{spec}: SIGHUP with the root file naming another leaf: rooted at {b:#x} {took:.1?} later; a broken file kept it");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `opensm-ftree-ca-order.dump`, OpenSM's (`-R ftree`) and ibkit's
/// (`--routing ftree`), on ibsim's fat-tree-324 and mport-ntree:4:2: the
/// same layout, the same CAs (by node description; the two SMs give
/// other LIDs), grouped leaf by leaf the same way (each block of lines
/// one leaf's CAs, the same sets), the same dummy padding. The order of
/// the leaves, and of the CAs within one, is each engine's own numbering.
#[test]
fn both_sms_write_the_same_ftree_ca_order_up_to_numbering() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    for spec in ["mport-ntree:4:2", "fat-tree-324"] {
        let topo = Topology::from_spec(spec).unwrap();
        let (dir, osm_dump, dump) = opensm_once(&topo, "ibkit-ca-order", spec, &["-R", "ftree"]);
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let d = dump.to_str().unwrap();
        let v = ibkit_sm(&sim, &["--routing", "ftree", "--dump-dir", d]);
        assert_eq!(v["up"], true);
        let name = "opensm-ftree-ca-order.dump";
        let (theirs, ours) = (read(&osm_dump.join(name)), read(&dump.join(name)));
        assert!(!theirs.is_empty(), "{spec}: OpenSM wrote no {name}");
        // Blocks of one leaf's CAs: the leaf each CA hangs off.
        let leaf_of = |desc: &str| {
            let n = topo.nodes.iter().position(|n| n.name == desc).unwrap();
            topo.peer_of(n, 1).unwrap().0
        };
        let blocks = |text: &str| -> (std::collections::BTreeSet<Vec<String>>, usize, usize) {
            let mut sets = std::collections::BTreeSet::new();
            let (mut cur, mut leaf, mut dummies, mut lines) = (Vec::new(), None, 0, 0);
            for l in text.lines() {
                lines += 1;
                let (lid, desc) = l.split_once('\t').unwrap_or_else(|| panic!("{spec}: {l}"));
                assert!(lid.starts_with("0x") && lid.len() == 6, "{spec}: {l}");
                if desc == "DUMMY" {
                    assert_eq!(lid, "0xFFFF", "{spec}: {l}");
                    dummies += 1;
                    continue;
                }
                let here = leaf_of(desc);
                if leaf != Some(here) && !cur.is_empty() {
                    cur.sort();
                    sets.insert(std::mem::take(&mut cur));
                }
                leaf = Some(here);
                cur.push(desc.to_string());
            }
            cur.sort();
            sets.insert(cur);
            (sets, dummies, lines)
        };
        let (a, b) = (blocks(&theirs), blocks(&ours));
        assert_eq!(b, a, "{spec}: CAs by leaf, dummies, lines");
        println!(
            "{spec}: opensm-ftree-ca-order.dump: {} lines, {} leaves, {} dummies, the same CAs by leaf as OpenSM's",
            b.2,
            b.0.len(),
            b.1
        );
        drop(sim);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// OpenSM (`opensm -o` with `args`) brings a fresh ibsim of `topo` up
/// once, its dumps in `osm-dump` under a new directory `NAME-SPEC-PID`:
/// that directory, OpenSM's dump directory and an empty one for ibkit's.
fn opensm_once(
    topo: &Topology,
    name: &str,
    spec: &str,
    args: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "{name}-{}-{}",
        spec.replace(':', "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let (osm_dump, dump) = (dir.join("osm-dump"), dir.join("ibkit-dump"));
    for d in [&osm_dump, &dump] {
        std::fs::create_dir_all(d).unwrap();
    }
    let sim = Ibsim::start_with(topo, &dir, false).unwrap();
    run_opensm(&sim, &dir, &osm_dump, args);
    (dir, osm_dump, dump)
}

/// `opensm -o ARGS` on `sim`, its LID cache in `cache`, its dumps in
/// `tmp`, its log `cache/opensm.log`: the subnet brought up once.
fn run_opensm(sim: &Ibsim, cache: &Path, tmp: &Path, args: &[&str]) {
    let out = (sim.client("opensm"))
        .env("OSM_CACHE_DIR", cache)
        .env("OSM_TMP_DIR", tmp)
        .arg("-o")
        .args(args)
        .arg("-f")
        .arg(cache.join("opensm.log"))
        .output()
        .unwrap();
    assert!(out.status.success(), "opensm: {out:?}");
}

/// A node name map given to both SMs (OpenSM's `node_name_map_name` in
/// its `opensm.conf`, ibkit's `--node-name-map`): every switch and half
/// the CAs named, the other CAs not. OpenSM's `opensm-subnet.lst` and
/// the headers and owners of its `opensm-lfts.dump` print the map's names
/// and the others' descriptions; ibkit's, given OpenSM's LIDs, are the
/// same byte for byte (the subnet list) and line for line (the LFT
/// headers and owners).
#[test]
fn both_sms_name_nodes_by_the_same_node_name_map() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = common::scratch("names");
    let (osm_cache, osm_dump) = (dir.join("osm-cache"), dir.join("osm-dump"));
    let (cache, dump) = (dir.join("ibkit-cache"), dir.join("ibkit-dump"));
    for d in [&osm_cache, &osm_dump, &cache, &dump] {
        std::fs::create_dir_all(d).unwrap();
    }
    let map = dir.join("node-name-map");
    let mut text = String::from("# a site's names\n");
    let mut named = Vec::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        if n.kind == mad_core::attr::NodeType::Switch || i % 2 == 0 {
            let name = format!("site-{i}");
            text += &format!("{:#018x} \"{name}\"\n", n.guid);
            named.push(name);
        }
    }
    std::fs::write(&map, text).unwrap();
    let conf = dir.join("opensm.conf");
    std::fs::write(
        &conf,
        format!(
            "node_name_map_name {}\nlog_flags 0x43\ndump_files_dir {}\n",
            map.display(),
            osm_dump.display()
        ),
    )
    .unwrap();
    {
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let out = sim
            .client("opensm")
            .env("OSM_CACHE_DIR", &osm_cache)
            .args(["-o", "-F"])
            .arg(&conf)
            .arg("-f")
            .arg(dir.join("opensm.log"))
            .output()
            .unwrap();
        assert!(out.status.success(), "opensm: {out:?}");
    }
    std::fs::copy(osm_cache.join("guid2lid"), cache.join("guid2lid")).unwrap();
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let v = ibkit_sm(
        &sim,
        &[
            "--cache-dir",
            cache.to_str().unwrap(),
            "--dump-dir",
            dump.to_str().unwrap(),
            "--node-name-map",
            map.to_str().unwrap(),
        ],
    );
    assert_eq!(v["up"], true);
    let theirs = read(&osm_dump.join("opensm-subnet.lst"));
    for name in &named {
        assert!(theirs.contains(&format!("{{{name}}}")), "OpenSM: {name}");
    }
    let ours = read(&dump.join("opensm-subnet.lst"));
    for (k, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(a, b, "opensm-subnet.lst line {}", k + 1);
    }
    assert_eq!(ours, theirs);
    let ours = lft_dump(&read(&dump.join("opensm-lfts.dump")));
    let theirs = lft_dump(&read(&osm_dump.join("opensm-lfts.dump")));
    assert_eq!(ours.len(), theirs.len());
    for ((ha, a), (hb, b)) in ours.iter().zip(&theirs) {
        assert_eq!(ha, hb);
        assert!(ha.contains("'site-"), "{ha}");
        let owners = |r: &[Route]| r.iter().map(|x| (x.0, x.2.clone())).collect::<Vec<_>>();
        assert_eq!(owners(a), owners(b), "{ha}");
    }
    println!(
        "{} of {} nodes named: opensm-subnet.lst equal, {} LFT headers and their owners equal",
        named.len(),
        topo.nodes.len(),
        ours.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The files `program` (run by `cmd`, a client of the simulator) synced
/// to the disk, as `strace` saw its fsync and fdatasync calls: each
/// regular file's name without the temporary name's dot and `.tmp`.
fn synced(mut cmd: std::process::Command, trace: &Path) -> std::collections::BTreeSet<String> {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = read(trace);
    let mut files = std::collections::BTreeSet::new();
    for line in text.lines() {
        // `PID fsync(5</dir/.guid2lid.tmp>) = 0`
        let Some(path) = line.split('<').nth(1).and_then(|p| p.split('>').next()) else {
            continue;
        };
        let name = Path::new(path).file_name().unwrap().to_string_lossy();
        let name = name.trim_start_matches('.').trim_end_matches(".tmp");
        if Path::new(path).is_dir() {
            continue;
        }
        files.insert(name.to_string());
    }
    files
}

/// OpenSM's `fsync_high_avail_files`, seen with `strace`: by default
/// (`TRUE`) OpenSM and ibkit each sync `guid2lid`, `guid2mkey`,
/// `neighbors` and (with `sa_db_dump`) `opensm-sa.dump` to the disk
/// before renaming them into place (ibkit also the directory after the
/// rename); with `fsync_high_avail_files FALSE` in the `opensm.conf`
/// given to both, neither syncs any.
#[test]
fn both_sms_sync_the_caches_unless_told_not_to() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    if !Path::new("/usr/bin/strace").exists() {
        common::skip("dumps_ibsim", "strace is not installed");
        return;
    }
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let dir = common::scratch("fsync");
    let mut seen = Vec::new();
    for value in ["TRUE", "FALSE"] {
        for who in ["OpenSM", "ibkit"] {
            let cache = dir.join(format!("{who}-{value}"));
            std::fs::create_dir_all(&cache).unwrap();
            // The SA's database too, in the same directory.
            let conf = dir.join(format!("opensm-{who}-{value}.conf"));
            let text = format!(
                "fsync_high_avail_files {value}\nsa_db_dump TRUE\ndump_files_dir {}\n",
                cache.display()
            );
            std::fs::write(&conf, text).unwrap();
            let trace = dir.join(format!("{who}-{value}.strace"));
            let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
            let mut cmd = sim.client("strace");
            cmd.args(["-f", "-y", "-qq", "-e", "trace=fsync,fdatasync", "-o"])
                .arg(&trace);
            if who == "OpenSM" {
                cmd.env("OSM_CACHE_DIR", &cache)
                    .args(["opensm", "-o", "-F"])
                    .arg(&conf)
                    .arg("-f")
                    .arg(dir.join("opensm.log"));
            } else {
                cmd.arg(env!("CARGO_BIN_EXE_ibkit"))
                    .args(["sm", "--transport", "umad", "--once", "--opensm-config"])
                    .arg(&conf)
                    .arg("--cache-dir")
                    .arg(&cache);
            }
            let files = synced(cmd, &trace);
            println!("fsync_high_avail_files {value}: {who} synced {files:?}");
            seen.push(files);
        }
    }
    let caches: std::collections::BTreeSet<String> =
        ["guid2lid", "guid2mkey", "neighbors", "opensm-sa.dump"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    assert_eq!(seen[0], caches, "OpenSM, TRUE");
    assert_eq!(seen[1], seen[0], "ibkit as OpenSM, TRUE");
    assert!(seen[2].is_disjoint(&caches), "OpenSM, FALSE: {:?}", seen[2]);
    assert!(seen[3].is_disjoint(&caches), "ibkit, FALSE: {:?}", seen[3]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `opensm-lfts.dump` read independently of ibkit's parser: switch node
/// GUID → (owner port GUID → port), from OpenSM's layout.
fn routes_by_guid(text: &str) -> BTreeMap<u64, BTreeMap<u64, u8>> {
    let hex = |s: &str| {
        let end = s.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(s.len());
        u64::from_str_radix(&s[..end], 16).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    };
    let mut v: BTreeMap<u64, BTreeMap<u64, u8>> = BTreeMap::new();
    let mut sw = None;
    for line in text.lines() {
        if line.starts_with("Unicast lids") {
            let g = hex(line.split(" guid 0x").nth(1).unwrap());
            sw = Some(g);
            v.entry(g).or_default();
        } else if line.starts_with("0x") {
            let port: u8 = line[7..10].parse().unwrap();
            let owner = line.split(" portguid 0x").nth(1);
            let owner = hex(owner.unwrap_or_else(|| panic!("no owner: {line:?}")));
            let old = v.get_mut(&sw.unwrap()).unwrap().insert(owner, port);
            assert!(old.is_none(), "{line:?}: one LID a port (LMC 0)");
        }
    }
    v
}

/// What `ibroute` reads from the switch at `lid`: LID → port.
fn ibroute(sim: &Ibsim, lid: u16) -> BTreeMap<u16, u8> {
    let out = sim.client("ibroute").arg(lid.to_string()).output().unwrap();
    assert!(out.status.success(), "ibroute {lid}: {out:?}");
    (String::from_utf8_lossy(&out.stdout).lines())
        .filter(|l| l.starts_with("0x"))
        .map(|l| {
            let lid = u16::from_str_radix(&l[2..6], 16).unwrap();
            (lid, l[7..10].trim().parse().unwrap())
        })
        .collect()
}

/// What `ibroute` reads from the switch at each of `lids`, a few read at
/// once.
fn ibroutes(sim: &Ibsim, lids: &[u16]) -> Vec<BTreeMap<u16, u8>> {
    common::par_map(lids, |&l| ibroute(sim, l))
}

/// Every switch's table as `ibroute` reads it (the switch found at its
/// LID in `lids`) sends each port GUID's LID (`lids`) out of the port
/// `routes` names for it, and routes nothing else.
fn tables_hold(
    sim: &Ibsim,
    routes: &BTreeMap<u64, BTreeMap<u64, u8>>,
    lids: &BTreeMap<u64, u16>,
    what: &str,
) -> usize {
    let mut n = 0;
    let at: Vec<u16> = routes.keys().map(|sw| lids[sw]).collect();
    for ((sw, want), held) in routes.iter().zip(ibroutes(sim, &at)) {
        for (owner, &port) in want {
            let lid = lids[owner];
            assert_eq!(
                held.get(&lid),
                Some(&port),
                "{what}: switch {sw:#x}, LID {lid} ({owner:#x})"
            );
            n += 1;
        }
        assert_eq!(
            held.len(),
            want.len(),
            "{what}: switch {sw:#x} routes nothing else"
        );
    }
    n
}

/// OpenSM's `file` routing engine, both ways, on ibsim's mport-ntree:4:2:
/// - OpenSM routes up*/down* and dumps its LFTs; `ibkit sm --routing file
///   --lfts-file` that dump, with LIDs of its own (every port 7 above
///   OpenSM's, from a LID cache), puts every route of OpenSM's on its
///   owner's new LID: `ibroute` on every switch shows OpenSM's ports;
/// - ibkit routes min-hop at those LIDs and dumps; OpenSM `-R file -U`
///   that dump, at its own LIDs, logs "file tables configured" and
///   `ibroute` shows ibkit's ports;
/// - a route out of port 99: both SMs say so and route min-hop, or
///   up*/down* where it is the next engine (OpenSM's `-R file,updn`).
#[test]
fn both_sms_route_from_each_others_lft_dump() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let (dir, osm_dump, dump) = opensm_once(
        &topo,
        "ibkit-lfts-file",
        spec,
        &["-R", "updn", "-D", "0x43"],
    );
    let osm_lids = guid2lid(&dir.join("guid2lid"));
    let osm_file = osm_dump.join("opensm-lfts.dump");
    let theirs = routes_by_guid(&read(&osm_file));
    assert_eq!(theirs.len(), topo.switches());

    // ibkit, from OpenSM's file, at LIDs 7 above OpenSM's.
    let cache = dir.join("ibkit-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let shifted: String = (osm_lids.iter())
        .map(|(g, l)| format!("0x{g:016x} 0x{:04x} 0x{:04x}\n", l + 7, l + 7))
        .collect();
    std::fs::write(cache.join("guid2lid"), shifted).unwrap();
    let (c, d) = (cache.to_str().unwrap(), dump.to_str().unwrap());
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let f = osm_file.to_str().unwrap();
    let v = ibkit_sm(
        &sim,
        &[
            "--routing",
            "file",
            "--lfts-file",
            f,
            "--cache-dir",
            c,
            "--dump-dir",
            d,
        ],
    );
    assert_eq!(v["up"], true);
    let lids = guid2lid(&cache.join("guid2lid"));
    for (g, l) in &osm_lids {
        assert_eq!(lids[g], l + 7, "{g:#x}: ibkit's own LIDs");
    }
    let routes = tables_hold(&sim, &theirs, &lids, "ibkit from OpenSM's dump");
    drop(sim);

    // ibkit's own min-hop at the same LIDs: other routes than the file's.
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let mine_dir = dir.join("ibkit-minhop");
    std::fs::create_dir_all(&mine_dir).unwrap();
    let v = ibkit_sm(
        &sim,
        &["--cache-dir", c, "--dump-dir", mine_dir.to_str().unwrap()],
    );
    assert_eq!(v["up"], true);
    drop(sim);
    let mine_file = mine_dir.join("opensm-lfts.dump");
    let mine = routes_by_guid(&read(&mine_file));
    let differ: usize = (mine.iter())
        .map(|(sw, t)| {
            t.iter()
                .filter(|(g, p)| theirs[sw].get(g) != Some(p))
                .count()
        })
        .sum();
    assert!(
        differ > 0,
        "OpenSM's up*/down* and ibkit's min-hop route alike here"
    );

    // OpenSM from ibkit's min-hop file, at OpenSM's own LIDs.
    let back = dir.join("osm-back");
    std::fs::create_dir_all(&back).unwrap();
    // OpenSM `-R ENGINES -U FILE` on a fresh simulator, its cache in
    // `back`, logging to LOG under `dir`: the simulator and the log.
    let opensm_file = |engines: &str, file: &Path, log: &str| {
        let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
        let out = (sim.client("opensm"))
            .env("OSM_CACHE_DIR", &back)
            .env("OSM_TMP_DIR", &back)
            .args(["-o", "-R", engines, "-U"])
            .arg(file)
            .arg("-f")
            .arg(dir.join(log))
            .output()
            .unwrap();
        assert!(out.status.success(), "opensm: {out:?}");
        (sim, read(&dir.join(log)))
    };
    let (sim, log) = opensm_file("file", &mine_file, "opensm-back.log");
    assert!(
        log.contains("file tables configured on all switches"),
        "{log}"
    );
    let back_lids = guid2lid(&back.join("guid2lid"));
    assert_eq!(back_lids, osm_lids, "OpenSM's own LIDs");
    let routes_back = tables_hold(&sim, &mine, &back_lids, "OpenSM from ibkit's dump");
    drop(sim);

    // A route out of port 99: OpenSM refuses the file and routes min-hop;
    // so does ibkit, and says where.
    let text = read(&osm_file);
    let at = text.lines().position(|l| l.starts_with("0x")).unwrap();
    let bad: String = (text.lines().enumerate())
        .map(|(i, l)| match i == at {
            true => format!("{} 099{}\n", &l[..6], &l[10..]),
            false => format!("{l}\n"),
        })
        .collect();
    let bad_file = dir.join("bad-lfts.dump");
    std::fs::write(&bad_file, bad).unwrap();
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let out = (sim.client(env!("CARGO_BIN_EXE_ibkit")))
        .args([
            "sm",
            "--transport",
            "umad",
            "--once",
            "--routing",
            "file",
            "--cache-dir",
            c,
        ])
        .arg("--lfts-file")
        .arg(&bad_file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let want = format!("line {}: LID", at + 1);
    assert!(
        said.contains("routed minhop instead") && said.contains(&want),
        "{said}"
    );
    if let Some(l) = said.lines().find(|l| l.contains("routed minhop instead")) {
        println!("ibkit said: {}", &l[l.find("routing:").unwrap_or(0)..]);
    }
    tables_hold(&sim, &mine, &lids, "ibkit's fallback: its min-hop");
    drop(sim);
    let (sim, log) = opensm_file("file", &bad_file, "opensm-bad.log");
    assert!(log.contains("Invalid port 99"), "{log}");
    assert!(
        log.contains("minhop tables configured on all switches"),
        "{log}"
    );
    drop(sim);
    // The same with up*/down* next (OpenSM's `-R file,updn`, ibkit's
    // `--file-fallback updn`): both route up*/down*.
    let sim = Ibsim::start_with(&topo, &dir, false).unwrap();
    let out = (sim.client(env!("CARGO_BIN_EXE_ibkit")))
        .args(["sm", "--transport", "umad", "--once", "--routing", "file"])
        .args(["--file-fallback", "updn", "--cache-dir", c])
        .arg("--lfts-file")
        .arg(&bad_file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("routed updn instead"), "{said}");
    drop(sim);
    let (sim, log) = opensm_file("file,updn", &bad_file, "opensm-next.log");
    assert!(
        log.contains("updn tables configured on all switches"),
        "{log}"
    );
    drop(sim);
    println!(
        "{spec}: ibkit routed OpenSM's up*/down* dump at LIDs +7: {routes} routes as ibroute reads them \
         ({differ} unlike ibkit's min-hop); OpenSM routed ibkit's min-hop dump: {routes_back} routes; \
         a route out of port 99: both routed min-hop, and up*/down* when it comes next (file,updn)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGHUP reads the `lfts_file` again (OpenSM reads it at each routing):
/// on the served fabric, `ibkit sm --routing file` from its own min-hop
/// dump routes as that dump says; one route of the file moved to another
/// port and `ctl reload-sm` sent, the SM's dump shows it moved; a broken
/// file keeps the tables.
#[test]
fn sighup_reads_the_lfts_file_again() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    use std::time::{Duration, Instant};
    use tests::peers::Simulator as _;
    let spec = "mport-ntree:4:2";
    let dir = std::env::temp_dir().join(format!("ibkit-lfts-hup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (first, dump) = (dir.join("first"), dir.join("dump"));
    for d in [&first, &dump] {
        std::fs::create_dir_all(d).unwrap();
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let sim = tests::peers::Served::start(exe, spec, 0, &[]).unwrap();
    let dumped = |d: &Path| {
        let t = std::fs::read_to_string(d.join("opensm-lfts.dump")).unwrap_or_default();
        t.ends_with("lids dumped\n").then(|| routes_by_guid(&t))
    };
    let until = |d: &Path, want: Option<&BTreeMap<u64, BTreeMap<u64, u8>>>| {
        let t0 = Instant::now();
        loop {
            let got = dumped(d);
            if let Some(g) = got.as_ref().filter(|g| want.is_none_or(|w| w == *g)) {
                break (g.clone(), t0.elapsed());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{}: {got:?}",
                d.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // Min-hop's tables, dumped, become the file.
    let wait = Duration::from_secs(30);
    let args = ["--dump-dir", first.to_str().unwrap()];
    let sm = tests::peers::start_ibkit_sm(exe, &sim, &args, wait).unwrap();
    let (minhop, _) = until(&first, None);
    assert!(sm.stop(Duration::from_secs(10)).0);
    let file = dir.join("lfts");
    let text = read(&first.join("opensm-lfts.dump"));
    std::fs::write(&file, &text).unwrap();
    let args = [
        "--routing",
        "file",
        "--lfts-file",
        file.to_str().unwrap(),
        "--dump-dir",
        dump.to_str().unwrap(),
    ];
    let sm = tests::peers::start_ibkit_sm(exe, &sim, &args, wait).unwrap();
    until(&dump, Some(&minhop));
    // The first switch's first route to a CA, out of another port.
    let at = (text.lines())
        .position(|l| l.starts_with("0x") && l.contains("Channel Adapter"))
        .unwrap();
    let line = text.lines().nth(at).unwrap();
    let other = if &line[7..10] == "001" { "002" } else { "001" };
    let moved: String = (text.lines().enumerate())
        .map(|(i, l)| match i == at {
            true => format!("{}{other}{}\n", &l[..7], &l[10..]),
            false => format!("{l}\n"),
        })
        .collect();
    let want = routes_by_guid(&moved);
    assert_ne!(want, minhop);
    std::fs::write(&file, &moved).unwrap();
    let said = sim.control("reload-sm").unwrap().unwrap();
    assert!(said.starts_with("ok: SIGHUP"), "{said}");
    let (_, took) = until(&dump, Some(&want));
    // A broken file: refused, the tables kept.
    std::fs::write(&file, "Unicast lids guid 0x1\n0xzz 1\n").unwrap();
    sim.control("reload-sm").unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(dumped(&dump).as_ref(), Some(&want));
    let (clean, _) = sm.stop(Duration::from_secs(10));
    assert!(clean);
    println!("{spec}: SIGHUP with one route of the lfts_file moved: dumped {took:.1?} later; a broken file kept the tables");
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenSM (`opensm -o OSM_ARGS`) and then `ibkit sm --once IBKIT_ARGS`,
/// each on a fresh ibsim of `topo` with its own LID cache under `dir`,
/// and what `measure` reads from the fabric each left, given the LIDs
/// each gave (by port GUID): (OpenSM's, ibkit's).
fn both_sms_then<T>(
    topo: &Topology,
    dir: &Path,
    osm_args: &[&str],
    ibkit_args: &[&str],
    measure: impl Fn(&Ibsim, &BTreeMap<u64, u16>) -> T,
) -> (T, T) {
    let (osm, cache) = (dir.join("osm"), dir.join("ibkit-cache"));
    for d in [&osm, &cache] {
        std::fs::create_dir_all(d).unwrap();
    }
    let sim = Ibsim::start_with(topo, dir, false).unwrap();
    run_opensm(&sim, &osm, &osm, osm_args);
    let theirs = measure(&sim, &guid2lid(&osm.join("guid2lid")));
    drop(sim);
    let sim = Ibsim::start_with(topo, dir, false).unwrap();
    let mut args = ibkit_args.to_vec();
    args.extend(["--cache-dir", cache.to_str().unwrap()]);
    let v = ibkit_sm(&sim, &args);
    assert_eq!(v["up"], true);
    let ours = measure(&sim, &guid2lid(&cache.join("guid2lid")));
    (theirs, ours)
}

/// The leaves of `topo` (switches with a CA): each one's node GUID, its
/// ports to other switches, and the node of its first CA.
fn leaves_of(topo: &Topology) -> Vec<(u64, Vec<u8>, usize)> {
    use mad_core::attr::NodeType;
    let switch = |i: usize| topo.nodes[i].kind == NodeType::Switch;
    let mut leaves = Vec::new();
    for i in (0..topo.nodes.len()).filter(|&i| switch(i)) {
        let peers: Vec<(u8, usize)> = (1..=topo.nodes[i].ports)
            .filter_map(|p| topo.peer_of(i, p).map(|(m, _)| (p, m)))
            .collect();
        if let Some(&(_, ca)) = peers.iter().find(|&&(_, m)| !switch(m)) {
            let up = (peers.iter().filter(|&&(_, m)| switch(m))).map(|x| x.0);
            leaves.push((topo.nodes[i].guid, up.collect(), ca));
        }
    }
    leaves
}

/// A site's routing order (OpenSM's `guid_routing_order_file`, `-X`):
/// one host of each of fat-tree-324's 18 leaves named, in reverse, to
/// OpenSM (min-hop) and to `ibkit sm --guid-routing-order-file` on
/// ibsim. At every leaf, as `ibroute` reads it, the named hosts' routes
/// spread over the leaf's up ports with at most one route between the
/// most and the least used port, under both SMs.
#[test]
fn both_sms_spread_the_ports_a_routing_order_names() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let spec = "fat-tree-324";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-order-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Leaves, their up ports, and one host of each (its port GUID).
    let (leaves, hosts): (Vec<(u64, Vec<u8>)>, Vec<u64>) = (leaves_of(&topo).into_iter())
        .map(|(g, up, ca)| ((g, up), topo.nodes[ca].guid + 1))
        .unzip();
    assert_eq!(leaves.len(), 18);
    let order = dir.join("order");
    let text: String = hosts.iter().rev().map(|g| format!("{g:#018x}\n")).collect();
    std::fs::write(&order, text).unwrap();
    let order_s = order.to_str().unwrap();
    // The worst spread over the leaves, from ibroute, at LIDs `lids`.
    let spread = |sim: &Ibsim, lids: &BTreeMap<u64, u16>| -> usize {
        let mut worst = 0;
        let at: Vec<u16> = leaves.iter().map(|(leaf, _)| lids[leaf]).collect();
        for ((_, up), held) in leaves.iter().zip(ibroutes(sim, &at)) {
            let counts: Vec<usize> = (up.iter())
                .map(|p| {
                    hosts
                        .iter()
                        .filter(|h| held.get(&lids[h]) == Some(p))
                        .count()
                })
                .collect();
            worst = worst.max(counts.iter().max().unwrap() - counts.iter().min().unwrap());
        }
        worst
    };
    let (theirs, ours) = both_sms_then(
        &topo,
        &dir,
        &["-X", order_s],
        &["--guid-routing-order-file", order_s],
        spread,
    );
    assert!(theirs <= 1, "OpenSM: {theirs}");
    assert!(ours <= 1, "ibkit: {ours}");
    println!(
        "{spec}: one host of each of 18 leaves routed first: at worst {theirs} (OpenSM) and {ours} (ibkit) \
         route(s) between a leaf's most and least used up ports, as ibroute reads them"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGHUP reads the routing order again (OpenSM reads its
/// `guid_routing_order_file` at each routing): on the served fabric,
/// `ibkit sm --guid-routing-order-file F` with F naming no port; F
/// rewritten to name every host, last first, and `ctl reload-sm` sent,
/// the SM routes again and its LFT dump changes; a broken F keeps the
/// tables.
#[test]
fn sighup_reads_the_routing_order_again() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let hosts: String = (topo.nodes.iter().rev())
        .filter(|n| n.kind != mad_core::attr::NodeType::Switch)
        .map(|n| format!("{:#018x}\n", n.guid + 1))
        .collect();
    let (first, second, took) = sighup_rewrites(spec, "--guid-routing-order-file", &hosts);
    let moved: usize = (second.iter())
        .map(|(sw, t)| {
            t.iter()
                .filter(|(g, p)| first[sw].get(g) != Some(p))
                .count()
        })
        .sum();
    println!("{spec}: SIGHUP with every host named, last first: {moved} routes moved, dumped {took:.1?} later; a broken file kept them");
}

/// Per switch GUID, the port each port GUID's LID leaves by.
type Routes = BTreeMap<u64, BTreeMap<u64, u8>>;

/// The LFT dump, by switch GUID, before and after SIGHUP: `ibkit sm
/// FLAG FILE --dump-dir` on the served `spec`, FILE naming nothing at
/// first, then `after`, and `ctl reload-sm` sent; and how long the new
/// dump took. FILE then broken and SIGHUP sent again, the tables must
/// stay.
fn sighup_rewrites(spec: &str, flag: &str, after: &str) -> (Routes, Routes, std::time::Duration) {
    use std::time::{Duration, Instant};
    use tests::peers::Simulator as _;
    let dir = std::env::temp_dir().join(format!(
        "ibkit-hup{}-{}",
        flag.replace('-', "_"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let dump = dir.join("dump");
    std::fs::create_dir_all(&dump).unwrap();
    let file = dir.join("file");
    std::fs::write(&file, "# none yet\n").unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let sim = tests::peers::Served::start(exe, spec, 0, &[]).unwrap();
    let args = [
        flag,
        file.to_str().unwrap(),
        "--dump-dir",
        dump.to_str().unwrap(),
    ];
    let sm = tests::peers::start_ibkit_sm(exe, &sim, &args, Duration::from_secs(30)).unwrap();
    let dumped = || {
        let t = std::fs::read_to_string(dump.join("opensm-lfts.dump")).unwrap_or_default();
        t.ends_with("lids dumped\n").then(|| routes_by_guid(&t))
    };
    let t0 = Instant::now();
    let first = loop {
        if let Some(r) = dumped() {
            break r;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no LFT dump");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::fs::write(&file, after).unwrap();
    let said = sim.control("reload-sm").unwrap().unwrap();
    assert!(said.starts_with("ok: SIGHUP"), "{said}");
    let t0 = Instant::now();
    let second = loop {
        match dumped() {
            Some(r) if r != first => break r,
            _ => {}
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{flag}: the tables did not change"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = t0.elapsed();
    std::fs::write(&file, "0xnothing\n").unwrap();
    sim.control("reload-sm").unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        dumped().as_ref(),
        Some(&second),
        "{flag}: a broken file keeps the tables"
    );
    let (clean, _) = sm.stop(Duration::from_secs(10));
    assert!(clean);
    let _ = std::fs::remove_dir_all(&dir);
    (first, second, took)
}

/// SIGHUP reads the hop weights again (OpenSM reads its
/// `hop_weights_file` at each routing): on the served fabric, a leaf's
/// first up port given weight 10, the leaf routes nothing out of it any
/// more; a broken file keeps the tables.
#[test]
fn sighup_reads_the_hop_weights_again() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    // A leaf with more than one port to a spine, and its first.
    let (leaf, port) = (leaves_of(&topo).into_iter())
        .find(|l| l.1.len() > 1)
        .map(|(g, up, _)| (g, up[0]))
        .unwrap();
    let weights = format!("{leaf:#018x} {port} 10\n");
    let (first, second, took) = sighup_rewrites(spec, "--hop-weights-file", &weights);
    let out_of =
        |r: &BTreeMap<u64, BTreeMap<u64, u8>>| r[&leaf].values().filter(|&&p| p == port).count();
    let (before, after) = (out_of(&first), out_of(&second));
    assert!(before > 0 && after == 0, "{before} then {after}");
    println!("{spec}: SIGHUP with the leaf's up port {port} weighing 10: {before} routes out of it, then {after}, dumped {took:.1?} later; a broken file kept them");
}

/// OpenSM's `hop_weights_file` (`-w`), the same file given to both SMs on
/// fat-tree-324 (ibsim): a leaf's first up port weighing 10 carries no
/// route under either (every LID has a lighter way, 3, by another spine
/// and leaf), and weighing 2 it carries only the spine's own LID (2
/// against 3), as `ibroute` reads the leaf.
#[test]
fn both_sms_steer_routes_off_a_weighed_port() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let spec = "fat-tree-324";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-weights-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The first leaf and its first port to a spine.
    let (leaf, port) = (leaves_of(&topo).into_iter())
        .map(|(g, up, _)| (g, up[0]))
        .next()
        .unwrap();
    let weights = dir.join("weights");
    let out_of = |sim: &Ibsim, lids: &BTreeMap<u64, u16>| {
        ibroute(sim, lids[&leaf])
            .values()
            .filter(|&&p| p == port)
            .count()
    };
    let mut seen = Vec::new();
    for w in [10u8, 2] {
        std::fs::write(
            &weights,
            format!("# leaf up port\n{leaf:#018x} {port} {w}\n"),
        )
        .unwrap();
        let file = weights.to_str().unwrap();
        let (theirs, ours) = both_sms_then(
            &topo,
            &dir,
            &["-w", file],
            &["--hop-weights-file", file],
            out_of,
        );
        let want = if w == 10 { 0 } else { 1 };
        assert_eq!((theirs, ours), (want, want), "weight {w}");
        seen.push(format!("weight {w}: {theirs} (OpenSM) and {ours} (ibkit)"));
    }
    println!(
        "{spec}: LIDs a leaf routes out of its up port {port}, weighed: {}, as ibroute reads them",
        seen.join("; ")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Min-hop and up*/down* beside OpenSM's, route for route: OpenSM and
/// then `ibkit sm`, given OpenSM's `guid2lid` and the same options, on
/// fresh ibsims of the same fabric; every switch's table, as `ibroute`
/// reads it, is the same under both (ibkit routes the LIDs in OpenSM's
/// order, and, as OpenSM's port profile, counts only routes to end ports
/// in a port's load unless told to count switches' too). The options a
/// site tunes the pick with are given to both: port shifting, every
/// switch's search order reversed, an ignored port on every leaf,
/// switches' LIDs counted, and scatter (seed 7). Each moves routes from
/// plain min-hop. Up*/down* where OpenSM finds roots, or rooted at a
/// named switch, and with scatter or a reversed search order:
/// every route OpenSM sets is ibkit's; ibkit also sets min-hop routes
/// between switches that up*/down* leaves unreachable (a top switch to
/// another), and no other. The fat-tree engine (`-R ftree`) the same way
/// on fat-tree-324.
#[test]
fn both_sms_route_min_hop_port_for_port() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    use mad_core::attr::NodeType;
    let mut said = Vec::new();
    // Each fabric's plain min-hop tables, from the first case.
    type Table = BTreeMap<(u64, u16), u8>;
    let mut plain: BTreeMap<&str, BTreeMap<u64, Table>> = BTreeMap::new();
    // (case, fabrics, OpenSM's arguments, ibkit's arguments), with FILE
    // standing for the case's file, which `file` writes for the fabric.
    type Case = (
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    );
    let all: &[&str] = &["fat-tree-324", "random:24:7", "mport-ntree:4:3"];
    // A 4 x 4 mesh cabled by dimension, where dor's order shows.
    const MESH: &str = "file:../fabric/tests/data/mesh-4x4.topo";
    // A 3 x 3 mesh with two cables between neighbours, where dor
    // chooses between parallel links.
    const MESH2: &str = "file:../fabric/tests/data/mesh-3x3-double.topo";
    // Spines two to a chassis (one SystemImageGUID), where OpenSM's LMC
    // rule sends a port's LIDs to other systems first.
    const CHASSIS: &str = "file:../fabric/tests/data/chassis.topo";
    let with_mesh: &[&str] = &[
        "fat-tree-324",
        "random:24:7",
        "mport-ntree:4:3",
        MESH,
        MESH2,
    ];
    // Meshes and tori cabled by dimension, as ibkit generates them (a
    // torus two switches wide has two cables between neighbours).
    let with_generated: &[&str] = &[
        "fat-tree-324",
        "random:24:7",
        "mport-ntree:4:3",
        MESH,
        MESH2,
        "mesh:5:3:2",
        "torus:4:4",
        "torus:2:3:2",
    ];
    let cases: &[Case] = &[
        ("min-hop", with_generated, &[], &[]),
        (
            "updn",
            &["fat-tree-324", "mport-ntree:4:3"],
            &["-R", "updn"],
            &["--routing", "updn"],
        ),
        (
            "port shifting",
            all,
            &["--port-shifting"],
            &["--port-shifting"],
        ),
        (
            "search order reversed",
            all,
            &["-O", "FILE"],
            &["--port-search-ordering-file", "FILE"],
        ),
        (
            "a leaf port ignored",
            all,
            &["-i", "FILE"],
            &["--port-prof-ignore-file", "FILE"],
        ),
        (
            "switch LIDs counted",
            &["random:24:7"],
            &["-F", "FILE"],
            &["--port-profile-switch-nodes"],
        ),
        (
            "scatter 7",
            all,
            &["--scatter-ports", "7"],
            &["--scatter-ports", "7"],
        ),
        (
            "updn, scatter 7",
            &["fat-tree-324", "mport-ntree:4:3"],
            &["-R", "updn", "--scatter-ports", "7"],
            &["--routing", "updn", "--scatter-ports", "7"],
        ),
        (
            "updn, connect_roots",
            &["fat-tree-324", "mport-ntree:4:3"],
            &["-R", "updn", "-z"],
            &["--routing", "updn", "--connect-roots"],
        ),
        (
            "ftree",
            &["fat-tree-324"],
            &["-R", "ftree"],
            &["--routing", "ftree"],
        ),
        // Dimension order: towards the neighbour behind the first best
        // port, in port order or in the search order.
        ("dor", with_mesh, &["-R", "dor"], &["--routing", "dor"]),
        (
            "dor, generated",
            &with_generated[with_mesh.len()..],
            &["-R", "dor"],
            &["--routing", "dor"],
        ),
        (
            "dor, search order reversed",
            &["random:24:7", "mport-ntree:4:3", MESH2],
            &["-R", "dor", "-O", "FILE"],
            &["--routing", "dor", "--port-search-ordering-file", "FILE"],
        ),
        (
            "updn, a root named",
            &["random:24:7", "random:16:5"],
            &["-R", "updn", "-a", "FILE"],
            &["--routing", "updn", "--root-guid-file", "FILE"],
        ),
        (
            "updn, search order reversed",
            &["mport-ntree:4:3"],
            &["-R", "updn", "-O", "FILE"],
            &["--routing", "updn", "--port-search-ordering-file", "FILE"],
        ),
        // Under LMC, with --lmc-as-opensm, the LIDs above a port's base
        // go to other systems first, from the port after the last LID's.
        (
            "min-hop, LMC 2",
            &["fat-tree-324", "random:24:7", "mport-ntree:4:3", CHASSIS],
            &["-l", "2"],
            &["--lmc", "2", "--lmc-as-opensm"],
        ),
        (
            "port shifting, LMC 2",
            &["random:24:7", "mport-ntree:4:3"],
            &["-l", "2", "--port-shifting"],
            &["--lmc", "2", "--lmc-as-opensm", "--port-shifting"],
        ),
        (
            "search order reversed, LMC 1",
            &["mport-ntree:4:3"],
            &["-l", "1", "-O", "FILE"],
            &[
                "--lmc",
                "1",
                "--lmc-as-opensm",
                "--port-search-ordering-file",
                "FILE",
            ],
        ),
        // dor under LMC: no turn past the last LID's port, and among
        // equally used parallel links, the one that carried fewer of the
        // port's LIDs.
        (
            "dor, LMC 2",
            &[MESH, MESH2, "torus:2:3:2"],
            &["-R", "dor", "-l", "2"],
            &["--routing", "dor", "--lmc", "2", "--lmc-as-opensm"],
        ),
        (
            "dor, LMC 2, search order reversed",
            &[MESH2],
            &["-R", "dor", "-l", "2", "-O", "FILE"],
            &[
                "--routing",
                "dor",
                "--lmc",
                "2",
                "--lmc-as-opensm",
                "--port-search-ordering-file",
                "FILE",
            ],
        ),
        (
            "dor, LMC 2, port shifting",
            &[MESH2],
            &["-R", "dor", "-l", "2", "--port-shifting"],
            &[
                "--routing",
                "dor",
                "--lmc",
                "2",
                "--lmc-as-opensm",
                "--port-shifting",
            ],
        ),
        (
            "updn, LMC 2",
            &["fat-tree-324", "mport-ntree:4:3", CHASSIS],
            &["-R", "updn", "-l", "2"],
            &["--routing", "updn", "--lmc", "2", "--lmc-as-opensm"],
        ),
    ];
    // IBKIT_PORT_FOR_PORT=SPEC,…: the min-hop cases on those fabrics
    // instead (random:300:1, 300 switches and 547,800 routes, takes
    // about three minutes), the up*/down* ones skipped.
    let asked = std::env::var("IBKIT_PORT_FOR_PORT").ok();
    let asked: Option<Vec<&str>> = asked.as_deref().map(|v| v.split(',').collect());
    // IBKIT_PORT_FOR_PORT_CASE=TEXT: only the cases whose name holds it
    // (and plain min-hop, which the others are measured from).
    let only = std::env::var("IBKIT_PORT_FOR_PORT_CASE").ok();
    for &(case, specs, osm_args, ibkit_args) in cases {
        if case != "min-hop" && only.as_deref().is_some_and(|o| !case.contains(o)) {
            continue;
        }
        let specs = match &asked {
            Some(_) if case.starts_with("updn") || case == "ftree" => continue,
            Some(a) => a.as_slice(),
            None => specs,
        };
        let mut seen = Vec::new();
        for &spec in specs {
            let topo = Topology::from_spec(spec).unwrap();
            let dir = std::env::temp_dir().join(format!(
                "ibkit-minhop-{}-{}",
                spec.replace([':', '/', '.'], "-"),
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let switch = |i: usize| topo.nodes[i].kind == NodeType::Switch;
            let switches: Vec<u64> = (0..topo.nodes.len())
                .filter(|&i| switch(i))
                .map(|i| topo.nodes[i].guid)
                .collect();
            let file = dir.join("case-file");
            let text: String = match case {
                c if c.contains("search order") => (0..topo.nodes.len())
                    .filter(|&i| switch(i))
                    .map(|i| {
                        let ports: Vec<String> = (1..=topo.nodes[i].ports)
                            .rev()
                            .map(|p| p.to_string())
                            .collect();
                        format!("{:#018x} {}\n", topo.nodes[i].guid, ports.join(" "))
                    })
                    .collect(),
                "a leaf port ignored" => (leaves_of(&topo).iter())
                    .map(|(g, up, _)| format!("{g:#018x} {}\n", up[0]))
                    .collect(),
                "switch LIDs counted" => "port_profile_switch_nodes TRUE\n".into(),
                "updn, a root named" => format!("{:#018x}\n", switches[0]),
                _ => String::new(),
            };
            std::fs::write(&file, text).unwrap();
            let f = file.to_str().unwrap();
            let fill = |a: &[&'static str]| -> Vec<&str> {
                a.iter().map(|&x| if x == "FILE" { f } else { x }).collect()
            };
            // Every switch's table as ibroute reads it, by port GUID and
            // LID offset into the port's LMC range.
            let tables = |sim: &Ibsim, lids: &BTreeMap<u64, u16>| {
                let by_lid: BTreeMap<u16, u64> = lids.iter().map(|(&g, &l)| (l, g)).collect();
                let owner = |l: u16| {
                    let (&base, &g) = by_lid.range(..=l).next_back().unwrap();
                    (g, l - base)
                };
                let at: Vec<u16> = switches.iter().map(|g| lids[g]).collect();
                (switches.iter().zip(ibroutes(sim, &at)))
                    .map(|(g, t)| {
                        let t: Table = t.iter().map(|(&l, &p)| (owner(l), p)).collect();
                        (*g, t)
                    })
                    .collect::<BTreeMap<u64, Table>>()
            };
            let (theirs, ours) =
                both_sms_then(&topo, &dir, &fill(osm_args), &fill(ibkit_args), tables);
            let routes: usize = theirs.values().map(BTreeMap::len).sum();
            let differ: usize = (theirs.iter())
                .map(|(g, t)| t.iter().filter(|(d, p)| ours[g].get(d) != Some(p)).count())
                .sum();
            assert_eq!(
                differ, 0,
                "{case}, {spec}: {differ} of {routes} routes unlike OpenSM's"
            );
            // Routes ibkit sets where OpenSM sets none: only up*/down*'s,
            // and only between switches.
            let extra: Vec<(u64, (u64, u16))> = (ours.iter())
                .flat_map(|(g, t)| {
                    (t.keys().filter(|d| !theirs[g].contains_key(d))).map(move |d| (*g, *d))
                })
                .collect();
            // Routes the case moved from plain min-hop (options that
            // change nothing here would prove nothing).
            let moved: usize = match plain.get(spec) {
                None => {
                    plain.insert(spec, ours.clone());
                    0
                }
                Some(p) => (p.iter())
                    .map(|(g, t)| {
                        t.iter()
                            .filter(|(d, q)| ours[g].get(d).is_some_and(|o| o != *q))
                            .count()
                    })
                    .sum(),
            };
            let tree = case.starts_with("updn") || case == "ftree";
            let lmc = case.contains("LMC");
            if lmc {
                // Under LMC the base LIDs are routed first, as at LMC 0;
                // what the case proves is the LIDs above them.
                let above = (ours.values().flat_map(BTreeMap::keys))
                    .filter(|d| d.1 > 0 && !switches.contains(&d.0))
                    .count();
                assert!(above > 0, "{case}, {spec}: no LID above a base routed");
            } else if case != "min-hop" && !tree {
                assert!(
                    moved > 0,
                    "{case}, {spec}: no route moved from plain min-hop"
                );
            }
            if tree {
                let bad: Vec<_> = extra
                    .iter()
                    .filter(|(_, d)| !switches.contains(&d.0))
                    .collect();
                assert!(
                    bad.is_empty(),
                    "{case}, {spec}: routes to end ports OpenSM lacks: {bad:x?}"
                );
                seen.push(format!("{spec}: {routes} routes, {moved} moved, {differ} unlike, and {} to switches OpenSM leaves unreachable", extra.len()));
            } else {
                assert!(
                    extra.is_empty(),
                    "{case}, {spec}: {} routes OpenSM lacks",
                    extra.len()
                );
                seen.push(format!(
                    "{spec}: {routes} routes, {moved} moved, {differ} unlike"
                ));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        said.push(format!("{case}: {}", seen.join(", ")));
    }
    println!(
        "ibkit beside OpenSM, as ibroute reads every switch: {}",
        said.join("; ")
    );
}

/// Whether the routes to end ports of `tables` (switch GUID → port GUID →
/// port, as `ibroute` reads them) close a cycle of channel dependencies
/// on `topo`: a channel is a switch's port cabled to another switch, and
/// a route that enters a switch by one channel and leaves by another
/// makes the second wait on the first. Written here from the cables and
/// the tables alone, not with ibkit's router.
fn credit_loop(topo: &Topology, tables: &BTreeMap<u64, BTreeMap<u64, u8>>) -> bool {
    use mad_core::attr::NodeType;
    let node_of: BTreeMap<u64, usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].kind == NodeType::Switch)
        .map(|i| (topo.nodes[i].guid, i))
        .collect();
    // The switch a route out of (node, port) reaches, if it is one.
    let next = |n: usize, p: u8| {
        topo.peer_of(n, p)
            .filter(|&(m, _)| topo.nodes[m].kind == NodeType::Switch)
            .map(|(m, _)| m)
    };
    let mut deps: BTreeMap<(usize, u8), Vec<(usize, u8)>> = BTreeMap::new();
    for (g, t) in tables {
        let n = node_of[g];
        for (d, &p) in t.iter().filter(|(d, _)| !node_of.contains_key(d)) {
            let Some(m) = next(n, p) else { continue };
            let q = tables[&topo.nodes[m].guid].get(d).copied();
            if let Some(q) = q.filter(|&q| next(m, q).is_some()) {
                deps.entry((n, p)).or_default().push((m, q));
            }
        }
    }
    // Depth-first search for a back edge.
    let mut state: BTreeMap<(usize, u8), u8> = BTreeMap::new();
    fn visit(
        c: (usize, u8),
        deps: &BTreeMap<(usize, u8), Vec<(usize, u8)>>,
        state: &mut BTreeMap<(usize, u8), u8>,
    ) -> bool {
        match state.get(&c) {
            Some(1) => return true,
            Some(_) => return false,
            None => {}
        }
        state.insert(c, 1);
        for &d in deps.get(&c).map(Vec::as_slice).unwrap_or(&[]) {
            if visit(d, deps, state) {
                return true;
            }
        }
        state.insert(c, 2);
        false
    }
    let channels: Vec<(usize, u8)> = deps.keys().copied().collect();
    channels.iter().any(|&c| visit(c, &deps, &mut state))
}

/// Where OpenSM's up*/down* is not deadlock-free: random fabrics rooted
/// at their highest-GUID switch (`-R updn -a FILE` and `ibkit sm
/// --routing updn --root-guid-file FILE`, on ibsim). OpenSM's tables,
/// as `ibroute` reads them, route some LID down into a switch and up out
/// of it again, and their channel dependencies close a loop
/// ([`credit_loop`]); ibkit's SM finds the same turn in OpenSM's hops,
/// says so, and routes legal trees, whose dependencies close none.
#[test]
fn opensms_updn_can_close_a_credit_loop_and_ibkits_does_not() {
    if !peers_with_smpquery("dumps_ibsim") {
        return;
    }
    let mut said = Vec::new();
    for spec in ["random:20:5", "random:24:7"] {
        let topo = Topology::from_spec(spec).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "ibkit-updn-loop-{}-{}",
            spec.replace(':', "-"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let switches: Vec<u64> = (topo.nodes.iter())
            .filter(|n| n.kind == mad_core::attr::NodeType::Switch)
            .map(|n| n.guid)
            .collect();
        let root = dir.join("root");
        std::fs::write(&root, format!("{:#018x}\n", switches.iter().max().unwrap())).unwrap();
        let log = dir.join("ibkit.log");
        let (r, l) = (root.to_str().unwrap(), log.to_str().unwrap());
        let tables = |sim: &Ibsim, lids: &BTreeMap<u64, u16>| {
            let by_lid: BTreeMap<u16, u64> = lids.iter().map(|(&g, &l)| (l, g)).collect();
            let at: Vec<u16> = switches.iter().map(|g| lids[g]).collect();
            (switches.iter().zip(ibroutes(sim, &at)))
                .map(|(g, t)| (*g, t.iter().map(|(l, &p)| (by_lid[l], p)).collect()))
                .collect::<BTreeMap<u64, BTreeMap<u64, u8>>>()
        };
        let (theirs, ours) = both_sms_then(
            &topo,
            &dir,
            &["-R", "updn", "-a", r],
            &["--routing", "updn", "--root-guid-file", r, "--log-file", l],
            tables,
        );
        assert!(
            credit_loop(&topo, &theirs),
            "{spec}: OpenSM's tables close no loop"
        );
        assert!(
            !credit_loop(&topo, &ours),
            "{spec}: ibkit's tables close a loop"
        );
        let text = read(&log);
        let warned = text
            .lines()
            .find(|l| l.contains("up*/down* would route LID"));
        assert!(warned.is_some(), "{spec}: {text}");
        let differ: usize = (theirs.iter())
            .map(|(g, t)| t.iter().filter(|(d, p)| ours[g].get(d) != Some(p)).count())
            .sum();
        said.push(format!(
            "{spec}: OpenSM's tables close a credit loop, ibkit's none ({differ} routes differ); ibkit: {}",
            warned.unwrap().split("routing: ").nth(1).unwrap_or_default()
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("{}", said.join("\n"));
}
