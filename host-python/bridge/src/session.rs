//! A capture in progress. The adapter calls one method per event (cheap: the event is appended
//! to a buffer in Rust); `flush` sends the buffer to the core as one postcard batch and returns
//! the selection decisions it made possible, each as `(value, selected)` where `value` is the
//! adapter's own tensor id of the op's value. The events are built from `torchlens-schema`
//! alone: the extension never links the core natively, it only talks to the component.

use crate::engine::SharedInstance;
use crate::errors::IntoPyResult;
use crate::trace::Trace;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use smallvec::SmallVec;
use torchlens_host_runtime::ResourceAny;
use torchlens_schema::dtype::Dtype;
use torchlens_schema::events::{
    ArgRef, ModuleDecl, OpEvent, ParamDecl, RawEvent, SourceLocation, TensorDesc,
};
use torchlens_schema::{BatchEncoder, EncodedEvents};

/// Events built once and sent again by later sessions: a model's declaration (its modules and
/// parameters), kept by the adapter while the model is unchanged, so a trace of the same model
/// pays one call instead of one per module and parameter.
#[pyclass(module = "torchlens._native", frozen)]
pub struct PreparedEvents {
    events: EncodedEvents,
}

/// A capture session inside the core plus the events not yet sent.
#[pyclass(module = "torchlens._native")]
pub struct Session {
    instance: SharedInstance,
    handle: Option<ResourceAny>,
    /// Encoded as they arrive (see [`BatchEncoder`]).
    pending: BatchEncoder,
    /// Decisions from events `mark_stopped` sent on its own; the next `flush` or `finish`
    /// returns them first.
    held: Vec<(u64, bool)>,
}

impl Session {
    pub fn new(instance: SharedInstance, handle: ResourceAny) -> Self {
        Self {
            instance,
            handle: Some(handle),
            pending: BatchEncoder::with_capacity(16 * 1024),
            held: Vec::new(),
        }
    }

    /// Sends the pending events as one batch; returns the decisions it made possible.
    fn send_pending(&mut self, py: Python<'_>) -> PyResult<Vec<(u64, bool)>> {
        let handle = self.handle()?;
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        let batch = self.pending.take_batch();
        let decisions = self
            .instance
            .with(|core| core.ingest(handle, &batch))
            .py_result(py)?;
        Ok(decisions
            .into_iter()
            .map(|decision| (decision.value, decision.selected))
            .collect())
    }

    /// Appends one event (the native module hooks report calls through this).
    pub fn push_event(&mut self, event: RawEvent) {
        self.pending.push(&event);
    }

    fn handle(&self) -> PyResult<ResourceAny> {
        self.handle
            .ok_or_else(|| PyRuntimeError::new_err("this capture session is finished"))
    }
}

fn value(tensor: u64, shape: Vec<u64>, dtype: &str, payload: Option<u64>) -> TensorDesc {
    TensorDesc {
        tensor,
        shape: shape.into(),
        dtype: Dtype::from_name(dtype),
        payload,
    }
}

#[pymethods]
impl Session {
    /// Declares a module object under its addresses (primary first).
    fn module(
        &mut self,
        id: u32,
        addresses: Vec<String>,
        class_name: String,
        container: bool,
        training: bool,
    ) {
        self.pending.push(&RawEvent::Module(ModuleDecl {
            id,
            addresses,
            class_name,
            container,
            training,
        }));
    }

    /// Declares a parameter.
    fn param(
        &mut self,
        tensor: u64,
        address: String,
        module: u32,
        shape: Vec<u64>,
        dtype: &str,
        trainable: bool,
    ) {
        self.pending.push(&RawEvent::Param(ParamDecl {
            tensor,
            address,
            module,
            shape,
            dtype: Dtype::from_name(dtype),
            trainable,
        }));
    }

