//! The metrics flashprof asks for, as data.
//!
//! Each extra replay pass re-runs the student's kernel under CUPTI, so the
//! sets are chosen by pass count: [`QUICK`] fits one pass on GH100 and is
//! cheap enough to take on every save; [`FULL_EXTRA`] adds SM throughput,
//! whose sub-counters alone need eight passes, the L1 and L2 throughputs,
//! the remaining pipes and the L2 hit rate (nine passes in all).
//!
//! The per-unit figures are the ones Nsight Compute's speed-of-light and
//! compute-workload sections are built on, each as a share of its peak over
//! the kernel's elapsed cycles; [`UNIT_METRICS`] says which unit each measures.

use serde::{Deserialize, Serialize};

use crate::grade::roofline::Unit;

/// DRAM bytes read, whole device.
pub const DRAM_BYTES_READ: &str = "dram__bytes_read.sum";
/// DRAM bytes written, whole device.
pub const DRAM_BYTES_WRITE: &str = "dram__bytes_write.sum";
/// Kernel duration in nanoseconds, as the GPU timed it.
pub const DURATION_NS: &str = "gpu__time_duration.sum";
/// Achieved occupancy: active warps as a percentage of the SM's warp slots.
pub const ACHIEVED_OCCUPANCY_PCT: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
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
/// Tensor pipe busy on HMMA (FP16, BF16 and TF32 `mma.sync`/wmma), one pass.
pub const TENSOR_HMMA_PIPE_BUSY_PCT: &str =
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed";
/// Shared-memory wavefronts through L1's data pipe, against its peak.
pub const SHARED_WAVEFRONTS_PCT: &str =
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed";
/// Tensor pipe busy on any tensor instruction (the full set's view).
pub const TENSOR_PIPE_BUSY_PCT: &str =
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed";
/// Integer, compare and logic pipe busy.
pub const ALU_PIPE_BUSY_PCT: &str = "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed";
/// FP64 pipe busy.
pub const FP64_PIPE_BUSY_PCT: &str =
    "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed";
/// Special-function (XU) instructions against their issue peak.
pub const XU_INSTRUCTIONS_PCT: &str = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_elapsed";
/// Load/store (LSU) instructions against their issue peak.
pub const LSU_INSTRUCTIONS_PCT: &str =
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_elapsed";
/// Warp instructions executed against the SM's issue peak.
pub const ISSUE_PCT: &str = "sm__inst_executed.avg.pct_of_peak_sustained_elapsed";
/// L1/TEX throughput (Nsight Compute's speed-of-light row).
pub const L1_THROUGHPUT_PCT: &str = "l1tex__throughput.avg.pct_of_peak_sustained_elapsed";
/// L2 throughput (Nsight Compute's speed-of-light row).
pub const L2_THROUGHPUT_PCT: &str = "lts__throughput.avg.pct_of_peak_sustained_elapsed";

/// Bytes L2 moved: every request its slices served, hit or miss, read or write.
pub const L2_BYTES: &str = "lts__t_bytes.sum";
/// The most bytes L2 can move a cycle, over all its slices: from the chip's
/// configuration, so it costs no counter.
pub const L2_PEAK_BYTES_PER_CYCLE: &str = "lts__t_bytes.sum.peak_sustained";
/// The L2 clock while the kernel ran, in Hz.
pub const L2_CLOCK_HZ: &str = "lts__cycles_elapsed.avg.per_second";
/// Shared-memory wavefronts through L1's data pipe, all SMs.
pub const SHARED_WAVEFRONTS: &str = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum";
/// The most shared-memory wavefronts all SMs can serve a cycle (configuration, no counter).
pub const SHARED_PEAK_WAVEFRONTS_PER_CYCLE: &str =
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.peak_sustained";
/// The L1 clock while the kernel ran, in Hz.
pub const L1_CLOCK_HZ: &str = "l1tex__cycles_elapsed.avg.per_second";
/// Bytes a shared-memory wavefront moves at most: one row of the 32
/// four-byte banks (Volta to Hopper). The counters count wavefronts, not
/// bytes, so both the traffic and the roof are wavefronts times this: a
/// bank conflict's extra wavefronts count as the bandwidth they take.
pub const SHARED_BYTES_PER_WAVEFRONT: f64 = 128.0;

