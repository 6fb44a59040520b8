//! The verbs, safely: devices, contexts, protection domains, memory regions,
//! completion queues and channels, and address handles. Queue pairs are in
//! [`crate::qp`].
//!
//! Every object holds a reference-counted handle to its parent, so a Rust
//! user keeps them in one struct in any order and a parent is freed only
//! after its last child (a [`Pd`] after its QPs, MRs and AHs; a [`Context`]
//! after everything opened on it). No type carries a lifetime.

use crate::ffi::verbs::{
    ibv_ah, ibv_ah_attr, ibv_async_event, ibv_comp_channel, ibv_context, ibv_cq, ibv_device_attr,
    ibv_gid, ibv_mr, ibv_pd, ibv_port_attr, ibv_wc, IbVerbsLib,
};
use crate::{verbs_lib, Error};
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::Arc;

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

/// The last OS error as a negative errno, for calls that return NULL.
/// Puts file `fd` in non-blocking mode.
fn set_nonblocking(fd: i32) -> Result<(), Error> {
    // SAFETY: fcntl on a descriptor the caller owns and keeps open.
    let r = unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 {
            fl
        } else {
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK)
        }
    };
    if r < 0 {
        return Err(errno_call("fcntl"));
    }
    Ok(())
}

/// An asynchronous event of a device ([`Context::try_async_event`]), with
/// its `ibv_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// About a CQ (an overrun: `IBV_EVENT_CQ_ERR`).
    Cq {
        /// Which ([`Cq::id`]).
        id: CqId,
        /// `ibv_event_type`.
        kind: u32,
    },
    /// About a QP (fatal, request or access error, ...).
    Qp {
        /// Its number.
        qp_num: u32,
        /// `ibv_event_type`.
        kind: u32,
    },
    /// About a port (active, error, LID change, ...).
    Port {
        /// Its number.
        port: u8,
        /// `ibv_event_type`.
        kind: u32,
    },
    /// About the device, an SRQ or a WQ.
    Other {
        /// `ibv_event_type`.
        kind: u32,
    },
}

pub(crate) fn errno_call(call: &'static str) -> Error {
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    Error::Call { call, code: -e }
}

pub(crate) struct CtxInner {
    pub(crate) lib: &'static IbVerbsLib,
    pub(crate) ctx: *mut ibv_context,
    name: String,
}

// SAFETY: libibverbs contexts may be used from any thread; every call made
// through one is thread-safe (providers lock internally).
unsafe impl Send for CtxInner {}
// SAFETY: as above.
unsafe impl Sync for CtxInner {}

impl Drop for CtxInner {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device; every child holds an Arc to
        // this, so none is left when it is closed, once.
        unsafe { self.lib.ibv_close_device(self.ctx) };
    }
}

/// An open device; closed when it and everything opened on it are dropped.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<CtxInner>,
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
    /// The active MTU code (1: 256 … 5: 4096).
    pub active_mtu: u32,
    /// LMC.
    pub lmc: u8,
    /// Size of the P_Key table.
    pub pkey_tbl_len: u16,
    /// Size of the GID table.
    pub gid_tbl_len: i32,
    /// Link layer: 1 InfiniBand, 2 Ethernet (RoCE; packets need a GRH),
    /// 0 unspecified (InfiniBand).
    pub link_layer: u8,
}

impl PortAttr {
    /// Whether the port is RoCE: addresses are GIDs, LIDs are 0.
    pub fn is_ethernet(&self) -> bool {
        self.link_layer == crate::ffi::verbs::IBV_LINK_LAYER_ETHERNET as u8
    }
}

