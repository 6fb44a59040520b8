//! The layout machinery: bit-field access, the [`Field`] trait every field
//! type implements, the [`Value`] a field shows to a dump, and the macros that
//! turn one declaration per attribute into decode, encode, `Debug` and
//! [`Fields::visit`].
//!
//! Offsets are bit offsets from the most significant bit of byte 0, as the
//! InfiniBand specification counts them; all fields are big-endian.

use crate::types::{Gid, Guid, Lid, MKey, PKey};
use core::fmt;

/// Where one field of a declared layout lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDesc {
    /// snake_case spec name; also the key in JSON dumps.
    pub name: &'static str,
    /// Bit offset from the most significant bit of byte 0.
    pub offset: usize,
    /// Width in bits.
    pub width: usize,
}

/// How a field presents itself to a dump (text or JSON).
#[derive(Clone, Copy)]
pub enum Value<'a> {
    /// A number; `hex` asks text dumps to print it in hex (JSON prints a number).
    Num {
        /// The value.
        v: u64,
        /// Prefer hexadecimal in text output.
        hex: bool,
    },
    /// A one-bit flag.
    Bool(bool),
    /// A 64-bit identifier (GUID, M_Key, GID prefix): a `0x…` string in JSON.
    Id64(u64),
    /// A 128-bit GID: a `0x…` string in JSON.
    Gid(Gid),
    /// An enumerated value and its spec name when it has one.
    Enum {
        /// Raw value.
        raw: u64,
        /// Name of the value, `None` for reserved values.
        name: Option<&'static str>,
    },
    /// A flag word and the name of each bit.
    Flags {
        /// Raw word.
        raw: u64,
        /// Name of bit `n` (value `1 << n`), if it has one.
        name_of: fn(u32) -> Option<&'static str>,
    },
    /// Text (NodeDescription): UTF-8 bytes, NUL padding trimmed by the printer.
    Text(&'a [u8]),
    /// Opaque bytes (payloads whose layout no public source gives).
    Bytes(&'a [u8]),
    /// A table of entries.
    List(&'a dyn List),
    /// A nested record.
    Record(&'a dyn Fields),
}

/// A table of field values (forwarding table entries, GUIDs, P_Keys …).
pub trait List {
    /// Number of entries.
    fn len(&self) -> usize;
    /// True when the table has no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Entry `i`; `None` past the end.
    fn item(&self, i: usize) -> Option<Value<'_>>;
}

/// Something with named fields that a dump can walk.
pub trait Fields {
    /// Calls `f` with each field's name and value, in wire order.
    fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>));
}

/// A field type: how it is read from and written to its declared bits, and how
/// it is shown.
pub trait Field: Copy {
    /// Largest width in bits this type can occupy.
    const MAX_BITS: usize;
    /// Reads the field; bits outside `buf` read as zero (never panics).
    fn read(buf: &[u8], off: usize, width: usize) -> Self;
    /// Writes the field; `Err(value)` if the value does not fit in `width` bits.
    fn write(&self, buf: &mut [u8], off: usize, width: usize) -> Result<(), u64>;
    /// The value for dumps.
    fn value(&self) -> Value<'_>;
    /// Reads `M` consecutive elements of `ew` bits each (tables).
    #[inline(always)]
    fn read_array<const M: usize>(buf: &[u8], off: usize, ew: usize) -> [Self; M] {
        core::array::from_fn(|i| Self::read(buf, off + i * ew, ew))
    }
    /// Writes `M` consecutive elements of `ew` bits each (tables).
    #[inline(always)]
    fn write_array(items: &[Self], buf: &mut [u8], off: usize, ew: usize) -> Result<(), u64> {
        for (i, e) in items.iter().enumerate() {
            e.write(buf, off + i * ew, ew)?;
        }
        Ok(())
    }
}

/// All-ones mask of `width` bits.
#[inline(always)]
pub const fn mask(width: usize) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Reads `width` (1..=64) bits at bit offset `off`; the field must not span
/// more than 8 bytes. Bytes past the end of `buf` read as zero.
///
/// Offsets and widths are constants at every call site, so after inlining
/// the byte-aligned cases fold to a single big-endian load.
#[inline(always)]
pub fn get_bits(buf: &[u8], off: usize, width: usize) -> u64 {
    let first = off / 8;
    if off % 8 == 0 {
        match width {
            8 => return u64::from(buf.get(first).copied().unwrap_or(0)),
            16 => {
                if let Some(s) = buf.get(first..first + 2) {
                    return u64::from(u16::from_be_bytes([s[0], s[1]]));
                }
            }
            32 => {
                if let Some(s) = buf.get(first..first + 4) {
                    return u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
                }
            }
            64 => {
                if let Some(s) = buf.get(first..first + 8) {
                    return u64::from_be_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
                }
            }
            _ => {}
        }
    }
    let end = (off + width).div_ceil(8);
    let mut acc: u64 = 0;
    let mut i = first;
    while i < end {
        acc = (acc << 8) | u64::from(buf.get(i).copied().unwrap_or(0));
        i += 1;
    }
    (acc >> (end * 8 - (off + width))) & mask(width)
}

/// Writes the low `width` bits of `value` at bit offset `off`, leaving the
/// other bits of the touched bytes alone. Bytes past the end are skipped.
#[inline(always)]
pub fn set_bits(buf: &mut [u8], off: usize, width: usize, value: u64) {
    let first = off / 8;
    let end = (off + width).div_ceil(8);
    let shift = end * 8 - (off + width);
    let m = mask(width) << shift;
    let v = (value << shift) & m;
    let mut i = first;
    while i < end {
        let s = (end - 1 - i) * 8;
        let bm = (m >> s) as u8;
        let bv = (v >> s) as u8;
        if let Some(b) = buf.get_mut(i) {
            *b = (*b & !bm) | bv;
        }
        i += 1;
    }
}

#[inline(always)]
fn put(buf: &mut [u8], off: usize, width: usize, v: u64) -> Result<(), u64> {
    if v > mask(width) {
        return Err(v);
    }
    set_bits(buf, off, width, v);
    Ok(())
}

macro_rules! uint_field {
    ($($t:ty, $hex:expr;)*) => {$(
        impl Field for $t {
            const MAX_BITS: usize = <$t>::BITS as usize;
            #[inline(always)]
            fn read(buf: &[u8], off: usize, width: usize) -> Self {
                get_bits(buf, off, width) as $t
            }
            #[inline(always)]
            fn write(&self, buf: &mut [u8], off: usize, width: usize) -> Result<(), u64> {
                put(buf, off, width, u64::from(*self))
            }
            fn value(&self) -> Value<'_> {
                Value::Num { v: u64::from(*self), hex: $hex }
            }
        }
    )*};
}
uint_field! { u16, false; u32, false; u64, false; }

