//! Python values ⇄ WIT values. Records cross into Python as plain dicts; the Python package
//! wraps them in its public classes.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use torchlens_host_runtime::wit;

/// A selector arena from Python: `(nodes, root)`, each node a `(kind, payload)` tuple with
/// kinds `func`, `label`, `label_contains`, `module`, `in_module` (payload: str), `and`, `or`
/// (list of node indices), `not` (index), `followed_by`, `preceded_by` (`(first, other,
/// within)`), `downstream_of`, `upstream_of` (seed index), `where` (predicate id).
pub fn selector(value: &Bound<'_, PyAny>) -> PyResult<wit::Selector> {
    let (nodes, root): (Vec<(String, Bound<'_, PyAny>)>, u32) = value.extract().map_err(|_| {
        PyTypeError::new_err("a selector arena is (nodes, root); build selectors with tl.func & co")
    })?;
    let nodes = nodes
        .into_iter()
        .map(|(kind, payload)| {
            Ok(match kind.as_str() {
                "func" => wit::SelectorNode::Func(payload.extract()?),
                "label" => wit::SelectorNode::Label(payload.extract()?),
                "label_contains" => wit::SelectorNode::LabelContains(payload.extract()?),
                "module" => wit::SelectorNode::Module(payload.extract()?),
                "in_module" => wit::SelectorNode::InModule(payload.extract()?),
                "and" => wit::SelectorNode::And(payload.extract()?),
                "or" => wit::SelectorNode::Or(payload.extract()?),
                "not" => wit::SelectorNode::Not(payload.extract()?),
                "followed_by" | "preceded_by" => {
                    let (first, other, within): (u32, u32, u32) = payload.extract()?;
                    let temporal = wit::Temporal {
                        first,
                        other,
                        within,
                    };
                    if kind == "followed_by" {
                        wit::SelectorNode::FollowedBy(temporal)
                    } else {
                        wit::SelectorNode::PrecededBy(temporal)
                    }
                }
                "downstream_of" => wit::SelectorNode::DownstreamOf(payload.extract()?),
                "upstream_of" => wit::SelectorNode::UpstreamOf(payload.extract()?),
                "where" => wit::SelectorNode::Where(payload.extract()?),
                other => {
                    return Err(PyValueError::new_err(format!(
                        "unknown selector node kind {other:?}"
                    )))
                }
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(wit::Selector { nodes, root })
}

/// A checked selector from the core as the arena `(nodes, root)` that [`selector`] reads back.
pub fn selector_arena(py: Python<'_>, selector: wit::Selector) -> PyResult<Bound<'_, PyAny>> {
    let leaf = |kind: &str, value: String| (kind, value).into_pyobject(py).map(Bound::into_any);
    let index = |kind: &str, child: u32| (kind, child).into_pyobject(py).map(Bound::into_any);
    let temporal = |kind: &str, t: wit::Temporal| {
        (kind, (t.first, t.other, t.within))
            .into_pyobject(py)
            .map(Bound::into_any)
    };
    let nodes = selector
        .nodes
        .into_iter()
        .map(|node| match node {
            wit::SelectorNode::Func(name) => leaf("func", name),
            wit::SelectorNode::Label(text) => leaf("label", text),
            wit::SelectorNode::LabelContains(text) => leaf("label_contains", text),
            wit::SelectorNode::Module(address) => leaf("module", address),
            wit::SelectorNode::InModule(address) => leaf("in_module", address),
            wit::SelectorNode::And(parts) => ("and", parts).into_pyobject(py).map(Bound::into_any),
            wit::SelectorNode::Or(parts) => ("or", parts).into_pyobject(py).map(Bound::into_any),
            wit::SelectorNode::Not(child) => index("not", child),
            wit::SelectorNode::FollowedBy(value) => temporal("followed_by", value),
            wit::SelectorNode::PrecededBy(value) => temporal("preceded_by", value),
            wit::SelectorNode::DownstreamOf(seed) => index("downstream_of", seed),
            wit::SelectorNode::UpstreamOf(seed) => index("upstream_of", seed),
            wit::SelectorNode::Where(id) => index("where", id),
        })
        .collect::<PyResult<Vec<_>>>()?;
    (nodes, selector.root)
        .into_pyobject(py)
        .map(Bound::into_any)
}

pub fn selector_class_name(class: wit::SelectorClass) -> &'static str {
    match class {
        wit::SelectorClass::Static => "static",
        wit::SelectorClass::Temporal => "temporal",
        wit::SelectorClass::ValueDependent => "value-dependent",
    }
}

fn op_kind_name(kind: wit::OpKind) -> &'static str {
    match kind {
        wit::OpKind::Compute => "compute",
        wit::OpKind::Input => "input",
        wit::OpKind::Output => "output",
        wit::OpKind::Constant => "constant",
        wit::OpKind::Buffer => "buffer",
        wit::OpKind::LiteralProducer => "literal_producer",
    }
}

fn edges(values: &[wit::Edge]) -> Vec<(u32, u32)> {
    values.iter().map(|edge| (edge.op, edge.position)).collect()
}

pub fn op_info<'py>(py: Python<'py>, op: &wit::OpInfo) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item("id", op.id)?;
    dict.set_item("label", &op.label)?;
    dict.set_item("layer_label", &op.layer_label)?;
    dict.set_item("pass_number", op.pass)?;
    dict.set_item("num_passes", op.num_passes)?;
    dict.set_item("func_name", &op.func_name)?;
    dict.set_item("op_type", &op.op_type)?;
    dict.set_item("kind", op_kind_name(op.kind))?;
    dict.set_item("name", &op.name)?;
    dict.set_item("parents", edges(&op.parents))?;
    dict.set_item("children", edges(&op.children))?;
    dict.set_item("params", &op.params)?;
    dict.set_item("module_stack", &op.module_stack)?;
    dict.set_item("shape", &op.shape)?;
    dict.set_item("dtype", &op.dtype)?;
    dict.set_item("output_index", op.output_index)?;
    dict.set_item("in_place", op.in_place)?;
    dict.set_item("payload", op.payload)?;
    dict.set_item("attributes", &op.attributes)?;
    dict.set_item(
        "source",
        op.source
            .as_ref()
            .map(|source| (source.file.clone(), source.line, source.function.clone())),
    )?;
    dict.set_item("site_key", &op.site_key)?;
    if let Some(distances) = &op.distances {
        dict.set_item("min_distance_from_input", distances.min_from_input)?;
        dict.set_item("max_distance_from_input", distances.max_from_input)?;
        dict.set_item("min_distance_to_output", distances.min_to_output)?;
        dict.set_item("max_distance_to_output", distances.max_to_output)?;
    }
    dict.set_item("input_ancestors", &op.input_ancestors)?;
    dict.set_item("output_descendants", &op.output_descendants)?;
    let edits: Vec<(String, String, String)> = op
        .edits
        .iter()
        .map(|edit| (edit.rule.clone(), edit.action.clone(), edit.timing.clone()))
        .collect();
    dict.set_item("edits", edits)?;
    dict.set_item("extras", &op.extras)?;
    dict.set_item("value", op.value)?;
    Ok(dict.into_any())
}

pub fn trace_info<'py>(py: Python<'py>, info: &wit::TraceInfo) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item("recurrence_detection", info.options.recurrence_detection)?;
    dict.set_item(
        "compute_input_output_distances",
        info.options.compute_input_output_distances,
    )?;
    dict.set_item("op_count", info.op_count)?;
    dict.set_item("layer_count", info.layer_count)?;
    dict.set_item("module_count", info.module_count)?;
    dict.set_item("param_count", info.param_count)?;
    dict.set_item("inputs", &info.inputs)?;
    dict.set_item("outputs", &info.outputs)?;
    dict.set_item("capture_verified", info.capture_verified)?;
    dict.set_item("capture_reason", &info.capture_reason)?;
    dict.set_item("stop_reason", &info.stop_reason)?;
    dict.set_item("frontier", &info.frontier)?;
    dict.set_item("extras", &info.extras)?;
    Ok(dict.into_any())
}

