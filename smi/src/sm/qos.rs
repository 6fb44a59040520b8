//! QoS: the SL-to-VL mapping and VL arbitration tables of every port, from
//! OpenSM's `qos_*` options, read with their syntax unchanged from an
//! `opensm.conf` (every other option in the file is left to OpenSM).
//!
//! A policy has four port classes, as OpenSM's: CAs (`qos_ca_*`), switch
//! external ports (`qos_swe_*`), switch port 0 (`qos_sw0_*`, used only
//! where port 0 is enhanced) and routers (`qos_rtr_*`). Each setting a
//! class does not give comes from the plain `qos_*` one, then from
//! OpenSM's default: VL arbitration high `0:4,1:0,…,14:0`, low
//! `0:0,1:4,…,14:4`, SL-to-VL `0,1,…,14,7`, high limit 0. Values `0`
//! (max_vls), `-1` (high_limit) and `(null)` are "not set", as
//! `opensm -c` writes them.
//!
//! The tables are laid out as OpenSM lays them out, so that the same
//! options give the same tables port for port: VLs are masked to the
//! port's OperationalVLs (VL 15 kept in an SL-to-VL table); a VL
//! arbitration block holds as many entries as the port's
//! VLArbitrationLowCap / HighCap allow, the rest zero; a port with one
//! data VL gets no VL arbitration table. A switch's SL-to-VL tables are
//! written for every output port that is not Down and every input port.
//!
//! Cheaper than OpenSM: where a switch advertises optimized SL-to-VL
//! programming (SwitchInfo), one Set with AllInputPorts and AllOutputPorts
//! gives all its tables (plus one per output port whose OperationalVLs
//! differ from the most common), and a table the SM has already written
//! (and the port answered) is not written again. VL arbitration has no
//! such modifier: each block of each port is a Set. `qos_max_vls` is read
//! and checked but, as in OpenSM 3.3, changes nothing: OperationalVLs
//! come from the ports' VLCap. The SLs PathRecords carry come from a
//! `qos-policy.conf`'s `qos-ulps` ([`super::qos_policy`]), given apart.
//!
//! What is wrong in the file is refused with the line, the column and the
//! reason ([`QosError`]); an unknown `qos_*` option is a
//! [`Warning`].

use super::partitions::{number, Warning};
use super::*;
use alloc::string::String;
use mad_core::attr::modifier::{Modifier, SlToVlPorts, VlArbBlock, VlArbSelect};
use mad_core::attr::{CapabilityMask, SlToVlMappingTable, VlArbEntry, VlArbitrationTable, VlCap};

/// Entries of a VL arbitration table (high or low) at most.
pub const VLARB_ENTRIES: usize = 64;

/// One VL arbitration entry: a data VL and its weight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct VlWeight {
    /// Virtual lane (0–14).
    pub vl: u8,
    /// Weight, in 64-byte units (0: skipped).
    pub weight: u8,
}

/// The tables of one class of ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QosClass {
    /// `max_vls` (1–15): read, and like OpenSM's, not applied.
    pub max_vls: u8,
    /// VLHighLimit (PortInfo).
    pub high_limit: u8,
    /// High-priority VL arbitration table.
    pub vlarb_high: [VlWeight; VLARB_ENTRIES],
    /// Low-priority VL arbitration table.
    pub vlarb_low: [VlWeight; VLARB_ENTRIES],
    /// The VL of each SL (15: dropped).
    pub sl2vl: [u8; 16],
}

/// OpenSM's defaults (`OSM_DEFAULT_QOS_*`).
impl Default for QosClass {
    fn default() -> QosClass {
        let mut high = [VlWeight::default(); VLARB_ENTRIES];
        let mut low = [VlWeight::default(); VLARB_ENTRIES];
        for vl in 0..15u8 {
            high[usize::from(vl)] = VlWeight {
                vl,
                weight: if vl == 0 { 4 } else { 0 },
            };
            low[usize::from(vl)] = VlWeight {
                vl,
                weight: if vl == 0 { 0 } else { 4 },
            };
        }
        let mut sl2vl = [0u8; 16];
        for (sl, vl) in sl2vl.iter_mut().enumerate() {
            *vl = if sl == 15 { 7 } else { sl as u8 };
        }
        QosClass {
            max_vls: 15,
            high_limit: 0,
            vlarb_high: high,
            vlarb_low: low,
            sl2vl,
        }
    }
}

/// A QoS policy: the tables of each class of ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QosConfig {
    /// CA ports (`qos_ca_*`).
    pub ca: QosClass,
    /// Switch external ports (`qos_swe_*`).
    pub swe: QosClass,
    /// Switch port 0, where enhanced (`qos_sw0_*`).
    pub sw0: QosClass,
    /// Router ports (`qos_rtr_*`).
    pub rtr: QosClass,
    /// What was skipped, with its place.
    pub warnings: Vec<Warning>,
}

/// Why a QoS configuration was refused: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QosError {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong.
    pub reason: String,
}

impl core::fmt::Display for QosError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.reason
        )
    }
}

