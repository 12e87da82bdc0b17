//! Hardware counters inside the worker: CUPTI's range profiler around
//! launches of the student's kernel and of the starter.
//!
//! CUPTI, the range profiler and the metric configurations are set up on
//! first use and kept for the worker's life (the L2 flusher is the worker's,
//! shared with timing). Values are kept too, per kernel build, shape and
//! metric set: the starter does not change between saves, and the full tier
//! follows the quick one on the same build, so neither is profiled twice. Each kernel is launched once unprofiled
//! before its first profiled range, so module loading and first-touch effects
//! stay out of it. Every profiled launch is prepared and audited as a timed
//! one is (fresh inputs, poisoned output, L2 evicted, persisting lines reset;
//! then its output checked, `timing::Bench`): a profile of a launch that did
//! not compute its output, or that read less than half its inputs from DRAM,
//! is refused, not shown. No timing is ever taken from a profiled launch
//! (replay re-runs it once per pass).

use std::collections::HashMap;
use std::time::Instant;

use super::drawn::DrawnInputs;
use super::timing::Bench;
use super::Baselines;
use crate::facts::metrics;
use crate::gpu::cupti::{
    finite_value, CountersUnavailable, Cupti, CuptiError, MetricConfig, MetricValue, RangeProfiler,
    FULL_EXTRA, QUICK,
};
use crate::gpu::device::{Gpu, GpuError, Kernel};
use crate::gpu::peaks::{measure_peaks, Benchmark, FoundPeaks, ProbeLaunch};
use crate::grade::floor::too_few_dram_reads;
use crate::grade::launch_audit::{LaunchAudit, LaunchId, LaunchPhase};
use crate::grade::roofline::{
    analyze, DevicePeaks, LevelTraffic, Measured, PeakSource, Roof, Roofline, RooflineError,
    UnitLoad, Work,
};
use crate::lab::definition::LabRef;
use crate::lab::definition::{CaseData, LabCase, Problem};
use crate::protocol::{CounterTier, CountersOutcome, CountersUnavailableReport, KernelCounters};

/// The profiler, its metric configurations and what it measured so far.
pub struct Counters {
    // Field order matters: everything here must be dropped before the library it came from.
    profiler: RangeProfiler,
    quick: MetricConfig,
    /// What the full tier adds to the quick set.
    full_extra: MetricConfig,
    measured: HashMap<MeasurementKey, Vec<MetricValue>>,
    /// The problem each measured case describes (its work model places a
    /// reused measurement on the roofline without making the inputs again).
    problems: HashMap<String, Problem>,
    /// The GPU's roofs, found on the first request (benchmarked or cached).
    peaks: Option<FoundPeaks>,
    _cupti: Cupti,
}

