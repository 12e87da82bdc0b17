//! The experiments that tell apart causes a wrong output alone cannot:
//! reruns of a failing case, each with one condition changed, and what
//! each change did to the output ([`crate::grade::experiment`] holds the
//! findings).
//!
//! The plan is the same for every lab and is written against [`Rerun`], so
//! the worker runs it on the GPU (guard bands and the output's starting
//! value are its own to set) and the tests run it on CPU models of the
//! planted bugs. Only failing cases are probed, and only for what they
//! show: NaN or Inf, elements still holding the poison, or two runs that
//! differ; each probe is a bounded number of launches.

use super::args::ArgKind;
use super::definition::{ArgValue, CaseData, Diagnosis, Graded, Lab};
use crate::grade::compare::{compare, Comparison, Footprint, POISON_BITS};
use crate::grade::experiment::{
    repeat_trial, Change, ExpectedFileCheck, Experiments, GuardSide, NonFiniteFinding,
    NonFiniteTrial, UnwrittenTrial,
};
use crate::grade::integrity::integrity_problem;

/// What `out` starts at in the finite-output rerun: a small finite value no
/// kernel plausibly computes, so an element holding it afterwards was not written.
pub const FINITE_START_BITS: u32 = 0x3AAB_CDEF;

/// How far the score experiment shrinks the scores: a score of 128 (the
/// planted ones) becomes 4, which no `exp` overflows on.
pub const SCORE_SHRINK: f32 = 1.0 / 32.0;

/// Runs in all when the first two differ (the two included).
pub const REPEAT_RUNS: usize = 5;

/// The conditions of one rerun, other than the inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditions {
    /// The bits every element of `out` starts at.
    pub output_start: u32,
    /// Float inputs (by argument index) whose guard bands hold 0 instead of
    /// NaN, and on which side.
    pub finite_guards: Vec<(usize, GuardSide)>,
    /// Whether the float scratch buffers start at 0 instead of NaN.
    pub finite_scratch: bool,
}

impl Default for Conditions {
    fn default() -> Self {
        Self {
            output_start: POISON_BITS,
            finite_guards: Vec::new(),
            finite_scratch: false,
        }
    }
}

/// Shrinks every score of a lab whose score is `q . k * scale` plus an ALiBi
/// bias `slope * (j - i)` (none where `alibi_slopes` is `None`): both terms
/// scale with `q` and the slopes, so multiplying those by `factor` (below 1)
/// multiplies every score by it. `round` keeps `q` in the element type the
/// kernel reads (bf16 for FP8; a power-of-two factor keeps it exact).
pub fn shrink_scores(
    q: &mut [f32],
    alibi_slopes: Option<&mut Vec<f32>>,
    factor: f32,
    round: impl Fn(f32) -> f32,
) {
    q.iter_mut().for_each(|x| *x = round(*x * factor));
    alibi_slopes
        .into_iter()
        .flatten()
        .for_each(|x| *x *= factor);
}

/// One more launch of the kernel on `data` under `conditions`, returning its output.
pub trait Rerun {
    type Error;
    fn rerun(&mut self, data: &CaseData, conditions: &Conditions) -> Result<Vec<f32>, Self::Error>;
}

/// What the first runs of a case gave, for deciding which experiments to run.
pub struct FirstRuns<'a> {
    pub data: &'a CaseData,
    /// The first run's output.
    pub out: &'a [f32],
    /// What it was graded against (the oracle's answer, or the case's expected file).
    pub reference: &'a [f64],
    pub comparison: &'a Comparison,
    /// The second run gave other bits than the first.
    pub runs_differ: bool,
    /// The second run's output, when it differs.
    pub second: Option<&'a [f32]>,
}

