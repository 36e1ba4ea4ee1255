//! The hot path of a full torch capture in one native call per op.
//!
//! When every op output is held in memory (`save="all"`, no streaming) and no live edit or
//! gradient capture watches the op, recording an op is mechanical: name each tensor argument by
//! the value id the capture pinned it under, build the replay templates, pin and hold each
//! output (a detached alias, its version counter noted), store its replay record and append
//! the op event. `Session.record_held` does all of it here instead of in Python bytecode, which
//! on small models cost about as much as the ops themselves. It touches only the capture's own
//! Python dicts (handed over once, in [`HeldOpState`]), so the Python path
//! (`Capture.record` in `backends/torch/capture.py`) stays the definition: the wasmtime-py
//! host runs that path, and both hosts run the whole test suite. Anything this path does not
//! handle (a tensor the capture has not pinned, tensors inside a list argument, a dtype without
//! a neutral name) returns `None` before any side effect, and the Python path records the op.

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use smallvec::SmallVec;
use torchlens_schema::dtype::Dtype;
use torchlens_schema::events::{ArgRef, OpEvent, RawEvent, SourceLocation, TensorDesc};

/// The capture's Python state the hot path reads and writes (the same objects the Python path
/// uses, so both paths can record ops of one capture in any mix).
#[pyclass(module = "torchlens._native", frozen)]
pub struct HeldOpState {
    tensor_type: Py<PyAny>,
    /// `id(tensor)` → `(tensor, value id)`.
    pinned: Py<PyDict>,
    /// Value id → parameter (a parameter argument is a `ParamRef` in templates).
    params: Py<PyDict>,
    /// Value id → the held value.
    payloads: Py<PyDict>,
    /// Value id → version counter of the held value when it was taken.
    versions: Py<PyDict>,
    /// Value ids held since the in-place index was last brought up to date.
    unindexed: Py<PyList>,
    /// Value id → its `ReplayRecord`.
    replays: Py<PyDict>,
    /// torch dtype → neutral dtype name.
    dtype_names: Py<PyDict>,
    value_ref: Py<PyAny>,
    param_ref: Py<PyAny>,
    replay_record: Py<PyAny>,
}

#[pymethods]
impl HeldOpState {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        tensor_type: Py<PyAny>,
        pinned: Py<PyDict>,
        params: Py<PyDict>,
        payloads: Py<PyDict>,
        versions: Py<PyDict>,
        unindexed: Py<PyList>,
        replays: Py<PyDict>,
        dtype_names: Py<PyDict>,
        value_ref: Py<PyAny>,
        param_ref: Py<PyAny>,
        replay_record: Py<PyAny>,
    ) -> Self {
        Self {
            tensor_type,
            pinned,
            params,
            payloads,
            versions,
            unindexed,
            replays,
            dtype_names,
            value_ref,
            param_ref,
            replay_record,
        }
    }
}

/// One op as the hot path saw it: the event to append and the next free value id.
pub struct HeldOp {
    pub event: RawEvent,
    pub next_value_id: u64,
}

/// Parent edges of one op: `(value id, argument position)`.
type Parents = SmallVec<[(u64, u32); 4]>;

