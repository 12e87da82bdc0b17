//! The audit of timed launches (`grade::launch_audit`) and the physical
//! floor (`grade::floor`), driven the way `worker::timing` drives them on
//! the GPU, but with CPU-computed launches of the real `flash-prefill` lab
//! on a small shape: every launch gets fresh inputs (`Lab::generate` on its
//! own seed), an honest launch returns the float64 oracle rounded to f32,
//! and the audit's planned rows are recomputed with `Lab::oracle(.., Some(rows))`.

use flashprof::grade::compare::{OutputShape, POISON_BITS};
use flashprof::grade::floor::{too_few_dram_reads, Ceilings, Floor, FloorTerm};
use flashprof::grade::launch_audit::{
    AuditPlan, FindingKind, LaunchAudit, LaunchFinding, LaunchId, LaunchPhase, SAMPLED_ROWS,
};
use flashprof::lab::definition::{CaseData, LabCase};
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Timed launches planned, as `LaunchId::of` says.
const TIMED: usize = 15;
/// The seed of the checked launch's inputs; timed launch `n` gets seed `n`.
const CHECKED_SEED: u64 = 0;

/// The small timing shape: 48 new rows after 40 cached keys, so there are
/// more rows (48) than the audit samples (16).
fn small_case() -> LabCase {
    FLASH_PREFILL
        .timing_case(&[
            ("chunk".into(), "48".into()),
            ("prefix".into(), "40".into()),
        ])
        .expect("a valid timing shape")
}

fn checked() -> LaunchId {
    LaunchId {
        phase: LaunchPhase::Checked,
        number: 1,
        of: 1,
    }
}

fn timed(number: usize) -> LaunchId {
    LaunchId {
        phase: LaunchPhase::Timed,
        number,
        of: TIMED,
    }
}

/// One launch's fresh inputs and what an honest kernel returns for them.
struct Launch {
    data: CaseData,
    /// The float64 oracle of the whole output.
    exact: Vec<f64>,
    /// The oracle rounded to f32: an honest launch's output.
    honest: Vec<f32>,
}

/// The inputs of the launch on `seed`, and its honest output (computed
/// once per seed: the full oracle is slow in a debug build).
fn launch_on(seed: u64) -> Arc<Launch> {
    static LAUNCHES: OnceLock<Mutex<HashMap<u64, Arc<Launch>>>> = OnceLock::new();
    let launches = LAUNCHES.get_or_init(Mutex::default);
    if let Some(launch) = launches.lock().unwrap().get(&seed) {
        return Arc::clone(launch);
    }
    let data = FLASH_PREFILL
        .generate(&small_case(), seed)
        .expect("the case generates");
    let exact = FLASH_PREFILL.oracle(&data, None);
    let honest = exact.iter().map(|&x| x as f32).collect();
    let launch = Arc::new(Launch {
        data,
        exact,
        honest,
    });
    launches.lock().unwrap().insert(seed, Arc::clone(&launch));
    launch
}

fn shape() -> OutputShape {
    FLASH_PREFILL
        .problem(&small_case())
        .expect("the case has a size")
        .output
}

fn row_len(shape: OutputShape) -> usize {
    shape.heads * shape.dim
}

