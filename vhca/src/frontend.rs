//! The guest's frontend: a verbs-style API ([`Context`], [`Pd`], [`Mr`],
//! [`Cq`], [`Qp`]). Privileged calls (open, allocate, register, create,
//! modify, destroy) go to the backend through a [`Transport`]; the data
//! path does not: [`Context::post_send`] and [`Context::post_recv`] write
//! WQEs into the QP buffer in the guest's own memory and ring the doorbell
//! in the mapped UAR page, and [`Context::poll_cq`] reads CQEs from the CQ
//! buffer. [`Transport::commands`] counts what crossed, so a test or a
//! benchmark can show that a message costs no command at all.
//!
//! Buffers come from a bump allocator over the guest memory the transport
//! set aside (`Layout::heap`); nothing is handed back to it, so a
//! long-running guest re-uses its buffers.

use crate::event::{Event, EventReader};
use crate::layout::{
    cq_bytes, cq_hdr, flags, op, qp_hdr, Cqe, Wqe, CQ_HDR, QP_HDR, UAR_ASLEEP, UAR_KICK, UAR_SIZE,
};
use crate::proto::{access, Command, Handle, QpState, QpType, Refusal, CQE_SIZE, WQE_SIZE};
use mad_core::MAD_SIZE;
use std::fs::File;
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryMmap, MmapRegion, VolatileMemory};
use zerocopy::{FromBytes, IntoBytes};

/// How a frontend reaches its backend.
pub trait Transport {
    /// Runs a privileged command at the backend.
    fn call(&mut self, cmd: Command) -> Result<[u64; 7], Refusal>;
    /// The file of the context's UAR page, once `AllocUar` succeeded (the
    /// hypervisor's glue maps it into the guest).
    fn uar_file(&mut self) -> Result<File, Refusal>;
    /// Waits until the backend signals an event, or `timeout` passes;
    /// true when signalled.
    fn wait_event(&mut self, timeout: Duration) -> bool;
    /// Wakes a driver that sleeps (the device said so in the UAR page).
    fn wake(&mut self);
    /// Commands sent so far.
    fn commands(&self) -> u64;
}

/// Where a transport put things in guest memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The event ring.
    pub event_base: u64,
    /// Free memory for buffers: start and end.
    pub heap: (u64, u64),
}

/// What a frontend call failed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The backend refused.
    Refused(Refusal),
    /// Out of guest memory for buffers.
    NoMemory,
    /// The queue is full.
    Full,
    /// Guest memory could not be read or written.
    Memory,
    /// The SA answered with this MAD status.
    Sa(u16),
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Error {
        Error::Refused(r)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Refused(r) => write!(f, "refused by the backend: {r:?}"),
            Error::NoMemory => write!(f, "out of guest memory for buffers"),
            Error::Full => write!(f, "queue full"),
            Error::Memory => write!(f, "guest memory access failed"),
            Error::Sa(st) => write!(f, "the SA answered with status {st:#06x}"),
        }
    }
}

impl std::error::Error for Error {}

/// A protection domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pd(pub Handle);

/// A registered memory region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mr {
    /// The backend's handle.
    pub handle: Handle,
    /// Local key.
    pub lkey: u32,
    /// Remote key (0 without remote access).
    pub rkey: u32,
    /// Guest-physical start.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    /// The backend's handle.
    pub handle: Handle,
    mr: Mr,
    addr: u64,
    cqe: u32,
    ci: u32,
    arm: u32,
}

/// A queue pair.
#[derive(Debug)]
pub struct Qp {
    /// The backend's handle.
    pub handle: Handle,
    /// The QP number.
    pub qpn: u32,
    mr: Mr,
    addr: u64,
    sq: u32,
    rq: u32,
    sq_prod: u32,
    rq_prod: u32,
}

impl Qp {
    /// Guest-physical address of the QP buffer (its header first).
    pub fn buffer(&self) -> u64 {
        self.addr
    }
}

impl Cq {
    /// Guest-physical address of the CQ buffer (its header first).
    pub fn buffer(&self) -> u64 {
        self.addr
    }
}

