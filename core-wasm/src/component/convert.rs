//! Core types ⇄ WIT types. Kept apart from the exports so each export stays one line of intent.

use super::wit;
use crate::build::ValueDecision;
use crate::error::{CoreError, ErrorKind};
use crate::layout::{GraphLayout, LayoutView, NodeKind};
use crate::model::{OpKind, Trace, TraceOptions};
use crate::selectors::{LiveNode, LivePlan, ModuleTerm, Selector, SelectorNode, WhereResult};
use crate::tlspec::{EncodedLayout, HeaderInfo, Manifest};
use crate::validation::{OpDecision, ReplayOutcome, ValidationState, ValidationStatus};

pub fn core_error(error: CoreError) -> wit::CoreError {
    let info = wit::ErrorInfo {
        code: error.code.to_string(),
        message: error.message,
        remedy: error.remedy.to_string(),
    };
    match error.kind {
        ErrorKind::InvalidEvents => wit::CoreError::InvalidEvents(info),
        ErrorKind::InvalidSelector => wit::CoreError::InvalidSelector(info),
        ErrorKind::MalformedFile => wit::CoreError::MalformedFile(info),
        ErrorKind::UnsupportedVersion => wit::CoreError::UnsupportedVersion(info),
        ErrorKind::LimitExceeded => wit::CoreError::LimitExceeded(info),
        ErrorKind::InvalidTrace => wit::CoreError::InvalidTrace(info),
        ErrorKind::NotFound => wit::CoreError::NotFound(info),
        ErrorKind::Unsupported => wit::CoreError::Unsupported(info),
    }
}

pub fn options(value: wit::TraceOptions) -> TraceOptions {
    TraceOptions {
        recurrence_detection: value.recurrence_detection,
        compute_input_output_distances: value.compute_input_output_distances,
    }
}

/// A live plan as the WIT record.
pub fn live_plan(plan: LivePlan) -> wit::LivePlan {
    let term = |term: ModuleTerm| wit::ModuleTerm {
        modules: term.modules,
        root: term.root,
        call: term.call,
    };
    wit::LivePlan {
        nodes: plan
            .nodes
            .into_iter()
            .map(|node| match node {
                LiveNode::Func { name, op_type } => wit::LiveNode::Func((name, op_type)),
                LiveNode::InModule(value) => wit::LiveNode::InModule(term(value)),
                LiveNode::ModuleOutput(value) => wit::LiveNode::ModuleOutput(term(value)),
                LiveNode::Label { op_type } => wit::LiveNode::Label(op_type),
                LiveNode::LabelContains { needle } => wit::LiveNode::LabelContains(needle),
                LiveNode::And(parts) => wit::LiveNode::And(parts),
                LiveNode::Or(parts) => wit::LiveNode::Or(parts),
                LiveNode::Not(inner) => wit::LiveNode::Not(inner),
                LiveNode::FollowedBy { first, within } => {
                    wit::LiveNode::FollowedBy((first, within))
                }
                LiveNode::PrecededBy { first } => wit::LiveNode::PrecededBy(first),
                LiveNode::Graph => wit::LiveNode::Graph,
            })
            .collect(),
        root: plan.root,
    }
}

pub fn selector(value: wit::Selector) -> Selector {
    let nodes = value
        .nodes
        .into_iter()
        .map(|node| match node {
            wit::SelectorNode::Func(name) => SelectorNode::Func(name),
            wit::SelectorNode::Label(label) => SelectorNode::Label(label),
            wit::SelectorNode::LabelContains(text) => SelectorNode::LabelContains(text),
            wit::SelectorNode::Module(address) => SelectorNode::Module(address),
            wit::SelectorNode::InModule(address) => SelectorNode::InModule(address),
            wit::SelectorNode::And(parts) => SelectorNode::And(parts),
            wit::SelectorNode::Or(parts) => SelectorNode::Or(parts),
            wit::SelectorNode::Not(inner) => SelectorNode::Not(inner),
            wit::SelectorNode::FollowedBy(temporal) => SelectorNode::FollowedBy {
                first: temporal.first,
                then: temporal.other,
                within: temporal.within,
            },
            wit::SelectorNode::PrecededBy(temporal) => SelectorNode::PrecededBy {
                first: temporal.first,
                before: temporal.other,
                within: temporal.within,
            },
            wit::SelectorNode::DownstreamOf(seed) => SelectorNode::DownstreamOf(seed),
            wit::SelectorNode::UpstreamOf(seed) => SelectorNode::UpstreamOf(seed),
            wit::SelectorNode::Where(predicate) => SelectorNode::Where(predicate),
        })
        .collect();
    Selector {
        nodes,
        root: value.root,
    }
}

