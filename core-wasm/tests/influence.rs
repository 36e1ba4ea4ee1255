//! Selection by influence (`downstream_of`, `upstream_of`) on three small graphs whose
//! reachability is worked out by hand below each graph: a diamond with a residual edge, a graph
//! that branches into two outputs, and a module called twice. Each expectation is checked on the
//! finished trace, through the text expression the CLI and the viewer take, and live through a
//! capture plan fed in small batches.

use torchlens_core::build::CaptureSession;
use torchlens_core::events::RawEvent;
use torchlens_core::model::{OpKind, TraceOptions};
use torchlens_core::recorder::EventRecorder;
use torchlens_core::selectors::{evaluate, parse_expression, CapturePlan, Selector, SelectorClass};
use torchlens_core::{Trace, TraceBuilder};

fn finished(events: &[RawEvent]) -> Trace {
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(events.to_vec()).unwrap();
    builder.finish().unwrap()
}

fn labels(trace: &Trace, ops: &[u32]) -> Vec<String> {
    let mut found: Vec<String> = ops
        .iter()
        .map(|&op| trace.ops[op as usize].label.clone())
        .collect();
    found.sort();
    found
}

fn sorted(expected: &[&str]) -> Vec<String> {
    let mut expected: Vec<String> = expected.iter().map(|label| label.to_string()).collect();
    expected.sort();
    expected
}

/// Checks one expression against the hand-computed labels: evaluated on the finished trace, and
/// decided live by a capture plan (batches of one and of three events), where every valued op
/// gets exactly one decision and the selected ones are the expected ones.
fn check(events: &[RawEvent], expression: &str, expected: &[&str]) {
    let selector = parse_expression(expression).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(selector.class(), SelectorClass::Static, "{expression}");
    let trace = finished(events);
    let matched = evaluate(&trace, &selector, &[]).unwrap();
    assert_eq!(labels(&trace, &matched), sorted(expected), "{expression}");
    for batch in [1, 3] {
        let (trace, selected) = live(events, &selector, batch);
        let expected_valued: Vec<String> = sorted(expected)
            .into_iter()
            .filter(|label| {
                let op = trace.find_label(label).expect("label exists");
                trace.ops[op as usize].kind != OpKind::Output
            })
            .collect();
        assert_eq!(
            labels(&trace, &selected),
            expected_valued,
            "{expression}, live in batches of {batch}"
        );
    }
}

/// The ops a capture plan selected. Every valued op is decided, and an op decided twice (a call
/// a `module(...)` term matches judges its outputs again at its exit) gets the same answer.
fn live(events: &[RawEvent], selector: &Selector, batch: usize) -> (Trace, Vec<u32>) {
    let plan = CapturePlan::compile(selector.clone()).unwrap();
    let mut session = CaptureSession::new(TraceOptions::default(), Some(plan));
    let mut decisions = Vec::new();
    for chunk in events.chunks(batch) {
        decisions.extend(session.ingest(chunk.to_vec()).unwrap());
    }
    let (trace, last) = session.finish().unwrap();
    decisions.extend(last);
    let mut answers: Vec<(u32, bool)> = decisions
        .iter()
        .map(|decision| (decision.op, decision.selected))
        .collect();
    answers.sort_unstable();
    answers.dedup();
    let valued = trace.ops.iter().filter(|op| op.value.is_some()).count();
    assert_eq!(
        answers.len(),
        valued,
        "one answer per valued op: {answers:?}"
    );
    let selected = answers
        .into_iter()
        .filter(|(_, selected)| *selected)
        .map(|(op, _)| op)
        .collect();
    (trace, selected)
}

/// x → relu → (sigmoid, tanh) → add → add(·, x) → output: a diamond closed by a residual edge.
fn diamond() -> Vec<RawEvent> {
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "Diamond");
    let x = recorder.input("x", &[2, 4]);
    recorder.enter(root);
    let a = recorder.op("relu", &[x], &[2, 4]);
    let b = recorder.op("sigmoid", &[a], &[2, 4]);
    let c = recorder.op("tanh", &[a], &[2, 4]);
    let d = recorder.op("__add__", &[b, c], &[2, 4]);
    let e = recorder.op("__add__", &[d, x], &[2, 4]);
    recorder.exit(root, &[e]);
    recorder.output("output", e);
    recorder.events
}

