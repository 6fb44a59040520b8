//! The SM brings simulated fabrics up from nothing: every node found, every
//! port given a LID and made Active, and every CA reaches every other CA's
//! LID (and every switch LID) through the installed LFTs, without loops.

use fabric::sim::{Fabric, SimConfig, SimNode, Walk};
use fabric::topology::Topology;
use mad_core::attr::{AttributeId, PortState};
use mad_core::{Lid, Method};
use smi::sm::{Phase, Sm, SmConfig};

fn bring_up(spec: &str, cfg: SimConfig, sm_cfg: SmConfig) -> (Fabric, Sm) {
    let (f, sm, up) = fabric::sim::bring_up(spec, cfg, sm_cfg).unwrap();
    assert!(up, "{spec}: stopped in {:?}: {:?}", sm.phase(), sm.stats());
    (f, sm)
}

fn verify(f: &Fabric) {
    let cas: Vec<usize> = (0..f.nodes.len())
        .filter(|&i| matches!(f.nodes[i], SimNode::Ca(_)))
        .collect();
    let lids: Vec<Lid> = f.nodes.iter().map(|n| n.lid()).collect();
    for &src in &cas {
        for (dst, &lid) in lids.iter().enumerate() {
            if dst == src {
                continue;
            }
            match f.walk(src, lid) {
                Walk::Delivered(_) => {}
                other => panic!(
                    "{} → {} (LID {}): {other:?}",
                    f.topo.nodes[src].name, f.topo.nodes[dst].name, lid.0
                ),
            }
        }
    }
}

fn all_active(f: &Fabric) {
    for (i, n) in f.nodes.iter().enumerate() {
        let ports = f.topo.nodes[i].ports;
        for p in 1..=ports {
            if f.topo.peer_of(i, p).is_none() {
                continue;
            }
            let state = match n {
                SimNode::Switch(s) => s.model.ports[usize::from(p)].info.port_state,
                SimNode::Ca(c) => c.model.ports[usize::from(p)].info.port_state,
                SimNode::Hypervisor(h) => h.pf.model.ports[usize::from(p)].info.port_state,
            };
            assert_eq!(
                state,
                PortState::Active,
                "{} port {p}",
                f.topo.nodes[i].name
            );
        }
        assert!(n.lid().is_unicast(), "{} has no LID", f.topo.nodes[i].name);
    }
}

#[test]
fn small_trees_come_up_routed_and_active() {
    for spec in ["mport-ntree:4:2", "mport-ntree:4:3", "mport-ntree:8:2"] {
        let (f, sm) = bring_up(spec, SimConfig::default(), SmConfig::default());
        assert_eq!(
            sm.nodes().len(),
            f.topo.nodes.len(),
            "{spec}: every node discovered"
        );
        all_active(&f);
        verify(&f);
        // Every LID distinct.
        let mut lids: Vec<u16> = f.nodes.iter().map(|n| n.lid().0).collect();
        lids.sort();
        lids.dedup();
        assert_eq!(lids.len(), f.nodes.len());
    }
}

#[test]
fn smp_counts_follow_the_fabric() {
    // With one SMP outstanding, each cable is explored exactly once; with a
    // wider window both ends of a cable may be explored before either answer
    // is back.
    let (f, sm) = bring_up(
        "fat-tree-324",
        SimConfig::default(),
        SmConfig {
            window: 1,
            ..SmConfig::default()
        },
    );
    let st = sm.stats();
    let (switches, cas) = (f.topo.switches() as u64, f.topo.cas() as u64);
    let links = f.topo.links() as u64;
    // One NodeInfo for the SM's own node and one per cable explored from the side found first.
    assert_eq!(st.count(Method::Get, AttributeId::NodeInfo), links + 1);
    // One SwitchInfo per switch; PortInfo: every switch port (0..=36) and one per CA.
    assert_eq!(st.count(Method::Get, AttributeId::SwitchInfo), switches);
    assert_eq!(
        st.count(Method::Get, AttributeId::PortInfo),
        switches * 37 + cas
    );
    // LFT: switches × blocks in use (LIDs 1..=360 → 6 blocks).
    let blocks = u64::from(sm.max_lid()) / 64 + 1;
    assert_eq!(sm.max_lid() as u64, switches + cas);
    assert_eq!(
        st.count(Method::Set, AttributeId::LinearForwardingTable),
        switches * blocks
    );
    assert_eq!(st.retries, 0);
    verify(&f);
}

