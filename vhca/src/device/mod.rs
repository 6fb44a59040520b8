//! The HCA behind the backend. The backend checks every guest request
//! first and then asks the device for the resource; the device hands out
//! the numbers hardware would (PD numbers, memory keys, CQ and QP numbers,
//! UAR pages) and runs the data path on its own: it picks doorbells up
//! from UAR pages, reads work requests from the guest's QP buffers, moves
//! data between registered regions and writes completions into the
//! guest's CQ buffers, without the backend.
//!
//! [`soft::SoftHca`] is the embedded default. [`verbs::VerbsHca`] drives a
//! real HCA through `verbs-sys`, mediating the data path (see there).

mod guest;
pub mod soft;
pub mod verbs;

use crate::handles::DomainId;
use crate::proto::{QpState, QpType};
use std::os::fd::BorrowedFd;

pub use soft::SoftHca;

/// Device attributes a guest may see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceAttr {
    /// Node GUID.
    pub node_guid: u64,
    /// Most QPs.
    pub max_qp: u32,
    /// Most CQs.
    pub max_cq: u32,
    /// Most MRs.
    pub max_mr: u32,
}

/// What the device refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// Out of a resource.
    Exhausted,
    /// The device could not do it (a real device's error, or no device).
    Failed,
}

/// What a device creates, with what the data path needs to know of it.
/// Numbers that name other objects (`pd`, `send_cq`, ...) are the
/// device's own, as `create` returned them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Object {
    /// A protection domain.
    Pd,
    /// A memory region.
    Mr {
        /// Its PD.
        pd: u32,
        /// Guest-physical start.
        addr: u64,
        /// Bytes.
        len: u64,
        /// [`crate::proto::access`] flags.
        access: u32,
    },
    /// A completion queue whose buffer starts at `addr`.
    Cq {
        /// Entries.
        cqe: u32,
        /// Guest-physical address of the buffer.
        addr: u64,
    },
    /// A queue pair whose buffer starts at `addr`.
    Qp {
        /// Transport.
        qp_type: QpType,
        /// Its PD.
        pd: u32,
        /// Send CQ.
        send_cq: u32,
        /// Receive CQ.
        recv_cq: u32,
        /// Guest-physical address of the buffer.
        addr: u64,
        /// Send queue entries.
        sq: u32,
        /// Receive queue entries.
        rq: u32,
    },
    /// A doorbell page.
    Uar,
}

/// The kind of an [`Object`], to destroy it by number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// See [`Object::Pd`].
    Pd,
    /// See [`Object::Mr`].
    Mr,
    /// See [`Object::Cq`].
    Cq,
    /// See [`Object::Qp`].
    Qp,
    /// See [`Object::Uar`].
    Uar,
}

/// Something the device tells the owner of a CQ or QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceEvent {
    /// The owner.
    pub dom: DomainId,
    /// [`crate::layout::event`] kind.
    pub kind: u16,
    /// The tag given at creation (the backend's handle).
    pub tag: u64,
}

/// An HCA the backend drives, over guest memory of type `M`.
pub trait Device<M> {
    /// The device's attributes.
    fn attr(&self) -> DeviceAttr;
    /// A guest context on the device: its memory and its port's LID.
    fn open(&mut self, dom: DomainId, mem: M, lid: u16) -> Result<(), DeviceError>;
    /// The context is gone (everything in it was destroyed first).
    fn close(&mut self, dom: DomainId);
    /// Creates `obj` for `dom`; its device number (PD number, memory key,
    /// CQ number, QP number, UAR page). `tag` comes back in its events.
    fn create(&mut self, dom: DomainId, obj: Object, tag: u64) -> Result<u32, DeviceError>;
    /// Destroys what `create` numbered `id`.
    fn destroy(&mut self, kind: Kind, id: u32);
    /// Moves QP `qpn` to `state`; `dest_qpn` and `dlid` name the peer of a
    /// connected QP when it goes to RTR.
    fn modify_qp(&mut self, qpn: u32, state: QpState, dest_qpn: u32, dlid: u16);
    /// Asks for an event at CQ `cq`'s next completion.
    fn arm_cq(&mut self, cq: u32);
    /// The file behind UAR page `page`, for the integrator to map into the
    /// guest.
    fn uar_fd(&self, page: u32) -> Option<BorrowedFd<'_>>;
    /// Objects alive on the device (for leak checks).
    fn objects(&self) -> usize;
    /// Runs the data path once: doorbells, work requests, completions.
    /// Events for CQ and QP owners are appended to `events`. How much work
    /// was done (0: idle).
    fn process(&mut self, events: &mut Vec<DeviceEvent>) -> usize;
    /// The driver is about to sleep (`true`) or has woken (`false`). A
    /// device that polls doorbells tells the guests, which then wake the
    /// driver after ringing; a device over real hardware also arms its
    /// completion channel.
    fn idle(&mut self, _asleep: bool) {}
    /// A file that becomes readable when the device has work while the
    /// driver sleeps (a real HCA's completion channel); the driver waits
    /// on it beside its own.
    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}
