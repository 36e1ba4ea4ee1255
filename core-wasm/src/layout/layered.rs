//! The layered (Sugiyama-style) layout: layers by longest path, dummy vertices on long edges,
//! barycenter sweeps to reduce crossings, order-preserving x placement, polyline edges.
//!
//! Every phase is O(V + E) or O((V + E) log V) per pass and the number of passes is capped, so
//! the whole layout stays near-linear.

use crate::error::{CoreError, CoreResult, ErrorKind};
use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};

/// Space around the drawing.
const MARGIN: f64 = 20.0;
/// Horizontal gap between neighbours in a layer.
const NODE_GAP: f64 = 24.0;
/// Vertical gap between layers (room for edges and arrowheads).
const LAYER_GAP: f64 = 36.0;
/// Width a dummy vertex (an edge passing through a layer) reserves.
const DUMMY_WIDTH: f64 = 8.0;
/// Cap on barycenter iterations (each a down and an up sweep).
const MAX_SWEEPS: usize = 4;
/// Cap on x-placement rounds (each a down and an up pass).
const PLACEMENT_ROUNDS: usize = 2;
/// Dummy vertices allowed beyond the linear budget of `V + E`: past it, the longest edges
/// are drawn as one straight segment, so a graph with many very long edges (a mask read by
/// every block) cannot blow up to O(E * layers).
const EXTRA_DUMMIES: usize = 10_000;

/// Where everything went: node top-left corners (in input order), edge polylines (in input
/// order) and the canvas size.
pub(crate) struct Placement {
    pub positions: Vec<(f64, f64)>,
    pub edge_points: Vec<Vec<(f64, f64)>>,
    pub width: f64,
    pub height: f64,
}

/// Neighbour lists in compressed form (one allocation instead of one per vertex).
struct Adjacency {
    offsets: Vec<usize>,
    targets: Vec<u32>,
}

impl Adjacency {
    /// Groups `pairs` by their first element.
    fn new(vertices: usize, pairs: &[(u32, u32)]) -> Self {
        let mut offsets = vec![0usize; vertices + 1];
        for &(from, _) in pairs {
            offsets[from as usize + 1] += 1;
        }
        for index in 0..vertices {
            offsets[index + 1] += offsets[index];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; pairs.len()];
        for &(from, to) in pairs {
            targets[fill[from as usize]] = to;
            fill[from as usize] += 1;
        }
        Self { offsets, targets }
    }

    fn of(&self, vertex: u32) -> &[u32] {
        let vertex = vertex as usize;
        &self.targets[self.offsets[vertex]..self.offsets[vertex + 1]]
    }
}

/// Longest-path layer of every node; nodes flagged in `float` with no parents then move down to
/// just above their nearest child.
fn assign_layers(count: usize, edges: &[(u32, u32)], float: &[bool]) -> CoreResult<Vec<usize>> {
    let mut graph: DiGraph<(), ()> = DiGraph::with_capacity(count, edges.len());
    for _ in 0..count {
        graph.add_node(());
    }
    for &(from, to) in edges {
        graph.add_edge(
            NodeIndex::new(from as usize),
            NodeIndex::new(to as usize),
            (),
        );
    }
    let order = toposort(&graph, None).map_err(|cycle| {
        CoreError::new(
            ErrorKind::InvalidTrace,
            "layout_cycle",
            format!(
                "the drawn graph has a cycle through node {}",
                cycle.node_id().index()
            ),
            "rebuild the trace with TraceBuilder: module calls must cover contiguous op ranges",
        )
    })?;
    let mut layer = vec![0usize; count];
    for &node in &order {
        let next = layer[node.index()] + 1;
        for child in graph.neighbors(node) {
            if layer[child.index()] < next {
                layer[child.index()] = next;
            }
        }
    }
    let mut has_parent = vec![false; count];
    for &(_, to) in edges {
        has_parent[to as usize] = true;
    }
    for node in 0..count {
        if has_parent[node] || !float.get(node).copied().unwrap_or(false) {
            continue;
        }
        let nearest = graph
            .neighbors(NodeIndex::new(node))
            .map(|child| layer[child.index()])
            .min();
        if let Some(nearest) = nearest {
            layer[node] = nearest.saturating_sub(1);
        }
    }
    Ok(layer)
}

/// Number of crossings between two adjacent layers, counted as inversions with a Fenwick tree
/// (Barth, Jünger, Mutzel): O(E log V).
fn count_crossings(upper: &[u32], down: &Adjacency, pos: &[usize], lower_len: usize) -> u64 {
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for &vertex in upper {
        for &child in down.of(vertex) {
            pairs.push((pos[vertex as usize], pos[child as usize]));
        }
    }
    pairs.sort_unstable();
    let mut tree = vec![0u64; lower_len + 1];
    let mut crossings = 0u64;
    for (seen, &(_, lower)) in pairs.iter().enumerate() {
        // Count earlier edges ending strictly right of this one: they cross it.
        let mut at_most = 0u64;
        let mut index = lower + 1;
        while index > 0 {
            at_most += tree[index];
            index &= index - 1;
        }
        crossings += seen as u64 - at_most;
        let mut index = lower + 1;
        while index <= lower_len {
            tree[index] += 1;
            index += index & index.wrapping_neg();
        }
    }
    crossings
}

