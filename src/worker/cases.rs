//! One case on the GPU: the student's kernel launched twice on the case's
//! inputs beside the oracle, graded, its failures rerun under changed
//! conditions to tell causes apart, and a failed launch told by its cause.

use std::time::Instant;

use cudarc::driver::CudaFunction;

use super::{failure, reference, Worker};
use crate::gpu::device::{Gpu, GpuError, Kernel};
use crate::grade::compare::{compare_scaled, rows_of, POISON_BITS};
use crate::grade::experiment::{Experiments, GuardSide};
use crate::grade::integrity::Integrity;
use crate::lab::definition::{CaseData, Graded, LabCase, LabRef};
use crate::lab::experiment::{self, Conditions, FirstRuns, Rerun};
use crate::lab::verdict::cause;
use crate::protocol::{CaseOutcome, CaseStatus, Event};

/// Most failing cases one worker reruns per loaded kernel to tell causes
/// apart: enough for every case of every shipped lab's check (18 at most),
/// few enough that a broken kernel costs seconds.
const MAX_PROBED_CASES: usize = 24;

/// A case whose first two launches took longer than this is not rerun: the
/// experiments must stay well inside the case's watchdog.
const PROBE_LAUNCH_BUDGET_MS: f64 = 400.0;

impl Worker {
    pub(super) fn run_case(&mut self, case: &LabCase, seed: u64) -> (Event, bool) {
        let started = Instant::now();
        let Some(lab) = self.lab else {
            return failure("running a case needs a GPU and a loaded kernel", false);
        };
        let inputs = match lab.generate(case, seed) {
            Ok(i) => i,
            Err(e) => return failure(e, false),
        };
        // A case too large for the CPU oracle's whole answer is graded
        // against the GPU float64 reference, which the CPU proves on rows.
        let sampled = (inputs.expected.is_none() && inputs.problem.oracle_sampled())
            .then(|| reference::sampled_rows(seed, inputs.problem.output.rows));
        if sampled.is_some() {
            if let Err(e) = self.baselines() {
                let why = format!("flashprof's float64 reference or starter did not load: {e}");
                return (Event::Case(ungraded(case, &inputs, why)), e.sticky);
            }
        }
        let (Some(gpu), Some(kernel)) = (&self.gpu, &self.student) else {
            return failure("running a case needs a GPU and a loaded kernel", false);
        };
        let oracle_f64 = sampled
            .as_ref()
            .and(self.baselines.as_ref())
            .map(|b| &b.oracle_f64);
        // The oracle needs only the inputs, so it runs on the CPU while the GPU works.
        let ((exact, oracle_ms), launched) = rayon::join(
            || {
                let started = Instant::now();
                let exact = match (&inputs.expected, &sampled) {
                    (Some(expected), _) => expected.clone(),
                    (None, rows) => lab.oracle(&inputs, rows.as_deref()),
                };
                (exact, started.elapsed().as_secs_f64() * 1e3)
            },
            || run_twice(gpu, lab, kernel, &inputs, oracle_f64),
        );
        let (reference, reference_check) = match (&sampled, &launched) {
            (Some(rows), Ok(runs)) => {
                let whole = runs.reference.clone().unwrap_or_default();
                let row_len = inputs.problem.output.heads * inputs.problem.output.dim;
                let proven = rows_of(&whole, rows, row_len);
                let check = reference::agreement(&exact, &proven, rows.len());
                if !check.agrees {
                    let why = format!(
                        "flashprof's GPU float64 reference disagrees with its CPU oracle on {} \
                         sampled rows (largest relative difference {:e})",
                        rows.len(),
                        check.max_rel_diff
                    );
                    return (Event::Case(ungraded(case, &inputs, why)), false);
                }
                (whole, Some(check))
            }
            _ => (exact, None),
        };
        let elapsed_ms = || started.elapsed().as_secs_f64() * 1e3;
        let mut outcome = CaseOutcome {
            oracle_ms,
            reference_check,
            ..CaseOutcome::unmeasured(
                &case.name,
                &case.summary,
                inputs.problem.clone(),
                CaseStatus::Crash,
                String::new(),
            )
        };
        match launched {
            Err(e) => {
                let (diagnosis, word) = crash_diagnosis(lab, &e);
                outcome.diagnosis = diagnosis;
                outcome.cause = Some(word.to_owned());
                let stray_read = e.name == "CUDA_ERROR_ILLEGAL_ADDRESS";
                if let Some(note) = lab.fault_note(&inputs).filter(|_| stray_read) {
                    outcome.diagnosis = format!("{}; {note}", outcome.diagnosis);
                }
                outcome.elapsed_ms = elapsed_ms();
                (Event::Case(outcome), e.sticky)
            }
            Ok(runs) => {
                let comparison = compare_scaled(
                    inputs.problem.output,
                    lab.tolerance(),
                    lab.tolerance_scales(&inputs).as_deref(),
                    &runs.first,
                    &reference,
                );
                outcome.status = if comparison.passed && runs.integrity.is_clean() {
                    CaseStatus::Pass
                } else {
                    CaseStatus::Fail
                };
                // A case graded on sampled rows is too large for the
                // experiments' whole CPU answers.
                let wants_probe = outcome.status == CaseStatus::Fail
                    && outcome.reference_check.is_none()
                    && self.probed_cases < MAX_PROBED_CASES
                    && runs.launch_ms < PROBE_LAUNCH_BUDGET_MS;
                let mut sticky = false;
                let experiments = if wants_probe {
                    self.probed_cases += 1;
                    let first = FirstRuns {
                        data: &inputs,
                        out: &runs.first,
                        reference: &reference,
                        comparison: &comparison,
                        runs_differ: runs.integrity.runs_differ,
                        second: runs.second.as_deref(),
                    };
                    let mut rerun = GpuRerun { gpu, lab, kernel };
                    match experiment::run(&*lab, &first, &mut rerun) {
                        Ok(found) => found,
                        Err(e) => {
                            // The experiment's own launch failed: report what the
                            // first runs showed, and restart if the context is gone.
                            sticky = e.sticky;
                            Experiments::default()
                        }
                    }
                } else {
                    Experiments::default()
                };
                let diagnosis = lab.diagnose(
                    &inputs,
                    &Graded {
                        launch: &kernel.geometry,
                        out: &runs.first,
                        reference: &reference,
                        comparison: &comparison,
                        integrity: &runs.integrity,
                        experiments: &experiments,
                    },
                );
                outcome.diagnosis = diagnosis.line;
                outcome.cause = diagnosis.cause.map(str::to_owned);
                outcome.candidates = diagnosis.candidates.iter().map(|c| c.to_string()).collect();
                outcome.experiments = Box::new(experiments);
                outcome.comparison = Some(comparison);
                outcome.integrity = Some(runs.integrity);
                outcome.elapsed_ms = elapsed_ms();
                (Event::Case(outcome), sticky)
            }
        }
    }
}

