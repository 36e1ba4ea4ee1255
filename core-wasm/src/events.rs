//! The raw capture events an adapter emits. This is the whole contract between a framework
//! adapter and the core: an adapter reports *what ran*, in order, and the core does every piece
//! of labelling, grouping and bookkeeping at finalize.
//!
//! Events travel as one postcard-encoded [`EventBatch`] per call. Identifiers are chosen by the
//! adapter: `TensorId` names a runtime value (for example a counter the adapter bumps for each new
//! output), `ModuleId` a module object, `PayloadSlot` the adapter's handle on a kept array. The
//! core never sees tensor bytes.

use crate::dtype::Dtype;
use serde::{Deserialize, Serialize};

/// An adapter-chosen identifier for one runtime value.
pub type TensorId = u64;
/// An adapter-chosen identifier for one module object (stable across its calls).
pub type ModuleId = u32;
/// An adapter-chosen handle on a payload the adapter keeps (the host writes its bytes on save).
pub type PayloadSlot = u64;

/// One batch of events, in capture order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventBatch {
    pub events: Vec<RawEvent>,
}

/// Shape and dtype of a value, plus the payload handle when the adapter kept it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorDesc {
    pub tensor: TensorId,
    pub shape: crate::model::Shape,
    /// Framework-neutral dtype (an enum tag on the wire, so decoding allocates nothing).
    pub dtype: Dtype,
    pub payload: Option<PayloadSlot>,
}

/// A tensor argument of an op: which value, and which argument position it fed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgRef {
    pub tensor: TensorId,
    /// Positional index, or for keyword arguments the position after the positionals.
    pub position: u32,
    /// Keyword name when the value was passed by keyword.
    pub keyword: Option<String>,
}

/// Where in user source an op was called from (torch only, today).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLocation {
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// One operation that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpEvent {
    /// The function as the framework names it (`relu`, `__add__`, `conv2d`, ...).
    pub func: String,
    /// Tensor arguments, in argument order.
    pub args: smallvec::SmallVec<[ArgRef; 2]>,
    /// Values the op produced; more than one makes a multi-output op.
    pub outputs: smallvec::SmallVec<[TensorDesc; 1]>,
    /// The op wrote into its first argument instead of allocating.
    pub in_place: bool,
    /// Non-tensor arguments rendered as text (`dim=1`, `alpha=0.5`, ...).
    pub attributes: Vec<(String, String)>,
    pub source: Option<SourceLocation>,
}

/// A module object the adapter found in the model (declared before its first call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleDecl {
    pub id: ModuleId,
    /// Every address the object is reachable under; the first is its primary address. The root
    /// module is the one whose address is `self`.
    pub addresses: Vec<String>,
    pub class_name: String,
    /// A container of modules (a list, tuple or dict of modules): it has its own record but is
    /// never called itself.
    pub container: bool,
    pub training: bool,
}

/// A parameter (trainable weight or frozen buffer-like weight) owned by a module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamDecl {
    pub tensor: TensorId,
    pub address: String,
    pub module: ModuleId,
    pub shape: Vec<u64>,
    pub dtype: Dtype,
    pub trainable: bool,
}

/// A single raw event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RawEvent {
    Module(ModuleDecl),
    Param(ParamDecl),
    /// A model input; `name` is its path in the call (`x`, `args.1`, `kwargs.mask`, ...).
    Input {
        name: String,
        value: TensorDesc,
    },
    /// A module buffer read during the forward (running statistics and the like).
    Buffer {
        address: String,
        value: TensorDesc,
    },
    /// A value read from outside the traced call (a global tensor, a closure array).
    Constant {
        value: TensorDesc,
    },
    Op(OpEvent),
    /// A module call starts.
    Enter {
        module: ModuleId,
    },
    /// A module call ends, returning these values.
    Exit {
        module: ModuleId,
        outputs: Vec<TensorId>,
    },
    /// A model output; `name` is its path in the return value.
    Output {
        name: String,
        tensor: TensorId,
    },
    /// A backend-specific fact about the whole trace.
    Extra {
        key: String,
        value: String,
    },
}

impl EventBatch {
    /// Decodes a postcard batch.
    pub fn from_postcard(bytes: &[u8]) -> crate::error::CoreResult<Self> {
        let events = EventStream::new(bytes)?.collect::<crate::error::CoreResult<_>>()?;
        Ok(Self { events })
    }

    /// Encodes the batch as postcard.
    pub fn to_postcard(&self) -> Vec<u8> {
        // Serialising plain data structs into a Vec cannot fail.
        postcard::to_allocvec(self).unwrap_or_default()
    }
}

fn undecodable(detail: impl std::fmt::Display) -> crate::error::CoreError {
    crate::error::CoreError::new(
        crate::error::ErrorKind::InvalidEvents,
        "events_undecodable",
        format!("event batch is not valid postcard: {detail}"),
        "encode batches with the documented RawEvent schema and the same core version",
    )
}

/// Decodes the events of a postcard [`EventBatch`] one at a time, so a large batch is ingested
/// without first materialising every event (same bytes as `EventBatch::to_postcard`).
pub struct EventStream<'a> {
    rest: &'a [u8],
    remaining: u64,
}

impl<'a> EventStream<'a> {
    /// Reads the batch's event count; events follow on iteration.
    pub fn new(bytes: &'a [u8]) -> crate::error::CoreResult<Self> {
        let (remaining, rest) = postcard::take_from_bytes::<u64>(bytes).map_err(undecodable)?;
        Ok(Self { rest, remaining })
    }

    /// How many events the batch declares (untrusted: use only as a capped hint).
    pub fn len_hint(&self) -> u64 {
        self.remaining
    }
}

impl Iterator for EventStream<'_> {
    type Item = crate::error::CoreResult<RawEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            if self.rest.is_empty() {
                return None;
            }
            self.rest = &[];
            return Some(Err(undecodable("bytes follow the last event")));
        }
        self.remaining -= 1;
        match postcard::take_from_bytes::<RawEvent>(self.rest) {
            Ok((event, rest)) => {
                self.rest = rest;
                Some(Ok(event))
            }
            Err(error) => {
                self.remaining = 0;
                self.rest = &[];
                Some(Err(undecodable(error)))
            }
        }
    }
}
