//! `ibkit bench ibsim-compat`: the same clients on Debian's ibsim and on
//! `ibkit fabric serve`, in one run — OpenSM (`opensm -o`) and ibkit's SM
//! (`ibkit sm --once`) bringing the same fabric up through
//! `libumad2sim.so` — with the time to a routed subnet, the SMP rate and
//! each simulator's CPU per SMP, as medians over several runs. The runs
//! are [`tests::compat`]'s; this module prints them.

use super::args::Progress;
use ::tests::compat::{compare, sensitivity, Client, CompatReport, SensitivityReport};
use ::tests::peers::missing_tools;
use fabric::topology::Topology;
use smi::sm::Engine;

/// What both runs need: the peer tools, this binary, and a scratch
/// directory named `name` and the process ID.
fn prepare(name: &str) -> Result<(std::path::PathBuf, std::path::PathBuf), super::Fail> {
    if let Some(m) = missing_tools() {
        return Err(m.into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok((exe, dir))
}

/// Runs `ibkit bench ibsim-compat`.
pub fn run(spec: &str, routing: Engine, runs: usize, json: bool) -> super::Outcome {
    let (exe, dir) = prepare("ibkit-compat")?;
    let topo = Topology::from_spec(spec)?;
    let runs = runs.max(1);
    if !json {
        eprintln!(
            "{spec}: {} switches, {} CAs; {runs} run(s) per simulator, routing {}",
            topo.switches(),
            topo.cas(),
            routing.name()
        );
    }
    // Steps: each client's timed runs on both simulators and its counting
    // run.
    let bar = Progress::new(2 * (2 * runs as u64 + 1), json);
    let mut progress = |s: &str| {
        bar.step();
        bar.line(s);
    };
    let result = [Client::OpenSm, Client::Ibkit]
        .into_iter()
        .map(|c| compare(&exe, spec, c, routing, runs, &dir, &mut progress))
        .collect::<Result<Vec<_>, _>>();
    bar.finish();
    let _ = std::fs::remove_dir_all(&dir);
    let result = result?;
    if json {
        let r = CompatReport {
            topology: spec,
            routing: routing.name(),
            runs,
            results: &result,
        };
        println!("{}", serde_json::to_string(&r)?);
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
                c.speedup_to_up(),
            );
            row(
                "wall ms (whole process)",
                c.ibsim.wall_ms,
                c.ibkit.wall_ms,
                c.speedup_wall(),
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
    Ok(())
}

/// Runs `ibkit bench ibsim-compat --sensitivity DELAYS`.
pub fn run_sensitivity(
    spec: &str,
    routing: Engine,
    runs: usize,
    delays: &[u64],
    json: bool,
) -> super::Outcome {
    let (exe, dir) = prepare("ibkit-held")?;
    let bar = Progress::new(1 + (runs.max(1) * delays.len()) as u64, json);
    let mut progress = |s: &str| {
        bar.step();
        bar.line(s);
    };
    let s = sensitivity(
        &exe,
        spec,
        routing,
        runs.max(1),
        delays,
        &dir,
        &mut progress,
    );
    bar.finish();
    let _ = std::fs::remove_dir_all(&dir);
    let s = s?;
    if json {
        let r = SensitivityReport {
            topology: spec,
            routing: routing.name(),
            runs,
            sensitivity: &s,
        };
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "{spec}, routing {}, opensm -o on ibkit fabric serve, median of {runs} run(s) per delay",
        routing.name()
    );
    println!(
        "{:>16} {:>16} {:>9} {:>10} {:>16} {:>14}",
        "µs added/batch",
        "ms to subnet up",
        "batches",
        "SMPs/batch",
        "fabric µs/batch",
        "send µs/batch"
    );
    for h in &s.held {
        let (up, batches, per_batch, fabric, send) = h.medians();
        println!(
            "{:>16} {:>16.1} {:>9.0} {:>10.2} {:>16.2} {:>14.2}",
            h.delay_us, up, batches, per_batch, fabric, send
        );
    }
    println!(
        "OpenSM's time grows by {:.2} ms per µs added to every batch: {:.2} µs of its time per µs of the simulator's (1 = all of it on OpenSM's critical path).",
        s.slope_ms_per_us,
        s.critical_share()
    );
    println!(
        "The same line with a fabric that took no time at all: {:.1} ms, {:.2}× the time at no delay ({:.1} ms).",
        s.without_fabric_ms(),
        s.intercept_ms / s.without_fabric_ms(),
        s.intercept_ms
    );
    Ok(())
}
