//! ibkit's subcommands.

pub mod decode;
pub mod sample;
pub mod sim;
