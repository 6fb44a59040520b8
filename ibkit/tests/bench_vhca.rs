//! `ibkit bench vhca --quick` end to end: a backend here, two VMs in a
//! second `ibkit` process, every workload run; the data path sends no
//! command to the backend, events arrive, and the guests are torn down
//! leaving nothing on the device.

use std::process::{Command, Output};

/// `ibkit bench vhca ARGS`.
fn bench(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ibkit"))
        .args(["bench", "vhca"])
        .args(args)
        .output()
        .expect("ibkit runs")
}

/// The JSON object of a run that must succeed.
fn report(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn the_guest_process_runs_every_workload_without_backend_commands() {
    let v = report(&bench(&["--quick".as_ref(), "--json".as_ref()]));
    assert_eq!(v["data_path_commands"]["guest"], 0, "{v:#}");
    assert_eq!(v["data_path_commands"]["native"], 0, "{v:#}");
    assert!(v["data_path_messages"].as_u64().unwrap() > 1000, "{v:#}");
    let b = &v["backend"];
    assert_eq!(b["guests_torn_down"], 2, "{v:#}");
    assert_eq!(b["device_objects_left"], 0, "{v:#}");
    assert!(b["events"].as_u64().unwrap() > 0, "{v:#}");
    // Every workload has a positive result for every size, on both sides.
    for side in ["native", "guest"] {
        for key in [
            "send_latency_us",
            "write_latency_us",
            "send_bw_mbs",
            "write_bw_mbs",
            "reg_us",
        ] {
            let rows = v[side][key].as_array().expect(key);
            assert!(!rows.is_empty(), "{side} {key}");
            for r in rows {
                assert!(r[1].as_f64().unwrap() > 0.0, "{side} {key} {r}");
            }
        }
        assert!(v[side]["event_latency_us"].as_f64().unwrap() > 0.0);
    }
}

/// `--device` names an RDMA device; one that does not exist is a clear
/// error, not a panic or a run on the software HCA.
#[test]
fn a_missing_rdma_device_is_a_clear_error() {
    let out = bench(&["--quick", "--device", "no-such-hca"].map(AsRef::as_ref));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-hca") || err.contains("libibverbs"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Where `IBKIT_RDMA_DEVICE` names a device (scripts/rxe-tests sets it
/// inside its soft-RoCE VM), the bench runs over it: zero commands from
/// the data path and nothing left on the HCA.
#[test]
fn the_bench_runs_over_a_real_hca_where_one_is_named() {
    let Some(dev) = std::env::var_os("IBKIT_RDMA_DEVICE") else {
        eprintln!("SKIPPED: IBKIT_RDMA_DEVICE names no RDMA device");
        return;
    };
    let v = report(&bench(&[
        "--quick".as_ref(),
        "--json".as_ref(),
        "--device".as_ref(),
        dev.as_os_str(),
    ]));
    assert_eq!(v["data_path_commands"], 0, "{v:#}");
    assert_eq!(v["device_objects_left"], 0, "{v:#}");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 6, "{v:#}");
    for r in rows {
        assert!(r["native"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["guest"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(v["posted"].as_u64().unwrap() > 0, "{v:#}");
}
