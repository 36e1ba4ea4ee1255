//! What a command produces: an exit status, a human rendering and a JSON value. `main` prints
//! one of the two, so every command honours `--json` the same way.

use crate::exit_status::ExitStatus;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt::Write;
use torchlens_schema::terminal_text::{escape_for_terminal, is_terminal_control};

/// Text from a file (or any text not written by the CLI itself) as it may be shown on a
/// terminal: control characters and bidirectional overrides escaped. Every human rendering
/// passes file strings through this; JSON output never does (it stays exact).
pub fn shown(text: &str) -> Cow<'_, str> {
    escape_for_terminal(text)
}

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

/// `value` as pretty JSON that is exact and inert on a terminal. serde_json escapes the C0
/// controls but writes DEL, the C1 controls and the bidirectional overrides raw; those (which
/// can only occur inside strings, JSON's own syntax being ASCII) are written as `\uXXXX`
/// escapes instead, which parse back to the same strings.
pub fn json_text(value: &Value) -> String {
    // serde_json already escapes every C0 control inside strings: a raw one is layout.
    let raw_in_strings = |character: char| character >= ' ' && is_terminal_control(character);
    let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_owned());
    if !pretty.chars().any(raw_in_strings) {
        return pretty;
    }
    let mut inert = String::with_capacity(pretty.len() + 16);
    for character in pretty.chars() {
        if raw_in_strings(character) {
            // Every such character is in the Basic Multilingual Plane: one \u escape.
            let _ = write!(inert, "\\u{:04x}", character as u32);
        } else {
            inert.push(character);
        }
    }
    inert
}

/// Renders rows as a table with a header row, columns padded to their widest cell. Cells are
/// shown escaped ([`shown`]).
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| shown(cell).into_owned()).collect())
        .collect();
    let mut widths: Vec<usize> = headers
        .iter()
        .map(|header| header.chars().count())
        .collect();
    for row in &rows {
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
    for row in &rows {
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
