//! `ibkit bench opensm`: the same fabric brought up by OpenSM (Debian's
//! `opensm`, on Debian's `ibsim` through the `libumad2sim.so` preload) and
//! by ibkit's SM on ibkit's simulator, in one run: SMPs, time to a routed
//! subnet, and route computation time, with ratios.
//!
//! The runs themselves are the peer harness of the `tests` crate
//! ([`tests::peers`]).

use super::args::{parse_engine, TOPOLOGY_HELP};
use ::tests::bench::opensm_vs_ibkit;
use ::tests::peers::Policy;
use smi::sm::Engine;
use std::path::PathBuf;

/// Runs `ibkit bench opensm`.
pub fn opensm(a: &OpensmArgs) -> super::Outcome {
    let (spec, routing, json) = (&a.topology[..], a.routing, a.json);
    // A broken partition file is refused before anything runs.
    if let Some(p) = &a.partitions {
        smd::read_partitions(p).map_err(|e| e.to_string())?;
    }
    // So are more joins than the fabric has hosts.
    if a.joins > 0 {
        let topo = fabric::topology::Topology::from_spec(spec).map_err(|e| e.to_string())?;
        ::tests::bench::join_hosts(&topo, usize::from(a.joins))?;
    }
    // The SMs run in scratch directories: the file by its full path.
    let partitions = (a.partitions.as_ref())
        .map(|p| std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display())))
        .transpose()?;
    let policy = Policy {
        partitions,
        qos: a.qos,
        lmc: a.lmc,
        lmc_esp0: a.lmc_esp0,
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let steps = if a.joins > 0 { 6 } else { 3 };
    let bar = super::args::Progress::new(steps, json);
    let mut started = false;
    let mut step = |s: &str| {
        if std::mem::replace(&mut started, true) {
            bar.step();
        }
        bar.line(s);
    };
    let mut b = opensm_vs_ibkit(&exe, spec, routing, &policy, &mut step)?;
    if a.joins > 0 {
        b.joins = Some(::tests::bench::join_workload(
            &exe,
            spec,
            &policy,
            usize::from(a.joins),
            &mut step,
        )?);
    }
    bar.finish();
    if json {
        println!("{}", serde_json::to_string(&b)?);
    } else {
        let (o, k, u, r) = (&b.opensm, &b.ibkit, &b.ibkit_on_ibsim, &b.ratios);
        println!(
            "{spec}, routing {routing:?}{}{}{}",
            a.partitions
                .as_ref()
                .map_or(String::new(), |p| format!(", partitions {}", p.display())),
            if a.qos {
                ", QoS (OpenSM's defaults)"
            } else {
                ""
            },
            match (a.lmc, a.lmc_esp0) {
                (0, _) => String::new(),
                (l, false) => format!(", LMC {l}"),
                (l, true) => format!(", LMC {l} (enhanced switch ports 0 too)"),
            }
        );
        println!(
            "{:<34} {:>14} {:>14} {:>10}",
            "", "OpenSM 3.3.23", "ibkit", "ratio"
        );
        println!(
            "{:<34} {:>14} {:>14} {:>9.2}×",
            "SMPs to a routed subnet", o.smps, k.smps, r.smps
        );
        println!(
            "{:<34} {:>14.1} {:>14.1} {:>9.1}×",
            "route computation (ms)", o.routing_ms, k.routing_ms, r.routing_speedup
        );
        println!(
            "{:<34} {:>14.1} {:>14.1} {:>9.1}×",
            "wall to SUBNET UP (ms)",
            o.to_up_ms,
            k.bring_up_ms,
            o.to_up_ms / k.bring_up_ms
        );
        println!("both on ibsim (ibkit sm --once through libumad2sim):");
        println!(
            "{:<34} {:>14} {:>14} {:>9.2}×",
            "  SMPs answered by ibsim",
            o.smps,
            u.ibsim_replies,
            u.ibsim_replies as f64 / o.smps as f64
        );
        println!(
            "{:<34} {:>14.1} {:>14.1} {:>9.1}×",
            "  wall to SUBNET UP (ms)",
            o.to_up_ms,
            u.to_up_ms,
            o.to_up_ms / u.to_up_ms
        );
        println!(
            "(OpenSM runs on ibsim through libumad2sim; ibkit on its own simulator, {:.1} ms simulated; \
             OpenSM's SMPs are ibsim's replies)",
            k.sim_ms
        );
        if let Some(j) = &b.joins {
            let all = |v: &[u64]| v.iter().sum::<u64>();
            let each = |v: &[u64]| {
                v.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            println!(
                "{} hosts join {} one after another ({}):",
                j.hosts.len(),
                ::tests::bench::IPOIB_BROADCAST,
                j.hosts.join(", ")
            );
            println!(
                "{:<34} {:>14} {:>14} {:>14}",
                "", "OpenSM 3.3.23", "ibkit, ibsim", "ibkit, own"
            );
            println!(
                "{:<34} {:>14} {:>14} {:>14}",
                "SMPs in all",
                all(&j.opensm),
                all(&j.ibkit_on_ibsim),
                all(&j.ibkit)
            );
            println!("SMPs, join by join:");
            for (who, v) in [
                ("OpenSM 3.3.23", &j.opensm),
                ("ibkit, ibsim", &j.ibkit_on_ibsim),
                ("ibkit, own", &j.ibkit),
            ] {
                println!("  {who:<14} {}", each(v));
            }
            println!(
                "(own fabric: {} Set(MFT), {} Set(SwitchInfo) for MulticastFDBTop; a packet from each member \
                 reached every other once: {})",
                j.ibkit_mft_sets,
                j.ibkit_switch_info_sets,
                if j.ibkit_reached { "yes" } else { "NO" }
            );
        }
    }
    match b.failure() {
        Some(e) => Err(super::Fail::Check(e)),
        None => Ok(()),
    }
}

/// Runs `ibkit bench sa --all-pairs`.
fn sa_all_pairs(spec: &str, json: bool) -> super::Outcome {
    if !json {
        eprintln!("bringing {spec} up, then asking the SA for every pair's PathRecord…");
    }
    let r = ::tests::sa_bench::all_pairs(spec)?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "{spec}: {} CAs, {} PathRecord queries (every ordered pair), {} answered with their pair",
            r.cas, r.pairs, r.answered
        );
        println!(
            "one core: {:.1} s, {:.0} ns a query (decode, resolve over the installed tables, encode); goal: under 30 s for fat-tree-11664",
            r.seconds, r.ns_per_query
        );
    }
    match r.failure() {
        Some(e) => Err(super::Fail::Check(e)),
        None => Ok(()),
    }
}

