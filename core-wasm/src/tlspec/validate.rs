//! Trace invariants. A decoded body is untrusted: every id and index it holds is checked here
//! before any query code indexes with it, so queries can index without bounds worries.

use crate::build::MAX_OPS;
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::model::{OpId, Trace};
use std::collections::HashSet;

const REMEDY: &str = "the trace body is inconsistent; save the trace again from its source";

fn invalid(code: &'static str, message: String) -> CoreError {
    CoreError::new(ErrorKind::InvalidTrace, code, message, REMEDY)
}

/// Checks an index against the length of the list it points into.
fn in_range(index: u64, len: usize, what: impl FnOnce() -> String) -> CoreResult<()> {
    if index < len as u64 {
        Ok(())
    } else {
        Err(invalid(
            "trace_index_out_of_range",
            format!("{} is {index}, but only {len} exist", what()),
        ))
    }
}

/// Checks the invariants of the trace model:
///
/// - op count fits the `u32` op ids;
/// - every parent edge points to an earlier op and every child edge to a later one (capture
///   order is a topological order; this also forbids cycles): `trace_edge_out_of_range` for an
///   id past the ops, `trace_cycle` for an id not earlier (resp. later) than the op;
/// - every layer, pass, function, module, module call and parameter index is in range
///   (`trace_index_out_of_range`), module call parents precede their child calls and module
///   parents form a forest (`trace_cycle`);
/// - op labels are unique (`trace_duplicate_label`); inputs, outputs and the frontier are ops.
pub fn validate_trace(trace: &Trace) -> CoreResult<()> {
    let ops = trace.ops.len();
    if ops > MAX_OPS {
        return Err(CoreError::new(
            ErrorKind::LimitExceeded,
            "trace_too_many_ops",
            format!("the trace holds {ops} ops, more than op ids can address"),
            "trace a smaller part of the model",
        ));
    }
    let mut labels = HashSet::with_capacity(ops);
    for (index, op) in trace.ops.iter().enumerate() {
        let id = index as u64;
        for parent in &op.parents {
            let parent_id = u64::from(parent.op);
            if parent_id >= ops as u64 {
                return Err(invalid(
                    "trace_edge_out_of_range",
                    format!("op {index} has parent {parent_id}, but only {ops} ops exist"),
                ));
            }
            if parent_id >= id {
                return Err(invalid(
                    "trace_cycle",
                    format!("op {index} has parent {parent_id}, which is not an earlier op"),
                ));
            }
        }
        for child in &op.children {
            let child_id = u64::from(child.op);
            if child_id >= ops as u64 {
                return Err(invalid(
                    "trace_edge_out_of_range",
                    format!("op {index} has child {child_id}, but only {ops} ops exist"),
                ));
            }
            if child_id <= id {
                return Err(invalid(
                    "trace_cycle",
                    format!("op {index} has child {child_id}, which is not a later op"),
                ));
            }
        }
        in_range(op.layer.into(), trace.layers.len(), || {
            format!("op {index}'s layer")
        })?;
        let passes = trace.layers[op.layer as usize].ops.len();
        if op.pass == 0 || op.pass as usize > passes {
            return Err(invalid(
                "trace_index_out_of_range",
                format!(
                    "op {index} is pass {} of a layer with {passes} passes",
                    op.pass
                ),
            ));
        }
        in_range(op.func.into(), trace.func_names.len(), || {
            format!("op {index}'s function")
        })?;
        in_range(op.module_call.into(), trace.module_calls.len(), || {
            format!("op {index}'s module call")
        })?;
        // The site's function is the op's own (checked above; the decoder refuses a stored site
        // that disagrees).
        in_range(op.site().module.into(), trace.modules.len(), || {
            format!("op {index}'s site module")
        })?;
        for &param in &op.params {
            in_range(param.into(), trace.params.len(), || {
                format!("op {index}'s parameter")
            })?;
        }
        for &other in op.input_ancestors().iter().chain(op.output_descendants()) {
            in_range(other.into(), ops, || {
                format!("op {index}'s input/output relative")
            })?;
        }
        if !labels.insert(&*op.label) {
            return Err(invalid(
                "trace_duplicate_label",
                format!("label `{}` names more than one op", op.label),
            ));
        }
    }
    for (index, layer) in trace.layers.iter().enumerate() {
        check_ops(&layer.ops, ops, || format!("layer {index}'s op"))?;
    }
    validate_modules(trace)?;
    for (index, param) in trace.params.iter().enumerate() {
        in_range(param.module.into(), trace.modules.len(), || {
            format!("parameter {index}'s module")
        })?;
        check_ops(&param.users, ops, || format!("parameter {index}'s user"))?;
    }
    check_ops(&trace.inputs, ops, || "an input".to_string())?;
    check_ops(&trace.outputs, ops, || "an output".to_string())?;
    check_ops(&trace.capture.frontier, ops, || "a frontier op".to_string())?;
    if let Some(backward) = &trace.backward {
        backward.validate(trace)?;
    }
    Ok(())
}

