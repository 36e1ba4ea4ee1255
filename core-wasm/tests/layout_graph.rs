//! Layout and SVG drawing of traces built from raw events.

use std::collections::BTreeSet;
use torchlens_core::events::{ArgRef, ModuleDecl, OpEvent, ParamDecl, RawEvent, TensorDesc};
use torchlens_core::layout::{layout, render_svg, GraphLayout, LayoutView, NodeKind};
use torchlens_core::model::{OpKind, TraceOptions};
use torchlens_core::{Trace, TraceBuilder};

fn desc(tensor: u64) -> TensorDesc {
    TensorDesc {
        tensor,
        shape: vec![1, 4].into(),
        dtype: torchlens_core::dtype::Dtype::Float32,
        payload: None,
    }
}

fn module(id: u32, address: &str, class: &str) -> RawEvent {
    RawEvent::Module(ModuleDecl {
        id,
        addresses: vec![address.to_string()],
        class_name: class.to_string(),
        container: false,
        training: false,
    })
}

fn param(tensor: u64, address: &str, module: u32) -> RawEvent {
    RawEvent::Param(ParamDecl {
        tensor,
        address: address.to_string(),
        module,
        shape: vec![4, 4],
        dtype: torchlens_core::dtype::Dtype::Float32,
        trainable: true,
    })
}

fn op(func: &str, args: &[u64], output: u64) -> RawEvent {
    RawEvent::Op(OpEvent {
        func: func.to_string(),
        args: args
            .iter()
            .enumerate()
            .map(|(position, &tensor)| ArgRef {
                tensor,
                position: position as u32,
                keyword: None,
            })
            .collect(),
        outputs: vec![desc(output)].into(),
        in_place: false,
        attributes: Vec::new(),
        source: None,
    })
}

fn input(name: &str, tensor: u64) -> RawEvent {
    RawEvent::Input {
        name: name.to_string(),
        value: desc(tensor),
    }
}

fn output(tensor: u64) -> RawEvent {
    RawEvent::Output {
        name: "out".to_string(),
        tensor,
    }
}

fn enter(module: u32) -> RawEvent {
    RawEvent::Enter { module }
}

fn exit(module: u32, outputs: &[u64]) -> RawEvent {
    RawEvent::Exit {
        module,
        outputs: outputs.to_vec(),
    }
}

fn build(events: Vec<RawEvent>) -> Trace {
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(events).expect("events are valid");
    builder.finish().expect("trace finishes")
}

/// x -> fc1 (linear) -> act (relu) -> fc2 (linear) -> out.
fn mlp() -> Trace {
    build(vec![
        module(0, "self", "MLP"),
        module(1, "fc1", "Linear"),
        module(2, "act", "ReLU"),
        module(3, "fc2", "Linear"),
        param(100, "fc1.weight", 1),
        param(101, "fc2.weight", 3),
        input("x", 1),
        enter(1),
        op("linear", &[1, 100], 2),
        exit(1, &[2]),
        enter(2),
        op("relu", &[2], 3),
        exit(2, &[3]),
        enter(3),
        op("linear", &[3, 101], 4),
        exit(3, &[4]),
        output(4),
    ])
}

/// encoder > encoder.layer > encoder.layer.lin, with direct ops at each level, then a head and a
/// residual add in the root.
fn nested() -> Trace {
    build(vec![
        module(0, "self", "Model"),
        module(1, "encoder", "Encoder"),
        module(2, "encoder.layer", "Block"),
        module(3, "encoder.layer.lin", "Linear"),
        module(4, "head", "Linear"),
        param(100, "encoder.layer.lin.weight", 3),
        param(101, "head.weight", 4),
        input("x", 1),
        enter(1),
        op("mul", &[1, 1], 2),
        enter(2),
        enter(3),
        op("linear", &[2, 100], 3),
        exit(3, &[3]),
        op("relu", &[3], 4),
        exit(2, &[4]),
        op("layer_norm", &[4], 5),
        exit(1, &[5]),
        enter(4),
        op("linear", &[5, 101], 6),
        exit(4, &[6]),
        op("add", &[6, 1], 7),
        output(7),
    ])
}

/// One module, `cell`, called three times in a loop.
fn looped() -> Trace {
    let mut events = vec![
        module(0, "self", "Rnn"),
        module(1, "cell", "Cell"),
        param(100, "cell.weight", 1),
        input("x", 1),
    ];
    let mut value = 1;
    for _ in 0..3 {
        events.push(enter(1));
        events.push(op("linear", &[value, 100], value + 1));
        events.push(op("tanh", &[value + 1], value + 2));
        events.push(exit(1, &[value + 2]));
        value += 2;
    }
    events.push(output(value));
    build(events)
}

