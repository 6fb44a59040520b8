//! The subnet manager as a sans-IO state machine (in the manner of
//! quinn-proto): the caller feeds it responses and the time, and polls it
//! for SMPs to send and for its next timer. It performs no I/O, reads no
//! clock and spawns no thread, so the simulator, a umad port or a test can
//! drive it alike.
//!
//! A bring-up runs these phases: discovery by directed-route Get(NodeInfo),
//! Get(PortInfo) and Get(SwitchInfo) with a window of outstanding SMPs and
//! retransmission; LID assignment by Set(PortInfo); routing by the engine
//! [`SmConfig::routing`] names (min-hop, up*/down* or fat-tree);
//! distribution (Set(SwitchInfo) with LinearFDBTop, then the LFT blocks in
//! use); and port activation (every linked port to Armed, then Active).
//! Once the subnet is up, [`sweep`] keeps it right as links and nodes come
//! and go, and [`vswitch`] starts, stops and migrates VMs.

mod config;
mod discovery;
pub mod election;
mod error;
mod event;
mod guids;
mod installed;
pub mod lash;
pub mod lft_file;
mod lids;
mod link;
pub mod mcast;
mod mkeys;
mod noisy;
pub use mkeys::port_m_key;
pub use noisy::{BABBLING_REPEATS, NOISY_REPEATS};
mod outbox;
pub mod partitions;
mod pkeys;
pub mod qos;
pub mod qos_policy;
pub mod routing;
mod sl2vl_cache;
mod stats;
mod subnet;
pub mod sweep;
mod ucast;
pub mod updn;
pub mod vswitch;

pub use config::{
    Engine, FatTreeEngine, LinkParams, MinHopEngine, PartEnforce, PortSelection, RoutingEngine,
    SmConfig, UpDownEngine,
};
pub use error::{SmError, Unreached, MAX_UNREACHED_NAMED};
pub use event::{SmEvent, MAX_EVENTS};
pub use guids::{GuidError, GUIDS_PER_BLOCK};
pub use lft_file::{LftFile, LftFileError, LftFileReader};
pub use mcast::{GroupMember, McastError, PortMask};
pub use outbox::Transmit;
use outbox::{Outbox, Purpose, Request};
pub use pkeys::MAX_PKEY_BLOCKS;
pub use stats::Stats;
pub use subnet::{
    Hop, NodeBrief, NodeId, OtherSm, PortBrief, SmNode, SmPort, Subnet, SwitchId, VfSlot,
};

use crate::dr;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec;
use alloc::vec::Vec;
use mad_core::attr::*;
use mad_core::{DrPath, Lid, MKey, Method, Smp};
use routing::{Graph, PortTo};
pub use vswitch::{LidPolicy, MigrationPlan, Vm, VmError, VmId};

use alloc::string::String;

/// Where a bring-up is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Finding nodes and links.
    Discovery,
    /// Giving every port its LID.
    LidAssignment,
    /// Programming SwitchInfo and the forwarding tables.
    Distribution,
    /// Moving ports to Armed, then Active.
    Activation,
    /// The subnet is up and nothing is pending.
    Done,
    /// Applying a change to the running subnet (a VM started or migrated,
    /// a full reconfiguration).
    Reconfiguration,
    /// Bring-up stopped: see [`Sm::error`].
    Failed,
    /// A sweep of the running subnet: SwitchInfo of every switch, the
    /// ports of those whose PortStateChange is set, and the discovery of
    /// what is new. A change continues through LID assignment, routing,
    /// distribution of the changed blocks and activation of new ports.
    Sweep,
    /// Another SM is master: this one polls it and changes nothing (or,
    /// disabled, does nothing at all). See [`election`].
    Standby,
}

/// What [`Sm::handle_mad`] did with a MAD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handled {
    /// A response or a trap, consumed (an unexpected response is
    /// consumed and ignored).
    Consumed,
    /// Not a subnet management response or trap: a request, or another
    /// class. Nothing changed.
    NotForSm,
    /// A request to the SM (SubnGet or SubnSet of SMInfo): its answer is
    /// queued for [`Sm::poll_transmit`].
    Answered,
}

