//! The manifest: the safetensors `__metadata__` map of a `.tlspec` (string to string).

use super::errors::malformed;
use super::manifest_bounds::{
    check_codec_metadata, check_codec_metadata_to_write, check_short_field,
};
use super::{FORMAT, FORMAT_VERSION};
use crate::error::{CoreError, CoreResult, ErrorKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Key of the JSON object (label → logical dtype name) describing every payload.
pub(crate) const LOGICAL_DTYPES_KEY: &str = "logical_dtypes";
/// Key of the JSON object (label → CRC-32 of the payload bytes), present when the writer
/// supplied checksums.
pub(crate) const PAYLOAD_CRC32_KEY: &str = "payload_crc32";

/// Key of the body's CRC-32 (v2; decimal), over the body tensor after its check block.
pub(crate) const BODY_CRC32_KEY: &str = "body_crc32";
/// Key of how source file paths were written (`relative`, `absolute`, `none`). It travels in
/// `extra`: the host asks for a mode by setting it, the encoder rewrites the sources to match.
pub const SOURCE_PATHS_KEY: &str = "source_paths";

/// Keys the codec writes itself; `extra` may not use them.
const RESERVED_KEYS: [&str; 12] = [
    "format",
    "format_version",
    LOGICAL_DTYPES_KEY,
    PAYLOAD_CRC32_KEY,
    BODY_CRC32_KEY,
    "backend",
    "backend_runtime",
    "backend_version",
    "payload_policy",
    "save_level",
    "created_at",
    "codec_metadata",
];

/// What the host says about a saved trace. All values are free text for the core; the codec
/// adds `format`, `format_version` and `logical_dtypes` itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub backend: String,
    pub backend_runtime: String,
    pub backend_version: String,
    pub payload_policy: String,
    pub save_level: String,
    pub created_at: String,
    /// A JSON string of codec-specific facts (JAX sharding and the like).
    pub codec_metadata: String,
    /// CRC-32 (IEEE, as zlib's `crc32`) of each payload's bytes by op label, sorted by label.
    /// Empty when the writer supplied none; otherwise every payload has one.
    pub payload_checksums: Vec<(String, u32)>,
    /// Further keys, kept verbatim; on decode, every key the codec does not know, sorted.
    pub extra: Vec<(String, String)>,
}

impl Manifest {
    /// The `__metadata__` map to write, with `logical_dtypes` already rendered as JSON and the
    /// CRC-32 of the body (after its check block).
    pub(crate) fn to_metadata(
        &self,
        logical_dtypes: String,
        body_crc32: u32,
    ) -> CoreResult<BTreeMap<String, String>> {
        check_codec_metadata_to_write(&self.codec_metadata)?;
        let mut map = BTreeMap::new();
        map.insert("format".to_string(), FORMAT.to_string());
        map.insert("format_version".to_string(), FORMAT_VERSION.to_string());
        map.insert(LOGICAL_DTYPES_KEY.to_string(), logical_dtypes);
        map.insert(BODY_CRC32_KEY.to_string(), body_crc32.to_string());
        if !self.payload_checksums.is_empty() {
            let checksums: BTreeMap<&str, u32> = self
                .payload_checksums
                .iter()
                .map(|(label, crc)| (label.as_str(), *crc))
                .collect();
            let json = serde_json::to_string(&checksums).map_err(|error| {
                CoreError::new(
                    ErrorKind::Unsupported,
                    "tlspec_manifest_invalid",
                    format!("payload checksums could not be written: {error}"),
                    "report this as a bug",
                )
            })?;
            map.insert(PAYLOAD_CRC32_KEY.to_string(), json);
        }
        for (key, value) in [
            ("backend", &self.backend),
            ("backend_runtime", &self.backend_runtime),
            ("backend_version", &self.backend_version),
            ("payload_policy", &self.payload_policy),
            ("save_level", &self.save_level),
            ("created_at", &self.created_at),
            ("codec_metadata", &self.codec_metadata),
        ] {
            map.insert(key.to_string(), value.clone());
        }
        for (key, value) in &self.extra {
            // A silent overwrite would lose either the caller's value or the codec's.
            if RESERVED_KEYS.contains(&key.as_str()) || map.contains_key(key) {
                return Err(CoreError::new(
                    ErrorKind::Unsupported,
                    "tlspec_manifest_reserved_key",
                    format!("manifest extra key `{key}` is reserved or given twice"),
                    "rename the extra manifest key",
                ));
            }
            map.insert(key.clone(), value.clone());
        }
        Ok(map)
    }

