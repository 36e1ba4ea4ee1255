//! The hot path of a torch capture in one native call per op.
//!
//! When every op output is held in memory (`save="all"`, no streaming), none is (`save=False`),
//! or a `save=` selector's live plan decides each op at once, and no live edit or gradient
//! capture watches the op, recording an op is mechanical: find the user's line that called it,
//! name each tensor argument by the value id the capture gave it, name each output (with every
//! value saved it is pinned and held as a detached alias, its version counter noted; otherwise
//! it carries the capture's tag, as the Python path tags it, and an output the plan selects is
//! held through the session's `hold`), keep the op's replay facts (made into replay records only
//! when replay reads them: `pending_replays`), append the op event and count it in the session.
//! [`HeldOpRecorder::record`], called by the function mode right after the op ran, does all of
//! it here instead of in Python bytecode, which on small models cost about as much as the ops
//! themselves. It touches only the capture's own Python objects (handed over once), so the
//! Python path (`Capture.record` in `backends/torch/capture.py`, with the `SourceLocator` of
//! `adapter_kit/source_location.py`) stays the definition: the wasmtime-py host runs that path,
//! and both hosts run the whole test suite. A module buffer read for the first time is declared
//! here, before the op runs (`declare_buffer`); any other tensor the capture has not named (a
//! constant read for the first time) is named by the capture's own `_reference`, as the Python
//! path names it. Anything this path does not handle (tensors inside a list argument, a dtype
//! without a neutral name) returns `None` before any side effect of its own, and the Python
//! path records the op. It also records an op that a `save=` selector's plan cannot decide at
//! once (a module's outputs, a window, a graph term), and every op while such a decision waits.

use std::collections::HashMap;

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use smallvec::SmallVec;
use torchlens_schema::dtype::Dtype;
use torchlens_schema::events::{ArgRef, OpEvent, RawEvent, SourceLocation, TensorDesc};

use crate::pending_replays::{Argument, Arguments, PendingOp, PendingReplays};
use crate::value_tags::ValueTags;
use torchlens_python_bridge::session::Session;

/// Code objects whose skip decision is remembered before the memory starts over (as
/// `MAX_REMEMBERED_CODE` in `source_location.py`: generated code makes new code objects).
const MAX_REMEMBERED_CODE: usize = 20_000;

/// A code object as source locations see it: None when its file lies in a skipped folder, else
/// its file and function name.
type CodeSource = Option<(String, String)>;

/// How the trace names one callable and whether it writes in place (`naming.describe`), with
/// the name as the interned Python string the replay records hold: asked on every op, so kept
/// as shared text (no string is copied per op but the event's own).
struct Description {
    name: std::sync::Arc<str>,
    in_place: bool,
    python_name: Py<PyString>,
}

impl Description {
    fn clone_ref(&self, py: Python<'_>) -> Self {
        Self {
            name: self.name.clone(),
            in_place: self.in_place,
            python_name: self.python_name.clone_ref(py),
        }
    }
}

