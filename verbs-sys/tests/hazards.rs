//! The hazards of posting work requests are compile errors (trybuild):
//! a buffer used, reused or freed while a posted request owns it, and two
//! threads posting on one QP at once. The passing case shows the whole
//! stack held in one struct with no lifetimes.

#[test]
fn posting_hazards_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
