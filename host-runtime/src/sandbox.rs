//! The sandbox: what an instance of the core may use and how long it may run. The component gets no filesystem, no
//! environment, no clocks and no network: every WASI import traps, except the random source
//! std's hash maps ask for at start-up, which gets fixed bytes (nothing in the core depends on
//! randomness, and fixed bytes keep runs reproducible).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, ResourceLimiter};

/// How often the epoch advances when a wall-clock deadline is set.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Limits an instance runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Largest linear memory the component may grow to, in bytes.
    pub memory_bytes: usize,
    /// Fuel per call (roughly, wasm instructions); `None` runs without a fuel budget.
    pub fuel_per_call: Option<u64>,
    /// Wall-clock time per call (epoch interruption); `None` runs without a deadline.
    pub deadline_per_call: Option<Duration>,
}

impl SandboxLimits {
    /// For trusted in-process use (the Python package): a generous memory cap, no fuel.
    pub fn trusted() -> Self {
        Self {
            memory_bytes: 4 << 30,
            fuel_per_call: None,
            deadline_per_call: None,
        }
    }

    /// For untrusted files (the CLI): a tight memory cap, a fuel budget and a 30 s wall-clock
    /// deadline per call.
    pub fn untrusted() -> Self {
        Self {
            memory_bytes: 512 << 20,
            fuel_per_call: Some(20_000_000_000),
            deadline_per_call: Some(Duration::from_secs(30)),
        }
    }

    /// The deadline in epoch ticks (at least one).
    pub(crate) fn deadline_ticks(&self) -> Option<u64> {
        self.deadline_per_call
            .map(|deadline| (deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64)
    }
}

/// Advances an engine's epoch every [`EPOCH_TICK`] on a background thread until dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.clone();
        let stopped = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        });
        Self { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The error a refused memory growth traps with; hosts find it in the trap's error chain
/// (`sandbox_memory_exhausted`) instead of reading the trap's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("the component asked for {desired} bytes of linear memory; the sandbox allows {cap}")]
pub struct MemoryCapExceeded {
    /// The size the component asked to grow a memory to, in bytes.
    pub desired: usize,
    /// The cap it runs under, in bytes.
    pub cap: usize,
}

/// A table growth past the table's own maximum (the sandbox sets no table cap of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("the component asked for {desired} table elements past the table's maximum")]
pub struct TableGrowthRefused {
    /// The element count the component asked for.
    pub desired: usize,
}

/// The store's resource limiter: caps linear memory and turns every refused growth into a
/// trap carrying [`MemoryCapExceeded`], and remembers the refusal, so a memory trap is told
/// apart from any other by a typed signal.
#[derive(Debug, Clone)]
pub struct MemoryLimiter {
    cap: usize,
    /// The size of the last growth allowed (for a growth that then failed in the host).
    last_allowed: usize,
    refused: Option<MemoryCapExceeded>,
}

impl MemoryLimiter {
    /// A limiter allowing linear memories of up to `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            last_allowed: 0,
            refused: None,
        }
    }

    /// The last memory growth this limiter refused, if any (the instance trapped then).
    pub fn refused(&self) -> Option<MemoryCapExceeded> {
        self.refused
    }

    fn refuse(&mut self, desired: usize) -> wasmtime::Error {
        let refusal = MemoryCapExceeded {
            desired,
            cap: self.cap,
        };
        self.refused = Some(refusal);
        wasmtime::Error::new(refusal)
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap || maximum.is_some_and(|maximum| desired > maximum) {
            return Err(self.refuse(desired));
        }
        self.last_allowed = desired;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        // Allowed by `memory_growing` but failed anyway (the host could not map the pages):
        // the component is out of memory all the same.
        let refusal = self.refuse(self.last_allowed);
        Err(refusal.context(format!("{error:#}")))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|maximum| desired > maximum) {
            return Err(wasmtime::Error::new(TableGrowthRefused { desired }));
        }
        Ok(true)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(error)
    }
}

/// Per-store state: the memory limiter.
pub struct StoreState {
    pub(crate) limits: MemoryLimiter,
}

impl StoreState {
    /// State for a store under `limits`.
    pub fn new(limits: &SandboxLimits) -> Self {
        Self {
            limits: MemoryLimiter::new(limits.memory_bytes),
        }
    }

