//! The optional backward pass of a trace: stored after the trace in the body, gradients as
//! `grad/<op label>` payload tensors; bodies without one keep their exact bytes, so files
//! written before backward passes existed still decode; drawn as its own layout view; listed by
//! the summary table.

#[path = "tlspec_support.rs"]
mod support;

use std::collections::BTreeMap;
use support::{body_of, chain_trace, manifest, payloads_for, Step};
use torchlens_core::layout::{layout, LayoutView};
use torchlens_core::model::{BackwardGraph, GradFnNode, SavedGrad};
use torchlens_core::query::summary_table;
use torchlens_core::tlspec;
use torchlens_core::Trace;

const GRAD_SLOT: u64 = 1 << 48;

fn steps() -> Vec<Step> {
    vec![
        Step {
            dtype: "float32",
            shape: vec![2, 3],
            payload: true,
        },
        Step {
            dtype: "float32",
            shape: vec![2, 3],
            payload: false,
        },
    ]
}

fn node(label: &str, class_name: &str, op: Option<u32>, children: Vec<u32>) -> GradFnNode {
    GradFnNode {
        label: label.to_string(),
        class_name: class_name.to_string(),
        op,
        param: None,
        children,
    }
}

/// input_1 → relu_1_1 → add_1_2 → output_1, with the backward graph torch would record and
/// both compute ops' gradients saved.
fn trace_with_backward() -> Trace {
    let mut trace = chain_trace(&steps(), false);
    assert_eq!(&*trace.ops[1].label, "relu_1_2");
    assert_eq!(&*trace.ops[2].label, "add_1_3");
    trace.backward = Some(BackwardGraph {
        passes: 2,
        nodes: vec![
            node("add_back_1_1", "AddBackward0", Some(2), vec![1]),
            node("relu_back_1_2", "ReluBackward0", Some(1), vec![2]),
            GradFnNode {
                param: Some("w".to_string()),
                ..node("accumulategrad_back_1_3", "AccumulateGrad", None, vec![])
            },
        ],
        grads: vec![
            SavedGrad {
                op: 1,
                slot: Some(GRAD_SLOT + 1),
            },
            SavedGrad {
                op: 2,
                slot: Some(GRAD_SLOT + 2),
            },
        ],
    });
    trace
}

fn encode(trace: &Trace) -> (Vec<u8>, BTreeMap<u64, Vec<u8>>) {
    let mut payloads = payloads_for(trace);
    for slot in [GRAD_SLOT + 1, GRAD_SLOT + 2] {
        payloads.insert(slot, support::pattern(slot % 97, 24));
    }
    let file = tlspec::encode_with_payloads(trace, &manifest(), |slot| {
        payloads.get(&slot).map(Vec::as_slice)
    })
    .expect("encodes");
    (file, payloads)
}

#[test]
fn a_backward_pass_round_trips_with_its_gradients() {
    let original = trace_with_backward();
    let (file, payloads) = encode(&original);
    let (header, decoded) = tlspec::decode_file(&file).expect("decodes");
    let backward = decoded
        .backward
        .as_ref()
        .expect("the backward pass is back");
    let expected = original.backward.as_ref().expect("set");
    assert_eq!(backward.passes, 2);
    assert_eq!(backward.nodes, expected.nodes);
    for grad in &backward.grads {
        let label = &decoded.ops[grad.op as usize].label;
        let slot = grad.slot.expect("stored") as usize;
        let entry = &header.payloads[slot];
        assert_eq!(entry.label, format!("grad/{label}"));
        assert_eq!(entry.dtype, "float32");
        assert_eq!(entry.shape, vec![2, 3]);
        let bytes = &file[entry.offset as usize..(entry.offset + entry.length) as usize];
        assert_eq!(
            bytes,
            payloads[&(GRAD_SLOT + u64::from(grad.op))].as_slice()
        );
    }
    assert_eq!(backward.grads.len(), 2);
    // The forward payload is where it was, under its own label.
    assert!(header
        .payloads
        .iter()
        .any(|entry| entry.label == "relu_1_2"));
}

