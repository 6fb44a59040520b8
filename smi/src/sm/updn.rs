//! Up*/down* routing (Schroeder et al., Autonet; OpenSM's updn) and the
//! fat-tree engine built on it. Switches are ranked by hop distance from
//! the roots; a cable leads "up" towards a lower rank (ties broken by
//! switch index). Routes to each destination form a tree grown outwards
//! from it in which a cable taken downwards is only ever followed by more
//! downward cables, so every route is up*down* and the channel dependency
//! graph has no cycle.

use super::routing::{hops_from_any, Graph, PortTo};
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use mad_core::attr::forwarding::DROP_PORT;

/// Ranks: hop distance from the root switches (`u32::MAX`: unreachable).
pub fn ranks(g: &Graph, roots: &[usize]) -> Vec<u32> {
    hops_from_any(g, roots)
        .into_iter()
        .map(|d| {
            if d == u16::MAX {
                u32::MAX
            } else {
                u32::from(d)
            }
        })
        .collect()
}

/// The roots up*/down* and fat-tree routing start from: the switches the
/// site named ([`Graph::roots`], OpenSM's `root_guid_file`), else
/// [`auto_roots`].
pub fn roots(g: &Graph) -> Vec<usize> {
    let named: Vec<usize> = (g.roots.iter().copied())
        .filter(|&s| s < g.ports.len())
        .collect();
    if named.is_empty() {
        auto_roots(g)
    } else {
        named
    }
}

/// Roots as OpenSM would pick them without a root file: the switches
/// farthest from the switches that have CAs (the top of a tree); where every
/// switch has CAs, the single most central switch.
pub fn auto_roots(g: &Graph) -> Vec<usize> {
    let n = g.ports.len();
    if n == 0 {
        return Vec::new();
    }
    let leaves: Vec<usize> = (0..n)
        .filter(|&s| g.ports[s].iter().any(|t| matches!(t, PortTo::Ca(..))))
        .collect();
    let from_leaves = ranks(g, &leaves);
    let top = from_leaves
        .iter()
        .copied()
        .filter(|&d| d != u32::MAX)
        .max()
        .unwrap_or(0);
    if top > 0 {
        return (0..n).filter(|&s| from_leaves[s] == top).collect();
    }
    // Every switch has CAs: the switch of least eccentricity.
    let mut best = (u32::MAX, 0);
    for s in 0..n {
        let r = ranks(g, &[s]);
        let ecc = r
            .iter()
            .copied()
            .filter(|&d| d != u32::MAX)
            .max()
            .unwrap_or(0);
        if ecc < best.0 {
            best = (ecc, s);
        }
    }
    vec![best.1]
}

/// Whether the cable from `a` to `b` leads up.
fn is_up(rank: &[u32], a: usize, b: usize) -> bool {
    rank[b] < rank[a] || (rank[b] == rank[a] && b < a)
}

/// How to choose among equally short legal ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The port carrying the fewest routes so far (OpenSM's updn balance).
    LeastLoaded,
    /// Upward ports spread by destination index (d-mod-k, as fat-tree engines do).
    DestinationModulo,
}

