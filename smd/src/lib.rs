//! ibkit's subnet manager on a real MAD stack: the sans-IO [`smi::sm`]
//! driven over a umad port of a channel adapter (libibumad through
//! [`verbs_sys::umad`]). On real hardware that manages a real subnet;
//! under ibsim (or `ibkit fabric serve`) it manages the simulated fabric
//! through the `libumad2sim.so` preload, as OpenSM is tested.
//!
//! [`run`] is the driver loop: it hands the SM's SMPs to the kernel (the
//! directed-route agent for discovery, the LID-routed one for updates and
//! traps), feeds responses and timeouts back, and stops when the subnet is
//! up (or runs its sweeps for good). Failures are typed ([`SmdError`]); the
//! result ([`SmRun`]) derives its JSON.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod simport;

use mad_core::{Lid, Method, Smp};
use sa::{Sa, SaConfig};
use serde::{Serialize, Serializer};
use smi::sm::{Engine, Handled, LidPolicy, Phase, Sm, SmConfig, SmError, SmEvent};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use verbs_sys::umad::{Dest, UmadPort, ETIMEDOUT, GSI_QKEY};

/// Where and how to run.
#[derive(Clone, Debug)]
pub struct UmadConfig {
    /// CA name (`None`: the first).
    pub ca: Option<String>,
    /// Port number (0: the first active).
    pub port: u8,
    /// Stop once the subnet is up.
    pub once: bool,
    /// Routing engine.
    pub routing: Engine,
    /// Milliseconds between light sweeps (without `once`).
    pub sweep_ms: u64,
    /// How long opening the port may take: libumad2sim waits for its
    /// simulator without a word, and a wedged kernel driver may too.
    pub open_wait: Duration,
}

impl Default for UmadConfig {
    fn default() -> UmadConfig {
        UmadConfig {
            ca: None,
            port: 0,
            once: true,
            routing: Engine::MinHop,
            sweep_ms: 10_000,
            open_wait: Duration::from_secs(20),
        }
    }
}

/// One node as the SM left it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeRow {
    /// Node GUID (`0x…` in JSON).
    #[serde(serialize_with = "hex_guid")]
    pub guid: u64,
    /// A switch.
    pub switch: bool,
    /// Its LID.
    pub lid: u16,
    /// A switch's LFT up to the highest LID (empty for a CA).
    pub lft: Vec<u8>,
}

fn hex_guid<S: Serializer>(g: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{g:#018x}"))
}

/// What a run did; serializes as `ibkit sm --json` prints it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SmRun {
    /// Nodes found.
    pub nodes: usize,
    /// Switches found.
    pub switches: usize,
    /// Highest LID assigned.
    pub lids: u16,
    /// SMPs sent.
    pub smps: u64,
    /// Milliseconds to the subnet up (NaN, `null` in JSON, when it did not
    /// come up).
    pub up_ms: f64,
    /// Retransmissions.
    pub retries: u64,
    /// The subnet came up.
    pub up: bool,
    /// SA requests answered (any status).
    pub sa_answered: u64,
    /// SA MADs sent (answers, RMPP segments and aborts).
    pub sa_sent: u64,
    /// Nanoseconds spent in the SA (taking requests in and answers out),
    /// by this process's clock: the SA's own share of the CPU.
    pub sa_ns: u64,
    /// Every node.
    pub table: Vec<NodeRow>,
}

/// Why the SM could not run.
#[derive(Debug, thiserror::Error)]
pub enum SmdError {
    /// Under libumad2sim, no simulator serves the control socket.
    #[error("no simulator serves @{name} ({why}): start ibsim or `ibkit fabric serve --socket {base}`, or set IBSIM_SOCKNAME")]
    NoSimulator {
        /// The control socket's abstract name.
        name: String,
        /// The socket base name.
        base: String,
        /// What connecting said.
        why: std::io::Error,
    },
    /// Opening the port did not finish in time.
    #[error("opening the umad port took over {} s (is the simulator or the HCA's driver answering?)", .0.as_secs())]
    OpenTimeout(Duration),
    /// libibumad refused: no library, no device, a failed call.
    #[error(transparent)]
    Umad(#[from] verbs_sys::Error),
    /// The SM stopped with an error.
    #[error(transparent)]
    Sm(#[from] SmError),
    /// The SM failed without saying why.
    #[error("bring-up failed")]
    Failed,
    /// The simulator's socket refused or failed.
    #[error("simulator: {0}")]
    Sim(String),
    /// The SA did not answer a query.
    #[error("the SA at LID {sm_lid} did not answer in {attempts} tries of {ms} ms")]
    SaTimeout {
        /// The SM's LID the query went to.
        sm_lid: u16,
        /// Times the query was sent.
        attempts: u32,
        /// Milliseconds waited each time.
        ms: u64,
    },
    /// Through libumad2sim, an answer reached the bytes it damages.
    #[error("the answer reaches bytes 224..256 of its MADs, which libumad2sim damages on delivery ({records} record(s) in {segments} MAD(s)): use the simulator's socket directly (--transport ibsim)")]
    SaDamaged {
        /// MADs in the answer.
        segments: u32,
        /// Whole records in it.
        records: usize,
    },
    /// The SA's RMPP transfer failed.
    #[error("the SA's answer failed: {0}")]
    SaTransfer(sa::ReceiveError),
}

/// Under libumad2sim (LD_PRELOAD names it), the simulator's control
/// socket must be there: libumad2sim would otherwise wait for it forever,
/// silently, on the first umad call.
pub fn check_simulator() -> Result<(), SmdError> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
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
    let probe = SocketAddr::from_abstract_name(&b)
        .and_then(|addr| UnixDatagram::unbound()?.connect_addr(&addr));
    probe.map_err(|why| SmdError::NoSimulator { name, base, why })
}

/// Opens the umad port, or gives up after `wait` (the opening thread is
/// left blocked; the caller is expected to end).
fn open_bounded(ca: Option<String>, port: u8, wait: Duration) -> Result<UmadPort, SmdError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(UmadPort::open(ca.as_deref(), port));
    });
    match rx.recv_timeout(wait) {
        Ok(r) => Ok(r?),
        Err(_) => Err(SmdError::OpenTimeout(wait)),
    }
}

