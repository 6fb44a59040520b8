//! Keeping a running subnet right (Bermúdez et al.'s change assimilation):
//! a trap 128 from a switch, or the periodic timer, starts a light sweep —
//! Get(SwitchInfo) of every switch, LID-routed. For the switches whose
//! PortStateChange is set, the SM clears it and reads every port. Then it
//! drops the links that went down and the nodes no longer reachable,
//! rebuilds the directed routes, and explores every port that came up by
//! directed route, which discovers new or returning nodes as at bring-up.
//! When anything changed, the SM continues as at bring-up, but
//! incrementally: LIDs only for new nodes (a returning node keeps its LID),
//! routes recomputed, only the LFT blocks that differ sent, and only ports
//! in Init or Armed moved on to Active.

use super::{NodeId, Phase, PortState, Purpose, Request, Sm, SmEvent};
use alloc::collections::{BTreeSet, VecDeque};
use alloc::vec;
use alloc::vec::Vec;
use mad_core::attr::{AttributeId, PortInfo, SwitchInfo};
use mad_core::notice::Notice;
use mad_core::{DrPath, Lid, Method, Smp};

impl Sm {
    /// A trap reached the SM: it is repressed (TrapRepress to its issuer,
    /// LID-routed) and, if it reports a change, a sweep is due; a 144 that
    /// says the NodeDescription changed has it read again, and one with a
    /// new CapabilityMask the port's PortInfo.
    pub(super) fn on_trap(&mut self, smp: &Smp, now_ms: u64) {
        self.stats.traps += 1;
        let Ok(n) = Notice::decode(&smp.data) else {
            return;
        };
        self.emit(SmEvent::Trap {
            issuer: n.issuer_lid,
            number: n.trap_number(),
            notice: n,
        });
        // The TrapRepress carries the M_Key: after a bad M_Key trap (256)
        // it also stops the lease the refused SMP started (IBA 14.2.4.2),
        // so the port stays protected. A bad M_Key trap that names the
        // very key the TrapRepress would carry (an SMP of this SM's was
        // refused: the port holds another key) is not repressed: the port
        // would refuse the TrapRepress too and raise the trap again, and
        // the two would go on for ever. The port repeats the trap at its
        // own pace instead.
        let key = self.m_key_for_lid(n.issuer_lid.0);
        let futile = matches!(
            n.details(),
            Ok(mad_core::notice::TrapDetails::BadMKey(t)) if t.m_key == key
        );
        if futile {
            self.stats.unrepressed += 1;
        }
        if n.issuer_lid.0 != 0 && !futile {
            self.trap_issuers.insert(n.issuer_lid.0);
            let mut r = Smp::lid_routed(
                Method::TrapRepress,
                AttributeId::Notice,
                smp.attribute_modifier(),
                smp.header.transaction_id.get(),
                key,
            );
            r.data = smp.data;
            // TrapRepress gets no response and keeps the trap's TID, so it
            // bypasses the window and the TID numbering.
            self.out.queue.push_front(Request {
                smp: r,
                purpose: Purpose::TrapRepress,
                tries: 0,
                deadline: 0,
                node: None,
                dlid: Some(n.issuer_lid.0),
                reply: false,
            });
        }
        // 144 from a CA whose SM outranks this master (OpenSM's standby
        // sends it when its master is below it): ask that SM again.
        if n.trap_number() == Some(144) && self.election.state == mad_core::attr::SmState::Master {
            if let Some((node, _)) = self.db.by_lid(n.issuer_lid) {
                self.ask_sm_info(node.0);
            }
        }
        // 144 saying the NodeDescription changed (a host renamed): read
        // it again, as OpenSM does; the SA's NodeRecord follows. 144
        // with a CapabilityMask other than the one held (an SM started
        // or stopped on the port: IsSM): that port's PortInfo is read
        // again, so the SA's PortInfoRecords (`saquery -s`) and the
        // election know it (OpenSM sweeps heavily for it).
        // 145: the issuer's SystemImageGUID changed; taken from the
        // notice, as OpenSM takes it (no Get), for the issuer's own node.
        if let Ok(mad_core::notice::TrapDetails::SystemImageGuidChange(t)) = n.details() {
            // Every entry of the node (a CA's other ports have their own).
            if let Some((node, _)) = self.db.by_lid(n.issuer_lid) {
                let guid = self.db.nodes()[node.0].info.node_guid;
                for i in 0..self.db.nodes().len() {
                    if self.db.nodes()[i].info.node_guid == guid {
                        if let Some(mut nm) = self.db.node_mut(i) {
                            nm.info.system_image_guid = t.system_image_guid;
                        }
                    }
                }
            }
        }
        if let Ok(mad_core::notice::TrapDetails::PortError(number, t)) = n.details() {
            self.on_port_error(number, &t, now_ms);
        }
        if let Ok(mad_core::notice::TrapDetails::LocalChange(t)) = n.details() {
            if let Some((node, port)) = self.db.by_lid(n.issuer_lid) {
                let node = node.0;
                if t.other_local_changes && t.node_description_change {
                    self.get_node(
                        node,
                        AttributeId::NodeDescription,
                        0,
                        Purpose::NodeDesc { node },
                    );
                }
                let held = (self.db.node(super::NodeId(node)))
                    .and_then(|n| n.ports.get(usize::from(port)))
                    .and_then(|p| p.info.as_ref())
                    .map(|pi| pi.capability_mask.bits());
                if held.is_some_and(|c| c != t.capability_mask) {
                    self.get_node(
                        node,
                        AttributeId::PortInfo,
                        u32::from(port),
                        Purpose::PortInfo { node, port },
                    );
                }
            }
        }
        // A switch this sweep has yet to read needs no sweep of its own.
        let unread = self.phase == Phase::Sweep
            && (0..self.db.nodes().len()).any(|i| {
                self.db.nodes()[i].lid == n.issuer_lid.0
                    && self.db.nodes()[i].alive
                    && !self.swept.contains(&i)
            });
        // 128: link state change; 64/65: GID in/out of service. Not with
        // OpenSM's sweep_on_trap off: the switch is still remembered as
        // an issuer, read first by the periodic sweep.
        let sweeps = self.cfg.sweep_on_trap;
        if matches!(n.trap_number(), Some(128 | 64 | 65)) && self.up && !unread && sweeps {
            self.sweep_pending = true;
            if self.phase == super::Phase::Done && self.out.inflight.is_empty() {
                self.start_sweep(now_ms);
            }
        }
    }