impl Field for u8 {
    const MAX_BITS: usize = 8;
    #[inline(always)]
    fn read(buf: &[u8], off: usize, width: usize) -> Self {
        get_bits(buf, off, width) as u8
    }
    #[inline(always)]
    fn write(&self, buf: &mut [u8], off: usize, width: usize) -> Result<(), u64> {
        put(buf, off, width, u64::from(*self))
    }
    fn value(&self) -> Value<'_> {
        Value::Num {
            v: u64::from(*self),
            hex: false,
        }
    }
    /// Byte tables (forwarding tables) are copied whole.
    #[inline(always)]
    fn read_array<const M: usize>(buf: &[u8], off: usize, ew: usize) -> [Self; M] {
        if ew == 8 && off % 8 == 0 {
            let mut a = [0u8; M];
            if let Some(src) = buf.get(off / 8..off / 8 + M) {
                a.copy_from_slice(src);
            }
            a
        } else {
            core::array::from_fn(|i| Self::read(buf, off + i * ew, ew))
        }
    }
    #[inline(always)]
    fn write_array(items: &[Self], buf: &mut [u8], off: usize, ew: usize) -> Result<(), u64> {
        if ew == 8 && off % 8 == 0 {
            if let Some(dst) = buf.get_mut(off / 8..off / 8 + items.len()) {
                dst.copy_from_slice(items);
            }
            return Ok(());
        }
        for (i, e) in items.iter().enumerate() {
            e.write(buf, off + i * ew, ew)?;
        }
        Ok(())
    }
}

