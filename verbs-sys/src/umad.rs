//! A umad port: management datagrams to and from one port of a CA through
//! libibumad (on real hardware, `/dev/infiniband/umad*`; under ibsim, the
//! `libumad2sim.so` preload serves the same calls).

use crate::ffi::umad::{umad_ca, umad_port, UmadLib};
use crate::{umad_lib, Error};
use std::ffi::{CStr, CString};
use std::os::raw::{c_int, c_long, c_void};
use std::ptr;

/// A registered agent: the handle libibumad returned for one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agent(pub i32);

/// The local port, as libibumad reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// CA name.
    pub ca: String,
    /// Port number.
    pub port: u8,
    /// Base LID.
    pub lid: u16,
    /// The SM's LID.
    pub sm_lid: u16,
    /// PortState (1 Down … 4 Active).
    pub state: u8,
    /// Port GUID.
    pub guid: u64,
}

/// A MAD that arrived (or a send that timed out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The agent it is for.
    pub agent: Agent,
    /// 0, or the errno of a send that failed (ETIMEDOUT: no response).
    pub status: i32,
    /// Source LID.
    pub slid: u16,
    /// Source QP (0 for SMPs, 1 or another for GS MADs).
    pub sqpn: u32,
    /// The MAD, 256 bytes.
    pub mad: Vec<u8>,
}

/// Where a MAD goes: a LID, a QP and its Q_Key, a service level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    /// Destination LID (0xFFFF: permissive, for directed-route SMPs).
    pub lid: u16,
    /// Destination QP: 0 for SMPs, the requester's for GS answers.
    pub qpn: u32,
    /// Q_Key (GS MADs: 0x8001_0000, the GSI's well-known key).
    pub qkey: u32,
    /// Service level.
    pub sl: u8,
}

/// The Q_Key of every GSI (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;

/// One open port with its agents; closed (and agents unregistered) on drop.
pub struct UmadPort {
    lib: &'static UmadLib,
    fd: c_int,
    agents: Vec<c_int>,
    buf: Vec<u8>,
    attr: PortAttr,
    pending: std::collections::VecDeque<Received>,
    /// The open issm device while this port claims to be an SM.
    issm: Option<c_int>,
}

/// The low 32 bits of a MAD's transaction ID (bytes 12..16), the part the
/// sender owns.
fn tid_low(mad: &[u8]) -> Option<u32> {
    if mad.len() != MAD_SIZE {
        return None;
    }
    Some(u32::from_be_bytes([mad[12], mad[13], mad[14], mad[15]]))
}

const MAD_SIZE: usize = 256;
/// ETIMEDOUT as libibumad reports it in a timed-out send's status.
pub const ETIMEDOUT: i32 = 110;

/// The CA and port whose port GUID is `guid`, among every CA libibumad
/// lists (what OpenSM's `-g` / `guid` binds to). `Error::NoDevice` names
/// the GUIDs there are when none is `guid`.
pub fn port_by_guid(guid: u64) -> Result<(String, u8), Error> {
    const MAX_CAS: usize = 32;
    // Port GUIDs a CA may list: port 0 and 254 more, as many as a switch.
    const MAX_PORTS: usize = 256;
    let lib = umad_lib()?;
    let mut names = [[0 as std::ffi::c_char; 20]; MAX_CAS];
    // SAFETY: `names` holds MAX_CAS arrays of UMAD_CA_NAME_LEN (20) chars,
    // each filled NUL-terminated by libibumad.
    let n = unsafe { lib.umad_get_cas_names(names.as_mut_ptr(), MAX_CAS as c_int) };
    let mut seen = Vec::new();
    for name in names.iter().take(n.clamp(0, MAX_CAS as c_int) as usize) {
        let mut guids = [0u64; MAX_PORTS];
        // SAFETY: `name` is NUL-terminated (libibumad copied a shorter
        // name into it); `guids` has room for MAX_PORTS.
        let ports = unsafe {
            lib.umad_get_ca_portguids(name.as_ptr(), guids.as_mut_ptr(), MAX_PORTS as c_int)
        };
        // SAFETY: NUL-terminated, as above.
        let ca = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        for (port, &g) in guids.iter().enumerate().take(ports.clamp(0, 256) as usize) {
            let g = u64::from_be(g);
            if g == 0 {
                continue;
            }
            if g == guid {
                return Ok((ca, port as u8));
            }
            seen.push(format!("{ca} port {port} {g:#018x}"));
        }
    }
    Err(Error::NoDevice(format!(
        "no port has GUID {guid:#018x} (there are: {})",
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        }
    )))
}

