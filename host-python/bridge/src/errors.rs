//! Core and sandbox errors become the typed exceptions defined in `torchlens/errors.py`, each
//! carrying the stable `code` and the `remedy`.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use torchlens_host_runtime::HostError;
use torchlens_schema::terminal_text::escape_for_terminal;

/// The Python exception class for an error family.
fn class_name(error: &HostError) -> &'static str {
    match error {
        HostError::Core { code, .. } if code == "backend_capability_conformance" => {
            "BackendCapabilityConformanceError"
        }
        HostError::Core { family, .. } => match *family {
            "invalid-events" => "CaptureEventsError",
            "invalid-selector" => "SelectorError",
            "malformed-file" => "TlspecFormatError",
            "unsupported-version" => "TlspecVersionError",
            "limit-exceeded" => "LimitExceededError",
            "invalid-trace" => "InvalidTraceError",
            "not-found" => "NotFoundError",
            _ => "UnsupportedError",
        },
        HostError::Trap { .. } | HostError::Dead => "CoreTrapError",
        HostError::Load(_) => "CoreUnavailableError",
    }
}

/// Turns a host error into the matching `torchlens.errors` exception.
pub fn to_py(py: Python<'_>, error: HostError) -> PyErr {
    let (message, remedy) = match &error {
        HostError::Core {
            message, remedy, ..
        } => (message.clone(), remedy.clone()),
        other => (
            other.to_string(),
            "reinstall torchlens if this persists".to_string(),
        ),
    };
    // A message may quote a file's strings (a tensor name, a label) and ends up in a traceback
    // on a terminal: shown with its control characters escaped, like every host's text.
    let message = escape_for_terminal(&message).into_owned();
    let code = error.code().to_string();
    let built = py
        .import("torchlens.errors")
        .and_then(|errors| errors.getattr(class_name(&error)))
        .and_then(|class| class.call1((message.clone(), code.clone(), remedy)));
    match built {
        Ok(instance) => PyErr::from_value(instance),
        Err(_) => PyRuntimeError::new_err(format!("[{code}] {message}")),
    }
}

/// `Result<T, HostError>` → `PyResult<T>`.
pub trait IntoPyResult<T> {
    fn py_result(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, HostError> {
    fn py_result(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|error| to_py(py, error))
    }
}
