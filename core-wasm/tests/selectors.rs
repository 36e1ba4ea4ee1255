//! Every selector kind and their compositions, evaluated over finished traces and live through
//! capture plans.

use torchlens_core::build::{CaptureSession, ValueDecision};
use torchlens_core::demo_model::demo_events;
use torchlens_core::events::RawEvent;
use torchlens_core::model::{OpKind, TraceOptions};
use torchlens_core::selectors::{
    evaluate, CapturePlan, Selector, SelectorClass, SelectorNode as Node, WhereResult,
};
use torchlens_core::{Trace, TraceBuilder};

fn demo_trace() -> Trace {
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(demo_events()).unwrap();
    builder.finish().unwrap()
}

fn matched_labels(trace: &Trace, selector: &Selector) -> Vec<String> {
    evaluate(trace, selector, &[])
        .unwrap()
        .into_iter()
        .map(|op| trace.ops[op as usize].label.to_string())
        .collect()
}

fn leaf(node: Node) -> Selector {
    Selector::leaf(node)
}

/// `left op right` for two leaves.
fn combine(left: Node, right: Node, make: impl Fn(u32, u32) -> Node) -> Selector {
    Selector {
        nodes: vec![left, right, make(0, 1)],
        root: 2,
    }
}

#[test]
fn func_matches_name_or_normalized_type() {
    let trace = demo_trace();
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Func("tanh".into()))),
        ["tanh_1_6:1", "tanh_1_6:2", "tanh_1_6:3"]
    );
    // `add` matches the `__add__` operator; the exact dunder matches too.
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Func("add".into()))),
        ["add_1_8"]
    );
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Func("__add__".into()))),
        ["add_1_8"]
    );
    assert!(matched_labels(&trace, &leaf(Node::Func("conv2d".into()))).is_empty());
}

#[test]
fn label_matches_exactly_and_across_passes() {
    let trace = demo_trace();
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Label("tanh_1_6".into()))),
        ["tanh_1_6:1", "tanh_1_6:2", "tanh_1_6:3"]
    );
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Label("tanh_1_6:2".into()))),
        ["tanh_1_6:2"]
    );
    assert!(matched_labels(&trace, &leaf(Node::Label("tanh_1".into()))).is_empty());
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Label("input_1".into()))),
        ["input_1"]
    );
}

#[test]
fn label_contains_is_case_insensitive_substring() {
    let trace = demo_trace();
    assert_eq!(
        matched_labels(&trace, &leaf(Node::LabelContains("TANH_1_6:2".into()))),
        ["tanh_1_6:2"]
    );
    assert_eq!(
        matched_labels(&trace, &leaf(Node::LabelContains("linear".into()))).len(),
        5
    );
}

#[test]
fn module_matches_call_outputs_and_in_module_matches_everything_inside() {
    let trace = demo_trace();
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Module("cell".into()))),
        ["tanh_1_6:1", "tanh_1_6:2", "tanh_1_6:3"]
    );
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Module("cell:2".into()))),
        ["tanh_1_6:2"]
    );
    assert_eq!(
        matched_labels(&trace, &leaf(Node::InModule("cell:3".into()))),
        ["linear_2_5:3", "tanh_1_6:3"]
    );
    assert_eq!(
        matched_labels(&trace, &leaf(Node::InModule("cell.linear".into()))),
        ["linear_2_5:1", "linear_2_5:2", "linear_2_5:3"]
    );
    assert_eq!(
        matched_labels(&trace, &leaf(Node::Module("fc_out".into()))),
        ["linear_3_7"]
    );
}

#[test]
fn and_or_not_compose() {
    let trace = demo_trace();
    let both = combine(
        Node::Func("linear".into()),
        Node::InModule("cell".into()),
        |a, b| Node::And(vec![a, b]),
    );
    assert_eq!(
        matched_labels(&trace, &both),
        ["linear_2_5:1", "linear_2_5:2", "linear_2_5:3"]
    );
    let either = combine(
        Node::Func("relu".into()),
        Node::Func("softmax".into()),
        |a, b| Node::Or(vec![a, b]),
    );
    assert_eq!(matched_labels(&trace, &either), ["relu_1_4", "softmax_1_9"]);
    let outside = Selector {
        nodes: vec![
            Node::Func("linear".into()),
            Node::InModule("cell".into()),
            Node::Not(1),
            Node::And(vec![0, 2]),
        ],
        root: 3,
    };
    assert_eq!(
        matched_labels(&trace, &outside),
        ["linear_1_3", "linear_3_7"]
    );
    let everything_but = Selector {
        nodes: vec![Node::Func("tanh".into()), Node::Not(0)],
        root: 1,
    };
    assert_eq!(
        matched_labels(&trace, &everything_but).len(),
        trace.ops.len() - 3
    );
}

