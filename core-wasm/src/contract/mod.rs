//! The backend contract's framework-neutral parts: the closed set of refusal codes (each with
//! its owner), the closed set of validation reasons, the capability table and the gate that
//! decides, fail-closed in both directions, whether a backend may serve a request.

mod capabilities;
mod codes;
mod gate;

pub use capabilities::{Capability, CAPABILITIES};
pub use codes::{RefusalCode, ValidationReason, REFUSAL_CODES, VALIDATION_REASONS};
pub use gate::{gate, register, BackendDeclaration, GateOutcome};