fn collapsed(expanded: &[&str]) -> LayoutView {
    LayoutView::Collapsed {
        expanded: expanded.iter().map(|s| s.to_string()).collect(),
    }
}

fn lay(trace: &Trace, view: &LayoutView) -> GraphLayout {
    layout(trace, view).expect("layout succeeds")
}

/// Structural checks every layout must pass.
fn check_geometry(graph: &GraphLayout) {
    for (index, node) in graph.nodes.iter().enumerate() {
        assert_eq!(node.id as usize, index);
        assert!(node.width > 0.0 && node.height > 0.0);
        assert!(node.x >= 0.0 && node.y >= 0.0);
        assert!(node.x + node.width <= graph.width + 1e-6);
        assert!(node.y + node.height <= graph.height + 1e-6);
    }
    for edge in &graph.edges {
        let from = &graph.nodes[edge.from as usize];
        let to = &graph.nodes[edge.to as usize];
        assert!(to.y > from.y, "edge {edge:?} does not go downward");
        assert!(edge.points.len() >= 2);
        for pair in edge.points.windows(2) {
            assert!(pair[1].1 >= pair[0].1, "edge {edge:?} turns upward");
        }
        let first = edge.points[0];
        let last = edge.points[edge.points.len() - 1];
        assert!((first.1 - (from.y + from.height)).abs() < 1e-6);
        assert!((last.1 - to.y).abs() < 1e-6);
    }
    for (i, a) in graph.nodes.iter().enumerate() {
        for b in &graph.nodes[i + 1..] {
            let apart = a.x + a.width <= b.x + 1e-6
                || b.x + b.width <= a.x + 1e-6
                || a.y + a.height <= b.y + 1e-6
                || b.y + b.height <= a.y + 1e-6;
            assert!(apart, "nodes {} and {} overlap", a.label, b.label);
        }
    }
}

fn edge_set(graph: &GraphLayout) -> BTreeSet<(u32, u32)> {
    graph
        .edges
        .iter()
        .map(|edge| (edge.from, edge.to))
        .collect()
}

fn node<'a>(graph: &'a GraphLayout, label: &str) -> &'a torchlens_core::layout::LayoutNode {
    graph
        .nodes
        .iter()
        .find(|node| node.label == label)
        .unwrap_or_else(|| panic!("no node labelled {label}"))
}

#[test]
fn full_view_has_one_node_per_op_and_parent_edges() {
    for trace in [mlp(), nested(), looped()] {
        let graph = lay(&trace, &LayoutView::Full);
        assert_eq!(graph.nodes.len(), trace.ops.len());
        for (index, node) in graph.nodes.iter().enumerate() {
            assert_eq!(node.kind, NodeKind::Op);
            assert_eq!(node.ops, vec![index as u32]);
            assert_eq!(node.label, &*trace.ops[index].label);
        }
        let expected: BTreeSet<(u32, u32)> = trace
            .ops
            .iter()
            .enumerate()
            .flat_map(|(child, op)| op.parents.iter().map(move |p| (p.op, child as u32)))
            .collect();
        assert_eq!(edge_set(&graph), expected);
        assert_eq!(graph.edges.len(), expected.len(), "edges are deduplicated");
        check_geometry(&graph);
    }
}

#[test]
fn full_view_details_and_kinds() {
    let trace = mlp();
    let graph = lay(&trace, &LayoutView::Full);
    let first = &graph.nodes[0];
    assert_eq!(first.op_kind, Some(OpKind::Input));
    assert!(first.detail.contains("x"), "{}", first.detail);
    let linear = &graph.nodes[1];
    assert_eq!(linear.detail, "linear [1, 4]");
    assert_eq!(linear.module_address.as_deref(), Some("fc1"));
    assert_eq!(first.module_address, None);
    assert_eq!(graph.nodes[4].op_kind, Some(OpKind::Output));
}

