//! ibkit's subcommands.

pub mod bench;
pub mod compat;
pub mod decode;
pub mod migrate;
pub mod sample;
pub mod serve;
pub mod sim;
pub mod sm;
pub mod traffic;
pub mod vhca;
