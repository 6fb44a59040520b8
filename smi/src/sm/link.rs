//! Link activation (every linked port to Armed, then Active) and, for a
//! static reconfiguration, quiescing the CA links first.

use super::*;

impl Sm {
    /// Static reconfiguration, first step: Set(PortInfo) Down on every
    /// switch port cabled to a CA (the SM's own excepted), so no data enters
    /// while the tables change; each link retrains to Init.
    pub(super) fn quiesce(&mut self) {
        let mut edges = Vec::new();
        for (i, n) in self.db.nodes().iter().enumerate() {
            if !n.is_switch() || !n.alive {
                continue;
            }
            for (p, port) in n.ports.iter().enumerate().skip(1) {
                if let Some((m, q)) = port.peer {
                    if m != 0 && !self.db.nodes()[m].is_switch() && port.info.is_some() {
                        edges.push((i, p as u8, (m, q)));
                    }
                }
            }
        }
        for (i, p, peer) in edges {
            let Some(mut pi) = self.db.nodes()[i].ports[usize::from(p)].info else {
                continue;
            };
            pi.port_state = PortState::Down;
            pi.port_physical_state = PortPhysicalState::NoChange;
            ForcedLink::default().apply(&mut pi);
            self.stamp_m_key(i, p, &mut pi);
            self.set_node(
                i,
                &pi,
                u32::from(p),
                Purpose::Quiesce {
                    node: i,
                    port: p,
                    peer,
                },
            );
        }
    }

    /// Moves ports on: to Armed every linked port still in Init, then (the
    /// second pass) to Active every port in Armed.
    ///
    /// A link retrains at both of its ends: a port in Init whose peer the
    /// SM last read Active or Armed (before a switch at one end rebooted,
    /// say, and the SM read only that end again) has its peer in Init too,
    /// and the peer is armed with it; left alone, it would stay in Init for
    /// good under a switch port made Active.
    pub(super) fn activate(&mut self, state: PortState) {
        let from = if state == PortState::Armed {
            PortState::Init
        } else {
            PortState::Armed
        };
        let ports = self.linked_ports();
        let retrained: BTreeSet<(usize, u8)> = (ports.iter())
            .filter(|_| state == PortState::Armed)
            .filter_map(|&at| self.retrained_peer(at))
            .collect();
        for (i, port) in ports {
            let n = &self.db.nodes()[i];
            let Some(mut pi) = n.ports[usize::from(port)].info else {
                continue;
            };
            let read = pi;
            if pi.port_state != from && !retrained.contains(&(i, port)) {
                if state == PortState::Armed && pi.port_state == PortState::Active {
                    self.keep_link_params(i, port, pi);
                }
                continue;
            }
            if !n.is_switch() || port == 0 {
                pi.lid = Lid(n.lid);
                pi.lmc = self.db.lmc_of(i);
                pi.master_sm_lid = self.sm_lid();
            }
            if let Some(on) = self.pkey_enforcement(i, port) {
                (
                    pi.partition_enforcement_inbound,
                    pi.partition_enforcement_outbound,
                ) = on;
                self.db.pkeys.sent.insert((i, port), on);
            }
            if let Some(h) = self.qos_high_limit(i, port) {
                pi.vl_high_limit = h;
            }
            if state == PortState::Armed {
                self.stamp_link_params(i, port, &mut pi);
                self.note_armed_end(i, port);
            }
            self.stamp_m_key(i, port, &mut pi);
            pi.subnet_time_out = self.cfg.subnet_time_out;
            pi.port_state = state;
            pi.port_physical_state = PortPhysicalState::NoChange;
            ForcedLink::default().apply(&mut pi);
            if state == PortState::Armed {
                self.force_link(i, port, &pi, read);
            }
            self.set_node(i, &pi, u32::from(port), Purpose::SetState { node: i, port });
        }
        if state == PortState::Active {
            self.set_unknown_vports();
        }
    }

    /// Port `port` of node `i` is being armed: where its link joins a CA
    /// to a switch, the CA is noted under the switch
    /// ([`Sm::check_armed_ends`]).
    ///
    /// Not under static reconfiguration on a running subnet: each pass
    /// takes the CA links down itself ([`Sm::quiesce`]), which sets the
    /// bit, so it cannot tell a reset (and forgetting the tables would
    /// start a pass that takes the links down again, for ever).
    fn note_armed_end(&mut self, i: usize, port: u8) {
        if self.up && self.cfg.static_reconfig {
            return;
        }
        let nodes = self.db.nodes();
        let Some((m, _)) = nodes[i].ports[usize::from(port)].peer else {
            return;
        };
        let (switch, ca) = match (nodes[i].is_switch(), nodes.get(m).map(|n| n.is_switch())) {
            (true, Some(false)) => (i, m),
            (false, Some(true)) => (m, i),
            _ => return,
        };
        self.armed_ends.entry(switch).or_default().insert(ca);
    }

