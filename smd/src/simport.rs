//! A port on an ibsim-protocol simulator (Debian's ibsim, or `ibkit fabric
//! serve`) spoken to directly, without libumad2sim: attach at a node
//! through the control socket, then send and receive 288-byte packets.
//!
//! Why not libumad2sim: it loses the last 32 bytes of every MAD it hands
//! to its client (bytes 224..256 arrive as whatever its message queue
//! held; the bytes on the socket are right), which is harmless for SMPs
//! and single SA records but corrupts every full RMPP segment of an SA
//! table. Measured with `ibkit sa node` on ibsim's fat-tree-324: 87 of 360
//! NodeRecords came back damaged through it, none through this port.

use crate::SmdError;
use fabric::ibsim::{self, ClientInfo, CtlType, SimCtl, SimRequest};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// An abstract socket address; ibsim's names count their terminating NUL.
fn addr(name: &str) -> std::io::Result<SocketAddr> {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    SocketAddr::from_abstract_name(&b)
}

/// How long a control request waits for its answer.
const CTL_WAIT: Duration = Duration::from_secs(5);

/// A MAD that arrived on a [`SimPort`].
#[derive(Clone, Debug)]
pub struct SimMad {
    /// Source LID.
    pub slid: u16,
    /// Source QP.
    pub sqp: u32,
    /// The MAD.
    pub mad: [u8; 256],
    /// The bytes of it its sender sent (the rest is not its).
    pub len: usize,
    /// 0, or the errno the simulator returns a packet of ours with
    /// (110, ETIMEDOUT: it could not deliver it).
    pub status: u32,
}

/// A client of the simulator, attached at one node's port.
pub struct SimPort {
    sock: UnixDatagram,
    /// The socket's read timeout as last set: setting it is a system
    /// call, which a busy SM would otherwise make once a MAD.
    read_timeout: std::cell::Cell<Duration>,
    ctl: SocketAddr,
    out: SocketAddr,
    slot: u32,
    /// The node it is attached at.
    pub node: String,
    /// The port's LID.
    pub lid: u16,
    /// The SM's LID, as the port knows it.
    pub sm_lid: u16,
    /// The port's GUID.
    pub guid: u64,
    /// The QP it sends from and receives requests on.
    pub qp: u32,
}

fn io(what: &str, e: std::io::Error) -> SmdError {
    SmdError::Sim(format!("{what}: {e}"))
}

impl SimPort {
    /// Attaches to the simulator on socket base `base` at node `node`
    /// (`None`: the simulator's first CA) as a GS client on QP 1.
    pub fn attach(base: &str, node: Option<&str>) -> Result<SimPort, SmdError> {
        SimPort::attach_qp(base, node, 1)
    }

    /// As [`SimPort::attach`], on QP `qp`. ibsim hands a client requests
    /// (an SA's Reports among them) only on the QP it attached with, and
    /// on QP 0 and 1 only to the port's SM: a client that must receive
    /// them attaches with a QP of its own (above 1).
    pub fn attach_qp(base: &str, node: Option<&str>, qp: u32) -> Result<SimPort, SmdError> {
        SimPort::attach_as(base, node, qp, false)
    }

    /// Attaches as the node's SM: on QP 0, claiming the SM role, so that
    /// the requests sent to the port's QP 0 and QP 1 (traps, SA queries)
    /// come to it and the port's PortInfo says IsSM. A simulator allows
    /// one SM client per node.
    pub fn attach_sm(base: &str, node: Option<&str>) -> Result<SimPort, SmdError> {
        let p = SimPort::attach_as(base, node, 0, true)?;
        let mut on = [0u8; 64];
        on[..4].copy_from_slice(&1i32.to_ne_bytes());
        p.ctl(CtlType::SetIsSm, on)?;
        Ok(p)
    }

    fn attach_as(base: &str, node: Option<&str>, qp: u32, issm: bool) -> Result<SimPort, SmdError> {
        let me = std::process::id();
        let sock =
            UnixDatagram::bind_addr(&addr(&ibsim::in_name(base, me)).map_err(|e| io("name", e))?)
                .map_err(|e| io("cannot bind the client socket", e))?;
        sock.set_read_timeout(Some(CTL_WAIT))
            .map_err(|e| io("socket", e))?;
        let ctl = addr(&ibsim::ctl_name(base)).map_err(|e| io("name", e))?;
        let mut port = SimPort {
            sock,
            read_timeout: std::cell::Cell::new(CTL_WAIT),
            ctl,
            out: addr(&ibsim::out_name(base, 0)).map_err(|e| io("name", e))?,
            slot: 0,
            node: String::new(),
            lid: 0,
            sm_lid: 0,
            guid: 0,
            qp,
        };
        let mut data = [0u8; 64];
        ClientInfo {
            id: me,
            qp,
            issm,
            nodeid: node.unwrap_or("").to_string(),
        }
        .encode(&mut data);
        let reply = port.ctl(CtlType::Connect, data).map_err(|e| match e {
            SmdError::Sim(why) => SmdError::NoSimulator {
                name: ibsim::ctl_name(base),
                base: base.to_string(),
                why: std::io::Error::other(why),
            },
            e => e,
        })?;
        let info = ClientInfo::parse(&reply.data);
        port.node = info.nodeid;
        port.slot = info.id;
        port.out = addr(&ibsim::out_name(base, info.id as usize)).map_err(|e| io("name", e))?;
        // PortInfo: LID at bytes 16..18, MasterSMLID at 18..20.
        let pi = port.ctl(CtlType::GetPortInfo, [0; 64])?.data;
        port.lid = u16::from_be_bytes([pi[16], pi[17]]);
        port.sm_lid = u16::from_be_bytes([pi[18], pi[19]]);
        // The port's GUID: ibsim attaches a client at a CA's first port
        // (port 1), whose GUID is the node GUID + 1, or at a switch's port
        // 0, whose GUID is the node GUID; the NodeInfo it hands out says
        // the node GUID (bytes 12..20) in the PortGUID field as well.
        let ni = port.ctl(CtlType::GetNodeInfo, [0; 64])?.data;
        let node_guid = u64::from_be_bytes(ni[12..20].try_into().unwrap_or([0; 8]));
        let switch = ni[2] == 2;
        port.guid = node_guid.wrapping_add(u64::from(!switch));
        Ok(port)
    }

