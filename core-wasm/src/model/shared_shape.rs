//! One shared copy of each shape the ops of a trace repeat.
//!
//! A model's ops have few distinct shapes (every op of a loop, every activation of a block), yet
//! an inline shape took 48 bytes of each op record on wasm32 (room for four dimensions, a
//! capacity and a tag). An op points at its shape instead (`Arc<[u64]>`, 8 bytes on wasm32),
//! one copy per distinct shape. The wire form is unchanged: a shape serializes as the same
//! sequence of dimensions either way.

use super::{Interner, Trace};
use std::sync::Arc;

/// An op's shape, shared with every op of the trace that has the same one.
pub type SharedShape = Arc<[u64]>;

/// The distinct shapes seen so far.
pub type SharedShapes = Interner<[u64]>;

/// Makes `trace` keep one copy of each repeated shape, as a trace built from events does (a
/// decoded trace has a copy per op).
pub fn share_repeated_shapes(trace: &mut Trace) {
    let mut shapes = SharedShapes::default();
    for op in &mut trace.ops {
        op.shape = shapes.share(&op.shape);
    }
}
