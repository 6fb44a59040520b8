//! The device channel's request/response ring, in guest memory:
//!
//! ```text
//! base + 0    req_prod   u32 LE, written by the guest
//! base + 4    req_cons   u32 LE, written by the backend
//! base + 8    rsp_prod   u32 LE, written by the backend
//! base + 12   rsp_cons   u32 LE, written by the guest
//! base + 16   polling    u32 LE, backend: 1 while it polls the ring (no
//!                        kick needed)
//! base + 20   waiting    u32 LE, guest: 1 while it sleeps on the call
//!                        eventfd (a call is needed)
//! base + 64   request slots, SLOTS × 64 bytes
//! then        response slots, SLOTS × 64 bytes
//! ```
//!
//! Indices run freely and wrap at 2³²; slot = index mod SLOTS. The backend
//! keeps its own copies of the indices it writes and never reads them
//! back. The guest's indices are checked: a producer claiming more
//! requests than the ring holds, or a consumer ahead of the responses,
//! stops the domain's ring for good. Each request is copied out of guest
//! memory once and then decoded and checked; a refused request still gets
//! its response and still advances the consumer index.

use crate::backend::Backend;
use crate::device::Device;
use crate::handles::DomainId;
use crate::proto::{Refusal, MSG_SIZE};
use std::sync::atomic::{fence, Ordering};
use vm_memory::{Bytes, GuestAddress, GuestMemory, Permissions};

/// Slots in each direction.
pub const SLOTS: u32 = 32;
/// Bytes of a ring in guest memory.
pub const RING_BYTES: u64 = 64 + 2 * SLOTS as u64 * MSG_SIZE as u64;

const REQ_PROD: u64 = 0;
const REQ_CONS: u64 = 4;
const RSP_PROD: u64 = 8;
const RSP_CONS: u64 = 12;
const POLLING: u64 = 16;
const WAITING: u64 = 20;

fn flag<M: GuestMemory>(mem: &M, at: u64) -> bool {
    fence(Ordering::SeqCst);
    mem.load::<u32>(GuestAddress(at), Ordering::SeqCst)
        .is_ok_and(|v| v != 0)
}

fn set_flag<M: GuestMemory>(mem: &M, at: u64, on: bool) {
    let _ = mem.store(u32::from(on), GuestAddress(at), Ordering::SeqCst);
    fence(Ordering::SeqCst);
}

fn req_slot(base: u64, i: u32) -> GuestAddress {
    GuestAddress(base + 64 + u64::from(i % SLOTS) * MSG_SIZE as u64)
}

fn rsp_slot(base: u64, i: u32) -> GuestAddress {
    GuestAddress(base + 64 + u64::from(SLOTS + i % SLOTS) * MSG_SIZE as u64)
}

/// The backend's end of a domain's ring.
#[derive(Debug)]
pub struct BackendRing {
    dom: DomainId,
    base: u64,
    req_cons: u32,
    rsp_prod: u32,
    broken: bool,
}

impl BackendRing {
    /// Attaches to the ring the guest of `dom` placed at `base`; refused
    /// unless the whole ring lies in its memory.
    pub fn attach<M: GuestMemory + Clone, D: Device<M>>(
        backend: &Backend<M, D>,
        dom: DomainId,
        base: u64,
    ) -> Result<BackendRing, Refusal> {
        let mem = backend.memory(dom).ok_or(Refusal::NotOpen)?;
        let fits = base.checked_add(RING_BYTES).is_some()
            && mem.check_range(
                GuestAddress(base),
                RING_BYTES as usize,
                Permissions::ReadWrite,
            );
        if !fits {
            return Err(Refusal::BadAddress);
        }
        Ok(BackendRing {
            dom,
            base,
            req_cons: 0,
            rsp_prod: 0,
            broken: false,
        })
    }

    /// Tells the guest whether the backend polls the ring (so it need not
    /// kick).
    pub fn set_polling<M: GuestMemory + Clone, D: Device<M>>(
        &self,
        backend: &Backend<M, D>,
        on: bool,
    ) {
        if let Some(m) = backend.memory(self.dom) {
            set_flag(m, self.base + POLLING, on);
        }
    }

    /// True when the guest sleeps waiting for responses (it needs a call).
    pub fn guest_waiting<M: GuestMemory + Clone, D: Device<M>>(
        &self,
        backend: &Backend<M, D>,
    ) -> bool {
        backend
            .memory(self.dom)
            .is_some_and(|m| flag(m, self.base + WAITING))
    }

    /// True when the guest has queued requests not yet taken.
    pub fn has_requests<M: GuestMemory + Clone, D: Device<M>>(
        &self,
        backend: &Backend<M, D>,
    ) -> bool {
        backend.memory(self.dom).is_some_and(|m| {
            m.load::<u32>(GuestAddress(self.base + REQ_PROD), Ordering::Acquire)
                .is_ok_and(|p| p != self.req_cons)
        })
    }

