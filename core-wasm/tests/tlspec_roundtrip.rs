//! `.tlspec` round trips: encode with payloads, decode, and get back the same trace and the
//! same payload bytes at the recorded offsets.

#[path = "tlspec_support.rs"]
mod support;

use std::collections::HashMap;
use support::{chain_trace, encode, manifest, payloads_for, Step};
use torchlens_core::dtype::Dtype;
use torchlens_core::model::TraceOptions;
use torchlens_core::tlspec::{self, HeaderInfo, Manifest};
use torchlens_core::{Trace, TraceBuilder};

/// The original trace with payload slots renumbered to the file's payload table and without
/// the runtime-only adapter value ids (never stored), which is what decoding promises to
/// return.
fn expected_after_decode(original: &Trace, header: &HeaderInfo) -> Trace {
    let index: HashMap<&str, u64> = header
        .payloads
        .iter()
        .enumerate()
        .map(|(slot, entry)| (entry.label.as_str(), slot as u64))
        .collect();
    let mut expected = original.clone();
    for op in &mut expected.ops {
        op.clear_value();
        if op.payload().is_some() {
            op.set_payload(Some(index[op.label.as_ref()]));
        }
    }
    expected
}

/// Decodes `file` and checks trace equality and every payload's bytes.
fn check_round_trip(original: &Trace, file: &[u8]) -> HeaderInfo {
    let (header, decoded) = tlspec::decode_file(file).expect("decodes");
    assert_eq!(decoded, expected_after_decode(original, &header));
    let payloads = payloads_for(original);
    for op in &original.ops {
        let Some(slot) = op.payload() else { continue };
        let entry = header
            .payloads
            .iter()
            .find(|entry| *entry.label == *op.label)
            .expect("payload has a table entry");
        let start = entry.offset as usize;
        let bytes = &file[start..start + entry.length as usize];
        assert_eq!(bytes, payloads[&slot].as_slice(), "payload of {}", op.label);
        assert_eq!(entry.dtype, op.dtype.name());
    }
    assert_eq!(header.file_length, file.len() as u64);
    check_crc_table(&header, file);
    header
}

/// A file with payloads ends with their CRC-32 table: one entry per payload, in file order,
/// each the CRC-32 of that payload's bytes.
fn check_crc_table(header: &HeaderInfo, file: &[u8]) {
    let Some(offset) = header.crc_table_offset else {
        assert!(
            header.payloads.is_empty(),
            "a file with payloads has a CRC-32 table"
        );
        return;
    };
    let table = &file[offset as usize..];
    assert_eq!(
        table.len(),
        4 * header.payloads.len(),
        "the table ends the file"
    );
    let recorded: Vec<u32> = tlspec::crc_table_entries(table).collect();
    let actual: Vec<u32> = header
        .payloads
        .iter()
        .map(|entry| {
            crc32fast::hash(&file[entry.offset as usize..(entry.offset + entry.length) as usize])
        })
        .collect();
    assert_eq!(recorded, actual);
    assert!(header.manifest.payload_checksums.is_empty());
}

#[test]
fn every_named_dtype_round_trips_bit_for_bit() {
    let steps: Vec<Step> = Dtype::NAMED
        .iter()
        .map(|dtype| Step {
            dtype: match dtype {
                Dtype::Other(_) => unreachable!(),
                named => Box::leak(named.name().to_string().into_boxed_str()),
            },
            shape: vec![2, 3],
            payload: true,
        })
        .collect();
    let trace = chain_trace(&steps, true);
    let file = encode(&trace);
    let header = check_round_trip(&trace, &file);
    assert_eq!(header.payloads.len(), Dtype::NAMED.len() + 1);
    assert_eq!(header.manifest, manifest());

    let storage: HashMap<&str, (&str, &[u64])> = header
        .payloads
        .iter()
        .map(|entry| {
            (
                entry.dtype.as_str(),
                (entry.storage_dtype.as_str(), entry.shape.as_slice()),
            )
        })
        .collect();
    assert_eq!(storage["bfloat16"], ("BF16", &[2, 3][..]));
    assert_eq!(storage["bool"], ("BOOL", &[2, 3][..]));
    assert_eq!(storage["float8_e4m3"], ("F8_E4M3", &[2, 3][..]));
    assert_eq!(storage["complex64"], ("C64", &[2, 3][..]));
    // No safetensors equivalent: raw bits, logical dtype in the manifest.
    assert_eq!(storage["complex128"], ("U8", &[96][..]));

    // The reference safetensors reader opens the file and finds each payload by label.
    let reference = safetensors::SafeTensors::deserialize(&file).expect("valid safetensors");
    let payloads = payloads_for(&trace);
    for op in trace.ops.iter().filter(|op| op.payload().is_some()) {
        let view = reference.tensor(&op.label).expect("tensor by label");
        assert_eq!(view.data(), payloads[&op.payload().unwrap()].as_slice());
    }
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&file).expect("metadata");
    let metadata = metadata.metadata().clone().expect("__metadata__");
    assert_eq!(metadata["format"], "tlspec");
    assert_eq!(metadata["format_version"], "2");
    let logical: HashMap<String, String> =
        serde_json::from_str(&metadata["logical_dtypes"]).expect("logical_dtypes is JSON");
    assert_eq!(logical.len(), header.payloads.len());
}

