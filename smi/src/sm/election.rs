//! SM election (IBA 14.4): which SM is master, which stand by, and the
//! SMInfo that carries it.
//!
//! Each SM is Discovering, Standby, NotActive or Master. A discovering SM
//! asks every port that says IsSM for its SMInfo; at the end of discovery
//! it stands by if it found a master, or an SM that outranks it (higher
//! priority, or equal priority and lower port GUID) that is itself
//! discovering or standing by; otherwise it becomes master. A standby
//! polls its master's SMInfo and takes the subnet over when the master
//! stops answering, or answers that it is no longer master. SubnSet(SMInfo)
//! moves an SM as its AttributeModifier says — Handover, Acknowledge,
//! Disable, Standby, Discover — when the sender is in the state the
//! control needs (OpenSM's legality rule: a master for all but
//! Acknowledge, a standby for Acknowledge) and the move is one the
//! receiver's state allows.
//!
//! This file holds the decisions, without I/O; [`Sm`] sends and receives
//! the SMPs (`handle_mad`, its discovery and its timers).

use super::*;
use mad_core::attr::modifier::SmInfoControl;
use mad_core::{Guid, Status};

/// An SM other than this one, as its SMInfo said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerSm {
    /// Its port GUID.
    pub guid: u64,
    /// Its priority (0–15).
    pub priority: u8,
    /// Its state.
    pub state: SmState,
    /// The node it runs on (index in [`Sm::nodes`]).
    pub node: usize,
}

/// True when an SM of (`p`, `g`) outranks one of (`q`, `h`): a higher
/// priority, or the same priority and a lower port GUID (IBA 14.4.1.1).
pub fn outranks(p: u8, g: u64, q: u8, h: u64) -> bool {
    p > q || (p == q && g < h)
}

/// What a discovering SM does once discovery is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No master and nobody above: bring the subnet up.
    Master,
    /// Stand by, polling this SM.
    Standby(PeerSm),
}

/// Why a SubnSet(SMInfo) is refused (answered with status InvalidField,
/// nothing changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetRefused {
    /// The sender is not in the state the control needs (a master for
    /// Handover, Disable, Standby and Discover; a standby for
    /// Acknowledge).
    SenderState(SmState),
    /// The control does not apply in this SM's state.
    NotNow(SmState),
    /// AttributeModifier 0 or past 5.
    NoControl,
}

/// What a legal SubnSet(SMInfo) makes this SM do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// Take the subnet (Handover): discover it again, keeping what it
    /// finds, and acknowledge to the sender once master.
    TakeOver,
    /// Stand by polling the sender (Acknowledge of a handover this SM
    /// made, or the Standby control).
    StandBy,
    /// Stop: NotActive, no polling (Disable).
    Disable,
    /// Start discovering (Discover, from NotActive).
    Discover,
}

/// The election state of one SM.
#[derive(Clone, Debug)]
pub struct Election {
    /// This SM's state.
    pub state: SmState,
    /// This SM's priority.
    pub priority: u8,
    /// This SM's SM_Key.
    pub sm_key: u64,
    /// SMs seen in this discovery, by port GUID.
    pub peers: BTreeMap<u64, PeerSm>,
    /// The SM this one polls while standing by.
    pub master: Option<PeerSm>,
    /// When the next poll of the master is due (ms).
    pub next_poll: Option<u64>,
    /// A poll is out.
    pub polling: bool,
    /// The SM this one handed the subnet to, until it acknowledges.
    pub handed_to: Option<PeerSm>,
    /// The SM that handed this one the subnet, to acknowledge once master.
    pub to_acknowledge: Option<PeerSm>,
    /// Takeovers so far (the standby became master).
    pub takeovers: u32,
    /// A master handing over: asking its peers, then waiting for the
    /// acknowledge.
    pub handing: bool,
    /// The peers (nodes) a master handing over waits to hear from.
    pub awaiting: BTreeSet<usize>,
    /// Where SMInfo requests came from that a master asked back (a
    /// standby that appeared after its discovery), and when: each is
    /// asked again at most every [`REASK_MS`]; at most [`MAX_ASKED`].
    pub asked: BTreeMap<Vec<u8>, u64>,
    /// A master handing the subnet to a standby that outranks it (it
    /// stands by once the standby takes it), not stopping.
    pub yielding: bool,
    /// When this standby last told a master below it that it is there
    /// (trap 144).
    pub last_nudge: Option<u64>,
    /// Polls of the master in a row that went unanswered, their
    /// retransmissions included ([`SmConfig::polling_retries`]).
    pub missed_polls: u32,
}

/// Milliseconds between a standby's traps 144 to a master below it.
pub const NUDGE_MS: u64 = 5_000;

/// Requesters a master asks back at most.
pub const MAX_ASKED: usize = 64;
/// Milliseconds before a master asks a polling SM for its SMInfo again.
pub const REASK_MS: u64 = 2_000;

impl Election {
    /// A discovering SM of `priority` (0–15) and `sm_key`.
    pub fn new(priority: u8, sm_key: u64) -> Election {
        Election {
            state: SmState::Discovering,
            priority: priority.min(15),
            sm_key,
            peers: BTreeMap::new(),
            master: None,
            next_poll: None,
            polling: false,
            handed_to: None,
            to_acknowledge: None,
            takeovers: 0,
            handing: false,
            awaiting: BTreeSet::new(),
            asked: BTreeMap::new(),
            yielding: false,
            last_nudge: None,
            missed_polls: 0,
        }
    }

    /// Records an SM's SMInfo found by discovery or a sweep. An SM whose
    /// non-zero SM_Key differs from this one's (when it has one) is
    /// ignored, as OpenSM ignores it; returns whether it was taken.
    pub fn seen(&mut self, info: &SmInfo, node: usize, own_guid: u64) -> bool {
        if info.guid.0 == own_guid {
            return false;
        }
        if self.sm_key != 0 && info.sm_key.0 != self.sm_key {
            return false;
        }
        // One SM a node: a port that answers with another GUID each time
        // replaces its entry rather than adding one.
        self.peers.retain(|_, p| p.node != node);
        self.peers.insert(
            info.guid.0,
            PeerSm {
                guid: info.guid.0,
                priority: info.priority,
                state: info.sm_state,
                node,
            },
        );
        true
    }

