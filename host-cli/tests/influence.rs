//! `tlspec ops` with influence terms (`downstream_of(...)`, `upstream_of(...)`) on the three
//! graphs whose reachability is worked out by hand in the core's `influence_cases.rs`: each
//! case's expression, run by the real binary on a `.tlspec` file the core's encoder wrote, lists
//! exactly the hand-computed ops.

mod cli_support;
#[path = "../../core-wasm/tests/hostile_corpus.rs"]
mod hostile_corpus;
#[path = "../../core-wasm/tests/influence_cases.rs"]
mod influence_cases;

use cli_support::{scratch, tlspec};
use hostile_corpus::{manifest, payloads_for};
use influence_cases::CASES;
use std::path::PathBuf;
use std::time::Duration;
use torchlens_core::demo_model::influence_graphs;
use torchlens_core::model::TraceOptions;
use torchlens_core::{tlspec as codec, TraceBuilder};

const LIMIT: Duration = Duration::from_secs(30);

/// Writes each graph as `<name>.tlspec` in the scratch folder `folder` (one per test: tests run
/// in parallel, and a scratch folder is emptied when it is made).
fn written(folder: &str) -> Vec<(&'static str, PathBuf)> {
    let folder = scratch(folder);
    influence_graphs()
        .into_iter()
        .map(|(name, events)| {
            let mut builder = TraceBuilder::new(TraceOptions::default());
            builder.ingest(events).expect("events");
            let trace = builder.finish().expect("trace");
            let payloads = payloads_for(&trace);
            let bytes = codec::encode_with_payloads(&trace, &manifest(), |slot| {
                payloads.get(&slot).map(Vec::as_slice)
            })
            .expect("encodes");
            let path = folder.join(format!("{name}.tlspec"));
            std::fs::write(&path, bytes).expect("write");
            (name, path)
        })
        .collect()
}

#[test]
fn ops_lists_the_hand_computed_reachability() {
    let files = written("influence-reachability");
    for (graph, expression, expected) in CASES {
        let path = &files
            .iter()
            .find(|(name, _)| name == graph)
            .expect("a written graph")
            .1;
        let run = tlspec(
            &["--json", "ops", path.to_str().expect("utf-8"), expression],
            LIMIT,
        );
        assert_eq!(run.code, 0, "{expression}: {}", run.stderr);
        let mut labels: Vec<String> = run
            .json()
            .as_array()
            .expect("a list")
            .iter()
            .map(|row| row["label"].as_str().unwrap_or_default().to_owned())
            .collect();
        labels.sort();
        let mut expected: Vec<String> = expected.iter().map(|label| label.to_string()).collect();
        expected.sort();
        assert_eq!(labels, expected, "{graph}: {expression}");
    }
}

#[test]
fn a_malformed_influence_term_is_a_usage_error() {
    let files = written("influence-malformed");
    let path = files[0].1.to_str().expect("utf-8");
    for bad in [
        "downstream_of(",
        "upstream_of()",
        "upstream_of(func:relu, 2)",
    ] {
        let run = tlspec(&["--json", "ops", path, bad], LIMIT);
        assert_eq!(run.code, 2, "{bad}");
        assert_eq!(run.json()["error"]["code"], "selector_expression_syntax");
    }
}
