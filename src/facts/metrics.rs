//! The metrics flashprof asks for, as data.
//!
//! Each extra replay pass re-runs the student's kernel under CUPTI, so the
//! sets are chosen by pass count: [`QUICK`] fits one pass on GH100 and is
//! cheap enough to take on every save; [`FULL_EXTRA`] adds SM throughput,
//! whose sub-counters alone need eight passes, and the L2 hit rate.

use serde::{Deserialize, Serialize};

/// DRAM bytes read, whole device.
pub const DRAM_BYTES_READ: &str = "dram__bytes_read.sum";
/// DRAM bytes written, whole device.
pub const DRAM_BYTES_WRITE: &str = "dram__bytes_write.sum";
/// Kernel duration in nanoseconds, as the GPU timed it.
pub const DURATION_NS: &str = "gpu__time_duration.sum";
/// Achieved occupancy: active warps as a percentage of the SM's warp slots.
pub const ACHIEVED_OCCUPANCY_PCT: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
/// Warp instructions issued to the FMA pipe (FFMA, FADD, FMUL and IMAD).
pub const FMA_PIPE_WARP_INSTRUCTIONS: &str = "smsp__inst_executed_pipe_fma.sum";
/// Cycles an average SM had at least one warp resident.
pub const SM_ACTIVE_CYCLES: &str = "sm__cycles_active.avg";
/// The SM clock while the kernel ran, in Hz; CUPTI 13.0 does not lock clocks,
/// so this is reported next to every result.
pub const SM_CLOCK_HZ: &str = "gpc__cycles_elapsed.avg.per_second";
/// Share of the elapsed cycles the FMA pipe was busy: a one-pass stand-in for
/// compute throughput when [`SM_THROUGHPUT_PCT`] is too costly.
pub const FMA_PIPE_BUSY_PCT: &str = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed";
/// DRAM throughput as a percentage of peak, measured by the memory controller.
pub const DRAM_THROUGHPUT_PCT: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
/// The busiest SM sub-unit as a percentage of its peak (eight passes on GH100).
pub const SM_THROUGHPUT_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
/// Share of L2 sector lookups that hit.
pub const L2_HIT_RATE_PCT: &str = "lts__t_sector_hit_rate.pct";

/// A named list of metrics requested together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSet {
    pub name: &'static str,
    pub metrics: &'static [&'static str],
}

/// One replay pass on GH100: bytes, time, occupancy, FMA work and clock.
pub const QUICK: MetricSet = MetricSet {
    name: "quick",
    metrics: &[
        DRAM_BYTES_READ,
        DRAM_BYTES_WRITE,
        DURATION_NS,
        ACHIEVED_OCCUPANCY_PCT,
        FMA_PIPE_WARP_INSTRUCTIONS,
        SM_ACTIVE_CYCLES,
        SM_CLOCK_HZ,
        FMA_PIPE_BUSY_PCT,
        DRAM_THROUGHPUT_PCT,
    ],
};

/// What the full tier adds to [`QUICK`], in one profiled launch of eight
/// passes on GH100 (the L2 hit rate fits in SM throughput's passes).
///
/// Measured on the H200 (CUPTI 13.0, driver 580, 2026-11-30): the first range
/// on a freshly enabled profiler object costs a fixed ~170 ms on top of its
/// passes, so one launch for both multi-pass metrics took about half the time
/// of one launch each, with the same values (SM throughput within 0.6 points,
/// L2 hit rate within 0.4). A multi-pass config needs a fresh profiler object
/// (the range profiler sees to that); mixed with the quick set
/// on a fresh object it was right too.
pub const FULL_EXTRA: MetricSet = MetricSet {
    name: "full",
    metrics: &[SM_THROUGHPUT_PCT, L2_HIT_RATE_PCT],
};

/// One named metric value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricValue {
    pub name: String,
    /// NaN when CUPTI could not evaluate the metric for this launch (a
    /// ratio over zero events, say).
    #[serde(with = "crate::nonfinite")]
    pub value: f64,
}

/// The values of one profiled launch, in the config's metric order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricValues {
    pub chip: String,
    /// Replay passes the launch took.
    pub passes: usize,
    pub values: Vec<MetricValue>,
}

/// The value of `name` among `values`, if it was collected and CUPTI could
/// evaluate it: what every reader of counters wants, since NaN means "no value".
pub fn finite_value(values: &[MetricValue], name: &str) -> Option<f64> {
    values
        .iter()
        .find(|metric| metric.name == name && metric.value.is_finite())
        .map(|metric| metric.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_cupti_could_not_evaluate_survives_the_pipe() {
        let value = MetricValue {
            name: super::L2_HIT_RATE_PCT.into(),
            value: f64::NAN,
        };
        let json = serde_json::to_string(&value).unwrap();
        let back: MetricValue = serde_json::from_str(&json).unwrap();
        assert!(back.value.is_nan(), "{json}");
    }
}