/// One capture's recorder, over the capture's Python state (the same objects the Python path
/// uses, so both paths can record ops of one capture in any mix).
#[pyclass(module = "torchlens._native")]
pub struct HeldOpRecorder {
    /// The core session the events go to.
    session: Py<Session>,
    /// The Python `CaptureSession`: its value-id counter and event counters, and its `flush`.
    capture_session: Py<PyAny>,
    tensor_type: Py<PyAny>,
    /// `id(tensor)` → `(tensor, value id)`.
    pinned: Py<PyDict>,
    /// Value id → the held value.
    payloads: Py<PyDict>,
    /// Value id → version counter of the held value when it was taken.
    versions: Py<PyDict>,
    /// Value ids held since the in-place index was last brought up to date.
    unindexed: Py<PyList>,
    /// The ops' replay facts, kept until replay asks for the records (`pending_replays`).
    replays: Py<PendingReplays>,
    /// torch dtype → neutral dtype name.
    dtype_names: Py<PyDict>,
    /// The torch dtypes outputs had so far with their neutral dtype (a handful; torch's dtype
    /// objects live as long as torch, and are held here besides).
    dtypes_seen: Vec<(Py<PyAny>, Dtype)>,
    /// The capture's `_reference(tensor) -> (value id, reference)`, for tensors not pinned.
    python_reference: Py<PyAny>,
    /// The capture's `protect(target)`: copies what an `out=` op is about to overwrite.
    protect: Py<PyAny>,
    /// The capture's `run_in_place(func, name, args, kwargs)`: runs an op that writes into its
    /// first argument, out of place where that is sound, else after copying the old value.
    run_in_place: Py<PyAny>,
    /// The capture's `record(func, name, in_place, args, kwargs, out)`: the Python path.
    python_record: Py<PyAny>,
    /// `describe(func) -> (name, in place)` of `backends/torch/naming.py`.
    python_describe: Py<PyAny>,
    /// Callable address → how the trace names it; the callables are held in `described`, so an
    /// address is never reused while it is a key.
    descriptions: HashMap<usize, Description>,
    described: Vec<Py<PyAny>>,
    /// Folders whose frames are not user code (torch's, TorchLens's own).
    skipped_folders: Vec<String>,
    /// Code object address → what source locations read of it; the objects are held in
    /// `remembered_code`, so an address is never reused while it is a key.
    code_sources: HashMap<usize, CodeSource>,
    remembered_code: Vec<Py<PyAny>>,
    /// Events the session sends per batch (`EVENTS_PER_BATCH` in `adapter_kit/session.py`).
    events_per_batch: u64,
    /// Which outputs the capture keeps.
    keeping: Keeping,
    /// How the capture tags the tensors it does not pin.
    tags: ValueTags,
    /// Ops recorded so far (the rest went to the Python path).
    #[pyo3(get)]
    recorded: u64,
}

