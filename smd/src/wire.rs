//! How the SM reaches its fabric: a umad port (an HCA, or ibsim through
//! libumad2sim) or an ibsim-protocol simulator's socket spoken to directly
//! ([`crate::simport`]), behind one small interface for the driver loop;
//! and the optional capture of every MAD the SM sends and receives.

use crate::simport::SimPort;
use crate::SmdError;
use fabric::pcap::{self, FrameAddr, LINKTYPE_INFINIBAND};
use mad_core::Method;
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};
use verbs_sys::umad::{Agent, Dest, UmadPort, ETIMEDOUT, GSI_QKEY};

/// What arrived for the SM.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A MAD of the SA's class, from `from`.
    Sa {
        /// Who sent it.
        from: sa::Addr,
        /// The MAD.
        mad: Vec<u8>,
    },
    /// An SMP (a response, or a trap) from LID `slid`, with the
    /// transport's TID bits cleared.
    Smp {
        /// Its source LID (0xFFFF for a directed-route one).
        slid: u16,
        /// The SMP.
        mad: Vec<u8>,
    },
    /// A send the transport gave up on: the SM's own timer retries.
    SendFailed,
}

/// One way to the fabric.
pub(crate) trait Wire {
    /// Sends an SMP: LID-routed to `dlid`, or directed-route (`None`).
    /// `answer` says whether a response is expected.
    fn send_smp(&mut self, smp: &[u8], dlid: Option<u16>, answer: bool) -> Result<(), SmdError>;
    /// Sends an SA MAD from QP 1 to `to`.
    fn send_sa(&mut self, mad: &[u8], to: sa::Addr, answer: bool) -> Result<(), SmdError>;
    /// The next MAD, waiting at most `ms` milliseconds.
    fn recv(&mut self, ms: u64) -> Result<Option<Incoming>, SmdError>;
}

/// A SubnGet, SubnSet or SubnTrap: another agent's request to this SM,
/// whose answer (GetResp, TrapRepress) must carry its whole TID back —
/// the simulator routes the answer by the client slot in its top bits
/// (OpenSM's standby waits for the TrapRepress of its trap 144).
fn is_request(mad: &[u8]) -> bool {
    matches!(mad.get(3), Some(0x01 | 0x02 | 0x05))
}

/// The methods of SA requests the SA agent takes unsolicited.
const SA_REQUESTS: [u8; 6] = [0x01, 0x02, 0x12, 0x13, 0x14, 0x15];

/// A umad port with the SM's three agents.
pub(crate) struct UmadWire {
    port: UmadPort,
    dr: Agent,
    lr: Agent,
    gs: Agent,
    timeout_ms: i32,
}

impl UmadWire {
    /// Registers the agents on `port` and claims the SM role.
    pub(crate) fn new(mut port: UmadPort, timeout_ms: i32) -> Result<UmadWire, SmdError> {
        // Directed route (0x81) for discovery; LID-routed (0x01) for
        // updates, also receiving traps.
        // Both also take SubnGet and SubnSet: another SM's SMInfo requests.
        let dr = port.register(0x81, 1, &[0x01, 0x02])?;
        let lr = port.register(0x01, 1, &[Method::Trap.into(), 0x01, 0x02])?;
        // The SA (class 0x03, version 2): requests from the hosts, and the
        // RMPP ACKs of its answers. RMPP is the SA's own, not the kernel's.
        let gs = port.register(0x03, sa::SA_CLASS_VERSION, &SA_REQUESTS)?;
        // IsSM on: the SA requests and traps for the SM come to this port.
        port.claim_sm()?;
        Ok(UmadWire {
            port,
            dr,
            lr,
            gs,
            timeout_ms,
        })
    }
}

impl Wire for UmadWire {
    fn send_smp(&mut self, smp: &[u8], dlid: Option<u16>, answer: bool) -> Result<(), SmdError> {
        let (agent, dlid) = match dlid {
            Some(l) => (self.lr, l),
            None => (self.dr, 0xFFFF),
        };
        // Requests are tracked by the kernel so that their responses
        // reach this agent.
        let wait = if answer { self.timeout_ms } else { 0 };
        Ok(self.port.send(agent, smp, dlid, wait, 0)?)
    }

    fn send_sa(&mut self, mad: &[u8], to: sa::Addr, answer: bool) -> Result<(), SmdError> {
        let dest = Dest {
            lid: to.lid.0,
            qpn: to.qpn,
            qkey: GSI_QKEY,
            sl: 0,
        };
        let wait = if answer { self.timeout_ms } else { 0 };
        Ok(self.port.send_to(self.gs, mad, dest, wait, 0)?)
    }

