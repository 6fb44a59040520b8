//! The outbox: the only way SMPs leave the SM. Requests are queued with
//! their purpose, sent within the window with fresh TIDs, retried on
//! timeout, sent again by directed route when a LID-routed one goes
//! unanswered, held back as stages until what came before is answered,
//! and, in a bring-up, gathered when given up and sent again a round at a
//! time before the phase moves on.

use super::*;

#[derive(Clone, Debug)]
pub(super) enum Purpose {
    NodeInfo {
        from: Option<(usize, u8)>,
    },
    /// Port `port` of node `node` answered NodeInfo beyond port `from`
    /// too, though the SM knows it cabled elsewhere: NodeInfo again by
    /// that known link, to tell a moved cable from a GUID held twice.
    DupCheck {
        node: usize,
        port: u8,
        from: (usize, u8),
    },
    PortInfo {
        node: usize,
        port: u8,
    },
    SwitchInfo {
        node: usize,
    },
    VirtInfo {
        node: usize,
    },
    NodeDesc {
        node: usize,
    },
    SetVPort,
    SetTopOnly,
    SetLid {
        node: usize,
        port: u8,
    },
    SetTop {
        node: usize,
    },
    SetLft,
    SetMft,
    /// A new master reads back what a hypervisor's VF holds.
    VPortRead {
        node: usize,
        vf: u16,
    },
    /// A new master reads back an LFT block a switch holds.
    LftRead {
        node: usize,
        block: u16,
    },
    SetState {
        node: usize,
        port: u8,
    },
    /// A port's forced link width and speeds, set apart from its state
    /// (as OpenSM's link manager does, before it arms the port): the
    /// response updates only those fields.
    SetLink {
        node: usize,
        port: u8,
    },
    SweepSwitchInfo {
        node: usize,
    },
    SweepPortInfo {
        node: usize,
        port: u8,
    },
    /// The SM's own port, read first at each sweep.
    SweepOwnPort,
    Quiesce {
        node: usize,
        port: u8,
        peer: (usize, u8),
    },
    TrapRepress,
    PKeyTable {
        node: usize,
        port: u8,
        block: u16,
    },
    /// A block of an end port's GUID table: its alias GUIDs.
    GuidInfo {
        node: usize,
        block: u8,
    },
    /// The P_Key table of a hypervisor's VF (the VM on it).
    VPortPKeyTable {
        node: usize,
        vf: u16,
    },
    SlToVl {
        node: usize,
        at: super::qos::Sl2VlAt,
    },
    VlArb {
        node: usize,
        port: u8,
        block: u8,
    },
    /// SMInfo of an SM found in discovery or a sweep.
    SmInfo {
        node: usize,
    },
    /// A standby's poll of its master.
    PollMaster,
    /// A SubnSet(SMInfo) of this SM's: a Handover to a standby.
    Handover,
    /// A response of this SM's to a request (sent once, no response).
    Answer,
}

impl Purpose {
    /// The node the request is addressed to, where the purpose names it.
    pub(super) fn node(&self) -> Option<usize> {
        use Purpose::*;
        match *self {
            PortInfo { node, .. }
            | SwitchInfo { node }
            | VirtInfo { node }
            | NodeDesc { node }
            | SetLid { node, .. }
            | SetTop { node }
            | VPortRead { node, .. }
            | LftRead { node, .. }
            | SetState { node, .. }
            | SetLink { node, .. }
            | SweepSwitchInfo { node }
            | SweepPortInfo { node, .. }
            | Quiesce { node, .. }
            | PKeyTable { node, .. }
            | GuidInfo { node, .. }
            | VPortPKeyTable { node, .. }
            | SlToVl { node, .. }
            | VlArb { node, .. }
            | SmInfo { node }
            | DupCheck { node, .. } => Some(node),
            NodeInfo { .. }
            | SetVPort
            | SweepOwnPort
            | SetTopOnly
            | SetLft
            | SetMft
            | TrapRepress
            | PollMaster
            | Handover
            | Answer => None,
        }
    }
}

