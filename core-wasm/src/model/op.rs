//! One operation of a trace, laid out for long traces.
//!
//! A trace holds one `Op` per operation, so its size is most of what a trace costs per op. The
//! facts most ops lack (a name, an output position, non-tensor arguments, edits, backend extras)
//! live behind one optional box, hop distances are packed into four `u32`s, the shape, source
//! location and input/output reach are shared with the trace's other ops that have the same
//! ones ([`super::SharedShape`], [`super::SharedText`], [`super::InputOutputReach`]), the site
//! keeps only what the op does not already hold, and the two optional ids are `u32` halves with
//! a reserved "none" ([`SplitId`]), so nothing aligns the record to 8: 312 → 152 bytes on
//! wasm32. On the wire an op is the record it always was ([`OpWire`]): `.tlspec` bodies are
//! unchanged.

use super::{
    Distances, Edges, EditRecord, InputOutputReach, OpId, OpIdList, OpKind, ParamList, Shape,
    SharedShape, SiteKey,
};
use crate::dtype::Dtype;
use crate::events::{PayloadSlot, SharedSourceLocation, TensorId};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

/// One operation of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// `{type}_{typeIndex}_{stepIndex}`, plus `:{pass}` when its layer ran more than once (the
    /// layer's own label, shared, when it ran once).
    pub label: Arc<str>,
    /// Index into [`super::Trace::layers`].
    pub layer: u32,
    /// 1-based pass of its layer.
    pub pass: u32,
    /// Index into [`super::Trace::func_names`].
    pub func: u32,
    pub kind: OpKind,
    pub parents: Edges,
    pub children: Edges,
    /// Parameters the op read (indices into [`super::Trace::params`]).
    pub params: ParamList,
    /// Innermost module call the op ran in (index into [`super::Trace::module_calls`]; 0 is the
    /// root).
    pub module_call: u32,
    /// Shared with the trace's other ops of this shape (see [`super::SharedShape`]).
    pub shape: SharedShape,
    pub dtype: Dtype,
    pub in_place: bool,
    /// Read with [`Op::payload`], set with [`Op::set_payload`].
    pub(crate) payload: SplitId,
    /// Shared with the trace's other ops called from the same line.
    pub source: Option<Arc<SharedSourceLocation>>,
    /// The site's module (the rest of the site is the op's own function, output index and
    /// [`Op::site_ordinal`]; read the whole key with [`Op::site`]).
    pub(crate) site_module: u32,
    /// The site's ordinal (see [`SiteKey::ordinal`]).
    pub(crate) site_ordinal: u32,
    /// Hop distances (see [`Op::distances`]; the builder starts with [`PackedDistances::NONE`]).
    pub(crate) distances: PackedDistances,
    /// Input ops that reach this op and output ops it reaches (when distances are computed),
    /// shared with every op that has the same two sets; `None` while both are empty.
    pub(crate) reach: Option<Arc<InputOutputReach>>,
    /// Read with [`Op::value`].
    pub(crate) value: SplitId,
    /// What most ops lack; `None` while all of it is empty (see [`OpDetails::boxed`]).
    pub(crate) details: Option<Box<OpDetails>>,
}

/// The facts of an op that most ops lack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpDetails {
    /// For inputs and outputs their path in the call, for buffers their address.
    pub name: Option<String>,
    /// Position among the outputs of a multi-output op.
    pub output_index: Option<u32>,
    /// Non-tensor arguments, rendered as text.
    pub attributes: Vec<(String, String)>,
    /// Edits applied to the op's value during capture.
    pub edits: Vec<EditRecord>,
    /// Backend-specific facts (`backend_address`, ...).
    pub extras: Vec<(String, String)>,
}

impl OpDetails {
    /// What an op holds for these facts: nothing when they are all empty.
    pub(crate) fn boxed(self) -> Option<Box<OpDetails>> {
        (!self.is_empty()).then(|| Box::new(self))
    }

    fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.output_index.is_none()
            && self.attributes.is_empty()
            && self.edits.is_empty()
            && self.extras.is_empty()
    }
}

/// An optional `u64` id as two `u32` halves, with `u64::MAX` reserved for "none": 8 bytes
/// aligned to 4, where an `Option<u64>` takes 16 on wasm32 and aligns the whole op to 8 (a long
/// trace keeps two per op). The builder refuses the reserved id from an adapter
/// ([`SplitId::RESERVED`]), and a file that stores it is refused when decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SplitId([u32; 2]);

impl SplitId {
    /// The one id an op cannot hold: it stands for "none".
    pub(crate) const RESERVED: u64 = u64::MAX;
    pub(crate) const NONE: Self = Self([u32::MAX, u32::MAX]);

    /// `id` split into halves; the reserved id reads back as `None` (callers refuse it first).
    pub(crate) fn new(id: Option<u64>) -> Self {
        let id = id.unwrap_or(Self::RESERVED);
        // Splitting a u64 into its halves: the truncations are the point.
        Self([id as u32, (id >> 32) as u32])
    }

