//! OpenSM 3.3.23 (Debian's `opensm`) brings fabrics up on ibsim through the
//! `libumad2sim.so` preload, and ibkit's SM brings the same fabrics up on
//! ibkit's simulator: ibkit must send fewer SMPs and route faster.
//! Needs `ibsim-utils`, `libumad2sim0` and `opensm` (CI installs them).

use smi::sm::Engine;
use tests::peers::{missing_tools, run_ibkit, run_opensm};

#[test]
fn ibkit_sends_fewer_smps_than_opensm_on_the_same_fabric() {
    if let Some(why) = missing_tools() {
        tests::skip("opensm_ibsim", &why);
        return;
    }
    for (spec, engine) in [
        ("fat-tree-324", Engine::MinHop),
        ("fat-tree-324", Engine::FatTree),
        ("mport-ntree:8:3", Engine::UpDown),
    ] {
        let topo = fabric::topology::Topology::from_spec(spec).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "ibkit-osm-test-{}-{spec}-{engine:?}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let o = run_opensm(&topo, engine, &dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(o.up, "{spec} {engine:?}: OpenSM did not report SUBNET UP");
        let k = run_ibkit(topo, engine).unwrap();
        assert!(k.ok);
        eprintln!(
            "{spec} {engine:?}: OpenSM {} SMPs, routing {:.1} ms; ibkit {} SMPs, routing {:.1} ms",
            o.smps, o.routing_ms, k.smps, k.routing_ms
        );
        assert!(
            o.smps > 1000,
            "ibsim's replies were not counted: {}",
            o.smps
        );
        assert!(k.smps < o.smps, "{spec}: {} ≥ {}", k.smps, o.smps);
    }
}
