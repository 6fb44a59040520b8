//! The backend's deterministic core: command bytes in, response bytes
//! out, no I/O. Each guest is a domain with the guest memory it owns
//! (reached only through rust-vmm's `GuestMemory`) and its limits. Every
//! request is decoded and checked in full before anything is allocated,
//! and a refused request changes nothing.

use crate::device::{Device, Object};
use crate::handles::{DomainId, Table};
use crate::proto::{
    access, Command, Handle, QpState, QpType, Refusal, Response, CQE_SIZE, MAD_SIZE, MSG_SIZE,
    WQE_SIZE,
};
use vm_memory::{GuestAddress, GuestMemory, Permissions};

/// What one domain may hold at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Protection domains.
    pub pds: usize,
    /// Memory regions.
    pub mrs: usize,
    /// Completion queues.
    pub cqs: usize,
    /// Queue pairs.
    pub qps: usize,
    /// Bytes registered, summed over its regions.
    pub reg_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            pds: 64,
            mrs: 1024,
            cqs: 256,
            qps: 256,
            reg_bytes: 1 << 30,
        }
    }
}

/// What the backend knows of a guest's port: its own LID and GUIDs (its
/// VF's, where the SM runs vSwitch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PortView {
    /// The port's LID.
    pub lid: u16,
    /// The port GUID.
    pub port_guid: u64,
    /// Port state (4: Active).
    pub state: u8,
}

struct Domain<M> {
    mem: M,
    limits: Limits,
    port: PortView,
    opened: bool,
    uar: Option<u32>,
    reg_bytes: u64,
}

struct Pd {
    dev: u32,
}

struct Mr {
    pd: Handle,
    dev: u32,
    len: u64,
    /// CQs and QPs whose buffers lie in it.
    users: u32,
}

struct Cq {
    dev: u32,
    cqe: u32,
    mr: Handle,
    /// QPs that complete into it.
    users: u32,
    armed: bool,
}

struct Qp {
    dev: u32,
    pd: Handle,
    qp_type: QpType,
    send_cq: Handle,
    recv_cq: Handle,
    mr: Handle,
    state: QpState,
}

/// What a domain holds (for limits, and to show teardown leaves nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Protection domains.
    pub pds: usize,
    /// Memory regions.
    pub mrs: usize,
    /// Completion queues.
    pub cqs: usize,
    /// Queue pairs.
    pub qps: usize,
    /// Registered bytes.
    pub reg_bytes: u64,
}

/// Counters of the backend's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// Commands executed.
    pub executed: u64,
    /// Commands refused.
    pub refused: u64,
}

/// The backend core over guest memory of type `M` and device `D`.
pub struct Backend<M: GuestMemory, D: Device> {
    device: D,
    domains: Vec<Option<Domain<M>>>,
    pds: Table<Pd>,
    mrs: Table<Mr>,
    cqs: Table<Cq>,
    qps: Table<Qp>,
    /// Counters.
    pub stats: BackendStats,
}

