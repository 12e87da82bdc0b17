//! A one-line verdict in the paged lab's own terms: sequences, blocks,
//! slots, windows, new tokens.
//!
//! Two steps. The *pattern* of failing (row, head) elements, read against
//! the batch's structure, names the suspects: only rows that see cached
//! keys fail (the cache is indexed wrong), only rows whose window cuts keys
//! fail (the window), every element is the answer times one factor per
//! row and head (the softmax was not normalized), the first sequence's rows
//! were never written (the sequence starts), and so on. Then each suspect
//! is *replayed*: its CPU model ([`super::bugs`]) is run on a few of the
//! failing rows, and a suspect whose output matches the kernel's there is
//! named with certainty and a concrete place to look. When no model
//! matches, the pattern's own reading is given as the likely cause, since
//! a real kernel can be wrong in ways no planted bug is.
//!
//! Replaying is what tells apart causes whose patterns coincide, like a
//! table ignored and a wrong x-packing (both break exactly the rows that
//! read the cache), at the cost of a few rows of oracle work. The replayed
//! rows include passing ones, which a model must get right too: a kernel
//! that leaves sequence 0's rows unwritten is not the shifted-`qStart` bug,
//! whose model leaves them unwritten as well but gets the other rows wrong.
//!
//! After the planted bugs come the misreadings no planted bug models
//! ([`crate::lab::paged::misread`]): a query head reading another KV head
//! (found head by head) and a context length off by one or two; then the
//! pattern of the failing heads across KV groups.

use super::bugs::Bug;
use super::contract::{passes, tolerance, Batch, Inputs, BLOCK, DH, HKV, HQ, LAYOUT};
use super::oracle::{self, Model, NOT_WRITTEN};
use crate::grade::compare::{common_factor, Footprint};
use crate::lab::definition::{Diagnosis, Graded};
use crate::lab::evidence::{self, Replay, Written};
use crate::lab::experiment::shared_reading;
use crate::lab::paged::diagnosis::{output_diagnosis, place, worst_element};
use crate::lab::paged::high_blocks::{overflow_line, Wrap};
use crate::lab::paged::misread::{
    self, context_line, head_pattern, kv_map_found, kv_map_line, Misreading, CONTEXT_SHIFTS,
};

/// Most failing rows replayed per suspect.
const REPLAY_ROWS: usize = 6;
/// Most passing rows replayed per suspect.
const REPLAY_PASSING_ROWS: usize = 2;

/// The likely cause of the differences between `out` and `reference`
/// (both laid out like `out`), or `None` when every element passes.
pub fn diagnose(inputs: &Inputs, out: &[f32], reference: &[f64]) -> Option<String> {
    diagnose_rows(inputs, out, reference, None)
}

/// [`diagnose`] when the reference holds only some rows (the oracle's
/// sampling of a large output): only `rows` are compared.
pub fn diagnose_rows(
    inputs: &Inputs,
    out: &[f32],
    reference: &[f64],
    rows: Option<&[usize]>,
) -> Option<String> {
    explain_rows(inputs, out, reference, rows).map(|(line, _)| line)
}

/// [`diagnose_rows`] with the cause whose model reproduced the output (a
/// planted bug's name or a misreading's cause), when one did.
pub fn explain_rows(
    inputs: &Inputs,
    out: &[f32],
    reference: &[f64],
    rows: Option<&[usize]>,
) -> Option<(String, Option<&'static str>)> {
    let batch = &inputs.batch;
    let total = batch.total_new();
    assert_eq!(out.len(), total * HQ * DH, "out does not match the batch");
    assert_eq!(reference.len(), out.len(), "reference does not match out");
    let mut checked: Vec<usize> = rows.map_or_else(|| (0..total).collect(), <[usize]>::to_vec);
    checked.sort_unstable();
    checked.dedup();
    assert!(checked.last().is_none_or(|&r| r < total), "row past T");
    let facts = Facts::gather(&checked, out, reference);
    if facts.failing_rows.is_empty() {
        return None;
    }
    let suspects = facts.suspects(batch);
    let sample = facts.sample();
    for &bug in &suspects {
        if replay_matches(inputs, out, reference, Model::Bug(bug), &sample) {
            return Some((confirmed(bug, inputs, &facts), Some(bug.name())));
        }
    }
    if let Some((line, cause)) = misread(inputs, out, reference, &facts, &sample) {
        return Some((line, Some(cause)));
    }
    Some((facts.likely(batch), None))
}

