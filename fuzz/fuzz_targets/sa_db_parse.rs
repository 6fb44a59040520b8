//! Arbitrary bytes as the SA database `ibkit sm --sa-db` reads at start
//! (OpenSM's `opensm-sa.dump`): read without a panic; a database read is
//! written back as OpenSM's lines, which read again to the same lines;
//! restored into a new SA over a subnet ibkit's SM brought up, it stays
//! within the SA's bounds, and what that SA then writes restores into
//! another SA that writes the same.
#![no_main]

use fabric::sim::{Fabric, SimConfig};
use fabric::topology::Topology;
use libfuzzer_sys::fuzz_target;
use sa::db::SaDb;
use sa::{Sa, SaConfig};
use smi::sm::{Sm, SmConfig};
use std::sync::OnceLock;

fn subnet() -> &'static Sm {
    static SM: OnceLock<Sm> = OnceLock::new();
    SM.get_or_init(|| {
        let topo = Topology::from_spec("mport-ntree:4:2").unwrap();
        let mut f = Fabric::new(topo, SimConfig::default()).unwrap();
        let mut sm = Sm::new(SmConfig::default());
        assert!(f.bring_up(&mut sm));
        sm
    })
}

/// Wall-clock seconds of the runs.
const EPOCH: u64 = 1_764_000_000;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(db) = SaDb::parse(&text) else {
        return;
    };
    let once = db.write();
    let again = SaDb::parse(&once).expect("a database written reads back");
    assert_eq!(again.write(), once, "written twice, the same lines");
    let s = subnet().subnet();
    let mut a = Sa::new(SaConfig::default());
    let r = a.restore(s, &db, 5_000, EPOCH);
    assert!(r.reasons.len() <= 100 && r.reasons.len() <= r.skipped);
    assert!(a.groups().iter().count() <= sa::mcast::MAX_GROUPS);
    assert!(a.groups().memberships() <= sa::mcast::MAX_MEMBERS);
    assert!(a.services() <= sa::service::MAX_SERVICES);
    assert!(a.subscriptions().0 <= sa::inform::MAX_SUBSCRIPTIONS);
    let held = a.export(s, 5_000, EPOCH);
    let mut b = Sa::new(SaConfig::default());
    let r = b.restore(s, &SaDb::parse(&held.write()).unwrap(), 5_000, EPOCH);
    assert_eq!(r.skipped, 0, "{r:?}\n{}", held.write());
    assert_eq!(b.export(s, 5_000, EPOCH).write(), held.write());
});
