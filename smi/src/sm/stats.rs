//! What the subnet manager sent, by phase and kind, and what became of it.

use super::*;

/// SMPs sent, by phase, method and attribute, and what became of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Retransmissions.
    pub retries: u64,
    /// Requests given up after all retries.
    pub given_up: u64,
    /// Responses with a non-zero status.
    pub errors: u64,
    /// LID-routed SMPs sent again by directed route after a timeout.
    pub fallbacks: u64,
    /// SMPs sent LID-routed (the rest went by directed route).
    pub lid_routed: u64,
    /// Traps received.
    pub traps: u64,
    /// Bad M_Key traps (256) left unrepressed: they named the key the
    /// TrapRepress would have carried, which the port refuses.
    pub unrepressed: u64,
    /// Ports found answering with the GUID of a port the SM knows
    /// elsewhere, that port still there: refused, not linked.
    pub duplicate_guids: u64,
    /// Sweeps started.
    pub sweeps: u64,
    /// CA links taken down for a static reconfiguration.
    pub quiesced: u64,
    /// LFT blocks a new master read back from a switch (taking over, or
    /// starting with LIDs from a `guid2lid` cache) and found already
    /// holding what it computed: not sent again.
    pub lft_blocks_kept: u64,
    /// The most SMPs in flight at once (at most the window, OpenSM's
    /// `max_wire_smps`).
    pub peak_in_flight: u64,
    /// (phase, method byte, attribute ID) → SMPs sent, retransmissions and
    /// SMPs that get no response (TrapRepress) included.
    pub per_phase_kind: BTreeMap<(Phase, u8, u16), u64>,
    /// Simulated time each phase ended (ms since start).
    pub phase_end_ms: BTreeMap<Phase, u64>,
}

impl Stats {
    /// (method byte, attribute ID) → SMPs sent over all phases,
    /// retransmissions included.
    pub fn sent(&self) -> BTreeMap<(u8, u16), u64> {
        let mut m = BTreeMap::new();
        for (&(_, method, attr), &n) in &self.per_phase_kind {
            *m.entry((method, attr)).or_default() += n;
        }
        m
    }
    /// Phase → SMPs sent in it.
    pub fn per_phase(&self) -> BTreeMap<Phase, u64> {
        let mut m = BTreeMap::new();
        for (&(phase, _, _), &n) in &self.per_phase_kind {
            *m.entry(phase).or_default() += n;
        }
        m
    }
    /// All SMPs sent.
    pub fn total(&self) -> u64 {
        self.per_phase_kind.values().sum()
    }
    /// SMPs of one method and attribute, over all phases.
    pub fn count(&self, method: Method, attr: AttributeId) -> u64 {
        let (method, attr): (u8, u16) = (method.into(), attr.into());
        self.per_phase_kind
            .iter()
            .filter(|(&(_, m, a), _)| (m, a) == (method, attr))
            .map(|(_, &n)| n)
            .sum()
    }
}
