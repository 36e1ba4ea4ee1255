//! Decoding in steps, so a host never has to hand the whole file to the core: the first 8
//! bytes give the header length, the header gives the body range and the payload table, and
//! the body gives the trace. Payload bytes stay with the host.

use super::dtype_map::{element_count, storage_dtype, storage_item_size, StorageDtype};
use super::errors::{limit, malformed, REMEDY_DAMAGED, REMEDY_RANGES};
use super::header::{self, RawHeader};
use super::integrity;
use super::limits::{Limits, MAX_RANK};
use super::manifest::Manifest;
use super::validate::validate_trace;
use super::{
    BODY_TENSOR, CRC_TABLE_TENSOR, FORMAT, FORMAT_VERSION, OLDEST_READABLE_VERSION,
    RESERVED_TENSOR_PREFIX,
};
use crate::dtype::Dtype;
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::model::{
    share_repeated_reaches, share_repeated_shapes, share_repeated_text, BackwardGraph, Trace,
    GRAD_TENSOR_PREFIX,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// One payload tensor of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayloadEntry {
    /// The op label (the tensor name).
    pub label: String,
    /// Logical dtype name from the manifest (`bfloat16`, `complex128`, ...).
    pub dtype: String,
    /// The safetensors dtype it is stored as (`BF16`, `U8`, ...).
    pub storage_dtype: String,
    /// The stored shape: the op's shape, or `[nbytes]` for a payload stored as bits (the
    /// logical shape is then the op's shape in the trace).
    pub shape: Vec<u64>,
    /// Absolute file offset of the first byte.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
}

/// What the header says: manifest, where the body is, and the payload table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderInfo {
    pub manifest: Manifest,
    /// Length of the header JSON (after the 8 length bytes).
    pub header_length: u64,
    /// Absolute offset and length of the body tensor.
    pub body_offset: u64,
    pub body_length: u64,
    /// Payloads in file order; after [`decode_body`], an op's payload slot is its index here.
    pub payloads: Vec<PayloadEntry>,
    /// Absolute offset of the payload CRC-32 table (`__torchlens_payload_crc32__`: one
    /// little-endian CRC-32 per entry of `payloads`, in that order, 4 bytes each), when the
    /// file has one. Files written before the table carry `manifest.payload_checksums`
    /// instead; a file never has both.
    pub crc_table_offset: Option<u64>,
    pub file_length: u64,
    /// The file's format version (1 or 2).
    pub format_version: u32,
    /// CRC-32 of the header bytes as read (the 8 length bytes and the header JSON); a v2 body's
    /// check block must record it.
    pub header_crc32: u32,
    /// The manifest's `body_crc32` (v2 files; `None` in v1 files).
    pub body_crc32: Option<u32>,
}

fn too_short(what: &str) -> CoreError {
    malformed(
        "tlspec_too_short",
        format!("{what} is shorter than the 8-byte header length"),
        REMEDY_DAMAGED,
    )
}

/// Reads the header length from the first 8 bytes (little endian), bounded by the default
/// [`Limits::max_header_bytes`] so a host can size its read safely.
pub fn header_length(first8: &[u8]) -> CoreResult<u64> {
    header_length_with(first8, &Limits::default())
}

fn header_length_with(first8: &[u8], limits: &Limits) -> CoreResult<u64> {
    let bytes: [u8; 8] = first8
        .get(..8)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| too_short("the file"))?;
    let length = u64::from_le_bytes(bytes);
    if length > limits.max_header_bytes && length >> 32 != 0 {
        return Err(not_a_tlspec_at_all(&bytes));
    }
    if length > limits.max_header_bytes {
        return Err(limit(
            "tlspec_header_too_large",
            format!(
                "the header declares {length} bytes, more than the limit of {}",
                limits.max_header_bytes
            ),
            "the file is damaged or hostile; .tlspec headers stay far below this limit",
        ));
    }
    Ok(length)
}

/// Parses the header (`header` = the 8 length bytes followed by the header JSON) of a file of
/// `file_length` bytes, with the default [`Limits`].
pub fn parse_header(header: &[u8], file_length: u64) -> CoreResult<HeaderInfo> {
    parse_header_with(header, file_length, &Limits::default())
}

