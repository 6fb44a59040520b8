//! `ibkit bench election` on a small fabric, OpenSM polling every second:
//! every scenario ends with a new master that `sminfo` names, and ibkit's
//! standby takes over within its detection time after a SIGKILL and at
//! once after a SIGTERM (the master hands over).

use std::process::Command;

#[test]
fn bench_election_measures_both_sms_and_ibkit_is_fast() {
    if let Some(why) = tests::peers::missing_tools() {
        tests::skip("bench_election", &why);
        return;
    }
    if !std::path::Path::new("/usr/sbin/sminfo").exists() {
        tests::skip(
            "bench_election",
            "infiniband-diags (sminfo) is not installed",
        );
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ibkit"))
        .args(["bench", "election", "--topology", "mport-ntree:4:2"])
        .args(["--opensm-poll-ms", "1000", "--wait-s", "60", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ms = |sm: &str, ev: &str| {
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["sm"] == sm && r["event"] == ev)
            .and_then(|r| r["new_master_ms"].as_f64())
            .unwrap_or_else(|| panic!("{sm} {ev}: no new master: {v}"))
    };
    let (ok, os) = (ms("opensm", "kill"), ms("opensm", "stop"));
    let (ik, is) = (ms("ibkit", "kill"), ms("ibkit", "stop"));
    println!("OpenSM kill {ok:.0} ms, stop {os:.0} ms; ibkit kill {ik:.0} ms, stop {is:.0} ms");
    // ibkit: a poll interval (500 ms) and four tries of 200 ms, then a
    // bring-up of 14 nodes; a SIGTERM hands over at once.
    assert!(ik < 3000.0, "{ik}");
    assert!(is < 500.0, "{is}");
    // OpenSM does not hand over on SIGTERM: its standby waits for its
    // polls to fail, as after a SIGKILL.
    assert!(os > is && ok > ik, "{v}");
}
