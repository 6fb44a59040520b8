//! The simulator comparison behind `ibkit bench ibsim-compat`: the same
//! clients on Debian's ibsim and on `ibkit fabric serve`, in one run —
//! OpenSM (`opensm -o`) and ibkit's SM (`ibkit sm --once`) bringing the
//! same fabric up through `libumad2sim.so` — with the time to a routed
//! subnet, the SMP rate and each simulator's CPU per SMP, as medians over
//! several runs; and how much of OpenSM's time is the simulator's
//! ([`sensitivity`]).
//!
//! Each run starts a fresh simulator, so every client meets an
//! unconfigured fabric. The timed ibsim runs are not verbose (its logging
//! would slow it down); ibsim's SMP count comes from one extra verbose
//! run per client.

use crate::peers::{cpu_ms, run_ibkit_sm_on, run_opensm_on, Ibsim, Served, Simulator};
use fabric::topology::Topology;
use serde::ser::{Serialize, SerializeStruct, Serializer};
use smi::sm::Engine;
use std::path::Path;
use vhca::bench::median;

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

impl Serialize for Summary {
    /// The medians with the rate and the CPU per SMP.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Summary", 6)?;
        st.serialize_field("smps", &self.smps)?;
        st.serialize_field("to_up_ms", &self.to_up_ms)?;
        st.serialize_field("wall_ms", &self.wall_ms)?;
        st.serialize_field("smps_per_s", &self.rate())?;
        st.serialize_field("sim_cpu_ms", &self.sim_cpu_ms)?;
        st.serialize_field("sim_cpu_us_per_smp", &self.cpu_us_per_smp())?;
        st.end()
    }
}

/// The medians of `samples`, with `smps` counted elsewhere.
pub fn summarize(samples: &[Sample], smps: u64) -> Summary {
    Summary {
        to_up_ms: median(&mut samples.iter().map(|s| s.to_up_ms).collect::<Vec<_>>()),
        wall_ms: median(&mut samples.iter().map(|s| s.wall_ms).collect::<Vec<_>>()),
        sim_cpu_ms: median(&mut samples.iter().map(|s| s.sim_cpu_ms).collect::<Vec<_>>()),
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
            let (v, wall_ms) = run_ibkit_sm_on(exe, sim, routing)?;
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

impl Compared {
    /// How many times faster the client reached SUBNET UP on `ibkit
    /// fabric serve` than on ibsim.
    pub fn speedup_to_up(&self) -> f64 {
        self.ibsim.to_up_ms / self.ibkit.to_up_ms
    }

    /// The same for the client's whole process.
    pub fn speedup_wall(&self) -> f64 {
        self.ibsim.wall_ms / self.ibkit.wall_ms
    }
}

impl Serialize for Compared {
    /// Both sides and the speed-ups.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Compared", 5)?;
        let client = match self.client {
            Client::OpenSm => "opensm",
            Client::Ibkit => "ibkit-sm",
        };
        st.serialize_field("client", client)?;
        st.serialize_field("ibsim", &self.ibsim)?;
        st.serialize_field("ibkit_serve", &self.ibkit)?;
        st.serialize_field("speedup_to_up", &self.speedup_to_up())?;
        st.serialize_field("speedup_wall", &self.speedup_wall())?;
        st.end()
    }
}

/// `ibkit bench ibsim-compat --json`: the fabric and every client's
/// comparison.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CompatReport<'a> {
    /// The topology spec.
    pub topology: &'a str,
    /// The routing engine of both clients.
    pub routing: &'static str,
    /// Runs per client and simulator.
    pub runs: usize,
    /// One per client.
    pub results: &'a [Compared],
}

/// `ibkit bench ibsim-compat --sensitivity --json`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SensitivityReport<'a> {
    /// The topology spec.
    pub topology: &'a str,
    /// OpenSM's routing engine.
    pub routing: &'static str,
    /// Runs per delay.
    pub runs: usize,
    /// The runs and the line through them.
    #[serde(flatten)]
    pub sensitivity: &'a Sensitivity,
}

