//! OpenSM's `file` routing engine ([`Engine::File`] with
//! [`SmConfig::lfts_file`]): the switches' tables come from a dump in
//! OpenSM's `opensm-lfts.dump` layout, each route moved to its owner's
//! LID now, and a file that does not fit the fabric makes the SM route
//! min-hop, as OpenSM does. (`ibkit/tests/dumps_ibsim.rs` loads OpenSM's
//! own dump on ibsim, and gives OpenSM ibkit's.)

use fabric::sim::{bring_up, Fabric, SimConfig};
use mad_core::attr::AttributeId;
use mad_core::Method;
use smi::sm::{Engine, LftFile, Sm, SmConfig, SmEvent};
use std::collections::BTreeMap;
use std::fmt::Write;

fn up(spec: &str, cfg: SmConfig) -> (Fabric, Sm) {
    let (f, sm, up) = bring_up(spec, SimConfig::default(), cfg).unwrap();
    assert!(up, "{spec}: stopped in {:?}: {:?}", sm.phase(), sm.error());
    (f, sm)
}

fn tables(sm: &Sm) -> Vec<Vec<u8>> {
    sm.lfts().map(|(_, t)| t.to_vec()).collect()
}

/// Up*/down*, whose tables differ from min-hop's.
/// Another SM's up*/down*: its ports scattered (seed 7), since on some
/// trees plain up*/down* and min-hop pick the very same ports, and the
/// file must differ from what the engine would route without it.
fn updn() -> SmConfig {
    SmConfig {
        routing: Engine::UpDown,
        port_selection: smi::sm::PortSelection {
            scatter: 7,
            ..Default::default()
        },
        ..SmConfig::default()
    }
}

fn file_cfg(file: Option<LftFile>) -> SmConfig {
    SmConfig {
        routing: Engine::File,
        lfts_file: file,
        ..SmConfig::default()
    }
}

/// `sm`'s tables in OpenSM's `opensm-lfts.dump` layout, every LID written
/// as `lid + shift` (as another SM that gave other LIDs would have
/// written it), owners named by port GUID unless `guids` is false; the
/// switch `skip` (a node GUID) left out.
fn dump(sm: &Sm, shift: u16, guids: bool, skip: u64) -> String {
    let owners: BTreeMap<u16, u64> = (sm.nodes().iter())
        .filter(|n| n.lid != 0)
        .map(|n| (n.lid, n.info.port_guid.0))
        .collect();
    let mut s = String::new();
    for (i, t) in sm.lfts() {
        let n = &sm.nodes()[i];
        if n.info.node_guid.0 == skip {
            continue;
        }
        let _ = writeln!(
            s,
            "Unicast lids [0-{}] of switch Lid {} guid 0x{:016x} ('x'):",
            sm.max_lid(),
            n.lid + shift,
            n.info.node_guid.0
        );
        for (lid, &port) in t.iter().enumerate().skip(1) {
            if port == 255 {
                continue;
            }
            let _ = write!(s, "0x{:04x} {port:03} # ", lid as u16 + shift);
            match owners.get(&(lid as u16)) {
                Some(g) if guids => {
                    let _ = writeln!(s, "Channel Adapter portguid 0x{g:016x}: 'y'");
                }
                _ => s.push_str("unknown node and type\n"),
            }
        }
        let _ = writeln!(s, "{} lids dumped", sm.max_lid());
    }
    s
}

/// Another SM's up*/down* tables, written with other LIDs: the file
/// engine moves every route back to its owner's LID, so the tables are
/// up*/down*'s exactly, every CA reaches every LID, and the routes stay
/// deadlock-free. Without the owners' GUIDs, the LIDs stay as written
/// (above the subnet's highest: nothing routed).
#[test]
fn another_sms_dump_routes_as_written_at_todays_lids() {
    for spec in ["random:20:5", "mport-ntree:4:3"] {
        let (_, updn) = up(spec, updn());
        let (_, minhop) = up(spec, SmConfig::default());
        assert_ne!(
            tables(&updn),
            tables(&minhop),
            "{spec}: the file must matter"
        );
        let text = dump(&updn, 1000, true, 0);
        let file = LftFile::parse(&text).unwrap();
        assert!(file.routes() > 0);
        let (f, sm) = up(spec, file_cfg(Some(file)));
        assert_eq!(tables(&sm), tables(&updn), "{spec}");
        let v = f.verify();
        assert_eq!(
            (v.unreachable, v.loops, v.switch_unreachable),
            (0, 0, 0),
            "{spec}"
        );
        assert!(sm.deadlock_free(), "{spec}");
        // No owner named: LIDs 1001.. are above the subnet's highest.
        let file = LftFile::parse(&dump(&updn, 1000, false, 0)).unwrap();
        let (_, sm) = up(spec, file_cfg(Some(file)));
        assert!(
            tables(&sm).iter().all(|t| t.iter().all(|&p| p == 255)),
            "{spec}: nothing routed"
        );
        println!(
            "{spec}: {} routes read at LIDs +1000, every one back at its owner's LID: up*/down*'s tables",
            text.lines().filter(|l| l.starts_with("0x")).count()
        );
    }
}

