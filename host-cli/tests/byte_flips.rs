//! Every byte of a small valid `.tlspec` (format version 2, payload checksums recorded) is
//! checked: changing any one of them makes `tlspec check` fail.

#[path = "../../core-wasm/tests/hostile_corpus.rs"]
mod hostile_corpus;

use std::path::Path;
use std::process::Command;
use torchlens_core::tlspec;

/// The corpus's valid file, written again with a CRC-32 for every payload.
fn file_with_payload_checksums() -> Vec<u8> {
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

#[test]
fn check_fails_for_a_change_to_any_byte() {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join("byte-flips");
    std::fs::create_dir_all(&folder).expect("folder");
    let good = file_with_payload_checksums();
    let path = folder.join("file.tlspec");
    std::fs::write(&path, &good).expect("write");
    assert_eq!(check(&path), 0, "the unchanged file passes");
    let mut passed = Vec::new();
    for index in 0..good.len() {
        let mut damaged = good.clone();
        damaged[index] ^= 0x01;
        std::fs::write(&path, &damaged).expect("write");
        if check(&path) == 0 {
            passed.push(index);
        }
    }
    assert!(
        passed.is_empty(),
        "{} of {} one-bit changes passed check, at offsets {passed:?}",
        passed.len(),
        good.len()
    );
}
