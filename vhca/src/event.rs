//! The event channel: a ring in guest memory on which the backend forwards
//! completion events and QP/CQ async events to the owning guest. The
//! backend writes every event it has, publishes the producer index once,
//! and notifies once: consecutive events share one notification.
//!
//! ```text
//! base + 0    prod     u32 LE, written by the backend
//! base + 4    cons     u32 LE, written by the guest
//! base + 8    dropped  u32 LE, events the backend could not queue
//! base + 12   waiting  u32 LE, guest: 1 while it sleeps for events (the
//!                      backend notifies only then)
//! base + 64   EV_SLOTS × 16 bytes: kind u16, zero u16, zero u32, handle u64
//! ```

use crate::proto::Handle;
use std::sync::atomic::{fence, Ordering};
use vm_memory::{Bytes, GuestAddress, GuestMemory, Permissions};

/// Events the ring holds.
pub const EV_SLOTS: u32 = 64;
/// Bytes of an event.
pub const EV_SIZE: u64 = 16;
/// Bytes of the ring in guest memory.
pub const EVENT_RING_BYTES: u64 = 64 + EV_SLOTS as u64 * EV_SIZE;

const PROD: u64 = 0;
const CONS: u64 = 4;
const DROPPED: u64 = 8;
const WAITING: u64 = 12;

fn slot(base: u64, i: u32) -> GuestAddress {
    GuestAddress(base + 64 + u64::from(i % EV_SLOTS) * EV_SIZE)
}

/// An event as the guest reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// [`crate::layout::event`] kind.
    pub kind: u16,
    /// The CQ's or QP's handle.
    pub handle: Handle,
}

/// The backend's end.
#[derive(Debug)]
pub struct EventWriter {
    base: u64,
    prod: u32,
    dropped: u32,
}

impl EventWriter {
    /// The ring at `base`; refused unless it lies in `mem`.
    pub fn attach<M: GuestMemory>(mem: &M, base: u64) -> Option<EventWriter> {
        let fits = base.checked_add(EVENT_RING_BYTES).is_some()
            && base % 8 == 0
            && mem.check_range(
                GuestAddress(base),
                EVENT_RING_BYTES as usize,
                Permissions::ReadWrite,
            );
        fits.then_some(EventWriter {
            base,
            prod: 0,
            dropped: 0,
        })
    }

    /// Queues an event (not yet visible); false when the ring is full or
    /// the guest's consumer index is out of range (the event is counted
    /// as dropped).
    pub fn push<M: GuestMemory>(&mut self, mem: &M, kind: u16, handle: u64) -> bool {
        let cons = mem
            .load::<u32>(GuestAddress(self.base + CONS), Ordering::Acquire)
            .unwrap_or(self.prod);
        if self.prod.wrapping_sub(cons) >= EV_SLOTS {
            self.dropped = self.dropped.wrapping_add(1);
            let _ = mem.store(
                self.dropped,
                GuestAddress(self.base + DROPPED),
                Ordering::Release,
            );
            return false;
        }
        let mut b = [0u8; EV_SIZE as usize];
        b[0..2].copy_from_slice(&kind.to_le_bytes());
        b[8..16].copy_from_slice(&handle.to_le_bytes());
        if mem.write_slice(&b, slot(self.base, self.prod)).is_err() {
            return false;
        }
        self.prod = self.prod.wrapping_add(1);
        true
    }

    /// Makes what was pushed visible.
    pub fn publish<M: GuestMemory>(&self, mem: &M) {
        let _ = mem.store(self.prod, GuestAddress(self.base + PROD), Ordering::SeqCst);
    }

    /// True when the guest sleeps waiting for events (read after
    /// [`EventWriter::publish`]: a guest that set the flag after that sees
    /// the new index itself).
    pub fn guest_waiting<M: GuestMemory>(&self, mem: &M) -> bool {
        fence(Ordering::SeqCst);
        mem.load::<u32>(GuestAddress(self.base + WAITING), Ordering::SeqCst)
            .is_ok_and(|v| v != 0)
    }
}

/// The guest's end.
#[derive(Debug)]
pub struct EventReader {
    base: u64,
    cons: u32,
}

impl EventReader {
    /// The ring at `base`, zeroed.
    pub fn init<M: GuestMemory>(mem: &M, base: u64) -> Option<EventReader> {
        mem.write_slice(&[0u8; EVENT_RING_BYTES as usize], GuestAddress(base))
            .ok()?;
        Some(EventReader { base, cons: 0 })
    }

    /// The next event, if one is there.
    pub fn next<M: GuestMemory>(&mut self, mem: &M) -> Option<Event> {
        let prod = mem
            .load::<u32>(GuestAddress(self.base + PROD), Ordering::Acquire)
            .ok()?;
        if prod == self.cons {
            return None;
        }
        let mut b = [0u8; EV_SIZE as usize];
        mem.read_slice(&mut b, slot(self.base, self.cons)).ok()?;
        self.cons = self.cons.wrapping_add(1);
        mem.store(self.cons, GuestAddress(self.base + CONS), Ordering::Release)
            .ok()?;
        Some(Event {
            kind: u16::from_le_bytes([b[0], b[1]]),
            handle: Handle(u64::from_le_bytes(b[8..16].try_into().ok()?)),
        })
    }

    /// True when an event is waiting.
    pub fn peek<M: GuestMemory>(&self, mem: &M) -> bool {
        mem.load::<u32>(GuestAddress(self.base + PROD), Ordering::SeqCst)
            .is_ok_and(|p| p != self.cons)
    }

    /// Says whether the guest is about to sleep waiting for events.
    pub fn set_waiting<M: GuestMemory>(&self, mem: &M, on: bool) {
        let _ = mem.store(
            u32::from(on),
            GuestAddress(self.base + WAITING),
            Ordering::SeqCst,
        );
        fence(Ordering::SeqCst);
    }

    /// Events the backend had to drop.
    pub fn dropped<M: GuestMemory>(&self, mem: &M) -> u32 {
        mem.load::<u32>(GuestAddress(self.base + DROPPED), Ordering::Acquire)
            .unwrap_or(0)
    }
}
