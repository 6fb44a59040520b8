//! What the SM tells those who watch the subnet (its driver, and the SA
//! that will answer the hosts): the subnet up, nodes added and lost, traps
//! received, LIDs given. Events queue until polled, a bounded number.

use super::*;
use alloc::string::String;
use mad_core::Guid;

/// The most events held unpolled; older ones are dropped past it (a
/// driver that never polls must not make the SM grow).
pub const MAX_EVENTS: usize = 4096;

/// A change of the subnet, as the SM saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SmEvent {
    /// The subnet is up: after the first bring-up, and again after each
    /// change the SM carried out (a sweep's, a VM's, a reconfiguration).
    SubnetUp {
        /// Live nodes (a multi-port CA once, however many of its ports
        /// are reached).
        nodes: usize,
        /// The highest LID assigned.
        max_lid: Lid,
    },
    /// A port kept sending the same trap 129 (link integrity), 130
    /// (buffer overrun) or 131 (flow-control watchdog): more than
    /// [`NOISY_REPEATS`](super::NOISY_REPEATS) in a row, so its link is
    /// routed around until it is quiet for a minute; or more than
    /// [`BABBLING_REPEATS`](super::BABBLING_REPEATS) under
    /// `babbling_port_policy`, so the SM disabled it.
    NoisyPort {
        /// The node of the port the traps name.
        guid: Guid,
        /// The port.
        port: u8,
        /// The trap number.
        trap: u16,
        /// The traps in the run, this one included.
        repeats: u32,
        /// The port the SM disabled (the end of the link nearer to it:
        /// node GUID and port), or `None` (routed around).
        disabled: Option<(Guid, u8)>,
    },
    /// A port that was routed around for its traps 129-131
    /// ([`SmEvent::NoisyPort`]) sent none for a minute: its link carries
    /// routes again from the next routing.
    PortQuiet {
        /// Its node.
        guid: Guid,
        /// The port.
        port: u8,
    },
    /// The configured routing engine could not route this fabric and
    /// another did (OpenSM logs the same and falls back to min-hop): an
    /// `lfts_file` that names a port a switch does not have.
    RoutingFellBack {
        /// The engine configured.
        wanted: Engine,
        /// The engine that routed instead.
        used: Engine,
        /// Why, with the place in the file.
        reason: String,
    },
    /// Up*/down* routed by its own legal trees rather than OpenSM's hops
    /// ([`super::updn::route_as_opensm`]), which would route `lid` down
    /// into the switch `guid` and up out of it again.
    UpDownTurnAvoided {
        /// The switch's node GUID.
        guid: Guid,
        /// The LID whose route would have turned there.
        lid: u16,
    },
    /// A node answered for the first time, or again after it was lost.
    NodeAdded {
        /// Its index in [`Sm::nodes`].
        node: usize,
        /// Its node GUID.
        guid: Guid,
    },
    /// A node can no longer be reached over the links the SM knows.
    NodeLost {
        /// Its index in [`Sm::nodes`].
        node: usize,
        /// Its node GUID.
        guid: Guid,
    },
    /// A trap reached the SM.
    Trap {
        /// The LID of the port that sent it.
        issuer: Lid,
        /// The trap number (generic notices).
        number: Option<u16>,
        /// The notice as it came (the SA forwards it to subscribers).
        notice: mad_core::notice::Notice,
    },
    /// LIDs were given to ports that had none or had others.
    LidsChanged {
        /// Ports given a LID.
        ports: usize,
    },
    /// The SM's election state changed (IBA 14.4): master, standby
    /// (polling `master`), discovering again to take over, not active.
    SmStateChanged {
        /// The new state.
        state: SmState,
        /// The master as this SM knows it (itself when master).
        master: Option<Guid>,
    },
    /// A master about to stop sent its best standby a Handover.
    HandingOver {
        /// The standby's port GUID.
        to: Guid,
    },
    /// A master about to stop found no standby to hand over to.
    HandoverImpossible,
    /// The SM's own port was found in another state as a sweep started:
    /// Down (the sweep stops there; nothing can be reached), or up again
    /// but not Active (its link retrained: the sweep is a heavy one, by
    /// directed route), or Active again.
    SmPortState {
        /// The state it was found in.
        state: PortState,
    },
    /// A hypervisor was found again (it rebooted, or its link came back)
    /// with fewer VFs than before: the VM that ran in a VF it no longer
    /// has is gone, and forgotten (its LID is free again under the
    /// dynamic policy; under the prepopulated one it went with its VF).
    VmLost {
        /// The VM.
        vm: VmId,
        /// Its vGUID.
        guid: Guid,
        /// The LID it had.
        lid: Lid,
        /// The hypervisor's node GUID.
        hypervisor: Guid,
        /// The VF (1-based) it ran in.
        vf: u16,
    },
    /// A heavy sweep found an end port that no longer holds what the SM
    /// set ([`Sm::request_heavy_sweep`]); it is set again.
    PortNotAsSet {
        /// Its node's index in [`Sm::nodes`].
        node: usize,
        /// Its node GUID.
        guid: Guid,
        /// The port (a switch's 0, a CA's own).
        port: u8,
        /// The LID, LMC, master SM LID and state it held.
        found: (Lid, u8, Lid, PortState),
        /// The LID, LMC and master SM LID the SM gave it (and Active).
        want: (Lid, u8, Lid),
        /// Whether it held the SM's M_Key, protect bits and lease period
        /// ([`crate::sm::SmConfig::m_key`]).
        m_key_held: bool,
    },
    /// A sweep read a switch's SwitchInfo and found LinearFDBTop or
    /// MulticastFDBTop other than what the switch last held from the SM,
    /// with no Set(SwitchInfo) of the SM's on its way: the switch was
    /// reset (or written by someone else) while keeping its LID, so its
    /// forwarding, P_Key and QoS tables are written again, as for a switch
    /// that came back.
    SwitchTablesNotAsSet {
        /// Its node's index in [`Sm::nodes`].
        node: usize,
        /// Its node GUID.
        guid: Guid,
        /// LinearFDBTop and MulticastFDBTop read.
        found: (u16, u16),
        /// LinearFDBTop and MulticastFDBTop it held from the SM.
        want: (u16, u16),
    },
    /// A port answered with the node GUID and port number of a port the
    /// SM knows cabled elsewhere, and that port still answers there: two
    /// ports hold one GUID (a card made wrong, or a host forging it). The
    /// port found first is kept; the new one is not linked, given a LID
    /// or activated.
    DuplicateGuid {
        /// The node GUID both answer with.
        guid: Guid,
        /// The port number both answer with.
        port: u8,
        /// The node GUID and port the kept port is cabled to.
        kept: (Guid, u8),
        /// The node GUID and port beyond which the second one answered.
        refused: (Guid, u8),
    },
    /// A node answered with a port GUID that a live port of another node
    /// (or a running VM's vGUID) already holds: the GUID its GID is made
    /// of is taken (a card made wrong, or a host forging another's port
    /// GUID to take its GID). The holder keeps it; the new node is not
    /// added, so it gets no link, LID or activation, as OpenSM refuses a
    /// duplicated port GUID (its ERR 0D15).
    DuplicatePortGuid {
        /// The port GUID both answer with.
        port_guid: Guid,
        /// The node GUID of the node that holds it, and the VF (0: the
        /// node's own port, whose port GUID or one of whose alias GUIDs
        /// it is).
        held_by: (Guid, u16),
        /// The node GUID the refused node answered with.
        refused: Guid,
        /// The node GUID and port beyond which the refused node answered.
        beyond: (Guid, u8),
    },
    /// Taking over, a hypervisor's VF read back as running a VM whose
    /// vGUID a live port, another VM or an alias already holds: the VM is
    /// not taken on (under the prepopulated policy the VF keeps its LID,
    /// as an idle VF), and the holder keeps the GUID.
    DuplicateVGuid {
        /// The vGUID the VF answered with.
        vguid: Guid,
        /// The node GUID of the node that holds it, and the VF (0: the
        /// node's own port).
        held_by: (Guid, u16),
        /// The hypervisor's node GUID.
        hypervisor: Guid,
        /// The VF (from 1).
        vf: u16,
    },
}

impl Sm {
    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<SmEvent> {
        self.events.pop_front()
    }

    /// Queues an event, dropping the oldest past [`MAX_EVENTS`].
    pub(super) fn emit(&mut self, e: SmEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }
}