/// A send work request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// [`op`] code.
    pub opcode: u8,
    /// Ask for a completion.
    pub signaled: bool,
    /// The local buffer's region.
    pub lkey: u32,
    /// Local address.
    pub addr: u64,
    /// Bytes.
    pub len: u32,
    /// Remote key (RDMA).
    pub rkey: u32,
    /// Remote address (RDMA).
    pub remote_addr: u64,
    /// Destination QP (UD).
    pub dest_qpn: u32,
    /// Destination LID (UD).
    pub dlid: u16,
}

/// A work completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wc {
    /// The work request's tag.
    pub wr_id: u64,
    /// [`crate::layout::status`] code.
    pub status: u8,
    /// [`op`] code.
    pub opcode: u8,
    /// Bytes.
    pub byte_len: u32,
    /// Local QP.
    pub qp_num: u32,
    /// Sender QP (receives).
    pub src_qp: u32,
    /// Sender LID (receives).
    pub slid: u16,
}

/// A guest's open device: its transport, its memory, its UAR page.
pub struct Context<T: Transport> {
    t: T,
    mem: GuestMemoryMmap,
    heap: (u64, u64),
    uar: MmapRegion,
    kick: u32,
    events: EventReader,
    /// The PD the context's own CQ buffers are registered in.
    internal: Pd,
    /// A MAD buffer for SA queries, allocated at the first.
    mad_buf: Option<u64>,
}

impl<T: Transport> std::fmt::Debug for Context<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("heap", &self.heap)
            .field("commands", &self.t.commands())
            .finish()
    }
}

impl<T: Transport> Context<T> {
    /// Opens the device through `t` over the guest's memory `mem`, laid
    /// out as `layout` says (the event ring already attached).
    pub fn open(mut t: T, mem: GuestMemoryMmap, layout: Layout) -> Result<Context<T>, Error> {
        let events = EventReader::init(&mem, layout.event_base).ok_or(Error::Memory)?;
        t.call(Command::OpenDevice)?;
        t.call(Command::AllocUar)?;
        let file = t.uar_file()?;
        let uar =
            MmapRegion::from_file(FileOffset::new(file, 0), UAR_SIZE).map_err(|_| Error::Memory)?;
        let kick = uar
            .as_volatile_slice()
            .load::<u32>(UAR_KICK, Ordering::Acquire)
            .map_err(|_| Error::Memory)?;
        let internal = Pd(Handle(t.call(Command::AllocPd)?[0]));
        Ok(Context {
            t,
            mem,
            heap: layout.heap,
            uar,
            kick,
            events,
            internal,
            mad_buf: None,
        })
    }

    /// The transport (for its counters).
    pub fn transport(&self) -> &T {
        &self.t
    }

    /// Commands sent to the backend so far.
    pub fn commands(&self) -> u64 {
        self.t.commands()
    }

    /// The guest's memory.
    pub fn memory(&self) -> &GuestMemoryMmap {
        &self.mem
    }

    /// This guest's port: LID, port GUID, state.
    pub fn query_port(&mut self) -> Result<(u16, u64, u8), Error> {
        let v = self.t.call(Command::QueryPort { port: 1 })?;
        Ok((v[0] as u16, v[1], v[2] as u8))
    }

    /// `len` bytes of guest memory, 64-byte aligned.
    pub fn alloc(&mut self, len: u64) -> Result<u64, Error> {
        let start = self.heap.0.next_multiple_of(64);
        let end = start.checked_add(len).ok_or(Error::NoMemory)?;
        if end > self.heap.1 {
            return Err(Error::NoMemory);
        }
        self.heap.0 = end;
        Ok(start)
    }