/// Up*/down* forwarding tables from `roots` (see the module docs).
///
/// Switch LIDs that no up*/down* route reaches — in a fat tree, one top
/// switch from another — are completed with min-hop entries, where
/// OpenSM's up*/down* leaves them unreachable: traffic to a switch's own
/// LID is management traffic only (SMPs on VL15, which has no flow
/// control and so cannot deadlock, and a few GMPs to the switch's
/// agents), so the deadlock check covers the data traffic to CA LIDs.
/// Every entry OpenSM's up*/down* sets, ibkit's sets to the same port
/// (`dumps_ibsim both_sms_route_min_hop_port_for_port`).
/// A completed entry only leads to a switch closer by min-hop, and the
/// up*/down* route of a reached switch never passes an unreached one, so no
/// route loops.
pub fn route(g: &Graph, max_lid: u16, roots: &[usize], choice: Choice) -> Vec<Vec<u8>> {
    let n = g.ports.len();
    let rank = ranks(g, roots);
    let max_rank = rank
        .iter()
        .copied()
        .filter(|&r| r != u32::MAX)
        .max()
        .unwrap_or(0);
    let mut dests = super::routing::destinations(g);
    super::routing::order_first(&mut dests, &g.order);
    let mut lft = vec![vec![DROP_PORT; usize::from(max_lid) + 1]; n];
    let mut load: Vec<Vec<u32>> = g.ports.iter().map(|p| vec![0u32; p.len()]).collect();
    let mut reached = vec![false; n];
    let mut down_only = vec![false; n];
    // Per switch, this level's legal options: (port, leads down).
    let mut opts: Vec<Vec<(u8, bool)>> = vec![Vec::new(); n];
    let mut touched: Vec<usize> = Vec::new();
    let mut frontier = Vec::new();
    let mut next = Vec::new();
    let mut unreached_switch_dests = Vec::new();
    // Under LMC, the LIDs above a port's base follow its base's route,
    // turned level by level (`routing::lmc_spread`).
    let offsets = super::routing::lid_offsets(g);
    let level = if offsets.is_empty() {
        Vec::new()
    } else {
        super::routing::levels(g)
    };
    let mut candidates = Vec::new();
    let mut picker = super::routing::Picker::new(&g.choice);
    for (di, &(lid, t, tport)) in dests.iter().enumerate() {
        let l = usize::from(lid);
        if l > usize::from(max_lid) {
            continue;
        }
        let k = offsets.get(l).copied().unwrap_or(0);
        reached.iter_mut().for_each(|r| *r = false);
        reached[t] = true;
        down_only[t] = true;
        lft[t][l] = tport;
        frontier.clear();
        frontier.push(t);
        let mut count = 1;
        while !frontier.is_empty() {
            next.clear();
            for &v in &frontier {
                for to in &g.ports[v] {
                    let PortTo::Switch(u, p) = *to else { continue };
                    if reached[u] {
                        continue;
                    }
                    // A packet at u would leave by p to v.
                    let up = is_up(&rank, u, v);
                    if !up && !down_only[v] {
                        continue; // down followed by up: illegal
                    }
                    if opts[u].is_empty() {
                        touched.push(u);
                    }
                    opts[u].push((p, !up));
                }
            }
            for &u in &touched {
                let o = &mut opts[u];
                // Prefer going down: it keeps u usable by more switches above.
                let any_down = o.iter().any(|c| c.1);
                o.retain(|c| c.1 == any_down);
                o.sort_unstable();
                let pick = match choice {
                    Choice::DestinationModulo if !any_down && o.len() > 1 => {
                        // d-mod-k: the height above the leaves picks the digit.
                        let k = o.len();
                        let height = max_rank.saturating_sub(rank[u]);
                        let div = k.saturating_pow(height).max(1);
                        o[(di / div) % k]
                    }
                    _ => {
                        candidates.clear();
                        candidates.extend(o.iter().map(|c| c.0));
                        let spread = (k > 0 && o.len() > 1)
                            .then(|| {
                                let base = lft[u].get(l - usize::from(k)).copied()?;
                                super::routing::lmc_spread(&candidates, base, k, level[u])
                            })
                            .flatten();
                        let p = spread.or_else(|| picker.pick(u, &candidates, &load[u], lid, k));
                        *o.iter().find(|c| Some(c.0) == p).unwrap_or(&o[0])
                    }
                };
                reached[u] = true;
                down_only[u] = pick.1;
                lft[u][l] = pick.0;
                // As OpenSM's port profile (its up*/down* fills its tables
                // through min-hop's): a route to a switch's own LID counts
                // only when told to, and an ignored port never.
                let counted = (tport != 0 || g.choice.count_switch_lids)
                    && !(g.choice.ignored.get(u)).is_some_and(|i| i.contains(&pick.0));
                if counted {
                    load[u][usize::from(pick.0)] += 1;
                }
                next.push(u);
                o.clear();
                count += 1;
            }
            touched.clear();
            core::mem::swap(&mut frontier, &mut next);
        }
        if count < n && tport == 0 {
            unreached_switch_dests.push(l);
        }
    }
    if !unreached_switch_dests.is_empty() {
        // Hops unweighed: only the min-hop engine reads hop weights.
        let mut mh = vec![vec![DROP_PORT; usize::from(max_lid) + 1]; n];
        let dist = super::routing::Dist::Hops(super::routing::distances(g));
        super::routing::minhop_into(g, &mut mh, &dist, &[], |_| true);
        for l in unreached_switch_dests {
            for s in 0..n {
                if lft[s][l] == DROP_PORT {
                    lft[s][l] = mh[s][l];
                }
            }
        }
    }
    lft
}

