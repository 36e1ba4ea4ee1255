//! Torch's module hooks of a capture that keeps every value or none, as native callables.
//!
//! A capture that records its ops in one call each (`held_op`) and has no live edits only
//! reports module calls: the module's id on entry, the value ids it returns on exit. Torch calls
//! these hooks on every module call, so `pre` and `post` are registered with torch as they are,
//! with no Python frame between. They read the capture's own dicts (module ids and pinned
//! tensors, the same objects the Python hooks read, and the tags of tensors it does not pin) and
//! append the events to the session. A call they do not handle (another thread's, a module the
//! capture has not declared, an output that is not one named tensor) goes to the capture's
//! Python hook, which stays the definition (`Capture.pre_hook` / `Capture.post_hook` in
//! `backends/torch/capture.py`).

use std::os::raw::c_ulong;

use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyString, PyTuple};
use torchlens_schema::events::RawEvent;

use crate::value_tags::ValueTags;
use torchlens_python_bridge::session::Session;

/// The hooks of one capture (see the module docs).
#[pyclass(module = "torchlens._native", frozen)]
pub struct ModuleCallHooks {
    session: Py<Session>,
    /// `id(module)` → module id.
    module_ids: Py<PyDict>,
    /// `id(tensor)` → `(tensor, value id)`.
    pinned: Py<PyDict>,
    tensor_type: Py<PyAny>,
    /// The capturing thread (`threading.get_ident()`): other threads' calls are not recorded.
    owner_thread: c_ulong,
    python_pre: Py<PyAny>,
    python_post: Py<PyAny>,
    /// How the capture tags the tensors it does not pin (`save=False`: module outputs are
    /// tagged op outputs).
    tags: ValueTags,
}

impl ModuleCallHooks {
    fn module_id(&self, py: Python<'_>, module: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
        let key = module.as_ptr() as usize;
        match self.module_ids.bind(py).get_item(key)? {
            Some(module_id) => Ok(Some(module_id.extract()?)),
            None => Ok(None),
        }
    }

    fn on_owner_thread(&self) -> bool {
        // SAFETY: PyThread_get_thread_ident has no preconditions (it reads the calling thread's id).
        let thread = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
        thread == self.owner_thread
    }

    /// Appends an event; false when the session is busy (then the Python hook reports it).
    fn push(&self, py: Python<'_>, event: RawEvent) -> bool {
        match self.session.bind(py).try_borrow_mut() {
            Ok(mut session) => {
                session.push_event(event);
                true
            }
            Err(_) => false,
        }
    }
}

#[pymethods]
impl ModuleCallHooks {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        session: Py<Session>,
        module_ids: Py<PyDict>,
        pinned: Py<PyDict>,
        tensor_type: Py<PyAny>,
        owner_thread: c_ulong,
        python_pre: Py<PyAny>,
        python_post: Py<PyAny>,
        serial: Py<PyAny>,
        tag_attribute: Py<PyString>,
    ) -> Self {
        Self {
            session,
            module_ids,
            pinned,
            tensor_type,
            owner_thread,
            python_pre,
            python_post,
            tags: ValueTags {
                attribute: tag_attribute,
                serial,
            },
        }
    }

    /// The Python objects held, for the cyclic collector (the Python hooks are the capture's
    /// bound methods).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.session)?;
        visit.call(&self.module_ids)?;
        visit.call(&self.pinned)?;
        visit.call(&self.tensor_type)?;
        visit.call(&self.python_pre)?;
        visit.call(&self.python_post)?;
        self.tags.traverse(&visit)
    }

    /// The global forward pre-hook.
    pub(crate) fn pre(
        &self,
        py: Python<'_>,
        module: &Bound<'_, PyAny>,
        args: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        if !self.on_owner_thread() {
            return Ok(py.None());
        }
        if let Some(module) = self.module_id(py, module)? {
            if self.push(py, RawEvent::Enter { module }) {
                return Ok(py.None());
            }
        }
        Ok(self.python_pre.bind(py).call1((module, args))?.unbind())
    }

    /// The global forward hook; returns None (the module's output stands).
    pub(crate) fn post(
        &self,
        py: Python<'_>,
        module: &Bound<'_, PyAny>,
        args: &Bound<'_, PyAny>,
        output: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        if !self.on_owner_thread() {
            return Ok(py.None());
        }
        if let Some(module_id) = self.module_id(py, module)? {
            if output.is_instance(self.tensor_type.bind(py))? {
                let key = output.as_ptr() as usize;
                let value_id = match self.pinned.bind(py).get_item(key)? {
                    Some(entry) => Some(entry.cast::<PyTuple>()?.get_item(1)?.extract()?),
                    None => self.tags.value_id(py, output)?,
                };
                if let Some(value_id) = value_id {
                    let event = RawEvent::Exit {
                        module: module_id,
                        outputs: vec![value_id],
                    };
                    if self.push(py, event) {
                        return Ok(py.None());
                    }
                }
            }
        }
        Ok(self
            .python_post
            .bind(py)
            .call1((module, args, output))?
            .unbind())
    }
}
