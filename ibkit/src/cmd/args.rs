//! Arguments more than one command takes, and their parsers.

/// A loss probability: a finite number from 0 to 1.
pub fn parse_loss(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?} is not a probability from 0 to 1")),
    }
}

/// VFs per hypervisor: 0 to the most a hypervisor models.
pub fn parse_vfs(s: &str) -> Result<usize, String> {
    let max = smi::sma::hypervisor::MAX_VFS;
    match s.parse::<usize>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("{s:?} is not a number of VFs from 0 to {max}")),
    }
}

/// Sets up logging on standard error for a long-running command, at
/// level `default` (`error`, `warn`, `info`, `debug`), or what `RUST_LOG`
/// says.
pub fn init_logging(default: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .try_init();
}

/// The help of every `--topology`.
pub const TOPOLOGY_HELP: &str =
    "mport-ntree:M:N, fat-tree-324|648|5832|11664, random:SWITCHES:SEED, mesh:X:Y(:HOSTS), torus:X:Y(:HOSTS), mixed-rates, file:PATH.";

/// A LID policy by name: prepopulated or dynamic.
pub fn parse_policy(s: &str) -> Result<smi::sm::LidPolicy, String> {
    smi::sm::LidPolicy::from_name(s)
        .ok_or_else(|| format!("unknown LID policy {s:?}: prepopulated or dynamic"))
}

/// A routing engine that computes its routes, by name: minhop, updn,
/// ftree, dor or lash (`file` needs an `lfts_file`, which only `ibkit sm` takes).
pub fn parse_engine(s: &str) -> Result<smi::sm::Engine, String> {
    smi::sm::Engine::from_name(s)
        .filter(|&e| e != smi::sm::Engine::File)
        .ok_or_else(|| format!("unknown routing engine {s:?}: minhop, updn, ftree, dor or lash"))
}

/// The SM's routing engine by name: minhop, updn, ftree, file, dor or lash.
pub fn parse_sm_engine(s: &str) -> Result<smi::sm::Engine, String> {
    smi::sm::Engine::from_name(s).ok_or_else(|| {
        format!("unknown routing engine {s:?}: minhop, updn, ftree, file, dor or lash")
    })
}

/// The engine where `--routing file`'s tables do not fit: minhop, updn,
/// ftree, dor or lash.
pub fn parse_fallback_engine(s: &str) -> Result<smi::sm::Engine, String> {
    smi::sm::Engine::from_name(s)
        .filter(|&e| e != smi::sm::Engine::File)
        .ok_or_else(|| format!("unknown fallback engine {s:?}: minhop, updn, ftree, dor or lash"))
}

/// Partition enforcement by OpenSM's name: both, in, out or off.
pub fn parse_part_enforce(s: &str) -> Result<smi::sm::PartEnforce, String> {
    smi::sm::PartEnforce::from_opensm(s)
        .ok_or_else(|| format!("unknown partition enforcement {s:?}: both, in, out or off"))
}

/// What a long command says while it works, on standard error: on a
/// terminal, a progress bar (steps done of `total`, elapsed time, the
/// current step) with the lines printed above it; elsewhere, the lines
/// alone; nothing with `quiet` (JSON output).
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
}

impl Progress {
    /// `total` steps; `quiet` says nothing.
    pub fn new(total: u64, quiet: bool) -> Progress {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let bar = (tty && !quiet).then(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "[{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Progress { bar, quiet }
    }

    /// A spinner for work of unknown length, saying `msg`, on a terminal;
    /// elsewhere `msg` as a line (nothing with `quiet`).
    pub fn spinner(msg: &str, quiet: bool) -> Progress {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let bar = (tty && !quiet).then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            b.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(120));
            b
        });
        let p = Progress { bar, quiet };
        p.line(msg);
        p
    }

    /// A line about the work.
    pub fn line(&self, s: &str) {
        match &self.bar {
            Some(b) => {
                b.println(s);
                b.set_message(s.trim().to_string());
            }
            None if !self.quiet => eprintln!("{s}"),
            None => {}
        }
    }

    /// What the bar says it is doing now (on a terminal only).
    pub fn status(&self, s: &str) {
        if let Some(b) = &self.bar {
            b.set_message(s.to_string());
        }
    }

    /// One step done.
    pub fn step(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// Removes the bar (before the command prints its results; dropping
    /// the `Progress` does it too).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Where `--transport` (`auto`, `umad` or `ibsim`) and `--sim-host` lead:
/// the simulator's socket base and the node to attach at, or `None` for a
/// umad port. `auto` takes the simulator when IBSIM_SOCKNAME is set; the
/// node is `--sim-host`, else SIM_HOST, else the simulator's choice.
pub fn simulator(transport: &str, sim_host: Option<&str>) -> Option<(String, Option<String>)> {
    let env = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
    let sock = env("IBSIM_SOCKNAME");
    let direct = match transport {
        "ibsim" => true,
        "umad" => false,
        _ => sock.is_some(),
    };
    direct.then(|| {
        (
            sock.unwrap_or_else(|| "sim".into()),
            sim_host.map(str::to_string).or_else(|| env("SIM_HOST")),
        )
    })
}

/// A number in decimal or `0x` hex (an SM_Key, a GUID).
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s:?} is not a number: {e}"))
}
