//! An SMA answering requests end to end: decode, M_Key check, apply, encode
//! the response. `cargo bench -p smi --bench sma`

use criterion::{criterion_group, criterion_main, Criterion};
use mad_core::attr::{AttributeId, LinearForwardingTable};
use mad_core::{DrPath, MKey, Method, Smp};
use smi::sma::{NodeSpec, SwitchSma};
use std::hint::black_box;

fn benches(c: &mut Criterion) {
    let mut sw = Box::new(SwitchSma::new(&NodeSpec::switch(
        0x1000,
        36,
        "bench switch",
    )));
    for p in 1..=36 {
        sw.link_event(p, true, 0);
    }
    // LinearFDBTop high enough for every block.
    let mut si = sw.model.switch_info;
    si.linear_fdb_top = 0xBFFF;
    let mut set_si = Smp::lid_routed(Method::Set, AttributeId::SwitchInfo, 0, 1, MKey(0));
    si.encode(&mut set_si.data).unwrap();
    sw.process(&set_si, 1, 0).unwrap();

    let path = DrPath::from_ports(&[1, 3, 5]).unwrap();
    let mut get_pi = Smp::directed(&path, Method::Get, AttributeId::PortInfo, 7, 2, MKey(0));
    get_pi.set_hop_pointer(4);
    let mut set_lft = Smp::directed(
        &path,
        Method::Set,
        AttributeId::LinearForwardingTable,
        17,
        3,
        MKey(0),
    );
    set_lft.set_hop_pointer(4);
    let mut t = LinearForwardingTable::dropping();
    for (i, p) in t.port.iter_mut().enumerate() {
        *p = (i % 36) as u8 + 1;
    }
    t.encode(&mut set_lft.data).unwrap();

    let mut g = c.benchmark_group("sma");
    g.bench_function("Get(PortInfo)", |b| {
        b.iter(|| sw.process(black_box(&get_pi), 3, 0).unwrap())
    });
    g.bench_function("Set(LinearForwardingTable)", |b| {
        b.iter(|| sw.process(black_box(&set_lft), 3, 0).unwrap())
    });
    g.finish();
    assert_eq!(sw.model.lft_port(mad_core::Lid(17 * 64 + 5)), 6);
}

criterion_group! {
    name = sma;
    config = Criterion::default().warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(sma);
