//! The library behind the `ibkit` command-line tool: its subcommands, the
//! MAD dump renderers and the pcap reader/writer, public so that tests and
//! other tools can drive them.
#![warn(missing_docs)]

pub mod cmd;
pub mod dump;
pub use fabric::pcap;