/// The WIT form of a core selector (for `parse-selector`).
pub fn selector_to_wit(value: Selector) -> wit::Selector {
    let nodes = value
        .nodes
        .into_iter()
        .map(|node| match node {
            SelectorNode::Func(name) => wit::SelectorNode::Func(name),
            SelectorNode::Label(label) => wit::SelectorNode::Label(label),
            SelectorNode::LabelContains(text) => wit::SelectorNode::LabelContains(text),
            SelectorNode::Module(address) => wit::SelectorNode::Module(address),
            SelectorNode::InModule(address) => wit::SelectorNode::InModule(address),
            SelectorNode::And(parts) => wit::SelectorNode::And(parts),
            SelectorNode::Or(parts) => wit::SelectorNode::Or(parts),
            SelectorNode::Not(inner) => wit::SelectorNode::Not(inner),
            SelectorNode::FollowedBy {
                first,
                then,
                within,
            } => wit::SelectorNode::FollowedBy(wit::Temporal {
                first,
                other: then,
                within,
            }),
            SelectorNode::PrecededBy {
                first,
                before,
                within,
            } => wit::SelectorNode::PrecededBy(wit::Temporal {
                first,
                other: before,
                within,
            }),
            SelectorNode::DownstreamOf(seed) => wit::SelectorNode::DownstreamOf(seed),
            SelectorNode::UpstreamOf(seed) => wit::SelectorNode::UpstreamOf(seed),
            SelectorNode::Where(predicate) => wit::SelectorNode::Where(predicate),
        })
        .collect();
    wit::Selector {
        nodes,
        root: value.root,
    }
}

pub fn where_results(values: Vec<wit::WhereResult>) -> Vec<WhereResult> {
    values
        .into_iter()
        .map(|value| WhereResult {
            predicate: value.predicate,
            matched: value.matched,
        })
        .collect()
}

pub fn decisions(values: Vec<ValueDecision>) -> Vec<wit::Decision> {
    values
        .into_iter()
        .map(|decision| wit::Decision {
            value: decision.value,
            selected: decision.selected,
        })
        .collect()
}

fn op_kind(kind: OpKind) -> wit::OpKind {
    match kind {
        OpKind::Compute => wit::OpKind::Compute,
        OpKind::Input => wit::OpKind::Input,
        OpKind::Output => wit::OpKind::Output,
        OpKind::Constant => wit::OpKind::Constant,
        OpKind::Buffer => wit::OpKind::Buffer,
        OpKind::LiteralProducer => wit::OpKind::LiteralProducer,
    }
}

fn edges(values: &[crate::model::Edge]) -> Vec<wit::Edge> {
    values
        .iter()
        .map(|edge| wit::Edge {
            op: edge.op,
            position: edge.position,
        })
        .collect()
}

pub fn op_info(trace: &Trace, index: usize) -> wit::OpInfo {
    let op = &trace.ops[index];
    let layer = trace.layer_of(op);
    wit::OpInfo {
        id: index as u32,
        label: op.label.to_string(),
        layer_label: layer
            .map(|layer| layer.label.to_string())
            .unwrap_or_default(),
        pass: op.pass,
        num_passes: layer.map_or(1, |layer| layer.ops.len() as u32),
        func_name: trace.func_name(op).to_string(),
        op_type: trace.op_type(op).to_string(),
        kind: op_kind(op.kind),
        name: op.name().map(str::to_string),
        parents: edges(&op.parents),
        children: edges(&op.children),
        params: op
            .params
            .iter()
            .filter_map(|&param| trace.params.get(param as usize))
            .map(|param| param.address.clone())
            .collect(),
        module_stack: trace
            .call_stack(op)
            .map(|call| trace.call_name(call))
            .collect(),
        shape: op.shape.to_vec(),
        dtype: op.dtype.name().to_string(),
        output_index: op.output_index(),
        in_place: op.in_place,
        payload: op.payload(),
        attributes: op.attributes().to_vec(),
        source: op.source.as_ref().map(|source| wit::SourceLocation {
            file: source.file.to_string(),
            line: source.line,
            function: source.function.to_string(),
        }),
        site_key: trace.site_key(op),
        distances: op.distances().map(|distances| wit::Distances {
            min_from_input: distances.min_from_input,
            max_from_input: distances.max_from_input,
            min_to_output: distances.min_to_output,
            max_to_output: distances.max_to_output,
        }),
        input_ancestors: op.input_ancestors().to_vec(),
        output_descendants: op.output_descendants().to_vec(),
        edits: op
            .edits()
            .iter()
            .map(|edit| wit::EditRecord {
                rule: edit.rule.clone(),
                action: edit.action.clone(),
                timing: edit.timing.clone(),
            })
            .collect(),
        extras: op.extras().to_vec(),
        value: op.value(),
    }
}

