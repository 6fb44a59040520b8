use super::*;

fn check_symmetric(t: &Topology) {
    for (n, ports) in t.peer.iter().enumerate() {
        assert_eq!(ports.len(), usize::from(t.nodes[n].ports) + 1);
        for (p, peer) in ports.iter().enumerate() {
            if let Some((m, q)) = *peer {
                assert_eq!(
                    t.peer_of(m, q),
                    Some((n, p as u8)),
                    "{} port {p}",
                    t.nodes[n].name
                );
            }
        }
    }
}

#[test]
fn the_fat_trees_of_the_vswitch_papers_table_1() {
    // (spec, switches, CAs) from Tasoulas et al., Table I.
    for (spec, sw, cas) in [
        ("fat-tree-324", 36, 324),
        ("fat-tree-648", 54, 648),
        ("fat-tree-5832", 972, 5832),
    ] {
        let t = Topology::from_spec(spec).unwrap();
        assert_eq!((t.switches(), t.cas()), (sw, cas), "{spec}");
        assert!(t.is_connected(), "{spec}");
        check_symmetric(&t);
    }
}

#[test]
fn fat_tree_11664() {
    let t = Topology::from_spec("fat-tree-11664").unwrap();
    assert_eq!((t.switches(), t.cas()), (1620, 11664));
    // Every switch of a 36-port 3-tree uses all 36 ports.
    for (n, node) in t
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.kind == NodeType::Switch)
    {
        assert!((1..=36).all(|p| t.peer_of(n, p).is_some()), "{}", node.name);
    }
    assert_eq!(t.links(), 1620 * 36 / 2 + 11664 / 2);
}

#[test]
fn mport_ntree_counts_follow_the_formulas() {
    for (m, n) in [(4usize, 1usize), (4, 2), (4, 3), (8, 2), (8, 3), (6, 4)] {
        let t = Topology::from_spec(&format!("mport-ntree:{m}:{n}")).unwrap();
        let k = m / 2;
        assert_eq!(t.cas(), 2 * k.pow(n as u32), "m {m} n {n}");
        assert_eq!(
            t.switches(),
            (2 * n - 1) * k.pow(n as u32 - 1),
            "m {m} n {n}"
        );
        assert!(t.is_connected());
        check_symmetric(&t);
        // A leaf switch's up ports lead one level up.
        for (i, node) in t
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, x)| x.level == Some(0) && n > 1)
        {
            for p in (k + 1)..=(2 * k) {
                let (up, _) = t.peer_of(i, p as u8).unwrap();
                assert_eq!(t.nodes[up].level, Some(1), "{}", node.name);
            }
        }
    }
}

#[test]
fn bad_specs_are_refused_with_a_reason() {
    assert!(matches!(
        Topology::from_spec("torus:3"),
        Err(TopologyError::UnknownSpec(_))
    ));
    assert!(matches!(
        Topology::from_spec("mport-ntree:5:2"),
        Err(TopologyError::BadParameter(_))
    ));
    assert!(matches!(
        Topology::from_spec("mport-ntree:x:2"),
        Err(TopologyError::BadParameter(_))
    ));
    assert!(matches!(
        Topology::from_spec("random:0:1"),
        Err(TopologyError::BadParameter(_))
    ));
    assert!(matches!(
        Topology::from_spec("file:/nonexistent"),
        Err(TopologyError::Io(_))
    ));
}

#[test]
fn random_fabrics_are_connected_reproducible_and_irregular() {
    for seed in 0..20 {
        let a = Topology::from_spec(&format!("random:40:{seed}")).unwrap();
        let b = Topology::from_spec(&format!("random:40:{seed}")).unwrap();
        assert!(a == b, "same seed, same fabric");
        assert!(a.is_connected());
        check_symmetric(&a);
        assert_eq!(a.switches(), 40);
        // Every port of every switch is used: by a switch or a CA.
        for s in 0..40 {
            assert!((1..=8).all(|p| a.peer_of(s, p).is_some()));
        }
    }
    assert!(
        Topology::from_spec("random:40:1").unwrap() != Topology::from_spec("random:40:2").unwrap()
    );
}

#[test]
fn ibnetdiscover_export_reads_back_identically() {
    for spec in ["fat-tree-324", "random:30:7", "mport-ntree:4:3"] {
        let mut t = Topology::from_spec(spec).unwrap();
        let text = to_ibnetdiscover(&t);
        let back = netfile::parse(&text).unwrap();
        // The file format has no tree levels.
        for n in &mut t.nodes {
            n.level = None;
        }
        assert!(back == t, "{spec}: the read-back topology differs");
    }
}

