//! Shared helpers for ibkit's cross-crate and peer tests: the peer libraries
//! and tools we check ourselves against, loaded or found at run time, and
//! the harness that runs them ([`peers`]; `ibkit bench` uses it too).
#![warn(missing_docs)]

pub mod bench;
pub mod compat;
pub mod libibmad;
pub mod peers;
pub mod sa_bench;

/// True when the environment demands that peer tools be present (CI sets
/// `IBKIT_REQUIRE_PEERS=1`), so a missing peer fails instead of skipping.
pub fn peers_required() -> bool {
    std::env::var("IBKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1")
}

/// Prints a clear skip message, or panics when peers are required.
pub fn skip(test: &str, why: &str) {
    if peers_required() {
        panic!("{test}: peer missing and IBKIT_REQUIRE_PEERS=1: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
}