    /// Sets the socket's read timeout, unless it is set so already.
    fn wait_at_most(&self, t: Duration) -> Result<(), SmdError> {
        if self.read_timeout.get() != t {
            self.sock
                .set_read_timeout(Some(t))
                .map_err(|e| io("socket", e))?;
            self.read_timeout.set(t);
        }
        Ok(())
    }

    /// A control request, answered in place.
    fn ctl(&self, kind: CtlType, data: [u8; 64]) -> Result<SimCtl, SmdError> {
        self.wait_at_most(CTL_WAIT)?;
        let m = SimCtl {
            client: self.slot,
            kind,
            len: 64,
            data,
        };
        self.sock
            .send_to_addr(&m.encode(), &self.ctl)
            .map_err(|e| io("the simulator's control socket", e))?;
        let mut buf = [0u8; 512];
        // A packet for this node may come before the answer (ibsim
        // delivers what reaches the node as soon as the client is
        // connected: seen when an SM attaches where another just left).
        // MADs are datagrams, and their senders retry: it is dropped.
        let mut strays = 0;
        let n = loop {
            let n = self
                .sock
                .recv(&mut buf)
                .map_err(|e| io("no answer on the control socket", e))?;
            if n != ibsim::REQ_SIZE || strays >= 64 {
                break n;
            }
            strays += 1;
            tracing::debug!("a packet before the simulator's answer to {kind:?}: dropped");
        };
        let r = SimCtl::parse(&buf[..n]).map_err(|e| SmdError::Sim(e.to_string()))?;
        if r.kind == CtlType::Error {
            return Err(SmdError::Sim(format!(
                "the simulator refused {kind:?} (is the node name right? an SM already on that node?)"
            )));
        }
        Ok(r)
    }

    /// Sends `mad` to QP `dqp` at `dlid`, from its QP.
    pub fn send(&self, dlid: u16, dqp: u32, mad: &[u8]) -> Result<(), SmdError> {
        self.send_from(dlid, dqp, self.qp, mad)
    }

    /// Sends `mad` to QP `dqp` at `dlid` from QP `sqp` (an SM attached on
    /// QP 0 sends its SA's answers from QP 1).
    pub fn send_from(&self, dlid: u16, dqp: u32, sqp: u32, mad: &[u8]) -> Result<(), SmdError> {
        let mut m = [0u8; 256];
        let n = mad.len().min(256);
        m[..n].copy_from_slice(&mad[..n]);
        let r = SimRequest {
            dlid,
            // 0: the simulator fills in the port's LID; a directed-route
            // SMP's answer comes back by the permissive LID (as
            // libumad2sim sends it).
            slid: if dlid == 0xFFFF { 0xFFFF } else { 0 },
            dqp,
            sqp,
            status: 0,
            // The bytes sent: a receiver through libumad2sim counts the
            // records of an SA answer from it.
            length: n as u64,
            mad: m,
        };
        self.sock
            .send_to_addr(&r.encode(), &self.out)
            .map_err(|e| io("send", e))?;
        Ok(())
    }

    /// The next packet, waiting at most `timeout`; `None` if none came.
    /// Datagrams that are not packets are skipped.
    pub fn recv(&self, timeout: Duration) -> Result<Option<SimMad>, SmdError> {
        self.wait_at_most(timeout.max(Duration::from_millis(1)))?;
        let mut buf = [0u8; 1024];
        let n = match self.sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        // A signal (SIGTERM for a running SM): the caller
                        // looks at its flags and comes back.
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(io("recv", e)),
        };
        let Ok(r) = SimRequest::parse(&buf[..n]) else {
            return Ok(None);
        };
        Ok(Some(SimMad {
            slid: r.slid,
            sqp: r.sqp,
            len: (r.length as usize).min(256),
            mad: r.mad,
            status: r.status,
        }))
    }
}

impl Drop for SimPort {
    fn drop(&mut self) {
        // The simulator may be gone: wait for its answer briefly.
        let m = SimCtl {
            client: self.slot,
            kind: CtlType::Disconnect,
            len: 64,
            data: [0; 64],
        };
        let _ = self.sock.set_read_timeout(Some(Duration::from_millis(200)));
        if self.sock.send_to_addr(&m.encode(), &self.ctl).is_ok() {
            let _ = self.sock.recv(&mut [0u8; 512]);
        }
    }
}
