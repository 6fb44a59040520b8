//! The served fabric's system calls: batched reads with each datagram's
//! credentials (`recvmmsg` with SCM_CREDENTIALS), batched writes
//! (`sendmmsg`), `poll`, and abstract socket names as ibsim spells them.
//! Everything unsafe in the server is here.
#![allow(unsafe_code)]

use super::Peer;
use crate::ibsim::REQ_SIZE;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Datagrams read at once.
pub const BATCH: usize = 64;
/// Room for one datagram: more than any valid one, so that an oversized
/// one shows as truncated.
pub const DGRAM: usize = 1024;
/// Bytes of control data per datagram: one SCM_CREDENTIALS message needs
/// 32 on 64-bit Linux.
const CTRL: usize = 64;

/// An abstract socket address as ibsim and umad2sim spell it: their
/// address length counts the name's terminating NUL, so it is part of the
/// name.
pub fn abstract_addr(name: &str) -> std::io::Result<SocketAddr> {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    SocketAddr::from_abstract_name(&b)
}

/// Sets SO_PASSCRED on `sock`, so that every datagram read from it names
/// its sender.
pub fn pass_credentials(sock: &UnixDatagram) -> std::io::Result<()> {
    nix::sys::socket::setsockopt(sock, nix::sys::socket::sockopt::PassCred, &true)
        .map_err(std::io::Error::from)
}

/// Reads one datagram from `sock` without waiting: its length, the
/// sender's address (to answer it) and the sender's credentials.
pub fn recv_with_peer(
    sock: &UnixDatagram,
    buf: &mut [u8],
    cmsg: &mut [u8],
) -> std::io::Result<(usize, Option<nix::sys::socket::UnixAddr>, Option<Peer>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &mut iov,
        Some(cmsg),
        MsgFlags::MSG_DONTWAIT,
    )
    .map_err(std::io::Error::from)?;
    let peer = msg.cmsgs().ok().and_then(|mut c| {
        c.find_map(|m| match m {
            ControlMessageOwned::ScmCredentials(c) => Some(Peer {
                uid: c.uid(),
                pid: c.pid(),
            }),
            _ => None,
        })
    });
    Ok((msg.bytes, msg.address, peer))
}

/// Room for one datagram's credentials, for [`recv_with_peer`].
pub fn cmsg_space() -> Vec<u8> {
    nix::cmsg_space!(nix::sys::socket::UnixCredentials)
}

/// Answers the sender of a datagram read with [`recv_with_peer`].
pub fn reply_to(
    sock: &UnixDatagram,
    data: &[u8],
    to: Option<&nix::sys::socket::UnixAddr>,
) -> std::io::Result<()> {
    let to = to.ok_or_else(|| std::io::Error::other("the sender has no address to answer"))?;
    nix::sys::socket::sendto(
        sock.as_raw_fd(),
        data,
        to,
        nix::sys::socket::MsgFlags::MSG_DONTWAIT,
    )
    .map(|_| ())
    .map_err(std::io::Error::from)
}

/// Buffers for one recvmmsg, set up once: the headers point at the
/// iovecs, the iovecs at the buffers, all on the heap where they stay put.
pub struct RecvBatch {
    bufs: Box<[[u8; DGRAM]]>,
    iov: Box<[libc::iovec]>,
    /// Room for each datagram's credentials (SCM_CREDENTIALS).
    ctrl: Box<[[u64; CTRL / 8]]>,
    hdr: Box<[libc::mmsghdr]>,
}

impl Default for RecvBatch {
    fn default() -> RecvBatch {
        RecvBatch::new()
    }
}

