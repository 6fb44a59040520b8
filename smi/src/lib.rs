//! Directed-route SMI processing, the Subnet Management Agent and the subnet
//! manager of ibkit, as sans-IO state machines on top of [`mad_core`].
//!
//! * [`dr`] — the directed-route SMI rules of switches and channel adapters.
//! * [`sma`] — the Subnet Management Agent over bounded node models: channel
//!   adapters, switches and HCAs in vSwitch mode.
//!
//! * [`sm`] (feature `sm`, needs `alloc`) — the subnet manager: discovery,
//!   LID assignment, routing (min-hop, up*/down* or fat-tree), LFT
//!   distribution and port activation; light sweeps and traps on a running
//!   subnet; and the vSwitch VM lifecycle with live-migration
//!   reconfiguration.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use mad_core;

#[cfg(feature = "sm")]
extern crate alloc;

pub mod dr;
#[cfg(feature = "sm")]
pub mod sm;
pub mod sma;

impl<const P: usize, const L: usize, const M: usize> dr::Node for sma::Model<P, L, M> {
    fn is_switch(&self) -> bool {
        Model::is_switch(self)
    }
    fn num_ports(&self) -> u8 {
        self.node_info.num_ports
    }
    fn port_up(&self, port: u8) -> bool {
        self.ports
            .get(usize::from(port))
            .is_some_and(|p| port == 0 || p.info.port_state != mad_core::attr::PortState::Down)
    }
}

use sma::Model;
