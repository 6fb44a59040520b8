//! Directed-route SMI processing, the Subnet Management Agent and the subnet
//! manager of ibkit, as sans-IO state machines on top of [`mad_core`].
//!
//! **Status:** not implemented yet. This crate is a placeholder in the
//! workspace layout; its contents arrive with the `smi` issues.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use mad_core;
