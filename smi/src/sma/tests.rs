use super::vswitch::{Out, VSwitchHca};
use super::*;
use mad_core::{DrPath, Guid};

fn sw() -> SwitchSma {
    let mut s = SwitchSma::new(&NodeSpec::switch(0x1000, 8, "sw"));
    for p in 1..=8 {
        s.link_event(p, true, 0);
    }
    s
}
fn ca() -> CaSma {
    let mut c = CaSma::new(&NodeSpec::ca(0x2000, 2, "ca"));
    c.link_event(1, true, 0);
    c
}

fn req(method: Method, attr: AttributeId, am: u32) -> Smp {
    Smp::lid_routed(method, attr, am, 0x42, MKey(0))
}
fn set_req<A: Attribute>(a: &A, am: u32) -> Smp {
    let mut s = req(Method::Set, A::ID, am);
    a.encode(&mut s.data).unwrap();
    s
}
/// A PortInfo as an SM sends it in a Set: the read-back value with the
/// state fields at NoChange.
fn for_set(mut pi: PortInfo) -> PortInfo {
    pi.port_state = PortState::NoChange;
    pi.port_physical_state = PortPhysicalState::NoChange;
    pi
}
fn status(r: &Option<Smp>) -> Status {
    r.as_ref().expect("a response").status()
}
fn snapshot<const P: usize, const L: usize, const M: usize>(
    s: &Sma<P, L, M>,
) -> std::string::String {
    format!("{:?}", s.model)
}

#[test]
fn node_info_reports_the_arrival_port_and_port_guid() {
    let mut c = ca();
    let r = c
        .process(&req(Method::Get, AttributeId::NodeInfo, 0), 2, 0)
        .unwrap();
    assert_eq!(r.status(), Status::OK);
    assert_eq!(r.method(), Method::GetResp);
    let ni = NodeInfo::decode(&r.data).unwrap();
    assert_eq!(ni.local_port_num, 2);
    assert_eq!(ni.port_guid, Guid(0x2002));
    assert_eq!(ni.node_type, NodeType::ChannelAdapter);
    let mut s = sw();
    let ni = NodeInfo::decode(
        &s.process(&req(Method::Get, AttributeId::NodeInfo, 0), 5, 0)
            .unwrap()
            .data,
    )
    .unwrap();
    assert_eq!(
        (ni.num_ports, ni.local_port_num, ni.port_guid),
        (8, 5, Guid(0x1000))
    );
}

#[test]
fn bad_requests_get_the_right_status_and_change_nothing() {
    let mut s = sw();
    let before = snapshot(&s);
    assert_eq!(
        status(&s.process(&req(Method::Set, AttributeId::NodeInfo, 0), 1, 0)),
        Status::UNSUPPORTED_METHOD_ATTR
    );
    assert_eq!(
        status(&s.process(&req(Method::Get, AttributeId::from(0x0099), 0), 1, 0)),
        Status::UNSUPPORTED_METHOD_ATTR
    );
    assert_eq!(
        status(&s.process(&req(Method::Get, AttributeId::NodeInfo, 1), 1, 0)),
        Status::INVALID_FIELD
    );
    assert_eq!(
        status(&s.process(&req(Method::Send, AttributeId::NodeInfo, 0), 1, 0)),
        Status::UNSUPPORTED_METHOD
    );
    let mut v2 = req(Method::Get, AttributeId::NodeInfo, 0);
    v2.header.class_version = 2;
    assert_eq!(status(&s.process(&v2, 1, 0)), Status::UNSUPPORTED_VERSION);
    // A CA has no SwitchInfo, LFT, or (without IsSM) SMInfo.
    let mut c = ca();
    for a in [
        AttributeId::SwitchInfo,
        AttributeId::LinearForwardingTable,
        AttributeId::SmInfo,
    ] {
        assert_eq!(
            status(&c.process(&req(Method::Get, a, 0), 1, 0)),
            Status::UNSUPPORTED_METHOD_ATTR,
            "{a:?}"
        );
    }
    assert_eq!(snapshot(&s), before);
}

