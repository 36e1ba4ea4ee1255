//! Any text as the strings of a `.tlspec` manifest (`codec_metadata`, `created_at`, an extra
//! key and value) and as text a host prints. The escaping leaves nothing a terminal acts on;
//! a file carrying the text either decodes with every string exact, the codec metadata within
//! its bounds (size, nesting, a JSON object), and a summary table that is terminal-safe, or it
//! is refused with a typed code; nothing panics or allocates without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use torchlens_core::model::TraceOptions;
use torchlens_core::terminal_text::{escape_for_terminal, is_terminal_control};
use torchlens_core::tlspec::{self, Manifest, MAX_CODEC_METADATA_BYTES};
use torchlens_core::{Trace, TraceBuilder};

fn demo_trace() -> &'static Trace {
    static TRACE: OnceLock<Trace> = OnceLock::new();
    TRACE.get_or_init(|| {
        let mut builder = TraceBuilder::new(TraceOptions::default());
        builder
            .ingest(torchlens_core::demo_model::demo_events())
            .expect("the demo events are valid");
        let mut trace = builder.finish().expect("the demo trace finishes");
        // No payloads: the manifest is what this target varies.
        trace.keep_payloads(&[]);
        trace
    })
}

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    assert!(!escape_for_terminal(&text).chars().any(is_terminal_control));
    let manifest = Manifest {
        backend: "torch".to_owned(),
        created_at: text.to_string(),
        codec_metadata: text.to_string(),
        extra: vec![(format!("x-{text}"), text.to_string())],
        ..Manifest::default()
    };
    let Ok(file) = tlspec::encode_with_payloads(demo_trace(), &manifest, |_| None) else {
        return;
    };
    match tlspec::decode_file(&file) {
        Ok((header, trace)) => {
            assert_eq!(header.manifest.codec_metadata, text);
            assert!(header.manifest.codec_metadata.len() <= MAX_CODEC_METADATA_BYTES);
            let table = torchlens_core::query::summary_table(&trace);
            assert!(!table
                .chars()
                .any(|character| character != '\n' && is_terminal_control(character)));
        }
        Err(error) => assert!(error.code.starts_with("tlspec_"), "{}", error.code),
    }
});