impl UmadPort {
    /// Opens port `port` (0: the first active one) of CA `ca` (`None`: the
    /// first CA).
    pub fn open(ca: Option<&str>, port: u8) -> Result<UmadPort, Error> {
        let lib = umad_lib()?;
        let name = match ca {
            Some(c) => Some(CString::new(c).map_err(|_| Error::BadArgument(c.to_string()))?),
            None => None,
        };
        let p = name.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let mut info = umad_port::default();
        // SAFETY: `p` is null or a NUL-terminated string alive for the call;
        // `info` is a writable umad_port, released below.
        let r = unsafe { lib.umad_get_port(p, c_int::from(port), &mut info) };
        if r < 0 {
            // Tell a missing port of a CA that exists from a missing CA.
            let mut c = umad_ca::default();
            // SAFETY: as above; `c` is a writable umad_ca, released at once
            // when filled.
            if port != 0 && unsafe { lib.umad_get_ca(p, &mut c) } >= 0 {
                // SAFETY: the CA was filled by umad_get_ca.
                unsafe { lib.umad_release_ca(&mut c) };
                // SAFETY: ca_name is NUL-terminated within its array.
                let ca = unsafe { CStr::from_ptr(c.ca_name.as_ptr()) }
                    .to_string_lossy()
                    .into_owned();
                return Err(Error::NoPort {
                    ca,
                    port,
                    ports: c.numports.clamp(0, 255) as u8,
                });
            }
            return Err(Error::NoDevice(format!(
                "umad_get_port({}, {port}) = {r}",
                ca.unwrap_or("first CA")
            )));
        }
        // SAFETY: ca_name is NUL-terminated by libibumad within its array.
        let ca_name = unsafe { CStr::from_ptr(info.ca_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let attr = PortAttr {
            ca: ca_name,
            port: info.portnum as u8,
            lid: info.base_lid as u16,
            sm_lid: info.sm_lid as u16,
            state: info.state as u8,
            guid: u64::from_be(info.port_guid),
        };
        // SAFETY: `info` was filled by umad_get_port.
        unsafe { lib.umad_release_port(&mut info) };
        // SAFETY: as for umad_get_port.
        let fd = unsafe { lib.umad_open_port(p, c_int::from(port)) };
        if fd < 0 {
            return Err(Error::Call {
                call: "umad_open_port",
                code: fd,
            });
        }
        // SAFETY: no arguments.
        let hdr = unsafe { lib.umad_size() };
        Ok(UmadPort {
            lib,
            fd,
            agents: Vec::new(),
            buf: vec![0u8; hdr + MAD_SIZE],
            attr,
            pending: Default::default(),
            issm: None,
        })
    }

    /// What libibumad said of the port when it was opened.
    pub fn attr(&self) -> &PortAttr {
        &self.attr
    }

    /// Registers an agent for management class `class` (version `version`),
    /// receiving unsolicited MADs of `methods` (responses to its own
    /// requests always come back to it).
    pub fn register(&mut self, class: u8, version: u8, methods: &[u8]) -> Result<Agent, Error> {
        let bits = 8 * std::mem::size_of::<c_long>();
        let mut mask = [0 as c_long; 128 / (8 * std::mem::size_of::<c_long>())];
        for &m in methods {
            let m = usize::from(m & 0x7F);
            mask[m / bits] |= 1 << (m % bits);
        }
        let mask_ptr = if methods.is_empty() {
            ptr::null_mut()
        } else {
            mask.as_mut_ptr()
        };
        // SAFETY: `fd` is open; `mask_ptr` is null or 128 bits long.
        let id = unsafe {
            self.lib.umad_register(
                self.fd,
                c_int::from(class),
                c_int::from(version),
                0,
                mask_ptr,
            )
        };
        if id < 0 {
            return Err(Error::Call {
                call: "umad_register",
                code: id,
            });
        }
        self.agents.push(id);
        Ok(Agent(id))
    }

    /// Sends a 256-byte MAD by `agent` to `dlid` (0xFFFF: permissive, for
    /// directed route), QP 0. With `timeout_ms` > 0 the kernel matches the
    /// response to this send, resends it up to `retries` times while none
    /// comes, and finally reports a timeout with status ETIMEDOUT.
    pub fn send(
        &mut self,
        agent: Agent,
        mad: &[u8],
        dlid: u16,
        timeout_ms: i32,
        retries: u32,
    ) -> Result<(), Error> {
        let to = Dest {
            lid: dlid,
            qpn: 0,
            qkey: 0,
            sl: 0,
        };
        self.send_to(agent, mad, to, timeout_ms, retries)
    }

    /// Sends a MAD by `agent` to `to` (a GS answer goes to the requester's
    /// LID and QP with [`GSI_QKEY`]); `timeout_ms` and `retries` as for
    /// [`UmadPort::send`]. `mad` is 24 to 256 bytes: a GS answer may be
    /// sent as long as what it carries, and the datagram keeps that length.
    pub fn send_to(
        &mut self,
        agent: Agent,
        mad: &[u8],
        to: Dest,
        timeout_ms: i32,
        retries: u32,
    ) -> Result<(), Error> {
        if !(24..=MAD_SIZE).contains(&mad.len()) {
            return Err(Error::BadArgument(format!(
                "a MAD is 24 to 256 bytes, not {}",
                mad.len()
            )));
        }
        self.buf.iter_mut().for_each(|b| *b = 0);
        let umad = self.buf.as_mut_ptr() as *mut c_void;
        // SAFETY: `buf` holds the ib_user_mad header plus 256 bytes; the MAD
        // pointer libibumad returns lies inside it.
        unsafe {
            self.lib.umad_set_addr(
                umad,
                c_int::from(to.lid),
                to.qpn as c_int,
                c_int::from(to.sl),
                to.qkey as c_int,
            );
            let data = self.lib.umad_get_mad(umad) as *mut u8;
            ptr::copy_nonoverlapping(mad.as_ptr(), data, mad.len());
        }
        // SAFETY: as above; the length covers the MAD only.
        let r = unsafe {
            self.lib.umad_send(
                self.fd,
                agent.0,
                umad,
                mad.len() as c_int,
                timeout_ms,
                retries.min(c_int::MAX as u32) as c_int,
            )
        };
        if r < 0 {
            return Err(Error::Call {
                call: "umad_send",
                code: r,
            });
        }
        Ok(())
    }

    /// Sends `mad` (see [`UmadPort::send`]) and waits for its response: the
    /// MAD that comes back with the same transaction ID (its low 32 bits:
    /// the kernel owns the high ones). Other MADs that arrive meanwhile are
    /// kept for [`UmadPort::recv`]. A request nobody answers is
    /// `Error::Call { call: "umad_send", code: -ETIMEDOUT }`.
    pub fn request(
        &mut self,
        agent: Agent,
        mad: &[u8],
        dlid: u16,
        timeout_ms: i32,
        retries: u32,
    ) -> Result<Received, Error> {
        let tid =
            tid_low(mad).ok_or_else(|| Error::BadArgument(format!("a {}-byte MAD", mad.len())))?;
        self.send(agent, mad, dlid, timeout_ms, retries)?;
        let budget = i64::from(timeout_ms.max(1)) * (i64::from(retries) + 1) + 1000;
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(budget as u64);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(Error::Call {
                    call: "umad_send",
                    code: -ETIMEDOUT,
                });
            }
            let Some(r) = self.recv_raw(left.as_millis().min(i32::MAX as u128) as i32)? else {
                continue;
            };
            if r.agent == agent && tid_low(&r.mad) == Some(tid) {
                if r.status != 0 {
                    return Err(Error::Call {
                        call: "umad_send",
                        code: -r.status,
                    });
                }
                return Ok(r);
            }
            self.pending.push_back(r);
        }
    }

