//! Traffic across a live migration on a simulated fabric: two VMs, each a
//! vhca guest on the software HCA of its hypervisor, exchange UD messages
//! through `fabric`'s simulated fabric (each datagram follows the LFTs
//! ibkit's SM installed, switch by switch); then one VM migrates to another
//! hypervisor, the SM rewrites only the LFT entries the vSwitch plan names,
//! and the VM's guest comes back on the destination's HCA with the same LID
//! and the same GID (its vGUID) — and the same messages get through again.
//! The peer's PathRecord is the same before and after: it asks through its
//! backend, which forwards the query to the SM's own SA (the `sa` crate,
//! as `ibkit sm` serves it, over the SM's subnet database). `ibkit
//! migrate` runs it after its migrations.

use crate::backend::{Limits, PortView};
use crate::channel::{Direct, Hub};
use crate::device::SoftHca;
use crate::frontend::{Context, Cq, Mr, Qp, SendWr, Wc};
use crate::layout::{op, status, GRH_LEN};
use crate::proto::{access, QpType};
use fabric::sim::{Fabric, FabricError, SimConfig, Walk};
use fabric::topology::{Topology, TopologyError};
use mad_core::types::Lid;
use serde::Serialize;
use smi::sm::{Engine, LidPolicy, Sm, SmConfig, VmError, VmId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use vm_memory::GuestMemoryMmap;

/// Why the demonstration could not run.
#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    /// The topology spec names none.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The simulator refused the fabric.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The SM did not bring the subnet up.
    #[error("traffic demo: the subnet did not come up")]
    NotUp,
    /// Fewer than three hypervisors (source, destination, peer).
    #[error("traffic demo: needs three hypervisors")]
    TooFewHypervisors,
    /// The SM refused a VM operation.
    #[error(transparent)]
    Vm(#[from] VmError),
    /// A step's SMPs did not all complete.
    #[error("{0} did not complete")]
    Incomplete(&'static str),
    /// A guest could not be set up (its frontend's error).
    #[error("traffic demo: a guest: {0}")]
    Guest(String),
}

/// The migrated VM.
#[derive(Clone, Debug, Serialize)]
pub struct VmView {
    /// Its LID (kept).
    pub lid: u16,
    /// Its GID, `prefix:guid` in hex.
    pub gid: String,
}

/// What the demonstration measured. Paths are `node/egress port` at each
/// hop.
#[derive(Clone, Debug, Serialize)]
pub struct TrafficReport {
    /// The VM that migrates.
    pub vm: VmView,
    /// Its peer's LID.
    pub peer_lid: u16,
    /// The source hypervisor.
    pub from: String,
    /// The destination hypervisor.
    pub to: String,
    /// The peer's hypervisor.
    pub peer_on: String,
    /// The VM kept its LID.
    pub same_lid: bool,
    /// The VM kept its GID.
    pub same_gid: bool,
    /// Its QP number before.
    pub qpn_before: u32,
    /// Its QP number after (the HCA's to give).
    pub qpn_after: u32,
    /// Messages delivered intact before the migration.
    pub messages_before: u32,
    /// Messages delivered intact after it.
    pub messages_after: u32,
    /// Messages sent in each phase.
    pub messages_each_phase: u32,
    /// Whether a datagram sent after the move but before the LFTs moved
    /// got through (it must not: it goes to the old place).
    pub delivered_before_lfts_moved: bool,
    /// Where that datagram went.
    pub stale_path: Vec<String>,
    /// The first datagram's path before.
    pub path_before: Vec<String>,
    /// The first datagram's path after.
    pub path_after: Vec<String>,
    /// The DGID of the peer's PathRecord to the VM before, hex.
    pub sa_dgid_before: String,
    /// And after.
    pub sa_dgid_after: String,
    /// The DLID of that PathRecord before.
    pub sa_dlid_before: u16,
    /// And after.
    pub sa_dlid_after: u16,
    /// The whole PathRecord is the same before and after.
    pub sa_same_path: bool,
    /// Queries the SM's SA answered for the guests (each PathRecord query
    /// of the peer reaches it through the peer's backend).
    pub sm_sa_answered: u64,
    /// SMPs of the migration.
    pub migration_smps: usize,
    /// Switches whose LFT it changed.
    pub switches_touched: usize,
}

impl TrafficReport {
    /// True when every message got through in both phases with the same
    /// LID, GID and path record.
    pub fn good(&self) -> bool {
        self.messages_before == self.messages_each_phase
            && self.messages_after == self.messages_each_phase
            && self.same_lid
            && self.same_gid
            && self.sa_same_path
    }
}

type Soft = SoftHca<GuestMemoryMmap>;

/// The SM's own SA (the `sa` crate) over a copy of the SM's subnet
/// database, taken again whenever the SM has changed the subnet: the
/// backends forward their guests' checked and stamped queries to it, as a
/// backend on a real host forwards them to the subnet's SA over QP 1.
#[derive(Clone)]
struct SmSa(Arc<Mutex<(sa::Sa, smi::sm::Subnet)>>);

impl SmSa {
    fn new(sm: &Sm) -> SmSa {
        SmSa(Arc::new(Mutex::new((
            sa::Sa::new(sa::SaConfig::default()),
            sm.subnet().clone(),
        ))))
    }

    /// The SM changed the subnet: the SA reads it as it is now.
    fn refresh(&self, sm: &Sm) {
        if let Ok(mut g) = self.0.lock() {
            g.1 = sm.subnet().clone();
        }
    }

    fn answered(&self) -> u64 {
        self.0.lock().map_or(0, |g| g.0.stats().answered)
    }
}

impl crate::mgmt::SaService for SmSa {
    fn answer(
        &mut self,
        who: &crate::mgmt::GuestId,
        req: &[u8; crate::mgmt::MAD_LEN],
    ) -> [u8; crate::mgmt::MAD_LEN] {
        // What no answer comes back as: the request, a response with
        // "unsupported method/attribute".
        let mut refused = *req;
        refused[3] |= 0x80;
        refused[4..6].copy_from_slice(&crate::mgmt::ERR_METHOD_ATTR.to_be_bytes());
        let Ok(mut g) = self.0.lock() else {
            return refused;
        };
        let (sa, subnet) = &mut *g;
        let from = sa::Addr {
            lid: Lid(who.lid),
            qpn: 1,
        };
        let _ = sa.handle_mad(subnet, from, req, 0);
        // A guest takes one MAD: the answer, or a table's first segment.
        let mut first = None;
        while let Some(t) = sa.poll_transmit() {
            first.get_or_insert(t.mad);
        }
        first.unwrap_or(refused)
    }
}

/// A VM's guest: its context on its hypervisor's HCA, one UD QP.
struct Guest {
    ctx: Context<Direct<Soft>>,
    cq: Cq,
    qp: Qp,
    mr: Mr,
    buf: u64,
    lid: u16,
    gid: (u64, u64),
}

fn guest(hub: &Arc<Hub<Soft>>, lid: u16, guid: u64) -> Result<Guest, TrafficError> {
    let e = |e: crate::frontend::Error| TrafficError::Guest(e.to_string());
    let port = PortView {
        lid,
        port_guid: guid,
        state: 4,
    };
    let (t, mem, lay) = hub
        .attach(4 << 20, Limits::default(), port)
        .map_err(|e| TrafficError::Guest(e.to_string()))?;
    let mut ctx = Context::open(t, mem, lay).map_err(e)?;
    let (lid, guid, _) = ctx.query_port().map_err(e)?;
    let pd = ctx.alloc_pd().map_err(e)?;
    let cq = ctx.create_cq(64).map_err(e)?;
    let qp = ctx.create_qp(pd, QpType::Ud, &cq, &cq, 16, 16).map_err(e)?;
    ctx.ready(&qp, 0, 0).map_err(e)?;
    let buf = ctx.alloc(1 << 16).map_err(e)?;
    let mr = ctx
        .reg_mr(pd, buf, 1 << 16, access::LOCAL_WRITE)
        .map_err(e)?;
    Ok(Guest {
        ctx,
        cq,
        qp,
        mr,
        buf,
        lid,
        gid: (0xfe80_0000_0000_0000, guid),
    })
}

/// The hypervisors' HCAs, by fabric node, and the wire between them.
struct Wire {
    hubs: HashMap<usize, Arc<Hub<Soft>>>,
    /// (hops, delivered at) of each datagram carried.
    carried: Vec<(Vec<String>, Option<usize>)>,
}

impl Wire {
    /// Runs every HCA and carries what they put on the wire through the
    /// fabric's LFTs until nothing moves.
    fn pump(&mut self, f: &Fabric) {
        loop {
            let mut moved = 0;
            let mut out = Vec::new();
            for (&node, hub) in &self.hubs {
                let mut b = hub.backend();
                moved += b.poll(&mut Vec::new());
                for d in b.device_mut().take_outbound() {
                    out.push((node, d));
                }
            }
            for (src, d) in out {
                moved += 1;
                let (path, walk) = f.trace(src, Lid(d.dlid));
                let names = path
                    .iter()
                    .map(|&(n, p)| format!("{}/{p}", f.topo.nodes[n].name))
                    .collect();
                let at = match walk {
                    Walk::Delivered(_) => path.last().map(|&(n, _)| n),
                    _ => None,
                };
                let delivered = at
                    .and_then(|n| self.hubs.get(&n))
                    .is_some_and(|h| h.backend().device_mut().deliver(&d));
                self.carried
                    .push((names, if delivered { at } else { None }));
            }
            if moved == 0 {
                return;
            }
        }
    }
}

/// Sends `msg` from `from` to `to` (its LID and QP) and reports whether
/// `to` received exactly it.
fn exchange(w: &mut Wire, f: &Fabric, from: &mut Guest, to: &mut Guest, msg: &[u8]) -> bool {
    let (lkey, buf) = (to.mr.lkey, to.buf);
    if to
        .ctx
        .post_recv(&mut to.qp, 7, lkey, buf, 4096 + GRH_LEN)
        .is_err()
        || from.ctx.write(from.buf, msg).is_err()
    {
        return false;
    }
    let wr = SendWr {
        wr_id: 1,
        opcode: op::SEND,
        signaled: true,
        lkey: from.mr.lkey,
        addr: from.buf,
        len: msg.len() as u32,
        dest_qpn: to.qp.qpn,
        dlid: to.lid,
        ..Default::default()
    };
    if from.ctx.post_send(&mut from.qp, &wr).is_err() {
        return false;
    }
    w.pump(f);
    let mut wc = [Wc::default(); 4];
    let sent = from
        .ctx
        .poll_cq(&mut from.cq, &mut wc)
        .is_ok_and(|n| n == 1 && wc[0].status == status::SUCCESS);
    let n = to.ctx.poll_cq(&mut to.cq, &mut wc).unwrap_or(0);
    let got = n == 1
        && wc[0].status == status::SUCCESS
        && wc[0].slid == from.lid
        && wc[0].src_qp == from.qp.qpn
        && wc[0].byte_len == msg.len() as u32 + GRH_LEN;
    let mut data = vec![0u8; msg.len()];
    let same = to.ctx.read(to.buf + u64::from(GRH_LEN), &mut data).is_ok() && data == msg;
    sent && got && same
}

/// Four messages each way; how many got through intact.
fn rounds(w: &mut Wire, f: &Fabric, gx: &mut Guest, gy: &mut Guest, tag: &str) -> u32 {
    let mut ok = 0;
    for i in 0..4 {
        let m = format!("{tag} {i}: from VM {} to VM {}", gy.lid, gx.lid);
        ok += u32::from(exchange(w, f, gy, gx, m.as_bytes()));
        let m = format!("{tag} {i}: reply from VM {}", gx.lid);
        ok += u32::from(exchange(w, f, gx, gy, m.as_bytes()));
    }
    ok
}

/// Runs the demonstration on `topology` with `vfs` VFs per hypervisor.
pub fn demo(
    topology: &str,
    vfs: usize,
    policy: LidPolicy,
    routing: Engine,
) -> Result<TrafficReport, TrafficError> {
    let topo = Topology::from_spec(topology)?;
    let mut f = Fabric::new(
        topo,
        SimConfig {
            vfs: vfs.max(1),
            ..SimConfig::default()
        },
    )?;
    let mut sm = Sm::new(SmConfig {
        routing,
        lid_policy: policy,
        ..SmConfig::default()
    });
    if !f.bring_up(&mut sm) {
        return Err(TrafficError::NotUp);
    }
    let hyps = sm.hypervisors();
    if hyps.len() < 3 {
        return Err(TrafficError::TooFewHypervisors);
    }
    let (hx, hy, hz) = (hyps[0], hyps[hyps.len() - 1], hyps[hyps.len() / 2]);
    let start = |sm: &mut Sm, f: &mut Fabric, h, guid| -> Result<VmId, TrafficError> {
        let id = sm.create_vm(h, guid)?;
        if !f.run(sm) {
            return Err(TrafficError::Incomplete("starting a VM"));
        }
        Ok(id)
    };
    let vx = start(&mut sm, &mut f, hx, 0x0002_c903_00f0_0001)?;
    let vy = start(&mut sm, &mut f, hy, 0x0002_c903_00f0_0002)?;
    let (x, y) = (
        sm.vm(vx).cloned().ok_or(VmError::NoSuchVm(vx))?,
        sm.vm(vy).cloned().ok_or(VmError::NoSuchVm(vy))?,
    );
    let node = |n: usize| {
        f.node_by_guid(sm.nodes()[n].info.node_guid.0)
            .ok_or(TrafficError::Guest(
                "a hypervisor is not in the fabric".into(),
            ))
    };
    let (fx, fy, fz) = (node(hx)?, node(hy)?, node(hz)?);
    let mut wire = Wire {
        hubs: HashMap::new(),
        carried: Vec::new(),
    };
    // The backends forward their guests' SA queries to the SM's SA.
    let sm_sa = SmSa::new(&sm);
    for n in [fx, fy, fz] {
        let hub = Hub::new(SoftHca::new(f.topo.nodes[n].guid))
            .map_err(|e| TrafficError::Guest(e.to_string()))?;
        hub.backend().device_mut().set_uplink(true);
        hub.backend().set_sa_service(Box::new(sm_sa.clone()));
        wire.hubs.insert(n, hub);
    }
    let mut gx = guest(&wire.hubs[&fx], x.lid, x.guid)?;
    let mut gy = guest(&wire.hubs[&fy], y.lid, y.guid)?;
    let before_x = (gx.lid, gx.gid, gx.qp.qpn);
    // The peer finds X's path through the SA (served by its backend).
    let sa_before = gy
        .ctx
        .path_record_to(x.lid)
        .map_err(|e| TrafficError::Guest(e.to_string()))?;

    let before = rounds(&mut wire, &f, &mut gx, &mut gy, "before");
    let path_before = wire
        .carried
        .first()
        .map(|c| c.0.clone())
        .unwrap_or_default();

    // The VM moves: its guest leaves the source HCA and comes back on the
    // destination's with the same LID and vGUID.
    drop(gx);
    let mut gx = guest(&wire.hubs[&fz], x.lid, x.guid)?;
    // Before the SM has moved the routes, datagrams still go to the old place.
    let carried = wire.carried.len();
    let stale = exchange(
        &mut wire,
        &f,
        &mut gy,
        &mut gx,
        b"sent before the LFTs moved",
    );
    let stale_at = wire
        .carried
        .get(carried)
        .map(|c| c.0.clone())
        .unwrap_or_default();
    let (lx, _) = (gx.lid, ());
    let plan = sm.plan_migration(vx, hz)?;
    let smps = plan.smps();
    let switches = plan.switches.len();
    sm.apply_migration(&plan, false)?;
    if !f.run(&mut sm) {
        return Err(TrafficError::Incomplete("the migration"));
    }
    // Drain the datagram that was lost on the way.
    let mut wc = [Wc::default(); 4];
    let _ = gy.ctx.poll_cq(&mut gy.cq, &mut wc);
    let carried = wire.carried.len();
    let after = rounds(&mut wire, &f, &mut gx, &mut gy, "after");
    let path_after = wire
        .carried
        .get(carried)
        .map(|c| c.0.clone())
        .unwrap_or_default();
    let after_x = (gx.lid, gx.gid, gx.qp.qpn);
    sm_sa.refresh(&sm);
    let sa_after = gy
        .ctx
        .path_record_to(x.lid)
        .map_err(|e| TrafficError::Guest(e.to_string()))?;
    let gid_hex =
        |g: mad_core::types::Gid| g.0.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let name = |n: usize| f.topo.nodes[n].name.clone();
    Ok(TrafficReport {
        vm: VmView {
            lid: lx,
            gid: format!("{:016x}:{:016x}", after_x.1 .0, after_x.1 .1),
        },
        peer_lid: gy.lid,
        from: name(fx),
        to: name(fz),
        peer_on: name(fy),
        same_lid: before_x.0 == after_x.0,
        same_gid: before_x.1 == after_x.1,
        qpn_before: before_x.2,
        qpn_after: after_x.2,
        messages_before: before,
        messages_after: after,
        messages_each_phase: 8,
        delivered_before_lfts_moved: stale,
        stale_path: stale_at,
        path_before,
        path_after,
        sa_dgid_before: gid_hex(sa_before.dgid),
        sa_dgid_after: gid_hex(sa_after.dgid),
        sa_dlid_before: sa_before.dlid.0,
        sa_dlid_after: sa_after.dlid.0,
        sa_same_path: sa_before == sa_after,
        sm_sa_answered: sm_sa.answered(),
        migration_smps: smps,
        switches_touched: switches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_get_through_before_and_after_a_migration_and_not_in_between() {
        let t = demo("fat-tree-324", 2, LidPolicy::Prepopulated, Engine::FatTree).unwrap();
        assert!(t.good(), "{t:#?}");
        // Between the move and the LFT update the old routes lead to the
        // old hypervisor, where the VM no longer is.
        assert!(!t.delivered_before_lfts_moved, "{t:#?}");
        assert_eq!(t.stale_path.last(), t.path_before.last());
        assert_ne!(t.path_after.last(), t.path_before.last());
        let end = t.path_after.last().unwrap();
        assert!(end.starts_with(&t.to), "{t:#?}");
        // The peer's two PathRecord queries went to the SM's SA, which
        // named the VM by its LID and vGUID both times.
        assert_eq!(t.sm_sa_answered, 2, "{t:#?}");
        assert_eq!((t.sa_dlid_before, t.sa_dlid_after), (t.vm.lid, t.vm.lid));
        assert_eq!(t.sa_dgid_before, t.vm.gid.replace(':', ""), "{t:#?}");
    }
}
