//! Questions about QoS tables the SM does not hold.
//!
//! The SM knows the SL-to-VL and VL arbitration tables it wrote under a
//! QoS policy; without one it writes none and the ports keep what they
//! hold. A SLtoVLMappingTableRecord or VLArbitrationTableRecord query that
//! names a port by its LID and finds a table the SM does not hold is
//! parked: the SA asks the SM to read the table ([`crate::Sa::take_qos_reads`]
//! into [`smi::sm::Sm::read_qos_table`]), and answers when every table it
//! named has been read or refused, or after [`WAIT_MS`], with what is held
//! then ([`crate::Sa::resume`]). OpenSM's SA answers such a query from
//! tables it never read (zeros); ibkit's answers from the port.
//!
//! Bounded: at most [`MAX_PARKED`] questions wait, [`MAX_PARKED_PER_REQUESTER`]
//! of them one requester's, a question names at most [`MAX_TABLES`]
//! tables, and at most [`MAX_READS_PER_SECOND`] reads are asked a second,
//! [`MAX_READS_PER_REQUESTER_PER_SECOND`] of them for one requester while
//! another has had reads this second or the one before; past any of these
//! a question is answered at once from what the SM holds. A table asked
//! and not answered within [`WAIT_MS`] is not asked again for
//! [`RETRY_MS`].

use crate::{Addr, TransferKey};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use mad_core::sa::SaMad;
use smi::sm::qos::QosTable;
use smi::sm::Subnet;

/// Questions waiting at most.
pub const MAX_PARKED: usize = 16;
/// Questions one requester (its port, under any of its LIDs) may have
/// waiting at once: a host asking in a loop leaves room for the others.
pub const MAX_PARKED_PER_REQUESTER: usize = 4;
/// Tables one question may have read: every VL arbitration block of a
/// 36-port switch within its ports' caps (37 ports × 2 on the usual
/// 8-entry caps), or the SL-to-VL tables from every input of such a
/// switch to one output (37), fit; all its SL-to-VL tables (37²) do not.
pub const MAX_TABLES: usize = 128;
/// Reads asked of the SM a second at most.
pub const MAX_READS_PER_SECOND: usize = 256;
/// Reads one requester's questions may ask a second while another
/// requester has had reads this second or the one before: half of
/// [`MAX_READS_PER_SECOND`], so a host asking in a loop leaves the other
/// half to the others, and one question of [`MAX_TABLES`] still fits. A
/// requester alone may have them all (a host reading every port's tables,
/// as `osmtest -f q` does).
pub const MAX_READS_PER_REQUESTER_PER_SECOND: usize = 128;
/// How long a question waits for its tables (ms).
pub const WAIT_MS: u64 = 500;
/// How long a table asked and never answered is not asked again (ms).
pub const RETRY_MS: u64 = 10_000;

/// A question about QoS tables: who asked, and what.
#[derive(Clone, Debug)]
pub(crate) struct Question {
    pub(crate) key: TransferKey,
    pub(crate) from: Addr,
    pub(crate) head: SaMad,
    pub(crate) data: Vec<u8>,
}

/// A question waiting for tables.
#[derive(Clone, Debug)]
struct Parked {
    question: Question,
    tables: Vec<QosTable>,
    deadline: u64,
}

/// What a table is to a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// The SM holds it, or its port refused it: answered from that.
    Known,
    /// Asked of the SM within [`WAIT_MS`]: worth waiting for.
    Pending,
    /// Asked and not answered in time: not worth waiting for.
    Failed,
    /// Never asked, or long ago.
    Unknown,
}

/// The parked questions and the reads asked of the SM.
#[derive(Clone, Debug, Default)]
pub(crate) struct QosReads {
    parked: Vec<Parked>,
    /// Tables asked of the SM, with when.
    asked: BTreeMap<QosTable, u64>,
    /// Tables to ask, not yet taken by the driver.
    to_read: Vec<QosTable>,
    /// The second reads are counted from (ms).
    second: u64,
    /// Reads asked this second for each requester (its base LID), whose
    /// sum is the second's: one entry per requester whose question asked
    /// a read this second, so at most [`MAX_READS_PER_SECOND`] entries.
    second_by: BTreeMap<mad_core::Lid, usize>,
    /// The requesters that had reads in the second before (as many).
    second_before: Vec<mad_core::Lid>,
    /// When `asked` was last pruned (ms).
    pruned: u64,
}

fn known(s: &Subnet, t: &QosTable) -> bool {
    s.qos_table_refused(*t)
        || match *t {
            QosTable::SlToVl {
                node,
                input,
                output,
            } => s.sl2vl_table(node, input, output).is_some(),
            QosTable::VlArb { node, port, block } => s.vlarb_block(node, port, block).is_some(),
        }
}

