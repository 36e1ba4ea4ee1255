//! Bounds applied to untrusted files before anything is sized from them.

/// Largest tensor rank accepted (in a header or an op's payload shape). Fixed rather than
/// configurable: the header parser stops storing dimensions past it while parsing.
pub const MAX_RANK: usize = 64;

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
