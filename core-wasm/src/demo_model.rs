//! The built-in demo model: the events a small recurrent MLP produces, so the demo, the
//! component tests and the benchmarks share one realistic run without any framework.
//!
//! `input → fc_in → relu → (cell × 3: linear + tanh, shared weights) → fc_out → + bias constant
//! → softmax → output`.

use crate::events::RawEvent;
use crate::recorder::EventRecorder;

/// Events of one forward pass of the demo model (every value kept).
pub fn demo_events() -> Vec<RawEvent> {
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "RecurrentMlp");
    let fc_in = recorder.module(&["fc_in"], "Linear");
    let cell = recorder.module(&["cell"], "RecurrentCell");
    let cell_linear = recorder.module(&["cell.linear"], "Linear");
    let fc_out = recorder.module(&["fc_out"], "Linear");
    let fc_in_weight = recorder.param(fc_in, "fc_in.weight", &[16, 8]);
    let fc_in_bias = recorder.param(fc_in, "fc_in.bias", &[16]);
    let cell_weight = recorder.param(cell_linear, "cell.linear.weight", &[16, 16]);
    let cell_bias = recorder.param(cell_linear, "cell.linear.bias", &[16]);
    let fc_out_weight = recorder.param(fc_out, "fc_out.weight", &[4, 16]);
    let fc_out_bias = recorder.param(fc_out, "fc_out.bias", &[4]);

    let x = recorder.input("x", &[2, 8]);
    let offset = recorder.constant(&[4]);
    recorder.enter(root);
    let hidden = recorder.linear(fc_in, fc_in_weight, fc_in_bias, x, &[2, 16]);
    let mut state = recorder.op("relu", &[hidden], &[2, 16]);
    for _ in 0..3 {
        recorder.enter(cell);
        let mixed = recorder.linear(cell_linear, cell_weight, cell_bias, state, &[2, 16]);
        state = recorder.op("tanh", &[mixed], &[2, 16]);
        recorder.exit(cell, &[state]);
    }
    let logits = recorder.linear(fc_out, fc_out_weight, fc_out_bias, state, &[2, 4]);
    let shifted = recorder.op("__add__", &[logits, offset], &[2, 4]);
    let probabilities = recorder.op("softmax", &[shifted], &[2, 4]);
    recorder.exit(root, &[probabilities]);
    recorder.output("output", probabilities);
    recorder.events
}

/// A large synthetic run for benchmarks: blocks of a residual MLP (`block.fc` linear, relu,
/// add), each block a module call, until about `event_count` events are recorded. One block is
/// 9 events and 5 ops (no payloads kept).
pub fn synthetic_events(event_count: usize) -> Vec<RawEvent> {
    let mut recorder = EventRecorder::default();
    let root = recorder.module(&["self"], "DeepResidualMlp");
    let block = recorder.module(&["block"], "ResidualBlock");
    let fc = recorder.module(&["block.fc"], "Linear");
    let weight = recorder.param(fc, "block.fc.weight", &[64, 64]);
    let bias = recorder.param(fc, "block.fc.bias", &[64]);
    let mut state = recorder.input("x", &[8, 64]);
    recorder.enter(root);
    while recorder.events.len() + 9 < event_count {
        recorder.enter(block);
        let hidden = recorder.linear(fc, weight, bias, state, &[8, 64]);
        let activated = recorder.op("relu", &[hidden], &[8, 64]);
        let scaled = recorder.op("mul", &[activated], &[8, 64]);
        let summed = recorder.op("__add__", &[scaled, state], &[8, 64]);
        state = recorder.op("layer_norm", &[summed], &[8, 64]);
        recorder.exit(block, &[state]);
    }
    recorder.exit(root, &[state]);
    recorder.output("output", state);
    recorder.events
}

/// The three small graphs the influence selectors (`downstream_of`, `upstream_of`) are checked
/// on in every host, by name: `diamond` (a diamond closed by a residual edge), `branching` (two
/// heads, two outputs, a constant) and `reused_module` (one module called twice). Every value
/// is kept.
pub fn influence_graphs() -> Vec<(&'static str, Vec<RawEvent>)> {
    vec![
        ("diamond", diamond_events()),
        ("branching", branching_events()),
        ("reused_module", reused_module_events()),
    ]
}

/// `x → relu → (sigmoid, tanh) → add → add(·, x) → output`.
fn diamond_events() -> Vec<RawEvent> {
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "Diamond");
    let x = recorder.input("x", &[2, 4]);
    recorder.enter(root);
    let a = recorder.op("relu", &[x], &[2, 4]);
    let b = recorder.op("sigmoid", &[a], &[2, 4]);
    let c = recorder.op("tanh", &[a], &[2, 4]);
    let d = recorder.op("__add__", &[b, c], &[2, 4]);
    let e = recorder.op("__add__", &[d, x], &[2, 4]);
    recorder.exit(root, &[e]);
    recorder.output("output", e);
    recorder.events
}

/// `x → relu → sigmoid → output 1` and `x · k (a constant) → exp → output 2`.
fn branching_events() -> Vec<RawEvent> {
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "TwoHeads");
    let x = recorder.input("x", &[2, 4]);
    let k = recorder.constant(&[4]);
    recorder.enter(root);
    let h = recorder.op("relu", &[x], &[2, 4]);
    let p = recorder.op("sigmoid", &[h], &[2, 4]);
    let q = recorder.op("mul", &[x, k], &[2, 4]);
    let r = recorder.op("exp", &[q], &[2, 4]);
    recorder.exit(root, &[p, r]);
    recorder.output("output.0", p);
    recorder.output("output.1", r);
    recorder.events
}

/// One `fc` module called twice: `x → fc → relu → fc → add(·, sigmoid(x)) → output`.
fn reused_module_events() -> Vec<RawEvent> {
    let mut recorder = EventRecorder::keeping_payloads();
    let root = recorder.module(&["self"], "Reuse");
    let fc = recorder.module(&["fc"], "Linear");
    let weight = recorder.param(fc, "fc.weight", &[4, 4]);
    let bias = recorder.param(fc, "fc.bias", &[4]);
    let x = recorder.input("x", &[2, 4]);
    recorder.enter(root);
    let first = recorder.linear(fc, weight, bias, x, &[2, 4]);
    let activated = recorder.op("relu", &[first], &[2, 4]);
    let second = recorder.linear(fc, weight, bias, activated, &[2, 4]);
    let gate = recorder.op("sigmoid", &[x], &[2, 4]);
    let sum = recorder.op("__add__", &[second, gate], &[2, 4]);
    recorder.exit(root, &[sum]);
    recorder.output("output", sum);
    recorder.events
}
