//! A selector compiled for the adapter's hot path: a small tree of terms the adapter evaluates
//! on each op as it happens, from the op's own record (its function name and the module calls
//! open around it), with no call into the core.
//!
//! Terms whose answer only the core has come out as "ask the core" nodes that say what the core
//! is waiting for, so the adapter holds such a value only as long as it must:
//! - a label is fixed when the core groups the op, so an op whose type could carry the label
//!   waits for the next batch, which the adapter sends at once; every other op is decided;
//! - a module boundary (`module(...)`) is known when the call exits: ops outside every matching
//!   call are decided at once, ops inside wait for the exit (or until the adapter can no longer
//!   name the value as a call's output);
//! - `preceded_by` looks back at ops the core has grouped (decidable once the batch is sent);
//!   `followed_by` waits for `within` more ops;
//! - an influence term (`downstream_of`, `upstream_of`) needs the dataflow graph, which only the
//!   core keeps: the core answers with the batches (for `downstream_of` with the batch that
//!   carries the op, for `upstream_of` once a seed below the op is recorded, at the end of the
//!   capture otherwise), so the adapter holds such a value without sending events early.
//!
//! Module addresses are resolved here to the adapter's own module ids, so the adapter never
//! matches addresses itself.

use super::{split_call_suffix, Selector, SelectorNode};
use crate::build::naming;
use crate::error::CoreResult;
use crate::events::ModuleId;
use crate::model::Trace;

/// The module calls a module term matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleTerm {
    /// The adapter's ids of the modules that answer to the address.
    pub modules: Vec<ModuleId>,
    /// Whether the root call (which the adapter may never have declared) answers to it.
    pub root: bool,
    /// Only this call of each module (1-based), when the selector named one.
    pub call: Option<u32>,
}

/// One term of a live plan; children are indices of earlier nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveNode {
    /// The op's function name is `name`, or its normalized type (the core's `op_type`) is
    /// `op_type`.
    Func {
        name: String,
        op_type: String,
    },
    /// The op runs inside a matching call, at any depth.
    InModule(ModuleTerm),
    /// The op's value is an output of a matching call: undecided while such a call is open
    /// around the op, false otherwise.
    ModuleOutput(ModuleTerm),
    /// A label term: false unless the op's normalized type is `op_type` (every label starts
    /// with its layer's type); otherwise the core decides when it groups the op.
    Label {
        op_type: String,
    },
    /// A label substring term (lower case): true when the op type contains it, undecided when
    /// the label's numbers could complete it, false otherwise.
    LabelContains {
        needle: String,
    },
    And(Vec<u32>),
    Or(Vec<u32>),
    Not(u32),
    /// `first` and, once `within` more ops were captured, the core's answer.
    FollowedBy {
        first: u32,
        within: u32,
    },
    /// `first` and the core's answer (it looks back at ops already grouped).
    PrecededBy {
        first: u32,
    },
    /// An influence term: the core answers from the dataflow graph with a later batch.
    Graph,
}

/// A selector compiled against the modules an adapter declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivePlan {
    pub nodes: Vec<LiveNode>,
    pub root: u32,
}