    /// Writes `data` at `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), Error> {
        self.mem
            .write_slice(data, GuestAddress(addr))
            .map_err(|_| Error::Memory)
    }

    /// Reads `out.len()` bytes at `addr`.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), Error> {
        self.mem
            .read_slice(out, GuestAddress(addr))
            .map_err(|_| Error::Memory)
    }

    /// Sends `mad` (an SA query) through the backend, which answers it in
    /// place; the reply's MAD status.
    pub fn sa_query(&mut self, mad: &mut [u8; MAD_SIZE]) -> Result<u16, Error> {
        let at = match self.mad_buf {
            Some(a) => a,
            None => {
                let a = self.alloc(MAD_SIZE as u64)?;
                self.mad_buf = Some(a);
                a
            }
        };
        self.write(at, mad)?;
        self.t.call(Command::SendMad { qpn: 1, addr: at })?;
        self.read(at, mad)?;
        Ok(u16::from_be_bytes([mad[4], mad[5]]))
    }

    /// The path to `dlid` as the SA gives it: (DGID, SGID, DLID, SLID).
    pub fn path_to(&mut self, dlid: u16) -> Result<([u8; 16], [u8; 16], u16, u16), Error> {
        let pr = self.path_record_to(dlid)?;
        Ok((pr.dgid.0, pr.sgid.0, pr.dlid.0, pr.slid.0))
    }

    /// The whole PathRecord to `dlid` (SubnAdmGet, DLID in the mask) as
    /// the SA the backend serves the guest from gives it.
    pub fn path_record_to(&mut self, dlid: u16) -> Result<mad_core::sa::PathRecord, Error> {
        use mad_core::sa::{path::comp, PathRecord, SaMad, SaRecord};
        let mut q = SaMad::request(mad_core::mad::Method::Get, PathRecord::ID, 0x7A11);
        q.sa.component_mask = comp::DLID;
        q.set_record(&PathRecord {
            dlid: mad_core::types::Lid(dlid),
            ..PathRecord::default()
        })
        .map_err(|_| Error::Sa(crate::mgmt::ERR_METHOD_ATTR))?;
        let mut m = q.to_bytes();
        let st = self.sa_query(&mut m)?;
        if st != 0 {
            return Err(Error::Sa(st));
        }
        SaMad::parse(&m)
            .ok()
            .and_then(|a| a.record::<PathRecord>().ok())
            .ok_or(Error::Sa(crate::mgmt::ERR_METHOD_ATTR))
    }

    /// A new protection domain.
    pub fn alloc_pd(&mut self) -> Result<Pd, Error> {
        Ok(Pd(Handle(self.t.call(Command::AllocPd)?[0])))
    }

    /// Registers `addr..addr + len` in `pd` with `acc` ([`access`]) rights.
    pub fn reg_mr(&mut self, pd: Pd, addr: u64, len: u64, acc: u32) -> Result<Mr, Error> {
        let v = self.t.call(Command::RegMr {
            pd: pd.0,
            addr,
            len,
            access: acc,
        })?;
        Ok(Mr {
            handle: Handle(v[0]),
            lkey: v[1] as u32,
            rkey: v[2] as u32,
            addr,
            len,
        })
    }

    /// Deregisters `mr`.
    pub fn dereg_mr(&mut self, mr: Mr) -> Result<(), Error> {
        self.t.call(Command::DeregMr { mr: mr.handle })?;
        Ok(())
    }

    /// A CQ of `cqe` entries: its buffer is allocated in guest memory and
    /// registered first, then the CQ is created on it.
    pub fn create_cq(&mut self, cqe: u32) -> Result<Cq, Error> {
        let (addr, mr) = self.zeroed_region(self.internal, cq_bytes(cqe))?;
        let v = self.create_on(
            mr,
            Command::CreateCq {
                cqe,
                mr: mr.handle,
                offset: 0,
            },
        )?;
        Ok(Cq {
            handle: Handle(v[0]),
            mr,
            addr,
            cqe,
            ci: 0,
            arm: 0,
        })
    }

    /// `len` zeroed bytes of guest memory, registered in `pd` for the
    /// device to write: the first stage of a two-stage creation.
    fn zeroed_region(&mut self, pd: Pd, len: u64) -> Result<(u64, Mr), Error> {
        let addr = self.alloc(len)?;
        self.write(addr, &vec![0u8; len as usize])?;
        let mr = self.reg_mr(pd, addr, len, access::LOCAL_WRITE)?;
        Ok((addr, mr))
    }

    /// The second stage: `cmd` creates the object on `mr`, which is
    /// deregistered again if the backend refuses.
    fn create_on(&mut self, mr: Mr, cmd: Command) -> Result<[u64; 7], Error> {
        match self.t.call(cmd) {
            Ok(v) => Ok(v),
            Err(r) => {
                let _ = self.dereg_mr(mr);
                Err(r.into())
            }
        }
    }

    /// Destroys `cq` and deregisters its buffer.
    pub fn destroy_cq(&mut self, cq: Cq) -> Result<(), Error> {
        self.t.call(Command::DestroyCq { cq: cq.handle })?;
        self.dereg_mr(cq.mr)
    }

    /// A QP in `pd` of `sq` send and `rq` receive entries; its buffer is
    /// allocated and registered in `pd`, then the QP is created on it.
    pub fn create_qp(
        &mut self,
        pd: Pd,
        qp_type: QpType,
        send_cq: &Cq,
        recv_cq: &Cq,
        sq: u32,
        rq: u32,
    ) -> Result<Qp, Error> {
        let len = QP_HDR + (u64::from(sq) + u64::from(rq)) * WQE_SIZE;
        let (addr, mr) = self.zeroed_region(pd, len)?;
        let v = self.create_on(
            mr,
            Command::CreateQp {
                pd: pd.0,
                send_cq: send_cq.handle,
                recv_cq: recv_cq.handle,
                qp_type,
                max_send_wr: sq,
                max_recv_wr: rq,
                mr: mr.handle,
                offset: 0,
            },
        )?;
        Ok(Qp {
            handle: Handle(v[0]),
            qpn: v[1] as u32,
            mr,
            addr,
            sq,
            rq,
            sq_prod: 0,
            rq_prod: 0,
        })
    }

    /// Moves `qp` to `state` (`dest_qpn`, `dlid`: the peer, at RTR).
    pub fn modify_qp(
        &mut self,
        qp: &Qp,
        state: QpState,
        dest_qpn: u32,
        dlid: u16,
    ) -> Result<(), Error> {
        self.t.call(Command::ModifyQp {
            qp: qp.handle,
            state,
            dest_qpn,
            dlid,
        })?;
        Ok(())
    }

    /// Takes `qp` through INIT and RTR to RTS, connected (RC) to
    /// `dest_qpn` at `dlid`; for UD the peer is per work request.
    pub fn ready(&mut self, qp: &Qp, dest_qpn: u32, dlid: u16) -> Result<(), Error> {
        self.modify_qp(qp, QpState::Init, 0, 0)?;
        self.modify_qp(qp, QpState::Rtr, dest_qpn, dlid)?;
        self.modify_qp(qp, QpState::Rts, 0, 0)
    }

    /// Destroys `qp` and deregisters its buffer.
    pub fn destroy_qp(&mut self, qp: Qp) -> Result<(), Error> {
        self.t.call(Command::DestroyQp { qp: qp.handle })?;
        self.dereg_mr(qp.mr)
    }

    fn load(&self, at: u64) -> Result<u32, Error> {
        self.mem
            .load::<u32>(GuestAddress(at), Ordering::Acquire)
            .map_err(|_| Error::Memory)
    }

    fn store(&self, at: u64, v: u32) -> Result<(), Error> {
        self.mem
            .store(v, GuestAddress(at), Ordering::Release)
            .map_err(|_| Error::Memory)
    }

    /// Rings the doorbell (as posting does): bumps the UAR counter, and wakes the driver if
    /// the device sleeps.
    pub fn ring_doorbell(&mut self) -> Result<(), Error> {
        self.kick = self.kick.wrapping_add(1);
        let s = self.uar.as_volatile_slice();
        s.store(self.kick, UAR_KICK, Ordering::SeqCst)
            .map_err(|_| Error::Memory)?;
        self.wake_if_asleep();
        Ok(())
    }

    /// Wakes the driver if the device says it sleeps.
    fn wake_if_asleep(&mut self) {
        fence(Ordering::SeqCst);
        let s = self.uar.as_volatile_slice();
        if s.load::<u32>(UAR_ASLEEP, Ordering::SeqCst).unwrap_or(0) != 0 {
            self.t.wake();
        }
    }

    /// Posts a send work request: a WQE into the QP buffer and a doorbell.
    pub fn post_send(&mut self, qp: &mut Qp, wr: &SendWr) -> Result<(), Error> {
        let cons = self.load(qp.addr + qp_hdr::SQ_CONS)?;
        if qp.sq_prod.wrapping_sub(cons) >= qp.sq {
            return Err(Error::Full);
        }
        let mut w = Wqe::default();
        w.wr_id.set(wr.wr_id);
        w.opcode = wr.opcode;
        w.flags = if wr.signaled { flags::SIGNALED } else { 0 };
        w.lkey.set(wr.lkey);
        w.addr.set(wr.addr);
        w.len.set(wr.len);
        w.rkey.set(wr.rkey);
        w.remote_addr.set(wr.remote_addr);
        w.dest_qpn.set(wr.dest_qpn);
        w.dlid.set(wr.dlid);
        let at = qp.addr + QP_HDR + u64::from(qp.sq_prod % qp.sq) * WQE_SIZE;
        self.write(at, w.as_bytes())?;
        qp.sq_prod = qp.sq_prod.wrapping_add(1);
        self.store(qp.addr + qp_hdr::SQ_PROD, qp.sq_prod)?;
        self.ring_doorbell()
    }

    /// Posts a receive buffer `addr..addr + len` of region `lkey`.
    pub fn post_recv(
        &mut self,
        qp: &mut Qp,
        wr_id: u64,
        lkey: u32,
        addr: u64,
        len: u32,
    ) -> Result<(), Error> {
        let cons = self.load(qp.addr + qp_hdr::RQ_CONS)?;
        if qp.rq_prod.wrapping_sub(cons) >= qp.rq {
            return Err(Error::Full);
        }
        let mut w = Wqe::default();
        w.wr_id.set(wr_id);
        w.opcode = op::RECV;
        w.lkey.set(lkey);
        w.addr.set(addr);
        w.len.set(len);
        let slot = u64::from(qp.sq) + u64::from(qp.rq_prod % qp.rq);
        self.write(qp.addr + QP_HDR + slot * WQE_SIZE, w.as_bytes())?;
        qp.rq_prod = qp.rq_prod.wrapping_add(1);
        // No doorbell: the software HCA reads the receive producer when a
        // message arrives, a mediating device at every pass. A sleeping
        // device is woken to see it.
        self.store(qp.addr + qp_hdr::RQ_PROD, qp.rq_prod)?;
        self.wake_if_asleep();
        Ok(())
    }

    /// Takes up to `out.len()` completions from `cq`; how many.
    pub fn poll_cq(&mut self, cq: &mut Cq, out: &mut [Wc]) -> Result<usize, Error> {
        let mut n = 0;
        while n < out.len() {
            let at = cq.addr + CQ_HDR + u64::from(cq.ci % cq.cqe) * CQE_SIZE;
            let seq_at = at + core::mem::offset_of!(Cqe, seq) as u64;
            if self.load(seq_at)? != cq.ci.wrapping_add(1) {
                break;
            }
            let mut b = [0u8; CQE_SIZE as usize];
            self.read(at, &mut b)?;
            let e = Cqe::read_from_bytes(&b).map_err(|_| Error::Memory)?;
            out[n] = Wc {
                wr_id: e.wr_id.get(),
                status: e.status,
                opcode: e.opcode,
                byte_len: e.byte_len.get(),
                qp_num: e.qp_num.get(),
                src_qp: e.src_qp.get(),
                slid: e.slid.get(),
            };
            cq.ci = cq.ci.wrapping_add(1);
            n += 1;
        }
        if n > 0 {
            self.store(cq.addr + cq_hdr::CI, cq.ci)?;
        }
        Ok(n)
    }

    /// Asks for an event at `cq`'s next completion (a write to the CQ
    /// buffer, not a command).
    pub fn arm_cq(&mut self, cq: &mut Cq) -> Result<(), Error> {
        cq.arm = cq.arm.wrapping_add(1);
        self.store(cq.addr + cq_hdr::ARM, cq.arm)?;
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// The next event from the event channel, waiting up to `timeout`.
    pub fn next_event(&mut self, timeout: Duration) -> Option<Event> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(e) = self.events.next(&self.mem) {
                return Some(e);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            // Ask to be notified, look once more (an event published before
            // the flag was seen does not notify), then sleep.
            self.events.set_waiting(&self.mem, true);
            if !self.events.peek(&self.mem) {
                self.t.wait_event(left);
            }
            self.events.set_waiting(&self.mem, false);
        }
    }

    /// Completions of `cq`, waiting for its event when there are none:
    /// arm, poll again (closing the race), then block on the event channel.
    pub fn wait_cq(
        &mut self,
        cq: &mut Cq,
        out: &mut [Wc],
        timeout: Duration,
    ) -> Result<usize, Error> {
        let n = self.poll_cq(cq, out)?;
        if n > 0 {
            return Ok(n);
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            self.arm_cq(cq)?;
            let n = self.poll_cq(cq, out)?;
            if n > 0 {
                return Ok(n);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(0);
            }
            // Any event wakes us; the CQ is polled again either way.
            let _ = self.next_event(left);
        }
    }
}
