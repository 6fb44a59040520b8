//! `ibkit bench opensm`: the same fabric brought up by OpenSM (Debian's
//! `opensm`, on Debian's `ibsim` through the `libumad2sim.so` preload) and
//! by ibkit's SM on ibkit's simulator, in one run: SMPs, time to a routed
//! subnet, and route computation time, with ratios.
//!
//! OpenSM's SMPs are counted as the responses ibsim sends back (`ibsim -v`
//! logs one line per reply; every Get and Set of a bring-up is answered).
//! Its times come from its log: the start of discovery ("Entering
//! DISCOVERING state"), the end of discovery ("Entering MASTER state"), the
//! end of routing ("… tables configured on all switches") and "SUBNET UP".

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::{to_ibnetdiscover, Topology};
use serde_json::json;
use smi::sm::{Engine, Sm, SmConfig};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The preload through which libibumad programs talk to ibsim.
pub const UMAD2SIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// What OpenSM did on ibsim.
#[derive(Clone, Debug, Default)]
pub struct OpenSmRun {
    /// SMPs answered by ibsim.
    pub smps: u64,
    /// Milliseconds from the start of discovery to SUBNET UP.
    pub to_up_ms: f64,
    /// Milliseconds of discovery.
    pub discovery_ms: f64,
    /// Milliseconds from the end of discovery to the tables computed.
    pub routing_ms: f64,
    /// Wall milliseconds of the whole `opensm -o` process.
    pub wall_ms: f64,
    /// OpenSM reported SUBNET UP.
    pub up: bool,
}

/// Why the OpenSM side could not run.
pub fn missing_tools() -> Option<String> {
    let have = |p: &str| Path::new(p).exists();
    let mut missing = Vec::new();
    if !have("/usr/bin/ibsim") {
        missing.push("ibsim (Debian package ibsim-utils)");
    }
    if !have(UMAD2SIM) {
        missing.push("libumad2sim.so (Debian package libumad2sim0)");
    }
    if !have("/usr/sbin/opensm") {
        missing.push("opensm (Debian package opensm)");
    }
    (!missing.is_empty()).then(|| format!("missing: {}", missing.join(", ")))
}

struct Ibsim {
    child: Child,
    log: PathBuf,
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_time(line: &str) -> Option<f64> {
    // "Nov 22 16:44:02 939450 [..." → seconds of the day, with µs.
    let mut it = line.split_whitespace();
    let (_, _, hms, us) = (it.next()?, it.next()?, it.next()?, it.next()?);
    let mut p = hms.split(':').map(|x| x.parse::<f64>().ok());
    let (h, m, s) = (p.next()??, p.next()??, p.next()??);
    let us: f64 = us.parse().ok()?;
    Some(((h * 60.0 + m) * 60.0 + s) * 1e3 + us / 1e3)
}

/// Runs `opensm -o` with `routing` on `topo` served by ibsim, in `dir`.
pub fn run_opensm(topo: &Topology, routing: Engine, dir: &Path) -> Result<OpenSmRun, String> {
    if let Some(m) = missing_tools() {
        return Err(m);
    }
    let net = dir.join("fabric.net");
    std::fs::write(&net, to_ibnetdiscover(topo)).map_err(|e| e.to_string())?;
    let sock = format!("ibkit{}", std::process::id());
    let log = dir.join("ibsim.log");
    let n = topo.nodes.len() + 16;
    let ports = topo
        .nodes
        .iter()
        .map(|x| usize::from(x.ports) + 1)
        .sum::<usize>()
        + 64;
    let child = Command::new("ibsim")
        .args(["-s", "-n", "-v"])
        .args([
            "-N",
            &n.to_string(),
            "-S",
            &(topo.switches() + 16).to_string(),
        ])
        .args(["-P", &ports.to_string()])
        .arg(&net)
        .env("IBSIM_SOCKNAME", &sock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("ibsim: {e}"))?;
    let sim = Ibsim { child, log };
    // Wait until ibsim has read the fabric and listens.
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&sim.log).unwrap_or_default();
        if text.contains("trap 128")
            || text.contains("listen")
            || t0.elapsed() > Duration::from_secs(2)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let host = topo
        .nodes
        .iter()
        .find(|x| x.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|x| x.name.clone())
        .ok_or("no CA")?;
    let osm_log = dir.join("opensm.log");
    let engine = match routing {
        Engine::MinHop => "minhop",
        Engine::UpDown => "updn",
        Engine::FatTree => "ftree",
    };
    let t = Instant::now();
    let out = Command::new("opensm")
        .args(["-o", "-f"])
        .arg(&osm_log)
        .args(["-R", engine])
        .env("LD_PRELOAD", UMAD2SIM)
        .env("IBSIM_SOCKNAME", &sock)
        .env("SIM_HOST", &host)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("opensm: {e}"))?;
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        return Err(format!(
            "opensm failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    std::thread::sleep(Duration::from_millis(100));
    let smps = BufReader::new(std::fs::File::open(&sim.log).map_err(|e| e.to_string())?)
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains("replying"))
        .count() as u64;
    let text = std::fs::read_to_string(&osm_log).map_err(|e| e.to_string())?;
    let find = |needle: &str| text.lines().find(|l| l.contains(needle)).and_then(log_time);
    let start = find("Entering DISCOVERING state");
    let master = find("Entering MASTER state");
    let routed = find("tables configured on all switches");
    let up = find("SUBNET UP");
    let d = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    };
    Ok(OpenSmRun {
        smps,
        to_up_ms: d(start, up),
        discovery_ms: d(start, master),
        routing_ms: d(master, routed),
        wall_ms,
        up: up.is_some(),
    })
}

