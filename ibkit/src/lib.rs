//! The library behind the `ibkit` command-line tool: its subcommands, each
//! with its clap arguments and its rendering, public so that tests can
//! drive them.
#![warn(missing_docs)]

pub mod cmd;
