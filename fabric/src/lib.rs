//! Discrete-event InfiniBand fabric simulator: every node runs `smi`'s SMI and
//! SMA, links carry SMPs with configurable delays.
//!
//! **Status:** not implemented yet. This crate is a placeholder in the
//! workspace layout; its contents arrive with the simulator issue.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use smi;
