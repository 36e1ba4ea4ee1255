//! `torchlens._native`: the core component under wasmtime, for the Python package.
//!
//! - [`engine`]: the one core instance per process (precompiled component cached on disk).
//! - [`session`]: a capture in progress; adapters append raw events, batches go to the core.
//! - [`trace`]: a finished trace held by the core, and its queries.
//! - [`convert`]: Python values ⇄ WIT values.
//! - [`errors`]: core errors raised as the typed exceptions of `torchlens.errors`.
//! - [`held_op`]: the hot path of a full torch capture, one call per op.
//! - [`module_hooks`]: that capture's global module hooks, called by torch with no Python frame.
//! - [`pending_replays`]: that capture's replay records, made only when replay reads them.
//! - [`module_bracket`]: a module's bracketed `forward`, reporting its calls with no Python frame.
//! - [`value_tags`]: how a torch capture names the tensors it does not hold.

mod convert;
mod engine;
mod errors;
mod held_op;
mod module_bracket;
mod module_hooks;
mod pending_replays;
mod session;
mod trace;
mod value_tags;

use pyo3::prelude::*;

/// The Python module.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<engine::Core>()?;
    module.add_class::<session::Session>()?;
    module.add_class::<session::PreparedEvents>()?;
    module.add_class::<held_op::HeldOpRecorder>()?;
    module.add_class::<module_hooks::ModuleCallHooks>()?;
    module.add_class::<module_bracket::ModuleBracket>()?;
    module.add_class::<pending_replays::PendingReplays>()?;
    module.add_class::<trace::Trace>()?;
    module.add_function(wrap_pyfunction!(engine::core, module)?)?;
    module.add_function(wrap_pyfunction!(module_bracket::install_brackets, module)?)?;
    module.add_function(wrap_pyfunction!(module_bracket::release_brackets, module)?)?;
    module.add_function(wrap_pyfunction!(engine::embedded_component, module)?)?;
    module.add(
        "WASMTIME_VERSION",
        torchlens_host_runtime::runtime::wasmtime_version(),
    )?;
    Ok(())
}
