//! VMM-bypass split driver in the style of Xen-IB: a guest frontend, a backend
//! that owns the HCA, and the device and event channels between them.
//!
//! **Status:** not implemented yet. This crate is a placeholder in the
//! workspace layout; its contents arrive with the `vhca` issue.
#![warn(missing_docs)]

pub use mad_core;
