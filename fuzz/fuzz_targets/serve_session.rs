//! `ibkit fabric serve`'s own bookkeeping (`fabric::serve::Session`) under
//! what its clients send: control requests of every type (attach, detach,
//! the local reads, the SM flag) for any slot and node, packets on any
//! slot, ibkit's control commands as text, clients dropped, clients dying,
//! time passing. Nothing may panic; every packet gets at most one answer;
//! no more clients than slots; the fabric keeps answering.
#![no_main]

use fabric::ibsim::{CtlType, SimCtl, CTL_SIZE, MAX_CLIENTS, REQ_SIZE};
use fabric::serve::{Access, Peer, Session, Transport};
use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};

const ME: u32 = 1000;

struct Mock {
    dead: u16,
}

impl Transport for Mock {
    fn connect(&mut self, _slot: usize, id: u32) -> Result<(), String> {
        if id % 7 == 6 {
            Err("Connection refused".into())
        } else {
            Ok(())
        }
    }
    fn alive(&mut self, id: u32) -> bool {
        self.dead & (1 << (id % 16)) == 0
    }
}

fuzz_target!(|data: &[u8]| {
    static TOPO: std::sync::OnceLock<Topology> = std::sync::OnceLock::new();
    let topo = TOPO
        .get_or_init(|| Topology::from_spec("mport-ntree:4:2").expect("a fixed topology"))
        .clone();
    let f = Fabric::new(topo, SimConfig::default()).expect("a valid fabric");
    let names: Vec<String> = f.topo.nodes.iter().map(|n| n.name.clone()).collect();
    let mut now = Instant::now();
    let mut s = Session::new(f, Access::new(ME, &[]), now);
    let mut t = Mock { dead: 0 };
    let mut rest = data;
    let mut steps = 0;
    // Each step: op, a, b, then what the op takes.
    while rest.len() >= 3 && steps < 32 {
        steps += 1;
        let (op, a, b) = (rest[0], rest[1], rest[2]);
        rest = &rest[3..];
        let peer = match b % 8 {
            0 => None,
            1 => Some(Peer { uid: 4242, pid: 1 }),
            _ => Some(Peer { uid: ME, pid: 2 }),
        };
        let mut packets = 0;
        let mut raised = 0usize;
        match op % 8 {
            // A control request: type a, client b, 64 bytes of data.
            0 | 1 => {
                let mut d = [0u8; 64];
                let n = rest.len().min(64);
                d[..n].copy_from_slice(&rest[..n]);
                rest = &rest[n..];
                if op % 8 == 1 {
                    // A Connect that names a node (or not).
                    d[12..44].fill(0);
                    if a % 4 != 0 {
                        let name = names[usize::from(a) % names.len()].as_bytes();
                        d[12..12 + name.len().min(31)].copy_from_slice(&name[..name.len().min(31)]);
                    }
                }
                let kind = if op % 8 == 1 { 1 } else { u32::from(a % 12) };
                let mut raw = SimCtl {
                    client: u32::from(b % 12),
                    kind: CtlType::Error,
                    len: 64,
                    data: d,
                }
                .encode();
                raw[8..12].copy_from_slice(&kind.to_ne_bytes());
                let _ = s.on_ctl(&raw[..CTL_SIZE], peer, &mut t, now);
            }
            // A packet of up to 288 bytes on slot a.
            2 | 3 => {
                let n = rest.len().min(REQ_SIZE + usize::from(b % 2));
                let (pkt, tail) = rest.split_at(n);
                rest = tail;
                let slot = usize::from(a) % (MAX_CLIENTS + 1);
                s.on_packet(slot, pkt, peer, now);
                packets += 1;
            }
            // A command line.
            4 => {
                let n = rest.len().min(usize::from(a % 48));
                let line = String::from_utf8_lossy(&rest[..n]).into_owned();
                rest = &rest[n..];
                let verbs = [
                    "link-down",
                    "link-up",
                    "node-down",
                    "node-up",
                    "stats",
                    "dump",
                    "reload-sm",
                    "node-desc",
                    "port-error",
                    "sys-guid",
                ];
                let cmd = format!(
                    "{} {} {}",
                    verbs[usize::from(b) % verbs.len()],
                    names[usize::from(a) % names.len()],
                    line
                );
                let _ = s.on_command(&cmd, peer, now);
                let _ = s.on_command(&line, peer, now);
                // Each port-error may raise its count of traps.
                if cmd.starts_with("port-error") || line.trim_start().starts_with("port-error") {
                    raised += 2 * fabric::serve::MAX_PORT_ERRORS as usize;
                }
            }
            5 => s.drop_client(usize::from(a) % (MAX_CLIENTS + 1), "fuzz"),
            6 => {
                t.dead = u16::from_be_bytes([a, b]);
                s.reap(&mut t);
            }
            _ => now += Duration::from_millis(u64::from(a) * 10),
        }
        s.settle();
        assert!(s.listening().count() <= MAX_CLIENTS);
        let out: usize = (0..MAX_CLIENTS).map(|i| s.take_outbox(i).len()).sum();
        // A command's settle can time out requests still outstanding, and
        // traps come unasked; but never a flood.
        assert!(
            out <= packets + raised + 64,
            "{out} datagrams for {packets} packets"
        );
        let _ = s.dump();
    }
});
