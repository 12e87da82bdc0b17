//! The second lab, `paged-prefill` ("paged-prefill-v1"): vLLM's paged
//! prefix prefill in fp32, an instance of the paged family
//! ([`crate::lab::paged`]) with an fp32 cache. The contract and its
//! argument table are in [`contract`]; the cases' fp32 layout, the oracle,
//! the bug models and the diagnosis in the files beside it.

pub mod bugs;
pub mod cases;
pub mod contract;
pub mod diagnosis;
pub mod golden;
pub mod oracle;
pub mod tensors;

use rand_chacha::ChaCha8Rng;

use crate::lab::paged::redraw::{prefill_redraw, Large, ABOUT_FOUR};
use crate::lab::redraw::Redraw;
use std::path::Path;

use self::cases::{CaseSpec, EMBEDDED_CASES};
use self::contract::{
    Inputs, ABS_TOL, ARGS, CONTRACT, DH, ENTRY_POINT, ENTRY_SIGNATURE, HQ, INSTANCE, LAYOUT,
    REL_TOL,
};
use crate::grade::compare::Tolerance;
use crate::lab::definition::{
    shipped, CaseData, CaseError, CaseSummary, Diagnosis, Graded, LabInfo, LabRef, Problem,
    RooflineWords,
};
use crate::lab::geometry::LaunchGeometry;
use crate::lab::paged::high_blocks;
use crate::lab::paged::layout::PREFILL_GEOMETRY;
use crate::lab::paged::problem::{listed_rows, prefill_grid, Timed};
use crate::lab::paged::tiled::TILED_ORACLE;
use crate::lab::typed::{Arg, Made, TypedLab};

/// A case of this lab: a recipe of the cases file, or the contract's timing batch.
pub type Recipe = Timed<CaseSpec>;

const TIMING_SHAPE: &str = "paged-prefill-v1";

/// The `paged-prefill` lab.
pub struct PagedPrefill;

/// The second lab, as the engine takes it.
pub const PAGED_PREFILL: LabRef = LabRef(&PagedPrefill);

impl TypedLab for PagedPrefill {
    type Case = Recipe;
    type Inputs = Inputs;
    const ARGS: &'static [Arg<Inputs>] = ARGS;
    const INFO: LabInfo = LabInfo {
        name: "paged-prefill",
        contract: CONTRACT,
        description: "vLLM's paged prefix prefill: a batch of sequences, block tables into an x-packed paged K/V cache, sliding window, ALiBi",
        default_file: "paged_prefill.cu",
        entry_point: ENTRY_POINT,
        signature: ENTRY_SIGNATURE,
        body_constants: &LAYOUT.body_constants(),
        default_geometry: PREFILL_GEOMETRY,
        roofline: RooflineWords::PLAIN,
        tolerance: Tolerance {
            abs: ABS_TOL,
            rel: REL_TOL,
        },
        cases: EMBEDDED_CASES,
        // What the timing batch's tensors and owned cache slots are drawn from;
        // the cache's sentinels (2.5, 40) lie outside it and stay.
        timing_draw: -1.0..1.0,
        kernels: shipped!("paged-prefill", "paged_oracle_f64", TILED_ORACLE, after "kernels/paged-family/tiled-oracle.cuh"),
    };

    fn parse_cases(text: &str, file: &str, base: &Path) -> Result<Vec<Recipe>, CaseError> {
        let specs = INSTANCE.parse_cases(text, file, base)?;
        Ok(specs.into_iter().map(Recipe::Case).collect())
    }

    fn generate(case: &Recipe, seed: u64) -> Result<Made<Inputs>, CaseError> {
        match case {
            Recipe::Timing { timing_shape, .. } => {
                Recipe::check_timing_shape(timing_shape, TIMING_SHAPE)?;
                Ok(Made::plain(cases::timing_inputs(seed)))
            }
            Recipe::Case(spec) => {
                let made = cases::generate(spec, seed).map_err(|e| e.for_case(&spec.name))?;
                made.inputs.batch.check_int_arguments(&spec.name)?;
                Ok(Made {
                    inputs: made.inputs,
                    expected: made.expected,
                    planted_heads: spec.planted_heads(),
                })
            }
        }
    }

    fn problem_of(inputs: &Inputs) -> Problem {
        INSTANCE.problem(&inputs.batch)
    }

