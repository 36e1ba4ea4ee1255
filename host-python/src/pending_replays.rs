//! Replay records of a full torch capture, kept as Rust data until replay asks for them.
//!
//! Every value a capture records gets a `ReplayRecord` (how to re-run the op that produced it:
//! the callable, and its arguments with each tensor named by its value id as a `ValueRef` or
//! `ParamRef`). Replay reads them only when a trace is validated or forked, yet making them as
//! Python objects cost every op a record, a reference per tensor argument, a tuple and a dict.
//! The native recorder (`held_op`) keeps instead, per op, the callable, its name, the
//! arguments that are not tensors and the value ids of those that are; [`PendingReplays::fill`]
//! makes the same Python objects the Python path makes (`Capture.record`,
//! `adapter_kit/replay.py`'s `argument_template`) the first time anything reads the records
//! (`backends/torch/replay_records.py`).

use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyString, PyTuple};
use smallvec::SmallVec;

/// One argument of a recorded op: a value passed as it is, or a tensor named by its value id.
pub enum Argument {
    /// Anything that is not a tensor (held as the op received it, as the template holds it).
    Value(Py<PyAny>),
    /// A tensor: the value id the capture gave it.
    Tensor(u64),
}

/// Arguments kept inline: an op's facts live until replay reads them, and a heap block per op
/// for a few arguments, allocated while the forward frees activations around it, fragmented
/// glibc's heap (a capture's peak memory came out several times higher in some runs). Three fit
/// `x + 1`, `relu(x)` and `linear(x, weight, bias)`; a convolution's seven spill either way.
pub type Arguments = SmallVec<[Argument; 3]>;

/// The keyword arguments of one op (name, argument), when it had any.
pub struct KeywordArguments(Vec<(Py<PyAny>, Argument)>);

/// Keyword arguments behind one thin pointer: most ops have none, and each op's facts stay until
/// replay (8 bytes a record instead of an empty `Vec`'s 24).
pub type Keywords = Option<Box<KeywordArguments>>;

/// One recorded op's replay facts (96 bytes on 64-bit: a long capture keeps one per op).
pub struct PendingOp {
    pub func: Py<PyAny>,
    /// Interned once per name (a Python string, not a heap block per op; see [`Arguments`]).
    pub name: Py<PyString>,
    pub args: Arguments,
    pub keywords: Keywords,
    /// The value id of its first output; the others follow in order.
    pub first_value: u64,
    pub outputs: u32,
    /// Whether the op returned several tensors (each record then names its output's index).
    pub multiple: bool,
}

// A long capture keeps one record per op until replay: keep the record from growing unnoticed.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<PendingOp>() <= 96);

/// The keywords of an op as [`PendingOp`] keeps them (none: no allocation).
pub fn keywords(found: Vec<(Py<PyAny>, Argument)>) -> Keywords {
    (!found.is_empty()).then(|| Box::new(KeywordArguments(found)))
}

/// The replay records of one capture not made yet (see the module docs).
#[pyclass(module = "torchlens._native")]
pub struct PendingReplays {
    ops: Vec<PendingOp>,
    /// Value id → parameter (a parameter argument is a `ParamRef`, any other a `ValueRef`).
    params: Py<PyDict>,
    value_ref: Py<PyAny>,
    param_ref: Py<PyAny>,
    replay_record: Py<PyAny>,
}

impl PendingReplays {
    /// Keeps one op's facts.
    pub fn push(&mut self, op: PendingOp) {
        self.ops.push(op);
    }

    fn reference<'py>(&self, py: Python<'py>, value: u64) -> PyResult<Bound<'py, PyAny>> {
        let class = if self.params.bind(py).contains(value)? {
            &self.param_ref
        } else {
            &self.value_ref
        };
        class.bind(py).call1((value,))
    }

    fn argument<'py>(&self, py: Python<'py>, argument: &Argument) -> PyResult<Bound<'py, PyAny>> {
        match argument {
            Argument::Value(value) => Ok(value.bind(py).clone()),
            Argument::Tensor(value) => self.reference(py, *value),
        }
    }
}

#[pymethods]
impl PendingReplays {
    #[new]
    fn new(
        params: Py<PyDict>,
        value_ref: Py<PyAny>,
        param_ref: Py<PyAny>,
        replay_record: Py<PyAny>,
    ) -> Self {
        Self {
            ops: Vec::new(),
            params,
            value_ref,
            param_ref,
            replay_record,
        }
    }

    /// The Python objects held, for the cyclic collector.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.params)?;
        visit.call(&self.value_ref)?;
        visit.call(&self.param_ref)?;
        visit.call(&self.replay_record)?;
        for op in &self.ops {
            visit.call(&op.func)?;
            let keywords = op
                .keywords
                .as_deref()
                .map_or(&[][..], |found| found.0.as_slice());
            for argument in op
                .args
                .iter()
                .chain(keywords.iter().map(|(_, value)| value))
            {
                if let Argument::Value(value) = argument {
                    visit.call(value)?;
                }
            }
            for (key, _) in keywords {
                visit.call(key)?;
            }
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.ops.clear();
    }

    /// How many ops wait for their records.
    fn __len__(&self) -> usize {
        self.ops.len()
    }

    /// Makes every pending op's records and puts them in `records` (value id → `ReplayRecord`),
    /// as the Python path would have when the op ran; nothing is pending afterwards.
    fn fill(&mut self, py: Python<'_>, records: &Bound<'_, PyDict>) -> PyResult<()> {
        let replay_record = self.replay_record.bind(py);
        for op in &self.ops {
            let template = op
                .args
                .iter()
                .map(|argument| self.argument(py, argument))
                .collect::<PyResult<Vec<_>>>()?;
            let template = PyTuple::new(py, template)?;
            // No keywords: None, which the record takes as its shared empty mapping.
            let keyword_template = match &op.keywords {
                None => None,
                Some(found) => {
                    let keywords = PyDict::new(py);
                    for (key, argument) in &found.0 {
                        keywords.set_item(key, self.argument(py, argument)?)?;
                    }
                    Some(keywords)
                }
            };
            for index in 0..op.outputs {
                let output_index = if op.multiple { Some(index) } else { None };
                let record = replay_record.call1((
                    &op.func,
                    op.name.bind(py),
                    &template,
                    &keyword_template,
                    output_index,
                ))?;
                records.set_item(op.first_value + u64::from(index), record)?;
            }
        }
        self.ops.clear();
        Ok(())
    }
}
