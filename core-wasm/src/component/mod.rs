//! The WIT exports (`wit/torchlens.wit`), compiled only for the WASI component build. Each
//! export is a thin call into the core; `convert` maps core types onto the WIT types.

mod convert;

wit_bindgen::generate!({
    path: "../wit",
    world: "torchlens-core",
});

use crate::build::CaptureSession as CoreSession;
use crate::model::Trace as CoreTrace;
use crate::selectors::{self, CapturePlan};
use convert::{
    core_error, decisions, graph_layout, header_info, layout_view, manifest, module_infos, op_info,
    options, param_infos, selector, selector_to_wit, summary_rows, trace_info, where_results,
};
use exports::torchlens::core::core::{
    CaptureSession, Guest, GuestCaptureSession, GuestTrace, Trace,
};
use std::cell::RefCell;
use std::rc::Rc;
use torchlens::core::types as wit;

/// The component's implementation of the `core` interface.
struct Component;

/// A finished trace inside the component (interior mutability: `keep-payloads` edits it
/// through a borrowed handle).
pub struct TraceResource {
    /// Shared with the core's kept trace when a repeated capture reused it
    /// (`build::repeat_cache`): a change makes the handle's own copy first.
    trace: RefCell<Rc<CoreTrace>>,
}

/// A capture in progress. `RefCell<Option<..>>` because `finish` consumes the session.
pub struct SessionResource {
    session: RefCell<Option<CoreSession>>,
}

fn trace_handle(trace: impl Into<Rc<CoreTrace>>) -> Trace {
    Trace::new(TraceResource {
        trace: RefCell::new(trace.into()),
    })
}

impl GuestTrace for TraceResource {
    fn from_body(body: Vec<u8>) -> Result<Trace, wit::CoreError> {
        crate::tlspec::trace_from_body(&body)
            .map(trace_handle)
            .map_err(core_error)
    }

    fn info(&self) -> wit::TraceInfo {
        trace_info(&self.trace.borrow())
    }

    fn ops(&self, start: u32, count: u32) -> Vec<wit::OpInfo> {
        let trace = self.trace.borrow();
        let begin = (start as usize).min(trace.ops.len());
        let end = begin.saturating_add(count as usize).min(trace.ops.len());
        (begin..end).map(|op| op_info(&trace, op)).collect()
    }

    fn find_label(&self, label: String) -> Option<u32> {
        self.trace.borrow().find_label(&label)
    }

    fn layers(&self) -> Vec<wit::LayerInfo> {
        self.trace
            .borrow()
            .layers
            .iter()
            .map(|layer| wit::LayerInfo {
                label: layer.label.to_string(),
                op_type: layer.op_type.to_string(),
                type_index: layer.type_index,
                step_index: layer.step_index,
                ops: layer.ops.to_vec(),
            })
            .collect()
    }

    fn modules(&self) -> Vec<wit::ModuleInfo> {
        module_infos(&self.trace.borrow())
    }

    fn params(&self) -> Vec<wit::ParamInfo> {
        param_infos(&self.trace.borrow())
    }

    fn summary(&self) -> Vec<wit::SummaryRow> {
        summary_rows(&self.trace.borrow())
    }

    fn summary_table(&self) -> String {
        crate::query::summary_table(&self.trace.borrow())
    }

    fn ancestors(&self, op: u32) -> Vec<u32> {
        crate::query::ancestors(&self.trace.borrow(), op)
    }

    fn descendants(&self, op: u32) -> Vec<u32> {
        crate::query::descendants(&self.trace.borrow(), op)
    }

    fn select(
        &self,
        selector_value: wit::Selector,
        results: Vec<wit::WhereResult>,
    ) -> Result<Vec<u32>, wit::CoreError> {
        selectors::evaluate(
            &self.trace.borrow(),
            &selector(selector_value),
            &where_results(results),
        )
        .map_err(core_error)
    }

    fn keep_payloads(&self, slots: Vec<u64>) {
        Rc::make_mut(&mut self.trace.borrow_mut()).keep_payloads(&slots);
    }

    fn body(&self) -> Vec<u8> {
        crate::tlspec::trace_to_body(&self.trace.borrow())
    }

