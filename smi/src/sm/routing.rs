//! Min-hop routing balanced over equal-cost ports, as OpenSM's minhop engine
//! does: for every switch and every destination LID, the egress port on a
//! shortest path whose port carries the fewest routes so far.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use mad_core::attr::forwarding::DROP_PORT;

/// What a port of a switch leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortTo {
    /// Nothing (down or unconnected).
    None,
    /// Another switch: its index and the port the cable enters it by.
    Switch(usize, u8),
    /// A channel adapter port owning these LIDs (base, count).
    Ca(u16, u16),
}

/// The switch graph the router works on.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Per switch, per port (index 0 unused): what the port leads to.
    pub ports: Vec<Vec<PortTo>>,
    /// Per switch, its own LID (port 0).
    pub lid: Vec<u16>,
    /// LIDs outside the ranges of [`PortTo::Ca`] (a VM's LID that moved to
    /// another hypervisor): (LID, switch, port at that switch).
    pub extra: Vec<(u16, usize, u8)>,
    /// The switches a site names as up*/down* and fat-tree roots (OpenSM's
    /// `root_guid_file`); empty: the engine picks them
    /// ([`super::updn::roots`]).
    pub roots: Vec<usize>,
    /// LIDs routed first, in this order (OpenSM's
    /// `guid_routing_order_file`: the ports a site names, each port's
    /// LIDs in ascending order), so that min-hop and up*/down* spread
    /// them over a switch's equal-cost ports before any other; empty:
    /// the engine's own order.
    pub order: Vec<u16>,
    /// Per switch, its node GUID (0 or missing: unknown, the switch's
    /// index stands in): min-hop routes destinations in OpenSM's order,
    /// which sorts switches by GUID ([`minhop_order`], [`opensm_key`]).
    pub guids: Vec<u64>,
    /// Per switch, its NodeInfo.SystemImageGUID (0 or missing: its node
    /// GUID stands in): under LMC, min-hop and up*/down* send a port's
    /// LIDs towards other systems first (`LmcChooser`), as OpenSM's.
    pub sys_guids: Vec<u64>,
    /// Per switch, per port, the weight min-hop gives a hop out of that
    /// port (OpenSM's `hop_weights_file`; 1 where none is given): a path's
    /// length is the sum of its hops' weights, so a site steers routes
    /// off a link by weighing it. Empty: every hop weighs 1. Only
    /// min-hop reads it, as only OpenSM's min-hop does.
    pub weights: Vec<Vec<u8>>,
    /// Up*/down* routes the roots' own LIDs by min-hop
    /// ([`super::SmConfig::connect_roots`]).
    pub connect_roots: bool,
    /// How a switch picks among its equal-cost ports (OpenSM's
    /// `port_search_ordering_file`, `port_shifting`, `scatter_ports`).
    pub choice: PortChoice,
}

impl Graph {
    /// Each switch's index by its node GUID ([`Graph::guids`]; a switch
    /// whose GUID is unknown is not in it).
    pub fn switch_by_guid(&self) -> alloc::collections::BTreeMap<u64, usize> {
        (self.guids.iter().enumerate())
            .filter(|&(_, &g)| g != 0)
            .map(|(k, &g)| (g, k))
            .collect()
    }
}

/// How min-hop and up*/down* pick, among a switch's ports on a best
/// path, the one that carries the next route: the port carrying the
/// fewest routes so far, ties broken by OpenSM's options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortChoice {
    /// Per switch of the graph, its ports in the order they are tried
    /// (OpenSM's `port_search_ordering_file`): the first of the least
    /// used wins. A switch with none (or past the end): ascending.
    pub order: Vec<Vec<u8>>,
    /// OpenSM's `port_shifting`: the search starts at the port whose
    /// place among the candidates is their mean load, modulo their
    /// number, so that consecutive LIDs do not line up on the same
    /// ports of every switch.
    pub shifting: bool,
    /// OpenSM's `scatter_ports`: when not 0, the seed of a random choice
    /// among the least used ports, made again the same way at every
    /// routing (the seed is planted anew each time, as OpenSM's
    /// `srandom`), so the tables stay put between sweeps. Base LIDs only.
    pub scatter: u32,
    /// LIDs that are never scattered (OpenSM's
    /// `guid_routing_order_no_scatter`: the routing order's), ascending.
    pub no_scatter: Vec<u16>,
    /// OpenSM's `port_profile_switch_nodes`: routes to switches' own LIDs
    /// count in a port's load. False (OpenSM's default): only routes to
    /// end ports count, so the data traffic is what gets balanced
    /// (switch LIDs carry only management traffic).
    pub count_switch_lids: bool,
    /// Per switch of the graph, ports whose routes never count in their
    /// load (OpenSM's `port_prof_ignore_file`), so they look unused to
    /// every pick.
    pub ignored: Vec<Vec<u8>>,
    /// Under LMC, min-hop and up*/down* send the LIDs above a port's base
    /// as OpenSM does (`LmcChooser`: other systems first), so that
    /// their tables are OpenSM's. False (ibkit's default): each such LID
    /// takes its base's port turned by a digit of its offset per level
    /// ([`lmc_spread`]), which gives a pair of ports more distinct paths.
    /// [`dor`] follows OpenSM's own rule under LMC either way.
    pub lmc_as_opensm: bool,
}

impl PortChoice {
    /// Whether the route to a destination at port `tport` of its switch
    /// (0: the switch's own LID) that switch `s` sends out of `port`
    /// counts in that port's load, as OpenSM's port profile counts it: a
    /// route to a switch's own LID only when told to, and a port the
    /// site names never.
    pub fn counts(&self, s: usize, tport: u8, port: u8) -> bool {
        (tport != 0 || self.count_switch_lids)
            && !(self.ignored.get(s)).is_some_and(|i| i.contains(&port))
    }

    /// True when it is the plain choice: the first least used port in
    /// ascending order.
    pub fn is_plain(&self) -> bool {
        self.order.iter().all(Vec::is_empty) && !self.shifting && self.scatter == 0
    }
}

/// The C library's `random()` after `srandom(seed)` (glibc's default
/// generator: an additive feedback generator over 31 words, seeded by
/// a Lehmer sequence, its first 310 outputs discarded), which OpenSM's
/// `scatter_ports` draws from. Written out here so that a site's tables
/// under a given seed are OpenSM's, and do not move when ibkit or a
/// dependency is upgraded (the crate is `no_std` firmware code). Checked
/// against the C library's own in `fabric/tests/port_selection.rs`.
pub struct CRandom {
    r: [u32; 31],
    front: usize,
    rear: usize,
}

impl CRandom {
    /// `srandom(seed)`.
    pub fn new(seed: u32) -> Self {
        let mut r = [0u32; 31];
        // The C library keeps the word as a signed 32-bit integer, so a
        // seed above 2^31 starts negative.
        let mut word = seed.max(1) as i32;
        r[0] = word as u32;
        for x in r.iter_mut().skip(1) {
            // word = 16807 * word mod (2^31 - 1), without overflow.
            let (hi, lo) = (i64::from(word) / 127_773, i64::from(word) % 127_773);
            word = (16_807 * lo - 2_836 * hi) as i32;
            if word < 0 {
                word += 2_147_483_647;
            }
            *x = word as u32;
        }
        let mut c = CRandom {
            r,
            front: 3,
            rear: 0,
        };
        for _ in 0..310 {
            c.next_u31();
        }
        c
    }

