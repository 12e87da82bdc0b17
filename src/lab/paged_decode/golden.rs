//! The proof the decode oracle owes before it grades: its golden case.
//!
//! `assets/golden-paged-decode/` (made by
//! `scripts/make_paged_decode_golden.py`) is three sequences of 1, 19 and
//! 37 keys in a shuffled paged cache with ALiBi, a shared prefix block,
//! NaN in every slot no sequence owns and a score past float64's `exp`
//! range. Its expected output was computed by the definition at 50 digits.
//! Agreement to [`RELATIVE_BOUND`] shows the oracle's softmax, bias (from
//! the token's own position), head mapping, block-table indirection and
//! both cache layouts are right, and that it reads no slot past a
//! sequence's end (one NaN would show). The files are embedded and loaded
//! with the checks a TA's tensors will get: shapes agree, ids and lengths
//! in range, every slot a sequence reads finite.

use super::{tensors, Inputs, DH, HKV, HQ};
use crate::lab::golden::{self, embedded_files, Disagreement};
pub use crate::lab::golden::{GoldenProof, RELATIVE_BOUND};

/// The embedded golden files, by name.
pub const GOLDEN_FILES: [(&str, &[u8]); 7] = embedded_files!(
    "golden-paged-decode",
    "q.npy",
    "k_cache.npy",
    "v_cache.npy",
    "block_table.npy",
    "seq_len.npy",
    "alibi_slopes.npy",
    "expected.npy",
);

/// Why the oracle could not be proven, or the files could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GoldenError {
    #[error("paged-decode golden case, {file}: {message}")]
    Unusable { file: String, message: String },
    #[error(
        "the paged-decode oracle disagrees with the golden case at sequence {}, {worst}",
        worst.row
    )]
    Disagrees { worst: Disagreement },
}

fn unusable(file: &str, message: impl Into<String>) -> GoldenError {
    GoldenError::Unusable {
        file: file.into(),
        message: message.into(),
    }
}

/// Decodes and cross-checks the case's files with the checks a TA's
/// tensors get; returns the inputs and the expected output, which the
/// golden case must bring.
pub fn load(files: &[(&str, &[u8])]) -> Result<(Inputs, Vec<f64>), GoldenError> {
    let (inputs, expected) =
        tensors::load_bytes(files).map_err(|e| unusable(&e.file, e.message))?;
    let expected = expected.ok_or_else(|| unusable("expected.npy", "missing"))?;
    Ok((inputs, expected))
}

/// Proves `attention` (the oracle, or a perturbation of it) against golden
/// files given as bytes ([`GOLDEN_FILES`], embedded).
pub fn prove_with(
    files: &[(&str, &[u8])],
    attention: impl Fn(&Inputs, Option<&[usize]>) -> Vec<f64>,
) -> Result<GoldenProof, GoldenError> {
    let (inputs, expected) = load(files)?;
    let got = attention(&inputs, None);
    let b = &inputs.batch;
    // The largest `|v|` a sequence reads (NaN past its end must not loosen the bound).
    let scale = (0..b.num_seqs())
        .flat_map(|s| (0..b.len_of(s)).map(move |pos| (s, pos)))
        .flat_map(|(s, pos)| (0..HKV * DH).map(move |gd| (s, pos, gd)))
        .fold(0.0f64, |m, (s, pos, gd)| {
            m.max(f64::from(inputs.value(s, pos, gd / DH, gd % DH)).abs())
        });
    golden::prove(&got, &expected, scale, (HQ, DH))
        .map_err(|worst| GoldenError::Disagrees { worst })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::npy;
    use crate::lab::paged_decode::bugs::Bug;
    use crate::lab::paged_decode::oracle;
    use crate::lab::paged_decode::{Batch, SCALE};

    #[test]
    fn the_decode_oracle_reproduces_the_golden_case() {
        let proof = prove_with(&GOLDEN_FILES, oracle::attention).unwrap();
        golden::assert_proven("paged-decode", &proof, 3 * HQ * DH);
    }

    #[test]
    fn the_golden_case_holds_its_hazards() {
        let (inputs, _) = load(&GOLDEN_FILES).unwrap();
        let b = &inputs.batch;
        assert_eq!(b.seq_len, vec![1, 19, 37]);
        assert!(b.alibi && b.block_table.contains(&0));
        assert_eq!(
            b.block_of(1, 0),
            b.block_of(2, 0),
            "the shared prefix block"
        );
        // NaN right past sequence 1's end, in its own block.
        assert!(inputs.key(1, 19, 3, 0).is_nan());
        let score: f64 = (0..DH)
            .map(|d| {
                f64::from(inputs.q[Batch::q_index(2, 0, d)]) * f64::from(inputs.key(2, 20, 0, d))
            })
            .sum::<f64>()
            * SCALE;
        assert_eq!(score, 1152.0);
        assert!(score.exp().is_infinite());
    }

    #[test]
    fn a_perturbed_oracle_is_caught() {
        // The golden sequences are one partition each, so the combine bugs
        // are the oracle there; every other planted bug must be caught.
        for bug in Bug::ALL.into_iter().filter(|b| !b.is_split()) {
            let err = prove_with(&GOLDEN_FILES, |inputs, seqs| {
                oracle::evaluate(inputs, seqs, Some(bug), oracle::REFERENCE_SPLITS)
            })
            .unwrap_err();
            assert!(
                matches!(err, GoldenError::Disagrees { .. }),
                "{bug:?}: {err}"
            );
        }
        let err = prove_with(&GOLDEN_FILES, |inputs, seqs| {
            let mut out = oracle::attention(inputs, seqs);
            out[Batch::q_index(1, 19, 3)] *= 1.0 + 1e-9;
            out
        })
        .unwrap_err();
        let GoldenError::Disagrees { worst, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(golden::place(worst), (1, 19, 3), "{err}");
    }

    #[test]
    fn unusable_files_are_refused_by_name() {
        let without = |name: &str| -> Vec<(&str, &[u8])> {
            GOLDEN_FILES
                .iter()
                .copied()
                .filter(|(n, _)| *n != name)
                .collect()
        };
        assert!(load(&without("expected.npy"))
            .unwrap_err()
            .to_string()
            .contains("expected.npy: missing"));
        let bad_table = npy::encode_i32(&[3, 3], &[6, 8, 2, 9, 0, 6, 9, 1, 10]).unwrap();
        let mut files = without("block_table.npy");
        files.push(("block_table.npy", &bad_table));
        assert!(load(&files)
            .unwrap_err()
            .to_string()
            .contains("entry [2][2] = 10 is not a block id (0..10"));
        let long = npy::encode_i32(&[3], &[1, 19, 49]).unwrap();
        let mut files = without("seq_len.npy");
        files.push(("seq_len.npy", &long));
        assert!(load(&files)
            .unwrap_err()
            .to_string()
            .contains("3 blocks per sequence; seqLen[2] = 49 needs at least 4"));
        // Sequence 0 made to read slot 1 of its block, which holds NaN.
        let reads_nan = npy::encode_i32(&[3], &[2, 19, 37]).unwrap();
        let mut files = without("seq_len.npy");
        files.push(("seq_len.npy", &reads_nan));
        assert!(load(&files)
            .unwrap_err()
            .to_string()
            .contains("sequence 0 reads a non-finite element at position 1"));
    }
}
