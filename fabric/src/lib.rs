//! The fabric simulator of ibkit.
//!
//! * [`topology`] — fabrics to simulate: m-port n-trees, the four 36-port
//!   fat trees of the vSwitch paper, random irregular fabrics, and export in
//!   the ibnetdiscover / ibsim topology format.
//!
//! **Status:** the discrete-event simulator itself (nodes running the SMI
//! and SMA, links with delays, loss and failure injection, data-path walks,
//! pcap output) is not implemented yet.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use smi;

pub mod topology;
