//! Folding per-op replay results into one validation status. Backends replay ops and report
//! each decision; the rules that turn those into `passed`, `failed`, `unverified` or
//! `unavailable` live here, once, so every backend folds the same way.

use crate::model::OpId;
use serde::{Deserialize, Serialize};

/// Reason: the op was replayed from its parents' saved values and matched.
pub const REASON_REPLAY_MATCHED: &str = "replay_matched";
/// Reason: the replayed value differed from the saved one.
pub const REASON_REPLAY_MISMATCH: &str = "replay_mismatch";
/// Reason: perturbing a parent did not change the op, so the recorded edge is not shown to
/// matter.
pub const REASON_PARENT_PERTURBATION_INERT: &str = "parent_perturbation_inert";
/// Reason: a constant's payload is read as a leaf, not replayed.
pub const REASON_CONSTANT_PRODUCER_LEAF: &str = "constant_producer_leaf";
/// Reason: the op's parent is a constant whose payload stands in for it.
pub const REASON_CONSTANT_PARENT_PAYLOAD: &str = "constant_parent_payload";
/// Reason: a region the importer could not replay per op.
pub const REASON_OPAQUE_REGION: &str = "opaque_region";
/// Reason: no op could be replayed at all.
pub const REASON_NOTHING_REPLAYED: &str = "nothing_replayed";
/// Reason: a loaded trace whose runtime-only replay data was not saved.
pub const REASON_RUNTIME_CAPTURE_STRIPPED: &str = "loaded_trace_runtime_capture_stripped";
/// Reason: the op's values have shapes and dtypes but no data (torch's `meta` device), so
/// there is nothing to replay or compare. Makes the whole status `unavailable`: nothing was
/// wrong with the capture, and no op can be checked.
pub const REASON_VALUES_NOT_MATERIALIZED: &str = "values_not_materialized";

/// The states of a validation status. Only `Passed` and `Failed` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ValidationState {
    /// Validation can run but has not.
    Available,
    Passed,
    Failed,
    /// Replay was partial: not a pass.
    Unverified,
    /// Validation cannot run (e.g. replay data stripped from a loaded trace).
    Unavailable,
}

impl ValidationState {
    /// The state's public name.
    pub fn name(self) -> &'static str {
        match self {
            ValidationState::Available => "available",
            ValidationState::Passed => "passed",
            ValidationState::Failed => "failed",
            ValidationState::Unverified => "unverified",
            ValidationState::Unavailable => "unavailable",
        }
    }
}

/// What replay did with one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplayOutcome {
    /// Replayed and matched.
    Passed,
    /// Replayed and did not match, or a check on it failed.
    Failed,
    /// Could not be replayed per op (the reason says why).
    NotReplayable,
    /// Not replayed, and needs no replay (a leaf such as an input or constant).
    Leaf,
}

/// One per-op decision, with a reason from the closed set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpDecision {
    pub op: OpId,
    pub outcome: ReplayOutcome,
    pub reason: String,
}

/// The folded status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationStatus {
    pub state: ValidationState,
    pub reason: Option<String>,
    /// On failure, the first failing op in capture order.
    pub first_failed_op: Option<OpId>,
    pub replayed: u32,
    pub failed: u32,
    pub not_replayable: u32,
}

