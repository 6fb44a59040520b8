//! Arbitrary text as `ibkit sm --config`: parsed without a panic, refused
//! with a place inside the text, or settings within their ranges.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smd::config::{parse_sm_file, LOG_LEVELS};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_sm_file(text, Path::new("/etc/ibkit")) {
        Err(e) => {
            assert!(e.line >= 1 && e.line <= text.split('\n').count(), "{e}");
            assert!(e.column >= 1 && e.column <= text.len() + 1, "{e}");
        }
        Ok(f) => {
            assert!(f.priority.is_none_or(|p| p <= 15));
            assert!(f.poll_ms.is_none_or(|p| (10..=3_600_000).contains(&p)));
            // 0: no periodic sweep.
            assert!(f.sweep_ms.is_none_or(|p| p <= 86_400_000));
            assert!(f.m_key_protection_level.is_none_or(|l| l <= 3));
            let l = f.link_params();
            assert!(l.hoq_lifetime <= 31 && l.leaf_hoq_lifetime <= 31);
            assert!(l.vl_stall_count <= 7 && l.leaf_vl_stall_count <= 7);
            assert!((1..=5).contains(&l.max_op_vls));
            assert!(l.local_phy_errors_threshold <= 15 && l.overrun_errors_threshold <= 15);
            assert!(l.packet_life_time <= 31 && l.sm_sl <= 15);
            assert!(f.subnet_timeout.is_none_or(|t| t <= 31));
            assert!(f.log_level.is_none_or(|l| LOG_LEVELS.contains(&l.as_str())));
            for p in [
                &f.partitions,
                &f.qos_config,
                &f.qos_policy,
                &f.log_file,
                &f.dump_dir,
                &f.cache_dir,
            ]
            .into_iter()
            .flatten()
            {
                assert!(p.starts_with("/etc/ibkit") || p.is_absolute());
            }
        }
    }
});
