//! Computes the core's build id: an FNV-1a 64 digest over the core's sources, the event
//! schema's sources and the WIT contract, each file fed as its workspace-relative path then
//! its bytes, in sorted path order. The result is baked in as `TORCHLENS_CORE_BUILD_ID`
//! (`torchlens-core-build:<16 hex digits>`), so the same sources always give the same id and
//! any change to them gives another.

use std::path::{Path, PathBuf};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut state: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        state ^= u64::from(byte);
        state = state.wrapping_mul(FNV_PRIME);
    }
    state
}

/// Every file under `dir`, recursively.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("reading {} for the build id: {error}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|error| panic!("listing {}: {error}", dir.display()))
            .path();
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir
        .parent()
        .expect("core-wasm lives in the workspace")
        .to_path_buf();
    let roots = ["core-wasm/src", "schema/src", "wit/torchlens.wit"];
    let mut files = Vec::new();
    for root in roots {
        let path = workspace.join(root);
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            collect(&path, &mut files);
        } else {
            files.push(path);
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&workspace)
                .unwrap_or(&path)
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            (relative, path)
        })
        .collect();
    named.sort();
    let mut state = FNV_OFFSET;
    for (relative, path) in &named {
        let bytes = std::fs::read(path)
            .unwrap_or_else(|error| panic!("reading {} for the build id: {error}", path.display()));
        state = fnv1a(state, relative.as_bytes());
        state = fnv1a(state, &[0]);
        state = fnv1a(state, &(bytes.len() as u64).to_le_bytes());
        state = fnv1a(state, &bytes);
    }
    println!("cargo:rustc-env=TORCHLENS_CORE_BUILD_ID=torchlens-core-build:{state:016x}");
}