/// The subnet manager.
#[derive(Clone, Debug)]
pub struct Sm {
    cfg: SmConfig,
    phase: Phase,
    /// The only sender.
    out: Outbox,
    /// Events not yet polled.
    events: VecDeque<SmEvent>,
    /// What the SM knows of the subnet.
    db: Subnet,
    stats: Stats,
    armed: bool,
    error: Option<SmError>,
    top: u16,
    vms: BTreeMap<u32, Vm>,
    next_vm: u32,
    free_lids: BTreeSet<u16>,
    up: bool,
    next_sweep: Option<u64>,
    sweep_pending: bool,
    /// The next sweep is a heavy one ([`Sm::request_heavy_sweep`]).
    heavy_pending: bool,
    /// This sweep is a heavy one: every port read.
    heavy: bool,
    changed: bool,
    explored: bool,
    trap_issuers: BTreeSet<u16>,
    /// Runs of port-error traps (129–131) and the ports they made
    /// unhealthy.
    noisy: noisy::NoisyPorts,
    swept: BTreeSet<usize>,
    issuers_first: bool,
    /// The switches that trapped before this sweep, read first.
    sweep_issuers: Vec<usize>,
    /// In a heavy sweep, the live nodes out of reach when its links were
    /// known: kept alive while the sweep looks for them by other ways
    /// ([`Sm::sweep_drained`]), lost only if none leads to them.
    limbo: BTreeSet<usize>,
    /// In a heavy sweep, the nodes whose end port answered.
    end_read: BTreeSet<usize>,
    /// By switch: the CAs whose link to it the SM armed, not yet seen
    /// with its PortStateChange clear since ([`Sm::check_armed_ends`]).
    armed_ends: BTreeMap<usize, BTreeSet<usize>>,
    /// Hypervisors that may have been reset unseen: their VFs' VPortInfo
    /// is set again with the next links made Active ([`Sm::forget_tables`]).
    vports_unknown: BTreeSet<usize>,
    /// At bring-up, the P_Key and QoS tables wait until every Set of the
    /// distribution is answered ([`Sm::distribute`]).
    tables_pending: bool,
    /// Nodes of `limbo` that answered NodeInfo again: true where by the
    /// route the sweep read them by.
    refound: BTreeMap<usize, bool>,
    /// Switches that refused a Set(SwitchInfo): what they hold is not
    /// known until a sweep reads it, which then is not taken for a reset.
    tops_unknown: BTreeSet<usize>,
    /// The state of the SM's own port at the last sweep.
    own_port_state: PortState,
    /// Until the change is in, every SMP goes by directed route: the
    /// SM's own link retrained, and what is behind it may have rebooted.
    dr_only: bool,
    /// Master or standby: the election's state.
    election: election::Election,
    /// Keep the LIDs the ports hold (a standby taking the subnet over).
    keep_lids: bool,
    /// Starting as master, some port kept the LID it held (a running
    /// subnet): the LFTs are read back, so that only what differs is sent.
    kept_found: bool,
    /// LIDs to give ports by their GUID where free (OpenSM's `guid2lid`).
    preferred: BTreeMap<u64, u16>,
    /// The LIDs of `preferred`: a port holding one of them gives it up to
    /// the port the cache names.
    preferred_lids: alloc::collections::BTreeSet<u16>,
    /// LIDs to give VFs at the next bring-up under the prepopulated
    /// policy, by (PF port GUID, VF), where free (ibkit's `vf2lid`).
    preferred_vfs: BTreeMap<(u64, u16), u16>,
    /// Taking over: the LID each port (by port GUID) held when this SM,
    /// standing by, last discovered the subnet, until this master has
    /// brought that port in; a port found without a LID gets it back
    /// where no port holds it now.
    known: BTreeMap<u64, u16>,
    /// LFT blocks read back from the switches by a new master that keeps
    /// the LIDs it finds: (node, block) → the ports they hold.
    found_lfts: BTreeMap<(usize, u16), [u8; 64]>,
    /// The M_Key each port is known to hold, by port GUID
    /// ([`Sm::known_m_keys`]).
    m_keys: BTreeMap<u64, MKey>,
    /// How many of `m_keys` are not the SM's own key.
    foreign_m_keys: usize,
    /// Links by port GUID and number, both ways ([`Sm::known_neighbors`]).
    neighbors: BTreeMap<(u64, u8), (u64, u8)>,
    /// The SM's own port GUID, where the driver gave it.
    own_port_guid: u64,
    /// The next sweep routes and distributes again even if it finds no
    /// change (the roots were changed, [`Sm::set_root_guids`], or a
    /// configuration came in during a sweep).
    reroute_pending: bool,
}

