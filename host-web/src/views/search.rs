//! The search box: a selector expression, the same text the CLI takes, evaluated by the core.

use crate::error::WebResult;
use serde::Serialize;
use torchlens_core::model::OpId;
use torchlens_core::selectors::{evaluate, parse_expression};
use torchlens_core::Trace;

/// Most matches listed by label; the count is always exact.
pub const MAX_LISTED_MATCHES: usize = 2000;

/// The ops an expression matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchResult {
    /// How many ops matched.
    pub count: usize,
    /// The first [`MAX_LISTED_MATCHES`] matches, `(id, label)`, in capture order.
    pub listed: Vec<(OpId, String)>,
    /// Every matched op id, ascending (for highlighting the graph).
    pub ops: Vec<OpId>,
}

/// Parses and evaluates `expression` over the trace. Syntax errors and value-dependent
/// selectors come back as `invalid-selector` errors with the core's codes.
pub fn search(trace: &Trace, expression: &str) -> WebResult<SearchResult> {
    let selector = parse_expression(expression)?;
    let ops = evaluate(trace, &selector, &[])?;
    let listed = ops
        .iter()
        .take(MAX_LISTED_MATCHES)
        .filter_map(|&id| Some((id, trace.ops.get(id as usize)?.label.to_string())))
        .collect();
    Ok(SearchResult {
        count: ops.len(),
        listed,
        ops,
    })
}
