//! `ibkit bench opensm`'s runs: the same fabric brought up by OpenSM
//! (Debian's `opensm` on Debian's `ibsim` through `libumad2sim.so`), by
//! ibkit's SM on that same ibsim, and by ibkit's SM on ibkit's simulator,
//! in one run, with the ratios. The report derives its JSON.

use crate::peers::{
    run_ibkit_on_ibsim, run_ibkit_with, run_opensm_with, IbkitRun, Ibsim, OpenSmRun, Policy,
};
use fabric::topology::Topology;
use serde::Serialize;
use smi::sm::Engine;
use std::path::Path;

/// ibkit's SM on ibsim.
#[derive(Clone, Debug, Serialize)]
pub struct OnIbsim {
    /// SMPs ibkit's SM counted.
    pub smps: u64,
    /// Replies ibsim counted.
    pub ibsim_replies: u64,
    /// Milliseconds to the subnet up.
    pub to_up_ms: f64,
}

/// ibkit against OpenSM.
#[derive(Clone, Debug, Serialize)]
pub struct Ratios {
    /// ibkit's SMPs over OpenSM's (below 1: fewer).
    pub smps: f64,
    /// OpenSM's route computation time over ibkit's.
    pub routing_speedup: f64,
}

/// The three bring-ups of one fabric.
#[derive(Clone, Debug, Serialize)]
pub struct OpensmBench {
    /// The topology spec.
    pub topology: String,
    /// The routing engine of both SMs.
    pub routing: &'static str,
    /// The partition configuration both SMs applied, if any.
    pub partitions: Option<String>,
    /// Both SMs applied QoS (OpenSM's defaults).
    pub qos: bool,
    /// The CA ports' LMC.
    pub lmc: u8,
    /// Whether switches with an enhanced port 0 took the LMC too.
    pub lmc_esp0: bool,
    /// OpenSM on ibsim.
    pub opensm: OpenSmRun,
    /// ibkit's SM on its simulator.
    pub ibkit: IbkitRun,
    /// ibkit's SM on ibsim.
    pub ibkit_on_ibsim: OnIbsim,
    /// The ratios.
    pub ratios: Ratios,
    /// The join workload, when asked for.
    pub joins: Option<JoinBench>,
}

