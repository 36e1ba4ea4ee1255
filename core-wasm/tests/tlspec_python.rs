//! Interop: a `.tlspec` written by the core opens with Python's `safetensors` package and
//! yields the payloads by op label, and the payload CRC-32 table as a `uint32` array.
//!
//! Runs the interpreter named by `TORCHLENS_PYTHON` (default `<repo>/.venv/bin/python`). A
//! missing interpreter or package fails the test: this check must not silently disappear.

#[path = "tlspec_support.rs"]
mod support;

use std::path::PathBuf;
use std::process::Command;
use support::{chain_trace, Step};
use torchlens_core::tlspec;

const SCRIPT: &str = r#"
import json, struct, sys, zlib
import numpy as np
from safetensors import safe_open


path, expected_path = sys.argv[1], sys.argv[2]
with open(expected_path) as handle:
    expected = json.load(handle)

with safe_open(path, framework="numpy") as handle:
    metadata = handle.metadata()
    names = set(handle.keys())
assert metadata["format"] == "tlspec", metadata
assert metadata["format_version"] == "2", metadata
logical = json.loads(metadata["logical_dtypes"])
assert "__torchlens_body__" in names, names

# numpy has no bfloat16, so BF16 payloads are checked as raw bytes at the header's offsets.
with open(path, "rb") as handle:
    raw = handle.read()
(header_length,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8 : 8 + header_length])
data_start = 8 + header_length

numeric = [label for label, spec in expected.items() if spec["dtype"] != "bfloat16"]
with safe_open(path, framework="numpy") as handle:
    for label in numeric:
        spec = expected[label]
        array = handle.get_tensor(label)
        want = np.array(spec["values"], dtype=spec["numpy"]).reshape(spec["shape"])
        assert array.dtype == want.dtype, (label, array.dtype, want.dtype)
        assert array.shape == want.shape, (label, array.shape, want.shape)
        assert np.array_equal(array, want), (label, array, want)
        assert logical[label] == spec["dtype"], (label, logical[label])
for label, spec in expected.items():
    if spec["dtype"] != "bfloat16":
        continue
    entry = header[label]
    assert entry["dtype"] == "BF16", entry
    assert entry["shape"] == spec["shape"], entry
    start, end = entry["data_offsets"]
    got = raw[data_start + start : data_start + end]
    assert got.hex() == spec["hex"], (label, got.hex(), spec["hex"])
    assert logical[label] == "bfloat16", logical[label]

# The payload CRC-32 table: a U32 tensor, last in the file, one zlib CRC-32 per payload in
# file order (it may start unaligned: numpy reads it all the same).
table_name = "__torchlens_payload_crc32__"
assert table_name in names and table_name not in logical, names
payloads = sorted(
    (entry["data_offsets"], label)
    for label, entry in header.items()
    if label not in ("__metadata__", "__torchlens_body__", table_name)
)
assert header[table_name]["data_offsets"][1] == len(raw) - data_start, header[table_name]
with safe_open(path, framework="numpy") as handle:
    table = handle.get_tensor(table_name)
assert table.dtype == np.uint32 and table.shape == (len(payloads),), (table.dtype, table.shape)
crcs = [zlib.crc32(raw[data_start + start : data_start + end]) for (start, end), _ in payloads]
assert table.tolist() == crcs, (table.tolist(), crcs)
print("ok", len(expected))
"#;

fn python() -> PathBuf {
    std::env::var_os("TORCHLENS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(".venv")
                .join("bin")
                .join("python")
        })
}

/// bfloat16 bits of an f32 (truncation; the test values are exact in bfloat16).
fn bf16_bits(value: f32) -> [u8; 2] {
    ((value.to_bits() >> 16) as u16).to_le_bytes()
}

#[test]
fn python_safetensors_reads_payloads_by_label() {
    let interpreter = python();
    assert!(
        interpreter.exists(),
        "no Python interpreter at {} (set TORCHLENS_PYTHON, or run scripts/setup-python.sh)",
        interpreter.display()
    );

    let steps = [
        Step {
            dtype: "bfloat16",
            shape: vec![4],
            payload: true,
        },
        Step {
            dtype: "int64",
            shape: vec![3],
            payload: true,
        },
        Step {
            dtype: "bool",
            shape: vec![5],
            payload: true,
        },
        Step {
            dtype: "float32",
            shape: vec![2, 2],
            payload: false,
        },
    ];
    let trace = chain_trace(&steps, true);
    let float32 = [1.5f32, -2.0, 0.25, 3.0, -0.5, 8.0];
    let bfloat16 = [1.0f32, -2.5, 0.125, 96.0];
    let int64 = [-7i64, 0, 1 << 40];
    let boolean = [true, false, true, true, false];

    let mut bytes_by_slot = std::collections::HashMap::new();
    let mut expected = serde_json::Map::new();
    for op in trace.ops.iter().filter(|op| op.payload().is_some()) {
        let (bytes, spec): (Vec<u8>, serde_json::Value) = match op.dtype.name() {
            "float32" => (
                float32
                    .iter()
                    .flat_map(|value| value.to_le_bytes())
                    .collect(),
                serde_json::json!({"dtype": "float32", "numpy": "float32", "shape": op.shape, "values": float32}),
            ),
            "bfloat16" => {
                let bytes: Vec<u8> = bfloat16
                    .iter()
                    .flat_map(|&value| bf16_bits(value))
                    .collect();
                let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
                (
                    bytes,
                    serde_json::json!({"dtype": "bfloat16", "shape": op.shape, "hex": hex}),
                )
            }
            "int64" => (
                int64.iter().flat_map(|value| value.to_le_bytes()).collect(),
                serde_json::json!({"dtype": "int64", "numpy": "int64", "shape": op.shape, "values": int64}),
            ),
            "bool" => (
                boolean.iter().map(|&value| u8::from(value)).collect(),
                serde_json::json!({"dtype": "bool", "numpy": "bool", "shape": op.shape, "values": boolean}),
            ),
            other => panic!("unexpected payload dtype {other}"),
        };
        bytes_by_slot.insert(op.payload().unwrap(), bytes);
        expected.insert(op.label.to_string(), spec);
    }
    assert_eq!(expected.len(), 4);
    let file = tlspec::encode_with_payloads(&trace, &support::manifest(), |slot| {
        bytes_by_slot.get(&slot).map(Vec::as_slice)
    })
    .expect("encodes");

    let directory = std::env::temp_dir().join(format!(
        "tlspec-python-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    ));
    std::fs::create_dir_all(&directory).expect("temp dir");
    let path = directory.join("trace.tlspec");
    let expected_path = directory.join("expected.json");
    std::fs::write(&path, &file).expect("write file");
    std::fs::write(
        &expected_path,
        serde_json::Value::Object(expected).to_string(),
    )
    .expect("write expectations");

    let output = Command::new(&interpreter)
        .arg("-c")
        .arg(SCRIPT)
        .arg(&path)
        .arg(&expected_path)
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "could not run {} ({error}); run scripts/setup-python.sh",
                interpreter.display()
            )
        });
    let _ = std::fs::remove_dir_all(&directory);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "{} lacks safetensors or numpy; run scripts/setup-python.sh\n{stderr}",
        interpreter.display()
    );
    assert!(
        output.status.success(),
        "Python could not read the .tlspec:\n{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok 4");
}