/// How long `smp` waits for its answer before it is sent again: OpenSM's
/// `long_transaction_timeout` for a Set(SLtoVLMappingTable) with
/// AllInputPorts or AllOutputPorts (bits 17 and 16, optimized SL-to-VL
/// programming: one Set a switch applies to many pairs of ports), as
/// OpenSM's QoS manager gives it; `transaction_timeout` for every other
/// SMP, and for that one too where it is the longer.
pub(super) fn timeout_for(cfg: &SmConfig, smp: &Smp) -> u64 {
    let optimized = smp.method() == Method::Set
        && smp.attribute_id() == AttributeId::SlToVlMappingTable
        && smp.attribute_modifier() & 0x3_0000 != 0;
    if optimized {
        cfg.long_timeout_ms.max(cfg.timeout_ms)
    } else {
        cfg.timeout_ms
    }
}

#[derive(Clone, Debug)]
pub(super) struct Request {
    pub(super) smp: Smp,
    pub(super) purpose: Purpose,
    pub(super) tries: u32,
    pub(super) deadline: u64,
    /// The node addressed, when known (for the directed-route fallback).
    pub(super) node: Option<usize>,
    /// LID-routed to this LID (`None`: directed route).
    pub(super) dlid: Option<u16>,
    /// False for SMPs that get no response (TrapRepress).
    pub(super) reply: bool,
}

/// An SMP for the driver to put on the wire.
#[derive(Clone, Debug, PartialEq)]
pub struct Transmit {
    /// The SMP, hop pointer 0 for directed route.
    pub smp: Smp,
    /// For a LID-routed SMP (class 0x01), the destination LID of its LRH;
    /// `None` for directed route (permissive LRH).
    pub dlid: Option<Lid>,
}

/// The SMPs on their way, owned by nothing else: queued, in flight (by
/// TID), held back as stages, and given up in this pass of a bring-up.
#[derive(Clone, Debug)]
pub(super) struct Outbox {
    /// To send, in order.
    pub(super) queue: VecDeque<Request>,
    /// Sent and waiting for a response, by TID.
    pub(super) inflight: BTreeMap<u64, Request>,
    /// The TID of the next request.
    pub(super) next_tid: u64,
    /// Sent once everything before them is answered, a stage at a time.
    pub(super) stages: VecDeque<Vec<Request>>,
    /// Given up in this pass of a bring-up, to send again.
    pub(super) lost: Vec<Request>,
    /// Rounds of [`SmConfig::rounds`] used in this pass.
    pub(super) round: u32,
    /// Places the window has grown by while stuck
    /// ([`SmConfig::window2`]); back to 0 at the next response.
    pub(super) grown: usize,
    /// When the window last moved: a response, a send or a growth.
    pub(super) moved_ms: u64,
}

impl Default for Outbox {
    fn default() -> Outbox {
        Outbox {
            queue: VecDeque::new(),
            inflight: BTreeMap::new(),
            next_tid: 1,
            stages: VecDeque::new(),
            lost: Vec::new(),
            round: 0,
            grown: 0,
            moved_ms: 0,
        }
    }
}

/// What [`Outbox::resend_round`] did.
#[derive(Debug)]
pub(super) enum Resend {
    /// Nothing was lost: the phase may move on.
    Clean,
    /// The lost requests are queued again for another round.
    Resent,
    /// Every round is used: these stay lost.
    Exhausted(Vec<Request>),
}

