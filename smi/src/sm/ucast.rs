//! Unicast routing and distribution: the engine's tables over the
//! discovered graph, and the LFT blocks each switch needs (only those that
//! changed, on a running subnet), after Set(SwitchInfo) with LinearFDBTop.

use super::*;

impl Sm {
    pub(super) fn route(&mut self) {
        let mut index = vec![usize::MAX; self.db.nodes().len()];
        let mut extra = Vec::new();
        if self.up {
            // Keep the tables as distributed, to send only what changes.
            self.db.old_lfts = self
                .db
                .switch_index
                .iter()
                .copied()
                .zip(core::mem::take(&mut self.db.lfts))
                .collect();
        }
        self.db.switch_index.clear();
        let switches: Vec<usize> = (self.db.nodes().iter().enumerate())
            .filter(|(_, n)| n.is_switch() && n.alive)
            .map(|(i, _)| i)
            .collect();
        for i in switches {
            index[i] = self.db.switch_index.len();
            self.db.switch_index.push(i);
        }
        let mut g = Graph::default();
        for &i in &self.db.switch_index {
            let n = &self.db.nodes()[i];
            g.lid.push(n.lid);
            g.guids.push(n.info.node_guid.0);
            g.sys_guids.push(n.info.system_image_guid.0);
            // An enhanced port 0 under `lmc_esp0`: the LIDs above its base
            // end at the switch too.
            if n.lid != 0 {
                for k in 1..1u16 << self.db.lmc_of(i) {
                    extra.push((n.lid.saturating_add(k), index[i], 0));
                }
            }
            g.ports.push(
                n.ports
                    .iter()
                    .enumerate()
                    .map(|(p, port)| match port.peer {
                        // A link with an end that keeps reporting errors
                        // (traps 129-131) carries no route.
                        Some((m, q))
                            if p != 0
                                && self.db.nodes()[m].is_switch()
                                && index[m] != usize::MAX
                                && self.link_healthy(i, p as u8, (m, q)) =>
                        {
                            PortTo::Switch(index[m], q)
                        }
                        Some((m, _))
                            if p != 0
                                && !self.db.nodes()[m].is_switch()
                                && self.db.nodes()[m].alive
                                && self.db.nodes()[m].lid != 0 =>
                        {
                            for vf in &self.db.nodes()[m].vfs {
                                if vf.lid != 0 {
                                    extra.push((vf.lid, index[i], p as u8));
                                }
                            }
                            PortTo::Ca(self.db.nodes()[m].lid, 1 << self.db.lmc_of(m))
                        }
                        _ => PortTo::None,
                    })
                    .collect(),
            );
        }
        g.extra = extra;
        let by_guid = g.switch_by_guid();
        g.roots = (self.cfg.root_guids.iter())
            .filter_map(|guid| by_guid.get(guid).copied())
            .collect();
        g.roots.sort_unstable();
        g.roots.dedup();
        g.order = self.routing_order_lids();
        g.connect_roots = self.cfg.connect_roots;
        self.select_ports(&mut g, &by_guid);
        (self.db.lfts, self.db.ftree_applied) = match self.cfg.routing {
            Engine::FatTree => super::config::FatTreeEngine.route_or_fall_back(&g, self.db.max_lid),
            Engine::File if self.cfg.lfts_file.is_some() => match self.file_routes(&g) {
                Ok(t) => (self.file_routes_for_vfs(&g, t), false),
                Err(reason) => {
                    self.emit(SmEvent::RoutingFellBack {
                        wanted: Engine::File,
                        used: self.file_fallback(),
                        reason,
                    });
                    self.file_fallback_routes(&g)
                }
            },
            // No file (the daemon warned at start): the next engine, as
            // OpenSM's file engine without one.
            Engine::File => self.file_fallback_routes(&g),
            Engine::UpDown => {
                let (t, turn) = super::config::UpDownEngine.route_noting(&g, self.db.max_lid);
                if let Some(turn) = turn {
                    let guid = mad_core::Guid(g.guids.get(turn.switch).copied().unwrap_or(0));
                    self.emit(SmEvent::UpDownTurnAvoided {
                        guid,
                        lid: turn.lid,
                    });
                }
                (t, false)
            }
            engine => (Self::compute_routes(engine, &g, self.db.max_lid), false),
        };
        self.db.lash = None;
        if self.cfg.routing == Engine::Lash {
            self.db.lash = self.lash_layers(&g);
            // Where LASH cannot layer the routes, min-hop routes the
            // fabric, as OpenSM's default engine does after its LASH
            // fails (the event said so).
            if self.db.lash.is_none() {
                self.db.lfts = Self::compute_routes(Engine::MinHop, &g, self.db.max_lid);
            }
        }
        // A new master that read the switches' tables back keeps each
        // entry min-hop would also accept (other engines keep their own
        // rules: up*/down* and fat-tree legality).
        if !self.up && !self.found_lfts.is_empty() && self.cfg.routing == Engine::MinHop {
            let found = &self.found_lfts;
            let nodes = &self.db.switch_index;
            routing::keep_shortest(&g, &mut self.db.lfts, |k, lid| {
                let t = found.get(&(nodes[k], lid / 64))?;
                Some(t[usize::from(lid % 64)])
            });
        }
        self.db.graph = g;
        self.db.switch_of = index;
    }

