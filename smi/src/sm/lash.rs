//! Layered shortest-path routing (LASH, OpenSM's `lash` engine): the
//! switches' tables route every LID of a switch along one shortest
//! route ([`super::routing::dor`]'s: the first best port, as OpenSM's
//! LASH takes the first link its search finds), and every pair of switches gets a
//! service level, a *layer*, such that the channel dependencies of the
//! routes within each layer form no cycle. With the SL-to-VL tables
//! mapping each SL to its own VL (the QoS default, as OpenSM asks `-R
//! lash -Q`), a torus or any other topology with cyclic shortest paths
//! is deadlock-free without leaving its shortest paths.
//!
//! As OpenSM's:
//! - a pair of switches and its reverse share one layer, and routes
//!   between two ports of one switch take layer 0;
//! - pairs are taken in switch order (by node GUID), each into the lowest layer that
//!   stays acyclic with it, a new layer opened when none does;
//! - the layers available are the fewest operational VLs of any switch
//!   port (as PortInfo encodes them: 1, 2, 4, 8 or 15); more needed is an
//!   error ([`LashError`]) and the SM routes min-hop instead, as OpenSM
//!   falls back to its default engine.
//!
//! On the `torus:4:4:1` fabric both SMs open two layers, of 192 and 48
//! pairs, as OpenSM logs before it balances them. Unlike OpenSM's, only
//! pairs that carry data (a CA on either side) take part, a pair's
//! dependencies are read from the tables of every LID between the two
//! switches (any tables: [`assign`] takes them), and the layers are not
//! shuffled afterwards to even them out (OpenSM moves pairs at random
//! from the fullest layer to the emptiest). Min-hop's balanced routes
//! need many more layers: 13 on an 8 × 8 torus, where one shortest
//! route a pair needs 6.

use super::routing::{destinations, Graph, PortTo};
use alloc::vec;
use alloc::vec::Vec;

/// The layer (service level) of every pair of switches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layers {
    n: usize,
    sl: Vec<u8>,
    /// How many layers the routes use (at least 1).
    pub count: u8,
    /// Per layer, how many ordered pairs of switches it carries.
    pub pairs: Vec<u32>,
}

impl Layers {
    /// Every pair in layer 0, for `n` switches (a single-layer routing,
    /// to check with [`deadlock_free_in_layers`]).
    pub fn single(n: usize) -> Layers {
        Layers {
            n,
            sl: vec![0; n * n],
            count: 1,
            pairs: vec![(n * n.saturating_sub(1)) as u32],
        }
    }

    /// The layer of routes from switch `from` to switch `to` (indexes of
    /// the routing [`Graph`]); 0 for one switch, or an index out of range.
    pub fn sl(&self, from: usize, to: usize) -> u8 {
        if from >= self.n || to >= self.n {
            return 0;
        }
        self.sl[from * self.n + to]
    }

    /// How many switches the layers were made for.
    pub fn switches(&self) -> usize {
        self.n
    }
}

/// Why LASH could not route a fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LashError {
    /// The routes need more layers than the fabric's VLs give.
    NotEnoughLayers {
        /// Layers available (the fewest operational VLs of a switch port).
        available: u8,
    },
}

impl core::fmt::Display for LashError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LashError::NotEnoughLayers { available } => write!(
                f,
                "the routes need more than the {available} layer(s) the switch ports' operational VLs give"
            ),
        }
    }
}

/// The layers LASH makes OperationalVLs `op_vls` (PortInfo's encoding,
/// 1–5) give: 1, 2, 4, 8 or 15, as OpenSM counts them.
pub fn layers_of_op_vls(op_vls: u8) -> u8 {
    let v = op_vls.clamp(1, 5);
    (1u8 << (v - 1)).min(15)
}

/// Numbers the channels, (switch, egress port) towards another switch.
struct Channels {
    id: Vec<Vec<u32>>,
    count: usize,
}

fn channels(g: &Graph) -> Channels {
    let mut id = Vec::with_capacity(g.ports.len());
    let mut count = 0usize;
    for ports in &g.ports {
        let mut row = vec![u32::MAX; ports.len()];
        for (p, t) in ports.iter().enumerate() {
            if matches!(t, PortTo::Switch(..)) {
                row[p] = count as u32;
                count += 1;
            }
        }
        id.push(row);
    }
    Channels { id, count }
}

