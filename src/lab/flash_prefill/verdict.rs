//! The flash-prefill check's one line, read from which of its planted cases
//! fail and which pass.
//!
//! Each planted case is there to show one thing: `planted-overflow` puts
//! scores of 128 in head 0 (an `exp` of a raw score overflows),
//! `last-key-of-prefix` and `last-key-of-sequence` make each row's maximum
//! arrive last (a running max that moves late needs `l` and the accumulator
//! rescaled), `causal-diagonal` makes a row's own key decisive. A kernel
//! that breaks one of those fails its case far worse than the uniform
//! cases, which the same defect may graze; so the verdict names the defect
//! the planted cases show, and says which cases show it.

use super::bugs::FlashBug;
use super::diagnosis::flash_cause;
use crate::lab::definition::{CaseState, CaseSummary};
use crate::lab::verdict::{self, cause, failed, in_cases, select, with_cause};

/// The cases whose row maximum arrives with their last keys.
const LATE_MAX: [&str; 2] = ["last-key-of-prefix", "last-key-of-sequence"];

/// The line for a flash-prefill check, `None` when no case ran.
pub fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
    if let Some(line) = verdict::settled(cases) {
        return line;
    }
    if let Some(line) = verdict::severe(cases) {
        return Some(line);
    }
    Some(planted(cases).unwrap_or_else(|| verdict::by_cause(cases)))
}

