//! The torch backend's native recorder, compiled into `torchlens._native` beside the generic
//! bridge (`torchlens-python-bridge`), whose capture session it appends to. The Python
//! definitions of the same paths (`backends/torch/capture.py`, `replay_records.py`,
//! `module_brackets.py`) run under the wasmtime-py host.
//!
//! - [`held_op`]: the hot path of a full torch capture, one call per op.
//! - [`module_hooks`]: that capture's global module hooks, called by torch with no Python frame.
//! - [`pending_replays`]: that capture's replay records, made only when replay reads them.
//! - [`module_bracket`]: a module's bracketed `forward`, reporting its calls with no Python frame.
//! - [`value_tags`]: how a torch capture names the tensors it does not hold.

pub mod held_op;
pub mod module_bracket;
pub mod module_hooks;
pub mod pending_replays;
pub mod value_tags;

use pyo3::prelude::*;

/// Adds the torch recorder's classes and functions to the extension module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<held_op::HeldOpRecorder>()?;
    module.add_class::<module_hooks::ModuleCallHooks>()?;
    module.add_class::<module_bracket::ModuleBracket>()?;
    module.add_class::<pending_replays::PendingReplays>()?;
    module.add_function(wrap_pyfunction!(module_bracket::install_brackets, module)?)?;
    module.add_function(wrap_pyfunction!(module_bracket::release_brackets, module)?)?;
    Ok(())
}