#[test]
fn collapsed_mlp_boxes_each_top_level_call() {
    let trace = mlp();
    let graph = lay(&trace, &collapsed(&[]));
    let labels: Vec<&str> = graph.nodes.iter().map(|n| n.label.as_str()).collect();
    assert_eq!(labels.len(), 5, "{labels:?}");
    for (address, class) in [("fc1", "Linear"), ("act", "ReLU"), ("fc2", "Linear")] {
        let call = format!("{address}:1");
        let boxed = node(&graph, &call);
        assert_eq!(boxed.kind, NodeKind::Module);
        assert_eq!(boxed.module_address.as_deref(), Some(address));
        assert_eq!(boxed.detail, format!("{class} (1 op)"));
    }
    // input -> fc1 -> act -> fc2 -> output: a chain of four edges.
    assert_eq!(graph.edges.len(), 4);
    check_geometry(&graph);
}

#[test]
fn collapsed_box_holds_exactly_its_calls_ops() {
    for trace in [mlp(), nested(), looped()] {
        let graph = lay(&trace, &collapsed(&[]));
        let mut covered = Vec::new();
        for node in &graph.nodes {
            covered.extend(node.ops.iter().copied());
            if node.kind != NodeKind::Module {
                continue;
            }
            let call = trace
                .module_calls
                .iter()
                .enumerate()
                .find(|(index, _)| trace.call_name(*index as u32) == node.label)
                .map(|(_, call)| call)
                .expect("box names a call");
            assert_eq!(call.parent_call, Some(0), "only top-level calls are boxed");
            let expected: Vec<u32> = (call.first_op..call.end_op).collect();
            assert_eq!(node.ops, expected, "box {}", node.label);
        }
        covered.sort_unstable();
        let all: Vec<u32> = (0..trace.ops.len() as u32).collect();
        assert_eq!(covered, all, "every op is drawn exactly once");
        check_geometry(&graph);
    }
}

#[test]
fn collapsed_loop_draws_one_box_per_call() {
    let trace = looped();
    let graph = lay(&trace, &collapsed(&[]));
    let boxes: Vec<&str> = graph
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Module)
        .map(|n| n.label.as_str())
        .collect();
    assert_eq!(boxes, ["cell:1", "cell:2", "cell:3"]);
    for label in boxes {
        assert_eq!(node(&graph, label).detail, "Cell (2 ops)");
    }
    let ids: Vec<u32> = ["cell:1", "cell:2", "cell:3"]
        .iter()
        .map(|label| node(&graph, label).id)
        .collect();
    let edges = edge_set(&graph);
    assert!(edges.contains(&(ids[0], ids[1])));
    assert!(edges.contains(&(ids[1], ids[2])));
    // Each call sits on its own layer, one below the other.
    assert!(node(&graph, "cell:1").y < node(&graph, "cell:2").y);
    assert!(node(&graph, "cell:2").y < node(&graph, "cell:3").y);
}

#[test]
fn expanding_reveals_children_level_by_level() {
    let trace = nested();
    let closed = lay(&trace, &collapsed(&[]));
    let closed_boxes: BTreeSet<&str> = closed
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Module)
        .map(|n| n.label.as_str())
        .collect();
    assert_eq!(closed_boxes, BTreeSet::from(["encoder:1", "head:1"]));
    assert_eq!(node(&closed, "encoder:1").ops.len(), 4);
    // Ops in the root stay individual nodes.
    assert!(closed.nodes.iter().any(|n| n.detail.starts_with("add ")));

    let one = lay(&trace, &collapsed(&["encoder"]));
    assert!(one.nodes.iter().all(|n| n.label != "encoder:1"));
    let layer = node(&one, "encoder.layer:1");
    assert_eq!(layer.kind, NodeKind::Module);
    assert_eq!(layer.ops.len(), 2);
    // encoder's own ops (mul, layer_norm) are drawn as ops of the encoder.
    let own: Vec<&str> = one
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Op && n.module_address.as_deref() == Some("encoder"))
        .map(|n| n.detail.as_str())
        .collect();
    assert_eq!(own, ["mul [1, 4]", "layer_norm [1, 4]"]);
    check_geometry(&one);

    let two = lay(&trace, &collapsed(&["encoder", "encoder.layer"]));
    assert!(two.nodes.iter().all(|n| n.label != "encoder.layer:1"));
    assert_eq!(node(&two, "encoder.layer.lin:1").kind, NodeKind::Module);
    assert!(two
        .nodes
        .iter()
        .any(|n| n.module_address.as_deref() == Some("encoder.layer") && n.kind == NodeKind::Op));
    check_geometry(&two);

    // Opening an inner module while its parent stays closed changes nothing.
    let inner_only = lay(&trace, &collapsed(&["encoder.layer"]));
    assert_eq!(inner_only, closed);
}

