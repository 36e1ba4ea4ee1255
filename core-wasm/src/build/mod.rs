//! Turns raw capture events into a [`Trace`]: resolves values to the ops that produced them,
//! tracks the module call stack, groups repeated calls into passes, assigns labels, and at
//! finalize computes children, module tree and hop distances.
//!
//! Layers are assigned as ops arrive (a layer's label is fixed at its first occurrence), so a
//! selector plan can match on labels during capture; `:pass` suffixes are added at finalize,
//! once each layer's number of passes is known.

mod distances;
mod layer_index;
pub mod naming;
pub mod repeat_cache;
mod session;
mod value_producers;

pub use session::{CaptureSession, ValueDecision};

use crate::dtype::Dtype;
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::events::{
    ArgRef, EventStream, ModuleDecl, ModuleId, OpEvent, ParamDecl, RawEvent, TensorDesc, TensorId,
};
use crate::model::{
    CaptureStatus, Edge, Edges, EditRecord, FuncName, Layer, LayerTable, Module, ModuleCall, Op,
    OpDetails, OpId, OpIdList, OpKind, OpTable, PackedDistances, Param, ParamList, Shape,
    SharedShapes, SharedText, SiteKey, SplitId, Trace, TraceOptions,
};
use layer_index::{SiteLayers, StructuralKey, StructuralLayers};
use value_producers::ValueProducers;
// Keys here are small integers and adapter-chosen ids, never attacker-chosen text sent to a
// server, so the fast non-DoS-resistant hash is the right trade.
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Reason recorded on the trace when an op read a value nobody declared.
pub const UNREGISTERED_VALUE_REASON: &str = "unregistered_value_read";

/// Upper bound on ops in one trace: ids are `u32` and the codec bounds counts by it.
pub const MAX_OPS: usize = u32::MAX as usize - 1;

/// What produced a runtime value.
#[derive(Debug, Clone, Copy)]
enum Producer {
    Op(OpId),
    Param(u32),
}

/// One open module call on the stack.
struct Frame {
    call: u32,
    module_id: Option<ModuleId>,
    /// How many ops of each (function, output slot) ran directly in this call so far.
    ordinals: HashMap<(u32, u32), u32>,
}

/// Builds a trace from batches of raw events.
pub struct TraceBuilder {
    trace: Trace,
    func_index: HashMap<String, u32>,
    producers: ValueProducers,
    module_index: HashMap<ModuleId, u32>,
    stack: Vec<Frame>,
    site_layers: SiteLayers,
    structural_layers: StructuralLayers,
    type_counters: HashMap<String, u32>,
    /// The files and function names ops named so far, one shared copy of each.
    shared_text: SharedText,
    shared_shapes: SharedShapes,
    /// The empty label every op carries until `finish` labels it (one, shared: no allocation
    /// per op).
    no_label: Arc<str>,
    root_entered: bool,
}

fn event_error(code: &'static str, message: String) -> CoreError {
    CoreError::new(
        ErrorKind::InvalidEvents,
        code,
        message,
        "fix the adapter so it reports events in the documented order",
    )
}

impl TraceBuilder {
    /// A builder with the root module `self` open.
    pub fn new(options: TraceOptions) -> Self {
        let root = Module {
            all_addresses: vec!["self".to_string()],
            class_name: String::new(),
            container: false,
            training: false,
            parent: None,
            children: Vec::new(),
            params: Vec::new(),
            calls: vec![0],
        };
        let root_call = ModuleCall {
            module: 0,
            call_number: 1,
            parent_call: None,
            first_op: 0,
            end_op: OpId::MAX,
            outputs: Vec::new(),
        };
        Self {
            trace: Trace {
                options,
                func_names: Vec::new(),
                ops: OpTable::new(),
                layers: LayerTable::new(),
                modules: vec![root],
                module_calls: vec![root_call],
                params: Vec::new(),
                inputs: Vec::new(),
                outputs: Vec::new(),
                capture: CaptureStatus {
                    verified: true,
                    ..CaptureStatus::default()
                },
                extras: Vec::new(),
                backward: None,
            },
            func_index: HashMap::default(),
            producers: ValueProducers::default(),
            module_index: HashMap::default(),
            stack: vec![Frame {
                call: 0,
                module_id: None,
                ordinals: HashMap::default(),
            }],
            site_layers: SiteLayers::default(),
            structural_layers: StructuralLayers::default(),
            type_counters: HashMap::default(),
            shared_text: SharedText::default(),
            shared_shapes: SharedShapes::default(),
            no_label: Arc::from(""),
            root_entered: false,
        }
    }

