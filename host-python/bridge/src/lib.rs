//! The core component under wasmtime, exposed to Python: the generic half of `torchlens._native`
//! (no framework logic; a backend's native code builds on [`session::Session`]).
//!
//! - [`engine`]: the one core instance per process (precompiled component cached on disk).
//! - [`session`]: a capture in progress; adapters append raw events, batches go to the core.
//! - [`trace`]: a finished trace held by the core, and its queries.
//! - [`convert`]: Python values ⇄ WIT values.
//! - [`errors`]: core errors raised as the typed exceptions of `torchlens.errors`.

pub mod convert;
pub mod engine;
pub mod errors;
pub mod session;
pub mod trace;

use pyo3::prelude::*;

/// Adds the core's classes and functions to the extension module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<engine::Core>()?;
    module.add_class::<session::Session>()?;
    module.add_class::<session::PreparedEvents>()?;
    module.add_class::<trace::Trace>()?;
    module.add_function(wrap_pyfunction!(engine::core, module)?)?;
    module.add_function(wrap_pyfunction!(engine::untrusted_core, module)?)?;
    module.add_function(wrap_pyfunction!(engine::embedded_component, module)?)?;
    module.add(
        "WASMTIME_VERSION",
        torchlens_host_runtime::runtime::wasmtime_version(),
    )?;
    Ok(())
}
