//! VMM-bypass split driver in the style of Xen-IB: a guest frontend, a
//! backend that owns the HCA, and the device and event channels between
//! them.
//!
//! What is here: the command protocol ([`proto`]); resource tables with
//! owner and generation ([`handles`]); the backend's deterministic core
//! with domains, limits and validation ([`backend`]); the request/response
//! ring ([`ring`]) and event ring ([`event`]) in guest memory; the data
//! path's formats ([`layout`]); the [`device::Device`] trait and the
//! software HCA with its data path ([`device::soft`]); the frontend's
//! verbs-style API whose data path never crosses to the backend
//! ([`frontend`]); and the channels ([`channel`]): in-process, and between
//! processes over a memfd, eventfds and an epoll driver loop; and
//! management virtualization ([`mgmt`]): guests' SA queries served at API
//! level with transaction IDs they cannot forge.
//!
//! Not written yet: a device over `verbs-sys` for real hardware.
#![warn(missing_docs)]

pub mod backend;
pub mod channel;
pub mod device;
pub mod event;
pub mod frontend;
pub mod handles;
pub mod layout;
pub mod mgmt;
pub mod proto;
pub mod ring;
pub mod shm;
#[cfg(feature = "test-utils")]
pub mod test_utils;

pub use mad_core;