    /// Claims the port for a subnet manager: opens its issm device, which
    /// sets the IsSM capability bit for as long as it stays open (until
    /// drop), so that SA requests and traps for the SM come here. Under
    /// ibsim's preload this is what makes ibsim hand this client the
    /// requests for the SM's port. Opened with libc's `open`, the call
    /// libumad2sim intercepts.
    pub fn claim_sm(&mut self) -> Result<(), Error> {
        if self.issm.is_some() {
            return Ok(());
        }
        let ca = std::ffi::CString::new(self.attr.ca.clone())
            .map_err(|_| Error::BadArgument("a CA name with a NUL".into()))?;
        let mut path = [0 as std::ffi::c_char; 256];
        // SAFETY: `ca` is NUL-terminated; `path` has the room given.
        let r = unsafe {
            self.lib.umad_get_issm_path(
                ca.as_ptr(),
                c_int::from(self.attr.port),
                path.as_mut_ptr(),
                path.len() as c_int,
            )
        };
        if r < 0 {
            return Err(Error::Call {
                call: "umad_get_issm_path",
                code: r,
            });
        }
        // SAFETY: `path` was NUL-terminated by umad_get_issm_path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR) };
        if fd < 0 {
            return Err(Error::Call {
                call: "open(issm)",
                code: -std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            });
        }
        self.issm = Some(fd);
        Ok(())
    }

