//! Requests that come in several RMPP segments: a GetMulti(MultiPathRecord)
//! with more GIDs than one MAD holds, reassembled by the SA and answered;
//! segments out of order, cut short, too large, or abandoned; and the
//! RMPP ACKs of the SA's own answers in either of their two forms.

mod common;
use common::*;
use mad_core::mad::Method;
use mad_core::sa::*;
use mad_core::Gid;
use sa::{Addr, Sa, SaConfig, SaError};

/// `head` with `data` as RMPP DATA segments, as a sender's RMPP layer
/// cuts them.
fn segments(head: &SaMad, data: &[u8]) -> Vec<SaMad> {
    sa::rmpp::data_segments(head, data)
}

/// A GetMulti(MultiPathRecord) head and its data: `srcs` then `dsts`.
fn multipath(srcs: &[Gid], dsts: &[Gid], tid: u64) -> (SaMad, Vec<u8>) {
    let mut m = SaMad::request(Method::GetMulti, MultiPathRecord::ID, tid);
    m.sa.component_mask = mask::<MultiPathRecord>(&["sgid_count", "dgid_count"]);
    let mut data = vec![0u8; 24];
    data[15] = srcs.len() as u8; // SGIDCount, bits 120..128
    data[16] = dsts.len() as u8; // DGIDCount, bits 128..136
    for g in srcs.iter().chain(dsts) {
        data.extend_from_slice(&g.0);
    }
    (m, data)
}

/// Sends `m`; what the SA queued for `from`.
fn send(sa: &mut Sa, sm: &smi::sm::Sm, from: Addr, m: &SaMad, now: u64) -> Vec<SaMad> {
    exchange(sa, sm, from, &m.to_bytes(), now)
}

/// Every record of an answer sent at once.
fn records(segs: &[SaMad]) -> Vec<PathRecord> {
    let total = segs[0].rmpp.payload_length_or_window as usize - 20 * segs.len();
    let mut data: Vec<u8> = segs.iter().flat_map(|s| s.data).collect();
    data.truncate(total);
    data.chunks(64)
        .map(|c| PathRecord::decode(c).unwrap())
        .collect()
}

fn at_once() -> Sa {
    Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    })
}

/// 12 source and 12 destination GIDs, 408 bytes in three segments: the
/// first acknowledged at once (a sender starts with a window of one),
/// opening a window of 8, then the last, each ACK with the response bit
/// set (as a kernel requester expects); then the 144 paths, each the one
/// a PathRecord Get gives.
#[test]
fn a_multipath_request_in_three_segments_is_answered_with_every_pair() {
    let (f, sm) = up("mport-ntree:8:2");
    let mut sa = at_once();
    let hs = hosts(&f);
    let me = hs[0].1;
    let gids: Vec<Gid> = hs.iter().map(|&(i, _)| gid_of(&f, i)).collect();
    assert!(gids.len() >= 24);
    let (srcs, dsts) = (&gids[..12], &gids[12..24]);
    let (head, data) = multipath(srcs, dsts, 0x600);
    let segs = segments(&head, &data);
    assert_eq!(segs.len(), 3);
    let acked = |out: &[SaMad], seg: u32, window: u32| {
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].rmpp.rmpp_type, RmppType::Ack);
        assert_eq!(out[0].header.method, 0x94, "GetMulti with the response bit");
        assert_eq!(
            (
                out[0].rmpp.segment_number,
                out[0].rmpp.payload_length_or_window
            ),
            (seg, window)
        );
    };
    acked(&send(&mut sa, &sm, me, &segs[0], 0), 1, 9);
    assert_eq!(sa.requests_receiving(), 1);
    // Segment 2: inside the window, no ACK.
    assert!(send(&mut sa, &sm, me, &segs[1], 0).is_empty());
    // The last: its ACK, then the answer.
    let out = send(&mut sa, &sm, me, &segs[2], 0);
    let ack = &out[0];
    assert_eq!(ack.rmpp.rmpp_type, RmppType::Ack);
    assert_eq!(ack.header.method, 0x94, "GetMulti with the response bit");
    assert_eq!(ack.rmpp.segment_number, 3);
    assert_eq!(ack.header.transaction_id.get(), 0x600);
    let answer = &out[1..];
    assert!(answer
        .iter()
        .all(|m| m.method() == Method::GetMultiResp && m.sa_status() == SaStatus::Ok));
    let recs = records(answer);
    assert_eq!(recs.len(), 144);
    for (k, p) in recs.iter().enumerate() {
        assert_eq!((p.sgid, p.dgid), (srcs[k / 12], dsts[k % 12]));
        let q = PathRecord {
            sgid: p.sgid,
            dgid: p.dgid,
            ..PathRecord::default()
        };
        let (st, one) = one(
            &mut sa,
            &sm,
            me,
            &ask(Method::Get, &q, mask::<PathRecord>(&["sgid", "dgid"]), 0),
            0,
        );
        assert_eq!(st, SaStatus::Ok);
        assert_eq!(one.record::<PathRecord>().unwrap(), *p);
    }
    assert_eq!(sa.requests_receiving(), 0);
    assert_eq!(sa.stats().requests_reassembled, 1);
    // More GIDs than the request holds is refused, as in one MAD.
    let (head, mut data) = multipath(srcs, dsts, 0x601);
    data[16] = 13;
    let segs = segments(&head, &data);
    let _ = send(&mut sa, &sm, me, &segs[0], 0);
    let _ = send(&mut sa, &sm, me, &segs[1], 0);
    let out = send(&mut sa, &sm, me, &segs[2], 0);
    assert_eq!(out[1].sa_status(), SaStatus::ReqInvalid);
}

