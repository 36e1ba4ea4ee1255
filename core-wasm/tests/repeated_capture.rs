//! A capture that sends exactly the events of the last small capture is given its trace
//! (`build::repeat_cache`): the same trace a build gives, and never where the session asked for
//! more than one batch's build (a plan, rules, marks, a second batch, other options).
//!
//! The kept trace is per thread; each test first captures what it needs kept, and compares
//! the reuse count with its value at the start, so the tests hold in any order and on one
//! thread.

use torchlens_core::build::{repeat_cache, CaptureSession};
use torchlens_core::events::{EventBatch, RawEvent};
use torchlens_core::model::TraceOptions;
use torchlens_core::recorder::EventRecorder;
use torchlens_core::selectors::{parse_expression, CapturePlan};
use torchlens_core::{Trace, TraceBuilder};

/// A small model's capture as one postcard batch: a module with a parameter, two calls of a
/// child module (two passes of one layer), an op from a source line.
fn small_capture(width: u64) -> Vec<u8> {
    let mut recorder = EventRecorder::default();
    let root = recorder.module(&["self"], "Net");
    let child = recorder.module(&["block"], "Block");
    let weight = recorder.param(root, "weight", &[width, width]);
    let x = recorder.input("x", &[width]);
    recorder.enter(root);
    let mut value = recorder.op("matmul", &[x, weight], &[width]);
    for _ in 0..2 {
        recorder.enter(child);
        value = recorder.op("relu", &[value], &[width]);
        recorder.exit(child, &[value]);
    }
    recorder.exit(root, &[value]);
    recorder.output("out", value);
    EventBatch {
        events: recorder.events,
    }
    .to_postcard()
}

fn built(batch: &[u8], options: TraceOptions) -> Trace {
    let mut builder = TraceBuilder::new(options);
    builder.ingest_postcard(batch).expect("valid events");
    builder.finish().expect("finishes")
}

fn capture(batch: &[u8], options: TraceOptions) -> Trace {
    let mut session = CaptureSession::new(options, None);
    session.ingest_postcard(batch).expect("valid events");
    session.finish().expect("finishes").0
}

#[test]
fn the_same_events_again_give_the_same_trace() {
    let batch = small_capture(4);
    let options = TraceOptions::default();
    let first = capture(&batch, options);
    let reused_before = repeat_cache::reused_count();
    let second = capture(&batch, options);
    assert_eq!(
        repeat_cache::reused_count(),
        reused_before + 1,
        "the second was reused"
    );
    assert_eq!(first, built(&batch, options));
    assert_eq!(second, first);
    let third = capture(&batch, options);
    assert_eq!(repeat_cache::reused_count(), reused_before + 2);
    assert_eq!(third, first);
}

#[test]
fn other_events_or_other_options_are_built() {
    let options = TraceOptions::default();
    let narrow = small_capture(4);
    let wide = small_capture(8);
    capture(&narrow, options);
    let reused_before = repeat_cache::reused_count();
    let trace = capture(&wide, options);
    assert_eq!(trace, built(&wide, options));
    assert_eq!(&trace.ops[1].shape[..], &[8]);
    let flat = TraceOptions {
        recurrence_detection: false,
        ..options
    };
    let trace = capture(&wide, flat);
    assert_eq!(trace, built(&wide, flat));
    assert_ne!(trace.layers.len(), built(&wide, options).layers.len());
    assert_eq!(
        repeat_cache::reused_count(),
        reused_before,
        "nothing was reused"
    );
}

#[test]
fn a_mark_after_a_reused_batch_applies_to_the_trace_built_from_it() {
    let batch = small_capture(4);
    let options = TraceOptions::default();
    capture(&batch, options);
    let mut session = CaptureSession::new(options, None);
    session.ingest_postcard(&batch).expect("valid events");
    session
        .builder_mut()
        .mark_unverified("a hook went missing".to_string());
    let (trace, _) = session.finish().expect("finishes");
    assert!(!trace.capture.verified);
    assert_eq!(trace.capture.reason.as_deref(), Some("a hook went missing"));
    assert_eq!(trace.ops.len(), built(&batch, options).ops.len());

    // The marked trace was not kept: the next plain capture is the unmarked trace.
    let reused_before = repeat_cache::reused_count();
    let next = capture(&batch, options);
    assert!(next.capture.verified);
    assert_eq!(repeat_cache::reused_count(), reused_before + 1);
}

#[test]
fn a_second_batch_builds_the_first_one_too() {
    let batch = small_capture(4);
    let options = TraceOptions::default();
    let first = capture(&batch, options);
    let mut session = CaptureSession::new(options, None);
    session.ingest_postcard(&batch).expect("valid events");
    let more = EventBatch {
        events: vec![RawEvent::Extra {
            key: "note".to_string(),
            value: "second batch".to_string(),
        }],
    };
    session
        .ingest_postcard(&more.to_postcard())
        .expect("valid events");
    let (trace, _) = session.finish().expect("finishes");
    assert_eq!(trace.ops, first.ops);
    assert_eq!(
        trace.extras,
        vec![("note".to_string(), "second batch".to_string())]
    );
}

#[test]
fn a_session_with_a_plan_decides_every_op_and_is_never_given_the_kept_trace() {
    let batch = small_capture(4);
    let options = TraceOptions::default();
    capture(&batch, options);
    let reused_before = repeat_cache::reused_count();
    let plan = CapturePlan::compile(parse_expression("func:relu").expect("parses")).expect("plans");
    let mut session = CaptureSession::new(options, Some(plan));
    let decisions = session.ingest_postcard(&batch).expect("valid events");
    let (trace, last) = session.finish().expect("finishes");
    let selected = decisions
        .iter()
        .chain(&last)
        .filter(|decision| decision.selected)
        .count();
    assert_eq!(selected, 2, "both relu passes were selected");
    assert_eq!(trace.ops, built(&batch, options).ops);
    assert_eq!(repeat_cache::reused_count(), reused_before);
}

#[test]
fn a_batch_that_failed_is_never_kept() {
    let options = TraceOptions::default();
    let mut recorder = EventRecorder::default();
    recorder.exit(0, &[]); // no call is open
    let broken = EventBatch {
        events: recorder.events,
    }
    .to_postcard();
    let reused_before = repeat_cache::reused_count();
    for _ in 0..2 {
        let mut session = CaptureSession::new(options, None);
        assert!(session.ingest_postcard(&broken).is_err());
    }
    assert_eq!(repeat_cache::reused_count(), reused_before);
}
