//! A capture session: a trace builder plus an optional live selection plan, as an adapter uses
//! them during one `tl.trace` call.

use super::TraceBuilder;
use crate::error::CoreResult;
use crate::model::{Trace, TraceOptions};
use crate::selectors::{CapturePlan, Decision};

/// One capture in progress.
pub struct CaptureSession {
    builder: TraceBuilder,
    plan: Option<CapturePlan>,
}

impl CaptureSession {
    /// Starts a session; with a plan, every ingest reports the ops it decided.
    pub fn new(options: TraceOptions, plan: Option<CapturePlan>) -> Self {
        Self {
            builder: TraceBuilder::new(options),
            plan,
        }
    }

    /// Ingests one postcard batch and returns the selection decisions it made possible.
    pub fn ingest_postcard(&mut self, batch: &[u8]) -> CoreResult<Vec<Decision>> {
        self.builder.ingest_postcard(batch)?;
        self.decide(false)
    }

    /// Ingests decoded events (native callers).
    pub fn ingest(
        &mut self,
        events: impl IntoIterator<Item = crate::events::RawEvent>,
    ) -> CoreResult<Vec<Decision>> {
        self.builder.ingest(events)?;
        self.decide(false)
    }

    fn decide(&mut self, complete: bool) -> CoreResult<Vec<Decision>> {
        match &mut self.plan {
            Some(plan) => plan.advance(self.builder.partial(), complete),
            None => Ok(Vec::new()),
        }
    }

    /// The builder, for marking the capture stopped or unverified.
    pub fn builder_mut(&mut self) -> &mut TraceBuilder {
        &mut self.builder
    }

    /// Finalizes the trace and returns it with the last decisions.
    pub fn finish(self) -> CoreResult<(Trace, Vec<Decision>)> {
        let trace = self.builder.finish()?;
        let last = match self.plan {
            Some(mut plan) => plan.advance(&trace, true)?,
            None => Vec::new(),
        };
        Ok((trace, last))
    }
}
