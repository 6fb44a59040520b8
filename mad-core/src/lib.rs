//! `mad-core`: encode and decode InfiniBand Management Datagrams (MADs) of the
//! subnet management classes — LID-routed (0x01) and directed-route (0x81)
//! Subnet Management Packets — and every SMP attribute, bit-exact with the
//! InfiniBand Architecture.
//!
//! # The no-panic contract
//!
//! Nothing in this crate panics on input bytes and nothing reads past a
//! buffer. Every entry point that takes bytes from outside checks the length
//! first and returns [`Error::Truncated`]; after that check, all accessors are
//! total. Field values the specification reserves are kept (enumerations carry
//! an `Unknown(n)` variant) so an agent can re-encode what it does not
//! understand; [`attr::Attribute::check`] and the modifier decoders report
//! values that are invalid with a typed [`Error`] naming the field.
//!
//! # Layout declarations
//!
//! Every attribute is declared once, as a table of `(bit offset, width)` per
//! field counted from the most significant bit of byte 0 as the specification
//! does ([`field::FieldDesc`]). Decoding, encoding, `Debug`, and the
//! field-by-field dump ([`field::Fields::visit`]) are all generated from that
//! declaration. Byte-aligned headers (the MAD header and the SMP) are
//! `zerocopy` structs of big-endian types, their sizes pinned with
//! `static_assertions`.
//!
//! # Map
//!
//! * [`types`] — LID, GUID, GID, P_Key, M_Key, port number, hop count.
//! * [`mad`] — the 24-byte common MAD header, methods and status.
//! * [`smp`] — the 256-byte SMP in both routing forms.
//! * [`dr_path`] — a directed-route path of at most 63 hops.
//! * [`attr`] — every SMP attribute, its attribute modifier and [`attr::AnyAttribute`].
//! * [`notice`] — the Notice attribute and the data of every trap an SM handles.
//! * [`perf`] — Performance Management (class 0x04): PortCounters,
//!   PortCountersExtended, PortRcvErrorDetails and PortXmitDiscardDetails,
//!   as a PMA answers them.
//! * [`sa`] — Subnet Administration MADs: the RMPP and SA headers and every
//!   record an SA serves, with the components of its ComponentMask.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[macro_use]
pub mod field;
pub mod attr;
pub mod dr_path;
pub mod error;
pub mod mad;
pub mod notice;
pub mod perf;
pub mod sa;
pub mod smp;
pub mod types;

pub use attr::{AnyAttribute, AttributeId};
pub use dr_path::DrPath;
pub use error::Error;
pub use mad::{MadHeader, Method, Status};
pub use smp::Smp;
pub use types::{Gid, Guid, HopCount, Lid, MKey, PKey, PortNum};

/// Size of every MAD on the wire (IBA 13.4.2: 24-byte header + 232 bytes).
pub const MAD_SIZE: usize = 256;
/// Size of the SMP attribute data area.
pub const SMP_DATA_SIZE: usize = 64;
