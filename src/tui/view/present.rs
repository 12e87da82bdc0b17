//! Lecture mode: the same model drawn for a projector. Two numbers in
//! block digits (the speedup over the starter and the cases passed; in
//! words instead where the number would mislead: `fails 6 of 14` for a
//! wrong kernel's speed, `not run: no GPU` for cases that never ran), and
//! one large panel under them that shows whatever explains those numbers
//! best: the compile error, the heatmap of a failing case, or every case
//! at a glance beside the roofline plot (or the trend over the saves). Thick borders and bold text survive a washed-out beamer.
//!
//! The panel picks its own content so a lecturer never has to drive it;
//! the usual keys still work (tab to the next failing case, `?` for help,
//! and in a replay space, n/p and +/-).

use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Paragraph, Wrap};
use ratatui::Frame;

use super::{bigtext, compile, header, heatmap, roofline, trend};
use crate::protocol::{CaseOutcome, CaseStatus};
use crate::tui::model::{CaseCell, Model, TimingCell};

/// Widest heatmap cell in lecture mode: wider cells are easier to point at.
const WIDEST_HEAT_CELL: usize = 4;

pub fn draw(frame: &mut Frame, model: &Model) {
    let area = frame.area();
    let digits_height = (area.height / 3).clamp(7, 20);
    let verdict = check_diagnosis(model);
    let verdict_height = if verdict.is_some() { 2 } else { 0 };
    let [top, numbers, said, detail, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(digits_height),
        Constraint::Length(verdict_height),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    if let Some(line) = verdict {
        let style = bold(model.theme.bad());
        frame.render_widget(
            Paragraph::new(Line::styled(line, style)).wrap(Wrap { trim: true }),
            said,
        );
    }
    header::draw(frame, top, model);
    let [speedup, passed] =
        Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(numbers);
    draw_speedup(frame, speedup, model);
    draw_passed(frame, passed, model);
    draw_detail(frame, detail, model);
    header::draw_footer(frame, footer, model);
}

/// The last check's one line, when some case failed (the lecture's
/// sentence under the numbers).
fn check_diagnosis(model: &Model) -> Option<String> {
    let report = &model.last.as_ref()?.report;
    if report.all_passed() || !report.compile.ok {
        return None;
    }
    report.diagnosis_line()
}

fn framed(title: &str, caption: String, style: Style) -> Block<'static> {
    let block = Block::bordered()
        .border_type(BorderType::Thick)
        .border_style(style)
        .title(Span::styled(format!(" {title} "), style));
    if caption.is_empty() {
        return block;
    }
    block.title_bottom(Span::styled(format!(" {caption} "), style))
}

fn bold(style: Style) -> Style {
    style.add_modifier(Modifier::BOLD)
}

/// What a number panel shows: a figure worth block digits, or, when there
/// is no figure to trust, words saying why, at the size of text.
enum Figure {
    Digits(String),
    Words(String),
}

/// `figure` centred in `area`: digits in the largest blocks that fit.
fn draw_figure(frame: &mut Frame, area: Rect, figure: &Figure, style: Style) {
    let text = match figure {
        Figure::Digits(text) => match bigtext::fitting_scale(text, area.width, area.height) {
            Some(scale) => return draw_digits(frame, area, text, scale, style),
            // Too small for digits: the plain number still says it.
            None => text,
        },
        Figure::Words(text) => text,
    };
    let middle = Rect::new(
        area.x,
        area.y + area.height / 2,
        area.width,
        1.min(area.height),
    );
    frame.render_widget(
        Paragraph::new(Span::styled(text.clone(), style)).alignment(Alignment::Center),
        middle,
    );
}

/// `text` in block digits at `scale`, centred in `area`.
fn draw_digits(frame: &mut Frame, area: Rect, text: &str, scale: u16, style: Style) {
    let (width, height) = bigtext::size(text, scale);
    let centred = Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height - height) / 2,
        width,
        height,
    );
    let rows: Vec<Line> = bigtext::render(text, scale)
        .into_iter()
        .map(|row| Line::styled(row, style))
        .collect();
    frame.render_widget(Paragraph::new(rows), centred);
}

/// The cases on screen (the running check's, else the last one's) by verdict.
struct Tally {
    total: usize,
    passed: usize,
    /// Failed, hung or crashed.
    failed: usize,
}