    /// Starts a light sweep: Get(PortInfo) of the SM's own port (by
    /// directed route, answered by its own node), then
    /// ([`Sm::on_sweep_own_port`]) Get(SwitchInfo) of every live switch.
    pub(super) fn start_sweep(&mut self, now_ms: u64) {
        self.age_noisy_ports(now_ms);
        self.sweep_pending = false;
        self.heavy = core::mem::take(&mut self.heavy_pending);
        self.changed = core::mem::take(&mut self.reroute_pending);
        self.explored = false;
        self.stats.sweeps += 1;
        self.phase = Phase::Sweep;
        self.poll_peer_sms();
        if let Some(iv) = self.cfg.sweep_interval_ms {
            self.next_sweep = Some(now_ms + iv);
        }
        self.swept.clear();
        self.limbo.clear();
        self.end_read.clear();
        self.refound.clear();
        // The switches that trapped first: what they report tells which
        // links are gone, so the rest can be reached around them.
        let issuers: Vec<usize> = (0..self.db.nodes().len())
            .filter(|&i| {
                let n = &self.db.nodes()[i];
                n.is_switch() && n.alive && self.trap_issuers.contains(&n.lid)
            })
            .collect();
        self.trap_issuers.clear();
        self.sweep_issuers = issuers;
        let Some(me) = self.db.nodes().first() else {
            return;
        };
        let (path, port) = (me.path.clone(), me.info.local_port_num);
        self.get(
            path,
            AttributeId::PortInfo,
            u32::from(port),
            Purpose::SweepOwnPort,
        );
    }

