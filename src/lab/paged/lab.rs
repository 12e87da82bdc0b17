//! The `paged-prefill` lab as the engine takes it: the contract's argument
//! list, the hazard cases, the oracle and the diagnosis of this folder,
//! turned into a [`Lab`] value.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cases::{self, CaseSpec, PagedCaseError, EMBEDDED_CASES};
use super::{diagnosis, golden, oracle, Batch, Inputs};
use super::{BLOCK, CONTRACT, DH, ENTRY_POINT, ENTRY_SIGNATURE, GROUP, HKV, HQ, X};
use crate::grade::compare::{OutputShape, Tolerance};
use crate::grade::integrity::integrity_problem;
use crate::grade::roofline::Work;
use crate::lab::definition::{
    int_constants, shipped_kernel, Abi, ArgKind, ArgSpec, ArgValue, CaseData, CaseError,
    CaseSummary, Diagnosis, Graded, KernelFile, Lab, LabCase, LabRef, Problem, SupportKernels,
};
use crate::lab::experiment::{
    explain_copied_from_out, explain_expected_file, explain_non_finite, explain_repeats,
    non_finite_kind,
};
use crate::lab::geometry::{GridY, LaunchGeometry};
use crate::lab::verdict::cause;

const fn arg(name: &'static str, kind: ArgKind) -> ArgSpec {
    ArgSpec { name, kind }
}

const ABI: Abi = Abi {
    entry_point: ENTRY_POINT,
    signature: ENTRY_SIGNATURE,
    args: &[
        arg("q", ArgKind::F32Input),
        arg("kNew", ArgKind::F32Input),
        arg("vNew", ArgKind::F32Input),
        arg("kCache", ArgKind::F32Input),
        arg("vCache", ArgKind::F32Input),
        arg("blockTable", ArgKind::I32Input),
        arg("qStart", ArgKind::I32Input),
        arg("seqLen", ArgKind::I32Input),
        arg("numSeqs", ArgKind::I32Scalar),
        arg("maxBlocksPerSeq", ArgKind::I32Scalar),
        arg("slidingWindow", ArgKind::I32Scalar),
        arg("alibiSlopes", ArgKind::OptionalF32Input),
        arg("out", ArgKind::F32Output),
    ],
};

/// A case of this lab: a recipe of the cases file, or the contract's timing
/// batch (which no cases file spells out: its block table comes from the seed).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum Recipe {
    Timing { timing_shape: String },
    Case(CaseSpec),
}

const TIMING_SHAPE: &str = "paged-prefill-v1";

/// The `paged-prefill` lab.
pub struct PagedPrefill;

/// The second lab, as the engine takes it.
pub const PAGED_PREFILL: LabRef = LabRef(&PagedPrefill);

fn case_error(case: &LabCase) -> impl Fn(PagedCaseError) -> CaseError + '_ {
    move |error| match error {
        PagedCaseError::Parse { file, message } => CaseError::Parse { file, message },
        PagedCaseError::Invalid { case, message } => CaseError::Invalid { case, message },
        PagedCaseError::Tensor { file, message } => CaseError::Invalid {
            case: case.name.clone(),
            message: format!("{file}: {message}"),
        },
    }
}

impl PagedPrefill {
    fn recipe(case: &LabCase) -> Result<Recipe, CaseError> {
        serde_json::from_value(case.recipe.clone()).map_err(|e| CaseError::Invalid {
            case: case.name.clone(),
            message: e.to_string(),
        })
    }

    fn lab_case(spec: &CaseSpec) -> LabCase {
        LabCase {
            name: spec.name.clone(),
            summary: spec.summary.clone(),
            recipe: serde_json::to_value(Recipe::Case(spec.clone()))
                .expect("a case spec is plain data"),
        }
    }

    fn problem_of(batch: &Batch) -> Problem {
        let rows = batch.total_new();
        let seqs = batch.num_seqs();
        let longest = batch.context.iter().max().copied().unwrap_or(0);
        let mut detail = format!("{seqs} sequences, {rows} new tokens, contexts up to {longest}");
        if let Some(window) = batch.window() {
            detail.push_str(&format!(", window {window}"));
        }
        if batch.alibi {
            detail.push_str(", ALiBi");
        }
        Problem {
            label: format!("{seqs}s/{rows}t"),
            detail,
            row_hint: "rows are new tokens, sequence after sequence".into(),
            output: OutputShape {
                rows,
                heads: HQ,
                dim: DH,
            },
            head_group: GROUP,
            sequence_starts: (0..seqs).map(|s| batch.start(s)).collect(),
            max_sequence_rows: batch.new.iter().max().copied().unwrap_or(0),
            work: Work {
                flops: batch.flops(),
                compulsory_bytes: batch.compulsory_bytes(),
                output_bytes: batch.q_elems() as u64 * 4,
            },
        }
    }

