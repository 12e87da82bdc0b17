//! The fourth lab, `paged-decode` ("paged-decode-v1"): one new token per
//! sequence against a paged KV cache, vLLM's `paged_attention_v1` / `v2` in
//! fp32, as the engine takes it. The contract, its argument table and the
//! `Batch`/`Inputs` types are in [`contract`]; the float64 oracle (also the
//! CPU model of every planted bug), the hazard cases and timing shape, the
//! `@flashprof` keys and the diagnosis in the files beside it.

pub mod bugs;
pub mod cases;
pub mod contract;
pub mod diagnosis;
pub mod directive;
pub mod golden;
pub mod oracle;
pub mod redraw;
pub mod tensors;

pub use self::contract::*;

use rand_chacha::ChaCha8Rng;

use crate::lab::redraw::Redraw;
use std::path::Path;

use self::cases::{CaseSpec, EMBEDDED_CASES};
use self::directive::GridX;
use crate::grade::compare::{OutputShape, Tolerance};
use crate::grade::roofline::Work;
use crate::lab::definition::{
    shipped, CaseData, CaseError, CaseSummary, Diagnosis, Graded, LabInfo, LabRef, OracleLaunch,
    Problem, RooflineWords,
};
use crate::lab::geometry::{GeometryError, GridY, LaunchGeometry};
use crate::lab::paged::problem::{listed_rows, Timed};
use crate::lab::typed::{Arg, Made, TypedLab};

/// A case of this lab: a recipe of the cases file, or the contract's timing batch.
pub type Recipe = Timed<CaseSpec>;

/// The `paged-decode` lab.
pub struct PagedDecode;

/// The fourth lab, as the engine takes it.
pub const PAGED_DECODE: LabRef = LabRef(&PagedDecode);

impl TypedLab for PagedDecode {
    type Case = Recipe;
    type Inputs = Inputs;
    const ARGS: &'static [Arg<Inputs>] = ARGS;
    const INFO: LabInfo = LabInfo {
        name: LAB_NAME,
        contract: CONTRACT,
        description: "vLLM's paged decode: one new token per sequence against an x-packed paged K/V cache, split-K scratch, graded on bytes",
        default_file: "paged_decode.cu",
        entry_point: ENTRY_POINT,
        signature: ENTRY_SIGNATURE,
        body_constants: &[
            ("HQ", HQ),
            ("HKV", HKV),
            ("DH", DH),
            ("GROUP", GROUP),
            ("BLOCK", BLOCK),
            ("X", X),
            ("MAX_SPLITS", MAX_SPLITS),
            ("SLOT_FLOATS", SLOT_FLOATS),
        ],
        // One token a sequence: a block serves one (head or KV group, sequence,
        // partition), so `rows_per_block` is 1 and means nothing more.
        default_geometry: LaunchGeometry {
            rows_per_block: 1,
            threads: DEFAULT_THREADS,
            dynamic_smem_bytes: 0,
            grid_y: GridY::QueryHead,
            splits: 1,
        },
        roofline: RooflineWords {
            // About 2 flops a byte at best: the kernel is judged by the bytes it moves.
            graded_on_bytes: true,
            compulsory_reads: None,
            reread_cause,
        },
        tolerance: Tolerance {
            abs: ABS_TOL,
            rel: REL_TOL,
        },
        cases: EMBEDDED_CASES,
        // `q` and the owned cache slots are drawn from it; the NaN slots past a
        // sequence's end and in spare blocks lie outside it and stay NaN.
        timing_draw: -1.0..1.0,
        kernels: shipped!("paged-decode", "paged_decode_oracle_f64", OracleLaunch::WarpPerRowHead { threads: 128 }),
    };

    fn parse_cases(text: &str, file: &str, base: &Path) -> Result<Vec<Recipe>, CaseError> {
        Ok(cases::parse_cases(text, file, base)?
            .into_iter()
            .map(Recipe::Case)
            .collect())
    }