fn check_ops(ids: &[OpId], ops: usize, what: impl Fn() -> String) -> CoreResult<()> {
    for &id in ids {
        if u64::from(id) >= ops as u64 {
            return Err(invalid(
                "trace_edge_out_of_range",
                format!("{} is op {id}, but only {ops} ops exist", what()),
            ));
        }
    }
    Ok(())
}

fn validate_modules(trace: &Trace) -> CoreResult<()> {
    let ops = trace.ops.len();
    let modules = trace.modules.len();
    let calls = trace.module_calls.len();
    for (index, module) in trace.modules.iter().enumerate() {
        if let Some(parent) = module.parent {
            in_range(parent.into(), modules, || {
                format!("module {index}'s parent")
            })?;
        }
        for &child in &module.children {
            in_range(child.into(), modules, || format!("module {index}'s child"))?;
        }
        for &param in &module.params {
            in_range(param.into(), trace.params.len(), || {
                format!("module {index}'s parameter")
            })?;
        }
        for &call in &module.calls {
            in_range(call.into(), calls, || format!("module {index}'s call"))?;
        }
    }
    // Module parents are assigned by address, not declaration order, so they need not precede
    // their children; walk each chain once (states: 0 unseen, 1 on the current path, 2 done).
    let mut state = vec![0u8; modules];
    let mut path = Vec::new();
    for start in 0..modules {
        let mut current = Some(start);
        while let Some(module) = current {
            match state[module] {
                2 => break,
                1 => {
                    return Err(invalid(
                        "trace_cycle",
                        format!("module {module} is its own ancestor"),
                    ))
                }
                _ => {
                    state[module] = 1;
                    path.push(module);
                    current = trace.modules[module].parent.map(|parent| parent as usize);
                }
            }
        }
        for module in path.drain(..) {
            state[module] = 2;
        }
    }
    for (index, call) in trace.module_calls.iter().enumerate() {
        in_range(call.module.into(), modules, || {
            format!("module call {index}'s module")
        })?;
        if let Some(parent) = call.parent_call {
            in_range(parent.into(), calls, || {
                format!("module call {index}'s parent")
            })?;
            // Calls are numbered as they start, so an enclosing call always has a lower index.
            if parent as usize >= index {
                return Err(invalid(
                    "trace_cycle",
                    format!("module call {index} has parent call {parent}, which is not earlier"),
                ));
            }
        }
        if call.first_op > call.end_op || call.end_op as usize > ops {
            return Err(invalid(
                "trace_index_out_of_range",
                format!(
                    "module call {index} spans ops {}..{} of {ops}",
                    call.first_op, call.end_op
                ),
            ));
        }
        check_ops(&call.outputs, ops, || {
            format!("module call {index}'s output")
        })?;
    }
    Ok(())
}
