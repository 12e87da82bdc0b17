//! A STAND-IN for flashprof's worker process, used only by the protocol tests.
//!
//! It speaks the real protocol but runs no kernel: it answers compile and
//! load at once, and chooses a behaviour per case from the case's name, so a
//! test can exercise the caller's watchdog and restart logic on a machine
//! without a GPU:
//! - a name containing `hang` never answers (the watchdog must kill it);
//! - `crash` exits abruptly with no answer (a segfaulting driver, say);
//! - `signal` dies of SIGABRT with no answer;
//! - `timelimit` writes what slurmstepd writes when an allocation's time is up, and exits;
//! - `sticky` answers with a crash and then exits (a sticky CUDA error);
//! - `garbage` writes a line that is not a message;
//! - anything else passes.
//!
//! `FLASHPROF_STAND_IN_PROTOCOL=N` makes it greet with protocol N.
//!
//! Builds: a quick build and the optimized one give different images, and a
//! case's diagnosis says which image ran it. A case named `flaky-build`
//! passes on the quick image and fails on the optimized one; a case named
//! `slow...` takes half a second. The optimized build of a source text
//! containing `optimizer-takes-300ms` takes that long, and of one
//! containing `slow-optimizer` 30 s; with
//! `FLASHPROF_STAND_IN_MARKS=DIR` such a build first writes its process id
//! to `DIR/optimizing`, so a test can see that a stale build was stopped.
//! Started without a GPU (`FLASHPROF_GPU=none`, as the builders that
//! compile for a GPU worker are), it refuses to build a text containing `builder-fails`.
//!
//! Timing: a source text holding `stand-in-timing: KIND` is timed on a
//! small flash-prefill shape with CPU-computed launches, each audited by the
//! real `grade::launch_audit` against the real CPU oracle and judged by the
//! real `grade::floor`: KIND `honest` gives 2x, `stale` returns the previous
//! launch's output, `first-inputs` the checked launch's, `unwritten` leaves
//! poison in one row, `too-fast` is honest but faster than the floor,
//! `less-exact` is exact when checked and uses 40% of the allowance on every
//! timed launch (the precision rule names it). A text without it is not timed.
//!
//! Lines: a flash-prefill source text holding `stand-in-lines` is built
//! with the real NVRTC, so its image is a real cubin; a line profile of it
//! (and of the lab's starter, built the same way and sent back with its
//! cubin) answers recorded samples on the function's first instructions,
//! which the caller charges through the real line table. As on the H100, a
//! worker samples once: its second profile comes back with no instruction
//! (refused here, so a caller that samples twice in one worker fails).
//! A profile asked for in steps gets the samples first, then the counts
//! (each instruction executed 1,024 times) from the same worker.
//! `FLASHPROF_STAND_IN_SLOW_LINES_MS` makes each sampling take that long,
//! `FLASHPROF_STAND_IN_SLOW_COUNTS_MS` each counting.
//! Any other line profile is refused. Asked to release the counters' profiler, it writes
//! `released` under `FLASHPROF_STAND_IN_MARKS`.
//!
//! Started with `FLASHPROF_WORKER_EXIT_ON_HANGUP=1` (as every remote worker
//! is), it ends when its caller hangs up, through the real worker's watch:
//! a `hang` case then shows that a worker stuck on a dropped link goes away.
//!
//! Labs: a compile for the `toy-kinds` lab (tests/toy_kinds/mod.rs: every
//! argument kind the fp32 labs do not use) runs each case for real on the
//! CPU: the case's arguments laid out as `gpu::device` lays them out for a
//! GPU (guards, the bf16 output's poison, scratch reset before each of two
//! launches), the lab's kernel as a CPU function of them, the output read
//! back as grading reads a bf16 output, compared with the lab's oracle. A
//! case named `skips-a-row` leaves a row unwritten, `reads-past-the-end`
//! reads one element past an input.
//!
//! A case that arrives before any kernel was compiled or loaded in *this*
//! process fails, which is how the tests see that a restarted worker got
//! the kernel image again.

