//! Up*/down* routing (Schroeder et al., Autonet; OpenSM's updn) and the
//! fat-tree engine built on it. Switches are ranked by hop distance from
//! the roots; a cable leads "up" towards a lower rank (ties broken by
//! GUID in [`route_as_opensm`], by switch index in [`route_tree`]). A
//! route may climb and then descend, never descend and climb again, so
//! the channel dependency graph of the routes has no cycle. [`route`]
//! gives OpenSM's tables where they keep that rule and [`route_tree`]'s
//! where they would not (OpenSM's search keeps one direction per switch,
//! which is not always enough).

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

/// The id OpenSM's up*/down* breaks rank ties by: the node GUID
/// ([`Graph::guids`]), or the switch's index where it is unknown.
fn id(g: &Graph, s: usize) -> u64 {
    match g.guids.get(s) {
        Some(&x) if x != 0 => x,
        _ => s as u64,
    }
}

/// Whether a step of the search out from a destination, from switch `cur`
/// to its neighbour `rem`, goes up (towards the roots: a lower rank; on
/// equal ranks, to the smaller id; between two roots, always up). A
/// packet takes the step the other way, so a search that goes up and then
/// down is a packet's up*-then-down* way.
fn step_up(g: &Graph, rank: &[u32], cur: usize, rem: usize) -> bool {
    let (a, b) = (rank[cur], rank[rem]);
    if a == 0 && b == 0 {
        return true;
    }
    match a.cmp(&b) {
        core::cmp::Ordering::Less => false,
        core::cmp::Ordering::Greater => true,
        core::cmp::Ordering::Equal => id(g, cur) > id(g, rem),
    }
}

/// No way: a hop count no search sets.
const NO_WAY: u8 = 0xFF;

/// The hop counts of the up*/down* ways to one destination switch, per
/// switch and port, as OpenSM's up*/down* fills its hop tables (a search
/// out from the destination in which each switch keeps the direction of
/// the step that queued it, and a step down may not be followed by a step
/// up).
struct Search {
    /// Per switch, per port: the hops to the destination leaving by it.
    hops: Vec<Vec<u8>>,
    /// Per switch: the least of its ports' hops (0 at the destination).
    least: Vec<u8>,
    /// Per switch: the step that last queued it went up.
    up: Vec<bool>,
    queued: Vec<bool>,
    queue: VecDeque<usize>,
    /// The switches whose hops the last search set.
    touched: Vec<usize>,
}

impl Search {
    fn new(g: &Graph) -> Self {
        let n = g.ports.len();
        Search {
            hops: g.ports.iter().map(|p| vec![NO_WAY; p.len()]).collect(),
            least: vec![NO_WAY; n],
            up: vec![false; n],
            queued: vec![false; n],
            queue: VecDeque::new(),
            touched: Vec::new(),
        }
    }

    /// Searches out from switch `t`.
    fn run(&mut self, g: &Graph, rank: &[u32], t: usize) {
        for &s in &self.touched {
            self.hops[s].iter_mut().for_each(|h| *h = NO_WAY);
            self.least[s] = NO_WAY;
        }
        self.touched.clear();
        self.least[t] = 0;
        self.touched.push(t);
        self.up[t] = true;
        self.queue.push_back(t);
        while let Some(u) = self.queue.pop_front() {
            self.queued[u] = false;
            let (went_up, h) = (self.up[u], u16::from(self.least[u]) + 1);
            for to in g.ports[u].iter().skip(1) {
                let PortTo::Switch(rem, pn) = *to else {
                    continue;
                };
                let next_up = step_up(g, rank, u, rem);
                if !went_up && next_up {
                    continue; // down, then up: not a way
                }
                let Some(slot) = self.hops[rem].get_mut(usize::from(pn)) else {
                    continue;
                };
                if h >= u16::from(*slot) {
                    continue;
                }
                *slot = h as u8;
                if self.least[rem] == NO_WAY {
                    self.touched.push(rem);
                }
                self.least[rem] = self.least[rem].min(h as u8);
                if !self.queued[rem] {
                    self.up[rem] = next_up;
                    self.queued[rem] = true;
                    self.queue.push_back(rem);
                }
            }
        }
    }

