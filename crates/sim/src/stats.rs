//! A log-linear histogram of non-negative integers (latencies in nanoseconds, counts).
//!
//! 64 sub-buckets per power of two, so any reported quantile is within about 1.6% of the exact
//! value; memory grows only with the largest value seen (at most a few thousand buckets). Used
//! instead of exact sorted vectors because the scale scenarios record hundreds of millions of
//! deliveries.

use serde::Serialize;

const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
const LINEAR: u64 = SUB * 2;

/// A log-linear histogram (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
    min: u64,
}

fn index(value: u64) -> usize {
    if value < LINEAR {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros();
    let shift = exponent - SUB_BITS;
    let top = value >> shift;
    ((u64::from(shift) + 1) * SUB + (top - SUB)) as usize
}

fn lower_bound(index: usize) -> u64 {
    let index = index as u64;
    if index < LINEAR {
        return index;
    }
    let shift = index / SUB - 1;
    let top = index % SUB + SUB;
    top << shift
}

fn upper_bound(index: usize) -> u64 {
    if (index as u64) < LINEAR {
        return index as u64;
    }
    lower_bound(index + 1) - 1
}

/// Quantiles of a histogram, in the histogram's unit divided by `scale`.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    /// Observations.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest observation (exact).
    pub max: f64,
}

impl LogHistogram {
    /// Records one value.
    pub fn record(&mut self, value: u64) {
        let i = index(value);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        if self.total == 0 || value < self.min {
            self.min = value;
        }
        self.total += 1;
        self.sum += u128::from(value);
        self.max = self.max.max(value);
    }

    /// Adds every observation of `other`.
    pub fn merge(&mut self, other: &LogHistogram) {
        if other.total == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (i, c) in other.counts.iter().enumerate() {
            self.counts[i] += c;
        }
        if self.total == 0 || other.min < self.min {
            self.min = other.min;
        }
        self.total += other.total;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Observations recorded.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest value recorded.
    #[must_use]
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` in `[0, 1]` (upper bound of its bucket, capped at the max).
    #[must_use]
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper_bound(i).min(self.max).max(self.min);
            }
        }
        self.max
    }

    /// Mean value.
    #[must_use]
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// Summary with every value divided by `scale` (e.g. 1e6 for nanoseconds to milliseconds).
    #[must_use]
    pub fn summary(&self, scale: f64) -> Summary {
        Summary {
            count: self.total,
            mean: self.mean() / scale,
            p50: self.quantile(0.5) as f64 / scale,
            p99: self.quantile(0.99) as f64 / scale,
            p999: self.quantile(0.999) as f64 / scale,
            max: self.max as f64 / scale,
        }
    }

    /// Points of the cumulative distribution: (value / scale, fraction at or below), one per
    /// non-empty bucket, for plotting.
    #[must_use]
    pub fn cdf(&self, scale: f64) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            if *c == 0 {
                continue;
            }
            seen += c;
            let value = upper_bound(i).min(self.max) as f64 / scale;
            out.push((value, seen as f64 / self.total as f64));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..100_000u64).chain([1 << 40, u64::MAX / 3]) {
            let i = index(v);
            assert!(i >= last || v == 1 << 40);
            last = i;
            assert!(lower_bound(i) <= v && v <= upper_bound(i), "{v}");
            assert!((upper_bound(i) - lower_bound(i)) as f64 <= v as f64 / 60.0 + 1.0);
        }
    }

    #[test]
    fn quantiles_are_close() {
        let mut h = LogHistogram::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 / 5_000_000.0 - 1.0).abs() < 0.02, "{p50}");
        assert_eq!(h.quantile(1.0), 10_000_000);
        assert_eq!(h.count(), 10_000);
    }
}
