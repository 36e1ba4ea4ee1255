//! Test files for the viewer, written with the core's own encoder from the built-in demo model
//! (native builds only): a small trace with every value saved, one stopped early, a trace of
//! 100k+ ops, the three graphs the influence search is checked on, and broken or hostile files.

use std::collections::HashMap;
use torchlens_core::demo_model::{demo_events, influence_graphs, synthetic_events};
use torchlens_core::error::CoreResult;
use torchlens_core::model::TraceOptions;
use torchlens_core::tlspec::{encode_with_payloads, Manifest};
use torchlens_core::{Trace, TraceBuilder};

/// Builds a trace from events.
pub fn build(events: Vec<torchlens_core::events::RawEvent>) -> CoreResult<Trace> {
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(events)?;
    builder.finish()
}

fn manifest(note: &str) -> Manifest {
    Manifest {
        backend: "demo".to_string(),
        backend_runtime: "torchlens-core fixtures".to_string(),
        backend_version: env!("CARGO_PKG_VERSION").to_string(),
        payload_policy: "all".to_string(),
        save_level: "full".to_string(),
        created_at: "2026-01-01T00:00:00Z".to_string(),
        codec_metadata: "{}".to_string(),
        payload_checksums: Vec::new(),
        extra: vec![("note".to_string(), note.to_string())],
    }
}

/// Float32 values for one payload: a smooth wave plus a ramp, different per slot, so
/// statistics, histograms and heatmaps have something to show.
fn values(slot: u64, elements: usize) -> Vec<u8> {
    (0..elements)
        .flat_map(|index| {
            let x = index as f32;
            let value = (x * 0.37 + slot as f32).sin() * (1.0 + slot as f32 * 0.1) + x * 0.01;
            value.to_le_bytes()
        })
        .collect()
}

/// The demo model's trace with every value saved, as a `.tlspec` file.
pub fn demo_file() -> CoreResult<Vec<u8>> {
    encode_all(&build(demo_events())?, "demo model, every value saved")
}

/// The demo model's run cut off halfway, as `stop_after=` leaves it: stopped early at its last
/// op and marked unverified, every value saved.
pub fn stopped_file() -> CoreResult<Vec<u8>> {
    let events = demo_events();
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(events.into_iter().take(20))?;
    let last = builder.partial().ops.len().saturating_sub(1) as u32;
    builder.mark_stopped("stop_after reached".to_string(), vec![last]);
    builder.mark_unverified("capture stopped before the model returned".to_string());
    let trace = builder.finish()?;
    encode_all(&trace, "demo model, stopped early")
}

/// Encodes `trace` with generated values for every payload it refers to.
fn encode_all(trace: &Trace, note: &str) -> CoreResult<Vec<u8>> {
    let payloads: HashMap<u64, Vec<u8>> = trace
        .ops
        .iter()
        .filter_map(|op| {
            let elements: u64 = op.shape.iter().product();
            Some((op.payload()?, values(op.payload()?, elements as usize)))
        })
        .collect();
    encode_with_payloads(trace, &manifest(note), |slot| {
        payloads.get(&slot).map(Vec::as_slice)
    })
}

/// The influence graphs (`diamond`, `branching`, `reused_module`), every value saved, as
/// `.tlspec` files by name.
pub fn influence_files() -> CoreResult<Vec<(&'static str, Vec<u8>)>> {
    influence_graphs()
        .into_iter()
        .map(|(name, events)| {
            let trace = build(events)?;
            Ok((
                name,
                encode_all(&trace, "an influence graph, every value saved")?,
            ))
        })
        .collect()
}

/// A synthetic residual MLP of at least `ops` ops (no values saved), as a `.tlspec` file.
pub fn large_file(ops: usize) -> CoreResult<Vec<u8>> {
    // One block is 9 events and 5 ops; a few events and ops are the input and output.
    let trace = build(synthetic_events(ops / 5 * 9 + 20))?;
    encode_with_payloads(&trace, &manifest("synthetic large trace"), |_| None)
}

/// Broken and hostile files, by name, each with what the page should say (an error code).
pub fn hostile_files() -> CoreResult<Vec<(&'static str, Vec<u8>, &'static str)>> {
    let demo = demo_file()?;
    // Past the 100 MB limit but below 4 GiB: a damaged header length, not another kind of file.
    let mut huge_header = 200_000_000u64.to_le_bytes().to_vec();
    huge_header.extend_from_slice(b"{}");
    let truncated = demo[..demo.len() / 2].to_vec();
    // The body is the first tensor after the header; scribble over its middle (past the
    // 8-byte check block, so the body's checksum is what catches it).
    let header = u64::from_le_bytes(demo[..8].try_into().unwrap_or_default()) as usize;
    let mut scribbled = demo.clone();
    for byte in scribbled.iter_mut().skip(8 + header + 12).take(64) {
        *byte = 0xff;
    }
    let mut not_json = 16u64.to_le_bytes().to_vec();
    not_json.extend_from_slice(b"this is no json!");
    Ok(vec![
        ("huge-header.tlspec", huge_header, "tlspec_header_too_large"),
        ("truncated.tlspec", truncated, "tlspec_"),
        (
            "scribbled-body.tlspec",
            scribbled,
            "tlspec_body_checksum_mismatch",
        ),
        ("not-json.tlspec", not_json, "tlspec_"),
        ("empty.tlspec", Vec::new(), "tlspec_too_short"),
    ])
}
