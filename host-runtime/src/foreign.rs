//! Any component under the core's sandbox: the same linker (every WASI import traps, fixed
//! random bytes) and the same memory and fuel limits. Exists so tests can show, with a
//! component that really tries, what code inside the sandbox can reach: no files, no network,
//! no environment.

use crate::instance::HostError;
use crate::runtime::CoreRuntime;
use crate::sandbox::{self, SandboxLimits, StoreState};
use wasmtime::component::{Component, Instance};
use wasmtime::Store;

/// An instantiated foreign component and its store.
pub struct ForeignComponent {
    pub store: Store<StoreState>,
    pub instance: Instance,
}

impl ForeignComponent {
    /// Compiles and instantiates `bytes` under `limits` (a wall-clock deadline is not applied:
    /// no epoch ticker runs for foreign components).
    pub fn load(bytes: &[u8], limits: SandboxLimits) -> Result<Self, HostError> {
        let limits = SandboxLimits {
            deadline_per_call: None,
            ..limits
        };
        let engine = CoreRuntime::engine(&limits)?;
        let load =
            |what: &str, error: wasmtime::Error| HostError::Load(format!("{what}: {error:#}"));
        let component = Component::new(&engine, bytes).map_err(|error| load("compiling", error))?;
        let linker =
            sandbox::linker(&engine, &component).map_err(|error| load("linking", error))?;
        let mut store = Store::new(&engine, StoreState::new(&limits));
        store.limiter(|state| &mut state.limits);
        if let Some(fuel) = limits.fuel_per_call {
            store.set_fuel(fuel).map_err(|error| load("fuel", error))?;
        }
        let instance = linker
            .instantiate(&mut store, &component)
            .map_err(|error| load("instantiating", error))?;
        Ok(Self { store, instance })
    }
}

/// The imports of a component that the sandbox answers with something other than a trap.
pub fn imports_given_real_answers(bytes: &[u8]) -> Result<Vec<String>, HostError> {
    let limits = SandboxLimits::trusted();
    let engine = CoreRuntime::engine(&limits)?;
    let component = Component::new(&engine, bytes)
        .map_err(|error| HostError::Load(format!("compiling: {error:#}")))?;
    Ok(component
        .component_type()
        .imports(&engine)
        .map(|(name, _)| name.to_owned())
        .filter(|name| sandbox::answers_for_real(name))
        .collect())
}
