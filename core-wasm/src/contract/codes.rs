//! The closed sets of codes. A backend refuses only with a code listed here, and every code
//! names the backend (or the registry) that owns it, so a test can insist that each code is
//! either triggered by a test or owned by a backend not built yet.

/// A refusal code: why a backend will not serve a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusalCode {
    pub code: &'static str,
    /// `registry` for routing and options, otherwise the backend name.
    pub owner: &'static str,
    pub meaning: &'static str,
}

const fn refusal(code: &'static str, owner: &'static str, meaning: &'static str) -> RefusalCode {
    RefusalCode {
        code,
        owner,
        meaning,
    }
}

/// Every refusal code, with its owner: the backend that raises it (`preview`: the preview
/// backends that lack the capability; `registry`: routing and the gate).
pub const REFUSAL_CODES: &[RefusalCode] = &[
    refusal(
        "backend_ambiguous",
        "registry",
        "the model matches several backends; pass backend=",
    ),
    refusal(
        "backend_undetected",
        "registry",
        "no backend recognises the model; pass backend=",
    ),
    refusal(
        "backend_not_built",
        "registry",
        "the backend is registered but not built yet",
    ),
    refusal(
        "backend_unknown",
        "registry",
        "no backend is registered under that name",
    ),
    refusal(
        "capability_unsupported",
        "registry",
        "the backend's capability table says no",
    ),
    refusal(
        "foreign_tensor_input",
        "registry",
        "the inputs hold arrays of another framework",
    ),
    refusal(
        "framework_not_installed",
        "registry",
        "the backend's framework is not installed",
    ),
    refusal(
        "option_unsupported",
        "registry",
        "the backend does not implement this capture option",
    ),
    refusal(
        "option_value_invalid",
        "registry",
        "a capture option has a value outside its set",
    ),
    refusal(
        "intervene_unsupported",
        "preview",
        "the backend has no live edits (intervene=)",
    ),
    refusal(
        "stop_after_unsupported",
        "preview",
        "the backend cannot stop the forward early (stop_after=)",
    ),
    refusal(
        "value_dependent_save_unsupported",
        "preview",
        "the backend cannot decide save= on values (tl.where, callables)",
    ),
    refusal(
        "callback_effects",
        "jax",
        "the function has callback effects",
    ),
    refusal(
        "nested_primitive_unsupported",
        "jax",
        "a nested-jaxpr primitive the importer cannot read",
    ),
    refusal(
        "transformed_root_callable",
        "jax",
        "the root callable is jit/vmap/grad-transformed",
    ),
    refusal(
        "mlx_compiled_attribute_not_logged",
        "mlx",
        "a compiled attribute ran outside the wrappers",
    ),
    refusal(
        "mlx_transform_at_entry",
        "mlx",
        "mx.compile, mx.grad or mx.vmap wrap the entry",
    ),
    refusal(
        "mixed_module_selector",
        "preview",
        "tl.module mixed with another selector kind in one live rule",
    ),
    refusal(
        "paddle_in_place_mutation",
        "paddle",
        "an in-place mutation inside the forward",
    ),
    refusal(
        "paddle_value_escape",
        "paddle",
        "a tensor's value read into Python (.item(), if tensor:) inside the forward",
    ),
    refusal(
        "paddle_static_graph",
        "paddle",
        "static-graph mode or a to_static root (dygraph only)",
    ),
    refusal(
        "paddle_import_order",
        "paddle",
        "Paddle would be imported after TensorFlow, which crashes inside Paddle",
    ),
    refusal(
        "gradient_site_intervention_unsupported",
        "preview",
        "an edit at a gradient site needs a captured backward pass",
    ),
    refusal(
        "edit_action_unsupported",
        "preview",
        "an edit action the backend has no implementation of",
    ),
    refusal(
        "constant_unrealizable",
        "preview",
        "a constant has no readable buffer",
    ),
    refusal(
        "followed_by_unsupported",
        "preview",
        "temporal selectors need a lookback window",
    ),
    refusal(
        "rng_state_in_graph",
        "preview",
        "random numbers drawn inside the traced forward",
    ),
    refusal(
        "save_grads_unsupported",
        "preview",
        "save_grads= needs true backward capture",
    ),
    refusal(
        "backward_ready_unsupported",
        "preview",
        "backward_ready=True needs true backward capture",
    ),
    refusal(
        "streaming_unsupported",
        "preview",
        "streaming capture is torch-only",
    ),
    refusal(
        "unwrapped_op_in_capture",
        "preview",
        "an output no wrapped operation produced",
    ),
    refusal(
        "value_dependent_predicate",
        "preview",
        "a value-dependent predicate on a preview backend",
    ),
    refusal(
        "tf_graph_only_grad",
        "tf",
        "derived gradients on a graph-only entry",
    ),
    refusal(
        "tf_intervene_unreachable",
        "tf",
        "the selector matches ops the wrap layer never sees",
    ),
    refusal(
        "tf_keras_backend_mismatch",
        "tf",
        "a Keras model on a Keras backend other than TensorFlow",
    ),
    refusal(
        "tf_keras_unbuildable",
        "tf",
        "a Keras model that cannot be built before the capture",
    ),
    refusal(
        "tf_variable_write",
        "tf",
        "a variable write (assign, batch norm in training) inside the forward",
    ),
    refusal(
        "tf_payload_unencodable",
        "tf",
        "a string, resource or variant payload has no array encoding",
    ),
    refusal(
        "tf_graph_only_intervene",
        "tf",
        "intervene= on a graph-only entry (a frozen graph)",
    ),
    refusal(
        "tinygrad_assign",
        "tinygrad",
        "Tensor.assign or replace inside the capture",
    ),
    refusal(
        "tinygrad_mid_capture_realize",
        "tinygrad",
        "Tensor.realize inside the capture",
    ),
    refusal(
        "tinyjit_execution",
        "tinygrad",
        "TinyJit execution inside the capture",
    ),
];