    fn recv(&mut self, ms: u64) -> Result<Option<Incoming>, SmdError> {
        let ms = ms.clamp(1, i32::MAX as u64) as i32;
        Ok(match self.port.recv(ms)? {
            Some(r) if r.status == 0 && r.agent == self.gs => Some(Incoming::Sa {
                from: sa::Addr {
                    lid: mad_core::Lid(r.slid),
                    qpn: r.sqpn,
                },
                mad: r.mad,
            }),
            Some(mut r) if r.status == 0 => {
                // The kernel owns the high 32 bits of a request's TID
                // (bytes 8..12 of the MAD header): cleared on the answers
                // to the SM's own requests, kept on another SM's request
                // (its answer must carry it back).
                if !is_request(&r.mad) {
                    if let Some(high) = r.mad.get_mut(8..12) {
                        high.fill(0);
                    }
                }
                Some(Incoming::Smp {
                    slid: r.slid,
                    mad: r.mad,
                })
            }
            Some(r) if r.status == ETIMEDOUT => Some(Incoming::SendFailed),
            Some(_) | None => None,
        })
    }
}

/// The SM as the SM client of an ibsim-protocol simulator (ibsim, or
/// `ibkit fabric serve`), without libumad2sim: SMPs and the SA's MADs
/// arrive whole.
pub(crate) struct SimWire {
    port: SimPort,
}

impl SimWire {
    /// Attaches at `node` (`None`: the simulator's first CA) of the
    /// simulator on socket base `base`, as that node's SM.
    pub(crate) fn attach(base: &str, node: Option<&str>) -> Result<SimWire, SmdError> {
        Ok(SimWire {
            port: SimPort::attach_sm(base, node)?,
        })
    }

    /// The node it is attached at.
    pub(crate) fn node(&self) -> &str {
        &self.port.node
    }

    /// The port's GUID.
    pub(crate) fn guid(&self) -> u64 {
        self.port.guid
    }
}

impl Wire for SimWire {
    fn send_smp(&mut self, smp: &[u8], dlid: Option<u16>, _answer: bool) -> Result<(), SmdError> {
        self.port.send_from(dlid.unwrap_or(0xFFFF), 0, 0, smp)
    }

    fn send_sa(&mut self, mad: &[u8], to: sa::Addr, _answer: bool) -> Result<(), SmdError> {
        self.port.send_from(to.lid.0, to.qpn, 1, mad)
    }

    fn recv(&mut self, ms: u64) -> Result<Option<Incoming>, SmdError> {
        let Some(mut m) = self
            .port
            .recv(std::time::Duration::from_millis(ms.max(1)))?
        else {
            return Ok(None);
        };
        if m.status != 0 {
            // One of ours, back undelivered.
            return Ok(Some(Incoming::SendFailed));
        }
        Ok(Some(match m.mad[1] {
            0x03 => Incoming::Sa {
                from: sa::Addr {
                    lid: mad_core::Lid(m.slid),
                    qpn: m.sqp,
                },
                mad: m.mad[..m.len.max(24)].to_vec(),
            },
            _ => {
                // The simulator puts its client slot in the top 16 bits
                // of a request's TID; the SM's TIDs are the low 32. A
                // request from another SM keeps it: the answer goes back
                // by it.
                if !is_request(&m.mad) {
                    m.mad[8..12].fill(0);
                }
                Incoming::Smp {
                    slid: m.slid,
                    mad: m.mad.to_vec(),
                }
            }
        }))
    }
}

/// Every MAD the SM sends and receives, appended to a LINKTYPE_INFINIBAND
/// pcap file as it goes (Wireshark and `ibkit decode` read it).
pub(crate) struct Capture {
    out: std::io::BufWriter<std::fs::File>,
    /// Frames written.
    pub(crate) frames: u64,
}

impl Capture {
    /// Creates (or truncates) `path` and writes the file header.
    pub(crate) fn create(path: &Path) -> Result<Capture, SmdError> {
        let io = |e: std::io::Error| SmdError::Capture(path.display().to_string(), e.to_string());
        let f = std::fs::File::create(path).map_err(io)?;
        let mut out = std::io::BufWriter::new(f);
        out.write_all(&pcap::file_header(LINKTYPE_INFINIBAND))
            .map_err(io)?;
        Ok(Capture { out, frames: 0 })
    }

    /// One MAD (padded to 256 bytes), stamped with the time now.
    pub(crate) fn mad(&mut self, mad: &[u8], a: FrameAddr) -> Result<(), SmdError> {
        let mut m = [0u8; mad_core::MAD_SIZE];
        let n = mad.len().min(m.len());
        m[..n].copy_from_slice(&mad[..n]);
        let ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut rec = Vec::with_capacity(16 + 300);
        pcap::push_record(&mut rec, ns, &pcap::frame(&m, a));
        self.out
            .write_all(&rec)
            .map_err(|e| SmdError::Capture("the capture".into(), e.to_string()))?;
        self.frames += 1;
        Ok(())
    }

    /// Writes out what is buffered.
    pub(crate) fn flush(&mut self) -> Result<(), SmdError> {
        self.out
            .flush()
            .map_err(|e| SmdError::Capture("the capture".into(), e.to_string()))
    }
}
