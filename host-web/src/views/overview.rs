//! The file and trace at a glance: what the header says, what the core checked, how big the
//! trace is and whether its capture is complete.

use serde::Serialize;
use torchlens_core::tlspec::HeaderInfo;
use torchlens_core::Trace;

/// Sizes of the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Ops.
    pub ops: usize,
    /// Layers.
    pub layers: usize,
    /// Modules (the root included).
    pub modules: usize,
    /// Module calls (the root call included).
    pub module_calls: usize,
    /// Parameters.
    pub params: usize,
    /// Model inputs.
    pub inputs: usize,
    /// Model outputs.
    pub outputs: usize,
    /// Ops whose value the file holds.
    pub saved: usize,
}

/// The backward pass the file holds (torch traces saved after a `loss.backward()`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackwardView {
    /// Backward passes that reached the outputs.
    pub passes: u32,
    /// Autograd functions in the backward graph.
    pub grad_fns: usize,
    /// Gradient edges between them.
    pub edges: usize,
    /// Ops whose output gradient the file holds.
    pub saved_grads: usize,
}

/// The capture status recorded in the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaptureView {
    /// False when the capture may be incomplete; `reason` then says why.
    pub verified: bool,
    /// Why the capture may be incomplete.
    pub reason: Option<String>,
    /// Set when capture stopped early: why, and the labels of the ops it stopped at.
    pub stop_reason: Option<String>,
    /// Labels of the ops capture stopped at.
    pub frontier: Vec<String>,
}

/// Everything the status bar and the file panel show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Overview {
    /// The core version that checked the file.
    pub core_version: &'static str,
    /// File size in bytes.
    pub file_length: u64,
    /// Header JSON size in bytes.
    pub header_length: u64,
    /// Trace body size in bytes.
    pub body_length: u64,
    /// Bytes of saved values.
    pub payload_bytes: u64,
    /// The manifest as `key, value` pairs in a fixed order, then any extra keys.
    pub manifest: Vec<(String, String)>,
    /// Sizes of the trace.
    pub counts: Counts,
    /// The capture status.
    pub capture: CaptureView,
    /// Trace-level backend facts.
    pub extras: Vec<(String, String)>,
    /// The backward pass, when the file has one.
    pub backward: Option<BackwardView>,
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
    let label = |op: &u32| trace.ops.get(*op as usize).map(|op| op.label.to_string());
    let saved_grads = trace.backward.as_ref().map_or(0, |backward| {
        backward
            .grads
            .iter()
            .filter(|grad| grad.slot.is_some())
            .count()
    });
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
            saved: header.payloads.len() - saved_grads,
        },
        capture: CaptureView {
            verified: trace.capture.verified,
            reason: trace.capture.reason.clone(),
            stop_reason: trace.capture.stop_reason.clone(),
            frontier: trace.capture.frontier.iter().filter_map(label).collect(),
        },
        extras: trace.extras.clone(),
        backward: trace.backward.as_ref().map(|backward| BackwardView {
            passes: backward.passes,
            grad_fns: backward.nodes.len(),
            edges: backward.edges().len(),
            saved_grads,
        }),
    }
}
