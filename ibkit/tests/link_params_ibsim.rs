//! The link parameters OpenSM writes into every port's PortInfo as it
//! brings the links up — HOQLife and VLStallCount of switch ports (a
//! leaf port's apart from an inter-switch port's), OperationalVLs, the
//! SubnetTimeOut and MasterSMSL of end ports, the error thresholds — and
//! every switch's LifeTimeValue (SwitchInfo), and the LinkWidthEnabled
//! and LinkSpeedEnabled `force_link_width`/`force_link_speed` give, from the same
//! `opensm.conf`, read back with `smpquery` port for port from OpenSM
//! and from ibkit's SM, on ibsim and on ibkit's served fabric: with
//! OpenSM's defaults, and with a site's values for every one.

use fabric::topology::Topology;
use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::{opensm_conf_with, simulator_and_sm, skip, smp_field};

/// The fields compared.
const FIELDS: [&str; 11] = [
    "SMSL:",
    "LinkSpeedEnabled:",
    "LinkWidthEnabled:",
    "NeighborMTU:",
    "HoqLife:",
    "VLStallCount:",
    "OperVLs:",
    "SubnetTimeout:",
    "LocalPhysErr:",
    "OverrunErr:",
    "GidPrefix:",
];

/// (node GUID, port) → the fields of every port of every node, read
/// through LID 1..=`lids` from `tool`.
fn link_fields(
    sim: &dyn tests::peers::Simulator,
    tool: &str,
    lids: u16,
) -> BTreeMap<(String, u8), Vec<String>> {
    let query = |args: &[&str]| {
        let out = sim
            .client_at("smpquery".as_ref(), tool)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    (1..=lids)
        .flat_map(|lid| {
            let l = lid.to_string();
            let ni = query(&["nodeinfo", &l]);
            let (Some(guid), Some(kind), Some(ports)) = (
                smp_field(&ni, "Guid:"),
                smp_field(&ni, "NodeType:"),
                smp_field(&ni, "NumPorts:"),
            ) else {
                panic!("LID {lid}: {ni}");
            };
            let switch = kind.starts_with("Switch");
            let ports: Vec<u8> = if switch {
                (1..=ports.parse().unwrap()).collect()
            } else {
                vec![0]
            };
            // A switch's LifeTime (SwitchInfo), as its port 255.
            let life = switch.then(|| {
                let si = query(&["switchinfo", &l]);
                let v = smp_field(&si, "LifeTime:").unwrap_or("-").to_string();
                ((guid.to_string(), 255), vec![v])
            });
            ports
                .into_iter()
                .map(|p| {
                    let pi = query(&["portinfo", &l, &p.to_string()]);
                    let v = FIELDS
                        .iter()
                        .map(|f| smp_field(&pi, f).unwrap_or("-").to_string())
                        .collect();
                    ((guid.to_string(), p), v)
                })
                .chain(life)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn opensm_and_ibkit_write_the_same_link_parameters() {
    if let Some(why) = tests::peers::missing_tools() {
        skip("link parameters", &why);
        return;
    }
    if !Path::new("/usr/sbin/smpquery").exists() {
        skip("link parameters", "infiniband-diags is not installed");
        return;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let dir = std::env::temp_dir().join(format!("ibkit-linkp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tool = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .nth(3)
        .unwrap()
        .name
        .clone();
    let wait = std::time::Duration::from_secs(30);
    let site = [
        ("subnet_timeout", "17"),
        ("head_of_queue_lifetime", "0x13"),
        ("leaf_head_of_queue_lifetime", "0x0e"),
        ("vl_stall_count", "5"),
        ("leaf_vl_stall_count", "6"),
        ("max_op_vls", "3"),
        ("local_phy_errors_threshold", "0x09"),
        ("overrun_errors_threshold", "10"),
        ("packet_life_time", "0x14"),
        ("sm_sl", "3"),
        ("subnet_prefix", "0xfec0000000000001"),
        ("force_link_width", "1"),
        ("force_link_speed", "3"),
        ("log_file", "(null)"),
    ];
    let mut sites = Vec::new();
    for (served, own) in [(false, false), (true, false), (false, true), (true, true)] {
        let on = format!(
            "{} with {}",
            if served { "the served fabric" } else { "ibsim" },
            if own {
                "a site's values"
            } else {
                "OpenSM's defaults"
            }
        );
        let conf = if own {
            opensm_conf_with(&dir, &site)
        } else {
            opensm_conf_with(&dir, &[("log_file", "(null)")])
        };
        let mut seen = Vec::new();
        for opensm in [true, false] {
            let (sim, sm) = simulator_and_sm(
                exe,
                (spec, &topo),
                served,
                &dir,
                wait,
                opensm.then_some(&["-F", &conf][..]),
                &["--transport", "ibsim", "--opensm-config", &conf],
            );
            seen.push(link_fields(sim.as_ref(), &tool, topo.nodes.len() as u16));
            let _ = sm.stop(std::time::Duration::from_secs(10));
        }
        let (osm, ibkit) = (&seen[0], &seen[1]);
        assert_eq!(osm.len(), ibkit.len(), "{on}: ports read");
        // OpenSM 3.3.23 writes LifeTimeValue keeping the two low bits of
        // the one the switch held (ib_switch_info_set_life_time masks the
        // byte with 0x1f where 0x07 keeps the other fields): on the served
        // fabric, whose switches start at 18 (0b10010), it writes 22 for
        // the site's 20. ibkit writes what is asked, as the spec has it;
        // ibsim's switches start at 0, so there the two agree.
        let quirk = |k: &(String, u8)| served && own && k.1 == 255;
        for (k, v) in osm.iter().filter(|(k, _)| quirk(k)) {
            assert_eq!(
                (v.as_slice(), ibkit[k].as_slice()),
                (&["22".to_string()][..], &["20".to_string()][..]),
                "{on}: {k:?}"
            );
        }
        let differ: Vec<_> = osm
            .iter()
            .filter(|(k, v)| !quirk(k) && ibkit.get(*k) != Some(v))
            .map(|(k, v)| format!("{k:?}: OpenSM {v:?}, ibkit {:?}", ibkit.get(k)))
            .collect();
        assert!(
            differ.is_empty(),
            "{on}: {} of {} ports differ:\n{}",
            differ.len(),
            osm.len(),
            differ.join("\n")
        );
        let lives = osm.keys().filter(|k| k.1 == 255).count();
        eprintln!(
            "{on}: {} ports, {:?}, and {lives} switches' LifeTime equal{}",
            osm.len() - lives,
            FIELDS,
            if served && own {
                " (but LifeTime: OpenSM 22 where 20 was asked, ibkit 20)"
            } else {
                ""
            }
        );
        if served && own {
            sites.push(ibkit.clone());
        }
    }
    // Where the fabric keeps them, the site's values are what was read
    // (not only the same from both SMs): on a leaf switch port, an
    // inter-switch port (whose SubnetTimeOut, an end port's field, is
    // left as it was), and every CA port.
    let on_served = &sites[0];
    let has = |want: [&str; 6]| {
        on_served
            .values()
            .any(|v| v.len() == 11 && v[4..10] == want)
    };
    assert!(
        has(["14", "6", "VL0-3", "18", "9", "10"]),
        "a leaf switch port: {on_served:?}"
    );
    assert!(
        has(["19", "5", "VL0-3", "18", "9", "10"]),
        "an inter-switch port: {on_served:?}"
    );
    // force_link_width 1 and force_link_speed 3 on every port read.
    let links: Vec<&Vec<String>> = on_served.values().filter(|v| v.len() == 11).collect();
    assert!(
        links.len() == 32
            && links
                .iter()
                .all(|v| v[1] == "2.5 Gbps or 5.0 Gbps" && v[2] == "1X"),
        "forced width and speed: {links:?}"
    );
    let lives: Vec<&Vec<String>> = (on_served.iter())
        .filter(|((_, p), _)| *p == 255)
        .map(|(_, v)| v)
        .collect();
    assert!(
        lives.len() == 6 && lives.iter().all(|v| v[0] == "20"),
        "switches' LifeTime: {lives:?}"
    );
    let cas: Vec<&Vec<String>> = (on_served.iter())
        .filter(|((_, p), _)| *p == 0)
        .map(|(_, v)| v)
        .collect();
    assert_eq!(cas.len(), 8);
    assert!(
        cas.iter()
            .all(|v| v[0] == "3" && v[6..] == ["VL0-3", "17", "9", "10", "0xfec0000000000001"]),
        "CA ports: {cas:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