impl Field for bool {
    const MAX_BITS: usize = 1;
    #[inline(always)]
    fn read(buf: &[u8], off: usize, width: usize) -> Self {
        get_bits(buf, off, width) != 0
    }
    #[inline(always)]
    fn write(&self, buf: &mut [u8], off: usize, width: usize) -> Result<(), u64> {
        put(buf, off, width, u64::from(*self))
    }
    fn value(&self) -> Value<'_> {
        Value::Bool(*self)
    }
}

macro_rules! newtype_field {
    ($($t:ident($inner:ty) => |$s:ident| $val:expr;)*) => {$(
        impl Field for $t {
            const MAX_BITS: usize = <$inner>::BITS as usize;
            #[inline(always)]
            fn read(buf: &[u8], off: usize, width: usize) -> Self {
                $t(get_bits(buf, off, width) as $inner)
            }
            #[inline(always)]
            fn write(&self, buf: &mut [u8], off: usize, width: usize) -> Result<(), u64> {
                put(buf, off, width, u64::from(self.0))
            }
            fn value(&self) -> Value<'_> {
                let $s = self;
                $val
            }
        }
    )*};
}
newtype_field! {
    Lid(u16) => |s| Value::Num { v: u64::from(s.0), hex: false };
    PKey(u16) => |s| Value::Num { v: u64::from(s.0), hex: true };
    Guid(u64) => |s| Value::Id64(s.0);
    MKey(u64) => |s| Value::Id64(s.0);
}

/// A 64-bit GID subnet prefix (shown like a GUID).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct GidPrefix(pub u64);
newtype_field! { GidPrefix(u64) => |s| Value::Id64(s.0); }

impl Field for Gid {
    const MAX_BITS: usize = 128;
    #[inline(always)]
    fn read(buf: &[u8], off: usize, _width: usize) -> Self {
        let mut g = [0u8; 16];
        for (i, b) in g.iter_mut().enumerate() {
            *b = buf.get(off / 8 + i).copied().unwrap_or(0);
        }
        Gid(g)
    }
    #[inline(always)]
    fn write(&self, buf: &mut [u8], off: usize, _width: usize) -> Result<(), u64> {
        for (i, b) in self.0.iter().enumerate() {
            if let Some(d) = buf.get_mut(off / 8 + i) {
                *d = *b;
            }
        }
        Ok(())
    }
    fn value(&self) -> Value<'_> {
        Value::Gid(*self)
    }
}

/// Fixed-size text, such as NodeDescription (UTF-8, NUL padded, not
/// necessarily NUL terminated).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Text<const N: usize>(pub [u8; N]);

/// Fixed-size opaque bytes: reserved areas and payloads without a public layout.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bytes<const N: usize>(pub [u8; N]);

macro_rules! byte_array_field {
    ($($t:ident => $variant:ident;)*) => {$(
        impl<const N: usize> Default for $t<N> {
            fn default() -> Self {
                $t([0; N])
            }
        }
        impl<const N: usize> fmt::Debug for $t<N> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.value(), f)
            }
        }
        impl<const N: usize> Field for $t<N> {
            const MAX_BITS: usize = N * 8;
            #[inline(always)]
            fn read(buf: &[u8], off: usize, _width: usize) -> Self {
                let mut a = [0u8; N];
                if let Some(src) = buf.get(off / 8..off / 8 + N) {
                    a.copy_from_slice(src);
                }
                $t(a)
            }
            #[inline(always)]
            fn write(&self, buf: &mut [u8], off: usize, _width: usize) -> Result<(), u64> {
                if let Some(dst) = buf.get_mut(off / 8..off / 8 + N) {
                    dst.copy_from_slice(&self.0);
                }
                Ok(())
            }
            fn value(&self) -> Value<'_> {
                Value::$variant(&self.0)
            }
        }
    )*};
}
byte_array_field! { Text => Text; Bytes => Bytes; }

impl<const N: usize> Text<N> {
    /// The text up to the first NUL, if it is valid UTF-8.
    pub fn as_str(&self) -> Result<&str, core::str::Utf8Error> {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(N);
        core::str::from_utf8(&self.0[..end])
    }
    /// Text from a string, truncated to `N` bytes and NUL padded.
    pub fn from_str_lossy(s: &str) -> Self {
        let mut a = [0u8; N];
        let n = s.len().min(N);
        a[..n].copy_from_slice(&s.as_bytes()[..n]);
        Text(a)
    }
}