/// What the planted cases show, when they show something.
fn planted(cases: &[CaseSummary<'_>]) -> Option<String> {
    let failing = select(cases, |c| c.state == CaseState::Fail);
    let late: Vec<&str> = LATE_MAX
        .into_iter()
        .filter(|name| failed(cases, name) == Some(true))
        .collect();
    let uniform_pass = cases.iter().filter(|c| c.state == CaseState::Pass).count();

    let shrunk = with_cause(cases, flash_cause::DENOMINATOR_TOO_LARGE);
    if !late.is_empty() && !shrunk.is_empty() {
        return Some(format!(
            "l is not rescaled when the running max grows: the late-maximum cases fail ({}), and \
             rows come out as the right answer times one factor below 1 ({}); multiply l by \
             exp(m_old - m_new) at every new max",
            late.join(", "),
            in_cases(&shrunk, cases)
        ));
    }
    let overflow = with_cause(cases, cause::NAN_EXP_OVERFLOW);
    if !overflow.is_empty() {
        return Some(format!(
            "exp overflows on raw scores: shrinking the scores removes the NaN/Inf ({}); subtract \
             the running max before exponentiating{}",
            in_cases(&overflow, cases),
            pass_note(uniform_pass, cases.len())
        ));
    }
    let acc = with_cause(cases, FlashBug::MissingAccRescale.name());
    if !late.is_empty() && acc.len() * 2 >= failing.len() {
        return Some(format!(
            "the accumulator is not rescaled when the running max grows: the late-maximum cases \
             fail ({}, worst {:.0}x the allowance), and a model of that defect reproduces the \
             output ({}); multiply acc by exp(m_old - m_new) at every new max",
            late.join(", "),
            worst_ratio(cases, &late),
            in_cases(&acc, cases)
        ));
    }
    // A row left with no key at all (row 0 of a case without prefix) is
    // named by its own case (`diagnosis::keyless`), so the cases count alike.
    let diagonal = with_cause(cases, FlashBug::CausalOffByOne.name());
    if diagonal.len() * 2 >= failing.len() {
        return Some(format!(
            "each row misses its own key: a model whose key loop stops at j < prefixLen + i \
             reproduces the output ({}); row i sees keys up to prefixLen + i inclusive",
            in_cases(&diagonal, cases)
        ));
    }
    let unwritten = with_cause(cases, flash_cause::ROWS_NEVER_WRITTEN);
    if unwritten.len() * 2 >= failing.len()
        && !unwritten.is_empty()
        && failed(cases, "chunk-multiple-of-64") == Some(false)
    {
        return Some(format!(
            "the rows of a last, partial 64-row tile are never written ({}), while \
             chunk-multiple-of-64, whose tiles are all full, passes: launch chunkLen / 64 blocks \
             rounded up and guard each row with row < chunkLen instead of skipping the block",
            in_cases(&unwritten, cases)
        ));
    }
    let tile = with_cause(cases, FlashBug::TileEdge.name());
    if tile.len() * 2 >= failing.len().saturating_sub(tile.len()) && !tile.is_empty() {
        return Some(format!(
            "each block drops its last, partial key tile: a model whose tile count rounds down \
             reproduces the output ({}); round the tile count up and mask the keys past the end{}",
            in_cases(&tile, cases),
            pass_note(uniform_pass, cases.len())
        ));
    }
    None
}

fn worst_ratio(cases: &[CaseSummary<'_>], names: &[&str]) -> f64 {
    cases
        .iter()
        .filter(|c| names.contains(&c.name))
        .filter_map(|c| c.comparison.map(|cmp| cmp.worst_ratio))
        .fold(0.0, f64::max)
}

fn pass_note(passing: usize, total: usize) -> String {
    if passing == 0 {
        String::new()
    } else {
        format!(" ({passing} of {total} cases pass)")
    }
}

#[cfg(test)]
mod tests {
    use super::super::bugs::{FlashBug, ModelKernel};
    use super::super::cases::{embedded_cases, whole_oracle_cases, CaseSpec};
    use super::super::FlashPrefill;
    use super::*;
    use crate::grade::compare::{compare, Comparison};
    use crate::grade::integrity::Integrity;
    use crate::lab::definition::Graded;
    use crate::lab::experiment::{self, Conditions, FirstRuns, Rerun};
    use crate::lab::typed::lab_case;

    /// One case as the runner would have reported it.
    struct Ran {
        name: String,
        state: CaseState,
        comparison: Option<Comparison>,
        integrity: Integrity,
        diagnosis: String,
        cause: Option<&'static str>,
        candidates: Vec<&'static str>,
    }

    fn summaries(ran: &[Ran]) -> Vec<CaseSummary<'_>> {
        ran.iter()
            .map(|r| CaseSummary {
                name: &r.name,
                state: r.state,
                comparison: r.comparison.as_ref(),
                integrity: Some(&r.integrity),
                diagnosis: &r.diagnosis,
                cause: r.cause,
            })
            .collect()
    }

    /// One shipped case (its prefix cut to 100 keys, to keep the CPU models
    /// quick) run through `bug`'s model, or through an exact kernel, and
    /// diagnosed as the worker would, the experiments included.
    fn run_case(mut spec: CaseSpec, bug: Option<FlashBug>, integrity: Integrity) -> Ran {
        let lab = super::super::FLASH_PREFILL;
        spec.prefix = spec.prefix.min(100);
        let data = lab
            .generate(&lab_case::<FlashPrefill>(spec.clone()), 11)
            .unwrap();
        let reference = lab.oracle(&data, None);
        let out: Vec<f32> = match bug {
            Some(bug) => {
                let Ok(out) = ModelKernel(bug).rerun(&data, &Conditions::default());
                out
            }
            None => reference.iter().map(|&x| x as f32).collect(),
        };
        let comparison = compare(data.problem.output, lab.tolerance(), &out, &reference);
        let experiments = match bug {
            Some(bug) if !comparison.passed => {
                let first = FirstRuns {
                    data: &data,
                    out: &out,
                    reference: &reference,
                    comparison: &comparison,
                    runs_differ: false,
                    second: None,
                };
                let Ok(found) = experiment::run(lab.0, &first, &mut ModelKernel(bug));
                found
            }
            _ => Default::default(),
        };
        let said = lab.diagnose(
            &data,
            &Graded {
                launch: &lab.default_geometry(),
                out: &out,
                reference: &reference,
                comparison: &comparison,
                integrity: &integrity,
                experiments: &experiments,
            },
        );
        Ran {
            name: spec.name,
            state: if comparison.passed && integrity.is_clean() {
                CaseState::Pass
            } else {
                CaseState::Fail
            },
            comparison: Some(comparison),
            integrity,
            diagnosis: said.line,
            cause: said.cause,
            candidates: said.candidates,
        }
    }

    fn check_with(bug: FlashBug) -> Vec<Ran> {
        whole_oracle_cases()
            .into_iter()
            .map(|spec| run_case(spec, Some(bug), Integrity::default()))
            .collect()
    }

    fn verdict_for(bug: FlashBug) -> String {
        let ran = check_with(bug);
        verdict(&summaries(&ran)).expect("cases ran")
    }

    /// On every case a loop-bound bug fails, its diagnosis names it: by its
    /// model on finite rows, by the rows it leaves with no key where the
    /// NaN is all there is, and beside the other defect where the two write
    /// the same output (then naming neither, but listing both as the
    /// candidates the check's other cases settle: only this bug is named
    /// by them, the outcome layer's `settle_candidates`).
    #[test]
    fn every_failing_case_of_a_loop_bound_bug_names_it() {
        for bug in [FlashBug::CausalOffByOne, FlashBug::TileEdge] {
            let ran = check_with(bug);
            let failing: Vec<&Ran> = ran.iter().filter(|r| r.state != CaseState::Pass).collect();
            let named: Vec<&str> = failing.iter().filter_map(|r| r.cause).collect();
            for ran in &failing {
                let settled = ran.cause.is_none()
                    && ran.candidates.contains(&bug.name())
                    && ran
                        .candidates
                        .iter()
                        .all(|&c| c == bug.name() || !named.contains(&c))
                    && named.contains(&bug.name());
                assert!(
                    ran.cause == Some(bug.name()) || settled,
                    "{bug:?} on {}: {:?} {:?} {}",
                    ran.name,
                    ran.cause,
                    ran.candidates,
                    ran.diagnosis
                );
            }
        }
    }

    #[test]
    fn causal_off_by_one_is_named_from_the_model_and_the_lone_key_row() {
        let line = verdict_for(FlashBug::CausalOffByOne);
        assert!(line.starts_with("each row misses its own key"), "{line}");
        // no-prefix's row 0, whose only key is its own, comes out 0/0 and counts too.
        assert!(line.contains("14 of 14 cases"), "{line}");
    }

    #[test]
    fn missing_acc_rescale_is_named_with_the_late_maximum_cases() {
        let line = verdict_for(FlashBug::MissingAccRescale);
        assert!(
            line.starts_with("the accumulator is not rescaled"),
            "{line}"
        );
        assert!(
            line.contains("last-key-of-prefix, last-key-of-sequence"),
            "{line}"
        );
    }

    #[test]
    fn missing_l_rescale_is_named_from_the_one_factor_rows() {
        let line = verdict_for(FlashBug::MissingLRescale);
        assert!(line.starts_with("l is not rescaled"), "{line}");
        assert!(line.contains("times one factor below 1"), "{line}");
    }

    #[test]
    fn no_max_subtraction_is_named_from_the_shrunk_scores_experiment() {
        let line = verdict_for(FlashBug::NoMaxSubtraction);
        assert!(line.starts_with("exp overflows on raw scores: shrinking the scores removes the NaN/Inf (in planted-overflow"), "{line}");
        assert!(line.ends_with("(9 of 14 cases pass)"), "{line}");
    }

    #[test]
    fn oob_read_is_named_from_the_guard_experiment() {
        let line = verdict_for(FlashBug::OobRead);
        assert!(
            line.starts_with("reads past the end of vCache: with vCache's guard bands finite"),
            "{line}"
        );
        assert!(line.contains("(the last row only)"), "{line}");
    }

    #[test]
    fn rows_never_written_are_named_from_the_partial_tile_cases() {
        let line = verdict_for(FlashBug::RowsNeverWritten);
        assert!(
            line.starts_with(
                "the rows of a last, partial 64-row tile are never written (in \
                 last-key-of-sequence"
            ),
            "{line}"
        );
        assert!(
            line.contains("chunk-multiple-of-64, whose tiles are all full, passes"),
            "{line}"
        );
    }

    #[test]
    fn tile_edge_is_named_from_the_model() {
        let line = verdict_for(FlashBug::TileEdge);
        assert!(
            line.starts_with("each block drops its last, partial key tile"),
            "{line}"
        );
    }

    /// A check whose `case` (a shipped one) ended as `state` with
    /// `integrity` on a correct output, every other case passing.
    fn check_where(case: &str, state: CaseState, integrity: Integrity, crash: &str) -> String {
        let ran: Vec<Ran> = embedded_cases()
            .into_iter()
            .map(|spec| match (spec.name == case, state) {
                (true, CaseState::Fail) => run_case(spec, None, integrity.clone()),
                (hit, _) => Ran {
                    name: spec.name,
                    state: if hit { state } else { CaseState::Pass },
                    comparison: None,
                    integrity: Integrity::default(),
                    diagnosis: if hit { crash } else { "correct" }.to_owned(),
                    cause: None,
                    candidates: Vec::new(),
                },
            })
            .collect();
        verdict(&summaries(&ran)).expect("cases ran")
    }

    #[test]
    fn a_hang_names_its_case() {
        let line = check_where(
            "chunk-of-1",
            CaseState::Timeout,
            Integrity::default(),
            "no answer within 4 s: the kernel hangs",
        );
        assert_eq!(
            line,
            "hangs on chunk-of-1: no answer within 4 s: the kernel hangs"
        );
    }

    #[test]
    fn an_illegal_address_names_its_case() {
        let line = check_where(
            "prefix-31",
            CaseState::Crash,
            Integrity::default(),
            "the kernel accessed an illegal address",
        );
        assert_eq!(
            line,
            "crashes on prefix-31: the kernel accessed an illegal address"
        );
    }

    #[test]
    fn an_out_of_bounds_write_and_a_mutated_input_are_named() {
        let oob = Integrity {
            out_of_bounds_writes: 2048,
            ..Integrity::default()
        };
        let line = check_where("chunk-of-17", CaseState::Fail, oob, "");
        assert!(
            line.starts_with("out-of-bounds write: the kernel wrote 2048 floats outside out"),
            "{line}"
        );
        assert!(line.ends_with("(in chunk-of-17, 1 of 15 cases)"), "{line}");
        let mutated = Integrity {
            inputs_modified: vec!["q".into()],
            ..Integrity::default()
        };
        let line = check_where("random-small", CaseState::Fail, mutated, "");
        assert!(
            line.starts_with("the kernel wrote into q (inputs are const)"),
            "{line}"
        );
    }

    #[test]
    fn a_race_is_named_for_both_racing_kernels() {
        // race.cu and missing-barrier-after-load.cu: two runs differ.
        for case in ["prefix-1000", "random-small"] {
            let race = Integrity {
                runs_differ: true,
                ..Integrity::default()
            };
            let line = check_where(case, CaseState::Fail, race, "");
            assert!(
                line.starts_with("race: two runs of the same case gave different bits"),
                "{line}"
            );
            assert!(line.contains(&format!("in {case}")), "{line}");
        }
    }
}