fn sampler(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A fresh audit that remembers the checked launch (seed 0, honest), as
/// the worker's audit does before the first warm-up.
fn audit_after_check() -> LaunchAudit {
    let mut audit = LaunchAudit::new(shape(), FLASH_PREFILL.tolerance());
    audit.remember(checked(), &launch_on(CHECKED_SEED).honest);
    audit
}

/// The float64 reference of the planned rows on these inputs, as the
/// worker computes it after planning.
fn reference_of(plan: &AuditPlan, inputs: &CaseData) -> Vec<f64> {
    FLASH_PREFILL.oracle(inputs, Some(&plan.rows))
}

/// Plans, recomputes and judges one launch that returned `output` for `inputs`.
fn audit_launch(
    audit: &mut LaunchAudit,
    id: LaunchId,
    inputs: &CaseData,
    output: &[f32],
    rng: &mut ChaCha8Rng,
) -> Result<(), LaunchFinding> {
    let plan = audit.plan(id, output, &[], rng)?;
    let reference = reference_of(&plan, inputs);
    audit.judge(id, output, plan, &reference).map(|_| ())
}

/// The rows the random sample alone picks for `seed` (what a plan of an
/// output with no suspect rows holds).
fn sampled_rows(seed: u64) -> Vec<usize> {
    let audit = LaunchAudit::new(shape(), FLASH_PREFILL.tolerance());
    let plan = audit
        .plan(
            timed(1),
            &launch_on(CHECKED_SEED).honest,
            &[],
            &mut sampler(seed),
        )
        .expect("an honest output plans");
    assert_eq!(plan.rows.len(), SAMPLED_ROWS);
    plan.rows
}

/// The (head, dim) of the first element of `row` in `got` further from
/// `exact` than the lab's tolerance.
fn first_wrong(shape: OutputShape, got: &[f32], exact: &[f64], row: usize) -> (usize, usize) {
    let tolerance = FLASH_PREFILL.tolerance();
    let start = shape.index(row, 0, 0);
    let at = (start..start + row_len(shape))
        .position(|i| (got[i] as f64 - exact[i]).abs() > tolerance.allowed(exact[i]))
        .expect("the row is wrong somewhere");
    (at / shape.dim, at % shape.dim)
}

#[test]
fn a_correct_launch_sequence_passes_every_audit() {
    let shape = shape();
    assert!(
        shape.rows > SAMPLED_ROWS,
        "the shape must make the audit sample"
    );
    let mut audit = audit_after_check();
    let mut rng = sampler(1);
    let mut planned = std::collections::BTreeSet::new();
    for number in 1..=TIMED {
        let launch = launch_on(number as u64);
        let plan = audit
            .plan(timed(number), &launch.honest, &[], &mut rng)
            .expect("an honest launch leaves no poison");
        // No row repeats an earlier launch, so only the sample is planned.
        assert_eq!(plan.rows.len(), SAMPLED_ROWS, "launch {number}");
        assert!(plan.rows.windows(2).all(|w| w[0] < w[1]));
        assert!(plan.rows.iter().all(|&row| row < shape.rows));
        planned.extend(plan.rows.iter().copied());
        let reference = reference_of(&plan, &launch.data);
        assert_eq!(
            audit
                .judge(timed(number), &launch.honest, plan, &reference)
                .map(|_| ()),
            Ok(()),
            "honest timed launch {number}"
        );
    }
    // Fresh rows are sampled launch after launch, not the same ones.
    assert!(planned.len() > SAMPLED_ROWS, "{planned:?}");
}

#[test]
fn a_launch_returning_the_previous_launchs_output_is_stale() {
    let shape = shape();
    let stale_at = 4;
    let mut audit = audit_after_check();
    let mut rng = sampler(2);
    for number in 1..stale_at {
        let launch = launch_on(number as u64);
        audit_launch(
            &mut audit,
            timed(number),
            &launch.data,
            &launch.honest,
            &mut rng,
        )
        .expect("honest launches pass");
    }
    // Inputs of seed 4, the output of seed 3 (the previous launch's).
    let inputs = launch_on(stale_at as u64);
    let previous = launch_on(stale_at as u64 - 1);
    let plan = audit
        .plan(timed(stale_at), &previous.honest, &[], &mut rng)
        .expect("no poison");
    // Every row repeats an earlier launch: every row is recomputed.
    assert_eq!(plan.rows, (0..shape.rows).collect::<Vec<_>>());
    let reference = reference_of(&plan, &inputs.data);
    let finding = audit
        .judge(timed(stale_at), &previous.honest, plan, &reference)
        .expect_err("the previous launch's output is refused");
    let (head, _) = first_wrong(shape, &previous.honest, &inputs.exact, 0);
    assert_eq!(
        finding,
        LaunchFinding {
            launch: timed(stale_at),
            kind: FindingKind::Stale {
                row: 0,
                head,
                earlier: timed(stale_at - 1),
            },
        }
    );
}

#[test]
fn a_launch_computed_only_on_the_checked_inputs_is_stale() {
    let shape = shape();
    let replayed = launch_on(CHECKED_SEED).honest.clone();
    let mut audit = audit_after_check();
    let mut rng = sampler(3);
    let launch = launch_on(1);
    let finding = audit_launch(&mut audit, timed(1), &launch.data, &replayed, &mut rng)
        .expect_err("the checked launch's output on fresh inputs is refused");
    let (head, _) = first_wrong(shape, &replayed, &launch.exact, 0);
    assert_eq!(
        finding.kind,
        FindingKind::Stale {
            row: 0,
            head,
            earlier: checked(),
        }
    );
    assert_eq!(finding.launch, timed(1));
    assert!(
        finding
            .to_string()
            .contains("is the checked launch's, bit for bit"),
        "{finding}"
    );
}

#[test]
fn every_launch_that_replays_the_checked_output_names_the_checked_launch() {
    // The kernel memoised the checked launch and replays it on every timed
    // launch: each of them holds the checked launch's bits, so each is
    // refused as stale and each finding should name where those bits came
    // from, the checked launch.
    let replayed = launch_on(CHECKED_SEED).honest.clone();
    let mut audit = audit_after_check();
    let mut rng = sampler(4);
    for number in 1..=5 {
        let launch = launch_on(number as u64);
        let finding = audit_launch(&mut audit, timed(number), &launch.data, &replayed, &mut rng)
            .expect_err("a replay is refused");
        match finding.kind {
            FindingKind::Stale { earlier, .. } => {
                assert_eq!(earlier, checked(), "timed launch {number}: {finding}")
            }
            other => panic!("timed launch {number}: not stale: {other:?}"),
        }
    }
}

#[test]
fn poison_left_anywhere_is_found_whatever_the_sample() {
    let shape = shape();
    let audit = audit_after_check();
    let launch = launch_on(1);
    let mut places = ChaCha8Rng::seed_from_u64(5);
    let mut missed_by_the_sample = 0;
    for trial in 0..24u64 {
        let (row, head, dim) = (
            places.random_range(0..shape.rows),
            places.random_range(0..shape.heads),
            places.random_range(0..shape.dim),
        );
        let mut output = launch.honest.clone();
        output[shape.index(row, head, dim)] = f32::from_bits(POISON_BITS);
        let seed = 100 + trial;
        if !sampled_rows(seed).contains(&row) {
            missed_by_the_sample += 1;
        }
        let finding = audit
            .plan(timed(2), &output, &[], &mut sampler(seed))
            .expect_err("poison left in the output is refused");
        assert_eq!(
            finding,
            LaunchFinding {
                launch: timed(2),
                kind: FindingKind::Unwritten {
                    row,
                    head,
                    elements: 1,
                },
            },
            "poison at row {row}, head {head}, dim {dim}"
        );
    }
    assert!(
        missed_by_the_sample > 0,
        "some poisoned rows must lie outside the random sample"
    );

    // A whole row left unwritten: every element counted, its first head named.
    let row = shape.rows - 1;
    let mut output = launch.honest.clone();
    let start = shape.index(row, 0, 0);
    output[start..start + row_len(shape)].fill(f32::from_bits(POISON_BITS));
    let finding = audit
        .plan(timed(3), &output, &[], &mut sampler(6))
        .expect_err("an unwritten row is refused");
    assert_eq!(
        finding.kind,
        FindingKind::Unwritten {
            row,
            head: 0,
            elements: row_len(shape),
        }
    );
}

/// H200-like ceilings: the attribute bandwidth with the worker's 10%
/// headroom, the dense FP8 rate, and an empty launch.
fn h200() -> Ceilings {
    Ceilings {
        dram_bytes_per_s: 4.9e12 * 1.1,
        tensor_flops_per_s: 2.1e15,
        empty_launch_ms: 0.006,
    }
}

#[test]
fn a_median_below_the_floor_is_impossible_and_an_honest_one_is_not() {
    // The small shape: an empty launch is longer than its bytes or flops.
    let small = FLASH_PREFILL.problem(&small_case()).unwrap().work;
    let floor = Floor::of(small, h200(), true);
    assert_eq!(floor.term, FloorTerm::EmptyLaunch);
    assert_eq!(floor.ms, 0.006);
    let impossible = floor.judge(0.001).expect("faster than an empty launch");
    assert_eq!(impossible.median_ms, 0.001);
    assert_eq!(
        impossible.to_string(),
        "impossible timing: the median 0.0010 ms is below the physical floor of 0.0060 ms \
         (an empty launch of the same run)"
    );
    assert_eq!(floor.judge(0.006), None, "the floor itself is possible");
    assert_eq!(floor.judge(0.0123), None);

    // The default timing shape, 2048 x 2048: the tensor rate decides.
    let timing = FLASH_PREFILL.timing_case(&[]).unwrap();
    let work = FLASH_PREFILL.problem(&timing).unwrap().work;
    let floor = Floor::of(work, h200(), true);
    assert_eq!(floor.term, FloorTerm::TensorFlops);
    assert!((floor.ms - work.flops / 2.1e15 * 1e3).abs() < 1e-12);
    let impossible = floor.judge(0.0100).expect("a skipped launch");
    assert_eq!(
        impossible.to_string(),
        "impossible timing: the median 0.0100 ms is below the physical floor of 0.0245 ms \
         (51.5 GFLOP at the fastest tensor rate, 2100 TFLOP/s)"
    );
    // An honest kernel on an H200 takes a fraction of a millisecond.
    assert_eq!(floor.judge(0.25), None);

    // A long prefix and one new row: the compulsory bytes decide, but only
    // when L2 was evicted before every timed launch.
    let decode = FLASH_PREFILL
        .timing_case(&[
            ("chunk".into(), "1".into()),
            ("prefix".into(), "65536".into()),
        ])
        .unwrap();
    let work = FLASH_PREFILL.problem(&decode).unwrap().work;
    let floor = Floor::of(work, h200(), true);
    assert_eq!(floor.term, FloorTerm::DramBytes);
    let dram_ms = work.compulsory_bytes as f64 / (4.9e12 * 1.1) * 1e3;
    assert!((floor.ms - dram_ms).abs() < 1e-12);
    let impossible = floor.judge(0.02).expect("faster than its bytes");
    let text = impossible.to_string();
    assert!(text.contains("the median 0.0200 ms"), "{text}");
    assert!(
        text.contains(&format!("physical floor of {:.4} ms", dram_ms)),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "({:.1} MB of compulsory DRAM bytes at 5.39 TB/s)",
            work.compulsory_bytes as f64 / 1e6
        )),
        "{text}"
    );
    assert_eq!(floor.judge(0.08), None);
    let warm = Floor::of(work, h200(), false);
    assert_eq!(warm.term, FloorTerm::EmptyLaunch);
    assert_eq!(warm.judge(0.02), None, "bytes may come from a warm L2");
}

