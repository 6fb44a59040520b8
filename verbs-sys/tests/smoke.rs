//! Where rdma-core is installed: the device list loads (zero devices is not
//! an error), and where a device exists it opens and port 1 answers. Where
//! it is not, the error names the library.

use verbs_sys::verbs::Grh;
use verbs_sys::{devices, Error};

#[test]
fn the_device_list_loads_or_says_what_is_missing() {
    match devices() {
        Ok(list) => {
            eprintln!("{} RDMA device(s): {list:?}", list.len());
            let mut checked = 0;
            for d in &list {
                let ctx = verbs_sys::verbs::Context::open(&d.name).unwrap();
                let attr = ctx.query_device().unwrap();
                assert_eq!(attr.node_guid, d.guid, "{attr:?}");
                let p = ctx.query_port(1).unwrap();
                assert!((1..=5).contains(&p.state), "{p:?}");
                if p.state == 4 && (p.lid != 0 || p.is_ethernet()) {
                    let grh = p.is_ethernet().then(|| Grh {
                        dgid: ctx.query_gid(1, 0).unwrap(),
                        sgid_index: 0,
                        hop_limit: 64,
                    });
                    ud_loopback(&ctx, p.lid, grh);
                    checked += 1;
                }
            }
            // scripts/rxe-vm runs this where a device is sure to exist.
            if std::env::var_os("IBKIT_REQUIRE_RDMA").is_some() {
                assert!(checked > 0, "no Active port to send a datagram through");
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

/// A UD datagram to our own QP through port 1, on a device whose port is
/// Active: the whole safe layer (PD, CQ, QP transitions, MR, post, poll,
/// reclaim) against real hardware. A RoCE port is addressed by its GID.
fn ud_loopback(ctx: &verbs_sys::verbs::Context, lid: u16, grh: Option<Grh>) {
    use verbs_sys::qp::{QpCaps, QpType, Queue, SendOp, Transition};
    use verbs_sys::verbs::{Access, AhAttr};
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, None).unwrap();
    let mut qp = pd
        .create_qp(QpType::Ud, &cq, &cq, QpCaps::default())
        .unwrap();
    let qkey = 0x1111_1111;
    qp.modify(Transition::Init {
        port: 1,
        pkey_index: 0,
        access: Access::default(),
        qkey,
    })
    .unwrap();
    qp.modify(Transition::Rtr(None)).unwrap();
    qp.modify(Transition::Rts { sq_psn: 0 }).unwrap();
    let rx = pd
        .register(vec![0u8; 40 + 64].into_boxed_slice(), Access::LOCAL_WRITE)
        .unwrap();
    let mut tx = pd
        .register(vec![0u8; 64].into_boxed_slice(), Access::LOCAL_READ)
        .unwrap();
    tx.slice_mut().copy_from_slice(&[0xA5; 64]);
    qp.post_recv(1, rx, 0..104).unwrap();
    let ah = pd
        .create_ah(AhAttr {
            dlid: lid,
            sl: 0,
            port: 1,
            grh,
        })
        .unwrap();
    let qpn = qp.qp_num();
    qp.post_send(2, tx, 0..64, SendOp::Datagram { ah, qpn, qkey })
        .unwrap();
    assert_eq!(qp.outstanding(Queue::Send), 1);
    let mut got = Vec::new();
    let t = std::time::Instant::now();
    while got.len() < 2 && t.elapsed() < std::time::Duration::from_secs(5) {
        got.extend(cq.poll(4).unwrap());
    }
    assert_eq!(got.len(), 2, "two completions");
    for c in got {
        assert!(c.is_ok(), "{c:?}");
        let recv = c.opcode >= 128;
        let mr = qp.reclaim(c).unwrap();
        if recv {
            assert_eq!(&mr.slice()[40..], &[0xA5; 64][..]);
        }
    }
    assert_eq!(qp.outstanding(Queue::Send) + qp.outstanding(Queue::Recv), 0);
}