    /// A sweep read the SwitchInfo of `switch`. A CA armed behind it
    /// since its last reading may have been reset after the SM read or
    /// wrote its tables and before its link was armed: the Sets that arm
    /// the link give it its LID back, so nothing the SM reads of the CA
    /// tells, but the link went down and up, which set the switch's
    /// PortStateChange. With the bit clear, those CAs are as the SM left
    /// them; with it set, their P_Key and QoS tables are read or written
    /// again (and the sweep goes on to do it). OpenSM instead updates the
    /// tables of every CA behind a switch whose PortStateChange is set.
    pub(super) fn check_armed_ends(&mut self, switch: usize, port_state_change: bool) {
        let Some(ends) = self.armed_ends.remove(&switch) else {
            return;
        };
        if !port_state_change {
            return;
        }
        for i in ends {
            self.forget_tables(i);
        }
        self.changed = true;
    }

    /// The state port `at` (node, port) was last read in, or set to.
    fn read_state(&self, (i, p): (usize, u8)) -> Option<PortState> {
        let n = self.db.nodes().get(i)?;
        Some(n.ports.get(usize::from(p))?.info?.port_state)
    }

    /// The peer of port `at`, when `at` was last read in Init and its peer
    /// Active or Armed: the link retrained after the peer was read, so the
    /// peer is in Init too, whatever its reading says.
    fn retrained_peer(&self, at: (usize, u8)) -> Option<(usize, u8)> {
        if self.read_state(at) != Some(PortState::Init) {
            return None;
        }
        let peer = self
            .db
            .nodes()
            .get(at.0)?
            .ports
            .get(usize::from(at.1))?
            .peer?;
        let up = matches!(
            self.read_state(peer),
            Some(PortState::Active | PortState::Armed)
        );
        up.then_some(peer)
    }

    /// Before the tables go out: each CA at the far end of a link that
    /// retrained after the CA was read ([`Sm::retrained_peer`]). The CA may
    /// have been powered off and on meanwhile (the Set that arms the link
    /// gives it its LID back, and would not tell): its P_Key and QoS tables
    /// are read or written again.
    pub(super) fn forget_retrained_ends(&mut self) {
        let ends: Vec<usize> = (self.linked_ports().into_iter())
            .filter_map(|at| self.retrained_peer(at))
            .map(|(i, _)| i)
            .filter(|&i| !self.db.nodes()[i].is_switch())
            .collect();
        for i in ends {
            self.forget_tables(i);
        }
    }

    /// What the ports of CA `i` hold (P_Key and QoS tables) is not known
    /// any more: it may have been reset. They are read or written again
    /// by the next distribution; a hypervisor's VFs (their P_Key tables
    /// with the rest, their VPortInfo with the next links made Active,
    /// when its own LID is back).
    pub(super) fn forget_tables(&mut self, i: usize) {
        self.db.pkeys.forget_node(i);
        self.db.qos.forget_node(i);
        if self.db.nodes().get(i).is_some_and(|n| !n.vfs.is_empty()) {
            self.vports_unknown.insert(i);
        }
    }

    /// Writes the SM's M_Key into `pi`, a PortInfo about to be set on
    /// port `p` of node `i`; on an end port (a CA's port, a switch's port
    /// 0, whose PortInfo guards the whole switch) its protect bits and
    /// lease period too, as OpenSM's LID and link managers do. A switch's
    /// external port keeps the protect bits it was read with.
    pub(super) fn stamp_m_key(&self, i: usize, p: u8, pi: &mut PortInfo) {
        let guid = self.db.nodes().get(i).map_or(0, |n| n.info.port_guid.0);
        pi.m_key = self.m_key_of_port(guid);
        let end = self
            .db
            .nodes()
            .get(i)
            .is_some_and(|n| !n.is_switch() || p == 0);
        if end {
            pi.m_key_protect_bits = self.cfg.m_key_protect_bits.min(3);
            pi.m_key_lease_period = self.cfg.m_key_lease_period;
        }
    }

