//! Shared memory between the guest's process and the backend's: guest
//! memory is a memfd both map, so the backend reaches it through the same
//! `vm-memory` types a VMM would give it.

use std::fs::File;
use std::io;
use std::os::fd::FromRawFd;
use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap};

/// A new anonymous shared file of `len` bytes (`memfd_create`).
pub fn memfd(name: &str, len: u64) -> io::Result<File> {
    let cname = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: memfd_create reads a NUL-terminated name and returns a new
    // descriptor (or -1); nothing else is touched.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(len)?;
    Ok(file)
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