    /// The ports of switch `s` on a shortest way, ascending (none where
    /// there is no way).
    fn candidates(&self, s: usize, out: &mut Vec<u8>) {
        out.clear();
        let least = self.least[s];
        if least == NO_WAY || least == 0 {
            return;
        }
        let ports = self.hops[s].iter().enumerate().skip(1);
        out.extend(ports.filter(|&(_, &h)| h == least).map(|(p, _)| p as u8));
    }
}

/// Up*/down* forwarding tables from `roots` (see the module docs), as
/// OpenSM's up*/down* makes them ([`route_as_opensm`]): each switch's
/// hops to every destination switch over the ways up*/down* allows, then
/// min-hop's port choice on those hops (switch by switch, each one's
/// destinations in min-hop's order,
/// [`routing::minhop_order`](super::routing::minhop_order)), each switch
/// taking the least used of its ports on a shortest way. On ibsim every
/// entry OpenSM sets is the same (`dumps_ibsim
/// both_sms_route_min_hop_port_for_port`). Where those tables would turn
/// a route down and then up ([`Turn`]), [`route_tree`]'s instead.
///
/// Switch LIDs that no up*/down* route reaches — in a fat tree, one top
/// switch from another — are completed with min-hop entries, where
/// OpenSM's up*/down* leaves them unreachable: traffic to a switch's own
/// LID is management traffic only (SMPs on VL15, which has no flow
/// control and so cannot deadlock, and a few GMPs to the switch's
/// agents), so the deadlock check covers the data traffic to CA LIDs.
pub fn route(g: &Graph, max_lid: u16, roots: &[usize]) -> Vec<Vec<u8>> {
    match route_as_opensm(g, max_lid, roots) {
        (t, None) => t,
        (_, Some(_)) => route_tree(g, max_lid, roots),
    }
}

/// Where OpenSM's up*/down* hops would route an end port's LID down into a switch and
/// then up out of it: a turn up*/down* forbids, which can close a credit
/// loop. (OpenSM's search keeps one direction per switch, the step that
/// last queued it, while a switch may have equally short ports reached by
/// steps of both directions.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The switch (index into the graph) where the route turns up.
    pub switch: usize,
    /// The LID.
    pub lid: u16,
}