    /// Whether end port `pi`, of node `i`, holds the M_Key, protect bits
    /// and lease the SM writes ([`Sm::m_key_of_port`]); always, when the
    /// SM has no M_Key.
    pub(super) fn holds_m_key(&self, i: usize, pi: &PortInfo) -> bool {
        let guid = self.db.nodes().get(i).map_or(0, |n| n.info.port_guid.0);
        self.cfg.m_key.0 == 0
            || (pi.m_key, pi.m_key_protect_bits, pi.m_key_lease_period)
                == (
                    self.m_key_of_port(guid),
                    self.cfg.m_key_protect_bits.min(3),
                    self.cfg.m_key_lease_period,
                )
    }

    /// Writes the link parameters ([`SmConfig::link`]) into `pi`, the
    /// PortInfo of linked port `p` of node `i` about to be set, as
    /// OpenSM's link manager does: a switch port's HOQLife and
    /// VLStallCount, the leaf values where its peer is not a switch; on
    /// every port the error thresholds and OperationalVLs, the fewer of
    /// the two ends' VLCap and `max_op_vls` (at least VL0).
    pub(super) fn stamp_link_params(&self, i: usize, p: u8, pi: &mut PortInfo) {
        let link = self.cfg.link;
        let nodes = self.db.nodes();
        let Some(n) = nodes.get(i) else { return };
        let peer = n.ports.get(usize::from(p)).and_then(|x| x.peer);
        let Some((m, q)) = peer else { return };
        let peer_node = nodes.get(m);
        if n.is_switch() && p != 0 {
            let leaf = peer_node.is_some_and(|x| !x.is_switch());
            (pi.hoq_life, pi.vl_stall_count) = if leaf {
                (link.leaf_hoq_lifetime, link.leaf_vl_stall_count)
            } else {
                (link.hoq_lifetime, link.vl_stall_count)
            };
            pi.hoq_life = pi.hoq_life.min(31);
            pi.vl_stall_count = pi.vl_stall_count.min(7);
        }
        pi.local_phy_errors = link.local_phy_errors_threshold.min(15);
        pi.overrun_errors = link.overrun_errors_threshold.min(15);
        let vls = op_vls(nodes, u8::from(pi.vl_cap), (m, q), link.max_op_vls);
        pi.operational_vls = mad_core::attr::VlCap::from(vls);
    }

    /// A port already running, found by activation (the SM started on a
    /// running subnet, or took it over) or read by a heavy sweep: what the
    /// SM writes that the port no longer holds is set again, in one
    /// Set(PortInfo), as OpenSM's link manager does on every sweep. On an
    /// Active linked port: a switch port's HOQLife and VLStallCount and
    /// any port's error thresholds; on an end port (a CA's, a switch's
    /// port 0) not already being set afresh: SubnetTimeOut and MasterSMSL;
    /// on any linked port, the width and speeds `force_link_*` give
    /// ([`Sm::forced_link`]). OperationalVLs stay (changing them needs the link to train again).
    pub(super) fn keep_link_params(&mut self, i: usize, p: u8, pi: PortInfo) {
        let Some(n) = self.db.nodes().get(i) else {
            return;
        };
        let (switch, fresh) = (n.is_switch(), n.fresh);
        let end = !switch || p == 0;
        let mut set = pi;
        if p != 0 && pi.port_state == PortState::Active {
            let mut want = pi;
            self.stamp_link_params(i, p, &mut want);
            if switch {
                (set.hoq_life, set.vl_stall_count) = (want.hoq_life, want.vl_stall_count);
            }
            (set.local_phy_errors, set.overrun_errors) =
                (want.local_phy_errors, want.overrun_errors);
        }
        if end && !fresh && n.lid != 0 {
            set.subnet_time_out = self.cfg.subnet_time_out;
            set.master_sm_sl = self.cfg.link.sm_sl.min(15);
        }
        let forced = self.forced_link(i, p, &pi);
        let fields = |x: &PortInfo| {
            (
                x.hoq_life,
                x.vl_stall_count,
                x.local_phy_errors,
                x.overrun_errors,
                x.subnet_time_out,
                x.master_sm_sl,
            )
        };
        if fields(&set) != fields(&pi) || forced.changes(&pi) {
            self.set_port_fields_with(i, p, set, forced);
        }
    }

    /// Before port `p` of node `i` (which the SM read as `read`) is
    /// armed with `armed`: where OpenSM's `force_link_*` change its link
    /// width or speeds, one Set(PortInfo) that changes only them (its
    /// state left), as OpenSM's link manager sends before it arms a port.
    /// Not on the arming Set itself: ibsim takes no width or speed from a
    /// Set that changes the state. Nothing is sent where nothing changes
    /// (OpenSM's defaults, on ports that hold them).
    fn force_link(&mut self, i: usize, p: u8, armed: &PortInfo, read: PortInfo) {
        let forced = self.forced_link(i, p, &read);
        if !forced.changes(&read) {
            return;
        }
        let mut pi = *armed;
        pi.port_state = PortState::NoChange;
        forced.apply(&mut pi);
        self.set_node(i, &pi, u32::from(p), Purpose::SetLink { node: i, port: p });
    }