    /// Declares a whole model at once: `modules` as `module` takes them, then `params` as
    /// `param` does. Returns the events, for `replay` in a later session of the same model.
    #[allow(clippy::type_complexity)]
    fn declare_model(
        &mut self,
        modules: Vec<(u32, Vec<String>, String, bool, bool)>,
        params: Vec<(u64, String, u32, Vec<u64>, String, bool)>,
    ) -> PreparedEvents {
        let mut events = Vec::with_capacity(modules.len() + params.len());
        for (id, addresses, class_name, container, training) in modules {
            events.push(RawEvent::Module(ModuleDecl {
                id,
                addresses,
                class_name,
                container,
                training,
            }));
        }
        for (tensor, address, module, shape, dtype, trainable) in params {
            events.push(RawEvent::Param(ParamDecl {
                tensor,
                address,
                module,
                shape,
                dtype: Dtype::from_name(&dtype),
                trainable,
            }));
        }
        let events = EncodedEvents::encode(&events);
        self.pending.extend(&events);
        PreparedEvents { events }
    }

    /// Appends events prepared by an earlier session (`declare_model`).
    fn replay(&mut self, prepared: &PreparedEvents) {
        self.pending.extend(&prepared.events);
    }

    /// A model input.
    #[pyo3(signature = (name, tensor, shape, dtype, payload=None))]
    fn input(
        &mut self,
        name: String,
        tensor: u64,
        shape: Vec<u64>,
        dtype: &str,
        payload: Option<u64>,
    ) {
        self.pending.push(&RawEvent::Input {
            name,
            value: value(tensor, shape, dtype, payload),
        });
    }

    /// A module buffer read during the forward.
    #[pyo3(signature = (address, tensor, shape, dtype, payload=None))]
    fn buffer(
        &mut self,
        address: String,
        tensor: u64,
        shape: Vec<u64>,
        dtype: &str,
        payload: Option<u64>,
    ) {
        self.pending.push(&RawEvent::Buffer {
            address,
            value: value(tensor, shape, dtype, payload),
        });
    }

    /// A value read from outside the traced call.
    #[pyo3(signature = (tensor, shape, dtype, payload=None))]
    fn constant(&mut self, tensor: u64, shape: Vec<u64>, dtype: &str, payload: Option<u64>) {
        self.pending.push(&RawEvent::Constant {
            value: value(tensor, shape, dtype, payload),
        });
    }

    /// One op. `args` are `(tensor, position)` pairs; `outputs` are
    /// `(tensor, shape, dtype, payload)`; `source` is `(file, line, function)`.
    #[pyo3(signature = (func, args, outputs, in_place=false, attributes=Vec::new(), source=None))]
    fn op(
        &mut self,
        func: String,
        args: Vec<(u64, u32)>,
        outputs: Vec<(u64, Vec<u64>, String, Option<u64>)>,
        in_place: bool,
        attributes: Vec<(String, String)>,
        source: Option<(String, u32, String)>,
    ) {
        let args: SmallVec<[ArgRef; 2]> = args
            .into_iter()
            .map(|(tensor, position)| ArgRef {
                tensor,
                position,
                keyword: None,
            })
            .collect();
        let outputs = outputs
            .into_iter()
            .map(|(tensor, shape, dtype, payload)| value(tensor, shape, &dtype, payload))
            .collect();
        self.pending.push(&RawEvent::Op(OpEvent {
            func,
            args,
            outputs,
            in_place,
            attributes,
            source: source.map(|(file, line, function)| SourceLocation {
                file,
                line,
                function,
            }),
        }));
    }

    /// A module call starts.
    fn enter(&mut self, module: u32) {
        self.pending.push(&RawEvent::Enter { module });
    }

    /// A module call ends, returning these values.
    fn exit(&mut self, module: u32, outputs: Vec<u64>) {
        self.pending.push(&RawEvent::Exit { module, outputs });
    }

    /// A model output.
    fn output(&mut self, name: String, tensor: u64) {
        self.pending.push(&RawEvent::Output { name, tensor });
    }

    /// A backend fact about the whole trace.
    fn extra(&mut self, key: String, value: String) {
        self.pending.push(&RawEvent::Extra { key, value });
    }

    /// An edit applied to the value `value` (an `intervene=` rule fired); the core records it
    /// on the op that produced the value (an unknown value fails the next flush with
    /// `events_edit_unknown_value`).
    fn edit(&mut self, value: u64, rule: String, action: String, timing: String) {
        self.pending.push(&RawEvent::Edit {
            value,
            rule,
            action,
            timing,
        });
    }

    /// Number of events not yet sent.
    fn pending_events(&self) -> usize {
        self.pending.len()
    }

