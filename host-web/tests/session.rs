//! The viewer's session on real files written by the core's encoder: everything the page asks
//! for, answered natively by the same code the browser runs.

#[path = "../../core-wasm/tests/influence_cases.rs"]
mod influence_cases;

use torchlens_core::tlspec::header_length;
use torchlens_web::fixtures::{
    demo_file, hostile_files, influence_files, large_file, stopped_file,
};
use torchlens_web::session::{body_range, body_range_within};
use torchlens_web::{Session, WebError};

/// Opens a file the way the page's worker does: length, header, body range, then the body.
fn open(file: &[u8]) -> Result<Session, WebError> {
    let json = header_length(file)? as usize;
    let header = file.get(..8 + json).unwrap_or(file);
    let range = body_range(header, file.len() as u64)?;
    let start = range.offset as usize;
    let body = &file[start..start + range.length as usize];
    Session::open(header, body, file.len() as u64)
}

#[test]
fn the_demo_file_opens_with_its_overview_and_rows() {
    let file = demo_file().unwrap();
    let session = open(&file).unwrap();
    let overview = session.overview();
    assert_eq!(overview.counts.ops, session.trace().ops.len());
    let with_payload = session
        .trace()
        .ops
        .iter()
        .filter(|op| op.payload().is_some())
        .count();
    assert_eq!(overview.counts.saved, with_payload);
    assert!(
        with_payload >= overview.counts.ops - 1,
        "every value but the output's is saved"
    );
    assert_eq!(overview.file_length, file.len() as u64);
    assert!(overview.capture.verified);
    assert!(overview
        .manifest
        .iter()
        .any(|(key, value)| key == "backend" && value == "demo"));
    let rows = session.rows(0, 5);
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[0].label, &*session.trace().ops[0].label);
    assert!(session.rows(10_000, 5).is_empty());
}

#[test]
fn a_stopped_capture_says_so() {
    let session = open(&stopped_file().unwrap()).unwrap();
    let capture = session.overview().capture;
    assert!(!capture.verified);
    assert_eq!(
        capture.reason.as_deref(),
        Some("capture stopped before the model returned")
    );
    assert_eq!(capture.stop_reason.as_deref(), Some("stop_after reached"));
    let last = session.trace().ops.last().unwrap().label.to_string();
    assert_eq!(capture.frontier, [last]);
}

#[test]
fn the_collapsed_graph_opens_one_call_at_a_time() {
    let file = demo_file().unwrap();
    let mut session = open(&file).unwrap();
    let overview = session.layout(Vec::new(), false).unwrap();
    let boxes: Vec<&str> = overview
        .nodes
        .iter()
        .filter(|node| node.kind == "module")
        .map(|node| node.label.as_str())
        .collect();
    assert!(
        boxes.contains(&"cell:1") && boxes.contains(&"cell:3"),
        "{boxes:?}"
    );
    // Opening cell:2 alone: its ops appear, the other two calls stay boxes.
    let opened = session.layout(vec!["cell:2".to_string()], false).unwrap();
    let labels: Vec<&str> = opened
        .nodes
        .iter()
        .map(|node| node.label.as_str())
        .collect();
    assert!(labels.contains(&"cell:1") && labels.contains(&"cell:3"));
    assert!(!labels.contains(&"cell:2"));
    assert!(labels.contains(&"cell.linear:2"), "{labels:?}");
    assert!(opened.nodes.len() > overview.nodes.len());
    // Every op is shown by exactly one node.
    for op in 0..session.trace().ops.len() as u32 {
        assert!(session.node_of(op).is_some());
    }
    let full = session.layout(Vec::new(), true).unwrap();
    assert_eq!(full.nodes.len(), session.trace().ops.len());
}

#[test]
fn an_op_shows_its_links_and_its_value() {
    let file = demo_file().unwrap();
    let session = open(&file).unwrap();
    let trace = session.trace();
    let id = trace
        .ops
        .iter()
        .position(|op| trace.func_name(op) == "tanh" && op.pass == 2)
        .expect("second tanh pass") as u32;
    let detail = session.op(id).unwrap();
    assert_eq!(detail.func_name, "tanh");
    assert_eq!(detail.module_stack, ["cell:2", "self"]);
    assert_eq!(detail.num_passes, 3);
    assert_eq!(detail.parents.len(), 1);
    assert!(!detail.children.is_empty());
    let payload = detail.payload.expect("saved");
    let start = payload.offset as usize;
    let bytes = &file[start..start + payload.read_length as usize];
    let value = session.value(id, bytes).unwrap();
    assert_eq!(value.elements_total, 32);
    assert_eq!(value.statistics.count, 32);
    // The statistics are those of the stored float32 values.
    let floats: Vec<f64> = bytes
        .chunks_exact(4)
        .map(|chunk| f64::from(f32::from_le_bytes(chunk.try_into().unwrap())))
        .collect();
    let max = floats.iter().copied().fold(f64::MIN, f64::max);
    assert_eq!(value.statistics.max, Some(max));
    assert_eq!(value.heatmap.expect("2-D").cols, 16);
    assert_eq!(session.op(9999).unwrap_err().code, "viewer_op_out_of_range");
}