/// Runs `client` `runs` times on each simulator, alternating, plus one
/// verbose ibsim run to count its SMPs; `progress` hears each run start.
pub fn compare(
    exe: &Path,
    spec: &str,
    client: Client,
    routing: Engine,
    runs: usize,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Compared, String> {
    let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
    let (mut on_ibsim, mut on_ibkit) = (Vec::new(), Vec::new());
    for run in 0..runs {
        progress(&format!("  {client:?}, run {}/{runs}: ibsim…", run + 1));
        let sim = Ibsim::start_with(&topo, dir, false)?;
        on_ibsim.push(run_client(exe, &sim, client, routing, dir)?);
        drop(sim);
        progress(&format!(
            "  {client:?}, run {}/{runs}: ibkit fabric serve…",
            run + 1
        ));
        let served = Served::start(exe, spec, 0, &[])?;
        on_ibkit.push(run_client(exe, &served, client, routing, dir)?);
    }
    progress(&format!(
        "  {client:?}: counting ibsim's replies (verbose ibsim)…"
    ));
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

/// OpenSM on `ibkit fabric serve` with every batch of answers held
/// `delay_us` longer: one entry of [`Sensitivity`].
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Held {
    /// Microseconds added to every batch (`--answer-delay-us`).
    pub delay_us: u64,
    /// Milliseconds to SUBNET UP, one per run.
    pub to_up_ms: Vec<f64>,
    /// Batches the server answered, one per run.
    pub batches: Vec<u64>,
    /// SMPs the server answered, one per run.
    pub answered: Vec<u64>,
    /// Server microseconds per batch from reading it to its answers ready
    /// (the fabric's hops and agents), one per run.
    #[serde(rename = "fabric_us_per_batch")]
    pub fabric_us: Vec<f64>,
    /// Server microseconds per batch handing the answers to the kernel,
    /// one per run.
    #[serde(rename = "send_us_per_batch")]
    pub send_us: Vec<f64>,
}

/// How much of OpenSM's bring-up time is the simulator's: OpenSM's time
/// to SUBNET UP on `ibkit fabric serve` at several answer delays, and the
/// line through them.
#[derive(Clone, Debug)]
pub struct Sensitivity {
    /// One entry per delay, in the order asked.
    pub held: Vec<Held>,
    /// Least-squares slope of the time to SUBNET UP over the delay added
    /// to every batch: milliseconds per microsecond.
    pub slope_ms_per_us: f64,
    /// The line's value at no delay, ms.
    pub intercept_ms: f64,
}

impl Sensitivity {
    /// The runs at the smallest delay, the closest to an unhindered server.
    pub fn base(&self) -> Option<&Held> {
        self.held.iter().min_by_key(|h| h.delay_us)
    }

    /// Microseconds of OpenSM's time per microsecond added to each batch:
    /// 1 when every batch's time is on OpenSM's critical path.
    pub fn critical_share(&self) -> f64 {
        let batches = self.base().map_or(f64::NAN, |h| {
            median(&mut h.batches.iter().map(|&b| b as f64).collect::<Vec<_>>())
        });
        self.slope_ms_per_us * 1e3 / batches
    }

    /// OpenSM's time by the same line if the fabric took no time at all
    /// (its per-batch time at the smallest delay taken away), ms.
    pub fn without_fabric_ms(&self) -> f64 {
        let fabric = self
            .base()
            .map_or(f64::NAN, |h| median(&mut h.fabric_us.clone()));
        self.intercept_ms - self.slope_ms_per_us * fabric
    }
}

impl Serialize for Sensitivity {
    /// The runs, the line, and what it says.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Sensitivity", 5)?;
        st.serialize_field("held", &self.held)?;
        st.serialize_field("slope_ms_per_us", &self.slope_ms_per_us)?;
        st.serialize_field("intercept_ms", &self.intercept_ms)?;
        st.serialize_field("critical_share", &self.critical_share())?;
        st.serialize_field("without_fabric_ms", &self.without_fabric_ms())?;
        st.end()
    }
}

impl Held {
    /// The medians of the runs: (ms to SUBNET UP, batches, SMPs per
    /// batch, fabric µs per batch, send µs per batch).
    pub fn medians(&self) -> (f64, f64, f64, f64, f64) {
        let med = |v: &[f64]| median(&mut v.to_vec());
        let medu = |v: &[u64]| median(&mut v.iter().map(|&x| x as f64).collect::<Vec<_>>());
        (
            med(&self.to_up_ms),
            medu(&self.batches),
            medu(&self.answered) / medu(&self.batches),
            med(&self.fabric_us),
            med(&self.send_us),
        )
    }
}

/// Least squares through `(x, y)` points: (slope, intercept).
pub fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = sxy / sxx;
    (slope, my - slope * mx)
}