/// `a / b`, NaN when `b` is not positive.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// Runs the three on `spec` (`exe` is the `ibkit` binary, for `ibkit sm`
/// on ibsim); `progress` hears each start.
pub fn opensm_vs_ibkit(
    exe: &Path,
    spec: &str,
    routing: Engine,
    policy: &Policy,
    progress: &mut dyn FnMut(&str),
) -> Result<OpensmBench, String> {
    let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("ibkit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    progress(&format!("OpenSM on ibsim: {spec}, {routing:?}…"));
    let o = Ibsim::start(&topo, &dir).and_then(|sim| run_opensm_with(&sim, routing, &dir, policy));
    progress("ibkit's SM on the same ibsim…");
    let u = run_ibkit_on_ibsim(exe, &topo, routing, &dir, policy);
    let _ = std::fs::remove_dir_all(&dir);
    let (opensm, (smps, ibsim_replies, to_up_ms)) = (o?, u?);
    progress("ibkit on its simulator…");
    let ibkit = run_ibkit_with(topo, routing, policy)?;
    Ok(OpensmBench {
        topology: spec.to_string(),
        routing: routing.name(),
        partitions: (policy.partitions.as_ref()).map(|p| p.display().to_string()),
        qos: policy.qos,
        lmc: policy.lmc,
        lmc_esp0: policy.lmc_esp0,
        ratios: Ratios {
            smps: ratio(ibkit.smps as f64, opensm.smps as f64),
            routing_speedup: ratio(opensm.routing_ms, ibkit.routing_ms),
        },
        opensm,
        ibkit,
        ibkit_on_ibsim: OnIbsim {
            smps,
            ibsim_replies,
            to_up_ms,
        },
        joins: None,
    })
}

impl OpensmBench {
    /// What went wrong, in one line: an SM that did not bring the
    /// subnet up, or ibkit's SM needing more SMPs than OpenSM.
    pub fn failure(&self) -> Option<String> {
        let (o, k, u, spec) = (
            &self.opensm,
            &self.ibkit,
            &self.ibkit_on_ibsim,
            &self.topology,
        );
        if !o.up {
            Some(format!("OpenSM did not reach SUBNET UP on ibsim ({spec})"))
        } else if !k.ok {
            Some(format!(
                "ibkit's SM did not bring {spec} up verified on its simulator"
            ))
        } else if k.smps > o.smps {
            Some(format!(
                "ibkit's SM sent more SMPs than OpenSM on {spec}: {} > {}",
                k.smps, o.smps
            ))
        } else if u.ibsim_replies > o.smps {
            Some(format!(
                "ibkit's SM on ibsim needed more SMPs than OpenSM on {spec}: {} > {}",
                u.ibsim_replies, o.smps
            ))
        } else {
            self.joins.as_ref().and_then(JoinBench::failure)
        }
    }
}

/// The MGID of the default partition's IPoIB broadcast group, which both
/// SMs hold from the start and the joins of the workload join.
pub const IPOIB_BROADCAST: &str = "ff12:401b:ffff::ffff:ffff";

/// SMPs a workload of joins cost: hosts join the IPoIB broadcast group
/// one after another, each once the SM has finished with the one before.
#[derive(Clone, Debug, Serialize)]
pub struct JoinBench {
    /// The hosts that joined, in order (node names).
    pub hosts: Vec<String>,
    /// OpenSM on ibsim: ibsim's replies after each join.
    pub opensm: Vec<u64>,
    /// ibkit's SM on ibsim: ibsim's replies after each join.
    pub ibkit_on_ibsim: Vec<u64>,
    /// ibkit's SM on its simulator: SMPs after each join.
    pub ibkit: Vec<u64>,
    /// Of those, Set(MulticastForwardingTable).
    pub ibkit_mft_sets: u64,
    /// Of those, Set(SwitchInfo) (MulticastFDBTop).
    pub ibkit_switch_info_sets: u64,
    /// On ibkit's simulator, a packet flooded from each member after each
    /// join reached every other member once and nobody else.
    pub ibkit_reached: bool,
}

impl JoinBench {
    /// What went wrong, in one line.
    pub fn failure(&self) -> Option<String> {
        let sum = |v: &[u64]| v.iter().sum::<u64>();
        if !self.ibkit_reached {
            Some("on ibkit's simulator a multicast packet did not reach exactly the members".into())
        } else if sum(&self.ibkit_on_ibsim) > sum(&self.opensm) {
            Some(format!(
                "ibkit's SM spent more SMPs on the joins than OpenSM on ibsim: {} > {}",
                sum(&self.ibkit_on_ibsim),
                sum(&self.opensm)
            ))
        } else {
            None
        }
    }
}

/// `n` hosts of `topo` spread over its CAs, the first CA (where both SMs
/// run) left out.
pub fn join_hosts(topo: &Topology, n: usize) -> Result<Vec<usize>, String> {
    let cas: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].kind == mad_core::attr::NodeType::ChannelAdapter)
        .skip(1)
        .collect();
    if n == 0 || n > cas.len() {
        return Err(format!(
            "--joins {n}: the fabric has {} hosts besides the SM's",
            cas.len()
        ));
    }
    Ok((0..n).map(|k| cas[k * cas.len() / n]).collect())
}

/// Waits until `sim` has answered nothing new for half a second (at most
/// 30 s); what it has answered.
fn settled(sim: &dyn crate::peers::Simulator) -> u64 {
    let t = std::time::Instant::now();
    let mut last = sim.answered().unwrap_or(0);
    let mut quiet = 0;
    while quiet < 5 && t.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = sim.answered().unwrap_or(0);
        if now == last {
            quiet += 1;
        } else {
            (last, quiet) = (now, 0);
        }
    }
    last
}