pub fn module_info<'py>(py: Python<'py>, module: &wit::ModuleInfo) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item("address", &module.address)?;
    dict.set_item("all_addresses", &module.all_addresses)?;
    dict.set_item("class_name", &module.class_name)?;
    dict.set_item("container", module.container)?;
    dict.set_item("training", module.training)?;
    dict.set_item("parent", &module.parent)?;
    dict.set_item("children", &module.children)?;
    dict.set_item("params", &module.params)?;
    let calls: Vec<(String, u32, u32, u32, Vec<u32>)> = module
        .calls
        .iter()
        .map(|call| {
            (
                call.name.clone(),
                call.call_number,
                call.first_op,
                call.end_op,
                call.outputs.clone(),
            )
        })
        .collect();
    dict.set_item("calls", calls)?;
    Ok(dict.into_any())
}

pub fn param_info<'py>(py: Python<'py>, param: &wit::ParamInfo) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item("address", &param.address)?;
    dict.set_item("module", &param.module)?;
    dict.set_item("shape", &param.shape)?;
    dict.set_item("dtype", &param.dtype)?;
    dict.set_item("trainable", param.trainable)?;
    dict.set_item("users", &param.users)?;
    Ok(dict.into_any())
}

fn manifest_dict<'py>(py: Python<'py>, manifest: &wit::Manifest) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("backend", &manifest.backend)?;
    dict.set_item("backend_runtime", &manifest.backend_runtime)?;
    dict.set_item("backend_version", &manifest.backend_version)?;
    dict.set_item("payload_policy", &manifest.payload_policy)?;
    dict.set_item("save_level", &manifest.save_level)?;
    dict.set_item("created_at", &manifest.created_at)?;
    dict.set_item("codec_metadata", &manifest.codec_metadata)?;
    dict.set_item("payload_checksums", &manifest.payload_checksums)?;
    dict.set_item("extra", &manifest.extra)?;
    Ok(dict)
}

