//! Labels, pass grouping on and off, module records, constants, literals, in-place ops and
//! distances, on traces built from raw events.

use torchlens_core::demo_model::demo_events;
use torchlens_core::events::EventBatch;
use torchlens_core::model::{OpKind, TraceOptions};
use torchlens_core::query::{ancestors, descendants, summary_rows, summary_rows_in, summary_table};
use torchlens_core::recorder::EventRecorder;
use torchlens_core::{Trace, TraceBuilder};

fn build(events: Vec<torchlens_core::events::RawEvent>, options: TraceOptions) -> Trace {
    let mut builder = TraceBuilder::new(options);
    builder.ingest(events).expect("events are valid");
    builder.finish().expect("trace finishes")
}

fn labels(trace: &Trace) -> Vec<&str> {
    trace.ops.iter().map(|op| op.label.as_ref()).collect()
}

#[test]
fn labels_follow_type_index_and_step_index() {
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[1, 3]);
    let a = recorder.op("linear", &[x], &[1, 4]);
    let b = recorder.op("relu", &[a], &[1, 4]);
    let c = recorder.op("__radd__", &[b, a], &[1, 4]);
    let d = recorder.op("relu", &[c], &[1, 4]);
    recorder.output("out", d);
    let trace = build(recorder.events, TraceOptions::default());
    assert_eq!(
        labels(&trace),
        [
            "input_1",
            "linear_1_2",
            "relu_1_3",
            "add_1_4",
            "relu_2_5",
            "output_1"
        ]
    );
    assert_eq!(trace.func_name(&trace.ops[3]), "__radd__");
    assert_eq!(trace.op_type(&trace.ops[3]), "add");
    assert_eq!(trace.ops[5].kind, OpKind::Output);
    assert_eq!(trace.ops[5].parents[0].op, 4);
    assert_eq!(trace.inputs, vec![0]);
    assert_eq!(trace.outputs, vec![5]);
}

#[test]
fn edges_record_argument_positions_and_children() {
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[2]);
    let y = recorder.input("y", &[2]);
    let sum = recorder.op("sub", &[y, x], &[2]);
    recorder.output("out", sum);
    let trace = build(recorder.events, TraceOptions::default());
    let sub = &trace.ops[2];
    assert_eq!((sub.parents[0].op, sub.parents[0].position), (1, 0));
    assert_eq!((sub.parents[1].op, sub.parents[1].position), (0, 1));
    assert_eq!(trace.ops[0].children[0].op, 2);
    assert_eq!(trace.ops[0].children[0].position, 1);
}

#[test]
fn repeated_module_calls_group_into_passes() {
    let trace = build(demo_events(), TraceOptions::default());
    let cell_ops: Vec<&str> = trace
        .ops
        .iter()
        .filter(|op| op.label.starts_with("tanh") || op.label.starts_with("linear_2"))
        .map(|op| op.label.as_ref())
        .collect();
    assert_eq!(
        cell_ops,
        [
            "linear_2_5:1",
            "tanh_1_6:1",
            "linear_2_5:2",
            "tanh_1_6:2",
            "linear_2_5:3",
            "tanh_1_6:3"
        ]
    );
    let tanh_layer = trace
        .layers
        .iter()
        .find(|layer| &*layer.label == "tanh_1_6")
        .unwrap();
    assert_eq!(tanh_layer.ops.len(), 3);
    let passes: Vec<u32> = tanh_layer
        .ops
        .iter()
        .map(|&op| trace.ops[op as usize].pass)
        .collect();
    assert_eq!(passes, [1, 2, 3]);
    // A label without a pass finds the first pass; with a pass, that pass.
    assert_eq!(trace.find_label("tanh_1_6"), Some(tanh_layer.ops[0]));
    assert_eq!(trace.find_label("tanh_1_6:3"), Some(tanh_layer.ops[2]));
    assert_eq!(trace.find_label("tanh_1_6:4"), None);
    // Module calls are numbered.
    let cell = trace
        .modules
        .iter()
        .position(|module| module.address() == "cell")
        .unwrap();
    assert_eq!(trace.modules[cell].calls.len(), 3);
    let third = trace.modules[cell].calls[2];
    assert_eq!(trace.call_name(third), "cell:3");
    assert_eq!(
        trace.call_name(trace.ops[tanh_layer.ops[2] as usize].module_call),
        "cell:3"
    );
}

