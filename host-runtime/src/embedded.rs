//! The component a native host ships inside itself, and where hosts keep its compiled form.

use std::path::PathBuf;

/// The core component's bytes, built and embedded at compile time (see `build.rs`;
/// `TORCHLENS_COMPONENT` names a prebuilt file instead).
#[cfg(feature = "embedded-component")]
pub static EMBEDDED_COMPONENT: &[u8] = include_bytes!(env!("TORCHLENS_COMPONENT_PATH"));

/// Where hosts cache the ahead-of-time compiled component: `TORCHLENS_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/torchlens`, else `~/.cache/torchlens`; `None` when none can be named.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TORCHLENS_CACHE_DIR") {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("torchlens"))
}
