//! The human-readable report: one line per case, then timing and a verdict.
//!
//! Plain text with fixed columns, so it reads the same in a terminal, a CI
//! log or an email to a TA.

use std::fmt::Write;

use crate::facts::diagnostics::Severity;
use crate::facts::metrics::finite_value;
use crate::grade::lines::{reason_shown, LineKey, LineProfile};
use crate::grade::stopping::Stopped;
use crate::outcome::CheckReport;
use crate::protocol::{CaseOutcome, CaseStatus, CompileOutcome, CompileProblemKind};

fn status_word(status: CaseStatus) -> &'static str {
    match status {
        CaseStatus::Pass => "PASS",
        CaseStatus::Fail => "FAIL",
        CaseStatus::Timeout => "TIMEOUT",
        CaseStatus::Crash => "CRASH",
        CaseStatus::NotRun => "not run",
    }
}

/// Worst error as a share of its tolerance: "12%" means 88% headroom left.
fn headroom(case: &CaseOutcome) -> String {
    match &case.comparison {
        Some(c) if c.worst_ratio.is_finite() => format!("{:.1}%", c.worst_ratio * 100.0),
        Some(_) => "inf".into(),
        None => "-".into(),
    }
}

fn max_error(case: &CaseOutcome) -> String {
    match &case.comparison {
        Some(c) if c.max_abs_err.is_finite() => format!("{:.2e}", c.max_abs_err),
        Some(_) => "non-finite".into(),
        None => "-".into(),
    }
}

fn location(case: &CaseOutcome) -> String {
    match case.comparison.as_ref().and_then(|c| c.worst.as_ref()) {
        Some(w) => format!("r{} h{} d{}", w.row, w.head, w.dim),
        None => "-".into(),
    }
}

fn counts(case: &CaseOutcome) -> String {
    match &case.comparison {
        Some(c) => format!("{}/{}/{}/{}", c.failing, c.unwritten, c.nan, c.inf),
        None => "-".into(),
    }
}

/// Renders the whole report as text; a graded report ends on `reproduce`,
/// the command line that reruns it (the caller knows its options; `None`
/// leaves the line out).
pub fn render_table(report: &CheckReport, reproduce: Option<&str>) -> String {
    // Source lines, file names and compiler text come from the student:
    // no control character of theirs reaches the terminal.
    crate::display::for_display(&render_raw_table(report, reproduce)).into_owned()
}

