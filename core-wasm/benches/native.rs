//! Native benchmarks of the core's bulk paths: ingest, static selection, `.tlspec` encode and
//! decode. `host-runtime/benches/component.rs` runs the same workloads through the component.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;
use std::time::Duration;
use torchlens_core::demo_model::synthetic_events;
use torchlens_core::events::EventBatch;
use torchlens_core::model::TraceOptions;
use torchlens_core::selectors::{evaluate, Selector, SelectorNode};
use torchlens_core::tlspec::{self, Manifest};
use torchlens_core::{Trace, TraceBuilder};

const EVENTS: usize = 1_000_000;
/// Enough events for a trace of just over one million ops.
const EVENTS_FOR_1M_OPS: usize = 1_800_020;

fn build(events: &[u8]) -> Trace {
    let mut builder = TraceBuilder::new(TraceOptions::default());
    builder.ingest_postcard(events).expect("valid events");
    builder.finish().expect("finishes")
}

fn relu_in_block() -> Selector {
    Selector {
        nodes: vec![
            SelectorNode::Func("relu".into()),
            SelectorNode::InModule("block".into()),
            SelectorNode::And(vec![0, 1]),
        ],
        root: 2,
    }
}

fn benchmarks(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("native");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));

    let batch = EventBatch {
        events: synthetic_events(EVENTS),
    }
    .to_postcard();
    group.bench_function("ingest_1m_events", |bench| {
        bench.iter(|| black_box(build(&batch)))
    });

    let trace = build(
        &EventBatch {
            events: synthetic_events(EVENTS_FOR_1M_OPS),
        }
        .to_postcard(),
    );
    assert!(trace.ops.len() >= 1_000_000);
    let selector = relu_in_block();
    group.bench_function("select_static_1m_ops", |bench| {
        bench.iter(|| black_box(evaluate(&trace, &selector, &[]).expect("valid selector")))
    });

    let manifest = Manifest::default();
    group.bench_function("encode_1m_op_body", |bench| {
        bench.iter(|| black_box(tlspec::encode_layout(&trace, &manifest).expect("encodes")))
    });
    let file = tlspec::encode_layout(&trace, &manifest)
        .expect("encodes")
        .prefix;
    group.bench_function("decode_1m_op_body", |bench| {
        bench.iter_batched(
            || (),
            |()| black_box(tlspec::decode_file(&file).expect("decodes")),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(core_benches, benchmarks);
criterion_main!(core_benches);