    /// What a discovering SM of port GUID `own_guid` does with the SMs it
    /// found: stand by for a master (the best, if several say so), else
    /// for the best discovering or standby SM that outranks it, else
    /// become master.
    pub fn verdict(&self, own_guid: u64) -> Verdict {
        let best = |it: &mut dyn Iterator<Item = &PeerSm>| {
            it.fold(None::<PeerSm>, |b, p| match b {
                Some(b) if !outranks(p.priority, p.guid, b.priority, b.guid) => Some(b),
                _ => Some(*p),
            })
        };
        let masters = &mut self.peers.values().filter(|p| p.state == SmState::Master);
        if let Some(m) = best(masters) {
            return Verdict::Standby(m);
        }
        let above = &mut self.peers.values().filter(|p| {
            matches!(p.state, SmState::Discovering | SmState::Standby)
                && outranks(p.priority, p.guid, self.priority, own_guid)
        });
        match best(above) {
            Some(p) => Verdict::Standby(p),
            None => Verdict::Master,
        }
    }

    /// Whether the master answered a poll with SMInfo `info` as a master
    /// should: still master, or (OpenSM's rule) a standby that still
    /// outranks this SM. Otherwise the standby takes over.
    pub fn master_alive(&self, info: &SmInfo, own_guid: u64) -> bool {
        match info.sm_state {
            SmState::Master => true,
            SmState::Standby => outranks(info.priority, info.guid.0, self.priority, own_guid),
            _ => false,
        }
    }

    /// Judges a SubnSet(SMInfo) with control `ctl` from an SM whose own
    /// SMInfo (the request's data) is `sender`: the move, or why not.
    pub fn on_set(&self, ctl: SmInfoControl, sender: &SmInfo) -> Result<Move, SetRefused> {
        let need = match ctl {
            SmInfoControl::Acknowledge => SmState::Standby,
            SmInfoControl::Handover
            | SmInfoControl::Disable
            | SmInfoControl::Standby
            | SmInfoControl::Discover => SmState::Master,
            _ => return Err(SetRefused::NoControl),
        };
        if sender.sm_state != need {
            return Err(SetRefused::SenderState(sender.sm_state));
        }
        let s = self.state;
        let m = match (ctl, s) {
            // A standby takes it; so does a discovering SM (OpenSM
            // ignores a handover while discovering, and both then stand
            // by with no master: the gap this avoids).
            (SmInfoControl::Handover, SmState::Standby | SmState::Discovering) => Move::TakeOver,
            (SmInfoControl::Acknowledge, SmState::Master | SmState::Standby)
                if self.handed_to.is_some_and(|h| h.guid == sender.guid.0) =>
            {
                Move::StandBy
            }
            (SmInfoControl::Standby, SmState::Discovering | SmState::Standby) => Move::StandBy,
            (SmInfoControl::Disable, SmState::Discovering | SmState::Standby) => Move::Disable,
            (SmInfoControl::Discover, SmState::NotActive) => Move::Discover,
            _ => return Err(SetRefused::NotNow(s)),
        };
        Ok(m)
    }

    /// This SM's SMInfo: its port GUID, the SM_Key when `with_key` (the
    /// requester gave the right one), a heartbeat count, priority, state.
    pub fn info(&self, own_guid: u64, act_count: u32, with_key: bool) -> SmInfo {
        SmInfo {
            guid: Guid(own_guid),
            sm_key: MKey(if with_key { self.sm_key } else { 0 }),
            act_count,
            priority: self.priority,
            sm_state: self.state,
        }
    }
}

impl Sm {
    /// This SM's election state.
    pub fn sm_state(&self) -> SmState {
        self.election.state
    }

    /// OpenSM's `honor_guid2lid_file` becomes `on` (a re-read
    /// configuration): see [`SmConfig::honor_guid2lid_file`]; it applies
    /// at the next takeover.
    pub fn set_honor_guid2lid_file(&mut self, on: bool) {
        self.cfg.honor_guid2lid_file = on;
    }

    /// LIDs to give ports by port GUID at the next bring-up where no other
    /// port holds them, as OpenSM honours its `guid2lid` cache: LIDs that
    /// survive a restart of the SM.
    pub fn set_preferred_lids(&mut self, lids: BTreeMap<u64, Lid>) {
        self.preferred = lids.into_iter().map(|(g, l)| (g, l.0)).collect();
        self.preferred_lids = self.preferred.values().copied().collect();
    }

    /// Changes the election priority of a running SM (a re-read
    /// configuration): its SMInfo says it from now on, and a standby that
    /// now outranks its master nudges it at its next poll.
    pub fn set_priority(&mut self, priority: u8) {
        let p = priority.min(15);
        self.cfg.priority = p;
        self.election.priority = p;
    }

    /// Changes a standby's polling interval (from its next poll on) and
    /// the light sweep interval (from the next sweep on) of a running SM.
    pub fn set_intervals(&mut self, poll_ms: u64, sweep_ms: Option<u64>) {
        self.cfg.poll_ms = poll_ms.max(1);
        self.cfg.sweep_interval_ms = sweep_ms.map(|s| s.max(1));
        if sweep_ms.is_none() {
            // No periodic sweep from now on, not even the one due.
            self.next_sweep = None;
        }
    }

    /// Makes every periodic sweep from now on a heavy one, or a light one
    /// ([`SmConfig::force_heavy_sweep`]).
    pub fn set_force_heavy_sweep(&mut self, heavy: bool) {
        self.cfg.force_heavy_sweep = heavy;
    }

    /// Unanswered polls in a row a standby lets go before it takes over,
    /// from now on ([`SmConfig::polling_retries`]).
    pub fn set_polling_retries(&mut self, n: u32) {
        self.cfg.polling_retries = n;
    }

