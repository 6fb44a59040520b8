//! Is the fabric correct after a change? One definition, used at every
//! size: every live end port's walk through the installed LFTs to a LID
//! ends at the end port that holds that LID (a switch's port 0, or the CA
//! port itself: a multi-port CA's ports are end ports each, and a packet
//! for one port's LID that arrives by another is not delivered). For an enabled LID (a switch's, a CA's, a
//! hypervisor's PF, a running VM's VF) that node accepts the packet; for a
//! LID parked on a free or disabled VF it is the hypervisor whose port holds
//! it, which does not. A walk that stops at a switch without a route, that
//! arrives anywhere else, or that goes round in a loop fails.
//!
//! [`Fabric::verify`] walks to every assigned LID, [`Fabric::verify_lids`]
//! to the LIDs a change touched; both use the same walks and the same
//! rules, and [`Verify::check`] says which one ran.
//!
//! Walks are not taken one by one: for each LID every switch's outcome is
//! worked out once (the LFT entries for one LID form a graph in which every
//! switch has one successor) and every CA port's walk is its first switch's.
//! All pairs therefore cost O(LIDs × nodes), not O(LIDs × nodes × hops).

use super::{Fabric, SimNode};
use mad_core::attr::PortState;
use mad_core::Lid;
use std::fmt;

/// How many failures a [`Verify`] keeps, to say what went wrong.
pub const MAX_FAILURES: usize = 8;

/// Which LIDs a check walked to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Check {
    /// Every LID a live node holds.
    #[default]
    AllLids,
    /// Only the LIDs a change touched.
    ChangedLids,
}

impl Check {
    /// The check in words, as ibkit's tables and JSON say it.
    pub fn label(self) -> &'static str {
        match self {
            Check::AllLids => "all pairs",
            Check::ChangedLids => "changed LIDs",
        }
    }
}

/// Where a walk that failed ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// It stopped at this node: a switch whose LFT has no usable port for
    /// the LID (unrouted, beyond LinearFDBTop, port 0 for a LID that is not
    /// the switch's, a port without a cable), or a CA whose port 1 has no
    /// cable.
    NoRoute(usize),
    /// It arrived at this CA by a port that does not hold the LID.
    Elsewhere(usize),
    /// It went round in a loop.
    Loop,
}

/// One thing a check found wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The walk from `src` to `lid` did not end at the node holding it.
    Walk {
        /// The node the walk started from.
        src: usize,
        /// The LID it was sent to.
        lid: Lid,
        /// The LID is parked on a free or disabled VF.
        parked: bool,
        /// Where it ended.
        end: WalkEnd,
    },
    /// A LID the check was asked about is held by no live node.
    Unheld(Lid),
    /// A live node (a switch, a CA's cabled port, a hypervisor's PF) has
    /// no LID: nothing can reach it.
    NoLid(usize),
    /// Two live nodes hold the same LID.
    Duplicate {
        /// The LID.
        lid: Lid,
        /// One holder.
        first: usize,
        /// The other.
        second: usize,
    },
}

impl Failure {
    /// One line that names the nodes by their topology names.
    pub fn describe(&self, f: &Fabric) -> String {
        let name = |n: usize| {
            f.topo
                .nodes
                .get(n)
                .map_or_else(|| format!("node {n}"), |x| x.name.clone())
        };
        match *self {
            Failure::Walk {
                src,
                lid,
                parked,
                end,
            } => {
                let what = if parked {
                    format!(
                        "LID {} (parked on a free VF of {})",
                        lid.0,
                        holder_name(f, lid)
                    )
                } else {
                    format!("LID {} (held by {})", lid.0, holder_name(f, lid))
                };
                let how = match end {
                    WalkEnd::NoRoute(n) => format!("stopped at {} without a route", name(n)),
                    WalkEnd::Elsewhere(n) => {
                        format!("arrived at {}, which does not hold it", name(n))
                    }
                    WalkEnd::Loop => "went round in a loop".to_string(),
                };
                format!("the walk from {} to {what} {how}", name(src))
            }
            Failure::Unheld(lid) => format!("no live node holds LID {}", lid.0),
            Failure::NoLid(n) => format!("{} is connected but has no LID", name(n)),
            Failure::Duplicate { lid, first, second } => {
                format!(
                    "LID {} is held by both {} and {}",
                    lid.0,
                    name(first),
                    name(second)
                )
            }
        }
    }
}

