//! Ports that keep reporting errors: traps 129 (link integrity), 130
//! (buffer overrun) and 131 (flow-control watchdog), counted as OpenSM's
//! trap receiver counts them (`osm_trap_rcv.c`):
//! - each trap is counted under its number, the LID and the port it names;
//!   a repeat within 5 s of the one before adds to the count, a longer
//!   silence starts it again;
//! - from the 11th in a row, the port is unhealthy: the SM routes again
//!   without the link (a switch-to-switch link with an unhealthy end
//!   carries no route; a CA's only link is kept, the CA would be cut off
//!   else) and waits 60 s of silence before it counts the port healthy;
//!   further repeats only start those 60 s again;
//! - from the 251st, with OpenSM's `babbling_port_policy`, the SM
//!   disables the end of the link nearer to it (Set(PortInfo) with
//!   PortState Down and PortPhysicalState Disabled): the link stays down
//!   until someone enables the port again (`ibportstate … enable`).

use super::link::ForcedLink;
use super::*;
use mad_core::notice::TrapPortError;

/// Repeats after which a port is unhealthy (OpenSM's 10).
pub const NOISY_REPEATS: u32 = 10;
/// Repeats after which a babbling port is disabled (OpenSM's 250).
pub const BABBLING_REPEATS: u32 = 250;
/// The silence that ends a run of repeats (OpenSM's trap aging, 5 s).
pub const AGING_MS: u64 = 5_000;
/// The silence after which an unhealthy port is healthy again (OpenSM's
/// 60 s).
pub const UNHEALTHY_AGING_MS: u64 = 60_000;
/// The most runs counted at once: a new one past it replaces the one
/// nearest its end, so no flood of distinct traps makes the SM grow.
pub const MAX_RUNS: usize = 4096;

/// One run of the same trap.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// Traps in the run so far.
    count: u32,
    /// When it ends without another.
    until_ms: u64,
    /// The port it made unhealthy: (node, port).
    unhealthy: Option<(usize, u8)>,
}

/// The runs of port-error traps, and the ports they made unhealthy.
#[derive(Clone, Debug, Default)]
pub(super) struct NoisyPorts {
    /// (trap number, LID, port) → its run.
    runs: BTreeMap<(u16, u16, u8), Run>,
    /// The unhealthy ports, (node, port) → how many runs made them so.
    sick: BTreeMap<(usize, u8), usize>,
    /// The earliest end of a run (none past it needs looking at before).
    earliest_ms: u64,
}

impl NoisyPorts {
    /// Ends the runs silent since `now_ms`: the ports they had made
    /// unhealthy that are healthy again.
    fn expire(&mut self, now_ms: u64) -> Vec<(usize, u8)> {
        if self.runs.is_empty() || self.earliest_ms > now_ms {
            return Vec::new();
        }
        let ended: Vec<(u16, u16, u8)> = (self.runs.iter())
            .filter(|(_, r)| r.until_ms <= now_ms)
            .map(|(k, _)| *k)
            .collect();
        let healed = ended.iter().filter_map(|k| self.remove(k)).collect();
        self.earliest_ms = self.runs.values().map(|r| r.until_ms).min().unwrap_or(0);
        healed
    }

    /// Drops the run `key`: its port, if that is healthy again.
    fn remove(&mut self, key: &(u16, u16, u8)) -> Option<(usize, u8)> {
        let port = self.runs.remove(key)?.unhealthy?;
        match self.sick.get_mut(&port) {
            Some(n) if *n > 1 => {
                *n -= 1;
                None
            }
            _ => self.sick.remove(&port).map(|_| port),
        }
    }

    /// Marks the port of the run `key` unhealthy; true when it was not.
    fn mark(&mut self, key: (u16, u16, u8), node: usize, port: u8) -> bool {
        let Some(r) = self.runs.get_mut(&key) else {
            return false;
        };
        if r.unhealthy.is_some() {
            return false;
        }
        r.unhealthy = Some((node, port));
        let n = self.sick.entry((node, port)).or_insert(0);
        *n += 1;
        *n == 1
    }

    /// Whether port `port` of node `i` is unhealthy.
    pub(super) fn is_unhealthy(&self, i: usize, port: u8) -> bool {
        self.sick.contains_key(&(i, port))
    }
}

