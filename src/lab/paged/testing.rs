//! What the paged labs' tests share: each case's argument list checked
//! against the ABI, the engine's comparison and diagnosis of one output, and
//! the check's line over cases that ran.

use crate::grade::compare::{compare_scaled, Comparison, POISON_BITS};
use crate::grade::experiment::Experiments;
use crate::grade::integrity::Integrity;
use crate::lab::args::ArgValue;
use crate::lab::definition::{
    CaseData, CaseState, CaseSummary, Diagnosis, Graded, LabCase, LabRef,
};
use crate::lab::experiment::{self, Conditions, FirstRuns, Rerun};
use crate::lab::geometry::LaunchGeometry;
use crate::lab::paged::layout::{CacheLayout, HKV};
use crate::lab::paged::misread::{self, Misreading};

/// `lab`'s embedded cases, parsed as the engine parses them.
pub fn embedded(lab: LabRef) -> Vec<LabCase> {
    lab.parse_cases(
        lab.embedded_cases(),
        "embedded cases",
        std::path::Path::new("."),
    )
    .expect("the embedded cases parse")
}

/// `lab`'s embedded cases whose whole output the CPU oracle computes (the
/// long ones are graded on sampled rows and tested on their own).
pub fn whole_oracle(lab: LabRef) -> Vec<LabCase> {
    embedded(lab)
        .into_iter()
        .filter(|case| !lab.problem(case).expect("sized").oracle_sampled())
        .collect()
}

/// `lab`'s embedded case `name`, generated with `seed`.
pub fn embedded_case(lab: LabRef, name: &str, seed: u64) -> CaseData {
    let case = embedded(lab)
        .into_iter()
        .find(|c| c.name == name)
        .expect("the case exists");
    lab.generate(&case, seed).expect("generates")
}

/// That outputs read through a wrong GQA map fail and are named as that
/// map: `h % 8` on `cases[0]` and `h / 8` on `cases[1]` (each generated
/// with seed 5), `diagnosed` giving the comparison and diagnosis of what a
/// kernel misreading a case so writes.
pub fn assert_wrong_kv_maps_named(
    lab: LabRef,
    cases: [&str; 2],
    diagnosed: impl Fn(&CaseData, Misreading) -> (Comparison, Diagnosis),
) {
    let maps = [
        ((|h| h % HKV) as fn(usize) -> usize, "h % 8"),
        (|h| h / HKV, "h / 8"),
    ];
    for (case, (map, formula)) in cases.into_iter().zip(maps) {
        let data = embedded_case(lab, case, 5);
        let (comparison, said) = diagnosed(&data, Misreading::kv_map(map));
        assert!(!comparison.passed, "{case}");
        assert_eq!(
            said.cause,
            Some(misread::cause::KV_HEAD_MAPPING),
            "{case}: {said:?}"
        );
        assert!(
            said.line.starts_with("query heads read the wrong KV head"),
            "{said:?}"
        );
        assert!(said.line.contains(formula), "{case}: {said:?}");
    }
}

/// That an output read with every context length off by `shift` fails and
/// is named with its shift, on the `last-cached-key` case (context 500).
pub fn assert_context_shift_named(shift: i8, (comparison, said): &(Comparison, Diagnosis)) {
    assert!(!comparison.passed, "{shift}");
    assert_eq!(
        said.cause,
        Some(misread::cause::CONTEXT_LENGTH),
        "{shift}: {said:?}"
    );
    let named = format!("the context length is off by {shift:+}");
    assert!(said.line.starts_with(&named), "{shift}: {said:?}");
    assert!(said.line.contains("context 500 taken as"), "{said:?}");
}

/// Adds `by` to dimension 5 of KV head 2's new value at each of the
/// `total_new` tokens: data every query head of that KV head reads.
pub fn corrupt_kv_head_2(v_new: &mut [f32], total_new: usize, layout: &CacheLayout, by: f32) {
    for row in 0..total_new {
        v_new[layout.kv_index(row, 2, 5)] += by;
    }
}

/// That `kv_head_2_wrong` (the output of data [`corrupt_kv_head_2`] made
/// wrong) is pointed at KV head 2's data, its query heads 8-11 failing
/// alike; and that `right` (the oracle's output as the kernel stores it)
/// with query head 9 alone off by `head_9_off` is told per query head.
pub fn assert_kv_head_failures_told(
    lab: LabRef,
    data: &CaseData,
    layout: &CacheLayout,
    kv_head_2_wrong: &[f32],
    mut right: Vec<f32>,
    head_9_off: f32,
) {
    let (_, said) = diagnosed(lab, data, kv_head_2_wrong, &Integrity::default());
    assert!(
        said.line.contains("only the query heads of KV head 2 fail"),
        "{said:?}"
    );
    assert!(said.line.contains("heads 8-11"), "{said:?}");
    for row in 0..data.problem.output.rows {
        right[layout.head_index(row, 9, 0)] += head_9_off;
    }
    let (_, said) = diagnosed(lab, data, &right, &Integrity::default());
    assert!(
        said.line.contains("share a KV head fail differently"),
        "{said:?}"
    );
    assert!(said.line.contains("head 9 fail"), "{said:?}");
}

