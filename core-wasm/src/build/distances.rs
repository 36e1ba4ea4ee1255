//! Hop distances to inputs and outputs, and the input-ancestor / output-descendant sets.
//!
//! Capture order is topological (parents precede children), so one forward sweep gives the
//! distances from inputs and one backward sweep the distances to outputs: O(ops + edges). The
//! ancestor sets are over inputs and outputs only (few of them), kept as bitsets during the sweep.
//!
//! The sweeps' working state is a few flat arrays, not a record per op: a bitset per op as its
//! own `Vec` and two `Option<u32>` pairs per op held 80-odd bytes per op at once, and in the
//! component that peak stays resident (linear memory never shrinks). Here it is the bits of every
//! op in one array (8 bytes per op for up to 64 inputs), freed once its sets are written, and a
//! hop range of two `u32`s per direction.

use crate::model::{Distances, InputOutputReach, OpId, SharedReaches, Trace};

/// One bitset per op over a small set of boundary ops (inputs or outputs), all in one array.
struct BoundarySets {
    /// `u64` words per op.
    stride: usize,
    words: Vec<u64>,
}

impl BoundarySets {
    fn new(ops: usize, bits: usize) -> Self {
        let stride = bits.div_ceil(64);
        Self {
            stride,
            words: vec![0; ops * stride],
        }
    }

    fn insert(&mut self, op: usize, bit: usize) {
        self.words[op * self.stride + bit / 64] |= 1 << (bit % 64);
    }

    /// Adds `from`'s members to `into`'s.
    fn union_into(&mut self, into: usize, from: usize) {
        for word in 0..self.stride {
            let other = self.words[from * self.stride + word];
            self.words[into * self.stride + word] |= other;
        }
    }

    /// The boundary ops (`ids`, by bit) in `op`'s set.
    fn members<'a>(&'a self, op: usize, ids: &'a [OpId]) -> impl Iterator<Item = OpId> + 'a {
        let words = &self.words[op * self.stride..(op + 1) * self.stride];
        ids.iter()
            .enumerate()
            .filter(move |(bit, _)| words[bit / 64] & (1 << (bit % 64)) != 0)
            .map(|(_, id)| *id)
    }
}

/// Min/max hops along one direction, [`HopRange::UNREACHED`] in both where no path exists.
#[derive(Clone, Copy)]
struct HopRange {
    min: u32,
    max: u32,
}

impl HopRange {
    /// No path (a real hop count stays far below it: a trace has fewer than `u32::MAX` ops).
    const UNREACHED: u32 = u32::MAX;
    const NONE: Self = Self {
        min: Self::UNREACHED,
        max: Self::UNREACHED,
    };
    const BOUNDARY: Self = Self { min: 0, max: 0 };

    fn extend_from(&mut self, neighbour: HopRange) {
        if neighbour.min == Self::UNREACHED {
            return;
        }
        if self.min == Self::UNREACHED {
            *self = Self {
                min: neighbour.min + 1,
                max: neighbour.max + 1,
            };
        } else {
            self.min = self.min.min(neighbour.min + 1);
            self.max = self.max.max(neighbour.max + 1);
        }
    }

    fn min(self) -> Option<u32> {
        (self.min != Self::UNREACHED).then_some(self.min)
    }

    fn max(self) -> Option<u32> {
        (self.max != Self::UNREACHED).then_some(self.max)
    }
}

/// Fills `distances`, `input_ancestors` and `output_descendants` of every op.
pub fn compute(trace: &mut Trace) {
    let count = trace.ops.len();
    let inputs = trace.inputs.clone();
    let outputs = trace.outputs.clone();

    let mut from_input = vec![HopRange::NONE; count];
    let mut ancestors = BoundarySets::new(count, inputs.len());
    for (bit, &input) in inputs.iter().enumerate() {
        from_input[input as usize] = HopRange::BOUNDARY;
        ancestors.insert(input as usize, bit);
    }
    for index in 0..count {
        for parent_index in 0..trace.ops[index].parents.len() {
            let parent = trace.ops[index].parents[parent_index].op as usize;
            if parent >= index {
                continue;
            }
            ancestors.union_into(index, parent);
            let parent_range = from_input[parent];
            from_input[index].extend_from(parent_range);
        }
    }
    // Each op keeps its ancestor set (shared, so no copy per op) until its descendants are
    // known; then it is given the shared pair.
    let mut ancestor_sets = SharedReaches::default();
    for (index, op) in trace.ops.iter_mut().enumerate() {
        op.set_reach(ancestor_sets.share_reach(&InputOutputReach {
            input_ancestors: ancestors.members(index, &inputs).collect(),
            output_descendants: Default::default(),
        }));
    }
    drop(ancestors);

    let mut to_output = vec![HopRange::NONE; count];
    let mut descendants = BoundarySets::new(count, outputs.len());
    for (bit, &output) in outputs.iter().enumerate() {
        to_output[output as usize] = HopRange::BOUNDARY;
        descendants.insert(output as usize, bit);
    }
    for index in (0..count).rev() {
        for child_index in 0..trace.ops[index].children.len() {
            let child = trace.ops[index].children[child_index].op as usize;
            if child <= index {
                continue;
            }
            descendants.union_into(index, child);
            let child_range = to_output[child];
            to_output[index].extend_from(child_range);
        }
    }

    let mut reaches = SharedReaches::default();
    for (index, op) in trace.ops.iter_mut().enumerate() {
        let reach = InputOutputReach {
            input_ancestors: op.input_ancestors().into(),
            output_descendants: descendants.members(index, &outputs).collect(),
        };
        op.set_reach(reaches.share_reach(&reach));
        op.set_distances(Some(Distances {
            min_from_input: from_input[index].min(),
            max_from_input: from_input[index].max(),
            min_to_output: to_output[index].min(),
            max_to_output: to_output[index].max(),
        }));
    }
}
