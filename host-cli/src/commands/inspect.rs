//! `tlspec inspect`: what the file holds, from the header and the trace body only.

use crate::error::CliError;
use crate::output::{bytes, shown, Outcome};
use crate::sandboxed_core::SandboxedCore;
use crate::tlspec_file::OpenedTrace;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Runs `inspect`.
pub fn run(core: &mut SandboxedCore, file: &OpenedTrace) -> Result<Outcome, CliError> {
    let info = core.instance().trace_info(file.trace)?;
    let header = &file.header;
    let manifest = &header.manifest;
    let mut by_dtype: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for payload in &header.payloads {
        let entry = by_dtype.entry(payload.dtype.as_str()).or_default();
        entry.0 += 1;
        entry.1 += payload.length;
    }
    let payload_bytes: u64 = header.payloads.iter().map(|payload| payload.length).sum();
    // The payload CRC-32 table holds one entry per payload; older files name theirs in the
    // manifest.
    let checksummed = if header.crc_table_offset.is_some() {
        header.payloads.len()
    } else {
        manifest.payload_checksums.len()
    };

    let json = json!({
        "file": file.path.display().to_string(),
        "file_bytes": file.file_length,
        "format_version": header.format_version,
        "manifest": manifest,
        "body_bytes": header.body_length,
        "ops": info.op_count,
        "layers": info.layer_count,
        "modules": info.module_count,
        "params": info.param_count,
        "inputs": info.inputs.len(),
        "outputs": info.outputs.len(),
        "capture_verified": info.capture_verified,
        "capture_reason": info.capture_reason,
        "stop_reason": info.stop_reason,
        "payloads": header.payloads.len(),
        "payload_bytes": payload_bytes,
        "payloads_with_checksum": checksummed,
        "crc_table_offset": header.crc_table_offset,
        "bytes_by_dtype": by_dtype
            .iter()
            .map(|(dtype, (count, total))| (dtype.to_string(), json!({"payloads": count, "bytes": total})))
            .collect::<serde_json::Map<_, _>>(),
    });

    let mut text = String::new();
    // Every value below may carry strings from the file: each line is shown escaped.
    let mut line = |key: &str, value: String| {
        let _ = writeln!(text, "{key:<12}{}", shown(&value));
    };
    line(
        "file",
        format!("{} ({})", file.path.display(), bytes(file.file_length)),
    );
    line("format", format!("tlspec v{}", header.format_version));
    line(
        "backend",
        format!(
            "{} {} ({})",
            or_unknown(&manifest.backend),
            or_unknown(&manifest.backend_version),
            or_unknown(&manifest.backend_runtime)
        ),
    );
    line("created", or_unknown(&manifest.created_at).to_owned());
    line(
        "trace",
        format!(
            "{} ops, {} layers, {} modules, {} params; {} inputs, {} outputs",
            info.op_count,
            info.layer_count,
            info.module_count,
            info.param_count,
            info.inputs.len(),
            info.outputs.len()
        ),
    );
    line(
        "capture",
        match (&info.capture_verified, &info.capture_reason) {
            (true, _) => "verified".to_owned(),
            (false, Some(reason)) => format!("unverified: {reason}"),
            (false, None) => "unverified".to_owned(),
        },
    );
    if let Some(reason) = &info.stop_reason {
        line("stopped", reason.clone());
    }
    line(
        "payloads",
        format!(
            "{} ({}), save level {}",
            header.payloads.len(),
            bytes(payload_bytes),
            or_unknown(&manifest.save_level)
        ),
    );
    for (dtype, (count, total)) in &by_dtype {
        line(
            "",
            format!("{dtype:<10} {count:>6} payloads  {}", bytes(*total)),
        );
    }
    line(
        "checksums",
        if checksummed == 0 {
            "none recorded (check can verify bounds only)".to_owned()
        } else {
            format!(
                "CRC-32 for {checksummed} payloads ({})",
                if header.crc_table_offset.is_some() {
                    "table"
                } else {
                    "manifest"
                }
            )
        },
    );
    Ok(Outcome::success(json, text))
}

fn or_unknown(text: &str) -> &str {
    if text.is_empty() {
        "unknown"
    } else {
        text
    }
}
