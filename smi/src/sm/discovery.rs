//! Discovery: directed-route NodeInfo out from the SM's port, the
//! NodeDescription, SwitchInfo and PortInfo of every node found, and the
//! links between them; a node found again (by its GUID) is revived where
//! it was.

use super::*;

impl Sm {
    pub(super) fn on_node_info(&mut self, smp: &Smp, path: DrPath, from: Option<(usize, u8)>) {
        let Ok(ni) = NodeInfo::decode(&smp.data) else {
            return;
        };
        let port = ni.local_port_num;
        let (known, another_port) = self.entry_of(&ni);
        // A node new (or lost, now found again) whose port GUID a live
        // port of another node holds, as its port GUID, a VM's vGUID or
        // an alias GUID, is refused: its GID is taken (OpenSM refuses a
        // port GUID that is an alias with ERR 0D13).
        let fresh = known.is_none_or(|i| !self.db.nodes()[i].alive);
        if let Some((holder, vf)) = self.db.by_gid_guid(ni.port_guid).filter(|_| fresh) {
            self.refuse_port_guid(&ni, (holder.0, vf), from);
            return;
        }
        let idx = match known {
            Some(i) => {
                if self.limbo.contains(&i) {
                    // Out of reach in a heavy sweep and found again: by
                    // the route it was read by, or not (then those reads
                    // were answered by whatever is there now).
                    let same = self.db.nodes()[i].path == path;
                    *self.refound.entry(i).or_default() |= same;
                }
                self.revive(i, &path);
                i
            }
            None => {
                let nports = usize::from(ni.num_ports);
                let node = SmNode {
                    info: ni,
                    path: path.clone(),
                    ports: vec![SmPort::default(); nports + 1],
                    switch_info: None,
                    lid: 0,
                    vfs: Vec::new(),
                    description: None,
                    alive: true,
                    fresh: self.up,
                };
                let i = if another_port {
                    self.db.add_other_port(node)
                } else {
                    self.db.add_node(node)
                };
                self.emit(SmEvent::NodeAdded {
                    node: i,
                    guid: ni.node_guid,
                });
                self.get(
                    path.clone(),
                    AttributeId::NodeDescription,
                    0,
                    Purpose::NodeDesc { node: i },
                );
                self.read_node(i);
                i
            }
        };
        if let Some((parent, pport)) = from {
            if let Some(old) = self.cabled_elsewhere(idx, port, (parent, pport)) {
                // Known cabled elsewhere, and that end still names it: a
                // moved cable, or two ports with one GUID. Asked again
                // by the known link before anything is linked.
                if let Ok(path) = self.db.nodes()[old.0].path.extended(old.1) {
                    let purpose = Purpose::DupCheck {
                        node: idx,
                        port,
                        from: (parent, pport),
                    };
                    self.get(path, AttributeId::NodeInfo, 0, purpose);
                    return;
                }
            }
            self.link_ports((parent, pport), (idx, port));
        }
    }

    /// The entry a NodeInfo answer names, if the SM has one, and whether
    /// it is a port the SM has not seen of a multi-port CA it knows by
    /// another port (a new entry of its own, [`Subnet::add_other_port`]).
    /// A node GUID known as a switch, or an answer that does not agree
    /// with the known CA's type and port count, names the known entry:
    /// the duplicate-GUID checks take it from there.
    fn entry_of(&self, ni: &NodeInfo) -> (Option<usize>, bool) {
        let Some(first) = self.db.by_guid(ni.node_guid) else {
            return (None, false);
        };
        let n = &self.db.nodes()[first.0];
        let another_port = !n.is_switch()
            && ni.node_type == n.info.node_type
            && ni.num_ports == n.info.num_ports
            && ni.local_port_num != n.info.local_port_num
            && (1..=ni.num_ports).contains(&ni.local_port_num);
        if !another_port {
            return (Some(first.0), false);
        }
        match self.db.by_guid_port(ni.node_guid, ni.local_port_num) {
            Some(i) => (Some(i.0), false),
            None => (None, true),
        }
    }

