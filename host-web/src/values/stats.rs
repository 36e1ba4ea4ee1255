//! Statistics and a histogram of a saved value, in two passes over its elements.

use serde::Serialize;

/// Number of histogram bins.
pub const BINS: usize = 48;

/// Counts and moments of the elements read, plus a histogram of the finite ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Statistics {
    /// Elements read.
    pub count: u64,
    /// Finite elements (the moments, min, max and histogram cover these only).
    pub finite: u64,
    /// NaN elements.
    pub nan: u64,
    /// +inf elements.
    pub positive_infinite: u64,
    /// -inf elements.
    pub negative_infinite: u64,
    /// Elements equal to zero.
    pub zeros: u64,
    /// Smallest finite element; this and the other moments are `None` when no element is
    /// finite.
    pub min: Option<f64>,
    /// Largest finite element.
    pub max: Option<f64>,
    /// Mean of the finite elements.
    pub mean: Option<f64>,
    /// Population standard deviation.
    pub std: Option<f64>,
    /// Histogram of the finite elements.
    pub histogram: Histogram,
}

/// Equal-width bins from `low` to `high`; the last bin includes `high`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    /// Lower edge of the first bin (the smallest finite element).
    pub low: f64,
    /// Upper edge of the last bin (the largest finite element).
    pub high: f64,
    /// Elements per bin.
    pub counts: Vec<u64>,
}

/// Statistics of `values` (called twice: moments first, then the histogram).
pub fn statistics<I>(values: impl Fn() -> I) -> Statistics
where
    I: Iterator<Item = f64>,
{
    let mut count = 0u64;
    let mut finite = 0u64;
    let (mut nan, mut positive_infinite, mut negative_infinite, mut zeros) = (0u64, 0, 0, 0);
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    // Welford's running mean and variance: stable for long tensors of large values.
    let (mut mean, mut m2) = (0.0f64, 0.0f64);
    for value in values() {
        count += 1;
        if value.is_nan() {
            nan += 1;
            continue;
        }
        if value.is_infinite() {
            if value > 0.0 {
                positive_infinite += 1;
            } else {
                negative_infinite += 1;
            }
            continue;
        }
        if value == 0.0 {
            zeros += 1;
        }
        finite += 1;
        min = min.min(value);
        max = max.max(value);
        let delta = value - mean;
        mean += delta / finite as f64;
        m2 += delta * (value - mean);
    }
    let any = finite > 0;
    let histogram = histogram(&values, any.then_some((min, max)));
    Statistics {
        count,
        finite,
        nan,
        positive_infinite,
        negative_infinite,
        zeros,
        min: any.then_some(min),
        max: any.then_some(max),
        mean: any.then_some(mean),
        std: any.then(|| (m2 / finite as f64).sqrt()),
        histogram,
    }
}

fn histogram<I>(values: &impl Fn() -> I, range: Option<(f64, f64)>) -> Histogram
where
    I: Iterator<Item = f64>,
{
    let mut counts = vec![0u64; BINS];
    let Some((low, high)) = range else {
        return Histogram {
            low: 0.0,
            high: 0.0,
            counts,
        };
    };
    let width = high - low;
    for value in values().filter(|value| value.is_finite()) {
        let bin = if width > 0.0 {
            (((value - low) / width) * BINS as f64) as usize
        } else {
            0
        };
        counts[bin.min(BINS - 1)] += 1;
    }
    Histogram { low, high, counts }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_and_counts_of_a_small_vector() {
        let data = [
            1.0,
            2.0,
            3.0,
            4.0,
            0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let stats = statistics(|| data.iter().copied());
        assert_eq!(stats.count, 8);
        assert_eq!(stats.finite, 5);
        assert_eq!(
            (stats.nan, stats.positive_infinite, stats.negative_infinite),
            (1, 1, 1)
        );
        assert_eq!(stats.zeros, 1);
        assert_eq!((stats.min, stats.max), (Some(0.0), Some(4.0)));
        assert_eq!(stats.mean, Some(2.0));
        assert!((stats.std.unwrap() - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(stats.histogram.counts.iter().sum::<u64>(), 5);
        assert_eq!(stats.histogram.counts[0], 1);
        assert_eq!(
            stats.histogram.counts[BINS - 1],
            1,
            "the maximum lands in the last bin"
        );
    }

    #[test]
    fn a_constant_value_fills_one_bin_and_nothing_finite_gives_no_moments() {
        let stats = statistics(|| std::iter::repeat_n(3.0, 10));
        assert_eq!(stats.histogram.counts[0], 10);
        assert_eq!(stats.std, Some(0.0));
        let empty = statistics(|| [f64::NAN].into_iter());
        assert_eq!((empty.min, empty.mean), (None, None));
        assert_eq!(empty.histogram.counts.iter().sum::<u64>(), 0);
    }
}
