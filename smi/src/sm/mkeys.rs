//! The M_Key each port is known to hold (OpenSM's `m_key_lookup` with its
//! `guid2mkey` map): learned from the PortInfo a port answers with, handed
//! over at start, and put in every SMP to that port instead of the
//! configured key, so that an SM with a new `m_key` can still reach (and
//! re-key) ports an earlier key protects. A port not yet read is known by
//! where it is: the SM's own port by its GUID, any other by the port
//! cabled to it, from the links the SM has seen (OpenSM's `neighbors`),
//! so that even a port that answers no Get without its key (protect bits
//! 2 and 3) is reached.

use super::*;

/// The M_Key of the end port with port GUID `guid` under
/// [`SmConfig::m_key_per_port`]: SipHash-2-4 of the GUID (big-endian)
/// keyed by `m_key` (as both halves of SipHash's 128-bit key, the second
/// inverted), never 0 (0 would leave the port unprotected). `m_key` 0
/// (no key) stays 0.
pub fn port_m_key(m_key: MKey, guid: u64) -> MKey {
    use core::hash::Hasher;
    if m_key.0 == 0 {
        return m_key;
    }
    let mut h = siphasher::sip::SipHasher24::new_with_keys(m_key.0, !m_key.0);
    h.write(&guid.to_be_bytes());
    MKey(h.finish().max(1))
}

impl Sm {
    /// The M_Key the SM gives the end port with port GUID `guid` (a
    /// switch's: its port 0's): [`SmConfig::m_key`], or the port's own
    /// under [`SmConfig::m_key_per_port`].
    pub fn m_key_of_port(&self, guid: u64) -> MKey {
        if self.cfg.m_key_per_port && guid != 0 {
            port_m_key(self.cfg.m_key, guid)
        } else {
            self.cfg.m_key
        }
    }

    /// M_Keys known by port GUID, as read from a cache at start (OpenSM's
    /// `guid2mkey`): an SMP to such a port carries its key (when
    /// [`SmConfig::m_key_lookup`] is on). Keys learned since replace these.
    pub fn set_known_m_keys(&mut self, keys: BTreeMap<u64, MKey>) {
        self.m_keys = keys;
        self.m_keys.remove(&0);
        self.foreign_m_keys = (self.m_keys.iter())
            .filter(|&(&g, &k)| k != self.m_key_of_port(g))
            .count();
    }

    /// Keeps `key` as what port `guid` holds, counting the keys that are
    /// not [`SmConfig::m_key`].
    fn keep_m_key(&mut self, guid: u64, key: MKey) {
        let own = self.m_key_of_port(guid);
        if self.m_keys.insert(guid, key).is_some_and(|k| k != own) {
            self.foreign_m_keys -= 1;
        }
        if key != own {
            self.foreign_m_keys += 1;
        }
    }

    /// The links the SM saw before, as OpenSM's `neighbors` keeps them:
    /// (port GUID, port number) → the port GUID and number cabled to it.
    /// With them a port is known (and sent its key) before it is read.
    /// Links seen since are added.
    pub fn set_known_neighbors(&mut self, links: BTreeMap<(u64, u8), (u64, u8)>) {
        self.neighbors = links;
        self.neighbors.retain(|k, v| k.0 != 0 && v.0 != 0);
    }

    /// Every link the SM has seen, both ways, by (port GUID, port
    /// number): what [`Sm::set_known_neighbors`] takes.
    pub fn known_neighbors(&self) -> &BTreeMap<(u64, u8), (u64, u8)> {
        &self.neighbors
    }

    /// The GUID of the SM's own port, known to the driver before the SM
    /// reads it: the first SMP, to that port, carries its key.
    pub fn set_own_port_guid(&mut self, guid: u64) {
        self.own_port_guid = guid;
    }

    /// Notes the link between port `pport` of node `parent` and port
    /// `port` of node `child`, both ways, by port GUID. A cable moved
    /// replaces what either end was cabled to before, and the far ends of
    /// those old links no longer name these ports.
    pub(super) fn learn_link(&mut self, parent: usize, pport: u8, child: usize, port: u8) {
        let nodes = self.db.nodes();
        let (Some(a), Some(b)) = (nodes.get(parent), nodes.get(child)) else {
            return;
        };
        let (a, b) = ((a.info.port_guid.0, pport), (b.info.port_guid.0, port));
        if a.0 == 0 || b.0 == 0 {
            return;
        }
        for (end, other) in [(a, b), (b, a)] {
            if let Some(old) = self.neighbors.insert(end, other) {
                if old != other && self.neighbors.get(&old) == Some(&end) {
                    self.neighbors.remove(&old);
                }
            }
        }
    }

