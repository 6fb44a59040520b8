//! ServiceRecord registration (IBA 15.2.5.14): services that hosts
//! register with the SA under a lease, found by any component, removed by
//! their owner's Delete or when the lease runs out.
//!
//! A record is named by its ServiceID, ServiceGID and ServiceP_Key (the
//! "RID"): a Set with a RID already held replaces that record and renews
//! its lease. A Set must select ServiceID and ServiceGID in its
//! ComponentMask; without ServiceLease the lease is indefinite; without
//! ServiceP_Key the record takes the default partition's full key, as
//! OpenSM does. The ServiceKey goes back only to a trusted requester (one
//! that presents the SA's SM_Key). A requester holds at most
//! [`MAX_PER_OWNER`] records and the SA at most [`MAX_SERVICES`], so a
//! host that registers in a loop cannot starve the others or grow the SA.

use crate::query::matches;
use alloc::vec::Vec;
use mad_core::sa::service::INDEFINITE_LEASE;
use mad_core::sa::{SaStatus, ServiceRecord};
use mad_core::Lid;

/// Records the SA holds at most.
pub const MAX_SERVICES: usize = 16384;
/// Records one requester (its port, by base LID) holds at most.
pub const MAX_PER_OWNER: usize = 256;

/// The ServiceRecord's size.
const SIZE: usize = ServiceRecord::SIZE;

/// The default partition's full-member P_Key.
const DEFAULT_PKEY: u16 = 0xFFFF;

/// The component bits a Set must carry (ServiceID, ServiceGID), and the
/// lease's and the P_Key's.
mod bit {
    pub const ID: u64 = 1 << 0;
    pub const GID: u64 = 1 << 1;
    pub const PKEY: u64 = 1 << 2;
    pub const LEASE: u64 = 1 << 4;
}

/// Byte ranges of the record.
mod at {
    use core::ops::Range;
    /// ServiceID, ServiceGID, ServiceP_Key: the RID.
    pub const RID: Range<usize> = 0..26;
    pub const PKEY: Range<usize> = 24..26;
    pub const LEASE: Range<usize> = 28..32;
    pub const KEY: Range<usize> = 32..48;
}

/// One registered service.
#[derive(Clone, Debug)]
struct Held {
    /// The record as it was set (its lease the one granted).
    rec: [u8; SIZE],
    /// Who set it.
    owner: Lid,
    /// When it lapses (`None`: never).
    expires_ms: Option<u64>,
    /// When it was set, on the SA's clock (before the SA started, for a
    /// record restored from an earlier SM's database).
    set_ms: i64,
    /// The set time on the wall clock (seconds since the epoch) that the
    /// earlier SM's database gave, for a restored record: written back
    /// as it was read.
    set_epoch_s: Option<u32>,
}

/// The services the SA holds.
#[derive(Clone, Debug, Default)]
pub struct Services {
    held: Vec<Held>,
}

impl Services {
    /// Records held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Registers (or renews) the record of a Set from `owner` with
    /// `mask`; the answer's record.
    pub fn set(
        &mut self,
        subnet: &smi::sm::Subnet,
        owner: Lid,
        data: &[u8],
        mask: u64,
        trusted: bool,
        now_ms: u64,
    ) -> Result<[u8; SIZE], SaStatus> {
        if mask & (bit::ID | bit::GID) != bit::ID | bit::GID {
            return Err(SaStatus::ReqInsufficientComponents);
        }
        let mut rec = [0u8; SIZE];
        rec.copy_from_slice(data.get(..SIZE).ok_or(SaStatus::ReqInvalid)?);
        if mask & bit::LEASE == 0 {
            rec[at::LEASE].copy_from_slice(&INDEFINITE_LEASE.to_be_bytes());
        }
        if mask & bit::PKEY == 0 {
            rec[at::PKEY].copy_from_slice(&DEFAULT_PKEY.to_be_bytes());
        }
        // The registering port must hold the service's partition
        // (without partitions, the default one only).
        let pkey = mad_core::PKey(u16::from_be_bytes([rec[24], rec[25]]));
        let holds = crate::path::end_by_lid(subnet, owner)
            .is_some_and(|e| crate::path::holds(subnet, &e, pkey));
        if !holds {
            return Err(SaStatus::ReqInvalid);
        }
        let lease = u32::from_be_bytes([rec[28], rec[29], rec[30], rec[31]]);
        let expires_ms =
            (lease != INDEFINITE_LEASE).then(|| now_ms.saturating_add(u64::from(lease) * 1000));
        let held = Held {
            rec,
            owner,
            expires_ms,
            set_ms: i64::try_from(now_ms).unwrap_or(i64::MAX),
            set_epoch_s: None,
        };
        match self
            .held
            .iter_mut()
            .find(|h| h.rec[at::RID] == rec[at::RID])
        {
            Some(h) => *h = held,
            None => {
                if self.held.len() >= MAX_SERVICES
                    || self.held.iter().filter(|h| h.owner == owner).count() >= MAX_PER_OWNER
                {
                    return Err(SaStatus::NoResources);
                }
                self.held.push(held);
            }
        }
        Ok(shown(&rec, lease, trusted))
    }