    /// The memory growth the limiter refused, if any.
    pub fn memory_refused(&self) -> Option<MemoryCapExceeded> {
        self.limits.refused()
    }
}

/// Fills `len` bytes deterministically (a fixed pattern, not randomness).
fn fixed_bytes(len: u64) -> Vec<u8> {
    (0..len.min(1 << 16))
        .map(|index| (index as u8).wrapping_mul(31).wrapping_add(7))
        .collect()
}

/// The interfaces the linker answers (with fixed bytes); every other import traps.
const ANSWERED_INTERFACES: [&str; 3] = [
    "wasi:random/random@",
    "wasi:random/insecure-seed@",
    "wasi:random/insecure@",
];

/// Whether the sandbox answers import `name` with something other than a trap.
pub fn answers_for_real(name: &str) -> bool {
    ANSWERED_INTERFACES
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// Builds the linker: fixed random bytes for the random interfaces, traps for everything else.
pub(crate) fn linker(
    engine: &wasmtime::Engine,
    component: &Component,
) -> wasmtime::Result<Linker<StoreState>> {
    let mut linker = Linker::new(engine);
    // Keep in step with ANSWERED_INTERFACES.
    for version in [
        "0.2.0", "0.2.1", "0.2.2", "0.2.3", "0.2.4", "0.2.5", "0.2.6", "0.2.7", "0.2.8",
    ] {
        if let Ok(mut random) = linker.instance(&format!("wasi:random/random@{version}")) {
            random.func_wrap("get-random-bytes", |_store, (len,): (u64,)| {
                Ok((fixed_bytes(len),))
            })?;
            random.func_wrap("get-random-u64", |_store, (): ()| Ok((0x5eed_u64,)))?;
        }
        if let Ok(mut seed) = linker.instance(&format!("wasi:random/insecure-seed@{version}")) {
            seed.func_wrap("insecure-seed", |_store, (): ()| {
                Ok(((0x5eed_u64, 0x7e11_u64),))
            })?;
        }
        if let Ok(mut insecure) = linker.instance(&format!("wasi:random/insecure@{version}")) {
            insecure.func_wrap("get-insecure-random-bytes", |_store, (len,): (u64,)| {
                Ok((fixed_bytes(len),))
            })?;
            insecure.func_wrap("get-insecure-random-u64", |_store, (): ()| {
                Ok((0x5eed_u64,))
            })?;
        }
    }
    linker.define_unknown_imports_as_traps(component)?;
    Ok(linker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limiter_refuses_growth_past_the_cap_and_remembers_it() {
        let mut limiter = MemoryLimiter::new(1 << 20);
        assert!(matches!(limiter.memory_growing(0, 1 << 20, None), Ok(true)));
        assert_eq!(limiter.refused(), None);
        let error = limiter
            .memory_growing(1 << 20, 2 << 20, None)
            .expect_err("past the cap traps");
        let refusal = MemoryCapExceeded {
            desired: 2 << 20,
            cap: 1 << 20,
        };
        assert_eq!(error.downcast_ref::<MemoryCapExceeded>(), Some(&refusal));
        assert_eq!(limiter.refused(), Some(refusal));
    }

    #[test]
    fn the_limiter_honours_a_memory_maximum_below_the_cap() {
        let mut limiter = MemoryLimiter::new(1 << 30);
        assert!(limiter.memory_growing(0, 2 << 16, Some(1 << 16)).is_err());
        assert!(limiter.refused().is_some());
        let mut limiter = MemoryLimiter::new(1 << 30);
        assert!(limiter.table_growing(0, 10, Some(5)).is_err());
        assert!(matches!(limiter.table_growing(0, 10, None), Ok(true)));
        assert_eq!(limiter.refused(), None, "tables are not memory");
    }

    #[test]
    fn a_growth_the_host_could_not_serve_counts_as_exhaustion() {
        let mut limiter = MemoryLimiter::new(1 << 30);
        assert!(matches!(limiter.memory_growing(0, 1 << 16, None), Ok(true)));
        let error = limiter
            .memory_grow_failed(wasmtime::Error::msg("mmap failed"))
            .expect_err("traps");
        assert!(error.downcast_ref::<MemoryCapExceeded>().is_some());
        assert_eq!(
            limiter.refused().map(|refusal| refusal.desired),
            Some(1 << 16)
        );
    }
}
