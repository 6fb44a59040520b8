//! ibkit's subcommands.

pub mod args;
pub mod bench;
pub mod compat;
pub mod decode;
pub mod election;
pub mod migrate;
pub mod model;
pub mod sa;
pub mod sample;
pub mod serve;
pub mod sim;
pub mod sm;
pub mod topology;
pub mod traffic;
pub mod vhca;
pub mod vm;

/// Why a command did not succeed. `ibkit` prints it as one `ibkit: …` line
/// on standard error and exits with [`Fail::exit_code`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fail {
    /// The command ran, and a check it makes did not hold (exit status 1).
    Check(String),
    /// The command could not run: bad input, a missing tool or file, an
    /// I/O error (exit status 2).
    Error(String),
}

impl Fail {
    /// The process exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Fail::Check(_) => 1,
            Fail::Error(_) => 2,
        }
    }
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Check(s) | Fail::Error(s) => f.write_str(s),
        }
    }
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Error(s)
    }
}

impl From<&str> for Fail {
    fn from(s: &str) -> Fail {
        Fail::Error(s.to_string())
    }
}

/// The typed errors of the libraries, as one-line messages of a command
/// that could not run (exit status 2).
macro_rules! error_is_fail {
    ($($t:ty),*) => {$(
        impl From<$t> for Fail {
            fn from(e: $t) -> Fail {
                Fail::Error(e.to_string())
            }
        }
    )*};
}

error_is_fail!(
    fabric::sim::FabricError,
    fabric::sim::BringUpError,
    fabric::sim::TraceError,
    fabric::osu::MeasureError,
    fabric::osu::CompareError,
    serde_json::Error,
    smd::SmdError,
    ::vhca::traffic::TrafficError,
    ::vhca::bench::BenchError,
    fabric::topology::TopologyError,
    fabric::migrate::MigrateError,
    fabric::serve::SocketError,
    fabric::serve::CtlError,
    fabric::mads::decode::DecodeError,
    fabric::pcap::PcapError
);

/// What a command returns: success, or why not.
pub type Outcome = Result<(), Fail>;

/// Success when `ok`, else a failed check that says `why`.
pub fn check(ok: bool, why: impl FnOnce() -> String) -> Outcome {
    if ok {
        Ok(())
    } else {
        Err(Fail::Check(why()))
    }
}
