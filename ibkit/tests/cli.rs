//! `ibkit` as a user runs it: the default job, `sample`, and `decode` of
//! hex text and pcap, in text and JSON.

use std::io::Write;
use std::process::{Command, Stdio};

fn ibkit(args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ibkit"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(s) = stdin {
        c.stdin.take().unwrap().write_all(s).unwrap();
    } else {
        drop(c.stdin.take());
    }
    let o = c.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

#[test]
fn default_job_migrates_vms_on_a_648_node_fat_tree() {
    let (code, out, err) = ibkit(&[], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fat-tree-648 — 54 switches, 647 hypervisors × 16 VFs, 11054 LIDs"));
    assert!(err.contains("routes checked, all pairs"), "{err}");
    assert!(!err.contains(": NO"), "{err}");
    assert!(err.contains("other LIDs untouched: yes"), "{err}");
    // The near migration touches one switch with one block.
    let near = out.lines().find(|l| l.contains(" near ")).unwrap();
    let cols: Vec<&str> = near.split_whitespace().collect();
    assert_eq!((cols[7], cols[8]), ("1", "1"), "{near}");
    assert!(out.contains("9342 SMPs (every block of 173 on 54 switches)"));
}

#[test]
fn decode_of_the_samples() {
    let (_, hex, _) = ibkit(&["sample"], None);
    let (code, out, _) = ibkit(&["decode", "-"], Some(hex.as_bytes()));
    assert_eq!(code, 0);
    assert!(out.contains("GetResp"));
    assert!(out.contains("num_ports ...") && out.contains(" 36\n"));
    assert!(out.contains("Trap 128 details"));
    assert!(out.contains("SA header:") && out.contains("PathRecord 1:"));
}

#[test]
fn json_has_the_documented_keys_and_types() {
    let (_, hex, _) = ibkit(&["sample"], None);
    let (code, out, err) = ibkit(&["decode", "--json", "-"], Some(hex.as_bytes()));
    assert_eq!(code, 0, "{err}");
    let objs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objs.len(), 7);
    for o in &objs[..5] {
        assert!(o["mad"]["attribute_id"].is_u64());
        assert!(o["smp"]["m_key"].as_str().unwrap().starts_with("0x"));
        assert!(o["attribute"]["name"].is_string());
    }
    let resp = &objs[1];
    assert_eq!(resp["attribute"]["name"], "NodeInfo");
    assert_eq!(resp["attribute"]["node_guid"], "0x0002c90300a1b200");
    assert_eq!(resp["attribute"]["num_ports"], 36);
    assert_eq!(resp["smp"]["return_path"], serde_json::json!([17, 5]));
    assert_eq!(resp["smp"]["initial_path"], serde_json::json!([1, 3]));
    assert_eq!(resp["smp"]["d"], true);
    let pi = &objs[2]["attribute"];
    assert_eq!(pi["name"], "PortInfo");
    assert_eq!(pi["m_key_protect_bits"], 1);
    assert_eq!(pi["lid"], 18);
    assert_eq!(pi["modifier"]["port"], 1);
    assert!(pi.get("local_port_num").is_some());
    assert_eq!(objs[3]["attribute"]["port"].as_array().unwrap().len(), 64);
    assert_eq!(objs[4]["attribute"]["trap_details"]["lid"], 7);
    // Subnet administration: a PathRecord query and its answer.
    let (q, a) = (&objs[5], &objs[6]);
    assert_eq!(q["mad"]["mgmt_class"], 3);
    assert!(q.get("smp").is_none());
    assert_eq!(q["sa"]["component_mask"], (1 << 3) | (1 << 4) | (1 << 12));
    assert_eq!(q["records"][0]["name"], "PathRecord");
    assert_eq!(q["records"][0]["dlid"], 7);
    assert_eq!(a["records"][0]["slid"], 1);
    assert_eq!(a["records"][0]["mtu"], 4);
    assert_eq!(a["records"][0]["reversible"], true);
}