    /// The other end of the link the SM knows for port `port` of node
    /// `idx`, when that is not `new`, its node is alive and it names this
    /// port back.
    fn cabled_elsewhere(&self, idx: usize, port: u8, new: (usize, u8)) -> Option<(usize, u8)> {
        let nodes = self.db.nodes();
        let old = nodes.get(idx)?.ports.get(usize::from(port))?.peer?;
        let far = nodes.get(old.0)?;
        (old != new
            && old.0 != idx
            && far.alive
            && far.ports.get(usize::from(old.1))?.peer == Some((idx, port)))
        .then_some(old)
    }

    /// Notes the cable between `a` and `b` (node, port), both ways; a
    /// link either end had before is undone at its far end.
    pub(super) fn link_ports(&mut self, a: (usize, u8), b: (usize, u8)) {
        self.learn_link(a.0, a.1, b.0, b.1);
        for (end, other) in [(a, b), (b, a)] {
            let old = self
                .db
                .nodes()
                .get(end.0)
                .and_then(|n| n.ports.get(usize::from(end.1))?.peer);
            if let Some(old) = old.filter(|&o| o != other) {
                if let Some(mut op) = self.db.port_mut(old.0, old.1) {
                    if op.peer == Some(end) {
                        op.peer = None;
                    }
                }
            }
            if let Some(mut p) = self.db.port_mut(end.0, end.1) {
                p.peer = Some(other);
            }
            // A port last read Down that a NodeInfo just crossed has come
            // up since (its far end came back and was found from another
            // side): read again, so that it is moved on to Active with
            // its link rather than left in Init.
            let stale = self.db.nodes().get(end.0).is_some_and(|n| {
                n.alive
                    && (n.ports.get(usize::from(end.1)))
                        .and_then(|p| p.info)
                        .is_some_and(|pi| pi.port_state == PortState::Down)
            });
            if stale {
                self.get_node(
                    end.0,
                    AttributeId::PortInfo,
                    u32::from(end.1),
                    Purpose::PortInfo {
                        node: end.0,
                        port: end.1,
                    },
                );
            }
        }
    }

    /// The answer to a [`Purpose::DupCheck`] (`None`: none came): the
    /// port found beyond `from` is linked when the known link no longer
    /// leads to it (the cable moved); when it still does, two ports hold
    /// one GUID, and the second is refused and reported.
    pub(super) fn on_dup_check(
        &mut self,
        answer: Option<&Smp>,
        node: usize,
        port: u8,
        from: (usize, u8),
    ) {
        let Some(n) = self.db.nodes().get(node) else {
            return;
        };
        let guid = n.info.node_guid;
        let old = n.ports.get(usize::from(port)).and_then(|p| p.peer);
        // An answer with an error status still says something is there.
        let still_there = answer.is_some_and(|smp| {
            !smp.status().is_ok()
                || NodeInfo::decode(&smp.data)
                    .is_ok_and(|ni| ni.node_guid == guid && ni.local_port_num == port)
        });
        match old {
            Some(old) if still_there && old != from => {
                self.stats.duplicate_guids += 1;
                let guid_of = |i: usize| self.db.node_guid_of(i);
                let (kept, refused) = ((guid_of(old.0), old.1), (guid_of(from.0), from.1));
                self.emit(SmEvent::DuplicateGuid {
                    guid,
                    port,
                    kept,
                    refused,
                });
            }
            _ => self.link_ports(from, (node, port)),
        }
    }

