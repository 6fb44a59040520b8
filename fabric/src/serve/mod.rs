//! ibkit's simulated fabric behind ibsim's client protocol
//! ([`crate::ibsim`]), so that OpenSM, infiniband-diags and every other
//! libibumad program run against it through `libumad2sim.so`; and ibkit's
//! own control interface, which takes links and nodes down and up and
//! reports the fabric's state.
//!
//! * [`Session`] is the server without I/O, as `smi::sm` is the SM: it
//!   takes control requests, client datagrams and control commands, and
//!   hands back replies and, per client, the datagrams to send. It is what
//!   the unit tests and the `serve_session` fuzz target drive.
//! * [`driver`] puts a session on ibsim's abstract Unix sockets: one thread
//!   polls every socket, packets that arrive together are injected together,
//!   the fabric runs until nothing is in flight, and what reached each
//!   client is written back; a request that got no response comes back
//!   with status ETIMEDOUT, as ibsim reports it. Its system calls are in
//!   one small module (`sys`).
//! * [`ctl`] sends one command to a running server.

mod command;
pub mod driver;
mod session;
mod sys;

pub use command::{Command, MAX_PORT_ERRORS};
pub use driver::{ctl, serve, CtlError, ServeConfig, SocketError};
pub use session::{Answer, Session, Transport, ECONNRESET, LOG_PER_SECOND};

use crate::ibsim;
use crate::sim::{Fabric, SimNode};
use mad_core::attr::NodeType;
use mad_core::Lid;
use serde::Serialize;

/// Who sent a datagram, as the kernel vouches for it (SO_PASSCRED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The sender's user.
    pub uid: u32,
    /// The sender's process.
    pub pid: i32,
}

/// Who may attach to a served fabric and control it: the server's own
/// user, root, and the users named with `--allow-uid`. Anyone else on the
/// machine can reach the abstract sockets, and is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// The server's own user.
    me: u32,
    allowed: Vec<u32>,
}

impl Access {
    /// The server's user `me`, root, and `more`.
    pub fn new(me: u32, more: &[u32]) -> Access {
        let mut allowed = vec![me, 0];
        allowed.extend_from_slice(more);
        allowed.sort_unstable();
        allowed.dedup();
        Access { me, allowed }
    }

    /// Whether `peer` may have the server open a file it names: only the
    /// server's own user and root, whose rights the server's do not
    /// exceed. A user let in with `--allow-uid` may not (the file would be
    /// written with the server's rights, not theirs).
    pub fn may_name_files(&self, peer: Option<Peer>) -> Result<(), ServeError> {
        match peer {
            Some(p) if p.uid == self.me || p.uid == 0 => Ok(()),
            Some(p) => Err(ServeError::NotOwner { uid: p.uid }),
            None => Err(ServeError::NoCredentials),
        }
    }

    /// Whether the sender of a datagram may use the server; a datagram
    /// that came without credentials is refused.
    pub fn check(&self, peer: Option<Peer>) -> Result<(), ServeError> {
        match peer {
            Some(p) if self.allowed.contains(&p.uid) => Ok(()),
            Some(p) => Err(ServeError::NotAllowed {
                uid: p.uid,
                pid: p.pid,
                allowed: self.allowed.clone(),
            }),
            None => Err(ServeError::NoCredentials),
        }
    }
}

