//! Encoding: the core lays the file out, the host writes the payload bytes.

use super::dtype_map::{element_count, storage_dtype, StorageDtype};
use super::header::{HeaderOut, TensorOut};
use super::integrity;
use super::limits::{Limits, MAX_RANK};
use super::manifest::Manifest;
use super::source_paths;
use super::validate::validate_trace;
use super::{BODY_TENSOR, CRC_TABLE_TENSOR, FORMAT_VERSION, RESERVED_TENSOR_PREFIX};
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::events::PayloadSlot;
use crate::model::{Trace, GRAD_TENSOR_PREFIX};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Where one payload goes in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayloadPlacement {
    /// The op whose payload this is.
    pub op: u32,
    /// The host's handle on the payload (the op's `payload` slot).
    pub slot: PayloadSlot,
    /// The op label, which is the tensor name.
    pub label: String,
    /// Absolute file offset of the first byte.
    pub offset: u64,
    /// Exact number of bytes the host must write.
    pub length: u64,
    /// Logical dtype name (`bfloat16`, `complex128`, ...).
    pub dtype: String,
}

/// A laid-out file: write `prefix`, then each payload's bytes in `payloads` order, then (when
/// `crc_table_offset` is set) the payload CRC-32 table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedLayout {
    /// 8-byte LE header length, header JSON and the body tensor: everything before the first
    /// payload.
    pub prefix: Vec<u8>,
    /// Payload placements in file order (contiguous, the first at `prefix.len()`).
    pub payloads: Vec<PayloadPlacement>,
    /// Absolute offset of the payload CRC-32 table, right after the last payload: the host
    /// writes there one little-endian CRC-32 per placement, in `payloads` order
    /// ([`super::crc_table_bytes`]), computed over the bytes it wrote. `None` when the file has
    /// no payloads or the manifest carries the checksums (`payload_checksums`, the form written
    /// before the table).
    pub crc_table_offset: Option<u64>,
    /// Total length of the finished file.
    pub file_length: u64,
}

/// The body as written: a borrowed twin of [`super::TraceBody`] (same postcard bytes), so
/// encoding never clones the trace.
#[derive(Serialize)]
struct TraceBodyRef<'a> {
    format_version: u32,
    trace: &'a Trace,
}

/// The postcard body of a trace, unpadded. A backward pass follows the trace as a postcard
/// `Option` (tag 1, then the graph); a trace without one has exactly the bytes it had before
/// backward passes existed, and a reader sees the zero padding after it as `None`.
pub(crate) fn body_bytes(trace: &Trace) -> Vec<u8> {
    // Serialising plain data into a Vec cannot fail: every type in the model serialises.
    let mut bytes = postcard::to_allocvec(&TraceBodyRef {
        format_version: FORMAT_VERSION,
        trace,
    })
    .unwrap_or_default();
    if let Some(backward) = &trace.backward {
        bytes.extend(postcard::to_allocvec(&Some(backward)).unwrap_or_default());
    }
    bytes
}

/// One payload before placement.
struct Pending<'a> {
    op: u32,
    slot: PayloadSlot,
    /// The tensor name: the op label, or `grad/<op label>` for a saved gradient.
    label: Cow<'a, str>,
    logical: &'a str,
    storage: StorageDtype,
    storage_shape: Vec<u64>,
    length: u64,
    alignment: u64,
}

fn encode_error(code: &'static str, message: String, remedy: &'static str) -> CoreError {
    CoreError::new(ErrorKind::InvalidTrace, code, message, remedy)
}

/// Checksums, when given, name each saved payload exactly once.
fn check_checksums_cover<V>(
    checksums: &[(String, u32)],
    payloads: &BTreeMap<&str, V>,
) -> CoreResult<()> {
    if checksums.is_empty() {
        return Ok(());
    }
    let named: std::collections::BTreeSet<&str> =
        checksums.iter().map(|(label, _)| label.as_str()).collect();
    let complete = named.len() == checksums.len()
        && named.len() == payloads.len()
        && named.iter().all(|label| payloads.contains_key(label));
    if complete {
        return Ok(());
    }
    Err(CoreError::new(
        ErrorKind::Unsupported,
        "tlspec_checksums_incomplete",
        format!(
            "{} payload checksums were given for {} saved payloads (each must be named once)",
            checksums.len(),
            payloads.len()
        ),
        "give one CRC-32 per saved payload, keyed by op label, or none",
    ))
}

