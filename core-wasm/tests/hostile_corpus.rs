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
            "tlspec_not_a_tlspec",
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
        huge.clone(),
        "tlspec_not_a_tlspec",
    ));
    huge[..8].copy_from_slice(&(u64::from(u32::MAX)).to_le_bytes());
    files.push(case(
        "header_length_just_below_4_gib",
        huge,
        "tlspec_header_too_large",
    ));
    files.push(case(
        "a_text_file",
        b"a plain text file, not a trace\n".to_vec(),
        "tlspec_not_a_tlspec",
    ));
    // What torch.save writes: a zip archive.
    let mut zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
    zip.extend_from_slice(&[0; 64]);
    files.push(case("a_torch_save_zip", zip, "tlspec_not_a_tlspec"));

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
    files.extend(manifest_bound_cases());
    files
}

/// A version 1 file of the small trace whose manifest has further keys `extra` (a v1 file has
/// no checksums, so the hostile values need no recomputed ones).
pub fn file_with_manifest(extra: &[(&str, &str)]) -> Vec<u8> {
    let body = body_of(&small_trace(), 1);
    let mut metadata: serde_json::Value =
        serde_json::from_str(&metadata_json("1", "{}")).expect("metadata JSON");
    for (key, value) in extra {
        metadata[*key] = serde_json::Value::String((*value).to_owned());
    }
    let header = format!(
        r#"{{"__metadata__":{metadata},"__torchlens_body__":{{"dtype":"U8","shape":[{len}],"data_offsets":[0,{len}]}}}}"#,
        len = body.len()
    );
    raw_file(&header, &body)
}

/// The manifest's free text bounded before any host parses it: `codec_metadata` too large,
/// too deep (the 200,000 brackets that end Python's `json.loads` in a bare `RecursionError`),
/// not JSON or not an object; a named field too large.
fn manifest_bound_cases() -> Vec<HostileFile> {
    let max = torchlens_core::tlspec::MAX_CODEC_METADATA_BYTES;
    let too_large = format!(r#"{{"jax_prng_keys":{{"a":"{}"}}}}"#, "x".repeat(max));
    let too_deep = format!(r#"{{"a":{}}}"#, "[".repeat(200_000));
    let just_too_deep = format!(
        r#"{{"a":{}1{}}}"#,
        "[".repeat(torchlens_core::tlspec::MAX_CODEC_METADATA_DEPTH),
        "]".repeat(torchlens_core::tlspec::MAX_CODEC_METADATA_DEPTH)
    );
    let long_backend = "torch".repeat(1000);
    vec![
        case(
            "codec_metadata_too_large",
            file_with_manifest(&[("codec_metadata", &too_large)]),
            "tlspec_codec_metadata_too_large",
        ),
        case(
            "codec_metadata_200000_brackets_deep",
            file_with_manifest(&[("codec_metadata", &too_deep)]),
            "tlspec_codec_metadata_too_deep",
        ),
        case(
            "codec_metadata_65_levels_deep",
            file_with_manifest(&[("codec_metadata", &just_too_deep)]),
            "tlspec_codec_metadata_too_deep",
        ),
        case(
            "codec_metadata_not_json",
            file_with_manifest(&[("codec_metadata", "{\"a\":")]),
            "tlspec_codec_metadata_invalid",
        ),
        case(
            "codec_metadata_not_an_object",
            file_with_manifest(&[("codec_metadata", "[1, 2]")]),
            "tlspec_codec_metadata_invalid",
        ),
        case(
            "manifest_backend_too_large",
            file_with_manifest(&[("backend", &long_backend)]),
            "tlspec_manifest_field_too_large",
        ),
    ]
}

/// Where `needle` first occurs in `bytes`.
fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|window| window == needle)
        .expect("the valid file holds the needle")
}