/// What a measurement depends on. The seed is left out on purpose: the
/// kernels' memory traffic and instruction counts depend on the shape, not
/// on the input values, and keeping the seed would re-profile the starter on
/// every save (each run draws fresh inputs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MeasurementKey {
    build: u64,
    /// The case, as JSON: its recipe decides the problem size.
    case: String,
    metrics: Vec<String>,
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
        let full_extra = profiler
            .metric_config(FULL_EXTRA.metrics)
            .map_err(setup_failure)?;
        Ok(Self {
            profiler,
            quick,
            full_extra,
            measured: HashMap::new(),
            problems: HashMap::new(),
            peaks: None,
            _cupti: cupti,
        })
    }

    /// Profiles the student's kernel and the starter on the timing inputs of
    /// `shape` and `seed`, reusing whatever was measured before.
    pub fn collect(
        &mut self,
        gpu: &Gpu,
        student: &Kernel,
        baselines: &mut Baselines,
        drawn: &mut DrawnInputs,
        request: &CountersRequest,
    ) -> Result<CountersOutcome, GpuError> {
        let started = Instant::now();
        // The benchmarks run before any profiled range, and their pipe loads
        // are read under the profiler once per GPU (then cached with them).
        let peaks = match (self.peaks.take(), &request.known_peaks) {
            (Some(found), _) => found,
            (None, known) => {
                let mut found = match known {
                    Some(known) => FoundPeaks {
                        peaks: known.clone(),
                        origin: "measured earlier (cached)".into(),
                    },
                    None => measure_peaks(gpu, &baselines.probes),
                };
                calibrate(&mut self.profiler, gpu, &baselines.probes, &mut found);
                found
            }
        };
        self.peaks = Some(peaks.clone());
        let custom;
        let configs: Vec<&MetricConfig> = match request.tier {
            CounterTier::Quick => vec![&self.quick],
            CounterTier::Full => vec![&self.quick, &self.full_extra],
            CounterTier::Custom => {
                let names: Vec<&str> = request.custom_metrics.iter().map(String::as_str).collect();
                custom = self
                    .profiler
                    .metric_config(&names)
                    .map_err(GpuError::message)?;
                vec![&custom]
            }
        };
        // Only the builds in use are worth remembering.
        let builds = [student.build(), baselines.starter.build()];
        self.measured.retain(|key, _| builds.contains(&key.build));
        let case_key = format!("{}\0{}", request.case.name, request.case.recipe.to_json());
        let lab = baselines.lab;
        let mut session = Session {
            profiler: &mut self.profiler,
            baselines,
            measured: &mut self.measured,
            problems: &mut self.problems,
            lab,
            gpu,
            request,
            case_key,
            drawn,
            inputs: None,
            peaks: &peaks.peaks,
            full_breakdown: request.tier == CounterTier::Full,
        };
        let student_counters = session.measure(student, &configs)?;
        let starter = session.baselines.starter.clone();
        let starter_counters = session.measure(&starter, &configs)?;
        let shape = session.problem()?;
        Ok(CountersOutcome {
            tier: request.tier,
            shape,
            chip: self.profiler.chip().to_string(),
            passes: configs.iter().map(|c| c.num_passes()).sum(),
            student: student_counters,
            starter: starter_counters,
            peaks: Some(peaks.peaks),
            peaks_origin: Some(peaks.origin),
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }
}

/// Reads how busy each measured compute roof's benchmark keeps its pipe,
/// by profiling it once, and scales the roof to a full pipe: a benchmark
/// that keeps the FMA pipe 84% busy measured 84% of the roof. (On the H200
/// the TF32 `mma.sync` loop reads 99%: the tensor pipe's peak is what
/// `mma.sync` reaches, so no unit needs a lower ceiling.) Every tensor
/// roof (TF32, BF16) is read on the HMMA pipe. The caller caches the
/// result; a roof that cannot be read stays as measured.
fn calibrate(profiler: &mut RangeProfiler, gpu: &Gpu, probes: &[u8], found: &mut FoundPeaks) {
    let uncalibrated =
        |roof: &Roof| roof.source == PeakSource::Measured && roof.pipe_pct_at_peak.is_none();
    let peaks = &mut found.peaks;
    let tensor_needed = peaks.tensor_roofs().any(|(_, roof)| uncalibrated(roof));
    if !uncalibrated(&peaks.fp32_flops) && !tensor_needed {
        return;
    }
    let Ok(config) = profiler.metric_config(&[
        metrics::FMA_PIPE_BUSY_PCT,
        metrics::TENSOR_HMMA_PIPE_BUSY_PCT,
    ]) else {
        return;
    };
    let mut pipe_load = |benchmark, metric| -> Option<f64> {
        let mut probe = ProbeLaunch::new(gpu, probes, benchmark).ok()?;
        probe.launch().ok()?;
        gpu.synchronize().ok()?;
        let measured = profiler
            .profile(&config, &mut || Ok(probe.launch()?))
            .ok()?;
        finite_value(&measured.values, metric)
    };
    let mut calibrated = false;
    if uncalibrated(&peaks.fp32_flops) {
        let load = pipe_load(Benchmark::Fma, metrics::FMA_PIPE_BUSY_PCT);
        calibrated |= peaks.fp32_flops.scale_to_full_pipe(load);
    }
    for (benchmark, roof) in Benchmark::tensor_roofs(peaks) {
        if let Some(tensor) = roof.as_mut().filter(|roof| uncalibrated(roof)) {
            let load = pipe_load(benchmark, metrics::TENSOR_HMMA_PIPE_BUSY_PCT);
            calibrated |= tensor.scale_to_full_pipe(load);
        }
    }
    if calibrated {
        found.origin.push_str(", pipe loads read under CUPTI");
    }
}

/// What the caller asked for.
pub struct CountersRequest {
    pub case: LabCase,
    pub seed: u64,
    pub tier: CounterTier,
    pub custom_metrics: Vec<String>,
    /// The caller's cached roofs for this GPU.
    pub known_peaks: Option<DevicePeaks>,
}

/// One request's measurements; the inputs are made only if something must
/// be profiled.
struct Session<'a> {
    profiler: &'a mut RangeProfiler,
    baselines: &'a mut Baselines,
    measured: &'a mut HashMap<MeasurementKey, Vec<MetricValue>>,
    problems: &'a mut HashMap<String, Problem>,
    lab: LabRef,
    gpu: &'a Gpu,
    request: &'a CountersRequest,
    case_key: String,
    /// Where the inputs come from: kept from the timing, or drawn now.
    drawn: &'a mut DrawnInputs,
    inputs: Option<CaseData>,
    peaks: &'a DevicePeaks,
    /// Whether the configs hold the whole per-unit breakdown.
    full_breakdown: bool,
}

