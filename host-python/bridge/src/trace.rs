//! A finished trace held by the core, and the queries the Python `Trace` makes on it.

use crate::convert;
use crate::engine::SharedInstance;
use crate::errors::IntoPyResult;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use torchlens_host_runtime::{wit, ResourceAny};

/// One payload's place in a `.tlspec`: `(op, slot, label, offset, length, dtype)`.
type PlacementRow = (u32, u64, String, u64, u64, String);
/// What `encode` returns: prefix bytes, placements, the CRC-32 table's offset, file length.
type EncodedRows<'py> = (Bound<'py, PyBytes>, Vec<PlacementRow>, Option<u64>, u64);

/// Ops one `ops` call copies out of the component at most (an op's record is a few hundred
/// bytes, so a page is a few megabytes).
pub const OPS_PER_CALL: u32 = 16_384;

/// A trace inside the core.
#[pyclass(module = "torchlens._native")]
pub struct Trace {
    instance: SharedInstance,
    handle: ResourceAny,
}

impl Trace {
    pub fn new(instance: SharedInstance, handle: ResourceAny) -> Self {
        Self { instance, handle }
    }
}

#[pymethods]
impl Trace {
    /// Counts, inputs, outputs and capture status, as a dict.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = self.handle;
        let info = self
            .instance
            .with(|core| core.trace_info(handle))
            .py_result(py)?;
        convert::trace_info(py, &info)
    }

    /// Ops `start .. start + count` as dicts, fetched a page at a time: one call copies at most
    /// [`OPS_PER_CALL`] ops out of the component, which bounds what any call moves across the
    /// boundary however large the trace (wasmtime stops a call that copies too much).
    #[pyo3(signature = (start=0, count=u32::MAX))]
    fn ops<'py>(&self, py: Python<'py>, start: u32, count: u32) -> PyResult<Bound<'py, PyList>> {
        let handle = self.handle;
        let list = PyList::empty(py);
        let end = start.saturating_add(count);
        let mut next = start;
        while next < end {
            let page = (end - next).min(OPS_PER_CALL);
            let ops = self
                .instance
                .with(|core| {
                    core.call_infallible(|guest, store| {
                        guest.trace().call_ops(store, handle, next, page)
                    })
                })
                .py_result(py)?;
            for op in &ops {
                list.append(convert::op_info(py, op)?)?;
            }
            if (ops.len() as u32) < page {
                break;
            }
            next += page;
        }
        Ok(list)
    }

    /// The op a label names, or None.
    fn find_label(&self, py: Python<'_>, label: &str) -> PyResult<Option<u32>> {
        let handle = self.handle;
        self.instance
            .with(|core| {
                core.call_infallible(|guest, store| {
                    guest.trace().call_find_label(store, handle, label)
                })
            })
            .py_result(py)
    }

    /// Layers as `(label, op_type, [op ids])`.
    fn layers(&self, py: Python<'_>) -> PyResult<Vec<(String, String, Vec<u32>)>> {
        let handle = self.handle;
        let layers = self
            .instance
            .with(|core| {
                core.call_infallible(|guest, store| guest.trace().call_layers(store, handle))
            })
            .py_result(py)?;
        Ok(layers
            .into_iter()
            .map(|layer| (layer.label, layer.op_type, layer.ops))
            .collect())
    }

    /// Modules as dicts.
    fn modules<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let handle = self.handle;
        let modules = self
            .instance
            .with(|core| {
                core.call_infallible(|guest, store| guest.trace().call_modules(store, handle))
            })
            .py_result(py)?;
        let list = PyList::empty(py);
        for module in &modules {
            list.append(convert::module_info(py, module)?)?;
        }
        Ok(list)
    }

    /// Parameters as dicts.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let handle = self.handle;
        let params = self
            .instance
            .with(|core| {
                core.call_infallible(|guest, store| guest.trace().call_params(store, handle))
            })
            .py_result(py)?;
        let list = PyList::empty(py);
        for param in &params {
            list.append(convert::param_info(py, param)?)?;
        }
        Ok(list)
    }

    /// The summary table as text.
    fn summary_table(&self, py: Python<'_>) -> PyResult<String> {
        let handle = self.handle;
        self.instance
            .with(|core| {
                core.call_infallible(|guest, store| guest.trace().call_summary_table(store, handle))
            })
            .py_result(py)
    }

    /// Ops a selector matches. `where_results` are `(predicate id, [op ids])`.
    #[pyo3(signature = (selector, where_results=Vec::new()))]
    fn select(
        &self,
        py: Python<'_>,
        selector: &Bound<'_, PyAny>,
        where_results: Vec<(u32, Vec<u32>)>,
    ) -> PyResult<Vec<u32>> {
        let selector = convert::selector(selector)?;
        let where_results: Vec<wit::WhereResult> = where_results
            .into_iter()
            .map(|(predicate, matched)| wit::WhereResult { predicate, matched })
            .collect();
        let handle = self.handle;
        self.instance
            .with(|core| core.select(handle, &selector, &where_results))
            .py_result(py)
    }

    /// Ancestors of an op (every op that reaches it).
    fn ancestors(&self, py: Python<'_>, op: u32) -> PyResult<Vec<u32>> {
        let handle = self.handle;
        self.instance
            .with(|core| {
                core.call_infallible(|guest, store| guest.trace().call_ancestors(store, handle, op))
            })
            .py_result(py)
    }

    /// Descendants of an op (every op it reaches).
    fn descendants(&self, py: Python<'_>, op: u32) -> PyResult<Vec<u32>> {
        let handle = self.handle;
        self.instance
            .with(|core| {
                core.call_infallible(|guest, store| {
                    guest.trace().call_descendants(store, handle, op)
                })
            })
            .py_result(py)
    }

    /// Keeps payload references only for the adapter's payload `slots`; every op whose slot
    /// is not listed loses its payload reference.
    fn keep_payloads(&self, py: Python<'_>, slots: Vec<u64>) -> PyResult<()> {
        let handle = self.handle;
        self.instance
            .with(|core| core.keep_payloads(handle, &slots))
            .py_result(py)
    }

    /// The `.tlspec` layout: `(prefix bytes, [(op, slot, label, offset, length, dtype)],
    /// offset of the payload CRC-32 table or None, file length)`.
    fn encode<'py>(
        &self,
        py: Python<'py>,
        manifest: &Bound<'py, PyAny>,
    ) -> PyResult<EncodedRows<'py>> {
        let manifest = convert::manifest(manifest)?;
        let handle = self.handle;
        let layout = self
            .instance
            .with(|core| core.encode(handle, &manifest))
            .py_result(py)?;
        let placements = layout
            .payloads
            .into_iter()
            .map(|placement| {
                (
                    placement.op,
                    placement.slot,
                    placement.label,
                    placement.offset,
                    placement.length,
                    placement.dtype,
                )
            })
            .collect();
        Ok((
            PyBytes::new(py, &layout.prefix),
            placements,
            layout.crc_table_offset,
            layout.file_length,
        ))
    }

    /// The graph as SVG: the full graph, (`collapsed=True`) the module overview with the
    /// modules in `expanded` opened, or (`backward=True`) the backward graph.
    #[pyo3(signature = (collapsed=false, expanded=Vec::new(), backward=false))]
    fn svg(
        &self,
        py: Python<'_>,
        collapsed: bool,
        expanded: Vec<String>,
        backward: bool,
    ) -> PyResult<String> {
        let view = if backward {
            wit::LayoutView::Backward
        } else if collapsed {
            wit::LayoutView::Collapsed(expanded)
        } else {
            wit::LayoutView::Full
        };
        let handle = self.handle;
        self.instance
            .with(|core| core.call(|guest, store| guest.trace().call_svg(store, handle, &view)))
            .py_result(py)
    }

    /// Sets the trace's backward pass from the JSON of a backward graph (None removes it).
    #[pyo3(signature = (graph=None))]
    fn set_backward(&self, py: Python<'_>, graph: Option<String>) -> PyResult<()> {
        let handle = self.handle;
        self.instance
            .with(|core| {
                core.call(|guest, store| {
                    guest
                        .trace()
                        .call_set_backward(store, handle, graph.as_deref())
                })
            })
            .py_result(py)
    }

    /// The trace's backward pass as JSON, or None.
    fn backward_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let handle = self.handle;
        self.instance
            .with(|core| {
                core.call_infallible(|guest, store| guest.trace().call_backward(store, handle))
            })
            .py_result(py)
    }

    /// The trace body (postcard bytes).
    fn body<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let handle = self.handle;
        let body = self.instance.with(|core| core.body(handle)).py_result(py)?;
        Ok(PyBytes::new(py, &body))
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        // A dead instance took the resource with it; nothing to free then.
        let _ = self.instance.lock().drop_resource(self.handle);
    }
}