#[test]
fn recurrence_detection_off_keeps_one_record_per_call() {
    let options = TraceOptions {
        recurrence_detection: false,
        ..TraceOptions::default()
    };
    let trace = build(demo_events(), options);
    assert!(trace.ops.iter().all(|op| !op.label.contains(':')));
    assert_eq!(trace.layers.len(), trace.ops.len());
    let tanh: Vec<&str> = labels(&trace)
        .into_iter()
        .filter(|label| label.starts_with("tanh"))
        .collect();
    assert_eq!(tanh, ["tanh_1_6", "tanh_2_8", "tanh_3_10"]);
    // Site keys do not depend on grouping.
    let grouped = build(demo_events(), TraceOptions::default());
    let sites =
        |trace: &Trace| -> Vec<String> { trace.ops.iter().map(|op| trace.site_key(op)).collect() };
    assert_eq!(sites(&trace), sites(&grouped));
}

#[test]
fn modules_params_constants_and_module_tree() {
    let trace = build(demo_events(), TraceOptions::default());
    assert_eq!(trace.modules[0].address(), "self");
    assert_eq!(trace.modules[0].class_name, "RecurrentMlp");
    let linear = trace
        .modules
        .iter()
        .position(|module| module.address() == "cell.linear")
        .unwrap();
    let cell = trace
        .modules
        .iter()
        .position(|module| module.address() == "cell")
        .unwrap();
    assert_eq!(trace.modules[linear].parent, Some(cell as u32));
    assert_eq!(trace.modules[cell].parent, Some(0));
    let weight = trace
        .params
        .iter()
        .find(|param| param.address == "cell.linear.weight")
        .unwrap();
    assert_eq!(
        weight.users.len(),
        3,
        "shared weights are read in every pass"
    );
    let constant = trace
        .ops
        .iter()
        .position(|op| op.kind == OpKind::Constant)
        .unwrap();
    assert_eq!(&*trace.ops[constant].label, "constant_1");
    assert!(trace.ops[constant].parents.is_empty());
    assert!(trace.ops[constant].payload().is_some());
    let add = trace
        .ops
        .iter()
        .find(|op| op.label.starts_with("add"))
        .unwrap();
    assert!(add.parents.iter().any(|edge| edge.op as usize == constant));
}

#[test]
fn shared_modules_and_containers_keep_all_addresses() {
    let mut recorder = EventRecorder::default();
    let root = recorder.module(&["self"], "Net");
    recorder.container("blocks", "ModuleList");
    let shared = recorder.module(&["blocks.0", "blocks.1"], "Linear");
    let x = recorder.input("x", &[2]);
    recorder.enter(root);
    recorder.enter(shared);
    let a = recorder.op("linear", &[x], &[2]);
    recorder.exit(shared, &[a]);
    recorder.enter(shared);
    let b = recorder.op("linear", &[a], &[2]);
    recorder.exit(shared, &[b]);
    recorder.exit(root, &[b]);
    recorder.output("out", b);
    let trace = build(recorder.events, TraceOptions::default());
    let container = trace
        .modules
        .iter()
        .find(|module| module.address() == "blocks")
        .unwrap();
    assert!(container.container);
    assert!(container.calls.is_empty());
    let shared = trace
        .modules
        .iter()
        .find(|module| module.address() == "blocks.0")
        .unwrap();
    assert_eq!(shared.all_addresses, ["blocks.0", "blocks.1"]);
    assert_eq!(shared.calls.len(), 2);
    assert_eq!(
        labels(&trace),
        ["input_1", "linear_1_2:1", "linear_1_2:2", "output_1"]
    );
}