/// The tables OpenSM's up*/down* makes, and the first [`Turn`] they hold
/// (`None`: every route is up*/down*, and they are [`route`]'s).
pub fn route_as_opensm(g: &Graph, max_lid: u16, roots: &[usize]) -> (Vec<Vec<u8>>, Option<Turn>) {
    let n = g.ports.len();
    let rank = ranks(g, roots);
    let (dests, offsets, level) = super::routing::ordered_destinations(g);
    // Every destination switch's search, kept as each switch's ports on
    // a shortest way: `ways[start[t * n + s]..start[t * n + s + 1]]`.
    let mut search = Search::new(g);
    let mut start = Vec::with_capacity(n * n + 1);
    let mut ways: Vec<u8> = Vec::new();
    let mut candidates = Vec::new();
    // Under `connect_roots`, as OpenSM's: the roots' rows keep min-hop's
    // hops where OpenSM computed those first (roots it found, or more
    // than one named).
    let min_hop_roots = g.connect_roots && (g.roots.is_empty() || roots.len() > 1);
    let dist = if min_hop_roots {
        super::routing::distances(g)
    } else {
        Vec::new()
    };
    for t in 0..n {
        if min_hop_roots && rank[t] == 0 {
            for s in 0..n {
                start.push(ways.len());
                if s == t || dist[s][t] == u16::MAX {
                    continue;
                }
                for (p, to) in g.ports[s].iter().enumerate() {
                    if let PortTo::Switch(m, _) = *to {
                        if dist[m][t].saturating_add(1) == dist[s][t] {
                            ways.push(p as u8);
                        }
                    }
                }
            }
            continue;
        }
        search.run(g, &rank, t);
        for s in 0..n {
            start.push(ways.len());
            search.candidates(s, &mut candidates);
            ways.extend_from_slice(&candidates);
        }
    }
    start.push(ways.len());
    let mut lft = vec![vec![DROP_PORT; usize::from(max_lid) + 1]; n];
    let mut picker = super::routing::Picker::new(&g.choice);
    // Under `lmc_as_opensm` the LIDs above the bases, which come last,
    // are routed apart, as OpenSM's min-hop routes them.
    let mut lmc = super::routing::LmcChooser::new(g, &offsets);
    let split = if lmc.on {
        dests.partition_point(|d| offsets.get(usize::from(d.0)).is_none_or(|&k| k == 0))
    } else {
        dests.len()
    };
    // Switch by switch in OpenSM's order, so that `scatter_ports` draws
    // as it does; each switch's destinations in min-hop's order.
    for s in super::routing::opensm_switch_order(g) {
        let mut load = vec![0u32; g.ports[s].len()];
        for &(lid, t, tport) in &dests[..split] {
            let l = usize::from(lid);
            if l > usize::from(max_lid) {
                continue;
            }
            let k = offsets.get(l).copied().unwrap_or(0);
            let port = if s == t {
                tport
            } else {
                let c = &ways[start[t * n + s]..start[t * n + s + 1]];
                if c.is_empty() {
                    continue;
                }
                let spread = (k > 0 && c.len() > 1)
                    .then(|| {
                        let base = lft[s].get(l - usize::from(k)).copied()?;
                        super::routing::lmc_spread(c, base, k, level[s])
                    })
                    .flatten();
                match spread.or_else(|| picker.pick(s, c, &load, lid, k)) {
                    Some(p) => p,
                    None => continue,
                }
            };
            lft[s][l] = port;
            // As OpenSM's port profile (its up*/down* fills its tables
            // through min-hop's): a route to a switch's own LID counts
            // only when told to, and an ignored port never.
            if let Some(c) =
                (load.get_mut(usize::from(port))).filter(|_| g.choice.counts(s, tport, port))
            {
                *c += 1;
            }
        }
        if lmc.on {
            let ways_to = |t: usize, v: &mut Vec<u8>| {
                v.extend_from_slice(&ways[start[t * n + s]..start[t * n + s + 1]]);
            };
            let rest = &dests[split..];
            let load = &mut load[..];
            super::routing::lmc_as_opensm(g, s, rest, &offsets, &mut lft, load, &mut lmc, ways_to);
        }
    }
    let mut unreached_switch_dests = Vec::new();
    let mut turn = None;
    for &(lid, t, tport) in &dests {
        let l = usize::from(lid);
        if l > usize::from(max_lid) {
            continue;
        }
        if tport == 0 && (0..n).any(|s| lft[s][l] == DROP_PORT) {
            unreached_switch_dests.push(l);
        }
        // Every route to an end port that comes down into a switch
        // (other than the destination's) must go on down. (Routes to a
        // switch's own LID carry management traffic only, see
        // `route`.)
        if tport == 0 {
            continue;
        }
        for s in 0..n {
            let Some(&PortTo::Switch(u, _)) = g.ports[s].get(usize::from(lft[s][l])) else {
                continue;
            };
            if s == t || u == t || !step_up(g, &rank, u, s) {
                continue;
            }
            if let Some(&PortTo::Switch(w, _)) = g.ports[u].get(usize::from(lft[u][l])) {
                if !step_up(g, &rank, w, u) && turn.is_none() {
                    turn = Some(Turn { switch: u, lid });
                }
            }
        }
    }
    complete_switch_lids(g, &mut lft, &unreached_switch_dests);
    (lft, turn)
}

