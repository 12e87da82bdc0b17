//! The cases table: one row per hazard case with its state, error, the
//! share of the tolerance left, and the one-line diagnosis.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::layout::{first_visible_case, visible_case_rows};
use super::text::{at_most, between_words, panel, wrap_words};
use crate::protocol::{CaseOutcome, CaseStatus};
use crate::tui::model::{CaseCell, Model};
use crate::tui::theme::Theme;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let theme = model.theme;
    if let Some(why) = model.not_built() {
        // No case ran: one line says so, and the errors get the rows.
        let line = format!("{} cases not run: {why}", model.cases.len());
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    let stale =
        (0..model.cases.len()).any(|i| matches!(model.case(i), CaseCell::Done(s) if s.stale));
    let visible = visible_case_rows(area);
    let first = first_visible_case(model.selected, visible);
    let columns = Columns::for_table(model, area);
    let rows = model
        .cases
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(index, case)| {
            let shape = case.shape.label.clone();
            let row = match model.case(index) {
                CaseCell::Waiting => plain_row(&case.name, shape, "waiting", Style::new()),
                CaseCell::Running => plain_row(&case.name, shape, "running", theme.warn()),
                CaseCell::Provisional(outcome) => {
                    let verdict = provisional_word(outcome.status, theme);
                    outcome_row(&case.name, shape, outcome, verdict, model, columns)
                }
                CaseCell::Done(shown) => {
                    let verdict = status_word(shown.value.status, theme);
                    let row = outcome_row(&case.name, shape, shown.value, verdict, model, columns);
                    if shown.stale {
                        row.style(theme.stale())
                    } else {
                        row
                    }
                }
            };
            if index == model.selected {
                row.style(theme.selected())
            } else {
                row
            }
        });
    let header = Row::new([
        "result",
        "case",
        "C x P",
        "max err",
        "headroom",
        "diagnosis",
    ])
    .style(theme.accent());
    let provisional =
        (0..model.cases.len()).any(|i| matches!(model.case(i), CaseCell::Provisional(_)));
    let title = format!(
        "cases ({} of {}){}{}",
        model.cases.len().min(visible),
        model.cases.len(),
        if provisional { ", ~ quick build" } else { "" },
        seed_words(model)
    );
    let table = Table::new(
        rows,
        [
            Constraint::Length(RESULT_WIDTH),
            Constraint::Length(columns.name),
            Constraint::Length(SHAPE_WIDTH),
            Constraint::Length(ERROR_WIDTH),
            Constraint::Length(HEADROOM_WIDTH),
            Constraint::Fill(1),
        ],
    )
    .header(header)
    .block(panel(&title, stale, theme));
    frame.render_widget(table, area);
}

const RESULT_WIDTH: u16 = 7;
const SHAPE_WIDTH: u16 = 9;
const ERROR_WIDTH: u16 = 8;
const HEADROOM_WIDTH: u16 = 8;
/// The case names' column: as wide as the longest name, between these.
const NAME_WIDTHS: (u16, u16) = (12, 30);

/// The widths the table's text is fitted to before drawing, so that a cell
/// too long for its column is cut between words rather than mid-word.
#[derive(Debug, Clone, Copy)]
struct Columns {
    name: u16,
    diagnosis: usize,
}

impl Columns {
    fn for_table(model: &Model, area: Rect) -> Self {
        let longest = model.cases.iter().map(|c| c.name.chars().count()).max();
        let name = (longest.unwrap_or(0) as u16).clamp(NAME_WIDTHS.0, NAME_WIDTHS.1);
        // The panel's two borders and one column of spacing between each two.
        let fixed = 2 + RESULT_WIDTH + name + SHAPE_WIDTH + ERROR_WIDTH + HEADROOM_WIDTH + 5;
        Self {
            name,
            diagnosis: usize::from(area.width.saturating_sub(fixed)),
        }
    }
}

/// The seed the cases on screen drew their inputs from, and the key that
/// copies the command to draw them again (not in a replay, which has no
/// session options to copy).
fn seed_words(model: &Model) -> String {
    let Some(last) = &model.last else {
        return String::new();
    };
    let copy = match model.reproduce {
        Some(_) => ", y copies the command",
        None => "",
    };
    format!(" · seed {}{copy}", last.report.seed)
}

