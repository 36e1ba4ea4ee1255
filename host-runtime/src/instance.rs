//! An instantiated core and the typed calls hosts make on it.

use crate::bindings::exports::torchlens::core::core::Guest;
use crate::bindings::{TorchlensCore, TorchlensCorePre};
use crate::sandbox::{EpochTicker, MemoryCapExceeded, SandboxLimits, StoreState};
use crate::wit;
use std::sync::Arc;
use thiserror::Error;
use wasmtime::component::ResourceAny;
use wasmtime::{Engine, Store, Trap};

/// Why a host call failed.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum HostError {
    /// The core refused: a typed error with a stable code.
    #[error("[{code}] {message} (remedy: {remedy})")]
    Core {
        /// The WIT variant case (`malformed-file`, `invalid-events`, ...).
        family: &'static str,
        code: String,
        message: String,
        remedy: String,
    },
    /// The sandbox stopped the component (memory cap, fuel, or a bug in the core). The
    /// instance is dead afterwards.
    #[error("[{code}] the core component stopped: {message}")]
    Trap { code: &'static str, message: String },
    /// The component could not be loaded.
    #[error("[core_component_unavailable] {0}")]
    Load(String),
    /// The instance trapped earlier and can no longer be used.
    #[error("[core_instance_dead] this core instance trapped earlier; create a new one")]
    Dead,
}

impl HostError {
    /// The stable code of the error.
    pub fn code(&self) -> &str {
        match self {
            HostError::Core { code, .. } => code,
            HostError::Trap { code, .. } => code,
            HostError::Load(_) => "core_component_unavailable",
            HostError::Dead => "core_instance_dead",
        }
    }
}

impl From<wit::CoreError> for HostError {
    fn from(error: wit::CoreError) -> Self {
        let (family, info) = match error {
            wit::CoreError::InvalidEvents(info) => ("invalid-events", info),
            wit::CoreError::InvalidSelector(info) => ("invalid-selector", info),
            wit::CoreError::MalformedFile(info) => ("malformed-file", info),
            wit::CoreError::UnsupportedVersion(info) => ("unsupported-version", info),
            wit::CoreError::LimitExceeded(info) => ("limit-exceeded", info),
            wit::CoreError::InvalidTrace(info) => ("invalid-trace", info),
            wit::CoreError::NotFound(info) => ("not-found", info),
            wit::CoreError::Unsupported(info) => ("unsupported", info),
        };
        HostError::Core {
            family,
            code: info.code,
            message: info.message,
            remedy: info.remedy,
        }
    }
}

/// The stable code of a failed call, from typed signals only: the memory limiter's refusal
/// (in the error chain, or recorded in the store when `memory_refused`), wasmtime's own
/// out-of-memory error, and the trap codes for fuel and the epoch deadline. Trap text is never
/// read: an out-of-bounds access says "memory" too but is a bug, not exhaustion.
pub(crate) fn trap_code(error: &wasmtime::Error, memory_refused: bool) -> &'static str {
    if memory_refused
        || error.downcast_ref::<MemoryCapExceeded>().is_some()
        || error.downcast_ref::<wasmtime::OutOfMemory>().is_some()
    {
        return "sandbox_memory_exhausted";
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => "sandbox_fuel_exhausted",
        Some(Trap::Interrupt) => "sandbox_deadline_exceeded",
        _ => "sandbox_trap",
    }
}

/// The text of a caught panic (`panic!` with a literal or a formatted message).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

fn trap_error_in(error: wasmtime::Error, store: &Store<StoreState>) -> HostError {
    HostError::Trap {
        code: trap_code(&error, store.data().memory_refused().is_some()),
        message: format!("{error:#}"),
    }
}

/// One instance of the core with its store.
pub struct CoreInstance {
    store: Store<StoreState>,
    bindings: TorchlensCore,
    limits: SandboxLimits,
    dead: bool,
    /// Keeps the epoch advancing while this instance lives (deadline limits only).
    _ticker: Option<Arc<EpochTicker>>,
}