/// What a device reports of itself and its limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAttr {
    /// Firmware version.
    pub fw_ver: String,
    /// Node GUID.
    pub node_guid: u64,
    /// System image GUID.
    pub sys_image_guid: u64,
    /// Largest memory region.
    pub max_mr_size: u64,
    /// IEEE vendor ID.
    pub vendor_id: u32,
    /// Vendor part ID.
    pub vendor_part_id: u32,
    /// Most QPs.
    pub max_qp: i32,
    /// Most outstanding work requests on a queue.
    pub max_qp_wr: i32,
    /// Most scatter/gather entries a work request may carry.
    pub max_sge: i32,
    /// Most CQs.
    pub max_cq: i32,
    /// Most entries of a CQ.
    pub max_cqe: i32,
    /// Most MRs.
    pub max_mr: i32,
    /// Most PDs.
    pub max_pd: i32,
    /// Number of physical ports.
    pub phys_port_cnt: u8,
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
        let mut ctx = ptr::null_mut();
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
            inner: Arc::new(CtxInner {
                lib,
                ctx,
                name: name.to_string(),
            }),
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Queries port `port`.
    pub fn query_port(&self, port: u8) -> Result<PortAttr, Error> {
        let mut a = ibv_port_attr::default();
        // SAFETY: the context is open; `a` is zeroed and as large as the
        // compat structure the exported symbol fills (a prefix of it).
        let r = unsafe {
            self.inner
                .lib
                .ibv_query_port(self.inner.ctx, port, &mut a as *mut _ as *mut _)
        };
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
            lmc: a.lmc,
            pkey_tbl_len: a.pkey_tbl_len,
            gid_tbl_len: a.gid_tbl_len,
            link_layer: a.link_layer,
        })
    }

    /// Queries the device's attributes and limits.
    pub fn query_device(&self) -> Result<DeviceAttr, Error> {
        let mut a = ibv_device_attr::default();
        // SAFETY: the context is open; `a` is writable.
        let r = unsafe { self.inner.lib.ibv_query_device(self.inner.ctx, &mut a) };
        if r != 0 {
            return Err(Error::Call {
                call: "ibv_query_device",
                code: r,
            });
        }
        // SAFETY: fw_ver is NUL-terminated within its array.
        let fw_ver = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(DeviceAttr {
            fw_ver,
            node_guid: u64::from_be(a.node_guid),
            sys_image_guid: u64::from_be(a.sys_image_guid),
            max_mr_size: a.max_mr_size,
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            max_sge: a.max_sge,
            max_cq: a.max_cq,
            max_cqe: a.max_cqe,
            max_mr: a.max_mr,
            max_pd: a.max_pd,
            phys_port_cnt: a.phys_port_cnt,
        })
    }

    /// GID `index` of port `port`, in network order.
    pub fn query_gid(&self, port: u8, index: i32) -> Result<[u8; 16], Error> {
        let mut g = ibv_gid { raw: [0; 16] };
        // SAFETY: the context is open; `g` is writable.
        let r = unsafe {
            self.inner
                .lib
                .ibv_query_gid(self.inner.ctx, port, index, &mut g)
        };
        if r != 0 {
            return Err(Error::Call {
                call: "ibv_query_gid",
                code: r,
            });
        }
        // SAFETY: every bit pattern is a valid byte array.
        Ok(unsafe { g.raw })
    }

    /// The file on which the device's asynchronous events arrive.
    pub fn async_fd(&self) -> i32 {
        // SAFETY: the context is open; `async_fd` is set by ibv_open_device.
        unsafe { (*self.inner.ctx).async_fd }
    }

    /// Makes [`Context::try_async_event`] return at once when no event
    /// waits.
    pub fn set_async_nonblocking(&self) -> Result<(), Error> {
        set_nonblocking(self.async_fd())
    }

    /// The next asynchronous event, acknowledged, if one is waiting (after
    /// [`Context::set_async_nonblocking`]; else it blocks).
    pub fn try_async_event(&self) -> Result<Option<AsyncEvent>, Error> {
        let lib = self.inner.lib;
        let (Ok(get), Ok(ack)) = (
            lib.ibv_get_async_event.as_ref(),
            lib.ibv_ack_async_event.as_ref(),
        ) else {
            return Err(Error::SymbolMissing {
                library: crate::LIBIBVERBS,
                symbol: "ibv_get_async_event",
            });
        };
        let mut e = ibv_async_event::default();
        // SAFETY: the context is open; `e` is writable.
        if unsafe { get(self.inner.ctx, &mut e) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EAGAIN) {
                return Ok(None);
            }
            return Err(errno_call("ibv_get_async_event"));
        }
        use crate::ffi::verbs as f;
        let kind = e.event_type;
        let ev = match kind {
            // SAFETY (each arm): the event type says which member of the
            // union the provider filled.
            f::ibv_event_type_IBV_EVENT_CQ_ERR => AsyncEvent::Cq {
                id: CqId(unsafe { e.element.cq } as usize),
                kind,
            },
            f::ibv_event_type_IBV_EVENT_QP_FATAL
            | f::ibv_event_type_IBV_EVENT_QP_REQ_ERR
            | f::ibv_event_type_IBV_EVENT_QP_ACCESS_ERR
            | f::ibv_event_type_IBV_EVENT_COMM_EST
            | f::ibv_event_type_IBV_EVENT_SQ_DRAINED
            | f::ibv_event_type_IBV_EVENT_PATH_MIG
            | f::ibv_event_type_IBV_EVENT_PATH_MIG_ERR
            | f::ibv_event_type_IBV_EVENT_QP_LAST_WQE_REACHED => AsyncEvent::Qp {
                // SAFETY: a QP event names a live QP of this context.
                qp_num: unsafe { (*e.element.qp).qp_num },
                kind,
            },
            f::ibv_event_type_IBV_EVENT_PORT_ACTIVE
            | f::ibv_event_type_IBV_EVENT_PORT_ERR
            | f::ibv_event_type_IBV_EVENT_LID_CHANGE
            | f::ibv_event_type_IBV_EVENT_PKEY_CHANGE
            | f::ibv_event_type_IBV_EVENT_SM_CHANGE
            | f::ibv_event_type_IBV_EVENT_CLIENT_REREGISTER
            | f::ibv_event_type_IBV_EVENT_GID_CHANGE => AsyncEvent::Port {
                port: unsafe { e.element.port_num } as u8,
                kind,
            },
            _ => AsyncEvent::Other { kind },
        };
        // SAFETY: acknowledges the event just read, once.
        unsafe { ack(&mut e) };
        Ok(Some(ev))
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<Pd, Error> {
        // SAFETY: the context is open.
        let pd = unsafe { self.inner.lib.ibv_alloc_pd(self.inner.ctx) };
        if pd.is_null() {
            return Err(errno_call("ibv_alloc_pd"));
        }
        Ok(Pd {
            inner: Arc::new(PdInner {
                pd,
                ctx: self.inner.clone(),
            }),
        })
    }

    /// Creates a completion channel: a file descriptor on which CQ events
    /// arrive.
    pub fn create_comp_channel(&self) -> Result<CompChannel, Error> {
        // SAFETY: the context is open.
        let ch = unsafe { self.inner.lib.ibv_create_comp_channel(self.inner.ctx) };
        if ch.is_null() {
            return Err(errno_call("ibv_create_comp_channel"));
        }
        Ok(CompChannel {
            inner: Arc::new(ChanInner {
                ch,
                ctx: self.inner.clone(),
            }),
        })
    }

    /// Creates a completion queue of at least `entries` entries, reporting
    /// events on `channel` if one is given.
    pub fn create_cq(&self, entries: u32, channel: Option<&CompChannel>) -> Result<Cq, Error> {
        let entries = c_int::try_from(entries)
            .map_err(|_| Error::BadArgument(format!("{entries} CQ entries")))?;
        let ch = channel.map_or(ptr::null_mut(), |c| c.inner.ch);
        // SAFETY: the context is open; `ch` is null or a live channel of it,
        // kept alive by the CQ.
        let cq = unsafe {
            self.inner
                .lib
                .ibv_create_cq(self.inner.ctx, entries, ptr::null_mut(), ch, 0)
        };
        if cq.is_null() {
            return Err(errno_call("ibv_create_cq"));
        }
        Ok(Cq {
            inner: Arc::new(CqInner {
                cq,
                ctx: self.inner.clone(),
                _chan: channel.map(|c| c.inner.clone()),
            }),
        })
    }
}

