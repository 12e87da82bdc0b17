//! The proof the paged oracle owes before it grades: its golden case.
//!
//! `assets/golden-paged/` (made by `scripts/make_paged_golden.py`) is a
//! three-sequence batch in a shuffled paged cache with a window and ALiBi,
//! a score past float64's `exp` range and two planted keys that must stay
//! hidden (one in the row's future, one outside its window). Its expected
//! output was computed by the definition at 50 digits in Python, reading
//! the x-packed cache with code of its own. Agreement to
//! [`RELATIVE_BOUND`] shows the oracle's softmax, masks, bias, head
//! mapping, block-table indirection and both cache layouts are right; only
//! then do its verdicts mean anything. The files are embedded and loaded
//! through the same checks as a TA's tensors.

use super::contract::{Inputs, DH, HKV, HQ};
use super::oracle;
use super::tensors::load_bytes;
use crate::lab::golden::{self, Disagreement};
pub use crate::lab::golden::{GoldenProof, RELATIVE_BOUND};
use crate::lab::paged::recipe::PagedCaseError;
use crate::lab::paged::tensors::embedded_prefill_files;

/// The golden case's sliding window (not a file: windows come from recipes).
pub const GOLDEN_WINDOW: i32 = 6;

/// The embedded golden files, by name.
pub const GOLDEN_FILES: [(&str, &[u8]); 10] = embedded_prefill_files!("golden-paged");

/// Why the oracle could not be proven.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("paged golden case: {0}")]
    Unreadable(#[from] PagedCaseError),
    #[error("paged golden case: expected.npy is missing")]
    NoExpected,
    #[error(
        "the paged oracle disagrees with the golden case at row {} (sequence {seq}, position \
         {position}), {worst}",
        worst.row
    )]
    Disagrees {
        seq: usize,
        position: usize,
        worst: Disagreement,
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
    golden::prove(&got, &expected, visible_value_scale(&inputs), (HQ, DH)).map_err(|worst| {
        let (seq, position) = inputs.batch.sequence_of_row(worst.row);
        GoldenError::Disagrees {
            seq,
            position,
            worst,
        }
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
    use crate::lab::paged_prefill::contract::LAYOUT;
    use crate::lab::paged_prefill::contract::SCALE;

    #[test]
    fn the_paged_oracle_reproduces_the_golden_case() {
        golden::assert_proven("paged", &prove_oracle().unwrap(), 9 * HQ * DH);
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
                .map(|d| f64::from(inputs.q[LAYOUT.head_index(4, 0, d)]) * f64::from(key(d)))
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
            score(&|d| inputs.k_new[LAYOUT.kv_index(future_row, 0, d)]),
            1152.0
        );
    }

    #[test]
    fn a_perturbed_oracle_is_caught() {
        // Each of the planted bugs, the window off by one among them, is a
        // perturbation of the oracle the golden case must catch by itself.
        // A 32-bit offset overflow changes nothing where every block lies
        // below 2^31 elements, as the golden case's do.
        for bug in Bug::ALL
            .into_iter()
            .filter(|bug| !matches!(bug, Bug::Int32Offset(_)))
        {
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
            out[LAYOUT.head_index(7, 19, 3)] *= 1.0 + 1e-9;
            out
        })
        .unwrap_err();
        let GoldenError::Disagrees { seq, worst, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!((*seq, golden::place(worst)), (2, (7, 19, 3)), "{err}");
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
