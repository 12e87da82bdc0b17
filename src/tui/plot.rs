//! What the roofline plot draws, taken out of a counters result: each roof
//! of the GPU (a compute roof is a peak rate, a memory roof a bandwidth
//! whose line rises with intensity: shared memory, L2 and DRAM), the
//! kernel as a point at each memory level it was measured at (the same
//! useful rate over that level's bytes), the starter, and the kernel's
//! earlier saves as a trail, and the axes' span. Plain numbers, so the
//! view only scales and draws.

use crate::grade::roofline::{DevicePeaks, Roofline, RooflinePoint, Unit};
use crate::outcome::CountersResult;

/// What kind of ceiling a roof is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RoofKind {
    /// A peak rate, FLOP/s: a flat roof.
    Compute { flops_per_s: f64 },
    /// A bandwidth, bytes/s: a roof of slope one on log-log axes.
    Memory { bytes_per_s: f64 },
}

impl RoofKind {
    /// FLOP/s or bytes/s.
    pub fn rate(self) -> f64 {
        match self {
            RoofKind::Compute { flops_per_s } => flops_per_s,
            RoofKind::Memory { bytes_per_s } => bytes_per_s,
        }
    }
}

/// Whether `x` can be drawn on a log axis.
fn is_rate(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlotRoof {
    pub name: String,
    pub kind: RoofKind,
}

/// Whose point it is, which sets how it is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointRole {
    /// The kernel now, at one memory level.
    Kernel,
    Starter,
    /// The kernel at an earlier save of the file (DRAM intensity).
    Earlier,
}

/// A kernel on the plot: its arithmetic intensity and useful FLOP rate.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotPoint {
    /// What the caption calls the mark: the memory level, or `starter`.
    pub name: &'static str,
    /// The mark drawn at the point: `●` DRAM, `◆` L2, `▲` shared memory,
    /// `○` the starter, a digit for an earlier save.
    pub mark: &'static str,
    pub role: PointRole,
    pub flop_per_byte: f64,
    pub flops_per_s: f64,
}

impl PlotPoint {
    fn new(name: &'static str, mark: &'static str, role: PointRole, at: RooflinePoint) -> Self {
        Self {
            name,
            mark,
            role,
            flop_per_byte: at.flop_per_byte,
            flops_per_s: at.flops_per_s,
        }
    }
}

/// The name of the kernel's point at DRAM, the one its trail follows.
const DRAM: &str = "DRAM";

/// Marks of the earlier saves, oldest first; more saves than marks keep
/// the newest.
const TRAIL_MARKS: [&str; 9] = ["1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// The span of a roofline plot's axes, as powers of ten: intensity
/// (flop per byte) across, FLOP/s up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axes {
    pub x: [f64; 2],
    pub y: [f64; 2],
}

