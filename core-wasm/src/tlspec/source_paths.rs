//! How source file paths are written when a trace is saved (`source_paths` in the manifest's
//! extra keys): a file shared with someone else should not carry the writer's home folder.
//!
//! - `relative`: every absolute path is written relative to the deepest folder that holds all
//!   recorded files (a single file keeps just its name). That folder itself is not written.
//!   Paths that are not absolute (`<stdin>`, `<frozen ...>`) are kept.
//! - `none`: no source locations at all.
//! - `absolute`, or no key: the paths as recorded.

use super::manifest::{Manifest, SOURCE_PATHS_KEY};
use crate::error::{CoreError, CoreResult, ErrorKind};
use crate::events::SourceLocation;
use crate::model::{SharedText, Trace};

fn is_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    path.starts_with('/')
        || path.starts_with('\\')
        || (bytes.len() > 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
}

fn is_separator(character: char) -> bool {
    character == '/' || character == '\\'
}

/// The folders of `path` (every component but the last).
fn folders(path: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = path.split(is_separator).collect();
    parts.pop();
    parts
}

/// How many leading folder components all absolute `files` share.
fn common_folder_depth<'a>(files: impl Iterator<Item = &'a str>) -> usize {
    let mut common: Option<Vec<&str>> = None;
    for file in files.filter(|file| is_absolute(file)) {
        let parts = folders(file);
        common = Some(match common {
            None => parts,
            Some(shared) => shared
                .into_iter()
                .zip(parts)
                .take_while(|(left, right)| left == right)
                .map(|(left, _)| left)
                .collect(),
        });
    }
    common.map_or(0, |shared| shared.len())
}

/// `path` without its first `depth` components, joined with `/`.
fn relative(path: &str, depth: usize) -> String {
    path.split(is_separator)
        .skip(depth)
        .collect::<Vec<_>>()
        .join("/")
}

/// The trace to encode when the manifest asks for rewritten sources; `None` to encode the
/// trace as it is.
pub(crate) fn rewritten(trace: &Trace, manifest: &Manifest) -> CoreResult<Option<Trace>> {
    let mode = manifest
        .extra
        .iter()
        .find(|(key, _)| key == SOURCE_PATHS_KEY)
        .map(|(_, value)| value.as_str());
    match mode {
        None | Some("absolute") => Ok(None),
        Some("none") => {
            let mut copy = trace.clone();
            copy.ops.iter_mut().for_each(|op| op.source = None);
            Ok(Some(copy))
        }
        Some("relative") => {
            let depth = common_folder_depth(
                trace
                    .ops
                    .iter()
                    .filter_map(|op| op.source.as_ref())
                    .map(|source| &*source.file),
            );
            let mut copy = trace.clone();
            // Ops of one line keep sharing one location (see `model::SharedText`).
            let mut text = SharedText::default();
            for op in copy.ops.iter_mut() {
                let Some(source) = op.source.as_deref() else {
                    continue;
                };
                if is_absolute(&source.file) {
                    let file = relative(&source.file, depth);
                    op.source = Some(text.location(&SourceLocation {
                        file: file.as_str(),
                        line: source.line,
                        function: &*source.function,
                    }));
                }
            }
            Ok(Some(copy))
        }
        Some(other) => Err(CoreError::new(
            ErrorKind::Unsupported,
            "tlspec_source_paths_invalid",
            format!("source_paths `{other}` is not one of relative, absolute, none"),
            "pass source_paths=\"relative\", \"absolute\" or \"none\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_lose_the_folder_every_file_shares() {
        let files = ["/home/ada/proj/model.py", "/home/ada/proj/lib/layers.py"];
        let depth = common_folder_depth(files.into_iter());
        assert_eq!(relative(files[0], depth), "model.py");
        assert_eq!(relative(files[1], depth), "lib/layers.py");
        assert_eq!(common_folder_depth(["/a/b/c.py"].into_iter()), 3);
        assert_eq!(relative("/a/b/c.py", 3), "c.py");
        assert_eq!(
            common_folder_depth(["<stdin>", "/x/y.py"].into_iter()),
            2,
            "paths that are not absolute do not count"
        );
    }
}
