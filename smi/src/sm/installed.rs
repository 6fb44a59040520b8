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
    /// nowhere, reaches another end port, or loops makes it unsure.
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
        // Depth first over "either table" steps: every node reached must
        // lead on (or be `to`), and no step may come back to a node on
        // the current path (a loop some mix would make). Each node is
        // expanded once, so the work is bounded by the subnet's size.
        let (mut on_path, mut done) = (BTreeSet::new(), BTreeSet::new());
        let mut stack = vec![(start, false)];
        while let Some((at, leaving)) = stack.pop() {
            if leaving {
                on_path.remove(&at);
                done.insert(at);
                continue;
            }
            if at == to || done.contains(&at) {
                continue;
            }
            if on_path.contains(&at) {
                return false;
            }
            if !db.brief(NodeId(at)).is_some_and(|b| b.alive && b.switch) {
                return false;
            }
            on_path.insert(at);
            stack.push((at, true));
            let [before, after] = entries(at);
            for out in [Some(before), (after != before).then_some(after)]
                .into_iter()
                .flatten()
            {
                if out == 0 || out == DROP_PORT {
                    return false;
                }
                match db.peer(NodeId(at), out) {
                    Some((n, _)) => stack.push((n.0, false)),
                    None => return false,
                }
            }
        }
        true
    }

    /// Follows the installed tables from node `from` to `lid`, owned by
    /// `to`, through no switch the SM is setting again (`fresh`: back from
    /// the dead, or found reset with its tables gone), whose table it no
    /// longer knows: an SMP through it would be dropped, and be sent by
    /// directed route only after its time-out (a sweep of a fat tree with
    /// a reset spine took seconds so, 200 ms for each window of SMPs).
    pub(super) fn walk_installed(&self, from: usize, lid: u16, to: usize) -> bool {
        if from == to {
            return true;
        }
        let mut unknown = false;
        let end = self.db.walk(NodeId(from), Lid(lid), |h| {
            unknown |= h.brief.switch && self.db.nodes().get(h.node.0).is_some_and(|n| n.fresh);
        });
        end == Some(NodeId(to)) && !unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mad_core::attr::NodeType;

    /// The SM's CA (0, LID 1) on switch A (1) port 1; A port 2 to switch
    /// B (2) port 1; A port 3 to switch C (3) port 1; the target CA D (4,
    /// LID 5) on C port 2. The tables for D: A's before the change
    /// `old_a`, after it 3 (to C); B's before `old_b`, after `new_b` (B's
    /// only cable leads back to A); C's 2 (to D), before and after.
    fn sm_with(old_a: u8, old_b: u8, new_b: u8) -> Sm {
        let mut sm = Sm::new(SmConfig::default());
        let db = &mut sm.db;
        let kinds = [
            (NodeType::ChannelAdapter, 1),
            (NodeType::Switch, 3),
            (NodeType::Switch, 2),
            (NodeType::Switch, 2),
            (NodeType::ChannelAdapter, 1),
        ];
        for (i, (kind, ports)) in kinds.into_iter().enumerate() {
            assert_eq!(
                db.add_node(SmNode::bare(kind, 0x10 + i as u64, 0, ports)),
                i
            );
            db.set_lid(i, i as u16 + 1);
        }
        for (a, pa, b, pb) in [(0, 1, 1, 1), (1, 2, 2, 1), (1, 3, 3, 1), (3, 2, 4, 1)] {
            db.port_mut(a, pa).unwrap().peer = Some((b, pb));
            db.port_mut(b, pb).unwrap().peer = Some((a, pa));
        }
        // Switches A, B, C are routing-graph switches 0, 1, 2. Every
        // table sends LID 1 (the SM) back the way it came.
        db.switch_index = vec![1, 2, 3];
        db.switch_of = vec![usize::MAX, 0, 1, 2, usize::MAX];
        let table = |d: u8, own: u16, back: u8| {
            let mut t = vec![DROP_PORT; 6];
            t[1] = back;
            t[usize::from(own)] = 0;
            t[5] = d;
            t
        };
        db.lfts = vec![table(3, 2, 1), table(new_b, 3, 1), table(2, 4, 1)];
        db.old_lfts = [
            (1, table(old_a, 2, 1)),
            (2, table(old_b, 3, 1)),
            (3, table(2, 4, 1)),
        ]
        .into_iter()
        .collect();
        sm
    }

    #[test]
    fn a_route_is_settled_only_where_every_mix_of_tables_arrives() {
        // Old A → C, new A → C: the same; B is not on the way.
        assert!(sm_with(3, 1, 1).route_settled(0, 5, 4));
        // Old A → B, B → A: with A's old entry and B's, a packet may go
        // A → B → A … (the new tables alone would reach D): not settled.
        assert!(!sm_with(2, 1, 1).route_settled(0, 5, 4));
        // Old A → B and B drops D: not settled.
        assert!(!sm_with(2, DROP_PORT, 1).route_settled(0, 5, 4));
        // The way back to the SM: every table sends LID 1 home.
        assert!(sm_with(2, 1, 1).route_settled(4, 1, 0));
        // A switch with no table before the change (new, or back from
        // the dead) drops everything until it is written.
        let mut sm = sm_with(3, 1, 1);
        sm.db.old_lfts.remove(&3);
        assert!(!sm.route_settled(0, 5, 4));
    }
}