pub fn trace_info(trace: &Trace) -> wit::TraceInfo {
    wit::TraceInfo {
        options: wit::TraceOptions {
            recurrence_detection: trace.options.recurrence_detection,
            compute_input_output_distances: trace.options.compute_input_output_distances,
        },
        op_count: trace.ops.len() as u32,
        layer_count: trace.layers.len() as u32,
        module_count: trace.modules.len() as u32,
        param_count: trace.params.len() as u32,
        inputs: trace.inputs.clone(),
        outputs: trace.outputs.clone(),
        capture_verified: trace.capture.verified,
        capture_reason: trace.capture.reason.clone(),
        stop_reason: trace.capture.stop_reason.clone(),
        frontier: trace.capture.frontier.clone(),
        extras: trace.extras.clone(),
    }
}

pub fn module_infos(trace: &Trace) -> Vec<wit::ModuleInfo> {
    let address = |index: u32| {
        trace
            .modules
            .get(index as usize)
            .map(|module| module.address().to_string())
            .unwrap_or_default()
    };
    trace
        .modules
        .iter()
        .map(|module| wit::ModuleInfo {
            address: module.address().to_string(),
            all_addresses: module.all_addresses.clone(),
            class_name: module.class_name.clone(),
            container: module.container,
            training: module.training,
            parent: module.parent.map(address),
            children: module
                .children
                .iter()
                .map(|&child| address(child))
                .collect(),
            params: module
                .params
                .iter()
                .filter_map(|&param| trace.params.get(param as usize))
                .map(|param| param.address.clone())
                .collect(),
            calls: module
                .calls
                .iter()
                .filter_map(|&call| {
                    trace
                        .module_calls
                        .get(call as usize)
                        .map(|record| (call, record))
                })
                .map(|(call, record)| wit::ModuleCallInfo {
                    name: trace.call_name(call),
                    call_number: record.call_number,
                    first_op: record.first_op,
                    end_op: record.end_op,
                    outputs: record.outputs.clone(),
                })
                .collect(),
        })
        .collect()
}

pub fn param_infos(trace: &Trace) -> Vec<wit::ParamInfo> {
    trace
        .params
        .iter()
        .map(|param| wit::ParamInfo {
            address: param.address.clone(),
            module: trace
                .modules
                .get(param.module as usize)
                .map(|module| module.address().to_string())
                .unwrap_or_default(),
            shape: param.shape.clone(),
            dtype: param.dtype.name().to_string(),
            trainable: param.trainable,
            users: param.users.clone(),
        })
        .collect()
}

pub fn summary_rows(trace: &Trace) -> Vec<wit::SummaryRow> {
    crate::query::summary_rows(trace)
        .into_iter()
        .map(|row| wit::SummaryRow {
            op: row.op,
            label: row.label,
            func_name: row.func_name,
            module: row.module,
            shape: row.shape,
            dtype: row.dtype,
            parents: row.parents,
            saved: row.saved,
            param_count: row.param_count,
        })
        .collect()
}

pub fn op_decisions(values: Vec<wit::OpDecision>) -> Vec<OpDecision> {
    values
        .into_iter()
        .map(|value| OpDecision {
            op: value.op,
            outcome: match value.outcome {
                wit::ReplayOutcome::Passed => ReplayOutcome::Passed,
                wit::ReplayOutcome::Failed => ReplayOutcome::Failed,
                wit::ReplayOutcome::NotReplayable => ReplayOutcome::NotReplayable,
                wit::ReplayOutcome::Leaf => ReplayOutcome::Leaf,
            },
            reason: value.reason,
        })
        .collect()
}

