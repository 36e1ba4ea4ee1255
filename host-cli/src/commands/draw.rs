//! `tlspec draw --svg`: the graph as SVG, laid out by the core (the module overview, every op
//! with `--full`, or the backward graph with `--backward`).

use crate::error::CliError;
use crate::output::{shown, Outcome};
use crate::output_file::write_output_file;
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
            write_output_file(path, svg.as_bytes())?;
            let json = json!({"view": view_name, "output": path.display().to_string(), "bytes": svg.len()});
            let text = format!(
                "wrote {} ({view_name} view, {} bytes)\n",
                shown(&path.display().to_string()),
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
