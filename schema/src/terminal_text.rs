//! Text from a file, made safe to show in a terminal. A `.tlspec` from anyone carries strings
//! (module names, op labels, manifest fields, tensor names) that a text renderer prints; raw,
//! an escape sequence among them can set the window title, clear the screen, recolour the
//! output, plant a hyperlink, or (bidirectional overrides) make one name read as another.
//!
//! [`escape_for_terminal`] is the one escaping function of the project: the core's summary
//! table uses it, the CLI renders every table, line and error message through it, and the
//! Python host reaches it through the core (`escape-terminal-text`). JSON output never uses
//! it: JSON keeps the file's strings exact (its own escaping makes them inert).
//!
//! It lives here, in the crate the core shares with its native hosts, so that hosts that do
//! not link the core (the CLI, the Python extension) run the very same code.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether a character would be read by a terminal as something other than text: the C0
/// controls (U+0000–U+001F), DEL (U+007F), the C1 controls (U+0080–U+009F, among them CSI and
/// OSC), and the bidirectional marks and overrides (U+061C, U+200E–U+200F, U+202A–U+202E,
/// U+2066–U+2069), which reorder what follows them on the line.
pub fn is_terminal_control(character: char) -> bool {
    matches!(
        character,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with every [`is_terminal_control`] character written out as a visible escape:
/// `\t`, `\n` and `\r` by name, the other C0/C1 controls and DEL as `\xNN`, the bidirectional
/// characters as `\u{NNNN}`. Text without them is returned as it is (borrowed). Backslashes
/// are left alone, so ordinary text (Windows paths included) reads unchanged; an escape shown
/// is therefore either one of these or the file's own backslash.
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_terminal_control) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        match character {
            '\t' => escaped.push_str("\\t"),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            control if (control as u32) < 0x100 && is_terminal_control(control) => {
                let _ = write!(escaped, "\\x{:02x}", control as u32);
            }
            bidi if is_terminal_control(bidi) => {
                let _ = write!(escaped, "\\u{{{:04x}}}", bidi as u32);
            }
            other => escaped.push(other),
        }
    }
    Cow::Owned(escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for text in [
            "",
            "encoder.layers.0",
            "conv2d_1_3",
            "ünïcödé 模型 ✓",
            "C:\\x1b",
        ] {
            assert!(matches!(escape_for_terminal(text), Cow::Borrowed(same) if same == text));
        }
    }

    #[test]
    fn every_control_character_becomes_visible() {
        assert_eq!(
            escape_for_terminal("a\u{1b}]0;pwned\u{7}b"),
            "a\\x1b]0;pwned\\x07b"
        );
        assert_eq!(
            escape_for_terminal("\t\n\r\u{7f}\u{9b}"),
            "\\t\\n\\r\\x7f\\x9b"
        );
        assert_eq!(
            escape_for_terminal("abc\u{202e}fdp.exe\u{2066}"),
            "abc\\u{202e}fdp.exe\\u{2066}"
        );
        // Nothing a terminal acts on survives, for every character of the ranges.
        for code in (0u32..0x3000).chain(0xfff0..0x10000) {
            let Some(character) = char::from_u32(code) else {
                continue;
            };
            let shown = escape_for_terminal(&character.to_string()).into_owned();
            assert!(
                !shown.chars().any(is_terminal_control),
                "U+{code:04X} came out as {shown:?}"
            );
            assert_eq!(
                shown.chars().count() > 1,
                is_terminal_control(character),
                "U+{code:04X}"
            );
        }
    }
}