impl Sm {
    /// A subnet manager that will bring the subnet up from its own port.
    pub fn new(cfg: SmConfig) -> Self {
        let (lmc, esp0) = (cfg.lmc.min(7), cfg.lmc_esp0);
        let mut sm = Sm {
            cfg,
            phase: Phase::Discovery,
            out: Outbox::default(),
            events: VecDeque::new(),
            db: Subnet::with_lmc(lmc, esp0),
            stats: Stats::default(),
            armed: false,
            error: None,
            top: 0,
            vms: BTreeMap::new(),
            next_vm: 1,
            free_lids: BTreeSet::new(),
            up: false,
            next_sweep: None,
            sweep_pending: false,
            heavy_pending: false,
            heavy: false,
            changed: false,
            explored: false,
            trap_issuers: BTreeSet::new(),
            noisy: noisy::NoisyPorts::default(),
            swept: BTreeSet::new(),
            issuers_first: false,
            sweep_issuers: Vec::new(),
            limbo: BTreeSet::new(),
            end_read: BTreeSet::new(),
            armed_ends: BTreeMap::new(),
            tables_pending: false,
            vports_unknown: BTreeSet::new(),
            refound: BTreeMap::new(),
            tops_unknown: BTreeSet::new(),
            own_port_state: PortState::Active,
            dr_only: false,
            election: election::Election::new(0, 0),
            keep_lids: false,
            kept_found: false,
            preferred: BTreeMap::new(),
            preferred_lids: alloc::collections::BTreeSet::new(),
            preferred_vfs: BTreeMap::new(),
            known: BTreeMap::new(),
            found_lfts: BTreeMap::new(),
            m_keys: BTreeMap::new(),
            foreign_m_keys: 0,
            neighbors: BTreeMap::new(),
            own_port_guid: 0,
            reroute_pending: false,
        };
        sm.election = election::Election::new(sm.cfg.priority, sm.cfg.sm_key);
        if sm.cfg.sm_inactive {
            // Not active: nothing read, nothing sent, until a master's
            // Discover.
            sm.phase = Phase::Standby;
            sm.election.state = mad_core::attr::SmState::NotActive;
            return sm;
        }
        sm.get(
            DrPath::new(),
            AttributeId::NodeInfo,
            0,
            Purpose::NodeInfo { from: None },
        );
        sm
    }

    /// True once this SM, as master, has brought the subnet up (and
    /// from then on, through sweeps and reconfigurations), but not while
    /// its own port is down: a subnet of the SM alone is not up.
    pub fn subnet_up(&self) -> bool {
        self.up && self.own_port_state != PortState::Down
    }

