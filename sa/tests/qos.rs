//! SLtoVLMappingTableRecords and VLArbitrationTableRecords: the tables
//! the SM wrote under a QoS policy, matched on their components; those it
//! did not write, read from the port when a question names them.

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
    // A CA's table: input and output 0 (the numbers are a switch's).
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
    assert_eq!((recs[0].input_port_num, recs[0].output_port_num), (0, 0));
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
fn without_qos_a_whole_subnet_table_lists_only_what_the_sm_knows() {
    let (f, sm) = up_with(None);
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    let me = hosts(&f)[0].1;
    // No SL-to-VL table is known, and a question naming no LID reads none.
    let n = all(&mut sa, &sm, me, &SlToVlMappingTableRecord::default(), 0, 0);
    assert!(n.is_empty());
    assert_eq!(sa.take_qos_reads(), vec![]);
    // The VL arbitration blocks past each port's caps (8 low, 8 high:
    // blocks 2 and 4) hold no entry; those are known without reading.
    let recs = all(&mut sa, &sm, me, &VlArbitrationTableRecord::default(), 0, 0);
    assert!(!recs.is_empty());
    for r in &recs {
        assert!(matches!(r.block_num, 2 | 4), "{r:?}");
        assert_eq!(r.vl_arbitration, Default::default());
    }
    assert_eq!(sa.take_qos_reads(), vec![]);
}

/// The CA of host `k` (its fabric node) and its LID.
fn ca(f: &Fabric, k: usize) -> (usize, mad_core::Lid) {
    let (i, a) = hosts(f)[k];
    (i, a.lid)
}

/// Hands the reads the SA asked for to the SM, runs the fabric 1 ms, and
/// lets the SA answer what it can: what it sent.
fn read_and_resume(f: &mut Fabric, sm: &mut Sm, sa: &mut Sa) -> Vec<SaMad> {
    for t in sa.take_qos_reads() {
        sm.read_qos_table(t).unwrap();
    }
    let until = f.now_ns() + MS;
    assert!(f.run_until(sm, until));
    sa.resume(sm.subnet(), until / MS);
    drain(sa)
        .into_iter()
        .map(|t| SaMad::parse(&t.mad).unwrap())
        .collect()
}

#[test]
fn a_table_the_sm_never_wrote_is_read_from_the_port_before_the_answer() {
    let (mut f, mut sm) = up_with(None);
    let mut sa = Sa::new(SaConfig::default());
    let me = hosts(&f)[0].1;
    let (i, lid) = ca(&f, 1);
    // What the HCA holds, which the SM never wrote nor read.
    let SimNode::Ca(c) = &mut f.nodes[i] else {
        panic!("not a CA")
    };
    c.model.ports[1].vl_arb[0].entries[0] = mad_core::attr::VlArbEntry { vl: 3, weight: 7 };
    c.model.ports[1].sl2vl[0].vl[..3].copy_from_slice(&[2, 1, 0]);
    // osmtest's question: the CA's LID, port 0 ("the SA should figure
    // it out"), block 1.
    let q = VlArbitrationTableRecord {
        lid,
        output_port_num: 0,
        block_num: 1,
        ..Default::default()
    };
    let m = mask::<VlArbitrationTableRecord>(&["lid", "output_port_num", "block_num"]);
    let get = ask(Method::Get, &q, m, 0);
    let now = f.now_ns() / MS;
    assert!(exchange(&mut sa, &sm, me, &get, now).is_empty(), "it waits");
    assert_eq!(sa.qos_questions_waiting(), 1);
    // Asked again meanwhile (a retry with the same TID): still once.
    assert!(exchange(&mut sa, &sm, me, &get, now).is_empty());
    let answers = read_and_resume(&mut f, &mut sm, &mut sa);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].sa_status(), SaStatus::Ok);
    let r: VlArbitrationTableRecord = answers[0].record().unwrap();
    assert_eq!((r.lid, r.output_port_num, r.block_num), (lid, 1, 1));
    let e = r.vl_arbitration.entries[0];
    assert_eq!((e.vl, e.weight), (3, 7));
    assert_eq!(sa.qos_questions_waiting(), 0);
    assert_eq!(sa.stats().qos_parked, 1);
    // Held now: answered at once, no read.
    let (st, again) = one(&mut sa, &sm, me, &ask(Method::Get, &q, m, 0), now);
    assert_eq!(st, SaStatus::Ok);
    assert_eq!(again.record::<VlArbitrationTableRecord>().unwrap(), r);
    assert_eq!(sa.take_qos_reads(), vec![]);
    // Block 2 (low 32–63) lies past the CA's 8 low entries: empty, at once.
    let past = VlArbitrationTableRecord { block_num: 2, ..q };
    let (st, got) = one(&mut sa, &sm, me, &ask(Method::Get, &past, m, 0), now);
    assert_eq!(st, SaStatus::Ok);
    let got: VlArbitrationTableRecord = got.record().unwrap();
    assert_eq!(got.vl_arbitration, Default::default());
    assert_eq!(sa.take_qos_reads(), vec![]);
    // The CA's SL-to-VL table, asked as osmtest asks it (ports 0, 0).
    let q = SlToVlMappingTableRecord {
        lid,
        ..Default::default()
    };
    let m = mask::<SlToVlMappingTableRecord>(&["lid", "input_port_num", "output_port_num"]);
    assert!(exchange(&mut sa, &sm, me, &ask(Method::Get, &q, m, 0), now).is_empty());
    let answers = read_and_resume(&mut f, &mut sm, &mut sa);
    assert_eq!(answers.len(), 1);
    let r: SlToVlMappingTableRecord = answers[0].record().unwrap();
    assert_eq!(r.sl_to_vl.vl[..3], [2, 1, 0]);
}

