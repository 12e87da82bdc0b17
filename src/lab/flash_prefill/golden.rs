//! The proof an oracle owes before it grades: agreement with a golden case.
//!
//! The golden case (`assets/golden/`, made by `scripts/make_golden.py`) is a
//! small input with a planted score beyond float64's `exp` range and a
//! planted future key, whose expected output was computed independently at
//! 50 digits. If [`super::oracle::attention`] reproduces it to
//! [`RELATIVE_BOUND`], the oracle's softmax, causal mask, head mapping and
//! layout are right, and only then do its verdicts mean anything. The
//! core works on bytes so that a copy embedded in the binary can be checked
//! the same way as the files on disk.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::contract::{Shape, DH, HKV, HQ};
use super::oracle;
use crate::lab::golden::{self, Disagreement};
use crate::lab::npy::{self, NpyError};

pub use crate::lab::golden::RELATIVE_BOUND;

/// What a successful proof established.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoldenProof {
    pub shape: Shape,
    pub elements: usize,
    /// The largest relative error seen (at most [`RELATIVE_BOUND`]).
    pub max_relative_error: f64,
}

/// Why the oracle could not be proven.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("golden {file}: {source}")]
    Unreadable {
        file: &'static str,
        source: NpyError,
    },
    #[error("golden {file} has shape {found:?}, expected {expected}")]
    WrongShape {
        file: &'static str,
        found: Vec<usize>,
        expected: String,
    },
    #[error("the oracle disagrees with the golden case at row {}, {worst}", worst.row)]
    Disagrees { worst: Disagreement },
}

const FILES: [&str; 4] = ["q.npy", "k.npy", "v.npy", "expected.npy"];

/// Proves the oracle against the golden case in `dir` (`q.npy`, `k.npy`, `v.npy`, `expected.npy`).
pub fn prove_oracle(dir: &Path) -> Result<GoldenProof, GoldenError> {
    let read = |index: usize| {
        std::fs::read(dir.join(FILES[index])).map_err(|source| GoldenError::Unreadable {
            file: FILES[index],
            source: NpyError::Io {
                path: dir.join(FILES[index]),
                source,
            },
        })
    };
    prove_oracle_from_bytes(&read(0)?, &read(1)?, &read(2)?, &read(3)?)
}

/// Proves the oracle against the golden case embedded in the binary (assets/golden).
pub fn prove_embedded() -> Result<GoldenProof, GoldenError> {
    prove_oracle_from_bytes(
        include_bytes!("../../../assets/golden/q.npy"),
        include_bytes!("../../../assets/golden/k.npy"),
        include_bytes!("../../../assets/golden/v.npy"),
        include_bytes!("../../../assets/golden/expected.npy"),
    )
}

/// Proves the oracle against a golden case given as the bytes of its four `.npy` files.
pub fn prove_oracle_from_bytes(
    q: &[u8],
    k: &[u8],
    v: &[u8],
    expected: &[u8],
) -> Result<GoldenProof, GoldenError> {
    let unreadable = |file| move |source| GoldenError::Unreadable { file, source };
    let (q_shape, q) = npy::decode_f32(q).map_err(unreadable(FILES[0]))?;
    let (k_shape, k) = npy::decode_f32(k).map_err(unreadable(FILES[1]))?;
    let (v_shape, v) = npy::decode_f32(v).map_err(unreadable(FILES[2]))?;
    let (out_shape, expected) = npy::decode_f64(expected).map_err(unreadable(FILES[3]))?;

    let chunk_len = leading_dim(FILES[0], &q_shape, HQ, "(chunk_len, 32, 64)")?;
    let seq_len = leading_dim(FILES[1], &k_shape, HKV, "(seq_len, 8, 64)")?;
    let wrong_shape = |file, found: Vec<usize>, expected: String| GoldenError::WrongShape {
        file,
        found,
        expected,
    };
    if seq_len < chunk_len {
        let expected = format!("at least {chunk_len} positions, the chunk's own keys");
        return Err(wrong_shape(FILES[1], k_shape, expected));
    }
    if v_shape != k_shape {
        return Err(wrong_shape(
            FILES[2],
            v_shape,
            format!("{k_shape:?}, like k.npy"),
        ));
    }
    if out_shape != q_shape {
        return Err(wrong_shape(
            FILES[3],
            out_shape,
            format!("{q_shape:?}, like q.npy"),
        ));
    }
    let shape = Shape {
        chunk_len,
        prefix_len: seq_len - chunk_len,
    };

    let got = oracle::attention(shape, &q, &k, &v);
    let value_scale = v.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs()));
    let proof = golden::prove(&got, &expected, value_scale, (HQ, DH))
        .map_err(|worst| GoldenError::Disagrees { worst })?;
    Ok(GoldenProof {
        shape,
        elements: proof.elements,
        max_relative_error: proof.max_relative_error,
    })
}