#[test]
fn temporal_selectors_look_at_neighbours() {
    let trace = demo_trace();
    let followed = Selector {
        nodes: vec![
            Node::Func("linear".into()),
            Node::Func("tanh".into()),
            Node::FollowedBy {
                first: 0,
                then: 1,
                within: 1,
            },
        ],
        root: 2,
    };
    assert_eq!(
        matched_labels(&trace, &followed),
        ["linear_2_5:1", "linear_2_5:2", "linear_2_5:3"]
    );
    assert_eq!(followed.class(), SelectorClass::Temporal);
    let preceded = Selector {
        nodes: vec![
            Node::Func("linear".into()),
            Node::Func("tanh".into()),
            Node::PrecededBy {
                first: 0,
                before: 1,
                within: 1,
            },
        ],
        root: 2,
    };
    assert_eq!(
        matched_labels(&trace, &preceded),
        ["linear_2_5:2", "linear_2_5:3", "linear_3_7"]
    );
    let wide = Selector {
        nodes: vec![
            Node::Func("relu".into()),
            Node::Func("tanh".into()),
            Node::FollowedBy {
                first: 0,
                then: 1,
                within: 2,
            },
        ],
        root: 2,
    };
    assert_eq!(matched_labels(&trace, &wide), ["relu_1_4"]);
}

#[test]
fn value_dependent_selectors_use_host_results() {
    let trace = demo_trace();
    let selector = Selector {
        nodes: vec![
            Node::Func("tanh".into()),
            Node::Where(7),
            Node::And(vec![0, 1]),
        ],
        root: 2,
    };
    assert_eq!(selector.class(), SelectorClass::ValueDependent);
    let error = evaluate(&trace, &selector, &[]).unwrap_err();
    assert_eq!(error.code, "selector_value_dependent_unresolved");
    let second_pass = trace.find_label("tanh_1_6:2").unwrap();
    let results = [WhereResult {
        predicate: 7,
        matched: vec![0, second_pass],
    }];
    assert_eq!(
        evaluate(&trace, &selector, &results).unwrap(),
        vec![second_pass]
    );
    let error = CapturePlan::compile(selector).unwrap_err();
    assert_eq!(error.code, "selector_value_dependent_in_plan");
}

#[test]
fn malformed_selectors_are_typed_errors() {
    let trace = demo_trace();
    let cases = [
        (
            Selector {
                nodes: vec![],
                root: 0,
            },
            "selector_size_invalid",
        ),
        (
            Selector {
                nodes: vec![Node::Func("relu".into())],
                root: 3,
            },
            "selector_root_out_of_range",
        ),
        (
            Selector {
                nodes: vec![Node::Not(0)],
                root: 0,
            },
            "selector_child_order",
        ),
        (
            Selector {
                nodes: vec![Node::And(vec![])],
                root: 0,
            },
            "selector_empty_composite",
        ),
        (
            Selector {
                nodes: vec![
                    Node::Func("a".into()),
                    Node::FollowedBy {
                        first: 0,
                        then: 0,
                        within: 0,
                    },
                ],
                root: 1,
            },
            "selector_window_invalid",
        ),
    ];
    for (selector, code) in cases {
        assert_eq!(evaluate(&trace, &selector, &[]).unwrap_err().code, code);
    }
}

/// Runs the demo events through a session in small batches and collects decisions.
fn live_decisions(selector: Selector, batch: usize) -> (Trace, Vec<ValueDecision>, Vec<usize>) {
    let plan = CapturePlan::compile(selector).unwrap();
    let mut session = CaptureSession::new(TraceOptions::default(), Some(plan));
    let events: Vec<RawEvent> = demo_events();
    let mut decisions = Vec::new();
    let mut decided_per_batch = Vec::new();
    for chunk in events.chunks(batch) {
        let new = session.ingest(chunk.to_vec()).unwrap();
        decided_per_batch.push(new.len());
        decisions.extend(new);
    }
    let (trace, last) = session.finish().unwrap();
    decided_per_batch.push(last.len());
    decisions.extend(last);
    (trace, decisions, decided_per_batch)
}

#[test]
fn live_plans_agree_with_static_evaluation() {
    let selectors = [
        leaf(Node::Func("tanh".into())),
        leaf(Node::Label("linear_2_5:2".into())),
        leaf(Node::LabelContains("relu".into())),
        // A first pass gains `:1` only once its layer runs again.
        leaf(Node::LabelContains(":1".into())),
        leaf(Node::LabelContains("_5:1".into())),
        leaf(Node::Module("cell".into())),
        leaf(Node::InModule("cell:2".into())),
        combine(
            Node::Module("cell".into()),
            Node::Func("softmax".into()),
            |a, b| Node::Or(vec![a, b]),
        ),
        Selector {
            nodes: vec![
                Node::Func("linear".into()),
                Node::Func("tanh".into()),
                Node::FollowedBy {
                    first: 0,
                    then: 1,
                    within: 1,
                },
            ],
            root: 2,
        },
    ];
    for selector in selectors {
        let finished = demo_trace();
        let expected = evaluate(&finished, &selector, &[]).unwrap();
        let (trace, decisions, _) = live_decisions(selector.clone(), 2);
        // Output ops repeat their producer's value and get no decision of their own.
        let valued = trace.ops.iter().filter(|op| op.value().is_some()).count();
        let mut seen: Vec<u32> = decisions.iter().map(|decision| decision.op).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), valued, "every valued op decided exactly once");
        assert_eq!(decisions.len(), valued);
        for decision in &decisions {
            let op = &trace.ops[decision.op as usize];
            assert_ne!(op.kind, OpKind::Output);
            assert_eq!(
                op.value(),
                Some(decision.value),
                "decided by the op's own value"
            );
        }
        let mut selected: Vec<u32> = decisions
            .iter()
            .filter(|decision| decision.selected)
            .map(|decision| decision.op)
            .collect();
        selected.sort_unstable();
        let expected: Vec<u32> = expected
            .into_iter()
            .filter(|&op| trace.ops[op as usize].kind != OpKind::Output)
            .collect();
        assert_eq!(selected, expected, "selector {selector:?}");
    }
}