/// Runs `opensm -o` on `ibkit fabric serve` `runs` times at each of
/// `delays` (µs added to every batch of answers), after one untimed run,
/// the delays taking turns so that drift of the machine hits them alike.
pub fn sensitivity(
    exe: &Path,
    spec: &str,
    routing: Engine,
    runs: usize,
    delays: &[u64],
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Sensitivity, String> {
    let distinct = {
        let mut d = delays.to_vec();
        d.sort_unstable();
        d.dedup();
        d.len()
    };
    if distinct < 2 {
        return Err("--sensitivity needs at least two different delays".into());
    }
    let mut held: Vec<Held> = delays
        .iter()
        .map(|&delay_us| Held {
            delay_us,
            ..Held::default()
        })
        .collect();
    // One untimed run first: the first OpenSM of a series is the slowest
    // (caches cold), and would bend the line at whichever delay came first.
    progress("  opensm on ibkit fabric serve, a warm-up run…");
    run_opensm_on(&Served::start(exe, spec, 0, &[])?, routing, dir)?;
    for run in 0..runs {
        for h in held.iter_mut() {
            progress(&format!(
                "  opensm on ibkit fabric serve, {} µs added per batch, run {}/{runs}…",
                h.delay_us,
                run + 1
            ));
            let delay = h.delay_us.to_string();
            let served = Served::start(exe, spec, 0, &["--answer-delay-us", &delay])?;
            let o = run_opensm_on(&served, routing, dir)?;
            if !o.up {
                return Err("OpenSM did not report SUBNET UP".into());
            }
            let st = served.stats()?;
            let count = |k: &str| st[k].as_u64().unwrap_or(0);
            let batches = count("batches").max(1);
            h.to_up_ms.push(o.to_up_ms);
            h.batches.push(batches);
            h.answered.push(count("answered"));
            h.fabric_us
                .push(count("fabric_ns") as f64 / 1e3 / batches as f64);
            h.send_us
                .push(count("send_ns") as f64 / 1e3 / batches as f64);
        }
    }
    let points: Vec<(f64, f64)> = held
        .iter()
        .flat_map(|h| h.to_up_ms.iter().map(|&t| (h.delay_us as f64, t)))
        .collect();
    let (slope_ms_per_us, intercept_ms) = fit(&points);
    Ok(Sensitivity {
        held,
        slope_ms_per_us,
        intercept_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_through_the_runs_and_what_it_says() {
        // Two runs per delay around y = 400 + 7x.
        let pts = [(0.0, 399.0), (0.0, 401.0), (20.0, 538.0), (20.0, 542.0)];
        let (slope, icept) = fit(&pts);
        assert!((slope - 7.0).abs() < 1e-9 && (icept - 400.0).abs() < 1e-9);
        let held = |delay_us, batches, fabric| Held {
            delay_us,
            to_up_ms: vec![],
            batches: vec![batches, batches],
            answered: vec![],
            fabric_us: vec![fabric, fabric],
            send_us: vec![],
        };
        let s = Sensitivity {
            held: vec![held(20, 9_000, 5.0), held(0, 10_000, 5.0)],
            slope_ms_per_us: slope,
            intercept_ms: icept,
        };
        // 7 ms per µs over 10,000 batches: 0.7 µs of the client's time per
        // µs of the simulator's.
        assert!((s.critical_share() - 0.7).abs() < 1e-9);
        // Without the 5 µs of fabric per batch: 400 - 7 × 5.
        assert!((s.without_fabric_ms() - 365.0).abs() < 1e-9);
    }
}
