//! Runs the TorchLens core component under wasmtime for native hosts (the CLI, the Python
//! package, the tests and benchmarks).
//!
//! - [`runtime`]: one engine and compiled component per process, with an on-disk cache of the
//!   ahead-of-time compiled component so that startup stays fast.
//! - [`component_cache`]: the verified on-disk cache of the compiled component (private
//!   folder, SHA-256 key and checksum, atomic writes).
//! - [`sandbox`]: the limits every instance runs under (memory cap, optional fuel) and the
//!   imports it gets (none that reach the outside world).
//! - [`instance`]: an instantiated core with typed calls; any trap ends the instance.
//! - [`foreign`]: any other component under the same sandbox (for tests of the sandbox).
//! - [`embedded`]: the component built into the host (feature `embedded-component`) and the
//!   cache folder for its compiled form.

pub mod component_cache;
pub mod embedded;
pub mod foreign;
pub mod instance;
pub mod runtime;
pub mod sandbox;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "torchlens-core",
        // Hosts print what the core returns (`tlspec export --json`).
        additional_derives: [serde::Serialize],
    });
}

pub use bindings::torchlens::core::types as wit;
pub use component_cache::CacheOutcome;
pub use instance::{CoreInstance, HostError};
pub use runtime::{default_component_path, CoreRuntime};
pub use sandbox::SandboxLimits;
/// A handle on a resource (trace or session) inside the component.
pub use wasmtime::component::ResourceAny;