/// A case flashprof could not grade, through no fault of the kernel: not
/// run, saying why (a check with a case not run ends incomplete, not failed).
fn ungraded(case: &LabCase, inputs: &CaseData, why: String) -> CaseOutcome {
    CaseOutcome::unmeasured(
        &case.name,
        &case.summary,
        inputs.problem.clone(),
        CaseStatus::NotRun,
        format!("not graded: {why}; not the kernel's fault"),
    )
}

/// Reruns of a case on the GPU under changed conditions, each on a fresh workspace.
struct GpuRerun<'a> {
    gpu: &'a Gpu,
    lab: LabRef,
    kernel: &'a Kernel,
}

impl Rerun for GpuRerun<'_> {
    type Error = GpuError;

    fn rerun(&mut self, data: &CaseData, conditions: &Conditions) -> Result<Vec<f32>, GpuError> {
        let mut ws = self
            .gpu
            .workspace(self.lab, data, conditions.output_start)?;
        for &(index, side) in &conditions.finite_guards {
            let (before, after) = match side {
                GuardSide::Before => (true, false),
                GuardSide::After => (false, true),
                GuardSide::Both => (true, true),
            };
            self.gpu.refill_guards(&mut ws, index, before, after, 0.0)?;
        }
        if conditions.finite_scratch {
            self.gpu.refill_scratch(&mut ws, 0.0);
        }
        self.gpu.poison_output(&mut ws)?;
        self.gpu.launch(self.kernel, &mut ws)?;
        self.gpu.synchronize()?;
        Ok(self.gpu.read_output(&ws)?.output)
    }
}

/// Two launches on the same inputs, poisoned before each, with the integrity facts.
struct CaseRuns {
    first: Vec<f32>,
    /// The second run's output, kept only when it differs from the first.
    second: Option<Vec<f32>>,
    integrity: Integrity,
    /// Wall time of the two launches with their copies.
    launch_ms: f64,
    /// The float64 reference kernel's whole output on the same inputs, when asked for.
    reference: Option<Vec<f64>>,
}

