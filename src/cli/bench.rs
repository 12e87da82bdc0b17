//! `flashprof bench FILE`: how long the edit-compile-verify loop takes, phase
//! by phase, on this machine.
//!
//! A benchmark, not a test: it reports figures, it asserts nothing. One cold
//! check (a new worker, timing and counters included), then warm rounds the
//! way the TUI runs them after a save: the same worker, a freshly edited
//! source (a new build each round, so no cache can answer),
//! compile plus every hazard verdict; then a few such saves with counters
//! on, which is what a save costs in the TUI; last, a few with the line
//! profile on a line worker kept between them, as the TUI keeps it.

use std::fmt::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::refusal::Refusal;
use super::ExitCode;
use crate::app::check::{run_check, run_check_unless_stale, CheckPlan, LineWorker};
use crate::app::check::{CountersChoice, RunOptions};
use crate::display::path_for_display;
use crate::lab::source::{SourceForm, StudentSource};
use crate::outcome::CheckReport;
use crate::protocol::CounterTier;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The kernel to measure the loop with.
    pub file: PathBuf,
    #[command(flatten)]
    pub lab: super::LabArg,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
    /// Warm rounds (compile plus every hazard verdict on a live worker).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    #[command(flatten)]
    pub quick_build: super::QuickBuildArg,
    /// Write the figures as Markdown to this file as well.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

/// Saves measured with counters on after the verdict rounds: what a save
/// costs in the TUI once the starter's counters are known.
const COUNTER_ROUNDS: u32 = 3;

/// Saves measured with the line profile on, last: the first pays the line
/// worker's start and the starter's profile, the rest what a save adds.
const LINE_ROUNDS: u32 = 4;

/// The watchdog for one case of the bench's checks (twice a check's default).
const BENCH_CASE_TIMEOUT: Duration = Duration::from_secs(10);

/// The source of warm round `round`: a new build each time, since a
/// comment alone changes nothing NVRTC compiles (it answers from its cache)
/// and an unchanged image lets the worker reuse its counters.
fn edited_source(source: &StudentSource, round: u32) -> String {
    let text = source.text();
    match source.form() {
        // A new device variable changes the image and nothing the kernel does.
        SourceForm::TranslationUnit => {
            format!("{text}\n__device__ int flashprof_bench_round_{round};\n")
        }
        // A body has no file scope: a branch no launch can take (gridDim.x
        // never comes near 2^32) changes the image at the cost of one comparison.
        SourceForm::Body => {
            let out = source
                .lab()
                .abi()
                .args
                .iter()
                .find(|arg| arg.kind.is_output())
                .map_or("out", |arg| arg.name);
            format!(
                "{text}\nif (gridDim.x == 0u - {}u) {out}[0] = 0.0f;\n",
                round + 1
            )
        }
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn run(args: BenchArgs) -> Result<ExitCode, Refusal> {
    let lab = args.lab.for_file(&args.file)?;
    let source =
        StudentSource::from_path(&args.file, lab).map_err(|e| args.lab.refuse_source(e))?;
    let command = super::worker_command(&args.remote)?;
    // The cold check is a whole one, timing and counters included.
    // Four plans, one per kind of round: the cold check (timing and
    // counters), the warm saves (a quick build, no timing), the warm saves
    // with counters, and the saves as the TUI runs them (counters, lines).
    let cold_options = RunOptions {
        case_timeout: BENCH_CASE_TIMEOUT,
        counters: CountersChoice {
            on: true,
            ..CountersChoice::default()
        },
        ..RunOptions::default()
    };
    let warm_options = RunOptions {
        timing: None,
        quick_build: args.quick_build.choice.0,
        counters: CountersChoice::default(),
        ..cold_options.clone()
    };
    let counted_options = RunOptions {
        counters: cold_options.counters.clone(),
        ..warm_options.clone()
    };
    let profiled_options = RunOptions {
        lines: true,
        ..counted_options.clone()
    };
    let file = args.file.display().to_string();
    let plan = cold_options
        .plan(lab)?
        .of_source(file.clone(), source.text().to_string());
    let warm_plan = warm_options.plan(lab)?;
    let counted_plan = counted_options.plan(lab)?;
    let profiled_plan = profiled_options.plan(lab)?;
    // Each warm round is a save of its own: an edited text on fresh inputs.
    let save = |template: &CheckPlan, round: u32| {
        template
            .of_source(file.clone(), edited_source(&source, round))
            .for_run(u64::from(round))
    };

    let mut worker = None;
    eprintln!("cold check (new worker, timing and counters)...");
    let cold = run_check(&plan, &command, &mut worker, |_| {})
        .map_err(|e| Refusal::new(ExitCode::Environment, e.to_string()))?;
    if cold.gpu.is_err() {
        return Err(Refusal::new(ExitCode::NoGpu, "bench needs a GPU"));
    }

    let mut warm: Vec<CheckReport> = Vec::new();
    let mut warm_counters: Vec<CheckReport> = Vec::new();
    let total_rounds = args.rounds + COUNTER_ROUNDS;
    for round in 0..total_rounds {
        eprint!("\rwarm round {}/{total_rounds}", round + 1);
        let template = if round < args.rounds {
            &warm_plan
        } else {
            &counted_plan
        };
        let report =
            run_check(&save(template, round), &command, &mut worker, |_| {}).map_err(|e| {
                eprintln!();
                Refusal::new(ExitCode::Environment, e.to_string())
            })?;
        if !report.compile.ok {
            eprintln!();
            return Err(Refusal::new(
                ExitCode::BadSource,
                format!("the edited source of round {round} did not compile"),
            ));
        }
        if round < args.rounds {
            warm.push(report);
        } else {
            warm_counters.push(report);
        }
    }
    eprintln!();
    // As the TUI runs a save: counters, then lines (the check's worker
    // lets go of CUPTI's profiler before the line worker samples).
    let mut line_worker = LineWorker::for_saves();
    let mut profiled: Vec<CheckReport> = Vec::new();
    for round in 0..LINE_ROUNDS {
        eprint!("\rline profile round {}/{LINE_ROUNDS}", round + 1);
        let report = run_check_unless_stale(
            &save(&profiled_plan, total_rounds + round),
            &command,
            &mut worker,
            &mut line_worker,
            &|| false,
            |_| {},
        )
        .map_err(|e| {
            eprintln!();
            Refusal::new(ExitCode::Environment, e.to_string())
        })?;
        profiled.push(report);
    }
    eprintln!();
    line_worker.shutdown();
    if let Some(w) = worker {
        w.shutdown();
    }
    let mut text = render(&args, &cold, &warm);
    text.push_str(&render_warm_counters(&warm_counters));
    text.push_str(&render_line_rounds(&profiled));
    print!("{text}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, &text).map_err(|e| {
            Refusal::new(
                ExitCode::Environment,
                format!("cannot write {}: {e}", path_for_display(path)),
            )
        })?;
    }
    Ok(ExitCode::Pass)
}

