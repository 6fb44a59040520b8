//! Two-dimensional meshes and tori cabled by dimension, the fabrics
//! dimension-order routing (`--routing dor`) is meant for: every switch
//! numbers its ports 1 west (−X), 2 east (+X), 3 south (−Y), 4 north
//! (+Y), then its hosts. A mesh leaves the edge ports free; a torus
//! closes each row and column into a ring.

use super::fat_tree::{ca_guid, switch_guid};
use super::{Topology, TopologyError};
use mad_core::attr::NodeType;

/// The largest side of a mesh or torus.
pub const MAX_SIDE: usize = 64;
/// The most hosts a switch gets.
pub const MAX_HOSTS: usize = 32;

/// An `x` × `y` mesh (`wrap` false) or torus (`wrap` true) of switches,
/// `hosts` CAs on each.
pub fn grid(x: usize, y: usize, hosts: usize, wrap: bool) -> Result<Topology, TopologyError> {
    let low = if wrap { 2 } else { 1 };
    for (what, v) in [("X", x), ("Y", y)] {
        if !(low..=MAX_SIDE).contains(&v) {
            return Err(TopologyError::BadParameter(format!(
                "{what} = {v}: need {low}..={MAX_SIDE}"
            )));
        }
    }
    if hosts > MAX_HOSTS {
        return Err(TopologyError::BadParameter(format!(
            "HOSTS = {hosts}: need 0..={MAX_HOSTS}"
        )));
    }
    let mut t = Topology::default();
    let ports = 4 + hosts as u8;
    let at = |i: usize, j: usize| j * x + i;
    for j in 0..y {
        for i in 0..x {
            t.add_node(
                NodeType::Switch,
                ports,
                switch_guid(at(i, j)),
                format!("S-{i}-{j}"),
                None,
            );
        }
    }
    for j in 0..y {
        for i in 0..x {
            // East to the next switch's west, north to the next one's south.
            if i + 1 < x || (wrap && x > 1) {
                t.connect((at(i, j), 2), (at((i + 1) % x, j), 1))?;
            }
            if j + 1 < y || (wrap && y > 1) {
                t.connect((at(i, j), 4), (at(i, (j + 1) % y), 3))?;
            }
        }
    }
    for j in 0..y {
        for i in 0..x {
            for h in 0..hosts {
                let k = at(i, j) * hosts + h;
                let ca = t.add_node(
                    NodeType::ChannelAdapter,
                    1,
                    ca_guid(k),
                    format!("H-{i}-{j}-{h}"),
                    None,
                );
                t.connect((at(i, j), 5 + h as u8), (ca, 1))?;
            }
        }
    }
    Ok(t)
}
