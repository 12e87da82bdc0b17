//! The third lab, `paged-prefill-fp8` ("paged-prefill-fp8-v1"): paged
//! prefix prefill as vLLM serves it, with bf16 queries and an FP8 KV cache
//! (E4M3 or E5M2 bytes, dequantised with a per-tensor `kScale` and
//! `vScale`): an instance of the paged family ([`crate::lab::paged`]) with
//! an FP8 cache. The contract, its argument table and the inputs are in
//! [`contract`]; the cases' FP8 layout, the float64 oracle over the
//! dequantised cache, the golden case, the bug models and the diagnosis in
//! the files beside it.

pub mod bugs;
pub mod cases;
pub mod contract;
pub mod diagnosis;
pub mod golden;
pub mod oracle;
pub mod tensors;

pub use crate::lab::paged::{bf16, fp8};

use rand_chacha::ChaCha8Rng;

use crate::lab::paged::redraw::{prefill_redraw, Large, ABOUT_FOUR};
use crate::lab::redraw::PlantValue;
use crate::lab::redraw::Redraw;
use std::path::Path;

use self::cases::CaseSpec;
pub use self::contract::*;
use crate::grade::compare::Tolerance;
use crate::lab::definition::{
    shipped, CaseData, CaseError, CaseSummary, Diagnosis, Graded, LabInfo, LabRef, Problem,
    RooflineWords,
};
use crate::lab::geometry::LaunchGeometry;
use crate::lab::paged::high_blocks;
use crate::lab::paged::layout::PREFILL_GEOMETRY;
use crate::lab::paged::problem::{fixed_timing_shape, listed_rows, prefill_grid};
use crate::lab::paged::tiled::TILED_ORACLE;
use crate::lab::typed::{Arg, Made, TypedLab};

/// The `paged-prefill-fp8` lab.
pub struct PagedPrefillFp8;

/// The third lab, as the engine takes it.
pub const PAGED_PREFILL_FP8: LabRef = LabRef(&PagedPrefillFp8);

impl TypedLab for PagedPrefillFp8 {
    type Case = CaseSpec;
    type Inputs = LaunchInputs;
    const ARGS: &'static [Arg<LaunchInputs>] = ARGS;
    const INFO: LabInfo = LabInfo {
        name: NAME,
        contract: CONTRACT,
        description: "vLLM's paged prefix prefill as served: bf16 queries, an FP8 (E4M3/E5M2) x-packed KV cache with kScale/vScale, head dim 128",
        default_file: "paged_prefill_fp8.cu",
        entry_point: ENTRY_POINT,
        signature: ENTRY_SIGNATURE,
        body_constants: &LAYOUT.body_constants(),
        default_geometry: PREFILL_GEOMETRY,
        roofline: RooflineWords {
            // What the compulsory bytes are, less the output: most of it FP8 bytes.
            compulsory_reads: Some("the FP8 cache blocks and the bf16 q, kNew and vNew"),
            ..RooflineWords::PLAIN
        },
        // The absolute part grows with the values a row sees ([`Self::tolerance_scales`]).
        tolerance: Tolerance {
            abs: ABS_TOL,
            rel: REL_TOL,
        },
        cases: cases::EMBEDDED_CASES,
        // The bf16 tensors' range; FP8 bytes are drawn by their own rule
        // (kernels/probes.cu, `fresh_fp8`), which needs no range.
        timing_draw: -1.0..1.0,
        kernels: shipped!("paged-prefill-fp8", "paged_fp8_oracle_f64", TILED_ORACLE, after "kernels/paged-family/tiled-oracle.cuh"),
    };

    fn parse_cases(text: &str, file: &str, base: &Path) -> Result<Vec<CaseSpec>, CaseError> {
        INSTANCE.parse_cases(text, file, base)
    }

    fn generate(case: &CaseSpec, seed: u64) -> Result<Made<LaunchInputs>, CaseError> {
        let made = cases::generate(case, seed).map_err(|e| e.for_case(&case.name))?;
        made.inputs.tensors.batch.check_int_arguments(&case.name)?;
        Ok(Made {
            inputs: LaunchInputs::new(made.inputs),
            expected: made.expected,
            planted_heads: case.planted_heads(),
        })
    }