impl LivePlan {
    /// Compiles `selector` against the modules declared so far (`module_ids` maps the adapter's
    /// module ids to indices of `trace.modules`). A module declared later is not in the plan:
    /// the adapter compiles again after declaring one.
    pub fn compile(
        selector: &Selector,
        trace: &Trace,
        module_ids: impl Iterator<Item = (ModuleId, u32)> + Clone,
    ) -> CoreResult<Self> {
        super::plan::check_plannable(selector)?;
        let module_term = |text: &str| {
            let (address, call) = split_call_suffix(text);
            let answers = |index: u32| {
                trace
                    .modules
                    .get(index as usize)
                    .is_some_and(|module| module.answers_to(address))
            };
            let mut modules: Vec<ModuleId> = module_ids
                .clone()
                .filter(|(_, index)| answers(*index))
                .map(|(id, _)| id)
                .collect();
            modules.sort_unstable();
            ModuleTerm {
                modules,
                root: answers(0),
                call,
            }
        };
        let nodes = selector
            .nodes
            .iter()
            .map(|node| match node {
                SelectorNode::Func(name) => LiveNode::Func {
                    name: name.clone(),
                    op_type: naming::op_type(name),
                },
                SelectorNode::InModule(text) => LiveNode::InModule(module_term(text)),
                SelectorNode::Module(text) => LiveNode::ModuleOutput(module_term(text)),
                SelectorNode::Label(label) => LiveNode::Label {
                    op_type: naming::label_op_type(label).to_string(),
                },
                SelectorNode::LabelContains(text) => LiveNode::LabelContains {
                    needle: text.to_lowercase(),
                },
                SelectorNode::And(parts) => LiveNode::And(parts.clone()),
                SelectorNode::Or(parts) => LiveNode::Or(parts.clone()),
                SelectorNode::Not(inner) => LiveNode::Not(*inner),
                SelectorNode::FollowedBy { first, within, .. } => LiveNode::FollowedBy {
                    first: *first,
                    within: *within,
                },
                SelectorNode::PrecededBy { first, .. } => LiveNode::PrecededBy { first: *first },
                SelectorNode::DownstreamOf(_) | SelectorNode::UpstreamOf(_) => LiveNode::Graph,
                // Excluded above: value-dependent selectors never reach this point.
                SelectorNode::Where(_) => LiveNode::Or(Vec::new()),
            })
            .collect();
        Ok(Self {
            nodes,
            root: selector.root,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::TraceBuilder;
    use crate::events::{ModuleDecl, RawEvent};
    use crate::model::TraceOptions;

    fn declared(modules: &[(ModuleId, &[&str])]) -> TraceBuilder {
        let mut builder = TraceBuilder::new(TraceOptions::default());
        builder
            .ingest(modules.iter().map(|(id, addresses)| {
                RawEvent::Module(ModuleDecl {
                    id: *id,
                    addresses: addresses.iter().map(|text| text.to_string()).collect(),
                    class_name: "M".into(),
                    container: false,
                    training: false,
                })
            }))
            .expect("declarations are valid");
        builder
    }

    fn compile(selector: Selector, builder: &TraceBuilder) -> CoreResult<LivePlan> {
        LivePlan::compile(&selector, builder.partial(), builder.module_ids())
    }

    #[test]
    fn module_terms_name_the_adapters_ids_and_aliases() {
        let builder = declared(&[
            (7, &["self"]),
            (3, &["encoder", "shared"]),
            (9, &["decoder"]),
        ]);
        let plan = compile(
            Selector::leaf(SelectorNode::InModule("shared:2".into())),
            &builder,
        )
        .expect("compiles");
        assert_eq!(
            plan.nodes,
            vec![LiveNode::InModule(ModuleTerm {
                modules: vec![3],
                root: false,
                call: Some(2)
            })]
        );
        let plan = compile(
            Selector::leaf(SelectorNode::Module("self".into())),
            &builder,
        )
        .expect("ok");
        assert_eq!(
            plan.nodes,
            vec![LiveNode::ModuleOutput(ModuleTerm {
                modules: vec![7],
                root: true,
                call: None
            })]
        );
    }

    #[test]
    fn influence_terms_wait_for_the_core() {
        let builder = declared(&[]);
        let plan = compile(
            Selector {
                nodes: vec![
                    SelectorNode::Func("conv2d".into()),
                    SelectorNode::DownstreamOf(0),
                    SelectorNode::Func("relu".into()),
                    SelectorNode::And(vec![1, 2]),
                ],
                root: 3,
            },
            &builder,
        )
        .expect("compiles");
        assert_eq!(plan.nodes[1], LiveNode::Graph);
        assert_eq!(plan.nodes[3], LiveNode::And(vec![1, 2]));
    }

    #[test]
    fn leaves_carry_what_the_adapter_needs_and_where_is_refused() {
        let builder = declared(&[]);
        let plan = compile(
            Selector {
                nodes: vec![
                    SelectorNode::Func("__radd__".into()),
                    SelectorNode::Label("conv2d_3_5:2".into()),
                    SelectorNode::LabelContains("ReLU".into()),
                    SelectorNode::Or(vec![0, 1, 2]),
                ],
                root: 3,
            },
            &builder,
        )
        .expect("compiles");
        assert_eq!(
            plan.nodes[..3],
            [
                LiveNode::Func {
                    name: "__radd__".into(),
                    op_type: "add".into()
                },
                LiveNode::Label {
                    op_type: "conv2d".into()
                },
                LiveNode::LabelContains {
                    needle: "relu".into()
                },
            ]
        );
        let refused = compile(Selector::leaf(SelectorNode::Where(0)), &builder)
            .expect_err("value-dependent selectors have no live plan");
        assert_eq!(refused.code, "selector_value_dependent_in_plan");
    }
}
