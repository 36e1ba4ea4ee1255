//! One opened file: the checked header and trace, and the graph view last laid out. Every
//! question the page asks goes through here, so the same code runs in the browser (through
//! [`crate::bindings`]) and in native tests.

use crate::error::{WebError, WebResult};
use crate::values::{summarize, ValueSummary};
use crate::views::{
    graph_view, op_detail, overview, search, GraphView, OpDetail, Overview, SearchResult,
};
use serde::Serialize;
use torchlens_core::layout::{layout, LayoutView};
use torchlens_core::model::OpId;
use torchlens_core::query::{summary_rows_in, SummaryRow};
use torchlens_core::tlspec::{decode_body, parse_header, HeaderInfo};
use torchlens_core::Trace;

/// Most nodes a graph view may have: more would not draw smoothly in the page.
pub const MAX_DRAWN_NODES: usize = 300_000;

/// Where the body lies, so the page reads exactly those bytes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BodyRange {
    /// Absolute file offset of the body.
    pub offset: u64,
    /// Length of the body in bytes.
    pub length: u64,
}

/// Largest trace body the page reads (the body is copied into the core's 32-bit memory, so
/// it must leave room for the decoded trace).
pub const MAX_BODY_BYTES: u64 = 1 << 30;

/// Parses the header (8 length bytes and the JSON) of a file of `file_length` bytes and says
/// where its body lies. A body over [`MAX_BODY_BYTES`] is refused (`viewer_body_too_large`).
pub fn body_range(header: &[u8], file_length: u64) -> WebResult<BodyRange> {
    body_range_within(header, file_length, MAX_BODY_BYTES)
}

/// [`body_range`] with an explicit body limit.
pub fn body_range_within(header: &[u8], file_length: u64, max_body: u64) -> WebResult<BodyRange> {
    let info = parse_header(header, file_length)?;
    if info.body_length > max_body {
        return Err(WebError::viewer(
            "viewer_body_too_large",
            format!(
                "the trace body is {} bytes; the browser viewer reads at most {max_body}",
                info.body_length
            ),
            "open the file with the tlspec CLI or the Python package",
        ));
    }
    Ok(BodyRange {
        offset: info.body_offset,
        length: info.body_length,
    })
}

/// A graph view and the node each op is drawn in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaidOut {
    /// The graph to draw.
    pub graph: GraphView,
    /// Per op, the index of the node that shows it.
    pub node_of_op: Vec<u32>,
}

/// An opened, checked file.
pub struct Session {
    header: HeaderInfo,
    trace: Trace,
    node_of_op: Vec<u32>,
}

impl Session {
    /// Checks the header and decodes and checks the body (every bound and invariant the core
    /// knows). Payload bytes are not needed.
    pub fn open(header: &[u8], body: &[u8], file_length: u64) -> WebResult<Self> {
        let info = parse_header(header, file_length)?;
        let trace = decode_body(&info, body)?;
        Ok(Self {
            header: info,
            trace,
            node_of_op: Vec::new(),
        })
    }

    /// The decoded trace.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The file and trace at a glance.
    pub fn overview(&self) -> Overview {
        overview(&self.header, &self.trace)
    }

    /// Summary rows `start .. start + count`, clipped to the trace.
    pub fn rows(&self, start: OpId, count: u32) -> Vec<SummaryRow> {
        summary_rows_in(&self.trace, start, count)
    }

    /// Lays out the collapsed view with `expanded` opened (module addresses or `address:call`
    /// entries), or every op when `full` is set, and remembers which node shows each op.
    /// A graph of more than [`MAX_DRAWN_NODES`] nodes is refused (`viewer_graph_too_large`):
    /// the page could not draw it smoothly.
    pub fn layout(&mut self, expanded: Vec<String>, full: bool) -> WebResult<GraphView> {
        self.layout_within(expanded, full, MAX_DRAWN_NODES)
    }

    /// [`Session::layout`] with an explicit node limit.
    pub fn layout_within(
        &mut self,
        expanded: Vec<String>,
        full: bool,
        max_nodes: usize,
    ) -> WebResult<GraphView> {
        let view = if full {
            LayoutView::Full
        } else {
            LayoutView::Collapsed { expanded }
        };
        let placed = layout(&self.trace, &view)?;
        if placed.nodes.len() > max_nodes {
            return Err(WebError::viewer(
                "viewer_graph_too_large",
                format!(
                    "this view has {} nodes, more than the {max_nodes} the page draws",
                    placed.nodes.len()
                ),
                "collapse modules (Collapse all), open one call at a time, or use the search box and the table",
            ));
        }
        let (graph, node_of_op) = graph_view(placed, self.trace.ops.len());
        self.node_of_op = node_of_op;
        Ok(graph)
    }

    /// Lays out the backward graph (one node per autograd function; a node linked to a forward
    /// op shows that op, so selecting works as in the forward views). A trace without a
    /// backward pass is refused (`layout_no_backward`).
    pub fn backward_layout(&mut self) -> WebResult<GraphView> {
        let placed = layout(&self.trace, &LayoutView::Backward)?;
        if placed.nodes.len() > MAX_DRAWN_NODES {
            return Err(WebError::viewer(
                "viewer_graph_too_large",
                format!(
                    "the backward graph has {} nodes, more than the {MAX_DRAWN_NODES} the page draws",
                    placed.nodes.len()
                ),
                "use tlspec summary or tlspec draw --backward for this trace",
            ));
        }
        let (graph, node_of_op) = graph_view(placed, self.trace.ops.len());
        self.node_of_op = node_of_op;
        Ok(graph)
    }

    /// The node of the last layout that shows `op`, if any.
    pub fn node_of(&self, op: OpId) -> Option<u32> {
        self.node_of_op
            .get(op as usize)
            .copied()
            .filter(|&node| node != u32::MAX)
    }

    /// The nodes of the last layout that show any of `ops`, ascending, without duplicates.
    pub fn nodes_of(&self, ops: &[OpId]) -> Vec<u32> {
        let mut nodes: Vec<u32> = ops.iter().filter_map(|&op| self.node_of(op)).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// Op `id` in full.
    pub fn op(&self, id: OpId) -> WebResult<OpDetail> {
        op_detail(&self.header, &self.trace, id)
    }

    /// The ops a selector expression matches.
    pub fn search(&self, expression: &str) -> WebResult<SearchResult> {
        search(&self.trace, expression)
    }

    /// Summarizes op `id`'s saved value from its first `bytes` (as many as the op detail's
    /// `read_length` says, read at its `offset`).
    pub fn value(&self, id: OpId, bytes: &[u8]) -> WebResult<ValueSummary> {
        let detail = self.op(id)?;
        let payload = detail.payload.ok_or_else(|| {
            WebError::viewer(
                "viewer_no_payload",
                format!("op {} has no saved value in this file", detail.label),
                "save the trace with this op's value kept (save= in tl.trace)",
            )
        })?;
        let op = self.trace.ops.get(id as usize).ok_or_else(|| {
            WebError::viewer(
                "viewer_op_out_of_range",
                "no such op",
                "pick an existing op",
            )
        })?;
        summarize(&op.dtype, &op.shape, bytes, payload.length)
    }
}