    /// `random()`: 0 ..= 2^31 - 1.
    pub fn next_u31(&mut self) -> u32 {
        let v = self.r[self.front].wrapping_add(self.r[self.rear]);
        self.r[self.front] = v;
        self.front = (self.front + 1) % 31;
        self.rear = (self.rear + 1) % 31;
        v >> 1
    }
}

/// Where port `p` comes in a switch's search `order` (its named ports
/// first, as named, then the rest ascending; none: ascending).
fn search_rank(order: Option<&Vec<u8>>, p: u8) -> usize {
    order.map_or(usize::from(p), |o| {
        o.iter()
            .position(|&q| q == p)
            .unwrap_or(o.len() + usize::from(p))
    })
}

/// Makes [`PortChoice`]'s picks, one routing long.
pub(crate) struct Picker<'a> {
    choice: &'a PortChoice,
    random: CRandom,
    ranked: Vec<(usize, u8)>,
}

impl<'a> Picker<'a> {
    /// A picker for one routing: the seed planted anew (as OpenSM calls
    /// `srandom` before each routing).
    pub(crate) fn new(choice: &'a PortChoice) -> Self {
        Picker {
            choice,
            random: CRandom::new(choice.scatter),
            ranked: Vec::new(),
        }
    }

    /// The port of switch `s` to carry the route to `lid`, among
    /// `candidates` (each on a best path, in ascending order), by the
    /// routes each carries so far (`load`, by port). `offset`: the LID's
    /// offset into its port's LMC range (only base LIDs are scattered).
    pub(crate) fn pick(
        &mut self,
        s: usize,
        candidates: &[u8],
        load: &[u32],
        lid: u16,
        offset: u16,
    ) -> Option<u8> {
        let load_of = |p: u8| load.get(usize::from(p)).copied().unwrap_or(u32::MAX);
        let order = self.choice.order.get(s).filter(|o| !o.is_empty());
        let scatter = self.choice.scatter != 0
            && offset == 0
            && self.choice.no_scatter.binary_search(&lid).is_err();
        if order.is_none() && !self.choice.shifting && !scatter {
            // The plain choice: the first least used, in port order.
            let mut best: Option<u8> = None;
            for &p in candidates {
                if best.is_none_or(|b| load_of(p) < load_of(b)) {
                    best = Some(p);
                }
            }
            return best;
        }
        self.ranked.clear();
        for &p in candidates {
            self.ranked.push((search_rank(order, p), p));
        }
        self.ranked.sort_unstable();
        let count = self.ranked.len();
        if count == 0 {
            return None;
        }
        let least = self.ranked.iter().map(|&(_, p)| load_of(p)).min()?;
        if scatter {
            let ties = self
                .ranked
                .iter()
                .filter(|&&(_, p)| load_of(p) == least)
                .count();
            let k = self.random.next_u31() as usize % ties;
            return (self.ranked.iter())
                .filter(|&&(_, p)| load_of(p) == least)
                .nth(k)
                .map(|&(_, p)| p);
        }
        let start = if self.choice.shifting {
            let total: u64 = self
                .ranked
                .iter()
                .map(|&(_, p)| u64::from(load_of(p)))
                .sum();
            (total / count as u64) as usize % count
        } else {
            0
        };
        (0..count)
            .map(|i| self.ranked[(start + i) % count].1)
            .find(|&p| load_of(p) == least)
    }
}

/// Where the routes of a port's LIDs above its base go under LMC with
/// [`PortChoice::lmc_as_opensm`], as OpenSM's min-hop and up*/down* send
/// them (`routing_for_lmc` in its
/// `osm_switch_recommend_path`): while filling one switch's table, each
/// port remembers the neighbour switches its LIDs were sent to, with how
/// many went to each. A LID above the base is tried from the port after
/// the one that took the LID before it, and goes to the least used of
/// the equal-cost ports that lead to a system none of the port's LIDs
/// went to yet; failing that, to a switch none went to; failing that, to
/// the least used port, ties going to the neighbour that took the fewest
/// of the port's LIDs. So a port's LIDs leave by different links and
/// reach different switches wherever the fabric has them.
pub(crate) struct LmcChooser {
    /// Off at LMC 0 (no LID above a base) and without
    /// [`PortChoice::lmc_as_opensm`]: nothing is remembered.
    pub(crate) on: bool,
    /// Per base LID: the switches (graph indexes) its LIDs went to from
    /// the switch being filled, each with how many.
    sent: PerBase<usize>,
    /// The switch's ports in the order they are tried (its search
    /// order, then the rest ascending; port 0 first, never taken), set
    /// by [`LmcChooser::next_switch`].
    order: Vec<u8>,
    /// The candidates of the LID being picked, as a set of port bits.
    mask: [u64; 4],
    /// Per switch: its system ([`LmcChooser::system`]), looked up once.
    systems: Vec<(bool, u64)>,
    /// The ports on a best path, as tried: (port, its load, a LID of
    /// the port went to that system, to that switch, how many went to
    /// that switch).
    tried: Vec<(u8, u32, bool, bool, u32)>,
}

impl LmcChooser {
    /// A chooser for one routing; `offsets` is [`lid_offsets`]'s (empty:
    /// no LMC, and [`LmcChooser::pick`] is never asked).
    pub(crate) fn new(g: &Graph, offsets: &[u16]) -> Self {
        LmcChooser {
            on: g.choice.lmc_as_opensm && !offsets.is_empty(),
            sent: PerBase::default(),
            order: Vec::new(),
            mask: [0; 4],
            systems: (0..g.ports.len()).map(|m| Self::system(g, m)).collect(),
            tried: Vec::new(),
        }
    }

    /// Starts switch `s`'s table: what the last one sent is forgotten,
    /// and `s`'s ports are put in the order they are tried.
    pub(crate) fn next_switch(&mut self, g: &Graph, s: usize) {
        self.sent.clear();
        let n = g.ports.get(s).map_or(0, Vec::len);
        self.order.clear();
        if n == 0 {
            return;
        }
        self.order.push(0);
        match g.choice.order.get(s).filter(|o| !o.is_empty()) {
            Some(o) => {
                self.order.extend(o.iter().copied());
                self.order.extend((1..n as u8).filter(|p| !o.contains(p)));
            }
            None => self.order.extend(1..n as u8),
        }
        if self.order.len() != n {
            // A search order naming ports the switch lacks: ascending.
            self.order.clear();
            self.order.extend(0..n as u8);
        }
    }

    /// The system of switch `m`: its SystemImageGUID, else its node GUID,
    /// else its index.
    fn system(g: &Graph, m: usize) -> (bool, u64) {
        let known = |v: &[u64]| v.get(m).copied().filter(|&x| x != 0);
        match known(&g.sys_guids).or_else(|| known(&g.guids)) {
            Some(x) => (true, x),
            None => (false, m as u64),
        }
    }