#[test]
fn payloads_are_aligned_to_their_element_size() {
    let steps: Vec<Step> = [
        "bool",
        "float64",
        "bfloat16",
        "complex128",
        "int32",
        "uint8",
    ]
    .iter()
    .map(|&dtype| Step {
        dtype,
        shape: vec![3],
        payload: true,
    })
    .collect();
    let trace = chain_trace(&steps, false);
    let layout = tlspec::encode_layout(&trace, &Manifest::default()).expect("lays out");
    assert_eq!(layout.prefix.len() % 8, 0);
    let mut offset = layout.prefix.len() as u64;
    for placement in &layout.payloads {
        assert_eq!(
            placement.offset, offset,
            "payloads are contiguous in file order"
        );
        let item = Dtype::from_name(&placement.dtype).item_size().unwrap();
        assert_eq!(placement.offset % item.min(8), 0, "{}", placement.dtype);
        offset += placement.length;
    }
    // The CRC-32 table follows the last payload and ends the file.
    assert_eq!(layout.crc_table_offset, Some(offset));
    assert_eq!(
        offset + 4 * layout.payloads.len() as u64,
        layout.file_length
    );
}

#[test]
fn empty_trace_round_trips() {
    let trace = TraceBuilder::new(TraceOptions::default())
        .finish()
        .expect("finishes");
    assert!(trace.ops.is_empty());
    let file = encode(&trace);
    let header = check_round_trip(&trace, &file);
    assert!(header.payloads.is_empty());
}

#[test]
fn trace_of_100k_ops_round_trips() {
    let steps: Vec<Step> = (0..100_000)
        .map(|index| Step {
            dtype: if index % 2 == 0 {
                "float32"
            } else {
                "bfloat16"
            },
            shape: vec![4],
            payload: index % 10 == 0,
        })
        .collect();
    let trace = chain_trace(&steps, false);
    assert_eq!(trace.ops.len(), 100_002);
    let file = encode(&trace);
    let header = check_round_trip(&trace, &file);
    assert_eq!(header.payloads.len(), 10_000);
}

#[test]
fn stepwise_decode_matches_decode_file() {
    let steps = [
        Step {
            dtype: "float32",
            shape: vec![2, 2],
            payload: true,
        },
        Step {
            dtype: "int64",
            shape: vec![3],
            payload: false,
        },
    ];
    let trace = chain_trace(&steps, true);
    let file = encode(&trace);
    let json_length = tlspec::header_length(&file[..8]).expect("length");
    let header =
        tlspec::parse_header(&file[..8 + json_length as usize], file.len() as u64).expect("header");
    let body =
        &file[header.body_offset as usize..(header.body_offset + header.body_length) as usize];
    let decoded = tlspec::decode_body(&header, body).expect("body");
    assert_eq!((header, decoded), tlspec::decode_file(&file).expect("file"));
}

#[test]
fn layout_prefix_plus_payloads_is_the_file_and_encoding_is_deterministic() {
    let steps = [Step {
        dtype: "float16",
        shape: vec![5],
        payload: true,
    }];
    let trace = chain_trace(&steps, true);
    let layout = tlspec::encode_layout(&trace, &manifest()).expect("lays out");
    let payloads = payloads_for(&trace);
    let mut assembled = layout.prefix.clone();
    let mut crcs = Vec::new();
    for placement in &layout.payloads {
        assert_eq!(placement.offset, assembled.len() as u64);
        assembled.extend_from_slice(&payloads[&placement.slot]);
        crcs.push(crc32fast::hash(&payloads[&placement.slot]));
    }
    assert_eq!(layout.crc_table_offset, Some(assembled.len() as u64));
    assembled.extend(tlspec::crc_table_bytes(crcs));
    assert_eq!(assembled.len() as u64, layout.file_length);
    assert_eq!(assembled, encode(&trace));
    assert_eq!(encode(&trace), encode(&trace));
}