    /// Waits up to `timeout_ms` (−1: forever) for a MAD; `None` on timeout.
    pub fn recv(&mut self, timeout_ms: i32) -> Result<Option<Received>, Error> {
        if let Some(r) = self.pending.pop_front() {
            return Ok(Some(r));
        }
        self.recv_raw(timeout_ms)
    }

    fn recv_raw(&mut self, timeout_ms: i32) -> Result<Option<Received>, Error> {
        self.buf.iter_mut().for_each(|b| *b = 0);
        let umad = self.buf.as_mut_ptr() as *mut c_void;
        let mut len: c_int = MAD_SIZE as c_int;
        // SAFETY: `buf` has room for the header and `len` bytes of MAD.
        let r = unsafe { self.lib.umad_recv(self.fd, umad, &mut len, timeout_ms) };
        if r < 0 {
            // -ETIMEDOUT: nothing arrived in time.
            if r == -ETIMEDOUT || r == -11 {
                return Ok(None);
            }
            return Err(Error::Call {
                call: "umad_recv",
                code: r,
            });
        }
        // SAFETY: filled by umad_recv.
        let (status, slid, sqpn, mad) = unsafe {
            let status = self.lib.umad_status(umad);
            let addr = self.lib.umad_get_mad_addr(umad);
            let (slid, sqpn) = if addr.is_null() {
                (0, 0)
            } else {
                (u16::from_be((*addr).lid), u32::from_be((*addr).qpn))
            };
            let data = self.lib.umad_get_mad(umad) as *const u8;
            let n = (len.max(0) as usize).min(MAD_SIZE);
            let mut mad = vec![0u8; MAD_SIZE];
            ptr::copy_nonoverlapping(data, mad.as_mut_ptr(), n);
            (status, slid, sqpn, mad)
        };
        Ok(Some(Received {
            agent: Agent(r),
            status,
            slid,
            sqpn,
            mad,
        }))
    }
}

impl Drop for UmadPort {
    fn drop(&mut self) {
        if let Some(fd) = self.issm.take() {
            // SAFETY: opened by `claim_sm`, closed once; closing it clears
            // the port's IsSM bit.
            unsafe { libc::close(fd) };
        }
        for &a in &self.agents {
            // SAFETY: `a` was registered on this open port.
            unsafe { self.lib.umad_unregister(self.fd, a) };
        }
        // SAFETY: `fd` was opened by umad_open_port and is closed once.
        unsafe { self.lib.umad_close_port(self.fd) };
    }
}
