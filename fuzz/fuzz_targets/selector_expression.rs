//! Any text as a selector expression: a selector or a typed error, never a panic or a stack
//! overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = torchlens_core::selectors::parse_expression(text);
    }
});
