//! The client's side of the SA (`sa::Receiver`, what `ibkit sa` gathers
//! answers with) under what a fabric delivers to it: arbitrary MADs, each
//! with an arbitrary sender's length, as segments of one answer. Nothing
//! may panic; the data held never passes the bound; once the answer is
//! whole or failed, that is final for the caller; every ACK or ABORT it
//! asks to send is a well-formed SA MAD.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mad_core::sa::{RmppType, SaMad};
use sa::{Received, Receiver};

const BOUND: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let window = u32::from(data.first().copied().unwrap_or(1));
    let mut rx = Receiver::new(window, BOUND);
    // Each step: a length byte, then a MAD-sized chunk.
    for chunk in data.get(1..).unwrap_or(&[]).chunks(257) {
        if chunk.len() < 257 {
            break;
        }
        let len = usize::from(chunk[0]) + 1;
        let Ok(m) = SaMad::parse(&chunk[1..]) else {
            continue;
        };
        let sent = match rx.on_mad_len(&m, len) {
            Received::More(ack) => ack,
            Received::Done { data, ack, .. } => {
                assert!(data.len() <= BOUND + 200, "{} bytes held", data.len());
                if let Some(a) = ack {
                    check(&a, RmppType::Ack);
                }
                return;
            }
            Received::Failed(_, abort) => {
                if let Some(a) = abort {
                    check(&a, RmppType::Abort);
                }
                return;
            }
        };
        if let Some(a) = sent {
            check(&a, RmppType::Ack);
        }
        if let Some((_, held)) = rx.partial() {
            assert!(held.len() <= BOUND, "{} bytes held", held.len());
        }
    }
});

fn check(mad: &[u8; 256], kind: RmppType) {
    let m = SaMad::parse(mad).expect("an SA MAD");
    assert!(m.rmpp.active());
    assert_eq!(m.rmpp.rmpp_type, kind);
}