    /// The adapter's module ids with the index each has in `Trace::modules`.
    pub fn module_ids(&self) -> impl Iterator<Item = (ModuleId, u32)> + Clone + '_ {
        self.module_index.iter().map(|(id, index)| (*id, *index))
    }

    /// The trace as built so far: ops carry their layer and pass but not yet their final label;
    /// calls still open have `end_op == OpId::MAX`.
    pub fn partial(&self) -> &Trace {
        &self.trace
    }

    /// Decodes a postcard batch and ingests it.
    pub fn ingest_postcard(&mut self, bytes: &[u8]) -> CoreResult<()> {
        let stream = EventStream::new(bytes)?;
        let hint = (stream.len_hint() as usize).min(bytes.len() / 8);
        // Each op event adds about one value and one site: sized once instead of rehashed as
        // they grow.
        self.producers.reserve(&self.trace, hint);
        self.site_layers.reserve(&self.trace, hint);
        for event in stream {
            self.ingest_one(event?)?;
        }
        Ok(())
    }

    /// Ingests events in capture order.
    pub fn ingest(&mut self, events: impl IntoIterator<Item = RawEvent>) -> CoreResult<()> {
        for event in events {
            self.ingest_one(event)?;
        }
        Ok(())
    }

    fn ingest_one(&mut self, event: RawEvent) -> CoreResult<()> {
        match event {
            RawEvent::Module(declaration) => self.declare_module(declaration),
            RawEvent::Param(declaration) => self.declare_param(declaration),
            RawEvent::Input { name, value } => {
                let id = self.push_value_op(OpKind::Input, "input", Some(name), value)?;
                self.trace.inputs.push(id);
                Ok(())
            }
            RawEvent::Buffer { address, value } => self
                .push_value_op(OpKind::Buffer, "buffer", Some(address), value)
                .map(drop),
            RawEvent::Constant { value } => self
                .push_value_op(OpKind::Constant, "constant", None, value)
                .map(drop),
            RawEvent::Op(op) => self.push_op(op),
            RawEvent::Enter { module } => self.enter(module),
            RawEvent::Exit { module, outputs } => self.exit(module, &outputs),
            RawEvent::Output { name, tensor } => self.push_output(name, tensor),
            RawEvent::Extra { key, value } => {
                self.trace.extras.push((key, value));
                Ok(())
            }
            RawEvent::Edit {
                value,
                rule,
                action,
                timing,
            } => {
                let op = self.producing_op(value, "events_edit_unknown_value", "an edit")?;
                self.trace.ops[op as usize].edit_details(|details| {
                    details.edits.push(EditRecord {
                        rule,
                        action,
                        timing,
                    })
                });
                Ok(())
            }
        }
    }

    /// The op that produced the adapter's value `value`, or a typed `invalid-events` error
    /// with `code` when no op did (never reported, or a parameter).
    fn producing_op(&self, value: TensorId, code: &'static str, what: &str) -> CoreResult<OpId> {
        match self.producers.get(&self.trace, value) {
            Some(Producer::Op(op)) => Ok(op),
            Some(Producer::Param(_)) => Err(event_error(
                code,
                format!("{what} names value {value}, which is a parameter, not an op's value"),
            )),
            None => Err(event_error(
                code,
                format!("{what} names value {value}, which no reported op produced"),
            )),
        }
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.func_index.get(name) {
            return id;
        }
        let id = self.trace.func_names.len() as u32;
        self.trace.func_names.push(FuncName {
            name: name.to_string(),
            op_type: naming::op_type(name).into(),
        });
        self.func_index.insert(name.to_string(), id);
        id
    }

    fn declare_module(&mut self, declaration: ModuleDecl) -> CoreResult<()> {
        if declaration.addresses.is_empty() {
            return Err(event_error(
                "events_module_without_address",
                format!("module {} was declared with no address", declaration.id),
            ));
        }
        if self.module_index.contains_key(&declaration.id) {
            return Err(event_error(
                "events_duplicate_module",
                format!("module {} was declared twice", declaration.id),
            ));
        }
        let is_root = declaration.addresses[0] == "self";
        let index = if is_root {
            let root = &mut self.trace.modules[0];
            root.class_name = declaration.class_name;
            root.training = declaration.training;
            root.all_addresses = declaration.addresses;
            0
        } else {
            self.trace.modules.push(Module {
                all_addresses: declaration.addresses,
                class_name: declaration.class_name,
                container: declaration.container,
                training: declaration.training,
                parent: None,
                children: Vec::new(),
                params: Vec::new(),
                calls: Vec::new(),
            });
            (self.trace.modules.len() - 1) as u32
        };
        self.module_index.insert(declaration.id, index);
        Ok(())
    }

    fn module(&self, id: ModuleId) -> CoreResult<u32> {
        self.module_index.get(&id).copied().ok_or_else(|| {
            event_error(
                "events_unknown_module",
                format!("module {id} was used before it was declared"),
            )
        })
    }

    fn declare_param(&mut self, declaration: ParamDecl) -> CoreResult<()> {
        let module = self.module(declaration.module)?;
        let index = self.trace.params.len() as u32;
        self.trace.params.push(Param {
            address: declaration.address,
            module,
            shape: declaration.shape,
            dtype: declaration.dtype,
            trainable: declaration.trainable,
            users: Vec::new(),
        });
        self.trace.modules[module as usize].params.push(index);
        self.producers
            .insert_param(&self.trace, declaration.tensor, index);
        Ok(())
    }

    fn enter(&mut self, module_id: ModuleId) -> CoreResult<()> {
        let module = self.module(module_id)?;
        // The adapter may report the root's own call; the root call already exists.
        if module == 0 && !self.root_entered && self.stack.len() == 1 {
            self.root_entered = true;
            self.stack[0].module_id = Some(module_id);
            return Ok(());
        }
        let call = self.trace.module_calls.len() as u32;
        let parent_call = self.stack.last().map(|frame| frame.call);
        let record = &mut self.trace.modules[module as usize];
        record.calls.push(call);
        self.trace.module_calls.push(ModuleCall {
            module,
            call_number: record.calls.len() as u32,
            parent_call,
            first_op: self.trace.ops.len() as OpId,
            end_op: OpId::MAX,
            outputs: Vec::new(),
        });
        self.stack.push(Frame {
            call,
            module_id: Some(module_id),
            ordinals: HashMap::default(),
        });
        Ok(())
    }

    fn exit(&mut self, module_id: ModuleId, outputs: &[TensorId]) -> CoreResult<()> {
        let top_matches = self
            .stack
            .last()
            .is_some_and(|frame| frame.module_id == Some(module_id));
        if !top_matches {
            return Err(event_error(
                "events_unbalanced_module_exit",
                format!("module {module_id} exited but is not the innermost open call"),
            ));
        }
        let call = if self.stack.len() == 1 {
            // The root's own exit: keep its frame so outputs can follow.
            self.stack[0].module_id = None;
            0
        } else {
            self.stack.pop().map_or(0, |frame| frame.call)
        };
        let output_ops: Vec<OpId> = outputs
            .iter()
            .filter_map(|&tensor| match self.producers.get(&self.trace, tensor) {
                Some(Producer::Op(op)) => Some(op),
                _ => None,
            })
            .collect();
        let record = &mut self.trace.module_calls[call as usize];
        record.outputs = output_ops;
        if call != 0 {
            record.end_op = self.trace.ops.len() as OpId;
        }
        Ok(())
    }

    /// Appends an op at the current module call, assigning its site, layer and pass.
    #[allow(clippy::too_many_arguments)]
    fn append(
        &mut self,
        kind: OpKind,
        func: u32,
        name: Option<String>,
        parents: Edges,
        params: ParamList,
        value: &TensorDesc,
        output_index: Option<u32>,
    ) -> CoreResult<OpId> {
        if self.trace.ops.len() >= MAX_OPS {
            return Err(CoreError::new(
                ErrorKind::LimitExceeded,
                "trace_too_many_ops",
                "a trace holds at most 2^32 - 2 ops",
                "trace a smaller part of the model, or stop capture earlier with stop_after=",
            ));
        }
        if value.tensor == SplitId::RESERVED || value.payload == Some(SplitId::RESERVED) {
            return Err(event_error(
                "events_reserved_id",
                format!(
                    "tensor id or payload handle {} is reserved (an op stores it as \"none\")",
                    SplitId::RESERVED
                ),
            ));
        }
        let id = self.trace.ops.len() as OpId;
        let output_slot = output_index.unwrap_or(0);
        let frame = self.stack.last_mut().ok_or_else(|| {
            event_error("events_no_open_call", "no module call is open".to_string())
        })?;
        let call = frame.call;
        let ordinal_counter = frame.ordinals.entry((func, output_slot)).or_insert(0);
        let ordinal = *ordinal_counter;
        *ordinal_counter += 1;
        let module = self.trace.module_calls[call as usize].module;
        let site = SiteKey {
            module,
            func,
            output_slot,
            ordinal,
        };
        let layer = self.layer_for(site, kind, &parents);
        let layer_record = &mut self.trace.layers[layer as usize];
        layer_record.ops.push(id);
        let pass = layer_record.ops.len() as u32;
        for &param in &params {
            self.trace.params[param as usize].users.push(id);
        }
        self.trace.ops.push(Op {
            label: Arc::clone(&self.no_label),
            layer,
            pass,
            func,
            kind,
            parents,
            children: Edges::new(),
            params,
            module_call: call,
            shape: self.shared_shapes.share(&value.shape),
            dtype: value.dtype.clone(),
            in_place: false,
            payload: SplitId::new(value.payload),
            source: None,
            site_module: site.module,
            site_ordinal: site.ordinal,
            distances: PackedDistances::NONE,
            reach: None,
            // An output node repeats its producer's value, so only the producer carries it.
            value: SplitId::new((kind != OpKind::Output).then_some(value.tensor)),
            details: OpDetails {
                name,
                output_index,
                ..OpDetails::default()
            }
            .boxed(),
        });
        if kind != OpKind::Output {
            // An output op carries no value; `push_output` names the producer again.
            self.producers.insert_op(&self.trace, value.tensor, id);
        }
        Ok(id)
    }

    /// The layer an op at `site` belongs to: with recurrence detection, every op of one site is
    /// a pass of one layer; without it, each op is its own layer.
    fn layer_for(&mut self, site: SiteKey, kind: OpKind, parents: &Edges) -> u32 {
        let recurrence = self.trace.options.recurrence_detection;
        if recurrence {
            if let Some(layer) = self.site_layers.get(&self.trace, &site) {
                return layer;
            }
        }
        // Structural grouping for ops outside a repeated module call (a loop written in the
        // forward itself): an op with the same module, function and parent layers as an
        // earlier layer is that layer's next pass when its parents come from a later pass.
        let structural = (recurrence && kind == OpKind::Compute)
            .then(|| StructuralKey::of(&self.trace, &site, parents));
        if let Some(key) = &structural {
            if let Some(layer) = self.structural_layers.get(&self.trace, key) {
                if self.parents_advanced(layer, parents) {
                    return layer;
                }
            }
        }
        let op_type = self.trace.func_names[site.func as usize].op_type.clone();
        // Looked up by reference first: a new layer of a known type allocates no key.
        let type_index = match self.type_counters.get_mut(&*op_type) {
            Some(counter) => {
                *counter += 1;
                *counter
            }
            None => {
                self.type_counters.insert(op_type.to_string(), 1);
                1
            }
        };
        let step_index = self.trace.layers.len() as u32 + 1;
        let layer = self.trace.layers.len() as u32;
        self.trace.layers.push(Layer {
            label: naming::layer_label(&op_type, type_index, step_index, kind.is_boundary()).into(),
            op_type,
            type_index,
            step_index,
            ops: OpIdList::new(),
        });
        if recurrence {
            self.site_layers.insert(&self.trace, &site, layer);
        }
        if let Some(key) = structural {
            self.structural_layers.insert(&self.trace, &key, layer);
        }
        layer
    }

    /// Whether `parents` come from a later pass than the parents of the layer's last pass: the
    /// mark of a loop iteration, as opposed to the same value read twice.
    fn parents_advanced(&self, layer: u32, parents: &Edges) -> bool {
        let Some(&last) = self.trace.layers[layer as usize].ops.last() else {
            return false;
        };
        let previous = &self.trace.ops[last as usize].parents;
        previous.len() == parents.len()
            && previous.iter().zip(parents.iter()).all(|(before, now)| {
                self.trace.ops[now.op as usize].pass >= self.trace.ops[before.op as usize].pass
            })
            && previous.iter().zip(parents.iter()).any(|(before, now)| {
                self.trace.ops[now.op as usize].pass > self.trace.ops[before.op as usize].pass
            })
    }

    fn push_value_op(
        &mut self,
        kind: OpKind,
        func_name: &str,
        name: Option<String>,
        value: TensorDesc,
    ) -> CoreResult<OpId> {
        let func = self.intern(func_name);
        self.append(
            kind,
            func,
            name,
            Edges::new(),
            ParamList::new(),
            &value,
            None,
        )
    }

    /// Resolves an argument to its producer; a value nobody declared becomes a constant op
    /// without payload, and the trace is marked unverified.
    fn resolve(&mut self, argument: &ArgRef) -> CoreResult<Producer> {
        if let Some(producer) = self.producers.get(&self.trace, argument.tensor) {
            return Ok(producer);
        }
        self.trace.capture.verified = false;
        self.trace.capture.reason = Some(UNREGISTERED_VALUE_REASON.to_string());
        let value = TensorDesc {
            tensor: argument.tensor,
            shape: Shape::new(),
            dtype: Dtype::Other("unknown".to_string()),
            payload: None,
        };
        let id = self.push_value_op(OpKind::Constant, "constant", None, value)?;
        Ok(Producer::Op(id))
    }

    fn push_op(&mut self, event: OpEvent) -> CoreResult<()> {
        let mut parents = Edges::with_capacity(event.args.len());
        let mut params = ParamList::new();
        for argument in &event.args {
            match self.resolve(argument)? {
                Producer::Op(op) => parents.push(Edge {
                    op,
                    position: argument.position,
                }),
                Producer::Param(param) => {
                    if !params.contains(&param) {
                        params.push(param);
                    }
                }
            }
        }
        let kind = if parents.is_empty() && params.is_empty() {
            OpKind::LiteralProducer
        } else {
            OpKind::Compute
        };
        let func = self.intern(&event.func);
        let multi_output = event.outputs.len() > 1;
        let mut attributes = Some(event.attributes);
        let mut source = event
            .source
            .map(|source| self.shared_text.location(&source));
        for (index, output) in event.outputs.iter().enumerate() {
            let output_index = multi_output.then_some(index as u32);
            let id = self.append(
                kind,
                func,
                None,
                parents.clone(),
                params.clone(),
                output,
                output_index,
            )?;
            let op = &mut self.trace.ops[id as usize];
            op.in_place = event.in_place;
            // Attributes and source belong to the call; the first output carries them, later
            // outputs share them by copy only when there are several.
            let op_attributes = if multi_output {
                attributes.clone().unwrap_or_default()
            } else {
                attributes.take().unwrap_or_default()
            };
            op.edit_details(|details| details.attributes = op_attributes);
            op.source = if multi_output {
                source.clone()
            } else {
                source.take()
            };
        }
        Ok(())
    }

    fn push_output(&mut self, name: String, tensor: TensorId) -> CoreResult<()> {
        let producer = self.resolve(&ArgRef {
            tensor,
            position: 0,
            keyword: None,
        })?;
        let Producer::Op(parent) = producer else {
            return Err(event_error(
                "events_output_is_param",
                format!("output {name} is a parameter, not a computed value"),
            ));
        };
        let parent_op = &self.trace.ops[parent as usize];
        let value = TensorDesc {
            tensor,
            shape: Shape::from_slice(&parent_op.shape),
            dtype: parent_op.dtype.clone(),
            payload: None,
        };
        let func = self.intern("output");
        let id = self.append(
            OpKind::Output,
            func,
            Some(name),
            smallvec::smallvec![Edge {
                op: parent,
                position: 0,
            }],
            ParamList::new(),
            &value,
            None,
        )?;
        // The output node stands for the value; later readers still see the producing op.
        self.producers.insert_op(&self.trace, tensor, parent);
        self.trace.outputs.push(id);
        Ok(())
    }

    /// Marks the capture as stopped early at `frontier` (for `stop_after=`).
    pub fn mark_stopped(&mut self, reason: String, frontier: Vec<OpId>) {
        self.trace.capture.stop_reason = Some(reason);
        self.trace.capture.frontier = frontier;
    }

    /// Marks the capture as stopped early at the ops that produced the adapter's values
    /// `frontier` (what crosses the component boundary). A value no op produced is an
    /// `events_unknown_frontier_value` error, and then nothing is marked.
    pub fn mark_stopped_at_values(
        &mut self,
        reason: String,
        frontier: &[TensorId],
    ) -> CoreResult<()> {
        let ops = frontier
            .iter()
            .map(|&value| {
                self.producing_op(value, "events_unknown_frontier_value", "the stop frontier")
            })
            .collect::<CoreResult<Vec<OpId>>>()?;
        self.mark_stopped(reason, ops);
        Ok(())
    }

    /// Marks the capture as possibly incomplete.
    pub fn mark_unverified(&mut self, reason: String) {
        self.trace.capture.verified = false;
        self.trace.capture.reason = Some(reason);
    }

    /// Finalizes: closes the root call, links children, labels passes, builds the module tree
    /// and (if enabled) computes distances.
    pub fn finish(self) -> CoreResult<Trace> {
        let stopped = self.trace.capture.stop_reason.is_some();
        if self.stack.len() > 1 && !stopped {
            let open = self.stack.len() - 1;
            return Err(event_error(
                "events_unclosed_module_call",
                format!("{open} module call(s) never exited"),
            ));
        }
        // The builder's maps go before the finalize steps allocate: in the component, memory
        // they leave free is reused by the labels and edges instead of growing linear memory.
        let mut trace = self.into_trace();
        let op_count = trace.ops.len() as OpId;
        for call in &mut trace.module_calls {
            if call.end_op == OpId::MAX {
                call.end_op = op_count;
            }
        }
        finalize(&mut trace);
        Ok(trace)
    }

    /// The trace, with the rest of the builder dropped.
    fn into_trace(self) -> Trace {
        self.trace
    }
}

