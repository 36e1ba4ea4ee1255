//! `tlspec draw --svg`: the graph as SVG, laid out by the core (the module overview, every op
//! with `--full`, or the backward graph with `--backward`).

use crate::error::CliError;
use crate::exit_status::ExitStatus;
use crate::output::Outcome;
use crate::sandboxed_core::SandboxedCore;
use crate::tlspec_file::OpenedTrace;
use serde_json::json;
use std::path::Path;
use torchlens_host_runtime::wit::LayoutView;

/// Which graph `draw` lays out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Collapsed,
    Full,
    Backward,
}

/// Runs `draw`: writes the SVG to `output`, or returns it as the text to print.
pub fn run(
    core: &mut SandboxedCore,
    file: &OpenedTrace,
    view: View,
    output: Option<&Path>,
) -> Result<Outcome, CliError> {
    let (layout_view, view_name) = match view {
        View::Collapsed => (LayoutView::Collapsed(Vec::new()), "collapsed"),
        View::Full => (LayoutView::Full, "full"),
        View::Backward => (LayoutView::Backward, "backward"),
    };
    let svg = core.instance().svg(file.trace, &layout_view)?;
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