/// [`parse_header`] with explicit limits.
pub fn parse_header_with(
    header: &[u8],
    file_length: u64,
    limits: &Limits,
) -> CoreResult<HeaderInfo> {
    if file_length < 8 {
        return Err(too_short("the file"));
    }
    let json_length = header_length_with(header, limits)?;
    let available = file_length - 8;
    if json_length > available {
        return Err(malformed(
            "tlspec_header_truncated",
            format!("the header declares {json_length} bytes, but the file holds {available} after the length"),
            REMEDY_DAMAGED,
        ));
    }
    if header.len() as u64 != 8 + json_length {
        return Err(malformed(
            "tlspec_length_mismatch",
            format!(
                "got {} header bytes, expected {}",
                header.len(),
                8 + json_length
            ),
            REMEDY_RANGES,
        ));
    }
    let json = std::str::from_utf8(&header[8..]).map_err(|error| {
        malformed(
            "tlspec_header_not_utf8",
            format!("the header is not UTF-8: {error}"),
            REMEDY_DAMAGED,
        )
    })?;
    let raw = header::parse(json).map_err(|error| {
        let code = match error.classify() {
            serde_json::error::Category::Data => "tlspec_header_invalid",
            _ => "tlspec_header_not_json",
        };
        malformed(
            code,
            format!("the header is not a safetensors header: {error}"),
            REMEDY_DAMAGED,
        )
    })?;
    let data_available = available - json_length;
    let mut info = interpret(raw, json_length, data_available, file_length, limits)?;
    info.header_crc32 = integrity::crc32(header);
    Ok(info)
}

/// The first 8 bytes of a file that is no safetensors file at all. A safetensors header length
/// is a little-endian `u64` far below 4 GiB (readers refuse more than 100 MB), so its last four
/// bytes are zero; text, a zip archive (`torch.save`), a pickle or an image puts bytes there.
/// Told apart from a damaged `.tlspec` (a header length past the limit but below 4 GiB stays
/// `tlspec_header_too_large`), so a wrong file is "not a .tlspec", not "damaged or hostile".
fn not_a_tlspec_at_all(first8: &[u8; 8]) -> CoreError {
    let looks_like = if first8.starts_with(b"PK\x03\x04") {
        "a zip archive (torch.save and numpy.savez write these)"
    } else if first8[0] == 0x80 && (2..=5).contains(&first8[1]) {
        "a Python pickle"
    } else if first8.starts_with(b"\x93NUMPY") {
        "a NumPy .npy file"
    } else if first8.starts_with(b"\x89HDF") {
        "an HDF5 file"
    } else if first8
        .iter()
        .all(|byte| byte.is_ascii_graphic() || byte.is_ascii_whitespace())
    {
        "text"
    } else {
        "some other kind of file"
    };
    malformed(
        "tlspec_not_a_tlspec",
        format!("not a .tlspec (nor any safetensors file): its first bytes look like {looks_like}"),
        "give the path of a .tlspec file (one TorchLens saved)",
    )
}

fn not_tlspec(message: &str) -> CoreError {
    malformed(
        "tlspec_not_a_tlspec",
        format!("a safetensors file, but not a .tlspec: {message}"),
        "open it with a safetensors reader; .tlspec files are written by TorchLens save",
    )
}

fn offsets_invalid(message: String) -> CoreError {
    malformed("tlspec_offsets_invalid", message, REMEDY_DAMAGED)
}

fn payload_mismatch(message: String) -> CoreError {
    malformed("tlspec_payload_mismatch", message, REMEDY_DAMAGED)
}

/// A tensor entry after the size checks.
struct Checked {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    start: u64,
    end: u64,
}