/// A switch the file does not name keeps an empty table (as OpenSM's);
/// the others are the file's.
#[test]
fn a_switch_the_file_leaves_out_gets_an_empty_table() {
    let spec = "mport-ntree:4:3";
    let (_, updn) = up(spec, updn());
    let (k, &left) = updn.graph_switches().iter().enumerate().nth(2).unwrap();
    let guid = updn.nodes()[left].info.node_guid.0;
    let file = LftFile::parse(&dump(&updn, 0, true, guid)).unwrap();
    let (_, sm) = up(spec, file_cfg(Some(file)));
    let (ours, theirs) = (tables(&sm), tables(&updn));
    for (j, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        if j == k {
            assert!(a.iter().all(|&p| p == 255), "switch {j}: {a:?}");
        } else {
            assert_eq!(a, b, "switch {j}");
        }
    }
}

/// A route out of a port the switch does not have fails the whole file:
/// the SM says so, with the line, and routes min-hop (OpenSM's fallback).
/// So does the `file` engine without a file. Given a next engine
/// ([`SmConfig::file_fallback`]), that engine routes instead.
#[test]
fn a_file_that_does_not_fit_falls_back_to_minhop() {
    let spec = "random:20:5";
    let (_, minhop) = up(spec, SmConfig::default());
    let (_, updn) = up(spec, updn());
    let mut text = dump(&updn, 0, true, 0);
    let at = text.lines().position(|l| l.starts_with("0x")).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[at] = format!("{} 099 # too far", &lines[at][..6]);
    text = lines.join("\n");
    let (_, mut sm) = up(spec, file_cfg(Some(LftFile::parse(&text).unwrap())));
    assert_eq!(tables(&sm), tables(&minhop));
    let said = std::iter::from_fn(|| sm.poll_event())
        .find_map(|e| match e {
            SmEvent::RoutingFellBack {
                wanted: Engine::File,
                used: Engine::MinHop,
                reason,
            } => Some(reason),
            _ => None,
        })
        .expect("the fallback is told");
    assert!(
        said.starts_with(&format!("line {}: ", at + 1)) && said.contains("port 99"),
        "{said}"
    );
    let (_, sm) = up(spec, file_cfg(None));
    assert_eq!(tables(&sm), tables(&minhop));
    // With a next engine (OpenSM's `routing_engine file,updn`): that
    // engine's tables, with or without a file, and the event names it.
    let plain_updn = SmConfig {
        routing: Engine::UpDown,
        ..SmConfig::default()
    };
    let (_, plain_updn) = up(spec, plain_updn);
    assert_ne!(tables(&plain_updn), tables(&minhop));
    for file in [Some(LftFile::parse(&text).unwrap()), None] {
        let cfg = SmConfig {
            file_fallback: Engine::UpDown,
            ..file_cfg(file.clone())
        };
        let (_, mut sm) = up(spec, cfg);
        assert_eq!(tables(&sm), tables(&plain_updn));
        assert!(sm.deadlock_free());
        let told = std::iter::from_fn(|| sm.poll_event()).any(|e| {
            matches!(
                e,
                SmEvent::RoutingFellBack {
                    wanted: Engine::File,
                    used: Engine::UpDown,
                    ..
                }
            )
        });
        assert_eq!(
            told,
            file.is_some(),
            "a missing file is warned at start, once"
        );
    }
}

/// A new file on a running subnet ([`Sm::set_lfts_file`], what SIGHUP does
/// with a changed `lfts_file`): one route moved sends one LFT block, and
/// the switch holds it; the same file again does nothing.
#[test]
fn a_new_file_on_a_running_subnet_sends_only_the_block_that_changed() {
    let spec = "mport-ntree:4:3";
    let (_, updn) = up(spec, updn());
    let text = dump(&updn, 0, true, 0);
    let (mut f, mut sm) = up(spec, file_cfg(Some(LftFile::parse(&text).unwrap())));
    assert_eq!(tables(&sm), tables(&updn));
    // The first switch's route to the highest CA LID it reaches by an up
    // port is sent down another connected port instead.
    let (i, t) = sm.lfts().next().map(|(i, t)| (i, t.to_vec())).unwrap();
    let lid = (1..t.len())
        .rev()
        .find(|&l| t[l] != 255 && t[l] != 0)
        .unwrap();
    let other = (1..=sm.nodes()[i].info.num_ports)
        .find(|&p| p != t[lid] && sm.nodes()[i].ports[usize::from(p)].peer.is_some())
        .unwrap();
    let header = format!("guid 0x{:016x}", sm.nodes()[i].info.node_guid.0);
    let mut out = String::new();
    let mut mine = false;
    for l in text.lines() {
        if l.starts_with("Unicast") {
            mine = l.contains(&header);
        }
        if mine && l.starts_with(&format!("0x{lid:04x} ")) {
            let _ = writeln!(out, "0x{lid:04x} {other:03} # moved");
        } else {
            let _ = writeln!(out, "{l}");
        }
    }
    let sets = |sm: &Sm| {
        sm.stats()
            .count(Method::Set, AttributeId::LinearForwardingTable)
    };
    let before = sets(&sm);
    let now = f.now_ns() / 1_000_000;
    let file = LftFile::parse(&out).unwrap();
    assert!(sm.set_lfts_file(Some(file.clone()), now));
    assert!(f.run(&mut sm));
    assert_eq!(sets(&sm) - before, 1, "one block");
    assert_eq!(sm.lft_entry(i, lid as u16), other);
    let j = f.node_by_guid(sm.nodes()[i].info.node_guid.0).unwrap();
    let held = f.nodes[j].lft_port(mad_core::Lid(lid as u16));
    assert_eq!(held, other, "the switch holds the new route");
    let now = f.now_ns() / 1_000_000;
    assert!(!sm.set_lfts_file(Some(file), now), "the same file");
}

