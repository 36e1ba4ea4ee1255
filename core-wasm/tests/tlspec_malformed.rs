//! Hostile and damaged `.tlspec` files: each gets its typed error code without a panic, a stack
//! overflow, a large allocation or unbounded work (counted as allocations, not timed, so a
//! loaded machine cannot fail it).

#[path = "hostile_corpus.rs"]
mod hostile_corpus;

use hostile_corpus::{
    body_of, decode_code, encode, file_from_body, header_with, metadata_json, raw_file,
    small_trace, valid_file,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use torchlens_core::tlspec;
use torchlens_core::ErrorKind;

/// Records the largest single allocation and the number and total size of the allocations made
/// by the current thread, so a test can assert that decoding a hostile file never asked for a
/// big buffer and did bounded work.
struct TrackingAllocator;

thread_local! {
    static LARGEST_ALLOCATION: Cell<usize> = const { Cell::new(0) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    static ALLOCATED_BYTES: Cell<usize> = const { Cell::new(0) };
}

/// Counts one allocation of `size` bytes on this thread.
fn count(size: usize) {
    let _ = LARGEST_ALLOCATION.try_with(|largest| largest.set(largest.get().max(size)));
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
    let _ = ALLOCATED_BYTES.try_with(|total| total.set(total.get().saturating_add(size)));
}

unsafe impl GlobalAlloc for TrackingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        System.dealloc(pointer, layout)
    }
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        System.realloc(pointer, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: TrackingAllocator = TrackingAllocator;

/// The most allocations, and bytes allocated in all, a decode of one of these small files may
/// make: far above what a refusal needs, far below what a loop over a forged count would.
const MAX_ALLOCATIONS: usize = 100_000;
const MAX_ALLOCATED_BYTES: usize = 64 << 20;

/// Runs `decode` and returns its error code, asserting it never allocated more than 16 MiB at
/// once and did bounded work (`MAX_ALLOCATIONS`, `MAX_ALLOCATED_BYTES`).
fn bounded_code(bytes: &[u8]) -> &'static str {
    LARGEST_ALLOCATION.with(|largest| largest.set(0));
    ALLOCATIONS.with(|count| count.set(0));
    ALLOCATED_BYTES.with(|total| total.set(0));
    let code = decode_code(bytes);
    let largest = LARGEST_ALLOCATION.with(Cell::get);
    assert!(
        largest < 16 << 20,
        "{code}: allocated {largest} bytes at once"
    );
    let allocations = ALLOCATIONS.with(Cell::get);
    let total = ALLOCATED_BYTES.with(Cell::get);
    assert!(
        allocations < MAX_ALLOCATIONS && total < MAX_ALLOCATED_BYTES,
        "{code}: {allocations} allocations, {total} bytes in all"
    );
    code
}

#[test]
fn files_too_short_for_a_length() {
    assert_eq!(bounded_code(&[]), "tlspec_too_short");
    assert_eq!(bounded_code(&[0; 7]), "tlspec_too_short");
    assert_eq!(
        tlspec::header_length(&[1, 2, 3]).unwrap_err().code,
        "tlspec_too_short"
    );
}

#[test]
fn random_bytes_are_refused() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..500 {
        let length = (next() % 4096) as usize;
        let mut bytes: Vec<u8> = (0..length).map(|_| next() as u8).collect();
        if round % 2 == 0 && length >= 8 {
            // A plausible header length, so the parser gets past the first check.
            let json = (next() % (length as u64 - 7)).to_le_bytes();
            bytes[..8].copy_from_slice(&json);
        }
        let code = bounded_code(&bytes);
        assert!(code.starts_with("tlspec_"), "{code}");
    }
    let fixed: Vec<u8> = (0..64u8)
        .map(|byte| byte.wrapping_mul(97).wrapping_add(13))
        .collect();
    assert_eq!(bounded_code(&fixed), "tlspec_not_a_tlspec");
}