    /// Whether traps start sweeps from now on ([`SmConfig::sweep_on_trap`]).
    pub fn set_sweep_on_trap(&mut self, on: bool) {
        self.cfg.sweep_on_trap = on;
    }

    /// Sets OpenSM's `babbling_port_policy`
    /// ([`SmConfig::babbling_port_policy`](super::SmConfig::babbling_port_policy)):
    /// the next trap of a run past the threshold disables its port.
    pub fn set_babbling_port_policy(&mut self, on: bool) {
        self.cfg.babbling_port_policy = on;
    }

    /// Sets how many SMPs may be outstanding at once (OpenSM's
    /// `max_wire_smps`; below 1, 1). SMPs already sent stay in flight; the
    /// next one goes out when the new window has room.
    pub fn set_window(&mut self, window: usize) {
        self.cfg.window = window.max(1);
    }

    /// The most SMPs a stuck window may grow to, and after how many
    /// milliseconds without a response it grows by one
    /// ([`SmConfig::window2`], [`SmConfig::stuck_ms`]; a re-read
    /// configuration).
    pub fn set_window2(&mut self, window2: usize, stuck_ms: u64) {
        self.cfg.window2 = window2;
        self.cfg.stuck_ms = stuck_ms;
    }

    /// LIDs to give the VFs of hypervisors at the next bring-up under the
    /// prepopulated policy, by (PF port GUID, VF from 1), where no port
    /// holds them: with `guid2lid`'s LIDs for the PFs and the VMs, a
    /// subnet powered off and on gets every VF's LID back, and a VM
    /// started again on its hypervisor its LID (ibkit's `vf2lid`).
    pub fn set_preferred_vf_lids(&mut self, lids: BTreeMap<(u64, u16), Lid>) {
        self.preferred_vfs = lids.into_iter().map(|(k, l)| (k, l.0)).collect();
    }

    /// Every VF's LID by (PF port GUID, VF from 1), as
    /// [`Sm::set_preferred_vf_lids`] takes them.
    pub fn vf_lids(&self) -> BTreeMap<(u64, u16), Lid> {
        let mut m = BTreeMap::new();
        for n in self
            .db
            .nodes()
            .iter()
            .filter(|n| n.alive && n.is_hypervisor())
        {
            for (k, v) in n.vfs.iter().enumerate().filter(|(_, v)| v.lid != 0) {
                m.insert((n.info.port_guid.0, k as u16 + 1), Lid(v.lid));
            }
        }
        m
    }

    /// Every port's LID by port GUID (a switch's port 0, a CA's port, a
    /// VF's vGUID where it has one), as OpenSM's `guid2lid` lists them.
    pub fn lids_by_guid(&self) -> BTreeMap<u64, Lid> {
        self.lid_ranges_by_guid()
            .into_iter()
            .map(|(g, (l, _))| (g, l))
            .collect()
    }

    /// [`Sm::lids_by_guid`] with the last LID of each port's range (the
    /// base + `2^LMC - 1`; a VM's VF and a switch's port 0: the base), as
    /// OpenSM's `guid2lid` writes them.
    pub fn lid_ranges_by_guid(&self) -> BTreeMap<u64, (Lid, Lid)> {
        let mut m = BTreeMap::new();
        for (i, n) in (self.db.nodes().iter().enumerate()).filter(|(_, n)| n.alive && n.lid != 0) {
            let top = n.lid + ((1u16 << self.db.lmc_of(i)) - 1);
            m.insert(n.info.port_guid.0, (Lid(n.lid), Lid(top)));
            for v in n.vfs.iter().filter(|v| v.lid != 0 && v.guid != 0) {
                m.insert(v.guid, (Lid(v.lid), Lid(v.lid)));
            }
        }
        m
    }

    /// The election: peers found, the master polled, takeovers.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// The port GUID of the SM's own port: as read, or before that as
    /// the driver gave it ([`Sm::set_own_port_guid`]; 0 without).
    pub fn own_port_guid(&self) -> u64 {
        (self.db.nodes().first()).map_or(self.own_port_guid, |n| n.info.port_guid.0)
    }

    /// SMPs sent so far: SMInfo's heartbeat (ActCount).
    fn act_count(&self) -> u32 {
        self.stats.per_phase_kind.values().sum::<u64>() as u32
    }

    fn set_sm_state(&mut self, state: SmState, master: Option<u64>) {
        if self.election.state != state {
            self.election.state = state;
            self.emit(SmEvent::SmStateChanged {
                state,
                master: master.map(Guid),
            });
        }
    }

    /// Discovery read an end port's PortInfo that says IsSM: ask its SM.
    pub(super) fn ask_sm_info(&mut self, node: usize) -> bool {
        if node == 0 || self.election.state == SmState::NotActive || self.cfg.ignore_other_sm {
            return false;
        }
        // The SM that handed this one the subnet is leaving: asking it
        // would only hold the discovery for its timeouts.
        let guid = self.db.nodes()[node].info.port_guid.0;
        if self.election.to_acknowledge.is_some_and(|p| p.guid == guid) {
            return false;
        }
        let path = self.db.nodes()[node].path.clone();
        self.get(path, AttributeId::SmInfo, 0, Purpose::SmInfo { node });
        true
    }

    /// A master's light sweep asks every SM it knows for its SMInfo, as
    /// OpenSM's sweeps do: a standby that now outranks it (its priority
    /// raised) is handed the subnet, and one that no longer answers as an
    /// SM is forgotten.
    pub(super) fn poll_peer_sms(&mut self) {
        if self.election.state != SmState::Master || self.election.handing {
            return;
        }
        let nodes: Vec<usize> = (self.election.peers.values())
            .map(|p| p.node)
            .filter(|&n| n < self.db.nodes().len() && self.db.nodes()[n].alive)
            .collect();
        for n in nodes {
            self.ask_sm_info(n);
        }
    }