    /// Sends the pending events; returns `[(value, selected)]` decisions made possible, keyed
    /// by the adapter's tensor id of each decided op's value.
    fn flush(&mut self, py: Python<'_>) -> PyResult<Vec<(u64, bool)>> {
        let fresh = self.send_pending(py)?;
        let mut decisions = std::mem::take(&mut self.held);
        decisions.extend(fresh);
        Ok(decisions)
    }

    /// Marks the capture as stopped early at the ops that produced the values `frontier`
    /// (adapter tensor ids). Pending events are sent first, so the frontier may name values
    /// reported since the last flush; their decisions come back with the next flush or
    /// `finish`. An unknown value raises the typed `events_unknown_frontier_value` error.
    fn mark_stopped(&mut self, py: Python<'_>, reason: String, frontier: Vec<u64>) -> PyResult<()> {
        let handle = self.handle()?;
        let decisions = self.send_pending(py)?;
        self.held.extend(decisions);
        self.instance
            .with(|core| core.mark_stopped(handle, &reason, &frontier))
            .py_result(py)
    }

    /// The session's selector compiled for the adapter's hot path, against the modules sent so
    /// far (send them first with `flush`): `(nodes, root)` or None without a plan. Nodes are
    /// tuples led by their kind: `("func", name, op_type)`, `("in_module" | "module_output",
    /// module ids, root call matches, call number or None)`, `("label", op_type)`,
    /// `("label_contains", needle)`, `("and" | "or", children)`, `("not", child)`,
    /// `("followed_by", first, within)`, `("preceded_by", first)`, `("graph",)`.
    fn live_plan<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let handle = self.handle()?;
        let plan = self
            .instance
            .with(|core| core.live_plan(handle))
            .py_result(py)?;
        plan.map(|plan| crate::convert::live_plan(py, plan))
            .transpose()
    }

    /// Registers a rule (a static selector arena asked about op by op); returns its index.
    fn add_rule(&mut self, py: Python<'_>, selector: &Bound<'_, PyAny>) -> PyResult<u32> {
        let handle = self.handle()?;
        let selector = crate::convert::selector(selector)?;
        self.instance
            .with(|core| core.add_rule(handle, &selector))
            .py_result(py)
    }

    /// A rule compiled for the hot path against the modules sent so far: `(nodes, root)` as
    /// `live_plan` returns.
    fn rule_plan<'py>(&mut self, py: Python<'py>, rule: u32) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle()?;
        let plan = self
            .instance
            .with(|core| core.rule_plan(handle, rule))
            .py_result(py)?;
        crate::convert::live_plan(py, plan)
    }

    /// Whether a rule matches the op that produced `value` as far as the events sent so far
    /// tell (send pending events first with `flush`); None while they cannot.
    fn rule_matches(&mut self, py: Python<'_>, rule: u32, value: u64) -> PyResult<Option<bool>> {
        let handle = self.handle()?;
        self.instance
            .with(|core| core.rule_matches(handle, rule, value))
            .py_result(py)
    }

    /// Marks the capture as possibly incomplete.
    fn mark_unverified(&mut self, py: Python<'_>, reason: String) -> PyResult<()> {
        let handle = self.handle()?;
        self.instance
            .with(|core| {
                core.call_infallible(|guest, store| {
                    guest
                        .capture_session()
                        .call_mark_unverified(store, handle, &reason)
                })
            })
            .py_result(py)
    }

    /// Sends what is pending and finalizes: `(Trace, last decisions)`, decisions as
    /// `(value, selected)` like `flush`.
    fn finish(&mut self, py: Python<'_>) -> PyResult<(Trace, Vec<(u64, bool)>)> {
        let mut decisions = self.flush(py)?;
        let handle = self
            .handle
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this capture session is finished"))?;
        let (trace, last) = self
            .instance
            .with(|core| core.finish(handle))
            .py_result(py)?;
        decisions.extend(
            last.into_iter()
                .map(|decision| (decision.value, decision.selected)),
        );
        Ok((Trace::new(self.instance.clone(), trace), decisions))
    }

    /// Abandons the session (the forward raised): frees it inside the core.
    fn abandon(&mut self) {
        self.pending.clear();
        self.held.clear();
        if let Some(handle) = self.handle.take() {
            let _ = self.instance.lock().drop_resource(handle);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.abandon();
    }
}
