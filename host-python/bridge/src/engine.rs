//! The core instances of this process. Compiling the component takes ~100 ms, so the compiled
//! form is cached on disk (verified against a hash of the component bytes and the engine
//! settings before use) and compiled once per process; each Python thread gets its own
//! instance, so a trap in one thread's call never kills another thread's traces.
//!
//! Every class here is `Send + Sync`: a trace or session made in one thread may be used or
//! dropped in another (its instance sits behind a mutex). The mutex is held only while Rust
//! code runs with the GIL held (never across Python code, which could switch threads), so it
//! is never contended across threads and cannot deadlock.

use crate::errors::IntoPyResult;
use crate::session::Session;
use crate::trace::Trace;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use torchlens_host_runtime::embedded::{default_cache_dir, EMBEDDED_COMPONENT};
use torchlens_host_runtime::{CoreInstance, CoreRuntime, SandboxLimits};

/// A shared handle on one instance; traces and sessions keep it alive, from any thread.
#[derive(Clone)]
pub struct SharedInstance(Arc<Mutex<CoreInstance>>);

impl SharedInstance {
    fn new(instance: CoreInstance) -> Self {
        Self(Arc::new(Mutex::new(instance)))
    }

    /// The instance, for one call. A poisoned lock (a panic while it was held) still hands the
    /// instance back: `CoreInstance` turns panics inside a call into a dead instance itself, so
    /// its state is never half-updated. Never hold the guard while Python code runs (building
    /// an exception, converting results): Python may switch threads there, and a thread
    /// waiting for this lock while holding the GIL would never let it be released; use
    /// [`SharedInstance::with`] for calls that return errors.
    pub fn lock(&self) -> MutexGuard<'_, CoreInstance> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one call on the instance and releases it before the caller turns the result into
    /// Python objects or exceptions.
    pub fn with<T>(&self, call: impl FnOnce(&mut CoreInstance) -> T) -> T {
        call(&mut self.lock())
    }
}

/// The core component running in this process.
#[pyclass(module = "torchlens._native")]
pub struct Core {
    pub(crate) instance: SharedInstance,
    runtime: Arc<CoreRuntime>,
}

#[pymethods]
impl Core {
    /// The core component's version.
    fn version(&self, py: Python<'_>) -> PyResult<String> {
        self.instance.with(|core| core.version()).py_result(py)
    }

    /// The build id the running core answers (`torchlens-core-build:<hex>`): a digest of the
    /// sources it was built from; the same text is inside `embedded_component()`.
    fn build_id(&self, py: Python<'_>) -> PyResult<String> {
        self.instance.with(|core| core.build_id()).py_result(py)
    }

    /// Size of the embedded component in bytes.
    #[staticmethod]
    fn component_size() -> usize {
        EMBEDDED_COMPONENT.len()
    }

    /// Starts a capture session. `plan` is a selector arena (see `convert::selector`).
    #[pyo3(signature = (recurrence_detection, compute_input_output_distances, plan=None))]
    fn start_session(
        &self,
        py: Python<'_>,
        recurrence_detection: bool,
        compute_input_output_distances: bool,
        plan: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Session> {
        let plan = plan.map(crate::convert::selector).transpose()?;
        let options = torchlens_host_runtime::wit::TraceOptions {
            recurrence_detection,
            compute_input_output_distances,
        };
        let instance = self.instance.clone();
        let handle = instance
            .with(|core| core.start_session(options, plan.as_ref()))
            .py_result(py)?;
        Ok(Session::new(instance, handle))
    }

    /// The header length a `.tlspec` declares in its first 8 bytes.
    fn tlspec_header_length(&self, py: Python<'_>, first_bytes: &[u8]) -> PyResult<u64> {
        self.instance
            .with(|core| core.tlspec_header_length(first_bytes))
            .py_result(py)
    }

    /// Parses and checks a `.tlspec` header; returns it as a dict.
    fn parse_tlspec_header<'py>(
        &self,
        py: Python<'py>,
        header: &[u8],
        file_length: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let info = self
            .instance
            .with(|core| core.parse_tlspec_header(header, file_length))
            .py_result(py)?;
        crate::convert::header_info(py, &info)
    }

