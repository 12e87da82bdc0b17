//! The GPU float64 reference, proven on sampled rows: the lab's trusted
//! reference kernel computes every output row on the GPU, and the CPU
//! oracle recomputes a few of them, which must agree to float64 rounding.
//! The timing shape's output is graded against it this way, and so is a
//! check case whose whole output would keep the CPU oracle busy for seconds
//! ([`crate::lab::definition::Problem::oracle_sampled`], docs/CASES.md).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::protocol::ReferenceCheck;

/// Rows of an output whose GPU reference is recomputed on the CPU, besides the last.
const SAMPLED_ROWS: usize = 12;
/// The GPU reference must match the CPU oracle this closely (relative, float64 against float64).
const REFERENCE_AGREEMENT: f64 = 1e-9;

/// Which rows of an output of `rows` rows the CPU oracle recomputes for
/// `seed`: [`SAMPLED_ROWS`] drawn, and the last, ascending and distinct.
pub fn sampled_rows(seed: u64, rows: usize) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.rotate_left(17));
    let mut sampled: Vec<usize> = (0..SAMPLED_ROWS)
        .map(|_| rng.random_range(0..rows))
        .collect();
    sampled.push(rows - 1);
    sampled.sort_unstable();
    sampled.dedup();
    sampled
}

/// How the GPU reference's values of `rows_checked` rows, `gpu`, agree with
/// the CPU oracle's of the same rows, `exact` (both laid out one row after
/// another).
pub fn agreement(exact: &[f64], gpu: &[f64], rows_checked: usize) -> ReferenceCheck {
    let mut max_rel_diff = 0f64;
    for (want, got) in exact.iter().zip(gpu) {
        // The offset keeps near-zero outputs from turning rounding noise into a large ratio.
        let rel = (got - want).abs() / (want.abs() + 1e-6);
        max_rel_diff = max_rel_diff.max(if rel.is_nan() { f64::INFINITY } else { rel });
    }
    ReferenceCheck {
        rows_checked,
        max_rel_diff,
        agrees: max_rel_diff <= REFERENCE_AGREEMENT && exact.len() == gpu.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_distinct_ascending_and_ends_with_the_last_row() {
        let rows = sampled_rows(7, 100);
        assert!(rows.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(rows.last(), Some(&99));
        assert!(rows.len() >= 2 && rows.len() <= SAMPLED_ROWS + 1);
        assert_eq!(sampled_rows(7, 100), rows, "the same seed, the same rows");
        assert_eq!(sampled_rows(3, 1), vec![0]);
    }

    #[test]
    fn agreement_is_float64_rounding_and_a_nan_disagrees() {
        let exact = [1.0, -2.0, 0.0];
        assert!(agreement(&exact, &[1.0 + 1e-12, -2.0, 1e-16], 1).agrees);
        assert!(!agreement(&exact, &[1.0 + 1e-6, -2.0, 0.0], 1).agrees);
        let nan = agreement(&exact, &[f64::NAN, -2.0, 0.0], 1);
        assert!(!nan.agrees && nan.max_rel_diff.is_infinite());
        assert!(!agreement(&exact, &exact[..2], 1).agrees, "a short answer");
    }
}