impl Outbox {
    /// The next request to put on the wire at `now_ms`, with at most
    /// `window` in flight: its SMP (stamped with a fresh TID) and LID. It
    /// is then in flight until answered or due at `now_ms + timeout_ms`.
    /// A request that gets no response (TrapRepress) keeps its TID (the
    /// trap's, which tells its issuer which trap is repressed) and takes
    /// no place in the window.
    pub(super) fn next(
        &mut self,
        now_ms: u64,
        window: usize,
        timeout_ms: u64,
    ) -> Option<(Smp, Option<u16>)> {
        let no_reply = self.queue.front().is_some_and(|r| !r.reply);
        if !no_reply && self.inflight.len() >= window.max(1) {
            return None;
        }
        let mut r = self.queue.pop_front()?;
        if !r.reply {
            return Some((r.smp, r.dlid));
        }
        let tid = self.next_tid;
        self.next_tid += 1;
        r.smp.header.transaction_id = zerocopy_u64(tid);
        r.deadline = now_ms + timeout_ms;
        let out = (r.smp.clone(), r.dlid);
        self.inflight.insert(tid, r);
        Some(out)
    }

    /// The request a response with `tid` answers, no longer in flight.
    pub(super) fn answered(&mut self, tid: u64) -> Option<Request> {
        let r = self.inflight.remove(&tid);
        if r.is_some() {
            self.grown = 0;
        }
        r
    }

    /// When a window of `window` grown by [`Outbox::grown`], full since
    /// `moved_ms` with requests waiting, may grow by one more: after
    /// `stuck_ms` without a response, up to `window2` (OpenSM's
    /// `max_wire_smps2` and `max_smps_timeout`).
    pub(super) fn stuck_until(&self, window: usize, window2: usize, stuck_ms: u64) -> Option<u64> {
        let now = window.max(1).saturating_add(self.grown);
        let full = self.inflight.len() >= now && !self.queue.is_empty();
        (full && now < window2).then(|| self.moved_ms.saturating_add(stuck_ms))
    }

    /// The requests in flight whose deadline has come, no longer in
    /// flight, in TID order.
    pub(super) fn due(&mut self, now_ms: u64) -> Vec<Request> {
        let tids: Vec<u64> = self
            .inflight
            .iter()
            .filter(|(_, r)| r.deadline <= now_ms)
            .map(|(&t, _)| t)
            .collect();
        tids.into_iter()
            .filter_map(|t| self.inflight.remove(&t))
            .collect()
    }

    /// The earliest deadline in flight.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        self.inflight.values().map(|r| r.deadline).min()
    }

    /// Nothing queued or in flight: the next stage may go.
    pub(super) fn drained(&self) -> bool {
        self.queue.is_empty() && self.inflight.is_empty()
    }

    /// Nothing queued, in flight or staged.
    pub(super) fn is_empty(&self) -> bool {
        self.drained() && self.stages.is_empty()
    }

    /// Queues the next stage; false when there is none.
    pub(super) fn release_stage(&mut self) -> bool {
        match self.stages.pop_front() {
            Some(s) => {
                self.queue.extend(s);
                true
            }
            None => false,
        }
    }

    /// At the end of a phase's work, with `rounds` allowed: queues what
    /// was given up again (tries reset), or says every round is used.
    pub(super) fn resend_round(&mut self, rounds: u32) -> Resend {
        if self.lost.is_empty() {
            // The phase's work is all answered: the next phase has its
            // own rounds.
            self.round = 0;
            return Resend::Clean;
        }
        if self.round < rounds {
            self.round += 1;
            for mut r in core::mem::take(&mut self.lost) {
                r.tries = 0;
                self.queue.push_back(r);
            }
            return Resend::Resent;
        }
        Resend::Exhausted(core::mem::take(&mut self.lost))
    }
}

