//! One shared copy of each shape the ops of a trace repeat.
//!
//! A model's ops have few distinct shapes (every op of a loop, every activation of a block), yet
//! an inline shape took 48 bytes of each op record on wasm32 (room for four dimensions, a
//! capacity and a tag). An op points at its shape instead (`Arc<[u64]>`, 8 bytes on wasm32),
//! one copy per distinct shape. The wire form is unchanged: a shape serializes as the same
//! sequence of dimensions either way.

use super::Trace;
use rustc_hash::FxHashSet as HashSet;
use std::sync::Arc;

/// An op's shape, shared with every op of the trace that has the same one.
pub type SharedShape = Arc<[u64]>;

/// The distinct shapes seen so far.
#[derive(Debug, Default)]
pub struct SharedShapes {
    seen: HashSet<SharedShape>,
    /// The last shape asked for: consecutive ops mostly have one shape.
    last: Option<SharedShape>,
}

impl SharedShapes {
    /// The shared copy of `dims` (made on first sight).
    pub fn share(&mut self, dims: &[u64]) -> SharedShape {
        if let Some(last) = &self.last {
            if **last == *dims {
                return Arc::clone(last);
            }
        }
        let shared = match self.seen.get(dims) {
            Some(shared) => Arc::clone(shared),
            None => {
                let shared: SharedShape = Arc::from(dims);
                self.seen.insert(Arc::clone(&shared));
                shared
            }
        };
        self.last = Some(Arc::clone(&shared));
        shared
    }
}

/// Makes `trace` keep one copy of each repeated shape, as a trace built from events does (a
/// decoded trace has a copy per op).
pub fn share_repeated_shapes(trace: &mut Trace) {
    let mut shapes = SharedShapes::default();
    for op in &mut trace.ops {
        op.shape = shapes.share(&op.shape);
    }
}