    fn generate(case: &Recipe, seed: u64) -> Result<Made<Inputs>, CaseError> {
        match case {
            Recipe::Timing { timing_shape, .. } => {
                Recipe::check_timing_shape(timing_shape, CONTRACT)?;
                Ok(Made::plain(cases::timing_inputs(seed)))
            }
            Recipe::Case(spec) => {
                let (inputs, expected) = spec.make(seed).map_err(|e| CaseError::Invalid {
                    case: e.case,
                    message: e.message,
                })?;
                Ok(Made {
                    inputs,
                    expected,
                    planted_heads: spec.planted_heads(),
                })
            }
        }
    }

    fn problem_of(inputs: &Inputs) -> Problem {
        problem_of(&inputs.batch)
    }

    fn problem(case: &Recipe) -> Result<Problem, CaseError> {
        match case {
            // The timing batch's size is known without its 0.93 GB of cache.
            Recipe::Timing { .. } => Ok(problem_of(&cases::timing_batch(0))),
            Recipe::Case(_) => Self::generate(case, 0).map(|made| problem_of(&made.inputs.batch)),
        }
    }

    fn declared_geometry(source: &str) -> Result<LaunchGeometry, GeometryError> {
        let declared = directive::from_source(source)?;
        Ok(LaunchGeometry {
            threads: declared.threads,
            grid_y: match declared.grid_x {
                GridX::QueryHead => GridY::QueryHead,
                GridX::KvGroup => GridY::KvGroup,
            },
            splits: declared.splits,
            ..Self::INFO.default_geometry
        })
    }

    /// Grid `(32 or 8, numSeqs, splits)`: what a block serves is named by
    /// `grid_y` (query head or KV group) but it runs along grid x here.
    fn grid(geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        let x = geometry.grid_y.blocks(HQ, HKV);
        (x, problem.output.rows.max(1) as u32, geometry.splits.max(1))
    }

    fn oracle(inputs: &Inputs, rows: Option<&[usize]>) -> Vec<f64> {
        listed_rows(oracle::attention(inputs, rows), rows, HQ * DH)
    }

    fn diagnose(inputs: &Inputs, _: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        diagnosis::case_diagnosis(inputs, graded)
    }

    /// Scores are `q . k / 8` plus the ALiBi bias: shrinking `q` and the
    /// slopes shrinks every score by the same factor.
    fn scores_shrunk(inputs: &Inputs, factor: f32) -> Option<Inputs> {
        let mut shrunk = inputs.clone();
        let slopes = shrunk.alibi_slopes.as_mut();
        crate::lab::experiment::shrink_scores(&mut shrunk.q, slopes, factor, |x| x);
        Some(shrunk)
    }

    fn sentinels_tagged(inputs: &Inputs) -> Option<Inputs> {
        Some(inputs.sentinels_tagged())
    }

    fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
        crate::lab::verdict::with_planted(
            cases,
            &bugs::Bug::ALL.map(|bug| (bug.name(), bug.defect())),
        )
    }

    fn redraw(inputs: &Inputs, rng: &mut ChaCha8Rng) -> Redraw {
        redraw::redraw(inputs, rng)
    }
    fn timing_case(overrides: &[(String, String)]) -> Result<Recipe, String> {
        let detail = problem_of(&cases::timing_batch(0)).detail;
        Recipe::timing(Self::INFO.name, CONTRACT, overrides, detail)
    }

    fn check_case(case: &Recipe) -> Result<(), CaseError> {
        match case {
            Recipe::Timing { timing_shape, .. } => {
                Recipe::check_timing_shape(timing_shape, CONTRACT)
            }
            Recipe::Case(spec) => spec.validate().map_err(|e| CaseError::Invalid {
                case: e.case,
                message: e.message,
            }),
        }
    }

    fn prove_oracle() -> Result<String, String> {
        crate::lab::golden::said(golden::prove_with(&golden::GOLDEN_FILES, oracle::attention))
    }
}

/// The cache is nearly all of the inputs: reading it N times is each
/// KV head read by N of its query heads' blocks.
fn reread_cause(reads_over_floor: f64) -> Option<String> {
    let times = reads_over_floor.round();
    (times >= 2.0).then(|| {
        format!(
            "each KV head is read about {times:.0} times from DRAM: one block per KV group \
             (`grid=kv_group`) reads it once for its {GROUP} query heads"
        )
    })
}

