//! The proof the FP8 oracle owes before it grades: its two golden cases.
//!
//! `assets/golden-paged-fp8/{e4m3,e5m2}/` (made by
//! `scripts/make_paged_fp8_golden.py`) hold one batch in a shuffled paged
//! cache of each format, with a window, ALiBi, scales that are not powers
//! of two, FP8 NaN bytes in every slot no context covers, a score past
//! float64's `exp` range and two planted keys that must stay hidden. Their
//! expected outputs were computed from the formats' definitions at 50 digits
//! in Python. Agreement to [`RELATIVE_BOUND`] shows the decoder, the scales,
//! the softmax, masks, bias, head mapping, block table and both cache
//! layouts are right. The files are embedded and loaded through the same
//! checks as a TA's tensors.

use super::tensors::load_bytes;
use super::{oracle, Inputs, KvFormat, DH, HQ};
use crate::grade::compare::worst_relative_error;
use crate::lab::paged_prefill::cases::PagedCaseError;

/// How close the oracle must come, relative to the larger of the element's
/// magnitude and the largest `|v|` any row can see (the other labs' bound).
pub const RELATIVE_BOUND: f64 = 1e-12;
/// The golden cases' sliding window.
pub const GOLDEN_WINDOW: i32 = 6;
/// The golden cases' `(kScale, vScale)`: the floats nearest 0.3 and 1.7.
pub const GOLDEN_SCALES: (f32, f32) = (0.3, 1.7);

macro_rules! golden_files {
    ($dir:literal) => {
        [
            (
                "q.npy",
                include_bytes!(concat!("../../../assets/golden-paged-fp8/", $dir, "/q.npy"))
                    .as_slice(),
            ),
            (
                "k_new.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/k_new.npy"
                )),
            ),
            (
                "v_new.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/v_new.npy"
                )),
            ),
            (
                "k_cache.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/k_cache.npy"
                )),
            ),
            (
                "v_cache.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/v_cache.npy"
                )),
            ),
            (
                "block_table.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/block_table.npy"
                )),
            ),
            (
                "q_start.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/q_start.npy"
                )),
            ),
            (
                "seq_len.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/seq_len.npy"
                )),
            ),
            (
                "alibi_slopes.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/alibi_slopes.npy"
                )),
            ),
            (
                "expected.npy",
                include_bytes!(concat!(
                    "../../../assets/golden-paged-fp8/",
                    $dir,
                    "/expected.npy"
                )),
            ),
        ]
    };
}

/// The embedded golden files of each format, by name.
pub const GOLDEN_E4M3: [(&str, &[u8]); 10] = golden_files!("e4m3");
pub const GOLDEN_E5M2: [(&str, &[u8]); 10] = golden_files!("e5m2");

/// The golden files of `format`.
pub fn golden_files(format: KvFormat) -> &'static [(&'static str, &'static [u8])] {
    match format {
        KvFormat::E4m3 => &GOLDEN_E4M3,
        KvFormat::E5m2 => &GOLDEN_E5M2,
    }
}

/// What a successful proof established.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldenProof {
    pub elements: usize,
    pub max_relative_error: f64,
}

/// Why the oracle could not be proven.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("FP8 golden case: {0}")]
    Unreadable(#[from] PagedCaseError),
    #[error("FP8 golden case: expected.npy is missing")]
    NoExpected,
    #[error(
        "the FP8 oracle disagrees with the {format:?} golden case at row {row}, head {head}, dim \
         {dim}: {got:e} instead of {expected:e} (relative error {relative_error:.3e}, bound {RELATIVE_BOUND:e})"
    )]
    Disagrees {
        format: KvFormat,
        row: usize,
        head: usize,
        dim: usize,
        got: f64,
        expected: f64,
        relative_error: f64,
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
    let (worst, max_relative_error) =
        worst_relative_error(&got, &expected, visible_value_scale(&inputs));
    if max_relative_error.is_nan() || max_relative_error > RELATIVE_BOUND {
        return Err(GoldenError::Disagrees {
            format,
            row: worst / (HQ * DH),
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

/// The largest `|v|` any row can see (NaN bytes elsewhere must not loosen the bound).
fn visible_value_scale(inputs: &Inputs) -> f64 {
    oracle::value_scales(inputs).into_iter().fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_prefill_fp8::bugs::Bug;
    use crate::lab::paged_prefill_fp8::oracle::Model;
    use crate::lab::paged_prefill_fp8::{kv_new_index, q_index, SCALE};

    #[test]
    fn the_fp8_oracle_reproduces_both_golden_cases() {
        for proof in prove_oracle().unwrap() {
            assert_eq!(proof.elements, 9 * HQ * DH);
            eprintln!(
                "FP8 golden proof: max relative error {:e}",
                proof.max_relative_error
            );
        }
    }

    #[test]
    fn the_golden_cases_hold_their_hazards() {
        for format in KvFormat::ALL {
            let inputs = load_bytes(golden_files(format), GOLDEN_WINDOW, format, GOLDEN_SCALES)
                .unwrap()
                .inputs;
            let b = &inputs.batch;
            assert_eq!(b.context, vec![0, 19, 5]);
            assert!(b.alibi && b.window() == Some(6) && b.block_table.contains(&0));
            assert_eq!((inputs.k_scale, inputs.v_scale), (0.3, 1.7));
            assert_eq!(b.sequence_of_row(4), (1, 20));
            let score = |key: &dyn Fn(usize) -> f64| -> f64 {
                (0..DH)
                    .map(|d| f64::from(inputs.q[q_index(4, 0, d)]) * key(d))
                    .sum::<f64>()
                    * SCALE
            };
            assert!(score(&|d| inputs.cached_key(1, 17, 0, d))
                .exp()
                .is_infinite());
            assert!(!b.sees(20, 10) && !b.sees(20, 22));
            assert!(score(&|d| inputs.cached_key(1, 10, 0, d)) > 900.0);
            let future = b.start(1) + 22 - 19;
            assert!(score(&|d| f64::from(inputs.k_new[kv_new_index(future, 0, d)])) > 900.0);
            // The slot after sequence 1's context is an FP8 NaN.
            assert!(inputs
                .format
                .decode(inputs.k_cache[super::super::k_cache_index(0, 0, 0, 3)])
                .is_nan());
        }
    }

    #[test]
    fn a_perturbed_oracle_is_caught() {
        for format in KvFormat::ALL {
            for bug in Bug::ALL {
                // Decoding E5M2 as E5M2 is no perturbation; every other bug shows.
                if format == KvFormat::E5m2 && bug == Bug::FormatIgnored {
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
                out[q_index(7, 19, 3)] *= 1.0 + 1e-9;
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
                        ..
                    }
                ),
                "{err}"
            );
        }
    }
}