/// Lays out a `.tlspec` for `trace`: validates the trace, encodes the body and the header, and
/// places each op's payload, then the payload CRC-32 table. Payloads are ordered by alignment
/// (largest first, as safetensors does), then by op id, and the body is zero-padded to 8
/// bytes, so every payload starts at an offset aligned to its element size (up to 8) and hosts
/// can map it without copying; the table (4-byte entries) follows the last payload.
pub fn encode_layout(trace: &Trace, manifest: &Manifest) -> CoreResult<EncodedLayout> {
    validate_trace(trace)?;
    // Sources rewritten for sharing (`source_paths` in the manifest's extra keys), on a copy:
    // the live trace keeps the paths it recorded.
    let rewritten = source_paths::rewritten(trace, manifest)?;
    let trace = rewritten.as_ref().unwrap_or(trace);
    let mut pending = Vec::new();
    for (index, op) in trace.ops.iter().enumerate() {
        let Some(slot) = op.payload() else { continue };
        pending.push(pending_payload(index as u32, slot, op)?);
    }
    // Saved gradients: same shape and dtype as their op's output, under `grad/<label>`.
    for grad in trace.backward.iter().flat_map(|backward| &backward.grads) {
        let (Some(slot), Some(op)) = (grad.slot, trace.ops.get(grad.op as usize)) else {
            continue;
        };
        let mut payload = pending_payload(grad.op, slot, op)?;
        payload.label = Cow::Owned(format!("{GRAD_TENSOR_PREFIX}{}", op.label));
        pending.push(payload);
    }
    // Stable sort keeps op order among payloads of one alignment.
    pending.sort_by_key(|payload| std::cmp::Reverse(payload.alignment));

    let mut body = body_bytes(trace);
    body.resize(body.len().next_multiple_of(8), 0);
    let body_crc32 = integrity::crc32(&body);
    // The body tensor starts with the check block (the header's CRC-32).
    let body_length = (integrity::CHECK_BLOCK_LENGTH + body.len()) as u64;

    let mut logical_dtypes = BTreeMap::new();
    let mut tensors = Vec::with_capacity(pending.len() + 1);
    let body_shape = [body_length];
    tensors.push(TensorOut {
        name: BODY_TENSOR,
        dtype: "U8",
        shape: &body_shape,
        data_offsets: (0, body_length),
    });
    let mut end = body_length;
    // The CRC-32 table goes last, so the host checksums each payload as it writes it. A writer
    // that gives the checksums up front gets the manifest key instead (readable by readers
    // built before the table).
    let with_table = manifest.payload_checksums.is_empty() && !pending.is_empty();
    let table_shape = [pending.len() as u64];
    for payload in &pending {
        let start = end;
        end = start.checked_add(payload.length).ok_or_else(too_large)?;
        tensors.push(TensorOut {
            name: &payload.label,
            dtype: payload.storage.name(),
            shape: &payload.storage_shape,
            data_offsets: (start, end),
        });
        logical_dtypes.insert(payload.label.as_ref(), payload.logical);
    }
    let payloads_end = end;
    if with_table {
        let start = end;
        end = table_shape[0]
            .checked_mul(integrity::CRC_TABLE_ENTRY_BYTES)
            .and_then(|length| start.checked_add(length))
            .ok_or_else(too_large)?;
        tensors.push(TensorOut {
            name: CRC_TABLE_TENSOR,
            dtype: "U32",
            shape: &table_shape,
            data_offsets: (start, end),
        });
    }
    check_checksums_cover(&manifest.payload_checksums, &logical_dtypes)?;
    let logical_json = serde_json::to_string(&logical_dtypes).map_err(json_bug)?;
    let metadata = manifest.to_metadata(logical_json, body_crc32)?;
    let mut header = serde_json::to_vec(&HeaderOut {
        metadata: &metadata,
        tensors: &tensors,
    })
    .map_err(json_bug)?;
    // safetensors pads the header with spaces so the data section starts 8-byte aligned.
    header.resize(header.len().next_multiple_of(8), b' ');
    let header_length = header.len() as u64;
    if header_length > Limits::default().max_header_bytes {
        return Err(CoreError::new(
            ErrorKind::LimitExceeded,
            "tlspec_header_too_large",
            format!("the header would take {header_length} bytes, more than readers accept"),
            "save fewer payloads (for example with a narrower save selector)",
        ));
    }
    let data_start = 8 + header_length;
    let file_length = data_start.checked_add(end).ok_or_else(too_large)?;

    let mut prefix =
        Vec::with_capacity(8 + header.len() + integrity::CHECK_BLOCK_LENGTH + body.len());
    prefix.extend_from_slice(&header_length.to_le_bytes());
    prefix.extend_from_slice(&header);
    let header_crc32 = integrity::crc32(&prefix);
    prefix.extend_from_slice(&integrity::check_block(header_crc32));
    prefix.extend_from_slice(&body);

    let mut offset = data_start + body_length;
    let payloads = pending
        .iter()
        .map(|payload| {
            let placement = PayloadPlacement {
                op: payload.op,
                slot: payload.slot,
                label: payload.label.to_string(),
                offset,
                length: payload.length,
                dtype: payload.logical.to_string(),
            };
            offset += payload.length;
            placement
        })
        .collect();
    Ok(EncodedLayout {
        prefix,
        payloads,
        crc_table_offset: with_table.then_some(data_start + payloads_end),
        file_length,
    })
}

