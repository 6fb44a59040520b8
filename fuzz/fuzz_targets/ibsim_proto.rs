//! Arbitrary datagrams into ibsim's client protocol as `ibkit fabric serve`
//! reads it: the control packet, the client info it carries, and the
//! request/response packet. Nothing may panic; whatever parses must encode
//! and parse back to the same value.
#![no_main]

use fabric::ibsim::{ClientInfo, SimCtl, SimRequest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = SimCtl::parse(data) {
        let e = c.encode();
        let back = SimCtl::parse(&e).expect("an encoded control packet parses");
        assert_eq!(back, c);
        let info = ClientInfo::parse(&c.data);
        let mut d = [0u8; 64];
        info.encode(&mut d);
        let _ = format!("{info:?}");
    }
    if let Ok(r) = SimRequest::parse(data) {
        let _ = (r.class(), r.tid(), r.is_response());
        let e = r.encode();
        let back = SimRequest::parse(&e).expect("an encoded request parses");
        assert_eq!(back.encode(), e);
    }
});