#[test]
fn a_window_of_one_gives_the_same_result() {
    let (f, sm) = bring_up(
        "mport-ntree:4:3",
        SimConfig::default(),
        SmConfig {
            window: 1,
            ..SmConfig::default()
        },
    );
    assert_eq!(sm.phase(), Phase::Done);
    verify(&f);
}

/// The window (OpenSM's `max_wire_smps`) bounds the SMPs in flight, at
/// bring-up and after it is changed on a running SM.
#[test]
fn the_window_bounds_the_smps_in_flight_and_can_be_changed() {
    let (mut f, mut sm) = bring_up(
        "mport-ntree:4:3",
        SimConfig::default(),
        SmConfig {
            window: 3,
            ..SmConfig::default()
        },
    );
    assert_eq!(sm.stats().peak_in_flight, 3, "bring-up fills a window of 3");
    sm.set_window(7);
    sm.request_heavy_sweep(f.now_ns() / 1_000_000);
    assert!(f.run(&mut sm));
    assert_eq!(
        sm.stats().peak_in_flight,
        7,
        "the heavy sweep fills the new window"
    );
    verify(&f);
    // Default (16): more than either.
    let (_, wide) = bring_up("mport-ntree:4:3", SimConfig::default(), SmConfig::default());
    assert_eq!(wide.stats().peak_in_flight, 16);
}

/// OpenSM's `max_wire_smps2` and `max_smps_timeout`: with answers slower
/// than the stuck time, a window of 2 grows one SMP at a time to 6, and
/// not past it; without `window2` it stays at 2.
#[test]
fn a_stuck_window_grows_to_window2_and_no_further() {
    let slow = SimConfig {
        hop_ns: 2_000_000,
        dr_hop_ns: 2_000_000,
        ..SimConfig::default()
    };
    let cfg = |window2| SmConfig {
        window: 2,
        window2,
        stuck_ms: 1,
        ..SmConfig::default()
    };
    let (f, sm) = bring_up("mport-ntree:4:3", slow.clone(), cfg(6));
    assert_eq!(sm.stats().peak_in_flight, 6);
    verify(&f);
    let (mut g, mut fixed) = bring_up("mport-ntree:4:3", slow, cfg(0));
    assert_eq!(fixed.stats().peak_in_flight, 2);
    assert_eq!(sm.stats().total(), fixed.stats().total(), "the same SMPs");
    assert!(f.now_ns() < g.now_ns(), "sooner");
    // Set on a running SM (a re-read configuration): the next heavy
    // sweep grows its window.
    fixed.set_window2(6, 1);
    fixed.request_heavy_sweep(g.now_ns() / 1_000_000);
    assert!(g.run(&mut fixed));
    assert!(fixed.stats().peak_in_flight > 2);
    assert!(fixed.stats().peak_in_flight <= 6);
}

#[test]
fn discovery_survives_two_percent_loss() {
    let cfg = SimConfig {
        loss: 0.02,
        seed: 7,
        ..SimConfig::default()
    };
    let (f, sm) = bring_up(
        "mport-ntree:8:2",
        cfg,
        SmConfig {
            retries: 8,
            ..SmConfig::default()
        },
    );
    assert!(sm.stats().retries > 0, "some SMPs were lost and sent again");
    assert_eq!(sm.stats().given_up, 0);
    all_active(&f);
    verify(&f);
}

#[test]
fn random_irregular_fabrics_come_up() {
    for seed in [1, 2, 3] {
        let (f, _) = bring_up(
            &format!("random:20:{seed}"),
            SimConfig::default(),
            SmConfig::default(),
        );
        all_active(&f);
        verify(&f);
    }
}

#[test]
fn a_wide_window_explores_a_few_cables_twice_at_most() {
    let (f, sm) = bring_up(
        "fat-tree-324",
        SimConfig::default(),
        SmConfig {
            window: 16,
            ..SmConfig::default()
        },
    );
    let links = f.topo.links() as u64;
    let ni = sm.stats().count(Method::Get, AttributeId::NodeInfo);
    assert!(
        ni > links && ni <= 2 * links + 1,
        "{ni} NodeInfo for {links} cables"
    );
    verify(&f);
}