/// Per switch, the LIDs of the end ports (CAs, VMs) behind it.
fn end_lids(g: &Graph) -> Vec<Vec<usize>> {
    let mut by_switch = vec![Vec::new(); g.ports.len()];
    for (lid, s, port) in destinations(g) {
        if port != 0 {
            if let Some(v) = by_switch.get_mut(s) {
                v.push(usize::from(lid));
            }
        }
    }
    by_switch
}

/// Adds to `out` the channel dependencies of the routes from switch `s`
/// to each of `lids`, following the tables `lft`.
fn route_deps(
    g: &Graph,
    ch: &Channels,
    lft: &[Vec<u8>],
    s: usize,
    lids: &[usize],
    out: &mut Vec<(u32, u32)>,
) {
    let n = g.ports.len();
    for &l in lids {
        let mut a = s;
        // A loop in broken tables ends after as many hops as switches.
        for _ in 0..n {
            let pa = usize::from(lft.get(a).and_then(|t| t.get(l)).copied().unwrap_or(255));
            let Some(PortTo::Switch(b, _)) = g.ports[a].get(pa).copied() else {
                break;
            };
            let pb = usize::from(lft.get(b).and_then(|t| t.get(l)).copied().unwrap_or(255));
            if let Some(PortTo::Switch(..)) = g.ports[b].get(pb) {
                out.push((ch.id[a][pa], ch.id[b][pb]));
            }
            a = b;
        }
    }
}

/// One layer's channel dependency graph, kept acyclic.
struct Layer {
    next: Vec<Vec<u32>>,
}

impl Layer {
    /// Adds the dependencies of `deps` the layer lacks, and keeps them
    /// when the layer stays acyclic: false (and the layer as it was)
    /// when one would close a cycle.
    fn try_add(&mut self, deps: &[(u32, u32)], mark: &mut [u32], stamp: &mut u32) -> bool {
        let mut added = Vec::new();
        for &(u, v) in deps {
            let row = &mut self.next[u as usize];
            if !row.contains(&v) {
                row.push(v);
                added.push((u, v));
            }
        }
        // The layer was acyclic: a cycle now runs through a new
        // dependency u → v, so u is reachable from v.
        let mut cyclic = false;
        let mut stack = Vec::new();
        for &(u, v) in &added {
            *stamp = stamp.wrapping_add(1);
            if *stamp == 0 {
                mark.fill(0);
                *stamp = 1;
            }
            stack.clear();
            stack.push(v);
            mark[v as usize] = *stamp;
            while let Some(c) = stack.pop() {
                if c == u {
                    cyclic = true;
                    break;
                }
                for &t in &self.next[c as usize] {
                    if mark[t as usize] != *stamp {
                        mark[t as usize] = *stamp;
                        stack.push(t);
                    }
                }
            }
            if cyclic {
                break;
            }
        }
        if cyclic {
            for &(u, _) in added.iter().rev() {
                self.next[u as usize].pop();
            }
        }
        !cyclic
    }
}

/// The layers of the routes `lft` over `g`, at most `available` of them
/// ([`layers_of_op_vls`]).
pub fn assign(g: &Graph, lft: &[Vec<u8>], available: u8) -> Result<Layers, LashError> {
    let n = g.ports.len();
    let ch = channels(g);
    let ends = end_lids(g);
    let mut sl = vec![0u8; n * n];
    let mut layers: Vec<Layer> = Vec::new();
    let mut pairs: Vec<u32> = Vec::new();
    let mut mark = vec![0u32; ch.count];
    let mut stamp = 0u32;
    let mut deps = Vec::new();
    // OpenSM takes its switches by GUID (the graph's order where unknown).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&k| (g.guids.get(k).copied().unwrap_or(0), k));
    for (a, &s) in order.iter().enumerate() {
        for &d in &order[a + 1..] {
            if ends[s].is_empty() && ends[d].is_empty() {
                continue;
            }
            deps.clear();
            route_deps(g, &ch, lft, s, &ends[d], &mut deps);
            route_deps(g, &ch, lft, d, &ends[s], &mut deps);
            deps.sort_unstable();
            deps.dedup();
            let mut v = 0;
            loop {
                if v == layers.len() {
                    if v >= usize::from(available.max(1)) {
                        return Err(LashError::NotEnoughLayers { available });
                    }
                    layers.push(Layer {
                        next: vec![Vec::new(); ch.count],
                    });
                    pairs.push(0);
                }
                if layers[v].try_add(&deps, &mut mark, &mut stamp) {
                    break;
                }
                v += 1;
            }
            sl[s * n + d] = v as u8;
            sl[d * n + s] = v as u8;
            pairs[v] += 2;
        }
    }
    if pairs.is_empty() {
        pairs.push(0);
    }
    Ok(Layers {
        n,
        sl,
        count: pairs.len() as u8,
        pairs,
    })
}

