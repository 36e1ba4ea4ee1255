//! What a long trace keeps per op: its ops share one copy of each source location (and of each
//! file and function name) and of each shape, an op whose layer ran once shares the layer's
//! label, layers share their function's op type (built from events and decoded from a `.tlspec`
//! alike), ops with the same input ancestors and output descendants share one copy of the two
//! sets, and a layer that ran once keeps its op inline.

#[path = "tlspec_support.rs"]
mod support;

use std::sync::Arc;
use torchlens_core::events::{RawEvent, SourceLocation};
use torchlens_core::model::TraceOptions;
use torchlens_core::recorder::EventRecorder;
use torchlens_core::tlspec;
use torchlens_core::{Trace, TraceBuilder};

/// A loop of `relu` then `add`, every op called from the same line of `loop.py`'s `forward`.
fn loop_trace(steps: usize) -> Trace {
    let mut recorder = EventRecorder::default();
    let mut value = recorder.input("x", &[4]);
    for _ in 0..steps {
        value = recorder.op("relu", &[value], &[4]);
        value = recorder.op("add", &[value], &[4]);
    }
    recorder.output("out", value);
    let mut events = recorder.events;
    for event in &mut events {
        if let RawEvent::Op(op) = event {
            op.source = Some(SourceLocation {
                file: "/home/user/project/loop.py".to_string(),
                line: 12,
                function: "forward".to_string(),
            });
        }
    }
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(events).expect("events are valid");
    builder.finish().expect("trace finishes")
}

/// Whether every op with a source points at the same location as the first (all the loop's ops
/// are called from one line).
fn sources_shared(trace: &Trace) -> bool {
    let mut sources = trace.ops.iter().filter_map(|op| op.source.as_ref());
    let Some(first) = sources.next() else {
        return false;
    };
    sources.all(|source| Arc::ptr_eq(source, first))
}

/// Whether the ops with equal shapes point at one copy of it (the loop's ops are all `[4]`).
fn shapes_shared(trace: &Trace) -> bool {
    let first = &trace.ops[0].shape;
    trace
        .ops
        .iter()
        .all(|op| op.shape[..] == [4] && Arc::ptr_eq(&op.shape, first))
}

/// Whether each op of a layer that ran once holds the layer's own label, and each layer its
/// function's op type.
fn labels_and_types_shared(trace: &Trace) -> bool {
    let labels = trace.ops.iter().all(|op| {
        let layer = &trace.layers[op.layer as usize];
        layer.ops.len() > 1 || Arc::ptr_eq(&op.label, &layer.label)
    });
    let types = trace.layers.iter().all(|layer| {
        trace
            .func_names
            .iter()
            .filter(|func| func.op_type == layer.op_type)
            .all(|func| Arc::ptr_eq(&func.op_type, &layer.op_type))
    });
    labels && types
}

/// Whether every op points at one copy of its reach sets (the loop's ops are all reached from
/// input 0 and reach the output): the slices of a shared copy have one address.
fn reaches_shared(trace: &Trace) -> bool {
    let first = trace.ops[0].input_ancestors();
    first == [0]
        && trace.ops.iter().all(|op| {
            std::ptr::eq(op.input_ancestors(), first)
                && std::ptr::eq(op.output_descendants(), trace.ops[0].output_descendants())
        })
}

#[test]
fn ops_built_from_events_share_their_source_text_and_shapes() {
    let trace = loop_trace(50);
    assert_eq!(
        trace.ops.iter().filter(|op| op.source.is_some()).count(),
        100
    );
    let source = trace.ops[1]
        .source
        .as_ref()
        .expect("ops carry their source");
    assert_eq!(
        (&*source.file, source.line, &*source.function),
        ("/home/user/project/loop.py", 12, "forward")
    );
    assert!(sources_shared(&trace));
    assert!(shapes_shared(&trace));
    assert!(labels_and_types_shared(&trace));
    assert!(reaches_shared(&trace));
    assert_eq!(&*trace.ops[1].label, "relu_1_2");
}

#[test]
fn a_decoded_trace_shares_its_source_text_and_shapes() {
    let trace = loop_trace(50);
    let (_, decoded) = tlspec::decode_file(&support::encode(&trace)).expect("decodes");
    assert_eq!(decoded.ops.len(), trace.ops.len());
    assert_eq!(decoded.ops[7].source, trace.ops[7].source);
    assert!(sources_shared(&decoded));
    assert!(shapes_shared(&decoded));
    assert!(labels_and_types_shared(&decoded));
    assert!(reaches_shared(&decoded));
}

#[test]
fn a_layer_that_ran_once_keeps_its_op_inline() {
    let trace = loop_trace(50);
    assert_eq!(trace.layers.len(), trace.ops.len());
    assert!(trace
        .layers
        .iter()
        .all(|layer| layer.ops.len() == 1 && !layer.ops.spilled()));
}

/// The op record's size on a 64-bit host (`python benchmarks/core_memory.py` reports wasm32's,
/// where the component runs). A field added to every op shows up here first.
#[test]
#[cfg(target_pointer_width = "64")]
fn an_op_record_stays_small() {
    let size = std::mem::size_of::<torchlens_core::model::Op>();
    assert!(size <= 216, "Op is {size} bytes");
}
