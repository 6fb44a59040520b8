//! The PMA's sampling counters (IBA 16.1.3.2–3): PortSamplesControl starts
//! a sample of one port — it begins SampleStart ticks after the Set and
//! counts for SampleInterval ticks — and PortSamplesResult reads its
//! counts once it is done.
//!
//! Each of the 15 counters can count any of the quantities every PMA
//! samples (CounterMask 1): PortXmitData, PortRcvData, PortXmitPkts,
//! PortRcvPkts, and PortXmitWait, which stays 0 (the simulator has no
//! congestion). A counter whose CounterSelect names anything else counts
//! nothing. The counters are 32 bits wide and stop at their largest value;
//! PortSamplesResultExtended reads the same counts 64 bits wide.
//!
//! A tick is [`SAMPLE_TICK_NS`] nanoseconds of the fabric's time (Tick 0):
//! simulated time in process, the wall clock on a served fabric
//! ([`Fabric::set_pma_clock`]), so that a sample started by `perfquery`'s
//! peers ends while they wait. Each PMA keeps one sample: a switch's one
//! PMA of the port its PortSelect named, each port's PMA of a CA of its
//! own port, so that a CA's ports sample apart; a node powered up again
//! has none.
//!
//! A packet belongs to the sample when it crosses the cable at or after the
//! sample begins and before it ends: the boundaries are taken lazily, when
//! the sampled port's counters next change or the sample is read.

use super::pma::STATUS_BAD_FIELD;
use super::Fabric;
use mad_core::perf::{
    sample_counter, sample_status, PortSamplesControl, PortSamplesResult,
    PortSamplesResultExtended, ALL_PORTS, EXTENDED_WIDTH_64,
};

/// Nanoseconds a sampling tick lasts: SampleStart and SampleInterval
/// count it. IBA relates the tick to the link's transfer period; 4 ns is
/// ten of an SDR lane's (what the kernel's ipath PMA reads Tick 0 as).
pub const SAMPLE_TICK_NS: u64 = 4;

/// What every counter can count, 3 bits each: 1, the mandatory quantities.
const MASKS_1_TO_9: u32 = 0o111_111_111;
const MASKS_10_TO_14: u16 = 0o11_111;
/// CounterWidth 4: 32-bit counters.
const COUNTER_WIDTH_32: u8 = 4;

/// A node's sample: what the last PortSamplesControl Set asked, and what
/// was counted.
#[derive(Clone, Debug, Default)]
pub(super) struct Sample {
    /// The Set's fields (port, tag, selects, start and interval).
    asked: PortSamplesControl,
    /// When it begins and ends, in the PMA clock's nanoseconds.
    begins_ns: u64,
    ends_ns: u64,
    /// The sampled port's traffic counters when it began.
    at_begin: Option<[u64; 4]>,
    /// What they counted over the interval, once it ended.
    counted: Option<[u64; 4]>,
}

impl Sample {
    /// SampleStatus.
    fn status(&self) -> u8 {
        if self.counted.is_some() {
            sample_status::DONE
        } else if self.at_begin.is_some() {
            sample_status::RUNNING
        } else {
            sample_status::STARTED
        }
    }

    /// Takes the boundaries `now` has passed, the sampled port's traffic
    /// counters standing at `total` (before a packet that crosses now is
    /// counted).
    fn observe(&mut self, now: u64, total: [u64; 4]) {
        if self.at_begin.is_none() && now >= self.begins_ns {
            self.at_begin = Some(total);
        }
        if let (None, Some(b)) = (self.counted, self.at_begin) {
            if now >= self.ends_ns {
                self.counted = Some(std::array::from_fn(|i| total[i].saturating_sub(b[i])));
            }
        }
    }

    /// Each counter's count of what its select names, once done (0 before).
    fn counts(&self) -> [u64; 15] {
        let counted = self.counted.unwrap_or_default();
        self.asked.counter_selects().map(|sel| match sel {
            sample_counter::XMIT_DATA..=sample_counter::RCV_PKTS => {
                counted[usize::from(sel - sample_counter::XMIT_DATA)]
            }
            // PortXmitWait (no congestion here), and what no counter counts.
            _ => 0,
        })
    }

