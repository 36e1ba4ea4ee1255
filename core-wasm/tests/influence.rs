//! Selection by influence (`downstream_of`, `upstream_of`) on three small graphs whose
//! reachability is worked out by hand in `influence_cases.rs`: a diamond with a residual edge, a
//! graph that branches into two outputs, and a module called twice. Each case is checked on the
//! finished trace, through the text expression the CLI and the viewer take, and live through a
//! capture plan fed in small batches.

mod influence_cases;

use influence_cases::{CASES, LABELS};

use torchlens_core::build::CaptureSession;
use torchlens_core::demo_model::influence_graphs;
use torchlens_core::events::RawEvent;
use torchlens_core::model::{OpKind, TraceOptions};
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
        .map(|&op| trace.ops[op as usize].label.to_string())
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
    let valued = trace.ops.iter().filter(|op| op.value().is_some()).count();
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

fn graph(name: &str) -> Vec<RawEvent> {
    influence_graphs()
        .into_iter()
        .find(|(graph, _)| *graph == name)
        .map(|(_, events)| events)
        .expect("a known graph")
}

#[test]
fn the_graphs_are_labelled_as_the_drawings_assume() {
    for (name, labels) in LABELS {
        let trace = finished(&graph(name));
        let found: Vec<&str> = trace.ops.iter().map(|op| op.label.as_ref()).collect();
        assert_eq!(found, *labels, "{name}");
    }
}

#[test]
fn every_case_matches_its_hand_computed_reachability() {
    for (name, expression, expected) in CASES {
        check(&graph(name), expression, expected);
    }
    for (name, _) in LABELS {
        assert!(
            CASES.iter().filter(|(graph, ..)| graph == name).count() >= 4,
            "{name} has cases"
        );
    }
}

#[test]
fn influence_agrees_with_the_trace_walks() {
    use torchlens_core::query::{ancestors, descendants};
    for (_, events) in influence_graphs() {
        let trace = finished(&events);
        for op in 0..trace.ops.len() as u32 {
            let label = &trace.ops[op as usize].label;
            let down = parse_expression(&format!("downstream_of(label:\"{label}\")")).unwrap();
            let up = parse_expression(&format!("upstream_of(label:\"{label}\")")).unwrap();
            assert_eq!(
                evaluate(&trace, &down, &[]).unwrap(),
                descendants(&trace, op)
            );
            assert_eq!(evaluate(&trace, &up, &[]).unwrap(), ancestors(&trace, op));
        }
    }
}

#[test]
fn downstream_is_decided_with_the_op_and_upstream_waits_for_a_seed_or_the_end() {
    let events = graph("diamond");
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