#[pymethods]
impl HeldOpRecorder {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        session: Py<Session>,
        capture_session: Py<PyAny>,
        tensor_type: Py<PyAny>,
        pinned: Py<PyDict>,
        payloads: Py<PyDict>,
        versions: Py<PyDict>,
        unindexed: Py<PyList>,
        replays: Py<PendingReplays>,
        dtype_names: Py<PyDict>,
        python_reference: Py<PyAny>,
        protect: Py<PyAny>,
        run_in_place: Py<PyAny>,
        python_record: Py<PyAny>,
        python_describe: Py<PyAny>,
        skipped_folders: Vec<String>,
        events_per_batch: u64,
        keeping: &str,
        serial: Py<PyAny>,
        tag_attribute: Py<PyString>,
    ) -> PyResult<Self> {
        let keeping = match keeping {
            "all" => Keeping::Every,
            "none" => Keeping::Nothing,
            "selected" => Keeping::Selected,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "keeping is all, none or selected, not {other:?}"
                )))
            }
        };
        Ok(Self {
            session,
            capture_session,
            tensor_type,
            pinned,
            payloads,
            versions,
            unindexed,
            replays,
            dtype_names,
            dtypes_seen: Vec::new(),
            python_reference,
            protect,
            run_in_place,
            python_record,
            python_describe,
            descriptions: HashMap::new(),
            described: Vec::new(),
            skipped_folders,
            code_sources: HashMap::new(),
            remembered_code: Vec::new(),
            events_per_batch,
            keeping,
            tags: ValueTags {
                attribute: tag_attribute,
                serial,
            },
            recorded: 0,
        })
    }

    /// The Python objects held, for the cyclic collector (the capture's `_reference` makes a
    /// cycle through the capture until it ends and lets go of the recorder).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.session)?;
        visit.call(&self.capture_session)?;
        visit.call(&self.tensor_type)?;
        visit.call(&self.pinned)?;
        visit.call(&self.payloads)?;
        visit.call(&self.versions)?;
        visit.call(&self.unindexed)?;
        visit.call(&self.replays)?;
        self.tags.traverse(&visit)?;
        visit.call(&self.dtype_names)?;
        for (dtype, _) in &self.dtypes_seen {
            visit.call(dtype)?;
        }
        visit.call(&self.python_reference)?;
        visit.call(&self.protect)?;
        visit.call(&self.run_in_place)?;
        visit.call(&self.python_record)?;
        visit.call(&self.python_describe)?;
        for func in &self.described {
            visit.call(func)?;
        }
        for code in &self.remembered_code {
            visit.call(code)?;
        }
        Ok(())
    }

    /// The recorder is the capture's function mode (pushed on torch's stack, which needs of a
    /// mode only this method, bound to it): protects what an in-place op is about to
    /// overwrite, runs the op and records it, here or, for an op this path does not handle,
    /// through the capture's Python `record`.
    #[pyo3(signature = (func, types, args=None, kwargs=None))]
    fn __torch_function__<'py>(
        slf: &Bound<'py, Self>,
        func: &Bound<'py, PyAny>,
        types: &Bound<'py, PyAny>,
        args: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let _ = types; // the mode runs every function whatever the argument types
        let args = match args {
            Some(args) => args.cast::<PyTuple>()?.clone(),
            None => PyTuple::empty(py),
        };
        let kwargs = match kwargs {
            Some(kwargs) if !kwargs.is_none() => kwargs.cast::<PyDict>()?.clone(),
            _ => PyDict::new(py),
        };
        // No borrow is held while the op runs, nor while Python's `protect` or `record` does;
        // the Python calls made inside `record` (the capture's `_reference`, the replay record's
        // class) run with torch's mode stack set aside, so they never reach the recorder.
        let description = slf.borrow_mut().describe(py, func)?;
        let name = &*description.name;
        let writes_in_place = description.in_place;
        // Buffers and constants read for the first time are declared (copied) before the op may
        // change them in place (`Capture.declare_leaves` is the definition); the ids found here
        // are the ones `record` templates the arguments with.
        let argument_ids = slf.borrow().argument_ids(py, &args, &kwargs)?;
        let in_place = writes_in_place
            || match kwargs.get_item(intern!(py, "inplace"))? {
                Some(flag) => flag.is(&*pyo3::types::PyBool::new(py, true)),
                None => false,
            };
        let out_target = if args.is_empty() {
            None
        } else {
            kwargs.get_item(intern!(py, "out"))?
        };
        // Only held values need protecting from a write (as `Capture.holding` gates it).
        let protects = (out_target.is_some() || (in_place && !args.is_empty()))
            && slf.borrow().protects(py)?;
        let out_target = out_target.filter(|_| protects);
        let out = if let Some(target) = out_target {
            let protect = slf.borrow().protect.clone_ref(py);
            protect.call1(py, (target,))?;
            func.call(&args, Some(&kwargs))?
        } else if in_place && protects && !args.is_empty() {
            let run_in_place = slf.borrow().run_in_place.clone_ref(py);
            run_in_place
                .call1(py, (func, name, &args, &kwargs))?
                .into_bound(py)
        } else {
            // No keywords: no dict for torch's argument parser to read.
            func.call(&args, (!kwargs.is_empty()).then_some(&kwargs))?
        };
        let recorded = slf.borrow_mut().record(
            py,
            func,
            &description,
            in_place,
            args.as_any(),
            kwargs.as_any(),
            &out,
            &argument_ids,
        )?;
        if recorded.is_some() {
            return Ok(out);
        }
        let python_record = slf.borrow().python_record.clone_ref(py);
        Ok(python_record
            .call1(
                py,
                (
                    func,
                    description.python_name.bind(py),
                    in_place,
                    args,
                    kwargs,
                    out,
                ),
            )?
            .into_bound(py))
    }
}

/// One op as the hot path saw it: the event to append, the first value id its outputs took
/// and the next free one.
struct HeldOp {
    event: RawEvent,
    first_value_id: u64,
    next_value_id: u64,
}

/// Parent edges of one op: `(value id, argument position)`.
type Parents = SmallVec<[(u64, u32); 4]>;

/// Which op outputs a capture keeps, as the recorder serves it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keeping {
    /// Every output, pinned and held here (`save="all"`).
    Every,
    /// None (`save=False`): outputs are tagged and carry no payload.
    Nothing,
    /// What the `save=` selector's live plan selects: outputs are tagged, the selected ones
    /// held through the session's `hold`.
    Selected,
}

/// What the live plan answered for one op (the same for each of its outputs).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PlanAnswer {
    /// The selector compiled to no plan: every output is kept (as `CaptureSession.op` does).
    KeepAll,
    Selected,
    Rejected,
}

/// `SELECTED` and `REJECTED` of `adapter_kit/live_plan.py`: the plan's answers for an op it
/// decides at once (any other answer waits for something, and the Python path records the op).
const PLAN_SELECTED: u64 = 1;
const PLAN_REJECTED: u64 = 0;

