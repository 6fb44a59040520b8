//! What happens to an SMP at a node: the SMI's directed-route rules or the
//! LFTs, the agent's answer, and what reaches the SM and outside clients.

use super::*;

impl Fabric {
    /// A LID-routed SMP leaves node `n` (from its agent, at `port` for a
    /// CA; a switch's goes by its LFT).
    pub(super) fn route_out(&mut self, n: usize, port: u8, smp: Smp, dlid: u16, slid: u16) {
        let egress = match &self.nodes[n] {
            SimNode::Switch(s) => s.model.lft_port(Lid(dlid)),
            _ => port.max(1),
        };
        if egress == 0 || egress == DROP_PORT {
            self.stats.discarded += 1;
            return;
        }
        self.transmit_lrh(n, egress, smp, dlid, slid);
    }

    /// Sends an SMP the SM handed out from the SM's port: LID-routed to its
    /// destination LID, or by directed route.
    pub fn send(&mut self, t: Transmit) {
        match t.dlid {
            Some(dlid) => {
                let node = self.sm_node;
                let slid = self.nodes[node].lid().0;
                if dlid == Lid(slid) {
                    let now_ms = self.now_ns / 1_000_000;
                    if let Some(r) = self.nodes[node].process(&t.smp, 1, now_ms) {
                        self.inbox.push(r);
                    }
                } else {
                    self.transmit_lrh(node, 1, t.smp, dlid.0, slid);
                }
            }
            None => self.send_from_sm(t.smp),
        }
    }

    /// Sends a directed-route SMP from the SM's port.
    pub fn send_from_sm(&mut self, mut smp: Smp) {
        let node = self.sm_node;
        match dr::originate(&mut smp, self.nodes[node].node(), 1) {
            Ok(false) => self.transmit(node, 1, smp),
            Ok(true) => {
                // Zero hops: the SM's own SMA answers.
                let now_ms = self.now_ns / 1_000_000;
                if let Some(mut r) = self.nodes[node].process(&smp, 1, now_ms) {
                    if dr::originate(&mut r, self.nodes[node].node(), 1) == Ok(true) {
                        self.inbox.push(r);
                    }
                }
            }
            Err(_) => self.stats.discarded += 1,
        }
    }

    /// Processes the next arrival; false when nothing is in flight.
    ///
    /// A packet passing through a switch (a directed-route hop, or a
    /// LID-routed packet for a LID the switch does not own) is sent on
    /// where it lies in the queue; only a packet that ends here is taken
    /// out.
    pub fn step(&mut self) -> bool {
        let Some(Reverse((t, _, slot))) = self.queue.pop() else {
            return false;
        };
        self.now_ns = self.now_ns.max(t);
        let Some(Some(Pending::Smp(a))) = self.pending.get_mut(slot as usize) else {
            if let Some(Pending::Event(e)) = self.release(slot) {
                self.apply(e);
            }
            return true;
        };
        let (node, port, dlid, hops) = (a.node, a.port, a.dlid, a.hops);
        if a.smp.is_directed() {
            let d = dr::on_arrival(&mut a.smp, self.nodes[node].node(), port);
            if let Disposition::Forward(out) = d {
                self.pass_through(slot, node, out);
            } else if let Some(Pending::Smp(a)) = self.release(slot) {
                self.directed_end(node, port, a.smp, d);
            }
        } else if self.nodes[node].owns_at(port, Lid(dlid)) || dlid == 0xFFFF {
            if let Some(Pending::Smp(a)) = self.release(slot) {
                self.lid_routed_end(node, port, a.smp, a.slid);
            }
        } else {
            let out = self.nodes[node].lft_port(Lid(dlid));
            if out == 0 || out == DROP_PORT {
                // Not a switch, or no route.
                self.stats.discarded += 1;
                if matches!(self.nodes[node], SimNode::Switch(_)) {
                    self.count_relay_error(node, port);
                }
                self.release(slot);
            } else if hops >= MAX_LID_ROUTED_HOPS {
                // Round in a loop: its lifetime has run out.
                self.stats.expired += 1;
                self.stats.discarded += 1;
                self.count_xmit_discard(node, out, super::pma::Discard::Lifetime);
                self.release(slot);
            } else {
                self.pass_through(slot, node, out);
            }
        }
        true
    }

