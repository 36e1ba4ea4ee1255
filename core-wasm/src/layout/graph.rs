//! Which nodes and edges to draw for a view: one node per op, or module calls collapsed into
//! boxes.

use super::expand::Expanded;
use super::{LayoutNode, LayoutView, NodeKind};
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::model::{Op, OpKind, Trace};

/// Approximate advance of one character of the 12px monospace font the SVG uses.
pub(crate) const CHAR_WIDTH: f64 = 7.3;
/// Horizontal padding inside a node, both sides together.
const PADDING: f64 = 20.0;
/// Narrowest node, so short labels still give a clickable box.
const MIN_WIDTH: f64 = 64.0;
/// Two text lines (label and detail) plus padding.
pub(crate) const NODE_HEIGHT: f64 = 40.0;

/// The graph to lay out: nodes (coordinates still zero) and deduplicated edges between them.
pub(crate) struct ViewGraph {
    pub nodes: Vec<LayoutNode>,
    /// `(from, to)` node ids, sorted, without duplicates or self-loops.
    pub edges: Vec<(u32, u32)>,
}

fn invalid(code: &'static str, message: String) -> CoreError {
    CoreError::new(
        ErrorKind::InvalidTrace,
        code,
        message,
        "rebuild the trace with TraceBuilder, or re-save it with a matching core version",
    )
}

/// Checks the invariants the layout relies on, so later indexing cannot go out of bounds.
fn validate(trace: &Trace) -> CoreResult<()> {
    for (index, call) in trace.module_calls.iter().enumerate() {
        if let Some(parent) = call.parent_call {
            if parent as usize >= index {
                return Err(invalid(
                    "layout_call_order",
                    format!("module call {index} has parent call {parent}, which is not earlier"),
                ));
            }
        }
    }
    for (index, op) in trace.ops.iter().enumerate() {
        if op.module_call as usize >= trace.module_calls.len() {
            return Err(invalid(
                "layout_missing_call",
                format!(
                    "op {index} ran in module call {}, which does not exist",
                    op.module_call
                ),
            ));
        }
        if let Some(parent) = op.parents.iter().find(|edge| edge.op as usize >= index) {
            return Err(invalid(
                "layout_parent_order",
                format!("op {index} has parent {}, which is not earlier", parent.op),
            ));
        }
    }
    Ok(())
}

/// Box size fitting the longer of the two text lines.
pub(crate) fn node_size(label: &str, detail: &str) -> (f64, f64) {
    let chars = label.chars().count().max(detail.chars().count()) as f64;
    ((chars * CHAR_WIDTH + PADDING).max(MIN_WIDTH), NODE_HEIGHT)
}

fn module_address(trace: &Trace, call: u32) -> Option<String> {
    let record = trace.module_calls.get(call as usize)?;
    if record.module == 0 {
        return None;
    }
    trace
        .modules
        .get(record.module as usize)
        .map(|module| module.address().to_string())
}

fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

fn op_node(trace: &Trace, id: u32, op: &Op) -> LayoutNode {
    let func = trace.func_name(op);
    let detail = match (op.name(), op.kind) {
        (Some(name), OpKind::Input | OpKind::Output | OpKind::Buffer) => {
            format!("{func} {name} {}", shape_text(&op.shape))
        }
        _ => format!("{func} {}", shape_text(&op.shape)),
    };
    let (width, height) = node_size(&op.label, &detail);
    LayoutNode {
        id: 0,
        kind: NodeKind::Op,
        label: op.label.to_string(),
        detail,
        op_kind: Some(op.kind),
        ops: vec![id],
        module_address: module_address(trace, op.module_call),
        x: 0.0,
        y: 0.0,
        width,
        height,
    }
}

fn module_node(trace: &Trace, call: u32) -> LayoutNode {
    let class = trace
        .module_calls
        .get(call as usize)
        .and_then(|record| trace.modules.get(record.module as usize))
        .map_or("", |module| module.class_name.as_str());
    let label = trace.call_name(call);
    LayoutNode {
        id: 0,
        kind: NodeKind::Module,
        label,
        // The class for now; `finish_module` adds the op count once every op is in.
        detail: class.to_string(),
        op_kind: None,
        ops: Vec::new(),
        module_address: module_address(trace, call),
        x: 0.0,
        y: 0.0,
        width: 0.0,
        height: 0.0,
    }
}

/// Sets a module box's detail (class and op count) and size once all its ops are in.
fn finish_module(node: &mut LayoutNode) {
    let count = node.ops.len();
    let noun = if count == 1 { "op" } else { "ops" };
    node.detail = if node.detail.is_empty() {
        format!("{count} {noun}")
    } else {
        format!("{} ({count} {noun})", node.detail)
    };
    let (width, height) = node_size(&node.label, &node.detail);
    node.width = width;
    node.height = height;
}

