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
use thiserror::Error;

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
    pub shape: crate::Shape,
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
///
/// Events carry the text as `String`; a trace keeps it as shared `Arc<str>`
/// ([`SharedSourceLocation`]): the ops of a long loop all name the same file and function, and
/// one copy of each instead of two allocations per op is most of what source costs a trace.
/// Both serialize the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLocation<Text = String> {
    pub file: Text,
    pub line: u32,
    pub function: Text,
}

/// A source location whose file and function text is shared between the ops that name it.
pub type SharedSourceLocation = SourceLocation<std::sync::Arc<str>>;

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
    /// The adapter edited the value `value` during capture (an `intervene=` rule fired): the
    /// core records it on the op that produced the value. Kept last so the postcard tags of the
    /// earlier variants never change.
    Edit {
        value: TensorId,
        /// Which rule fired (its index or name in the caller's rules).
        rule: String,
        /// What it did (`zero_ablate`, `scale(0.5)`, ...).
        action: String,
        /// When it fired relative to the op (`output`, `module_exit`, ...).
        timing: String,
    },
}

impl EventBatch {
    /// Decodes a postcard batch.
    pub fn from_postcard(bytes: &[u8]) -> Result<Self, DecodeError> {
        let events = EventStream::new(bytes)?.collect::<Result<_, _>>()?;
        Ok(Self { events })
    }

    /// Encodes the batch as postcard.
    pub fn to_postcard(&self) -> Vec<u8> {
        // Serialising plain data structs into a Vec cannot fail.
        postcard::to_allocvec(self).unwrap_or_default()
    }
}

/// An event batch that is not valid postcard for this schema (truncated, trailing bytes, an
/// unknown variant tag, ...). The core reports it as `events_undecodable`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("event batch is not valid postcard: {detail}")]
pub struct DecodeError {
    /// What the decoder tripped over.
    pub detail: String,
}

impl DecodeError {
    fn new(detail: impl std::fmt::Display) -> Self {
        Self {
            detail: detail.to_string(),
        }
    }
}

/// Decodes the events of a postcard [`EventBatch`] one at a time, so a large batch is ingested
/// without first materialising every event (same bytes as `EventBatch::to_postcard`).
pub struct EventStream<'a> {
    rest: &'a [u8],
    remaining: u64,
}

impl<'a> EventStream<'a> {
    /// Reads the batch's event count; events follow on iteration.
    pub fn new(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let (remaining, rest) =
            postcard::take_from_bytes::<u64>(bytes).map_err(DecodeError::new)?;
        Ok(Self { rest, remaining })
    }

    /// How many events the batch declares (untrusted: use only as a capped hint).
    pub fn len_hint(&self) -> u64 {
        self.remaining
    }
}

impl Iterator for EventStream<'_> {
    type Item = Result<RawEvent, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            if self.rest.is_empty() {
                return None;
            }
            self.rest = &[];
            return Some(Err(DecodeError::new("bytes follow the last event")));
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
                Some(Err(DecodeError::new(error)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(tensor: TensorId) -> TensorDesc {
        TensorDesc {
            tensor,
            shape: crate::Shape::from_slice(&[2, 3]),
            dtype: Dtype::Float32,
            payload: Some(tensor + 100),
        }
    }

    #[test]
    fn a_batch_round_trips_through_postcard_including_edits() {
        let batch = EventBatch {
            events: vec![
                RawEvent::Input {
                    name: "x".into(),
                    value: desc(1),
                },
                RawEvent::Edit {
                    value: 1,
                    rule: "0".into(),
                    action: "zero_ablate".into(),
                    timing: "output".into(),
                },
            ],
        };
        let bytes = batch.to_postcard();
        assert_eq!(EventBatch::from_postcard(&bytes), Ok(batch));
    }

    #[test]
    fn earlier_variants_keep_their_tags_and_edit_comes_last() {
        // The variant tag is the first byte of an event; these are fixed by the wire format.
        let extra = RawEvent::Extra {
            key: "k".into(),
            value: "v".into(),
        };
        let edit = RawEvent::Edit {
            value: 7,
            rule: String::new(),
            action: String::new(),
            timing: String::new(),
        };
        let input = RawEvent::Input {
            name: String::new(),
            value: desc(0),
        };
        let tag = |event: &RawEvent| postcard::to_allocvec(event).map(|bytes| bytes[0]);
        assert_eq!(tag(&input), Ok(2));
        assert_eq!(tag(&extra), Ok(9));
        assert_eq!(tag(&edit), Ok(10));
    }

    #[test]
    fn trailing_bytes_and_truncation_are_decode_errors() {
        let mut bytes = EventBatch {
            events: vec![RawEvent::Constant { value: desc(3) }],
        }
        .to_postcard();
        let truncated = &bytes[..bytes.len() - 1];
        assert!(EventBatch::from_postcard(truncated).is_err());
        bytes.push(0);
        let error = EventBatch::from_postcard(&bytes).unwrap_err();
        assert!(error.to_string().contains("bytes follow the last event"));
    }
}
