//! Fabric topologies: nodes (switches and channel adapters) and the cables
//! between their ports, with the builders named by a topology spec.

mod fat_tree;
mod mesh;
mod netfile;
mod random;
mod rates;

pub use netfile::{parse as parse_ibnetdiscover, to_ibnetdiscover};

use mad_core::attr::NodeType;
use std::fmt;

/// One node of a fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Switch or channel adapter.
    pub kind: NodeType,
    /// Physical ports, numbered 1..=ports.
    pub ports: u8,
    /// Node GUID (a CA's port GUIDs are node GUID + port number).
    pub guid: u64,
    /// NodeDescription.
    pub name: String,
    /// Tree level for fat-tree switches (0 = leaf), `None` elsewhere.
    pub level: Option<u8>,
    /// A switch whose port 0 is enhanced (it takes an LMC, so the SM may
    /// give it a range of LIDs): ibnetdiscover's and ibsim's
    /// `enhanced port 0` after the switch's name.
    pub enhanced_port0: bool,
    /// SystemImageGUID, where it is not the node GUID: the chassis the
    /// node is part of (ibnetdiscover's and ibsim's `sysimgguid=` line
    /// before the node).
    pub sys_guid: Option<u64>,
}

impl Node {
    /// The SystemImageGUID the node reports: [`Node::sys_guid`], else
    /// its own GUID.
    pub fn system_image_guid(&self) -> u64 {
        self.sys_guid.unwrap_or(self.guid)
    }
}

/// A port of a node: (node index, port number).
pub type PortRef = (usize, u8);

/// The signalling rate of a lane, as ibnetdiscover and ibsim name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LaneSpeed {
    /// 2.5 Gb/s.
    Sdr,
    /// 5 Gb/s.
    Ddr,
    /// 10 Gb/s.
    Qdr,
    /// 14 Gb/s (LinkSpeedExtActive 1).
    Fdr,
    /// 25 Gb/s (LinkSpeedExtActive 2).
    Edr,
    /// 50 Gb/s (LinkSpeedExtActive 4).
    Hdr,
    /// 100 Gb/s (LinkSpeedExtActive 8).
    Ndr,
}

impl LaneSpeed {
    /// Every speed, slowest first.
    pub const ALL: [LaneSpeed; 7] = [
        LaneSpeed::Sdr,
        LaneSpeed::Ddr,
        LaneSpeed::Qdr,
        LaneSpeed::Fdr,
        LaneSpeed::Edr,
        LaneSpeed::Hdr,
        LaneSpeed::Ndr,
    ];

    /// The name ibnetdiscover writes (`EDR`).
    pub fn name(self) -> &'static str {
        match self {
            LaneSpeed::Sdr => "SDR",
            LaneSpeed::Ddr => "DDR",
            LaneSpeed::Qdr => "QDR",
            LaneSpeed::Fdr => "FDR",
            LaneSpeed::Edr => "EDR",
            LaneSpeed::Hdr => "HDR",
            LaneSpeed::Ndr => "NDR",
        }
    }

    /// An extended speed (FDR and faster): PortInfo.LinkSpeedExtActive
    /// says it, not LinkSpeedActive.
    pub fn is_extended(self) -> bool {
        self >= LaneSpeed::Fdr
    }
}

/// How a cable runs: how many lanes, at what speed (`4xEDR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkRate {
    /// Lanes: 1, 2, 4, 8 or 12.
    pub width: u8,
    /// Their speed.
    pub speed: LaneSpeed,
}

impl LinkRate {
    /// A cable nothing is said of: 4x QDR, as ibkit has always written
    /// its fabrics for ibsim.
    pub const DEFAULT: LinkRate = LinkRate {
        width: 4,
        speed: LaneSpeed::Qdr,
    };