    /// Decodes a `.tlspec` header and body into a trace; returns `(header dict, Trace)`.
    fn decode_tlspec<'py>(
        &self,
        py: Python<'py>,
        header: &[u8],
        body: &[u8],
        file_length: u64,
    ) -> PyResult<(Bound<'py, PyAny>, Trace)> {
        let (info, handle) = self
            .instance
            .with(|core| core.decode_tlspec(header, body, file_length))
            .py_result(py)?;
        Ok((
            crate::convert::header_info(py, &info)?,
            Trace::new(self.instance.clone(), handle),
        ))
    }

    /// Folds per-op replay decisions `[(op, outcome, reason)]` into a status dict.
    fn fold_validation<'py>(
        &self,
        py: Python<'py>,
        decisions: Vec<(u32, String, String)>,
        runtime_capture_available: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let decisions = crate::convert::op_decisions(decisions)?;
        let status = self
            .instance
            .with(|core| {
                core.call_infallible(|guest, store| {
                    guest.call_fold_validation(store, &decisions, runtime_capture_available)
                })
            })
            .py_result(py)?;
        crate::convert::validation_status(py, &status)
    }

    /// The core's normalized type of a function name (`__radd__` → `add`): what `func` and label
    /// terms of a live plan compare.
    fn op_type(&self, py: Python<'_>, func_name: &str) -> PyResult<String> {
        self.instance
            .with(|core| core.op_type(func_name))
            .py_result(py)
    }

    /// `text` with its terminal control characters escaped (the reprs of file strings).
    fn escape_terminal_text(&self, py: Python<'_>, text: &str) -> PyResult<String> {
        self.instance
            .with(|core| core.escape_terminal_text(text))
            .py_result(py)
    }

    /// Checks a selector arena and returns its class (`static`, `temporal`,
    /// `value-dependent`).
    fn classify_selector(&self, py: Python<'_>, selector: &Bound<'_, PyAny>) -> PyResult<String> {
        let selector = crate::convert::selector(selector)?;
        let class = self
            .instance
            .with(|core| core.call(|guest, store| guest.call_classify_selector(store, &selector)))
            .py_result(py)?;
        Ok(crate::convert::selector_class_name(class).to_string())
    }

    /// Parses a selector expression (`func:relu & in_module:encoder`, the CLI's and the
    /// viewer's language) into a checked arena `(nodes, root)`.
    fn parse_selector<'py>(
        &self,
        py: Python<'py>,
        expression: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let selector = self
            .instance
            .with(|core| core.parse_selector(expression))
            .py_result(py)?;
        crate::convert::selector_arena(py, selector)
    }

    /// Rebuilds a trace from its postcard body bytes.
    fn trace_from_body(&self, py: Python<'_>, body: &Bound<'_, PyBytes>) -> PyResult<Trace> {
        let handle = self
            .instance
            .with(|core| core.from_body(body.as_bytes()))
            .py_result(py)?;
        Ok(Trace::new(self.instance.clone(), handle))
    }

    /// The closed set of refusal codes: `[(code, owner, meaning)]`.
    fn refusal_codes(&self, py: Python<'_>) -> PyResult<Vec<(String, String, String)>> {
        let codes = self
            .instance
            .with(|core| core.call_infallible(|guest, store| guest.call_refusal_codes(store)))
            .py_result(py)?;
        Ok(codes
            .into_iter()
            .map(|entry| (entry.code, entry.owner, entry.meaning))
            .collect())
    }

    /// The closed set of validation reasons: `[(code, meaning)]`.
    fn validation_reasons(&self, py: Python<'_>) -> PyResult<Vec<(String, String)>> {
        let reasons = self
            .instance
            .with(|core| core.call_infallible(|guest, store| guest.call_validation_reasons(store)))
            .py_result(py)?;
        Ok(reasons
            .into_iter()
            .map(|entry| (entry.code, entry.meaning))
            .collect())
    }

    /// The capabilities of the contract: `[(name, refusal code, meaning)]`.
    fn capabilities(&self, py: Python<'_>) -> PyResult<Vec<(String, String, String)>> {
        let capabilities = self
            .instance
            .with(|core| core.call_infallible(|guest, store| guest.call_capabilities(store)))
            .py_result(py)?;
        Ok(capabilities
            .into_iter()
            .map(|entry| (entry.name, entry.refusal, entry.meaning))
            .collect())
    }

    /// Checks a backend declaration at registration.
    fn register_backend(
        &self,
        py: Python<'_>,
        name: String,
        capabilities: Vec<(String, bool)>,
        implementations: Vec<String>,
    ) -> PyResult<()> {
        let declaration = torchlens_host_runtime::wit::BackendDeclaration {
            name,
            capabilities,
            implementations,
        };
        self.instance
            .with(|core| core.call(|guest, store| guest.call_register_backend(store, &declaration)))
            .py_result(py)
    }

    /// The gate: `None` when admitted, else the refusal code.
    fn gate(
        &self,
        py: Python<'_>,
        name: String,
        capabilities: Vec<(String, bool)>,
        implementations: Vec<String>,
        capability: String,
    ) -> PyResult<Option<String>> {
        let declaration = torchlens_host_runtime::wit::BackendDeclaration {
            name,
            capabilities,
            implementations,
        };
        let outcome = self
            .instance
            .with(|core| {
                core.call(|guest, store| guest.call_gate(store, &declaration, &capability))
            })
            .py_result(py)?;
        Ok(match outcome {
            torchlens_host_runtime::wit::GateOutcome::Admitted => None,
            torchlens_host_runtime::wit::GateOutcome::Refused(code) => Some(code),
        })
    }

    /// Whether the runtime runs with a fuel budget (the trusted in-process runtime does not).
    fn sandboxed(&self) -> bool {
        self.runtime.limits().fuel_per_call.is_some()
    }
}