impl CoreInstance {
    pub(crate) fn new(
        engine: &Engine,
        pre: &TorchlensCorePre<StoreState>,
        limits: SandboxLimits,
        ticker: Option<Arc<EpochTicker>>,
    ) -> Result<Self, HostError> {
        let mut store = Store::new(engine, StoreState::new(&limits));
        store.limiter(|state| &mut state.limits);
        if let Some(fuel) = limits.fuel_per_call {
            store
                .set_fuel(fuel)
                .map_err(|error| trap_error_in(error, &store))?;
        }
        if let Some(ticks) = limits.deadline_ticks() {
            store.set_epoch_deadline(ticks);
        }
        let bindings = match pre.instantiate(&mut store) {
            Ok(bindings) => bindings,
            Err(error) => return Err(trap_error_in(error, &store)),
        };
        Ok(Self {
            store,
            bindings,
            limits,
            dead: false,
            _ticker: ticker,
        })
    }

    /// Runs one call into the component: refills fuel, maps a trap to [`HostError::Trap`]
    /// (and marks the instance dead) and a core refusal to [`HostError::Core`]. Every typed
    /// call below goes through here; hosts can use it for any export.
    pub fn call<R>(
        &mut self,
        body: impl FnOnce(&Guest, &mut Store<StoreState>) -> wasmtime::Result<Result<R, wit::CoreError>>,
    ) -> Result<R, HostError> {
        self.call_infallible(body)?.map_err(HostError::from)
    }

