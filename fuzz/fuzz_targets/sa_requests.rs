//! ibkit's SA (`sa::Sa`) under what hosts send it: arbitrary MADs (read
//! as requests — Sets and Deletes of services, subscriptions and
//! multicast memberships among them —, segments of requests in several,
//! RMPP ACKs, STOPs, ABORTs and ReportResps) from a few
//! requesters, interleaved with time passing, traps the SM forwards (the
//! same bytes read as a notice), and answers polled or left queued, over
//! a subnet ibkit's SM brought up with partitions and a full QoS policy
//! (its levels cap, restrict or refuse paths), at LMC 0 or at LMC 2 (four
//! LIDs a CA, a level's path bits choosing among them; requesters at LIDs
//! above their ports' bases too), with OpenSM's multicast join and MGID
//! checks on or off, solicited-node groups consolidated or not,
//! ports that hold both keys of a partition (`allow_both_pkeys`) or not,
//! cables of one rate (4x QDR) or from 1x SDR to 12x HDR
//! (`mixed-rates`), and rates kept to the original extended codes
//! (`use_original_extended_sa_rates_only`) and under `max_rate_enum`,
//! or not. Nothing may panic; the
//! SA's queue, transfers, services and subscriptions stay within their
//! bounds; every
//! answer is a well-formed SA MAD to the requester that asked, every
//! Report goes to one of the requesters, and every alias GUID block the
//! SA decides passes the SM's checks.
#![no_main]

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use libfuzzer_sys::fuzz_target;
use mad_core::notice::Notice;
use mad_core::sa::SaMad;
use mad_core::{Lid, Method};
use sa::{Addr, Sa, SaConfig};
use smi::sm::partitions::parse;
use smi::sm::{Sm, SmConfig, SmEvent};
use std::sync::OnceLock;

/// The subnet at LMC `lmc` (0 or 2; at 2 every other switch has an
/// enhanced port 0 that takes the LMC too, `lmc_esp0`), with OpenSM's
/// `allow_both_pkeys` or without (`both`: a port that is a `both` member
/// holds the full and the limited key), on `mport-ntree:4:2` or (`mixed`)
/// `mixed-rates`, and the LIDs of its four requesters.
fn subnet(lmc: u8, both: bool, mixed: bool) -> &'static (Sm, [Lid; 4]) {
    static SM: [OnceLock<(Sm, [Lid; 4])>; 8] = [const { OnceLock::new() }; 8];
    SM[usize::from(lmc != 0) + 2 * usize::from(both) + 4 * usize::from(mixed)].get_or_init(|| {
        // Partitioned, so that paths, joins and services meet P_Keys
        // the ports do and do not hold.
        let spec = if mixed { "mixed-rates" } else { "mport-ntree:4:2" };
        let mut topo = Topology::from_spec(spec).unwrap();
        for (i, n) in topo.nodes.iter_mut().enumerate() {
            n.enhanced_port0 = lmc > 0 && n.ports > 1 && i % 2 == 0;
        }
        let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
        let mut sm = Sm::new(SmConfig {
            lmc,
            lmc_esp0: lmc > 0,
            allow_both_pkeys: both,
            ..SmConfig::default()
        });
        let conf = "Default=0x7fff,ipoib:ALL=limited,SELF=full;\n\
                    blue=0x10,ipoib,mtu=5:ALL_SWITCHES=full,ALL_CAS=limited;\n\
                    red=0x20,ipoib:0x0002c90400000101=full,0x0002c90400000201,0x0002c90400000301=both;\n";
        sm.set_partitions(parse(conf).unwrap());
        let policy = "port-groups\n port-group\n  name: Switches\n  node-type: SWITCH, SELF\n end-port-group\n \
                      port-group\n  name: Red\n  partition: red\n  pkey: 0x10\n end-port-group\nend-port-groups\n\
                      qos-levels\n qos-level\n  name: DEFAULT\n  sl: 1\n end-qos-level\n \
                      qos-level\n  name: Low\n  sl: 2\n  mtu-limit: 2\n  rate-limit: 2\n  packet-life: 30\n  pkey: 0x20\n  path-bits: 1-2\n end-qos-level\nend-qos-levels\n\
                      qos-match-rules\n qos-match-rule\n  qos-class: 1-9\n  source: Red\n  qos-level-name: Low\n end-qos-match-rule\n \
                      qos-match-rule\n  destination: Switches\n  service-id: 0x10000-0x1ffff\n  pkey: 0x7fff\n  qos-level-name: Low\n end-qos-match-rule\n\
                      end-qos-match-rules\nqos-ulps\n  ipoib, pkey 0x10 : 3\nend-qos-ulps\n";
        sm.set_qos_policy(Some(smi::sm::qos_policy::parse_policy(policy).unwrap()));
        assert!(f.bring_up(&mut sm));
        // LMC 0: LIDs 1 to 4. LMC 2: four CAs, each at another offset
        // into its LIDs.
        let from = if lmc == 0 {
            [1, 2, 3, 4].map(Lid)
        } else {
            let cas: Vec<u16> = (sm.nodes().iter())
                .filter(|n| !n.is_switch() && n.lid != 0)
                .map(|n| n.lid)
                .collect();
            [0, 1, 2, 3].map(|k| Lid(cas[k % cas.len()] + k as u16))
        };
        (sm, from)
    })
}

