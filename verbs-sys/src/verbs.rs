//! The verbs: the device list, opening a device, and port queries. (The
//! protection domains, queues and memory regions of the safe layer are not
//! built yet.)

use crate::ffi::verbs::{ibv_context, ibv_port_attr};
use crate::{verbs_lib, Error};
use std::ffi::CStr;
use std::os::raw::c_int;

/// An RDMA device found by libibverbs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Its name (mlx5_0, …).
    pub name: String,
    /// Its node GUID.
    pub guid: u64,
}

/// The devices libibverbs finds (none is not an error).
pub fn devices() -> Result<Vec<DeviceInfo>, Error> {
    let lib = verbs_lib()?;
    let mut n: c_int = 0;
    // SAFETY: `n` is writable; the list is freed below.
    let list = unsafe { lib.ibv_get_device_list(&mut n) };
    if list.is_null() {
        // No RDMA subsystem at all (no /sys/class/infiniband) is ENOSYS:
        // zero devices, not an error.
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if errno == 38 || errno == 19 || errno == 2 {
            return Ok(Vec::new());
        }
        return Err(Error::Call {
            call: "ibv_get_device_list",
            code: -errno,
        });
    }
    let mut out = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: the list has `n` valid entries until it is freed.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: `dev` is a live device of the list.
        let name = unsafe { CStr::from_ptr(lib.ibv_get_device_name(dev)) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: as above.
        let guid = u64::from_be(unsafe { lib.ibv_get_device_guid(dev) });
        out.push(DeviceInfo { name, guid });
    }
    // SAFETY: `list` came from ibv_get_device_list and is freed once.
    unsafe { lib.ibv_free_device_list(list) };
    Ok(out)
}

/// An open device context; closed on drop.
pub struct Context {
    ctx: *mut ibv_context,
    name: String,
}

/// What a port reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// PortState (1 Down … 4 Active).
    pub state: u32,
    /// Its LID.
    pub lid: u16,
    /// The SM's LID.
    pub sm_lid: u16,
    /// The active MTU code.
    pub active_mtu: u32,
}

impl Context {
    /// Opens the device called `name`.
    pub fn open(name: &str) -> Result<Context, Error> {
        let lib = verbs_lib()?;
        let mut n: c_int = 0;
        // SAFETY: as in `devices`.
        let list = unsafe { lib.ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(Error::NoDevice(name.to_string()));
        }
        let mut ctx = std::ptr::null_mut();
        for i in 0..n.max(0) as usize {
            // SAFETY: the list has `n` entries.
            let dev = unsafe { *list.add(i) };
            // SAFETY: `dev` is live.
            let dn = unsafe { CStr::from_ptr(lib.ibv_get_device_name(dev)) };
            if dn.to_bytes() == name.as_bytes() {
                // SAFETY: `dev` is live; the context outlives the list.
                ctx = unsafe { lib.ibv_open_device(dev) };
                break;
            }
        }
        // SAFETY: freed once.
        unsafe { lib.ibv_free_device_list(list) };
        if ctx.is_null() {
            return Err(Error::NoDevice(name.to_string()));
        }
        Ok(Context {
            ctx,
            name: name.to_string(),
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Queries port `port`.
    pub fn query_port(&self, port: u8) -> Result<PortAttr, Error> {
        let lib = verbs_lib()?;
        let mut a = ibv_port_attr::default();
        // SAFETY: `ctx` is open; `a` is zeroed and large enough for the
        // compat structure the exported symbol fills (a prefix of it).
        let r = unsafe { lib.ibv_query_port(self.ctx, port, &mut a as *mut _ as *mut _) };
        if r != 0 {
            return Err(Error::Call {
                call: "ibv_query_port",
                code: r,
            });
        }
        Ok(PortAttr {
            state: a.state,
            lid: a.lid,
            sm_lid: a.sm_lid,
            active_mtu: a.active_mtu,
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if let Ok(lib) = verbs_lib() {
            // SAFETY: opened by ibv_open_device, closed once.
            unsafe { lib.ibv_close_device(self.ctx) };
        }
    }
}
