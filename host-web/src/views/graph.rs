//! The graph the page draws: the core's layout, trimmed to what the canvas needs.

use serde::Serialize;
use torchlens_core::layout::{GraphLayout, NodeKind};
use torchlens_core::model::OpId;

/// One box to draw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphNode {
    /// The op's label, or `address:call` for a module box.
    pub label: String,
    /// Function and shape of an op, class and op count of a box.
    pub detail: String,
    /// `module` for a collapsed module call, otherwise the op kind (`Compute`, `Input`, ...).
    pub kind: String,
    /// The first op the node stands for.
    pub op: OpId,
    /// How many ops the node stands for.
    pub count: usize,
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

/// One edge, as a flat polyline `[x0, y0, x1, y1, ...]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphEdge {
    /// Index of the node the edge leaves.
    pub from: u32,
    /// Index of the node the edge enters.
    pub to: u32,
    /// The polyline, `[x0, y0, x1, y1, ...]`.
    pub points: Vec<f64>,
}

/// A laid-out graph, ready to draw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphView {
    /// Width of the drawing.
    pub width: f64,
    /// Height of the drawing.
    pub height: f64,
    /// Boxes, in capture order of their first op.
    pub nodes: Vec<GraphNode>,
    /// Edges between boxes.
    pub edges: Vec<GraphEdge>,
}

/// The drawable view of `layout`, and for each of `op_count` ops the node that shows it.
pub fn graph_view(layout: GraphLayout, op_count: usize) -> (GraphView, Vec<u32>) {
    let mut node_of_op = vec![u32::MAX; op_count];
    let nodes = layout
        .nodes
        .into_iter()
        .enumerate()
        .map(|(index, node)| {
            for &op in &node.ops {
                if let Some(slot) = node_of_op.get_mut(op as usize) {
                    *slot = index as u32;
                }
            }
            let kind = match (node.kind, node.op_kind) {
                (NodeKind::Module, _) => "module".to_string(),
                (NodeKind::Op, Some(kind)) => format!("{kind:?}"),
                (NodeKind::Op, None) => "Compute".to_string(),
            };
            GraphNode {
                label: node.label,
                detail: node.detail,
                kind,
                op: node.ops.first().copied().unwrap_or_default(),
                count: node.ops.len(),
                x: node.x,
                y: node.y,
                w: node.width,
                h: node.height,
            }
        })
        .collect();
    let edges = layout
        .edges
        .into_iter()
        .map(|edge| GraphEdge {
            from: edge.from,
            to: edge.to,
            points: edge.points.into_iter().flat_map(|(x, y)| [x, y]).collect(),
        })
        .collect();
    (
        GraphView {
            width: layout.width,
            height: layout.height,
            nodes,
            edges,
        },
        node_of_op,
    )
}