/// Seconds of load: a positive, finite number up to an hour.
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!("{s:?}: seconds are a number above 0, at most 3600")),
    }
}

/// `ibkit bench sa --load`: the load generator, on the port this process
/// is attached to; prints its [`smd::client::LoadRun`] as JSON.
fn sa_load(a: &SaArgs) -> super::Outcome {
    let mut c = smd::client::SaClient::open(None, 0).map_err(|e| e.to_string())?;
    let dlids: Vec<u16> = (1..=a.lids).filter(|&l| l != c.lid).collect();
    let r = c
        .load(&dlids, a.window as usize, a.seconds)
        .map_err(|e| e.to_string())?;
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}

/// Runs `ibkit bench sa`: OpenSM's SA and ibkit's under the load
/// generator, `--repeat` times; every run is printed (with `--json`, one
/// object a line), then, over several runs, the spread of the ratios.
fn sa_versus_opensm(a: &SaArgs) -> super::Outcome {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let windows: Vec<usize> = a.windows.iter().map(|&w| w as usize).collect();
    let bar = super::args::Progress::new(6 * u64::from(a.repeat), a.json);
    let mut runs = Vec::new();
    let mut failed = None;
    for run in 1..=a.repeat {
        let b = ::tests::sa_bench::versus_opensm(
            &exe,
            &a.topology,
            &windows,
            a.seconds,
            a.perf,
            &mut |s| {
                bar.step();
                bar.line(s);
            },
        )?;
        if a.json {
            println!("{}", serde_json::to_string(&b)?);
        } else {
            if a.repeat > 1 {
                println!("run {run} of {}", a.repeat);
            }
            print_sa_run(&b, a.perf);
        }
        if failed.is_none() {
            failed = b.failure().map(|e| {
                if a.repeat > 1 {
                    format!("run {run}: {e}")
                } else {
                    e
                }
            });
        }
        runs.push(b);
    }
    bar.finish();
    if !a.json && runs.len() > 1 {
        print_spread(&runs);
    }
    match failed {
        Some(e) => Err(super::Fail::Check(e)),
        None => Ok(()),
    }
}