#[test]
fn diamond_with_a_residual_edge() {
    let events = diamond();
    let trace = finished(&events);
    assert_eq!(
        trace
            .ops
            .iter()
            .map(|op| op.label.as_str())
            .collect::<Vec<_>>(),
        [
            "input_1",
            "relu_1_2",
            "sigmoid_1_3",
            "tanh_1_4",
            "add_1_5",
            "add_2_6",
            "output_1"
        ]
    );
    // sigmoid reaches the first add, the residual add and the output; not its sibling tanh.
    check(
        &events,
        "downstream_of(func:sigmoid)",
        &["add_1_5", "add_2_6", "output_1"],
    );
    // relu reaches both branches and everything after them.
    check(
        &events,
        "downstream_of(func:relu)",
        &["sigmoid_1_3", "tanh_1_4", "add_1_5", "add_2_6", "output_1"],
    );
    // The input reaches every other op (the residual edge skips the diamond).
    check(
        &events,
        "downstream_of(label:input_1)",
        &[
            "relu_1_2",
            "sigmoid_1_3",
            "tanh_1_4",
            "add_1_5",
            "add_2_6",
            "output_1",
        ],
    );
    // Only the input and relu reach tanh.
    check(&events, "upstream_of(func:tanh)", &["input_1", "relu_1_2"]);
    // The residual add is reached by everything before it.
    check(
        &events,
        "upstream_of(label:add_2_6)",
        &["input_1", "relu_1_2", "sigmoid_1_3", "tanh_1_4", "add_1_5"],
    );
    // On the paths from sigmoid to the output: the two adds (sigmoid and output excluded).
    check(
        &events,
        "downstream_of(func:sigmoid) & upstream_of(label:output_1)",
        &["add_1_5", "add_2_6"],
    );
    // Strict: a seed is in the set only when another seed reaches it (relu reaches tanh).
    check(
        &events,
        "downstream_of(func:relu | func:tanh) & ~func:add",
        &["sigmoid_1_3", "tanh_1_4", "output_1"],
    );
    // The output reaches nothing; nothing reaches the input.
    check(&events, "downstream_of(label:output_1)", &[]);
    check(&events, "upstream_of(label:input_1)", &[]);
}

/// x → relu → sigmoid → output 1, and x · k (a constant) → exp → output 2.
fn branching() -> Vec<RawEvent> {
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "TwoHeads");
    let x = recorder.input("x", &[2, 4]);
    let k = recorder.constant(&[4]);
    recorder.enter(root);
    let h = recorder.op("relu", &[x], &[2, 4]);
    let p = recorder.op("sigmoid", &[h], &[2, 4]);
    let q = recorder.op("mul", &[x, k], &[2, 4]);
    let r = recorder.op("exp", &[q], &[2, 4]);
    recorder.exit(root, &[p, r]);
    recorder.output("output.0", p);
    recorder.output("output.1", r);
    recorder.events
}

#[test]
fn branching_into_two_outputs() {
    let events = branching();
    let trace = finished(&events);
    assert_eq!(
        trace
            .ops
            .iter()
            .map(|op| op.label.as_str())
            .collect::<Vec<_>>(),
        [
            "input_1",
            "constant_1",
            "relu_1_3",
            "sigmoid_1_4",
            "mul_1_5",
            "exp_1_6",
            "output_1",
            "output_2"
        ]
    );
    // relu feeds only the first head.
    check(
        &events,
        "downstream_of(func:relu)",
        &["sigmoid_1_4", "output_1"],
    );
    // The constant feeds only the second head.
    check(
        &events,
        "downstream_of(label:constant_1)",
        &["mul_1_5", "exp_1_6", "output_2"],
    );
    // exp is reached by the input, the constant and mul, not by the other head.
    check(
        &events,
        "upstream_of(func:exp)",
        &["input_1", "constant_1", "mul_1_5"],
    );
    // The first output is reached by the input, relu and sigmoid.
    check(
        &events,
        "upstream_of(label:output_1)",
        &["input_1", "relu_1_3", "sigmoid_1_4"],
    );
    // Two seeds, one in each head.
    check(
        &events,
        "downstream_of(func:relu | func:mul)",
        &["sigmoid_1_4", "exp_1_6", "output_1", "output_2"],
    );
    // Ops that reach the first output but not the second: relu and sigmoid.
    check(
        &events,
        "upstream_of(label:output_1) & ~upstream_of(label:output_2)",
        &["relu_1_3", "sigmoid_1_4"],
    );
}

