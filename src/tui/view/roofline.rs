//! The roofline plot: arithmetic intensity (flop per byte) across, useful
//! FLOP/s up, both on log scales. Every roof is drawn: a compute roof flat
//! from where the highest memory roof meets it, a memory roof (shared
//! memory, L2, DRAM) rising (slope one on log-log axes) until it meets the
//! highest compute roof. The kernel is a point at each memory level (`●`
//! DRAM, `◆` L2, `▲` shared memory: one rate, each level's intensity), so
//! a student sees which roof is above it at every level and how far; the
//! starter is `○`, and the kernel's earlier saves are digits, oldest `1`,
//! so a replay of the ladder shows the point climb.
//!
//! Takes any list of roofs, so a GPU with more units gets more lines
//! without a change here.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::canvas::{Canvas, Context, Line as Segment};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::display::figure;
use crate::tui::plot::{Axes, PlotPoint, PlotRoof, PointRole, RoofKind, RooflinePlot};
use crate::tui::theme::Theme;

/// Rows under which the plot says nothing useful.
pub const MIN_HEIGHT: u16 = 5;

/// The canvas's cells over the axes, and where a value lands on them: the
/// canvas places text and braille dots by different roundings, and a name
/// must land on its own line's row.
#[derive(Clone, Copy)]
struct Grid {
    axes: Axes,
    columns: u16,
    rows: u16,
}

impl Grid {
    /// One cell's width and height in plot units: the canvas spreads the
    /// axes over one cell fewer than it has when placing text.
    fn cell(&self) -> (f64, f64) {
        let [x, y] = [self.axes.x, self.axes.y];
        let cells = |n: u16| f64::from(n.max(2) - 1);
        (
            (x[1] - x[0]) / cells(self.columns),
            (y[1] - y[0]) / cells(self.rows),
        )
    }

    /// Where `point`'s mark goes in plot units: a rate off the plot's
    /// scale is held at its edge. The labels keep clear of the same spot.
    fn place(&self, point: &PlotPoint) -> (f64, f64) {
        (
            point.flop_per_byte.log10(),
            point
                .flops_per_s
                .log10()
                .clamp(self.axes.y[0], self.axes.y[1]),
        )
    }

    /// The row, from the top, that text printed at height `y` lands on.
    fn text_row(&self, y: f64) -> i64 {
        ((self.axes.y[1] - y) / self.cell().1).floor() as i64
    }

    /// The height at which printed text lands on `row`.
    fn text_at_row(&self, row: i64) -> f64 {
        self.axes.y[1] - (row as f64 + 0.5) * self.cell().1
    }

    /// The row a flat line at height `y` is drawn on (four dots a row).
    fn line_row(&self, y: f64) -> i64 {
        let [lo, hi] = self.axes.y;
        let dots = 4.0 * f64::from(self.rows) - 1.0;
        (((hi - y) * dots / (hi - lo)).floor() as i64).div_euclid(4)
    }

    /// The column, from the left, that text printed at `x` starts on.
    fn text_column(&self, x: f64) -> i64 {
        ((x - self.axes.x[0]) / self.cell().0).floor() as i64
    }
}

