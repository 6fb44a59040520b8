//! M_Key protection (IBA 14.2.4): the check an SMA makes on every Get, Set
//! and TrapRepress, the four protect levels, the lease and the violation
//! counter.

use mad_core::attr::PortInfo;
use mad_core::{MKey, Method};

/// What the M_Key check decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MKeyCheck {
    /// Proceed normally.
    Pass,
    /// Proceed, but return PortInfo.M_Key as zero (protect level 1, Get with a wrong key).
    PassHidingKey,
    /// A violation: count it, start the lease, raise trap 256, and drop the SMP.
    Violation,
}

/// Lease state kept next to a port's PortInfo: when the protection lapses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lease {
    /// Milliseconds at which the lease expires, when one is running.
    pub expires_ms: Option<u64>,
}

/// Checks `key` carried by an SMP of `method` against the port's PortInfo at
/// time `now_ms`, applying the lease: an expired lease clears the protect
/// bits first, a valid key cancels a running lease, and a violation counts
/// and starts it.
pub fn check(
    info: &mut PortInfo,
    lease: &mut Lease,
    method: Method,
    key: MKey,
    now_ms: u64,
) -> MKeyCheck {
    if let Some(t) = lease.expires_ms {
        if now_ms >= t {
            lease.expires_ms = None;
            info.m_key_protect_bits = 0;
        }
    }
    let guarded = matches!(method, Method::Get | Method::Set | Method::TrapRepress);
    if !guarded {
        return MKeyCheck::Pass;
    }
    let valid = info.m_key.0 == 0 || info.m_key == key;
    if valid {
        lease.expires_ms = None;
        return MKeyCheck::Pass;
    }
    let violation = match method {
        Method::Get => info.m_key_protect_bits >= 2,
        _ => true,
    };
    if !violation {
        return if info.m_key_protect_bits == 1 {
            MKeyCheck::PassHidingKey
        } else {
            MKeyCheck::Pass
        };
    }
    info.m_key_violations = info.m_key_violations.saturating_add(1);
    if lease.expires_ms.is_none() && info.m_key_lease_period != 0 {
        lease.expires_ms = Some(now_ms + u64::from(info.m_key_lease_period) * 1000);
    }
    MKeyCheck::Violation
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(level: u8, lease: u16) -> PortInfo {
        PortInfo {
            m_key: MKey(0xAA),
            m_key_protect_bits: level,
            m_key_lease_period: lease,
            ..Default::default()
        }
    }

    #[test]
    fn the_four_levels() {
        let bad = MKey(0xBB);
        for level in 0..4u8 {
            let (mut p, mut l) = (port(level, 0), Lease::default());
            let get = check(&mut p, &mut l, Method::Get, bad, 0);
            let want = match level {
                0 => MKeyCheck::Pass,
                1 => MKeyCheck::PassHidingKey,
                _ => MKeyCheck::Violation,
            };
            assert_eq!(get, want, "Get at level {level}");
            assert_eq!(
                check(&mut p, &mut l, Method::Set, bad, 0),
                MKeyCheck::Violation,
                "Set at {level}"
            );
            assert_eq!(
                check(&mut p, &mut l, Method::TrapRepress, bad, 0),
                MKeyCheck::Violation
            );
            assert_eq!(
                check(&mut p, &mut l, Method::Set, MKey(0xAA), 0),
                MKeyCheck::Pass,
                "right key"
            );
        }
    }

    #[test]
    fn a_zero_m_key_protects_nothing() {
        let mut p = PortInfo {
            m_key_protect_bits: 3,
            ..Default::default()
        };
        assert_eq!(
            check(&mut p, &mut Lease::default(), Method::Set, MKey(7), 0),
            MKeyCheck::Pass
        );
    }

    #[test]
    fn violations_count_and_saturate() {
        let (mut p, mut l) = (port(2, 0), Lease::default());
        p.m_key_violations = 0xFFFE;
        check(&mut p, &mut l, Method::Set, MKey(1), 0);
        check(&mut p, &mut l, Method::Set, MKey(1), 0);
        assert_eq!(p.m_key_violations, 0xFFFF);
        assert_eq!(l.expires_ms, None, "lease period 0: no lease");
    }

    #[test]
    fn the_lease_expires_and_a_valid_key_cancels_it() {
        let (mut p, mut l) = (port(2, 10), Lease::default());
        assert_eq!(
            check(&mut p, &mut l, Method::Get, MKey(1), 1_000),
            MKeyCheck::Violation
        );
        assert_eq!(l.expires_ms, Some(11_000));
        // A second violation does not restart it.
        check(&mut p, &mut l, Method::Get, MKey(1), 5_000);
        assert_eq!(l.expires_ms, Some(11_000));
        // Before expiry still protected; at expiry the protect bits go to 0.
        assert_eq!(
            check(&mut p, &mut l, Method::Get, MKey(1), 10_999),
            MKeyCheck::Violation
        );
        assert_eq!(
            check(&mut p, &mut l, Method::Get, MKey(1), 11_000),
            MKeyCheck::Pass
        );
        assert_eq!(p.m_key_protect_bits, 0);
        assert_eq!(p.m_key, MKey(0xAA), "the key itself is kept");
        // A valid key cancels a running lease.
        let (mut p, mut l) = (port(2, 10), Lease::default());
        check(&mut p, &mut l, Method::Set, MKey(1), 0);
        check(&mut p, &mut l, Method::Get, MKey(0xAA), 1);
        assert_eq!(l.expires_ms, None);
        assert_eq!(
            check(&mut p, &mut l, Method::Get, MKey(1), 20_000),
            MKeyCheck::Violation
        );
    }
}
