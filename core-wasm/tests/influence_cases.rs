//! Hand-computed reachability on the three graphs of `demo_model::influence_graphs`, shared by
//! the core's tests and the CLI's (`#[path]`-included). Each case: the graph, a selector
//! expression, and the labels it must select, worked out from the drawings below.
//!
//! ```text
//! diamond:       input_1 → relu_1_2 → sigmoid_1_3 ─┐
//!                    │           └──→ tanh_1_4 ────┴→ add_1_5 → add_2_6 → output_1
//!                    └──────────────────────────────────────────↗ (residual)
//! branching:     input_1 → relu_1_3 → sigmoid_1_4 → output_1
//!                input_1, constant_1 → mul_1_5 → exp_1_6 → output_2
//! reused_module: input_1 → linear_1_2:1 (fc:1) → relu_1_3 → linear_1_2:2 (fc:2) ─┐
//!                input_1 → sigmoid_1_4 ──────────────────────────────────────────┴→ add_1_5 → output_1
//! ```
//!
//! Influence is strict: a seed op is selected only when another seed op reaches it. Compiled
//! alone it holds no tests.
#![allow(dead_code)]

/// (graph, expression, expected labels).
pub const CASES: &[(&str, &str, &[&str])] = &[
    // sigmoid reaches the first add, the residual add and the output; not its sibling tanh.
    (
        "diamond",
        "downstream_of(func:sigmoid)",
        &["add_1_5", "add_2_6", "output_1"],
    ),
    // relu reaches both branches and everything after them.
    (
        "diamond",
        "downstream_of(func:relu)",
        &["sigmoid_1_3", "tanh_1_4", "add_1_5", "add_2_6", "output_1"],
    ),
    // The input reaches every other op.
    (
        "diamond",
        "downstream_of(label:input_1)",
        &[
            "relu_1_2",
            "sigmoid_1_3",
            "tanh_1_4",
            "add_1_5",
            "add_2_6",
            "output_1",
        ],
    ),
    // Only the input and relu reach tanh.
    (
        "diamond",
        "upstream_of(func:tanh)",
        &["input_1", "relu_1_2"],
    ),
    // The residual add is reached by every op before it.
    (
        "diamond",
        "upstream_of(label:add_2_6)",
        &["input_1", "relu_1_2", "sigmoid_1_3", "tanh_1_4", "add_1_5"],
    ),
    // On the paths from sigmoid to the output, endpoints excluded: the two adds.
    (
        "diamond",
        "downstream_of(func:sigmoid) & upstream_of(label:output_1)",
        &["add_1_5", "add_2_6"],
    ),
    // Two seeds: relu reaches tanh, so tanh is in; relu itself is not (nothing reaches it).
    (
        "diamond",
        "downstream_of(func:relu | func:tanh) & ~func:add",
        &["sigmoid_1_3", "tanh_1_4", "output_1"],
    ),
    ("diamond", "downstream_of(label:output_1)", &[]),
    ("diamond", "upstream_of(label:input_1)", &[]),
    // relu feeds only the first head.
    (
        "branching",
        "downstream_of(func:relu)",
        &["sigmoid_1_4", "output_1"],
    ),
    // The constant feeds only the second head.
    (
        "branching",
        "downstream_of(label:constant_1)",
        &["mul_1_5", "exp_1_6", "output_2"],
    ),
    // exp is reached by the input, the constant and mul, not by the first head.
    (
        "branching",
        "upstream_of(func:exp)",
        &["input_1", "constant_1", "mul_1_5"],
    ),
    (
        "branching",
        "upstream_of(label:output_1)",
        &["input_1", "relu_1_3", "sigmoid_1_4"],
    ),
    // One seed in each head.
    (
        "branching",
        "downstream_of(func:relu | func:mul)",
        &["sigmoid_1_4", "exp_1_6", "output_1", "output_2"],
    ),
    // Reaching the first output but not the second.
    (
        "branching",
        "upstream_of(label:output_1) & ~upstream_of(label:output_2)",
        &["relu_1_3", "sigmoid_1_4"],
    ),
    // The first call reaches relu, the second call, the add and the output.
    (
        "reused_module",
        "downstream_of(in_module:fc:1)",
        &["relu_1_3", "linear_1_2:2", "add_1_5", "output_1"],
    ),
    // Both calls' outputs as seeds: the second is in because the first reaches it.
    (
        "reused_module",
        "downstream_of(module:fc)",
        &["relu_1_3", "linear_1_2:2", "add_1_5", "output_1"],
    ),
    // The second pass is reached by the input, the first pass and relu; not by sigmoid.
    (
        "reused_module",
        "upstream_of(label:linear_1_2:2)",
        &["input_1", "linear_1_2:1", "relu_1_3"],
    ),
    (
        "reused_module",
        "upstream_of(in_module:fc:2)",
        &["input_1", "linear_1_2:1", "relu_1_3"],
    ),
    // A label without a pass names both passes: what reaches either.
    (
        "reused_module",
        "upstream_of(label:linear_1_2)",
        &["input_1", "linear_1_2:1", "relu_1_3"],
    ),
    // sigmoid is reached by the input alone and reaches the add and the output.
    ("reused_module", "upstream_of(func:sigmoid)", &["input_1"]),
    (
        "reused_module",
        "downstream_of(func:sigmoid)",
        &["add_1_5", "output_1"],
    ),
];

/// The labels of each graph in capture order (what the drawings above assume).
pub const LABELS: &[(&str, &[&str])] = &[
    (
        "diamond",
        &[
            "input_1",
            "relu_1_2",
            "sigmoid_1_3",
            "tanh_1_4",
            "add_1_5",
            "add_2_6",
            "output_1",
        ],
    ),
    (
        "branching",
        &[
            "input_1",
            "constant_1",
            "relu_1_3",
            "sigmoid_1_4",
            "mul_1_5",
            "exp_1_6",
            "output_1",
            "output_2",
        ],
    ),
    (
        "reused_module",
        &[
            "input_1",
            "linear_1_2:1",
            "relu_1_3",
            "linear_1_2:2",
            "sigmoid_1_4",
            "add_1_5",
            "output_1",
        ],
    ),
];