#[test]
fn responses_and_traps_from_elsewhere_are_not_answered() {
    let mut s = sw();
    assert!(s
        .process(&req(Method::GetResp, AttributeId::NodeInfo, 0), 1, 0)
        .is_none());
    assert!(s
        .process(&req(Method::Trap, AttributeId::Notice, 0), 1, 0)
        .is_none());
}

fn assign(c: &mut CaSma, lid: u16, state: PortState) -> Option<Smp> {
    let mut pi = PortInfo::decode(
        &c.process(&req(Method::Get, AttributeId::PortInfo, 1), 1, 0)
            .unwrap()
            .data,
    )
    .unwrap();
    pi.lid = Lid(lid);
    pi.master_sm_lid = Lid(1);
    pi.port_state = state;
    pi.port_physical_state = PortPhysicalState::NoChange;
    c.process(&set_req(&pi, 1), 1, 0)
}

#[test]
fn port_info_set_assigns_lids_and_walks_the_legal_states() {
    let mut c = ca();
    let r = assign(&mut c, 5, PortState::NoChange).unwrap();
    assert_eq!(r.status(), Status::OK);
    let pi = PortInfo::decode(&r.data).unwrap();
    assert_eq!(
        (pi.lid, pi.master_sm_lid, pi.port_state),
        (Lid(5), Lid(1), PortState::Init)
    );
    // Init → Active is not allowed; nothing changes.
    let before = snapshot(&c);
    assert_eq!(
        status(&assign(&mut c, 6, PortState::Active)),
        Status::INVALID_FIELD
    );
    assert_eq!(
        snapshot(&c),
        before,
        "a refused Set changes nothing, not even the LID"
    );
    assert_eq!(status(&assign(&mut c, 5, PortState::Armed)), Status::OK);
    assert_eq!(status(&assign(&mut c, 5, PortState::Active)), Status::OK);
    assert_eq!(c.model.ports[1].info.port_state, PortState::Active);
    // Init is not a state an SM may request.
    assert_eq!(
        status(&assign(&mut c, 5, PortState::Init)),
        Status::INVALID_FIELD
    );
    // Down is always allowed; Armed from Down is not.
    assert_eq!(status(&assign(&mut c, 5, PortState::Down)), Status::OK);
    assert_eq!(
        status(&assign(&mut c, 5, PortState::Armed)),
        Status::INVALID_FIELD
    );
}

/// Set(PortInfo) with ClientReregister on `port` of a CA (LID 5): the
/// response's bit, and the port's count of reregistrations after it.
fn rereg(c: &mut CaSma, port: u8, bit: bool) -> (Status, bool, u32) {
    let mut pi = PortInfo::decode(
        &c.process(&req(Method::Get, AttributeId::PortInfo, port.into()), 1, 0)
            .unwrap()
            .data,
    )
    .unwrap();
    pi.lid = Lid(4 + u16::from(port));
    pi.master_sm_lid = Lid(1);
    pi.client_reregister = bit;
    let r = c
        .process(&set_req(&for_set(pi), port.into()), 1, 0)
        .unwrap();
    let echoed = PortInfo::decode(&r.data).unwrap().client_reregister;
    let count = c.model.ports[usize::from(port)].client_reregistrations;
    (r.status(), echoed, count)
}

#[test]
fn client_reregister_is_an_event_answered_once_and_never_kept() {
    let mut c = ca();
    assert_eq!(rereg(&mut c, 1, false), (Status::OK, false, 0));
    assert_eq!(rereg(&mut c, 1, true), (Status::OK, true, 1));
    // A Get reads 0: the bit asks once, it is not a state.
    let got = c
        .process(&req(Method::Get, AttributeId::PortInfo, 1), 1, 0)
        .unwrap();
    assert!(!PortInfo::decode(&got.data).unwrap().client_reregister);
    assert!(!c.model.ports[1].info.client_reregister);
    assert_eq!(rereg(&mut c, 1, true), (Status::OK, true, 2));
    // Another port's clients are not asked.
    assert_eq!(c.model.ports[2].client_reregistrations, 0);
    // A port that does not claim IsClientReregistrationSupported ignores
    // the bit, and answers 0.
    (c.model.ports[2].info.capability_mask)
        .remove(CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED);
    assert_eq!(rereg(&mut c, 2, true), (Status::OK, false, 0));
    // A refused Set asks nothing either.
    let mut pi = c.model.ports[1].info;
    pi.client_reregister = true;
    pi.port_state = PortState::Active; // Init → Active: refused
    let r = c.process(&set_req(&pi, 1), 1, 0).unwrap();
    assert_eq!(r.status(), Status::INVALID_FIELD);
    assert_eq!(c.model.ports[1].client_reregistrations, 2);
}

