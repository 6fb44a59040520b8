//! `ibkit bench ibsim-compat`: the same clients on Debian's ibsim and on
//! `ibkit fabric serve`, in one run — OpenSM (`opensm -o`) and ibkit's SM
//! (`ibkit sm --once`) bringing the same fabric up through
//! `libumad2sim.so` — with the time to a routed subnet, the SMP rate and
//! each simulator's CPU per SMP, as medians over several runs.
//!
//! Each run starts a fresh simulator, so every client meets an
//! unconfigured fabric. The timed ibsim runs are not verbose (its logging
//! would slow it down); ibsim's SMP count comes from one extra verbose
//! run per client.

use crate::cmd::bench::{cpu_ms, missing_tools, run_opensm_on, Ibsim, Served, Simulator};
use fabric::topology::Topology;
use serde_json::json;
use smi::sm::Engine;
use std::path::Path;
use std::time::Instant;

/// One client's run on one simulator.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// Milliseconds from the start of the sweep to the subnet up (the
    /// client's own account: OpenSM's log, ibkit's `up_ms`).
    pub to_up_ms: f64,
    /// Wall milliseconds of the client process.
    pub wall_ms: f64,
    /// CPU milliseconds the simulator spent meanwhile.
    pub sim_cpu_ms: f64,
    /// SMPs answered (0 where the simulator did not count them).
    pub smps: u64,
}

/// Medians of several [`Sample`]s plus the SMP count.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    /// Median milliseconds to the subnet up.
    pub to_up_ms: f64,
    /// Median wall milliseconds of the client.
    pub wall_ms: f64,
    /// Median simulator CPU milliseconds.
    pub sim_cpu_ms: f64,
    /// SMPs answered in a bring-up.
    pub smps: u64,
}

impl Summary {
    /// SMPs per second to the subnet up.
    pub fn rate(&self) -> f64 {
        self.smps as f64 / (self.to_up_ms / 1e3)
    }