impl QosReads {
    fn state(&self, s: &Subnet, t: &QosTable, now_ms: u64) -> State {
        if known(s, t) {
            return State::Known;
        }
        match self.asked.get(t) {
            Some(&at) if now_ms < at.saturating_add(WAIT_MS) => State::Pending,
            Some(&at) if now_ms < at.saturating_add(RETRY_MS) => State::Failed,
            _ => State::Unknown,
        }
    }

    /// True when the question `key` is waiting (a requester asking again
    /// meanwhile is not answered twice).
    pub(crate) fn is_parked(&self, key: &TransferKey) -> bool {
        self.parked.iter().any(|p| p.question.key == *key)
    }

    /// Parks `question` if some of `tables` are worth waiting for and the
    /// bounds allow: true when it is parked (and the reads it needs are
    /// queued).
    pub(crate) fn park(
        &mut self,
        s: &Subnet,
        question: Question,
        tables: Vec<QosTable>,
        now_ms: u64,
    ) -> bool {
        if self.parked.len() >= MAX_PARKED || tables.is_empty() || tables.len() > MAX_TABLES {
            return false;
        }
        let me = crate::query::base_lid(s, question.from.lid);
        let mine = (self.parked.iter())
            .filter(|p| crate::query::base_lid(s, p.question.from.lid) == me)
            .count();
        if mine >= MAX_PARKED_PER_REQUESTER {
            return false;
        }
        // The tables worth waiting for: being read, or to be read now.
        let waiting: Vec<(QosTable, State)> = (tables.into_iter())
            .map(|t| (t, self.state(s, &t, now_ms)))
            .filter(|(_, x)| matches!(x, State::Pending | State::Unknown))
            .collect();
        if waiting.is_empty() {
            return false;
        }
        let unknown = waiting.iter().filter(|(_, x)| *x == State::Unknown).count();
        let start = self.second;
        if !(start..start.saturating_add(1000)).contains(&now_ms) {
            // The requesters of the second just past are remembered; of
            // one longer ago, none.
            let just_past = now_ms < start.saturating_add(2000);
            let by = core::mem::take(&mut self.second_by);
            self.second_before = if just_past {
                by.into_keys().collect()
            } else {
                Vec::new()
            };
            self.second = now_ms;
        }
        let theirs = self.second_by.get(&me).copied().unwrap_or(0);
        let shared = self
            .second_by
            .keys()
            .chain(&self.second_before)
            .any(|&l| l != me);
        let cap = if shared {
            MAX_READS_PER_REQUESTER_PER_SECOND
        } else {
            MAX_READS_PER_SECOND
        };
        let all: usize = self.second_by.values().sum();
        if unknown > 0 && (all + unknown > MAX_READS_PER_SECOND || theirs + unknown > cap) {
            return false;
        }
        if unknown > 0 {
            self.second_by.insert(me, theirs + unknown);
        }
        for &(t, x) in &waiting {
            if x == State::Unknown {
                self.asked.insert(t, now_ms);
                self.to_read.push(t);
            }
        }
        self.parked.push(Parked {
            question,
            tables: waiting.into_iter().map(|(t, _)| t).collect(),
            deadline: now_ms.saturating_add(WAIT_MS),
        });
        true
    }

    /// The reads to ask of the SM, taken once.
    pub(crate) fn take_reads(&mut self) -> Vec<QosTable> {
        core::mem::take(&mut self.to_read)
    }

    /// The questions that may be answered now: every table they wait for
    /// is known, or their time is up. Tables asked long ago are
    /// forgotten.
    pub(crate) fn ready(&mut self, s: &Subnet, now_ms: u64) -> Vec<Question> {
        if !self.asked.is_empty() && now_ms >= self.pruned.saturating_add(1000) {
            self.pruned = now_ms;
            self.asked
                .retain(|_, at| now_ms < at.saturating_add(RETRY_MS));
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.parked.len() {
            let p = &self.parked[i];
            if now_ms >= p.deadline || p.tables.iter().all(|t| known(s, t)) {
                out.push(self.parked.remove(i).question);
            } else {
                i += 1;
            }
        }
        out
    }

    /// When the first parked question's time is up.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.parked.iter().map(|p| p.deadline).min()
    }

    /// Drops every waiting question: how many there were.
    pub(crate) fn clear(&mut self) -> usize {
        let n = self.parked.len();
        self.parked.clear();
        self.to_read.clear();
        n
    }

    /// Questions waiting.
    pub(crate) fn parked(&self) -> usize {
        self.parked.len()
    }
}