fn interpret(
    raw: RawHeader,
    json_length: u64,
    data_available: u64,
    file_length: u64,
    limits: &Limits,
) -> CoreResult<HeaderInfo> {
    if let Some(name) = raw.duplicate {
        return Err(malformed(
            "tlspec_header_invalid",
            format!("the header names `{name}` more than once"),
            REMEDY_DAMAGED,
        ));
    }
    let metadata = raw
        .metadata
        .ok_or_else(|| not_tlspec("it has no __metadata__"))?;
    if metadata.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(not_tlspec("its __metadata__ has no format=tlspec"));
    }
    // Exactly the digits the encoder writes: a damaged version never reads as another one.
    let version = metadata.get("format_version").map_or("", String::as_str);
    let format_version = (OLDEST_READABLE_VERSION..=FORMAT_VERSION)
        .find(|known| version == known.to_string())
        .ok_or_else(|| {
            CoreError::new(
                ErrorKind::UnsupportedVersion,
                "tlspec_version_unsupported",
                format!(
                    "format version `{version}`; this core reads versions {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}"
                ),
                "open the file with the TorchLens version that wrote it, or upgrade TorchLens",
            )
        })?;
    let (manifest, logical_json, body_crc32) = Manifest::from_metadata(metadata, format_version)?;
    let logical: BTreeMap<String, String> =
        serde_json::from_str(&logical_json).map_err(|error| {
            malformed(
                "tlspec_manifest_invalid",
                format!("logical_dtypes is not a JSON object of strings: {error}"),
                REMEDY_DAMAGED,
            )
        })?;

    let mut tensors = Vec::with_capacity(raw.tensors.len());
    for (name, tensor) in raw.tensors {
        if tensor.shape.rank > MAX_RANK as u64 {
            return Err(limit(
                "tlspec_rank_too_large",
                format!(
                    "tensor `{name}` has rank {}, more than {MAX_RANK}",
                    tensor.shape.rank
                ),
                "the file is damaged or hostile; no .tlspec payload has this rank",
            ));
        }
        let item_size = storage_item_size(&tensor.dtype).ok_or_else(|| {
            malformed(
                "tlspec_dtype_unknown",
                format!(
                    "tensor `{name}` has dtype `{}`, which .tlspec never stores",
                    tensor.dtype
                ),
                REMEDY_DAMAGED,
            )
        })?;
        let length = element_count(&tensor.shape.dims)
            .and_then(|count| count.checked_mul(item_size))
            .ok_or_else(|| {
                malformed(
                    "tlspec_shape_overflow",
                    format!("tensor `{name}`'s shape overflows a 64-bit byte count"),
                    REMEDY_DAMAGED,
                )
            })?;
        let (start, end) = tensor.data_offsets;
        if end < start || end - start != length {
            return Err(offsets_invalid(format!(
                "tensor `{name}` spans {start}..{end} but its shape and dtype need {length} bytes"
            )));
        }
        tensors.push(Checked {
            name,
            dtype: tensor.dtype,
            shape: tensor.shape.dims,
            start,
            end,
        });
    }
    // Same rule as safetensors: sorted by offset, tensors tile the data section from 0.
    tensors.sort_by_key(|tensor| (tensor.start, tensor.end));
    let mut expected = 0u64;
    for tensor in &tensors {
        if tensor.start != expected {
            return Err(offsets_invalid(format!(
                "tensor `{}` starts at {} where {expected} was expected (overlap or gap)",
                tensor.name, tensor.start
            )));
        }
        expected = tensor.end;
    }
    if expected > data_available {
        return Err(malformed(
            "tlspec_truncated",
            format!(
                "the header declares {expected} data bytes, but the file holds {data_available}"
            ),
            REMEDY_DAMAGED,
        ));
    }
    if expected < data_available {
        return Err(malformed(
            "tlspec_trailing_data",
            format!(
                "the file holds {data_available} data bytes, but the header declares {expected}"
            ),
            REMEDY_DAMAGED,
        ));
    }

    let mut tensors = tensors.into_iter();
    let body = match tensors.next() {
        Some(body) if body.name == BODY_TENSOR => body,
        first => {
            return Err(match first {
                Some(_)
                    if tensors
                        .as_slice()
                        .iter()
                        .any(|tensor| tensor.name == BODY_TENSOR) =>
                {
                    malformed(
                        "tlspec_body_invalid",
                        "the body tensor is not the first tensor of the data",
                        REMEDY_DAMAGED,
                    )
                }
                _ => not_tlspec("it has no __torchlens_body__ tensor"),
            })
        }
    };
    if body.dtype != "U8" || body.shape.len() != 1 {
        return Err(malformed(
            "tlspec_body_invalid",
            format!(
                "the body tensor has dtype {} and rank {}, expected U8 of rank 1",
                body.dtype,
                body.shape.len()
            ),
            REMEDY_DAMAGED,
        ));
    }
    let body_length = body.end - body.start;
    if body_length > limits.max_body_bytes {
        return Err(limit(
            "tlspec_body_too_large",
            format!(
                "the body takes {body_length} bytes, more than the limit of {}",
                limits.max_body_bytes
            ),
            "raise Limits::max_body_bytes if the file is trusted",
        ));
    }
    let data_start = 8 + json_length;
    let mut tensors: Vec<Checked> = tensors.collect();
    let crc_table = take_crc_table(&mut tensors, format_version, &manifest)?;
    if let Some((label, _)) = manifest
        .payload_checksums
        .iter()
        .find(|(label, _)| !logical.contains_key(label))
    {
        return Err(payload_mismatch(format!(
            "payload_crc32 names `{label}`, which is not a payload of the file"
        )));
    }

    let mut payloads = Vec::with_capacity(tensors.len());
    for tensor in tensors {
        if tensor.name.starts_with(RESERVED_TENSOR_PREFIX) {
            return Err(payload_mismatch(format!(
                "tensor `{}` uses a name the format reserves and this reader does not know",
                tensor.name
            )));
        }
        let dtype = logical.get(&tensor.name).ok_or_else(|| {
            payload_mismatch(format!(
                "payload `{}` has no logical dtype in the manifest",
                tensor.name
            ))
        })?;
        check_storage(&tensor, dtype)?;
        payloads.push(PayloadEntry {
            dtype: dtype.clone(),
            storage_dtype: tensor.dtype,
            shape: tensor.shape,
            offset: data_start + tensor.start,
            length: tensor.end - tensor.start,
            label: tensor.name,
        });
    }
    // Every payload found its logical dtype and names are unique, so equal counts mean the
    // manifest describes exactly these payloads.
    if logical.len() != payloads.len() {
        return Err(payload_mismatch(format!(
            "the manifest lists {} payload dtypes for {} payload tensors",
            logical.len(),
            payloads.len()
        )));
    }
    Ok(HeaderInfo {
        manifest,
        header_length: json_length,
        body_offset: data_start + body.start,
        body_length,
        payloads,
        crc_table_offset: crc_table.map(|table| data_start + table.start),
        file_length,
        format_version,
        // Filled in by `parse_header_with`, which holds the header bytes.
        header_crc32: 0,
        body_crc32,
    })
}

