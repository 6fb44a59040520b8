//! Arbitrary text as OpenSM's `opensm.conf` (`ibkit sm --opensm-config`):
//! parsed without a panic, refused with a place inside the text, or
//! settings within their ranges, with notes that point at lines of the
//! text and grow no faster than it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smd::config::LOG_LEVELS;
use smd::opensm_conf::parse_opensm_conf;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Path::new("/etc/opensm/opensm.conf");
    let lines = text.lines().count();
    match parse_opensm_conf(text, file, &|p: &Path| p.as_os_str().len() % 2 == 0) {
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines, "{e}");
            let l = text.lines().nth(e.line - 1).unwrap();
            assert!(e.column >= 1 && e.column <= l.len() + 1, "{e}");
        }
        Ok(c) => {
            let f = &c.settings;
            assert!(f.priority.is_none_or(|p| p <= 15));
            assert!(f.lmc.is_none_or(|l| l <= 7));
            assert!(f.poll_ms.is_none_or(|p| (10..=3_600_000).contains(&p)));
            // 0: no periodic sweep, as OpenSM's sweep_interval 0.
            assert!(f.sweep_ms.is_none_or(|p| p <= 86_400_000));
            assert!(f.m_key_protection_level.is_none_or(|l| l <= 3));
            // A protected M_Key's lease outlasts the sweep interval, as
            // OpenSM keeps it (a sweep interval of 65,535 s or more
            // aside: the lease has 16 bits).
            let lease = u64::from(f.m_key_lease_period.unwrap_or(0));
            let sweep = f.sweep_ms.unwrap_or(10_000) / 1000;
            if f.m_key_protection_level.unwrap_or(0) != 0 && lease != 0 && sweep != 0 {
                assert!(sweep < lease || lease == 65_535, "{sweep} {lease}");
            }
            let l = f.link_params();
            assert!(l.hoq_lifetime <= 31 && l.leaf_hoq_lifetime <= 31);
            assert!(l.vl_stall_count <= 7 && l.leaf_vl_stall_count <= 7);
            assert!((1..=5).contains(&l.max_op_vls));
            assert!(l.local_phy_errors_threshold <= 15 && l.overrun_errors_threshold <= 15);
            assert!(l.packet_life_time <= 31 && l.sm_sl <= 15);
            assert!(f.subnet_timeout.is_none_or(|t| t <= 31));
            assert!(f.timeout_ms.is_none_or(|t| (10..=10_000).contains(&t)));
            assert!(f.retries.is_none_or(|r| r <= 20));
            assert!(f.guid != Some(0));
            assert!(f
                .log_level
                .as_ref()
                .is_none_or(|l| LOG_LEVELS.contains(&l.as_str())));
            // QoS tables come from this file, and only with qos TRUE.
            assert_eq!(f.qos_config.is_some(), f.qos == Some(true));
            assert!(f.qos_config.as_deref().is_none_or(|p| p == file));
            assert!(f.qos_policy.is_none() || f.qos == Some(true));
            for n in &c.notes {
                assert!(n.line <= lines, "{n:?}");
            }
            assert!(c.notes.len() <= text.len() + 1);
        }
    }
});