/// Why a served fabric refused a request, a packet or a command. The
/// text is what the sender is told and what the log says.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServeError {
    /// The sender's user may not use this server.
    #[error("permission denied: uid {uid} (pid {pid}) is not one of the users this fabric serves ({allowed:?}; see --allow-uid)")]
    NotAllowed {
        /// The sender's user.
        uid: u32,
        /// The sender's process.
        pid: i32,
        /// Who may.
        allowed: Vec<u32>,
    },
    /// A user let in with `--allow-uid` named a file for the server to
    /// write.
    #[error("permission denied: uid {uid} may use this fabric but not have the server write files (only the server's own user and root may dump)")]
    NotOwner {
        /// The sender's user.
        uid: u32,
    },
    /// A datagram without the sender's credentials.
    #[error("permission denied: the datagram carried no credentials")]
    NoCredentials,
    /// Bytes that are not a message of ibsim's protocol.
    #[error("{0}")]
    Protocol(#[from] ibsim::ProtoError),
    /// A client sent an Error packet as a request.
    #[error("an error packet")]
    ErrorPacket,
    /// A request names a slot no client holds.
    #[error("no client {0}")]
    NoClient(u32),
    /// A request from a client the server dropped.
    #[error("client {slot} was dropped ({why}); attach again")]
    Dropped {
        /// Its slot.
        slot: usize,
        /// Why.
        why: String,
    },
    /// Every client slot is held by a live client.
    #[error("every client slot is taken")]
    Full,
    /// No node has this name.
    #[error("no node \"{0}\"")]
    NoNode(String),
    /// `reload-sm` with no SM client attached.
    #[error("no SM client is attached")]
    NoSm,
    /// `reload-sm` from a user whose SM clients there are none of.
    #[error("permission denied: uid {uid} may not signal the SM (another user runs it)")]
    NotSmOwner {
        /// The requester's user.
        uid: u32,
    },
    /// A second SM client on one node.
    #[error("an SM already runs on \"{0}\"")]
    SmRunning(String),
    /// The client's receive socket cannot be reached.
    #[error("cannot reach client {id}'s socket: {why}")]
    Unreachable {
        /// The id it attached with.
        id: u32,
        /// What the system said.
        why: String,
    },
    /// The node's agent would not answer a local read.
    #[error("{0} cannot be read")]
    Unreadable(String),
    /// A command with words it does not take.
    #[error("{verb} takes {takes} argument(s); unexpected \"{extra}\"")]
    Extra {
        /// The command.
        verb: String,
        /// How many arguments it takes.
        takes: usize,
        /// The first word too many (escaped).
        extra: String,
    },
    /// A command without its node.
    #[error("a node name is missing")]
    MissingNode,
    /// `link-down`/`link-up` without a port of the node.
    #[error("a port number of the node is missing")]
    MissingPort,
    /// `dump` without a file.
    #[error("dump needs a file to write")]
    MissingPath,
    /// `sys-guid` without a GUID of at most 16 hex digits.
    #[error("sys-guid takes NODE GUID: a GUID of at most 16 hex digits")]
    BadGuid,
    /// `port-error` without a trap 129-131, or with a count not 1-1000.
    #[error("port-error takes NODE PORT TRAP [COUNT]: a trap 129, 130 or 131, and 1-1000 of them")]
    BadPortError,
    /// `node-desc` without the text.
    #[error("node-desc needs the node's new description")]
    MissingText,
    /// `link-down` on a port with no cable.
    #[error("{node} port {port} has no cable up to take down")]
    NoCable {
        /// The node's name.
        node: String,
        /// The port.
        port: u8,
    },
    /// `link-up` on a port whose cable is up.
    #[error("the cable at {node} port {port} is up already")]
    CableUp {
        /// The node's name.
        node: String,
        /// The port.
        port: u8,
    },
    /// `node-down` on a node that is down.
    #[error("{0} is down already")]
    AlreadyDown(String),
    /// `link-up` of a cable whose node (either end) is down: it comes
    /// back with that node.
    #[error("{0} is down: its cables come back with it (node-up)")]
    CableOfDownNode(String),
    /// `node-up` on a node that was not taken down.
    #[error("{0} is up: only a node taken down with node-down comes back up")]
    NotDown(String),
    /// `node-vfs` without a VF count of 0 to 128.
    #[error("a VF count of 0 to 128 is missing")]
    MissingVfs,
    /// `node-vfs` on a node that is not a hypervisor or a CA of one or
    /// two ports other than the SM's, or that is up; `node-reset` on a
    /// node that is not a switch, or is down.
    #[error("{0}")]
    NotVfs(String),
    /// An empty command.
    #[error("empty command")]
    Empty,
    /// A verb ibkit does not know.
    #[error("unknown command \"{0}\" (link-down, link-up, node-down, node-up, node-vfs, node-reset, dump, stats, reload-sm)")]
    Unknown(String),
}

/// Counters of a serving run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServeStats {
    /// Packets received from clients.
    pub packets: u64,
    /// SMP responses delivered to clients.
    pub answered: u64,
    /// Requests answered with ETIMEDOUT.
    pub timeouts: u64,
    /// Malformed datagrams (logged and dropped).
    pub malformed: u64,
    /// Datagrams and control requests from users who may not use the
    /// server (dropped or answered with an error).
    pub refused: u64,
    /// Log lines left out by the rate limit.
    pub unlogged: u64,
    /// Traps delivered to SM clients.
    pub traps: u64,
    /// GS MADs (SA and other classes) forwarded between clients.
    pub gs_forwarded: u64,
    /// PerfMgt requests the ports' PMAs answered.
    pub pma_answered: u64,
    /// The most SMPs one client had unanswered in the fabric at once:
    /// what an SM keeps on the wire (OpenSM's `max_wire_smps`), as far as
    /// the server reads them before answering.
    pub peak_outstanding: u64,
    /// Clients dropped because they stopped reading or were gone.
    pub dropped: u64,
    /// Batches served: reads of client datagrams answered together.
    pub batches: u64,
    /// Nanoseconds from reading a batch to having its answers ready
    /// (parsing, the fabric's hops, the agents; after a poll, the
    /// non-blocking reads too), over all batches; the answer delay, if
    /// any, is not in it.
    pub fabric_ns: u64,
    /// Nanoseconds spent handing answers to the kernel (sendmmsg, which
    /// also wakes the client), over all batches.
    pub send_ns: u64,
}

