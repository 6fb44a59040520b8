//! Channels between frontends and a backend, and the backend's driver
//! loop.
//!
//! - [`Hub`] keeps a backend in-process: frontends reach it through
//!   [`Direct`] (a call is a function call under a lock) and a thread runs
//!   the device. This is how an application uses the HCA natively, and how
//!   tests drive the backend without a second process.
//! - [`Driver`] is the backend's loop for guests in other processes, in
//!   the manner of a vhost-user backend: each guest connects over a unix
//!   socket and passes its memory (a memfd) and three eventfds (kick:
//!   guest to backend; call: responses ready; notify: events ready). The
//!   guest's requests travel on the request/response ring in its memory
//!   ([`crate::ring`]), its events on the event ring ([`crate::event`]).
//!   The driver answers with the UAR page's file once the guest allocated
//!   it. When the socket closes, everything the guest held is torn down.
//!   [`Socket`] is the guest's end.
//!
//! The software HCA has no hardware to watch its doorbells, so the loop
//! polls while there is work and for a while after; then it tells the
//! guests (the UAR's asleep flag) and sleeps in `epoll_wait` until a kick.

// One file each: the in-process hub and its transport, the guest's socket,
// the hello a socket opens its connection with, and the driver loop. What
// they share, the wait helpers and where things go in a guest's memory, is
// here.
mod driver;
mod hello;
mod hub;
mod socket;

pub use driver::{Driver, DriverLimits, DriverStats};
pub use hello::{Hello, HELLO_LEN};
pub use hub::{Direct, Hub};
pub use socket::Socket;

use crate::event::EVENT_RING_BYTES;
use crate::frontend::Layout;
use crate::ring::RING_BYTES;
use std::os::fd::RawFd;
use std::time::Duration;
use vmm_sys_util::eventfd::EventFd;

/// How long the device loop keeps polling after the last work.
pub const HOT: Duration = Duration::from_millis(2);

/// How long a guest waiting for a response polls the ring before it
/// sleeps on the call eventfd. A sleeping vCPU costs a wake-up (tens of
/// microseconds on a virtual machine's idle CPU); a registration of a
/// thousand pages takes about a millisecond.
pub const CALL_SPIN: Duration = Duration::from_millis(2);

/// Waits until `fd` is readable or `timeout` passes; true when readable.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> bool {
    wait_any(&[fd], timeout) != 0
}

/// Waits up to `timeout` for any of `fds` (at most two) to become
/// readable; which did, as bits (1: the first, 2: the second).
fn wait_any(fds: &[RawFd], timeout: Duration) -> u32 {
    let none = libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    };
    let mut p = [none; 2];
    let n = fds.len().min(2);
    for (slot, &fd) in p.iter_mut().zip(&fds[..n]) {
        slot.fd = fd;
        slot.events = libc::POLLIN;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `n` valid pollfds and a valid timespec, on our stack.
    let r = unsafe { libc::ppoll(p.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
    if r <= 0 {
        return 0;
    }
    (0..n)
        .filter(|&i| p[i].revents != 0)
        .fold(0, |m, i| m | 1 << i)
}

fn drain(e: &EventFd) {
    let _ = e.read();
}

/// Where the channels put things in a guest's memory.
fn layout(len: u64) -> (u64, Layout) {
    let ring = 0;
    let events = RING_BYTES.next_multiple_of(4096);
    let heap = (events + EVENT_RING_BYTES).next_multiple_of(4096);
    (
        ring,
        Layout {
            event_base: events,
            heap: (heap, len),
        },
    )
}