#[test]
fn pcap_and_hex_decode_the_same() {
    let dir = std::env::temp_dir().join(format!("ibkit-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("s.pcap");
    let (code, _, _) = ibkit(&["sample", "--pcap", p.to_str().unwrap()], None);
    assert_eq!(code, 0);
    let (_, hex, _) = ibkit(&["sample"], None);
    let (_, from_hex, _) = ibkit(&["decode", "--json"], Some(hex.as_bytes()));
    let (code, from_pcap, err) = ibkit(&["decode", "--json", p.to_str().unwrap()], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(from_hex, from_pcap);
}

#[test]
fn a_bad_line_is_reported_and_the_rest_decoded() {
    let (_, hex, _) = ibkit(&["sample"], None);
    let mut lines: Vec<&str> = hex.lines().collect();
    lines.insert(2, "01 81 xx");
    let input = lines.join("\n");
    let (code, out, err) = ibkit(&["decode", "--json"], Some(input.as_bytes()));
    assert_eq!(code, 1, "a bad line makes the run fail");
    assert!(err.contains("line 3: 'x' is not a hex digit"), "{err}");
    assert_eq!(
        err.lines().last(),
        Some("ibkit: 1 of 8 MADs could not be decoded (each is named above)"),
        "{err}"
    );
    assert_eq!(out.lines().count(), 7);
}

/// `ibkit sm` that cannot start says why in one line and exits 2 (an
/// error, not a failed check): a capture it cannot write, a simulator
/// that is not there, a transport it does not know.
#[test]
fn an_sm_that_cannot_start_says_why() {
    let sm = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_ibkit"))
            .arg("sm")
            .args(args)
            .env("IBSIM_SOCKNAME", "ibkit-cli-test-nobody-serves-this")
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = sm(&["--once", "--pcap", "/nonexistent/dir/sm.pcap"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot write the capture /nonexistent/dir/sm.pcap"),
        "{err}"
    );
    let (code, err) = sm(&["--once"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no simulator serves @ibkit-cli-test-nobody-serves-this"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, err) = sm(&["--transport", "rdma"]);
    assert_eq!(code, 2, "{err}");
}

/// `ibkit … | head`: a reader that stops early ends ibkit quietly with
/// the status of a SIGPIPE death (141), no panic on stderr.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::Read;
    let mut c = Command::new(env!("CARGO_BIN_EXE_ibkit"))
        .args([
            "topology",
            "--topology",
            "fat-tree-11664",
            "--ibnetdiscover",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    c.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is closed here, with most of the output unwritten.
    let o = c.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(141), "{o:?}");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let (code, _, err) = ibkit(&["decode", "/nonexistent/x.pcap"], None);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/x.pcap"));
}

#[test]
fn sim_brings_a_fat_tree_up_and_reports_json() {
    let (code, out, err) = ibkit(
        &[
            "sim",
            "--topology",
            "mport-ntree:8:2",
            "--window",
            "1",
            "--json",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["topology"]["switches"], 12);
    assert_eq!(v["topology"]["cas"], 32);
    assert_eq!(v["topology"]["lids"], 44);
    assert_eq!(v["topology"]["lids_held"], 44);
    assert_eq!(v["up"], true);
    assert_eq!(v["verify"]["unreachable_pairs"], 0);
    assert_eq!(v["verify"]["loops"], 0);
    assert_eq!(v["verify"]["reachable_pairs"], 32 * 43);
    assert_eq!(v["smps"]["by_kind"]["Set(LinearForwardingTable)"], 12);
    for phase in ["discovery", "routing", "distribution"] {
        assert!(v["phases"][phase]["smps"].is_object(), "{phase}");
        assert!(v["phases"][phase]["wall_ms"].as_f64().unwrap() >= 0.0);
    }
    assert_eq!(
        v["phases"]["distribution"]["smps"]["Set(LinearForwardingTable)"],
        12
    );
    assert!(v["phases"]["discovery"]["total"].as_u64().unwrap() > 0);
    // The analytic model predicts a controlled BFS exactly on a tree.
    assert_eq!(v["model"]["total"], v["smps"]["total"]);
    assert_eq!(v["model"]["full_reconfig_smps"], 12);
    assert_eq!(v["verify"]["deadlock_free"], true);
}

#[test]
fn lash_routes_a_torus_deadlock_free_and_says_when_the_vls_are_too_few() {
    let (code, out, err) = ibkit(
        &[
            "sim",
            "--topology",
            "torus:8:8:1",
            "--routing",
            "lash",
            "--json",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["verify"]["deadlock_free"], true);
    // Min-hop, on the same torus, closes a cycle.
    let (code, out, _) = ibkit(&["sim", "--topology", "torus:8:8:1", "--json"], None);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["verify"]["deadlock_free"], false);
    // A 12 x 12 torus needs more layers than VL0-7 give.
    let (code, _, err) = ibkit(
        &["sim", "--topology", "torus:12:12:1", "--routing", "lash"],
        None,
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("LASH needs more layers"), "{err}");
}

#[test]
fn model_prints_the_prediction_and_sim_exports_what_it_found() {
    let (code, out, err) = ibkit(&["model", "--topology", "fat-tree-11664", "--json"], None);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["full_reconfig_smps"], 336960);
    assert_eq!(v["by_kind"]["Get(NodeInfo)"], 34993);
    // Measured on the simulator: exactly the model, kind by kind.
    assert_eq!(v["measured"]["by_kind"], v["by_kind"]);
    // The OSU paper's formulas for the 36-port 3-tree it is: NodeInfo and
    // PortInfo once per port (1620 × 36 + 11664), Set(PortInfo) once per
    // node, 1 + ⌊3 · 11664 / 2048⌋ = 18 LFT SMPs per switch.
    let o = &v["osu"];
    assert_eq!((o["m"].as_u64(), o["n"].as_u64()), (Some(36), Some(3)));
    assert_eq!(o["get_s_node_info"], 69984);
    assert_eq!(o["get_s_port_info"], 69984);
    assert_eq!(o["get_s"], 139968);
    assert_eq!(o["set_s_port_info"], 11664);
    assert_eq!(o["set_s_lft"], 29160);
    assert_eq!(o["set_s"], 11664 + 29160);
    let t_pc = o["times_ms"]["t_pc"].as_f64().unwrap();
    assert!((t_pc - 81.3 / 8.0 * 11664.0).abs() < 1e-6, "{t_pc}");
    let rows = v["comparison"].as_array().unwrap();
    let ni = rows.iter().find(|r| r["kind"] == "Get(NodeInfo)").unwrap();
    assert_eq!(
        (ni["osu"].as_u64(), ni["measured"].as_u64()),
        (Some(69984), Some(34993))
    );
    assert!(ni["why"]
        .as_str()
        .unwrap()
        .contains("both ends of every cable"));
    // The paper's Table 2 fabric, named as the paper names it: its GetS 64,
    // SetS 8 + 6, beside ibkit's 165 measured.
    let (code, out, err) = ibkit(&["model", "--topology", "mport-ntree:4:2", "--json"], None);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let o = &v["osu"];
    assert_eq!(
        (
            o["get_s"].as_u64(),
            o["set_s_port_info"].as_u64(),
            o["set_s_lft"].as_u64()
        ),
        (Some(64), Some(8), Some(6))
    );
    assert_eq!(v["measured"]["total"], 165);
    // fat-tree-324 is no m-port n-tree: no OSU counts, and said so.
    let (code, out, _) = ibkit(
        &["model", "--topology", "fat-tree-324", "--no-measure"],
        None,
    );
    assert_eq!(code, 0);
    assert!(out.contains("the OSU model covers m-port n-trees"), "{out}");
    let file = std::env::temp_dir().join(format!("ibkit-export-{}.net", std::process::id()));
    let (code, _, err) = ibkit(
        &[
            "sim",
            "--topology",
            "random:6:2",
            "--export",
            file.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let spec = format!("file:{}", file.display());
    let (code, out, err) = ibkit(&["topology", "--topology", &spec], None);
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, 0, "{err}");
    let (_, orig, _) = ibkit(&["topology", "--topology", "random:6:2"], None);
    // Same counts of switches, CAs and cables as the cabled fabric.
    assert_eq!(out.rsplit(": ").next(), orig.rsplit(": ").next());
}

#[test]
fn migrate_json_has_the_documented_keys() {
    let (code, out, err) = ibkit(
        &[
            "migrate",
            "--topology",
            "fat-tree-324",
            "--policy",
            "dynamic",
            "--vfs",
            "4",
            "--vms",
            "8",
            "--migrations",
            "3",
            "--json",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["lids"], 360);
    assert_eq!(v["min_lft_blocks_per_switch"], 6);
    assert_eq!(v["swap_smps_max"], 72);
    let m = v["migrations"].as_array().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m[0]["kind"], "near");
    assert_eq!(m[0]["switches_updated"], 1);
    for x in m {
        assert_eq!(x["verified"], true);
        assert_eq!(x["others_unchanged"], true);
        // Copy: at most one block per switch, plus the two Set(VPortInfo).
        let lft = x["lft_smps"].as_u64().unwrap();
        assert!(lft <= 36 && x["smps"].as_u64().unwrap() == lft + 2);
    }
    // Full reconfiguration with the VMs' LIDs (block 5 still): 36 × 6.
    assert_eq!(v["full_reconfig_smps"], 216);
}

/// Table I on all four of the paper's fabrics, as CI runs it (a sweep of 2
/// far migrations; about 35 s in the test profile on this 2-core machine):
/// every count the paper gives, and every check passed — all pairs on the
/// two small fabrics, the moved LIDs on the two big ones.
#[test]
fn migrate_table_reproduces_table_one_on_all_four_fabrics() {
    let svg = std::env::temp_dir().join(format!("ibkit-table-{}.svg", std::process::id()));
    let (code, out, err) = ibkit(
        &[
            "migrate",
            "--table",
            "--sweep",
            "2",
            "--json",
            "--plot",
            svg.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains(": NO"), "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    // The paper's Table I: (nodes, switches, LIDs, blocks, full
    // reconfiguration, swap max bound).
    let want = [
        (324, 36, 360, 6, 216, 72),
        (648, 54, 702, 11, 594, 108),
        (5832, 972, 6804, 107, 104004, 1944),
        (11664, 1620, 13284, 208, 336960, 3240),
    ];
    assert_eq!(rows.len(), 4);
    for (r, w) in rows.iter().zip(want) {
        let got = (
            r["nodes"].as_u64().unwrap(),
            r["switches"].as_u64().unwrap(),
            r["lids"].as_u64().unwrap(),
            r["min_lft_blocks_per_switch"].as_u64().unwrap(),
            r["full_reconfig_smps"].as_u64().unwrap(),
            r["swap_smps_max"].as_u64().unwrap(),
        );
        assert_eq!(got, w);
        assert_eq!(r["swap_smps_min"], 1);
        let worst = r["swap_smps_max_measured"].as_u64().unwrap();
        assert!(worst > 1 && worst <= w.5, "{worst}");
        assert_eq!(r["verified"], true, "{r}");
        let check = if w.0 < 1000 {
            "all pairs"
        } else {
            "changed LIDs"
        };
        assert_eq!(r["check"]["swap"], check, "{r}");
    }
    let chart = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    assert!(chart.starts_with("<svg") && chart.contains("full reconfiguration"));
    assert_eq!(chart.matches("<polyline").count(), 4);
}

#[test]
fn the_text_table_has_a_verified_column() {
    let (code, out, err) = ibkit(
        &[
            "migrate",
            "--table",
            "--fabrics",
            "fat-tree-324",
            "--sweep",
            "2",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let head = out.lines().find(|l| l.starts_with("fabric")).unwrap();
    assert!(head.trim_end().ends_with("verified"), "{head}");
    let row = out.lines().find(|l| l.starts_with("fat-tree-324")).unwrap();
    assert!(row.trim_end().ends_with("yes (all pairs)"), "{row}");
}

/// The case that once exited 1 without a word: enough LIDs that the Table I
/// limit sends each migration to the changed-LID check, where a swapped
/// LID parks on a disabled VF. Both policies, both checks.
#[test]
fn migrate_with_many_vfs_passes_both_checks_under_both_policies() {
    for policy in ["prepopulated", "dynamic"] {
        for (limit, check) in [("0", "changed LIDs"), ("50000000", "all pairs")] {
            let (code, out, err) = ibkit(
                &[
                    "migrate",
                    "--topology",
                    "fat-tree-648",
                    "--vfs",
                    "50",
                    "--migrations",
                    "3",
                    "--policy",
                    policy,
                    "--verify-limit",
                    limit,
                ],
                None,
            );
            assert_eq!(code, 0, "{policy} {limit}: {err}");
            let rows: Vec<&str> = out
                .lines()
                .filter(|l| l.contains(" near ") || l.contains(" far ") || l.contains(" random "))
                .collect();
            assert_eq!(rows.len(), 3, "{out}");
            for r in rows {
                assert!(
                    r.trim_end().ends_with(&format!("yes ({check})")),
                    "{policy}: {r}"
                );
            }
            assert!(err.contains(&format!("checked ({check}")), "{err}");
        }
    }
}

#[test]
fn migrate_refuses_more_lids_than_exist() {
    let (code, _, err) = ibkit(
        &["migrate", "--topology", "fat-tree-648", "--vfs", "100"],
        None,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("LIDs but only 49151 unicast LIDs exist"),
        "{err}"
    );
}

#[test]
fn sim_traces_a_packet_through_the_installed_tables() {
    let (code, out, err) = ibkit(
        &[
            "sim",
            "--topology",
            "mport-ntree:4:2",
            "--trace",
            "H-0:H-7",
            "--trace",
            "H-0:9999",
            "--json",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let t = v["traces"].as_array().unwrap();
    let ok = t[0].as_str().unwrap();
    assert!(
        ok.starts_with("H-0 → LID ") && ok.ends_with("H-7 — Delivered(3)"),
        "{ok}"
    );
    assert!(t[1].as_str().unwrap().contains("Dropped"), "{}", t[1]);
    let (code, _, err) = ibkit(
        &["sim", "--topology", "mport-ntree:4:2", "--trace", "nope"],
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("expected FROM:TO"), "{err}");
}

/// Nonsense numbers are refused by the argument parser with the range, and
/// nothing runs.
#[test]
fn nonsense_numbers_are_refused_with_their_range() {
    for (args, says) in [
        (&["sim", "--loss", "1.5"][..], "probability from 0 to 1"),
        (&["sim", "--loss", "inf"][..], "probability from 0 to 1"),
        (&["sim", "--loss", "NaN"][..], "probability from 0 to 1"),
        (&["sim", "--loss=-0.1"][..], "probability from 0 to 1"),
        (
            &["fabric", "serve", "--loss", "2"][..],
            "probability from 0 to 1",
        ),
        (&["migrate", "--vfs", "100000"][..], "from 0 to 128"),
        (&["sim", "--vfs", "129"][..], "from 0 to 128"),
        (&["sim", "--window", "0"][..], "1..=4096"),
        (&["sim", "--lmc", "8"][..], "0..=7"),
        (&["sm", "--lmc", "9"][..], "0..=7"),
        (&["sm", "-l", "-1"][..], "-1"),
        (
            &["sm", "--max-wire-smps", "2147483648"][..],
            "0..=2147483647",
        ),
        (&["sm", "--max-wire-smps", "-1"][..], "-1"),
        (&["sm", "--log-limit", "1048577"][..], "0..=1048576"),
        (&["sm", "--log-prefix", ""][..], "not 1-64 characters"),
        (&["sm", "--log-prefix", "a\tb"][..], "not printable ASCII"),
        (
            &["sm", "--part-enforce", "BOTH"][..],
            "both, in, out or off",
        ),
        (&["bench", "opensm", "--lmc", "8"][..], "0..=7"),
        (&["bench", "sa", "--windows", "8,0"][..], "1..=4096"),
        (
            &["bench", "sa", "--load", "--window", "99999999999"][..],
            "1..=4096",
        ),
        (&["bench", "sa", "--load", "--lids", "0"][..], "1..=49151"),
        (
            &["bench", "sa", "--seconds", "NaN"][..],
            "above 0, at most 3600",
        ),
        (
            &["bench", "sa", "--seconds", "0"][..],
            "above 0, at most 3600",
        ),
        (
            &["bench", "sa", "--all-pairs", "--perf"][..],
            "cannot be used with",
        ),
        (&["bench", "sa", "--repeat", "0"][..], "1..=20"),
        (&["bench", "sa", "--repeat", "21"][..], "1..=20"),
        (
            &["bench", "sa", "--all-pairs", "--repeat", "2"][..],
            "cannot be used with",
        ),
        (&["sa", "--timeout-ms", "0", "node"][..], "1..=60000"),
        (&["sa", "--attempts", "99", "node"][..], "1..=20"),
        (&["sa", "--sm-key", "0xzz", "node"][..], "not a number"),
        // Filters are checked before any port is opened.
        (&["sa", "node", "foo=1"][..], "has no component \"foo\""),
        (
            &["sa", "node", "lid=0x10000"][..],
            "does not fit in 16 bits",
        ),
        (&["sa", "node", "1", "2"][..], "one bare value at most"),
        (
            &["sa", "path", "1", "2", "3"][..],
            "two bare values at most",
        ),
        (&["sa", "path", "sgid=zz::"][..], "not a GID"),
        // A 0x… word is a number, not a node's name.
        (
            &["sa", "path", "1", "0xfe800000000000000002c90300000101"][..],
            "is not a number",
        ),
        (&["sa", "service", "--register"][..], "need the record"),
        (&["sa", "mcmember", "--leave"][..], "need the group"),
        (&["sa", "guidinfo", "--set"][..], "need the entries"),
        (
            &["sa", "lft", "1", "2", "3"][..],
            "two bare values at most (LID, block)",
        ),
        (
            &["sa", "mft", "1", "0", "0", "9"][..],
            "three bare values at most (LID, position, block)",
        ),
        (&["sa", "mft", "position=16"][..], "does not fit in 4 bits"),
        (
            &["sa", "pkey", "1", "1", "0", "0"][..],
            "three bare values at most (LID, port, block)",
        ),
        (&["sa", "sminfo", "1", "2"][..], "one bare value at most"),
        (
            &["sa", "path", "1", &"n".repeat(65)][..],
            "longer than its 64 bytes",
        ),
        (
            &["sa", "guidinfo", "--delete", "guid9=1"][..],
            "no component \"guid9\"",
        ),
        (
            &["sa", "guidinfo", "1", "2", "3"][..],
            "two bare values at most",
        ),
        (
            &["sa", "guidinfo", "--set", "--delete", "guid1=0"][..],
            "cannot be used with",
        ),
        (
            &["sa", "multipath", "--sgid", "zz::", "--dgid", "fe80::1"][..],
            "not a GID",
        ),
        (&["sa", "multipath", "--sgid", "fe80::1"][..], "--dgid"),
        (
            &[
                "sa",
                "multipath",
                "--sgid",
                "fe80::1",
                "--dgid",
                "fe80::2",
                "--numb-path",
                "0",
            ][..],
            "1..=127",
        ),
        (
            &["sa", "mcmember", "--join", "--leave", "ff12::1"][..],
            "cannot be used with",
        ),
        (
            &["sa", "service", &"x".repeat(65)][..],
            "longer than its 64 bytes",
        ),
        (
            &["sa", "inform", "--subscribe", "--trap", "0x10000"][..],
            "does not fit 16 bits",
        ),
        (
            &["sa", "inform", "--subscribe", "--listen", "0"][..],
            "1..=86400",
        ),
        (&["sa", "inform", "--count", "3"][..], "--subscribe"),
        (
            &["sa", "inform", "--subscribe", "x=1"][..],
            "cannot be used",
        ),
        (
            &["sim", "--hop-ns", "18446744073709551615"][..],
            "0..=1000000000",
        ),
        (
            &["fabric", "serve", "--dr-hop-ns", "1000000001"][..],
            "0..=1000000000",
        ),
    ] {
        nonsense(args, says);
    }
    // 256 source GIDs: one more than a MultiPathRecord counts.
    let many = vec!["fe80::1"; 256].join(",");
    nonsense(
        &["sa", "multipath", "--sgid", &many, "--dgid", "fe80::2"],
        "at most 255",
    );
    // The edges are accepted.
    let (code, _, err) = ibkit(
        &["sim", "--topology", "mport-ntree:4:2", "--loss", "0"],
        None,
    );
    assert_eq!(code, 0, "{err}");
}

/// `args` is refused with exit 2, nothing on stdout, and `says` in the
/// reason.
fn nonsense(args: &[&str], says: &str) {
    {
        let (code, out, err) = ibkit(args, None);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} ran: {out}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `ibkit ARGS` under a 400 MiB address-space limit, fed `input`: inputs
/// far larger than any real one must be read in bounded memory, where the
/// old readers held them whole (a 5 MB text took 946 MB, a 20 MB capture
/// about 800 MB, /dev/zero every byte there was).
fn ibkit_limited(args: &str, input: &[u8]) -> (i32, String) {
    let mut c = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v 409600; exec \"$0\" {args}"))
        .arg(env!("CARGO_BIN_EXE_ibkit"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let data = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let o = c.wait_with_output().unwrap();
    feeder.join().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn huge_inputs_are_read_in_bounded_memory() {
    // 5 MB of lines that are no MADs.
    let text = "z\n".repeat(2_500_000);
    let (code, err) = ibkit_limited("decode", text.as_bytes());
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err.lines().last(),
        Some("ibkit: 2500000 of 2500000 MADs could not be decoded (the first 100 are named above)"),
        "{}",
        &err[err.len().saturating_sub(500)..]
    );
    assert_eq!(err.lines().count(), 102);
    // A 20 MB capture of empty records.
    let mut cap = fabric::pcap::write(&[]);
    for _ in 0..1_250_000 {
        cap.extend_from_slice(&[0u8; 16]);
    }
    let (code, err) = ibkit_limited("decode", &cap);
    assert_eq!(code, 1, "{}", &err[err.len().saturating_sub(500)..]);
    assert!(err.ends_with(
        "ibkit: 1250000 of 1250000 MADs could not be decoded (the first 100 are named above)\n"
    ));
    // A topology "file" that never ends.
    let (code, err) = ibkit_limited("topology --topology file:/dev/zero", b"");
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        "ibkit: /dev/zero: larger than 64 MiB, too big for a topology file\n"
    );
}

#[test]
fn a_broken_partition_file_is_refused_with_its_place_before_the_fabric_is_touched() {
    let dir = std::env::temp_dir().join(format!("ibkit-cli-parts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("partitions.conf");
    std::fs::write(&bad, "Default=0x7fff:ALL=full;\nbad=0xZZ:ALL;\n").unwrap();
    let (code, out, err) = ibkit(
        &["sm", "--once", "--partitions", bad.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("line 2, column 5") && err.contains("0xZZ"),
        "{err}"
    );
    let (code, _, err) = ibkit(
        &["sm", "--once", "--partitions", "/nonexistent/p.conf"],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/p.conf"), "{err}");
}

#[test]
fn a_broken_root_guid_file_is_refused_with_its_place_before_the_fabric_is_touched() {
    let dir = std::env::temp_dir().join(format!("ibkit-cli-roots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("roots");
    std::fs::write(&bad, "# roots\n0x0002c90300000400 spine\n  spine-2\n").unwrap();
    let (code, out, err) = ibkit(
        &["sm", "--once", "--root-guid-file", bad.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("root_guid_file")
            && err.contains("line 3, column 3")
            && err.contains("spine-2"),
        "{err}"
    );
    let (code, _, err) = ibkit(
        &["sm", "--once", "--root-guid-file", "/nonexistent/r"],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/r"), "{err}");
    // The routing order file is read as OpenSM reads it, as the roots.
    let (code, _, err) = ibkit(
        &[
            "sm",
            "--once",
            "--guid-routing-order-file",
            bad.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("guid_routing_order_file") && err.contains("line 3, column 3"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn broken_hop_weights_and_port_orders_are_refused_with_their_place() {
    let dir = std::env::temp_dir().join(format!("ibkit-cli-weights-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("weights");
    std::fs::write(
        &bad,
        "# switch port weight\n0x0002c90300000400 1 10\n0x0002c90300000400 2 300\n",
    )
    .unwrap();
    let (code, _, err) = ibkit(
        &["sm", "--once", "--hop-weights-file", bad.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("hop_weights_file")
            && err.contains("line 3, column 22")
            && err.contains("1-255"),
        "{err}"
    );
    std::fs::write(&bad, "0x0002c90300000400 3 1 3\n").unwrap();
    let (code, _, err) = ibkit(
        &[
            "sm",
            "--once",
            "--port-search-ordering-file",
            bad.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("port_search_ordering_file")
            && err.contains("line 1, column 24")
            && err.contains("twice"),
        "{err}"
    );
    let (code, _, err) = ibkit(&["sm", "--once", "--scatter-ports", "-1"], None);
    assert_eq!(code, 2, "{err}");
    // The file engine's next engine is one that does not need the file.
    for bad in ["file", "dfsssp"] {
        let (code, _, err) = ibkit(&["sm", "--once", "--file-fallback", bad], None);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("minhop, updn, ftree, dor or lash"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_lfts_file_is_refused_with_its_place_before_the_fabric_is_touched() {
    let dir = std::env::temp_dir().join(format!("ibkit-cli-lfts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("lfts");
    std::fs::write(
        &bad,
        "Unicast lids [0-2] of switch Lid 2 guid 0x0002c90300000400 ('s'):\n0x0001 001 # x\n0x0002 port\n",
    )
    .unwrap();
    let f = bad.to_str().unwrap();
    let (code, out, err) = ibkit(
        &["sm", "--once", "--routing", "file", "--lfts-file", f],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("lfts_file") && err.contains("line 3, column 8") && err.contains("not a port"),
        "{err}"
    );
    let (code, _, err) = ibkit(
        &[
            "sm",
            "--once",
            "--routing",
            "file",
            "--lfts-file",
            "/nonexistent/l",
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/l"), "{err}");
    // Only `ibkit sm` takes the file engine.
    let (code, _, err) = ibkit(&["sim", "--routing", "file"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("minhop, updn, ftree, dor or lash"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_node_name_map_is_refused_with_its_place_before_the_fabric_is_touched() {
    let dir = std::env::temp_dir().join(format!("ibkit-cli-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("node-name-map");
    std::fs::write(
        &bad,
        "# names\n0x0002c90300000400 \"spine\"\n  leaf-2 \"x\"\n",
    )
    .unwrap();
    let (code, out, err) = ibkit(
        &["sm", "--once", "--node-name-map", bad.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("node name map")
            && err.contains("line 3, column 3")
            && err.contains("not a GUID"),
        "{err}"
    );
    let (code, _, err) = ibkit(&["sm", "--once", "--node-name-map", "/nonexistent/n"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/n"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_qos_file_is_refused_with_its_place_before_the_fabric_is_touched() {
    let dir = std::env::temp_dir().join(format!("ibkit-cli-qos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("opensm.conf");
    std::fs::write(&bad, "sm_priority 1\nqos_ca_vlarb_high 0:4,15:1\n").unwrap();
    let (code, out, err) = ibkit(
        &["sm", "--once", "--qos-config", bad.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("qos: ") && err.contains("line 2, column 23") && err.contains("data VL"),
        "{err}"
    );
    let (code, _, err) = ibkit(&["sm", "--once", "--qos-config", "/dev/zero"], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("longer than"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_qos_policy_is_refused_with_its_place_before_the_fabric_is_touched() {
    let dir = std::env::temp_dir().join(format!("ibkit-cli-qosp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("qos-policy.conf");
    std::fs::write(&bad, "qos-ulps\n  default : 0\n  rds : 16\nend-qos-ulps\n").unwrap();
    let (code, out, err) = ibkit(
        &["sm", "--once", "--qos-policy", bad.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("line 3, column 9") && err.contains("0-15"),
        "{err}"
    );
    // The full policy: a rule naming a level nobody defined (OpenSM's
    // ERR AC11), and a level's path-bits past LMC 7's 128 LIDs.
    let level = "qos-levels\n qos-level\n  name: DEFAULT\n";
    for (text, place, why) in [
        (
            format!("{level}  sl: 0\n end-qos-level\nend-qos-levels\nqos-match-rules\n qos-match-rule\n  qos-class: 1\n  qos-level-name: Gold\n end-qos-match-rule\nend-qos-match-rules\n"),
            "line 8",
            "\"Gold\" not found",
        ),
        (
            format!("{level}  path-bits: 1, 200\n end-qos-level\nend-qos-levels\n"),
            "line 4, column 14",
            "past 127",
        ),
    ] {
        std::fs::write(&bad, text).unwrap();
        let (code, _, err) = ibkit(
            &["sm", "--once", "--qos-policy", bad.to_str().unwrap()],
            None,
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(place) && err.contains(why), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An LMC the LID space cannot hold is refused after discovery, with the
/// LIDs needed, before any LID is given (exit 2).
#[test]
fn an_lmc_the_lid_space_cannot_hold_is_refused() {
    let (code, out, err) = ibkit(&["sim", "--topology", "fat-tree-648", "--lmc", "7"], None);
    assert_eq!(code, 2, "{out}{err}");
    // 648 CAs × 128 LIDs and 54 switches.
    assert!(
        err.contains("needs 82998 LIDs") && err.contains("49151"),
        "{err}"
    );
    assert_eq!(
        err.lines().filter(|l| l.starts_with("ibkit:")).count(),
        1,
        "{err}"
    );
}

/// With LMC, LIDs go in aligned blocks: the header counts the LIDs held
/// and names the highest, which is more.
#[test]
fn sim_counts_the_lids_held_under_lmc() {
    let (code, out, err) = ibkit(
        &["sim", "--topology", "mport-ntree:4:2", "--lmc", "2"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    // 6 switches with one LID each, 8 CAs with 4 each.
    assert!(
        out.contains("6 switches, 8 CAs, 38 LIDs (highest 47): UP"),
        "{out}"
    );
    assert!(
        out.contains("× 38 LIDs"),
        "the check walks to as many: {out}"
    );
}