/// The spread of the ratios over several runs of `ibkit bench sa`.
fn print_spread(runs: &[::tests::sa_bench::SaLoadBench]) {
    let s = ::tests::sa_bench::spread(runs);
    println!(
        "over {} runs, OpenSM over ibkit, min / median / max (CPU: how many times less ibkit spent; q/s: ibkit's rate over OpenSM's)",
        runs.len()
    );
    println!(
        "{:>6} | {:>20} | {:>20} | {:>20} | {:>20}",
        "window", "CPU ×, libumad2sim", "CPU ×, direct", "q/s ×, libumad2sim", "q/s ×, direct"
    );
    let f = |t: [f64; 3]| format!("{:.2} / {:.2} / {:.2}", t[0], t[1], t[2]);
    for w in &s {
        println!(
            "{:>6} | {:>20} | {:>20} | {:>20} | {:>20}",
            w.window,
            f(w.cpu),
            f(w.cpu_direct),
            f(w.rate),
            f(w.rate_direct)
        );
    }
}

/// One run of `ibkit bench sa`, as a table.
fn print_sa_run(b: &::tests::sa_bench::SaLoadBench, perf: bool) {
    println!(
        "{}: SubnAdmGet(PathRecord) from one host, SLID its own, DLID each of LIDs 1..={} in turn; {} s per window",
        b.topology, b.lids, b.seconds
    );
    println!(
        "ibkit's SM through libumad2sim, as OpenSM runs (the same transport), and on the simulator's socket (direct)"
    );
    println!(
        "{:>6} | {:>9} {:>8} {:>8} {:>9} | {:>9} {:>8} {:>8} {:>9} {:>7} {:>6} | {:>9} {:>8} {:>9} {:>6}",
        "window",
        "OpenSM/s",
        "p50 µs",
        "p99 µs",
        "CPU µs/q",
        "ibkit/s",
        "p50 µs",
        "p99 µs",
        "CPU µs/q",
        "q/s ×",
        "CPU ×",
        "direct/s",
        "p50 µs",
        "CPU µs/q",
        "CPU ×"
    );
    let rows = b
        .opensm
        .windows
        .iter()
        .zip(&b.ibkit.windows)
        .zip(&b.ibkit_direct.windows);
    for ((o, k), d) in rows {
        let (ol, kl, dl) = (&o.load, &k.load, &d.load);
        println!(
            "{:>6} | {:>9.0} {:>8.0} {:>8.0} {:>9.2} | {:>9.0} {:>8.0} {:>8.0} {:>9.2} {:>7.2} {:>6.1} | {:>9.0} {:>8.0} {:>9.2} {:>6.1}",
            ol.window,
            ol.per_second,
            ol.p50_us,
            ol.p99_us,
            o.sm_cpu_us_per_query,
            kl.per_second,
            kl.p50_us,
            kl.p99_us,
            k.sm_cpu_us_per_query,
            kl.per_second / ol.per_second,
            o.sm_cpu_us_per_query / k.sm_cpu_us_per_query,
            dl.per_second,
            dl.p50_us,
            d.sm_cpu_us_per_query,
            o.sm_cpu_us_per_query / d.sm_cpu_us_per_query
        );
    }
    for (k, what) in [
        (&b.ibkit, "through libumad2sim"),
        (&b.ibkit_direct, "direct"),
    ] {
        if let Some(us) = k.sa_us_per_answer {
            println!(
                "ibkit's SA itself (by its own clock), {what}: {us:.2} µs an answer; the rest of its process's CPU is the transport"
            );
        }
    }
    let worst = |r: Vec<f64>| r.into_iter().fold(f64::INFINITY, f64::min);
    let (same, direct) = (worst(b.cpu_ratio()), worst(b.cpu_ratio_direct()));
    let verdict = |w: f64| if w >= 10.0 { "met" } else { "not met" };
    println!(
        "goal, 10× less SM CPU a query than OpenSM: through libumad2sim {} (worst window {same:.1}×); direct {} (worst window {direct:.1}×)",
        verdict(same),
        verdict(direct)
    );
    let sim = |s: &::tests::sa_bench::SmUnderLoad| {
        s.windows
            .iter()
            .map(|w| format!("{:.1}", w.sim_cpu_us_per_query))
            .collect::<Vec<_>>()
            .join("/")
    };
    println!(
        "ibsim CPU µs a query: OpenSM's run {}, ibkit's {}, ibkit direct {}",
        sim(&b.opensm),
        sim(&b.ibkit),
        sim(&b.ibkit_direct)
    );
    if perf {
        print_profiles(b);
    }
}

