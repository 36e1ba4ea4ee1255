//! `tlspec summary`: the same table as `trace.summary()`.

use crate::error::CliError;
use crate::output::Outcome;
use crate::sandboxed_core::SandboxedCore;
use crate::tlspec_file::OpenedTrace;

/// Runs `summary`.
pub fn run(core: &mut SandboxedCore, file: &OpenedTrace) -> Result<Outcome, CliError> {
    let table = core.instance().summary_table(file.trace)?;
    let rows = core.instance().summary(file.trace)?;
    Ok(Outcome::success(
        serde_json::to_value(rows).unwrap_or_default(),
        table,
    ))
}
