//! Hardware counters inside the worker: CUPTI's range profiler around one
//! launch of the student's kernel and one of the starter.
//!
//! The profiler is enabled on first use and kept for the worker's life
//! (enabling costs a context synchronisation and a counter-availability
//! query). Each kernel is launched once unprofiled first, so module loading
//! and first-touch effects stay out of the range; no timing is ever taken
//! from a profiled launch (replay re-runs it once per pass).

use std::time::Instant;

use crate::gpu::cupti::{
    metrics, CountersUnavailable, Cupti, MetricConfig, RangeProfiler, FULL, QUICK,
};
use crate::gpu::device::{Gpu, GpuError, Kernel};
use crate::grade::compare::POISON_BITS;
use crate::grade::roofline::{analyze, DevicePeaks, Measured};
use crate::lab::cases::CaseInputs;
use crate::protocol::{CounterTier, CountersOutcome, CountersUnavailableReport, KernelCounters};

/// The profiler and its two metric configurations, built once.
pub struct Counters {
    // Field order matters: the profiler must be dropped before the library it came from.
    profiler: RangeProfiler,
    quick: MetricConfig,
    full: MetricConfig,
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

fn other_failure(detail: String) -> CountersUnavailableReport {
    CountersUnavailableReport {
        reason: "the profiler failed".into(),
        detail,
        fix: "Run without --counters; grading and timing do not depend on it.".into(),
    }
}

impl Counters {
    pub fn enable(gpu: &Gpu) -> Result<Self, CountersUnavailableReport> {
        let cupti = Cupti::load().map_err(|e| unavailable_report(&e))?;
        let failed = |e: crate::gpu::cupti::CuptiError| match e.unavailable() {
            Some(u) => unavailable_report(u),
            None => other_failure(e.to_string()),
        };
        let profiler = RangeProfiler::enable(&cupti, gpu.context()).map_err(failed)?;
        let quick = profiler.metric_config(QUICK.metrics).map_err(failed)?;
        let full = profiler.metric_config(FULL.metrics).map_err(failed)?;
        Ok(Self {
            profiler,
            quick,
            full,
            _cupti: cupti,
        })
    }

    /// Profiles the student's kernel and the starter on fresh inputs of `shape`.
    pub fn collect(
        &mut self,
        gpu: &Gpu,
        student: &Kernel,
        starter: &Kernel,
        tier: CounterTier,
        custom_metrics: &[String],
        inputs: &CaseInputs,
    ) -> Result<CountersOutcome, GpuError> {
        let started = Instant::now();
        let shape = inputs.shape;
        let custom;
        let config = match tier {
            CounterTier::Quick => &self.quick,
            CounterTier::Full => &self.full,
            CounterTier::Custom => {
                let names: Vec<&str> = custom_metrics.iter().map(String::as_str).collect();
                custom = self
                    .profiler
                    .metric_config(&names)
                    .map_err(GpuError::message)?;
                &custom
            }
        };
        let passes = config.num_passes();
        let chip = config.chip().to_string();
        let mut measure = |kernel: &Kernel| -> Result<KernelCounters, GpuError> {
            let mut ws = gpu.workspace(shape, &inputs.q, &inputs.k, &inputs.v, POISON_BITS)?;
            gpu.launch(kernel, &mut ws)?;
            gpu.synchronize()?;
            let profiled = self.profiler.profile(config, &mut || {
                gpu.launch(kernel, &mut ws)?;
                Ok(())
            });
            Ok(match profiled {
                Ok(values) => {
                    let finite = |name| values.get(name).filter(|v| v.is_finite());
                    let measured = Measured {
                        dram_bytes_read: finite(metrics::DRAM_BYTES_READ).unwrap_or(0.0),
                        dram_bytes_write: finite(metrics::DRAM_BYTES_WRITE).unwrap_or(0.0),
                        duration_ns: finite(metrics::DURATION_NS).unwrap_or(0.0),
                        sm_throughput_pct: finite(metrics::SM_THROUGHPUT_PCT),
                        achieved_occupancy_pct: finite(metrics::ACHIEVED_OCCUPANCY_PCT),
                    };
                    let roofline = analyze(shape, &measured, &DevicePeaks::h200());
                    KernelCounters {
                        metrics: values.values,
                        error: roofline.as_ref().err().map(|e| e.to_string()),
                        roofline: roofline.ok(),
                    }
                }
                Err(e) => KernelCounters {
                    metrics: Vec::new(),
                    roofline: None,
                    error: Some(e.to_string()),
                },
            })
        };
        let student_counters = measure(student)?;
        let starter_counters = measure(starter)?;
        Ok(CountersOutcome {
            tier,
            shape,
            chip,
            passes,
            student: student_counters,
            starter: starter_counters,
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }
}
