//! Resource tables whose handles carry the entry's generation, and whose
//! entries carry their owner: a handle resolves only for the domain that
//! owns it, and only until the entry is freed. A stale handle, another
//! domain's handle and a made-up one are refused the same way.

use crate::proto::Handle;

/// The domain (guest) a resource belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DomainId(pub u32);

struct Slot<T> {
    generation: u32,
    entry: Option<(DomainId, T)>,
}

/// A table of `T` by [`Handle`].
pub struct Table<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Table<T> {
    /// Adds `value` owned by `owner`; its handle.
    pub fn insert(&mut self, owner: DomainId, value: T) -> Handle {
        match self.free.pop() {
            Some(i) => {
                let s = &mut self.slots[i as usize - 1];
                s.entry = Some((owner, value));
                Handle::new(i, s.generation)
            }
            None => {
                self.slots.push(Slot {
                    generation: 1,
                    entry: Some((owner, value)),
                });
                Handle::new(self.slots.len() as u32, 1)
            }
        }
    }

    fn slot(&self, h: Handle) -> Option<&Slot<T>> {
        let i = h.index().checked_sub(1)?;
        self.slots
            .get(i as usize)
            .filter(|s| s.generation == h.generation())
    }

    /// The entry `h` names, if `owner` owns it.
    pub fn get(&self, owner: DomainId, h: Handle) -> Option<&T> {
        match &self.slot(h)?.entry {
            Some((o, v)) if *o == owner => Some(v),
            _ => None,
        }
    }

    /// The same, mutable.
    pub fn get_mut(&mut self, owner: DomainId, h: Handle) -> Option<&mut T> {
        let i = h.index().checked_sub(1)? as usize;
        let s = self.slots.get_mut(i)?;
        if s.generation != h.generation() {
            return None;
        }
        match &mut s.entry {
            Some((o, v)) if *o == owner => Some(v),
            _ => None,
        }
    }

    /// Removes the entry `h` names, if `owner` owns it; the next entry in
    /// its slot gets a new generation, so `h` never resolves again.
    pub fn remove(&mut self, owner: DomainId, h: Handle) -> Option<T> {
        self.get(owner, h)?;
        let i = h.index() as usize - 1;
        let s = &mut self.slots[i];
        let (_, v) = s.entry.take()?;
        s.generation = s.generation.wrapping_add(1).max(1);
        self.free.push(h.index());
        Some(v)
    }

    /// Handles of `owner`'s entries.
    pub fn owned_by(&self, owner: DomainId) -> Vec<Handle> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(&s.entry, Some((o, _)) if *o == owner))
            .map(|(i, s)| Handle::new(i as u32 + 1, s.generation))
            .collect()
    }

    /// Every live entry, with its owner.
    pub fn iter(&self) -> impl Iterator<Item = (DomainId, &T)> {
        self.slots
            .iter()
            .filter_map(|s| s.entry.as_ref().map(|(o, v)| (*o, v)))
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// No live entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_resolve_for_their_owner_until_freed() {
        let (a, b) = (DomainId(1), DomainId(2));
        let mut t = Table::default();
        let h = t.insert(a, "x");
        assert_eq!(t.get(a, h), Some(&"x"));
        assert_eq!(t.get(b, h), None, "another domain's handle");
        assert_eq!(t.remove(b, h), None);
        assert_eq!(t.remove(a, h), Some("x"));
        assert_eq!(t.get(a, h), None, "stale");
        // The slot is reused with a new generation: the old handle stays
        // dead.
        let h2 = t.insert(a, "y");
        assert_eq!(h2.index(), h.index());
        assert_ne!(h2, h);
        assert_eq!(t.get(a, h), None);
        assert_eq!(t.get(a, h2), Some(&"y"));
        assert_eq!(t.get(a, Handle::new(99, 1)), None, "made up");
        assert_eq!(t.get(a, Handle::new(0, 1)), None);
        assert_eq!(t.owned_by(a), vec![h2]);
        assert!(t.owned_by(b).is_empty());
    }
}
