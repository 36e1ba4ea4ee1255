//! The `.tlspec` codec: writes version 2, reads versions 1 and 2.
//!
//! A `.tlspec` file is a valid safetensors file, so any safetensors reader can open the saved
//! activations by op label:
//!
//! ```text
//! [8-byte LE header length n][header JSON, space-padded to a multiple of 8]
//! [data: __torchlens_body__ (U8: v2 only, an 8-byte check block with the CRC-32 of the
//!        8 + n bytes before it; then the postcard TraceBody, zero-padded to a multiple of 8)]
//! [data: one tensor per op with a payload, named by the op label]
//! [data: __torchlens_payload_crc32__ (U32: one CRC-32 per payload, in file order), last]
//! ```
//!
//! The header's `__metadata__` map is the [`Manifest`] (plus `format`, `format_version`, the
//! `logical_dtypes` of every payload and, in v2, the `body_crc32` of the body after its check
//! block). So in v2 every byte of the prefix is covered: the header by the check block, the
//! check block by the header checksum it must match, the body by `body_crc32`; the payloads by
//! the CRC-32 table the host fills as it writes them (older files: the manifest's
//! `payload_crc32`). The core never sees tensor bytes: [`encode_layout`] says
//! where each payload goes and the host writes the bytes; on load, [`header_length`],
//! [`parse_header`] and [`decode_body`] need only the header and the body, never the payloads.
//!
//! Every length, count, rank and offset read from a file is checked before it sizes anything,
//! so a hostile file yields a typed [`crate::CoreError`] with a `tlspec_` code.

mod decode;
mod dtype_map;
mod encode;
mod errors;
mod header;
mod integrity;
mod limits;
mod manifest;
mod manifest_bounds;
mod source_paths;
mod validate;

pub use decode::{
    decode_body, decode_file, header_length, parse_header, parse_header_with, trace_from_body,
    HeaderInfo, PayloadEntry,
};
pub use dtype_map::{storage_dtype, StorageDtype};
pub use encode::{encode_layout, encode_with_payloads, EncodedLayout, PayloadPlacement};
pub use integrity::{crc32, crc_table_bytes, crc_table_entries, CRC_TABLE_ENTRY_BYTES};
pub use limits::{
    Limits, MAX_CODEC_METADATA_BYTES, MAX_CODEC_METADATA_DEPTH, MAX_MANIFEST_FIELD_BYTES, MAX_RANK,
};
pub use manifest::{Manifest, SOURCE_PATHS_KEY};
pub use validate::validate_trace;

use crate::model::Trace;
use serde::{Deserialize, Serialize};

/// The value of the manifest's `format` key.
pub const FORMAT: &str = "tlspec";
/// The format version this core writes.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest format version this core still reads (v1: no checksums on header and body).
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// Name of the U8 tensor holding the postcard trace body; always the first tensor of the data.
pub const BODY_TENSOR: &str = "__torchlens_body__";
/// Name of the U32 tensor holding one CRC-32 per payload in file order; when present, the last
/// tensor of the data, so a writer fills it after writing (and checksumming) every payload.
pub const CRC_TABLE_TENSOR: &str = "__torchlens_payload_crc32__";
/// Tensor names starting with this are the format's own; no payload may use one.
pub const RESERVED_TENSOR_PREFIX: &str = "__torchlens_";

/// What the body tensor holds (postcard). The version travels in the body too, so a body cut
/// out of its file still says what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceBody {
    pub format_version: u32,
    pub trace: Trace,
}

/// The body bytes of a trace (a postcard [`TraceBody`], unpadded): what `trace.body()` returns
/// across the WIT contract and what [`trace_from_body`] reads.
pub fn trace_to_body(trace: &Trace) -> Vec<u8> {
    encode::body_bytes(trace)
}
