//! Arbitrary text as `ibkit sm --config`: parsed without a panic, refused
//! with a place inside the text, or settings within their ranges.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smd::config::{parse_sm_file, LOG_LEVELS};
use std::path::Path;

#[path = "sm_file_ranges.rs"]
mod sm_file_ranges;

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
            sm_file_ranges::assert_in_range(&f);
            assert!(f.log_level.is_none_or(|l| LOG_LEVELS.contains(&l.as_str())));
            for p in [
                &f.partitions,
                &f.qos_config,
                &f.qos_policy,
                &f.log_file,
                &f.dump_dir,
                &f.cache_dir,
                &f.sa_db_file,
                &f.vm_socket,
                &f.lfts_file,
            ]
            .into_iter()
            .flatten()
            {
                assert!(p.starts_with("/etc/ibkit") || p.is_absolute());
            }
        }
    }
});
