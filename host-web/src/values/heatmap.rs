//! A small picture of a 2-D or image-like value: its last two dimensions, first slice of the
//! leading ones, averaged down to at most [`MAX_CELLS`] cells a side.

use serde::Serialize;

/// Largest number of cells on either side of the picture.
pub const MAX_CELLS: usize = 96;

/// A grid of cell means, row-major; `None` marks a cell with no finite element.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Heatmap {
    /// Which part of the value is drawn, e.g. `[0, 0, :, :]`.
    pub slice: String,
    /// Rows and columns of the value's slice.
    pub height: u64,
    /// Columns of the value's slice.
    pub width: u64,
    /// Rows and columns of the grid.
    pub rows: usize,
    /// Columns of the grid.
    pub cols: usize,
    /// Cell means, row-major (`rows` × `cols`).
    pub cells: Vec<Option<f64>>,
}

/// The heatmap of `values` (C-order elements of a value of `shape`), or `None` for a value of
/// rank below 2, an empty one, or one whose first slice was not read in full.
pub fn heatmap(shape: &[u64], values: impl Iterator<Item = f64>, read: u64) -> Option<Heatmap> {
    let rank = shape.len();
    if rank < 2 {
        return None;
    }
    let (height, width) = (shape[rank - 2], shape[rank - 1]);
    let plane = height.checked_mul(width)?;
    if plane == 0 || plane > read {
        return None;
    }
    let rows = usize::try_from(height).ok()?.min(MAX_CELLS);
    let cols = usize::try_from(width).ok()?.min(MAX_CELLS);
    let mut sums = vec![0.0f64; rows * cols];
    let mut counts = vec![0u32; rows * cols];
    for (index, value) in values.take(usize::try_from(plane).ok()?).enumerate() {
        if !value.is_finite() {
            continue;
        }
        let index = index as u64;
        let (row, col) = (index / width, index % width);
        // Cell of an element: scale its coordinates into the grid.
        let cell_row = (row * rows as u64 / height) as usize;
        let cell_col = (col * cols as u64 / width) as usize;
        let cell = cell_row * cols + cell_col;
        sums[cell] += value;
        counts[cell] += 1;
    }
    let cells = sums
        .iter()
        .zip(&counts)
        .map(|(&sum, &count)| (count > 0).then(|| sum / f64::from(count)))
        .collect();
    let mut parts: Vec<String> = vec!["0".to_string(); rank - 2];
    parts.extend([":".to_string(), ":".to_string()]);
    Some(Heatmap {
        slice: format!("[{}]", parts.join(", ")),
        height,
        width,
        rows,
        cols,
        cells,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_matrix_maps_cell_for_cell() {
        let values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let map = heatmap(&[2, 3], values.into_iter(), 6).unwrap();
        assert_eq!((map.rows, map.cols), (2, 3));
        assert_eq!(map.cells[5], Some(6.0));
        assert_eq!(map.slice, "[:, :]");
    }

    #[test]
    fn a_large_image_is_averaged_and_leading_dims_take_slice_zero() {
        // [2, 192, 192]: slice 0 is all ones, slice 1 all twos; 2x2 blocks average to 1.
        let plane = 192 * 192;
        let values = (0..2 * plane).map(|i| if i < plane { 1.0 } else { 2.0 });
        let map = heatmap(&[2, 192, 192], values, 2 * plane as u64).unwrap();
        assert_eq!((map.rows, map.cols), (MAX_CELLS, MAX_CELLS));
        assert!(map.cells.iter().all(|cell| *cell == Some(1.0)));
        assert_eq!(map.slice, "[0, :, :]");
    }

    #[test]
    fn vectors_empty_values_and_partial_reads_have_no_picture() {
        assert!(heatmap(&[5], [1.0; 5].into_iter(), 5).is_none());
        assert!(heatmap(&[0, 4], std::iter::empty(), 0).is_none());
        assert!(heatmap(&[4, 4], [1.0; 8].into_iter(), 8).is_none());
    }

    #[test]
    fn non_finite_cells_are_marked() {
        let map = heatmap(&[1, 2], [f64::NAN, 1.0].into_iter(), 2).unwrap();
        assert_eq!(map.cells, [None, Some(1.0)]);
    }
}
