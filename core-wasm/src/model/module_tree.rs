//! Modules, their calls, and parameters.

use crate::dtype::Dtype;
use crate::model::OpId;
use serde::{Deserialize, Serialize};

/// A module object of the model. A module reachable under several addresses (a shared module)
/// has one record whose `all_addresses` lists every alias, primary first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub all_addresses: Vec<String>,
    pub class_name: String,
    /// A list, tuple or dict of modules: a record of its own, never called.
    pub container: bool,
    pub training: bool,
    /// Parent module by primary address (None for the root).
    pub parent: Option<u32>,
    pub children: Vec<u32>,
    /// Indices into `Trace::params`.
    pub params: Vec<u32>,
    /// Indices into `Trace::module_calls`, in call order.
    pub calls: Vec<u32>,
}

impl Module {
    /// The primary address (`self` for the root).
    pub fn address(&self) -> &str {
        self.all_addresses.first().map_or("", String::as_str)
    }

    /// Whether `address` names this module under any alias.
    pub fn answers_to(&self, address: &str) -> bool {
        self.all_addresses.iter().any(|alias| alias == address)
    }
}

/// One call of a module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleCall {
    /// Index into `Trace::modules`.
    pub module: u32,
    /// 1-based: the n-th call of that module.
    pub call_number: u32,
    /// The enclosing call (None for the root call).
    pub parent_call: Option<u32>,
    /// Ops that ran inside the call, at any depth: `first_op..end_op` in capture order.
    pub first_op: OpId,
    pub end_op: OpId,
    /// Ops whose values the call returned.
    pub outputs: Vec<OpId>,
}

/// A parameter of the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub address: String,
    /// Index into `Trace::modules` of the owning module.
    pub module: u32,
    pub shape: Vec<u64>,
    pub dtype: Dtype,
    pub trainable: bool,
    /// Ops that read it.
    pub users: Vec<OpId>,
}
