//! `tlspec draw --svg`: the graph as SVG, laid out by the core.

use crate::error::CliError;
use crate::exit_status::ExitStatus;
use crate::output::Outcome;
use crate::sandboxed_core::SandboxedCore;
use crate::tlspec_file::OpenedTrace;
use serde_json::json;
use std::path::Path;
use torchlens_host_runtime::wit::LayoutView;

/// Runs `draw`: writes the SVG to `output`, or returns it as the text to print.
pub fn run(
    core: &mut SandboxedCore,
    file: &OpenedTrace,
    full: bool,
    output: Option<&Path>,
) -> Result<Outcome, CliError> {
    let view = if full {
        LayoutView::Full
    } else {
        LayoutView::Collapsed(Vec::new())
    };
    let svg = core.instance().svg(file.trace, &view)?;
    let view_name = if full { "full" } else { "collapsed" };
    match output {
        Some(path) => {
            write_atomically(path, svg.as_bytes())?;
            let json = json!({"view": view_name, "output": path.display().to_string(), "bytes": svg.len()});
            let text = format!(
                "wrote {} ({view_name} view, {} bytes)\n",
                path.display(),
                svg.len()
            );
            Ok(Outcome::success(json, text))
        }
        None => Ok(Outcome::success(
            json!({"view": view_name, "svg": svg}),
            svg,
        )),
    }
}

/// Writes through a temporary file in the same folder, so a failed write leaves no half file.
fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), CliError> {
    let folder = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty());
    let name = path.file_name().ok_or_else(|| {
        CliError::new(
            ExitStatus::Usage,
            "usage_invalid_output",
            format!("{} does not name a file", path.display()),
            "give a file path to --output",
        )
    })?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(name);
    temporary_name.push(".partial");
    let temporary = folder.map_or_else(
        || temporary_name.clone().into(),
        |folder| folder.join(&temporary_name),
    );
    std::fs::write(&temporary, contents)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            CliError::io(path, &error)
        })
}