/// On a vSwitch fabric under the file engine, a VM that migrated far is
/// still reached once the file is applied again (a reroute: here a new
/// `lfts_file`, as a SIGHUP reads one): the file's route to the VM's LID
/// leads to where the VM was, so a VF's LID the file does not send into
/// its hypervisor's port is routed by the fallback engine, and every
/// other route stays the file's. Under both LID policies (prepopulated:
/// the VM's LID and the swapped idle one; dynamic: a LID the file never
/// had).
#[test]
fn a_migrated_vms_lid_is_routed_where_it_is_when_the_file_is_applied_again() {
    use smi::sm::LidPolicy;
    let spec = "fat-tree-324";
    for policy in [LidPolicy::Prepopulated, LidPolicy::Dynamic] {
        let sim = || SimConfig {
            vfs: 2,
            ..SimConfig::default()
        };
        let cfg = |routing, lfts_file| SmConfig {
            routing,
            lfts_file,
            lid_policy: policy,
            ..SmConfig::default()
        };
        // The file: the min-hop tables of the fabric with its VFs idle.
        let (_, first, ok) = bring_up(spec, sim(), cfg(Engine::MinHop, None)).unwrap();
        assert!(ok);
        let text = dump(&first, 0, true, 0);
        let (mut f, mut sm, ok) = bring_up(
            spec,
            sim(),
            cfg(Engine::File, Some(LftFile::parse(&text).unwrap())),
        )
        .unwrap();
        assert!(ok);
        assert_eq!(tables(&sm), tables(&first), "{policy:?}: the file's tables");
        // A VM started on one hypervisor, moved to one on another leaf.
        let hyps = sm.hypervisors();
        let from = hyps[0];
        let leaf = sm.attachment(from).unwrap().0;
        let to = *(hyps.iter())
            .find(|&&h| sm.attachment(h).unwrap().0 != leaf)
            .unwrap();
        let vm = sm.create_vm(from, 0xAB).unwrap();
        assert!(f.run(&mut sm));
        let plan = sm.plan_migration(vm, to).unwrap();
        let moved: Vec<u16> = std::iter::once(plan.vm_lid)
            .chain(plan.swapped_lid)
            .collect();
        sm.apply_migration(&plan, false).unwrap();
        assert!(f.run(&mut sm));
        let lid = mad_core::Lid(sm.vm(vm).unwrap().lid);
        let at = |f: &Fabric, sm: &Sm| {
            let h = f.node_by_guid(sm.nodes()[to].info.node_guid.0).unwrap();
            (f.deliver_to(f.sm_node, lid), Some(h))
        };
        let (got, want) = at(&f, &sm);
        assert_eq!(got, want, "{policy:?}: after the migration");
        // The file again (one line more, so it is a new file): a reroute.
        let again = LftFile::parse(&format!("# read again\n{text}")).unwrap();
        let now = f.now_ns() / 1_000_000;
        assert!(sm.set_lfts_file(Some(again), now));
        assert!(f.run(&mut sm));
        let (got, want) = at(&f, &sm);
        assert_eq!(got, want, "{policy:?}: the file applied again");
        let v = f.verify();
        assert_eq!(
            (v.unreachable, v.loops, v.switch_unreachable),
            (0, 0, 0),
            "{policy:?}"
        );
        // Only the moved LIDs left the file's routes.
        let (a, b) = (tables(&first), tables(&sm));
        let off: std::collections::BTreeSet<u16> = (a.iter().zip(&b))
            .flat_map(|(x, y)| {
                (x.iter().zip(y).enumerate())
                    .filter(|(_, (p, q))| p != q)
                    .map(|(l, _)| l as u16)
            })
            .collect();
        // Prepopulated: the VM's LID was in the file, and moved; dynamic:
        // a LID above every one the file routes.
        assert!(
            off.contains(&lid.0) || usize::from(lid.0) >= a[0].len(),
            "{policy:?}: LID {} neither moved nor new",
            lid.0
        );
        assert!(
            off.iter().all(|l| moved.contains(l)),
            "{policy:?}: {off:?} moved, only {moved:?} may"
        );
        println!(
            "{policy:?}: VM LID {} at its new hypervisor after the file was applied again; LIDs {moved:?} routed by min-hop ({off:?} unlike the file's), every other route the file's",
            lid.0
        );
    }
}