#[test]
fn port_info_set_refuses_bad_addresses() {
    let mut c = ca();
    for lid in [0u16, 0xC000, 0xFFFF] {
        assert_eq!(
            status(&assign(&mut c, lid, PortState::NoChange)),
            Status::INVALID_FIELD,
            "lid {lid:#x}"
        );
    }
    let mut pi = for_set(c.model.ports[1].info);
    pi.lid = Lid(3);
    pi.lmc = 2; // base LID must be a multiple of 4
    assert_eq!(
        status(&c.process(&set_req(&pi, 1), 1, 0)),
        Status::INVALID_FIELD
    );
    pi.lid = Lid(4);
    assert_eq!(status(&c.process(&set_req(&pi, 1), 1, 0)), Status::OK);
    pi.neighbor_mtu = Mtu::from(6);
    assert_eq!(
        status(&c.process(&set_req(&pi, 1), 1, 0)),
        Status::INVALID_FIELD
    );
}

/// LinkWidthEnabled, LinkSpeedEnabled and LinkSpeedExtEnabled take 0
/// (no change), "set to supported" (255, 15, 31; 30: no extended speed)
/// and a subset of what is supported; anything else is refused and
/// changes nothing.
#[test]
fn link_width_and_speeds_enabled_take_what_the_port_supports() {
    let mut c = ca();
    assert_eq!(status(&assign(&mut c, 4, PortState::NoChange)), Status::OK);
    c.model.ports[1].info.link_speed_ext_supported = LinkSpeedExt::FDR | LinkSpeedExt::EDR;
    let set = |c: &mut CaSma, w: u8, s: u8, e: u8| {
        let mut pi = for_set(c.model.ports[1].info);
        pi.link_width_enabled = LinkWidth::from_bits_retain(w);
        pi.link_speed_enabled = LinkSpeed::from_bits_retain(s);
        pi.link_speed_ext_enabled = LinkSpeedExt::from_bits_retain(e);
        let st = status(&c.process(&set_req(&pi, 1), 1, 0));
        let now = c.model.ports[1].info;
        (
            st,
            now.link_width_enabled.bits(),
            now.link_speed_enabled.bits(),
            now.link_speed_ext_enabled.bits(),
        )
    };
    assert_eq!(set(&mut c, 1, 1, 1), (Status::OK, 1, 1, 1));
    assert_eq!(set(&mut c, 0, 0, 0), (Status::OK, 1, 1, 1), "0: no change");
    assert_eq!(set(&mut c, 255, 15, 31), (Status::OK, 3, 7, 3), "supported");
    assert_eq!(set(&mut c, 0, 0, 30), (Status::OK, 3, 7, 0), "30: none");
    let before = snapshot(&c);
    for (w, s, e) in [(4, 0, 0), (0, 8, 0), (0, 0, 4), (0, 0, 29)] {
        assert_eq!(set(&mut c, w, s, e).0, Status::INVALID_FIELD, "{w} {s} {e}");
        assert_eq!(snapshot(&c), before, "{w} {s} {e}: nothing changed");
    }
}

