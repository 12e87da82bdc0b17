//! Element-by-element comparison of a kernel's output with the oracle.
//!
//! The result is built for three readers: the verdict (pass or fail and how
//! far off), the diagnosis (where failures lie: which heads, which rows,
//! which rows within a 64-row tile, kept as bit masks and spans so they stay
//! small), and the TUI's heatmap (worst error per row bin and head). It is
//! plain serde data because it crosses a process boundary as JSON; the
//! non-finite values it must carry go through [`crate::nonfinite`].

use serde::{Deserialize, Serialize};

use crate::nonfinite;

/// The output every attention lab writes: `rows` tokens of `heads` heads of
/// `dim` values, row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OutputShape {
    pub rows: usize,
    pub heads: usize,
    pub dim: usize,
}

impl OutputShape {
    /// Elements in all.
    pub fn elements(self) -> usize {
        self.rows * self.heads * self.dim
    }

    /// Index of `out[row][head][dim]`.
    pub fn index(self, row: usize, head: usize, dim: usize) -> usize {
        (row * self.heads + head) * self.dim + dim
    }
}

/// How far an element may be from the oracle: `abs + rel * |reference|`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
}

impl Tolerance {
    /// Allowed absolute error for an element whose exact value is `reference`.
    pub fn allowed(self, reference: f64) -> f64 {
        self.allowed_scaled(reference, 1.0)
    }

    /// [`Self::allowed`] with the absolute part multiplied by `abs_scale`
    /// when it is above 1: for a (row, head) whose values reach that
    /// magnitude, where reduced-precision probabilities err in proportion.
    pub fn allowed_scaled(self, reference: f64, abs_scale: f64) -> f64 {
        self.abs * abs_scale.max(1.0) + self.rel * reference.abs()
    }
}

/// The values of `rows` (each `row_len` long) of a whole output `all`, one
/// after another: how an oracle's answer over listed rows is laid out.
pub fn rows_of(all: &[f64], rows: &[usize], row_len: usize) -> Vec<f64> {
    rows.iter()
        .flat_map(|&row| all[row * row_len..(row + 1) * row_len].iter().copied())
        .collect()
}

/// The element of `got` furthest from `expected`, relative to the larger of
/// the element's magnitude and `scale`, with that relative error: what a
/// golden proof bounds. A NaN error wins, so it fails any bound.
pub fn worst_relative_error(got: &[f64], expected: &[f64], scale: f64) -> (usize, f64) {
    got.iter()
        .zip(expected)
        .map(|(g, e)| (g - e).abs() / e.abs().max(scale))
        .enumerate()
        .fold(
            (0, 0.0),
            |best, next| if next.1 <= best.1 { best } else { next },
        )
}

/// The one factor `out / reference` shares in every element (elements whose
/// reference is too near 0 to carry a ratio skipped), if there is one: an
/// output that is the right answer scaled, as a softmax with a wrong
/// denominator gives.
pub fn common_factor(out: &[f32], reference: &[f64]) -> Option<f64> {
    let mut factor = None;
    for (&o, &r) in out.iter().zip(reference) {
        let o = f64::from(o);
        if !o.is_finite() {
            return None;
        }
        if r.abs() < 1e-3 {
            continue;
        }
        let ratio = o / r;
        match factor {
            None => factor = Some(ratio),
            Some(f) if (ratio - f).abs() > 1e-3 * f64::abs(f) => return None,
            Some(_) => {}
        }
    }
    factor
}

/// Most heads a footprint can tell apart (one bit each).
pub const MAX_HEADS: usize = 32;

/// The bit pattern the runner fills `out` with before a launch: a quiet NaN
/// whose payload no arithmetic produces, so an element still holding it was
/// never written, as opposed to computed as NaN.
pub const POISON_BITS: u32 = 0x7FC0_DEAD;

/// The lab's default block height; failures are also located modulo this.
pub const TILE_ROWS: usize = 64;

/// Most row bins the heatmap keeps, whatever the chunk length.
pub const MAX_HEATMAP_ROWS: usize = 256;

