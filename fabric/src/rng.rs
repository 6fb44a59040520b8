//! The simulator's seeded pseudo-random generator, for whatever needs a
//! reproducible stream: the same seed gives the same numbers on every
//! machine and every run.
//!
//! It is Marsaglia's xorshift64 with the shift triple (13, 7, 17): fast,
//! small, and good enough for loss draws and randomized tests, not for
//! anything that needs unpredictability. [`Fabric`](crate::sim::Fabric)
//! draws its cable losses from it (seeded with
//! [`SimConfig::seed`](crate::sim::SimConfig::seed)), so changing the
//! generator would change which SMPs a lossy run loses.
//!
//! ```
//! use fabric::rng::Rng;
//!
//! let (mut a, mut b) = (Rng::new(42), Rng::new(42));
//! assert_eq!(a.next_u64(), b.next_u64());
//! assert!(a.below(10) < 10);
//! let u = a.unit_f64();
//! assert!((0.0..1.0).contains(&u));
//! ```

/// A seeded xorshift64 generator (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`. The low bit is set (xorshift's
    /// state must not be 0), so `seed` and `seed | 1` give the same stream.
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`: the next 64 bits modulo `n` (slightly biased
    /// toward small numbers when `n` is not a power of two).
    ///
    /// # Panics
    ///
    /// When `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Fills `b`, a byte from each draw (its low 8 bits).
    pub fn fill_bytes(&mut self, b: &mut [u8]) {
        for x in b {
            *x = self.next_u64() as u8;
        }
    }

    /// A number in `[0, 1)`: the top 53 bits of the next draw, scaled.
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn it_is_xorshift64_13_7_17() {
        // The first draws from seed 1, by the recurrence written out.
        let mut x = 1u64;
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            assert_eq!(r.next_u64(), x);
        }
        assert_eq!(Rng::new(1).next_u64(), 0x4082_2041);
    }

    #[test]
    fn seeds_below_and_unit() {
        assert_eq!(Rng::new(6), Rng::new(7), "the low bit is forced on");
        assert_ne!(Rng::new(6).next_u64(), Rng::new(9).next_u64());
        let mut r = Rng::new(0x9E37_79B9_7F4A_7C15);
        for n in [1, 2, 37, 1 << 40] {
            assert!(r.below(n) < n);
        }
        for _ in 0..10_000 {
            let u = r.unit_f64();
            assert!((0.0..1.0).contains(&u), "{u}");
        }
    }
}
