//! Draws a [`GraphLayout`] as one self-contained SVG document.

use super::{GraphLayout, LayoutNode, NodeKind};
use crate::model::OpKind;
use crate::terminal_text::is_terminal_control;
use std::fmt::Write;

/// Escapes text for XML content and double-quoted attribute values.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0 at all; drop them.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            // DEL, the C1 controls and the bidirectional overrides are allowed in XML but act on
            // a terminal the SVG is printed to (`tlspec draw` writes to standard output): as
            // character references they draw the same and reach no terminal raw.
            // (Tab, newline and carriage return, kept above, are layout, not controls here.)
            c if c > '\u{7e}' && is_terminal_control(c) => {
                let _ = write!(escaped, "&#x{:x};", c as u32);
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// Fill, stroke and CSS class of a node, by what it stands for.
fn style(node: &LayoutNode) -> (&'static str, &'static str, &'static str) {
    match (node.kind, node.op_kind) {
        (NodeKind::Module, _) => ("#e3ecfa", "#4a6fa5", "module"),
        (NodeKind::Op, Some(OpKind::Input)) => ("#e0f4e3", "#3c8a4f", "op input"),
        (NodeKind::Op, Some(OpKind::Output)) => ("#fbe3e1", "#b5483d", "op output"),
        (NodeKind::Op, Some(OpKind::Constant | OpKind::Buffer | OpKind::LiteralProducer)) => {
            ("#f2f2f2", "#888888", "op value")
        }
        (NodeKind::Op, _) => ("#ffffff", "#555555", "op"),
    }
}

/// Renders `layout` as SVG: rounded boxes with a label and a detail line, edges as polylines
/// with arrowheads. Each node group carries `data-id`, `data-ops` (space-separated op ids) and,
/// where known, `data-module`, so a viewer can expand or collapse boxes. Text is XML-escaped and
/// numbers are printed with fixed precision, so equal layouts give byte-equal output.
pub fn render_svg(layout: &GraphLayout) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; the results are ignored.
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.1}\" height=\"{h:.1}\" \
         viewBox=\"0 0 {w:.1} {h:.1}\" font-family=\"ui-monospace, Menlo, Consolas, monospace\" \
         font-size=\"12\">",
        w = layout.width,
        h = layout.height,
    );
    out.push_str(
        "<defs><marker id=\"tl-arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">\
         <path d=\"M0,0 L10,5 L0,10 z\" fill=\"#666666\"/></marker></defs>\n",
    );
    out.push_str("<g class=\"edges\" fill=\"none\" stroke=\"#666666\" stroke-width=\"1.2\">\n");
    for edge in &layout.edges {
        let _ = write!(
            out,
            "<polyline data-from=\"{}\" data-to=\"{}\" marker-end=\"url(#tl-arrow)\" points=\"",
            edge.from, edge.to
        );
        for (index, (x, y)) in edge.points.iter().enumerate() {
            if index > 0 {
                out.push(' ');
            }
            let _ = write!(out, "{x:.1},{y:.1}");
        }
        out.push_str("\"/>\n");
    }
    out.push_str("</g>\n<g class=\"nodes\" text-anchor=\"middle\">\n");
    for node in &layout.nodes {
        let (fill, stroke, class) = style(node);
        let _ = write!(
            out,
            "<g class=\"node {class}\" data-id=\"{}\" data-ops=\"",
            node.id
        );
        for (index, op) in node.ops.iter().enumerate() {
            if index > 0 {
                out.push(' ');
            }
            let _ = write!(out, "{op}");
        }
        out.push('"');
        if let Some(address) = &node.module_address {
            let _ = write!(out, " data-module=\"{}\"", escape(address));
        }
        let centre = node.x + node.width / 2.0;
        // Modules get a thicker border and a dashed outline on top of their fill, so they read
        // as "more inside" even in greyscale.
        let (stroke_width, dash) = match node.kind {
            NodeKind::Module => ("2", " stroke-dasharray=\"6 3\""),
            NodeKind::Op => ("1", ""),
        };
        let _ = writeln!(
            out,
            "><title>{title}</title>\
             <rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" rx=\"6\" \
             ry=\"6\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"{stroke_width}\"{dash}/>\
             <text x=\"{centre:.1}\" y=\"{ly:.1}\" font-weight=\"bold\">{label}</text>\
             <text x=\"{centre:.1}\" y=\"{dy:.1}\" fill=\"#555555\">{detail}</text></g>",
            title = escape(&format!("{}\n{}", node.label, node.detail)),
            x = node.x,
            y = node.y,
            w = node.width,
            h = node.height,
            ly = node.y + node.height / 2.0 - 3.0,
            dy = node.y + node.height / 2.0 + 12.0,
            label = escape(&node.label),
            detail = escape(&node.detail),
        );
    }
    out.push_str("</g>\n</svg>\n");
    out
}
