//! Error constructors for the codec, so each call site names only its code, message and remedy.

use crate::error::{CoreError, ErrorKind};

pub(crate) fn malformed(
    code: &'static str,
    message: impl Into<String>,
    remedy: &'static str,
) -> CoreError {
    CoreError::new(ErrorKind::MalformedFile, code, message, remedy)
}

pub(crate) fn limit(
    code: &'static str,
    message: impl Into<String>,
    remedy: &'static str,
) -> CoreError {
    CoreError::new(ErrorKind::LimitExceeded, code, message, remedy)
}

/// The remedy for a file that is damaged: nothing in it can be trusted.
pub(crate) const REMEDY_DAMAGED: &str =
    "the file is damaged or not a .tlspec; save the trace again from its source";

/// The remedy for a caller handing the decoder the wrong byte ranges.
pub(crate) const REMEDY_RANGES: &str =
    "pass exactly the byte ranges that header_length/parse_header reported";
