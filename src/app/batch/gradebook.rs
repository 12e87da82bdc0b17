//! The gradebook: one row per submission as CSV for a spreadsheet, and the
//! full reports as JSON ("flashprof.gradebook/1", docs/TA.md) for tools.
//!
//! Cells come from untrusted file names and compiler output, so every text
//! cell is quoted when it must be (RFC 4180) and a cell a spreadsheet would
//! run as a formula gets a leading apostrophe; the JSON keeps the exact text.

use std::borrow::Cow;
use std::fmt::Write;

use serde::Serialize;

use crate::app::batch::journal::JournalEntry;
use crate::app::gate::SpeedGate;
use crate::display::for_display;
use crate::facts::diagnostics::Severity;
use crate::facts::resources::ResourceUsage;
use crate::outcome::{IntegrityBadges, Verdict};
use crate::protocol::CaseStatus;

/// The JSON schema of `report.json`.
pub const GRADEBOOK_SCHEMA: &str = "flashprof.gradebook/1";

/// The CSV header, in column order.
pub const CSV_COLUMNS: [&str; 23] = [
    "id",
    "file",
    "lab",
    "status",
    "cases_passed",
    "cases_total",
    "failing_cases",
    "speedup",
    "gate",
    "diagnosis",
    "seed",
    "error",
    "integrity",
    "timing_integrity",
    "kept_state",
    "bandwidth_gb_s",
    "bandwidth_share",
    "registers",
    "spill_bytes",
    "smem_bytes",
    "occupancy",
    "occupancy_limiter",
    "gate_version",
];

/// One gradebook row, computed from a journal entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GradebookRow {
    pub id: String,
    pub file: String,
    /// The lab the class was graded against.
    pub lab: String,
    pub status: &'static str,
    /// Both empty when no case ran (compile-only, a compile error, a
    /// rejected file): a count of 0 would read as every case failed.
    pub cases_passed: Option<usize>,
    pub cases_total: Option<usize>,
    pub failing_cases: Vec<String>,
    pub speedup: Option<f64>,
    pub gate: Option<SpeedGate>,
    /// The check's one line, read from the pattern across its cases (or the
    /// first compile error).
    pub diagnosis: String,
    pub seed: u64,
    pub error: String,
    /// Empty when no case ran.
    pub integrity: String,
    /// How the timing held up (docs/INTEGRITY.md): `audited` (every timed
    /// launch computed its own output and the median is above the floor),
    /// the sentence that withheld the speedup, or empty when not timed.
    pub timing_integrity: String,
    /// What the kernel keeps between launches and what its code reads
    /// (facts::kept_state), as one line; empty when there is nothing to say.
    pub kept_state: String,
    /// For a lab graded on bytes: achieved bandwidth of the timed median, GB/s.
    pub bandwidth_gb_s: Option<f64>,
    /// ... and its share of the faster streaming probe (1.0 = at the roof).
    pub bandwidth_share: Option<f64>,
    /// What the build alone tells, so filled in compile-only grading too:
    /// registers per thread, ...
    pub registers: Option<u32>,
    /// ... bytes spilled to local memory (stores and loads), ...
    pub spill_bytes: Option<u32>,
    /// ... shared memory per block (static and the declared dynamic bytes), ...
    pub smem_bytes: Option<u32>,
    /// ... and theoretical occupancy, 0..=1, with what limits it.
    pub occupancy: Option<f64>,
    pub occupancy_limiter: Option<&'static str>,
}