/// Runs every experiment the first runs call for.
pub fn run<R: Rerun>(
    lab: &dyn Lab,
    first: &FirstRuns<'_>,
    kernel: &mut R,
) -> Result<Experiments, R::Error> {
    let mut experiments = Experiments::default();
    let cmp = first.comparison;
    let mut finite_start = None;
    if cmp.unwritten > 0 || cmp.nan + cmp.inf > 0 {
        let conditions = Conditions {
            output_start: FINITE_START_BITS,
            ..Conditions::default()
        };
        finite_start = Some(kernel.rerun(first.data, &conditions)?);
    }
    if let (true, Some(after)) = (cmp.unwritten > 0, &finite_start) {
        experiments.unwritten = Some(unwritten_trial(first, after));
    }
    if cmp.nan + cmp.inf > 0 {
        let after = finite_start.as_deref().unwrap_or_default();
        let (trial, tagged_output) = non_finite_trial(lab, first, after, kernel)?;
        experiments.non_finite = Some(trial);
        experiments.tagged_output = tagged_output;
    }
    if first.runs_differ {
        let mut runs = vec![first.out.to_vec()];
        runs.extend(first.second.map(<[f32]>::to_vec));
        while runs.len() < REPEAT_RUNS {
            runs.push(kernel.rerun(first.data, &Conditions::default())?);
        }
        let shape = first.data.problem.output;
        let tolerance = lab.tolerance();
        let correct = runs
            .iter()
            .filter(|run| compare(shape, tolerance, run, first.reference).passed)
            .count();
        experiments.repeats = Some(repeat_trial(
            shape,
            |i| tolerance.allowed(first.reference[i]),
            &runs,
            correct,
        ));
    }
    if first.data.expected.is_some() && !cmp.passed {
        experiments.expected_file = Some(expected_file_check(lab, first));
    }
    Ok(experiments)
}

fn unwritten_trial(first: &FirstRuns<'_>, after: &[f32]) -> UnwrittenTrial {
    let shape = first.data.problem.output;
    let poisoned = || {
        first
            .out
            .iter()
            .enumerate()
            .filter(|(_, x)| x.to_bits() == POISON_BITS)
            .map(|(i, _)| i)
    };
    UnwrittenTrial {
        never_written: Footprint::of(
            shape,
            poisoned().filter(|&i| after[i].to_bits() == FINITE_START_BITS),
        ),
        copied_from_out: Footprint::of(
            shape,
            poisoned().filter(|&i| after[i].to_bits() != FINITE_START_BITS),
        ),
    }
}

/// Indices of the computed non-finite elements of `out` (the poison left aside).
fn non_finite(out: &[f32]) -> Vec<usize> {
    out.iter()
        .enumerate()
        .filter(|(_, x)| !x.is_finite() && x.to_bits() != POISON_BITS)
        .map(|(i, _)| i)
        .collect()
}