impl HeldOpRecorder {
    /// Whether an op about to write into a tensor must first protect what the capture holds:
    /// always when every value is held, never when none is, else once something is held
    /// (`Capture.holding`, read off the capture that `protect` belongs to).
    fn protects(&self, py: Python<'_>) -> PyResult<bool> {
        match self.keeping {
            Keeping::Every => Ok(true),
            Keeping::Nothing => Ok(false),
            Keeping::Selected => self
                .protect
                .bind(py)
                .getattr(intern!(py, "__self__"))?
                .getattr(intern!(py, "holding"))?
                .is_truthy(),
        }
    }

    /// The live plan's answer for an op of `name`, as `CaptureSession.op` asks it; None when it
    /// must wait (or a decision of an earlier op still waits): the Python path records the op.
    fn plan_answer(
        &self,
        py: Python<'_>,
        name: &str,
        capture_session: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PlanAnswer>> {
        if capture_session
            .getattr(intern!(py, "_windows"))?
            .is_truthy()?
        {
            return Ok(None);
        }
        let plan = if capture_session
            .getattr(intern!(py, "_plan_stale"))?
            .is_truthy()?
        {
            capture_session.call_method0(intern!(py, "_compile_plan"))?
        } else {
            capture_session.getattr(intern!(py, "_plan"))?
        };
        if plan.is_none() {
            return Ok(Some(PlanAnswer::KeepAll));
        }
        let open_calls = capture_session.getattr(intern!(py, "_open_calls"))?;
        let answer: u64 = plan
            .getattr(intern!(py, "decide"))?
            .call1((name, open_calls, true))?
            .extract()?;
        Ok(match answer {
            PLAN_SELECTED => Some(PlanAnswer::Selected),
            PLAN_REJECTED => Some(PlanAnswer::Rejected),
            _ => None,
        })
    }

    /// Records the op `func` (named `name`) that returned `out`: True when recorded, False when
    /// `out` holds no tensor (nothing to record), None when the Python path must record it
    /// (nothing was changed).
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        py: Python<'_>,
        func: &Bound<'_, PyAny>,
        description: &Description,
        in_place: bool,
        args: &Bound<'_, PyAny>,
        kwargs: &Bound<'_, PyAny>,
        out: &Bound<'_, PyAny>,
        argument_ids: &[u64],
    ) -> PyResult<Option<bool>> {
        let (Ok(args), Ok(kwargs)) = (args.cast::<PyTuple>(), kwargs.cast::<PyDict>()) else {
            return Ok(None);
        };
        let Some((results, multiple)) = self.results(py, &description.name, args, out)? else {
            return Ok(Some(false));
        };
        let source = self.source(py)?;
        let capture_session = self.capture_session.bind(py).clone();
        let Some(held) = self.hold(
            py,
            func,
            description,
            in_place,
            args,
            kwargs,
            &results,
            multiple,
            source,
            &capture_session,
            argument_ids,
        )?
        else {
            return Ok(None);
        };
        match self.session.bind(py).try_borrow_mut() {
            Ok(mut session) => session.push_event(held.event),
            // Unreachable in practice (nothing calls back into the session while it records);
            // the values are held already, so the op must not be recorded a second time.
            Err(error) => return Err(error.into()),
        }
        capture_session.setattr(intern!(py, "_next_value"), held.next_value_id)?;
        self.count_event(
            py,
            &capture_session,
            held.next_value_id - held.first_value_id,
        )?;
        self.recorded += 1;
        Ok(Some(true))
    }

    /// Counts one event appended to the session, for `values` values, in the Python
    /// `CaptureSession`'s counters (as its `_sent` does), sending the batch when it is full.
    fn count_event(
        &self,
        py: Python<'_>,
        capture_session: &Bound<'_, PyAny>,
        values: u64,
    ) -> PyResult<()> {
        let op_count: u64 = capture_session
            .getattr(intern!(py, "_op_count"))?
            .extract()?;
        capture_session.setattr(intern!(py, "_op_count"), op_count + values)?;
        let unsent: u64 = capture_session
            .getattr(intern!(py, "_unsent"))?
            .extract::<u64>()?
            + 1;
        if unsent >= self.events_per_batch {
            capture_session.call_method0(intern!(py, "flush"))?;
        } else {
            capture_session.setattr(intern!(py, "_unsent"), unsent)?;
        }
        Ok(())
    }

