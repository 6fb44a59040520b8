//! The SL-to-VL tables the SM last saw each port hold, kept small: on a
//! switch that takes one Set for every (input, output) pair (optimized
//! SL-to-VL programming) one table stands for all of them, and otherwise
//! a switch's tables sit in one dense array, eight bytes a pair (two VLs
//! a byte). A `BTreeMap` entry a pair cost about 40 bytes: 87 MB for the
//! 2.17 M pairs of fat-tree-11664.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::ops::RangeInclusive;

/// Sixteen VLs (0–15), two a byte.
type Packed = [u8; 8];

fn pack(t: &[u8; 16]) -> Packed {
    core::array::from_fn(|i| (t[2 * i] & 0x0F) << 4 | (t[2 * i + 1] & 0x0F))
}

fn unpack(p: &Packed) -> [u8; 16] {
    core::array::from_fn(|i| {
        let b = p[i / 2];
        if i % 2 == 0 {
            b >> 4
        } else {
            b & 0x0F
        }
    })
}

/// One node's tables.
#[derive(Clone, Debug, PartialEq, Eq)]
enum NodeTables {
    /// One table for every (input, output) of the two ranges.
    Uniform {
        ins: RangeInclusive<u8>,
        outs: RangeInclusive<u8>,
        table: Packed,
    },
    /// `width` × `width` pairs, (input, output) at `input * width +
    /// output`; `known` says which hold a table.
    Dense {
        width: usize,
        known: Vec<bool>,
        tables: Vec<Packed>,
    },
}

impl NodeTables {
    fn get(&self, x: u8, o: u8) -> Option<Packed> {
        match self {
            NodeTables::Uniform { ins, outs, table } => {
                (ins.contains(&x) && outs.contains(&o)).then_some(*table)
            }
            NodeTables::Dense {
                width,
                known,
                tables,
            } => {
                let (x, o) = (usize::from(x), usize::from(o));
                let at = x.checked_mul(*width)? + o;
                (x < *width && o < *width && known.get(at) == Some(&true)).then(|| tables[at])
            }
        }
    }

    /// Every (input, output, table) held, inputs then outputs ascending.
    fn pairs(&self) -> Vec<(u8, u8, Packed)> {
        match self {
            NodeTables::Uniform { ins, outs, table } => ins
                .clone()
                .flat_map(|x| outs.clone().map(move |o| (x, o, *table)))
                .collect(),
            NodeTables::Dense {
                width,
                known,
                tables,
            } => (0..known.len())
                .filter(|&at| known[at])
                .map(|at| ((at / width) as u8, (at % width) as u8, tables[at]))
                .collect(),
        }
    }

    /// The same pairs in a dense array at least `width` wide.
    fn dense(&self, width: usize) -> NodeTables {
        let width = match self {
            NodeTables::Uniform { ins, outs, .. } => width
                .max(usize::from(*ins.end()) + 1)
                .max(usize::from(*outs.end()) + 1),
            NodeTables::Dense { width: w, .. } => width.max(*w),
        };
        let mut known = alloc::vec![false; width * width];
        let mut tables = alloc::vec![[0u8; 8]; width * width];
        for (x, o, t) in self.pairs() {
            let at = usize::from(x) * width + usize::from(o);
            known[at] = true;
            tables[at] = t;
        }
        NodeTables::Dense {
            width,
            known,
            tables,
        }
    }
}

/// The SL-to-VL tables of every node the SM has seen answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Sl2VlCache {
    nodes: BTreeMap<usize, NodeTables>,
}

impl Sl2VlCache {
    /// Node `node` holds `table` for every (input, output) of `ins` ×
    /// `outs`.
    pub(super) fn set(
        &mut self,
        node: usize,
        ins: RangeInclusive<u8>,
        outs: RangeInclusive<u8>,
        table: &[u8; 16],
    ) {
        if ins.is_empty() || outs.is_empty() {
            return;
        }
        let table = pack(table);
        let covers = |a: &RangeInclusive<u8>, b: &RangeInclusive<u8>| {
            a.start() <= b.start() && b.end() <= a.end()
        };
        match self.nodes.get_mut(&node) {
            // New, or every pair it held written again: one table.
            None => {
                self.nodes
                    .insert(node, NodeTables::Uniform { ins, outs, table });
            }
            Some(NodeTables::Uniform {
                ins: i0, outs: o0, ..
            }) if covers(&ins, i0) && covers(&outs, o0) => {
                self.nodes
                    .insert(node, NodeTables::Uniform { ins, outs, table });
            }
            Some(n) => {
                let need = usize::from(*ins.end().max(outs.end())) + 1;
                let fits = matches!(n, NodeTables::Dense { width, .. } if *width >= need);
                if !fits {
                    // Laid out again (once, or when a port past the
                    // width appears), then written in place.
                    *n = n.dense(need);
                }
                if let NodeTables::Dense {
                    width,
                    known,
                    tables,
                } = n
                {
                    for x in ins {
                        for o in outs.clone() {
                            let at = usize::from(x) * *width + usize::from(o);
                            known[at] = true;
                            tables[at] = table;
                        }
                    }
                }
            }
        }
    }

