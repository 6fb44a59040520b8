//! libibmad (rdma-core) loaded at run time, used as an independent oracle for
//! mad-core's layouts and as the baseline in benchmarks.
//!
//! The numeric values of libibmad's `enum MAD_FIELDS` are taken from the
//! installed header `infiniband/mad.h`, so the oracle follows whatever
//! libibmad version is installed.

use std::collections::HashMap;
use std::ffi::c_void;

type GetField = unsafe extern "C" fn(*mut c_void, i32, i32) -> u32;
type SetField = unsafe extern "C" fn(*mut c_void, i32, i32, u32);
type GetField64 = unsafe extern "C" fn(*mut c_void, i32, i32) -> u64;
type SetField64 = unsafe extern "C" fn(*mut c_void, i32, i32, u64);
type Array = unsafe extern "C" fn(*mut c_void, i32, i32, *mut c_void);

/// Where libibmad's header is looked for.
pub const HEADER_PATHS: &[&str] = &[
    "/usr/include/infiniband/mad.h",
    "/usr/local/include/infiniband/mad.h",
];

/// A loaded libibmad with the field accessors and the field-name table.
pub struct LibIbmad {
    _lib: libloading::Library,
    get: GetField,
    set: SetField,
    get64: GetField64,
    set64: SetField64,
    get_array: Array,
    set_array: Array,
    fields: HashMap<String, i32>,
}

impl LibIbmad {
    /// Loads `libibmad.so.5` and parses `enum MAD_FIELDS` from its header.
    /// Returns a message saying what is missing when either is absent.
    pub fn load() -> Result<Self, String> {
        // SAFETY: loading a well-known system library whose initialisers have
        // no preconditions.
        let lib = unsafe { libloading::Library::new("libibmad.so.5") }
            .map_err(|e| format!("libibmad.so.5 not loadable ({e}); install libibmad-dev"))?;
        let header = HEADER_PATHS
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .ok_or("infiniband/mad.h not found; install libibmad-dev")?;
        let fields = parse_mad_fields(&header)?;
        // SAFETY: the symbols are libibmad's exported field accessors, whose C
        // signatures the function-pointer types above reproduce.
        unsafe {
            let get = *lib
                .get::<GetField>(b"mad_get_field\0")
                .map_err(|e| e.to_string())?;
            let set = *lib
                .get::<SetField>(b"mad_set_field\0")
                .map_err(|e| e.to_string())?;
            let get64 = *lib
                .get::<GetField64>(b"mad_get_field64\0")
                .map_err(|e| e.to_string())?;
            let set64 = *lib
                .get::<SetField64>(b"mad_set_field64\0")
                .map_err(|e| e.to_string())?;
            let get_array = *lib
                .get::<Array>(b"mad_get_array\0")
                .map_err(|e| e.to_string())?;
            let set_array = *lib
                .get::<Array>(b"mad_set_array\0")
                .map_err(|e| e.to_string())?;
            Ok(LibIbmad {
                _lib: lib,
                get,
                set,
                get64,
                set64,
                get_array,
                set_array,
                fields,
            })
        }
    }

    /// The enum value of a field name such as `IB_PORT_LID_F`.
    pub fn field(&self, name: &str) -> Option<i32> {
        self.fields.get(name).copied()
    }

    /// `mad_get_field` (fields of at most 32 bits).
    pub fn get(&self, buf: &[u8; 256], field: i32) -> u32 {
        let mut b = *buf;
        // SAFETY: libibmad reads within the 256-byte MAD for every SMP field.
        unsafe { (self.get)(b.as_mut_ptr().cast(), 0, field) }
    }
    /// `mad_get_field64`.
    pub fn get64(&self, buf: &[u8; 256], field: i32) -> u64 {
        let mut b = *buf;
        // SAFETY: as in `get`.
        unsafe { (self.get64)(b.as_mut_ptr().cast(), 0, field) }
    }
    /// `mad_set_field`.
    pub fn set(&self, buf: &mut [u8; 256], field: i32, v: u32) {
        // SAFETY: as in `get`; the buffer is writable.
        unsafe { (self.set)(buf.as_mut_ptr().cast(), 0, field, v) }
    }
    /// `mad_set_field64`.
    pub fn set64(&self, buf: &mut [u8; 256], field: i32, v: u64) {
        // SAFETY: as in `set`.
        unsafe { (self.set64)(buf.as_mut_ptr().cast(), 0, field, v) }
    }
    /// `mad_get_array` into `out` (at least the field's length).
    pub fn get_array(&self, buf: &[u8; 256], field: i32, out: &mut [u8; 256]) {
        let mut b = *buf;
        // SAFETY: array fields of SMPs are at most 64 bytes; `out` holds 256.
        unsafe { (self.get_array)(b.as_mut_ptr().cast(), 0, field, out.as_mut_ptr().cast()) }
    }
    /// `mad_set_array` from `src` (at least the field's length).
    pub fn set_array(&self, buf: &mut [u8; 256], field: i32, src: &[u8; 256]) {
        let mut s = *src;
        // SAFETY: as in `get_array`.
        unsafe { (self.set_array)(buf.as_mut_ptr().cast(), 0, field, s.as_mut_ptr().cast()) }
    }

    /// Raw pointers for benchmarks that must call libibmad without copies.
    pub fn raw_get(&self) -> GetFieldFn {
        self.get
    }
    /// Raw `mad_set_field` for benchmarks.
    pub fn raw_set(&self) -> SetFieldFn {
        self.set
    }
    /// Raw `mad_get_field64` for benchmarks.
    pub fn raw_get64(&self) -> GetField64Fn {
        self.get64
    }
    /// Raw `mad_set_field64` for benchmarks.
    pub fn raw_set64(&self) -> SetField64Fn {
        self.set64
    }
}

/// `mad_get_field`'s type.
pub type GetFieldFn = GetField;
/// `mad_set_field`'s type.
pub type SetFieldFn = SetField;
/// `mad_get_field64`'s type.
pub type GetField64Fn = GetField64;
/// `mad_set_field64`'s type.
pub type SetField64Fn = SetField64;

/// Parses `enum MAD_FIELDS { … }` from mad.h into name → value.
pub fn parse_mad_fields(header: &str) -> Result<HashMap<String, i32>, String> {
    let start = header
        .find("enum MAD_FIELDS")
        .ok_or("enum MAD_FIELDS not in header")?;
    let body = &header[start..];
    let open = body.find('{').ok_or("enum MAD_FIELDS has no body")?;
    let close = body.find("};").ok_or("enum MAD_FIELDS not closed")?;
    let mut text = String::new();
    // Drop comments.
    let mut rest = &body[open + 1..close];
    while let Some(i) = rest.find("/*") {
        text.push_str(&rest[..i]);
        rest = rest[i..]
            .find("*/")
            .map(|j| &rest[i + j + 2..])
            .unwrap_or("");
    }
    text.push_str(rest);
    let mut map = HashMap::new();
    let mut next = 0i32;
    for entry in text.split(',') {
        let e: String = entry
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" ");
        let e = e.trim();
        if e.is_empty() {
            continue;
        }
        let (name, value) = match e.split_once('=') {
            Some((n, v)) => {
                let v = v.trim();
                let val = map
                    .get(v)
                    .copied()
                    .or_else(|| v.parse::<i32>().ok())
                    .ok_or_else(|| format!("cannot evaluate {v} in enum MAD_FIELDS"))?;
                (n.trim().to_string(), val)
            }
            None => (e.to_string(), next),
        };
        next = value + 1;
        map.insert(name, value);
    }
    Ok(map)
}