/// A segment ahead of one lost is answered with the ACK of what is held,
/// and the transfer goes on from there; a window's last segment is
/// acknowledged; a later segment of no transfer is dropped.
#[test]
fn segments_out_of_order_are_taken_in_order() {
    let (f, sm) = up("mport-ntree:8:2");
    let mut sa = at_once();
    let hs = hosts(&f);
    let me = hs[0].1;
    let gids: Vec<Gid> = hs.iter().map(|&(i, _)| gid_of(&f, i)).collect();
    // 30 GIDs: 504 bytes, three segments.
    let (head, data) = multipath(&gids[..15], &gids[15..30], 0x700);
    let segs = segments(&head, &data);
    assert_eq!(send(&mut sa, &sm, me, &segs[0], 0).len(), 1, "ACK 1");
    let out = send(&mut sa, &sm, me, &segs[2], 0);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].rmpp.rmpp_type, RmppType::Ack);
    assert_eq!(out[0].rmpp.segment_number, 1, "what is held");
    assert!(send(&mut sa, &sm, me, &segs[1], 0).is_empty());
    let out = send(&mut sa, &sm, me, &segs[2], 0);
    assert_eq!(out[0].rmpp.segment_number, 3);
    assert_eq!(records(&out[1..]).len(), 225);
    // A middle segment of a transfer that is over: dropped.
    assert_eq!(
        sa.handle_mad(sm.subnet(), me, &segs[1].to_bytes(), 0),
        Err(SaError::Unexpected)
    );
    assert!(drain(&mut sa).is_empty());
    // Two requesters at once, interleaved, each whole.
    let (a, b) = (hs[1].1, hs[2].1);
    let (ha, da) = multipath(&gids[..6], &gids[6..12], 0x701);
    let (hb, db) = multipath(&gids[12..18], &gids[18..24], 0x701);
    let (sa_, sb) = (segments(&ha, &da), segments(&hb, &db));
    assert_eq!((sa_.len(), sb.len()), (2, 2));
    assert_eq!(send(&mut sa, &sm, a, &sa_[0], 0).len(), 1);
    assert_eq!(send(&mut sa, &sm, b, &sb[0], 0).len(), 1);
    assert_eq!(sa.requests_receiving(), 2);
    let ra = exchange(&mut sa, &sm, a, &sa_[1].to_bytes(), 0);
    let rb = exchange(&mut sa, &sm, b, &sb[1].to_bytes(), 0);
    let pa = records(&ra[1..]);
    let pb = records(&rb[1..]);
    assert_eq!((pa.len(), pb.len()), (36, 36));
    assert_eq!(pa[0].sgid, gids[0]);
    assert_eq!(pb[0].sgid, gids[12]);
}

