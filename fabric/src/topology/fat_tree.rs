//! Fat trees: k-ary n-trees (Petrini and Vanneschi) and m-port n-trees (Lin,
//! Chung and Huang), the latter two k-ary n-trees (k = m/2) sharing their
//! top level. Level 0 is the leaf level; down ports are 1..=k, up ports
//! k+1..=2k.

use super::{Topology, TopologyError};
use mad_core::attr::NodeType;

/// GUID of switch number `i`.
pub(super) fn switch_guid(i: usize) -> u64 {
    0x0002_c903_0000_0000 | ((i as u64) << 8)
}
/// GUID of CA number `i`.
pub(super) fn ca_guid(i: usize) -> u64 {
    0x0002_c904_0000_0000 | ((i as u64) << 8)
}

fn digit(w: usize, i: usize, k: usize) -> usize {
    (w / k.pow(i as u32)) % k
}

fn with_digit(w: usize, i: usize, k: usize, v: usize) -> usize {
    let p = k.pow(i as u32);
    w - digit(w, i, k) * p + v * p
}

/// A k-ary n-tree of `ports`-port switches: k^n hosts, n·k^(n−1) switches.
pub fn kary_ntree(k: usize, n: usize, ports: usize) -> Result<Topology, TopologyError> {
    build(k, n, ports, 1)
}

/// An m-port n-tree: 2·(m/2)^n hosts, (2n−1)·(m/2)^(n−1) switches.
pub fn mport_ntree(m: usize, n: usize) -> Result<Topology, TopologyError> {
    if m < 2 || m % 2 != 0 {
        return Err(TopologyError::BadParameter(format!(
            "M = {m}: the port count must be even and at least 2"
        )));
    }
    build(m / 2, n, m, 2)
}

/// `copies` k-ary n-trees whose top-level switches are shared (copy c uses
/// the top switches' down ports c·k+1..=c·k+k).
// Loops run over tree coordinates (copy, level, switch label), which index
// several tables at once.
#[allow(clippy::needless_range_loop)]
fn build(k: usize, n: usize, ports: usize, copies: usize) -> Result<Topology, TopologyError> {
    if k == 0 || n == 0 || n > 6 {
        return Err(TopologyError::BadParameter(format!(
            "k = {k}, n = {n}: need k ≥ 1 and 1 ≤ n ≤ 6"
        )));
    }
    if ports > 254 || ports < 2 * k || (n == 1 && ports < copies * k) {
        return Err(TopologyError::BadParameter(format!(
            "{ports}-port switches cannot build this tree"
        )));
    }
    let per_level = k.pow((n - 1) as u32);
    let hosts = copies * k * per_level;
    if hosts + (copies * (n - 1) + 1) * per_level > 200_000 {
        return Err(TopologyError::BadParameter(
            "more than 200,000 nodes".into(),
        ));
    }
    let mut t = Topology::default();
    // Switches: top level first, then each copy's levels n-2..0.
    let mut idx = vec![vec![vec![0usize; per_level]; n]; copies];
    let mut count = 0;
    for w in 0..per_level {
        let i = t.add_node(
            NodeType::Switch,
            ports as u8,
            switch_guid(count),
            format!("S-L{}-{w}", n - 1),
            Some((n - 1) as u8),
        );
        count += 1;
        for c in 0..copies {
            idx[c][n - 1][w] = i;
        }
    }
    for (c, levels) in idx.iter_mut().enumerate() {
        for l in (0..n - 1).rev() {
            for w in 0..per_level {
                let name = if copies > 1 {
                    format!("S-L{l}-{c}-{w}")
                } else {
                    format!("S-L{l}-{w}")
                };
                levels[l][w] = t.add_node(
                    NodeType::Switch,
                    ports as u8,
                    switch_guid(count),
                    name,
                    Some(l as u8),
                );
                count += 1;
            }
        }
    }
    // Inter-switch cables.
    for (c, levels) in idx.iter().enumerate() {
        for l in 0..n - 1 {
            let top = l + 1 == n - 1;
            for w in 0..per_level {
                for v in 0..k {
                    let up = with_digit(w, l, k, v);
                    let down_port = 1 + digit(w, l, k) + if top { c * k } else { 0 };
                    t.connect(
                        (levels[l][w], (k + 1 + v) as u8),
                        (levels[l + 1][up], down_port as u8),
                    )?;
                }
            }
        }
    }
    // Hosts on the leaves' down ports.
    let mut h = 0;
    for levels in &idx {
        for w in 0..per_level {
            let leaf = levels[0][w];
            let (first, last) = if n == 1 { (1, copies * k) } else { (1, k) };
            for p in first..=last {
                let ca = t.add_node(
                    NodeType::ChannelAdapter,
                    1,
                    ca_guid(h),
                    format!("H-{h}"),
                    None,
                );
                h += 1;
                t.connect((leaf, p as u8), (ca, 1))?;
            }
            if n == 1 {
                break;
            }
        }
        if n == 1 {
            break;
        }
    }
    Ok(t)
}