/// What `stats` answers: the server's counters and the fabric's.
#[derive(Clone, Debug, Serialize)]
pub struct StatsReport {
    /// The server's.
    #[serde(flatten)]
    pub serve: ServeStats,
    /// Cable crossings in the fabric.
    pub hops: u64,
    /// LID-routed packets dropped when their hop limit ran out.
    pub expired: u64,
    /// Seconds since the server started.
    pub uptime_s: f64,
}

/// The fabric's state as ibkit sees it (`ibkit fabric ctl dump`).
#[derive(Clone, Debug, Serialize)]
pub struct FabricDump {
    /// Every node.
    pub nodes: Vec<NodeDump>,
}

/// One node of a [`FabricDump`].
#[derive(Clone, Debug, Serialize)]
pub struct NodeDump {
    /// Its name in the topology.
    pub name: String,
    /// Its node GUID, `0x`-prefixed hex.
    pub guid: String,
    /// `switch` or `ca`.
    pub kind: &'static str,
    /// Its (port 0 or port 1) LID.
    pub lid: u16,
    /// Its ports.
    pub ports: Vec<PortDump>,
    /// A switch's port 0: the client reregistrations an SM asked of it
    /// (see [`PortDump::client_reregistrations`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port0_client_reregistrations: Option<u32>,
    /// A hypervisor's VFs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vfs: Option<Vec<VfDump>>,
    /// A switch's linear forwarding table, LID 0 to LinearFDBTop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lft: Option<Vec<u8>>,
}

/// One port of a [`NodeDump`].
#[derive(Clone, Debug, Serialize)]
pub struct PortDump {
    /// Its number.
    pub port: u8,
    /// PortInfo:PortState.
    pub state: u8,
    /// The far end of its cable.
    pub peer: Option<PeerDump>,
    /// How many Set(PortInfo) with ClientReregister an SM sent the port
    /// (an end port's; a switch's external ports take none).
    pub client_reregistrations: u32,
}

/// The far end of a cable.
#[derive(Clone, Debug, Serialize)]
pub struct PeerDump {
    /// The node's name.
    pub node: String,
    /// Its port.
    pub port: u8,
}

/// One VF of a hypervisor.
#[derive(Clone, Debug, Serialize)]
pub struct VfDump {
    /// Its vport LID.
    pub lid: u16,
    /// Its vport state.
    pub state: u8,
}

/// The state of `f`: nodes, links, LIDs, port states, forwarding tables,
/// and each hypervisor's VFs (LID, vport state).
pub fn dump(f: &Fabric) -> FabricDump {
    let nodes = f
        .topo
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| NodeDump {
            name: n.name.clone(),
            guid: format!("{:#018x}", n.guid),
            kind: if n.kind == NodeType::Switch {
                "switch"
            } else {
                "ca"
            },
            lid: f.nodes[i].lid().0,
            ports: (1..=n.ports)
                .map(|p| PortDump {
                    port: p,
                    state: f.nodes[i].port_state(p).map_or(0, u8::from),
                    peer: f.topo.peer_of(i, p).map(|(m, q)| PeerDump {
                        node: f.topo.nodes[m].name.clone(),
                        port: q,
                    }),
                    client_reregistrations: f.nodes[i].client_reregistrations(p).unwrap_or(0),
                })
                .collect(),
            port0_client_reregistrations: match &f.nodes[i] {
                SimNode::Switch(_) => f.nodes[i].client_reregistrations(0),
                _ => None,
            },
            vfs: match &f.nodes[i] {
                SimNode::Hypervisor(h) => Some(
                    (h.vports.iter())
                        .flat_map(|v| v.vfs.iter())
                        .map(|v| VfDump {
                            lid: v.vport_lid.0,
                            state: u8::from(v.vport_state),
                        })
                        .collect(),
                ),
                _ => None,
            },
            lft: match &f.nodes[i] {
                SimNode::Switch(s) => {
                    let top = s.model.switch_info.linear_fdb_top;
                    Some((0..=top).map(|l| s.model.lft_port(Lid(l))).collect())
                }
                _ => None,
            },
        })
        .collect();
    FabricDump { nodes }
}

/// Text a client chose, as the log shows it: control characters escaped,
/// at most 200 characters.
pub fn clean(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == 200 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The abstract socket of ibkit's own control interface.
pub fn control_name(base: &str) -> String {
    format!("{base}:ibkit")
}

#[cfg(test)]
mod tests;