/// The selected case's whole diagnosis, wrapped under the table: the
/// table's column cuts it, and a student needs all of it.
pub fn draw_detail(frame: &mut Frame, area: Rect, model: &Model, max_lines: usize) {
    let (name, _) = detail(model);
    let lines: Vec<Line> = detail_lines(model, area.width, max_lines)
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            if i == 0 {
                let rest = text.strip_prefix(&name).unwrap_or(&text).to_owned();
                Line::from(vec![
                    Span::styled(name.clone(), model.theme.accent()),
                    Span::raw(rest),
                ])
            } else {
                Line::raw(text)
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

/// Rows the detail needs at `width`, at most `max_lines`.
pub fn detail_height(model: &Model, width: u16, max_lines: usize) -> u16 {
    if model.cases.is_empty() {
        return 0;
    }
    detail_lines(model, width, max_lines).len() as u16
}

fn detail_lines(model: &Model, width: u16, max_lines: usize) -> Vec<String> {
    let (name, words) = detail(model);
    let width = usize::from(width);
    at_most(
        wrap_words(&format!("{name} {words}"), width),
        max_lines,
        width,
    )
}

/// The selected case's label (`▸ name:`) and what is known of it.
fn detail(model: &Model) -> (String, String) {
    let Some(row) = model.cases.get(model.selected) else {
        return (String::new(), String::new());
    };
    let label = format!("▸ {}:", row.name);
    let words = match model.case(model.selected) {
        CaseCell::Waiting => format!("{}, waiting", row.shape.detail),
        CaseCell::Running => format!("{}, running", row.shape.detail),
        CaseCell::Provisional(outcome) => format!("~ {}", diagnosis(outcome, model)),
        CaseCell::Done(shown) => diagnosis(shown.value, model),
    };
    (label, words)
}

fn plain_row(name: &str, shape: String, state: &'static str, style: Style) -> Row<'static> {
    Row::new([
        Cell::from(Line::styled(state, style)),
        Cell::from(name.to_owned()),
        Cell::from(shape),
    ])
}

fn outcome_row(
    name: &str,
    shape: String,
    case: &CaseOutcome,
    (word, style): (&'static str, Style),
    model: &Model,
    columns: Columns,
) -> Row<'static> {
    let (max_err, headroom) = error_cells(case);
    Row::new([
        Cell::from(Line::styled(word, style)),
        Cell::from(name.to_owned()),
        Cell::from(shape),
        Cell::from(max_err),
        Cell::from(headroom),
        // The whole diagnosis is under the table for the selected case.
        Cell::from(between_words(&diagnosis(case, model), columns.diagnosis)),
    ])
}

/// A case's result as a glyph and a word, and the style it is drawn in.
pub(super) fn status_word(status: CaseStatus, theme: Theme) -> (&'static str, Style) {
    match status {
        CaseStatus::Pass => ("✓ pass", theme.good()),
        CaseStatus::Fail => ("✗ FAIL", theme.bad()),
        CaseStatus::Timeout => ("✗ HANG", theme.bad()),
        CaseStatus::Crash => ("✗ CRASH", theme.bad()),
        CaseStatus::NotRun => ("not run", Style::new()),
    }
}

/// A quick build's verdict: `~` in place of the glyph, until the optimized
/// build's verdict replaces it.
fn provisional_word(status: CaseStatus, theme: Theme) -> (&'static str, Style) {
    let (_, style) = status_word(status, theme);
    let word = match status {
        CaseStatus::Pass => "~ pass",
        CaseStatus::Fail => "~ FAIL",
        CaseStatus::Timeout => "~ HANG",
        CaseStatus::Crash => "~CRASH",
        CaseStatus::NotRun => "not run",
    };
    (word, style)
}

/// The max error and headroom cells, "-" for a case with no output.
pub(super) fn error_cells(case: &CaseOutcome) -> (String, String) {
    match &case.comparison {
        None => ("-".to_string(), "-".to_string()),
        Some(c) => {
            let err = if c.max_abs_err.is_finite() && c.nan + c.inf + c.unwritten == 0 {
                format!("{:.1e}", c.max_abs_err)
            } else {
                "NaN/inf".to_string()
            };
            (err, headroom(c.worst_ratio))
        }
    }
}

/// The case's diagnosis, except that a case skipped for want of a GPU says
/// just that: the header already explains the missing GPU once. (A
/// kernel that did not compile keeps its own reason.)
fn diagnosis(case: &CaseOutcome, model: &Model) -> String {
    let no_gpu = model.gpu.as_ref().is_some_and(|g| g.is_err());
    let compiled = model.compile().is_some_and(|c| c.value.ok);
    if case.status == CaseStatus::NotRun && no_gpu && compiled {
        "needs a GPU".into()
    } else {
        case.diagnosis.clone()
    }
}

/// Tolerance left unused by the worst element: "88%" when it used 12%;
/// past the tolerance, how many times over ("x3.2").
fn headroom(worst_ratio: f64) -> String {
    if !worst_ratio.is_finite() {
        "none".into()
    } else if worst_ratio <= 1.0 {
        format!("{:.0}%", (1.0 - worst_ratio) * 100.0)
    } else {
        format!("x{worst_ratio:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::headroom;

    #[test]
    fn headroom_reads_as_share_left_then_times_over() {
        assert_eq!(headroom(0.12), "88%");
        assert_eq!(headroom(1.0), "0%");
        assert_eq!(headroom(3.21), "x3.2");
        assert_eq!(headroom(f64::INFINITY), "none");
    }
}