#[test]
fn a_body_without_a_backward_pass_keeps_its_bytes() {
    let trace = chain_trace(&steps(), true);
    // What every writer before backward passes wrote: the postcard TraceBody alone.
    assert_eq!(tlspec::trace_to_body(&trace), body_of(&trace, 2));
    let decoded = tlspec::trace_from_body(&body_of(&trace, 2)).expect("decodes");
    assert_eq!(decoded.backward, None);
    let with = trace_with_backward();
    let round = tlspec::trace_from_body(&tlspec::trace_to_body(&with)).expect("decodes");
    assert_eq!(round.backward, with.backward);
}

#[test]
fn the_seed_files_written_before_backward_passes_still_decode() {
    for name in ["valid_sample", "valid_demo"] {
        let path = format!(
            "{}/../fuzz/seeds/decode_tlspec/{name}.tlspec",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).expect("seed file");
        let (_, trace) = tlspec::decode_file(&bytes).expect("decodes");
        assert_eq!(trace.backward, None, "{name}");
    }
}

#[test]
fn a_backward_graph_that_points_backwards_or_out_of_range_is_refused() {
    let mut looped = trace_with_backward();
    looped.backward.as_mut().expect("set").nodes[1].children = vec![0];
    let error = tlspec::encode_with_payloads(&looped, &manifest(), |_| None).expect_err("refused");
    assert_eq!(error.code, "backward_graph_invalid");
    let mut missing_op = trace_with_backward();
    missing_op.backward.as_mut().expect("set").nodes[0].op = Some(99);
    assert_eq!(
        tlspec::validate_trace(&missing_op)
            .expect_err("refused")
            .code,
        "backward_graph_invalid"
    );
    // A hand-made body whose backward part is damaged is a decode error, not a panic.
    let mut body = tlspec::trace_to_body(&trace_with_backward());
    let cut = body.len() - 3;
    body.truncate(cut);
    assert!(tlspec::trace_from_body(&body).is_err());
}

#[test]
fn the_backward_view_draws_one_node_per_grad_fn_and_one_edge_per_gradient() {
    let trace = trace_with_backward();
    let placed = layout(&trace, &LayoutView::Backward).expect("lays out");
    let labels: Vec<&str> = placed
        .nodes
        .iter()
        .map(|node| node.label.as_str())
        .collect();
    assert_eq!(
        labels,
        ["add_back_1_1", "relu_back_1_2", "accumulategrad_back_1_3"]
    );
    let edges: Vec<(u32, u32)> = placed
        .edges
        .iter()
        .map(|edge| (edge.from, edge.to))
        .collect();
    assert_eq!(edges, [(0, 1), (1, 2)]);
    assert_eq!(placed.nodes[0].ops, [2]);
    assert!(placed.nodes[0].detail.contains("add_1_3"));
    assert!(placed.nodes[2].detail.contains('w'));
    // Layered top to bottom in gradient-flow order.
    assert!(placed.nodes[0].y < placed.nodes[1].y && placed.nodes[1].y < placed.nodes[2].y);
    let without = chain_trace(&steps(), false);
    assert_eq!(
        layout(&without, &LayoutView::Backward)
            .expect_err("no backward pass")
            .code,
        "layout_no_backward"
    );
}

#[test]
fn the_summary_lists_the_backward_pass() {
    let table = summary_table(&trace_with_backward());
    assert!(table.contains("backward: 2 passes, 3 grad_fns, 2 edges, 2 saved gradients"));
    let row = table
        .lines()
        .find(|line| line.starts_with("relu_back_1_2"))
        .expect("row");
    assert!(row.contains("ReluBackward0") && row.contains("relu_1_2") && row.contains("yes"));
    assert!(table.contains("param w"));
    assert!(!summary_table(&chain_trace(&steps(), false)).contains("backward:"));
}