    /// A directed-route SMP whose disposition at (node, port) is `d`, any
    /// but Forward: a response reaches its listener, a request its agent,
    /// whose response starts back along the path.
    pub(super) fn directed_end(&mut self, node: usize, port: u8, smp: Smp, d: Disposition) {
        let now_ms = self.now_ns / 1_000_000;
        match d {
            Disposition::Deliver if smp.direction() => self.hand_over(node, smp, 0xFFFF),
            Disposition::Deliver if self.for_client_sm(node, &smp) => {
                self.hand_over(node, smp, 0xFFFF)
            }
            Disposition::Deliver => {
                if let Some(mut r) = self.deliver(node, port, &smp, now_ms) {
                    match dr::originate(&mut r, self.nodes[node].node(), port) {
                        Ok(false) => self.transmit(node, port, r),
                        Ok(true) => self.hand_over(node, r, 0xFFFF),
                        Err(_) => self.stats.discarded += 1,
                    }
                }
            }
            Disposition::Discard(dr::Discard::PortDown(out)) => {
                // The path's next port is down: that port discards it.
                self.stats.discarded += 1;
                self.count_xmit_discard(node, out, super::pma::Discard::Inactive);
            }
            Disposition::Forward(_) | Disposition::ForwardByLid(_) | Disposition::Discard(_) => {
                self.stats.discarded += 1
            }
        }
    }

    /// A LID-routed SMP for a LID `node` owns arrived at `port`: a response
    /// or trap reaches its listener, a request the agent, whose response
    /// goes back LID-routed to `slid`.
    pub(super) fn lid_routed_end(&mut self, node: usize, port: u8, smp: Smp, slid: u16) {
        let answer = (node == self.sm_node || self.clients.contains(&node))
            && matches!(
                smp.method(),
                mad_core::Method::GetResp | mad_core::Method::Trap
            );
        if answer || self.for_client_sm(node, &smp) {
            self.hand_over(node, smp, slid);
            return;
        }
        let now_ms = self.now_ns / 1_000_000;
        if let Some(r) = self.deliver(node, port, &smp, now_ms) {
            let me = self.nodes[node].lid().0;
            self.route_out(node, port, r, slid, me);
        }
    }

    /// A SubnGet or SubnSet(SMInfo) for the SM a client runs at `node`
    /// (its port claims IsSM): the client answers it, not the node's
    /// agent — as ibsim forwards SMInfo to its SM clients.
    fn for_client_sm(&self, node: usize, smp: &Smp) -> bool {
        use mad_core::attr::{AttributeId, CapabilityMask};
        if !self.clients.contains(&node)
            || smp.attribute_id() != AttributeId::SmInfo
            || !matches!(smp.method(), mad_core::Method::Get | mad_core::Method::Set)
        {
            return false;
        }
        let cap = match &self.nodes[node] {
            SimNode::Ca(c) => c.model.ports.get(1).map(|p| p.info.capability_mask),
            SimNode::Hypervisor(h) => h.pf.model.ports.get(1).map(|p| p.info.capability_mask),
            SimNode::Switch(s) => s.model.ports.first().map(|p| p.info.capability_mask),
        };
        cap.is_some_and(|c| c.contains(CapabilityMask::IS_SM))
    }

    /// Responses that reached the SM since the last call.
    pub fn take_inbox(&mut self) -> Vec<Smp> {
        std::mem::take(&mut self.inbox)
    }

    /// Hands an SMP that reached `node` to whoever listens there: an outside
    /// client, else the SM (on its node), else nobody (discarded).
    pub(super) fn hand_over(&mut self, node: usize, smp: Smp, slid: u16) {
        if self.clients.contains(&node) {
            self.delivered.push(Delivery { node, slid, smp });
        } else if node == self.sm_node {
            self.inbox.push(smp);
        } else {
            self.stats.discarded += 1;
        }
    }

    /// Attaches an outside client (an SM or a diagnostic served through
    /// ibsim's protocol) at CA `node`: SMPs it sends start there, and what
    /// reaches the node is kept for [`Fabric::take_delivered`].
    pub fn attach(&mut self, node: usize) {
        self.clients.insert(node);
    }

    /// Detaches the clients of `node`.
    pub fn detach(&mut self, node: usize) {
        self.clients.remove(&node);
    }