    /// The M_Key for a request `purpose` to node `node`: as
    /// [`Sm::m_key_for`], and for a NodeInfo to a port not yet read, the
    /// key of the port the SM's own GUID or a known link says is there.
    pub(super) fn m_key_for_request(&self, node: Option<usize>, purpose: &Purpose) -> MKey {
        if let Some(i) = node.or_else(|| purpose.node()) {
            return self.m_key_for(Some(i));
        }
        if matches!(purpose, Purpose::SweepOwnPort) && !self.db.nodes().is_empty() {
            // The SM's own port, the first node found.
            return self.m_key_for(Some(0));
        }
        let guid = match *purpose {
            Purpose::NodeInfo { from: None } => Some(self.own_port_guid),
            Purpose::NodeInfo {
                from: Some((parent, pport)),
            } => self
                .db
                .nodes()
                .get(parent)
                .and_then(|n| self.neighbors.get(&(n.info.port_guid.0, pport)))
                .map(|&(g, _)| g),
            _ => None,
        };
        let Some(g) = guid.filter(|&g| g != 0) else {
            return self.cfg.m_key;
        };
        if !self.cfg.m_key_lookup || self.foreign_m_keys == 0 {
            return self.m_key_of_port(g);
        }
        self.m_keys
            .get(&g)
            .copied()
            .unwrap_or_else(|| self.m_key_of_port(g))
    }

    /// The M_Key each port is known to hold, by port GUID (a switch by its
    /// port 0's GUID): what the SM read back or a Set it sent was answered
    /// with, and what [`Sm::set_known_m_keys`] gave it.
    pub fn known_m_keys(&self) -> &BTreeMap<u64, MKey> {
        &self.m_keys
    }

    /// The M_Key an SMP to node `node` carries: the one its port is known
    /// to hold, else [`SmConfig::m_key`].
    pub(super) fn m_key_for(&self, node: Option<usize>) -> MKey {
        // Every port known to hold the SM's own key (the usual case): no
        // lookup for each SMP.
        let guid = node
            .and_then(|i| self.db.nodes().get(i))
            .map(|n| n.info.port_guid.0);
        let own = guid.map_or(self.cfg.m_key, |g| self.m_key_of_port(g));
        if !self.cfg.m_key_lookup || self.foreign_m_keys == 0 {
            return own;
        }
        guid.and_then(|g| self.m_keys.get(&g))
            .copied()
            .unwrap_or(own)
    }

    /// The M_Key an SMP to `lid` carries ([`Sm::m_key_for`] of the node
    /// holding it).
    pub(super) fn m_key_for_lid(&self, lid: u16) -> MKey {
        let node = self.db.by_lid(Lid(lid)).map(|(n, _)| n.0);
        self.m_key_for(node)
    }

