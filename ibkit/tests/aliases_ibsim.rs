//! Alias GUIDs (GUIDInfoRecord Set and Delete) asked of OpenSM's SA and
//! of ibkit's, on ibsim and on ibkit's served fabric: the same answers
//! (OpenSM 3.3.23 and ibkit make the same GUIDs, the OpenIB OUI and a
//! count), a PathRecord to the alias GID reaching the port, and, on the
//! served fabric whose HCAs take Set(GUIDInfo), `smpquery GI` (a tool we
//! did not write) reading the alias back from the port. ibsim refuses
//! Set(GUIDInfo) (it answers Get only), so there the port's table stays
//! as it was under either SM.

use fabric::topology::Topology;
use std::time::Duration;
use tests::peers::{missing_tools, Simulator};

mod common;
use common::{simulator_and_sm, skip};

/// The alias a host asks for at index 1.
const G1: u64 = 0x0002_c903_00aa_0001;

/// What one SM answered.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    /// The Set's answer: guid0..guid7 of block 0.
    set: Vec<u64>,
    /// The LID a PathRecord to the SA-made alias (index 2) leads to, and
    /// the host's own LID.
    path_dlid: (u64, u64),
    /// The port's table as `smpquery GI` reads it.
    table: Vec<u64>,
    /// Another host setting this port's aliases: its exit status.
    other_host: i32,
    /// The Delete of index 1: the block after it.
    deleted: Vec<u64>,
    /// A Set of entry 0: its exit status and what it said.
    entry0: (i32, String),
    /// Every end port's GUIDInfoRecord of each block 0..=4 (asked one
    /// at a time: libumad2sim cuts OpenSM's longer answers), by the
    /// node's name: the GUIDs, or the exit status of a refusal.
    every: Vec<(String, u8, Result<Vec<u64>, i32>)>,
}

fn hex(v: &serde_json::Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap_or("0x0").trim_start_matches("0x"), 16).unwrap()
}

