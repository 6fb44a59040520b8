//! Arbitrary command bytes and ring states from one guest against the vhca
//! backend: nothing panics, and the other guest's resources are untouched
//! whatever the first one sends, and after it is torn down.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vhca::backend::{Backend, Limits, PortView};
use vhca::device::SoftHca;
use vhca::proto::{Command, MSG_SIZE};
use vhca::ring::{BackendRing, GuestRing, RING_BYTES};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

const BASE: u64 = 0x1_0000;
const SIZE: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let mem = || GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(BASE), SIZE)]).unwrap();
    let mut b = Backend::new(SoftHca::new(1));
    let limits = Limits {
        pds: 4,
        mrs: 8,
        cqs: 8,
        qps: 8,
        reg_bytes: 1 << 15,
    };
    let x = b.add_domain(mem(), limits, PortView::default());
    let y = b.add_domain(mem(), limits, PortView::default());
    b.execute(y, &Command::OpenDevice.encode(0));
    b.execute(y, &Command::AllocPd.encode(1));
    let held_y = b.held(y);
    let live_y = b.device().live();

    // The first byte chooses: direct commands, or a ring whose contents and
    // indices come from the input.
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        b.execute(x, &Command::OpenDevice.encode(0));
        for chunk in rest.chunks(MSG_SIZE) {
            b.execute(x, chunk);
        }
    } else {
        let at = BASE + 0x100;
        let m = b.memory(x).unwrap();
        let _ = GuestRing::init(m, at);
        let n = rest.len().min(RING_BYTES as usize);
        let _ = m.write_slice(&rest[..n], GuestAddress(at));
        if let Ok(mut r) = BackendRing::attach(&b, x, at) {
            for _ in 0..4 {
                let _ = r.service(&mut b);
            }
        }
    }
    assert_eq!(b.held(y), held_y);
    b.remove_domain(x);
    assert_eq!(b.device().live(), live_y);
    assert_eq!(b.held(y), held_y);
});