/// For each module call, the call whose box stands for its ops, or `None` when the call is open
/// (its ops and child calls are drawn individually).
fn call_boxes(trace: &Trace, expanded: &[String]) -> Vec<Option<u32>> {
    let expanded = Expanded::new(expanded);
    let mut boxes: Vec<Option<u32>> = Vec::with_capacity(trace.module_calls.len());
    for (index, call) in trace.module_calls.iter().enumerate() {
        // Validation guarantees the parent is earlier, so its entry is already computed.
        let entry = match call.parent_call {
            None => None,
            Some(parent) => match boxes.get(parent as usize).copied().flatten() {
                Some(inherited) => Some(inherited),
                None => {
                    let open = trace
                        .modules
                        .get(call.module as usize)
                        .is_some_and(|module| expanded.opens(module, call.call_number));
                    (!open).then_some(index as u32)
                }
            },
        };
        boxes.push(entry);
    }
    boxes
}

/// The nodes and edges to draw for `view`.
pub(crate) fn build(trace: &Trace, view: &LayoutView) -> CoreResult<ViewGraph> {
    validate(trace)?;
    let boxes = match view {
        LayoutView::Full | LayoutView::Backward => vec![None; trace.module_calls.len()],
        LayoutView::Collapsed { expanded } => call_boxes(trace, expanded),
    };
    let mut nodes: Vec<LayoutNode> = Vec::new();
    let mut node_of_op: Vec<u32> = Vec::with_capacity(trace.ops.len());
    // Node of each box call, created at the box's first op so nodes come in capture order.
    let mut node_of_call: Vec<Option<u32>> = vec![None; trace.module_calls.len()];
    for (index, op) in trace.ops.iter().enumerate() {
        let id = index as u32;
        let node = match boxes.get(op.module_call as usize).copied().flatten() {
            None => {
                nodes.push(op_node(trace, id, op));
                (nodes.len() - 1) as u32
            }
            Some(call) => match node_of_call[call as usize] {
                Some(node) => node,
                None => {
                    nodes.push(module_node(trace, call));
                    let node = (nodes.len() - 1) as u32;
                    node_of_call[call as usize] = Some(node);
                    node
                }
            },
        };
        if let Some(record) = nodes.get_mut(node as usize) {
            if record.kind == NodeKind::Module {
                record.ops.push(id);
            }
        }
        node_of_op.push(node);
    }
    for (index, node) in nodes.iter_mut().enumerate() {
        node.id = index as u32;
        if node.kind == NodeKind::Module {
            finish_module(node);
        }
    }
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for (index, op) in trace.ops.iter().enumerate() {
        let to = node_of_op[index];
        for parent in &op.parents {
            let from = node_of_op[parent.op as usize];
            if from != to {
                edges.push((from, to));
            }
        }
    }
    edges.sort_unstable();
    edges.dedup();
    Ok(ViewGraph { nodes, edges })
}

/// The backward graph's nodes and edges: one node per autograd function (label, then its class
/// and the forward op or parameter it belongs to), an edge from each function to those it
/// passes gradients to. A node linked to a forward op lists that op in `ops`.
pub(crate) fn build_backward(trace: &Trace) -> CoreResult<ViewGraph> {
    let backward = trace.backward.as_ref().ok_or_else(|| {
        CoreError::new(
            ErrorKind::NotFound,
            "layout_no_backward",
            "the trace has no backward pass to draw",
            "trace with save_grads= or backward_ready=True (torch) and run a backward first",
        )
    })?;
    backward.validate(trace)?;
    let nodes = backward
        .nodes
        .iter()
        .enumerate()
        .map(|(index, node)| {
            let op = node.op.and_then(|op| trace.ops.get(op as usize));
            let detail = match (op, &node.param) {
                (Some(op), _) => format!("{} \u{2190} {}", node.class_name, op.label),
                (None, Some(param)) => format!("{} \u{2192} {param}", node.class_name),
                (None, None) => node.class_name.clone(),
            };
            let (width, height) = node_size(&node.label, &detail);
            LayoutNode {
                id: index as u32,
                kind: NodeKind::Op,
                label: node.label.clone(),
                detail,
                op_kind: None,
                ops: node.op.into_iter().collect(),
                module_address: op.and_then(|op| module_address(trace, op.module_call)),
                x: 0.0,
                y: 0.0,
                width,
                height,
            }
        })
        .collect();
    let mut edges = backward.edges();
    edges.sort_unstable();
    edges.dedup();
    Ok(ViewGraph { nodes, edges })
}