    /// The SM's own port as a sweep starts (`None`: it did not answer).
    /// Down: nothing can be reached, and the sweep stops there (no SMP
    /// sent to be lost, no node taken for gone). Up but not Active, where
    /// it was: its link retrained (the switch at its other end, or the
    /// cable, went and came back), so the sweep is a heavy one and every
    /// SMP goes by directed route until the change is in, the tables on
    /// the way being unknown. Otherwise the light sweep goes on.
    pub(super) fn on_sweep_own_port(&mut self, smp: Option<&Smp>) {
        let pi = smp.and_then(|s| PortInfo::decode(&s.data).ok());
        let answer = smp.filter(|_| pi.is_some());
        if let (Some(pi), Some(port)) = (pi, self.own_port(0)) {
            // Kept, so that the end of the sweep knows the port's state.
            if let Some(mut p) = self.db.port_mut(0, port) {
                p.info = Some(super::kept(pi));
            }
        }
        if let Some(state) = pi.map(|p| p.port_state) {
            self.note_own_port_state(state);
            if state == PortState::Down {
                self.sweep_issuers.clear();
                return;
            }
            if state != PortState::Active && self.up {
                self.heavy = true;
                self.dr_only = true;
            }
        }
        if self.heavy {
            // The SM's own port is read already: taken as the heavy
            // sweep's read of it.
            let own = answer.and_then(|s| Some((s, self.own_port(0)?)));
            if let Some((s, port)) = own {
                self.on_sweep_port_info(s, 0, port);
            }
            self.read_end_ports(own.map(|_| 0));
        }
        let issuers = core::mem::take(&mut self.sweep_issuers);
        self.issuers_first = !issuers.is_empty();
        if self.issuers_first {
            self.sweep_switches(issuers);
        } else {
            self.sweep_rest();
        }
    }

    fn sweep_switches(&mut self, list: Vec<usize>) {
        for i in list {
            self.swept.insert(i);
            self.get_node(
                i,
                AttributeId::SwitchInfo,
                0,
                Purpose::SweepSwitchInfo { node: i },
            );
        }
    }

    /// Get(SwitchInfo) of every live switch not read yet in this sweep.
    fn sweep_rest(&mut self) {
        let rest: Vec<usize> = (0..self.db.nodes().len())
            .filter(|&i| {
                self.db.nodes()[i].is_switch()
                    && self.db.nodes()[i].alive
                    && !self.swept.contains(&i)
            })
            .collect();
        self.sweep_switches(rest);
    }

    pub(super) fn on_sweep_switch_info(&mut self, smp: &Smp, node: usize) {
        let Ok(si) = SwitchInfo::decode(&smp.data) else {
            return;
        };
        self.check_switch_tops(node, &si);
        let Some(mut n) = self.db.node_mut(node) else {
            return;
        };
        n.switch_info = Some(si);
        let ports = n.info.num_ports;
        drop(n);
        self.check_armed_ends(node, si.port_state_change);
        if !si.port_state_change && !self.heavy {
            return;
        }
        // Clear the bit first, so a change while we read is not lost.
        if si.port_state_change {
            let mut clear = si;
            clear.port_state_change = true;
            self.set_node(node, &clear, 0, Purpose::SetTopOnly);
        }
        for p in 1..=ports {
            self.get_node(
                node,
                AttributeId::PortInfo,
                u32::from(p),
                Purpose::SweepPortInfo { node, port: p },
            );
        }
    }

    /// A switch whose LinearFDBTop or MulticastFDBTop is no longer what
    /// it last held from the SM (a reset that kept its LID: the tops are
    /// 0 again and the tables empty) is made fresh, so that the sweep
    /// writes its SwitchInfo, every LFT and MFT block, its P_Key and QoS
    /// tables again, as for a switch that came back. OpenSM only puts
    /// LinearFDBTop back and sends the LFT blocks that differ from what it
    /// remembers, so such a switch keeps dropping packets under it. Not
    /// while a Set(SwitchInfo) of the SM's to it is on its way, whose
    /// value the read may predate.
    fn check_switch_tops(&mut self, node: usize, si: &SwitchInfo) {
        if self.tops_unknown.remove(&node) {
            return;
        }
        let Some(n) = self.db.nodes().get(node) else {
            return;
        };
        let Some(held) = n.switch_info.filter(|_| self.up && n.alive && !n.fresh) else {
            return;
        };
        let mft = self.mft_top_supported(node);
        let found = (si.linear_fdb_top, si.multicast_fdb_top);
        let want = (held.linear_fdb_top, held.multicast_fdb_top);
        if found.0 == want.0 && (!mft || found.1 == want.1) {
            return;
        }
        if self.setting_top(node) {
            return;
        }
        let guid = n.info.node_guid;
        if let Some(mut n) = self.db.node_mut(node) {
            n.fresh = true;
        }
        self.changed = true;
        self.emit(SmEvent::SwitchTablesNotAsSet {
            node,
            guid,
            found,
            want,
        });
    }

    /// Whether a Set(SwitchInfo) of the SM's to switch `node` is queued,
    /// held in a stage or in flight.
    pub(super) fn setting_top(&self, node: usize) -> bool {
        let setting = |r: &Request| {
            r.node == Some(node)
                && matches!(r.purpose, Purpose::SetTop { .. } | Purpose::SetTopOnly)
        };
        let out = &self.out;
        out.queue.iter().any(setting)
            || out.inflight.values().any(setting)
            || out.stages.iter().flatten().any(setting)
    }

