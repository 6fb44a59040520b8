//! Directed-route SMI processing, the Subnet Management Agent and the subnet
//! manager of ibkit, as sans-IO state machines on top of [`mad_core`].
//!
//! * [`dr`] — the directed-route SMI rules of switches and channel adapters.
//!
//! The SMA and the subnet manager are not implemented yet.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use mad_core;

pub mod dr;
