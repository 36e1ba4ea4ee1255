//! A capture session: a trace builder plus an optional live selection plan, as an adapter uses
//! them during one `tl.trace` call.
//!
//! Decisions leave the session keyed by the adapter's own value ids ([`ValueDecision`]): the
//! adapter never has to guess which dense op id the core gave an event, so constants the core
//! inserts for undeclared reads cannot shift its bookkeeping.

use super::repeat_cache::{self, KeptTrace};
use super::TraceBuilder;
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::events::TensorId;
use crate::model::{OpId, Trace, TraceOptions};
use crate::selectors::{check_plannable, decide_op, CapturePlan, Decision, LivePlan, Selector};
use std::rc::Rc;

/// Most rules one session holds (an `intervene=` list or a `stop_after=` is a handful).
pub const MAX_RULES: usize = 1024;

/// A live selection decision for one op, named by the adapter's id of the op's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueDecision {
    /// The adapter's id of the value the op produced (what crosses the WIT boundary).
    pub value: TensorId,
    /// The core's dense op id (native callers and tests only).
    pub op: OpId,
    /// Whether the plan selected the op.
    pub selected: bool,
}

/// One capture in progress.
pub struct CaptureSession {
    builder: TraceBuilder,
    plan: Option<CapturePlan>,
    /// Static selectors the adapter asks about op by op (`intervene=` and `stop_after=` rules).
    rules: Vec<Selector>,
    /// Where the session stands with the last small capture's trace ([`repeat_cache`]).
    repeat: Repeat,
    /// The error of ingesting a reused batch after all (see [`Self::build_reused`]); `finish`
    /// returns it.
    failed: Option<CoreError>,
}

/// A session's standing with the kept trace of the last small capture.
enum Repeat {
    /// Nothing ingested yet.
    Fresh,
    /// The one batch so far equals the kept trace's batch: not ingested; `finish` returns the
    /// kept trace.
    Reusing(Rc<KeptTrace>),
    /// The one batch so far, ingested; `finish` keeps the trace with it.
    Single(Vec<u8>),
    /// Anything else (a plan, rules, a mark, several batches, a large batch): built as always.
    Ineligible,
}

/// Keys op decisions by value; ops without a value of their own (outputs) are left out.
fn by_value(trace: &Trace, decisions: Vec<Decision>) -> Vec<ValueDecision> {
    decisions
        .into_iter()
        .filter_map(|decision| {
            let value = trace.ops.get(decision.op as usize)?.value()?;
            Some(ValueDecision {
                value,
                op: decision.op,
                selected: decision.selected,
            })
        })
        .collect()
}

impl CaptureSession {
    /// Starts a session; with a plan, every ingest reports the ops it decided.
    pub fn new(options: TraceOptions, plan: Option<CapturePlan>) -> Self {
        let repeat = if plan.is_none() {
            Repeat::Fresh
        } else {
            Repeat::Ineligible
        };
        Self {
            builder: TraceBuilder::new(options),
            plan,
            rules: Vec::new(),
            repeat,
            failed: None,
        }
    }

    /// Ingests one postcard batch and returns the selection decisions it made possible.
    ///
    /// A session's first batch that equals the kept trace's (same options, same bytes) is not
    /// ingested: `finish` returns the kept trace, unless something later needs the events built
    /// ([`Self::build_reused`]).
    pub fn ingest_postcard(&mut self, batch: &[u8]) -> CoreResult<Vec<ValueDecision>> {
        if matches!(self.repeat, Repeat::Fresh) {
            if let Some(kept) = repeat_cache::lookup(&self.builder.partial().options, batch) {
                self.repeat = Repeat::Reusing(kept);
                return Ok(Vec::new()); // no plan: no decisions, as `decide` gives
            }
            self.repeat = Repeat::Ineligible; // until the batch is in
            self.builder.ingest_postcard(batch)?;
            if batch.len() <= repeat_cache::MAX_KEPT_BATCH_BYTES {
                self.repeat = Repeat::Single(batch.to_vec());
            }
            return self.decide();
        }
        self.build_reused()?;
        self.builder.ingest_postcard(batch)?;
        self.decide()
    }

    /// Ingests decoded events (native callers).
    pub fn ingest(
        &mut self,
        events: impl IntoIterator<Item = crate::events::RawEvent>,
    ) -> CoreResult<Vec<ValueDecision>> {
        self.build_reused()?;
        self.builder.ingest(events)?;
        self.decide()
    }

    /// Leaves the kept trace: a batch that was reused is ingested now (something is about to
    /// change or read the build), and the session will not be kept.
    fn build_reused(&mut self) -> CoreResult<()> {
        if let Repeat::Reusing(kept) = std::mem::replace(&mut self.repeat, Repeat::Ineligible) {
            self.builder.ingest_postcard(kept.batch())?;
        }
        Ok(())
    }