/// With `--perf`: each SM's CPU a query split by where it ran (perf's
/// samples by object), and the ratio of the SMs' own code.
fn print_profiles(b: &::tests::sa_bench::SaLoadBench) {
    use ::tests::sa_bench::{by_part, Part};
    println!(
        "where each SM's CPU went (perf record -e cpu-clock, samples by object), µs a query: {}",
        Part::ALL.map(Part::name).join(" / ")
    );
    let sms = [&b.opensm, &b.ibkit, &b.ibkit_direct];
    for (i, o) in b.opensm.windows.iter().enumerate() {
        let split = |s: &::tests::sa_bench::SmUnderLoad| {
            let w = &s.windows[i];
            w.profile
                .as_deref()
                .map(|p| by_part(p).map(|f| f * w.sm_cpu_us_per_query))
        };
        let cells: Vec<String> = sms
            .iter()
            .map(|s| match split(s) {
                Some(p) => format!("{}: {}", s.sm, p.map(|v| format!("{v:.2}")).join(" / ")),
                None => format!("{}: not sampled", s.sm),
            })
            .collect();
        println!("  window {:>4} | {}", o.load.window, cells.join(" | "));
        if let (Some(osm), Some(k), Some(d)) = (split(sms[0]), split(sms[1]), split(sms[2])) {
            println!(
                "  window {:>4} | own code, OpenSM over ibkit: {:.1}× through libumad2sim, {:.1}× direct; outside it (libraries and kernel): {:.1}×, {:.1}×",
                o.load.window,
                osm[0] / k[0],
                osm[0] / d[0],
                osm[1..].iter().sum::<f64>() / k[1..].iter().sum::<f64>(),
                osm[1..].iter().sum::<f64>() / d[1..].iter().sum::<f64>()
            );
        }
    }
}

/// `ibkit bench`'s benchmarks.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum BenchWhat {
    /// OpenSM (on ibsim) and ibkit's SM (on its simulator) bring the same fabric up: SMPs, times, ratios.
    Opensm(OpensmArgs),
    /// vhca: the software HCA natively and from a guest process: latency, bandwidth, events, registration.
    Vhca(VhcaArgs),
    /// OpenSM and ibkit's SM on Debian's ibsim and on `ibkit fabric serve`, same fabric, same run: time to up, SMP rate, simulator CPU per SMP.
    IbsimCompat(CompatArgs),
    /// The SA: every pair's PathRecord in process (--all-pairs), or OpenSM's SA and ibkit's on ibsim under a load generator.
    Sa(SaArgs),
    /// A master killed or stopped beside a standby of its kind, OpenSM then ibkit on ibsim: time until sminfo names the new master.
    Election(super::election::ElectionArgs),
}