    /// Reads the manifest of a file of format `version` back; missing named fields read as
    /// empty (older writers may omit them). Returns the manifest, the raw `logical_dtypes` JSON
    /// and the body's CRC-32 (required from v2 on; a v1 file may not have one, so a v2 file
    /// whose version was damaged into 1 is not read as v1).
    pub(crate) fn from_metadata(
        mut map: BTreeMap<String, String>,
        version: u32,
    ) -> CoreResult<(Self, String, Option<u32>)> {
        let logical = map.remove(LOGICAL_DTYPES_KEY).ok_or_else(|| {
            malformed(
                "tlspec_manifest_invalid",
                "the manifest has no logical_dtypes entry",
                "the file is damaged; save the trace again from its source",
            )
        })?;
        map.remove("format");
        map.remove("format_version");
        let body_crc32 = match (map.remove(BODY_CRC32_KEY), version) {
            (None, 1) => None,
            (Some(text), 2..) => Some(decimal_u32(&text).ok_or_else(|| {
                malformed(
                    "tlspec_manifest_invalid",
                    format!("body_crc32 `{text}` is not a decimal 32-bit number"),
                    "the file is damaged; save the trace again from its source",
                )
            })?),
            (Some(_), _) => {
                return Err(malformed(
                    "tlspec_manifest_invalid",
                    "a version 1 manifest with a body_crc32 (only version 2 has one)",
                    "the file is damaged; save the trace again from its source",
                ))
            }
            (None, _) => {
                return Err(malformed(
                    "tlspec_manifest_invalid",
                    format!("the version {version} manifest has no body_crc32"),
                    "the file is damaged; save the trace again from its source",
                ))
            }
        };
        let payload_checksums = match map.remove(PAYLOAD_CRC32_KEY) {
            None => Vec::new(),
            Some(json) => serde_json::from_str::<BTreeMap<String, u32>>(&json)
                .map_err(|error| {
                    malformed(
                        "tlspec_manifest_invalid",
                        format!("payload_crc32 is not a JSON object of 32-bit numbers: {error}"),
                        "the file is damaged; save the trace again from its source",
                    )
                })?
                .into_iter()
                .collect(),
        };
        let mut take_short = |key: &str| {
            let value = map.remove(key).unwrap_or_default();
            check_short_field(key, &value).map(|()| value)
        };
        let backend = take_short("backend")?;
        let backend_runtime = take_short("backend_runtime")?;
        let backend_version = take_short("backend_version")?;
        let payload_policy = take_short("payload_policy")?;
        let save_level = take_short("save_level")?;
        let created_at = take_short("created_at")?;
        let codec_metadata = map.remove("codec_metadata").unwrap_or_default();
        check_codec_metadata(&codec_metadata)?;
        let manifest = Manifest {
            backend,
            backend_runtime,
            backend_version,
            payload_policy,
            save_level,
            created_at,
            codec_metadata,
            payload_checksums,
            extra: map.into_iter().collect(),
        };
        Ok((manifest, logical, body_crc32))
    }
}

/// A `u32` written the way the encoder writes it: decimal digits, no sign, no leading zero.
/// One spelling per value, so a changed byte never reads as the same checksum.
fn decimal_u32(text: &str) -> Option<u32> {
    let canonical = !text.is_empty()
        && text.bytes().all(|byte| byte.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}
