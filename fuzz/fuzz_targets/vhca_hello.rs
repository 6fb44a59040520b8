//! A guest's hello to the vhca driver, and the set-up that follows it: the
//! hello's bytes (and the number of descriptors that came with it) are
//! checked, the layout it claims is checked against a guest memory, and a
//! guest that passes is set up in a backend and torn down again. Nothing
//! may panic, and a torn-down guest leaves nothing behind.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vhca::backend::{Backend, Limits, PortView};
use vhca::channel::{Hello, HELLO_LEN};
use vhca::device::SoftHca;
use vhca::ring::BackendRing;
use vm_memory::GuestMemoryMmap;

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let nfds = usize::from(data[0] % 6);
    let bytes = &data[1..data.len().min(1 + HELLO_LEN + 1)];
    let Ok(h) = Hello::parse(bytes, nfds) else {
        return;
    };
    // A guest memory of the size it claims, capped for the fuzzer.
    let len = h.mem_len.min(1 << 20) as usize;
    let (mem, _file) = vhca::shm::new_guest_memory(len).expect("memory");
    if h.check_layout(&mem).is_err() {
        return;
    }
    let mut b: Backend<GuestMemoryMmap, SoftHca<GuestMemoryMmap>> = Backend::new(SoftHca::new(1));
    let dom = b.add_domain(mem, Limits::default(), PortView::default());
    let ok = BackendRing::attach(&b, dom, 0).and_then(|_| b.attach_events(dom, h.events));
    let _ = ok;
    let held = b.remove_domain(dom);
    let _ = held;
    assert_eq!(b.device().live(), 0);
});
