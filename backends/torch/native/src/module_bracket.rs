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
//!
//! A native bracket is also its own installation record (what `_Installation` is for the Python
//! bracket): it keeps what the module's `__dict__` held as `forward` before and how many
//! captures use it, and [`install_brackets`] / [`release_brackets`] put the brackets of a whole
//! model on and take them off in one call each (about 1.7 µs a module in Python, which a
//! 46-module transformer paid twice per trace).

use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::module_hooks::ModuleCallHooks;

/// One module's bracket around its `forward` (read before the bracket went in).
#[pyclass(module = "torchlens._native", frozen)]
pub struct ModuleBracket {
    module: Py<PyAny>,
    forward: Py<PyAny>,
    /// `threading.get_ident()` → `(pre hook, post hook, ModuleCallHooks or None)` of the
    /// capture running on that thread (`module_brackets._HOOKS_BY_THREAD`).
    hooks_by_thread: Py<PyDict>,
    /// What the module's `__dict__` held as `forward` before the bracket went in (None:
    /// nothing).
    previous: Option<Py<PyAny>>,
    /// How many captures use the bracket; changed only holding `module_brackets._LOCK`.
    users: AtomicUsize,
}

#[pymethods]
impl ModuleBracket {
    /// The Python objects held, for the cyclic collector (the module holds the bracket in its
    /// `__dict__` while it is installed: a cycle).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.module)?;
        visit.call(&self.forward)?;
        visit.call(&self.hooks_by_thread)?;
        if let Some(previous) = &self.previous {
            visit.call(previous)?;
        }
        Ok(())
    }

    /// How many captures use the bracket (a capture whose module hooks are Python ones counts
    /// itself here too when it shares a bracket another capture installed).
    #[getter]
    fn users(&self) -> usize {
        self.users.load(Ordering::Relaxed)
    }

    #[setter]
    fn set_users(&self, users: usize) {
        self.users.store(users, Ordering::Relaxed);
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

/// Brackets `modules` for one capture, as `module_brackets._Installation` does one module at a
/// time (called holding `module_brackets._LOCK`): a module already bracketed gains a user; a
/// module without hooks of its own gets a native bracket in its `__dict__` (keeping what was
/// there) and `installed[id(module)]` records it; a module with hooks of its own, or one whose
/// installation is a Python `_Installation`, is handed to `python_install(module)`, which
/// returns its installation with the user counted. Each installation is appended to `used` as
/// it is made, so what went in before an error can be released.
#[pyfunction]
pub fn install_brackets(
    py: Python<'_>,
    modules: &Bound<'_, PyAny>,
    installed: &Bound<'_, PyDict>,
    hooks_by_thread: &Bound<'_, PyDict>,
    python_install: &Bound<'_, PyAny>,
    used: &Bound<'_, PyList>,
) -> PyResult<()> {
    let forward_name = pyo3::intern!(py, "forward");
    for module in modules.try_iter()? {
        let module = module?;
        let key = module.as_ptr() as usize;
        if let Some(existing) = installed.get_item(key)? {
            if let Ok(bracket) = existing.cast::<ModuleBracket>() {
                bracket.get().users.fetch_add(1, Ordering::Relaxed);
                used.append(existing)?;
                continue;
            }
        } else if !module
            .getattr(pyo3::intern!(py, "_forward_pre_hooks"))?
            .is_truthy()?
            && !module
                .getattr(pyo3::intern!(py, "_forward_hooks"))?
                .is_truthy()?
        {
            let own = module.getattr(pyo3::intern!(py, "__dict__"))?;
            let own = own.cast::<PyDict>()?;
            let previous = own.get_item(forward_name)?.map(Bound::unbind);
            let forward = module.getattr(forward_name)?.unbind();
            let bracket = Bound::new(
                py,
                ModuleBracket {
                    module: module.clone().unbind(),
                    forward,
                    hooks_by_thread: hooks_by_thread.clone().unbind(),
                    previous,
                    users: AtomicUsize::new(1),
                },
            )?;
            own.set_item(forward_name, &bracket)?;
            installed.set_item(key, &bracket)?;
            used.append(bracket)?;
            continue;
        }
        used.append(python_install.call1((&module,))?)?;
    }
    Ok(())
}

/// One capture stops using `used` (what [`install_brackets`] listed; called holding
/// `module_brackets._LOCK`): the last user of a native bracket takes it off, giving the module's
/// `__dict__` back what it held unless something replaced the bracket since (then that stays);
/// any other installation goes to `python_release(installation)`.
#[pyfunction]
pub fn release_brackets(
    py: Python<'_>,
    used: &Bound<'_, PyList>,
    installed: &Bound<'_, PyDict>,
    python_release: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let forward_name = pyo3::intern!(py, "forward");
    for installation in used.iter() {
        let Ok(bracket) = installation.cast::<ModuleBracket>() else {
            python_release.call1((&installation,))?;
            continue;
        };
        let record = bracket.get();
        if record.users.fetch_sub(1, Ordering::Relaxed) != 1 {
            continue;
        }
        let module = record.module.bind(py);
        let key = module.as_ptr() as usize;
        if installed
            .get_item(key)?
            .is_some_and(|entry| entry.is(bracket))
        {
            installed.del_item(key)?;
        }
        let own = module.getattr(pyo3::intern!(py, "__dict__"))?;
        let own = own.cast::<PyDict>()?;
        if !own
            .get_item(forward_name)?
            .is_some_and(|entry| entry.is(bracket))
        {
            continue;
        }
        match &record.previous {
            Some(previous) => own.set_item(forward_name, previous)?,
            None => own.del_item(forward_name)?,
        }
    }
    Ok(())
}
