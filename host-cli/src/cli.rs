//! The command line: global sandbox flags, `--json`, and one subcommand per task.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

const EXIT_STATUSES: &str = "\
Exit statuses:
  0  done; check found nothing wrong; diff found no difference
  1  check found a damaged payload, or diff found a difference
  2  bad arguments or selector expression
  3  not a readable .tlspec (malformed, not a .tlspec, broken invariants)
  4  a .tlspec format version this build does not read
  5  a limit refused the file (size bound, sandbox memory, fuel or time)
  6  a file could not be read or written
  7  internal error (the embedded core could not start)";

/// Opens .tlspec traces from anyone: the TorchLens core reads them inside a wasmtime sandbox
/// with no file, network or environment access, a memory cap and a time limit.
#[derive(Debug, Parser)]
#[command(name = "tlspec", version, after_help = EXIT_STATUSES)]
pub struct Cli {
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Memory the sandboxed core may use, in MiB.
    #[arg(long, global = true, default_value_t = 512, value_name = "MIB")]
    pub memory_mib: u64,
    /// Wall-clock seconds each step of the sandboxed core may take.
    #[arg(long, global = true, default_value_t = 30.0, value_name = "SECONDS")]
    pub timeout: f64,
    #[command(subcommand)]
    pub command: Command,
}

/// One file argument.
#[derive(Debug, Args)]
pub struct FileArg {
    /// The .tlspec file.
    pub file: PathBuf,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Manifest, backend and versions, op and payload counts, bytes by dtype (payloads are
    /// not read).
    Inspect(FileArg),
    /// The summary table (as `trace.summary()` prints it).
    Summary(FileArg),
    /// List ops, optionally only those a selector expression matches.
    Ops {
        /// The .tlspec file.
        file: PathBuf,
        /// A selector expression: `func:relu & in_module:encoder`, `~label:add_1_2`,
        /// `followed_by(func:conv2d, func:relu, 2)`; a bare word matches labels containing it.
        selector: Option<String>,
    },
    /// Check the structure and every payload against its recorded CRC-32.
    Check(FileArg),
    /// All metadata (manifest, ops, layers, modules, parameters) as JSON.
    Export {
        /// The .tlspec file.
        file: PathBuf,
    },
    /// Draw the graph as SVG: the overview with modules collapsed, every op with --full, or
    /// the backward graph with --backward.
    Draw {
        /// The .tlspec file.
        file: PathBuf,
        /// Write SVG (the only format for now; accepted for clarity).
        #[arg(long)]
        svg: bool,
        /// Draw every op instead of the collapsed overview.
        #[arg(long)]
        full: bool,
        /// Draw the backward graph (autograd functions) of a trace saved with a backward pass.
        #[arg(long, conflicts_with = "full")]
        backward: bool,
        /// Where to write the SVG (standard output when absent).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Serve the browser viewer and this file on localhost, and print the address to open.
    View {
        /// The .tlspec file.
        file: PathBuf,
        /// Port on 127.0.0.1 (0 picks a free one).
        #[arg(long, default_value_t = 8765)]
        port: u16,
        /// The built viewer page (host-web/www after `make web`); defaults to
        /// TORCHLENS_WEB_ROOT, else the source tree tlspec was built from.
        #[arg(long, value_name = "DIR")]
        web_root: Option<PathBuf>,
    },
    /// Which ops and saved values differ between two traces, matched by stable site.
    Diff {
        /// The first .tlspec.
        a: PathBuf,
        /// The second .tlspec.
        b: PathBuf,
        /// Values whose elements differ by at most this much count as equal.
        #[arg(long, default_value_t = 0.0)]
        tolerance: f64,
    },
}