#[test]
fn search_takes_selector_expressions() {
    let file = demo_file().unwrap();
    let session = open(&file).unwrap();
    let result = session.search("func:tanh & in_module:cell").unwrap();
    assert_eq!(result.count, 3);
    assert!(result
        .listed
        .iter()
        .all(|(_, label)| label.starts_with("tanh")));
    let error = session.search("func:(").unwrap_err();
    assert_eq!(error.kind, "invalid-selector");
}

#[test]
fn broken_and_hostile_files_fail_with_their_codes() {
    for (name, bytes, code) in hostile_files().unwrap() {
        let error = match open(&bytes) {
            Ok(_) => panic!("{name} opened"),
            Err(error) => error,
        };
        assert!(error.code.starts_with(code), "{name}: {error}");
        assert!(!error.remedy.is_empty());
    }
}

#[test]
fn a_body_too_large_for_the_browser_is_refused_before_it_is_read() {
    let file = demo_file().unwrap();
    let json = header_length(&file).unwrap() as usize;
    let header = &file[..8 + json];
    let range = body_range(header, file.len() as u64).unwrap();
    let error = body_range_within(header, file.len() as u64, range.length - 1).unwrap_err();
    assert_eq!(error.code, "viewer_body_too_large");
}

#[test]
fn a_trace_of_100k_ops_opens_and_lays_out() {
    let file = large_file(100_000).unwrap();
    let started = std::time::Instant::now();
    let mut session = open(&file).unwrap();
    let graph = session.layout(Vec::new(), false).unwrap();
    assert!(session.trace().ops.len() >= 100_000);
    assert!(graph.nodes.len() >= 20_000);
    let opened = session.layout(vec!["block:17".to_string()], false).unwrap();
    assert_eq!(opened.nodes.len(), graph.nodes.len() + 4);
    eprintln!(
        "100k ops: open and lay out natively in {:?}",
        started.elapsed()
    );
}

#[test]
fn search_by_influence_lists_the_hand_computed_reachability() {
    let files = influence_files().unwrap();
    for (graph, expression, expected) in influence_cases::CASES {
        let (_, file) = files.iter().find(|(name, _)| name == graph).unwrap();
        let session = open(file).unwrap();
        let result = session.search(expression).unwrap();
        let mut listed: Vec<&str> = result
            .listed
            .iter()
            .map(|(_, label)| label.as_str())
            .collect();
        listed.sort_unstable();
        let mut expected = expected.to_vec();
        expected.sort_unstable();
        assert_eq!(listed, expected, "{graph}: {expression}");
        assert_eq!(result.count, expected.len());
    }
}

#[test]
fn the_payload_crc32_table_is_not_a_value_and_older_files_open_alike() {
    // The demo file ends with the payload CRC-32 table, which the page neither counts as a
    // saved value nor reads (checksums are `tlspec check`'s and `tl.load(verify=True)`'s).
    let file = demo_file().unwrap();
    let session = open(&file).unwrap();
    let (header, _) = torchlens_core::tlspec::decode_file(&file).unwrap();
    let table = header.crc_table_offset.expect("the demo file has a table");
    let overview = session.overview();
    assert_eq!(overview.counts.saved, header.payloads.len());
    assert_eq!(
        overview.payload_bytes,
        table - header.body_offset - header.body_length,
        "payload bytes end where the table starts"
    );
    assert_eq!(
        overview.file_length,
        table + 4 * header.payloads.len() as u64
    );
    // A file written before the table (checksums in the manifest's payload_crc32) opens the
    // same way; the viewer shows neither form of checksum.
    let legacy = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/seeds/decode_tlspec/valid_v2_manifest_crc32.tlspec"
    ))
    .unwrap();
    let session = open(&legacy).unwrap();
    let overview = session.overview();
    assert_eq!(overview.counts.saved, 5);
    assert!(overview
        .manifest
        .iter()
        .all(|(key, _)| key != "payload_crc32" && !key.starts_with("__torchlens_")));
}
