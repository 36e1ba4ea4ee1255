//! Every id that crosses into the core during capture is the adapter's own: live decisions,
//! stop frontiers, edits and kept payloads name values and slots, never the core's op ids.

use torchlens_core::build::{CaptureSession, ValueDecision};
use torchlens_core::events::{EventBatch, RawEvent};
use torchlens_core::model::{OpKind, TraceOptions};
use torchlens_core::recorder::EventRecorder;
use torchlens_core::selectors::{parse_expression, CapturePlan};
use torchlens_core::tlspec;
use torchlens_core::{ErrorKind, Trace, TraceBuilder};

fn session(expression: &str) -> CaptureSession {
    let plan = CapturePlan::compile(parse_expression(expression).expect("parses")).expect("plans");
    CaptureSession::new(TraceOptions::default(), Some(plan))
}

fn build(events: Vec<RawEvent>) -> Trace {
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(events).expect("events are valid");
    builder.finish().expect("trace finishes")
}

fn decision_for(decisions: &[ValueDecision], value: u64) -> Option<bool> {
    let mut found = decisions.iter().filter(|decision| decision.value == value);
    let first = found.next().map(|decision| decision.selected);
    assert!(found.next().is_none(), "value {value} decided twice");
    first
}

#[test]
fn decisions_name_values_even_after_the_core_inserts_a_constant() {
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[2]);
    let unseen = recorder.undeclared();
    // The core inserts a constant op for `unseen` before the relu: op ids shift by one from
    // what an adapter counting its own events would guess.
    let relu = recorder.op("relu", &[x, unseen], &[2]);
    let mut session = session("func:relu");
    let decisions = session.ingest(recorder.events).expect("ingests");
    let (trace, last) = session.finish().expect("finishes");
    assert!(last.is_empty(), "a func: plan decides each op in its batch");

    let relu_op = trace
        .ops
        .iter()
        .position(|op| trace.func_name(op) == "relu")
        .expect("relu is in the trace");
    assert_eq!(relu_op, 2, "the inserted constant took op id 1");
    assert_eq!(trace.ops[1].kind, OpKind::Constant);
    assert_eq!(trace.ops[1].value(), Some(unseen));
    assert_eq!(decision_for(&decisions, relu), Some(true));
    assert_eq!(decision_for(&decisions, unseen), Some(false));
    assert_eq!(decision_for(&decisions, x), Some(false));
    assert_eq!(decisions.len(), 3);
    let selected = decisions.iter().find(|decision| decision.selected);
    assert_eq!(selected.map(|decision| decision.op), Some(2));
}

#[test]
fn every_op_keeps_the_adapter_value_it_came_from_but_outputs_do_not() {
    let mut recorder = EventRecorder::default();
    let root = recorder.module(&["self"], "Net");
    let weight = recorder.param(root, "weight", &[2, 2]);
    let x = recorder.input("x", &[2]);
    let mean = recorder.buffer("running_mean", &[2]);
    let constant = recorder.constant(&[2]);
    recorder.enter(root);
    let a = recorder.op("matmul", &[x, weight], &[2]);
    let parts = recorder.multi_output_op("split", &[a, mean, constant], &[1], 2);
    recorder.exit(root, &parts);
    recorder.output("out", parts[1]);
    let trace = build(recorder.events);
    let values: Vec<(OpKind, Option<u64>)> =
        trace.ops.iter().map(|op| (op.kind, op.value())).collect();
    assert_eq!(
        values,
        vec![
            (OpKind::Input, Some(x)),
            (OpKind::Buffer, Some(mean)),
            (OpKind::Constant, Some(constant)),
            (OpKind::Compute, Some(a)),
            (OpKind::Compute, Some(parts[0])),
            (OpKind::Compute, Some(parts[1])),
            (OpKind::Output, None),
        ]
    );
    // Runtime-only: the body does not carry it, and the body format is unchanged.
    let body = tlspec::trace_to_body(&trace);
    let reloaded = tlspec::trace_from_body(&body).expect("body decodes");
    assert!(reloaded.ops.iter().all(|op| op.value().is_none()));
    let mut without_values = trace.clone();
    for op in &mut without_values.ops {
        op.clear_value();
    }
    assert_eq!(reloaded, without_values);
    assert_eq!(tlspec::trace_to_body(&without_values), body);
}

