use super::*;
use mad_core::attr::AttributeId;
use mad_core::{DrPath, MKey, Method};

struct N {
    switch: bool,
    ports: u8,
    down: u64,
}
impl Node for N {
    fn is_switch(&self) -> bool {
        self.switch
    }
    fn num_ports(&self) -> u8 {
        self.ports
    }
    fn port_up(&self, p: u8) -> bool {
        p == 0 || self.down & (1 << (p & 63)) == 0
    }
}
const SW: N = N {
    switch: true,
    ports: 8,
    down: 0,
};
const CA: N = N {
    switch: false,
    ports: 2,
    down: 0,
};

fn req(path: &[u8]) -> Smp {
    Smp::directed(
        &DrPath::from_ports(path).unwrap(),
        Method::Get,
        AttributeId::NodeInfo,
        0,
        1,
        MKey(0),
    )
}

#[test]
fn hop_count_above_63_is_discarded_on_both_sides() {
    let mut s = req(&[1]);
    s.set_hop_count(64);
    assert_eq!(receive(&mut s, &SW, 1), Err(Discard::HopCountTooLarge));
    assert_eq!(send(&mut s, &SW, 1), Err(Discard::HopCountTooLarge));
}

#[test]
fn lid_routed_smps_are_not_for_these_rules() {
    let mut s = Smp::lid_routed(Method::Get, AttributeId::NodeInfo, 0, 1, MKey(0));
    assert_eq!(
        on_arrival(&mut s, &SW, 1),
        Disposition::Discard(Discard::NotDirected)
    );
}

#[test]
fn c14_9_1_hop_pointer_zero_on_arrival() {
    let mut s = req(&[1, 2]);
    assert_eq!(receive(&mut s, &SW, 3), Err(Discard::HopPointerZero));
}

#[test]
fn c14_9_1_originator_must_leave_by_initial_path_1() {
    let mut s = req(&[1, 2]);
    assert_eq!(
        originate(&mut s, &CA, 2),
        Err(Discard::WrongPort { path: 1, actual: 2 })
    );
    let mut s = req(&[1, 2]);
    assert_eq!(originate(&mut s, &CA, 1), Ok(false));
    assert_eq!(s.hop_pointer(), 1);
}

#[test]
fn c14_9_2_intermediate_hop_records_arrival_and_forwards() {
    let mut s = req(&[1, 5, 7]);
    originate(&mut s, &CA, 1).unwrap();
    assert_eq!(on_arrival(&mut s, &SW, 3), Disposition::Forward(5));
    assert_eq!(s.return_path[1], 3);
    assert_eq!(s.hop_pointer(), 2);
}

#[test]
fn c14_9_2_a_channel_adapter_does_not_relay() {
    let mut s = req(&[1, 5, 7]);
    originate(&mut s, &CA, 1).unwrap();
    assert_eq!(
        on_arrival(&mut s, &CA, 1),
        Disposition::Discard(Discard::NotASwitch)
    );
}

#[test]
fn c14_9_2_next_hop_beyond_the_ports_port_0_or_down() {
    for (next, want) in [
        (9, Discard::NoSuchPort(9)),
        (0, Discard::NoSuchPort(0)),
        (4, Discard::PortDown(4)),
    ] {
        let mut s = req(&[1, next, 1]);
        originate(&mut s, &CA, 1).unwrap();
        let sw = N {
            switch: true,
            ports: 8,
            down: 1 << 4,
        };
        assert_eq!(
            on_arrival(&mut s, &sw, 2),
            Disposition::Discard(want),
            "next {next}"
        );
    }
}

#[test]
fn c14_9_3_end_of_path_at_a_switch_delivers() {
    let mut s = req(&[1, 5]);
    originate(&mut s, &CA, 1).unwrap();
    assert_eq!(on_arrival(&mut s, &SW, 3), Disposition::Forward(5));
    assert_eq!(on_arrival(&mut s, &SW, 6), Disposition::Deliver);
    assert_eq!(s.return_path[2], 6);
    assert_eq!(
        s.hop_pointer(),
        3,
        "hop pointer = hop count + 1 at the destination"
    );
}

#[test]
fn c14_9_3_end_of_path_at_a_ca_needs_a_permissive_dlid() {
    let mut s = req(&[1, 5]);
    s.set_dr_dlid(Lid(9));
    originate(&mut s, &CA, 1).unwrap();
    on_arrival(&mut s, &SW, 3);
    assert_eq!(
        on_arrival(&mut s, &CA, 1),
        Disposition::Discard(Discard::LidRoutedAfterCa)
    );
}

