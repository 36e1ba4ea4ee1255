//! Every file of the shared hostile corpus, opened by the real `tlspec` binary: each is refused
//! with its typed code and the documented exit status, within bounded time and memory.

mod cli_support;
#[path = "../../core-wasm/tests/hostile_corpus.rs"]
mod hostile_corpus;

use cli_support::{scratch, tlspec};
use std::time::Duration;

/// Wall time any hostile file may take (the sandbox's own deadline is far larger; these must
/// be refused long before it).
const TIME_BOUND: Duration = Duration::from_secs(5);
/// Peak memory any hostile file may cost the process.
const MEMORY_BOUND: u64 = 256 << 20;

/// The exit status documented for a refusal code.
fn expected_exit(code: &str) -> i32 {
    match code {
        "tlspec_header_too_large"
        | "tlspec_rank_too_large"
        | "tlspec_body_too_large"
        | "tlspec_codec_metadata_too_large"
        | "tlspec_codec_metadata_too_deep"
        | "tlspec_manifest_field_too_large" => 5,
        "tlspec_version_unsupported" => 4,
        _ => 3,
    }
}

#[test]
fn every_hostile_file_gets_its_typed_error_and_exit_status_within_bounds() {
    let folder = scratch("hostile");
    let corpus = hostile_corpus::hostile_corpus();
    assert!(corpus.len() >= 25, "the corpus lost files");
    for file in corpus {
        let path = folder.join(format!("{}.tlspec", file.name));
        std::fs::write(&path, &file.bytes).expect("write corpus file");
        for command in ["inspect", "check"] {
            let run = tlspec(
                &["--json", command, path.to_str().expect("utf-8 path")],
                Duration::from_secs(30),
            );
            let json = run.json();
            assert_eq!(
                json["error"]["code"], file.code,
                "{} ({command}): {}",
                file.name, run.stdout
            );
            assert_eq!(
                run.code,
                expected_exit(file.code),
                "{} ({command})",
                file.name
            );
            assert_eq!(json["exit"], run.code, "{}", file.name);
            assert!(run.wall < TIME_BOUND, "{} took {:?}", file.name, run.wall);
            assert!(
                run.max_rss < MEMORY_BOUND,
                "{} peaked at {} bytes",
                file.name,
                run.max_rss
            );
        }
    }
}

#[test]
fn human_errors_name_the_code_and_a_remedy() {
    let folder = scratch("human");
    let path = folder.join("empty.tlspec");
    std::fs::write(&path, b"").expect("write");
    let run = tlspec(&["inspect", path.to_str().expect("utf-8")], TIME_BOUND);
    assert_eq!(run.code, 3);
    assert!(run.stdout.is_empty());
    assert!(run.stderr.contains("[tlspec_too_short]"), "{}", run.stderr);
    assert!(run.stderr.contains("remedy:"), "{}", run.stderr);
}

#[test]
fn a_missing_file_or_a_folder_is_an_io_error() {
    let folder = scratch("io");
    let missing = folder.join("missing.tlspec");
    let run = tlspec(
        &["--json", "inspect", missing.to_str().expect("utf-8")],
        TIME_BOUND,
    );
    assert_eq!(run.code, 6);
    assert_eq!(run.json()["error"]["code"], "io_error");
    let run = tlspec(
        &["--json", "inspect", folder.to_str().expect("utf-8")],
        TIME_BOUND,
    );
    assert_eq!(run.code, 6);
    assert_eq!(run.json()["error"]["code"], "io_not_a_file");
}

/// A valid file of `ops` ops (a trace body of about 50 bytes each), in its own scratch folder.
fn big_body_file(folder: &str, ops: usize) -> std::path::PathBuf {
    let steps: Vec<hostile_corpus::Step> = (0..ops)
        .map(|_| hostile_corpus::Step {
            dtype: "float32",
            shape: vec![2],
            payload: false,
        })
        .collect();
    let bytes = hostile_corpus::encode(&hostile_corpus::chain_trace(&steps, false));
    let path = scratch(folder).join("big-body.tlspec");
    std::fs::write(&path, bytes).expect("write");
    path
}

#[test]
fn memory_limits_refuse_with_the_limit_status() {
    let path = big_body_file("memory", 20_000);
    let path = path.to_str().expect("utf-8");
    // The host refuses a body larger than a quarter of the sandbox before handing it over.
    let run = tlspec(
        &["--json", "--memory-mib", "2", "inspect", path],
        TIME_BOUND,
    );
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "tlspec_body_too_large");
    // A sandbox too small for the core itself stops it with a trap, reported the same way.
    let run = tlspec(
        &["--json", "--memory-mib", "1", "inspect", path],
        TIME_BOUND,
    );
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "sandbox_memory_exhausted");
    let run = tlspec(&["--json", "inspect", path], TIME_BOUND);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json()["ops"], 20_002);
}

#[test]
fn a_tiny_deadline_stops_the_core_with_the_limit_status() {
    let path = big_body_file("deadline", 200_000);
    let run = tlspec(
        &[
            "--json",
            "--timeout",
            "0.001",
            "summary",
            path.to_str().expect("utf-8"),
        ],
        TIME_BOUND,
    );
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "sandbox_deadline_exceeded");
}