#[test]
fn truncation_at_each_structural_boundary() {
    let file = valid_file();
    let (header, _) = tlspec::decode_file(&file).expect("valid");
    let json_end = 8 + header.header_length as usize;
    let body_end = (header.body_offset + header.body_length) as usize;
    let first_payload = &header.payloads[0];
    assert_eq!(bounded_code(&file[..4]), "tlspec_too_short");
    assert_eq!(
        bounded_code(&file[..json_end / 2]),
        "tlspec_header_truncated"
    );
    assert_eq!(
        bounded_code(&file[..json_end - 1]),
        "tlspec_header_truncated"
    );
    assert_eq!(bounded_code(&file[..json_end]), "tlspec_truncated");
    assert_eq!(bounded_code(&file[..body_end - 3]), "tlspec_truncated");
    let inside_payload = (first_payload.offset + first_payload.length / 2) as usize;
    assert_eq!(bounded_code(&file[..inside_payload]), "tlspec_truncated");
    assert_eq!(bounded_code(&file[..file.len() - 1]), "tlspec_truncated");
    // And every other cut is refused too.
    for cut in 0..file.len() {
        bounded_code(&file[..cut]);
    }
    let mut longer = file.clone();
    longer.push(0);
    assert_eq!(bounded_code(&longer), "tlspec_trailing_data");
}

#[test]
fn flipped_bytes_never_panic() {
    let file = valid_file();
    for position in 0..file.len() {
        let mut damaged = file.clone();
        damaged[position] ^= 0xFF;
        // Payload bytes are opaque, so some flips still decode; none may panic.
        let _ = tlspec::decode_file(&damaged);
    }
}

#[test]
fn header_lengths_out_of_bounds() {
    let mut beyond = valid_file();
    let length = beyond.len() as u64;
    beyond[..8].copy_from_slice(&length.to_le_bytes());
    assert_eq!(bounded_code(&beyond), "tlspec_header_truncated");

    let mut huge = valid_file();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    // No safetensors length reaches 4 GiB: that is some other kind of file.
    assert_eq!(bounded_code(&huge), "tlspec_not_a_tlspec");
    huge[..8].copy_from_slice(&u64::from(u32::MAX).to_le_bytes());
    assert_eq!(bounded_code(&huge), "tlspec_header_too_large");
    let error = tlspec::decode_file(&huge).unwrap_err();
    assert_eq!(error.kind, ErrorKind::LimitExceeded);
    huge[..8].copy_from_slice(&100_000_001u64.to_le_bytes());
    assert_eq!(bounded_code(&huge), "tlspec_header_too_large");
}

#[test]
fn header_not_utf8_or_not_json() {
    let mut bytes = 8u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0xFF, 0xFE, b'{', b'}', 0xC0, 0x80, b' ', b' ']);
    assert_eq!(bounded_code(&bytes), "tlspec_header_not_utf8");
    assert_eq!(
        bounded_code(&raw_file("hello!!!", &[])),
        "tlspec_header_not_json"
    );
    assert_eq!(
        bounded_code(&raw_file("{\"a\":", &[])),
        "tlspec_header_not_json"
    );
    assert_eq!(
        bounded_code(&raw_file("[1,2,3]", &[])),
        "tlspec_header_invalid"
    );
    assert_eq!(
        bounded_code(&raw_file("{\"a\":{\"dtype\":3}}", &[])),
        "tlspec_header_invalid"
    );
}