    fn decide(&mut self) -> CoreResult<Vec<ValueDecision>> {
        match &mut self.plan {
            Some(plan) => {
                let partial = self.builder.partial();
                let decisions = plan.advance(partial, false)?;
                Ok(by_value(partial, decisions))
            }
            None => Ok(Vec::new()),
        }
    }

    /// The session's selector compiled for the adapter's hot path against the modules declared
    /// so far (none when the session has no plan).
    pub fn live_plan(&self) -> CoreResult<Option<LivePlan>> {
        self.plan
            .as_ref()
            .map(|plan| {
                LivePlan::compile(
                    plan.selector(),
                    self.builder.partial(),
                    self.builder.module_ids(),
                )
            })
            .transpose()
    }

    /// Registers a rule: a static selector the adapter asks about op by op (an `intervene=` or
    /// `stop_after=` rule). Returns its index. A rule acts on an op as it runs, so it cannot ask
    /// which ops reach a later one (`upstream_of`): that is refused with
    /// `selector_upstream_in_rule`.
    pub fn add_rule(&mut self, selector: Selector) -> CoreResult<u32> {
        self.build_reused()?;
        check_plannable(&selector)?;
        if selector.uses_upstream() {
            return Err(CoreError::new(
                ErrorKind::InvalidSelector,
                "selector_upstream_in_rule",
                "an upstream_of(...) term is decided only after the ops it looks for ran, too late \
                 to edit or stop at an op as it runs",
                "select the ops themselves, or use downstream_of(...) (decided as each op runs); \
                 upstream_of(...) works in save= and on finished traces",
            ));
        }
        if self.rules.len() >= MAX_RULES {
            return Err(CoreError::new(
                ErrorKind::LimitExceeded,
                "rules_too_many",
                format!("a capture holds at most {MAX_RULES} rules"),
                "combine rules with | instead of registering one per op",
            ));
        }
        self.rules.push(selector);
        Ok((self.rules.len() - 1) as u32)
    }

    fn rule(&self, rule: u32) -> CoreResult<&Selector> {
        self.rules.get(rule as usize).ok_or_else(|| {
            CoreError::new(
                ErrorKind::NotFound,
                "rule_unknown",
                format!("rule {rule} was never registered in this session"),
                "register the rule with add-rule first and use the index it returned",
            )
        })
    }

    /// A rule compiled for the adapter's hot path against the modules declared so far.
    pub fn rule_live_plan(&self, rule: u32) -> CoreResult<LivePlan> {
        LivePlan::compile(
            self.rule(rule)?,
            self.builder.partial(),
            self.builder.module_ids(),
        )
    }

    /// Whether a rule matches the op that produced `value`, as far as the events ingested so far
    /// tell (`None` while they cannot: an open call's outputs, ops still to come).
    pub fn rule_matches(&self, rule: u32, value: TensorId) -> CoreResult<Option<bool>> {
        let selector = self.rule(rule)?;
        let op = self
            .builder
            .producing_op(value, "events_unknown_rule_value", "a rule query")?;
        decide_op(self.builder.partial(), selector, op, false)
    }

    /// The builder, for marking the capture stopped or unverified (a session changed this way
    /// is not kept, and one that reused the kept trace builds its events first; should that
    /// fail, `finish` returns the error).
    pub fn builder_mut(&mut self) -> &mut TraceBuilder {
        if let Err(error) = self.build_reused() {
            self.failed.get_or_insert(error);
        }
        &mut self.builder
    }

    /// Finalizes the trace and returns it with the last decisions.
    pub fn finish(self) -> CoreResult<(Trace, Vec<ValueDecision>)> {
        let (trace, last) = self.finish_shared()?;
        Ok((Rc::unwrap_or_clone(trace), last))
    }

    /// [`Self::finish`], the trace possibly shared with the kept trace of a repeated capture
    /// (the component's trace handles hold it so and copy it only to change it).
    pub fn finish_shared(self) -> CoreResult<(Rc<Trace>, Vec<ValueDecision>)> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let options = self.builder.partial().options;
        let kept_batch = match self.repeat {
            Repeat::Reusing(kept) => {
                repeat_cache::count_reuse();
                return Ok((kept.trace(), Vec::new()));
            }
            Repeat::Single(batch) => Some(batch),
            Repeat::Fresh | Repeat::Ineligible => None,
        };
        let trace = Rc::new(self.builder.finish()?);
        if let Some(batch) = kept_batch {
            repeat_cache::keep(options, batch, Rc::clone(&trace));
        }
        let last = match self.plan {
            Some(mut plan) => {
                let decisions = plan.advance(&trace, true)?;
                by_value(&trace, decisions)
            }
            None => Vec::new(),
        };
        Ok((trace, last))
    }
}