    /// The engine that routes where the file engine cannot
    /// ([`SmConfig::file_fallback`]; OpenSM tries the next engine of its
    /// list, and its default, min-hop, after the last).
    fn file_fallback(&self) -> Engine {
        match self.cfg.file_fallback {
            Engine::File => Engine::MinHop,
            e => e,
        }
    }

    /// [`Self::file_fallback`]'s tables for `g`, and whether they are
    /// the fat-tree engine's own.
    fn file_fallback_routes(&self, g: &Graph) -> (Vec<Vec<u8>>, bool) {
        match self.file_fallback() {
            Engine::FatTree => super::config::FatTreeEngine.route_or_fall_back(g, self.db.max_lid),
            e => (Self::compute_routes(e, g, self.db.max_lid), false),
        }
    }

    /// The tables of [`SmConfig::lfts_file`] for the switches of `g`
    /// (see [`super::lft_file`]): empty for a switch the file does not
    /// name; each route moved to its owner's LID now. A route out of a
    /// port the switch does not have fails the file, with its line.
    fn file_routes(&self, g: &Graph) -> Result<Vec<Vec<u8>>, String> {
        let Some(file) = &self.cfg.lfts_file else {
            return Err("no lfts_file".into());
        };
        let width = usize::from(self.db.max_lid) + 1;
        let mut t = vec![vec![DROP_PORT; width]; g.ports.len()];
        let by_guid = g.switch_by_guid();
        for sw in &file.switches {
            let Some(&k) = by_guid.get(&sw.guid) else {
                continue;
            };
            t[k].fill(DROP_PORT);
            for r in &sw.routes {
                let ports = g.ports[k].len().saturating_sub(1);
                if usize::from(r.port) > ports {
                    return Err(alloc::format!(
                        "line {}: LID {:#06x} out of port {} of switch {:#018x}, which has {ports} ports",
                        r.line,
                        r.lid,
                        r.port,
                        sw.guid
                    ));
                }
                let lid = self.lid_now(r.lid, r.port_guid);
                if let Some(e) = t[k].get_mut(usize::from(lid)) {
                    *e = r.port;
                }
            }
        }
        Ok(t)
    }

    /// `t` (the file's tables) with the LIDs of vSwitch VFs the file no
    /// longer knows routed by [`Self::file_fallback`]: a VF's LID (a VM's,
    /// or an idle VF's under the prepopulated policy) that the file does
    /// not send into its hypervisor's port at its own switch has moved
    /// since the file was written (a VM migrated, or started with a LID of
    /// its own under the dynamic policy), and the file's route leads where
    /// it was or nowhere. OpenSM has no vSwitch; every other route stays
    /// the file's, as OpenSM keeps it.
    fn file_routes_for_vfs(&self, g: &Graph, mut t: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let moved: Vec<usize> = (g.extra.iter())
            .filter(|&&(lid, k, p)| t[k].get(usize::from(lid)) != Some(&p))
            .map(|e| usize::from(e.0))
            .filter(|&l| l < t.first().map_or(0, Vec::len))
            .collect();
        if moved.is_empty() {
            return t;
        }
        let (fallback, _) = self.file_fallback_routes(g);
        for (row, fb) in t.iter_mut().zip(&fallback) {
            for &l in &moved {
                row[l] = fb[l];
            }
        }
        t
    }