    /// The port of switch `s` for a LID above the base LID `base` of its
    /// port, among `candidates` (the ports on a best path), by the routes
    /// each port carries (`load`); `before` is the port the LID before
    /// it took at `s` (`DROP_PORT`: none).
    // Kept out of line: min-hop's loop over every (switch, LID) stays
    // small at LMC 0 (inlined, it cost fat-tree-5832's routing 15 %).
    #[inline(never)]
    pub(crate) fn pick(
        &mut self,
        g: &Graph,
        s: usize,
        candidates: &[u8],
        load: &[u32],
        before: u8,
        base: u16,
    ) -> Option<u8> {
        let ports = &g.ports[s];
        let n = ports.len();
        if n == 0 || self.order.len() != n {
            return None;
        }
        if let [p] = *candidates {
            // One way: every rule below ends on it.
            let to_switch = matches!(ports.get(usize::from(p)), Some(PortTo::Switch(..)));
            return (p != 0 && to_switch).then_some(p);
        }
        self.mask = [0; 4];
        for &p in candidates {
            self.mask[usize::from(p >> 6)] |= 1 << (p & 63);
        }
        let sent = self.sent.of(base);
        let (mut least, mut least_new_sys, mut least_new_node) = (u32::MAX, u32::MAX, u32::MAX);
        let mut least_sent = u32::MAX;
        let (mut best, mut best_new_sys, mut best_new_node) = (0u8, 0u8, 0u8);
        // OpenSM carries this one from port to port: a port whose system
        // is new keeps the last port's answer.
        let mut node_seen = false;
        self.tried.clear();
        let start = (usize::from(before) + 1) % n;
        let (late, early) = self.order.split_at(start);
        for &p in early.iter().chain(late) {
            if p == 0 || self.mask[usize::from(p >> 6)] & (1 << (p & 63)) == 0 {
                continue;
            }
            let PortTo::Switch(m, _) = ports[usize::from(p)] else {
                continue;
            };
            let count = load.get(usize::from(p)).copied().unwrap_or(u32::MAX);
            let system = |x: usize| self.systems.get(x).copied();
            let sys = system(m);
            let sys_seen = sent.iter().any(|&(x, _)| system(x) == sys);
            let mut to_node = None;
            if !sys_seen {
                if count < least_new_sys {
                    least_new_sys = count;
                    best_new_sys = p;
                    least_sent = 0;
                }
            } else {
                to_node = sent.iter().find(|&&(x, _)| x == m).map(|&(_, k)| k);
                if to_node.is_none() && count < least_new_node {
                    least_new_node = count;
                    best_new_node = p;
                    least_sent = 0;
                }
                node_seen = to_node.is_some();
            }
            self.tried
                .push((p, count, sys_seen, node_seen, to_node.unwrap_or(0)));
            if count < least {
                best = p;
                least = count;
                if let Some(k) = to_node.filter(|&k| k < least_sent) {
                    least_sent = k;
                }
            } else if let Some(k) = to_node.filter(|&k| count == least && k < least_sent) {
                least_sent = k;
                best = p;
            }
        }
        if best == 0 {
            return None;
        }
        if g.choice.shifting && !self.tried.is_empty() {
            // The same, from the port the mean load points at.
            let count = self.tried.len();
            let total: u32 = self.tried.iter().map(|t| t.1).fold(0, u32::wrapping_add);
            (least, least_new_sys, least_new_node, least_sent) =
                (u32::MAX, u32::MAX, u32::MAX, u32::MAX);
            (best, best_new_sys, best_new_node) = (0, 0, 0);
            for i in 0..count {
                let (p, c, sys_seen, node_seen, k) =
                    self.tried[(total as usize / count + i) % count];
                if !sys_seen && c < least_new_sys {
                    least_new_sys = c;
                    best_new_sys = p;
                    least_sent = 0;
                } else if !node_seen && c < least_new_node {
                    least_new_node = c;
                    best_new_node = p;
                    least_sent = 0;
                }
                let seen = sys_seen || node_seen;
                if c < least {
                    best = p;
                    least = c;
                    if seen && k < least_sent {
                        least_sent = k;
                    }
                } else if seen && c == least && k < least_sent {
                    least_sent = k;
                    best = p;
                }
            }
        }
        if best == 0 {
            return None;
        }
        Some(if best_new_sys != 0 {
            best_new_sys
        } else if best_new_node != 0 {
            best_new_node
        } else {
            best
        })
    }

    /// Notes that switch `s` sends a LID of the port with base LID `base`
    /// out of `port` (a route that counts in the port's load).
    #[inline(never)]
    pub(crate) fn sent(&mut self, g: &Graph, s: usize, port: u8, base: u16) {
        if !self.on {
            return;
        }
        let Some(PortTo::Switch(m, _)) = g.ports[s].get(usize::from(port)).copied() else {
            return;
        };
        self.sent.add(base, m);
    }
}

/// What the LMC rules remember at one switch: per base LID (a
/// destination port), how many of its LIDs went each way (`K`: the
/// neighbour switch, or the port).
#[derive(Default)]
struct PerBase<K> {
    /// Per base LID: (way, LIDs of that port sent that way).
    counts: Vec<Vec<(K, u32)>>,
    /// The base LIDs with an entry, to forget them at the next switch.
    touched: Vec<u16>,
}

impl<K: Copy + PartialEq> PerBase<K> {
    /// Forgets everything (the next switch starts).
    fn clear(&mut self) {
        for &b in &self.touched {
            if let Some(v) = self.counts.get_mut(usize::from(b)) {
                v.clear();
            }
        }
        self.touched.clear();
    }

    /// Counts one more LID of the port with base LID `base` sent `way`.
    fn add(&mut self, base: u16, way: K) {
        let b = usize::from(base);
        if self.counts.len() <= b {
            self.counts.resize_with(b + 1, Vec::new);
        }
        let v = &mut self.counts[b];
        if v.is_empty() {
            self.touched.push(base);
        }
        match v.iter_mut().find(|e| e.0 == way) {
            Some(e) => e.1 += 1,
            None => v.push((way, 1)),
        }
    }

    /// The ways the LIDs of the port with base LID `base` went, counted.
    fn of(&self, base: u16) -> &[(K, u32)] {
        self.counts
            .get(usize::from(base))
            .map_or(&[], Vec::as_slice)
    }
}

/// Distances between switches as min-hop measures them: hops, or with
/// [`Graph::weights`], the sum of the hops' weights. `u32::MAX`:
/// unreachable.
pub enum Dist {
    /// Hop counts, `dist[a][b]` ([`distances`]).
    Hops(Vec<Vec<u16>>),
    /// Weighted lengths, `to[b][a]` from `a` to `b`.
    Weighted(Vec<Vec<u32>>),
}

impl Dist {
    /// The distance from switch `a` to switch `b`.
    #[inline]
    pub fn get(&self, a: usize, b: usize) -> u32 {
        match self {
            Dist::Hops(d) => match d[a][b] {
                u16::MAX => u32::MAX,
                h => u32::from(h),
            },
            Dist::Weighted(to) => to[b][a],
        }
    }

    /// Min-hop's distances over `g`: weighted when `g` has weights.
    pub fn of(g: &Graph) -> Dist {
        if g.weights.is_empty() {
            Dist::Hops(distances(g))
        } else {
            Dist::Weighted(weighted_distances(g))
        }
    }
}