impl GradebookRow {
    pub fn of(entry: &JournalEntry) -> Self {
        let report = entry.report.as_ref();
        let cases = report.map(|r| r.cases.as_slice()).unwrap_or_default();
        let failed = |c: &&crate::protocol::CaseOutcome| {
            !matches!(c.status, CaseStatus::Pass | CaseStatus::NotRun)
        };
        let first_compile_error = report.and_then(|r| {
            r.compile
                .diagnostics
                .iter()
                .find(|d| d.severity == Severity::Error)
                .map(|d| format!("line {}: {}", d.line, d.message))
        });
        let sanitizer = report
            .and_then(|r| r.sanitizer.as_ref())
            .and_then(|pass| pass.findings().next())
            .map(|f| format!("{}: {}", f.tool.name(), f.diagnosis));
        let diagnosis = report
            .filter(|_| cases.iter().any(|c| failed(&c)))
            .and_then(crate::outcome::CheckReport::diagnosis_line)
            .or(first_compile_error);
        // The sanitizer's line names the student's lines: it goes with a case's diagnosis.
        let diagnosis = match (diagnosis, sanitizer) {
            (Some(d), Some(s)) => format!("{d} | {s}"),
            (d, s) => d.or(s).unwrap_or_default(),
        };
        let any_ran = cases.iter().any(|c| c.status != CaseStatus::NotRun);
        let bandwidth = report
            .and_then(|r| r.timing.as_ref())
            .and_then(|t| t.bandwidth);
        let compile = report.map(|r| &r.compile);
        let resources = compile.and_then(|c| c.resources.as_ref());
        let occupancy = compile.and_then(|c| c.occupancy.as_ref());
        let dynamic_smem = compile
            .and_then(|c| c.geometry.as_ref())
            .map_or(0, |g| g.dynamic_smem_bytes);
        Self {
            id: entry.id.clone(),
            file: entry.file.clone(),
            lab: entry.lab.clone(),
            status: entry.status.word(),
            cases_passed: report
                .filter(|_| any_ran)
                .map(crate::outcome::CheckReport::cases_passed),
            cases_total: any_ran.then_some(cases.len()),
            failing_cases: cases
                .iter()
                .filter(failed)
                .map(|c| c.name.clone())
                .collect(),
            speedup: report
                .and_then(|r| r.timing.as_ref())
                .and_then(|t| t.speedup.as_ref())
                .map(|s| s.point),
            gate: entry.gate.clone(),
            diagnosis,
            seed: entry.seed,
            error: entry.error.clone().unwrap_or_default(),
            integrity: match report {
                Some(r) if any_ran => IntegrityBadges::of(r).to_string(),
                _ => String::new(),
            },
            timing_integrity: report
                .and_then(|r| r.timing.as_ref())
                .map(|t| match t.withheld() {
                    Some(reason) => reason,
                    None if t.rules < crate::protocol::TIMING_RULES => {
                        format!("timed under earlier rules (v{})", t.rules)
                    }
                    None => "audited".into(),
                })
                .unwrap_or_default(),
            kept_state: report
                .and_then(|r| r.compile.kernel_facts.summary())
                .unwrap_or_default(),
            bandwidth_gb_s: bandwidth.map(|b| b.achieved_bytes_per_s / 1e9),
            bandwidth_share: bandwidth.map(|b| b.share()),
            registers: resources.map(|r| r.registers),
            spill_bytes: resources.map(ResourceUsage::spill_bytes),
            smem_bytes: resources.map(|r| r.static_smem_bytes + dynamic_smem),
            occupancy: occupancy.map(|o| o.fraction),
            occupancy_limiter: occupancy.map(|o| o.limiter.word()),
        }
    }

    fn csv_cells(&self) -> [String; 23] {
        [
            self.id.clone(),
            self.file.clone(),
            self.lab.clone(),
            self.status.to_string(),
            optional(self.cases_passed),
            optional(self.cases_total),
            self.failing_cases.join(";"),
            self.speedup.map(|s| format!("{s:.2}")).unwrap_or_default(),
            self.gate
                .as_ref()
                .map(|g| g.word().to_string())
                .unwrap_or_default(),
            self.diagnosis.clone(),
            self.seed.to_string(),
            self.error.clone(),
            self.integrity.clone(),
            self.timing_integrity.clone(),
            self.kept_state.clone(),
            self.bandwidth_gb_s
                .map(|b| format!("{b:.0}"))
                .unwrap_or_default(),
            self.bandwidth_share
                .map(|s| format!("{s:.3}"))
                .unwrap_or_default(),
            optional(self.registers),
            optional(self.spill_bytes),
            optional(self.smem_bytes),
            self.occupancy
                .map(|o| format!("{o:.3}"))
                .unwrap_or_default(),
            self.occupancy_limiter.unwrap_or_default().to_owned(),
            self.gate
                .as_ref()
                .and_then(SpeedGate::gate_version)
                .unwrap_or_default()
                .to_owned(),
        ]
    }
}

/// A count's cell: empty when there is no count.
fn optional(count: Option<impl ToString>) -> String {
    count.map(|c| c.to_string()).unwrap_or_default()
}

/// How many rows have each status, in [`Verdict::ALL`]'s order, leaving
/// out the statuses no row has.
pub fn count_by_status(entries: &[JournalEntry]) -> Vec<(Verdict, usize)> {
    Verdict::ALL
        .into_iter()
        .map(|verdict| {
            (
                verdict,
                entries.iter().filter(|e| e.status == verdict).count(),
            )
        })
        .filter(|&(_, count)| count > 0)
        .collect()
}