pub fn validation_status(status: ValidationStatus) -> wit::ValidationStatus {
    wit::ValidationStatus {
        state: match status.state {
            ValidationState::Available => wit::ValidationState::Available,
            ValidationState::Passed => wit::ValidationState::Passed,
            ValidationState::Failed => wit::ValidationState::Failed,
            ValidationState::Unverified => wit::ValidationState::Unverified,
            ValidationState::Unavailable => wit::ValidationState::Unavailable,
        },
        reason: status.reason,
        first_failed_op: status.first_failed_op,
        replayed: status.replayed,
        failed: status.failed,
        not_replayable: status.not_replayable,
    }
}

pub fn manifest(value: wit::Manifest) -> Manifest {
    Manifest {
        backend: value.backend,
        backend_runtime: value.backend_runtime,
        backend_version: value.backend_version,
        payload_policy: value.payload_policy,
        save_level: value.save_level,
        created_at: value.created_at,
        codec_metadata: value.codec_metadata,
        payload_checksums: value.payload_checksums,
        extra: value.extra,
    }
}

fn manifest_out(value: Manifest) -> wit::Manifest {
    wit::Manifest {
        backend: value.backend,
        backend_runtime: value.backend_runtime,
        backend_version: value.backend_version,
        payload_policy: value.payload_policy,
        save_level: value.save_level,
        created_at: value.created_at,
        codec_metadata: value.codec_metadata,
        payload_checksums: value.payload_checksums,
        extra: value.extra,
    }
}

pub fn encoded_layout(layout: EncodedLayout) -> wit::EncodedLayout {
    wit::EncodedLayout {
        prefix: layout.prefix,
        payloads: layout
            .payloads
            .into_iter()
            .map(|placement| wit::PayloadPlacement {
                op: placement.op,
                slot: placement.slot,
                label: placement.label,
                offset: placement.offset,
                length: placement.length,
                dtype: placement.dtype,
            })
            .collect(),
        crc_table_offset: layout.crc_table_offset,
        file_length: layout.file_length,
    }
}

pub fn header_info(info: HeaderInfo) -> wit::HeaderInfo {
    wit::HeaderInfo {
        manifest: manifest_out(info.manifest),
        format_version: info.format_version,
        body_offset: info.body_offset,
        body_length: info.body_length,
        payloads: info
            .payloads
            .into_iter()
            .map(|entry| wit::PayloadEntry {
                label: entry.label,
                dtype: entry.dtype,
                storage_dtype: entry.storage_dtype,
                shape: entry.shape,
                offset: entry.offset,
                length: entry.length,
            })
            .collect(),
        crc_table_offset: info.crc_table_offset,
    }
}

pub fn layout_view(value: wit::LayoutView) -> LayoutView {
    match value {
        wit::LayoutView::Full => LayoutView::Full,
        wit::LayoutView::Collapsed(expanded) => LayoutView::Collapsed { expanded },
        wit::LayoutView::Backward => LayoutView::Backward,
    }
}

pub fn graph_layout(layout: GraphLayout) -> wit::GraphLayout {
    wit::GraphLayout {
        width: layout.width,
        height: layout.height,
        nodes: layout
            .nodes
            .into_iter()
            .map(|node| wit::LayoutNode {
                id: node.id,
                kind: match node.kind {
                    NodeKind::Op => wit::NodeKind::Op,
                    NodeKind::Module => wit::NodeKind::Module,
                },
                label: node.label,
                detail: node.detail,
                ops: node.ops,
                module_address: node.module_address,
                x: node.x,
                y: node.y,
                width: node.width,
                height: node.height,
            })
            .collect(),
        edges: layout
            .edges
            .into_iter()
            .map(|edge| wit::LayoutEdge {
                from: edge.from,
                to: edge.to,
                points: edge.points,
            })
            .collect(),
    }
}

pub fn declaration(value: wit::BackendDeclaration) -> crate::contract::BackendDeclaration {
    crate::contract::BackendDeclaration {
        name: value.name,
        capabilities: value.capabilities,
        implementations: value.implementations,
    }
}