pub(crate) struct PdInner {
    pub(crate) pd: *mut ibv_pd,
    pub(crate) ctx: Arc<CtxInner>,
}

// SAFETY: a PD is used only through thread-safe verbs.
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; every QP, MR and AH of it holds
        // an Arc to this, so none is left; freed once.
        unsafe { self.ctx.lib.ibv_dealloc_pd(self.pd) };
    }
}

/// A protection domain. QPs, MRs and AHs are created in it and keep it
/// alive.
#[derive(Clone)]
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

/// What a memory region allows (`ibv_access_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access(pub u32);

impl Access {
    /// Local reads only (the HCA may read the buffer to send it).
    pub const LOCAL_READ: Access = Access(0);
    /// The HCA may write the buffer (receives, RDMA read responses).
    pub const LOCAL_WRITE: Access =
        Access(crate::ffi::verbs::ibv_access_flags_IBV_ACCESS_LOCAL_WRITE);
    /// A remote peer may RDMA-write it (needs LOCAL_WRITE).
    pub const REMOTE_WRITE: Access =
        Access(crate::ffi::verbs::ibv_access_flags_IBV_ACCESS_REMOTE_WRITE);
    /// A remote peer may RDMA-read it.
    pub const REMOTE_READ: Access =
        Access(crate::ffi::verbs::ibv_access_flags_IBV_ACCESS_REMOTE_READ);
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }
}