/// The weight of a hop out of port `p` of switch `s` (1 unless
/// `weights` says otherwise; 0 read as 1).
#[inline]
pub fn hop_weight(weights: &[Vec<u8>], s: usize, p: usize) -> u32 {
    weights
        .get(s)
        .and_then(|w| w.get(p))
        .map_or(1, |&w| u32::from(w.max(1)))
}

/// `to[b][a]`: the least sum of hop weights ([`Graph::weights`]) from
/// switch `a` to switch `b`, `u32::MAX` where `b` is unreachable; one
/// Dijkstra a destination, over the cables backwards.
pub fn weighted_distances(g: &Graph) -> Vec<Vec<u32>> {
    use alloc::collections::BinaryHeap;
    use core::cmp::Reverse;
    let n = g.ports.len();
    // Into each switch: (from switch, weight of the hop).
    let mut into: Vec<Vec<(usize, u32)>> = vec![Vec::new(); n];
    for (s, ports) in g.ports.iter().enumerate() {
        for (p, t) in ports.iter().enumerate() {
            if let PortTo::Switch(m, _) = *t {
                if m < n {
                    into[m].push((s, hop_weight(&g.weights, s, p)));
                }
            }
        }
    }
    let mut to = Vec::with_capacity(n);
    let mut heap = BinaryHeap::new();
    for b in 0..n {
        let mut d = vec![u32::MAX; n];
        d[b] = 0;
        heap.push(Reverse((0u32, b)));
        while let Some(Reverse((dv, v))) = heap.pop() {
            if dv > d[v] {
                continue;
            }
            for &(s, w) in &into[v] {
                let nd = dv.saturating_add(w);
                if nd < d[s] {
                    d[s] = nd;
                    heap.push(Reverse((nd, s)));
                }
            }
        }
        to.push(d);
    }
    to
}

/// Every destination LID with the switch it hangs off and the port there,
/// in (switch, port, LID) order.
pub fn destinations(g: &Graph) -> Vec<(u16, usize, u8)> {
    let mut dests = Vec::new();
    for (s, ports) in g.ports.iter().enumerate() {
        if g.lid[s] != 0 {
            dests.push((g.lid[s], s, 0));
        }
        for (p, t) in ports.iter().enumerate() {
            if let PortTo::Ca(base, count) = *t {
                for l in base..base.saturating_add(count) {
                    dests.push((l, s, p as u8));
                }
            }
        }
    }
    if !g.extra.is_empty() {
        dests.extend_from_slice(&g.extra);
        dests.sort_unstable_by_key(|&(l, s, p)| (s, p, l));
    }
    dests
}

/// Moves the destinations whose LID `order` names to the front, in
/// `order`'s order; the rest keep theirs.
pub fn order_first(dests: &mut [(u16, usize, u8)], order: &[u16]) {
    if order.is_empty() {
        return;
    }
    let mut rank = alloc::collections::BTreeMap::new();
    for (i, &lid) in order.iter().enumerate() {
        rank.entry(lid).or_insert(i);
    }
    // A stable sort: the named first by their rank, the rest after, as
    // they were.
    dests.sort_by_key(|d| rank.get(&d.0).copied().unwrap_or(usize::MAX));
}

/// Per LID, its offset into the `2^LMC` LIDs of the port that holds it: a
/// CA port's range, or an enhanced switch port 0's (the LIDs of
/// [`Graph::extra`] above the switch's own, at port 0). 0 for a base LID
/// and a VF's; the vector runs to the highest such LID.
pub fn lid_offsets(g: &Graph) -> Vec<u16> {
    let mut off = Vec::new();
    let mut put = |l: u16, k: u16| {
        let l = usize::from(l);
        if off.len() <= l {
            off.resize(l + 1, 0);
        }
        off[l] = k;
    };
    for t in g.ports.iter().flatten() {
        if let PortTo::Ca(base, count) = *t {
            for k in 1..count {
                put(base.saturating_add(k), k);
            }
        }
    }
    for &(l, s, p) in &g.extra {
        let base = g.lid.get(s).copied().unwrap_or(0);
        if p == 0 && base != 0 && l > base {
            put(l, l - base);
        }
    }
    off
}

/// Per switch, its hops from the nearest switch with a CA cabled to it
/// (a fat tree's level: leaves 0); `u16::MAX` where none is reachable.
pub fn levels(g: &Graph) -> Vec<u16> {
    let leaves: Vec<usize> = (0..g.ports.len())
        .filter(|&s| g.ports[s].iter().any(|t| matches!(t, PortTo::Ca(..))))
        .collect();
    hops_from_any(g, &leaves)
}

/// The port for the LID at offset `k` (> 0) into a CA port's `2^LMC` LIDs,
/// at a switch of level `level` whose equal-cost ports for that
/// destination are `candidates` (in port order) and whose entry for the
/// base LID is `base_port`: the base's port turned by the level's digit of
/// `k` (`(k / m^level) % m` for `m` candidates), so that the LIDs of a
/// port leave its leaf by different links and part again a level up, as
/// d-mod-k spreads destinations. `None` when the base's port is not a
/// candidate (the caller then balances by load).
pub fn lmc_spread(candidates: &[u8], base_port: u8, k: u16, level: u16) -> Option<u8> {
    let m = candidates.len();
    let i0 = candidates.iter().position(|&p| p == base_port)?;
    let stride = m.checked_pow(u32::from(level)).unwrap_or(usize::MAX).max(1);
    Some(candidates[(i0 + (usize::from(k) / stride) % m) % m])
}

/// Hop distances from switch `src` to every switch of `g`, by
/// breadth-first search over the switch-to-switch cables (`u16::MAX` =
/// unreachable; `src` itself is 0).
pub fn hops_from(g: &Graph, src: usize) -> Vec<u16> {
    hops_from_any(g, &[src])
}

/// Hop distances from the nearest of the switches `srcs` to every switch
/// of `g` (`u16::MAX` = unreachable; indexes out of range are ignored).
pub fn hops_from_any(g: &Graph, srcs: &[usize]) -> Vec<u16> {
    let mut d = vec![u16::MAX; g.ports.len()];
    let mut q = VecDeque::new();
    for &s in srcs {
        if let Some(x) = d.get_mut(s) {
            *x = 0;
            q.push_back(s);
        }
    }
    while let Some(s) = q.pop_front() {
        for t in &g.ports[s] {
            if let PortTo::Switch(m, _) = *t {
                if d[m] == u16::MAX {
                    d[m] = d[s] + 1;
                    q.push_back(m);
                }
            }
        }
    }
    d
}

/// Hop distances between all switch pairs (`u16::MAX` = unreachable):
/// `distances(g)[a][b]` is [`hops_from`]`(g, a)[b]`.
pub fn distances(g: &Graph) -> Vec<Vec<u16>> {
    (0..g.ports.len()).map(|src| hops_from(g, src)).collect()
}

/// Linear forwarding tables: `lft[switch][lid]` = egress port, 0xFF where
/// unrouted. `max_lid` sizes the tables. Paths are weighed by
/// [`Graph::weights`] and ports picked by [`Graph::choice`].
pub fn minhop(g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
    let mut lft = vec![vec![DROP_PORT; usize::from(max_lid) + 1]; g.ports.len()];
    minhop_with_dist(g, &mut lft, &Dist::of(g), &g.weights, |_| true, false);
    lft
}

