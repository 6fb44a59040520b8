//! Traps an SMA raises: queued, sent LID-routed to the master SM, and sent
//! again every 4.096 µs × 2^SubnetTimeOut until the SM answers TrapRepress.

use heapless::Vec;
use mad_core::notice::Notice;

/// Traps pending at once; a further one replaces the oldest.
pub const MAX_PENDING: usize = 8;

/// One outstanding trap.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    /// The notice.
    pub notice: Notice,
    /// The port that raises it.
    pub port: u8,
    /// TransactionID of the Trap (kept across repeats).
    pub tid: u64,
    /// When to send it next (milliseconds).
    pub next_ms: u64,
    /// Times sent so far.
    pub sent: u32,
}

/// The trap queue of one SMA.
#[derive(Clone, Debug, Default)]
pub struct TrapQueue {
    pending: Vec<Pending, MAX_PENDING>,
    next_tid: u64,
}

impl TrapQueue {
    /// Queues a trap for immediate sending.
    pub fn raise(&mut self, notice: Notice, port: u8, now_ms: u64) {
        self.next_tid = self.next_tid.wrapping_add(1);
        let p = Pending {
            notice,
            port,
            tid: 0x7A00_0000_0000_0000 | self.next_tid,
            next_ms: now_ms,
            sent: 0,
        };
        if self.pending.is_full() {
            self.pending.remove(0);
        }
        let _ = self.pending.push(p);
    }
    /// The trap due at `now_ms`, if any, rescheduled `interval_ms` later.
    pub fn due(&mut self, now_ms: u64, interval_ms: u64) -> Option<Pending> {
        let p = self.pending.iter_mut().find(|p| p.next_ms <= now_ms)?;
        p.next_ms = now_ms + interval_ms.max(1);
        p.sent += 1;
        Some(p.clone())
    }
    /// Removes the trap a TrapRepress with this TransactionID answers;
    /// returns whether one was pending.
    pub fn repress(&mut self, tid: u64) -> bool {
        match self.pending.iter().position(|p| p.tid == tid) {
            Some(i) => {
                self.pending.remove(i);
                true
            }
            None => false,
        }
    }
    /// Traps still waiting for a TrapRepress.
    pub fn pending(&self) -> &[Pending] {
        &self.pending
    }
}

/// The trap repeat interval for a SubnetTimeOut value, in milliseconds
/// (4.096 µs × 2^value, at least 1 ms).
pub fn interval_ms(subnet_time_out: u8) -> u64 {
    ((4096u64 << subnet_time_out.min(31)) / 1_000_000).max(1)
}
