//! Timing statistics for the starter-versus-student race.
//!
//! The runner times the two kernels alternately (starter, student, starter,
//! ...), so sample `i` of each side was taken under the same conditions:
//! clock boosts, thermal state, other tenants. The speedup's confidence
//! interval therefore comes from a bootstrap that resamples those *pairs*:
//! each resample draws pair indices with replacement and takes the ratio of
//! the two sides' medians, the same statistic as the point estimate. A
//! drift that slows both kernels alike moves both medians alike and barely
//! widens the interval, while jitter between the kernels does. The bootstrap
//! is seeded, so the same samples always give the same interval.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Resamples drawn for the speedup's confidence interval.
pub const RESAMPLES: usize = 1000;
/// Fixed seed: the interval is a function of the samples alone.
const BOOTSTRAP_SEED: u64 = 0x5EED_F1A5;
/// A speedup is noisy when its 95% interval is wider than this fraction of the point.
pub const MAX_RELATIVE_CI_WIDTH: f64 = 0.10;
/// ... or when either kernel's p90/p10 exceeds this (a 10% spread).
pub const MAX_SPREAD: f64 = 1.10;
/// ... or when there are fewer pairs than this to judge by.
pub const MIN_PAIRS: usize = 5;

/// Order statistics of one kernel's times, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimingSummary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// 10th percentile (linear interpolation between order statistics).
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Median absolute deviation from the median, unscaled.
    pub mad: f64,
}

/// `starter / student`, with a 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Speedup {
    /// Median starter time over median student time.
    pub point: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// The measurement is too unsteady to trust the point (see [`MAX_RELATIVE_CI_WIDTH`]).
    pub noisy: bool,
    pub starter: TimingSummary,
    pub student: TimingSummary,
}

/// Why timings could not be summarised.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("no timing samples")]
    Empty,
    #[error("timing sample {index} is {value} ms; times must be positive and finite")]
    InvalidSample { index: usize, value: f64 },
    #[error("{starter} starter samples but {student} student samples; they must come in pairs")]
    Unpaired { starter: usize, student: usize },
}

/// Summarises one kernel's times (ms).
pub fn summarize(samples: &[f64]) -> Result<TimingSummary, StatsError> {
    validate(samples)?;
    let ordered = sorted(samples.iter().copied());
    let median = percentile(&ordered, 0.5);
    let deviations = sorted(ordered.iter().map(|x| (x - median).abs()));
    Ok(TimingSummary {
        n: ordered.len(),
        median,
        min: ordered[0],
        max: ordered[ordered.len() - 1],
        p10: percentile(&ordered, 0.1),
        p90: percentile(&ordered, 0.9),
        mad: percentile(&deviations, 0.5),
    })
}

/// The speedup of `student` over `starter` from interleaved samples (ms), pair `i` taken together.
pub fn speedup(starter: &[f64], student: &[f64]) -> Result<Speedup, StatsError> {
    if starter.len() != student.len() {
        return Err(StatsError::Unpaired {
            starter: starter.len(),
            student: student.len(),
        });
    }
    let starter_summary = summarize(starter)?;
    let student_summary = summarize(student)?;
    let point = starter_summary.median / student_summary.median;

    let mut rng = ChaCha8Rng::seed_from_u64(BOOTSTRAP_SEED);
    let pairs = starter.len();
    let mut starter_draw = Vec::with_capacity(pairs);
    let mut student_draw = Vec::with_capacity(pairs);
    let ratios = sorted((0..RESAMPLES).map(|_| {
        starter_draw.clear();
        student_draw.clear();
        for _ in 0..pairs {
            let pair = rng.random_range(0..pairs);
            starter_draw.push(starter[pair]);
            student_draw.push(student[pair]);
        }
        median(&mut starter_draw) / median(&mut student_draw)
    }));
    let ci_low = percentile(&ratios, 0.025);
    let ci_high = percentile(&ratios, 0.975);

    let spread = |s: &TimingSummary| s.p90 / s.p10;
    let noisy = pairs < MIN_PAIRS
        || ci_high - ci_low > MAX_RELATIVE_CI_WIDTH * point
        || spread(&starter_summary) > MAX_SPREAD
        || spread(&student_summary) > MAX_SPREAD;
    Ok(Speedup {
        point,
        ci_low,
        ci_high,
        noisy,
        starter: starter_summary,
        student: student_summary,
    })
}

fn validate(samples: &[f64]) -> Result<(), StatsError> {
    if samples.is_empty() {
        return Err(StatsError::Empty);
    }
    match samples.iter().position(|x| !x.is_finite() || *x <= 0.0) {
        Some(index) => Err(StatsError::InvalidSample {
            index,
            value: samples[index],
        }),
        None => Ok(()),
    }
}

fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values
}

/// The median of `values`, `None` when there are none.
pub fn median_of(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| median(&mut values.to_vec()))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(values, 0.5)
}

/// The `fraction` quantile of sorted, non-empty `values`, interpolating
/// linearly between neighbours (NumPy's default method).
fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let position = fraction * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    let weight = position - below as f64;
    sorted[below] + (sorted[above] - sorted[below]) * weight
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn summary_of_one_to_ten() {
        // Shuffled so that the order of the samples cannot matter.
        let samples = [7.0, 2.0, 10.0, 1.0, 5.0, 9.0, 3.0, 8.0, 6.0, 4.0];
        let s = summarize(&samples).unwrap();
        assert_eq!((s.n, s.min, s.max), (10, 1.0, 10.0));
        assert!(close(s.median, 5.5));
        // Position 0.1 * 9 = 0.9 between 1 and 2; 0.9 * 9 = 8.1 between 9 and 10.
        assert!(close(s.p10, 1.9), "{}", s.p10);
        assert!(close(s.p90, 9.1), "{}", s.p90);
        // |x - 5.5| = 0.5, 0.5, 1.5, 1.5, ..., 4.5, 4.5: median 2.5.
        assert!(close(s.mad, 2.5));
    }

    #[test]
    fn summary_of_one_sample() {
        let s = summarize(&[3.0]).unwrap();
        assert_eq!((s.median, s.p10, s.p90, s.mad), (3.0, 3.0, 3.0, 0.0));
    }

    #[test]
    fn bad_samples_are_refused() {
        assert_eq!(summarize(&[]), Err(StatsError::Empty));
        assert_eq!(
            summarize(&[1.0, 0.0]),
            Err(StatsError::InvalidSample {
                index: 1,
                value: 0.0
            })
        );
        assert!(matches!(
            summarize(&[f64::NAN]),
            Err(StatsError::InvalidSample { index: 0, .. })
        ));
        assert_eq!(
            speedup(&[1.0, 2.0], &[1.0]),
            Err(StatsError::Unpaired {
                starter: 2,
                student: 1
            })
        );
    }

    /// `n` pairs of a 10 ms starter and a `student_ms` student with +-`jitter` relative noise.
    fn race(n: usize, student_ms: f64, jitter: f64, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut noisy = |ms: f64| ms * (1.0 + rng.random_range(-jitter..=jitter));
        (0..n).map(|_| (noisy(10.0), noisy(student_ms))).unzip()
    }

    #[test]
    fn a_steady_race_gives_a_tight_interval_around_the_ratio() {
        let (starter, student) = race(100, 2.5, 0.01, 1);
        let s = speedup(&starter, &student).unwrap();
        assert!((s.point - 4.0).abs() < 0.05, "{}", s.point);
        assert!(s.ci_low <= s.point && s.point <= s.ci_high);
        assert!(s.ci_low > 3.9 && s.ci_high < 4.1, "{s:?}");
        assert!(!s.noisy);
        // Seeded: the same samples give the same interval.
        assert_eq!(speedup(&starter, &student).unwrap(), s);
    }

    #[test]
    fn jitter_widens_the_interval_and_marks_it_noisy() {
        let (starter, student) = race(30, 2.5, 0.4, 2);
        let s = speedup(&starter, &student).unwrap();
        assert!(s.ci_high - s.ci_low > 0.1 * s.point, "{s:?}");
        assert!(s.noisy);
    }

    #[test]
    fn shared_drift_cancels_in_the_pairs() {
        // Both kernels slow down together over the run: every resample keeps
        // the exact 3x ratio, although each side alone spreads widely.
        let starter: Vec<f64> = (0..40).map(|i| 6.0 + 0.3 * f64::from(i)).collect();
        let student: Vec<f64> = starter.iter().map(|ms| ms / 3.0).collect();
        let s = speedup(&starter, &student).unwrap();
        assert!(
            close(s.point, 3.0) && close(s.ci_low, 3.0) && close(s.ci_high, 3.0),
            "{s:?}"
        );
        assert!(s.noisy, "the spread of each side still flags the run");
    }

    #[test]
    fn too_few_pairs_are_noisy() {
        let s = speedup(&[10.0, 10.0], &[5.0, 5.0]).unwrap();
        assert_eq!((s.point, s.ci_low, s.ci_high), (2.0, 2.0, 2.0));
        assert!(s.noisy);
    }
}