    fn problem(case: &Recipe) -> Result<Problem, CaseError> {
        match case {
            // The timing batch's size is known without its 300 MB of cache.
            Recipe::Timing { .. } => Ok(INSTANCE.problem(&cases::timing_batch(0))),
            // A generated case's size follows from its lengths, without its
            // cache (134 MB for the 32k case).
            Recipe::Case(spec) if spec.tensors.is_none() => {
                Ok(INSTANCE.problem(&INSTANCE.lengths_batch(spec)))
            }
            Recipe::Case(_) => {
                Self::generate(case, 0).map(|made| INSTANCE.problem(&made.inputs.batch))
            }
        }
    }

    fn grid(geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        prefill_grid(geometry, problem)
    }

    fn oracle(inputs: &Inputs, rows: Option<&[usize]>) -> Vec<f64> {
        listed_rows(oracle::attention(inputs, rows), rows, HQ * DH)
    }

    fn diagnose(inputs: &Inputs, _: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        diagnosis::case_diagnosis(inputs, graded)
    }

    fn fault_note(inputs: &Inputs) -> Option<String> {
        high_blocks::fault_note(&inputs.batch)
    }

    /// Scores are `q . k / 8` plus the ALiBi bias: shrinking `q` and the
    /// slopes shrinks every score by the same factor.
    fn scores_shrunk(inputs: &Inputs, factor: f32) -> Option<Inputs> {
        let mut shrunk = inputs.clone();
        let slopes = shrunk.alibi_slopes.as_mut();
        crate::lab::experiment::shrink_scores(&mut shrunk.q, slopes, factor, |x| x);
        Some(shrunk)
    }

    fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
        crate::lab::verdict::with_planted(
            cases,
            &bugs::Bug::ALL.map(|bug| (bug.name(), bug.defect())),
        )
    }

    fn redraw(inputs: &Inputs, rng: &mut ChaCha8Rng) -> Redraw {
        let large = Large {
            activation: ABOUT_FOUR,
            key: ABOUT_FOUR,
        };
        prefill_redraw(&inputs.batch, large, rng)
    }
    fn timing_case(overrides: &[(String, String)]) -> Result<Recipe, String> {
        let detail = INSTANCE.problem(&cases::timing_batch(0)).detail;
        Recipe::timing(Self::INFO.name, TIMING_SHAPE, overrides, detail)
    }

    fn check_case(case: &Recipe) -> Result<(), CaseError> {
        match case {
            Recipe::Timing { timing_shape, .. } => {
                Recipe::check_timing_shape(timing_shape, TIMING_SHAPE)
            }
            Recipe::Case(spec) => INSTANCE.check(spec),
        }
    }

    fn prove_oracle() -> Result<String, String> {
        crate::lab::golden::said(golden::prove_oracle())
    }
}

#[cfg(test)]
mod tests {
    use super::bugs::{self, Bug};
    use super::oracle::Model;
    use super::*;
    use crate::grade::compare::Comparison;
    use crate::grade::integrity::Integrity;
    use crate::lab::args::ArgValue;
    use crate::lab::definition::LabCase;
    use crate::lab::paged::misread::{Misreading, CONTEXT_SHIFTS};
    use crate::lab::paged::recipe::MAX_NEW;
    use crate::lab::paged::testing;
    use crate::lab::typed;

    fn embedded() -> Vec<LabCase> {
        testing::embedded(PAGED_PREFILL)
    }

    #[test]
    fn every_case_becomes_the_contracts_argument_list() {
        testing::for_each_argument_list(PAGED_PREFILL, &embedded(), 7, |case, data, args| {
            // The ALiBi slopes are passed exactly when the case asks for them.
            let inputs = typed::inputs_of::<PagedPrefill>(data);
            assert_eq!(
                args[11] == ArgValue::Null,
                !inputs.batch.alibi,
                "{}",
                case.name
            );
            assert_eq!(inputs.batch.total_new(), data.problem.output.rows);
        });
    }