#[test]
fn reads_what_ibnetdiscover_writes() {
    let text = r#"
#
# Topology file: generated on Sun Nov 22
#
vendid=0x2c9
devid=0xc738
sysimgguid=0x2c903007b1234
switchguid=0x2c903007b1234(2c903007b1234)
Switch	36 "S-0002c903007b1234"		# "SwitchX -  Mellanox Technologies" base port 0 lid 3 lmc 0
[1]	"H-0002c9030001e8a0"[1](2c9030001e8a1) 		# "node01 HCA-1" lid 4 4xQDR
[2]	"H-0002c9030001e8b0"[1](2c9030001e8b1) 		# "node02 HCA-1" lid 5 4xQDR

vendid=0x2c9
devid=0x1003
sysimgguid=0x2c9030001e8a3
caguid=0x2c9030001e8a0
Ca	2 "H-0002c9030001e8a0"		# "node01 HCA-1"
[1](2c9030001e8a1) 	"S-0002c903007b1234"[1]		# lid 4 lmc 0 "SwitchX -  Mellanox Technologies" lid 3 4xQDR

vendid=0x2c9
devid=0x1003
caguid=0x2c9030001e8b0
Ca	2 "H-0002c9030001e8b0"		# "node02 HCA-1"
[1](2c9030001e8b1) 	"S-0002c903007b1234"[2]		# lid 5 lmc 0 "SwitchX -  Mellanox Technologies" lid 3 4xQDR
"#;
    let t = netfile::parse(text).unwrap();
    assert_eq!((t.switches(), t.cas(), t.links()), (1, 2, 2));
    assert_eq!(t.nodes[0].guid, 0x2c903007b1234);
    assert_eq!(t.nodes[1].guid, 0x2c9030001e8a0);
    assert_eq!(t.peer_of(0, 2), Some((2, 1)));
    assert!(!t.nodes[0].enhanced_port0);
    // A sysimgguid line names the next node's system: the switch's is its
    // own GUID, node01's HCA is in system ...e8a3, node02's names none.
    assert_eq!(t.nodes[0].sys_guid, None);
    assert_eq!(t.nodes[1].sys_guid, Some(0x2c9030001e8a3));
    assert_eq!(t.nodes[1].system_image_guid(), 0x2c9030001e8a3);
    assert_eq!(t.nodes[2].system_image_guid(), t.nodes[2].guid);
    assert_eq!(netfile::parse(&to_ibnetdiscover(&t)).unwrap(), t);
    let zero = text.replace("sysimgguid=0x2c9030001e8a3", "sysimgguid=0x0");
    assert!(netfile::parse(&zero).is_err());
    // ibsim's and ibnetdiscover's "enhanced port 0" after the quoted
    // description, not inside it; written back as read.
    let esp0 = text.replace("base port 0 lid 3", "enhanced port 0 lid 3");
    let t = netfile::parse(&esp0).unwrap();
    assert!(t.nodes[0].enhanced_port0);
    assert!(!t.nodes[1].enhanced_port0);
    assert_eq!(netfile::parse(&to_ibnetdiscover(&t)).unwrap(), t);
    let named = text.replace(
        "\"SwitchX -  Mellanox",
        "\"enhanced port 0 SwitchX -  Mellanox",
    );
    assert!(!netfile::parse(&named).unwrap().nodes[0].enhanced_port0);
}