/// The settings a file gives for one class (or the plain `qos_*` ones).
#[derive(Clone, Debug, Default)]
struct Given {
    max_vls: Option<u8>,
    high_limit: Option<u8>,
    vlarb_high: Option<[VlWeight; VLARB_ENTRIES]>,
    vlarb_low: Option<[VlWeight; VLARB_ENTRIES]>,
    sl2vl: Option<[u8; 16]>,
}

impl Given {
    /// The class: what it gives, else what `base` gives, else OpenSM's
    /// default.
    fn build(&self, base: &Given) -> QosClass {
        let d = QosClass::default();
        QosClass {
            max_vls: self.max_vls.or(base.max_vls).unwrap_or(d.max_vls),
            high_limit: self.high_limit.or(base.high_limit).unwrap_or(d.high_limit),
            vlarb_high: self.vlarb_high.or(base.vlarb_high).unwrap_or(d.vlarb_high),
            vlarb_low: self.vlarb_low.or(base.vlarb_low).unwrap_or(d.vlarb_low),
            sl2vl: self.sl2vl.or(base.sl2vl).unwrap_or(d.sl2vl),
        }
    }
}

/// A place in the file.
#[derive(Clone, Copy)]
struct At {
    line: usize,
    column: usize,
}

impl At {
    fn error(self, reason: impl Into<String>) -> QosError {
        QosError {
            line: self.line,
            column: self.column,
            reason: reason.into(),
        }
    }

    fn warning(self, what: impl Into<String>) -> Warning {
        Warning {
            line: self.line,
            column: self.column,
            what: what.into(),
        }
    }

    /// `n` characters further on the same line.
    fn on(self, n: usize) -> At {
        At {
            column: self.column + n,
            ..self
        }
    }
}

/// Characters in `s` (columns count characters).
fn chars(s: &str) -> usize {
    s.chars().count()
}

/// A VL arbitration table: up to 64 `vl:weight` entries, commas between.
fn vlarb(value: &str, at: At, key: &str) -> Result<[VlWeight; VLARB_ENTRIES], QosError> {
    let mut t = [VlWeight::default(); VLARB_ENTRIES];
    let mut col = 0;
    for (i, entry) in value.split(',').enumerate() {
        let here = at.on(col + chars(entry) - chars(entry.trim_start()));
        col += chars(entry) + 1;
        if i >= VLARB_ENTRIES {
            return Err(here.error(alloc::format!("{key}: more than 64 entries")));
        }
        let Some((vl, weight)) = entry.split_once(':') else {
            return Err(here.error(alloc::format!(
                "{key}: entry {:?} is not VL:WEIGHT",
                entry.trim()
            )));
        };
        let vl = match number(vl) {
            Some(v) if v <= 14 => v as u8,
            _ => {
                return Err(here.error(alloc::format!(
                    "{key}: VL {:?} is not a data VL (0-14)",
                    vl.trim()
                )))
            }
        };
        let weight = match number(weight) {
            Some(w) if w <= 255 => w as u8,
            _ => {
                return Err(here.error(alloc::format!(
                    "{key}: weight {:?} is not 0-255",
                    weight.trim()
                )))
            }
        };
        t[i] = VlWeight { vl, weight };
    }
    Ok(t)
}

/// An SL-to-VL table: 16 VLs, commas between.
fn sl2vl(value: &str, at: At, key: &str) -> Result<[u8; 16], QosError> {
    let mut t = [0u8; 16];
    let mut col = 0;
    let parts: Vec<&str> = value.split(',').collect();
    for (i, v) in parts.iter().enumerate() {
        let here = at.on(col + chars(v) - chars(v.trim_start()));
        col += chars(v) + 1;
        if i >= 16 {
            return Err(here.error(alloc::format!("{key}: more than 16 SLs")));
        }
        t[i] = match number(v) {
            Some(x) if x <= 15 => x as u8,
            _ => return Err(here.error(alloc::format!("{key}: VL {:?} is not 0-15", v.trim()))),
        };
    }
    if parts.len() < 16 {
        return Err(at.error(alloc::format!(
            "{key}: {} VLs given, 16 needed (one per SL)",
            parts.len()
        )));
    }
    Ok(t)
}

