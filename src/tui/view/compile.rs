//! The file and compile panel: did it compile, and if not, where and why,
//! with the offending source line and a caret under the column. A list of
//! errors longer than the panel scrolls (the arrows and page keys while
//! the file does not build), and its bottom border says how much is out
//! of sight.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::text::panel;
use crate::display::{for_display, line_for_display};
use crate::facts::diagnostics::{Diagnostic, Severity};
use crate::protocol::{CompileOutcome, CompileProblemKind};
use crate::tui::model::{CudaMissing, CudaPiece, Model, Remedy};
use crate::tui::theme::Theme;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let theme = model.theme;
    let Body { lines, stale } = body(model);
    if area.height == 1 {
        // One line: the file's name and the verdict (or what is running).
        let mut spans = vec![Span::styled(
            format!("{} ", model.file_label),
            theme.accent(),
        )];
        if stale {
            spans.push(Span::styled("(previous save) ", theme.stale()));
        }
        spans.extend(lines.into_iter().flat_map(|line| line.spans));
        frame.render_widget(Paragraph::new(Line::from(spans)), area);
        return;
    }
    let total = wrapped_rows(lines.clone(), area.width);
    let shown = usize::from(area.height.saturating_sub(2));
    let scroll = model.compile_scroll.min(total.saturating_sub(shown));
    let mut block = panel(&title(model), stale, theme);
    if total > shown {
        // The arrows scroll here only while no case can be selected; `[` `]` always do.
        let keys = match model.not_built() {
            Some(_) => ": ↑↓ PgUp PgDn Home End scroll",
            None => ": [ ] scroll",
        };
        block = block.title_bottom(format!(
            " rows {}-{} of {total}{keys} ",
            scroll + 1,
            (scroll + shown).min(total)
        ));
    }
    let body = Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .scroll((u16::try_from(scroll).unwrap_or(u16::MAX), 0));
    frame.render_widget(body, area);
}

/// Rows the panel needs at `width`: one for a single line that fits beside
/// the file's name, else its lines as wrapped plus the borders.
pub(super) fn height(model: &Model, width: u16) -> u16 {
    let Body { lines, stale } = body(model);
    let marker = if stale { "(previous save) ".len() } else { 0 };
    let label = model.file_label.chars().count() + 1 + marker;
    if let [only] = lines.as_slice() {
        if only.width() + label <= usize::from(width) {
            return 1;
        }
    }
    u16::try_from(wrapped_rows(lines, width) + 2).unwrap_or(u16::MAX)
}

/// Rows of the panel's text out of sight in `area` when it shows its top.
pub(super) fn hidden_rows(model: &Model, area: Rect) -> usize {
    if area.height <= 1 {
        return 0;
    }
    let shown = usize::from(area.height - 2);
    wrapped_rows(body(model).lines, area.width).saturating_sub(shown)
}

/// Rows `lines` take inside a bordered panel `width` columns wide, wrapped
/// as the panel wraps them.
fn wrapped_rows(lines: Vec<Line<'static>>, width: u16) -> usize {
    let inner = width.saturating_sub(2).max(1);
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .line_count(inner)
}

