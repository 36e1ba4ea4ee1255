//! A selector compiled for use during capture. The adapter sends events in batches; after each
//! batch the plan reports the ops whose selection is now decided. Most ops are decided in the
//! batch that carries them; a `module(...)` boundary waits for the call's exit and
//! `followed_by` for the ops after it, so an adapter keeps such payloads until their decision
//! arrives, and drops unselected ones at once (that is what lowers peak memory).
//!
//! A module call may return a value it did not compute (an identity module passing its input
//! on): that value's op was decided before the call began. When a call a `module(...)` term
//! matches closes, its outputs decided earlier are judged again, and one the selector now
//! selects gets a second, selected decision (the adapter holds the returned value again).

use super::evaluate::Context;
use super::{split_call_suffix, Selector, SelectorClass, SelectorNode};
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::model::{OpId, Trace};

/// Checks that a selector is well formed and can be decided without values (what every plan
/// needs): a value-dependent one is refused with `selector_value_dependent_in_plan`.
pub fn check_plannable(selector: &Selector) -> CoreResult<()> {
    selector.validate()?;
    if selector.class() == SelectorClass::ValueDependent {
        return Err(CoreError::new(
            ErrorKind::InvalidSelector,
            "selector_value_dependent_in_plan",
            "a value-dependent selector cannot be decided from metadata during capture",
            "use static selectors for live decisions, or evaluate the predicate on the host",
        ));
    }
    Ok(())
}

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
    /// Addresses of the selector's `module(...)` terms, split from their call numbers.
    boundaries: Vec<(String, Option<u32>)>,
    /// Module calls looked at for boundary terms.
    calls_seen: usize,
    /// Calls a boundary term matches that have not closed yet.
    watched_calls: Vec<u32>,
}

impl CapturePlan {
    /// Compiles a selector. Value-dependent selectors cannot be planned by the core (it never
    /// sees values); the adapter must evaluate those itself or refuse them.
    pub fn compile(selector: Selector) -> CoreResult<Self> {
        check_plannable(&selector)?;
        let boundaries = selector
            .nodes
            .iter()
            .filter_map(|node| match node {
                SelectorNode::Module(text) => {
                    let (address, call) = split_call_suffix(text);
                    Some((address.to_string(), call))
                }
                _ => None,
            })
            .collect();
        Ok(Self {
            selector,
            scanned_upto: 0,
            pending: Vec::new(),
            boundaries,
            calls_seen: 0,
            watched_calls: Vec::new(),
        })
    }

    /// The selector this plan decides.
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// Decides every op of `trace` that can be decided now. `complete` says the trace is
    /// finished, so every remaining op is decided.
    pub fn advance(&mut self, trace: &Trace, complete: bool) -> CoreResult<Vec<Decision>> {
        let context = Context {
            trace,
            complete,
            where_results: &[],
        };
        let mut decisions = self.revise_returned_values(&context)?;
        let op_count = trace.ops.len() as OpId;
        let start = self.pending.first().copied().unwrap_or(self.scanned_upto);
        if start >= op_count {
            return Ok(decisions);
        }
        let mask = context.node(&self.selector, self.selector.root, start, op_count)?;
        let candidates: Vec<OpId> = std::mem::take(&mut self.pending)
            .into_iter()
            .chain(self.scanned_upto.max(start)..op_count)
            .collect();
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

    /// Selected decisions for outputs of boundary-matched calls that closed since the last
    /// advance and were decided before (values the call returned but did not compute).
    fn revise_returned_values(&mut self, context: &Context<'_>) -> CoreResult<Vec<Decision>> {
        let mut revised = Vec::new();
        if self.boundaries.is_empty() {
            return Ok(revised);
        }
        let trace = context.trace;
        for index in self.calls_seen..trace.module_calls.len() {
            let call = &trace.module_calls[index];
            let matches = trace
                .modules
                .get(call.module as usize)
                .is_some_and(|module| {
                    self.boundaries.iter().any(|(address, number)| {
                        module.answers_to(address)
                            && number.is_none_or(|number| number == call.call_number)
                    })
                });
            if matches {
                self.watched_calls.push(index as u32);
            }
        }
        self.calls_seen = trace.module_calls.len();
        let mut still_open = Vec::new();
        for index in std::mem::take(&mut self.watched_calls) {
            let call = &trace.module_calls[index as usize];
            // The root call keeps `end_op` open; its outputs are final once the trace is.
            let closed = call.end_op != OpId::MAX || (index == 0 && context.complete);
            if !closed {
                still_open.push(index);
                continue;
            }
            for &op in &call.outputs {
                let decided = op < self.scanned_upto && self.pending.binary_search(&op).is_err();
                if decided
                    && context
                        .node(&self.selector, self.selector.root, op, op + 1)?
                        .at(op)
                        == (true, true)
                {
                    revised.push(Decision { op, selected: true });
                }
            }
        }
        self.watched_calls = still_open;
        Ok(revised)
    }
}