#[test]
fn a_switch_table_is_read_and_a_question_waits_no_longer_than_its_time() {
    let (mut f, mut sm) = up_with(None);
    let mut sa = Sa::new(SaConfig::default());
    let me = hosts(&f)[0].1;
    let sw = (0..f.nodes.len())
        .find(|&i| matches!(f.nodes[i], SimNode::Switch(_)))
        .unwrap();
    let lid = f.nodes[sw].lid();
    let SimNode::Switch(s) = &mut f.nodes[sw] else {
        unreachable!()
    };
    s.model.ports[3].sl2vl[1].vl[0] = 9;
    // One table: from input 1 to output 3.
    let q = SlToVlMappingTableRecord {
        lid,
        input_port_num: 1,
        output_port_num: 3,
        ..Default::default()
    };
    let m = mask::<SlToVlMappingTableRecord>(&["lid", "input_port_num", "output_port_num"]);
    let now = f.now_ns() / MS;
    assert!(exchange(&mut sa, &sm, me, &ask(Method::Get, &q, m, 0), now).is_empty());
    let answers = read_and_resume(&mut f, &mut sm, &mut sa);
    let r: SlToVlMappingTableRecord = answers[0].record().unwrap();
    assert_eq!((r.input_port_num, r.output_port_num), (1, 3));
    assert_eq!(r.sl_to_vl.vl[0], 9);
    // A question whose reads never come back (the driver drops them)
    // is answered when its time is up, from what is held: nothing.
    let q2 = SlToVlMappingTableRecord {
        input_port_num: 2,
        ..q
    };
    let get = ask(Method::Get, &q2, m, 0);
    let now = f.now_ns() / MS;
    assert!(exchange(&mut sa, &sm, me, &get, now).is_empty());
    assert_eq!(sa.take_qos_reads().len(), 1);
    sa.resume(sm.subnet(), now + sa::qos_reads::WAIT_MS - 1);
    assert!(drain(&mut sa).is_empty(), "not yet");
    assert_eq!(sa.poll_timeout(), Some(now + sa::qos_reads::WAIT_MS));
    sa.resume(sm.subnet(), now + sa::qos_reads::WAIT_MS);
    let late: Vec<_> = drain(&mut sa);
    assert_eq!(late.len(), 1);
    assert_eq!(
        SaMad::parse(&late[0].mad).unwrap().sa_status(),
        SaStatus::NoRecords
    );
    // Asked again soon after: not read again, answered at once.
    let (st, _) = one(&mut sa, &sm, me, &get, now + sa::qos_reads::WAIT_MS + 1);
    assert_eq!(st, SaStatus::NoRecords);
    assert_eq!(sa.take_qos_reads(), vec![]);
    // A port that refuses the Get: the question is answered as soon as
    // the refusal comes, and the next one at once, with no read.
    let SimNode::Switch(s) = &mut f.nodes[sw] else {
        unreachable!()
    };
    s.model.ports[4].sl2vl.truncate(1);
    let q3 = SlToVlMappingTableRecord {
        input_port_num: 2,
        output_port_num: 4,
        ..q
    };
    let get = ask(Method::Get, &q3, m, 0);
    let now = f.now_ns() / MS;
    assert!(exchange(&mut sa, &sm, me, &get, now).is_empty());
    let answers = read_and_resume(&mut f, &mut sm, &mut sa);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].sa_status(), SaStatus::NoRecords);
    let table = smi::sm::qos::QosTable::SlToVl {
        node: sm.subnet().by_lid(lid).unwrap().0,
        input: 2,
        output: 4,
    };
    assert!(sm.subnet().qos_table_refused(table));
    let (st, _) = one(&mut sa, &sm, me, &get, f.now_ns() / MS);
    assert_eq!(st, SaStatus::NoRecords);
    assert_eq!(sa.take_qos_reads(), vec![]);
    // The SM refuses to read what does not exist, or what it holds.
    let read = |sm: &mut Sm, t| sm.read_qos_table(t);
    use smi::sm::qos::{QosReadError, QosTable};
    let node = table.node();
    let bad_port = QosTable::SlToVl {
        node,
        input: 1,
        output: 99,
    };
    assert_eq!(read(&mut sm, bad_port), Err(QosReadError::NoSuchPort));
    let bad_block = QosTable::VlArb {
        node,
        port: 1,
        block: 5,
    };
    assert_eq!(read(&mut sm, bad_block), Err(QosReadError::NoSuchBlock));
    let held = QosTable::SlToVl {
        node,
        input: 1,
        output: 3,
    };
    assert_eq!(read(&mut sm, held), Err(QosReadError::Held));
}