/// Draws `plot` into `area`: the plot with its decades labelled, FLOP/s
/// left of it and intensity under it, then a caption line naming the marks.
pub fn draw(frame: &mut Frame, area: Rect, plot: &RooflinePlot, theme: Theme) {
    if area.height < MIN_HEIGHT || area.width < 12 {
        return;
    }
    let Some(axes) = plot.axes() else {
        frame.render_widget(Paragraph::new("no roofs to plot"), area);
        return;
    };
    let unit = RateUnit::of(&axes);
    let rate_ticks: Vec<(f64, String)> = decades(axes.y)
        .map(|e| (e, power_of_ten(e - unit.exponent)))
        .collect();
    let gutter = rate_ticks.iter().map(|(_, t)| t.len()).max().unwrap_or(0) as u16 + 1;
    let [body, intensity_row, caption_area] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let columns = [Constraint::Length(gutter), Constraint::Fill(1)];
    let [rate_axis, plot_area] = Layout::horizontal(columns).areas(body);
    let [_, intensity_axis] = Layout::horizontal(columns).areas(intensity_row);
    let grid = Grid {
        axes,
        columns: plot_area.width,
        rows: plot_area.height,
    };
    frame.render_widget(
        Paragraph::new(rate_labels(&grid, &rate_ticks)).style(theme.stale()),
        rate_axis,
    );
    frame.render_widget(
        Paragraph::new(intensity_labels(&grid)).style(theme.stale()),
        intensity_axis,
    );
    let caption = caption(plot, unit, caption_area.width, theme);
    frame.render_widget(Paragraph::new(caption), caption_area);
    let canvas = Canvas::default()
        .marker(Marker::Braille)
        .x_bounds(axes.x)
        .y_bounds(axes.y)
        .paint(|ctx| {
            for roof in &plot.roofs {
                draw_roof(ctx, roof, plot, &axes, theme);
            }
            let flat = compute_labels(plot, &grid);
            let slopes = memory_labels(plot, &grid, &flat);
            for (x, y, text) in flat.into_iter().chain(slopes) {
                ctx.print(x, y, Span::styled(text, theme.stale()));
            }
            ctx.layer();
            for point in &plot.points {
                let style = match point.role {
                    PointRole::Kernel => theme.good(),
                    PointRole::Starter => Style::new(),
                    PointRole::Earlier => theme.stale(),
                };
                let (x, y) = grid.place(point);
                ctx.print(x, y, Span::styled(point.mark, style));
            }
        });
    frame.render_widget(canvas, plot_area);
}

/// The whole powers of ten within `span` (exponents, lowest first).
fn decades(span: [f64; 2]) -> impl Iterator<Item = f64> {
    let (lo, hi) = (span[0].ceil(), span[1].floor());
    // A stored report's absurd rates span hundreds of decades; no plot has the rows.
    let count = if hi >= lo { (hi - lo) as usize + 1 } else { 0 };
    (0..count.min(64)).map(move |i| lo + i as f64)
}

/// The unit the FLOP/s axis counts in, so that its labels stay short.
#[derive(Clone, Copy)]
struct RateUnit {
    exponent: f64,
    name: &'static str,
}

impl RateUnit {
    /// TFLOP/s on a GPU's scale, GFLOP/s or FLOP/s on a slower one.
    fn of(axes: &Axes) -> Self {
        let top = axes.y[1].floor();
        let (exponent, name) = if top >= 12.0 {
            (12.0, "TFLOP/s")
        } else if top >= 9.0 {
            (9.0, "GFLOP/s")
        } else {
            (0.0, "FLOP/s")
        };
        Self { exponent, name }
    }
}

/// The rate axis: each decade's label right-aligned on the row its height
/// lands on (where a mark at that rate is printed), the lower one of two
/// that land on one row left out.
fn rate_labels(grid: &Grid, ticks: &[(f64, String)]) -> Vec<Line<'static>> {
    let width = ticks.iter().map(|(_, t)| t.len()).max().unwrap_or(0);
    let mut rows = vec![Line::default(); usize::from(grid.rows)];
    for (exponent, text) in ticks.iter().rev() {
        let row = grid.text_row(*exponent);
        if let Some(line) = usize::try_from(row).ok().and_then(|r| rows.get_mut(r)) {
            if line.spans.is_empty() {
                *line = Line::from(format!("{text:>width$}"));
            }
        }
    }
    rows
}

/// The intensity axis: each decade's label centred under its column, left
/// out where it would touch the one before.
fn intensity_labels(grid: &Grid) -> Line<'static> {
    let mut line = String::new();
    let mut used = 0i64;
    for exponent in decades(grid.axes.x) {
        let text = power_of_ten(exponent);
        let len = text.len() as i64;
        let start = (grid.text_column(exponent) - (len - 1) / 2)
            .min(i64::from(grid.columns) - len)
            .max(0);
        // A space at least between two labels (none before the first).
        if start < used + i64::from(used > 0) {
            continue;
        }
        line.push_str(&" ".repeat((start - used) as usize));
        line.push_str(&text);
        used = start + len;
    }
    Line::from(line)
}