/// A manifest from a dict with the WIT field names (missing keys read as empty).
pub fn manifest(value: &Bound<'_, PyAny>) -> PyResult<wit::Manifest> {
    let text = |key: &str| -> PyResult<String> {
        match value.get_item(key) {
            Ok(item) if !item.is_none() => item.extract(),
            _ => Ok(String::new()),
        }
    };
    let extra: Vec<(String, String)> = match value.get_item("extra") {
        Ok(item) if !item.is_none() => item.extract()?,
        _ => Vec::new(),
    };
    let payload_checksums: Vec<(String, u32)> = match value.get_item("payload_checksums") {
        Ok(item) if !item.is_none() => item.extract()?,
        _ => Vec::new(),
    };
    Ok(wit::Manifest {
        backend: text("backend")?,
        backend_runtime: text("backend_runtime")?,
        backend_version: text("backend_version")?,
        payload_policy: text("payload_policy")?,
        save_level: text("save_level")?,
        created_at: text("created_at")?,
        codec_metadata: text("codec_metadata")?,
        payload_checksums,
        extra,
    })
}

pub fn header_info<'py>(py: Python<'py>, info: &wit::HeaderInfo) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item("manifest", manifest_dict(py, &info.manifest)?)?;
    dict.set_item("format_version", info.format_version)?;
    dict.set_item("body_offset", info.body_offset)?;
    dict.set_item("body_length", info.body_length)?;
    let payloads: Vec<(String, String, String, Vec<u64>, u64, u64)> = info
        .payloads
        .iter()
        .map(|entry| {
            (
                entry.label.clone(),
                entry.dtype.clone(),
                entry.storage_dtype.clone(),
                entry.shape.clone(),
                entry.offset,
                entry.length,
            )
        })
        .collect();
    dict.set_item("payloads", payloads)?;
    dict.set_item("crc_table_offset", info.crc_table_offset)?;
    Ok(dict.into_any())
}

pub fn op_decisions(values: Vec<(u32, String, String)>) -> PyResult<Vec<wit::OpDecision>> {
    values
        .into_iter()
        .map(|(op, outcome, reason)| {
            let outcome = match outcome.as_str() {
                "passed" => wit::ReplayOutcome::Passed,
                "failed" => wit::ReplayOutcome::Failed,
                "not_replayable" => wit::ReplayOutcome::NotReplayable,
                "leaf" => wit::ReplayOutcome::Leaf,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "unknown replay outcome {other:?}"
                    )))
                }
            };
            Ok(wit::OpDecision {
                op,
                outcome,
                reason,
            })
        })
        .collect()
}

pub fn validation_status<'py>(
    py: Python<'py>,
    status: &wit::ValidationStatus,
) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    let state = match status.state {
        wit::ValidationState::Available => "available",
        wit::ValidationState::Passed => "passed",
        wit::ValidationState::Failed => "failed",
        wit::ValidationState::Unverified => "unverified",
        wit::ValidationState::Unavailable => "unavailable",
    };
    dict.set_item("state", state)?;
    dict.set_item("reason", &status.reason)?;
    dict.set_item("first_failed_op", status.first_failed_op)?;
    dict.set_item("replayed", status.replayed)?;
    dict.set_item("failed", status.failed)?;
    dict.set_item("not_replayable", status.not_replayable)?;
    Ok(dict.into_any())
}

/// A live plan as `(nodes, root)`, each node a tuple led by its kind (see `Session.live_plan`).
pub fn live_plan(py: Python<'_>, plan: wit::LivePlan) -> PyResult<Bound<'_, PyAny>> {
    let term = |kind: &str, term: wit::ModuleTerm| {
        (kind, term.modules, term.root, term.call)
            .into_pyobject(py)
            .map(Bound::into_any)
    };
    let nodes = plan
        .nodes
        .into_iter()
        .map(|node| match node {
            wit::LiveNode::Func((name, op_type)) => ("func", name, op_type)
                .into_pyobject(py)
                .map(Bound::into_any),
            wit::LiveNode::InModule(value) => term("in_module", value),
            wit::LiveNode::ModuleOutput(value) => term("module_output", value),
            wit::LiveNode::Label(op_type) => {
                ("label", op_type).into_pyobject(py).map(Bound::into_any)
            }
            wit::LiveNode::LabelContains(needle) => ("label_contains", needle)
                .into_pyobject(py)
                .map(Bound::into_any),
            wit::LiveNode::And(parts) => ("and", parts).into_pyobject(py).map(Bound::into_any),
            wit::LiveNode::Or(parts) => ("or", parts).into_pyobject(py).map(Bound::into_any),
            wit::LiveNode::Not(inner) => ("not", inner).into_pyobject(py).map(Bound::into_any),
            wit::LiveNode::FollowedBy((first, within)) => ("followed_by", first, within)
                .into_pyobject(py)
                .map(Bound::into_any),
            wit::LiveNode::PrecededBy(first) => ("preceded_by", first)
                .into_pyobject(py)
                .map(Bound::into_any),
            wit::LiveNode::Graph => ("graph",).into_pyobject(py).map(Bound::into_any),
        })
        .collect::<PyResult<Vec<_>>>()?;
    (nodes, plan.root).into_pyobject(py).map(Bound::into_any)
}