fn non_finite_trial<R: Rerun>(
    lab: &dyn Lab,
    first: &FirstRuns<'_>,
    finite_start: &[f32],
    kernel: &mut R,
) -> Result<(NonFiniteTrial, Option<Vec<f32>>), R::Error> {
    let shape = first.data.problem.output;
    let before = non_finite(first.out);
    let mut remaining = before.clone();
    let mut findings = Vec::new();
    let mut launches = 1;
    // The elements still non-finite that `after` turned finite.
    let cleared = |remaining: &[usize], after: &[f32]| -> Vec<usize> {
        remaining
            .iter()
            .copied()
            .filter(|&i| after.get(i).is_some_and(|x| x.is_finite()))
            .collect()
    };
    let mut record = |change: Change,
                      gone: Vec<usize>,
                      then_correct: Option<bool>,
                      remaining: &mut Vec<usize>| {
        if gone.is_empty() {
            return;
        }
        remaining.retain(|i| gone.binary_search(i).is_err());
        findings.push(NonFiniteFinding {
            change,
            cleared: Footprint::of(shape, gone),
            then_correct,
        });
    };

    let gone = cleared(&remaining, finite_start);
    record(Change::OutputFinite, gone, None, &mut remaining);

    // The float tensors the case passes (an optional input left null is none).
    let float_inputs: Vec<(usize, &str)> = lab
        .abi()
        .args
        .iter()
        .zip(lab.args(first.data))
        .enumerate()
        .filter(|(_, (_, value))| matches!(value, ArgValue::F32(_)))
        .map(|(i, (spec, _))| (i, spec.name))
        .collect();
    if !remaining.is_empty() && !float_inputs.is_empty() {
        let all = Conditions {
            finite_guards: float_inputs
                .iter()
                .map(|&(i, _)| (i, GuardSide::Both))
                .collect(),
            ..Conditions::default()
        };
        let after_all = kernel.rerun(first.data, &all)?;
        launches += 1;
        let gone_all = cleared(&remaining, &after_all);
        if !gone_all.is_empty() {
            let mut explained_by_one = false;
            for &(index, name) in &float_inputs {
                let one = |side| Conditions {
                    finite_guards: vec![(index, side)],
                    ..Conditions::default()
                };
                let after = kernel.rerun(first.data, &one(GuardSide::Both))?;
                launches += 1;
                let gone = cleared(&remaining, &after);
                if gone.is_empty() {
                    continue;
                }
                explained_by_one = true;
                let mut side = GuardSide::Both;
                for candidate in [GuardSide::After, GuardSide::Before] {
                    let after = kernel.rerun(first.data, &one(candidate))?;
                    launches += 1;
                    if cleared(&gone, &after).len() == gone.len() {
                        side = candidate;
                        break;
                    }
                }
                let change = Change::GuardsFinite {
                    buffer: name.to_owned(),
                    side,
                };
                record(change, gone, None, &mut remaining);
            }
            if !explained_by_one {
                let gone = cleared(&remaining, &after_all);
                record(Change::AllGuardsFinite, gone, None, &mut remaining);
            }
        }
    }

    // Scratch the grader owns starts at NaN: a kernel that reads a slot of
    // it that no thread wrote this launch computes NaN, and at 0 it does not.
    let scratch: Vec<&str> = lab
        .abi()
        .args
        .iter()
        .filter(|spec| spec.kind == ArgKind::ScratchF32)
        .map(|spec| spec.name)
        .collect();
    let scratch_zeroed = !remaining.is_empty() && !scratch.is_empty();
    if scratch_zeroed {
        let conditions = Conditions {
            finite_scratch: true,
            ..Conditions::default()
        };
        let after = kernel.rerun(first.data, &conditions)?;
        launches += 1;
        let gone = cleared(&remaining, &after);
        let change = Change::ScratchFinite {
            buffers: scratch.join(", "),
        };
        record(change, gone, None, &mut remaining);
    }

    // A NaN a kernel read from a slot no context covers is the same NaN
    // whichever wrong slot it read; with finite tags there, the output shows
    // which, and the lab's models can tell the misreads apart.
    let mut tagged_output = None;
    if let Some(tagged) = lab.sentinels_tagged(first.data) {
        let after = kernel.rerun(&tagged, &Conditions::default())?;
        launches += 1;
        let gone = cleared(&remaining, &after);
        record(Change::SentinelsTagged, gone, None, &mut remaining);
        tagged_output = Some(after);
    }

    if !remaining.is_empty() {
        if let Some(shrunk) = lab.scores_shrunk(first.data, SCORE_SHRINK) {
            let after = kernel.rerun(&shrunk, &Conditions::default())?;
            launches += 1;
            let gone = cleared(&remaining, &after);
            if !gone.is_empty() {
                let reference = lab.oracle(&shrunk, None);
                let correct = compare(shape, lab.tolerance(), &after, &reference).passed;
                record(
                    Change::ScoresShrunk {
                        factor: SCORE_SHRINK,
                    },
                    gone,
                    Some(correct),
                    &mut remaining,
                );
            }
        }
    }
    let trial = NonFiniteTrial {
        before: Footprint::of(shape, before),
        findings,
        unexplained: Footprint::of(shape, remaining),
        launches,
        sentinels_tagged: tagged_output.is_some(),
        scratch_zeroed,
    };
    Ok((trial, tagged_output))
}

fn expected_file_check(lab: &dyn Lab, first: &FirstRuns<'_>) -> ExpectedFileCheck {
    let shape = first.data.problem.output;
    let oracle = lab.oracle(first.data, None);
    let tolerance = lab.tolerance();
    let disagrees = first
        .reference
        .iter()
        .zip(&oracle)
        .enumerate()
        .filter(|(_, (&e, &o))| !(e.is_finite() && (e - o).abs() <= tolerance.allowed(o)))
        .map(|(i, _)| i);
    ExpectedFileCheck {
        disagrees: Footprint::of(shape, disagrees),
        output_matches_oracle: compare(shape, tolerance, first.out, &oracle).passed,
    }
}

