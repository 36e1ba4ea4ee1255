//! One op in full, for the op panel: what ran, where, on what, and where its value lies.

use crate::error::{WebError, WebResult};
use crate::values::read_length;
use serde::Serialize;
use torchlens_core::model::OpId;
use torchlens_core::query::format_shape;
use torchlens_core::tlspec::HeaderInfo;
use torchlens_core::Trace;

/// An op another op points at, so the panel can link to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpRef {
    /// The other op's id.
    pub id: OpId,
    /// The other op's label.
    pub label: String,
    /// The argument position the edge fed.
    pub position: u32,
}

/// Where an op's saved value lies in the file and how much of it the page reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PayloadView {
    /// Absolute file offset of the first byte.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// Bytes to read for the summary (whole elements, at most [`crate::values::MAX_READ_BYTES`]).
    pub read_length: u64,
    /// The safetensors dtype it is stored as.
    pub storage_dtype: String,
    /// The stored shape (`[nbytes]` for values stored as bits).
    pub stored_shape: Vec<u64>,
}

/// Everything the op panel shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpDetail {
    /// The op's id (its index in capture order).
    pub id: OpId,
    /// The op's label (`relu_1_3:2`).
    pub label: String,
    /// The label of its layer.
    pub layer_label: String,
    /// Which pass of its layer the op is (1-based).
    pub pass: u32,
    /// How many passes its layer ran.
    pub num_passes: usize,
    /// The function as reported (`__radd__`).
    pub func_name: String,
    /// The function's normalized type (`add`).
    pub op_type: String,
    /// The op kind (`Compute`, `Input`, ...).
    pub kind: String,
    /// For inputs and outputs their path in the call, for buffers their address.
    pub name: Option<String>,
    /// Module calls from the innermost to the root, as `address:call` (the root is `self`).
    pub module_stack: Vec<String>,
    /// Class of the innermost module.
    pub module_class: String,
    /// Shape as `(2, 3)`.
    pub shape: String,
    /// Dtype name.
    pub dtype: String,
    /// Position among the outputs of a multi-output op.
    pub output_index: Option<u32>,
    /// Whether the op wrote into its first argument.
    pub in_place: bool,
    /// The ops it read.
    pub parents: Vec<OpRef>,
    /// The ops that read it.
    pub children: Vec<OpRef>,
    /// Addresses and shapes of the parameters the op read.
    pub params: Vec<(String, String)>,
    /// Non-tensor arguments, as text.
    pub attributes: Vec<(String, String)>,
    /// `file:line (function)` where the op was called from, when recorded.
    pub source: Option<String>,
    /// The op's stable site key.
    pub site: String,
    /// Hop distances `[min, max]` from any input, when recorded.
    pub from_input: Option<(Option<u32>, Option<u32>)>,
    /// Hop distances `[min, max]` to any output, when recorded.
    pub to_output: Option<(Option<u32>, Option<u32>)>,
    /// Edits applied to the value during capture.
    pub edits: Vec<String>,
    /// Backend-specific facts.
    pub extras: Vec<(String, String)>,
    /// Where its saved value lies, when the file holds one.
    pub payload: Option<PayloadView>,
}

fn refs(trace: &Trace, edges: &[torchlens_core::model::Edge]) -> Vec<OpRef> {
    edges
        .iter()
        .filter_map(|edge| {
            Some(OpRef {
                id: edge.op,
                label: trace.ops.get(edge.op as usize)?.label.to_string(),
                position: edge.position,
            })
        })
        .collect()
}

/// The detail of op `id`; fails with `viewer_op_out_of_range` for an id the trace lacks.
pub fn op_detail(header: &HeaderInfo, trace: &Trace, id: OpId) -> WebResult<OpDetail> {
    let op = trace.ops.get(id as usize).ok_or_else(|| {
        WebError::viewer(
            "viewer_op_out_of_range",
            format!(
                "op {id} does not exist; the trace has {} ops",
                trace.ops.len()
            ),
            "pick an op from the table, the graph or a search",
        )
    })?;
    let layer = trace.layer_of(op);
    let module_class = trace
        .module_calls
        .get(op.module_call as usize)
        .and_then(|call| trace.modules.get(call.module as usize))
        .map_or_else(String::new, |module| module.class_name.clone());
    let payload = op
        .payload()
        .and_then(|slot| header.payloads.get(usize::try_from(slot).ok()?))
        .map(|entry| PayloadView {
            offset: entry.offset,
            length: entry.length,
            read_length: read_length(&op.dtype, entry.length),
            storage_dtype: entry.storage_dtype.clone(),
            stored_shape: entry.shape.clone(),
        });
    let params = op
        .params
        .iter()
        .filter_map(|&param| trace.params.get(param as usize))
        .map(|param| (param.address.clone(), format_shape(&param.shape)))
        .collect();
    Ok(OpDetail {
        id,
        label: op.label.to_string(),
        layer_label: layer.map_or_else(String::new, |layer| layer.label.to_string()),
        pass: op.pass,
        num_passes: layer.map_or(1, |layer| layer.ops.len()),
        func_name: trace.func_name(op).to_string(),
        op_type: trace.op_type(op).to_string(),
        kind: format!("{:?}", op.kind),
        name: op.name().map(str::to_string),
        module_stack: trace
            .call_stack(op)
            .map(|call| trace.call_name(call))
            .collect(),
        module_class,
        shape: format_shape(&op.shape),
        dtype: op.dtype.name().to_string(),
        output_index: op.output_index(),
        in_place: op.in_place,
        parents: refs(trace, &op.parents),
        children: refs(trace, &op.children),
        params,
        attributes: op.attributes().to_vec(),
        source: op
            .source
            .as_ref()
            .map(|source| format!("{}:{} ({})", source.file, source.line, source.function)),
        site: trace.site_key(op),
        from_input: op.distances().map(|d| (d.min_from_input, d.max_from_input)),
        to_output: op.distances().map(|d| (d.min_to_output, d.max_to_output)),
        edits: op
            .edits()
            .iter()
            .map(|edit| format!("{} {} at {}", edit.rule, edit.action, edit.timing))
            .collect(),
        extras: op.extras().to_vec(),
        payload,
    })
}
