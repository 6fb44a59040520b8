//! ibkit's subcommands.

pub mod bench;
pub mod decode;
pub mod migrate;
pub mod sample;
pub mod serve;
pub mod sim;
pub mod sm;
