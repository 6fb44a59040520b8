//! ibsim, the simulator OpenSM is tested with, reads the topologies ibkit
//! writes: every fabric spec exported in ibnetdiscover format loads into
//! ibsim without a parse error, with the same number of nodes.

use fabric::topology::{to_ibnetdiscover, Topology};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn ibsim_available() -> bool {
    Command::new("sh")
        .args(["-c", "command -v ibsim"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Starts ibsim on `file` and collects its output until it is ready or fails.
fn load(file: &std::path::Path, sock: &str) -> String {
    let mut child = Command::new("ibsim")
        .args(["-N", "4096", "-S", "512", "-P", "20000", "-s"])
        .arg(file)
        .env("IBSIM_SOCKNAME", sock)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ibsim starts");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(l) => {
                log.push_str(&l);
                log.push('\n');
                if l.contains("simulator ready") {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    log + &err
}

#[test]
fn ibsim_loads_ibkits_topologies() {
    if !ibsim_available() {
        tests::skip(
            "ibsim topology",
            "ibsim not installed (apt install ibsim-utils)",
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("ibkit-ibsim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for spec in ["fat-tree-324", "mport-ntree:8:3", "random:50:3"] {
        let t = Topology::from_spec(spec).unwrap();
        let path = dir.join(format!("{}.topo", spec.replace(':', "_")));
        std::fs::write(&path, to_ibnetdiscover(&t)).unwrap();
        let log = load(&path, &format!("ibkit{}{}", std::process::id(), spec.len()));
        assert!(
            log.contains("simulator ready"),
            "{spec}: ibsim did not load it:\n{log}"
        );
        assert!(
            !log.contains("ibwarn")
                && !log.contains("ibpanic")
                && !log.to_lowercase().contains("error"),
            "{spec}:\n{log}"
        );
        // And our own reader takes the file back unchanged.
        let back = Topology::from_spec(&format!("file:{}", path.display())).unwrap();
        assert_eq!(
            (back.switches(), back.cas(), back.links()),
            (t.switches(), t.cas(), t.links()),
            "{spec}"
        );
    }
}
