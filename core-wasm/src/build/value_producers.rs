//! Which op or parameter produced each adapter value, as the builder resolves arguments.
//!
//! Every op the builder appends produces a value (except an output op, which repeats its
//! producer's), so this index holds an entry per op. The op already carries its value id
//! ([`Op::value`](crate::model::Op::value)), so the index keeps only op ids and reads a
//! candidate's value back from the trace to compare, as the layer indexes do
//! (`layer_index.rs`): 5 bytes a slot (a `u32` and hashbrown's control byte) instead of 17 for
//! a map from the value id to the producer. In the component the high-water mark of a growing
//! table (the old one and the new one while it rehashes) stays resident, so on a long trace this
//! is about 20 bytes per op less. Parameters, a model's few hundred, keep a map of their own.

use super::Producer;
use crate::events::TensorId;
use crate::model::{OpId, Trace};
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::hash::BuildHasher;

fn hash(value: TensorId) -> u64 {
    FxBuildHasher.hash_one(value)
}

/// The value `op` produced (`None` for an id past the trace or an op without one).
fn value_of(trace: &Trace, op: OpId) -> Option<TensorId> {
    trace.ops.get(op as usize)?.value()
}

/// The producer of each value reported so far; a value reported again (an adapter may reuse an
/// id) names its latest producer.
#[derive(Default)]
pub struct ValueProducers {
    /// Op ids, keyed by the value each carries in `trace`.
    ops: HashTable<OpId>,
    /// Parameter value id → index into `Trace::params`.
    params: FxHashMap<TensorId, u32>,
}

impl ValueProducers {
    /// What produced `value`.
    pub fn get(&self, trace: &Trace, value: TensorId) -> Option<Producer> {
        if let Some(&op) = self
            .ops
            .find(hash(value), |&op| value_of(trace, op) == Some(value))
        {
            return Some(Producer::Op(op));
        }
        self.params.get(&value).map(|&index| Producer::Param(index))
    }

    /// Records that `op` (already in `trace`, carrying `value`) produced `value`, in place of
    /// any earlier producer.
    pub fn insert_op(&mut self, trace: &Trace, value: TensorId, op: OpId) {
        debug_assert_eq!(value_of(trace, op), Some(value));
        if !self.params.is_empty() {
            self.params.remove(&value);
        }
        // One probe: the slot of an earlier producer of `value`, or where it goes.
        match self.ops.entry(
            hash(value),
            |&earlier| value_of(trace, earlier) == Some(value),
            |&op| value_of(trace, op).map_or(0, hash),
        ) {
            Entry::Occupied(mut earlier) => *earlier.get_mut() = op,
            Entry::Vacant(slot) => {
                slot.insert(op);
            }
        }
    }

    /// Records that parameter `index` is the value `value`, in place of any earlier producer.
    pub fn insert_param(&mut self, trace: &Trace, value: TensorId, index: u32) {
        if let Ok(earlier) = self
            .ops
            .find_entry(hash(value), |&op| value_of(trace, op) == Some(value))
        {
            earlier.remove();
        }
        self.params.insert(value, index);
    }

    /// Room for `additional` more ops without growing.
    pub fn reserve(&mut self, trace: &Trace, additional: usize) {
        self.ops
            .reserve(additional, |&op| value_of(trace, op).map_or(0, hash));
    }
}
