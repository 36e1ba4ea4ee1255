//! The built core component, loaded by wasmtime, against the native build of the same core:
//! the same events give the same trace body, the same `.tlspec` bytes and the same answers.

use torchlens_core::demo_model::demo_events;
use torchlens_core::events::EventBatch;
use torchlens_core::model::TraceOptions;
use torchlens_core::tlspec;
use torchlens_core::TraceBuilder;
use torchlens_host_runtime::{
    default_component_path, wit, CacheOutcome, CoreInstance, CoreRuntime, HostError, SandboxLimits,
};

fn runtime(limits: SandboxLimits) -> CoreRuntime {
    let path = default_component_path();
    CoreRuntime::from_component_file(&path, None, limits).unwrap_or_else(|error| {
        panic!("{error}: run scripts/build-component.sh (or `make component`) first")
    })
}

fn instance() -> CoreInstance {
    runtime(SandboxLimits::trusted()).instantiate().unwrap()
}

fn wit_options() -> wit::TraceOptions {
    wit::TraceOptions {
        recurrence_detection: true,
        compute_input_output_distances: true,
    }
}

fn manifest() -> wit::Manifest {
    wit::Manifest {
        backend: "demo".into(),
        backend_runtime: "none".into(),
        backend_version: "0".into(),
        payload_policy: "array_payloads".into(),
        save_level: "all".into(),
        created_at: "2026-11-30T00:00:00Z".into(),
        codec_metadata: "{}".into(),
        payload_checksums: Vec::new(),
        extra: vec![("note".into(), "component test".into())],
    }
}

fn native_manifest() -> tlspec::Manifest {
    let wit_manifest = manifest();
    tlspec::Manifest {
        backend: wit_manifest.backend,
        backend_runtime: wit_manifest.backend_runtime,
        backend_version: wit_manifest.backend_version,
        payload_policy: wit_manifest.payload_policy,
        save_level: wit_manifest.save_level,
        created_at: wit_manifest.created_at,
        codec_metadata: wit_manifest.codec_metadata,
        payload_checksums: Vec::new(),
        extra: wit_manifest.extra,
    }
}

fn native_trace() -> torchlens_core::Trace {
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest(demo_events()).unwrap();
    builder.finish().unwrap()
}

/// Deterministic payload bytes for a slot.
fn payload_bytes(slot: u64, length: u64) -> Vec<u8> {
    (0..length)
        .map(|index| (slot as u8).wrapping_mul(17) ^ index as u8)
        .collect()
}

fn component_trace(core: &mut CoreInstance) -> wasmtime::component::ResourceAny {
    let session = core.start_session(wit_options(), None).unwrap();
    let events = demo_events();
    for chunk in events.chunks(5) {
        let batch = EventBatch {
            events: chunk.to_vec(),
        };
        core.ingest(session, &batch.to_postcard()).unwrap();
    }
    let (trace, decisions) = core.finish(session).unwrap();
    assert!(decisions.is_empty(), "no plan, no decisions");
    trace
}

#[test]
fn component_builds_the_same_trace_as_native() {
    let mut core = instance();
    assert_eq!(core.version().unwrap(), env!("CARGO_PKG_VERSION"));
    let trace = component_trace(&mut core);
    let native = native_trace();
    assert_eq!(core.body(trace).unwrap(), tlspec::trace_to_body(&native));
    let info = core.trace_info(trace).unwrap();
    assert_eq!(info.op_count as usize, native.ops.len());
    assert_eq!(info.inputs, native.inputs);
}

