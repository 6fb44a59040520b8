//! LID assignment: every reachable node without a LID gets one (a VF's
//! too, under the prepopulated policy), nodes that come back keep theirs,
//! and the switches' LinearFDBTop follows the highest LID.

use super::*;

impl Sm {
    /// Gives a LID to every reachable node that has none (at bring-up: all
    /// of them), and sets it again on nodes that came back (`fresh`), so
    /// that a node keeps its LID across a reboot.
    pub(super) fn assign_lids(&mut self) {
        let prepopulated = self.cfg.lid_policy == LidPolicy::Prepopulated;
        let reached = |n: &SmNode| {
            n.is_switch()
                || n.ports
                    .get(usize::from(n.info.local_port_num))
                    .and_then(|p| p.info)
                    .is_some()
        };
        // After a takeover: a port found without a LID (reset while this
        // SM stood by) or out of reach until now gets the one its standby
        // discovery saw, if free.
        if !self.known.is_empty() {
            for i in 0..self.db.nodes().len() {
                let n = &self.db.nodes()[i];
                if !n.alive || !reached(n) || n.lid != 0 {
                    continue;
                }
                let Some(&l) = self.known.get(&n.info.port_guid.0) else {
                    continue;
                };
                let count = 1u16 << self.db.lmc_of(i);
                if Lid(l).is_unicast() && l % count == 0 && self.db.lids_free(l, count) {
                    self.db.set_lid(i, l);
                    self.db.max_lid = self.db.max_lid.max(l + (count - 1));
                }
            }
        }
        let mut needed: u32 = 0;
        for (i, n) in self.db.nodes().iter().enumerate() {
            if !n.alive || !reached(n) {
                continue;
            }
            if n.lid == 0 {
                needed += 1u32 << self.db.lmc_of(i);
            }
            if prepopulated && !n.is_switch() {
                needed += n.vfs.iter().filter(|v| v.lid == 0).count() as u32;
            }
        }
        let available = u32::from(Lid::UNICAST_MAX.0);
        if u32::from(self.db.max_lid) + needed > available {
            self.error = Some(SmError::LidSpaceExhausted {
                needed: u32::from(self.db.max_lid) + needed,
                available,
            });
            self.phase = Phase::Failed;
            return;
        }
        // VFs first that a `vf2lid` cache gives a LID no port holds; the
        // others then take the lowest LIDs left above the highest given
        // before, so the LIDs used stay as many as without the cache.
        let start = self.db.max_lid;
        if prepopulated && !self.preferred_vfs.is_empty() {
            for i in 0..self.db.nodes().len() {
                let n = &self.db.nodes()[i];
                if !n.alive
                    || !reached(n)
                    || !n.is_hypervisor()
                    || (n.lid != 0 && !n.fresh && self.up)
                {
                    continue;
                }
                let guid = n.info.port_guid.0;
                for vf in 1..=n.vfs.len() as u16 {
                    let s = self.db.nodes()[i].vfs[usize::from(vf) - 1];
                    let Some(&l) = self.preferred_vfs.get(&(guid, vf)) else {
                        continue;
                    };
                    if s.lid == 0 && Lid(l).is_unicast() && self.db.by_lid(Lid(l)).is_none() {
                        self.db.set_vf(i, vf, l, s.vm, s.guid);
                        self.db.max_lid = self.db.max_lid.max(l);
                    }
                }
            }
        }
        let mut next: u16 = start + 1;
        let skip_held = |sm: &Sm, mut l: u16| {
            while l <= Lid::UNICAST_MAX.0 && sm.db.by_lid(Lid(l)).is_some() {
                l += 1;
            }
            l
        };
        // The first LID from `l` on of `count` free LIDs (a power of
        // two) that start at a multiple of `count`, as LMC needs; `None`
        // past the unicast space.
        let free_range = |sm: &Sm, mut l: u32, count: u32| loop {
            l = (l + count - 1) & !(count - 1);
            if l + count - 1 > u32::from(Lid::UNICAST_MAX.0) {
                return None;
            }
            if sm.db.lids_free(l as u16, count as u16) {
                return Some(l as u16);
            }
            l += count;
        };
        let mut sets = Vec::new();
        let mut vports = Vec::new();
        for i in 0..self.db.nodes().len() {
            let n = &self.db.nodes()[i];
            // At bring-up a node that holds a LID already (a standby taking
            // over keeps what it finds) is set again all the same: its
            // PortInfo names the new master.
            if !n.alive || !reached(n) || (n.lid != 0 && !n.fresh && self.up) {
                continue;
            }
            let port = n.end_port();
            if n.lid == 0 {
                let count = 1u32 << self.db.lmc_of(i);
                let Some(base) = free_range(self, u32::from(next), count) else {
                    self.error = Some(SmError::LidSpaceExhausted {
                        needed: u32::from(self.db.max_lid) + needed,
                        available,
                    });
                    self.phase = Phase::Failed;
                    return;
                };
                self.db.set_lid(i, base);
                self.db.max_lid = self.db.max_lid.max(base + (count as u16 - 1));
                next = base + count as u16;
            }
            if prepopulated {
                for vf in 1..=self.db.nodes()[i].vfs.len() as u16 {
                    let s = self.db.nodes()[i].vfs[usize::from(vf) - 1];
                    if s.lid == 0 {
                        next = skip_held(self, next);
                        self.db.set_vf(i, vf, next, s.vm, s.guid);
                        next += 1;
                    }
                }
            }
            let n = &self.db.nodes()[i];
            sets.push((i, port));
            for (v, slot) in n.vfs.iter().enumerate() {
                if slot.lid != 0 {
                    vports.push((i, v as u16 + 1));
                }
            }
        }
        self.db.max_lid = self.db.max_lid.max(next - 1);
        if !sets.is_empty() {
            self.emit(SmEvent::LidsChanged { ports: sets.len() });
        }
        let master = self.sm_lid();
        for (i, port) in sets {
            let n = &self.db.nodes()[i];
            let Some(mut pi) = n.ports[usize::from(port)].info else {
                continue;
            };
            // The hosts' SA state is not this SM's to trust: at bring-up
            // (start or takeover), for a node new or back (`fresh`), or a
            // port that names another master, as OpenSM's LID manager
            // asks (first master sweep, a new port, another SM LID).
            pi.client_reregister = !self.cfg.no_clients_rereg
                && (pi.capability_mask)
                    .contains(CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED)
                && (!self.up || n.fresh || pi.master_sm_lid != master);
            pi.lid = Lid(n.lid);
            pi.lmc = self.db.lmc_of(i);
            pi.master_sm_lid = master;
            // The SL to reach the master on (OpenSM's sm_sl), whatever an
            // earlier master left there.
            pi.master_sm_sl = self.cfg.link.sm_sl.min(15);
            // The subnet prefix, as OpenSM's LID manager sets it: the
            // port's GID (and so every PathRecord's and MCMemberRecord's)
            // is the prefix (fe80::/64 by default) + its GUID, not ::/64.
            pi.gid_prefix = mad_core::field::GidPrefix(self.cfg.subnet_prefix);
            self.stamp_m_key(i, port, &mut pi);
            pi.subnet_time_out = self.cfg.subnet_time_out;
            pi.port_state = PortState::NoChange;
            pi.port_physical_state = PortPhysicalState::NoChange;
            link::ForcedLink::default().apply(&mut pi);
            self.set_node(i, &pi, u32::from(port), Purpose::SetLid { node: i, port });
        }
        for (i, vf) in vports {
            if self.up {
                self.set_vport_as_held(i, vf);
            } else {
                // At bring-up, with the links made Active: a hypervisor
                // reset before its switch's PortStateChange is cleared
                // (with the tables, after this) would lose them unseen.
                self.vports_unknown.insert(i);
            }
        }
    }

    /// LinearFDBTop for a highest LID: the end of its 64-LID block, so
    /// LIDs added later in the same block need no SwitchInfo update.
    pub(super) fn top_for(&self, lid: u16) -> u16 {
        (lid | 63).min(Lid::UNICAST_MAX.0)
    }
}