use std::io::{BufReader, Write};

use flashprof::facts::device::DeviceInfo;
use flashprof::gpu::compile::line_table::{LineTable, SASS_INSTRUCTION_BYTES};
use flashprof::gpu::compile::{compile, Build, CompileOptions};
use flashprof::grade::compare::{compare, POISON_BITS};
use flashprof::grade::floor::{Ceilings, Floor};
use flashprof::grade::launch_audit::{row_shares, LaunchAudit, LaunchId, LaunchPhase};
use flashprof::grade::lines::{InstructionCounts, InstructionReading};
use flashprof::grade::precision::{self, ClassShares};
use flashprof::grade::stats::{speedup, summarize};
use flashprof::lab::definition::CaseData;
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use flashprof::lab::source::StudentSource;
use flashprof::protocol::{
    read_message, write_message, CaseOutcome, CaseStatus, CompileOutcome, Event, LineSteps,
    LinesOutcome, ProfiledKernel, ReferenceCheck, Request, TimingConfig, TimingOutcome,
    PROTOCOL_VERSION, TIMING_RULES,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

#[path = "../tests/toy_kinds/mod.rs"]
mod toy_kinds;

const OPTIMIZED_IMAGE: &[u8] = b"stand-in image";
const QUICK_IMAGE: &[u8] = b"stand-in quick image";
/// What a source text says to choose how the stand-in times it.
const TIMING_MARK: &str = "stand-in-timing: ";
/// What a source text says to be built for real and given a line profile.
const LINES_MARK: &str = "stand-in-lines";
/// The recorded samples a line profile answers, per instruction from the
/// function's first (each half the one before).
const LINE_SAMPLES: [u64; 6] = [3200, 1600, 800, 400, 200, 100];

fn main() {
    flashprof::worker::exit_when_caller_hangs_up();
    let mut out = std::io::stdout();
    let mut input = BufReader::new(std::io::stdin());
    let device = DeviceInfo {
        ordinal: 0,
        name: "stand-in GPU".into(),
        compute_capability: (9, 0),
        sm_count: 1,
        l2_bytes: 1 << 20,
        max_sm_clock_mhz: 1000.0,
        memory_bytes: 1 << 30,
        driver_version: 13000,
        sm_attributes: None,
        memory_clock_mhz: 0.0,
        memory_bus_bits: 0,
        uuid: String::new(),
    };
    // A stand-in for a flashprof of another version (tests/remote.rs).
    let protocol = std::env::var("FLASHPROF_STAND_IN_PROTOCOL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PROTOCOL_VERSION);
    let ready = Event::Ready {
        protocol,
        gpu: Ok(device),
        start_ms: 0.0,
        sandbox: None,
    };
    write_message(&mut out, &ready).expect("stdout");
    // A worker samples once (the H100 answered a second sampling with no instruction).
    let mut sampled = false;
    let mut loaded: Option<Vec<u8>> = None;
    let mut timing_kind: Option<String> = None;
    let mut lab_name = String::new();
    while let Ok(request) = read_message::<Request>(&mut input) {
        let event = match request {
            Request::Shutdown => return,
            Request::Compile {
                build,
                source_path,
                source_text,
                lab,
                ..
            } => {
                lab_name = lab.name;
                let image = match build {
                    Build::Optimized => OPTIMIZED_IMAGE,
                    Build::Quick(_) => QUICK_IMAGE,
                };
                if build == Build::Optimized && source_text.contains("slow-optimizer") {
                    if let Some(marks) = std::env::var_os("FLASHPROF_STAND_IN_MARKS") {
                        // Written aside and renamed, so a test that sees the
                        // mark always reads the whole process id.
                        let marks = std::path::Path::new(&marks);
                        let partial = marks.join("optimizing.partial");
                        std::fs::write(&partial, std::process::id().to_string()).expect("mark");
                        std::fs::rename(partial, marks.join("optimizing")).expect("mark");
                    }
                    std::thread::sleep(std::time::Duration::from_secs(30));
                }
                // The builder beside the GPU worker is started without a GPU.
                let builder = std::env::var("FLASHPROF_GPU").as_deref() == Ok("none");
                if builder && source_text.contains("builder-fails") {
                    let failed = Event::Failed {
                        message: "stand-in builder: simulated failure".into(),
                        fatal: false,
                    };
                    write_message(&mut out, &failed).expect("stdout");
                    continue;
                }
                if build == Build::Optimized && source_text.contains("optimizer-takes-300ms") {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
                let built = source_text
                    .contains(LINES_MARK)
                    .then(|| built_for_real(&source_path, &source_text));
                let image = built.as_deref().unwrap_or(image);
                loaded = Some(image.to_vec());
                timing_kind = source_text.split_once(TIMING_MARK).map(|(_, rest)| {
                    rest.split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string()
                });
                // A builder's image reaches the GPU worker only through
                // `Load`, so the image carries how it is to be timed.
                let mut image = image.to_vec();
                if let Some(kind) = &timing_kind {
                    image.extend_from_slice(format!("{TIMING_MARK}{kind}").as_bytes());
                }
                Event::Compiled(CompileOutcome {
                    build,
                    ok: true,
                    diagnostics: Vec::new(),
                    problem: None,
                    resources: None,
                    occupancy: None,
                    geometry: Some(FLASH_PREFILL.default_geometry()),
                    kernel_facts: Box::default(),
                    image,
                    compile_ms: 0.0,
                    load_ms: Some(0.0),
                })
            }
            Request::Load { image, lab, .. } => {
                lab_name = lab.name;
                let text = String::from_utf8_lossy(&image).into_owned();
                let (base, kind) = match text.split_once(TIMING_MARK) {
                    Some((base, kind)) => (base.as_bytes().to_vec(), Some(kind.to_owned())),
                    None => (image, None),
                };
                timing_kind = kind;
                let real = base.starts_with(b"\x7fELF");
                loaded = ([QUICK_IMAGE, OPTIMIZED_IMAGE].contains(&base.as_slice()) || real)
                    .then_some(base);
                Event::Loaded { load_ms: 0.0 }
            }
            Request::RunCase { case, seed } if lab_name == toy_kinds::KINDS.name() => {
                match case.decode(&*toy_kinds::KINDS) {
                    Ok(case) => Event::Case(kinds_case(&case, seed)),
                    Err(e) => Event::Failed {
                        message: e.to_string(),
                        fatal: false,
                    },
                }
            }
            Request::RunCase { case, .. } => {
                let case = match case.decode(&*FLASH_PREFILL) {
                    Ok(case) => case,
                    Err(e) => {
                        let failed = Event::Failed {
                            message: e.to_string(),
                            fatal: false,
                        };
                        write_message(&mut out, &failed).expect("stdout");
                        continue;
                    }
                };
                let name = case.name.as_str();
                if name.starts_with("slow") {
                    std::thread::sleep(std::time::Duration::from_millis(500));
                }
                if name.contains("hang") {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
                if name.contains("timelimit") {
                    eprintln!("slurmstepd: error: *** STEP 4242.0 ON gpu17 CANCELLED AT 2026-11-30T12:00:00 DUE TO TIME LIMIT ***");
                    std::process::exit(143);
                }
                if name.contains("signal") {
                    eprintln!("stand-in worker: simulated fatal signal");
                    std::process::abort();
                }
                if name.contains("crash") {
                    eprintln!("stand-in worker: simulated abrupt exit");
                    std::process::exit(101);
                }
                if name.contains("garbage") {
                    let _ = writeln!(out, "this is not a protocol message");
                    let _ = out.flush();
                    continue;
                }
                let quick = loaded.as_deref() == Some(QUICK_IMAGE);
                let status = match (&loaded, name) {
                    (None, _) => CaseStatus::NotRun,
                    (Some(_), name) if name.contains("sticky") => CaseStatus::Crash,
                    (Some(_), "flaky-build") if !quick => CaseStatus::Fail,
                    (Some(_), _) => CaseStatus::Pass,
                };
                let said = match &loaded {
                    None => "no kernel loaded",
                    Some(_) if quick => "stand-in, quick image",
                    Some(_) => "stand-in, optimized image",
                };
                Event::Case(CaseOutcome::unmeasured(
                    &case.name,
                    &case.summary,
                    FLASH_PREFILL.problem(&case).expect("a generated case"),
                    status,
                    said.to_owned(),
                ))
            }
            Request::Time { seed, config, .. } if timing_kind.is_some() => Event::Timing(
                cpu_timing(timing_kind.as_deref().unwrap_or_default(), seed, config),
            ),
            Request::Lines { kernel, steps, .. }
                if loaded.as_ref().is_some_and(|i| i.starts_with(b"\x7fELF")) =>
            {
                if !steps.samples() {
                    // Counting after sampling is the real worker's order.
                    slow_for("FLASHPROF_STAND_IN_SLOW_COUNTS_MS");
                    let student = loaded.clone().unwrap_or_default();
                    Event::Lines(Ok(recorded_lines(student, kernel, steps)))
                } else if std::mem::replace(&mut sampled, true) {
                    Event::Lines(Err(format!(
                        "stand-in: this worker sampled before; the {kernel:?} profile has no \
                         instruction (the H100's second sampling in one worker)"
                    )))
                } else {
                    // A slow profile, for a newer save to stop.
                    slow_for("FLASHPROF_STAND_IN_SLOW_LINES_MS");
                    let student = loaded.clone().unwrap_or_default();
                    Event::Lines(Ok(recorded_lines(student, kernel, steps)))
                }
            }
            Request::PrepareLines { .. } => Event::LinesPrepared,
            Request::ChooseLab { .. } => Event::LabChosen,
            Request::ReleaseCounters => {
                // Marked, so a test can see the check's worker was asked.
                if let Some(marks) = std::env::var_os("FLASHPROF_STAND_IN_MARKS") {
                    let mark = std::path::Path::new(&marks).join("released");
                    std::fs::write(mark, std::process::id().to_string()).expect("mark");
                }
                Event::CountersReleased
            }
            Request::Time { .. } | Request::Counters { .. } | Request::Lines { .. } => {
                Event::Failed {
                    message: "the stand-in worker does not time or profile".into(),
                    fatal: false,
                }
            }
        };
        let sticky = matches!(&event, Event::Case(c) if c.status == CaseStatus::Crash);
        write_message(&mut out, &event).expect("stdout");
        if sticky {
            std::process::exit(0);
        }
    }
}

/// Sleeps as many milliseconds as `variable` says, if it is set.
fn slow_for(variable: &str) {
    if let Some(ms) = std::env::var(variable).ok().and_then(|ms| ms.parse().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// `text` built for real (flash-prefill, for the H100's architecture) as
/// the caller's path names it, so its line table names the caller's file.
fn built_for_real(path: &str, text: &str) -> Vec<u8> {
    let source = StudentSource::from_bytes(path, text.as_bytes(), FLASH_PREFILL)
        .expect("a stand-in-lines text is a valid source");
    compile(&source, &CompileOptions::default())
        .expect("a stand-in-lines text compiles")
        .image
}

/// The recorded samples and counts (those `steps` asks for) of a line
/// profile of `kernel`: the student's loaded image, or the starter built
/// here and sent back.
fn recorded_lines(student: Vec<u8>, kernel: ProfiledKernel, steps: LineSteps) -> LinesOutcome {
    let (image, starter_image) = match kernel {
        ProfiledKernel::Student => (student, Vec::new()),
        ProfiledKernel::Starter => {
            let starter = FLASH_PREFILL.starter();
            let image = built_for_real(starter.path, starter.text);
            (image.clone(), image)
        }
    };
    let function = FLASH_PREFILL.abi().entry_point;
    let bytes = LineTable::from_cubin(&image)
        .expect("a real cubin")
        .functions()
        .find(|(name, _)| *name == function)
        .map_or(0, |(_, bytes)| bytes);
    let readings = LINE_SAMPLES
        .iter()
        .zip((0..bytes).step_by(SASS_INSTRUCTION_BYTES as usize))
        .map(|(&samples, offset)| InstructionReading {
            offset,
            stalls: match steps.samples() {
                true => vec![(
                    "smsp__pcsamp_warps_issue_stalled_long_scoreboard".into(),
                    samples,
                )],
                false => Vec::new(),
            },
            counts: InstructionCounts {
                executed: if steps.counts() { 1024 } else { 0 },
                ..InstructionCounts::default()
            },
        })
        .collect();
    LinesOutcome {
        chip: "stand-in".into(),
        function: function.into(),
        readings,
        total_samples: match steps.samples() {
            true => LINE_SAMPLES.iter().sum(),
            false => 0,
        },
        dropped_samples: 0,
        period_log2: 10,
        plain_launch_ms: 0.0,
        sample_ms: 0.0,
        count_ms: 0.0,
        setup_ms: 0.0,
        worker_ms: 0.0,
        refused: None,
        starter_image,
    }
}

/// A case of the `toy-kinds` lab, launched twice on the CPU on the
/// arguments as the GPU would get them, and graded.
fn kinds_case(case: &flashprof::lab::definition::LabCase, seed: u64) -> CaseOutcome {
    let lab = toy_kinds::KINDS;
    let data = lab.generate(case, seed).expect("a toy-kinds case");
    let flaw = toy_kinds::Flaw::of(&case.name);
    let uploaded = toy_kinds::laid_out(&*lab, &data, POISON_BITS);
    let mut outputs = Vec::new();
    for _ in 0..2 {
        // What `Gpu::poison_output` does before every launch: the output
        // poisoned again, the scratch reset.
        let mut launch = uploaded.clone();
        toy_kinds::cpu_kernel(&mut launch, flaw);
        outputs.push(toy_kinds::output(&launch));
    }
    let reference = lab.oracle(&data, None);
    let comparison = compare(
        data.problem.output,
        lab.tolerance(),
        &outputs[0],
        &reference,
    );
    let runs_differ = outputs[0]
        .iter()
        .zip(&outputs[1])
        .any(|(a, b)| a.to_bits() != b.to_bits());
    let integrity = flashprof::grade::integrity::Integrity {
        runs_differ,
        ..Default::default()
    };
    let diagnosis = lab.diagnose(
        &data,
        &flashprof::lab::definition::Graded {
            launch: &lab.default_geometry(),
            out: &outputs[0],
            reference: &reference,
            comparison: &comparison,
            integrity: &integrity,
            experiments: &Default::default(),
        },
    );
    let status = match comparison.passed && integrity.is_clean() {
        true => CaseStatus::Pass,
        false => CaseStatus::Fail,
    };
    CaseOutcome {
        comparison: Some(comparison),
        integrity: Some(integrity),
        ..CaseOutcome::unmeasured(
            &case.name,
            &case.summary,
            data.problem.clone(),
            status,
            diagnosis.line,
        )
    }
}

/// A timing of CPU-computed launches on a small shape, audited for real.
fn cpu_timing(kind: &str, seed: u64, config: TimingConfig) -> TimingOutcome {
    let lab = FLASH_PREFILL;
    let case = lab
        .timing_case(&[("chunk".into(), "24".into()), ("prefix".into(), "8".into())])
        .expect("a small timing shape");
    // Launch k's inputs: the case drawn from seed + k (0 is the checked launch).
    let inputs = |k: u64| lab.generate(&case, seed + k).expect("generated");
    let honest = |data: &CaseData| -> Vec<f32> {
        lab.oracle(data, None).iter().map(|&x| x as f32).collect()
    };
    let checked = inputs(0);
    let problem = checked.problem.clone();
    let reference = lab.oracle(&checked, None);
    let first_output = honest(&checked);
    let output_check = compare(problem.output, lab.tolerance(), &first_output, &reference);
    let mut audit = LaunchAudit::new(problem.output, lab.tolerance());
    let first = LaunchId {
        phase: LaunchPhase::Checked,
        number: 1,
        of: 1,
    };
    audit.remember(first, &first_output);
    let checked_shares = ClassShares::of(
        &row_shares(problem.output, lab.tolerance(), &first_output, &reference),
        |_| None,
    );
    let mut rows = ChaCha8Rng::seed_from_u64(seed);
    let mut previous = first_output.clone();
    let mut finding = None;
    let launches = config.repetitions as usize;
    // Every launch "takes" about 10 ms of starter, 3% either way, and 5 ms
    // of student (a vanishing time for the too-fast kind): a 2x speedup
    // whose interval never comes within 1% but clears a gate far from it.
    // Pairs stop as the real rule says.
    let wobble = [1.0, 1.03, 0.97, 1.02, 0.98, 1.03, 0.97];
    let (mut starter_ms, mut student_ms) = (Vec::new(), Vec::new());
    let mut stopped = None;
    for number in 1..=launches {
        let launch = LaunchId {
            phase: LaunchPhase::Timed,
            number,
            of: launches,
        };
        let data = inputs(number as u64);
        let mut output = match kind {
            // The first timed launch is honest, so the replay names a timed launch.
            "stale" if number > 1 => previous.clone(),
            "first-inputs" => first_output.clone(),
            _ => honest(&data),
        };
        if kind == "unwritten" && number == 3 {
            output[problem.output.index(5, 2, 0)] = f32::from_bits(POISON_BITS);
        }
        if kind == "less-exact" {
            // Exact when checked, then 40% of the allowance on every timed
            // launch: inside the tolerance, far from the checked launch.
            let exact = lab.oracle(&data, None);
            for (got, want) in output.iter_mut().zip(&exact) {
                *got = (want + 0.4 * lab.tolerance().allowed(*want)) as f32;
            }
        }
        previous = honest(&data);
        let verdict = audit
            .plan(launch, &output, &[], &mut rows)
            .and_then(|plan| {
                let rows_reference = lab.oracle(&data, Some(&plan.rows));
                let shares = audit.judge(launch, &output, plan, &rows_reference)?;
                // The worker's precision rule, on the same shares (no plants here).
                precision::judge(launch, &checked_shares, &ClassShares::of(&shares, |_| None))
            });
        if let Err(found) = verdict {
            finding.get_or_insert(found);
        }
        starter_ms.push(10.0 * wobble[(number - 1) % wobble.len()]);
        student_ms.push(if kind == "too-fast" { 1e-4 } else { 5.0 });
        stopped = config.stopping.stop(
            &starter_ms,
            &student_ms,
            config.repetitions,
            finding.is_some(),
            config.gate,
        );
        if stopped.is_some() {
            break;
        }
    }
    let floor = Floor::of(
        problem.work,
        Ceilings {
            dram_bytes_per_s: 5.4e12,
            tensor_flops_per_s: 2.1e15,
            empty_launch_ms: 0.005,
        },
        config.cold_l2,
    );
    let student = summarize(&student_ms).expect("samples");
    let impossible = floor.judge(student.median);
    let correct = finding.is_none() && impossible.is_none();
    TimingOutcome {
        shape: problem,
        config,
        student,
        starter: summarize(&starter_ms).expect("samples"),
        speedup: correct.then(|| speedup(&starter_ms, &student_ms).expect("paired")),
        output_check,
        reference_check: ReferenceCheck {
            rows_checked: 24,
            max_rel_diff: 0.0,
            agrees: true,
        },
        sm_clock_mhz: 1000.0,
        max_sm_clock_mhz: 1000.0,
        elapsed_ms: 1.0,
        rules: TIMING_RULES,
        finding,
        starter_finding: None,
        floor: Some(Box::new(floor)),
        impossible,
        audited_launches: student_ms.len(),
        phases: None,
        profile_refused: None,
        bandwidth: None,
        data: None,
        precision: None,
        drift: None,
        two_groups: None,
        stopped,
    }
}
