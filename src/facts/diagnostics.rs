//! Compiler messages read out of NVRTC's log.
//!
//! NVRTC writes diagnostics as `file(LINE): error: message`, then the
//! offending source line and a caret under the column. Because the prepared
//! program carries `#line` markers, `file` is already the student's path for
//! anything in their text; this module only has to split the log into
//! records that a screen or a JSON report can use.

use serde::{Deserialize, Serialize};

use crate::lab::source::{excerpt, StudentSource};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One error or warning, located in the file it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The student's display path, or the prelude's name for an error in
    /// code flashprof added.
    pub file: String,
    /// 1-based line in `file`.
    pub line: usize,
    /// 1-based column of the caret, when the compiler drew one.
    pub column: Option<usize>,
    /// The message, with any notes the compiler attached on later lines.
    pub message: String,
    /// The student's own text of `line`, when `file` is the student's.
    pub source_line: Option<String>,
}

impl Diagnostic {
    /// `file:line:col: error: ` (the column and line only when known), the
    /// start that vim's, Emacs's and VS Code's matchers jump to.
    pub fn place(&self) -> String {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        match (self.line, self.column) {
            (0, _) => format!("{}: {severity}: ", self.file),
            (line, None) => format!("{}:{line}: {severity}: ", self.file),
            (line, Some(column)) => format!("{}:{line}:{column}: {severity}: ", self.file),
        }
    }

    /// The student's line and a caret under the column, when known.
    pub fn excerpt(&self) -> Vec<String> {
        self.source_line
            .as_deref()
            .map(|text| excerpt(self.line, text, self.column))
            .unwrap_or_default()
    }
}

/// `file:line:col: error: message`, then the student's line with a caret
/// under the column when the compiler gave one.
impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.place(), self.message)?;
        for line in self.excerpt() {
            write!(f, "\n{line}")?;
        }
        Ok(())
    }
}

/// How wide NVRTC indents the echoed source line and its caret.
const ECHO_INDENT: usize = 2;

/// What a `file(LINE): kind: message` header line announces.
enum Kind {
    Severity(Severity),
    Note,
    /// Remarks carry no fault of the student's.
    Remark,
}

struct Header<'a> {
    /// `None` for "At end of source", which names no file.
    location: Option<(&'a str, usize)>,
    kind: Kind,
    message: &'a str,
}

/// Longest raw compiler log passed on in [`unplaced_failure`].
const RAW_LOG_LIMIT: usize = 16 * 1024;

/// One error holding NVRTC's raw log, for a failed compile with no
/// diagnostic [`parse_log`] could place (a ptxas error such as too much
/// shared memory, a file name NVRTC cannot quote): line 0, no source line.
/// NULs are dropped and the log is cut at 16 KiB; displays neutralise the rest.
pub fn unplaced_failure(log: &str, source: &StudentSource) -> Diagnostic {
    let log = log.replace('\0', "");
    let mut log = log.trim();
    if log.len() > RAW_LOG_LIMIT {
        let mut cut = RAW_LOG_LIMIT;
        while !log.is_char_boundary(cut) {
            cut -= 1;
        }
        log = &log[..cut];
    }
    let message = if log.is_empty() {
        "the compiler failed and gave no log".to_owned()
    } else {
        format!("the compiler failed with no message on a line of yours; its log:\n{log}")
    };
    Diagnostic {
        severity: Severity::Error,
        file: source.display_path().to_owned(),
        line: 0,
        column: None,
        message,
        source_line: None,
    }
}

/// Most diagnostics kept from one compile: a student fixes the first few,
/// and 8,192 warnings on one long line must not become 8,192 copies of it.
pub const MAX_DIAGNOSTICS: usize = 100;

/// Longest message (notes included) and source line kept in a diagnostic,
/// in bytes; a longer one is cut at a character boundary and ends in `...`.
pub const MAX_DIAGNOSTIC_LINE_BYTES: usize = 400;

/// `text` cut to [`MAX_DIAGNOSTIC_LINE_BYTES`].
fn capped(text: &str) -> String {
    if text.len() <= MAX_DIAGNOSTIC_LINE_BYTES {
        return text.to_owned();
    }
    let mut cut = MAX_DIAGNOSTIC_LINE_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &text[..cut])
}

