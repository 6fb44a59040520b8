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

/// `--lmc-esp0` reaches both SMs: on fat-tree-324 with every switch's
/// port 0 enhanced (as ibsim reads `enhanced port 0` in the topology file)
/// and LMC 2, both send more SMPs with it than without (the switches'
/// extra LIDs need more LFT blocks), so OpenSM read the option from the
/// configuration file the bench wrote for it.
#[test]
fn bench_opensm_lmc_esp0_reaches_both_sms() {
    if let Some(why) = tests::peers::missing_tools() {
        common::skip("bench_opensm_lmc_esp0", &why);
        return;
    }
    let exe = env!("CARGO_BIN_EXE_ibkit");
    let dir = std::env::temp_dir().join(format!("ibkit-bench-esp0-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let net = Command::new(exe)
        .args(["topology", "--topology", "fat-tree-324", "--ibnetdiscover"])
        .output()
        .unwrap();
    assert!(net.status.success());
    let text = String::from_utf8(net.stdout)
        .unwrap()
        .replace("base port 0", "enhanced port 0");
    let file = dir.join("esp0.net");
    std::fs::write(&file, text).unwrap();
    let spec = format!("file:{}", file.display());
    let run = |esp0: bool| -> serde_json::Value {
        let mut c = Command::new(exe);
        c.args([
            "bench",
            "opensm",
            "--topology",
            &spec,
            "--lmc",
            "2",
            "--json",
        ]);
        if esp0 {
            c.arg("--lmc-esp0");
        }
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&text).unwrap()
    };
    let (base, esp0) = (run(false), run(true));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        (base["lmc_esp0"].as_bool(), esp0["lmc_esp0"].as_bool()),
        (Some(false), Some(true))
    );
    let smps = |v: &serde_json::Value, who: &str| v[who]["smps"].as_u64().unwrap();
    let (o0, o1) = (smps(&base, "opensm"), smps(&esp0, "opensm"));
    let (k0, k1) = (smps(&base, "ibkit"), smps(&esp0, "ibkit"));
    println!("fat-tree-324 esp0, LMC 2: OpenSM {o0} → {o1}, ibkit {k0} → {k1}");
    assert!(o1 > o0, "OpenSM took lmc_esp0: {o0} → {o1}");
    // ibkit: the switches' 108 more LIDs need 2 more LFT blocks on each
    // of the 36 switches.
    assert_eq!(k1 - k0, 36 * 2);
    assert!(k1 <= o1);
}

/// `--lmc-esp0` alone would measure nothing new: refused by the parser,
/// exit 2, naming the option it needs (no simulator needed).
#[test]
fn lmc_esp0_without_lmc_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_ibkit"))
        .args(["bench", "opensm", "--lmc-esp0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--lmc <LMC>"), "{err}");
}