/// The two launches, audited, then `oracle_f64`'s whole answer on the same
/// workspace when it is given.
fn run_twice(
    gpu: &Gpu,
    lab: LabRef,
    kernel: &Kernel,
    inputs: &CaseData,
    oracle_f64: Option<&CudaFunction>,
) -> Result<CaseRuns, GpuError> {
    let started = Instant::now();
    let mut ws = gpu.workspace(lab, inputs, POISON_BITS)?;
    let mut outputs = Vec::with_capacity(2);
    let mut out_of_bounds_writes = 0;
    for _ in 0..2 {
        gpu.poison_output(&mut ws)?;
        gpu.launch(kernel, &mut ws)?;
        gpu.synchronize()?;
        let result = gpu.read_output(&ws)?;
        out_of_bounds_writes = out_of_bounds_writes.max(result.out_of_bounds_writes);
        outputs.push(result.output);
    }
    let second = outputs.pop().unwrap_or_default();
    let first = outputs.pop().unwrap_or_default();
    let runs_differ = first
        .iter()
        .zip(&second)
        .any(|(a, b)| a.to_bits() != b.to_bits());
    let launch_ms = started.elapsed().as_secs_f64() * 1e3;
    let inputs_modified = gpu.modified_inputs(&ws)?;
    // The reference reads the inputs as generated: a kernel that wrote into
    // them is judged on its own output, against an answer it cannot move.
    let reference = match oracle_f64 {
        Some(oracle) if inputs_modified.is_empty() => Some(gpu.reference_f64(oracle, &ws, None)?),
        Some(oracle) => {
            let pristine = gpu.workspace(lab, inputs, POISON_BITS)?;
            Some(gpu.reference_f64(oracle, &pristine, None)?)
        }
        None => None,
    };
    Ok(CaseRuns {
        launch_ms,
        second: runs_differ.then_some(second),
        first,
        integrity: Integrity {
            out_of_bounds_writes,
            inputs_modified,
            runs_differ,
        },
        reference,
    })
}

/// What a failed launch says, and its cause word.
fn crash_diagnosis(lab: LabRef, error: &GpuError) -> (String, &'static str) {
    let pointers: Vec<&str> = lab
        .abi()
        .args
        .iter()
        .filter(|arg| arg.kind.is_pointer())
        .map(|arg| arg.name)
        .collect();
    let buffers = match pointers.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "a buffer".to_owned(),
    };
    match error.name.as_str() {
        "CUDA_ERROR_ILLEGAL_ADDRESS" => (
            format!("the kernel accessed an illegal address ({error}): an index far outside {buffers}"),
            cause::ILLEGAL_ADDRESS,
        ),
        "CUDA_ERROR_MISALIGNED_ADDRESS" => (
            format!("misaligned memory access ({error}): check vector loads"),
            cause::MISALIGNED_ADDRESS,
        ),
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" => (
            format!(
                "the launch asked for more threads, registers or shared memory than a block of this kernel may have ({error})"
            ),
            cause::TOO_MANY_RESOURCES,
        ),
        "CUDA_ERROR_INVALID_VALUE" => (
            format!("the launch was refused ({error}): check the declared threads and dynamic shared memory"),
            cause::LAUNCH_REFUSED,
        ),
        _ if error.out_of_memory => (
            format!("the GPU ran out of memory ({error})"),
            cause::OUT_OF_MEMORY,
        ),
        _ => (format!("the kernel failed: {error}"), cause::KERNEL_FAILED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::registry;

    fn failed(name: &str, out_of_memory: bool) -> GpuError {
        GpuError {
            call: "cuStreamSynchronize",
            name: name.to_owned(),
            sticky: true,
            out_of_memory,
        }
    }

    #[test]
    fn every_failed_launch_has_a_cause_word_and_names_the_labs_buffers() {
        let lab = LabRef(registry::find("paged-prefill-fp8").expect("a shipped lab"));
        let (line, word) = crash_diagnosis(lab, &failed("CUDA_ERROR_ILLEGAL_ADDRESS", false));
        assert_eq!(word, cause::ILLEGAL_ADDRESS);
        assert!(line.contains("kCache, vCache"), "{line}");
        let words: Vec<&str> = [
            ("CUDA_ERROR_MISALIGNED_ADDRESS", false),
            ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", false),
            ("CUDA_ERROR_INVALID_VALUE", false),
            ("CUDA_ERROR_OUT_OF_MEMORY", true),
            ("CUDA_ERROR_LAUNCH_FAILED", false),
        ]
        .into_iter()
        .map(|(name, oom)| crash_diagnosis(lab, &failed(name, oom)).1)
        .collect();
        assert_eq!(
            words,
            [
                cause::MISALIGNED_ADDRESS,
                cause::TOO_MANY_RESOURCES,
                cause::LAUNCH_REFUSED,
                cause::OUT_OF_MEMORY,
                cause::KERNEL_FAILED
            ]
        );
    }
}