/// The misreading whose model reproduces the output on the replayed
/// `rows`, in words, with its cause.
fn misread(
    inputs: &Inputs,
    out: &[f32],
    reference: &[f64],
    facts: &Facts,
    rows: &[usize],
) -> Option<(String, &'static str)> {
    // Each query head's output against every head reading KV head g.
    let read_by_all: Vec<Vec<f64>> = (0..HKV)
        .map(|g| {
            let model = Model::Misread(Misreading::all_read(g));
            oracle::evaluate(inputs, Some(rows), model, f64::NAN)
        })
        .collect();
    let head_reads = |head: usize, g: usize| {
        rows.iter().all(|&row| {
            let at = LAYOUT.head_index(row, head, 0);
            (at..at + DH).all(|k| agrees(out[k], read_by_all[g][k]))
        })
    };
    if let Some(map) = kv_map_found(head_reads) {
        return Some((kv_map_line(&map), misread::cause::KV_HEAD_MAPPING));
    }
    let shift = CONTEXT_SHIFTS.into_iter().find(|&shift| {
        let model = Model::Misread(Misreading::ContextShift(shift));
        replay_matches(inputs, out, reference, model, rows)
    })?;
    let (row, s, ..) = facts.first(&inputs.batch);
    let line = context_line(shift, row, s, inputs.batch.context[s]);
    Some((line, misread::cause::CONTEXT_LENGTH))
}

/// What the failing elements say, in the batch's terms.
struct Facts {
    /// Rows with at least one failing element, ascending.
    failing_rows: Vec<usize>,
    /// Rows with a NaN or Inf element.
    non_finite_rows: Vec<usize>,
    /// Failing (row, head) pairs whose output is the reference times one
    /// factor above 1, over all dimensions.
    scaled_pairs: usize,
    failing_pairs: usize,
    /// Query heads with a failing element in some row.
    failing_heads: [bool; HQ],
    /// The rows compared, ascending.
    checked: Vec<usize>,
    total: usize,
}

impl Facts {
    fn gather(checked: &[usize], out: &[f32], reference: &[f64]) -> Facts {
        let (mut failing_rows, mut non_finite_rows) = (Vec::new(), Vec::new());
        let (mut scaled_pairs, mut failing_pairs) = (0, 0);
        let mut failing_heads = [false; HQ];
        for &row in checked {
            let mut row_fails = false;
            for (head, head_fails) in failing_heads.iter_mut().enumerate() {
                let at = LAYOUT.head_index(row, head, 0);
                let o = &out[at..at + DH];
                let r = &reference[at..at + DH];
                if o.iter().zip(r).all(|(&o, &r)| passes(f64::from(o), r)) {
                    continue;
                }
                row_fails = true;
                *head_fails = true;
                failing_pairs += 1;
                if is_scaled_up(o, r) {
                    scaled_pairs += 1;
                }
            }
            if row_fails {
                failing_rows.push(row);
            }
            let at = LAYOUT.head_index(row, 0, 0);
            if out[at..at + HQ * DH].iter().any(|x| !x.is_finite()) {
                non_finite_rows.push(row);
            }
        }
        Facts {
            failing_rows,
            non_finite_rows,
            scaled_pairs,
            failing_pairs,
            failing_heads,
            checked: checked.to_vec(),
            total: checked.len(),
        }
    }

    fn fails(&self, row: usize) -> bool {
        self.failing_rows.binary_search(&row).is_ok()
    }

    /// Every failing row satisfies `f`, and some passing row does not.
    fn failures_confined_to(&self, batch: &Batch, f: impl Fn(usize, usize, usize) -> bool) -> bool {
        let holds = |row: usize| {
            let (s, i) = batch.sequence_of_row(row);
            f(s, i, batch.context[s])
        };
        self.failing_rows.iter().all(|&r| holds(r))
            && self.checked.iter().any(|&r| !holds(r) && !self.fails(r))
    }

