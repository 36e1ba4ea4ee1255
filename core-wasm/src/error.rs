//! One error type for the whole core. Every error carries a stable code (a short snake_case
//! string that hosts match on and documentation lists) and a one-line remedy.

use thiserror::Error;

/// The family an error belongs to; hosts map each family onto one WIT variant case and one
/// Python exception class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The raw capture events an adapter sent are inconsistent.
    InvalidEvents,
    /// A selector is malformed or cannot be used where it was given.
    InvalidSelector,
    /// A `.tlspec` file (or its parts) is malformed.
    MalformedFile,
    /// A `.tlspec` file is well formed but of a format version this core does not read.
    UnsupportedVersion,
    /// An input exceeded one of the core's bounds (ranks, counts, sizes).
    LimitExceeded,
    /// A trace body decoded but breaks an invariant of the trace model.
    InvalidTrace,
    /// A label, index or address that the trace does not hold.
    NotFound,
    /// A request the core understands but cannot honour (for example a payload dtype the
    /// codec cannot store).
    Unsupported,
}

/// An error raised by the core.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("[{code}] {message} (remedy: {remedy})")]
pub struct CoreError {
    /// Which family the error belongs to.
    pub kind: ErrorKind,
    /// Stable machine-readable code, e.g. `tlspec_header_too_large`.
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// What to do about it, for a person.
    pub remedy: &'static str,
}

impl CoreError {
    /// Builds an error; `code` and `remedy` are static so the set of codes stays closed and
    /// greppable.
    pub fn new(
        kind: ErrorKind,
        code: &'static str,
        message: impl Into<String>,
        remedy: &'static str,
    ) -> Self {
        Self {
            kind,
            code,
            message: message.into(),
            remedy,
        }
    }
}

impl From<torchlens_schema::DecodeError> for CoreError {
    /// A batch the schema cannot decode is an `invalid-events` error, `events_undecodable`.
    fn from(error: torchlens_schema::DecodeError) -> Self {
        CoreError::new(
            ErrorKind::InvalidEvents,
            "events_undecodable",
            error.to_string(),
            "encode batches with the documented RawEvent schema and the same core version",
        )
    }
}

/// Result alias used throughout the core.
pub type CoreResult<T> = Result<T, CoreError>;