/// The fat-tree engine: for each CA destination, the switches above its
/// leaf route down towards it, every other switch routes up, spreading
/// destinations over its up ports digit by digit (d-mod-k). Switch LIDs get
/// min-hop routes (management traffic only, see [`route`]). Meant for
/// fat trees, where any upward path meets an ancestor of every leaf; on
/// other graphs use [`route`].
pub fn ftree(g: &Graph, max_lid: u16, roots: &[usize]) -> Vec<Vec<u8>> {
    let n = g.ports.len();
    let rank = ranks(g, roots);
    let max_rank = rank
        .iter()
        .copied()
        .filter(|&r| r != u32::MAX)
        .max()
        .unwrap_or(0);
    let up: Vec<Vec<u8>> = (0..n)
        .map(|s| {
            g.ports[s]
                .iter()
                .enumerate()
                .filter_map(|(p, t)| match *t {
                    PortTo::Switch(v, _) if rank[v] < rank[s] => Some(p as u8),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let mut lft = vec![vec![DROP_PORT; usize::from(max_lid) + 1]; n];
    let mut above = vec![false; n];
    let mut frontier = Vec::new();
    let mut next = Vec::new();
    let mut marked = Vec::new();
    let dests = super::routing::destinations(g);
    let mut ca_index = 0usize;
    for &(lid, t, tport) in &dests {
        let l = usize::from(lid);
        if tport == 0 || l > usize::from(max_lid) {
            continue; // switch LIDs: min-hop below
        }
        // The leaf and every switch above it route down.
        lft[t][l] = tport;
        above[t] = true;
        marked.push(t);
        frontier.clear();
        frontier.push(t);
        while !frontier.is_empty() {
            next.clear();
            for &v in &frontier {
                for to in &g.ports[v] {
                    if let PortTo::Switch(u, p) = *to {
                        if !above[u] && rank[u] < rank[v] {
                            above[u] = true;
                            marked.push(u);
                            lft[u][l] = p;
                            next.push(u);
                        }
                    }
                }
            }
            core::mem::swap(&mut frontier, &mut next);
        }
        // Everyone else goes up, on the port the destination's digit picks.
        for s in 0..n {
            if above[s] {
                continue;
            }
            let ups = &up[s];
            if ups.is_empty() {
                continue;
            }
            let k = ups.len();
            let height = max_rank.saturating_sub(rank[s]);
            let div = k.saturating_pow(height).max(1);
            lft[s][l] = ups[(ca_index / div) % k];
        }
        for &m in &marked {
            above[m] = false;
        }
        marked.clear();
        ca_index += 1;
    }
    let dist = super::routing::Dist::Hops(super::routing::distances(g));
    super::routing::minhop_into(g, &mut lft, &dist, &[], |d| d.2 == 0);
    lft
}

/// True when the channel dependency graph of the routes to CA LIDs has no
/// cycle, so data traffic cannot deadlock. (Routes to switch LIDs carry only
/// management traffic, see [`route`].)
pub fn deadlock_free(g: &Graph, lft: &[Vec<u8>]) -> bool {
    // Channels: (switch, egress port) towards another switch.
    let n = g.ports.len();
    let mut id = Vec::with_capacity(n);
    let mut count = 0usize;
    for ports in &g.ports {
        let mut row = vec![usize::MAX; ports.len()];
        for (p, t) in ports.iter().enumerate() {
            if matches!(t, PortTo::Switch(..)) {
                row[p] = count;
                count += 1;
            }
        }
        id.push(row);
    }
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); count];
    let ca_lids: Vec<usize> = super::routing::destinations(g)
        .into_iter()
        .filter(|d| d.2 != 0)
        .map(|d| usize::from(d.0))
        .collect();
    for a in 0..n {
        for &l in &ca_lids {
            let pa = usize::from(lft[a][l]);
            let Some(PortTo::Switch(b, _)) = g.ports[a].get(pa).copied() else {
                continue;
            };
            let pb = usize::from(lft[b][l]);
            if let Some(PortTo::Switch(..)) = g.ports[b].get(pb) {
                let (from, to) = (id[a][pa], id[b][pb]);
                if edges[from].last() != Some(&to) {
                    edges[from].push(to);
                }
            }
        }
    }
    for e in edges.iter_mut() {
        e.sort_unstable();
        e.dedup();
    }
    // Kahn's algorithm.
    let mut indeg = vec![0u32; count];
    for e in &edges {
        for &t in e {
            indeg[t] += 1;
        }
    }
    let mut q: VecDeque<usize> = (0..count).filter(|&c| indeg[c] == 0).collect();
    let mut seen = 0;
    while let Some(c) = q.pop_front() {
        seen += 1;
        for &t in &edges[c] {
            indeg[t] -= 1;
            if indeg[t] == 0 {
                q.push_back(t);
            }
        }
    }
    seen == count
}