/// Dimension-order routing (OpenSM's `dor`), for meshes and hypercubes
/// cabled so that a switch's ports follow the dimensions: min-hop, except
/// that each switch sends a LID only towards the neighbour behind the
/// first of its best ports in port order (its search order, where it has
/// one), balancing over the parallel links to that neighbour. Under LMC
/// a port's LIDs all take that neighbour, and among parallel links
/// equally used the one that carried fewer of the port's LIDs so far
/// (OpenSM's rule).
pub fn dor(g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
    let mut lft = vec![vec![DROP_PORT; usize::from(max_lid) + 1]; g.ports.len()];
    minhop_with_dist(g, &mut lft, &Dist::of(g), &g.weights, |_| true, true);
    lft
}

/// Keeps of `candidates` (ports of switch `s` on a best path) the ones
/// that lead to the same neighbour as the first of them in `s`'s search
/// order ([`PortChoice::order`], else ascending): [`dor`]'s rule.
fn first_neighbour_only(g: &Graph, s: usize, candidates: &mut Vec<u8>) {
    let order = g.choice.order.get(s).filter(|o| !o.is_empty());
    let to = |p: u8| match g.ports[s].get(usize::from(p)) {
        Some(PortTo::Switch(m, _)) => Some(*m),
        _ => None,
    };
    let Some(first) = candidates
        .iter()
        .copied()
        .min_by_key(|&p| search_rank(order, p))
    else {
        return;
    };
    let m = to(first);
    candidates.retain(|&p| to(p) == m);
}

/// What [`dor`] remembers at one switch under LMC, as OpenSM's `dor`:
/// per destination port (by base LID), how many of its LIDs left by each
/// port, so that the next LID of that port takes, among the equally used
/// parallel links to the chosen neighbour, one that carried fewer of them.
#[derive(Default)]
struct DorLmc {
    /// Per base LID: (port, LIDs of that destination sent out of it).
    sent: PerBase<u8>,
}

impl DorLmc {
    /// The port of switch `s` for a LID above the base `base`, among
    /// `candidates` (the parallel links to one neighbour), in the search
    /// order: the first least used by `load`, unless an equally used one
    /// after it carried fewer of the port's LIDs than any port seen so
    /// far (OpenSM compares with the lowest such count met, not with the
    /// chosen port's). `candidates` come in ascending order, and are put
    /// in the search order where `s` has one.
    fn pick(
        &self,
        g: &Graph,
        s: usize,
        candidates: &mut [u8],
        load: &[u32],
        base: u16,
    ) -> Option<u8> {
        if let Some(order) = g.choice.order.get(s).filter(|o| !o.is_empty()) {
            candidates.sort_unstable_by_key(|&p| search_rank(Some(order), p));
        }
        let sent = self.sent.of(base);
        let took = |p: u8| sent.iter().find(|e| e.0 == p).map_or(0, |e| e.1);
        let (mut best, mut least, mut least_took) = (None, u32::MAX, u32::MAX);
        for &p in candidates.iter() {
            let count = load.get(usize::from(p)).copied().unwrap_or(u32::MAX);
            let t = took(p);
            if count < least {
                best = Some(p);
                least = count;
                least_took = least_took.min(t);
            } else if count == least && t < least_took {
                least_took = t;
                best = Some(p);
            }
        }
        best
    }
}

/// Fills `lft` with min-hop entries for the destinations `want` accepts
/// (given as (LID, switch, port at that switch)), balancing each switch's
/// ports by the routes they carry. `dist` must measure paths by
/// `weights` ([`Dist::of`]; `&[]`: every hop weighs 1).
pub fn minhop_into(
    g: &Graph,
    lft: &mut [Vec<u8>],
    dist: &Dist,
    weights: &[Vec<u8>],
    want: impl Fn(&(u16, usize, u8)) -> bool,
) {
    minhop_with_dist(g, lft, dist, weights, want, false);
}

/// [`minhop_into`], or with `dor` [`dor`]'s rule.
fn minhop_with_dist(
    g: &Graph,
    lft: &mut [Vec<u8>],
    dist: &Dist,
    weights: &[Vec<u8>],
    want: impl Fn(&(u16, usize, u8)) -> bool,
    dor: bool,
) {
    // One loop a distance kind, so the hot loop reads the matrix
    // directly.
    match dist {
        Dist::Hops(d) => minhop_with(
            g,
            lft,
            |a, b| match d[a][b] {
                u16::MAX => u32::MAX,
                h => u32::from(h),
            },
            weights,
            want,
            dor,
        ),
        Dist::Weighted(to) => minhop_with(g, lft, |a, b| to[b][a], weights, want, dor),
    }
}

/// [`minhop_into`] with the distance from switch `a` to `b` as
/// `dist(a, b)` (`u32::MAX`: unreachable); with `dor`, [`dor`]'s rule.
fn minhop_with(
    g: &Graph,
    lft: &mut [Vec<u8>],
    dist: impl Fn(usize, usize) -> u32,
    weights: &[Vec<u8>],
    want: impl Fn(&(u16, usize, u8)) -> bool,
    dor: bool,
) {
    // Destinations: every LID with the switch it hangs off and the port
    // there, in OpenSM's order.
    let (mut dests, offsets, level) = ordered_destinations(g);
    dests.retain(|d| want(d));
    // The plain choice (no search order, shifting or scatter): made
    // inline below, for min-hop and for dor alike.
    let plain = g.choice.is_plain();
    let mut picker = Picker::new(&g.choice);
    let mut candidates = Vec::new();
    // As OpenSM under `lmc_as_opensm`: the LIDs above the bases, which
    // come last, are routed apart ([`lmc_as_opensm`]), so this loop stays
    // as small as at LMC 0.
    let mut lmc = LmcChooser::new(g, &offsets);
    lmc.on &= !dor;
    // dor under LMC (OpenSM's `routing_for_lmc`); under port shifting
    // OpenSM's dor takes the plain shifted choice.
    let dor_lmc = dor && !offsets.is_empty();
    let mut dor_sent = DorLmc::default();
    let split = if lmc.on {
        dests.partition_point(|d| offsets.get(usize::from(d.0)).is_none_or(|&k| k == 0))
    } else {
        dests.len()
    };
    // In OpenSM's order, so that `scatter_ports` draws as it does.
    for s in opensm_switch_order(g) {
        let mut load = vec![0u32; g.ports[s].len()];
        dor_sent.sent.clear();
        // The ports of `s` on a best path to switch `t`, into `v`.
        let best_ports = |t: usize, v: &mut Vec<u8>| {
            let want = dist(s, t);
            if want == u32::MAX {
                return;
            }
            for (p, to) in g.ports[s].iter().enumerate() {
                if let PortTo::Switch(m, _) = *to {
                    let rest = dist(m, t);
                    if rest != u32::MAX && rest.saturating_add(hop_weight(weights, s, p)) == want {
                        v.push(p as u8);
                    }
                }
            }
        };
        for &(lid, t, tport) in &dests[..split] {
            let port = if s == t {
                tport
            } else {
                let want = dist(s, t);
                if want == u32::MAX {
                    continue;
                }
                // A port is on a best path when the hop's weight and the
                // rest of the way make the whole.
                let best_via = |p: usize, m: usize| {
                    let rest = dist(m, t);
                    rest != u32::MAX && rest.saturating_add(hop_weight(weights, s, p)) == want
                };
                let k = offsets.get(usize::from(lid)).copied().unwrap_or(0);
                if plain && k == 0 {
                    // The plain choice, inline: the first least used (with
                    // dor, of the ports to the neighbour behind the first
                    // best port).
                    let mut best: Option<usize> = None;
                    let mut first_to: Option<usize> = None;
                    for (p, to) in g.ports[s].iter().enumerate() {
                        if let PortTo::Switch(m, _) = *to {
                            if dor && first_to.is_some_and(|f| f != m) {
                                continue;
                            }
                            if best.is_none_or(|b| load[p] < load[b]) && best_via(p, m) {
                                best = Some(p);
                                first_to = Some(m);
                            }
                        }
                    }
                    match best {
                        Some(p) => p as u8,
                        None => continue,
                    }
                } else {
                    candidates.clear();
                    best_ports(t, &mut candidates);
                    if dor {
                        first_neighbour_only(g, s, &mut candidates);
                    }
                    let spread = (k > 0 && !dor)
                        .then(|| {
                            let base = lft[s].get(usize::from(lid - k)).copied()?;
                            lmc_spread(&candidates, base, k, level[s])
                        })
                        .flatten();
                    let pick = if dor_lmc && k > 0 && !g.choice.shifting {
                        dor_sent.pick(g, s, &mut candidates, &load, lid - k)
                    } else {
                        spread.or_else(|| picker.pick(s, &candidates, &load, lid, k))
                    };
                    match pick {
                        Some(p) => p,
                        None => continue,
                    }
                }
            };
            if let Some(slot) = lft[s].get_mut(usize::from(lid)) {
                *slot = port;
                // As OpenSM's port profile: a route to a switch's own LID
                // (port 0 there) counts only when told to, and a port the
                // site names never counts.
                if let Some(l) =
                    (load.get_mut(usize::from(port))).filter(|_| g.choice.counts(s, tport, port))
                {
                    *l += 1;
                    if dor_lmc && s != t {
                        let k = offsets.get(usize::from(lid)).copied().unwrap_or(0);
                        dor_sent.sent.add(lid - k, port);
                    }
                }
            }
        }
        if lmc.on {
            let rest = &dests[split..];
            lmc_as_opensm(g, s, rest, &offsets, lft, &mut load, &mut lmc, best_ports);
        }
    }
}

