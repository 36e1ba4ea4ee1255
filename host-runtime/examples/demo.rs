//! The demo: runs the built-in demo model's capture events through the core component under
//! wasmtime, prints the trace summary, saves a `.tlspec` (the host writes the payload bytes),
//! reloads it through the component, and writes the graph as SVG.
//!
//! `cargo run -p torchlens-host-runtime --example demo -- OUT_DIR`

use std::io::Write;
use std::path::{Path, PathBuf};
use torchlens_core::demo_model::demo_events;
use torchlens_core::events::EventBatch;
use torchlens_core::tlspec;
use torchlens_host_runtime::{default_component_path, wit, CoreRuntime, HostError, SandboxLimits};

/// The demo's stand-in activations: float32 values derived from the payload slot.
fn payload_bytes(slot: u64, length: u64) -> Vec<u8> {
    (0..length / 4)
        .flat_map(|index| ((slot as f32) + index as f32 * 0.25).to_le_bytes())
        .collect()
}

/// Writes `bytes` to `path` atomically: temporary file, fsync, rename.
fn write_atomically(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    let temporary = path.with_extension("partial");
    let mut file = std::fs::File::create(&temporary)?;
    for part in parts {
        file.write_all(part)?;
    }
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

fn run(out_dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(out_dir)?;
    let cache = out_dir.join("component-cache");
    let runtime = CoreRuntime::from_component_file(
        &default_component_path(),
        Some(&cache),
        SandboxLimits::trusted(),
    )?;
    let mut core = runtime.instantiate()?;
    println!(
        "TorchLens core {} on wasmtime {}",
        core.version()?,
        torchlens_host_runtime::runtime::wasmtime_version()
    );

    let options = wit::TraceOptions {
        recurrence_detection: true,
        compute_input_output_distances: true,
    };
    let session = core.start_session(options, None)?;
    let batch = EventBatch {
        events: demo_events(),
    };
    core.ingest(session, &batch.to_postcard())?;
    let (trace, _) = core.finish(session)?;
    let table =
        core.call_infallible(|guest, store| guest.trace().call_summary_table(store, trace))?;
    println!("\n{table}");

    let manifest = wit::Manifest {
        backend: "demo".into(),
        backend_runtime: "built-in demo model".into(),
        backend_version: env!("CARGO_PKG_VERSION").into(),
        payload_policy: "array_payloads".into(),
        save_level: "all".into(),
        created_at: "demo".into(),
        codec_metadata: "{}".into(),
        payload_checksums: Vec::new(),
        extra: Vec::new(),
    };
    let layout = core.encode(trace, &manifest)?;
    let payloads: Vec<Vec<u8>> = layout
        .payloads
        .iter()
        .map(|placement| payload_bytes(placement.slot, placement.length))
        .collect();
    // The payload CRC-32 table follows the payloads: one CRC-32 of each payload's bytes.
    let crc_table = tlspec::crc_table_bytes(payloads.iter().map(|bytes| tlspec::crc32(bytes)));
    let mut parts: Vec<&[u8]> = vec![&layout.prefix];
    parts.extend(payloads.iter().map(Vec::as_slice));
    if layout.crc_table_offset.is_some() {
        parts.push(&crc_table);
    }
    let path = out_dir.join("demo.tlspec");
    write_atomically(&path, &parts)?;
    println!(
        "saved {} ({} bytes, {} payloads)",
        path.display(),
        layout.file_length,
        layout.payloads.len()
    );

    let file = std::fs::read(&path)?;
    let header_length = core.tlspec_header_length(&file[..8.min(file.len())])? as usize;
    let header = &file[..8 + header_length];
    let info = core.parse_tlspec_header(header, file.len() as u64)?;
    let body = &file[info.body_offset as usize..(info.body_offset + info.body_length) as usize];
    let (info, reloaded) = core.decode_tlspec(header, body, file.len() as u64)?;
    let reloaded_info = core.trace_info(reloaded)?;
    // Payload slots are renumbered on load (they index the file's payload table), so compare
    // what a user sees: the summary.
    let summary = |core: &mut torchlens_host_runtime::CoreInstance, handle| {
        core.call_infallible(|guest, store| guest.trace().call_summary_table(store, handle))
    };
    let same_body = summary(&mut core, reloaded)? == summary(&mut core, trace)?;
    let same_values = info
        .payloads
        .iter()
        .zip(&layout.payloads)
        .all(|(entry, placement)| {
            file[entry.offset as usize..(entry.offset + entry.length) as usize]
                == payload_bytes(placement.slot, placement.length)[..]
        });
    println!(
        "reloaded: {} ops, backend {:?}, trace identical: {same_body}, payloads identical: {same_values}",
        reloaded_info.op_count, info.manifest.backend
    );

    for (name, view) in [
        ("demo-overview.svg", wit::LayoutView::Collapsed(Vec::new())),
        ("demo-graph.svg", wit::LayoutView::Full),
    ] {
        let svg = core.call(|guest, store| guest.trace().call_svg(store, trace, &view))?;
        let path = out_dir.join(name);
        std::fs::write(&path, svg)?;
        println!("wrote {}", path.display());
    }
    if !(same_body && same_values) {
        return Err("the reloaded trace differs from the saved one".into());
    }
    Ok(())
}

fn main() {
    let out_dir = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("out/demo"), PathBuf::from);
    if let Err(error) = run(&out_dir) {
        eprintln!("demo failed: {error}");
        if error.downcast_ref::<HostError>().is_some() {
            eprintln!("(build the component first: make component)");
        }
        std::process::exit(1);
    }
}