    fn first_sequence_unwritten(&self, batch: &Batch) -> bool {
        let mut first: Vec<usize> = self
            .checked
            .iter()
            .copied()
            .filter(|&r| r < batch.new[0])
            .collect();
        first.retain(|r| self.non_finite_rows.binary_search(r).is_err());
        first.is_empty() && self.checked.iter().any(|&r| r < batch.new[0])
    }

    fn uniformly_scaled(&self) -> bool {
        self.failing_pairs > 0 && self.scaled_pairs * 10 >= self.failing_pairs * 9
    }

    /// Suspects in the order the pattern makes them likely, then the rest.
    fn suspects(&self, batch: &Batch) -> Vec<Bug> {
        let mut order = Vec::new();
        if self.first_sequence_unwritten(batch) {
            order.push(Bug::QStartShifted);
        }
        if self.uniformly_scaled() {
            order.push(Bug::MissingDivision);
        }
        if let Some(w) = batch.window() {
            if self.failures_confined_to(batch, |_, i, _| i >= w) {
                order.extend([Bug::WindowOffByOne, Bug::MaskPrecedence]);
            }
        }
        if self.failures_confined_to(batch, |_, i, ctx| sees_cache(batch, i, ctx)) {
            if batch.high.is_some() {
                order.extend(Wrap::BOTH.map(Bug::Int32Offset));
            }
            order.extend([Bug::BlockTableIgnored, Bug::XAssumed8, Bug::VTokenMajor]);
        }
        if batch.alibi {
            order.push(Bug::AlibiSignFlipped);
        }
        order.push(Bug::CacheForNewTokens);
        for bug in Bug::ALL {
            if !order.contains(&bug) {
                order.push(bug);
            }
        }
        order
    }

    /// Up to [`REPLAY_ROWS`] failing rows spread over the failures, and
    /// the first and last of the passing rows.
    fn sample(&self) -> Vec<usize> {
        let n = self.failing_rows.len();
        let mut rows: Vec<usize> = (0..REPLAY_ROWS.min(n))
            .map(|k| self.failing_rows[k * n / REPLAY_ROWS.min(n)])
            .collect();
        rows.push(self.failing_rows[n - 1]);
        let passing: Vec<usize> = self
            .checked
            .iter()
            .copied()
            .filter(|&r| !self.fails(r))
            .collect();
        if let (Some(&first), Some(&last)) = (passing.first(), passing.last()) {
            rows.extend([first, last].into_iter().take(REPLAY_PASSING_ROWS));
        }
        rows.sort_unstable();
        rows.dedup();
        rows
    }

    /// The first failing row, as (row, sequence, position, token, context).
    fn first(&self, batch: &Batch) -> (usize, usize, usize, usize, usize) {
        let row = self.failing_rows[0];
        let (s, i) = batch.sequence_of_row(row);
        let ctx = batch.context[s];
        (row, s, i, i - ctx, ctx)
    }

