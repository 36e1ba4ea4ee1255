//! The v2 checksums: every byte before the payloads, and the payloads themselves.
//!
//! - `body_crc32` (manifest): CRC-32 of the body tensor after its check block (the postcard
//!   body and its zero padding).
//! - The check block (the body tensor's first 8 bytes): the CRC-32 of the file's first `8 + n`
//!   bytes (length field, header JSON, padding spaces) as a little-endian `u32`, then 4 bytes
//!   reserved for later revisions, zero in v2.
//! - The payload CRC-32 table (the `__torchlens_payload_crc32__` tensor, last in the file): one
//!   little-endian CRC-32 per payload, in file order. It comes after the payloads so a writer
//!   checksums each payload while writing it and writes the table at the end; the header only
//!   declares its size (4 bytes per payload), known before any payload is written. Files
//!   written before the table carry the manifest's `payload_crc32` instead.
//!
//! The header names the body checksum and the body names the header checksum, so neither
//! checksum covers itself and a writer computes them in one pass: body first, then the
//! header that records it, then the check block. CRC-32 (IEEE, as zlib's `crc32`) is the
//! checksum payloads already use; it catches every burst error up to 32 bits, which is what
//! damage on disk or in transfer looks like. It is not a signature: anyone can recompute it.

use super::errors::{malformed, REMEDY_DAMAGED};
use crate::error::{CoreError, CoreResult};

/// Length of the check block at the start of a v2 body tensor.
pub const CHECK_BLOCK_LENGTH: usize = 8;

/// Bytes per entry of the payload CRC-32 table (a little-endian `u32`).
pub const CRC_TABLE_ENTRY_BYTES: u64 = 4;

/// The payload CRC-32 table's bytes: each CRC-32 as a little-endian `u32`, in file order.
pub fn crc_table_bytes(crcs: impl IntoIterator<Item = u32>) -> Vec<u8> {
    crcs.into_iter().flat_map(u32::to_le_bytes).collect()
}

/// The CRC-32s of a table's bytes, in file order (a trailing partial entry is ignored: the
/// decoder has already checked that the table holds exactly four bytes per payload).
pub fn crc_table_entries(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes
        .chunks_exact(CRC_TABLE_ENTRY_BYTES as usize)
        .map(|entry| u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]))
}

/// CRC-32 (IEEE) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The check block for a header whose bytes (`8 + n` of them) have CRC-32 `header_crc32`.
pub fn check_block(header_crc32: u32) -> [u8; CHECK_BLOCK_LENGTH] {
    let mut block = [0u8; CHECK_BLOCK_LENGTH];
    block[..4].copy_from_slice(&header_crc32.to_le_bytes());
    block
}

fn mismatch(code: &'static str, message: String) -> CoreError {
    malformed(code, message, REMEDY_DAMAGED)
}

/// Checks a v2 body tensor against the header's checksum and `body_crc32`; returns the bytes
/// after the check block (the postcard body and its padding).
pub fn verified_body(body: &[u8], header_crc32: u32, body_crc32: u32) -> CoreResult<&[u8]> {
    let (block, rest) = body.split_at_checked(CHECK_BLOCK_LENGTH).ok_or_else(|| {
        mismatch(
            "tlspec_body_invalid",
            format!(
                "the body tensor has {} bytes, fewer than its {CHECK_BLOCK_LENGTH}-byte check block",
                body.len()
            ),
        )
    })?;
    let recorded = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
    if recorded != header_crc32 {
        return Err(mismatch(
            "tlspec_header_checksum_mismatch",
            format!(
                "the header's CRC-32 is {header_crc32:08x}, but the file recorded {recorded:08x}: the header or the check block changed"
            ),
        ));
    }
    if block[4..] != [0, 0, 0, 0] {
        return Err(mismatch(
            "tlspec_header_checksum_mismatch",
            "the check block's reserved bytes are not zero".to_string(),
        ));
    }
    let actual = crc32(rest);
    if actual != body_crc32 {
        return Err(mismatch(
            "tlspec_body_checksum_mismatch",
            format!(
                "the body's CRC-32 is {actual:08x}, but the manifest recorded {body_crc32:08x}"
            ),
        ));
    }
    Ok(rest)
}
