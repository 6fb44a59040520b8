//! Traffic across a live migration: two VMs, each a vhca guest on the
//! software HCA of its hypervisor, exchange UD messages through the
//! simulated fabric (each datagram follows the LFTs ibkit's SM installed,
//! switch by switch); then one VM migrates to another hypervisor, the SM
//! rewrites only the LFT entries the vSwitch plan names, and the VM's
//! guest comes back on the destination's HCA with the same LID and the
//! same GID (its vGUID) — and the same messages get through again.

use fabric::sim::{Fabric, SimConfig, Walk};
use fabric::topology::Topology;
use mad_core::types::Lid;
use serde_json::{json, Value};
use smi::sm::{Engine, LidPolicy, Sm, SmConfig, VmId};
use std::collections::HashMap;
use std::sync::Arc;
use vhca::backend::{Limits, PortView};
use vhca::channel::{Direct, Hub};
use vhca::device::SoftHca;
use vhca::frontend::{Context, Cq, Mr, Qp, SendWr, Wc};
use vhca::layout::{op, status, GRH_LEN};
use vhca::proto::{access, QpType};
use vm_memory::GuestMemoryMmap;

type Soft = SoftHca<GuestMemoryMmap>;

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

fn guest(hub: &Arc<Hub<Soft>>, lid: u16, guid: u64) -> Result<Guest, String> {
    let e = |e: vhca::frontend::Error| e.to_string();
    let port = PortView {
        lid,
        port_guid: guid,
        state: 4,
    };
    let (t, mem, lay) = hub
        .attach(4 << 20, Limits::default(), port)
        .map_err(|e| e.to_string())?;
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
) -> Result<Value, String> {
    let topo = Topology::from_spec(topology).map_err(|e| e.to_string())?;
    let mut f = Fabric::new(
        topo,
        SimConfig {
            vfs: vfs.max(1),
            ..SimConfig::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mut sm = Sm::new(SmConfig {
        routing,
        lid_policy: policy,
        ..SmConfig::default()
    });
    if !f.bring_up(&mut sm) {
        return Err("traffic demo: the subnet did not come up".into());
    }
    let hyps = sm.hypervisors();
    if hyps.len() < 3 {
        return Err("traffic demo: needs three hypervisors".into());
    }
    let (hx, hy, hz) = (hyps[0], hyps[hyps.len() - 1], hyps[hyps.len() / 2]);
    let start = |sm: &mut Sm, f: &mut Fabric, h, guid| -> Result<VmId, String> {
        let id = sm.create_vm(h, guid).map_err(|e| e.to_string())?;
        if !f.run(sm) {
            return Err("starting a VM did not complete".into());
        }
        Ok(id)
    };
    let vx = start(&mut sm, &mut f, hx, 0x0002_c903_00f0_0001)?;
    let vy = start(&mut sm, &mut f, hy, 0x0002_c903_00f0_0002)?;
    let (x, y) = (
        sm.vm(vx).cloned().ok_or("VM vanished")?,
        sm.vm(vy).cloned().ok_or("VM vanished")?,
    );
    let node = |n: usize| {
        f.node_by_guid(sm.nodes()[n].info.node_guid.0)
            .ok_or_else(|| "hypervisor not in the fabric".to_string())
    };
    let (fx, fy, fz) = (node(hx)?, node(hy)?, node(hz)?);
    let mut wire = Wire {
        hubs: HashMap::new(),
        carried: Vec::new(),
    };
    // The SA the backends answer guests from: every VM with its LID and
    // vGUID, as the SM assigned them.
    let sa = |sm: &Sm| vhca::mgmt::Sa {
        records: sm
            .vms()
            .map(|(_, v)| vhca::mgmt::SaRecord {
                lid: v.lid,
                port_guid: v.guid,
                node_guid: sm.nodes()[v.hypervisor].info.node_guid.0,
                subnet_prefix: 0xfe80_0000_0000_0000,
                node_type: 1,
            })
            .collect(),
    };
    for n in [fx, fy, fz] {
        let hub = Hub::new(SoftHca::new(f.topo.nodes[n].guid)).map_err(|e| e.to_string())?;
        hub.backend().device_mut().set_uplink(true);
        hub.backend().set_sa(sa(&sm));
        wire.hubs.insert(n, hub);
    }
    let mut gx = guest(&wire.hubs[&fx], x.lid, x.guid)?;
    let mut gy = guest(&wire.hubs[&fy], y.lid, y.guid)?;
    let before_x = (gx.lid, gx.gid, gx.qp.qpn);
    // The peer finds X's path through the SA (served by its backend).
    let sa_before = gy.ctx.path_to(x.lid).map_err(|e| e.to_string())?;

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
    let plan = sm.plan_migration(vx, hz).map_err(|e| e.to_string())?;
    let smps = plan.smps();
    let switches = plan.switches.len();
    sm.apply_migration(&plan, false)
        .map_err(|e| e.to_string())?;
    if !f.run(&mut sm) {
        return Err("the migration did not complete".into());
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
    for h in wire.hubs.values() {
        h.backend().set_sa(sa(&sm));
    }
    let sa_after = gy.ctx.path_to(x.lid).map_err(|e| e.to_string())?;
    let gid_hex = |g: [u8; 16]| g.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let name = |n: usize| f.topo.nodes[n].name.clone();
    Ok(json!({
        "vm": {"lid": lx, "gid": format!("{:016x}:{:016x}", after_x.1.0, after_x.1.1)},
        "peer_lid": gy.lid,
        "from": name(fx),
        "to": name(fz),
        "peer_on": name(fy),
        "same_lid": before_x.0 == after_x.0,
        "same_gid": before_x.1 == after_x.1,
        "qpn_before": before_x.2,
        "qpn_after": after_x.2,
        "messages_before": before,
        "messages_after": after,
        "messages_each_phase": 8,
        "delivered_before_lfts_moved": stale,
        "stale_path": stale_at,
        "path_before": path_before,
        "path_after": path_after,
        "sa_dgid_before": gid_hex(sa_before.0),
        "sa_dgid_after": gid_hex(sa_after.0),
        "sa_same_path": sa_before == sa_after,
        "migration_smps": smps,
        "switches_touched": switches,
    }))
}

/// Prints the demonstration's report.
pub fn print(t: &Value) {
    println!(
        "Traffic across a migration: VM LID {} (GID {}) on {} exchanges UD messages over vhca with VM LID {} on {}",
        t["vm"]["lid"], t["vm"]["gid"].as_str().unwrap_or(""), t["from"].as_str().unwrap_or(""), t["peer_lid"], t["peer_on"].as_str().unwrap_or("")
    );
    let path = |k: &str| {
        t[k].as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" → ")
            })
            .unwrap_or_default()
    };
    println!(
        "  before: {}/{} delivered, path {}",
        t["messages_before"],
        t["messages_each_phase"],
        path("path_before")
    );
    println!(
        "  moved to {}; a datagram sent before the SM moved the routes: {} (it went {})",
        t["to"].as_str().unwrap_or(""),
        if t["delivered_before_lfts_moved"].as_bool() == Some(true) {
            "delivered"
        } else {
            "lost, as UD is"
        },
        path("stale_path")
    );
    println!(
        "  the SM moved them with {} SMPs on {} switches; after: {}/{} delivered, path {}",
        t["migration_smps"],
        t["switches_touched"],
        t["messages_after"],
        t["messages_each_phase"],
        path("path_after")
    );
    println!(
        "  same LID: {}, same GID: {}; QP number {} → {} (QP numbers belong to the HCA; the peer learns the new one)",
        t["same_lid"], t["same_gid"], t["qpn_before"], t["qpn_after"]
    );
    println!(
        "  the peer's PathRecord query through its backend's SA: DGID {} before, {} after",
        t["sa_dgid_before"].as_str().unwrap_or(""),
        t["sa_dgid_after"].as_str().unwrap_or("")
    );
}

/// True when every message got through in both phases with the same
/// LID and GID.
pub fn good(t: &Value) -> bool {
    t["messages_before"] == t["messages_each_phase"]
        && t["messages_after"] == t["messages_each_phase"]
        && t["same_lid"] == json!(true)
        && t["same_gid"] == json!(true)
        && t["sa_same_path"] == json!(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_get_through_before_and_after_a_migration_and_not_in_between() {
        let t = demo("fat-tree-324", 2, LidPolicy::Prepopulated, Engine::FatTree).unwrap();
        assert!(good(&t), "{t:#}");
        // Between the move and the LFT update the old routes lead to the
        // old hypervisor, where the VM no longer is.
        assert_eq!(t["delivered_before_lfts_moved"], json!(false), "{t:#}");
        let last = |k: &str| t[k].as_array().and_then(|a| a.last()).cloned();
        assert_eq!(last("stale_path"), last("path_before"));
        assert_ne!(last("path_after"), last("path_before"));
        let end = last("path_after").unwrap();
        assert!(
            end.as_str().unwrap().starts_with(t["to"].as_str().unwrap()),
            "{t:#}"
        );
    }
}
