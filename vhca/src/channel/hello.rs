//! The [`Hello`] a guest's [`Socket`](super::Socket) opens its connection
//! to a [`Driver`](super::Driver) with.

use crate::ring::RING_BYTES;
use std::io;
use vm_memory::GuestMemoryMmap;

/// The first bytes of a hello.
pub(super) const MAGIC: &[u8; 4] = b"VHCA";
/// Bytes of a hello: magic, 4 reserved, memory size, event ring base.
pub const HELLO_LEN: usize = 24;

/// What a guest's hello claims, once its bytes are checked: the size of
/// the memory it hands over and where its event ring is. The memory file
/// and three eventfds come with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Bytes of guest memory (64 KiB to 64 GiB).
    pub mem_len: u64,
    /// Guest address of the event ring.
    pub events: u64,
}

impl Hello {
    /// Checks a hello's `bytes` (as many as were read) that came with
    /// `nfds` descriptors.
    pub fn parse(bytes: &[u8], nfds: usize) -> io::Result<Hello> {
        if bytes.len() != HELLO_LEN || &bytes[..4] != MAGIC || nfds != 4 {
            return Err(io::Error::other("malformed hello"));
        }
        let word = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let (mem_len, events) = (word(8), word(16));
        if !(1 << 16..=1 << 36).contains(&mem_len) {
            return Err(io::Error::other("guest memory size out of range"));
        }
        Ok(Hello { mem_len, events })
    }

    /// Checks that the request ring (at 0) and the event ring fit in `mem`,
    /// before anything is set up for the guest.
    pub fn check_layout(&self, mem: &GuestMemoryMmap) -> io::Result<()> {
        if crate::event::EventWriter::attach(mem, self.events).is_none()
            || !vm_memory::GuestMemory::check_range(
                mem,
                vm_memory::GuestAddress(0),
                RING_BYTES as usize,
                vm_memory::Permissions::ReadWrite,
            )
        {
            return Err(io::Error::other("guest layout outside its memory"));
        }
        Ok(())
    }
}