fn render(args: &BenchArgs, cold: &CheckReport, warm: &[CheckReport]) -> String {
    let mut out = String::new();
    let device = cold
        .gpu
        .as_ref()
        .map(|g| g.name.clone())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "## Loop latency: `{}` on {device}\n",
        path_for_display(&args.file)
    );
    let _ = writeln!(
        out,
        "Cold `flashprof check` (new worker; compile, {} cases, timing, counters):\n",
        cold.cases.len()
    );
    let _ = writeln!(out, "| phase | ms |\n|---|---:|");
    let oracle: f64 = cold.cases.iter().map(|c| c.oracle_ms).sum();
    let counters: Vec<String> = cold
        .counters
        .iter()
        .map(|c| match c {
            Ok(o) => format!("{:?} {:.0} ms ({} passes)", o.tier, o.elapsed_ms, o.passes),
            Err(e) => format!("unavailable: {}", e.reason),
        })
        .collect();
    let phases = &cold.phases;
    for (name, ms) in [
        ("worker start (process + CUDA init)", phases.worker_start_ms),
        ("compile + load (NVRTC, cubin)", phases.compile_ms),
        ("all hazard cases", phases.cases_ms),
        ("  of which CPU oracle (overlaps GPU)", oracle),
        ("timing against the starter", phases.timing_ms),
        ("counters, both tiers", phases.counters_ms),
        ("total", phases.total_ms),
    ] {
        let _ = writeln!(out, "| {name} | {ms:.1} |");
    }
    let _ = writeln!(out, "\nCounters: {}", counters.join("; "));
    if let Some(t) = &cold.timing {
        let _ = writeln!(
            out,
            "Timing: student {:.3} ms, starter {:.3} ms, speedup {}",
            t.student.median,
            t.starter.median,
            t.speedup
                .as_ref()
                .map(|s| format!("{:.2}x", s.point))
                .unwrap_or("withheld".into())
        );
    }
    let phase = |of: fn(&CheckReport) -> f64| warm.iter().map(of).collect::<Vec<f64>>();
    let mut rows: Vec<(&str, Vec<f64>)> = Vec::new();
    let quick = warm
        .first()
        .and_then(|r| r.quick_build.as_ref())
        .map(|q| q.build);
    match quick {
        None => {
            let _ = writeln!(
                out,
                "\nWarm rounds (live worker, edited source each round, compile + every hazard verdict), {} rounds:\n",
                warm.len()
            );
            rows.push(("compile + load", phase(|r| r.phases.compile_ms)));
            rows.push(("all hazard cases", phase(|r| r.phases.cases_ms)));
            rows.push(("request to last verdict", phase(|r| r.phases.total_ms)));
        }
        Some(quick) => {
            let _ = writeln!(
                out,
                "\nWarm rounds (live worker, edited source each round), {} rounds, verdicts first from the quick build `{}` ({}) while the optimized build compiles beside it:\n",
                warm.len(),
                quick.name(),
                quick.flag()
            );
            let quick_of =
                |r: &CheckReport| r.quick_build.as_ref().map_or(f64::NAN, |q| q.compile_ms);
            let first_of = |r: &CheckReport| {
                r.quick_build
                    .as_ref()
                    .and_then(|q| q.first_verdict_ms)
                    .unwrap_or(f64::NAN)
            };
            let last_of = |r: &CheckReport| {
                r.quick_build
                    .as_ref()
                    .and_then(|q| q.last_verdict_ms)
                    .unwrap_or(f64::NAN)
            };
            let ran_of = |r: &CheckReport| r.quick_build.as_ref().map_or(0.0, |q| q.ran as f64);
            rows.push(("quick build (NVRTC)", phase(quick_of)));
            rows.push(("request to first provisional verdict", phase(first_of)));
            rows.push(("request to last provisional verdict", phase(last_of)));
            rows.push(("cases given a provisional verdict (count)", phase(ran_of)));
            rows.push((
                "optimized build (NVRTC, beside the worker)",
                phase(|r| r.compile.compile_ms),
            ));
            rows.push((
                "request to optimized build loaded",
                phase(|r| r.phases.compile_ms),
            ));
            rows.push((
                "hazard cases on the optimized build",
                phase(|r| r.phases.cases_ms),
            ));
            rows.push(("request to final verdict", phase(|r| r.phases.total_ms)));
            rows.push((
                "final verdict after the optimized build's NVRTC time",
                phase(|r| r.phases.total_ms - r.compile.compile_ms),
            ));
        }
    }
    let max = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    let _ = writeln!(out, "| phase | median ms | max ms |\n|---|---:|---:|");
    for (name, mut values) in rows {
        let worst = max(&values);
        let _ = writeln!(out, "| {name} | {:.1} | {worst:.1} |", median(&mut values));
    }
    let differing: Vec<String> = warm
        .iter()
        .filter_map(|r| r.quick_build.as_ref())
        .flat_map(|q| q.differences.iter().map(|d| d.describe()))
        .collect();
    if quick.is_some() {
        let _ = writeln!(
            out,
            "\nQuick and optimized builds disagreed on {} case verdict(s){}",
            differing.len(),
            differing
                .first()
                .map(|d| format!(", e.g. {d}"))
                .unwrap_or_default()
        );
    }
    let passed = warm.iter().all(|r| {
        r.cases
            .iter()
            .all(|c| c.status == crate::protocol::CaseStatus::Pass)
    });
    let _ = writeln!(
        out,
        "\nEvery warm round graded every case: {}",
        if passed { "all passed" } else { "some failed" }
    );
    out
}

