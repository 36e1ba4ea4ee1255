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
pub mod dtype;
pub mod error;
pub mod events;
pub mod layout;
pub mod model;
pub mod tlspec;

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
