//! The schema of what crosses from a framework adapter into the TorchLens core during capture:
//! the raw events ([`events`]) and their batches as a host encodes them ([`batch_encoder`]), the
//! element types they name ([`dtype`]) and the shape type; and the chunked record list both
//! sides keep long captures in ([`chunked_table`]); and the one function that makes text from a
//! file safe to print in a terminal ([`terminal_text`]), which hosts that do not link the core
//! share with it.
//!
//! Hosts that only *write* events (the Python extension) depend on this crate alone, so they
//! build event batches without linking the core itself; the core depends on it to read them.
//! Everything here is plain serde data encoded with postcard.

pub mod batch_encoder;
pub mod chunked_table;
pub mod dtype;
pub mod events;
pub mod terminal_text;

pub use batch_encoder::{BatchEncoder, EncodedEvents};
pub use dtype::Dtype;
pub use events::{DecodeError, EventBatch, EventStream, RawEvent};

/// A tensor shape. Inline up to rank four, so the common case needs no heap allocation.
pub type Shape = smallvec::SmallVec<[u64; 4]>;