#[test]
fn a_profile_that_read_less_than_half_its_inputs_is_impossible() {
    let timing = FLASH_PREFILL.timing_case(&[]).unwrap();
    let work = FLASH_PREFILL.problem(&timing).unwrap().work;
    // 48 MiB in all, 16 MiB of it the output: 32 MiB (33.6 MB) of inputs.
    assert_eq!(work.compulsory_bytes - work.output_bytes, 32 << 20);
    assert_eq!(too_few_dram_reads(work, 34e6), None);
    assert_eq!(too_few_dram_reads(work, 16.8e6), None);
    assert_eq!(
        too_few_dram_reads(work, 4e6).as_deref(),
        Some(
            "impossible profile: the launch read 4.0 MB from DRAM, less than half of its \
             33.6 MB of inputs, with L2 evicted before it"
        )
    );
}

#[test]
fn one_wrong_element_is_found_as_wrong_when_its_row_is_sampled() {
    let shape = shape();
    let base = audit_after_check();
    let launch = launch_on(1);
    let (row, head, dim) = (29, 17, 41);
    let at = shape.index(row, head, dim);
    let mut output = launch.honest.clone();
    output[at] += 0.01;
    let (mut found, mut missed) = (0, 0);
    for seed in 0..48 {
        let mut audit = base.clone();
        let plan = audit
            .plan(timed(1), &output, &[], &mut sampler(seed))
            .expect("no poison");
        // The row repeats no earlier launch: only the sample decides.
        assert_eq!(plan.rows, sampled_rows(seed), "sampler seed {seed}");
        let sampled = plan.rows.contains(&row);
        let reference = reference_of(&plan, &launch.data);
        let verdict = audit.judge(timed(1), &output, plan, &reference).map(|_| ());
        if !sampled {
            missed += 1;
            assert_eq!(
                verdict,
                Ok(()),
                "sampler seed {seed}: only row {row} is off"
            );
            continue;
        }
        found += 1;
        let want = launch.exact[at];
        assert_eq!(
            verdict,
            Err(LaunchFinding {
                launch: timed(1),
                kind: FindingKind::Wrong {
                    row,
                    head,
                    dim,
                    got: output[at] as f64,
                    want,
                    allowed: FLASH_PREFILL.tolerance().allowed(want),
                },
            }),
            "sampler seed {seed}"
        );
    }
    assert!(
        found > 0 && missed > 0,
        "found {found}, missed {missed}: both must happen"
    );
}