    /// Where a route of an `lfts_file` to `lid` goes now: `lid` if the
    /// port GUID its line names (0: none) still holds it or is not in the
    /// subnet; else that port's LID with the same offset under its LMC
    /// (OpenSM's `remap_lid`).
    fn lid_now(&self, lid: u16, port_guid: u64) -> u16 {
        let Some((node, vf)) = (port_guid != 0)
            .then(|| self.db.by_port_guid(mad_core::Guid(port_guid)))
            .flatten()
        else {
            return lid;
        };
        let n = &self.db.nodes()[node.0];
        let (base, lmc) = match vf {
            0 => (n.lid, self.db.lmc_of(node.0)),
            vf => (n.vfs.get(usize::from(vf) - 1).map_or(0, |v| v.lid), 0),
        };
        let mask = (1u16 << lmc) - 1;
        if (base..=base.saturating_add(mask)).contains(&lid) {
            lid
        } else {
            base.saturating_add(lid & mask)
        }
    }

    /// [`SmConfig::port_selection`] on the switches of `g` (found by
    /// node GUID in `by_guid`): its hop weights and port choice. What
    /// names no live switch, or a port a switch does not have, is
    /// skipped.
    fn select_ports(&self, g: &mut Graph, by_guid: &BTreeMap<u64, usize>) {
        let sel = &self.cfg.port_selection;
        g.choice.shifting = sel.shifting;
        g.choice.count_switch_lids = sel.count_switch_lids;
        g.choice.lmc_as_opensm = sel.lmc_as_opensm;
        for &(guid, port, weight) in &sel.hop_weights {
            let Some(&k) = by_guid.get(&guid) else {
                continue;
            };
            let ports = g.ports[k].len();
            if port == 0 || usize::from(port) >= ports || weight == 0 {
                continue;
            }
            if g.weights.len() < g.ports.len() {
                g.weights = g.ports.iter().map(|p| vec![1; p.len()]).collect();
            }
            g.weights[k][usize::from(port)] = weight;
        }
        for (guid, order) in &sel.search_order {
            let Some(&k) = by_guid.get(guid) else {
                continue;
            };
            let ports = g.ports[k].len();
            let mut seen = vec![false; ports];
            let fits = order.iter().all(|&p| {
                let p = usize::from(p);
                p != 0 && p < ports && !core::mem::replace(&mut seen[p], true)
            });
            if !fits || order.is_empty() {
                continue;
            }
            if g.choice.order.len() < g.ports.len() {
                g.choice.order.resize(g.ports.len(), Vec::new());
            }
            // OpenSM fills the rest in ascending order; the first line
            // for a switch wins.
            if g.choice.order[k].is_empty() {
                let rest = (1..ports).filter(|&p| !seen[p]).map(|p| p as u8);
                g.choice.order[k] = order.iter().copied().chain(rest).collect();
            }
        }
        for &(guid, port) in &sel.prof_ignore {
            let Some(&k) = by_guid.get(&guid) else {
                continue;
            };
            if port == 0 || usize::from(port) >= g.ports[k].len() {
                continue;
            }
            if g.choice.ignored.len() < g.ports.len() {
                g.choice.ignored.resize(g.ports.len(), Vec::new());
            }
            g.choice.ignored[k].push(port);
        }
        g.choice.scatter = sel.scatter;
        if sel.scatter != 0 && sel.order_no_scatter {
            g.choice.no_scatter = g.order.clone();
            g.choice.no_scatter.sort_unstable();
            g.choice.no_scatter.dedup();
        }
    }

    /// The LIDs of [`SmConfig::routing_order`]'s ports, each port's in
    /// ascending order (its base first), a port named twice once.
    fn routing_order_lids(&self) -> Vec<u16> {
        let mut seen = BTreeSet::new();
        let mut lids = Vec::new();
        for &guid in &self.cfg.routing_order {
            let Some((node, vf)) = self.db.by_port_guid(mad_core::Guid(guid)) else {
                continue;
            };
            if !seen.insert((node.0, vf)) {
                continue;
            }
            let n = &self.db.nodes()[node.0];
            let (base, count) = match vf {
                0 => (n.lid, 1u16 << self.db.lmc_of(node.0)),
                vf => (n.vfs.get(usize::from(vf) - 1).map_or(0, |v| v.lid), 1),
            };
            if base != 0 {
                lids.extend((0..count).map(|k| base.saturating_add(k)));
            }
        }
        lids
    }

