//! The ibsim-protocol server without I/O.

use super::{clean, dump, Access, Command, FabricDump, Peer, ServeError, ServeStats, StatsReport};
use crate::ibsim::{
    self, ClientInfo, CtlType, SimCtl, SimRequest, CTL_SIZE, MAX_CLIENTS, REQ_SIZE,
};
use crate::sim::{Delivery, Fabric, FabricEvent};
use mad_core::attr::{AttributeId, NodeType};
use mad_core::Smp;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The status a dropped client's requests come back with (ECONNRESET):
/// its slot was taken from it, and it must attach again.
pub const ECONNRESET: u32 = 104;

/// Lines a second about what clients did.
pub const LOG_PER_SECOND: u32 = 20;

/// What a [`Session`] needs from the sockets while it handles a request.
pub trait Transport {
    /// Points slot `slot`'s sending socket at the receive socket of the
    /// client that attaches with `id` (libumad2sim: its pid).
    fn connect(&mut self, slot: usize, id: u32) -> Result<(), String>;
    /// Whether the receive socket of client `id` still exists.
    fn alive(&mut self, id: u32) -> bool;
}

/// What a command is answered with.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// This text.
    Text(String),
    /// `dump`: the driver writes [`Session::dump`] to this file and says
    /// so (the session does no I/O).
    Dump(String),
    /// `reload-sm`: the driver sends SIGHUP to these processes, the SM
    /// clients the requester may signal (their credentials when they
    /// attached), so that each reads its configuration files again.
    Hup(Vec<i32>),
}

/// An attached client.
#[derive(Debug)]
struct Client {
    /// The id it attached with, which names its receive socket.
    id: u32,
    node: usize,
    issm: bool,
    /// Who attached it, as the kernel vouched for the request.
    peer: Option<Peer>,
    /// The QP it attached with: GS requests to that QP at its node come
    /// to it (QP 0 and 1: only to the node's SM client, as in ibsim).
    qp: u32,
    /// Requests in the fabric, by the transaction ID the server gave them,
    /// each as the client sent it. A client keeps few in flight (OpenSM:
    /// max_wire_smps, 4 by default), so a list is quicker than a map.
    outstanding: Vec<(u64, SimRequest)>,
}

/// A client slot.
#[derive(Debug)]
enum Slot {
    Free,
    Attached(Client),
    /// Taken from a client that stopped reading: what it still sends is
    /// answered with [`ECONNRESET`], until it attaches again or is gone.
    Dropped {
        id: u32,
        why: String,
    },
}

/// Log lines about what clients did, at most [`LOG_PER_SECOND`] a
/// second; the lines left out are counted, and said when the next second
/// starts.
#[derive(Debug)]
struct RateLimit {
    window: Instant,
    lines: u32,
    skipped: u64,
}

/// ibsim's server over one simulated fabric: control requests, packets
/// and ibkit's commands in; replies and, per client, datagrams out.
///
/// A driver feeds it what its sockets read ([`Session::on_ctl`],
/// [`Session::on_packet`], [`Session::on_command`]), runs the fabric with
/// [`Session::settle`] after a batch of packets, and sends each client
/// what [`Session::take_outbox`] holds for it. Time comes in as `now`;
/// the sockets it needs while attaching are behind [`Transport`].
pub struct Session {
    pub(super) fabric: Fabric,
    slots: Vec<Slot>,
    stats: ServeStats,
    access: Access,
    /// Nodes taken down with `node-down`.
    down: BTreeSet<usize>,
    outbox: Vec<Vec<[u8; REQ_SIZE]>>,
    log: RateLimit,
    started: Instant,
    /// GS requests forwarded, newest last: (TID, requester's slot,
    /// requester's node), so that the responses — an RMPP answer is many
    /// with one TID — find their way back. At most [`GS_REMEMBERED`].
    gs_asked: std::collections::VecDeque<(u64, usize, usize)>,
    /// SMInfo requests handed to the SM client of their node (as ibsim
    /// hands them), newest last: (requester's slot, stamped TID, the SM
    /// client's slot). Their answers come when that client sends them, so
    /// [`Session::settle`] does not time them out, unless that client
    /// leaves first. At most [`SM_ASKED`].
    sm_asked: std::collections::VecDeque<(usize, u64, usize)>,
}

/// SMInfo requests waiting for another SM client's answer, at most; the
/// oldest is timed out past this.
pub const SM_ASKED: usize = 256;

/// GS requests remembered for their responses; the oldest is forgotten
/// past this.
pub const GS_REMEMBERED: usize = 4096;

