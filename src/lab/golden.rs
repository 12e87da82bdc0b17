//! What every lab's golden proof shares: the bound its oracle must meet on
//! a case whose expected output was computed independently (at 50 digits,
//! from the definition), and where it missed when it did.
//!
//! The bound is relative to the larger of an element's magnitude and the
//! largest `|v|` a row can see, because the rounding of a weighted sum of
//! values scales with the values: an output near zero from large values
//! cancelling carries an absolute error that would look huge relative to
//! the output itself.

use crate::grade::compare::worst_relative_error;

/// How close an oracle must come to its golden output (see the module).
pub const RELATIVE_BOUND: f64 = 1e-12;

/// What a successful proof established.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldenProof {
    pub elements: usize,
    /// The largest relative error seen (at most [`RELATIVE_BOUND`]).
    pub max_relative_error: f64,
}

/// The element of an output `[rows][heads][dim]` where an oracle missed most.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    pub row: usize,
    pub head: usize,
    pub dim: usize,
    pub got: f64,
    pub expected: f64,
    pub relative_error: f64,
}

/// The element, after its row (which each lab names in its own words).
impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "head {}, dim {}: {:e} instead of {:e} (relative error {:.3e}, bound {RELATIVE_BOUND:e})",
            self.head, self.dim, self.got, self.expected, self.relative_error
        )
    }
}

/// Holds `got` to `expected` (both `[rows][heads][dim]`, `shape` being
/// `(heads, dim)`) within [`RELATIVE_BOUND`] of the larger of each element
/// and `value_scale`.
pub fn prove(
    got: &[f64],
    expected: &[f64],
    value_scale: f64,
    (heads, dim): (usize, usize),
) -> Result<GoldenProof, Disagreement> {
    let (worst, max_relative_error) = worst_relative_error(got, expected, value_scale);
    if max_relative_error.is_nan() || max_relative_error > RELATIVE_BOUND {
        return Err(Disagreement {
            row: worst / (heads * dim),
            head: worst / dim % heads,
            dim: worst % dim,
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

/// That `proof` held over `elements` elements (a lab's golden test), saying
/// how close it came.
#[cfg(test)]
pub fn assert_proven(lab: &str, proof: &GoldenProof, elements: usize) {
    assert_eq!(proof.elements, elements, "{lab}");
    assert!(proof.max_relative_error <= RELATIVE_BOUND, "{lab}");
    eprintln!(
        "{lab} golden proof: max relative error {:e}",
        proof.max_relative_error
    );
}

/// One head's output for one query row by the definition, in plain float64:
/// a two-pass softmax over `scores` (one per visible key, already scaled)
/// and the weighted sum of `value(key, dim)`, `dim` wide. What a long case's
/// sampled rows are held to, within the golden bound ([`prove`]), where no
/// file of 50-digit answers is kept for a case that size.
#[cfg(test)]
pub fn by_definition(scores: &[f64], value: impl Fn(usize, usize) -> f64, dim: usize) -> Vec<f64> {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    (0..dim)
        .map(|d| {
            let sum: f64 = weights
                .iter()
                .enumerate()
                .map(|(j, w)| w * value(j, d))
                .sum();
            sum / total
        })
        .collect()
}

/// Where a disagreement is: `(row, head, dim)`.
#[cfg(test)]
pub fn place(worst: &Disagreement) -> (usize, usize, usize) {
    (worst.row, worst.head, worst.dim)
}

/// A proof's outcome as the engine takes it: what was established, or why
/// the oracle cannot be trusted.
pub fn said<P: std::fmt::Debug, E: std::fmt::Display>(
    proof: Result<P, E>,
) -> Result<String, String> {
    proof.map(|p| format!("{p:?}")).map_err(|e| e.to_string())
}

/// The files of a golden case folder under `assets/`, embedded, by name:
/// `embedded_files!("golden-paged", "q.npy", "k_cache.npy", ...)`.
macro_rules! embedded_files {
    ($dir:literal, $($file:literal),+ $(,)?) => {
        [$((
            $file,
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/", $dir, "/", $file)).as_slice(),
        )),+]
    };
}
pub(crate) use embedded_files;
