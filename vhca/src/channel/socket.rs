//! [`Socket`]: the guest's end of a [`Driver`](super::Driver) connection.

use super::hello::MAGIC;
use super::{drain, layout, wait_readable, CALL_SPIN, HELLO_LEN};
use crate::frontend::{Layout, Transport};
use crate::proto::{Command, Refusal, Response};
use crate::ring::GuestRing;
use crate::shm;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// The guest's end of a [`Driver`](super::Driver) connection.
pub struct Socket {
    stream: UnixStream,
    mem: GuestMemoryMmap,
    ring: GuestRing,
    kick: EventFd,
    call: EventFd,
    notify: EventFd,
    seq: u32,
    commands: u64,
    kicks: u64,
}

impl Socket {
    /// Kicks sent (requests the backend was not polling for).
    pub fn kicks(&self) -> u64 {
        self.kicks
    }

    /// Connects to the driver at `path` with `len` bytes of new guest
    /// memory: the transport, the memory and its layout.
    pub fn connect(path: &Path, len: usize) -> io::Result<(Socket, GuestMemoryMmap, Layout)> {
        let (mem, file) = shm::new_guest_memory(len)?;
        let (kick, call, notify) = (
            EventFd::new(EFD_NONBLOCK)?,
            EventFd::new(EFD_NONBLOCK)?,
            EventFd::new(EFD_NONBLOCK)?,
        );
        let (s, lay) = Socket::connect_with(path, mem.clone(), &file, kick, call, notify)?;
        Ok((s, mem, lay))
    }

    /// Connects with memory and eventfds of the caller's making: `mem`,
    /// backed by `file` (which the driver refuses unless it is a memfd
    /// sealed against shrinking, as [`shm::memfd`] makes them), and the
    /// kick, call and notify eventfds. For integrators that bring their own
    /// memory, and for tests of what the driver does with bad ones.
    pub fn connect_with(
        path: &Path,
        mem: GuestMemoryMmap,
        file: &File,
        kick: EventFd,
        call: EventFd,
        notify: EventFd,
    ) -> io::Result<(Socket, Layout)> {
        use vm_memory::GuestMemoryBackend;
        let len = mem.last_addr().0 as usize + 1;
        let (ring_base, lay) = layout(len as u64);
        let ring = GuestRing::init(&mem, ring_base).ok_or(io::ErrorKind::InvalidInput)?;
        let stream = UnixStream::connect(path)?;
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(MAGIC);
        hello[8..16].copy_from_slice(&(len as u64).to_le_bytes());
        hello[16..24].copy_from_slice(&lay.event_base.to_le_bytes());
        stream
            .send_with_fds(
                &[&hello[..]],
                &[
                    file.as_raw_fd(),
                    kick.as_raw_fd(),
                    call.as_raw_fd(),
                    notify.as_raw_fd(),
                ],
            )
            .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
        Ok((
            Socket {
                stream,
                mem,
                ring,
                kick,
                call,
                notify,
                seq: 0,
                commands: 0,
                kicks: 0,
            },
            lay,
        ))
    }
}

impl Transport for Socket {
    fn call(&mut self, cmd: Command) -> Result<[u64; 7], Refusal> {
        self.seq = self.seq.wrapping_add(1);
        self.commands += 1;
        if !self.ring.push(&self.mem, &cmd.encode(self.seq)) {
            return Err(Refusal::Again);
        }
        // A polling backend sees the request without a kick.
        if !self.ring.backend_polling(&self.mem) {
            self.kicks += 1;
            let _ = self.kick.write(1);
        }
        let start = Instant::now();
        loop {
            if let Some(r) = self.ring.pop(&self.mem) {
                let r = Response::decode(&r).ok_or(Refusal::Malformed)?;
                if r.seq != self.seq {
                    return Err(Refusal::Malformed);
                }
                return r.result;
            }
            // Spin briefly (the driver is usually polling), then sleep.
            if start.elapsed() < CALL_SPIN {
                std::hint::spin_loop();
            } else {
                if start.elapsed() > Duration::from_secs(10) {
                    return Err(Refusal::RingBroken);
                }
                self.ring.set_waiting(&self.mem, true);
                if self.ring.peek(&self.mem) {
                    self.ring.set_waiting(&self.mem, false);
                    continue;
                }
                if !self.ring.backend_polling(&self.mem) {
                    let _ = self.kick.write(1);
                }
                wait_readable(self.call.as_raw_fd(), Duration::from_millis(10));
                drain(&self.call);
                self.ring.set_waiting(&self.mem, false);
            }
        }
    }

    fn uar_file(&mut self) -> Result<File, Refusal> {
        let mut buf = [0u8; 4];
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|_| Refusal::Device)?;
        let (n, f) = self
            .stream
            .recv_with_fd(&mut buf)
            .map_err(|_| Refusal::Device)?;
        match f {
            Some(f) if n == 4 && &buf == b"UAR0" => Ok(f),
            _ => Err(Refusal::Device),
        }
    }

    fn wait_event(&mut self, timeout: Duration) -> bool {
        let r = wait_readable(self.notify.as_raw_fd(), timeout);
        drain(&self.notify);
        r
    }

    fn wake(&mut self) {
        let _ = self.kick.write(1);
    }

    fn commands(&self) -> u64 {
        self.commands
    }
}
