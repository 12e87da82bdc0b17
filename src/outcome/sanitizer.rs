//! What the compute-sanitizer pass found, as data: each tool's run and its
//! findings, each at the student's file and line with a diagnosis. The pass
//! itself (finding the tool, running it, reading its logs) is
//! `app::sanitize`.

use serde::{Deserialize, Serialize};

/// One compute-sanitizer tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SanitizerTool {
    Racecheck,
    Memcheck,
    Synccheck,
    Initcheck,
}

impl SanitizerTool {
    pub const ALL: [SanitizerTool; 4] = [
        SanitizerTool::Racecheck,
        SanitizerTool::Memcheck,
        SanitizerTool::Synccheck,
        SanitizerTool::Initcheck,
    ];

    /// The name compute-sanitizer's `--tool` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Racecheck => "racecheck",
            Self::Memcheck => "memcheck",
            Self::Synccheck => "synccheck",
            Self::Initcheck => "initcheck",
        }
    }
}

/// A place in a source file, as a report names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Site {
    /// The function the instruction belongs to (for inlined code, the inlined function).
    pub function: String,
    pub file: String,
    pub line: u32,
    /// The line's text, when the site is in the student's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// One access (or, outside racecheck, the one site) of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Access {
    /// `read` or `write` for a race; empty otherwise.
    pub kind: String,
    pub site: Site,
    /// How many hazards racecheck counted between this access and the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hazards: Option<u64>,
}

/// One report of a tool, with identical repeats folded in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub tool: SanitizerTool,
    /// What the tool said happened (`Race reported`, `Invalid __global__ read of size 4 bytes`).
    pub headline: String,
    /// Its detail lines (thread, block, address), without sites or host backtraces.
    pub details: Vec<String>,
    /// The sites, first the one the report is about (for a race, the first of the pair).
    pub accesses: Vec<Access>,
    /// How many times the same report came (the case runs twice, so usually 2).
    pub reported: u32,
    /// One line for the student, naming their lines.
    pub diagnosis: String,
}

/// How one tool's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// It ran to its summary and reported nothing.
    Clean,
    /// It reported at least one hazard or error.
    Hazards,
    /// It did not finish (timeout, failed to start, no summary): nothing is known.
    Failed,
}

/// One tool's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRun {
    pub tool: SanitizerTool,
    pub status: ToolStatus,
    pub wall_ms: f64,
    pub findings: Vec<Finding>,
    /// The tool's summary line (`RACECHECK SUMMARY: 0 hazards displayed ...`).
    pub summary: Option<String>,
    /// Why it failed, when it did.
    pub problem: Option<String>,
}

/// The sanitizer pass over one submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SanitizerOutcome {
    /// The case it ran on.
    pub case: String,
    /// The compute-sanitizer executable.
    pub sanitizer: String,
    pub tools: Vec<ToolRun>,
    /// Wall time of the whole pass (the tools run side by side).
    pub wall_ms: f64,
}

impl SanitizerOutcome {
    /// Every finding of every tool.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.tools.iter().flat_map(|t| t.findings.iter())
    }

    /// Some tool reported a hazard: the submission fails.
    pub fn has_hazards(&self) -> bool {
        self.findings().next().is_some()
    }

    /// Some tool could not finish, so the pass proves nothing.
    pub fn incomplete(&self) -> bool {
        self.tools.iter().any(|t| t.status == ToolStatus::Failed)
    }

    /// Every tool finished and none reported anything.
    pub fn clean(&self) -> bool {
        !self.has_hazards() && !self.incomplete()
    }

    /// One line per tool for tables and logs.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for tool in &self.tools {
            let head = format!(
                "sanitizer {:<9} {:>6.1} s  ",
                tool.tool.name(),
                tool.wall_ms / 1000.0
            );
            match tool.status {
                ToolStatus::Clean => lines.push(format!("{head}clean")),
                ToolStatus::Failed => lines.push(format!(
                    "{head}DID NOT FINISH: {}",
                    tool.problem.as_deref().unwrap_or("no summary")
                )),
                ToolStatus::Hazards => {
                    lines.push(format!(
                        "{head}HAZARD: {} report{}",
                        tool.findings.len(),
                        if tool.findings.len() == 1 { "" } else { "s" }
                    ));
                    for finding in tool.findings.iter().take(MAX_LINES_PER_TOOL) {
                        lines.push(format!("  {}", finding.diagnosis));
                    }
                    if tool.findings.len() > MAX_LINES_PER_TOOL {
                        lines.push(format!(
                            "  ... and {} more (--json has them all)",
                            tool.findings.len() - MAX_LINES_PER_TOOL
                        ));
                    }
                }
            }
        }
        lines
    }
}

const MAX_LINES_PER_TOOL: usize = 6;
