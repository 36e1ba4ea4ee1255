//! A module bracket as a native callable: what `module_brackets.py` puts in a module's
//! `__dict__` as `forward` while a capture uses the module.
//!
//! The Python bracket (`_bracket_for` in `backends/torch/module_brackets.py`) stays the
//! definition, and the pure wheel runs it; this one does the same with no Python frame of its
//! own: it looks up the calling thread's hooks in the shared `{thread ident: hooks}` dict,
//! reports the call's entry, runs the module's own `forward`, reports the exit, and returns the
//! output (or what the exit hook replaced it with). When the thread's hooks carry the capture's
//! native `ModuleCallHooks`, their entry and exit are called here directly instead of through
//! two Python calls. Torch calls a bracket on every module call of a traced model, so that
//! frame and those calls were a visible part of a transformer's trace.

use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyTuple};

use crate::module_hooks::ModuleCallHooks;

/// One module's bracket around its `forward` (read before the bracket went in).
#[pyclass(module = "torchlens._native", frozen)]
pub struct ModuleBracket {
    module: Py<PyAny>,
    forward: Py<PyAny>,
    /// `threading.get_ident()` → `(pre hook, post hook, ModuleCallHooks or None)` of the
    /// capture running on that thread (`module_brackets._HOOKS_BY_THREAD`).
    hooks_by_thread: Py<PyDict>,
}

#[pymethods]
impl ModuleBracket {
    #[new]
    fn new(module: Py<PyAny>, forward: Py<PyAny>, hooks_by_thread: Py<PyDict>) -> Self {
        Self {
            module,
            forward,
            hooks_by_thread,
        }
    }

    /// The Python objects held, for the cyclic collector (the module holds the bracket in its
    /// `__dict__` while it is installed: a cycle).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.module)?;
        visit.call(&self.forward)?;
        visit.call(&self.hooks_by_thread)?;
        Ok(())
    }

    /// The forward this bracket wraps (what `inspect.signature` follows).
    #[getter]
    fn __wrapped__(&self, py: Python<'_>) -> Py<PyAny> {
        self.forward.clone_ref(py)
    }

    /// One call of the module's forward, reported to the calling thread's capture (other
    /// threads' calls pass straight through).
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let forward = self.forward.bind(py);
        // SAFETY: PyThread_get_thread_ident has no preconditions (it reads the calling thread's
        // id, the value `threading.get_ident()` returns).
        let thread = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
        let Some(hooks) = self.hooks_by_thread.bind(py).get_item(thread)? else {
            return forward.call(args, kwargs);
        };
        let hooks = hooks.cast::<PyTuple>()?;
        let module = self.module.bind(py);
        let native = hooks.get_item(2)?;
        let (output, replaced) = if let Ok(native) = native.cast::<ModuleCallHooks>() {
            let native = native.get();
            native.pre(py, module, args.as_any())?;
            let output = forward.call(args, kwargs)?;
            let replaced = native.post(py, module, args.as_any(), &output)?;
            (output, replaced.into_bound(py))
        } else {
            hooks.get_item(0)?.call1((module, args))?;
            let output = forward.call(args, kwargs)?;
            let replaced = hooks.get_item(1)?.call1((module, args, &output))?;
            (output, replaced)
        };
        Ok(if replaced.is_none() { output } else { replaced })
    }
}
