//! One shared copy of the text many ops of a trace repeat.
//!
//! The ops of a loop all name the same file and function, and most layers run once, so their op
//! carries the layer's own label. Keeping such text once (an `Arc<str>` each op points at)
//! instead of a copy per op is most of what text costs a long trace's memory. An op's whole
//! source location is shared too (every op of one line points at one): 4 bytes of the op record
//! on wasm32 instead of 20.

use super::{Interner, Trace};
use crate::events::{SharedSourceLocation, SourceLocation};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// The distinct text and source locations seen so far.
#[derive(Debug, Default)]
pub struct SharedText {
    seen: Interner<str>,
    /// Each location by its shared file's and function's addresses and its line (the texts are
    /// held in `seen`, so an address stays theirs): no second hash of the text.
    locations: HashMap<(usize, u32, usize), Arc<SharedSourceLocation>>,
    /// The last location asked for: consecutive ops mostly come from one line.
    last_location: Option<Arc<SharedSourceLocation>>,
}

impl SharedText {
    /// The shared copy of `text` (made on first sight).
    pub fn share(&mut self, text: &str) -> Arc<str> {
        self.seen.share(text)
    }

    /// The shared copy of `source` (its file and function text shared as well).
    pub fn location<Text: AsRef<str>>(
        &mut self,
        source: &SourceLocation<Text>,
    ) -> Arc<SharedSourceLocation> {
        let (file, function) = (source.file.as_ref(), source.function.as_ref());
        if let Some(last) = &self.last_location {
            if last.line == source.line && *last.file == *file && *last.function == *function {
                return Arc::clone(last);
            }
        }
        let file = self.share(file);
        let function = self.share(function);
        let key = (
            Arc::as_ptr(&file).cast::<u8>() as usize,
            source.line,
            Arc::as_ptr(&function).cast::<u8>() as usize,
        );
        let shared = Arc::clone(self.locations.entry(key).or_insert_with(|| {
            Arc::new(SharedSourceLocation {
                file,
                line: source.line,
                function,
            })
        }));
        self.last_location = Some(Arc::clone(&shared));
        shared
    }
}

/// Makes `trace` keep one copy of repeated text, as a trace built from events does: a decoded
/// trace has a copy per op of each source file and function name, of each op label its layer
/// already holds, and of each layer's op type.
pub fn share_repeated_text(trace: &mut Trace) {
    let mut text = SharedText::default();
    for func in &mut trace.func_names {
        func.op_type = text.share(&func.op_type);
    }
    for layer in &mut trace.layers {
        layer.op_type = text.share(&layer.op_type);
    }
    for op in &mut trace.ops {
        if let Some(source) = op.source.as_mut() {
            *source = text.location(&**source);
        }
        if let Some(layer) = trace.layers.get(op.layer as usize) {
            if layer.label == op.label {
                op.label = Arc::clone(&layer.label);
            }
        }
    }
}
