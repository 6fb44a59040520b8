//! Changes to the fabric at a chosen simulated time: nodes added, cables
//! failing, repaired and laid, nodes down and back; the traps they raise.

use super::*;

/// `$f` of node `$n`'s agent (a hypervisor's: its PF's), whichever kind
/// it is, with the node queued to send the traps that raised; `Err` for
/// a node that does not exist.
macro_rules! on_agent {
    ($fab:ident, $n:expr, |$a:ident| $f:expr) => {{
        let r = match $fab.nodes.get_mut($n) {
            Some(SimNode::Switch($a)) => $f,
            Some(SimNode::Ca($a)) => $f,
            Some(SimNode::Hypervisor(h)) => {
                let $a = &mut h.pf;
                $f
            }
            None => return Err(format!("no node {}", $n)),
        };
        if $fab.nodes[$n].has_traps() {
            $fab.trap_nodes.insert($n);
        }
        Ok::<_, String>(r)
    }};
}

impl Fabric {
    /// Adds a powered, uncabled node (cable it with [`FabricEvent::Cable`]);
    /// a CA of one or two ports becomes a hypervisor when the fabric has VFs.
    pub fn add_node(&mut self, kind: NodeType, ports: u8, guid: u64, name: &str) -> usize {
        let i = self
            .topo
            .add_node(kind, ports, guid, name.to_string(), None);
        self.nodes
            .push(SimNode::make(&self.topo, i, self.cfg.vfs, false));
        self.counters.push(super::pma::fresh(ports));
        i
    }

    /// Node `n`'s NodeDescription changes by other means than the SM's
    /// Set (a host renamed): its agent says `text` from now on and raises
    /// trap 144 with NodeDescriptionChange, sent with the next step
    /// ([`smi::sma::Sma::describe`]). `Err` for a node that does not exist.
    pub fn describe(&mut self, n: usize, text: &str) -> Result<(), String> {
        let now_ms = self.now_ns / 1_000_000;
        on_agent!(self, n, |a| a.describe(text, now_ms))
    }

    /// Node `n`'s SystemImageGUID becomes `guid`, and it raises trap 145
    /// (see [`smi::sma::Sma::system_image_changed`]).
    pub fn set_system_image(&mut self, n: usize, guid: u64) -> Result<(), String> {
        let now_ms = self.now_ns / 1_000_000;
        let g = mad_core::Guid(guid);
        on_agent!(self, n, |a| a.system_image_changed(g, now_ms))
    }

    /// Port `port` of node `n` reports an error threshold crossed: trap
    /// `number` (129 link integrity, 130 buffer overrun, 131 flow-control
    /// watchdog), sent to the SM with the next traps (see
    /// [`smi::sma::Sma::port_error`]).
    pub fn port_error(&mut self, n: usize, port: u8, number: u16) -> Result<(), String> {
        let now_ms = self.now_ns / 1_000_000;
        let ok = on_agent!(self, n, |a| a.port_error(port, number, now_ms))?;
        ok.then_some(())
            .ok_or_else(|| format!("node {n}: no trap {number} from port {port}"))
    }

    /// Applies `event` at simulated time `at_ns`.
    pub fn schedule(&mut self, at_ns: u64, event: FabricEvent) {
        self.enqueue(at_ns.max(self.now_ns), Pending::Event(event));
    }

    /// True while node `n` is down ([`FabricEvent::NodeDown`], and no
    /// [`FabricEvent::NodeUp`] since).
    pub fn is_down(&self, n: usize) -> bool {
        self.down.contains(&n)
    }

    /// The other end of the cut cable at (node, port), if its cable is cut.
    pub fn cut_peer(&self, node: usize, port: u8) -> Option<(usize, u8)> {
        self.cut.iter().find_map(|&(a, b)| {
            if a == (node, port) {
                Some(b)
            } else if b == (node, port) {
                Some(a)
            } else {
                None
            }
        })
    }

    pub(super) fn link_event(&mut self, node: usize, port: u8, up: bool) {
        let now_ms = self.now_ns / 1_000_000;
        self.nodes[node].link_event(port, up, now_ms);
        self.trap_nodes.insert(node);
    }