    /// Reads `4xEDR` (as ibnetdiscover writes it; `FDR10`, Mellanox's
    /// 10 Gb/s-signalled FDR, reads as QDR, which is what a PortInfo says
    /// of it).
    pub fn parse(s: &str) -> Result<LinkRate, String> {
        let (w, sp) = s
            .split_once(['x', 'X'])
            .ok_or_else(|| format!("{s:?} is not lanes x speed (4xEDR)"))?;
        let width = w
            .parse::<u8>()
            .ok()
            .filter(|w| [1, 2, 4, 8, 12].contains(w))
            .ok_or_else(|| format!("{w:?} lanes: not 1, 2, 4, 8 or 12"))?;
        let speed = if sp.eq_ignore_ascii_case("FDR10") {
            LaneSpeed::Qdr
        } else {
            *LaneSpeed::ALL
                .iter()
                .find(|x| x.name().eq_ignore_ascii_case(sp))
                .ok_or_else(|| {
                    format!("link speed {sp:?}: not SDR, DDR, QDR, FDR10, FDR, EDR, HDR or NDR")
                })?
        };
        Ok(LinkRate { width, speed })
    }
}

impl fmt::Display for LinkRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.speed.name())
    }
}

/// A fabric: nodes and, for every port, the port at the other end of its cable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// The nodes, switches first.
    pub nodes: Vec<Node>,
    /// `peer[n][p]`: the other end of node n's port p (index 0 unused).
    pub peer: Vec<Vec<Option<PortRef>>>,
    /// The rate of the cables that do not run at [`LinkRate::DEFAULT`],
    /// at both of their ends ([`Topology::set_rate`]).
    pub rates: std::collections::BTreeMap<PortRef, LinkRate>,
}