/// One CSV cell: quoted when it holds a separator, quote or line break, and
/// defused when a spreadsheet would read it as a formula.
pub fn csv_cell(text: &str) -> Cow<'_, str> {
    // Spreadsheets skip blanks before a formula's `=`: a tab (shown as
    // spaces), a no-break space or a byte-order mark must not hide it.
    let formula = text.starts_with(['\t', '\r'])
        || text
            .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '\u{feff}' | '\u{200b}'))
            .starts_with(['=', '+', '-', '@']);
    let needs_quotes = formula
        || text.contains([',', '"', '\n', '\r'])
        || text.starts_with(' ')
        || text.ends_with(' ');
    if !needs_quotes {
        return Cow::Borrowed(text);
    }
    let mut quoted = String::with_capacity(text.len() + 4);
    quoted.push('"');
    if formula {
        quoted.push('\'');
    }
    quoted.push_str(&text.replace('"', "\"\""));
    quoted.push('"');
    Cow::Owned(quoted)
}

/// The gradebook as CSV with a header row, lines ending in CRLF as RFC 4180 asks.
pub fn render_csv(entries: &[JournalEntry]) -> String {
    let mut out = CSV_COLUMNS.join(",");
    out.push_str("\r\n");
    for entry in entries {
        let cells = GradebookRow::of(entry).csv_cells();
        // Ids, file names and compiler messages are the students': their
        // control characters are made visible (line breaks kept, quoted).
        let line: Vec<String> = cells
            .iter()
            .map(|c| csv_cell(&for_display(c)).into_owned())
            .collect();
        let _ = write!(out, "{}\r\n", line.join(","));
    }
    out
}

#[derive(Serialize)]
struct GradebookDocument<'a> {
    schema: &'static str,
    flashprof_version: &'static str,
    warnings: &'a [String],
    submissions: Vec<SubmissionDocument<'a>>,
}

#[derive(Serialize)]
struct SubmissionDocument<'a> {
    #[serde(flatten)]
    entry: &'a JournalEntry,
    /// Absent when no case ran.
    integrity: Option<IntegrityBadges>,
}

/// `report.json`: every submission's full entry, in id order.
pub fn render_json(entries: &[JournalEntry], warnings: &[String]) -> String {
    let document = GradebookDocument {
        schema: GRADEBOOK_SCHEMA,
        flashprof_version: env!("CARGO_PKG_VERSION"),
        warnings,
        submissions: entries
            .iter()
            .map(|entry| SubmissionDocument {
                entry,
                integrity: entry
                    .report
                    .as_ref()
                    .filter(|r| r.cases.iter().any(|c| c.status != CaseStatus::NotRun))
                    .map(IntegrityBadges::of),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&document).expect("gradebook types serialize without failure")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_quoted_only_when_needed() {
        assert_eq!(csv_cell("plain.cu"), "plain.cu");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_cell(" padded"), "\" padded\"");
        assert_eq!(csv_cell("=HYPERLINK(1)"), "\"'=HYPERLINK(1)\"");
        assert_eq!(csv_cell("-rf.cu"), "\"'-rf.cu\"");
        assert_eq!(csv_cell("ünïcödé.cu"), "ünïcödé.cu");
    }

    #[test]
    fn a_formula_behind_blanks_is_still_defused() {
        for cell in [
            "\t=cmd|' /C calc'!A0",
            "\u{feff}=1+1",
            "\u{a0}=1+1",
            "  @SUM(A1)",
            "\u{200b}+1",
        ] {
            let shown = csv_cell(&for_display(cell)).into_owned();
            assert!(shown.starts_with("\"'"), "{cell:?} became {shown:?}");
        }
        assert_eq!(csv_cell("a = b"), "a = b");
    }

    #[test]
    fn control_characters_in_cells_are_made_visible() {
        use crate::app::batch::journal::GradeMode;
        let entry = JournalEntry {
            id: "\u{1b}]0;owned\u{7}x.cu".into(),
            file: "in/\u{202e}uc.txt".into(),
            content_hash: "1".into(),
            lab: "flash-prefill".into(),
            cases_hash: "c1".into(),
            mode: GradeMode::CompileOnly,
            seed: 1,
            status: Verdict::Rejected,
            gate: None,
            error: Some("=cmd|' /C calc'!A0 \u{1b}[2J".into()),
            report: None,
            finished_unix_ms: 1,
            timing_rules: crate::protocol::TIMING_RULES,
            limits: None,
        };
        let csv = render_csv(&[entry]);
        assert!(
            !csv.contains(|c: char| c.is_control() && c != '\r' && c != '\n'),
            "{csv:?}"
        );
        assert!(!csv.contains('\u{202e}'), "{csv:?}");
        assert!(csv.contains("^[]0;owned^Gx.cu"), "{csv:?}");
        assert!(csv.contains("\"'=cmd|"), "{csv:?}");
    }
}
