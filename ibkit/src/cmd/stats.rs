//! Small statistics the benchmarks report.

/// The median, shared with [`vhca::bench`] (one definition in the
/// workspace; its unit test is there).
pub use vhca::bench::median;