    /// The pattern's reading when no planted bug's model matches.
    fn likely(&self, batch: &Batch) -> String {
        let (row, s, i, t, ctx) = self.first(batch);
        let count = format!("{} of {} rows fail", self.failing_rows.len(), self.total);
        let at = format!("first: row {row}, sequence {s}, new token {t}, position {i}");
        if !self.non_finite_rows.is_empty() {
            let r = self.non_finite_rows[0];
            let (s, i) = batch.sequence_of_row(r);
            return format!(
                "{} rows hold NaN or Inf (first: row {r}, sequence {s}, position {i}): look for a \
                 read past a buffer (qStart, seqLen or a block id used wrongly) or an overflowing exp",
                self.non_finite_rows.len()
            );
        }
        if self.uniformly_scaled() {
            return format!(
                "{count}, each (row, head) off by one factor above 1 ({at}): the softmax is not \
                 normalized; divide the accumulator by l at the end"
            );
        }
        if let Some(w) = batch.window() {
            if self.failures_confined_to(batch, |_, i, _| i >= w) {
                return format!(
                    "{count}, all of them rows the window of {w} cuts ({at}); rows it does not \
                     reach pass: check the window test, a query at i sees j only if i - j < {w}"
                );
            }
        }
        if self.failures_confined_to(batch, |_, i, ctx| sees_cache(batch, i, ctx)) {
            return format!(
                "{count}, all of them rows that see cached keys ({at}, context {ctx}); rows that \
                 see none pass: cached keys are read wrong (the block table lookup or the x-packed \
                 K index)"
            );
        }
        if let Some(heads) = head_pattern(&self.failing_heads) {
            return format!("{count} ({at}): {heads}");
        }
        let seqs: Vec<usize> = {
            let mut v: Vec<usize> = self
                .failing_rows
                .iter()
                .map(|&r| batch.sequence_of_row(r).0)
                .collect();
            v.dedup();
            v
        };
        format!(
            "{count} in {} of {} sequences ({at}){}",
            seqs.len(),
            batch.num_seqs(),
            if batch.alibi {
                ": with ALiBi on, check the bias slope[h] * (j - i) first"
            } else {
                ": compare the key positions each row walks with the contract"
            }
        )
    }
}

/// Whether a query at position `i` of a sequence with context `ctx` sees a cached key.
fn sees_cache(batch: &Batch, i: usize, ctx: usize) -> bool {
    ctx > 0 && batch.first_visible(i) < ctx
}

/// Whether `out` is `reference` times one factor above 1 in every dimension.
fn is_scaled_up(out: &[f32], reference: &[f64]) -> bool {
    common_factor(out, reference).is_some_and(|f| f > 1.0)
}

/// Whether `model` produces `out` on `rows`.
/// Whether `model` reproduces the kernel's output on `rows` (every head), by
/// [`evidence::replay`]: finite where it counts, and naming some failure.
fn replay_matches(
    inputs: &Inputs,
    out: &[f32],
    reference: &[f64],
    model: Model,
    rows: &[usize],
) -> bool {
    let modelled = oracle::evaluate(inputs, Some(rows), model, NOT_WRITTEN);
    let indices = rows.iter().flat_map(|&row| {
        let at = LAYOUT.head_index(row, 0, 0);
        at..at + HQ * DH
    });
    let model_at = |at: usize| match modelled[at] {
        NOT_WRITTEN => Written::Unwritten,
        value => Written::Value(value),
    };
    let unnormalized = model == Model::Bug(Bug::MissingDivision);
    let replayed = evidence::replay_output(indices, out, reference, model_at, |at, got, want| {
        let l = match unnormalized {
            true => unnormalized_factor(&modelled, reference, at),
            false => 1.0,
        };
        got.is_finite() && (got - want).abs() <= tolerance(want / l) * l
    });
    replayed == Replay::Reproduces
}

/// The factor an unnormalized softmax wrote element `at`'s (row, head)
/// with: the sum l, read as the size of the model's answer against the
/// reference's (at least 1). The kernel's fp32 sums carry l times the
/// rounding of normalized ones, so a replay allows l times the lab's
/// tolerance, which is the tolerance the normalized answer is held to: over
/// a 32k context, l runs to the thousands, and fp32 rounding of the
/// unnormalized sums alone exceeds the plain allowance.
fn unnormalized_factor(modelled: &[f64], reference: &[f64], at: usize) -> f64 {
    let head = at / DH * DH;
    let norm = |x: &[f64]| x.iter().map(|v| v * v).sum::<f64>().sqrt();
    let (model, answer) = (
        norm(&modelled[head..head + DH]),
        norm(&reference[head..head + DH]),
    );
    match model / answer {
        l if l.is_finite() => l.max(1.0),
        _ => 1.0,
    }
}

/// Whether an output element agrees with a model's value: both finite and
/// within the lab's tolerance (a NaN beside a NaN proves nothing).
fn agrees(out: f32, model: f64) -> bool {
    let o = f64::from(out);
    o.is_finite() && model.is_finite() && passes(o, model)
}

