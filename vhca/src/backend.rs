//! The backend's deterministic core: command bytes in, response bytes
//! out, no I/O. Each guest is a domain with the guest memory it owns
//! (reached only through rust-vmm's `GuestMemory`) and its limits. Every
//! request is decoded and checked in full before anything is allocated,
//! and a refused request changes nothing.

use crate::device::{Device, DeviceEvent, Kind, Object};
use crate::event::EventWriter;
use crate::handles::{DomainId, Table};
use crate::layout::{cq_bytes, qp_bytes};
use crate::mgmt::{GuestId, Sa, SaService, Stamper};
use crate::proto::{
    access, Command, Handle, QpState, QpType, Refusal, Response, MAD_SIZE, MSG_SIZE,
};
use std::os::fd::BorrowedFd;
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
    events: Option<EventWriter>,
}

struct Pd {
    dev: u32,
}

struct Mr {
    pd: Handle,
    dev: u32,
    addr: u64,
    len: u64,
    access: u32,
    /// CQs and QPs whose buffers lie in it.
    users: u32,
}

struct Cq {
    dev: u32,
    mr: Handle,
    /// QPs that complete into it.
    users: u32,
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
    /// Events forwarded to guests.
    pub events: u64,
    /// Notifications sent for them (one per domain per poll at most).
    pub notifications: u64,
}

/// The backend core over guest memory of type `M` and device `D`.
pub struct Backend<M: GuestMemory + Clone, D: Device<M>> {
    device: D,
    domains: Vec<Option<Domain<M>>>,
    pds: Table<Pd>,
    mrs: Table<Mr>,
    cqs: Table<Cq>,
    qps: Table<Qp>,
    /// Counters.
    pub stats: BackendStats,
    device_events: Vec<DeviceEvent>,
    stamper: Stamper,
    sa: Box<dyn SaService>,
    /// Bytes all guests together may register (pin); see
    /// [`Backend::set_total_reg_limit`].
    total_reg_limit: u64,
}

/// Bytes all guests of a backend may register together unless the
/// integrator says otherwise: 16 guests at the per-guest default.
pub const DEFAULT_TOTAL_REG_BYTES: u64 = 16 << 30;

