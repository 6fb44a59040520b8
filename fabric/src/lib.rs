//! The fabric simulator of ibkit.
//!
//! * [`topology`] — fabrics to simulate: m-port n-trees, the four 36-port
//!   fat trees of the vSwitch paper, random irregular fabrics, and the
//!   ibnetdiscover / ibsim topology format, read and written.
//!
//! * [`sim`] — the discrete-event fabric: nodes running `smi::dr` and
//!   `smi::sma`, cables with per-hop and per-DR-hop delays and loss, a
//!   driver that brings a subnet up with `smi::sm` and keeps it running, and
//!   data-path walks and traces over the installed forwarding tables, and
//!   [`sim::BringUp`], one bring-up measured per kind and phase against the
//!   model, the report `ibkit sim` prints. SMPs
//!   travel by directed route or LID-routed through the switches' LFTs;
//!   agents send traps to the SM. Changes are injected at a chosen
//!   simulated time with [`sim::FabricEvent`]: a cable fails or is repaired
//!   (`LinkDown`, `LinkUp`), a node is removed or put back freshly powered
//!   (`NodeDown`, `NodeUp`), and a new cable is laid (`Cable`), for instance
//!   to a node added with [`sim::Fabric::add_node`].
//!
//! * [`migrate`] — the vSwitch paper's migration experiment and its Table
//!   I, measured and checked, as report structs.
//!
//! * [`model`] — the analytic prediction of a bring-up's SMPs by kind.
//!
//! * [`serve`] — the fabric behind ibsim's client protocol, for OpenSM and
//!   infiniband-diags under `libumad2sim.so`: a session without I/O and
//!   the socket driver of `ibkit fabric serve`. Its system calls are the
//!   only unsafe code in the crate.
//!
//! * [`mads`] — MADs from outside, hex lines or a capture, streamed with
//!   each bad item named.
//!
//! * [`pcap`] — LINKTYPE_INFINIBAND captures: every SMP the simulator
//!   carries, written as LRH/BTH/DETH/MAD/ICRC/VCRC frames.
//!
//! * [`samples`] — sample MADs of a sweep, as hex lines or a capture.
//!
//! * [`rng`] — the seeded generator the simulator draws its losses from.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub use smi;

pub mod ibsim;
pub mod mads;
pub mod migrate;
pub mod model;
pub mod osu;
pub mod pcap;
pub mod rng;
pub mod samples;
pub mod serve;
pub mod sim;
pub mod topology;