/// The line profile per save on a kept line worker: the first save apart
/// (the worker's start, CUPTI's setup, the starter's profile), then what
/// each later save adds, and the profile's own launches within it.
fn render_line_rounds(rounds: &[CheckReport]) -> String {
    let mut out = String::new();
    let Some((first, later)) = rounds.split_first() else {
        return out;
    };
    let why_not = rounds.iter().find_map(|r| match &r.lines {
        Some(Ok(_)) => None,
        Some(Err(why)) => Some(why.clone()),
        None => Some("not profiled".into()),
    });
    if let Some(why) = why_not {
        let _ = writeln!(out, "\nLine profile on a save: {why}");
        return out;
    }
    let _ = writeln!(
        out,
        "\nLine profile per save on a kept line worker (as the TUI keeps it), {} saves after the first:\n",
        later.len()
    );
    let _ = writeln!(
        out,
        "| | first save ms | later saves, median ms | max ms |\n|---|---:|---:|---:|"
    );
    let profile_rows: [(&str, ProfileFigure); 7] = [
        ("  waiting for the line worker started ahead", |p| {
            p.waited_ms
        }),
        ("  the line worker's request", |p| p.worker_ms),
        ("    CUPTI's line APIs set up", |p| p.setup_ms),
        ("    the profile's three launches", |p| p.collect_ms),
        ("      the sampled launch (PC Sampling)", |p| p.sampled_ms),
        ("      the counted launch (SASS Metrics)", |p| p.counted_ms),
        ("  charging the samples to lines", |p| p.charge_ms),
    ];
    let phase: Figure = |r| r.phases.lines_ms;
    let mut row = |name: &str, of: &dyn Fn(&CheckReport) -> f64| {
        let mut values: Vec<f64> = later.iter().map(of).collect();
        let worst = values.iter().cloned().fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "| {name} | {:.1} | {:.1} | {worst:.1} |",
            of(first),
            median(&mut values)
        );
    };
    row("added to the save (the lines phase)", &phase);
    row("  until the samples are shown (the heat)", &|r| {
        profile_of(r).map_or(f64::NAN, |p| p.heat_ms)
    });
    for (name, of) in profile_rows {
        row(name, &|r| profile_of(r).map_or(f64::NAN, of));
    }
    out
}