#[test]
fn every_engine_routes_every_lid_and_updn_and_ftree_are_deadlock_free() {
    use smi::sm::Engine;
    for spec in [
        "mport-ntree:4:3",
        "fat-tree-324",
        "random:20:5",
        "random:30:9",
    ] {
        for engine in [Engine::MinHop, Engine::UpDown, Engine::FatTree] {
            let (f, sm) = bring_up(
                spec,
                SimConfig::default(),
                SmConfig {
                    routing: engine,
                    ..SmConfig::default()
                },
            );
            let v = f.verify();
            assert_eq!(
                (v.unreachable, v.loops, v.switch_unreachable),
                (0, 0, 0),
                "{spec} {engine:?}"
            );
            if engine != Engine::MinHop {
                assert!(
                    sm.deadlock_free(),
                    "{spec} {engine:?}: cyclic channel dependencies"
                );
            }
        }
    }
}

#[test]
fn min_hop_on_a_ring_of_five_switches_is_not_deadlock_free_but_updn_is() {
    // Five switches in a ring, a CA on each: every CA reaches the CA two
    // switches ahead by the unique shortest way round, so min-hop's channel
    // dependencies close a cycle all the way round the ring.
    let names = ["a", "b", "c", "d", "e"];
    let mut text = String::new();
    for (i, n) in names.iter().enumerate() {
        let next = names[(i + 1) % 5];
        let prev = names[(i + 4) % 5];
        text +=
            &format!("Switch 4 \"{n}\"\n[1] \"{next}\"[2]\n[2] \"{prev}\"[1]\n[3] \"h{n}\"[1]\n");
    }
    for n in names {
        text += &format!("Ca 1 \"h{n}\"\n[1] \"{n}\"[3]\n");
    }
    let dir = std::env::temp_dir().join(format!("ibkit-ring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ring.topo");
    std::fs::write(&path, text).unwrap();
    let spec = format!("file:{}", path.display());
    let (_, minhop) = bring_up(&spec, SimConfig::default(), SmConfig::default());
    let (f, updn) = bring_up(
        &spec,
        SimConfig::default(),
        SmConfig {
            routing: smi::sm::Engine::UpDown,
            ..SmConfig::default()
        },
    );
    assert!(
        !minhop.deadlock_free(),
        "the ring's min-hop routes should close a dependency cycle"
    );
    assert!(updn.deadlock_free());
    assert_eq!(f.verify().unreachable, 0);
}

/// A 4 × 4 mesh cabled by dimension (ports 1 and 2 to the switches
/// west and east, 3 and 4 south and north, 5 to the host): min-hop mixes
/// X-then-Y with Y-then-X turns and closes a channel dependency cycle;
/// dimension order (`--routing dor`, OpenSM's) goes X first at every
/// switch, then Y, every route still shortest, and has none. With each
/// switch's search order putting Y first, dor goes Y first: still none.
#[test]
fn on_a_mesh_dimension_order_is_deadlock_free_where_min_hop_is_not() {
    // tests/data/mesh-4x4.topo; OpenSM's dor routes it as ibkit's
    // (ibkit/tests/dumps_ibsim.rs).
    let spec = "file:tests/data/mesh-4x4.topo";
    let with = |routing, order: Vec<(u64, Vec<u8>)>| {
        let cfg = SmConfig {
            routing,
            port_selection: smi::sm::PortSelection {
                search_order: order,
                ..Default::default()
            },
            ..SmConfig::default()
        };
        let (f, sm) = bring_up(spec, SimConfig::default(), cfg);
        let v = f.verify();
        assert!(v.ok(), "{routing:?}: {v}");
        (f, sm)
    };
    let (_, minhop) = with(smi::sm::Engine::MinHop, Vec::new());
    let (f, dor) = with(smi::sm::Engine::Dor, Vec::new());
    assert!(
        !minhop.deadlock_free(),
        "the mesh's min-hop routes should close a dependency cycle"
    );
    assert!(dor.deadlock_free(), "dimension order, X first");
    // Every route as short as min-hop's: the same hops from every host
    // to every LID.
    let hops = |f: &Fabric| -> usize {
        (0..f.nodes.len())
            .filter(|&i| !matches!(f.nodes[i], SimNode::Switch(_)))
            .flat_map(|a| (0..f.nodes.len()).map(move |b| (a, b)))
            .map(|(a, b)| f.trace(a, f.nodes[b].lid()).0.len())
            .sum()
    };
    let (fm, _) = with(smi::sm::Engine::MinHop, Vec::new());
    assert_eq!(hops(&f), hops(&fm));
    let y_first: Vec<(u64, Vec<u8>)> = (dor.graph_switches().iter())
        .map(|&i| (dor.nodes()[i].info.node_guid.0, vec![3, 4, 1, 2]))
        .collect();
    let (fy, dor_y) = with(smi::sm::Engine::Dor, y_first);
    assert!(dor_y.deadlock_free(), "dimension order, Y first");
    assert_eq!(hops(&fy), hops(&fm));
    let moved = (dor.lfts().zip(dor_y.lfts()))
        .map(|((_, a), (_, b))| a.iter().zip(b).filter(|(p, q)| p != q).count())
        .sum::<usize>();
    assert!(moved > 0, "Y first routes otherwise");
}

#[test]
fn a_topology_files_system_guids_are_what_the_nodes_report() {
    // chassis.topo with a system named before one host, h11, which runs VFs
    // (a vSwitch hypervisor) here; the other hosts are their own systems.
    let text = std::fs::read_to_string("tests/data/chassis.topo").unwrap();
    let text = text.replacen("Ca 1 \"h11\"", "sysimgguid=0x77\nCa 1 \"h11\"", 1);
    let path = std::env::temp_dir().join(format!("ibkit-sys-{}.topo", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let spec = format!("file:{}", path.display());
    let sim = SimConfig {
        vfs: 2,
        ..SimConfig::default()
    };
    let (_, sm) = bring_up(&spec, sim, SmConfig::default());
    let _ = std::fs::remove_file(&path);
    let topo = Topology::from_spec("file:tests/data/chassis.topo").unwrap();
    let mut checked = 0;
    for n in sm.nodes() {
        let name = n
            .description
            .as_ref()
            .and_then(|d| d.node_string.as_str().ok())
            .unwrap_or("")
            .trim_end_matches('\0')
            .to_string();
        let Some(t) = topo.nodes.iter().find(|t| t.name == name) else {
            continue;
        };
        let want = if name == "h11" {
            0x77
        } else {
            t.system_image_guid()
        };
        assert_eq!(n.info.system_image_guid.0, want, "{name}");
        checked += 1;
    }
    assert_eq!(checked, topo.nodes.len(), "every node found by its name");
}

#[test]
fn dimension_order_frees_a_mesh_of_deadlock_and_not_a_torus() {
    // The generated 6 x 5 mesh, two hosts a switch: dor's routes close no
    // dependency cycle, min-hop's do. On the torus of that size the rings
    // close one under either engine: a torus needs virtual lanes (OpenSM's
    // torus-2QoS), which dimension order alone does not give.
    let up = |spec: &str, routing| {
        let cfg = SmConfig {
            routing,
            ..SmConfig::default()
        };
        let (f, sm) = bring_up(spec, SimConfig::default(), cfg);
        let v = f.verify();
        assert!(v.ok(), "{spec} {routing:?}: {v}");
        assert_eq!(v.lids as usize, 30 + 60, "{spec}: every LID walked to");
        sm.deadlock_free()
    };
    assert!(up("mesh:6:5:2", smi::sm::Engine::Dor));
    assert!(!up("mesh:6:5:2", smi::sm::Engine::MinHop));
    assert!(!up("torus:6:5:2", smi::sm::Engine::Dor));
    assert!(!up("torus:6:5:2", smi::sm::Engine::MinHop));
}

#[test]
fn the_capture_holds_every_smp_on_every_cable() {
    let t = Topology::from_spec("mport-ntree:4:2").unwrap();
    let mut f = Fabric::new(t, SimConfig::default()).unwrap();
    f.enable_capture();
    let mut sm = Sm::new(SmConfig::default());
    assert!(f.bring_up(&mut sm));
    let cap = f.capture_pcap().unwrap();
    let pkts = fabric::pcap::read(&cap).unwrap();
    assert_eq!(pkts.len() as u64, f.stats.hops);
    let mut directed = 0;
    for p in &pkts {
        let mad = p.as_ref().expect("every frame carries a MAD");
        let smp = mad_core::Smp::parse(mad).expect("every MAD is a valid SMP");
        directed += usize::from(smp.is_directed());
    }
    assert_eq!(directed, pkts.len(), "this SM sends directed route only");
}

#[test]
fn the_discovered_topology_is_the_cabled_one() {
    for spec in [
        "random:12:3",
        "fat-tree-324",
        "mixed-rates",
        "file:tests/data/chassis.topo",
    ] {
        let (f, sm) = bring_up(spec, SimConfig::default(), SmConfig::default());
        let found = Topology::from_discovered(&sm);
        // Every cable with its rate, read from the ports' PortInfo.
        let key = |t: &Topology| {
            let mut links = Vec::new();
            for (i, n) in t.nodes.iter().enumerate() {
                for p in 1..=n.ports {
                    if let Some((m, q)) = t.peer_of(i, p) {
                        links.push((n.guid, p, t.nodes[m].guid, q, t.rate_of(i, p).to_string()));
                    }
                }
            }
            links.sort();
            let mut nodes: Vec<(u64, u8, String, u64)> = t
                .nodes
                .iter()
                .map(|n| (n.guid, n.ports, n.name.clone(), n.system_image_guid()))
                .collect();
            nodes.sort();
            (nodes, links)
        };
        assert_eq!(key(&found), key(&f.topo), "{spec}");
        // And it survives the ibnetdiscover text: ibsim and our reader take it.
        let text = fabric::topology::to_ibnetdiscover(&found);
        let back = Topology::from_spec(&{
            let p = std::env::temp_dir().join(format!("ibkit-found-{}.net", std::process::id()));
            std::fs::write(&p, &text).unwrap();
            format!("file:{}", p.display())
        })
        .unwrap();
        assert_eq!(back.links(), f.topo.links());
        assert_eq!(key(&back), key(&f.topo), "{spec}: written and read back");
    }
}

#[test]
fn the_model_predicts_every_kind_of_a_controlled_bfs_bring_up() {
    use fabric::model::predict;
    use smi::sm::LidPolicy;
    let name = |m: u8, a: u16| {
        format!(
            "{}({})",
            Method::from(m).name().unwrap(),
            AttributeId::from(a).name().unwrap()
        )
    };
    for (spec, vfs, policy) in [
        ("fat-tree-324", 0, LidPolicy::Prepopulated),
        ("mport-ntree:8:3", 0, LidPolicy::Prepopulated),
        ("random:10:7", 0, LidPolicy::Prepopulated),
        ("mport-ntree:8:2", 4, LidPolicy::Prepopulated),
        ("mport-ntree:8:2", 4, LidPolicy::Dynamic),
        // Two-port hypervisors: a vSwitch on each cabled port.
        ("file:tests/data/multiport.topo", 2, LidPolicy::Prepopulated),
        ("file:tests/data/multiport.topo", 2, LidPolicy::Dynamic),
    ] {
        let t = Topology::from_spec(spec).unwrap();
        let want = predict(&t, vfs, policy);
        let (_, sm) = bring_up(
            spec,
            SimConfig {
                vfs,
                ..SimConfig::default()
            },
            SmConfig {
                window: 1,
                lid_policy: policy,
                ..SmConfig::default()
            },
        );
        let got: Vec<(String, u64)> = sm
            .stats()
            .sent()
            .iter()
            .map(|(&(m, a), &n)| (name(m, a), n))
            .collect();
        let tree = !spec.starts_with("random");
        for (kind, n) in &got {
            if kind == "Get(NodeInfo)" && !tree {
                // A cable closing a cycle may be explored from both ends
                // before either answer is back: the model is a lower bound.
                assert!(
                    want.count(kind) <= *n && *n <= 2 * want.count(kind),
                    "{spec}"
                );
                continue;
            }
            assert_eq!(want.count(kind), *n, "{spec} vfs {vfs} {policy:?}: {kind}");
        }
        if tree {
            assert_eq!(want.total(), sm.stats().total(), "{spec}");
        }
        assert_eq!(want.lids, u64::from(sm.max_lid()));
    }
}

/// The simulator's cost model: every cable crossing takes k (`hop_ns`), and
/// r (`dr_hop_ns`) more when the SMP is directed-route. A bring-up goes
/// all by directed route, so its simulated time is proportional to k + r:
/// with one SMP outstanding every crossing is on the critical path, and the
/// time is exactly (k + r) × crossings. A LID-routed SMP pays k alone.
#[test]
fn hop_delays_set_the_simulated_time() {
    let run = |window: usize, k: u64, r: u64, vfs: usize| {
        bring_up(
            "mport-ntree:4:2",
            SimConfig {
                hop_ns: k,
                dr_hop_ns: r,
                vfs,
                ..SimConfig::default()
            },
            SmConfig {
                window,
                ..SmConfig::default()
            },
        )
    };
    let time = |window: usize, k: u64, r: u64| run(window, k, r, 0).0.now_ns();
    for (k, r) in [(1_000, 2_000), (3_000, 2_000), (1_000, 5_000)] {
        let (f, _) = run(1, k, r, 0);
        assert!(f.stats.hops > 0);
        assert_eq!(f.stats.dr_hops, f.stats.hops, "bring-up is all directed");
        assert_eq!(f.now_ns(), (k + r) * f.stats.hops, "k {k} ns, r {r} ns");
    }

    // With a window the SMPs overlap, but every delay scales with k + r.
    let t = time(16, 1_000, 2_000);
    assert!(t > 0 && t < time(1, 1_000, 2_000));
    assert_eq!(time(16, 2_000, 4_000), 2 * t, "k and r doubled");
    assert!(time(16, 3_000, 2_000) > t, "larger k");
    assert!(time(16, 1_000, 5_000) > t, "larger r");
    assert_eq!(time(16, 2_000, 1_000), t, "the same k + r");

    // Once the subnet is up, starting a VM is one Set(VPortInfo),
    // LID-routed to its hypervisor and back: k per crossing, whatever r.
    for (k, r) in [(1_000, 2_000), (1_000, 50_000), (4_000, 2_000)] {
        let (mut f, mut sm) = run(16, k, r, 2);
        let (t0, hops0, dr0) = (f.now_ns(), f.stats.hops, f.stats.dr_hops);
        let h = sm.hypervisors()[0];
        sm.create_vm(h, 0xAB).unwrap();
        assert!(f.run(&mut sm));
        let hops = f.stats.hops - hops0;
        assert!(hops >= 2, "to the hypervisor and back");
        assert_eq!(f.stats.dr_hops, dr0, "LID-routed");
        assert_eq!(f.now_ns() - t0, k * hops, "k {k} ns, r {r} ns");
    }
}

/// At 20 % loss per cable crossing many requests are given up after their
/// retries. They are sent again, a round at a time, before the phase moves
/// on: the SM routes the whole fabric, never a part of it, and its routes
/// are deadlock-free. (It once called a partial fabric up, with cyclic
/// channel dependencies.)
#[test]
fn heavy_loss_is_outlasted_and_no_partial_fabric_is_routed() {
    let (f, sm) = bring_up(
        "fat-tree-324",
        SimConfig {
            loss: 0.2,
            seed: 3,
            ..SimConfig::default()
        },
        SmConfig {
            retries: 10,
            ..SmConfig::default()
        },
    );
    assert!(
        sm.stats().given_up > 0,
        "requests were given up and sent again"
    );
    assert_eq!(sm.nodes().len(), f.nodes.len(), "every node found");
    all_active(&f);
    verify(&f);
    let v = f.verify();
    assert!(v.ok(), "{v}: {:?}", v.failures);
    assert!(sm.deadlock_free());
}

/// At 60 % loss the fabric cannot be found whole: the SM stops, names what
/// went unanswered, and has neither routed nor activated anything.
#[test]
fn a_fabric_that_cannot_be_found_whole_is_not_called_up() {
    let (f, sm, up) = fabric::sim::bring_up(
        "fat-tree-324",
        SimConfig {
            loss: 0.6,
            seed: 5,
            ..SimConfig::default()
        },
        SmConfig {
            rounds: 2,
            ..SmConfig::default()
        },
    )
    .unwrap();
    assert!(!up);
    assert_eq!(sm.phase(), Phase::Failed);
    let Some(smi::sm::SmError::Unreachable {
        unreached,
        count,
        m_key_refused: 0,
    }) = sm.error()
    else {
        panic!("{:?}", sm.error())
    };
    assert!(*count >= unreached.len() && !unreached.is_empty());
    let text = sm.error().unwrap().to_string();
    assert!(
        text.contains("beyond port") || text.contains(" of port"),
        "{text}"
    );
    assert_eq!(
        sm.stats()
            .count(Method::Set, AttributeId::LinearForwardingTable),
        0,
        "nothing routed"
    );
    for n in &f.nodes {
        if let SimNode::Switch(s) = n {
            assert!(
                s.model
                    .ports
                    .iter()
                    .skip(1)
                    .all(|p| p.info.port_state != PortState::Active),
                "nothing activated"
            );
        }
    }
}

/// A site's roots (OpenSM's `root_guid_file`): up*/down* and fat-tree
/// routing start from the switches named, skipping a GUID no live switch
/// has, and stay deadlock-free and complete; the tables differ from those
/// of the roots the engine would pick itself. Naming none that exists
/// leaves the engine's own choice.
#[test]
fn updn_and_ftree_start_from_the_roots_a_site_names() {
    use smi::sm::{updn, Engine};
    let guids = |sm: &Sm, roots: &[usize]| -> Vec<u64> {
        let sw = sm.graph_switches();
        let mut g: Vec<u64> = (roots.iter())
            .map(|&k| sm.nodes()[sw[k]].info.node_guid.0)
            .collect();
        g.sort_unstable();
        g
    };
    for spec in ["mport-ntree:4:3", "fat-tree-324", "random:20:5"] {
        for engine in [Engine::UpDown, Engine::FatTree] {
            let cfg = |root_guids: Vec<u64>| SmConfig {
                routing: engine,
                root_guids,
                ..SmConfig::default()
            };
            let (_, own) = bring_up(spec, SimConfig::default(), cfg(Vec::new()));
            let picked = guids(&own, &updn::roots(own.routing_graph()));
            // The highest-GUID switch the engine did not pick, alone. (On
            // fat-tree-324 the lowest is the leaf on every spine's port 1:
            // rooted there, up*/down* allows the same paths as from the
            // spines, and the spine-to-spine routes min-hop completes
            // already go through it, so the tables would be the same.)
            let mut other: Vec<u64> = (own.graph_switches().iter())
                .map(|&i| own.nodes()[i].info.node_guid.0)
                .filter(|g| !picked.contains(g))
                .collect();
            other.sort_unstable();
            let named = vec![other[other.len() - 1]];
            let (f, sm) = bring_up(spec, SimConfig::default(), cfg(vec![0xdead_beef, named[0]]));
            let g = sm.routing_graph();
            assert_eq!(guids(&sm, &g.roots), named, "{spec} {engine:?}");
            assert_eq!(guids(&sm, &updn::roots(g)), named, "{spec} {engine:?}");
            let v = f.verify();
            assert_eq!(
                (v.unreachable, v.loops, v.switch_unreachable),
                (0, 0, 0),
                "{spec} {engine:?}"
            );
            assert!(sm.deadlock_free(), "{spec} {engine:?}");
            let tables = |sm: &Sm| -> Vec<Vec<u8>> { sm.lfts().map(|(_, t)| t.to_vec()).collect() };
            assert_ne!(
                tables(&sm),
                tables(&own),
                "{spec} {engine:?}: the same routes"
            );
            // Only unknown GUIDs: the engine's own roots.
            let (_, none) = bring_up(spec, SimConfig::default(), cfg(vec![0xdead_beef]));
            let g = none.routing_graph();
            assert!(g.roots.is_empty());
            assert_eq!(guids(&none, &updn::roots(g)), picked, "{spec} {engine:?}");
            println!("{spec} {engine:?}: roots {picked:x?} picked; {named:x?} named and used");
        }
    }
}

/// New roots on a running subnet ([`Sm::set_root_guids`], what SIGHUP
/// does with a changed `root_guid_file`): a sweep routes again from them,
/// sends only the LFT blocks that change, and leaves the same tables as a
/// bring-up with those roots from the start; the same roots again send
/// nothing.
#[test]
fn new_roots_on_a_running_subnet_reroute_as_a_start_with_them_would() {
    use mad_core::attr::AttributeId;
    use mad_core::Method;
    use smi::sm::{updn, Engine};
    let spec = "fat-tree-324";
    let cfg = |root_guids: Vec<u64>| SmConfig {
        routing: Engine::UpDown,
        root_guids,
        ..SmConfig::default()
    };
    let (mut f, mut sm) = bring_up(spec, SimConfig::default(), cfg(Vec::new()));
    let sw = sm.graph_switches().to_vec();
    let picked: Vec<u64> = (updn::roots(sm.routing_graph()).iter())
        .map(|&k| sm.nodes()[sw[k]].info.node_guid.0)
        .collect();
    // The highest-GUID switch not picked (see
    // `updn_and_ftree_start_from_the_roots_a_site_names` for why not the
    // lowest).
    let other = (sw.iter())
        .map(|&i| sm.nodes()[i].info.node_guid.0)
        .filter(|g| !picked.contains(g))
        .max()
        .unwrap();
    let tables = |sm: &Sm| -> Vec<Vec<u8>> { sm.lfts().map(|(_, t)| t.to_vec()).collect() };
    let lft_sets = |sm: &Sm| {
        sm.stats()
            .count(Method::Set, AttributeId::LinearForwardingTable)
    };
    let before = (tables(&sm), lft_sets(&sm));
    let now = f.now_ns() / 1_000_000;
    assert!(sm.set_root_guids(vec![other], now));
    assert!(f.run(&mut sm));
    let sent = lft_sets(&sm) - before.1;
    let (_, fresh) = bring_up(spec, SimConfig::default(), cfg(vec![other]));
    assert_ne!(tables(&sm), before.0, "routed again");
    assert_eq!(tables(&sm), tables(&fresh), "as a start with those roots");
    assert!(sm.deadlock_free());
    let v = f.verify();
    assert_eq!((v.unreachable, v.loops, v.switch_unreachable), (0, 0, 0));
    let all = before.1;
    assert!(sent > 0 && sent < all, "{sent} blocks of {all}");
    let now = f.now_ns() / 1_000_000;
    assert!(!sm.set_root_guids(vec![other], now), "the same roots");
    assert!(f.run(&mut sm));
    assert_eq!(lft_sets(&sm) - before.1, sent);
    println!("{spec} updn: new roots rerouted with {sent} Set(LFT), {all} at bring-up");
}

/// Up*/down* as OpenSM's, and where OpenSM's would turn: on random
/// fabrics rooted by the engine and at a named switch, either OpenSM's
/// hops hold no down-then-up turn and the SM's tables are exactly
/// [`updn::route_as_opensm`]'s, or they hold one and the SM routes by
/// legal trees instead, says so (`UpDownTurnAvoided`, naming the switch
/// and LID of a real turn in OpenSM's tables), and stays deadlock-free.
#[test]
fn updn_is_opensms_unless_opensms_would_turn_down_then_up() {
    use smi::sm::{updn, Engine, SmEvent};
    let (mut same, mut turned, mut cyclic) = (0, 0, 0);
    for spec in [
        "random:20:5",
        "random:24:7",
        "random:16:5",
        "random:30:1",
        "random:30:2",
        "random:12:3",
    ] {
        for named in [false, true] {
            let cfg = |root_guids: Vec<u64>| SmConfig {
                routing: Engine::UpDown,
                root_guids,
                ..SmConfig::default()
            };
            let (_, own) = bring_up(spec, SimConfig::default(), cfg(Vec::new()));
            let (_, mut sm) = if named {
                // The highest-GUID switch the engine did not pick.
                let g = own.routing_graph();
                let picked = updn::roots(g);
                let k = (0..g.ports.len())
                    .filter(|k| !picked.contains(k))
                    .max_by_key(|&k| g.guids[k])
                    .unwrap();
                bring_up(spec, SimConfig::default(), cfg(vec![g.guids[k]]))
            } else {
                bring_up(spec, SimConfig::default(), cfg(Vec::new()))
            };
            let g = sm.routing_graph().clone();
            let (theirs, turn) = updn::route_as_opensm(&g, sm.max_lid(), &updn::roots(&g));
            let tables: Vec<Vec<u8>> = sm.lfts().map(|(_, t)| t.to_vec()).collect();
            let told: Vec<(u64, u16)> = std::iter::from_fn(|| sm.poll_event())
                .filter_map(|e| match e {
                    SmEvent::UpDownTurnAvoided { guid, lid } => Some((guid.0, lid)),
                    _ => None,
                })
                .collect();
            assert!(sm.deadlock_free(), "{spec} named {named}");
            let opensm_free = updn::deadlock_free(&g, &theirs);
            match turn {
                None => {
                    same += 1;
                    assert!(told.is_empty(), "{spec}: {told:?}");
                    let mine: Vec<&[u8]> = tables
                        .iter()
                        .map(|t| &t[..theirs[0].len().min(t.len())])
                        .collect();
                    let want: Vec<&[u8]> = theirs
                        .iter()
                        .map(|t| &t[..t.len().min(tables[0].len())])
                        .collect();
                    assert_eq!(mine, want, "{spec} named {named}");
                }
                Some(t) => {
                    turned += 1;
                    if !opensm_free {
                        cyclic += 1;
                    }
                    assert_eq!(
                        told,
                        vec![(g.guids[t.switch], t.lid)],
                        "{spec} named {named}"
                    );
                    println!("{spec} named {named} roots {:x?}: turn at {:#x} for LID {}; OpenSM's tables deadlock-free: {opensm_free}", updn::roots(&g).iter().map(|&k| g.guids[k]).collect::<Vec<_>>(), g.guids[t.switch], t.lid);
                }
            }
        }
    }
    println!(
        "up*/down*: {same} as OpenSM's, {turned} with a turn ({cyclic} of them with a credit loop)"
    );
}
