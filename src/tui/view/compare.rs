//! The compare screen, a function of `&CompareModel` only.
//!
//! One table pairs every case across the two kernels, with a marker column
//! first so a difference is seen before it is read; under it one panel per
//! kernel says how it compiled, how fast it ran and what its counters
//! concluded. The cells are drawn by the same helpers as the single-file
//! screen and the markers come from `report::compare`, so the screen, the
//! printed table and the JSON never disagree about a case.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::{cases, compile, header, help, text};
use crate::facts::byte_size;
use crate::outcome::CheckReport;
use crate::protocol::{CaseOutcome, CompileOutcome};
use crate::report::compare::{a_over_b, case_rows, ERROR_DIFFERS, VERDICT_DIFFERS};
use crate::tui::compare::keys::help_rows;
use crate::tui::compare::model::{Column, CompareModel, Comparison};
use crate::tui::model::CountersView;
use crate::tui::theme::Theme;

/// Lines each kernel's panel gets at least, its title included.
const SIDE_MIN_HEIGHT: u16 = 6;

pub fn draw(frame: &mut Frame, model: &CompareModel) {
    let area = frame.area();
    // Borders and the column titles aside, the table needs a line per case.
    let table_height = u16::try_from(model.cases.len() + 2).unwrap_or(u16::MAX);
    let [top, table, sides, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_height),
        Constraint::Min(SIDE_MIN_HEIGHT),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, top, model);
    draw_cases(frame, table, model);
    let [left, right] =
        Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(sides);
    draw_side(frame, left, model, Column::A);
    draw_side(frame, right, model, Column::B);
    draw_footer(frame, footer, model);
    if model.help {
        help::draw_rows(frame, area, help_rows(), model.theme);
    }
    super::neutralise_controls(frame);
}

fn draw_header(frame: &mut Frame, area: Rect, model: &CompareModel) {
    let theme = model.theme;
    let line = Line::from(vec![
        Span::styled("flashprof compare  ", theme.accent()),
        Span::raw(format!("A: {}  B: {}  ", model.files.a, model.files.b)),
        header::gpu_span(model.gpu.as_ref(), theme),
    ]);
    frame.render_widget(Paragraph::new(line), area);
}

/// A panel open at the bottom and sides, so two stacked panels share lines.
fn top_rule(title: Line<'static>) -> Block<'static> {
    Block::new().borders(Borders::TOP).title(title)
}

/// The table's title: what is running, or whether the table is stale.
fn cases_title(model: &CompareModel) -> Line<'static> {
    let theme = model.theme;
    let mut spans = vec![Span::styled(" cases ", theme.accent())];
    match &model.live {
        Some(live) => {
            let doing = header::phase_words(live.phase, &model.cases);
            spans.push(Span::styled(
                format!("checking {}: {doing} ", live.column.letter()),
                theme.warn(),
            ));
            if model.rerun_waiting {
                spans.push(Span::raw("(a newer save waits) "));
            }
        }
        None if model.last.is_none() => spans.push(Span::raw("waiting for both files ")),
        None => {}
    }
    if model.last.is_some() && model.last_is_stale() {
        spans.push(Span::styled("(previous save) ", theme.stale()));
    }
    Line::from(spans)
}

fn draw_cases(frame: &mut Frame, area: Rect, model: &CompareModel) {
    let theme = model.theme;
    let mut block = top_rule(cases_title(model));
    let rows: Vec<Row> = match &model.last {
        Some(last) => {
            // While a comparison runs its progress needs the title's room.
            let ratio = a_over_b(&last.reports.a, &last.reports.b);
            if let Some(ratio) = ratio.filter(|_| model.live.is_none()) {
                let speed = format!(" A runs {ratio:.2}x as fast as B ");
                block = block.title(Line::styled(speed, theme.accent()).right_aligned());
            }
            compared_rows(last, model)
        }
        None => model
            .cases
            .iter()
            .map(|case| {
                let waiting = || Cell::from("waiting");
                Row::new([
                    Cell::from(""),
                    Cell::from(case.name.clone()),
                    waiting(),
                    Cell::from(""),
                    Cell::from(""),
                    waiting(),
                ])
            })
            .collect(),
    };
    let header = Row::new(["", "case", "A", "max err", "room", "B", "max err", "room"])
        .style(theme.accent());
    let widths = [1, 24, 7, 7, 5, 7, 7, 5].map(Constraint::Length);
    let table = Table::new(rows, widths).header(header).block(block);
    frame.render_widget(table, area);
}

fn compared_rows(last: &Comparison, model: &CompareModel) -> Vec<Row<'static>> {
    let theme = model.theme;
    let row_style = if model.last_is_stale() {
        theme.stale()
    } else {
        Style::new()
    };
    let outcome = |report: &CheckReport, name: &str| {
        report
            .cases
            .iter()
            .find(|c| c.name == name)
            .map(|c| side_cells(c, theme))
            .unwrap_or_else(|| [Cell::from("-"), Cell::from(""), Cell::from("")])
    };
    case_rows(&last.reports.a, &last.reports.b)
        .into_iter()
        .map(|row| {
            let marker = Cell::from(Line::styled(row.marker, theme.warn()));
            let [a_word, a_err, a_room] = outcome(&last.reports.a, &row.name);
            let [b_word, b_err, b_room] = outcome(&last.reports.b, &row.name);
            Row::new([
                marker,
                Cell::from(row.name),
                a_word,
                a_err,
                a_room,
                b_word,
                b_err,
                b_room,
            ])
            .style(row_style)
        })
        .collect()
}