#[test]
fn tlspec_bytes_through_the_component_equal_native_encode() {
    let mut core = instance();
    let trace = component_trace(&mut core);
    let layout = core.encode(trace, &manifest()).unwrap();
    let native = tlspec::encode_layout(&native_trace(), &native_manifest()).unwrap();
    assert_eq!(
        layout.prefix, native.prefix,
        "header and body bytes are identical"
    );
    assert_eq!(layout.file_length, native.file_length);
    assert_eq!(layout.payloads.len(), native.payloads.len());
    for (ours, theirs) in layout.payloads.iter().zip(&native.payloads) {
        assert_eq!(
            (&ours.label, ours.offset, ours.length, ours.slot),
            (&theirs.label, theirs.offset, theirs.length, theirs.slot)
        );
    }

    assert_eq!(layout.crc_table_offset, native.crc_table_offset);

    // Write the file as a host does: prefix, then each payload at its offset, then the
    // payload CRC-32 table.
    let mut file = layout.prefix.clone();
    let mut crcs = Vec::new();
    for placement in &layout.payloads {
        assert_eq!(file.len() as u64, placement.offset);
        let bytes = payload_bytes(placement.slot, placement.length);
        crcs.push(tlspec::crc32(&bytes));
        file.extend(bytes);
    }
    assert_eq!(Some(file.len() as u64), layout.crc_table_offset);
    file.extend(tlspec::crc_table_bytes(crcs));
    assert_eq!(file.len() as u64, layout.file_length);

    // Read it back through the component: header first, then the body.
    let header_length = core.tlspec_header_length(&file[..8]).unwrap();
    let header = &file[..8 + header_length as usize];
    let info = core.parse_tlspec_header(header, file.len() as u64).unwrap();
    assert_eq!(info.manifest.backend, "demo");
    assert_eq!(info.format_version, 2);
    assert_eq!(info.crc_table_offset, layout.crc_table_offset);
    let body = &file[info.body_offset as usize..(info.body_offset + info.body_length) as usize];
    let (_, decoded) = core.decode_tlspec(header, body, file.len() as u64).unwrap();
    let (_, native_decoded) = tlspec::decode_file(&file).unwrap();
    assert_eq!(
        core.body(decoded).unwrap(),
        tlspec::trace_to_body(&native_decoded)
    );
    for entry in &info.payloads {
        let op = native_decoded.find_label(&entry.label).unwrap();
        let slot = native_trace().ops[op as usize].payload().unwrap();
        let bytes = &file[entry.offset as usize..(entry.offset + entry.length) as usize];
        assert_eq!(bytes, payload_bytes(slot, entry.length), "{}", entry.label);
    }

    // A body round-trips on its own too.
    let body = core.body(trace).unwrap();
    let rebuilt = core.from_body(&body).unwrap();
    assert_eq!(core.body(rebuilt).unwrap(), body);
}

#[test]
fn selectors_and_errors_cross_the_boundary() {
    let mut core = instance();
    let trace = component_trace(&mut core);
    let selector = wit::Selector {
        nodes: vec![
            wit::SelectorNode::Func("linear".into()),
            wit::SelectorNode::InModule("cell".into()),
            wit::SelectorNode::And(vec![0, 1]),
        ],
        root: 2,
    };
    let selected = core.select(trace, &selector, &[]).unwrap();
    let native = torchlens_core::selectors::evaluate(
        &native_trace(),
        &torchlens_core::selectors::Selector {
            nodes: vec![
                torchlens_core::selectors::SelectorNode::Func("linear".into()),
                torchlens_core::selectors::SelectorNode::InModule("cell".into()),
                torchlens_core::selectors::SelectorNode::And(vec![0, 1]),
            ],
            root: 2,
        },
        &[],
    )
    .unwrap();
    assert_eq!(selected, native);
    assert_eq!(selected.len(), 3);

    let bad = wit::Selector {
        nodes: vec![wit::SelectorNode::Not(0)],
        root: 0,
    };
    match core.select(trace, &bad, &[]) {
        Err(HostError::Core { family, code, .. }) => {
            assert_eq!(family, "invalid-selector");
            assert_eq!(code, "selector_child_order");
        }
        other => panic!("expected a typed selector error, got {other:?}"),
    }
    match core.tlspec_header_length(&[1, 2, 3]) {
        Err(HostError::Core { family, .. }) => assert_eq!(family, "malformed-file"),
        other => panic!("expected a typed file error, got {other:?}"),
    }
    let session = core.start_session(wit_options(), None).unwrap();
    match core.ingest(session, &[0xff, 0xff]) {
        Err(HostError::Core { code, .. }) => assert_eq!(code, "events_undecodable"),
        other => panic!("expected a typed event error, got {other:?}"),
    }
}

