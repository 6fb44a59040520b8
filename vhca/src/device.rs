//! The HCA behind the backend. The backend checks every guest request
//! first and then asks the device for the resource; the device hands out
//! the numbers hardware would (QP numbers, memory keys, UAR pages).
//!
//! [`SoftHca`] is the embedded default. So far it does the resource side
//! only: it numbers and counts what is created, so a test can see that
//! nothing leaks. Its data path (work requests, completions, doorbells) is
//! not written yet.

use crate::proto::QpType;

/// Device attributes a guest may see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceAttr {
    /// Node GUID.
    pub node_guid: u64,
    /// Most QPs.
    pub max_qp: u32,
    /// Most CQs.
    pub max_cq: u32,
    /// Most MRs.
    pub max_mr: u32,
}

/// What the device refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// Out of a resource.
    Exhausted,
}

/// What a device creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Object {
    /// A protection domain.
    Pd,
    /// A memory region of `len` bytes.
    Mr {
        /// Bytes.
        len: u64,
    },
    /// A completion queue.
    Cq {
        /// Entries.
        cqe: u32,
    },
    /// A queue pair.
    Qp {
        /// Transport.
        qp_type: QpType,
    },
    /// A doorbell page.
    Uar,
}

/// An HCA the backend drives.
pub trait Device {
    /// The device's attributes.
    fn attr(&self) -> DeviceAttr;
    /// Creates `obj`; its device number (PD number, memory key, CQ number,
    /// QP number, UAR page index).
    fn create(&mut self, obj: Object) -> Result<u32, DeviceError>;
    /// Destroys what `create` numbered `id`.
    fn destroy(&mut self, obj: Object, id: u32);
}

/// The software HCA: numbers resources and counts them.
#[derive(Debug)]
pub struct SoftHca {
    attr: DeviceAttr,
    next: u32,
    live: std::collections::BTreeMap<u32, Object>,
}

impl SoftHca {
    /// A software HCA with node GUID `guid`.
    pub fn new(guid: u64) -> SoftHca {
        SoftHca {
            attr: DeviceAttr {
                node_guid: guid,
                max_qp: 1 << 16,
                max_cq: 1 << 16,
                max_mr: 1 << 20,
            },
            // QP numbers 0 and 1 are the special QPs.
            next: 2,
            live: Default::default(),
        }
    }

    /// Resources alive on the device.
    pub fn live(&self) -> usize {
        self.live.len()
    }
}

impl Device for SoftHca {
    fn attr(&self) -> DeviceAttr {
        self.attr
    }

    fn create(&mut self, obj: Object) -> Result<u32, DeviceError> {
        if self.next >= 1 << 24 {
            return Err(DeviceError::Exhausted);
        }
        let id = self.next;
        self.next += 1;
        self.live.insert(id, obj);
        Ok(id)
    }

    fn destroy(&mut self, _obj: Object, id: u32) {
        self.live.remove(&id);
    }
}
