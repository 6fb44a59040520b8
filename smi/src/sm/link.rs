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
            pi.link_width_enabled = LinkWidth::empty();
            pi.link_speed_enabled = LinkSpeed::empty();
            pi.m_key = self.cfg.m_key;
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
    pub(super) fn activate(&mut self, state: PortState) {
        let from = if state == PortState::Armed {
            PortState::Init
        } else {
            PortState::Armed
        };
        for (i, port) in self.linked_ports() {
            let n = &self.db.nodes()[i];
            let Some(mut pi) = n.ports[usize::from(port)].info else {
                continue;
            };
            if pi.port_state != from {
                continue;
            }
            if !n.is_switch() || port == 0 {
                pi.lid = Lid(n.lid);
                pi.lmc = self.db.lmc_of(i);
                pi.master_sm_lid = self.sm_lid();
            }
            if let Some(on) = self.pkey_enforcement(i, port) {
                pi.partition_enforcement_inbound = on;
                pi.partition_enforcement_outbound = on;
                self.db.pkeys.sent.insert((i, port), on);
            }
            if let Some(h) = self.qos_high_limit(i, port) {
                pi.vl_high_limit = h;
            }
            pi.m_key = self.cfg.m_key;
            pi.subnet_time_out = self.cfg.subnet_time_out;
            pi.port_state = state;
            pi.port_physical_state = PortPhysicalState::NoChange;
            pi.link_width_enabled = LinkWidth::empty();
            pi.link_speed_enabled = LinkSpeed::empty();
            self.set_node(i, &pi, u32::from(port), Purpose::SetState { node: i, port });
        }
    }
}
