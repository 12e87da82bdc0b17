//! `runs/<id>-<hash>.feedback.txt`: one submission's result as a TA would
//! send it to the student, in plain text: the verdict and why, the compile
//! errors (`file:line:col: error: ...`, as `check` prints them), each case
//! with its max error and diagnosis, the speedup and the speed gate when
//! timed, and what the build tells without a GPU.
//!
//! The id, the file's name, compiler messages and source lines are the
//! student's: the text goes out through [`for_display`], so an escape
//! sequence in any of them is shown, never run, by whoever reads the file.

use std::fmt::Write;

use crate::app::batch::journal::{GradeMode, JournalEntry};
use crate::display::{for_display, line_for_display};
use crate::outcome::{CheckReport, Verdict};
use crate::protocol::{CaseOutcome, CaseStatus, CompileOutcome};

/// The feedback text of one gradebook row.
pub fn render(entry: &JournalEntry) -> String {
    let mut out = String::new();
    // The id goes on one line: a line break in a file name forges no line.
    let _ = writeln!(out, "flashprof feedback: {}", line_for_display(&entry.id));
    let _ = writeln!(
        out,
        "lab {}, seed {}, {}",
        entry.lab,
        entry.seed,
        match entry.mode {
            GradeMode::Full => "graded on a GPU",
            GradeMode::CompileOnly => "compiled only (no GPU: no case was run)",
        }
    );
    let report = entry.report.as_ref();
    let _ = writeln!(
        out,
        "\nverdict: {}: {}",
        entry.status.word(),
        verdict_sentence(entry.status, report)
    );
    if let Some(error) = entry.error.as_deref().filter(|e| !e.is_empty()) {
        let _ = writeln!(out, "\n{error}");
    }
    if let Some(report) = report {
        render_compile(&mut out, &report.compile);
        render_cases(&mut out, report);
        render_timing(&mut out, entry, report);
        if let Some(pass) = &report.sanitizer {
            let _ = writeln!(out, "\ncompute-sanitizer on case {}:", pass.case);
            for line in pass.lines() {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    let _ = writeln!(
        out,
        "\n`flashprof check --lab {} --seed {} FILE` checks a kernel on these inputs again.",
        entry.lab, entry.seed
    );
    for_display(&out).into_owned()
}

/// What the verdict means, in one sentence.
fn verdict_sentence(status: Verdict, report: Option<&CheckReport>) -> String {
    match status {
        Verdict::Passed => "every case passed and the timed output was correct".into(),
        Verdict::Failed => {
            let cases = report.map(|r| r.cases.as_slice()).unwrap_or_default();
            match cases
                .iter()
                .filter(|c| c.status != CaseStatus::Pass)
                .count()
            {
                0 => "every case passed, but the timed run or the sanitizer found a fault (below)"
                    .into(),
                failing => format!("{failing} of {} cases did not pass", cases.len()),
            }
        }
        Verdict::Compiled => "the kernel compiles; no case was run, as no GPU was used".into(),
        Verdict::CompileError => "the kernel does not compile".into(),
        Verdict::Rejected => "the file cannot be graded as a kernel source".into(),
        Verdict::Missing => "no file was there to grade".into(),
        Verdict::Error => {
            "the grader's own environment failed, not the kernel; it will be graded again".into()
        }
    }
}

/// The compiler's messages, then what the build says about resources.
fn render_compile(out: &mut String, compile: &CompileOutcome) {
    if !compile.diagnostics.is_empty() {
        let _ = writeln!(out, "\ncompiler messages:");
        for diagnostic in &compile.diagnostics {
            let _ = writeln!(out, "{diagnostic}");
        }
    }
    if !compile.ok {
        return;
    }
    if let Some(r) = &compile.resources {
        let dynamic = compile
            .geometry
            .as_ref()
            .map_or(0, |g| g.dynamic_smem_bytes);
        let _ = write!(
            out,
            "\nbuild: {} registers per thread, {} B spilled, {} B shared memory per block",
            r.registers,
            r.spill_bytes(),
            r.static_smem_bytes + dynamic
        );
        if let Some(o) = &compile.occupancy {
            let _ = write!(
                out,
                ", occupancy {:.0}% (limited by {})",
                o.fraction * 100.0,
                o.limiter.word().replace('_', " ")
            );
        }
        let _ = writeln!(out);
    }
    if let Some(facts) = compile.kernel_facts.summary() {
        let _ = writeln!(out, "note: {facts}");
    }
}

/// One line per case that ran: its result, max error and diagnosis.
fn render_cases(out: &mut String, report: &CheckReport) {
    if report.cases.iter().all(|c| c.status == CaseStatus::NotRun) {
        return;
    }
    let _ = writeln!(
        out,
        "\ncases: {} of {} passed",
        report.cases_passed(),
        report.cases.len()
    );
    let width = report.cases.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for case in &report.cases {
        let _ = writeln!(
            out,
            "  {:<7} {:<width$}  max error {:>10}  {}",
            result_word(case.status),
            line_for_display(&case.name),
            max_error(case),
            case.diagnosis
        );
    }
    let failed = report
        .cases
        .iter()
        .any(|c| !matches!(c.status, CaseStatus::Pass | CaseStatus::NotRun));
    if let Some(line) = report.diagnosis_line().filter(|_| failed) {
        let _ = writeln!(out, "diagnosis: {line}");
    }
}

fn result_word(status: CaseStatus) -> &'static str {
    match status {
        CaseStatus::Pass => "pass",
        CaseStatus::Fail => "FAIL",
        CaseStatus::Timeout => "TIMEOUT",
        CaseStatus::Crash => "CRASH",
        CaseStatus::NotRun => "not run",
    }
}

fn max_error(case: &CaseOutcome) -> String {
    match &case.comparison {
        Some(c) if c.max_abs_err.is_finite() => format!("{:.2e}", c.max_abs_err),
        Some(_) => "non-finite".into(),
        None => "-".into(),
    }
}

/// The speedup over the starter and the speed gate, when the kernel was timed.
fn render_timing(out: &mut String, entry: &JournalEntry, report: &CheckReport) {
    if let Some(error) = &report.timing_error {
        let _ = writeln!(out, "\ntiming could not run: {error}");
    }
    let Some(timing) = &report.timing else {
        return;
    };
    let _ = writeln!(
        out,
        "\ntiming: median {:.3} ms against the starter's {:.3} ms",
        timing.student.median, timing.starter.median
    );
    match (&timing.speedup, timing.withheld()) {
        (Some(s), _) => {
            let _ = writeln!(
                out,
                "speedup: {:.2}x (95% CI {:.2}x .. {:.2}x)",
                s.point, s.ci_low, s.ci_high
            );
        }
        (None, reason) => {
            let _ = writeln!(out, "speedup: withheld: {}", reason.unwrap_or_default());
        }
    }
    if let Some(gate) = &entry.gate {
        let _ = writeln!(out, "{gate}");
    }
}