    /// Simulator CPU microseconds per SMP.
    pub fn cpu_us_per_smp(&self) -> f64 {
        self.sim_cpu_ms * 1e3 / self.smps as f64
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn summarize(samples: &[Sample], smps: u64) -> Summary {
    Summary {
        to_up_ms: median(samples.iter().map(|s| s.to_up_ms).collect()),
        wall_ms: median(samples.iter().map(|s| s.wall_ms).collect()),
        sim_cpu_ms: median(samples.iter().map(|s| s.sim_cpu_ms).collect()),
        smps,
    }
}

/// Which client brings the fabric up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// `opensm -o`.
    OpenSm,
    /// `ibkit sm --once`.
    Ibkit,
}

/// Runs `client` with `routing` on `sim`; logs into `dir`.
pub fn run_client(
    exe: &Path,
    sim: &dyn Simulator,
    client: Client,
    routing: Engine,
    dir: &Path,
) -> Result<Sample, String> {
    let cpu0 = cpu_ms(sim.pid()).unwrap_or(0.0);
    let s = match client {
        Client::OpenSm => {
            let o = run_opensm_on(sim, routing, dir)?;
            if !o.up {
                return Err("OpenSM did not report SUBNET UP".into());
            }
            Sample {
                to_up_ms: o.to_up_ms,
                wall_ms: o.wall_ms,
                sim_cpu_ms: 0.0,
                smps: o.smps,
            }
        }
        Client::Ibkit => {
            let t = Instant::now();
            let out = sim
                .client(exe.as_os_str())
                .args(["sm", "--once", "--json", "--routing", routing.name()])
                .output()
                .map_err(|e| format!("ibkit sm: {e}"))?;
            let wall_ms = t.elapsed().as_secs_f64() * 1e3;
            if !out.status.success() {
                return Err(format!(
                    "ibkit sm failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            let v: serde_json::Value =
                serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
            if v["up"] != true {
                return Err("ibkit sm did not bring the subnet up".into());
            }
            Sample {
                to_up_ms: v["up_ms"].as_f64().unwrap_or(f64::NAN),
                wall_ms,
                sim_cpu_ms: 0.0,
                smps: sim.answered().unwrap_or(v["smps"].as_u64().unwrap_or(0)),
            }
        }
    };
    Ok(Sample {
        sim_cpu_ms: cpu_ms(sim.pid()).unwrap_or(f64::NAN) - cpu0,
        ..s
    })
}

/// The comparison of one client on both simulators.
#[derive(Clone, Copy, Debug)]
pub struct Compared {
    /// The client.
    pub client: Client,
    /// On ibsim.
    pub ibsim: Summary,
    /// On `ibkit fabric serve`.
    pub ibkit: Summary,
}

/// Runs `client` `runs` times on each simulator, alternating, plus one
/// verbose ibsim run to count its SMPs.
pub fn compare(
    exe: &Path,
    spec: &str,
    client: Client,
    routing: Engine,
    runs: usize,
    dir: &Path,
    progress: bool,
) -> Result<Compared, String> {
    let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
    let (mut on_ibsim, mut on_ibkit) = (Vec::new(), Vec::new());
    for run in 0..runs {
        if progress {
            eprintln!("  {client:?}, run {}/{runs}: ibsim…", run + 1);
        }
        let sim = Ibsim::start_with(&topo, dir, false)?;
        on_ibsim.push(run_client(exe, &sim, client, routing, dir)?);
        drop(sim);
        if progress {
            eprintln!("  {client:?}, run {}/{runs}: ibkit fabric serve…", run + 1);
        }
        let served = Served::start(exe, spec, 0, &[])?;
        on_ibkit.push(run_client(exe, &served, client, routing, dir)?);
    }
    if progress {
        eprintln!("  {client:?}: counting ibsim's replies (verbose ibsim)…");
    }
    let counted = {
        let sim = Ibsim::start_with(&topo, dir, true)?;
        run_client(exe, &sim, client, routing, dir)?.smps
    };
    let ibkit_smps = on_ibkit.first().map_or(0, |s| s.smps);
    Ok(Compared {
        client,
        ibsim: summarize(&on_ibsim, counted),
        ibkit: summarize(&on_ibkit, ibkit_smps),
    })
}

/// Runs `ibkit bench ibsim-compat`.
pub fn run(spec: &str, routing: Engine, runs: usize, json: bool) -> Result<bool, String> {
    if let Some(m) = missing_tools() {
        return Err(m);
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("ibkit-compat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let runs = runs.max(1);
    if !json {
        eprintln!(
            "{spec}: {} switches, {} CAs; {runs} run(s) per simulator, routing {}",
            topo.switches(),
            topo.cas(),
            routing.name()
        );
    }
    let result = [Client::OpenSm, Client::Ibkit]
        .into_iter()
        .map(|c| compare(&exe, spec, c, routing, runs, &dir, !json))
        .collect::<Result<Vec<_>, _>>();
    let _ = std::fs::remove_dir_all(&dir);
    let result = result?;
    if json {
        let side = |s: &Summary| {
            json!({"smps": s.smps, "to_up_ms": s.to_up_ms, "wall_ms": s.wall_ms,
                   "smps_per_s": s.rate(), "sim_cpu_ms": s.sim_cpu_ms,
                   "sim_cpu_us_per_smp": s.cpu_us_per_smp()})
        };
        let v: Vec<_> = result
            .iter()
            .map(|c| {
                json!({
                    "client": match c.client { Client::OpenSm => "opensm", Client::Ibkit => "ibkit-sm" },
                    "ibsim": side(&c.ibsim),
                    "ibkit_serve": side(&c.ibkit),
                    "speedup_to_up": c.ibsim.to_up_ms / c.ibkit.to_up_ms,
                    "speedup_wall": c.ibsim.wall_ms / c.ibkit.wall_ms,
                })
            })
            .collect();
        println!(
            "{}",
            json!({"topology": spec, "routing": routing.name(), "runs": runs, "results": v})
        );
    } else {
        println!(
            "{spec}, routing {}, median of {runs} run(s); each client on a fresh simulator",
            routing.name()
        );
        println!(
            "{:<40} {:>12} {:>12} {:>8}",
            "", "ibsim", "ibkit serve", "ratio"
        );
        for c in &result {
            let name = match c.client {
                Client::OpenSm => "opensm -o",
                Client::Ibkit => "ibkit sm --once",
            };
            let row = |label: &str, a: f64, b: f64, ratio: f64| {
                println!(
                    "{:<40} {:>12.1} {:>12.1} {:>7.2}×",
                    format!("{name}: {label}"),
                    a,
                    b,
                    ratio
                );
            };
            println!(
                "{:<40} {:>12} {:>12}",
                format!("{name}: SMPs answered"),
                c.ibsim.smps,
                c.ibkit.smps
            );
            row(
                "ms to subnet up",
                c.ibsim.to_up_ms,
                c.ibkit.to_up_ms,
                c.ibsim.to_up_ms / c.ibkit.to_up_ms,
            );
            row(
                "wall ms (whole process)",
                c.ibsim.wall_ms,
                c.ibkit.wall_ms,
                c.ibsim.wall_ms / c.ibkit.wall_ms,
            );
            row(
                "SMPs per second",
                c.ibsim.rate(),
                c.ibkit.rate(),
                c.ibkit.rate() / c.ibsim.rate(),
            );
            row(
                "simulator CPU µs per SMP",
                c.ibsim.cpu_us_per_smp(),
                c.ibkit.cpu_us_per_smp(),
                c.ibsim.cpu_us_per_smp() / c.ibkit.cpu_us_per_smp(),
            );
        }
        println!("(ratio > 1: ibkit serve is faster or cheaper)");
    }
    Ok(true)
}