/// The marks' names and the axes' units, each part only when it fits
/// whole, in the order they matter: the kernel's levels, the starter, the
/// trail, the axes.
fn caption(plot: &RooflinePlot, unit: RateUnit, width: u16, theme: Theme) -> Line<'static> {
    let kernel: Vec<String> = plot
        .points
        .iter()
        .filter(|p| p.role == PointRole::Kernel)
        .map(|p| format!("{}{}", p.mark, p.name))
        .collect();
    let trail: Vec<&str> = plot
        .points
        .iter()
        .filter(|p| p.role == PointRole::Earlier)
        .map(|p| p.mark)
        .collect();
    let mut parts: Vec<Span<'static>> = Vec::new();
    if !kernel.is_empty() {
        parts.push(Span::styled(
            format!("kernel {}", kernel.join(" ")),
            theme.good(),
        ));
    }
    if plot.points.iter().any(|p| p.role == PointRole::Starter) {
        parts.push(Span::raw("○starter"));
    }
    if let (Some(first), Some(last)) = (trail.first(), trail.last()) {
        let marks = if first == last {
            format!("save {first}")
        } else {
            format!("saves {first}-{last}")
        };
        parts.push(Span::styled(marks, theme.stale()));
    }
    let mut line = Line::default();
    let mut left = usize::from(width);
    let mut add = |line: &mut Line<'static>, part: Span<'static>| {
        let needed = part.width() + usize::from(!line.spans.is_empty());
        if needed > left {
            return false;
        }
        if !line.spans.is_empty() {
            line.push_span(Span::raw(" "));
        }
        left -= needed;
        line.push_span(part);
        true
    };
    for part in parts {
        if !add(&mut line, part) {
            break;
        }
    }
    // The axes' units, shortened to the rate's where both do not fit: the
    // decade labels are bare numbers.
    let units = [
        format!("flop/B →, {} ↑", unit.name),
        format!("{} ↑", unit.name),
    ];
    for words in units {
        if add(&mut line, Span::styled(words, theme.stale())) {
            break;
        }
    }
    line
}

/// Where a compute roof at `log_rate` starts: where the highest memory
/// roof meets it (the plot's left edge without one, or left of it).
fn flat_start(plot: &RooflinePlot, axes: &Axes, log_rate: f64) -> f64 {
    plot.highest_memory()
        .map_or(axes.x[0], |bw| log_rate - bw.log10())
        .max(axes.x[0])
}

fn draw_roof(ctx: &mut Context, roof: &PlotRoof, plot: &RooflinePlot, axes: &Axes, theme: Theme) {
    let [_, x_hi] = axes.x;
    match roof.kind {
        RoofKind::Compute { flops_per_s } => {
            let y = flops_per_s.log10();
            let color = theme.plot(Color::Red);
            ctx.draw(&Segment::new(flat_start(plot, axes, y), y, x_hi, y, color));
        }
        RoofKind::Memory { bytes_per_s } => {
            let slope_at = |x: f64| bytes_per_s.log10() + x;
            let end = plot
                .highest_compute()
                .map_or(x_hi, |peak| (peak / bytes_per_s).log10());
            let end = end.min(x_hi);
            // From where it enters the plot: the canvas draws no line with
            // an end outside it, and a slow level's roof enters from below.
            let start = axes.x[0].max(axes.y[0] - bytes_per_s.log10());
            let color = theme.plot(Color::Blue);
            ctx.draw(&Segment::new(
                start,
                slope_at(start),
                end,
                slope_at(end),
                color,
            ));
        }
    }
}

/// Where each compute roof's name goes: on its line's row, at the right
/// end, so roofs a row apart keep their names apart. A roof whose line
/// lands on the row of a higher one's (BF16 is twice TF32: one row or none
/// on a small plot) puts its name left of that one's, on that row.
fn compute_labels(plot: &RooflinePlot, grid: &Grid) -> Vec<(f64, f64, String)> {
    let mut labels: Vec<(i64, String)> = Vec::new();
    for (roof, y) in ranked(plot, Compute) {
        let text = roof_label(roof);
        let row = grid.line_row(y);
        match labels.last_mut() {
            Some((higher_row, higher)) if *higher_row >= row => {
                *higher = format!("{text} {higher}");
            }
            _ => labels.push((row, text)),
        }
    }
    // Each name (or row of names) ends at the right edge.
    let cell_x = grid.cell().0;
    labels
        .into_iter()
        .map(|(row, text)| {
            let x = grid.axes.x[1] - text.chars().count() as f64 * cell_x;
            (x, grid.text_at_row(row), text)
        })
        .collect()
}