fn holder_name(f: &Fabric, lid: Lid) -> String {
    let live = f.reachable_from_sm();
    match holders(f, &live).get(usize::from(lid.0)).copied().flatten() {
        Some(h) => f.topo.nodes[h.node as usize].name.clone(),
        None => "no node".to_string(),
    }
}

/// The outcome of a check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verify {
    /// Which LIDs were walked to.
    pub check: Check,
    /// Live end ports walked from (switches and cabled CA ports).
    pub sources: u64,
    /// LIDs walked to.
    pub lids: u64,
    /// (CA, enabled LID) walks delivered to the LID's holder.
    pub reachable: u64,
    /// (CA, enabled LID) walks dropped or delivered elsewhere.
    pub unreachable: u64,
    /// (CA, enabled LID) walks that looped.
    pub loops: u64,
    /// (switch, enabled LID) walks that reached the LID's holder.
    pub switch_reachable: u64,
    /// (switch, enabled LID) walks that did not reach the LID's holder.
    pub switch_unreachable: u64,
    /// Walks to a parked LID (a free or disabled VF's) that ended at the
    /// hypervisor holding it.
    pub parked: u64,
    /// Walks to a parked LID that ended anywhere else.
    pub misparked: u64,
    /// LIDs held by no live node or by two, and live nodes without a LID
    /// (the full check only).
    pub bad_lids: u64,
    /// The first [`MAX_FAILURES`] failures.
    pub failures: Vec<Failure>,
}

impl Verify {
    /// True when nothing failed.
    pub fn ok(&self) -> bool {
        self.unreachable == 0
            && self.loops == 0
            && self.switch_unreachable == 0
            && self.misparked == 0
            && self.bad_lids == 0
    }

    /// Walks taken.
    pub fn walks(&self) -> u64 {
        self.reachable
            + self.unreachable
            + self.loops
            + self.parked
            + self.misparked
            + self.switch_reachable
            + self.switch_unreachable
    }

    fn fail(&mut self, f: Failure) {
        if self.failures.len() < MAX_FAILURES {
            self.failures.push(f);
        }
    }
}

impl fmt::Display for Verify {
    /// Which check ran and what it found, in one line.
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = self.check.label();
        write!(
            out,
            "{what}: {} live end ports × {} LIDs, {} walks; {} failed",
            self.sources,
            self.lids,
            self.walks(),
            self.unreachable
                + self.loops
                + self.switch_unreachable
                + self.misparked
                + self.bad_lids
        )
    }
}

/// The node that holds a LID, and whether it holds it parked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Holder {
    node: u32,
    /// The end port: a switch's 0, a CA's port.
    port: u8,
    parked: bool,
}

impl Holder {
    /// The walk outcome that delivers to it ([`end_at`]).
    fn end(&self) -> u32 {
        end_at(self.node as usize, self.port)
    }
}

/// A walk's outcome: it ended at `node`, arriving by `port` (a CA), or
/// stopping there (a switch, port 0).
fn end_at(node: usize, port: u8) -> u32 {
    (node as u32) << 8 | u32::from(port)
}

/// The node of a walk's outcome.
fn end_node(end: u32) -> usize {
    (end >> 8) as usize
}

/// The end ports of live node `n` of `f`: a switch's port 0, a CA's
/// cabled ports.
fn end_ports(f: &Fabric, i: usize) -> impl Iterator<Item = u8> + '_ {
    let ports = match f.nodes[i] {
        SimNode::Switch(_) => 0..=0,
        _ => 1..=f.topo.nodes[i].ports,
    };
    ports.filter(move |&p| p == 0 || f.topo.peer_of(i, p).is_some())
}