impl Sm {
    /// Trap `number` (129–131) reached the SM: counted; a port that keeps
    /// reporting is routed around, and a babbling one disabled (see the
    /// module's notes).
    pub(super) fn on_port_error(&mut self, number: u16, t: &TrapPortError, now_ms: u64) {
        self.age_noisy_ports(now_ms);
        let key = (number, t.lid.0, t.port_num);
        let before = self.noisy.runs.get(&key).map_or(0, |r| r.count);
        let aging = if before >= NOISY_REPEATS {
            UNHEALTHY_AGING_MS
        } else {
            AGING_MS
        };
        if !self.noisy.runs.contains_key(&key) && self.noisy.runs.len() >= MAX_RUNS {
            let nearest = (self.noisy.runs.iter())
                .min_by_key(|(_, r)| r.until_ms)
                .map(|(k, _)| *k);
            if let Some(port) = nearest.and_then(|k| self.noisy.remove(&k)) {
                self.healed(port);
            }
        }
        let run = self.noisy.runs.entry(key).or_insert(Run {
            count: 0,
            until_ms: 0,
            unhealthy: None,
        });
        run.count = run.count.saturating_add(1);
        run.until_ms = now_ms + aging;
        let until = run.until_ms;
        if self.noisy.runs.len() == 1 || until < self.noisy.earliest_ms {
            self.noisy.earliest_ms = until;
        }
        if before < NOISY_REPEATS {
            return;
        }
        let Some((node, _)) = self.db.by_lid(t.lid) else {
            return;
        };
        let (node, port) = (node.0, t.port_num);
        let exists = (self.db.nodes().get(node)).is_some_and(|n| usize::from(port) < n.ports.len());
        if !exists {
            return;
        }
        let guid = self.db.nodes()[node].info.node_guid;
        if before >= BABBLING_REPEATS && self.cfg.babbling_port_policy {
            if let Some((i, p)) = self.disable_port(node, port) {
                self.noisy.remove(&key);
                self.emit(SmEvent::NoisyPort {
                    guid,
                    port,
                    trap: number,
                    repeats: before + 1,
                    disabled: Some((self.db.nodes()[i].info.node_guid, p)),
                });
                return;
            }
        }
        if self.noisy.mark(key, node, port) {
            self.emit(SmEvent::NoisyPort {
                guid,
                port,
                trap: number,
                repeats: before + 1,
                disabled: None,
            });
            self.reroute_pending = true;
            // As for a trap 128: the sweep starts now, its TrapRepress
            // queued before it.
            self.sweep_pending = true;
            if self.phase == Phase::Done && self.out.inflight.is_empty() {
                self.start_sweep(now_ms);
            }
        }
    }

    /// Disables the end of port `port` of node `i`'s link nearer to the
    /// SM (fewer hops from it; OpenSM's choice): Set(PortInfo) with its
    /// PortInfo as held, PortState Down and PortPhysicalState Disabled.
    /// Which end, or `None` when neither is known.
    fn disable_port(&mut self, i: usize, port: u8) -> Option<(usize, u8)> {
        let n = self.db.nodes().get(i)?;
        let hops = |n: &SmNode| n.path.hop_count();
        let (i, port) = match n.ports.get(usize::from(port))?.peer {
            Some((m, q)) if hops(&self.db.nodes()[m]) < hops(n) => (m, q),
            _ => (i, port),
        };
        let mut pi = self.db.nodes()[i].ports.get(usize::from(port))?.info?;
        self.stamp_m_key(i, port, &mut pi);
        pi.port_state = PortState::Down;
        pi.port_physical_state = PortPhysicalState::Disabled;
        ForcedLink::default().apply(&mut pi);
        self.set_node(i, &pi, u32::from(port), Purpose::SetState { node: i, port });
        Some((i, port))
    }

    /// Ports that keep reporting errors and are routed around, as (node,
    /// port) of [`Sm::nodes`].
    pub fn unhealthy_ports(&self) -> Vec<(usize, u8)> {
        self.noisy.sick.keys().copied().collect()
    }

    /// Whether the link at port `p` of switch node `i` (to another
    /// switch) carries routes: not when either end is unhealthy.
    pub(super) fn link_healthy(&self, i: usize, p: u8, peer: (usize, u8)) -> bool {
        !self.noisy.is_unhealthy(i, p) && !self.noisy.is_unhealthy(peer.0, peer.1)
    }

    /// Runs silent long enough end; a port healthy again is routed over
    /// at the next sweep, which this asks for.
    pub(super) fn age_noisy_ports(&mut self, now_ms: u64) {
        for port in self.noisy.expire(now_ms) {
            self.healed(port);
        }
    }

    /// Port `port` (node, port) is healthy again: routed over at the next
    /// routing, and said.
    fn healed(&mut self, (node, port): (usize, u8)) {
        self.reroute_pending = true;
        if let Some(n) = self.db.nodes().get(node) {
            let guid = n.info.node_guid;
            self.emit(SmEvent::PortQuiet { guid, port });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sm::SmConfig;

    /// A flood of traps that each start a run of their own (any LID, any
    /// port, any of the three numbers) keeps at most [`MAX_RUNS`] runs,
    /// and the runs end after their silence.
    #[test]
    fn a_flood_of_distinct_traps_stays_bounded() {
        let mut sm = Sm::new(SmConfig::default());
        for k in 0..MAX_RUNS as u32 + 1000 {
            let t = TrapPortError {
                lid: Lid((k % 60_000) as u16 + 1),
                port_num: (k / 60_000) as u8,
            };
            sm.on_port_error(129 + (k % 3) as u16, &t, u64::from(k));
            assert!(sm.noisy.runs.len() <= MAX_RUNS);
        }
        assert_eq!(sm.noisy.runs.len(), MAX_RUNS);
        assert!(sm.unhealthy_ports().is_empty(), "no LID of a node");
        let t = TrapPortError {
            lid: Lid(1),
            port_num: 1,
        };
        sm.on_port_error(129, &t, 10_000_000);
        assert_eq!(sm.noisy.runs.len(), 1, "the others ended");
    }
}
