//! VMM-bypass split driver in the style of Xen-IB: a guest frontend, a
//! backend that owns the HCA, and the device and event channels between
//! them.
//!
//! **Status: in progress.** What is here: the command protocol
//! ([`proto`]), resource tables with owner and generation ([`handles`]),
//! the backend's deterministic core with domains, limits and validation
//! ([`backend`]), the request/response ring in guest memory ([`ring`]),
//! and the [`device::Device`] trait with a software HCA that so far
//! numbers and counts resources. Not yet written: the event channel, the
//! eventfd driver loop and memfd channel between processes, the frontend
//! and its data path, UAR mapping into the guest, GSI/SA service, the
//! software HCA's data path, the verbs-sys device, and `ibkit bench vhca`.
#![warn(missing_docs)]

pub mod backend;
pub mod device;
pub mod handles;
pub mod proto;
pub mod ring;

pub use mad_core;