impl<M: GuestMemory, D: Device> Backend<M, D> {
    /// A backend owning `device`, with no domains.
    pub fn new(device: D) -> Self {
        Backend {
            device,
            domains: Vec::new(),
            pds: Table::default(),
            mrs: Table::default(),
            cqs: Table::default(),
            qps: Table::default(),
            stats: BackendStats::default(),
        }
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// Adds a guest whose memory is `mem`, with `limits`, seeing `port`.
    pub fn add_domain(&mut self, mem: M, limits: Limits, port: PortView) -> DomainId {
        let d = Domain {
            mem,
            limits,
            port,
            opened: false,
            uar: None,
            reg_bytes: 0,
        };
        match self.domains.iter().position(Option::is_none) {
            Some(i) => {
                self.domains[i] = Some(d);
                DomainId(i as u32)
            }
            None => {
                self.domains.push(Some(d));
                DomainId(self.domains.len() as u32 - 1)
            }
        }
    }

    /// The guest memory of `dom`.
    pub fn memory(&self, dom: DomainId) -> Option<&M> {
        self.domain(dom).map(|d| &d.mem)
    }

    fn domain(&self, dom: DomainId) -> Option<&Domain<M>> {
        self.domains.get(dom.0 as usize)?.as_ref()
    }

    fn domain_mut(&mut self, dom: DomainId) -> Option<&mut Domain<M>> {
        self.domains.get_mut(dom.0 as usize)?.as_mut()
    }

    /// True when `addr..addr + count` lies in `dom`'s memory with `perm`.
    fn in_memory(&self, dom: DomainId, addr: u64, count: usize, perm: Permissions) -> bool {
        self.memory(dom)
            .is_some_and(|m| m.check_range(GuestAddress(addr), count, perm))
    }

    /// What `dom` holds.
    pub fn held(&self, dom: DomainId) -> Held {
        Held {
            pds: self.pds.owned_by(dom).len(),
            mrs: self.mrs.owned_by(dom).len(),
            cqs: self.cqs.owned_by(dom).len(),
            qps: self.qps.owned_by(dom).len(),
            reg_bytes: self.domain(dom).map_or(0, |d| d.reg_bytes),
        }
    }

    /// Tears `dom` down (its frontend disconnected or died): everything it
    /// owns is destroyed, QPs first, and the domain is gone. Nothing of
    /// another domain is touched. What it held.
    pub fn remove_domain(&mut self, dom: DomainId) -> Held {
        let held = self.held(dom);
        for h in self.qps.owned_by(dom) {
            if let Some(q) = self.qps.remove(dom, h) {
                self.device
                    .destroy(Object::Qp { qp_type: q.qp_type }, q.dev);
            }
        }
        for h in self.cqs.owned_by(dom) {
            if let Some(c) = self.cqs.remove(dom, h) {
                self.device.destroy(Object::Cq { cqe: c.cqe }, c.dev);
            }
        }
        for h in self.mrs.owned_by(dom) {
            if let Some(m) = self.mrs.remove(dom, h) {
                self.device.destroy(Object::Mr { len: m.len }, m.dev);
            }
        }
        for h in self.pds.owned_by(dom) {
            if let Some(p) = self.pds.remove(dom, h) {
                self.device.destroy(Object::Pd, p.dev);
            }
        }
        if let Some(slot) = self.domains.get_mut(dom.0 as usize) {
            if let Some(d) = slot.take() {
                if let Some(u) = d.uar {
                    self.device.destroy(Object::Uar, u);
                }
            }
        }
        held
    }

    /// Executes one request of `dom` (its bytes, copied out of shared
    /// memory once by the caller) and returns the response's bytes.
    pub fn execute(&mut self, dom: DomainId, request: &[u8]) -> [u8; MSG_SIZE] {
        let (seq, result) = match Command::decode(request) {
            Ok((seq, cmd)) => (seq, self.run(dom, cmd)),
            Err((seq, r)) => (seq, Err(r)),
        };
        match result {
            Ok(_) => self.stats.executed += 1,
            Err(_) => self.stats.refused += 1,
        }
        Response { seq, result }.encode()
    }

    /// Runs a decoded command for `dom`.
    pub fn run(&mut self, dom: DomainId, cmd: Command) -> Result<[u64; 7], Refusal> {
        let Some(d) = self.domain(dom) else {
            return Err(Refusal::NotOpen);
        };
        if !d.opened && cmd != Command::OpenDevice {
            return Err(Refusal::NotOpen);
        }
        let (limits, port, has_uar, reg_bytes) = (d.limits, d.port, d.uar.is_some(), d.reg_bytes);
        let mut out = [0u64; 7];
        match cmd {
            Command::OpenDevice => {
                let d = self.domain_mut(dom).ok_or(Refusal::NotOpen)?;
                if d.opened {
                    return Err(Refusal::Again);
                }
                d.opened = true;
            }
            Command::QueryDevice => {
                let a = self.device.attr();
                let l = limits;
                out[0] = a.node_guid;
                out[1] = u64::from(a.max_qp).min(l.qps as u64);
                out[2] = u64::from(a.max_cq).min(l.cqs as u64);
                out[3] = u64::from(a.max_mr).min(l.mrs as u64);
                out[4] = l.reg_bytes;
            }
            Command::QueryPort { port: _ } => {
                out[0] = u64::from(port.lid);
                out[1] = port.port_guid;
                out[2] = u64::from(port.state);
            }
            Command::AllocPd => {
                if self.pds.owned_by(dom).len() >= limits.pds {
                    return Err(Refusal::Limit);
                }
                let dev = self
                    .device
                    .create(Object::Pd)
                    .map_err(|_| Refusal::Device)?;
                out[0] = self.pds.insert(dom, Pd { dev }).0;
            }
            Command::FreePd { pd } => {
                self.pds.get(dom, pd).ok_or(Refusal::BadHandle)?;
                let in_use = self.mrs.iter().any(|(o, m)| o == dom && m.pd == pd)
                    || self.qps.iter().any(|(o, q)| o == dom && q.pd == pd);
                if in_use {
                    return Err(Refusal::Busy);
                }
                let p = self.pds.remove(dom, pd).ok_or(Refusal::BadHandle)?;
                self.device.destroy(Object::Pd, p.dev);
            }
            Command::RegMr {
                pd,
                addr,
                len,
                access: acc,
            } => {
                self.pds.get(dom, pd).ok_or(Refusal::BadHandle)?;
                let end = addr.checked_add(len).ok_or(Refusal::BadAddress)?;
                let Ok(count) = usize::try_from(len) else {
                    return Err(Refusal::BadAddress);
                };
                let perm = if acc & (access::LOCAL_WRITE | access::REMOTE_WRITE) != 0 {
                    Permissions::ReadWrite
                } else {
                    Permissions::Read
                };
                if end == 0 || !self.in_memory(dom, addr, count, perm) {
                    return Err(Refusal::BadAddress);
                }
                if self.mrs.owned_by(dom).len() >= limits.mrs
                    || reg_bytes.saturating_add(len) > limits.reg_bytes
                {
                    return Err(Refusal::Limit);
                }
                let dev = self
                    .device
                    .create(Object::Mr { len })
                    .map_err(|_| Refusal::Device)?;
                let h = self.mrs.insert(
                    dom,
                    Mr {
                        pd,
                        dev,
                        len,
                        users: 0,
                    },
                );
                if let Some(d) = self.domain_mut(dom) {
                    d.reg_bytes += len;
                }
                out[0] = h.0;
                // lkey and rkey: the device's key.
                out[1] = u64::from(dev);
                out[2] = if acc & (access::REMOTE_READ | access::REMOTE_WRITE) != 0 {
                    u64::from(dev)
                } else {
                    0
                };
            }
            Command::DeregMr { mr } => {
                let m = self.mrs.get(dom, mr).ok_or(Refusal::BadHandle)?;
                if m.users > 0 {
                    return Err(Refusal::Busy);
                }
                let m = self.mrs.remove(dom, mr).ok_or(Refusal::BadHandle)?;
                self.device.destroy(Object::Mr { len: m.len }, m.dev);
                if let Some(d) = self.domain_mut(dom) {
                    d.reg_bytes -= m.len;
                }
            }
            Command::CreateCq { cqe, mr, offset } => {
                let m = self.mrs.get(dom, mr).ok_or(Refusal::BadHandle)?;
                let need = u64::from(cqe) * CQE_SIZE;
                if offset.checked_add(need).is_none_or(|e| e > m.len) {
                    return Err(Refusal::BadAddress);
                }
                if self.cqs.owned_by(dom).len() >= limits.cqs {
                    return Err(Refusal::Limit);
                }
                let dev = self
                    .device
                    .create(Object::Cq { cqe })
                    .map_err(|_| Refusal::Device)?;
                if let Some(m) = self.mrs.get_mut(dom, mr) {
                    m.users += 1;
                }
                let h = self.cqs.insert(
                    dom,
                    Cq {
                        dev,
                        cqe,
                        mr,
                        users: 0,
                        armed: false,
                    },
                );
                out[0] = h.0;
                out[1] = u64::from(dev);
            }
            Command::DestroyCq { cq } => {
                let c = self.cqs.get(dom, cq).ok_or(Refusal::BadHandle)?;
                if c.users > 0 {
                    return Err(Refusal::Busy);
                }
                let c = self.cqs.remove(dom, cq).ok_or(Refusal::BadHandle)?;
                if let Some(m) = self.mrs.get_mut(dom, c.mr) {
                    m.users -= 1;
                }
                self.device.destroy(Object::Cq { cqe: c.cqe }, c.dev);
            }
            Command::CreateQp {
                pd,
                send_cq,
                recv_cq,
                qp_type,
                max_send_wr,
                max_recv_wr,
                mr,
                offset,
            } => {
                self.pds.get(dom, pd).ok_or(Refusal::BadHandle)?;
                self.cqs.get(dom, send_cq).ok_or(Refusal::BadHandle)?;
                self.cqs.get(dom, recv_cq).ok_or(Refusal::BadHandle)?;
                let m = self.mrs.get(dom, mr).ok_or(Refusal::BadHandle)?;
                if m.pd != pd {
                    return Err(Refusal::BadHandle);
                }
                let need = (u64::from(max_send_wr) + u64::from(max_recv_wr)) * WQE_SIZE;
                if offset.checked_add(need).is_none_or(|e| e > m.len) {
                    return Err(Refusal::BadAddress);
                }
                if self.qps.owned_by(dom).len() >= limits.qps {
                    return Err(Refusal::Limit);
                }
                let dev = self
                    .device
                    .create(Object::Qp { qp_type })
                    .map_err(|_| Refusal::Device)?;
                for cq in [send_cq, recv_cq] {
                    if let Some(c) = self.cqs.get_mut(dom, cq) {
                        c.users += 1;
                    }
                }
                if let Some(m) = self.mrs.get_mut(dom, mr) {
                    m.users += 1;
                }
                let h = self.qps.insert(
                    dom,
                    Qp {
                        dev,
                        pd,
                        qp_type,
                        send_cq,
                        recv_cq,
                        mr,
                        state: QpState::Reset,
                    },
                );
                out[0] = h.0;
                out[1] = u64::from(dev);
            }
            Command::ModifyQp {
                qp,
                state,
                dest_qpn,
                dlid: _,
            } => {
                let q = self.qps.get_mut(dom, qp).ok_or(Refusal::BadHandle)?;
                let legal = match (q.state, state) {
                    (_, QpState::Reset | QpState::Err) => true,
                    (QpState::Reset, QpState::Init) | (QpState::Init, QpState::Init) => true,
                    (QpState::Init, QpState::Rtr) => q.qp_type == QpType::Ud || dest_qpn > 1,
                    (QpState::Rtr, QpState::Rts) | (QpState::Rts, QpState::Rts) => true,
                    _ => false,
                };
                if !legal {
                    return Err(Refusal::BadState);
                }
                q.state = state;
            }
            Command::DestroyQp { qp } => {
                let q = self.qps.remove(dom, qp).ok_or(Refusal::BadHandle)?;
                for cq in [q.send_cq, q.recv_cq] {
                    if let Some(c) = self.cqs.get_mut(dom, cq) {
                        c.users -= 1;
                    }
                }
                if let Some(m) = self.mrs.get_mut(dom, q.mr) {
                    m.users -= 1;
                }
                self.device
                    .destroy(Object::Qp { qp_type: q.qp_type }, q.dev);
            }
            Command::AllocUar => {
                if has_uar {
                    return Err(Refusal::Again);
                }
                let page = self
                    .device
                    .create(Object::Uar)
                    .map_err(|_| Refusal::Device)?;
                if let Some(d) = self.domain_mut(dom) {
                    d.uar = Some(page);
                }
                out[0] = u64::from(page);
            }
            Command::ReqNotifyCq { cq, solicited: _ } => {
                let c = self.cqs.get_mut(dom, cq).ok_or(Refusal::BadHandle)?;
                c.armed = true;
            }
            Command::SendMad { qpn, addr } => {
                // Guests never get QP 0.
                if qpn == 0 {
                    return Err(Refusal::Forbidden);
                }
                if !self.in_memory(dom, addr, MAD_SIZE as usize, Permissions::Read) {
                    return Err(Refusal::BadAddress);
                }
                let mut mad = [0u8; MAD_SIZE as usize];
                let mem = self.memory(dom).ok_or(Refusal::NotOpen)?;
                vm_memory::Bytes::read_slice(mem, &mut mad, GuestAddress(addr))
                    .map_err(|_| Refusal::BadAddress)?;
                // Subnet management classes are QP 0's: refused on QP 1 too.
                if matches!(mad[1], 0x01 | 0x81) {
                    return Err(Refusal::Forbidden);
                }
                // GSI service through the backend is not written yet.
                return Err(Refusal::Forbidden);
            }
        }
        Ok(out)
    }
}
