//! Bounds on the manifest's free-text fields, checked before anything parses them. The core
//! keeps the fields as text, but every host reads `codec_metadata` as JSON (Python with
//! `json.loads`, whose cost grows with the text and whose recursion ends in a bare
//! `RecursionError`), so a file from anyone must not be able to hand a host an unbounded
//! document. The same bounds apply when writing, so no writer makes a file its readers refuse.

use super::errors::{limit, malformed};
use super::limits::{MAX_CODEC_METADATA_BYTES, MAX_CODEC_METADATA_DEPTH, MAX_MANIFEST_FIELD_BYTES};
use crate::error::{CoreError, CoreResult, ErrorKind};

/// The remedy for a file whose manifest breaks a bound.
const REMEDY_BOUND: &str = "the file was not written by TorchLens or was altered; save the trace \
                            again from its source";

/// Checks the short named fields (backend, versions, policy, save level, creation time).
pub(crate) fn check_short_field(key: &str, value: &str) -> CoreResult<()> {
    if value.len() > MAX_MANIFEST_FIELD_BYTES {
        return Err(limit(
            "tlspec_manifest_field_too_large",
            format!(
                "the manifest's {key} takes {} bytes, more than the {MAX_MANIFEST_FIELD_BYTES} allowed",
                value.len()
            ),
            REMEDY_BOUND,
        ));
    }
    Ok(())
}

/// Checks `codec_metadata` read from a file: at most [`MAX_CODEC_METADATA_BYTES`], nested at
/// most [`MAX_CODEC_METADATA_DEPTH`] deep (counted by a scan that allocates nothing, before any
/// parse), and, when not empty, a JSON object.
pub(crate) fn check_codec_metadata(text: &str) -> CoreResult<()> {
    check_codec_metadata_bounds(text)
        .map_err(|(code, message)| limit(code, message, REMEDY_BOUND))?;
    if text.is_empty() {
        return Ok(());
    }
    // The depth bound holds, so this parse recurses at most 64 levels and reads at most the
    // size bound.
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(malformed(
            "tlspec_codec_metadata_invalid",
            "the manifest's codec_metadata is JSON but not an object",
            REMEDY_BOUND,
        )),
        Err(error) => Err(malformed(
            "tlspec_codec_metadata_invalid",
            format!("the manifest's codec_metadata is not JSON: {error}"),
            REMEDY_BOUND,
        )),
    }
}

/// Checks `codec_metadata` a host hands the encoder: the same bounds, refused as a request the
/// core cannot honour.
pub(crate) fn check_codec_metadata_to_write(text: &str) -> CoreResult<()> {
    check_codec_metadata_bounds(text).map_err(|(code, message)| {
        CoreError::new(
            ErrorKind::Unsupported,
            code,
            message,
            "record less backend metadata (fewer sharded payloads), or save fewer payloads",
        )
    })
}

/// The size and depth bounds, as a code and a message.
fn check_codec_metadata_bounds(text: &str) -> Result<(), (&'static str, String)> {
    if text.len() > MAX_CODEC_METADATA_BYTES {
        return Err((
            "tlspec_codec_metadata_too_large",
            format!(
                "the manifest's codec_metadata takes {} bytes, more than the {MAX_CODEC_METADATA_BYTES} allowed",
                text.len()
            ),
        ));
    }
    let depth = json_nesting_depth(text);
    if depth > MAX_CODEC_METADATA_DEPTH {
        return Err((
            "tlspec_codec_metadata_too_deep",
            format!(
                "the manifest's codec_metadata nests more than {MAX_CODEC_METADATA_DEPTH} levels deep"
            ),
        ));
    }
    Ok(())
}

/// The deepest nesting of `[` and `{` in JSON text, brackets inside strings not counted. It
/// stops counting once past the bound matters to no one, so it never overflows; malformed text
/// gets some depth, and the parse that follows refuses it.
pub(crate) fn json_nesting_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for byte in text.bytes() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(json_nesting_depth(""), 0);
        assert_eq!(json_nesting_depth("{}"), 1);
        assert_eq!(json_nesting_depth(r#"{"a":[{"b":"[[[[\"{{"}]}"#), 3);
        assert_eq!(json_nesting_depth(&"[".repeat(200_000)), 200_000);
    }

    #[test]
    fn codec_metadata_bounds() {
        assert!(check_codec_metadata("").is_ok());
        assert!(check_codec_metadata(r#"{"jax_prng_keys":{"a":"threefry2x32"}}"#).is_ok());
        let deep = |levels: usize| {
            format!(
                r#"{{"a":{}1{}}}"#,
                "[".repeat(levels - 1),
                "]".repeat(levels - 1)
            )
        };
        assert!(check_codec_metadata(&deep(MAX_CODEC_METADATA_DEPTH)).is_ok());
        let error =
            check_codec_metadata(&deep(MAX_CODEC_METADATA_DEPTH + 1)).expect_err("too deep");
        assert_eq!(error.code, "tlspec_codec_metadata_too_deep");
        assert_eq!(error.kind, ErrorKind::LimitExceeded);
        let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(MAX_CODEC_METADATA_BYTES));
        let error = check_codec_metadata(&big).expect_err("too large");
        assert_eq!(error.code, "tlspec_codec_metadata_too_large");
        for not_an_object in ["[1]", "3", "{", "{\"a\":}"] {
            let error = check_codec_metadata(not_an_object).expect_err(not_an_object);
            assert_eq!(
                error.code, "tlspec_codec_metadata_invalid",
                "{not_an_object}"
            );
        }
    }
}