#[test]
fn live_plans_report_decisions_through_the_component() {
    let mut core = instance();
    let plan = wit::Selector {
        nodes: vec![wit::SelectorNode::Module("cell".into())],
        root: 0,
    };
    let session = core.start_session(wit_options(), Some(&plan)).unwrap();
    let batch = EventBatch {
        events: demo_events(),
    };
    let mut decisions = core.ingest(session, &batch.to_postcard()).unwrap();
    let (trace, last) = core.finish(session).unwrap();
    decisions.extend(last);
    let ops = core.ops(trace, 0, u32::MAX).unwrap();
    // Every op with a value of its own is decided once, by that value; outputs are not.
    let mut valued: Vec<u64> = ops.iter().filter_map(|op| op.value).collect();
    let mut decided: Vec<u64> = decisions.iter().map(|decision| decision.value).collect();
    valued.sort_unstable();
    decided.sort_unstable();
    assert_eq!(decided, valued);
    assert!(ops
        .iter()
        .all(|op| (op.kind == wit::OpKind::Output) == op.value.is_none()));
    let selected: Vec<&str> = decisions
        .iter()
        .filter(|decision| decision.selected)
        .filter_map(|decision| ops.iter().find(|op| op.value == Some(decision.value)))
        .map(|op| op.label.as_str())
        .collect();
    assert_eq!(selected.len(), 3, "the three cell outputs: {selected:?}");
    assert!(selected.iter().all(|label| label.starts_with("tanh")));
}

#[test]
fn adapter_ids_cross_the_component_boundary() {
    let mut core = instance();
    let plan = core.parse_selector("func:relu").unwrap();
    let session = core.start_session(wit_options(), Some(&plan)).unwrap();
    let mut recorder = torchlens_core::recorder::EventRecorder::keeping_payloads();
    let x = recorder.input("x", &[2]);
    let unseen = recorder.undeclared();
    let relu = recorder.op("relu", &[x, unseen], &[2]);
    recorder.edit(relu, "0", "zero_ablate", "output");
    let tanh = recorder.op("tanh", &[relu], &[2]);
    recorder.output("out", tanh);
    let batch = EventBatch {
        events: recorder.events,
    };
    let decisions = core.ingest(session, &batch.to_postcard()).unwrap();
    let decided: Vec<(u64, bool)> = decisions
        .iter()
        .map(|decision| (decision.value, decision.selected))
        .collect();
    // The inserted constant (op 1) is decided by the undeclared value it stands for, and the
    // relu (op 2) by its own value, not by a guessed op index.
    assert_eq!(
        decided,
        [(x, false), (unseen, false), (relu, true), (tanh, false)]
    );

    match core.mark_stopped(session, "stop_after", &[relu, 9_999]) {
        Err(HostError::Core { family, code, .. }) => {
            assert_eq!(family, "invalid-events");
            assert_eq!(code, "events_unknown_frontier_value");
        }
        other => panic!("expected an unknown-frontier error, got {other:?}"),
    }
    core.mark_stopped(session, "stop_after", &[relu]).unwrap();
    let (trace, last) = core.finish(session).unwrap();
    assert!(last.is_empty(), "the output node gets no decision");
    let info = core.trace_info(trace).unwrap();
    assert_eq!(info.frontier, [2], "the frontier is reported as op ids");
    assert_eq!(info.stop_reason.as_deref(), Some("stop_after"));

    let ops = core.ops(trace, 0, u32::MAX).unwrap();
    let values: Vec<Option<u64>> = ops.iter().map(|op| op.value).collect();
    assert_eq!(
        values,
        [Some(x), Some(unseen), Some(relu), Some(tanh), None]
    );
    assert_eq!(ops[2].edits.len(), 1);
    assert_eq!(ops[2].edits[0].action, "zero_ablate");

    // keep-payloads names the adapter's slots (the recorder's slot is the tensor id).
    core.keep_payloads(trace, &[tanh]).unwrap();
    let kept: Vec<Option<u64>> = core
        .ops(trace, 0, u32::MAX)
        .unwrap()
        .iter()
        .map(|op| op.payload)
        .collect();
    assert_eq!(kept, [None, None, None, Some(tanh), None]);

    // A trace rebuilt from its body has no adapter values, but keeps the edits.
    let body = core.body(trace).unwrap();
    let reloaded = core.from_body(&body).unwrap();
    let reloaded_ops = core.ops(reloaded, 0, u32::MAX).unwrap();
    assert!(reloaded_ops.iter().all(|op| op.value.is_none()));
    let edit_texts = |op: &wit::OpInfo| -> Vec<(String, String, String)> {
        op.edits
            .iter()
            .map(|edit| (edit.rule.clone(), edit.action.clone(), edit.timing.clone()))
            .collect()
    };
    assert_eq!(edit_texts(&reloaded_ops[2]), edit_texts(&ops[2]));
}

