//! The capability gate, fail-closed in both directions: a False flag refuses with the
//! capability's refusal code, and a True flag admits only through an implementation the
//! backend binds; a True flag with no implementation is a conformance error, both when the
//! backend registers and at the gate (in case registration was bypassed).

use super::capabilities::capability_named;
use crate::error::{CoreError, CoreResult, ErrorKind};

/// What a backend declares: its name, its capability flags and the capabilities it binds an
/// implementation to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendDeclaration {
    pub name: String,
    /// `(capability, flag)` for every capability it declares; unlisted ones count as False.
    pub capabilities: Vec<(String, bool)>,
    /// Capabilities with a bound implementation.
    pub implementations: Vec<String>,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateOutcome {
    /// Admitted through the bound implementation.
    Admitted,
    /// Refused with this refusal code (the flag is False).
    Refused { code: &'static str },
}

fn conformance(message: String) -> CoreError {
    CoreError::new(
        ErrorKind::Unsupported,
        "backend_capability_conformance",
        message,
        "bind an implementation for every capability flagged True, or set the flag to False",
    )
}

fn unknown_capability(name: &str) -> CoreError {
    CoreError::new(
        ErrorKind::NotFound,
        "capability_unknown",
        format!("no capability is named {name:?}"),
        "use one of the capability names the core exports",
    )
}

fn flag(declaration: &BackendDeclaration, capability: &str) -> bool {
    declaration
        .capabilities
        .iter()
        .any(|(name, value)| name == capability && *value)
}

/// Checks a declaration at registration: every capability is known, and every True flag has
/// a bound implementation.
pub fn register(declaration: &BackendDeclaration) -> CoreResult<()> {
    for (name, value) in &declaration.capabilities {
        if capability_named(name).is_none() {
            return Err(unknown_capability(name));
        }
        if *value
            && !declaration
                .implementations
                .iter()
                .any(|bound| bound == name)
        {
            return Err(conformance(format!(
                "backend {:?} flags {name:?} True but binds no implementation for it",
                declaration.name
            )));
        }
    }
    Ok(())
}

/// Decides whether `declaration` may serve `capability`.
pub fn gate(declaration: &BackendDeclaration, capability: &str) -> CoreResult<GateOutcome> {
    let record = capability_named(capability).ok_or_else(|| unknown_capability(capability))?;
    if !flag(declaration, capability) {
        return Ok(GateOutcome::Refused {
            code: record.refusal,
        });
    }
    if declaration
        .implementations
        .iter()
        .any(|bound| bound == capability)
    {
        Ok(GateOutcome::Admitted)
    } else {
        Err(conformance(format!(
            "backend {:?} flags {capability:?} True but binds no implementation for it",
            declaration.name
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{CAPABILITIES, REFUSAL_CODES, VALIDATION_REASONS};

    fn declaration(flags: &[(&str, bool)], implementations: &[&str]) -> BackendDeclaration {
        BackendDeclaration {
            name: "test".into(),
            capabilities: flags
                .iter()
                .map(|(name, value)| (name.to_string(), *value))
                .collect(),
            implementations: implementations
                .iter()
                .map(|name| name.to_string())
                .collect(),
        }
    }

    #[test]
    fn false_flags_refuse_with_the_capability_code() {
        let backend = declaration(&[("intervene", false)], &[]);
        assert_eq!(
            gate(&backend, "intervene").unwrap(),
            GateOutcome::Refused {
                code: "intervene_unsupported"
            }
        );
        // Unlisted capabilities are False.
        assert_eq!(
            gate(&backend, "stop_after").unwrap(),
            GateOutcome::Refused {
                code: "stop_after_unsupported"
            }
        );
    }

    #[test]
    fn true_flags_need_a_bound_implementation() {
        let bound = declaration(&[("draw", true)], &["draw"]);
        assert!(register(&bound).is_ok());
        assert_eq!(gate(&bound, "draw").unwrap(), GateOutcome::Admitted);
        let unbound = declaration(&[("draw", true)], &[]);
        assert_eq!(
            register(&unbound).unwrap_err().code,
            "backend_capability_conformance"
        );
        assert_eq!(
            gate(&unbound, "draw").unwrap_err().code,
            "backend_capability_conformance"
        );
    }

    #[test]
    fn unknown_capabilities_are_errors() {
        let backend = declaration(&[("teleport", true)], &["teleport"]);
        assert_eq!(register(&backend).unwrap_err().code, "capability_unknown");
        assert_eq!(
            gate(&backend, "teleport").unwrap_err().code,
            "capability_unknown"
        );
    }

    #[test]
    fn code_sets_are_closed_and_consistent() {
        let mut codes: Vec<&str> = REFUSAL_CODES.iter().map(|entry| entry.code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), REFUSAL_CODES.len(), "refusal codes are unique");
        for capability in CAPABILITIES {
            assert!(
                codes.contains(&capability.refusal),
                "{} refuses with an unregistered code",
                capability.name
            );
        }
        for reason in [
            crate::validation::REASON_REPLAY_MATCHED,
            crate::validation::REASON_REPLAY_MISMATCH,
            crate::validation::REASON_PARENT_PERTURBATION_INERT,
            crate::validation::REASON_CONSTANT_PRODUCER_LEAF,
            crate::validation::REASON_CONSTANT_PARENT_PAYLOAD,
            crate::validation::REASON_OPAQUE_REGION,
            crate::validation::REASON_NOTHING_REPLAYED,
            crate::validation::REASON_RUNTIME_CAPTURE_STRIPPED,
        ] {
            assert!(
                VALIDATION_REASONS.iter().any(|entry| entry.code == reason),
                "{reason} is not a registered validation reason"
            );
        }
    }
}