#[test]
fn manifest_fields_round_trip() {
    let trace = chain_trace(&[], false);
    let manifest = Manifest {
        extra: vec![
            ("a_key".to_string(), "1".to_string()),
            ("z_key".to_string(), "\"quoted\"".to_string()),
        ],
        ..manifest()
    };
    let file = tlspec::encode_with_payloads(&trace, &manifest, |_| None).expect("encodes");
    let (header, _) = tlspec::decode_file(&file).expect("decodes");
    assert_eq!(header.manifest, manifest);
}

#[test]
fn encoding_refuses_what_it_cannot_store() {
    let unsized_dtype = chain_trace(
        &[Step {
            dtype: "float4_e2m1",
            shape: vec![2],
            payload: true,
        }],
        false,
    );
    let error = tlspec::encode_layout(&unsized_dtype, &Manifest::default()).unwrap_err();
    assert_eq!(error.code, "tlspec_payload_dtype_unsupported");
    assert_eq!(error.kind, torchlens_core::ErrorKind::Unsupported);

    let trace = chain_trace(
        &[Step {
            dtype: "float32",
            shape: vec![2],
            payload: true,
        }],
        false,
    );
    let reserved = Manifest {
        extra: vec![("format".to_string(), "other".to_string())],
        ..Manifest::default()
    };
    let error = tlspec::encode_layout(&trace, &reserved).unwrap_err();
    assert_eq!(error.code, "tlspec_manifest_reserved_key");

    let short = [0u8; 7];
    let error = tlspec::encode_with_payloads(&trace, &Manifest::default(), |_| Some(&short[..]))
        .unwrap_err();
    assert_eq!(error.code, "tlspec_length_mismatch");
    let error = tlspec::encode_with_payloads(&trace, &Manifest::default(), |_| None).unwrap_err();
    assert_eq!(error.code, "tlspec_payload_missing");

    let mut huge = trace.clone();
    huge.ops[1].shape = vec![1 << 40, 1 << 40].into();
    let error = tlspec::encode_layout(&huge, &Manifest::default()).unwrap_err();
    assert_eq!(error.code, "tlspec_shape_overflow");
    huge.ops[1].shape = vec![1; 65].into();
    let error = tlspec::encode_layout(&huge, &Manifest::default()).unwrap_err();
    assert_eq!(error.code, "tlspec_rank_too_large");

    let mut reserved_label = trace.clone();
    reserved_label.ops[1].label = "__metadata__".into();
    let error = tlspec::encode_layout(&reserved_label, &Manifest::default()).unwrap_err();
    assert_eq!(error.code, "tlspec_label_reserved");

    let mut invalid = trace;
    invalid.ops[1].parents[0].op = 7;
    let error = tlspec::encode_layout(&invalid, &Manifest::default()).unwrap_err();
    assert_eq!(error.code, "trace_edge_out_of_range");
}

#[test]
fn scalar_and_zero_size_payloads_round_trip() {
    let steps = [
        Step {
            dtype: "float32",
            shape: vec![],
            payload: true,
        },
        Step {
            dtype: "int16",
            shape: vec![0, 3],
            payload: true,
        },
        Step {
            dtype: "complex128",
            shape: vec![0],
            payload: true,
        },
        Step {
            dtype: "uint8",
            shape: vec![0],
            payload: true,
        },
    ];
    let trace = chain_trace(&steps, false);
    let file = encode(&trace);
    let header = check_round_trip(&trace, &file);
    assert_eq!(header.payloads.len(), 4);
    safetensors::SafeTensors::deserialize(&file).expect("valid safetensors");
}

