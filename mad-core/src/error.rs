//! The error type of `mad-core`: every failure says what was being decoded,
//! which field, what was required and what was found.

use core::fmt;

/// Everything that can go wrong decoding or encoding a MAD or an attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the structure being read or written.
    Truncated {
        /// What was being decoded (`"MAD header"`, `"SMP"`, `"PortInfo"`).
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// A field holds a value the specification does not allow.
    InvalidField {
        /// Structure the field belongs to.
        what: &'static str,
        /// Field name (snake_case spec name).
        field: &'static str,
        /// The offending value.
        value: u64,
        /// What would have been valid.
        expected: &'static str,
    },
    /// A value does not fit in the width of its field on encode.
    FieldOverflow {
        /// Structure the field belongs to.
        what: &'static str,
        /// Field name (snake_case spec name).
        field: &'static str,
        /// The value that was too wide.
        value: u64,
        /// Width of the field in bits.
        width: u16,
    },
    /// The attribute modifier is not valid for the attribute.
    InvalidAttributeModifier {
        /// Attribute name.
        attribute: &'static str,
        /// The modifier received.
        modifier: u32,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A directed-route path would be longer than 63 hops.
    PathTooLong {
        /// Hops requested.
        hops: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { what, needed, got } => {
                write!(f, "{what}: truncated, need {needed} bytes, got {got}")
            }
            Error::InvalidField {
                what,
                field,
                value,
                expected,
            } => {
                write!(
                    f,
                    "{what}.{field}: invalid value {value:#x}, expected {expected}"
                )
            }
            Error::FieldOverflow {
                what,
                field,
                value,
                width,
            } => {
                write!(
                    f,
                    "{what}.{field}: value {value:#x} does not fit in {width} bits"
                )
            }
            Error::InvalidAttributeModifier {
                attribute,
                modifier,
                reason,
            } => {
                write!(
                    f,
                    "{attribute}: invalid attribute modifier {modifier:#010x}: {reason}"
                )
            }
            Error::PathTooLong { hops } => {
                write!(
                    f,
                    "directed-route path of {hops} hops exceeds the maximum of 63"
                )
            }
        }
    }
}

impl core::error::Error for Error {}

/// Checks that `buf` holds at least `needed` bytes.
#[inline]
pub(crate) fn need(what: &'static str, buf: &[u8], needed: usize) -> Result<(), Error> {
    if buf.len() < needed {
        Err(Error::Truncated {
            what,
            needed,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}