fuzz_target!(|data: &[u8]| {
    let lmc = if data.first().is_some_and(|b| b & 2 != 0) {
        2
    } else {
        0
    };
    let bit = |m: u8| data.first().is_some_and(|b| b & m != 0);
    let (sm, requesters) = subnet(lmc, bit(32), bit(128));
    let cfg = SaConfig {
        max_queued: 16,
        max_transfers: 4,
        max_records: 64,
        // Small enough that path questions, held answers and a
        // requester's and all requesters' second of work all meet their
        // bounds.
        max_examined: 512,
        max_examined_per_second: 2048,
        max_examined_all_per_second: 3072,
        max_transfer_bytes: 64 * 1024,
        rmpp_retries: 2,
        rmpp_timeout_ms: 10,
        rmpp_acks: data.first().is_some_and(|b| b & 1 == 0),
        // OpenSM's multicast checks off too: joins with any fields, and
        // groups with any MGID.
        mcgroup_join_validation: data.first().is_none_or(|b| b & 4 == 0),
        ipoib_mcgroup_creation_validation: data.first().is_none_or(|b| b & 8 == 0),
        // OpenSM's consolidate_ipv6_snm_req: solicited-node groups share
        // MLIDs.
        consolidate_ipv6_snm_req: data.first().is_some_and(|b| b & 16 != 0),
        // OpenSM's use_original_extended_sa_rates_only: no rate code
        // above 300 Gb/s.
        use_original_extended_sa_rates_only: bit(64),
        // OpenSM 3.3.24's max_rate_enum: 40 Gb/s's code at most, with
        // and without the above.
        max_rate_enum: if bit(8) { 7 } else { sa::path::NO_RATE_LIMIT },
        ..SaConfig::default()
    };
    let mut sa = Sa::new(cfg.clone());
    let mut now = 0u64;
    // Each step: a control byte, then a MAD-sized chunk.
    for chunk in data.get(1..).unwrap_or(&[]).chunks(257) {
        let (ctl, mad) = (chunk[0], &chunk[1..]);
        let from = Addr {
            lid: requesters[usize::from(ctl & 3)],
            qpn: u32::from(ctl >> 6),
        };
        let _ = sa.handle_mad(sm.subnet(), from, mad, now);
        // Again with the requester's own GID where an MCMemberRecord has
        // its PortGID (SA data at byte 56, PortGID 16 bytes in): joins and
        // leaves of ports that exist get reached.
        if ctl & 0x10 != 0 && mad.len() >= 88 {
            if let Some(end) = sa::path::end_by_lid(sm.subnet(), from.lid) {
                let mut m = mad.to_vec();
                m[72..88].copy_from_slice(&end.gid.0);
                let _ = sa.handle_mad(sm.subnet(), from, &m, now);
                // And once more with an IPv6 solicited-node MGID (scope,
                // P_Key and low 24 bits from the MAD), so that
                // consolidated groups get made and left.
                let snm = [
                    0xff,
                    0x10 | (m[57] & 0x0F),
                    0x60,
                    0x1b,
                    m[60],
                    m[61],
                    0,
                    0,
                    0,
                    0,
                    0,
                    1,
                    0xff,
                ];
                m[56..69].copy_from_slice(&snm);
                let _ = sa.handle_mad(sm.subnet(), from, &m, now);
            }
        }
        // Again as a GUIDInfoRecord of the requester's own LID, with LID
        // and BlockNum in the mask: alias GUID Sets and Deletes of ports
        // that exist get reached.
        if ctl & 0x20 != 0 && mad.len() >= 128 {
            let mut m = mad.to_vec();
            // An SA request (base version 1, class 3, version 2), its
            // method Set or Delete as the byte's low bit says.
            let method = if m[3] & 1 == 0 { 0x02 } else { 0x15 };
            m[..4].copy_from_slice(&[1, 3, 2, method]);
            m[24] = 1;
            m[25..28].fill(0);
            m[16..18].copy_from_slice(&0x0030u16.to_be_bytes());
            m[55] |= 0x03;
            m[56..58].copy_from_slice(&from.lid.0.to_be_bytes());
            let _ = sa.handle_mad(sm.subnet(), from, &m, now);
            let changes = sa.take_guid_changes();
            assert!(changes.len() <= sa::guids::MAX_PENDING);
            for c in changes {
                // What the SA hands the SM passes the SM's own checks.
                assert_eq!(
                    sm.subnet().check_guid_block(c.node, c.block, &c.guids),
                    Ok(()),
                    "{c:?}"
                );
            }
        }
        // Again as an SLtoVLMappingTableRecord or VLArbitrationTableRecord
        // Get or GetTable naming the requester's LID: questions that wait
        // for the SM to read tables get reached.
        if ctl & 0x04 != 0 && mad.len() >= 64 {
            let mut m = mad.to_vec();
            let method = if m[3] & 1 == 0 { 0x01 } else { 0x12 };
            m[..4].copy_from_slice(&[1, 3, 2, method]);
            let attr: u16 = if mad[3] & 2 == 0 { 0x0013 } else { 0x0036 };
            m[16..18].copy_from_slice(&attr.to_be_bytes());
            m[24] = 0;
            m[55] |= 0x01;
            m[56..58].copy_from_slice(&from.lid.0.to_be_bytes());
            let _ = sa.handle_mad(sm.subnet(), from, &m, now);
        }
        // The same bytes again as a response with the RMPP bits forced on:
        // the transfer paths (ACK, STOP, ABORT) get reached.
        if mad.len() >= 36 {
            let mut r = [0u8; 256];
            r[..mad.len().min(256)].copy_from_slice(&mad[..mad.len().min(256)]);
            r[1] = 0x03;
            r[3] |= 0x80;
            r[26] |= 1;
            let _ = sa.handle_mad(sm.subnet(), from, &r, now);
            // And as a segment of a request in several (RMPP version 1,
            // DATA, active; First, Last and the segment number as the
            // bytes say): reassembly gets reached.
            r[3] &= 0x7F;
            r[24] = 1;
            r[25] = 1;
            let _ = sa.handle_mad(sm.subnet(), from, &r, now);
        }
        assert!(sa.transfers() <= cfg.max_transfers);
        assert!(sa.transfer_bytes() <= cfg.max_transfer_bytes);
        assert!(sa.requests_receiving() <= cfg.max_transfers);
        assert!(sa.services() <= sa::service::MAX_SERVICES);
        let (subs, pending) = sa.subscriptions();
        assert!(subs <= sa::inform::MAX_SUBSCRIPTIONS && pending <= sa::inform::MAX_PENDING);
        let groups = sa.groups();
        assert!(groups.iter().count() <= sa::mcast::MAX_GROUPS);
        assert!(groups.memberships() <= sa::mcast::MAX_MEMBERS);
        assert!(
            groups
                .iter()
                .any(|g| g.rec.mgid == sa::mcast::IPOIB_BROADCAST),
            "the well-known group stays"
        );
        // No group above the rate limit (the partitions' own groups are
        // at their 10 Gb/s).
        let limit = cfg.rate_limit();
        if limit < sa::path::NO_RATE_LIMIT {
            assert!(
                groups.iter().all(|g| g.rec.rate <= limit),
                "a group above the limit"
            );
        }
        if ctl & 0x08 != 0 {
            if let Ok(notice) = Notice::decode(mad) {
                let e = SmEvent::Trap {
                    issuer: notice.issuer_lid,
                    number: notice.trap_number(),
                    notice,
                };
                sa.handle_event(sm.subnet(), &e, now);
            }
        }
        now += u64::from(ctl & 0x3C);
        if ctl & 0x20 != 0 {
            sa.handle_timeout(now);
        }
        // The reads the SA asks for name live nodes, within the bounds;
        // this SM never reads them, so the questions end by their time.
        let reads = sa.take_qos_reads();
        assert!(reads.len() <= sa::qos_reads::MAX_READS_PER_SECOND);
        for t in reads {
            assert!(sm.subnet().node(t.node()).is_some_and(|n| n.alive), "{t:?}");
        }
        assert!(sa.qos_questions_waiting() <= sa::qos_reads::MAX_PARKED);
        sa.resume(sm.subnet(), now);
        if ctl & 0x10 != 0 {
            while let Some(t) = sa.poll_transmit() {
                let m = SaMad::parse(&t.mad).expect("an answer is an SA MAD");
                assert!(m.header.is_response() || m.method() == Method::Report);
                assert!((24..=256).contains(&t.len));
                assert!(requesters.contains(&t.to.lid));
                // No rate code above the limit in the PathRecords of an
                // answer's first (or only) segment: byte 55 of each
                // record, its rate selector and rate.
                let path = m.attribute_id() == mad_core::sa::SaAttributeId::PathRecord;
                let first = !m.rmpp.active() || m.rmpp.segment_number == 1;
                let stride = usize::from(m.sa.attribute_offset) * 8;
                let ok = m.sa_status() == mad_core::sa::SaStatus::Ok;
                if limit < sa::path::NO_RATE_LIMIT && path && ok && first && stride >= 64 {
                    for r in m.data.chunks_exact(stride) {
                        assert!(r[55] & 0x3F <= limit, "rate {:#x}", r[55]);
                    }
                }
            }
        }
    }
});
