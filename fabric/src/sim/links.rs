//! Cables and the event queue: loss, hop delays, the directed-route and
//! LID-routed crossings, and the simulated clock's queue.

use super::*;

impl Fabric {
    pub(super) fn lost(&mut self) -> bool {
        if self.cfg.loss <= 0.0 {
            return false;
        }
        self.rng.unit_f64() < self.cfg.loss
    }

    /// Puts a directed-route `smp` on the cable of (node, port).
    pub(super) fn transmit(&mut self, node: usize, port: u8, smp: Smp) {
        self.transmit_lrh(node, port, smp, 0xFFFF, 0xFFFF);
    }

    /// Puts `smp` with LRH (dlid, slid) on the cable of (node, port).
    pub(super) fn transmit_lrh(&mut self, node: usize, port: u8, smp: Smp, dlid: u16, slid: u16) {
        self.transmit_hops(node, port, smp, dlid, slid, 0);
    }

    /// [`Fabric::transmit_lrh`] for a packet that has passed `hops`
    /// switches already.
    pub(super) fn transmit_hops(
        &mut self,
        node: usize,
        port: u8,
        smp: Smp,
        dlid: u16,
        slid: u16,
        hops: u8,
    ) {
        if let Some(cap) = self.capture.as_mut() {
            if self.topo.peer_of(node, port).is_some() {
                let addr = crate::pcap::FrameAddr {
                    dlid,
                    slid,
                    dest_qp: 0,
                    src_qp: 0,
                };
                cap.push((self.now_ns, crate::pcap::frame(smp.as_wire(), addr)));
            }
        }
        let Some((peer, pport, at)) = self.cross(node, port, smp.is_directed()) else {
            return;
        };
        self.enqueue(
            at,
            Pending::Smp(Arrival {
                node: peer,
                port: pport,
                smp,
                dlid,
                slid,
                hops,
            }),
        );
    }

    /// An SMP leaves (node, port): counted, maybe lost. Where it arrives
    /// (node, port) and when, unless there is no cable or it was lost.
    pub(super) fn cross(
        &mut self,
        node: usize,
        port: u8,
        directed: bool,
    ) -> Option<(usize, u8, u64)> {
        let Some((peer, pport)) = self.topo.peer_of(node, port) else {
            self.stats.discarded += 1;
            self.count_xmit_discard(node, port, super::pma::Discard::Inactive);
            return None;
        };
        self.stats.hops += 1;
        let mut delay = self.cfg.hop_ns;
        if directed {
            self.stats.dr_hops += 1;
            delay += self.cfg.dr_hop_ns;
        }
        let lost = self.lost();
        self.count_crossing((node, port), (peer, pport), lost);
        if lost {
            self.stats.lost += 1;
            return None;
        }
        Some((peer, pport, self.now_ns + delay))
    }

    /// Sends the SMP queued in `slot`, which arrived at `node`, on out of
    /// `port`: its queue slot is reused, so a packet passing through a
    /// switch is not copied.
    pub(super) fn pass_through(&mut self, slot: u32, node: usize, port: u8) {
        if self.capture.is_some() {
            // The capture needs the LRH and the bytes: the plain way.
            if let Some(Pending::Smp(a)) = self.release(slot) {
                let hops = a.hops.saturating_add(1);
                self.transmit_hops(node, port, a.smp, a.dlid, a.slid, hops);
            }
            return;
        }
        let directed = matches!(
            &self.pending[slot as usize],
            Some(Pending::Smp(a)) if a.smp.is_directed()
        );
        match self.cross(node, port, directed) {
            Some((peer, pport, at)) => {
                if let Some(Pending::Smp(a)) = self.pending[slot as usize].as_mut() {
                    a.node = peer;
                    a.port = pport;
                    a.hops = a.hops.saturating_add(1);
                }
                self.seq += 1;
                self.queue.push(Reverse((at, self.seq, slot)));
            }
            None => {
                self.release(slot);
            }
        }
    }

    /// Empties `slot` for reuse; what it held.
    pub(super) fn release(&mut self, slot: u32) -> Option<Pending> {
        let p = self.pending.get_mut(slot as usize).and_then(Option::take);
        if p.is_some() {
            self.free.push(slot);
        }
        p
    }

    /// Queues `p` to happen at simulated time `at_ns`.
    pub(super) fn enqueue(&mut self, at_ns: u64, p: Pending) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(i) => {
                self.pending[i as usize] = Some(p);
                i
            }
            None => {
                self.pending.push(Some(p));
                (self.pending.len() - 1) as u32
            }
        };
        self.queue.push(Reverse((at_ns, self.seq, slot)));
    }
}
