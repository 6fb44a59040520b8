//! The client's side of RMPP against the SA's side: whole tables through
//! a channel that loses, repeats and reorders segments, and the receiver's
//! answers to a sender that lies (a payload past its bound, a first
//! segment numbered wrong, a last one whose length disagrees, ABORT, STOP).

use fabric::sim::{bring_up, Fabric, SimConfig};
use mad_core::mad::Method;
use mad_core::sa::*;
use sa::{Addr, ReceiveError, Received, Receiver, Sa, SaConfig};
use smi::sm::{Sm, SmConfig};

fn up(spec: &str) -> (Fabric, Sm) {
    let (f, sm, up) = bring_up(spec, SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    (f, sm)
}

const ME: Addr = Addr {
    lid: mad_core::Lid(0x20),
    qpn: 1,
};

/// A GetTable of every NodeRecord through a channel that drops the
/// segments (SA to client) whose running count `lose` picks, and
/// delivers each `dup`-picked one twice; the client's ACKs always
/// arrive. Returns the data and the SA's retries.
fn transfer(
    sm: &Sm,
    window: u32,
    lose: impl Fn(u64) -> bool,
    dup: impl Fn(u64) -> bool,
) -> (Vec<u8>, SaMad, u64) {
    let mut sa = Sa::new(SaConfig {
        rmpp_timeout_ms: 10,
        rmpp_retries: 50,
        ..SaConfig::default()
    });
    let mut rx = Receiver::new(window, 1 << 20);
    let req = SaMad::request(Method::GetTable, NodeRecord::ID, 7).to_bytes();
    sa.handle_mad(sm.subnet(), ME, &req, 0).unwrap();
    let mut now = 0;
    let mut n = 0u64;
    loop {
        let mut sent: Vec<[u8; 256]> = Vec::new();
        while let Some(t) = sa.poll_transmit() {
            n += 1;
            if lose(n) {
                continue;
            }
            sent.push(t.mad);
            if dup(n) {
                sent.push(t.mad);
            }
        }
        if sent.is_empty() {
            now += 10;
            assert!(now < 100_000, "the transfer never ended");
            sa.handle_timeout(now);
            continue;
        }
        for mad in sent {
            let m = SaMad::parse(&mad).unwrap();
            match rx.on_mad(&m) {
                Received::More(ack) => {
                    if let Some(a) = ack {
                        sa.handle_mad(sm.subnet(), ME, &a, now).unwrap();
                    }
                }
                Received::Done {
                    head, data, ack, ..
                } => {
                    sa.handle_mad(sm.subnet(), ME, &ack.unwrap(), now).unwrap();
                    assert_eq!(sa.transfers(), 0, "the last ACK ends the transfer");
                    return (data, head, sa.stats().retries);
                }
                Received::Failed(e, _) => panic!("the receiver failed: {e}"),
            }
        }
    }
}

/// The records of a table's data, by the first MAD's AttributeOffset.
fn node_guids(head: &SaMad, data: &[u8]) -> Vec<u64> {
    let step = usize::from(head.sa.attribute_offset) * 8;
    assert_eq!(data.len() % step, 0, "whole records only");
    data.chunks(step)
        .map(|c| NodeRecord::decode(c).unwrap().node_info.node_guid.0)
        .collect()
}

#[test]
fn a_table_arrives_whole_through_loss_duplicates_and_any_window() {
    let (f, sm) = up("mport-ntree:6:2");
    let mut want: Vec<u64> = f.topo.nodes.iter().map(|n| n.guid).collect();
    want.sort_unstable();
    for window in [1, 4, 32] {
        let (data, head, retries) = transfer(&sm, window, |_| false, |_| false);
        assert_eq!(head.method(), Method::GetTableResp);
        let mut got = node_guids(&head, &data);
        got.sort_unstable();
        assert_eq!(got, want, "window {window}");
        assert_eq!(retries, 0, "a clean channel needs no retry");
        // Every 5th segment lost, every 3rd delivered twice.
        let (data, head, retries) = transfer(&sm, window, |n| n % 5 == 0, |n| n % 3 == 0);
        let mut lossy = node_guids(&head, &data);
        lossy.sort_unstable();
        assert_eq!(lossy, want, "window {window} through loss");
        assert!(retries > 0, "losses are made good by the SA's retries");
    }
}

/// A first segment for a transfer of `payload` bytes.
fn segment(n: u32, flags: u8, payload: u32) -> SaMad {
    let mut m = SaMad::request(Method::GetTableResp, NodeRecord::ID, 7);
    m.sa.attribute_offset = 14;
    m.rmpp = RmppHeader {
        version: 1,
        rmpp_type: RmppType::Data,
        resp_time: RMPP_NO_RESP_TIME,
        flags: RMPP_ACTIVE | flags,
        status: RmppStatus::Ok,
        segment_number: n,
        payload_length_or_window: payload,
    };
    m
}

fn aborts_with(r: Received, want: RmppStatus) -> ReceiveError {
    match r {
        Received::Failed(e, Some(abort)) => {
            let a = SaMad::parse(&abort).unwrap();
            assert_eq!((a.rmpp.rmpp_type, a.rmpp.status), (RmppType::Abort, want));
            e
        }
        other => panic!("expected an abort with {want:?}, got {other:?}"),
    }
}

#[test]
fn a_lying_sender_is_aborted_and_nothing_grows_past_the_bound() {
    // 4 GiB claimed: refused before anything is held.
    let mut rx = Receiver::new(8, 1 << 20);
    let e = aborts_with(
        rx.on_mad(&segment(1, RMPP_FIRST, u32::MAX)),
        RmppStatus::ResourcesExhausted,
    );
    assert!(matches!(e, ReceiveError::TooLarge { .. }), "{e}");
    // A small claim, then more segments than the bound holds.
    let mut rx = Receiver::new(1000, 1000);
    assert!(matches!(
        rx.on_mad(&segment(1, RMPP_FIRST, 1000)),
        Received::More(_)
    ));
    let mut failed = None;
    for n in 2..20 {
        if let r @ Received::Failed(..) = rx.on_mad(&segment(n, 0, 0)) {
            failed = Some((n, r));
            break;
        }
    }
    let (n, r) = failed.expect("the bound holds");
    assert_eq!(
        n, 6,
        "1000 bytes hold five 200-byte segments; the sixth is refused"
    );
    aborts_with(r, RmppStatus::ResourcesExhausted);
    // A first segment numbered 3.
    let mut rx = Receiver::new(8, 1 << 20);
    aborts_with(
        rx.on_mad(&segment(3, RMPP_FIRST, 440)),
        RmppStatus::BadSegment,
    );
    // Segment 1 without the first flag.
    let mut rx = Receiver::new(8, 1 << 20);
    aborts_with(rx.on_mad(&segment(1, 0, 440)), RmppStatus::BadSegment);
    // A last segment claiming more than a segment holds.
    let mut rx = Receiver::new(8, 1 << 20);
    assert!(matches!(
        rx.on_mad(&segment(1, RMPP_FIRST, 440)),
        Received::More(Some(_))
    ));
    aborts_with(
        rx.on_mad(&segment(2, RMPP_LAST, 221)),
        RmppStatus::BadLength,
    );
    // An ACK where data belongs.
    let mut rx = Receiver::new(8, 1 << 20);
    let mut ack = segment(1, RMPP_FIRST, 0);
    ack.rmpp.rmpp_type = RmppType::Ack;
    aborts_with(rx.on_mad(&ack), RmppStatus::BadType);
    // The sender's ABORT and STOP end it, with nothing sent back.
    for (kind, want) in [
        (
            RmppType::Abort,
            ReceiveError::Aborted(RmppStatus::TooManyRetries),
        ),
        (RmppType::Stop, ReceiveError::Stopped),
    ] {
        let mut rx = Receiver::new(8, 1 << 20);
        let mut m = segment(0, 0, 0);
        m.rmpp.rmpp_type = kind;
        m.rmpp.status = RmppStatus::TooManyRetries;
        match rx.on_mad(&m) {
            Received::Failed(e, None) => assert_eq!(e, want),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_segment_ahead_or_behind_gets_the_ack_of_what_is_held() {
    let mut rx = Receiver::new(4, 1 << 20);
    let Received::More(Some(a)) = rx.on_mad(&segment(1, RMPP_FIRST, 220 * 4)) else {
        panic!("the first segment is acknowledged");
    };
    let a = SaMad::parse(&a).unwrap();
    assert_eq!(
        (a.rmpp.segment_number, a.rmpp.payload_length_or_window),
        (1, 5)
    );
    for n in [3, 1] {
        let Received::More(Some(a)) = rx.on_mad(&segment(n, 0, 0)) else {
            panic!("segment {n} out of order is answered");
        };
        let a = SaMad::parse(&a).unwrap();
        assert_eq!(
            (a.rmpp.segment_number, a.rmpp.payload_length_or_window),
            (1, 5)
        );
    }
    assert_eq!(rx.segments(), 1);
    assert!(matches!(rx.on_mad(&segment(2, 0, 0)), Received::More(None)));
    assert!(matches!(rx.on_mad(&segment(3, 0, 0)), Received::More(None)));
    let Received::Done {
        data, cut: false, ..
    } = rx.on_mad(&segment(4, RMPP_LAST, 20 + 112))
    else {
        panic!("the last segment ends it");
    };
    assert_eq!(data.len(), 3 * 200 + 112);
    // A GetResp without RMPP is whole at once.
    let mut rx = Receiver::new(4, 1 << 20);
    let m = SaMad::request(Method::GetResp, NodeRecord::ID, 1);
    assert!(matches!(rx.on_mad(&m), Received::Done { ack: None, .. }));
}

/// An answer a sender handed to its kernel's RMPP (flagged active, the
/// rest of the RMPP header never filled) arrives through a transport
/// without RMPP as one MAD: with the sender's length, it is whole when
/// that length is short, whatever follows; without, bytes after the whole
/// records say it was cut.
#[test]
fn a_kernel_rmpp_answer_cut_to_one_mad_is_told_apart() {
    let mut m = SaMad::request(Method::GetTableResp, NodeRecord::ID, 9);
    m.rmpp.flags = RMPP_ACTIVE;
    m.sa.attribute_offset = 14;
    m.data[0] = 0x11; // a record's LID
    m.data[112..].fill(0xAB); // not the sender's: what the transport left
    let mut rx = Receiver::new(8, 1 << 20);
    let Received::Done { data, cut, .. } = rx.on_mad_len(&m, 56 + 112) else {
        panic!("one MAD is the whole answer");
    };
    assert_eq!((data.len(), cut), (112, false));
    let mut rx = Receiver::new(8, 1 << 20);
    let Received::Done { data, cut, .. } = rx.on_mad(&m) else {
        panic!("one MAD is all that comes");
    };
    assert_eq!(
        (data.len(), cut),
        (112, true),
        "part of a second record follows"
    );
    // Records that fill the MAD exactly (LinkRecords, 8 bytes): cut.
    let mut l = SaMad::request(Method::GetTableResp, LinkRecord::ID, 9);
    l.rmpp.flags = RMPP_ACTIVE;
    l.sa.attribute_offset = 1;
    l.data.fill(1);
    let mut rx = Receiver::new(8, 1 << 20);
    let Received::Done { data, cut, .. } = rx.on_mad(&l) else {
        panic!()
    };
    assert_eq!((data.len(), cut), (200, true));
    // Two records then zeros: whole.
    l.data[16..].fill(0);
    let mut rx = Receiver::new(8, 1 << 20);
    let Received::Done { data, cut, .. } = rx.on_mad(&l) else {
        panic!()
    };
    assert_eq!((data.len(), cut), (16, false));
}
