//! Any bytes as a `.tlspec`: decoding must return a trace or a typed error, never panic,
//! overflow the stack or allocate without bound (libFuzzer's -rss_limit_mb catches that).
//! A file that decodes must also survive the queries the hosts run on it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use torchlens_core::layout::{layout, LayoutView};
use torchlens_core::tlspec;

fuzz_target!(|bytes: &[u8]| {
    let Ok((_header, trace)) = tlspec::decode_file(bytes) else {
        return;
    };
    let _ = torchlens_core::query::summary_table(&trace);
    let _ = layout(&trace, &LayoutView::Collapsed {
        expanded: Vec::new(),
    });
});