/// The tables a SLtoVLMappingTableRecord question naming only the LID of
/// switch `lid` names, when at most `max` may be (none past that).
fn every_sl2vl_table_named(sm: &Sm, lid: mad_core::Lid, max: usize) -> Vec<smi::sm::qos::QosTable> {
    let q = SlToVlMappingTableRecord {
        lid,
        ..Default::default()
    };
    let mut data = [0u8; SlToVlMappingTableRecord::SIZE];
    q.encode(&mut data).unwrap();
    let lid_only = mask::<SlToVlMappingTableRecord>(&["lid"]);
    sa::query::qos_tables_named(sm.subnet(), false, &data, lid_only, max)
}

#[test]
fn questions_that_would_read_too_much_are_answered_from_what_is_held() {
    let (f, sm) = up_with(None);
    let mut sa = Sa::new(SaConfig::default());
    let h = hosts(&f);
    let per = sa::qos_reads::MAX_PARKED_PER_REQUESTER;
    let lids: Vec<_> = (0..f.nodes.len())
        .filter(|&i| matches!(f.nodes[i], SimNode::Switch(_)))
        .map(|i| f.nodes[i].lid())
        .collect();
    let m = mask::<VlArbitrationTableRecord>(&["lid", "output_port_num", "block_num"]);
    let tables: Vec<(mad_core::Lid, u8)> = lids
        .iter()
        .flat_map(|&l| (1..=4u8).map(move |p| (l, p)))
        .collect();
    let mut tid = 0x100;
    let mut question = |sa: &mut Sa, from, k: usize| {
        let q = VlArbitrationTableRecord {
            lid: tables[k].0,
            output_port_num: tables[k].1,
            block_num: 1,
            ..Default::default()
        };
        tid += 1;
        let mut mad = SaMad::request(Method::Get, VlArbitrationTableRecord::ID, tid);
        mad.set_record(&q).unwrap();
        mad.sa.component_mask = m;
        exchange(sa, &sm, from, &mad.to_bytes(), 0)
    };
    // Different questions (TIDs), one table each. One host: its first
    // MAX_PARKED_PER_REQUESTER wait, the next is answered at once.
    let mut k = 0;
    for _ in 0..per {
        assert!(question(&mut sa, h[0].1, k).is_empty());
        k += 1;
    }
    let out = question(&mut sa, h[0].1, k);
    assert_eq!(out.len(), 1, "answered at once");
    assert_eq!(out[0].sa_status(), SaStatus::NoRecords);
    // Other hosts fill the SA's MAX_PARKED; the next host's is answered
    // at once.
    let mut waiting = per;
    let mut host = 1;
    while waiting < sa::qos_reads::MAX_PARKED {
        for _ in 0..per {
            k += 1;
            assert!(question(&mut sa, h[host].1, k).is_empty());
            waiting += 1;
        }
        host += 1;
    }
    k += 1;
    let out = question(&mut sa, h[host].1, k);
    assert_eq!(out.len(), 1, "answered at once");
    assert_eq!(out[0].sa_status(), SaStatus::NoRecords);
    assert_eq!(waiting, sa::qos_reads::MAX_PARKED);
    assert_eq!(sa.qos_questions_waiting(), sa::qos_reads::MAX_PARKED);
    assert_eq!(sa.take_qos_reads().len(), sa::qos_reads::MAX_PARKED);
    // The SM stops being master: the questions go unanswered (a standby
    // answers nothing).
    let ignored = sa.stats().ignored;
    sa.set_serving(false);
    sa.resume(sm.subnet(), 1);
    assert_eq!(sa.qos_questions_waiting(), 0);
    assert!(drain(&mut sa).is_empty());
    assert_eq!(
        sa.stats().ignored,
        ignored + sa::qos_reads::MAX_PARKED as u64
    );
    sa.set_serving(true);
    // A question naming more tables than a bound reads none of them: a
    // switch's every SL-to-VL table is (ports + 1)², 25 here.
    let named = |max| every_sl2vl_table_named(&sm, lids[0], max);
    assert_eq!(named(64).len(), 25);
    assert_eq!(named(25).len(), 25);
    assert!(named(24).is_empty());
}