impl Pd {
    /// Registers `buf` for DMA with `access`. The memory region owns the
    /// buffer, so the buffer cannot be freed or moved while it is
    /// registered; [`Mr::into_inner`] gives it back after deregistration.
    pub fn register(&self, buf: Box<[u8]>, access: Access) -> Result<Mr, Error> {
        if buf.is_empty() {
            return Err(Error::BadArgument(
                "an empty buffer cannot be registered".into(),
            ));
        }
        let remote = Access::REMOTE_WRITE.0;
        if access.0 & remote != 0 && access.0 & Access::LOCAL_WRITE.0 == 0 {
            return Err(Error::BadArgument(
                "remote write access needs local write access".into(),
            ));
        }
        let mut buf = buf;
        // SAFETY: the PD is live; the buffer is heap memory owned by the MR
        // from here on, so its address stays valid until deregistration.
        let mr = unsafe {
            self.inner.ctx.lib.ibv_reg_mr(
                self.inner.pd,
                buf.as_mut_ptr() as *mut c_void,
                buf.len(),
                access.0 as c_int,
            )
        };
        if mr.is_null() {
            return Err(errno_call("ibv_reg_mr"));
        }
        Ok(Mr {
            mr,
            buf: Some(buf),
            access,
            pd: self.inner.clone(),
        })
    }

    /// Creates an address handle for UD sends.
    pub fn create_ah(&self, attr: AhAttr) -> Result<Ah, Error> {
        let mut a = ibv_ah_attr::default();
        fill_ah(&mut a, attr.dlid, attr.sl, attr.port, attr.grh);
        // SAFETY: the PD is live; `a` is a valid attribute set.
        let ah = unsafe { self.inner.ctx.lib.ibv_create_ah(self.inner.pd, &mut a) };
        if ah.is_null() {
            return Err(errno_call("ibv_create_ah"));
        }
        Ok(Ah {
            inner: Arc::new(AhInner {
                ah,
                pd: self.inner.clone(),
            }),
        })
    }

    /// Whether `self` and `other` are the same protection domain.
    pub fn same(&self, other: &Pd) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// A registered memory region and the buffer it covers. It is moved into a
/// queue pair while a work request uses it and given back with the
/// completion, so it cannot be read, written or freed in between.
pub struct Mr {
    mr: *mut ibv_mr,
    buf: Option<Box<[u8]>>,
    access: Access,
    pub(crate) pd: Arc<PdInner>,
}

// SAFETY: the MR owns its buffer; deregistration is thread-safe.
unsafe impl Send for Mr {}
// SAFETY: &Mr gives only reads of the buffer and of immutable keys.
unsafe impl Sync for Mr {}

impl Mr {
    /// The local key, for scatter/gather entries.
    pub fn lkey(&self) -> u32 {
        // SAFETY: the MR is registered until drop.
        unsafe { (*self.mr).lkey }
    }

