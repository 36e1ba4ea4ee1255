//! Layered graph layout and SVG drawing of a trace.
//!
//! - `graph` picks what to draw: one node per op, or a collapsed overview with one box per
//!   module call (see [`LayoutView`]).
//! - `layered` places those nodes top to bottom (Sugiyama style: longest-path layers,
//!   barycenter ordering, order-preserving x placement, polyline edges); [`layout`] runs both.
//! - [`render_svg`] turns a [`GraphLayout`] into a self-contained SVG document.
//!
//! Every step is linear or `n log n` in the size of the drawn graph, so traces of 100k+ ops lay
//! out in well under a second.

mod expand;
mod graph;
mod layered;
mod svg;

pub use svg::render_svg;

use crate::error::CoreResult;
use crate::model::{OpKind, Trace};
use serde::{Deserialize, Serialize};

/// Which nodes to draw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayoutView {
    /// One node per op.
    Full,
    /// One box per module call directly under the root call, except for calls opened by
    /// `expanded`: those show their own ops and one box per direct child call (which may in turn
    /// be expanded). Ops that run directly in the root are always individual nodes.
    Collapsed {
        /// Module addresses (any alias) whose every call opens, or `address:call` entries
        /// (`block:17`) that open one call.
        expanded: Vec<String>,
    },
    /// The backward graph: one node per autograd function, from the outputs' functions down to
    /// the parameters' accumulators; an edge is a gradient passed on. Fails with
    /// `layout_no_backward` when the trace has no backward pass.
    Backward,
}

/// Whether a drawn node is a single op or a whole module call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeKind {
    /// A single op.
    Op,
    /// A collapsed module call standing for all of its ops.
    Module,
}

/// One placed node. `x`, `y` are the top-left corner; the layout grows downwards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutNode {
    /// Index of the node in [`GraphLayout::nodes`].
    pub id: u32,
    pub kind: NodeKind,
    /// The op's label, or `address:call` for a module box.
    pub label: String,
    /// Function name and shape for an op, class name and op count for a module box.
    pub detail: String,
    /// For an op node its kind (inputs and outputs are drawn differently); `None` for boxes.
    pub op_kind: Option<OpKind>,
    /// Op ids the node stands for, ascending (one for an op node, every op of a module box).
    pub ops: Vec<u32>,
    /// For a box the module's address; for an op its innermost module's address (`None` when it
    /// ran directly in the root).
    pub module_address: Option<String>,
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// One drawn edge, from the bottom of `from` to the top of `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutEdge {
    pub from: u32,
    pub to: u32,
    /// Polyline points, first on `from`, last on `to`; long edges bend through the layers they
    /// cross.
    pub points: Vec<(f64, f64)>,
}

/// A finished layout: node boxes and edge polylines in a `width` x `height` canvas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphLayout {
    pub width: f64,
    pub height: f64,
    pub nodes: Vec<LayoutNode>,
    pub edges: Vec<LayoutEdge>,
}

/// Lays out `trace` as seen through `view`.
///
/// Fails with [`crate::ErrorKind::InvalidTrace`] when the trace breaks an invariant the layout
/// relies on (an op pointing at a missing module call or at a later parent, a module call whose
/// parent comes after it).
pub fn layout(trace: &Trace, view: &LayoutView) -> CoreResult<GraphLayout> {
    let graph = match view {
        LayoutView::Backward => graph::build_backward(trace)?,
        _ => graph::build(trace, view)?,
    };
    let mut nodes = graph.nodes;
    let sizes: Vec<(f64, f64)> = nodes.iter().map(|node| (node.width, node.height)).collect();
    // Parentless nodes other than model inputs (constants, buffers, literals, boxes fed only by
    // parameters) sit just above their first consumer instead of at the top, which keeps
    // edges short and the number of bend points linear in practice.
    let float: Vec<bool> = nodes
        .iter()
        .map(|node| node.op_kind != Some(OpKind::Input))
        .collect();
    let placement = layered::place(&sizes, &graph.edges, &float)?;
    for (node, (x, y)) in nodes.iter_mut().zip(placement.positions) {
        node.x = x;
        node.y = y;
    }
    let edges = graph
        .edges
        .iter()
        .zip(placement.edge_points)
        .map(|(&(from, to), points)| LayoutEdge { from, to, points })
        .collect();
    Ok(GraphLayout {
        width: placement.width,
        height: placement.height,
        nodes,
        edges,
    })
}
