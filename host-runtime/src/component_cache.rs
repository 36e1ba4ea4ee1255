//! The on-disk cache of the ahead-of-time compiled component, and why it can be trusted.
//!
//! `Component::deserialize` runs the native code in the artifact it is given, so whoever can
//! write an artifact the host loads can run code in the host's process (and past the CLI's
//! sandbox). The cache therefore:
//!
//! - is used only when its folder is a real directory (not a symlink) owned by this user and
//!   writable by no one else, and the artifact a regular file owned by this user and writable by
//!   no one else (otherwise the host compiles in memory and writes nothing);
//! - names and checks each artifact by a SHA-256 key over the component bytes, the wasmtime
//!   version, the engine's compatibility hash (its settings: fuel, epoch interruption, target)
//!   and this crate's version, stored in the artifact's own header together with a SHA-256 of
//!   the compiled bytes; any mismatch (stale, truncated, corrupted or edited) is rejected before
//!   deserialisation and the component is compiled again;
//! - writes under a unique temporary name (`O_EXCL`, mode 0600) and renames atomically, so a
//!   reader never sees half an artifact and two writers never share a temporary file.
//!
//! The hashes catch damage and edits by anyone who does not recompute them; the ownership
//! and permission checks are what keep other users out. A user who can already write to
//! this user's private files can run code as this user anyway.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use wasmtime::Engine;

/// First bytes of every artifact this cache writes.
const MAGIC: &[u8; 8] = b"TLCWASM\x01";
/// Magic, key and SHA-256 of the compiled bytes.
const HEADER_LENGTH: usize = 8 + 32 + 32;

/// What happened to the cache when a runtime was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// No cache folder was given: compiled in memory.
    Disabled,
    /// The folder is not private to this user: compiled in memory, nothing read or written.
    UnsafeFolder(String),
    /// No artifact yet: compiled, and the artifact written (when the folder allowed it).
    Compiled,
    /// An artifact was there but failed verification (the reason): compiled again and
    /// replaced.
    Rejected(String),
    /// A verified artifact was deserialised.
    Loaded,
}

/// Feeds `Hash` values into SHA-256 (the engine's compatibility hash is only `impl Hash`).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        // Never used: the key is the full digest.
        0
    }
}

/// The artifact key: SHA-256 over everything the compiled bytes depend on.
pub(crate) fn cache_key(engine: &Engine, component: &[u8], wasmtime_version: &str) -> [u8; 32] {
    let mut hasher = ShaHasher(Sha256::new());
    hasher.write(b"torchlens-component-cache\0");
    hasher.write(env!("CARGO_PKG_VERSION").as_bytes());
    hasher.write(b"\0");
    hasher.write(wasmtime_version.as_bytes());
    hasher.write(b"\0");
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.write(&(component.len() as u64).to_le_bytes());
    hasher.write(component);
    hasher.0.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The artifact's file name in the cache folder.
pub(crate) fn artifact_path(folder: &Path, key: &[u8; 32]) -> PathBuf {
    folder.join(format!("torchlens-core-{}.cwasm", hex(&key[..16])))
}

/// The compiled bytes inside an artifact file, when it verifies against `key`.
pub(crate) fn verified_artifact<'a>(bytes: &'a [u8], key: &[u8; 32]) -> Result<&'a [u8], String> {
    if bytes.len() < HEADER_LENGTH {
        return Err(format!("{} bytes, shorter than the header", bytes.len()));
    }
    let (header, compiled) = bytes.split_at(HEADER_LENGTH);
    if &header[..8] != MAGIC {
        return Err("not an artifact of this cache".to_string());
    }
    if header[8..40] != key[..] {
        return Err("compiled from other component bytes or engine settings".to_string());
    }
    let digest: [u8; 32] = Sha256::digest(compiled).into();
    if header[40..72] != digest[..] {
        return Err("the compiled bytes do not match their checksum".to_string());
    }
    Ok(compiled)
}

/// An artifact file: header, then the compiled bytes.
pub(crate) fn artifact_bytes(compiled: &[u8], key: &[u8; 32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_LENGTH + compiled.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(key);
    bytes.extend_from_slice(&Sha256::digest(compiled));
    bytes.extend_from_slice(compiled);
    bytes
}

/// Creates `folder` (mode 0700) if needed and checks that only this user can write to it.
#[cfg(unix)]
pub(crate) fn private_folder(folder: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder);
    let metadata = std::fs::symlink_metadata(folder)
        .map_err(|error| format!("{}: {error}", folder.display()))?;
    if !metadata.file_type().is_dir() {
        return Err(format!("{} is not a directory", folder.display()));
    }
    private_entry(folder, &metadata)
}

/// Without Unix ownership and permissions the folder cannot be checked: never cache.
#[cfg(not(unix))]
pub(crate) fn private_folder(folder: &Path) -> Result<(), String> {
    Err(format!(
        "{}: ownership cannot be checked on this platform",
        folder.display()
    ))
}

/// Owned by this user and writable by nobody else.
#[cfg(unix)]
fn private_entry(path: &Path, metadata: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let user = unsafe { libc::geteuid() };
    if metadata.uid() != user {
        return Err(format!(
            "{} belongs to user {}, not to this user ({user})",
            path.display(),
            metadata.uid()
        ));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is writable by other users (mode {:o})",
            path.display(),
            metadata.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Reads an artifact: a regular file (symlinks are not followed) owned by this user and
/// writable by nobody else. `Ok(None)` when there is none.
#[cfg(unix)]
pub(crate) fn read_artifact(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("{}: {error}", path.display())),
    };
    let metadata = file
        .metadata()
        .map_err(|error| format!("{}: {error}", path.display()))?;
    if !metadata.file_type().is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    private_entry(path, &metadata)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(Some(bytes))
}

#[cfg(not(unix))]
pub(crate) fn read_artifact(_path: &Path) -> Result<Option<Vec<u8>>, String> {
    Ok(None)
}

/// Writes an artifact under a unique temporary name in the same folder, then renames it over
/// `path`. Failures only cost compile time on the next start, so they are ignored.
pub(crate) fn write_artifact(path: &Path, bytes: &[u8]) {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let unique = format!(
        ".{}.{}-{}-{}.tmp",
        path.file_name()
            .map_or_else(Default::default, |name| name.to_string_lossy()),
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        nanos
    );
    let temporary = path.with_file_name(unique);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if written.is_err() || std::fs::rename(&temporary, path).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}
