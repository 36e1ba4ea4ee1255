//! The core component under the sandbox: no filesystem, no network, no environment, a memory
//! cap, a fuel budget and a wall-clock deadline per call (see `host-runtime`'s `sandbox`).

use crate::error::CliError;
use std::time::Duration;
use torchlens_host_runtime::embedded::{default_cache_dir, EMBEDDED_COMPONENT};
use torchlens_host_runtime::{CoreInstance, CoreRuntime, SandboxLimits};

/// Sandbox settings a user may tighten or, for files they trust, loosen.
#[derive(Debug, Clone, Copy)]
pub struct SandboxSettings {
    /// Largest linear memory of the component, in MiB.
    pub memory_mib: u64,
    /// Wall-clock time per call into the component.
    pub timeout: Duration,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        let untrusted = SandboxLimits::untrusted();
        Self {
            memory_mib: (untrusted.memory_bytes >> 20) as u64,
            timeout: untrusted
                .deadline_per_call
                .unwrap_or(Duration::from_secs(30)),
        }
    }
}

/// One sandboxed instance of the core.
pub struct SandboxedCore {
    /// Kept alive for the instance (it owns the compiled component and the epoch ticker).
    _runtime: CoreRuntime,
    instance: CoreInstance,
}

impl SandboxedCore {
    /// Loads the embedded component (the compiled form is cached on disk, so later runs start
    /// in milliseconds) and instantiates it under `settings`.
    pub fn start(settings: SandboxSettings) -> Result<Self, CliError> {
        let limits = SandboxLimits {
            memory_bytes: usize::try_from(settings.memory_mib.saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
            deadline_per_call: Some(settings.timeout),
            ..SandboxLimits::untrusted()
        };
        let runtime = CoreRuntime::from_component_bytes_cached(
            EMBEDDED_COMPONENT,
            default_cache_dir().as_deref(),
            limits,
        )?;
        let instance = runtime.instantiate()?;
        Ok(Self {
            _runtime: runtime,
            instance,
        })
    }

    /// The instance, for calls.
    pub fn instance(&mut self) -> &mut CoreInstance {
        &mut self.instance
    }
}
