//! What the SM tells systemd under `Type=notify` (`dist/ibkit-sm@.service`):
//! `READY=1` once the subnet is up under this SM as master, or once it
//! stands by for another master — so that units ordered after it (IPoIB's
//! network set-up, say) start on a working fabric — or, at the latest,
//! [`READY_AT_THE_LATEST`] after the start, so that a port with no link
//! does not hold a machine's boot; `STATUS=` whenever its role or the
//! subnet's size changes (`systemctl status` shows it); `RELOADING=1`
//! then `READY=1` around a SIGHUP; `STOPPING=1` at a SIGTERM. Outside
//! systemd (no `NOTIFY_SOCKET`) nothing is sent.

use sd_notify::NotifyState;

/// The longest the SM keeps systemd waiting for `READY=1`, in ms, unless
/// its configuration says otherwise (`ready_timeout_s`).
pub const READY_AT_THE_LATEST: u64 = 60_000;

/// Where the SM is, as far as systemd is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Still bringing the subnet up (or finding its master).
    Starting,
    /// Master, with the subnet up: its nodes and highest LID.
    Master {
        /// Nodes the SM knows.
        nodes: usize,
        /// The highest LID given.
        max_lid: u16,
    },
    /// Standing by for another master.
    Standby,
    /// Not active (OpenSM's `sm_inactive`): answering SMInfo only.
    Inactive,
}

impl Role {
    /// The `STATUS=` line for this role; `waited`: the subnet was not up
    /// `cap_ms` after the start.
    pub fn status(self, waited: bool, cap_ms: u64) -> String {
        match self {
            Role::Master { nodes, max_lid } => {
                format!("master: subnet up, {nodes} nodes, LIDs up to {max_lid}")
            }
            Role::Standby => "standby: another SM is master".into(),
            Role::Inactive => "not active: answering SMInfo, until a master says Discover".into(),
            Role::Starting if waited => {
                format!("subnet not up after {} s: still sweeping", cap_ms / 1000)
            }
            Role::Starting => "bringing the subnet up".into(),
        }
    }
}

/// The notifications due, given the SM's role at each turn of its loop.
#[derive(Debug)]
pub struct Readiness {
    ready: bool,
    told: Option<(Role, bool)>,
    /// `READY=1` at the latest this long after the start, in ms.
    cap_ms: u64,
}

impl Default for Readiness {
    /// Ready at the latest [`READY_AT_THE_LATEST`] after the start.
    fn default() -> Self {
        Readiness::new(READY_AT_THE_LATEST)
    }
}

/// One message to systemd: whether it says `READY=1`, and its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// `READY=1` with it.
    pub ready: bool,
    /// The `STATUS=` text.
    pub status: String,
}

impl Readiness {
    /// Ready once the subnet is up or the SM stands by, or at the latest
    /// `cap_ms` after the start.
    pub fn new(cap_ms: u64) -> Self {
        Readiness {
            ready: false,
            told: None,
            cap_ms,
        }
    }

    /// What to tell systemd now, if anything: the SM's `role` at `now_ms`
    /// after its start.
    pub fn update(&mut self, role: Role, now_ms: u64) -> Option<Note> {
        let waited = role == Role::Starting && now_ms >= self.cap_ms;
        let ready = !self.ready && (role != Role::Starting || waited);
        if !ready && self.told == Some((role, waited)) {
            return None;
        }
        self.ready |= ready;
        self.told = Some((role, waited));
        Some(Note {
            ready,
            status: role.status(waited, self.cap_ms),
        })
    }

    /// True once `READY=1` has been said.
    pub fn is_ready(&self) -> bool {
        self.ready
    }
}

/// Sends `note` to systemd (nothing outside it); a failure is logged.
pub fn send(note: &Note) {
    let status = NotifyState::Status(&note.status);
    let r = if note.ready {
        sd_notify::notify(&[NotifyState::Ready, status])
    } else {
        sd_notify::notify(&[status])
    };
    if let Err(e) = r {
        tracing::warn!("systemd notification not sent: {e}");
    }
}

/// `RELOADING=1` (a SIGHUP is being taken in), or `READY=1` once it is,
/// when the SM had said it was ready.
pub fn reloading(on: bool) {
    let r = if on {
        sd_notify::notify(&[NotifyState::Reloading])
    } else {
        sd_notify::notify(&[NotifyState::Ready])
    };
    if let Err(e) = r {
        tracing::warn!("systemd notification not sent: {e}");
    }
}

/// `STOPPING=1`.
pub fn stopping() {
    if let Err(e) = sd_notify::notify(&[NotifyState::Stopping]) {
        tracing::warn!("systemd notification not sent: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_up_or_standing_by_or_at_the_latest() {
        let master = Role::Master {
            nodes: 14,
            max_lid: 14,
        };
        // Up as master: ready, said once; the status follows changes.
        let mut r = Readiness::default();
        let n = r.update(Role::Starting, 0).unwrap();
        assert!(!n.ready);
        assert_eq!(r.update(Role::Starting, 10), None, "said already");
        let n = r.update(master, 20).unwrap();
        assert!(n.ready && r.is_ready());
        assert_eq!(n.status, "master: subnet up, 14 nodes, LIDs up to 14");
        assert_eq!(r.update(master, 30), None);
        let n = r.update(Role::Standby, 40).unwrap();
        assert!(!n.ready, "READY=1 is said once");
        assert_eq!(n.status, "standby: another SM is master");
        // Standing by is ready too.
        let mut r = Readiness::default();
        assert!(r.update(Role::Standby, 5).unwrap().ready);
        // A subnet that never comes up: ready at the latest, saying so.
        let mut r = Readiness::default();
        assert!(
            !r.update(Role::Starting, READY_AT_THE_LATEST - 1)
                .unwrap()
                .ready
        );
        let n = r.update(Role::Starting, READY_AT_THE_LATEST).unwrap();
        assert!(n.ready);
        assert!(n.status.contains("not up after 60 s"), "{}", n.status);
        assert_eq!(r.update(Role::Starting, READY_AT_THE_LATEST + 1), None);
        assert!(r.update(master, READY_AT_THE_LATEST + 2).is_some());
        // The cap a configuration gives.
        let mut r = Readiness::new(5_000);
        assert!(!r.update(Role::Starting, 4_999).unwrap().ready);
        let n = r.update(Role::Starting, 5_000).unwrap();
        assert!(n.ready && n.status.contains("not up after 5 s"), "{n:?}");
    }
}