#[test]
fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
    // Balanced nesting 100k deep. The header schema is at most three levels deep: nesting where
    // a typed value is expected is refused by type at once, and unknown fields are skipped by
    // serde_json without recursion (and its recursion limit of 128 backs up everything else),
    // so none of these can exhaust the stack.
    let arrays = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let objects = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    let tensor = "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]";
    let cases = [
        (arrays.clone(), "tlspec_header_invalid"),
        (objects.clone(), "tlspec_header_invalid"),
        (
            format!("{{\"__metadata__\":{arrays}}}"),
            "tlspec_header_invalid",
        ),
        (
            format!("{{\"t\":{{\"shape\":{arrays}}}}}"),
            "tlspec_header_invalid",
        ),
        (
            format!("{{{tensor},\"junk\":{arrays}}}}}"),
            "tlspec_not_a_tlspec",
        ),
        (
            format!("{{{tensor},\"junk\":{objects}}}}}"),
            "tlspec_not_a_tlspec",
        ),
    ];
    for (json, code) in cases {
        assert_eq!(bounded_code(&raw_file(&json, &[0])), code);
    }
    // The logical_dtypes string is parsed as JSON too; nesting there is refused by type.
    let deep_logical = serde_json::to_string(&"[".repeat(100_000)).unwrap();
    let header = format!(
        r#"{{"__metadata__":{{"format":"tlspec","format_version":"1","logical_dtypes":{deep_logical}}}}}"#
    );
    assert_eq!(
        bounded_code(&raw_file(&header, &[])),
        "tlspec_manifest_invalid"
    );
}

#[test]
fn duplicate_tensor_names() {
    let header = header_with(
        "{\"a\":\"uint8\"}",
        r#","a":{"dtype":"U8","shape":[1],"data_offsets":[8,9]},"a":{"dtype":"U8","shape":[1],"data_offsets":[9,10]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&header, &[0; 10])),
        "tlspec_header_invalid"
    );
}

#[test]
fn offsets_overlapping_or_out_of_range() {
    let overlapping = header_with(
        "{\"a\":\"uint8\"}",
        r#","a":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&overlapping, &[0; 12])),
        "tlspec_offsets_invalid"
    );
    let gap = header_with(
        "{\"a\":\"uint8\"}",
        r#","a":{"dtype":"U8","shape":[4],"data_offsets":[1099511627776,1099511627780]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&gap, &[0; 12])),
        "tlspec_offsets_invalid"
    );
    let size = header_with(
        "{\"a\":\"float32\"}",
        r#","a":{"dtype":"F32","shape":[2],"data_offsets":[8,12]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&size, &[0; 12])),
        "tlspec_offsets_invalid"
    );
    let reversed = header_with(
        "{\"a\":\"uint8\"}",
        r#","a":{"dtype":"U8","shape":[0],"data_offsets":[12,8]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&reversed, &[0; 12])),
        "tlspec_offsets_invalid"
    );
    let beyond_file = header_with(
        "{\"a\":\"float32\"}",
        r#","a":{"dtype":"F32","shape":[1024],"data_offsets":[8,4104]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&beyond_file, &[0; 12])),
        "tlspec_truncated"
    );
}

#[test]
fn rank_and_shape_bounds() {
    let ones = vec!["1"; 1000].join(",");
    let rank = header_with(
        "{\"a\":\"uint8\"}",
        &format!(r#","a":{{"dtype":"U8","shape":[{ones}],"data_offsets":[8,9]}}"#),
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&rank, &[0; 9])),
        "tlspec_rank_too_large"
    );
    let error = tlspec::decode_file(&raw_file(&rank, &[0; 9])).unwrap_err();
    assert_eq!(error.kind, ErrorKind::LimitExceeded);
    let overflow = header_with(
        "{\"a\":\"float32\"}",
        r#","a":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[8,9]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&overflow, &[0; 9])),
        "tlspec_shape_overflow"
    );
    let bytes_overflow = header_with(
        "{\"a\":\"float64\"}",
        r#","a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[8,9]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&bytes_overflow, &[0; 9])),
        "tlspec_shape_overflow"
    );
    let sub_byte = header_with(
        "{\"a\":\"uint8\"}",
        r#","a":{"dtype":"F4","shape":[2],"data_offsets":[8,9]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&sub_byte, &[0; 9])),
        "tlspec_dtype_unknown"
    );
}