/// How one output matched the oracle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Elements compared (rows x heads x dim).
    pub elements: usize,
    /// Elements that fail, for any reason (the next three counts included).
    pub failing: usize,
    /// Elements still holding [`POISON_BITS`].
    pub unwritten: usize,
    /// NaN elements other than unwritten ones.
    pub nan: usize,
    /// Infinite elements.
    pub inf: usize,
    /// Largest `|out - ref|` over finite elements (0 when none is finite).
    pub max_abs_err: f64,
    /// The element furthest outside its tolerance (see [`compare`] for ties).
    pub worst: Option<Element>,
    /// Largest `abs_err / allowed`; infinite when any element is not finite.
    /// At most 1 exactly when every element passes.
    #[serde(with = "nonfinite")]
    pub worst_ratio: f64,
    pub passed: bool,
    pub heatmap: ErrorMap,
    /// Where the failing elements lie.
    pub where_failing: Footprint,
    /// Where the unwritten elements lie.
    pub where_unwritten: Footprint,
    /// Where the computed NaN and Inf elements lie.
    pub where_non_finite: Footprint,
}

/// One output element and how it compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Element {
    pub row: usize,
    pub head: usize,
    pub dim: usize,
    #[serde(with = "nonfinite")]
    pub got: f32,
    pub expected: f64,
    /// `|got - expected|`, infinite when `got` is not finite.
    #[serde(with = "nonfinite")]
    pub abs_err: f64,
    /// The tolerance at `expected`.
    pub allowed: f64,
}

/// Where a set of elements lies, coarsely enough to stay a few words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footprint {
    /// Bit `h` is set when the set holds an element of query head `h`.
    pub heads: u32,
    /// Bit `t` is set when the set holds an element of a row `r` with `r % 64 == t`.
    pub tile_rows: u64,
    /// First and last row holding an element of the set.
    pub rows: Option<RowSpan>,
    /// Rows holding at least one element of the set.
    pub row_count: usize,
    /// Elements in the set.
    pub elements: usize,
}

/// An inclusive range of query rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowSpan {
    pub first: usize,
    pub last: usize,
}

/// Per (row bin, head), the worst `abs_err / allowed` of the bin's elements.
///
/// Rows are grouped into at most [`MAX_HEATMAP_ROWS`] bins of consecutive
/// rows (sizes differ by at most one) and a bin keeps its maximum, so a
/// single bad element is never averaged away.
///
/// A map read back (a history store, a replay, a journal) is checked as it
/// is read ([`ErrorMap::try_from`]): its sizes within what a lab makes and
/// its cells exactly `rows * heads`, so a planted value can neither index
/// past the cells, divide by zero bins nor make a screen loop for ever.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "UncheckedErrorMap")]
pub struct ErrorMap {
    /// Row bins.
    pub rows: usize,
    /// Query heads (columns).
    pub heads: usize,
    /// Output rows the bins cover (named `chunk_len` on the wire, as
    /// before labs were values).
    #[serde(rename = "chunk_len")]
    pub output_rows: usize,
    /// `rows * heads` ratios, bin-major; infinite where an element is not finite.
    #[serde(with = "nonfinite::seq")]
    pub cells: Vec<f32>,
}

/// The most query heads a map may have: above every lab's (32).
pub const MAX_HEATMAP_HEADS: usize = 256;
/// The most output rows a map may cover: above every lab's largest case.
pub const MAX_HEATMAP_OUTPUT_ROWS: usize = 1 << 24;

/// An [`ErrorMap`] as it comes off the wire or the disk, before its checks.
#[derive(Deserialize)]
struct UncheckedErrorMap {
    rows: usize,
    heads: usize,
    #[serde(rename = "chunk_len")]
    output_rows: usize,
    #[serde(with = "nonfinite::seq")]
    cells: Vec<f32>,
}

impl TryFrom<UncheckedErrorMap> for ErrorMap {
    type Error = String;

    fn try_from(map: UncheckedErrorMap) -> Result<Self, String> {
        let UncheckedErrorMap {
            rows,
            heads,
            output_rows,
            cells,
        } = map;
        if output_rows == 0 || output_rows > MAX_HEATMAP_OUTPUT_ROWS {
            return Err(format!(
                "heatmap of {output_rows} output rows (1 to {MAX_HEATMAP_OUTPUT_ROWS})"
            ));
        }
        if rows != output_rows.min(MAX_HEATMAP_ROWS) {
            return Err(format!(
                "heatmap of {rows} row bins for {output_rows} rows (expected {})",
                output_rows.min(MAX_HEATMAP_ROWS)
            ));
        }
        if heads == 0 || heads > MAX_HEATMAP_HEADS {
            return Err(format!(
                "heatmap of {heads} heads (1 to {MAX_HEATMAP_HEADS})"
            ));
        }
        if cells.len() != rows * heads {
            return Err(format!(
                "heatmap of {} cells for {rows} bins of {heads} heads",
                cells.len()
            ));
        }
        Ok(Self {
            rows,
            heads,
            output_rows,
            cells,
        })
    }
}