/// True when, within every layer, the channel dependency graph of the
/// routes `lft` from each switch with end ports to every end port of
/// another switch has no cycle: deadlock-free when each SL has its own
/// VL. Built afresh from the tables (not from [`assign`]'s bookkeeping)
/// and checked by Kahn's algorithm, so it also checks [`assign`].
pub fn deadlock_free_in_layers(g: &Graph, lft: &[Vec<u8>], layers: &Layers) -> bool {
    let n = g.ports.len();
    let ch = channels(g);
    let ends = end_lids(g);
    let count = usize::from(layers.count.max(1));
    let mut edges: Vec<Vec<(u32, u32)>> = vec![Vec::new(); count];
    let mut deps = Vec::new();
    for s in 0..n {
        if ends[s].is_empty() {
            continue;
        }
        for (d, lids) in ends.iter().enumerate() {
            if d == s || lids.is_empty() {
                continue;
            }
            deps.clear();
            route_deps(g, &ch, lft, s, lids, &mut deps);
            let layer = usize::from(layers.sl(s, d));
            let Some(e) = edges.get_mut(layer) else {
                return false;
            };
            e.extend_from_slice(&deps);
        }
    }
    edges.iter_mut().all(|e| {
        e.sort_unstable();
        e.dedup();
        acyclic(ch.count, e)
    })
}

