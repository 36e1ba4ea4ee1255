//! The TorchLens core: everything framework-neutral, written once.
//!
//! - [`events`]: the raw capture events an adapter emits.
//! - [`build`]: turns events into a [`model::Trace`] (labels, passes, distances).
//! - [`model`]: the trace model every host queries.
//! - [`selectors`]: selectors as data, static evaluation and live capture plans.
//! - [`validation`]: folding replay results into a validation status.
//! - [`tlspec`]: the `.tlspec` v1 codec (a safetensors file).
//! - [`layout`]: layered graph layout and SVG drawing.
//! - `component`: the WIT exports, compiled only for the WASI component build.

pub mod build;
pub mod contract;
pub mod error;
pub mod layout;
pub mod model;
pub mod tlspec;

/// The raw event schema and element types live in `torchlens-schema` (shared with hosts that
/// only write events); re-exported so `torchlens_core::events` and `torchlens_core::dtype` keep
/// working.
pub use torchlens_schema::{dtype, events};

/// Escaping of text from a file for terminals (in `torchlens-schema`, so the CLI and the Python
/// extension run the same function): every text renderer of the core uses it.
pub use torchlens_schema::terminal_text;

/// `torchlens-core-build:<hex>`: a digest (FNV-1a 64) of the core's and the schema's sources
/// and of `wit/torchlens.wit`, computed by `build.rs`. The component answers it from
/// `build-id`, and the same text sits in the component's bytes, so a host can prove which
/// sources the core it embeds was built from.
pub const BUILD_ID: &str = env!("TORCHLENS_CORE_BUILD_ID");

pub use build::TraceBuilder;
pub use error::{CoreError, CoreResult, ErrorKind};
pub use model::Trace;
pub mod demo_model;
pub mod query;
pub mod recorder;
pub mod selectors;
pub mod validation;

#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
mod component;