#[test]
fn a_frontier_of_values_becomes_the_ops_that_produced_them() {
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[2]);
    let unseen = recorder.undeclared();
    let a = recorder.op("relu", &[x, unseen], &[2]);
    let b = recorder.op("tanh", &[a], &[2]);
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(recorder.events).expect("ingests");
    builder
        .mark_stopped_at_values("stop_after reached".to_string(), &[b, a])
        .expect("known values");
    let trace = builder.finish().expect("finishes");
    assert_eq!(
        trace.capture.stop_reason.as_deref(),
        Some("stop_after reached")
    );
    // relu is op 2 and tanh op 3 (the inserted constant is op 1).
    assert_eq!(trace.capture.frontier, vec![3, 2]);
}

#[test]
fn an_unknown_frontier_value_is_a_typed_error_and_marks_nothing() {
    let mut recorder = EventRecorder::default();
    let root = recorder.module(&["self"], "Net");
    let weight = recorder.param(root, "weight", &[2]);
    let x = recorder.input("x", &[2]);
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(recorder.events).expect("ingests");
    for value in [x + 1000, weight] {
        let error = builder
            .mark_stopped_at_values("stop".to_string(), &[x, value])
            .expect_err("no op produced it");
        assert_eq!(error.kind, ErrorKind::InvalidEvents);
        assert_eq!(error.code, "events_unknown_frontier_value");
    }
    let trace = builder.finish().expect("finishes");
    assert_eq!(trace.capture.stop_reason, None);
    assert!(trace.capture.frontier.is_empty());
}

#[test]
fn edits_attach_to_the_producing_op_and_survive_a_tlspec_round_trip() {
    let mut recorder = EventRecorder::keeping_payloads();
    let x = recorder.input("x", &[2]);
    let a = recorder.op("relu", &[x], &[2]);
    recorder.edit(a, "0", "zero_ablate", "output");
    let b = recorder.op("tanh", &[a], &[2]);
    recorder.output("out", b);
    // After the output event the value still names tanh, not the output node.
    recorder.edit(b, "scale", "scale(0.5)", "module_exit");
    let trace = build(recorder.events);
    let relu = &trace.ops[1];
    assert_eq!(relu.edits().len(), 1);
    assert_eq!(
        (
            relu.edits()[0].rule.as_str(),
            relu.edits()[0].action.as_str(),
            relu.edits()[0].timing.as_str()
        ),
        ("0", "zero_ablate", "output")
    );
    assert_eq!(trace.ops[2].edits()[0].action, "scale(0.5)");
    assert!(
        trace.ops[3].edits().is_empty(),
        "the output node is not edited"
    );

    let file = tlspec::encode_with_payloads(&trace, &tlspec::Manifest::default(), |slot| {
        trace
            .ops
            .iter()
            .any(|op| op.payload() == Some(slot))
            .then_some(&[0u8; 8][..])
    })
    .expect("encodes");
    let (_, decoded) = tlspec::decode_file(&file).expect("decodes");
    let edits: Vec<_> = decoded.ops.iter().map(|op| op.edits().to_vec()).collect();
    let original: Vec<_> = trace.ops.iter().map(|op| op.edits().to_vec()).collect();
    assert_eq!(edits, original);
}

#[test]
fn an_edit_of_an_unknown_value_is_a_typed_error() {
    let mut recorder = EventRecorder::default();
    let root = recorder.module(&["self"], "Net");
    let weight = recorder.param(root, "weight", &[2]);
    let x = recorder.input("x", &[2]);
    for value in [x + 50, weight] {
        let mut events = recorder.events.clone();
        events.push(RawEvent::Edit {
            value,
            rule: "0".into(),
            action: "zero_ablate".into(),
            timing: "output".into(),
        });
        let mut builder = TraceBuilder::new(TraceOptions::default());
        let error = builder.ingest(events).expect_err("no op produced it");
        assert_eq!(error.kind, ErrorKind::InvalidEvents);
        assert_eq!(error.code, "events_edit_unknown_value");
    }
}

#[test]
fn keep_payloads_keeps_the_listed_slots_only() {
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[2]);
    let a = recorder.op("relu", &[x], &[2]);
    let b = recorder.op("tanh", &[a], &[2]);
    let mut events = recorder.events;
    // Slots distinct from tensor ids and op ids, as an adapter may choose them.
    for event in &mut events {
        match event {
            RawEvent::Input { value, .. } => value.payload = Some(70),
            RawEvent::Op(op) => {
                for output in &mut op.outputs {
                    output.payload = Some(80 + output.tensor);
                }
            }
            _ => {}
        }
    }
    let mut trace = build(events);
    let dropped = trace.keep_payloads(&[80 + b, 70, 12345]);
    assert_eq!(dropped, 1);
    let payloads: Vec<Option<u64>> = trace.ops.iter().map(|op| op.payload()).collect();
    assert_eq!(payloads, vec![Some(70), None, Some(80 + b)]);
}

