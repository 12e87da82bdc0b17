//! What the roofline plot draws, taken out of a counters result: each roof
//! of the GPU (a compute roof is a peak rate, a memory roof a bandwidth
//! whose line rises with intensity), and the kernel and the starter as
//! points. Plain numbers, so the view only scales and draws.

use crate::grade::roofline::{DevicePeaks, Roofline};
use crate::outcome::CountersResult;

/// What kind of ceiling a roof is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RoofKind {
    /// A peak rate, FLOP/s: a flat roof.
    Compute { flops_per_s: f64 },
    /// A bandwidth, bytes/s: a roof of slope one on log-log axes.
    Memory { bytes_per_s: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlotRoof {
    pub name: String,
    pub kind: RoofKind,
}

/// A kernel on the plot: its arithmetic intensity and useful FLOP rate.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotPoint {
    pub name: &'static str,
    /// The mark drawn at the point (`●` for the kernel, `○` for the starter).
    pub mark: &'static str,
    pub flop_per_byte: f64,
    pub flops_per_s: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RooflinePlot {
    pub roofs: Vec<PlotRoof>,
    pub points: Vec<PlotPoint>,
}

impl RooflinePlot {
    /// The plot of a counters result, when the student's launch was placed
    /// on a roofline.
    pub fn from_result(result: &CountersResult) -> Option<Self> {
        let outcome = result.as_ref().ok()?;
        let student = outcome.student.roofline.as_ref()?;
        let roofs = match &outcome.peaks {
            Some(peaks) => roofs_of_peaks(peaks),
            None => roofs_of(student)?,
        };
        let point = |name, mark, r: &Roofline| {
            let placed = r.arithmetic_intensity.is_finite() && r.achieved_gflops > 0.0;
            placed.then_some(PlotPoint {
                name,
                mark,
                flop_per_byte: r.arithmetic_intensity,
                flops_per_s: r.achieved_gflops * 1e9,
            })
        };
        let points = [
            outcome
                .starter
                .roofline
                .as_ref()
                .and_then(|r| point("starter", "○", r)),
            point("kernel", "●", student),
        ]
        .into_iter()
        .flatten()
        .collect();
        Some(Self { roofs, points })
    }
}

/// Every roof of the GPU the counters were read on.
fn roofs_of_peaks(peaks: &DevicePeaks) -> Vec<PlotRoof> {
    let compute = |name: &str, flops_per_s| PlotRoof {
        name: name.into(),
        kind: RoofKind::Compute { flops_per_s },
    };
    let mut roofs = vec![compute("FP32", peaks.fp32_flops.per_s)];
    roofs.extend(peaks.tf32_flops.map(|roof| compute("TF32", roof.per_s)));
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
    let usable = |x: f64| x.is_finite() && x > 0.0;
    (usable(fp32) && usable(dram)).then(|| {
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