/// IBA 1.2.1 table 146: a base switch port 0 has no LMC (it holds one
/// LID whatever a Set says); an enhanced one takes it, aligned.
#[test]
fn only_an_enhanced_switch_port_0_takes_an_lmc() {
    for enhanced in [false, true] {
        let mut spec = NodeSpec::switch(0x1000, 8, "sw");
        spec.enhanced_port0 = enhanced;
        let mut s = SwitchSma::new(&spec);
        assert_eq!(s.model.switch_info.enhanced_port0, enhanced);
        let mut pi = for_set(s.model.ports[0].info);
        pi.lid = Lid(6);
        pi.lmc = 2;
        let want = if enhanced {
            Status::INVALID_FIELD // 6 is no multiple of 4
        } else {
            Status::OK
        };
        assert_eq!(status(&s.process(&set_req(&pi, 0), 0, 0)), want);
        pi.lid = Lid(8);
        assert_eq!(status(&s.process(&set_req(&pi, 0), 0, 0)), Status::OK);
        let lmc = s.model.ports[0].info.lmc;
        assert_eq!(lmc, if enhanced { 2 } else { 0 });
        assert_eq!(s.model.owns_lid(0, Lid(11)), enhanced);
        assert!(s.model.owns_lid(0, Lid(8)) && !s.model.owns_lid(0, Lid(12)));
    }
}

#[test]
fn lft_blocks_are_bounded_by_linear_fdb_top_and_capacity() {
    let mut s = sw();
    let mut t = LinearForwardingTable::dropping();
    t.port[3] = 4;
    // Block 1 is above LinearFDBTop (0): refused.
    assert_eq!(
        status(&s.process(&set_req(&t, 1), 1, 0)),
        Status::INVALID_FIELD
    );
    let mut si = s.model.switch_info;
    si.linear_fdb_top = 127;
    assert_eq!(status(&s.process(&set_req(&si, 0), 1, 0)), Status::OK);
    assert_eq!(status(&s.process(&set_req(&t, 1), 1, 0)), Status::OK);
    let r = s
        .process(
            &req(Method::Get, AttributeId::LinearForwardingTable, 1),
            1,
            0,
        )
        .unwrap();
    assert_eq!(LinearForwardingTable::view(&r.data).unwrap()[3], 4);
    assert_eq!(s.model.lft_port(Lid(67)), 4);
    assert_eq!(s.model.lft_port(Lid(200)), 0xFF, "above LinearFDBTop drops");
    // A port the switch does not have.
    t.port[5] = 9;
    assert_eq!(
        status(&s.process(&set_req(&t, 1), 1, 0)),
        Status::INVALID_FIELD
    );
    // Beyond the capacity (768 blocks).
    assert_eq!(
        status(&s.process(
            &req(Method::Get, AttributeId::LinearForwardingTable, 768),
            1,
            0
        )),
        Status::INVALID_FIELD
    );
    // LinearFDBTop beyond the capacity.
    si.linear_fdb_top = 0xC000;
    assert_eq!(
        status(&s.process(&set_req(&si, 0), 1, 0)),
        Status::INVALID_FIELD
    );
}

#[test]
fn mft_positions_and_blocks() {
    let mut s = sw();
    let mut t = MulticastForwardingTable::default();
    t.port_mask[0] = 0b1_0110;
    let am = modifier::MftSelect {
        position: 0,
        block: 2,
    }
    .encode();
    assert_eq!(status(&s.process(&set_req(&t, am), 1, 0)), Status::OK);
    let r = s
        .process(
            &req(Method::Get, AttributeId::MulticastForwardingTable, am),
            1,
            0,
        )
        .unwrap();
    assert_eq!(
        MulticastForwardingTable::decode(&r.data).unwrap().port_mask[0],
        0b1_0110
    );
    assert_eq!(s.model.mft[64][0], 0b1_0110);
    // Position 1 covers ports 16..31: an 8-port switch has none.
    let am = modifier::MftSelect {
        position: 1,
        block: 0,
    }
    .encode();
    assert_eq!(
        status(&s.process(&set_req(&t, am), 1, 0)),
        Status::INVALID_FIELD
    );
    // Block 32 is beyond 1024 MLIDs.
    let am = modifier::MftSelect {
        position: 0,
        block: 32,
    }
    .encode();
    assert_eq!(
        status(&s.process(
            &req(Method::Get, AttributeId::MulticastForwardingTable, am),
            1,
            0
        )),
        Status::INVALID_FIELD
    );
}