    /// Taking over, a new master reads back what each VF of a hypervisor
    /// holds (VPortInfo), so that VMs keep their LIDs and vGUIDs; so does
    /// an SM starting on a running subnet, for each hypervisor that kept
    /// the LID its port held, and a new master for a hypervisor out of
    /// its reach until after the takeover ([`Sm::held_as_known`]).
    pub(super) fn read_vports_back(&mut self, node: usize, vfs: u16) {
        let live = self.keep_lids
            || (!self.cfg.reassign_lids && self.db.nodes().get(node).is_some_and(|n| n.lid != 0));
        if (self.up && !self.held_as_known(node)) || !live {
            return;
        }
        for vf in 1..=vfs {
            self.get_node(
                node,
                AttributeId::VPortInfo,
                u32::from(vf),
                Purpose::VPortRead { node, vf },
            );
        }
    }

    /// Node `node`, out of reach until after this SM took the subnet over,
    /// is one its standby discovery saw, and kept the LID its port holds:
    /// the node the standby knew, VMs and all.
    pub(super) fn held_as_known(&self, node: usize) -> bool {
        self.db
            .nodes()
            .get(node)
            .is_some_and(|n| n.lid != 0 && self.known.contains_key(&n.info.port_guid.0))
    }

    /// A VF's VPortInfo read back while taking over: its LID is kept where
    /// no other port holds it, and a VF that is up with a vGUID is a
    /// running VM the new master now knows (and keeps up).
    pub(super) fn keep_found_vport(&mut self, node: usize, vf: u16, v: &VPortInfo) {
        let lid = v.vport_lid.0;
        if (self.up && !self.held_as_known(node))
            || lid == 0
            || lid > Lid::UNICAST_MAX.0
            || self.db.by_lid(Lid(lid)).is_some()
        {
            return;
        }
        let Some(slot) = self
            .db
            .nodes()
            .get(node)
            .and_then(|n| n.vfs.get(usize::from(vf) - 1))
        else {
            return;
        };
        if slot.lid != 0 {
            return;
        }
        let guid = v.vport_guid.0;
        let mut running = v.vport_state == PortState::Active && guid != 0;
        if let Some((holder, hvf)) = (self.db.by_gid_guid(Guid(guid))).filter(|_| running) {
            // Its GID is another port's: not a VM the SM takes on.
            running = false;
            self.stats.duplicate_guids += 1;
            let guid_of = |i: usize| self.db.node_guid_of(i);
            self.emit(SmEvent::DuplicateVGuid {
                vguid: Guid(guid),
                held_by: (guid_of(holder.0), hvf),
                hypervisor: guid_of(node),
                vf,
            });
        }
        if !running && self.cfg.lid_policy == LidPolicy::Dynamic {
            // Under the dynamic policy only a VM holds a LID: a vport
            // that is up without being a VM the SM takes on (a forged
            // vGUID) is taken down, as an idle VF is under the
            // prepopulated policy when the bring-up makes the links
            // Active (`Sm::activate`).
            if v.vport_state != PortState::Down {
                self.set_vport(node, vf, PortState::Down, 0);
            }
            return;
        }
        if running {
            self.register_vm(node, vf, lid, guid);
        } else {
            self.db.set_vf(node, vf, lid, None, 0);
        }
        self.db.max_lid = self.db.max_lid.max(lid);
    }

    /// Discovery read the LID a node's port holds (`lid`). Taking over,
    /// the node keeps it unless another node took it first. Starting as
    /// master, as OpenSM's LID manager does: the LID a guid2lid cache
    /// gives the port, if free; else the LID it holds, if no other port
    /// holds it and the cache gives it to no port (unless
    /// [`SmConfig::reassign_lids`]); else a new one later. Found by a
    /// running master (a port out of reach at its bring-up): kept only if
    /// the SM's standby discovery saw that port (after a takeover), as the
    /// LIDs the ports hold are at the takeover itself.
    pub(super) fn keep_found_lid(&mut self, node: usize, lid: Lid) {
        if self.db.nodes()[node].lid != 0 {
            return;
        }
        let guid = self.db.nodes()[node].info.port_guid.0;
        if self.up {
            // Out of reach at the takeover, a port the standby saw: it
            // keeps the LID it holds, if free (else `assign_lids` gives
            // it the one the standby saw, if free, else a new one).
            let count = 1u16 << self.db.lmc_of(node);
            if self.known.contains_key(&guid)
                && lid.0 != 0
                && lid.0 % count == 0
                && self.db.lids_free(lid.0, count)
            {
                self.db.set_lid(node, lid.0);
                self.db.max_lid = self.db.max_lid.max(lid.0 + (count - 1));
            }
            return;
        }
        // Starting afresh: the LID a guid2lid file gives this port, if it
        // is free. (Taking over, the LIDs the ports hold win: OpenSM too
        // ignores its guid2lid when it comes out of standby, unless
        // `honor_guid2lid_file`, which takes over as a fresh start.)
        // Under LMC a port keeps a LID only when it is a multiple of
        // 2^LMC and the LIDs above it are free too, as OpenSM's LID
        // manager checks.
        let count = 1u16 << self.db.lmc_of(node);
        let usable = |db: &Subnet, l: u16| l != 0 && l % count == 0 && db.lids_free(l, count);
        if let Some(&want) = self.preferred.get(&guid).filter(|_| !self.keep_lids) {
            if usable(&self.db, want) {
                self.db.set_lid(node, want);
                self.db.max_lid = self.db.max_lid.max(want + (count - 1));
                return;
            }
        }
        if !usable(&self.db, lid.0) {
            return;
        }
        if !self.keep_lids {
            if self.cfg.reassign_lids || self.preferred_lids.contains(&lid.0) {
                return;
            }
            self.kept_found = true;
        }
        self.db.set_lid(node, lid.0);
        self.db.max_lid = self.db.max_lid.max(lid.0 + (count - 1));
    }

