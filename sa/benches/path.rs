//! The SA's hot path, end to end: a SubnAdmGet(PathRecord) MAD decoded,
//! resolved over the installed tables of a fat-tree-648 brought up by
//! ibkit's SM, and its answer encoded and queued — by LIDs and by GIDs.
//! `cargo bench -p sa --bench path`
//!
//! The all-pairs figure on fat-tree-11664 comes from a real run of
//! `ibkit bench sa --all-pairs`.

use criterion::{criterion_group, criterion_main, Criterion};
use fabric::sim::{bring_up, SimConfig};
use mad_core::attr::NodeType;
use mad_core::mad::Method;
use mad_core::sa::{PathRecord, SaMad, SaRecord};
use sa::{Addr, Sa, SaConfig};
use smi::sm::SmConfig;
use std::hint::black_box;

fn benches(c: &mut Criterion) {
    let (f, sm, up) = bring_up("fat-tree-648", SimConfig::default(), SmConfig::default()).unwrap();
    assert!(up);
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| f.topo.nodes[i].kind == NodeType::ChannelAdapter)
        .collect();
    let (a, b) = (cas[1], cas[cas.len() - 1]);
    let from = Addr {
        lid: f.nodes[a].lid(),
        qpn: 1,
    };
    let query = |rec: &PathRecord, names: &[&str]| {
        let mut m = SaMad::request(Method::Get, PathRecord::ID, 7);
        m.set_record(rec).unwrap();
        m.sa.component_mask = names
            .iter()
            .map(|n| PathRecord::component(n).unwrap())
            .fold(0, |m, b| m | b);
        m.to_bytes()
    };
    let by_lid = query(
        &PathRecord {
            slid: f.nodes[a].lid(),
            dlid: f.nodes[b].lid(),
            ..PathRecord::default()
        },
        &["slid", "dlid"],
    );
    let by_gid = query(
        &PathRecord {
            sgid: mad_core::types::Gid::new(
                mad_core::types::Gid::DEFAULT_PREFIX,
                mad_core::Guid(f.topo.nodes[a].guid + 1),
            ),
            dgid: mad_core::types::Gid::new(
                mad_core::types::Gid::DEFAULT_PREFIX,
                mad_core::Guid(f.topo.nodes[b].guid + 1),
            ),
            ..PathRecord::default()
        },
        &["sgid", "dgid"],
    );
    let mut sa = Sa::new(SaConfig::default());
    for (name, q) in [("by LIDs", by_lid), ("by GIDs", by_gid)] {
        // The answer is a GetResp with status 0.
        sa.handle_mad(sm.subnet(), from, &q, 0).unwrap();
        let t = sa.poll_transmit().unwrap();
        let r = SaMad::parse(&t.mad).unwrap();
        assert_eq!(r.header.status.get(), 0, "{name}");
        if name == "by LIDs" {
            // The parts, for tuning.
            let m = SaMad::parse(&q).unwrap();
            c.bench_function("part: SaMad::parse", |b| {
                b.iter(|| SaMad::parse(black_box(&q)))
            });
            c.bench_function("part: PathRecord::decode", |b| {
                b.iter(|| PathRecord::decode(black_box(&m.data)))
            });
            let pr = PathRecord::decode(&r.data).unwrap();
            c.bench_function("part: PathRecord::encode", |b| {
                b.iter(|| {
                    let mut o = [0u8; 64];
                    black_box(&pr).encode(&mut o).unwrap();
                    o
                })
            });
            c.bench_function("part: response_bytes", |b| {
                b.iter(|| black_box(&m).response_bytes(Method::GetResp, 0, 0, &r.data[..64]))
            });
            let src = sa::path::end_by_lid(sm.subnet(), f.nodes[a].lid()).unwrap();
            let dst = sa::path::end_by_lid(sm.subnet(), f.nodes[b].lid()).unwrap();
            c.bench_function("part: end_by_lid", |b| {
                b.iter(|| sa::path::end_by_lid(sm.subnet(), black_box(dst.lid)))
            });
            c.bench_function("part: by_lid", |b| {
                b.iter(|| sm.subnet().by_lid(black_box(dst.lid)))
            });
            c.bench_function("part: walk", |b| {
                b.iter(|| sa::path::walk(sm.subnet(), black_box(src.node), black_box(dst.lid)))
            });
            let qq = sa::query::Query {
                subnet: sm.subnet(),
                from,
                data: &m.data,
                mask: m.sa.component_mask,
                bitwise: 0,
                max: 1,
                max_examined: 1,
                examined: core::cell::Cell::new(0),
                max_rate: sa::path::NO_RATE_LIMIT,
            };
            c.bench_function("part: path_record", |b| {
                b.iter(|| {
                    let mut o = [0u8; PathRecord::SIZE];
                    let r = sa::path::path_record(black_box(&qq), &mut o);
                    (r, o)
                })
            });
            c.bench_function("part: resolve", |b| {
                b.iter(|| sa::path::resolve(sm.subnet(), black_box(&src), black_box(&dst), None))
            });
        }
        c.bench_function(
            &format!("PathRecord Get {name}: decode, resolve, encode"),
            |bch| {
                bch.iter(|| {
                    sa.handle_mad(sm.subnet(), from, black_box(&q), 0).unwrap();
                    // The answer popped where a transport would send it
                    // from; its address, not a second copy of its 256
                    // bytes, is what the optimizer may not see through.
                    let t = sa.poll_transmit();
                    black_box(&t);
                })
            },
        );
    }
    // A GetTable of every pair's PathRecord (an empty mask), its answer
    // built and sent in RMPP segments with no ACKs awaited: the bulk
    // path, whose records are laid out once in the answer's buffer.
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        max_examined_per_second: usize::MAX,
        max_examined_all_per_second: usize::MAX,
        ..SaConfig::default()
    });
    let all = SaMad::request(Method::GetTable, PathRecord::ID, 9).to_bytes();
    let mut segments = 0;
    sa.handle_mad(sm.subnet(), from, &all, 0).unwrap();
    while let Some(t) = sa.poll_transmit() {
        assert_eq!(SaMad::parse(&t.mad).unwrap().header.status.get(), 0);
        segments += 1;
    }
    let pairs = f.nodes.len() * f.nodes.len();
    // Every pair has its path, 64 bytes each, 200 a segment.
    assert_eq!(segments, (pairs * 64).div_ceil(200), "for {pairs} pairs");
    let mut g = c.benchmark_group("bulk");
    g.sample_size(10);
    g.bench_function(
        format!("PathRecord GetTable, all {pairs} pairs of fat-tree-648, {segments} segments"),
        |bch| {
            bch.iter(|| {
                sa.handle_mad(sm.subnet(), from, black_box(&all), 0)
                    .unwrap();
                let mut n = 0;
                while let Some(t) = sa.poll_transmit() {
                    n += black_box(t.mad.len());
                }
                n
            })
        },
    );
    g.finish();
}

criterion_group!(benches_group, benches);
criterion_main!(benches_group);
