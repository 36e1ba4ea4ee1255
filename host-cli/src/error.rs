//! Errors of the CLI: a stable code, a message, a remedy, and the exit status they end with.

use crate::exit_status::ExitStatus;
use crate::output::shown;
use serde::Serialize;
use thiserror::Error;
use torchlens_host_runtime::HostError;

/// Why a command could not finish.
#[derive(Debug, Clone, Error, Serialize)]
#[error("[{code}] {message}\n  remedy: {remedy}")]
pub struct CliError {
    /// Stable code (the core's, `sandbox_*`, or the CLI's own `io_*`/`usage_*`).
    pub code: String,
    pub message: String,
    pub remedy: String,
    #[serde(skip)]
    pub exit: ExitStatus,
}

impl CliError {
    /// An error with the given parts.
    pub fn new(
        exit: ExitStatus,
        code: &str,
        message: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            remedy: remedy.into(),
            exit,
        }
    }

    /// The error as shown on a terminal: its message and remedy (which may quote strings from
    /// the file) with control characters escaped. `Display` keeps them exact, for JSON.
    pub fn for_terminal(&self) -> String {
        format!(
            "[{}] {}\n  remedy: {}",
            shown(&self.code),
            shown(&self.message),
            shown(&self.remedy)
        )
    }

    /// A failed read or write of `path`.
    pub fn io(path: &std::path::Path, error: &std::io::Error) -> Self {
        Self::new(
            ExitStatus::Io,
            "io_error",
            format!("{}: {error}", path.display()),
            "check that the path exists and is readable (or writable, for outputs)",
        )
    }
}

/// A core remedy as the CLI should say it. The core's remedies are written for every host; a
/// few name the Python API (`tl.func`, ...), which means nothing to a `tlspec` user: those are
/// replaced with what to do on the command line.
fn cli_remedy(family: &str, remedy: String) -> String {
    if !remedy.contains("tl.") {
        return remedy;
    }
    match family {
        "invalid-selector" => "write a selector expression such as `func:relu & in_module:encoder` \
                               or `followed_by(func:conv2d, func:relu, 2)` (a window of 1 to 65536); \
                               `tlspec ops --help` shows the grammar"
            .to_owned(),
        _ => "see `tlspec --help` and docs/cli.md for what this command accepts".to_owned(),
    }
}

impl From<HostError> for CliError {
    fn from(error: HostError) -> Self {
        match error {
            HostError::Core {
                family,
                code,
                message,
                remedy,
            } => {
                let remedy = cli_remedy(family, remedy);
                let exit = match family {
                    "malformed-file" | "invalid-trace" | "not-found" => ExitStatus::InvalidFile,
                    "unsupported-version" => ExitStatus::UnsupportedVersion,
                    "limit-exceeded" => ExitStatus::LimitExceeded,
                    "invalid-selector" => ExitStatus::Usage,
                    _ => ExitStatus::Internal,
                };
                Self {
                    code,
                    message,
                    remedy,
                    exit,
                }
            }
            HostError::Trap { code, message } => {
                let exit = if code == "sandbox_trap" {
                    ExitStatus::Internal
                } else {
                    ExitStatus::LimitExceeded
                };
                Self::new(
                    exit,
                    code,
                    format!("the sandboxed core stopped: {message}"),
                    "the file needs more memory or time than the sandbox allows; if you trust \
                     it, raise --memory-mib / --timeout",
                )
            }
            other => Self::new(
                ExitStatus::Internal,
                other.code(),
                other.to_string(),
                "report this as a bug",
            ),
        }
    }
}
