//! `ibkit bench election`: how long a subnet is without a working master
//! when its master dies (SIGKILL) or is stopped (SIGTERM), with a standby
//! of the same kind beside it — OpenSM and ibkit's SM, one after the
//! other on fresh ibsims of the same fabric, in the same run. The clock
//! stops when `sminfo` (infiniband-diags), asked every 50 ms from a third
//! host, names the standby as master: the master SM LID every port holds
//! points at it and it answers as master.

use ::tests::peers::{start_opensm_at, Ibsim, RunningSm, WatchedSm};
use fabric::topology::Topology;
use std::path::Path;
use std::time::{Duration, Instant};

/// Options of `ibkit bench election`.
#[derive(Clone, Debug, clap::Args)]
pub struct ElectionArgs {
    /// The fabric: a topology spec.
    #[arg(long, default_value = "fat-tree-324", help = super::args::TOPOLOGY_HELP)]
    pub topology: String,
    /// OpenSM's sminfo_polling_timeout in ms (written to an opensm.conf it
    /// reads); OpenSM's default (10,000) when not given. ibkit's standby
    /// polls every 500 ms.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub opensm_poll_ms: Option<u64>,
    /// Seconds to wait for a new master before calling it failed.
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub wait_s: u64,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

/// One scenario's result.
#[derive(Clone, Debug)]
pub struct Takeover {
    /// `opensm` or `ibkit`.
    pub sm: &'static str,
    /// `kill` (SIGKILL) or `stop` (SIGTERM).
    pub event: &'static str,
    /// Milliseconds from the signal until sminfo named the standby
    /// master; `null` if it did not within the wait.
    pub new_master_ms: Option<f64>,
}

/// The whole run.
#[derive(Clone, Debug)]
pub struct ElectionBench {
    /// The fabric.
    pub topology: String,
    /// OpenSM's polling timeout, if set.
    pub opensm_poll_ms: Option<u64>,
    /// Every scenario.
    pub runs: Vec<Takeover>,
}

enum Sm {
    OpenSm(RunningSm),
    Ibkit(WatchedSm),
}

impl Sm {
    fn pid(&self) -> u32 {
        match self {
            Sm::OpenSm(s) => s.pid(),
            Sm::Ibkit(w) => w.sm.pid(),
        }
    }
}

/// Starts an SM of `kind` at `host` with `priority`, once its log says
/// `marker`.
fn start(
    kind: &str,
    sim: &Ibsim,
    host: &str,
    dir: &Path,
    priority: u8,
    marker: &str,
    a: &ElectionArgs,
) -> Result<Sm, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let wait = Duration::from_secs(a.wait_s);
    let p = priority.to_string();
    if kind == "ibkit" {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut w = WatchedSm::start(&exe, sim, host, &["--priority", &p])?;
        w.wait_for(marker, wait)?;
        return Ok(Sm::Ibkit(w));
    }
    let mut extra = vec!["-p".to_string(), p];
    if let Some(ms) = a.opensm_poll_ms {
        let conf = dir.join("opensm.conf");
        std::fs::write(&conf, format!("sminfo_polling_timeout {ms}\n"))
            .map_err(|e| e.to_string())?;
        extra.extend(["-F".to_string(), conf.display().to_string()]);
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    Ok(Sm::OpenSm(start_opensm_at(
        sim, host, dir, wait, &extra, marker,
    )?))
}

/// The master's port GUID and state as `sminfo` from `host` reads them.
fn sminfo(sim: &Ibsim, host: &str) -> Option<(u64, u8)> {
    let s = ::tests::peers::sminfo(sim, host, &["-t", "100"]).ok()?;
    Some((s.guid, s.state))
}

fn one(
    kind: &'static str,
    event: &'static str,
    topo: &Topology,
    a: &ElectionArgs,
) -> Result<Takeover, String> {
    let dir = std::env::temp_dir().join(format!(
        "ibkit-bench-election-{kind}-{event}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let hosts: Vec<(&str, u64)> = (topo.nodes.iter())
        .filter(|n| n.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|n| (n.name.as_str(), n.guid + 1))
        .collect();
    if hosts.len() < 3 {
        return Err(format!("{}: fewer than 3 hosts", a.topology));
    }
    let sim = Ibsim::start_with(topo, &dir, false)?;
    let master = start(kind, &sim, hosts[0].0, &dir.join("a"), 10, "SUBNET UP", a)?;
    let standby = start(
        kind,
        &sim,
        hosts[1].0,
        &dir.join("b"),
        1,
        "Entering STANDBY state",
        a,
    )?;
    // The standby's first polls answered.
    std::thread::sleep(Duration::from_secs(1));
    if sminfo(&sim, hosts[2].0) != Some((hosts[0].1, 3)) {
        return Err(format!(
            "{kind}: the first SM is not master before the {event}"
        ));
    }
    let sig = if event == "kill" { "-KILL" } else { "-TERM" };
    let t = Instant::now();
    std::process::Command::new("kill")
        .args([sig, &master.pid().to_string()])
        .status()
        .map_err(|e| e.to_string())?;
    let wait = Duration::from_secs(a.wait_s);
    let new_master_ms = loop {
        if sminfo(&sim, hosts[2].0) == Some((hosts[1].1, 3)) {
            break Some(t.elapsed().as_secs_f64() * 1e3);
        }
        if t.elapsed() > wait {
            break None;
        }
        // sminfo's own run (about 10 ms) paces the loop: a longer
        // sleep would round every takeover up to it.
        std::thread::sleep(Duration::from_millis(2));
    };
    drop(standby);
    drop(master);
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Takeover {
        sm: kind,
        event,
        new_master_ms,
    })
}

/// Runs `ibkit bench election`.
pub fn run(a: &ElectionArgs) -> super::Outcome {
    let topo = Topology::from_spec(&a.topology).map_err(|e| e.to_string())?;
    if let Some(why) = ::tests::peers::missing_tools() {
        return Err(super::Fail::Check(format!(
            "bench election needs ibsim and OpenSM: {why}"
        )));
    }
    if !Path::new("/usr/sbin/sminfo").exists() {
        return Err(super::Fail::Check(
            "bench election reads the master with sminfo: install infiniband-diags".into(),
        ));
    }
    let bar = super::args::Progress::new(4, a.json);
    let mut runs = Vec::new();
    for event in ["kill", "stop"] {
        for kind in ["opensm", "ibkit"] {
            let done = if event == "kill" { "killed" } else { "stopped" };
            bar.line(&format!("{kind}: master {done}, standby beside it"));
            runs.push(one(kind, event, &topo, a)?);
            bar.step();
        }
    }
    bar.finish();
    let b = ElectionBench {
        topology: a.topology.clone(),
        opensm_poll_ms: a.opensm_poll_ms,
        runs,
    };
    if a.json {
        let runs: Vec<serde_json::Value> = (b.runs.iter())
            .map(|r| serde_json::json!({"sm": r.sm, "event": r.event, "new_master_ms": r.new_master_ms}))
            .collect();
        let v = serde_json::json!({
            "topology": b.topology,
            "opensm_poll_ms": b.opensm_poll_ms,
            "runs": runs,
        });
        println!("{v}");
    } else {
        print(&b);
    }
    let failed: Vec<String> = (b.runs.iter())
        .filter(|r| r.sm == "ibkit" && r.new_master_ms.is_none())
        .map(|r| format!("{} {}", r.sm, r.event))
        .collect();
    super::check(failed.is_empty(), || {
        format!("no new master within {} s: {}", a.wait_s, failed.join(", "))
    })
}

fn print(b: &ElectionBench) {
    let ms = |sm: &str, ev: &str| {
        (b.runs.iter())
            .find(|r| r.sm == sm && r.event == ev)
            .and_then(|r| r.new_master_ms)
    };
    println!(
        "{}: a master (priority 10) and a standby (priority 1) of one kind on ibsim; \
         ms until sminfo names the standby master (OpenSM polls every {})",
        b.topology,
        b.opensm_poll_ms
            .map_or("10,000 ms, its default".into(), |m| format!("{m} ms"))
    );
    println!(
        "{:<28} {:>12} {:>12} {:>10}",
        "event", "OpenSM", "ibkit", "ratio"
    );
    for (ev, name) in [
        ("kill", "master killed (SIGKILL)"),
        ("stop", "master stopped (SIGTERM)"),
    ] {
        let (o, i) = (ms("opensm", ev), ms("ibkit", ev));
        let f = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.0}"));
        let ratio = match (o, i) {
            (Some(o), Some(i)) if i > 0.0 => format!("{:.0}×", o / i),
            _ => "-".into(),
        };
        println!("{name:<28} {:>12} {:>12} {:>10}", f(o), f(i), ratio);
    }
}