    /// True while the SM's own port is down, as the bring-up or the last
    /// sweep read it ([`SmEvent::SmPortState`] says when it changes).
    pub fn sm_port_down(&self) -> bool {
        self.own_port_state == PortState::Down
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }
    /// The configuration it runs with.
    pub fn config(&self) -> &SmConfig {
        &self.cfg
    }
    /// What the SM knows of the subnet: nodes, ports, links, LIDs and
    /// tables, with lookups by GUID and by LID.
    pub fn subnet(&self) -> &Subnet {
        &self.db
    }
    /// The nodes discovered, the SM's own first.
    pub fn nodes(&self) -> &[SmNode] {
        self.db.nodes()
    }
    /// SMP counts.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The forwarding tables computed, per switch (in `nodes()` order of switches).
    pub fn lfts(&self) -> impl Iterator<Item = (usize, &[u8])> {
        self.db
            .switch_index
            .iter()
            .copied()
            .zip(self.db.lfts.iter().map(|v| v.as_slice()))
    }
    /// The switch↔node mapping of [`Sm::routing_graph`]: entry `k` is the
    /// index in [`Sm::nodes`] of the graph's switch `k`.
    pub fn graph_switches(&self) -> &[usize] {
        &self.db.switch_index
    }
    /// The highest LID assigned.
    pub fn max_lid(&self) -> u16 {
        self.db.max_lid
    }
    /// Why bring-up stopped, when it did.
    pub fn error(&self) -> Option<&SmError> {
        self.error.as_ref()
    }
    /// True when nothing is queued, in flight or waiting for a stage: the
    /// subnet is up (or bring-up failed) and every change has been applied.
    pub fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed) && self.out.is_empty()
    }

    /// When the SM next needs [`Sm::handle_timeout`] called (a
    /// retransmission, or the next light sweep).
    pub fn poll_timeout(&self) -> Option<u64> {
        let retry = self.out.next_deadline();
        let grow = (self.out).stuck_until(self.cfg.window, self.cfg.window2, self.cfg.stuck_ms);
        let sweep = self
            .next_sweep
            .filter(|_| self.is_idle() && self.phase == Phase::Done);
        let poll = self
            .election
            .next_poll
            .filter(|_| self.phase == Phase::Standby && !self.election.polling);
        [retry, sweep, poll, grow].into_iter().flatten().min()
    }

    /// Retransmits or gives up requests whose time has come.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let mut master_lost = false;
        for mut r in self.out.due(now_ms) {
            if r.dlid.is_some() {
                // No answer by LID: the route may be broken; go by
                // directed route from now on.
                if self.go_directed(&mut r) {
                    self.stats.fallbacks += 1;
                    // A node no longer reached by its LID (it lost it,
                    // reset after the sweep read it, say, or a route to it
                    // is broken) with nothing else to tell: the next sweep
                    // reads every port, and puts the LID or the route
                    // right. Not for the reads of a heavy sweep, which
                    // read every port already.
                    if self.up && !(self.phase == Phase::Sweep && self.heavy) {
                        self.heavy_pending = true;
                    }
                    // The rest of this sweep or change goes by directed
                    // route: an unanswered SMP by LID most often means a
                    // switch on the way lost its table (reset unseen), and
                    // every SMP whose route or response crosses it would
                    // be lost too, each a time-out later (a heavy sweep of
                    // fat-tree-324 after a spine's reset: 336 lost and
                    // 4.2 s, a window of 16 every 200 ms).
                    if self.up {
                        self.dr_only = true;
                        self.reroute_queued();
                    }
                    self.out.queue.push_front(r);
                    continue;
                }
            }
            if r.tries < self.cfg.retries {
                r.tries += 1;
                self.stats.retries += 1;
                self.out.queue.push_front(r);
            } else if matches!(r.purpose, Purpose::PollMaster) {
                self.stats.given_up += 1;
                master_lost = true;
            } else {
                self.stats.given_up += 1;
                // An SM that does not answer SMInfo (gone, its port's IsSM
                // left behind) is no SM: the bring-up goes on without it.
                let sm_info = matches!(r.purpose, Purpose::SmInfo { .. } | Purpose::Handover);
                if matches!(r.purpose, Purpose::Handover) {
                    self.handover_failed();
                }
                if let Purpose::SmInfo { node } = r.purpose {
                    self.election.awaiting.remove(&node);
                }
                if matches!(r.purpose, Purpose::SweepOwnPort) {
                    self.on_sweep_own_port(None);
                    continue;
                }
                // No answer by the known link: the cable moved (not
                // asked again in the next round).
                if let Purpose::DupCheck { node, port, from } = r.purpose {
                    self.on_dup_check(None, node, port, from);
                    continue;
                }
                if self.bringing_up() && r.reply && !sm_info {
                    // Sent again in the next round, before the phase
                    // moves on: a partial fabric is not routed.
                    self.out.lost.push(r);
                }
            }
        }
        if master_lost {
            self.master_silent(now_ms);
        }
        if self.phase == Phase::Done
            && self.is_idle()
            && self.next_sweep.is_some_and(|t| t <= now_ms)
        {
            self.heavy_pending |= self.cfg.force_heavy_sweep;
            self.start_sweep(now_ms);
        }
        self.poll_master(now_ms);
        self.advance(now_ms);
    }

    /// A MAD that came to the SM's port, from its bytes: a response to
    /// one of its SMPs or a trap is consumed; anything else (a request to
    /// a manager the SM does not run, another class) is handed back
    /// untouched for the caller to answer or drop.
    pub fn handle_mad(&mut self, mad: &[u8], now_ms: u64) -> Handled {
        self.handle_mad_from(mad, None, now_ms)
    }

    /// As [`Sm::handle_mad`], for a MAD that came from LID `slid` (its
    /// LRH's source): a LID-routed SubnGet or SubnSet of SMInfo is
    /// answered there (a directed-route one by its return path).
    pub fn handle_mad_from(&mut self, mad: &[u8], slid: Option<Lid>, now_ms: u64) -> Handled {
        let Ok(smp) = Smp::parse(mad) else {
            return Handled::NotForSm;
        };
        match smp.method() {
            Method::GetResp | Method::Trap => {
                self.handle_response(smp, now_ms);
                Handled::Consumed
            }
            Method::Get | Method::Set if smp.attribute_id() == AttributeId::SmInfo => {
                let dlid = if smp.is_directed() {
                    None
                } else {
                    match slid {
                        Some(l) => Some(l),
                        None => return Handled::NotForSm,
                    }
                };
                let smp = smp.clone();
                self.on_sm_info_request(&smp, dlid, now_ms);
                Handled::Answered
            }
            _ => Handled::NotForSm,
        }
    }

    /// Consumes a response or a trap that came to the SM's port.
    pub fn handle_response(&mut self, smp: &Smp, now_ms: u64) {
        if smp.method() == Method::Trap {
            self.on_trap(smp, now_ms);
            return;
        }
        if smp.method() != Method::GetResp {
            return;
        }
        let Some(req) = self.out.answered(smp.header.transaction_id.get()) else {
            return;
        };
        self.out.moved_ms = now_ms;
        if !smp.status().is_ok() {
            if let Purpose::VPortPKeyTable { node, vf } = req.purpose {
                // Refused: what the VF holds is not known.
                self.db.pkeys.forget_vf(node, vf);
            }
            if let Purpose::GuidInfo { node, block } = req.purpose {
                self.on_guid_info(None, node, block);
            }
            if matches!(req.purpose, Purpose::SlToVl { .. } | Purpose::VlArb { .. }) {
                self.on_qos_refused(&req.purpose);
            }
            if matches!(req.purpose, Purpose::Handover) {
                self.handover_failed();
            }
            if let Some(node) = req
                .node
                .filter(|_| matches!(req.purpose, Purpose::SetTop { .. } | Purpose::SetTopOnly))
            {
                self.tops_unknown.insert(node);
            }
            if let Purpose::SmInfo { node } = req.purpose {
                self.election.awaiting.remove(&node);
                // Its port no longer says IsSM: no SM is there now.
                self.election.peers.retain(|_, p| p.node != node);
                self.db.other_sms.retain(|_, o| o.node.0 != node);
            }
            if let Purpose::DupCheck { node, port, from } = req.purpose {
                self.on_dup_check(Some(smp), node, port, from);
            }
            if matches!(req.purpose, Purpose::SweepOwnPort) {
                // Its state is not known: the light sweep goes on.
                self.on_sweep_own_port(None);
            }
            if matches!(req.purpose, Purpose::PollMaster) {
                // The master's port no longer says IsSM (its SM exited):
                // no SM answered this poll.
                self.master_silent(now_ms);
            }
            self.stats.errors += 1;
            self.advance(now_ms);
            return;
        }
        if req.smp.attribute_id() == AttributeId::PortInfo {
            if let (Some(i), Ok(pi)) = (
                req.node.or_else(|| req.purpose.node()),
                PortInfo::decode(&smp.data),
            ) {
                // The port the PortInfo is of (the low byte of the
                // modifier; its top bit is SMSupportsExtendedSpeeds).
                self.learn_m_key(i, req.smp.attribute_modifier() as u8, &pi);
            }
        }
        let path = req.smp.initial_path();
        match req.purpose {
            Purpose::NodeInfo { from } => self.on_node_info(smp, path, from),
            Purpose::DupCheck { node, port, from } => {
                self.on_dup_check(Some(smp), node, port, from)
            }
            Purpose::PortInfo { node, port } => self.on_port_info(smp, node, port),
            Purpose::SwitchInfo { node } => {
                if let (Ok(si), Some(mut n)) =
                    (SwitchInfo::decode(&smp.data), self.db.node_mut(node))
                {
                    n.switch_info = Some(si);
                }
            }
            Purpose::LftRead { node, block } => {
                if let Ok(t) = LinearForwardingTable::decode(&smp.data) {
                    self.found_lfts.insert((node, block), t.port);
                }
            }
            Purpose::SetTop { node } => {
                // The response carries the switch's SwitchInfo after the
                // Set: LinearFDBTop as set, PortStateChange cleared. The
                // SA's SwitchInfoRecord shows it.
                if let (Ok(si), Some(mut n)) =
                    (SwitchInfo::decode(&smp.data), self.db.node_mut(node))
                {
                    n.switch_info = Some(si);
                }
                self.send_lft(node)
            }
            Purpose::VirtInfo { node } => self.on_virt_info(smp, node),
            Purpose::VPortRead { node, vf } => {
                if let Ok(v) = VPortInfo::decode(&smp.data) {
                    self.keep_found_vport(node, vf, &v);
                }
            }
            Purpose::NodeDesc { node } => {
                if let (Ok(d), Some(mut n)) =
                    (NodeDescription::decode(&smp.data), self.db.node_mut(node))
                {
                    n.description = Some(d);
                }
            }
            Purpose::SweepSwitchInfo { node } => self.on_sweep_switch_info(smp, node),
            Purpose::Quiesce { node, port, peer } => {
                // The link retrains: both ends are in Init now.
                self.stats.quiesced += 1;
                for (n, p) in [(node, port), peer] {
                    if let Some(mut p) = self.db.port_mut(n, p) {
                        if let Some(x) = p.info.as_mut() {
                            x.port_state = PortState::Init;
                        }
                    }
                }
            }
            Purpose::SweepPortInfo { node, port } => self.on_sweep_port_info(smp, node, port),
            Purpose::SweepOwnPort => self.on_sweep_own_port(Some(smp)),
            Purpose::SetTopOnly => {
                // What the switch holds after the Set (a value it refused
                // stays as it was), unless a later Set is on its way.
                if let Some(node) = req.node.filter(|&n| !self.setting_top(n)) {
                    if let (Ok(si), Some(mut n)) =
                        (SwitchInfo::decode(&smp.data), self.db.node_mut(node))
                    {
                        n.switch_info = Some(SwitchInfo {
                            port_state_change: false,
                            ..si
                        });
                    }
                }
            }
            Purpose::SetVPort | Purpose::TrapRepress => {}
            Purpose::SetLid { node, port } | Purpose::SetState { node, port } => {
                // The response carries the port's PortInfo after the Set.
                if let (Ok(pi), Some(mut p)) =
                    (PortInfo::decode(&smp.data), self.db.port_mut(node, port))
                {
                    p.info = Some(kept(pi));
                }
            }
            Purpose::SetLink { node, port } => {
                if let (Ok(pi), Some(mut p)) =
                    (PortInfo::decode(&smp.data), self.db.port_mut(node, port))
                {
                    if let Some(held) = p.info.as_mut() {
                        held.link_width_enabled = pi.link_width_enabled;
                        held.link_speed_enabled = pi.link_speed_enabled;
                        held.link_speed_ext_enabled = pi.link_speed_ext_enabled;
                    }
                }
            }
            Purpose::SetLft | Purpose::SetMft => {}
            Purpose::GuidInfo { node, block } => self.on_guid_info(Some(smp), node, block),
            Purpose::PKeyTable { node, port, block } => self.on_pkey_table(smp, node, port, block),
            Purpose::VPortPKeyTable { node, vf } => self.on_vf_pkey_table(smp, node, vf),
            Purpose::SlToVl { node, at } => self.on_sl2vl(smp, node, at),
            Purpose::VlArb { node, port, block } => self.on_vlarb(smp, node, port, block),
            Purpose::SmInfo { node } => self.on_peer_sm_info(smp, node),
            Purpose::PollMaster => self.on_poll_answer(smp, now_ms),
            Purpose::Handover => self.handed_over(now_ms),
            Purpose::Answer => {}
        }
        self.advance(now_ms);
    }

    fn advance(&mut self, now_ms: u64) {
        if self.election.handing && self.election.awaiting.is_empty() {
            self.finish_hand_over();
        }
        while self.out.drained() {
            if self.out.release_stage() {
                continue;
            }
            if self.bringing_up() && self.resend_lost() {
                continue;
            }
            if self.pkey_reads_done() {
                continue;
            }
            if self.phase == Phase::Done && self.sweep_pending {
                self.start_sweep(now_ms);
                continue;
            }
            if matches!(self.phase, Phase::Done | Phase::Failed | Phase::Standby) {
                break;
            }
            self.stats.phase_end_ms.insert(self.phase, now_ms);
            match self.phase {
                Phase::Discovery => {
                    if !self.discovery_verdict(now_ms) {
                        break;
                    }
                    self.phase = Phase::LidAssignment;
                    self.assign_lids();
                    // Read while the LIDs are set: the master is known
                    // sooner, and routing waits for both.
                    self.read_lfts_back();
                }
                Phase::LidAssignment => {
                    self.phase = Phase::Distribution;
                    self.route();
                    if self.up && self.cfg.static_reconfig {
                        // Tables only once the CA links are quiet.
                        let tables = self.capture(Self::distribute);
                        self.quiesce();
                        self.out.stages.push_back(tables);
                    } else {
                        self.distribute();
                    }
                }
                Phase::Distribution if self.tables_pending => {
                    self.tables_pending = false;
                    self.pkey_distribute();
                    self.qos_distribute();
                }
                Phase::Distribution => {
                    self.phase = Phase::Activation;
                    self.activate(PortState::Armed);
                    self.armed = true;
                }
                Phase::Activation if self.armed => {
                    self.armed = false;
                    self.activate(PortState::Active);
                }
                Phase::Activation | Phase::Reconfiguration => {
                    self.phase = Phase::Done;
                    self.out.round = 0;
                    self.became_up(now_ms);
                }
                Phase::Sweep => self.sweep_drained(),
                Phase::Done | Phase::Failed | Phase::Standby => {}
            }
        }
    }
}

