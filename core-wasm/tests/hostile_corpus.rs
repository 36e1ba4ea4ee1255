//! The hostile `.tlspec` corpus: named files that must each be refused with one typed code.
//! Shared by the core's decode tests (`tlspec_malformed.rs`) and the CLI's process tests
//! (`host-cli/tests/hostile_files.rs`, through `#[path]`), so both hosts face the same files.
//! Compiled alone it holds no tests.
#![allow(dead_code)]

#[path = "tlspec_support.rs"]
mod tlspec_support;

pub use tlspec_support::*;

/// One hostile file and the code it must be refused with.
pub struct HostileFile {
    pub name: String,
    pub bytes: Vec<u8>,
    pub code: &'static str,
}

fn case(name: impl Into<String>, bytes: Vec<u8>, code: &'static str) -> HostileFile {
    HostileFile {
        name: name.into(),
        bytes,
        code,
    }
}

/// A small valid file: an input and three ops, payloads of several dtypes.
pub fn valid_file() -> Vec<u8> {
    let steps = [
        Step {
            dtype: "float32",
            shape: vec![2, 3],
            payload: true,
        },
        Step {
            dtype: "bfloat16",
            shape: vec![4],
            payload: true,
        },
        Step {
            dtype: "int64",
            shape: vec![3],
            payload: false,
        },
    ];
    encode(&chain_trace(&steps, true))
}

/// A header with a zero body of `body_len` bytes plus extra tensor entries (JSON members).
pub fn header_with(logical: &str, extra_tensors: &str, body_len: u64) -> String {
    format!(
        r#"{{"__metadata__":{},"__torchlens_body__":{{"dtype":"U8","shape":[{body_len}],"data_offsets":[0,{body_len}]}}{extra_tensors}}}"#,
        metadata_json("1", logical)
    )
}

/// A version 2 header (its `body_crc32` need not match: every table case is refused while the
/// header is read, before the body is checked) with a zero body of 8 bytes, a `uint8` payload
/// `a`, and further metadata keys and tensor entries (JSON members).
pub fn v2_header_with(extra_metadata: &[(&str, &str)], extra_tensors: &str) -> String {
    let mut metadata = serde_json::json!({
        "format": "tlspec",
        "format_version": "2",
        "body_crc32": "0",
        "logical_dtypes": "{\"a\":\"uint8\"}",
    });
    for (key, value) in extra_metadata {
        metadata[*key] = serde_json::Value::String(value.to_string());
    }
    format!(
        r#"{{"__metadata__":{metadata},"__torchlens_body__":{{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}{extra_tensors}}}"#
    )
}

/// The payload CRC-32 table cases: each one refused while the header is read, none allocating
/// for what a table declares.
fn crc_table_cases() -> Vec<HostileFile> {
    let a = r#","a":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}"#;
    let table = |shape: &str, start: u64, end: u64| {
        format!(
            r#","__torchlens_payload_crc32__":{{"dtype":"U32","shape":[{shape}],"data_offsets":[{start},{end}]}}"#
        )
    };
    let v2 =
        |tensors: String, data: usize| raw_file(&v2_header_with(&[], &tensors), &vec![0; data]);
    let a_first = r#","a":{"dtype":"U8","shape":[4],"data_offsets":[12,16]}"#;
    vec![
        case(
            "crc_table_not_last",
            v2(format!("{}{a_first}", table("1", 8, 12)), 16),
            "tlspec_payload_mismatch",
        ),
        case(
            "crc_table_longer_than_the_payloads",
            v2(format!("{a}{}", table("2", 12, 20)), 20),
            "tlspec_payload_mismatch",
        ),
        case(
            "crc_table_shorter_than_the_payloads",
            v2(format!("{a}{}", table("0", 12, 12)), 12),
            "tlspec_payload_mismatch",
        ),
        case(
            "crc_table_not_u32",
            v2(
                format!(
                    r#"{a},"__torchlens_payload_crc32__":{{"dtype":"U8","shape":[4],"data_offsets":[12,16]}}"#
                ),
                16,
            ),
            "tlspec_payload_mismatch",
        ),
        case(
            "crc_table_of_rank_2",
            v2(
                format!(
                    r#"{a},"__torchlens_payload_crc32__":{{"dtype":"U32","shape":[1,1],"data_offsets":[12,16]}}"#
                ),
                16,
            ),
            "tlspec_payload_mismatch",
        ),
        case(
            "crc_table_and_payload_crc32",
            raw_file(
                &v2_header_with(
                    &[("payload_crc32", "{\"a\":1}")],
                    &format!("{a}{}", table("1", 12, 16)),
                ),
                &[0; 16],
            ),
            "tlspec_manifest_invalid",
        ),
        case(
            "crc_table_in_a_version_1_file",
            raw_file(
                &header_with(
                    "{\"a\":\"uint8\"}",
                    &format!("{a}{}", table("1", 12, 16)),
                    8,
                ),
                &[0; 16],
            ),
            "tlspec_payload_mismatch",
        ),
        case(
            "crc_table_declares_2_pow_40_entries",
            v2(
                format!("{a}{}", table("1099511627776", 12, 12 + (4u64 << 40))),
                16,
            ),
            "tlspec_truncated",
        ),
    ]
}

