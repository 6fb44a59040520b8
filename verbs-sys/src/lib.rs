//! Binding to rdma-core (libibverbs, libibumad), loaded at run time so the
//! workspace builds on machines without rdma-core.
//!
//! **Status:** not implemented yet. This crate is a placeholder in the
//! workspace layout; its contents arrive with the `verbs-sys` issue.
#![warn(missing_docs)]