    /// PortSamplesResult: the counts, each stopping at its largest value.
    fn result(&self) -> PortSamplesResult {
        let mut r = PortSamplesResult {
            tag: self.asked.tag,
            sample_status: self.status(),
            ..PortSamplesResult::default()
        };
        r.set_counters(self.counts().map(|v| u32::try_from(v).unwrap_or(u32::MAX)));
        r
    }

    /// PortSamplesResultExtended: the counts, 64 bits wide.
    fn result_extended(&self) -> PortSamplesResultExtended {
        let mut r = PortSamplesResultExtended {
            tag: self.asked.tag,
            sample_status: self.status(),
            extended_width: EXTENDED_WIDTH_64,
            ..PortSamplesResultExtended::default()
        };
        r.set_counters(self.counts());
        r
    }
}

impl Fabric {
    /// Sets the clock the PMAs' samples run on, in nanoseconds (a served
    /// fabric's wall clock); without it they run on simulated time.
    pub fn set_pma_clock(&mut self, ns: u64) {
        self.pma_clock_ns = Some(ns);
    }

    fn pma_now(&self) -> u64 {
        self.pma_clock_ns.unwrap_or(self.now_ns)
    }

    /// Before the traffic counters of (node, port) change: the sample of
    /// that port takes the boundaries it has passed.
    pub(super) fn sample_observe(&mut self, node: usize, port: u8) {
        if self.samples.is_empty() {
            return;
        }
        let Some(at) = self.pma_port(node, port) else {
            return;
        };
        let now = self.pma_now();
        let total = match self.port_counts(node, port) {
            Some(c) => c.traffic(),
            None => return,
        };
        if let Some(s) = self.samples.get_mut(&(node, at)) {
            if s.asked.port_select == port {
                s.observe(now, total);
            }
        }
    }

    /// The sample of the PMA `pma` (node, port: [`Fabric::pma_port`])
    /// brought up to now, if it has one.
    fn sample_now(&mut self, pma: (usize, u8)) -> Option<&Sample> {
        let port = self.samples.get(&pma)?.asked.port_select;
        self.sample_observe(pma.0, port);
        self.samples.get(&pma)
    }

    /// A Get or Set (`set`) of PortSamplesControl at the PMA at port `at`
    /// of `node`: a Set while no sample is under way starts one;
    /// otherwise it changes nothing, and the answer says what is under
    /// way. PortSelect must name one port that PMA answers for.
    pub(super) fn samples_control(
        &mut self,
        node: usize,
        at: u8,
        set: bool,
        data: &[u8],
    ) -> (u16, Option<Vec<u8>>) {
        let Ok(q) = PortSamplesControl::decode(data) else {
            return (STATUS_BAD_FIELD, None);
        };
        if q.port_select == ALL_PORTS || self.selected(node, at, q.port_select).is_none() {
            return (STATUS_BAD_FIELD, None);
        }
        let pma = (node, at);
        let busy = self
            .sample_now(pma)
            .is_some_and(|s| s.status() != sample_status::DONE);
        if set && !busy {
            let now = self.pma_now();
            let begins_ns = now.saturating_add(u64::from(q.sample_start) * SAMPLE_TICK_NS);
            let sample = Sample {
                asked: q,
                begins_ns,
                ends_ns: begins_ns.saturating_add(u64::from(q.sample_interval) * SAMPLE_TICK_NS),
                at_begin: None,
                counted: None,
            };
            self.samples.insert(pma, sample);
            self.sample_now(pma);
        }
        // What the control holds now: the last sample's port, tag,
        // selects and ticks; before any, the port asked about and zeros.
        let (held, status) = match self.samples.get(&pma) {
            Some(s) => (s.asked, s.status()),
            None => (
                PortSamplesControl {
                    port_select: q.port_select,
                    ..PortSamplesControl::default()
                },
                sample_status::DONE,
            ),
        };
        let mut a = PortSamplesControl {
            port_select: held.port_select,
            tick: 0,
            counter_width: COUNTER_WIDTH_32,
            counter_mask0: 1,
            counter_masks_1_to_9: MASKS_1_TO_9,
            counter_masks_10_to_14: MASKS_10_TO_14,
            sample_status: status,
            sample_start: held.sample_start,
            sample_interval: held.sample_interval,
            tag: held.tag,
            ..PortSamplesControl::default()
        };
        a.set_counter_selects(held.counter_selects());
        (0, a.to_bytes().ok().map(|b| b.to_vec()))
    }