    /// The remote key, for a peer's RDMA.
    pub fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr).rkey }
    }

    /// The buffer's address, as a peer names it in RDMA.
    pub fn addr(&self) -> u64 {
        self.slice().as_ptr() as u64
    }

    /// The buffer's length.
    pub fn len(&self) -> usize {
        self.slice().len()
    }

    /// Whether the buffer is empty (never: empty buffers are refused).
    pub fn is_empty(&self) -> bool {
        self.slice().is_empty()
    }

    /// What the region allows.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The buffer.
    pub fn slice(&self) -> &[u8] {
        self.buf.as_deref().unwrap_or(&[])
    }

    /// The buffer, writable.
    pub fn slice_mut(&mut self) -> &mut [u8] {
        self.buf.as_deref_mut().unwrap_or(&mut [])
    }

    /// Deregisters the region and gives the buffer back.
    pub fn into_inner(mut self) -> Box<[u8]> {
        self.deregister();
        self.buf.take().unwrap_or_default()
    }

    fn deregister(&mut self) {
        if !self.mr.is_null() {
            // SAFETY: registered by ibv_reg_mr, deregistered once.
            unsafe { self.pd.ctx.lib.ibv_dereg_mr(self.mr) };
            self.mr = ptr::null_mut();
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // Deregister before the buffer is freed (fields drop after this).
        self.deregister();
    }
}

/// Where a UD send goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AhAttr {
    /// Destination LID.
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Local port.
    pub port: u8,
    /// The global route, which RoCE ports (link layer Ethernet) and
    /// inter-subnet paths need; `None` on an InfiniBand subnet.
    pub grh: Option<Grh>,
}

/// A global route header's addressing: where a RoCE or inter-subnet
/// packet goes and which of the port's own GIDs it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grh {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Index of the source GID in the port's GID table.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
}

/// Fills `a` from an [`AhAttr`]-style description.
pub(crate) fn fill_ah(a: &mut ibv_ah_attr, dlid: u16, sl: u8, port: u8, grh: Option<Grh>) {
    a.dlid = dlid;
    a.sl = sl;
    a.port_num = port;
    if let Some(g) = grh {
        a.is_global = 1;
        a.grh.dgid.raw = g.dgid;
        a.grh.sgid_index = g.sgid_index;
        a.grh.hop_limit = g.hop_limit;
    }
}

pub(crate) struct AhInner {
    pub(crate) ah: *mut ibv_ah,
    pd: Arc<PdInner>,
}

// SAFETY: an AH is immutable after creation.
unsafe impl Send for AhInner {}
// SAFETY: as above.
unsafe impl Sync for AhInner {}

impl Drop for AhInner {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_ah; a posted UD send holds a clone,
        // so none uses it any more; destroyed once.
        unsafe { self.pd.ctx.lib.ibv_destroy_ah(self.ah) };
    }
}

/// An address handle: a destination for UD sends. A send holds it until
/// its completion.
#[derive(Clone)]
pub struct Ah {
    pub(crate) inner: Arc<AhInner>,
}

pub(crate) struct ChanInner {
    ch: *mut ibv_comp_channel,
    ctx: Arc<CtxInner>,
}

// SAFETY: reading events from a channel is thread-safe.
unsafe impl Send for ChanInner {}
// SAFETY: as above.
unsafe impl Sync for ChanInner {}

impl Drop for ChanInner {
    fn drop(&mut self) {
        // SAFETY: every CQ on the channel holds an Arc to it and is gone;
        // destroyed once.
        unsafe { self.ctx.lib.ibv_destroy_comp_channel(self.ch) };
    }
}

/// A completion channel: CQs armed with [`Cq::req_notify`] report an event
/// on its file descriptor.
#[derive(Clone)]
pub struct CompChannel {
    inner: Arc<ChanInner>,
}

impl CompChannel {
    /// The file descriptor to wait on (poll, epoll).
    pub fn fd(&self) -> i32 {
        // SAFETY: the channel is live.
        unsafe { (*self.inner.ch).fd }
    }

    /// Makes [`CompChannel::try_event`] return at once when no event is
    /// waiting (the fd in non-blocking mode), for an event loop.
    pub fn set_nonblocking(&self) -> Result<(), Error> {
        set_nonblocking(self.fd())
    }