/// A validation reason: why a per-op replay decision came out as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidationReason {
    pub code: &'static str,
    pub meaning: &'static str,
}

const fn reason(code: &'static str, meaning: &'static str) -> ValidationReason {
    ValidationReason { code, meaning }
}

/// Every validation reason.
pub const VALIDATION_REASONS: &[ValidationReason] = &[
    reason(
        "constant_parent_payload",
        "a constant's saved payload stands in for its producer",
    ),
    reason(
        "constant_producer_leaf",
        "a constant is read as a leaf, not replayed",
    ),
    reason(
        "edit_declaration_mismatch",
        "the op's declared edits disagree with the trace's edit records",
    ),
    reason(
        "control_flow_region",
        "a control-flow op (While, If) recorded as one region",
    ),
    reason("input_leaf", "a model input is a leaf"),
    reason(
        "loaded_trace_runtime_capture_stripped",
        "a loaded trace lacks its runtime replay data",
    ),
    reason("nothing_replayed", "no op could be replayed"),
    reason(
        "values_not_materialized",
        "the values have shapes but no data (a meta device): nothing to replay",
    ),
    reason(
        "no_perturbable_parent",
        "no parent could be perturbed to show it matters",
    ),
    reason(
        "nondeterministic_op",
        "the op draws random numbers; replay would differ",
    ),
    reason(
        "opaque_region",
        "a region the importer could not replay per op",
    ),
    reason(
        "output_mismatch",
        "the model's output differs from a run with no wrapper",
    ),
    reason(
        "parent_perturbation_inert",
        "perturbing a parent did not change the op",
    ),
    reason(
        "payload_modified_after_capture",
        "a saved value was changed in place after the capture",
    ),
    reason(
        "payload_not_saved",
        "the op's or a parent's value was not saved",
    ),
    reason(
        "perturbation_inconclusive",
        "the op replays exactly, but no perturbation of its parents moved it",
    ),
    reason(
        "predict_loop_region",
        "a Model.predict loop (batching, data pipeline) around the imported forward",
    ),
    reason("replay_failed", "re-running the op raised"),
    reason(
        "replay_matched",
        "the op, re-run from its parents' saved values, matched",
    ),
    reason(
        "value_independent_replay",
        "the op's output ignores its inputs' values: replayed, not perturbed",
    ),
    reason(
        "replay_mismatch",
        "the op, re-run from its parents' saved values, differs",
    ),
    reason(
        "unresolved_producer",
        "the op reads a value no recorded op, input or constant produced",
    ),
];
