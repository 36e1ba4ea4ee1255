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

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::{PyTraverseError, PyVisit};
use pyo3::types::{PyDict, PyString, PyTuple};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use torchlens_schema::chunked_table::ChunkedTable;

/// One argument of a recorded op: a value passed as it is, or a tensor named by its value id.
pub enum Argument {
    /// Anything that is not a tensor (held as the op received it, as the template holds it).
    Value(Py<PyAny>),
    /// A tensor: the value id the capture gave it.
    Tensor(u64),
}

/// An op's positional arguments as the recorder collects them (inline: no heap block per op
/// while the forward runs; three fit `x + 1`, `relu(x)` and `linear(x, weight, bias)`).
pub type Arguments = SmallVec<[Argument; 3]>;

/// One recorded op's replay facts as the recorder hands them over ([`PendingReplays::push`]
/// stores them packed).
pub struct PendingOp {
    pub func: Py<PyAny>,
    /// Interned once per name (a Python string, not a heap block per op).
    pub name: Py<PyString>,
    pub args: Arguments,
    /// The keyword arguments (name, argument), in call order; most ops have none.
    pub keywords: Vec<(Py<PyAny>, Argument)>,
    /// The value id of its first output; the others follow in order.
    pub first_value: u64,
    pub outputs: u32,
    /// Whether the op returned several tensors (each record then names its output's index).
    pub multiple: bool,
}

/// An argument as the store keeps it: 8 bytes, where an [`Argument`] takes 16 (its tag pads the
/// `u64`), and a long capture keeps one or two per op. A tensor is its value id shifted up with
/// the low bit set; anything else is its index into [`PendingReplays::values`] shifted up.
#[derive(Clone, Copy)]
struct StoredArgument(u64);

/// A [`StoredArgument`] read back.
enum StoredKind {
    Tensor(u64),
    Value(usize),
}

impl StoredArgument {
    /// The largest value id a stored argument can name (ids count up from 1 per capture).
    const LARGEST_ID: u64 = u64::MAX >> 1;

    fn tensor(value_id: u64) -> Self {
        Self((value_id << 1) | 1)
    }

    fn value(index: usize) -> Self {
        Self((index as u64) << 1)
    }

    fn unpack(self) -> StoredKind {
        if self.0 & 1 == 1 {
            StoredKind::Tensor(self.0 >> 1)
        } else {
            StoredKind::Value((self.0 >> 1) as usize)
        }
    }
}

/// One op as the store keeps it until replay (24 bytes on 64-bit: a long capture keeps one per
/// op). Its callable is an index into the store's distinct callables, and its arguments are the
/// next `arguments` entries of the store's one argument list (keywords likewise): replay reads
/// the ops in order, so no op needs to say where its arguments start.
struct StoredOp {
    /// The value id of its first output; the others follow in order.
    first_value: u64,
    /// Index into [`PendingReplays::callables`].
    callable: u32,
    outputs: u32,
    arguments: u32,
    keywords: u16,
    multiple: bool,
}

// A long capture keeps one record per op until replay: keep the record from growing unnoticed.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<StoredOp>() <= 24);

/// The replay records of one capture not made yet (see the module docs).
///
/// Per op it keeps a [`StoredOp`] and its arguments in two flat lists of fixed-size chunks
/// ([`ChunkedTable`]): not a heap block per op (per-op blocks allocated while the forward frees
/// activations around them fragmented glibc's heap: a capture's peak memory came out several
/// times higher in some runs), and no list that doubles by copying (each outgrown copy stayed
/// resident in the heap: 25-35 bytes an op on `scale.py`'s loop). That loop kept 96 bytes an op
/// as one record with its arguments inline; packed, an op of one or two arguments takes 32–48.
#[pyclass(module = "torchlens._native")]
pub struct PendingReplays {
    ops: ChunkedTable<StoredOp>,
    /// Every op's positional arguments, op after op.
    arguments: ChunkedTable<StoredArgument>,
    /// Every op's keyword arguments (name, argument), op after op.
    keywords: ChunkedTable<(Py<PyAny>, StoredArgument)>,
    /// The arguments that are not tensors, in the order the ops passed them.
    values: ChunkedTable<Py<PyAny>>,
    /// The distinct (callable, name) pairs the ops named, and where each sits (keyed by the
    /// two objects' addresses: the list holds both, so an address cannot be reused meanwhile).
    callables: Vec<(Py<PyAny>, Py<PyString>)>,
    callable_index: HashMap<(usize, usize), u32>,
    /// Value id → parameter (a parameter argument is a `ParamRef`, any other a `ValueRef`).
    params: Py<PyDict>,
    value_ref: Py<PyAny>,
    param_ref: Py<PyAny>,
    replay_record: Py<PyAny>,
}

