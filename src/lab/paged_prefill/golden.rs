//! The proof the paged oracle owes before it grades: its golden case.
//!
//! `assets/golden-paged/` (made by `scripts/make_paged_golden.py`) is a
//! three-sequence batch in a shuffled paged cache with a window and ALiBi,
//! a score past float64's `exp` range and two planted keys that must stay
//! hidden (one in the row's future, one outside its window). Its expected
//! output was computed by the definition at 50 digits in Python, reading
//! the x-packed cache with code of its own. Agreement to [`RELATIVE_BOUND`]
//! shows the oracle's softmax, masks, bias, head mapping, block-table
//! indirection and both cache layouts are right; only then do its verdicts
//! mean anything. The files are embedded and loaded through the same
//! checks as a TA's tensors.

use super::cases::PagedCaseError;
use super::tensors::load_bytes;
use super::oracle;
use super::contract::{Inputs, DH, HKV, HQ};
use crate::grade::compare::worst_relative_error;

/// How close the oracle must come, relative to the larger of the element's
/// magnitude and the largest `|v|` any row can see (rounding in a weighted
/// sum of values scales with the values). The same bound and definition as
/// the first lab's golden proof.
pub const RELATIVE_BOUND: f64 = 1e-12;

/// The golden case's sliding window (not a file: windows come from recipes).
pub const GOLDEN_WINDOW: i32 = 6;

/// The embedded golden files, by name.
pub const GOLDEN_FILES: [(&str, &[u8]); 10] = [
    (
        "q.npy",
        include_bytes!("../../../assets/golden-paged/q.npy"),
    ),
    (
        "k_new.npy",
        include_bytes!("../../../assets/golden-paged/k_new.npy"),
    ),
    (
        "v_new.npy",
        include_bytes!("../../../assets/golden-paged/v_new.npy"),
    ),
    (
        "k_cache.npy",
        include_bytes!("../../../assets/golden-paged/k_cache.npy"),
    ),
    (
        "v_cache.npy",
        include_bytes!("../../../assets/golden-paged/v_cache.npy"),
    ),
    (
        "block_table.npy",
        include_bytes!("../../../assets/golden-paged/block_table.npy"),
    ),
    (
        "q_start.npy",
        include_bytes!("../../../assets/golden-paged/q_start.npy"),
    ),
    (
        "seq_len.npy",
        include_bytes!("../../../assets/golden-paged/seq_len.npy"),
    ),
    (
        "alibi_slopes.npy",
        include_bytes!("../../../assets/golden-paged/alibi_slopes.npy"),
    ),
    (
        "expected.npy",
        include_bytes!("../../../assets/golden-paged/expected.npy"),
    ),
];

/// What a successful proof established.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldenProof {
    pub elements: usize,
    /// The largest relative error seen (at most [`RELATIVE_BOUND`]).
    pub max_relative_error: f64,
}

/// Why the oracle could not be proven.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("paged golden case: {0}")]
    Unreadable(#[from] PagedCaseError),
    #[error("paged golden case: expected.npy is missing")]
    NoExpected,
    #[error(
        "the paged oracle disagrees with the golden case at row {row} (sequence {seq}, position \
         {position}), head {head}, dim {dim}: {got:e} instead of {expected:e} (relative error \
         {relative_error:.3e}, bound {RELATIVE_BOUND:e})"
    )]
    Disagrees {
        row: usize,
        seq: usize,
        position: usize,
        head: usize,
        dim: usize,
        got: f64,
        expected: f64,
        relative_error: f64,
    },
}

/// Proves [`oracle::attention`] against the embedded golden case.
pub fn prove_oracle() -> Result<GoldenProof, GoldenError> {
    prove_with(&GOLDEN_FILES, oracle::attention)
}

/// Proves `attention` against golden files given as bytes.
pub fn prove_with(
    files: &[(&str, &[u8])],
    attention: impl Fn(&Inputs, Option<&[usize]>) -> Vec<f64>,
) -> Result<GoldenProof, GoldenError> {
    let case = load_bytes(files, GOLDEN_WINDOW)?;
    let expected = case.expected.ok_or(GoldenError::NoExpected)?;
    let inputs = case.inputs;
    let got = attention(&inputs, None);
    let scale = visible_value_scale(&inputs);
    let (worst, max_relative_error) = worst_relative_error(&got, &expected, scale);
    if max_relative_error.is_nan() || max_relative_error > RELATIVE_BOUND {
        let row = worst / (HQ * DH);
        let (seq, position) = inputs.batch.sequence_of_row(row);
        return Err(GoldenError::Disagrees {
            row,
            seq,
            position,
            head: worst / DH % HQ,
            dim: worst % DH,
            got: got[worst],
            expected: expected[worst],
            relative_error: max_relative_error,
        });
    }
    Ok(GoldenProof {
        elements: got.len(),
        max_relative_error,
    })
}