    fn get(self) -> Option<u64> {
        let [low, high] = self.0;
        let id = u64::from(low) | (u64::from(high) << 32);
        (id != Self::RESERVED).then_some(id)
    }
}

impl Op {
    /// The adapter's handle on the op's saved value, if it has one.
    pub fn payload(&self) -> Option<PayloadSlot> {
        self.payload.get()
    }

    /// Sets or clears the op's payload handle.
    pub fn set_payload(&mut self, payload: Option<PayloadSlot>) {
        self.payload = SplitId::new(payload);
    }

    /// The adapter's id of the value this op produced (for a constant the core inserted, the
    /// id of the undeclared value that was read). Runtime-only: it lets live decisions, stop
    /// frontiers and edits name values the way the adapter does, and is never stored in a
    /// `.tlspec` body, so a loaded trace has `None`. Output ops have `None` too: they repeat
    /// their producer's value.
    pub fn value(&self) -> Option<TensorId> {
        self.value.get()
    }

    /// Forgets the op's value id (as a trace loaded from a file has none).
    pub fn clear_value(&mut self) {
        self.value = SplitId::NONE;
    }

    /// For inputs and outputs their path in the call, for buffers their address.
    pub fn name(&self) -> Option<&str> {
        self.details.as_ref()?.name.as_deref()
    }

    /// Position among the outputs of a multi-output op.
    pub fn output_index(&self) -> Option<u32> {
        self.details.as_ref()?.output_index
    }

    /// Non-tensor arguments, rendered as text.
    pub fn attributes(&self) -> &[(String, String)] {
        self.details
            .as_ref()
            .map_or(&[], |details| &details.attributes)
    }

    /// Edits applied to the op's value during capture.
    pub fn edits(&self) -> &[EditRecord] {
        self.details.as_ref().map_or(&[], |details| &details.edits)
    }

    /// Backend-specific facts (`backend_address`, ...).
    pub fn extras(&self) -> &[(String, String)] {
        self.details.as_ref().map_or(&[], |details| &details.extras)
    }

    /// Changes the rarely present facts: the box is made when something is set, and let go
    /// when the change leaves them all empty.
    pub fn edit_details(&mut self, change: impl FnOnce(&mut OpDetails)) {
        let mut details = self.details.take().unwrap_or_default();
        change(&mut details);
        self.details = (!details.is_empty()).then_some(details);
    }

    /// Stable identity of the op's site, independent of grouping (for comparing traces).
    pub fn site(&self) -> SiteKey {
        SiteKey {
            module: self.site_module,
            func: self.func,
            output_slot: self.output_index().unwrap_or(0),
            ordinal: self.site_ordinal,
        }
    }

    /// Input ops that reach this op (when distances are computed).
    pub fn input_ancestors(&self) -> &[OpId] {
        self.reach
            .as_deref()
            .map_or(&[], |reach| &reach.input_ancestors)
    }

    /// Output ops this op reaches (when distances are computed).
    pub fn output_descendants(&self) -> &[OpId] {
        self.reach
            .as_deref()
            .map_or(&[], |reach| &reach.output_descendants)
    }

    /// Sets both reach sets at once (a shared copy from [`super::SharedReaches`], or `None`
    /// for two empty sets).
    pub fn set_reach(&mut self, reach: Option<Arc<InputOutputReach>>) {
        self.reach = reach.filter(|reach| !reach.is_empty());
    }

    /// Hop distances, when they were computed.
    pub fn distances(&self) -> Option<Distances> {
        self.distances.get()
    }

    /// Sets the hop distances.
    pub fn set_distances(&mut self, distances: Option<Distances>) {
        self.distances = PackedDistances::new(distances);
    }
}

/// `Option<Distances>` in 16 bytes instead of 32: each distance is a `u32` with
/// [`PackedDistances::ABSENT`] for `None`, and [`PackedDistances::NOT_COMPUTED`] in the first
/// slot for no distances at all. A hop count never reaches either (a trace has at most
/// `MAX_OPS` = `u32::MAX - 1` ops, so a path has at most `u32::MAX - 2` hops).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PackedDistances([u32; 4]);

impl PackedDistances {
    const ABSENT: u32 = u32::MAX;
    const NOT_COMPUTED: u32 = u32::MAX - 1;
    /// No distances computed.
    pub(crate) const NONE: Self = Self([Self::NOT_COMPUTED, 0, 0, 0]);

    fn new(distances: Option<Distances>) -> Self {
        let Some(distances) = distances else {
            return Self::NONE;
        };
        let pack = |hops: Option<u32>| match hops {
            // Out of the representable range: absent rather than mistaken for a sentinel (no
            // trace can have such a path; a hostile file's decoded value is rebuilt anyway).
            Some(hops) if hops < Self::NOT_COMPUTED => hops,
            _ => Self::ABSENT,
        };
        Self([
            pack(distances.min_from_input),
            pack(distances.max_from_input),
            pack(distances.min_to_output),
            pack(distances.max_to_output),
        ])
    }