/// Takes the payload CRC-32 table out of `tensors` (the data's tensors after the body, sorted
/// by offset) and checks it: only in v2 files, the last tensor, `U32` of rank 1 with one entry
/// per remaining tensor, and never together with the manifest's `payload_crc32`.
fn take_crc_table(
    tensors: &mut Vec<Checked>,
    format_version: u32,
    manifest: &Manifest,
) -> CoreResult<Option<Checked>> {
    let Some(position) = tensors
        .iter()
        .position(|tensor| tensor.name == CRC_TABLE_TENSOR)
    else {
        return Ok(None);
    };
    if format_version < 2 {
        return Err(payload_mismatch(format!(
            "a version {format_version} file holds `{CRC_TABLE_TENSOR}`, which only version 2 has"
        )));
    }
    if position + 1 != tensors.len() {
        return Err(payload_mismatch(format!(
            "`{CRC_TABLE_TENSOR}` is not the last tensor of the data"
        )));
    }
    let table = tensors.remove(position);
    let payloads = tensors.len() as u64;
    if table.dtype != "U32" || table.shape.len() != 1 || table.shape[0] != payloads {
        return Err(payload_mismatch(format!(
            "`{CRC_TABLE_TENSOR}` is {} {:?}, but the file has {payloads} payloads (U32 [{payloads}] expected)",
            table.dtype, table.shape
        )));
    }
    if !manifest.payload_checksums.is_empty() {
        return Err(malformed(
            "tlspec_manifest_invalid",
            format!("the file holds `{CRC_TABLE_TENSOR}` and the manifest's payload_crc32 too (a writer records one or the other)"),
            REMEDY_DAMAGED,
        ));
    }
    Ok(Some(table))
}