/// Reads the `qos_*` options of an `opensm.conf`: `key value` lines,
/// comments from `#`. Options that do not begin with `qos` are OpenSM's
/// others and are skipped without a word.
pub fn parse(text: &str) -> Result<QosConfig, QosError> {
    let mut base = Given::default();
    let mut classes: [Given; 4] = Default::default(); // ca, swe, sw0, rtr
    let mut warnings = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("");
        let body = line.trim_start();
        if body.trim().is_empty() {
            continue;
        }
        let at = At {
            line: n + 1,
            column: chars(line) - chars(body) + 1,
        };
        let (key, rest) = body
            .split_once(|c: char| c.is_whitespace())
            .unwrap_or((body, ""));
        if !key.starts_with("qos") {
            continue;
        }
        let value = rest.trim();
        // The value starts after the key, the separator split_once took,
        // and any more blanks.
        let sep = usize::from(body.len() > key.len());
        let vat = at.on(chars(key) + sep + chars(rest) - chars(rest.trim_start()));
        match key {
            "qos" => {
                if !value.eq_ignore_ascii_case("true") {
                    warnings.push(vat.warning(alloc::format!(
                        "qos {value}: QoS is applied, as the file was given"
                    )));
                }
                continue;
            }
            "qos_policy_file" => {
                warnings.push(at.warning(
                    "qos_policy_file: not followed; give the qos-policy.conf with --qos-policy",
                ));
                continue;
            }
            _ => {}
        }
        let (given, field) = if let Some(f) = key.strip_prefix("qos_ca_") {
            (&mut classes[0], f)
        } else if let Some(f) = key.strip_prefix("qos_swe_") {
            (&mut classes[1], f)
        } else if let Some(f) = key.strip_prefix("qos_sw0_") {
            (&mut classes[2], f)
        } else if let Some(f) = key.strip_prefix("qos_rtr_") {
            (&mut classes[3], f)
        } else if let Some(f) = key.strip_prefix("qos_") {
            (&mut base, f)
        } else {
            warnings.push(at.warning(alloc::format!("unknown option {key:?}, skipped")));
            continue;
        };
        let unset = value == "(null)" || value.is_empty();
        match field {
            "max_vls" => {
                given.max_vls = match number(value) {
                    Some(0) => None,
                    Some(v) if v <= 15 => Some(v as u8),
                    _ => return Err(vat.error(alloc::format!("{key}: {value:?} is not 0-15"))),
                }
            }
            "high_limit" => {
                given.high_limit = if value == "-1" {
                    None
                } else {
                    match number(value) {
                        Some(v) if v <= 255 => Some(v as u8),
                        _ => {
                            return Err(
                                vat.error(alloc::format!("{key}: {value:?} is not -1 or 0-255"))
                            )
                        }
                    }
                }
            }
            "vlarb_high" if unset => given.vlarb_high = None,
            "vlarb_high" => given.vlarb_high = Some(vlarb(value, vat, key)?),
            "vlarb_low" if unset => given.vlarb_low = None,
            "vlarb_low" => given.vlarb_low = Some(vlarb(value, vat, key)?),
            "sl2vl" if unset => given.sl2vl = None,
            "sl2vl" => given.sl2vl = Some(sl2vl(value, vat, key)?),
            _ => warnings.push(at.warning(alloc::format!("unknown option {key:?}, skipped"))),
        }
    }
    Ok(QosConfig {
        ca: classes[0].build(&base),
        swe: classes[1].build(&base),
        sw0: classes[2].build(&base),
        rtr: classes[3].build(&base),
        warnings,
    })
}

/// Where an SL-to-VL Set goes: one input and one output port, or all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sl2VlAt {
    pub(super) input: Option<u8>,
    pub(super) output: Option<u8>,
    /// The port named in the modifier (for an all-ports Set).
    pub(super) named: (u8, u8),
}

/// The SM's QoS state: the policy and what the ports hold.
#[derive(Clone, Debug, Default)]
pub(super) struct Qos {
    /// The policy applied (none: the tables are left alone).
    pub(super) config: Option<QosConfig>,
    /// The simplified QoS policy PathRecords follow, if any.
    pub(super) policy: Option<super::qos_policy::QosPolicy>,
    /// How many times a policy (or none) has been set.
    pub(super) policy_generation: u64,
    /// SL-to-VL tables the ports answered with, by (node, input, output).
    sl2vl: super::sl2vl_cache::Sl2VlCache,
    /// VL arbitration blocks the ports answered with: (node, port,
    /// block 0–3).
    vlarb: BTreeMap<(usize, u8, u8), [VlWeight; 32]>,
    /// Tables the SM read for the SA and the port refused.
    refused: alloc::collections::BTreeSet<QosTable>,
}

/// One QoS table of a port, as the SA names it in its
/// SLtoVLMappingTableRecords and VLArbitrationTableRecords, for the SM to
/// read when the SA is asked for one it does not hold
/// ([`Sm::read_qos_table`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosTable {
    /// An SL-to-VL table: a switch's from `input` to `output`; an end
    /// port's as input 0, output its port.
    SlToVl {
        /// The node.
        node: NodeId,
        /// Input port.
        input: u8,
        /// Output port.
        output: u8,
    },
    /// A VL arbitration block of `port` (an end port's own): 1 low
    /// 0–31, 2 low 32–63, 3 high 0–31, 4 high 32–63.
    VlArb {
        /// The node.
        node: NodeId,
        /// Its port.
        port: u8,
        /// The block, 1–4.
        block: u8,
    },
}

impl Qos {
    /// What the ports of `node` hold is not known any more (the node may
    /// have been reset): its tables are written again.
    pub(super) fn forget_node(&mut self, node: usize) {
        self.sl2vl.forget(node);
        self.vlarb.retain(|&(n, _, _), _| n != node);
    }
}

impl QosTable {
    /// The node whose table it is.
    pub fn node(&self) -> NodeId {
        match *self {
            QosTable::SlToVl { node, .. } | QosTable::VlArb { node, .. } => node,
        }
    }
}

