//! An SM bringing up a fabric whose every answer is the fuzzer's: each
//! SMP the SM sends is answered by its TID (so the SM takes it), with the
//! attribute data, the status, or silence taken from the input — NodeInfo
//! with any GUIDs, port counts and port numbers (a GUID in two places, a
//! port past the node's last), PortInfo in any state with any LID,
//! SwitchInfo with any caps, tables of anything. What a fabric's agents
//! answer is bytes from outside the SM. No panic, and the SMPs the SM
//! sends stays bounded. The first byte's bit 0 also has the SM sweep
//! every second for as long as answers last, and bit 1 makes every sweep
//! a heavy one: its SMPs answered by the fuzzer too, so nodes go out of
//! reach, come back by other routes, or never.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mad_core::Status;
use smi::sm::{Sm, SmConfig};

fuzz_target!(|data: &[u8]| {
    let Some((&opt, mut input)) = data.split_first() else {
        return;
    };
    let sweeps = opt & 1 != 0;
    let mut sm = Sm::new(SmConfig {
        sweep_interval_ms: sweeps.then_some(1000),
        force_heavy_sweep: opt & 2 != 0,
        ..SmConfig::default()
    });
    let mut now = 0u64;
    let mut sent = 0usize;
    // Simulated time after the answers ran out: enough for every retry
    // and round to be given up.
    let mut after = 0;
    // Steps in a row with nothing sent: an SM that sends nothing more
    // (failed, or between sweeps that find nothing) takes no answer.
    let mut quiet = 0;
    while after < 300 && quiet < 100 {
        quiet += 1;
        while let Some(t) = sm.poll_transmit(now) {
            quiet = 0;
            sent += 1;
            assert!(sent < 200_000, "the SM sends without end");
            // An answer: a control byte (bit 7: none; bit 6: an error
            // status; bits 5..0: how many data bytes follow, the rest 0).
            let Some((&ctl, rest)) = input.split_first() else {
                continue;
            };
            let n = usize::from(ctl & 0x3F).min(rest.len());
            let (bytes, rest) = rest.split_at(n);
            input = rest;
            if ctl & 0x80 != 0 {
                continue;
            }
            let mut resp = t.smp.clone();
            smi::dr::make_response(&mut resp);
            if ctl & 0x40 != 0 {
                resp.set_status(Status::INVALID_FIELD);
            }
            resp.data = [0; 64];
            resp.data[..n].copy_from_slice(bytes);
            let _ = sm.handle_mad(resp.as_wire(), now);
        }
        if sm.is_idle() && (!sweeps || input.is_empty()) {
            break;
        }
        if input.is_empty() {
            after += 1;
        }
        now += 100;
        sm.handle_timeout(now);
    }
});