/// fat-tree-324 up without a QoS policy, and an SA that sends every RMPP
/// segment without waiting for ACKs.
fn fat_tree_324_up() -> (Fabric, Sm, Sa) {
    let topo = Topology::from_spec("fat-tree-324").unwrap();
    let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
    let mut sm = Sm::new(SmConfig::default());
    assert!(f.bring_up(&mut sm));
    let sa = Sa::new(SaConfig {
        rmpp_acks: false,
        ..SaConfig::default()
    });
    (f, sm, sa)
}

#[test]
fn a_36_port_switchs_every_vl_arbitration_block_is_read_for_one_question() {
    let (mut f, mut sm, mut sa) = fat_tree_324_up();
    let me = hosts(&f)[0].1;
    let sw = (0..f.nodes.len())
        .find(|&i| matches!(&f.nodes[i], SimNode::Switch(s) if s.model.ports.len() == 37))
        .expect("a 36-port switch");
    let lid = f.nodes[sw].lid();
    let q = VlArbitrationTableRecord {
        lid,
        ..Default::default()
    };
    let get = ask(
        Method::GetTable,
        &q,
        mask::<VlArbitrationTableRecord>(&["lid"]),
        0,
    );
    let now = f.now_ns() / MS;
    assert!(exchange(&mut sa, &sm, me, &get, now).is_empty(), "it waits");
    // 37 ports × blocks 1 and 3 (blocks 2 and 4 lie past the 8-entry caps).
    let reads = sa.take_qos_reads();
    assert_eq!(reads.len(), 74);
    for t in reads {
        sm.read_qos_table(t).unwrap();
    }
    let until = f.now_ns() + 5 * MS;
    assert!(f.run_until(&mut sm, until));
    sa.resume(sm.subnet(), until / MS);
    assert_eq!(sa.qos_questions_waiting(), 0);
    // The answer, in RMPP segments: every block of every port.
    let segs: Vec<SaMad> = drain(&mut sa)
        .iter()
        .map(|t| SaMad::parse(&t.mad).unwrap())
        .collect();
    assert!(segs.iter().all(|m| m.sa_status() == SaStatus::Ok));
    let total = segs[0].rmpp.payload_length_or_window as usize - 20 * segs.len();
    let data: Vec<u8> = segs.iter().flat_map(|m| m.data).take(total).collect();
    let recs: Vec<VlArbitrationTableRecord> = data
        .chunks(VlArbitrationTableRecord::SIZE)
        .map(|c| VlArbitrationTableRecord::decode(c).unwrap())
        .collect();
    assert_eq!(recs.len(), 37 * 4);
    for (k, r) in recs.iter().enumerate() {
        assert_eq!(
            (r.output_port_num, r.block_num),
            ((k / 4) as u8, (k % 4) as u8 + 1)
        );
    }
    assert_eq!(sa.take_qos_reads(), vec![]);
}

