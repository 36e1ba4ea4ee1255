//! Bounds applied to untrusted files before anything is sized from them.

/// Largest tensor rank accepted (in a header or an op's payload shape). Fixed rather than
/// configurable: the header parser stops storing dimensions past it while parsing.
pub const MAX_RANK: usize = 64;

/// Largest `codec_metadata` (JSON text) in a manifest, read or written. Sized for the biggest
/// metadata a backend writes: JAX records about 250 bytes per sharded payload, so 4 MiB holds
/// some 16,000 of them. The worst a file can make a host pay for it is bounded: Python's
/// `json.loads` of 4 MiB packed with 426,419 tiny keys took 0.75 s and 55 MiB at peak
/// (measured 2026-12-07), where an unbounded 98 MB one took 10 s and 2 GB.
pub const MAX_CODEC_METADATA_BYTES: usize = 4 << 20;

/// Deepest nesting of arrays and objects in `codec_metadata`. The writers nest at most four
/// levels; 64 stays far below any JSON parser's recursion limit (serde_json: 128, Python's
/// `json`: the interpreter's ~1000).
pub const MAX_CODEC_METADATA_DEPTH: usize = 64;

/// Largest value of each short named manifest field (backend, its runtime and version, payload
/// policy, save level, creation time): these are names and versions, a few dozen bytes.
pub const MAX_MANIFEST_FIELD_BYTES: usize = 4096;

/// Size bounds for decoding. The defaults match the safetensors reference reader for the
/// header, and keep the body addressable on a 32-bit (wasm32) component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest header JSON, in bytes (safetensors itself refuses more than 100 MB).
    pub max_header_bytes: u64,
    /// Largest trace body, in bytes.
    pub max_body_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_header_bytes: 100_000_000,
            max_body_bytes: 1 << 31,
        }
    }
}