#[test]
fn a_wrong_row_repeating_an_earlier_launch_is_always_planned_and_stale() {
    let shape = shape();
    let mut base = audit_after_check();
    let first = launch_on(1);
    audit_launch(
        &mut base,
        timed(1),
        &first.data,
        &first.honest,
        &mut sampler(7),
    )
    .expect("an honest launch passes");
    // Launch 2 is honest except one row, copied from launch 1.
    let second = launch_on(2);
    let row = 11;
    let span = shape.index(row, 0, 0)..shape.index(row + 1, 0, 0);
    let mut output = second.honest.clone();
    output[span.clone()].copy_from_slice(&first.honest[span]);
    let (head, _) = first_wrong(shape, &output, &second.exact, row);
    let mut missed_by_the_sample = 0;
    for seed in 0..32 {
        let mut audit = base.clone();
        let plan = audit
            .plan(timed(2), &output, &[], &mut sampler(seed))
            .expect("no poison");
        let sample = sampled_rows(seed);
        if !sample.contains(&row) {
            missed_by_the_sample += 1;
        }
        assert!(
            plan.rows.contains(&row),
            "sampler seed {seed}: {:?}",
            plan.rows
        );
        // The suspect row on top of the sample, nothing else.
        let mut expected = sample;
        expected.push(row);
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(plan.rows, expected, "sampler seed {seed}");
        let reference = reference_of(&plan, &second.data);
        let finding = audit
            .judge(timed(2), &output, plan, &reference)
            .expect_err("a replayed row is refused");
        assert_eq!(
            finding.kind,
            FindingKind::Stale {
                row,
                head,
                earlier: timed(1),
            },
            "sampler seed {seed}"
        );
    }
    assert!(
        missed_by_the_sample > 0,
        "the random sample alone must miss the row sometimes"
    );
}