/// Why [`Sm::read_qos_table`] sent nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QosReadError {
    /// No such live node, or no such port of it.
    NoSuchPort,
    /// A block outside 1–4.
    NoSuchBlock,
    /// The SM holds the table already.
    Held,
}

impl core::fmt::Display for QosReadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            QosReadError::NoSuchPort => "no such live node or port",
            QosReadError::NoSuchBlock => "VL arbitration blocks are 1-4",
            QosReadError::Held => "the SM holds the table already",
        })
    }
}

/// The mask OpenSM applies to a VL on a port with these OperationalVLs.
fn vl_mask(op_vls: VlCap) -> u8 {
    let n = u8::from(op_vls).clamp(1, 5);
    ((1u16 << (n - 1)) - 1) as u8
}

/// A policy's SL-to-VL table for a port with these OperationalVLs.
fn masked_sl2vl(t: &[u8; 16], op_vls: VlCap) -> [u8; 16] {
    let m = vl_mask(op_vls);
    let mut out = *t;
    for v in out.iter_mut() {
        if *v != 15 {
            *v &= m;
        }
    }
    out
}

impl Sm {
    /// Applies a QoS policy: SL-to-VL and VL arbitration tables written
    /// where they differ from what the SM last saw the ports hold, and the
    /// VLHighLimit on the Set(PortInfo) that arms each port (on a running
    /// subnet, a Set(PortInfo) where it changes). Before the subnet is up
    /// it is kept for the bring-up's distribution. The SMPs queued now.
    pub fn set_qos(&mut self, config: QosConfig) -> usize {
        self.db.qos.config = Some(config);
        self.reconfigure(Sm::qos_distribute)
    }

    /// The QoS policy (`qos-policy.conf`) PathRecords follow, if any.
    pub fn qos_policy(&self) -> Option<&super::qos_policy::QosPolicy> {
        self.db.qos.policy.as_ref()
    }

    /// Sets the QoS policy (`qos-policy.conf`) the SA's PathRecords
    /// follow, or none. It changes no table: it takes effect on the next
    /// PathRecord, and gives the SA's well-known multicast groups their
    /// SL ([`super::qos_policy::QosPolicy::group_sl`]).
    pub fn set_qos_policy(&mut self, policy: Option<super::qos_policy::QosPolicy>) {
        self.db.qos.policy = policy;
        self.db.qos.policy_generation += 1;
    }

    /// The QoS policy applied, if any.
    pub fn qos(&self) -> Option<&QosConfig> {
        self.db.qos.config.as_ref()
    }