impl<M: GuestMemory + Clone, D: Device<M>> Backend<M, D> {
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
            device_events: Vec::new(),
            stamper: Stamper::default(),
            sa: Box::new(Sa::default()),
            total_reg_limit: DEFAULT_TOTAL_REG_BYTES,
        }
    }

    /// Caps the bytes all guests together may register (pin) on the
    /// device; a registration past it is refused with [`Refusal::Limit`],
    /// whatever the guest's own limit.
    pub fn set_total_reg_limit(&mut self, bytes: u64) {
        self.total_reg_limit = bytes;
    }

    /// Bytes registered by all guests together.
    pub fn total_reg_bytes(&self) -> u64 {
        self.domains.iter().flatten().map(|d| d.reg_bytes).sum()
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The subnet administrator's records the backend answers guests'
    /// SA queries from (the integrator's SM's view of the subnet).
    pub fn set_sa(&mut self, sa: Sa) {
        self.sa = Box::new(sa);
    }

    /// Where the guests' SA queries go instead, once checked and stamped:
    /// the subnet's own SA, as the integrator reaches it.
    pub fn set_sa_service(&mut self, sa: Box<dyn SaService>) {
        self.sa = sa;
    }

    /// The device, to run or inspect it.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// Adds a guest whose memory is `mem`, with `limits`, seeing `port`.
    /// The device opens a context for it; should that fail, every command
    /// that needs the device is refused.
    pub fn add_domain(&mut self, mem: M, limits: Limits, port: PortView) -> DomainId {
        let d = Domain {
            mem: mem.clone(),
            events: None,
            limits,
            port,
            opened: false,
            uar: None,
            reg_bytes: 0,
        };
        let dom = match self.domains.iter().position(Option::is_none) {
            Some(i) => {
                self.domains[i] = Some(d);
                DomainId(i as u32)
            }
            None => {
                self.domains.push(Some(d));
                DomainId(self.domains.len() as u32 - 1)
            }
        };
        let _ = self.device.open(dom, mem, port.lid);
        dom
    }

    /// Attaches the event ring the guest of `dom` placed at `base`.
    pub fn attach_events(&mut self, dom: DomainId, base: u64) -> Result<(), Refusal> {
        let d = self.domain_mut(dom).ok_or(Refusal::NotOpen)?;
        let w = EventWriter::attach(&d.mem, base).ok_or(Refusal::BadAddress)?;
        d.events = Some(w);
        Ok(())
    }

    /// The file of `dom`'s UAR page, once it has one: the integrator maps
    /// it into the guest.
    pub fn uar_fd(&self, dom: DomainId) -> Option<BorrowedFd<'_>> {
        self.device.uar_fd(self.domain(dom)?.uar?)
    }

    /// Runs the device's data path once and forwards its events to their
    /// domains' event rings; the domains to notify (those whose guest
    /// sleeps waiting for events) are appended to `notify`, each once. How
    /// much work the device did (0: idle).
    pub fn poll(&mut self, notify: &mut Vec<DomainId>) -> usize {
        let mut evs = std::mem::take(&mut self.device_events);
        evs.clear();
        let work = self.device.process(&mut evs);
        for e in &evs {
            let Some(Some(d)) = self.domains.get_mut(e.dom.0 as usize) else {
                continue;
            };
            let Some(w) = d.events.as_mut() else {
                continue;
            };
            if w.push(&d.mem, e.kind, e.tag) {
                self.stats.events += 1;
                if !notify.contains(&e.dom) {
                    notify.push(e.dom);
                }
            }
        }
        // Publish every ring that got events; notify only the guests that
        // sleep waiting for them (a polling guest sees the index move).
        notify.retain(|dom| {
            let Some(Some(d)) = self.domains.get(dom.0 as usize) else {
                return false;
            };
            let Some(w) = &d.events else {
                return false;
            };
            w.publish(&d.mem);
            w.guest_waiting(&d.mem)
        });
        self.stats.notifications += notify.len() as u64;
        self.device_events = evs;
        work
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
        self.stamper.forget_domain(dom.0);
        for h in self.qps.owned_by(dom) {
            if let Some(q) = self.qps.remove(dom, h) {
                self.device.destroy(Kind::Qp, q.dev);
            }
        }
        for h in self.cqs.owned_by(dom) {
            if let Some(c) = self.cqs.remove(dom, h) {
                self.device.destroy(Kind::Cq, c.dev);
            }
        }
        for h in self.mrs.owned_by(dom) {
            if let Some(m) = self.mrs.remove(dom, h) {
                self.device.destroy(Kind::Mr, m.dev);
            }
        }
        for h in self.pds.owned_by(dom) {
            if let Some(p) = self.pds.remove(dom, h) {
                self.device.destroy(Kind::Pd, p.dev);
            }
        }
        if let Some(slot) = self.domains.get_mut(dom.0 as usize) {
            if let Some(d) = slot.take() {
                if let Some(u) = d.uar {
                    self.device.destroy(Kind::Uar, u);
                }
                self.device.close(dom);
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
                    .create(dom, Object::Pd, 0)
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
                self.device.destroy(Kind::Pd, p.dev);
            }
            Command::RegMr {
                pd,
                addr,
                len,
                access: acc,
            } => {
                let pd_dev = self.pds.get(dom, pd).ok_or(Refusal::BadHandle)?.dev;
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
                    || self.total_reg_bytes().saturating_add(len) > self.total_reg_limit
                {
                    return Err(Refusal::Limit);
                }
                let obj = Object::Mr {
                    pd: pd_dev,
                    addr,
                    len,
                    access: acc,
                };
                let dev = self
                    .device
                    .create(dom, obj, 0)
                    .map_err(|_| Refusal::Device)?;
                let h = self.mrs.insert(
                    dom,
                    Mr {
                        pd,
                        dev,
                        addr,
                        len,
                        access: acc,
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
                self.device.destroy(Kind::Mr, m.dev);
                if let Some(d) = self.domain_mut(dom) {
                    d.reg_bytes -= m.len;
                }
            }
            Command::CreateCq { cqe, mr, offset } => {
                let m = self.mrs.get(dom, mr).ok_or(Refusal::BadHandle)?;
                let addr = buffer(m, offset, cq_bytes(cqe))?;
                if self.cqs.owned_by(dom).len() >= limits.cqs {
                    return Err(Refusal::Limit);
                }
                let h = self.cqs.insert(
                    dom,
                    Cq {
                        dev: 0,
                        mr,
                        users: 0,
                    },
                );
                let dev = match self.device.create(dom, Object::Cq { cqe, addr }, h.0) {
                    Ok(dev) => dev,
                    Err(_) => {
                        self.cqs.remove(dom, h);
                        return Err(Refusal::Device);
                    }
                };
                if let Some(c) = self.cqs.get_mut(dom, h) {
                    c.dev = dev;
                }
                if let Some(m) = self.mrs.get_mut(dom, mr) {
                    m.users += 1;
                }
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
                self.device.destroy(Kind::Cq, c.dev);
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
                let pd_dev = self.pds.get(dom, pd).ok_or(Refusal::BadHandle)?.dev;
                let scq = self.cqs.get(dom, send_cq).ok_or(Refusal::BadHandle)?.dev;
                let rcq = self.cqs.get(dom, recv_cq).ok_or(Refusal::BadHandle)?.dev;
                let m = self.mrs.get(dom, mr).ok_or(Refusal::BadHandle)?;
                if m.pd != pd {
                    return Err(Refusal::BadHandle);
                }
                let addr = buffer(m, offset, qp_bytes(max_send_wr, max_recv_wr))?;
                if self.qps.owned_by(dom).len() >= limits.qps {
                    return Err(Refusal::Limit);
                }
                let h = self.qps.insert(
                    dom,
                    Qp {
                        dev: 0,
                        pd,
                        send_cq,
                        recv_cq,
                        mr,
                        state: QpState::Reset,
                        qp_type,
                    },
                );
                let obj = Object::Qp {
                    qp_type,
                    pd: pd_dev,
                    send_cq: scq,
                    recv_cq: rcq,
                    addr,
                    sq: max_send_wr,
                    rq: max_recv_wr,
                };
                let dev = match self.device.create(dom, obj, h.0) {
                    Ok(dev) => dev,
                    Err(_) => {
                        self.qps.remove(dom, h);
                        return Err(Refusal::Device);
                    }
                };
                if let Some(q) = self.qps.get_mut(dom, h) {
                    q.dev = dev;
                }
                for cq in [send_cq, recv_cq] {
                    if let Some(c) = self.cqs.get_mut(dom, cq) {
                        c.users += 1;
                    }
                }
                if let Some(m) = self.mrs.get_mut(dom, mr) {
                    m.users += 1;
                }
                out[0] = h.0;
                out[1] = u64::from(dev);
            }
            Command::ModifyQp {
                qp,
                state,
                dest_qpn,
                dlid,
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
                let dev = q.dev;
                self.device.modify_qp(dev, state, dest_qpn, dlid);
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
                self.device.destroy(Kind::Qp, q.dev);
            }
            Command::AllocUar => {
                if has_uar {
                    return Err(Refusal::Again);
                }
                let page = self
                    .device
                    .create(dom, Object::Uar, 0)
                    .map_err(|_| Refusal::Device)?;
                if let Some(d) = self.domain_mut(dom) {
                    d.uar = Some(page);
                }
                out[0] = u64::from(page);
            }
            Command::ReqNotifyCq { cq, solicited: _ } => {
                let dev = self.cqs.get(dom, cq).ok_or(Refusal::BadHandle)?.dev;
                self.device.arm_cq(dev);
            }
            Command::SendMad { qpn, addr } => {
                // Guests never get QP 0.
                if qpn == 0 {
                    return Err(Refusal::Forbidden);
                }
                // The reply is written over the request.
                if !self.in_memory(dom, addr, MAD_SIZE as usize, Permissions::ReadWrite) {
                    return Err(Refusal::BadAddress);
                }
                let mut mad = [0u8; MAD_SIZE as usize];
                let mem = self.memory(dom).ok_or(Refusal::NotOpen)?;
                vm_memory::Bytes::read_slice(mem, &mut mad, GuestAddress(addr))
                    .map_err(|_| Refusal::BadAddress)?;
                // Subnet management classes are QP 0's: refused on QP 1
                // too, with every class and method not served.
                crate::mgmt::allowed(&mad)?;
                let who = GuestId {
                    dom: dom.0,
                    lid: port.lid,
                    port_guid: port.port_guid,
                };
                self.stamper.stamp(&who, &mut mad)?;
                let mut reply = self.sa.answer(&who, &mad);
                if self.stamper.demux(&mut reply) != Some(dom.0) {
                    return Err(Refusal::Device);
                }
                let mem = self.memory(dom).ok_or(Refusal::NotOpen)?;
                vm_memory::Bytes::write_slice(mem, &reply, GuestAddress(addr))
                    .map_err(|_| Refusal::BadAddress)?;
                out[0] = u64::from(u16::from_be_bytes([reply[4], reply[5]]));
            }
        }
        Ok(out)
    }
}

/// The guest-physical address of a `need`-byte buffer at `offset` in
/// region `m`, which the device writes: it must lie inside the region, be
/// writable, and start 64-byte aligned.
fn buffer(m: &Mr, offset: u64, need: u64) -> Result<u64, Refusal> {
    if offset.checked_add(need).is_none_or(|e| e > m.len) || m.access & access::LOCAL_WRITE == 0 {
        return Err(Refusal::BadAddress);
    }
    let addr = m.addr + offset;
    if addr % 64 != 0 {
        return Err(Refusal::BadAddress);
    }
    Ok(addr)
}
