//! `tlspec ops`: the ops of a trace, or those a selector expression matches.

use crate::error::CliError;
use crate::output::{table, Outcome};
use crate::sandboxed_core::SandboxedCore;
use crate::tlspec_file::OpenedTrace;

/// Runs `ops`.
pub fn run(
    core: &mut SandboxedCore,
    file: &OpenedTrace,
    selector: Option<&str>,
) -> Result<Outcome, CliError> {
    let rows = core.instance().summary(file.trace)?;
    let matched: Option<Vec<u32>> = match selector {
        Some(expression) => {
            let selector = core.instance().parse_selector(expression)?;
            Some(core.instance().select(file.trace, &selector, &[])?)
        }
        None => None,
    };
    let chosen: Vec<_> = match &matched {
        Some(ids) => ids.iter().filter_map(|id| rows.get(*id as usize)).collect(),
        None => rows.iter().collect(),
    };
    let text = table(
        &[
            "label", "function", "module", "shape", "dtype", "parents", "saved",
        ],
        &chosen
            .iter()
            .map(|row| {
                vec![
                    row.label.clone(),
                    row.func_name.clone(),
                    row.module.clone(),
                    row.shape.clone(),
                    row.dtype.clone(),
                    row.parents.join(", "),
                    if row.saved { "yes" } else { "" }.to_owned(),
                ]
            })
            .collect::<Vec<_>>(),
    );
    let json = serde_json::to_value(&chosen).unwrap_or_default();
    Ok(Outcome::success(json, text))
}