/// The routes at switch `s` to `dests`, the LIDs above the bases (their
/// bases routed, `load` counting the routes so far), as OpenSM's min-hop
/// and up*/down* route them ([`LmcChooser`]), the bases' routes counted
/// first. `candidates_to(t, v)` puts into `v` the ports of `s` on a best
/// path to switch `t` (none: unreachable).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(crate) fn lmc_as_opensm(
    g: &Graph,
    s: usize,
    dests: &[(u16, usize, u8)],
    offsets: &[u16],
    lft: &mut [Vec<u8>],
    load: &mut [u32],
    lmc: &mut LmcChooser,
    mut candidates_to: impl FnMut(usize, &mut Vec<u8>),
) {
    lmc.next_switch(g, s);
    let mut candidates = Vec::new();
    for &(lid, t, tport) in dests {
        let k = offsets.get(usize::from(lid)).copied().unwrap_or(0);
        if k == 1 {
            // Where the base went (offsets come in order: 1 first).
            let base = lft[s]
                .get(usize::from(lid - 1))
                .copied()
                .unwrap_or(DROP_PORT);
            if base != DROP_PORT && g.choice.counts(s, tport, base) {
                lmc.sent(g, s, base, lid - 1);
            }
        }
        let port = if s == t {
            tport
        } else {
            candidates.clear();
            candidates_to(t, &mut candidates);
            let before = lft[s].get(usize::from(lid - 1)).copied();
            match lmc.pick(
                g,
                s,
                &candidates,
                load,
                before.unwrap_or(DROP_PORT),
                lid - k,
            ) {
                Some(p) => p,
                None => continue,
            }
        };
        if let Some(slot) = lft[s].get_mut(usize::from(lid)) {
            *slot = port;
            if let Some(l) =
                (load.get_mut(usize::from(port))).filter(|_| g.choice.counts(s, tport, port))
            {
                *l += 1;
                lmc.sent(g, s, port, lid - k);
            }
        }
    }
}

/// Where switch `s` comes in OpenSM's tables of switches and ports,
/// which are keyed by GUID in network byte order and so, on the
/// little-endian hosts OpenSM runs on, sorted by the GUID's bytes read
/// backwards: (0, that key) for a known GUID ([`Graph::guids`]), (1,
/// index) for an unknown one.
pub fn opensm_key(g: &Graph, s: usize) -> (u8, u64) {
    match g.guids.get(s) {
        Some(&x) if x != 0 => (0, x.swap_bytes()),
        _ => (1, s as u64),
    }
}

/// The switches of `g` in the order OpenSM visits them when it fills
/// their tables ([`opensm_key`]): the order `scatter_ports`'s draws are
/// made in.
pub fn opensm_switch_order(g: &Graph) -> Vec<usize> {
    let mut v: Vec<usize> = (0..g.ports.len()).collect();
    v.sort_by_key(|&s| opensm_key(g, s));
    v
}

/// Every destination of `g` in OpenSM's order ([`minhop_order`]), each
/// LID's offset into its port's LMC range ([`lid_offsets`]), and, under
/// LMC, each switch's level ([`levels`]): the LIDs above a port's base
/// follow its base's route, turned level by level ([`lmc_spread`]),
/// unless [`PortChoice::lmc_as_opensm`].
#[allow(clippy::type_complexity)]
pub fn ordered_destinations(g: &Graph) -> (Vec<(u16, usize, u8)>, Vec<u16>, Vec<u16>) {
    let mut dests = destinations(g);
    let offsets = lid_offsets(g);
    minhop_order(g, &mut dests, &offsets);
    let level = if offsets.is_empty() {
        Vec::new()
    } else {
        levels(g)
    };
    (dests, offsets, level)
}

/// Puts `dests` in the order OpenSM's min-hop routes them (its
/// `ucast_mgr_build_lfts`), so that equally loaded ports are taken in
/// the same turns and the tables come out as OpenSM's: LID offset by
/// offset under LMC (every base LID first), and within each, the ports of
/// [`Graph::order`] first, in its order; then the end ports switch by
/// switch, the switches with the most end ports first (ties in OpenSM's
/// GUID order, [`opensm_key`]), each switch's in port order; then the
/// switches' own LIDs, in that order.
/// `offsets` is [`lid_offsets`]`(g)`.
pub fn minhop_order(g: &Graph, dests: &mut [(u16, usize, u8)], offsets: &[u16]) {
    let guid = |s: usize| opensm_key(g, s);
    // The switches by their end ports, most first, then by GUID.
    let mut by_load: Vec<usize> = (0..g.ports.len()).collect();
    let ends = |s: usize| {
        g.ports[s]
            .iter()
            .filter(|t| matches!(t, PortTo::Ca(..)))
            .count()
    };
    by_load.sort_by_key(|&s| (core::cmp::Reverse(ends(s)), guid(s)));
    let mut place = vec![0usize; g.ports.len()];
    for (k, &s) in by_load.iter().enumerate() {
        place[s] = k;
    }
    let mut rank = alloc::collections::BTreeMap::new();
    for (i, &lid) in g.order.iter().enumerate() {
        rank.entry(lid).or_insert(i);
    }
    dests.sort_by_key(|&(lid, t, tport)| {
        let k = offsets.get(usize::from(lid)).copied().unwrap_or(0);
        let base = lid - k;
        match rank.get(&base) {
            Some(&r) => (k, 0, r as u64, 0, 0, lid),
            None if tport != 0 => (k, 1, place[t] as u64, u64::from(tport), 0, lid),
            None => {
                let (known, g) = guid(t);
                (k, 2, u64::from(known), g, 0, lid)
            }
        }
    });
}

