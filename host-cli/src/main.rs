//! `tlspec`: inspect, check, draw and compare `.tlspec` trace files, with the TorchLens core
//! running in a sandbox. See `docs/cli.md`.

mod cli;
mod commands;
mod error;
mod exit_status;
mod output;
mod output_file;
mod sandboxed_core;
mod tlspec_file;

use clap::Parser;
use cli::Cli;
use error::CliError;
use exit_status::ExitStatus;
use sandboxed_core::SandboxSettings;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version are not usage errors.
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() {
                ExitStatus::Usage.code()
            } else {
                ExitStatus::Success.code()
            });
        }
    };
    let json = cli.json;
    let result = settings(&cli).and_then(|settings| commands::run(&cli.command, settings, json));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let status = match result {
        Ok(outcome) => {
            let written = if json {
                writeln!(out, "{}", output::json_text(&outcome.json))
            } else {
                out.write_all(outcome.text.as_bytes())
            };
            // A closed pipe (`tlspec ops f | head`) is not an error worth reporting.
            match written {
                Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => ExitStatus::Io,
                _ => outcome.status,
            }
        }
        Err(error) => {
            if json {
                let body = serde_json::json!({ "error": error, "exit": error.exit.code() });
                let _ = writeln!(out, "{}", output::json_text(&body));
            } else {
                eprintln!("tlspec: {}", error.for_terminal());
            }
            error.exit
        }
    };
    ExitCode::from(status.code())
}

fn settings(cli: &Cli) -> Result<SandboxSettings, CliError> {
    if !(cli.timeout.is_finite() && cli.timeout > 0.0) || cli.memory_mib == 0 {
        return Err(CliError::new(
            ExitStatus::Usage,
            "usage_invalid_limit",
            "--timeout and --memory-mib must be positive",
            "for example --timeout 60 --memory-mib 1024",
        ));
    }
    Ok(SandboxSettings {
        memory_mib: cli.memory_mib,
        timeout: Duration::from_secs_f64(cli.timeout),
    })
}
