//! A selector compiled for use during capture. The adapter sends events in batches; after each
//! batch the plan reports the ops whose selection is now decided. Most ops are decided in the
//! batch that carries them; a `module(...)` boundary waits for the call's exit and
//! `followed_by` for the ops after it, so an adapter keeps such payloads until their decision
//! arrives, and drops unselected ones at once (that is what lowers peak memory).

use super::evaluate::Context;
use super::{Selector, SelectorClass};
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::model::{OpId, Trace};

/// The plan's verdict on one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub op: OpId,
    pub selected: bool,
}

/// A selector compiled into an incremental per-op decision procedure.
#[derive(Debug, Clone)]
pub struct CapturePlan {
    selector: Selector,
    /// Ops below this id have been looked at.
    scanned_upto: OpId,
    /// Ops looked at but not yet decided, ascending.
    pending: Vec<OpId>,
}

impl CapturePlan {
    /// Compiles a selector. Value-dependent selectors cannot be planned by the core (it never
    /// sees values); the adapter must evaluate those itself or refuse them.
    pub fn compile(selector: Selector) -> CoreResult<Self> {
        selector.validate()?;
        if selector.class() == SelectorClass::ValueDependent {
            return Err(CoreError::new(
                ErrorKind::InvalidSelector,
                "selector_value_dependent_in_plan",
                "a value-dependent selector cannot be decided from metadata during capture",
                "use static selectors for live decisions, or evaluate the predicate on the host",
            ));
        }
        Ok(Self {
            selector,
            scanned_upto: 0,
            pending: Vec::new(),
        })
    }

    /// The selector this plan decides.
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// Decides every op of `trace` that can be decided now. `complete` says the trace is
    /// finished, so every remaining op is decided.
    pub fn advance(&mut self, trace: &Trace, complete: bool) -> CoreResult<Vec<Decision>> {
        let op_count = trace.ops.len() as OpId;
        let start = self.pending.first().copied().unwrap_or(self.scanned_upto);
        if start >= op_count {
            return Ok(Vec::new());
        }
        let context = Context {
            trace,
            complete,
            where_results: &[],
        };
        let mask = context.node(&self.selector, self.selector.root, start, op_count)?;
        let candidates: Vec<OpId> = std::mem::take(&mut self.pending)
            .into_iter()
            .chain(self.scanned_upto.max(start)..op_count)
            .collect();
        let mut decisions = Vec::new();
        for op in candidates {
            let (selected, known) = mask.at(op);
            if known {
                decisions.push(Decision { op, selected });
            } else {
                self.pending.push(op);
            }
        }
        self.scanned_upto = op_count;
        Ok(decisions)
    }
}
