//! Naming a planted bug's cause from what failed, in the decode lab's
//! terms: sequences, partitions, blocks, heads.
//!
//! Within one case, [`explain`] reads the failing elements (NaN only in one-key
//! sequences, NaN only in sequences of 2 to 15 partitions, every failing
//! head the answer times one factor, failures only in split sequences)
//! to order the suspects, then *replays* each suspect's CPU model on a few
//! failing sequences; a model that reproduces the kernel's output there is
//! named with certainty. When none does, the pattern's own reading is
//! given, since a real kernel can be wrong in ways no planted bug is.

use super::bugs::Bug;
use super::oracle;
use super::{partitions, passes, Batch, Inputs, DH, HQ, MAX_SPLITS};
use crate::grade::compare::{common_factor, Footprint};
use crate::lab::definition::{Diagnosis, Graded};
use crate::lab::evidence::{self, Replay, Written};
use crate::lab::experiment::{non_finite_reading, shared_reading};
use crate::lab::verdict::cause;

/// Most failing sequences a suspect is replayed on (shortest first, so a
/// replay costs little even at the timing shape).
const REPLAY_SEQS: usize = 4;

/// The likely cause of the differences between `out` and `reference` in
/// one case (both laid out like `out`), with the planted bug whose model
/// reproduced the output when one did; `None` when every element passes.
/// `splits` is the kernel's own partition count (its `splits=`): which
/// sequences it cut, and how the combine bugs' models cut them.
pub fn explain(
    inputs: &Inputs,
    out: &[f32],
    reference: &[f64],
    splits: usize,
) -> Option<(String, Option<Bug>)> {
    let batch = &inputs.batch;
    assert_eq!(out.len(), batch.q_elems(), "out does not match the batch");
    assert_eq!(reference.len(), out.len(), "reference does not match out");
    let facts = Facts::gather(batch, out, reference);
    if facts.failing.is_empty() {
        return None;
    }
    // Sequences the kernel wrote numbers for first: a model's NaN where the
    // kernel's is NaN is no evidence (`evidence::replay`).
    let mut sample = facts.failing.clone();
    sample.sort_by_key(|&s| (facts.non_finite.contains(&s), batch.len_of(s)));
    sample.truncate(REPLAY_SEQS);
    for bug in facts.suspects(batch, splits) {
        if replay_matches(inputs, out, reference, bug, &sample, splits) {
            let line = format!(
                "{} (its model reproduces sequences {})",
                bug.defect(),
                sample
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return Some((line, Some(bug)));
        }
    }
    Some((facts.likely(batch, splits), None))
}

/// The likeliest cause of one case's output, in the lab's words: the
/// readings every lab shares first (stray writes, touched inputs, races, a
/// pass), then the planted bugs' models replayed on the failing sequences,
/// then what the non-finite trial showed, then the failing pattern.
pub fn case_diagnosis(inputs: &Inputs, graded: &Graded<'_>) -> Diagnosis {
    let place = |at: &Footprint| place(&inputs.batch, at);
    if let Some(said) = shared_reading(graded, &place) {
        return said;
    }
    let splits = graded.launch.splits as usize;
    let explained = explain(inputs, graded.out, graded.reference, splits);
    if let Some((line, Some(bug))) = &explained {
        return Diagnosis::new(line.clone(), bug.name());
    }
    // Where the failures lie under NaN slots, every model that reads one is
    // blind; the rerun with those slots tagged tells them apart.
    if let Some(out) = graded.experiments.tagged_output.as_deref() {
        let tagged = inputs.sentinels_tagged();
        if let Some((line, Some(bug))) = explain(&tagged, out, graded.reference, splits) {
            return Diagnosis::new(line, bug.name()).seen_on_tagged_rerun();
        }
    }
    if let Some(said) = non_finite_reading(graded, &place) {
        // NaN from workspace slots no partition wrote is the combine
        // reading every slot, found by experiment rather than by a model
        // (whose NaN there proves nothing).
        if said.cause == Some(cause::NAN_SCRATCH_READ) {
            return Diagnosis::new(said.line, Bug::CombineAllSlots.name());
        }
        return said;
    }
    match explained {
        Some((line, _)) => Diagnosis::plain(line),
        None => Diagnosis::plain(format!(
            "{} of {} elements wrong",
            graded.comparison.failing, graded.comparison.elements
        )),
    }
}

/// Sequences (an output row is one sequence's token) and heads of a footprint.
fn place(batch: &Batch, at: &Footprint) -> String {
    let Some(span) = at.rows else {
        return "no element".into();
    };
    let seqs = if span.first == span.last {
        format!(
            "sequence {} ({} keys)",
            span.first,
            batch.len_of(span.first)
        )
    } else {
        format!("sequences {} to {}", span.first, span.last)
    };
    let heads = at.heads.count_ones();
    format!("{seqs}, {heads} of {HQ} heads")
}

/// What the failing elements say, per sequence.
struct Facts {
    /// Sequences with a failing element, ascending.
    failing: Vec<usize>,
    /// Sequences with a NaN or Inf element.
    non_finite: Vec<usize>,
    /// Whether every failing (sequence, head) is the answer times one factor above 1.
    scaled_up: bool,
}

impl Facts {
    fn gather(batch: &Batch, out: &[f32], reference: &[f64]) -> Facts {
        let (mut failing, mut non_finite) = (Vec::new(), Vec::new());
        let mut scaled_up = true;
        for s in 0..batch.num_seqs() {
            let rows = Batch::q_index(s, 0, 0)..Batch::q_index(s + 1, 0, 0);
            let bad = rows
                .clone()
                .any(|i| !passes(f64::from(out[i]), reference[i]));
            if !bad {
                continue;
            }
            failing.push(s);
            if out[rows.clone()].iter().any(|x| !x.is_finite()) {
                non_finite.push(s);
            }
            for h in 0..HQ {
                let head = Batch::q_index(s, h, 0)..Batch::q_index(s, h, DH);
                let fails = head
                    .clone()
                    .any(|i| !passes(f64::from(out[i]), reference[i]));
                if fails
                    && !common_factor(&out[head.clone()], &reference[head]).is_some_and(|f| f > 1.0)
                {
                    scaled_up = false;
                }
            }
        }
        Facts {
            failing,
            non_finite,
            scaled_up,
        }
    }

    /// The planted bugs in the order the pattern makes likely (all of them:
    /// the replay decides).
    fn suspects(&self, batch: &Batch, splits: usize) -> Vec<Bug> {
        let split = |s: usize| partitions(batch.len_of(s), splits);
        let mut first = Vec::new();
        if !self.non_finite.is_empty() && self.non_finite.iter().all(|&s| batch.len_of(s) == 1) {
            first.push(Bug::LastKeyDropped);
        }
        if !self.non_finite.is_empty()
            && self
                .non_finite
                .iter()
                .all(|&s| (2..MAX_SPLITS).contains(&split(s)))
        {
            first.push(Bug::CombineAllSlots);
        }
        if self.scaled_up {
            first.push(Bug::MissingDivision);
        }
        if self.failing.iter().all(|&s| split(s) > 1) {
            first.push(Bug::CombineUnscaled);
        }
        if batch.alibi {
            first.push(Bug::AlibiSignFlipped);
        }
        let rest: Vec<Bug> = Bug::ALL
            .into_iter()
            .filter(|b| !first.contains(b))
            .collect();
        first.extend(rest);
        first
    }

    /// The pattern's own reading, when no planted bug reproduces the output.
    fn likely(&self, batch: &Batch, splits: usize) -> String {
        let split = |s: usize| partitions(batch.len_of(s), splits);
        let all = self.failing.len() == batch.num_seqs();
        if self.scaled_up {
            "every failing head is the answer times one factor: the softmax is not normalized by its sum".into()
        } else if !self.non_finite.is_empty() {
            format!(
                "NaN or Inf in sequences {:?}: a read past a sequence's end or of a spare block (both NaN), \
                 an unwritten workspace slot, or an exp that overflowed",
                self.non_finite
            )
        } else if self.failing.iter().all(|&s| split(s) > 1) && !all {
            "only sequences longer than one partition fail: the combine of partial results".into()
        } else {
            format!("sequences {:?} fail with finite values: the scores, the keys read or their weights", self.failing)
        }
    }
}

/// Whether `bug`'s model reproduces the kernel's output on sequences `seqs`,
/// by [`evidence::replay`]: finite where it counts, and naming some failure.
fn replay_matches(
    inputs: &Inputs,
    out: &[f32],
    reference: &[f64],
    bug: Bug,
    seqs: &[usize],
    splits: usize,
) -> bool {
    let model = oracle::evaluate(inputs, Some(seqs), Some(bug), splits);
    let indices = seqs
        .iter()
        .flat_map(|&s| Batch::q_index(s, 0, 0)..Batch::q_index(s + 1, 0, 0));
    let replayed = evidence::replay_output(
        indices,
        out,
        reference,
        |at| Written::Value(model[at]),
        |_, got, want| passes(got, want),
    );
    replayed == Replay::Reproduces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_decode::bugs::{model, model_split};
    use crate::lab::paged_decode::cases::hazard_cases;
    use crate::lab::paged_decode::oracle::REFERENCE_SPLITS;

    fn as_f32(values: &[f64]) -> Vec<f32> {
        values.iter().map(|&x| x as f32).collect()
    }

    /// Every planted bug, on every case it fails, is named by its own
    /// model; the correct output is no diagnosis.
    #[test]
    fn each_planted_bug_is_named_on_every_case_it_fails() {
        for case in hazard_cases() {
            let inputs = case.generate(5).unwrap();
            let reference = oracle::attention(&inputs, None);
            assert!(
                explain(&inputs, &as_f32(&reference), &reference, REFERENCE_SPLITS).is_none(),
                "{}",
                case.name
            );
            for bug in Bug::ALL.into_iter().filter(|b| b.must_fail(&inputs.batch)) {
                let modelled = model(&inputs, bug);
                let out = as_f32(&modelled);
                let (line, named) =
                    explain(&inputs, &out, &reference, REFERENCE_SPLITS).expect("a failing case");
                // A model whose failures are all NaN is no evidence: the
                // experiments name that bug (tests in the lab's mod.rs).
                let blind = modelled
                    .iter()
                    .zip(&reference)
                    .all(|(&m, &r)| passes(m, r) || !m.is_finite());
                if blind {
                    assert_eq!(named, None, "{} on {}: {line}", bug.name(), case.name);
                    continue;
                }
                assert_eq!(named, Some(bug), "{} on {}: {line}", bug.name(), case.name);
                assert!(line.starts_with(bug.defect()), "{line}");
            }
        }
    }

    /// A kernel that cuts its sequences into 4 partitions (`splits=4`) and
    /// combines them unscaled is named by the model cut as it cuts, on
    /// every case it fails; the reference's 16 partitions miss it on some.
    #[test]
    fn a_combine_bug_is_named_at_the_kernel_s_own_split() {
        let (mut named, mut missed_at_sixteen) = (0, 0);
        for case in hazard_cases() {
            let inputs = case.generate(5).unwrap();
            let reference = oracle::attention(&inputs, None);
            let out = as_f32(&model_split(&inputs, Bug::CombineUnscaled, 4));
            let Some((line, bug)) = explain(&inputs, &out, &reference, 4) else {
                continue; // no sequence of this case is cut in two at 4 partitions
            };
            assert_eq!(bug, Some(Bug::CombineUnscaled), "{}: {line}", case.name);
            named += 1;
            let at_sixteen = explain(&inputs, &out, &reference, REFERENCE_SPLITS);
            if at_sixteen.and_then(|(_, bug)| bug) != Some(Bug::CombineUnscaled) {
                missed_at_sixteen += 1;
            }
        }
        assert!(named >= 3, "{named} cases");
        assert!(
            missed_at_sixteen >= 1,
            "the reference's split named all {named}"
        );
    }

    #[test]
    fn an_unplanted_error_gets_the_patterns_reading() {
        let case = hazard_cases()
            .into_iter()
            .find(|c| c.name == "partition-edges")
            .unwrap();
        let inputs = case.generate(5).unwrap();
        let reference = oracle::attention(&inputs, None);
        // Half of every output: a factor, but below 1, so no planted bug.
        let halved: Vec<f32> = reference.iter().map(|&x| (x * 0.5) as f32).collect();
        let (line, named) = explain(&inputs, &halved, &reference, REFERENCE_SPLITS).unwrap();
        assert_eq!(named, None);
        assert!(line.contains("finite values"), "{line}");
        // NaN in one sequence of one partition only: a stray read.
        let mut stray = as_f32(&reference);
        stray[Batch::q_index(3, 7, 1)] = f32::NAN;
        let (line, named) = explain(&inputs, &stray, &reference, REFERENCE_SPLITS).unwrap();
        assert_eq!(named, None);
        assert!(line.contains("NaN or Inf in sequences [3]"), "{line}");
    }
}