impl<T: Field, const M: usize> Field for [T; M] {
    const MAX_BITS: usize = T::MAX_BITS * M;
    #[inline(always)]
    fn read(buf: &[u8], off: usize, width: usize) -> Self {
        T::read_array::<M>(buf, off, width / M)
    }
    #[inline(always)]
    fn write(&self, buf: &mut [u8], off: usize, width: usize) -> Result<(), u64> {
        T::write_array(self, buf, off, width / M)
    }
    fn value(&self) -> Value<'_> {
        Value::List(self)
    }
}

impl<T: Field, const M: usize> List for [T; M] {
    fn len(&self) -> usize {
        M
    }
    fn item(&self, i: usize) -> Option<Value<'_>> {
        self.get(i).map(Field::value)
    }
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Num { v, hex: false } => write!(f, "{v}"),
            Value::Num { v, hex: true } => write!(f, "{v:#x}"),
            Value::Bool(b) => write!(f, "{}", u8::from(b)),
            Value::Id64(v) => write!(f, "{v:#018x}"),
            Value::Gid(g) => write!(f, "{g}"),
            Value::Enum { raw, name: Some(n) } => write!(f, "{raw} ({n})"),
            Value::Enum { raw, name: None } => write!(f, "{raw} (reserved)"),
            Value::Flags { raw, name_of } => {
                write!(f, "{raw:#x}")?;
                let mut first = true;
                for bit in 0..64 {
                    if raw & (1 << bit) != 0 {
                        f.write_str(if first { " (" } else { "," })?;
                        first = false;
                        match name_of(bit) {
                            Some(n) => f.write_str(n)?,
                            None => write!(f, "bit{bit}")?,
                        }
                    }
                }
                if !first {
                    f.write_str(")")?;
                }
                Ok(())
            }
            Value::Text(t) => {
                let end = t.iter().position(|&b| b == 0).unwrap_or(t.len());
                match core::str::from_utf8(&t[..end]) {
                    Ok(s) => write!(f, "{s:?}"),
                    Err(_) => write_hex(f, t),
                }
            }
            Value::Bytes(b) => write_hex(f, b),
            Value::List(l) => {
                let mut d = f.debug_list();
                for i in 0..l.len() {
                    if let Some(v) = l.item(i) {
                        d.entry(&v);
                    }
                }
                d.finish()
            }
            Value::Record(r) => debug_fields(r, "", f),
        }
    }
}

fn write_hex(f: &mut fmt::Formatter<'_>, b: &[u8]) -> fmt::Result {
    f.write_str("0x")?;
    for x in b {
        write!(f, "{x:02x}")?;
    }
    Ok(())
}

/// Formats any [`Fields`] as a `Debug` struct.
pub fn debug_fields(r: &dyn Fields, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut d = f.debug_struct(name);
    r.visit(&mut |n, v| {
        d.field(n, &v);
    });
    d.finish()
}

