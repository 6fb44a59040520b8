//! Arbitrary bytes as a node name map (`ibkit sm --node-name-map`,
//! OpenSM's `node_name_map_name`): read without a panic; a refusal names
//! a line of the text; every name kept is non-empty and holds no quote,
//! `#` or line break; and a node the map does not name prints as at
//! most 63 printable ASCII characters.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines = text.lines().count();
    match smd::names::parse_node_name_map(&text) {
        Err(e) => assert!(e.line >= 1 && e.line <= lines, "{e}"),
        Ok(names) => {
            assert!(names.len() <= lines);
            for guid in [0u64, 1, u64::MAX] {
                if let Some(n) = names.get(guid) {
                    assert!(!n.is_empty());
                    assert!(!n.contains(['"', '#', '\n']), "{n:?}");
                }
            }
            // The bytes as a NodeDescription of a node with no name.
            let guid = (0..).find(|g| names.get(*g).is_none()).unwrap();
            let d = names.print_desc(guid, data);
            assert!(d.len() <= 63);
            assert!(d.bytes().all(|b| (0x20..=0x7E).contains(&b)), "{d:?}");
        }
    }
});
