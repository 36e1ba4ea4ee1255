//! One engine and one compiled core component per process.

use crate::bindings::TorchlensCorePre;
use crate::instance::{CoreInstance, HostError};
use crate::sandbox::{self, EpochTicker, SandboxLimits, StoreState};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

/// Where a workspace build leaves the component (`scripts/build-component.sh`), unless
/// `TORCHLENS_COMPONENT` names another file.
pub fn default_component_path() -> PathBuf {
    if let Some(path) = std::env::var_os("TORCHLENS_COMPONENT") {
        return PathBuf::from(path);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    target.join("wasm32-wasip2/release/torchlens_core.wasm")
}

/// A compiled core, ready to instantiate.
pub struct CoreRuntime {
    engine: Engine,
    pre: TorchlensCorePre<StoreState>,
    limits: SandboxLimits,
    /// Present when instances run under a wall-clock deadline; instances share it, so it
    /// ticks while any of them lives.
    ticker: Option<Arc<EpochTicker>>,
}

fn load_error(what: &str, error: impl std::fmt::Display) -> HostError {
    HostError::Load(format!("{what}: {error}"))
}

impl CoreRuntime {
    /// An engine configured for `limits` (fuel metering, epoch interruption).
    pub(crate) fn engine(limits: &SandboxLimits) -> Result<Engine, HostError> {
        let mut config = Config::new();
        config.consume_fuel(limits.fuel_per_call.is_some());
        config.epoch_interruption(limits.deadline_per_call.is_some());
        Engine::new(&config).map_err(|error| load_error("wasmtime engine", error))
    }

    /// Compiles the component from its `.wasm` bytes.
    pub fn from_component_bytes(bytes: &[u8], limits: SandboxLimits) -> Result<Self, HostError> {
        let engine = Self::engine(&limits)?;
        let component = Component::new(&engine, bytes)
            .map_err(|error| load_error("compiling the core component", error))?;
        Self::from_component(engine, component, limits)
    }

    /// Loads the component file, using (and filling) an ahead-of-time compiled copy in
    /// `cache_dir` keyed by the component bytes, the wasmtime version and the engine settings.
    pub fn from_component_file(
        path: &Path,
        cache_dir: Option<&Path>,
        limits: SandboxLimits,
    ) -> Result<Self, HostError> {
        let bytes = std::fs::read(path).map_err(|error| {
            load_error(
                &format!(
                    "reading {} (build it with scripts/build-component.sh)",
                    path.display()
                ),
                error,
            )
        })?;
        Self::from_component_bytes_cached(&bytes, cache_dir, limits)
    }

    /// Compiles component bytes, using (and filling) an ahead-of-time compiled copy in
    /// `cache_dir` keyed by the bytes, the wasmtime version and the engine settings.
    pub fn from_component_bytes_cached(
        bytes: &[u8],
        cache_dir: Option<&Path>,
        limits: SandboxLimits,
    ) -> Result<Self, HostError> {
        let Some(cache_dir) = cache_dir else {
            return Self::from_component_bytes(bytes, limits);
        };
        let engine = Self::engine(&limits)?;
        let cached = cache_dir.join(Self::cache_name(&engine, bytes));
        if let Ok(precompiled) = std::fs::read(&cached) {
            // SAFETY: the file is one this runtime wrote itself, named by the hash of the
            // component bytes, the wasmtime version and the engine's compatibility hash, so it
            // matches this engine. A corrupt cache fails here and falls back to compiling.
            let component = unsafe { Component::deserialize(&engine, &precompiled) };
            if let Ok(component) = component {
                return Self::from_component(engine, component, limits);
            }
        }
        let component = Component::new(&engine, bytes)
            .map_err(|error| load_error("compiling the core component", error))?;
        if let Ok(serialized) = component.serialize() {
            // A cache we cannot write only costs startup time next run.
            let _ = std::fs::create_dir_all(cache_dir);
            let temporary = cached.with_extension("tmp");
            if std::fs::write(&temporary, serialized).is_ok() {
                let _ = std::fs::rename(&temporary, &cached);
            }
        }
        Self::from_component(engine, component, limits)
    }

    fn cache_name(engine: &Engine, bytes: &[u8]) -> String {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut hasher);
        engine.precompile_compatibility_hash().hash(&mut hasher);
        format!(
            "torchlens-core-{}-wasmtime{}-{:016x}.cwasm",
            env!("CARGO_PKG_VERSION"),
            wasmtime_version(),
            hasher.finish()
        )
    }

    fn from_component(
        engine: Engine,
        component: Component,
        limits: SandboxLimits,
    ) -> Result<Self, HostError> {
        let linker = sandbox::linker(&engine, &component)
            .map_err(|error| load_error("linking the core component", error))?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|error| load_error("preparing the core component", error))?;
        let pre = TorchlensCorePre::new(instance_pre)
            .map_err(|error| load_error("checking the core component's exports", error))?;
        let ticker = limits
            .deadline_per_call
            .map(|_| Arc::new(EpochTicker::start(&engine)));
        Ok(Self {
            engine,
            pre,
            limits,
            ticker,
        })
    }

    /// A fresh instance (about 15 µs). After a trap, drop the old instance and take a new one.
    pub fn instantiate(&self) -> Result<CoreInstance, HostError> {
        CoreInstance::new(&self.engine, &self.pre, self.limits, self.ticker.clone())
    }

    /// The limits instances of this runtime run under.
    pub fn limits(&self) -> SandboxLimits {
        self.limits
    }
}

/// The wasmtime version this host embeds.
pub fn wasmtime_version() -> &'static str {
    "48.0.8"
}