    /// Declares a module buffer the first time an op of this capture reads it, as
    /// `Capture._id_of` and `CaptureSession.buffer` do: a new value id, the buffer pinned and
    /// counted as lasting, a copy of its value kept as a leaf payload (a training forward updates
    /// running statistics in place right after reading them), and the buffer event. None, with
    /// nothing changed, for a tensor that is no buffer of the model (or has a dtype without a
    /// neutral name): the capture's `_reference` then names it. On resnet18 each of the 40
    /// first reads cost ~16 µs through Python, mostly with the caches cold after a convolution.
    fn declare_buffer(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let key = tensor.as_ptr() as usize;
        let capture = self
            .python_reference
            .bind(py)
            .getattr(intern!(py, "__self__"))?;
        let addresses = capture.getattr(intern!(py, "buffer_addresses"))?;
        let Some(address) = addresses.cast::<PyDict>()?.get_item(key)? else {
            return Ok(None);
        };
        let dtype = tensor.getattr(intern!(py, "dtype"))?;
        let Some(dtype_name) = self.dtype_names.bind(py).get_item(&dtype)? else {
            return Ok(None);
        };
        let shape: Vec<u64> = tensor.getattr(intern!(py, "shape"))?.extract()?;
        let copy = tensor
            .call_method0(intern!(py, "detach"))?
            .call_method0(intern!(py, "clone"))?;
        let capture_session = self.capture_session.bind(py);
        let value_id: u64 = capture_session
            .getattr(intern!(py, "_next_value"))?
            .extract()?;
        capture_session.setattr(intern!(py, "_next_value"), value_id + 1)?;
        self.pinned.bind(py).set_item(key, (tensor, value_id))?;
        capture
            .getattr(intern!(py, "lasting"))?
            .call_method1(intern!(py, "add"), (key,))?;
        self.payloads.bind(py).set_item(value_id, copy)?;
        capture_session
            .getattr(intern!(py, "leaf_values"))?
            .call_method1(intern!(py, "add"), (value_id,))?;
        self.session
            .bind(py)
            .try_borrow_mut()?
            .push_event(RawEvent::Buffer {
                address: address.extract()?,
                value: TensorDesc {
                    tensor: value_id,
                    shape: shape.into(),
                    dtype: Dtype::from_name(&dtype_name.extract::<String>()?),
                    payload: Some(value_id),
                },
            });
        self.count_event(py, capture_session, 1)?;
        Ok(Some(value_id))
    }

    /// The value ids of the op's top-level tensor arguments (positional, then keyword), in
    /// order, found before the op runs: a buffer or constant read for the first time is declared
    /// now, its value copied before the op may change it. An argument keeps its id through the
    /// op (an in-place op's target is re-named only when its output is recorded).
    fn argument_ids(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: &Bound<'_, PyDict>,
    ) -> PyResult<SmallVec<[u64; 4]>> {
        let tensor_type = self.tensor_type.bind(py);
        let keywords = kwargs.iter().map(|(_, argument)| argument);
        let mut ids = SmallVec::new();
        for argument in args.iter().chain(keywords) {
            if argument.is_instance(tensor_type)? {
                ids.push(self.value_id_of(py, &argument)?);
            }
        }
        Ok(ids)
    }