    fn set_backward(&self, graph: Option<String>) -> Result<(), wit::CoreError> {
        let backward = graph
            .as_deref()
            .map(crate::model::BackwardGraph::from_json)
            .transpose()
            .map_err(core_error)?;
        let mut trace = self.trace.borrow_mut();
        if let Some(backward) = &backward {
            backward.validate(&trace).map_err(core_error)?;
        }
        Rc::make_mut(&mut trace).backward = backward;
        Ok(())
    }

    fn backward(&self) -> Option<String> {
        self.trace
            .borrow()
            .backward
            .as_ref()
            .map(crate::model::BackwardGraph::to_json)
    }

    fn encode(&self, value: wit::Manifest) -> Result<wit::EncodedLayout, wit::CoreError> {
        let layout = crate::tlspec::encode_layout(&self.trace.borrow(), &manifest(value))
            .map_err(core_error)?;
        Ok(convert::encoded_layout(layout))
    }

    fn layout(&self, view: wit::LayoutView) -> Result<wit::GraphLayout, wit::CoreError> {
        crate::layout::layout(&self.trace.borrow(), &layout_view(view))
            .map(graph_layout)
            .map_err(core_error)
    }

    fn svg(&self, view: wit::LayoutView) -> Result<String, wit::CoreError> {
        crate::layout::layout(&self.trace.borrow(), &layout_view(view))
            .map(|layout| crate::layout::render_svg(&layout))
            .map_err(core_error)
    }
}

fn finished_session_error() -> wit::CoreError {
    core_error(crate::CoreError::new(
        crate::ErrorKind::InvalidEvents,
        "session_finished",
        "the capture session was already finished",
        "start a new capture session",
    ))
}

impl GuestCaptureSession for SessionResource {
    fn start(
        trace_options: wit::TraceOptions,
        plan: Option<wit::Selector>,
    ) -> Result<CaptureSession, wit::CoreError> {
        let plan = plan
            .map(|value| CapturePlan::compile(selector(value)))
            .transpose()
            .map_err(core_error)?;
        Ok(CaptureSession::new(SessionResource {
            session: RefCell::new(Some(CoreSession::new(options(trace_options), plan))),
        }))
    }

    fn ingest(&self, batch: Vec<u8>) -> Result<Vec<wit::Decision>, wit::CoreError> {
        let mut session = self.session.borrow_mut();
        let session = session.as_mut().ok_or_else(finished_session_error)?;
        session
            .ingest_postcard(&batch)
            .map(decisions)
            .map_err(core_error)
    }

    fn mark_stopped(&self, reason: String, frontier: Vec<u64>) -> Result<(), wit::CoreError> {
        let mut session = self.session.borrow_mut();
        let session = session.as_mut().ok_or_else(finished_session_error)?;
        session
            .builder_mut()
            .mark_stopped_at_values(reason, &frontier)
            .map_err(core_error)
    }

    fn mark_unverified(&self, reason: String) {
        if let Some(session) = self.session.borrow_mut().as_mut() {
            session.builder_mut().mark_unverified(reason);
        }
    }

    fn live_plan(&self) -> Result<Option<wit::LivePlan>, wit::CoreError> {
        let session = self.session.borrow();
        let session = session.as_ref().ok_or_else(finished_session_error)?;
        session
            .live_plan()
            .map(|plan| plan.map(convert::live_plan))
            .map_err(core_error)
    }

    fn add_rule(&self, value: wit::Selector) -> Result<u32, wit::CoreError> {
        let mut session = self.session.borrow_mut();
        let session = session.as_mut().ok_or_else(finished_session_error)?;
        session.add_rule(selector(value)).map_err(core_error)
    }

    fn rule_plan(&self, rule: u32) -> Result<wit::LivePlan, wit::CoreError> {
        let session = self.session.borrow();
        let session = session.as_ref().ok_or_else(finished_session_error)?;
        session
            .rule_live_plan(rule)
            .map(convert::live_plan)
            .map_err(core_error)
    }

    fn rule_matches(&self, rule: u32, value: u64) -> Result<Option<bool>, wit::CoreError> {
        let session = self.session.borrow();
        let session = session.as_ref().ok_or_else(finished_session_error)?;
        session.rule_matches(rule, value).map_err(core_error)
    }

