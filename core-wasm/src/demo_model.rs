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
