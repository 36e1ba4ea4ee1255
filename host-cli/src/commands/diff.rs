//! `tlspec diff A B`: ops matched by stable site (module, op type, output slot, ordinal) and
//! pass, then which exist on one side only, which changed function, shape, dtype or module,
//! and which saved values differ (by more than `--tolerance` for floating point).

use crate::error::CliError;
use crate::exit_status::ExitStatus;
use crate::output::{shape, table, Outcome};
use crate::sandboxed_core::SandboxedCore;
use crate::tlspec_file::{OpenedTrace, CHUNK_BYTES};
use serde_json::{json, Value};
use std::collections::HashMap;
use torchlens_host_runtime::wit;

/// Refuses a `--tolerance` that is not a finite number ≥ 0: NaN would make every comparison
/// false (a silent "no difference"), a negative one could never be met.
pub fn check_tolerance(tolerance: f64) -> Result<(), CliError> {
    if tolerance.is_finite() && tolerance >= 0.0 {
        return Ok(());
    }
    Err(CliError::new(
        ExitStatus::Usage,
        "usage_invalid_tolerance",
        format!("--tolerance {tolerance} is not a finite number of at least 0"),
        "give the largest element difference to treat as equal, for example --tolerance 1e-6 \
         (0, the default, asks for exact equality)",
    ))
}

/// Runs `diff`.
pub fn run(
    core: &mut SandboxedCore,
    a: &mut OpenedTrace,
    b: &mut OpenedTrace,
    tolerance: f64,
) -> Result<Outcome, CliError> {
    let ops_a = a.ops(core.instance())?;
    let ops_b = b.ops(core.instance())?;
    let index_b: HashMap<(String, u32), &wit::OpInfo> = keyed(&ops_b).collect();
    let keys_a: std::collections::HashSet<(String, u32)> =
        keyed(&ops_a).map(|(key, _)| key).collect();

    let mut differences: Vec<Value> = Vec::new();
    for (key, op_a) in keyed(&ops_a) {
        let Some(op_b) = index_b.get(&key) else {
            differences.push(json!({"kind": "only_in_a", "site": key.0, "a": op_a.label}));
            continue;
        };
        let mut changed = Vec::new();
        if op_a.func_name != op_b.func_name {
            changed.push(format!("function {} → {}", op_a.func_name, op_b.func_name));
        }
        if op_a.shape != op_b.shape {
            changed.push(format!(
                "shape {} → {}",
                shape(&op_a.shape),
                shape(&op_b.shape)
            ));
        }
        if op_a.dtype != op_b.dtype {
            changed.push(format!("dtype {} → {}", op_a.dtype, op_b.dtype));
        }
        if op_a.module_stack != op_b.module_stack {
            changed.push("module".to_owned());
        }
        if !changed.is_empty() {
            differences.push(json!({
                "kind": "changed", "site": key.0, "a": op_a.label, "b": op_b.label,
                "detail": changed.join("; "),
            }));
            continue;
        }
        let payload_a = payload_entry(a, &op_a.label);
        let payload_b = payload_entry(b, &op_b.label);
        match (payload_a, payload_b) {
            (Some(entry_a), Some(entry_b)) => {
                if let Some(detail) = compare_values(a, &entry_a, b, &entry_b, tolerance)? {
                    differences.push(json!({
                        "kind": "values_differ", "site": key.0, "a": op_a.label,
                        "b": op_b.label, "detail": detail,
                    }));
                }
            }
            (Some(_), None) | (None, Some(_)) => differences.push(json!({
                "kind": "saved_on_one_side", "site": key.0, "a": op_a.label, "b": op_b.label,
            })),
            (None, None) => {}
        }
    }
    for (key, op_b) in keyed(&ops_b) {
        if !keys_a.contains(&key) {
            differences.push(json!({"kind": "only_in_b", "site": key.0, "b": op_b.label}));
        }
    }

    let cell = |value: &Value, field: &str| value[field].as_str().unwrap_or("").to_owned();
    let text = if differences.is_empty() {
        format!(
            "no differences: {} ops matched by site, saved values equal\n",
            ops_a.len()
        )
    } else {
        table(
            &["difference", "a", "b", "detail"],
            &differences
                .iter()
                .map(|row| {
                    vec![
                        cell(row, "kind"),
                        cell(row, "a"),
                        cell(row, "b"),
                        match &row["detail"] {
                            Value::String(text) => text.clone(),
                            Value::Null => String::new(),
                            other => other.to_string(),
                        },
                    ]
                })
                .collect::<Vec<_>>(),
        )
    };
    Ok(Outcome {
        status: if differences.is_empty() {
            ExitStatus::Success
        } else {
            ExitStatus::Findings
        },
        json: json!({"ops_a": ops_a.len(), "ops_b": ops_b.len(), "differences": differences}),
        text,
    })
}