    /// Counts and reports a node refused for a port GUID that node
    /// `holder` (VF `vf`, 0: its own port) holds; it is left unlinked.
    fn refuse_port_guid(&mut self, ni: &NodeInfo, holder: (usize, u16), from: Option<(usize, u8)>) {
        self.stats.duplicate_guids += 1;
        let guid_of = |i: usize| self.db.node_guid_of(i);
        let beyond = from.map_or((mad_core::Guid(0), 0), |(n, p)| (guid_of(n), p));
        self.emit(SmEvent::DuplicatePortGuid {
            port_guid: ni.port_guid,
            held_by: (guid_of(holder.0), holder.1),
            refused: ni.node_guid,
            beyond,
        });
    }

    /// Queues the reads of a node just found (or found again), by directed
    /// route along its path: a switch's SwitchInfo and the PortInfo of
    /// every port, 0 included; a CA's PortInfo of the port it was reached by.
    pub(super) fn read_node(&mut self, i: usize) {
        let n = &self.db.nodes()[i];
        let (path, switch) = (n.path.clone(), n.is_switch());
        let ports = if switch {
            0..=n.info.num_ports
        } else {
            n.info.local_port_num..=n.info.local_port_num
        };
        if switch {
            self.get(
                path.clone(),
                AttributeId::SwitchInfo,
                0,
                Purpose::SwitchInfo { node: i },
            );
        }
        for port in ports {
            self.get(
                path.clone(),
                AttributeId::PortInfo,
                u32::from(port),
                Purpose::PortInfo { node: i, port },
            );
        }
    }

    pub(super) fn on_port_info(&mut self, smp: &Smp, node: usize, port: u8) {
        let Ok(pi) = PortInfo::decode(&smp.data) else {
            return;
        };
        let Some(n) = self.db.node(NodeId(node)) else {
            return;
        };
        let is_switch = n.is_switch();
        let path = n.path.clone();
        // The port that holds the node's LID: a switch's port 0, the end
        // port a CA was reached by.
        let lid_port = if is_switch { 0 } else { n.info.local_port_num };
        let Some(mut p) = self.db.port_mut(node, port) else {
            return;
        };
        p.info = Some(kept(pi));
        let explore =
            pi.port_state != PortState::Down && p.peer.is_none() && (port != 0 || !is_switch);
        drop(p);
        if port == lid_port {
            self.keep_found_lid(node, pi.lid);
            // An SM on a CA's port, or on a switch's port 0 (a managed
            // switch's SM): its SMInfo is asked for the election.
            if pi.capability_mask.contains(CapabilityMask::IS_SM) {
                self.ask_sm_info(node);
            }
        }
        if !is_switch
            && pi
                .capability_mask2
                .contains(CapabilityMask2::IS_VIRTUALIZATION_SUPPORTED)
        {
            self.get(
                path.clone(),
                AttributeId::VirtualizationInfo,
                0,
                Purpose::VirtInfo { node },
            );
        } else if !is_switch && port == lid_port && !self.db.nodes()[node].vfs.is_empty() {
            // A hypervisor found again without virtualization: no VF left.
            self.resize_vfs(node, 0);
        }
        if explore {
            // The hop out of this node: for the SM's own CA the path starts
            // with its port; elsewhere the path is extended by the port.
            if let Ok(next) = path.extended(port) {
                self.get(
                    next,
                    AttributeId::NodeInfo,
                    0,
                    Purpose::NodeInfo {
                        from: Some((node, port)),
                    },
                );
            }
        }
    }