/// What contradicts the transfer ends it with an ABORT and leaves nothing
/// behind: a last segment whose length disagrees, a first segment
/// claiming more than the SA holds, a first segment numbered 2; a
/// requester that stops, or goes quiet, is forgotten.
#[test]
fn a_bad_or_abandoned_request_is_aborted_and_forgotten() {
    let (f, sm) = up("mport-ntree:8:2");
    let cfg = SaConfig {
        rmpp_acks: false,
        rmpp_timeout_ms: 100,
        rmpp_retries: 1,
        max_transfers: 2,
        ..SaConfig::default()
    };
    let mut sa = Sa::new(cfg);
    let hs = hosts(&f);
    let me = hs[0].1;
    let gids: Vec<Gid> = hs.iter().map(|&(i, _)| gid_of(&f, i)).collect();
    let (head, data) = multipath(&gids[..12], &gids[12..24], 0x800);
    let aborted = |out: &[SaMad], status: RmppStatus| {
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].rmpp.rmpp_type, RmppType::Abort);
        assert_eq!(out[0].rmpp.status, status);
        assert!(out[0].header.is_response());
    };
    // The last segment's PayloadLength past a segment.
    let mut segs = segments(&head, &data);
    segs[2].rmpp.payload_length_or_window = 300;
    for s in &segs[..2] {
        let out = send(&mut sa, &sm, me, s, 0);
        assert!(out.iter().all(|m| m.rmpp.rmpp_type == RmppType::Ack));
    }
    aborted(&send(&mut sa, &sm, me, &segs[2], 0), RmppStatus::BadLength);
    assert_eq!(sa.requests_receiving(), 0);
    // A first segment claiming 100 kB.
    let mut big = segments(&head, &data);
    big[0].rmpp.payload_length_or_window = 100_000;
    aborted(
        &send(&mut sa, &sm, me, &big[0], 0),
        RmppStatus::ResourcesExhausted,
    );
    assert_eq!(sa.requests_receiving(), 0);
    // Data past the SA's bound, whatever the first segment said: 41
    // segments of 200 bytes are 8,200, past 8 KiB.
    let many = vec![0u8; 41 * 200];
    let long = segments(&head, &many);
    let mut out = Vec::new();
    for s in &long {
        let mut s = s.clone();
        if s.rmpp.first() {
            s.rmpp.payload_length_or_window = 4000;
        }
        out = send(&mut sa, &sm, me, &s, 0);
        if !out.is_empty() && out[0].rmpp.rmpp_type == RmppType::Abort {
            break;
        }
    }
    aborted(&out, RmppStatus::ResourcesExhausted);
    assert_eq!(sa.requests_receiving(), 0);
    // A segment 1 without First.
    let mut bad = segments(&head, &data);
    bad[0].rmpp.flags = RMPP_ACTIVE;
    bad[0].rmpp.segment_number = 2;
    let _ = sa.handle_mad(sm.subnet(), me, &bad[0].to_bytes(), 0);
    assert!(drain(&mut sa).is_empty());
    assert_eq!(sa.requests_receiving(), 0);
    // Two requesters hold the SA's two slots; a third is aborted.
    let segs = segments(&head, &data);
    for h in &hs[1..3] {
        assert_eq!(
            send(&mut sa, &sm, h.1, &segs[0], 0)[0].rmpp.rmpp_type,
            RmppType::Ack
        );
    }
    aborted(
        &send(&mut sa, &sm, hs[3].1, &segs[0], 0),
        RmppStatus::ResourcesExhausted,
    );
    // One stops; the other goes quiet and is dropped after the
    // timeout and its retries (200 ms).
    let mut stop = segs[0].clone();
    stop.rmpp.rmpp_type = RmppType::Stop;
    assert!(send(&mut sa, &sm, hs[1].1, &stop, 10).is_empty());
    assert_eq!(sa.requests_receiving(), 1);
    assert_eq!(sa.poll_timeout(), Some(200));
    sa.handle_timeout(199);
    assert_eq!(sa.requests_receiving(), 1);
    sa.handle_timeout(200);
    assert_eq!(sa.requests_receiving(), 0);
    assert!(drain(&mut sa).is_empty());
    // Its next segment belongs to nothing.
    assert_eq!(
        sa.handle_mad(sm.subnet(), hs[2].1, &segs[1].to_bytes(), 300),
        Err(SaError::Unexpected)
    );
    assert_eq!(sa.stats().requests_reassembled, 0);
    assert!(sa.stats().requests_abandoned >= 6);
}

