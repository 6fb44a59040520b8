//! The peer-tool harness: Debian's ibsim, OpenSM and `libumad2sim.so`
//! runs, and ibkit's own `fabric serve` in a child process, as the peer
//! tests and `ibkit bench` drive them.
//!
//! OpenSM's SMPs are counted as the responses ibsim sends back (`ibsim -v`
//! logs one line per reply; every Get and Set of a bring-up is answered).
//! Its times come from its log: the start of discovery ("Entering
//! DISCOVERING state"), the end of discovery ("Entering MASTER state"), the
//! end of routing ("… tables configured on all switches") and "SUBNET UP".

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::{to_ibnetdiscover, Topology};
use smi::sm::{Engine, Sm, SmConfig};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The preload through which libibumad programs talk to ibsim, where
/// Debian's package `libumad2sim0` put it (`dpkg -L libumad2sim0`); `None`
/// when the package is not installed.
pub fn umad2sim() -> Option<&'static Path> {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let out = Command::new("dpkg")
                .args(["-L", "libumad2sim0"])
                .stderr(Stdio::null())
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(PathBuf::from)
                .find(|p| p.file_name().is_some_and(|n| n == "libumad2sim.so") && p.exists())
        })
        .as_deref()
}

/// What OpenSM did on ibsim.
#[derive(Clone, Debug, Default, serde::Serialize)]
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
    if umad2sim().is_none() {
        missing.push("libumad2sim.so (Debian package libumad2sim0)");
    }
    if !have("/usr/sbin/opensm") {
        missing.push("opensm (Debian package opensm)");
    }
    (!missing.is_empty()).then(|| format!("missing: {}", missing.join(", ")))
}

/// A simulator that serves ibsim's client protocol to libibumad programs
/// run under `libumad2sim.so`: Debian's ibsim, or `ibkit fabric serve`.
pub trait Simulator {
    /// A command that runs `program` as a client attached to the first CA.
    fn client(&self, program: &std::ffi::OsStr) -> Command;
    /// A command that runs `program` as a client attached to node `host`.
    fn client_at(&self, program: &std::ffi::OsStr, host: &str) -> Command;
    /// The simulator's process.
    fn pid(&self) -> u32;
    /// SMPs the simulator has answered so far, where it counts them.
    fn answered(&self) -> Option<u64>;
    /// A command of ibkit's control interface (`ibkit fabric ctl`), where
    /// the simulator has one.
    fn control(&self, _command: &str) -> Option<Result<String, String>> {
        None
    }
}

/// CPU milliseconds (user and system) process `pid` has used so far.
pub fn cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    Some(ticks * 1e3 / hz.max(1.0))
}

/// The name of the first CA of `topo`, where clients attach.
pub fn first_ca(topo: &Topology) -> Result<String, String> {
    topo.nodes
        .iter()
        .find(|x| x.kind == mad_core::attr::NodeType::ChannelAdapter)
        .map(|x| x.name.clone())
        .ok_or_else(|| "the fabric has no CA for a client".to_string())
}