#[test]
fn broken_topology_files_name_the_line() {
    let cases = [
        ("[1] \"x\"[1]\n", 1, "before any node"),
        ("Switch 8 \"a\"\n[9] \"b\"[1]\nCa 1 \"b\"\n", 2, "no port 9"),
        ("Switch 8 \"a\"\n[1] \"ghost\"[1]\n", 2, "unknown node"),
        ("Switch 300 \"a\"\n", 1, "port count"),
        ("Switch 8 \"a\"\nSwitch 8 \"a\"\n", 2, "defined twice"),
        ("Switch 8 \"a\n", 1, "unterminated"),
        ("Rt 2 \"r\"\n", 1, "routers"),
        (
            "Switch 8 \"a\"\n[1] \"b\"[1]\n[1] \"c\"[1]\nCa 1 \"b\"\nCa 1 \"c\"\n",
            3,
            "cabled twice",
        ),
    ];
    for (text, want_line, want) in cases {
        match netfile::parse(text) {
            Err(TopologyError::Parse { line, what }) => {
                assert_eq!(line, want_line, "{text:?}: {what}");
                assert!(what.contains(want), "{text:?}: {what}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

/// Names with `=` or `#` inside their quotes are names, not GUID lines or
/// comments; a comment after them is still one.
#[test]
fn names_may_hold_equals_and_hash_signs() {
    let t = netfile::parse(
        "Switch 4 \"S=2\"  # a comment\n[1] \"H#0\"[1] # \"x\"\nCa 1 \"H#0\"\n[1] \"S=2\"[1]\n",
    )
    .unwrap();
    assert_eq!((t.switches(), t.cas(), t.links()), (1, 1, 1));
    assert_eq!(t.nodes[0].name, "S=2");
    assert_eq!(t.nodes[1].name, "H#0");
    // The cable is the named switch's, not a previous node's.
    assert_eq!(t.peer_of(0, 1), Some((1, 1)));
}

/// GUIDs 0 and all ones, and a GUID held twice, are refused with the line.
#[test]
fn reserved_and_repeated_guids_are_refused_with_the_line() {
    let e = netfile::parse("caguid=0x0\nCa 1 \"H-0\"\n").unwrap_err();
    assert!(matches!(e, TopologyError::Parse { line: 1, .. }), "{e}");
    let e = netfile::parse("switchguid=0xffffffffffffffff\nSwitch 4 \"S\"\n").unwrap_err();
    assert!(e.to_string().contains("reserved"), "{e}");
    let e = netfile::parse("caguid=0x10\nCa 1 \"A\"\n\ncaguid=0x10\nCa 1 \"B\"\n").unwrap_err();
    assert!(matches!(e, TopologyError::Parse { line: 5, .. }), "{e}");
    assert!(e.to_string().contains("\"A\""), "{e}");
    // A line of another shape is refused, with control bytes escaped.
    let e = netfile::parse("Ca 1 \"A\"\n[x=\u{1b}]\n").unwrap_err();
    assert!(matches!(e, TopologyError::Parse { line: 2, .. }), "{e}");
    let e = netfile::parse("a b=c\n").unwrap_err();
    assert!(e.to_string().contains("cannot understand"), "{e}");
    let e = netfile::parse("x\u{1b}y=1\n").unwrap_err();
    assert!(!e.to_string().contains('\u{1b}'), "{e}");
}

/// A line longer than any real one is refused before it is looked at, and
/// what an error echoes of a line is escaped and cut short.
#[test]
fn long_names_are_refused_so_that_what_is_written_reads_back() {
    let name = "n".repeat(netfile::MAX_NAME + 1);
    let e = netfile::parse(&format!("Switch 2 \"{name}\"\n")).unwrap_err();
    assert!(e.to_string().contains("node name longer than 1024"), "{e}");
    // The longest name read is written on lines that read back.
    let name = "n".repeat(netfile::MAX_NAME);
    let text = format!("Switch 2 \"{name}\"\n[1] \"h\"[1]\nCa 1 \"h\"\n");
    let t = netfile::parse(&text).unwrap();
    assert_eq!(netfile::parse(&to_ibnetdiscover(&t)).unwrap(), t);
}

#[test]
fn long_lines_are_refused_and_echoes_are_short() {
    let e = netfile::parse(&format!(
        "Ca 1 \"A\"\n{}\n",
        "z".repeat(netfile::MAX_LINE + 1)
    ))
    .unwrap_err();
    assert!(matches!(e, TopologyError::Parse { line: 2, .. }), "{e}");
    assert!(e.to_string().contains("longer than 4096"), "{e}");
    let e = netfile::parse(&format!("\u{7}{}\n", "y".repeat(500))).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("\\u{7}") && m.ends_with("…\"") && m.len() < 160,
        "{m}"
    );
}

#[test]
fn cable_rates_are_written_and_read_back() {
    let t = Topology::from_spec("mixed-rates").unwrap();
    assert_eq!((t.switches(), t.cas()), (2, 12));
    check_symmetric(&t);
    // Every host's cable at the rate its name says, at both ends.
    for (n, node) in t.nodes.iter().enumerate().skip(2) {
        let said = LinkRate::parse(node.name.rsplit(' ').next().unwrap()).unwrap();
        let (s, p) = t.peer_of(n, 1).unwrap();
        assert_eq!(
            (t.rate_of(n, 1), t.rate_of(s, p)),
            (said, said),
            "{}",
            node.name
        );
    }
    assert_eq!(t.rate_of(0, 12).to_string(), "4xEDR");
    let text = to_ibnetdiscover(&t);
    assert!(
        text.contains("lid 0 12xHDR") && text.contains("lid 0 1xSDR"),
        "{text}"
    );
    assert_eq!(parse_ibnetdiscover(&text).unwrap(), t);
    // A fabric nothing is said of runs at 4x QDR and keeps no rate.
    let plain = Topology::from_spec("mport-ntree:4:2").unwrap();
    assert!(plain.rates.is_empty());
    assert_eq!(plain.rate_of(0, 1), LinkRate::DEFAULT);
}

#[test]
fn a_cables_rate_is_what_its_two_ends_train_to() {
    let file = |a: &str, b: &str| {
        format!(
            "Switch 4 \"S\"\n[1] \"H\"[1] # \"H\" lid 2 {a}\nCa 1 \"H\"\n[1](11) \"S\"[1] # lid 2 lmc 0 \"S\" lid 1 {b}\n"
        )
    };
    let rate = |a: &str, b: &str| parse_ibnetdiscover(&file(a, b)).map(|t| t.rate_of(1, 1));
    let r = |s: &str| LinkRate::parse(s).unwrap();
    assert_eq!(rate("4xEDR", "4xEDR"), Ok(r("4xEDR")));
    // The lesser lanes and the lesser speed of the two.
    assert_eq!(rate("12xHDR", "4xEDR"), Ok(r("4xEDR")));
    assert_eq!(rate("1xHDR", "4xFDR"), Ok(r("1xFDR")));
    // Said at one end only: that end's; FDR10 is QDR-signalled.
    let one = "Switch 4 \"S\"\n[1] \"H\"[1] # \"H\" lid 2 2xEDR\nCa 1 \"H\"\n[1] \"S\"[1]\n";
    assert_eq!(parse_ibnetdiscover(one).unwrap().rate_of(0, 1), r("2xEDR"));
    assert_eq!(rate("4xFDR10", "4xFDR10"), Ok(r("4xQDR")));
    // A rate nobody could train to is refused with its line.
    for (bad, why) in [
        ("3xEDR", "lanes"),
        ("4xXDR", "link speed"),
        ("EDR", "lanes x speed"),
    ] {
        match rate("4xEDR", bad) {
            Err(TopologyError::Parse { line: 4, what }) => assert!(what.contains(why), "{what}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn meshes_and_tori_are_cabled_by_dimension() {
    let m = Topology::from_spec("mesh:4:3:2").unwrap();
    assert_eq!(
        (m.switches(), m.cas(), m.links()),
        (12, 24, 3 * 3 + 4 * 2 + 24)
    );
    let t = Topology::from_spec("torus:4:3").unwrap();
    assert_eq!((t.switches(), t.cas(), t.links()), (12, 12, 12 * 2 + 12));
    assert!(m.is_connected() && t.is_connected());
    // Switch (i, j) is node j * X + i; east (2) meets the west (1) of the
    // next in its row, north (4) the south (3) of the next in its column.
    let at = |i: usize, j: usize| j * 4 + i;
    assert_eq!(m.peer_of(at(1, 1), 2), Some((at(2, 1), 1)));
    assert_eq!(m.peer_of(at(1, 1), 4), Some((at(1, 2), 3)));
    assert_eq!(m.peer_of(at(3, 0), 2), None, "a mesh's edge is free");
    assert_eq!(m.peer_of(at(0, 2), 4), None);
    assert_eq!(t.peer_of(at(3, 0), 2), Some((at(0, 0), 1)), "a torus wraps");
    assert_eq!(t.peer_of(at(0, 2), 4), Some((at(0, 0), 3)));
    // Hosts on ports 5 and up.
    assert!(m.peer_of(at(2, 2), 6).is_some_and(|(c, _)| c >= 12));
    assert_eq!(Topology::from_spec("mesh:2:2:0").unwrap().cas(), 0);
    for bad in [
        "mesh:0:3",
        "mesh:65:2",
        "torus:1:4",
        "mesh:2:2:33",
        "mesh:2",
        "mesh:2:2:1:1",
        "torus:x:2",
        "mesh:99999999999999999999:2",
        // A file with no path (this once cut the spec short and panicked).
        "file",
        "file:",
    ] {
        assert!(Topology::from_spec(bad).is_err(), "{bad}");
    }
}