/// The message for a bug whose model reproduced the kernel's output.
fn confirmed(bug: Bug, inputs: &Inputs, facts: &Facts) -> String {
    let batch = &inputs.batch;
    let (row, s, i, t, ctx) = facts.first(batch);
    let n = facts.failing_rows.len();
    let rows = format!("{n} of {} rows fail", facts.total);
    let at = format!("row {row} = sequence {s}, new token {t}, position {i}");
    let w = batch.sliding_window;
    let cached_rows = if n == facts.total {
        "every row sees the context"
    } else {
        "only rows that see the context"
    };
    match bug {
        Bug::Int32Offset(wrap) => overflow_line(batch, wrap, &format!("{rows}, {cached_rows}"))
            .unwrap_or_else(|| format!("{rows}: {}", wrap.defect())),
        Bug::BlockTableIgnored => {
            let block = batch.block_of(s, 0);
            format!(
                "cached keys come from the wrong blocks: {rows}, {cached_rows} \
                 ({at}: its position 0 lives in block {block}, not block {}); read the block id \
                 from blockTable[s * maxBlocksPerSeq + pos / {BLOCK}]",
                s * batch.max_blocks_per_seq
            )
        }
        Bug::XAssumed8 => format!(
            "cached keys are unpacked with the wrong X: {rows}, {cached_rows} \
             ({at}, context {ctx}), while V is read right; element d of slot o is at \
             (((b*8 + g)*16 + d/4)*{BLOCK} + o)*4 + d%4, with X = 4 for fp32, not 8"
        ),
        Bug::WindowOffByOne => format!(
            "the window is off by one: {rows}, only rows the window of {w} cuts ({at} also \
             sees key {}); a query at i sees j only if i - j < slidingWindow",
            i.saturating_sub(w as usize)
        ),
        Bug::MaskPrecedence => format!(
            "the window is skipped for cached keys: {rows}, only rows whose window of {w} should \
             hide cached keys ({at} sees the whole context of {ctx}); parenthesize the mask as \
             (j < ctx || j <= i) && i - j < slidingWindow"
        ),
        Bug::AlibiSignFlipped => format!(
            "the ALiBi bias has the wrong sign: {rows} ({at}), far keys are favoured over near \
             ones; add alibiSlopes[h] * (j - i), which is at most 0 for every visible key"
        ),
        Bug::CacheForNewTokens => {
            let block = batch.block_table[s * batch.max_blocks_per_seq + ctx / BLOCK];
            format!(
                "new tokens' keys are read from the cache: {rows}, sequences without context too \
                 ({at}: position {ctx} is new token 0, yet the kernel reads block {block}, slot \
                 {}, which holds no key); positions from the context's end on come from \
                 kNew/vNew row qStart[s] + pos - ctx",
                ctx % BLOCK
            )
        }
        Bug::QStartShifted => format!(
            "sequences start at the wrong row: sequence 0's rows 0..{} were never written{} \
             ({rows}); sequence s's rows are qStart[s] .. qStart[s+1] - 1, not from qStart[s+1]",
            batch.new[0],
            if batch.num_seqs() > 1 {
                " and the rows after them hold the wrong sequences' tokens"
            } else {
                " (qStart[1] = T: every store fell past the end)"
            }
        ),
        Bug::MissingDivision => format!(
            "the softmax is not normalized: {rows}, each (row, head) is the right answer times \
             one factor above 1 ({at}); divide the accumulator by l at the end"
        ),
        Bug::PartialBlockDropped => format!(
            "the context's last, partial block is never read: {rows} ({at}, context {ctx}: \
             positions {} to {} are skipped); walk cached keys up to ctx - 1",
            ctx / BLOCK * BLOCK,
            ctx.saturating_sub(1)
        ),
        Bug::VTokenMajor => format!(
            "cached values are read token-major: {rows}, {cached_rows} ({at}, context {ctx}), \
             while the keys are read right; the V cache is [block][head][dim][slot], so dim d of \
             slot o is at ((b*8 + g)*64 + d)*{BLOCK} + o"
        ),
    }
}

