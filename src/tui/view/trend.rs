//! The per-save trend: speedup, registers and max error over the file's
//! past checks, one strip each, the newest figure beside its plot.
//!
//! Each strip is a braille line plot (two points per cell across, four up),
//! scaled to its own range: the figures have nothing in common but the
//! saves. The max error is plotted on a log scale, where a fix that takes it
//! from 1e-1 to 1e-4 reads as the drop it is; NaN or inf sits at the top.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Color;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::canvas::{Canvas, Line as Segment, Points};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::app::history::RunOutcome;
use crate::tui::model::Model;

/// One figure of a check, plotted across saves.
struct Series {
    label: &'static str,
    figure: fn(&RunOutcome) -> Option<f64>,
    /// The newest value as the label shows it.
    show: fn(f64) -> String,
    log_scale: bool,
    color: Color,
}

const SERIES: [Series; 3] = [
    Series {
        label: "speedup",
        // A wrong kernel's speed is no result: a failing run's stays out.
        figure: |o| o.speedup.filter(|_| o.all_passed),
        show: |x| format!("{x:.2}x"),
        log_scale: false,
        color: Color::Cyan,
    },
    Series {
        label: "regs",
        figure: |o| o.registers.map(f64::from),
        show: |x| format!("{x:.0}"),
        log_scale: false,
        color: Color::Magenta,
    },
    Series {
        label: "max err",
        figure: |o| o.max_error,
        show: |x| {
            if x.is_finite() {
                format!("{x:.0e}")
            } else {
                "NaN".into()
            }
        },
        log_scale: true,
        color: Color::Yellow,
    },
];

/// Width of the label column: `speedup 23.50x `.
const LABEL_WIDTH: u16 = 15;

/// The trend plots in `area`, as many series as there are rows for (the
/// speedup first); nothing before the second check.
pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    if area.height == 0 || model.history.len() < 2 {
        return;
    }
    let strips = SERIES.len().min(usize::from(area.height));
    // A blank row between strips once each can have two rows of plot.
    let spacing = u16::from(area.height >= 8);
    let rows = Layout::vertical((0..strips).map(|_| Constraint::Fill(1)))
        .spacing(spacing)
        .split(area);
    for (series, &strip) in SERIES.iter().zip(rows.iter()) {
        draw_series(frame, strip, model, series);
    }
}

fn draw_series(frame: &mut Frame, area: Rect, model: &Model, series: &Series) {
    let [label_area, plot_area] =
        Layout::horizontal([Constraint::Length(LABEL_WIDTH), Constraint::Fill(1)]).areas(area);
    let values = model.trend(series.figure);
    let newest = values.iter().rev().flatten().next().copied();
    let mut label = vec![Line::from(vec![
        Span::styled(format!("{} ", series.label), model.theme.accent()),
        Span::raw(newest.map_or("-".into(), series.show)),
    ])];
    // With a second row, the range the strip spans: a plot without a scale
    // shows a shape, not how far it moved.
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    let lowest = known.iter().copied().reduce(f64::min);
    let highest = known.iter().copied().reduce(f64::max);
    if let (Some(lo), Some(hi), true) = (lowest, highest, label_area.height >= 2) {
        if lo < hi {
            let range = format!("{}..{}", (series.show)(lo), (series.show)(hi));
            label.push(Line::styled(range, model.theme.stale()));
        }
    }
    frame.render_widget(Paragraph::new(label), label_area);
    // Two braille points per cell: the newest saves that fit.
    let room = usize::from(plot_area.width) * 2;
    let shown = &values[values.len().saturating_sub(room)..];
    let scaled: Vec<Option<f64>> = shown
        .iter()
        .map(|v| v.map(|x| if series.log_scale { log_or_top(x) } else { x }))
        .collect();
    let finite = scaled.iter().flatten().filter(|y| y.is_finite());
    let (low, high) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &y| {
        (lo.min(y), hi.max(y))
    });
    if low > high {
        return;
    }
    // A flat series sits mid-strip; a varying one fills it.
    let pad = if high > low { 0.0 } else { 1.0 };
    let (low, high) = (low - pad, high + pad);
    let points: Vec<Option<(f64, f64)>> = scaled
        .iter()
        .enumerate()
        .map(|(i, v)| v.map(|y| (i as f64, if y.is_finite() { y } else { high })))
        .collect();
    let color = model.theme.plot(series.color);
    let canvas = Canvas::default()
        .marker(Marker::Braille)
        // Few saves stretch across the strip; many scroll, newest right.
        .x_bounds([0.0, (shown.len().max(2) - 1) as f64])
        .y_bounds([low, high])
        .paint(move |ctx| {
            for pair in points.windows(2) {
                if let [Some((x1, y1)), Some((x2, y2))] = *pair {
                    ctx.draw(&Segment::new(x1, y1, x2, y2, color));
                }
            }
            let dots: Vec<(f64, f64)> = points.iter().flatten().copied().collect();
            ctx.draw(&Points {
                coords: &dots,
                color,
            });
        });
    frame.render_widget(canvas, plot_area);
}

/// log10 of an error, +inf (drawn at the top) for NaN or inf, and a floor
/// for an exact zero so it stays on the plot.
fn log_or_top(error: f64) -> f64 {
    if error.is_finite() {
        error.max(1e-12).log10()
    } else {
        f64::INFINITY
    }
}