impl Tally {
    fn of(model: &Model) -> Self {
        let statuses: Vec<CaseStatus> = (0..model.cases.len())
            .filter_map(|i| model.case_outcome(i).map(|c| c.status))
            .collect();
        let count =
            |wanted: fn(CaseStatus) -> bool| statuses.iter().filter(|&&s| wanted(s)).count();
        Self {
            total: model.cases.len(),
            passed: count(|s| s == CaseStatus::Pass),
            failed: model.cases_failed(),
        }
    }

    fn ran(&self) -> usize {
        self.passed + self.failed
    }
}

/// The speedup in digits only for a kernel whose every case that ran
/// passed: a wrong kernel's speed is no result, however fast.
fn draw_speedup(frame: &mut Frame, area: Rect, model: &Model) {
    let theme = model.theme;
    let shown = model.timing();
    let tally = Tally::of(model);
    let words = |text: &str| Figure::Words(text.to_owned());
    let (figure, caption, style) = match shown.map(|s| s.value) {
        // The time a wrong kernel took goes in the caption, in small print.
        timing if tally.failed > 0 => {
            let caption = match timing {
                Some(TimingCell::Timed(t)) => t.speedup.as_ref().map_or(String::new(), |s| {
                    format!("{:.2}x when timed, not counted", s.point)
                }),
                Some(TimingCell::Failed(reason)) => reason.to_owned(),
                Some(TimingCell::Running) | None => String::new(),
            };
            let fails = format!("fails {} of {}", tally.failed, tally.total);
            (Figure::Words(fails), caption, theme.bad())
        }
        Some(TimingCell::Timed(t)) => match &t.speedup {
            Some(s) => {
                let noisy = if s.noisy { ", noisy" } else { "" };
                let style = if s.point >= 1.0 {
                    theme.good()
                } else {
                    theme.bad()
                };
                // A lab graded on bytes leads with its own measure: the
                // share of the memory roof, short enough for 80 columns.
                let caption = match &t.bandwidth {
                    Some(b) => format!(
                        "{:.0}% of memory roof, {:.2}-{:.2}x{noisy}",
                        b.share() * 100.0,
                        s.ci_low,
                        s.ci_high
                    ),
                    None => format!("interval {:.2}-{:.2}{noisy}", s.ci_low, s.ci_high),
                };
                (Figure::Digits(format!("{:.2}x", s.point)), caption, style)
            }
            None => (
                Figure::Words(format!(
                    "withheld: {}",
                    t.withheld_word().unwrap_or_default()
                )),
                String::new(),
                theme.bad(),
            ),
        },
        Some(TimingCell::Running) => (words("timing..."), String::new(), theme.warn()),
        Some(TimingCell::Failed(reason)) => (words(reason), String::new(), theme.warn()),
        None if model.gpu.as_ref().is_some_and(|g| g.is_err()) => {
            (words("not timed: no GPU"), String::new(), theme.warn())
        }
        None => (words("not timed yet"), String::new(), Style::new()),
    };
    let stale = if shown.is_some_and(|s| s.stale) {
        " (previous save)"
    } else {
        ""
    };
    let block = framed(
        &format!("SPEEDUP over the starter{stale}"),
        caption,
        bold(style),
    );
    let inner = block.inner(area);
    frame.render_widget(block, area);
    draw_figure(frame, inner, &figure, bold(style));
}

/// The pass count in digits once a case has run; before that (or when none
/// can run), why not, in words.
fn draw_passed(frame: &mut Frame, area: Rect, model: &Model) {
    let theme = model.theme;
    let tally = Tally::of(model);
    let compiled = model.compile().map(|c| c.value.ok);
    let (caption, style) = if model.live.is_some() {
        ("checking...", theme.warn())
    } else if compiled == Some(false) {
        ("not run: compile error", theme.bad())
    } else if model.gpu.as_ref().is_some_and(|g| g.is_err()) {
        ("not run: no GPU", theme.warn())
    } else if tally.passed == tally.total && tally.total > 0 {
        ("all pass", theme.good())
    } else if compiled.is_none() {
        ("waiting for the first check", Style::new())
    } else if tally.failed == 0 {
        ("not run", theme.warn())
    } else {
        ("some fail", theme.bad())
    };
    let (figure, caption) = if tally.ran() > 0 {
        let count = format!("{}/{}", tally.passed, tally.total);
        (Figure::Digits(count), caption.to_owned())
    } else {
        (Figure::Words(caption.to_owned()), String::new())
    };
    let block = framed("CASES PASSED", caption, bold(style));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    draw_figure(frame, inner, &figure, bold(style));
}

