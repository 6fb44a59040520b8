//! `ibkit sm --transport umad`: ibkit's subnet manager (`smi::sm`) on a real
//! MAD stack — a umad port of a CA (libibumad through `verbs-sys`). On real
//! hardware that is a real subnet; under ibsim it is the simulated fabric,
//! with the `libumad2sim.so` preload, exactly as OpenSM is tested.

use super::args::parse_engine;
use mad_core::{Method, Smp};
use smi::sm::{Engine, LidPolicy, Phase, Sm, SmConfig};
use std::time::Instant;
use verbs_sys::umad::{UmadPort, ETIMEDOUT};

/// Options of `ibkit sm`.
#[derive(Clone, Debug, clap::Args)]
pub struct SmArgs {
    /// Only umad is available.
    #[arg(long, default_value = "umad")]
    pub transport: String,
    /// CA name (default: the first).
    #[arg(long)]
    pub ca: Option<String>,
    /// Port number (0: the first active).
    #[arg(long, default_value_t = 0)]
    pub port: u8,
    /// Stop once the subnet is up.
    #[arg(long)]
    pub once: bool,
    /// Routing engine: minhop, updn or ftree.
    #[arg(long, default_value = "minhop", value_parser = parse_engine)]
    pub routing: Engine,
    /// Milliseconds between light sweeps (without --once).
    #[arg(long, default_value_t = 10_000)]
    pub sweep_ms: u64,
    /// One JSON object at the end.
    #[arg(long)]
    pub json: bool,
    /// Log every SMP sent and received and every phase (the log's debug level; RUST_LOG chooses others).
    #[arg(long)]
    pub verbose: bool,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct SmRun {
    /// Nodes found.
    pub nodes: usize,
    /// Switches found.
    pub switches: usize,
    /// Highest LID assigned.
    pub lids: u16,
    /// SMPs sent.
    pub smps: u64,
    /// Milliseconds to the subnet up.
    pub up_ms: f64,
    /// Retransmissions.
    pub retries: u64,
    /// The subnet came up.
    pub up: bool,
    /// Every node: (node GUID, switch?, LID, LFT up to the highest LID for
    /// a switch).
    pub table: Vec<(u64, bool, u16, Vec<u8>)>,
}

/// Under libumad2sim (LD_PRELOAD names it), the simulator's control
/// socket must be there: libumad2sim would otherwise wait for it forever,
/// silently, on the first umad call.
fn check_simulator() -> Result<(), String> {
    let preload = std::env::var("LD_PRELOAD").unwrap_or_default();
    if !preload.contains("umad2sim") {
        return Ok(());
    }
    let base = std::env::var("IBSIM_SOCKNAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "sim".into());
    let name = fabric::ibsim::ctl_name(&base);
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&b).map_err(|e| e.to_string())?;
    let probe = std::os::unix::net::UnixDatagram::unbound().map_err(|e| e.to_string())?;
    probe.connect_addr(&addr).map_err(|e| {
        format!(
            "no simulator serves @{name} ({e}): start ibsim or `ibkit fabric serve --socket {base}`, or set IBSIM_SOCKNAME"
        )
    })
}

/// How long opening the umad port may take: libumad2sim waits for its
/// simulator without a word, and a wedged kernel driver may too.
const OPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Opens the umad port, or ends the process with a line saying why when
/// that takes longer than [`OPEN_WAIT`].
fn open_bounded(a: &SmArgs) -> Result<UmadPort, String> {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        std::thread::sleep(OPEN_WAIT);
        if !d.load(std::sync::atomic::Ordering::SeqCst) {
            eprintln!(
                "ibkit: opening the umad port took over {} s (is the simulator or the HCA's driver answering?)",
                OPEN_WAIT.as_secs()
            );
            std::process::exit(2);
        }
    });
    let port = UmadPort::open(a.ca.as_deref(), a.port).map_err(|e| e.to_string());
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    port
}

