//! `ibkit sm --config FILE`: a TOML file of the SM's settings. A broken
//! file is refused with its key and line before the fabric is touched;
//! the settings apply, relative paths are the file's, and a flag wins over
//! the file (checked on ibkit's served fabric, where the SM's JSON report
//! says what it ran with).

use std::path::Path;
use std::process::Command;
use tests::peers::Served;

fn ibkit(args: &[&str], socket: Option<&str>) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ibkit"));
    c.args(args).env_remove("IBSIM_SOCKNAME");
    if let Some(s) = socket {
        c.env("IBSIM_SOCKNAME", s);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_broken_configuration_is_refused_with_its_key_and_line() {
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("sm.toml");
    for (text, want) in [
        ("priority = 5\nlog_file = \"/var/log/sm\"\n", "line 2"),
        ("priority = 5\n\nrouting = \"dor\"\n", "line 3"),
        ("priority = 16\n", "0-15"),
        ("sweep_ms = \"often\"\n", "line 1"),
        ("[sm]\npriority = 1\n", "line 1"),
    ] {
        std::fs::write(&f, text).unwrap();
        let (code, out, err) = ibkit(&["sm", "--once", "--config", f.to_str().unwrap()], None);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains("config: ") && err.contains(want),
            "{text}: {err}"
        );
    }
    let (code, _, err) = ibkit(&["sm", "--once", "--config", "/nonexistent/sm.toml"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/sm.toml"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_file_applies_and_a_flag_wins() {
    let exe = Path::new(env!("CARGO_BIN_EXE_ibkit"));
    let dir = std::env::temp_dir().join(format!("ibkit-smconf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A partition file named relative to the configuration.
    std::fs::write(dir.join("parts.conf"), "Default=0x7fff:ALL=full;\n").unwrap();
    let f = dir.join("sm.toml");
    std::fs::write(
        &f,
        "priority = 5\nrouting = \"updn\"\npartitions = \"parts.conf\"\nlog_level = \"warn\"\n",
    )
    .unwrap();
    let conf = f.to_str().unwrap();
    let served = Served::start(exe, "mport-ntree:4:2", 0, &[]).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["sm", "--once", "--json", "--config", conf];
        args.extend_from_slice(extra);
        let (code, out, err) = ibkit(&args, Some(served.socket()));
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let v = run(&[]);
    assert_eq!(v["priority"], 5);
    assert_eq!(v["up"], true);
    let v = run(&["--priority", "7"]);
    assert_eq!(v["priority"], 7, "the flag wins");
    // A partition file the configuration names and that is broken: refused.
    std::fs::write(dir.join("parts.conf"), "Default=0xZZ:ALL=full;\n").unwrap();
    let mut args = vec!["sm", "--once", "--config", conf];
    args.push("--json");
    let (code, _, err) = ibkit(&args, Some(served.socket()));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("parts.conf"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