/// The file's name, and how many errors and warnings the compiler gave,
/// so a long list that does not fit is known to be longer.
fn title(model: &Model) -> String {
    let Some(shown) = model.compile() else {
        return model.file_label.clone();
    };
    let count = |severity| {
        let diagnostics = shown.value.diagnostics.iter();
        diagnostics.filter(|d| d.severity == severity).count()
    };
    let plural = |n: usize, word: &str| match n {
        0 => None,
        1 => Some(format!("1 {word}")),
        n => Some(format!("{n} {word}s")),
    };
    let counts: Vec<String> = [
        plural(count(Severity::Error), "error"),
        plural(count(Severity::Warning), "warning"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if counts.is_empty() {
        model.file_label.clone()
    } else {
        format!("{} · {}", model.file_label, counts.join(", "))
    }
}

/// What the panel shows, and whether any of it is from an earlier save.
struct Body {
    lines: Vec<Line<'static>>,
    stale: bool,
}

/// A running check's build status, then the outcome to show. An earlier
/// save's clean compile says nothing the status does not, so it gives way;
/// an earlier error stays (marked) until the new build replaces it.
fn body(model: &Model) -> Body {
    let theme = model.theme;
    if let Some(missing) = &model.cuda_missing {
        return Body {
            lines: cuda_missing_lines(missing, theme),
            stale: false,
        };
    }
    let mut lines = Vec::new();
    if let Some(live) = model.live.as_ref().filter(|l| l.compile.is_none()) {
        let status = match &live.quick {
            Some(quick) if quick.ok => format!(
                "quick build in {:.0} ms for first verdicts (~); optimizing...",
                quick.compile_ms
            ),
            _ => "compiling...".to_string(),
        };
        lines.push(Line::styled(status, theme.warn()));
    }
    let building = !lines.is_empty();
    let shown = model.compile().filter(|shown| {
        let clean = shown.value.ok && shown.value.diagnostics.is_empty();
        !(building && shown.stale && clean)
    });
    match shown {
        Some(shown) => {
            let no_gpu = model.gpu.as_ref().is_some_and(|g| g.is_err());
            lines.extend(outcome_lines(shown.value, no_gpu, theme));
        }
        None if lines.is_empty() => lines.push(Line::raw("no check yet")),
        None => {}
    }
    Body {
        lines,
        stale: shown.is_some_and(|s| s.stale),
    }
}

/// Why nothing is compiled without NVRTC or the CUDA headers, what is under way,
/// and the two ways to get it: the key, and the command that does the same.
fn cuda_missing_lines(missing: &CudaMissing, theme: Theme) -> Vec<Line<'static>> {
    let why = match missing.piece {
        CudaPiece::Nvrtc => {
            "not compiled: NVRTC, NVIDIA's compiler library, is not on this machine (no fault of the file)"
        }
        CudaPiece::Headers => {
            "not compiled: the file includes cuda_bf16.h or cuda_fp8.h, from the CUDA headers, which NVRTC does not ship and this machine lacks (no fault of the file)"
        }
    };
    let mut lines = vec![Line::styled(why, theme.warn())];
    if let Some(reason) = &missing.fetch_failed {
        lines.push(Line::from(vec![
            Span::styled("✗ the fetch failed: ", theme.bad()),
            Span::raw(line_for_display(reason).into_owned()),
        ]));
    }
    let place = missing
        .fetch_folder
        .as_deref()
        .map(|folder| format!(" into {}", line_for_display(folder)))
        .unwrap_or_default();
    lines.push(match &missing.remedy {
        Some(Remedy::Fetching { last_line }) => Line::styled(
            format!("fetching{place}: {}", line_for_display(last_line)),
            theme.warn(),
        ),
        Some(Remedy::Searching) => Line::styled("looking for it again...", theme.warn()),
        None => Line::raw(format!(
            "f: fetch NVRTC, CUPTI and the CUDA headers {} with pip{place}, then compile",
            crate::gpu::fetch::SERIES
        )),
    });
    lines.push(Line::raw(format!(
        "the same from a shell: {}; r looks again after an install elsewhere",
        crate::gpu::fetch::COMMAND
    )));
    lines
}

/// What the compiler said: the verdict, then errors, then warnings. With
/// `no_gpu_note`, a successful compile also says why nothing else updates.
pub(super) fn outcome_lines(
    outcome: &CompileOutcome,
    no_gpu_note: bool,
    theme: Theme,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if let Some(problem) = &outcome.problem {
        let what = match problem.kind {
            CompileProblemKind::BadSource => "unusable file",
            CompileProblemKind::CompilerMissing => "NVRTC missing",
            CompileProblemKind::HeadersMissing => "CUDA headers missing",
            CompileProblemKind::CompilerFailed => "compiler failed",
            CompileProblemKind::OverLimit => "compile over its limit",
        };
        lines.push(Line::from(vec![
            Span::styled(format!("✗ {what}: "), theme.bad()),
            Span::raw(for_display(&problem.message).into_owned()),
        ]));
    }
    if outcome.ok {
        let mut text = format!("✓ compiled in {:.0} ms", outcome.compile_ms);
        if let Some(load) = outcome.load_ms {
            text.push_str(&format!(", loaded in {load:.1} ms"));
        }
        let mut spans = vec![Span::styled(text, theme.good())];
        if no_gpu_note {
            spans.push(Span::raw(
                "; no GPU here, so cases and timing do not run (compile errors and resources still update)",
            ));
        }
        lines.push(Line::from(spans));
        // A fact for whoever grades (what the kernel keeps between launches,
        // clock reads, cache hints), not a failure; names come neutralised.
        if let Some(facts) = outcome.kernel_facts.summary() {
            lines.push(Line::from(vec![
                Span::styled("integrity note: ", theme.warn()),
                Span::raw(facts),
            ]));
        }
    }
    let errors = outcome
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error);
    let warnings = outcome
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning);
    for diagnostic in errors.chain(warnings) {
        lines.extend(diagnostic_lines(diagnostic, theme));
    }
    lines
}

fn diagnostic_lines(d: &Diagnostic, theme: Theme) -> Vec<Line<'static>> {
    let (mark, style) = match d.severity {
        Severity::Error => ("✗", theme.bad()),
        Severity::Warning => ("!", theme.warn()),
    };
    // Notes and a raw compiler log (a ptxas error) span several lines.
    let mut message = d.message.lines();
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{mark} {}", line_for_display(&d.place())), style),
        Span::raw(line_for_display(message.next().unwrap_or_default()).into_owned()),
    ])];
    lines.extend(message.map(|more| Line::raw(format!("  {}", line_for_display(more)))));
    let mut excerpt = d.excerpt().into_iter();
    lines.extend(excerpt.next().map(Line::raw));
    lines.extend(excerpt.next().map(|caret| Line::styled(caret, style)));
    lines
}
