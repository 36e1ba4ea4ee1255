//! Which inputs reach an op and which outputs it reaches, kept once per distinct pair.

use super::{Interner, OpIdList};
use std::sync::Arc;

/// The input ops that reach an op and the output ops it reaches. Most ops of a trace share the
/// same two sets (a one-input, one-output model has one pair for all of them), so an op points
/// at a shared copy (4 bytes on wasm32) instead of holding two lists (24).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct InputOutputReach {
    /// Input ops that reach the op.
    pub input_ancestors: OpIdList,
    /// Output ops the op reaches.
    pub output_descendants: OpIdList,
}

impl InputOutputReach {
    /// Whether both sets are empty (an op then holds no copy at all).
    pub fn is_empty(&self) -> bool {
        self.input_ancestors.is_empty() && self.output_descendants.is_empty()
    }
}

impl From<&InputOutputReach> for Arc<InputOutputReach> {
    fn from(reach: &InputOutputReach) -> Self {
        Arc::new(reach.clone())
    }
}

/// The distinct pairs seen so far.
pub type SharedReaches = Interner<InputOutputReach>;

impl SharedReaches {
    /// What an op holds for `reach`: nothing when both sets are empty, else the shared copy.
    pub fn share_reach(&mut self, reach: &InputOutputReach) -> Option<Arc<InputOutputReach>> {
        (!reach.is_empty()).then(|| self.share(reach))
    }
}

/// Makes `trace` keep one copy of each repeated reach pair, as a trace built from events does
/// (a decoded trace has a copy per op).
pub fn share_repeated_reaches(trace: &mut super::Trace) {
    let mut reaches = SharedReaches::default();
    for op in &mut trace.ops {
        if let Some(reach) = op.reach.take() {
            op.reach = reaches.share_reach(&reach);
        }
    }
}