impl ErrorMap {
    fn new(output_rows: usize, heads: usize) -> Self {
        let rows = output_rows.min(MAX_HEATMAP_ROWS);
        Self {
            rows,
            heads,
            output_rows,
            cells: vec![0.0; rows * heads],
        }
    }

    /// The bin holding query row `row`.
    pub fn bin_of(&self, row: usize) -> usize {
        row * self.rows / self.output_rows
    }

    /// The query rows bin `bin` covers.
    pub fn rows_of_bin(&self, bin: usize) -> std::ops::Range<usize> {
        let start = |b: usize| (b * self.output_rows).div_ceil(self.rows);
        start(bin)..start(bin + 1)
    }

    /// The worst ratio in bin `bin` for query head `head`.
    pub fn cell(&self, bin: usize, head: usize) -> f32 {
        self.cells[bin * self.heads + head]
    }

    fn record(&mut self, row: usize, head: usize, ratio: f64) {
        let index = self.bin_of(row) * self.heads + head;
        self.cells[index] = self.cells[index].max(ratio as f32);
    }
}

impl Footprint {
    /// Where the elements at `indices` (ascending, into an output of `shape`) lie.
    pub fn of(shape: OutputShape, indices: impl IntoIterator<Item = usize>) -> Self {
        let mut footprint = Self::default();
        let per_row = shape.heads * shape.dim;
        for index in indices {
            footprint.record(index / per_row, index / shape.dim % shape.heads);
        }
        footprint
    }

    fn record(&mut self, row: usize, head: usize) {
        self.heads |= 1 << head;
        self.tile_rows |= 1 << (row % TILE_ROWS);
        match &mut self.rows {
            Some(span) if span.last == row => {}
            Some(span) => {
                span.last = row;
                self.row_count += 1;
            }
            None => {
                self.rows = Some(RowSpan {
                    first: row,
                    last: row,
                });
                self.row_count = 1;
            }
        }
        self.elements += 1;
    }
}

/// What one element is, before it is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pass,
    Inaccurate,
    Unwritten,
    ComputedNonFinite,
}

/// Compares `out` with the oracle's `reference`, both of `shape`.
///
/// An element passes when it is finite and `|out - ref| <= tolerance(ref)`,
/// computed in `f64` (so `-0.0` equals `0.0` and denormals count by value).
/// The worst element is the one with the largest `abs_err / allowed`; a
/// non-finite element counts as infinitely far off, and among equals the
/// first in memory order wins, so the choice is deterministic.
///
/// # Panics
/// When `out` or `reference` does not hold `shape.elements()` values, or
/// `shape` has more than [`MAX_HEADS`] heads.
pub fn compare(
    shape: OutputShape,
    tolerance: Tolerance,
    out: &[f32],
    reference: &[f64],
) -> Comparison {
    compare_scaled(shape, tolerance, None, out, reference)
}

