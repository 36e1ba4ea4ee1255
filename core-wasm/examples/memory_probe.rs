//! What a long trace costs the core per op in wasm32 linear memory, without Python or a host:
//! built for `wasm32-unknown-unknown` and run by `benchmarks/core_memory.py` (under the
//! `wasmtime` package). It builds the trace of `benchmarks/scale.py`'s loop (`relu` then `+ 1`,
//! every op from one source line) from postcard batches of about 1,000 events, as a capture
//! sends them, and reports how far linear memory grew: the high-water mark of the core's
//! allocator, which is what the component keeps resident (linear memory never shrinks).
//!
//! Natively it builds to nothing: `cargo test` compiles the examples of the workspace.

#[cfg(target_arch = "wasm32")]
mod probe {
    use torchlens_core::events::{EventBatch, RawEvent, SourceLocation};
    use torchlens_core::model::{Layer, Op, TraceOptions};
    use torchlens_core::recorder::EventRecorder;
    use torchlens_core::{Trace, TraceBuilder};

    /// The last trace built, kept so its memory stays in use while the runner reads the figures.
    static mut KEPT: Option<Trace> = None;

    fn pages() -> usize {
        core::arch::wasm32::memory_size(0)
    }

    fn send(recorder: &mut EventRecorder, builder: &mut TraceBuilder) {
        let mut events = std::mem::take(&mut recorder.events);
        for event in &mut events {
            if let RawEvent::Op(op) = event {
                op.source = Some(SourceLocation {
                    file: "/home/user/project/scale.py".into(),
                    line: 40,
                    function: "forward".into(),
                });
            }
        }
        let batch = EventBatch { events }.to_postcard();
        builder.ingest_postcard(&batch).expect("valid events");
    }

    /// Builds a `steps`-step loop's trace (two ops a step, plus the input and the output);
    /// returns the bytes linear memory grew by while building it.
    #[no_mangle]
    pub extern "C" fn trace_loop(steps: u32) -> u64 {
        let before = pages();
        let mut recorder = EventRecorder::default();
        let mut builder = TraceBuilder::new(TraceOptions::default());
        let root = recorder.module(&["self"], "Loop");
        let mut x = recorder.input("x", &[4]);
        recorder.enter(root);
        for step in 0..steps {
            let activated = recorder.op("relu", &[x], &[4]);
            x = recorder.op("__add__", &[activated], &[4]);
            if step % 512 == 511 {
                send(&mut recorder, &mut builder);
            }
        }
        recorder.exit(root, &[x]);
        recorder.output("output", x);
        send(&mut recorder, &mut builder);
        let trace = builder.finish().expect("the trace finishes");
        let grown = (pages() - before) as u64 * 65_536;
        // SAFETY: the module is single-threaded and nothing else touches `KEPT`.
        unsafe { KEPT = Some(trace) };
        grown
    }

    /// Ops in the kept trace.
    #[no_mangle]
    pub extern "C" fn ops() -> u64 {
        // SAFETY: as above.
        unsafe {
            (*std::ptr::addr_of!(KEPT))
                .as_ref()
                .map_or(0, |trace| trace.ops.len() as u64)
        }
    }

    /// Bytes of the kept trace's op table and layer table (capacity).
    #[no_mangle]
    pub extern "C" fn table_bytes() -> u64 {
        // SAFETY: as above.
        unsafe {
            (*std::ptr::addr_of!(KEPT)).as_ref().map_or(0, |trace| {
                (trace.ops.allocated_bytes() + trace.layers.allocated_bytes()) as u64
            })
        }
    }

    /// `size_of::<Op>()` and `size_of::<Layer>()` on wasm32.
    #[no_mangle]
    pub extern "C" fn record_sizes() -> u64 {
        ((std::mem::size_of::<Op>() as u64) << 32) | std::mem::size_of::<Layer>() as u64
    }
}
