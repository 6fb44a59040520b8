//! `ibkit bench sa`'s runs. [`all_pairs`]: the SA of ibkit's SM asked
//! for the PathRecord of every ordered pair of CAs of a fabric, one
//! SubnAdmGet MAD at a time — decoded, resolved over the installed tables,
//! its answer encoded and queued — on one core, each answer checked.
//! [`versus_opensm`]: OpenSM's SA and ibkit's on the same ibsim fabric
//! under a load generator ([`smd::client::SaClient::load`]) that keeps a
//! window of queries outstanding.

use crate::peers::{cpu_ns, start_ibkit_sm, start_opensm, Ibsim, Simulator};
use fabric::sim::{bring_up, Fabric, SimConfig};
use fabric::topology::Topology;
use mad_core::attr::NodeType;
use mad_core::mad::Method;
use mad_core::sa::path::comp;
use mad_core::sa::{PathRecord, SaMad, SaRecord};
use mad_core::Lid;
use sa::{Addr, Sa, SaConfig};
use serde::Serialize;
use smi::sm::{SmConfig, Subnet};
use std::path::Path;
use std::time::{Duration, Instant};

/// The LIDs of `f`'s CAs, in node order.
pub fn ca_lids(f: &Fabric) -> Vec<Lid> {
    (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .map(|i| f.nodes[i].lid())
        .collect()
}

/// ibkit's SA asked for PathRecords by SLID and DLID, one SubnAdmGet MAD
/// in and one answer out at a time, each answer checked ([`all_pairs`],
/// and the `cold_path` example, which times a query with cold caches).
pub struct PathAsker {
    sa: Sa,
    /// The query, whose SLID and DLID each ask rewrites.
    mad: [u8; mad_core::MAD_SIZE],
}

/// Where DLID and SLID sit in a PathRecord MAD: the SA data (56) + the
/// record's.
const DLID: usize = 56 + 40;
const SLID: usize = 56 + 42;

impl PathAsker {
    /// A fresh SA and a SubnAdmGet(PathRecord) by SLID and DLID.
    pub fn new() -> PathAsker {
        let mut q = SaMad::request(Method::Get, PathRecord::ID, 1);
        q.sa.component_mask = comp::SLID | comp::DLID;
        PathAsker {
            sa: Sa::new(SaConfig::default()),
            mad: q.to_bytes(),
        }
    }

    /// Asks `subnet`'s SA, from `s`, for the path from `s` to `d`: whether
    /// the answer has status 0 and names that pair.
    pub fn ask(&mut self, subnet: &Subnet, s: Lid, d: Lid) -> bool {
        self.mad[DLID..DLID + 2].copy_from_slice(&d.0.to_be_bytes());
        self.mad[SLID..SLID + 2].copy_from_slice(&s.0.to_be_bytes());
        let from = Addr { lid: s, qpn: 1 };
        if self.sa.handle_mad(subnet, from, &self.mad, 0).is_err() {
            return false;
        }
        self.sa.poll_transmit().is_some_and(|a| {
            a.mad[4..6] == [0, 0]
                && a.mad[DLID..DLID + 2] == d.0.to_be_bytes()
                && a.mad[SLID..SLID + 2] == s.0.to_be_bytes()
        })
    }
}

impl Default for PathAsker {
    fn default() -> Self {
        PathAsker::new()
    }
}

/// What [`all_pairs`] measured.
#[derive(Clone, Debug, Serialize)]
pub struct AllPairs {
    /// The topology spec.
    pub topology: String,
    /// CAs of the fabric.
    pub cas: usize,
    /// Ordered pairs asked (CAs², each CA to itself included).
    pub pairs: u64,
    /// Answers with status 0 whose record names the pair asked.
    pub answered: u64,
    /// Answers that were refused or named another pair.
    pub wrong: u64,
    /// Milliseconds to bring the fabric up (not counted below).
    pub bring_up_ms: f64,
    /// Seconds for all the pairs, on one thread.
    pub seconds: f64,
    /// Nanoseconds per query.
    pub ns_per_query: f64,
}

impl AllPairs {
    /// What is wrong, if anything: an answer missing or wrong.
    pub fn failure(&self) -> Option<String> {
        (self.wrong != 0 || self.answered != self.pairs).then(|| {
            format!(
                "{} of {} PathRecord queries were not answered with their pair",
                self.pairs - self.answered,
                self.pairs
            )
        })
    }
}

/// Brings `spec` up with ibkit's SM on the simulator, then asks its SA for
/// the PathRecord of every ordered pair of CAs (by SLID and DLID, from the
/// source's own address), one MAD in and one out at a time, and checks
/// every answer's status, SLID and DLID. Destinations are the outer loop:
/// the switches' entries for one LID stay in cache while every source
/// asks for it, as they would when a job's ranks all resolve one peer.
pub fn all_pairs(spec: &str) -> Result<AllPairs, String> {
    let t0 = Instant::now();
    let (f, sm, up) = bring_up(spec, SimConfig::default(), SmConfig::default())
        .map_err(|e| format!("{spec}: {e}"))?;
    if !up {
        return Err(format!("{spec}: the subnet did not come up"));
    }
    let bring_up_ms = t0.elapsed().as_secs_f64() * 1e3;
    let lids = ca_lids(&f);
    let mut asker = PathAsker::new();
    let (mut answered, mut wrong) = (0u64, 0u64);
    let subnet = sm.subnet();
    let t = Instant::now();
    for &d in &lids {
        for &s in &lids {
            if asker.ask(subnet, s, d) {
                answered += 1;
            } else {
                wrong += 1;
            }
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let pairs = (lids.len() * lids.len()) as u64;
    Ok(AllPairs {
        topology: spec.to_string(),
        cas: lids.len(),
        pairs,
        answered,
        wrong,
        bring_up_ms,
        seconds,
        ns_per_query: seconds * 1e9 / pairs.max(1) as f64,
    })
}

/// One window of the load, against one SM.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    /// What the load generator measured.
    pub load: smd::client::LoadRun,
    /// CPU µs the SM's process spent per answer in the meantime.
    pub sm_cpu_us_per_query: f64,
    /// CPU µs the simulator spent per answer.
    pub sim_cpu_us_per_query: f64,
    /// Where the SM's CPU went (with `--perf`): each object's share of
    /// the samples, largest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Vec<Share>>,
}

/// One object's share of an SM's CPU samples in a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Share {
    /// The object the samples fell in, as perf names it (`opensm`,
    /// `libc.so.6`, `[kernel.kallsyms]`…).
    pub object: String,
    /// Which part of the SM it is.
    pub part: Part,
    /// Its share of the samples, 0–1.
    pub share: f64,
}

/// The parts an SM's CPU is split into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// The SM's own code: the `opensm` executable and OpenSM's libraries
    /// (`libopensm`, and `libosmcomp`, its containers, timers and
    /// dispatcher threads), or the `ibkit` executable (its SA, its SM and
    /// its glue to libibumad).
    Own,
    /// The MAD transport's libraries: libibumad, libumad2sim, libibmad,
    /// OpenSM's vendor layer (`libosmvendor`).
    Transport,
    /// The C library and the vDSO (allocation, copies, locks, clocks).
    CLibrary,
    /// The kernel: system calls, wake-ups, context switches.
    Kernel,
}