thread_local! {
    /// This thread's instance: captures on different threads never share a store.
    static CORE: RefCell<Option<SharedInstance>> = const { RefCell::new(None) };
}

/// The compiled component, shared by every thread's instance (compiled or loaded once).
static RUNTIME: OnceLock<Arc<CoreRuntime>> = OnceLock::new();

fn runtime(py: Python<'_>) -> PyResult<Arc<CoreRuntime>> {
    if let Some(runtime) = RUNTIME.get() {
        return Ok(runtime.clone());
    }
    let runtime = Arc::new(
        CoreRuntime::from_component_bytes_cached(
            EMBEDDED_COMPONENT,
            default_cache_dir().as_deref(),
            SandboxLimits::trusted(),
        )
        .py_result(py)?,
    );
    // Two threads may both have compiled; the first one stored wins and the other is dropped.
    Ok(RUNTIME.get_or_init(|| runtime).clone())
}

/// This thread's core (created on first use).
#[pyfunction]
pub fn core(py: Python<'_>) -> PyResult<Core> {
    let runtime = runtime(py)?;
    let existing = CORE.with(|cell| cell.borrow().clone());
    // A trapped instance is dead with all its state; the next caller gets a fresh one
    // (traces made on the dead one report `core_instance_dead`).
    if let Some(instance) = existing.filter(|instance| !instance.lock().is_dead()) {
        return Ok(Core { instance, runtime });
    }
    let instance = SharedInstance::new(runtime.instantiate().py_result(py)?);
    CORE.with(|cell| *cell.borrow_mut() = Some(instance.clone()));
    Ok(Core { instance, runtime })
}

/// The compiled component under the CLI's limits, for files from anyone (compiled once).
static UNTRUSTED_RUNTIME: OnceLock<Arc<CoreRuntime>> = OnceLock::new();

/// A new core instance under the CLI's sandbox limits (`SandboxLimits::untrusted()`: a 512 MiB
/// memory cap, a fuel budget and a 30 s deadline per call), for `tl.load(path, untrusted=True)`.
/// Each call gets its own instance, so a file that exhausts one takes no other trace with it.
#[pyfunction]
pub fn untrusted_core(py: Python<'_>) -> PyResult<Core> {
    let runtime = match UNTRUSTED_RUNTIME.get() {
        Some(runtime) => runtime.clone(),
        None => {
            let runtime = Arc::new(
                CoreRuntime::from_component_bytes_cached(
                    EMBEDDED_COMPONENT,
                    default_cache_dir().as_deref(),
                    SandboxLimits::untrusted(),
                )
                .py_result(py)?,
            );
            UNTRUSTED_RUNTIME.get_or_init(|| runtime).clone()
        }
    };
    let instance = SharedInstance::new(runtime.instantiate().py_result(py)?);
    Ok(Core { instance, runtime })
}

/// The bytes of the core component this extension embeds (the `.wasm` it runs).
#[pyfunction]
pub fn embedded_component(py: Python<'_>) -> Bound<'_, PyBytes> {
    PyBytes::new(py, EMBEDDED_COMPONENT)
}