    /// The switch graph the routes were computed on.
    pub fn routing_graph(&self) -> &Graph {
        &self.db.graph
    }

    /// The CA destinations in the order the fat-tree engine numbers them
    /// (leaf switch by leaf switch, each leaf's ports in order: the
    /// d-mod-k index), as (leaf switch of the graph, LID): `None` unless
    /// the routes are the fat-tree engine's own (`--routing ftree` on a
    /// tree it did not have to fall back on). Ranks placed in this order
    /// spread shift patterns over distinct up links, as the ranks of
    /// OpenSM's `opensm-ftree-ca-order.dump` do.
    pub fn ftree_ca_order(&self) -> Option<Vec<(usize, Lid)>> {
        (self.cfg.routing == Engine::FatTree && self.db.ftree_applied).then(|| {
            (routing::destinations(&self.db.graph).into_iter())
                .filter(|&(_, _, port)| port != 0)
                .map(|(lid, k, _)| (k, Lid(lid)))
                .collect()
        })
    }

    /// Computes routes on `g` with `engine` (what bring-up does, exposed so
    /// route computation can be timed on its own).
    pub fn compute_routes(engine: Engine, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        engine.route(g, max_lid)
    }

    /// True when the channel dependency graph of the computed routes is
    /// acyclic (checked after routing; min-hop makes no such promise);
    /// under LASH, the graph of each layer's routes
    /// ([`super::lash::deadlock_free_in_layers`]), with the QoS policy's
    /// SL-to-VL tables giving each layer its own VL.
    pub fn deadlock_free(&self) -> bool {
        match &self.db.lash {
            Some(layers) => {
                self.lash_vls_apart(layers.count)
                    && super::lash::deadlock_free_in_layers(&self.db.graph, &self.db.lfts, layers)
            }
            None => updn::deadlock_free(&self.db.graph, &self.db.lfts),
        }
    }

    /// Whether the SL-to-VL tables the SM writes on switch external
    /// ports (the QoS policy's `qos_swe_sl2vl`) give each of LASH's
    /// `count` layers a VL of its own. Without a QoS policy the SM writes
    /// none, and the ports' own tables (all SLs on VL 0 after a reset)
    /// could put every layer on one VL.
    fn lash_vls_apart(&self, count: u8) -> bool {
        let Some(q) = &self.db.qos.config else {
            return false;
        };
        let start = usize::from(self.cfg.lash_start_vl);
        let Some(vls) = q.swe.sl2vl.get(start..start + usize::from(count)) else {
            return false;
        };
        let available = super::lash::layers_of_op_vls(self.lash_op_vls());
        (vls.iter().all(|&v| v < available)) && (1..vls.len()).all(|i| !vls[..i].contains(&vls[i]))
    }

    /// The layers LASH gives the routes just computed on `g` (dor's),
    /// or `None`, with the SM's event saying why, where it cannot: under
    /// LMC (as OpenSM's LASH) or with too few VLs for the layers needed.
    fn lash_layers(&mut self, g: &Graph) -> Option<super::lash::Layers> {
        let fell_back = |reason: String| SmEvent::RoutingFellBack {
            wanted: Engine::Lash,
            used: Engine::MinHop,
            reason,
        };
        if self.db.lmc() > 0 {
            self.emit(fell_back(
                "LASH does not route under LMC (nor does OpenSM's)".into(),
            ));
            return None;
        }
        let vls = super::lash::layers_of_op_vls(self.lash_op_vls());
        let start = self.cfg.lash_start_vl;
        if start >= vls {
            let e = super::lash::LashError::StartTooHigh { start, vls };
            self.emit(fell_back(alloc::format!("{e}")));
            return None;
        }
        match super::lash::assign(g, &self.db.lfts, vls - start) {
            Ok(mut layers) => {
                layers.start = start;
                Some(layers)
            }
            Err(e) => {
                self.emit(fell_back(alloc::format!("{e}")));
                None
            }
        }
    }