impl Axes {
    /// The smallest axes that hold every one of `spans`; `None` for none.
    pub fn spanning(spans: impl IntoIterator<Item = Axes>) -> Option<Axes> {
        spans.into_iter().reduce(|a, b| Axes {
            x: [a.x[0].min(b.x[0]), a.x[1].max(b.x[1])],
            y: [a.y[0].min(b.y[0]), a.y[1].max(b.y[1])],
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RooflinePlot {
    pub roofs: Vec<PlotRoof>,
    /// The kernel's earlier saves, then the starter, then the kernel at
    /// each level (DRAM last, so it is drawn on top).
    pub points: Vec<PlotPoint>,
    /// Axes fixed from outside: a replay's frames share one span so that
    /// stepping moves the points, not the scale. `None`: fitted to this plot.
    pub fixed_axes: Option<Axes>,
}

impl RooflinePlot {
    /// The plot of a counters result, when the student's launch was placed
    /// on a roofline.
    pub fn from_result(result: &CountersResult) -> Option<Self> {
        let outcome = result.as_ref().ok()?;
        let student = outcome.student.roofline.as_ref()?;
        let mut roofs = match &outcome.peaks {
            Some(peaks) => roofs_of_peaks(peaks),
            None => roofs_of(student)?,
        };
        // The levels' roofs go before DRAM's, closest to the SM first.
        let level_roofs = student.levels_above_dram().filter_map(|level| {
            Some(PlotRoof {
                name: level_look(level.unit).0.into(),
                kind: RoofKind::Memory {
                    bytes_per_s: level.peak_bytes_per_s?,
                },
            })
        });
        let dram_at = roofs
            .iter()
            .position(|r| matches!(r.kind, RoofKind::Memory { .. }))
            .unwrap_or(roofs.len());
        roofs.splice(dram_at..dram_at, level_roofs);
        // A stored report's peaks may be anything JSON holds: a roof that
        // is not a positive rate has no place on log axes.
        roofs.retain(|roof| is_rate(roof.kind.rate()));
        let starter = outcome
            .starter
            .roofline
            .as_ref()
            .and_then(Roofline::dram_point)
            .map(|at| PlotPoint::new("starter", "○", PointRole::Starter, at));
        let levels = student.levels_above_dram().filter_map(|level| {
            let at = student.level_point(level)?;
            let (name, mark) = level_look(level.unit);
            Some(PlotPoint::new(name, mark, PointRole::Kernel, at))
        });
        let dram = student
            .dram_point()
            .map(|at| PlotPoint::new(DRAM, "●", PointRole::Kernel, at));
        let points = starter.into_iter().chain(levels).chain(dram).collect();
        Some(Self {
            roofs,
            points,
            fixed_axes: None,
        })
    }

    /// The axes to draw: the fixed ones, else those fitted to this plot.
    pub fn axes(&self) -> Option<Axes> {
        self.fixed_axes.or_else(|| self.fitted_axes())
    }

    /// Whole decades around every ridge and point, a little headroom above
    /// the highest roof, and at least two decades down (more for a slower
    /// kernel). `None` without a compute and a memory roof, or when nothing
    /// meets on the plot (no point, and every ridge out of range).
    pub fn fitted_axes(&self) -> Option<Axes> {
        let top = self.highest_compute()?;
        let bandwidth = self.highest_memory()?;
        let ridges = self.roofs.iter().map(|r| match r.kind {
            RoofKind::Compute { flops_per_s } => flops_per_s / bandwidth,
            RoofKind::Memory { bytes_per_s } => top / bytes_per_s,
        });
        let xs: Vec<f64> = ridges
            .chain(self.points.iter().map(|p| p.flop_per_byte))
            .filter(|&x| is_rate(x))
            .map(f64::log10)
            .collect();
        let x_lo = xs.iter().copied().fold(f64::INFINITY, f64::min).floor() - 1.0;
        let x_hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max).ceil() + 1.0;
        let y_hi = top.log10() + 0.4;
        let slowest = self
            .points
            .iter()
            .map(|p| p.flops_per_s.log10())
            .fold(y_hi - 2.0, |lowest, y| lowest.min(y - 0.3));
        [x_lo, x_hi, slowest, y_hi]
            .iter()
            .all(|x| x.is_finite())
            .then_some(Axes {
                x: [x_lo, x_hi],
                y: [slowest, y_hi],
            })
    }

    /// The plot drawn on `axes` (`None`: on axes fitted to it).
    pub fn on_axes(mut self, axes: Option<Axes>) -> Self {
        self.fixed_axes = axes;
        self
    }

    /// The highest compute roof, FLOP/s.
    pub fn highest_compute(&self) -> Option<f64> {
        self.highest(|kind| matches!(kind, RoofKind::Compute { .. }))
    }

    /// The highest memory roof, bytes/s.
    pub fn highest_memory(&self) -> Option<f64> {
        self.highest(|kind| matches!(kind, RoofKind::Memory { .. }))
    }

    /// The highest rate of the roofs of the kind `is_kind` accepts.
    fn highest(&self, is_kind: impl Fn(RoofKind) -> bool) -> Option<f64> {
        self.roofs
            .iter()
            .filter(|r| is_kind(r.kind))
            .map(|r| r.kind.rate())
            .reduce(f64::max)
    }

    /// The plot with the kernel's earlier saves (`history`, oldest first) as
    /// a numbered trail under its points; the save on screen, when it is the
    /// newest of `history`, is not repeated.
    pub fn with_trail(mut self, history: &[RooflinePoint]) -> Self {
        let current = self
            .points
            .iter()
            .find(|p| p.role == PointRole::Kernel && p.name == DRAM)
            .map(|p| (p.flop_per_byte, p.flops_per_s));
        let earlier = match history.split_last() {
            Some((last, before)) if current == Some((last.flop_per_byte, last.flops_per_s)) => {
                before
            }
            _ => history,
        };
        let shown = &earlier[earlier.len().saturating_sub(TRAIL_MARKS.len())..];
        let trail = shown
            .iter()
            .zip(TRAIL_MARKS)
            .map(|(at, mark)| PlotPoint::new("earlier", mark, PointRole::Earlier, *at));
        self.points.splice(0..0, trail);
        self
    }
}

/// What the plot calls a memory level above DRAM, and the kernel's mark there.
fn level_look(unit: Unit) -> (&'static str, &'static str) {
    match unit {
        Unit::SharedMemory => ("smem", "▲"),
        _ => ("L2", "◆"),
    }
}

/// Every roof of the GPU the counters were read on.
fn roofs_of_peaks(peaks: &DevicePeaks) -> Vec<PlotRoof> {
    let compute = |name: &str, flops_per_s| PlotRoof {
        name: name.into(),
        kind: RoofKind::Compute { flops_per_s },
    };
    let mut roofs = vec![compute("FP32", peaks.fp32_flops.per_s)];
    roofs.extend(
        peaks
            .tensor_roofs()
            .map(|(name, roof)| compute(name, roof.per_s)),
    );
    roofs.push(PlotRoof {
        name: "DRAM".into(),
        kind: RoofKind::Memory {
            bytes_per_s: peaks.dram_bytes.per_s,
        },
    });
    roofs
}

/// For a report older than the per-GPU peaks: the FP32 and DRAM roofs the
/// roofline was computed against, the FP32 peak being the achieved rate
/// over its share of it, DRAM the FP32 peak over the ridge point.
fn roofs_of(r: &Roofline) -> Option<Vec<PlotRoof>> {
    let fp32 = r.achieved_gflops * 1e9 * 100.0 / r.fp32_peak_pct;
    let dram = fp32 / r.ridge_point;
    (is_rate(fp32) && is_rate(dram)).then(|| {
        vec![
            PlotRoof {
                name: "FP32".into(),
                kind: RoofKind::Compute { flops_per_s: fp32 },
            },
            PlotRoof {
                name: "DRAM".into(),
                kind: RoofKind::Memory { bytes_per_s: dram },
            },
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(flop_per_byte: f64, flops_per_s: f64) -> RooflinePoint {
        RooflinePoint {
            flop_per_byte,
            flops_per_s,
        }
    }

    /// A plot holding only the kernel's DRAM point at `now`.
    fn plot_at(now: RooflinePoint) -> RooflinePlot {
        RooflinePlot {
            roofs: Vec::new(),
            points: vec![PlotPoint::new(DRAM, "●", PointRole::Kernel, now)],
            fixed_axes: None,
        }
    }

    fn marks(plot: &RooflinePlot) -> Vec<&str> {
        plot.points.iter().map(|p| p.mark).collect()
    }

    #[test]
    fn the_trail_numbers_earlier_saves_oldest_first_without_the_one_on_screen() {
        let history = [at(500.0, 1e12), at(800.0, 4e12), at(1300.0, 3e13)];
        let plot = plot_at(history[2]).with_trail(&history);
        assert_eq!(marks(&plot), ["1", "2", "●"]);
        assert_eq!(plot.points[1].flops_per_s, 4e12);
        assert!(plot.points[..2]
            .iter()
            .all(|p| p.role == PointRole::Earlier));
        // A save not yet in the history: every recorded save is earlier.
        let plot = plot_at(at(1400.0, 4e13)).with_trail(&history);
        assert_eq!(marks(&plot), ["1", "2", "3", "●"]);
    }

    #[test]
    fn a_long_session_keeps_its_newest_nine_saves() {
        let history: Vec<RooflinePoint> = (1..=12).map(|i| at(100.0 * i as f64, 1e12)).collect();
        let plot = plot_at(at(5000.0, 5e13)).with_trail(&history);
        assert_eq!(plot.points.len(), 10);
        assert_eq!(plot.points[0].flop_per_byte, 400.0, "saves 1-3 dropped");
        assert_eq!(plot.points[8].mark, "9");
    }
}