fn render_raw_table(report: &CheckReport, reproduce: Option<&str>) -> String {
    let mut out = String::new();
    // A seed only matters to a file that built: its cases ran from it.
    let _ = match report.compile.ok {
        true => writeln!(
            out,
            "flashprof check {}  (seed {})",
            report.source_path, report.seed
        ),
        false => writeln!(out, "flashprof check {}", report.source_path),
    };
    match &report.gpu {
        Ok(gpu) => {
            let _ = writeln!(
                out,
                "GPU: {} ({}, {} SMs)",
                gpu.name,
                gpu.arch(),
                gpu.sm_count
            );
        }
        Err(problem) => {
            let _ = writeln!(out, "GPU: {}", problem.describe());
        }
    }
    render_compile(&mut out, &report.compile);
    let all_not_run = report.cases.iter().all(|c| c.status == CaseStatus::NotRun);
    if let (true, Some(first)) = (all_not_run, report.cases.first()) {
        let names: Vec<&str> = report.cases.iter().map(|c| c.name.as_str()).collect();
        let _ = writeln!(
            out,
            "\n{} cases {}: {}",
            names.len(),
            first.diagnosis,
            names.join(", ")
        );
    } else if !report.cases.is_empty() {
        let name_width = report
            .cases
            .iter()
            .map(|c| c.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(
            out,
            "\n{:<name_width$}  {:>9}  {:<7}  {:>10}  {:>8}  {:<15}  {:<13}  diagnosis",
            "case", "C x P", "result", "max err", "of tol", "worst at", "fail/unw/nan/inf"
        );
        for case in &report.cases {
            let shape = case.shape.label.clone();
            let _ = writeln!(
                out,
                "{:<name_width$}  {:>9}  {:<7}  {:>10}  {:>8}  {:<15}  {:<16}  {}",
                case.name,
                shape,
                status_word(case.status),
                max_error(case),
                headroom(case),
                location(case),
                counts(case),
                case.diagnosis
            );
        }
    }
    render_timing(&mut out, report);
    render_counters(&mut out, report);
    render_lines(&mut out, report);
    render_sanitizer(&mut out, report);
    let passed = report.cases_passed();
    let nothing_ran = report.cases.iter().all(|c| c.status == CaseStatus::NotRun);
    let environment = report.compile.problem.as_ref().and_then(|p| match p.kind {
        CompileProblemKind::CompilerMissing => Some("NVRTC missing"),
        CompileProblemKind::HeadersMissing => Some("CUDA headers missing"),
        CompileProblemKind::CompilerFailed => Some("the compiler failed"),
        CompileProblemKind::BadSource | CompileProblemKind::OverLimit => None,
    });
    if nothing_ran && (report.compile.ok || environment.is_some()) {
        // Nothing graded: no FAIL for a kernel that never ran, and nothing
        // to reproduce. This line stays the table's last.
        let why = match environment {
            Some(why) => why,
            None if report.gpu.is_err() => "no GPU",
            None => "nothing ran",
        };
        let done = if report.compile.ok {
            "compiled"
        } else {
            "not compiled"
        };
        let _ = writeln!(
            out,
            "\nNOT GRADED ({why}): {done}; {} cases not run",
            report.cases.len()
        );
        return out;
    }
    if !report.compile.ok {
        // Nothing ran because nothing was built: no FAIL count, only what
        // stopped the build (and the command that shows it again).
        let errors = report
            .compile
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
        let what = match errors {
            0 => "the file was refused before compiling".to_owned(),
            1 => "1 error".to_owned(),
            n => format!("{n} errors"),
        };
        let _ = writeln!(out, "\nCOMPILE ERROR: {what}");
        if let Some(command) = reproduce {
            let _ = writeln!(out, "reproduce with: {command}");
        }
        return out;
    }
    let _ = writeln!(
        out,
        "\n{}: {passed}/{} cases passed{}{}",
        if report.all_passed() { "PASS" } else { "FAIL" },
        report.cases.len(),
        match &report.sanitizer {
            Some(s) if s.has_hazards() => format!(
                ", sanitizer found {} hazard report(s)",
                s.findings().count()
            ),
            Some(s) if s.incomplete() => ", sanitizer did not finish".to_owned(),
            Some(_) => ", sanitizer clean".to_owned(),
            None => String::new(),
        },
        if report.worker_restarts > 0 {
            format!(
                " ({} worker restarts after hangs or faults)",
                report.worker_restarts
            )
        } else {
            String::new()
        }
    );
    if let (false, Some(line)) = (report.all_passed(), failing_cases_line(report)) {
        let _ = writeln!(out, "diagnosis: {line}");
    }
    if let Some(command) = reproduce {
        let _ = writeln!(out, "reproduce with: {command}");
    }
    out
}

/// The most lines the table lists of a line profile (`--json` has them all),
/// and of the starter's beside it.
const LINES_SHOWN: usize = 8;
const STARTER_LINES_SHOWN: usize = 3;

/// The line profile's hottest lines: share of the stall samples, the main
/// reason in words and CUPTI's name, the memory findings, the source; then
/// the starter's hottest on the same inputs.
fn render_lines(out: &mut String, report: &CheckReport) {
    let Some(lines) = &report.lines else {
        return;
    };
    let profile = match lines {
        Ok(profile) => profile,
        Err(why) => {
            let _ = writeln!(out, "\nlines: not profiled: {why}");
            return;
        }
    };
    let _ = writeln!(
        out,
        "\nlines: {} stall samples on {} (every 2^{} cycles, {} dropped), {:.0} ms; the hottest {}:",
        profile.total_samples,
        profile.chip,
        profile.period_log2,
        profile.dropped_samples,
        profile.collect_ms,
        LINES_SHOWN.min(profile.lines.len())
    );
    render_line_rows(out, profile, LINES_SHOWN);
    match &profile.starter {
        None => {}
        Some(Err(why)) => {
            let _ = writeln!(out, "the starter: not profiled: {why}");
        }
        Some(Ok(starter)) => {
            let _ = writeln!(
                out,
                "the starter on the same inputs, {} samples; its hottest {}:",
                starter.total_samples,
                STARTER_LINES_SHOWN.min(starter.lines.len())
            );
            render_line_rows(out, starter, STARTER_LINES_SHOWN);
        }
    }
}

fn render_line_rows(out: &mut String, profile: &LineProfile, count: usize) {
    for row in profile.lines.iter().take(count) {
        let line = match row.line {
            LineKey::Student(n) => format!("{n:>5}"),
            LineKey::Own => "  own".to_owned(),
        };
        let reason = row.main_reason().map(reason_shown).unwrap_or_default();
        let _ = writeln!(
            out,
            "{line}  {:>5.1}%  {reason:<48}  {}",
            row.share * 100.0,
            row.source
        );
        for finding in row.findings() {
            let _ = writeln!(out, "                {finding}");
        }
    }
}

/// The check's one line (docs/DIAGNOSIS.md) when some case did not pass.
fn failing_cases_line(report: &CheckReport) -> Option<String> {
    report
        .cases
        .iter()
        .any(|c| !matches!(c.status, CaseStatus::Pass | CaseStatus::NotRun))
        .then(|| report.diagnosis_line())
        .flatten()
}

pub(crate) fn render_compile(out: &mut String, compile: &CompileOutcome) {
    if let Some(problem) = &compile.problem {
        let _ = writeln!(out, "\nerror: {}", problem.message);
    }
    for d in &compile.diagnostics {
        let _ = writeln!(out, "\n{d}");
    }
    if compile.ok {
        let _ = write!(out, "compiled in {:.0} ms", compile.compile_ms);
        if let Some(load) = compile.load_ms {
            let _ = write!(out, ", loaded in {load:.1} ms");
        }
        if let Some(r) = &compile.resources {
            let _ = write!(
                out,
                "; {} registers, {} B static smem, {} B spills",
                r.registers,
                r.static_smem_bytes,
                r.spill_bytes()
            );
            if r.max_threads_per_block != 0 {
                let _ = write!(out, ", at most {} threads/block", r.max_threads_per_block);
            }
        }
        if let Some(o) = &compile.occupancy {
            let _ = write!(
                out,
                ", occupancy {:.0}% ({} blocks/SM, limited by {})",
                o.fraction * 100.0,
                o.blocks_per_sm,
                o.limiter
            );
        }
        if let Some(g) = &compile.geometry {
            let _ = write!(out, "; launch {g}");
        }
        let _ = writeln!(out);
        if let Some(problem) = oversized_block(compile) {
            let _ = writeln!(out, "error: {problem}");
        }
        // Facts for whoever grades, not failures: the verdict ignores them.
        if let Some(facts) = compile.kernel_facts.summary() {
            let _ = writeln!(out, "integrity note: {facts}");
        }
    }
}

/// Why the declared block cannot launch, when it is larger than the kernel allows.
fn oversized_block(compile: &CompileOutcome) -> Option<String> {
    let (usage, geometry) = (compile.resources.as_ref()?, compile.geometry.as_ref()?);
    usage.rejects_block_of(geometry.threads).then(|| {
        format!(
            "the launch declares {} threads per block, but this kernel allows at most {} \
             (its registers or __launch_bounds__ decide that); every launch would fail with \
             CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
            geometry.threads, usage.max_threads_per_block
        )
    })
}

/// The sanitizer pass: one line per tool, and each hazard's diagnosis.
fn render_sanitizer(out: &mut String, report: &CheckReport) {
    let Some(pass) = &report.sanitizer else {
        return;
    };
    let _ = writeln!(
        out,
        "\ncompute-sanitizer on case {} ({:.1} s, tools side by side)",
        pass.case,
        pass.wall_ms / 1000.0
    );
    for line in pass.lines() {
        let _ = writeln!(out, "{line}");
    }
}

fn render_counters(out: &mut String, report: &CheckReport) {
    let Some(last) = report.counters.last() else {
        return;
    };
    let outcome = match last {
        Ok(o) => o,
        Err(unavailable) => {
            let _ = writeln!(
                out,
                "\ncounters: unavailable ({}): {}\n  fix: {}",
                unavailable.reason, unavailable.detail, unavailable.fix
            );
            return;
        }
    };
    let _ = writeln!(
        out,
        "\nhardware counters ({} set, {} replay passes on {}):",
        outcome.tier, outcome.passes, outcome.chip
    );
    if let Some(peaks) = &outcome.peaks {
        let _ = writeln!(out, "  roofs    {}", peaks.summary());
    }
    for (label, kernel) in [("student", &outcome.student), ("starter", &outcome.starter)] {
        let value = |name: &str| finite_value(&kernel.metrics, name);
        let Some(roofline) = &kernel.roofline else {
            let _ = writeln!(
                out,
                "  {label:<8} {}",
                kernel.error.as_deref().unwrap_or("no values")
            );
            continue;
        };
        let sm = value(crate::facts::metrics::SM_THROUGHPUT_PCT)
            .map(|v| format!("SM throughput {v:.1}%, "))
            .unwrap_or_default();
        let tensor = roofline
            .tensor_share()
            .map(|(roof, pct)| format!(", {pct:.1}% of {roof} tensor peak"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {label:<8} {sm}{:.1} flop/B, {:.0} GFLOP/s ({:.1}% of fp32 peak{tensor})",
            roofline.arithmetic_intensity, roofline.achieved_gflops, roofline.fp32_peak_pct,
        );
        if let Some(dram) = &roofline.dram {
            let _ = writeln!(
                out,
                "           DRAM {} (output lines still in L2 at the end are not counted)",
                dram.summary()
            );
        }
        let _ = writeln!(out, "           units: {}", roofline.units_summary());
        let _ = writeln!(
            out,
            "           {}: {}\n           next: {}",
            roofline.verdict.bound.word(),
            roofline.verdict.reason,
            roofline.verdict.next_step
        );
    }
}

fn render_timing(out: &mut String, report: &CheckReport) {
    if let Some(error) = &report.timing_error {
        let _ = writeln!(out, "\ntiming: {error}");
    }
    let Some(t) = &report.timing else {
        return;
    };
    let ended = match (t.stopped, t.config.gate) {
        (Some(Stopped::ClearOfGate), Some(gate)) => {
            format!(", ended as the interval cleared the {gate}x gate")
        }
        (Some(stopped), _) => format!(", ended as {}", stopped.phrase()),
        (None, _) => String::new(),
    };
    let _ = writeln!(
        out,
        "\ntiming at {} ({} interleaved runs each of at most {}, {}{ended}; L2 {}):",
        t.shape.detail,
        t.student.n,
        t.config.repetitions,
        t.config.stopping.name(),
        if t.config.cold_l2 {
            "flushed"
        } else {
            "warm, inputs warm from their generator"
        }
    );
    // A lab graded on bytes reads achieved bandwidth first.
    if let Some(bandwidth) = &t.bandwidth {
        let _ = writeln!(out, "  BANDWIDTH {}", bandwidth.line());
    }
    for (label, s) in [("student", &t.student), ("starter", &t.starter)] {
        let _ = writeln!(
            out,
            "  {label:<8} median {:>9.3} ms   (p10 {:.3}, p90 {:.3}, n = {})",
            s.median, s.p10, s.p90, s.n
        );
    }
    match &t.speedup {
        Some(s) => {
            let _ = writeln!(
                out,
                "  SPEEDUP  {:.2}x   (95% CI {:.2}x .. {:.2}x){}",
                s.point,
                s.ci_low,
                s.ci_high,
                if s.noisy {
                    "  NOISY: rerun on a quieter GPU"
                } else {
                    ""
                }
            );
        }
        None => {
            let reason = t.withheld().unwrap_or_default();
            let _ = writeln!(out, "  SPEEDUP  withheld: {reason}");
        }
    }
    render_timing_integrity(out, t);
    let _ = writeln!(
        out,
        "  SM clock {:.0} MHz during the run (max {:.0} MHz); GPU float64 reference matched the CPU oracle on {} rows (max rel diff {:.1e})",
        t.sm_clock_mhz, t.max_sm_clock_mhz, t.reference_check.rows_checked, t.reference_check.max_rel_diff
    );
}

/// How the timing was kept honest: the audits and the physical floor.
fn render_timing_integrity(out: &mut String, t: &crate::protocol::TimingOutcome) {
    if t.rules < crate::protocol::TIMING_RULES {
        let _ = writeln!(
            out,
            "  timed under earlier rules (v{}): timed launches were not audited",
            t.rules
        );
        return;
    }
    let _ = writeln!(
        out,
        "  audit    {} launches on fresh inputs, each with a poisoned output and checked after it ran",
        t.audited_launches
    );
    if let Some(data) = &t.data {
        let planted = match data.planted.is_empty() {
            true => "no plants".to_owned(),
            false => format!(
                "planted {} rows moved every launch",
                data.planted.join(", ")
            ),
        };
        let _ = writeln!(
            out,
            "  data     draw seed {:#018x} (--draw-seed replays it); {planted}",
            data.draw_seed
        );
        if !data.unchanged_inputs.is_empty() {
            let _ = writeln!(
                out,
                "  same     {} unchanged across launches (a plan derived from them is allowed)",
                data.unchanged_inputs.join(", ")
            );
        }
    }
    if let Some(precision) = &t.precision {
        let classes: Vec<String> = precision
            .timed
            .0
            .iter()
            .map(|timed| {
                let checked = precision.checked.share(&timed.class).unwrap_or(0.0);
                format!(
                    "{} {:.1}% (checked {:.1}%)",
                    timed.class,
                    timed.share * 100.0,
                    checked * 100.0
                )
            })
            .collect();
        if !classes.is_empty() {
            let _ = writeln!(
                out,
                "  exact    worst share of the allowance: {}",
                classes.join("; ")
            );
        }
    }
    if let Some(drift) = &t.drift {
        let _ = writeln!(
            out,
            "  drift    starter {:.4} ms after itself, {:.4} ms after the student ({:+.1}%)",
            drift.after_starter_ms,
            drift.after_student_ms,
            drift.slower() * 100.0
        );
        if let (Some(starter), Some(student)) =
            (drift.clock_after_starter_mhz, drift.clock_after_student_mhz)
        {
            let _ = writeln!(
                out,
                "           SM clock {starter:.0} MHz after itself, {student:.0} MHz after the student"
            );
        }
    }
    if let Some(groups) = &t.two_groups {
        let _ = writeln!(out, "  groups   {groups}");
    }
    if let Some(floor) = &t.floor {
        let (ratio, side) = match t.student.median >= floor.ms {
            true => (t.student.median / floor.ms, "above"),
            false => (floor.ms / t.student.median, "below"),
        };
        let _ = writeln!(
            out,
            "  floor    {:.4} ms ({}); student median {ratio:.1}x {side} it",
            floor.ms,
            floor.term_text(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::resources::ResourceUsage;
    use crate::lab::geometry::LaunchGeometry;

    fn compiled(threads: u32, max_threads_per_block: u32) -> CompileOutcome {
        CompileOutcome {
            ok: true,
            resources: Some(ResourceUsage {
                registers: 32,
                max_threads_per_block,
                ..Default::default()
            }),
            geometry: Some(LaunchGeometry {
                threads,
                ..crate::lab::flash_prefill::FLASH_PREFILL.default_geometry()
            }),
            ..CompileOutcome::failed(None)
        }
    }

    #[test]
    fn a_block_over_the_kernels_limit_is_named_with_both_numbers() {
        let problem = oversized_block(&compiled(512, 384)).expect("512 > 384 is reported");
        assert!(problem.contains("512 threads per block"), "{problem}");
        assert!(problem.contains("at most 384"), "{problem}");
        assert!(
            problem.contains("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
            "{problem}"
        );
    }

    #[test]
    fn what_the_kernel_keeps_is_an_integrity_note_under_the_compile_line() {
        use crate::facts::kept_state::{KernelFacts, ModuleVariable};
        let rendered = |compile: &CompileOutcome| {
            let mut out = String::new();
            render_compile(&mut out, compile);
            out
        };
        let mut compile = compiled(256, 1024);
        let plain = rendered(&compile);
        assert!(!plain.contains("integrity note"), "{plain}");
        *compile.kernel_facts = KernelFacts {
            kept: vec![ModuleVariable {
                name: "g_memo\u{1b}[2J".into(),
                bytes: 16 << 20,
            }],
            reads_global_timer: true,
            ..KernelFacts::default()
        };
        let table = rendered(&compile);
        let lines: Vec<&str> = table.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("integrity note: "))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(lines[at - 1].starts_with("compiled in"), "{table}");
        // The student's name reaches the terminal neutralised.
        assert_eq!(
            lines[at],
            "integrity note: keeps 16.0 MiB in `g_memo^[[2J` between launches; reads the global timer"
        );
    }

    #[test]
    fn a_block_within_the_limit_or_an_unknown_limit_says_nothing() {
        assert_eq!(oversized_block(&compiled(384, 384)), None);
        assert_eq!(oversized_block(&compiled(1024, 0)), None);
    }
}
