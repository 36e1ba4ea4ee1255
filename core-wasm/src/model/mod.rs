//! The trace model: what the core builds from raw events, what the codec stores and what every
//! host queries. Plain serde data; postcard on the wire.
//!
//! Ops have dense ids in capture order, and every edge points from a lower id to a higher one,
//! so capture order is a topological order of the graph.

mod backward;
mod chunked_table;
mod interner;
mod module_tree;
mod op;
mod reach;
mod shared_shape;
mod shared_text;
mod site;

pub use backward::{BackwardGraph, GradFnNode, SavedGrad, GRAD_TENSOR_PREFIX};
pub use chunked_table::{
    ChunkedTable, Iter as TableIter, IterMut as TableIterMut, LayerTable, OpTable,
};
pub use interner::Interner;
pub use module_tree::{Module, ModuleCall, Param};
pub use op::{Op, OpDetails};
pub(crate) use op::{PackedDistances, SplitId};
pub use reach::{share_repeated_reaches, InputOutputReach, SharedReaches};
pub use shared_shape::{share_repeated_shapes, SharedShape, SharedShapes};
pub use shared_text::{share_repeated_text, SharedText};
pub use site::SiteKey;

use crate::events::PayloadSlot;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::sync::Arc;

/// Dense op identifier: the op's index in capture order.
pub type OpId = u32;

// Small inline vectors: most ops have one or two parents, a rank of at most four and one
// input ancestor, so these need no heap allocation in the common case (a trace of a million
// ops would otherwise make several million small allocations).
/// A tensor shape (defined by the event schema, which carries shapes).
pub use torchlens_schema::Shape;
/// An op's parent or child edges.
pub type Edges = SmallVec<[Edge; 2]>;
/// A short list of op ids (ancestor and descendant sets).
pub type OpIdList = SmallVec<[OpId; 2]>;
/// A short list of parameter indices.
pub type ParamList = SmallVec<[u32; 2]>;

/// Options that change how the core groups and annotates a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceOptions {
    /// Group repeated calls of one module into passes of one layer.
    pub recurrence_detection: bool,
    /// Record hop distances to inputs/outputs and the input-ancestor / output-descendant sets.
    pub compute_input_output_distances: bool,
}

impl Default for TraceOptions {
    fn default() -> Self {
        Self {
            recurrence_detection: true,
            compute_input_output_distances: true,
        }
    }
}

/// What role an op plays in the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OpKind {
    /// An ordinary operation with at least one tensor parent or parameter.
    Compute,
    /// A model input.
    Input,
    /// A model output (a node of its own, child of the op that produced the value).
    Output,
    /// A value read from outside the traced call: parentless, with a saved payload.
    Constant,
    /// A module buffer read during the forward.
    Buffer,
    /// An op that made a value from nothing (`ones`, `arange`, a fill): no parents.
    LiteralProducer,
}

impl OpKind {
    /// Kinds labelled `{type}_{n}` rather than `{type}_{n}_{step}`.
    pub fn is_boundary(self) -> bool {
        matches!(
            self,
            OpKind::Input | OpKind::Output | OpKind::Constant | OpKind::Buffer
        )
    }
}

/// One edge end: the op on the other side and the argument position the edge fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    pub op: OpId,
    pub position: u32,
}

/// Hop distances; `None` where no path exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Distances {
    pub min_from_input: Option<u32>,
    pub max_from_input: Option<u32>,
    pub min_to_output: Option<u32>,
    pub max_to_output: Option<u32>,
}

/// A record of an edit applied to an op's value during capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditRecord {
    /// Which rule fired (its index or name in the caller's `intervene=`).
    pub rule: String,
    /// What it did (`zero_ablate`, `scale(0.5)`, ...).
    pub action: String,
    /// When it fired relative to the op (`output`, `module_exit`, ...).
    pub timing: String,
}

/// An interned function name and its normalized type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FuncName {
    /// As the framework named it (`__radd__`, `layer_norm`).
    pub name: String,
    /// Lower-cased, without underscores, reflected/in-place dunders folded (`add`, `layernorm`).
    /// Shared with the layers of this function.
    pub op_type: Arc<str>,
}

/// A layer: one site of the model, run one or more times (its passes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    /// `{type}_{typeIndex}_{stepIndex}` (or `{type}_{typeIndex}` for inputs, outputs, buffers
    /// and constants).
    pub label: Arc<str>,
    pub op_type: Arc<str>,
    pub type_index: u32,
    pub step_index: u32,
    /// The ops of each pass, in pass order (most layers run once: kept inline, no allocation).
    pub ops: OpIdList,
}

