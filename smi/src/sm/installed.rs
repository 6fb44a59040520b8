//! The tables installed in the switches, as the SM last distributed them:
//! walks over them decide whether an SMP to a node may go LID-routed.

use super::*;

impl Sm {
    /// The port a switch forwards `lid` to with the tables it has now
    /// (those the SM last distributed to it).
    pub(super) fn installed_port(&self, node: usize, lid: u16) -> u8 {
        self.db.installed_port(NodeId(node), Lid(lid))
    }

    /// True when an SMP to `node` would go LID-routed now: the node has a
    /// LID and the installed tables carry an SMP from the SM to it and the
    /// response back, over links the SM knows are up.
    pub fn reachable_by_lid(&self, node: usize) -> bool {
        self.db
            .nodes
            .get(node)
            .is_some_and(|n| self.up && n.alive && !n.fresh && n.lid != 0)
            && self.lid_route_ok(node)
    }

    pub(super) fn lid_route_ok(&self, node: usize) -> bool {
        let sm_lid = self.db.nodes.first().map_or(0, |n| n.lid);
        let target = self.db.nodes[node].lid;
        self.walk_installed(0, target, node) && self.walk_installed(node, sm_lid, 0)
    }

    /// Follows the installed tables from node `from` to `lid`, owned by `to`.
    pub(super) fn walk_installed(&self, from: usize, lid: u16, to: usize) -> bool {
        if from == to {
            return true;
        }
        let mut at = from;
        if !self.db.nodes[at].is_switch() {
            let port = usize::from(self.db.nodes[at].info.local_port_num);
            match self.db.nodes[at].ports.get(port).and_then(|p| p.peer) {
                Some((m, _)) => at = m,
                None => return false,
            }
        }
        for _ in 0..=self.db.nodes.len() {
            if at == to {
                return true;
            }
            if !self.db.nodes[at].is_switch() || !self.db.nodes[at].alive {
                return false;
            }
            let p = self.installed_port(at, lid);
            if p == 0 {
                return self.db.nodes[at].lid == lid;
            }
            match self.db.nodes[at]
                .ports
                .get(usize::from(p))
                .and_then(|x| x.peer)
            {
                Some((m, _)) => at = m,
                None => return false,
            }
        }
        false
    }
}