#[test]
fn svg_is_well_formed_and_labels_every_node() {
    for trace in [mlp(), nested(), looped()] {
        for view in [LayoutView::Full, collapsed(&[]), collapsed(&["encoder"])] {
            let graph = lay(&trace, &view);
            let svg = render_svg(&graph);
            let document = roxmltree::Document::parse(&svg).expect("SVG parses as XML");
            let root = document.root_element();
            assert_eq!(root.tag_name().name(), "svg");
            let texts: BTreeSet<&str> = root
                .descendants()
                .filter(|n| n.has_tag_name("text"))
                .filter_map(|n| n.text())
                .collect();
            for node in &graph.nodes {
                assert!(
                    texts.contains(node.label.as_str()),
                    "missing {}",
                    node.label
                );
            }
            let groups = root
                .descendants()
                .filter(|n| n.attribute("data-ops").is_some())
                .count();
            assert_eq!(groups, graph.nodes.len());
            let lines = root
                .descendants()
                .filter(|n| n.has_tag_name("polyline"))
                .count();
            assert_eq!(lines, graph.edges.len());
            assert_eq!(svg, render_svg(&graph), "rendering is deterministic");
        }
    }
}

#[test]
fn svg_marks_modules_and_escapes_labels() {
    let trace = mlp();
    let mut graph = lay(&trace, &collapsed(&[]));
    graph.nodes[1].label = "a<b>&\"c\"".to_string();
    let svg = render_svg(&graph);
    assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&quot;"));
    assert!(!svg.contains("a<b>"));
    let document = roxmltree::Document::parse(&svg).expect("SVG parses as XML");
    let labelled = document
        .descendants()
        .find(|n| n.has_tag_name("text") && n.text() == Some("a<b>&\"c\""));
    assert!(labelled.is_some(), "escaped label round-trips");
    let module = document
        .descendants()
        .find(|n| n.attribute("data-module") == Some("fc1"))
        .expect("module box carries its address");
    assert!(module
        .attribute("class")
        .is_some_and(|c| c.contains("module")));
    assert_eq!(module.attribute("data-ops"), Some("1"));
    assert!(document
        .descendants()
        .any(|n| n.attribute("class") == Some("node op input")));
    assert!(svg.contains("marker-end=\"url(#tl-arrow)\""));
}

#[test]
fn layout_is_deterministic() {
    let trace = nested();
    let view = collapsed(&["encoder"]);
    assert_eq!(lay(&trace, &view), lay(&trace, &view));
}

#[test]
fn long_chain_of_100k_ops_lays_out() {
    let count = 100_000u64;
    let mut events = vec![input("x", 0)];
    for index in 0..count {
        events.push(op("relu", &[index], index + 1));
    }
    events.push(output(count));
    let mut builder = TraceBuilder::new(TraceOptions {
        recurrence_detection: true,
        compute_input_output_distances: false,
    });
    builder.ingest(events).expect("events are valid");
    let trace = builder.finish().expect("trace finishes");
    let graph = lay(&trace, &LayoutView::Full);
    assert_eq!(graph.nodes.len(), trace.ops.len());
    assert_eq!(graph.edges.len(), trace.ops.len() - 1);
    // A chain stacks straight down: every node on its own layer, all centred alike.
    let centre = graph.nodes[0].x + graph.nodes[0].width / 2.0;
    for pair in graph.nodes.windows(2) {
        assert!(pair[1].y > pair[0].y);
    }
    assert!(graph
        .nodes
        .iter()
        .all(|n| (n.x + n.width / 2.0 - centre).abs() < 1e-6));
}

#[test]
fn wide_graph_with_skip_edges_lays_out() {
    // A residual stack with a mask input read by every block: long edges get bend points.
    let blocks = 2_000u64;
    let mut events = vec![input("x", 0), input("mask", 1)];
    let mut value = 0u64;
    let mut next = 2u64;
    for _ in 0..blocks {
        events.push(op("mul", &[value, 1], next));
        events.push(op("relu", &[next], next + 1));
        events.push(op("add", &[next + 1, value], next + 2));
        value = next + 2;
        next += 3;
    }
    events.push(output(value));
    let trace = build(events);
    let graph = lay(&trace, &LayoutView::Full);
    assert_eq!(graph.nodes.len(), trace.ops.len());
    assert!(graph.edges.iter().any(|edge| edge.points.len() > 2));
    for edge in &graph.edges {
        assert!(graph.nodes[edge.to as usize].y > graph.nodes[edge.from as usize].y);
    }
}