/// Whether the capture saw everything, and whether it ended early.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CaptureStatus {
    /// False when the capture may be incomplete; `reason` then says why.
    pub verified: bool,
    pub reason: Option<String>,
    /// Set when capture stopped early (`stop_after=`): the reason.
    pub stop_reason: Option<String>,
    /// The ops at which capture stopped.
    pub frontier: Vec<OpId>,
}

/// A finished trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub options: TraceOptions,
    pub func_names: Vec<FuncName>,
    pub ops: OpTable,
    pub layers: LayerTable,
    /// Module 0 is the root, `self`.
    pub modules: Vec<Module>,
    /// Call 0 is the root call.
    pub module_calls: Vec<ModuleCall>,
    pub params: Vec<Param>,
    pub inputs: Vec<OpId>,
    pub outputs: Vec<OpId>,
    pub capture: CaptureStatus,
    /// Backend-specific facts about the whole trace.
    pub extras: Vec<(String, String)>,
    /// The captured backward pass, if any. Not part of the postcard `Trace`: the body stores it
    /// after the trace, so bodies without one keep their exact bytes (see `tlspec::encode`).
    #[serde(skip)]
    pub backward: Option<BackwardGraph>,
}

impl Trace {
    /// The function name of an op.
    pub fn func_name(&self, op: &Op) -> &str {
        self.func_names
            .get(op.func as usize)
            .map_or("", |func| func.name.as_str())
    }

    /// The normalized type of an op.
    pub fn op_type(&self, op: &Op) -> &str {
        self.func_names
            .get(op.func as usize)
            .map_or("", |func| &*func.op_type)
    }

    /// The layer an op belongs to.
    pub fn layer_of(&self, op: &Op) -> Option<&Layer> {
        self.layers.get(op.layer as usize)
    }

    /// Module calls from the op's innermost call out to the root call.
    pub fn call_stack(&self, op: &Op) -> CallStack<'_> {
        CallStack {
            trace: self,
            next: Some(op.module_call),
        }
    }

    /// `address:call` of a module call, e.g. `encoder.layer:2`; the root is `self`.
    pub fn call_name(&self, call: u32) -> String {
        match self.module_calls.get(call as usize) {
            Some(record) if record.module == 0 => "self".to_string(),
            Some(record) => {
                let address = self
                    .modules
                    .get(record.module as usize)
                    .map_or("?", |module| module.address());
                format!("{address}:{}", record.call_number)
            }
            None => "?".to_string(),
        }
    }

    /// The stable site key of an op, rendered as text.
    pub fn site_key(&self, op: &Op) -> String {
        let site = op.site();
        let module = self
            .modules
            .get(site.module as usize)
            .map_or("?", |module| module.address());
        format!(
            "{module}/{}/{}/{}",
            self.op_type(op),
            site.output_slot,
            site.ordinal
        )
    }

    /// Finds an op by label: `relu_1_3:2` is one pass, `relu_1_3` the first pass of that layer
    /// (or the op itself when its layer ran once).
    pub fn find_label(&self, label: &str) -> Option<OpId> {
        let (layer_label, pass) = match label.rsplit_once(':') {
            Some((layer, pass)) => (layer, pass.parse::<usize>().ok()?),
            None => (label, 1),
        };
        let layer = self
            .layers
            .iter()
            .find(|layer| &*layer.label == layer_label)?;
        layer.ops.get(pass.checked_sub(1)?).copied()
    }
}

/// Iterator over an op's module calls, innermost first.
pub struct CallStack<'a> {
    trace: &'a Trace,
    next: Option<u32>,
}

impl Iterator for CallStack<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        let current = self.next?;
        self.next = self
            .trace
            .module_calls
            .get(current as usize)
            .and_then(|call| call.parent_call);
        Some(current)
    }
}

impl Trace {
    /// Keeps payload references only for the adapter's payload `slots` (post-capture
    /// `save=`): every op whose slot is not listed loses its payload reference. Returns how
    /// many were dropped.
    pub fn keep_payloads(&mut self, slots: &[PayloadSlot]) -> usize {
        let keep: rustc_hash::FxHashSet<PayloadSlot> = slots.iter().copied().collect();
        let mut dropped = 0;
        for op in &mut self.ops {
            if op.payload().is_some_and(|slot| !keep.contains(&slot)) {
                op.set_payload(None);
                dropped += 1;
            }
        }
        dropped
    }
}
