//! The site key: which place in the model an op came from, independent of pass grouping.

use serde::{Deserialize, Serialize};

/// Module, op type, output slot and ordinal within the module call. Two ops with the same site
/// key are the same layer run in different passes (when recurrence detection is on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SiteKey {
    /// Index into `Trace::modules` of the innermost module.
    pub module: u32,
    /// Index into `Trace::func_names`.
    pub func: u32,
    /// Output position for multi-output ops, 0 otherwise.
    pub output_slot: u32,
    /// How many earlier ops of the same type and slot ran directly in the same module call.
    pub ordinal: u32,
}