/// A PortInfo as the SM keeps it: without ClientReregister, which a
/// port answers in the response to the Set that asked for it
/// (o14-12.2.1), so that no later Set built from the kept copy (arming
/// the link, partition enforcement) asks again.
pub(super) fn kept(mut pi: PortInfo) -> PortInfo {
    pi.client_reregister = false;
    pi
}

fn zerocopy_u64(v: u64) -> zerocopy::byteorder::network_endian::U64 {
    zerocopy::byteorder::network_endian::U64::new(v)
}

/// Runs the send rules for an SMP the SM puts on its port (a convenience
/// for drivers): see [`dr::originate`].
pub fn prepare(smp: &mut Smp, sm_node: &dyn dr::Node, port: u8) -> Result<bool, dr::Discard> {
    dr::originate(smp, sm_node, port)
}

#[cfg(test)]
mod tests {
    use super::Engine;

    #[test]
    fn engine_names_round_trip() {
        for e in Engine::ALL {
            assert_eq!(Engine::from_name(e.name()), Some(e), "{e:?}");
        }
        assert_eq!(Engine::from_name("FatTree"), None);
        assert_eq!(Engine::from_name(""), None);
    }

    #[test]
    fn every_engine_is_listed_once() {
        // A variant added to Engine must be added to Engine::ALL: this
        // match stops compiling until it is considered here.
        for e in Engine::ALL {
            match e {
                Engine::MinHop
                | Engine::UpDown
                | Engine::FatTree
                | Engine::File
                | Engine::Dor
                | Engine::Lash => {}
            }
        }
        let mut names: alloc::vec::Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Engine::ALL.len());
    }
}