    /// Removes the record whose RID the Delete names; the removed record.
    pub fn delete(
        &mut self,
        data: &[u8],
        mask: u64,
        trusted: bool,
        now_ms: u64,
    ) -> Result<[u8; SIZE], SaStatus> {
        let q = data.get(..SIZE).ok_or(SaStatus::ReqInvalid)?;
        let mut rid = [0u8; 26];
        rid.copy_from_slice(&q[at::RID]);
        if mask & bit::PKEY == 0 {
            rid[24..26].copy_from_slice(&DEFAULT_PKEY.to_be_bytes());
        }
        let i = self
            .held
            .iter()
            .position(|h| h.rec[at::RID] == rid && h.live(now_ms))
            .ok_or(SaStatus::NoRecords)?;
        // A ServiceKey set at registration must be presented to delete,
        // unless the requester is trusted (IBA 15.2.5.14).
        let h = &self.held[i];
        if !trusted && h.rec[at::KEY] != [0; 16] && q[at::KEY] != h.rec[at::KEY] {
            return Err(SaStatus::ReqDenied);
        }
        let h = self.held.swap_remove(i);
        Ok(shown(&h.rec, h.left_s(now_ms), trusted))
    }

    /// The records that match `query` on the components of `mask`, with
    /// the lease each has left, at most `max` (past it, "no resources").
    pub fn find(
        &self,
        query: &[u8],
        mask: u64,
        trusted: bool,
        max: usize,
        now_ms: u64,
    ) -> Result<Vec<Vec<u8>>, SaStatus> {
        let mut out = Vec::new();
        for h in self.held.iter().filter(|h| h.live(now_ms)) {
            let rec = shown(&h.rec, h.left_s(now_ms), trusted);
            if matches::<ServiceRecord>(query, &rec, mask) {
                if out.len() >= max {
                    return Err(SaStatus::NoResources);
                }
                out.push(rec.to_vec());
            }
        }
        Ok(out)
    }

    /// Every live record as it was set (its lease field the lease
    /// granted), with when it was set on the wall clock (seconds since the
    /// epoch), at `now_ms` on the SA's clock, which is `epoch_s` on the
    /// wall clock: for the SA's database (`opensm-sa.dump`). A restored
    /// record keeps the set time its database gave.
    pub fn each(&self, now_ms: u64, epoch_s: u64) -> impl Iterator<Item = (&[u8; SIZE], u32)> + '_ {
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        (self.held.iter().filter(move |h| h.live(now_ms))).map(move |h| {
            let age_s = now.saturating_sub(h.set_ms).max(0) as u64 / 1000;
            let at = u32::try_from(epoch_s.saturating_sub(age_s)).unwrap_or(u32::MAX);
            (&h.rec, h.set_epoch_s.unwrap_or(at))
        })
    }

    /// Brings back a record an earlier SM held: `rec` as it was set (its
    /// lease field the lease granted), set at `set_epoch_s` on the wall
    /// clock, `age_ms` ago, owned by `owner` (the LID of its ServiceGID's
    /// port now, or 0). A record whose lease ran out, whose RID is held
    /// already, or past the SA's bound is not restored; why.
    pub fn restore(
        &mut self,
        rec: &[u8; SIZE],
        owner: Lid,
        (set_epoch_s, age_ms): (u32, u64),
        now_ms: u64,
    ) -> Result<(), &'static str> {
        let lease = u32::from_be_bytes([rec[28], rec[29], rec[30], rec[31]]);
        let expires_ms = if lease == INDEFINITE_LEASE {
            None
        } else {
            let left = (u64::from(lease) * 1000)
                .checked_sub(age_ms)
                .filter(|&l| l > 0);
            Some(now_ms.saturating_add(left.ok_or("its lease ran out")?))
        };
        if self.held.iter().any(|h| h.rec[at::RID] == rec[at::RID]) {
            return Err("a record with its ServiceID, GID and P_Key is held already");
        }
        if self.held.len() >= MAX_SERVICES {
            return Err("the SA holds its most records");
        }
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        self.held.push(Held {
            rec: *rec,
            owner,
            expires_ms,
            set_ms: now.saturating_sub(i64::try_from(age_ms).unwrap_or(i64::MAX)),
            set_epoch_s: Some(set_epoch_s),
        });
        Ok(())
    }

    /// Drops the records whose lease ran out by `now_ms`; how many.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let before = self.held.len();
        self.held.retain(|h| h.live(now_ms));
        before - self.held.len()
    }

    /// When the next lease runs out.
    pub fn next_expiry(&self) -> Option<u64> {
        self.held.iter().filter_map(|h| h.expires_ms).min()
    }
}

impl Held {
    /// Its lease has not run out at `now_ms`.
    fn live(&self, now_ms: u64) -> bool {
        self.expires_ms.is_none_or(|t| t > now_ms)
    }

    /// The seconds of lease left (rounded up), or the indefinite lease.
    fn left_s(&self, now_ms: u64) -> u32 {
        match self.expires_ms {
            None => INDEFINITE_LEASE,
            Some(t) => u32::try_from(t.saturating_sub(now_ms).div_ceil(1000)).unwrap_or(u32::MAX),
        }
    }
}

/// The record as a requester sees it: the lease left, and the ServiceKey
/// zeroed unless it is trusted.
fn shown(rec: &[u8; SIZE], lease: u32, trusted: bool) -> [u8; SIZE] {
    let mut r = *rec;
    r[at::LEASE].copy_from_slice(&lease.to_be_bytes());
    if !trusted {
        r[at::KEY].fill(0);
    }
    r
}
