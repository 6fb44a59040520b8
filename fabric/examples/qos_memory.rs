//! What QoS costs in memory at scale: a fabric brought up by ibkit's SM
//! in the simulator, with OpenSM's default QoS options or without, and
//! the process's resident size before and after.
//!
//! `cargo run --release -p fabric --example qos_memory -- fat-tree-11664 [--qos]`

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use smi::sm::{Sm, SmConfig};

/// VmRSS of this process, in kB.
fn rss_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (s.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let spec = args.next().unwrap_or_else(|| "fat-tree-324".into());
    let qos = args.next().as_deref() == Some("--qos");
    let topo = match Topology::from_spec(&spec) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("qos_memory: {e}");
            std::process::exit(2);
        }
    };
    let t = std::time::Instant::now();
    let mut f = Fabric::new(topo, SimConfig::default()).expect("a fabric");
    let mut sm = Sm::new(SmConfig::default());
    if qos {
        sm.set_qos(smi::sm::qos::parse("").expect("OpenSM's defaults"));
    }
    let before = rss_kb();
    if !f.bring_up(&mut sm) {
        eprintln!("qos_memory: the subnet did not come up: {:?}", sm.error());
        std::process::exit(2);
    }
    println!(
        "{spec}, QoS {}: {} kB resident before the bring-up, {} kB after; {} SL-to-VL tables known, in {:.2?}",
        if qos { "on" } else { "off" },
        before,
        rss_kb(),
        sm.subnet().sl2vl_tables().count(),
        t.elapsed()
    );
}