    pub(super) fn on_sweep_port_info(&mut self, smp: &Smp, node: usize, port: u8) {
        let Ok(pi) = PortInfo::decode(&smp.data) else {
            return;
        };
        if self.heavy && self.own_port(node) == Some(port) {
            self.end_read.insert(node);
        }
        let Some(mut p) = self.db.port_mut(node, port) else {
            return;
        };
        let was = p.info.map(|x| x.port_state);
        p.info = Some(super::kept(pi));
        let peer = p.peer;
        drop(p);
        // A switch's port 0 is the switch itself: never cabled.
        let internal = port == 0 && self.db.nodes().get(node).is_some_and(|n| n.is_switch());
        let down = pi.port_state == PortState::Down;
        // A port that went down, or that is back in Init after having been
        // Active (it bounced, and may now lead elsewhere), loses its link.
        let bounced = pi.port_state == PortState::Init
            && matches!(was, Some(PortState::Active | PortState::Armed));
        if let Some((m, q)) = peer {
            if down || bounced {
                self.link_lost(node, port, (m, q), bounced);
            }
        } else if !down && !internal {
            self.changed = true;
        }
        if self.heavy && !down && !bounced {
            self.check_end_port(node, port, &pi, false);
            self.keep_link_params(node, port, pi);
        } else if self.heavy && bounced {
            // An end port whose link retrained: whether it still holds
            // what the SM gave it (the link comes up again as it would).
            self.check_end_port(node, port, &pi, true);
        }
    }

    /// A heavy sweep's Get(PortInfo) of every live end port: each CA's
    /// own port and each switch's port 0 (the switches' other ports are
    /// read after their SwitchInfo); `except`, a node whose end port was
    /// read already (the SM's own, first in each sweep).
    fn read_end_ports(&mut self, except: Option<usize>) {
        let ends: Vec<(usize, u8)> = (0..self.db.nodes().len())
            .filter(|&i| Some(i) != except)
            .filter_map(|i| Some((i, self.own_port(i)?)))
            .collect();
        for (node, port) in ends {
            self.get_node(
                node,
                AttributeId::PortInfo,
                u32::from(port),
                Purpose::SweepPortInfo { node, port },
            );
        }
    }

    /// A live node's own port, as its brief keeps it: a switch's 0, a
    /// CA's the SM reached.
    fn own_port(&self, i: usize) -> Option<u8> {
        (self.db.brief(NodeId(i)))
            .filter(|b| b.alive)
            .map(|b| b.own_port)
    }

    /// In a heavy sweep, an end port (a CA's own port, a switch's port 0)
    /// that no longer holds what the SM gave it (its LID, LMC or master
    /// SM LID; or a link that is up but not Active, unless it just
    /// `retrained` and comes up again with the rest) makes its node fresh:
    /// the sweep goes on as for a node that came back, which sets them
    /// again (and the node's tables), as OpenSM's heavy sweep re-sets a
    /// port whose PortInfo differs from what it wants.
    fn check_end_port(&mut self, node: usize, port: u8, pi: &PortInfo, retrained: bool) {
        let Some(n) = self.db.nodes().get(node) else {
            return;
        };
        if self.own_port(node) != Some(port) || n.lid == 0 {
            return;
        }
        let (guid, switch) = (n.info.node_guid, n.is_switch());
        let want = (Lid(n.lid), self.db.lmc_of(node), self.sm_lid());
        let found = (pi.lid, pi.lmc, pi.master_sm_lid);
        // A switch's port 0 has no link of its own to be Active.
        let keyed = self.holds_m_key(node, pi);
        let active = switch || retrained || pi.port_state == PortState::Active;
        if found == want && keyed && active {
            if retrained && !switch {
                // The host may have been reset after this read, before the
                // link comes up again (its LID, rewritten by the Set that
                // arms the link, would not tell): its P_Key and QoS tables
                // are read or written again, as OpenSM forces an update of
                // a port it finds in Init.
                self.forget_tables(node);
            }
            return;
        }
        if let Some(mut n) = self.db.node_mut(node) {
            n.fresh = true;
        }
        self.changed = true;
        self.emit(SmEvent::PortNotAsSet {
            node,
            guid,
            port,
            found: (found.0, found.1, found.2, pi.port_state),
            want,
            m_key_held: keyed,
        });
    }