impl Part {
    /// Every part, in the order printed.
    pub const ALL: [Part; 4] = [Part::Own, Part::Transport, Part::CLibrary, Part::Kernel];

    /// The part an object belongs to, by the name perf gives it.
    pub fn of(object: &str) -> Part {
        let base = object.rsplit('/').next().unwrap_or(object);
        if base.starts_with("[kernel") || base.starts_with("[guest.kernel") {
            Part::Kernel
        } else if base.starts_with("libc.so")
            || base.starts_with("libc-")
            || base.starts_with("ld-linux")
            || base == "[vdso]"
            || base.starts_with("libm.so")
            || base.starts_with("libgcc_s")
        {
            Part::CLibrary
        } else if ["libibumad", "libumad2sim", "libibmad", "libosmvendor"]
            .iter()
            .any(|t| base.starts_with(t))
        {
            Part::Transport
        } else {
            Part::Own
        }
    }

    /// Its name in the printed table.
    pub fn name(self) -> &'static str {
        match self {
            Part::Own => "own code",
            Part::Transport => "transport libs",
            Part::CLibrary => "C library",
            Part::Kernel => "kernel",
        }
    }
}

/// The shares of `perf report --sort dso --stdio -q --no-children -g none`
/// output: one line per object, `  69.32%  [kernel.kallsyms]`. A line that
/// is not of that form is an error naming it; so is a report with no line.
pub fn parse_perf_report(report: &str) -> Result<Vec<Share>, String> {
    let mut v = Vec::new();
    for line in report.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with('#') {
            continue;
        }
        let (pct, object) = line
            .split_once('%')
            .map(|(p, o)| (p.trim(), o.trim()))
            .ok_or_else(|| format!("perf report: not a share: {line:?}"))?;
        let pct: f64 = pct
            .parse()
            .map_err(|_| format!("perf report: not a share: {line:?}"))?;
        if !(0.0..=100.0).contains(&pct) || object.is_empty() {
            return Err(format!("perf report: not a share: {line:?}"));
        }
        v.push(Share {
            object: object.to_string(),
            part: Part::of(object),
            share: pct / 100.0,
        });
    }
    if v.is_empty() {
        return Err("perf report: no samples".into());
    }
    v.sort_by(|a, b| b.share.total_cmp(&a.share));
    Ok(v)
}

