//! `ibkit bench opensm --joins N` on ibsim: both SMs bring the fabric up,
//! then hosts join the IPoIB broadcast group through each SM's SA, one
//! after another; the command prints the SMPs of each join and exits 0
//! only where ibkit spent no more than OpenSM and its trees, walked on
//! its own simulator, reached exactly the members. The partition file is
//! named relative to the command's directory, as a user types it (the
//! SMs run in scratch directories of their own).

use std::process::Command;

mod common;

#[test]
fn bench_opensm_with_joins_counts_each_join_for_both_sms() {
    if let Some(why) = tests::peers::missing_tools() {
        common::skip("bench_opensm_with_joins", &why);
        return;
    }
    let dir = std::env::temp_dir().join(format!("ibkit-bench-joins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("parts.conf"),
        "Default=0x7fff,ipoib:ALL=full;\nsw=0x0300:ALL_SWITCHES=full,SELF=full;\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ibkit"))
        .current_dir(&dir)
        .args(["bench", "opensm", "--topology", "mport-ntree:8:2"])
        .args(["--partitions", "parts.conf", "--joins", "4", "--json"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let j = &v["joins"];
    assert_eq!(j["hosts"].as_array().unwrap().len(), 4);
    let counts = |k: &str| -> Vec<u64> {
        (j[k].as_array().unwrap().iter())
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    let (osm, ours, own) = (counts("opensm"), counts("ibkit_on_ibsim"), counts("ibkit"));
    for c in [&osm, &ours, &own] {
        assert_eq!(c.len(), 4);
        // A group of one member needs no tree; every later join some
        // Set(MFT).
        assert_eq!(c[0], 0, "{c:?}");
        assert!(c[1..].iter().all(|&n| n > 0), "{c:?}");
    }
    assert!(ours.iter().sum::<u64>() <= osm.iter().sum::<u64>());
    assert_eq!(j["ibkit_reached"], true);
    assert!(j["ibkit_mft_sets"].as_u64().unwrap() > 0);
    println!(
        "mport-ntree:8:2, 4 joins: OpenSM {osm:?}, ibkit on ibsim {ours:?}, ibkit's own {own:?}"
    );
}

/// More joins than the fabric has hosts: refused with one line, exit 2,
/// before anything runs.
#[test]
fn more_joins_than_hosts_is_refused() {
    if let Some(why) = tests::peers::missing_tools() {
        common::skip("more_joins_than_hosts", &why);
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ibkit"))
        .args(["bench", "opensm", "--topology", "mport-ntree:4:2"])
        .args(["--joins", "1000"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--joins 1000"), "{err}");
}
