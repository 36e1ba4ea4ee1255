//! `torchlens._native`: the extension module of the Python package. It holds no logic of its
//! own: the generic bridge to the core component (`host-python/bridge`) and each backend's
//! native code (the torch recorder, `backends/torch/native`) register their classes here.

use pyo3::prelude::*;

/// The Python module.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    torchlens_python_bridge::register(module)?;
    torchlens_torch_native::register(module)?;
    Ok(())
}