impl Session<'_> {
    /// The request's inputs, made on first use.
    fn inputs(&mut self) -> Result<&CaseData, GpuError> {
        if self.inputs.is_none() {
            let data = self
                .drawn
                .get(self.lab, &self.request.case, self.request.seed)?;
            self.problems
                .insert(self.case_key.clone(), data.problem.clone());
            self.inputs = Some(data);
        }
        Ok(self.inputs.as_ref().expect("made above"))
    }

    /// The request's problem, remembered from an earlier measurement when the
    /// inputs were not needed this time.
    fn problem(&mut self) -> Result<Problem, GpuError> {
        if let Some(problem) = self.problems.get(&self.case_key) {
            return Ok(problem.clone());
        }
        Ok(self.inputs()?.problem.clone())
    }

    /// One kernel under every config in turn, values merged in config order.
    fn measure(
        &mut self,
        kernel: &Kernel,
        configs: &[&MetricConfig],
    ) -> Result<KernelCounters, GpuError> {
        let gpu = self.gpu;
        let mut values: Vec<MetricValue> = Vec::new();
        let keys: Vec<MeasurementKey> = configs
            .iter()
            .map(|config| MeasurementKey {
                build: kernel.build(),
                case: self.case_key.clone(),
                metrics: config.metrics(),
            })
            .collect();
        // The workspace and the audit, made only when something must be profiled.
        let mut prepared = None;
        if keys.iter().any(|key| !self.measured.contains_key(key)) {
            self.inputs()?;
            let data = self.inputs.as_ref().expect("made above");
            let audit = LaunchAudit::new(data.problem.output, self.lab.tolerance());
            let mut bench = Bench::new(gpu, self.baselines, data, rand::random(), true)?;
            bench.prepare_copy()?;
            gpu.launch(kernel, &mut bench.ws)?;
            prepared = Some((bench, audit));
        }
        let mut reused = true;
        for (index, (config, key)) in configs.iter().zip(keys).enumerate() {
            if let Some(known) = self.measured.get(&key) {
                values.extend(known.iter().cloned());
                continue;
            }
            reused = false;
            let (bench, audit) = prepared
                .as_mut()
                .expect("made when a measurement was missing");
            // Fresh inputs and cold L2 before every profiled launch, as for
            // timing: the DRAM bytes then compare with the analytic minimum
            // (every byte read once) and with Nsight Compute's default cache
            // control.
            bench.prepare_next()?;
            let ws = &mut bench.ws;
            let profiled = self.profiler.profile(config, &mut || {
                gpu.launch(kernel, ws)?;
                Ok(())
            });
            let launch = LaunchId {
                phase: LaunchPhase::Profiled,
                number: index + 1,
                of: configs.len(),
            };
            match profiled {
                Ok(measured) => {
                    if let Err(finding) = bench.audit(audit, launch)? {
                        return Ok(KernelCounters::refused(format!(
                            "not this kernel's profile: {finding}"
                        )));
                    }
                    values.extend(measured.values.iter().cloned());
                    // A value CUPTI could not evaluate is measured again next
                    // time rather than kept for the worker's life.
                    if measured.values.iter().all(|m| m.value.is_finite()) {
                        self.measured.insert(key, measured.values);
                    }
                }
                Err(e) => {
                    return Ok(KernelCounters {
                        metrics: values,
                        roofline: None,
                        reused: false,
                        error: Some(e.to_string()),
                        refused: None,
                    })
                }
            }
        }
        let work = self.problem()?.work;
        if let Some(read) = finite_value(&values, metrics::DRAM_BYTES_READ) {
            if let Some(impossible) = too_few_dram_reads(work, read) {
                return Ok(KernelCounters::refused(impossible));
            }
        }
        let mut roofline = roofline(work, &values, self.peaks, self.full_breakdown);
        if let Some(Ok(placed)) = &mut roofline {
            self.lab.read_roofline(placed);
        }
        Ok(KernelCounters {
            refused: None,
            metrics: values,
            error: roofline
                .as_ref()
                .and_then(|r| r.as_ref().err())
                .map(|e| e.to_string()),
            roofline: roofline.and_then(Result::ok),
            reused,
        })
    }
}