/// Ops keyed by (site key, how many earlier ops had that site): the site of a pass.
fn keyed(ops: &[wit::OpInfo]) -> impl Iterator<Item = ((String, u32), &wit::OpInfo)> {
    let mut seen: HashMap<&str, u32> = HashMap::new();
    ops.iter().map(move |op| {
        let count = seen.entry(op.site_key.as_str()).or_default();
        let key = (op.site_key.clone(), *count);
        *count += 1;
        (key, op)
    })
}

fn payload_entry(file: &OpenedTrace, label: &str) -> Option<wit::PayloadEntry> {
    file.header
        .payloads
        .iter()
        .find(|entry| entry.label == label)
        .cloned()
}

/// `None` when the values are equal (within `tolerance`), otherwise what differs.
fn compare_values(
    a: &mut OpenedTrace,
    entry_a: &wit::PayloadEntry,
    b: &mut OpenedTrace,
    entry_b: &wit::PayloadEntry,
    tolerance: f64,
) -> Result<Option<String>, CliError> {
    if entry_a.length != entry_b.length || entry_a.dtype != entry_b.dtype {
        return Ok(Some("stored sizes or dtypes differ".to_owned()));
    }
    let decode = float_decoder(&entry_a.dtype);
    let item = decode.map_or(1, |(size, _)| size);
    // Chunks hold whole elements.
    let chunk = CHUNK_BYTES - CHUNK_BYTES % item;
    let (mut buffer_a, mut buffer_b) = (vec![0u8; chunk], vec![0u8; chunk]);
    let mut max_difference = 0.0f64;
    let mut bytes_differ = false;
    let mut left = entry_a.length;
    // Both readers borrow their file; read one chunk from each in turn.
    let mut offset = 0u64;
    while left > 0 {
        let take = left.min(chunk as u64) as usize;
        let sub_a = sub_entry(entry_a, offset, take as u64);
        let sub_b = sub_entry(entry_b, offset, take as u64);
        a.payload_reader(&sub_a)?
            .next_chunk(&mut buffer_a[..take])?;
        b.payload_reader(&sub_b)?
            .next_chunk(&mut buffer_b[..take])?;
        if buffer_a[..take] != buffer_b[..take] {
            bytes_differ = true;
            if let Some((size, value)) = decode {
                for (x, y) in buffer_a[..take]
                    .chunks_exact(size)
                    .zip(buffer_b[..take].chunks_exact(size))
                {
                    let difference = (value(x) - value(y)).abs();
                    // NaN against a number (or NaN) counts as an infinite difference.
                    max_difference = if difference.is_nan() {
                        f64::INFINITY
                    } else {
                        max_difference.max(difference)
                    };
                }
            }
        }
        offset += take as u64;
        left -= take as u64;
    }
    Ok(match (bytes_differ, decode) {
        (false, _) => None,
        (true, Some(_)) if max_difference <= tolerance => None,
        (true, Some(_)) => Some(format!("max |a - b| = {max_difference:e}")),
        (true, None) => Some("bytes differ".to_owned()),
    })
}

fn sub_entry(entry: &wit::PayloadEntry, offset: u64, length: u64) -> wit::PayloadEntry {
    wit::PayloadEntry {
        offset: entry.offset + offset,
        length,
        ..entry.clone()
    }
}

type ElementDecoder = fn(&[u8]) -> f64;

/// Item size and little-endian decoder of the floating-point storage dtypes.
fn float_decoder(dtype: &str) -> Option<(usize, ElementDecoder)> {
    fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&bytes[..N]);
        out
    }
    Some(match dtype {
        "float64" => (8, |bytes| f64::from_le_bytes(array(bytes))),
        "float32" => (4, |bytes| f64::from(f32::from_le_bytes(array(bytes)))),
        "float16" => (2, |bytes| half::f16::from_le_bytes(array(bytes)).to_f64()),
        "bfloat16" => (2, |bytes| half::bf16::from_le_bytes(array(bytes)).to_f64()),
        _ => return None,
    })
}