#[cfg(test)]
mod handle_mad_tests {
    use super::*;

    /// A response nobody asked for is consumed and changes nothing; a
    /// request, another class or a short buffer is not the SM's and is
    /// handed back; a response to the SM's first request is taken.
    #[test]
    fn the_sm_takes_its_responses_and_hands_back_the_rest() {
        let mut sm = Sm::new(SmConfig::default());
        let t = sm.poll_transmit(0).unwrap();
        let before = sm.outstanding();
        let mut stray = t.smp.clone();
        stray.header.method = Method::GetResp.into();
        stray.header.transaction_id = zerocopy_u64(0xbad);
        assert_eq!(sm.handle_mad(stray.as_wire(), 1), Handled::Consumed);
        assert_eq!(sm.outstanding(), before);
        assert_eq!(sm.handle_mad(t.smp.as_wire(), 1), Handled::NotForSm);
        let mut sa = *t.smp.as_wire();
        sa[1] = 0x03;
        assert_eq!(sm.handle_mad(&sa, 1), Handled::NotForSm);
        assert_eq!(sm.handle_mad(&[1, 0x81], 1), Handled::NotForSm);
        assert_eq!(sm.outstanding(), before);
        // The SM's own NodeInfo request, answered: in flight no more.
        let mut resp = t.smp.clone();
        resp.header.method = Method::GetResp.into();
        assert_eq!(sm.handle_mad(resp.as_wire(), 1), Handled::Consumed);
        assert_eq!(sm.outstanding().1, 0);
    }