    /// The value id of a tensor argument: a pinned or tagged one's here, a buffer read for the
    /// first time declared here ([`Self::declare_buffer`]), any other's from the capture's own
    /// `_reference` (which declares a constant the first time an op reads it, as the Python path
    /// would at this point).
    fn value_id_of(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>) -> PyResult<u64> {
        let key = tensor.as_ptr() as usize;
        if let Some(entry) = self.pinned.bind(py).get_item(key)? {
            return entry.cast::<PyTuple>()?.get_item(1)?.extract();
        }
        if self.keeping != Keeping::Every {
            if let Some(value_id) = self.tags.value_id(py, tensor)? {
                return Ok(value_id);
            }
        }
        if let Some(value_id) = self.declare_buffer(py, tensor)? {
            return Ok(value_id);
        }
        let (value_id, _reference): (u64, Bound<'_, PyAny>) =
            self.python_reference.bind(py).call1((tensor,))?.extract()?;
        Ok(value_id)
    }

    /// Names an output nothing holds as this capture's value `value_id`: re-pinned if the
    /// capture already pins the object (an input or parameter an op returned), else tagged
    /// (as `Capture.record` names it when outputs are not pinned).
    fn tag(&self, py: Python<'_>, result: &Bound<'_, PyAny>, value_id: u64) -> PyResult<()> {
        let pinned = self.pinned.bind(py);
        let key = result.as_ptr() as usize;
        if pinned.contains(key)? {
            return pinned.set_item(key, (result, value_id));
        }
        self.tags.tag(py, result, value_id)
    }

    /// One argument as its replay template keeps it (a tensor becomes its value id and a
    /// parent edge); None when the hot path cannot template it.
    fn template_of(
        &self,
        py: Python<'_>,
        argument: &Bound<'_, PyAny>,
        position: u32,
        parents: &mut Parents,
        known: &mut std::slice::Iter<'_, u64>,
    ) -> PyResult<Option<Argument>> {
        let tensor_type = self.tensor_type.bind(py);
        if argument.is_instance(tensor_type)? {
            let value_id = match known.next() {
                Some(value_id) => *value_id,
                None => self.value_id_of(py, argument)?,
            };
            parents.push((value_id, position));
            return Ok(Some(Argument::Tensor(value_id)));
        }
        if argument.is_instance_of::<PyTuple>() || argument.is_instance_of::<PyList>() {
            for item in argument.try_iter()? {
                if item?.is_instance(tensor_type)? {
                    return Ok(None); // tensors inside a list argument (torch.cat): the Python path
                }
            }
        }
        Ok(Some(Argument::Value(snapshot(argument)?)))
    }

    /// How the trace names `func` and whether it writes in place (`naming.describe`, asked
    /// once per callable).
    fn describe(&mut self, py: Python<'_>, func: &Bound<'_, PyAny>) -> PyResult<Description> {
        let key = func.as_ptr() as usize;
        if let Some(description) = self.descriptions.get(&key) {
            return Ok(description.clone_ref(py));
        }
        let (name, in_place): (String, bool) =
            self.python_describe.bind(py).call1((func,))?.extract()?;
        let description = Description {
            python_name: PyString::intern(py, &name).unbind(),
            name: name.into(),
            in_place,
        };
        if self.described.len() >= MAX_REMEMBERED_CODE {
            self.descriptions.clear();
            self.described.clear();
        }
        self.descriptions.insert(key, description.clone_ref(py));
        self.described.push(func.clone().unbind());
        Ok(description)
    }

    /// The neutral dtype of a torch dtype (None for one without a neutral name), looked up in
    /// `dtype_names` once per dtype and capture.
    fn neutral_dtype(&mut self, dtype: &Bound<'_, PyAny>) -> PyResult<Option<Dtype>> {
        if let Some((_, neutral)) = self.dtypes_seen.iter().find(|(seen, _)| dtype.is(seen)) {
            return Ok(Some(neutral.clone()));
        }
        let Some(name) = self.dtype_names.bind(dtype.py()).get_item(dtype)? else {
            return Ok(None);
        };
        let neutral = Dtype::from_name(&name.extract::<String>()?);
        self.dtypes_seen
            .push((dtype.clone().unbind(), neutral.clone()));
        Ok(Some(neutral))
    }

    /// The tensors an op returned, and whether it returned several (a tuple or list, or
    /// `__setitem__`'s target); None when it returned no tensor.
    fn results<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: &Bound<'py, PyTuple>,
        out: &Bound<'py, PyAny>,
    ) -> PyResult<Option<(Bound<'py, PyTuple>, bool)>> {
        let tensor_type = self.tensor_type.bind(py);
        if out.is_instance(tensor_type)? {
            return Ok(Some((PyTuple::new(py, [out])?, false)));
        }
        if out.is_instance_of::<PyTuple>() || out.is_instance_of::<PyList>() {
            let mut tensors = Vec::new();
            for item in out.try_iter()? {
                let item = item?;
                if item.is_instance(tensor_type)? {
                    tensors.push(item);
                }
            }
            if tensors.is_empty() {
                return Ok(None);
            }
            return Ok(Some((PyTuple::new(py, tensors)?, true)));
        }
        if out.is_none() && name == "__setitem__" && !args.is_empty() {
            let target = args.get_item(0)?;
            if target.is_instance(tensor_type)? {
                return Ok(Some((PyTuple::new(py, [target])?, true)));
            }
        }
        Ok(None)
    }