/// Declares an enumeration carried in a bit field, with an `Unknown(raw)`
/// variant so reserved values survive a decode/encode round trip.
#[macro_export]
macro_rules! enum_with_unknown {
    (
        $(#[$m:meta])*
        pub enum $name:ident($repr:ty) {
            $( $(#[$vm:meta])* $var:ident = $val:expr ),+ $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
        pub enum $name {
            $( $(#[$vm])* $var, )+
            /// A value the specification reserves or this crate does not name.
            Unknown($repr),
        }
        impl From<$repr> for $name {
            fn from(v: $repr) -> Self {
                match v {
                    $( $val => $name::$var, )+
                    other => $name::Unknown(other),
                }
            }
        }
        impl From<$name> for $repr {
            fn from(v: $name) -> $repr {
                match v {
                    $( $name::$var => $val, )+
                    $name::Unknown(other) => other,
                }
            }
        }
        impl $name {
            /// The spec name of the value, `None` for reserved values.
            pub fn name(self) -> Option<&'static str> {
                match <$repr>::from(self) {
                    $( $val => Some(stringify!($var)), )+
                    _ => None,
                }
            }
            /// True when the value is one the specification defines.
            pub fn is_known(self) -> bool {
                self.name().is_some()
            }
        }
        impl Default for $name {
            fn default() -> Self {
                <$name>::from(0 as $repr)
            }
        }
        impl $crate::field::Field for $name {
            const MAX_BITS: usize = <$repr>::BITS as usize;
            #[inline(always)]
            fn read(buf: &[u8], off: usize, width: usize) -> Self {
                <$name>::from($crate::field::get_bits(buf, off, width) as $repr)
            }
            #[inline(always)]
            fn write(&self, buf: &mut [u8], off: usize, width: usize) -> Result<(), u64> {
                let raw = u64::from(<$repr>::from(*self));
                if raw > $crate::field::mask(width) {
                    return Err(raw);
                }
                $crate::field::set_bits(buf, off, width, raw);
                Ok(())
            }
            fn value(&self) -> $crate::field::Value<'_> {
                $crate::field::Value::Enum { raw: u64::from(<$repr>::from(*self)), name: self.name() }
            }
        }
    };
}

/// Makes a `bitflags` type usable as a field: unknown bits are retained.
#[macro_export]
macro_rules! flags_field {
    ($t:ty, $repr:ty) => {
        impl $crate::field::Field for $t {
            const MAX_BITS: usize = <$repr>::BITS as usize;
            #[inline(always)]
            fn read(buf: &[u8], off: usize, width: usize) -> Self {
                <$t>::from_bits_retain($crate::field::get_bits(buf, off, width) as $repr)
            }
            #[inline(always)]
            fn write(&self, buf: &mut [u8], off: usize, width: usize) -> Result<(), u64> {
                let raw = u64::from(self.bits());
                if raw > $crate::field::mask(width) {
                    return Err(raw);
                }
                $crate::field::set_bits(buf, off, width, raw);
                Ok(())
            }
            fn value(&self) -> $crate::field::Value<'_> {
                fn name_of(bit: u32) -> Option<&'static str> {
                    <$t as bitflags::Flags>::FLAGS
                        .iter()
                        .find(|fl| u64::from(fl.value().bits()) == 1u64 << bit)
                        .map(|fl| fl.name())
                }
                $crate::field::Value::Flags {
                    raw: u64::from(self.bits()),
                    name_of,
                }
            }
        }
    };
}

/// Declares a bit-exact layout once: the struct, its field table, `decode`,
/// `encode`, `Debug` and [`Fields`] all come from the same lines
/// `name: Type = bit_offset, width;`. Bits not covered by a field are reserved
/// and encode as zero.
#[macro_export]
macro_rules! bitstruct {
    (
        $(#[$m:meta])*
        pub struct $name:ident ($what:literal, $size:expr) {
            $( $(#[$fm:meta])* $field:ident : $ty:ty = $off:expr, $width:expr; )*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fm])* pub $field: $ty, )*
        }

        impl Default for $name {
            /// All fields zero.
            fn default() -> Self {
                let zero = [0u8; $size];
                Self { $( $field: <$ty as $crate::field::Field>::read(&zero, $off, $width), )* }
            }
        }

        #[allow(clippy::int_plus_one)]
        const _: () = {
            $(
                assert!($off + $width <= $size * 8, concat!(stringify!($name), ".", stringify!($field), " lies outside the structure"));
                assert!($width <= <$ty as $crate::field::Field>::MAX_BITS, concat!(stringify!($name), ".", stringify!($field), " is wider than its type"));
            )*
        };

        impl $name {
            /// Spec name of the structure.
            pub const NAME: &'static str = $what;
            /// Bytes the structure occupies on the wire.
            pub const SIZE: usize = $size;
            /// The declared position of every field, in wire order.
            pub const FIELDS: &'static [$crate::field::FieldDesc] = &[
                $( $crate::field::FieldDesc { name: stringify!($field), offset: $off, width: $width }, )*
            ];

            /// Decodes from the first `SIZE` bytes of `buf`.
            #[inline]
            pub fn decode(buf: &[u8]) -> Result<Self, $crate::error::Error> {
                let got = buf.len();
                let b: &[u8; $size] = buf
                    .get(..$size)
                    .and_then(|s| s.try_into().ok())
                    .ok_or($crate::error::Error::Truncated { what: $what, needed: $size, got })?;
                Ok(Self { $( $field: <$ty as $crate::field::Field>::read(b, $off, $width), )* })
            }

            /// Encodes into the first `SIZE` bytes of `buf`; reserved bits become zero.
            #[inline]
            pub fn encode(&self, buf: &mut [u8]) -> Result<(), $crate::error::Error> {
                let got = buf.len();
                let b: &mut [u8; $size] = buf
                    .get_mut(..$size)
                    .and_then(|s| s.try_into().ok())
                    .ok_or($crate::error::Error::Truncated { what: $what, needed: $size, got })?;
                *b = [0; $size];
                $(
                    <$ty as $crate::field::Field>::write(&self.$field, b, $off, $width).map_err(|value| {
                        $crate::error::Error::FieldOverflow { what: $what, field: stringify!($field), value, width: $width }
                    })?;
                )*
                Ok(())
            }

            /// Encodes into a fresh buffer of `SIZE` bytes.
            pub fn to_bytes(&self) -> Result<[u8; $size], $crate::error::Error> {
                let mut b = [0u8; $size];
                self.encode(&mut b)?;
                Ok(b)
            }
        }

        impl $crate::field::Fields for $name {
            fn visit(&self, f: &mut dyn FnMut(&'static str, $crate::field::Value<'_>)) {
                $( f(stringify!($field), <$ty as $crate::field::Field>::value(&self.$field)); )*
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                $crate::field::debug_fields(self, stringify!($name), f)
            }
        }
    };
}

/// Makes a byte-aligned [`bitstruct!`] usable as a field (table entries such
/// as VL arbitration or random forwarding entries).
#[macro_export]
macro_rules! record_field {
    ($t:ty) => {
        impl $crate::field::Field for $t {
            const MAX_BITS: usize = <$t>::SIZE * 8;
            #[inline(always)]
            fn read(buf: &[u8], off: usize, _width: usize) -> Self {
                let mut tmp = [0u8; <$t>::SIZE];
                if let Some(src) = buf.get(off / 8..off / 8 + <$t>::SIZE) {
                    tmp.copy_from_slice(src);
                }
                <$t>::decode(&tmp).unwrap_or_default()
            }
            #[inline(always)]
            fn write(&self, buf: &mut [u8], off: usize, _width: usize) -> Result<(), u64> {
                let mut tmp = [0u8; <$t>::SIZE];
                // Report the first field that overflowed by its raw value.
                if let Err(e) = self.encode(&mut tmp) {
                    return Err(match e {
                        $crate::error::Error::FieldOverflow { value, .. } => value,
                        _ => 0,
                    });
                }
                if let Some(dst) = buf.get_mut(off / 8..off / 8 + <$t>::SIZE) {
                    dst.copy_from_slice(&tmp);
                }
                Ok(())
            }
            fn value(&self) -> $crate::field::Value<'_> {
                $crate::field::Value::Record(self)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip_at_every_alignment() {
        for off in 0..40 {
            for width in 1..=24 {
                let mut b = [0xAAu8; 8];
                let v = 0x5A5A5A & mask(width);
                set_bits(&mut b, off, width, v);
                assert_eq!(get_bits(&b, off, width), v, "off {off} width {width}");
                // Neighbouring bits untouched.
                let mut orig = [0xAAu8; 8];
                set_bits(&mut orig, off, width, get_bits(&[0xAAu8; 8], off, width));
                assert_eq!(orig, [0xAA; 8]);
            }
        }
    }

    #[test]
    fn msb_first_numbering() {
        let b = [0b1000_0000u8, 0x01];
        assert_eq!(get_bits(&b, 0, 1), 1);
        assert_eq!(get_bits(&b, 15, 1), 1);
        assert_eq!(get_bits(&b, 0, 16), 0x8001);
        assert_eq!(get_bits(&b, 4, 4), 0);
    }

    #[test]
    fn reads_past_the_end_are_zero_not_panics() {
        assert_eq!(get_bits(&[0xFF], 4, 16), 0xF000);
        let mut b = [0u8; 1];
        set_bits(&mut b, 4, 16, 0xFFFF);
        assert_eq!(b, [0x0F]);
    }

    #[test]
    fn overflow_is_refused() {
        let mut b = [0u8; 2];
        assert_eq!(7u8.write(&mut b, 0, 3), Ok(()));
        assert_eq!(8u8.write(&mut b, 0, 3), Err(8));
    }
}