    /// A Get of PortSamplesResult (or, `extended`, of
    /// PortSamplesResultExtended) at the PMA at port `at` of `node`: the
    /// last sample's counts (0 until it is done; a PMA that never sampled
    /// answers Done and 0s).
    pub(super) fn samples_result(
        &mut self,
        node: usize,
        at: u8,
        extended: bool,
    ) -> (u16, Option<Vec<u8>>) {
        let none = Sample {
            counted: Some([0; 4]),
            ..Sample::default()
        };
        let s = self.sample_now((node, at)).unwrap_or(&none);
        let bytes = if extended {
            s.result_extended().to_bytes().map(|b| b.to_vec())
        } else {
            s.result().to_bytes().map(|b| b.to_vec())
        };
        (0, bytes.ok())
    }

    /// The node was powered up again: its PMAs' samples are gone.
    pub(super) fn forget_sample(&mut self, node: usize) {
        self.samples.retain(|&(n, _), _| n != node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_counts_what_crosses_between_its_boundaries() {
        let mut asked = PortSamplesControl {
            sample_start: 10,
            sample_interval: 5,
            tag: 9,
            ..PortSamplesControl::default()
        };
        asked.set_counter_selects([
            sample_counter::XMIT_PKTS,
            sample_counter::RCV_DATA,
            sample_counter::XMIT_WAIT,
            0x1234,
            sample_counter::XMIT_PKTS,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            sample_counter::RCV_PKTS,
        ]);
        let mut s = Sample {
            asked,
            begins_ns: 40,
            ends_ns: 60,
            ..Sample::default()
        };
        s.observe(39, [0, 0, 5, 0]);
        assert_eq!(s.status(), sample_status::STARTED);
        assert_eq!(s.result().counters(), [0; 15], "nothing until done");
        s.observe(40, [0, 72, 5, 1]);
        assert_eq!(s.status(), sample_status::RUNNING);
        s.observe(59, [0, 144, 7, 2]);
        assert_eq!(s.status(), sample_status::RUNNING);
        s.observe(60, [0, 216, 8, 3]);
        assert_eq!(s.status(), sample_status::DONE);
        s.observe(99, [0, 999, 99, 99]);
        let r = s.result();
        assert_eq!(r.tag, 9);
        let c = r.counters();
        assert_eq!((c[0], c[1], c[4], c[14]), (3, 144, 3, 2));
        assert_eq!((c[2], c[3], c[5]), (0, 0, 0), "XmitWait, unknown, unused");
        // A counter stops at its largest value.
        let mut big = Sample {
            asked,
            ends_ns: 10,
            ..Sample::default()
        };
        big.observe(0, [0; 4]);
        big.observe(10, [0, 0, 1 << 40, 0]);
        assert_eq!(big.result().counters()[0], u32::MAX);
        // The extended result is not capped, and says its width.
        let x = big.result_extended();
        assert_eq!(
            (x.counters()[0], x.extended_width),
            (1 << 40, EXTENDED_WIDTH_64)
        );
    }

    proptest::proptest! {
        /// Whatever the packets' times, a sample counts exactly those that
        /// cross at or after its beginning and before its end, its
        /// boundaries taken only when the counters change or it is read.
        #[test]
        fn a_sample_counts_exactly_its_interval(
            begins in 0u64..200,
            length in 0u64..200,
            mut times in proptest::collection::vec(0u64..500, 0..60),
            reads in proptest::collection::vec(0u64..500, 0..5),
        ) {
            times.sort_unstable();
            let mut s = Sample {
                begins_ns: begins,
                ends_ns: begins + length,
                ..Sample::default()
            };
            let mut events: Vec<(u64, bool)> = times.iter().map(|&t| (t, true)).collect();
            events.extend(reads.iter().map(|&t| (t, false)));
            events.sort_unstable();
            let mut total = [0u64; 4];
            for (t, packet) in events {
                s.observe(t, total);
                if packet {
                    total[2] += 1;
                    total[0] += 72;
                }
            }
            s.observe(u64::MAX, total);
            let want = times.iter().filter(|&&t| t >= begins && t < begins + length).count() as u64;
            proptest::prop_assert_eq!(s.counted, Some([want * 72, 0, want, 0]));
        }
    }
}