/// What a hostile file hides in its strings: an OSC that sets the window title, a screen clear,
/// an OSC 8 hyperlink, a C1 CSI (U+009B), DEL and a right-to-left override.
pub const TERMINAL_ATTACK: &str =
    "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}]8;;http://evil/\u{1b}\\\u{9b}31m\u{7f}\u{202e}";

/// A well-formed trace whose module address and class, op function (and so op labels and the
/// header's tensor names) and input name all carry [`TERMINAL_ATTACK`].
pub fn terminal_attack_trace() -> torchlens_core::Trace {
    use torchlens_core::events::{ArgRef, ModuleDecl, OpEvent, RawEvent, TensorDesc};
    let desc = |tensor: u64, payload: Option<u64>| TensorDesc {
        tensor,
        shape: vec![2].into(),
        dtype: torchlens_core::dtype::Dtype::Float32,
        payload,
    };
    let op = |func: String, arg: u64, output: u64| {
        RawEvent::Op(OpEvent {
            func,
            args: vec![ArgRef {
                tensor: arg,
                position: 0,
                keyword: None,
            }]
            .into(),
            outputs: vec![desc(output, Some(output))].into(),
            in_place: false,
            attributes: Vec::new(),
            source: None,
        })
    };
    let events = vec![
        RawEvent::Module(ModuleDecl {
            id: 0,
            addresses: vec!["self".to_owned()],
            class_name: format!("Model{TERMINAL_ATTACK}"),
            container: false,
            training: false,
        }),
        RawEvent::Module(ModuleDecl {
            id: 1,
            addresses: vec![format!("enc{TERMINAL_ATTACK}")],
            class_name: format!("Evil{TERMINAL_ATTACK}"),
            container: false,
            training: false,
        }),
        RawEvent::Input {
            name: format!("x{TERMINAL_ATTACK}"),
            value: desc(0, Some(0)),
        },
        RawEvent::Enter { module: 0 },
        RawEvent::Enter { module: 1 },
        op(format!("relu{TERMINAL_ATTACK}"), 0, 1),
        RawEvent::Exit {
            module: 1,
            outputs: vec![1],
        },
        op("sigmoid".to_owned(), 1, 2),
        RawEvent::Exit {
            module: 0,
            outputs: vec![2],
        },
        RawEvent::Output {
            name: "out".to_owned(),
            tensor: 2,
        },
    ];
    let mut builder =
        torchlens_core::TraceBuilder::new(torchlens_core::model::TraceOptions::default());
    builder
        .ingest(events)
        .expect("the attack's events are valid");
    builder.finish().expect("the attack's trace finishes")
}

/// A manifest whose named fields and an extra key carry [`TERMINAL_ATTACK`].
pub fn terminal_attack_manifest() -> torchlens_core::tlspec::Manifest {
    torchlens_core::tlspec::Manifest {
        backend_version: format!("2.5{TERMINAL_ATTACK}"),
        backend_runtime: format!("cpython{TERMINAL_ATTACK}"),
        created_at: format!("2025{TERMINAL_ATTACK}"),
        save_level: format!("full{TERMINAL_ATTACK}"),
        extra: vec![(format!("note{TERMINAL_ATTACK}"), TERMINAL_ATTACK.to_owned())],
        ..manifest()
    }
}

/// The attack trace written with pattern payloads and a payload CRC-32 table (the checksums
/// are the file's own: the file is well formed, only its strings are hostile).
pub fn terminal_attack_file() -> Vec<u8> {
    let trace = terminal_attack_trace();
    let payloads = payloads_for(&trace);
    torchlens_core::tlspec::encode_with_payloads(&trace, &terminal_attack_manifest(), |slot| {
        payloads.get(&slot).map(Vec::as_slice)
    })
    .expect("the attack file encodes")
}

/// Whether `text` holds a byte or character a terminal would act on: any C0 control but the
/// newline, DEL, a C1 control or a bidirectional override.
pub fn has_terminal_control(text: &str) -> bool {
    text.chars().any(|character| {
        character != '\n' && torchlens_core::terminal_text::is_terminal_control(character)
    })
}