    /// The port `port` of `node`, linked to `to`, was read Down, or back
    /// in Init after it was Active or Armed (`retrained`): the link is
    /// gone until it is found again. The node at the other end may have
    /// been reset meanwhile (a host or a switch rebooted while a heavy
    /// sweep waited for an answer, after it had read the node's end
    /// port): what that read found no longer holds, so a heavy sweep reads
    /// the end port again behind a link that retrained, and a node that
    /// lost its LID is set again as one that came back
    /// ([`Sm::check_end_port`]).
    fn link_lost(&mut self, node: usize, port: u8, to: (usize, u8), retrained: bool) {
        self.unlink(node, port, to.0, to.1);
        self.changed = true;
        if retrained {
            self.recheck_end(to.0);
        }
    }

    /// In a heavy sweep, a link of node `i` was seen to retrain after the
    /// sweep may have read its end port: read it again (it may have been
    /// reset meanwhile). A CA's is read again each time; a switch's (many
    /// of whose links retrain when it reboots) once its last read is in,
    /// and not for a switch already being set again as one that came back.
    fn recheck_end(&mut self, i: usize) {
        let Some(n) = self.db.nodes().get(i).filter(|n| n.alive) else {
            return;
        };
        let skip = n.is_switch() && (n.fresh || !self.end_read.contains(&i));
        if !self.heavy || skip {
            return;
        }
        self.end_read.remove(&i);
        if let Some(own) = self.own_port(i) {
            self.get_node(
                i,
                AttributeId::PortInfo,
                u32::from(own),
                Purpose::SweepPortInfo { node: i, port: own },
            );
        }
    }

    fn unlink(&mut self, a: usize, pa: u8, b: usize, pb: u8) {
        if let Some(mut p) = self.db.port_mut(a, pa) {
            p.peer = None;
        }
        if let Some(mut p) = self.db.port_mut(b, pb) {
            if p.peer == Some((a, pa)) {
                p.peer = None;
            }
        }
    }

    /// The sweep's SMPs are all answered.
    pub(super) fn sweep_drained(&mut self) {
        if self.issuers_first {
            self.issuers_first = false;
            if self.heavy {
                // Out of reach is not lost in a heavy sweep (below): such a
                // node is read by the route it had, which may still lead
                // there (the SM's own link retrained, the cables the same).
                self.refresh_reached();
            } else {
                self.refresh_paths();
            }
            self.sweep_rest();
            if !self.out.queue.is_empty() {
                return;
            }
        }
        if !self.changed {
            self.phase = Phase::Done;
            self.dr_only = false;
            return;
        }
        if !self.explored {
            // Links are known again: recompute who is reachable and how,
            // then look behind every port that is up but leads nowhere known.
            self.explored = true;
            if self.heavy {
                // Every port was read: a node out of reach now may be
                // found again behind a link that retrained (the SM's own,
                // after its leaf switch rebooted), and is not lost yet.
                self.limbo = self.refresh_reached();
            } else {
                self.refresh_paths();
            }
            let from: Vec<usize> = (0..self.db.nodes().len())
                .filter(|i| !self.limbo.contains(i))
                .collect();
            self.explore_from(&from);
            return;
        }
        if !self.limbo.is_empty() {
            // Nodes reached again by the links found: looked behind in
            // turn. One whose end port did not answer this sweep, or that
            // was found again only by another route than it was read by,
            // is read again, and set again as one that came back.
            let back = self.reached_again();
            if !back.is_empty() {
                let (read, unread): (Vec<usize>, Vec<usize>) = back.into_iter().partition(|i| {
                    self.end_read.contains(i) && self.refound.get(i).copied().unwrap_or(true)
                });
                for i in unread {
                    if let Some(mut n) = self.db.node_mut(i) {
                        n.fresh = true;
                    }
                    self.read_node(i);
                }
                self.explore_from(&read);
                return;
            }
            // The rest are lost (below).
            self.limbo.clear();
        }
        // Everything new is found: continue as at bring-up, incrementally.
        self.refresh_paths();
        self.changed = false;
        self.phase = Phase::LidAssignment;
        self.assign_lids();
    }

