//! The postcard form of an op is the `.tlspec` body's: it must not change when the in-memory
//! `Op` does. `data/op_wire_format.postcard` holds two traces encoded by the row-per-op `Op` of
//! before the packed layout (commit 1bd8449): one with every optional op fact set (names, an
//! output position, attributes, an edit, an extra, distances with absent hops, parameters,
//! payloads, sources), one without distances. They must decode to those facts and encode back
//! to the same bytes.

use torchlens_core::model::{Distances, OpKind};
use torchlens_core::Trace;

const ENCODED: &[u8] = include_bytes!("data/op_wire_format.postcard");

fn decoded() -> (Trace, Trace) {
    postcard::from_bytes(ENCODED).expect("the stored traces decode")
}

#[test]
fn stored_ops_encode_back_to_the_same_bytes() {
    let (with_distances, without) = decoded();
    let encoded = postcard::to_allocvec(&(&with_distances, &without)).expect("encodes");
    assert_eq!(encoded, ENCODED);
}

#[test]
fn every_stored_op_fact_reads_back() {
    let (trace, without) = decoded();
    let by_label = |label: &str| {
        trace
            .ops
            .iter()
            .find(|op| &*op.label == label)
            .unwrap_or_else(|| panic!("no op {label}"))
    };
    assert_eq!(by_label("input_1").name(), Some("x"));
    assert_eq!(by_label("buffer_1").name(), Some("norm.running_mean"));
    assert_eq!(by_label("output_1").name(), Some("output"));
    assert_eq!(by_label("linear_1_3").name(), None);
    assert_eq!(by_label("linear_1_3").params.len(), 2);
    assert_eq!(by_label("chunk_1_5").output_index(), Some(0));
    assert_eq!(by_label("chunk_2_6").output_index(), Some(1));
    assert_eq!(by_label("sub_1_4").output_index(), None);
    let attributes = [
        ("chunks".to_string(), "2".to_string()),
        ("dim".to_string(), "-1".to_string()),
    ];
    assert_eq!(by_label("chunk_2_6").attributes(), attributes);
    assert!(by_label("add_1_7").attributes().is_empty());
    let edits = by_label("add_1_7").edits();
    assert_eq!(edits.len(), 1);
    assert_eq!(
        (edits[0].rule.as_str(), edits[0].action.as_str()),
        ("0", "scale(0.5)")
    );
    assert_eq!(
        by_label("relu_1_8").extras(),
        [("backend_address".to_string(), "aten::relu".to_string())]
    );
    assert_eq!(
        by_label("buffer_1").distances(),
        Some(Distances {
            min_from_input: None,
            max_from_input: None,
            min_to_output: Some(5),
            max_to_output: Some(5),
        })
    );
    assert_eq!(
        by_label("output_1")
            .distances()
            .and_then(|d| d.min_from_input),
        Some(6)
    );
    // An output op repeats its producer's value: only the others carry a payload.
    assert!(trace
        .ops
        .iter()
        .all(|op| op.payload().is_some() == (op.kind != OpKind::Output)));
    assert!(trace
        .ops
        .iter()
        .all(|op| op.source.is_some() == (op.kind == OpKind::Compute)));
    assert!(without.ops.iter().all(|op| op.distances().is_none()));
    assert_eq!(without.ops.len(), trace.ops.len());
}

#[test]
fn a_changed_fact_changes_the_bytes() {
    // The comparison above can fail: the same traces with one attribute less encode otherwise.
    let (mut trace, without) = decoded();
    let chunk = trace
        .ops
        .iter()
        .position(|op| !op.attributes().is_empty())
        .expect("an op with attributes");
    trace.ops[chunk].edit_details(|details| {
        details.attributes.pop();
    });
    let encoded = postcard::to_allocvec(&(&trace, &without)).expect("encodes");
    assert_ne!(encoded, ENCODED);
}
