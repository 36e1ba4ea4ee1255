//! Evaluation of a selector over a range of ops of a trace, finished or still being built.

use super::truth::{kleene_or, TruthMask};
use super::{split_call_suffix, Selector, SelectorNode};
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::model::{OpId, Trace};

/// The host's answer for one value-dependent node: which ops its predicate accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhereResult {
    pub predicate: u32,
    pub matched: Vec<OpId>,
}

/// Whether `selector` matches op `op` of a trace still being built (`complete` false) or
/// finished: `None` while the events so far cannot tell (an open call's outputs, ops to come).
pub fn decide_op(
    trace: &Trace,
    selector: &Selector,
    op: OpId,
    complete: bool,
) -> CoreResult<Option<bool>> {
    let context = Context {
        trace,
        complete,
        where_results: &[],
    };
    let (value, known) = context
        .node(selector, selector.root, op, op.saturating_add(1))?
        .at(op);
    Ok(known.then_some(value))
}

/// Facts the evaluation may rely on.
pub(crate) struct Context<'a> {
    pub trace: &'a Trace,
    /// True for a finished trace: nothing is pending.
    pub complete: bool,
    pub where_results: &'a [WhereResult],
}

/// Evaluates a selector over a finished trace and returns the matched op ids in capture order.
/// Value-dependent nodes need the host's `where_results`.
pub fn evaluate(
    trace: &Trace,
    selector: &Selector,
    where_results: &[WhereResult],
) -> CoreResult<Vec<OpId>> {
    selector.validate()?;
    let context = Context {
        trace,
        complete: true,
        where_results,
    };
    let mask = context.node(selector, selector.root, 0, trace.ops.len() as u32)?;
    Ok(mask
        .value
        .iter()
        .enumerate()
        .filter(|(_, value)| **value)
        .map(|(offset, _)| offset as OpId)
        .collect())
}