    /// Get(NodeInfo) behind every port of `nodes` (live) that is up and
    /// leads nowhere known: a switch's external ports, a CA's own port.
    fn explore_from(&mut self, nodes: &[usize]) {
        let mut explore = Vec::new();
        for &i in nodes {
            let Some(n) = self.db.nodes().get(i).filter(|n| n.alive) else {
                continue;
            };
            let first = if n.is_switch() { 1 } else { 0 };
            for (p, port) in n.ports.iter().enumerate().skip(first) {
                let up = port.info.is_some_and(|x| x.port_state != PortState::Down);
                if up
                    && port.peer.is_none()
                    && (n.is_switch() || p == usize::from(n.info.local_port_num))
                {
                    explore.push((i, p as u8));
                }
            }
        }
        for (i, p) in explore {
            if let Ok(next) = self.db.nodes()[i].path.extended(p) {
                self.get(
                    next,
                    AttributeId::NodeInfo,
                    0,
                    Purpose::NodeInfo { from: Some((i, p)) },
                );
            }
        }
    }

    /// A node already known answered NodeInfo again: if it had been lost,
    /// it is back — fresh (it may have rebooted), with its ports to read.
    pub(super) fn revive(&mut self, i: usize, path: &DrPath) {
        let Some(mut n) = self.db.node_mut(i) else {
            return;
        };
        if n.alive {
            return;
        }
        n.alive = true;
        n.fresh = true;
        n.path = path.clone();
        for p in n.ports.iter_mut() {
            p.peer = None;
            p.info = None;
        }
        let guid = n.info.node_guid;
        drop(n);
        self.db.claim_guids(i);
        self.emit(SmEvent::NodeAdded { node: i, guid });
        self.read_node(i);
    }

    /// Breadth-first from the SM's node over the known links: the
    /// directed route to each node reachable (`None`: out of reach).
    fn paths_over_links(&self) -> Vec<Option<DrPath>> {
        let n = self.db.nodes().len();
        let mut paths: Vec<Option<DrPath>> = vec![None; n];
        if n == 0 {
            return paths;
        }
        paths[0] = Some(DrPath::new());
        let mut q = VecDeque::from([0usize]);
        while let Some(i) = q.pop_front() {
            let base = paths[i].clone().unwrap_or_default();
            let links: Vec<(u8, usize)> = self.db.nodes()[i]
                .ports
                .iter()
                .enumerate()
                .skip(1)
                .filter_map(|(p, port)| port.peer.map(|(m, _)| (p as u8, m)))
                .collect();
            for (p, m) in links {
                if paths[m].is_none() && m != 0 {
                    if let Ok(path) = base.extended(p) {
                        paths[m] = Some(path);
                        q.push_back(m);
                    }
                }
            }
        }
        paths
    }

    /// Which nodes are reachable, and the directed route to each: a live
    /// node out of reach is lost ([`SmEvent::NodeLost`]).
    pub(super) fn refresh_paths(&mut self) {
        let mut paths = self.paths_over_links();
        let mut lost = Vec::new();
        for (i, node) in self.db.nodes_mut().iter_mut().enumerate() {
            let seen = paths[i].is_some();
            if node.alive && !seen {
                lost.push((i, node.info.node_guid));
            }
            node.alive = seen;
            if let Some(p) = paths[i].take() {
                node.path = p;
            }
        }
        for (node, guid) in lost {
            self.db.forget_aliases(node);
            self.emit(SmEvent::NodeLost { node, guid });
        }
    }

    /// As [`Sm::refresh_paths`], but a live node out of reach stays alive:
    /// returned, to be looked for.
    fn refresh_reached(&mut self) -> BTreeSet<usize> {
        let mut paths = self.paths_over_links();
        let mut out = BTreeSet::new();
        for (i, node) in self.db.nodes_mut().iter_mut().enumerate() {
            match paths[i].take() {
                Some(p) if node.alive => node.path = p,
                None if node.alive => {
                    out.insert(i);
                }
                _ => {}
            }
        }
        out
    }

    /// The nodes of `limbo` reachable again, taken out of it, with their
    /// new directed routes.
    fn reached_again(&mut self) -> Vec<usize> {
        let now_out = self.refresh_reached();
        let back: Vec<usize> = self.limbo.difference(&now_out).copied().collect();
        self.limbo = now_out;
        back
    }

