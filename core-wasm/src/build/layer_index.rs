//! The builder's two ways of finding an earlier layer for a new op (recurrence detection): by
//! the op's site, and by its structure (module, function, output slot and the layers of its
//! parents) for a loop written in the forward itself.
//!
//! Both keys are facts the layer's first op already holds, so the indexes keep only layer
//! numbers and read a candidate's key back from the trace to compare: 5 bytes a slot (a `u32`
//! and hashbrown's control byte) instead of 21 for a map from `SiteKey` and 29 for one from the
//! structural key. They hold an entry per layer, which in a long loop is an entry per op, and
//! in the component their high-water mark stays resident (linear memory never shrinks).

use crate::model::{Edges, SiteKey, Trace};
use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use smallvec::SmallVec;
use std::hash::BuildHasher;

/// Identity of an op for structural grouping: where it ran, what it did, and which layers fed it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StructuralKey {
    pub module: u32,
    pub func: u32,
    pub output_slot: u32,
    pub parent_layers: SmallVec<[u32; 2]>,
}

impl StructuralKey {
    /// The key of an op at `site` reading `parents`.
    pub fn of(trace: &Trace, site: &SiteKey, parents: &Edges) -> Self {
        Self {
            module: site.module,
            func: site.func,
            output_slot: site.output_slot,
            parent_layers: parents
                .iter()
                .map(|edge| {
                    trace
                        .ops
                        .get(edge.op as usize)
                        .map_or(u32::MAX, |op| op.layer)
                })
                .collect(),
        }
    }
}

fn hash<T: std::hash::Hash>(key: &T) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// The first op of `layer`'s site (the key it was indexed under).
fn first_site(trace: &Trace, layer: u32) -> Option<SiteKey> {
    let first = *trace.layers.get(layer as usize)?.ops.first()?;
    Some(trace.ops.get(first as usize)?.site())
}

/// The structural key of `layer`'s first op.
fn first_structure(trace: &Trace, layer: u32) -> Option<StructuralKey> {
    let first = *trace.layers.get(layer as usize)?.ops.first()?;
    let op = trace.ops.get(first as usize)?;
    Some(StructuralKey::of(trace, &op.site(), &op.parents))
}

/// Layers by the site of their first op.
#[derive(Default)]
pub struct SiteLayers(HashTable<u32>);

impl SiteLayers {
    /// The layer whose first op ran at `site`.
    pub fn get(&self, trace: &Trace, site: &SiteKey) -> Option<u32> {
        self.0
            .find(hash(site), |&layer| {
                first_site(trace, layer).as_ref() == Some(site)
            })
            .copied()
    }

    /// Indexes `layer` under `site` (its first op, about to be added, runs there).
    pub fn insert(&mut self, trace: &Trace, site: &SiteKey, layer: u32) {
        self.0.insert_unique(hash(site), layer, |&layer| {
            first_site(trace, layer).map_or(0, |site| hash(&site))
        });
    }

    /// Room for `additional` more layers without growing.
    pub fn reserve(&mut self, trace: &Trace, additional: usize) {
        self.0.reserve(additional, |&layer| {
            first_site(trace, layer).map_or(0, |site| hash(&site))
        });
    }
}

/// Layers by the structural key of their first op.
#[derive(Default)]
pub struct StructuralLayers(HashTable<u32>);

impl StructuralLayers {
    /// The layer whose first op has the structural key `key`.
    pub fn get(&self, trace: &Trace, key: &StructuralKey) -> Option<u32> {
        self.0
            .find(hash(key), |&layer| {
                first_structure(trace, layer).as_ref() == Some(key)
            })
            .copied()
    }

    /// Indexes `layer` under `key` (its first op, about to be added, has it), in place of an
    /// earlier layer with the same key: the newest such layer is the one a later op continues.
    pub fn insert(&mut self, trace: &Trace, key: &StructuralKey, layer: u32) {
        let key_hash = hash(key);
        let earlier = self.0.find_mut(key_hash, |&earlier| {
            first_structure(trace, earlier).as_ref() == Some(key)
        });
        match earlier {
            Some(earlier) => *earlier = layer,
            None => {
                self.0.insert_unique(key_hash, layer, |&layer| {
                    first_structure(trace, layer).map_or(0, |key| hash(&key))
                });
            }
        }
    }
}