/// The joins against an SM already running on `sim`: ibsim's replies
/// for each.
fn joins_on(
    exe: &Path,
    sim: &dyn crate::peers::Simulator,
    topo: &Topology,
    hosts: &[usize],
) -> Result<Vec<u64>, String> {
    let mut before = settled(sim);
    let mut out = Vec::new();
    for &h in hosts {
        let name = &topo.nodes[h].name;
        let r = sim
            .client_at(exe.as_os_str(), name)
            .args(["sa", "mcmember", "--join", IPOIB_BROADCAST])
            .output()
            .map_err(|e| format!("ibkit sa: {e}"))?;
        if !r.status.success() {
            return Err(format!(
                "{name} could not join {IPOIB_BROADCAST}: {}",
                String::from_utf8_lossy(&r.stderr).trim()
            ));
        }
        let now = settled(sim);
        out.push(now - before);
        before = now;
    }
    Ok(out)
}

/// The join workload: `n` hosts join the IPoIB broadcast group, through
/// OpenSM's SA and through ibkit's on ibsim (each SM a daemon, periodic
/// sweeps off so that only the joins cost SMPs), and on ibkit's
/// simulator in process, where the trees are walked after each join.
pub fn join_workload(
    exe: &Path,
    spec: &str,
    policy: &Policy,
    n: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<JoinBench, String> {
    use crate::peers::{start_ibkit_sm, start_opensm_with};
    let topo = Topology::from_spec(spec).map_err(|e| e.to_string())?;
    let hosts = join_hosts(&topo, n)?;
    let dir = std::env::temp_dir().join(format!("ibkit-joins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let wait = std::time::Duration::from_secs(60);
    let strings = |a: Vec<std::ffi::OsString>| -> Vec<String> {
        a.into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect()
    };
    progress(&format!("{n} joins through OpenSM's SA on ibsim…"));
    let mut args = strings(policy.opensm_args(&dir)?);
    args.extend(["-s".to_string(), "0".to_string()]);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let opensm = Ibsim::start(&topo, &dir).and_then(|sim| {
        let sm = start_opensm_with(&sim, &dir, wait, &args)?;
        let r = joins_on(exe, &sim, &topo, &hosts);
        drop(sm);
        r
    });
    progress(&format!("{n} joins through ibkit's SA on ibsim…"));
    let mut args = strings(policy.ibkit_args());
    args.extend(["--sweep-ms".to_string(), "3600000".to_string()]);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let ours = Ibsim::start(&topo, &dir).and_then(|sim| {
        let sm = start_ibkit_sm(exe, &sim, &args, wait)?;
        let r = joins_on(exe, &sim, &topo, &hosts);
        let (clean, said) = sm.stop(std::time::Duration::from_secs(10));
        if !clean {
            return Err(format!("ibkit sm did not stop cleanly: {said}"));
        }
        r
    });
    let _ = std::fs::remove_dir_all(&dir);
    let (opensm, ibkit_on_ibsim) = (opensm?, ours?);
    progress(&format!("{n} joins on ibkit's simulator…"));
    let own = joins_in_process(topo, policy, &hosts)?;
    Ok(JoinBench {
        hosts: hosts.iter().map(|&h| own.names[h].clone()).collect(),
        opensm,
        ibkit_on_ibsim,
        ibkit: own.per_join,
        ibkit_mft_sets: own.mft_sets,
        ibkit_switch_info_sets: own.switch_info_sets,
        ibkit_reached: own.reached,
    })
}

struct OwnJoins {
    names: Vec<String>,
    per_join: Vec<u64>,
    mft_sets: u64,
    switch_info_sets: u64,
    reached: bool,
}

/// The joins on ibkit's simulator: the SA answers each join, the SM
/// programs the tree, and a packet is flooded from each member.
fn joins_in_process(topo: Topology, policy: &Policy, hosts: &[usize]) -> Result<OwnJoins, String> {
    use fabric::sim::{Fabric, SimConfig};
    use mad_core::attr::AttributeId;
    use mad_core::sa::mcmember::join_state::FULL;
    use mad_core::sa::{McMemberRecord, SaMad, SaRecord, SaStatus};
    use mad_core::{Gid, Guid, Lid, Method};
    use smi::sm::{Sm, SmConfig};
    let names = topo.nodes.iter().map(|n| n.name.clone()).collect();
    let mut f = Fabric::new(topo, SimConfig::default()).map_err(|e| e.to_string())?;
    let mut sm = Sm::new(policy.sm_config(SmConfig::default()));
    policy.apply(&mut sm)?;
    if !f.bring_up(&mut sm) {
        return Err("ibkit's SM did not bring the fabric up".into());
    }
    let mut sa = sa::Sa::new(sa::SaConfig {
        rmpp_acks: false,
        ..sa::SaConfig::default()
    });
    let mgid: Gid = IPOIB_BROADCAST
        .parse::<std::net::Ipv6Addr>()
        .map(|a| Gid(a.octets()))
        .map_err(|e| e.to_string())?;
    let sets = |sm: &Sm, a: AttributeId| sm.stats().count(Method::Set, a);
    let (mft0, si0) = (
        sets(&sm, AttributeId::MulticastForwardingTable),
        sets(&sm, AttributeId::SwitchInfo),
    );
    let mut per_join = Vec::new();
    let mut joined: Vec<usize> = Vec::new();
    let mut reached = true;
    for &h in hosts {
        let before = sm.stats().total();
        let from = sa::Addr {
            lid: f.nodes[h].lid(),
            qpn: 1,
        };
        let rec = McMemberRecord {
            mgid,
            port_gid: Gid::new(Gid::DEFAULT_PREFIX, Guid(f.topo.nodes[h].guid + 1)),
            join_state: FULL,
            ..McMemberRecord::default()
        };
        let mut m = SaMad::request(Method::Set, McMemberRecord::ID, 0x10 + h as u64);
        m.set_record(&rec).map_err(|e| format!("{e:?}"))?;
        m.sa.component_mask = ["mgid", "port_gid", "join_state"]
            .iter()
            .filter_map(|c| McMemberRecord::component(c))
            .fold(0, |a, b| a | b);
        sa.handle_mad(sm.subnet(), from, &m.to_bytes(), 0)
            .map_err(|e| format!("{e:?}"))?;
        let answers: Vec<_> = std::iter::from_fn(|| sa.poll_transmit()).collect();
        let ok = answers
            .first()
            .and_then(|t| SaMad::parse(&t.mad).ok())
            .is_some_and(|a| a.sa_status() == SaStatus::Ok);
        if !ok {
            return Err(format!(
                "{} could not join {IPOIB_BROADCAST} on ibkit's simulator",
                f.topo.nodes[h].name
            ));
        }
        for (mlid, members) in sa.take_group_changes(sm.subnet()) {
            sm.set_multicast_group(mlid, &members)
                .map_err(|e| e.to_string())?;
        }
        if !f.run(&mut sm) {
            return Err("ibkit's SM did not finish programming a join".into());
        }
        per_join.push(sm.stats().total() - before);
        joined.push(h);
        let mlid = sa
            .groups()
            .iter()
            .find(|g| g.rec.mgid == mgid)
            .map_or(Lid(0), |g| g.rec.mlid);
        if joined.len() > 1 {
            for &a in &joined {
                let w = f.multicast_walk(a, mlid);
                let want: Vec<usize> = joined.iter().copied().filter(|&x| x != a).collect();
                let mut want = want;
                want.sort_unstable();
                let got: Vec<usize> = w.nodes().into_iter().collect();
                reached &= got == want && w.delivered.values().all(|&c| c == 1) && !w.looped;
            }
        }
    }
    Ok(OwnJoins {
        names,
        per_join,
        mft_sets: sets(&sm, AttributeId::MulticastForwardingTable) - mft0,
        switch_info_sets: sets(&sm, AttributeId::SwitchInfo) - si0,
        reached,
    })
}