#[test]
fn literal_producers_in_place_and_multi_output_ops() {
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[4]);
    let ones = recorder.op("ones", &[], &[4]);
    let y = recorder.op("mul", &[x, ones], &[4]);
    recorder.in_place_op("add_", y, &[x], &[4]);
    let halves = recorder.multi_output_op("split", &[y], &[2], 2);
    recorder.output("first", halves[0]);
    recorder.output("second", halves[1]);
    let trace = build(recorder.events, TraceOptions::default());
    assert_eq!(trace.ops[1].kind, OpKind::LiteralProducer);
    assert_eq!(trace.func_name(&trace.ops[1]), "ones");
    assert!(trace.ops[1].parents.is_empty());
    let in_place = &trace.ops[3];
    assert!(in_place.in_place);
    assert_eq!(&*in_place.label, "add_1_4");
    // The split reads the in-place result, not the value before it.
    assert_eq!(trace.ops[4].parents[0].op, 3);
    assert_eq!(trace.ops[4].output_index(), Some(0));
    assert_eq!(trace.ops[5].output_index(), Some(1));
    assert_eq!(&*trace.ops[4].label, "split_1_5");
    assert_eq!(&*trace.ops[5].label, "split_2_6");
}

#[test]
fn distances_and_ancestor_sets() {
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[2]);
    let y = recorder.input("y", &[2]);
    let a = recorder.op("relu", &[x], &[2]);
    let b = recorder.op("relu", &[a], &[2]);
    let c = recorder.op("add", &[b, x], &[2]);
    let unused = recorder.op("sigmoid", &[y], &[2]);
    recorder.output("out", c);
    let _ = unused;
    let trace = build(recorder.events, TraceOptions::default());
    let add = &trace.ops[4];
    let distances = add.distances().unwrap();
    assert_eq!(distances.min_from_input, Some(1));
    assert_eq!(distances.max_from_input, Some(3));
    assert_eq!(distances.min_to_output, Some(1));
    assert_eq!(add.input_ancestors()[..], [0]);
    assert_eq!(add.output_descendants()[..], [6]);
    let sigmoid = &trace.ops[5];
    assert_eq!(sigmoid.distances().unwrap().min_to_output, None);
    assert!(sigmoid.output_descendants().is_empty());
    assert_eq!(sigmoid.input_ancestors()[..], [1]);
    assert_eq!(ancestors(&trace, 4), vec![0, 2, 3]);
    assert_eq!(descendants(&trace, 0), vec![2, 3, 4, 6]);

    let options = TraceOptions {
        compute_input_output_distances: false,
        ..TraceOptions::default()
    };
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[2]);
    let y = recorder.op("relu", &[x], &[2]);
    recorder.output("out", y);
    let trace = build(recorder.events, options);
    assert!(trace
        .ops
        .iter()
        .all(|op| op.distances().is_none() && op.input_ancestors().is_empty()));
}

#[test]
fn unregistered_values_become_constants_and_mark_capture_unverified() {
    let mut recorder = EventRecorder::default();
    let x = recorder.input("x", &[2]);
    let y = recorder.op("add", &[x, 999], &[2]);
    recorder.output("out", y);
    let trace = build(recorder.events, TraceOptions::default());
    assert!(!trace.capture.verified);
    assert_eq!(
        trace.capture.reason.as_deref(),
        Some("unregistered_value_read")
    );
    assert_eq!(trace.ops[1].kind, OpKind::Constant);
    assert!(trace.ops[1].payload().is_none());
}

#[test]
fn inconsistent_events_are_typed_errors() {
    let mut recorder = EventRecorder::default();
    let module = recorder.module(&["fc"], "Linear");
    recorder.enter(module);
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(recorder.events.clone()).unwrap();
    let error = builder.finish().unwrap_err();
    assert_eq!(error.code, "events_unclosed_module_call");

    let mut builder = TraceBuilder::new(TraceOptions::default());
    let error = builder
        .ingest(vec![torchlens_core::events::RawEvent::Enter { module: 42 }])
        .unwrap_err();
    assert_eq!(error.code, "events_unknown_module");

    let mut builder = TraceBuilder::new(TraceOptions::default());
    let other = EventRecorder::default();
    let _ = other;
    let mut recorder = EventRecorder::default();
    let a = recorder.module(&["a"], "A");
    let b = recorder.module(&["b"], "B");
    recorder.enter(a);
    recorder.exit(b, &[]);
    let error = builder.ingest(recorder.events).unwrap_err();
    assert_eq!(error.code, "events_unbalanced_module_exit");

    let mut builder = TraceBuilder::new(TraceOptions::default());
    let error = builder.ingest_postcard(&[0xff, 0xff, 0xff]).unwrap_err();
    assert_eq!(error.code, "events_undecodable");
}