#[test]
fn body_declaring_a_billion_ops_fails_fast_without_allocating() {
    let body = hostile_corpus::billion_ops_body();
    assert_eq!(
        bounded_code(&file_from_body(&body)),
        "tlspec_body_undecodable"
    );
    // The same for a billion function names.
    let mut names = vec![1, 1, 1];
    names.extend_from_slice(&body[4..]);
    assert_eq!(
        bounded_code(&file_from_body(&names)),
        "tlspec_body_undecodable"
    );
}

#[test]
fn body_garbage_or_trailing_bytes() {
    assert_eq!(
        bounded_code(&file_from_body(&[1, 7, 7, 7, 7, 7, 7, 7])),
        "tlspec_body_undecodable"
    );
    let mut body = body_of(&small_trace(), 1);
    assert!(tlspec::decode_file(&file_from_body(&body)).is_ok());
    body.extend_from_slice(&[0; 8]);
    assert_eq!(
        bounded_code(&file_from_body(&body)),
        "tlspec_body_undecodable"
    );
    body.truncate(body.len() - 8);
    body.push(1);
    assert_eq!(
        bounded_code(&file_from_body(&body)),
        "tlspec_body_undecodable"
    );
}

#[test]
fn valid_safetensors_that_is_not_a_tlspec() {
    use safetensors::tensor::{Dtype, TensorView};
    let data = [0u8; 8];
    let view = TensorView::new(Dtype::F32, vec![2], &data).expect("view");
    let plain = safetensors::serialize([("weight", &view)], None).expect("serializes");
    assert_eq!(bounded_code(&plain), "tlspec_not_a_tlspec");
    let metadata = [("format".to_string(), "pt".to_string())]
        .into_iter()
        .collect();
    let other = safetensors::serialize([("weight", &view)], Some(metadata)).expect("serializes");
    assert_eq!(bounded_code(&other), "tlspec_not_a_tlspec");
    let no_body = format!(
        r#"{{"__metadata__":{},"a":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}"#,
        metadata_json("1", "{\"a\":\"uint8\"}")
    );
    assert_eq!(
        bounded_code(&raw_file(&no_body, &[0])),
        "tlspec_not_a_tlspec"
    );
}

#[test]
fn body_tensor_misplaced_or_mistyped() {
    let body_second = format!(
        r#"{{"__metadata__":{},"a":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}},"__torchlens_body__":{{"dtype":"U8","shape":[8],"data_offsets":[1,9]}}}}"#,
        metadata_json("1", "{\"a\":\"uint8\"}")
    );
    assert_eq!(
        bounded_code(&raw_file(&body_second, &[0; 9])),
        "tlspec_body_invalid"
    );
    let body_f32 = format!(
        r#"{{"__metadata__":{},"__torchlens_body__":{{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}}}"#,
        metadata_json("1", "{}")
    );
    assert_eq!(
        bounded_code(&raw_file(&body_f32, &[0; 8])),
        "tlspec_body_invalid"
    );
}

#[test]
fn unsupported_format_versions() {
    let body = body_of(&small_trace(), 1);
    for version in ["3", "0", "02", "+2", ""] {
        let header = format!(
            r#"{{"__metadata__":{},"__torchlens_body__":{{"dtype":"U8","shape":[{len}],"data_offsets":[0,{len}]}}}}"#,
            metadata_json(version, "{}"),
            len = body.len()
        );
        let file = raw_file(&header, &body);
        assert_eq!(
            bounded_code(&file),
            "tlspec_version_unsupported",
            "{version:?}"
        );
        assert_eq!(
            tlspec::decode_file(&file).unwrap_err().kind,
            ErrorKind::UnsupportedVersion
        );
    }
    let body_v3 = body_of(&small_trace(), 3);
    assert_eq!(
        bounded_code(&file_from_body(&body_v3)),
        "tlspec_version_unsupported"
    );
}