/// The share of each part, in [`Part::ALL`]'s order.
pub fn by_part(shares: &[Share]) -> [f64; 4] {
    let mut t = [0.0; 4];
    for s in shares {
        t[Part::ALL.iter().position(|&p| p == s.part).unwrap_or(0)] += s.share;
    }
    t
}

/// `perf record` on process `pid`, into `out`, until [`Perf::stop`].
struct Perf {
    child: std::process::Child,
    out: std::path::PathBuf,
}

impl Perf {
    /// Starts sampling `pid`'s CPU time (`-e cpu-clock`, which needs no
    /// hardware counter).
    fn start(pid: u32, out: &Path) -> Result<Perf, String> {
        let child = std::process::Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-F", "2999", "-p"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("--perf needs perf (Debian's linux-perf): {e}"))?;
        // perf attaches before the load starts.
        std::thread::sleep(Duration::from_millis(300));
        Ok(Perf {
            child,
            out: out.to_path_buf(),
        })
    }

    /// Stops sampling and reads the shares by object.
    fn stop(self) -> Result<Vec<Share>, String> {
        use nix::sys::signal::{kill, Signal};
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGINT);
        let out = self
            .child
            .wait_with_output()
            .map_err(|e| format!("perf record: {e}"))?;
        if !self.out.exists() {
            return Err(format!(
                "perf record wrote nothing: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let r = std::process::Command::new("perf")
            .args([
                "report",
                "--sort",
                "dso",
                "--stdio",
                "-q",
                "--no-children",
                "-g",
                "none",
                "-i",
            ])
            .arg(&self.out)
            .output()
            .map_err(|e| format!("perf report: {e}"))?;
        if !r.status.success() {
            return Err(format!(
                "perf report failed: {}",
                String::from_utf8_lossy(&r.stderr).trim()
            ));
        }
        parse_perf_report(&String::from_utf8_lossy(&r.stdout))
    }
}

/// One SM under the load, every window.
#[derive(Clone, Debug, Serialize)]
pub struct SmUnderLoad {
    /// Which SM.
    pub sm: &'static str,
    /// The windows, in order.
    pub windows: Vec<Window>,
    /// µs of the SA's own work per answer, by the SM's clock (ibkit's SM
    /// reports it; OpenSM does not, `null`).
    pub sa_us_per_answer: Option<f64>,
    /// The SM exited cleanly on SIGTERM.
    pub clean_exit: bool,
}

/// `ibkit bench sa`: OpenSM's SA and ibkit's on the same ibsim fabric,
/// under the same load.
#[derive(Clone, Debug, Serialize)]
pub struct SaLoadBench {
    /// The topology spec.
    pub topology: String,
    /// Seconds of load per window.
    pub seconds: f64,
    /// Destinations cycled through (LIDs 1..=this).
    pub lids: u16,
    /// OpenSM 3.3.23.
    pub opensm: SmUnderLoad,
    /// ibkit's SM (`ibkit sm --transport umad`), through libumad2sim as
    /// OpenSM: the same transport.
    pub ibkit: SmUnderLoad,
    /// ibkit's SM on the simulator's socket (`ibkit sm --transport
    /// ibsim`), which OpenSM cannot use: what the transport costs.
    pub ibkit_direct: SmUnderLoad,
}

impl SaLoadBench {
    /// What is wrong, if anything: a query refused or lost, an SM's CPU
    /// that could not be read, or ibkit's SM not exiting cleanly on
    /// SIGTERM. Speed is reported, not required, for either SM: queries a
    /// second, because from a window of 16 on ibsim, which carries every
    /// MAD, is the bottleneck of every run on this 2-core machine; and CPU
    /// a query ([`SaLoadBench::cpu_ratio`], with the goal of 10×),
    /// because through libumad2sim each MAD wakes two threads of each SM's
    /// process through a condition variable, and where the scheduler puts
    /// them moves both SMs' CPU by more than the difference between them
    /// (ibkit's ratio at window 1 ranged 0.6–1.3× in four runs of one
    /// hour on 2026-11-26, on the same code).
    pub fn failure(&self) -> Option<String> {
        for s in [&self.opensm, &self.ibkit, &self.ibkit_direct] {
            for w in &s.windows {
                let l = &w.load;
                if l.refused + l.lost != 0 || l.answered == 0 {
                    return Some(format!(
                        "{} at window {}: {} answered, {} refused, {} lost",
                        s.sm, l.window, l.answered, l.refused, l.lost
                    ));
                }
            }
        }
        for k in [&self.ibkit, &self.ibkit_direct] {
            if !k.clean_exit {
                return Some(format!("{} did not exit cleanly on SIGTERM", k.sm));
            }
        }
        for s in [&self.opensm, &self.ibkit, &self.ibkit_direct] {
            for w in &s.windows {
                if !(w.sm_cpu_us_per_query > 0.0 && w.sm_cpu_us_per_query.is_finite()) {
                    return Some(format!(
                        "{}'s CPU at window {} could not be measured ({} µs of CPU a query)",
                        s.sm, w.load.window, w.sm_cpu_us_per_query
                    ));
                }
            }
        }
        None
    }

    /// OpenSM's SM CPU per query over ibkit's through the same transport,
    /// per window.
    pub fn cpu_ratio(&self) -> Vec<f64> {
        ratio(&self.opensm, &self.ibkit)
    }

    /// OpenSM's SM CPU per query over ibkit's on the simulator's socket,
    /// per window.
    pub fn cpu_ratio_direct(&self) -> Vec<f64> {
        ratio(&self.opensm, &self.ibkit_direct)
    }
}

/// One window's ratios over several runs of [`versus_opensm`], each as
/// min, median, max.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowSpread {
    /// The window.
    pub window: usize,
    /// OpenSM's CPU a query over ibkit's through libumad2sim.
    pub cpu: [f64; 3],
    /// OpenSM's CPU a query over ibkit's on the simulator's socket.
    pub cpu_direct: [f64; 3],
    /// ibkit's queries a second over OpenSM's, through libumad2sim.
    pub rate: [f64; 3],
    /// ibkit's queries a second over OpenSM's, direct.
    pub rate_direct: [f64; 3],
}

/// Min, median and max of `v` (the lower median of an even count); NaN
/// sorts last.
fn three(mut v: Vec<f64>) -> [f64; 3] {
    if v.is_empty() {
        return [f64::NAN; 3];
    }
    v.sort_by(f64::total_cmp);
    [v[0], v[(v.len() - 1) / 2], v[v.len() - 1]]
}

/// The spread of each window's ratios over `runs` (windows taken by
/// position, as every run has the same list).
pub fn spread(runs: &[SaLoadBench]) -> Vec<WindowSpread> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let rate = |o: &SmUnderLoad, k: &SmUnderLoad, i: usize| {
        k.windows[i].load.per_second / o.windows[i].load.per_second
    };
    (0..first.opensm.windows.len())
        .map(|i| {
            let each = |f: &dyn Fn(&SaLoadBench) -> f64| three(runs.iter().map(f).collect());
            WindowSpread {
                window: first.opensm.windows[i].load.window,
                cpu: each(&|b| b.cpu_ratio()[i]),
                cpu_direct: each(&|b| b.cpu_ratio_direct()[i]),
                rate: each(&|b| rate(&b.opensm, &b.ibkit, i)),
                rate_direct: each(&|b| rate(&b.opensm, &b.ibkit_direct, i)),
            }
        })
        .collect()
}

/// `o`'s CPU per query over `k`'s, window by window.
fn ratio(o: &SmUnderLoad, k: &SmUnderLoad) -> Vec<f64> {
    (o.windows.iter().zip(&k.windows))
        .map(|(o, k)| o.sm_cpu_us_per_query / k.sm_cpu_us_per_query)
        .collect()
}

/// The load each SM is put under: the windows in turn, `seconds` each,
/// queries for the paths to LIDs 1..=`lids`.
struct Plan<'a> {
    lids: u16,
    list: &'a [usize],
    seconds: f64,
}