    /// The table node `node` holds for (`input`, `output`), if known.
    pub(super) fn get(&self, node: usize, input: u8, output: u8) -> Option<[u8; 16]> {
        self.nodes
            .get(&node)?
            .get(input, output)
            .map(|p| unpack(&p))
    }

    /// Forgets node `node`.
    pub(super) fn forget(&mut self, node: usize) {
        self.nodes.remove(&node);
    }

    /// The nodes with a table.
    pub(super) fn nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.keys().copied()
    }

    /// Every (node, input, output, table), in that order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, u8, u8, [u8; 16])> + '_ {
        (self.nodes.iter())
            .flat_map(|(&n, t)| (t.pairs().into_iter()).map(move |(x, o, p)| (n, x, o, unpack(&p))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_table_stands_for_a_switch_until_a_pair_differs() {
        let a: [u8; 16] = core::array::from_fn(|i| i as u8);
        let b = [15u8; 16];
        let mut c = Sl2VlCache::default();
        c.set(3, 0..=36, 1..=36, &a);
        assert!(matches!(c.nodes[&3], NodeTables::Uniform { .. }));
        assert_eq!(c.get(3, 0, 1), Some(a));
        assert_eq!(c.get(3, 36, 36), Some(a));
        assert_eq!(c.get(3, 1, 0), None);
        assert_eq!(c.get(3, 37, 1), None);
        assert_eq!(c.iter().count(), 37 * 36);
        // Written all again: still one.
        c.set(3, 0..=36, 1..=36, &b);
        assert!(matches!(c.nodes[&3], NodeTables::Uniform { .. }));
        assert_eq!(c.get(3, 5, 5), Some(b));
        // One pair differs: dense, the others kept.
        c.set(3, 2..=2, 7..=7, &a);
        assert!(matches!(c.nodes[&3], NodeTables::Dense { .. }));
        assert_eq!(c.get(3, 2, 7), Some(a));
        assert_eq!(c.get(3, 2, 8), Some(b));
        assert_eq!(c.get(3, 1, 0), None);
        assert_eq!(c.iter().count(), 37 * 36);
        let pairs: Vec<_> = c.iter().map(|(n, x, o, _)| (n, x, o)).collect();
        assert!(pairs.windows(2).all(|w| w[0] < w[1]), "in order");
        // A CA: input 0, its port as output.
        c.set(9, 0..=0, 1..=1, &b);
        assert_eq!(c.get(9, 0, 1), Some(b));
        assert_eq!(c.nodes().collect::<Vec<_>>(), [3, 9]);
        c.forget(3);
        assert_eq!(c.get(3, 2, 8), None);
        assert_eq!(c.iter().count(), 1);
    }

    #[test]
    fn pair_by_pair_fills_a_dense_table_that_grows() {
        let mut c = Sl2VlCache::default();
        let t = |v: u8| [v; 16];
        for x in 0..=4u8 {
            for o in 1..=4u8 {
                c.set(1, x..=x, o..=o, &t(x + o));
            }
        }
        c.set(1, 9..=9, 9..=9, &t(1));
        for x in 0..=4u8 {
            for o in 1..=4u8 {
                assert_eq!(c.get(1, x, o), Some(t(x + o)));
            }
        }
        assert_eq!(c.get(1, 9, 9), Some(t(1)));
        assert_eq!(c.get(1, 8, 9), None);
        assert_eq!(c.iter().count(), 21);
        assert_eq!(
            unpack(&pack(&core::array::from_fn(|i| i as u8))),
            core::array::from_fn(|i| i as u8)
        );
    }
}
