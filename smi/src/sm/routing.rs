//! Min-hop routing balanced over equal-cost ports, as OpenSM's minhop engine
//! does: for every switch and every destination LID, the egress port on a
//! shortest path whose port carries the fewest routes so far.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use mad_core::attr::forwarding::DROP_PORT;

/// What a port of a switch leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortTo {
    /// Nothing (down or unconnected).
    None,
    /// Another switch: its index and the port the cable enters it by.
    Switch(usize, u8),
    /// A channel adapter port owning these LIDs (base, count).
    Ca(u16, u16),
}

/// The switch graph the router works on.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Per switch, per port (index 0 unused): what the port leads to.
    pub ports: Vec<Vec<PortTo>>,
    /// Per switch, its own LID (port 0).
    pub lid: Vec<u16>,
    /// LIDs outside the ranges of [`PortTo::Ca`] (a VM's LID that moved to
    /// another hypervisor): (LID, switch, port at that switch).
    pub extra: Vec<(u16, usize, u8)>,
    /// The switches a site names as up*/down* and fat-tree roots (OpenSM's
    /// `root_guid_file`); empty: the engine picks them
    /// ([`super::updn::roots`]).
    pub roots: Vec<usize>,
    /// LIDs routed first, in this order (OpenSM's
    /// `guid_routing_order_file`: the ports a site names, each port's
    /// LIDs in ascending order), so that min-hop and up*/down* spread
    /// them over a switch's equal-cost ports before any other; empty:
    /// the engine's own order.
    pub order: Vec<u16>,
}

/// Every destination LID with the switch it hangs off and the port there,
/// in (switch, port, LID) order.
pub fn destinations(g: &Graph) -> Vec<(u16, usize, u8)> {
    let mut dests = Vec::new();
    for (s, ports) in g.ports.iter().enumerate() {
        if g.lid[s] != 0 {
            dests.push((g.lid[s], s, 0));
        }
        for (p, t) in ports.iter().enumerate() {
            if let PortTo::Ca(base, count) = *t {
                for l in base..base.saturating_add(count) {
                    dests.push((l, s, p as u8));
                }
            }
        }
    }
    if !g.extra.is_empty() {
        dests.extend_from_slice(&g.extra);
        dests.sort_unstable_by_key(|&(l, s, p)| (s, p, l));
    }
    dests
}

/// Moves the destinations whose LID `order` names to the front, in
/// `order`'s order; the rest keep theirs.
pub fn order_first(dests: &mut [(u16, usize, u8)], order: &[u16]) {
    if order.is_empty() {
        return;
    }
    let mut rank = alloc::collections::BTreeMap::new();
    for (i, &lid) in order.iter().enumerate() {
        rank.entry(lid).or_insert(i);
    }
    // A stable sort: the named first by their rank, the rest after, as
    // they were.
    dests.sort_by_key(|d| rank.get(&d.0).copied().unwrap_or(usize::MAX));
}

/// Per LID, its offset into the `2^LMC` LIDs of the port that holds it: a
/// CA port's range, or an enhanced switch port 0's (the LIDs of
/// [`Graph::extra`] above the switch's own, at port 0). 0 for a base LID
/// and a VF's; the vector runs to the highest such LID.
pub fn lid_offsets(g: &Graph) -> Vec<u16> {
    let mut off = Vec::new();
    let mut put = |l: u16, k: u16| {
        let l = usize::from(l);
        if off.len() <= l {
            off.resize(l + 1, 0);
        }
        off[l] = k;
    };
    for t in g.ports.iter().flatten() {
        if let PortTo::Ca(base, count) = *t {
            for k in 1..count {
                put(base.saturating_add(k), k);
            }
        }
    }
    for &(l, s, p) in &g.extra {
        let base = g.lid.get(s).copied().unwrap_or(0);
        if p == 0 && base != 0 && l > base {
            put(l, l - base);
        }
    }
    off
}

/// Per switch, its hops from the nearest switch with a CA cabled to it
/// (a fat tree's level: leaves 0); `u16::MAX` where none is reachable.
pub fn levels(g: &Graph) -> Vec<u16> {
    let leaves: Vec<usize> = (0..g.ports.len())
        .filter(|&s| g.ports[s].iter().any(|t| matches!(t, PortTo::Ca(..))))
        .collect();
    hops_from_any(g, &leaves)
}