impl Sm {
    /// Queues a request by directed route along `path`, or, when `node` is
    /// given and reachable by LID (it has a LID, the subnet has been up
    /// since it was found, and routes to it are installed), LID-routed to
    /// it: no directed-route processing at each hop.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn request(
        &mut self,
        method: Method,
        path: DrPath,
        node: Option<usize>,
        attr: AttributeId,
        am: u32,
        data: Option<[u8; 64]>,
        purpose: Purpose,
    ) {
        let dlid = node
            .filter(|_| !self.dr_only)
            .filter(|&i| {
                self.db
                    .nodes()
                    .get(i)
                    .is_some_and(|n| self.up && n.alive && !n.fresh && n.lid != 0)
                    && self.lid_route_ok(i)
            })
            .map(|i| self.db.nodes()[i].lid);
        // The M_Key goes in as the SMP leaves (`poll_transmit`).
        let mut smp = match dlid {
            Some(_) => Smp::lid_routed(method, attr, am, 0, MKey(0)),
            None => Smp::directed(&path, method, attr, am, 0, MKey(0)),
        };
        if let Some(d) = data {
            smp.data = d;
        }
        self.out.queue.push_back(Request {
            smp,
            purpose,
            tries: 0,
            deadline: 0,
            node,
            dlid,
            reply: true,
        });
    }

    /// Turns LID-routed request `r` into one by directed route along its
    /// node's path; false when it names no node.
    pub(super) fn go_directed(&self, r: &mut Request) -> bool {
        let Some(path) = (r.node)
            .and_then(|i| self.db.nodes().get(i))
            .map(|n| n.path.clone())
        else {
            return false;
        };
        let mut smp = Smp::directed(
            &path,
            r.smp.method(),
            r.smp.attribute_id(),
            r.smp.attribute_modifier(),
            0,
            r.smp.m_key(),
        );
        smp.data = r.smp.data;
        r.smp = smp;
        r.dlid = None;
        true
    }

    /// An SMP by LID went unanswered, so the tables on the way are in
    /// doubt: every request queued or staged LID-routed goes by directed
    /// route now, rather than each being lost and waiting out its
    /// time-out first.
    pub(super) fn reroute_queued(&mut self) {
        let mut queue = core::mem::take(&mut self.out.queue);
        let mut stages = core::mem::take(&mut self.out.stages);
        for r in queue.iter_mut().chain(stages.iter_mut().flatten()) {
            if r.dlid.is_some() {
                self.go_directed(r);
            }
        }
        self.out.queue = queue;
        self.out.stages = stages;
    }

    /// Runs `queue` and takes back, in order, the requests it queued: for
    /// the caller to hold them as a stage (sent once everything before has
    /// been answered) instead of sending them now.
    pub(super) fn capture(&mut self, queue: impl FnOnce(&mut Self)) -> Vec<Request> {
        let start = self.out.queue.len();
        queue(self);
        self.out.queue.drain(start..).collect()
    }

    pub(super) fn get(&mut self, path: DrPath, attr: AttributeId, am: u32, purpose: Purpose) {
        self.request(Method::Get, path, None, attr, am, None, purpose);
    }

    /// Get of an attribute of a known node (LID-routed when it can be).
    pub(super) fn get_node(&mut self, node: usize, attr: AttributeId, am: u32, purpose: Purpose) {
        let path = self.db.nodes()[node].path.clone();
        self.request(Method::Get, path, Some(node), attr, am, None, purpose);
    }

    /// Set of an attribute of a known node (LID-routed when it can be).
    pub(super) fn set_node<A: Attribute>(
        &mut self,
        node: usize,
        value: &A,
        am: u32,
        purpose: Purpose,
    ) {
        let mut d = [0u8; 64];
        if value.encode(&mut d).is_ok() {
            let path = self.db.nodes()[node].path.clone();
            self.request(Method::Set, path, Some(node), A::ID, am, Some(d), purpose);
        }
    }

    /// The next SMP to put on the wire at `now_ms`, if the window allows.
    /// A directed-route SMP has hop pointer 0: the caller's SMI applies the
    /// send rules.
    pub fn poll_transmit(&mut self, now_ms: u64) -> Option<Transmit> {
        // The M_Key is the one the port holds as the SMP leaves, not as it
        // was queued: a stage queued before a Set re-keyed the port goes
        // out with the new key.
        if let Some(r) = self.out.queue.front().filter(|r| r.reply) {
            let key = self.m_key_for_request(r.node, &r.purpose);
            if let Some(r) = self.out.queue.front_mut() {
                r.smp.set_m_key(key);
            }
        }
        // A window stuck full for `stuck_ms` holds one more (OpenSM's
        // max_wire_smps2).
        let (w, w2, stuck) = (self.cfg.window, self.cfg.window2, self.cfg.stuck_ms);
        if self
            .out
            .stuck_until(w, w2, stuck)
            .is_some_and(|t| now_ms >= t)
        {
            self.out.grown += 1;
            self.out.moved_ms = now_ms;
        }
        let timeout = (self.out.queue.front())
            .map_or(self.cfg.timeout_ms, |r| timeout_for(&self.cfg, &r.smp));
        let (smp, dlid) =
            self.out
                .next(now_ms, w.max(1).saturating_add(self.out.grown), timeout)?;
        self.out.moved_ms = now_ms;
        *self
            .stats
            .per_phase_kind
            .entry((self.phase, smp.header.method, smp.header.attribute_id.get()))
            .or_default() += 1;
        if dlid.is_some() {
            self.stats.lid_routed += 1;
        }
        let in_flight = self.out.inflight.len() as u64;
        self.stats.peak_in_flight = self.stats.peak_in_flight.max(in_flight);
        Some(Transmit {
            smp,
            dlid: dlid.map(Lid),
        })
    }

    /// SMPs queued, in flight, and stages of SMPs waiting for the current
    /// ones to be answered.
    pub fn outstanding(&self) -> (usize, usize, usize) {
        (
            self.out.queue.len(),
            self.out.inflight.len(),
            self.out.stages.len(),
        )
    }

    /// True when SMPs wait to be sent (the window may be holding them).
    pub fn has_queued(&self) -> bool {
        !self.out.queue.is_empty()
    }

    /// True in the phases of a bring-up or of a change being assimilated,
    /// where a given-up request leaves the fabric not whole.
    pub(super) fn bringing_up(&self) -> bool {
        matches!(
            self.phase,
            Phase::Discovery | Phase::LidAssignment | Phase::Distribution | Phase::Activation
        )
    }

    /// What a given-up request was for, as the error names it.
    pub(super) fn unreached(&self, r: &Request) -> Unreached {
        let (node, port, beyond) = match r.purpose {
            Purpose::NodeInfo { from } => match from {
                Some((n, p)) => (Some(n), Some(p), true),
                None => (None, None, false),
            },
            Purpose::PortInfo { node, port }
            | Purpose::SetLid { node, port }
            | Purpose::SetState { node, port }
            | Purpose::SetLink { node, port }
            | Purpose::SweepPortInfo { node, port }
            | Purpose::Quiesce { node, port, .. }
            | Purpose::PKeyTable { node, port, .. }
            | Purpose::VlArb { node, port, .. }
            | Purpose::DupCheck { node, port, .. } => (Some(node), Some(port), false),
            Purpose::SlToVl { node, at } => (Some(node), at.output, false),
            Purpose::SwitchInfo { node }
            | Purpose::VirtInfo { node }
            | Purpose::NodeDesc { node }
            | Purpose::SetTop { node }
            | Purpose::LftRead { node, .. }
            | Purpose::VPortRead { node, .. }
            | Purpose::VPortPKeyTable { node, .. }
            | Purpose::GuidInfo { node, .. }
            | Purpose::SweepSwitchInfo { node } => (Some(node), None, false),
            Purpose::SetVPort
            | Purpose::SweepOwnPort
            | Purpose::SetTopOnly
            | Purpose::SetLft
            | Purpose::SetMft
            | Purpose::TrapRepress
            | Purpose::PollMaster
            | Purpose::Handover
            | Purpose::Answer => (r.node, None, false),
            Purpose::SmInfo { node } => (Some(node), None, false),
        };
        let n = node.and_then(|i| self.db.nodes().get(i));
        Unreached {
            attribute: r.smp.attribute_id(),
            method: r.smp.method(),
            node_guid: n.map_or(0, |n| n.info.node_guid.0),
            node_description: n
                .and_then(|n| n.description.as_ref())
                .and_then(|d| d.node_string.as_str().ok())
                .map(|s| s.trim_end_matches('\0').into()),
            port,
            beyond,
        }
    }

    /// At the end of a phase's work: requests given up in it are sent
    /// again, a round at a time; past the last round, a first bring-up
    /// stops and names them, and a running subnet leaves them to its next
    /// sweep. False when the phase may move on.
    pub(super) fn resend_lost(&mut self) -> bool {
        let lost = match self.out.resend_round(self.cfg.rounds) {
            Resend::Clean => return false,
            Resend::Resent => return true,
            Resend::Exhausted(lost) => lost,
        };
        if self.up {
            self.sweep_pending = true;
            return false;
        }
        let unreached = lost
            .iter()
            .take(MAX_UNREACHED_NAMED)
            .map(|r| self.unreached(r))
            .collect();
        self.error = Some(SmError::Unreachable {
            unreached,
            count: lost.len(),
            m_key_refused: self.stats.unrepressed,
        });
        self.phase = Phase::Failed;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(reply: bool, tid: u64) -> Request {
        let mut smp = Smp::directed(
            &DrPath::new(),
            Method::Get,
            AttributeId::NodeInfo,
            0,
            tid,
            MKey(0),
        );
        smp.header.transaction_id = zerocopy_u64(tid);
        Request {
            smp,
            purpose: Purpose::SetLft,
            tries: 0,
            deadline: 0,
            node: None,
            dlid: None,
            reply,
        }
    }

    /// An optimized Set(SLtoVLMappingTable) (AllInputPorts or
    /// AllOutputPorts) waits `long_timeout_ms` for its answer, as OpenSM's
    /// QoS manager waits `long_transaction_timeout`; a Get with the same
    /// modifier, a Set of one pair of ports and any other SMP wait
    /// `timeout_ms`, which also wins where it is the longer.
    #[test]
    fn an_optimized_sl2vl_set_waits_the_long_timeout() {
        let cases = [
            (Method::Set, 0x3_0000, 500, 1500),
            (Method::Set, 0x2_0005, 500, 1500),
            (Method::Set, 0x1_0000, 500, 1500),
            (Method::Set, 0x0_0102, 500, 1200),
            (Method::Get, 0x3_0000, 500, 1200),
            (Method::Set, 0x3_0000, 100, 1200),
        ];
        for (method, am, long, due) in cases {
            let mut sm = Sm::new(SmConfig {
                timeout_ms: 200,
                long_timeout_ms: long,
                ..SmConfig::default()
            });
            let mut r = req(true, 0);
            r.smp = Smp::directed(
                &DrPath::new(),
                method,
                AttributeId::SlToVlMappingTable,
                am,
                0,
                MKey(0),
            );
            // Only this one (a new SM queues discovery's first SMP).
            sm.out.queue.clear();
            sm.out.queue.push_back(r);
            let sent = sm.poll_transmit(1000).unwrap();
            assert_eq!(sent.smp.attribute_modifier(), am);
            assert_eq!(
                sm.poll_timeout(),
                Some(due),
                "{method:?} {am:#x} long {long}"
            );
        }
        // Any other attribute with those bits: the transaction timeout.
        let mut sm = Sm::new(SmConfig::default());
        let mut r = req(true, 0);
        r.smp = Smp::directed(
            &DrPath::new(),
            Method::Set,
            AttributeId::PortInfo,
            0x3_0000,
            0,
            MKey(0),
        );
        sm.out.queue.clear();
        sm.out.queue.push_back(r);
        let sent = sm.poll_transmit(1000).unwrap();
        assert_eq!(sent.smp.attribute_id(), AttributeId::PortInfo);
        assert_eq!(sm.poll_timeout(), Some(1200));
    }

    /// The window holds requests back; each sent gets the next TID and a
    /// deadline; an answer frees its place.
    #[test]
    fn the_window_tids_and_answers() {
        let mut o = Outbox::default();
        for _ in 0..3 {
            o.queue.push_back(req(true, 0));
        }
        let (a, _) = o.next(10, 2, 100).unwrap();
        let (b, _) = o.next(10, 2, 100).unwrap();
        assert_eq!(
            (a.header.transaction_id.get(), b.header.transaction_id.get()),
            (1, 2)
        );
        assert!(o.next(10, 2, 100).is_none(), "the window is full");
        assert_eq!(o.next_deadline(), Some(110));
        assert!(o.answered(7).is_none(), "no such TID");
        assert!(o.answered(1).is_some());
        assert!(o.answered(1).is_none(), "answered once");
        let (c, _) = o.next(20, 2, 100).unwrap();
        assert_eq!(c.header.transaction_id.get(), 3);
        assert!(!o.drained());
    }

    /// A request that gets no response keeps its TID, needs no place in
    /// a full window, and is not held in flight.
    #[test]
    fn a_request_without_response_passes_a_full_window() {
        let mut o = Outbox::default();
        o.queue.push_back(req(true, 0));
        o.next(0, 1, 100).unwrap();
        o.queue.push_back(req(false, 0xdead));
        let (r, _) = o.next(0, 1, 100).unwrap();
        assert_eq!(r.header.transaction_id.get(), 0xdead);
        assert_eq!(o.inflight.len(), 1);
    }

    /// Only what is due comes back, in TID order.
    #[test]
    fn due_requests_leave_the_flight_in_order() {
        let mut o = Outbox::default();
        for _ in 0..3 {
            o.queue.push_back(req(true, 0));
        }
        o.next(0, 8, 100).unwrap();
        o.next(50, 8, 100).unwrap();
        o.next(0, 8, 100).unwrap();
        let due: Vec<u64> = o
            .due(100)
            .iter()
            .map(|r| r.smp.header.transaction_id.get())
            .collect();
        assert_eq!(due, [1, 3]);
        assert_eq!(o.next_deadline(), Some(150));
        assert!(o.due(149).is_empty());
    }

    /// Stages go one at a time, only when all before them is answered.
    #[test]
    fn stages_wait_for_what_came_before() {
        let mut o = Outbox::default();
        o.stages.push_back(vec![req(true, 0), req(true, 0)]);
        o.stages.push_back(vec![req(true, 0)]);
        assert!(o.drained() && !o.is_empty());
        assert!(o.release_stage());
        assert_eq!(o.queue.len(), 2);
        assert!(!o.drained());
        assert!(o.release_stage());
        assert!(!o.release_stage());
        assert_eq!(o.queue.len(), 3);
    }

    /// Lost requests go again, tries reset, for as many rounds as allowed;
    /// then they stay lost; a clean pass resets the rounds.
    #[test]
    fn lost_requests_get_their_rounds() {
        let mut o = Outbox::default();
        let mut r = req(true, 0);
        r.tries = 3;
        o.lost.push(r);
        assert!(matches!(o.resend_round(1), Resend::Resent));
        assert_eq!(o.queue.front().map(|r| r.tries), Some(0));
        let r = o.queue.pop_front().unwrap();
        o.lost.push(r);
        match o.resend_round(1) {
            Resend::Exhausted(l) => assert_eq!(l.len(), 1),
            other => panic!("{other:?}"),
        }
        assert!(matches!(o.resend_round(1), Resend::Clean));
        assert_eq!(o.round, 0);
    }
}
