//! Two kernels side by side: the same cases on the same inputs, each
//! kernel's verdicts, errors, timing, counters, gate and integrity, with the
//! rows where they differ marked.
//!
//! A TA comparing a student's kernel with the reference (or two versions of
//! one submission) wants the differences, not two reports to diff by eye;
//! so every row carries a marker column, and colour is only a second cue
//! (added when the output is a terminal) so logs and pipes read the same.

use std::fmt::Write;

use serde::Serialize;

use crate::app::gate::SpeedGate;
use crate::facts::metrics::SM_THROUGHPUT_PCT;
use crate::outcome::CheckReport;
use crate::outcome::IntegrityBadges;
use crate::outcome::Verdict;
use crate::protocol::{CaseOutcome, CaseStatus, KernelCounters};

/// The JSON schema of `flashprof compare --json`.
/// 2 (2026-12-07): each side's report is a `flashprof.check/2` body, with
/// no compiled image.
pub const COMPARE_SCHEMA: &str = "flashprof.compare/2";

/// Marker for a row whose verdicts differ.
pub const VERDICT_DIFFERS: &str = "*";
/// Marker for a row with the same verdict but max errors a decade or more apart.
pub const ERROR_DIFFERS: &str = "~";

/// One kernel's side of a comparison.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub report: &'a CheckReport,
    pub gate: Option<&'a SpeedGate>,
}

/// One case, both ways.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseRow {
    pub name: String,
    pub a_status: Option<CaseStatus>,
    pub b_status: Option<CaseStatus>,
    pub a_max_abs_err: Option<f64>,
    pub b_max_abs_err: Option<f64>,
    /// `""`, [`VERDICT_DIFFERS`] or [`ERROR_DIFFERS`].
    pub marker: &'static str,
}

fn max_err(case: Option<&CaseOutcome>) -> Option<f64> {
    case.and_then(|c| c.comparison.as_ref())
        .map(|c| c.max_abs_err)
}

/// Pairs the cases by name, in A's order, then any only B has.
pub fn case_rows(a: &CheckReport, b: &CheckReport) -> Vec<CaseRow> {
    let mut names: Vec<&str> = a.cases.iter().map(|c| c.name.as_str()).collect();
    names.extend(
        b.cases
            .iter()
            .map(|c| c.name.as_str())
            .filter(|n| !a.cases.iter().any(|c| c.name == *n)),
    );
    names
        .into_iter()
        .map(|name| {
            let left = a.cases.iter().find(|c| c.name == name);
            let right = b.cases.iter().find(|c| c.name == name);
            let (a_status, b_status) = (left.map(|c| c.status), right.map(|c| c.status));
            let (a_err, b_err) = (max_err(left), max_err(right));
            let decade_apart = match (a_err, b_err) {
                (Some(x), Some(y)) => {
                    let (lo, hi) = (x.min(y).max(1e-12), x.max(y).max(1e-12));
                    hi / lo >= 10.0
                }
                _ => false,
            };
            let marker = if a_status != b_status {
                VERDICT_DIFFERS
            } else if decade_apart {
                ERROR_DIFFERS
            } else {
                ""
            };
            CaseRow {
                name: name.to_string(),
                a_status,
                b_status,
                a_max_abs_err: a_err,
                b_max_abs_err: b_err,
                marker,
            }
        })
        .collect()
}

/// How many times faster A's kernel ran than B's (B's median over A's), when both were timed.
pub fn a_over_b(a: &CheckReport, b: &CheckReport) -> Option<f64> {
    let (ta, tb) = (a.timing.as_ref()?, b.timing.as_ref()?);
    (ta.student.median > 0.0).then(|| tb.student.median / ta.student.median)
}

/// ANSI colours, or none.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    pub enabled: bool,
}