#[test]
fn reads_are_bounded_a_question_a_requester_and_a_second_on_36_port_switches() {
    use sa::qos_reads::{MAX_READS_PER_REQUESTER_PER_SECOND, MAX_READS_PER_SECOND, MAX_TABLES};
    let (f, sm, mut sa) = fat_tree_324_up();
    let h = hosts(&f);
    let switches: Vec<mad_core::Lid> = (0..f.nodes.len())
        .filter(|&i| matches!(&f.nodes[i], SimNode::Switch(s) if s.model.ports.len() == 37))
        .map(|i| f.nodes[i].lid())
        .collect();
    assert!(switches.len() >= 8);
    let mut tid = 0x1000;
    let now = f.now_ns() / MS;
    // A SL-to-VL GetTable from a host: `port` names the output port when
    // given, else every table of the switch is named.
    let mut ask_sl2vl = |sa: &mut Sa, from, lid, port: Option<u8>, now| {
        let q = SlToVlMappingTableRecord {
            lid,
            output_port_num: port.unwrap_or(0),
            ..Default::default()
        };
        let names: &[&str] = if port.is_some() {
            &["lid", "output_port_num"]
        } else {
            &["lid"]
        };
        tid += 1;
        let mut mad = SaMad::request(Method::GetTable, SlToVlMappingTableRecord::ID, tid);
        mad.set_record(&q).unwrap();
        mad.sa.component_mask = mask::<SlToVlMappingTableRecord>(names);
        exchange(sa, &sm, from, &mad.to_bytes(), now)
    };
    // Every SL-to-VL table of a 36-port switch is 37², past MAX_TABLES:
    // answered at once from what is held (nothing: no policy), none read.
    let named = |max| every_sl2vl_table_named(&sm, switches[0], max);
    assert_eq!(named(usize::MAX).len(), 37 * 37);
    assert!(named(MAX_TABLES).is_empty());
    let out = ask_sl2vl(&mut sa, h[0].1, switches[0], None, now);
    assert_eq!(out.len(), 1, "answered at once");
    assert_eq!(out[0].sa.attribute_offset, 0, "no records held");
    assert_eq!(sa.qos_questions_waiting(), 0);
    assert_eq!(sa.take_qos_reads(), vec![]);
    // One output port's tables (37 inputs) wait for their reads. Host 1
    // asks first: from then on the hosts share, and host 0 may have
    // MAX_READS_PER_REQUESTER_PER_SECOND read: three questions (111), not
    // a fourth (148).
    let per_q = 37;
    let out = ask_sl2vl(&mut sa, h[1].1, switches[2], Some(1), now);
    assert!(out.is_empty(), "host 1 waits");
    let fit = MAX_READS_PER_REQUESTER_PER_SECOND / per_q;
    assert_eq!(fit, 3);
    for k in 0..fit {
        let out = ask_sl2vl(&mut sa, h[0].1, switches[1], Some(k as u8 + 1), now);
        assert!(out.is_empty(), "question {k} waits");
    }
    let out = ask_sl2vl(&mut sa, h[0].1, switches[1], Some(30), now);
    assert_eq!(
        out.len(),
        1,
        "past host 0's share this second: answered at once"
    );
    assert_eq!(sa.take_qos_reads().len(), (1 + fit) * per_q);
    // Other hosts are still read for, up to MAX_READS_PER_SECOND in all.
    let mut asked = (1 + fit) * per_q;
    let mut host = 2;
    while asked + per_q <= MAX_READS_PER_SECOND {
        let out = ask_sl2vl(&mut sa, h[host].1, switches[1 + host], Some(1), now);
        assert!(out.is_empty(), "host {host} waits");
        asked += per_q;
        host += 1;
    }
    assert_eq!(sa.take_qos_reads().len(), asked - (1 + fit) * per_q);
    let out = ask_sl2vl(&mut sa, h[host].1, switches[2], Some(2), now);
    assert_eq!(out.len(), 1, "past every host's reads this second");
    assert_eq!(sa.take_qos_reads(), vec![]);
    // The next second the questions have had their time; host 0 still
    // shares with the hosts read for the second before: three again.
    let later = now + 1000;
    sa.resume(sm.subnet(), later);
    assert_eq!(sa.qos_questions_waiting(), 0);
    drain(&mut sa);
    let fresh = |k: usize| Some(5 + k as u8);
    for k in 0..fit {
        let out = ask_sl2vl(&mut sa, h[0].1, switches[1], fresh(k), later);
        assert!(out.is_empty(), "a new second: question {k} waits");
    }
    let out = ask_sl2vl(&mut sa, h[0].1, switches[1], fresh(fit), later);
    assert_eq!(out.len(), 1, "still shared");
    let out = ask_sl2vl(&mut sa, h[1].1, switches[2], Some(3), later);
    assert!(out.is_empty(), "host 1 waits");
    assert_eq!(sa.take_qos_reads().len(), (fit + 1) * per_q);
    // Once a whole second has passed with nobody asking, host 0 alone may
    // have more than its share (a host reading every port's tables, as
    // osmtest -f q does).
    let alone = later + 2500;
    sa.resume(sm.subnet(), alone);
    drain(&mut sa);
    let last = switches[switches.len() - 1];
    for k in 0..=fit {
        let out = ask_sl2vl(&mut sa, h[0].1, last, Some(k as u8 + 1), alone);
        assert!(out.is_empty(), "alone: question {k} waits");
    }
    assert_eq!(sa.take_qos_reads().len(), (fit + 1) * per_q);
    assert!((fit + 1) * per_q > MAX_READS_PER_REQUESTER_PER_SECOND);
}
