//! A one-line verdict a student can act on.
//!
//! The comparison says how many elements fail and where; the runner adds
//! what the output alone cannot show (stray writes, modified inputs, a
//! result that moves between runs) and what reruns under changed conditions
//! showed ([`Experiments`]: which buffer's guard bands a NaN came from,
//! whether shrinking the scores removes it, whether poisoned elements were
//! never written). Rules are tried from the most severe down, because one
//! root cause explains the rest: a race or an out-of-bounds write can
//! produce any wrong number, and an unwritten row is a launch problem
//! before it is an arithmetic one. The first rule that fits names the cause
//! and where it shows; a rule about planted scores fires only on a case
//! that plants them.

use super::bugs::{replay_matches, FlashBug, Tensors};
use super::contract::{Inputs, Shape, DH, GROUP, HQ};
use crate::grade::compare::{common_factor, Comparison, Footprint, RowSpan, TILE_ROWS};
use crate::grade::experiment::Experiments;
use crate::grade::integrity::{integrity_problem, Integrity};
use crate::lab::definition::Diagnosis;
use crate::lab::experiment::{
    explain_copied_from_out, explain_expected_file, explain_non_finite, explain_repeats,
    non_finite_kind,
};
use crate::lab::verdict::cause;

/// Below this worst error-to-allowance ratio, failures read as lost precision, not a wrong formula.
const PRECISION_LOSS_RATIO: f64 = 10.0;

/// Failing elements all within this fraction of the largest value in their
/// (row, head) read as lost precision: TF32 keeps 10 mantissa bits (a
/// product's relative error up to 2^-11), and a sum of such products over
/// a row stays within a few times that of its largest term.
const PRECISION_LOSS_FRACTION: f64 = 4e-3;

/// A query head whose inputs are this many times larger than the
/// smallest head's holds large values (a case scales some heads by 8)...
const LARGE_HEAD_RATIO: f32 = 4.0;

/// ...and at least this large itself: the product of the three largest
/// |q|, |k|, |v| of inputs drawn within ±1 is about 1, so a case that scales
/// one head down makes no other head "large".
const LARGE_HEAD_FLOOR: f32 = 4.0;

/// Where only the heads with large inputs fail, errors within this
/// fraction of their (row, head)'s largest value still read as lost
/// precision: scores 64x larger carry a TF32 rounding 64x larger into the
/// exponent (the top ladder rung in plain TF32 stays under 1% on the H100),
/// while a wrong head map's output is another head's, off by its whole size.
const LARGE_VALUE_LOSS_FRACTION: f64 = 0.05;

/// Causes only this lab's diagnosis names (the shared ones are in [`cause`]).
pub mod flash_cause {
    pub const ROWS_NEVER_WRITTEN: &str = "rows-never-written";
    pub const HEADS_NEVER_WRITTEN: &str = "heads-never-written";
    pub const PLANTED_HEADS_WRONG: &str = "planted-heads-wrong";
    pub const DENOMINATOR_TOO_LARGE: &str = "denominator-too-large";
    pub const PARTIAL_TILE: &str = "partial-row-tile";
    pub const LATER_TILES: &str = "later-row-tiles";
    pub const TILE_TAIL_ROWS: &str = "tile-tail-rows";
    pub const KV_HEAD_MAPPING: &str = "kv-head-mapping";
    pub const PRECISION: &str = "precision";
    pub const EVERYTHING_WRONG: &str = "everything-wrong";
    pub const LAST_ROWS_WRONG: &str = "last-rows-wrong";
}

/// What one launch produced, with the case's plants and the experiments' findings.
pub struct Reading<'a> {
    pub shape: Shape,
    /// Query heads where the case plants large scores (0: it plants nothing).
    pub planted_heads: u32,
    /// Query heads whose inputs are much larger than the others'
    /// ([`large_value_heads`]; 0: every head alike).
    pub large_heads: u32,
    pub out: &'a [f32],
    pub reference: &'a [f64],
    pub cmp: &'a Comparison,
    pub integrity: &'a Integrity,
    pub experiments: &'a Experiments,
    /// The case's inputs, for replaying the planted bugs' models (`None`
    /// when they are not at hand: no replay then).
    pub tensors: Option<Tensors<'a>>,
}

/// The likeliest cause of what the reading shows, in one line.
pub fn diagnose(reading: &Reading<'_>) -> Diagnosis {
    let (shape, cmp, integrity) = (reading.shape, reading.cmp, reading.integrity);
    let place = |at: &Footprint| place(shape, at);
    if integrity.out_of_bounds_writes > 0 {
        return Diagnosis::new(
            format!(
                "out-of-bounds write: the kernel wrote {} floats outside out; guard every store \
                 with row < chunkLen and check the index arithmetic",
                integrity.out_of_bounds_writes
            ),
            cause::OUT_OF_BOUNDS_WRITE,
        );
    }
    if !integrity.inputs_modified.is_empty() {
        let line = integrity_problem(integrity).unwrap_or_default();
        return Diagnosis::new(line, cause::INPUT_WRITTEN);
    }
    if integrity.runs_differ {
        return match &reading.experiments.repeats {
            Some(trial) => explain_repeats(trial, &place),
            None => Diagnosis::new(
                integrity_problem(integrity).unwrap_or_default(),
                cause::RACE,
            ),
        };
    }
    if let Some(line) = reading
        .experiments
        .expected_file
        .as_ref()
        .and_then(|check| explain_expected_file(check, &place))
    {
        return line;
    }
    if cmp.unwritten > 0 {
        if let Some(line) = reading
            .experiments
            .unwritten
            .as_ref()
            .and_then(|trial| explain_copied_from_out(trial, &place))
        {
            return line;
        }
        let mut said = unwritten(shape, &cmp.where_unwritten);
        if reading.experiments.unwritten.is_some() {
            said.line
                .push_str(" (measured: they kept a second, finite starting value too)");
        }
        return said;
    }
    if cmp.nan + cmp.inf > 0 {
        return match &reading.experiments.non_finite {
            Some(trial) => keyless(reading, &trial.unexplained)
                .unwrap_or_else(|| explain_non_finite(non_finite_kind(cmp), trial, &place)),
            None => non_finite(shape, reading.planted_heads, cmp),
        };
    }
    if cmp.failing > 0 {
        return inaccurate(reading);
    }
    Diagnosis::plain(format!(
        "correct: all {} elements within tolerance (worst at {:.2} of the allowance)",
        cmp.elements, cmp.worst_ratio
    ))
}