    pub(super) fn on_peer_sm_info(&mut self, smp: &Smp, node: usize) {
        let Ok(info) = SmInfo::decode(&smp.data) else {
            return;
        };
        self.election.awaiting.remove(&node);
        // Asked back by the way its request came: the node by its port.
        let node = match node {
            usize::MAX => match self.db.by_port_guid(info.guid) {
                Some((n, _)) => n.0,
                None => return,
            },
            n => n,
        };
        let own = self.own_port_guid();
        if !self.election.seen(&info, node, own) {
            return;
        }
        self.db.other_sms.retain(|_, o| o.node.0 != node);
        self.db.other_sms.insert(
            info.guid.0,
            super::subnet::OtherSm {
                guid: info.guid.0,
                node: NodeId(node),
                priority: info.priority,
                state: info.sm_state,
                act_count: info.act_count,
            },
        );
        // A master that meets a standby above it hands the subnet over
        // (IBA 14.4.1.1), once the subnet is up and it is not stopping.
        let e = &self.election;
        if e.state == SmState::Master
            && !e.handing
            && self.up
            && info.sm_state == SmState::Standby
            && outranks(info.priority, info.guid.0, e.priority, own)
        {
            let peer = e.peers[&info.guid.0];
            if self.send_handover(peer.guid) {
                self.election.handing = true;
                self.election.yielding = true;
                self.election.handed_to = Some(peer);
                self.emit(SmEvent::HandingOver {
                    to: Guid(peer.guid),
                });
                // Standby from the Handover on, as OpenSM's master is: the
                // new master's sweep must not find a second master.
                self.set_sm_state(SmState::Standby, Some(peer.guid));
            }
        }
    }

    /// At the end of a discovery: stand by, or go on as master. True to
    /// go on.
    pub(super) fn discovery_verdict(&mut self, now_ms: u64) -> bool {
        if self.up || self.election.state == SmState::Master {
            self.election.to_acknowledge = None;
            return true;
        }
        let own = self.own_port_guid();
        // Handed the subnet while discovering: master, whatever it found.
        let verdict = if self.election.to_acknowledge.is_some() {
            Verdict::Master
        } else {
            self.election.verdict(own)
        };
        match verdict {
            Verdict::Standby(p) => {
                self.enter_standby(p, now_ms);
                false
            }
            Verdict::Master => {
                // Handed over or not, no Acknowledge is sent: OpenSM sends
                // none either, and refuses one from a master.
                self.election.to_acknowledge = None;
                self.set_sm_state(SmState::Master, Some(own));
                true
            }
        }
    }

    /// Sends SubnSet(SMInfo, Handover) to the SM of port GUID `guid`, this
    /// SM's SMInfo as its data (the receiver checks the sender is master).
    /// False when the SM is not in the subnet known.
    fn send_handover(&mut self, guid: u64) -> bool {
        let Some((node, _)) = self.db.by_port_guid(Guid(guid)) else {
            return false;
        };
        let own = self.own_port_guid();
        let info = self.election.info(own, self.act_count(), true);
        let mut d = [0u8; 64];
        if info.encode(&mut d).is_err() {
            return false;
        }
        let path = self.db.nodes()[node.0].path.clone();
        self.request(
            Method::Set,
            path,
            None,
            AttributeId::SmInfo,
            u32::from(u8::from(SmInfoControl::Handover)),
            Some(d),
            Purpose::Handover,
        );
        true
    }

    fn enter_standby(&mut self, master: PeerSm, now_ms: u64) {
        self.phase = Phase::Standby;
        self.election.master = Some(master);
        self.election.polling = false;
        self.election.next_poll = Some(now_ms + self.cfg.poll_ms);
        self.set_sm_state(SmState::Standby, Some(master.guid));
    }

    /// A standby's poll of its master, when due.
    pub(super) fn poll_master(&mut self, now_ms: u64) {
        if self.phase != Phase::Standby
            || self.election.state != SmState::Standby
            || self.election.polling
            || self.election.next_poll.is_none_or(|t| t > now_ms)
        {
            return;
        }
        let Some(m) = self.election.master else {
            return;
        };
        let Some(path) = self.db.nodes().get(m.node).map(|n| n.path.clone()) else {
            return;
        };
        self.election.polling = true;
        self.get(path, AttributeId::SmInfo, 0, Purpose::PollMaster);
    }

    pub(super) fn on_poll_answer(&mut self, smp: &Smp, now_ms: u64) {
        self.election.polling = false;
        let own = self.own_port_guid();
        match SmInfo::decode(&smp.data) {
            Ok(i) if self.election.master_alive(&i, own) => {
                self.election.missed_polls = 0;
                self.election.next_poll = Some(now_ms + self.cfg.poll_ms);
                if i.sm_state == SmState::Master
                    && outranks(self.election.priority, own, i.priority, i.guid.0)
                {
                    self.nudge_master(now_ms);
                }
            }
            _ => self.take_over(now_ms, None),
        }
    }

    /// A standby above its master tells it so, as OpenSM's standby does:
    /// trap 144 (SM priority changed) to the master's LID, which makes the
    /// master sweep, find this SM and hand the subnet over. At most every
    /// [`NUDGE_MS`].
    fn nudge_master(&mut self, now_ms: u64) {
        if self
            .election
            .last_nudge
            .is_some_and(|t| t + NUDGE_MS > now_ms)
        {
            return;
        }
        let port_info = |n: &SmNode| {
            n.ports
                .get(usize::from(n.info.local_port_num))
                .and_then(|p| p.info)
        };
        let Some(me) = self.db.nodes().first().and_then(port_info) else {
            return;
        };
        let Some(m) = (self.election.master)
            .and_then(|m| self.db.nodes().get(m.node))
            .and_then(port_info)
        else {
            return;
        };
        if me.lid.0 == 0 || m.lid.0 == 0 {
            return;
        }
        let details = mad_core::notice::TrapDetails::LocalChange(mad_core::notice::Trap144 {
            lid: me.lid,
            other_local_changes: true,
            capability_mask: me.capability_mask.bits(),
            sm_priority_change: true,
            ..Default::default()
        });
        let Ok(n) = mad_core::notice::Notice::generic(
            mad_core::notice::NoticeType::Info,
            mad_core::notice::ProducerType::ChannelAdapter,
            me.lid,
            &details,
        ) else {
            return;
        };
        let tid = self.out.next_tid;
        self.out.next_tid += 1;
        let mut smp = Smp::lid_routed(Method::Trap, AttributeId::Notice, 0, tid, self.cfg.m_key);
        if n.encode(&mut smp.data).is_err() {
            return;
        }
        self.election.last_nudge = Some(now_ms);
        // A trap gets a TrapRepress, not a response: nothing to track.
        self.out.queue.push_back(outbox::Request {
            smp,
            purpose: Purpose::Answer,
            tries: 0,
            deadline: 0,
            node: None,
            dlid: Some(m.lid.0),
            reply: false,
        });
    }

