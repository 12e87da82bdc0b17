//! The proof the FP8 oracle owes before it grades: its two golden cases.
//!
//! `assets/golden-paged-fp8/{e4m3,e5m2}/` (made by
//! `scripts/make_paged_fp8_golden.py`) hold one batch in a shuffled paged
//! cache of each format, with a window, ALiBi, scales that are not powers
//! of two, FP8 NaN bytes in every slot no context covers, a score past
//! float64's `exp` range and two planted keys that must stay hidden. Their
//! expected outputs were computed from the formats' definitions at 50
//! digits in Python. Agreement to [`RELATIVE_BOUND`] shows the decoder, the
//! scales, the softmax, masks, bias, head mapping, block table and both
//! cache layouts are right. The files are embedded and loaded through the
//! same checks as a TA's tensors.

use super::tensors::load_bytes;
use super::{oracle, Inputs, KvFormat, DH, HQ};
use crate::lab::golden::{self, Disagreement};
pub use crate::lab::golden::{GoldenProof, RELATIVE_BOUND};
use crate::lab::paged::recipe::PagedCaseError;
use crate::lab::paged::tensors::embedded_prefill_files;

/// The golden cases' sliding window.
pub const GOLDEN_WINDOW: i32 = 6;
/// The golden cases' `(kScale, vScale)`: the floats nearest 0.3 and 1.7.
pub const GOLDEN_SCALES: (f32, f32) = (0.3, 1.7);

/// The embedded golden files of each format, by name.
pub const GOLDEN_E4M3: [(&str, &[u8]); 10] = embedded_prefill_files!("golden-paged-fp8/e4m3");
pub const GOLDEN_E5M2: [(&str, &[u8]); 10] = embedded_prefill_files!("golden-paged-fp8/e5m2");

/// The golden files of `format`.
pub fn golden_files(format: KvFormat) -> &'static [(&'static str, &'static [u8])] {
    match format {
        KvFormat::E4m3 => &GOLDEN_E4M3,
        KvFormat::E5m2 => &GOLDEN_E5M2,
    }
}

/// Why the oracle could not be proven.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("FP8 golden case: {0}")]
    Unreadable(#[from] PagedCaseError),
    #[error("FP8 golden case: expected.npy is missing")]
    NoExpected,
    #[error(
        "the FP8 oracle disagrees with the {format:?} golden case at row {}, {worst}",
        worst.row
    )]
    Disagrees {
        format: KvFormat,
        worst: Disagreement,
    },
}

/// Proves [`oracle::attention`] against both embedded golden cases.
pub fn prove_oracle() -> Result<Vec<GoldenProof>, GoldenError> {
    KvFormat::ALL
        .into_iter()
        .map(|format| prove_with(golden_files(format), format, oracle::attention))
        .collect()
}

/// Proves `attention` against golden files of `format`.
pub fn prove_with(
    files: &[(&str, &[u8])],
    format: KvFormat,
    attention: impl Fn(&Inputs) -> Vec<f64>,
) -> Result<GoldenProof, GoldenError> {
    let case = load_bytes(files, GOLDEN_WINDOW, format, GOLDEN_SCALES)?;
    let expected = case.expected.ok_or(GoldenError::NoExpected)?;
    let inputs = case.inputs;
    let got = attention(&inputs);
    // The largest `|v|` any row can see (NaN bytes elsewhere must not loosen the bound).
    let scale = oracle::value_scales(&inputs)
        .into_iter()
        .fold(0.0, f64::max);
    golden::prove(&got, &expected, scale, (HQ, DH))
        .map_err(|worst| GoldenError::Disagrees { format, worst })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_prefill_fp8::bugs::Bug;
    use crate::lab::paged_prefill_fp8::oracle::Model;
    use crate::lab::paged_prefill_fp8::LAYOUT;
    use crate::lab::paged_prefill_fp8::SCALE;

    #[test]
    fn the_fp8_oracle_reproduces_both_golden_cases() {
        for proof in prove_oracle().unwrap() {
            golden::assert_proven("FP8", &proof, 9 * HQ * DH);
        }
    }

    #[test]
    fn the_golden_cases_hold_their_hazards() {
        for format in KvFormat::ALL {
            let inputs = load_bytes(golden_files(format), GOLDEN_WINDOW, format, GOLDEN_SCALES)
                .unwrap()
                .inputs;
            let b = &inputs.tensors.batch;
            assert_eq!(b.context, vec![0, 19, 5]);
            assert!(b.alibi && b.window() == Some(6) && b.block_table.contains(&0));
            assert_eq!((inputs.k_scale, inputs.v_scale), (0.3, 1.7));
            assert_eq!(b.sequence_of_row(4), (1, 20));
            let score = |key: &dyn Fn(usize) -> f64| -> f64 {
                (0..DH)
                    .map(|d| f64::from(inputs.tensors.q[LAYOUT.head_index(4, 0, d)]) * key(d))
                    .sum::<f64>()
                    * SCALE
            };
            assert!(score(&|d| inputs.cached_key(1, 17, 0, d))
                .exp()
                .is_infinite());
            assert!(!b.sees(20, 10) && !b.sees(20, 22));
            assert!(score(&|d| inputs.cached_key(1, 10, 0, d)) > 900.0);
            let future = b.start(1) + 22 - 19;
            assert!(
                score(&|d| f64::from(inputs.tensors.k_new[LAYOUT.kv_index(future, 0, d)])) > 900.0
            );
            // The slot after sequence 1's context is an FP8 NaN.
            assert!(inputs
                .format
                .decode(inputs.tensors.k_cache[LAYOUT.k_cache_index(0, 0, 0, 3)])
                .is_nan());
        }
    }

    #[test]
    fn a_perturbed_oracle_is_caught() {
        for format in KvFormat::ALL {
            for bug in Bug::ALL {
                // Decoding a format as itself is no perturbation, nor is a
                // 32-bit offset where every block lies below 2^31 elements,
                // as the golden case's do; every other bug shows.
                let no_change = matches!(
                    (format, bug),
                    (KvFormat::E5m2, Bug::FormatIgnored)
                        | (KvFormat::E4m3, Bug::FormatAssumedE4m3)
                        | (_, Bug::Int32Offset(_))
                );
                if no_change {
                    continue;
                }
                let err = prove_with(golden_files(format), format, |i| {
                    oracle::evaluate(i, Model::Bug(bug))
                })
                .unwrap_err();
                assert!(
                    matches!(err, GoldenError::Disagrees { .. }),
                    "{format:?} {bug:?}: {err}"
                );
            }
            let err = prove_with(golden_files(format), format, |i| {
                let mut out = oracle::attention(i);
                out[LAYOUT.head_index(7, 19, 3)] *= 1.0 + 1e-9;
                out
            })
            .unwrap_err();
            let GoldenError::Disagrees { worst, .. } = &err else {
                panic!("{err}")
            };
            assert_eq!(golden::place(worst), (7, 19, 3), "{err}");
        }
    }
}