    /// The next completion event, acknowledged, if one is waiting (after
    /// [`CompChannel::set_nonblocking`]; else it blocks like
    /// [`CompChannel::get_event`]).
    pub fn try_event(&self) -> Result<Option<CqId>, Error> {
        match self.get_event() {
            Ok(id) => Ok(Some(id)),
            Err(Error::Call { code, .. }) if code == -libc::EAGAIN => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Blocks until an armed CQ of this channel has a completion event,
    /// acknowledges it and says which CQ it was ([`Cq::id`]).
    pub fn get_event(&self) -> Result<CqId, Error> {
        let mut cq: *mut ibv_cq = ptr::null_mut();
        let mut cq_ctx: *mut c_void = ptr::null_mut();
        // SAFETY: the channel is live; both out-pointers are writable.
        let r = unsafe {
            self.inner
                .ctx
                .lib
                .ibv_get_cq_event(self.inner.ch, &mut cq, &mut cq_ctx)
        };
        if r != 0 || cq.is_null() {
            return Err(errno_call("ibv_get_cq_event"));
        }
        // SAFETY: the event names a CQ of this channel, which holds the
        // channel alive and so is live; the event is acknowledged once.
        unsafe { self.inner.ctx.lib.ibv_ack_cq_events(cq, 1) };
        Ok(CqId(cq as usize))
    }
}

pub(crate) struct CqInner {
    pub(crate) cq: *mut ibv_cq,
    ctx: Arc<CtxInner>,
    _chan: Option<Arc<ChanInner>>,
}

// SAFETY: polling and arming a CQ are thread-safe in libibverbs.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: every QP using the CQ holds an Arc to it and is gone;
        // events were acknowledged as they were read; destroyed once.
        unsafe { self.ctx.lib.ibv_destroy_cq(self.cq) };
    }
}

/// Which CQ an event is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqId(usize);

/// A completion queue.
#[derive(Clone)]
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

/// A work completion. Only [`Cq::poll`] makes one, and
/// [`crate::qp::Qp::reclaim`] consumes it to give back the work request's
/// buffer.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completion {
    /// The work request's ID.
    pub wr_id: u64,
    /// 0 on success, else an `ibv_wc_status`.
    pub status: u32,
    /// What completed (`ibv_wc_opcode`: 0 send, 1 RDMA write, 2 RDMA read,
    /// 128 receive).
    pub opcode: u32,
    /// Bytes received.
    pub byte_len: u32,
    /// The local QP.
    pub qp_num: u32,
    /// The sending QP (UD receives).
    pub src_qp: u32,
    /// The sender's LID (receives).
    pub slid: u16,
    /// Immediate data, when the sender sent some.
    pub imm: Option<u32>,
}

impl Completion {
    /// Whether the work request succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == 0
    }
}

impl Cq {
    /// This CQ's identity, as a channel event names it.
    pub fn id(&self) -> CqId {
        CqId(self.inner.cq as usize)
    }

    /// Takes up to `max` completions.
    pub fn poll(&self, max: usize) -> Result<Vec<Completion>, Error> {
        let mut out = Vec::new();
        self.poll_into(max, &mut out)?;
        Ok(out)
    }

    /// Takes up to `max` completions (at most 32 at a time), appending them
    /// to `out`, which an event loop reuses: no allocation when it has
    /// room. How many.
    pub fn poll_into(&self, max: usize, out: &mut Vec<Completion>) -> Result<usize, Error> {
        let mut wc = [ibv_wc::default(); 32];
        let n = max.clamp(1, wc.len());
        // SAFETY: the CQ is live; `wc` has room for `n` entries.
        let got = unsafe { crate::inline::ibv_poll_cq(self.inner.cq, n as c_int, wc.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::Call {
                call: "ibv_poll_cq",
                code: got,
            });
        }
        out.extend(wc[..got as usize].iter().map(|w| {
            Completion {
                wr_id: w.wr_id,
                status: w.status,
                opcode: w.opcode,
                byte_len: w.byte_len,
                qp_num: w.qp_num,
                src_qp: w.src_qp,
                slid: w.slid,
                imm: (w.wc_flags & crate::ffi::verbs::ibv_wc_flags_IBV_WC_WITH_IMM != 0)
                    // SAFETY: WITH_IMM says the union holds imm_data.
                    .then(|| u32::from_be(unsafe { w.__bindgen_anon_1.imm_data })),
            }
        }));
        Ok(got as usize)
    }

    /// Arms the CQ: the next completion (or the next solicited one) raises
    /// an event on its channel.
    pub fn req_notify(&self, solicited_only: bool) -> Result<(), Error> {
        // SAFETY: the CQ is live.
        let r =
            unsafe { crate::inline::ibv_req_notify_cq(self.inner.cq, c_int::from(solicited_only)) };
        if r != 0 {
            return Err(Error::Call {
                call: "ibv_req_notify_cq",
                code: r,
            });
        }
        Ok(())
    }
}
