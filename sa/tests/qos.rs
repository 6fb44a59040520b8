//! SLtoVLMappingTableRecords and VLArbitrationTableRecords: the tables
//! the SM wrote under a QoS policy, matched on their components, and
//! none where the SM wrote none.

use fabric::sim::{Fabric, SimConfig, SimNode};
use fabric::topology::Topology;
use mad_core::mad::Method;
use mad_core::sa::*;
use sa::{Sa, SaConfig};
use smi::sm::qos::parse;
use smi::sm::{Sm, SmConfig};

mod common;
use common::*;

/// mport-ntree:4:2 up, with `qos` applied when given.
fn up_with(qos: Option<&str>) -> (Fabric, Sm) {
    let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig::default());
    if let Some(q) = qos {
        sm.set_qos(parse(q).unwrap());
    }
    assert!(f.bring_up(&mut sm));
    (f, sm)
}

#[test]
fn records_show_the_tables_the_sm_wrote() {
    let (f, sm) = up_with(Some(
        "qos_ca_sl2vl 3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,15\nqos_swe_vlarb_high 5:9\n",
    ));
    let mut sa = Sa::new(SaConfig::default());
    let h = hosts(&f);
    let me = h[0].1;
    // A CA's table: input 0, its port as output.
    let q = SlToVlMappingTableRecord {
        lid: h[1].1.lid,
        ..Default::default()
    };
    let recs = all(
        &mut sa,
        &sm,
        me,
        &q,
        mask::<SlToVlMappingTableRecord>(&["lid"]),
        0,
    );
    assert_eq!(recs.len(), 1);
    assert_eq!((recs[0].input_port_num, recs[0].output_port_num), (0, 1));
    assert_eq!(recs[0].sl_to_vl.vl[..2], [3, 3]);
    assert_eq!(recs[0].sl_to_vl.vl[15], 15);
    // A switch: one record per input × output port, as its agent holds.
    let (sw, node) = f
        .nodes
        .iter()
        .enumerate()
        .find_map(|(i, n)| match n {
            SimNode::Switch(s) => Some((i, s)),
            _ => None,
        })
        .unwrap();
    let lid = f.nodes[sw].lid();
    let q = SlToVlMappingTableRecord {
        lid,
        output_port_num: 2,
        ..Default::default()
    };
    let recs = all(
        &mut sa,
        &sm,
        me,
        &q,
        mask::<SlToVlMappingTableRecord>(&["lid", "output_port_num"]),
        0,
    );
    let inputs = node.model.ports.len();
    assert_eq!(recs.len(), inputs);
    for r in &recs {
        let held = node.model.ports[2].sl2vl[usize::from(r.input_port_num)];
        assert_eq!(r.sl_to_vl, held, "in {}", r.input_port_num);
    }
    // VL arbitration: block 3 (high 0–31) of a switch port holds VL 5.
    let q = VlArbitrationTableRecord {
        lid,
        output_port_num: 1,
        block_num: 3,
        ..Default::default()
    };
    let recs = all(
        &mut sa,
        &sm,
        me,
        &q,
        mask::<VlArbitrationTableRecord>(&["lid", "output_port_num", "block_num"]),
        0,
    );
    assert_eq!(recs.len(), 1);
    let e = recs[0].vl_arbitration.entries[0];
    assert_eq!((e.vl, e.weight), (5, 9));
    assert_eq!(recs[0].vl_arbitration, node.model.ports[1].vl_arb[2]);
}

#[test]
fn without_qos_there_are_no_records() {
    let (f, sm) = up_with(None);
    let mut sa = Sa::new(SaConfig::default());
    let me = hosts(&f)[0].1;
    let (st, m) = one(
        &mut sa,
        &sm,
        me,
        &ask(Method::GetTable, &VlArbitrationTableRecord::default(), 0, 0),
        0,
    );
    assert_eq!(st, SaStatus::Ok);
    assert!(m.header.status().is_ok(), "{:?}", m.header.status());
    let n = all(&mut sa, &sm, me, &SlToVlMappingTableRecord::default(), 0, 0);
    assert!(n.is_empty());
}
