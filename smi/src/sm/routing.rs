//! Min-hop routing balanced over equal-cost ports, as OpenSM's minhop engine
//! does: for every switch and every destination LID, the egress port on a
//! shortest path whose port carries the fewest routes so far.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

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

/// Hop distances between all switch pairs (`u16::MAX` = unreachable).
pub fn distances(g: &Graph) -> Vec<Vec<u16>> {
    let n = g.ports.len();
    let mut all = Vec::with_capacity(n);
    for src in 0..n {
        let mut d = vec![u16::MAX; n];
        d[src] = 0;
        let mut q = VecDeque::new();
        q.push_back(src);
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
        all.push(d);
    }
    all
}

/// Linear forwarding tables: `lft[switch][lid]` = egress port, 0xFF where
/// unrouted. `max_lid` sizes the tables.
pub fn minhop(g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
    let mut lft = vec![vec![0xFFu8; usize::from(max_lid) + 1]; g.ports.len()];
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
                let mut best: Option<usize> = None;
                for (p, to) in g.ports[s].iter().enumerate() {
                    if let PortTo::Switch(m, _) = *to {
                        if dist[m][t] == want - 1 && best.is_none_or(|b| load[p] < load[b]) {
                            best = Some(p);
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
            if lft[s].get(l).is_none_or(|&p| p != 0xFF) || dist[s][t] == u16::MAX {
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