/// A case's diagnosis: what the launch's integrity, the experiments and the
/// bug models' replays say, in that order of certainty.
pub fn case_diagnosis(inputs: &Inputs, graded: &Graded<'_>) -> Diagnosis {
    let integrity = graded.integrity;
    if integrity.out_of_bounds_writes > 0 {
        // Shifted sequence starts store the last sequence's rows past
        // the end: when the values are that bug's, name the bug.
        let replayed = explain_rows(inputs, graded.out, graded.reference, None);
        let shifted = Bug::QStartShifted.name();
        if let Some((line, Some(cause))) = replayed.filter(|(_, c)| *c == Some(shifted)) {
            return Diagnosis::new(
                format!(
                    "{line}; the rows shifted past the last sequence land outside out ({} \
                     floats written there)",
                    integrity.out_of_bounds_writes
                ),
                cause,
            );
        }
    }
    let place = |at: &Footprint| place(&inputs.batch, at);
    if let Some(said) = shared_reading(graded, &place) {
        return said;
    }
    // A planted bug's or a misreading's model that reproduces the output
    // names the cause with certainty, NaN included (a row it never writes
    // is poison).
    let explained = explain_rows(inputs, graded.out, graded.reference, None);
    if let Some((line, Some(cause))) = &explained {
        return Diagnosis::new(line.clone(), cause);
    }
    if let Some(said) = output_diagnosis(&inputs.batch, graded, &place) {
        return said;
    }
    if let Some((line, None)) = explained {
        return Diagnosis::plain(line);
    }
    worst_element(&inputs.batch, graded.comparison)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_prefill::bugs::{failing_elements, kernel_output, model};
    use crate::lab::paged_prefill::cases;
    use crate::lab::paged_prefill::cases::{embedded_cases, whole_oracle_cases};

    fn to_f32(x: &[f64]) -> Vec<f32> {
        x.iter().map(|&v| v as f32).collect()
    }

    /// The key words each bug's diagnosis must contain.
    fn names_cause(bug: Bug, message: &str) -> bool {
        let needle = match bug {
            Bug::BlockTableIgnored => "wrong blocks",
            Bug::XAssumed8 => "wrong X",
            Bug::WindowOffByOne => "off by one",
            Bug::MaskPrecedence => "skipped for cached keys",
            Bug::AlibiSignFlipped => "ALiBi bias has the wrong sign",
            Bug::CacheForNewTokens => "read from the cache",
            Bug::QStartShifted => "start at the wrong row",
            Bug::MissingDivision => "not normalized",
            Bug::VTokenMajor => "token-major",
            Bug::PartialBlockDropped => "partial block is never read",
            Bug::Int32Offset(wrap) => {
                return message.contains("32-bit offset overflow")
                    && message.contains(&format!("computed in {} wraps", wrap.c_type()));
            }
        };
        message.contains(needle)
    }

    #[test]
    fn each_bug_is_named_on_every_case_it_fails() {
        let mut wrong = Vec::new();
        for case in whole_oracle_cases() {
            let inputs = cases::generate(&case, 3).unwrap().inputs;
            let reference = oracle::attention(&inputs, None);
            assert_eq!(diagnose(&inputs, &to_f32(&reference), &reference), None);
            for bug in Bug::ALL {
                let out = model(&inputs, bug);
                if failing_elements(&out, &reference) == 0 {
                    continue;
                }
                let message = diagnose(&inputs, &kernel_output(&inputs, bug), &reference).unwrap();
                eprintln!("{:<22} {:<28} {message}", bug.name(), case.name);
                if !names_cause(bug, &message) {
                    wrong.push(format!("{} on {}: {message}", bug.name(), case.name));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    fn case_inputs(name: &str) -> Inputs {
        let spec = embedded_cases()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap();
        cases::generate(&spec, 9).unwrap().inputs
    }

    #[test]
    fn messages_speak_of_sequences_blocks_and_windows() {
        let inputs = case_inputs("window-b");
        let reference = oracle::attention(&inputs, None);
        let out = to_f32(&model(&inputs, Bug::WindowOffByOne));
        let message = diagnose(&inputs, &out, &reference).unwrap();
        assert!(
            message.contains("window of 16") && message.contains("sequence"),
            "{message}"
        );
        let out = to_f32(&model(&inputs, Bug::BlockTableIgnored));
        let message = diagnose(&inputs, &out, &reference).unwrap();
        assert!(message.contains("block"), "{message}");
        eprintln!("{message}");
    }

    #[test]
    fn a_sampled_reference_is_diagnosed_on_its_rows_only() {
        let inputs = case_inputs("mixed-lengths");
        let rows = [0, 20, 50, 117];
        let reference = oracle::attention(&inputs, Some(&rows));
        let correct = to_f32(&oracle::attention(&inputs, None));
        assert_eq!(
            diagnose_rows(&inputs, &correct, &reference, Some(&rows)),
            None
        );
        let out = to_f32(&model(&inputs, Bug::XAssumed8));
        let message = diagnose_rows(&inputs, &out, &reference, Some(&rows)).unwrap();
        assert!(
            message.contains("wrong X") && message.contains("of 4 rows"),
            "{message}"
        );
    }

    #[test]
    fn an_unnormalized_output_with_fp32_rounding_of_its_sums_is_still_named() {
        // The unnormalized sums carry l times the rounding of normalized
        // ones: each element off by most of l times the lab's tolerance,
        // as a long context's fp32 sums are on the GPU.
        let inputs = case_inputs("mixed-lengths");
        let reference = oracle::attention(&inputs, None);
        let exact = model(&inputs, Bug::MissingDivision);
        let out: Vec<f32> = exact
            .iter()
            .enumerate()
            .map(|(at, &v)| {
                let l = unnormalized_factor(&exact, &reference, at);
                let sign = if at % 2 == 0 { 1.0 } else { -1.0 };
                (v + sign * 0.9 * tolerance(reference[at]) * l) as f32
            })
            .collect();
        let beyond_plain = out
            .iter()
            .zip(&exact)
            .filter(|(&o, &e)| !passes(f64::from(o), e))
            .count();
        assert!(
            beyond_plain > out.len() / 2,
            "{beyond_plain} of {}",
            out.len()
        );
        let (line, cause) = explain_rows(&inputs, &out, &reference, None).expect("fails");
        assert_eq!(cause, Some(Bug::MissingDivision.name()), "{line}");
        // Held to its own allowance still: three times as far is not that bug.
        let far: Vec<f32> = exact
            .iter()
            .enumerate()
            .map(|(at, &v)| {
                let l = unnormalized_factor(&exact, &reference, at);
                (v + 3.0 * tolerance(reference[at]) * l) as f32
            })
            .collect();
        let (_, cause) = explain_rows(&inputs, &far, &reference, None).expect("fails");
        assert_ne!(cause, Some(Bug::MissingDivision.name()));
    }

    #[test]
    fn without_a_matching_model_the_pattern_speaks() {
        // Corrupt one cached value of sequence 0 (context 40) in a way no
        // planted bug does: only rows that see it fail.
        let mut inputs = case_inputs("window-b-minus-1");
        let reference = oracle::attention(&inputs, None);
        let block = inputs.batch.block_of(0, 30);
        for d in 0..DH {
            inputs.v_cache[LAYOUT.v_cache_index(block, 2, d, 30 % BLOCK)] += 3.0;
        }
        let out = to_f32(&oracle::attention(&inputs, None));
        inputs = case_inputs("window-b-minus-1"); // the kernel's view: the original inputs
        let message = diagnose(&inputs, &out, &reference).unwrap();
        assert!(
            message.contains("window of 15 cuts") || message.contains("see cached keys"),
            "{message}"
        );
        assert!(message.contains("sequence 0"), "{message}");

        // A NaN in one element.
        let mut out = to_f32(&reference);
        out[LAYOUT.head_index(5, 3, 1)] = f32::NAN;
        let message = diagnose(&inputs, &out, &reference).unwrap();
        assert!(
            message.contains("NaN") && message.contains("row 5"),
            "{message}"
        );
    }
}