/// The finalize steps shared by the builder and the decoder's rebuild of derived data.
pub fn finalize(trace: &mut Trace) {
    link_children(trace);
    // Distances before labels: the sweeps' working arrays are freed by the time the labels are
    // allocated, which reuse their memory (in the component, linear memory keeps its high-water
    // mark, so the two peaks must not stack).
    if trace.options.compute_input_output_distances {
        distances::compute(trace);
    }
    label_ops(trace);
    link_module_tree(trace);
}

fn link_children(trace: &mut Trace) {
    let mut counts = vec![0usize; trace.ops.len()];
    for op in &trace.ops {
        for parent in &op.parents {
            counts[parent.op as usize] += 1;
        }
    }
    for (op, count) in trace.ops.iter_mut().zip(&counts) {
        op.children = Edges::with_capacity(*count);
    }
    for child in 0..trace.ops.len() {
        for index in 0..trace.ops[child].parents.len() {
            let parent = trace.ops[child].parents[index];
            trace.ops[parent.op as usize].children.push(Edge {
                op: child as OpId,
                position: parent.position,
            });
        }
    }
}

fn label_ops(trace: &mut Trace) {
    for op in &mut trace.ops {
        let layer = &trace.layers[op.layer as usize];
        op.label = naming::op_label(&layer.label, op.pass, layer.ops.len());
    }
}

fn link_module_tree(trace: &mut Trace) {
    let mut by_address: HashMap<&str, u32> = HashMap::default();
    for (index, module) in trace.modules.iter().enumerate() {
        for address in &module.all_addresses {
            by_address.entry(address.as_str()).or_insert(index as u32);
        }
    }
    let parents: Vec<Option<u32>> = trace
        .modules
        .iter()
        .enumerate()
        .map(|(index, module)| {
            if index == 0 {
                return None;
            }
            let mut address = module.address();
            while let Some((prefix, _)) = address.rsplit_once('.') {
                if let Some(&parent) = by_address.get(prefix) {
                    return Some(parent);
                }
                address = prefix;
            }
            Some(0)
        })
        .collect();
    for module in &mut trace.modules {
        module.children.clear();
    }
    for (index, parent) in parents.into_iter().enumerate() {
        trace.modules[index].parent = parent;
        if let Some(parent) = parent {
            trace.modules[parent as usize].children.push(index as u32);
        }
    }
}
