//! The wasm-bindgen surface the page's worker calls. Results cross as JSON text (parsed once on
//! the JavaScript side); errors are thrown as the JSON of a [`WebError`].

use crate::error::{WebError, WebResult};
use crate::session::{body_range, Session};
use serde::Serialize;
use torchlens_core::tlspec::header_length;
use wasm_bindgen::prelude::*;

fn json<T: Serialize>(value: &T) -> Result<String, JsValue> {
    serde_json::to_string(value).map_err(|error| {
        JsValue::from_str(
            &WebError::viewer(
                "viewer_result_unencodable",
                error.to_string(),
                "report this as a bug in the viewer",
            )
            .to_json(),
        )
    })
}

fn answer<T: Serialize>(result: WebResult<T>) -> Result<String, JsValue> {
    match result {
        Ok(value) => json(&value),
        Err(error) => Err(JsValue::from_str(&error.to_json())),
    }
}

/// The header length (bytes of JSON after the first 8), from the file's first 8 bytes.
#[wasm_bindgen(js_name = headerLength)]
pub fn header_length_js(first8: &[u8]) -> Result<f64, JsValue> {
    header_length(first8)
        .map(|length| length as f64)
        .map_err(|error| JsValue::from_str(&WebError::from(error).to_json()))
}

/// `{offset, length}` of the body, from the header bytes (the 8 length bytes and the JSON).
#[wasm_bindgen(js_name = bodyRange)]
pub fn body_range_js(header: &[u8], file_length: f64) -> Result<String, JsValue> {
    answer(body_range(header, file_length as u64))
}

/// The core version the viewer was built with.
#[wasm_bindgen(js_name = coreVersion)]
pub fn core_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// An opened file, held inside the worker.
#[wasm_bindgen]
pub struct Viewer {
    session: Session,
}

#[wasm_bindgen]
impl Viewer {
    /// Checks and decodes a file from its header bytes and body bytes.
    #[wasm_bindgen(constructor)]
    pub fn new(header: &[u8], body: &[u8], file_length: f64) -> Result<Viewer, JsValue> {
        Session::open(header, body, file_length as u64)
            .map(|session| Viewer { session })
            .map_err(|error| JsValue::from_str(&error.to_json()))
    }

    /// The overview (JSON).
    pub fn overview(&self) -> Result<String, JsValue> {
        json(&self.session.overview())
    }

    /// Summary rows `start .. start + count` (JSON).
    pub fn rows(&self, start: u32, count: u32) -> Result<String, JsValue> {
        json(&self.session.rows(start, count))
    }

    /// The graph with `expanded` (JSON array of strings) opened, or every op when `full`.
    pub fn layout(&mut self, expanded: &str, full: bool) -> Result<String, JsValue> {
        let expanded: Vec<String> = serde_json::from_str(expanded).map_err(|error| {
            JsValue::from_str(
                &WebError::viewer(
                    "viewer_bad_request",
                    error.to_string(),
                    "pass a JSON array of module addresses",
                )
                .to_json(),
            )
        })?;
        answer(self.session.layout(expanded, full))
    }

    /// The backward graph's layout (JSON), for a file saved with a backward pass.
    #[wasm_bindgen(js_name = backwardLayout)]
    pub fn backward_layout(&mut self) -> Result<String, JsValue> {
        answer(self.session.backward_layout())
    }

    /// Op `id` in full (JSON), with `node`: the node of the last layout that shows it.
    pub fn op(&self, id: u32) -> Result<String, JsValue> {
        #[derive(Serialize)]
        struct WithNode<T> {
            #[serde(flatten)]
            detail: T,
            node: Option<u32>,
        }
        answer(self.session.op(id).map(|detail| WithNode {
            detail,
            node: self.session.node_of(id),
        }))
    }

    /// The ops `expression` matches (JSON), with `nodes`: the nodes of the last layout showing
    /// them.
    pub fn search(&self, expression: &str) -> Result<String, JsValue> {
        #[derive(Serialize)]
        struct WithNodes<T> {
            #[serde(flatten)]
            result: T,
            nodes: Vec<u32>,
        }
        answer(self.session.search(expression).map(|result| {
            let nodes = self.session.nodes_of(&result.ops);
            WithNodes { result, nodes }
        }))
    }

    /// The nodes of the last layout that show any of `ops`.
    #[wasm_bindgen(js_name = nodesOf)]
    pub fn nodes_of(&self, ops: &[u32]) -> Vec<u32> {
        self.session.nodes_of(ops)
    }

    /// Statistics, histogram and heatmap of op `id`'s value from its first bytes (JSON).
    pub fn value(&self, id: u32, bytes: &[u8]) -> Result<String, JsValue> {
        answer(self.session.value(id, bytes))
    }
}