    /// SMPs that reached attached clients since the last call.
    pub fn take_delivered(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.delivered)
    }

    /// Sends `smp` as a client at `node` would, from a CA's port 1 or a
    /// switch's management port 0: by directed route when `dlid` is 0xFFFF,
    /// else LID-routed to `dlid` (from a switch, through its LFT). Returns
    /// false (and sends nothing) when it cannot leave the node.
    pub fn inject(&mut self, node: usize, mut smp: Smp, dlid: u16) -> bool {
        let now_ms = self.now_ns / 1_000_000;
        let switch = matches!(self.nodes[node], SimNode::Switch(_));
        let home = if switch { 0 } else { 1 };
        if dlid != 0xFFFF || !smp.is_directed() {
            let me = self.nodes[node].lid().0;
            if self.nodes[node].owns(Lid(dlid)) {
                if let Some(r) = self.deliver(node, home, &smp, now_ms) {
                    self.hand_over(node, r, me);
                }
            } else {
                self.route_out(node, 1, smp, dlid, me);
            }
            return true;
        }
        // A switch's SMI sends a directed-route SMP out of the path's
        // first port; a CA's out of its own port.
        let out = if switch && smp.hop_count() > 0 {
            smp.initial_path[1]
        } else {
            1
        };
        match dr::originate(&mut smp, self.nodes[node].node(), out) {
            Ok(false) => self.transmit(node, out, smp),
            Ok(true) => {
                // Zero hops: the node's own agent answers (a Set that
                // takes its link down retrains it, as any Set does).
                if let Some(mut r) = self.deliver(node, home, &smp, now_ms) {
                    if dr::originate(&mut r, self.nodes[node].node(), out) == Ok(true) {
                        self.hand_over(node, r, 0xFFFF);
                    }
                }
            }
            Err(_) => {
                self.stats.discarded += 1;
                return false;
            }
        }
        true
    }

    /// Processes every SMP in flight and every trap due, until nothing is
    /// left to do (simulated time moves on as far as that takes).
    pub fn run_to_quiescence(&mut self) {
        loop {
            if !self.trap_nodes.is_empty() {
                self.send_traps();
            }
            if !self.step() && self.trap_nodes.is_empty() {
                return;
            }
        }
    }

    /// What `node`'s agent answers to a local Get of `attr` (modifier `am`)
    /// arriving at `port`: the attribute's 64 bytes, as a client on the
    /// node reads them at attach time.
    pub fn local_get(
        &mut self,
        node: usize,
        port: u8,
        attr: mad_core::attr::AttributeId,
        am: u32,
    ) -> Option<[u8; 64]> {
        let path = mad_core::DrPath::new();
        let key = self.nodes[node].m_key(port);
        let smp = Smp::directed(&path, mad_core::Method::Get, attr, am, 0, key);
        let now_ms = self.now_ns / 1_000_000;
        let r = self.nodes[node].process(&smp, port, now_ms)?;
        if r.status().0 != 0 {
            return None;
        }
        let mut d = [0u8; 64];
        d.copy_from_slice(&r.as_wire()[64..128]);
        Some(d)
    }

    /// Claims (or releases) the SM role on CA `node`'s port 1: the IsSM bit
    /// of its CapabilityMask, which SMs look for when they discover. A
    /// change makes the port trap 144 with its new mask, sent with the
    /// next step.
    pub fn set_is_sm(&mut self, node: usize, on: bool) {
        use mad_core::attr::CapabilityMask;
        let info = match &mut self.nodes[node] {
            SimNode::Ca(c) => c.model.ports.get_mut(1).map(|p| &mut p.info),
            SimNode::Hypervisor(h) => h.pf.model.ports.get_mut(1).map(|p| &mut p.info),
            SimNode::Switch(s) => s.model.ports.get_mut(0).map(|p| &mut p.info),
        };
        let Some(i) = info else { return };
        let was = i.capability_mask;
        i.capability_mask.set(CapabilityMask::IS_SM, on);
        if i.capability_mask == was {
            return;
        }
        // The port traps 144 with its new mask, as ibsim's does.
        let now_ms = self.now_ns / 1_000_000;
        match &mut self.nodes[node] {
            SimNode::Ca(c) => c.capability_changed(1, now_ms),
            SimNode::Hypervisor(h) => h.pf.capability_changed(1, now_ms),
            SimNode::Switch(s) => s.capability_changed(0, now_ms),
        }
        if self.nodes[node].has_traps() {
            self.trap_nodes.insert(node);
        }
    }

    /// What the SM on `node` answers to SubnGet(SMInfo): its state and
    /// priority (the port GUID is the node's, the SM_Key OpenSM's default,
    /// 1). It stands for an SM run
    /// there — a master to stand by for, one that stops — with
    /// [`Fabric::set_is_sm`].
    pub fn set_sm_info(&mut self, node: usize, state: mad_core::attr::SmState, priority: u8) {
        let set = |i: &mut mad_core::attr::SmInfo, guid: u64| {
            i.sm_state = state;
            i.priority = priority;
            i.guid = mad_core::Guid(guid);
            // OpenSM's default SM_Key (and ibkit's).
            i.sm_key = mad_core::MKey(1);
        };
        // The GUID of the port NodeInfo names: a CA's port 1, a switch's
        // node GUID.
        let port_guid = |m: &smi::sma::node::Model<3, 0, 0>, p: usize| {
            (m.ports.get(p).and_then(|p| p.guids.first().copied()))
                .map_or(m.node_info.node_guid.0, |g| g.0)
        };
        match &mut self.nodes[node] {
            SimNode::Ca(c) => {
                let g = port_guid(&c.model, 1);
                set(&mut c.model.sm_info, g)
            }
            SimNode::Hypervisor(h) => {
                let g = port_guid(&h.pf.model, 1);
                set(&mut h.pf.model.sm_info, g)
            }
            SimNode::Switch(s) => set(&mut s.model.sm_info, s.model.node_info.node_guid.0),
        }
    }
}