    /// The subnet is up (again): every live node is reachable by LID from
    /// now on, and the next light sweep is scheduled.
    pub(super) fn became_up(&mut self, now_ms: u64) {
        self.up = true;
        // A CA whose own port is down has a subnet of one node, itself:
        // not a subnet that is up (OpenSM's "SM port is down"; its sweeps
        // wait for the port, and the heavy sweep when it comes back ends
        // here again, up).
        if self.own_port_read_down() {
            self.note_own_port_state(PortState::Down);
        } else {
            let nodes = self.db.node_count(true);
            self.emit(SmEvent::SubnetUp {
                nodes,
                max_lid: Lid(self.db.max_lid),
            });
            self.own_port_state = PortState::Active;
        }
        self.db.old_lfts.clear();
        self.found_lfts.clear();
        self.dr_only = false;
        for n in self.db.nodes_mut().iter_mut() {
            n.fresh = false;
        }
        // What a standby saw before taking over matters only for the
        // nodes this master has yet to bring in.
        if !self.known.is_empty() {
            for n in self.db.nodes().iter().filter(|n| n.alive && n.lid != 0) {
                self.known.remove(&n.info.port_guid.0);
            }
        }
        if let Some(iv) = self.cfg.sweep_interval_ms {
            self.next_sweep.get_or_insert(now_ms + iv);
        }
    }

    /// The SM's own port was read in `state`: said when it changed.
    fn note_own_port_state(&mut self, state: PortState) {
        if state != self.own_port_state {
            self.own_port_state = state;
            self.emit(SmEvent::SmPortState { state });
        }
    }

    /// Whether the SM's own port, on a CA, last read Down.
    fn own_port_read_down(&self) -> bool {
        let (Some(me), Some(port)) = (self.db.nodes().first(), self.own_port(0)) else {
            return false;
        };
        !me.is_switch()
            && me
                .ports
                .get(usize::from(port))
                .and_then(|p| p.info)
                .is_some_and(|pi| pi.port_state == PortState::Down)
    }

    /// Asks for a heavy sweep now, as OpenSM starts one on SIGHUP: a
    /// sweep that reads every port of every switch (whether or not its
    /// PortStateChange is set) and every CA's own port, and puts right,
    /// as for a node that came back, every end port that no longer holds
    /// its LID, LMC or master SM LID, or whose link is up but not Active.
    /// What a trap or a PortStateChange would have said is found without
    /// either. Nothing that holds is written again.
    pub fn request_heavy_sweep(&mut self, now_ms: u64) {
        self.heavy_pending = true;
        self.request_sweep(now_ms);
    }

    /// The switches up*/down* and fat-tree routing take as roots become
    /// `guids` ([`SmConfig::root_guids`](super::SmConfig::root_guids); OpenSM reads its
    /// `root_guid_file` again at each routing): on a running subnet a
    /// sweep starts that routes again and sends the LFT blocks that
    /// change. False (nothing done) when they are the roots already.
    pub fn set_root_guids(&mut self, guids: Vec<u64>, now_ms: u64) -> bool {
        if self.cfg.root_guids == guids {
            return false;
        }
        self.cfg.root_guids = guids;
        self.reroute_if_up(true, now_ms);
        true
    }

    /// The ports routed first become `guids` ([`SmConfig::routing_order`](super::SmConfig::routing_order);
    /// OpenSM reads its `guid_routing_order_file` again at each routing):
    /// on a running subnet a sweep starts that routes again and sends the
    /// LFT blocks that change. False (nothing done) when they are the
    /// order already.
    pub fn set_routing_order(&mut self, guids: Vec<u64>, now_ms: u64) -> bool {
        if self.cfg.routing_order == guids {
            return false;
        }
        self.cfg.routing_order = guids;
        self.reroute_if_up(true, now_ms);
        true
    }

    /// How min-hop and up*/down* pick their ports becomes `sel`
    /// ([`SmConfig::port_selection`](super::SmConfig::port_selection);
    /// OpenSM reads its `hop_weights_file` and
    /// `port_search_ordering_file` again at each routing): on a running
    /// subnet, a sweep starts that routes again and
    /// sends the LFT blocks that change. False (nothing done) when it is
    /// the selection already.
    pub fn set_port_selection(&mut self, sel: super::PortSelection, now_ms: u64) -> bool {
        if self.cfg.port_selection == sel {
            return false;
        }
        self.cfg.port_selection = sel;
        // The fat-tree and file engines may have fallen back on min-hop:
        // routing again sends nothing where nothing changes.
        self.reroute_if_up(true, now_ms);
        true
    }

    /// The tables of the `file` engine become `file`
    /// ([`SmConfig::lfts_file`](super::SmConfig::lfts_file); OpenSM reads its
    /// `lfts_file` again at each routing): under that engine, on a
    /// running subnet, a sweep starts that routes again and sends the LFT
    /// blocks that change. False (nothing done) when the file holds the
    /// same routes.
    pub fn set_lfts_file(&mut self, file: Option<super::LftFile>, now_ms: u64) -> bool {
        if self.cfg.lfts_file == file {
            return false;
        }
        self.cfg.lfts_file = file;
        self.reroute_if_up(self.cfg.routing == super::Engine::File, now_ms);
        true
    }