#[test]
fn c14_9_3_end_of_path_at_a_switch_with_a_dlid_continues_by_lid() {
    let mut s = req(&[1, 5]);
    s.set_dr_dlid(Lid(9));
    originate(&mut s, &CA, 1).unwrap();
    on_arrival(&mut s, &SW, 3);
    assert_eq!(
        on_arrival(&mut s, &SW, 2),
        Disposition::ForwardByLid(Lid(9))
    );
    assert_eq!(s.hop_pointer(), 3);
    // The LID-routed SMP reaches its target with hp = hc + 1: delivered (C14-9:4).
    assert_eq!(on_arrival(&mut s, &CA, 1), Disposition::Deliver);
}

#[test]
fn c14_9_5_hop_pointer_beyond_hop_count_plus_one() {
    let mut s = req(&[1, 5]);
    s.set_hop_pointer(4);
    assert_eq!(receive(&mut s, &SW, 1), Err(Discard::BadHopPointer));
    assert_eq!(send(&mut s, &SW, 1), Err(Discard::BadHopPointer));
}

#[test]
fn hop_count_zero_is_the_local_port() {
    let mut s = req(&[]);
    assert_eq!(originate(&mut s, &CA, 1), Ok(true), "consumed locally");
    assert_eq!(s.hop_pointer(), 1);
    make_response(&mut s);
    assert_eq!(
        originate(&mut s, &CA, 1),
        Ok(true),
        "the response loops back to the local SM"
    );
    assert_eq!(s.hop_pointer(), 0);
}

#[test]
fn hop_pointer_equal_hop_count_on_send_at_a_switch_steps_past() {
    let mut s = req(&[1, 2]);
    s.set_hop_pointer(2);
    assert_eq!(send(&mut s, &SW, 2), Ok(()));
    assert_eq!(s.hop_pointer(), 3);
}

fn respond(s: &mut Smp, node: &dyn Node, arrival: u8) -> Disposition {
    make_response(s);
    match originate(s, node, arrival) {
        Ok(true) => Disposition::Deliver,
        Ok(false) => Disposition::Forward(arrival),
        Err(d) => Disposition::Discard(d),
    }
}

#[test]
fn c14_13_response_walks_back_and_is_delivered_at_hop_pointer_0() {
    let mut s = req(&[1, 5, 7]);
    originate(&mut s, &CA, 1).unwrap();
    assert_eq!(on_arrival(&mut s, &SW, 3), Disposition::Forward(5));
    assert_eq!(on_arrival(&mut s, &SW, 4), Disposition::Forward(7));
    assert_eq!(on_arrival(&mut s, &SW, 8), Disposition::Deliver);
    assert_eq!(respond(&mut s, &SW, 8), Disposition::Forward(8));
    assert!(s.direction());
    assert_eq!(s.hop_pointer(), 3);
    assert_eq!(on_arrival(&mut s, &SW, 7), Disposition::Forward(4));
    assert_eq!(on_arrival(&mut s, &SW, 5), Disposition::Forward(3));
    assert_eq!(on_arrival(&mut s, &CA, 1), Disposition::Deliver);
    assert_eq!(s.hop_pointer(), 0);
}

#[test]
fn c14_13_responder_must_answer_by_the_arrival_port() {
    let mut s = req(&[1, 5]);
    originate(&mut s, &CA, 1).unwrap();
    on_arrival(&mut s, &SW, 3);
    on_arrival(&mut s, &SW, 6);
    make_response(&mut s);
    assert_eq!(
        originate(&mut s, &SW, 2),
        Err(Discard::WrongPort { path: 6, actual: 2 })
    );
}

#[test]
fn c14_13_2_a_ca_does_not_relay_responses() {
    let mut s = req(&[1, 5, 7]);
    s.set_direction(true);
    s.set_hop_pointer(2);
    assert_eq!(
        on_arrival(&mut s, &CA, 1),
        Disposition::Discard(Discard::NotASwitch)
    );
}

#[test]
fn c14_13_3_response_with_a_slid_continues_by_lid() {
    let mut s = req(&[1, 5]);
    s.set_dr_slid(Lid(4));
    s.set_direction(true);
    s.set_hop_pointer(1);
    assert_eq!(
        on_arrival(&mut s, &SW, 5),
        Disposition::ForwardByLid(Lid(4))
    );
    let mut s = req(&[1, 5]);
    s.set_dr_slid(Lid(4));
    s.set_direction(true);
    s.set_hop_pointer(1);
    assert_eq!(
        on_arrival(&mut s, &CA, 1),
        Disposition::Discard(Discard::LidRoutedBeforeCa)
    );
}