    fn problem_of(inputs: &LaunchInputs) -> Problem {
        INSTANCE.problem(&inputs.inputs.tensors.batch)
    }

    fn problem(case: &CaseSpec) -> Result<Problem, CaseError> {
        match case.tensors {
            // A generated case's size follows from its lengths, without its cache.
            None => Ok(INSTANCE.problem(&INSTANCE.lengths_batch(case))),
            Some(_) => Self::generate(case, 0).map(|made| Self::problem_of(&made.inputs)),
        }
    }

    fn grid(geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        prefill_grid(geometry, problem)
    }

    fn oracle(launch: &LaunchInputs, rows: Option<&[usize]>) -> Vec<f64> {
        listed_rows(
            oracle::attention_of_rows(&launch.inputs, rows),
            rows,
            HQ * DH,
        )
    }

    fn tolerance_scales(launch: &LaunchInputs) -> Option<Vec<f64>> {
        Some(oracle::value_scales(&launch.inputs))
    }

    fn diagnose(launch: &LaunchInputs, _: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        diagnosis::case_diagnosis(&launch.inputs, graded)
    }

    fn fault_note(launch: &LaunchInputs) -> Option<String> {
        high_blocks::fault_note(&launch.inputs.tensors.batch)
    }

    /// Scores are `q . k * scale * kScale` plus the ALiBi bias: shrinking
    /// `q` (exactly, by a power of two, so it stays bf16) and the slopes
    /// shrinks every score by the same factor.
    fn scores_shrunk(launch: &LaunchInputs, factor: f32) -> Option<LaunchInputs> {
        let mut inputs = launch.inputs.clone();
        let slopes = inputs.tensors.alibi_slopes.as_mut();
        crate::lab::experiment::shrink_scores(&mut inputs.tensors.q, slopes, factor, bf16::round);
        Some(LaunchInputs::new(inputs))
    }

    fn sentinels_tagged(launch: &LaunchInputs) -> Option<LaunchInputs> {
        Some(LaunchInputs::new(launch.inputs.sentinels_tagged()))
    }

    fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
        crate::lab::verdict::with_planted(
            cases,
            &bugs::Bug::ALL.map(|bug| (bug.name(), bug.defect())),
        )
    }

    fn redraw(launch: &LaunchInputs, rng: &mut ChaCha8Rng) -> Redraw {
        let inputs = &launch.inputs;
        // The cache holds codes: 4.0 after its scale, as the cases plant it.
        let large = Large {
            activation: ABOUT_FOUR,
            key: PlantValue::Constant(u32::from(inputs.format.encode(4.0 / inputs.k_scale))),
        };
        prefill_redraw(&inputs.tensors.batch, large, rng)
    }
    fn timing_case(overrides: &[(String, String)]) -> Result<CaseSpec, String> {
        fixed_timing_shape(NAME, overrides)?;
        Ok(cases::timing_spec(|batch| INSTANCE.problem(batch).detail))
    }

    fn check_case(case: &CaseSpec) -> Result<(), CaseError> {
        // The timing batch is larger than any case may be: it passes as
        // exactly the one this lab builds, or not at all.
        match *case == cases::timing_spec(|batch| INSTANCE.problem(batch).detail) {
            true => Ok(()),
            false => INSTANCE.check(case),
        }
    }

    fn prove_oracle() -> Result<String, String> {
        crate::lab::golden::said(golden::prove_oracle())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::bugs::Bug;
    use super::*;
    use crate::grade::compare::{compare_scaled, Comparison};
    use crate::grade::integrity::Integrity;
    use crate::grade::roofline::tests::h200;
    use crate::grade::roofline::TensorRoof;
    use crate::grade::roofline::{analyze, Measured, Roofline, Unit, UnitLoad};
    use crate::lab::args::ArgValue;
    use crate::lab::definition::{CaseState, LabCase};
    use crate::lab::paged::misread::Misreading;
    use crate::lab::paged::testing;
    use crate::lab::typed;

    fn embedded() -> Vec<LabCase> {
        testing::embedded(PAGED_PREFILL_FP8)
    }

    fn case(name: &str) -> CaseData {
        testing::embedded_case(PAGED_PREFILL_FP8, name, 5)
    }

    /// A class's journal keys its rows by each case's recipe text: an FP8
    /// case spells its scales and `wide` even when its table left them to
    /// their defaults (as every journal row before the paged family did),
    /// and an fp32 paged case names no FP8 key.
    #[test]
    fn recipes_spell_their_cache_keys_as_journals_key_them() {
        let plain = embedded()
            .into_iter()
            .map(|case| case.recipe.to_json())
            .find(|json| json.contains("\"k_scale\":0.5") && json.contains("\"wide\":false"))
            .expect("a case at the default scales");
        assert!(plain.contains("\"v_scale\":2.0"), "{plain}");
        let fp32 = testing::embedded(crate::lab::paged_prefill::PAGED_PREFILL);
        let json = fp32[0].recipe.to_json();
        assert!(!json.contains("wide") && !json.contains("scale"), "{json}");
    }

    #[test]
    fn every_case_becomes_the_contracts_argument_list() {
        testing::for_each_argument_list(PAGED_PREFILL_FP8, &embedded(), 7, |case, data, args| {
            let launch = typed::inputs_of::<PagedPrefillFp8>(data);
            let inputs = &launch.inputs;
            // The kernel gets the very values the oracle reads, as bf16 bits.
            let ArgValue::Bf16(q) = args[0] else {
                panic!("q is bf16")
            };
            assert!(q
                .iter()
                .zip(&inputs.tensors.q)
                .all(|(&bits, &x)| f32::from_bits(u32::from(bits) << 16) == x));
            assert_eq!(
                args[11] == ArgValue::Null,
                !inputs.tensors.batch.alibi,
                "{}",
                case.name
            );
            assert_eq!(args[12], ArgValue::F32Scalar(inputs.k_scale));
            assert_eq!(args[13], ArgValue::F32Scalar(inputs.v_scale));
            assert_eq!(args[14], ArgValue::Scalar(inputs.format.code()));
        });
    }

    #[test]
    fn the_timing_case_is_the_contracts_batch_and_takes_no_keys() {
        let case = PAGED_PREFILL_FP8.timing_case(&[]).expect("timing case");
        let problem = PAGED_PREFILL_FP8.problem(&case).expect("problem");
        assert_eq!(problem.output.rows, 3930);
        assert_eq!(problem.output.dim, 128);
        // The spec's figures: about 140 GFLOP and 150 MB of compulsory bytes.
        assert!(
            (problem.work.flops / 1e9 - 139.8).abs() < 0.5,
            "{:?}",
            problem.work
        );
        let mb = problem.work.compulsory_bytes as f64 / 1e6;
        assert!((140.0..160.0).contains(&mb), "{mb} MB");
        let refused = PAGED_PREFILL_FP8
            .timing_case(&[("chunk".into(), "64".into())])
            .expect_err("no keys");
        assert!(refused.contains("`chunk`"), "{refused}");
    }

    #[test]
    fn the_oracle_is_proven_on_its_golden_case() {
        PAGED_PREFILL_FP8
            .prove_oracle()
            .expect("the golden proof holds");
    }

    #[test]
    fn the_tolerance_follows_the_values_a_row_sees() {
        let data = case("mixed-lengths-e4m3");
        let reference = PAGED_PREFILL_FP8.oracle(&data, None);
        let scales = PAGED_PREFILL_FP8.tolerance_scales(&data).expect("scales");
        assert_eq!(scales.len(), data.problem.output.rows * HQ);
        let widest = (0..scales.len())
            .max_by(|&a, &b| scales[a].total_cmp(&scales[b]))
            .expect("rows");
        assert!(scales[widest] > 100.0, "the wide case has wide values");
        // That (row, head) off by 0.9 of its scaled absolute allowance.
        let mut out: Vec<f64> = reference.clone();
        for x in &mut out[widest * DH..(widest + 1) * DH] {
            *x += 0.9 * ABS_TOL * scales[widest];
        }
        let out: Vec<f32> = out.iter().map(|&x| x as f32).collect();
        let judged = |scales: Option<&[f64]>| {
            compare_scaled(
                data.problem.output,
                PAGED_PREFILL_FP8.tolerance(),
                scales,
                &out,
                &reference,
            )
            .passed
        };
        assert!(judged(Some(&scales)));
        assert!(!judged(None));
    }

    /// What a kernel with `bug` writes, as the grader reads a bf16 output.
    fn kernel_output(data: &CaseData, bug: Bug) -> Vec<f32> {
        as_stored(&bugs::model(
            &typed::inputs_of::<PagedPrefillFp8>(data).inputs,
            bug,
        ))
    }

    /// Output values as a kernel stores them and the grader reads them: bf16.
    fn as_stored(values: &[f64]) -> Vec<f32> {
        values.iter().map(|&x| bf16::round(x as f32)).collect()
    }

    fn diagnosed(data: &CaseData, out: &[f32]) -> (Comparison, Diagnosis) {
        testing::diagnosed(PAGED_PREFILL_FP8, data, out, &Integrity::default())
    }

    /// The diagnosis of a CPU model run as the worker runs a kernel, reruns included.
    fn diagnosed_bug(data: &CaseData, bug: Bug) -> (Comparison, Diagnosis) {
        testing::diagnosed_model(
            PAGED_PREFILL_FP8,
            &PAGED_PREFILL_FP8.default_geometry(),
            data,
            |d, _| kernel_output(d, bug),
        )
    }

    fn diagnosed_misread(data: &CaseData, misreading: Misreading) -> (Comparison, Diagnosis) {
        testing::diagnosed_model(
            PAGED_PREFILL_FP8,
            &PAGED_PREFILL_FP8.default_geometry(),
            data,
            |d, _| misread_output(d, misreading),
        )
    }

    /// A case's name, its comparison with the oracle and its diagnosis.
    type Diagnosed = (String, Comparison, Diagnosis);

    /// Each planted bug's CPU model run on every shipped case (seed 5), compared
    /// and diagnosed as the grader does: made once for the tests that read it,
    /// every (bug, case) on its own core, since it is the lab's longest test.
    fn every_bug_diagnosed() -> &'static [(Bug, Vec<Diagnosed>)] {
        use rayon::prelude::*;
        static MADE: OnceLock<Vec<(Bug, Vec<Diagnosed>)>> = OnceLock::new();
        MADE.get_or_init(|| {
            let all: Vec<(String, CaseData)> = embedded()
                .into_par_iter()
                .map(|c| {
                    let data = PAGED_PREFILL_FP8.generate(&c, 5).expect("generates");
                    (c.name, data)
                })
                .collect();
            Bug::ALL
                .into_par_iter()
                .map(|bug| {
                    let ran = all
                        .par_iter()
                        .map(|(name, data)| {
                            let (comparison, said) = diagnosed_bug(data, bug);
                            (name.clone(), comparison, said)
                        })
                        .collect();
                    (bug, ran)
                })
                .collect()
        })
    }

    #[test]
    fn each_planted_bug_is_named_by_its_diagnosis() {
        // Where two bugs' models write the same output on a case (both read
        // only NaN bytes, say), either name is right; each bug is named on
        // most of the cases it fails.
        for (bug, ran) in every_bug_diagnosed() {
            let mut named = Vec::new();
            let mut failed = 0;
            for (name, comparison, said) in ran {
                if comparison.passed {
                    continue;
                }
                failed += 1;
                if said.cause == Some(bug.name()) || said.line.contains(bug.defect()) {
                    named.push(name.as_str());
                } else {
                    eprintln!("{bug:?} on {name}: {said:?}");
                }
            }
            assert!(
                named.len() * 2 > failed,
                "{bug:?}: named on {named:?} of {failed}"
            );
        }
        let data = case("mixed-lengths-e4m3");
        let (_, said) = diagnosed_bug(&data, Bug::KScaleIgnored);
        assert!(
            said.line.starts_with(
                "cached keys are read without kScale (0.5): their scores are 2.000x too large"
            ),
            "{said:?}"
        );
        let (_, said) = diagnosed_bug(&data, Bug::VScaleIgnored);
        assert!(
            said.line.starts_with(
                "cached values are read without vScale (2): each cached value is 2.000x too small"
            ),
            "{said:?}"
        );
        let (_, said) = diagnosed_bug(&data, Bug::FormatIgnored);
        assert!(
            said.line.starts_with("E4M3 bytes decoded as E5M2"),
            "{said:?}"
        );
    }

    #[test]
    fn the_verdict_names_each_planted_bug() {
        // The check's one line when every shipped case runs the bug's CPU model.
        for (bug, ran) in every_bug_diagnosed() {
            let line = testing::verdict_of(PAGED_PREFILL_FP8, ran);
            assert!(line.starts_with(bug.defect()), "{bug:?}: {line}");
        }
    }

    #[test]
    fn rows_left_unwritten_are_told_as_unwritten() {
        let data = case("mixed-lengths-e4m3");
        let out = as_stored(&PAGED_PREFILL_FP8.oracle(&data, None));
        testing::assert_unwritten_rows_told(PAGED_PREFILL_FP8, &data, out);
    }

    /// What a kernel that misreads the batch so writes, as the grader reads a bf16 output.
    fn misread_output(data: &CaseData, misreading: Misreading) -> Vec<f32> {
        let inputs = &typed::inputs_of::<PagedPrefillFp8>(data).inputs;
        as_stored(&oracle::evaluate(
            inputs,
            oracle::Model::Misread(misreading),
        ))
    }

    #[test]
    fn a_wrong_gqa_map_is_named_with_the_kv_head_each_query_head_reads() {
        let cases = ["gqa-heads", "mixed-lengths-e5m2"];
        testing::assert_wrong_kv_maps_named(PAGED_PREFILL_FP8, cases, diagnosed_misread);
    }

    #[test]
    fn a_context_length_off_is_named_with_its_shift() {
        let data = case("last-cached-key");
        // Longer contexts read the cache's NaN bytes past the context and
        // write NaN everywhere, as the planted one-key-too-many does: the
        // rerun with those bytes tagged tells the shifts apart.
        for shift in [-1, -2, 2] {
            let diagnosed = diagnosed_misread(&data, Misreading::ContextShift(shift));
            testing::assert_context_shift_named(shift, &diagnosed);
        }
        let (_, said) = diagnosed_misread(&data, Misreading::ContextShift(1));
        assert!(said.line.contains(Bug::OneKeyTooMany.defect()), "{said:?}");
    }

    #[test]
    fn the_query_heads_of_one_kv_head_failing_alike_point_at_its_data() {
        let data = case("mixed-lengths-e4m3");
        let mut inputs = typed::inputs_of::<PagedPrefillFp8>(&data).inputs.clone();
        let total_new = inputs.tensors.batch.total_new();
        testing::corrupt_kv_head_2(&mut inputs.tensors.v_new, total_new, &LAYOUT, 400.0);
        let wrong = as_stored(&oracle::attention(&inputs));
        let right = as_stored(&PAGED_PREFILL_FP8.oracle(&data, None));
        testing::assert_kv_head_failures_told(
            PAGED_PREFILL_FP8,
            &data,
            &LAYOUT,
            &wrong,
            right,
            100.0,
        );
    }

    /// The verdict on a launch of the timing batch taking `ms`, reading
    /// `reads` times the compulsory reads, with the units at these loads.
    fn timing_roofline(ms: f64, reads: f64, loads: &[(Unit, f64)]) -> Roofline {
        let timing = PAGED_PREFILL_FP8.timing_case(&[]).expect("timing case");
        let work = PAGED_PREFILL_FP8.problem(&timing).expect("problem").work;
        let read_floor = (work.compulsory_bytes - work.output_bytes) as f64;
        let measured = Measured {
            dram_bytes_read: reads * read_floor,
            dram_bytes_write: work.output_bytes as f64,
            duration_ns: ms * 1e6,
            sm_throughput_pct: None,
            achieved_occupancy_pct: Some(40.0),
            units: loads
                .iter()
                .map(|&(unit, pct)| UnitLoad::new(unit, pct))
                .collect(),
            full_breakdown: true,
            levels: Vec::new(),
        };
        let mut roofline = analyze(work, &measured, &h200()).expect("a valid reading");
        PAGED_PREFILL_FP8.read_roofline(&mut roofline);
        roofline
    }

    #[test]
    fn a_tensor_core_kernel_is_read_against_the_bf16_roof_and_its_fp8_reads() {
        // The reference's shape: 1 ms for the batch's 139.8 GFLOP, tensor
        // pipe 40% busy, shared memory the busiest unit, FP8 read once.
        let roofline = timing_roofline(
            1.0,
            1.05,
            &[
                (Unit::TensorPipe, 40.0),
                (Unit::SharedMemory, 52.0),
                (Unit::Dram, 4.0),
            ],
        );
        let tensor = roofline.tensor.expect("read against a tensor roof");
        assert_eq!(tensor.roof, TensorRoof::Bf16);
        assert!((tensor.peak_pct - 13.06).abs() < 0.01, "{tensor:?}");
        let reason = &roofline.verdict.reason;
        assert!(
            reason.starts_with(
                "BF16 tensor cores in use: tensor pipe 40% busy, 139.8 TFLOP/s useful = 13.1% of \
                 the BF16 tensor roof (1071 TFLOP/s); DRAM reads "
            ),
            "{reason}"
        );
        assert!(
            reason.contains("= 1.05x the FP8 cache blocks and the bf16 q, kNew and vNew read once"),
            "{reason}"
        );
        assert!(
            reason.contains("busiest: shared memory 52%, tensor pipe 40%"),
            "{reason}"
        );
        assert_eq!(
            roofline.tensor_share(),
            Some(("bf16".to_owned(), tensor.peak_pct))
        );
    }

    #[test]
    fn a_scalar_kernel_is_told_its_tensor_cores_sit_idle() {
        // The starter's shape: 10 ms, the FP32 pipe at 70%, no tensor work,
        // the cache read three times over.
        let roofline = timing_roofline(
            10.0,
            3.0,
            &[
                (Unit::FmaPipe, 70.0),
                (Unit::TensorPipe, 0.0),
                (Unit::Dram, 2.0),
            ],
        );
        let verdict = &roofline.verdict;
        assert_eq!(verdict.busiest.map(|u| u.unit), Some(Unit::FmaPipe));
        assert!(
            verdict
                .reason
                .starts_with("BF16 tensor cores unused: the tensor pipe is 0% busy"),
            "{verdict:?}"
        );
        assert!(
            verdict.reason.contains("= 3.00x the FP8 cache blocks"),
            "{verdict:?}"
        );
        assert!(
            verdict
                .reason
                .ends_with("FP32 FMA pipe at 70% of its peak; next DRAM 2%"),
            "{verdict:?}"
        );
        assert!(
            verdict.next_step.contains("mma.sync with bf16 operands"),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_correct_output_passes_and_the_verdict_says_so() {
        let data = case("alibi-and-window");
        let out = as_stored(&PAGED_PREFILL_FP8.oracle(&data, None));
        let (comparison, said) = diagnosed(&data, &out);
        assert!(
            comparison.passed && said.line.starts_with("correct"),
            "{said:?}"
        );
        let summaries = [crate::lab::definition::CaseSummary {
            name: "alibi-and-window",
            state: CaseState::Pass,
            comparison: Some(&comparison),
            integrity: None,
            diagnosis: &said.line,
            cause: None,
        }];
        let line = PAGED_PREFILL_FP8.verdict(&summaries).expect("a case ran");
        assert!(line.starts_with("all 1 case"), "{line}");
    }
}