#[test]
fn guid_info_alias_guids_and_the_read_only_entry_0() {
    let mut c = ca();
    let mut g = GuidInfo::default();
    g.guids[0] = Guid(0xdead);
    g.guids[1] = Guid(0xa11a5);
    assert_eq!(status(&c.process(&set_req(&g, 0), 1, 0)), Status::OK);
    let r = GuidInfo::decode(
        &c.process(&req(Method::Get, AttributeId::GuidInfo, 0), 1, 0)
            .unwrap()
            .data,
    )
    .unwrap();
    assert_eq!(r.guids[0], Guid(0x2001), "entry 0 is the hardware GUID");
    assert_eq!(r.guids[1], Guid(0xa11a5));
    assert_eq!(
        status(&c.process(&req(Method::Get, AttributeId::GuidInfo, 1), 1, 0)),
        Status::INVALID_FIELD,
        "GUIDCap 8"
    );
}

#[test]
fn p_key_table_blocks_and_switch_ports() {
    let mut s = sw();
    let mut t = PKeyTable::default();
    t.p_keys[1] = PKey(0x8001);
    let am = modifier::PKeyBlock { port: 3, block: 0 }.encode();
    assert_eq!(status(&s.process(&set_req(&t, am), 1, 0)), Status::OK);
    assert_eq!(s.model.ports[3].pkeys[1], PKey(0x8001));
    assert_eq!(s.model.ports[2].pkeys[1], PKey(0));
    let am = modifier::PKeyBlock { port: 9, block: 0 }.encode();
    assert_eq!(
        status(&s.process(&set_req(&t, am), 1, 0)),
        Status::INVALID_FIELD
    );
    let am = modifier::PKeyBlock { port: 3, block: 1 }.encode();
    assert_eq!(
        status(&s.process(&set_req(&t, am), 1, 0)),
        Status::INVALID_FIELD,
        "cap 8 entries"
    );
}

#[test]
fn sl_to_vl_all_ports_and_vl_arbitration() {
    let mut s = sw();
    let mut t = SlToVlMappingTable::default();
    t.vl[0] = 1;
    t.vl[15] = 15;
    let am = modifier::SlToVlPorts {
        input_port: 0,
        output_port: 0,
        all_input_ports: true,
        all_output_ports: true,
    }
    .encode();
    assert_eq!(status(&s.process(&set_req(&t, am), 1, 0)), Status::OK);
    for o in 1..=8 {
        for i in 0..=8 {
            assert_eq!(s.model.ports[o].sl2vl[i], t, "in {i} out {o}");
        }
    }
    let mut a = VlArbitrationTable::default();
    a.entries[0] = VlArbEntry { vl: 1, weight: 64 };
    let am = modifier::VlArbSelect {
        block: modifier::VlArbBlock::HighPriority0To31,
        port: 2,
    }
    .encode();
    assert_eq!(status(&s.process(&set_req(&a, am), 1, 0)), Status::OK);
    assert_eq!(s.model.ports[2].vl_arb[2].entries[0].weight, 64);
}

