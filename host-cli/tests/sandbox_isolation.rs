//! The sandbox the CLI runs the core in gives a component no files, no network and no
//! environment. Shown two ways: a probe component that really tries each (built here for
//! wasm32-wasip2) is stopped under the same linker and limits, and the core component's own
//! imports get no real answer except fixed bytes for `wasi:random`.

use std::path::{Path, PathBuf};
use std::process::Command;
use torchlens_host_runtime::embedded::EMBEDDED_COMPONENT;
use torchlens_host_runtime::foreign::{imports_given_real_answers, ForeignComponent};
use torchlens_host_runtime::SandboxLimits;

/// Builds the probe with its own target directory (the outer build holds the main one).
fn probe_component() -> Vec<u8> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sandbox_probe/Cargo.toml");
    let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox-probe-build");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the sandbox probe failed");
    std::fs::read(target_dir.join("wasm32-wasip2/release/sandbox_probe.wasm")).expect("probe built")
}

/// Calls a string-returning export; `Err` when the sandbox stopped the call (a trap).
fn call(
    probe: &mut ForeignComponent,
    name: &str,
    argument: Option<&str>,
) -> Result<String, String> {
    let store = &mut probe.store;
    let outcome = match argument {
        Some(argument) => probe
            .instance
            .get_typed_func::<(String,), (String,)>(&mut *store, name)
            .expect("export exists")
            .call(&mut *store, (argument.to_owned(),)),
        None => probe
            .instance
            .get_typed_func::<(), (String,)>(&mut *store, name)
            .expect("export exists")
            .call(&mut *store, ()),
    };
    outcome
        .map(|(text,)| text)
        .map_err(|error| format!("{error:#}"))
}

#[test]
fn a_component_in_the_sandbox_reaches_no_file_no_network_and_no_environment() {
    let bytes = probe_component();
    // The probe works: a call that needs nothing succeeds.
    let mut probe = ForeignComponent::load(&bytes, SandboxLimits::untrusted()).expect("loads");
    let add = probe
        .instance
        .get_typed_func::<(u32, u32), (u32,)>(&mut probe.store, "add")
        .expect("add");
    assert_eq!(add.call(&mut probe.store, (2, 3)).expect("add runs"), (5,));

    // The file the CLI was given, another file, a folder, the network, the environment: each
    // attempt is stopped (a trap) or fails, and nothing of the outside comes back.
    let given = std::env::current_exe().expect("a file that exists");
    let attempts: [(&str, Option<&str>); 6] = [
        ("read-file", Some(given.to_str().expect("utf-8"))),
        ("read-file", Some("/etc/passwd")),
        ("list-folder", Some("/")),
        ("list-folder", Some(".")),
        ("connect", Some("127.0.0.1:22")),
        ("environment", None),
    ];
    for (name, argument) in attempts {
        // A trap ends an instance, so each attempt gets a fresh one.
        let mut probe = ForeignComponent::load(&bytes, SandboxLimits::untrusted()).expect("loads");
        let outcome = call(&mut probe, name, argument);
        eprintln!("{name}({argument:?}) -> {outcome:?}");
        match outcome {
            Err(trap) => assert!(
                trap.contains("wasi:"),
                "{name}: the trap should name the refused WASI import: {trap}"
            ),
            Ok(answer) => assert!(
                answer.starts_with("error:") || answer == "0 variables, 0 arguments",
                "{name}({argument:?}) reached the outside: {answer}"
            ),
        }
    }
}

#[test]
fn the_core_component_gets_real_answers_only_for_random_bytes() {
    let answered = imports_given_real_answers(EMBEDDED_COMPONENT).expect("the core compiles");
    assert!(
        answered.iter().all(|name| name.starts_with("wasi:random/")),
        "{answered:?}"
    );
}
