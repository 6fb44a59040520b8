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
        if self.db.old_lfts.is_empty() {
            return self.walk_installed(0, target, node) && self.walk_installed(node, sm_lid, 0);
        }
        // A change is going in: each switch holds its table from before
        // or the new one (block by block, as the Sets land), so a route is
        // sure only where every mix of the two reaches the node and back.
        self.route_settled(0, target, node) && self.route_settled(node, sm_lid, 0)
    }

    /// Whether a packet from `from` to `lid` (held by `to`) reaches `to`
    /// whichever table each switch on the way holds while a change goes
    /// in: the one from before (none, so it drops, for a switch new or
    /// back from the dead: freshly powered) or the new one. Every mix of
    /// the two is followed (a route differs in a few switches, so there
    /// are few); a branch that drops, meets a dead node or a cable to
    /// nowhere, reaches another end port, or runs longer than the subnet
    /// has nodes (a loop) makes it unsure.
    fn route_settled(&self, from: usize, lid: u16, to: usize) -> bool {
        if from == to {
            return true;
        }
        let db = &self.db;
        let at_lid = usize::from(lid);
        let entries = |n: usize| {
            let before = (db.old_lfts.get(&n))
                .and_then(|t| t.get(at_lid).copied())
                .unwrap_or(DROP_PORT);
            let after = (db.switch_of.get(n).and_then(|&k| db.lfts.get(k)))
                .and_then(|t| t.get(at_lid).copied())
                .unwrap_or(DROP_PORT);
            [before, after]
        };
        let Some(b) = db.brief(NodeId(from)) else {
            return false;
        };
        let start = if b.switch {
            from
        } else {
            match db.peer(NodeId(from), b.own_port) {
                Some((n, _)) => n.0,
                None => return false,
            }
        };
        let limit = db.nodes().len();
        let mut branches = vec![(start, 0usize)];
        while let Some((at, depth)) = branches.pop() {
            if at == to {
                continue;
            }
            if !db.brief(NodeId(at)).is_some_and(|b| b.alive && b.switch) {
                return false;
            }
            if depth > limit {
                return false;
            }
            let [before, after] = entries(at);
            for out in [Some(before), (after != before).then_some(after)]
                .into_iter()
                .flatten()
            {
                if out == 0 || out == DROP_PORT {
                    return false;
                }
                match db.peer(NodeId(at), out) {
                    Some((n, _)) => branches.push((n.0, depth + 1)),
                    None => return false,
                }
            }
        }
        true
    }

    /// Follows the installed tables from node `from` to `lid`, owned by `to`.
    pub(super) fn walk_installed(&self, from: usize, lid: u16, to: usize) -> bool {
        from == to || self.db.walk(NodeId(from), Lid(lid), |_| {}) == Some(NodeId(to))
    }
}