/// The port for the LID at offset `k` (> 0) into a CA port's `2^LMC` LIDs,
/// at a switch of level `level` whose equal-cost ports for that
/// destination are `candidates` (in port order) and whose entry for the
/// base LID is `base_port`: the base's port turned by the level's digit of
/// `k` (`(k / m^level) % m` for `m` candidates), so that the LIDs of a
/// port leave its leaf by different links and part again a level up, as
/// d-mod-k spreads destinations. `None` when the base's port is not a
/// candidate (the caller then balances by load).
pub fn lmc_spread(candidates: &[u8], base_port: u8, k: u16, level: u16) -> Option<u8> {
    let m = candidates.len();
    let i0 = candidates.iter().position(|&p| p == base_port)?;
    let stride = m.checked_pow(u32::from(level)).unwrap_or(usize::MAX).max(1);
    Some(candidates[(i0 + (usize::from(k) / stride) % m) % m])
}

/// Hop distances from switch `src` to every switch of `g`, by
/// breadth-first search over the switch-to-switch cables (`u16::MAX` =
/// unreachable; `src` itself is 0).
pub fn hops_from(g: &Graph, src: usize) -> Vec<u16> {
    hops_from_any(g, &[src])
}

/// Hop distances from the nearest of the switches `srcs` to every switch
/// of `g` (`u16::MAX` = unreachable; indexes out of range are ignored).
pub fn hops_from_any(g: &Graph, srcs: &[usize]) -> Vec<u16> {
    let mut d = vec![u16::MAX; g.ports.len()];
    let mut q = VecDeque::new();
    for &s in srcs {
        if let Some(x) = d.get_mut(s) {
            *x = 0;
            q.push_back(s);
        }
    }
    while let Some(s) = q.pop_front() {
        for t in &g.ports[s] {
            if let PortTo::Switch(m, _) = *t {
                if d[m] == u16::MAX {
                    d[m] = d[s] + 1;
                    q.push_back(m);
                }
            }
        }
    }
    d
}

/// Hop distances between all switch pairs (`u16::MAX` = unreachable):
/// `distances(g)[a][b]` is [`hops_from`]`(g, a)[b]`.
pub fn distances(g: &Graph) -> Vec<Vec<u16>> {
    (0..g.ports.len()).map(|src| hops_from(g, src)).collect()
}

/// Linear forwarding tables: `lft[switch][lid]` = egress port, 0xFF where
/// unrouted. `max_lid` sizes the tables.
pub fn minhop(g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
    let mut lft = vec![vec![DROP_PORT; usize::from(max_lid) + 1]; g.ports.len()];
    minhop_into(g, &mut lft, &distances(g), |_| true);
    lft
}

/// Fills `lft` with min-hop entries for the destinations `want` accepts
/// (given as (LID, switch, port at that switch)), balancing each switch's
/// ports by the routes they carry.
pub fn minhop_into(
    g: &Graph,
    lft: &mut [Vec<u8>],
    dist: &[Vec<u16>],
    want: impl Fn(&(u16, usize, u8)) -> bool,
) {
    let n = g.ports.len();
    // Destinations: every LID with the switch it hangs off and the port there.
    let mut dests = destinations(g);
    dests.sort_unstable();
    dests.retain(|d| want(d));
    order_first(&mut dests, &g.order);
    // Under LMC, the LIDs above a port's base follow its base's route,
    // turned level by level ([`lmc_spread`]).
    let offsets = lid_offsets(g);
    let level = if offsets.is_empty() {
        Vec::new()
    } else {
        levels(g)
    };
    let mut candidates = Vec::new();
    for s in 0..n {
        let mut load = vec![0u32; g.ports[s].len()];
        for &(lid, t, tport) in &dests {
            let port = if s == t {
                tport
            } else {
                let want = dist[s][t];
                if want == u16::MAX {
                    continue;
                }
                let k = offsets.get(usize::from(lid)).copied().unwrap_or(0);
                let spread = (k > 0)
                    .then(|| {
                        candidates.clear();
                        for (p, to) in g.ports[s].iter().enumerate() {
                            if let PortTo::Switch(m, _) = *to {
                                if dist[m][t] == want - 1 {
                                    candidates.push(p as u8);
                                }
                            }
                        }
                        let base = lft[s].get(usize::from(lid - k)).copied()?;
                        lmc_spread(&candidates, base, k, level[s])
                    })
                    .flatten();
                let mut best: Option<usize> = spread.map(usize::from);
                if best.is_none() {
                    for (p, to) in g.ports[s].iter().enumerate() {
                        if let PortTo::Switch(m, _) = *to {
                            if dist[m][t] == want - 1 && best.is_none_or(|b| load[p] < load[b]) {
                                best = Some(p);
                            }
                        }
                    }
                }
                match best {
                    Some(p) => p as u8,
                    None => continue,
                }
            };
            if let Some(slot) = lft[s].get_mut(usize::from(lid)) {
                *slot = port;
                if let Some(l) = load.get_mut(usize::from(port)) {
                    *l += 1;
                }
            }
        }
    }
}