/// `ibkit sa ARGS --json` from `host`: exit status, JSON, stderr.
fn sa(sim: &dyn Simulator, host: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let exe = env!("CARGO_BIN_EXE_ibkit");
    let out = (sim.client_at(exe.as_ref(), host))
        .arg("sa")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(text.trim()).unwrap_or(serde_json::Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// guid0..guid7 of the first record.
fn guids(v: &serde_json::Value) -> Vec<u64> {
    (v["records"][0]["guid_info"]["guids"].as_array())
        .map(|a| a.iter().map(hex).collect())
        .unwrap_or_default()
}

/// The GUIDs `smpquery GI` prints (`N: 0x… 0x…` lines).
fn smpquery_gi(text: &str) -> Vec<u64> {
    text.lines()
        .filter(|l| {
            l.trim_start()
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
        .filter_map(|l| l.split_once(':'))
        .flat_map(|(_, rest)| rest.split_whitespace().map(|w| w.to_string()))
        .filter_map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok())
        .collect()
}

/// The alias steps against whatever SM runs on `sim`, from `host` (the
/// port) and `other` (another CA).
fn steps(sim: &dyn Simulator, host: &str, other: &str, names: &[String]) -> Seen {
    let lid_of = |name: &str| {
        let (code, v, err) = sa(sim, other, &["node", &format!("node_description={name}")]);
        assert_eq!(code, 0, "{err}");
        v["records"][0]["lid"].as_u64().unwrap()
    };
    let (lid, other_lid) = (lid_of(host), lid_of(other));
    let (code, v, err) = sa(
        sim,
        host,
        &["guidinfo", "--set", &format!("guid1={G1:#x}"), "guid2=0"],
    );
    assert_eq!(code, 0, "{err}");
    let set = guids(&v);
    // The SM writes the block after it answers.
    std::thread::sleep(Duration::from_millis(300));
    let made = set[2];
    let alias = std::net::Ipv6Addr::from(((0xfe80u128) << 112) | u128::from(made)).to_string();
    let (code, v, err) = sa(
        sim,
        other,
        &[
            "path",
            &format!("slid={other_lid}"),
            &format!("dgid={alias}"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let path_dlid = (v["records"][0]["dlid"].as_u64().unwrap_or(0), lid);
    let out = (sim.client_at("smpquery".as_ref(), other))
        .args(["GI", &lid.to_string()])
        .output()
        .unwrap();
    let table = smpquery_gi(&String::from_utf8_lossy(&out.stdout));
    let mut every = Vec::new();
    for name in names {
        let l = lid_of(name).to_string();
        for b in 0..=4u8 {
            let (code, v, _) = sa(sim, other, &["guidinfo", &l, &b.to_string()]);
            every.push((
                name.clone(),
                b,
                if code == 0 { Ok(guids(&v)) } else { Err(code) },
            ));
        }
    }
    let (code, v, err) = sa(sim, host, &["guidinfo", "--delete", "guid1=0"]);
    assert_eq!(code, 0, "{err}");
    let deleted = guids(&v);
    let (code, _, err) = sa(sim, host, &["guidinfo", "--set", "guid0=0"]);
    let entry0 = (
        code,
        err.trim().rsplit(": ").next().unwrap_or("").to_string(),
    );
    let (other_host, _, _) = sa(
        sim,
        other,
        &["guidinfo", "--set", &format!("lid={lid}"), "guid3=0"],
    );
    Seen {
        set,
        path_dlid,
        table,
        other_host,
        deleted,
        entry0,
        every,
    }
}

#[test]
fn alias_guids_are_answered_as_opensm_answers_them() {
    if let Some(why) = missing_tools() {
        skip("aliases_ibsim", &why);
        return;
    }
    if !std::path::Path::new("/usr/sbin/smpquery").exists() {
        skip(
            "aliases_ibsim",
            "infiniband-diags (smpquery) is not installed",
        );
        return;
    }
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let spec = "mport-ntree:4:2";
    let topo = Topology::from_spec(spec).unwrap();
    let cas: Vec<&str> = (topo.nodes.iter())
        .filter(|n| n.ports == 1)
        .map(|n| n.name.as_str())
        .collect();
    let (host, other) = (cas[cas.len() - 1], cas[1]);
    let names: Vec<String> = topo.nodes.iter().map(|n| n.name.clone()).collect();
    let dir = std::env::temp_dir().join(format!("ibkit-aliases-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wait = Duration::from_secs(20);
    for served in [false, true] {
        let mut seen = Vec::new();
        for opensm in [true, false] {
            let (sim, sm) = simulator_and_sm(
                exe,
                (spec, &topo),
                served,
                &dir,
                wait,
                opensm.then_some(&[][..]),
                &[],
            );
            // Every port's records on ibsim (the served fabric's SA code
            // is the same).
            let all: &[String] = if served { &[] } else { &names };
            let s = steps(sim.as_ref(), host, other, all);
            let who = if opensm { "OpenSM" } else { "ibkit" };
            let on = if served { "served fabric" } else { "ibsim" };
            println!(
                "{who} on {on}: {:x?}; {} GUIDInfoRecords asked one by one",
                Seen {
                    every: Vec::new(),
                    ..s.clone()
                },
                s.every.len()
            );
            let _ = sm.stop(Duration::from_secs(5));
            seen.push(s);
        }
        let (o, i) = (&seen[0], &seen[1]);
        let on = if served { "served fabric" } else { "ibsim" };
        // The Set: index 1 as given, index 2 made by the SA (the OpenIB
        // OUI, site byte 0, count 1), the same from both.
        assert_eq!(i.set, o.set, "{on}: the Set's answer");
        // Every end port's table, block by block, as OpenSM's SA lists
        // it (blocks up to GUIDCap, the host's aliases in its block 0).
        assert_eq!(i.every, o.every, "{on}: every GUIDInfoRecord");
        assert_eq!((i.set[1], i.set[2]), (G1, 0x0014_0500_0000_0001), "{on}");
        // The alias GID resolves to the port.
        assert_eq!(i.path_dlid.0, i.path_dlid.1, "{on}: ibkit's path");
        assert_eq!(o.path_dlid.0, o.path_dlid.1, "{on}: OpenSM's path");
        // The port's table: the aliases where the HCA takes Set(GUIDInfo).
        assert_eq!(i.table, o.table, "{on}: smpquery GI");
        if served {
            assert_eq!(&i.table[..3], &i.set[..3], "the port holds the aliases");
        } else {
            assert!(
                i.table[1..].iter().all(|&g| g == 0),
                "ibsim refuses the Set"
            );
        }
        assert_eq!(i.deleted, o.deleted, "{on}: the Delete's answer");
        assert_eq!((i.deleted[1], i.deleted[2]), (0, i.set[2]));
        assert_eq!(i.entry0, o.entry0, "{on}: entry 0 is read-only");
        assert_eq!(i.entry0.0, 1);
        assert!(i.entry0.1.contains("ReqInvalid"), "{:?}", i.entry0);
        // OpenSM lets any host sharing a partition set a port's aliases;
        // ibkit only the port itself or the SA key.
        assert_eq!((o.other_host, i.other_host), (0, 1), "{on}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