    fn finish(session: CaptureSession) -> Result<(Trace, Vec<wit::Decision>), wit::CoreError> {
        let resource: SessionResource = session.into_inner();
        let session = resource
            .session
            .into_inner()
            .ok_or_else(finished_session_error)?;
        let (trace, last) = session.finish_shared().map_err(core_error)?;
        Ok((trace_handle(trace), decisions(last)))
    }
}

impl Guest for Component {
    type Trace = TraceResource;
    type CaptureSession = SessionResource;

    fn op_type(func_name: String) -> String {
        crate::build::naming::op_type(&func_name)
    }

    fn escape_terminal_text(text: String) -> String {
        crate::terminal_text::escape_for_terminal(&text).into_owned()
    }

    fn classify_selector(value: wit::Selector) -> Result<wit::SelectorClass, wit::CoreError> {
        let value = selector(value);
        value.validate().map_err(core_error)?;
        Ok(match value.class() {
            selectors::SelectorClass::Static => wit::SelectorClass::Static,
            selectors::SelectorClass::Temporal => wit::SelectorClass::Temporal,
            selectors::SelectorClass::ValueDependent => wit::SelectorClass::ValueDependent,
        })
    }

    fn parse_selector(expression: String) -> Result<wit::Selector, wit::CoreError> {
        selectors::parse_expression(&expression)
            .map(selector_to_wit)
            .map_err(core_error)
    }

    fn fold_validation(
        decisions: Vec<wit::OpDecision>,
        runtime_capture_available: bool,
    ) -> wit::ValidationStatus {
        convert::validation_status(crate::validation::fold(
            &convert::op_decisions(decisions),
            runtime_capture_available,
        ))
    }

    fn tlspec_header_length(first_bytes: Vec<u8>) -> Result<u64, wit::CoreError> {
        crate::tlspec::header_length(&first_bytes).map_err(core_error)
    }

    fn parse_tlspec_header(
        header: Vec<u8>,
        file_length: u64,
    ) -> Result<wit::HeaderInfo, wit::CoreError> {
        crate::tlspec::parse_header(&header, file_length)
            .map(header_info)
            .map_err(core_error)
    }

    fn decode_tlspec(
        header: Vec<u8>,
        body: Vec<u8>,
        file_length: u64,
    ) -> Result<(wit::HeaderInfo, Trace), wit::CoreError> {
        let info = crate::tlspec::parse_header(&header, file_length).map_err(core_error)?;
        let trace = crate::tlspec::decode_body(&info, &body).map_err(core_error)?;
        Ok((header_info(info), trace_handle(trace)))
    }

    fn refusal_codes() -> Vec<wit::RefusalCodeInfo> {
        crate::contract::REFUSAL_CODES
            .iter()
            .map(|entry| wit::RefusalCodeInfo {
                code: entry.code.to_string(),
                owner: entry.owner.to_string(),
                meaning: entry.meaning.to_string(),
            })
            .collect()
    }

    fn validation_reasons() -> Vec<wit::ValidationReasonInfo> {
        crate::contract::VALIDATION_REASONS
            .iter()
            .map(|entry| wit::ValidationReasonInfo {
                code: entry.code.to_string(),
                meaning: entry.meaning.to_string(),
            })
            .collect()
    }

    fn capabilities() -> Vec<wit::CapabilityInfo> {
        crate::contract::CAPABILITIES
            .iter()
            .map(|entry| wit::CapabilityInfo {
                name: entry.name.to_string(),
                refusal: entry.refusal.to_string(),
                meaning: entry.meaning.to_string(),
            })
            .collect()
    }

    fn register_backend(declaration: wit::BackendDeclaration) -> Result<(), wit::CoreError> {
        crate::contract::register(&convert::declaration(declaration)).map_err(core_error)
    }

    fn gate(
        declaration: wit::BackendDeclaration,
        capability: String,
    ) -> Result<wit::GateOutcome, wit::CoreError> {
        match crate::contract::gate(&convert::declaration(declaration), &capability) {
            Ok(crate::contract::GateOutcome::Admitted) => Ok(wit::GateOutcome::Admitted),
            Ok(crate::contract::GateOutcome::Refused { code }) => {
                Ok(wit::GateOutcome::Refused(code.to_string()))
            }
            Err(error) => Err(core_error(error)),
        }
    }

    fn version() -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    fn build_id() -> String {
        crate::BUILD_ID.to_string()
    }
}

export!(Component);
