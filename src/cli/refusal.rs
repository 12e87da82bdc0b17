//! A command that stops before it has a report (a bad file, an unknown lab,
//! a missing worker, a bad cases file): its exit code and message, shown on
//! stderr and, under `--json`, as a `flashprof.error/1` document on stdout
//! (docs/JSON.md), so a tool reading stdout gets JSON on every outcome.

use serde::Serialize;

use super::ExitCode;
use crate::display::for_display;

/// Schema of the document printed when a command stops before its report.
pub const ERROR_SCHEMA: &str = "flashprof.error/1";

/// Why a command stopped, with the exit code it stops with.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: ExitCode,
    pub message: String,
    /// What to do about it, when there is one thing to do.
    pub fix: Option<String>,
    /// Under `--json`: what the error document says about the command.
    /// (Boxed: a refusal travels in every command's `Result`.)
    pub json_context: Option<Box<ErrorContext>>,
}

impl From<crate::app::check::PlanError> for Refusal {
    fn from(error: crate::app::check::PlanError) -> Self {
        Self::new(error.code, error.message)
    }
}

impl Refusal {
    pub fn new(code: ExitCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            fix: None,
            json_context: None,
        }
    }

    /// The same refusal, printed as a `flashprof.error/1` document on
    /// stdout too when `json` is given (the command ran under `--json`).
    pub fn with_json(self, json_context: Option<ErrorContext>) -> Self {
        Self {
            json_context: json_context.map(Box::new),
            ..self
        }
    }

    /// Prints the error document (under `--json`) and the message on stderr
    /// (as `program: message`), and returns the code. The one place a
    /// command's stop is shown: the message can quote a student's file or
    /// a remote node's words, so a terminal sees it neutralised
    /// ([`for_display`]); the JSON keeps the exact text.
    pub fn report(self, program: &str) -> ExitCode {
        if let Some(context) = &self.json_context {
            println!("{}", self.json(context));
        }
        // A message that is itself a located error (`k.cu:3:1: error: ...`)
        // starts the line, where an editor's error matcher looks for it.
        let located = self
            .message
            .lines()
            .next()
            .is_some_and(|first| first.contains(": error: "));
        if located {
            eprintln!("{}", for_display(&self.message));
        } else {
            eprintln!("{program}: {}", for_display(&self.message));
        }
        if let Some(fix) = &self.fix {
            eprintln!("{program}: fix: {}", for_display(fix));
        }
        self.code
    }

    /// The `flashprof.error/1` document.
    pub fn json(&self, context: &ErrorContext) -> String {
        let document = ErrorDocument {
            schema: ERROR_SCHEMA,
            flashprof_version: env!("CARGO_PKG_VERSION"),
            command: &context.command,
            exit_code: self.code as u8,
            kind: kind(self.code),
            message: &self.message,
            fix: self.fix.as_deref(),
            source_path: context.source_path.as_deref(),
            lab: context.lab.as_deref(),
        };
        serde_json::to_string_pretty(&document).expect("plain data serializes")
    }
}

/// What the error document says about the command that stopped.
#[derive(Debug, Clone, Default)]
pub struct ErrorContext {
    /// `check`, `compare`, ... (the first argument).
    pub command: String,
    pub source_path: Option<String>,
    pub lab: Option<String>,
}

#[derive(Serialize)]
struct ErrorDocument<'a> {
    schema: &'static str,
    flashprof_version: &'static str,
    command: &'a str,
    exit_code: u8,
    kind: &'static str,
    message: &'a str,
    fix: Option<&'a str>,
    source_path: Option<&'a str>,
    lab: Option<&'a str>,
}

/// The error kind for an exit code, as the document names it.
pub fn kind(code: ExitCode) -> &'static str {
    match code {
        ExitCode::Pass => "none",
        ExitCode::CasesFailed => "cases_failed",
        ExitCode::Usage => "usage",
        ExitCode::BadSource => "bad_source",
        ExitCode::CompileError => "compile_error",
        ExitCode::NoGpu => "no_gpu",
        ExitCode::Environment => "environment",
        ExitCode::OracleUnproven => "oracle_unproven",
        ExitCode::NothingToGrade => "nothing_to_grade",
    }
}

/// The subcommand names closest to `word` (edit distance at most 2), best first.
pub fn closest<'a>(word: &str, names: &[&'a str]) -> Option<&'a str> {
    names
        .iter()
        .map(|name| (distance(word, name), *name))
        .filter(|(d, name)| *d <= 2.min(name.len().saturating_sub(1)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_miss_names_the_command() {
        let names = ["check", "calibrate", "compare", "grade", "labs", "doctor"];
        assert_eq!(closest("chek", &names), Some("check"));
        assert_eq!(closest("grdae", &names), Some("grade"));
        assert_eq!(closest("docter", &names), Some("doctor"));
        assert_eq!(closest("xyzzy", &names), None);
    }

    #[test]
    fn the_error_document_names_schema_code_and_kind() {
        let refusal = Refusal::new(ExitCode::BadSource, "k.cu: no `attention_prefill` kernel");
        let context = ErrorContext {
            command: "check".into(),
            source_path: Some("k.cu".into()),
            lab: None,
        };
        let value: serde_json::Value = serde_json::from_str(&refusal.json(&context)).unwrap();
        assert_eq!(value["schema"], ERROR_SCHEMA);
        assert_eq!(value["exit_code"], 3);
        assert_eq!(value["kind"], "bad_source");
        assert_eq!(value["source_path"], "k.cu");
        assert!(value["lab"].is_null());
    }
}