/// Folds decisions: any failure → failed (naming the first failing op); else any op that could
/// not be replayed → unverified (with its reason); else nothing replayed → unverified; else
/// passed. `runtime_capture_available == false` (a loaded trace without its replay data), or
/// any op whose values hold no data ([`REASON_VALUES_NOT_MATERIALIZED`]) → unavailable.
pub fn fold(decisions: &[OpDecision], runtime_capture_available: bool) -> ValidationStatus {
    let mut status = ValidationStatus {
        state: ValidationState::Passed,
        reason: None,
        first_failed_op: None,
        replayed: 0,
        failed: 0,
        not_replayable: 0,
    };
    if !runtime_capture_available {
        status.state = ValidationState::Unavailable;
        status.reason = Some(REASON_RUNTIME_CAPTURE_STRIPPED.to_string());
        return status;
    }
    if let Some(unmaterialized) = decisions
        .iter()
        .find(|decision| decision.reason == REASON_VALUES_NOT_MATERIALIZED)
    {
        status.state = ValidationState::Unavailable;
        status.reason = Some(unmaterialized.reason.clone());
        return status;
    }
    let mut first_failure: Option<&OpDecision> = None;
    let mut first_unreplayable: Option<&OpDecision> = None;
    for decision in decisions {
        match decision.outcome {
            ReplayOutcome::Passed => status.replayed += 1,
            ReplayOutcome::Failed => {
                status.replayed += 1;
                status.failed += 1;
                if first_failure.is_none_or(|first| decision.op < first.op) {
                    first_failure = Some(decision);
                }
            }
            ReplayOutcome::NotReplayable => {
                status.not_replayable += 1;
                if first_unreplayable.is_none_or(|first| decision.op < first.op) {
                    first_unreplayable = Some(decision);
                }
            }
            ReplayOutcome::Leaf => {}
        }
    }
    if let Some(failure) = first_failure {
        status.state = ValidationState::Failed;
        status.reason = Some(failure.reason.clone());
        status.first_failed_op = Some(failure.op);
    } else if let Some(unreplayable) = first_unreplayable {
        status.state = ValidationState::Unverified;
        status.reason = Some(unreplayable.reason.clone());
    } else if status.replayed == 0 {
        status.state = ValidationState::Unverified;
        status.reason = Some(REASON_NOTHING_REPLAYED.to_string());
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(op: OpId, outcome: ReplayOutcome, reason: &str) -> OpDecision {
        OpDecision {
            op,
            outcome,
            reason: reason.to_string(),
        }
    }

    #[test]
    fn any_failure_fails_and_names_the_first() {
        let status = fold(
            &[
                decision(0, ReplayOutcome::Leaf, REASON_CONSTANT_PRODUCER_LEAF),
                decision(4, ReplayOutcome::Failed, REASON_REPLAY_MISMATCH),
                decision(2, ReplayOutcome::Failed, REASON_PARENT_PERTURBATION_INERT),
                decision(3, ReplayOutcome::NotReplayable, REASON_OPAQUE_REGION),
            ],
            true,
        );
        assert_eq!(status.state, ValidationState::Failed);
        assert_eq!(status.first_failed_op, Some(2));
        assert_eq!(
            status.reason.as_deref(),
            Some(REASON_PARENT_PERTURBATION_INERT)
        );
        assert_eq!(
            (status.replayed, status.failed, status.not_replayable),
            (2, 2, 1)
        );
    }

    #[test]
    fn partial_replay_is_unverified_not_passed() {
        let status = fold(
            &[
                decision(1, ReplayOutcome::Passed, REASON_REPLAY_MATCHED),
                decision(2, ReplayOutcome::NotReplayable, REASON_OPAQUE_REGION),
            ],
            true,
        );
        assert_eq!(status.state, ValidationState::Unverified);
        assert_eq!(status.reason.as_deref(), Some(REASON_OPAQUE_REGION));
    }

    #[test]
    fn values_without_data_make_validation_unavailable_not_failed() {
        let status = fold(
            &[
                decision(0, ReplayOutcome::Leaf, "input_leaf"),
                decision(1, ReplayOutcome::Failed, REASON_REPLAY_MISMATCH),
                decision(
                    2,
                    ReplayOutcome::NotReplayable,
                    REASON_VALUES_NOT_MATERIALIZED,
                ),
            ],
            true,
        );
        assert_eq!(status.state, ValidationState::Unavailable);
        assert_eq!(
            status.reason.as_deref(),
            Some(REASON_VALUES_NOT_MATERIALIZED)
        );
    }

    #[test]
    fn nothing_replayed_is_unverified() {
        let status = fold(&[decision(0, ReplayOutcome::Leaf, "input")], true);
        assert_eq!(status.state, ValidationState::Unverified);
        assert_eq!(status.reason.as_deref(), Some(REASON_NOTHING_REPLAYED));
    }

    #[test]
    fn all_replayed_passes() {
        let status = fold(
            &[decision(1, ReplayOutcome::Passed, REASON_REPLAY_MATCHED)],
            true,
        );
        assert_eq!(status.state, ValidationState::Passed);
        assert_eq!(status.reason, None);
    }

    #[test]
    fn stripped_runtime_capture_is_unavailable() {
        let status = fold(
            &[decision(1, ReplayOutcome::Passed, REASON_REPLAY_MATCHED)],
            false,
        );
        assert_eq!(status.state, ValidationState::Unavailable);
        assert_eq!(
            status.reason.as_deref(),
            Some(REASON_RUNTIME_CAPTURE_STRIPPED)
        );
    }
}
