//! The bindings bindgen generated from rdma-core's headers (see `regen.sh`).
//! Each library's functions are fields of a struct filled at run time.

/// `infiniband/verbs.h`: types, constants and [`verbs::IbVerbsLib`].
#[rustfmt::skip]
#[allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code, missing_docs, unused_imports)]
#[allow(clippy::all, clippy::pedantic, unsafe_op_in_unsafe_fn)]
#[path = "bindings/verbs.rs"]
pub mod verbs;

/// `infiniband/umad.h`: types, constants and [`umad::UmadLib`].
#[rustfmt::skip]
#[allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code, missing_docs, unused_imports)]
#[allow(clippy::all, clippy::pedantic, unsafe_op_in_unsafe_fn)]
#[path = "bindings/umad.rs"]
pub mod umad;

/// `infiniband/umad_types.h`: the MAD header layouts and the class, method
/// and status constants libibumad's users share.
#[rustfmt::skip]
#[allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code, missing_docs, unused_imports)]
#[allow(clippy::all, clippy::pedantic, unsafe_op_in_unsafe_fn)]
#[path = "bindings/umad_types.rs"]
pub mod umad_types;
