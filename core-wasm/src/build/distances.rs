//! Hop distances to inputs and outputs, and the input-ancestor / output-descendant sets.
//!
//! Capture order is topological (parents precede children), so one forward sweep gives the
//! distances from inputs and one backward sweep the distances to outputs: O(ops + edges). The
//! ancestor sets are over inputs and outputs only (few of them), kept as bitsets during the sweep.

use crate::model::{Distances, OpId, Trace};

/// A bitset over a small set of boundary ops (inputs or outputs).
#[derive(Clone)]
struct BoundarySet {
    words: Vec<u64>,
}

impl BoundarySet {
    fn new(bits: usize) -> Self {
        Self {
            words: vec![0; bits.div_ceil(64)],
        }
    }
    fn insert(&mut self, bit: usize) {
        self.words[bit / 64] |= 1 << (bit % 64);
    }
    fn union_with(&mut self, other: &BoundarySet) {
        for (word, other_word) in self.words.iter_mut().zip(&other.words) {
            *word |= other_word;
        }
    }
    fn members<'a>(&'a self, ids: &'a [OpId]) -> impl Iterator<Item = OpId> + 'a {
        ids.iter()
            .enumerate()
            .filter(|(bit, _)| self.words[bit / 64] & (1 << (bit % 64)) != 0)
            .map(|(_, id)| *id)
    }
}

/// Min/max hops along one direction; `None` = unreachable.
#[derive(Clone, Copy, Default)]
struct HopRange {
    min: Option<u32>,
    max: Option<u32>,
}

impl HopRange {
    fn extend_from(&mut self, neighbour: HopRange) {
        if let (Some(min), Some(max)) = (neighbour.min, neighbour.max) {
            self.min = Some(self.min.map_or(min + 1, |current| current.min(min + 1)));
            self.max = Some(self.max.map_or(max + 1, |current| current.max(max + 1)));
        }
    }
}

/// Fills `distances`, `input_ancestors` and `output_descendants` of every op.
pub fn compute(trace: &mut Trace) {
    let count = trace.ops.len();
    let inputs = trace.inputs.clone();
    let outputs = trace.outputs.clone();

    let mut from_input = vec![HopRange::default(); count];
    let mut ancestors = vec![BoundarySet::new(inputs.len()); count];
    for (bit, &input) in inputs.iter().enumerate() {
        from_input[input as usize] = HopRange {
            min: Some(0),
            max: Some(0),
        };
        ancestors[input as usize].insert(bit);
    }
    for index in 0..count {
        for parent_index in 0..trace.ops[index].parents.len() {
            let parent = trace.ops[index].parents[parent_index].op as usize;
            if parent >= index {
                continue;
            }
            let (before, after) = ancestors.split_at_mut(index);
            after[0].union_with(&before[parent]);
            let parent_range = from_input[parent];
            from_input[index].extend_from(parent_range);
        }
    }

    let mut to_output = vec![HopRange::default(); count];
    let mut descendants = vec![BoundarySet::new(outputs.len()); count];
    for (bit, &output) in outputs.iter().enumerate() {
        to_output[output as usize] = HopRange {
            min: Some(0),
            max: Some(0),
        };
        descendants[output as usize].insert(bit);
    }
    for index in (0..count).rev() {
        for child_index in 0..trace.ops[index].children.len() {
            let child = trace.ops[index].children[child_index].op as usize;
            if child <= index {
                continue;
            }
            let (before, after) = descendants.split_at_mut(child);
            before[index].union_with(&after[0]);
            let child_range = to_output[child];
            to_output[index].extend_from(child_range);
        }
    }

    for (index, op) in trace.ops.iter_mut().enumerate() {
        op.set_distances(Some(Distances {
            min_from_input: from_input[index].min,
            max_from_input: from_input[index].max,
            min_to_output: to_output[index].min,
            max_to_output: to_output[index].max,
        }));
        op.input_ancestors = ancestors[index].members(&inputs).collect();
        op.output_descendants = descendants[index].members(&outputs).collect();
    }
}