#[test]
fn static_function_plans_decide_in_the_batch_that_carries_the_op() {
    let (trace, _, per_batch) = live_decisions(leaf(Node::Func("tanh".into())), 1);
    // Nothing is left for the end: each op was decided as it arrived.
    assert_eq!(per_batch.last(), Some(&0));
    let valued = trace.ops.iter().filter(|op| op.value().is_some()).count();
    assert_eq!(per_batch.iter().sum::<usize>(), valued);
}

#[test]
fn a_value_a_matched_call_returns_without_computing_it_is_selected_at_the_exit() {
    use torchlens_core::recorder::EventRecorder;
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "Net");
    let block = recorder.module(&["block"], "Block");
    let identity = recorder.module(&["identity"], "Identity");
    let x = recorder.input("x", &[2, 4]);
    recorder.enter(root);
    recorder.enter(block);
    let hidden = recorder.op("relu", &[x], &[2, 4]);
    recorder.exit(block, &[hidden]);
    recorder.enter(identity);
    recorder.exit(identity, &[hidden]);
    let out = recorder.op("tanh", &[hidden], &[2, 4]);
    recorder.exit(root, &[out]);
    recorder.output("output", out);
    let events = recorder.events;
    for selector in [
        leaf(Node::Module("identity".into())),
        combine(
            Node::Module("identity".into()),
            Node::Func("relu".into()),
            |a, b| Node::And(vec![a, b]),
        ),
        leaf(Node::Module("self".into())),
    ] {
        let mut session = CaptureSession::new(
            TraceOptions::default(),
            Some(CapturePlan::compile(selector.clone()).unwrap()),
        );
        let mut decisions = Vec::new();
        for event in events.iter().cloned() {
            decisions.extend(session.ingest([event]).unwrap());
        }
        let (trace, last) = session.finish().unwrap();
        decisions.extend(last);
        let mut selected: Vec<u32> = decisions
            .iter()
            .filter(|decision| decision.selected)
            .map(|decision| decision.op)
            .collect();
        selected.sort_unstable();
        selected.dedup();
        let expected: Vec<u32> = evaluate(&trace, &selector, &[])
            .unwrap()
            .into_iter()
            .filter(|&op| trace.ops[op as usize].kind != OpKind::Output)
            .collect();
        assert_eq!(selected, expected, "selector {selector:?}");
        assert!(!expected.is_empty());
    }
}

#[test]
fn rules_answer_op_by_op_and_wait_for_a_calls_exit() {
    use torchlens_core::recorder::EventRecorder;
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "Net");
    let block = recorder.module(&["block"], "Block");
    let x = recorder.input("x", &[2, 4]);
    recorder.enter(root);
    recorder.enter(block);
    let inner = recorder.op("relu", &[x], &[2, 4]);
    let events_inside = recorder.events.len();
    recorder.exit(block, &[inner]);
    let events = recorder.events;
    let mut session = CaptureSession::new(TraceOptions::default(), None);
    let by_func = session.add_rule(leaf(Node::Func("relu".into()))).unwrap();
    let by_label = session
        .add_rule(leaf(Node::Label("relu_1_2".into())))
        .unwrap();
    let by_boundary = session
        .add_rule(leaf(Node::Module("block".into())))
        .unwrap();
    session.ingest(events[..events_inside].to_vec()).unwrap();
    assert_eq!(session.rule_matches(by_func, inner).unwrap(), Some(true));
    assert_eq!(session.rule_matches(by_label, inner).unwrap(), Some(true));
    assert_eq!(session.rule_matches(by_boundary, inner).unwrap(), None);
    session.ingest(events[events_inside..].to_vec()).unwrap();
    assert_eq!(
        session.rule_matches(by_boundary, inner).unwrap(),
        Some(true)
    );
    assert_eq!(session.rule_matches(by_boundary, x).unwrap(), Some(false));
    assert_eq!(
        session.rule_matches(9, inner).unwrap_err().code,
        "rule_unknown"
    );
    assert_eq!(
        session.rule_matches(by_func, 12345).unwrap_err().code,
        "events_unknown_rule_value"
    );
    let refused = session
        .add_rule(Selector::leaf(Node::Where(0)))
        .unwrap_err();
    assert_eq!(refused.code, "selector_value_dependent_in_plan");
    assert!(!session
        .rule_live_plan(by_boundary)
        .unwrap()
        .nodes
        .is_empty());
}