    /// A case's size is read from its lengths, the generated case's own,
    /// and only the long case is graded on sampled rows, with the
    /// watchdogs its 26 GFLOP need (35 s at the default).
    #[test]
    fn only_the_long_case_is_sampled_and_it_gets_seven_watchdogs() {
        for case in embedded() {
            let problem = PAGED_PREFILL.problem(&case).expect("sized");
            let long = case.name == "long-context-32k";
            assert_eq!(problem.oracle_sampled(), long, "{}", case.name);
            assert_eq!(
                problem.watchdogs(),
                if long { 7.0 } else { 1.0 },
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn the_default_grid_is_the_contracts() {
        let case = &embedded()[0];
        let problem = PAGED_PREFILL.problem(case).expect("problem");
        let geometry = PAGED_PREFILL.default_geometry();
        let (x, y, z) = PAGED_PREFILL.grid(&geometry, &problem);
        assert_eq!(x as usize, problem.sequence_starts.len());
        assert_eq!(y, 32);
        assert_eq!(z as usize, problem.max_sequence_rows.div_ceil(64));
        assert!(problem.max_sequence_rows <= MAX_NEW);
    }

    #[test]
    fn sampled_rows_of_the_oracle_match_the_whole_output() {
        let case = &embedded()[0];
        let data = PAGED_PREFILL.generate(case, 3).expect("generates");
        let whole = PAGED_PREFILL.oracle(&data, None);
        let rows = [0, data.problem.output.rows - 1];
        let sampled = PAGED_PREFILL.oracle(&data, Some(&rows));
        let row_len = HQ * DH;
        assert_eq!(sampled.len(), 2 * row_len);
        assert_eq!(sampled[..row_len], whole[..row_len]);
        let last = rows[1] * row_len;
        assert_eq!(sampled[row_len..], whole[last..last + row_len]);
    }

    /// What a kernel with `bug` leaves in `out` (see [`bugs::kernel_output`]).
    fn kernel_output(data: &CaseData, bug: Bug) -> Vec<f32> {
        bugs::kernel_output(typed::inputs_of::<PagedPrefill>(data), bug)
    }

    /// The lab's comparison and diagnosis of `out`, launched with `integrity`.
    fn diagnosed(data: &CaseData, out: &[f32], integrity: &Integrity) -> (Comparison, Diagnosis) {
        testing::diagnosed(PAGED_PREFILL, data, out, integrity)
    }

    fn mixed_lengths() -> CaseData {
        named_case("mixed-lengths")
    }

    #[test]
    fn a_bug_models_output_is_diagnosed_in_the_labs_language() {
        let data = mixed_lengths();
        let out = kernel_output(&data, Bug::BlockTableIgnored);
        let (comparison, said) = diagnosed(&data, &out, &Integrity::default());
        assert!(!comparison.passed);
        assert!(said.line.contains("block"), "{said:?}");
        assert_eq!(said.cause, Some("block-table-ignored"));
    }

    #[test]
    fn the_timing_case_is_the_contracts_batch_and_takes_no_keys() {
        let case = PAGED_PREFILL.timing_case(&[]).expect("timing case");
        let problem = PAGED_PREFILL.problem(&case).expect("problem");
        assert_eq!(problem.output.rows, 3930);
        assert!((problem.work.flops / 1e9 - 69.9).abs() < 0.05);
        let refused = PAGED_PREFILL
            .timing_case(&[("chunk".into(), "64".into())])
            .expect_err("no keys");
        assert!(refused.contains("`chunk`"), "{refused}");
    }

    #[test]
    fn the_oracle_is_proven_on_its_golden_case() {
        PAGED_PREFILL
            .prove_oracle()
            .expect("the golden proof holds");
    }

    /// The check's one line when every shipped case runs `bug`'s CPU model.
    fn verdict_for(bug: Bug) -> String {
        let ran: Vec<(String, Comparison, Diagnosis)> = testing::whole_oracle(PAGED_PREFILL)
            .into_iter()
            .map(|case| {
                let data = PAGED_PREFILL.generate(&case, 3).expect("generates");
                let (comparison, said) =
                    diagnosed(&data, &kernel_output(&data, bug), &Integrity::default());
                (case.name, comparison, said)
            })
            .collect();
        testing::verdict_of(PAGED_PREFILL, &ran)
    }

    macro_rules! verdict_names_the_bug {
        ($($test:ident: $bug:ident,)*) => {$(
            #[test]
            fn $test() {
                let bug = Bug::$bug;
                let line = verdict_for(bug);
                assert!(line.starts_with(bug.defect()), "{line}");
                assert!(line.contains("its model reproduces the output of"), "{line}");
            }
        )*};
    }

    verdict_names_the_bug! {
        verdict_names_an_ignored_block_table: BlockTableIgnored,
        verdict_names_x_assumed_8: XAssumed8,
        verdict_names_a_window_off_by_one: WindowOffByOne,
        verdict_names_a_flipped_alibi_sign: AlibiSignFlipped,
        verdict_names_new_tokens_read_from_the_cache: CacheForNewTokens,
        verdict_names_a_shifted_qstart: QStartShifted,
        verdict_names_a_missing_final_division: MissingDivision,
        verdict_names_the_mask_precedence: MaskPrecedence,
    }

    #[test]
    fn shifted_sequence_starts_are_named_over_their_stray_writes() {
        let data = mixed_lengths();
        let stray = Integrity {
            out_of_bounds_writes: 4096,
            ..Integrity::default()
        };
        let (_, said) = diagnosed(&data, &kernel_output(&data, Bug::QStartShifted), &stray);
        assert_eq!(said.cause, Some("wrong-qstart"), "{said:?}");
        assert!(
            said.line
                .ends_with("land outside out (4096 floats written there)"),
            "{said:?}"
        );
    }

    fn named_case(name: &str) -> CaseData {
        testing::embedded_case(PAGED_PREFILL, name, 5)
    }

    /// What a kernel that misreads the batch so writes into `out`.
    fn misread_output(data: &CaseData, misreading: Misreading) -> Vec<f32> {
        let inputs = typed::inputs_of::<PagedPrefill>(data);
        oracle::evaluate(inputs, None, Model::Misread(misreading), f64::NAN)
            .iter()
            .map(|&x| x as f32)
            .collect()
    }

    #[test]
    fn a_wrong_gqa_map_is_named_with_the_kv_head_each_query_head_reads() {
        let cases = ["gqa-heads", "mixed-lengths"];
        testing::assert_wrong_kv_maps_named(PAGED_PREFILL, cases, |data, misreading| {
            diagnosed(
                data,
                &misread_output(data, misreading),
                &Integrity::default(),
            )
        });
    }

    #[test]
    fn a_context_length_off_is_named_with_its_shift() {
        let data = named_case("last-cached-key");
        for shift in CONTEXT_SHIFTS {
            let out = misread_output(&data, Misreading::ContextShift(shift));
            let diagnosed = diagnosed(&data, &out, &Integrity::default());
            testing::assert_context_shift_named(shift, &diagnosed);
        }
    }

    #[test]
    fn the_query_heads_of_one_kv_head_failing_alike_point_at_its_data() {
        // KV head 2's new values corrupted: every row of its four query
        // heads fails (each sees its own token), no model reproduces it,
        // and the other KV heads' query heads pass.
        let data = named_case("mixed-lengths");
        let mut inputs = typed::inputs_of::<PagedPrefill>(&data).clone();
        let total_new = inputs.batch.total_new();
        testing::corrupt_kv_head_2(&mut inputs.v_new, total_new, &LAYOUT, 4.0);
        let wrong = to_f32(&oracle::attention(&inputs, None));
        // One head of the group told apart from its group's others: per query head.
        let right = to_f32(&PAGED_PREFILL.oracle(&data, None));
        testing::assert_kv_head_failures_told(PAGED_PREFILL, &data, &LAYOUT, &wrong, right, 1.0);
    }

    fn to_f32(values: &[f64]) -> Vec<f32> {
        values.iter().map(|&x| x as f32).collect()
    }

    #[test]
    fn rows_left_unwritten_are_told_as_unwritten() {
        // Sequence 0's first rows unwritten: the shifted-qStart model leaves
        // them unwritten too, but gets the rows after them wrong.
        let data = named_case("mixed-lengths");
        let out = to_f32(&PAGED_PREFILL.oracle(&data, None));
        testing::assert_unwritten_rows_told(PAGED_PREFILL, &data, out);
    }

    #[test]
    fn a_correct_kernel_reads_all_pass() {
        use crate::lab::definition::{CaseState, CaseSummary};
        let names: Vec<String> = embedded().into_iter().map(|c| c.name).collect();
        let summaries: Vec<CaseSummary<'_>> = names
            .iter()
            .map(|name| CaseSummary {
                name,
                state: CaseState::Pass,
                comparison: None,
                integrity: None,
                diagnosis: "correct",
                cause: None,
            })
            .collect();
        assert_eq!(
            PAGED_PREFILL.verdict(&summaries).as_deref(),
            Some("all 19 cases pass")
        );
    }
}