#[test]
fn an_edit_of_an_unknown_value_is_refused_through_the_component() {
    let mut core = instance();
    let session = core.start_session(wit_options(), None).unwrap();
    let mut recorder = torchlens_core::recorder::EventRecorder::default();
    let x = recorder.input("x", &[2]);
    recorder.edit(x + 1, "0", "zero_ablate", "output");
    let batch = EventBatch {
        events: recorder.events,
    };
    match core.ingest(session, &batch.to_postcard()) {
        Err(HostError::Core { code, .. }) => assert_eq!(code, "events_edit_unknown_value"),
        other => panic!("expected events_edit_unknown_value, got {other:?}"),
    }
}

#[test]
fn the_build_id_is_baked_into_the_component_bytes() {
    let mut core = instance();
    let id = core.build_id().unwrap();
    assert_eq!(id, torchlens_core::BUILD_ID, "built from the same sources");
    assert!(id.starts_with("torchlens-core-build:"));
    let bytes = std::fs::read(default_component_path()).unwrap();
    assert!(
        bytes
            .windows(id.len())
            .any(|window| window == id.as_bytes()),
        "the id is in the component's bytes"
    );
}

#[test]
fn a_memory_cap_below_the_initial_memory_is_memory_exhaustion() {
    let limits = SandboxLimits {
        memory_bytes: 64 << 10,
        fuel_per_call: None,
        deadline_per_call: None,
    };
    match runtime(limits).instantiate() {
        Err(HostError::Trap { code, .. }) => assert_eq!(code, "sandbox_memory_exhausted"),
        Err(other) => panic!("expected memory exhaustion, got {other:?}"),
        Ok(_) => panic!("the component's initial memory exceeds 64 KiB"),
    }
}

#[test]
fn the_memory_cap_stops_the_component_and_a_new_instance_recovers() {
    let limits = SandboxLimits {
        memory_bytes: 2 << 20,
        fuel_per_call: Some(10_000_000_000),
        deadline_per_call: None,
    };
    let runtime = runtime(limits);
    let mut core = runtime.instantiate().unwrap();
    let mut recorder = torchlens_core::recorder::EventRecorder::default();
    let mut value = recorder.input("x", &[1]);
    for _ in 0..50_000 {
        value = recorder.op("relu", &[value], &[1]);
    }
    let batch = EventBatch {
        events: recorder.events,
    }
    .to_postcard();
    let session = core.start_session(wit_options(), None).unwrap();
    match core.ingest(session, &batch) {
        Err(HostError::Trap { code, .. }) => assert_eq!(code, "sandbox_memory_exhausted"),
        other => panic!("expected the memory cap to stop the call, got {other:?}"),
    }
    assert!(core.is_dead());
    assert_eq!(core.version(), Err(HostError::Dead));
    let mut fresh = runtime.instantiate().unwrap();
    assert_eq!(fresh.version().unwrap(), env!("CARGO_PKG_VERSION"));
}

/// A postcard batch: an input, then `length` relus in a chain.
fn relu_chain_batch(length: usize) -> Vec<u8> {
    let mut recorder = torchlens_core::recorder::EventRecorder::default();
    let mut value = recorder.input("x", &[1]);
    for _ in 0..length {
        value = recorder.op("relu", &[value], &[1]);
    }
    EventBatch {
        events: recorder.events,
    }
    .to_postcard()
}