    /// The fewest OperationalVLs (PortInfo's encoding) any linked switch
    /// port gets from the link manager ([`Sm::stamp_link_params`]): the
    /// fewer of its two ends' VLCap and `max_op_vls`, as OpenSM's LASH
    /// reads them from its switches' ports.
    fn lash_op_vls(&self) -> u8 {
        let nodes = self.db.nodes();
        let mut fewest = 5u8;
        for n in nodes.iter().filter(|n| n.is_switch() && n.alive) {
            for port in n.ports.iter().skip(1) {
                let (Some(info), Some(peer)) = (port.info, port.peer) else {
                    continue;
                };
                let max = self.cfg.link.max_op_vls;
                let vls = super::link::op_vls(nodes, u8::from(info.vl_cap), peer, max);
                fewest = fewest.min(vls);
            }
        }
        fewest
    }

    /// At bring-up: SwitchInfo (LinearFDBTop) to every switch, then every
    /// block in use. On a running subnet: a switch that is new or came back
    /// gets the same; every other switch gets only the blocks that differ
    /// from what it has, and SwitchInfo only when LinearFDBTop moves.
    pub(super) fn distribute(&mut self) {
        let top = self.top_for(self.db.max_lid);
        let old_top = self.top;
        self.top = top;
        let blocks = usize::from(self.db.max_lid) / 64 + 1;
        // The multicast trees are planned first, so that each switch's
        // MulticastFDBTop rides on the Set(SwitchInfo) it gets here.
        let mut mcast = self.mcast_plan();
        for k in 0..self.db.switch_index.len() {
            let i = self.db.switch_index[k];
            let n = &self.db.nodes()[i];
            let Some(mut si) = n.switch_info else {
                continue;
            };
            let held = si;
            si.linear_fdb_top = top;
            si.life_time_value = self.cfg.link.packet_life_time.min(31);
            if let Some(t) = mcast.tops.remove(&i) {
                si.multicast_fdb_top = t;
            }
            // Writing 1 clears PortStateChange. At bring-up it clears what
            // the links coming up set, which discovery has read, where the
            // bring-up itself takes every port on from what it read: each
            // read in Init. A port read Down or Active is left alone, so a
            // change since discovery read it (a cable back, a neighbour
            // reset) would be lost: such a switch keeps the bit, and the
            // first light sweep reads its ports again. Once the subnet is
            // up, a sweep clears the bit itself before it reads a switch's
            // ports; clearing it here, later, would lose a port that
            // changed since (a host whose cable came back while the sweep
            // waited for an answer, behind a switch that cannot trap yet),
            // which the next light sweep then reads.
            let all_init = n
                .ports
                .iter()
                .skip(1)
                .all(|p| p.info.is_some_and(|pi| pi.port_state == PortState::Init));
            si.port_state_change = !self.up && all_init;
            let old = self.db.old_lfts.get(&i).filter(|_| self.up && !n.fresh);
            let Some(old) = old else {
                self.set_node(i, &si, 0, Purpose::SetTop { node: i });
                continue;
            };
            let changed: Vec<u16> = (0..blocks)
                .filter(|&b| {
                    let r = b * 64..(b + 1) * 64;
                    (r.start..r.end).any(|l| {
                        old.get(l).copied().unwrap_or(DROP_PORT)
                            != self.db.lfts[k].get(l).copied().unwrap_or(DROP_PORT)
                    })
                })
                .map(|b| b as u16)
                .collect();
            if top != old_top
                || si.multicast_fdb_top != held.multicast_fdb_top
                || si.life_time_value != held.life_time_value
            {
                self.set_node(i, &si, 0, Purpose::SetTopOnly);
                if let Some(mut n) = self.db.node_mut(i) {
                    n.switch_info = Some(SwitchInfo {
                        port_state_change: false,
                        ..si
                    });
                }
            }
            for b in changed {
                self.send_lft_block(k, b);
            }
        }
        self.mcast_send(mcast);
        self.forget_retrained_ends();
        if self.up {
            self.pkey_distribute();
            self.qos_distribute();
        } else {
            // At bring-up, after the Set(SwitchInfo) above are answered:
            // a CA reset before its switch's PortStateChange is cleared
            // would otherwise lose the tables it was given unseen (the
            // link that retrained sets the bit, the Set clears it). Read
            // after the clear, a reset before shows in the reading, and
            // one after stays in the bit ([`Sm::check_armed_ends`]).
            self.tables_pending = true;
        }
    }