/// Places the kernel on the roofline; `None` when a custom set lacks the
/// byte counts or the duration it needs.
fn roofline(
    work: Work,
    values: &[MetricValue],
    peaks: &DevicePeaks,
    full_breakdown: bool,
) -> Option<Result<Roofline, RooflineError>> {
    let value = |name: &str| finite_value(values, name);
    match (
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
                units: unit_loads(values),
                full_breakdown,
                levels: level_traffic(values),
            };
            Some(analyze(work, &measured, peaks))
        }
        _ => None,
    }
}

/// Each unit's load from the metrics that measure it (the higher where two do).
fn unit_loads(values: &[MetricValue]) -> Vec<UnitLoad> {
    let mut loads: Vec<UnitLoad> = Vec::new();
    for (unit, name) in metrics::UNIT_METRICS {
        let Some(pct) = finite_value(values, name) else {
            continue;
        };
        match loads.iter_mut().find(|l| l.unit == *unit) {
            Some(known) => known.pct_of_peak = known.pct_of_peak.max(pct),
            None => loads.push(UnitLoad::new(*unit, pct)),
        }
    }
    loads
}

/// The bytes each level above DRAM moved, and its peak over this launch:
/// peak a cycle times the clock the level ran at. A level whose traffic
/// was not collected (a custom set) is left out; one without its peak or
/// clock has no roof.
fn level_traffic(values: &[MetricValue]) -> Vec<LevelTraffic> {
    let value = |name: &str| finite_value(values, name);
    metrics::LEVEL_METRICS
        .iter()
        .filter_map(|level| {
            let count = value(level.count)?;
            let peak_per_s = value(level.peak_per_cycle)
                .zip(value(level.clock_hz))
                .map(|(per_cycle, hz)| per_cycle * hz * level.bytes_per_count);
            Some(LevelTraffic {
                unit: level.unit,
                bytes: count * level.bytes_per_count,
                peak_bytes_per_s: peak_per_s,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::roofline::Unit;

    fn value(name: &str, value: f64) -> MetricValue {
        MetricValue {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn each_unit_takes_its_busiest_metric_and_skips_nan() {
        let values = [
            value(metrics::FMA_PIPE_BUSY_PCT, 12.0),
            value(metrics::TENSOR_HMMA_PIPE_BUSY_PCT, 70.5),
            value(metrics::TENSOR_PIPE_BUSY_PCT, 71.0),
            value(metrics::ALU_PIPE_BUSY_PCT, f64::NAN),
            value(metrics::DURATION_NS, 1e6),
        ];
        let loads = unit_loads(&values);
        assert_eq!(
            loads,
            [
                UnitLoad::new(Unit::FmaPipe, 12.0),
                UnitLoad::new(Unit::TensorPipe, 71.0),
            ]
        );
    }

    #[test]
    fn levels_take_their_peak_a_cycle_times_their_clock() {
        // GH100 shapes: 132 SMs serve one shared wavefront a cycle each at
        // 1.755 GHz; L2 moves 5,632 bytes a cycle at 1.6 GHz.
        let values = [
            value(metrics::SHARED_WAVEFRONTS, 1e6),
            value(metrics::SHARED_PEAK_WAVEFRONTS_PER_CYCLE, 132.0),
            value(metrics::L1_CLOCK_HZ, 1.755e9),
            value(metrics::L2_BYTES, 3e8),
            value(metrics::L2_PEAK_BYTES_PER_CYCLE, 5632.0),
            value(metrics::L2_CLOCK_HZ, f64::NAN),
        ];
        let levels = level_traffic(&values);
        assert_eq!(levels.len(), 2);
        let shared = levels[0];
        assert_eq!(shared.unit, Unit::SharedMemory);
        assert_eq!(shared.bytes, 128e6);
        let peak = shared.peak_bytes_per_s.expect("peak and clock were read");
        assert!((peak - 132.0 * 128.0 * 1.755e9).abs() < 1.0, "{peak}");
        // The L2 clock could not be evaluated: traffic without a roof.
        assert_eq!(levels[1].unit, Unit::L2);
        assert_eq!(levels[1].bytes, 3e8);
        assert_eq!(levels[1].peak_bytes_per_s, None);
        // A set without the traffic (custom) has no levels.
        assert!(level_traffic(&values[1..3]).is_empty());
    }
}
