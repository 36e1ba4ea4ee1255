//! The viewer's one error type. Core errors keep their family and stable code; the viewer adds
//! a few codes of its own (all `viewer_`), so the page shows every failure the same way.

use serde::Serialize;
use thiserror::Error;
use torchlens_core::{CoreError, ErrorKind};

/// An error the page shows: a family, a stable code, what went wrong and what to do.
#[derive(Debug, Clone, Error, PartialEq, Eq, Serialize)]
#[error("[{code}] {message} (remedy: {remedy})")]
pub struct WebError {
    /// The error family (`malformed-file`, `invalid-selector`, ... for core errors, `viewer`
    /// for the viewer's own).
    pub kind: &'static str,
    /// Stable machine-readable code, e.g. `tlspec_header_too_large`.
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// What to do about it, for a person.
    pub remedy: &'static str,
}

impl WebError {
    /// One of the viewer's own errors.
    pub fn viewer(code: &'static str, message: impl Into<String>, remedy: &'static str) -> Self {
        Self {
            kind: "viewer",
            code,
            message: message.into(),
            remedy,
        }
    }

    /// The error as JSON, for the page.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            // Serializing a struct of plain strings cannot fail; keep a readable fallback.
            format!("{{\"kind\":\"viewer\",\"code\":\"{}\"}}", self.code)
        })
    }
}

/// The family name the page shows for a core error kind (the WIT variant case names).
pub fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidEvents => "invalid-events",
        ErrorKind::InvalidSelector => "invalid-selector",
        ErrorKind::MalformedFile => "malformed-file",
        ErrorKind::UnsupportedVersion => "unsupported-version",
        ErrorKind::LimitExceeded => "limit-exceeded",
        ErrorKind::InvalidTrace => "invalid-trace",
        ErrorKind::NotFound => "not-found",
        ErrorKind::Unsupported => "unsupported",
    }
}

impl From<CoreError> for WebError {
    fn from(error: CoreError) -> Self {
        Self {
            kind: kind_name(error.kind),
            code: error.code,
            message: error.message,
            remedy: error.remedy,
        }
    }
}

/// Result alias for the viewer.
pub type WebResult<T> = Result<T, WebError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_keep_their_code_and_family() {
        let core = CoreError::new(ErrorKind::MalformedFile, "tlspec_too_short", "short", "fix");
        let web = WebError::from(core);
        assert_eq!(web.kind, "malformed-file");
        assert_eq!(web.code, "tlspec_too_short");
        let json: serde_json::Value = serde_json::from_str(&web.to_json()).unwrap();
        assert_eq!(json["code"], "tlspec_too_short");
        assert_eq!(json["remedy"], "fix");
    }
}