/// Checks that a payload's stored dtype and shape are how its logical dtype is stored.
fn check_storage(tensor: &Checked, logical: &str) -> CoreResult<()> {
    let storage = storage_dtype(&Dtype::from_name(logical)).map_err(|_| {
        payload_mismatch(format!(
            "payload `{}` has unknown logical dtype `{logical}`",
            tensor.name
        ))
    })?;
    let consistent = match storage {
        StorageDtype::Native(name) => name == tensor.dtype,
        StorageDtype::Bits => {
            let item = Dtype::from_name(logical).item_size().unwrap_or(1);
            tensor.dtype == "U8"
                && tensor.shape.len() == 1
                && (tensor.end - tensor.start).checked_rem(item) == Some(0)
        }
    };
    if consistent {
        Ok(())
    } else {
        Err(payload_mismatch(format!(
            "payload `{}` is stored as {} {:?}, which is not how {logical} is stored",
            tensor.name, tensor.dtype, tensor.shape
        )))
    }
}

fn undecodable(message: String) -> CoreError {
    malformed("tlspec_body_undecodable", message, REMEDY_DAMAGED)
}

/// Decodes the body bytes (exactly `header.body_length` of them) into a trace, checks its
/// format version and invariants ([`super::validate_trace`]) and that its payloads are exactly
/// the header's payload table; each op's payload slot becomes its index in `header.payloads`.
pub fn decode_body(header: &HeaderInfo, body: &[u8]) -> CoreResult<Trace> {
    if body.len() as u64 != header.body_length {
        return Err(malformed(
            "tlspec_length_mismatch",
            format!(
                "got {} body bytes, expected {}",
                body.len(),
                header.body_length
            ),
            REMEDY_RANGES,
        ));
    }
    let postcard = match header.body_crc32 {
        Some(body_crc32) => integrity::verified_body(body, header.header_crc32, body_crc32)?,
        None => body,
    };
    let mut trace = decode_trace_body(postcard, Some(header.format_version))?;
    attach_payloads(&mut trace, &header.payloads)?;
    Ok(trace)
}

/// Rebuilds a trace from body bytes (a postcard [`super::TraceBody`] of any readable version,
/// optionally zero-padded to 8 bytes) and checks every invariant of the trace model. Payload
/// slots are left as stored.
pub fn trace_from_body(body: &[u8]) -> CoreResult<Trace> {
    decode_trace_body(body, None)
}

/// [`trace_from_body`]; inside a file the body's version must be the header's (`expected`).
fn decode_trace_body(body: &[u8], expected: Option<u32>) -> CoreResult<Trace> {
    // Postcard never preallocates past what the remaining bytes could hold, so a body that
    // declares a billion ops fails at the end of its bytes instead of allocating for them.
    let (version, rest) = postcard::take_from_bytes::<u32>(body)
        .map_err(|error| undecodable(format!("the body has no format version: {error}")))?;
    if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(CoreError::new(
            ErrorKind::UnsupportedVersion,
            "tlspec_version_unsupported",
            format!(
                "body format version {version}; this core reads versions {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}"
            ),
            "open the file with the TorchLens version that wrote it, or upgrade TorchLens",
        ));
    }
    if let Some(expected) = expected.filter(|&expected| expected != version) {
        return Err(undecodable(format!(
            "the body says format version {version}, the header {expected}"
        )));
    }
    let (mut trace, after) = postcard::take_from_bytes::<Trace>(rest)
        .map_err(|error| undecodable(format!("the trace body does not decode: {error}")))?;
    // An optional backward pass follows the trace as a postcard `Option` (tag 1); a body
    // without one ends here or with zero padding, which is where older writers stopped.
    let padding = if after.first() == Some(&1) {
        let (backward, padding) = postcard::take_from_bytes::<Option<BackwardGraph>>(after)
            .map_err(|error| undecodable(format!("the backward pass does not decode: {error}")))?;
        trace.backward = backward;
        padding
    } else {
        after
    };
    if padding.len() >= 8 || padding.iter().any(|&byte| byte != 0) {
        return Err(undecodable(format!(
            "{} bytes follow the trace body, more than its zero padding",
            padding.len()
        )));
    }
    validate_trace(&trace)?;
    share_repeated_text(&mut trace);
    share_repeated_shapes(&mut trace);
    share_repeated_reaches(&mut trace);
    Ok(trace)
}