/// The first dimension of a `(n, heads, 64)` shape, or why the shape is wrong.
fn leading_dim(
    file: &'static str,
    shape: &[usize],
    heads: usize,
    expected: &str,
) -> Result<usize, GoldenError> {
    match *shape {
        [n, h, d] if h == heads && d == DH && n > 0 => Ok(n),
        _ => Err(GoldenError::WrongShape {
            file,
            found: shape.to_vec(),
            expected: expected.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract::SCALE;
    use super::*;
    use std::path::PathBuf;

    fn golden_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/golden")
    }

    fn golden_bytes() -> [Vec<u8>; 4] {
        FILES.map(|file| std::fs::read(golden_dir().join(file)).unwrap())
    }

    fn prove(bytes: &[Vec<u8>; 4]) -> Result<GoldenProof, GoldenError> {
        prove_oracle_from_bytes(&bytes[0], &bytes[1], &bytes[2], &bytes[3])
    }

    #[test]
    fn the_oracle_reproduces_the_golden_case() {
        let proof = prove_oracle(&golden_dir()).unwrap();
        assert_eq!(
            proof.shape,
            Shape {
                chunk_len: 5,
                prefix_len: 3
            }
        );
        assert_eq!(proof.elements, 5 * 32 * 64);
        assert!(proof.max_relative_error <= RELATIVE_BOUND);
        eprintln!(
            "golden proof: max relative error {:e}",
            proof.max_relative_error
        );
    }

    #[test]
    fn the_golden_case_plants_a_score_past_exp_range() {
        let (_, q) = npy::read_f32(&golden_dir().join("q.npy")).unwrap();
        let (_, k) = npy::read_f32(&golden_dir().join("k.npy")).unwrap();
        let score: f64 = (0..DH)
            .map(|d| f64::from(q[Shape::q_index(2, 0, d)]) * f64::from(k[Shape::kv_index(1, 0, d)]))
            .sum::<f64>()
            * SCALE;
        assert!(score.exp().is_infinite(), "score {score}");
    }

    #[test]
    fn a_changed_expected_value_is_caught_and_located() {
        let mut bytes = golden_bytes();
        let (shape, mut expected) = npy::decode_f64(&bytes[3]).unwrap();
        let index = Shape::q_index(4, 17, 33);
        expected[index] += 1e-9 * expected[index].abs().max(2.0);
        bytes[3] = npy::encode_f64(&shape, &expected).unwrap();
        let err = prove(&bytes).unwrap_err();
        let GoldenError::Disagrees { worst, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(golden::place(worst), (4, 17, 33), "{err}");
        assert!(err.to_string().contains("row 4, head 17, dim 33"), "{err}");
    }

    #[test]
    fn inputs_of_the_wrong_shape_are_refused() {
        let mut bytes = golden_bytes();
        let (_, q) = npy::decode_f32(&bytes[0]).unwrap();
        bytes[0] = npy::encode_f32(&[5, 64, 32], &q).unwrap();
        assert!(matches!(
            prove(&bytes),
            Err(GoldenError::WrongShape { file: "q.npy", .. })
        ));

        let mut bytes = golden_bytes();
        bytes[2] = bytes[2][..bytes[2].len() - 4].to_vec();
        let err = prove(&bytes).unwrap_err();
        assert!(
            err.to_string().starts_with("golden v.npy: truncated"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_directory_names_the_file() {
        let err = prove_oracle(Path::new("/nonexistent")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/q.npy"), "{err}");
    }
}
