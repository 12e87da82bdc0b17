//! Roofline reading of one profiled launch: how far the kernel is from the
//! GPU's compute and memory peaks, and which of the two (if either) holds it
//! back.
//!
//! The inputs are plain numbers so this stays pure: the caller copies them
//! out of the CUPTI metric values (the field docs name the metric for each).
//! The verdict uses a fixed threshold of [`BOUND_THRESHOLD_PCT`] of a peak:
//! a kernel that reaches it on one resource is limited by that resource; one
//! that reaches it on neither is stalled on latency or short of parallelism,
//! which achieved occupancy helps tell apart.

use serde::{Deserialize, Serialize};

/// Share of a peak (percent) at or above which a kernel counts as bound by it.
pub const BOUND_THRESHOLD_PCT: f64 = 60.0;

/// Peak rates of one GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevicePeaks {
    pub name: String,
    /// FP32 FLOP/s (an FMA counts as two).
    pub fp32_flops_per_s: f64,
    /// DRAM bytes per second.
    pub dram_bytes_per_s: f64,
}

impl DevicePeaks {
    /// NVIDIA H200 SXM, datasheet figures, so leads rather than measurements:
    /// FP32 is 132 SMs x 128 lanes x 2 FLOP x 1.98 GHz boost = 66.9 TFLOP/s
    /// (the datasheet rounds to 67), and HBM3e is 4.8 TB/s. CUPTI does not
    /// lock clocks, so a kernel running below boost cannot reach the FP32
    /// figure; compare against the measured SM clock.
    pub fn h200() -> Self {
        Self {
            name: "H200 SXM".to_string(),
            fp32_flops_per_s: 132.0 * 128.0 * 2.0 * 1.98e9,
            dram_bytes_per_s: 4.8e12,
        }
    }

    /// Arithmetic intensity (FLOP per DRAM byte) where the two roofs meet.
    pub fn ridge_point(&self) -> f64 {
        self.fp32_flops_per_s / self.dram_bytes_per_s
    }
}

/// What was measured for one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// `dram__bytes_read.sum`.
    pub dram_bytes_read: f64,
    /// `dram__bytes_write.sum`.
    pub dram_bytes_write: f64,
    /// `gpu__time_duration.sum`, nanoseconds.
    pub duration_ns: f64,
    /// `sm__throughput.avg.pct_of_peak_sustained_elapsed` when the costly
    /// full set was collected; otherwise the FP32 rate stands in for it.
    pub sm_throughput_pct: Option<f64>,
    /// `sm__warps_active.avg.pct_of_peak_sustained_active`.
    pub achieved_occupancy_pct: Option<f64>,
}

/// Which roof limits the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Compute,
    Bandwidth,
    /// Neither roof is close: latency, occupancy or too little parallel work.
    Neither,
}

/// The bound and the numbers that decided it, in one line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub bound: Bound,
    pub reason: String,
}

/// The roofline figures of one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    pub dram_bytes: f64,
    pub compulsory_bytes: u64,
    /// DRAM traffic over the least any kernel must move; 1.0 is ideal.
    pub dram_over_compulsory: f64,
    /// FLOP per DRAM byte.
    pub arithmetic_intensity: f64,
    /// Where this device's roofs meet, in FLOP per byte.
    pub ridge_point: f64,
    pub achieved_gflops: f64,
    pub fp32_peak_pct: f64,
    pub dram_bandwidth_pct: f64,
    pub verdict: Verdict,
}

/// Measurements that cannot be placed on a roofline.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RooflineError {
    #[error("the kernel duration must be positive, got {0} ns")]
    NoDuration(f64),
    #[error("DRAM byte counts must be finite and not negative")]
    BadByteCount,
}

/// The work a launch must do, from the lab's model of one problem size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// Floating-point operations of exact attention.
    pub flops: f64,
    /// Fewest DRAM bytes any kernel must move: every input read once, the output written once.
    pub compulsory_bytes: u64,
}

