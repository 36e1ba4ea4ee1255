//! The exit statuses of `tlspec`, one per kind of outcome, so scripts can branch on them.
//! Documented in `docs/cli.md`; the numbers are part of the CLI's contract.

/// How a `tlspec` run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Done; `check` found nothing wrong, `diff` found no difference.
    Success = 0,
    /// The command ran and found something: `check` a damaged payload, `diff` a difference.
    Findings = 1,
    /// Bad arguments or a bad selector expression.
    Usage = 2,
    /// The file is not a readable `.tlspec` (malformed, not a `.tlspec`, broken invariants).
    InvalidFile = 3,
    /// The file was written in a format version this build does not read.
    UnsupportedVersion = 4,
    /// A limit refused the file: a size bound, or the sandbox's memory, fuel or time budget.
    LimitExceeded = 5,
    /// The file (or an output) could not be read or written.
    Io = 6,
    /// The embedded core could not start, or failed in a way that is a bug.
    Internal = 7,
}

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}