#[test]
fn findings_read_as_one_sentence_with_launch_row_and_reason() {
    let shape = shape();
    let mut audit = audit_after_check();
    let mut rng = sampler(8);
    for number in 1..=2 {
        let launch = launch_on(number as u64);
        audit_launch(
            &mut audit,
            timed(number),
            &launch.data,
            &launch.honest,
            &mut rng,
        )
        .expect("honest launches pass");
    }
    let third = launch_on(3);

    // Stale: launch 3 returns launch 2's output.
    let second = launch_on(2);
    let second = &second.honest;
    let stale = audit_launch(&mut audit.clone(), timed(3), &third.data, second, &mut rng)
        .expect_err("stale");
    let (head, _) = first_wrong(shape, second, &third.exact, 0);
    assert_eq!(
        stale.to_string(),
        format!(
            "timed launch 3 of 15 returned the output of earlier inputs (row 0, head {head} is \
             timed launch 2 of 15's, bit for bit)"
        )
    );

    // Unwritten: one poisoned element.
    let mut poisoned = third.honest.clone();
    poisoned[shape.index(20, 6, 3)] = f32::from_bits(POISON_BITS);
    let unwritten = audit
        .plan(timed(3), &poisoned, &[], &mut rng)
        .expect_err("unwritten");
    assert_eq!(
        unwritten.to_string(),
        "timed launch 3 of 15 left 1 element unwritten (row 20, head 6 still holds the \
         poison written before it)"
    );

    // Wrong: one element off in a row every plan holds (a non-finite one).
    let at = shape.index(5, 9, 2);
    let mut wrong = third.honest.clone();
    wrong[at] = f32::INFINITY;
    let plan = audit
        .plan(timed(3), &wrong, &[], &mut rng)
        .expect("no poison");
    assert!(plan.rows.contains(&5), "a non-finite row is always planned");
    let reference = reference_of(&plan, &third.data);
    let finding = audit
        .judge(timed(3), &wrong, plan, &reference)
        .expect_err("wrong");
    let text = finding.to_string();
    assert!(
        text.starts_with("timed launch 3 of 15 is wrong at row 5, head 9, dim 2: inf where the float64 reference has "),
        "{text}"
    );
    let want = third.exact[at];
    let allowed = FLASH_PREFILL.tolerance().allowed(want);
    assert!(
        text.ends_with(&format!("reference has {want:.6} (allowed ±{allowed:.1e})")),
        "{text}"
    );

    for sentence in [stale.to_string(), unwritten.to_string(), text] {
        assert!(!sentence.contains('\n'), "{sentence}");
        assert!(sentence.starts_with("timed launch 3 of 15 "), "{sentence}");
        assert!(sentence.contains("row "), "{sentence}");
    }
}