/// The largest `|v|` at a position some row can see (cache slots inside a
/// context, and `vNew`): the sentinels elsewhere must not loosen the bound.
fn visible_value_scale(inputs: &Inputs) -> f64 {
    let b = &inputs.batch;
    let mut scale = inputs
        .v_new
        .iter()
        .fold(0.0f64, |m, &x| m.max(f64::from(x).abs()));
    for s in 0..b.num_seqs() {
        for pos in 0..b.context[s] {
            for g in 0..HKV {
                for d in 0..DH {
                    scale = scale.max(f64::from(inputs.cached_value(s, pos, g, d)).abs());
                }
            }
        }
    }
    scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_prefill::bugs::Bug;
    use crate::lab::paged_prefill::contract::{Batch, SCALE};

    #[test]
    fn the_paged_oracle_reproduces_the_golden_case() {
        let proof = prove_oracle().unwrap();
        assert_eq!(proof.elements, 9 * HQ * DH);
        eprintln!(
            "paged golden proof: max relative error {:e}",
            proof.max_relative_error
        );
    }

    #[test]
    fn the_golden_case_holds_its_hazards() {
        let inputs = load_bytes(&GOLDEN_FILES, GOLDEN_WINDOW).unwrap().inputs;
        let b = &inputs.batch;
        assert_eq!(b.context, vec![0, 19, 5]);
        assert!(b.alibi && b.window() == Some(6));
        assert!(b.block_table.contains(&0));
        // Row 4 is sequence 1, position 20; head 0 against cached key 17.
        assert_eq!(b.sequence_of_row(4), (1, 20));
        let score = |key: &dyn Fn(usize) -> f32| -> f64 {
            (0..DH)
                .map(|d| f64::from(inputs.q[Batch::q_index(4, 0, d)]) * f64::from(key(d)))
                .sum::<f64>()
                * SCALE
        };
        assert!(score(&|d| inputs.cached_key(1, 17, 0, d))
            .exp()
            .is_infinite());
        // The same score waits outside the window (key 10) and in the future (key 22).
        assert!(!b.sees(20, 10) && !b.sees(20, 22));
        assert_eq!(score(&|d| inputs.cached_key(1, 10, 0, d)), 1152.0);
        let future_row = b.start(1) + 22 - 19;
        assert_eq!(
            score(&|d| inputs.k_new[Batch::kv_new_index(future_row, 0, d)]),
            1152.0
        );
    }

    #[test]
    fn a_perturbed_oracle_is_caught() {
        // Each of the planted bugs, the window off by one among them, is a
        // perturbation of the oracle the golden case must catch by itself.
        for bug in Bug::ALL {
            let err = prove_with(&GOLDEN_FILES, |inputs, rows| {
                oracle::evaluate(inputs, rows, oracle::Model::Bug(bug), 0.0)
            })
            .unwrap_err();
            assert!(
                matches!(err, GoldenError::Disagrees { .. }),
                "{bug:?}: {err}"
            );
        }
        // And a 1e-9 relative nudge of one element shows up at its place.
        let err = prove_with(&GOLDEN_FILES, |inputs, rows| {
            let mut out = oracle::attention(inputs, rows);
            out[Batch::q_index(7, 19, 3)] *= 1.0 + 1e-9;
            out
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                GoldenError::Disagrees {
                    row: 7,
                    head: 19,
                    dim: 3,
                    seq: 2,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_golden_case_without_expected_output_is_refused() {
        let files: Vec<(&str, &[u8])> = GOLDEN_FILES
            .iter()
            .copied()
            .filter(|(n, _)| *n != "expected.npy")
            .collect();
        assert!(matches!(
            prove_with(&files, oracle::attention),
            Err(GoldenError::NoExpected)
        ));
    }
}
