//! With the `embedded-component` feature: builds the core as a WASI component and hands its
//! path to the crate, which embeds it (`include_bytes!`), so one binary or wheel carries
//! everything. Cargo cannot build a dependency for
//! another target itself, so this runs a nested cargo with its own target directory (sharing
//! the outer one would deadlock on its lock). `TORCHLENS_COMPONENT` skips the build and embeds
//! that file instead.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_EMBEDDED_COMPONENT").is_none() {
        return;
    }
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir
        .parent()
        .expect("host-runtime lives in the workspace");
    for watched in [
        "core-wasm/src",
        "core-wasm/build.rs",
        "core-wasm/Cargo.toml",
        "schema/src",
        "schema/Cargo.toml",
        "wit",
        "Cargo.lock",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    println!("cargo:rerun-if-env-changed=TORCHLENS_COMPONENT");

    let component = match std::env::var_os("TORCHLENS_COMPONENT") {
        Some(path) => PathBuf::from(path),
        None => build_component(workspace),
    };
    println!(
        "cargo:rustc-env=TORCHLENS_COMPONENT_PATH={}",
        component.display()
    );
}

fn build_component(workspace: &Path) -> PathBuf {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    // Next to the outer target directory so repeated builds reuse it.
    let target_dir = out_dir
        .ancestors()
        .find(|path| path.file_name().is_some_and(|name| name == "target"))
        .map_or_else(
            || out_dir.join("component-target"),
            |target| target.join("component-build"),
        );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(&cargo)
        .current_dir(workspace)
        .args([
            "build",
            "--quiet",
            "-p",
            "torchlens-core",
            "--lib",
            "--release",
        ])
        .args(["--target", "wasm32-wasip2", "--target-dir"])
        .arg(&target_dir)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("run cargo to build the core component");
    if !status.success() {
        panic!(
            "building the core component failed; `rustup target add wasm32-wasip2` may be missing \
             (scripts/setup-rust.sh adds it)"
        );
    }
    target_dir.join("wasm32-wasip2/release/torchlens_core.wasm")
}
