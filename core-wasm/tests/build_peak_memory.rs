//! The most memory a long trace's build holds at once, beyond the trace it leaves.
//!
//! In the component, linear memory never shrinks: what the builder holds at its peak (its
//! indexes while events arrive, the distance sweeps' working arrays at the end) stays resident
//! for as long as the process lives, so a long capture costs its peak, not its result. A counting
//! allocator follows the heap while a 20,000-op loop is built natively; the working state above
//! the finished trace must stay a small share of it. (`benchmarks/core_memory.py` measures the
//! same on wasm32, in the component's own allocator.)
//!
//! One test in this file: the allocator counts the whole process, so nothing may run beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use torchlens_core::model::TraceOptions;
use torchlens_core::recorder::EventRecorder;
use torchlens_core::TraceBuilder;

/// The system allocator, counting live bytes and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = System.alloc(layout);
        if !pointer.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        System.dealloc(pointer, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Resets the high-water mark to what is live now; returns that.
fn start_counting() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    live
}

#[test]
fn a_long_build_holds_little_beyond_its_trace() {
    const STEPS: usize = 10_000;
    let before = start_counting();
    let mut recorder = EventRecorder::default();
    let mut builder = TraceBuilder::new(TraceOptions::default());
    let mut value = recorder.input("x", &[4]);
    for step in 0..STEPS {
        value = recorder.op("relu", &[value], &[4]);
        value = recorder.op("add", &[value], &[4]);
        // In batches, as a capture sends them: the events themselves stay small.
        if step % 500 == 499 {
            builder
                .ingest(std::mem::take(&mut recorder.events))
                .expect("events are valid");
        }
    }
    recorder.output("out", value);
    builder.ingest(recorder.events).expect("events are valid");
    let ingest_peak = PEAK.load(Ordering::Relaxed);
    start_counting();
    let trace = builder.finish().expect("trace finishes");
    let finish_peak = PEAK.load(Ordering::Relaxed);
    let kept = LIVE.load(Ordering::Relaxed);
    let ops = trace.ops.len();
    assert_eq!(ops, 2 * STEPS + 2);

    let per_op = |bytes: usize| bytes / ops;
    let (ingest_above, finish_above) = (per_op(ingest_peak - kept), per_op(finish_peak - kept));
    let trace_bytes = per_op(kept - before);
    // 64-bit sizes, measured: 39 and 24 with the value index read back from the ops
    // (`build/value_producers.rs`) and flat distance sweeps (`build/distances.rs`); a map from
    // value id to producer and a bitset `Vec` per op held 59 and 96.
    let context = format!("the trace keeps {trace_bytes} B/op");
    assert!(
        ingest_above <= 48,
        "ingest peaked {ingest_above} B/op above the trace ({context})"
    );
    assert!(
        finish_above <= 48,
        "finish peaked {finish_above} B/op above the trace ({context})"
    );
    drop(trace);
}