/// Rows and heads of a footprint, with what the rows are in this lab's
/// tiling when they are one recognisable piece of it.
fn place(shape: Shape, at: &Footprint) -> String {
    let Some(span) = at.rows else {
        return "no element".into();
    };
    let contiguous = at.row_count == span.last - span.first + 1;
    let full_tiles = shape.chunk_len / TILE_ROWS * TILE_ROWS;
    let note = if span.first == span.last && span.last + 1 == shape.chunk_len && shape.chunk_len > 1
    {
        " (the last row only)"
    } else if contiguous
        && full_tiles > 0
        && full_tiles < shape.chunk_len
        && span.first == full_tiles
        && span.last + 1 == shape.chunk_len
    {
        " only: the last, partial row tile"
    } else {
        ""
    };
    format!("{}{note}, {}", rows(span), heads(at.heads))
}

fn unwritten(shape: Shape, at: &Footprint) -> Diagnosis {
    let Some(span) = at.rows else {
        return Diagnosis::new("some elements were never written", cause::NEVER_WRITTEN);
    };
    let whole_rows = at.elements == at.row_count * HQ * DH;
    let contiguous = at.row_count == span.last - span.first + 1;
    if whole_rows && contiguous {
        return Diagnosis::new(
            format!(
                "{} never written: check the early return and that the grid covers chunkLen ({})",
                rows(span),
                shape.chunk_len
            ),
            flash_cause::ROWS_NEVER_WRITTEN,
        );
    }
    if at.heads != u32::MAX {
        return Diagnosis::new(
            format!(
                "{} never written: blockIdx.y must reach every query head (or every KV group)",
                heads(at.heads)
            ),
            flash_cause::HEADS_NEVER_WRITTEN,
        );
    }
    Diagnosis::new(
        format!(
            "{} elements in {} never written: some threads skip their store \
             (does every lane write both of its dimensions?)",
            at.elements,
            rows(span)
        ),
        cause::NEVER_WRITTEN,
    )
}

/// Non-finite output when no experiment ran (a sampled or replayed output):
/// where it is and what can make it, with the plant named only when the
/// case plants large scores exactly there.
fn non_finite(shape: Shape, planted_heads: u32, cmp: &Comparison) -> Diagnosis {
    let at = &cmp.where_non_finite;
    let kind = non_finite_kind(cmp);
    if planted_heads != 0 && at.heads & !planted_heads == 0 {
        return Diagnosis::new(
            format!(
                "{kind} only in {}, where the case plants scores of 128: expf overflows; \
                 subtract the running max before exponentiating",
                heads(at.heads)
            ),
            cause::NAN_EXP_OVERFLOW,
        );
    }
    Diagnosis::plain(format!(
        "{kind} in output ({}); no rerun was made to tell a read past an input's end from an \
         overflowing exp or a 0/0",
        place(shape, at)
    ))
}

/// Failing (row, head) pairs, and how many of them are the reference times
/// one factor below 1 in every dimension, with the range of those factors.
fn shrunk_pairs(reading: &Reading<'_>) -> (usize, usize, f64, f64) {
    let tolerance = super::contract::TOLERANCE;
    let (mut failing, mut shrunk) = (0, 0);
    let (mut low, mut high) = (f64::INFINITY, 0.0f64);
    for pair in 0..reading.shape.chunk_len * HQ {
        let out = &reading.out[pair * DH..(pair + 1) * DH];
        let reference = &reading.reference[pair * DH..(pair + 1) * DH];
        let fails = out
            .iter()
            .zip(reference)
            .any(|(&o, &r)| !(f64::from(o) - r).abs().le(&tolerance.allowed(r)));
        if !fails {
            continue;
        }
        failing += 1;
        if let Some(factor) = common_factor(out, reference) {
            if factor < 1.0 {
                shrunk += 1;
                low = low.min(factor);
                high = high.max(factor);
            }
        }
    }
    (failing, shrunk, low, high)
}

/// Most failing rows a suspect's model is replayed on.
const REPLAY_ROWS: usize = 4;

/// Suspects whose models are replayed on wrong (finite) outputs, in order.
const SUSPECTS: [FlashBug; 3] = [
    FlashBug::MissingAccRescale,
    FlashBug::CausalOffByOne,
    FlashBug::TileEdge,
];

/// Query heads (bit `h` for head `h`) whose inputs are large: the
/// largest |q| of the head times the largest |k| and |v| of the KV head it
/// reads, at least [`LARGE_HEAD_RATIO`] times that of the smallest head and
/// at least [`LARGE_HEAD_FLOOR`]. 0 when no head stands out.
pub fn large_value_heads(inputs: &Inputs) -> u32 {
    let Inputs { shape, q, k, v } = inputs;
    let largest = |data: &[f32], heads: usize, head: usize| {
        data.chunks_exact(DH)
            .skip(head)
            .step_by(heads)
            .flatten()
            .fold(0.0f32, |m, x| m.max(x.abs()))
    };
    let kv_heads = HQ / GROUP;
    let sizes: Vec<f32> = (0..HQ)
        .map(|head| {
            let group = head / GROUP;
            largest(q, HQ, head) * largest(k, kv_heads, group) * largest(v, kv_heads, group)
        })
        .collect();
    let smallest = sizes.iter().copied().fold(f32::INFINITY, f32::min);
    if shape.chunk_len == 0 || !smallest.is_finite() || smallest <= 0.0 {
        return 0;
    }
    sizes
        .iter()
        .enumerate()
        .filter(|&(_, &size)| size >= LARGE_HEAD_FLOOR.max(LARGE_HEAD_RATIO * smallest))
        .fold(0, |heads, (head, _)| heads | 1 << head)
}