    /// The master did not answer a poll, its retransmissions included, or
    /// its port answered with an error (no SM there: its IsSM gone), which
    /// OpenSM counts the same way: the standby takes over once more polls
    /// in a row went unanswered
    /// than [`SmConfig::polling_retries`] allows (OpenSM's
    /// `polling_retry_number`), else polls again at its next turn.
    pub(super) fn master_silent(&mut self, now_ms: u64) {
        self.election.polling = false;
        if self.phase != Phase::Standby || self.election.state != SmState::Standby {
            return;
        }
        self.election.missed_polls = self.election.missed_polls.saturating_add(1);
        if self.election.missed_polls > self.cfg.polling_retries {
            self.take_over(now_ms, None);
        } else {
            self.election.next_poll = Some(now_ms + self.cfg.poll_ms);
        }
    }

    /// Discovers the subnet again to become its master, keeping the LIDs
    /// the ports hold, and giving those that hold none (reset while it
    /// stood by) the LIDs its own discovery saw; `ack`: the SM that handed
    /// it over, to acknowledge once master. Configuration (partitions,
    /// QoS) and the events not yet polled carry over.
    fn take_over(&mut self, _now_ms: u64, ack: Option<PeerSm>) {
        let mut fresh = Sm::new(self.cfg.clone());
        fresh.out.next_tid = self.out.next_tid;
        fresh.own_port_guid = self.own_port_guid;
        fresh.events = core::mem::take(&mut self.events);
        fresh.stats = core::mem::take(&mut self.stats);
        // OpenSM's honor_guid2lid_file: its guid2lid read again and
        // given as at a fresh start; without, the LIDs held win.
        fresh.keep_lids = !self.cfg.honor_guid2lid_file;
        if self.cfg.honor_guid2lid_file {
            fresh.preferred = core::mem::take(&mut self.preferred);
            fresh.preferred_lids = core::mem::take(&mut self.preferred_lids);
        }
        // What the standby's discovery saw: a port or VF reset since then
        // (no master was there to give its LID back) gets it again where
        // no port holds it now, as it would from the master it replaces.
        fresh.known = (self.db.nodes().iter())
            .filter(|n| n.alive && n.lid != 0)
            .map(|n| (n.info.port_guid.0, n.lid))
            .collect();
        fresh.preferred_vfs = self.vf_lids().into_iter().map(|(k, l)| (k, l.0)).collect();
        let mut e = Election::new(self.cfg.priority, self.cfg.sm_key);
        e.takeovers = self.election.takeovers + 1;
        e.to_acknowledge = ack;
        e.state = self.election.state;
        fresh.election = e;
        if let Some(p) = self.db.pkeys.config.take() {
            fresh.set_partitions(p);
        }
        if let Some(q) = self.db.qos.config.take() {
            fresh.set_qos(q);
        }
        fresh.set_qos_policy(self.db.qos.policy.take());
        *self = fresh;
        if ack.is_some() {
            // Handed the subnet: master from now on, as IBA 14.4.1's state
            // diagram and OpenSM have it; the discovery that follows is the
            // new master's first sweep.
            // (`to_acknowledge` names the leaving SM, which the discovery
            // does not ask.)
            self.set_sm_state(SmState::Master, None);
        } else {
            self.set_sm_state(SmState::Discovering, None);
        }
    }

    /// Answers a SubnGet or SubnSet(SMInfo) (queued, to `dlid`, or by the
    /// directed route it came by), acting on a legal Set.
    pub(super) fn on_sm_info_request(&mut self, req: &Smp, dlid: Option<Lid>, now_ms: u64) {
        let own = self.own_port_guid();
        let asked = SmInfo::decode(&req.data).ok();
        // As OpenSM: the SM_Key goes to a requester that passes the M_Key
        // check (any, without an M_Key); a Set must carry the SM_Key.
        let with_key = self.cfg.m_key.0 == 0
            || req.m_key() == self.cfg.m_key
            || req.m_key() == self.m_key_of_port(own);
        let key_ok =
            self.election.sm_key == 0 || asked.is_some_and(|a| a.sm_key.0 == self.election.sm_key);
        let info = self.election.info(own, self.act_count(), with_key);
        let mut status = Status::OK;
        let mut act = None;
        if req.method() == Method::Set {
            let ctl = SmInfoControl::decode("SMInfo", req.attribute_modifier());
            match (ctl, asked) {
                (Ok(ctl), Some(sender)) if key_ok => match self.election.on_set(ctl, &sender) {
                    Ok(m) => act = Some((m, sender)),
                    Err(_) => status = Status::INVALID_FIELD,
                },
                _ => status = Status::INVALID_FIELD,
            }
        }
        if let Some((m, sender)) = act {
            let peer = PeerSm {
                guid: sender.guid.0,
                priority: sender.priority,
                state: sender.sm_state,
                node: (self.db.by_port_guid(sender.guid)).map_or(usize::MAX, |(n, _)| n.0),
            };
            match m {
                Move::TakeOver if self.election.state == SmState::Discovering => {
                    // Master at the end of this discovery.
                    self.election.to_acknowledge = Some(peer);
                }
                Move::TakeOver => self.take_over(now_ms, Some(peer)),
                Move::StandBy if peer.node != usize::MAX => {
                    self.election.handed_to = None;
                    self.election.handing = false;
                    self.enter_standby(peer, now_ms);
                }
                Move::StandBy => status = Status::INVALID_FIELD,
                Move::Disable => {
                    self.phase = Phase::Standby;
                    self.election.master = None;
                    self.election.next_poll = None;
                    self.set_sm_state(SmState::NotActive, None);
                }
                Move::Discover => {
                    // Active from now on (OpenSM's sm_inactive no longer
                    // holds it back).
                    self.cfg.sm_inactive = false;
                    self.take_over(now_ms, None)
                }
            }
        }
        if req.method() == Method::Get && self.election.state == SmState::Master {
            self.ask_back(req, dlid, now_ms);
        }
        let mut resp = req.clone();
        crate::dr::make_response(&mut resp);
        resp.set_status(status);
        resp.data = [0; 64];
        if info.encode(&mut resp.data).is_err() {
            return;
        }
        self.out.queue.push_front(outbox::Request {
            smp: resp,
            purpose: Purpose::Answer,
            tries: 0,
            deadline: 0,
            node: None,
            dlid: dlid.map(|l| l.0),
            reply: false,
        });
    }

