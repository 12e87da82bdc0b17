//! The roofline plot: arithmetic intensity (flop per DRAM byte) across,
//! useful FLOP/s up, both on log scales. Every roof is drawn: a compute
//! roof flat from where the highest memory roof meets it, a memory roof
//! rising (slope one on log-log axes) until it meets the highest compute
//! roof. The kernel (`●`) and the starter (`○`) are points, so a
//! student sees which roof is above the kernel and how far it is.
//!
//! Takes any list of roofs, so a GPU with more units (tensor pipes, L2,
//! shared memory) gets more lines without a change here.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::canvas::{Canvas, Context, Line as Segment};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::tui::plot::{PlotRoof, RoofKind, RooflinePlot};
use crate::tui::theme::Theme;

/// Rows under which the plot says nothing useful.
pub const MIN_HEIGHT: u16 = 5;

/// Log-scale bounds of the plot.
struct Bounds {
    x: [f64; 2],
    y: [f64; 2],
}

/// Draws `plot` into `area`: the plot, then a caption line naming the marks.
pub fn draw(frame: &mut Frame, area: Rect, plot: &RooflinePlot, theme: Theme) {
    if area.height < MIN_HEIGHT || area.width < 12 {
        return;
    }
    let [plot_area, caption_area] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(area);
    let Some(bounds) = bounds(plot) else {
        frame.render_widget(Paragraph::new("no roofs to plot"), area);
        return;
    };
    let span = format!(
        "{}..{} flop/B",
        power_of_ten(bounds.x[0]),
        power_of_ten(bounds.x[1])
    );
    // The axes' names when they fit; the marks always.
    let axes = if caption_area.width >= 46 {
        format!("{span} →, FLOP/s ↑")
    } else {
        span
    };
    let caption = Line::from(vec![
        Span::styled("●", theme.good()),
        Span::raw(" kernel  ○ starter  "),
        Span::styled(axes, theme.stale()),
    ]);
    frame.render_widget(Paragraph::new(caption), caption_area);
    // One cell's size in plot units, to place labels by cells.
    let cell_x = (bounds.x[1] - bounds.x[0]) / f64::from(plot_area.width);
    let cell_y = (bounds.y[1] - bounds.y[0]) / f64::from(plot_area.height);
    let canvas = Canvas::default()
        .marker(Marker::Braille)
        .x_bounds(bounds.x)
        .y_bounds(bounds.y)
        .paint(|ctx| {
            for roof in &plot.roofs {
                draw_roof(ctx, roof, plot, &bounds, theme, (cell_x, cell_y));
            }
            ctx.layer();
            for point in &plot.points {
                let style = if point.name == "kernel" {
                    theme.good()
                } else {
                    Style::new()
                };
                let (x, y) = (point.flop_per_byte.log10(), point.flops_per_s.log10());
                ctx.print(
                    x,
                    y.clamp(bounds.y[0], bounds.y[1]),
                    Span::styled(point.mark, style),
                );
            }
        });
    frame.render_widget(canvas, plot_area);
}

fn draw_roof(
    ctx: &mut Context,
    roof: &PlotRoof,
    plot: &RooflinePlot,
    bounds: &Bounds,
    theme: Theme,
    (cell_x, cell_y): (f64, f64),
) {
    let [x_lo, x_hi] = bounds.x;
    let text = roof_label(roof);
    let label_width = text.chars().count() as f64 * cell_x;
    let label = Span::styled(text, theme.stale());
    match roof.kind {
        RoofKind::Compute { flops_per_s } => {
            let y = flops_per_s.log10();
            let start = highest(plot, Memory).map_or(x_lo, |bw| (flops_per_s / bw).log10());
            let color = theme.plot(Color::Red);
            ctx.draw(&Segment::new(start.max(x_lo), y, x_hi, y, color));
            // On its own line, at the right end: roofs a row apart keep
            // their names apart.
            ctx.print(x_hi - label_width, y, label);
        }
        RoofKind::Memory { bytes_per_s } => {
            let slope_at = |x: f64| bytes_per_s.log10() + x;
            let end = highest(plot, Compute).map_or(x_hi, |peak| (peak / bytes_per_s).log10());
            let end = end.min(x_hi);
            let color = theme.plot(Color::Blue);
            ctx.draw(&Segment::new(
                x_lo,
                slope_at(x_lo),
                end,
                slope_at(end),
                color,
            ));
            // Under the line, a quarter of the way along: the rising line
            // moves away from the text, and no flat roof is that low.
            let x = x_lo + (end - x_lo) / 4.0;
            ctx.print(x + cell_x, slope_at(x) - cell_y, label);
        }
    }
}

/// A roof's name and its peak in three figures: `FP32 66.9T`, `DRAM 4.80TB/s`.
fn roof_label(roof: &PlotRoof) -> String {
    match roof.kind {
        RoofKind::Compute { flops_per_s } => {
            format!("{} {}T", roof.name, three_figures(flops_per_s / 1e12))
        }
        RoofKind::Memory { bytes_per_s } => {
            format!("{} {}TB/s", roof.name, three_figures(bytes_per_s / 1e12))
        }
    }
}

/// `x` with three significant figures (at least none after the point).
fn three_figures(x: f64) -> String {
    let decimals = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.decimals$}")
}

