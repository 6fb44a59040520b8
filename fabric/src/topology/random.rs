//! Random irregular fabrics: 8-port switches joined by a random spanning
//! tree plus random extra cables (up to four inter-switch cables per
//! switch), a CA on every port left free. The same seed gives the same fabric.

use super::fat_tree::{ca_guid, switch_guid};
use super::{Topology, TopologyError};
use mad_core::attr::NodeType;

/// Ports of each switch.
pub const SWITCH_PORTS: u8 = 8;
/// Inter-switch cables a switch gets at most.
pub const MAX_SWITCH_LINKS: usize = 4;

struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random irregular fabric of `switches` switches.
pub fn random(switches: usize, seed: u64) -> Result<Topology, TopologyError> {
    if switches == 0 || switches > 20_000 {
        return Err(TopologyError::BadParameter(format!(
            "SWITCHES = {switches}: need 1..=20000"
        )));
    }
    let mut rng = SplitMix(seed);
    let mut t = Topology::default();
    for i in 0..switches {
        t.add_node(
            NodeType::Switch,
            SWITCH_PORTS,
            switch_guid(i),
            format!("S-{i}"),
            None,
        );
    }
    let mut degree = vec![0usize; switches];
    let next_free =
        |t: &Topology, s: usize| (1..=SWITCH_PORTS).find(|&p| t.peer_of(s, p).is_none());
    let link = |t: &mut Topology,
                degree: &mut Vec<usize>,
                a: usize,
                b: usize|
     -> Result<bool, TopologyError> {
        if a == b || degree[a] >= MAX_SWITCH_LINKS || degree[b] >= MAX_SWITCH_LINKS {
            return Ok(false);
        }
        if (1..=SWITCH_PORTS).any(|p| t.peer_of(a, p).is_some_and(|(m, _)| m == b)) {
            return Ok(false); // one cable between a pair keeps the fabric irregular, not parallel
        }
        let (Some(pa), Some(pb)) = (next_free(t, a), next_free(t, b)) else {
            return Ok(false);
        };
        t.connect((a, pa), (b, pb))?;
        degree[a] += 1;
        degree[b] += 1;
        Ok(true)
    };
    // Spanning tree: switch i joins a random earlier switch with room.
    for i in 1..switches {
        let mut tries = 0;
        loop {
            let j = rng.below(i);
            if link(&mut t, &mut degree, i, j)? {
                break;
            }
            tries += 1;
            if tries > 64 {
                // Fall back to the first earlier switch with room.
                let j = (0..i)
                    .find(|&j| degree[j] < MAX_SWITCH_LINKS)
                    .ok_or_else(|| TopologyError::BadParameter("no room".into()))?;
                link(&mut t, &mut degree, i, j)?;
                break;
            }
        }
    }
    // Extra cables.
    for _ in 0..switches {
        let (a, b) = (rng.below(switches), rng.below(switches));
        link(&mut t, &mut degree, a, b)?;
    }
    // A CA on every free port.
    let mut h = 0;
    for s in 0..switches {
        for p in 1..=SWITCH_PORTS {
            if t.peer_of(s, p).is_none() {
                let ca = t.add_node(
                    NodeType::ChannelAdapter,
                    1,
                    ca_guid(h),
                    format!("H-{h}"),
                    None,
                );
                h += 1;
                t.connect((s, p), (ca, 1))?;
            }
        }
    }
    Ok(t)
}