/// Runs the SM on a umad port until the subnet is up (`once`) or forever.
pub fn run_umad(a: &SmArgs) -> Result<SmRun, String> {
    check_simulator()?;
    let mut port = open_bounded(a)?;
    let attr = port.attr().clone();
    tracing::info!(
        "{} port {} (GUID {:#018x}, state {})",
        attr.ca,
        attr.port,
        attr.guid,
        attr.state
    );
    // Directed route (0x81) for discovery; LID-routed (0x01) for updates,
    // also receiving traps.
    let dr = port.register(0x81, 1, &[]).map_err(|e| e.to_string())?;
    let lr = port
        .register(0x01, 1, &[Method::Trap.into()])
        .map_err(|e| e.to_string())?;
    let cfg = SmConfig {
        routing: a.routing,
        lid_policy: LidPolicy::Prepopulated,
        sweep_interval_ms: (!a.once).then_some(a.sweep_ms),
        ..SmConfig::default()
    };
    let timeout = cfg.timeout_ms as i32;
    let mut sm = Sm::new(cfg);
    let t0 = Instant::now();
    let mut up_ms = None;
    let mut phase = sm.phase();
    loop {
        if sm.phase() != phase {
            phase = sm.phase();
            tracing::info!(
                "phase {phase:?} after {:.1} ms",
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        let now = t0.elapsed().as_millis() as u64;
        while let Some(t) = sm.poll_transmit(now) {
            let (agent, dlid) = match t.dlid {
                Some(l) => (lr, l.0),
                None => (dr, 0xFFFF),
            };
            // Requests are tracked by the kernel so that their responses
            // reach this agent; a TrapRepress expects none.
            let wait = if t.smp.method() == Method::TrapRepress {
                0
            } else {
                timeout
            };
            tracing::debug!(
                "send {:?} {:?} mod {:#x} dlid {dlid:#x} tid {:#x}",
                t.smp.method(),
                t.smp.attribute_id(),
                t.smp.attribute_modifier(),
                t.smp.header.transaction_id.get()
            );
            port.send(agent, t.smp.as_wire(), dlid, wait, 0)
                .map_err(|e| e.to_string())?;
        }
        if sm.phase() == Phase::Failed {
            return Err(sm
                .error()
                .map_or("bring-up failed".to_string(), |e| e.to_string()));
        }
        if sm.is_idle() && up_ms.is_none() {
            up_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
            tracing::info!("SUBNET UP after {:.1} ms", up_ms.unwrap_or(0.0));
            if a.once {
                break;
            }
        }
        let now = t0.elapsed().as_millis() as u64;
        let wait = sm
            .poll_timeout()
            .map_or(100, |t| t.saturating_sub(now).min(100)) as i32;
        match port.recv(wait.max(1)).map_err(|e| e.to_string())? {
            Some(r) if r.status == 0 => {
                if let Ok(smp) = Smp::parse(&r.mad) {
                    tracing::debug!(
                        "recv {:?} {:?} mod {:#x} status {:#x} tid {:#x}",
                        smp.method(),
                        smp.attribute_id(),
                        smp.attribute_modifier(),
                        smp.header.status.get(),
                        smp.header.transaction_id.get()
                    );
                    let mut smp = smp.clone();
                    // The kernel owns the high 32 bits of a request's TID.
                    let tid = smp.header.transaction_id.get() & 0xFFFF_FFFF;
                    smp.header.transaction_id.set(tid);
                    sm.handle_response(&smp, t0.elapsed().as_millis() as u64);
                }
            }
            // A send the kernel gave up on: the SM's own timer retries.
            Some(r) if r.status == ETIMEDOUT => {
                tracing::debug!("the kernel timed a send out");
            }
            Some(_) | None => {}
        }
        let now = t0.elapsed().as_millis() as u64;
        if sm.poll_timeout().is_some_and(|t| t <= now) {
            sm.handle_timeout(now);
        }
    }
    let st = sm.stats();
    let table = sm
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let lft = if n.is_switch() {
                (0..=sm.max_lid()).map(|l| sm.lft_entry(i, l)).collect()
            } else {
                Vec::new()
            };
            (n.info.node_guid.0, n.is_switch(), n.lid, lft)
        })
        .collect();
    Ok(SmRun {
        table,
        nodes: sm.nodes().len(),
        switches: sm.nodes().iter().filter(|n| n.is_switch()).count(),
        lids: sm.max_lid(),
        smps: st.total(),
        up_ms: up_ms.unwrap_or(f64::NAN),
        retries: st.retries,
        up: up_ms.is_some(),
    })
}

/// Runs `ibkit sm`.
pub fn run(a: &SmArgs) -> super::Outcome {
    // With --json, stderr stays quiet unless RUST_LOG asks.
    super::args::init_logging(if a.verbose {
        "debug"
    } else if a.json {
        "warn"
    } else {
        "info"
    });
    if a.transport != "umad" {
        return Err(format!("unknown transport {:?}: umad", a.transport).into());
    }
    let r = run_umad(a)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "nodes": r.nodes, "switches": r.switches, "lids": r.lids, "smps": r.smps,
                "up_ms": r.up_ms, "retries": r.retries, "up": r.up,
                "table": r.table.iter().map(|(g, sw, lid, lft)| serde_json::json!({
                    "guid": format!("{g:#018x}"), "switch": sw, "lid": lid, "lft": lft,
                })).collect::<Vec<_>>(),
            })
        );
    } else {
        println!(
            "subnet up: {} nodes ({} switches), LIDs 1..={}, {} SMPs ({} retransmitted), {:.1} ms",
            r.nodes, r.switches, r.lids, r.smps, r.retries, r.up_ms
        );
    }
    super::check(r.up, || {
        format!(
            "the subnet did not come up: {} nodes found, {} SMPs sent",
            r.nodes, r.smps
        )
    })
}
