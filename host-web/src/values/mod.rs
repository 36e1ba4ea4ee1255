//! What the viewer shows of a saved value: statistics, a histogram and, for 2-D and image-like
//! values, a heatmap. The page reads the payload's bytes from the file (the core only says where
//! they lie) and hands them here.

mod decode;
mod heatmap;
mod stats;

pub use decode::ElementReader;
pub use heatmap::{heatmap, Heatmap, MAX_CELLS};
pub use stats::{statistics, Histogram, Statistics, BINS};

use crate::error::{WebError, WebResult};
use serde::Serialize;
use torchlens_core::dtype::Dtype;

/// Most payload bytes the page reads for one value; a larger value is summarized from its
/// first elements, and the view says so.
pub const MAX_READ_BYTES: u64 = 64 << 20;

/// How many of a payload's `length` bytes to read: all of them up to [`MAX_READ_BYTES`],
/// rounded down to whole elements.
pub fn read_length(dtype: &Dtype, length: u64) -> u64 {
    let item = ElementReader::for_dtype(dtype).map_or(1, |reader| reader.size as u64);
    let capped = length.min(MAX_READ_BYTES);
    capped - capped % item
}

/// The summary of one saved value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueSummary {
    /// The value's logical dtype.
    pub dtype: String,
    /// The value's logical shape.
    pub shape: Vec<u64>,
    /// Elements the value has, and how many were read (fewer for values over the read cap).
    pub elements_total: u64,
    /// Elements read (fewer than `elements_total` for values over the read cap).
    pub elements_read: u64,
    /// True for complex values: the numbers are magnitudes.
    pub magnitude: bool,
    /// Statistics and histogram of the elements read.
    pub statistics: Statistics,
    /// A picture of 2-D and image-like values.
    pub heatmap: Option<Heatmap>,
}

/// Summarizes the first elements of a value of `dtype` and logical `shape`, given its first
/// `bytes` (whole elements) out of `total_bytes`.
pub fn summarize(
    dtype: &Dtype,
    shape: &[u64],
    bytes: &[u8],
    total_bytes: u64,
) -> WebResult<ValueSummary> {
    let reader = ElementReader::for_dtype(dtype).ok_or_else(|| {
        WebError::viewer(
            "viewer_dtype_unreadable",
            format!("values of dtype {dtype} cannot be shown"),
            "read this payload with the Python package instead",
        )
    })?;
    if bytes.len() as u64 > total_bytes || !bytes.len().is_multiple_of(reader.size) {
        return Err(WebError::viewer(
            "viewer_payload_length",
            format!(
                "got {} payload bytes for a value of {total_bytes} bytes of {} byte elements",
                bytes.len(),
                reader.size
            ),
            "read whole elements from the offset the header gives",
        ));
    }
    let elements_read = (bytes.len() / reader.size) as u64;
    let statistics = statistics(|| reader.values(bytes));
    Ok(ValueSummary {
        dtype: dtype.name().to_string(),
        shape: shape.to_vec(),
        elements_total: total_bytes / reader.size as u64,
        elements_read,
        magnitude: reader.magnitude,
        statistics,
        heatmap: heatmap(shape, reader.values(bytes), elements_read),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|value| value.to_le_bytes())
            .collect()
    }

    #[test]
    fn a_matrix_gets_statistics_and_a_heatmap() {
        let bytes = f32_bytes(&[-1.0, 0.0, 1.0, 2.0]);
        let summary = summarize(&Dtype::Float32, &[2, 2], &bytes, 16).unwrap();
        assert_eq!((summary.elements_total, summary.elements_read), (4, 4));
        assert_eq!(summary.statistics.mean, Some(0.5));
        assert_eq!(summary.heatmap.unwrap().cells[3], Some(2.0));
    }

    #[test]
    fn a_partial_read_is_reported_and_misaligned_bytes_are_refused() {
        let bytes = f32_bytes(&[1.0, 2.0]);
        let summary = summarize(&Dtype::Float32, &[4, 4], &bytes, 64).unwrap();
        assert_eq!((summary.elements_total, summary.elements_read), (16, 2));
        assert!(summary.heatmap.is_none());
        let error = summarize(&Dtype::Float32, &[4], &bytes[..3], 16).unwrap_err();
        assert_eq!(error.code, "viewer_payload_length");
        let error = summarize(&Dtype::Other("q".into()), &[1], &[], 0).unwrap_err();
        assert_eq!(error.code, "viewer_dtype_unreadable");
    }

    #[test]
    fn reads_are_capped_to_whole_elements() {
        assert_eq!(read_length(&Dtype::Float32, 10), 8);
        assert_eq!(
            read_length(&Dtype::Float64, MAX_READ_BYTES * 3),
            MAX_READ_BYTES
        );
    }
}
