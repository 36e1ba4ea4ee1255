//! The fuzz corpus as a plain test: every committed seed of each cargo fuzz target
//! (`fuzz/seeds/<target>/`) goes through the same calls as the target's body
//! (`fuzz/fuzz_targets/<target>.rs`), on stable, in `make test`. A decode or a parse may refuse
//! an input with a typed error; none may panic. The timed fuzz runs stay in `make fuzz`
//! (`scripts/fuzz.sh`); an input it finds that matters is committed to the seeds and then
//! replays here.

use std::path::{Path, PathBuf};

use torchlens_core::layout::{layout, LayoutView};
use torchlens_core::model::TraceOptions;
use torchlens_core::query::summary_table;
use torchlens_core::selectors::parse_expression;
use torchlens_core::terminal_text::{escape_for_terminal, is_terminal_control};
use torchlens_core::tlspec::{self, Manifest};
use torchlens_core::TraceBuilder;

/// The seed files of one fuzz target, sorted by name.
fn seeds(target: &str) -> Vec<PathBuf> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap_or_else(|error| panic!("{}: {error}", folder.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", folder.display());
    files
}

/// `fuzz/fuzz_targets/decode_tlspec.rs`: any bytes as a `.tlspec`; a file that decodes also
/// goes through the summary and the collapsed layout.
#[test]
fn decode_tlspec_corpus_replays() {
    for path in seeds("decode_tlspec") {
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        match tlspec::decode_file(&bytes) {
            Ok((_header, trace)) => {
                let _ = summary_table(&trace);
                let _ = layout(
                    &trace,
                    &LayoutView::Collapsed {
                        expanded: Vec::new(),
                    },
                );
            }
            // The valid seeds must reach the queries, or this replay tests less than the fuzz
            // target does.
            Err(error) => assert!(
                !name.starts_with("valid_"),
                "{name} is a valid seed but did not decode: {error:?}"
            ),
        }
    }
}

/// `fuzz/fuzz_targets/manifest_text.rs`: any text as manifest strings (codec metadata, a named
/// field, an extra key and value) of a real file, and as text to escape for a terminal.
#[test]
fn manifest_text_corpus_replays() {
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder
        .ingest(torchlens_core::demo_model::demo_events())
        .unwrap();
    let mut demo = builder.finish().unwrap();
    // No payloads: the manifest is what this target varies.
    demo.keep_payloads(&[]);
    let mut decoded = 0;
    for path in seeds("manifest_text") {
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!escape_for_terminal(&text).chars().any(is_terminal_control));
        let manifest = Manifest {
            backend: "torch".to_owned(),
            created_at: text.to_string(),
            codec_metadata: text.to_string(),
            extra: vec![(format!("x-{text}"), text.to_string())],
            ..Manifest::default()
        };
        let Ok(file) = tlspec::encode_with_payloads(&demo, &manifest, |_| None) else {
            continue;
        };
        match tlspec::decode_file(&file) {
            Ok((header, trace)) => {
                decoded += 1;
                assert_eq!(header.manifest.codec_metadata, text, "{name}");
                let table = summary_table(&trace);
                assert!(
                    !table
                        .chars()
                        .any(|character| character != '\n' && is_terminal_control(character)),
                    "{name}"
                );
            }
            Err(error) => assert!(error.code.starts_with("tlspec_"), "{name}: {error:?}"),
        }
    }
    // The object seeds decode, so the replay reaches the summary as the target does.
    assert!(decoded >= 4, "only {decoded} seeds decoded");
}

/// `fuzz/fuzz_targets/selector_expression.rs`: any UTF-8 text as a selector expression. The
/// committed seeds are expressions that parse.
#[test]
fn selector_expression_corpus_replays() {
    for path in seeds("selector_expression") {
        let bytes = std::fs::read(&path).unwrap();
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let parsed = parse_expression(text);
            assert!(
                parsed.is_ok(),
                "{}: {parsed:?}",
                path.file_name().unwrap().to_string_lossy()
            );
        }
    }
}