/// Where each memory roof's name goes: from the left edge, ending a cell
/// before its own line, on the row where it just fits (or right of the
/// line on the bottom row, when it fits nowhere left of it). A plot too
/// short for a row each names the fastest levels. The lines are
/// parallel and a few cells apart, so no name fits between two; this way
/// each name leads into its line, and a name crosses only the lines of
/// faster levels. Names go top to bottom, fastest level first, a row apart
/// at least, and a name that would sit on a point or on a compute roof's
/// row (its line or `flat`, the compute roofs' names) moves down a row
/// until it is clear; one that finds no clear row is left out, for a
/// name on a flat roof's row reads as that roof's.
fn memory_labels(
    plot: &RooflinePlot,
    grid: &Grid,
    flat: &[(f64, f64, String)],
) -> Vec<(f64, f64, String)> {
    let axes = grid.axes;
    let [x_lo, _] = axes.x;
    let (cell_x, cell_y) = grid.cell();
    let top = plot.highest_compute().map_or(axes.y[1], f64::log10);
    // A row clear of the highest compute roof, whose line may round either way.
    let mut below = top - cell_y;
    let covers_a_point = |x: f64, y: f64, width: f64| {
        plot.points.iter().any(|point| {
            let (px, py) = grid.place(point);
            (py - y).abs() < cell_y / 2.0 && px > x - cell_x && px < x + width
        })
    };
    // The rows of the flat roofs' lines and names: a name anywhere on one
    // reads as that roof's (the name ends where the flat line starts).
    let flat_rows: Vec<i64> = ranked(plot, Compute)
        .into_iter()
        .map(|(_, y)| grid.line_row(y))
        .chain(flat.iter().map(|(_, y, _)| grid.text_row(*y)))
        .collect();
    let on_a_flat_roof = |y: f64| flat_rows.contains(&grid.text_row(y));
    ranked(plot, Memory)
        .into_iter()
        .filter_map(|(roof, log_bandwidth)| {
            let text = roof_label(roof);
            let width = (text.chars().count() + 1) as f64 * cell_x;
            // Left of the line when the name fits there, else right of it.
            let x_at = |y: f64| {
                let line_x = y - log_bandwidth;
                if line_x - width >= x_lo - cell_x / 2.0 {
                    (line_x - width).max(x_lo)
                } else {
                    line_x + 2.0 * cell_x
                }
            };
            let fits = log_bandwidth + x_lo + width;
            // The bottom row at the lowest, for a line that leaves the plot
            // too far left for its name: the name then goes right of the
            // line. A plot too short for a row each leaves the rest unnamed.
            let mut y = fits.min(below - cell_y).max(axes.y[0]);
            if y >= below {
                return None;
            }
            let blocked = |y: f64| covers_a_point(x_at(y), y, width) || on_a_flat_roof(y);
            while blocked(y) && y - cell_y >= axes.y[0] {
                y -= cell_y;
            }
            if on_a_flat_roof(y) {
                return None;
            }
            below = y;
            Some((x_at(y), y, text))
        })
        .collect()
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

/// `x` with three significant figures (at least none after the point;
/// a stored report's absurd peak in scientific notation).
fn three_figures(x: f64) -> String {
    let decimals = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else {
        2
    };
    figure(x, decimals)
}

/// Which kind of roof [`ranked`] looks for.
#[derive(Clone, Copy)]
enum Kind {
    Compute,
    Memory,
}
use Kind::{Compute, Memory};

/// A roof's FLOP/s or bytes/s, when it is of `kind`.
fn rate(roof: &PlotRoof, kind: Kind) -> Option<f64> {
    match (kind, roof.kind) {
        (Compute, RoofKind::Compute { flops_per_s }) => Some(flops_per_s),
        (Memory, RoofKind::Memory { bytes_per_s }) => Some(bytes_per_s),
        _ => None,
    }
}

/// The roofs of a kind, highest first, each with the log of its rate.
fn ranked(plot: &RooflinePlot, kind: Kind) -> Vec<(&PlotRoof, f64)> {
    let mut roofs: Vec<(&PlotRoof, f64)> = plot
        .roofs
        .iter()
        .filter_map(|roof| Some((roof, rate(roof, kind)?.log10())))
        .collect();
    roofs.sort_by(|a, b| b.1.total_cmp(&a.1));
    roofs
}

/// `10^e` as a short number: `0.1`, `1`, `100`, `10k`.
fn power_of_ten(exponent: f64) -> String {
    let e = exponent.round() as i32;
    match e {
        -3..=-1 => format!("{}", 10f64.powi(e)),
        0..=2 => format!("{}", 10i64.pow(e as u32)),
        3..=5 => format!("{}k", 10i64.pow(e as u32 - 3)),
        _ => format!("1e{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            fixed_axes: None,
        }
    }

    #[test]
    fn bounds_hold_the_ridge_and_every_point_with_a_decade_to_spare() {
        let kernel = PlotPoint {
            name: "DRAM",
            mark: "●",
            role: PointRole::Kernel,
            flop_per_byte: 491.0,
            flops_per_s: 3.2e12,
        };
        let b = plot(vec![kernel]).fitted_axes().expect("bounds");
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
            name: "DRAM",
            mark: "●",
            role: PointRole::Kernel,
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
    fn a_plot_where_nothing_meets_has_no_bounds() {
        // A stored report's roofs so far apart that their ridge overflows,
        // and no point: no finite span of intensities to draw.
        let p = RooflinePlot {
            roofs: vec![
                PlotRoof {
                    name: "FP32".into(),
                    kind: RoofKind::Compute { flops_per_s: 1e308 },
                },
                PlotRoof {
                    name: "DRAM".into(),
                    kind: RoofKind::Memory {
                        bytes_per_s: 1e-308,
                    },
                },
            ],
            points: Vec::new(),
            fixed_axes: None,
        };
        assert!(p.axes().is_none());
        use ratatui::backend::TestBackend;
        use ratatui::Terminal;
        let mut terminal = Terminal::new(TestBackend::new(30, 6)).expect("terminal");
        terminal
            .draw(|frame| draw(frame, frame.area(), &p, Theme { color: false }))
            .expect("draw");
        assert!(terminal.backend().to_string().contains("no roofs to plot"));
    }

    /// A power of ten from the whole range of positive doubles, or one of a
    /// few small decades, so that points and roofs often coincide.
    fn any_rate() -> impl Strategy<Value = f64> {
        prop_oneof![-307.0f64..308.0, (-2i32..4).prop_map(f64::from)].prop_map(|e| 10f64.powf(e))
    }

    fn any_plot() -> impl Strategy<Value = RooflinePlot> {
        let roof = (any::<bool>(), any_rate()).prop_map(|(compute, rate)| PlotRoof {
            name: if compute { "FP32" } else { "DRAM" }.into(),
            kind: if compute {
                RoofKind::Compute { flops_per_s: rate }
            } else {
                RoofKind::Memory { bytes_per_s: rate }
            },
        });
        let point = (any_rate(), any_rate()).prop_map(|(flop_per_byte, flops_per_s)| PlotPoint {
            name: "DRAM",
            mark: "●",
            role: PointRole::Kernel,
            flop_per_byte,
            flops_per_s,
        });
        (
            prop::collection::vec(roof, 1..6),
            prop::collection::vec(point, 0..14),
        )
            .prop_map(|(roofs, points)| RooflinePlot {
                roofs,
                points,
                fixed_axes: None,
            })
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Any positive roofs and points, from 1e-307 to 1e307 and often
        /// equal, at any size: finite bounds or none, every label placed on
        /// the plot (the step-down loop ends), and the frame drawn.
        #[test]
        fn any_positive_plot_draws_at_any_size(
            p in any_plot(),
            width in 1u16..100,
            height in 1u16..40,
        ) {
            if let Some(b) = p.fitted_axes() {
                prop_assert!(b.x[0] < b.x[1] && b.y[0] < b.y[1]);
                let grid = Grid { axes: b, columns: width, rows: height };
                let flat = compute_labels(&p, &grid);
                for (x, y, _) in memory_labels(&p, &grid, &flat) {
                    prop_assert!(x.is_finite() && y >= b.y[0] && y <= b.y[1], "{x} {y}");
                }
            }
            use ratatui::backend::TestBackend;
            use ratatui::Terminal;
            let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
            terminal
                .draw(|frame| draw(frame, frame.area(), &p, Theme { color: false }))
                .expect("draw");
        }
    }

    #[test]
    fn decades_read_as_short_numbers() {
        let shown: Vec<String> = [-5.0, -1.0, 0.0, 2.0, 4.0, 7.0]
            .iter()
            .map(|&e| power_of_ten(e))
            .collect();
        assert_eq!(shown, ["1e-5", "0.1", "1", "100", "10k", "1e7"]);
    }

    #[test]
    fn roofs_are_named_with_their_peaks() {
        let labels: Vec<String> = plot(Vec::new()).roofs.iter().map(roof_label).collect();
        assert_eq!(labels, ["FP32 67.0T", "DRAM 4.80TB/s"]);
        assert_eq!(three_figures(535.2), "535");
    }

    #[test]
    fn every_memory_roof_is_drawn_and_named_even_one_entering_from_below() {
        let mut with_levels = plot(vec![PlotPoint {
            name: "DRAM",
            mark: "●",
            role: PointRole::Kernel,
            flop_per_byte: 491.0,
            flops_per_s: 3.2e12,
        }]);
        let memory = |name: &str, bytes_per_s| PlotRoof {
            name: name.into(),
            kind: RoofKind::Memory { bytes_per_s },
        };
        with_levels.roofs.insert(1, memory("smem", 29.7e12));
        with_levels.roofs.insert(2, memory("L2", 9.9e12));
        let (_, text) = row_of(&with_levels, '●');
        let rows: Vec<usize> = ["smem 29.7TB/s", "L2 9.90TB/s", "DRAM 4.80TB/s"]
            .iter()
            .map(|label| {
                text.lines()
                    .position(|l| l.contains(label))
                    .unwrap_or_else(|| panic!("{label}:\n{text}"))
            })
            .collect();
        assert!(
            rows[0] < rows[1] && rows[1] < rows[2],
            "fastest first:\n{text}"
        );
        // The L2 and DRAM roofs start below the plot's floor: still drawn,
        // down to the bottom row above the intensities and the caption.
        let bottom = text.lines().rev().nth(2).expect("a plot row");
        assert!(
            bottom
                .chars()
                .any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)),
            "{text}"
        );
    }

    #[test]
    fn a_memory_roof_name_steps_down_off_the_kernel_marks() {
        // The recorded top rung: its marks sit on the FP32 roof's row, under
        // the TF32 roof, where a memory roof's name would go.
        let mut p = plot(
            [("smem", "▲", 6.8), ("L2", "◆", 48.0), ("DRAM", "●", 1344.0)]
                .into_iter()
                .map(|(name, mark, flop_per_byte)| PlotPoint {
                    name,
                    mark,
                    role: PointRole::Kernel,
                    flop_per_byte,
                    flops_per_s: 56e12,
                })
                .collect(),
        );
        p.roofs.insert(
            1,
            PlotRoof {
                name: "smem".into(),
                kind: RoofKind::Memory {
                    bytes_per_s: 30.6e12,
                },
            },
        );
        p.roofs.insert(
            0,
            PlotRoof {
                name: "TF32".into(),
                kind: RoofKind::Compute {
                    flops_per_s: 327e12,
                },
            },
        );
        let (row, text) = row_of(&p, '▲');
        let marks_row = text.lines().nth(row).expect("the marks' row");
        assert!(marks_row.contains('◆') && marks_row.contains('●'), "{text}");
        // Every name whole: none cut by a mark.
        for label in ["smem 30.6TB/s", "DRAM 4.80TB/s"] {
            assert!(text.contains(label), "{label}:\n{text}");
        }
    }

    #[test]
    fn the_caption_names_each_mark_and_drops_what_does_not_fit() {
        let mut p = plot(vec![
            PlotPoint {
                name: "earlier",
                mark: "1",
                role: PointRole::Earlier,
                flop_per_byte: 300.0,
                flops_per_s: 1e12,
            },
            PlotPoint {
                name: "starter",
                mark: "○",
                role: PointRole::Starter,
                flop_per_byte: 100.0,
                flops_per_s: 5e11,
            },
            PlotPoint {
                name: "L2",
                mark: "◆",
                role: PointRole::Kernel,
                flop_per_byte: 60.0,
                flops_per_s: 3e12,
            },
        ]);
        let unit = RateUnit::of(&p.fitted_axes().expect("bounds"));
        let text = |plot: &RooflinePlot, width| {
            caption(plot, unit, width, Theme { color: false }).to_string()
        };
        assert_eq!(
            text(&p, 80),
            "kernel ◆L2 ○starter save 1 flop/B →, TFLOP/s ↑"
        );
        assert_eq!(text(&p, 40), "kernel ◆L2 ○starter save 1 TFLOP/s ↑");
        assert_eq!(text(&p, 30), "kernel ◆L2 ○starter save 1");
        p.points.remove(0);
        assert_eq!(text(&p, 30), "kernel ◆L2 ○starter TFLOP/s ↑");
        assert_eq!(text(&p, 24), "kernel ◆L2 ○starter");
    }

    /// `plot` drawn at `width` x `height`, one string a row.
    fn drawn(plot: &RooflinePlot, width: u16, height: u16) -> Vec<String> {
        use ratatui::backend::TestBackend;
        use ratatui::Terminal;
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        terminal
            .draw(|frame| draw(frame, frame.area(), plot, Theme { color: false }))
            .expect("draw");
        let text = terminal.backend().to_string();
        text.lines()
            .map(|l| l.trim_matches('"').to_owned())
            .collect()
    }

    #[test]
    fn no_memory_roof_name_sits_on_a_flat_roofs_row_at_any_size() {
        // The recorded top rung's roofs: three flat, three rising.
        let roof = |name: &str, kind| PlotRoof {
            name: name.into(),
            kind,
        };
        let compute = |name, flops_per_s| roof(name, RoofKind::Compute { flops_per_s });
        let memory = |name, bytes_per_s| roof(name, RoofKind::Memory { bytes_per_s });
        let flat = vec![
            compute("BF16", 643e12),
            compute("TF32", 322e12),
            compute("FP32", 66.5e12),
        ];
        let mut p = plot(vec![PlotPoint {
            name: "DRAM",
            mark: "●",
            role: PointRole::Kernel,
            flop_per_byte: 1344.0,
            flops_per_s: 56e12,
        }]);
        p.roofs = flat.clone();
        p.roofs.extend([
            memory("smem", 30.5e12),
            memory("L2", 15.4e12),
            memory("DRAM", 3.68e12),
        ]);
        // The flat roofs alone on the same axes, each drawn from the left edge.
        let flat_only = RooflinePlot {
            roofs: flat,
            points: Vec::new(),
            fixed_axes: p.fitted_axes(),
        };
        let mut named = 0;
        for width in (30..=90).step_by(6) {
            for height in 7..=26 {
                let full = drawn(&p, width, height);
                let flat_rows = drawn(&flat_only, width, height);
                for (row, line) in full.iter().enumerate() {
                    if !line.contains("TB/s") {
                        continue;
                    }
                    named += 1;
                    // Past the rate labels (four columns here), nothing flat on that row.
                    let flat_there: String = flat_rows[row].chars().skip(4).collect();
                    assert!(
                        flat_there.trim().is_empty(),
                        "{width}x{height}:\n{}\n{}",
                        full.join("\n"),
                        flat_rows.join("\n")
                    );
                }
            }
        }
        assert!(
            named > 100,
            "the memory roofs are named on most sizes: {named}"
        );
    }
}
