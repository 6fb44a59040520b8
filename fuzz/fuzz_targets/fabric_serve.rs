//! What `ibkit fabric serve` does with its clients' packets and control
//! commands, on a small fabric: arbitrary SMPs injected at arbitrary nodes,
//! directed-route or LID-routed to arbitrary LIDs (so they may write LIDs,
//! forwarding tables into loops, port states), links and nodes taken down
//! and up, the fabric run until nothing is in flight after each. Nothing may
//! panic or run for good: a packet in an LFT loop must expire.
#![no_main]

use fabric::sim::{Fabric, FabricEvent, SimConfig};
use fabric::topology::Topology;
use libfuzzer_sys::fuzz_target;
use mad_core::Smp;

fuzz_target!(|data: &[u8]| {
    static TOPO: std::sync::OnceLock<Topology> = std::sync::OnceLock::new();
    let topo = TOPO
        .get_or_init(|| Topology::from_spec("mport-ntree:4:2").expect("a fixed topology"))
        .clone();
    let mut f = Fabric::new(topo, SimConfig::default()).expect("a valid fabric");
    let n = f.nodes.len();
    // Each step: op, node, port or LID (2 bytes), then for a packet the MAD.
    let mut rest = data;
    let mut steps = 0;
    while rest.len() >= 4 && steps < 16 {
        steps += 1;
        let (op, node, arg) = (
            rest[0],
            usize::from(rest[1]) % n,
            u16::from_be_bytes([rest[2], rest[3]]),
        );
        rest = &rest[4..];
        match op % 8 {
            0..=3 => {
                if rest.len() < 256 {
                    break;
                }
                let (mad, tail) = rest.split_at(256);
                rest = tail;
                let Ok(smp) = Smp::parse(mad) else { continue };
                let dlid = if op % 8 < 2 { 0xFFFF } else { arg };
                f.attach(node);
                f.inject(node, smp.clone(), dlid);
            }
            4 => f.schedule(f.now_ns(), FabricEvent::LinkDown(node, (arg % 9) as u8)),
            5 => f.schedule(f.now_ns(), FabricEvent::LinkUp(node, (arg % 9) as u8)),
            6 => f.schedule(f.now_ns(), FabricEvent::NodeDown(node)),
            _ => f.schedule(f.now_ns(), FabricEvent::NodeUp(node)),
        }
        f.run_to_quiescence();
        let _ = f.take_delivered();
        let _ = f.take_inbox();
    }
    // The route check on whatever the packets left (one input in 64: it
    // costs more than the rest).
    if data.first().is_some_and(|b| b % 64 == 0) {
        let _ = f.verify().ok();
    }
});
