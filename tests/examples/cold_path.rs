//! What a PathRecord Get costs the SA when its caches are cold, as at
//! window 1 of `ibkit bench sa`, where the load generator and the
//! simulator run between two queries.
//!
//! `cargo run --release -p tests --example cold_path [-- TOPOLOGY [QUERIES]]`
//! brings the fabric up (fat-tree-648 by default) with ibkit's SM, then asks
//! the SA for the PathRecord of random CA pairs, by LIDs, one MAD in and one
//! out at a time, three ways: the same pair again and again (what criterion's
//! `path` bench times), random pairs back to back, and random pairs with the
//! core's private caches emptied before each one (an 8 MiB buffer walked in
//! a scattered order: more than this machine's 2 MiB of L2 a core, so the
//! SA's code and data are left only in the shared L3 or memory). Only the
//! query and the check of its answer are timed ([`PathAsker::ask`]). It prints the median and the
//! 90th and 99th percentiles of each.

use fabric::sim::{bring_up, SimConfig};
use mad_core::Lid;
use smi::sm::SmConfig;
use std::hint::black_box;
use std::time::Instant;
use tests::sa_bench::{ca_lids, PathAsker};

/// Bytes walked to empty the private caches.
const THRASH: usize = 8 << 20;

/// A small xorshift generator: the pairs and the walk need no quality,
/// only to be the same from run to run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Writes one byte of each cache line of `buf`, in a scattered order.
fn thrash(buf: &mut [u8], rng: &mut Rng) {
    let lines = buf.len() / 64;
    let start = (rng.next() as usize) % lines;
    // 4099 is prime and does not divide the line count: every line once.
    for i in 0..lines {
        let l = (start + i * 4099) % lines;
        buf[l * 64] = buf[l * 64].wrapping_add(1);
    }
    black_box(&buf[..]);
}

fn percentiles(mut ns: Vec<u64>) -> (u64, u64, u64) {
    ns.sort_unstable();
    let at = |p: f64| ns[((ns.len() - 1) as f64 * p) as usize];
    (at(0.5), at(0.9), at(0.99))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let spec = args.next().unwrap_or_else(|| "fat-tree-648".into());
    let n: usize = match args.next().map(|s| s.parse()) {
        None => 20_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("cold_path: QUERIES is a positive number");
            std::process::exit(2);
        }
    };
    let (f, sm, up) = match bring_up(&spec, SimConfig::default(), SmConfig::default()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cold_path: {spec}: {e}");
            std::process::exit(2);
        }
    };
    if !up {
        eprintln!("cold_path: {spec}: the subnet did not come up");
        std::process::exit(1);
    }
    let lids = ca_lids(&f);
    let mut asker = PathAsker::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = vec![0u8; THRASH];
    let mut wrong = 0u64;
    let mut run = |pairs: &[(Lid, Lid)], cold: bool, rng: &mut Rng| -> Vec<u64> {
        let mut ns = Vec::with_capacity(pairs.len());
        for &(s, d) in pairs {
            if cold {
                thrash(&mut buf, rng);
            }
            let t = Instant::now();
            let good = asker.ask(sm.subnet(), s, d);
            ns.push(t.elapsed().as_nanos() as u64);
            wrong += u64::from(!good);
        }
        ns
    };
    let random: Vec<(Lid, Lid)> = (0..n)
        .map(|_| {
            let s = lids[rng.next() as usize % lids.len()];
            (s, lids[rng.next() as usize % lids.len()])
        })
        .collect();
    let same = vec![(lids[1], lids[lids.len() - 1]); n];
    // Warm the code once.
    run(&random[..n.min(1000)], false, &mut rng);
    let rows = [
        ("the same pair, back to back", run(&same, false, &mut rng)),
        ("random pairs, back to back", run(&random, false, &mut rng)),
        (
            "random pairs, private caches emptied before each",
            run(&random, true, &mut rng),
        ),
    ];
    println!(
        "{spec}: {} CAs; {n} PathRecord Gets by LIDs each way, only the query and its check timed (ns)",
        lids.len()
    );
    println!("{:<50} {:>8} {:>8} {:>8}", "", "median", "p90", "p99");
    for (name, ns) in rows {
        let (p50, p90, p99) = percentiles(ns);
        println!("{name:<50} {p50:>8} {p90:>8} {p99:>8}");
    }
    if wrong != 0 {
        eprintln!("cold_path: {wrong} answers were refused or named another pair");
        std::process::exit(1);
    }
}