/// Places one launch doing `work` on `peaks`' roofline.
pub fn analyze(
    work: Work,
    measured: &Measured,
    peaks: &DevicePeaks,
) -> Result<Roofline, RooflineError> {
    if !(measured.duration_ns.is_finite() && measured.duration_ns > 0.0) {
        return Err(RooflineError::NoDuration(measured.duration_ns));
    }
    let dram_bytes = measured.dram_bytes_read + measured.dram_bytes_write;
    if !(dram_bytes.is_finite()
        && measured.dram_bytes_read >= 0.0
        && measured.dram_bytes_write >= 0.0)
    {
        return Err(RooflineError::BadByteCount);
    }
    let seconds = measured.duration_ns * 1e-9;
    let flops = work.flops;
    let flops_per_s = flops / seconds;
    let fp32_peak_pct = 100.0 * flops_per_s / peaks.fp32_flops_per_s;
    let dram_bandwidth_pct = 100.0 * (dram_bytes / seconds) / peaks.dram_bytes_per_s;
    let compulsory_bytes = work.compulsory_bytes;
    Ok(Roofline {
        dram_bytes,
        compulsory_bytes,
        dram_over_compulsory: dram_bytes / compulsory_bytes as f64,
        arithmetic_intensity: if dram_bytes > 0.0 {
            flops / dram_bytes
        } else {
            f64::INFINITY
        },
        ridge_point: peaks.ridge_point(),
        achieved_gflops: flops_per_s / 1e9,
        fp32_peak_pct,
        dram_bandwidth_pct,
        verdict: verdict(measured, fp32_peak_pct, dram_bandwidth_pct),
    })
}