fn pending_payload(
    op: u32,
    slot: PayloadSlot,
    record: &crate::model::Op,
) -> CoreResult<Pending<'_>> {
    let label = &*record.label;
    if label.starts_with(RESERVED_TENSOR_PREFIX) || label == super::header::METADATA_KEY {
        return Err(encode_error(
            "tlspec_label_reserved",
            format!("op {op} is labelled `{label}`, a name the file format reserves"),
            "report this as a bug in the adapter or the core: labels never take these names",
        ));
    }
    let storage = storage_dtype(&record.dtype)?;
    if record.shape.len() > MAX_RANK {
        return Err(CoreError::new(
            ErrorKind::LimitExceeded,
            "tlspec_rank_too_large",
            format!(
                "op {label} has rank {}, more than {MAX_RANK}",
                record.shape.len()
            ),
            "save this op without its payload",
        ));
    }
    // `storage_dtype` succeeded, so the dtype is named and has an item size.
    let item_size = record.dtype.item_size().unwrap_or(1);
    let length = element_count(&record.shape)
        .and_then(|count| count.checked_mul(item_size))
        .ok_or_else(|| {
            CoreError::new(
                ErrorKind::LimitExceeded,
                "tlspec_shape_overflow",
                format!(
                    "op {label}'s shape {:?} overflows a 64-bit byte count",
                    record.shape
                ),
                "save this op without its payload",
            )
        })?;
    let storage_shape = match storage {
        StorageDtype::Native(_) => record.shape.to_vec(),
        StorageDtype::Bits => vec![length],
    };
    Ok(Pending {
        op,
        slot,
        label: Cow::Borrowed(label),
        logical: record.dtype.name(),
        storage,
        storage_shape,
        length,
        alignment: item_size.min(8),
    })
}

fn too_large() -> CoreError {
    CoreError::new(
        ErrorKind::LimitExceeded,
        "tlspec_shape_overflow",
        "the payloads add up to more than 2^64 bytes",
        "save fewer payloads",
    )
}

fn json_bug(error: serde_json::Error) -> CoreError {
    encode_error(
        "tlspec_header_unencodable",
        format!("the header could not be encoded: {error}"),
        "report this as a bug in the TorchLens core",
    )
}

/// Encodes a whole file in memory, asking `payload_bytes` for each op's payload by slot (for
/// tests, benches and small traces), and fills the payload CRC-32 table from the bytes it
/// copies. Errors with `tlspec_payload_missing` when a slot has no bytes and
/// `tlspec_length_mismatch` when its length disagrees with the op's shape and dtype.
pub fn encode_with_payloads<'a>(
    trace: &Trace,
    manifest: &Manifest,
    payload_bytes: impl Fn(PayloadSlot) -> Option<&'a [u8]>,
) -> CoreResult<Vec<u8>> {
    let layout = encode_layout(trace, manifest)?;
    let capacity = usize::try_from(layout.file_length).map_err(|_| too_large())?;
    let mut file = Vec::with_capacity(capacity);
    file.extend_from_slice(&layout.prefix);
    let mut crcs = Vec::with_capacity(layout.payloads.len());
    for placement in &layout.payloads {
        let bytes = payload_bytes(placement.slot).ok_or_else(|| {
            CoreError::new(
                ErrorKind::NotFound,
                "tlspec_payload_missing",
                format!(
                    "no bytes for payload slot {} (op {})",
                    placement.slot, placement.label
                ),
                "keep every payload the trace refers to until it is saved",
            )
        })?;
        if bytes.len() as u64 != placement.length {
            return Err(CoreError::new(
                ErrorKind::InvalidTrace,
                "tlspec_length_mismatch",
                format!(
                    "payload of op {} has {} bytes, but its shape and dtype need {}",
                    placement.label,
                    bytes.len(),
                    placement.length
                ),
                "hand over the payload's contiguous bytes, little endian, for its recorded dtype",
            ));
        }
        file.extend_from_slice(bytes);
        crcs.push(integrity::crc32(bytes));
    }
    if layout.crc_table_offset.is_some() {
        file.extend(integrity::crc_table_bytes(crcs));
    }
    Ok(file)
}
