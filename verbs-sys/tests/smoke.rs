//! Where rdma-core is installed: the device list loads (zero devices is not
//! an error), and where a device exists it opens and port 1 answers. Where
//! it is not, the error names the library.

use verbs_sys::{devices, Error};

#[test]
fn the_device_list_loads_or_says_what_is_missing() {
    match devices() {
        Ok(list) => {
            eprintln!("{} RDMA device(s): {list:?}", list.len());
            for d in &list {
                let ctx = verbs_sys::verbs::Context::open(&d.name).unwrap();
                let p = ctx.query_port(1).unwrap();
                assert!((1..=5).contains(&p.state), "{p:?}");
            }
        }
        Err(e @ Error::LibraryMissing { .. }) => {
            assert!(e.to_string().contains("libibverbs.so.1"), "{e}");
            eprintln!("SKIPPED: {e}");
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn opening_a_missing_device_is_a_clear_error() {
    match verbs_sys::verbs::Context::open("no-such-device") {
        Err(Error::NoDevice(n)) => assert_eq!(n, "no-such-device"),
        Err(Error::LibraryMissing { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened a device that does not exist"),
    }
    match verbs_sys::umad::UmadPort::open(Some("no-such-ca"), 1) {
        Err(Error::NoDevice(_) | Error::LibraryMissing { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened a umad port that does not exist"),
    }
}
