//! Running an SM on the fabric: bring-up, and running until quiet or a
//! chosen time.

use super::*;

impl Fabric {
    /// Runs `sm` against this fabric until the subnet is up or nothing more
    /// can happen; returns whether it came up.
    pub fn bring_up(&mut self, sm: &mut Sm) -> bool {
        self.run(sm)
    }

    /// Runs `sm` until it is idle (every queued change applied) or nothing
    /// more can happen; returns whether the subnet is up with nothing pending.
    pub fn run(&mut self, sm: &mut Sm) -> bool {
        self.run_for(sm, None)
    }

    /// Runs `sm` and the fabric until simulated time `t_ns`: scheduled
    /// events happen, traps are sent, light sweeps fire. Returns whether the
    /// SM is idle at the end.
    pub fn run_until(&mut self, sm: &mut Sm, t_ns: u64) -> bool {
        self.run_for(sm, Some(t_ns))
    }

    pub(super) fn run_for(&mut self, sm: &mut Sm, until: Option<u64>) -> bool {
        let mut phase = sm.phase();
        let mut since = std::time::Instant::now();
        let r = self.run_inner(sm, &mut phase, &mut since, until);
        *self.phase_wall_ms.entry(phase).or_default() += since.elapsed().as_secs_f64() * 1e3;
        r
    }

    pub(super) fn run_inner(
        &mut self,
        sm: &mut Sm,
        phase: &mut Phase,
        since: &mut std::time::Instant,
        until: Option<u64>,
    ) -> bool {
        loop {
            if sm.phase() != *phase {
                *self.phase_wall_ms.entry(*phase).or_default() +=
                    since.elapsed().as_secs_f64() * 1e3;
                *phase = sm.phase();
                *since = std::time::Instant::now();
            }
            let now_ms = self.now_ns / 1_000_000;
            while let Some(t) = sm.poll_transmit(now_ms) {
                self.send(t);
            }
            if !self.trap_nodes.is_empty() {
                self.send_traps();
            }
            let inbox = self.take_inbox();
            let answered = !inbox.is_empty();
            for r in inbox {
                sm.handle_response(&r, self.now_ns / 1_000_000);
            }
            if answered {
                // What the answers released goes out before time moves on.
                continue;
            }
            if sm.phase() == Phase::Failed {
                return false;
            }
            let next_event = self.queue.peek().map(|Reverse((t, _, _))| *t);
            let next_timer = sm.poll_timeout().map(|ms| ms * 1_000_000);
            match until {
                None if sm.is_idle() => return true,
                Some(end) => {
                    let next = match (next_event, next_timer) {
                        (Some(e), Some(t)) => Some(e.min(t)),
                        (e, t) => e.or(t),
                    };
                    if next.is_none_or(|n| n > end) {
                        self.now_ns = self.now_ns.max(end);
                        return sm.is_idle();
                    }
                }
                None => {}
            }
            match (next_event, next_timer) {
                (Some(e), Some(t)) if t < e => {
                    self.now_ns = self.now_ns.max(t);
                    sm.handle_timeout(self.now_ns / 1_000_000);
                }
                (Some(_), _) => {
                    self.step();
                }
                (None, Some(t)) => {
                    self.now_ns = self.now_ns.max(t);
                    sm.handle_timeout(self.now_ns / 1_000_000);
                }
                (None, None) => {
                    if self.inbox.is_empty() && !sm.has_queued() {
                        return sm.phase() == Phase::Done;
                    }
                }
            }
        }
    }
}
