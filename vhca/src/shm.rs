//! Shared memory between the guest's process and the backend's: guest
//! memory is a memfd both map, so the backend reaches it through the same
//! `vm-memory` types a VMM would give it.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap};

/// A new anonymous shared file of `len` bytes (`memfd_create`), sealed
/// at that size: neither side can shrink it under the other's mapping
/// (where an access past the end would kill the process with SIGBUS), nor
/// grow it, nor change the seals.
pub fn memfd(name: &str, len: u64) -> io::Result<File> {
    let file = unsealed_memfd(name, len)?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: F_ADD_SEALS on a descriptor we own reads only its argument.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// A memfd of `len` bytes that accepts seals but has none: what a careless
/// or hostile guest might send (for tests).
pub fn unsealed_memfd(name: &str, len: u64) -> io::Result<File> {
    let cname = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: memfd_create reads a NUL-terminated name and returns a new
    // descriptor (or -1); nothing else is touched.
    let fd =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(len)?;
    Ok(file)
}

/// Checks that memory a guest handed over cannot shrink under the
/// backend's mapping: a memfd sealed with F_SEAL_SHRINK, as vhost-user
/// backends expect. Anything else is refused.
pub fn check_sealed(file: &File) -> io::Result<()> {
    // SAFETY: F_GET_SEALS on a descriptor we own only returns a value.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        return Err(io::Error::other(
            "guest memory is not a memfd (F_GET_SEALS failed)",
        ));
    }
    if seals & libc::F_SEAL_SHRINK == 0 {
        return Err(io::Error::other(
            "guest memory is not sealed against shrinking (F_SEAL_SHRINK)",
        ));
    }
    Ok(())
}

/// Makes a descriptor a guest sent into an eventfd the backend may write
/// without ever blocking: refused unless it is an eventfd, and switched to
/// non-blocking (a full counter then costs only the guest's own wake-up).
pub fn guest_eventfd(file: File) -> io::Result<vmm_sys_util::eventfd::EventFd> {
    let fd = file.as_raw_fd();
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))?;
    if !info.lines().any(|l| l.starts_with("eventfd-count:")) {
        return Err(io::Error::other(
            "a descriptor that should be an eventfd is not one",
        ));
    }
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own change only its
    // status flags.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: `file` is an eventfd we own; its descriptor passes to the
    // EventFd, which closes it.
    Ok(unsafe {
        vmm_sys_util::eventfd::EventFd::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(file))
    })
}

/// Guest memory of `len` bytes at guest-physical 0, backed by `file`
/// (the guest's own view, or the backend's mapping of it).
pub fn guest_memory(file: File, len: usize) -> io::Result<GuestMemoryMmap> {
    GuestMemoryMmap::from_ranges_with_files([(
        GuestAddress(0),
        len,
        Some(FileOffset::new(file, 0)),
    )])
    .map_err(|e| io::Error::other(e.to_string()))
}

/// New guest memory of `len` bytes in a memfd: the memory and the file to
/// hand to the backend.
pub fn new_guest_memory(len: usize) -> io::Result<(GuestMemoryMmap, File)> {
    let f = memfd("vhca-guest", len as u64)?;
    let mem = guest_memory(f.try_clone()?, len)?;
    Ok((mem, f))
}