    /// On a running subnet, when what changed (`matters`) is what the
    /// engine routes by: a sweep starts that routes again and sends the
    /// LFT blocks that change.
    fn reroute_if_up(&mut self, matters: bool, now_ms: u64) {
        if self.up && matters {
            self.reroute_pending = true;
            self.request_sweep(now_ms);
        }
    }

    /// Asks for a light sweep now (as the periodic timer or a trap would).
    pub fn request_sweep(&mut self, now_ms: u64) {
        self.sweep_pending = true;
        if self.phase == Phase::Done && self.is_idle() {
            self.start_sweep(now_ms);
        }
    }

    /// The LID of the SM's own port.
    pub fn sm_lid(&self) -> Lid {
        Lid(self.db.nodes().first().map_or(0, |n| n.lid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sm::{SmConfig, SmNode};
    use mad_core::attr::NodeType;
    use mad_core::Status;

    /// The SM's CA and one switch, up, the switch holding LinearFDBTop
    /// 0x40 from the SM.
    fn switch_sm() -> Sm {
        let mut sm = Sm::new(SmConfig::default());
        (sm.db).add_node(SmNode::for_test(0x1, NodeType::ChannelAdapter, 1, &[]));
        (sm.db).add_node(SmNode::for_test(0xA, NodeType::Switch, 4, &[1]));
        sm.up = true;
        sm.phase = Phase::Done;
        // Not discovering: the first NodeInfo the SM queued is dropped.
        sm.out.queue.clear();
        if let Some(mut n) = sm.db.node_mut(1) {
            n.switch_info = Some(tops(0x40));
        }
        sm
    }

    fn tops(t: u16) -> SwitchInfo {
        SwitchInfo {
            linear_fdb_top: t,
            ..SwitchInfo::default()
        }
    }

    /// A sweep's Get(SwitchInfo) of the switch answering `t`.
    fn read(sm: &mut Sm, t: u16) -> bool {
        let mut smp = crate::sm::subnet::answer_for_test(AttributeId::SwitchInfo);
        tops(t).encode(&mut smp.data).unwrap();
        sm.changed = false;
        if let Some(mut n) = sm.db.node_mut(1) {
            n.fresh = false;
        }
        sm.on_sweep_switch_info(&smp, 1);
        let flagged = std::iter::from_fn(|| sm.poll_event())
            .any(|e| matches!(e, SmEvent::SwitchTablesNotAsSet { node: 1, .. }));
        assert_eq!(flagged, sm.db.nodes()[1].fresh && sm.changed);
        flagged
    }

    /// Taken for reset only when the tops moved under the SM: not while
    /// a Set(SwitchInfo) of its own is on its way, and not, once, after
    /// the switch refused one (then it is taken as it answers).
    #[test]
    fn a_switch_is_taken_for_reset_only_when_its_tops_moved_under_the_sm() {
        let mut sm = switch_sm();
        assert!(!read(&mut sm, 0x40), "as held");
        assert!(read(&mut sm, 0), "reset");
        // The SM moves the top (as a VM's new LID does), holding 0x80 at
        // once; a read from before the Set lands first; then the Set is
        // answered.
        let moved = |sm: &mut Sm| {
            if let Some(mut n) = sm.db.node_mut(1) {
                n.switch_info = Some(tops(0x80));
            }
            sm.set_node(1, &tops(0x80), 0, Purpose::SetTopOnly);
            let t = sm.poll_transmit(0).expect("the Set goes out");
            assert_eq!(t.smp.attribute_id(), AttributeId::SwitchInfo);
            let mut answer = t.smp.clone();
            answer.header.method = Method::GetResp.into();
            answer
        };
        let mut sm = switch_sm();
        let answer = moved(&mut sm);
        assert!(!read(&mut sm, 0x40), "a read from before the Set");
        sm.handle_response(&answer, 1);
        assert!(!read(&mut sm, 0x80), "as set");
        // The switch refuses the Set: taken as it then answers.
        let mut sm = switch_sm();
        let mut answer = moved(&mut sm);
        answer.set_status(Status::INVALID_FIELD);
        sm.handle_response(&answer, 1);
        assert!(!read(&mut sm, 0x40), "taken as it answers");
        assert!(!read(&mut sm, 0x40), "and held so from then on");
        assert!(read(&mut sm, 0), "a reset after that is found");
    }
}
