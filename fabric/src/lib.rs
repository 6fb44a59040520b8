//! The fabric simulator of ibkit.
//!
//! * [`topology`] — fabrics to simulate: m-port n-trees, the four 36-port
//!   fat trees of the vSwitch paper, random irregular fabrics, and export in
//!   the ibnetdiscover / ibsim topology format.
//!
//! * [`sim`] — the discrete-event fabric: nodes running `smi::dr` and
//!   `smi::sma`, cables with per-hop and per-DR-hop delays and loss, a
//!   driver that brings a subnet up with `smi::sm`, and data-path walks over
//!   the installed forwarding tables.
//!
//! * [`model`] — the analytic prediction of a bring-up's SMPs by kind.
//!
//! * [`pcap`] — LINKTYPE_INFINIBAND captures: every SMP the simulator
//!   carries, written as LRH/BTH/DETH/MAD/ICRC/VCRC frames.
//!
//! **Status:** link failure and switch add/remove injection, LID-routed SM
//! traffic and traps to the SM are not implemented yet.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use smi;

pub mod ibsim;
pub mod model;
pub mod pcap;
pub mod sim;
pub mod topology;
