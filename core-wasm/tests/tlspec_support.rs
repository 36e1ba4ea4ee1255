//! Shared helpers for the `.tlspec` tests: building traces from events and crafting files by
//! hand. Included by the `tlspec_*` test crates with `#[path]`; compiled alone it holds no tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use torchlens_core::events::{ArgRef, OpEvent, RawEvent, TensorDesc};
use torchlens_core::model::TraceOptions;
use torchlens_core::tlspec::{self, Manifest, TraceBody};
use torchlens_core::{Trace, TraceBuilder};

/// One op of a test chain: its dtype name, shape, and whether it keeps a payload.
pub struct Step {
    pub dtype: &'static str,
    pub shape: Vec<u64>,
    pub payload: bool,
}

/// A chain trace: an input, then one op per step (each reading the previous value), then an
/// output. Payload slots are `1000 + step index` (the input's slot is 999 when kept), so they
/// differ from the table indices the decoder assigns.
pub fn chain_trace(steps: &[Step], input_payload: bool) -> Trace {
    let funcs = [
        "relu",
        "__add__",
        "conv2d",
        "layer_norm",
        "matmul",
        "sigmoid",
    ];
    let mut events = vec![RawEvent::Input {
        name: "x".to_string(),
        value: TensorDesc {
            tensor: 0,
            shape: vec![2, 3].into(),
            dtype: torchlens_core::dtype::Dtype::Float32,
            payload: input_payload.then_some(999),
        },
    }];
    for (index, step) in steps.iter().enumerate() {
        events.push(RawEvent::Op(OpEvent {
            func: funcs[index % funcs.len()].to_string(),
            args: vec![ArgRef {
                tensor: index as u64,
                position: 0,
                keyword: None,
            }]
            .into(),
            outputs: vec![TensorDesc {
                tensor: index as u64 + 1,
                shape: step.shape.clone().into(),
                dtype: torchlens_core::dtype::Dtype::from_name(step.dtype),
                payload: step.payload.then_some(1000 + index as u64),
            }]
            .into(),
            in_place: false,
            attributes: vec![("dim".to_string(), index.to_string())],
            source: None,
        }));
    }
    events.push(RawEvent::Output {
        name: "out".to_string(),
        tensor: steps.len() as u64,
    });
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(events).expect("test events are valid");
    builder.finish().expect("test trace finishes")
}

/// Deterministic bytes for a payload slot.
pub fn pattern(slot: u64, length: usize) -> Vec<u8> {
    (0..length)
        .map(|index| (slot as usize * 31 + index * 7) as u8)
        .collect()
}

/// Payload bytes for every op of `trace` that keeps one, keyed by slot.
pub fn payloads_for(trace: &Trace) -> BTreeMap<u64, Vec<u8>> {
    trace
        .ops
        .iter()
        .filter_map(|op| {
            let slot = op.payload()?;
            let count: u64 = op.shape.iter().product();
            let length = count * op.dtype.item_size().expect("named dtype");
            Some((slot, pattern(slot, length as usize)))
        })
        .collect()
}

pub fn manifest() -> Manifest {
    Manifest {
        backend: "torch".to_string(),
        backend_runtime: "cpython-3.11".to_string(),
        backend_version: "2.5.0".to_string(),
        payload_policy: "all".to_string(),
        save_level: "full".to_string(),
        created_at: "2025-01-01T00:00:00Z".to_string(),
        codec_metadata: "{\"sharding\":null}".to_string(),
        payload_checksums: Vec::new(),
        extra: vec![("note".to_string(), "test".to_string())],
    }
}

/// Encodes `trace` with pattern payloads.
pub fn encode(trace: &Trace) -> Vec<u8> {
    let payloads = payloads_for(trace);
    tlspec::encode_with_payloads(trace, &manifest(), |slot| {
        payloads.get(&slot).map(Vec::as_slice)
    })
    .expect("encodes")
}

/// A file from a header JSON and a data section, with the length prefix and no padding.
pub fn raw_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(data);
    file
}

/// The `__metadata__` JSON of a minimal .tlspec with the given version and logical dtypes.
pub fn metadata_json(version: &str, logical_dtypes: &str) -> String {
    serde_json::json!({
        "format": "tlspec",
        "format_version": version,
        "logical_dtypes": logical_dtypes,
    })
    .to_string()
}

/// A file whose data is `body` alone, under a well-formed tlspec header.
pub fn file_from_body(body: &[u8]) -> Vec<u8> {
    let header = format!(
        r#"{{"__metadata__":{},"__torchlens_body__":{{"dtype":"U8","shape":[{len}],"data_offsets":[0,{len}]}}}}"#,
        metadata_json("1", "{}"),
        len = body.len()
    );
    raw_file(&header, body)
}

/// The postcard body of a trace (no padding), as the encoder writes it.
pub fn body_of(trace: &Trace, version: u32) -> Vec<u8> {
    postcard::to_allocvec(&TraceBody {
        format_version: version,
        trace: trace.clone(),
    })
    .expect("encodes")
}

/// The error code of a failed decode; panics when the decode succeeds.
pub fn decode_code(bytes: &[u8]) -> &'static str {
    match tlspec::decode_file(bytes) {
        Ok(_) => panic!("decode unexpectedly succeeded"),
        Err(error) => error.code,
    }
}