fn attach_payloads(trace: &mut Trace, payloads: &[PayloadEntry]) -> CoreResult<()> {
    let index: HashMap<&str, usize> = payloads
        .iter()
        .enumerate()
        .map(|(slot, entry)| (entry.label.as_str(), slot))
        .collect();
    let mut matched = attach_grad_payloads(trace, payloads, &index)?;
    for op in &mut trace.ops {
        if op.payload().is_none() {
            continue;
        }
        let slot = *index.get(&*op.label).ok_or_else(|| {
            payload_mismatch(format!(
                "op {} has a payload but the file holds no tensor for it",
                op.label
            ))
        })?;
        let entry = &payloads[slot];
        let length = op
            .dtype
            .item_size()
            .and_then(|item| element_count(&op.shape)?.checked_mul(item));
        let shape_ok = match storage_dtype(&op.dtype) {
            Ok(StorageDtype::Native(_)) => entry.shape[..] == op.shape[..],
            Ok(StorageDtype::Bits) => true,
            Err(_) => false,
        };
        if entry.dtype != op.dtype.name() || length != Some(entry.length) || !shape_ok {
            return Err(payload_mismatch(format!(
                "op {} is {} {:?}, but its tensor is {} {:?}",
                op.label, op.dtype, op.shape, entry.dtype, entry.shape
            )));
        }
        op.set_payload(Some(slot as u64));
        matched += 1;
    }
    // Labels are unique (validated), so each tensor matched at most one op.
    if matched != payloads.len() {
        return Err(payload_mismatch(format!(
            "the file holds {} payload tensors but the trace refers to {matched}",
            payloads.len()
        )));
    }
    Ok(())
}

/// Points each saved gradient of the backward pass at its `grad/<op label>` tensor (same dtype
/// and shape as the op); returns how many tensors it matched.
fn attach_grad_payloads(
    trace: &mut Trace,
    payloads: &[PayloadEntry],
    index: &HashMap<&str, usize>,
) -> CoreResult<usize> {
    let Some(mut backward) = trace.backward.take() else {
        return Ok(0);
    };
    let mut matched = 0usize;
    for grad in &mut backward.grads {
        if grad.slot.is_none() {
            continue;
        }
        let op = &trace.ops[grad.op as usize];
        let name = format!("{GRAD_TENSOR_PREFIX}{}", op.label);
        let slot = *index.get(name.as_str()).ok_or_else(|| {
            payload_mismatch(format!(
                "op {} has a saved gradient but the file holds no tensor {name}",
                op.label
            ))
        })?;
        let entry = &payloads[slot];
        let length = op
            .dtype
            .item_size()
            .and_then(|item| element_count(&op.shape)?.checked_mul(item));
        if entry.dtype != op.dtype.name() || length != Some(entry.length) {
            return Err(payload_mismatch(format!(
                "the gradient of op {} must be {} {:?}, but its tensor is {} {:?}",
                op.label, op.dtype, op.shape, entry.dtype, entry.shape
            )));
        }
        grad.slot = Some(slot as u64);
        matched += 1;
    }
    trace.backward = Some(backward);
    Ok(matched)
}

/// Decodes a whole file held in memory: header, then body. Payload bytes are not read; they
/// lie at each [`PayloadEntry`]'s `offset`.
pub fn decode_file(bytes: &[u8]) -> CoreResult<(HeaderInfo, Trace)> {
    let json_length = header_length(bytes)?;
    let header_end = usize::try_from(8 + json_length).unwrap_or(usize::MAX);
    // When the file is shorter than its header, parse_header reports the truncation.
    let header_bytes = bytes.get(..header_end).unwrap_or(bytes);
    let header = parse_header(header_bytes, bytes.len() as u64)?;
    let range = usize::try_from(header.body_offset)
        .ok()
        .zip(usize::try_from(header.body_length).ok())
        .and_then(|(start, length)| bytes.get(start..start.checked_add(length)?))
        .ok_or_else(|| {
            limit(
                "tlspec_body_too_large",
                "the body is not addressable on this platform",
                "open the file on a 64-bit host",
            )
        })?;
    let trace = decode_body(&header, range)?;
    Ok((header, trace))
}