/// `"NaN"`, `"Inf"` or `"NaN and Inf"`, as a comparison counted them.
pub fn non_finite_kind(cmp: &Comparison) -> &'static str {
    match (cmp.nan > 0, cmp.inf > 0) {
        (true, true) => "NaN and Inf",
        (true, false) => "NaN",
        _ => "Inf",
    }
}

/// What the non-finite trial found, in one line: each change that removed
/// some of the NaN/Inf and where, then what no change removed. `place`
/// names a footprint's rows and heads in the lab's words.
pub fn explain_non_finite(
    kind: &str,
    trial: &NonFiniteTrial,
    place: &dyn Fn(&Footprint) -> String,
) -> super::definition::Diagnosis {
    use super::verdict::cause;
    let mut parts = Vec::new();
    let mut first_cause = None;
    for finding in &trial.findings {
        let at = place(&finding.cleared);
        let (slug, text) = match &finding.change {
            Change::OutputFinite => (
                cause::NAN_FROM_OUT,
                format!(
                    "the kernel reads out before writing it: with out starting at a finite value \
                     instead of NaN, the {kind} in {at} is gone; keep sums in registers and store once"
                ),
            ),
            Change::GuardsFinite { buffer, side } => {
                let where_ = match side {
                    GuardSide::After => format!("past the end of {buffer}"),
                    GuardSide::Before => format!("before the start of {buffer}"),
                    GuardSide::Both => format!("outside {buffer}, on both sides"),
                };
                (
                    cause::NAN_GUARD_READ,
                    format!(
                        "reads {where_}: with {buffer}'s guard bands finite instead of NaN, the \
                         {kind} in {at} is gone"
                    ),
                )
            }
            Change::AllGuardsFinite => (
                cause::NAN_GUARD_READ,
                format!(
                    "reads past an input's end: with every guard band finite the {kind} in {at} is \
                     gone, with any one buffer's alone it stays"
                ),
            ),
            Change::ScratchFinite { buffers } => (
                cause::NAN_SCRATCH_READ,
                format!(
                    "reads scratch no thread wrote this launch: with {buffers} starting at 0 \
                     instead of NaN, the {kind} in {at} is gone; read only the slots this launch \
                     wrote (a combine over the partitions a sequence has, not all of them)"
                ),
            ),
            Change::SentinelsTagged => (
                cause::NAN_SENTINEL_READ,
                format!(
                    "reads slots no sequence owns: with the cache's unused slots holding finite \
                     tags instead of NaN, the {kind} in {at} is gone; check the block id and the \
                     slot index of every cache read"
                ),
            ),
            Change::ScoresShrunk { factor } => (
                cause::NAN_EXP_OVERFLOW,
                format!(
                    "overflow in exp: with the scores shrunk {:.0}x the {kind} in {at} is gone{}, \
                     so exp saw raw scores: subtract the running max before exponentiating",
                    1.0 / factor,
                    match finding.then_correct {
                        Some(true) => " and every element is then correct",
                        _ => "",
                    }
                ),
            ),
        };
        first_cause.get_or_insert(slug);
        parts.push(text);
    }
    if trial.unexplained.elements > 0 {
        let at = place(&trial.unexplained);
        let text = format!(
            "the {kind} in {at} stays with out starting finite, finite guard bands{}{} and scores \
             shrunk {:.0}x: it is computed from finite values, a 0/0 or -inf - (-inf), as a row \
             (or a key tile) with every key masked gives",
            if trial.scratch_zeroed {
                ", scratch at 0"
            } else {
                ""
            },
            if trial.sentinels_tagged {
                ", finite sentinels"
            } else {
                ""
            },
            1.0 / SCORE_SHRINK
        );
        first_cause.get_or_insert(cause::NAN_COMPUTED);
        parts.push(text);
    }
    super::definition::Diagnosis {
        line: parts.join("; "),
        cause: first_cause,
        candidates: Vec::new(),
    }
}

