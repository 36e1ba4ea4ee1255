//! The core's bulk paths through the WASI component under wasmtime: the same workloads as
//! `core-wasm/benches/native.rs`, so the two reports compare directly.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use torchlens_core::demo_model::synthetic_events;
use torchlens_core::events::EventBatch;
use torchlens_host_runtime::{
    default_component_path, wit, CoreInstance, CoreRuntime, SandboxLimits,
};
use wasmtime::component::ResourceAny;

const EVENTS: usize = 1_000_000;
const EVENTS_FOR_1M_OPS: usize = 1_800_020;

fn options() -> wit::TraceOptions {
    wit::TraceOptions {
        recurrence_detection: true,
        compute_input_output_distances: true,
    }
}

fn build(core: &mut CoreInstance, batch: &[u8]) -> ResourceAny {
    let session = core.start_session(options(), None).expect("session");
    core.ingest(session, batch).expect("ingest");
    core.finish(session).expect("finish").0
}

fn benchmarks(criterion: &mut Criterion) {
    let runtime =
        CoreRuntime::from_component_file(&default_component_path(), None, SandboxLimits::trusted())
            .expect("run scripts/build-component.sh first");
    let mut group = criterion.benchmark_group("component");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));

    let batch = EventBatch {
        events: synthetic_events(EVENTS),
    }
    .to_postcard();
    let mut core = runtime.instantiate().expect("instance");
    group.bench_function("ingest_1m_events", |bench| {
        bench.iter(|| {
            let trace = build(&mut core, &batch);
            core.drop_resource(trace).expect("drop");
        })
    });

    let big = EventBatch {
        events: synthetic_events(EVENTS_FOR_1M_OPS),
    }
    .to_postcard();
    let trace = build(&mut core, &big);
    let selector = wit::Selector {
        nodes: vec![
            wit::SelectorNode::Func("relu".into()),
            wit::SelectorNode::InModule("block".into()),
            wit::SelectorNode::And(vec![0, 1]),
        ],
        root: 2,
    };
    group.bench_function("select_static_1m_ops", |bench| {
        bench.iter(|| black_box(core.select(trace, &selector, &[]).expect("select")))
    });
    let manifest = wit::Manifest {
        backend: String::new(),
        backend_runtime: String::new(),
        backend_version: String::new(),
        payload_policy: String::new(),
        save_level: String::new(),
        created_at: String::new(),
        codec_metadata: String::new(),
        payload_checksums: Vec::new(),
        extra: Vec::new(),
    };
    group.bench_function("encode_1m_op_body", |bench| {
        bench.iter(|| black_box(core.encode(trace, &manifest).expect("encode")))
    });
    let file = core.encode(trace, &manifest).expect("encode").prefix;
    let header_length = core.tlspec_header_length(&file[..8]).expect("length") as usize;
    let header = &file[..8 + header_length];
    let info = core
        .parse_tlspec_header(header, file.len() as u64)
        .expect("header");
    let body = &file[info.body_offset as usize..(info.body_offset + info.body_length) as usize];
    group.bench_function("decode_1m_op_body", |bench| {
        bench.iter(|| {
            let (_, decoded) = core
                .decode_tlspec(header, body, file.len() as u64)
                .expect("decode");
            core.drop_resource(decoded).expect("drop");
        })
    });
    group.finish();
}

criterion_group!(component_benches, benchmarks);
criterion_main!(component_benches);
