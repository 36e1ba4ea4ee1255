//! Selectors as data. A selector is a small tree of nodes kept in an arena (children before
//! parents), so it crosses the WIT boundary as a flat list and cannot contain cycles.
//!
//! Three classes, so a backend can refuse what it cannot honour:
//! - static (`func`, `label`, `label_contains`, `module`, `in_module`, the influence terms
//!   `downstream_of` / `upstream_of`, and `&`, `|`, `~` of them): decided from metadata alone
//!   (the influence terms from the dataflow graph: an op downstream of a seed is known when
//!   the op is recorded, an op upstream of one only once no later op can still read it, at the
//!   end of the capture);
//! - temporal (`followed_by`, `preceded_by`): need a window of neighbouring ops;
//! - value-dependent (`where`, callables): need the op's value, which only the host has.

mod evaluate;
mod expression;
mod live;
mod plan;
mod truth;

pub use evaluate::{decide_op, evaluate, WhereResult};
pub use expression::{parse_expression, MAX_EXPRESSION_BYTES, MAX_EXPRESSION_DEPTH};
pub use live::{LiveNode, LivePlan, ModuleTerm};
pub use plan::{check_plannable, CapturePlan, Decision};

use crate::error::{CoreError, CoreResult, ErrorKind};
use serde::{Deserialize, Serialize};

/// Most nodes a selector may have.
pub const MAX_SELECTOR_NODES: usize = 4096;
/// Widest `within` window a temporal selector may ask for.
pub const MAX_TEMPORAL_WINDOW: u32 = 1 << 16;

/// One node of a selector tree. Child references are indices of earlier nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectorNode {
    /// The op's function name or normalized type equals this (`"relu"`, `"add"` for `+`).
    Func(String),
    /// Exact label; a label without `:pass` matches every pass of its layer.
    Label(String),
    /// Case-insensitive substring of the op label.
    LabelContains(String),
    /// The output boundary of a module call: `"block"` every call, `"block:2"` the second.
    Module(String),
    /// Any op inside a module call, at any depth: `"block"` or `"block:2"`.
    InModule(String),
    And(Vec<u32>),
    Or(Vec<u32>),
    Not(u32),
    /// Ops matching `first` such that one of the next `within` ops (capture order) matches
    /// `then`.
    FollowedBy {
        first: u32,
        then: u32,
        within: u32,
    },
    /// Ops matching `first` such that one of the previous `within` ops matches `before`.
    PrecededBy {
        first: u32,
        before: u32,
        within: u32,
    },
    /// Ops some op matching the child reaches along dataflow edges (its strict descendants:
    /// a seed op is included only when another seed op reaches it).
    DownstreamOf(u32),
    /// Ops that reach some op matching the child along dataflow edges (its strict ancestors).
    UpstreamOf(u32),
    /// A host-side predicate over the op's value, identified by the host.
    Where(u32),
}

/// How much a selector needs to be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SelectorClass {
    Static,
    Temporal,
    ValueDependent,
}

/// A selector: nodes in an arena, and the root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    pub nodes: Vec<SelectorNode>,
    pub root: u32,
}

fn selector_error(code: &'static str, message: String) -> CoreError {
    CoreError::new(
        ErrorKind::InvalidSelector,
        code,
        message,
        "build selectors with tl.func / tl.label / tl.module / ... and &, |, ~",
    )
}

impl Selector {
    /// A one-node selector.
    pub fn leaf(node: SelectorNode) -> Self {
        Self {
            nodes: vec![node],
            root: 0,
        }
    }