#[test]
fn sixty_three_hops_through_a_chain() {
    let path: Vec<u8> = core::iter::once(1)
        .chain(core::iter::repeat_n(2, 62))
        .collect();
    let mut s = req(&path);
    assert_eq!(s.hop_count(), 63);
    originate(&mut s, &CA, 1).unwrap();
    for hop in 1..63 {
        assert_eq!(
            on_arrival(&mut s, &SW, 1),
            Disposition::Forward(2),
            "hop {hop}"
        );
    }
    assert_eq!(on_arrival(&mut s, &SW, 1), Disposition::Deliver);
    assert_eq!(s.hop_pointer(), 64);
    assert_eq!(respond(&mut s, &SW, 1), Disposition::Forward(1));
    for _ in 1..63 {
        assert_eq!(on_arrival(&mut s, &SW, 2), Disposition::Forward(1));
    }
    assert_eq!(on_arrival(&mut s, &CA, 1), Disposition::Deliver);
}

mod walk {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A random fabric: node 0 is the SM's CA (port 1 to switch 1 port 1),
    /// nodes 1..=n switches of 8 ports with random links between them.
    struct Fabric {
        nodes: Vec<N>,
        links: HashMap<(usize, u8), (usize, u8)>,
    }

    fn fabric(n: usize, extra: &[(usize, usize)]) -> Fabric {
        let mut nodes = vec![N {
            switch: false,
            ports: 1,
            down: 0,
        }];
        nodes.extend((0..n).map(|_| N {
            switch: true,
            ports: 8,
            down: 0,
        }));
        let mut links = HashMap::new();
        let mut free: Vec<Vec<u8>> = (0..=n)
            .map(|i| {
                if i == 0 {
                    vec![]
                } else {
                    (2..=8).rev().collect()
                }
            })
            .collect();
        let mut connect = |a: usize, b: usize, links: &mut HashMap<_, _>| {
            if a == b {
                return;
            }
            if let (Some(pa), Some(pb)) = (free[a].pop(), free[b].pop()) {
                links.insert((a, pa), (b, pb));
                links.insert((b, pb), (a, pa));
            }
        };
        links.insert((0, 1), (1, 1));
        links.insert((1, 1), (0, 1));
        for i in 2..=n {
            connect(i - 1, i, &mut links); // a spanning chain
        }
        for &(a, b) in extra {
            connect(1 + a % n, 1 + b % n, &mut links);
        }
        Fabric { nodes, links }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn request_out_and_response_back_along_any_path(
            n in 1usize..20,
            extra in proptest::collection::vec((0usize..20, 0usize..20), 0..30),
            choices in proptest::collection::vec(any::<u8>(), 0..63),
        ) {
            let f = fabric(n, &extra);
            // Build a valid path by walking random links.
            let mut path = vec![1u8];
            let mut at = 1usize;
            let mut visited = vec![0usize, 1];
            let mut arrivals = vec![1u8];
            for c in &choices {
                // Only switches relay: never pass through the SM's CA.
                let ports: Vec<u8> = (1..=8).filter(|p| f.links.get(&(at, *p)).is_some_and(|(to, _)| *to != 0)).collect();
                if ports.is_empty() {
                    break;
                }
                let p = ports[usize::from(*c) % ports.len()];
                let (next, arr) = f.links[&(at, p)];
                path.push(p);
                at = next;
                visited.push(next);
                arrivals.push(arr);
            }
            let mut s = req(&path);
            prop_assert_eq!(originate(&mut s, &f.nodes[0], 1), Ok(path.is_empty()));
            // Outbound.
            let (mut node, mut port) = f.links[&(0, 1)];
            let mut seen = vec![0usize];
            loop {
                seen.push(node);
                match on_arrival(&mut s, &f.nodes[node], port) {
                    Disposition::Forward(out) => {
                        let (nn, np) = f.links[&(node, out)];
                        node = nn;
                        port = np;
                    }
                    Disposition::Deliver => break,
                    other => prop_assert!(false, "outbound: {:?}", other),
                }
            }
            prop_assert_eq!(&seen, &visited);
            prop_assert_eq!(&s.return_path[1..=path.len()], &arrivals[..]);
            // Back.
            match respond(&mut s, &f.nodes[node], port) {
                Disposition::Forward(out) => {
                    prop_assert_eq!(out, port);
                    let (nn, np) = f.links[&(node, out)];
                    node = nn;
                    port = np;
                }
                other => prop_assert!(false, "turnaround: {:?}", other),
            }
            let mut back = vec![*visited.last().unwrap()];
            loop {
                back.push(node);
                match on_arrival(&mut s, &f.nodes[node], port) {
                    Disposition::Forward(out) => {
                        let (nn, np) = f.links[&(node, out)];
                        node = nn;
                        port = np;
                    }
                    Disposition::Deliver => break,
                    other => prop_assert!(false, "return: {:?}", other),
                }
            }
            prop_assert_eq!(node, 0, "the response reaches the SM");
            prop_assert_eq!(s.hop_pointer(), 0);
            let mut rev = visited.clone();
            rev.reverse();
            prop_assert_eq!(back, rev, "the response retraces the path");
        }
    }
}
