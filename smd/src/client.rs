//! A host's side of the SA: a class-0x03 agent on a umad port that asks
//! the SM's SA (at the SM LID its port knows) and matches the answers by
//! transaction ID. [`SaClient::load`] is `ibkit bench sa`'s load
//! generator: it keeps a window of SubnAdmGet(PathRecord) queries
//! outstanding for a while and measures what comes back.

use crate::{check_simulator, open_bounded, SmdError};
use mad_core::mad::Method;
use mad_core::sa::path::comp;
use mad_core::sa::{PathRecord, SaMad, SaRecord};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use verbs_sys::umad::{Agent, Dest, UmadPort, GSI_QKEY};

/// Where the PathRecord's SLID and DLID sit in the MAD: the SA data starts
/// at byte 56, and they are bytes 42 and 40 of the record.
const SLID_AT: usize = 56 + 42;
const DLID_AT: usize = 56 + 40;

/// A query not answered in this long is counted lost.
const LOST_AFTER: Duration = Duration::from_secs(1);

/// A port of a host with an SA agent.
pub struct SaClient {
    port: UmadPort,
    agent: Agent,
    /// The SM's LID, from the port.
    pub sm_lid: u16,
    /// This port's LID.
    pub lid: u16,
    next_tid: u32,
}

/// What one [`SaClient::load`] run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LoadRun {
    /// Queries kept outstanding.
    pub window: usize,
    /// Queries sent.
    pub sent: u64,
    /// Answered with status 0 and the pair asked.
    pub answered: u64,
    /// Answered with another status, or another pair.
    pub refused: u64,
    /// Not answered within a second.
    pub lost: u64,
    /// Seconds from the first send to the last answer.
    pub seconds: f64,
    /// Answers a second.
    pub per_second: f64,
    /// Median latency, µs (send to answer, in this process).
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
}

impl SaClient {
    /// Opens port `port` (0: the first active) of CA `ca` (`None`: the
    /// first) with an SA agent (class version 2, no kernel RMPP).
    pub fn open(ca: Option<String>, port: u8) -> Result<SaClient, SmdError> {
        check_simulator()?;
        let mut port = open_bounded(ca, port, Duration::from_secs(20))?;
        let agent = port.register(0x03, sa::SA_CLASS_VERSION, &[])?;
        let (sm_lid, lid) = (port.attr().sm_lid, port.attr().lid);
        Ok(SaClient {
            port,
            agent,
            sm_lid,
            lid,
            next_tid: 1,
        })
    }

    fn send(&mut self, mad: &[u8]) -> Result<(), SmdError> {
        let to = Dest {
            lid: self.sm_lid,
            qpn: 1,
            qkey: GSI_QKEY,
            sl: 0,
        };
        Ok(self.port.send_to(self.agent, mad, to, 0, 0)?)
    }

    /// Keeps `window` SubnAdmGet(PathRecord) queries (SLID this port,
    /// DLID each of `dlids` in turn) outstanding for `seconds`, then waits
    /// for the last answers; each answer is checked (status 0, the pair
    /// asked) and timed.
    pub fn load(
        &mut self,
        dlids: &[u16],
        window: usize,
        seconds: f64,
    ) -> Result<LoadRun, SmdError> {
        if dlids.is_empty() || window == 0 {
            return Err(SmdError::Umad(verbs_sys::Error::BadArgument(
                "a load needs destinations and a window of at least 1".into(),
            )));
        }
        let mut q = SaMad::request(Method::Get, PathRecord::ID, 0);
        q.sa.component_mask = comp::SLID | comp::DLID;
        let mut mad = q.to_bytes();
        mad[SLID_AT..SLID_AT + 2].copy_from_slice(&self.lid.to_be_bytes());
        let mut out: HashMap<u32, (Instant, u16)> = HashMap::with_capacity(window * 2);
        let mut lat: Vec<u32> = Vec::new();
        let mut run = LoadRun {
            window,
            ..LoadRun::default()
        };
        let t0 = Instant::now();
        let stop_sending = t0 + Duration::from_secs_f64(seconds.max(0.0));
        let mut k = 0usize;
        let mut last = t0;
        loop {
            let now = Instant::now();
            if now < stop_sending {
                while out.len() < window {
                    let tid = self.next_tid;
                    self.next_tid = self.next_tid.wrapping_add(1).max(1);
                    let d = dlids[k % dlids.len()];
                    k += 1;
                    mad[12..16].copy_from_slice(&tid.to_be_bytes());
                    mad[DLID_AT..DLID_AT + 2].copy_from_slice(&d.to_be_bytes());
                    self.send(&mad)?;
                    out.insert(tid, (Instant::now(), d));
                    run.sent += 1;
                }
            } else if out.is_empty() {
                break;
            }
            match self.port.recv(50)? {
                Some(r) if r.agent == self.agent && r.mad.len() >= 256 => {
                    let tid = u32::from_be_bytes([r.mad[12], r.mad[13], r.mad[14], r.mad[15]]);
                    if let Some((sent, d)) = out.remove(&tid) {
                        let at = Instant::now();
                        last = at;
                        let ok = r.mad[4..6] == [0, 0]
                            && r.mad[DLID_AT..DLID_AT + 2] == d.to_be_bytes()
                            && r.mad[SLID_AT..SLID_AT + 2] == self.lid.to_be_bytes();
                        if ok {
                            run.answered += 1;
                            lat.push((at - sent).as_nanos().min(u128::from(u32::MAX)) as u32);
                        } else {
                            run.refused += 1;
                        }
                    }
                }
                _ => {}
            }
            let now = Instant::now();
            let before = out.len();
            out.retain(|_, (sent, _)| now.duration_since(*sent) < LOST_AFTER);
            run.lost += (before - out.len()) as u64;
        }
        run.seconds = last.duration_since(t0).as_secs_f64();
        run.per_second = if run.seconds > 0.0 {
            run.answered as f64 / run.seconds
        } else {
            0.0
        };
        lat.sort_unstable();
        let pct = |p: f64| {
            lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
                .map_or(0.0, |&ns| f64::from(ns) / 1e3)
        };
        run.p50_us = pct(0.50);
        run.p99_us = pct(0.99);
        Ok(run)
    }
}