fn total_crossings(layers: &[Vec<u32>], down: &Adjacency, pos: &[usize]) -> u64 {
    layers
        .windows(2)
        .map(|pair| count_crossings(&pair[0], down, pos, pair[1].len()))
        .sum()
}

/// Reorders one layer by the mean position of each vertex's neighbours in the adjacent layer;
/// vertices without such neighbours keep their current position as their key.
fn barycenter_sort(layer: &mut [u32], neighbours: &Adjacency, pos: &mut [usize]) {
    let mut keyed: Vec<(f64, usize, u32)> = layer
        .iter()
        .map(|&vertex| {
            let around = neighbours.of(vertex);
            let current = pos[vertex as usize];
            let key = if around.is_empty() {
                current as f64
            } else {
                around.iter().map(|&n| pos[n as usize] as f64).sum::<f64>() / around.len() as f64
            };
            (key, current, vertex)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    for (index, &(_, _, vertex)) in keyed.iter().enumerate() {
        layer[index] = vertex;
        pos[vertex as usize] = index;
    }
}

/// Places one layer's centres as close as possible (least squares) to `desired` while keeping
/// the order and the minimum spacing: shifting by cumulative spacing turns the constraints into
/// monotonicity, which pool-adjacent-violators solves exactly in O(n).
fn place_row(layer: &[u32], widths: &[f64], desired: &[f64], centre: &mut [f64]) {
    let mut offsets = Vec::with_capacity(layer.len());
    let mut offset = 0.0;
    for (index, &vertex) in layer.iter().enumerate() {
        if index > 0 {
            let previous = widths[layer[index - 1] as usize];
            offset += (previous + widths[vertex as usize]) / 2.0 + NODE_GAP;
        }
        offsets.push(offset);
    }
    // Blocks of (sum, count, length-in-vertices) whose means are non-decreasing.
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for (index, &target) in desired.iter().enumerate() {
        blocks.push((target - offsets[index], 1.0, 1));
        while blocks.len() > 1 {
            let last = blocks[blocks.len() - 1];
            let before = blocks[blocks.len() - 2];
            if before.0 / before.1 <= last.0 / last.1 {
                break;
            }
            blocks.pop();
            if let Some(merged) = blocks.last_mut() {
                *merged = (merged.0 + last.0, merged.1 + last.1, merged.2 + last.2);
            }
        }
    }
    let mut index = 0;
    for (sum, count, length) in blocks {
        let value = sum / count;
        for _ in 0..length {
            centre[layer[index] as usize] = value + offsets[index];
            index += 1;
        }
    }
}

/// One placement pass over `layers` in the given order, pulling each vertex towards the mean
/// centre of its `neighbours`.
fn placement_pass<'a>(
    layers: impl Iterator<Item = &'a Vec<u32>>,
    neighbours: &Adjacency,
    widths: &[f64],
    centre: &mut [f64],
) {
    for layer in layers {
        let desired: Vec<f64> = layer
            .iter()
            .map(|&vertex| {
                let around = neighbours.of(vertex);
                if around.is_empty() {
                    centre[vertex as usize]
                } else {
                    around.iter().map(|&n| centre[n as usize]).sum::<f64>() / around.len() as f64
                }
            })
            .collect();
        place_row(layer, widths, &desired, centre);
    }
}

/// Lays out nodes of the given `(width, height)` with `edges` (node index pairs, acyclic).
pub(crate) fn place(
    sizes: &[(f64, f64)],
    edges: &[(u32, u32)],
    float: &[bool],
) -> CoreResult<Placement> {
    let count = sizes.len();
    let layer_of_node = assign_layers(count, edges, float)?;

    // Vertices: the real nodes, then one dummy per layer a long edge passes through.
    let mut layer_of: Vec<usize> = layer_of_node.clone();
    let mut widths: Vec<f64> = sizes.iter().map(|size| size.0).collect();
    let span = |&(from, to): &(u32, u32)| {
        layer_of_node[to as usize].saturating_sub(layer_of_node[from as usize] + 1)
    };
    // Shortest edges get their bend points first: they are the ones a reader follows.
    let mut by_span: Vec<usize> = (0..edges.len()).filter(|&e| span(&edges[e]) > 0).collect();
    by_span.sort_by_key(|&e| (span(&edges[e]), e));
    let mut budget = count + edges.len() + EXTRA_DUMMIES;
    let mut routed = vec![false; edges.len()];
    for e in by_span {
        let needed = span(&edges[e]);
        if needed > budget {
            break;
        }
        budget -= needed;
        routed[e] = true;
    }
    let mut chains: Vec<Vec<u32>> = Vec::with_capacity(edges.len());
    for (e, &(from, to)) in edges.iter().enumerate() {
        let mut chain = vec![from];
        if routed[e] {
            for layer in layer_of_node[from as usize] + 1..layer_of_node[to as usize] {
                chain.push(layer_of.len() as u32);
                layer_of.push(layer);
                widths.push(DUMMY_WIDTH);
            }
        }
        chain.push(to);
        chains.push(chain);
    }
    let vertices = layer_of.len();

    // Adjacency between neighbouring layers only; an over-budget long edge takes no part in
    // ordering.
    let segments: Vec<(u32, u32)> = chains
        .iter()
        .flat_map(|chain| chain.windows(2).map(|pair| (pair[0], pair[1])))
        .filter(|&(a, b)| layer_of[b as usize] == layer_of[a as usize] + 1)
        .collect();
    let down = Adjacency::new(vertices, &segments);
    let reversed: Vec<(u32, u32)> = segments.iter().map(|&(a, b)| (b, a)).collect();
    let up = Adjacency::new(vertices, &reversed);

    let layer_count = layer_of.iter().copied().max().map_or(0, |max| max + 1);
    let mut layers: Vec<Vec<u32>> = vec![Vec::new(); layer_count];
    let mut pos = vec![0usize; vertices];
    for (vertex, &layer) in layer_of.iter().enumerate() {
        pos[vertex] = layers[layer].len();
        layers[layer].push(vertex as u32);
    }

    // Barycenter sweeps, keeping the ordering with the fewest crossings.
    let mut best = layers.clone();
    let mut best_crossings = total_crossings(&layers, &down, &pos);
    for _ in 0..MAX_SWEEPS {
        if best_crossings == 0 {
            break;
        }
        for layer in layers.iter_mut().skip(1) {
            barycenter_sort(layer, &up, &mut pos);
        }
        for layer in layers.iter_mut().rev().skip(1) {
            barycenter_sort(layer, &down, &mut pos);
        }
        let crossings = total_crossings(&layers, &down, &pos);
        if crossings < best_crossings {
            best_crossings = crossings;
            best.clone_from(&layers);
        }
    }
    let layers = best;

    // x: start packed, then pull towards neighbours, down and up, ending with a down pass so
    // chains from the inputs run straight.
    let mut centre = vec![0.0f64; vertices];
    for layer in &layers {
        let desired = vec![0.0; layer.len()];
        place_row(layer, &widths, &desired, &mut centre);
    }
    for _ in 0..PLACEMENT_ROUNDS {
        placement_pass(layers.iter().skip(1), &up, &widths, &mut centre);
        placement_pass(layers.iter().rev().skip(1), &down, &widths, &mut centre);
    }
    placement_pass(layers.iter().skip(1), &up, &widths, &mut centre);
    let left = (0..vertices)
        .map(|vertex| centre[vertex] - widths[vertex] / 2.0)
        .fold(f64::INFINITY, f64::min);
    let shift = if left.is_finite() { MARGIN - left } else { 0.0 };
    for value in &mut centre {
        *value += shift;
    }

    // y: each layer as tall as its tallest node.
    let mut layer_height = vec![0.0f64; layer_count];
    for (node, size) in sizes.iter().enumerate() {
        let height = &mut layer_height[layer_of[node]];
        *height = height.max(size.1);
    }
    let mut layer_top = Vec::with_capacity(layer_count);
    let mut top = MARGIN;
    for &height in &layer_height {
        layer_top.push(top);
        top += height + LAYER_GAP;
    }

    let positions: Vec<(f64, f64)> = sizes
        .iter()
        .enumerate()
        .map(|(node, &(width, height))| {
            let layer = layer_of[node];
            (
                centre[node] - width / 2.0,
                layer_top[layer] + (layer_height[layer] - height) / 2.0,
            )
        })
        .collect();
    let edge_points = chains
        .iter()
        .map(|chain| {
            let mut points = Vec::with_capacity(chain.len() * 2);
            for (index, &vertex) in chain.iter().enumerate() {
                let vertex = vertex as usize;
                let x = centre[vertex];
                if index == 0 {
                    points.push((x, positions[vertex].1 + sizes[vertex].1));
                } else if index + 1 == chain.len() {
                    points.push((x, positions[vertex].1));
                } else {
                    // Run vertically through the dummy's layer so the edge clears its nodes.
                    let layer = layer_of[vertex];
                    points.push((x, layer_top[layer]));
                    points.push((x, layer_top[layer] + layer_height[layer]));
                }
            }
            points
        })
        .collect();

    let right = (0..vertices)
        .map(|vertex| centre[vertex] + widths[vertex] / 2.0)
        .fold(0.0f64, f64::max);
    let height = if layer_count == 0 {
        2.0 * MARGIN
    } else {
        top - LAYER_GAP + MARGIN
    };
    Ok(Placement {
        positions,
        edge_points,
        width: right + MARGIN,
        height,
    })
}
