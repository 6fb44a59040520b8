//! The tables installed in the switches, as the SM last distributed them:
//! walks over them decide whether an SMP to a node may go LID-routed.

use super::*;

impl Sm {
    /// True when an SMP to `node` would go LID-routed now: the node has a
    /// LID and the installed tables carry an SMP from the SM to it and the
    /// response back, over links the SM knows are up.
    pub fn reachable_by_lid(&self, node: usize) -> bool {
        self.db
            .nodes()
            .get(node)
            .is_some_and(|n| self.up && n.alive && !n.fresh && n.lid != 0)
            && self.lid_route_ok(node)
    }

    pub(super) fn lid_route_ok(&self, node: usize) -> bool {
        let sm_lid = self.db.nodes().first().map_or(0, |n| n.lid);
        let target = self.db.nodes()[node].lid;
        self.walk_installed(0, target, node) && self.walk_installed(node, sm_lid, 0)
    }

    /// Follows the installed tables from node `from` to `lid`, owned by `to`.
    pub(super) fn walk_installed(&self, from: usize, lid: u16, to: usize) -> bool {
        from == to || self.db.walk(NodeId(from), Lid(lid), |_| {}) == Some(NodeId(to))
    }
}