    fn case_data(
        inputs: Inputs,
        expected: Option<Vec<f64>>,
        planted_heads: u32,
        name: &str,
    ) -> Result<CaseData, CaseError> {
        let int = |n: usize| {
            i32::try_from(n).map_err(|_| CaseError::Invalid {
                case: name.to_owned(),
                message: format!("{n} does not fit the kernel's int argument"),
            })
        };
        let batch = inputs.batch;
        let problem = Self::problem_of(&batch);
        Ok(CaseData {
            problem,
            args: vec![
                ArgValue::F32(inputs.q),
                ArgValue::F32(inputs.k_new),
                ArgValue::F32(inputs.v_new),
                ArgValue::F32(inputs.k_cache),
                ArgValue::F32(inputs.v_cache),
                ArgValue::I32(batch.block_table),
                ArgValue::I32(batch.q_start),
                ArgValue::I32(batch.seq_len),
                ArgValue::Scalar(int(batch.context.len())?),
                ArgValue::Scalar(int(batch.max_blocks_per_seq)?),
                ArgValue::Scalar(batch.sliding_window),
                inputs.alibi_slopes.map_or(ArgValue::Null, ArgValue::F32),
                ArgValue::Output,
            ],
            expected,
            planted_heads,
        })
    }

    /// Rows (new tokens, with their sequences) and heads of a footprint.
    fn place(batch: &Batch, at: &crate::grade::compare::Footprint) -> String {
        let Some(span) = at.rows else {
            return "no element".into();
        };
        let (first_seq, first_pos) = batch.sequence_of_row(span.first);
        let (last_seq, last_pos) = batch.sequence_of_row(span.last);
        let rows = if span.first == span.last {
            format!(
                "new token {} (sequence {first_seq}, position {first_pos})",
                span.first
            )
        } else if first_seq == last_seq {
            format!(
                "new tokens {} to {} (sequence {first_seq}, positions {first_pos} to {last_pos})",
                span.first, span.last
            )
        } else {
            format!(
                "new tokens {} to {} (sequences {first_seq} to {last_seq})",
                span.first, span.last
            )
        };
        format!("{rows}, {}", crate::lab::experiment::heads(at.heads, HQ))
    }

    /// The oracle's and the diagnosis' view of a case's arguments.
    fn inputs(data: &CaseData) -> Inputs {
        let floats = |index: usize| match data.args.get(index) {
            Some(ArgValue::F32(values)) => values.clone(),
            _ => Vec::new(),
        };
        let ints = |index: usize| match data.args.get(index) {
            Some(ArgValue::I32(values)) => values.clone(),
            _ => Vec::new(),
        };
        let scalar = |index: usize| match data.args.get(index) {
            Some(ArgValue::Scalar(n)) => *n,
            _ => 0,
        };
        let q_start = ints(6);
        let seq_len = ints(7);
        let new: Vec<usize> = q_start.windows(2).map(|w| (w[1] - w[0]) as usize).collect();
        let context = seq_len
            .iter()
            .zip(&new)
            .map(|(&len, &n)| len as usize - n)
            .collect();
        let k_cache = floats(3);
        let alibi_slopes = match data.args.get(11) {
            Some(ArgValue::F32(values)) => Some(values.clone()),
            _ => None,
        };
        Inputs {
            batch: Batch {
                context,
                new,
                sliding_window: scalar(10),
                alibi: alibi_slopes.is_some(),
                max_blocks_per_seq: scalar(9) as usize,
                num_blocks: k_cache.len() / (HKV * DH * BLOCK),
                block_table: ints(5),
                q_start,
                seq_len,
            },
            q: floats(0),
            k_new: floats(1),
            v_new: floats(2),
            k_cache,
            v_cache: floats(4),
            alibi_slopes,
        }
    }
}