/// The first [`MAX_DIAGNOSTICS`] errors and warnings in `log`, in order,
/// each line of them capped; notes join the diagnostic they follow. The
/// errors past the cap are counted in a last note, so a failed compile
/// always keeps its first error.
pub fn parse_log(log: &str, source: &StudentSource) -> Vec<Diagnostic> {
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    let mut left_out = 0usize;
    // Whether notes belong to the last kept diagnostic (not to one left out).
    let mut kept_last = true;
    // Whether caret lines belong to the last diagnostic (not to a remark).
    let mut collecting = false;
    let marker = source.marker_name();
    for text in log.lines() {
        if let Some(header) = parse_header(text) {
            collecting = false;
            match header.kind {
                Kind::Severity(severity) if diagnostics.len() == MAX_DIAGNOSTICS => {
                    left_out += 1;
                    kept_last = false;
                    // A first error after a hundred warnings takes the last place.
                    if severity == Severity::Error
                        && !diagnostics.iter().any(|d| d.severity == Severity::Error)
                    {
                        diagnostics.pop();
                        diagnostics.push(Diagnostic {
                            severity,
                            file: capped(header.location.map_or(source.display_path(), |l| l.0)),
                            line: header.location.map_or(0, |l| l.1),
                            column: None,
                            message: capped(header.message),
                            source_line: None,
                        });
                    }
                }
                Kind::Severity(severity) => {
                    // The end of the program is the end of the student's
                    // text (a body's closing brace is flashprof's own).
                    let (file, line) = header
                        .location
                        .map(|(file, line)| match file == marker {
                            true => (source.display_path(), line),
                            false => (file, line),
                        })
                        .unwrap_or((source.display_path(), source.text().lines().count()));
                    let source_line = (file == source.display_path())
                        .then(|| source.line(line).map(capped))
                        .flatten();
                    diagnostics.push(Diagnostic {
                        severity,
                        file: capped(file),
                        line,
                        column: None,
                        message: capped(header.message),
                        source_line,
                    });
                    collecting = true;
                    kept_last = true;
                }
                Kind::Note => {
                    let room = |d: &&mut Diagnostic| d.message.len() < MAX_DIAGNOSTIC_LINE_BYTES;
                    if let Some(last) = diagnostics.last_mut().filter(room).filter(|_| kept_last) {
                        last.message.push_str("\nnote: ");
                        last.message.push_str(&capped(header.message));
                    }
                }
                Kind::Remark => {}
            }
        } else if let Some(last) = diagnostics.last_mut().filter(|_| collecting) {
            if last.column.is_none() {
                last.column = caret_column(text);
            }
        }
    }
    if let Some(last) = diagnostics.last_mut().filter(|_| left_out > 0) {
        last.message.push_str(&format!(
            "\nnote: {left_out} more error(s) and warning(s) not kept (at most {MAX_DIAGNOSTICS})"
        ));
    }
    diagnostics
}