/// Holders of every LID, indexed by LID, from the live nodes only; the
/// second holder of a LID is reported through `dup`.
fn holders_with(
    f: &Fabric,
    live: &[bool],
    mut dup: impl FnMut(Lid, usize, usize),
) -> Vec<Option<Holder>> {
    let mut by_lid: Vec<Option<Holder>> = vec![None; 0x1_0000];
    let mut put = |lid: Lid, node: usize, port: u8, parked: bool| {
        if lid.0 == 0 {
            return;
        }
        let slot = &mut by_lid[usize::from(lid.0)];
        match slot {
            Some(h) => dup(lid, h.node as usize, node),
            None => {
                *slot = Some(Holder {
                    node: node as u32,
                    port,
                    parked,
                })
            }
        }
    };
    for (i, n) in f.nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        for port in end_ports(f, i) {
            let (base, lmc) = n.port_lid(port);
            if base.0 != 0 {
                for k in 0..1u16 << lmc {
                    put(Lid(base.0.saturating_add(k)), i, port, false);
                }
            }
        }
        if let SimNode::Hypervisor(h) = n {
            for (port, vports) in (1..).zip(&h.vports) {
                for v in &vports.vfs {
                    put(v.vport_lid, i, port, v.vport_state == PortState::Down);
                }
            }
        }
    }
    by_lid
}

fn holders(f: &Fabric, live: &[bool]) -> Vec<Option<Holder>> {
    holders_with(f, live, |_, _, _| {})
}

/// Per-LID memory of the switches' outcomes, reused across LIDs.
struct Memo {
    stamp: u32,
    done: Vec<u32>,
    on_path: Vec<u32>,
    end: Vec<u32>,
    path: Vec<usize>,
}

/// An outcome: the node a walk ended at, or a loop.
const LOOP: u32 = u32::MAX;

impl Fabric {
    /// Every live node (connected to the SM's by cables) walks to every LID
    /// a live node holds; see the module docs for what must hold.
    pub fn verify(&self) -> Verify {
        self.check(None)
    }

    /// Every live node walks to each of `lids` only, under the same rules
    /// as [`Fabric::verify`]: the check after a change that touched just
    /// these LIDs (the rest of every LFT is the caller's to compare).
    pub fn verify_lids(&self, lids: &[Lid]) -> Verify {
        self.check(Some(lids))
    }