/// The worst error of a failing element as a fraction of the largest
/// |value| of the reference in its (row, head), when every failing element
/// stays under `bound` of it: the signature of lost precision, whose error
/// scales with the magnitude of the values.
fn precision_loss(reading: &Reading<'_>, bound: f64) -> Option<f64> {
    let tolerance = super::contract::TOLERANCE;
    let mut worst: f64 = 0.0;
    for row in 0..reading.shape.chunk_len {
        for head in 0..HQ {
            let at = Shape::q_index(row, head, 0)..Shape::q_index(row, head, DH);
            let reference = &reading.reference[at.clone()];
            let scale = reference.iter().fold(0.0_f64, |m, r| m.max(r.abs()));
            for (&got, &want) in reading.out[at].iter().zip(reference) {
                let error = (f64::from(got) - want).abs();
                if error.le(&tolerance.allowed(want)) {
                    continue;
                }
                let fraction = error / scale;
                if !fraction.le(&bound) {
                    return None;
                }
                worst = worst.max(fraction);
            }
        }
    }
    (worst > 0.0).then_some(worst)
}

/// Rows holding a failing element, ascending.
fn failing_rows(reading: &Reading<'_>) -> Vec<usize> {
    let tolerance = super::contract::TOLERANCE;
    let row_len = HQ * DH;
    (0..reading.shape.chunk_len)
        .filter(|&row| {
            let at = row * row_len..(row + 1) * row_len;
            reading.out[at.clone()]
                .iter()
                .zip(&reading.reference[at])
                .any(|(&o, &r)| !(f64::from(o) - r).abs().le(&tolerance.allowed(r)))
        })
        .collect()
}

/// The planted bug whose model reproduces the output on a few failing rows, named.
fn replayed(reading: &Reading<'_>) -> Option<Diagnosis> {
    let tensors = reading.tensors?;
    let failing = failing_rows(reading);
    let n = failing.len();
    if n == 0 {
        return None;
    }
    let mut sample: Vec<usize> = (0..REPLAY_ROWS.min(n))
        .map(|i| failing[i * n / REPLAY_ROWS.min(n)])
        .collect();
    sample.push(failing[n - 1]);
    sample.dedup();
    let found: Vec<FlashBug> = SUSPECTS
        .into_iter()
        .filter(|&bug| {
            replay_matches(
                reading.shape,
                tensors,
                bug,
                reading.out,
                reading.reference,
                &sample,
            )
        })
        .collect();
    let at = &reading.cmp.where_failing;
    let span = at.rows?;
    let checked = format!(
        "a CPU model of the starter with that defect reproduces the output on {} of the {n} \
         failing rows ({}, {})",
        sample.len(),
        rows(span),
        heads(at.heads)
    );
    named(&found, &checked)
}

/// What a planted defect is and how to fix it, in the lab's words.
fn defect(bug: FlashBug) -> (&'static str, &'static str) {
    match bug {
        FlashBug::MissingAccRescale => (
            "the accumulator is not rescaled when the running max grows",
            "multiply acc by exp(m_old - m_new) at every new max",
        ),
        FlashBug::CausalOffByOne => (
            "each row misses its own key (the key loop stops at j < prefixLen + i)",
            "row i sees keys up to prefixLen + i inclusive",
        ),
        _ => (
            "each block drops its last, partial key tile (the tile count rounds down)",
            "round the tile count up and mask the keys past the end",
        ),
    }
}

/// The diagnosis naming the defects in `found` (each of whose models
/// reproduced the output as `evidence` says). Two defects whose models
/// agree on this case are both said and neither is named as the cause:
/// the case cannot tell them apart.
fn named(found: &[FlashBug], evidence: &str) -> Option<Diagnosis> {
    match found {
        [] => None,
        [bug] => {
            let (what, fix) = defect(*bug);
            Some(Diagnosis::new(
                format!("{what}: {evidence}; {fix}"),
                bug.name(),
            ))
        }
        several => {
            let whats: Vec<&str> = several.iter().map(|&b| defect(b).0).collect();
            Some(Diagnosis::either(
                format!(
                    "{}: {evidence}, for each of these defects, which write the same output on \
                     this case; the other cases tell them apart",
                    whats.join(", or ")
                ),
                several.iter().map(|b| b.name()).collect(),
            ))
        }
    }
}

/// The planted bugs whose models see no key at all in exactly the rows
/// where the kernel's NaN was computed (it stayed with every change the
/// experiments made): a row with no key is 0/0, a precise fact about the
/// loop bounds, where a model's NaN alone would be no evidence. The finite
/// failing rows, if any, must be reproduced by the same model.
fn keyless(reading: &Reading<'_>, computed: &Footprint) -> Option<Diagnosis> {
    let shape = reading.shape;
    if computed.elements == 0 || computed.heads != u32::MAX {
        return None;
    }
    let failing = failing_rows(reading);
    let found: Vec<FlashBug> = SUSPECTS
        .into_iter()
        .filter(|&bug| {
            let empty: Vec<usize> = (0..shape.chunk_len)
                .filter(|&row| super::bugs::keys_seen(shape, bug, row) == 0)
                .collect();
            let same_rows = empty.first().zip(empty.last()).is_some_and(|(&a, &b)| {
                computed.rows == Some(RowSpan { first: a, last: b })
                    && computed.row_count == empty.len()
                    && computed.elements == empty.len() * HQ * DH
            });
            let rest: Vec<usize> = failing
                .iter()
                .copied()
                .filter(|row| !empty.contains(row))
                .take(REPLAY_ROWS)
                .collect();
            same_rows
                && (rest.is_empty()
                    || reading.tensors.is_some_and(|tensors| {
                        replay_matches(shape, tensors, bug, reading.out, reading.reference, &rest)
                    }))
        })
        .collect();
    let span = computed.rows?;
    let evidence = format!(
        "{} see no key at all in a CPU model of the starter with that defect, and exactly there \
         the kernel's NaN is computed (a 0/0: it stays with out starting finite, finite guard \
         bands and scores shrunk)",
        rows(span)
    );
    named(&found, &evidence)
}

