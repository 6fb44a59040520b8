//! A directed-route path: the port numbers an SMP leaves by, hop by hop.
//! It cannot hold more than 63 hops (IBA C14-6), by construction.

use crate::error::Error;
use heapless::Vec;

/// Up to 63 egress port numbers; entry `i` is the path's hop `i + 1`
/// (InitialPath[i + 1] in the SMP).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct DrPath(Vec<u8, 63>);

impl DrPath {
    /// The longest path an SMP can carry.
    pub const MAX_HOPS: usize = 63;

    /// An empty path (hop count 0: the SM's own port).
    pub const fn new() -> Self {
        DrPath(Vec::new())
    }
    /// A path from port numbers, refusing more than 63 hops.
    pub fn from_ports(ports: &[u8]) -> Result<Self, Error> {
        Vec::from_slice(ports)
            .map(DrPath)
            .map_err(|_| Error::PathTooLong { hops: ports.len() })
    }
    /// Appends a hop.
    pub fn push(&mut self, port: u8) -> Result<(), Error> {
        self.0.push(port).map_err(|_| Error::PathTooLong {
            hops: Self::MAX_HOPS + 1,
        })
    }
    /// A new path with one more hop.
    pub fn extended(&self, port: u8) -> Result<Self, Error> {
        let mut p = self.clone();
        p.push(port)?;
        Ok(p)
    }
    /// Number of hops.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True for the zero-hop path.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The hops as port numbers.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }
    /// The hop count for the SMP header.
    pub fn hop_count(&self) -> u8 {
        self.0.len() as u8
    }
}

impl core::fmt::Debug for DrPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DrPath{:?}", self.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_63_hops_and_not_64() {
        let p = DrPath::from_ports(&[1; 63]).unwrap();
        assert_eq!(p.hop_count(), 63);
        assert_eq!(
            DrPath::from_ports(&[1; 64]),
            Err(Error::PathTooLong { hops: 64 })
        );
        assert!(p.extended(2).is_err());
        assert_eq!(DrPath::new().extended(7).unwrap().as_slice(), &[7]);
    }
}