impl Context<'_> {
    /// The mask of node `index` over ops `start..end`.
    pub(crate) fn node(
        &self,
        selector: &Selector,
        index: u32,
        start: u32,
        end: u32,
    ) -> CoreResult<TruthMask> {
        let len = end.saturating_sub(start) as usize;
        let node = selector.nodes.get(index as usize).ok_or_else(|| {
            CoreError::new(
                ErrorKind::InvalidSelector,
                "selector_root_out_of_range",
                format!("node {index} does not exist"),
                "build selectors with the tl.* helpers",
            )
        })?;
        Ok(match node {
            SelectorNode::Func(name) => self.by_func(name, start, len),
            SelectorNode::Label(label) => self.by_label(label, start, len),
            SelectorNode::LabelContains(text) => self.by_label_substring(text, start, len),
            SelectorNode::InModule(address) => self.in_module(address, start, len),
            SelectorNode::Module(address) => self.module_boundary(address, start, len),
            SelectorNode::And(parts) | SelectorNode::Or(parts) => {
                let is_and = matches!(node, SelectorNode::And(_));
                let mut mask = TruthMask::constant(start, len, is_and);
                for &part in parts {
                    let part_mask = self.node(selector, part, start, end)?;
                    if is_and {
                        mask.and_with(&part_mask);
                    } else {
                        mask.or_with(&part_mask);
                    }
                }
                mask
            }
            SelectorNode::Not(inner) => {
                let mut mask = self.node(selector, *inner, start, end)?;
                mask.negate();
                mask
            }
            SelectorNode::FollowedBy {
                first,
                then,
                within,
            } => {
                let op_count = self.trace.ops.len() as u32;
                let window_end = end.saturating_add(*within).min(op_count);
                let mut mask = self.node(selector, *first, start, end)?;
                let later = self.node(selector, *then, start, window_end)?;
                let mut window = TruthMask::constant(start, len, false);
                for offset in 0..len {
                    let op = start + offset as u32;
                    let mut any = (false, true);
                    for next in op + 1..=op.saturating_add(*within) {
                        let fact = if next < op_count {
                            later.at(next)
                        } else {
                            // An op not captured yet may still match.
                            (false, self.complete)
                        };
                        any = kleene_or(any, fact);
                    }
                    (window.value[offset], window.known[offset]) = any;
                }
                mask.and_with(&window);
                mask
            }
            SelectorNode::PrecededBy {
                first,
                before,
                within,
            } => {
                let window_start = start.saturating_sub(*within);
                let mut mask = self.node(selector, *first, start, end)?;
                let earlier = self.node(selector, *before, window_start, end)?;
                let mut window = TruthMask::constant(start, len, false);
                for offset in 0..len {
                    let op = start + offset as u32;
                    let mut any = (false, true);
                    for previous in op.saturating_sub(*within)..op {
                        any = kleene_or(any, earlier.at(previous));
                    }
                    (window.value[offset], window.known[offset]) = any;
                }
                mask.and_with(&window);
                mask
            }
            SelectorNode::DownstreamOf(seed) => self.downstream_of(selector, *seed, start, end)?,
            SelectorNode::UpstreamOf(seed) => self.upstream_of(selector, *seed, start, end)?,
            SelectorNode::Where(predicate) => self.by_where(*predicate, start, len)?,
        })
    }

    /// Ops of `start..end` that an op matching `seed` reaches. A parent always precedes its child
    /// (the builder appends ops in capture order; the decoder refuses files where it does not),
    /// so one pass in id order settles every op: it is reached when a parent is a seed or is
    /// reached itself. Everything an op depends on is recorded before it, so the answer is known
    /// during capture as soon as the seed's answers for the op's ancestors are.
    fn downstream_of(
        &self,
        selector: &Selector,
        seed: u32,
        start: u32,
        end: u32,
    ) -> CoreResult<TruthMask> {
        let len = end.saturating_sub(start) as usize;
        let last = end.min(self.trace.ops.len() as u32);
        let seeds = self.node(selector, seed, 0, last)?;
        let mut reached = TruthMask::constant(0, last as usize, false);
        for (op, record) in self.trace.ops.range(0, last as usize).enumerate() {
            let mut fact = (false, true);
            for edge in record.parents.iter().filter(|edge| (edge.op as usize) < op) {
                fact = kleene_or(fact, kleene_or(seeds.at(edge.op), reached.at(edge.op)));
            }
            (reached.value[op], reached.known[op]) = fact;
        }
        let mut mask = TruthMask::constant(start, len, false);
        for op in start..last {
            let offset = (op - start) as usize;
            (mask.value[offset], mask.known[offset]) = reached.at(op);
        }
        Ok(mask)
    }

    /// Ops of `start..end` that reach an op matching `seed`. Only later ops can be reached, so one
    /// pass from the last op down to `start` carries each op's answer to its parents. During
    /// capture an op not known to reach a seed yet may still be read by an op to come: it stays
    /// undecided until the trace is complete.
    fn upstream_of(
        &self,
        selector: &Selector,
        seed: u32,
        start: u32,
        end: u32,
    ) -> CoreResult<TruthMask> {
        let len = end.saturating_sub(start) as usize;
        let count = self.trace.ops.len() as u32;
        let first = start.min(count);
        let seeds = self.node(selector, seed, first, count)?;
        let mut reaching = TruthMask::constant(first, (count - first) as usize, false);
        for op in (first..count).rev() {
            let through = kleene_or(seeds.at(op), reaching.at(op));
            for edge in &self.trace.ops[op as usize].parents {
                if edge.op >= first && edge.op < op {
                    let offset = (edge.op - first) as usize;
                    let fact = (reaching.value[offset], reaching.known[offset]);
                    (reaching.value[offset], reaching.known[offset]) = kleene_or(fact, through);
                }
            }
        }
        if !self.complete {
            for (value, known) in reaching.value.iter().zip(reaching.known.iter_mut()) {
                *known &= *value;
            }
        }
        let mut mask = TruthMask::constant(start, len, false);
        for op in first..end.min(count) {
            let offset = (op - start) as usize;
            (mask.value[offset], mask.known[offset]) = reaching.at(op);
        }
        Ok(mask)
    }

    fn ops(&self, start: u32, len: usize) -> crate::model::TableIter<'_, crate::model::Op> {
        let begin = start as usize;
        self.trace.ops.range(begin, begin.saturating_add(len))
    }

    fn by_func(&self, name: &str, start: u32, len: usize) -> TruthMask {
        let wanted_type = crate::build::naming::op_type(name);
        let matching: Vec<bool> = self
            .trace
            .func_names
            .iter()
            .map(|func| {
                func.name == name || &*func.op_type == name || *func.op_type == *wanted_type
            })
            .collect();
        let mut mask = TruthMask::constant(start, len, false);
        for (offset, op) in self.ops(start, len).enumerate() {
            mask.value[offset] = matching.get(op.func as usize).copied().unwrap_or(false);
        }
        mask
    }

    fn by_label(&self, label: &str, start: u32, len: usize) -> TruthMask {
        let (layer_label, pass) = match label.rsplit_once(':') {
            Some((layer, pass)) => match pass.parse::<u32>() {
                Ok(pass) => (layer, Some(pass)),
                Err(_) => (label, None),
            },
            None => (label, None),
        };
        let mut mask = TruthMask::constant(start, len, false);
        let Some(layer) = self
            .trace
            .layers
            .iter()
            .position(|layer| &*layer.label == layer_label)
        else {
            return mask;
        };
        for (offset, op) in self.ops(start, len).enumerate() {
            mask.value[offset] =
                op.layer as usize == layer && pass.is_none_or(|pass| pass == op.pass);
        }
        mask
    }

    fn by_label_substring(&self, text: &str, start: u32, len: usize) -> TruthMask {
        let needle = text.to_lowercase();
        let mut mask = TruthMask::constant(start, len, false);
        let mut live_label = String::new();
        for (offset, op) in self.ops(start, len).enumerate() {
            if !op.label.is_empty() {
                mask.value[offset] = op.label.to_lowercase().contains(&needle);
                continue;
            }
            // During capture the `:pass` suffix is certain from the second pass on; a first pass
            // gains `:1` if the layer runs again, so it is decided only when both spellings agree.
            live_label.clear();
            if let Some(layer) = self.trace.layers.get(op.layer as usize) {
                live_label.push_str(&layer.label.to_lowercase());
            }
            if op.pass > 1 {
                live_label.push_str(&format!(":{}", op.pass));
            }
            let matches = live_label.contains(&needle);
            mask.value[offset] = matches;
            if op.pass == 1 && !self.complete {
                live_label.push_str(":1");
                mask.known[offset] = live_label.contains(&needle) == matches;
            }
        }
        mask
    }

    /// Module calls whose module answers to `address` (and the call number, when given).
    fn matching_calls(&self, text: &str) -> Vec<u32> {
        let (address, call_number) = split_call_suffix(text);
        self.trace
            .module_calls
            .iter()
            .enumerate()
            .filter(|(_, call)| {
                call_number.is_none_or(|number| number == call.call_number)
                    && self
                        .trace
                        .modules
                        .get(call.module as usize)
                        .is_some_and(|module| module.answers_to(address))
            })
            .map(|(index, _)| index as u32)
            .collect()
    }

    fn in_module(&self, address: &str, start: u32, len: usize) -> TruthMask {
        let mut mask = TruthMask::constant(start, len, false);
        let end = start + len as u32;
        for call in self.matching_calls(address) {
            let record = &self.trace.module_calls[call as usize];
            let from = record.first_op.max(start);
            let to = record.end_op.min(end);
            for op in from..to {
                mask.value[(op - start) as usize] = true;
            }
        }
        mask
    }

    fn module_boundary(&self, address: &str, start: u32, len: usize) -> TruthMask {
        let mut mask = TruthMask::constant(start, len, false);
        let end = start + len as u32;
        for call in self.matching_calls(address) {
            let record = &self.trace.module_calls[call as usize];
            let open = record.end_op == OpId::MAX;
            if open && !self.complete {
                // The call's outputs are only known at its exit.
                for op in record.first_op.max(start)..end {
                    mask.known[(op - start) as usize] = false;
                }
                continue;
            }
            for &op in &record.outputs {
                if op >= start && op < end {
                    mask.value[(op - start) as usize] = true;
                }
            }
        }
        mask
    }

    fn by_where(&self, predicate: u32, start: u32, len: usize) -> CoreResult<TruthMask> {
        let Some(result) = self
            .where_results
            .iter()
            .find(|result| result.predicate == predicate)
        else {
            return Err(CoreError::new(
                ErrorKind::InvalidSelector,
                "selector_value_dependent_unresolved",
                format!("value-dependent predicate {predicate} has no host result"),
                "evaluate the predicate on the host and pass its matches with the selector",
            ));
        };
        let mut mask = TruthMask::constant(start, len, false);
        let end = start + len as u32;
        for &op in &result.matched {
            if op >= start && op < end {
                mask.value[(op - start) as usize] = true;
            }
        }
        Ok(mask)
    }
}