fn inaccurate(reading: &Reading<'_>) -> Diagnosis {
    let (shape, cmp) = (reading.shape, reading.cmp);
    let at = &cmp.where_failing;
    let Some(span) = at.rows else {
        return Diagnosis::plain(format!("{} elements outside tolerance", cmp.failing));
    };
    let through_the_end =
        span.last + 1 == shape.chunk_len && at.row_count == span.last - span.first + 1;
    let full_tiles = shape.chunk_len / TILE_ROWS * TILE_ROWS;

    let (failing_pairs, shrunk, low, high) = shrunk_pairs(reading);
    if failing_pairs > 0 && shrunk * 10 >= failing_pairs * 9 {
        return Diagnosis::new(
            format!(
                "{} of {}: each failing (row, head) is the right answer times one factor below 1 \
                 ({low:.2} to {high:.2}), so the denominator l is too large: multiply l by \
                 exp(m_old - m_new) whenever the running max grows",
                rows(span),
                heads(at.heads)
            ),
            flash_cause::DENOMINATOR_TOO_LARGE,
        );
    }
    if let Some(said) = replayed(reading) {
        return said;
    }
    // Before any pattern of rows or heads is read as a cause: errors that
    // stay a small fraction of the values they sit among are arithmetic
    // done in lower precision, whichever heads hold the large values.
    if let Some(worst) = precision_loss(reading, PRECISION_LOSS_FRACTION) {
        return Diagnosis::new(
            format!(
                "{} elements wrong by at most {:.2}% of the largest value in their (row, head) \
                 ({}, {}): lost precision, not a wrong formula; the error grows with the values, \
                 as TF32 or bf16 products, a fast-math expf or a sum kept in lower precision \
                 give; keep the dot products and the sums in float",
                cmp.failing,
                100.0 * worst,
                rows(span),
                heads(at.heads)
            ),
            flash_cause::PRECISION,
        );
    }
    if reading.planted_heads != 0 && at.heads & !reading.planted_heads == 0 {
        return Diagnosis::new(
            format!(
                "wrong only in {} ({}), where the case plants large scores: the softmax loses \
                 them; subtract the running max and rescale l and the accumulator when it grows",
                heads(at.heads),
                rows(span)
            ),
            flash_cause::PLANTED_HEADS_WRONG,
        );
    }
    // Wrong exactly where the inputs are large, by a fraction of the values
    // there: an error that follows the size of the values, not a head's
    // index (a wrong head map is off by a whole value, wherever it is).
    let only_large_heads = reading.large_heads != 0 && at.heads & !reading.large_heads == 0;
    if let Some(worst) = only_large_heads
        .then(|| precision_loss(reading, LARGE_VALUE_LOSS_FRACTION))
        .flatten()
    {
        return Diagnosis::new(
            format!(
                "only {} are wrong ({}), the heads whose inputs are at least \
                 {LARGE_HEAD_RATIO}x larger, each by at most {:.2}% of the largest value in its \
                 (row, head): the error grows with the values, as lost precision does (TF32 or \
                 bf16 products, a fast-math expf, a sum kept in lower precision); keep the dot \
                 products and the sums in float",
                heads(at.heads),
                rows(span),
                100.0 * worst
            ),
            flash_cause::PRECISION,
        );
    }
    if full_tiles < shape.chunk_len && span.first >= full_tiles && full_tiles > 0 {
        return Diagnosis::new(
            format!(
                "only the last, partial tile ({}, {}) is wrong: a tile of fewer than {TILE_ROWS} \
                 rows must still compute its rows",
                rows(span),
                heads(at.heads)
            ),
            flash_cause::PARTIAL_TILE,
        );
    }
    if through_the_end && span.first > 0 && span.first % TILE_ROWS == 0 {
        return Diagnosis::new(
            format!(
                "{} are wrong ({}), rows before them right: tiles after the first \
                 (blockIdx.x > 0) use a wrong row offset or causal limit",
                rows(span),
                heads(at.heads)
            ),
            flash_cause::LATER_TILES,
        );
    }
    let first_offset = at.tile_rows.trailing_zeros() as usize;
    let ends_at_tile_end = at.tile_rows >> (TILE_ROWS - 1) == 1;
    if first_offset > 0 && ends_at_tile_end {
        return Diagnosis::new(
            format!(
                "only rows {first_offset}..{} of each {TILE_ROWS}-row tile are wrong ({}, {}): \
                 the rows a block handles last (its last warps, or each warp's later rows) go astray",
                TILE_ROWS - 1,
                rows(span),
                heads(at.heads)
            ),
            flash_cause::TILE_TAIL_ROWS,
        );
    }
    if at.row_count == shape.chunk_len && at.heads != u32::MAX {
        return Diagnosis::new(
            format!(
                "only {} are wrong, in every row: check which KV head a query head reads \
                 (g = h / 4) and the head strides",
                heads(at.heads)
            ),
            flash_cause::KV_HEAD_MAPPING,
        );
    }
    if cmp.worst_ratio < PRECISION_LOSS_RATIO {
        return Diagnosis::new(
            format!(
                "{} elements just outside tolerance (worst {:.1}x the allowance, {}, {}): lost \
                 precision, e.g. a fast-math expf or a sum kept in lower precision",
                cmp.failing,
                cmp.worst_ratio,
                rows(span),
                heads(at.heads)
            ),
            flash_cause::PRECISION,
        );
    }
    if at.row_count == shape.chunk_len && at.heads == u32::MAX {
        return Diagnosis::new(
            format!(
                "every row of every head is wrong (worst {}): check the 1/8 scale, the tensor \
                 layout and the causal limit (row i sees keys up to prefixLen + i)",
                worst(cmp)
            ),
            flash_cause::EVERYTHING_WRONG,
        );
    }
    if through_the_end && span.first > 0 {
        return Diagnosis::new(
            format!(
                "{} of {} elements wrong, in the last rows ({}) of {}; rows before them right; \
                 worst {}",
                cmp.failing,
                cmp.elements,
                rows(span),
                heads(at.heads),
                worst(cmp)
            ),
            flash_cause::LAST_ROWS_WRONG,
        );
    }
    Diagnosis::plain(format!(
        "{} of {} elements wrong, in {} and {}; worst {}",
        cmp.failing,
        cmp.elements,
        rows(span),
        heads(at.heads),
        worst(cmp)
    ))
}

