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
        let idx = match self.db.by_guid(ni.node_guid).map(|n| n.0) {
            Some(i) => {
                self.revive(i, &path);
                i
            }
            None => {
                let nports = usize::from(ni.num_ports);
                let i = self.db.add_node(SmNode {
                    info: ni,
                    path: path.clone(),
                    ports: vec![SmPort::default(); nports + 1],
                    switch_info: None,
                    lid: 0,
                    vfs: Vec::new(),
                    description: None,
                    alive: true,
                    fresh: self.up,
                });
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
            self.learn_link(parent, pport, idx, port);
            if let Some(mut pp) = self.db.port_mut(parent, pport) {
                pp.peer = Some((idx, port));
            }
            if let Some(mut np) = self.db.port_mut(idx, port) {
                np.peer = Some((parent, pport));
            }
        }
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
        p.info = Some(pi);
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