#[test]
fn postcard_batches_ingest_like_events() {
    let events = demo_events();
    let direct = build(events.clone(), TraceOptions::default());
    let mut builder = TraceBuilder::new(TraceOptions::default());
    for chunk in events.chunks(3) {
        let batch = EventBatch {
            events: chunk.to_vec(),
        };
        builder.ingest_postcard(&batch.to_postcard()).unwrap();
    }
    assert_eq!(builder.finish().unwrap(), direct);
}

#[test]
fn summary_table_lists_every_op() {
    let trace = build(demo_events(), TraceOptions::default());
    let table = summary_table(&trace);
    for op in &trace.ops {
        assert!(table.contains(&*op.label), "{} missing", op.label);
    }
    assert!(table.contains("cell.linear:2"));
}

#[test]
fn summary_rows_in_a_window_match_the_full_rows() {
    let trace = build(demo_events(), TraceOptions::default());
    let all = summary_rows(&trace);
    assert_eq!(summary_rows_in(&trace, 3, 4), all[3..7].to_vec());
    // Clipped to the trace, and empty past its end, even for counts that would overflow.
    let len = trace.ops.len() as u32;
    assert_eq!(
        summary_rows_in(&trace, len - 2, u32::MAX),
        all[all.len() - 2..].to_vec()
    );
    assert!(summary_rows_in(&trace, len + 5, 10).is_empty());
}

#[test]
fn loops_written_in_the_forward_group_by_structure() {
    // for _ in range(3): x = tanh(cell(x))   -- tanh runs in the root, cell is a module
    let mut recorder = EventRecorder::default();
    let root = recorder.module(&["self"], "Loop");
    let cell = recorder.module(&["cell"], "Linear");
    let mut x = recorder.input("x", &[2]);
    recorder.enter(root);
    for _ in 0..3 {
        recorder.enter(cell);
        let mixed = recorder.op("linear", &[x], &[2]);
        recorder.exit(cell, &[mixed]);
        x = recorder.op("tanh", &[mixed], &[2]);
    }
    // Reading one value twice is two sites, not two passes.
    let first = recorder.op("relu", &[x], &[2]);
    let second = recorder.op("relu", &[x], &[2]);
    let sum = recorder.op("add", &[first, second], &[2]);
    recorder.exit(root, &[sum]);
    recorder.output("out", sum);
    let trace = build(recorder.events, TraceOptions::default());
    assert_eq!(
        labels(&trace),
        [
            "input_1",
            "linear_1_2:1",
            "tanh_1_3:1",
            "linear_1_2:2",
            "tanh_1_3:2",
            "linear_1_2:3",
            "tanh_1_3:3",
            "relu_1_4",
            "relu_2_5",
            "add_1_6",
            "output_1"
        ]
    );
}

#[test]
fn a_loop_continues_the_newest_layer_of_its_structure() {
    // h = cell(x); a = tanh(h); b = tanh(h)   -- one value read twice: two layers, one key
    // h = cell(h); c = tanh(h)                -- the next iteration continues the newer one
    let mut recorder = EventRecorder::default();
    let root = recorder.module(&["self"], "Loop");
    let cell = recorder.module(&["cell"], "Linear");
    let x = recorder.input("x", &[2]);
    recorder.enter(root);
    recorder.enter(cell);
    let first = recorder.op("linear", &[x], &[2]);
    recorder.exit(cell, &[first]);
    let a = recorder.op("tanh", &[first], &[2]);
    let b = recorder.op("tanh", &[first], &[2]);
    recorder.enter(cell);
    let second = recorder.op("linear", &[first], &[2]);
    recorder.exit(cell, &[second]);
    let c = recorder.op("tanh", &[second], &[2]);
    let ab = recorder.op("add", &[a, b], &[2]);
    let sum = recorder.op("add", &[ab, c], &[2]);
    recorder.exit(root, &[sum]);
    recorder.output("out", sum);
    let trace = build(recorder.events, TraceOptions::default());
    assert_eq!(
        labels(&trace),
        [
            "input_1",
            "linear_1_2:1",
            "tanh_1_3",
            "tanh_2_4:1",
            "linear_1_2:2",
            "tanh_2_4:2",
            "add_1_5",
            "add_2_6",
            "output_1"
        ]
    );
}