/// Where a switch already forwards a destination on a shortest path (a
/// table a new master read back), keeps that port instead of the one just
/// computed: a takeover then changes no entry that min-hop would accept.
/// `found(switch, lid)` is the port the switch holds; returns the entries
/// changed back.
pub fn keep_shortest(
    g: &Graph,
    lft: &mut [Vec<u8>],
    found: impl Fn(usize, u16) -> Option<u8>,
) -> usize {
    let dist = Dist::of(g);
    let dests = destinations(g);
    let mut kept = 0;
    for (s, table) in lft.iter_mut().enumerate() {
        for &(lid, t, _) in &dests {
            let (Some(p), Some(slot)) = (found(s, lid), table.get_mut(usize::from(lid))) else {
                continue;
            };
            if s == t || *slot == p || dist.get(s, t) == u32::MAX {
                continue;
            }
            if let Some(PortTo::Switch(m, _)) = g.ports[s].get(usize::from(p)) {
                let rest = dist.get(*m, t);
                let hop = hop_weight(&g.weights, s, usize::from(p));
                if rest != u32::MAX && rest.saturating_add(hop) == dist.get(s, t) {
                    *slot = p;
                    kept += 1;
                }
            }
        }
    }
    kept
}

/// Gives every switch an entry for every destination it can reach but has
/// none for, by a shortest path: on a degraded tree up*/down* cannot route
/// a top switch down to a leaf it lost its cable to. Those entries serve
/// only traffic that starts at that switch (no other switch routes through
/// it for the destination), so they add no dependency that data routes
/// can close into a cycle; `deadlock_free` checks it anyway.
pub fn fill_gaps(g: &Graph, lft: &mut [Vec<u8>]) {
    let dist = distances(g);
    for (lid, t, tport) in destinations(g) {
        let l = usize::from(lid);
        for s in 0..g.ports.len() {
            if lft[s].get(l).is_none_or(|&p| p != DROP_PORT) || dist[s][t] == u16::MAX {
                continue;
            }
            let port = if s == t {
                Some(tport)
            } else {
                g.ports[s].iter().enumerate().find_map(|(p, to)| match *to {
                    PortTo::Switch(m, _) if dist[m][t] + 1 == dist[s][t] => Some(p as u8),
                    _ => None,
                })
            };
            if let Some(p) = port {
                lft[s][l] = p;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Switches 0 – 1 – 2 in a line (port 1 left, port 2 right), 3 alone.
    fn line() -> Graph {
        use PortTo::{None as No, Switch as Sw};
        Graph {
            ports: vec![
                vec![No, No, Sw(1, 1)],
                vec![No, Sw(0, 2), Sw(2, 1)],
                vec![No, Sw(1, 2), No],
                vec![No, No, No],
            ],
            lid: vec![1, 2, 3, 4],
            extra: Vec::new(),
            roots: Vec::new(),
            order: Vec::new(),
            ..Graph::default()
        }
    }

    /// Switch 0 reaches switch 4's CA (LIDs 8-11, LMC 2) through
    /// switches 1, 2 and 3 (its ports 1-3), 1 and 2 in one system.
    fn three_ways() -> Graph {
        use PortTo::{Ca, None as No, Switch as Sw};
        Graph {
            ports: vec![
                vec![No, Sw(1, 1), Sw(2, 1), Sw(3, 1)],
                vec![No, Sw(0, 1), Sw(4, 1)],
                vec![No, Sw(0, 2), Sw(4, 2)],
                vec![No, Sw(0, 3), Sw(4, 3)],
                vec![No, Sw(1, 2), Sw(2, 2), Sw(3, 2), Ca(8, 4)],
            ],
            lid: vec![1, 2, 3, 4, 5],
            guids: vec![0x10, 0x11, 0x12, 0x13, 0x14],
            sys_guids: vec![0x10, 0xA, 0xA, 0xB, 0x14],
            ..Graph::default()
        }
    }

    #[test]
    fn as_opensm_a_ports_lids_go_to_other_systems_first() {
        let mut g = three_ways();
        g.choice.lmc_as_opensm = true;
        let t = minhop(&g, 11);
        // The base takes the first least used port; the next LID, tried
        // from port 2, skips switch 2 (switch 1's system) for switch 3's;
        // the third goes to the one switch none went to; the fourth,
        // every switch used once, to the least used port tried from
        // port 3 on.
        assert_eq!(t[0][8..=11], [1, 3, 2, 3]);
        // Each switch its own system: the next LID takes port 2.
        g.sys_guids.clear();
        assert_eq!(minhop(&g, 11)[0][8..=11], [1, 2, 3, 1]);
        // ibkit's spread turns the base's port by the offset's digit of
        // the switch's level (hops from a switch with CAs): switch 0 is
        // two hops out, where only offsets of 3^2 and more turn.
        g.choice.lmc_as_opensm = false;
        assert_eq!(minhop(&g, 11)[0][8..=11], [1, 1, 1, 1]);
    }

    #[test]
    fn dor_sends_a_ports_next_lid_down_the_parallel_link_it_used_less() {
        use PortTo::{Ca, None as No, Switch as Sw};
        // Two cables between switches 0 and 1 (ports 1 and 2 of each);
        // switch 1's CAs hold LIDs 8-9 and 10-11 (LMC 1).
        let g = Graph {
            ports: vec![
                vec![No, Sw(1, 1), Sw(1, 2)],
                vec![No, Sw(0, 1), Sw(0, 2), Ca(8, 2), Ca(10, 2)],
            ],
            lid: vec![1, 2],
            ..Graph::default()
        };
        // The bases take ports 1 and 2. LID 9 finds both used once and
        // takes port 2, which carried none of its port's LIDs; LID 11 then
        // finds port 1 the less used.
        assert_eq!(dor(&g, 11)[0][8..=11], [1, 2, 2, 1]);
        // In the search order 2 before 1, the same rule from port 2.
        let mut g = g;
        g.choice.order = vec![vec![0, 2, 1], Vec::new()];
        assert_eq!(dor(&g, 11)[0][8..=11], [2, 1, 1, 2]);
    }

    #[test]
    fn a_found_port_is_kept_only_on_a_shortest_path() {
        use PortTo::{None as No, Switch as Sw};
        // A square: 0 –1/2– 1, 0 –2/1– 2 (ports 1,2), 1 –3/3– 3, 2 –3/2– 3.
        let g = Graph {
            ports: vec![
                vec![No, Sw(1, 1), Sw(2, 1)],
                vec![No, Sw(0, 1), No, Sw(3, 3)],
                vec![No, Sw(0, 2), No, Sw(3, 2)],
                vec![No, No, Sw(2, 3), Sw(1, 3)],
            ],
            lid: vec![1, 2, 3, 4],
            extra: Vec::new(),
            roots: Vec::new(),
            order: Vec::new(),
            ..Graph::default()
        };
        let mut lft = minhop(&g, 4);
        let computed = lft[0][4];
        let other = if computed == 1 { 2 } else { 1 };
        // Switch 0 holds the other way to LID 4 (as long): kept. It holds
        // port 2 for LID 2 (a detour through 2 and 3): not kept.
        let found = |s: usize, lid: u16| match (s, lid) {
            (0, 4) => Some(other),
            (0, 2) => Some(2),
            _ => None,
        };
        assert_eq!(keep_shortest(&g, &mut lft, found), 1);
        assert_eq!(lft[0][4], other);
        assert_eq!(lft[0][2], 1);
    }

    #[test]
    fn hops_from_counts_switch_hops() {
        let g = line();
        assert_eq!(hops_from(&g, 0), [0, 1, 2, u16::MAX]);
        assert_eq!(hops_from(&g, 2), [2, 1, 0, u16::MAX]);
        assert_eq!(hops_from(&g, 3), [u16::MAX, u16::MAX, u16::MAX, 0]);
        assert_eq!(hops_from_any(&g, &[0, 2]), [0, 1, 0, u16::MAX]);
        let d = distances(&g);
        for (s, row) in d.iter().enumerate() {
            assert_eq!(*row, hops_from(&g, s));
        }
    }
    /// The square of `a_found_port_is_kept_only_on_a_shortest_path`, with
    /// a CA (LID 10) on switch 3, port 1.
    fn square() -> Graph {
        use PortTo::{Ca, None as No, Switch as Sw};
        Graph {
            ports: vec![
                vec![No, Sw(1, 1), Sw(2, 1)],
                vec![No, Sw(0, 1), No, Sw(3, 3)],
                vec![No, Sw(0, 2), No, Sw(3, 2)],
                vec![No, Ca(10, 1), Sw(2, 3), Sw(1, 3)],
            ],
            lid: vec![1, 2, 3, 4],
            ..Graph::default()
        }
    }

    #[test]
    fn a_weighed_hop_steers_min_hop_off_its_port() {
        let mut g = square();
        // Unweighed, switch 0 has two ways to LID 10 and to switch 3.
        let plain = minhop(&g, 10);
        let d = weighted_distances(&g);
        assert_eq!((d[3][0], d[0][3], d[2][0]), (2, 2, 1));
        // Port 1 of switch 0 weighs 3 and port 2 weighs 2: every route from
        // switch 0 to switch 3's LIDs leaves by port 2 (2 + 1 < 3 + 1), and
        // switch 1 (one hop of 3) is still reached by port 1 (3 < 2 + 1 + 1).
        g.weights = vec![vec![1, 3, 2], vec![1; 4], vec![1; 4], vec![1; 4]];
        let d = weighted_distances(&g);
        assert_eq!((d[3][0], d[1][0], d[0][1]), (3, 3, 1));
        let t = minhop(&g, 10);
        assert_eq!((t[0][10], t[0][4], t[0][2], t[0][3]), (2, 2, 1, 2));
        // Without the weights the two ways to 3 share its two LIDs.
        assert_ne!(plain[0][10], plain[0][4]);
        // The weighed tables still lead every switch to every LID.
        for start in 0..4usize {
            for lid in [1u16, 2, 3, 4, 10] {
                let (mut s, mut hops) = (start, 0);
                while g.lid[s] != lid {
                    let p = usize::from(t[s][usize::from(lid)]);
                    match g.ports[s][p] {
                        PortTo::Switch(m, _) => s = m,
                        PortTo::Ca(l, _) => {
                            assert_eq!(l, lid);
                            break;
                        }
                        PortTo::None => panic!("switch {s} drops LID {lid}"),
                    }
                    hops += 1;
                    assert!(hops < 4, "LID {lid} loops from switch {start}");
                }
            }
        }
        // A taken-over table keeps a found entry only on a weighed best
        // path: port 1 to LID 10 is two hops, but heavier.
        let mut again = t.clone();
        assert_eq!(
            keep_shortest(&g, &mut again, |s, l| (s == 0 && l == 10).then_some(1)),
            0
        );
        assert_eq!(again, t);
    }

    #[test]
    fn ports_are_picked_by_order_shift_and_scatter() {
        let cands = [1u8, 2, 3];
        let mut choice = PortChoice::default();
        // Plain: the first least used.
        let mut pk = Picker::new(&choice);
        assert_eq!(pk.pick(0, &cands, &[0, 2, 1, 1], 7, 0), Some(2));
        assert_eq!(pk.pick(0, &cands, &[0, 0, 0, 0], 7, 0), Some(1));
        assert_eq!(pk.pick(0, &[], &[0, 0], 7, 0), None);
        // A search order: its first least used; a switch without one, plain.
        choice.order = vec![vec![3, 1, 2]];
        let mut pk = Picker::new(&choice);
        assert_eq!(pk.pick(0, &cands, &[0, 0, 0, 0], 7, 0), Some(3));
        assert_eq!(pk.pick(0, &cands, &[0, 0, 1, 1], 7, 0), Some(1));
        assert_eq!(pk.pick(1, &cands, &[0, 0, 0, 0], 7, 0), Some(1));
        // Shifting: loads 2, 2, 2 start at place 6 / 3 % 3 = 2 (port 3);
        // loads 1, 1, 1 at place 1 (port 2); only the least used count.
        choice.order.clear();
        choice.shifting = true;
        let mut pk = Picker::new(&choice);
        assert_eq!(pk.pick(0, &cands, &[0, 2, 2, 2], 7, 0), Some(3));
        assert_eq!(pk.pick(0, &cands, &[0, 1, 1, 1], 7, 0), Some(2));
        assert_eq!(pk.pick(0, &cands, &[0, 1, 3, 2], 7, 0), Some(1));
        // Scatter: always one of the least used; the same seed the same
        // picks; another seed others; an LMC offset or a LID not to
        // scatter picks plainly.
        choice.shifting = false;
        let picks = |seed: u32| {
            let c = PortChoice {
                scatter: seed,
                ..PortChoice::default()
            };
            let mut pk = Picker::new(&c);
            (0..64)
                .map(|_| pk.pick(0, &[1, 2, 3, 4], &[0, 0, 0, 5, 0], 7, 0).unwrap())
                .collect::<Vec<u8>>()
        };
        let a = picks(1);
        assert!(a.iter().all(|&p| p != 3), "{a:?}");
        assert!([1, 2, 4].iter().all(|p| a.contains(p)), "{a:?}");
        assert_eq!(a, picks(1));
        assert_ne!(a, picks(2));
        choice.scatter = 9;
        choice.no_scatter = vec![7];
        let mut pk = Picker::new(&choice);
        for _ in 0..16 {
            assert_eq!(pk.pick(0, &cands, &[0, 0, 0, 0], 7, 0), Some(1));
            assert_eq!(pk.pick(0, &cands, &[0, 0, 0, 0], 8, 1), Some(1));
        }
    }
}
