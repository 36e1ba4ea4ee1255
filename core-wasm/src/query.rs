//! Read-only questions hosts ask of a finished trace: summary rows and full ancestor or
//! descendant sets (computed on demand; the trace itself only stores the cheap boundary sets).

use crate::model::{BackwardGraph, OpId, Trace};
use crate::terminal_text::escape_for_terminal;
use serde::{Deserialize, Serialize};

/// One row of `trace.summary()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryRow {
    pub op: OpId,
    pub label: String,
    pub func_name: String,
    /// Innermost module call, `address:call` (`self` for the root).
    pub module: String,
    pub shape: String,
    pub dtype: String,
    pub parents: Vec<String>,
    pub saved: bool,
    pub param_count: u32,
}

/// Summary rows for every op, in capture order.
pub fn summary_rows(trace: &Trace) -> Vec<SummaryRow> {
    summary_rows_in(trace, 0, trace.ops.len() as u32)
}

/// Summary rows for ops `start .. start + count`, clipped to the trace (hosts that page
/// through a large trace, like the viewer's table, ask for one window at a time).
pub fn summary_rows_in(trace: &Trace, start: OpId, count: u32) -> Vec<SummaryRow> {
    let end = start.saturating_add(count).min(trace.ops.len() as u32);
    (start..end)
        .filter_map(|id| Some((id, trace.ops.get(id as usize)?)))
        .map(|(id, op)| SummaryRow {
            op: id,
            label: op.label.to_string(),
            func_name: trace.func_name(op).to_string(),
            module: trace.call_name(op.module_call),
            shape: format_shape(&op.shape),
            dtype: op.dtype.name().to_string(),
            parents: op
                .parents
                .iter()
                .filter_map(|edge| trace.ops.get(edge.op as usize))
                .map(|parent| parent.label.to_string())
                .collect(),
            saved: op.payload().is_some(),
            param_count: op.params.len() as u32,
        })
        .collect()
}

/// `(2, 3)` style shape text.
pub fn format_shape(shape: &[u64]) -> String {
    let parts: Vec<String> = shape.iter().map(u64::to_string).collect();
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

/// Renders summary rows as an aligned text table.
pub fn summary_table(trace: &Trace) -> String {
    let rows = summary_rows(trace);
    let headers = [
        "label", "func", "module", "shape", "dtype", "saved", "parents",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|row| {
            [
                row.label.clone(),
                row.func_name.clone(),
                row.module.clone(),
                row.shape.clone(),
                row.dtype.clone(),
                if row.saved { "yes" } else { "no" }.to_string(),
                row.parents.join(", "),
            ]
        })
        .collect();
    let mut table = aligned_table(&headers, &cells);
    table.push_str(&format!(
        "{} ops, {} layers, {} modules, {} params, {} saved\n",
        trace.ops.len(),
        trace.layers.len(),
        trace.modules.len(),
        trace.params.len(),
        rows.iter().filter(|row| row.saved).count()
    ));
    if let Some(backward) = &trace.backward {
        table.push_str(&backward_table(trace, backward));
    }
    table
}

/// Columns padded to their widest cell, two spaces apart, one line per row after the headers.
/// Every cell comes from the trace (a file from anyone, when loaded), so each is shown with its
/// control characters escaped ([`escape_for_terminal`]): the table is meant for a terminal.
fn aligned_table<const N: usize>(headers: &[&str; N], cells: &[[String; N]]) -> String {
    let cells: Vec<[String; N]> = cells
        .iter()
        .map(|row| {
            row.each_ref()
                .map(|cell| escape_for_terminal(cell).into_owned())
        })
        .collect();
    let mut widths = headers.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut table = String::new();
    let mut push_line = |columns: &[String]| {
        let line: Vec<String> = columns
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        table.push_str(line.join("  ").trim_end());
        table.push('\n');
    };
    push_line(&headers.map(String::from));
    for row in &cells {
        push_line(row);
    }
    table
}

/// The backward section of the summary: one row per grad_fn (its class, the forward op or
/// parameter it belongs to, whether that op's gradient was saved, the functions it feeds).
fn backward_table(trace: &Trace, backward: &BackwardGraph) -> String {
    let saved: std::collections::HashSet<OpId> = backward
        .grads
        .iter()
        .filter(|grad| grad.slot.is_some())
        .map(|grad| grad.op)
        .collect();
    let cells: Vec<[String; 5]> = backward
        .nodes
        .iter()
        .map(|node| {
            let op = node.op.and_then(|op| trace.ops.get(op as usize));
            let target = match (op, &node.param) {
                (Some(op), _) => op.label.to_string(),
                (None, Some(param)) => format!("param {param}"),
                (None, None) => String::new(),
            };
            let grad = node.op.is_some_and(|op| saved.contains(&op));
            let feeds: Vec<&str> = node
                .children
                .iter()
                .filter_map(|&child| backward.nodes.get(child as usize))
                .map(|child| child.label.as_str())
                .collect();
            [
                node.label.clone(),
                node.class_name.clone(),
                target,
                if grad { "yes" } else { "no" }.to_string(),
                feeds.join(", "),
            ]
        })
        .collect();
    let passes = backward.passes;
    let mut table = format!(
        "\nbackward: {passes} pass{}, {} grad_fns, {} edges, {} saved gradients\n",
        if passes == 1 { "" } else { "es" },
        backward.nodes.len(),
        backward.edges().len(),
        saved.len()
    );
    table.push_str(&aligned_table(
        &["grad_fn", "class", "forward", "grad", "feeds"],
        &cells,
    ));
    table
}

/// Every op that reaches `op` (excluding itself), ascending.
pub fn ancestors(trace: &Trace, op: OpId) -> Vec<OpId> {
    walk(trace, op, |current| &trace.ops[current as usize].parents)
}

/// Every op `op` reaches (excluding itself), ascending.
pub fn descendants(trace: &Trace, op: OpId) -> Vec<OpId> {
    walk(trace, op, |current| &trace.ops[current as usize].children)
}

fn walk<'a>(
    trace: &'a Trace,
    start: OpId,
    next: impl Fn(OpId) -> &'a [crate::model::Edge],
) -> Vec<OpId> {
    if start as usize >= trace.ops.len() {
        return Vec::new();
    }
    let mut seen = vec![false; trace.ops.len()];
    let mut stack = vec![start];
    seen[start as usize] = true;
    let mut found = Vec::new();
    while let Some(current) = stack.pop() {
        for edge in next(current) {
            if let Some(flag) = seen.get_mut(edge.op as usize) {
                if !*flag {
                    *flag = true;
                    found.push(edge.op);
                    stack.push(edge.op);
                }
            }
        }
    }
    found.sort_unstable();
    found
}