    pub(super) fn send_lft(&mut self, node: usize) {
        let Some(k) = self
            .db
            .switch_of
            .get(node)
            .copied()
            .filter(|&k| k != usize::MAX)
        else {
            return;
        };
        let blocks = usize::from(self.db.max_lid) / 64 + 1;
        for b in 0..blocks {
            let b = b as u16;
            // A new master that kept the LIDs it found sends only the
            // blocks the switch does not hold already.
            if self.found_lfts.get(&(node, b)) == Some(&self.lft_block(k, b)) {
                self.stats.lft_blocks_kept += 1;
                continue;
            }
            self.send_lft_block(k, b);
        }
    }

    /// A new master that keeps the LIDs it finds (taking the subnet over,
    /// or starting from a `guid2lid` cache) reads back the LFT blocks each
    /// switch holds, up to its LinearFDBTop, so that only blocks that
    /// differ are sent: no LFT churn for a subnet whose LIDs stay.
    pub(super) fn read_lfts_back(&mut self) {
        let keeps = self.keep_lids || !self.preferred.is_empty() || self.kept_found;
        if self.up || !keeps {
            return;
        }
        let switches: Vec<(usize, SwitchInfo)> = (self.db.nodes().iter().enumerate())
            .filter(|(_, n)| n.alive && n.is_switch())
            .filter_map(|(i, n)| Some((i, n.switch_info?)))
            .collect();
        for (node, si) in switches {
            self.read_lft_back(node, &si);
        }
    }

    /// One switch's blocks, for [`Sm::read_lfts_back`].
    fn read_lft_back(&mut self, node: usize, si: &SwitchInfo) {
        let top = si
            .linear_fdb_top
            .min(si.linear_fdb_cap.saturating_sub(1))
            .min(Lid::UNICAST_MAX.0);
        if top == 0 {
            return;
        }
        for b in 0..=top / 64 {
            self.get_node(
                node,
                AttributeId::LinearForwardingTable,
                u32::from(b),
                Purpose::LftRead { node, block: b },
            );
        }
    }

    /// Block `b` of switch `k`'s table as the SM has it now.
    fn lft_block(&self, k: usize, b: u16) -> [u8; 64] {
        let mut t = [DROP_PORT; 64];
        let base = usize::from(b) * 64;
        for (e, slot) in t.iter_mut().enumerate() {
            *slot = self.db.lfts[k].get(base + e).copied().unwrap_or(DROP_PORT);
        }
        t
    }

    /// Queues Set(LinearForwardingTable) of block `b` of switch `k` as the
    /// SM's table has it now.
    pub(super) fn send_lft_block(&mut self, k: usize, b: u16) {
        let node = self.db.switch_index[k];
        let mut t = LinearForwardingTable::dropping();
        t.port = self.lft_block(k, b);
        self.set_node(node, &t, u32::from(b), Purpose::SetLft);
    }
}

/// True when every switch has an entry for every destination it can reach.
pub(super) fn complete(g: &Graph, lft: &[Vec<u8>]) -> bool {
    // Connected components of the switch graph, one pass.
    let n = g.ports.len();
    let mut comp = vec![usize::MAX; n];
    for start in 0..n {
        if comp[start] != usize::MAX {
            continue;
        }
        comp[start] = start;
        let mut stack = vec![start];
        while let Some(v) = stack.pop() {
            for t in &g.ports[v] {
                if let PortTo::Switch(m, _) = *t {
                    if comp[m] == usize::MAX {
                        comp[m] = start;
                        stack.push(m);
                    }
                }
            }
        }
    }
    routing::destinations(g).iter().all(|&(lid, t, _)| {
        (0..n).all(|s| {
            comp[s] != comp[t]
                || lft[s]
                    .get(usize::from(lid))
                    .is_some_and(|&p| p != DROP_PORT)
        })
    })
}