    pub(super) fn apply(&mut self, e: FabricEvent) {
        match e {
            FabricEvent::LinkDown(n, p) => {
                if let Some((m, q)) = self.topo.peer_of(n, p) {
                    self.topo.peer[n][usize::from(p)] = None;
                    self.topo.peer[m][usize::from(q)] = None;
                    self.cut.push(((n, p), (m, q)));
                    self.link_event(n, p, false);
                    self.link_event(m, q, false);
                    self.count_link_downed(n, p);
                    self.count_link_downed(m, q);
                }
            }
            FabricEvent::LinkUp(n, p) => {
                if let Some(k) = self.cut.iter().position(|&(a, b)| {
                    (a == (n, p) || b == (n, p))
                        && !self.down.contains(&a.0)
                        && !self.down.contains(&b.0)
                }) {
                    let (a, b) = self.cut.swap_remove(k);
                    if self.topo.connect(a, b).is_ok() {
                        self.link_event(a.0, a.1, true);
                        self.link_event(b.0, b.1, true);
                    }
                }
            }
            FabricEvent::Cable(a, b) => {
                if self.down.contains(&a.0) || self.down.contains(&b.0) {
                    // Plugged in, but no link trains to a node that is
                    // off: it comes up with the node.
                    let free = |x: (usize, u8)| {
                        self.topo
                            .nodes
                            .get(x.0)
                            .is_some_and(|n| (1..=n.ports).contains(&x.1))
                            && self.topo.peer_of(x.0, x.1).is_none()
                            && !self.cut.iter().any(|&(c, d)| c == x || d == x)
                    };
                    if a != b && free(a) && free(b) {
                        self.cut.push((a, b));
                    }
                } else if self.topo.connect(a, b).is_ok() {
                    self.link_event(a.0, a.1, true);
                    self.link_event(b.0, b.1, true);
                }
            }
            FabricEvent::NodeDown(n) => {
                self.down.insert(n);
                for p in 1..=self.topo.nodes[n].ports {
                    self.apply(FabricEvent::LinkDown(n, p));
                }
            }
            FabricEvent::NodeUp(n) => {
                // Freshly powered: a new agent with nothing set.
                self.down.remove(&n);
                self.nodes[n] = self.nodes[n].repowered(&self.topo, n);
                self.counters[n] = super::pma::fresh(self.topo.nodes[n].ports);
                self.forget_sample(n);
                let ports: Vec<u8> = self
                    .cut
                    .iter()
                    .filter_map(|&(a, b)| {
                        if a.0 == n {
                            Some(a.1)
                        } else if b.0 == n {
                            Some(b.1)
                        } else {
                            None
                        }
                    })
                    .collect();
                for p in ports {
                    self.apply(FabricEvent::LinkUp(n, p));
                }
            }
        }
    }

    /// Hands `smp`, arrived at (node, port), to the node's agent and returns
    /// its response; a port the SMP sets Down retrains (see
    /// [`Fabric::retrain_if_downed`]).
    pub(super) fn deliver(&mut self, node: usize, port: u8, smp: &Smp, now_ms: u64) -> Option<Smp> {
        if (self.drop_before.as_ref()).is_some_and(|(at, when)| *at == node && when(smp)) {
            self.drop_before = None;
            self.stats.lost += 1;
            return None;
        }
        let reset = (self.reset_before.as_ref())
            .filter(|r| r.at == node && !self.down.contains(&r.node) && (r.when)(smp))
            .map(|r| r.node);
        if let Some(n) = reset {
            self.reset_before = None;
            self.reset_at_ns = Some(self.now_ns);
            self.apply(FabricEvent::NodeDown(n));
            self.apply(FabricEvent::NodeUp(n));
        }
        let watch = self.watch_set_down(node, smp, port);
        let resp = self.nodes[node].process(smp, port, now_ms);
        self.retrain_if_downed(node, watch);
        // A trap the SMP raised (a bad M_Key's 256) goes out with the next.
        if resp.is_none() && self.nodes[node].has_traps() {
            self.trap_nodes.insert(node);
        }
        resp
    }

    /// The cabled port a Set(PortInfo) addresses, with its state before
    /// and whether it was Disabled.
    pub(super) fn watch_set_down(
        &self,
        node: usize,
        smp: &Smp,
        arrival: u8,
    ) -> Option<(u8, PortState, bool)> {
        if smp.method() != mad_core::Method::Set
            || smp.attribute_id() != mad_core::attr::AttributeId::PortInfo
        {
            return None;
        }
        let mut port = (smp.attribute_modifier() & 0xFF) as u8;
        if port == 0 && !matches!(self.nodes[node], SimNode::Switch(_)) {
            port = arrival;
        }
        self.topo.peer_of(node, port)?;
        let disabled = self.nodes[node].port_disabled(port);
        Some((port, self.nodes[node].port_state(port)?, disabled))
    }

    /// A port the SM set Down drops its link; with LinkDownDefaultState
    /// Polling the link retrains at once, so both ends come back in Init
    /// (the "ports to Init" step of a static reconfiguration). A port set
    /// Disabled (OpenSM's answer to a babbling port) stays down, and so
    /// does its peer, until a Set enables it again (Polling), when the
    /// link trains.
    pub(super) fn retrain_if_downed(&mut self, node: usize, watch: Option<(u8, PortState, bool)>) {
        let Some((port, before, was_disabled)) = watch else {
            return;
        };
        let Some((m, q)) = self.topo.peer_of(node, port) else {
            return;
        };
        let disabled = self.nodes[node].port_disabled(port);
        if was_disabled && !disabled {
            self.link_event(node, port, true);
            self.link_event(m, q, true);
            return;
        }
        if before == PortState::Down || self.nodes[node].port_state(port) != Some(PortState::Down) {
            return;
        }
        self.link_event(m, q, false);
        if !disabled {
            self.link_event(m, q, true);
            self.link_event(node, port, true);
        }
    }

    /// Sends the traps that are due from the nodes that had link events.
    pub(super) fn send_traps(&mut self) {
        let now_ms = self.now_ns / 1_000_000;
        let nodes: Vec<usize> = std::mem::take(&mut self.trap_nodes).into_iter().collect();
        for n in nodes {
            while let Some(t) = self.nodes[n].poll_trap(now_ms) {
                if self.cfg.traps {
                    self.route_out(n, t.port, t.smp, t.dlid.0, t.slid.0);
                }
            }
        }
    }
}