    /// A master polled by an SM it has not met (one that came after its
    /// discovery) asks it for its SMInfo, once, by the way the request
    /// came: the reversed return path, or the requester's LID.
    fn ask_back(&mut self, req: &Smp, dlid: Option<Lid>, now_ms: u64) {
        if self.cfg.ignore_other_sm {
            return;
        }
        let (key, path, node) = match dlid {
            Some(l) => {
                let Some((n, _)) = self.db.by_lid(l) else {
                    return;
                };
                let mut k = alloc::vec![0xFF];
                k.extend_from_slice(&l.0.to_be_bytes());
                (k, self.db.nodes()[n.0].path.clone(), n.0)
            }
            None => {
                let mut ports: Vec<u8> = req.return_path().as_slice().to_vec();
                ports.reverse();
                let Ok(path) = DrPath::from_ports(&ports) else {
                    return;
                };
                (ports, path, usize::MAX)
            }
        };
        match self.election.asked.get(&key) {
            Some(&t) if t + REASK_MS > now_ms => return,
            None if self.election.asked.len() >= MAX_ASKED => return,
            _ => {}
        }
        self.election.asked.insert(key, now_ms);
        self.get(path, AttributeId::SmInfo, 0, Purpose::SmInfo { node });
        // One try: the requester may be no SM at all (sminfo, a tool).
        if let Some(r) = self.out.queue.back_mut() {
            r.tries = self.cfg.retries;
        }
    }

    /// A master about to stop hands the subnet to its best standby:
    /// it asks every SM it knows for its SMInfo again, then sends
    /// SubnSet(SMInfo, Handover) to the best that answers Standby (an SM
    /// still discovering would not take it), and stands by once that SM
    /// acknowledges. False when it is not master or knows no other SM
    /// (nothing to wait for).
    pub fn hand_over(&mut self) -> bool {
        if self.election.state != SmState::Master || self.election.handing {
            return false;
        }
        let nodes: Vec<usize> = (self.election.peers.values())
            .filter(|p| p.state != SmState::NotActive)
            .map(|p| p.node)
            .collect();
        if nodes.is_empty() {
            return false;
        }
        self.election.handing = true;
        for node in nodes {
            if self.ask_sm_info(node) {
                self.election.awaiting.insert(node);
            }
        }
        true
    }

    /// The standby took the Handover: this SM, about to stop, is no
    /// longer active (it must not outrank the new master in its sweep,
    /// which would hand the subnet back to an SM that is leaving).
    pub(super) fn handed_over(&mut self, now_ms: u64) {
        self.election.handing = false;
        let to = self.election.handed_to.take();
        if core::mem::take(&mut self.election.yielding) {
            // Yielded to an SM above it: stand by, polling it.
            if let Some(p) = to {
                self.enter_standby(p, now_ms);
                return;
            }
        }
        self.phase = Phase::Standby;
        self.election.master = None;
        self.election.next_poll = None;
        self.set_sm_state(SmState::NotActive, to.map(|p| p.guid));
    }

    /// The Handover was refused or not answered: no handover.
    pub(super) fn handover_failed(&mut self) {
        self.election.handing = false;
        self.election.yielding = false;
        self.election.handed_to = None;
        if self.election.state != SmState::Master && self.phase != Phase::Standby {
            // Still the master: nobody took the subnet.
            let own = self.own_port_guid();
            self.set_sm_state(SmState::Master, Some(own));
        }
    }

    /// The peers have answered (or not): the handover goes to the best
    /// standby, if any.
    pub(super) fn finish_hand_over(&mut self) {
        if !self.election.handing || self.election.handed_to.is_some() {
            return;
        }
        let best = (self.election.peers.values())
            .filter(|p| p.state == SmState::Standby)
            .fold(None::<PeerSm>, |b, p| match b {
                Some(b) if !outranks(p.priority, p.guid, b.priority, b.guid) => Some(b),
                _ => Some(*p),
            });
        match best {
            Some(p) if self.send_handover(p.guid) => {
                self.election.handed_to = Some(p);
                self.emit(SmEvent::HandingOver { to: Guid(p.guid) });
                // Not active from the Handover on: the new master's sweep
                // must not find this SM master (nor above it).
                self.set_sm_state(SmState::NotActive, Some(p.guid));
            }
            _ => {
                self.election.handing = false;
                self.emit(SmEvent::HandoverImpossible);
            }
        }
    }
}