#[test]
fn payload_checksums_round_trip_and_cover_every_payload() {
    let steps = [
        Step {
            dtype: "float32",
            shape: vec![2],
            payload: true,
        },
        Step {
            dtype: "int64",
            shape: vec![3],
            payload: true,
        },
    ];
    let trace = chain_trace(&steps, false);
    let labels: Vec<String> = trace
        .ops
        .iter()
        .filter(|op| op.payload().is_some())
        .map(|op| op.label.to_string())
        .collect();
    let with_checksums = Manifest {
        payload_checksums: labels
            .iter()
            .enumerate()
            .map(|(index, label)| (label.clone(), 0xdead_0000 + index as u32))
            .collect(),
        ..manifest()
    };
    let payloads = payloads_for(&trace);
    let file = tlspec::encode_with_payloads(&trace, &with_checksums, |slot| {
        payloads.get(&slot).map(Vec::as_slice)
    })
    .expect("encodes");
    let (header, _) = tlspec::decode_file(&file).expect("decodes");
    let mut expected = with_checksums.payload_checksums.clone();
    expected.sort();
    assert_eq!(header.manifest.payload_checksums, expected);
    // Checksums given up front go to the manifest (as before the table), never both.
    assert_eq!(header.crc_table_offset, None);
    assert_eq!(
        tlspec::encode_layout(&trace, &with_checksums)
            .expect("lays out")
            .crc_table_offset,
        None
    );
    let payload_end = header
        .payloads
        .last()
        .map(|entry| entry.offset + entry.length);
    assert_eq!(payload_end, Some(file.len() as u64));

    let missing_one = Manifest {
        payload_checksums: with_checksums.payload_checksums[..1].to_vec(),
        ..manifest()
    };
    let error = tlspec::encode_layout(&trace, &missing_one).unwrap_err();
    assert_eq!(error.code, "tlspec_checksums_incomplete");
    let stranger = Manifest {
        payload_checksums: vec![(labels[0].clone(), 1), ("not_an_op_9_9".to_string(), 2)],
        ..manifest()
    };
    let error = tlspec::encode_layout(&trace, &stranger).unwrap_err();
    assert_eq!(error.code, "tlspec_checksums_incomplete");

    // A file whose checksum table names a tensor it does not hold (same length, so the
    // header length prefix still holds).
    let quoted = format!("\\\"{}\\\"", labels[0]).into_bytes();
    let at = file
        .windows(quoted.len())
        .position(|window| window == quoted.as_slice())
        .expect("the checksum table is in the header");
    let mut forged = file.clone();
    forged[at + 2..at + quoted.len() - 2].fill(b'q');
    let error = tlspec::decode_file(&forged).unwrap_err();
    assert_eq!(error.code, "tlspec_payload_mismatch");
}

#[test]
fn a_v2_file_with_payload_crc32_from_before_the_table_still_decodes() {
    // Written by the Python package before the CRC-32 table existed (torch: float32, bfloat16
    // and bool payloads, checksums in the manifest).
    let path = format!(
        "{}/../fuzz/seeds/decode_tlspec/valid_v2_manifest_crc32.tlspec",
        env!("CARGO_MANIFEST_DIR")
    );
    let file = std::fs::read(path).expect("fixture");
    let (header, trace) = tlspec::decode_file(&file).expect("decodes");
    assert_eq!(header.format_version, 2);
    assert_eq!(header.crc_table_offset, None);
    assert_eq!(header.payloads.len(), 5);
    let recorded: HashMap<&str, u32> = header
        .manifest
        .payload_checksums
        .iter()
        .map(|(label, crc)| (label.as_str(), *crc))
        .collect();
    for entry in &header.payloads {
        let bytes = &file[entry.offset as usize..(entry.offset + entry.length) as usize];
        assert_eq!(
            recorded[entry.label.as_str()],
            crc32fast::hash(bytes),
            "{}",
            entry.label
        );
    }
    assert_eq!(
        trace.ops.iter().filter(|op| op.payload().is_some()).count(),
        5
    );
}

#[test]
fn the_crc_table_is_the_last_tensor_and_only_the_host_reads_it() {
    let steps = [
        Step {
            dtype: "bool",
            shape: vec![3],
            payload: true,
        },
        Step {
            dtype: "float64",
            shape: vec![2],
            payload: true,
        },
    ];
    let trace = chain_trace(&steps, true);
    let file = encode(&trace);
    let (header, _) = tlspec::decode_file(&file).expect("decodes");
    let offset = header.crc_table_offset.expect("a table") as usize;
    // The table follows the bool payload, the last one: 4-byte entries need not be aligned.
    let last = header.payloads.last().expect("payloads");
    assert_eq!(last.dtype, "bool");
    assert_eq!(offset as u64, last.offset + last.length);
    // It is not a payload: not in the payload table, not in logical_dtypes.
    assert!(header
        .payloads
        .iter()
        .all(|entry| !entry.label.starts_with("__torchlens_")));
    let reference = safetensors::SafeTensors::deserialize(&file).expect("valid safetensors");
    let table = reference
        .tensor(tlspec::CRC_TABLE_TENSOR)
        .expect("a tensor by name");
    assert_eq!(table.dtype(), safetensors::Dtype::U32);
    assert_eq!(table.shape(), [header.payloads.len()]);
    assert_eq!(table.data(), &file[offset..]);
    // Damage to a payload or to the table still decodes (payload bytes are the host's to
    // check), but the table then disagrees with the bytes.
    for position in [header.payloads[0].offset as usize, offset + 1] {
        let mut damaged = file.clone();
        damaged[position] ^= 0x01;
        let (header, _) = tlspec::decode_file(&damaged).expect("decodes");
        let recorded: Vec<u32> = tlspec::crc_table_entries(&damaged[offset..]).collect();
        let actual: Vec<u32> = header
            .payloads
            .iter()
            .map(|entry| {
                crc32fast::hash(
                    &damaged[entry.offset as usize..(entry.offset + entry.length) as usize],
                )
            })
            .collect();
        assert_ne!(recorded, actual);
    }
}