/// Runs the load generator (`exe bench sa --load …`, under the preload,
/// attached at `host`) once for each window against the SM `pid` of
/// `sim`, measuring both processes' CPU around each run.
fn windows(
    exe: &Path,
    sim: &Ibsim,
    host: &str,
    pid: u32,
    plan: &Plan,
    perf: Option<&Path>,
) -> Result<Vec<Window>, String> {
    let mut v = Vec::new();
    for &w in plan.list {
        let sampling = match perf {
            Some(dir) => Some(Perf::start(pid, &dir.join(format!("{pid}-w{w}.data")))?),
            None => None,
        };
        let (sm0, sim0) = (cpu_ns(pid), cpu_ns(sim.pid()));
        let out = sim
            .client_on(exe, host)
            .args(["bench", "sa", "--load", "--window", &w.to_string()])
            .args([
                "--seconds",
                &plan.seconds.to_string(),
                "--lids",
                &plan.lids.to_string(),
            ])
            .output()
            .map_err(|e| format!("the load generator: {e}"))?;
        let (sm1, sim1) = (cpu_ns(pid), cpu_ns(sim.pid()));
        let profile = sampling.map(Perf::stop).transpose()?;
        if !out.status.success() {
            return Err(format!(
                "the load generator failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let load: smd::client::LoadRun = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("the load generator's JSON: {e}"))?;
        let per = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) if load.answered > 0 => {
                b.saturating_sub(a) as f64 / 1e3 / load.answered as f64
            }
            _ => f64::NAN,
        };
        v.push(Window {
            sm_cpu_us_per_query: per(sm0, sm1),
            sim_cpu_us_per_query: per(sim0, sim1),
            load,
            profile,
        });
    }
    Ok(v)
}

/// OpenSM's SA, then ibkit's through libumad2sim, then ibkit's on the simulator's
/// socket, each on a fresh ibsim of `spec`, under the
/// load generator at each window of `list` for `seconds` each (`exe` is
/// the `ibkit` binary: `ibkit sm` and the generator). The generator
/// runs on the last CA, the SMs on the first; `progress` hears each step.
/// With `perf`, each SM's CPU in each window is also sampled with `perf
/// record -e cpu-clock` and split by the object it ran in
/// ([`Window::profile`]).
pub fn versus_opensm(
    exe: &Path,
    spec: &str,
    list: &[usize],
    seconds: f64,
    perf: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<SaLoadBench, String> {
    let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
    let host = topo
        .nodes
        .iter()
        .rev()
        .find(|n| n.kind == NodeType::ChannelAdapter)
        .map(|n| n.name.clone())
        .ok_or("the fabric has no CA")?;
    let lids = u16::try_from(topo.nodes.len()).map_err(|_| "too many nodes for LIDs")?;
    let dir = std::env::temp_dir().join(format!("ibkit-bench-sa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let up = Duration::from_secs(60 + topo.nodes.len() as u64 / 50);
    let run =
        |which: &'static str, progress: &mut dyn FnMut(&str)| -> Result<SmUnderLoad, String> {
            let sim = Ibsim::start_with(&topo, &dir, false)?;
            progress(&format!(
                "{which} on ibsim ({spec}): bringing the subnet up…"
            ));
            let sm = match which {
                "OpenSM" => start_opensm(&sim, &dir, up)?,
                "ibkit" => start_ibkit_sm(exe, &sim, &["--json", "--transport", "umad"], up)?,
                _ => start_ibkit_sm(exe, &sim, &["--json", "--transport", "ibsim"], up)?,
            };
            progress(&format!("{which}'s SA under load, windows {list:?}…"));
            let samples = perf.then_some(dir.as_path());
            let plan = Plan {
                lids,
                list,
                seconds,
            };
            let w = windows(exe, &sim, &host, sm.pid(), &plan, samples)?;
            let (clean_exit, said) = sm.stop(Duration::from_secs(5));
            let sa_us_per_answer = serde_json::from_str::<serde_json::Value>(&said)
                .ok()
                .and_then(|v| {
                    let (ns, n) = (v["sa_ns"].as_f64()?, v["sa_answered"].as_f64()?);
                    (n > 0.0).then(|| ns / 1e3 / n)
                });
            Ok(SmUnderLoad {
                sm: which,
                windows: w,
                sa_us_per_answer,
                clean_exit,
            })
        };
    let opensm = run("OpenSM", progress);
    let ibkit = run("ibkit", progress);
    let direct = run("ibkit (direct)", progress);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(SaLoadBench {
        topology: spec.to_string(),
        seconds,
        lids,
        opensm: opensm?,
        ibkit: ibkit?,
        ibkit_direct: direct?,
    })
}

#[cfg(test)]
mod unit {
    use super::*;
    use smd::client::LoadRun;

    /// Every pair of a 648-CA fabric through the SA, each answer checked;
    /// and a count that falls short is named.
    #[test]
    fn all_pairs_of_fat_tree_648_are_answered() {
        let r = all_pairs("fat-tree-648").unwrap();
        assert_eq!((r.cas, r.pairs), (648, 648 * 648));
        assert_eq!((r.answered, r.wrong), (r.pairs, 0));
        assert_eq!(r.failure(), None);
        let short = AllPairs {
            answered: r.pairs - 1,
            wrong: 1,
            ..r
        };
        assert!(short.failure().unwrap().starts_with("1 of 419904"));
    }

    fn side(sm: &'static str, cpu: f64, refused: u64, lost: u64, clean: bool) -> SmUnderLoad {
        SmUnderLoad {
            sm,
            windows: vec![Window {
                load: LoadRun {
                    window: 1,
                    sent: 100 + refused + lost,
                    answered: 100,
                    refused,
                    lost,
                    ..LoadRun::default()
                },
                sm_cpu_us_per_query: cpu,
                sim_cpu_us_per_query: 1.0,
                profile: None,
            }],
            sa_us_per_answer: None,
            clean_exit: clean,
        }
    }

    /// The spread of several runs: min, median and max of each ratio,
    /// window by window.
    #[test]
    fn several_runs_are_summed_up_by_their_spread() {
        let at = |sm: &'static str, cpu: f64, rate: f64| {
            let mut s = side(sm, cpu, 0, 0, true);
            s.windows[0].load.per_second = rate;
            s
        };
        let run = |k_cpu: f64, k_rate: f64| SaLoadBench {
            topology: "t".into(),
            seconds: 1.0,
            lids: 2,
            opensm: at("OpenSM", 20.0, 1000.0),
            ibkit: at("ibkit", k_cpu, k_rate),
            ibkit_direct: at("direct", 4.0, 2000.0),
        };
        let runs = [
            run(10.0, 900.0),
            run(40.0, 1500.0),
            run(20.0, 1200.0),
            run(8.0, 1100.0),
        ];
        let s = spread(&runs);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].window, 1);
        // Ratios 2, 0.5, 1, 2.5: the lower median of four is the second.
        assert_eq!(s[0].cpu, [0.5, 1.0, 2.5]);
        assert_eq!(s[0].rate, [0.9, 1.1, 1.5]);
        assert_eq!(s[0].cpu_direct, [5.0; 3]);
        assert_eq!(s[0].rate_direct, [2.0; 3]);
        assert!(spread(&[]).is_empty());
    }

    /// perf's report by object is read share by share, each object put
    /// in its part; anything else in it is refused, naming the line.
    #[test]
    fn perf_reports_are_split_by_part() {
        // What `perf report --sort dso --stdio -q --no-children -g none`
        // printed for OpenSM under load on 2026-11-26.
        let report = "    69.32%  [kernel.kallsyms]    \n    10.48%  libosmcomp.so.5.0.0  \n     9.94%  libc.so.6            \n     7.79%  opensm               \n     0.73%  libumad2sim.so       \n     0.57%  libosmvendor.so.5.0.0\n     0.52%  libopensm.so.9.1.0   \n     0.36%  libibumad.so.3.2.44.0\n     0.21%  [vdso]               \n     0.08%  libibmad.so.5.3.44.0 \n\n";
        let v = parse_perf_report(report).unwrap();
        assert_eq!(v.len(), 10);
        assert_eq!(v[0].object, "[kernel.kallsyms]");
        assert_eq!(v[0].part, Part::Kernel);
        assert!((v[0].share - 0.6932).abs() < 1e-12);
        let parts = by_part(&v);
        // own: osmcomp + opensm + libopensm; transport: umad2sim + vendor
        // + ibumad + ibmad; C: libc + vdso.
        for (got, want) in parts.iter().zip([0.1879, 0.0174, 0.1015, 0.6932]) {
            assert!((got - want).abs() < 1e-9, "{parts:?}");
        }
        assert_eq!(Part::of("ibkit"), Part::Own);
        assert_eq!(
            Part::of("/usr/lib/x86_64-linux-gnu/libibumad.so.3"),
            Part::Transport
        );
        assert_eq!(Part::of("ld-linux-x86-64.so.2"), Part::CLibrary);
        for bad in [
            "",
            "\n# only a comment\n",
            "12.5 opensm",
            "abc%  opensm",
            "101%  opensm",
            "5%",
        ] {
            assert!(parse_perf_report(bad).is_err(), "{bad:?}");
        }
        assert!(parse_perf_report("12.5 opensm")
            .unwrap_err()
            .contains("12.5 opensm"));
    }

    /// The load bench's verdict takes each of its paths, for either of
    /// ibkit's runs.
    #[test]
    fn the_load_verdict_names_what_is_wrong() {
        let bench = |o: SmUnderLoad, k: SmUnderLoad, d: SmUnderLoad| SaLoadBench {
            topology: "t".into(),
            seconds: 1.0,
            lids: 2,
            opensm: o,
            ibkit: k,
            ibkit_direct: d,
        };
        let ok = |cpu| side("ibkit", cpu, 0, 0, true);
        let good = bench(side("OpenSM", 20.0, 0, 0, true), ok(10.0), ok(4.0));
        assert_eq!(good.failure(), None);
        assert_eq!(good.cpu_ratio(), [2.0]);
        assert_eq!(good.cpu_ratio_direct(), [5.0]);
        let o = || side("OpenSM", 20.0, 0, 0, true);
        let cases = [
            (
                bench(side("OpenSM", 20.0, 1, 0, true), ok(10.0), ok(4.0)),
                "1 refused",
            ),
            (
                bench(o(), side("ibkit", 10.0, 0, 3, true), ok(4.0)),
                "3 lost",
            ),
            (
                bench(o(), ok(10.0), side("direct", 4.0, 0, 2, true)),
                "2 lost",
            ),
            (
                bench(o(), side("ibkit", 10.0, 0, 0, false), ok(4.0)),
                "SIGTERM",
            ),
            (
                bench(o(), ok(10.0), side("direct", 4.0, 0, 0, false)),
                "direct did not exit cleanly",
            ),
            (bench(o(), ok(f64::NAN), ok(4.0)), "ibkit's CPU at window 1"),
            (bench(o(), ok(10.0), ok(0.0)), "could not be measured (0 µs"),
            (
                bench(side("OpenSM", f64::NAN, 0, 0, true), ok(10.0), ok(4.0)),
                "OpenSM's CPU",
            ),
        ];
        for (b, says) in cases {
            let f = b.failure().unwrap_or_default();
            assert!(f.contains(says), "{says}: {f}");
        }
        // Slower than OpenSM either way is a ratio under 1, not a failure.
        let slower = bench(o(), ok(30.0), ok(25.0));
        assert_eq!(slower.failure(), None);
        assert_eq!(slower.cpu_ratio(), [20.0 / 30.0]);
        assert_eq!(slower.cpu_ratio_direct(), [0.8]);
    }
}