    fn get(self) -> Option<Distances> {
        if self.0[0] == Self::NOT_COMPUTED {
            return None;
        }
        let unpack = |hops: u32| (hops != Self::ABSENT).then_some(hops);
        Some(Distances {
            min_from_input: unpack(self.0[0]),
            max_from_input: unpack(self.0[1]),
            min_to_output: unpack(self.0[2]),
            max_to_output: unpack(self.0[3]),
        })
    }
}

/// An op as stored in a `.tlspec` body: every field in its original place (the postcard bytes
/// of an op never changed when its in-memory layout did).
#[derive(Serialize)]
#[serde(rename = "Op")]
struct OpWireRef<'a> {
    label: &'a Arc<str>,
    layer: u32,
    pass: u32,
    func: u32,
    kind: OpKind,
    name: Option<&'a str>,
    parents: &'a Edges,
    children: &'a Edges,
    params: &'a ParamList,
    module_call: u32,
    shape: &'a [u64],
    dtype: &'a Dtype,
    output_index: Option<u32>,
    in_place: bool,
    payload: Option<PayloadSlot>,
    attributes: &'a [(String, String)],
    source: Option<&'a SharedSourceLocation>,
    site: SiteKey,
    distances: Option<Distances>,
    input_ancestors: &'a [OpId],
    output_descendants: &'a [OpId],
    edits: &'a [EditRecord],
    extras: &'a [(String, String)],
}

/// [`OpWireRef`], owned, for decoding.
#[derive(Deserialize)]
#[serde(rename = "Op")]
struct OpWire {
    label: Arc<str>,
    layer: u32,
    pass: u32,
    func: u32,
    kind: OpKind,
    name: Option<String>,
    parents: Edges,
    children: Edges,
    params: ParamList,
    module_call: u32,
    shape: Shape,
    dtype: Dtype,
    output_index: Option<u32>,
    in_place: bool,
    payload: Option<PayloadSlot>,
    attributes: Vec<(String, String)>,
    source: Option<SharedSourceLocation>,
    site: SiteKey,
    distances: Option<Distances>,
    input_ancestors: OpIdList,
    output_descendants: OpIdList,
    edits: Vec<EditRecord>,
    extras: Vec<(String, String)>,
}

impl Serialize for Op {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        OpWireRef {
            label: &self.label,
            layer: self.layer,
            pass: self.pass,
            func: self.func,
            kind: self.kind,
            name: self.name(),
            parents: &self.parents,
            children: &self.children,
            params: &self.params,
            module_call: self.module_call,
            shape: &self.shape[..],
            dtype: &self.dtype,
            output_index: self.output_index(),
            in_place: self.in_place,
            payload: self.payload(),
            attributes: self.attributes(),
            source: self.source.as_deref(),
            site: self.site(),
            distances: self.distances(),
            input_ancestors: self.input_ancestors(),
            output_descendants: self.output_descendants(),
            edits: self.edits(),
            extras: self.extras(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = OpWire::deserialize(deserializer)?;
        // The op holds its site's function and output slot once, as its own function and output
        // index: a stored site that disagrees with them, or a stored payload handle equal to the
        // reserved id, describes no op the builder makes.
        if wire.site.func != wire.func || wire.site.output_slot != wire.output_index.unwrap_or(0) {
            return Err(serde::de::Error::custom(format!(
                "op `{}`: its site names function {} and output slot {}, the op itself {} and {}",
                wire.label,
                wire.site.func,
                wire.site.output_slot,
                wire.func,
                wire.output_index.unwrap_or(0)
            )));
        }
        if wire.payload == Some(SplitId::RESERVED) {
            return Err(serde::de::Error::custom(format!(
                "op `{}`: payload handle {} is reserved",
                wire.label,
                SplitId::RESERVED
            )));
        }
        let reach = InputOutputReach {
            input_ancestors: wire.input_ancestors,
            output_descendants: wire.output_descendants,
        };
        Ok(Self {
            label: wire.label,
            layer: wire.layer,
            pass: wire.pass,
            func: wire.func,
            kind: wire.kind,
            parents: wire.parents,
            children: wire.children,
            params: wire.params,
            module_call: wire.module_call,
            shape: SharedShape::from(&wire.shape[..]),
            dtype: wire.dtype,
            in_place: wire.in_place,
            payload: SplitId::new(wire.payload),
            source: wire.source.map(Arc::new),
            site_module: wire.site.module,
            site_ordinal: wire.site.ordinal,
            distances: PackedDistances::new(wire.distances),
            // A copy per op until the decoder shares them (`share_repeated_reaches`).
            reach: (!reach.is_empty()).then(|| Arc::new(reach)),
            value: SplitId::NONE,
            details: OpDetails {
                name: wire.name,
                output_index: wire.output_index,
                attributes: wire.attributes,
                edits: wire.edits,
                extras: wire.extras,
            }
            .boxed(),
        })
    }
}