#[test]
fn version_1_files_still_decode_and_need_no_checksums() {
    let file = file_from_body(&body_of(&small_trace(), 1));
    let (header, trace) = tlspec::decode_file(&file).expect("a v1 file decodes");
    assert_eq!(header.format_version, 1);
    assert_eq!(header.body_crc32, None);
    assert_eq!(trace.ops.len(), small_trace().ops.len());
}

#[test]
fn version_2_checks_the_header_and_body_checksums() {
    let good = encode(&small_trace());
    let (header, _) = tlspec::decode_file(&good).expect("valid");
    assert_eq!(header.format_version, 2);
    let body_start = header.body_offset as usize;
    // A v2 header with a body lacking its check block, and one with a wrong body_crc32.
    let mut wrong_crc = good.clone();
    let at = good
        .windows(12)
        .position(|window| window == b"\"body_crc32\"")
        .expect("body_crc32 is written")
        + 14;
    wrong_crc[at] = if wrong_crc[at] == b'1' { b'2' } else { b'1' };
    assert_eq!(bounded_code(&wrong_crc), "tlspec_header_checksum_mismatch");
    let mut body = good.clone();
    body[body_start + 9] ^= 0x80;
    assert_eq!(bounded_code(&body), "tlspec_body_checksum_mismatch");
    let mut block = good.clone();
    block[body_start] ^= 0x01;
    assert_eq!(bounded_code(&block), "tlspec_header_checksum_mismatch");
}

#[test]
fn manifest_without_usable_logical_dtypes() {
    let not_json = format!(
        r#"{{"__metadata__":{},"__torchlens_body__":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}}}"#,
        metadata_json("1", "not json")
    );
    assert_eq!(
        bounded_code(&raw_file(&not_json, &[])),
        "tlspec_manifest_invalid"
    );
    let missing = r#"{"__metadata__":{"format":"tlspec","format_version":"1"},"__torchlens_body__":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}"#;
    assert_eq!(
        bounded_code(&raw_file(missing, &[])),
        "tlspec_manifest_invalid"
    );
    let unlisted = header_with(
        "{}",
        r#","a":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&unlisted, &[0; 9])),
        "tlspec_payload_mismatch"
    );
    let wrong_storage = header_with(
        "{\"a\":\"bfloat16\"}",
        r#","a":{"dtype":"F16","shape":[1],"data_offsets":[8,10]}"#,
        8,
    );
    assert_eq!(
        bounded_code(&raw_file(&wrong_storage, &[0; 10])),
        "tlspec_payload_mismatch"
    );
    let extra_dtype = header_with("{\"ghost\":\"float32\"}", "", 0);
    assert_eq!(
        bounded_code(&raw_file(&extra_dtype, &[])),
        "tlspec_payload_mismatch"
    );
}

#[test]
fn body_breaking_trace_invariants() {
    let mut out_of_range = small_trace();
    out_of_range.ops[2].parents[0].op = 50;
    let code = bounded_code(&file_from_body(&body_of(&out_of_range, 1)));
    assert_eq!(code, "trace_edge_out_of_range");
    let error = tlspec::decode_file(&file_from_body(&body_of(&out_of_range, 1))).unwrap_err();
    assert_eq!(error.kind, ErrorKind::InvalidTrace);

    let mut cycle = small_trace();
    cycle.ops[1].parents[0].op = 2;
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&cycle, 1))),
        "trace_cycle"
    );
    let mut self_loop = small_trace();
    self_loop.ops[1].parents[0].op = 1;
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&self_loop, 1))),
        "trace_cycle"
    );

    let mut child = small_trace();
    child.ops[2]
        .children
        .push(torchlens_core::model::Edge { op: 0, position: 0 });
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&child, 1))),
        "trace_cycle"
    );

    let mut duplicate = small_trace();
    duplicate.ops[2].label = duplicate.ops[1].label.clone();
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&duplicate, 1))),
        "trace_duplicate_label"
    );

    let mut bad_layer = small_trace();
    bad_layer.ops[0].layer = 999;
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&bad_layer, 1))),
        "trace_index_out_of_range"
    );
    let mut bad_func = small_trace();
    bad_func.ops[1].func = 999;
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&bad_func, 1))),
        "trace_index_out_of_range"
    );
    let mut bad_input = small_trace();
    bad_input.inputs.push(77);
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&bad_input, 1))),
        "trace_edge_out_of_range"
    );

    let mut call_cycle = small_trace();
    call_cycle.module_calls[0].parent_call = Some(0);
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&call_cycle, 1))),
        "trace_cycle"
    );
    let mut module_cycle = small_trace();
    module_cycle.modules[0].parent = Some(0);
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&module_cycle, 1))),
        "trace_cycle"
    );
}