    /// Like [`CoreInstance::call`] for exports that cannot refuse.
    pub fn call_infallible<R>(
        &mut self,
        body: impl FnOnce(&Guest, &mut Store<StoreState>) -> wasmtime::Result<R>,
    ) -> Result<R, HostError> {
        if self.dead {
            return Err(HostError::Dead);
        }
        if let Some(fuel) = self.limits.fuel_per_call {
            if let Err(error) = self.store.set_fuel(fuel) {
                return Err(trap_error_in(error, &self.store));
            }
        }
        if let Some(ticks) = self.limits.deadline_ticks() {
            self.store.set_epoch_deadline(ticks);
        }
        let core = self.bindings.torchlens_core_core();
        // A panic in the host side of a call (wasmtime or the bindings) must not unwind into
        // the embedding (Python would see a `PanicException`, which `except Exception` does not
        // catch): the instance is treated like a trapped one and the caller gets a typed error.
        let store = &mut self.store;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(core, store))) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                self.dead = true;
                Err(trap_error_in(error, &self.store))
            }
            Err(panic) => {
                self.dead = true;
                Err(HostError::Trap {
                    code: "core_host_panic",
                    message: panic_message(panic.as_ref()),
                })
            }
        }
    }

    /// Whether a trap ended this instance (every later call answers `core_instance_dead`).
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// The core's version.
    pub fn version(&mut self) -> Result<String, HostError> {
        self.call_infallible(|core, store| core.call_version(store))
    }

    /// The core's build id (`torchlens-core-build:<hex>`), as the running component answers.
    pub fn build_id(&mut self) -> Result<String, HostError> {
        self.call_infallible(|core, store| core.call_build_id(store))
    }

    /// Starts a capture session.
    pub fn start_session(
        &mut self,
        options: wit::TraceOptions,
        plan: Option<&wit::Selector>,
    ) -> Result<ResourceAny, HostError> {
        self.call(|core, store| core.capture_session().call_start(store, options, plan))
    }

    /// Ingests one postcard event batch.
    pub fn ingest(
        &mut self,
        session: ResourceAny,
        batch: &[u8],
    ) -> Result<Vec<wit::Decision>, HostError> {
        self.call(|core, store| core.capture_session().call_ingest(store, session, batch))
    }

    /// Marks a session's capture as stopped early at the ops that produced the adapter's
    /// values `frontier` (`events_unknown_frontier_value` when one is unknown).
    pub fn mark_stopped(
        &mut self,
        session: ResourceAny,
        reason: &str,
        frontier: &[u64],
    ) -> Result<(), HostError> {
        self.call(|core, store| {
            core.capture_session()
                .call_mark_stopped(store, session, reason, frontier)
        })
    }

    /// The session's selector compiled for the adapter's hot path (none without a plan).
    pub fn live_plan(&mut self, session: ResourceAny) -> Result<Option<wit::LivePlan>, HostError> {
        self.call(|core, store| core.capture_session().call_live_plan(store, session))
    }

    /// Registers a rule in a session; returns its index.
    pub fn add_rule(
        &mut self,
        session: ResourceAny,
        selector: &wit::Selector,
    ) -> Result<u32, HostError> {
        self.call(|core, store| {
            core.capture_session()
                .call_add_rule(store, session, selector)
        })
    }

    /// A session rule compiled for the adapter's hot path.
    pub fn rule_plan(
        &mut self,
        session: ResourceAny,
        rule: u32,
    ) -> Result<wit::LivePlan, HostError> {
        self.call(|core, store| core.capture_session().call_rule_plan(store, session, rule))
    }

    /// Whether a session rule matches the op that produced `value` (None while unknown).
    pub fn rule_matches(
        &mut self,
        session: ResourceAny,
        rule: u32,
        value: u64,
    ) -> Result<Option<bool>, HostError> {
        self.call(|core, store| {
            core.capture_session()
                .call_rule_matches(store, session, rule, value)
        })
    }

    /// The core's normalized type of a function name.
    pub fn op_type(&mut self, func_name: &str) -> Result<String, HostError> {
        self.call_infallible(|core, store| core.call_op_type(store, func_name))
    }

    /// `text` with its terminal control characters escaped, as every host shows file strings.
    pub fn escape_terminal_text(&mut self, text: &str) -> Result<String, HostError> {
        self.call_infallible(|core, store| core.call_escape_terminal_text(store, text))
    }

    /// Keeps payload references only for the adapter's payload `slots`.
    pub fn keep_payloads(&mut self, trace: ResourceAny, slots: &[u64]) -> Result<(), HostError> {
        self.call_infallible(|core, store| core.trace().call_keep_payloads(store, trace, slots))
    }

    /// Finishes a session: the trace handle and the last decisions.
    pub fn finish(
        &mut self,
        session: ResourceAny,
    ) -> Result<(ResourceAny, Vec<wit::Decision>), HostError> {
        self.call(|core, store| core.capture_session().call_finish(store, session))
    }

    /// Facts about a trace.
    pub fn trace_info(&mut self, trace: ResourceAny) -> Result<wit::TraceInfo, HostError> {
        self.call_infallible(|core, store| core.trace().call_info(store, trace))
    }

    /// The trace body (postcard).
    pub fn body(&mut self, trace: ResourceAny) -> Result<Vec<u8>, HostError> {
        self.call_infallible(|core, store| core.trace().call_body(store, trace))
    }

    /// A trace rebuilt from a postcard body.
    pub fn from_body(&mut self, body: &[u8]) -> Result<ResourceAny, HostError> {
        self.call(|core, store| core.trace().call_from_body(store, body))
    }

    /// Lays out a `.tlspec` for the trace.
    pub fn encode(
        &mut self,
        trace: ResourceAny,
        manifest: &wit::Manifest,
    ) -> Result<wit::EncodedLayout, HostError> {
        self.call(|core, store| core.trace().call_encode(store, trace, manifest))
    }

    /// Reads the header length from a file's first bytes.
    pub fn tlspec_header_length(&mut self, first_bytes: &[u8]) -> Result<u64, HostError> {
        self.call(|core, store| core.call_tlspec_header_length(store, first_bytes))
    }

    /// Parses a header (length prefix + JSON).
    pub fn parse_tlspec_header(
        &mut self,
        header: &[u8],
        file_length: u64,
    ) -> Result<wit::HeaderInfo, HostError> {
        self.call(|core, store| core.call_parse_tlspec_header(store, header, file_length))
    }

    /// Decodes a file's header and body into a trace.
    pub fn decode_tlspec(
        &mut self,
        header: &[u8],
        body: &[u8],
        file_length: u64,
    ) -> Result<(wit::HeaderInfo, ResourceAny), HostError> {
        self.call(|core, store| core.call_decode_tlspec(store, header, body, file_length))
    }

    /// `count` ops of a trace from `start` (fewer at the end).
    pub fn ops(
        &mut self,
        trace: ResourceAny,
        start: u32,
        count: u32,
    ) -> Result<Vec<wit::OpInfo>, HostError> {
        self.call_infallible(|core, store| core.trace().call_ops(store, trace, start, count))
    }

    /// The layers of a trace.
    pub fn layers(&mut self, trace: ResourceAny) -> Result<Vec<wit::LayerInfo>, HostError> {
        self.call_infallible(|core, store| core.trace().call_layers(store, trace))
    }

    /// The modules of a trace.
    pub fn modules(&mut self, trace: ResourceAny) -> Result<Vec<wit::ModuleInfo>, HostError> {
        self.call_infallible(|core, store| core.trace().call_modules(store, trace))
    }

    /// The parameters of a trace.
    pub fn params(&mut self, trace: ResourceAny) -> Result<Vec<wit::ParamInfo>, HostError> {
        self.call_infallible(|core, store| core.trace().call_params(store, trace))
    }

    /// The summary table's rows.
    pub fn summary(&mut self, trace: ResourceAny) -> Result<Vec<wit::SummaryRow>, HostError> {
        self.call_infallible(|core, store| core.trace().call_summary(store, trace))
    }

    /// The summary table as text (what `trace.summary()` prints).
    pub fn summary_table(&mut self, trace: ResourceAny) -> Result<String, HostError> {
        self.call_infallible(|core, store| core.trace().call_summary_table(store, trace))
    }

    /// The graph drawn as SVG.
    pub fn svg(&mut self, trace: ResourceAny, view: &wit::LayoutView) -> Result<String, HostError> {
        self.call(|core, store| core.trace().call_svg(store, trace, view))
    }

    /// A selector parsed from its text form (`func:relu & in_module:encoder`).
    pub fn parse_selector(&mut self, expression: &str) -> Result<wit::Selector, HostError> {
        self.call(|core, store| core.call_parse_selector(store, expression))
    }

    /// Ops matched by a selector.
    pub fn select(
        &mut self,
        trace: ResourceAny,
        selector: &wit::Selector,
        where_results: &[wit::WhereResult],
    ) -> Result<Vec<u32>, HostError> {
        self.call(|core, store| {
            core.trace()
                .call_select(store, trace, selector, where_results)
        })
    }

    /// Releases a resource handle (trace or session) inside the component.
    pub fn drop_resource(&mut self, resource: ResourceAny) -> Result<(), HostError> {
        if self.dead {
            return Err(HostError::Dead);
        }
        match resource.resource_drop(&mut self.store) {
            Ok(()) => Ok(()),
            Err(error) => Err(trap_error_in(error, &self.store)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traps_are_classified_by_their_typed_signal_not_their_text() {
        // "out of bounds memory access" mentions memory but is a bug, not exhaustion.
        let out_of_bounds = wasmtime::Error::new(Trap::MemoryOutOfBounds);
        assert!(format!("{out_of_bounds:#}").contains("memory"));
        assert_eq!(trap_code(&out_of_bounds, false), "sandbox_trap");
        let refused = wasmtime::Error::new(MemoryCapExceeded {
            desired: 2 << 20,
            cap: 1 << 20,
        })
        .context("while growing");
        assert_eq!(trap_code(&refused, false), "sandbox_memory_exhausted");
        // A trap after a refusal the limiter recorded (whatever the trap says).
        let unreachable = wasmtime::Error::new(Trap::UnreachableCodeReached);
        assert_eq!(trap_code(&unreachable, true), "sandbox_memory_exhausted");
        assert_eq!(trap_code(&unreachable, false), "sandbox_trap");
        let fuel = wasmtime::Error::new(Trap::OutOfFuel);
        assert_eq!(trap_code(&fuel, false), "sandbox_fuel_exhausted");
        let deadline = wasmtime::Error::new(Trap::Interrupt);
        assert_eq!(trap_code(&deadline, false), "sandbox_deadline_exceeded");
        let text = wasmtime::Error::msg("memory memory memory");
        assert_eq!(trap_code(&text, false), "sandbox_trap");
    }
}
