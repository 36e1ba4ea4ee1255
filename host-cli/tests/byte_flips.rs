//! Every byte of a small valid `.tlspec` (format version 2, payload checksums recorded) is
//! checked: changing any one of them makes `tlspec check` fail. Both ways a file records its
//! payload checksums are flipped through: the CRC-32 table at the end (what writers write now)
//! and the manifest's `payload_crc32` (files written before the table).

#[path = "../../core-wasm/tests/hostile_corpus.rs"]
mod hostile_corpus;

use std::path::Path;
use std::process::Command;
use torchlens_core::tlspec;

/// The corpus's valid file, written again with a CRC-32 for every payload in the manifest.
fn file_with_manifest_checksums() -> Vec<u8> {
    let valid = hostile_corpus::valid_file();
    let (header, trace) = tlspec::decode_file(&valid).expect("the base file is valid");
    let bytes_of = |slot: u64| {
        let entry = header.payloads.get(slot as usize)?;
        valid.get(entry.offset as usize..(entry.offset + entry.length) as usize)
    };
    let mut manifest = header.manifest.clone();
    manifest.payload_checksums = (0..header.payloads.len() as u64)
        .map(|slot| {
            let bytes = bytes_of(slot).expect("payload bytes");
            (
                header.payloads[slot as usize].label.clone(),
                crc32fast::hash(bytes),
            )
        })
        .collect();
    tlspec::encode_with_payloads(&trace, &manifest, bytes_of).expect("encodes")
}

fn check(path: &Path) -> i32 {
    Command::new(env!("CARGO_BIN_EXE_tlspec"))
        .args(["--json", "check"])
        .arg(path)
        .env(
            "TORCHLENS_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"),
        )
        .output()
        .expect("tlspec runs")
        .status
        .code()
        .expect("tlspec exits by itself")
}

/// Flips one bit of each byte of `good` in turn; every change must make `check` fail.
fn every_flip_fails_check(name: &str, good: &[u8]) {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join("byte-flips");
    std::fs::create_dir_all(&folder).expect("folder");
    let path = folder.join(format!("{name}.tlspec"));
    std::fs::write(&path, good).expect("write");
    assert_eq!(check(&path), 0, "the unchanged file passes");
    let mut passed = Vec::new();
    for index in 0..good.len() {
        let mut damaged = good.to_vec();
        damaged[index] ^= 0x01;
        std::fs::write(&path, &damaged).expect("write");
        if check(&path) == 0 {
            passed.push(index);
        }
    }
    assert!(
        passed.is_empty(),
        "{name}: {} of {} one-bit changes passed check, at offsets {passed:?}",
        passed.len(),
        good.len()
    );
}

#[test]
fn check_fails_for_a_change_to_any_byte_of_a_file_with_the_crc_table() {
    let good = hostile_corpus::valid_file();
    let (header, _) = tlspec::decode_file(&good).expect("valid");
    assert!(header.crc_table_offset.is_some());
    every_flip_fails_check("table", &good);
}

#[test]
fn check_fails_for_a_change_to_any_byte_of_a_file_with_manifest_checksums() {
    let good = file_with_manifest_checksums();
    let (header, _) = tlspec::decode_file(&good).expect("valid");
    assert!(header.crc_table_offset.is_none());
    every_flip_fails_check("manifest", &good);
}