/// One kernel's result, max error and headroom for one case.
fn side_cells(case: &CaseOutcome, theme: Theme) -> [Cell<'static>; 3] {
    let (word, style) = cases::status_word(case.status, theme);
    let (err, room) = cases::error_cells(case);
    [
        Cell::from(Line::styled(word, style)),
        Cell::from(err),
        Cell::from(room),
    ]
}

fn draw_side(frame: &mut Frame, area: Rect, model: &CompareModel, column: Column) {
    let theme = model.theme;
    let mut title = vec![Span::styled(
        format!(" {}: {} ", column.letter(), model.files.get(column)),
        theme.accent(),
    )];
    if *model.gone.get(column) {
        title.push(Span::styled(
            "deleted; waiting for it to come back ",
            theme.warn(),
        ));
    }
    let report = model.last.as_ref().map(|last| last.reports.get(column));
    let lines = match report {
        Some(report) => {
            let mut after = vec![Span::raw(" ")];
            if model.last_is_stale() {
                after.push(Span::styled("(previous save) ", theme.stale()));
            }
            // The verdict gives way, between its words, to what is around it.
            let taken: usize = title.iter().chain(&after).map(Span::width).sum();
            let mut verdict = header::verdict(report, theme);
            verdict.content = text::between_words(
                &verdict.content,
                (area.width as usize).saturating_sub(taken),
            )
            .into();
            title.push(verdict);
            title.extend(after);
            side_lines(report, theme)
        }
        None => vec![Line::raw("no comparison yet")],
    };
    let body = Paragraph::new(lines)
        .block(top_rule(Line::from(title)))
        .wrap(Wrap { trim: false });
    frame.render_widget(body, area);
}

/// Timing, the counters' verdict and the build's resources first (one line
/// each), then what the compiler said; a kernel that did not compile has only the latter.
fn side_lines(report: &CheckReport, theme: Theme) -> Vec<Line<'static>> {
    let compiled = compile::outcome_lines(&report.compile, false, theme);
    if !report.compile.ok {
        return compiled;
    }
    let mut lines = vec![timing_line(report, theme)];
    lines.extend(diagnosis_line(report, theme));
    lines.extend(counters_line(report, theme));
    // What each side's build uses, side by side: with no GPU, the one
    // difference between two builds there is to see.
    lines.extend(resources_line(&report.compile, theme));
    lines.extend(compiled);
    lines
}

/// Registers, shared memory, spills and occupancy in one short line (the
/// resources panel's words), so two builds read across at 80 columns; each
/// item's own spaces do not break, so a narrow panel wraps between items.
fn resources_line(compile: &CompileOutcome, theme: Theme) -> Option<Line<'static>> {
    let usage = compile.resources.as_ref()?;
    let mut items = vec![
        format!("{} regs", usage.registers),
        format!("smem {}", byte_size(usage.static_smem_bytes)),
        format!("spills {}", byte_size(usage.spill_bytes())),
    ];
    if let Some(occupancy) = &compile.occupancy {
        items.push(format!("occupancy {:.0}%", occupancy.fraction * 100.0));
    }
    let items: Vec<String> = items.iter().map(|i| i.replace(' ', "\u{a0}")).collect();
    Some(Line::from(vec![
        Span::styled("resources ", theme.accent()),
        Span::raw(items.join(" · ")),
    ]))
}

/// The check's one line, when some case failed.
fn diagnosis_line(report: &CheckReport, theme: Theme) -> Option<Line<'static>> {
    if report.all_passed() {
        return None;
    }
    Some(Line::from(vec![
        Span::styled("diagnosis ", theme.accent()),
        Span::styled(report.diagnosis_line()?, theme.bad()),
    ]))
}

fn timing_line(report: &CheckReport, theme: Theme) -> Line<'static> {
    match (&report.timing, &report.timing_error) {
        (Some(t), _) => {
            let median = Span::raw(format!("kernel {:.3} ms, ", t.student.median));
            let speedup = match &t.speedup {
                Some(s) => Span::styled(format!("{:.2}x the starter", s.point), theme.accent()),
                None => Span::styled(
                    format!(
                        "speedup withheld: {}",
                        t.withheld_word().unwrap_or_default()
                    ),
                    theme.bad(),
                ),
            };
            Line::from(vec![median, speedup])
        }
        (None, Some(error)) => Line::styled(format!("not timed: {error}"), theme.warn()),
        (None, None) if report.gpu.is_err() => Line::raw("not timed: no GPU"),
        (None, None) => Line::raw("not timed"),
    }
}

/// The counters' leading line (their verdict), when counters were asked for.
fn counters_line(report: &CheckReport, theme: Theme) -> Option<Line<'static>> {
    let view = CountersView::from_result(report.counters.last()?);
    let text = match view {
        // The first line is the verdict: the bound, then the unit that decided it.
        CountersView::Collected { lines, .. } => {
            let (bound, reason) = lines.into_iter().next()?;
            format!("{bound}: {reason}")
        }
        CountersView::Unavailable { reason } => format!("unavailable: {reason}"),
    };
    Some(Line::from(vec![
        Span::styled("counters ", theme.accent()),
        Span::raw(text),
    ]))
}

fn draw_footer(frame: &mut Frame, area: Rect, model: &CompareModel) {
    let line = match &model.notice {
        Some(notice) => Line::styled(notice.clone(), model.theme.warn()),
        None => Line::raw(format!(
            "q quit  r rerun  ? help   {VERDICT_DIFFERS} verdicts differ  {ERROR_DIFFERS} max errors 10x apart"
        )),
    };
    frame.render_widget(Paragraph::new(line), area);
}