/// The methods of SA requests the SA agent takes unsolicited.
const SA_REQUESTS: [u8; 6] = [0x01, 0x02, 0x12, 0x13, 0x14, 0x15];

/// Runs the SM on a umad port until the subnet is up (`once`), or, for
/// good, keeping the subnet up and answering SA queries on QP1, until
/// `stop` is set (a SIGTERM handler sets it).
pub fn run(c: &UmadConfig, stop: &AtomicBool) -> Result<SmRun, SmdError> {
    check_simulator()?;
    let mut port = open_bounded(c.ca.clone(), c.port, c.open_wait)?;
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
    let dr = port.register(0x81, 1, &[])?;
    let lr = port.register(0x01, 1, &[Method::Trap.into()])?;
    // The SA (class 0x03, version 2): requests from the hosts, and the
    // RMPP ACKs of its answers. RMPP is the SA's own, not the kernel's.
    let gs = port.register(0x03, sa::SA_CLASS_VERSION, &SA_REQUESTS)?;
    // IsSM on: the SA requests and traps for the SM come to this port.
    port.claim_sm()?;
    // ACKs of the SA's own RMPP do not come back to a umad agent (the
    // receiver's kernel sends them to its own agent's TID space, and
    // libumad2sim has no RMPP at all): every segment goes at once.
    // Under libumad2sim every requester on QP 1 is a libumad2sim client,
    // which the segments after the first would crash (see
    // `SaConfig::first_segment_to_qp1`).
    let under_umad2sim = std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("umad2sim"));
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        first_segment_to_qp1: under_umad2sim,
        ..SaConfig::default()
    });
    let (mut sa_answers, mut sa_ns) = (0u64, 0u64);
    let cfg = SmConfig {
        routing: c.routing,
        lid_policy: LidPolicy::Prepopulated,
        sweep_interval_ms: (!c.once).then_some(c.sweep_ms),
        ..SmConfig::default()
    };
    let timeout = cfg.timeout_ms as i32;
    let mut sm = Sm::new(cfg);
    let t0 = Instant::now();
    let ms = || t0.elapsed().as_millis() as u64;
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
        while let Some(t) = sm.poll_transmit(ms()) {
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
            port.send(agent, t.smp.as_wire(), dlid, wait, 0)?;
        }
        if sm.phase() == Phase::Failed {
            return Err(sm.error().cloned().map_or(SmdError::Failed, SmdError::Sm));
        }
        if sm.is_idle() && up_ms.is_none() {
            let t = t0.elapsed().as_secs_f64() * 1e3;
            up_ms = Some(t);
            tracing::info!("SUBNET UP after {t:.1} ms");
            if c.once {
                break;
            }
        }
        if stop.load(Ordering::Relaxed) {
            tracing::info!("stopping");
            break;
        }
        let next = match (sm.poll_timeout(), sa.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let wait = next.map_or(100, |t| t.saturating_sub(ms()).min(100)) as i32;
        match port.recv(wait.max(1))? {
            Some(r) if r.status == 0 && r.agent == gs => {
                let from = sa::Addr {
                    lid: Lid(r.slid),
                    qpn: r.sqpn,
                };
                let t = Instant::now();
                let handled = sa.handle_mad(sm.subnet(), from, &r.mad, ms());
                sa_ns += t.elapsed().as_nanos() as u64;
                if let Err(e) = handled {
                    tracing::debug!("SA: {e}");
                }
            }
            Some(mut r) if r.status == 0 => {
                if let Ok(smp) = Smp::parse(&r.mad) {
                    tracing::debug!(
                        "recv {:?} {:?} mod {:#x} status {:#x} tid {:#x}",
                        smp.method(),
                        smp.attribute_id(),
                        smp.attribute_modifier(),
                        smp.header.status.get(),
                        smp.header.transaction_id.get()
                    );
                }
                // The kernel owns the high 32 bits of a request's TID
                // (bytes 8..12 of the MAD header).
                if let Some(high) = r.mad.get_mut(8..12) {
                    high.fill(0);
                }
                if sm.handle_mad(&r.mad, ms()) == Handled::NotForSm {
                    tracing::debug!(
                        "not for the SM: a MAD of class {:#04x}",
                        r.mad.get(1).copied().unwrap_or(0)
                    );
                }
            }
            // A send the kernel gave up on: the SM's own timer retries.
            Some(r) if r.status == ETIMEDOUT => {
                tracing::debug!("the kernel timed a send out");
            }
            Some(_) | None => {}
        }
        if sm.poll_timeout().is_some_and(|t| t <= ms()) {
            sm.handle_timeout(ms());
        }
        if sa.poll_timeout().is_some_and(|t| t <= ms()) {
            sa.handle_timeout(ms());
        }
        loop {
            let t0 = Instant::now();
            let Some(t) = sa.poll_transmit() else { break };
            sa_ns += t0.elapsed().as_nanos() as u64;
            let to = Dest {
                lid: t.to.lid.0,
                qpn: t.to.qpn,
                qkey: GSI_QKEY,
                sl: 0,
            };
            // A Report is a request: the kernel tracks it so that the
            // subscriber's ReportResp reaches this agent (the SA's own
            // timer sends it again).
            let wait = if t.mad[3] == u8::from(Method::Report) {
                timeout
            } else {
                0
            };
            port.send_to(gs, &t.mad[..t.len.clamp(24, t.mad.len())], to, wait, 0)?;
            sa_answers += 1;
        }
        while let Some(e) = sm.poll_event() {
            log_event(&e);
            sa.handle_event(sm.subnet(), &e, ms());
        }
    }
    let mut run = summary(&sm, up_ms);
    run.sa_sent = sa_answers;
    run.sa_answered = sa.stats().answered;
    run.sa_ns = sa_ns;
    Ok(run)
}

