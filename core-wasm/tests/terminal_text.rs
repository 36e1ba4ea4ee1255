//! The core's text renderers (the summary table, the SVG) show a hostile file's strings with
//! their terminal controls escaped; the data (labels, names) keeps them exact.

#[path = "hostile_corpus.rs"]
mod hostile_corpus;

use hostile_corpus::{has_terminal_control, terminal_attack_file, TERMINAL_ATTACK};
use torchlens_core::layout::{render_svg, LayoutView};
use torchlens_core::query::{summary_rows, summary_table};

#[test]
fn the_summary_table_escapes_every_string_from_the_file() {
    let (_, trace) = torchlens_core::tlspec::decode_file(&terminal_attack_file()).expect("decodes");
    // The attack is in the data, exactly.
    let rows = summary_rows(&trace);
    assert!(rows
        .iter()
        .any(|row| row.func_name.contains(TERMINAL_ATTACK)));
    assert!(rows.iter().any(|row| row.module.contains(TERMINAL_ATTACK)));
    assert!(rows
        .iter()
        .any(|row| row.label.contains('\u{1b}') || row.func_name.contains('\u{1b}')));
    let table = summary_table(&trace);
    assert!(!has_terminal_control(&table), "{table:?}");
    assert!(table.contains("\\x1b]0;pwned\\x07"), "{table}");
    assert!(table.contains("\\u{202e}"), "{table}");
}

#[test]
fn the_svg_holds_no_raw_terminal_control() {
    let (_, trace) = torchlens_core::tlspec::decode_file(&terminal_attack_file()).expect("decodes");
    for view in [
        LayoutView::Full,
        LayoutView::Collapsed {
            expanded: Vec::new(),
        },
    ] {
        let svg = render_svg(&torchlens_core::layout::layout(&trace, &view).expect("lays out"));
        assert!(!has_terminal_control(&svg), "{svg}");
    }
}