/// One `fc` module called twice: x → fc → relu → fc → add(·, sigmoid(x)) → output.
fn reused_module() -> Vec<RawEvent> {
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "Reuse");
    let fc = recorder.module(&["fc"], "Linear");
    let weight = recorder.param(fc, "fc.weight", &[4, 4]);
    let bias = recorder.param(fc, "fc.bias", &[4]);
    let x = recorder.input("x", &[2, 4]);
    recorder.enter(root);
    let first = recorder.linear(fc, weight, bias, x, &[2, 4]);
    let activated = recorder.op("relu", &[first], &[2, 4]);
    let second = recorder.linear(fc, weight, bias, activated, &[2, 4]);
    let gate = recorder.op("sigmoid", &[x], &[2, 4]);
    let sum = recorder.op("__add__", &[second, gate], &[2, 4]);
    recorder.exit(root, &[sum]);
    recorder.output("output", sum);
    recorder.events
}

#[test]
fn a_module_called_twice() {
    let events = reused_module();
    let trace = finished(&events);
    assert_eq!(
        trace
            .ops
            .iter()
            .map(|op| op.label.as_str())
            .collect::<Vec<_>>(),
        [
            "input_1",
            "linear_1_2:1",
            "relu_1_3",
            "linear_1_2:2",
            "sigmoid_1_4",
            "add_1_5",
            "output_1"
        ]
    );
    // The first call reaches relu, the second call, the add and the output.
    check(
        &events,
        "downstream_of(in_module:fc:1)",
        &["relu_1_3", "linear_1_2:2", "add_1_5", "output_1"],
    );
    // Both calls' outputs as seeds: the second call is included because the first reaches it.
    check(
        &events,
        "downstream_of(module:fc)",
        &["relu_1_3", "linear_1_2:2", "add_1_5", "output_1"],
    );
    // The second pass is reached by the input, the first pass and relu; not by sigmoid.
    check(
        &events,
        "upstream_of(label:linear_1_2:2)",
        &["input_1", "linear_1_2:1", "relu_1_3"],
    );
    check(
        &events,
        "upstream_of(in_module:fc:2)",
        &["input_1", "linear_1_2:1", "relu_1_3"],
    );
    // A label without a pass names both passes: what reaches either of them.
    check(
        &events,
        "upstream_of(label:linear_1_2)",
        &["input_1", "linear_1_2:1", "relu_1_3"],
    );
    // sigmoid is reached by the input alone and reaches the add and the output.
    check(&events, "upstream_of(func:sigmoid)", &["input_1"]);
    check(
        &events,
        "downstream_of(func:sigmoid)",
        &["add_1_5", "output_1"],
    );
}

#[test]
fn downstream_is_decided_with_the_op_and_upstream_waits_for_a_seed_or_the_end() {
    let events = diamond();
    let decided_in_batches = |expression: &str| {
        let plan = CapturePlan::compile(parse_expression(expression).unwrap()).unwrap();
        let mut session = CaptureSession::new(TraceOptions::default(), Some(plan));
        let mut during = 0;
        for event in &events {
            during += session.ingest([event.clone()]).unwrap().len();
        }
        let (_, last) = session.finish().unwrap();
        (during, last.len())
    };
    // Every valued op (all but the output op) is decided in the batch that carries it.
    assert_eq!(decided_in_batches("downstream_of(func:relu)"), (6, 0));
    // input and relu are decided when tanh (the seed) is recorded; the ops after tanh cannot be
    // ruled out until the end, and neither can sigmoid (a later op could still read it).
    assert_eq!(decided_in_batches("upstream_of(func:tanh)"), (2, 4));
}

#[test]
fn rules_refuse_upstream_terms_and_accept_downstream_ones() {
    let mut session = CaptureSession::new(TraceOptions::default(), None);
    let refused = session
        .add_rule(parse_expression("func:relu & upstream_of(func:tanh)").unwrap())
        .unwrap_err();
    assert_eq!(refused.code, "selector_upstream_in_rule");
    session
        .add_rule(parse_expression("downstream_of(func:relu)").unwrap())
        .expect("a downstream term is decided as each op runs");
}