/// [`compare`] with the tolerance's absolute part scaled per (row, head) by
/// `abs_scales` (laid out `[rows][heads]`, see [`Tolerance::allowed_scaled`]).
pub fn compare_scaled(
    shape: OutputShape,
    tolerance: Tolerance,
    abs_scales: Option<&[f64]>,
    out: &[f32],
    reference: &[f64],
) -> Comparison {
    if let Some(scales) = abs_scales {
        assert_eq!(
            scales.len(),
            shape.rows * shape.heads,
            "one scale per (row, head)"
        );
    }
    assert_eq!(out.len(), shape.elements(), "out does not match {shape:?}");
    assert_eq!(
        reference.len(),
        shape.elements(),
        "reference does not match {shape:?}"
    );
    assert!(shape.heads <= MAX_HEADS, "{shape:?}: too many heads");
    let (heads, dims) = (shape.heads, shape.dim);
    let mut result = Comparison {
        elements: out.len(),
        failing: 0,
        unwritten: 0,
        nan: 0,
        inf: 0,
        max_abs_err: 0.0,
        worst: None,
        worst_ratio: 0.0,
        passed: false,
        heatmap: ErrorMap::new(shape.rows, heads),
        where_failing: Footprint::default(),
        where_unwritten: Footprint::default(),
        where_non_finite: Footprint::default(),
    };
    for (index, (&got, &expected)) in out.iter().zip(reference).enumerate() {
        let (row, head, dim) = (index / (heads * dims), index / dims % heads, index % dims);
        let abs_scale = abs_scales.map_or(1.0, |scales| scales[index / dims]);
        let allowed = tolerance.allowed_scaled(expected, abs_scale);
        let finite = got.is_finite() && expected.is_finite();
        let abs_err = if finite {
            (f64::from(got) - expected).abs()
        } else {
            f64::INFINITY
        };
        let ratio = abs_err / allowed;
        let outcome = if got.to_bits() == POISON_BITS {
            Outcome::Unwritten
        } else if !got.is_finite() {
            Outcome::ComputedNonFinite
        } else if finite && abs_err <= allowed {
            Outcome::Pass
        } else {
            Outcome::Inaccurate
        };

        if got.is_finite() {
            result.max_abs_err = result.max_abs_err.max(abs_err);
        }
        result.heatmap.record(row, head, ratio);
        if result.worst.is_none() || ratio > result.worst_ratio {
            result.worst_ratio = ratio;
            result.worst = Some(Element {
                row,
                head,
                dim,
                got,
                expected,
                abs_err,
                allowed,
            });
        }
        if outcome == Outcome::Pass {
            continue;
        }
        result.failing += 1;
        result.where_failing.record(row, head);
        match outcome {
            Outcome::Unwritten => {
                result.unwritten += 1;
                result.where_unwritten.record(row, head);
            }
            Outcome::ComputedNonFinite => {
                if got.is_nan() {
                    result.nan += 1;
                } else {
                    result.inf += 1;
                }
                result.where_non_finite.record(row, head);
            }
            Outcome::Pass | Outcome::Inaccurate => {}
        }
    }
    result.passed = result.failing == 0;
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn listed_rows_are_cut_from_the_whole_output() {
        let all: Vec<f64> = (0..12).map(f64::from).collect();
        assert_eq!(
            super::rows_of(&all, &[0, 2], 3),
            vec![0.0, 1.0, 2.0, 6.0, 7.0, 8.0]
        );
    }

    #[test]
    fn a_planted_heatmap_is_refused_when_read() {
        let read = |json: &str| serde_json::from_str::<ErrorMap>(json);
        let sound = read(r#"{"rows":2,"heads":2,"chunk_len":2,"cells":[0,1,2,"inf"]}"#);
        assert!(sound.is_ok(), "{sound:?}");
        // No bins (a division by zero), a million heads (a screen that never
        // ends), 2^60 rows (tile marks without end), cells short of rows x heads.
        for planted in [
            r#"{"rows":0,"heads":2,"chunk_len":0,"cells":[]}"#,
            r#"{"rows":2,"heads":1000000,"chunk_len":2,"cells":[]}"#,
            r#"{"rows":256,"heads":1,"chunk_len":1152921504606846976,"cells":[]}"#,
            r#"{"rows":2,"heads":2,"chunk_len":2,"cells":[0]}"#,
        ] {
            let refused = read(planted).expect_err(planted);
            assert!(refused.to_string().contains("heatmap of"), "{refused}");
        }
    }

    use super::*;

    const LAB_TOLERANCE: Tolerance = Tolerance {
        abs: 1e-4,
        rel: 1e-3,
    };
    const ABS_TOL: f64 = LAB_TOLERANCE.abs;
    const HQ: usize = 32;
    const DH: usize = 64;
    const SHAPE: OutputShape = OutputShape {
        rows: 3,
        heads: HQ,
        dim: DH,
    };

    fn tolerance(reference: f64) -> f64 {
        LAB_TOLERANCE.allowed(reference)
    }

    fn at(row: usize, head: usize, dim: usize) -> usize {
        SHAPE.index(row, head, dim)
    }

    fn reference() -> Vec<f64> {
        (0..SHAPE.elements())
            .map(|i| (i % 97) as f64 / 7.0 - 6.0)
            .collect()
    }

    /// The reference rounded to f32: well within tolerance everywhere.
    fn faithful(reference: &[f64]) -> Vec<f32> {
        reference.iter().map(|&x| x as f32).collect()
    }

    /// Compares a single element `got` against `expected` in an otherwise exact output.
    fn single(got: f32, expected: f64) -> Comparison {
        let mut reference = reference();
        let index = at(1, 2, 3);
        reference[index] = expected;
        let mut out = faithful(&reference);
        out[index] = got;
        compare(SHAPE, LAB_TOLERANCE, &out, &reference)
    }

    #[test]
    fn a_faithful_output_passes() {
        let reference = reference();
        let cmp = compare(SHAPE, LAB_TOLERANCE, &faithful(&reference), &reference);
        assert!(cmp.passed);
        assert_eq!(cmp.elements, 3 * 32 * 64);
        assert_eq!((cmp.failing, cmp.unwritten, cmp.nan, cmp.inf), (0, 0, 0, 0));
        assert!(cmp.worst_ratio > 0.0 && cmp.worst_ratio < 1e-3);
        assert_eq!(cmp.where_failing, Footprint::default());
    }

    #[test]
    fn exactly_at_tolerance_passes_and_just_above_fails() {
        for expected in [1.0, 3.25, 0.0, 1e-3] {
            // The last f32 whose error still fits, found by stepping down from the edge.
            let mut at = (expected + tolerance(expected)) as f32;
            while f64::from(at) - expected > tolerance(expected) {
                at = f32::from_bits(at.to_bits() - 1);
            }
            let above = f32::from_bits(at.to_bits() + 1);
            assert!(single(at, expected).passed, "{at} vs {expected}");
            assert!(!single(above, expected).passed, "{above} vs {expected}");
        }
        assert!(single(0.0, 1e-4).passed, "|0 - 1e-4| = 1e-4 <= 1e-4 + 1e-7");
        assert!(!single(0.0, 1.002e-4).passed);
    }

    #[test]
    fn signed_zeros_are_equal_and_denormals_count_by_value() {
        assert!(single(-0.0, 0.0).passed);
        assert!(single(0.0, -0.0).passed);
        let denormal = f32::from_bits(1);
        let reference = vec![0.0; SHAPE.elements()];
        let mut out = vec![-0.0f32; SHAPE.elements()];
        out[5] = denormal;
        let cmp = compare(SHAPE, LAB_TOLERANCE, &out, &reference);
        assert!(cmp.passed);
        assert_eq!(cmp.max_abs_err, f64::from(denormal));
        assert_eq!(cmp.worst.unwrap().dim, 5);
        // A denormal reference is a value like any other: a large output still fails.
        assert!(!single(1.0, f64::from(denormal)).passed);
    }

    #[test]
    fn nan_and_infinities_never_pass() {
        for (got, nan, inf) in [
            (f32::NAN, 1, 0),
            (f32::INFINITY, 0, 1),
            (f32::NEG_INFINITY, 0, 1),
        ] {
            let cmp = single(got, 1e30);
            assert!(!cmp.passed, "{got}");
            assert_eq!(
                (cmp.failing, cmp.nan, cmp.inf, cmp.unwritten),
                (1, nan, inf, 0)
            );
            assert_eq!(cmp.worst_ratio, f64::INFINITY);
            let worst = cmp.worst.unwrap();
            assert_eq!((worst.row, worst.head, worst.dim), (1, 2, 3));
            assert_eq!(worst.got.to_bits(), got.to_bits());
            assert_eq!(cmp.heatmap.cell(1, 2), f32::INFINITY);
            assert!(cmp.max_abs_err.is_finite());
        }
        // An infinite reference would pass a loose check (inf - inf is NaN); it must fail.
        assert!(!single(f32::INFINITY, f64::INFINITY).passed);
    }

    #[test]
    fn poisoned_elements_count_as_unwritten_not_nan() {
        let reference = reference();
        let mut out = faithful(&reference);
        for head in 0..HQ {
            for dim in 0..DH {
                out[at(2, head, dim)] = f32::from_bits(POISON_BITS);
            }
        }
        out[at(0, 7, 0)] = f32::NAN;
        let cmp = compare(SHAPE, LAB_TOLERANCE, &out, &reference);
        assert_eq!(cmp.unwritten, HQ * DH);
        assert_eq!(cmp.nan, 1);
        assert_eq!(cmp.failing, HQ * DH + 1);
        assert_eq!(
            cmp.where_unwritten,
            Footprint {
                heads: u32::MAX,
                tile_rows: 1 << 2,
                rows: Some(RowSpan { first: 2, last: 2 }),
                row_count: 1,
                elements: HQ * DH,
            }
        );
        assert_eq!(cmp.where_non_finite.heads, 1 << 7);
        assert_eq!(cmp.where_failing.row_count, 2);
        // Both are infinitely bad; the NaN comes first in memory.
        let worst = cmp.worst.unwrap();
        assert_eq!((worst.row, worst.head), (0, 7));
    }

    #[test]
    fn the_worst_is_the_largest_ratio_and_the_first_on_ties() {
        let reference = vec![0.0; SHAPE.elements()];
        let mut out = vec![0.0f32; SHAPE.elements()];
        out[at(0, 1, 0)] = 0.5;
        out[at(1, 0, 0)] = 2.0;
        out[at(2, 0, 0)] = -2.0;
        let cmp = compare(SHAPE, LAB_TOLERANCE, &out, &reference);
        let worst = cmp.worst.unwrap();
        assert_eq!((worst.row, worst.head, worst.got), (1, 0, 2.0));
        assert_eq!(cmp.worst_ratio, 2.0 / ABS_TOL);
        assert_eq!(cmp.max_abs_err, 2.0);
        assert_eq!(cmp.failing, 3);
        assert_eq!(cmp.where_failing.heads, 0b11);
        assert_eq!(cmp.where_failing.rows, Some(RowSpan { first: 0, last: 2 }));
    }

    #[test]
    fn heatmap_bins_rows_and_keeps_the_maximum() {
        let shape = OutputShape {
            rows: 1000,
            ..SHAPE
        };
        let reference = vec![1.0; shape.elements()];
        let mut out = vec![1.0f32; shape.elements()];
        out[at(999, 31, 63)] = 1.0 + 1.0 / 64.0;
        out[at(998, 31, 0)] = 1.0 + 1.0 / 1024.0;
        let cmp = compare(shape, LAB_TOLERANCE, &out, &reference);
        let map = &cmp.heatmap;
        assert_eq!((map.rows, map.heads), (256, 32));
        assert_eq!(map.cells.len(), 256 * 32);
        // The bins partition the rows in order, sizes 3 or 4.
        let mut next = 0;
        for bin in 0..map.rows {
            let rows = map.rows_of_bin(bin);
            assert_eq!(rows.start, next);
            assert!(matches!(rows.len(), 3 | 4), "bin {bin}: {rows:?}");
            assert!(rows.clone().all(|r| map.bin_of(r) == bin));
            next = rows.end;
        }
        assert_eq!(next, 1000);
        let expected = (1.0 / 64.0) / tolerance(1.0);
        assert_eq!(map.cell(255, 31), expected as f32);
        assert_eq!(map.cell(255, 30), 0.0);
        assert_eq!(map.cell(0, 31), 0.0);
    }

    #[test]
    fn short_chunks_get_one_bin_per_row() {
        let reference = reference();
        let cmp = compare(SHAPE, LAB_TOLERANCE, &faithful(&reference), &reference);
        assert_eq!(cmp.heatmap.rows, 3);
        assert_eq!(cmp.heatmap.rows_of_bin(2), 2..3);
    }

    #[test]
    fn tile_rows_record_row_offsets_within_64_row_tiles() {
        let shape = OutputShape { rows: 130, ..SHAPE };
        let reference = vec![0.0; shape.elements()];
        let mut out = vec![0.0f32; shape.elements()];
        for row in [60, 63, 124, 129] {
            out[at(row, 4, 9)] = 1.0;
        }
        let footprint = compare(shape, LAB_TOLERANCE, &out, &reference).where_failing;
        assert_eq!(footprint.tile_rows, (1 << 60) | (1 << 63) | (1 << 1));
        assert_eq!(footprint.row_count, 4);
        assert_eq!(
            footprint.rows,
            Some(RowSpan {
                first: 60,
                last: 129
            })
        );
    }

    #[test]
    fn survives_json_with_non_finite_values() {
        let cmp = single(f32::from_bits(POISON_BITS), 1.0);
        let json = serde_json::to_string(&cmp).unwrap();
        let back: Comparison = serde_json::from_str(&json).unwrap();
        assert_eq!(back.worst_ratio, f64::INFINITY);
        assert!(back.worst.as_ref().unwrap().got.is_nan());
        assert_eq!(back.heatmap.cell(1, 2), f32::INFINITY);
        assert_eq!(back.where_unwritten, cmp.where_unwritten);
        assert_eq!(back.unwritten, 1);
    }
}
