//! What every device does on the guest's side of the data path, whatever
//! moves the data: reading work requests and producer indices from QP
//! buffers, writing completions into CQ buffers (entry first, sequence
//! number last; overrun and arm handling), and the UAR page with its
//! doorbell counter and asleep flag.

use super::DeviceEvent;
use crate::handles::DomainId;
use crate::layout::{cq_hdr, event, Cqe, Wqe, CQ_HDR, UAR_ASLEEP, UAR_KICK, UAR_SIZE};
use crate::proto::{CQE_SIZE, WQE_SIZE};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemory, MmapRegion, VolatileMemory};
use zerocopy::{FromBytes, IntoBytes};

/// Reads the u32 at guest address `at`.
pub(crate) fn read_u32<M: GuestMemory>(mem: &M, at: u64) -> Option<u32> {
    mem.load::<u32>(GuestAddress(at), Ordering::Acquire).ok()
}

/// Writes the u32 at guest address `at` (a bad address is ignored: the
/// guest only hurts itself).
pub(crate) fn write_u32<M: GuestMemory>(mem: &M, at: u64, v: u32) {
    let _ = mem.store(v, GuestAddress(at), Ordering::Release);
}

/// Reads the work-queue entry at guest address `at`.
pub(crate) fn read_wqe<M: GuestMemory>(mem: &M, at: u64) -> Option<Wqe> {
    let mut b = [0u8; WQE_SIZE as usize];
    mem.read_slice(&mut b, GuestAddress(at)).ok()?;
    Wqe::read_from_bytes(&b).ok()
}

/// A completion entry for work request `wr_id`, the rest zero.
pub(crate) fn entry(wr_id: u64) -> Cqe {
    let mut e = Cqe::default();
    e.wr_id.set(wr_id);
    e
}

/// A CQ buffer in guest memory, as the device writes it.
pub(crate) struct GuestCq {
    pub dom: DomainId,
    pub addr: u64,
    pub cqe: u32,
    pub pi: u32,
    last_arm: u32,
    pub armed: bool,
    overrun: bool,
    pub tag: u64,
}

impl GuestCq {
    /// The CQ of `cqe` entries at `addr`, starting where the guest's
    /// consumer index and arm sequence stand.
    pub fn new<M: GuestMemory>(mem: &M, dom: DomainId, addr: u64, cqe: u32, tag: u64) -> GuestCq {
        GuestCq {
            dom,
            addr,
            cqe,
            pi: read_u32(mem, addr + cq_hdr::CI).unwrap_or(0),
            last_arm: read_u32(mem, addr + cq_hdr::ARM).unwrap_or(0),
            armed: false,
            overrun: false,
            tag,
        }
    }

    /// Entries the guest has room for (0 when its consumer index is out of
    /// range).
    pub fn room<M: GuestMemory>(&self, mem: &M) -> u32 {
        let Some(ci) = read_u32(mem, self.addr + cq_hdr::CI) else {
            return 0;
        };
        self.cqe.saturating_sub(self.pi.wrapping_sub(ci))
    }

    /// The CQ overran: the owner's event, the first time only.
    pub fn overran(&mut self) -> Option<DeviceEvent> {
        if self.overrun {
            return None;
        }
        self.overrun = true;
        Some(DeviceEvent {
            dom: self.dom,
            kind: event::CQ_OVERRUN,
            tag: self.tag,
        })
    }