/// That `out` (the oracle's output as the kernel stores it) with its first
/// three rows left unwritten is told as unwritten, not as NaN.
pub fn assert_unwritten_rows_told(lab: LabRef, data: &CaseData, mut out: Vec<f32>) {
    let row_len = data.problem.output.heads * data.problem.output.dim;
    out[..3 * row_len].fill(f32::from_bits(POISON_BITS));
    let (comparison, said) = diagnosed(lab, data, &out, &Integrity::default());
    assert_eq!(comparison.unwritten, 3 * row_len);
    assert_eq!(
        said.cause,
        Some(crate::lab::verdict::cause::NEVER_WRITTEN),
        "{said:?}"
    );
    assert!(said.line.contains("never written"), "{said:?}");
    assert!(!said.line.contains("NaN"), "{said:?}");
}

/// A planted kernel of `lab` (`kernels/<lab>/bugs/<bug>.cu`): its path, its
/// text, and the cases its first line says it must fail on the GPU.
pub fn planted_kernel(lab: &str, bug: &str) -> (String, String, Vec<String>) {
    let path = format!("{}/kernels/{lab}/bugs/{bug}.cu", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("a planted kernel per bug");
    let listed = text
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("// flashprof-expect-fail:"))
        .unwrap_or_else(|| panic!("{path}: no flashprof-expect-fail line"))
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    (path, text, listed)
}