/// One figure read off a check's report.
type Figure = fn(&CheckReport) -> f64;

/// One figure read off a check's line profile.
type ProfileFigure = fn(&crate::grade::lines::LineProfile) -> f64;

fn profile_of(report: &CheckReport) -> Option<&crate::grade::lines::LineProfile> {
    report.lines.as_ref()?.as_ref().ok()
}

/// Counters per save on a live worker, tier by tier, and whether the starter's
/// values were reused as the worker intends.
fn render_warm_counters(rounds: &[CheckReport]) -> String {
    let mut out = String::new();
    /// Per tier: the times, whether the student's and the starter's values
    /// were reused in every round, and how many values CUPTI left NaN.
    struct Tier {
        tier: CounterTier,
        ms: Vec<f64>,
        student_reused: bool,
        starter_reused: bool,
        not_finite: usize,
    }
    let mut tiers: Vec<Tier> = Vec::new();
    for outcome in rounds.iter().flat_map(|r| &r.counters) {
        let Ok(outcome) = outcome else {
            let _ = writeln!(out, "\nCounters on a save: unavailable");
            return out;
        };
        let not_finite = [&outcome.student, &outcome.starter]
            .iter()
            .flat_map(|k| &k.metrics)
            .filter(|m| !m.value.is_finite())
            .count();
        match tiers.iter_mut().find(|t| t.tier == outcome.tier) {
            Some(t) => {
                t.ms.push(outcome.elapsed_ms);
                t.student_reused &= outcome.student.reused;
                t.starter_reused &= outcome.starter.reused;
                t.not_finite += not_finite;
            }
            None => tiers.push(Tier {
                tier: outcome.tier,
                ms: vec![outcome.elapsed_ms],
                student_reused: outcome.student.reused,
                starter_reused: outcome.starter.reused,
                not_finite,
            }),
        }
    }
    let mut totals: Vec<f64> = rounds.iter().map(|r| r.phases.counters_ms).collect();
    if totals.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\nCounters on a save (live worker, edited source, {} rounds):\n",
        rounds.len()
    );
    let _ = writeln!(
        out,
        "| tier | median ms | student reused | starter reused | values not finite |\n|---|---:|---|---|---:|"
    );
    for t in &mut tiers {
        let _ = writeln!(
            out,
            "| {:?} | {:.1} | {} | {} | {} |",
            t.tier,
            median(&mut t.ms),
            t.student_reused,
            t.starter_reused,
            t.not_finite
        );
    }
    let _ = writeln!(out, "| both tiers | {:.1} | | | |", median(&mut totals));
    out
}

#[cfg(test)]
mod tests {
    use super::edited_source;
    use crate::gpu::compile::{compile, CompileOptions};
    use crate::lab::flash_prefill::FLASH_PREFILL;
    use crate::lab::source::{SourceForm, StudentSource};

    /// Every round must compile, in both source forms, to an image of its
    /// own: otherwise the bench would time caches, not compiles.
    #[test]
    fn each_round_is_a_new_build_in_both_source_forms() {
        for (path, text, form) in [
            (
                "kernels/flash-prefill/starter.cu",
                include_str!("../../kernels/flash-prefill/starter.cu"),
                SourceForm::Body,
            ),
            (
                "kernels/flash-prefill/reference.cu",
                include_str!("../../kernels/flash-prefill/reference.cu"),
                SourceForm::TranslationUnit,
            ),
        ] {
            let source = StudentSource::from_bytes(path, text.as_bytes(), FLASH_PREFILL)
                .expect("shipped source");
            assert_eq!(source.form(), form, "{path}");
            let mut images = Vec::new();
            for round in 0..2 {
                let edited = edited_source(&source, round);
                let edited = StudentSource::from_bytes(path, edited.as_bytes(), FLASH_PREFILL)
                    .expect("edited");
                match compile(&edited, &CompileOptions::default()) {
                    Err(e) => panic!("{path} round {round} did not compile: {e}"),
                    Ok(compiled) => images.push(compiled.image),
                }
            }
            assert_ne!(
                images[0], images[1],
                "{path}: both rounds built the same image"
            );
        }
    }
}
