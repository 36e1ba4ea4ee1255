//! `tlspec export --json`: all metadata of a trace as one JSON document.

use crate::error::CliError;
use crate::output::Outcome;
use crate::sandboxed_core::SandboxedCore;
use crate::tlspec_file::OpenedTrace;
use serde_json::json;

/// Runs `export`. The document is the output in both modes: export exists to produce JSON.
pub fn run(core: &mut SandboxedCore, file: &OpenedTrace) -> Result<Outcome, CliError> {
    let ops = file.ops(core.instance())?;
    let instance = core.instance();
    let document = json!({
        "format_version": file.header.format_version,
        "manifest": file.header.manifest,
        "payloads": file.header.payloads,
        "trace": instance.trace_info(file.trace)?,
        "ops": ops,
        "layers": instance.layers(file.trace)?,
        "modules": instance.modules(file.trace)?,
        "params": instance.params(file.trace)?,
    });
    let text = format!("{document:#}\n");
    Ok(Outcome::success(document, text))
}