impl HeldOpState {
    /// The value id and replay reference of a pinned tensor; None when the capture has not
    /// pinned it (the Python path then names it).
    fn reference<'py>(
        &self,
        py: Python<'py>,
        tensor: &Bound<'py, PyAny>,
    ) -> PyResult<Option<(u64, Bound<'py, PyAny>)>> {
        let key = tensor.as_ptr() as usize;
        let Some(entry) = self.pinned.bind(py).get_item(key)? else {
            return Ok(None);
        };
        let value_id: u64 = entry.cast::<PyTuple>()?.get_item(1)?.extract()?;
        let class = if self.params.bind(py).contains(value_id)? {
            &self.param_ref
        } else {
            &self.value_ref
        };
        Ok(Some((value_id, class.bind(py).call1((value_id,))?)))
    }

    /// One argument's replay template (a tensor becomes its reference and a parent edge); None
    /// when the hot path cannot template it.
    fn template_of<'py>(
        &self,
        py: Python<'py>,
        argument: &Bound<'py, PyAny>,
        position: u32,
        parents: &mut Parents,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let tensor_type = self.tensor_type.bind(py);
        if argument.is_instance(tensor_type)? {
            return Ok(self.reference(py, argument)?.map(|(value_id, reference)| {
                parents.push((value_id, position));
                reference
            }));
        }
        if argument.is_instance_of::<PyTuple>() || argument.is_instance_of::<PyList>() {
            for item in argument.try_iter()? {
                if item?.is_instance(tensor_type)? {
                    return Ok(None); // tensors inside a list argument (torch.cat): the Python path
                }
            }
        }
        Ok(Some(argument.clone()))
    }

    /// Records one op whose outputs are `results` (see the module docs); None, with nothing
    /// changed, when the Python path must record it.
    #[allow(clippy::too_many_arguments)]
    pub fn record<'py>(
        &self,
        py: Python<'py>,
        func: &Bound<'py, PyAny>,
        name: &str,
        in_place: bool,
        args: &Bound<'py, PyAny>,
        kwargs: &Bound<'py, PyAny>,
        results: &Bound<'py, PyTuple>,
        multiple: bool,
        source: Option<(String, u32, String)>,
        first_value_id: u64,
    ) -> PyResult<Option<HeldOp>> {
        let (Ok(args), Ok(kwargs)) = (args.cast::<PyTuple>(), kwargs.cast::<PyDict>()) else {
            return Ok(None);
        };
        let mut parents = Parents::new();
        let mut template = Vec::with_capacity(args.len());
        let mut position = 0u32;
        for argument in args.iter() {
            let Some(item) = self.template_of(py, &argument, position, &mut parents)? else {
                return Ok(None);
            };
            template.push(item);
            position += 1;
        }
        let keyword_template = PyDict::new(py);
        for (key, argument) in kwargs.iter() {
            let Some(item) = self.template_of(py, &argument, position, &mut parents)? else {
                return Ok(None);
            };
            keyword_template.set_item(key, item)?;
            position += 1;
        }
        // Every output's description before anything is changed.
        let mut described = Vec::with_capacity(results.len());
        for result in results.iter() {
            let dtype = result.getattr(intern!(py, "dtype"))?;
            let Some(dtype_name) = self.dtype_names.bind(py).get_item(&dtype)? else {
                return Ok(None);
            };
            let shape: Vec<u64> = result.getattr(intern!(py, "shape"))?.extract()?;
            described.push((result, shape, dtype_name.extract::<String>()?));
        }
        let template = PyTuple::new(py, template)?;
        let pinned = self.pinned.bind(py);
        let payloads = self.payloads.bind(py);
        let versions = self.versions.bind(py);
        let unindexed = self.unindexed.bind(py);
        let replays = self.replays.bind(py);
        let replay_record = self.replay_record.bind(py);
        let mut outputs = SmallVec::new();
        let mut value_id = first_value_id;
        for (index, (result, shape, dtype_name)) in described.into_iter().enumerate() {
            pinned.set_item(result.as_ptr() as usize, (&result, value_id))?;
            // The model's own tensor is held; detached only when it carries autograd history.
            let mut kept = if result.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
                result.call_method0(intern!(py, "detach"))?
            } else {
                result.clone()
            };
            match kept.getattr(intern!(py, "_version")) {
                Ok(version) => {
                    versions.set_item(value_id, version)?;
                    unindexed.append(value_id)?;
                }
                // Inference tensors keep no version counter: hold a copy.
                Err(error) if error.is_instance_of::<PyRuntimeError>(py) => {
                    kept = kept.call_method0(intern!(py, "clone"))?;
                }
                Err(error) => return Err(error),
            }
            payloads.set_item(value_id, kept)?;
            let output_index = if multiple { Some(index) } else { None };
            let record =
                replay_record.call1((func, name, &template, &keyword_template, output_index))?;
            replays.set_item(value_id, record)?;
            outputs.push(TensorDesc {
                tensor: value_id,
                shape: shape.into(),
                dtype: Dtype::from_name(&dtype_name),
                payload: Some(value_id),
            });
            value_id += 1;
        }
        let event = RawEvent::Op(OpEvent {
            func: name.to_owned(),
            args: parents
                .into_iter()
                .map(|(tensor, position)| ArgRef {
                    tensor,
                    position,
                    keyword: None,
                })
                .collect(),
            outputs,
            in_place,
            attributes: Vec::new(),
            source: source.map(|(file, line, function)| SourceLocation {
                file,
                line,
                function,
            }),
        });
        Ok(Some(HeldOp {
            event,
            next_value_id: value_id,
        }))
    }
}