#[test]
fn m_key_violation_drops_counts_and_traps_256() {
    let mut c = ca();
    c.model.ports[1].info.port_state = PortState::Active;
    let mut pi = for_set(c.model.ports[1].info);
    pi.lid = Lid(9);
    pi.master_sm_lid = Lid(1);
    pi.m_key = MKey(0x5EC2E7);
    pi.m_key_protect_bits = 1;
    pi.m_key_lease_period = 60;
    assert_eq!(status(&c.process(&set_req(&pi, 1), 1, 0)), Status::OK);
    // Level 1: a Get with the wrong key succeeds but hides the key.
    let r = c
        .process(&req(Method::Get, AttributeId::PortInfo, 1), 1, 0)
        .unwrap();
    assert_eq!(PortInfo::decode(&r.data).unwrap().m_key, MKey(0));
    let mut good = req(Method::Get, AttributeId::PortInfo, 1);
    good.set_m_key(MKey(0x5EC2E7));
    assert_eq!(
        PortInfo::decode(&c.process(&good, 1, 0).unwrap().data)
            .unwrap()
            .m_key,
        MKey(0x5EC2E7)
    );
    // A Set with the wrong key: no response, nothing changed, counted, trapped.
    let before = c.model.ports[1].info;
    let mut evil = pi;
    evil.lid = Lid(77);
    let mut bad = Smp::directed(
        &DrPath::from_ports(&[1, 4]).unwrap(),
        Method::Set,
        AttributeId::PortInfo,
        1,
        9,
        MKey(0xBAD),
    );
    evil.encode(&mut bad.data).unwrap();
    bad.return_path[1] = 3;
    bad.return_path[2] = 6;
    assert!(c.process(&bad, 1, 1_000).is_none());
    let after = c.model.ports[1].info;
    assert_eq!(after.lid, before.lid);
    assert_eq!(after.m_key_violations, 1);
    assert_eq!(c.model.ports[1].lease.expires_ms, Some(61_000));
    let trap = c.pending_traps().last().unwrap().notice;
    let Ok(mad_core::notice::TrapDetails::BadMKey(t)) = trap.details() else {
        panic!("trap 256 expected")
    };
    assert_eq!(
        (t.lid, t.m_key, t.attribute_id, t.attribute_modifier),
        (Lid(9), MKey(0xBAD), 0x15, 1)
    );
    assert!(t.dr_notice);
    assert_eq!(
        (t.dr_hop_count, t.dr_return_path[0], t.dr_return_path[1]),
        (2, 3, 6)
    );
    // More violations while that trap waits, a TrapRepress with the wrong
    // key among them: counted, and no second trap 256.
    let traps = c.pending_traps().len();
    assert!(c.process(&bad, 1, 1_001).is_none());
    let mut repress = Smp::lid_routed(
        Method::TrapRepress,
        AttributeId::Notice,
        0,
        c.pending_traps().last().unwrap().tid,
        MKey(0xBAD),
    );
    repress.data = bad.data;
    assert!(c.process(&repress, 1, 1_002).is_none());
    assert_eq!(c.model.ports[1].info.m_key_violations, 3);
    assert_eq!(
        c.pending_traps().len(),
        traps,
        "one bad M_Key trap at a time"
    );
    // Repressed with the key, the next violation traps again.
    repress.set_m_key(MKey(0x5EC2E7));
    assert!(c.process(&repress, 1, 1_003).is_none());
    assert_eq!(c.pending_traps().len(), traps - 1);
    assert!(c.process(&bad, 1, 1_004).is_none());
    assert_eq!(c.pending_traps().len(), traps);
}

fn activate_switch(s: &mut SwitchSma) {
    let mut pi = for_set(s.model.ports[0].info);
    pi.lid = Lid(7);
    pi.master_sm_lid = Lid(1);
    pi.subnet_time_out = 8; // ~1 ms repeats
    assert_eq!(status(&s.process(&set_req(&pi, 0), 1, 0)), Status::OK);
}

#[test]
fn trap_128_on_port_state_change_repeats_until_repressed() {
    let mut s = sw();
    activate_switch(&mut s);
    s.link_event(4, false, 10);
    assert!(s.model.switch_info.port_state_change);
    let t = s.poll_trap(10).expect("trap 128 due");
    assert_eq!((t.slid, t.dlid), (Lid(7), Lid(1)));
    assert_eq!(t.smp.method(), Method::Trap);
    let n = mad_core::notice::Notice::decode(&t.smp.data).unwrap();
    assert_eq!(n.trap_number(), Some(128));
    assert!(s.poll_trap(10).is_none(), "not again before the interval");
    let again = s.poll_trap(12).expect("repeated");
    assert_eq!(again.smp.header.transaction_id, t.smp.header.transaction_id);
    // TrapRepress with the TID: no response, no more repeats.
    let mut rep = t.smp.clone();
    rep.header.method = Method::TrapRepress.into();
    assert!(s.process(&rep, 4, 13).is_none());
    assert!(s.poll_trap(1_000).is_none());
    // The SM clears PortStateChange by writing 1.
    let mut si = s.model.switch_info;
    si.port_state_change = true;
    s.process(&set_req(&si, 0), 1, 20);
    assert!(!s.model.switch_info.port_state_change);
}