/// Splits `path(12): warning #177-D: message`. The path may itself hold
/// parentheses, so the line number is the last `(digits)` before `): `.
/// `At end of source: error: message` is the one header without a path.
fn parse_header(text: &str) -> Option<Header<'_>> {
    let (location, rest) = match text.strip_prefix("At end of source: ") {
        Some(rest) => (None, rest),
        None => {
            let (close, _) = text.match_indices("): ").find(|(at, _)| {
                text[..*at]
                    .rfind('(')
                    .is_some_and(|open| is_number(&text[open + 1..*at]))
            })?;
            let open = text[..close].rfind('(')?;
            let line = text[open + 1..close].parse().ok()?;
            (Some((&text[..open], line)), &text[close + 3..])
        }
    };
    let (label, message) = rest.split_once(": ")?;
    // "warning #177-D" -> "warning"
    let label = label.split(" #").next().unwrap_or(label);
    let kind = match label {
        "error" | "catastrophic error" => Kind::Severity(Severity::Error),
        "warning" => Kind::Severity(Severity::Warning),
        "note" => Kind::Note,
        "remark" => Kind::Remark,
        _ => return None,
    };
    Some(Header {
        location,
        kind,
        message: message.trim(),
    })
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The 1-based column a caret line points at: blanks ending in `^`. NVRTC
/// copies the source line's tabs into the caret line, so a tab before the
/// caret counts as the one character it is in the source.
fn caret_column(text: &str) -> Option<usize> {
    let caret = text.trim_end();
    let at = caret.len().checked_sub(1)?;
    let is_caret = caret.ends_with('^') && caret[..at].bytes().all(|b| b == b' ' || b == b'\t');
    (is_caret && at >= ECHO_INDENT).then(|| at - ECHO_INDENT + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::flash_prefill::FLASH_PREFILL;

    const LOG: &str = "\
my (1)/k.cu(3): warning #177-D: variable \"y\" was declared but never referenced
    int y;
        ^

Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"

my (1)/k.cu(4): error: expression must have a constant value
    constexpr float z = f();
                        ^
my (1)/k.cu(4): note #2703-D: cannot call non-constexpr function \"f\"
<flashprof prelude>(2): error: expected a \";\"
At end of source: error: expected a \"}\"

2 errors detected in the compilation of \"my (1)/k.cu\".
";

    #[test]
    fn a_diagnostic_naming_the_marker_name_is_the_students_file() {
        let source =
            StudentSource::from_bytes("class/q\"uote\nx.cu", b"out[0] = 0.0f;\n", FLASH_PREFILL)
                .expect("valid body");
        assert_eq!(source.marker_name(), "class/q_uote_x.cu");
        let log = "class/q_uote_x.cu(1): error: identifier \"out\" is undefined\n";
        let found = parse_log(log, &source);
        assert_eq!(found[0].file, "class/q\"uote\nx.cu");
        assert_eq!(found[0].source_line.as_deref(), Some("out[0] = 0.0f;"));
    }

    #[test]
    fn a_flood_of_diagnostics_on_a_long_line_is_capped_and_keeps_its_first_error() {
        let long_line = format!("int w = 1 << 40; /*{}*/", "x".repeat(500_000));
        let text = format!("a;\n{long_line}\n");
        let source =
            StudentSource::from_bytes("k.cu", text.as_bytes(), FLASH_PREFILL).expect("valid body");
        let mut log = String::new();
        for _ in 0..8192 {
            log.push_str(&format!(
                "k.cu(2): warning #63-D: shift count is too large {}\n  int w\n  ^\n",
                "y".repeat(1000)
            ));
            log.push_str("k.cu(2): note: a note of a left-out warning\n");
        }
        log.push_str("k.cu(2): error: the first error\n");
        let found = parse_log(&log, &source);
        assert_eq!(found.len(), MAX_DIAGNOSTICS);
        let bound = MAX_DIAGNOSTIC_LINE_BYTES + 3;
        for d in &found[..MAX_DIAGNOSTICS - 1] {
            assert!(d.message.len() <= 2 * bound + 8, "{}", d.message.len());
            assert!(d.source_line.as_ref().is_some_and(|l| l.len() <= bound));
        }
        let last = found.last().expect("a last diagnostic");
        assert_eq!(last.severity, Severity::Error, "{}", last.message);
        assert!(last.message.starts_with("the first error"));
        assert!(
            last.message
                .ends_with("8093 more error(s) and warning(s) not kept (at most 100)"),
            "{}",
            last.message
        );
    }

    #[test]
    fn a_tab_indented_line_keeps_its_column_and_caret() {
        // NVRTC copies the line's tabs into its caret line.
        let log =
            "k.cu(2): error: identifier \"y\" is undefined\n  \t  \to[0]=y;\n  \t  \t     ^\n";
        let source = StudentSource::from_bytes("k.cu", b"a;\n\t  \to[0]=y;\n", FLASH_PREFILL)
            .expect("valid body");
        let found = parse_log(log, &source);
        assert_eq!(found[0].column, Some(10));
        let shown = found[0].to_string();
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[0], "k.cu:2:10: error: identifier \"y\" is undefined");
        assert_eq!(lines[1], "    2 |           o[0]=y;");
        assert_eq!(lines[2].find('^'), lines[1].find('y'), "{shown}");
    }

    #[test]
    fn a_diagnostic_without_a_column_or_a_line_says_what_it_knows() {
        let mut d = Diagnostic {
            severity: Severity::Warning,
            file: "k.cu".into(),
            line: 4,
            column: None,
            message: "m".into(),
            source_line: None,
        };
        assert_eq!(d.to_string(), "k.cu:4: warning: m");
        d.line = 0;
        assert_eq!(d.to_string(), "k.cu: warning: m");
    }

    #[test]
    fn splits_a_log_into_located_diagnostics() {
        let source = StudentSource::from_bytes(
            "my (1)/k.cu",
            b"a;\nb;\n  int y;\n  constexpr float z = f();\n",
            FLASH_PREFILL,
        )
        .expect("valid body");
        let found = parse_log(LOG, &source);
        assert_eq!(found.len(), 4);
        assert_eq!(
            found[0],
            Diagnostic {
                severity: Severity::Warning,
                file: "my (1)/k.cu".into(),
                line: 3,
                column: Some(7),
                message: "variable \"y\" was declared but never referenced".into(),
                source_line: Some("  int y;".into()),
            }
        );
        assert_eq!(found[1].severity, Severity::Error);
        assert_eq!(found[1].column, Some(23));
        assert_eq!(
            found[1].message,
            "expression must have a constant value\nnote: cannot call non-constexpr function \"f\""
        );
        assert_eq!(found[2].file, "<flashprof prelude>");
        assert_eq!(
            (found[2].column, found[2].source_line.as_deref()),
            (None, None)
        );
        assert_eq!((found[3].file.as_str(), found[3].line), ("my (1)/k.cu", 4));
        assert_eq!(found[3].message, "expected a \"}\"");
    }

    #[test]
    fn lines_that_are_not_headers_are_ignored() {
        assert!(parse_header("ptxas info    : Used 8 registers (0): x").is_none());
        assert!(parse_header("1 error detected in the compilation of \"k.cu\".").is_none());
        assert!(parse_header("k.cu(x): error: y").is_none());
    }
}
