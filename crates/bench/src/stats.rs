//! Small statistics used everywhere: percentiles (two documented interpolations), summaries of
//! repeat runs, and the noise rule of `compare`.

use serde::{Deserialize, Serialize};

/// How a percentile is read from sorted samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PercentileMethod {
    /// Linear interpolation between closest ranks (numpy's default, Excel `PERCENTILE.INC`,
    /// Hyndman–Fan type 7): position `h = (n − 1)·p/100` in the 0-based sorted array, value
    /// `x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋])`.
    #[default]
    Linear,
    /// Nearest rank: the smallest sample with at least `p`% of samples ≤ it, i.e. the
    /// 1-based rank `⌈p/100 · n⌉` (rank 1 for p = 0).
    NearestRank,
}

impl std::str::FromStr for PercentileMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "linear" => Ok(Self::Linear),
            "nearest-rank" | "nearest" => Ok(Self::NearestRank),
            _ => Err(format!(
                "unknown percentile method {s:?} (linear or nearest-rank)"
            )),
        }
    }
}

impl std::fmt::Display for PercentileMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Linear => "linear",
            Self::NearestRank => "nearest-rank",
        })
    }
}

/// The `p`th percentile (0..=100) of ascending `sorted` samples; `None` when empty or `p` is
/// out of range / NaN.
pub fn percentile_sorted(sorted: &[f64], p: f64, method: PercentileMethod) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let n = sorted.len();
    match method {
        PercentileMethod::Linear => {
            let h = (n - 1) as f64 * p / 100.0;
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            let (a, b) = (*sorted.get(lo)?, *sorted.get(hi)?);
            Some(a + (h - lo as f64) * (b - a))
        }
        PercentileMethod::NearestRank => {
            let rank = ((p / 100.0) * n as f64).ceil() as usize;
            sorted.get(rank.clamp(1, n) - 1).copied()
        }
    }
}

/// Sort a copy of finite samples ascending (NaN/inf are dropped).
pub fn sorted_finite(samples: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Summary of repeat runs of one metric: median and spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one sample.
    pub stdev: f64,
}

impl Summary {
    /// `None` when there is no finite sample.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let s = sorted_finite(samples);
        let n = s.len();
        let first = *s.first()?;
        let last = *s.last()?;
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let pct = |p| percentile_sorted(&s, p, PercentileMethod::Linear).unwrap_or(first);
        Some(Summary {
            n,
            min: first,
            q1: pct(25.0),
            median: pct(50.0),
            q3: pct(75.0),
            max: last,
            mean,
            stdev: var.sqrt(),
        })
    }

    /// Relative spread (max − min) / median, in percent; 0 when the median is 0.
    pub fn spread_pct(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / self.median.abs() * 100.0
        }
    }
}

/// Whether two sets of repeat runs differ beyond run-to-run noise. The rule is deliberately
/// simple: both sides need at least two runs, and their ranges `[min, max]` must not overlap.
/// With single runs nothing can be said (`None`).
pub fn beyond_noise(a: &Summary, b: &Summary) -> Option<bool> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    Some(a.max < b.min || b.max < a.min)
}

/// Whether a unit measures time (lower is better) rather than a rate.
pub fn is_time_unit(unit: &str) -> bool {
    matches!(
        unit.trim(),
        "s" | "ms" | "us" | "µs" | "ns" | "sec" | "seconds"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_matches_numpy() {
        // numpy.percentile([1,2,3,4], 25) == 1.75; 50 -> 2.5; 99 -> 3.97
        let v = [1.0, 2.0, 3.0, 4.0];
        let m = PercentileMethod::Linear;
        assert_eq!(percentile_sorted(&v, 25.0, m), Some(1.75));
        assert_eq!(percentile_sorted(&v, 50.0, m), Some(2.5));
        assert!((percentile_sorted(&v, 99.0, m).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(percentile_sorted(&v, 0.0, m), Some(1.0));
        assert_eq!(percentile_sorted(&v, 100.0, m), Some(4.0));
    }

    #[test]
    fn nearest_rank() {
        // Wikipedia example: 15, 20, 35, 40, 50: P30 = 20, P40 = 20, P50 = 35, P100 = 50
        let v = [15.0, 20.0, 35.0, 40.0, 50.0];
        let m = PercentileMethod::NearestRank;
        assert_eq!(percentile_sorted(&v, 5.0, m), Some(15.0));
        assert_eq!(percentile_sorted(&v, 30.0, m), Some(20.0));
        assert_eq!(percentile_sorted(&v, 40.0, m), Some(20.0));
        assert_eq!(percentile_sorted(&v, 50.0, m), Some(35.0));
        assert_eq!(percentile_sorted(&v, 100.0, m), Some(50.0));
        assert_eq!(percentile_sorted(&v, 0.0, m), Some(15.0));
    }

    #[test]
    fn empty_and_bad_p() {
        assert_eq!(percentile_sorted(&[], 50.0, PercentileMethod::Linear), None);
        assert_eq!(
            percentile_sorted(&[1.0], f64::NAN, PercentileMethod::Linear),
            None
        );
        assert_eq!(
            percentile_sorted(&[1.0], 101.0, PercentileMethod::Linear),
            None
        );
    }

    #[test]
    fn summary_and_noise() {
        let a = Summary::of(&[10.0, 11.0, 12.0]).unwrap();
        assert_eq!(a.median, 11.0);
        assert_eq!(a.min, 10.0);
        assert!((a.stdev - 1.0).abs() < 1e-12);
        let b = Summary::of(&[12.5, 13.0, 14.0]).unwrap();
        assert_eq!(beyond_noise(&a, &b), Some(true));
        let c = Summary::of(&[11.5, 13.0]).unwrap();
        assert_eq!(beyond_noise(&a, &c), Some(false));
        let single = Summary::of(&[20.0]).unwrap();
        assert_eq!(beyond_noise(&a, &single), None);
        assert!(Summary::of(&[f64::NAN]).is_none());
    }

    proptest::proptest! {
        #[test]
        fn percentile_within_bounds(mut v in proptest::collection::vec(-1e6f64..1e6, 1..200), p in 0.0f64..=100.0) {
            v.sort_by(f64::total_cmp);
            for m in [PercentileMethod::Linear, PercentileMethod::NearestRank] {
                let x = percentile_sorted(&v, p, m).unwrap();
                proptest::prop_assert!(x >= v[0] && x <= v[v.len() - 1]);
            }
        }
    }
}