/// The engine's view of a batch: an output row is one sequence's token.
fn problem_of(batch: &Batch) -> Problem {
    let seqs = batch.num_seqs();
    let longest = (0..seqs).map(|s| batch.len_of(s)).max().unwrap_or(0);
    let mut detail = format!(
        "{seqs} sequences, {} keys, up to {longest} a sequence",
        batch.total_keys()
    );
    if batch.alibi {
        detail.push_str(", ALiBi");
    }
    Problem {
        label: format!("{seqs}s/{}k", batch.total_keys()),
        detail,
        row_hint: "rows are sequences, one new token each".into(),
        output: OutputShape {
            rows: seqs,
            heads: HQ,
            dim: DH,
        },
        head_group: GROUP,
        sequence_starts: (0..seqs).collect(),
        max_sequence_rows: 1,
        work: Work {
            flops: batch.flops(),
            compulsory_bytes: batch.compulsory_bytes(),
            output_bytes: batch.q_elems() as u64 * 4,
            tensor_roof: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::bugs::{model, Bug};
    use super::*;
    use crate::grade::compare::Comparison;
    use crate::grade::integrity::Integrity;
    use crate::lab::args::ArgValue;
    use crate::lab::definition::LabCase;
    use crate::lab::experiment::Conditions;
    use crate::lab::paged::testing;
    use crate::lab::typed;

    fn embedded() -> Vec<LabCase> {
        testing::embedded(PAGED_DECODE)
    }

    #[test]
    fn every_case_becomes_the_contracts_argument_list_with_its_scratch() {
        testing::for_each_argument_list(PAGED_DECODE, &embedded(), 7, |case, data, args| {
            let inputs = typed::inputs_of::<PagedDecode>(data);
            let seqs = inputs.batch.num_seqs();
            assert_eq!(
                args[7] == ArgValue::Null,
                !inputs.batch.alibi,
                "{}",
                case.name
            );
            assert_eq!(args[8], ArgValue::Scratch(seqs * 32 * 16 * 66));
            assert_eq!(args[9], ArgValue::Scratch(seqs * 32));
            assert_eq!(data.problem.output.rows, seqs);
        });
    }

    #[test]
    fn the_declared_launch_shapes_the_grid() {
        let problem = PAGED_DECODE.problem(&embedded()[0]).expect("problem");
        let default = PAGED_DECODE.default_geometry();
        assert_eq!(PAGED_DECODE.grid(&default, &problem), (32, 5, 1));
        let starter = PAGED_DECODE
            .declared_geometry(PAGED_DECODE.starter().text)
            .expect("the starter declares a launch");
        assert_eq!(
            (starter.threads, PAGED_DECODE.grid(&starter, &problem)),
            (32, (32, 5, 1))
        );
        let reference = PAGED_DECODE
            .declared_geometry(PAGED_DECODE.reference().text)
            .expect("the reference declares a launch");
        assert_eq!(PAGED_DECODE.grid(&reference, &problem), (8, 5, 16));
        // The other labs' keys are refused by name, with their line.
        let refused = PAGED_DECODE
            .declared_geometry("\n// @flashprof rows_per_block=64")
            .expect_err("not a decode key");
        assert_eq!(refused.line, 2);
        assert!(refused
            .message
            .contains("not a key of the paged-decode lab"));
    }

    #[test]
    fn sampled_rows_of_the_oracle_are_whole_sequences() {
        let data = PAGED_DECODE.generate(&embedded()[0], 3).expect("generates");
        let whole = PAGED_DECODE.oracle(&data, None);
        let sampled = PAGED_DECODE.oracle(&data, Some(&[4, 1]));
        let row = HQ * DH;
        assert_eq!(sampled[..row], whole[4 * row..5 * row]);
        assert_eq!(sampled[row..], whole[row..2 * row]);
    }

    #[test]
    fn the_timing_case_is_the_contracts_batch_and_takes_no_keys() {
        let case = PAGED_DECODE.timing_case(&[]).expect("timing case");
        let problem = PAGED_DECODE.problem(&case).expect("problem");
        assert_eq!(problem.output.rows, 64);
        assert_eq!(problem.work.compulsory_bytes, 932_249_600);
        let refused = PAGED_DECODE
            .timing_case(&[("splits".into(), "4".into())])
            .expect_err("no keys");
        assert!(refused.contains("`splits`"), "{refused}");
    }

    #[test]
    fn reading_the_cache_four_times_is_each_kv_head_read_by_each_query_head() {
        let cause = PAGED_DECODE.reread_cause(3.8).expect("a cause");
        assert!(
            cause.starts_with("each KV head is read about 4 times"),
            "{cause}"
        );
        assert!(cause.contains("one block per KV group"), "{cause}");
        assert_eq!(PAGED_DECODE.reread_cause(1.2), None);
        assert!(PAGED_DECODE.graded_on_bytes());
    }

    #[test]
    fn the_oracle_is_proven_on_its_golden_case() {
        PAGED_DECODE.prove_oracle().expect("the golden proof holds");
    }

    /// What a kernel with `bug` leaves in `out` (NaN as the grader's poison).
    /// What a kernel with `bug` writes. With the workspace starting at 0
    /// instead of NaN, a combine that reads every slot reads unused slots
    /// whose sums are 0, which weigh nothing: it writes the right answer.
    fn kernel_output(data: &CaseData, bug: Bug, conditions: &Conditions) -> Vec<f32> {
        let inputs = typed::inputs_of::<PagedDecode>(data);
        let modelled = match (bug, conditions.finite_scratch) {
            (Bug::CombineAllSlots, true) => oracle::attention(inputs, None),
            _ => model(inputs, bug),
        };
        modelled.iter().map(|&x| x as f32).collect()
    }

    fn diagnosed(data: &CaseData, out: &[f32]) -> (Comparison, Diagnosis) {
        testing::diagnosed(PAGED_DECODE, data, out, &Integrity::default())
    }

    /// The launch `bug`'s planted kernel declares (the combine bugs split).
    fn planted_launch(bug: Bug) -> LaunchGeometry {
        let path = format!(
            "{}/kernels/paged-decode/bugs/{}.cu",
            env!("CARGO_MANIFEST_DIR"),
            bug.name()
        );
        let text = std::fs::read_to_string(&path).expect(&path);
        PAGED_DECODE
            .declared_geometry(&text)
            .expect("a planted kernel's launch")
    }

    /// Every planted bug, run on every case through the engine's view:
    /// exactly its cases fail, each naming the bug, and the check's line
    /// names its defect.
    #[test]
    fn each_planted_bug_fails_its_cases_and_the_verdict_names_it() {
        let cases = embedded();
        let data: Vec<CaseData> = cases
            .iter()
            .map(|c| PAGED_DECODE.generate(c, 3).expect("generates"))
            .collect();
        for bug in Bug::ALL {
            let launch = planted_launch(bug);
            let ran: Vec<(String, Comparison, Diagnosis)> = cases
                .iter()
                .zip(&data)
                .map(|(case, d)| {
                    let (comparison, said) =
                        testing::diagnosed_model(PAGED_DECODE, &launch, d, |d, c| {
                            kernel_output(d, bug, c)
                        });
                    (case.name.clone(), comparison, said)
                })
                .collect();
            for ((case, d), (_, comparison, said)) in cases.iter().zip(&data).zip(&ran) {
                let batch = &typed::inputs_of::<PagedDecode>(d).batch;
                assert_eq!(
                    !comparison.passed,
                    bug.must_fail(batch),
                    "{bug:?} on {}",
                    case.name
                );
                if !comparison.passed {
                    assert_eq!(
                        said.cause,
                        Some(bug.name()),
                        "{bug:?} on {}: {said:?}",
                        case.name
                    );
                }
            }
            let line = testing::verdict_of(PAGED_DECODE, &ran);
            assert!(line.starts_with(bug.defect()), "{bug:?}: {line}");
        }
    }

    #[test]
    fn a_correct_output_reads_correct() {
        let data = PAGED_DECODE.generate(&embedded()[1], 2).expect("generates");
        let exact: Vec<f32> = PAGED_DECODE
            .oracle(&data, None)
            .iter()
            .map(|&x| x as f32)
            .collect();
        let (comparison, said) = diagnosed(&data, &exact);
        assert!(comparison.passed);
        assert!(said.line.starts_with("correct"), "{said:?}");
    }
}