/// Generates each of `cases` with `seed`, asserts that `lab`'s argument list
/// holds one value of the right kind per ABI argument and that the problem
/// read from the case alone (as the timing phase reads it) is the generated
/// one, then hands the case, its data and its arguments to `lab_specific`.
pub fn for_each_argument_list(
    lab: LabRef,
    cases: &[LabCase],
    seed: u64,
    mut lab_specific: impl FnMut(&LabCase, &CaseData, &[ArgValue<'_>]),
) {
    let abi = lab.abi();
    for case in cases {
        let data = lab.generate(case, seed).expect("generates");
        let args = lab.args(&data);
        assert_eq!(args.len(), abi.args.len(), "{}", case.name);
        for (spec, value) in abi.args.iter().zip(&args) {
            assert!(
                value.fits(spec.kind),
                "{}: {} is {value:?}",
                case.name,
                spec.name
            );
        }
        assert_eq!(
            lab.problem(case).expect("problem"),
            data.problem,
            "{}",
            case.name
        );
        lab_specific(case, &data, &args);
    }
}

/// `lab`'s comparison (under its tolerance scales) and diagnosis of `out`
/// on `data`, as if launched with `integrity` and no experiments.
pub fn diagnosed(
    lab: LabRef,
    data: &CaseData,
    out: &[f32],
    integrity: &Integrity,
) -> (Comparison, Diagnosis) {
    let launch = lab.default_geometry();
    let (comparison, reference) = compared(lab, data, out);
    let said = said_of(
        lab,
        &launch,
        data,
        out,
        (&comparison, &reference),
        integrity,
        &Experiments::default(),
    );
    (comparison, said)
}

/// [`diagnosed`] for a CPU model of a kernel (`kernel` gives its output on
/// a case's data under a rerun's conditions, unwritten elements holding the
/// poison), with the experiments the worker would run on it (reruns
/// included, through [`ModelKernel`]).
pub fn diagnosed_model(
    lab: LabRef,
    launch: &LaunchGeometry,
    data: &CaseData,
    kernel: impl Fn(&CaseData, &Conditions) -> Vec<f32>,
) -> (Comparison, Diagnosis) {
    let out = kernel(data, &Conditions::default());
    let (comparison, reference) = compared(lab, data, &out);
    let first = FirstRuns {
        data,
        out: &out,
        reference: &reference,
        comparison: &comparison,
        runs_differ: false,
        second: None,
    };
    let Ok(experiments) = experiment::run(&*lab, &first, &mut ModelKernel(kernel));
    let integrity = Integrity::default();
    let said = said_of(
        lab,
        launch,
        data,
        &out,
        (&comparison, &reference),
        &integrity,
        &experiments,
    );
    (comparison, said)
}

fn compared(lab: LabRef, data: &CaseData, out: &[f32]) -> (Comparison, Vec<f64>) {
    let reference = lab.oracle(data, None);
    let scales = lab.tolerance_scales(data);
    let comparison = compare_scaled(
        data.problem.output,
        lab.tolerance(),
        scales.as_deref(),
        out,
        &reference,
    );
    (comparison, reference)
}

/// `lab`'s diagnosis of `out`, already compared with its reference.
fn said_of(
    lab: LabRef,
    launch: &LaunchGeometry,
    data: &CaseData,
    out: &[f32],
    (comparison, reference): (&Comparison, &[f64]),
    integrity: &Integrity,
    experiments: &Experiments,
) -> Diagnosis {
    lab.diagnose(
        data,
        &Graded {
            launch,
            out,
            reference,
            comparison,
            integrity,
            experiments,
        },
    )
}

/// A CPU model of a kernel as the experiments rerun it: what it writes on
/// a case's data under the rerun's conditions, with the elements it never
/// writes holding whatever `out` started at, as on the GPU.
pub struct ModelKernel<F>(pub F);

impl<F: Fn(&CaseData, &Conditions) -> Vec<f32>> Rerun for ModelKernel<F> {
    type Error = std::convert::Infallible;

    fn rerun(&mut self, data: &CaseData, conditions: &Conditions) -> Result<Vec<f32>, Self::Error> {
        let start = f32::from_bits(conditions.output_start);
        Ok((self.0)(data, conditions)
            .into_iter()
            .map(|x| if x.to_bits() == POISON_BITS { start } else { x })
            .collect())
    }
}

/// `lab`'s one line for a check whose cases ran as `ran`: each case's name,
/// comparison and diagnosis.
pub fn verdict_of(lab: LabRef, ran: &[(String, Comparison, Diagnosis)]) -> String {
    let summaries: Vec<CaseSummary<'_>> = ran
        .iter()
        .map(|(name, comparison, said)| CaseSummary {
            name,
            state: match comparison.passed {
                true => CaseState::Pass,
                false => CaseState::Fail,
            },
            comparison: Some(comparison),
            integrity: None,
            diagnosis: &said.line,
            cause: said.cause,
        })
        .collect();
    lab.verdict(&summaries).expect("cases ran")
}

/// That a block table (`[seqs][per_seq]`) is laid out as the contracts say
/// the grader lays it out, given the blocks each sequence `owned`: every
/// entry a block id, no owned block at the id `s * per_seq + k` a kernel
/// ignoring the table would read, and every entry past a sequence's own
/// blocks naming a block it does not own.
pub fn assert_table_rows(
    name: &str,
    table: &[i32],
    per_seq: usize,
    num_blocks: usize,
    owned: &[Vec<usize>],
) {
    for (s, mine) in owned.iter().enumerate() {
        for k in 0..per_seq {
            let id = table[s * per_seq + k] as usize;
            assert!(id < num_blocks);
            if k < mine.len() {
                assert_ne!(id, s * per_seq + k, "{name}: identity block");
            } else {
                assert!(!mine.contains(&id), "{name}: sequence {s} entry {k}");
            }
        }
    }
}

/// That prefill `batches` cover the hazard families every paged prefill
/// lab's cases must: contexts 0, 1, B-1, B, B+1 and 1000; new-token counts
/// 1, 17, 33 and 65; windows 1, B-1, B and B+1 and one longer than a
/// sequence; a row whose window hides every cached key; ALiBi with and
/// without a context and with a window.
pub fn assert_prefill_families(batches: &[&crate::lab::paged::batch::Batch]) {
    use crate::lab::paged::layout::BLOCK;
    let any = |f: &dyn Fn(&crate::lab::paged::batch::Batch) -> bool| batches.iter().any(|b| f(b));
    for c in [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 1000] {
        assert!(any(&|b| b.context.contains(&c)), "context {c}");
    }
    for n in [1, 17, 33, 65] {
        assert!(any(&|b| b.new.contains(&n)), "new {n}");
    }
    for w in [1, BLOCK - 1, BLOCK, BLOCK + 1] {
        assert!(any(&|b| b.window() == Some(w)), "window {w}");
    }
    assert!(any(&|b| b
        .window()
        .is_some_and(|w| (0..b.num_seqs()).any(|s| b.len_of(s) < w))));
    assert!(any(&|b| (0..b.num_seqs()).any(|s| {
        let ctx = b.context[s];
        ctx > 0 && (0..b.new[s]).any(|t| b.first_visible(ctx + t) >= ctx)
    })));
    assert!(any(&|b| b.alibi && b.context.iter().all(|&c| c == 0)));
    assert!(any(&|b| b.alibi && b.context.iter().any(|&c| c > 0)));
    assert!(any(&|b| b.alibi && b.window().is_some()));
}

/// Every `(block, slot)` past a context's end in that context's last block:
/// slots a kernel reading one key too many would read.
pub fn slots_past_contexts(batch: &crate::lab::paged::batch::Batch) -> Vec<(usize, usize)> {
    use crate::lab::paged::layout::BLOCK;
    (0..batch.num_seqs())
        .map(|s| (s, batch.context[s]))
        .filter(|&(_, ctx)| ctx % BLOCK != 0)
        .flat_map(|(s, ctx)| (ctx % BLOCK..BLOCK).map(move |o| (batch.block_of(s, ctx), o)))
        .collect()
}
