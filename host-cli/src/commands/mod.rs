//! One module per subcommand. Each opens its file(s) in the sandboxed core and returns an
//! [`Outcome`]; none prints.

mod check;
mod diff;
mod draw;
mod export;
mod inspect;
mod ops;
mod summary;
mod view;

use crate::cli::Command;
use crate::error::CliError;
use crate::output::Outcome;
use crate::sandboxed_core::{SandboxSettings, SandboxedCore};
use crate::tlspec_file::OpenedTrace;
use std::path::Path;

/// Runs a subcommand.
pub fn run(command: &Command, settings: SandboxSettings, json: bool) -> Result<Outcome, CliError> {
    // Arguments are checked before the sandbox starts or any file is opened.
    if let Command::Diff { tolerance, .. } = command {
        diff::check_tolerance(*tolerance)?;
    }
    let mut core = SandboxedCore::start(settings)?;
    let open = |path: &Path, core: &mut SandboxedCore| {
        OpenedTrace::open(core.instance(), path, settings.memory_mib)
    };
    match command {
        Command::Inspect(arg) => {
            let file = open(&arg.file, &mut core)?;
            inspect::run(&mut core, &file)
        }
        Command::Summary(arg) => {
            let file = open(&arg.file, &mut core)?;
            summary::run(&mut core, &file)
        }
        Command::Ops { file, selector } => {
            let file = open(file, &mut core)?;
            ops::run(&mut core, &file, selector.as_deref())
        }
        Command::Check(arg) => {
            let mut file = open(&arg.file, &mut core)?;
            check::run(&mut file)
        }
        Command::Export { file } => {
            let file = open(file, &mut core)?;
            export::run(&mut core, &file)
        }
        Command::Draw {
            file,
            full,
            backward,
            output,
            ..
        } => {
            let file = open(file, &mut core)?;
            let view = if *backward {
                draw::View::Backward
            } else if *full {
                draw::View::Full
            } else {
                draw::View::Collapsed
            };
            draw::run(&mut core, &file, view, output.as_deref())
        }
        Command::View {
            file,
            port,
            web_root,
        } => {
            // Checked in the sandbox first, so a broken file is reported here, not in a page.
            let file = open(file, &mut core)?;
            view::run(&file, web_root.as_deref(), *port, json)?;
            Ok(Outcome::success(serde_json::Value::Null, String::new()))
        }
        Command::Diff { a, b, tolerance } => {
            let mut first = open(a, &mut core)?;
            let mut second = open(b, &mut core)?;
            diff::run(&mut core, &mut first, &mut second, *tolerance)
        }
    }
}
