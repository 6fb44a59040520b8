//! Shared helpers for ibkit's cross-crate and peer tests.