/// Whether the cable from `a` to `b` leads up.
fn is_up(rank: &[u32], a: usize, b: usize) -> bool {
    rank[b] < rank[a] || (rank[b] == rank[a] && b < a)
}

/// Up*/down* forwarding tables grown out from each destination as a tree
/// in which a cable taken downwards is only ever followed by more
/// downward cables: every switch prefers a way down, then the least used
/// port ([`route`] when OpenSM's hops would turn a route from down to up).
/// Switch LIDs no up*/down* route reaches are completed as in [`route`].
pub fn route_tree(g: &Graph, max_lid: u16, roots: &[usize]) -> Vec<Vec<u8>> {
    let n = g.ports.len();
    let rank = ranks(g, roots);
    let (dests, offsets, level) = super::routing::ordered_destinations(g);
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
    let mut candidates = Vec::new();
    let mut picker = super::routing::Picker::new(&g.choice);
    for &(lid, t, tport) in &dests {
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
                candidates.clear();
                candidates.extend(o.iter().map(|c| c.0));
                let spread = (k > 0 && o.len() > 1)
                    .then(|| {
                        let base = lft[u].get(l - usize::from(k)).copied()?;
                        super::routing::lmc_spread(&candidates, base, k, level[u])
                    })
                    .flatten();
                let p = spread.or_else(|| picker.pick(u, &candidates, &load[u], lid, k));
                let pick = *o.iter().find(|c| Some(c.0) == p).unwrap_or(&o[0]);
                reached[u] = true;
                down_only[u] = pick.1;
                lft[u][l] = pick.0;
                // As OpenSM's port profile (its up*/down* fills its tables
                // through min-hop's): a route to a switch's own LID counts
                // only when told to, and an ignored port never.
                if g.choice.counts(u, tport, pick.0) {
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
    complete_switch_lids(g, &mut lft, &unreached_switch_dests);
    lft
}

/// Gives the switch LIDs `lids`, which up*/down* does not reach from
/// every switch, min-hop entries where `lft` has none (see [`route`]).
fn complete_switch_lids(g: &Graph, lft: &mut [Vec<u8>], lids: &[usize]) {
    if lids.is_empty() {
        return;
    }
    // Hops unweighed: only the min-hop engine reads hop weights.
    let mut mh: Vec<Vec<u8>> = lft.iter().map(|t| vec![DROP_PORT; t.len()]).collect();
    let dist = super::routing::Dist::Hops(super::routing::distances(g));
    super::routing::minhop_into(g, &mut mh, &dist, &[], |_| true);
    for &l in lids {
        for (t, m) in lft.iter_mut().zip(&mh) {
            if t[l] == DROP_PORT {
                t[l] = m[l];
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use PortTo::{Ca, None as No, Switch as Sw};

    /// Seven switches in a ring with chords, rooted at 6 (ranks 2 2 3 3 1
    /// 1 0), one CA each on the last port, LIDs 1–7 for the switches and
    /// 11–17 for the CAs. OpenSM's search queues switch 1 first by a step
    /// up, so switch 5 (above it) routes switch 3's CA down into 1, while
    /// 1's least used shortest port leads up to 0: a down-then-up turn.
    fn ring() -> Graph {
        let ports = vec![
            vec![No, Sw(1, 1), Sw(4, 1), Sw(3, 2), Ca(11, 1)],
            vec![No, Sw(0, 1), Sw(2, 1), Sw(5, 1), Ca(12, 1)],
            vec![No, Sw(1, 2), Sw(3, 1), Ca(13, 1)],
            vec![No, Sw(2, 2), Sw(0, 3), Ca(14, 1)],
            vec![No, Sw(0, 2), Sw(6, 2), Ca(15, 1)],
            vec![No, Sw(1, 3), Sw(6, 1), Ca(16, 1)],
            vec![No, Sw(5, 2), Sw(4, 2), Ca(17, 1)],
        ];
        Graph {
            ports,
            lid: (1..=7).collect(),
            roots: vec![6],
            ..Graph::default()
        }
    }

    /// The switch that switch `s` routes `lid` to, if a switch.
    fn hop(g: &Graph, lft: &[Vec<u8>], s: usize, lid: usize) -> Option<usize> {
        match g.ports[s].get(usize::from(lft[s][lid])) {
            Some(&Sw(m, _)) => Some(m),
            _ => None,
        }
    }

    #[test]
    fn opensms_search_can_turn_down_then_up_and_route_does_not() {
        let g = ring();
        let roots = roots(&g);
        assert_eq!(roots, vec![6]);
        assert_eq!(ranks(&g, &roots), vec![2, 2, 3, 3, 1, 1, 0]);
        let (theirs, turn) = route_as_opensm(&g, 17, &roots);
        let turn = turn.expect("OpenSM's hops turn here");
        let (at, lid) = (turn.switch, usize::from(turn.lid));
        // The turn is in the tables: a switch sends the LID down into
        // `at` (a step up from `at` to it, seen from the destination),
        // and `at` sends it up.
        let rank = ranks(&g, &roots);
        let into =
            (0..7).find(|&s| hop(&g, &theirs, s, lid) == Some(at) && step_up(&g, &rank, at, s));
        assert!(into.is_some(), "nothing routes {lid} down into {at}");
        let next = hop(&g, &theirs, at, lid).expect("at routes on to a switch");
        assert!(
            !step_up(&g, &rank, next, at),
            "{at} sends {lid} to {next}, not up"
        );
        assert!(
            !deadlock_free(&g, &theirs),
            "OpenSM's tables close a credit loop"
        );
        // route() keeps clear of it: every route to a CA is up*, then
        // down*, and the channel dependencies close no cycle.
        let ours = route(&g, 17, &roots);
        assert_ne!(ours, theirs);
        assert!(deadlock_free(&g, &ours));
        for lid in 11..=17usize {
            for s in 0..7 {
                let Some(u) = hop(&g, &ours, s, lid) else {
                    continue;
                };
                if is_up(&rank, s, u) {
                    continue;
                }
                if let Some(w) = hop(&g, &ours, u, lid) {
                    assert!(
                        !is_up(&rank, u, w),
                        "LID {lid}: {s} down to {u}, then up to {w}"
                    );
                }
            }
        }
    }

    /// Hops from switch `s` to the switch holding `lid` along `lft`.
    fn walk(g: &Graph, lft: &[Vec<u8>], mut s: usize, lid: usize) -> Option<u16> {
        let mut n = 0;
        while lft[s][lid] != 0 {
            s = hop(g, lft, s, lid)?;
            n += 1;
            if n > 7 {
                return None;
            }
        }
        Some(n)
    }

    #[test]
    fn without_a_turn_route_is_opensms() {
        // The ring without its chord 0–3.
        let mut g = ring();
        g.ports[0][3] = No;
        g.ports[3][2] = No;
        let roots = roots(&g);
        let (theirs, turn) = route_as_opensm(&g, 17, &roots);
        assert_eq!(turn, None);
        assert_eq!(route(&g, 17, &roots), theirs);
        assert!(deadlock_free(&g, &theirs));
    }

    #[test]
    fn connect_roots_routes_the_roots_lids_by_shortest_paths() {
        let mut g = ring();
        g.roots = vec![4, 5];
        let dist = super::super::routing::distances(&g);
        let lengths = |g: &Graph| {
            let (t, _) = route_as_opensm(g, 17, &[4, 5]);
            let mut v = Vec::new();
            for root in [4usize, 5] {
                for s in (0..7).filter(|&s| s != root) {
                    v.push((s, root, walk(g, &t, s, usize::from(g.lid[root]))));
                }
            }
            v
        };
        g.connect_roots = true;
        for (s, root, n) in lengths(&g) {
            assert_eq!(n, Some(dist[s][root]), "switch {s} to root {root}");
        }
    }
}