    /// What OpenSM's `force_link_width`, `force_link_speed` and
    /// `force_link_speed_ext` write into port `p` of node `i`, which
    /// holds `pi`, as its link manager decides: nothing on a switch's
    /// port 0 or a port with no link; a value with the 2X width bit only
    /// where the port (a switch's port 0, for its other ports) advertises
    /// IsLinkWidth2XSupported; an extended speed only where both ends
    /// advertise IsExtendedSpeedsSupported; "set to supported" (255, 15,
    /// 31) only where enabled and supported differ.
    pub(super) fn forced_link(&self, i: usize, p: u8, pi: &PortInfo) -> ForcedLink {
        let none = ForcedLink::default();
        let link = self.cfg.link;
        let nodes = self.db.nodes();
        let Some(n) = nodes.get(i) else { return none };
        let Some((m, q)) = n.ports.get(usize::from(p)).and_then(|x| x.peer) else {
            return none;
        };
        if n.is_switch() && p == 0 {
            return none;
        }
        // A switch's external ports take their capabilities from port 0.
        let caps = |node: usize, port: u8| {
            let at = nodes.get(node)?;
            let port = if at.is_switch() { 0 } else { port };
            at.ports.get(usize::from(port))?.info
        };
        let own = caps(i, p).unwrap_or(*pi);
        let f = link.force_link_width;
        let width = (f != 0
            && (f < 16
                || own
                    .capability_mask2
                    .contains(CapabilityMask2::IS_LINK_WIDTH_2X_SUPPORTED))
            && (f != 255 || pi.link_width_enabled != pi.link_width_supported))
            .then_some(f);
        let f = link.force_link_speed;
        let speed =
            (f != 0 && (f != 15 || pi.link_speed_enabled != pi.link_speed_supported)).then_some(f);
        let ext_both = [caps(i, p), caps(m, q)].iter().all(|c| {
            c.is_some_and(|c| {
                c.capability_mask
                    .contains(CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED)
            })
        });
        let f = link.force_link_speed_ext;
        let ext = (ext_both
            && f != 0
            && (f != 31 || pi.link_speed_ext_enabled != pi.link_speed_ext_supported))
            .then_some(f);
        ForcedLink { width, speed, ext }
    }
}

/// What [`Sm::forced_link`] writes: each field, where set, goes into the
/// Set(PortInfo).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ForcedLink {
    width: Option<u8>,
    speed: Option<u8>,
    ext: Option<u8>,
}

impl ForcedLink {
    /// Puts the forced values into `pi`, a Set(PortInfo) on its way, and
    /// 0 (no change, IBA 14.2.5.6) into the fields not forced: a Set
    /// never writes back a width or speed it read, which may be stale.
    /// `ForcedLink::default()` changes none of them.
    pub(super) fn apply(self, pi: &mut PortInfo) {
        pi.link_width_enabled = LinkWidth::from_bits_retain(self.width.unwrap_or(0));
        pi.link_speed_enabled = LinkSpeed::from_bits_retain(self.speed.unwrap_or(0));
        pi.link_speed_ext_enabled = LinkSpeedExt::from_bits_retain(self.ext.unwrap_or(0));
    }

    /// Whether writing them changes what `pi` holds.
    fn changes(self, pi: &PortInfo) -> bool {
        self.width
            .is_some_and(|w| w != pi.link_width_enabled.bits())
            || self
                .speed
                .is_some_and(|s| s != pi.link_speed_enabled.bits())
            || self
                .ext
                .is_some_and(|e| e != pi.link_speed_ext_enabled.bits())
    }
}

/// The OperationalVLs (PortInfo's encoding, 1–5) of a port whose VLCap
/// is `own`, cabled to port `peer` of `nodes`: the fewer of its VLCap,
/// the peer's (where the peer's PortInfo was read) and `max_op_vls`, at
/// least VL0.
pub(super) fn op_vls(nodes: &[SmNode], own: u8, (m, q): (usize, u8), max_op_vls: u8) -> u8 {
    let peer = (nodes.get(m))
        .and_then(|x| x.ports.get(usize::from(q)))
        .and_then(|x| x.info)
        .map(|x| u8::from(x.vl_cap));
    peer.map_or(own, |c| own.min(c)).min(max_op_vls).clamp(1, 5)
}