impl Palette {
    fn paint(self, code: &str, text: &str) -> String {
        if self.enabled {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn status(self, status: Option<CaseStatus>, width: usize) -> String {
        let (word, code) = match status {
            Some(CaseStatus::Pass) => ("PASS", "32"),
            Some(CaseStatus::Fail) => ("FAIL", "31"),
            Some(CaseStatus::Timeout) => ("TIMEOUT", "31"),
            Some(CaseStatus::Crash) => ("CRASH", "31"),
            Some(CaseStatus::NotRun) => ("not run", "2"),
            None => ("-", "2"),
        };
        // Pad before painting so escape codes do not upset the columns.
        self.paint(code, &format!("{word:<width$}"))
    }
}

fn error_cell(err: Option<f64>) -> String {
    match err {
        Some(e) if e.is_finite() => format!("{e:.2e}"),
        Some(_) => "non-finite".into(),
        None => "-".into(),
    }
}

/// The comparison as a two-column table.
pub fn render_compare_table(a: Side, b: Side, palette: Palette) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "flashprof compare  (seed {}, same inputs for both)\n  A: {}\n  B: {}",
        a.report.seed,
        crate::display::line_for_display(&a.report.source_path),
        crate::display::line_for_display(&b.report.source_path)
    );
    match &a.report.gpu {
        Ok(gpu) => {
            let _ = writeln!(out, "GPU: {} ({})", gpu.name, gpu.arch());
        }
        Err(problem) => {
            let _ = writeln!(out, "GPU: {}", problem.describe());
        }
    }
    for (label, side) in [("A", a), ("B", b)] {
        render_build(&mut out, label, side.report);
    }
    let rows = case_rows(a.report, b.report);
    let unrun = |r: &CheckReport| r.cases.iter().all(|c| c.status == CaseStatus::NotRun);
    let nothing_ran = unrun(a.report) && unrun(b.report);
    if nothing_ran {
        // No GPU, or neither side built: one line, not a table of "not run".
        let why = if a.report.gpu.is_err() || b.report.gpu.is_err() {
            "no GPU (above)"
        } else if !a.report.compile.ok && !b.report.compile.ok {
            "neither kernel built"
        } else {
            "see each side's build above"
        };
        let _ = writeln!(out, "\n{} cases not run on either side: {why}", rows.len());
    } else {
        render_case_rows(&mut out, &rows, palette);
    }
    render_timing(&mut out, a.report, b.report);
    render_counters(&mut out, a.report, b.report);
    let _ = writeln!(out);
    for (label, side) in [("A", a), ("B", b)] {
        let verdict = Verdict::of(side.report).word();
        let passed = side.report.cases_passed();
        let _ = writeln!(
            out,
            "{label}: {verdict}, {passed}/{} cases; {}",
            side.report.cases.len(),
            IntegrityBadges::of(side.report)
        );
        if let Some(gate) = side.gate {
            let _ = writeln!(out, "   {gate}");
        }
        if let (false, Some(line)) = (side.report.all_passed(), side.report.diagnosis_line()) {
            let _ = writeln!(out, "   {line}");
        }
    }
    if !nothing_ran {
        let _ = writeln!(
            out,
            "markers: {VERDICT_DIFFERS} verdicts differ, {ERROR_DIFFERS} max errors ten times or more apart"
        );
    }
    out
}

/// The cases, one row each, both verdicts and both largest errors.
fn render_case_rows(out: &mut String, rows: &[CaseRow], palette: Palette) {
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        out,
        "\n  {:<width$}  {:<7}  {:<7}  {:>10}  {:>10}",
        "case", "A", "B", "A max err", "B max err"
    );
    for row in rows {
        let marker = match row.marker {
            "" => " ".to_string(),
            m => palette.paint("33", m),
        };
        let _ = writeln!(
            out,
            "{marker} {:<width$}  {}  {}  {:>10}  {:>10}",
            row.name,
            palette.status(row.a_status, 7),
            palette.status(row.b_status, 7),
            error_cell(row.a_max_abs_err),
            error_cell(row.b_max_abs_err),
        );
    }
}

/// Lines of one side's build shown at most (a kernel with a hundred errors
/// would push the comparison off the screen; `flashprof check` shows all).
const BUILD_LINES: usize = 12;

/// One side's build: its resources and occupancy, or its compile errors,
/// the student's text made safe for the terminal.
fn render_build(out: &mut String, label: &str, report: &CheckReport) {
    let mut build = String::new();
    crate::report::table::render_compile(&mut build, &report.compile);
    let build = crate::display::for_display(&build);
    let lines: Vec<&str> = build.lines().filter(|l| !l.trim().is_empty()).collect();
    let _ = writeln!(out, "{label} build:");
    for line in lines.iter().take(BUILD_LINES) {
        let _ = writeln!(out, "   {line}");
    }
    if lines.len() > BUILD_LINES {
        let _ = writeln!(
            out,
            "   ... {} more lines (`flashprof check` of this file shows them all)",
            lines.len() - BUILD_LINES
        );
    }
}