fn worst(cmp: &Comparison) -> String {
    match &cmp.worst {
        Some(e) => format!(
            "at row {}, head {}, dim {}: got {:.6e}, expected {:.6e} (allowed ±{:.1e})",
            e.row, e.head, e.dim, e.got, e.expected, e.allowed
        ),
        None => "unknown".into(),
    }
}

fn rows(span: RowSpan) -> String {
    if span.first == span.last {
        format!("row {}", span.first)
    } else {
        format!("rows {} to {}", span.first, span.last)
    }
}

/// `"head 3"`, `"heads 4-7, 12"`.
fn heads(mask: u32) -> String {
    crate::lab::experiment::heads(mask, HQ)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::compare::{compare, POISON_BITS};
    use crate::grade::experiment::{
        Change, ExpectedFileCheck, GuardSide, NonFiniteFinding, NonFiniteTrial, RepeatTrial,
        UnwrittenTrial,
    };

    const SHAPE: Shape = Shape {
        chunk_len: 150,
        prefix_len: 31,
    };

    /// An output that is exact except where `spoil` says, with its reference.
    struct Spoiled {
        out: Vec<f32>,
        reference: Vec<f64>,
        cmp: Comparison,
    }

    fn output_with(spoil: impl Fn(usize, usize, usize) -> Option<f32>) -> Spoiled {
        let reference = vec![0.5; SHAPE.q_elems()];
        let mut out = vec![0.5f32; SHAPE.q_elems()];
        for row in 0..SHAPE.chunk_len {
            for head in 0..HQ {
                for dim in 0..DH {
                    if let Some(value) = spoil(row, head, dim) {
                        out[Shape::q_index(row, head, dim)] = value;
                    }
                }
            }
        }
        let cmp = compare(
            SHAPE.problem().output,
            super::super::contract::TOLERANCE,
            &out,
            &reference,
        );
        Spoiled {
            out,
            reference,
            cmp,
        }
    }

    fn diagnose_in(
        spoiled: &Spoiled,
        planted_heads: u32,
        integrity: &Integrity,
        experiments: &Experiments,
    ) -> Diagnosis {
        diagnose(&Reading {
            shape: SHAPE,
            planted_heads,
            large_heads: 0,
            out: &spoiled.out,
            reference: &spoiled.reference,
            cmp: &spoiled.cmp,
            integrity,
            experiments,
            tensors: None,
        })
    }

    fn diagnose_with(spoiled: &Spoiled, integrity: &Integrity) -> String {
        diagnose_in(spoiled, 0, integrity, &Experiments::default()).line
    }

    fn diagnose_output(spoil: impl Fn(usize, usize, usize) -> Option<f32>) -> String {
        diagnose_with(&output_with(spoil), &Integrity::default())
    }

    /// What a case planting large scores in head 0 reads.
    fn diagnose_planted(spoil: impl Fn(usize, usize, usize) -> Option<f32>) -> Diagnosis {
        diagnose_in(
            &output_with(spoil),
            1,
            &Integrity::default(),
            &Experiments::default(),
        )
    }

    const POISON: Option<f32> = Some(f32::from_bits(POISON_BITS));
    const WRONG: Option<f32> = Some(3.0);

    #[test]
    fn a_correct_output_says_so() {
        let line = diagnose_output(|_, _, _| None);
        assert!(line.starts_with("correct: all 307200 elements"), "{line}");
    }

    #[test]
    fn integrity_failures_come_first_in_order() {
        let broken = output_with(|_, _, _| POISON);
        let all = Integrity {
            out_of_bounds_writes: 7,
            inputs_modified: vec!["q".into(), "vCache".into()],
            runs_differ: true,
        };
        let line = diagnose_with(&broken, &all);
        assert!(
            line.starts_with("out-of-bounds write: the kernel wrote 7 floats"),
            "{line}"
        );
        let modified = Integrity {
            out_of_bounds_writes: 0,
            ..all.clone()
        };
        let line = diagnose_with(&broken, &modified);
        assert!(
            line.starts_with("the kernel wrote into q and vCache (inputs are const)"),
            "{line}"
        );
        let race = Integrity {
            runs_differ: true,
            ..Integrity::default()
        };
        assert!(diagnose_with(&broken, &race).starts_with("race:"));
        // A race is reported even when this run happened to come out right.
        let fine = output_with(|_, _, _| None);
        assert!(diagnose_with(&fine, &race).starts_with("race:"));
    }

    #[test]
    fn trailing_rows_never_written_point_at_the_grid() {
        let line = diagnose_output(|row, _, _| if row >= 128 { POISON } else { None });
        assert_eq!(
            line,
            "rows 128 to 149 never written: check the early return and that the grid covers chunkLen (150)"
        );
        let line = diagnose_output(|row, _, _| if row == 0 { POISON } else { WRONG });
        assert!(line.starts_with("row 0 never written"), "{line}");
    }

    #[test]
    fn heads_never_written_point_at_grid_y() {
        let line = diagnose_output(|_, head, _| if head >= 8 { POISON } else { None });
        assert!(
            line.starts_with("heads 8-31 never written: blockIdx.y"),
            "{line}"
        );
    }

    #[test]
    fn scattered_unwritten_elements_point_at_the_store() {
        let line = diagnose_output(|row, _, dim| if dim >= 32 && row < 3 { POISON } else { None });
        assert!(
            line.starts_with("3072 elements in rows 0 to 2 never written"),
            "{line}"
        );
    }

    #[test]
    fn nan_in_the_planted_head_names_the_plant_only_where_one_is() {
        let spoil = |row: usize, head: usize, _| (head == 0 && row % 3 == 0).then_some(f32::NAN);
        let planted = diagnose_planted(spoil);
        assert!(
            planted
                .line
                .starts_with("NaN only in head 0, where the case plants"),
            "{planted:?}"
        );
        assert_eq!(planted.cause, Some(cause::NAN_EXP_OVERFLOW));
        // The same output from a case that plants nothing (a golden .npy case).
        let line = diagnose_output(spoil);
        assert!(!line.contains("plant"), "{line}");
        assert!(
            line.starts_with("NaN in output (rows 0 to 147, head 0)"),
            "{line}"
        );
    }

    #[test]
    fn non_finite_output_without_experiments_says_none_was_made() {
        let line = diagnose_output(|row, head, _| (head == 5 && row > 140).then_some(f32::NAN));
        assert!(
            line.starts_with("NaN in output (rows 141 to 149, head 5); no rerun"),
            "{line}"
        );
        let line = diagnose_output(|row, head, _| (head > 3 && row == 9).then_some(f32::INFINITY));
        assert!(
            line.starts_with("Inf in output (row 9, heads 4-31)"),
            "{line}"
        );
    }

    fn footprint(
        rows: std::ops::RangeInclusive<usize>,
        heads: std::ops::Range<usize>,
    ) -> Footprint {
        let shape = SHAPE.problem().output;
        let mut indices = Vec::new();
        for row in rows {
            for head in heads.clone() {
                indices.extend((0..DH).map(|d| shape.index(row, head, d)));
            }
        }
        Footprint::of(shape, indices)
    }

    fn nan_rows(rows: std::ops::RangeInclusive<usize>) -> Spoiled {
        output_with(move |row, _, _| rows.contains(&row).then_some(f32::NAN))
    }

    fn with_trial(findings: Vec<NonFiniteFinding>, unexplained: Footprint) -> Experiments {
        Experiments {
            non_finite: Some(NonFiniteTrial {
                before: footprint(128..=149, 0..HQ),
                findings,
                unexplained,
                launches: 4,
                sentinels_tagged: false,
                scratch_zeroed: false,
            }),
            ..Experiments::default()
        }
    }

    #[test]
    fn a_nan_that_finite_guards_remove_names_the_buffer_and_the_tile() {
        let experiments = with_trial(
            vec![NonFiniteFinding {
                change: Change::GuardsFinite {
                    buffer: "kCache".into(),
                    side: GuardSide::After,
                },
                cleared: footprint(128..=149, 0..HQ),
                then_correct: None,
            }],
            Footprint::default(),
        );
        let said = diagnose_in(&nan_rows(128..=149), 0, &Integrity::default(), &experiments);
        assert_eq!(
            said.line,
            "reads past the end of kCache: with kCache's guard bands finite instead of NaN, the \
             NaN in rows 128 to 149 only: the last, partial row tile, heads 0-31 is gone"
        );
        assert_eq!(said.cause, Some(cause::NAN_GUARD_READ));
    }

    #[test]
    fn a_nan_that_shrunk_scores_remove_is_an_exp_overflow() {
        let experiments = with_trial(
            vec![NonFiniteFinding {
                change: Change::ScoresShrunk { factor: 1.0 / 32.0 },
                cleared: footprint(128..=149, 0..1),
                then_correct: Some(true),
            }],
            Footprint::default(),
        );
        let said = diagnose_in(&nan_rows(128..=149), 0, &Integrity::default(), &experiments);
        assert!(
            said.line.starts_with(
                "overflow in exp: with the scores shrunk 32x the NaN in rows 128 to 149 only: the \
                 last, partial row tile, head 0 is gone and every element is then correct"
            ),
            "{said:?}"
        );
        assert_eq!(said.cause, Some(cause::NAN_EXP_OVERFLOW));
    }

    #[test]
    fn a_nan_no_change_removes_is_computed_and_a_nan_read_from_out_is_named() {
        let said = diagnose_in(
            &nan_rows(0..=0),
            0,
            &Integrity::default(),
            &with_trial(Vec::new(), footprint(0..=0, 0..HQ)),
        );
        assert!(said.line.contains("row 0, heads 0-31 stays"), "{said:?}");
        assert!(said.line.contains("0/0"), "{said:?}");
        assert_eq!(said.cause, Some(cause::NAN_COMPUTED));
        let experiments = with_trial(
            vec![NonFiniteFinding {
                change: Change::OutputFinite,
                cleared: footprint(0..=0, 0..HQ),
                then_correct: None,
            }],
            Footprint::default(),
        );
        let said = diagnose_in(&nan_rows(0..=0), 0, &Integrity::default(), &experiments);
        assert!(
            said.line
                .starts_with("the kernel reads out before writing it"),
            "{said:?}"
        );
        assert_eq!(said.cause, Some(cause::NAN_FROM_OUT));
    }

    #[test]
    fn poisoned_elements_are_told_apart_as_unwritten_or_copied() {
        let spoiled = output_with(|row, _, _| if row >= 128 { POISON } else { None });
        let trial = |never: Footprint, copied: Footprint| Experiments {
            unwritten: Some(UnwrittenTrial {
                never_written: never,
                copied_from_out: copied,
            }),
            ..Experiments::default()
        };
        let said = diagnose_in(
            &spoiled,
            0,
            &Integrity::default(),
            &trial(footprint(128..=149, 0..HQ), Footprint::default()),
        );
        assert!(
            said.line.starts_with("rows 128 to 149 never written"),
            "{said:?}"
        );
        assert!(said
            .line
            .ends_with("(measured: they kept a second, finite starting value too)"));
        let said = diagnose_in(
            &spoiled,
            0,
            &Integrity::default(),
            &trial(Footprint::default(), footprint(128..=149, 0..HQ)),
        );
        assert!(
            said.line.starts_with("45056 elements in rows 128 to 149 only: the last, partial row tile, heads 0-31 hold a value read from out"),
            "{said:?}"
        );
        assert_eq!(said.cause, Some(cause::COPIED_FROM_OUT));
    }

    #[test]
    fn repeated_runs_tell_a_race_from_a_reduction_order() {
        let race = Integrity {
            runs_differ: true,
            ..Integrity::default()
        };
        let fine = output_with(|_, _, _| None);
        let repeats = |worst_spread_ratio: f64, runs_correct| Experiments {
            repeats: Some(RepeatTrial {
                runs: 5,
                differing: footprint(64..=70, 8..12),
                worst_spread_ratio,
                runs_correct,
            }),
            ..Experiments::default()
        };
        let said = diagnose_in(&fine, 0, &race, &repeats(0.03, 5));
        assert!(said.line.starts_with("runs differ only inside the tolerance: over 5 runs, 1792 elements in rows 64 to 70, heads 8-11 change, by at most 0.03"), "{said:?}");
        assert_eq!(said.cause, Some(cause::NONDETERMINISTIC_ORDER));
        let said = diagnose_in(&fine, 0, &race, &repeats(4000.0, 2));
        assert!(said.line.starts_with("race: over 5 runs, 1792 elements in rows 64 to 70, heads 8-11 change by up to 4000x the allowance (2 of 5 runs correct)"), "{said:?}");
        assert_eq!(said.cause, Some(cause::RACE));
    }

    #[test]
    fn a_wrong_expected_file_is_blamed_not_the_plant() {
        // A golden case's expected output corrupted in head 0: the kernel matches the oracle.
        let spoiled =
            output_with(|row, head, dim| (row == 3 && head == 0 && dim == 0).then_some(9.0));
        let experiments = Experiments {
            expected_file: Some(ExpectedFileCheck {
                disagrees: Footprint::of(
                    SHAPE.problem().output,
                    [SHAPE.problem().output.index(3, 0, 0)],
                ),
                output_matches_oracle: true,
            }),
            ..Experiments::default()
        };
        let said = diagnose_in(&spoiled, 0, &Integrity::default(), &experiments);
        assert_eq!(
            said.line,
            "the case's expected output disagrees with flashprof's oracle at 1 elements in row 3, \
             head 0: the kernel's output matches the oracle everywhere, so the file looks wrong"
        );
        assert!(!said.line.contains("plant"));
    }

    #[test]
    fn rows_one_factor_too_small_are_an_unrescaled_denominator() {
        let said = diagnose_in(
            &output_with(|row, head, _| {
                (head < 4 && row > 20).then_some(0.5 * (0.2 + row as f32 / 400.0))
            }),
            1,
            &Integrity::default(),
            &Experiments::default(),
        );
        assert!(said.line.starts_with("rows 21 to 149 of heads 0-3: each failing (row, head) is the right answer times one factor below 1 (0.25 to 0.57)"), "{said:?}");
        assert_eq!(said.cause, Some(flash_cause::DENOMINATOR_TOO_LARGE));
    }

    #[test]
    fn wrong_only_in_head_0_is_the_plant_only_when_planted() {
        let spoil = |_, head: usize, _| if head == 0 { WRONG } else { None };
        let said = diagnose_planted(spoil);
        assert!(said.line.starts_with("wrong only in head 0"), "{said:?}");
        let line = diagnose_output(spoil);
        assert!(!line.contains("plant"), "{line}");
    }

    #[test]
    fn a_wrong_last_partial_tile() {
        let line = diagnose_output(|row, _, _| if row >= 140 { WRONG } else { None });
        assert!(
            line.starts_with("only the last, partial tile (rows 140 to 149, heads 0-31)"),
            "{line}"
        );
    }

    #[test]
    fn wrong_from_the_second_tile_on() {
        let line = diagnose_output(|row, _, _| if row >= 64 { WRONG } else { None });
        assert!(
            line.starts_with("rows 64 to 149 are wrong (heads 0-31), rows before them right"),
            "{line}"
        );
    }

    #[test]
    fn wrong_tail_of_every_tile() {
        let line = diagnose_output(|row, _, _| if row % 64 >= 56 { WRONG } else { None });
        assert!(
            line.starts_with("only rows 56..63 of each 64-row tile are wrong"),
            "{line}"
        );
    }

    #[test]
    fn some_heads_wrong_in_every_row_is_the_kv_mapping() {
        let line = diagnose_output(|_, head, _| if head % 4 != 0 { WRONG } else { None });
        assert!(line.starts_with("only heads 1-3, 5-7, 9-11"), "{line}");
        assert!(line.contains("g = h / 4"));
    }

    #[test]
    fn near_misses_read_as_precision_loss() {
        let line = diagnose_output(|row, head, dim| {
            (row == 70 && head == 9 && dim < 2).then_some(0.5 + 0.0012)
        });
        assert!(
            line.starts_with(
                "2 elements wrong by at most 0.24% of the largest value in their (row, head) \
                 (row 70, head 9): lost precision"
            ),
            "{line}"
        );
    }

    #[test]
    fn an_error_that_scales_with_the_values_is_precision_not_a_head_map() {
        // Heads 1-31 wrong in every row, by 0.2% of their values (as TF32
        // products give): lost precision, not a KV head map.
        let line = diagnose_output(|_, head, _| (head != 0).then_some(0.5 * 1.002));
        assert!(
            line.contains("lost precision, not a wrong formula"),
            "{line}"
        );
        // Wrong by 2% of the values: a wrong formula, read by its pattern.
        let line = diagnose_output(|_, head, _| (head != 0).then_some(0.5 * 1.02));
        assert!(
            line.starts_with("only heads 1-31 are wrong, in every row"),
            "{line}"
        );
        // Where the case plants large scores, precision is still precision.
        let said = diagnose_planted(|_, head, _| (head == 0).then_some(0.5 * 1.003));
        assert_eq!(said.cause, Some(flash_cause::PRECISION), "{said:?}");
    }

    /// What an output spoiled by `spoil` reads where heads 1-31 hold large inputs.
    fn diagnose_large_heads(spoil: impl Fn(usize, usize, usize) -> Option<f32>) -> Diagnosis {
        let spoiled = output_with(spoil);
        diagnose(&Reading {
            shape: SHAPE,
            planted_heads: 0,
            large_heads: !1,
            out: &spoiled.out,
            reference: &spoiled.reference,
            cmp: &spoiled.cmp,
            integrity: &Integrity::default(),
            experiments: &Experiments::default(),
            tensors: None,
        })
    }

    #[test]
    fn only_the_heads_with_large_inputs_wrong_by_a_little_is_precision() {
        // 1% of the values: past the plain precision bound, but only where
        // the inputs are large (the top ladder rung in TF32 on the H100).
        let said = diagnose_large_heads(|_, head, _| (head != 0).then_some(0.5 * 1.01));
        assert_eq!(said.cause, Some(flash_cause::PRECISION), "{said:?}");
        assert!(
            said.line.starts_with(
                "only heads 1-31 are wrong (rows 0 to 149), the heads whose inputs are at \
                 least 4x larger, each by at most 1.00%"
            ),
            "{}",
            said.line
        );
        // Off by several times the value there: another head's output, not rounding.
        let said = diagnose_large_heads(|_, head, _| if head != 0 { WRONG } else { None });
        assert_eq!(said.cause, Some(flash_cause::KV_HEAD_MAPPING), "{said:?}");
        // Head 0 wrong too: the error does not follow the values.
        let said = diagnose_large_heads(|_, head, _| (head % 4 != 1).then_some(0.5 * 1.01));
        assert_ne!(said.cause, Some(flash_cause::PRECISION), "{said:?}");
    }

    #[test]
    fn heads_with_large_inputs_are_found_from_the_inputs() {
        let shape = Shape {
            chunk_len: 4,
            prefix_len: 4,
        };
        // Values of one size, varied a little per element, as drawn.
        let drawn =
            |len: usize| -> Vec<f32> { (0..len).map(|i| 0.5 + (i % 7) as f32 * 0.05).collect() };
        let mut inputs = Inputs {
            shape,
            q: drawn(shape.q_elems()),
            k: drawn(shape.kv_elems()),
            v: drawn(shape.kv_elems()),
        };
        assert_eq!(large_value_heads(&inputs), 0, "every head alike");
        // As large-values-other-heads scales them: query heads 1-31 and KV
        // heads 1-7 by 8 (query heads 1-3 read the unscaled KV head 0).
        for row in 0..shape.chunk_len {
            for head in 1..HQ {
                let at = Shape::q_index(row, head, 0);
                inputs.q[at..at + DH].iter_mut().for_each(|x| *x *= 8.0);
            }
        }
        for pos in 0..shape.chunk_len + shape.prefix_len {
            for kv_head in 1..HQ / GROUP {
                let at = Shape::kv_index(pos, kv_head, 0);
                inputs.k[at..at + DH].iter_mut().for_each(|x| *x *= 8.0);
                inputs.v[at..at + DH].iter_mut().for_each(|x| *x *= 8.0);
            }
        }
        assert_eq!(large_value_heads(&inputs), !1);
        // One head scaled down instead: the others are no larger than drawn.
        let drawn_again = Inputs {
            shape,
            q: drawn(shape.q_elems()),
            k: drawn(shape.kv_elems()),
            v: drawn(shape.kv_elems()),
        };
        let mut one_small = drawn_again;
        for row in 0..shape.chunk_len {
            let at = Shape::q_index(row, 5, 0);
            one_small.q[at..at + DH].iter_mut().for_each(|x| *x /= 8.0);
        }
        assert_eq!(large_value_heads(&one_small), 0);
    }

    #[test]
    fn everything_wrong_points_at_scale_and_layout() {
        let line = diagnose_output(|_, _, _| WRONG);
        assert!(
            line.starts_with(
                "every row of every head is wrong (worst at row 0, head 0, dim 0: got 3.000000e0"
            ),
            "{line}"
        );
    }

    #[test]
    fn anything_else_reports_counts_and_the_worst_element() {
        let line = diagnose_output(|row, head, dim| {
            (row == 10 && dim == 0 && (head == 2 || head == 30)).then_some(if head == 2 {
                1.0
            } else {
                2.0
            })
        });
        assert!(
            line.starts_with("2 of 307200 elements wrong, in row 10 and heads 2, 30; worst at row 10, head 30, dim 0: got 2.000000e0"),
            "{line}"
        );
    }

    #[test]
    fn head_lists_are_compact() {
        assert_eq!(heads(1 << 3), "head 3");
        assert_eq!(heads(0b1111_0000 | (1 << 12)), "heads 4-7, 12");
        assert_eq!(heads(u32::MAX), "heads 0-31");
    }
}