#[test]
fn a_wall_clock_deadline_bounds_a_call() {
    let limits = SandboxLimits {
        memory_bytes: 1 << 30,
        fuel_per_call: None,
        deadline_per_call: Some(std::time::Duration::from_millis(20)),
    };
    let mut core = runtime(limits).instantiate().unwrap();
    let session = core.start_session(wit_options(), None).unwrap();
    let big = relu_chain_batch(400_000);
    // The trap's code says the deadline (not fuel, which is off) stopped the call before it
    // finished; how long that took is the machine's business, so it is not asserted.
    match core.ingest(session, &big) {
        Err(HostError::Trap { code, .. }) => assert_eq!(code, "sandbox_deadline_exceeded"),
        other => panic!("expected the deadline to stop the call, got {other:?}"),
    }
    assert!(core.is_dead());
}

#[test]
fn fuel_bounds_a_call() {
    let limits = SandboxLimits {
        memory_bytes: 256 << 20,
        fuel_per_call: Some(100_000),
        deadline_per_call: None,
    };
    let mut core = runtime(limits).instantiate().unwrap();
    let session = core.start_session(wit_options(), None).unwrap();
    match core.ingest(session, &relu_chain_batch(10_000)) {
        Err(HostError::Trap { code, .. }) => assert_eq!(code, "sandbox_fuel_exhausted"),
        other => panic!("expected fuel to run out, got {other:?}"),
    }
}