/// Where libumad2sim clients run: a directory in memory (`/dev/shm`)
/// where the machine has one, else under the system's temporary one.
/// Each client writes and removes a fake sysfs tree of about fifty
/// files; on this project's machines (ext4 mounted with `discard`) that
/// made a client take 14 ms against 5.5 ms in memory, and the peer tests
/// start tens of thousands of them. Chosen and made once a process.
fn umad2sim_scratch() -> &'static Path {
    static SCRATCH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SCRATCH.get_or_init(|| {
        let tmp = std::env::temp_dir();
        let dir = scratch_under(Path::new("/dev/shm"), &tmp);
        if std::fs::create_dir_all(&dir).is_ok() {
            return dir;
        }
        let dir = tmp.join("ibkit-umad2sim");
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

/// `ibkit-umad2sim` under `shm` if it is a directory that may be
/// written, else under `tmp`.
fn scratch_under(shm: &Path, tmp: &Path) -> PathBuf {
    let writable = std::fs::metadata(shm).is_ok_and(|m| m.is_dir() && !m.permissions().readonly());
    if writable { shm } else { tmp }.join("ibkit-umad2sim")
}

/// `program` as a libibumad client of the simulator on socket `sock`,
/// attached at node `host`. It runs in a scratch directory
/// ([`umad2sim_scratch`]), because libumad2sim leaves a fake sysfs tree
/// (`sys-PID/`) in its client's working directory.
fn umad2sim_client(program: &std::ffi::OsStr, sock: &str, host: &str) -> Command {
    let scratch = umad2sim_scratch();
    forget_dead_clients(scratch);
    let mut c = Command::new(program);
    c.current_dir(scratch);
    c.env(
        "LD_PRELOAD",
        umad2sim().unwrap_or(Path::new("libumad2sim.so")),
    )
    .env("IBSIM_SOCKNAME", sock)
    .env("SIM_HOST", host)
    .stdin(Stdio::null());
    c
}

/// Removes the fake sysfs trees (`sys-PID`) that libumad2sim clients left
/// in `scratch` when they were killed: libumad2sim cannot open its port in
/// a process whose PID finds such a tree of a dead one (seen as
/// `mad_rpc_open_port: can't open UMAD port` from smpquery, once PIDs
/// came round again).
fn forget_dead_clients(scratch: &Path) {
    let Ok(dir) = std::fs::read_dir(scratch) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("sys-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// An ibsim serving a fabric on its own socket; killed on drop.
pub struct Ibsim {
    child: Child,
    log: PathBuf,
    sock: String,
    host: String,
    verbose: bool,
}

impl Ibsim {
    /// Starts ibsim (verbose, so that its replies can be counted) on `topo`,
    /// written into `dir`; clients attach to the first CA.
    pub fn start(topo: &Topology, dir: &Path) -> Result<Ibsim, String> {
        Ibsim::start_with(topo, dir, true)
    }

    /// Starts ibsim on `topo`; `verbose` makes it log every reply (so that
    /// they can be counted), at a cost in speed.
    pub fn start_with(topo: &Topology, dir: &Path, verbose: bool) -> Result<Ibsim, String> {
        if let Some(m) = missing_tools() {
            return Err(m);
        }
        let net = dir.join("fabric.net");
        std::fs::write(&net, to_ibnetdiscover(topo)).map_err(|e| e.to_string())?;
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let sock = format!(
            "ibkit{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let log = dir.join(format!("ibsim-{sock}.log"));
        let out = dir.join(format!("ibsim-{sock}.out"));
        let n = topo.nodes.len() + 16;
        let ports = topo
            .nodes
            .iter()
            .map(|x| usize::from(x.ports) + 1)
            .sum::<usize>()
            + 64;
        let child = Command::new("ibsim")
            .args(["-s", "-n"])
            .args(verbose.then_some("-v"))
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
            .stdout(std::fs::File::create(&out).map_err(|e| e.to_string())?)
            .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("ibsim: {e}"))?;
        let host = first_ca(topo)?;
        let mut sim = Ibsim {
            child,
            log,
            sock,
            host,
            verbose,
        };
        // Wait until ibsim has read the fabric and listens: it says
        // "Network simulator ready" on its standard output.
        let t0 = Instant::now();
        let limit = Duration::from_secs(5 + topo.nodes.len() as u64 / 500);
        loop {
            if let Ok(Some(st)) = sim.child.try_wait() {
                let text = std::fs::read_to_string(&sim.log).unwrap_or_default();
                return Err(format!("ibsim exited ({st}): {}", text.trim()));
            }
            let ready = std::fs::read_to_string(&out).is_ok_and(|t| t.contains("simulator ready"));
            if ready || t0.elapsed() > limit {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        Ok(sim)
    }

    /// A command that runs as a libibumad client of this ibsim, attached to
    /// the first CA.
    pub fn client(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        umad2sim_client(program.as_ref(), &self.sock, &self.host)
    }

    /// A command that runs as a libibumad client of this ibsim, attached to
    /// the node named `host`.
    pub fn client_on(&self, program: impl AsRef<std::ffi::OsStr>, host: &str) -> Command {
        umad2sim_client(program.as_ref(), &self.sock, host)
    }

    /// MADs ibsim has answered so far (0 unless started verbose).
    pub fn replies(&self) -> u64 {
        std::fs::File::open(&self.log)
            .map(|f| {
                BufReader::new(f)
                    .lines()
                    .map_while(Result::ok)
                    .filter(|l| l.contains("replying"))
                    .count() as u64
            })
            .unwrap_or(0)
    }
}

impl Simulator for Ibsim {
    fn client(&self, program: &std::ffi::OsStr) -> Command {
        Ibsim::client(self, program)
    }
    fn client_at(&self, program: &std::ffi::OsStr, host: &str) -> Command {
        umad2sim_client(program, &self.sock, host)
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn answered(&self) -> Option<u64> {
        self.verbose.then(|| self.replies())
    }
}

/// `ibkit fabric serve` in a child process on its own socket; killed on
/// drop.
pub struct Served {
    child: Child,
    sock: String,
    host: String,
}

impl Served {
    /// Starts `exe fabric serve` on topology `spec` with `vfs` VFs per
    /// hypervisor, and waits until it answers on its control socket.
    pub fn start(exe: &Path, spec: &str, vfs: usize, extra: &[&str]) -> Result<Served, String> {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let sock = format!(
            "ibkitserve{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
        let host = first_ca(&topo)?;
        let child = Command::new(exe)
            .args(["fabric", "serve", "--topology", spec, "--socket", &sock])
            .args(["--vfs", &vfs.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("ibkit fabric serve: {e}"))?;
        let mut s = Served { child, sock, host };
        let t0 = Instant::now();
        loop {
            if fabric::serve::ctl(&s.sock, "stats").is_ok() {
                return Ok(s);
            }
            if let Ok(Some(st)) = s.child.try_wait() {
                return Err(format!("ibkit fabric serve exited: {st}"));
            }
            if t0.elapsed() > Duration::from_secs(120) {
                return Err("ibkit fabric serve did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The socket base name (`IBSIM_SOCKNAME`).
    pub fn socket(&self) -> &str {
        &self.sock
    }

    /// A command that runs `program` as a client attached at node `host`.
    pub fn client_on(&self, program: impl AsRef<std::ffi::OsStr>, host: &str) -> Command {
        umad2sim_client(program.as_ref(), &self.sock, host)
    }

    /// Sends a control command (see `ibkit fabric ctl`).
    pub fn ctl(&self, command: &str) -> Result<String, String> {
        fabric::serve::ctl(&self.sock, command).map_err(|e| e.to_string())
    }

    /// The server's counters (`ibkit fabric ctl stats`), parsed.
    pub fn stats(&self) -> Result<serde_json::Value, String> {
        serde_json::from_str(&self.ctl("stats")?).map_err(|e| e.to_string())
    }
}

impl Simulator for Served {
    fn client(&self, program: &std::ffi::OsStr) -> Command {
        umad2sim_client(program, &self.sock, &self.host)
    }
    fn client_at(&self, program: &std::ffi::OsStr, host: &str) -> Command {
        umad2sim_client(program, &self.sock, host)
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn answered(&self) -> Option<u64> {
        self.stats().ok()?["answered"].as_u64()
    }
    fn control(&self, command: &str) -> Option<Result<String, String>> {
        Some(self.ctl(command))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    let sim = Ibsim::start(topo, dir)?;
    run_opensm_on(&sim, routing, dir)
}

/// What an SM applies beyond routing, given the same to OpenSM and to
/// ibkit: a partition configuration, QoS with OpenSM's defaults, an LMC.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// `partitions.conf` (OpenSM `-P`, ibkit `--partitions`).
    pub partitions: Option<std::path::PathBuf>,
    /// QoS (OpenSM `-Q`, ibkit `--qos`).
    pub qos: bool,
    /// LMC of the CA ports (OpenSM `-l`, ibkit `--lmc`).
    pub lmc: u8,
    /// The LMC given to switches whose port 0 is enhanced too (OpenSM's
    /// `lmc_esp0 TRUE` in a configuration file, ibkit `--lmc-esp0`).
    pub lmc_esp0: bool,
}

impl Policy {
    /// OpenSM's options for it. What OpenSM takes only from a
    /// configuration file (`lmc_esp0`) is written to
    /// `dir/opensm-policy.conf`, given with `-F`.
    pub fn opensm_args(&self, dir: &Path) -> Result<Vec<std::ffi::OsString>, String> {
        let mut a = Vec::new();
        if self.lmc_esp0 {
            let conf = dir.join("opensm-policy.conf");
            std::fs::write(&conf, "lmc_esp0 TRUE\n")
                .map_err(|e| format!("{}: {e}", conf.display()))?;
            a.push("-F".into());
            a.push(conf.into_os_string());
        }
        if let Some(p) = &self.partitions {
            a.push("-P".into());
            a.push(p.clone().into_os_string());
        }
        if self.qos {
            a.push("-Q".into());
        }
        if self.lmc > 0 {
            a.push("-l".into());
            a.push(self.lmc.to_string().into());
        }
        Ok(a)
    }

    /// `ibkit sm`'s options for it.
    pub fn ibkit_args(&self) -> Vec<std::ffi::OsString> {
        let mut a = Vec::new();
        if let Some(p) = &self.partitions {
            a.push("--partitions".into());
            a.push(p.clone().into_os_string());
        }
        if self.qos {
            a.push("--qos".into());
        }
        if self.lmc > 0 {
            a.push("--lmc".into());
            a.push(self.lmc.to_string().into());
        }
        if self.lmc_esp0 {
            a.push("--lmc-esp0".into());
        }
        a
    }

    /// `cfg` with what of the policy is the SM's configuration (the LMC,
    /// and whether enhanced switch ports 0 take it).
    pub fn sm_config(&self, cfg: SmConfig) -> SmConfig {
        SmConfig {
            lmc: self.lmc,
            lmc_esp0: self.lmc_esp0,
            ..cfg
        }
    }

    /// Applies it to an SM that has not started.
    pub fn apply(&self, sm: &mut Sm) -> Result<(), String> {
        if let Some(p) = &self.partitions {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let cfg =
                smi::sm::partitions::parse(&text).map_err(|e| format!("{}: {e}", p.display()))?;
            sm.set_partitions(cfg);
        }
        if self.qos {
            sm.set_qos(smi::sm::qos::QosConfig::default());
        }
        Ok(())
    }
}

/// Runs `opensm -o` with `routing` as a client of `sim`, logging into
/// `dir` (with a fresh cache directory, so that nothing of an earlier run
/// is remembered). `smps` is what `sim` counted (0 where it does not).
pub fn run_opensm_on(
    sim: &dyn Simulator,
    routing: Engine,
    dir: &Path,
) -> Result<OpenSmRun, String> {
    run_opensm_with(sim, routing, dir, &Policy::default())
}

/// [`run_opensm_on`] with `policy` applied.
pub fn run_opensm_with(
    sim: &dyn Simulator,
    routing: Engine,
    dir: &Path,
    policy: &Policy,
) -> Result<OpenSmRun, String> {
    let osm_log = dir.join("opensm.log");
    let cache = dir.join("opensm-cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&osm_log);
    let engine = routing.name();
    let t = Instant::now();
    let out = sim
        .client("opensm".as_ref())
        .env("OSM_CACHE_DIR", cache)
        .args(["-o", "-f"])
        .arg(&osm_log)
        .args(["-R", engine])
        .args(policy.opensm_args(dir)?)
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
    let smps = sim.answered().unwrap_or(0);
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

/// ibkit's SM on the same ibsim, through a umad port (`ibkit sm --once`,
/// run as `exe` under the preload): SMPs (its own count and ibsim's
/// replies) and milliseconds to the subnet up.
pub fn run_ibkit_on_ibsim(
    exe: &Path,
    topo: &Topology,
    routing: Engine,
    dir: &Path,
    policy: &Policy,
) -> Result<(u64, u64, f64), String> {
    let sim = Ibsim::start(topo, dir)?;
    let (v, _) = run_ibkit_sm_with(exe, &sim, routing, policy)?;
    std::thread::sleep(Duration::from_millis(100));
    Ok((
        v["smps"].as_u64().unwrap_or(0),
        sim.replies(),
        v["up_ms"].as_f64().unwrap_or(f64::NAN),
    ))
}

/// Runs `ibkit sm --once --json` (the binary `exe`) with `routing` as a
/// client of `sim`: what it printed, and its wall milliseconds.
pub fn run_ibkit_sm_on(
    exe: &Path,
    sim: &dyn Simulator,
    routing: Engine,
) -> Result<(serde_json::Value, f64), String> {
    run_ibkit_sm_with(exe, sim, routing, &Policy::default())
}

/// [`run_ibkit_sm_on`] with `policy` applied.
pub fn run_ibkit_sm_with(
    exe: &Path,
    sim: &dyn Simulator,
    routing: Engine,
    policy: &Policy,
) -> Result<(serde_json::Value, f64), String> {
    let t = Instant::now();
    let out = sim
        .client(exe.as_os_str())
        // Through libumad2sim, as OpenSM runs: transport against the
        // same transport.
        .args([
            "sm",
            "--transport",
            "umad",
            "--once",
            "--json",
            "--routing",
            routing.name(),
        ])
        .args(policy.ibkit_args())
        .output()
        .map_err(|e| format!("ibkit sm: {e}"))?;
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        return Err(format!(
            "ibkit sm failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    Ok((v, wall_ms))
}

/// ibkit's side: bring-up on the simulator and route computation alone.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IbkitRun {
    /// SMPs sent.
    pub smps: u64,
    /// Wall milliseconds of the bring-up on the simulator.
    #[serde(rename = "bring_up_wall_ms")]
    pub bring_up_ms: f64,
    /// Simulated milliseconds to the subnet up.
    pub sim_ms: f64,
    /// Wall milliseconds of route computation alone.
    pub routing_ms: f64,
    /// Up and verified.
    #[serde(rename = "up")]
    pub ok: bool,
}

/// Brings `topo` up with ibkit's SM on the simulator.
pub fn run_ibkit(topo: Topology, routing: Engine) -> Result<IbkitRun, String> {
    run_ibkit_with(topo, routing, &Policy::default())
}

/// [`run_ibkit`] with `policy` applied.
pub fn run_ibkit_with(
    topo: Topology,
    routing: Engine,
    policy: &Policy,
) -> Result<IbkitRun, String> {
    let mut f = Fabric::new(topo, SimConfig::default()).map_err(|e| e.to_string())?;
    let mut sm = Sm::new(policy.sm_config(SmConfig {
        routing,
        ..SmConfig::default()
    }));
    policy.apply(&mut sm)?;
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

/// CPU nanoseconds all the threads of process `pid` have run so far
/// (the first field of each `/proc/PID/task/TID/schedstat`): finer than
/// [`cpu_ms`]'s clock ticks, for the short runs of a load.
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ns = 0u64;
    for t in tasks.flatten() {
        let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        ns += s
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(ns)
}

/// An SM left running as a client of a simulator, master of its fabric
/// once started; killed on drop.
pub struct RunningSm {
    child: Child,
    /// What it prints on its standard output, read to the end.
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl RunningSm {
    /// Its process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it with SIGKILL (no clean exit, no handover) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops it with SIGTERM and waits up to `wait` for it to exit
    /// (then kills it): whether it exited by itself, successfully, and
    /// what it printed on its standard output (where that was kept).
    pub fn stop(mut self, wait: Duration) -> (bool, String) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let t = Instant::now();
        let mut clean = false;
        while t.elapsed() < wait {
            if let Ok(Some(st)) = self.child.try_wait() {
                clean = st.success();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let out = self
            .stdout
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        (clean, out)
    }
}

impl Drop for RunningSm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// OpenSM (Debian's, defaults) as the SM of `sim`, logging into `dir`
/// with a fresh cache, once its log says SUBNET UP (within `wait`).
pub fn start_opensm(sim: &dyn Simulator, dir: &Path, wait: Duration) -> Result<RunningSm, String> {
    start_opensm_with(sim, dir, wait, &[])
}

/// [`start_opensm`] with `extra` arguments (`-P FILE`, `-Q`, …).
pub fn start_opensm_with(
    sim: &dyn Simulator,
    dir: &Path,
    wait: Duration,
    extra: &[&str],
) -> Result<RunningSm, String> {
    opensm_in(sim.client("opensm".as_ref()), dir, wait, extra, "SUBNET UP")
}

/// [`start_opensm_with`] as the command `cmd` (a client of the simulator
/// the caller made, with the environment it wants: `OSM_TMP_DIR` for
/// OpenSM's dumps, say).
pub fn start_opensm_cmd(
    cmd: Command,
    dir: &Path,
    wait: Duration,
    extra: &[&str],
) -> Result<RunningSm, String> {
    opensm_in(cmd, dir, wait, extra, "SUBNET UP")
}

/// `ibkit sm` (the binary `exe`, for good, `extra` arguments added) as
/// the SM of `sim`, once it says SUBNET UP (within `wait`).
pub fn start_ibkit_sm(
    exe: &Path,
    sim: &dyn Simulator,
    extra: &[&str],
    wait: Duration,
) -> Result<RunningSm, String> {
    let mut w = WatchedSm::spawn(sim.client(exe.as_os_str()), extra)?;
    w.wait_for("SUBNET UP", wait)
        .map_err(|_| "ibkit sm did not say SUBNET UP".to_string())?;
    // Its log is still read to the end, so that the SM never blocks on
    // a full pipe.
    Ok(w.sm)
}

/// `ibkit sm` (the binary `exe`) attached at node `host` of `sim`, its
/// log lines (with the time each was read) kept for [`WatchedSm::wait_for`].
pub struct WatchedSm {
    /// The process.
    pub sm: RunningSm,
    lines: std::sync::mpsc::Receiver<(Instant, String)>,
    /// Every line read so far.
    pub seen: Vec<(Instant, String)>,
}

impl WatchedSm {
    /// Starts `ibkit sm` with `extra` at `host`, logging at info level.
    pub fn start(
        exe: &Path,
        sim: &dyn Simulator,
        host: &str,
        extra: &[&str],
    ) -> Result<WatchedSm, String> {
        WatchedSm::spawn(sim.client_at(exe.as_os_str(), host), extra)
    }

    /// `ibkit sm` with `extra`, as the client `cmd` of a simulator (a
    /// command of [`Simulator::client_at`], with any environment of the
    /// caller's added).
    pub fn spawn(mut cmd: Command, extra: &[&str]) -> Result<WatchedSm, String> {
        let mut child = cmd
            .arg("sm")
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("ibkit sm: {e}"))?;
        let out = child.stdout.take().map(|mut o| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut o, &mut s);
                s
            })
        });
        let err = child.stderr.take();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let Some(err) = err else { return };
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send((Instant::now(), l));
            }
        });
        Ok(WatchedSm {
            sm: RunningSm { child, stdout: out },
            lines: rx,
            seen: Vec::new(),
        })
    }

    /// Stops it with SIGTERM (see [`RunningSm::stop`]): whether it exited
    /// cleanly, and every log line it wrote, the last ones included.
    pub fn stop(self, wait: Duration) -> (bool, Vec<(Instant, String)>) {
        let WatchedSm {
            sm,
            lines,
            mut seen,
        } = self;
        let (clean, _) = sm.stop(wait);
        // The writer is gone: the channel ends once the reader drained it.
        while let Ok(l) = lines.recv_timeout(Duration::from_secs(2)) {
            seen.push(l);
        }
        (clean, seen)
    }

    /// The time of the first line, read after any seen before this call,
    /// that contains `marker`, waiting at most `wait`.
    pub fn wait_for(&mut self, marker: &str, wait: Duration) -> Result<Instant, String> {
        let t = Instant::now();
        loop {
            let left = wait.saturating_sub(t.elapsed());
            match self.lines.recv_timeout(left) {
                Ok((at, l)) => {
                    let hit = l.contains(marker);
                    self.seen.push((at, l));
                    if hit {
                        return Ok(at);
                    }
                }
                Err(_) => {
                    let tail: Vec<&str> = self
                        .seen
                        .iter()
                        .rev()
                        .take(8)
                        .map(|(_, l)| l.as_str())
                        .collect();
                    return Err(format!(
                        "ibkit sm did not say {marker:?} within {wait:?}; last lines: {tail:?}"
                    ));
                }
            }
        }
    }
}

/// The master SM as `sminfo` (infiniband-diags) at a host reads it: the
/// SM at its port's MasterSMLID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmSeen {
    /// Its port GUID.
    pub guid: u64,
    /// Its priority.
    pub priority: u8,
    /// Its state (3: master, 2: standby).
    pub state: u8,
}

/// Reads `sminfo`'s line: "sminfo: sm lid 1 sm guid 0x…, activity count 9
/// priority 10 state 3 SMINFO_MASTER".
pub fn parse_sminfo(text: &str) -> Option<SmSeen> {
    let after = |w: &str| {
        let mut words = text.split([' ', ',']).filter(|x| !x.is_empty());
        words.position(|x| x == w)?;
        words.next()
    };
    let guid = u64::from_str_radix(after("guid")?.trim_start_matches("0x"), 16).ok()?;
    Some(SmSeen {
        guid,
        priority: after("priority")?.parse().ok()?,
        state: after("state")?.parse().ok()?,
    })
}

/// Runs `sminfo` (with `extra` arguments) at `host` of `sim`.
pub fn sminfo(sim: &dyn Simulator, host: &str, extra: &[&str]) -> Result<SmSeen, String> {
    let out = sim
        .client_at("sminfo".as_ref(), host)
        .args(extra)
        .output()
        .map_err(|e| format!("sminfo: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "sminfo: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    parse_sminfo(&text).ok_or_else(|| format!("sminfo said {text:?}"))
}

/// OpenSM at node `host` of `sim` with `extra` arguments, logging into
/// `dir` (its own cache there), once its log says `marker` (within
/// `wait`): "SUBNET UP" for a master, "STANDBY" for a standby.
pub fn start_opensm_at(
    sim: &dyn Simulator,
    host: &str,
    dir: &Path,
    wait: Duration,
    extra: &[&str],
    marker: &str,
) -> Result<RunningSm, String> {
    opensm_in(
        sim.client_at("opensm".as_ref(), host),
        dir,
        wait,
        extra,
        marker,
    )
}

/// [`start_opensm_at`] with `cache` as OpenSM's cache directory
/// (`OSM_CACHE_DIR`), taken as it is, as [`start_opensm_cached`].
pub fn start_opensm_cached_at(
    sim: &dyn Simulator,
    host: &str,
    dir: &Path,
    cache: &Path,
    wait: Duration,
    extra: &[&str],
    marker: &str,
) -> Result<RunningSm, String> {
    opensm_cached(
        sim.client_at("opensm".as_ref(), host),
        dir,
        cache,
        wait,
        extra,
        marker,
    )
}

/// OpenSM as the client `cmd`, logging into `dir` with a fresh cache,
/// once its log says `marker` (within `wait`).
fn opensm_in(
    cmd: Command,
    dir: &Path,
    wait: Duration,
    extra: &[&str],
    marker: &str,
) -> Result<RunningSm, String> {
    let cache = dir.join("opensm-cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    opensm_cached(cmd, dir, &cache, wait, extra, marker)
}

/// [`start_opensm_with`] with `cache` as OpenSM's cache directory
/// (`OSM_CACHE_DIR`: its `guid2lid`, `guid2mkey`, `neighbors`), taken as
/// it is: what an earlier SM left there is read.
pub fn start_opensm_cached(
    sim: &dyn Simulator,
    dir: &Path,
    cache: &Path,
    wait: Duration,
    extra: &[&str],
) -> Result<RunningSm, String> {
    opensm_cached(
        sim.client("opensm".as_ref()),
        dir,
        cache,
        wait,
        extra,
        "SUBNET UP",
    )
}

fn opensm_cached(
    mut cmd: Command,
    dir: &Path,
    cache: &Path,
    wait: Duration,
    extra: &[&str],
    marker: &str,
) -> Result<RunningSm, String> {
    let log = dir.join("opensm.log");
    let _ = std::fs::remove_file(&log);
    let out = dir.join("opensm.out");
    let child = cmd
        .env("OSM_CACHE_DIR", cache)
        // -d2: the log flushed after each message, so SUBNET UP can be
        // seen while OpenSM runs.
        .args(["-d2", "-f"])
        .arg(&log)
        .args(extra)
        .stdout(std::fs::File::create(&out).map_err(|e| e.to_string())?)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("opensm: {e}"))?;
    let mut sm = RunningSm {
        child,
        stdout: None,
    };
    let t = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains(marker)) {
        if t.elapsed() > wait || sm.child.try_wait().ok().flatten().is_some() {
            let said = std::fs::read_to_string(&out).unwrap_or_default();
            return Err(format!("OpenSM did not say {marker}: {}", said.trim()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(sm)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn sminfo_is_read_as_infiniband_diags_prints_it() {
        let t = "sminfo: sm lid 1 sm guid 0x2c90400000101, activity count 9 priority 10 \
                 state 3 SMINFO_MASTER\n";
        assert_eq!(
            parse_sminfo(t),
            Some(SmSeen {
                guid: 0x2c90400000101,
                priority: 10,
                state: 3
            })
        );
        assert_eq!(parse_sminfo("sminfo: iberror: failed"), None);
    }

    #[test]
    fn libumad2sim_clients_run_in_memory_where_there_is_some() {
        let tmp = std::env::temp_dir();
        let d = tmp.join(format!("ibkit-scratch-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // A directory that may be written: the clients run there.
        assert_eq!(scratch_under(&d, &tmp), d.join("ibkit-umad2sim"));
        // None there, a file in its place, or one that may not be
        // written: under the temporary directory.
        let none = d.join("missing");
        assert_eq!(scratch_under(&none, &tmp), tmp.join("ibkit-umad2sim"));
        let file = d.join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(scratch_under(&file, &tmp), tmp.join("ibkit-umad2sim"));
        let ro = d.join("ro");
        std::fs::create_dir_all(&ro).unwrap();
        let mut perm = std::fs::metadata(&ro).unwrap().permissions();
        perm.set_readonly(true);
        std::fs::set_permissions(&ro, perm).unwrap();
        assert_eq!(scratch_under(&ro, &tmp), tmp.join("ibkit-umad2sim"));
        let mut perm = std::fs::metadata(&ro).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perm.set_readonly(false);
        std::fs::set_permissions(&ro, perm).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn libumad2sim_is_found_where_its_package_put_it() {
        match umad2sim() {
            Some(p) => {
                assert!(p.is_absolute() && p.exists(), "{}", p.display());
                assert_eq!(p.file_name().unwrap(), "libumad2sim.so");
                assert!(missing_tools().is_none_or(|m| !m.contains("libumad2sim")));
            }
            None => {
                assert!(missing_tools().unwrap().contains("libumad2sim0"));
                crate::skip("libumad2sim_is_found", "libumad2sim0 is not installed");
            }
        }
    }

    /// CPU time by schedstat grows as this process works, and a process
    /// that is not there has none.
    #[test]
    fn cpu_ns_counts_this_process() {
        let me = std::process::id();
        let a = super::cpu_ns(me).unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let b = super::cpu_ns(me).unwrap();
        assert!(b >= a + 10_000_000, "{a} → {b}");
        assert_eq!(super::cpu_ns(u32::MAX), None);
    }
}