/// Which kind of roof [`highest`] looks for.
#[derive(Clone, Copy)]
enum Kind {
    Compute,
    Memory,
}
use Kind::{Compute, Memory};

/// The highest roof of a kind: its FLOP/s or bytes/s.
fn highest(plot: &RooflinePlot, kind: Kind) -> Option<f64> {
    plot.roofs
        .iter()
        .filter_map(|r| match (kind, r.kind) {
            (Compute, RoofKind::Compute { flops_per_s }) => Some(flops_per_s),
            (Memory, RoofKind::Memory { bytes_per_s }) => Some(bytes_per_s),
            _ => None,
        })
        .reduce(f64::max)
}

/// Whole decades around every ridge and point, a little headroom above the
/// highest roof, and at least two decades down (more for a slower kernel).
fn bounds(plot: &RooflinePlot) -> Option<Bounds> {
    let top = highest(plot, Compute)?;
    let bandwidth = highest(plot, Memory)?;
    let ridges = plot.roofs.iter().map(|r| match r.kind {
        RoofKind::Compute { flops_per_s } => flops_per_s / bandwidth,
        RoofKind::Memory { bytes_per_s } => top / bytes_per_s,
    });
    let xs: Vec<f64> = ridges
        .chain(plot.points.iter().map(|p| p.flop_per_byte))
        .filter(|x| x.is_finite() && *x > 0.0)
        .map(f64::log10)
        .collect();
    let x_lo = xs.iter().copied().fold(f64::INFINITY, f64::min).floor() - 1.0;
    let x_hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max).ceil() + 1.0;
    let y_hi = top.log10() + 0.4;
    let slowest = plot
        .points
        .iter()
        .map(|p| p.flops_per_s.log10())
        .fold(y_hi - 2.0, |lowest, y| lowest.min(y - 0.3));
    Some(Bounds {
        x: [x_lo, x_hi],
        y: [slowest, y_hi],
    })
}

/// `10^e` as a short number: `0.1`, `1`, `100`, `10k`.
fn power_of_ten(exponent: f64) -> String {
    let e = exponent.round() as i32;
    match e {
        ..=-1 => format!("{}", 10f64.powi(e)),
        0..=2 => format!("{}", 10i64.pow(e as u32)),
        3..=5 => format!("{}k", 10i64.pow(e as u32 - 3)),
        _ => format!("1e{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::plot::PlotPoint;

    fn plot(points: Vec<PlotPoint>) -> RooflinePlot {
        RooflinePlot {
            roofs: vec![
                PlotRoof {
                    name: "FP32".into(),
                    kind: RoofKind::Compute { flops_per_s: 67e12 },
                },
                PlotRoof {
                    name: "DRAM".into(),
                    kind: RoofKind::Memory {
                        bytes_per_s: 4.8e12,
                    },
                },
            ],
            points,
        }
    }

    #[test]
    fn bounds_hold_the_ridge_and_every_point_with_a_decade_to_spare() {
        let kernel = PlotPoint {
            name: "kernel",
            mark: "●",
            flop_per_byte: 491.0,
            flops_per_s: 3.2e12,
        };
        let b = bounds(&plot(vec![kernel])).expect("bounds");
        // The ridge at 14 flop/B and the kernel at 491: 10^0 .. 10^4.
        assert_eq!(b.x, [0.0, 4.0]);
        assert!(b.y[1] > 67e12f64.log10() && b.y[0] < 3.2e12f64.log10());
    }

    /// The row (from the top) where `mark` is drawn, and the screen.
    fn row_of(plot: &RooflinePlot, mark: char) -> (usize, String) {
        use ratatui::backend::TestBackend;
        use ratatui::Terminal;
        let mut terminal = Terminal::new(TestBackend::new(40, 12)).expect("terminal");
        terminal
            .draw(|frame| draw(frame, frame.area(), plot, Theme { color: false }))
            .expect("draw");
        let text = terminal.backend().to_string();
        let row = text.lines().position(|l| l.contains(mark)).expect("drawn");
        (row, text)
    }

    #[test]
    fn a_faster_kernel_is_drawn_higher_and_under_its_roofs() {
        let kernel = |flops_per_s| PlotPoint {
            name: "kernel",
            mark: "●",
            flop_per_byte: 491.0,
            flops_per_s,
        };
        let (slow, text) = row_of(&plot(vec![kernel(3e12)]), '●');
        let (fast, _) = row_of(&plot(vec![kernel(50e12)]), '●');
        assert!(fast < slow, "{text}");
        // Both roofs are named, the compute roof above the slow kernel.
        let roof = text
            .lines()
            .position(|l| l.contains("FP32 67.0T"))
            .expect("FP32");
        assert!(text.contains("DRAM"), "{text}");
        assert!(roof < slow, "{text}");
    }

    #[test]
    fn decades_read_as_short_numbers() {
        let shown: Vec<String> = [-1.0, 0.0, 2.0, 4.0, 7.0]
            .iter()
            .map(|&e| power_of_ten(e))
            .collect();
        assert_eq!(shown, ["0.1", "1", "100", "10k", "1e7"]);
    }

    #[test]
    fn roofs_are_named_with_their_peaks() {
        let labels: Vec<String> = plot(Vec::new()).roofs.iter().map(roof_label).collect();
        assert_eq!(labels, ["FP32 67.0T", "DRAM 4.80TB/s"]);
        assert_eq!(three_figures(535.2), "535");
    }
}
