//! The TorchLens browser viewer: the core built with wasm-bindgen for a static page that opens
//! a `.tlspec` file locally (nothing is uploaded).
//!
//! - [`session`]: one opened file; every question the page asks (overview, table rows, graph
//!   layout, op detail, search, value summary) goes through it.
//! - [`views`]: the records the page shows, built from the core's trace model.
//! - [`values`]: saved-value statistics, histogram and heatmap from payload bytes the page reads.
//! - [`error`]: one error type with stable codes (the core's, plus `viewer_` codes).
//! - `bindings` (wasm32 only): the wasm-bindgen exports the page's worker calls.
//! - `fixtures` (native only): test files written with the core's encoder.
//!
//! The page itself is in `host-web/www/`; `scripts/build-web.sh` builds this crate for
//! `wasm32-unknown-unknown` and runs `wasm-bindgen` into `host-web/www/pkg/`.

#![warn(missing_docs)]

// wasm32 only, with its wasm-bindgen dependency: a native build (the tests) then compiles no
// wasm-bindgen macros, whose `syn` features would change the proc macros wasmtime is built with
// in `make test`'s shared Rust build (docs/decisions.md).
#[cfg(target_arch = "wasm32")]
pub mod bindings;
pub mod error;
#[cfg(not(target_arch = "wasm32"))]
pub mod fixtures;
pub mod session;
pub mod values;
pub mod views;

pub use error::{WebError, WebResult};
pub use session::Session;