impl RecvBatch {
    /// Buffers for [`BATCH`] datagrams.
    pub fn new() -> RecvBatch {
        let mut bufs: Box<[[u8; DGRAM]]> = vec![[0; DGRAM]; BATCH].into_boxed_slice();
        let mut iov: Box<[libc::iovec]> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: DGRAM,
            })
            .collect();
        let mut ctrl: Box<[[u64; CTRL / 8]]> = vec![[0; CTRL / 8]; BATCH].into_boxed_slice();
        let hdr = iov
            .iter_mut()
            .zip(ctrl.iter_mut())
            .map(|(v, c)| {
                // SAFETY: mmsghdr is a plain C struct for which zero is a
                // valid value.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = v;
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_control = c.as_mut_ptr().cast();
                h.msg_hdr.msg_controllen = CTRL;
                h
            })
            .collect();
        RecvBatch {
            bufs,
            iov,
            ctrl,
            hdr,
        }
    }

    /// Gives every header its whole control buffer back (the kernel
    /// shrinks msg_controllen to what it wrote).
    fn reset_control(&mut self) {
        for h in self.hdr.iter_mut() {
            h.msg_hdr.msg_controllen = CTRL;
        }
    }

    /// The sender of datagram `i` of the last read, from its
    /// SCM_CREDENTIALS message (the socket has SO_PASSCRED).
    pub fn peer(&self, i: usize) -> Option<Peer> {
        debug_assert_eq!(self.ctrl.len(), BATCH);
        let h = &self.hdr.get(i)?.msg_hdr;
        // SAFETY: the header's control pointer and length describe a live
        // buffer of self.ctrl that the kernel filled with well-formed
        // control messages; CMSG_FIRSTHDR and CMSG_NXTHDR stay within
        // msg_controllen, and a cmsghdr is read only when its length
        // covers a ucred.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let len = (*c).cmsg_len;
                if (*c).cmsg_level == libc::SOL_SOCKET
                    && (*c).cmsg_type == libc::SCM_CREDENTIALS
                    && len >= libc::CMSG_LEN(std::mem::size_of::<libc::ucred>() as u32) as usize
                {
                    let u: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    return Some(Peer {
                        uid: u.uid,
                        pid: u.pid,
                    });
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        None
    }

    /// Reads up to [`BATCH`] datagrams from `fd`; with `wait`, waits (up
    /// to the socket's read timeout) for the first. How many came.
    pub fn recv(&mut self, fd: i32, wait: bool) -> std::io::Result<usize> {
        debug_assert_eq!(self.iov.len(), BATCH);
        self.reset_control();
        let flags = if wait {
            libc::MSG_WAITFORONE
        } else {
            libc::MSG_DONTWAIT
        };
        // SAFETY: every header points at its own iovec, which points at a
        // live buffer of DGRAM bytes, and at its own control buffer of
        // CTRL bytes (all owned by self, on the heap); the kernel writes
        // only within them.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdr.as_mut_ptr(),
                BATCH as u32,
                flags,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Datagram `i` of the last read (a truncated one is cut to an empty,
    /// malformed packet).
    pub fn get(&self, i: usize) -> &[u8] {
        let h = &self.hdr[i];
        if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            &[]
        } else {
            &self.bufs[i][..(h.msg_len as usize).min(DGRAM)]
        }
    }
}

/// Sends `msgs` on connected socket `fd` without waiting; how many went.
pub fn send_batch(fd: i32, msgs: &[[u8; REQ_SIZE]]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < msgs.len() {
        let chunk = &msgs[done..msgs.len().min(done + BATCH)];
        // SAFETY: iovec and mmsghdr are plain C structs for which zero is
        // a valid value.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut hdr: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, m) in chunk.iter().enumerate() {
            iov[i].iov_base = m.as_ptr() as *mut libc::c_void;
            iov[i].iov_len = m.len();
            hdr[i].msg_hdr.msg_iov = &mut iov[i];
            hdr[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: the first chunk.len() headers point at live iovecs over
        // live buffers; the kernel only reads them.
        let n =
            unsafe { libc::sendmmsg(fd, hdr.as_mut_ptr(), chunk.len() as u32, libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::WouldBlock {
                return Ok(done);
            }
            return Err(e);
        }
        done += n as usize;
        if (n as usize) < chunk.len() {
            return Ok(done);
        }
    }
    Ok(done)
}

/// Waits up to `timeout` until one of `fds` is readable (or has an error
/// or hang-up); which are, as a mask per fd.
pub fn poll(fds: &[i32], ready: &mut Vec<bool>, timeout: Duration) -> std::io::Result<()> {
    let mut raw: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    loop {
        // SAFETY: `raw` is a valid array of pollfd of the given length.
        let r = unsafe { libc::poll(raw.as_mut_ptr(), raw.len() as libc::nfds_t, ms) };
        if r >= 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
    ready.clear();
    ready.extend(
        raw.iter()
            .map(|r| r.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0),
    );
    Ok(())
}
