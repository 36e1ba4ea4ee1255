//! Each subcommand on real `.tlspec` files written by the core's encoder: what it prints,
//! its JSON, and its exit status.

mod cli_support;
#[path = "../../core-wasm/tests/hostile_corpus.rs"]
mod hostile_corpus;

use cli_support::{scratch, tlspec};
use hostile_corpus::{chain_trace, manifest, payloads_for, Step};
use std::path::{Path, PathBuf};
use std::time::Duration;
use torchlens_core::tlspec::{self, Manifest};
use torchlens_core::Trace;

const LIMIT: Duration = Duration::from_secs(30);

fn steps(dtypes: &[&'static str]) -> Vec<Step> {
    dtypes
        .iter()
        .map(|dtype| Step {
            dtype,
            shape: vec![2, 3],
            payload: true,
        })
        .collect()
}

/// Where a file records its payloads' CRC-32s.
#[derive(Debug, Clone, Copy)]
enum Checksums {
    /// The payload CRC-32 table at the end of the file, as the Python package writes it.
    Table,
    /// The manifest's `payload_crc32`, as files written before the table have it.
    Manifest,
}

/// Writes `trace` with pattern payloads and their CRC-32s in the `form` given.
fn write_with_checksums(trace: &Trace, path: &Path, form: Checksums) -> Vec<u8> {
    let payloads = payloads_for(trace);
    let checksums = match form {
        Checksums::Table => Vec::new(),
        Checksums::Manifest => trace
            .ops
            .iter()
            .filter_map(|op| {
                let slot = op.payload()?;
                Some((op.label.to_string(), crc32fast::hash(&payloads[&slot])))
            })
            .collect(),
    };
    let with_checksums = Manifest {
        payload_checksums: checksums,
        ..manifest()
    };
    let bytes = tlspec::encode_with_payloads(trace, &with_checksums, |slot| {
        payloads.get(&slot).map(Vec::as_slice)
    })
    .expect("encodes");
    std::fs::write(path, &bytes).expect("write");
    bytes
}

fn sample(folder: &Path) -> (Trace, PathBuf, Vec<u8>) {
    sample_with(folder, Checksums::Table)
}

fn sample_with(folder: &Path, form: Checksums) -> (Trace, PathBuf, Vec<u8>) {
    let trace = chain_trace(
        &steps(&[
            "float32", "bfloat16", "int64", "float32", "float64", "float16",
        ]),
        true,
    );
    let path = folder.join(format!("sample-{form:?}.tlspec"));
    let bytes = write_with_checksums(&trace, &path, form);
    (trace, path, bytes)
}

fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn inspect_reports_counts_versions_and_bytes_by_dtype() {
    let folder = scratch("inspect");
    let (trace, path, _) = sample(&folder);
    let run = tlspec(&["--json", "inspect", text(&path)], LIMIT);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    assert_eq!(json["ops"], trace.ops.len());
    assert_eq!(json["manifest"]["backend"], "torch");
    assert_eq!(json["manifest"]["backend_version"], "2.5.0");
    assert_eq!(json["format_version"], 2);
    let saved = trace.ops.iter().filter(|op| op.payload().is_some()).count();
    assert_eq!(json["payloads"], saved);
    assert_eq!(json["payloads_with_checksum"], saved);
    let table = tlspec::decode_file(&std::fs::read(&path).expect("read"))
        .expect("decodes")
        .0
        .crc_table_offset;
    assert_eq!(json["crc_table_offset"], table.expect("a table"));
    // Six elements each: float32 (input + two ops) 3 × 24, bfloat16 12, int64 48, ...
    assert_eq!(json["bytes_by_dtype"]["float32"]["payloads"], 3);
    assert_eq!(json["bytes_by_dtype"]["float32"]["bytes"], 72);
    assert_eq!(json["bytes_by_dtype"]["bfloat16"]["bytes"], 12);
    assert_eq!(json["bytes_by_dtype"]["int64"]["bytes"], 48);
    let human = tlspec(&["inspect", text(&path)], LIMIT);
    assert!(
        human.stdout.contains("backend     torch 2.5.0"),
        "{}",
        human.stdout
    );
    assert!(
        human.stdout.contains("CRC-32 for 7 payloads (table)"),
        "{}",
        human.stdout
    );
    let (_, legacy, _) = sample_with(&folder, Checksums::Manifest);
    let run = tlspec(&["--json", "inspect", text(&legacy)], LIMIT);
    assert_eq!(run.json()["payloads_with_checksum"], saved);
    assert!(run.json()["crc_table_offset"].is_null());
    let human = tlspec(&["inspect", text(&legacy)], LIMIT);
    assert!(human.stdout.contains("CRC-32 for 7 payloads (manifest)"));
}

#[test]
fn summary_prints_the_core_summary_table() {
    let folder = scratch("summary");
    let (trace, path, _) = sample(&folder);
    let run = tlspec(&["summary", text(&path)], LIMIT);
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, torchlens_core::query::summary_table(&trace));
    let json = tlspec(&["--json", "summary", text(&path)], LIMIT).json();
    assert_eq!(json.as_array().map(Vec::len), Some(trace.ops.len()));
}

