//! The traffic part of `ibkit migrate`: [`vhca::traffic`]'s report, printed.

use vhca::traffic::TrafficReport;

/// Prints the demonstration's report.
pub fn print(t: &TrafficReport) {
    println!(
        "Traffic across a migration: VM LID {} (GID {}) on {} exchanges UD messages over vhca with VM LID {} on {}",
        t.vm.lid, t.vm.gid, t.from, t.peer_lid, t.peer_on
    );
    println!(
        "  before: {}/{} delivered, path {}",
        t.messages_before,
        t.messages_each_phase,
        t.path_before.join(" → ")
    );
    println!(
        "  moved to {}; a datagram sent before the SM moved the routes: {} (it went {})",
        t.to,
        if t.delivered_before_lfts_moved {
            "delivered"
        } else {
            "lost, as UD is"
        },
        t.stale_path.join(" → ")
    );
    println!(
        "  the SM moved them with {} SMPs on {} switches; after: {}/{} delivered, path {}",
        t.migration_smps,
        t.switches_touched,
        t.messages_after,
        t.messages_each_phase,
        t.path_after.join(" → ")
    );
    println!(
        "  same LID: {}, same GID: {}; QP number {} → {} (QP numbers belong to the HCA; the peer learns the new one)",
        t.same_lid, t.same_gid, t.qpn_before, t.qpn_after
    );
    println!(
        "  the peer's PathRecord query, forwarded by its backend to the SM's SA: DLID {} DGID {} before, DLID {} DGID {} after; the whole record {}",
        t.sa_dlid_before,
        t.sa_dgid_before,
        t.sa_dlid_after,
        t.sa_dgid_after,
        if t.sa_same_path { "the same" } else { "changed" }
    );
}