impl PendingReplays {
    /// Keeps one op's facts.
    pub fn push(&mut self, op: PendingOp) -> PyResult<()> {
        let too_many = |what: &str| PyValueError::new_err(format!("an op took more than {what}"));
        let arguments = u32::try_from(op.args.len()).map_err(|_| too_many("2^32 arguments"))?;
        let keywords =
            u16::try_from(op.keywords.len()).map_err(|_| too_many("65535 keyword arguments"))?;
        let all_arguments = op
            .args
            .iter()
            .chain(op.keywords.iter().map(|(_, argument)| argument));
        for argument in all_arguments {
            if let Argument::Tensor(value_id) = argument {
                if *value_id > StoredArgument::LARGEST_ID {
                    return Err(PyValueError::new_err(format!(
                        "value id {value_id} is too large to keep for replay (at most 2^63 - 1)"
                    )));
                }
            }
        }
        let key = (op.func.as_ptr() as usize, op.name.as_ptr() as usize);
        let callable = match self.callable_index.get(&key) {
            Some(&index) => index,
            None => {
                let index = u32::try_from(self.callables.len())
                    .map_err(|_| too_many("2^32 distinct callables"))?;
                self.callables.push((op.func, op.name));
                self.callable_index.insert(key, index);
                index
            }
        };
        for argument in op.args {
            let stored = self.store(argument);
            self.arguments.push(stored);
        }
        for (key, argument) in op.keywords {
            let stored = self.store(argument);
            self.keywords.push((key, stored));
        }
        self.ops.push(StoredOp {
            first_value: op.first_value,
            callable,
            outputs: op.outputs,
            arguments,
            keywords,
            multiple: op.multiple,
        });
        Ok(())
    }

    fn reference<'py>(&self, py: Python<'py>, value: u64) -> PyResult<Bound<'py, PyAny>> {
        let class = if self.params.bind(py).contains(value)? {
            &self.param_ref
        } else {
            &self.value_ref
        };
        class.bind(py).call1((value,))
    }

    /// `argument` as the store keeps it (its value id checked by `push`).
    fn store(&mut self, argument: Argument) -> StoredArgument {
        match argument {
            Argument::Tensor(value_id) => StoredArgument::tensor(value_id),
            Argument::Value(value) => {
                self.values.push(value);
                StoredArgument::value(self.values.len() - 1)
            }
        }
    }

    fn argument<'py>(
        &self,
        py: Python<'py>,
        argument: StoredArgument,
    ) -> PyResult<Bound<'py, PyAny>> {
        match argument.unpack() {
            StoredKind::Tensor(value_id) => self.reference(py, value_id),
            StoredKind::Value(index) => match self.values.get(index) {
                Some(value) => Ok(value.bind(py).clone()),
                None => Err(PyRuntimeError::new_err(format!(
                    "replay facts name argument {index}, which the store does not hold"
                ))),
            },
        }
    }

    fn clear(&mut self) {
        self.ops.clear();
        self.arguments.clear();
        self.keywords.clear();
        self.values.clear();
        self.callables.clear();
        self.callable_index.clear();
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
            ops: ChunkedTable::new(),
            arguments: ChunkedTable::new(),
            keywords: ChunkedTable::new(),
            values: ChunkedTable::new(),
            callables: Vec::new(),
            callable_index: HashMap::default(),
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
        for (func, name) in &self.callables {
            visit.call(func)?;
            visit.call(name)?;
        }
        for value in &self.values {
            visit.call(value)?;
        }
        for (key, _) in &self.keywords {
            visit.call(key)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.clear();
    }

    /// How many ops wait for their records.
    fn __len__(&self) -> usize {
        self.ops.len()
    }

    /// Makes every pending op's records and puts them in `records` (value id → `ReplayRecord`),
    /// as the Python path would have when the op ran; nothing is pending afterwards.
    fn fill(&mut self, py: Python<'_>, records: &Bound<'_, PyDict>) -> PyResult<()> {
        let replay_record = self.replay_record.bind(py);
        let mut arguments = self.arguments.iter();
        let mut keywords = self.keywords.iter();
        for op in &self.ops {
            let template = arguments
                .by_ref()
                .take(op.arguments as usize)
                .map(|argument| self.argument(py, *argument))
                .collect::<PyResult<Vec<_>>>()?;
            let template = PyTuple::new(py, template)?;
            // No keywords: None, which the record takes as its shared empty mapping.
            let keyword_template = if op.keywords == 0 {
                None
            } else {
                let found = PyDict::new(py);
                for (key, argument) in keywords.by_ref().take(usize::from(op.keywords)) {
                    found.set_item(key, self.argument(py, *argument)?)?;
                }
                Some(found)
            };
            let (func, name) = &self.callables[op.callable as usize];
            for index in 0..op.outputs {
                let output_index = if op.multiple { Some(index) } else { None };
                let record = replay_record.call1((
                    func,
                    name.bind(py),
                    &template,
                    &keyword_template,
                    output_index,
                ))?;
                records.set_item(op.first_value + u64::from(index), record)?;
            }
        }
        self.clear();
        Ok(())
    }
}
