//! [`Hub`]: a backend in-process, and [`Direct`], a frontend's transport to it.

use super::{drain, layout, wait_any, wait_readable, HOT};
use crate::backend::{Backend, Limits, PortView};
use crate::device::Device;
use crate::frontend::{Layout, Transport};
use crate::handles::DomainId;
use crate::proto::{Command, Refusal};
use crate::shm;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

/// An in-process backend: frontends attach with [`Hub::attach`], and
/// [`Hub::run_device`] (on a thread of its own) runs the device.
pub struct Hub<D: Device<GuestMemoryMmap>> {
    backend: Mutex<Backend<GuestMemoryMmap, D>>,
    notifiers: Mutex<HashMap<DomainId, Arc<EventFd>>>,
    wake: EventFd,
    stop: AtomicBool,
    /// Frontends waiting for the lock: the device loop stands back.
    callers: AtomicUsize,
    /// Asked to stop polling now rather than after [`HOT`].
    rest: Arc<AtomicBool>,
    /// Sleeps the device itself ended ([`Device::wake_fd`]).
    device_wakes: AtomicU64,
}

impl<D: Device<GuestMemoryMmap>> Hub<D> {
    /// A hub around a backend owning `device`.
    pub fn new(device: D) -> io::Result<Arc<Hub<D>>> {
        Ok(Arc::new(Hub {
            backend: Mutex::new(Backend::new(device)),
            notifiers: Mutex::new(HashMap::new()),
            wake: EventFd::new(EFD_NONBLOCK)?,
            stop: AtomicBool::new(false),
            callers: AtomicUsize::new(0),
            rest: Arc::new(AtomicBool::new(false)),
            device_wakes: AtomicU64::new(0),
        }))
    }

    /// How many times the device's own file ([`Device::wake_fd`]) woke
    /// the sleeping loop.
    pub fn device_wakes(&self) -> u64 {
        self.device_wakes.load(Ordering::Relaxed)
    }

    /// The backend, locked.
    pub fn backend(&self) -> std::sync::MutexGuard<'_, Backend<GuestMemoryMmap, D>> {
        self.backend.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new guest of `len` bytes of memory: its transport, memory and
    /// layout, ready for [`crate::frontend::Context::open`].
    pub fn attach(
        self: &Arc<Self>,
        len: usize,
        limits: Limits,
        port: PortView,
    ) -> io::Result<(Direct<D>, GuestMemoryMmap, Layout)> {
        let (mem, _file) = shm::new_guest_memory(len)?;
        let (_, lay) = layout(len as u64);
        let notify = Arc::new(EventFd::new(EFD_NONBLOCK)?);
        let dom = {
            let mut b = self.backend();
            let dom = b.add_domain(mem.clone(), limits, port);
            b.attach_events(dom, lay.event_base)
                .map_err(|r| io::Error::other(format!("{r:?}")))?;
            dom
        };
        self.notifiers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(dom, notify.clone());
        Ok((
            Direct {
                hub: self.clone(),
                dom,
                notify,
                commands: 0,
            },
            mem,
            lay,
        ))
    }

    /// Runs the device until [`Hub::stop`]: polls while there is work,
    /// sleeps on the wake eventfd when idle.
    pub fn run_device(&self) {
        let mut notify = Vec::new();
        let mut last = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            if self.callers.load(Ordering::Acquire) > 0 {
                std::hint::spin_loop();
                continue;
            }
            let work = self.pass(&mut notify);
            if work > 0 {
                last = Instant::now();
            } else if last.elapsed() > HOT || self.rest.swap(false, Ordering::Relaxed) {
                self.backend().device_mut().idle(true);
                // Woken by a guest, or work found on the re-check: hot
                // again. A timeout leaves the loop idle (no spinning burst
                // every time it looks).
                let mut fds = vec![self.wake.as_raw_fd()];
                fds.extend(self.backend().device().wake_fd().map(|f| f.as_raw_fd()));
                let woken = self.pass(&mut notify) > 0 || {
                    let w = wait_any(&fds, Duration::from_millis(20));
                    drain(&self.wake);
                    if w & 2 != 0 {
                        self.device_wakes.fetch_add(1, Ordering::Relaxed);
                    }
                    w != 0
                };
                self.backend().device_mut().idle(false);
                if woken {
                    last = Instant::now();
                }
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// One pass of the device, and the notifications it calls for.
    fn pass(&self, notify: &mut Vec<DomainId>) -> usize {
        notify.clear();
        let work = self.backend().poll(notify);
        if !notify.is_empty() {
            let n = self.notifiers.lock().unwrap_or_else(|e| e.into_inner());
            for d in notify.iter() {
                if let Some(e) = n.get(d) {
                    let _ = e.write(1);
                }
            }
        }
        work + notify.len()
    }

    /// Makes the device loop stop polling and sleep now, until the next
    /// doorbell or call (a benchmark's other side is about to run).
    pub fn rest(&self) {
        self.rest.store(true, Ordering::Relaxed);
    }

    /// Stops [`Hub::run_device`].
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.wake.write(1);
    }
}

/// A frontend's transport to an in-process [`Hub`].
pub struct Direct<D: Device<GuestMemoryMmap>> {
    hub: Arc<Hub<D>>,
    dom: DomainId,
    notify: Arc<EventFd>,
    commands: u64,
}

impl<D: Device<GuestMemoryMmap>> Direct<D> {
    /// The domain this transport speaks for.
    pub fn domain(&self) -> DomainId {
        self.dom
    }
}

impl<D: Device<GuestMemoryMmap>> Drop for Direct<D> {
    fn drop(&mut self) {
        self.hub
            .notifiers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.dom);
        self.hub.backend().remove_domain(self.dom);
    }
}

impl<D: Device<GuestMemoryMmap>> Transport for Direct<D> {
    fn call(&mut self, cmd: Command) -> Result<[u64; 7], Refusal> {
        self.commands += 1;
        self.hub.callers.fetch_add(1, Ordering::AcqRel);
        let r = self.hub.backend().run(self.dom, cmd);
        self.hub.callers.fetch_sub(1, Ordering::AcqRel);
        r
    }

    fn uar_file(&mut self) -> Result<File, Refusal> {
        let b = self.hub.backend();
        let fd = b.uar_fd(self.dom).ok_or(Refusal::NotOpen)?;
        fd.try_clone_to_owned()
            .map(File::from)
            .map_err(|_| Refusal::Device)
    }

    fn wait_event(&mut self, timeout: Duration) -> bool {
        let r = wait_readable(self.notify.as_raw_fd(), timeout);
        drain(&self.notify);
        r
    }

    fn wake(&mut self) {
        let _ = self.hub.wake.write(1);
    }

    fn commands(&self) -> u64 {
        self.commands
    }
}