    /// The user's line that called the op: the first frame, from the innermost, whose file is
    /// outside the skipped folders (as `SourceLocator.locate`), or None.
    fn source(&mut self, py: Python<'_>) -> PyResult<Option<(String, u32, String)>> {
        // SAFETY: called with the GIL held (a `Python` token), from Python code, so a frame
        // is executing; the reference is borrowed and only used to take a new one.
        let current = unsafe { pyo3::ffi::PyEval_GetFrame() };
        if current.is_null() {
            return Ok(None);
        }
        // SAFETY: non-null, a live frame object (borrowed above); `from_borrowed_ptr` takes a
        // new strong reference.
        let mut frame = unsafe { Bound::from_borrowed_ptr(py, current.cast()) };
        loop {
            let code = frame.getattr(intern!(py, "f_code"))?;
            let key = code.as_ptr() as usize;
            if !self.code_sources.contains_key(&key) {
                if self.remembered_code.len() >= MAX_REMEMBERED_CODE {
                    self.code_sources.clear();
                    self.remembered_code.clear();
                }
                let file: String = code.getattr(intern!(py, "co_filename"))?.extract()?;
                let skipped = self
                    .skipped_folders
                    .iter()
                    .any(|folder| file.starts_with(folder.as_str()));
                let entry = if skipped {
                    None
                } else {
                    Some((file, code.getattr(intern!(py, "co_name"))?.extract()?))
                };
                self.code_sources.insert(key, entry);
                self.remembered_code.push(code.unbind());
            }
            if let Some(Some((file, function))) = self.code_sources.get(&key) {
                let line: u32 = frame.getattr(intern!(py, "f_lineno"))?.extract()?;
                return Ok(Some((file.clone(), line, function.clone())));
            }
            let back = frame.getattr(intern!(py, "f_back"))?;
            if back.is_none() {
                return Ok(None);
            }
            frame = back;
        }
    }