    /// Keeps the M_Key in `pi`, the PortInfo port `port` of node `node`
    /// answered with (a Get's, or a Set's after the write), where it says
    /// what the port holds, as OpenSM's rule has it: an end port's (a
    /// CA's, a switch's port 0: an external switch port shows port 0's),
    /// and either not 0 or with protect bits 0 (a key hidden by protect
    /// bits 1 reads as 0).
    pub(super) fn learn_m_key(&mut self, node: usize, port: u8, pi: &PortInfo) {
        let Some(n) = self.db.nodes().get(node) else {
            return;
        };
        if n.is_switch() && port != 0 {
            return;
        }
        if pi.m_key.0 == 0 && pi.m_key_protect_bits != 0 {
            return;
        }
        let guid = n.info.port_guid.0;
        if guid != 0 {
            self.keep_m_key(guid, pi.m_key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mad_core::Guid;

    /// A port's own key: fixed for a key and a GUID (an SM started again
    /// computes the same), another for another GUID or key, never 0
    /// unless there is no key.
    #[test]
    fn each_port_its_own_key() {
        let k = MKey(0x5ec2_e7ed_0000_000b);
        assert_eq!(port_m_key(k, 0x10), port_m_key(k, 0x10));
        assert_ne!(port_m_key(k, 0x10), port_m_key(k, 0x11));
        assert_ne!(port_m_key(k, 0x10), port_m_key(MKey(k.0 + 1), 0x10));
        assert_ne!(port_m_key(k, 0x10), k);
        assert_eq!(port_m_key(MKey(0), 0x10), MKey(0));
        let keys: BTreeSet<u64> = (1..=10_000u64).map(|g| port_m_key(k, g).0).collect();
        assert_eq!(keys.len(), 10_000);
        assert!(!keys.contains(&0));
        let sm = Sm::new(SmConfig {
            m_key: k,
            m_key_per_port: true,
            ..SmConfig::default()
        });
        assert_eq!(sm.m_key_of_port(0x10), port_m_key(k, 0x10));
        assert_eq!(sm.m_key_of_port(0), k, "a port not known by GUID");
    }

    /// An SM that knows one switch (GUID 0xA) and one CA (GUID 0xC).
    fn sm(lookup: bool) -> Sm {
        let mut sm = Sm::new(SmConfig {
            m_key: MKey(0x1111),
            m_key_lookup: lookup,
            ..SmConfig::default()
        });
        for (guid, kind, ports) in [
            (0xA, NodeType::Switch, 4u8),
            (0xC, NodeType::ChannelAdapter, 1),
        ] {
            sm.db.add_node(SmNode::for_test(guid, kind, ports, &[]));
        }
        sm
    }

    fn pi(key: u64, bits: u8) -> PortInfo {
        PortInfo {
            m_key: MKey(key),
            m_key_protect_bits: bits,
            ..PortInfo::default()
        }
    }

    #[test]
    fn a_key_shown_is_learned_and_used_for_that_port_alone() {
        let mut sm = sm(true);
        assert_eq!(sm.m_key_for(Some(1)), MKey(0x1111), "nothing known yet");
        sm.learn_m_key(1, 1, &pi(0x2222, 1));
        assert_eq!(sm.m_key_for(Some(1)), MKey(0x2222));
        assert_eq!(
            sm.m_key_for(Some(0)),
            MKey(0x1111),
            "the switch's is not the CA's"
        );
        assert_eq!(sm.m_key_for(None), MKey(0x1111));
        assert_eq!(sm.known_m_keys().get(&0xC), Some(&MKey(0x2222)));
        assert_eq!(sm.foreign_m_keys, 1);
        // Re-keyed to the SM's own key: no other key is known now.
        sm.learn_m_key(1, 1, &pi(0x1111, 1));
        assert_eq!(sm.foreign_m_keys, 0);
        assert_eq!(sm.m_key_for(Some(1)), MKey(0x1111));
        sm.set_known_m_keys(BTreeMap::from([(0xC, MKey(7)), (0xA, MKey(0x1111))]));
        assert_eq!(sm.foreign_m_keys, 1);
        assert_eq!(sm.m_key_for(Some(1)), MKey(7));
    }

    #[test]
    fn a_hidden_key_and_an_external_switch_port_teach_nothing() {
        let mut sm = sm(true);
        // Protect bits 1 and a wrong key: the port shows 0.
        sm.learn_m_key(1, 1, &pi(0, 1));
        // An external switch port shows port 0's key: OpenSM trusts only
        // port 0's PortInfo for it.
        sm.learn_m_key(0, 3, &pi(0x3333, 0));
        assert!(sm.known_m_keys().is_empty());
        // Port 0 does, and key 0 with protect bits 0 is a port without a key.
        sm.learn_m_key(0, 0, &pi(0, 0));
        assert_eq!(sm.known_m_keys().get(&0xA), Some(&MKey(0)));
        assert_eq!(sm.m_key_for(Some(0)), MKey(0));
    }

    #[test]
    fn a_moved_cable_replaces_both_old_links() {
        let mut sm = sm(true);
        // A third node: another CA, 0xD.
        let mut d = sm.db.nodes()[1].clone();
        d.info.node_guid = Guid(0xD);
        d.info.port_guid = Guid(0xD);
        sm.db.add_node(d);
        let links =
            |sm: &Sm| -> Vec<_> { sm.known_neighbors().iter().map(|(k, v)| (*k, *v)).collect() };
        sm.learn_link(0, 3, 1, 1);
        assert_eq!(links(&sm), [((0xA, 3), (0xC, 1)), ((0xC, 1), (0xA, 3))]);
        // The cable at switch port 3 now leads to 0xD: 0xC's port 1 is
        // cabled to nothing known.
        sm.learn_link(0, 3, 2, 1);
        assert_eq!(links(&sm), [((0xA, 3), (0xD, 1)), ((0xD, 1), (0xA, 3))]);
        // A key is then looked up through the new link.
        sm.keep_m_key(0xD, MKey(0x4444));
        let to = Purpose::NodeInfo { from: Some((0, 3)) };
        assert_eq!(sm.m_key_for_request(None, &to), MKey(0x4444));
        let own = Purpose::NodeInfo { from: None };
        assert_eq!(
            sm.m_key_for_request(None, &own),
            MKey(0x1111),
            "own GUID not given"
        );
        sm.set_own_port_guid(0xD);
        assert_eq!(sm.m_key_for_request(None, &own), MKey(0x4444));
    }

    #[test]
    fn without_lookup_every_smp_carries_the_configured_key() {
        let mut sm = sm(false);
        sm.set_known_m_keys(BTreeMap::from([(0xC, MKey(0x2222)), (0, MKey(5))]));
        assert_eq!(sm.m_key_for(Some(1)), MKey(0x1111));
        assert_eq!(sm.known_m_keys().len(), 1, "GUID 0 is dropped");
        let mut sm2 = sm.clone();
        sm2.cfg.m_key_lookup = true;
        assert_eq!(sm2.m_key_for(Some(1)), MKey(0x2222));
    }
}