/// What the unwritten trial found about elements that read the poison back
/// as the kernel's own value, or `None` when every such element was simply
/// never written (the lab then says where, in its own words).
pub fn explain_copied_from_out(
    trial: &UnwrittenTrial,
    place: &dyn Fn(&Footprint) -> String,
) -> Option<super::definition::Diagnosis> {
    if trial.copied_from_out.elements == 0 {
        return None;
    }
    Some(super::definition::Diagnosis::new(
        format!(
            "{} elements in {} hold a value read from out, not computed: with out starting at a \
             finite value instead of the poison they changed with it; never read out",
            trial.copied_from_out.elements,
            place(&trial.copied_from_out)
        ),
        super::verdict::cause::COPIED_FROM_OUT,
    ))
}

/// What repeated runs showed about two runs that differed: a reduction
/// whose order changes (every difference inside the tolerance) or a race
/// that corrupts values.
pub fn explain_repeats(
    trial: &crate::grade::experiment::RepeatTrial,
    place: &dyn Fn(&Footprint) -> String,
) -> super::definition::Diagnosis {
    use super::verdict::cause;
    let at = place(&trial.differing);
    if trial.within_tolerance() {
        super::definition::Diagnosis::new(
            format!(
                "runs differ only inside the tolerance: over {} runs, {} elements in {at} change, \
                 by at most {:.2} of the allowance, and {} of {} runs are correct: a sum whose \
                 order changes between runs (atomics, or a split reduction), not a corrupting race; \
                 the lab still asks for the same bits on every run",
                trial.runs,
                trial.differing.elements,
                trial.worst_spread_ratio,
                trial.runs_correct,
                trial.runs
            ),
            cause::NONDETERMINISTIC_ORDER,
        )
    } else {
        let spread = if trial.worst_spread_ratio.is_finite() {
            format!("by up to {:.0}x the allowance", trial.worst_spread_ratio)
        } else {
            "to NaN or Inf".into()
        };
        super::definition::Diagnosis::new(
            format!(
                "race: over {} runs, {} elements in {at} change {spread} ({} of {} runs correct); \
                 look for a missing __syncthreads() around shared memory, or two threads writing \
                 one element",
                trial.runs, trial.differing.elements, trial.runs_correct, trial.runs
            ),
            cause::RACE,
        )
    }
}

/// What checking a case's own expected output against the oracle showed,
/// when it explains the failure: the file disagrees with the oracle where
/// the kernel agrees with it.
pub fn explain_expected_file(
    check: &ExpectedFileCheck,
    place: &dyn Fn(&Footprint) -> String,
) -> Option<super::definition::Diagnosis> {
    if check.disagrees.elements == 0 {
        return None;
    }
    let kernel = if check.output_matches_oracle {
        "the kernel's output matches the oracle everywhere, so the file looks wrong"
    } else {
        "the kernel's output does not match the oracle either"
    };
    Some(super::definition::Diagnosis::new(
        format!(
            "the case's expected output disagrees with flashprof's oracle at {} elements in {}: {kernel}",
            check.disagrees.elements,
            place(&check.disagrees)
        ),
        super::verdict::cause::EXPECTED_FILE_WRONG,
    ))
}

/// `"head 3"`, `"heads 4-7, 12"`: the set bits of `mask` below `count` as ranges.
pub fn heads(mask: u32, count: usize) -> String {
    let count = count.min(32);
    let mut runs = Vec::new();
    let mut head = 0;
    while head < count {
        if mask & (1 << head) == 0 {
            head += 1;
            continue;
        }
        let start = head;
        while head < count && mask & (1 << head) != 0 {
            head += 1;
        }
        runs.push(if head - start == 1 {
            start.to_string()
        } else {
            format!("{start}-{}", head - 1)
        });
    }
    let noun = if mask.count_ones() == 1 {
        "head"
    } else {
        "heads"
    };
    format!("{noun} {}", runs.join(", "))
}

