//! The capability table every backend fills: one flag per task of the spec's feature table.

/// A capability a backend may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub name: &'static str,
    /// The refusal code raised when a backend's flag is False.
    pub refusal: &'static str,
    pub meaning: &'static str,
}

const fn capability(
    name: &'static str,
    refusal: &'static str,
    meaning: &'static str,
) -> Capability {
    Capability {
        name,
        refusal,
        meaning,
    }
}

/// Every capability, in the order of the spec's feature table.
pub const CAPABILITIES: &[Capability] = &[
    capability(
        "select_by_function",
        "capability_unsupported",
        "select ops by function",
    ),
    capability(
        "select_by_module",
        "capability_unsupported",
        "select ops by module",
    ),
    capability(
        "save_selected",
        "capability_unsupported",
        "keep only the chosen ops' values",
    ),
    capability(
        "save_value_dependent",
        "value_dependent_save_unsupported",
        "save= decided by values",
    ),
    capability(
        "temporal_selectors",
        "followed_by_unsupported",
        "followed_by / preceded_by",
    ),
    capability(
        "intervene",
        "intervene_unsupported",
        "edit values during a new run",
    ),
    capability(
        "stop_after",
        "stop_after_unsupported",
        "stop the forward early",
    ),
    capability(
        "streaming",
        "streaming_unsupported",
        "stream payloads out during capture",
    ),
    capability(
        "save_grads",
        "save_grads_unsupported",
        "save gradients from a true backward",
    ),
    capability(
        "backward_ready",
        "backward_ready_unsupported",
        "prepare the trace for a true backward capture",
    ),
    capability(
        "source_lines",
        "capability_unsupported",
        "record the source line of each op",
    ),
    capability("draw", "capability_unsupported", "draw the forward graph"),
    capability(
        "validation_replay",
        "capability_unsupported",
        "replay validation of the trace",
    ),
    capability(
        "derived_grads",
        "capability_unsupported",
        "derived gradients of a loss",
    ),
    capability(
        "sparse_recording",
        "capability_unsupported",
        "tl.record: fast repeated recording of chosen ops",
    ),
    capability(
        "edit_finished_trace",
        "capability_unsupported",
        "edit a finished trace (trace.fork()) or patch in activations from another run",
    ),
];

/// The capability named `name`.
pub fn capability_named(name: &str) -> Option<&'static Capability> {
    CAPABILITIES
        .iter()
        .find(|capability| capability.name == name)
}