/// Why a topology could not be built or read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    /// The spec names no known topology.
    UnknownSpec(String),
    /// A parameter is out of range.
    BadParameter(String),
    /// A line of a topology file could not be understood.
    Parse {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// A cable names a port that does not exist or is already cabled.
    BadLink(String),
    /// Reading a file failed.
    Io(String),
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::UnknownSpec(s) => write!(
                f,
                "unknown topology {s:?} (try mport-ntree:M:N, fat-tree-324, fat-tree-648, fat-tree-5832, fat-tree-11664, random:SWITCHES:SEED, mesh:X:Y(:HOSTS), torus:X:Y(:HOSTS), mixed-rates, file:PATH)"
            ),
            TopologyError::BadParameter(s) => write!(f, "bad topology parameter: {s}"),
            TopologyError::Parse { line, what } => write!(f, "topology file line {line}: {what}"),
            TopologyError::BadLink(s) => write!(f, "bad link: {s}"),
            TopologyError::Io(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for TopologyError {}

impl Topology {
    /// Adds a node with all ports uncabled; returns its index.
    pub fn add_node(
        &mut self,
        kind: NodeType,
        ports: u8,
        guid: u64,
        name: String,
        level: Option<u8>,
    ) -> usize {
        self.nodes.push(Node {
            kind,
            ports,
            guid,
            name,
            level,
            enhanced_port0: false,
            sys_guid: None,
        });
        self.peer.push(vec![None; usize::from(ports) + 1]);
        self.nodes.len() - 1
    }

    /// Cables port `a` to port `b`; both must exist and be free.
    pub fn connect(&mut self, a: PortRef, b: PortRef) -> Result<(), TopologyError> {
        for (n, p) in [a, b] {
            let node = self
                .nodes
                .get(n)
                .ok_or_else(|| TopologyError::BadLink(format!("no node {n}")))?;
            if p == 0 || p > node.ports {
                return Err(TopologyError::BadLink(format!(
                    "{} has no port {p}",
                    node.name
                )));
            }
            if self.peer[n][usize::from(p)].is_some() {
                return Err(TopologyError::BadLink(format!(
                    "{} port {p} is already cabled",
                    node.name
                )));
            }
        }
        if a == b {
            return Err(TopologyError::BadLink(
                "a port cannot be cabled to itself".into(),
            ));
        }
        self.peer[a.0][usize::from(a.1)] = Some(b);
        self.peer[b.0][usize::from(b.1)] = Some(a);
        Ok(())
    }

    /// The rate of the cable at port `p` of node `n` (kept while the
    /// cable is cut, for when it comes back).
    pub fn rate_of(&self, n: usize, p: u8) -> LinkRate {
        self.rates
            .get(&(n, p))
            .copied()
            .unwrap_or(LinkRate::DEFAULT)
    }

    /// Makes the cable at `a` run at `rate`, at both ends; `a` must be
    /// cabled.
    pub fn set_rate(&mut self, a: PortRef, rate: LinkRate) -> Result<(), TopologyError> {
        let b = self
            .peer_of(a.0, a.1)
            .ok_or_else(|| TopologyError::BadLink(format!("port {a:?} is not cabled")))?;
        for end in [a, b] {
            if rate == LinkRate::DEFAULT {
                self.rates.remove(&end);
            } else {
                self.rates.insert(end, rate);
            }
        }
        Ok(())
    }

    /// The other end of a port's cable.
    pub fn peer_of(&self, n: usize, p: u8) -> Option<PortRef> {
        self.peer.get(n)?.get(usize::from(p)).copied().flatten()
    }

    /// Number of switches.
    pub fn switches(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.kind == NodeType::Switch)
            .count()
    }

    /// Number of channel adapters.
    pub fn cas(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.kind == NodeType::ChannelAdapter)
            .count()
    }

    /// Number of cables.
    pub fn links(&self) -> usize {
        self.peer
            .iter()
            .map(|ps| ps.iter().filter(|p| p.is_some()).count())
            .sum::<usize>()
            / 2
    }

    /// The topology a subnet manager discovered: its nodes (named by their
    /// NodeDescription where that is unique and non-empty, else by type and
    /// GUID as ibnetdiscover does) and the cables it saw from both ends.
    pub fn from_discovered(sm: &smi::sm::Sm) -> Topology {
        let nodes = sm.nodes();
        let texts: Vec<String> = nodes
            .iter()
            .map(|n| {
                n.description
                    .as_ref()
                    .and_then(|d| d.node_string.as_str().ok())
                    .unwrap_or("")
                    .trim_end_matches('\0')
                    .trim()
                    .to_string()
            })
            .collect();
        let mut t = Topology::default();
        for (i, n) in nodes.iter().enumerate() {
            let unique =
                !texts[i].is_empty() && texts.iter().filter(|x| **x == texts[i]).count() == 1;
            let name = if unique {
                texts[i].clone()
            } else {
                let tag = if n.is_switch() { "S" } else { "H" };
                format!("{tag}-{:016x}", n.info.node_guid.0)
            };
            let k = t.add_node(
                n.info.node_type,
                n.info.num_ports,
                n.info.node_guid.0,
                name,
                None,
            );
            let sys = n.info.system_image_guid.0;
            t.nodes[k].sys_guid = (sys != n.info.node_guid.0 && sys != 0).then_some(sys);
        }
        for (i, n) in nodes.iter().enumerate() {
            for (p, port) in n.ports.iter().enumerate().skip(1) {
                if let Some((m, q)) = port.peer {
                    if (i, p as u8) < (m, q) {
                        let _ = t.connect((i, p as u8), (m, q));
                        if let Some(r) = port.info.as_ref().and_then(active_rate) {
                            let _ = t.set_rate((i, p as u8), r);
                        }
                    }
                }
            }
        }
        t
    }

    /// True when every node can reach every other over the cables.
    pub fn is_connected(&self) -> bool {
        if self.nodes.is_empty() {
            return true;
        }
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![0usize];
        seen[0] = true;
        while let Some(n) = stack.pop() {
            for (m, _) in self.peer[n].iter().flatten() {
                if !seen[*m] {
                    seen[*m] = true;
                    stack.push(*m);
                }
            }
        }
        seen.into_iter().all(|s| s)
    }

    /// Builds the topology a spec names: `mport-ntree:M:N`, `fat-tree-324`,
    /// `fat-tree-648`, `fat-tree-5832`, `fat-tree-11664`,
    /// `random:SWITCHES:SEED`, `mesh:X:Y[:HOSTS]` and `torus:X:Y[:HOSTS]`
    /// (cabled by dimension, one host a switch unless told), `mixed-rates`
    /// (cables from 1x SDR to 12x HDR), or `file:PATH` (ibnetdiscover /
    /// ibsim format).
    pub fn from_spec(spec: &str) -> Result<Topology, TopologyError> {
        let num = |s: &str, what: &str| {
            s.parse::<u64>()
                .map_err(|_| TopologyError::BadParameter(format!("{what} {s:?} is not a number")))
        };
        let parts: Vec<&str> = spec.split(':').collect();
        match parts.as_slice() {
            ["mport-ntree", m, n] => {
                fat_tree::mport_ntree(num(m, "M")? as usize, num(n, "N")? as usize)
            }
            ["fat-tree-324"] => fat_tree::kary_ntree(18, 2, 36),
            ["fat-tree-648"] => fat_tree::mport_ntree(36, 2),
            ["fat-tree-5832"] => fat_tree::kary_ntree(18, 3, 36),
            ["fat-tree-11664"] => fat_tree::mport_ntree(36, 3),
            ["random", s, seed] => random::random(num(s, "SWITCHES")? as usize, num(seed, "SEED")?),
            [kind @ ("mesh" | "torus"), x, y, rest @ ..] if rest.len() <= 1 => {
                let hosts = match rest {
                    [h] => num(h, "HOSTS")?,
                    _ => 1,
                };
                let (x, y) = (num(x, "X")?, num(y, "Y")?);
                let side = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
                mesh::grid(side(x), side(y), side(hosts), *kind == "torus")
            }
            ["mixed-rates"] => rates::mixed_rates(),
            ["file", _, ..] => {
                let path = spec.strip_prefix("file:").unwrap_or_default();
                if path.is_empty() {
                    return Err(TopologyError::BadParameter(
                        "file: names no file (file:PATH)".into(),
                    ));
                }
                let text = read_bounded(path)?;
                netfile::parse(&text)
            }
            _ => Err(TopologyError::UnknownSpec(spec.to_string())),
        }
    }
}