fn render_timing(out: &mut String, a: &CheckReport, b: &CheckReport) {
    let (Some(ta), Some(tb)) = (&a.timing, &b.timing) else {
        for (label, report) in [("A", a), ("B", b)] {
            if let Some(error) = &report.timing_error {
                let _ = writeln!(out, "\ntiming {label}: {error}");
            }
        }
        return;
    };
    let speedup = |t: &crate::protocol::TimingOutcome| {
        t.speedup
            .as_ref()
            .map_or("withheld".to_string(), |s| format!("{:.2}x", s.point))
    };
    let _ = writeln!(
        out,
        "\ntiming at {}:\n  {:<22} {:>10}  {:>10}",
        ta.shape.detail, "", "A", "B"
    );
    let _ = writeln!(
        out,
        "  {:<22} {:>9.3}ms  {:>9.3}ms",
        "kernel median", ta.student.median, tb.student.median
    );
    let _ = writeln!(
        out,
        "  {:<22} {:>9.3}ms  {:>9.3}ms",
        "starter median", ta.starter.median, tb.starter.median
    );
    let _ = writeln!(
        out,
        "  {:<22} {:>10}  {:>10}",
        "speedup vs starter",
        speedup(ta),
        speedup(tb)
    );
    if let Some(ratio) = a_over_b(a, b) {
        let _ = writeln!(out, "  A runs {ratio:.2}x as fast as B");
    }
}

fn last_counters(report: &CheckReport) -> Option<&crate::protocol::CountersOutcome> {
    report.counters.iter().rev().find_map(|c| c.as_ref().ok())
}

fn counters_cells(kernel: &KernelCounters) -> [String; 4] {
    let sm = kernel
        .metrics
        .iter()
        .find(|m| m.name == SM_THROUGHPUT_PCT)
        .map_or("-".to_string(), |m| format!("{:.1}%", m.value));
    match &kernel.roofline {
        Some(r) => [
            format!("{:.1} MB", r.dram_bytes / 1e6),
            sm,
            format!("{:.0}", r.achieved_gflops),
            match r.verdict.busiest {
                Some(busiest) if r.verdict.bound != crate::grade::roofline::Bound::Neither => {
                    format!("{} ({})", r.verdict.bound.word(), busiest.unit.label())
                }
                _ => r.verdict.bound.word().to_string(),
            },
        ],
        None => [
            "-".into(),
            sm,
            "-".into(),
            kernel.error.clone().unwrap_or_else(|| "-".into()),
        ],
    }
}

fn render_counters(out: &mut String, a: &CheckReport, b: &CheckReport) {
    let (Some(ca), Some(cb)) = (last_counters(a), last_counters(b)) else {
        return;
    };
    let (ka, kb) = (counters_cells(&ca.student), counters_cells(&cb.student));
    let _ = writeln!(out, "\nhardware counters ({} set):", ca.tier);
    for (i, label) in ["DRAM bytes", "SM throughput", "GFLOP/s", "bound"]
        .iter()
        .enumerate()
    {
        let marker = if ka[i] == kb[i] { " " } else { VERDICT_DIFFERS };
        let _ = writeln!(out, "{marker} {label:<21} {:>10}  {:>10}", ka[i], kb[i]);
    }
}

#[derive(Serialize)]
struct SideDocument<'a> {
    file: &'a str,
    passed: bool,
    gate: Option<&'a SpeedGate>,
    integrity: IntegrityBadges,
    report: &'a CheckReport,
}

#[derive(Serialize)]
struct CompareDocument<'a> {
    schema: &'static str,
    flashprof_version: &'static str,
    seed: u64,
    cases: Vec<CaseRow>,
    /// B's kernel median over A's: above 1 when A is faster.
    a_over_b: Option<f64>,
    a: SideDocument<'a>,
    b: SideDocument<'a>,
}

/// The comparison as one JSON document (schema [`COMPARE_SCHEMA`]).
pub fn render_compare_json(a: Side, b: Side) -> String {
    let document = CompareDocument {
        schema: COMPARE_SCHEMA,
        flashprof_version: env!("CARGO_PKG_VERSION"),
        seed: a.report.seed,
        cases: case_rows(a.report, b.report),
        a_over_b: a_over_b(a.report, b.report),
        a: SideDocument::of(a),
        b: SideDocument::of(b),
    };
    serde_json::to_string_pretty(&document).expect("report types serialize without failure")
}

impl<'a> SideDocument<'a> {
    fn of(side: Side<'a>) -> Self {
        Self {
            file: &side.report.source_path,
            passed: side.report.all_passed(),
            gate: side.gate,
            integrity: IntegrityBadges::of(side.report),
            report: side.report,
        }
    }
}
