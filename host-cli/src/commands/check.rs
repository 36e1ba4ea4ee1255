//! `tlspec check`: the structure (every bound and invariant the core checks on decode) and
//! every payload's bytes against the CRC-32 its writer recorded: in the payload CRC-32 table
//! at the end of the file, or (files written before the table) in the manifest's
//! `payload_crc32`.

use crate::error::CliError;
use crate::exit_status::ExitStatus;
use crate::output::{bytes, shown, Outcome};
use crate::tlspec_file::{OpenedTrace, CHUNK_BYTES};
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Instant;

/// Runs `check`. Decoding the file already checked its structure; this reads the payloads.
pub fn run(file: &mut OpenedTrace) -> Result<Outcome, CliError> {
    let (recorded, source) = match file.crc_table()? {
        Some(table) => (table, "table"),
        None if file.header.manifest.payload_checksums.is_empty() => (BTreeMap::new(), "none"),
        None => (
            file.header
                .manifest
                .payload_checksums
                .iter()
                .cloned()
                .collect(),
            "manifest",
        ),
    };
    let mut entries = file.header.payloads.clone();
    entries.sort_by_key(|entry| entry.offset);

    let started = Instant::now();
    let mut buffer = vec![0u8; 4 * CHUNK_BYTES];
    let mut mismatched = Vec::new();
    let mut unrecorded = Vec::new();
    let mut verified = 0usize;
    let mut bytes_read = 0u64;
    for entry in &entries {
        let mut hasher = crc32fast::Hasher::new();
        let mut reader = file.payload_reader(entry)?;
        loop {
            let read = reader.next_chunk(&mut buffer)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            bytes_read += read as u64;
        }
        let actual = hasher.finalize();
        match recorded.get(&entry.label) {
            Some(&expected) if expected == actual => verified += 1,
            Some(&expected) => mismatched.push(json!({
                "label": entry.label,
                "expected_crc32": format!("{expected:08x}"),
                "actual_crc32": format!("{actual:08x}"),
            })),
            None => unrecorded.push(entry.label.clone()),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let throughput = if seconds > 0.0 {
        bytes_read as f64 / seconds / 1e9
    } else {
        0.0
    };

    let json = json!({
        "structure": "ok",
        "checksums": source,
        "payloads": entries.len(),
        "verified": verified,
        "mismatched": mismatched,
        "unrecorded": unrecorded,
        "bytes_read": bytes_read,
        "seconds": seconds,
        "gb_per_second": throughput,
    });
    let mut text = String::new();
    let _ = writeln!(
        text,
        "structure   ok (header bounds, payload tiling, dtypes, trace invariants)"
    );
    let _ = writeln!(
        text,
        "payloads    {} read ({}) in {:.3} s, {:.2} GB/s",
        entries.len(),
        bytes(bytes_read),
        seconds,
        throughput
    );
    let _ = writeln!(text, "checksums   {verified} match");
    for bad in &mismatched {
        let _ = writeln!(
            text,
            "DAMAGED     {}: CRC-32 {} recorded, {} read",
            shown(bad["label"].as_str().unwrap_or_default()),
            bad["expected_crc32"].as_str().unwrap_or_default(),
            bad["actual_crc32"].as_str().unwrap_or_default()
        );
    }
    if !unrecorded.is_empty() {
        let _ = writeln!(
            text,
            "unchecked   {} payloads have no recorded CRC-32 (bounds checked only)",
            unrecorded.len()
        );
    }
    Ok(Outcome {
        status: if mismatched.is_empty() {
            ExitStatus::Success
        } else {
            ExitStatus::Findings
        },
        json,
        text,
    })
}