#[test]
fn no_trap_before_the_sm_is_known() {
    let mut s = sw();
    s.link_event(4, false, 10);
    assert!(s.poll_trap(10).is_none(), "MasterSMLID 0: no trap");
    activate_switch(&mut s);
    assert!(
        s.poll_trap(11).is_none(),
        "a trap with nobody to receive it was dropped"
    );
    assert!(
        s.model.switch_info.port_state_change,
        "a light sweep still sees the change"
    );
    s.link_event(4, true, 12);
    assert!(s.poll_trap(12).is_some());
}

#[test]
fn vswitch_hca_looks_like_a_switch_with_functions_behind_it() {
    // The model is a few hundred KiB of bounded storage: give the debug
    // build's copies room.
    std::thread::Builder::new()
        .stack_size(32 << 20)
        .spawn(vswitch_hca)
        .unwrap()
        .join()
        .unwrap();
}

fn vswitch_hca() {
    let mut h = VSwitchHca::new(0x9000, 4);
    h.link_event(true, 0);
    let get = |path: &[u8], attr| {
        let mut s = Smp::directed(
            &DrPath::from_ports(path).unwrap(),
            Method::Get,
            attr,
            0,
            1,
            MKey(0),
        );
        // As if the SM's switch had sent it: hop pointer past the SM side.
        crate::dr::originate(&mut s, &SwNode, path[0]).unwrap();
        s
    };
    // A one-hop path from "outside": the virtual switch answers.
    let Out::Leave(r) = h.process(get(&[1], AttributeId::NodeInfo), 0) else {
        panic!()
    };
    let ni = NodeInfo::decode(&r.data).unwrap();
    assert_eq!(
        (ni.node_type, ni.num_ports, ni.node_guid),
        (NodeType::Switch, 6, Guid(0x9000))
    );
    // Through the virtual switch's port 2: the PF; port 4: VF 1.
    let Out::Leave(r) = h.process(get(&[1, 2], AttributeId::NodeInfo), 0) else {
        panic!()
    };
    assert_eq!(NodeInfo::decode(&r.data).unwrap().node_guid, Guid(0x9100));
    assert!(r.direction());
    let Out::Leave(r) = h.process(get(&[1, 4], AttributeId::NodeInfo), 0) else {
        panic!()
    };
    let ni = NodeInfo::decode(&r.data).unwrap();
    assert_eq!(
        (ni.node_type, ni.node_guid),
        (NodeType::ChannelAdapter, Guid(0x9210))
    );
    // The PF's LID is the virtual switch's.
    let mut pi = for_set(h.pf.model.ports[1].info);
    pi.lid = Lid(33);
    let mut s = Smp::directed(
        &DrPath::from_ports(&[1, 2]).unwrap(),
        Method::Set,
        AttributeId::PortInfo,
        0,
        2,
        MKey(0),
    );
    pi.encode(&mut s.data).unwrap();
    crate::dr::originate(&mut s, &SwNode, 1).unwrap();
    assert!(matches!(h.process(s, 0), Out::Leave(_)));
    assert_eq!(h.vswitch.model.lid(0), Lid(33));
    // A path beyond the last VF port is discarded with the reason.
    assert_eq!(
        h.process(get(&[1, 9], AttributeId::NodeInfo), 0),
        Out::Nothing(Some(crate::dr::Discard::NoSuchPort(9)))
    );
}

/// The switch the SM's SMP leaves from, for `originate` in tests.
struct SwNode;
impl crate::dr::Node for SwNode {
    fn is_switch(&self) -> bool {
        true
    }
    fn num_ports(&self) -> u8 {
        36
    }
    fn port_up(&self, _: u8) -> bool {
        true
    }
}

#[test]
fn port_info_modifier_bit_31_is_extended_speeds_not_all_ports() {
    // OpenSM sets bit 31 (SMSupportsExtendedSpeeds) in the PortInfo Sets it
    // sends to ports with extended speeds: only the selected port changes.
    let mut s = sw();
    for p in 1..=4 {
        s.link_event(p, true, 0);
    }
    let mut pi = for_set(s.model.ports[3].info);
    pi.port_state = PortState::Down;
    let r = s.process(&set_req(&pi, 3 | 1 << 31), 1, 0);
    assert_eq!(status(&r), Status::OK);
    assert_eq!(s.model.ports[3].info.port_state, PortState::Down);
    for p in [1usize, 2, 4] {
        assert_eq!(
            s.model.ports[p].info.port_state,
            PortState::Init,
            "port {p}"
        );
    }
}