/// An input and two float32 ops, no payloads.
pub fn small_trace() -> torchlens_core::Trace {
    let step = || Step {
        dtype: "float32",
        shape: vec![2],
        payload: false,
    };
    chain_trace(&[step(), step()], false)
}

/// Deterministic pseudo-random bytes (xorshift).
fn random_bytes(seed: u64, length: usize) -> Vec<u8> {
    let mut state = seed;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// A trace body of format_version 1, options (true, true), no func_names, then a declared
/// 10^9 ops and nothing else.
pub fn billion_ops_body() -> Vec<u8> {
    let mut body = vec![1, 1, 1, 0];
    let mut count = 1_000_000_000u64;
    while count >= 0x80 {
        body.push((count as u8) | 0x80);
        count >>= 7;
    }
    body.push(count as u8);
    body
}

/// Every hostile file, named.
pub fn hostile_corpus() -> Vec<HostileFile> {
    let valid = valid_file();
    let (header, _) = torchlens_core::tlspec::decode_file(&valid).expect("the base file is valid");
    let json_end = header.body_offset as usize;
    let body_end = json_end + header.body_length as usize;
    let mut files = vec![
        case("empty", Vec::new(), "tlspec_too_short"),
        case("seven_bytes", vec![0; 7], "tlspec_too_short"),
        case(
            "random_bytes",
            random_bytes(0x9E37_79B9_7F4A_7C15, 4096),
            "tlspec_header_too_large",
        ),
    ];
    let mut plausible = random_bytes(0x1234_5678_9ABC_DEF1, 4096);
    plausible[..8].copy_from_slice(&1000u64.to_le_bytes());
    files.push(case(
        "random_bytes_plausible_length",
        plausible,
        "tlspec_header_not_utf8",
    ));
    for (name, cut, code) in [
        ("truncated_in_length", 4, "tlspec_too_short"),
        (
            "truncated_in_header",
            json_end / 2,
            "tlspec_header_truncated",
        ),
        ("truncated_at_header_end", json_end, "tlspec_truncated"),
        ("truncated_in_body", body_end - 3, "tlspec_truncated"),
        ("truncated_at_body_end", body_end, "tlspec_truncated"),
        ("truncated_in_payload", body_end + 5, "tlspec_truncated"),
        ("truncated_last_byte", valid.len() - 1, "tlspec_truncated"),
    ] {
        files.push(case(name, valid[..cut].to_vec(), code));
    }
    let mut beyond = valid.clone();
    beyond[..8].copy_from_slice(&(valid.len() as u64).to_le_bytes());
    files.push(case(
        "header_length_beyond_file",
        beyond,
        "tlspec_header_truncated",
    ));
    let mut huge = valid.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    files.push(case(
        "header_length_u64_max",
        huge,
        "tlspec_header_too_large",
    ));

    let tensor = |logical: &str, entry: &str| header_with(logical, entry, 8);
    for (name, logical, entry, data, code) in [
        (
            "payload_offsets_overlapping",
            "{\"a\":\"uint8\"}",
            r#","a":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}"#,
            12,
            "tlspec_offsets_invalid",
        ),
        (
            "payload_offsets_far_out_of_range",
            "{\"a\":\"uint8\"}",
            r#","a":{"dtype":"U8","shape":[4],"data_offsets":[1099511627776,1099511627780]}"#,
            12,
            "tlspec_offsets_invalid",
        ),
        (
            "payload_beyond_file_end",
            "{\"a\":\"float32\"}",
            r#","a":{"dtype":"F32","shape":[1024],"data_offsets":[8,4104]}"#,
            12,
            "tlspec_truncated",
        ),
        (
            "payload_offsets_reversed",
            "{\"a\":\"uint8\"}",
            r#","a":{"dtype":"U8","shape":[0],"data_offsets":[12,8]}"#,
            12,
            "tlspec_offsets_invalid",
        ),
        (
            "shape_element_count_overflow",
            "{\"a\":\"float32\"}",
            r#","a":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[8,9]}"#,
            9,
            "tlspec_shape_overflow",
        ),
    ] {
        files.push(case(
            name,
            raw_file(&tensor(logical, entry), &vec![0; data]),
            code,
        ));
    }
    let ones = vec!["1"; 1000].join(",");
    files.push(case(
        "rank_1000",
        raw_file(
            &tensor(
                "{\"a\":\"uint8\"}",
                &format!(r#","a":{{"dtype":"U8","shape":[{ones}],"data_offsets":[8,9]}}"#),
            ),
            &[0; 9],
        ),
        "tlspec_rank_too_large",
    ));

    files.push(case(
        "body_declares_a_billion_ops",
        file_from_body(&billion_ops_body()),
        "tlspec_body_undecodable",
    ));

    let arrays = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    files.push(case(
        "metadata_nested_100k_deep",
        raw_file(&format!("{{\"__metadata__\":{arrays}}}"), &[0]),
        "tlspec_header_invalid",
    ));
    let objects = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    files.push(case(
        "header_objects_nested_100k_deep",
        raw_file(&objects, &[0]),
        "tlspec_header_invalid",
    ));
    let mut not_utf8 = 8u64.to_le_bytes().to_vec();
    not_utf8.extend_from_slice(&[b'{', 0xff, 0xfe, b'}', b' ', b' ', b' ', b' ']);
    files.push(case(
        "header_invalid_utf8",
        not_utf8,
        "tlspec_header_not_utf8",
    ));

    {
        use safetensors::tensor::{Dtype, TensorView};
        let data = [0u8; 8];
        let view = TensorView::new(Dtype::F32, vec![2], &data).expect("view");
        let plain = safetensors::serialize([("weight", &view)], None).expect("serializes");
        files.push(case(
            "plain_safetensors_not_tlspec",
            plain,
            "tlspec_not_a_tlspec",
        ));
    }

    let mut out_of_range = small_trace();
    out_of_range.ops[2].parents[0].op = 50;
    files.push(case(
        "body_parent_id_out_of_range",
        file_from_body(&body_of(&out_of_range, 1)),
        "trace_edge_out_of_range",
    ));
    let mut cycle = small_trace();
    cycle.ops[1].parents[0].op = 2;
    files.push(case(
        "body_cycle",
        file_from_body(&body_of(&cycle, 1)),
        "trace_cycle",
    ));
    // An op holds its site's function once, as its own: a stored site naming another function
    // describes no op the builder makes. Two bodies that differ only in op 2's function differ
    // in two bytes (the op's and its site's); the first alone is changed.
    let mut other_func = small_trace();
    other_func.ops[2].func ^= 1;
    let (body, other) = (body_of(&small_trace(), 1), body_of(&other_func, 1));
    let differing: Vec<usize> = (0..body.len())
        .filter(|&at| body[at] != other[at])
        .collect();
    assert_eq!(differing.len(), 2, "the function is stored twice");
    let mut site_disagrees = body.clone();
    site_disagrees[differing[0]] = other[differing[0]];
    files.push(case(
        "body_site_disagrees_with_its_op",
        file_from_body(&site_disagrees),
        "tlspec_body_undecodable",
    ));
    // A payload handle of 2^64 - 1 (an op's "none"): the one-byte handle 1 replaced by its
    // ten-byte varint.
    let with_handle = |handle| {
        let mut trace = small_trace();
        trace.ops[1].set_payload(Some(handle));
        body_of(&trace, 1)
    };
    let (one, two) = (with_handle(1), with_handle(2));
    let at = (0..one.len())
        .find(|&at| one[at] != two[at])
        .expect("the handles differ");
    let mut reserved = one[..at].to_vec();
    reserved.extend([0xFF; 9]);
    reserved.push(0x01);
    reserved.extend(&one[at + 1..]);
    files.push(case(
        "body_payload_handle_reserved",
        file_from_body(&reserved),
        "tlspec_body_undecodable",
    ));
    files.push(case(
        "body_version_3",
        file_from_body(&body_of(&small_trace(), 3)),
        "tlspec_version_unsupported",
    ));
    files.push(case(
        "v1_header_with_v2_body",
        file_from_body(&body_of(&small_trace(), 2)),
        "tlspec_body_undecodable",
    ));
    // Version 2's checksums: one changed byte in the header, the check block or the body, and
    // a version damaged from 2 to 1 (a v1 manifest may not name a body checksum).
    let created = find(&valid, b"2025-01-01");
    let version = find(&valid, b"\"format_version\":\"2\"") + 18;
    for (name, index, value, code) in [
        (
            "v2_header_byte_changed",
            created,
            b'3',
            "tlspec_header_checksum_mismatch",
        ),
        (
            "v2_check_block_reserved_byte_set",
            json_end + 5,
            1,
            "tlspec_header_checksum_mismatch",
        ),
        (
            "v2_body_byte_changed",
            json_end + 12,
            valid[json_end + 12] ^ 0x10,
            "tlspec_body_checksum_mismatch",
        ),
        (
            "v2_version_damaged_to_1",
            version,
            b'1',
            "tlspec_manifest_invalid",
        ),
    ] {
        let mut changed = valid.clone();
        changed[index] = value;
        files.push(case(name, changed, code));
    }
    files.extend(crc_table_cases());
    files
}

/// Where `needle` first occurs in `bytes`.
fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|window| window == needle)
        .expect("the valid file holds the needle")
}
