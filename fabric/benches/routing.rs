//! Route computation alone, engine by engine, on a fabric brought up in
//! the simulator: the tables every switch gets (`Sm::compute_routes` on
//! the SM's own switch graph), what bring-up spends between discovery
//! and distribution. fat-tree-324 and fat-tree-5832 at LMC 0 (min-hop,
//! up*/down*, fat-tree, dimension order), and fat-tree-324 at LMC 2 with
//! ibkit's spread (and dor) and with OpenSM's rule (`--lmc-as-opensm`). `cargo bench -p fabric --bench routing`

use criterion::{criterion_group, criterion_main, Criterion};
use fabric::sim::{bring_up, SimConfig};
use smi::sm::{Engine, PortSelection, Sm, SmConfig};
use std::hint::black_box;
use std::time::Duration;

/// `spec` brought up with min-hop (the graph is the same for every
/// engine: the switches and links discovery found).
fn up(spec: &str, lmc: u8, lmc_as_opensm: bool) -> Sm {
    let (_, sm, up) = bring_up(
        spec,
        SimConfig::default(),
        SmConfig {
            lmc,
            port_selection: PortSelection {
                lmc_as_opensm,
                ..PortSelection::default()
            },
            ..SmConfig::default()
        },
    )
    .unwrap();
    assert!(up, "{spec} did not come up");
    sm
}

fn engines(c: &mut Criterion, name: &str, sm: &Sm, which: &[Engine], samples: usize) {
    let (g, max_lid) = (sm.routing_graph(), sm.max_lid());
    let mut group = c.benchmark_group(name);
    group.sample_size(samples);
    group.measurement_time(Duration::from_secs(if samples < 20 { 20 } else { 5 }));
    for &e in which {
        // Every switch gets a table with a way to every LID it routes.
        let t = Sm::compute_routes(e, g, max_lid);
        assert_eq!(t.len(), sm.graph_switches().len(), "{}", e.name());
        group.bench_function(e.name(), |b| {
            b.iter(|| black_box(Sm::compute_routes(e, black_box(g), max_lid)))
        });
    }
    group.finish();
}

fn lmc0(c: &mut Criterion) {
    let all = [Engine::MinHop, Engine::UpDown, Engine::FatTree, Engine::Dor];
    engines(
        c,
        "routes fat-tree-324",
        &up("fat-tree-324", 0, false),
        &all,
        50,
    );
    engines(
        c,
        "routes fat-tree-5832",
        &up("fat-tree-5832", 0, false),
        &all,
        10,
    );
}

fn lmc2(c: &mut Criterion) {
    let both = [Engine::MinHop, Engine::UpDown];
    let spread = up("fat-tree-324", 2, false);
    // dor follows OpenSM's own LMC rule under either setting.
    let with_dor = [Engine::MinHop, Engine::UpDown, Engine::Dor];
    engines(
        c,
        "routes fat-tree-324 LMC 2, spread",
        &spread,
        &with_dor,
        30,
    );
    let as_opensm = up("fat-tree-324", 2, true);
    engines(
        c,
        "routes fat-tree-324 LMC 2, as OpenSM",
        &as_opensm,
        &both,
        30,
    );
}

criterion_group!(benches, lmc0, lmc2);
criterion_main!(benches);
