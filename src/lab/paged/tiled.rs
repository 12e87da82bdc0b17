//! The paged family's tiled float64 reference (kernels/paged-family/
//! tiled-oracle.cuh): how it is launched, and a CPU port of the order in
//! which it sums, so a test can hold that order against the two-pass CPU
//! oracle on small cases.
//!
//! The GPU body computes 8 rows of one KV head per block and stages the
//! keys any of those rows (of one sequence) sees in tiles of 16 positions,
//! starting at the lowest position one of them sees. Each (row, head) keeps
//! a running maximum and rescales its sums by it once per tile; the
//! result differs from the two-pass definition by rounding only.

use super::batch::Batch;
use crate::lab::definition::OracleLaunch;

/// Rows of one block (the body's `kRows`).
pub const TILE_ROWS: usize = 8;
/// Positions staged at a time (the body's `kKeys`).
pub const TILE_KEYS: usize = 16;

/// The launch of a paged prefill lab's float64 reference: one block of 256
/// threads per 8 rows and KV head (both paged prefill labs have 8).
pub const TILED_ORACLE: OracleLaunch = OracleLaunch::RowTiles {
    threads: 256,
    rows: TILE_ROWS as u32,
    kv_heads: 8,
};

/// The first position the block computing `row` stages (every row of the
/// output computed, as for a whole-output reference): the lowest position
/// any row of its tile in the same sequence sees.
pub fn first_staged(batch: &Batch, row: usize) -> usize {
    let (seq, _) = batch.sequence_of_row(row);
    let tile = row / TILE_ROWS * TILE_ROWS;
    (tile..(tile + TILE_ROWS).min(batch.total_new()))
        .map(|other| batch.sequence_of_row(other))
        .filter(|&(other_seq, _)| other_seq == seq)
        .map(|(_, i)| batch.first_visible(i))
        .min()
        .unwrap_or(0)
}

/// One (row, head)'s output as the tiled body sums it: `visible` holds each
/// key the row sees as (position, score, its value vector), in increasing
/// position; tiles of [`TILE_KEYS`] positions start at `first`.
pub fn online_softmax(first: usize, visible: &[(usize, f64, &[f64])], out: &mut [f64]) {
    out.fill(0.0);
    let mut running_max = f64::NEG_INFINITY;
    let mut weight_sum = 0.0;
    for tile in visible.chunk_by(|a, b| (a.0 - first) / TILE_KEYS == (b.0 - first) / TILE_KEYS) {
        // f64::max, like CUDA's fmax, passes over a NaN score.
        let tile_max = tile.iter().map(|k| k.1).fold(f64::NEG_INFINITY, f64::max);
        let new_max = running_max.max(tile_max);
        let rescale = match running_max == f64::NEG_INFINITY {
            true => 0.0,
            false => (running_max - new_max).exp(),
        };
        running_max = new_max;
        // While every score seen is -inf, weights are exp(-inf) = 0 (the
        // definition's, against its finite maximum), not exp(NaN).
        let shift = match new_max == f64::NEG_INFINITY {
            true => 0.0,
            false => new_max,
        };
        let weights: Vec<f64> = tile.iter().map(|k| (k.1 - shift).exp()).collect();
        weight_sum = weight_sum * rescale + weights.iter().sum::<f64>();
        out.iter_mut().for_each(|o| *o *= rescale);
        for (weight, (_, _, value)) in weights.iter().zip(tile) {
            for (o, v) in out.iter_mut().zip(value.iter()) {
                *o += weight * v;
            }
        }
    }
    out.iter_mut().for_each(|o| *o /= weight_sum);
}