#[test]
fn ops_filters_with_selector_expressions() {
    let folder = scratch("ops");
    let (trace, path, _) = sample(&folder);
    let run = tlspec(
        &["--json", "ops", text(&path), "func:relu | func:sigmoid"],
        LIMIT,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let labels: Vec<String> = run
        .json()
        .as_array()
        .expect("a list")
        .iter()
        .map(|row| row["label"].as_str().unwrap_or_default().to_owned())
        .collect();
    let expected: Vec<String> = trace
        .ops
        .iter()
        .filter(|op| matches!(trace.func_name(op), "relu" | "sigmoid"))
        .map(|op| op.label.to_string())
        .collect();
    assert_eq!(labels, expected);
    assert!(!labels.is_empty());
    let negated = tlspec(&["--json", "ops", text(&path), "~func:relu"], LIMIT).json();
    assert_eq!(
        negated.as_array().map(Vec::len),
        Some(trace.ops.len() - expected.iter().filter(|l| l.starts_with("relu")).count())
    );
    let all = tlspec(&["ops", text(&path)], LIMIT);
    assert_eq!(all.stdout.lines().count(), trace.ops.len() + 1);
    let bad = tlspec(&["--json", "ops", text(&path), "func:relu &"], LIMIT);
    assert_eq!(bad.code, 2);
    assert_eq!(bad.json()["error"]["code"], "selector_expression_syntax");
}

#[test]
fn check_verifies_every_payload_and_finds_a_flipped_byte() {
    let folder = scratch("check");
    for (form, source) in [
        (Checksums::Table, "table"),
        (Checksums::Manifest, "manifest"),
    ] {
        let (_, path, bytes) = sample_with(&folder, form);
        let run = tlspec(&["--json", "check", text(&path)], LIMIT);
        assert_eq!(run.code, 0, "{}", run.stdout);
        let json = run.json();
        assert_eq!(json["structure"], "ok");
        assert_eq!(json["checksums"], source);
        assert_eq!(json["verified"], json["payloads"]);
        assert_eq!(json["mismatched"].as_array().map(Vec::len), Some(0));

        let (header, _) = tlspec::decode_file(&bytes).expect("valid");
        let victim = &header.payloads[2];
        let mut damaged = bytes.clone();
        damaged[victim.offset as usize + 1] ^= 0x40;
        let damaged_path = folder.join(format!("damaged-{form:?}.tlspec"));
        std::fs::write(&damaged_path, damaged).expect("write");
        let run = tlspec(&["--json", "check", text(&damaged_path)], LIMIT);
        assert_eq!(run.code, 1, "{}", run.stdout);
        let json = run.json();
        assert_eq!(json["mismatched"][0]["label"], victim.label.as_str());
        assert_eq!(json["mismatched"].as_array().map(Vec::len), Some(1));
        let human = tlspec(&["check", text(&damaged_path)], LIMIT);
        assert!(human
            .stdout
            .contains(&format!("DAMAGED     {}", victim.label)));
    }
}

#[test]
fn check_reads_the_crc_table_in_payload_order() {
    let folder = scratch("check-table");
    let (_, _, bytes) = sample(&folder);
    let (header, _) = tlspec::decode_file(&bytes).expect("valid");
    let table = header.crc_table_offset.expect("a table") as usize;
    // A changed table entry: the payload it names is reported, the others still match.
    let mut damaged = bytes.clone();
    damaged[table + 4 * 3] ^= 0x01;
    let path = folder.join("table-damaged.tlspec");
    std::fs::write(&path, damaged).expect("write");
    let run = tlspec(&["--json", "check", text(&path)], LIMIT);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let json = run.json();
    assert_eq!(json["mismatched"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        json["mismatched"][0]["label"],
        header.payloads[3].label.as_str()
    );
    assert_eq!(json["verified"], header.payloads.len() - 1);
}

#[test]
fn check_without_recorded_checksums_says_so() {
    // Version 1, written before any payload checksum: its three payloads are checked for
    // bounds only.
    let folder = scratch("check-unrecorded");
    let path = folder.join("plain.tlspec");
    let seed = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/seeds/decode_tlspec/valid_demo.tlspec"
    );
    std::fs::copy(seed, &path).expect("copy");
    let run = tlspec(&["--json", "check", text(&path)], LIMIT);
    assert_eq!(run.code, 0);
    let json = run.json();
    assert_eq!(json["checksums"], "none");
    assert_eq!(json["verified"], 0);
    let payloads = json["payloads"].as_u64().expect("a count");
    assert!(payloads > 0);
    assert_eq!(
        json["unrecorded"].as_array().map(|list| list.len() as u64),
        Some(payloads)
    );
}

#[test]
fn export_writes_every_op_module_and_layer_as_json() {
    let folder = scratch("export");
    let (trace, path, _) = sample(&folder);
    let run = tlspec(&["export", "--json", text(&path)], LIMIT);
    assert_eq!(run.code, 0);
    let json = run.json();
    let labels: Vec<&str> = json["ops"]
        .as_array()
        .expect("ops")
        .iter()
        .map(|op| op["label"].as_str().unwrap_or_default())
        .collect();
    let expected: Vec<&str> = trace.ops.iter().map(|op| op.label.as_ref()).collect();
    assert_eq!(labels, expected);
    assert_eq!(json["ops"][1]["func_name"], trace.func_name(&trace.ops[1]));
    assert_eq!(
        json["layers"].as_array().map(Vec::len),
        Some(trace.layers.len())
    );
    assert_eq!(json["manifest"]["backend"], "torch");
    assert_eq!(json["trace"]["op_count"], trace.ops.len());
}

#[test]
fn draw_writes_the_overview_or_the_full_graph() {
    let folder = scratch("draw");
    let (trace, path, _) = sample(&folder);
    let out = folder.join("graph.svg");
    let run = tlspec(
        &["draw", "--svg", "--full", text(&path), "-o", text(&out)],
        LIMIT,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let svg = std::fs::read_to_string(&out).expect("svg written");
    assert!(svg.starts_with("<svg"));
    for op in &trace.ops {
        assert!(svg.contains(&*op.label), "{} missing", op.label);
    }
    let overview = tlspec(&["draw", "--svg", text(&path)], LIMIT);
    assert_eq!(overview.code, 0);
    assert!(overview.stdout.starts_with("<svg"));
}

#[test]
fn diff_matches_ops_by_site_and_reports_value_and_structure_changes() {
    let folder = scratch("diff");
    let (trace, path, bytes) = sample(&folder);
    let same = tlspec(&["--json", "diff", text(&path), text(&path)], LIMIT);
    assert_eq!(same.code, 0, "{}", same.stdout);
    assert_eq!(same.json()["differences"].as_array().map(Vec::len), Some(0));

    // One float32 element changed by a little.
    let (header, _) = tlspec::decode_file(&bytes).expect("valid");
    let victim = header
        .payloads
        .iter()
        .find(|payload| payload.dtype == "float32" && payload.label != "input_1")
        .expect("a float32 op payload");
    let mut changed = bytes.clone();
    let at = victim.offset as usize;
    let value = f32::from_le_bytes(changed[at..at + 4].try_into().expect("4 bytes"));
    changed[at..at + 4].copy_from_slice(&(value + 0.5).to_le_bytes());
    let changed_path = folder.join("changed.tlspec");
    std::fs::write(&changed_path, changed).expect("write");
    let run = tlspec(&["--json", "diff", text(&path), text(&changed_path)], LIMIT);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let differences = run.json()["differences"].clone();
    assert_eq!(
        differences.as_array().map(Vec::len),
        Some(1),
        "{differences}"
    );
    assert_eq!(differences[0]["kind"], "values_differ");
    assert_eq!(differences[0]["a"], victim.label.as_str());
    let within = tlspec(
        &[
            "--json",
            "diff",
            "--tolerance",
            "1",
            text(&path),
            text(&changed_path),
        ],
        LIMIT,
    );
    assert_eq!(within.code, 0, "{}", within.stdout);

    // A trace with one more op at the end: one op only in b, the rest equal.
    let mut longer_steps = steps(&[
        "float32", "bfloat16", "int64", "float32", "float64", "float16",
    ]);
    longer_steps.push(Step {
        dtype: "float32",
        shape: vec![2, 3],
        payload: false,
    });
    let longer = chain_trace(&longer_steps, true);
    let longer_path = folder.join("longer.tlspec");
    write_with_checksums(&longer, &longer_path, Checksums::Table);
    let run = tlspec(&["--json", "diff", text(&path), text(&longer_path)], LIMIT);
    assert_eq!(run.code, 1);
    let kinds: Vec<String> = run.json()["differences"]
        .as_array()
        .expect("list")
        .iter()
        .map(|row| row["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(kinds.contains(&"only_in_b".to_owned()), "{kinds:?}");
    assert!(trace.ops.len() < longer.ops.len());
}

#[test]
fn help_lists_the_exit_statuses() {
    let run = tlspec(&["--help"], LIMIT);
    assert_eq!(run.code, 0);
    for status in ["0  done", "3  not a readable .tlspec", "5  a limit refused"] {
        assert!(run.stdout.contains(status), "{status}");
    }
    assert_eq!(tlspec(&["frobnicate"], LIMIT).code, 2);
}

/// A chain trace with the backward pass torch would record and the gradient of its two compute
/// ops saved, written with every payload's CRC-32 (in the table).
fn sample_with_backward(folder: &Path) -> (Trace, PathBuf) {
    use torchlens_core::model::{BackwardGraph, GradFnNode, SavedGrad};
    let mut trace = chain_trace(&steps(&["float32", "float32"]), true);
    let node = |label: &str, class_name: &str, op: Option<u32>, children: Vec<u32>| GradFnNode {
        label: label.to_string(),
        class_name: class_name.to_string(),
        op,
        param: None,
        children,
    };
    let grad_slot = 1u64 << 48;
    trace.backward = Some(BackwardGraph {
        passes: 1,
        nodes: vec![
            node("add_back_1_1", "AddBackward0", Some(2), vec![1]),
            node("relu_back_1_2", "ReluBackward0", Some(1), vec![]),
        ],
        grads: vec![
            SavedGrad {
                op: 1,
                slot: Some(grad_slot + 1),
            },
            SavedGrad {
                op: 2,
                slot: Some(grad_slot + 2),
            },
        ],
    });
    let mut payloads = payloads_for(&trace);
    for op in [1u32, 2] {
        payloads.insert(grad_slot + u64::from(op), vec![op as u8; 24]);
    }
    let bytes = tlspec::encode_with_payloads(&trace, &manifest(), |slot| {
        payloads.get(&slot).map(Vec::as_slice)
    })
    .expect("encodes");
    let path = folder.join("backward.tlspec");
    std::fs::write(&path, bytes).expect("write");
    (trace, path)
}

#[test]
fn summary_check_and_draw_show_a_backward_pass() {
    let folder = scratch("backward");
    let (trace, path) = sample_with_backward(&folder);
    let run = tlspec(&["summary", text(&path)], LIMIT);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, torchlens_core::query::summary_table(&trace));
    assert!(run
        .stdout
        .contains("backward: 1 pass, 2 grad_fns, 1 edges, 2 saved gradients"));
    let row = run
        .stdout
        .lines()
        .find(|line| line.starts_with("add_back_1_1"))
        .expect("grad_fn row");
    assert!(
        row.contains("AddBackward0") && row.contains("add_1_3") && row.contains("relu_back_1_2")
    );
    // The gradient payloads are checked like every payload.
    let check = tlspec(&["check", text(&path)], LIMIT);
    assert_eq!(check.code, 0, "{}", check.stdout);
    let drawn = tlspec(&["draw", "--svg", "--backward", text(&path)], LIMIT);
    assert_eq!(drawn.code, 0, "{}", drawn.stderr);
    assert_eq!(drawn.stdout.matches("<g class=\"node ").count(), 2);
    assert_eq!(
        drawn
            .stdout
            .matches("data-from=\"0\" data-to=\"1\"")
            .count(),
        1
    );
    assert!(drawn.stdout.contains("relu_back_1_2"));
    // A trace without a backward pass has none to draw.
    let (_, plain, _) = sample(&folder);
    let refused = tlspec(&["draw", "--svg", "--backward", text(&plain)], LIMIT);
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("layout_no_backward"),
        "{}",
        refused.stderr
    );
}
