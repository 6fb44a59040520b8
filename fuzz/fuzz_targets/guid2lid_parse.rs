//! Arbitrary bytes as the caches `ibkit sm --cache-dir` reads at start
//! (`guid2lid`, `guid2mkey` and `neighbors`, OpenSM's layouts, and
//! ibkit's `vf2lid`): read without a panic, every LID kept a unicast LID
//! given to one GUID (or one VF) only, no M_Key kept for GUID 0, every
//! link kept both ways between non-zero GUIDs and ports 1-255, every
//! skipped entry named by a line of the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeSet;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (lids, warnings) = smd::dump::parse_guid2lid(&text);
    let mut seen = BTreeSet::new();
    for (&guid, lid) in &lids {
        assert_ne!(guid, 0);
        assert!((1..=0xBFFF).contains(&lid.0), "{lid:?}");
        assert!(seen.insert(lid.0), "LID {} given twice", lid.0);
    }
    let lines = text.lines().count();
    for w in &warnings {
        assert!(w.line >= 1 && w.line <= lines, "{w:?}");
    }
    assert!(warnings.len() <= 100);
    let (vfs, warnings) = smd::dump::parse_vf2lid(&text);
    let mut seen = BTreeSet::new();
    for (&(guid, vf), lid) in &vfs {
        assert!(guid != 0 && vf != 0);
        assert!((1..=0xBFFF).contains(&lid.0), "{lid:?}");
        assert!(seen.insert(lid.0), "LID {} given twice", lid.0);
    }
    for w in &warnings {
        assert!(w.line >= 1 && w.line <= lines, "{w:?}");
    }
    assert!(warnings.len() <= 100);
    let (keys, warnings) = smd::dump::parse_guid2mkey(&text);
    assert!(!keys.contains_key(&0));
    assert!(keys.len() <= lines);
    for w in &warnings {
        assert!(w.line >= 1 && w.line <= lines, "{w:?}");
    }
    assert!(warnings.len() <= 100);
    let (links, warnings) = smd::dump::parse_neighbors(&text);
    for (&(g, p), &(h, q)) in &links {
        assert!(g != 0 && h != 0 && p != 0 && q != 0);
        assert_eq!(links.get(&(h, q)), Some(&(g, p)), "one way");
    }
    for w in &warnings {
        assert!(w.line >= 1 && w.line <= lines, "{w:?}");
    }
    assert!(warnings.len() <= 100);
});