    /// Names the outputs `results` of one op, holding them when the capture holds every output
    /// (see the module docs); None, with nothing changed, when the Python path must record it.
    #[allow(clippy::too_many_arguments)]
    fn hold<'py>(
        &mut self,
        py: Python<'py>,
        func: &Bound<'py, PyAny>,
        description: &Description,
        in_place: bool,
        args: &Bound<'py, PyTuple>,
        kwargs: &Bound<'py, PyDict>,
        results: &Bound<'py, PyTuple>,
        multiple: bool,
        source: Option<(String, u32, String)>,
        capture_session: &Bound<'py, PyAny>,
        argument_ids: &[u64],
    ) -> PyResult<Option<HeldOp>> {
        let mut parents = Parents::new();
        let mut template = Arguments::new();
        let mut position = 0u32;
        let mut known = argument_ids.iter();
        for argument in args.iter() {
            let Some(item) = self.template_of(py, &argument, position, &mut parents, &mut known)?
            else {
                return Ok(None);
            };
            template.push(item);
            position += 1;
        }
        let mut keyword_template = Vec::with_capacity(kwargs.len());
        for (key, argument) in kwargs.iter() {
            let Some(item) = self.template_of(py, &argument, position, &mut parents, &mut known)?
            else {
                return Ok(None);
            };
            keyword_template.push((key.unbind(), item));
            position += 1;
        }
        // Every output's description before anything is changed.
        let name = &*description.name;
        let mut described = Vec::with_capacity(results.len());
        for result in results.iter() {
            let Some(dtype) = self.neutral_dtype(&result.getattr(intern!(py, "dtype"))?)? else {
                return Ok(None);
            };
            let shape: Vec<u64> = result.getattr(intern!(py, "shape"))?.extract()?;
            described.push((result, shape, dtype));
        }
        // The plan decides before anything is changed (it answers alike for every output).
        let answer = match self.keeping {
            Keeping::Selected => match self.plan_answer(py, name, capture_session)? {
                Some(answer) => Some(answer),
                None => return Ok(None),
            },
            _ => None,
        };
        let pinned = self.pinned.bind(py);
        let payloads = self.payloads.bind(py);
        let versions = self.versions.bind(py);
        let unindexed = self.unindexed.bind(py);
        let mut outputs = SmallVec::new();
        // Read after the templates: naming a buffer or constant there takes an id too.
        let first_value_id: u64 = capture_session
            .getattr(intern!(py, "_next_value"))?
            .extract()?;
        let mut value_id = first_value_id;
        for (result, shape, dtype) in described {
            if self.keeping != Keeping::Every {
                self.tag(py, &result, value_id)?;
                if matches!(answer, Some(PlanAnswer::Selected | PlanAnswer::KeepAll)) {
                    if answer == Some(PlanAnswer::Selected) {
                        capture_session
                            .getattr(intern!(py, "selected"))?
                            .call_method1(intern!(py, "add"), (value_id,))?;
                    }
                    let kept = capture_session
                        .getattr(intern!(py, "hold"))?
                        .call1((value_id, &result))?;
                    payloads.set_item(value_id, kept)?;
                }
                outputs.push(TensorDesc {
                    tensor: value_id,
                    shape: shape.into(),
                    dtype,
                    // A rejected output's slot is named anyway (as `CaptureSession.op` names it:
                    // a call may still return the value); with nothing saved there is none.
                    payload: answer.map(|_| value_id),
                });
                value_id += 1;
                continue;
            }
            // One Python int for the id in the four places that key or hold it.
            let id_object = value_id.into_pyobject(py)?;
            pinned.set_item(
                result.as_ptr() as usize,
                PyTuple::new(py, [result.as_any(), id_object.as_any()])?,
            )?;
            // The model's own tensor is held; detached only when it carries autograd history.
            let mut kept = if result.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
                result.call_method0(intern!(py, "detach"))?
            } else {
                result.clone()
            };
            match kept.getattr(intern!(py, "_version")) {
                Ok(version) => {
                    versions.set_item(&id_object, version)?;
                    unindexed.append(&id_object)?;
                }
                // Inference tensors keep no version counter: hold a copy.
                Err(error) if error.is_instance_of::<PyRuntimeError>(py) => {
                    kept = kept.call_method0(intern!(py, "clone"))?;
                }
                Err(error) => return Err(error),
            }
            payloads.set_item(id_object, kept)?;
            outputs.push(TensorDesc {
                tensor: value_id,
                shape: shape.into(),
                dtype,
                payload: Some(value_id),
            });
            value_id += 1;
        }
        self.replays.bind(py).try_borrow_mut()?.push(PendingOp {
            func: func.clone().unbind(),
            name: description.python_name.clone_ref(py),
            args: template,
            keywords: keyword_template,
            first_value: first_value_id,
            outputs: u32::try_from(value_id - first_value_id).map_err(|_| {
                pyo3::exceptions::PyValueError::new_err("an op returned more than 2^32 tensors")
            })?,
            multiple,
        })?;
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
            first_value_id,
            next_value_id: value_id,
        }))
    }
}

/// A non-tensor argument as it is when the op runs: lists and dicts (and tuples holding them)
/// are copied, so a caller that edits its `shape` list after the call (MLX's and torch's
/// upsampling code does) cannot change what replay passes. The native twin of the kit's
/// `adapter_kit.replay.snapshot`; immutable values are kept as they are.
fn snapshot(argument: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let py = argument.py();
    if let Ok(list) = argument.cast::<PyList>() {
        let items = list
            .iter()
            .map(|item| snapshot(&item))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(PyList::new(py, items)?.into_any().unbind());
    }
    if let Ok(dict) = argument.cast::<PyDict>() {
        let copy = PyDict::new(py);
        for (key, value) in dict.iter() {
            copy.set_item(key, snapshot(&value)?)?;
        }
        return Ok(copy.into_any().unbind());
    }
    if let Ok(tuple) = argument.cast::<PyTuple>() {
        let holds_mutable = tuple.iter().any(|item| {
            item.is_instance_of::<PyList>()
                || item.is_instance_of::<PyDict>()
                || item.is_instance_of::<PyTuple>()
        });
        if holds_mutable {
            let items = tuple
                .iter()
                .map(|item| snapshot(&item))
                .collect::<PyResult<Vec<_>>>()?;
            return Ok(PyTuple::new(py, items)?.into_any().unbind());
        }
    }
    Ok(argument.clone().unbind())
}