    /// Checks that the arena is well formed: bounded size, children before parents, root in
    /// range, temporal windows in bounds.
    pub fn validate(&self) -> CoreResult<()> {
        if self.nodes.is_empty() || self.nodes.len() > MAX_SELECTOR_NODES {
            return Err(selector_error(
                "selector_size_invalid",
                format!(
                    "a selector needs 1 to {MAX_SELECTOR_NODES} nodes, got {}",
                    self.nodes.len()
                ),
            ));
        }
        if self.root as usize >= self.nodes.len() {
            return Err(selector_error(
                "selector_root_out_of_range",
                format!(
                    "root {} is not one of the {} nodes",
                    self.root,
                    self.nodes.len()
                ),
            ));
        }
        for (index, node) in self.nodes.iter().enumerate() {
            for child in children(node) {
                if child as usize >= index {
                    return Err(selector_error(
                        "selector_child_order",
                        format!("node {index} refers to node {child}, which is not before it"),
                    ));
                }
            }
            match node {
                SelectorNode::And(parts) | SelectorNode::Or(parts) if parts.is_empty() => {
                    return Err(selector_error(
                        "selector_empty_composite",
                        format!("node {index} combines no selectors"),
                    ));
                }
                SelectorNode::FollowedBy { within, .. }
                | SelectorNode::PrecededBy { within, .. }
                    if *within == 0 || *within > MAX_TEMPORAL_WINDOW =>
                {
                    return Err(selector_error(
                        "selector_window_invalid",
                        format!("node {index}: within must be 1 to {MAX_TEMPORAL_WINDOW}"),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The class of the selector: the most demanding class of any node reachable from the root.
    pub fn class(&self) -> SelectorClass {
        self.class_of(self.root)
    }

    fn class_of(&self, index: u32) -> SelectorClass {
        let Some(node) = self.nodes.get(index as usize) else {
            return SelectorClass::Static;
        };
        let own = match node {
            SelectorNode::Where(_) => SelectorClass::ValueDependent,
            SelectorNode::FollowedBy { .. } | SelectorNode::PrecededBy { .. } => {
                SelectorClass::Temporal
            }
            _ => SelectorClass::Static,
        };
        children(node)
            .into_iter()
            .map(|child| self.class_of(child))
            .fold(own, SelectorClass::max)
    }

    /// Whether any reachable node is an `upstream_of(...)` term: the ops that reach a later op
    /// are known only once the capture ends, so an op-by-op rule cannot use one.
    pub fn uses_upstream(&self) -> bool {
        self.reachable()
            .any(|node| matches!(node, SelectorNode::UpstreamOf(_)))
    }

    /// Whether any reachable node is a `module(...)` boundary selector (decided at a call's
    /// exit rather than when the op runs).
    pub fn uses_module_boundary(&self) -> bool {
        self.reachable()
            .any(|node| matches!(node, SelectorNode::Module(_)))
    }

    fn reachable(&self) -> impl Iterator<Item = &SelectorNode> {
        let mut stack = vec![self.root];
        let mut seen = vec![false; self.nodes.len()];
        std::iter::from_fn(move || {
            while let Some(index) = stack.pop() {
                let Some(node) = self.nodes.get(index as usize) else {
                    continue;
                };
                if std::mem::replace(&mut seen[index as usize], true) {
                    continue;
                }
                stack.extend(children(node));
                return Some(node);
            }
            None
        })
    }
}

/// Child node indices of a node.
pub(crate) fn children(node: &SelectorNode) -> Vec<u32> {
    match node {
        SelectorNode::And(parts) | SelectorNode::Or(parts) => parts.clone(),
        SelectorNode::Not(inner)
        | SelectorNode::DownstreamOf(inner)
        | SelectorNode::UpstreamOf(inner) => vec![*inner],
        SelectorNode::FollowedBy { first, then, .. } => vec![*first, *then],
        SelectorNode::PrecededBy { first, before, .. } => vec![*first, *before],
        _ => Vec::new(),
    }
}

/// Splits `block:2` into (`block`, Some(2)); a non-numeric suffix is part of the address.
pub(crate) fn split_call_suffix(text: &str) -> (&str, Option<u32>) {
    match text.rsplit_once(':') {
        Some((address, number)) => match number.parse::<u32>() {
            Ok(number) => (address, Some(number)),
            Err(_) => (text, None),
        },
        None => (text, None),
    }
}