    /// OpenSM's `sm_inactive`: the SM sends nothing and answers SMInfo
    /// as NotActive, with its port GUID and priority; a master's
    /// SubnSet(SMInfo, Discover) starts its discovery, a standby's is
    /// refused.
    #[test]
    fn an_inactive_sm_sends_nothing_and_answers_not_active_until_told_to_discover() {
        use mad_core::attr::modifier::SmInfoControl;
        use mad_core::attr::{SmInfo, SmState};
        let mut sm = Sm::new(SmConfig {
            sm_inactive: true,
            priority: 3,
            ..SmConfig::default()
        });
        sm.set_own_port_guid(0x1234);
        assert!(sm.poll_transmit(0).is_none(), "nothing sent");
        assert_eq!(sm.poll_timeout(), None);
        assert_eq!(
            (sm.phase(), sm.sm_state()),
            (Phase::Standby, SmState::NotActive)
        );
        let ask = |sm: &mut Sm, method: Method, ctl: u32, from: SmState, tid: u64| {
            let mut req = Smp::directed(
                &DrPath::new(),
                method,
                AttributeId::SmInfo,
                ctl,
                tid,
                MKey(0),
            );
            let other = SmInfo {
                guid: mad_core::Guid(0x99),
                sm_key: MKey(sm.config().sm_key),
                act_count: 1,
                priority: 9,
                sm_state: from,
            };
            other.encode(&mut req.data).unwrap();
            assert_eq!(sm.handle_mad(req.as_wire(), 10), Handled::Answered);
            let t = sm.poll_transmit(10).unwrap();
            assert_eq!(t.smp.header.transaction_id.get(), tid);
            (t.smp.status(), SmInfo::decode(&t.smp.data).unwrap())
        };
        let (status, info) = ask(&mut sm, Method::Get, 0, SmState::Master, 1);
        assert_eq!(status, mad_core::Status::OK);
        assert_eq!(
            (info.guid, info.priority, info.sm_state),
            (mad_core::Guid(0x1234), 3, SmState::NotActive)
        );
        assert!(sm.poll_transmit(10).is_none(), "a Get changes nothing");
        let discover = u32::from(u8::from(SmInfoControl::Discover));
        let (status, _) = ask(&mut sm, Method::Set, discover, SmState::Standby, 2);
        assert_ne!(
            status,
            mad_core::Status::OK,
            "only a master may say Discover"
        );
        assert_eq!(sm.sm_state(), SmState::NotActive);
        assert!(sm.poll_transmit(10).is_none());
        let (status, _) = ask(&mut sm, Method::Set, discover, SmState::Master, 3);
        assert_eq!(status, mad_core::Status::OK);
        assert_eq!(
            (sm.phase(), sm.sm_state()),
            (Phase::Discovery, SmState::Discovering)
        );
        let first = sm.poll_transmit(10).unwrap();
        assert_eq!(
            first.smp.attribute_id(),
            AttributeId::NodeInfo,
            "discovering"
        );
        assert!(!sm.config().sm_inactive);
    }
}