    fn check(&self, only: Option<&[Lid]>) -> Verify {
        let live = self.reachable_from_sm();
        let mut v = Verify {
            check: if only.is_some() {
                Check::ChangedLids
            } else {
                Check::AllLids
            },
            ..Verify::default()
        };
        let mut dups = Vec::new();
        let by_lid = holders_with(self, &live, |lid, a, b| dups.push((lid, a, b)));
        let mut targets: Vec<Lid> = match only {
            Some(l) => l.to_vec(),
            None => (1..=u16::MAX)
                .filter(|&l| by_lid[usize::from(l)].is_some())
                .map(Lid)
                .collect(),
        };
        targets.sort_unstable();
        targets.dedup();
        for (lid, first, second) in dups {
            if only.is_none() || targets.binary_search(&lid).is_ok() {
                v.bad_lids += 1;
                v.fail(Failure::Duplicate { lid, first, second });
            }
        }
        // Every live end port, as (node, port).
        let sources: Vec<(usize, u8)> = (0..self.nodes.len())
            .filter(|&i| live[i])
            .flat_map(|i| end_ports(self, i).map(move |p| (i, p)))
            .collect();
        v.sources = sources.len() as u64;
        if only.is_none() {
            for &(i, p) in &sources {
                if self.nodes[i].port_lid(p).0 .0 == 0 {
                    v.bad_lids += 1;
                    v.fail(Failure::NoLid(i));
                }
            }
        }
        v.lids = targets.len() as u64;
        let n = self.nodes.len();
        let mut memo = Memo {
            stamp: 0,
            done: vec![0; n],
            on_path: vec![0; n],
            end: vec![0; n],
            path: Vec::new(),
        };
        for &lid in &targets {
            let Some(h) = by_lid[usize::from(lid.0)] else {
                v.bad_lids += 1;
                v.fail(Failure::Unheld(lid));
                continue;
            };
            memo.stamp += 1;
            for &(src, port) in &sources {
                let is_switch = matches!(self.nodes[src], SimNode::Switch(_));
                if end_at(src, port) == h.end() || (is_switch && src == h.node as usize) {
                    continue;
                }
                let end = if is_switch {
                    self.resolve(lid, (src, 0), &mut memo)
                } else {
                    match self.topo.peer_of(src, port) {
                        Some(first) => self.resolve(lid, first, &mut memo),
                        None => end_at(src, port),
                    }
                };
                if end == h.end() {
                    if h.parked {
                        v.parked += 1;
                    } else if is_switch {
                        v.switch_reachable += 1;
                    } else {
                        v.reachable += 1;
                    }
                    continue;
                }
                let end = match end {
                    LOOP => WalkEnd::Loop,
                    e if matches!(self.nodes[end_node(e)], SimNode::Switch(_))
                        || e == end_at(src, port) =>
                    {
                        WalkEnd::NoRoute(end_node(e))
                    }
                    e => WalkEnd::Elsewhere(end_node(e)),
                };
                if h.parked {
                    v.misparked += 1;
                } else if is_switch {
                    v.switch_unreachable += 1;
                } else if end == WalkEnd::Loop {
                    v.loops += 1;
                } else {
                    v.unreachable += 1;
                }
                v.fail(Failure::Walk {
                    src,
                    lid,
                    parked: h.parked,
                    end,
                });
            }
        }
        v
    }

    /// Where a packet for `lid` that has reached `start` (node, arrival
    /// port) ends ([`end_at`]): the first CA it arrives at and the port it
    /// arrives by, the switch where it stops, or [`LOOP`]. Switches'
    /// outcomes are remembered for the current LID.
    fn resolve(&self, lid: Lid, start: (usize, u8), m: &mut Memo) -> u32 {
        m.path.clear();
        let (mut node, mut arrival) = start;
        let end = loop {
            let SimNode::Switch(s) = &self.nodes[node] else {
                break end_at(node, arrival);
            };
            if m.done[node] == m.stamp {
                break m.end[node];
            }
            if m.on_path[node] == m.stamp {
                break LOOP;
            }
            m.on_path[node] = m.stamp;
            m.path.push(node);
            let p = s.model.lft_port(lid);
            if p == 0 || p == mad_core::attr::forwarding::DROP_PORT {
                break end_at(node, 0);
            }
            match self.topo.peer_of(node, p) {
                Some(next) => (node, arrival) = next,
                None => break end_at(node, 0),
            }
        };
        for &n in &m.path {
            m.done[n] = m.stamp;
            m.end[n] = end;
        }
        end
    }

    /// The walks [`Fabric::verify`] would take: live end ports × LIDs
    /// they hold (to choose between it and [`Fabric::verify_lids`] by cost).
    pub fn all_pairs_walks(&self) -> u64 {
        let live = self.reachable_from_sm();
        let sources = (0..self.nodes.len())
            .filter(|&i| live[i])
            .map(|i| end_ports(self, i).count() as u64)
            .sum::<u64>();
        let lids = holders(self, &live).iter().filter(|h| h.is_some()).count() as u64;
        sources * lids
    }

    /// Which nodes the cables connect to the SM's node now.
    pub fn reachable_from_sm(&self) -> Vec<bool> {
        let mut seen = vec![false; self.nodes.len()];
        seen[self.sm_node] = true;
        let mut stack = vec![self.sm_node];
        while let Some(n) = stack.pop() {
            for (m, _) in self.topo.peer[n].iter().flatten() {
                if !seen[*m] {
                    seen[*m] = true;
                    stack.push(*m);
                }
            }
        }
        seen
    }
}
