//! Arbitrary MADs to a running SM, as other agents send them: SubnGet and
//! SubnSet(SMInfo) from other SMs, traps, stray responses — each chunk a
//! source LID and up to 256 bytes. No panic; each MAD queues at most a
//! bounded number of SMPs; a Set without the SM_Key changes no state.
//! The first byte, odd, picks an SM started NOT ACTIVE (OpenSM's
//! `sm_inactive`) instead, which a master's Discover wakes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mad_core::attr::{AttributeId, SmInfo};
use mad_core::{Lid, Method, Smp};
use smi::sm::{Sm, SmConfig};
use std::sync::OnceLock;

fn running() -> &'static Sm {
    static SM: OnceLock<Sm> = OnceLock::new();
    SM.get_or_init(|| {
        let (_f, sm, up) = fabric::sim::bring_up(
            "mport-ntree:2:2",
            fabric::sim::SimConfig::default(),
            SmConfig::default(),
        )
        .unwrap();
        assert!(up);
        sm
    })
}

fn inactive() -> Sm {
    let mut sm = Sm::new(SmConfig {
        sm_inactive: true,
        ..SmConfig::default()
    });
    sm.set_own_port_guid(0x0002_c903_0000_1234);
    sm
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, data)) = data.split_first() else {
        return;
    };
    let mut sm = if pick & 1 == 1 {
        inactive()
    } else {
        running().clone()
    };
    for (i, chunk) in data.chunks(258).enumerate() {
        if chunk.len() < 2 {
            break;
        }
        let slid = Lid(u16::from_be_bytes([chunk[0], chunk[1]]));
        let mad = &chunk[2..];
        let state = sm.sm_state();
        let keyless_set = Smp::parse(mad).is_ok_and(|s| {
            s.method() == Method::Set
                && s.attribute_id() == AttributeId::SmInfo
                && SmInfo::decode(&s.data).is_ok_and(|i| i.sm_key.0 != 1)
        });
        let now = i as u64 * 10;
        let _ = sm.handle_mad_from(mad, Some(slid), now);
        if keyless_set {
            assert_eq!(
                sm.sm_state(),
                state,
                "a Set without the SM_Key moved the SM"
            );
        }
        let mut sent = 0;
        while sm.poll_transmit(now).is_some() {
            sent += 1;
            assert!(sent < 100_000, "one MAD queued without end");
        }
        sm.handle_timeout(now + 5);
    }
});