/// The name of an SM state as OpenSM's log writes it.
pub fn state_name(s: SmState) -> &'static str {
    match s {
        SmState::NotActive => "NOT ACTIVE",
        SmState::Discovering => "DISCOVERING",
        SmState::Standby => "STANDBY",
        SmState::Master => "MASTER",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(guid: u64, priority: u8, state: SmState) -> SmInfo {
        SmInfo {
            guid: Guid(guid),
            sm_key: MKey(0),
            act_count: 0,
            priority,
            sm_state: state,
        }
    }

    #[test]
    fn priority_then_the_lower_guid_wins() {
        assert!(outranks(5, 9, 4, 1));
        assert!(!outranks(4, 1, 5, 9));
        assert!(outranks(5, 1, 5, 2));
        assert!(!outranks(5, 2, 5, 1));
        assert!(!outranks(5, 2, 5, 2), "an SM does not outrank itself");
    }

    #[test]
    fn a_discovering_sm_stands_by_for_a_master_or_one_above_it() {
        let me = 0x20;
        let mut e = Election::new(5, 0);
        assert_eq!(e.verdict(me), Verdict::Master, "alone: master");
        // A lower standby and a not-active one change nothing.
        e.seen(&info(0x30, 1, SmState::Standby), 3, me);
        e.seen(&info(0x10, 15, SmState::NotActive), 4, me);
        assert_eq!(e.verdict(me), Verdict::Master);
        // One above it, discovering: it stands by for that one.
        e.seen(&info(0x40, 5, SmState::Discovering), 5, me);
        assert_eq!(e.verdict(me), Verdict::Master, "same priority, higher GUID");
        e.seen(&info(0x08, 5, SmState::Discovering), 6, me);
        assert!(matches!(e.verdict(me), Verdict::Standby(p) if p.guid == 0x08 && p.node == 6));
        // A master, even of lower priority, wins over everything.
        e.seen(&info(0x50, 0, SmState::Master), 7, me);
        assert!(matches!(e.verdict(me), Verdict::Standby(p) if p.guid == 0x50));
        // Its own SMInfo (the SM's own port) is not a peer.
        assert!(!e.seen(&info(me, 15, SmState::Master), 0, me));
    }

    #[test]
    fn a_foreign_sm_key_is_ignored() {
        let mut e = Election::new(0, 0xABCD);
        let mut i = info(0x30, 15, SmState::Master);
        assert!(!e.seen(&i, 1, 0x20));
        // A node claiming a new GUID each time keeps one entry.
        let mut e2 = Election::new(0, 0);
        for g in 1..100u64 {
            e2.seen(&info(0x1000 + g, 1, SmState::Standby), 9, 0x20);
        }
        assert_eq!(e2.peers.len(), 1);
        assert_eq!(e.verdict(0x20), Verdict::Master);
        i.sm_key = MKey(0xABCD);
        assert!(e.seen(&i, 1, 0x20));
        assert!(matches!(e.verdict(0x20), Verdict::Standby(_)));
    }

    #[test]
    fn sets_need_the_senders_state_and_fit_the_receivers() {
        let master = info(0x30, 1, SmState::Master);
        let standby = info(0x30, 1, SmState::Standby);
        let mut e = Election::new(0, 0);
        e.state = SmState::Standby;
        assert_eq!(
            e.on_set(SmInfoControl::Handover, &master),
            Ok(Move::TakeOver)
        );
        assert_eq!(
            e.on_set(SmInfoControl::Handover, &standby),
            Err(SetRefused::SenderState(SmState::Standby))
        );
        assert_eq!(
            e.on_set(SmInfoControl::None, &master),
            Err(SetRefused::NoControl)
        );
        assert_eq!(e.on_set(SmInfoControl::Disable, &master), Ok(Move::Disable));
        assert_eq!(
            e.on_set(SmInfoControl::Discover, &master),
            Err(SetRefused::NotNow(SmState::Standby))
        );
        // Discovering takes a handover (OpenSM does not: its gap).
        e.state = SmState::Discovering;
        assert_eq!(
            e.on_set(SmInfoControl::Handover, &master),
            Ok(Move::TakeOver)
        );
        // A master takes no handover, and an acknowledge only from the SM
        // it handed over to.
        e.state = SmState::Master;
        assert_eq!(
            e.on_set(SmInfoControl::Handover, &master),
            Err(SetRefused::NotNow(SmState::Master))
        );
        assert_eq!(
            e.on_set(SmInfoControl::Acknowledge, &standby),
            Err(SetRefused::NotNow(SmState::Master))
        );
        e.handed_to = Some(PeerSm {
            guid: 0x30,
            priority: 1,
            state: SmState::Standby,
            node: 2,
        });
        assert_eq!(
            e.on_set(SmInfoControl::Acknowledge, &standby),
            Ok(Move::StandBy)
        );
        assert_eq!(
            e.on_set(SmInfoControl::Acknowledge, &master),
            Err(SetRefused::SenderState(SmState::Master))
        );
        e.state = SmState::NotActive;
        assert_eq!(
            e.on_set(SmInfoControl::Discover, &master),
            Ok(Move::Discover)
        );
    }

    #[test]
    fn a_master_is_alive_while_it_says_so() {
        let e = Election::new(5, 0);
        assert!(e.master_alive(&info(0x30, 0, SmState::Master), 0x20));
        assert!(e.master_alive(&info(0x30, 6, SmState::Standby), 0x20));
        assert!(!e.master_alive(&info(0x30, 4, SmState::Standby), 0x20));
        assert!(!e.master_alive(&info(0x30, 9, SmState::NotActive), 0x20));
        assert!(!e.master_alive(&info(0x30, 9, SmState::Discovering), 0x20));
    }

    #[test]
    fn sminfo_carries_the_key_only_to_who_knows_it() {
        let mut e = Election::new(7, 0x1234);
        e.state = SmState::Master;
        let i = e.info(0x20, 9, false);
        assert_eq!(
            (i.guid.0, i.sm_key.0, i.priority, i.sm_state),
            (0x20, 0, 7, SmState::Master)
        );
        assert_eq!(e.info(0x20, 9, true).sm_key.0, 0x1234);
        assert_eq!(Election::new(99, 0).priority, 15);
    }
}