/// The panel that explains the numbers.
fn draw_detail(frame: &mut Frame, area: Rect, model: &Model) {
    let compile_failed = model.compile().is_some_and(|c| !c.value.ok);
    let no_gpu = model.gpu.as_ref().is_some_and(|g| g.is_err());
    if compile_failed || no_gpu {
        compile::draw(frame, area, model);
    } else if let Some(case) = case_to_map(model) {
        heatmap::draw_framed(
            frame,
            area,
            model,
            case,
            " tab next failing ",
            WIDEST_HEAT_CELL,
        );
    } else if area.width >= 80 && (model.roofline.is_some() || model.history.len() >= 2) {
        // Everything passes: the cases at a glance, and beside them where
        // the kernel sits under the roofs or, without counters, how the
        // saves got here (a replay of the ladder moves both).
        let [cases, side] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Fill(1)]).areas(area);
        draw_case_grid(frame, cases, model);
        let style = bold(model.theme.accent());
        let block = match model.roofline {
            Some(_) => framed("roofline", "c every counter".into(), style),
            None => framed(
                "over the saves",
                "speedup, registers, max error".into(),
                style,
            ),
        };
        let inner = block.inner(side);
        frame.render_widget(block, side);
        match model.roofline_plot() {
            Some(plot) => roofline::draw(frame, inner, &plot, model.theme),
            None => trend::draw(frame, inner, model),
        }
    } else {
        draw_case_grid(frame, area, model);
    }
}

/// The selected case when it failed with a map to show, else the first such.
fn case_to_map(model: &Model) -> Option<&CaseOutcome> {
    let mappable = |i: usize| {
        model
            .case_outcome(i)
            .filter(|c| c.status != CaseStatus::Pass && c.comparison.is_some())
    };
    mappable(model.selected).or_else(|| (0..model.cases.len()).find_map(mappable))
}

/// Every case as a mark and its name, in as many columns as fit.
fn draw_case_grid(frame: &mut Frame, area: Rect, model: &Model) {
    let theme = model.theme;
    let block = framed("cases", "tab next failing".into(), bold(theme.accent()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let name_width = model.cases.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let cell_width = name_width + 12;
    let columns = (usize::from(inner.width) / cell_width).max(1);
    let rows = model.cases.len().div_ceil(columns);
    let lines: Vec<Line> = (0..rows)
        .map(|row| {
            let spans = (0..columns)
                .map(|column| column * rows + row)
                .filter(|&i| i < model.cases.len())
                .map(|i| {
                    let (mark, style) = match model.case(i) {
                        CaseCell::Waiting => ("  ...  ", Style::new()),
                        CaseCell::Running => ("  run  ", theme.warn()),
                        // The quick build's verdict, until the optimized build's.
                        CaseCell::Provisional(outcome) => match outcome.status {
                            CaseStatus::Pass => (" ~ pass", theme.good()),
                            CaseStatus::NotRun => ("not run", Style::new()),
                            CaseStatus::Fail => (" ~ FAIL", theme.bad()),
                            CaseStatus::Timeout => (" ~ HANG", theme.bad()),
                            CaseStatus::Crash => ("~ CRASH", theme.bad()),
                        },
                        CaseCell::Done(shown) => match shown.value.status {
                            CaseStatus::Pass => (" ✓ pass", theme.good()),
                            CaseStatus::NotRun => ("not run", Style::new()),
                            CaseStatus::Fail => (" ✗ FAIL", theme.bad()),
                            CaseStatus::Timeout => (" ✗ HANG", theme.bad()),
                            CaseStatus::Crash => ("✗ CRASH", theme.bad()),
                        },
                    };
                    let text = format!("{mark}  {:<name_width$}   ", model.cases[i].name);
                    let style = bold(style);
                    if i == model.selected {
                        Span::styled(text, style.patch(theme.selected()))
                    } else {
                        Span::styled(text, style)
                    }
                })
                .collect::<Vec<_>>();
            Line::from(spans)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
