//! The line profile inside a worker (docs/LINE-PROFILE.md): the student's
//! kernel on the timing inputs, once unprofiled, then once under PC
//! Sampling and once under SASS Metrics (both in one request, or each in
//! a request of its own), each profiled launch prepared and audited as a
//! timed one is (fresh inputs, poisoned output, L2 evicted; its output
//! checked after). A launch that did not compute its output gives no
//! profile. The caller starts a worker of its own for this, so the code
//! SASS Metrics patches and the launches PC Sampling serialises never touch
//! a worker that times.

use std::time::Instant;

use super::drawn::DrawnInputs;
use super::timing::{upload, Bench};
use super::Baselines;
use crate::gpu::cupti::lines::LineSampler;
use crate::gpu::cupti::{Cupti, CuptiError};
use crate::gpu::device::{Gpu, GpuError, Kernel, Workspace};
use crate::grade::launch_audit::{LaunchAudit, LaunchId, LaunchPhase};
use crate::grade::lines::merge;
use crate::lab::definition::{CaseData, LabCase, LabRef};
use crate::protocol::{LineSteps, LinesOutcome, WireCase};

/// Set (to anything) in a line worker's environment, it launches the kernel
/// once on the profile's inputs and collects nothing, so that Nsight
/// Compute, attached from outside, profiles the very launch flashprof would
/// (scripts/gpu-lines.sh compares the two).
pub const LAUNCH_ONLY_ENV: &str = "FLASHPROF_LINES_LAUNCH_ONLY";

/// Whether [`LAUNCH_ONLY_ENV`] is set.
pub fn launch_only() -> bool {
    std::env::var_os(LAUNCH_ONLY_ENV).is_some()
}

/// The launch a profile samples, made once with no collector: the inputs
/// of the profile's unprofiled launch. Answers why there is no profile.
pub fn launch_once(
    gpu: &Gpu,
    kernel: &Kernel,
    baselines: &mut Baselines,
    data: &CaseData,
) -> Result<String, GpuError> {
    let bench = Bench::new(gpu, baselines, data, rand::random(), true)?;
    let (_, ms) = first_launch(gpu, kernel, bench)?;
    Ok(no_collector(Some(ms)))
}

/// `bench` after its unprofiled launch on the checked launch's inputs
/// (module loading and first touch stay out of the profiled ones), and
/// that launch's time in milliseconds.
fn first_launch<'a>(
    gpu: &'a Gpu,
    kernel: &Kernel,
    mut bench: Bench<'a>,
) -> Result<(Bench<'a>, f64), GpuError> {
    bench.prepare_copy()?;
    let ms = gpu.timed(|| gpu.launch(kernel, &mut bench.ws))?;
    Ok((bench, ms))
}

/// Why a launch-only worker gives no profile, and the launch it made.
pub fn no_collector(launch_ms: Option<f64>) -> String {
    let launched = launch_ms.map_or_else(
        || "nothing was launched".to_owned(),
        |ms| format!("the kernel was launched once, {ms:.3} ms"),
    );
    format!("no collector ({LAUNCH_ONLY_ENV} is set): {launched}")
}

/// PC Sampling's period is 2^this many cycles at least, and at most
/// [`LONGEST_PERIOD_LOG2`] (the range CUPTI accepts is 5 to 31).
const SHORTEST_PERIOD_LOG2: u32 = 5;
const LONGEST_PERIOD_LOG2: u32 = 24;

/// Room for this many sampled PCs (a kernel of 16k instructions).
const MAX_PCS: usize = 16 * 1024;

/// The sampling period, as a power of two of cycles, for a launch of
/// `launch_ms`: about fifty thousand samples, what the H100 took every
/// 2^10 cycles of a 0.26 ms launch (the spike: 510k samples at 2^7), so
/// reading them stays a small part of a save's half second.
pub fn period_log2_for(launch_ms: f64) -> u32 {
    let scaled = 7.0 + (launch_ms.max(1e-3) * 39.2).log2();
    (scaled.round() as i64).clamp(
        i64::from(SHORTEST_PERIOD_LOG2),
        i64::from(LONGEST_PERIOD_LOG2),
    ) as u32
}

/// Why there is no line profile, in words: when the machine is at fault
/// (counter permission, another profiler attached, a GPU without sampling)
/// the reason and its fix, as the counters give them.
fn why_not(error: &CuptiError) -> String {
    match error.unavailable() {
        Some(unavailable) => format!(
            "{} ({}); fix: {}",
            unavailable.reason,
            unavailable.detail,
            unavailable.fix()
        ),
        None => error.to_string(),
    }
}

/// A collection around one launch (the closure given launches and waits).
type Collect<'a> = dyn FnMut(&mut dyn FnMut() -> anyhow::Result<()>) -> Result<(), CuptiError> + 'a;

/// CUPTI's two line APIs, set up on the worker's first line request.
pub struct LineProfiler {
    // Dropped before the library it came from.
    sampler: LineSampler,
    _cupti: Cupti,
}

/// A line profile's inputs, kept by the worker from when it was readied
/// ahead of its profile (`Request::PrepareLines`): the timing inputs (a
/// paged lab's take seconds to make on the CPU) and the workspace uploaded
/// from them, which every profile of this worker runs on (uploading a
/// paged lab's cache cost as much as its sampled launch).
pub struct Prepared {
    made_for: (WireCase, u64),
    pub data: CaseData,
    workspace: Option<Workspace>,
}

pub type KeptInputs = Option<Prepared>;