impl Session {
    /// Serves `fabric` to the users `access` admits, from `now`.
    pub fn new(mut fabric: Fabric, access: Access, now: Instant) -> Session {
        // The fabric's own SM node claims IsSM for an SM run in process;
        // served, no SM runs there until a client attaches as one (and
        // says so, SetIsSm), as on ibsim. Left on, an SM would find a
        // port that claims IsSM and answers SMInfo for nobody (OpenSM:
        // "ERR 2F19: Unexpected SM port GUID in response").
        let sm = fabric.sm_node;
        fabric.set_is_sm(sm, false);
        Session {
            fabric,
            slots: (0..MAX_CLIENTS).map(|_| Slot::Free).collect(),
            stats: ServeStats::default(),
            access,
            down: BTreeSet::new(),
            outbox: (0..MAX_CLIENTS).map(|_| Vec::new()).collect(),
            log: RateLimit {
                window: now,
                lines: 0,
                skipped: 0,
            },
            started: now,
            gs_asked: std::collections::VecDeque::new(),
            sm_asked: std::collections::VecDeque::new(),
        }
    }

    /// The fabric served.
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// The counters so far.
    pub fn stats(&self) -> &ServeStats {
        &self.stats
    }

    /// Who may use the server.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// Slots whose socket the driver should read: attached clients, and
    /// dropped ones (to tell them so).
    pub fn listening(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !matches!(s, Slot::Free))
            .map(|(i, _)| i)
    }

    /// Whether a client is attached at `slot`.
    pub fn is_attached(&self, slot: usize) -> bool {
        matches!(self.slots.get(slot), Some(Slot::Attached(_)))
    }

    /// The datagrams queued for the client at `slot`, oldest first.
    pub fn take_outbox(&mut self, slot: usize) -> Vec<[u8; REQ_SIZE]> {
        self.outbox
            .get_mut(slot)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Whether datagrams wait for any client.
    pub fn has_output(&self) -> bool {
        self.outbox.iter().any(|o| !o.is_empty())
    }

    /// Adds one served batch's times to the counters.
    pub fn count_batch(&mut self, fabric: Duration, send: Duration) {
        self.stats.batches += 1;
        self.stats.fabric_ns += fabric.as_nanos() as u64;
        self.stats.send_ns += send.as_nanos() as u64;
    }

    /// The PMAs' samples run on the wall clock here, so that a client that
    /// starts one and waits sees it end: set at each thing the session is
    /// handed, before it can move a counter.
    fn follow_clock(&mut self, now: Instant) {
        let ns = now.saturating_duration_since(self.started).as_nanos();
        self.fabric
            .set_pma_clock(u64::try_from(ns).unwrap_or(u64::MAX));
    }

    /// A control request (`<base>:ctl`) from `peer`; the reply to send
    /// back (None: drop it, it was not a control message). A sender who
    /// may not use the server gets an Error reply and changes nothing.
    pub fn on_ctl(
        &mut self,
        b: &[u8],
        peer: Option<Peer>,
        t: &mut impl Transport,
        now: Instant,
    ) -> Option<[u8; CTL_SIZE]> {
        self.follow_clock(now);
        let mut ctl = match SimCtl::parse(b) {
            Ok(c) => c,
            Err(e) => {
                self.stats.malformed += 1;
                self.log(now, format_args!("bad control packet ({e}) - dropped"));
                return None;
            }
        };
        let allowed = self.access.check(peer);
        if allowed.is_err() {
            self.stats.refused += 1;
        }
        let ok = allowed.and_then(|()| self.ctl_request(&mut ctl, t, peer));
        if let Err(why) = ok {
            self.log(now, format_args!("control {:?} refused: {why}", ctl.kind));
            ctl.kind = CtlType::Error;
        }
        Some(ctl.encode())
    }

    /// A command of ibkit's control interface from `peer`; what to
    /// answer.
    pub fn on_command(
        &mut self,
        line: &str,
        peer: Option<Peer>,
        now: Instant,
    ) -> Result<Answer, ServeError> {
        self.follow_clock(now);
        if let Err(e) = self.access.check(peer) {
            self.stats.refused += 1;
            self.log(now, format_args!("a control command refused: {e}"));
            return Err(e);
        }
        let cmd = Command::parse(line)?;
        if matches!(cmd, Command::Dump(_)) {
            if let Err(e) = self.access.may_name_files(peer) {
                self.stats.refused += 1;
                return Err(e);
            }
        }
        if cmd == Command::ReloadSm {
            return self.sm_pids(peer).map(Answer::Hup).inspect_err(|e| {
                if matches!(e, ServeError::NotSmOwner { .. }) {
                    self.stats.refused += 1;
                }
            });
        }
        self.command(&cmd, now)
    }

    /// The processes of the SM clients attached now that `peer` may
    /// signal: its own (the same user), or any for root.
    fn sm_pids(&self, peer: Option<Peer>) -> Result<Vec<i32>, ServeError> {
        let who = peer.ok_or(ServeError::NoCredentials)?;
        let sms: Vec<Option<Peer>> = (self.slots.iter())
            .filter_map(|s| match s {
                Slot::Attached(c) if c.issm => Some(c.peer),
                _ => None,
            })
            .collect();
        if sms.is_empty() {
            return Err(ServeError::NoSm);
        }
        let pids: Vec<i32> = (sms.iter().flatten())
            .filter(|p| who.uid == 0 || p.uid == who.uid)
            .map(|p| p.pid)
            .filter(|&pid| pid > 0)
            .collect();
        if pids.is_empty() {
            return Err(ServeError::NotSmOwner { uid: who.uid });
        }
        Ok(pids)
    }

    /// The fabric's state.
    pub fn dump(&self) -> FabricDump {
        dump(&self.fabric)
    }

    /// The counters as `stats` reports them.
    pub fn report(&self, now: Instant) -> StatsReport {
        StatsReport {
            serve: self.stats.clone(),
            hops: self.fabric.stats.hops,
            expired: self.fabric.stats.expired,
            uptime_s: now.saturating_duration_since(self.started).as_secs_f64(),
        }
    }

    /// Runs a command.
    pub fn command(&mut self, cmd: &Command, now: Instant) -> Result<Answer, ServeError> {
        let event = match cmd {
            Command::LinkDown(name, p) | Command::LinkUp(name, p) => {
                let n = self.node(name)?;
                let p = *p;
                if p > self.fabric.topo.nodes[n].ports {
                    return Err(ServeError::MissingPort);
                }
                let cabled = self.fabric.topo.peer_of(n, p).is_some();
                let node = clean(&self.fabric.topo.nodes[n].name);
                match (cmd, cabled) {
                    (Command::LinkDown(..), true) => FabricEvent::LinkDown(n, p),
                    (Command::LinkDown(..), false) => {
                        return Err(ServeError::NoCable { node, port: p })
                    }
                    (_, false) => {
                        // A cable of a node that is down comes back with it.
                        let peer = self.fabric.cut_peer(n, p).map(|(m, _)| m);
                        if let Some(k) = [Some(n), peer]
                            .into_iter()
                            .flatten()
                            .find(|k| self.down.contains(k))
                        {
                            let name = clean(&self.fabric.topo.nodes[k].name);
                            return Err(ServeError::CableOfDownNode(name));
                        }
                        FabricEvent::LinkUp(n, p)
                    }
                    (_, true) => return Err(ServeError::CableUp { node, port: p }),
                }
            }
            Command::NodeDown(name) => {
                let n = self.node(name)?;
                if !self.down.insert(n) {
                    return Err(ServeError::AlreadyDown(clean(
                        &self.fabric.topo.nodes[n].name,
                    )));
                }
                FabricEvent::NodeDown(n)
            }
            Command::NodeUp(name) => {
                let n = self.node(name)?;
                if !self.down.remove(&n) {
                    return Err(ServeError::NotDown(clean(&self.fabric.topo.nodes[n].name)));
                }
                FabricEvent::NodeUp(n)
            }
            Command::NodeReset(name) => {
                let (n, name) = self.live_node(name)?;
                self.fabric
                    .reset_tables(n)
                    .map_err(|_| ServeError::NotVfs(format!("{name} is not a switch")))?;
                return Ok(Answer::Text(format!(
                    "ok: {name}'s forwarding tables are empty, its LID and links kept"
                )));
            }
            Command::NodeVfs(name, vfs) => {
                let n = self.node(name)?;
                let name = clean(&self.fabric.topo.nodes[n].name);
                if !self.down.contains(&n) {
                    return Err(ServeError::NotVfs(format!(
                        "{name} is up: take it down with node-down first"
                    )));
                }
                self.fabric.set_vfs(n, *vfs).map_err(|_| {
                    ServeError::NotVfs(format!(
                        "{name} is not a CA of one or two ports other than the SM's"
                    ))
                })?;
                return Ok(Answer::Text(format!(
                    "ok: {name} has {vfs} VF(s) a port when it comes up"
                )));
            }
            Command::NodeDesc(name, text) => {
                let (n, name) = self.live_node(name)?;
                let _ = self.fabric.describe(n, text);
                self.settle();
                return Ok(Answer::Text(format!(
                    "ok: {name} says {:?} (trap 144 raised)",
                    clean(text)
                )));
            }
            Command::PortError(name, port, trap, count) => {
                let (n, name) = self.live_node(name)?;
                for _ in 0..*count {
                    self.fabric
                        .port_error(n, *port, *trap)
                        .map_err(|_| ServeError::MissingPort)?;
                    self.settle();
                }
                return Ok(Answer::Text(format!(
                    "ok: {name} port {port} raised trap {trap} {count} time(s)"
                )));
            }
            Command::SysGuid(name, guid) => {
                let (n, name) = self.live_node(name)?;
                let _ = self.fabric.set_system_image(n, *guid);
                self.settle();
                return Ok(Answer::Text(format!(
                    "ok: {name} has SystemImageGUID {guid:#018x} (trap 145 raised)"
                )));
            }
            Command::Dump(path) => return Ok(Answer::Dump(path.clone())),
            // Only with the requester's credentials (`on_command`).
            Command::ReloadSm => return Err(ServeError::NoCredentials),
            Command::Stats => {
                let json = serde_json::to_string(&self.report(now)).unwrap_or_default();
                return Ok(Answer::Text(json));
            }
        };
        let at = self.fabric.now_ns();
        self.fabric.schedule(at, event);
        self.settle();
        Ok(Answer::Text(format!("ok: {event:?}")))
    }

    /// The node called `name`, with its name as printed; `Err` when it
    /// is down.
    fn live_node(&self, name: &str) -> Result<(usize, String), ServeError> {
        let n = self.node(name)?;
        let name = clean(&self.fabric.topo.nodes[n].name);
        if self.down.contains(&n) {
            return Err(ServeError::NotVfs(format!("{name} is down")));
        }
        Ok((n, name))
    }

    fn node(&self, name: &str) -> Result<usize, ServeError> {
        self.fabric
            .topo
            .nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| ServeError::NoNode(clean(name)))
    }

    /// A datagram read from slot `slot`'s socket, sent by `peer`; true
    /// when a request went into the fabric (run [`Session::settle`] after
    /// the batch).
    pub fn on_packet(&mut self, slot: usize, b: &[u8], peer: Option<Peer>, now: Instant) -> bool {
        if let Err(e) = self.access.check(peer) {
            // Only the attached client's socket can send here; this is
            // someone who took its name.
            self.stats.refused += 1;
            self.log(now, format_args!("client {slot}: a packet refused: {e}"));
            return false;
        }
        self.stats.packets += 1;
        self.follow_clock(now);
        let mut r = match SimRequest::parse(b) {
            Ok(r) => r,
            Err(e) => {
                self.stats.malformed += 1;
                self.log(
                    now,
                    format_args!("client {slot}: malformed packet ({e}) - dropped"),
                );
                return false;
            }
        };
        let node = match self.slots.get(slot) {
            Some(Slot::Attached(c)) => c.node,
            Some(Slot::Dropped { id, why }) => {
                let (id, why) = (*id, why.clone());
                self.log(
                    now,
                    format_args!("client {slot} (id {id}) was dropped ({why}): its request is answered with ECONNRESET"),
                );
                if !r.is_response() {
                    r.status = ECONNRESET;
                    self.outbox[slot].push(r.encode());
                }
                return false;
            }
            _ => return false,
        };
        let class = r.class();
        if class == mad_core::perf::PERF_CLASS && !r.is_response() {
            self.pma(slot, node, r, now);
            return false;
        }
        if class != 0x01 && class != 0x81 {
            self.forward_gs(slot, node, r, now);
            return false;
        }
        if r.is_response() {
            // Only another SM's SMInfo request is asked of a client: its
            // SM client answers, with the TID the requester's slot stamps.
            return self.client_sm_answer(slot, node, &r);
        }
        // The request as the client sent it, to answer with its own TID.
        let original = r.clone();
        let tid = (r.tid() & 0xFFFF_FFFF_FFFF) | ((slot as u64) << 48);
        r.set_tid(tid);
        let Ok(smp) = Smp::parse(&r.mad).cloned() else {
            self.stats.malformed += 1;
            self.log(
                now,
                format_args!("client {slot}: malformed SMP - timed out"),
            );
            return self.refuse(slot, r);
        };
        tracing::debug!(
            "client {slot} @{}: {:?} {:?} mod {:#x} dlid {:#x}",
            self.fabric.topo.nodes[node].name,
            smp.method(),
            smp.attribute_id(),
            smp.attribute_modifier(),
            r.dlid
        );
        if smp.method() != mad_core::Method::TrapRepress {
            if let Some(Slot::Attached(c)) = self.slots.get_mut(slot) {
                c.outstanding.push((tid, original));
                let n = c.outstanding.len() as u64;
                self.stats.peak_outstanding = self.stats.peak_outstanding.max(n);
            }
        }
        let dlid = if class == 0x81 { 0xFFFF } else { r.dlid };
        // One that cannot leave the node gets no response: settle() times
        // it out.
        self.fabric.inject(node, smp, dlid);
        true
    }

    /// A GS MAD (the SA's, or another class's but PerfMgt's) from the
    /// client at `slot`, attached at `node`: forwarded through the
    /// installed LFTs to the node that holds its DLID, as ibsim does, to
    /// the client there that takes it — a response to the client that
    /// asked (by TID), a request to the QP it names, QP 0 or 1 to the
    /// node's SM client. A request nobody takes is answered with
    /// ETIMEDOUT at once; a response, dropped.
    fn forward_gs(&mut self, slot: usize, node: usize, r: SimRequest, now: Instant) {
        let class = r.class();
        let response = r.is_response();
        let tid = r.tid();
        // Carried, so that the ports it crosses count it.
        let dst = self.fabric.carry(node, mad_core::Lid(r.dlid));
        let to = dst.and_then(|dst| {
            let attached = |s: &Slot, f: &dyn Fn(&Client) -> bool| {
                matches!(s, Slot::Attached(c) if c.node == dst && f(c))
            };
            if response {
                self.gs_asked
                    .iter()
                    .rev()
                    .find(|&&(t, _, n)| t == tid && n == dst)
                    .map(|&(_, s, _)| s)
                    .filter(|&s| attached(&self.slots[s], &|_| true))
                    // An RMPP ACK goes the other way, to the SA's node.
                    .or_else(|| self.slots.iter().position(|s| attached(s, &|c| c.issm)))
            } else {
                let qp = r.dqp;
                self.slots
                    .iter()
                    .position(|s| attached(s, &|c| if qp > 1 { c.qp == qp } else { c.issm }))
            }
        });
        let Some(to) = to else {
            self.log(
                now,
                format_args!(
                    "client {slot}: class {class:#04x} to LID {} QP {}: nobody takes it{}",
                    r.dlid,
                    r.dqp,
                    if response {
                        " - dropped"
                    } else {
                        " - timed out"
                    }
                ),
            );
            if !response {
                self.refuse(slot, r);
            }
            return;
        };
        if !response {
            if self.gs_asked.len() >= GS_REMEMBERED {
                self.gs_asked.pop_front();
            }
            self.gs_asked.push_back((tid, slot, node));
        }
        let out = SimRequest {
            slid: self.fabric.nodes[node].lid().0,
            status: 0,
            ..r
        };
        self.stats.gs_forwarded += 1;
        self.outbox[to].push(out.encode());
    }

    /// A PerfMgt request from the client at `slot`, attached at `node`:
    /// carried through the LFTs to the port that holds its DLID, whose PMA
    /// (a switch's one, a CA port's own) answers (as ibsim's own PMA
    /// does, whatever clients are attached there), and the answer carried
    /// back. A request that reaches no port is answered with ETIMEDOUT at
    /// once.
    fn pma(&mut self, slot: usize, node: usize, r: SimRequest, now: Instant) {
        let Some(dst) = self.fabric.carry(node, mad_core::Lid(r.dlid)) else {
            self.log(
                now,
                format_args!(
                    "client {slot}: PerfMgt request to LID {}: no port holds it - timed out",
                    r.dlid
                ),
            );
            self.refuse(slot, r);
            return;
        };
        // The port it reaches the node by: a CA's PMAs are its ports'.
        let port = self.fabric.nodes[dst].port_of_lid(mad_core::Lid(r.dlid));
        let Some(mad) = self.fabric.pma_answer(dst, port, &r.mad) else {
            // Not a MAD a PMA answers (another base version): it is
            // dropped there, and the client, which may wait for ever,
            // hears so at once.
            self.stats.malformed += 1;
            self.refuse(slot, r);
            return;
        };
        let back = self.fabric.nodes[node].lid();
        self.fabric.carry(dst, back);
        let out = SimRequest {
            slid: r.dlid,
            dlid: back.0,
            sqp: 1,
            dqp: r.sqp,
            status: 0,
            length: 256,
            mad,
        };
        self.stats.pma_answered += 1;
        self.outbox[slot].push(out.encode());
    }

    /// An SM client's answer to an SMInfo request handed to it: into the
    /// fabric, back to the requester (whose slot the TID names).
    fn client_sm_answer(&mut self, slot: usize, node: usize, r: &SimRequest) -> bool {
        let issm = matches!(self.slots.get(slot), Some(Slot::Attached(c)) if c.issm);
        let Ok(smp) = Smp::parse(&r.mad).cloned() else {
            self.stats.malformed += 1;
            return false;
        };
        let key = ((r.tid() >> 48) as usize, r.tid());
        if !issm
            || smp.attribute_id() != mad_core::attr::AttributeId::SmInfo
            || !self.sm_asked.iter().any(|&(a, t, _)| (a, t) == key)
        {
            return false;
        }
        let dlid = if r.class() == 0x81 { 0xFFFF } else { r.dlid };
        self.fabric.inject(node, smp, dlid);
        true
    }

    /// Answers a request at once with ETIMEDOUT.
    fn refuse(&mut self, slot: usize, mut r: SimRequest) -> bool {
        r.status = ibsim::ETIMEDOUT;
        self.stats.timeouts += 1;
        self.outbox[slot].push(r.encode());
        false
    }

    /// Runs the fabric until nothing is in flight, then queues for every
    /// client what reached it and times out what did not come back.
    pub fn settle(&mut self) {
        self.fabric.run_to_quiescence();
        for d in self.fabric.take_delivered() {
            self.on_delivery(d);
        }
        for slot in 0..MAX_CLIENTS {
            let Slot::Attached(c) = &mut self.slots[slot] else {
                continue;
            };
            let asked = &self.sm_asked;
            let (wait, gone): (Vec<_>, Vec<_>) = (c.outstanding.drain(..))
                .partition(|(t, _)| asked.iter().any(|&(a, u, _)| (a, u) == (slot, *t)));
            c.outstanding = wait;
            for (_, mut r) in gone {
                r.status = ibsim::ETIMEDOUT;
                self.stats.timeouts += 1;
                self.outbox[slot].push(r.encode());
            }
        }
    }

    fn on_delivery(&mut self, d: Delivery) {
        let mut wire = *d.smp.as_wire();
        let method = wire[3];
        let tid = u64::from_be_bytes(wire[8..16].try_into().unwrap_or([0; 8]));
        let (slot, trap) = if method & 0x80 != 0 {
            self.sm_asked
                .retain(|&(a, t, _)| (a, t) != ((tid >> 48) as usize, tid));
            ((tid >> 48) as usize, false)
        } else if matches!(method, 0x01 | 0x02) {
            // Another SM's SMInfo request: for the SM client here.
            self.hand_to_client_sm(d, tid);
            return;
        } else if method == 0x05 {
            // A trap: for the SM client on the node.
            match self
                .slots
                .iter()
                .position(|s| matches!(s, Slot::Attached(c) if c.node == d.node && c.issm))
            {
                Some(i) => (i, true),
                None => return,
            }
        } else {
            return;
        };
        let Some(Slot::Attached(c)) = self.slots.get_mut(slot) else {
            return;
        };
        if c.node != d.node {
            return;
        }
        let orig = c
            .outstanding
            .iter()
            .position(|(t, _)| *t == tid)
            .map(|i| c.outstanding.swap_remove(i).1);
        if !trap && orig.is_none() {
            // Already timed out, or not this client's.
            return;
        }
        if let Some(o) = &orig {
            // The server's slot stamp off: the client's own TID back.
            wire[8..16].copy_from_slice(&o.tid().to_be_bytes());
        }
        let r = SimRequest {
            dlid: self.fabric.nodes[d.node].lid().0,
            slid: d.slid,
            dqp: orig.as_ref().map_or(0, |o| o.sqp),
            sqp: orig.as_ref().map_or(0, |o| o.dqp),
            status: 0,
            length: mad_core::MAD_SIZE as u64,
            mad: wire,
        };
        if trap {
            self.stats.traps += 1;
        } else {
            self.stats.answered += 1;
        }
        self.outbox[slot].push(r.encode());
    }

    /// Hands an SMInfo request that reached `d.node` to the SM client
    /// there, keeping the requester's stamped TID for the answer.
    fn hand_to_client_sm(&mut self, d: Delivery, tid: u64) {
        let Some(to) = (self.slots.iter())
            .position(|s| matches!(s, Slot::Attached(c) if c.node == d.node && c.issm))
        else {
            return;
        };
        if self.sm_asked.len() >= SM_ASKED {
            self.sm_asked.pop_front();
        }
        self.sm_asked.push_back(((tid >> 48) as usize, tid, to));
        let r = SimRequest {
            dlid: self.fabric.nodes[d.node].lid().0,
            slid: d.slid,
            dqp: 0,
            sqp: 0,
            status: 0,
            length: mad_core::MAD_SIZE as u64,
            mad: *d.smp.as_wire(),
        };
        self.stats.answered += 1;
        self.outbox[to].push(r.encode());
    }

    /// Frees the slots of clients whose receive socket is gone (killed
    /// without saying goodbye).
    pub fn reap(&mut self, t: &mut impl Transport) {
        for slot in 0..MAX_CLIENTS {
            let id = match &self.slots[slot] {
                Slot::Attached(c) => c.id,
                Slot::Dropped { id, .. } => *id,
                Slot::Free => continue,
            };
            if !t.alive(id) {
                tracing::info!("client {slot} (id {id}) is gone - its slot is free");
                if matches!(self.slots[slot], Slot::Attached(_)) {
                    self.stats.dropped += 1;
                }
                self.detach(slot);
                self.slots[slot] = Slot::Free;
            }
        }
    }

    /// Takes slot `slot` from its client, which stopped reading (`why`):
    /// its node loses the client, and what it sends from now on is
    /// answered with [`ECONNRESET`] until it attaches again.
    pub fn drop_client(&mut self, slot: usize, why: &str) {
        let Some(Slot::Attached(c)) = self.slots.get(slot) else {
            return;
        };
        let id = c.id;
        tracing::warn!("client {slot} (id {id}) dropped: {why}");
        self.stats.dropped += 1;
        self.detach(slot);
        self.outbox[slot].clear();
        self.slots[slot] = Slot::Dropped {
            id,
            why: why.to_string(),
        };
    }

    /// The client at `slot` leaves its node (the slot itself is left to
    /// the caller).
    fn detach(&mut self, slot: usize) {
        let Slot::Attached(c) = std::mem::replace(&mut self.slots[slot], Slot::Free) else {
            return;
        };
        if c.issm {
            self.fabric.set_is_sm(c.node, false);
        }
        // What was handed to it will not be answered: the next settle
        // times it out for its requester, as a MAD to an SM that died
        // times out on a fabric (libumad2sim's requesters have no
        // timer of their own to do it).
        self.sm_asked.retain(|&(_, _, to)| to != slot);
        if !self
            .slots
            .iter()
            .any(|s| matches!(s, Slot::Attached(o) if o.node == c.node))
        {
            self.fabric.detach(c.node);
        }
    }

    fn ctl_request(
        &mut self,
        ctl: &mut SimCtl,
        t: &mut impl Transport,
        peer: Option<Peer>,
    ) -> Result<(), ServeError> {
        match ctl.kind {
            CtlType::Connect => return self.connect(ctl, t, peer),
            CtlType::Disconnect => {
                let slot = ctl.client as usize;
                if slot < MAX_CLIENTS {
                    self.detach(slot);
                    self.slots[slot] = Slot::Free;
                }
                return Ok(());
            }
            CtlType::Error => return Err(ServeError::ErrorPacket),
            _ => {}
        }
        let slot = ctl.client as usize;
        let node = match self.slots.get(slot) {
            Some(Slot::Attached(c)) => c.node,
            Some(Slot::Dropped { why, .. }) => {
                return Err(ServeError::Dropped {
                    slot,
                    why: why.clone(),
                })
            }
            _ => return Err(ServeError::NoClient(ctl.client)),
        };
        // A client at a switch is at its management port 0 (as in ibsim).
        let home: u8 = if self.fabric.topo.nodes[node].kind == NodeType::Switch {
            0
        } else {
            1
        };
        let info = |f: &mut Fabric, attr: AttributeId, am| {
            f.local_get(node, home, attr, am)
                .ok_or_else(|| ServeError::Unreadable(format!("{attr:?}")))
        };
        let d = &mut ctl.data;
        match ctl.kind {
            CtlType::GetPort => {
                let pi = info(&mut self.fabric, AttributeId::PortInfo, u32::from(home))?;
                d.fill(0);
                d[0..2].copy_from_slice(&u16::from_be_bytes([pi[16], pi[17]]).to_ne_bytes());
                d[2] = pi[32] & 0x0F;
            }
            CtlType::GetVendor => {
                let ni = info(&mut self.fabric, AttributeId::NodeInfo, 0)?;
                d.fill(0);
                let vendor = u32::from_be_bytes([0, ni[37], ni[38], ni[39]]);
                let part = u32::from(u16::from_be_bytes([ni[30], ni[31]]));
                let rev = u32::from_be_bytes([ni[32], ni[33], ni[34], ni[35]]);
                d[0..4].copy_from_slice(&vendor.to_ne_bytes());
                d[4..8].copy_from_slice(&part.to_ne_bytes());
                d[8..12].copy_from_slice(&rev.to_ne_bytes());
                d[16..24].copy_from_slice(&1u64.to_ne_bytes());
            }
            CtlType::GetGid => {
                let pi = info(&mut self.fabric, AttributeId::PortInfo, u32::from(home))?;
                let ni = info(&mut self.fabric, AttributeId::NodeInfo, 0)?;
                d.fill(0);
                d[0..8].copy_from_slice(&pi[8..16]);
                d[8..16].copy_from_slice(&ni[20..28]);
            }
            CtlType::GetGuid => {
                let g = self.fabric.topo.nodes[node].guid;
                d.fill(0);
                d[0..8].copy_from_slice(&g.to_ne_bytes());
            }
            CtlType::GetNodeInfo => *d = info(&mut self.fabric, AttributeId::NodeInfo, 0)?,
            CtlType::GetPortInfo => {
                let ports = self.fabric.topo.nodes[node].ports;
                let p = if d[0] == 0 || d[0] > ports {
                    home
                } else {
                    d[0]
                };
                *d = info(&mut self.fabric, AttributeId::PortInfo, u32::from(p))?;
            }
            CtlType::SetIsSm => {
                let on = i32::from_ne_bytes([d[0], d[1], d[2], d[3]]) != 0;
                if on
                    && self.slots.iter().enumerate().any(|(i, s)| {
                        i != slot && matches!(s, Slot::Attached(c) if c.node == node && c.issm)
                    })
                {
                    return Err(ServeError::SmRunning(clean(
                        &self.fabric.topo.nodes[node].name,
                    )));
                }
                if let Some(Slot::Attached(c)) = self.slots.get_mut(slot) {
                    c.issm = on;
                }
                self.fabric.set_is_sm(node, on);
            }
            CtlType::GetPkeys => *d = info(&mut self.fabric, AttributeId::PKeyTable, 0)?,
            CtlType::Connect | CtlType::Disconnect | CtlType::Error => {}
        }
        Ok(())
    }

    fn connect(
        &mut self,
        ctl: &mut SimCtl,
        t: &mut impl Transport,
        peer: Option<Peer>,
    ) -> Result<(), ServeError> {
        let info = ClientInfo::parse(&ctl.data);
        let free = |s: &[Slot]| s.iter().position(|s| matches!(s, Slot::Free));
        if free(&self.slots).is_none() {
            self.reap(t);
        }
        // A dropped client that attaches again gets its slot back; a new
        // client gets a dropped one's slot when nothing else is free.
        let slot = self
            .slots
            .iter()
            .position(|s| matches!(s, Slot::Dropped { id, .. } if *id == info.id))
            .or_else(|| free(&self.slots))
            .or_else(|| {
                self.slots
                    .iter()
                    .position(|s| matches!(s, Slot::Dropped { .. }))
            })
            .ok_or(ServeError::Full)?;
        let node = if info.nodeid.is_empty() {
            self.fabric.sm_node
        } else {
            self.node(&info.nodeid)?
        };
        if info.issm
            && self
                .slots
                .iter()
                .any(|s| matches!(s, Slot::Attached(c) if c.node == node && c.issm))
        {
            return Err(ServeError::SmRunning(clean(&info.nodeid)));
        }
        t.connect(slot, info.id)
            .map_err(|why| ServeError::Unreachable { id: info.id, why })?;
        self.outbox[slot].clear();
        self.slots[slot] = Slot::Attached(Client {
            id: info.id,
            node,
            issm: info.issm,
            peer,
            qp: info.qp,
            outstanding: Vec::new(),
        });
        self.fabric.attach(node);
        if info.issm {
            self.fabric.set_is_sm(node, true);
        }
        let name = self.fabric.topo.nodes[node].name.clone();
        tracing::info!(
            "client {slot} (pid {}) attached at \"{}\"{}",
            info.id,
            clean(&name),
            if info.issm { " as SM" } else { "" }
        );
        let reply = ClientInfo {
            id: slot as u32,
            qp: info.qp,
            issm: info.issm,
            nodeid: name,
        };
        reply.encode(&mut ctl.data);
        Ok(())
    }

    /// Logs a line about something a client did, within the rate limit.
    fn log(&mut self, now: Instant, line: std::fmt::Arguments<'_>) {
        let l = &mut self.log;
        if now.saturating_duration_since(l.window) >= Duration::from_secs(1) {
            if l.skipped > 0 {
                tracing::warn!("{} more lines like these left out", l.skipped);
            }
            l.window = now;
            l.lines = 0;
            l.skipped = 0;
        }
        if l.lines < LOG_PER_SECOND {
            l.lines += 1;
            tracing::warn!("{}", clean(&line.to_string()));
        } else {
            l.skipped += 1;
            self.stats.unlogged += 1;
        }
    }
}