/// Where a switch already forwards a destination on a shortest path (a
/// table a new master read back), keeps that port instead of the one just
/// computed: a takeover then changes no entry that min-hop would accept.
/// `found(switch, lid)` is the port the switch holds; returns the entries
/// changed back.
pub fn keep_shortest(
    g: &Graph,
    lft: &mut [Vec<u8>],
    found: impl Fn(usize, u16) -> Option<u8>,
) -> usize {
    let dist = distances(g);
    let dests = destinations(g);
    let mut kept = 0;
    for (s, table) in lft.iter_mut().enumerate() {
        for &(lid, t, _) in &dests {
            let (Some(p), Some(slot)) = (found(s, lid), table.get_mut(usize::from(lid))) else {
                continue;
            };
            if s == t || *slot == p || dist[s][t] == u16::MAX {
                continue;
            }
            if let Some(PortTo::Switch(m, _)) = g.ports[s].get(usize::from(p)) {
                if dist[*m][t].checked_add(1) == Some(dist[s][t]) {
                    *slot = p;
                    kept += 1;
                }
            }
        }
    }
    kept
}

/// Gives every switch an entry for every destination it can reach but has
/// none for, by a shortest path: on a degraded tree up*/down* cannot route
/// a top switch down to a leaf it lost its cable to. Those entries serve
/// only traffic that starts at that switch (no other switch routes through
/// it for the destination), so they add no dependency that data routes
/// can close into a cycle; `deadlock_free` checks it anyway.
pub fn fill_gaps(g: &Graph, lft: &mut [Vec<u8>]) {
    let dist = distances(g);
    for (lid, t, tport) in destinations(g) {
        let l = usize::from(lid);
        for s in 0..g.ports.len() {
            if lft[s].get(l).is_none_or(|&p| p != DROP_PORT) || dist[s][t] == u16::MAX {
                continue;
            }
            let port = if s == t {
                Some(tport)
            } else {
                g.ports[s].iter().enumerate().find_map(|(p, to)| match *to {
                    PortTo::Switch(m, _) if dist[m][t] + 1 == dist[s][t] => Some(p as u8),
                    _ => None,
                })
            };
            if let Some(p) = port {
                lft[s][l] = p;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Switches 0 – 1 – 2 in a line (port 1 left, port 2 right), 3 alone.
    fn line() -> Graph {
        use PortTo::{None as No, Switch as Sw};
        Graph {
            ports: vec![
                vec![No, No, Sw(1, 1)],
                vec![No, Sw(0, 2), Sw(2, 1)],
                vec![No, Sw(1, 2), No],
                vec![No, No, No],
            ],
            lid: vec![1, 2, 3, 4],
            extra: Vec::new(),
            roots: Vec::new(),
            order: Vec::new(),
        }
    }

    #[test]
    fn a_found_port_is_kept_only_on_a_shortest_path() {
        use PortTo::{None as No, Switch as Sw};
        // A square: 0 –1/2– 1, 0 –2/1– 2 (ports 1,2), 1 –3/3– 3, 2 –3/2– 3.
        let g = Graph {
            ports: vec![
                vec![No, Sw(1, 1), Sw(2, 1)],
                vec![No, Sw(0, 1), No, Sw(3, 3)],
                vec![No, Sw(0, 2), No, Sw(3, 2)],
                vec![No, No, Sw(2, 3), Sw(1, 3)],
            ],
            lid: vec![1, 2, 3, 4],
            extra: Vec::new(),
            roots: Vec::new(),
            order: Vec::new(),
        };
        let mut lft = minhop(&g, 4);
        let computed = lft[0][4];
        let other = if computed == 1 { 2 } else { 1 };
        // Switch 0 holds the other way to LID 4 (as long): kept. It holds
        // port 2 for LID 2 (a detour through 2 and 3): not kept.
        let found = |s: usize, lid: u16| match (s, lid) {
            (0, 4) => Some(other),
            (0, 2) => Some(2),
            _ => None,
        };
        assert_eq!(keep_shortest(&g, &mut lft, found), 1);
        assert_eq!(lft[0][4], other);
        assert_eq!(lft[0][2], 1);
    }

    #[test]
    fn hops_from_counts_switch_hops() {
        let g = line();
        assert_eq!(hops_from(&g, 0), [0, 1, 2, u16::MAX]);
        assert_eq!(hops_from(&g, 2), [2, 1, 0, u16::MAX]);
        assert_eq!(hops_from(&g, 3), [u16::MAX, u16::MAX, u16::MAX, 0]);
        assert_eq!(hops_from_any(&g, &[0, 2]), [0, 1, 0, u16::MAX]);
        let d = distances(&g);
        for (s, row) in d.iter().enumerate() {
            assert_eq!(*row, hops_from(&g, s));
        }
    }
}