#[test]
fn a_switch_answers_sminfo_for_the_sm_behind_its_port_0() {
    let mut s = sw();
    let get = req(Method::Get, AttributeId::SmInfo, 0);
    // No SM on the switch: SMInfo is not supported, by whatever port.
    assert_eq!(
        status(&s.process(&get, 3, 0)),
        Status::UNSUPPORTED_METHOD_ATTR
    );
    // An SM behind port 0 (its IsSM): answered on any port.
    s.model.ports[0]
        .info
        .capability_mask
        .set(CapabilityMask::IS_SM, true);
    s.model.sm_info.priority = 9;
    for port in [1, 3, 8] {
        let r = s.process(&get, port, 0).expect("a response");
        assert_eq!(r.status(), Status::OK, "by port {port}");
        assert_eq!(SmInfo::decode(&r.data).unwrap().priority, 9);
    }
    // IsSM on an external port alone says nothing of a switch's SM.
    let mut t = sw();
    t.model.ports[3]
        .info
        .capability_mask
        .set(CapabilityMask::IS_SM, true);
    assert_eq!(
        status(&t.process(&get, 3, 0)),
        Status::UNSUPPORTED_METHOD_ATTR
    );
}

#[test]
fn a_vfs_pkey_table_is_its_own_and_a_bad_modifier_changes_nothing() {
    use super::hypervisor::Hypervisor;
    use mad_core::attr::VPortPKeyTable;
    let mut h = Hypervisor::new(0x3000, 4, "hyp");
    h.pf.link_event(1, true, 0);
    let get = |h: &mut Hypervisor, am: u32| {
        h.process(&req(Method::Get, AttributeId::VPortPKeyTable, am), 1, 0)
    };
    // A fresh VF holds the default P_Key, full, at index 0.
    let r = get(&mut h, 2 << 16);
    assert_eq!(status(&r), Status::OK);
    let t = VPortPKeyTable::decode(&r.unwrap().data).unwrap();
    assert_eq!((t.p_keys[0], t.p_keys[1]), (PKey(0xFFFF), PKey(0)));
    let mut t = VPortPKeyTable::default();
    t.p_keys[0] = PKey(0x7FFF);
    t.p_keys[1] = PKey(0x8010);
    let r = h.process(&set_req(&t, 2 << 16), 1, 0);
    assert_eq!(status(&r), Status::OK);
    assert_eq!(VPortPKeyTable::decode(&r.unwrap().data).unwrap(), t);
    // Only VF 2 changed; the PF's own table did not.
    let other = VPortPKeyTable::decode(&get(&mut h, 1 << 16).unwrap().data).unwrap();
    assert_eq!(other.p_keys[0], PKey(0xFFFF));
    assert_eq!(h.pf.model.ports[1].pkeys[0], PKey(0xFFFF));
    // Vport 0, a vport past the VFs, a block past the first: refused.
    let before = format!("{:?}", h.vports);
    for am in [0, 5 << 16, (2 << 16) | 1] {
        let r = h.process(&set_req(&VPortPKeyTable::default(), am), 1, 0);
        assert_eq!(status(&r), Status::INVALID_FIELD, "{am:#x}");
    }
    assert_eq!(format!("{:?}", h.vports), before);
    // The table of an enabled VF is found by its LID; a disabled VF's is not.
    let mut v = h.vports[0].vfs[1];
    v.vport_state = PortState::Active;
    v.vport_lid = Lid(0x40);
    h.process(&set_req(&v, 2), 1, 0);
    assert_eq!(
        h.vports[0].pkeys_of_lid(Lid(0x40)).unwrap()[1],
        PKey(0x8010)
    );
    assert!(h.vports[0].pkeys_of_lid(Lid(0x41)).is_none());
}