    /// The class of `port` of node `i` under `cfg`.
    fn qos_class<'a>(&self, cfg: &'a QosConfig, i: usize, port: u8) -> &'a QosClass {
        let n = &self.db.nodes()[i];
        match n.info.node_type {
            NodeType::Switch if port == 0 => &cfg.sw0,
            NodeType::Switch => &cfg.swe,
            NodeType::Router => &cfg.rtr,
            _ => &cfg.ca,
        }
    }

    /// The VLHighLimit the activation's Set(PortInfo) of `port` of node
    /// `i` carries (none without a policy).
    pub(super) fn qos_high_limit(&self, i: usize, port: u8) -> Option<u8> {
        let cfg = self.db.qos.config.as_ref()?;
        let n = &self.db.nodes()[i];
        // A base (not enhanced) switch port 0 carries no data: OpenSM
        // leaves it alone, and so does this SM.
        if n.is_switch() && port == 0 && !n.switch_info.is_some_and(|s| s.enhanced_port0) {
            return None;
        }
        let info = n.ports.get(usize::from(port))?.info?;
        Some(if info.vl_cap == VlCap::Vl0 {
            0
        } else {
            self.qos_class(cfg, i, port).high_limit
        })
    }

    /// After routing (bring-up, a sweep, a new policy): every table that
    /// differs from what the port last answered with.
    pub(super) fn qos_distribute(&mut self) {
        // A node that is new or came back holds what it holds now.
        let gone = |i: usize, db: &Subnet| db.nodes().get(i).is_none_or(|n| n.fresh || !n.alive);
        let db = &self.db;
        let stale: Vec<_> = (db.qos.sl2vl.nodes()).filter(|&n| gone(n, db)).collect();
        let stale_arb: Vec<_> = (db.qos.vlarb.keys().copied())
            .filter(|k| gone(k.0, db))
            .collect();
        for n in stale {
            self.db.qos.sl2vl.forget(n);
        }
        for k in stale_arb {
            self.db.qos.vlarb.remove(&k);
        }
        let mut refused = core::mem::take(&mut self.db.qos.refused);
        refused.retain(|t| !gone(t.node().0, &self.db));
        self.db.qos.refused = refused;
        let Some(cfg) = self.db.qos.config.clone() else {
            return;
        };
        for i in 0..self.db.nodes().len() {
            let n = &self.db.nodes()[i];
            if !n.alive {
                continue;
            }
            if n.is_switch() {
                self.qos_switch(&cfg, i);
            } else {
                let ports: Vec<u8> = (n.ports.iter().enumerate())
                    .filter(|(p, x)| {
                        *p > 0 && x.info.is_some_and(|pi| pi.port_state != PortState::Down)
                    })
                    .map(|(p, _)| p as u8)
                    .collect();
                for p in ports {
                    let class = self.qos_class(&cfg, i, p).clone();
                    self.qos_end_port(i, p, &class, false);
                }
            }
        }
        self.qos_high_limits();
    }

    /// A switch: VL arbitration of each external port not Down, then its
    /// SL-to-VL tables (all at once where it can), then port 0 where
    /// enhanced.
    fn qos_switch(&mut self, cfg: &QosConfig, i: usize) {
        let n = &self.db.nodes()[i];
        let up: Vec<(u8, VlCap)> = (n.ports.iter().enumerate().skip(1))
            .filter_map(|(p, x)| {
                let pi = x.info?;
                (pi.port_state != PortState::Down).then_some((p as u8, pi.operational_vls))
            })
            .collect();
        let nports = n.ports.len().saturating_sub(1) as u8;
        let sl_map = n.ports.first().and_then(|p| p.info).is_some_and(|pi| {
            pi.capability_mask
                .contains(CapabilityMask::IS_SL_MAPPING_SUPPORTED)
        });
        let si = n.switch_info.unwrap_or_default();
        let optimized =
            self.cfg.use_optimized_slvl && si.optimized_sl_to_vl_mapping_programming & 1 == 1;
        let enhanced = si.enhanced_port0;
        for &(p, _) in &up {
            self.qos_vlarb(i, p, p, &cfg.swe);
        }
        if sl_map && !up.is_empty() {
            if optimized {
                // The OperationalVLs most ports have (the first port to
                // reach the highest count), as OpenSM picks them.
                let mut count = [0u16; 16];
                let (mut best, mut most, mut at) = (VlCap::Vl0, 0, up[0].0);
                for &(p, vls) in &up {
                    let c = &mut count[usize::from(u8::from(vls) & 15)];
                    *c += 1;
                    if *c > most {
                        (best, most, at) = (vls, *c, p);
                    }
                }
                let table = masked_sl2vl(&cfg.swe.sl2vl, best);
                let all = Sl2VlAt {
                    input: None,
                    output: None,
                    named: (at, at),
                };
                let outs: Vec<u8> = up
                    .iter()
                    .filter(|&&(_, v)| v == best)
                    .map(|&(p, _)| p)
                    .collect();
                if !self.qos_sl2vl_holds(i, nports, None, &outs, &table) {
                    self.qos_sl2vl_send(i, all, &table);
                }
                for &(p, vls) in up.iter().filter(|&&(_, v)| v != best) {
                    let table = masked_sl2vl(&cfg.swe.sl2vl, vls);
                    if !self.qos_sl2vl_holds(i, nports, None, &[p], &table) {
                        let at = Sl2VlAt {
                            input: None,
                            output: Some(p),
                            named: (p, p),
                        };
                        self.qos_sl2vl_send(i, at, &table);
                    }
                }
            } else {
                let mut outs: Vec<(u8, VlCap)> = up.clone();
                if enhanced {
                    if let Some(pi) = self.db.nodes()[i].ports[0].info {
                        outs.insert(0, (0, pi.operational_vls));
                    }
                }
                for (out, vls) in outs {
                    let table = masked_sl2vl(&cfg.swe.sl2vl, vls);
                    for input in 0..=nports {
                        if !self.qos_sl2vl_holds(i, nports, Some(input), &[out], &table) {
                            let at = Sl2VlAt {
                                input: Some(input),
                                output: Some(out),
                                named: (input, out),
                            };
                            self.qos_sl2vl_send(i, at, &table);
                        }
                    }
                }
            }
        }
        if enhanced && self.db.nodes()[i].ports[0].info.is_some() {
            let vlarb_only = optimized && cfg.swe.sl2vl == cfg.sw0.sl2vl;
            self.qos_end_port(i, 0, &cfg.sw0, vlarb_only);
        }
    }

    /// An end port (a CA's or router's, or an enhanced switch port 0):
    /// its VL arbitration, then its SL-to-VL table.
    fn qos_end_port(&mut self, i: usize, port: u8, class: &QosClass, vlarb_only: bool) {
        self.qos_vlarb(i, port, 0, class);
        if vlarb_only {
            return;
        }
        let Some(pi) = self.db.nodes()[i].ports[usize::from(port)].info else {
            return;
        };
        if !pi
            .capability_mask
            .contains(CapabilityMask::IS_SL_MAPPING_SUPPORTED)
        {
            return;
        }
        let table = masked_sl2vl(&class.sl2vl, pi.operational_vls);
        // A CA's table is kept as (0, its port); a switch port 0's as
        // (0, 0).
        if !self.qos_sl2vl_holds(i, 0, Some(0), &[port], &table) {
            let at = Sl2VlAt {
                input: Some(0),
                output: Some(port),
                named: (0, 0),
            };
            self.qos_sl2vl_send(i, at, &table);
        }
    }

    /// The SM last saw every (input, output) of node `i` — each input up
    /// to `nports` when `input` is none — hold `table`.
    fn qos_sl2vl_holds(
        &self,
        i: usize,
        nports: u8,
        input: Option<u8>,
        outs: &[u8],
        table: &[u8; 16],
    ) -> bool {
        let ins = match input {
            Some(x) => x..=x,
            None => 0..=nports,
        };
        ins.flat_map(|x| outs.iter().map(move |&o| (x, o)))
            .all(|(x, o)| self.db.qos.sl2vl.get(i, x, o).as_ref() == Some(table))
    }

    fn qos_sl2vl_send(&mut self, i: usize, at: Sl2VlAt, table: &[u8; 16]) {
        let switch = self.db.nodes()[i].is_switch();
        let am = if switch {
            SlToVlPorts {
                input_port: at.named.0,
                output_port: at.named.1,
                all_input_ports: at.input.is_none(),
                all_output_ports: at.output.is_none(),
            }
            .encode()
        } else {
            0
        };
        let t = SlToVlMappingTable { vl: *table };
        self.set_node(i, &t, am, Purpose::SlToVl { node: i, at });
    }

    /// An SL-to-VL Set answered: what the port holds now, for every
    /// (input, output) the Set reached.
    pub(super) fn on_sl2vl(&mut self, smp: &Smp, node: usize, at: Sl2VlAt) {
        let Ok(t) = SlToVlMappingTable::decode(&smp.data) else {
            return;
        };
        let Some(n) = self.db.nodes().get(node) else {
            return;
        };
        let nports = n.ports.len().saturating_sub(1) as u8;
        let ins = at.input.map_or(0..=nports, |x| x..=x);
        let outs = at.output.map_or(1..=nports, |x| x..=x);
        for input in ins.clone() {
            for output in outs.clone() {
                self.db.qos.refused.remove(&QosTable::SlToVl {
                    node: NodeId(node),
                    input,
                    output,
                });
            }
        }
        self.db.qos.sl2vl.set(node, ins, outs, &t.vl);
    }

    /// The VL arbitration blocks of `port` of node `i` (addressed as
    /// `attr_port`: a switch's port, 0 on an end port), as the port's
    /// caps allow; none on a port with one data VL.
    fn qos_vlarb(&mut self, i: usize, port: u8, attr_port: u8, class: &QosClass) {
        let Some(pi) = self.db.nodes()[i].ports[usize::from(port)].info else {
            return;
        };
        if pi.vl_cap == VlCap::Vl0 {
            return;
        }
        let mask = vl_mask(pi.operational_vls);
        let low = usize::from(pi.vl_arbitration_low_cap).min(VLARB_ENTRIES);
        let high = usize::from(pi.vl_arbitration_high_cap).min(VLARB_ENTRIES);
        for (block, cap, table) in [(0u8, low, &class.vlarb_low), (2u8, high, &class.vlarb_high)] {
            for half in 0..2u8 {
                let len = cap.saturating_sub(usize::from(half) * 32).min(32);
                if len == 0 {
                    continue;
                }
                let b = block + half;
                let mut entries = [VlWeight::default(); 32];
                let from = &table[usize::from(half) * 32..];
                for (e, w) in entries.iter_mut().zip(from).take(len) {
                    *e = VlWeight {
                        vl: w.vl & mask,
                        weight: w.weight,
                    };
                }
                let held = self.db.qos.vlarb.get(&(i, port, b));
                if held.is_some_and(|h| h[..len] == entries[..len]) {
                    continue;
                }
                let mut t = VlArbitrationTable::default();
                for (slot, e) in t.entries.iter_mut().zip(entries.iter()) {
                    *slot = VlArbEntry {
                        vl: e.vl,
                        weight: e.weight,
                    };
                }
                let am = VlArbSelect {
                    block: VlArbBlock::from(u16::from(b) + 1),
                    port: attr_port,
                }
                .encode();
                self.set_node(
                    i,
                    &t,
                    am,
                    Purpose::VlArb {
                        node: i,
                        port,
                        block: b,
                    },
                );
            }
        }
    }

    /// A VL arbitration Set answered: what the port holds now.
    pub(super) fn on_vlarb(&mut self, smp: &Smp, node: usize, port: u8, block: u8) {
        let Ok(t) = VlArbitrationTable::decode(&smp.data) else {
            return;
        };
        let mut b = [VlWeight::default(); 32];
        for (x, e) in b.iter_mut().zip(t.entries.iter()) {
            *x = VlWeight {
                vl: e.vl,
                weight: e.weight,
            };
        }
        self.db.qos.vlarb.insert((node, port, block), b);
        self.db.qos.refused.remove(&QosTable::VlArb {
            node: NodeId(node),
            port,
            block: block + 1,
        });
    }

    /// Reads `table` from its port, for the SA to answer a record the SM
    /// does not hold (it never wrote it: no QoS policy, or not that
    /// table). The answer is kept as a written table is
    /// ([`Subnet::sl2vl_table`], [`Subnet::vlarb_block`]); a refusal is
    /// remembered ([`Subnet::qos_table_refused`]) until the node is
    /// found again. One Get(SLtoVLMappingTable) or Get(VLArbitrationTable).
    pub fn read_qos_table(&mut self, table: QosTable) -> Result<(), QosReadError> {
        let i = table.node().0;
        let Some(n) = self.db.nodes().get(i).filter(|n| n.alive) else {
            return Err(QosReadError::NoSuchPort);
        };
        let switch = n.is_switch();
        let has = |p: u8| usize::from(p) < n.ports.len() && (switch || p > 0);
        match table {
            QosTable::SlToVl { input, output, .. } => {
                if !has(output) || (switch && !has(input)) || (!switch && input != 0) {
                    return Err(QosReadError::NoSuchPort);
                }
                if self.db.qos.sl2vl.get(i, input, output).is_some() {
                    return Err(QosReadError::Held);
                }
                let (am, named) = if switch {
                    let am = SlToVlPorts {
                        input_port: input,
                        output_port: output,
                        all_input_ports: false,
                        all_output_ports: false,
                    };
                    (am.encode(), (input, output))
                } else {
                    (0, (0, 0))
                };
                let at = Sl2VlAt {
                    input: Some(input),
                    output: Some(output),
                    named,
                };
                self.get_node(
                    i,
                    AttributeId::SlToVlMappingTable,
                    am,
                    Purpose::SlToVl { node: i, at },
                );
            }
            QosTable::VlArb { port, block, .. } => {
                if !has(port) {
                    return Err(QosReadError::NoSuchPort);
                }
                if !(1..=4).contains(&block) {
                    return Err(QosReadError::NoSuchBlock);
                }
                if self.db.qos.vlarb.contains_key(&(i, port, block - 1)) {
                    return Err(QosReadError::Held);
                }
                let am = VlArbSelect {
                    block: VlArbBlock::from(u16::from(block)),
                    port: if switch { port } else { 0 },
                };
                self.get_node(
                    i,
                    AttributeId::VlArbitrationTable,
                    am.encode(),
                    Purpose::VlArb {
                        node: i,
                        port,
                        block: block - 1,
                    },
                );
            }
        }
        Ok(())
    }

    /// A port refused a Get or Set of one of its QoS tables: the SM does
    /// not know what it holds.
    pub(super) fn on_qos_refused(&mut self, purpose: &Purpose) {
        match *purpose {
            Purpose::SlToVl { node, at } => {
                let nports = self.db.nodes().get(node).map_or(0, |n| n.ports.len());
                let nports = nports.saturating_sub(1) as u8;
                for input in at.input.map_or(0..=nports, |x| x..=x) {
                    for output in at.output.map_or(1..=nports, |x| x..=x) {
                        self.db.qos.refused.insert(QosTable::SlToVl {
                            node: NodeId(node),
                            input,
                            output,
                        });
                    }
                }
            }
            Purpose::VlArb { node, port, block } => {
                self.db.qos.vlarb.remove(&(node, port, block));
                self.db.qos.refused.insert(QosTable::VlArb {
                    node: NodeId(node),
                    port,
                    block: block + 1,
                });
            }
            _ => {}
        }
    }

    /// On a running subnet, Set(PortInfo) where a port's VLHighLimit is
    /// not the policy's (ports still in Init get it on their activation).
    fn qos_high_limits(&mut self) {
        let mut todo = Vec::new();
        for (i, n) in self.db.nodes().iter().enumerate() {
            if !n.alive {
                continue;
            }
            for (p, port) in n.ports.iter().enumerate() {
                let Some(pi) = port.info else { continue };
                let end = !n.is_switch() && p > 0;
                let ext = n.is_switch() && p > 0;
                let enhanced0 =
                    n.is_switch() && p == 0 && n.switch_info.is_some_and(|s| s.enhanced_port0);
                if !(end || ext || enhanced0)
                    || matches!(pi.port_state, PortState::Down | PortState::Init)
                {
                    continue;
                }
                if let Some(h) = self.qos_high_limit(i, p as u8) {
                    if pi.vl_high_limit != h {
                        todo.push((i, p as u8, h));
                    }
                }
            }
        }
        for (i, p, h) in todo {
            let Some(mut pi) = self.db.nodes()[i].ports[usize::from(p)].info else {
                continue;
            };
            pi.vl_high_limit = h;
            self.set_port_fields(i, p, pi);
        }
    }
}