    /// True once the guest's indices were out of range.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    fn read_u32<M: GuestMemory>(mem: &M, at: u64) -> Result<u32, Refusal> {
        let mut b = [0u8; 4];
        mem.read_slice(&mut b, GuestAddress(at))
            .map_err(|_| Refusal::BadAddress)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Serves what the guest has queued, at most one ring's worth; how many
    /// requests were answered. An error when the ring is (now) broken.
    pub fn service<M: GuestMemory + Clone, D: Device<M>>(
        &mut self,
        backend: &mut Backend<M, D>,
    ) -> Result<usize, Refusal> {
        if self.broken {
            return Err(Refusal::RingBroken);
        }
        let (prod, rsp_cons) = {
            let mem = backend.memory(self.dom).ok_or(Refusal::NotOpen)?;
            let prod = Self::read_u32(mem, self.base + REQ_PROD)?;
            let rsp_cons = Self::read_u32(mem, self.base + RSP_CONS)?;
            (prod, rsp_cons)
        };
        // The indices are read before the slots they cover.
        fence(Ordering::Acquire);
        let pending = prod.wrapping_sub(self.req_cons);
        let unread = self.rsp_prod.wrapping_sub(rsp_cons);
        if pending > SLOTS || unread > SLOTS {
            self.broken = true;
            return Err(Refusal::RingBroken);
        }
        let n = pending.min(SLOTS - unread);
        for _ in 0..n {
            let mut req = [0u8; MSG_SIZE];
            {
                let mem = backend.memory(self.dom).ok_or(Refusal::NotOpen)?;
                mem.read_slice(&mut req, req_slot(self.base, self.req_cons))
                    .map_err(|_| Refusal::BadAddress)?;
            }
            let rsp = backend.execute(self.dom, &req);
            let mem = backend.memory(self.dom).ok_or(Refusal::NotOpen)?;
            mem.write_slice(&rsp, rsp_slot(self.base, self.rsp_prod))
                .map_err(|_| Refusal::BadAddress)?;
            self.req_cons = self.req_cons.wrapping_add(1);
            self.rsp_prod = self.rsp_prod.wrapping_add(1);
        }
        // The responses are written before the index that publishes them.
        fence(Ordering::Release);
        let mem = backend.memory(self.dom).ok_or(Refusal::NotOpen)?;
        mem.write_slice(
            &self.req_cons.to_le_bytes(),
            GuestAddress(self.base + REQ_CONS),
        )
        .map_err(|_| Refusal::BadAddress)?;
        mem.write_slice(
            &self.rsp_prod.to_le_bytes(),
            GuestAddress(self.base + RSP_PROD),
        )
        .map_err(|_| Refusal::BadAddress)?;
        Ok(n as usize)
    }
}

/// The guest's end of a ring (what a frontend uses; tests use it too).
#[derive(Debug)]
pub struct GuestRing {
    base: u64,
    req_prod: u32,
    rsp_cons: u32,
}

impl GuestRing {
    /// A ring at `base`, zeroed.
    pub fn init<M: GuestMemory>(mem: &M, base: u64) -> Option<GuestRing> {
        mem.write_slice(&[0u8; RING_BYTES as usize], GuestAddress(base))
            .ok()?;
        Some(GuestRing {
            base,
            req_prod: 0,
            rsp_cons: 0,
        })
    }

    /// Queues `req`; false when the ring is full.
    pub fn push<M: GuestMemory>(&mut self, mem: &M, req: &[u8; MSG_SIZE]) -> bool {
        let mut b = [0u8; 4];
        if mem
            .read_slice(&mut b, GuestAddress(self.base + REQ_CONS))
            .is_err()
        {
            return false;
        }
        let cons = u32::from_le_bytes(b);
        if self.req_prod.wrapping_sub(cons) >= SLOTS {
            return false;
        }
        if mem
            .write_slice(req, req_slot(self.base, self.req_prod))
            .is_err()
        {
            return false;
        }
        self.req_prod = self.req_prod.wrapping_add(1);
        fence(Ordering::Release);
        mem.write_slice(
            &self.req_prod.to_le_bytes(),
            GuestAddress(self.base + REQ_PROD),
        )
        .is_ok()
    }

    /// True when a response is waiting.
    pub fn peek<M: GuestMemory>(&self, mem: &M) -> bool {
        mem.load::<u32>(GuestAddress(self.base + RSP_PROD), Ordering::Acquire)
            .is_ok_and(|p| p != self.rsp_cons)
    }

    /// The next response, if one is there.
    pub fn pop<M: GuestMemory>(&mut self, mem: &M) -> Option<[u8; MSG_SIZE]> {
        let mut b = [0u8; 4];
        mem.read_slice(&mut b, GuestAddress(self.base + RSP_PROD))
            .ok()?;
        if u32::from_le_bytes(b) == self.rsp_cons {
            return None;
        }
        fence(Ordering::Acquire);
        let mut rsp = [0u8; MSG_SIZE];
        mem.read_slice(&mut rsp, rsp_slot(self.base, self.rsp_cons))
            .ok()?;
        self.rsp_cons = self.rsp_cons.wrapping_add(1);
        mem.write_slice(
            &self.rsp_cons.to_le_bytes(),
            GuestAddress(self.base + RSP_CONS),
        )
        .ok()?;
        Some(rsp)
    }

    /// True while the backend polls the ring (a kick is not needed).
    pub fn backend_polling<M: GuestMemory>(&self, mem: &M) -> bool {
        flag(mem, self.base + POLLING)
    }

    /// Says whether the guest is about to sleep waiting for responses.
    pub fn set_waiting<M: GuestMemory>(&self, mem: &M, on: bool) {
        set_flag(mem, self.base + WAITING, on);
    }

    /// Writes raw index values (a hostile guest's tool).
    pub fn poke_indices<M: GuestMemory>(mem: &M, base: u64, req_prod: u32, rsp_cons: u32) {
        let _ = mem.write_slice(&req_prod.to_le_bytes(), GuestAddress(base + REQ_PROD));
        let _ = mem.write_slice(&rsp_cons.to_le_bytes(), GuestAddress(base + RSP_CONS));
    }
}
