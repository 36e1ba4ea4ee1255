//! One engine and one compiled core component per process.

use crate::bindings::TorchlensCorePre;
use crate::component_cache::{self, CacheOutcome};
use crate::instance::{CoreInstance, HostError};
use crate::sandbox::{self, EpochTicker, SandboxLimits, StoreState};
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
    /// What the on-disk cache did when this runtime was created.
    cache_outcome: CacheOutcome,
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

    /// Loads the component file, using (and filling) the verified ahead-of-time compiled copy
    /// in `cache_dir` (see [`CoreRuntime::from_component_bytes_cached`]).
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
    /// `cache_dir`. The copy is read only from a folder private to this user and deserialised
    /// only after it verifies against a SHA-256 key of the bytes, the wasmtime version and the
    /// engine settings (see [`crate::component_cache`]); anything else compiles in memory.
    pub fn from_component_bytes_cached(
        bytes: &[u8],
        cache_dir: Option<&Path>,
        limits: SandboxLimits,
    ) -> Result<Self, HostError> {
        let Some(cache_dir) = cache_dir else {
            return Self::from_component_bytes(bytes, limits);
        };
        let engine = Self::engine(&limits)?;
        if let Err(reason) = component_cache::private_folder(cache_dir) {
            let component = Component::new(&engine, bytes)
                .map_err(|error| load_error("compiling the core component", error))?;
            return Self::from_component(engine, component, limits)
                .map(|runtime| runtime.with_outcome(CacheOutcome::UnsafeFolder(reason)));
        }
        let key = component_cache::cache_key(&engine, bytes, wasmtime_version());
        let cached = component_cache::artifact_path(cache_dir, &key);
        let mut outcome = CacheOutcome::Compiled;
        match component_cache::read_artifact(&cached) {
            Ok(None) => {}
            Ok(Some(artifact)) => match component_cache::verified_artifact(&artifact, &key) {
                Ok(compiled) => {
                    // SAFETY: the bytes come from a file private to this user, and they carry
                    // the key of these component bytes and this engine's settings and match
                    // their SHA-256: they are what `serialize` produced for this engine.
                    match unsafe { Component::deserialize(&engine, compiled) } {
                        Ok(component) => {
                            return Self::from_component(engine, component, limits)
                                .map(|runtime| runtime.with_outcome(CacheOutcome::Loaded));
                        }
                        Err(error) => outcome = CacheOutcome::Rejected(error.to_string()),
                    }
                }
                Err(reason) => outcome = CacheOutcome::Rejected(reason),
            },
            Err(reason) => outcome = CacheOutcome::Rejected(reason),
        }
        let component = Component::new(&engine, bytes)
            .map_err(|error| load_error("compiling the core component", error))?;
        if let Ok(compiled) = component.serialize() {
            component_cache::write_artifact(
                &cached,
                &component_cache::artifact_bytes(&compiled, &key),
            );
        }
        Self::from_component(engine, component, limits).map(|runtime| runtime.with_outcome(outcome))
    }

    fn with_outcome(mut self, outcome: CacheOutcome) -> Self {
        self.cache_outcome = outcome;
        self
    }

    /// What the on-disk cache did when this runtime was created.
    pub fn cache_outcome(&self) -> &CacheOutcome {
        &self.cache_outcome
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
            cache_outcome: CacheOutcome::Disabled,
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
