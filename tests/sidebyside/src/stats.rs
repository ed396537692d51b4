//! Latency statistics: nearest-rank percentiles over raw samples.
//!
//! Samples are kept raw (milliseconds as `f64`) rather than bucketed: a run
//! has at most a few hundred thousand reconciles, and exact percentiles are
//! easier to trust than histogram interpolation in a comparison.

use serde::{Deserialize, Serialize};

/// Summary of one sample set, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Mean.
    pub mean: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
}

/// The nearest-rank `q`-quantile (0 < q <= 1) of sorted samples.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Summarises `samples` (any order; NaNs are dropped).
pub fn summarize(samples: &[f64]) -> Summary {
    let mut s: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return Summary::default();
    }
    s.sort_by(f64::total_cmp);
    Summary {
        count: s.len(),
        mean: s.iter().sum::<f64>() / s.len() as f64,
        p50: quantile(&s, 0.50),
        p99: quantile(&s, 0.99),
        max: s[s.len() - 1],
    }
}

/// Median of a few repeated measurements (rounds); 0 for none.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `a / b`, or NaN-free 0 when `b` is 0 (printed as "n/a" by the report).
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summarize(&v);
        assert_eq!(s.count, 100);
        assert_eq!(s.p50, 50.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!(s.max, 100.0);
        assert!((s.mean - 50.5).abs() < 1e-9);
        // Order does not matter; NaNs are ignored.
        let mut w = v.clone();
        w.reverse();
        w.push(f64::NAN);
        assert_eq!(summarize(&w), s);
    }

    #[test]
    fn small_and_empty_sets() {
        assert_eq!(summarize(&[]), Summary::default());
        let s = summarize(&[3.0]);
        assert_eq!((s.p50, s.p99, s.max), (3.0, 3.0, 3.0));
        let s = summarize(&[1.0, 10.0]);
        assert_eq!((s.p50, s.p99), (1.0, 10.0));
    }

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
    }
}
