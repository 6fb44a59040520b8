//! Arbitrary text as OpenSM's `opensm.conf` (`ibkit sm --opensm-config`):
//! parsed without a panic, refused with a place inside the text, or
//! settings within their ranges, with notes that point at lines of the
//! text and grow no faster than it. The same text as a `root_guid_file`
//! (`ibkit sm --root-guid-file`): refused with a place inside it, or a
//! non-zero GUID for at most each line, within the cap. And as a
//! `hop_weights_file` and a `port_search_ordering_file`: refused with a
//! place inside it, or at most a line each, ports 1-254, weights 1-255,
//! no port twice in an order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smd::config::LOG_LEVELS;
use smd::opensm_conf::{
    parse_hop_weights, parse_node_guids, parse_opensm_conf, parse_port_prof_ignore,
    parse_port_search_order, MAX_NODE_GUIDS,
};
use std::path::Path;

#[path = "sm_file_ranges.rs"]
mod sm_file_ranges;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Path::new("/etc/opensm/opensm.conf");
    let lines = text.lines().count();
    match parse_node_guids(text) {
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines, "{e}");
            let l = text.lines().nth(e.line - 1).unwrap();
            assert!(e.column >= 1 && e.column <= l.len() + 1, "{e}");
        }
        Ok(g) => {
            assert!(g.len() <= lines && g.len() <= MAX_NODE_GUIDS);
            assert!(g.iter().all(|&x| x != 0));
        }
    }
    let placed = |e: &smd::config::ConfigError| {
        assert!(e.line >= 1 && e.line <= lines, "{e}");
        let l = text.lines().nth(e.line - 1).unwrap();
        assert!(e.column >= 1 && e.column <= l.len() + 1, "{e}");
    };
    match parse_hop_weights(text) {
        Err(e) => placed(&e),
        Ok(w) => {
            assert!(w.len() <= lines);
            for (guid, port, weight) in w {
                assert!(guid != 0 && (1..=254).contains(&port) && weight >= 1);
            }
        }
    }
    match parse_port_prof_ignore(text) {
        Err(e) => placed(&e),
        Ok(i) => {
            assert!(i.len() <= lines);
            assert!(i.iter().all(|&(g, p)| g != 0 && (1..=254).contains(&p)));
        }
    }
    match parse_port_search_order(text) {
        Err(e) => placed(&e),
        Ok(o) => {
            assert!(o.len() <= lines);
            for (guid, ports) in o {
                assert!(guid != 0 && !ports.is_empty());
                let mut seen = std::collections::BTreeSet::new();
                assert!(ports
                    .iter()
                    .all(|&p| (1..=254).contains(&p) && seen.insert(p)));
            }
        }
    }
    match parse_opensm_conf(text, file, &|p: &Path| p.as_os_str().len().is_multiple_of(2)) {
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines, "{e}");
            let l = text.lines().nth(e.line - 1).unwrap();
            assert!(e.column >= 1 && e.column <= l.len() + 1, "{e}");
        }
        Ok(c) => {
            let f = &c.settings;
            sm_file_ranges::assert_in_range(f);
            assert!(f.lmc.is_none_or(|l| l <= 7));
            // A protected M_Key's lease outlasts the sweep interval, as
            // OpenSM keeps it (a sweep interval of 65,535 s or more
            // aside: the lease has 16 bits).
            let lease = u64::from(f.m_key_lease_period.unwrap_or(0));
            let sweep = f.sweep_ms.unwrap_or(10_000) / 1000;
            if f.m_key_protection_level.unwrap_or(0) != 0 && lease != 0 && sweep != 0 {
                assert!(sweep < lease || lease == 65_535, "{sweep} {lease}");
            }
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