impl Subnet {
    /// The SL-to-VL table `node` answered with for (`input`, `output`)
    /// when the SM last wrote it (a CA's: input 0, its port as output;
    /// a switch port 0's: (0, 0)). None where the SM wrote none.
    pub fn sl2vl_table(&self, node: NodeId, input: u8, output: u8) -> Option<[u8; 16]> {
        self.qos.sl2vl.get(node.0, input, output)
    }

    /// Every SL-to-VL table the SM wrote: (node, input, output, VLs).
    pub fn sl2vl_tables(&self) -> impl Iterator<Item = (NodeId, u8, u8, [u8; 16])> + '_ {
        (self.qos.sl2vl.iter()).map(|(n, i, o, t)| (NodeId(n), i, o, t))
    }

    /// Every VL arbitration block the SM wrote: (node, port, block 1–4
    /// as the SA and the SMP number them, entries).
    pub fn vlarb_blocks(&self) -> impl Iterator<Item = (NodeId, u8, u8, [VlWeight; 32])> + '_ {
        (self.qos.vlarb.iter()).map(|(&(n, p, b), &t)| (NodeId(n), p, b + 1, t))
    }

    /// The VL arbitration block (1–4) `node`'s `port` answered with when
    /// the SM last wrote or read it. None where it did neither.
    pub fn vlarb_block(&self, node: NodeId, port: u8, block: u8) -> Option<[VlWeight; 32]> {
        let b = block.checked_sub(1)?;
        self.qos.vlarb.get(&(node.0, port, b)).copied()
    }

    /// True when the port refused the SM's last read or write of `table`
    /// (and the node has not been found again since).
    pub fn qos_table_refused(&self, table: QosTable) -> bool {
        self.qos.refused.contains(&table)
    }

    /// The QoS policy (`qos-policy.conf`) PathRecords follow, if any.
    pub fn qos_policy(&self) -> Option<&super::qos_policy::QosPolicy> {
        self.qos.policy.as_ref()
    }

    /// How many times a QoS policy (or none) has been set: it moves when
    /// the policy changes (for the SA to give its groups their SL again).
    pub fn qos_policy_generation(&self) -> u64 {
        self.qos.policy_generation
    }

    /// The QoS policy applied, if any.
    pub fn qos_config(&self) -> Option<&QosConfig> {
        self.qos.config.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_opensms() {
        let c = parse("").unwrap();
        assert_eq!(
            c.ca.sl2vl,
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7]
        );
        assert_eq!(c.swe.vlarb_high[0], VlWeight { vl: 0, weight: 4 });
        assert_eq!(c.swe.vlarb_high[1], VlWeight { vl: 1, weight: 0 });
        assert_eq!(c.sw0.vlarb_low[0], VlWeight { vl: 0, weight: 0 });
        assert_eq!(c.sw0.vlarb_low[14], VlWeight { vl: 14, weight: 4 });
        assert_eq!(c.sw0.vlarb_low[15], VlWeight::default());
        assert_eq!(c.rtr.high_limit, 0);
    }

    #[test]
    fn class_settings_override_the_plain_ones() {
        let text = "# site\nsm_priority 15\nqos TRUE\nqos_high_limit 10\n\
                    qos_ca_high_limit -1\nqos_swe_high_limit 3\nqos_sl2vl 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n\
                    qos_ca_vlarb_low 0:1, 1:2 ,2:0x10\nqos_sw0_sl2vl (null)\nqos_rtr_max_vls 0\n";
        let c = parse(text).unwrap();
        assert_eq!(c.ca.high_limit, 10);
        assert_eq!(c.swe.high_limit, 3);
        assert_eq!(c.sw0.sl2vl[15], 15);
        assert_eq!(
            c.ca.vlarb_low[..4],
            [
                VlWeight { vl: 0, weight: 1 },
                VlWeight { vl: 1, weight: 2 },
                VlWeight { vl: 2, weight: 16 },
                VlWeight::default()
            ]
        );
        // Only the CA class changed its low table.
        assert_eq!(c.swe.vlarb_low, QosClass::default().vlarb_low);
        assert_eq!(c.rtr.max_vls, 15);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn broken_values_are_refused_with_their_place() {
        let e = parse("qos_max_vls 4\n  qos_sl2vl 0,1,2\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 13), "{e}");
        let e = parse("qos_swe_vlarb_high 0:4,15:2\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 24), "{e}");
        assert!(e.reason.contains("not a data VL"), "{e}");
        let e = parse("qos_vlarb_low 0:4,1:256\n").unwrap_err();
        assert!(e.reason.contains("weight"), "{e}");
        let e = parse("qos_vlarb_low 0:4,1\n").unwrap_err();
        assert!(e.reason.contains("VL:WEIGHT"), "{e}");
        let e = parse("qos_high_limit -2\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 16), "{e}");
        let e = parse("qos_max_vls 16\n").unwrap_err();
        assert!(e.reason.contains("0-15"), "{e}");
        let long = alloc::format!("qos_vlarb_low {}\n", alloc::vec!["1:1"; 65].join(","));
        assert!(parse(&long).unwrap_err().reason.contains("64"));
        let e = parse("qos_sl2vl 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,0\n").unwrap_err();
        assert!(e.reason.contains("16"), "{e}");
    }

    #[test]
    fn unknown_qos_options_and_the_policy_file_are_warned_of() {
        let c = parse("qos_frobnicate 1\nqos_policy_file /etc/opensm/qos-policy.conf\nqos FALSE\n")
            .unwrap();
        let lines: Vec<usize> = c.warnings.iter().map(|w| w.line).collect();
        assert_eq!(lines, [1, 2, 3]);
    }

    #[test]
    fn vls_are_masked_to_the_operational_vls() {
        let d = QosClass::default();
        assert_eq!(
            masked_sl2vl(&d.sl2vl, VlCap::Vl0To7),
            [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]
        );
        assert_eq!(masked_sl2vl(&d.sl2vl, VlCap::Vl0To14), d.sl2vl);
        let mut t = d.sl2vl;
        t[3] = 15;
        assert_eq!(masked_sl2vl(&t, VlCap::Vl0)[..4], [0, 0, 0, 15]);
    }
}
