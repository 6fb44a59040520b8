//! What both configuration readers (`--config`, `--opensm-config`) must
//! give: every setting the two share within its range. Included by the
//! `sm_config` and `opensm_conf_parse` targets (not a target itself).

use smd::config::SmFile;

/// Panics when a shared setting of `f` is out of its range.
pub fn assert_in_range(f: &SmFile) {
    assert!(f.priority.is_none_or(|p| p <= 15));
    assert!(f.poll_ms.is_none_or(|p| (10..=3_600_000).contains(&p)));
    // 0: no periodic sweep, as OpenSM's sweep_interval 0.
    assert!(f.sweep_ms.is_none_or(|p| p <= 86_400_000));
    assert!(f.m_key_protection_level.is_none_or(|l| l <= 3));
    assert!(f.subnet_timeout.is_none_or(|t| t <= 31));
    let l = f.link_params();
    assert!(l.hoq_lifetime <= 31 && l.leaf_hoq_lifetime <= 31);
    assert!(l.vl_stall_count <= 7 && l.leaf_vl_stall_count <= 7);
    assert!((1..=5).contains(&l.max_op_vls));
    assert!(l.local_phy_errors_threshold <= 15 && l.overrun_errors_threshold <= 15);
    assert!(l.packet_life_time <= 31 && l.sm_sl <= 15);
    assert!(f.long_timeout_ms.is_none_or(|t| t <= 3_600_000));
    // A prefix stays on its line and is never empty.
    assert!(f.log_prefix.as_ref().is_none_or(|p| {
        (1..=64).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
    }));
}
