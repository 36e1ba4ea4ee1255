//! The file and trace at a glance: what the header says, what the core checked, how big the
//! trace is and whether its capture is complete.

use serde::Serialize;
use torchlens_core::tlspec::HeaderInfo;
use torchlens_core::Trace;

/// Sizes of the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub ops: usize,
    pub layers: usize,
    pub modules: usize,
    pub module_calls: usize,
    pub params: usize,
    pub inputs: usize,
    pub outputs: usize,
    /// Ops whose value the file holds.
    pub saved: usize,
}

/// The capture status recorded in the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaptureView {
    /// False when the capture may be incomplete; `reason` then says why.
    pub verified: bool,
    pub reason: Option<String>,
    /// Set when capture stopped early: why, and the labels of the ops it stopped at.
    pub stop_reason: Option<String>,
    pub frontier: Vec<String>,
}

/// Everything the status bar and the file panel show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Overview {
    /// The core version that checked the file.
    pub core_version: &'static str,
    pub file_length: u64,
    pub header_length: u64,
    pub body_length: u64,
    pub payload_bytes: u64,
    /// The manifest as `key, value` pairs in a fixed order, then any extra keys.
    pub manifest: Vec<(String, String)>,
    pub counts: Counts,
    pub capture: CaptureView,
    /// Trace-level backend facts.
    pub extras: Vec<(String, String)>,
}

/// The overview of a decoded file.
pub fn overview(header: &HeaderInfo, trace: &Trace) -> Overview {
    let manifest = &header.manifest;
    let mut pairs: Vec<(String, String)> = [
        ("backend", &manifest.backend),
        ("backend_runtime", &manifest.backend_runtime),
        ("backend_version", &manifest.backend_version),
        ("payload_policy", &manifest.payload_policy),
        ("save_level", &manifest.save_level),
        ("created_at", &manifest.created_at),
        ("codec_metadata", &manifest.codec_metadata),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value.clone()))
    .collect();
    pairs.extend(manifest.extra.iter().cloned());
    let label = |op: &u32| trace.ops.get(*op as usize).map(|op| op.label.clone());
    Overview {
        core_version: env!("CARGO_PKG_VERSION"),
        file_length: header.file_length,
        header_length: header.header_length,
        body_length: header.body_length,
        payload_bytes: header.payloads.iter().map(|entry| entry.length).sum(),
        manifest: pairs,
        counts: Counts {
            ops: trace.ops.len(),
            layers: trace.layers.len(),
            modules: trace.modules.len(),
            module_calls: trace.module_calls.len(),
            params: trace.params.len(),
            inputs: trace.inputs.len(),
            outputs: trace.outputs.len(),
            saved: header.payloads.len(),
        },
        capture: CaptureView {
            verified: trace.capture.verified,
            reason: trace.capture.reason.clone(),
            stop_reason: trace.capture.stop_reason.clone(),
            frontier: trace.capture.frontier.iter().filter_map(label).collect(),
        },
        extras: trace.extras.clone(),
    }
}