/// The ACK of an answer's segment moves the transfer on whether its
/// method keeps the response bit (ibkit's client) or clears it (the Linux
/// kernel's RMPP): a cleared bit is not a new request that would start the
/// answer over.
#[test]
fn an_ack_with_the_request_method_moves_the_answer_on() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = Sa::new(SaConfig::default());
    let me = hosts(&f)[0].1;
    let req = ask(Method::GetTable, &NodeRecord::default(), 0, 0);
    let first = exchange(&mut sa, &sm, me, &req, 0);
    assert_eq!(first.len(), 1);
    let mut seg = first[0].rmpp.segment_number;
    let mut answered = sa.stats().answered;
    loop {
        let mut ack = first[0].clone();
        ack.header.method = Method::GetTable.into();
        ack.rmpp.rmpp_type = RmppType::Ack;
        ack.rmpp.flags = RMPP_ACTIVE;
        ack.rmpp.segment_number = seg;
        ack.rmpp.payload_length_or_window = seg + 1;
        let out = exchange(&mut sa, &sm, me, &ack.to_bytes(), 1);
        assert_eq!(sa.stats().answered, answered, "not a new request");
        answered = sa.stats().answered;
        match out.first() {
            Some(next) => {
                assert_eq!(next.rmpp.segment_number, seg + 1);
                seg += 1;
            }
            None => break,
        }
    }
    assert!(seg > 1);
    assert_eq!(sa.transfers(), 0);
    assert_eq!(sa.stats().transfers_done, 1);
}

/// The largest MultiPathRecord: 255 source and 255 destination GIDs, 8,184
/// bytes in 41 segments, just within the SA's 8 KiB; NumbPath keeps the
/// answer to 3 paths.
#[test]
fn the_largest_multipath_request_fits() {
    let (f, sm) = up("mport-ntree:4:2");
    let mut sa = at_once();
    let hs = hosts(&f);
    let me = hs[0].1;
    let gids: Vec<Gid> = hs.iter().map(|&(i, _)| gid_of(&f, i)).collect();
    let many: Vec<Gid> = gids.iter().copied().cycle().take(255).collect();
    let (mut head, mut data) = multipath(&many, &many, 0x900);
    data[5] = 3; // NumbPath
    head.sa.component_mask |= mask::<MultiPathRecord>(&["numb_path"]);
    assert_eq!(data.len(), 24 + 510 * 16);
    let segs = segments(&head, &data);
    assert_eq!(segs.len(), 41);
    let mut out = Vec::new();
    for s in &segs {
        out = send(&mut sa, &sm, me, s, 0);
        assert!(
            out.iter().all(|m| m.rmpp.rmpp_type != RmppType::Abort),
            "{out:?}"
        );
    }
    assert_eq!(out[0].rmpp.rmpp_type, RmppType::Ack);
    assert_eq!(out[0].rmpp.segment_number, 41);
    let answer = &out[1..];
    assert_eq!(answer[0].sa_status(), SaStatus::Ok);
    assert_eq!(records(answer).len(), 3);
    assert_eq!(sa.stats().requests_reassembled, 1);
}
