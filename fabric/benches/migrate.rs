//! Planning a VM live migration on `fat-tree-11664` (prepopulated LIDs, one
//! VF per hypervisor): which entries change on which switches, without
//! computing a route. And a VM started and stopped on `fat-tree-5832`
//! under partitions (its VF's table and its hypervisor's switch port,
//! written and answered in the simulator). `cargo bench -p fabric --bench
//! migrate`

use criterion::{criterion_group, criterion_main, Criterion};
use fabric::sim::{bring_up, Fabric, SimConfig};
use smi::sm::{Engine, LidPolicy, Sm, SmConfig};
use std::hint::black_box;

/// `spec` with `vfs` VFs a hypervisor, prepopulated LIDs and fat-tree
/// routing, brought up.
fn up(spec: &str, vfs: usize) -> (Fabric, Sm) {
    let (f, sm, up) = bring_up(
        spec,
        SimConfig {
            vfs,
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
    (f, sm)
}

fn plan(c: &mut Criterion) {
    let (mut f, mut sm) = up("fat-tree-11664", 1);
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

fn vm_with_partitions(c: &mut Criterion) {
    let (mut f, mut sm) = up("fat-tree-5832", 2);
    // The default partition for every port, and 20 tenants of 10 VMs.
    let vguid = |t: u64, k: u64| 0x0002_c9ff_0000_0000 + t * 100 + k;
    let mut conf = String::from("Default=0x7fff,ipoib:ALL=full;\n");
    for t in 0..20 {
        let m: Vec<String> = (0..10)
            .map(|k| format!("{:#x}=full", vguid(t, k)))
            .collect();
        conf += &format!("t{t}={:#06x}:{};\n", 0x100 + t, m.join(","));
    }
    sm.set_partitions(smi::sm::partitions::parse(&conf).unwrap());
    assert!(f.run(&mut sm));
    let hyp = sm.hypervisors()[7];
    let mut g = c.benchmark_group("VM under partitions fat-tree-5832");
    g.sample_size(20);
    g.bench_function("start and stop, SMPs answered", |b| {
        b.iter(|| {
            let vm = sm.create_vm(hyp, black_box(vguid(3, 4))).unwrap();
            sm.destroy_vm(vm).unwrap();
            assert!(f.run(&mut sm));
        })
    });
    g.finish();
}

criterion_group!(benches, plan, vm_with_partitions);
criterion_main!(benches);
