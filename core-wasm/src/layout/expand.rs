//! Which module calls a collapsed view opens.
//!
//! An entry of [`super::LayoutView::Collapsed`]'s `expanded` list is either a module address
//! (any alias), which opens every call of that module, or `address:call`, which opens just
//! that call (`block:17`), so a viewer can open one box of a model that calls the same module
//! thousands of times without drawing all of them.

use crate::model::Module;
use std::collections::HashSet;

/// The `expanded` entries, split into whole modules and single calls.
pub(crate) struct Expanded<'a> {
    addresses: HashSet<&'a str>,
    calls: HashSet<(&'a str, u32)>,
}

impl<'a> Expanded<'a> {
    /// Reads the entries. An entry whose text after the last `:` is a number names one call;
    /// any other entry names a module address.
    pub(crate) fn new(entries: &'a [String]) -> Self {
        let mut addresses = HashSet::new();
        let mut calls = HashSet::new();
        for entry in entries {
            match entry
                .rsplit_once(':')
                .and_then(|(address, call)| Some((address, call.parse::<u32>().ok()?)))
            {
                Some(call) => calls.insert(call),
                None => addresses.insert(entry.as_str()),
            };
        }
        Self { addresses, calls }
    }

    /// Whether call number `call_number` of `module` is open.
    pub(crate) fn opens(&self, module: &Module, call_number: u32) -> bool {
        module.all_addresses.iter().any(|alias| {
            self.addresses.contains(alias.as_str())
                || self.calls.contains(&(alias.as_str(), call_number))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(addresses: &[&str]) -> Module {
        Module {
            all_addresses: addresses.iter().map(|a| a.to_string()).collect(),
            class_name: "Block".to_string(),
            container: false,
            training: false,
            parent: Some(0),
            children: Vec::new(),
            params: Vec::new(),
            calls: Vec::new(),
        }
    }

    fn entries(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| item.to_string()).collect()
    }

    #[test]
    fn an_address_opens_every_call() {
        let list = entries(&["block"]);
        let expanded = Expanded::new(&list);
        let block = module(&["block"]);
        assert!(expanded.opens(&block, 1));
        assert!(expanded.opens(&block, 900));
        assert!(!expanded.opens(&module(&["other"]), 1));
    }

    #[test]
    fn an_address_with_a_call_number_opens_that_call_only() {
        let list = entries(&["block:2"]);
        let expanded = Expanded::new(&list);
        let block = module(&["block"]);
        assert!(expanded.opens(&block, 2));
        assert!(!expanded.opens(&block, 1));
        assert!(!expanded.opens(&block, 3));
    }

    #[test]
    fn any_alias_matches_and_a_non_numeric_suffix_is_an_address() {
        let list = entries(&["shared.b:1", "odd:name"]);
        let expanded = Expanded::new(&list);
        let shared = module(&["shared.a", "shared.b"]);
        assert!(expanded.opens(&shared, 1));
        assert!(!expanded.opens(&shared, 2));
        assert!(expanded.opens(&module(&["odd:name"]), 5));
    }
}