#[test]
fn payload_table_disagreeing_with_the_body() {
    // The body says op 1 keeps a payload, the header holds no tensor for it.
    let mut orphan = small_trace();
    orphan.ops[1].set_payload(Some(0));
    assert_eq!(
        bounded_code(&file_from_body(&body_of(&orphan, 1))),
        "tlspec_payload_mismatch"
    );

    // The header holds a tensor for an op that keeps no payload.
    let trace = small_trace();
    let body = body_of(&trace, 1);
    let label = &trace.ops[1].label;
    let header = format!(
        r#"{{"__metadata__":{},"__torchlens_body__":{{"dtype":"U8","shape":[{len}],"data_offsets":[0,{len}]}},"{label}":{{"dtype":"F32","shape":[2],"data_offsets":[{len},{end}]}}}}"#,
        metadata_json("1", &format!("{{\"{label}\":\"float32\"}}")),
        len = body.len(),
        end = body.len() + 8
    );
    let mut data = body.clone();
    data.extend_from_slice(&[0; 8]);
    assert_eq!(
        bounded_code(&raw_file(&header, &data)),
        "tlspec_payload_mismatch"
    );

    // Through the stepwise API: shape, dtype or a missing entry.
    let file = valid_file();
    let (header, _) = tlspec::decode_file(&file).expect("valid");
    let body =
        &file[header.body_offset as usize..(header.body_offset + header.body_length) as usize];
    let mut wrong_shape = header.clone();
    wrong_shape.payloads[0].shape = vec![6, 1];
    assert_eq!(
        tlspec::decode_body(&wrong_shape, body).unwrap_err().code,
        "tlspec_payload_mismatch"
    );
    let mut wrong_dtype = header.clone();
    wrong_dtype.payloads[0].dtype = "int32".to_string();
    assert_eq!(
        tlspec::decode_body(&wrong_dtype, body).unwrap_err().code,
        "tlspec_payload_mismatch"
    );
    let mut missing = header.clone();
    missing.payloads.pop();
    assert_eq!(
        tlspec::decode_body(&missing, body).unwrap_err().code,
        "tlspec_payload_mismatch"
    );
    assert_eq!(
        tlspec::decode_body(&header, &body[1..]).unwrap_err().code,
        "tlspec_length_mismatch"
    );
    let header_bytes = &file[..8 + header.header_length as usize];
    let error = tlspec::parse_header(&header_bytes[..header_bytes.len() - 1], file.len() as u64)
        .unwrap_err();
    assert_eq!(error.code, "tlspec_length_mismatch");
}

#[test]
fn body_larger_than_the_limit() {
    let file = valid_file();
    let (header, _) = tlspec::decode_file(&file).expect("valid");
    let limits = tlspec::Limits {
        max_body_bytes: header.body_length - 1,
        ..tlspec::Limits::default()
    };
    let header_bytes = &file[..8 + header.header_length as usize];
    let error = tlspec::parse_header_with(header_bytes, file.len() as u64, &limits).unwrap_err();
    assert_eq!(error.code, "tlspec_body_too_large");
}

#[test]
fn the_shared_hostile_corpus_is_refused_with_its_codes() {
    for file in hostile_corpus::hostile_corpus() {
        assert_eq!(bounded_code(&file.bytes), file.code, "{}", file.name);
    }
}
