//! ibkit's subcommands.

pub mod decode;
pub mod migrate;
pub mod sample;
pub mod sim;