/// Options of `ibkit bench sa`.
#[derive(Clone, Debug, clap::Args)]
pub struct SaArgs {
    /// The fabric: a topology spec.
    #[arg(long, default_value = "fat-tree-324", help = TOPOLOGY_HELP)]
    pub topology: String,
    /// Ask ibkit's SA, in process and on one core, for the PathRecord of every pair of CAs.
    #[arg(long)]
    pub all_pairs: bool,
    /// Windows: queries kept outstanding, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,8,16,64",
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub windows: Vec<u64>,
    /// Seconds of load per window.
    #[arg(long, default_value_t = 2.0, value_parser = parse_seconds)]
    pub seconds: f64,
    /// Run the whole comparison this many times (fresh simulators and
    /// SMs each time), then print the spread of the ratios.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=20), conflicts_with = "all_pairs")]
    pub repeat: u8,
    /// Also sample each SM's CPU with `perf record -e cpu-clock` during
    /// each window and split it by where it ran: the SM's own code, the
    /// transport's libraries, the C library, the kernel (needs perf).
    #[arg(long, conflicts_with = "all_pairs")]
    pub perf: bool,
    /// Internal: be the load generator (one window, on this process's port, JSON out).
    #[arg(long, hide = true)]
    pub load: bool,
    /// Internal, with --load: the window.
    #[arg(long, hide = true, default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub window: u64,
    /// Internal, with --load: ask for the paths to LIDs 1..=this (unicast LIDs).
    #[arg(long, hide = true, default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=0xBFFF))]
    pub lids: u16,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Options of `ibkit bench opensm`.
#[derive(Clone, Debug, clap::Args)]
pub struct OpensmArgs {
    /// The fabric: a topology spec.
    #[arg(long, default_value = "fat-tree-324", help = TOPOLOGY_HELP)]
    pub topology: String,
    /// Routing engine for both: minhop, updn, ftree, dor or lash.
    #[arg(long, default_value = "minhop", value_parser = parse_engine)]
    pub routing: Engine,
    /// A partitions.conf both SMs apply (OpenSM -P, ibkit sm --partitions).
    #[arg(long, value_name = "FILE")]
    pub partitions: Option<PathBuf>,
    /// Both SMs apply QoS with OpenSM's defaults (OpenSM -Q, ibkit sm --qos).
    #[arg(long)]
    pub qos: bool,
    /// Both SMs give every CA port 2^LMC LIDs (OpenSM -l, ibkit sm --lmc).
    #[arg(long, value_name = "LMC", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub lmc: u8,
    /// Switches whose port 0 is enhanced take the LMC too (OpenSM's
    /// `lmc_esp0 TRUE`, given it in a configuration file; ibkit sm
    /// --lmc-esp0). Only a topology file marks such switches (`enhanced
    /// port 0`, as ibsim's and ibnetdiscover's). Needs --lmc.
    #[arg(long, requires = "lmc")]
    pub lmc_esp0: bool,
    /// Then N hosts join the IPoIB broadcast group one after another,
    /// through each SM's SA (both running as daemons on ibsim, and ibkit's
    /// on its simulator): the SMPs each join costs.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=1024))]
    pub joins: u16,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Options of `ibkit bench vhca`.
#[derive(Clone, Debug, clap::Args)]
pub struct VhcaArgs {
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
    /// Fewer sizes and iterations (a smoke run).
    #[arg(long)]
    pub quick: bool,
    /// Internal: run the guest side against the backend at this socket.
    #[arg(long, hide = true)]
    pub guest: Option<PathBuf>,
    /// Measure vhca over this RDMA device (VerbsHca) against the device used directly, instead of the software HCA.
    #[arg(long)]
    pub device: Option<String>,
}

/// Options of `ibkit bench ibsim-compat`.
#[derive(Clone, Debug, clap::Args)]
pub struct CompatArgs {
    /// The fabric: a topology spec.
    #[arg(long, default_value = "fat-tree-5832", help = TOPOLOGY_HELP)]
    pub topology: String,
    /// Routing engine for both clients: minhop, updn, ftree, dor or lash.
    #[arg(long, default_value = "minhop", value_parser = parse_engine)]
    pub routing: Engine,
    /// Runs per client and simulator (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Instead of comparing with ibsim: OpenSM on ibkit serve with these µs added to every batch of answers (e.g. 0,15,30), and how much of OpenSM's time that makes.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub sensitivity: Vec<u64>,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs one of `ibkit bench`'s benchmarks.
pub fn main(what: &BenchWhat) -> super::Outcome {
    match what {
        BenchWhat::Opensm(a) => opensm(a),
        BenchWhat::Election(a) => super::election::run(a),
        BenchWhat::Sa(a) if a.all_pairs => sa_all_pairs(&a.topology, a.json),
        BenchWhat::Sa(a) if a.load => sa_load(a),
        BenchWhat::Sa(a) => sa_versus_opensm(a),
        BenchWhat::IbsimCompat(a) if a.sensitivity.is_empty() => {
            super::compat::run(&a.topology, a.routing, a.runs, a.json)
        }
        BenchWhat::IbsimCompat(a) => {
            super::compat::run_sensitivity(&a.topology, a.routing, a.runs, &a.sensitivity, a.json)
        }
        BenchWhat::Vhca(a) => match (&a.guest, &a.device) {
            (Some(sock), _) => super::vhca::guest(sock, a.quick),
            (None, Some(d)) => super::vhca::verbs::run(d, a.json, a.quick),
            (None, None) => super::vhca::run(a.json, a.quick),
        },
    }
}
