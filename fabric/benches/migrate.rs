//! Planning a VM live migration on `fat-tree-11664` (prepopulated LIDs, one
//! VF per hypervisor): which entries change on which switches, without
//! computing a route. `cargo bench -p fabric --bench migrate`

use criterion::{criterion_group, criterion_main, Criterion};
use fabric::sim::{bring_up, SimConfig};
use smi::sm::{Engine, LidPolicy, SmConfig};
use std::hint::black_box;

fn plan(c: &mut Criterion) {
    let (mut f, mut sm, up) = bring_up(
        "fat-tree-11664",
        SimConfig {
            vfs: 1,
            ..SimConfig::default()
        },
        SmConfig {
            routing: Engine::FatTree,
            lid_policy: LidPolicy::Prepopulated,
            ..SmConfig::default()
        },
    )
    .unwrap();
    assert!(up);
    let hyps = sm.hypervisors();
    let src = hyps[0];
    let leaf = sm.attachment(src).unwrap().0;
    let near = *hyps
        .iter()
        .find(|&&h| h != src && sm.attachment(h).unwrap().0 == leaf)
        .unwrap();
    let far = *hyps.last().unwrap();
    let vm = sm.create_vm(src, 0xFEED).unwrap();
    assert!(f.run(&mut sm));
    let p = sm.plan_migration(vm, far).unwrap();
    eprintln!(
        "far plan: {} LFT SMPs on {} switches",
        p.lft_smps(),
        p.switches.len()
    );
    let mut g = c.benchmark_group("plan_migration fat-tree-11664");
    g.bench_function("near (same leaf)", |b| {
        b.iter(|| black_box(sm.plan_migration(vm, black_box(near)).unwrap()))
    });
    g.bench_function("far (across the spine)", |b| {
        b.iter(|| black_box(sm.plan_migration(vm, black_box(far)).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, plan);
criterion_main!(benches);
