//! Hardware counters inside the worker: CUPTI's range profiler around
//! launches of the student's kernel and of the starter.
//!
//! CUPTI, the range profiler and the metric configurations are set up on
//! first use and kept for the worker's life. The profiler object is
//! re-enabled before every profiled launch: on the H200 (CUPTI 13.0, driver
//! 580) a multi-pass config profiled after an earlier range on the same
//! object returned NaN for its multi-pass metrics, while the first range
//! after enabling was right. Each kernel is launched once unprofiled first, so module loading
//! and first-touch effects stay out of the range, and L2 is flushed before
//! each profiled launch; no timing is ever taken from a profiled launch
//! (replay re-runs it once per pass).

use std::time::Instant;

use super::Baselines;
use crate::gpu::cupti::{
    metrics, CountersUnavailable, Cupti, CuptiError, MetricConfig, MetricValue, RangeProfiler,
    FULL_GROUPS, QUICK,
};
use crate::gpu::device::{Gpu, GpuError, Kernel, L2Flusher};
use crate::grade::compare::POISON_BITS;
use crate::grade::roofline::{analyze, DevicePeaks, Measured};
use crate::lab::cases::CaseInputs;
use crate::protocol::{CounterTier, CountersOutcome, CountersUnavailableReport, KernelCounters};

/// The profiler and its metric configurations, built once.
pub struct Counters {
    // Field order matters: everything here must be dropped before the library it came from.
    profiler: RangeProfiler,
    quick: MetricConfig,
    /// What the full tier adds, one profiled launch per group.
    full_groups: Vec<MetricConfig>,
    _cupti: Cupti,
}

/// Turns CUPTI's reason into what the caller shows.
pub fn unavailable_report(error: &CountersUnavailable) -> CountersUnavailableReport {
    CountersUnavailableReport {
        reason: error.reason.summary().to_string(),
        detail: error.detail.clone(),
        fix: error.fix().to_string(),
    }
}

fn setup_failure(error: CuptiError) -> CountersUnavailableReport {
    match error.unavailable() {
        Some(u) => unavailable_report(u),
        None => CountersUnavailableReport {
            reason: "the profiler failed".into(),
            detail: error.to_string(),
            fix: "Run with --no-counters; grading and timing do not depend on it.".into(),
        },
    }
}

impl Counters {
    pub fn enable(gpu: &Gpu) -> Result<Self, CountersUnavailableReport> {
        let cupti = Cupti::load().map_err(|e| unavailable_report(&e))?;
        // Enabling once up front is also the permission check: it is the first
        // call to fail without counter rights or with another profiler attached.
        let profiler = RangeProfiler::enable(&cupti, gpu.context()).map_err(setup_failure)?;
        let quick = profiler
            .metric_config(QUICK.metrics)
            .map_err(setup_failure)?;
        let full_groups = FULL_GROUPS
            .iter()
            .map(|group| profiler.metric_config(group.metrics))
            .collect::<Result<_, _>>()
            .map_err(setup_failure)?;
        Ok(Self {
            profiler,
            quick,
            full_groups,
            _cupti: cupti,
        })
    }

    /// Profiles the student's kernel and the starter on `inputs`.
    pub fn collect(
        &mut self,
        gpu: &Gpu,
        student: &Kernel,
        baselines: &Baselines,
        tier: CounterTier,
        custom_metrics: &[String],
        inputs: &CaseInputs,
    ) -> Result<CountersOutcome, GpuError> {
        let started = Instant::now();
        let custom;
        let configs: Vec<&MetricConfig> = match tier {
            CounterTier::Quick => vec![&self.quick],
            CounterTier::Full => std::iter::once(&self.quick)
                .chain(&self.full_groups)
                .collect(),
            CounterTier::Custom => {
                let names: Vec<&str> = custom_metrics.iter().map(String::as_str).collect();
                custom = self
                    .profiler
                    .metric_config(&names)
                    .map_err(GpuError::message)?;
                vec![&custom]
            }
        };
        let passes = configs.iter().map(|c| c.num_passes()).sum();
        let chip = self.profiler.chip().to_string();
        let mut flusher = gpu.l2_flusher(&baselines.l2_sweep)?;
        let profiler = &mut self.profiler;
        let mut measure = |kernel| measure(profiler, &configs, gpu, &mut flusher, kernel, inputs);
        let student_counters = measure(student)?;
        let starter_counters = measure(&baselines.starter)?;
        Ok(CountersOutcome {
            tier,
            shape: inputs.shape,
            chip,
            passes,
            student: student_counters,
            starter: starter_counters,
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }
}

/// One kernel under every config in turn, values merged in config order.
fn measure(
    profiler: &mut RangeProfiler,
    configs: &[&MetricConfig],
    gpu: &Gpu,
    flusher: &mut L2Flusher,
    kernel: &Kernel,
    inputs: &CaseInputs,
) -> Result<KernelCounters, GpuError> {
    let mut ws = gpu.workspace(inputs.shape, &inputs.q, &inputs.k, &inputs.v, POISON_BITS)?;
    gpu.launch(kernel, &mut ws)?;
    gpu.synchronize()?;
    let mut values: Vec<MetricValue> = Vec::new();
    for config in configs {
        // Cold L2 before every profiled launch, as for timing: the DRAM bytes
        // then compare with the analytic minimum (every byte read once) and
        // with Nsight Compute's default cache control.
        gpu.flush_l2(flusher)?;
        gpu.synchronize()?;
        let profiled = profiler.reenable().and_then(|()| {
            profiler.profile(config, &mut || {
                gpu.launch(kernel, &mut ws)?;
                Ok(())
            })
        });
        match profiled {
            Ok(v) => values.extend(v.values),
            Err(e) => {
                return Ok(KernelCounters {
                    metrics: values,
                    roofline: None,
                    error: Some(e.to_string()),
                })
            }
        }
    }
    let value = |name: &str| {
        values
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
            .filter(|v| v.is_finite())
    };
    // The roofline needs both byte counts and the duration; a custom set may lack them.
    let roofline = match (
        value(metrics::DRAM_BYTES_READ),
        value(metrics::DRAM_BYTES_WRITE),
        value(metrics::DURATION_NS),
    ) {
        (Some(read), Some(write), Some(duration_ns)) if read + write > 0.0 => {
            let measured = Measured {
                dram_bytes_read: read,
                dram_bytes_write: write,
                duration_ns,
                sm_throughput_pct: value(metrics::SM_THROUGHPUT_PCT),
                achieved_occupancy_pct: value(metrics::ACHIEVED_OCCUPANCY_PCT),
            };
            Some(analyze(inputs.shape, &measured, &DevicePeaks::h200()))
        }
        _ => None,
    };
    Ok(KernelCounters {
        metrics: values,
        error: roofline
            .as_ref()
            .and_then(|r| r.as_ref().err())
            .map(|e| e.to_string()),
        roofline: roofline.and_then(Result::ok),
    })
}