    /// Writes `e`; an event for the owner goes to `events` when the guest
    /// armed the CQ, or when the entry is lost to an overrun (once).
    /// True when written.
    pub fn push<M: GuestMemory>(
        &mut self,
        mem: &M,
        mut e: Cqe,
        events: &mut Vec<DeviceEvent>,
    ) -> bool {
        if self.room(mem) == 0 {
            // Full, or a consumer index from nowhere: the entry is lost.
            events.extend(self.overran());
            return false;
        }
        let slot = self.addr + CQ_HDR + u64::from(self.pi % self.cqe) * CQE_SIZE;
        e.seq.set(0);
        // The entry first, its sequence number last: the guest reads the
        // sequence number to know the rest is there.
        let seq_at = core::mem::offset_of!(Cqe, seq) as u64;
        let _ = mem.write_slice(&e.as_bytes()[..seq_at as usize], GuestAddress(slot));
        let next = self.pi.wrapping_add(1);
        write_u32(mem, slot + seq_at, next);
        write_u32(mem, self.addr + cq_hdr::PI, next);
        self.pi = next;
        let arm = read_u32(mem, self.addr + cq_hdr::ARM).unwrap_or(0);
        if arm != self.last_arm || self.armed {
            self.last_arm = arm;
            self.armed = false;
            events.push(DeviceEvent {
                dom: self.dom,
                kind: event::COMPLETION,
                tag: self.tag,
            });
        }
        true
    }
}

/// A doorbell page: a shared file the integrator maps into the guest.
pub(crate) struct Uar {
    pub dom: DomainId,
    file: File,
    map: MmapRegion,
}

impl Uar {
    /// A fresh page for `dom`.
    pub fn new(dom: DomainId) -> std::io::Result<Uar> {
        let file = crate::shm::memfd("vhca-uar", UAR_SIZE as u64)?;
        let map = MmapRegion::from_file(FileOffset::new(file.try_clone()?, 0), UAR_SIZE)
            .map_err(std::io::Error::other)?;
        Ok(Uar { dom, file, map })
    }

    /// The doorbell counter.
    pub fn kick(&self) -> Option<u32> {
        self.map
            .as_volatile_slice()
            .load::<u32>(UAR_KICK, Ordering::Acquire)
            .ok()
    }

    /// Tells the guest whether the device sleeps (it then wakes the
    /// driver after ringing).
    pub fn set_asleep(&self, asleep: bool) {
        let _ = self
            .map
            .as_volatile_slice()
            .store(u32::from(asleep), UAR_ASLEEP, Ordering::SeqCst);
    }

    /// The page's file.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// A guest context as a device keeps it: its memory, its port's LID, its
/// UAR page and the doorbell count last seen there, and its QPs.
pub(crate) struct GuestCtx<M> {
    pub mem: M,
    pub lid: u16,
    pub uar: Option<u32>,
    pub kick: u32,
    pub qps: Vec<u32>,
}

impl<M> GuestCtx<M> {
    pub fn new(mem: M, lid: u16) -> GuestCtx<M> {
        GuestCtx {
            mem,
            lid,
            uar: None,
            kick: 0,
            qps: Vec::new(),
        }
    }
}

/// The contexts of a device, by domain.
pub(crate) type Contexts<M> = std::collections::HashMap<DomainId, GuestCtx<M>>;

/// Records QP `qpn` (or, with `gone`, its end) in `dom`'s context.
pub(crate) fn note_qp<M>(ctxs: &mut Contexts<M>, dom: DomainId, qpn: u32, gone: bool) {
    if let Some(c) = ctxs.get_mut(&dom) {
        c.qps.retain(|&n| n != qpn);
        if !gone {
            c.qps.push(qpn);
        }
    }
}

/// Records UAR page `page` (or `None`: its end) as `dom`'s.
pub(crate) fn note_uar<M>(ctxs: &mut Contexts<M>, dom: DomainId, page: Option<u32>) {
    if let Some(c) = ctxs.get_mut(&dom) {
        c.uar = page;
        c.kick = 0;
    }
}

/// Reads every context's doorbell counter: the QPs of those that rang
/// since the last look go to `work` (once each). How many rang.
pub(crate) fn rung<M>(
    ctxs: &mut Contexts<M>,
    uars: &std::collections::HashMap<u32, Uar>,
    work: &mut Vec<u32>,
) -> usize {
    let mut rang = 0;
    for c in ctxs.values_mut() {
        let Some(u) = c.uar.and_then(|p| uars.get(&p)) else {
            continue;
        };
        let kick = u.kick().unwrap_or(c.kick);
        if kick != c.kick {
            c.kick = kick;
            rang += 1;
            for &q in &c.qps {
                if !work.contains(&q) {
                    work.push(q);
                }
            }
        }
    }
    rang
}
