//! Helpers the fabric tests share.

use fabric::sim::{bring_up, Fabric, SimConfig};
use smi::sm::{Engine, LidPolicy, Sm, SmConfig};

/// `spec` with `vfs` VFs per hypervisor under `policy`, brought up by the
/// SM with fat-tree routing; panics unless it comes up.
pub fn up(spec: &str, vfs: usize, policy: LidPolicy) -> (Fabric, Sm) {
    let (f, sm, up) = bring_up(
        spec,
        SimConfig {
            vfs,
            ..SimConfig::default()
        },
        SmConfig {
            routing: Engine::FatTree,
            lid_policy: policy,
            ..SmConfig::default()
        },
    )
    .unwrap();
    assert!(up, "{:?} {:?}", sm.phase(), sm.error());
    (f, sm)
}