/// For the labs' oracle tests: that the tiled order gives `want`, the
/// two-pass oracle's (row, head), to 1e-12 of the largest value the row
/// sees (an output is a weighted mean of them, and cancellation over
/// thousands of keys leaves either order's rounding above 1e-12 of a small
/// output). `visible` as for [`online_softmax`].
#[cfg(test)]
pub fn assert_tiled_order_gives(
    batch: &Batch,
    row: usize,
    visible: &[(usize, f64, &[f64])],
    want: &[f64],
    what: impl Fn() -> String,
) {
    let mut got = vec![0.0; want.len()];
    online_softmax(first_staged(batch, row), visible, &mut got);
    let largest = visible
        .iter()
        .flat_map(|k| k.2.iter())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    for (got, want) in got.iter().zip(want) {
        assert!(
            (got - want).abs() <= 1e-12 * largest || (got.is_nan() && want.is_nan()),
            "{}: {got} against {want}",
            what()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged::layout::CacheLayout;

    fn batch(context: Vec<usize>, new: Vec<usize>, window: i32) -> Batch {
        let blocks = context
            .iter()
            .zip(&new)
            .map(|(c, n)| (c + n).div_ceil(16))
            .max()
            .unwrap();
        Batch::from_lengths(
            CacheLayout::new(64, 4),
            context,
            new,
            window,
            false,
            blocks,
            64,
        )
    }

    #[test]
    fn a_tile_stages_from_the_lowest_position_its_rows_of_one_sequence_see() {
        // Rows 0-2 are sequence 0 (positions 20-22), rows 3-12 sequence 1
        // (positions 5-14); rows 0-7 are one tile, rows 8-12 the next.
        let windowed = batch(vec![20, 5], vec![3, 10], 4);
        assert_eq!(first_staged(&windowed, 1), 17, "position 20's window");
        assert_eq!(first_staged(&windowed, 3), 2, "position 5's window");
        assert_eq!(first_staged(&windowed, 7), 2);
        assert_eq!(first_staged(&windowed, 8), 7, "position 10's window");
        let whole = batch(vec![20, 5], vec![3, 10], 0);
        assert_eq!(first_staged(&whole, 9), 0);
    }

    #[test]
    fn tiles_give_the_two_pass_softmax_up_to_rounding() {
        let values: Vec<Vec<f64>> = (0..40).map(|j| vec![j as f64, -(j as f64) * 0.5]).collect();
        // Scores that rise, so the running maximum moves in every tile.
        let visible: Vec<(usize, f64, &[f64])> = (3..40)
            .map(|j| {
                (
                    j,
                    (j as f64 * 0.37).sin() * 4.0 + j as f64 * 0.2,
                    values[j].as_slice(),
                )
            })
            .collect();
        let mut tiled = [0.0; 2];
        online_softmax(1, &visible, &mut tiled);
        let max = visible
            .iter()
            .map(|k| k.1)
            .fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = visible.iter().map(|k| (k.1 - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        for (d, &got) in tiled.iter().enumerate() {
            let want: f64 = weights
                .iter()
                .zip(&visible)
                .map(|(w, k)| w * k.2[d])
                .sum::<f64>()
                / total;
            assert!((got - want).abs() <= 1e-13 * want.abs(), "{got} {want}");
        }
    }

    /// Keys whose scores are -inf (an infinite E5M2 key against a positive
    /// query) weigh nothing, also when a whole first tile holds only them.
    #[test]
    fn a_first_tile_of_minus_infinite_scores_weighs_nothing() {
        let (far, near) = ([7.0], [3.0]);
        let mut visible: Vec<(usize, f64, &[f64])> =
            (0..16).map(|j| (j, f64::NEG_INFINITY, &far[..])).collect();
        visible.push((16, 0.5, &near));
        visible.push((17, 0.5, &near));
        let mut out = [0.0];
        online_softmax(0, &visible, &mut out);
        assert_eq!(out, [3.0]);
    }

    #[test]
    fn a_nan_score_reaches_the_output_as_in_the_definition() {
        let value = [1.0];
        let mut out = [0.0];
        online_softmax(0, &[(0, 1.0, &value), (1, f64::NAN, &value)], &mut out);
        assert!(out[0].is_nan());
    }
}