/// Compares the compute and bandwidth shares against the threshold.
fn verdict(measured: &Measured, fp32_peak_pct: f64, dram_pct: f64) -> Verdict {
    let (compute_pct, compute_label) = match measured.sm_throughput_pct {
        Some(pct) => (pct, "SM throughput"),
        None => (fp32_peak_pct, "FP32 rate"),
    };
    let figures = format!("{compute_label} {compute_pct:.0}% of peak, DRAM {dram_pct:.0}% of peak");
    let compute_bound = compute_pct >= BOUND_THRESHOLD_PCT;
    let bandwidth_bound = dram_pct >= BOUND_THRESHOLD_PCT;
    if compute_bound && (!bandwidth_bound || compute_pct >= dram_pct) {
        Verdict {
            bound: Bound::Compute,
            reason: format!("compute-bound: {figures}"),
        }
    } else if bandwidth_bound {
        Verdict {
            bound: Bound::Bandwidth,
            reason: format!("bandwidth-bound: {figures}"),
        }
    } else {
        let occupancy = match measured.achieved_occupancy_pct {
            Some(pct) => format!("; achieved occupancy {pct:.0}%"),
            None => String::new(),
        };
        Verdict {
            bound: Bound::Neither,
            reason: format!(
                "neither roof reached, so latency- or occupancy-limited: {figures}{occupancy}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first lab's timing shape (C = P = 2048).
    const TIMING_WORK: Work = Work {
        flops: 51_547_996_160.0,
        compulsory_bytes: 48 << 20,
    };

    const MIB: f64 = 1024.0 * 1024.0;

    fn measured(duration_ns: f64, dram_bytes: f64) -> Measured {
        Measured {
            dram_bytes_read: dram_bytes * 0.75,
            dram_bytes_write: dram_bytes * 0.25,
            duration_ns,
            sm_throughput_pct: None,
            achieved_occupancy_pct: None,
        }
    }

    fn analyze_h200(measured: &Measured) -> Roofline {
        analyze(TIMING_WORK, measured, &DevicePeaks::h200()).expect("valid measurement")
    }

    #[test]
    fn h200_peaks_follow_the_datasheet() {
        let peaks = DevicePeaks::h200();
        assert!((peaks.fp32_flops_per_s / 1e12 - 66.9).abs() < 0.05);
        assert!((peaks.ridge_point() - 13.94).abs() < 0.01);
    }

    #[test]
    fn figures_follow_from_flops_bytes_and_time() {
        // 1 ms and 96 MiB of DRAM traffic: twice the compulsory 48 MiB.
        let roofline = analyze_h200(&measured(1e6, 96.0 * MIB));
        assert_eq!(roofline.compulsory_bytes, 48 << 20);
        assert!((roofline.dram_over_compulsory - 2.0).abs() < 1e-12);
        let flops = TIMING_WORK.flops;
        assert!((roofline.achieved_gflops - flops / 1e6).abs() < 1e-6);
        assert!((roofline.arithmetic_intensity - flops / (96.0 * MIB)).abs() < 1e-9);
        let expected_dram_pct = 100.0 * (96.0 * MIB / 1e-3) / 4.8e12;
        assert!((roofline.dram_bandwidth_pct - expected_dram_pct).abs() < 1e-9);
    }

    #[test]
    fn fast_kernel_with_little_traffic_is_compute_bound() {
        // 51.5 GFLOP in 1 ms is 77% of the FP32 peak.
        let roofline = analyze_h200(&measured(1e6, 48.0 * MIB));
        assert!((roofline.fp32_peak_pct - 77.0).abs() < 0.1);
        assert_eq!(roofline.verdict.bound, Bound::Compute);
        assert!(
            roofline.verdict.reason.contains("FP32 rate 77%"),
            "{}",
            roofline.verdict.reason
        );
    }

    #[test]
    fn heavy_traffic_is_bandwidth_bound() {
        // 40 GB in 10 ms is 4 TB/s, 83% of HBM3e; FP32 is under 8%.
        let roofline = analyze_h200(&measured(1e7, 40e9));
        assert_eq!(roofline.verdict.bound, Bound::Bandwidth);
        assert!(
            roofline.verdict.reason.contains("DRAM 83%"),
            "{}",
            roofline.verdict.reason
        );
    }

    #[test]
    fn slow_kernel_with_both_low_blames_latency_and_names_occupancy() {
        let mut slow = measured(1e8, 48.0 * MIB);
        slow.achieved_occupancy_pct = Some(12.4);
        let roofline = analyze_h200(&slow);
        assert_eq!(roofline.verdict.bound, Bound::Neither);
        assert!(roofline
            .verdict
            .reason
            .contains("latency- or occupancy-limited"));
        assert!(
            roofline.verdict.reason.contains("achieved occupancy 12%"),
            "{}",
            roofline.verdict.reason
        );
    }

    #[test]
    fn measured_sm_throughput_outranks_the_fp32_rate() {
        let mut busy = measured(1e8, 48.0 * MIB);
        busy.sm_throughput_pct = Some(85.0);
        let roofline = analyze_h200(&busy);
        assert!(roofline.fp32_peak_pct < 1.0);
        assert_eq!(roofline.verdict.bound, Bound::Compute);
        assert!(roofline.verdict.reason.contains("SM throughput 85%"));
    }

    #[test]
    fn when_both_roofs_are_near_the_higher_one_wins() {
        let mut both = measured(1e7, 40e9);
        both.sm_throughput_pct = Some(70.0);
        assert_eq!(analyze_h200(&both).verdict.bound, Bound::Bandwidth);
        both.sm_throughput_pct = Some(95.0);
        assert_eq!(analyze_h200(&both).verdict.bound, Bound::Compute);
    }

    #[test]
    fn impossible_measurements_are_refused() {
        let peaks = DevicePeaks::h200();
        assert_eq!(
            analyze(TIMING_WORK, &measured(0.0, 1.0), &peaks),
            Err(RooflineError::NoDuration(0.0))
        );
        assert_eq!(
            analyze(TIMING_WORK, &measured(1e6, -1.0), &peaks),
            Err(RooflineError::BadByteCount)
        );
        assert_eq!(
            analyze(TIMING_WORK, &measured(1e6, f64::NAN), &peaks),
            Err(RooflineError::BadByteCount)
        );
    }

    #[test]
    fn roofline_survives_a_json_round_trip() {
        let roofline = analyze_h200(&measured(1e6, 96.0 * MIB));
        let json = serde_json::to_string(&roofline).expect("serialise");
        assert!(json.contains("\"bound\":\"compute\""));
        let back: Roofline = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, roofline);
    }
}
