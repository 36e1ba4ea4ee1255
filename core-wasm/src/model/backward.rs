//! A captured backward pass: the backward graph (one node per autograd function, linked to the
//! forward op whose output it differentiates) and the ops whose output gradients were saved.
//!
//! It is an optional part of a trace: a backend with true backward capture (torch) hands it to
//! the core as JSON once the user's `loss.backward()` has run; the `.tlspec` codec stores it
//! after the trace in the body and each saved gradient as a payload tensor named
//! `grad/<op label>` (see docs/tlspec-format.md, "Backward pass").

use super::{OpId, Trace};
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::events::PayloadSlot;
use serde::{Deserialize, Serialize};

/// Tensor-name prefix of a saved gradient payload (`grad/linear_1_2`).
pub const GRAD_TENSOR_PREFIX: &str = "grad/";

/// One autograd function of the backward graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradFnNode {
    /// `{type}_back_{typeIndex}_{step}` (`addmm_back_1_3`).
    pub label: String,
    /// The autograd class (`AddmmBackward0`, `AccumulateGrad`).
    pub class_name: String,
    /// The forward op whose output this function differentiates, if a recorded op made it.
    pub op: Option<OpId>,
    /// The parameter an `AccumulateGrad` node writes into.
    pub param: Option<String>,
    /// Nodes this one passes gradients to (toward the inputs); each later than this node, so
    /// node order is a topological order from the outputs.
    pub children: Vec<u32>,
}

/// An op whose output gradient was saved, from the latest backward pass that reached it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedGrad {
    pub op: OpId,
    /// The host's handle on the gradient payload; `None` when the gradient is not stored.
    pub slot: Option<PayloadSlot>,
}

/// The backward part of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BackwardGraph {
    /// Backward passes that reached the trace's outputs.
    pub passes: u32,
    pub nodes: Vec<GradFnNode>,
    /// Ops with a saved gradient, ascending by op id, each once.
    pub grads: Vec<SavedGrad>,
}

fn invalid(code: &'static str, message: String) -> CoreError {
    CoreError::new(
        ErrorKind::InvalidTrace,
        code,
        message,
        "record the backward graph from a finished trace (ops, children and gradients in range)",
    )
}

impl BackwardGraph {
    /// Parses the JSON a host sends (the fields of this struct).
    pub fn from_json(text: &str) -> CoreResult<Self> {
        serde_json::from_str(text).map_err(|error| {
            invalid(
                "backward_graph_invalid",
                format!("the backward graph does not parse: {error}"),
            )
        })
    }

    /// The graph as JSON (what `from_json` reads).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Checks that every reference is in range for `trace` and that children come later (the
    /// graph is acyclic, so it can be laid out).
    pub fn validate(&self, trace: &Trace) -> CoreResult<()> {
        let op_count = trace.ops.len();
        for (index, node) in self.nodes.iter().enumerate() {
            if node.label.is_empty() {
                return Err(invalid(
                    "backward_graph_invalid",
                    format!("grad_fn {index} has no label"),
                ));
            }
            if let Some(op) = node.op.filter(|&op| op as usize >= op_count) {
                return Err(invalid(
                    "backward_graph_invalid",
                    format!("grad_fn {} names op {op}, which does not exist", node.label),
                ));
            }
            if let Some(child) = node
                .children
                .iter()
                .find(|&&child| child as usize <= index || child as usize >= self.nodes.len())
            {
                return Err(invalid(
                    "backward_graph_invalid",
                    format!(
                        "grad_fn {} feeds node {child}, which is not a later node",
                        node.label
                    ),
                ));
            }
        }
        let mut previous: Option<OpId> = None;
        for grad in &self.grads {
            if grad.op as usize >= op_count || previous.is_some_and(|last| grad.op <= last) {
                return Err(invalid(
                    "backward_graph_invalid",
                    format!(
                        "saved gradient of op {} is out of range or out of order",
                        grad.op
                    ),
                ));
            }
            previous = Some(grad.op);
        }
        Ok(())
    }

    /// `(from, to)` node index pairs in gradient-flow order.
    pub fn edges(&self) -> Vec<(u32, u32)> {
        self.nodes
            .iter()
            .enumerate()
            .flat_map(|(index, node)| {
                node.children
                    .iter()
                    .map(move |&child| (index as u32, child))
            })
            .collect()
    }
}
