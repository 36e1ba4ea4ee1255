//! The last small capture's finished trace, kept so that a capture sending exactly the same
//! events again is given that trace instead of building it a second time.
//!
//! Tracing one model over and over (a loop over a dataset, a benchmark) sends the core the same
//! events each time: adapters number modules and values per session from the same start, the
//! source lines repeat, and the core never sees tensor values. Building the trace from those
//! events is a pure function of the options and the bytes, so an equal batch gives an equal
//! trace. A session is eligible when it sends one batch from its start, has no selection plan
//! and no rules, and is never marked stopped or unverified (see
//! [`super::CaptureSession`]); anything else builds as before.
//!
//! The trace is shared (`Rc`), not copied: the component's trace handles copy it only to change
//! it (`keep_payloads`, `set_backward`), so a reused capture costs a comparison of the bytes.
//! Only batches up to [`MAX_KEPT_BATCH_BYTES`] are kept (a trace of at most a few thousand ops),
//! so what stays alive here after its traces are dropped is small; a long capture sends several
//! batches and is never kept. There is one entry per thread (the component runs on one).

use crate::model::{Trace, TraceOptions};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The largest batch whose trace is kept (a small model's whole capture is one batch of a few
/// kilobytes: a six-block transformer sends 9 KB).
pub const MAX_KEPT_BATCH_BYTES: usize = 128 * 1024;

/// A finished trace and the batch it was built from.
pub struct KeptTrace {
    options: TraceOptions,
    batch: Vec<u8>,
    /// Shared with the trace handles of the captures that made or reused it.
    trace: Rc<Trace>,
}

impl KeptTrace {
    /// The batch the trace was built from.
    pub fn batch(&self) -> &[u8] {
        &self.batch
    }

    /// The trace (shared: a caller that changes it copies it first).
    pub fn trace(&self) -> Rc<Trace> {
        Rc::clone(&self.trace)
    }
}

thread_local! {
    static KEPT: RefCell<Option<Rc<KeptTrace>>> = const { RefCell::new(None) };
    static REUSED: Cell<u64> = const { Cell::new(0) };
}

/// The kept trace when it was built with `options` from exactly `batch`.
pub fn lookup(options: &TraceOptions, batch: &[u8]) -> Option<Rc<KeptTrace>> {
    KEPT.with(|kept| {
        kept.borrow()
            .as_ref()
            .filter(|entry| entry.options == *options && entry.batch == batch)
            .cloned()
    })
}

/// Keeps `trace`, built with `options` from `batch` alone, in place of the last one. The session
/// passes only batches up to [`MAX_KEPT_BATCH_BYTES`] (it checks before copying one).
pub fn keep(options: TraceOptions, batch: Vec<u8>, trace: Rc<Trace>) {
    debug_assert!(batch.len() <= MAX_KEPT_BATCH_BYTES);
    let entry = KeptTrace {
        options,
        batch,
        trace,
    };
    KEPT.with(|kept| *kept.borrow_mut() = Some(Rc::new(entry)));
}

/// Counts one finished session served from the kept trace.
pub(super) fn count_reuse() {
    REUSED.with(|reused| reused.set(reused.get() + 1));
}

/// How many sessions on this thread finished with the kept trace (for tests and diagnostics).
pub fn reused_count() -> u64 {
    REUSED.with(Cell::get)
}
