//! A hostile guest's data path against the software HCA: arbitrary bytes
//! as its QP buffer and CQ header, then doorbells (see
//! `vhca::test_utils::hostile_data_path`, which checks that nothing
//! panics, the peer is not written outside its region, and teardown
//! leaves nothing).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vhca::test_utils::hostile_data_path(data);
});