/// The rate a port's PortInfo says its link runs at (`None`: a width or
/// speed it does not say).
fn active_rate(pi: &mad_core::attr::PortInfo) -> Option<LinkRate> {
    use mad_core::attr::{LinkSpeed, LinkSpeedExt, LinkWidth};
    let width = match pi.link_width_active {
        w if w == LinkWidth::W1X => 1,
        w if w == LinkWidth::W2X => 2,
        w if w == LinkWidth::W4X => 4,
        w if w == LinkWidth::W8X => 8,
        w if w == LinkWidth::W12X => 12,
        _ => return None,
    };
    let speed = match (pi.link_speed_ext_active, pi.link_speed_active) {
        (e, _) if e == LinkSpeedExt::FDR => LaneSpeed::Fdr,
        (e, _) if e == LinkSpeedExt::EDR => LaneSpeed::Edr,
        (e, _) if e == LinkSpeedExt::HDR => LaneSpeed::Hdr,
        (e, _) if e == LinkSpeedExt::NDR => LaneSpeed::Ndr,
        (_, s) if s == LinkSpeed::SDR => LaneSpeed::Sdr,
        (_, s) if s == LinkSpeed::DDR => LaneSpeed::Ddr,
        (_, s) if s == LinkSpeed::QDR => LaneSpeed::Qdr,
        _ => return None,
    };
    Some(LinkRate { width, speed })
}

/// The largest topology file read: an ibnetdiscover file of the
/// 11,664-node fat tree is under 4 MiB.
pub const MAX_FILE: u64 = 64 * 1024 * 1024;

/// Reads a topology file of at most [`MAX_FILE`] bytes of UTF-8.
fn read_bounded(path: &str) -> Result<String, TopologyError> {
    use std::io::Read;
    let io = |e: std::io::Error| TopologyError::Io(format!("{path}: {e}"));
    let mut data = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_FILE + 1)
        .read_to_end(&mut data)
        .map_err(io)?;
    if data.len() as u64 > MAX_FILE {
        return Err(TopologyError::Io(format!(
            "{path}: larger than {} MiB, too big for a topology file",
            MAX_FILE >> 20
        )));
    }
    String::from_utf8(data).map_err(|e| {
        TopologyError::Io(format!(
            "{path}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests;