/// What every lab's case diagnosis reads before its own bug models, in this
/// order: a write outside `out`, a touched input, runs that differ, a pass,
/// a wrong expected file, values read back from `out`. `place` names a
/// footprint in the lab's words; `None` when none of them speaks (the lab's
/// models then read the values).
pub fn shared_reading(
    graded: &Graded<'_>,
    place: &dyn Fn(&Footprint) -> String,
) -> Option<Diagnosis> {
    use super::verdict::cause;
    let integrity = graded.integrity;
    let experiments = graded.experiments;
    if integrity.out_of_bounds_writes > 0 {
        let line = integrity_problem(integrity).unwrap_or_default();
        return Some(Diagnosis::new(line, cause::OUT_OF_BOUNDS_WRITE));
    }
    if !integrity.inputs_modified.is_empty() {
        let line = integrity_problem(integrity).unwrap_or_default();
        return Some(Diagnosis::new(line, cause::INPUT_WRITTEN));
    }
    if integrity.runs_differ {
        return Some(match &experiments.repeats {
            Some(trial) => explain_repeats(trial, place),
            None => Diagnosis::new(
                integrity_problem(integrity).unwrap_or_default(),
                cause::RACE,
            ),
        });
    }
    let cmp = graded.comparison;
    if cmp.passed {
        return Some(Diagnosis::plain(format!(
            "correct: all {} elements within tolerance (worst at {:.2} of the allowance)",
            cmp.elements, cmp.worst_ratio
        )));
    }
    if let Some(said) = experiments
        .expected_file
        .as_ref()
        .and_then(|check| explain_expected_file(check, place))
    {
        return Some(said);
    }
    experiments
        .unwritten
        .as_ref()
        .and_then(|trial| explain_copied_from_out(trial, place))
}

/// The non-finite trial's reading, when the output holds NaN or Inf and the
/// trial ran (read after a lab's models, which name a planted NaN exactly).
pub fn non_finite_reading(
    graded: &Graded<'_>,
    place: &dyn Fn(&Footprint) -> String,
) -> Option<Diagnosis> {
    let cmp = graded.comparison;
    if cmp.nan + cmp.inf == 0 {
        return None;
    }
    let trial = graded.experiments.non_finite.as_ref()?;
    Some(explain_non_finite(non_finite_kind(cmp), trial, place))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::integrity::Integrity;
    use crate::lab::definition::{Graded, LabCase};
    use crate::lab::flash_prefill::FLASH_PREFILL;

    /// A kernel that writes the oracle's answer, rounded to f32.
    struct Exact;

    impl Rerun for Exact {
        type Error = std::convert::Infallible;
        fn rerun(&mut self, data: &CaseData, _: &Conditions) -> Result<Vec<f32>, Self::Error> {
            Ok(FLASH_PREFILL
                .oracle(data, None)
                .iter()
                .map(|&x| x as f32)
                .collect())
        }
    }

    #[test]
    fn a_corrupted_expected_file_is_found_wrong_not_the_kernel() {
        let case: LabCase = FLASH_PREFILL
            .parse_cases(
                "[[case]]\nname = \"golden-like\"\nsummary = \"s\"\nchunk = 5\nprefix = 3\n",
                "t",
                std::path::Path::new("."),
            )
            .unwrap()
            .remove(0);
        let mut data = FLASH_PREFILL.generate(&case, 1).unwrap();
        let Ok(out) = Exact.rerun(&data, &Conditions::default());
        let mut expected = FLASH_PREFILL.oracle(&data, None);
        let shape = data.problem.output;
        expected[shape.index(2, 0, 7)] += 5.0;
        data.expected = Some(expected.clone());
        let comparison = compare(shape, FLASH_PREFILL.tolerance(), &out, &expected);
        assert!(!comparison.passed);
        let first = FirstRuns {
            data: &data,
            out: &out,
            reference: &expected,
            comparison: &comparison,
            runs_differ: false,
            second: None,
        };
        let Ok(experiments) = run(&*FLASH_PREFILL, &first, &mut Exact);
        let check = experiments.expected_file.clone().expect("checked");
        assert_eq!(check.disagrees.elements, 1);
        assert!(check.output_matches_oracle);
        let said = FLASH_PREFILL.diagnose(
            &data,
            &Graded {
                launch: &FLASH_PREFILL.default_geometry(),
                out: &out,
                reference: &expected,
                comparison: &comparison,
                integrity: &Integrity::default(),
                experiments: &experiments,
            },
        );
        assert_eq!(
            said.cause,
            Some(super::super::verdict::cause::EXPECTED_FILE_WRONG)
        );
        assert!(said.line.contains("row 2, head 0"), "{said:?}");
        assert!(!said.line.contains("plant"), "{said:?}");
    }
}