/// A fresh private cache folder for one test.
fn cache_folder(name: &str) -> std::path::PathBuf {
    let cache = std::env::temp_dir().join(format!(
        "torchlens-cache-test-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&cache);
    cache
}

fn cached_runtime(cache: &std::path::Path) -> CoreRuntime {
    CoreRuntime::from_component_file(
        &default_component_path(),
        Some(cache),
        SandboxLimits::trusted(),
    )
    .unwrap()
}

/// Creates a runtime on `cache` and checks that the cache rejected its artifact for a reason
/// containing `reason`; returns the runtime.
fn rejected(cache: &std::path::Path, reason: &str) -> CoreRuntime {
    let runtime = cached_runtime(cache);
    assert!(
        matches!(runtime.cache_outcome(), CacheOutcome::Rejected(why) if why.contains(reason)),
        "expected a rejection for `{reason}`, got {:?}",
        runtime.cache_outcome()
    );
    runtime
}

/// A fresh cache folder holding the artifact of the trusted engine: `(folder, artifact)`.
fn filled_cache(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let cache = cache_folder(name);
    drop(cached_runtime(&cache));
    let path = artifact(&cache);
    (cache, path)
}

/// The one artifact in a cache folder.
fn artifact(cache: &std::path::Path) -> std::path::PathBuf {
    let entries: Vec<_> = std::fs::read_dir(cache)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "one precompiled component cached: {entries:?}"
    );
    entries[0].clone()
}

#[test]
fn the_precompiled_cache_is_written_and_reused() {
    let cache = cache_folder("reuse");
    let first = cached_runtime(&cache);
    assert_eq!(first.cache_outcome(), &CacheOutcome::Compiled);
    let path = artifact(&cache);
    drop(first);
    let second = cached_runtime(&cache);
    assert_eq!(second.cache_outcome(), &CacheOutcome::Loaded);
    assert_eq!(
        second.instantiate().unwrap().version().unwrap(),
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(artifact(&cache), path, "no temporary file is left behind");
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_tampered_cached_artifact_is_rejected_and_compiled_again() {
    let (cache, path) = filled_cache("tamper");
    let good = std::fs::read(&path).unwrap();

    // One byte of the compiled code changed (past the artifact's 72-byte header).
    let mut code = good.clone();
    let middle = 72 + (good.len() - 72) / 2;
    code[middle] ^= 0x01;
    std::fs::write(&path, &code).unwrap();
    let runtime = rejected(&cache, "checksum");
    assert_eq!(
        runtime.instantiate().unwrap().version().unwrap(),
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        good,
        "the artifact was rewritten"
    );

    // A valid artifact of another engine configuration (fuel metering on) under this key.
    let fuel_cache = cache_folder("tamper-fuel");
    drop(
        CoreRuntime::from_component_file(
            &default_component_path(),
            Some(&fuel_cache),
            SandboxLimits::untrusted(),
        )
        .unwrap(),
    );
    std::fs::copy(artifact(&fuel_cache), &path).unwrap();
    rejected(&cache, "engine settings");

    // Bare wasmtime output without this cache's header (what the old cache wrote).
    std::fs::write(&path, &good[72..]).unwrap();
    rejected(&cache, "not an artifact of this cache");
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_dir_all(&fuel_cache);
}

#[test]
fn a_cache_folder_other_users_can_write_is_never_used() {
    use std::os::unix::fs::PermissionsExt;
    let (cache, path) = filled_cache("shared");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let runtime = cached_runtime(&cache);
    assert!(
        matches!(runtime.cache_outcome(), CacheOutcome::UnsafeFolder(reason) if reason.contains("writable by other users")),
        "{:?}",
        runtime.cache_outcome()
    );
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    // An artifact others may write is not read either.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    rejected(&cache, "writable by other users");
    // A symlink in place of the artifact is not followed.
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(std::env::temp_dir(), &path).unwrap();
    rejected(&cache, "");
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn queries_layout_and_svg_through_the_component() {
    let mut core = instance();
    let trace = component_trace(&mut core);
    let native = native_trace();
    let ops = core
        .call_infallible(|guest, store| guest.trace().call_ops(store, trace, 0, u32::MAX))
        .unwrap();
    assert_eq!(ops.len(), native.ops.len());
    let tanh = ops.iter().find(|op| op.label == "tanh_1_6:2").unwrap();
    assert_eq!(tanh.func_name, "tanh");
    assert_eq!(tanh.num_passes, 3);
    assert_eq!(tanh.module_stack, ["cell:2", "self"]);
    let linear = ops.iter().find(|op| op.label == "linear_2_5:3").unwrap();
    assert_eq!(linear.params, ["cell.linear.weight", "cell.linear.bias"]);
    assert_eq!(linear.module_stack, ["cell.linear:3", "cell:3", "self"]);

    let found = core
        .call_infallible(|guest, store| guest.trace().call_find_label(store, trace, "tanh_1_6:2"))
        .unwrap();
    assert_eq!(found, Some(tanh.id));
    let modules = core
        .call_infallible(|guest, store| guest.trace().call_modules(store, trace))
        .unwrap();
    let cell = modules
        .iter()
        .find(|module| module.address == "cell")
        .unwrap();
    assert_eq!(cell.calls.len(), 3);
    assert_eq!(cell.children, ["cell.linear"]);
    let table = core
        .call_infallible(|guest, store| guest.trace().call_summary_table(store, trace))
        .unwrap();
    assert_eq!(table, torchlens_core::query::summary_table(&native));

    let collapsed = wit::LayoutView::Collapsed(Vec::new());
    let layout = core
        .call(|guest, store| guest.trace().call_layout(store, trace, &collapsed))
        .unwrap();
    let boxes: Vec<&str> = layout
        .nodes
        .iter()
        .filter(|node| matches!(node.kind, wit::NodeKind::Module))
        .map(|node| node.label.as_str())
        .collect();
    assert!(
        boxes.contains(&"cell:1") && boxes.contains(&"cell:3"),
        "{boxes:?}"
    );
    let svg = core
        .call(|guest, store| guest.trace().call_svg(store, trace, &wit::LayoutView::Full))
        .unwrap();
    let native_svg = torchlens_core::layout::render_svg(
        &torchlens_core::layout::layout(&native, &torchlens_core::layout::LayoutView::Full)
            .unwrap(),
    );
    assert_eq!(svg, native_svg);

    // Post-capture save=: keep two payloads, the encode then lays out exactly those.
    let slots = [
        tanh.payload.expect("demo keeps payloads"),
        linear.payload.expect("demo keeps payloads"),
    ];
    core.keep_payloads(trace, &slots).unwrap();
    let encoded = core.encode(trace, &manifest()).unwrap();
    let mut labels: Vec<&str> = encoded
        .payloads
        .iter()
        .map(|placement| placement.label.as_str())
        .collect();
    labels.sort_unstable();
    assert_eq!(labels, ["linear_2_5:3", "tanh_1_6:2"]);
}