    pub(super) fn linked_ports(&self) -> Vec<(usize, u8)> {
        let mut v = Vec::new();
        for (i, n) in self.db.nodes().iter().enumerate() {
            if !n.alive {
                continue;
            }
            for (p, port) in n.ports.iter().enumerate() {
                if p == 0 && n.is_switch() {
                    continue;
                }
                if port.info.is_some_and(|pi| pi.port_state != PortState::Down) {
                    v.push((i, p as u8));
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mad_core::Guid;

    /// The SM's CA (0x1) on switch 0xA port 1; switch 0xB on 0xA's port
    /// 2; CA 0xC on 0xA's port 3.
    fn sm() -> Sm {
        let mut sm = Sm::new(SmConfig::default());
        let nodes = [
            (0x1, NodeType::ChannelAdapter, 1u8, &[][..]),
            (0xA, NodeType::Switch, 4, &[1][..]),
            (0xB, NodeType::Switch, 4, &[1, 2][..]),
            (0xC, NodeType::ChannelAdapter, 1, &[1, 3][..]),
        ];
        for (guid, kind, ports, path) in nodes {
            sm.db.add_node(SmNode::for_test(guid, kind, ports, path));
        }
        for (a, b) in [((0, 1), (1, 1)), ((1, 2), (2, 1)), ((1, 3), (3, 1))] {
            sm.link_ports(a, b);
        }
        sm
    }

    /// A NodeInfo answer from the node with `guid`, port 1.
    fn node_info(guid: u64) -> Smp {
        let ni = NodeInfo {
            node_type: NodeType::ChannelAdapter,
            num_ports: 1,
            node_guid: Guid(guid),
            port_guid: Guid(guid),
            local_port_num: 1,
            ..NodeInfo::default()
        };
        let mut smp = Smp::directed(
            &DrPath::from_ports(&[1, 2, 4]).unwrap(),
            Method::GetResp,
            AttributeId::NodeInfo,
            0,
            0,
            MKey(0),
        );
        ni.encode(&mut smp.data).unwrap();
        smp
    }

    /// A node new to the SM (0xD) whose port answers with CA 0xC's port
    /// GUID is not added; 0xC keeps the GUID. Once 0xC is lost, a node
    /// with its port GUID is let in.
    #[test]
    fn a_new_node_with_a_live_ports_guid_is_refused() {
        let mut sm = sm();
        let mut smp = node_info(0xD);
        let mut ni = NodeInfo::decode(&smp.data).unwrap();
        ni.port_guid = Guid(0xC);
        ni.encode(&mut smp.data).unwrap();
        let path = DrPath::from_ports(&[1, 2, 4]).unwrap();
        let (nodes, queued) = (sm.db.nodes().len(), sm.out.queue.len());
        sm.on_node_info(&smp, path.clone(), Some((2, 4)));
        assert_eq!(sm.db.nodes().len(), nodes, "not added");
        assert_eq!(sm.out.queue.len(), queued, "nothing read from it");
        assert_eq!(peer(&sm, 2, 4), None);
        assert_eq!(sm.stats.duplicate_guids, 1);
        assert_eq!(sm.db.by_port_guid(Guid(0xC)), Some((NodeId(3), 0)));
        let e = std::iter::from_fn(|| sm.poll_event()).last();
        assert!(
            matches!(e, Some(SmEvent::DuplicatePortGuid { port_guid: Guid(0xC), held_by, refused: Guid(0xD), beyond })
                if held_by == (Guid(0xC), 0) && beyond == (Guid(0xB), 4)),
            "{e:?}"
        );
        sm.db.node_mut(3).unwrap().alive = false;
        sm.on_node_info(&smp, path, Some((2, 4)));
        assert_eq!(sm.db.nodes().len(), nodes + 1);
        assert_eq!(sm.db.by_port_guid(Guid(0xC)), Some((NodeId(nodes), 0)));
        assert_eq!(peer(&sm, 2, 4), Some((nodes, 1)));
        assert!(sm.db.indexes_agree());
    }

    /// CA 0xC made a two-port CA; an answer from its port `port` (port
    /// GUID `port_guid`), reached through switch 0xB's port 4.
    fn second_port(sm: &mut Sm, port: u8, num_ports: u8, port_guid: u64) -> Smp {
        sm.db.node_mut(3).unwrap().info.num_ports = 2;
        let mut smp = node_info(0xC);
        let mut ni = NodeInfo::decode(&smp.data).unwrap();
        (ni.local_port_num, ni.num_ports, ni.port_guid) = (port, num_ports, Guid(port_guid));
        ni.encode(&mut smp.data).unwrap();
        smp
    }

    /// A known CA answering by another port, with that port's own GUID,
    /// gets an entry of its own for that port, linked where it answered;
    /// asked again, the entry is found, not made twice.
    #[test]
    fn a_known_cas_other_port_gets_an_entry_of_its_own() {
        let mut sm = sm();
        let smp = second_port(&mut sm, 2, 2, 0xC2);
        let path = DrPath::from_ports(&[1, 2, 4]).unwrap();
        let nodes = sm.db.nodes().len();
        sm.on_node_info(&smp, path.clone(), Some((2, 4)));
        assert_eq!(sm.db.nodes().len(), nodes + 1);
        let e = NodeId(nodes);
        assert_eq!(
            sm.db.by_guid(Guid(0xC)),
            Some(NodeId(3)),
            "the first port stays the node's"
        );
        assert_eq!(sm.db.by_guid_port(Guid(0xC), 1), Some(NodeId(3)));
        assert_eq!(sm.db.by_guid_port(Guid(0xC), 2), Some(e));
        assert_eq!(sm.db.by_port_guid(Guid(0xC2)), Some((e, 0)));
        assert!(sm.db.is_first_port(NodeId(3)) && !sm.db.is_first_port(e));
        assert_eq!(peer(&sm, 2, 4), Some((e.0, 2)));
        assert_eq!(peer(&sm, 3, 1), Some((1, 3)), "port 1's link is untouched");
        assert_eq!(sm.db.nodes()[e.0].path, path);
        let added = std::iter::from_fn(|| sm.poll_event())
            .any(|ev| matches!(ev, SmEvent::NodeAdded { node, guid: Guid(0xC) } if node == e.0));
        assert!(added);
        assert!(sm.db.indexes_agree());
        sm.on_node_info(&smp, path, Some((2, 4)));
        assert_eq!(
            sm.db.nodes().len(),
            nodes + 1,
            "found again, not added again"
        );
        assert_eq!(sm.stats.duplicate_guids, 0);
    }

    /// An answer by another port that names the known port's GUID is a
    /// forged GID, refused; one that disagrees with the known CA's port
    /// count, or names a port past it, is not another port of it.
    #[test]
    fn another_port_that_disagrees_with_the_known_ca_gets_no_entry() {
        let path = DrPath::from_ports(&[1, 2, 4]).unwrap();
        for (port, num_ports, guid, dup) in [(2, 2, 0xC, 1), (2, 3, 0xC2, 0), (3, 2, 0xC3, 0)] {
            let mut sm = sm();
            let smp = second_port(&mut sm, port, num_ports, guid);
            let nodes = sm.db.nodes().len();
            sm.on_node_info(&smp, path.clone(), Some((2, 4)));
            assert_eq!(
                sm.db.nodes().len(),
                nodes,
                "port {port} of {num_ports}, GUID {guid:#x}"
            );
            assert_eq!(sm.db.by_guid_port(Guid(0xC), port), None);
            assert_eq!(sm.stats.duplicate_guids, dup);
            assert_eq!(sm.db.by_port_guid(Guid(0xC)), Some((NodeId(3), 0)));
            assert!(sm.db.indexes_agree());
        }
    }

    fn peer(sm: &Sm, n: usize, p: u8) -> Option<(usize, u8)> {
        sm.db.nodes()[n].ports[usize::from(p)].peer
    }

    /// 0xC answers beyond 0xB's port 4 too: nothing is linked before
    /// NodeInfo is asked again by the known link (0xA's port 3).
    fn seen_twice() -> Sm {
        let mut sm = sm();
        let path = DrPath::from_ports(&[1, 2, 4]).unwrap();
        sm.on_node_info(&node_info(0xC), path, Some((2, 4)));
        let r = sm.out.queue.back().expect("asked again");
        assert!(matches!(
            r.purpose,
            Purpose::DupCheck {
                node: 3,
                port: 1,
                from: (2, 4)
            }
        ));
        assert_eq!(r.smp.initial_path().as_slice(), [1, 3]);
        assert_eq!(peer(&sm, 3, 1), Some((1, 3)));
        assert_eq!(peer(&sm, 2, 4), None);
        sm
    }

    #[test]
    fn the_known_port_still_there_keeps_its_link_and_the_second_is_refused() {
        let mut sm = seen_twice();
        sm.on_dup_check(Some(&node_info(0xC)), 3, 1, (2, 4));
        assert_eq!(sm.stats.duplicate_guids, 1);
        assert_eq!(
            (peer(&sm, 3, 1), peer(&sm, 1, 3)),
            (Some((1, 3)), Some((3, 1)))
        );
        assert_eq!(peer(&sm, 2, 4), None);
        assert!(!sm.known_neighbors().contains_key(&(0xB, 4)));
        let e = std::iter::from_fn(|| sm.poll_event()).last();
        assert!(
            matches!(e, Some(SmEvent::DuplicateGuid { guid: Guid(0xC), port: 1, kept, refused })
                if kept == (Guid(0xA), 3) && refused == (Guid(0xB), 4)),
            "{e:?}"
        );
        // An error status also says a port is there.
        let mut sm = seen_twice();
        let mut refused = node_info(0);
        refused.set_status(mad_core::Status::INVALID_FIELD);
        sm.on_dup_check(Some(&refused), 3, 1, (2, 4));
        assert_eq!(sm.stats.duplicate_guids, 1);
        assert_eq!(peer(&sm, 3, 1), Some((1, 3)));
    }

    #[test]
    fn no_answer_or_another_node_there_is_a_moved_cable() {
        for answer in [None, Some(node_info(0xD))] {
            let mut sm = seen_twice();
            sm.on_dup_check(answer.as_ref(), 3, 1, (2, 4));
            assert_eq!(sm.stats.duplicate_guids, 0);
            assert_eq!(
                (peer(&sm, 3, 1), peer(&sm, 2, 4)),
                (Some((2, 4)), Some((3, 1)))
            );
            assert_eq!(peer(&sm, 1, 3), None, "the old end names it no more");
            assert_eq!(sm.known_neighbors().get(&(0xC, 1)), Some(&(0xB, 4)));
            assert!(!sm.known_neighbors().contains_key(&(0xA, 3)));
        }
    }

    /// The check goes out, and after its retries, with no answer, the
    /// port is linked where it answered.
    #[test]
    fn a_check_that_is_never_answered_links_the_port_where_it_is() {
        let mut sm = seen_twice();
        sm.phase = Phase::Done;
        let mut sent = 0;
        let mut now = 0;
        for _ in 0..20 {
            while let Some(t) = sm.poll_transmit(now) {
                let check = t.smp.attribute_id() == AttributeId::NodeInfo
                    && t.smp.initial_path().as_slice() == [1, 3];
                sent += usize::from(check);
            }
            now += 1_000;
            sm.handle_timeout(now);
        }
        assert_eq!(sent, 1 + sm.cfg.retries as usize);
        assert_eq!(peer(&sm, 3, 1), Some((2, 4)));
        assert_eq!(peer(&sm, 1, 3), None);
    }

    #[test]
    fn the_same_link_again_or_a_dead_far_end_is_linked_at_once() {
        let mut sm = sm();
        let n = sm.out.queue.len();
        let path = DrPath::from_ports(&[1, 3]).unwrap();
        sm.on_node_info(&node_info(0xC), path, Some((1, 3)));
        assert_eq!(sm.out.queue.len(), n, "nothing asked again");
        sm.db.node_mut(1).unwrap().alive = false;
        let path = DrPath::from_ports(&[1, 2, 4]).unwrap();
        sm.on_node_info(&node_info(0xC), path, Some((2, 4)));
        assert_eq!(sm.out.queue.len(), n);
        assert_eq!(peer(&sm, 3, 1), Some((2, 4)));
    }
}