/// The timing inputs of `case` at `seed`: the kept ones when they are
/// those, else taken from `drawn` (and kept, with no workspace yet).
pub fn inputs<'k>(
    kept: &'k mut KeptInputs,
    drawn: &mut DrawnInputs,
    lab: LabRef,
    case: &LabCase,
    seed: u64,
) -> Result<&'k mut Prepared, GpuError> {
    let key = (WireCase::from(case), seed);
    if kept
        .as_ref()
        .is_none_or(|prepared| prepared.made_for != key)
    {
        *kept = Some(Prepared {
            data: drawn.get(lab, case, seed)?,
            made_for: key,
            workspace: None,
        });
    }
    Ok(kept.as_mut().expect("kept just above"))
}

impl Prepared {
    /// Uploads the inputs, unless they are already.
    pub fn upload(&mut self, gpu: &Gpu, lab: LabRef) -> Result<(), GpuError> {
        if self.workspace.is_none() {
            self.workspace = Some(upload(gpu, lab, &self.data)?);
        }
        Ok(())
    }
}

impl LineProfiler {
    pub fn enable(gpu: &Gpu) -> Result<Self, String> {
        let cupti = Cupti::load().map_err(|e| why_not(&CuptiError::Unavailable(e)))?;
        let sampler = LineSampler::enable(&cupti, gpu.context()).map_err(|e| why_not(&e))?;
        Ok(Self {
            sampler,
            _cupti: cupti,
        })
    }

    /// Samples, counts, or both (`steps`), `kernel`'s `entry` on the
    /// prepared timing inputs, on their workspace (uploaded here when it
    /// is not yet, and kept for the next request).
    pub fn collect(
        &mut self,
        gpu: &Gpu,
        kernel: &Kernel,
        entry: &str,
        baselines: &mut Baselines,
        prepared: &mut Prepared,
        steps: LineSteps,
    ) -> Result<LinesOutcome, GpuError> {
        let lab = baselines.lab;
        let Prepared {
            data, workspace, ..
        } = prepared;
        let mut audit = LaunchAudit::new(data.problem.output, lab.tolerance());
        let (bench, uploaded_here) = match workspace.take() {
            Some(ws) => {
                let bench = Bench::on_workspace(gpu, baselines, data, ws, rand::random(), true);
                (bench, false)
            }
            None => (
                Bench::new(gpu, baselines, data, rand::random(), true)?,
                true,
            ),
        };
        // The unprofiled launch's time sets the sampling period, and keeps
        // module loading and first touch out of the profiled launches; the
        // counts of a profile sampled here on this workspace need neither.
        let (mut bench, plain_launch_ms) = match steps.samples() || uploaded_here {
            true => first_launch(gpu, kernel, bench)?,
            false => (bench, 0.0),
        };
        let period_log2 = period_log2_for(plain_launch_ms);
        let mut outcome = LinesOutcome {
            chip: self.sampler.chip().to_owned(),
            function: entry.to_owned(),
            readings: Vec::new(),
            total_samples: 0,
            dropped_samples: 0,
            period_log2,
            plain_launch_ms,
            sample_ms: 0.0,
            count_ms: 0.0,
            setup_ms: 0.0,
            worker_ms: 0.0,
            refused: None,
            starter_image: Vec::new(),
        };
        // A profile's two launches are numbered as one profile's, whether
        // one request or two makes them.
        let launch_id = |number| LaunchId {
            phase: LaunchPhase::Profiled,
            number,
            of: 2,
        };

        let sampler = &mut self.sampler;
        // One profiled launch: fresh inputs, `collect` around the launch,
        // then the audit; its time and, when the audit failed, why.
        let mut profiled =
            |number, collect: &mut Collect<'_>| -> Result<(f64, Option<String>), GpuError> {
                bench.prepare_next()?;
                let started = Instant::now();
                let ws = &mut bench.ws;
                collect(&mut || {
                    gpu.launch(kernel, ws)?;
                    gpu.synchronize()?;
                    Ok(())
                })
                .map_err(|e| GpuError::message(why_not(&e)))?;
                let ms = started.elapsed().as_secs_f64() * 1e3;
                let refused = bench
                    .audit(&mut audit, launch_id(number))?
                    .err()
                    .map(|finding| format!("not this kernel's profile: {finding}"));
                Ok((ms, refused))
            };
        let mut sampled = None;
        if steps.samples() {
            (outcome.sample_ms, outcome.refused) = profiled(1, &mut |launch| {
                sampled = Some(sampler.sample(entry, period_log2, MAX_PCS, launch)?);
                Ok(())
            })?;
            if outcome.refused.is_some() {
                return Ok(outcome);
            }
        }
        let mut counted = Vec::new();
        if steps.counts() {
            (outcome.count_ms, outcome.refused) = profiled(2, &mut |launch| {
                counted = sampler.count(entry, launch)?;
                Ok(())
            })?;
            if outcome.refused.is_some() {
                return Ok(outcome);
            }
        }
        *workspace = Some(bench.into_workspace());
        let samples = sampled.map_or_else(Vec::new, |sampled| {
            outcome.total_samples = sampled.total_samples;
            outcome.dropped_samples = sampled.dropped_samples;
            sampled.readings
        });
        outcome.readings = merge(samples, counted);
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_grows_with_the_launch_and_stays_in_cupti_s_range() {
        // The spike's launch: 2^10 cycles gives about fifty thousand samples.
        assert_eq!(period_log2_for(0.26), 10);
        assert_eq!(period_log2_for(0.52), 11);
        assert_eq!(period_log2_for(1.6), 13);
        assert_eq!(period_log2_for(0.0), SHORTEST_PERIOD_LOG2);
        assert_eq!(period_log2_for(1e9), LONGEST_PERIOD_LOG2);
    }
}
