//! What a command produces: an exit status, a human rendering and a JSON value. `main` prints
//! one of the two, so every command honours `--json` the same way.

use crate::exit_status::ExitStatus;
use serde_json::Value;

/// The result of a command that ran to the end.
pub struct Outcome {
    /// `Success`, or `Findings` when `check`/`diff` found something.
    pub status: ExitStatus,
    /// What `--json` prints.
    pub json: Value,
    /// What a person sees.
    pub text: String,
}

impl Outcome {
    /// A successful outcome.
    pub fn success(json: Value, text: String) -> Self {
        Self {
            status: ExitStatus::Success,
            json,
            text,
        }
    }
}

/// Renders rows as a table with a header row, columns padded to their widest cell.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers
        .iter()
        .map(|header| header.chars().count())
        .collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (index, (cell, width)) in cells.zip(&widths).enumerate() {
            if index > 0 {
                out.push_str("  ");
            }
            out.push_str(cell);
            if index + 1 < widths.len() {
                out.extend(std::iter::repeat_n(' ', width - cell.chars().count()));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    };
    let mut out = line(&mut headers.iter().copied());
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// `1.5 MiB`-style sizes for people.
pub fn bytes(count: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = count as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{count} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A shape as `[2, 3]`.
pub fn shape(dims: &[u64]) -> String {
    let inner: Vec<String> = dims.iter().map(u64::to_string).collect();
    format!("[{}]", inner.join(", "))
}