/// Kahn's algorithm over `count` vertices and the sorted edges `e`.
fn acyclic(count: usize, e: &[(u32, u32)]) -> bool {
    let mut indeg = vec![0u32; count];
    let mut start = vec![0usize; count + 1];
    for &(u, v) in e {
        indeg[v as usize] += 1;
        start[u as usize + 1] += 1;
    }
    for i in 0..count {
        start[i + 1] += start[i];
    }
    let mut queue: Vec<usize> = (0..count).filter(|&c| indeg[c] == 0).collect();
    let mut seen = 0;
    while let Some(c) = queue.pop() {
        seen += 1;
        for &(_, v) in &e[start[c]..start[c + 1]] {
            indeg[v as usize] -= 1;
            if indeg[v as usize] == 0 {
                queue.push(v as usize);
            }
        }
    }
    seen == count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sm::routing::minhop;

    /// An `x` × `y` grid of switches (port 1 west, 2 east, 3 south, 4
    /// north), wrapped round into a torus when `wrap`, with one CA on
    /// port 5 of each switch. Switch LIDs 1..=n, CA LIDs n+1..=2n.
    fn grid(x: usize, y: usize, wrap: bool) -> Graph {
        use PortTo::{Ca, None as No, Switch as Sw};
        let n = x * y;
        let at = |i: usize, j: usize| j * x + i;
        let mut ports = vec![vec![No; 6]; n];
        for j in 0..y {
            for i in 0..x {
                let s = at(i, j);
                if i + 1 < x || wrap {
                    let e = at((i + 1) % x, j);
                    ports[s][2] = Sw(e, 1);
                    ports[e][1] = Sw(s, 2);
                }
                if j + 1 < y || wrap {
                    let north = at(i, (j + 1) % y);
                    ports[s][4] = Sw(north, 3);
                    ports[north][3] = Sw(s, 4);
                }
                ports[s][5] = Ca((n + 1 + s) as u16, 1);
            }
        }
        Graph {
            ports,
            lid: (1..=n as u16).collect(),
            ..Graph::default()
        }
    }

    #[test]
    fn a_torus_needs_layers_and_gets_them_acyclic() {
        let g = grid(4, 4, true);
        let t = minhop(&g, 32);
        // Min-hop alone, one layer: the rings of a torus close cycles.
        assert!(!deadlock_free_in_layers(&g, &t, &Layers::single(16)));
        let layers = assign(&g, &t, 8).unwrap();
        assert!(layers.count >= 2, "{layers:?}");
        assert!(deadlock_free_in_layers(&g, &t, &layers));
        // A pair and its reverse share a layer; one switch is layer 0.
        for s in 0..16 {
            assert_eq!(layers.sl(s, s), 0);
            for d in 0..16 {
                assert_eq!(layers.sl(s, d), layers.sl(d, s));
                assert!(layers.sl(s, d) < layers.count);
            }
        }
        assert_eq!(layers.pairs.iter().sum::<u32>(), 16 * 15);
        // Too few VLs: an error, not a routing that could deadlock.
        assert_eq!(
            assign(&g, &t, 1),
            Err(LashError::NotEnoughLayers { available: 1 })
        );
    }

    #[test]
    fn a_mesh_takes_one_layer_where_its_routes_are_acyclic() {
        // Where one layer is acyclic (a 3 × 3 torus: every ring three
        // switches long, each route at most one hop a dimension), one
        // layer is all LASH opens; on a 4 × 4 mesh, whatever min-hop's
        // balancing gives, LASH's layers agree with the check.
        for (x, y, wrap) in [(3, 3, true), (4, 4, false), (3, 5, false)] {
            let g = grid(x, y, wrap);
            let t = minhop(&g, (2 * x * y) as u16);
            let layers = assign(&g, &t, 8).unwrap();
            assert!(deadlock_free_in_layers(&g, &t, &layers));
            let one = deadlock_free_in_layers(&g, &t, &Layers::single(x * y));
            assert_eq!(layers.count == 1, one, "{x}x{y} {layers:?}");
        }
        let g = grid(3, 3, true);
        assert_eq!(assign(&g, &minhop(&g, 18), 8).unwrap().count, 1);
    }

    #[test]
    fn a_layer_mixed_up_is_caught() {
        // Moving pairs of a good assignment into one layer brings back
        // the torus's cycles: the check reads the tables, not `assign`.
        let g = grid(5, 4, true);
        let t = minhop(&g, 40);
        let mut layers = assign(&g, &t, 8).unwrap();
        assert!(layers.count >= 2);
        assert!(deadlock_free_in_layers(&g, &t, &layers));
        layers.sl.fill(0);
        assert!(!deadlock_free_in_layers(&g, &t, &layers));
    }

    #[test]
    fn op_vls_give_layers_as_opensm_counts_them() {
        let got: Vec<u8> = (0..=6).map(layers_of_op_vls).collect();
        assert_eq!(got, [1, 1, 2, 4, 8, 15, 15]);
    }

    #[test]
    fn one_shortest_route_a_pair_needs_the_layers_opensm_opens() {
        use crate::sm::routing::dor;
        // OpenSM 3.3.23's `-R lash` on torus:4:4:1 (ibkit's served
        // fabric) logged "Lanes in layer 0: 192", "layer 1: 48" before
        // balancing; dor's tables, one route a pair, give the same.
        let g = grid(4, 4, true);
        assert_eq!(assign(&g, &dor(&g, 32), 15).unwrap().pairs, [192, 48]);
        // On an 8 × 8 torus they fit the 8 VLs of VL0-7; min-hop's
        // balanced routes would need more than that.
        let g = grid(8, 8, true);
        let by_dor = assign(&g, &dor(&g, 128), 15).unwrap();
        assert!(by_dor.count <= 8, "{by_dor:?}");
        assert!(deadlock_free_in_layers(&g, &dor(&g, 128), &by_dor));
        let by_minhop = assign(&g, &minhop(&g, 128), 15).unwrap();
        assert!(by_minhop.count > 8, "{by_minhop:?}");
    }
}