#[test]
fn an_undecodable_batch_is_events_undecodable() {
    let mut batch = EventBatch {
        events: vec![RawEvent::Extra {
            key: "k".into(),
            value: "v".into(),
        }],
    }
    .to_postcard();
    batch.push(1);
    let mut session = session("func:relu");
    let error = session.ingest_postcard(&batch).expect_err("trailing byte");
    assert_eq!(error.kind, ErrorKind::InvalidEvents);
    assert_eq!(error.code, "events_undecodable");
    let error = session
        .ingest_postcard(&[0xff])
        .expect_err("truncated count");
    assert_eq!(error.code, "events_undecodable");
}

#[test]
fn the_build_id_is_a_prefixed_hex_digest() {
    let id = torchlens_core::BUILD_ID;
    let hex = id.strip_prefix("torchlens-core-build:").expect("prefixed");
    assert_eq!(hex.len(), 16);
    assert!(hex
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
}

/// The op of `trace` that produced the adapter's value `value`.
fn producer_of(trace: &Trace, value: u64) -> &torchlens_core::model::Op {
    let found = trace.ops.iter().find(|op| op.value() == Some(value));
    found.expect("some op produced the value")
}

#[test]
fn a_value_id_reported_again_names_its_latest_producer() {
    use torchlens_core::dtype::Dtype;
    use torchlens_core::events::{ParamDecl, TensorDesc};

    // Each case: a model with one input `x`, then `reuse` reports an id again and returns the
    // value the last op reads beside `x`.
    let build_case = |reuse: &dyn Fn(&mut EventRecorder, u32, u64) -> u64| {
        let mut recorder = EventRecorder::default();
        let root = recorder.module(&["self"], "Model");
        let x = recorder.input("x", &[4]);
        let read = reuse(&mut recorder, root, x);
        let last = recorder.op("mul", &[x, read], &[4]);
        recorder.output("out", last);
        (build(recorder.events), last)
    };

    // A parameter's id taken by a later value: readers after it see that value's op.
    let (trace, last) = build_case(&|recorder, root, _| {
        let weight = recorder.param(root, "weight", &[4]);
        recorder.events.push(RawEvent::Constant {
            value: TensorDesc {
                tensor: weight,
                shape: [4].as_slice().into(),
                dtype: Dtype::Float32,
                payload: None,
            },
        });
        weight
    });
    let constant = trace.ops.iter().position(|op| op.kind == OpKind::Constant);
    let mul = producer_of(&trace, last);
    assert!(mul.params.is_empty());
    assert_eq!(
        mul.parents.iter().map(|edge| Some(edge.op as usize)).nth(1),
        Some(constant)
    );

    // An op's value id declared again as a parameter: readers after it see the parameter.
    let (trace, last) = build_case(&|recorder, root, x| {
        let activated = recorder.op("relu", &[x], &[4]);
        recorder.events.push(RawEvent::Param(ParamDecl {
            tensor: activated,
            address: "scale".to_string(),
            module: root,
            shape: vec![4],
            dtype: Dtype::Float32,
            trainable: true,
        }));
        activated
    });
    let mul = producer_of(&trace, last);
    assert_eq!(mul.params.len(), 1);
    assert_eq!(mul.parents.len(), 1, "only the input feeds mul as an op");
}

#[test]
fn the_reserved_id_is_refused_as_a_tensor_id_or_payload_handle() {
    use torchlens_core::dtype::Dtype;
    use torchlens_core::events::TensorDesc;

    // An op stores "no id" as 2^64 - 1, so an adapter may not use it for a value or a slot.
    for (tensor, payload) in [(u64::MAX, None), (7, Some(u64::MAX))] {
        let mut recorder = EventRecorder::default();
        recorder.input("x", &[4]);
        recorder.events.push(RawEvent::Constant {
            value: TensorDesc {
                tensor,
                shape: [4].as_slice().into(),
                dtype: Dtype::Float32,
                payload,
            },
        });
        let mut builder = TraceBuilder::new(TraceOptions::default());
        let error = builder.ingest(recorder.events).expect_err("reserved");
        assert_eq!(error.kind, ErrorKind::InvalidEvents);
        assert_eq!(error.code, "events_reserved_id");
    }
}