impl Lab for PagedPrefill {
    fn name(&self) -> &'static str {
        "paged-prefill"
    }

    fn contract(&self) -> &'static str {
        CONTRACT
    }

    fn description(&self) -> &'static str {
        "vLLM's paged prefix prefill: a batch of sequences, block tables into an x-packed paged K/V cache, sliding window, ALiBi"
    }

    fn default_file(&self) -> &'static str {
        "paged_prefill.cu"
    }

    fn abi(&self) -> &'static Abi {
        &ABI
    }

    fn body_constants(&self) -> Vec<(&'static str, String)> {
        int_constants(&[
            ("HQ", HQ),
            ("HKV", HKV),
            ("DH", DH),
            ("GROUP", GROUP),
            ("BLOCK", BLOCK),
            ("X", X),
        ])
    }

    fn default_geometry(&self) -> LaunchGeometry {
        LaunchGeometry {
            rows_per_block: 64,
            threads: 128,
            dynamic_smem_bytes: 0,
            grid_y: GridY::QueryHead,
        }
    }

    fn grid(&self, geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        let x = problem.sequence_starts.len().max(1) as u32;
        let y = geometry.grid_y.blocks(HQ, HKV);
        let z = problem
            .max_sequence_rows
            .div_ceil(geometry.rows_per_block as usize)
            .max(1) as u32;
        (x, y, z)
    }

    fn oracle_f64_grid(&self, problem: &Problem) -> (u32, u32, u32) {
        // One warp per (new token, query head).
        let threads = problem.output.rows * HQ * 32;
        let blocks = threads.div_ceil(self.support().oracle_threads as usize) as u32;
        (blocks.max(1), 1, 1)
    }

    fn tolerance(&self) -> Tolerance {
        Tolerance {
            abs: super::ABS_TOL,
            rel: super::REL_TOL,
        }
    }

    fn embedded_cases(&self) -> &'static str {
        EMBEDDED_CASES
    }

    fn parse_cases(&self, text: &str, file: &str, base: &Path) -> Result<Vec<LabCase>, CaseError> {
        let specs = cases::parse_cases(text, file, base).map_err(|e| match e {
            PagedCaseError::Parse { file, message } => CaseError::Parse { file, message },
            PagedCaseError::Invalid { case, message } => CaseError::Invalid { case, message },
            PagedCaseError::Tensor {
                file: path,
                message,
            } => CaseError::Parse {
                file: file.to_owned(),
                message: format!("{path}: {message}"),
            },
        })?;
        Ok(specs.iter().map(Self::lab_case).collect())
    }

    fn own_tensors(&self, case: &LabCase) -> Option<PathBuf> {
        match Self::recipe(case).ok()? {
            Recipe::Case(spec) => spec.tensors,
            Recipe::Timing { .. } => None,
        }
    }

    fn problem(&self, case: &LabCase) -> Result<Problem, CaseError> {
        match Self::recipe(case)? {
            // The timing batch's size is known without its 300 MB of cache.
            Recipe::Timing { .. } => Ok(Self::problem_of(&cases::timing_batch(0))),
            Recipe::Case(_) => self.generate(case, 0).map(|data| data.problem),
        }
    }

    fn generate(&self, case: &LabCase, seed: u64) -> Result<CaseData, CaseError> {
        match Self::recipe(case)? {
            Recipe::Timing { timing_shape } if timing_shape == TIMING_SHAPE => {
                Self::case_data(cases::timing_inputs(seed), None, 0, &case.name)
            }
            Recipe::Timing { timing_shape } => Err(CaseError::Invalid {
                case: case.name.clone(),
                message: format!(
                    "unknown timing shape `{timing_shape}` (this lab has `{TIMING_SHAPE}`)"
                ),
            }),
            Recipe::Case(spec) => {
                let made = spec.generate(seed).map_err(case_error(case))?;
                Self::case_data(made.inputs, made.expected, spec.planted_heads(), &case.name)
            }
        }
    }

    fn oracle(&self, data: &CaseData, rows: Option<&[usize]>) -> Vec<f64> {
        let inputs = Self::inputs(data);
        let full = oracle::attention(&inputs, rows);
        match rows {
            None => full,
            Some(rows) => {
                let row_len = HQ * DH;
                rows.iter()
                    .flat_map(|&row| full[row * row_len..(row + 1) * row_len].iter().copied())
                    .collect()
            }
        }
    }

    fn diagnose(&self, data: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        let integrity = graded.integrity;
        let experiments = graded.experiments;
        let inputs = Self::inputs(data);
        let place = |at: &crate::grade::compare::Footprint| Self::place(&inputs.batch, at);
        if integrity.out_of_bounds_writes > 0 {
            // Shifted sequence starts store the last sequence's rows past
            // the end: when the values are that bug's, name the bug.
            let replayed = diagnosis::explain_rows(&inputs, graded.out, graded.reference, None);
            if let Some((line, Some(bug @ super::bugs::Bug::QStartShifted))) = replayed {
                return Diagnosis::new(
                    format!(
                        "{line}; the rows shifted past the last sequence land outside out ({} \
                         floats written there)",
                        integrity.out_of_bounds_writes
                    ),
                    bug.name(),
                );
            }
            let line = integrity_problem(integrity).unwrap_or_default();
            return Diagnosis::new(line, cause::OUT_OF_BOUNDS_WRITE);
        }
        if !integrity.inputs_modified.is_empty() {
            let line = integrity_problem(integrity).unwrap_or_default();
            return Diagnosis::new(line, cause::INPUT_WRITTEN);
        }
        if integrity.runs_differ {
            return match &experiments.repeats {
                Some(trial) => explain_repeats(trial, &place),
                None => Diagnosis::new(
                    integrity_problem(integrity).unwrap_or_default(),
                    cause::RACE,
                ),
            };
        }
        let cmp = graded.comparison;
        if cmp.passed {
            return Diagnosis::plain(format!(
                "correct: all {} elements within tolerance (worst at {:.2} of the allowance)",
                cmp.elements, cmp.worst_ratio
            ));
        }
        if let Some(said) = experiments
            .expected_file
            .as_ref()
            .and_then(|check| explain_expected_file(check, &place))
        {
            return said;
        }
        if let Some(said) = experiments
            .unwritten
            .as_ref()
            .and_then(|trial| explain_copied_from_out(trial, &place))
        {
            return said;
        }
        // A planted bug's model that reproduces the output names the cause
        // with certainty, NaN included (a row it never writes is poison).
        let explained = diagnosis::explain_rows(&inputs, graded.out, graded.reference, None);
        if let Some((line, Some(bug))) = &explained {
            return Diagnosis::new(line.clone(), bug.name());
        }
        if cmp.nan + cmp.inf > 0 {
            if let Some(trial) = &experiments.non_finite {
                return explain_non_finite(non_finite_kind(cmp), trial, &place);
            }
        }
        if let Some((line, None)) = explained {
            return Diagnosis::plain(line);
        }
        Diagnosis::plain(match &cmp.worst {
            Some(e) => {
                let (seq, position) = inputs.batch.sequence_of_row(e.row);
                format!(
                    "{} of {} elements wrong; worst at new token {} (sequence {seq}, \
                     position {position}), head {}: got {:.6e}, expected {:.6e}",
                    cmp.failing, cmp.elements, e.row, e.head, e.got, e.expected
                )
            }
            None => format!("{} of {} elements wrong", cmp.failing, cmp.elements),
        })
    }

    /// Scores are `q . k / 8` plus the ALiBi bias: shrinking `q` and the
    /// slopes shrinks every score by the same factor.
    fn scores_shrunk(&self, data: &CaseData, factor: f32) -> Option<CaseData> {
        let mut shrunk = data.clone();
        for index in [0, 11] {
            if let Some(ArgValue::F32(values)) = shrunk.args.get_mut(index) {
                values.iter_mut().for_each(|x| *x *= factor);
            }
        }
        shrunk.expected = None;
        Some(shrunk)
    }

    fn verdict(&self, cases: &[CaseSummary<'_>]) -> Option<String> {
        super::verdict::verdict(cases)
    }

    fn timing_case(&self, overrides: &[(String, String)]) -> Result<LabCase, String> {
        if let Some((key, _)) = overrides.first() {
            return Err(format!(
                "the {} lab's timing shape is the contract's fixed batch; it has no key `{key}`",
                self.name()
            ));
        }
        let batch = cases::timing_batch(0);
        Ok(LabCase {
            name: "timing".into(),
            summary: format!("the timing shape, {}", Self::problem_of(&batch).detail),
            recipe: serde_json::to_value(Recipe::Timing {
                timing_shape: TIMING_SHAPE.into(),
            })
            .expect("plain data"),
        })
    }

    fn timing_draw_range(&self) -> std::ops::Range<f32> {
        // What the timing batch's tensors and owned cache slots are drawn
        // from; the cache's sentinels (2.5, 40) lie outside it and stay.
        -1.0..1.0
    }

    fn starter(&self) -> KernelFile {
        shipped_kernel!("kernels/paged/starter.cu")
    }

    fn reference(&self) -> KernelFile {
        shipped_kernel!("kernels/paged/reference.cu")
    }

    fn support(&self) -> SupportKernels {
        SupportKernels {
            file: shipped_kernel!("kernels/paged/support.cu"),
            oracle_f64: "paged_oracle_f64",
            oracle_threads: 256,
        }
    }

    fn prove_oracle(&self) -> Result<String, String> {
        golden::prove_oracle()
            .map(|proof| format!("{proof:?}"))
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::super::bugs::{model, Bug};
    use super::*;
    use crate::grade::compare::{compare, Comparison, POISON_BITS};
    use crate::grade::integrity::Integrity;
    use crate::lab::paged::cases::MAX_NEW;

    fn embedded() -> Vec<LabCase> {
        PAGED_PREFILL
            .parse_cases(EMBEDDED_CASES, "assets/paged-cases.toml", Path::new("."))
            .expect("the embedded cases parse")
    }

    #[test]
    fn every_case_becomes_the_contracts_argument_list() {
        for case in embedded() {
            let data = PAGED_PREFILL.generate(&case, 7).expect("generates");
            assert_eq!(data.args.len(), ABI.args.len(), "{}", case.name);
            for (spec, value) in ABI.args.iter().zip(&data.args) {
                let fits = matches!(
                    (spec.kind, value),
                    (ArgKind::F32Input, ArgValue::F32(_))
                        | (ArgKind::I32Input, ArgValue::I32(_))
                        | (ArgKind::I32Scalar, ArgValue::Scalar(_))
                        | (ArgKind::OptionalF32Input, ArgValue::F32(_) | ArgValue::Null)
                        | (ArgKind::F32Output, ArgValue::Output)
                );
                assert!(fits, "{}: {} is {value:?}", case.name, spec.name);
            }
            // The arguments read back as the same inputs the generator made.
            let inputs = PagedPrefill::inputs(&data);
            assert_eq!(inputs.batch.total_new(), data.problem.output.rows);
            assert_eq!(
                PAGED_PREFILL.problem(&case).expect("problem"),
                data.problem,
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

    /// What a kernel with `bug` leaves in `out` (rows it never writes keep the poison).
    fn kernel_output(data: &CaseData, bug: Bug) -> Vec<f32> {
        model(&PagedPrefill::inputs(data), bug)
            .iter()
            .map(|&x| {
                if x.is_nan() {
                    f32::from_bits(POISON_BITS)
                } else {
                    x as f32
                }
            })
            .collect()
    }

    /// The lab's comparison and diagnosis of `out`, launched with `integrity`.
    fn diagnosed(data: &CaseData, out: &[f32], integrity: &Integrity) -> (Comparison, Diagnosis) {
        let reference = PAGED_PREFILL.oracle(data, None);
        let comparison = compare(
            data.problem.output,
            PAGED_PREFILL.tolerance(),
            out,
            &reference,
        );
        let said = PAGED_PREFILL.diagnose(
            data,
            &Graded {
                out,
                reference: &reference,
                comparison: &comparison,
                integrity,
                experiments: &Default::default(),
            },
        );
        (comparison, said)
    }

    fn mixed_lengths() -> CaseData {
        let case = embedded()
            .into_iter()
            .find(|c| c.name == "mixed-lengths")
            .expect("the mixed-lengths case");
        PAGED_PREFILL.generate(&case, 5).expect("generates")
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
        use crate::lab::definition::{CaseState, CaseSummary};
        let ran: Vec<(String, Comparison, Diagnosis)> = embedded()
            .into_iter()
            .map(|case| {
                let data = PAGED_PREFILL.generate(&case, 3).expect("generates");
                let (comparison, said) =
                    diagnosed(&data, &kernel_output(&data, bug), &Integrity::default());
                (case.name, comparison, said)
            })
            .collect();
        let summaries: Vec<CaseSummary<'_>> = ran
            .iter()
            .map(|(name, comparison, said)| CaseSummary {
                name,
                state: if comparison.passed {
                    CaseState::Pass
                } else {
                    CaseState::Fail
                },
                comparison: Some(comparison),
                integrity: None,
                diagnosis: &said.line,
                cause: said.cause,
            })
            .collect();
        PAGED_PREFILL.verdict(&summaries).expect("cases ran")
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
            Some("all 16 cases pass")
        );
    }
}