/// The counters that place a kernel at one memory level of the
/// hierarchical roofline, as Nsight Compute's roofline does: the level's
/// traffic, its peak a cycle (`.peak_sustained`, known from the chip's
/// configuration, so no extra pass) and its clock during the launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelMetrics {
    pub unit: Unit,
    /// The traffic, in units of `bytes_per_count`.
    pub count: &'static str,
    pub peak_per_cycle: &'static str,
    pub clock_hz: &'static str,
    pub bytes_per_count: f64,
}

/// The levels above DRAM (whose roof is measured by a copy benchmark).
pub const LEVEL_METRICS: [LevelMetrics; 2] = [
    LevelMetrics {
        unit: Unit::SharedMemory,
        count: SHARED_WAVEFRONTS,
        peak_per_cycle: SHARED_PEAK_WAVEFRONTS_PER_CYCLE,
        clock_hz: L1_CLOCK_HZ,
        bytes_per_count: SHARED_BYTES_PER_WAVEFRONT,
    },
    LevelMetrics {
        unit: Unit::L2,
        count: L2_BYTES,
        peak_per_cycle: L2_PEAK_BYTES_PER_CYCLE,
        clock_hz: L2_CLOCK_HZ,
        bytes_per_count: 1.0,
    },
];

/// The unit each per-unit metric measures. Where two metrics measure one
/// unit (the tensor pipe), the higher value counts.
pub const UNIT_METRICS: &[(Unit, &str)] = &[
    (Unit::FmaPipe, FMA_PIPE_BUSY_PCT),
    (Unit::TensorPipe, TENSOR_HMMA_PIPE_BUSY_PCT),
    (Unit::TensorPipe, TENSOR_PIPE_BUSY_PCT),
    (Unit::AluPipe, ALU_PIPE_BUSY_PCT),
    (Unit::SpecialFunctionPipe, XU_INSTRUCTIONS_PCT),
    (Unit::Fp64Pipe, FP64_PIPE_BUSY_PCT),
    (Unit::LoadStorePipe, LSU_INSTRUCTIONS_PCT),
    (Unit::InstructionIssue, ISSUE_PCT),
    (Unit::SharedMemory, SHARED_WAVEFRONTS_PCT),
    (Unit::L1, L1_THROUGHPUT_PCT),
    (Unit::L2, L2_THROUGHPUT_PCT),
    (Unit::Dram, DRAM_THROUGHPUT_PCT),
];

/// A named list of metrics requested together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSet {
    pub name: &'static str,
    pub metrics: &'static [&'static str],
}

/// One replay pass on GH100: bytes, time, occupancy, clock, the FMA
/// pipe, tensor pipe, shared memory and DRAM against their peaks, and the
/// L2 and shared-memory traffic with their peaks and clocks for the
/// hierarchical roofline (these six add no pass). (Any other pipe, or the
/// FMA pipe's instruction count, makes it two passes.)
pub const QUICK: MetricSet = MetricSet {
    name: "quick",
    metrics: &[
        DRAM_BYTES_READ,
        DRAM_BYTES_WRITE,
        DURATION_NS,
        ACHIEVED_OCCUPANCY_PCT,
        SM_ACTIVE_CYCLES,
        SM_CLOCK_HZ,
        FMA_PIPE_BUSY_PCT,
        DRAM_THROUGHPUT_PCT,
        TENSOR_HMMA_PIPE_BUSY_PCT,
        SHARED_WAVEFRONTS_PCT,
        L2_BYTES,
        L2_PEAK_BYTES_PER_CYCLE,
        L2_CLOCK_HZ,
        SHARED_WAVEFRONTS,
        SHARED_PEAK_WAVEFRONTS_PER_CYCLE,
        L1_CLOCK_HZ,
    ],
};

/// What the full tier adds to [`QUICK`], in one profiled launch of nine
/// passes on GH100 (SM throughput alone takes eight; the L2 hit rate, the L2
/// throughput and the pipes fit in them, the L1 throughput adds one).
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
    metrics: &[
        SM_THROUGHPUT_PCT,
        L2_HIT_RATE_PCT,
        L1_THROUGHPUT_PCT,
        L2_THROUGHPUT_PCT,
        ALU_PIPE_BUSY_PCT,
        XU_INSTRUCTIONS_PCT,
        LSU_INSTRUCTIONS_PCT,
        FP64_PIPE_BUSY_PCT,
        TENSOR_PIPE_BUSY_PCT,
        ISSUE_PCT,
    ],
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
    fn every_level_is_placed_by_the_quick_set() {
        for level in LEVEL_METRICS {
            for metric in [level.count, level.peak_per_cycle, level.clock_hz] {
                assert!(QUICK.metrics.contains(&metric), "{metric}");
            }
        }
    }

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
