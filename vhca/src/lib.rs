//! VMM-bypass split driver in the style of Xen-IB: a guest frontend, a
//! backend that owns the HCA, and the device and event channels between
//! them.
//!
//! What is here: the command protocol ([`proto`]); resource tables with
//! owner and generation ([`handles`]); the backend's deterministic core
//! with domains, limits and validation ([`backend`]); the request/response
//! ring ([`ring`]) and event ring ([`event`]) in guest memory; the data
//! path's formats ([`layout`]); the [`device::Device`] trait and the
//! software HCA with its data path ([`device::soft`]); the frontend's
//! verbs-style API whose data path never crosses to the backend
//! ([`frontend`]); and the channels ([`channel`]): in-process, and between
//! processes over a memfd, eventfds and an epoll driver loop; and
//! management virtualization ([`mgmt`]): guests' SA queries served at API
//! level with transaction IDs they cannot forge; a device over `verbs-sys`
//! for real hardware ([`device::verbs`]); and the benchmark of the software
//! HCA natively against guests through vhca, and of a real HCA against
//! guests through it ([`mod@bench`]), as `ibkit bench vhca` runs it; and
//! two VMs' traffic across a live migration on `fabric`'s simulated
//! fabric ([`traffic`]), as `ibkit migrate` runs it.
//!
//! # Example
//!
//! Two guests on one software HCA, in-process (a hypervisor would run
//! [`channel::Driver`] and its guests would connect with
//! [`channel::Socket`]; the frontend code is the same):
//!
//! ```
//! use vhca::backend::{Limits, PortView};
//! use vhca::channel::Hub;
//! use vhca::device::SoftHca;
//! use vhca::frontend::{Context, SendWr, Wc};
//! use vhca::layout::op;
//! use vhca::proto::{access, QpType};
//! use vm_memory::GuestMemoryMmap;
//!
//! let hub = Hub::new(SoftHca::<GuestMemoryMmap>::new(1)).unwrap();
//! let device = { let h = hub.clone(); std::thread::spawn(move || h.run_device()) };
//! let open = |lid| {
//!     let port = PortView { lid, port_guid: 0x1000 + u64::from(lid), state: 4 };
//!     let (t, mem, layout) = hub.attach(1 << 20, Limits::default(), port).unwrap();
//!     Context::open(t, mem, layout).unwrap()
//! };
//! let (mut a, mut b) = (open(5), open(6));
//! // Privileged calls: they cross to the backend.
//! let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
//! let (mut ca, mut cb) = (a.create_cq(16).unwrap(), b.create_cq(16).unwrap());
//! let mut qa = a.create_qp(pa, QpType::Rc, &ca, &ca, 8, 8).unwrap();
//! let mut qb = b.create_qp(pb, QpType::Rc, &cb, &cb, 8, 8).unwrap();
//! a.ready(&qa, qb.qpn, 6).unwrap();
//! b.ready(&qb, qa.qpn, 5).unwrap();
//! let ba = a.alloc(4096).unwrap();
//! let bb = b.alloc(4096).unwrap();
//! let ma = a.reg_mr(pa, ba, 4096, access::LOCAL_WRITE).unwrap();
//! let mb = b.reg_mr(pb, bb, 4096, access::LOCAL_WRITE).unwrap();
//! // The data path: no command crosses.
//! let before = a.commands() + b.commands();
//! a.write(ba, b"hello").unwrap();
//! b.post_recv(&mut qb, 1, mb.lkey, bb, 4096).unwrap();
//! let wr = SendWr { opcode: op::SEND, signaled: true, lkey: ma.lkey, addr: ba, len: 5, ..Default::default() };
//! a.post_send(&mut qa, &wr).unwrap();
//! let mut wc = [Wc::default(); 1];
//! while b.poll_cq(&mut cb, &mut wc).unwrap() == 0 {}
//! let mut got = [0u8; 5];
//! b.read(bb, &mut got).unwrap();
//! assert_eq!(&got, b"hello");
//! while a.poll_cq(&mut ca, &mut wc).unwrap() == 0 {}
//! assert_eq!(a.commands() + b.commands(), before);
//! drop((a, b));
//! hub.stop();
//! device.join().unwrap();
//! ```
#![warn(missing_docs)]

pub mod backend;
pub mod bench;
pub mod channel;
pub mod device;
pub mod event;
pub mod frontend;
pub mod handles;
pub mod layout;
pub mod mgmt;
pub mod proto;
pub mod ring;
pub mod shm;
#[cfg(feature = "test-utils")]
pub mod test_utils;
pub mod traffic;

pub use mad_core;