/// An SM event in the log: the subnet up, nodes and traps at the info
/// level, LID changes at debug.
fn log_event(e: &SmEvent) {
    match e {
        SmEvent::SubnetUp { nodes, max_lid } => {
            tracing::info!("subnet up: {nodes} nodes, LIDs up to {}", max_lid.0)
        }
        SmEvent::NodeAdded { node, guid } => {
            tracing::debug!("node {node} added: GUID {:#018x}", guid.0)
        }
        SmEvent::NodeLost { node, guid } => {
            tracing::info!("node {node} lost: GUID {:#018x}", guid.0)
        }
        SmEvent::Trap { issuer, number, .. } => {
            tracing::info!("trap {number:?} from LID {}", issuer.0)
        }
        SmEvent::LidsChanged { ports } => tracing::debug!("LIDs given to {ports} ports"),
    }
}

/// The run's result from the SM's state.
fn summary(sm: &Sm, up_ms: Option<f64>) -> SmRun {
    let st = sm.stats();
    let table = sm
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| NodeRow {
            guid: n.info.node_guid.0,
            switch: n.is_switch(),
            lid: n.lid,
            lft: if n.is_switch() {
                (0..=sm.max_lid()).map(|l| sm.lft_entry(i, l)).collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    SmRun {
        table,
        nodes: sm.nodes().len(),
        switches: sm.nodes().iter().filter(|n| n.is_switch()).count(),
        lids: sm.max_lid(),
        smps: st.total(),
        up_ms: up_ms.unwrap_or(f64::NAN),
        retries: st.retries,
        up: up_ms.is_some(),
        sa_answered: 0,
        sa_sent: 0,
        sa_ns: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of a run: GUIDs as `0x…` strings, an SM that never came
    /// up with `null` milliseconds.
    #[test]
    fn a_run_serializes_as_ibkit_sm_prints_it() {
        let r = SmRun {
            nodes: 2,
            switches: 1,
            lids: 2,
            smps: 9,
            up_ms: f64::NAN,
            retries: 0,
            up: false,
            sa_answered: 0,
            sa_sent: 0,
            sa_ns: 0,
            table: vec![NodeRow {
                guid: 0x2c9,
                switch: true,
                lid: 1,
                lft: vec![0, 0, 1],
            }],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["table"][0]["guid"], "0x00000000000002c9");
        assert_eq!(v["table"][0]["lft"], serde_json::json!([0, 0, 1]));
        assert!(v["up_ms"].is_null());
        assert_eq!(v["up"], false);
    }

    /// Without the preload there is nothing to check; with it and no
    /// simulator, the error names the socket and what to start.
    #[test]
    fn a_missing_simulator_is_named() {
        // One test sets the environment, so no other sees it change.
        std::env::set_var("LD_PRELOAD", "");
        assert!(check_simulator().is_ok());
        std::env::set_var("LD_PRELOAD", "/nowhere/libumad2sim.so");
        std::env::set_var("IBSIM_SOCKNAME", "smd-test-nobody-serves-this");
        let e = check_simulator().unwrap_err().to_string();
        std::env::remove_var("LD_PRELOAD");
        assert!(
            e.contains("smd-test-nobody-serves-this") && e.contains("ibkit fabric serve"),
            "{e}"
        );
    }
}