/// ibkit's side: bring-up on the simulator and route computation alone.
pub struct IbkitRun {
    /// SMPs sent.
    pub smps: u64,
    /// Wall milliseconds of the bring-up on the simulator.
    pub bring_up_ms: f64,
    /// Simulated milliseconds to the subnet up.
    pub sim_ms: f64,
    /// Wall milliseconds of route computation alone.
    pub routing_ms: f64,
    /// Up and verified.
    pub ok: bool,
}

/// Brings `topo` up with ibkit's SM on the simulator.
pub fn run_ibkit(topo: Topology, routing: Engine) -> Result<IbkitRun, String> {
    let mut f = Fabric::new(topo, SimConfig::default())?;
    let mut sm = Sm::new(SmConfig {
        routing,
        ..SmConfig::default()
    });
    let t = Instant::now();
    let up = f.bring_up(&mut sm);
    let bring_up_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let _ = Sm::compute_routes(routing, sm.routing_graph(), sm.max_lid());
    let routing_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(IbkitRun {
        smps: sm.stats().total(),
        bring_up_ms,
        sim_ms: f.now_ns() as f64 / 1e6,
        routing_ms,
        ok: up,
    })
}

/// Runs `ibkit bench opensm`.
pub fn opensm(spec: &str, routing: Engine, json: bool) -> Result<bool, String> {
    let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("ibkit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    if !json {
        eprintln!("OpenSM on ibsim: {spec}, {routing:?}…");
    }
    let o = run_opensm(&topo, routing, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let o = o?;
    if !json {
        eprintln!("ibkit on its simulator…");
    }
    let k = run_ibkit(topo, routing)?;
    let r = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    if json {
        println!(
            "{}",
            json!({
                "topology": spec,
                "routing": format!("{routing:?}").to_lowercase(),
                "opensm": {"smps": o.smps, "to_up_ms": o.to_up_ms, "discovery_ms": o.discovery_ms, "routing_ms": o.routing_ms, "wall_ms": o.wall_ms, "up": o.up},
                "ibkit": {"smps": k.smps, "bring_up_wall_ms": k.bring_up_ms, "sim_ms": k.sim_ms, "routing_ms": k.routing_ms, "up": k.ok},
                "ratios": {"smps": r(k.smps as f64, o.smps as f64), "routing_speedup": r(o.routing_ms, k.routing_ms)},
            })
        );
    } else {
        println!("{spec}, routing {routing:?}");
        println!(
            "{:<34} {:>14} {:>14} {:>10}",
            "", "OpenSM 3.3.23", "ibkit", "ratio"
        );
        println!(
            "{:<34} {:>14} {:>14} {:>9.2}×",
            "SMPs to a routed subnet",
            o.smps,
            k.smps,
            r(k.smps as f64, o.smps as f64)
        );
        println!(
            "{:<34} {:>14.1} {:>14.1} {:>9.1}×",
            "route computation (ms)",
            o.routing_ms,
            k.routing_ms,
            r(o.routing_ms, k.routing_ms)
        );
        println!(
            "{:<34} {:>14.1} {:>14.1} {:>9.1}×",
            "wall to SUBNET UP (ms)",
            o.to_up_ms,
            k.bring_up_ms,
            r(o.to_up_ms, k.bring_up_ms)
        );
        println!(
            "(OpenSM runs on ibsim through libumad2sim; ibkit on its own simulator, {:.1} ms simulated; \
             OpenSM's SMPs are ibsim's replies)",
            k.sim_ms
        );
    }
    Ok(o.up && k.ok && k.smps <= o.smps)
}
